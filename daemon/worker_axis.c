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
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rtomod_log.h"
#include "worker_internal.h"

void axis_free(plan_state *s)
{
    for (int i = 0; i < RTOMOD_AXIS_PAIRS; i++)
        for (int k = 0; k < 2; k++)
            free(s->axis_lines[i][k]);
    free(s->held);
    s->held = NULL;
}

int axis_begin(plan_state *s, const rtomod_tomo_begin_job *b)
{
    if (b->n_axis_pairs == 0)
        return 0;
    const rtomo_fbp_geometry *g = rtomo_fbp_geometry_of(s->fbp);
    if (!(s->held = calloc((size_t)g->n_proj, 1)))
        return -1;
    memcpy(s->axis_pairs, b->axis_pairs, sizeof s->axis_pairs);
    s->n_axis_pairs = b->n_axis_pairs;
    /* Rows spread evenly over the kept ones: structure from the whole
     * height of the sample. */
    s->n_axis_rows = g->row_count < RTOMOD_AXIS_ROWS ? g->row_count
                                                     : RTOMOD_AXIS_ROWS;
    for (int i = 0; i < s->n_axis_rows; i++)
        s->axis_rows[i] = g->row_first +
                          (int)((long)g->row_count * (2 * i + 1) /
                                (2 * s->n_axis_rows));
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
        post_axis(w, serial, axis, quality);
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
