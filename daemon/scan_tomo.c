/*
 * scan_tomo.c — tomography scans in rtomod: scan_begin creates FBP plans on
 * the workers, darks/flats/projections are checked against the scan and fed
 * to the plans as they arrive (so normalisation and filtering overlap the
 * acquisition), and scan_end starts the back-projection of the selected
 * slices, published batch by batch as they are done.
 *
 * With several workers (one per GPU) the selected detector rows are split
 * into contiguous parts, one per worker; every projection goes to every
 * worker (ZeroMQ shares the message, no copy) and each filters only its own
 * rows.
 *
 * Slices are chosen when the scan begins (its own "slices", else the
 * configuration's): the plans keep only the rows between the first and the
 * last chosen one.  A later set_config of the slices or ROI applies at the
 * reconstruction, limited to the rows the plans kept.
 *
 * Several daemons may share one stream (fanned out by the sender), each
 * taking the rows of reconstruction.rows: a daemon keeps and reconstructs
 * only the selected slices in its range and leaves the others, without a
 * word, to the other daemons.  Slices keep their position in the whole
 * selection (index, count), so that the sets merge.
 *
 * Continuous mode ("mode": "continuous", "every": K): projection i goes to
 * engine slot i mod n_proj, where it replaces the projection of the
 * previous turn, and is filtered once, on arrival.  Window w is the set of
 * the n_proj most recent projections when the projection completing it
 * arrives: the first one with index >= n_proj - 1 + w K.  That arrival
 * queues a RECONSTRUCT job behind the projection on every worker; as a
 * worker takes its jobs in order, the window reads exactly the projections
 * that arrived before it, and later projections wait in the queue instead
 * of overwriting slots the window is reading.  Windows start once n_proj
 * projections have arrived.  A window is skipped (and reported with a
 * "window_skipped" event, never silently) when reconstruction.window_backlog
 * windows are still waiting, or when the projection completing it never
 * came (a later window's projection came first).  Projections are never
 * dropped: when the workers fall behind, back-pressure slows the sender.
 * scan_end ends the stream without a final window.
 */
#include "config.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rtomod.h"
#include "rtomod_frame_rows.h"
#include "rtomod_finisher.h"

/* Darks and flats: duplicates are recognised among this many indices. */
#define FIELD_INDEX_WINDOW 4096

/* A plane whose parts (one per worker holding rows) are being summed. */
typedef struct plane_sum {
    struct plane_sum *next;
    int64_t frame;                  /* window, or -1 */
    int index;                      /* plane number */
    int remaining;                  /* parts still to come */
    rtomod_result image;            /* the sum so far: header, own buffer */
} plane_sum;

/* A window queued on the workers, waiting for their parts. */
typedef struct pending_window {
    struct pending_window *next;
    int64_t window;
    int parts;                      /* SET_DONE results still expected */
    double t_input;                 /* arrival of its last projection */
    long frames;                    /* the scan's frames when it was queued */
} pending_window;

/* What a reconstruction publishes beside the slices: the window and its
 * projections (continuous), or frame -1 for a plain scan. */
typedef struct set_info {
    int64_t frame;
    int64_t projection_first, projection_last;
    double angle_first, angle_last;     /* degrees */
    double t_input;                     /* latency reference */
    int close_plan;
} set_info;

struct rtomod_tomo_scan {
    rtomo_scan_spec *spec;          /* owned */
    rtomod_seen projections, darks, flats;
    rtomod_seen flats_after;        /* indices n_flats.. of flats after the
                                       projections (scan_begin flats_after) */
    int projections_started;
    int projection_since_fields;    /* continuous: a projection came after
                                       the last dark or flat */
    long field_sets;                /* continuous: sets of darks and flats
                                       taken after the first projection */
    int *rows;                      /* the rows chosen at begin, ascending */
    int n_rows;
    /* Kept rows of each worker's plan: [kept_first, kept_last], or
     * kept_first = -1 when the worker got no rows. */
    int kept_first[RTOMO_MAX_DEVICES], kept_last[RTOMO_MAX_DEVICES];
    /* Each worker's part of the chosen rows: rows[part_first ..
     * part_first + part_count), of which the first resident[w] are kept
     * resident (streaming). */
    int part_first[RTOMO_MAX_DEVICES], part_count[RTOMO_MAX_DEVICES];
    int resident[RTOMO_MAX_DEVICES];
    /* "axis": "auto": the opposed pairs it is found from, and the axis
     * found (NaN until then). */
    int axis_pairs[RTOMOD_AXIS_PAIRS][2], n_axis_pairs;
    double axis_found, axis_quality;
    /* Continuous "axis": "auto": measured every axis_every projections;
     * the first measurement (drift is counted from it) and how many. */
    int64_t axis_every;
    double axis_first;
    long axis_measured;
    /* reconstruction.method as composed (worker_iter.c solves). */
    rtomo_method_settings method;
    /* Phase retrieval and ring removal as composed for the plans. */
    rtomo_fbp_phase phase;
    rtomo_rings rings;
    int rings_width;
    rtomo_fov field_of_view;        /* as composed, for status */
    plane_sum *plane_sums;          /* planes being summed, several workers */
    /* Continuous mode. */
    int64_t *slot_index;            /* projection in each slot, -1 = none */
    double *slot_angle;             /* its angle, radians */
    double angle_start, angle_step; /* radians: the default angles */
    int windows_started;            /* n_proj projections have arrived */
    int64_t next_window;            /* the next window to reconstruct */
    pending_window *pending;        /* queued windows, oldest first */
    int n_pending;
    long windows, windows_skipped;  /* published, skipped */
    long frames_used;               /* frames in published windows */
};

void rtomod_tomo_free(rtomod_tomo_scan *t)
{
    if (!t)
        return;
    if (t->spec) {
        rtomo_scan_spec_clear(t->spec);
        free(t->spec);
    }
    rtomod_seen_free(&t->projections);
    rtomod_seen_free(&t->darks);
    rtomod_seen_free(&t->flats);
    rtomod_seen_free(&t->flats_after);
    free(t->rows);
    free(t->slot_index);
    free(t->slot_angle);
    while (t->pending) {
        pending_window *next = t->pending->next;
        free(t->pending);
        t->pending = next;
    }
    while (t->plane_sums) {
        plane_sum *next = t->plane_sums->next;
        rtomod_buffer_unref(t->plane_sums->image.buffer);
        free(t->plane_sums);
        t->plane_sums = next;
    }
    free(t);
}

/* ------------------------------------------------------------ begin ---- */

static int compare_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* Sort and remove repeated rows; returns the new count. */
static int sort_unique(int *rows, int n)
{
    qsort(rows, (size_t)n, sizeof *rows, compare_int);
    int m = 0;
    for (int i = 0; i < n; i++)
        if (m == 0 || rows[m - 1] != rows[i])
            rows[m++] = rows[i];
    return m;
}

/* The scan's slice selection, else the configuration's, as sorted rows.
 * Returns 0, or -1 with *why filled. */
static int choose_rows(const rtomod *d, const rtomo_scan_spec *spec,
                       int **rows, int *n, rtomo_reject_info *why)
{
    const rtomo_slice_selection *sel =
        spec->given & RTOMO_SPEC_HAS_SLICES ? &spec->slices
                                            : &d->cfg.reconstruction.slices;
    if (rtomo_slice_selection_expand(sel, spec->geometry.det_height, rows, n,
                                     why) != 0)
        return -1;
    *n = sort_unique(*rows, *n);
    if (*n == 0)
        return rtomo_reject_set(why, RTOMO_REJECT_FIELD,
                                "the slice selection is empty");
    return 0;
}

/* Phase retrieval and ring removal: the scan's values where it gave
 * them (each of phase's four numbers on its own: a beamline configures
 * energy, distance and pixel size, a scan names its material's
 * delta/beta), the configuration's elsewhere. */
static void compose_processing(const rtomod_config *cfg,
                               const rtomo_scan_spec *spec,
                               rtomo_fbp_geometry *g)
{
    const rtomo_fbp_phase *dflt = &cfg->reconstruction.phase;
    const unsigned has = spec->given;
    if (!(has & RTOMO_SPEC_HAS_PHASE_DELTA_BETA))
        g->phase.delta_beta = dflt->delta_beta;
    if (!(has & RTOMO_SPEC_HAS_PHASE_ENERGY))
        g->phase.energy_kev = dflt->energy_kev;
    if (!(has & RTOMO_SPEC_HAS_PHASE_DISTANCE))
        g->phase.distance_m = dflt->distance_m;
    if (!(has & RTOMO_SPEC_HAS_PHASE_PIXEL))
        g->phase.pixel_m = dflt->pixel_m;
    if (!(has & RTOMO_SPEC_HAS_RINGS))
        g->rings = cfg->reconstruction.rings;
    if (!(has & RTOMO_SPEC_HAS_RINGS_WIDTH))
        g->rings_width = cfg->reconstruction.rings_width;
}

/* The scan's settings where it gave them, the configuration's elsewhere. */
static void compose_geometry(const rtomod_config *cfg,
                             const rtomo_scan_spec *spec, rtomo_fbp_geometry *g)
{
    *g = spec->geometry;
    if (!(spec->given & RTOMO_SPEC_HAS_WINDOW))
        g->window = cfg->reconstruction.filter;
    if (!(spec->given & RTOMO_SPEC_HAS_CUTOFF))
        g->cutoff = cfg->reconstruction.cutoff;
    if (!(spec->given & RTOMO_SPEC_HAS_INTERP))
        g->interp = cfg->reconstruction.interpolation;
    if (!(spec->given & RTOMO_SPEC_HAS_FOV))
        g->field_of_view = cfg->reconstruction.field_of_view;
    if (!(spec->given & RTOMO_SPEC_HAS_SLICE_SIZE))
        g->slice_size = cfg->reconstruction.slice_size;
    if (!(spec->given & RTOMO_SPEC_HAS_ANGLE_WEIGHTS))
        g->angle_weights = cfg->reconstruction.angle_weights;
    /* A continuous window's projections are uniform by construction. */
    if (spec->continuous)
        g->angle_weights = 0;
    compose_processing(cfg, spec, g);
    if (!(spec->given & RTOMO_SPEC_HAS_ROI)) {
        g->roi_x = cfg->reconstruction.roi[0];
        g->roi_y = cfg->reconstruction.roi[1];
        g->roi_width = cfg->reconstruction.roi[2];
        g->roi_height = cfg->reconstruction.roi[3];
    }
}

static void append_note(rtomod_scan *scan, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

/* Why the composed scan cannot be solved iteratively (NULL: it can), and
 * *because, the iterative engine's side of it: it solves one scan's
 * complete projections after the scan, from the plain line integrals of
 * whole rows, for the whole grid (PROTOCOL.md 3.3). */
static const char *iterative_conflict(const rtomo_scan_spec *spec,
                                      const rtomo_fbp_geometry *g,
                                      const char **because)
{
    *because = "the iterative methods take the plain line integrals";
    if (spec->continuous) {
        *because = "the iterative methods solve one scan's complete projections";
        return "a continuous stream";
    }
    if (g->half_acquisition)
        return "half acquisition";
    if (spec->n_flats_after > 0)
        return "flats after the projections";
    if (g->rings != RTOMO_RINGS_OFF)
        return "ring removal";
    if (g->phase.delta_beta > 0.0)
        return "phase retrieval";
    /* The solvers' iterate covers the whole grid; masking it would have
     * to happen at every published iterate and in the stored volume. */
    if (g->field_of_view == RTOMO_FOV_CIRCLE) {
        *because = "the iterative methods solve for the whole grid";
        return "\"reconstruction.field_of_view\" = \"circle\"";
    }
    return NULL;
}

/* The method and its options: the scan's where it gave them, the
 * configuration's elsewhere.  A method the scan asked for that its other
 * settings (the daemon's defaults among them) exclude is refused; the
 * configuration's default method gives way to FBP there (*demoted: the
 * reason, for scan_started; else NULL).  Returns 0, or -1 when
 * rejected. */
static int compose_method(rtomod *d, const rtomo_scan_spec *spec,
                          const rtomo_fbp_geometry *g,
                          rtomo_method_settings *m, const char **demoted)
{
    *demoted = NULL;
    const unsigned has = spec->given;
    rtomod_scan_method(&d->cfg, spec, d->cfg.reconstruction.method.method, m);
    /* The clamp is SIRT's: a scan's own is refused with another method
     * (the protocol checked it where the scan named its method too). */
    if ((has & RTOMO_SPEC_HAS_NONNEGATIVE) && m->nonnegative &&
        m->method != RTOMO_METHOD_SIRT) {
        rtomod_rejectf(d, RTOMO_REJECT_FIELD, spec->scan, -1, "field "
                       "\"reconstruction.nonnegative\" applies to \"sirt\" "
                       "only (the method is \"%s\", the daemon's "
                       "reconstruction.method)", rtomo_method_name(m->method));
        return -1;
    }
    const char *because = NULL;
    const char *conflict = m->method != RTOMO_METHOD_FBP
                               ? iterative_conflict(spec, g, &because) : NULL;
    if (!conflict)
        return 0;
    if (has & RTOMO_SPEC_HAS_METHOD) {
        rtomod_rejectf(d, RTOMO_REJECT_FIELD, spec->scan, -1, "field "
                       "\"reconstruction.method\" = \"%s\" cannot be "
                       "combined with %s: %s (give \"method\": \"fbp\", "
                       "or switch that off in the scan)",
                       rtomo_method_name(m->method), conflict, because);
        return -1;
    }
    *demoted = conflict;
    m->method = RTOMO_METHOD_FBP;
    m->nonnegative = 0;
    return 0;
}

/* scan_started says what comes after the FBP slices. */
static void note_method(rtomod_scan *scan, const rtomo_method_settings *m,
                        const rtomo_method_settings *configured,
                        const char *demoted)
{
    if (demoted) {
        append_note(scan, "method: fbp (the configured %s does not go with "
                    "%s)", rtomo_method_name(configured->method), demoted);
        return;
    }
    if (m->method == RTOMO_METHOD_FBP)
        return;
    append_note(scan, "method: %s after fbp, %d iterations%s%s, published "
                "%s", rtomo_method_name(m->method), m->iterations,
                m->tolerance > 0 ? " at most" : "",
                m->warm_start ? " from the fbp slices" : " from zero",
                m->publish_every > 0 ? "progressively" : "at the end");
}

static double *copy_doubles(const double *src, int n, int *failed)
{
    if (!src)
        return NULL;
    double *dst = malloc(sizeof(double) * (size_t)n);
    if (!dst)
        *failed = 1;
    else
        memcpy(dst, src, sizeof(double) * (size_t)n);
    return dst;
}

/* A BEGIN job for one worker keeping rows [first, last]. */
static rtomod_job *begin_job(const rtomod_scan *scan,
                             const rtomo_fbp_geometry *g, int first, int last)
{
    rtomod_job *job = rtomod_job_new(RTOMOD_JOB_TOMO_BEGIN, scan->serial,
                                     scan->id);
    if (!job)
        return NULL;
    int failed = 0;
    job->u.tomo.geometry = *g;
    job->u.tomo.geometry.angles = copy_doubles(g->angles, g->n_proj, &failed);
    job->u.tomo.geometry.axis_shift = copy_doubles(g->axis_shift, g->n_proj,
                                                   &failed);
    job->u.tomo.geometry.row_first = first;
    job->u.tomo.geometry.row_count = last - first + 1;
    if (failed) {
        rtomod_job_free(job);
        return NULL;
    }
    return job;
}

/* 1 when detector row `row` is this daemon's (reconstruction.rows). */
static int own_row(const rtomod *d, int row)
{
    int first = d->cfg.reconstruction.rows_first;
    int count = d->cfg.reconstruction.rows_count;
    return count == 0 || (row >= first && row < first + count);
}

/* The chosen rows that are this daemon's: [*first, *first + *n) of
 * t->rows (sorted, so they are contiguous there). */
static void own_rows(const rtomod *d, const rtomod_tomo_scan *t, int *first,
                     int *n)
{
    int i = 0;
    while (i < t->n_rows && !own_row(d, t->rows[i]))
        i++;
    int j = i;
    while (j < t->n_rows && own_row(d, t->rows[j]))
        j++;
    *first = i;
    *n = j - i;
}

/* Slices per publication batch and batch buffers alive, as worker.c
 * chooses them (its AUTO_BATCH_* and buffers_kept), for the estimate. */
static void output_shape(const rtomod *d, int *batch, int *buffers)
{
    *batch = d->cfg.reconstruction.batch > 0 ? d->cfg.reconstruction.batch
             : d->n_gpus > 0                 ? 64 : 16;
    *buffers = d->cfg.publish.stats_threads + 1 + 3;
}

/* The memory a scan's plans hold, worker by worker (budget.c), with
 * resident[w] of worker w's slices resident. */
static void estimate(const rtomod *d, const rtomo_fbp_geometry *g,
                     const rtomod_tomo_scan *t, const int *resident,
                     rtomod_budget_claim *claim)
{
    int batch, buffers;
    output_shape(d, &batch, &buffers);
    memset(claim, 0, sizeof *claim);
    for (int w = 0; w < d->pool.n; w++) {
        if (t->kept_first[w] < 0)
            continue;
        size_t host, device;
        rtomod_budget_tomo_part(g, t->kept_last[w] - t->kept_first[w] + 1,
                                resident[w], batch, buffers, d->n_gpus > 0,
                                &host, &device);
        if (t->method.method != RTOMO_METHOD_FBP) {
            size_t ih, id;
            rtomod_budget_iter_part(g, t->part_count[w], batch,
                                    d->n_gpus > 0, &ih, &id);
            host = host > SIZE_MAX - ih ? SIZE_MAX : host + ih;
            device = device > SIZE_MAX - id ? SIZE_MAX : device + id;
        }
        claim->host = claim->host > SIZE_MAX - host ? SIZE_MAX
                                                    : claim->host + host;
        claim->device[w] = device;
    }
}

/* Claim the plans with at most k resident slices per worker (each at most
 * its part).  Returns 0 (claimed), or -1 with why[] filled. */
static int try_resident(rtomod *d, rtomod_scan *scan,
                        const rtomo_fbp_geometry *g, int k, char *why,
                        size_t why_size)
{
    rtomod_tomo_scan *t = scan->tomo;
    for (int w = 0; w < d->pool.n; w++)
        t->resident[w] = t->part_count[w] < k ? t->part_count[w] : k;
    estimate(d, g, t, t->resident, &scan->claim);
    return rtomod_scan_try_admit(d, scan, why, why_size);
}

/* "axis": "auto" whose pairs complete only in the last quarter of the
 * scan (a 180-degree scan: the first and the last projection): every
 * projection would wait for the axis and go into the resident slices at
 * the end, slower than the after-the-scan path, which overlaps the
 * slices' way to the host with their back-projection. */
static int axis_pairs_late(const rtomod_tomo_scan *t,
                           const rtomo_fbp_geometry *g)
{
    int last = -1;
    for (int i = 0; i < t->n_axis_pairs; i++)
        for (int k = 0; k < 2; k++)
            last = t->axis_pairs[i][k] > last ? t->axis_pairs[i][k] : last;
    return t->n_axis_pairs > 0 && !t->spec->continuous &&
           last >= g->n_proj - g->n_proj / 4;
}

/* Admit the scan's plans with as many resident slices as the budgets
 * allow (all of them when they fit, else the largest equal share per
 * worker, found by bisection: the claim grows with k).  Returns 0, or -1
 * with why[] filled when not even the plans fit. */
static int admit_resident(rtomod *d, rtomod_scan *scan,
                          const rtomo_fbp_geometry *g, char *why,
                          size_t why_size)
{
    rtomod_tomo_scan *t = scan->tomo;
    int most = 0;
    for (int w = 0; w < d->pool.n; w++)
        if (t->part_count[w] > most)
            most = t->part_count[w];
    /* Ring removal and flats after the projections correct the filtered
     * projections once all are in: nothing may be back-projected before
     * (rtomo_fbp_remove_rings, rtomo_fbp_interpolate_flats). */
    if (!d->cfg.reconstruction.streaming || g->rings != RTOMO_RINGS_OFF ||
        t->spec->n_flats_after > 0 || axis_pairs_late(t, g))
        most = 0;
    if (try_resident(d, scan, g, most, why, why_size) == 0)
        return 0;
    if (most == 0 || try_resident(d, scan, g, 0, why, why_size) != 0)
        return -1;
    int lo = 0, hi = most;  /* lo fits, hi does not */
    char ignored[RTOMO_REASON_MAX];
    while (hi - lo > 1) {
        rtomod_budget_release(&d->budget, &scan->claim);
        int mid = lo + (hi - lo) / 2;
        if (try_resident(d, scan, g, mid, ignored, sizeof ignored) == 0)
            lo = mid;
        else
            hi = mid;
    }
    rtomod_budget_release(&d->budget, &scan->claim);
    return try_resident(d, scan, g, lo, why, why_size);
}

/* What scan_started and status say of the resident slices. */
static void note_resident(rtomod_scan *scan, const rtomo_fbp_geometry *g)
{
    const rtomod_tomo_scan *t = scan->tomo;
    int resident = 0, slices = 0;
    for (int w = 0; w < RTOMO_MAX_DEVICES; w++) {
        resident += t->resident[w];
        slices += t->part_count[w];
    }
    const char *how = t->spec->continuous ? "updated as projections enter "
                                            "and leave the window"
                                          : "back-projected while the scan "
                                            "is acquired";
    if (slices == 0)
        return;
    if (resident == slices) {
        snprintf(scan->start_reason, sizeof scan->start_reason, "streaming");
        snprintf(scan->start_note, sizeof scan->start_note, "all %d slices "
                 "resident, %s", slices, how);
    } else if (resident > 0) {
        snprintf(scan->start_reason, sizeof scan->start_reason,
                 "streaming_partial");
        snprintf(scan->start_note, sizeof scan->start_note, "%d of %d slices "
                 "resident (memory budget), %s; the others %s", resident,
                 slices, how, t->spec->continuous ? "from scratch per window"
                                                  : "after the scan");
    } else {
        snprintf(scan->start_reason, sizeof scan->start_reason, "after_scan");
        snprintf(scan->start_note, sizeof scan->start_note, "no slice "
                 "resident (%s): %s", scan->tomo->spec->continuous
                 ? "each window back-projected from scratch"
                 : "slices back-projected after the scan",
                 g->rings != RTOMO_RINGS_OFF
                     ? "ring removal needs the whole sinogram"
                 : scan->tomo->spec->n_flats_after > 0
                     ? "flats after the projections are interpolated first"
                 : axis_pairs_late(scan->tomo, g)
                     ? "axis: auto waits for the last projections"
                 : scan->d->cfg.reconstruction.streaming
                     ? "memory budget" : "reconstruction.streaming is off");
    }
}

/* The preview rows of a worker: the configured ones among its resident
 * slices, else the middle chosen slice when it is one of them. */
static int preview_rows(const rtomod *d, const rtomod_tomo_scan *t,
                        const int *resident, int n_resident, int *out)
{
    const int *rows = d->cfg.preview.rows;
    int n_rows = d->cfg.preview.n_rows;
    int middle;
    if (d->cfg.preview.every == 0 || n_resident == 0)
        return 0;
    if (n_rows == 0) {
        int base, n_own;
        own_rows(d, t, &base, &n_own);
        if (n_own == 0)
            return 0;
        middle = t->rows[base + n_own / 2];
        rows = &middle;
        n_rows = 1;
    }
    int n = 0;
    for (int i = 0; i < n_rows; i++)
        for (int j = 0; j < n_resident; j++)
            if (resident[j] == rows[i]) {
                out[n++] = rows[i];
                break;
            }
    return n;
}

/* The streaming part of worker w's begin job: its resident rows (the
 * first of its part) and previews.  Returns 0 or -1 (out of memory). */
static int begin_streaming(const rtomod *d, const rtomod_tomo_scan *t, int w,
                           const int *part, rtomod_tomo_begin_job *b)
{
    b->continuous = t->spec->continuous;
    b->window_refresh = d->cfg.reconstruction.window_refresh;
    memcpy(b->axis_pairs, t->axis_pairs, sizeof b->axis_pairs);
    b->n_axis_pairs = t->n_axis_pairs;
    b->axis_every = t->axis_every;
    b->flats_after = t->spec->n_flats_after;
    b->axis_tolerance = d->cfg.reconstruction.axis_tolerance;
    b->method = t->method;
    if (t->method.method != RTOMO_METHOD_FBP) {
        int batch, buffers;
        output_shape(d, &batch, &buffers);
        b->iter_batch = batch;
        b->n_iter_rows = t->part_count[w];
        if (!(b->iter_rows = malloc(sizeof(int) * (size_t)b->n_iter_rows)))
            return -1;
        memcpy(b->iter_rows, part, sizeof(int) * (size_t)b->n_iter_rows);
    }
    b->n_resident = t->resident[w];
    b->n_rows = t->part_count[w];
    b->batch = d->cfg.reconstruction.batch;
    if (b->n_resident == 0)
        return 0;
    b->resident = malloc(sizeof(int) * (size_t)b->n_resident);
    b->preview_rows = malloc(sizeof(int) * RTOMOD_PREVIEW_MAX);
    if (!b->resident || !b->preview_rows)
        return -1;
    memcpy(b->resident, part, sizeof(int) * (size_t)b->n_resident);
    b->n_preview = preview_rows(d, t, b->resident, b->n_resident,
                                b->preview_rows);
    b->preview_every = b->n_preview > 0 ? d->cfg.preview.every : 0;
    return 0;
}

/* Split this daemon's chosen rows into one contiguous part per worker,
 * admit the plans' memory (with as many resident slices as fit) and queue
 * them (none when it has no rows of this scan).  Returns 0; -1 when out
 * of memory; -2 when the budgets have no room (the begin is rejected
 * then). */
static int create_plans(rtomod *d, rtomod_scan *scan,
                        const rtomo_fbp_geometry *g)
{
    rtomod_tomo_scan *t = scan->tomo;
    int base, n_own;
    own_rows(d, t, &base, &n_own);
    const int *rows = t->rows + base;
    int parts = d->pool.n < n_own ? d->pool.n : n_own;
    rtomod_job *jobs[RTOMO_MAX_DEVICES] = {0};
    for (int w = 0; w < d->pool.n; w++)
        t->kept_first[w] = t->kept_last[w] = -1;
    for (int w = 0; w < parts; w++) {
        int lo = (int)((long)n_own * w / parts);
        int hi = (int)((long)n_own * (w + 1) / parts) - 1;
        t->kept_first[w] = rows[lo];
        t->kept_last[w] = rows[hi];
        t->part_first[w] = base + lo;
        t->part_count[w] = hi - lo + 1;
    }
    char why[RTOMO_REASON_MAX - 96];
    if (admit_resident(d, scan, g, why, sizeof why) != 0) {
        rtomod_rejectf(d, RTOMO_REJECT_BUDGET, scan->id, -1, "a scan of %d "
                       "projections x %d rows of %d bins %s", g->n_proj,
                       n_own, g->det_width, why);
        return -2;
    }
    note_resident(scan, g);
    for (int w = 0; w < parts; w++) {
        if (!(jobs[w] = begin_job(scan, g, t->kept_first[w],
                                  t->kept_last[w])) ||
            begin_streaming(d, t, w, t->rows + t->part_first[w],
                            &jobs[w]->u.tomo) != 0) {
            for (int i = 0; i <= w; i++)
                rtomod_job_free(jobs[i]);
            return -1;
        }
    }
    for (int w = 0; w < parts; w++)
        rtomod_scan_push(d, scan, w, jobs[w]);
    return 0;
}

/* The slots of a continuous scan, all empty. */
static int continuous_init(rtomod_tomo_scan *t)
{
    const rtomo_fbp_geometry *g = &t->spec->geometry;
    size_t n = (size_t)g->n_proj;
    t->slot_index = malloc(n * sizeof *t->slot_index);
    t->slot_angle = malloc(n * sizeof *t->slot_angle);
    if (!t->slot_index || !t->slot_angle)
        return -1;
    for (size_t i = 0; i < n; i++)
        t->slot_index[i] = -1;
    t->angle_start = g->angle_start;
    t->angle_step = g->angle_step != 0 ? g->angle_step : M_PI / g->n_proj;
    return 0;
}

static rtomod_tomo_scan *tomo_new(rtomo_scan_spec *spec)
{
    rtomod_tomo_scan *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->spec = spec;
    t->axis_found = t->axis_quality = NAN;
    /* Continuous scans remember the last n_proj indices: an older one
     * would overwrite a newer projection's slot. */
    if (rtomod_seen_init(&t->projections, spec->geometry.n_proj) != 0 ||
        rtomod_seen_init(&t->darks, FIELD_INDEX_WINDOW) != 0 ||
        rtomod_seen_init(&t->flats, FIELD_INDEX_WINDOW) != 0 ||
        rtomod_seen_init(&t->flats_after, FIELD_INDEX_WINDOW) != 0 ||
        (spec->continuous && continuous_init(t) != 0)) {
        t->spec = NULL;
        rtomod_tomo_free(t);
        return NULL;
    }
    return t;
}

/* The angle of projection p, radians. */
static double angle_of(const rtomo_fbp_geometry *g, int p)
{
    return g->angles ? g->angles[p] : g->angle_start + p * g->angle_step;
}

/* |a - b| modulo 2 pi, in [0, pi]. */
static double angle_distance(double a, double b)
{
    double d = fmod(fabs(a - b), 2.0 * M_PI);
    return d > M_PI ? 2.0 * M_PI - d : d;
}

/* Pairs of projections 180 degrees apart (within one angular step) for an
 * automatic axis: the earliest projections that have an opposite, up to
 * RTOMOD_AXIS_PAIRS.  Returns how many. */
static int opposed_pairs(const rtomo_fbp_geometry *g,
                         int pairs[RTOMOD_AXIS_PAIRS][2])
{
    const double step = g->angles ? M_PI / g->n_proj
                      : fabs(g->angle_step != 0 ? g->angle_step
                                                : M_PI / g->n_proj);
    int n = 0;
    for (int p = 0; p < g->n_proj && n < RTOMOD_AXIS_PAIRS; p++) {
        int best = -1;
        double best_d = 1.0001 * step;
        for (int q = 0; q < g->n_proj; q++) {
            double d = angle_distance(angle_of(g, q), angle_of(g, p) + M_PI);
            if (q != p && d <= best_d) {
                best = q;
                best_d = d;
            }
        }
        int used = 0;
        for (int i = 0; i < n; i++)
            used |= pairs[i][0] == best || pairs[i][1] == best ||
                    pairs[i][0] == p || pairs[i][1] == p;
        if (best >= 0 && !used) {
            pairs[n][0] = p;
            pairs[n][1] = best;
            n++;
        }
    }
    return n;
}

/* Continuous "axis": "auto": projections i and i + n (n the window) must
 * be half a turn apart.  The axis is measured every axis_every
 * projections: a multiple of the window spacing, at least 100
 * projections and an eighth of a window apart (each measurement costs a
 * few milliseconds of the worker; a move, one window's back-projection). */
static int plan_axis_tracking(rtomod *d, const rtomo_ingest_msg *msg,
                              const rtomo_fbp_geometry *g,
                              rtomod_tomo_scan *t)
{
    const rtomo_scan_spec *spec = msg->scan_spec;
    const int64_t n = g->window_proj, every = spec->window_every;
    const double step = g->angle_step;
    if (!(fabs(n * step - M_PI) <= 0.5 * fabs(step))) {
        rtomod_rejectf(d, RTOMO_REJECT_FIELD, msg->scan, -1,
                       "field \"axis\" = \"auto\" in continuous mode needs "
                       "windows of half a turn (%lld projections of %g "
                       "degrees are %g degrees): give the axis",
                       (long long)n, step * 180.0 / M_PI,
                       n * step * 180.0 / M_PI);
        return -1;
    }
    int64_t apart = n / 8 > 100 ? n / 8 : 100;
    t->axis_every = every * ((apart + every - 1) / every);
    return 0;
}

/* "axis": "auto": the pairs it is found from, or a reject. */
static int plan_axis_search(rtomod *d, const rtomo_ingest_msg *msg,
                            const rtomo_fbp_geometry *g,
                            rtomod_tomo_scan *t)
{
    if (msg->scan_spec->continuous)
        return plan_axis_tracking(d, msg, g, t);
    t->n_axis_pairs = opposed_pairs(g, t->axis_pairs);
    if (t->n_axis_pairs == 0) {
        rtomod_rejectf(d, RTOMO_REJECT_FIELD, msg->scan, -1,
                       "field \"axis\" = \"auto\" needs two projections "
                       "180 degrees apart (within one angular step); these "
                       "angles have none: give the axis");
        return -1;
    }
    return 0;
}

/* Add "; text" (or "text" when the note is empty) to scan_started's note. */
static void append_note(rtomod_scan *scan, const char *format, ...)
{
    size_t used = strlen(scan->start_note);
    if (used && used + 2 < sizeof scan->start_note) {
        memcpy(scan->start_note + used, "; ", 3);
        used += 2;
    }
    va_list ap;
    va_start(ap, format);
    vsnprintf(scan->start_note + used, sizeof scan->start_note - used, format,
              ap);
    va_end(ap);
}

/* scan_started says which processing steps run, with their parameters. */
static void note_processing(rtomod_scan *scan, const rtomo_scan_spec *spec,
                            const rtomo_fbp_geometry *g)
{
    const rtomo_fbp_phase *p = &g->phase;
    if (p->delta_beta > 0.0)
        append_note(scan, "phase: delta/beta %g at %g keV, %g m, "
                    "%g m pixels", p->delta_beta, p->energy_kev, p->distance_m,
                    p->pixel_m);
    if (g->rings != RTOMO_RINGS_OFF)
        append_note(scan, "rings: %s, width %d",
                    rtomo_rings_name(g->rings),
                    g->rings_width ? g->rings_width : 31);
    else if (spec->continuous &&
             scan->d->cfg.reconstruction.rings != RTOMO_RINGS_OFF)
        append_note(scan, "rings: off (a continuous stream has no "
                    "whole sinogram)");
}

/* The scan's HDF5 file: geometry and processing as the plans use them
 * (the scan's settings, the configuration's elsewhere). */
static void open_output(rtomod *d, rtomod_scan *scan,
                        const rtomo_scan_spec *spec,
                        const rtomo_fbp_geometry *g, int n_rows)
{
    json_t *angles = json_array();
    for (int p = 0; p < g->n_proj; p++)
        json_array_append_new(angles, json_real(
            (g->angles ? g->angles[p] : g->angle_start + p * g->angle_step) *
            180.0 / M_PI));
    int size = g->slice_size > 0 ? g->slice_size : g->det_width;
    json_t *meta = json_pack(
        "{s:{s:i, s:i}, s:i, s:i, s:s, s:f, s:s, s:i, s:s, s:b, s:b, s:s, "
        "s:i, s:i, s:i, s:i, s:s, s:o, s:s}",
        "detector", "width", g->det_width, "height", g->det_height,
        "projections", g->n_proj, "slices", n_rows,
        "filter", rtomo_window_name(g->window),
        "cutoff", g->cutoff > 0 ? g->cutoff : 1.0,
        "interpolation", rtomo_interp_name(g->interp), "slice_size", size,
        "axis_mode", spec->axis_auto ? "auto" : "given",
        "half_acquisition", g->half_acquisition,
        "angle_weights", g->angle_weights,
        "rings", rtomo_rings_name(g->rings),
        "rings_width", g->rings_width ? g->rings_width : 31,
        "darks", spec->n_darks, "flats", spec->n_flats,
        "flats_after", spec->n_flats_after,
        "dtype", rtomo_dtype_name(spec->dtype), "rotation_angle", angles,
        "field_of_view", rtomo_fov_name(g->field_of_view));
    if (!spec->axis_auto)
        json_object_set_new(meta, "axis", json_real(
            isnan(g->axis) ? 0.5 * (g->det_width - 1) : g->axis));
    if (g->roi_width > 0 && g->roi_height > 0)
        json_object_set_new(meta, "roi", json_pack("[i, i, i, i]", g->roi_x,
                            g->roi_y, g->roi_width, g->roi_height));
    if (g->phase.delta_beta > 0.0)
        json_object_set_new(meta, "phase", json_pack(
            "{s:f, s:f, s:f, s:f}", "delta_beta", g->phase.delta_beta,
            "energy_kev", g->phase.energy_kev, "distance_m",
            g->phase.distance_m, "pixel_m", g->phase.pixel_m));
    scan->output_file = rtomod_output_open_tomo(
        d->output, scan->serial, scan->id, meta, d->begin_header,
        d->begin_header_size);
}

int rtomod_tomo_begin(rtomod *d, rtomo_ingest_msg *msg)
{
    rtomo_scan_spec *spec = msg->scan_spec;
    if (spec->cone)
        return rtomod_cone_begin(d, msg);
    if (!rtomod_scan_may_begin(d, msg))
        return -1;
    /* A list gives n_proj angles, but a continuous stream turns on and on:
     * its angles must follow from the start and step (or come with each
     * projection). */
    if (spec->continuous && spec->angles) {
        rtomod_rejectf(d, RTOMO_REJECT_FIELD, msg->scan, -1,
                       "field \"angles\" cannot describe a continuous scan: "
                       "give \"angle_start\"/\"angle_step\" (or each "
                       "projection's \"angle\")");
        return -1;
    }
    if (spec->continuous && spec->geometry.half_acquisition) {
        rtomod_rejectf(d, RTOMO_REJECT_FIELD, msg->scan, -1,
                       "field \"half_acquisition\" is for scans of 360 "
                       "degrees; a continuous stream's windows are half a "
                       "turn");
        return -1;
    }
    if (spec->continuous && spec->geometry.axis_shift) {
        rtomod_rejectf(d, RTOMO_REJECT_FIELD, msg->scan, -1,
                       "field \"axis_shift\" (a list) cannot describe a "
                       "continuous scan: give each projection's "
                       "\"axis_shift\"");
        return -1;
    }
    rtomo_fbp_geometry g;
    compose_geometry(&d->cfg, spec, &g);
    if (spec->continuous) {
        /* The plans hold the window in a ring of slots (rtomo_fbp_window):
         * projection i in slot i mod n_proj, weighted as a window. */
        g.window_proj = g.n_proj;
        g.n_proj = rtomo_fbp_window_slots(g.n_proj);
        g.angle_step = spec->geometry.angle_step != 0
                           ? spec->geometry.angle_step : M_PI / g.window_proj;
    }
    if (spec->continuous && g.rings != RTOMO_RINGS_OFF) {
        if (spec->given & RTOMO_SPEC_HAS_RINGS) {
            rtomod_rejectf(d, RTOMO_REJECT_FIELD, msg->scan, -1,
                           "field \"reconstruction.rings\" = \"%s\" needs "
                           "the whole scan's sinogram, which a continuous "
                           "stream never has: give \"off\"",
                           rtomo_rings_name(g.rings));
            return -1;
        }
        g.rings = RTOMO_RINGS_OFF;  /* the daemon's default, said below */
    }
    if (spec->n_flats_after > 0 && g.phase.delta_beta > 0.0) {
        rtomod_rejectf(d, RTOMO_REJECT_GEOMETRY, msg->scan, -1,
                       "flats after the projections are not interpolated "
                       "with phase retrieval (its filter acts on "
                       "intensities, where the flat is no offset)");
        return -1;
    }
    rtomo_error err;
    if (rtomo_fbp_geometry_validate(&g, &err) != RTOMO_OK) {
        rtomod_rejectf(d, RTOMO_REJECT_GEOMETRY, msg->scan, -1,
                       "with the configured reconstruction settings: %s",
                       err.message);
        return -1;
    }
    rtomo_method_settings method;
    const char *demoted;
    if (compose_method(d, spec, &g, &method, &demoted) != 0)
        return -1;
    if (rtomod_scan_check_image(d, msg->scan, rtomod_budget_slice_bytes(&g),
                                "slices") != 0)
        return -1;
    rtomo_reject_info why;
    int *rows, n_rows;
    if (choose_rows(d, spec, &rows, &n_rows, &why) != 0) {
        rtomod_reject(d, &why, msg->scan, -1);
        return -1;
    }
    rtomod_scan *scan = rtomod_scan_new(d, RTOMOD_SCAN_TOMO, msg->scan);
    if (!scan || !(scan->tomo = tomo_new(spec))) {
        free(rows);
        rtomod_scan_free(scan);
        rtomod_rejectf(d, RTOMO_REJECT_BUDGET, msg->scan, -1,
                       "out of memory for a scan of %d projections",
                       spec->geometry.n_proj);
        return -1;
    }
    if (spec->axis_auto &&
        plan_axis_search(d, msg, &g, scan->tomo) != 0) {
        free(rows);
        scan->tomo->spec = NULL;
        rtomod_scan_free(scan);
        return -1;
    }
    /* A stream whose axis is tracked starts where the last axis found on
     * a detector of its width was (the previous scan's), else at the
     * centre, until its first measurement. */
    if (scan->tomo->axis_every && isnan(g.axis) &&
        d->last_axis_width == g.det_width)
        g.axis = d->last_axis;
    msg->scan_spec = NULL;      /* the scan owns it now */
    scan->tomo->method = method;
    scan->tomo->phase = g.phase;
    scan->tomo->rings = g.rings;
    scan->tomo->rings_width = g.rings_width ? g.rings_width : 31;
    scan->tomo->field_of_view = g.field_of_view;
    scan->tomo->rows = rows;
    scan->tomo->n_rows = n_rows;
    int planned = create_plans(d, scan, &g);
    if (planned != 0) {
        rtomod_scan_free(scan);
        if (planned == -1)
            rtomod_rejectf(d, RTOMO_REJECT_BUDGET, msg->scan, -1,
                           "out of memory for the scan's plans");
        return -1;
    }
    if (spec->axis_auto && scan->tomo->axis_every)
        append_note(scan, "axis: auto, measured every %lld projections from "
                    "%.3f", (long long)scan->tomo->axis_every,
                    isnan(g.axis) ? 0.5 * (g.det_width - 1) : g.axis);
    else if (spec->axis_auto)
        append_note(scan, "axis: auto, from %d pairs of opposed projections",
                    scan->tomo->n_axis_pairs);
    note_processing(scan, spec, &g);
    note_method(scan, &method, &d->cfg.reconstruction.method, demoted);
    /* Continuous streams have no file (yet): a window is no volume. */
    if (d->output && !spec->continuous)
        open_output(d, scan, spec, &g, n_rows);
    rtomod_scan_activate(d, scan);
    int base, n_own;
    own_rows(d, scan->tomo, &base, &n_own);
    if (n_own == 0)
        log_info("scan %s: none of its %d slices is in this daemon's rows "
                 "(reconstruction.rows); taking its frames, reconstructing "
                 "nothing", scan->id, n_rows);
    else
        log_info("scan %s: %dx%d detector, %d projections%s, %d slices from "
                 "row %d to %d", scan->id, g.det_width, g.det_height,
                 spec->geometry.n_proj,
                 spec->continuous ? " per window (continuous)" : "", n_own,
                 rows[base], rows[base + n_own - 1]);
    return 0;
}

/* ----------------------------------------------------------- frames ---- */

/* Where a projection goes in the engine: its slot (the index itself, or
 * index mod n_proj in continuous mode) and its angle in radians (NaN: the
 * geometry's for that slot). */
typedef struct placement {
    int64_t slot;
    double angle;
} placement;

static void continuous_arrival(rtomod *d, rtomod_scan *scan, int64_t index,
                               placement at);

/* Mark a frame's index as received; rejects duplicates. */
static int mark_index(rtomod *d, rtomod_seen *seen, const rtomo_ingest_msg *msg)
{
    int rc = rtomod_seen_mark(seen, msg->frame.index);
    if (rc == 0)
        return 0;
    rtomod_rejectf(d, rc > 0 ? RTOMO_REJECT_DUPLICATE : RTOMO_REJECT_INDEX,
                   msg->scan, msg->frame.index, "%s %lld %s",
                   rtomo_msg_type_name(msg->type),
                   (long long)msg->frame.index,
                   rc > 0 ? "was already received" : "is too old");
    return -1;
}

/* A dark or flat: before the first projection, one of the announced set;
 * in a continuous stream also later, a new set (its indices counted
 * afresh) that the engine applies from the next projection on. */
static int check_field_frame(rtomod *d, rtomod_tomo_scan *t,
                             const rtomo_ingest_msg *msg)
{
    if (t->projections_started && !t->spec->continuous) {
        rtomod_rejectf(d, RTOMO_REJECT_STATE, msg->scan, msg->frame.index,
                       "%s frames must come before the first projection "
                       "(only a continuous scan takes new ones on the way)",
                       rtomo_msg_type_name(msg->type));
        return -1;
    }
    if (t->projection_since_fields) {
        /* The first dark or flat after projections: a new set. */
        t->projection_since_fields = 0;
        rtomod_seen_free(&t->darks);
        rtomod_seen_free(&t->flats);
        if (rtomod_seen_init(&t->darks, FIELD_INDEX_WINDOW) != 0 ||
            rtomod_seen_init(&t->flats, FIELD_INDEX_WINDOW) != 0) {
            rtomod_rejectf(d, RTOMO_REJECT_OVERSIZE, msg->scan,
                           msg->frame.index, "out of memory for a new set of "
                           "darks and flats");
            return -1;
        }
        t->field_sets++;
    }
    return mark_index(d, msg->type == RTOMO_MSG_DARK ? &t->darks : &t->flats,
                      msg);
}

static placement place_frame(const rtomod_tomo_scan *t,
                             const rtomo_ingest_msg *msg)
{
    placement p = {msg->frame.index, NAN};
    if (!t->spec->continuous || msg->type != RTOMO_MSG_PROJECTION)
        return p;
    /* The worker's window places it in its ring by the index; the loop
     * keeps the last n_proj (slot = index mod n_proj) for the windows'
     * headers. */
    int64_t index = msg->frame.index;
    p.slot = index % t->spec->geometry.n_proj;
    p.angle = isnan(msg->frame.angle)
                  ? t->angle_start + (double)index * t->angle_step
                  : msg->frame.angle * M_PI / 180.0;
    return p;
}

/* Queue the frame for every worker holding rows of the scan: the first gets
 * the payload message, the others share its data through copies. */
static int queue_frame(rtomod *d, rtomod_scan *scan, rtomod_job_kind kind,
                       const rtomo_ingest_msg *msg, zmq_msg_t *payload,
                       placement at)
{
    rtomod_tomo_scan *t = scan->tomo;
    rtomod_job *jobs[RTOMO_MAX_DEVICES] = {0};
    int n = 0;
    for (int w = 0; w < d->pool.n; w++) {
        if (t->kept_first[w] < 0)
            continue;
        zmq_msg_t copy;
        zmq_msg_init(&copy);
        zmq_msg_copy(&copy, payload);
        jobs[n] = rtomod_frame_job(d, kind, scan, &msg->frame, &copy);
        zmq_msg_close(&copy);
        if (!jobs[n]) {
            for (int i = 0; i < n; i++)
                rtomod_job_free(jobs[i]);
            rtomod_rejectf(d, RTOMO_REJECT_OVERSIZE, msg->scan,
                           msg->frame.index, "out of memory for a job");
            return -1;
        }
        /* Continuous projections keep their global index: the worker's
         * window knows what enters and what leaves by it. */
        jobs[n]->index = msg->frame.index;
        if (!isnan(at.angle))
            jobs[n]->angle = at.angle;
        n++;
    }
    n = 0;
    for (int w = 0; w < d->pool.n; w++)
        if (t->kept_first[w] >= 0)
            rtomod_scan_push(d, scan, w, jobs[n++]);
    return 0;
}

/* The detector rows this daemon's plans read from each frame of the
 * scan: the rows its workers keep, widened by phase retrieval's reach.
 * 0 when no worker keeps any (the daemon reconstructs nothing of it). */
static int rows_read(const rtomod *d, const rtomod_tomo_scan *t, int *lo,
                     int *hi)
{
    *lo = INT_MAX;
    *hi = -1;
    for (int w = 0; w < d->pool.n; w++)
        if (t->kept_first[w] >= 0) {
            *lo = t->kept_first[w] < *lo ? t->kept_first[w] : *lo;
            *hi = t->kept_last[w] > *hi ? t->kept_last[w] : *hi;
        }
    if (*hi < 0)
        return 0;
    const int height = t->spec->geometry.det_height;
    int reach = rtomo_fbp_phase_reach(&t->phase);
    reach = reach < height ? reach : height;
    *lo = *lo - reach > 0 ? *lo - reach : 0;
    *hi = *hi + reach < height - 1 ? *hi + reach : height - 1;
    return 1;
}

/* A frame with "rows" (a router's share): refused unless it holds every
 * row the plans read, then made whole for them (frame_rows.c). */
static int take_rows(rtomod *d, const rtomod_tomo_scan *t,
                     rtomo_ingest_msg *msg, zmq_msg_t *payload)
{
    rtomo_frame_header *f = &msg->frame;
    const int64_t first = f->rows_first, last = first + f->rows_count - 1;
    int lo, hi;
    if (rows_read(d, t, &lo, &hi) && (first > lo || last < hi)) {
        rtomod_rejectf(d, RTOMO_REJECT_SHAPE, msg->scan, f->index,
                       "%s %lld carries detector rows %lld..%lld, but this "
                       "daemon reads rows %d..%d of each frame (its slices%s)",
                       rtomo_msg_type_name(f->type), (long long)f->index,
                       (long long)first, (long long)last, lo, hi,
                       rtomo_fbp_phase_reach(&t->phase) > 0
                           ? " and phase retrieval's reach around them" : "");
        return -1;
    }
    if (rtomod_frame_rows_widen(f, d->cfg.ingest.keep_buffers, payload) !=
        0) {
        rtomod_rejectf(d, RTOMO_REJECT_OVERSIZE, msg->scan, f->index,
                       "out of memory for a whole frame of %lld rows",
                       (long long)f->shape[0]);
        return -1;
    }
    msg->payload = zmq_msg_data(payload);
    msg->payload_size = zmq_msg_size(payload);
    return 0;
}

int rtomod_tomo_frame(rtomod *d, rtomo_ingest_msg *msg, zmq_msg_t *payload)
{
    rtomod_scan *scan = rtomod_scan_for_input(d, msg, RTOMOD_SCAN_TOMO);
    if (!scan)
        return -1;
    if (scan->cone && msg->frame.rows_count > 0) {
        rtomod_rejectf(d, RTOMO_REJECT_FIELD, msg->scan, msg->frame.index,
                       "%s field \"rows\": frames of some rows only are "
                       "taken by parallel-beam scans, not cone-beam ones",
                       rtomo_msg_type_name(msg->type));
        return -1;
    }
    if (scan->cone)
        return rtomod_cone_frame(d, scan, msg, payload);
    rtomod_tomo_scan *t = scan->tomo;
    rtomo_reject_info why;
    if (rtomo_proto_check_tomo_frame(&msg->frame, t->spec, &why) != 0) {
        rtomod_reject(d, &why, msg->scan, msg->frame.index);
        return -1;
    }
    if (msg->frame.rows_count > 0 && take_rows(d, t, msg, payload) != 0)
        return -1;
    rtomod_job_kind kind;
    rtomod_seen *marked;
    if (msg->type == RTOMO_MSG_PROJECTION) {
        if (mark_index(d, marked = &t->projections, msg) != 0)
            return -1;
        t->projections_started = 1;
        t->projection_since_fields = 1;
        kind = RTOMOD_JOB_TOMO_PROJECTION;
    } else if (msg->type == RTOMO_MSG_FLAT &&
               msg->frame.index >= t->spec->n_flats &&
               t->spec->n_flats_after > 0) {
        /* A flat after the projections (by its index, whenever it comes:
         * the engine keeps it apart from the field in use). */
        if (mark_index(d, marked = &t->flats_after, msg) != 0)
            return -1;
        kind = RTOMOD_JOB_TOMO_FLAT_AFTER;
    } else {
        if (check_field_frame(d, t, msg) != 0)
            return -1;
        kind = msg->type == RTOMO_MSG_DARK ? RTOMOD_JOB_TOMO_DARK
                                           : RTOMOD_JOB_TOMO_FLAT;
        marked = msg->type == RTOMO_MSG_DARK ? &t->darks : &t->flats;
    }
    placement at = place_frame(t, msg);
    if (queue_frame(d, scan, kind, msg, payload, at) != 0) {
        /* Refused after all: not received, so missing (and resendable). */
        rtomod_seen_unmark(marked, msg->frame.index);
        return -1;
    }
    scan->frames++;
    scan->t_last_input = rtomod_now();
    if (t->spec->continuous && kind == RTOMOD_JOB_TOMO_PROJECTION)
        continuous_arrival(d, scan, msg->frame.index, at);
    /* The last announced dark or flat: projections that overtook it may
     * go now. */
    if (kind != RTOMOD_JOB_TOMO_PROJECTION && !rtomod_tomo_awaits_fields(scan))
        rtomod_ingest_replay_early(d, scan->id);
    /* The last straggler after the end: no need to wait any longer. */
    if (scan->end_pending && rtomod_tomo_complete(scan))
        rtomod_scan_end_now(d, scan);
    return 0;
}

/* -------------------------------------------------------------- end ---- */

int rtomod_tomo_awaits_fields(const rtomod_scan *scan)
{
    if (scan->cone)
        return rtomod_cone_awaits_fields(scan);
    const rtomod_tomo_scan *t = scan->tomo;
    return scan->kind == RTOMOD_SCAN_TOMO && !t->projections_started &&
           (t->darks.count < t->spec->n_darks ||
            t->flats.count < t->spec->n_flats);
}

/* A continuous stream owes nothing at any moment: it may end at once. */
int rtomod_tomo_complete(const rtomod_scan *scan)
{
    if (scan->cone)
        return rtomod_cone_complete(scan);
    const rtomod_tomo_scan *t = scan->tomo;
    return scan->kind == RTOMOD_SCAN_TOMO &&
           (t->spec->continuous ||
            t->projections.count == t->spec->geometry.n_proj);
}

static void report_missing(rtomod *d, const rtomod_scan *scan)
{
    const rtomod_tomo_scan *t = scan->tomo;
    int n_proj = t->spec->geometry.n_proj;
    long missing = n_proj - t->projections.count;
    if (missing == 0)
        return;
    char list[160] = "";
    size_t used = 0;
    int64_t first = -1;
    int listed = 0;
    for (int p = 0; p < n_proj && listed < 16; p++) {
        if (rtomod_seen_has(&t->projections, p))
            continue;
        if (first < 0)
            first = p;
        used += (size_t)snprintf(list + used, sizeof list - used, "%s%d",
                                 listed ? ", " : "", p);
        if (used >= sizeof list)
            break;
        listed++;
    }
    rtomod_publish_event(&d->pub, RTOMOD_LOG_WARN, "missing_projections",
                         scan->id, first, "missing_projections",
                         "%ld of %d projections missing (first: %s%s); "
                         "reconstructing without them", missing, n_proj, list,
                         missing > listed ? ", ..." : "");
}

/* The rows to reconstruct now and the ROI, from the scan's own settings or
 * the configuration as it is now.  Falls back to the rows chosen at begin
 * (and the whole grid) when the configuration no longer fits the scan. */
static int rows_now(rtomod *d, const rtomod_scan *scan, int **rows, int *n)
{
    rtomo_reject_info why;
    if (choose_rows(d, scan->tomo->spec, rows, n, &why) == 0)
        return 0;
    rtomod_publish_event(&d->pub, RTOMOD_LOG_WARN, "error", scan->id, -1,
                         "bad_slices", "slice selection: %s; reconstructing "
                         "the slices chosen at scan_begin", why.message);
    *rows = malloc(sizeof(int) * (size_t)scan->tomo->n_rows);
    if (!*rows)
        return -1;
    memcpy(*rows, scan->tomo->rows, sizeof(int) * (size_t)scan->tomo->n_rows);
    *n = scan->tomo->n_rows;
    return 0;
}

static void roi_now(rtomod *d, const rtomod_scan *scan, int roi[4])
{
    const rtomo_scan_spec *spec = scan->tomo->spec;
    rtomo_fbp_geometry g;
    compose_geometry(&d->cfg, spec, &g);
    roi[0] = g.roi_x;
    roi[1] = g.roi_y;
    roi[2] = g.roi_width;
    roi[3] = g.roi_height;
    rtomo_error err;
    if (rtomo_fbp_geometry_validate(&g, &err) != RTOMO_OK) {
        rtomod_publish_event(&d->pub, RTOMOD_LOG_WARN, "error", scan->id, -1,
                             "bad_roi", "configured ROI: %s; reconstructing "
                             "the whole slice", err.message);
        memset(roi, 0, 4 * sizeof(int));
    }
}

/* The workers' parts of a plane add up to the plane: rows a worker does
 * not hold count 0 in its part (rtomo_fbp_reconstruct_plane). */
static int plane_workers(const rtomod *d, const rtomod_tomo_scan *t)
{
    int n = 0;
    for (int w = 0; w < d->pool.n; w++)
        n += t->kept_first[w] >= 0;
    return n;
}

/* A RECONSTRUCT job for worker w with the rows that fall into its plan. */
static rtomod_job *reconstruct_job(rtomod *d, const rtomod_scan *scan, int w,
                                   const int *rows, int n_rows,
                                   const int roi[4], const set_info *set)
{
    const rtomod_tomo_scan *t = scan->tomo;
    rtomod_job *job = rtomod_job_new(RTOMOD_JOB_TOMO_RECONSTRUCT,
                                     scan->serial, scan->id);
    if (!job)
        return NULL;
    rtomod_tomo_reconstruct_job *rc = &job->u.recon;
    rc->rows = malloc(sizeof(int) * (size_t)(n_rows + 1));
    rc->set_index = malloc(sizeof(int) * (size_t)(n_rows + 1));
    if (!rc->rows || !rc->set_index) {
        rtomod_job_free(job);
        return NULL;
    }
    for (int i = 0; i < n_rows; i++) {
        if (rows[i] >= t->kept_first[w] && rows[i] <= t->kept_last[w]) {
            rc->rows[rc->n_rows] = rows[i];
            rc->set_index[rc->n_rows++] = i;
        }
    }
    rc->set_count = n_rows;
    memcpy(rc->roi, roi, sizeof rc->roi);
    rc->interp = t->spec->given & RTOMO_SPEC_HAS_INTERP
                     ? t->spec->geometry.interp
                     : d->cfg.reconstruction.interpolation;
    rc->batch = d->cfg.reconstruction.batch;
    rc->frame = set->frame;
    rc->projection_first = set->projection_first;
    rc->projection_last = set->projection_last;
    rc->angle_first = set->angle_first;
    rc->angle_last = set->angle_last;
    rc->close_plan = set->close_plan;
    memcpy(rc->planes, d->planes, sizeof d->planes);
    rc->n_planes = d->n_planes;
    rc->plane_parts = plane_workers(d, t);
    job->t_input = set->t_input;
    return job;
}

/* Drop the rows of this daemon that no plan kept (they cannot be
 * reconstructed; rows of other daemons stay, to number the set); returns
 * how many remain. */
static int keep_covered(const rtomod *d, const rtomod_tomo_scan *t,
                        int *rows, int n_rows)
{
    int kept = 0;
    for (int i = 0; i < n_rows; i++) {
        int covered = !own_row(d, rows[i]);
        for (int w = 0; w < d->pool.n && !covered; w++)
            covered = rows[i] >= t->kept_first[w] && rows[i] <= t->kept_last[w];
        if (covered)
            rows[kept++] = rows[i];
    }
    return kept;
}

/* Queue the back-projection of the slices selected now (scan settings,
 * else the configuration) on every worker holding rows.  Returns the
 * number of jobs queued (each posts one SET_DONE), or -1 when out of
 * memory for the slice list. */
static int queue_reconstruction(rtomod *d, rtomod_scan *scan,
                                const set_info *set)
{
    rtomod_tomo_scan *t = scan->tomo;
    int *rows, n_rows, roi[4];
    if (rows_now(d, scan, &rows, &n_rows) != 0) {
        rtomod_publish_event(&d->pub, RTOMOD_LOG_ERROR, "error", scan->id, -1,
                             "internal", "out of memory for the slice list");
        return -1;
    }
    int covered = keep_covered(d, t, rows, n_rows);
    if (covered < n_rows)
        rtomod_publish_event(&d->pub, RTOMOD_LOG_WARN, "error", scan->id, -1,
                             "slices_unavailable", "%d of the %d selected "
                             "slices lie outside the rows kept since "
                             "scan_begin and are skipped", n_rows - covered,
                             n_rows);
    n_rows = covered;
    roi_now(d, scan, roi);
    int parts = 0;
    for (int w = 0; w < d->pool.n; w++) {
        if (t->kept_first[w] < 0)
            continue;
        rtomod_job *job = reconstruct_job(d, scan, w, rows, n_rows, roi, set);
        if (!job) {
            rtomod_publish_event(&d->pub, RTOMOD_LOG_ERROR, "error", scan->id,
                                 -1, "internal", "out of memory for the "
                                 "reconstruction of worker %d", w);
            continue;
        }
        rtomod_pool_push(&d->pool, w, job);
        parts++;
    }
    free(rows);
    return parts;
}

/* ------------------------------------------------------- continuous ---- */

static void skip_windows(rtomod *d, rtomod_scan *scan, int64_t first,
                         int64_t count, const char *reason, const char *why)
{
    rtomod_tomo_scan *t = scan->tomo;
    t->windows_skipped += count;
    d->counters.windows_skipped += (uint64_t)count;
    char which[64];
    if (count > 1)
        snprintf(which, sizeof which, "windows %lld to %lld",
                 (long long)first, (long long)(first + count - 1));
    else
        snprintf(which, sizeof which, "window %lld", (long long)first);
    rtomod_publish_event(&d->pub, RTOMOD_LOG_WARN, "window_skipped", scan->id,
                         first, reason, "%s skipped: %s", which, why);
}

/* The window's oldest and newest projections (by index) and their angles
 * in degrees, from the slots as they are now. */
static void window_extent(const rtomod_tomo_scan *t, set_info *set)
{
    int n = t->spec->geometry.n_proj;
    int oldest = -1, newest = -1;
    for (int k = 0; k < n; k++) {
        int64_t i = t->slot_index[k];
        if (i < 0)
            continue;
        if (oldest < 0 || i < t->slot_index[oldest])
            oldest = k;
        if (newest < 0 || i > t->slot_index[newest])
            newest = k;
    }
    set->projection_first = t->slot_index[oldest];
    set->projection_last = t->slot_index[newest];
    set->angle_first = t->slot_angle[oldest] * 180.0 / M_PI;
    set->angle_last = t->slot_angle[newest] * 180.0 / M_PI;
}

static void queue_window(rtomod *d, rtomod_scan *scan, int64_t window)
{
    rtomod_tomo_scan *t = scan->tomo;
    set_info set = {.frame = window, .t_input = d->t_received};
    window_extent(t, &set);
    pending_window *p = calloc(1, sizeof *p);
    int parts = p ? queue_reconstruction(d, scan, &set) : -1;
    if (parts < 0)
        skip_windows(d, scan, window, 1, "internal", "out of memory");
    /* No part: none of the selected slices is this daemon's. */
    if (parts <= 0) {
        free(p);
        return;
    }
    p->window = window;
    p->parts = parts;
    p->t_input = set.t_input;
    p->frames = scan->frames;
    pending_window **tail = &t->pending;
    while (*tail)
        tail = &(*tail)->next;
    *tail = p;
    t->n_pending++;
}

/* Projection `index` of a continuous scan was queued in slot at.slot:
 * queue the window it completes, if any. */
static void continuous_arrival(rtomod *d, rtomod_scan *scan, int64_t index,
                               placement at)
{
    rtomod_tomo_scan *t = scan->tomo;
    int64_t n = t->spec->geometry.n_proj, every = t->spec->window_every;
    t->slot_index[at.slot] = index;
    t->slot_angle[at.slot] = at.angle;
    if (index < n - 1)
        return;
    int64_t window = (index - (n - 1)) / every;
    if (!t->windows_started) {
        /* Windows begin with the first full one. */
        if (t->projections.count < n)
            return;
        t->windows_started = 1;
        t->next_window = window;
    }
    if (window < t->next_window)
        return;                 /* a straggler inside a finished window */
    if (window > t->next_window)
        skip_windows(d, scan, t->next_window, window - t->next_window,
                     "missing_projections", "the projection completing it "
                     "did not arrive before a later one");
    t->next_window = window + 1;
    int bound = d->cfg.reconstruction.window_backlog;
    if (bound > 0 && t->n_pending >= bound) {
        char why[128];
        snprintf(why, sizeof why, "%d windows are still being reconstructed "
                 "(reconstruction.window_backlog); projections are kept",
                 t->n_pending);
        skip_windows(d, scan, window, 1, "backlog", why);
        return;
    }
    queue_window(d, scan, window);
}

int rtomod_tomo_pending_windows(const rtomod_scan *scan)
{
    return scan->kind == RTOMOD_SCAN_TOMO && scan->tomo
               ? scan->tomo->n_pending : 0;
}

/* A worker's part of a window is out; the last part completes it. */
static void window_part_done(rtomod *d, rtomod_scan *scan,
                             const rtomod_result *r)
{
    rtomod_tomo_scan *t = scan->tomo;
    pending_window **link = &t->pending;
    while (*link && (*link)->window != r->frame)
        link = &(*link)->next;
    pending_window *p = *link;
    if (!p || --p->parts > 0)
        return;
    *link = p->next;
    t->n_pending--;
    t->windows++;
    t->frames_used = p->frames;
    d->counters.windows++;
    rtomod_telemetry_latency(d, 1e3 * (rtomod_now() - p->t_input));
    free(p);
}

void rtomod_tomo_plane_part(rtomod *d, rtomod_scan *scan, rtomod_result *r)
{
    rtomod_tomo_scan *t = scan->tomo;
    if (scan->kind != RTOMOD_SCAN_TOMO || !t)
        return;
    plane_sum **link = &t->plane_sums;
    while (*link && ((*link)->frame != r->header.frame ||
                     (*link)->index != r->header.index))
        link = &(*link)->next;
    plane_sum *p = *link;
    const size_t n = r->size / sizeof(float);
    if (!p) {
        /* The first part: the sum starts as a copy of it. */
        p = calloc(1, sizeof *p);
        rtomod_buffer *buf = p ? rtomod_buffer_new(r->size) : NULL;
        if (!buf) {
            free(p);
            rtomod_publish_event(&d->pub, RTOMOD_LOG_ERROR, "error", scan->id,
                                 r->header.frame, "internal", "out of memory "
                                 "for plane %d", r->header.index);
            return;
        }
        memcpy(buf->data, r->data, r->size);
        p->frame = r->header.frame;
        p->index = r->header.index;
        p->remaining = plane_workers(d, t);
        p->image = *r;
        p->image.kind = RTOMOD_RESULT_IMAGE;
        p->image.buffer = buf;
        p->image.data = buf->data;
        p->image.next = NULL;
        *link = p;
    } else {
        float *sum = (float *)p->image.buffer->data;
        const float *part = r->data;
        for (size_t i = 0; i < n; i++)
            sum[i] += part[i];
        if (r->t_input > p->image.t_input)
            p->image.t_input = r->t_input;
    }
    if (--p->remaining > 0)
        return;
    *link = p->next;
    /* The finisher measured none of it: parts are not images. */
    rtomod_image_stats(p->image.data, 0, n, &p->image.header);
    rtomod_publish_result(d, scan, &p->image);
    free(p);
}

void rtomod_tomo_end_note(const rtomod_scan *scan, char *out, size_t size)
{
    if (scan->cone) {
        rtomod_cone_end_note(scan, out, size);
        return;
    }
    const rtomod_tomo_scan *t = scan->tomo;
    out[0] = '\0';
    if (!t->spec->axis_auto)
        return;
    if (isfinite(t->axis_found))
        snprintf(out, size, "; axis %.3f (found)", t->axis_found);
    else
        snprintf(out, size, "; axis not found (the detector's centre)");
}

/* A continuous stream's axis measured at a window: drift telemetry
 * always, an event when the window moved to it. */
static void axis_measured(rtomod *d, rtomod_scan *scan, const rtomod_result *r)
{
    rtomod_tomo_scan *t = scan->tomo;
    if (t->axis_measured++ == 0)
        t->axis_first = r->axis;
    rtomod_telemetry *tm = &d->telemetry;
    snprintf(tm->axis_scan, sizeof tm->axis_scan, "%s", scan->id);
    tm->axis = r->axis;
    tm->axis_quality = r->axis_quality;
    tm->axis_drift = r->axis - t->axis_first;
    tm->axis_window = r->frame;
    tm->axis_applied = r->axis_applied;
    if (r->axis_applied)
        rtomod_publish_event(&d->pub, RTOMOD_LOG_INFO, "axis_found", scan->id,
                             r->frame, "axis_moved", "rotation axis %.3f bins "
                             "(quality %.3f, %+.3f since the first "
                             "measurement) from window %lld on", r->axis,
                             r->axis_quality, tm->axis_drift,
                             (long long)r->frame);
}

void rtomod_tomo_axis_found(rtomod *d, rtomod_scan *scan,
                            const rtomod_result *r)
{
    rtomod_tomo_scan *t = scan->tomo;
    if (scan->kind != RTOMOD_SCAN_TOMO || !t)
        return;
    t->axis_found = r->axis;
    t->axis_quality = r->axis_quality;
    d->last_axis = r->axis;
    d->last_axis_width = t->spec->geometry.det_width;
    if (r->frame >= 0) {
        axis_measured(d, scan, r);
        return;
    }
    rtomod_publish_event(&d->pub, RTOMOD_LOG_INFO, "axis_found", scan->id, -1,
                         NULL, "rotation axis %.3f bins (quality %.3f), from "
                         "%d pairs of opposed projections", r->axis,
                         r->axis_quality, t->n_axis_pairs);
}

void rtomod_tomo_set_done(rtomod *d, rtomod_scan *scan, const rtomod_result *r)
{
    if (r->t_ready > 0)
        d->telemetry.last_ready_ms = 1e3 * (r->t_ready - r->t_input);
    if (r->frame >= 0)
        window_part_done(d, scan, r);
    else
        rtomod_telemetry_latency(d, 1e3 * (rtomod_now() - r->t_input));
}

/* -------------------------------------------------------------- end ---- */

long rtomod_tomo_missing(const rtomod_scan *scan)
{
    if (scan->cone)
        return rtomod_cone_missing(scan);
    const rtomod_tomo_scan *t = scan->tomo;
    return t->spec->continuous ? 0 : t->spec->geometry.n_proj -
                                         (long)t->projections.count;
}

long rtomod_tomo_frames_used(const rtomod_scan *scan)
{
    return scan->tomo ? scan->tomo->frames_used : 0;
}

void rtomod_tomo_finish(rtomod *d, rtomod_scan *scan)
{
    if (scan->cone) {
        rtomod_cone_finish(d, scan);
        return;
    }
    if (scan->failed) {
        rtomod_scan_finish(d, scan, rtomod_scan_close_plans(d, scan, 1));
        return;
    }
    if (scan->tomo->spec->continuous) {
        /* The windows queued so far still come out: CLOSE jobs queue
         * behind them. */
        log_info("scan %s: continuous stream ended after %ld frames, %ld "
                 "windows", scan->id, scan->frames, scan->tomo->windows);
        rtomod_scan_finish(d, scan, rtomod_scan_close_plans(d, scan, 0));
        return;
    }
    report_missing(d, scan);
    set_info set = {.frame = -1, .projection_first = -1,
                    .projection_last = -1, .angle_first = NAN,
                    .angle_last = NAN, .t_input = scan->t_last_input,
                    .close_plan = 1};
    int parts = queue_reconstruction(d, scan, &set);
    if (parts < 0) {
        rtomod_scan_finish(d, scan, rtomod_scan_close_plans(d, scan, 1));
        return;
    }
    log_info("scan %s: ended after %ld frames; reconstructing", scan->id,
             scan->frames);
    rtomod_scan_finish(d, scan, parts);
}

int rtomod_tomo_end(rtomod *d, rtomo_ingest_msg *msg)
{
    rtomod_scan *scan = rtomod_scan_for_input(d, msg, RTOMOD_SCAN_TOMO);
    if (!scan)
        return -1;
    rtomod_scan_request_end(d, scan);
    return 0;
}

void rtomod_tomo_status(const rtomod_scan *scan, json_t *out)
{
    if (scan->cone) {
        rtomod_cone_status(scan, out);
        return;
    }
    const rtomod_tomo_scan *t = scan->tomo;
    int continuous = t->spec->continuous;
    long missing = rtomod_tomo_missing(scan);
    json_object_set_new(out, "mode", json_string(continuous ? "continuous"
                                                            : "scan"));
    json_object_set_new(out, "received", json_integer(t->projections.count));
    json_object_set_new(out, "expected",
                        json_integer(t->spec->geometry.n_proj));
    json_object_set_new(out, "darks", json_integer(t->darks.count));
    if (continuous)
        json_object_set_new(out, "field_sets", json_integer(t->field_sets));
    json_object_set_new(out, "flats", json_integer(t->flats.count));
    json_object_set_new(out, "flats_after",
                        json_integer(t->flats_after.count));
    json_object_set_new(out, "missing", json_integer(missing));
    if (continuous) {
        json_object_set_new(out, "windows", json_integer(t->windows));
        json_object_set_new(out, "windows_skipped",
                            json_integer(t->windows_skipped));
        json_object_set_new(out, "windows_pending",
                            json_integer(t->n_pending));
    }
    int resident = 0, slices = 0;
    for (int w = 0; w < RTOMO_MAX_DEVICES; w++) {
        resident += t->resident[w];
        slices += t->part_count[w];
    }
    const rtomo_fbp_geometry *g = &t->spec->geometry;
    double axis = t->spec->axis_auto ? t->axis_found
                  : isnan(g->axis) ? 0.5 * (g->det_width - 1) : g->axis;
    json_object_set_new(out, "axis", isfinite(axis) ? json_real(axis)
                                                    : json_null());
    json_object_set_new(out, "axis_auto", json_boolean(t->spec->axis_auto));
    json_object_set_new(out, "field_of_view",
                        json_string(rtomo_fov_name(t->field_of_view)));
    json_object_set_new(out, "phase", t->phase.delta_beta > 0.0
        ? json_pack("{s:f, s:f, s:f, s:f}", "delta_beta", t->phase.delta_beta,
                    "energy_kev", t->phase.energy_kev, "distance_m",
                    t->phase.distance_m, "pixel_m", t->phase.pixel_m)
        : json_null());
    json_object_set_new(out, "rings", json_pack("{s:s, s:i}", "method",
                        rtomo_rings_name(t->rings), "width", t->rings_width));
    const rtomo_method_settings *m = &t->method;
    json_object_set_new(out, "method", m->method == RTOMO_METHOD_FBP
        ? json_pack("{s:s}", "name", "fbp")
        : json_pack("{s:s, s:i, s:i, s:f, s:b, s:b}", "name",
                    rtomo_method_name(m->method), "iterations", m->iterations,
                    "publish_every", m->publish_every, "tolerance",
                    m->tolerance, "nonnegative", m->nonnegative,
                    "warm_start", m->warm_start));
    json_object_set_new(out, "resident", json_pack(
        "{s:i, s:i, s:s}", "slices", resident, "of", slices,
        "mode", scan->start_reason[0] ? scan->start_reason : "none"));
}
