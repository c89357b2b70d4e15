/*
 * worker_axis.c — "axis": "auto" on an engine thread: the rotation axis of
 * a scan found from pairs of opposed projections (rtomo_fbp_find_axis),
 * as soon as the pairs are in.
 *
 * Until then the projections are filtered as they arrive (the filter does
 * not depend on the axis) but not yet added into the resident slices: a
 * slice made at a wrong axis would have to be made again.  When the axis
 * is found it is set on the plan and every projection held so far goes
 * into the slices; the GPU catches up while the rest of the scan arrives.
 * A scan that ends before its pairs are complete keeps the axis it began
 * with (the detector's centre), and the loop hears why.
 *
 * A continuous stream turns on and on, and its axis may drift (thermal
 * drift of the stage, a sample settling).  Projection i and i + n (n the
 * window, half a turn) are opposed, so every `axis_every` projections
 * the axis is measured again at a window's end L from the pairs (L - n -
 * j, L - j), j < RTOMOD_AXIS_PAIRS; the line integrals of just the
 * projections such pairs will need are kept as they arrive.  A change of
 * more than the tolerance moves the window to the new axis: its slices
 * are recomputed from the filtered projections it holds
 * (rtomo_fbp_window_set_axis), since a projection added at one axis and
 * subtracted at another would leave a residue.  Every measurement goes
 * to the loop as drift telemetry.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rtomod_log.h"
#include "worker_internal.h"

/* The line integrals of one projection, kept for a later pair. */
typedef struct axis_lines_kept {
    int64_t index;
    int64_t expires;            /* no window at or after this needs it */
    float *lines;               /* n_axis_rows x det_width */
} axis_lines_kept;

void axis_free(plan_state *s)
{
    for (int i = 0; i < RTOMOD_AXIS_PAIRS; i++)
        for (int k = 0; k < 2; k++)
            free(s->axis_lines[i][k]);
    free(s->held);
    s->held = NULL;
    for (int i = 0; i < s->n_track; i++)
        free(s->track[i].lines);
    free(s->track);
    s->track = NULL;
    s->n_track = s->track_capacity = 0;
}

/* Rows spread evenly over the kept ones: structure from the whole height
 * of the sample. */
static void choose_axis_rows(plan_state *s, const rtomo_fbp_geometry *g)
{
    s->n_axis_rows = g->row_count < RTOMOD_AXIS_ROWS ? g->row_count
                                                     : RTOMOD_AXIS_ROWS;
    for (int i = 0; i < s->n_axis_rows; i++)
        s->axis_rows[i] = g->row_first +
                          (int)((long)g->row_count * (2 * i + 1) /
                                (2 * s->n_axis_rows));
}

/* Continuous: a window's projections, and room for the line integrals
 * of the measurements that are due within one window's time (two
 * projections per pair, each kept for at most a window and a pair). */
static int track_begin(plan_state *s, const rtomod_tomo_begin_job *b)
{
    const int64_t n = b->geometry.window_proj;
    s->track_every = b->axis_every;
    s->track_tolerance = b->axis_tolerance;
    s->track_capacity = (int)(2 * RTOMOD_AXIS_PAIRS *
                              ((n + RTOMOD_AXIS_PAIRS) / b->axis_every + 2));
    s->track = calloc((size_t)s->track_capacity, sizeof *s->track);
    return s->track ? 0 : -1;
}

int axis_begin(plan_state *s, const rtomod_tomo_begin_job *b)
{
    if (b->n_axis_pairs == 0 && b->axis_every == 0)
        return 0;
    const rtomo_fbp_geometry *g = rtomo_fbp_geometry_of(s->fbp);
    choose_axis_rows(s, g);
    if (b->axis_every > 0)
        return track_begin(s, b);
    if (!(s->held = calloc((size_t)g->n_proj, 1)))
        return -1;
    memcpy(s->axis_pairs, b->axis_pairs, sizeof s->axis_pairs);
    s->n_axis_pairs = b->n_axis_pairs;
    s->axis_pending = 1;
    return 0;
}

/* Queue every held projection into the resident slices. */
static void release_held(rtomod_worker *w, plan_state *s, uint64_t serial)
{
    const rtomo_fbp_geometry *g = rtomo_fbp_geometry_of(s->fbp);
    rtomo_error err;
    s->axis_pending = 0;
    for (int p = 0; p < g->n_proj && s->streaming; p++) {
        if (!s->held[p])
            continue;
        s->held[p] = 0;
        if (rtomo_fbp_stream_queue(s->fbp, p, 1.0f, &err) != RTOMO_OK) {
            engine_failed(w, s, serial, "resident slices", &err);
            return;
        }
    }
}

/* The pairs are complete: find the axis and set it. */
static void find_and_set(rtomod_worker *w, plan_state *s, uint64_t serial)
{
    const float *first[RTOMOD_AXIS_PAIRS], *opposed[RTOMOD_AXIS_PAIRS];
    for (int i = 0; i < s->n_axis_pairs; i++) {
        first[i] = s->axis_lines[i][0];
        opposed[i] = s->axis_lines[i][1];
    }
    const rtomo_fbp_geometry *g = rtomo_fbp_geometry_of(s->fbp);
    double axis, quality;
    rtomo_error err;
    if (rtomo_fbp_find_axis(first, opposed, s->n_axis_pairs, s->n_axis_rows,
                            g->det_width, &axis, &quality, &err) != RTOMO_OK ||
        rtomo_fbp_set_axis(s->fbp, axis, &err) != RTOMO_OK) {
        char message[2 * RTOMO_REASON_MAX];
        snprintf(message, sizeof message, "scan %s: the rotation axis could "
                 "not be found (%s); reconstructing at axis %.3f", s->scan,
                 err.message, g->axis);
        post_error(w, serial, 0, "axis_not_found", message);
    } else {
        log_info("worker %d: scan %s: rotation axis %.3f (quality %.3f)",
                 w->index, s->scan, axis, quality);
        post_axis(w, serial, axis, quality, -1, 1);
    }
    release_held(w, s, serial);
}

void axis_frame(rtomod_worker *w, plan_state *s, const rtomod_job *job)
{
    const rtomo_fbp_geometry *g = rtomo_fbp_geometry_of(s->fbp);
    const int index = (int)job->index;
    s->held[index] = 1;
    int complete = 1;
    for (int i = 0; i < s->n_axis_pairs; i++)
        for (int k = 0; k < 2; k++) {
            if (s->axis_pairs[i][k] == index && !s->axis_lines[i][k]) {
                float *lines = malloc(sizeof(float) * (size_t)s->n_axis_rows *
                                      (size_t)g->det_width);
                rtomo_error err;
                if (lines &&
                    rtomo_fbp_line_integrals(s->fbp,
                                             zmq_msg_data((zmq_msg_t *)&job->payload),
                                             job->dtype, s->axis_rows,
                                             s->n_axis_rows, lines, &err) !=
                        RTOMO_OK) {
                    free(lines);
                    lines = NULL;
                }
                s->axis_lines[i][k] = lines;
            }
            complete &= s->axis_lines[i][k] != NULL;
        }
    if (complete)
        find_and_set(w, s, job->serial);
}

void axis_give_up(rtomod_worker *w, plan_state *s, uint64_t serial)
{
    if (!s->axis_pending)
        return;
    char message[2 * RTOMO_REASON_MAX];
    snprintf(message, sizeof message, "scan %s ended before its opposed "
             "projections for \"axis\": \"auto\" came; reconstructing at "
             "axis %.3f", s->scan, rtomo_fbp_geometry_of(s->fbp)->axis);
    post_error(w, serial, 0, "axis_not_found", message);
    release_held(w, s, serial);
}

/* ------------------------------------------- continuous: drift tracking ---- */

/* (a - b) mod m in [0, m). */
static int64_t mod_floor(int64_t a, int64_t m)
{
    int64_t r = a % m;
    return r < 0 ? r + m : r;
}

/* When the last window that pairs projection `index` ends (-1: none
 * does).  Measurements are at windows ending at L = n - 1 + k M; pairs
 * (L - n - j, L - j), j < P.  So the later of a pair sits within P - 1
 * projections before such an L, the earlier one within P - 1 before L -
 * n. */
static int64_t track_expiry(const plan_state *s, int64_t index)
{
    const int64_t n = rtomo_fbp_geometry_of(s->fbp)->window_proj;
    const int64_t m = s->track_every, p = RTOMOD_AXIS_PAIRS;
    int64_t expires = -1;
    /* index = L - j: L = index + j for the j that makes it a window end. */
    int64_t j = mod_floor(n - 1 - index, m);
    if (j < p && index + j >= n - 1 + m)
        expires = index + j;
    /* index = L - n - j: the same with index + n. */
    j = mod_floor(-1 - index, m);
    if (j < p && index >= 0 && index + n + j >= n - 1 + m &&
        index + n + j > expires)
        expires = index + n + j;
    return expires;
}

void axis_track_frame(rtomod_worker *w, plan_state *s, const rtomod_job *job)
{
    (void)w;
    int64_t expires = track_expiry(s, job->index);
    if (expires < 0 || s->n_track == s->track_capacity)
        return;
    const rtomo_fbp_geometry *g = rtomo_fbp_geometry_of(s->fbp);
    float *lines = malloc(sizeof(float) * (size_t)s->n_axis_rows *
                          (size_t)g->det_width);
    rtomo_error err;
    if (!lines ||
        rtomo_fbp_line_integrals(s->fbp, zmq_msg_data((zmq_msg_t *)&job->payload),
                                 job->dtype, s->axis_rows, s->n_axis_rows,
                                 lines, &err) != RTOMO_OK) {
        free(lines);            /* that pair is left out of its measurement */
        return;
    }
    s->track[s->n_track++] = (axis_lines_kept){job->index, expires, lines};
}

static const float *kept_lines(const plan_state *s, int64_t index)
{
    for (int i = 0; i < s->n_track; i++)
        if (s->track[i].index == index)
            return s->track[i].lines;
    return NULL;
}

/* Forget what no window from `next` on needs. */
static void track_prune(plan_state *s, int64_t next)
{
    int kept = 0;
    for (int i = 0; i < s->n_track; i++) {
        if (s->track[i].expires < next)
            free(s->track[i].lines);
        else
            s->track[kept++] = s->track[i];
    }
    s->n_track = kept;
}

/* Measure at the window ending with projection `last` from its pairs;
 * move the window when the axis changed beyond the tolerance. */
static void track_measure(rtomod_worker *w, plan_state *s, uint64_t serial,
                          int64_t window, int64_t last)
{
    const rtomo_fbp_geometry *g = rtomo_fbp_geometry_of(s->fbp);
    const int64_t n = g->window_proj;
    const float *first[RTOMOD_AXIS_PAIRS], *opposed[RTOMOD_AXIS_PAIRS];
    int pairs = 0;
    for (int j = 0; j < RTOMOD_AXIS_PAIRS; j++) {
        const float *a = kept_lines(s, last - n - j);
        const float *b = kept_lines(s, last - j);
        if (a && b) {
            first[pairs] = a;
            opposed[pairs++] = b;
        }
    }
    double axis, quality;
    rtomo_error err;
    if (pairs == 0 ||
        rtomo_fbp_find_axis(first, opposed, pairs, s->n_axis_rows,
                            g->det_width, &axis, &quality, &err) != RTOMO_OK) {
        log_debug("worker %d: scan %s: no axis at window %lld (%s)",
                  w->index, s->scan, (long long)window,
                  pairs ? err.message : "its pairs did not arrive");
        return;
    }
    int applied = fabs(axis - g->axis) > s->track_tolerance;
    if (applied && rtomo_fbp_window_set_axis(s->window, axis, &err) !=
                       RTOMO_OK) {
        engine_failed(w, s, serial, "moving the window to a new axis", &err);
        return;
    }
    post_axis(w, serial, axis, quality, window, applied);
}

void axis_track_window(rtomod_worker *w, plan_state *s, const rtomod_job *job)
{
    const rtomod_tomo_reconstruct_job *rc = &job->u.recon;
    const int64_t n = rtomo_fbp_geometry_of(s->fbp)->window_proj;
    const int64_t last = rc->projection_last;
    if (!s->track_every || !s->window || last < n - 1 + s->track_every)
        return;
    if (mod_floor(last - (n - 1), s->track_every) == 0)
        track_measure(w, s, job->serial, rc->frame, last);
    track_prune(s, last + 1);
}
