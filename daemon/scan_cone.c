/*
 * scan_cone.c — cone-beam scans in rtomod ("beam": "cone", PROTOCOL.md
 * 3.13).  A cone-beam scan is a tomography scan (kind "tomo", the same
 * messages and the same life) whose record holds this file's state
 * instead of scan_tomo.c's: scan_tomo.c's entry points hand it over here.
 *
 * The begin creates an FDK plan (kernels/cone) on the workers, each for
 * a z-slab of the volume's ROI: contiguous slabs of nearly equal
 * thickness, one per worker (one per GPU), so several GPUs share the
 * back-projection, which is nearly all of the work.  Every frame goes to
 * every slab's worker (ZeroMQ shares the message, no copy); each worker
 * normalises and filters the whole projection (a small share of the
 * work) and back-projects it into its slab as chunks fill, while the scan
 * is acquired.  When a slab would lie outside the cone of rays that
 * reaches the detector (the engine refuses such a ROI), the whole volume
 * goes to one worker instead.
 *
 * The end queues a finishing CLOSE on each slab's worker: it back-projects
 * the last chunk, reads the slab and publishes its z-slices on topic
 * "slice", numbered over the whole ROI; scan_complete follows the last.
 * With the daemon's HDF5 output on, the slices make the scan's file.
 *
 * reconstruction.method "sirt" or "cgls" solves the volume after its FDK
 * with the separable-footprint pair (worker_cone_iter.c) on every GPU of
 * the daemon: the engine splits the pair's volume in z slabs over them
 * and keeps the sinograms on the first.  The FDK of such a scan stays
 * one slab on one worker (worker 0, whose GPU is the pair's first): that
 * worker keeps every projection's line integrals and starts the solve
 * from its FDK volume, with no slabs to gather from other threads, and
 * FDK's single back-projection, done while the frames come, is small
 * beside the solve's two passes per iteration.  The claim is per GPU:
 * worker 0's the FDK plan, the sinograms and its share of the pair, each
 * other worker's its share (so a solve too large for one GPU is admitted
 * when the shares fit).
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rtomod.h"
#include "rtomo_proto_cone.h"

/* Darks and flats: duplicates are recognised among this many indices. */
#define FIELD_INDEX_WINDOW 4096

struct rtomod_cone_scan {
    rtomo_scan_spec *spec;          /* owned */
    rtomo_cone_geometry geometry;   /* composed, ROI sizes filled in;
                                       angles point into spec */
    rtomod_seen projections, darks, flats;
    int projections_started;
    rtomo_method_settings method;   /* composed: fbp (FDK) or a solve */
    int n_slabs;                    /* workers 0 .. n_slabs - 1 */
    int slab_first[RTOMO_MAX_DEVICES];  /* z within the ROI */
    int slab_count[RTOMO_MAX_DEVICES];
    int n_solve_gpus;               /* a solve's GPUs (0: the CPU) */
    int solve_gpus[RTOMO_MAX_DEVICES];  /* device indices, worker order */
    rtomod_cone_solve_plan solve;   /* resident or streamed, as claimed */
};

void rtomod_cone_free(rtomod_cone_scan *c)
{
    if (!c)
        return;
    if (c->spec) {
        rtomo_scan_spec_clear(c->spec);
        free(c->spec);
    }
    rtomod_seen_free(&c->projections);
    rtomod_seen_free(&c->darks);
    rtomod_seen_free(&c->flats);
    free(c);
}

/* ------------------------------------------------------------ begin ---- */

/* The scan's geometry with the configured filter where it gave none, and
 * the ROI's sizes made explicit. */
static void compose_geometry(const rtomod_config *cfg,
                             const rtomo_scan_spec *spec,
                             rtomo_cone_geometry *g)
{
    rtomo_proto_cone_geometry(spec, g);
    if (!(spec->given & RTOMO_SPEC_HAS_WINDOW))
        g->window = cfg->reconstruction.filter;
    if (!(spec->given & RTOMO_SPEC_HAS_CUTOFF))
        g->cutoff = cfg->reconstruction.cutoff;
    if (g->roi_nx == 0) {
        g->roi_x = g->roi_y = g->roi_z = 0;
        g->roi_nx = g->nx;
        g->roi_ny = g->ny;
        g->roi_nz = g->nz;
    }
}

/* Slab w of n: the geometry whose ROI is its z range. */
static rtomo_cone_geometry slab_geometry(const rtomod_cone_scan *c, int w)
{
    rtomo_cone_geometry g = c->geometry;
    g.roi_z += c->slab_first[w];
    g.roi_nz = c->slab_count[w];
    return g;
}

/* One slab per worker (at most one per slice); one slab for the whole
 * ROI when the engine refuses a thinner one. */
static void split_slabs(rtomod *d, rtomod_cone_scan *c)
{
    int nz = c->geometry.roi_nz;
    int n = d->pool.n < nz ? d->pool.n : nz;
    if (c->method.method != RTOMO_METHOD_FBP)
        n = 1;                  /* the solve projects the whole ROI */
    for (;;) {
        c->n_slabs = n;
        int ok = 1;
        for (int w = 0; w < n; w++) {
            c->slab_first[w] = (int)((long)nz * w / n);
            c->slab_count[w] = (int)((long)nz * (w + 1) / n) -
                               c->slab_first[w];
            rtomo_cone_geometry g = slab_geometry(c, w);
            rtomo_error err;
            ok &= rtomo_cone_geometry_validate(&g, &err) == RTOMO_OK;
        }
        if (ok || n == 1)
            return;
        n = 1;
    }
}

/* A solve's GPUs: every GPU of the daemon, in the workers' order, so
 * that the pair's first (which holds its sinograms) is the GPU of worker
 * 0, whose slab the FDK is; none with the CPU backend. */
static void choose_solve_gpus(const rtomod *d, rtomod_cone_scan *c)
{
    c->n_solve_gpus = 0;
    if (c->method.method == RTOMO_METHOD_FBP)
        return;
    for (int i = 0; i < d->n_gpus; i++)
        c->solve_gpus[c->n_solve_gpus++] = d->gpus[i].index;
}

/* Slices a worker reads out and publishes as one unit, and such units
 * alive at once: one being read, those in its finisher and a few being
 * sent (worker_cone.c, worker.c's buffers_kept). */
#define SLICES_PER_UNIT 16

/* The buffers a slab's slices are read out into while they are
 * published: a unit each. */
static size_t out_bytes(const rtomod *d, const rtomo_cone_geometry *g)
{
    const int buffers = d->cfg.publish.stats_threads + 1 + 3;
    int unit = g->roi_nz < SLICES_PER_UNIT ? g->roi_nz : SLICES_PER_UNIT;
    return sizeof(float) * (size_t)g->roi_nx * (size_t)g->roi_ny *
           (size_t)unit * (size_t)buffers;
}

/* The memory of the slabs' plans, or of a solve's (budget_cone.c), which
 * also decides whether the solve is resident on the GPUs or streamed
 * through them. */
static void estimate(const rtomod *d, rtomod_cone_scan *c,
                     rtomod_budget_claim *claim)
{
    memset(claim, 0, sizeof *claim);
    if (c->method.method != RTOMO_METHOD_FBP) {
        /* One slab, worker 0's; the pair over every GPU. */
        rtomo_cone_geometry g = slab_geometry(c, 0);
        rtomod_budget_cone_solve(&g, c->n_solve_gpus, out_bytes(d, &g),
                                 d->budget.device_limit, claim, &c->solve);
        return;
    }
    for (int w = 0; w < c->n_slabs; w++) {
        rtomo_cone_geometry g = slab_geometry(c, w);
        size_t host, device;
        rtomod_budget_cone_part(&g, d->n_gpus > 0, out_bytes(d, &g), &host,
                                &device);
        claim->host = claim->host > SIZE_MAX - host ? SIZE_MAX
                                                    : claim->host + host;
        claim->device[w] = device;
    }
}

static rtomod_job *begin_job(const rtomod_scan *scan,
                             const rtomod_cone_scan *c, int w)
{
    rtomod_job *job = rtomod_job_new(RTOMOD_JOB_CONE_BEGIN, scan->serial,
                                     scan->id);
    if (!job)
        return NULL;
    rtomod_cone_begin_job *b = &job->u.cone;
    b->geometry = slab_geometry(c, w);
    b->geometry.angles = NULL;
    b->kernel = RTOMO_CONE_KERNEL_AUTO;
    b->set_first = c->slab_first[w];
    b->set_count = c->geometry.roi_nz;
    b->method = c->method;
    b->n_solve_devices = w == 0 ? c->n_solve_gpus : 0;
    memcpy(b->solve_devices, c->solve_gpus, sizeof b->solve_devices);
    b->solve_device_budget = c->solve.device_budget;
    if (c->geometry.angles) {
        size_t bytes = sizeof(double) * (size_t)c->geometry.n_proj;
        double *angles = malloc(bytes);
        if (!angles) {
            rtomod_job_free(job);
            return NULL;
        }
        memcpy(angles, c->geometry.angles, bytes);
        b->geometry.angles = angles;
    }
    return job;
}

/* Queue every slab's begin job; -1 (nothing queued) when out of memory. */
static int create_plans(rtomod *d, rtomod_scan *scan)
{
    rtomod_cone_scan *c = scan->cone;
    rtomod_job *jobs[RTOMO_MAX_DEVICES] = {0};
    for (int w = 0; w < c->n_slabs; w++)
        if (!(jobs[w] = begin_job(scan, c, w))) {
            for (int i = 0; i < w; i++)
                rtomod_job_free(jobs[i]);
            return -1;
        }
    for (int w = 0; w < c->n_slabs; w++)
        rtomod_scan_push(d, scan, w, jobs[w]);
    return 0;
}

static rtomod_cone_scan *cone_new(rtomo_scan_spec *spec)
{
    rtomod_cone_scan *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    if (rtomod_seen_init(&c->projections, spec->geometry.n_proj) != 0 ||
        rtomod_seen_init(&c->darks, FIELD_INDEX_WINDOW) != 0 ||
        rtomod_seen_init(&c->flats, FIELD_INDEX_WINDOW) != 0) {
        rtomod_cone_free(c);
        return NULL;
    }
    return c;
}

/* Add a clause to scan_started's note (cut at its size). */
static void note(rtomod_scan *scan, const char *text)
{
    size_t used = strlen(scan->start_note);
    snprintf(scan->start_note + used, sizeof scan->start_note - used, "%s",
             text);
}

/* Where a solve runs: ", on GPU 0" or ", on GPUs 0,1" (device indices);
 * nothing on the CPU. */
static void note_solve_gpus(rtomod_scan *scan)
{
    const rtomod_cone_scan *c = scan->cone;
    if (c->n_solve_gpus < 1)
        return;
    char text[64];
    size_t used = (size_t)snprintf(text, sizeof text, ", on GPU%s ",
                                   c->n_solve_gpus > 1 ? "s" : "");
    for (int i = 0; i < c->n_solve_gpus && used < sizeof text; i++)
        used += (size_t)snprintf(text + used, sizeof text - used, "%s%d",
                                 i ? "," : "", c->solve_gpus[i]);
    note(scan, text);
    if (c->solve.stream_slices > 0) {
        char streamed[64];
        snprintf(streamed, sizeof streamed, ", streamed in slabs of %d",
                 c->solve.stream_slices);
        note(scan, streamed);
    }
}

/* What scan_started says of the scan. */
static void note_start(rtomod *d, rtomod_scan *scan)
{
    const rtomod_cone_scan *c = scan->cone;
    const rtomo_cone_geometry *g = &c->geometry;
    snprintf(scan->start_reason, sizeof scan->start_reason, "streaming");
    snprintf(scan->start_note, sizeof scan->start_note,
             "cone beam: FDK of %dx%dx%d voxels of %g from %d projections, "
             "back-projected as they arrive", g->roi_nx, g->roi_ny,
             g->roi_nz, g->voxel, g->n_proj);
    if (c->n_slabs > 1)
        note(scan, ", in z-slabs on several workers");
    const rtomo_method_settings *m = &c->method;
    if (m->method != RTOMO_METHOD_FBP) {
        char text[160];
        snprintf(text, sizeof text, "; method: %s after fdk, %d iterations"
                 "%s%s, published %s", rtomo_method_name(m->method),
                 m->iterations, m->tolerance > 0 ? " at most" : "",
                 m->warm_start ? " from the fdk volume" : " from zero",
                 m->publish_every > 0 ? "progressively" : "at the end");
        note(scan, text);
        note_solve_gpus(scan);
    } else if (d->cfg.reconstruction.method.method != RTOMO_METHOD_FBP) {
        note(scan, "; method: fdk (the configured iterative method is for "
                   "parallel beams; a cone-beam scan asks for its own)");
    }
}

/* The scan's HDF5 file (rtomod_output.h): its z-slices are the stack
 * (detector_row holds each slice's z index), the geometry the
 * parameters. */
static void open_output(rtomod *d, rtomod_scan *scan)
{
    const rtomod_cone_scan *c = scan->cone;
    const rtomo_cone_geometry *g = &c->geometry;
    json_t *angles = json_array();
    for (int p = 0; p < g->n_proj; p++)
        json_array_append_new(angles, json_real(rtomo_cone_angle(g, p) *
                                                180.0 / M_PI));
    json_t *meta = json_pack(
        "{s:s, s:{s:i, s:i}, s:i, s:i, s:s, s:f, s:f, s:f, s:[f, f], "
        "s:[f, f], s:f, s:[i, i, i], s:[i, i, i, i, i, i], s:i, s:i, s:s, "
        "s:s, s:o}",
        "beam", "cone", "detector", "width", g->det_u, "height", g->det_v,
        "projections", g->n_proj, "slices", g->roi_nz,
        "filter", rtomo_window_name(g->window),
        "cutoff", g->cutoff > 0 ? g->cutoff : 1.0,
        "source_to_axis", g->sad, "source_to_detector", g->sdd,
        "pitch", g->pitch_u, g->pitch_v, "offset", g->offset_u, g->offset_v,
        "voxel", g->voxel, "volume", g->nx, g->ny, g->nz,
        "roi", g->roi_x, g->roi_y, g->roi_z, g->roi_nx, g->roi_ny, g->roi_nz,
        "darks", c->spec->n_darks, "flats", c->spec->n_flats,
        "dtype", rtomo_dtype_name(c->spec->dtype),
        "method", c->method.method == RTOMO_METHOD_FBP
                      ? "fdk" : rtomo_method_name(c->method.method),
        "rotation_angle", angles);
    scan->output_file = rtomod_output_open_tomo(
        d->output, scan->serial, scan->id, meta, d->begin_header,
        d->begin_header_size);
}

int rtomod_cone_begin(rtomod *d, rtomo_ingest_msg *msg)
{
    if (!rtomod_scan_may_begin(d, msg))
        return -1;
    rtomo_cone_geometry g;
    compose_geometry(&d->cfg, msg->scan_spec, &g);
    rtomo_error err;
    if (rtomo_cone_geometry_validate(&g, &err) != RTOMO_OK) {
        rtomod_rejectf(d, RTOMO_REJECT_GEOMETRY, msg->scan, -1,
                       "with the configured reconstruction settings: %s",
                       err.message);
        return -1;
    }
    size_t slice = sizeof(float) * (size_t)g.roi_nx * (size_t)g.roi_ny;
    if (rtomod_scan_check_image(d, msg->scan, slice, "slices") != 0)
        return -1;
    rtomod_scan *scan = rtomod_scan_new(d, RTOMOD_SCAN_TOMO, msg->scan);
    if (!scan || !(scan->cone = cone_new(msg->scan_spec))) {
        rtomod_scan_free(scan);
        rtomod_rejectf(d, RTOMO_REJECT_BUDGET, msg->scan, -1, "out of memory "
                       "for a cone-beam scan");
        return -1;
    }
    rtomod_cone_scan *c = scan->cone;
    c->geometry = g;
    /* FDK ("fbp") when the scan names no method: the daemon's configured
     * method is for parallel beams, and a solve of a whole volume is
     * asked for, not a default. */
    rtomod_scan_method(&d->cfg, msg->scan_spec, RTOMO_METHOD_FBP, &c->method);
    split_slabs(d, c);
    choose_solve_gpus(d, c);
    char what[160];
    snprintf(what, sizeof what, "a cone-beam scan of %dx%dx%d voxels from %d "
             "projections of %dx%d", g.roi_nx, g.roi_ny, g.roi_nz, g.n_proj,
             g.det_u, g.det_v);
    estimate(d, c, &scan->claim);
    if (rtomod_scan_admit(d, scan, what) != 0) {
        rtomod_scan_free(scan);
        return -1;
    }
    if (create_plans(d, scan) != 0) {
        rtomod_scan_free(scan);
        rtomod_rejectf(d, RTOMO_REJECT_BUDGET, msg->scan, -1, "out of memory "
                       "for the scan's plans");
        return -1;
    }
    c->spec = msg->scan_spec;   /* the scan owns it now; */
    msg->scan_spec = NULL;
    c->geometry.angles = c->spec->geometry.angles;  /* the same list */
    note_start(d, scan);
    if (d->output)
        open_output(d, scan);
    rtomod_scan_activate(d, scan);
    log_info("scan %s: cone beam, %dx%d detector, %d projections, volume "
             "%dx%dx%d in %d slab(s); a solve on %d GPU(s)", scan->id,
             g.det_u, g.det_v, g.n_proj, g.roi_nx, g.roi_ny, g.roi_nz,
             c->n_slabs, c->n_solve_gpus);
    return 0;
}

/* ----------------------------------------------------------- frames ---- */

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

/* A frame's own fields that a cone beam cannot honour. */
static int check_frame_fields(rtomod *d, const rtomo_ingest_msg *msg)
{
    const char *field = !isnan(msg->frame.angle)        ? "angle"
                        : !isnan(msg->frame.axis_shift) ? "axis_shift"
                                                        : NULL;
    if (!field)
        return 0;
    rtomod_rejectf(d, RTOMO_REJECT_FIELD, msg->scan, msg->frame.index,
                   "field \"%s\" of a cone-beam projection: FDK takes the "
                   "angles of scan_begin (each projection's weights depend "
                   "on all of them) and has no axis corrections", field);
    return -1;
}

/* Which job a frame makes, after its index is marked; -1 when rejected. */
static int frame_kind(rtomod *d, rtomod_cone_scan *c,
                      const rtomo_ingest_msg *msg, rtomod_job_kind *kind)
{
    if (msg->type == RTOMO_MSG_PROJECTION) {
        if (check_frame_fields(d, msg) != 0 ||
            mark_index(d, &c->projections, msg) != 0)
            return -1;
        c->projections_started = 1;
        *kind = RTOMOD_JOB_TOMO_PROJECTION;
        return 0;
    }
    if (c->projections_started) {
        rtomod_rejectf(d, RTOMO_REJECT_STATE, msg->scan, msg->frame.index,
                       "%s frames of a cone-beam scan must come before its "
                       "first projection", rtomo_msg_type_name(msg->type));
        return -1;
    }
    int dark = msg->type == RTOMO_MSG_DARK;
    if (mark_index(d, dark ? &c->darks : &c->flats, msg) != 0)
        return -1;
    *kind = dark ? RTOMOD_JOB_TOMO_DARK : RTOMOD_JOB_TOMO_FLAT;
    return 0;
}

/* Queue the frame on every slab's worker: copies of the message share
 * its data. */
static int queue_frame(rtomod *d, rtomod_scan *scan, rtomod_job_kind kind,
                       const rtomo_ingest_msg *msg, zmq_msg_t *payload)
{
    const rtomod_cone_scan *c = scan->cone;
    rtomod_job *jobs[RTOMO_MAX_DEVICES] = {0};
    for (int w = 0; w < c->n_slabs; w++) {
        zmq_msg_t copy;
        zmq_msg_init(&copy);
        zmq_msg_copy(&copy, payload);
        jobs[w] = rtomod_frame_job(d, kind, scan, &msg->frame, &copy);
        zmq_msg_close(&copy);
        if (!jobs[w]) {
            for (int i = 0; i < w; i++)
                rtomod_job_free(jobs[i]);
            rtomod_rejectf(d, RTOMO_REJECT_OVERSIZE, msg->scan,
                           msg->frame.index, "out of memory for a job");
            return -1;
        }
    }
    for (int w = 0; w < c->n_slabs; w++)
        rtomod_scan_push(d, scan, w, jobs[w]);
    return 0;
}

int rtomod_cone_frame(rtomod *d, rtomod_scan *scan, rtomo_ingest_msg *msg,
                      zmq_msg_t *payload)
{
    rtomod_cone_scan *c = scan->cone;
    rtomo_reject_info why;
    if (rtomo_proto_check_tomo_frame(&msg->frame, c->spec, &why) != 0) {
        rtomod_reject(d, &why, msg->scan, msg->frame.index);
        return -1;
    }
    rtomod_job_kind kind;
    if (frame_kind(d, c, msg, &kind) != 0)
        return -1;
    if (queue_frame(d, scan, kind, msg, payload) != 0) {
        /* Refused after all: not received, so missing (and resendable). */
        rtomod_seen_unmark(kind == RTOMOD_JOB_TOMO_PROJECTION ? &c->projections
                           : kind == RTOMOD_JOB_TOMO_DARK     ? &c->darks
                                                              : &c->flats,
                           msg->frame.index);
        return -1;
    }
    scan->frames++;
    scan->t_last_input = rtomod_now();
    /* The last announced dark or flat: projections that overtook it may
     * go now. */
    if (kind != RTOMOD_JOB_TOMO_PROJECTION && !rtomod_cone_awaits_fields(scan))
        rtomod_ingest_replay_early(d, scan->id);
    if (scan->end_pending && rtomod_cone_complete(scan))
        rtomod_scan_end_now(d, scan);
    return 0;
}

/* -------------------------------------------------------------- end ---- */

int rtomod_cone_awaits_fields(const rtomod_scan *scan)
{
    const rtomod_cone_scan *c = scan->cone;
    return !c->projections_started && (c->darks.count < c->spec->n_darks ||
                                       c->flats.count < c->spec->n_flats);
}

int rtomod_cone_complete(const rtomod_scan *scan)
{
    const rtomod_cone_scan *c = scan->cone;
    return c->projections.count == c->geometry.n_proj;
}

long rtomod_cone_missing(const rtomod_scan *scan)
{
    const rtomod_cone_scan *c = scan->cone;
    return c->geometry.n_proj - (long)c->projections.count;
}

static void report_missing(rtomod *d, const rtomod_scan *scan)
{
    const rtomod_cone_scan *c = scan->cone;
    int n_proj = c->geometry.n_proj;
    long missing = rtomod_cone_missing(scan);
    if (missing == 0)
        return;
    char list[160] = "";
    size_t used = 0;
    int64_t first = -1;
    int listed = 0;
    for (int p = 0; p < n_proj && listed < 16 && used < sizeof list; p++) {
        if (rtomod_seen_has(&c->projections, p))
            continue;
        if (first < 0)
            first = p;
        used += (size_t)snprintf(list + used, sizeof list - used, "%s%d",
                                 listed ? ", " : "", p);
        listed++;
    }
    rtomod_publish_event(&d->pub, RTOMOD_LOG_WARN, "missing_projections",
                         scan->id, first, "missing_projections",
                         "%ld of %d projections missing (first: %s%s); "
                         "reconstructing without them", missing, n_proj, list,
                         missing > listed ? ", ..." : "");
}

/* A finishing CLOSE on every slab's worker, latency counted from the
 * scan's last input.  Returns how many were queued, or -1 (none) when
 * out of memory. */
static int queue_finish(rtomod *d, rtomod_scan *scan)
{
    const rtomod_cone_scan *c = scan->cone;
    rtomod_job *jobs[RTOMO_MAX_DEVICES] = {0};
    for (int w = 0; w < c->n_slabs; w++) {
        if (!(jobs[w] = rtomod_job_new(RTOMOD_JOB_CLOSE, scan->serial,
                                       scan->id))) {
            for (int i = 0; i < w; i++)
                rtomod_job_free(jobs[i]);
            return -1;
        }
        jobs[w]->u.abort = 0;
        jobs[w]->t_input = scan->t_last_input;
    }
    for (int w = 0; w < c->n_slabs; w++)
        rtomod_scan_push(d, scan, w, jobs[w]);
    return c->n_slabs;
}

void rtomod_cone_finish(rtomod *d, rtomod_scan *scan)
{
    int parts = scan->failed ? -1 : queue_finish(d, scan);
    if (parts < 0) {
        if (!scan->failed) {
            scan->failed = 1;
            snprintf(scan->failure, sizeof scan->failure, "out of memory "
                     "finishing the scan");
        }
        rtomod_scan_finish(d, scan, rtomod_scan_close_plans(d, scan, 1));
        return;
    }
    report_missing(d, scan);
    log_info("scan %s: ended after %ld frames; finishing the cone-beam "
             "volume", scan->id, scan->frames);
    rtomod_scan_finish(d, scan, parts);
}

void rtomod_cone_end_note(const rtomod_scan *scan, char *out, size_t size)
{
    const rtomo_cone_geometry *g = &scan->cone->geometry;
    snprintf(out, size, "; cone beam, FDK of %dx%dx%d voxels", g->roi_nx,
             g->roi_ny, g->roi_nz);
}

/* The solve's GPUs (device indices; empty on the CPU). */
static json_t *solve_gpus(const rtomod_cone_scan *c)
{
    json_t *a = json_array();
    for (int i = 0; i < c->n_solve_gpus; i++)
        json_array_append_new(a, json_integer(c->solve_gpus[i]));
    return a;
}

void rtomod_cone_status(const rtomod_scan *scan, json_t *out)
{
    const rtomod_cone_scan *c = scan->cone;
    const rtomo_cone_geometry *g = &c->geometry;
    json_object_set_new(out, "mode", json_string("scan"));
    json_object_set_new(out, "beam", json_string("cone"));
    json_object_set_new(out, "received", json_integer(c->projections.count));
    json_object_set_new(out, "expected", json_integer(g->n_proj));
    json_object_set_new(out, "darks", json_integer(c->darks.count));
    json_object_set_new(out, "flats", json_integer(c->flats.count));
    json_object_set_new(out, "flats_after", json_integer(0));
    json_object_set_new(out, "missing",
                        json_integer(rtomod_cone_missing(scan)));
    json_object_set_new(out, "volume", json_pack("[i, i, i]", g->nx, g->ny,
                                                 g->nz));
    json_object_set_new(out, "roi", json_pack("[i, i, i, i, i, i]", g->roi_x,
                                              g->roi_y, g->roi_z, g->roi_nx,
                                              g->roi_ny, g->roi_nz));
    json_object_set_new(out, "voxel", json_real(g->voxel));
    json_object_set_new(out, "slabs", json_integer(c->n_slabs));
    json_object_set_new(out, "axis", json_null());
    json_object_set_new(out, "axis_auto", json_false());
    const rtomo_method_settings *m = &c->method;
    json_object_set_new(out, "method", m->method == RTOMO_METHOD_FBP
        ? json_pack("{s:s}", "name", "fdk")
        : json_pack("{s:s, s:i, s:i, s:f, s:b, s:b, s:o, s:i}", "name",
                    rtomo_method_name(m->method), "iterations", m->iterations,
                    "publish_every", m->publish_every, "tolerance",
                    m->tolerance, "nonnegative", m->nonnegative,
                    "warm_start", m->warm_start, "gpus", solve_gpus(c),
                    "streamed_slices", c->solve.stream_slices));
    json_object_set_new(out, "resident", json_pack(
        "{s:i, s:i, s:s}", "slices", g->roi_nz, "of", g->roi_nz, "mode",
        "streaming"));
}
