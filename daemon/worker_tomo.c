/*
 * worker_tomo.c — tomography plans on an engine thread: the FBP plan of a
 * scan's rows, its frames, and the back-projection of the selected slices
 * batch by batch into published images.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rtomod_log.h"
#include "rtomod_buffer.h"
#include "worker_internal.h"

/* ------------------------------------------------------ tomography ---- */

/* Resident slices for the begin job's rows (a plain scan), or the
 * sliding window (continuous).  Slices that do not fit on the device are
 * not an error: the scan goes on with back-projection after the scan (or
 * from scratch per window), and the loop hears why. */
static void open_streaming(rtomod_worker *w, plan_state *s,
                           const rtomod_tomo_begin_job *b, uint64_t serial)
{
    rtomo_error err, why;
    rtomo_clear_error(&why);
    if (b->continuous) {
        s->window = rtomo_fbp_window_create(s->fbp, b->resident, b->n_resident,
                                            b->window_refresh, &why, &err);
        if (!s->window) {
            s->failed = 1;
            engine_failed(w, s, serial, "cannot create the window", &err);
            return;
        }
    } else if (b->n_resident > 0) {
        s->streaming = rtomo_fbp_stream_open(s->fbp, b->resident,
                                             b->n_resident, &why) == RTOMO_OK;
    }
    if (why.code != RTOMO_OK) {
        char message[2 * RTOMO_REASON_MAX];
        snprintf(message, sizeof message, "scan %s: %d slices could not be "
                 "kept resident (%s); they are back-projected %s", s->scan,
                 b->n_resident, why.message,
                 b->continuous ? "from scratch every window"
                               : "after the scan");
        post_error(w, serial, 0, "not_resident", message);
    }
}

static int batch_slices(const plan_state *s, int configured);
static rtomod_buffer *batch_buffer(rtomod_worker *w, plan_state *s,
                                   int batch, int n_rows);

/* The scan's slice batch buffer made now, while the first frames arrive,
 * instead of after the last one: on a GPU it is page-locked and kept
 * across scans (slice_buffer), and locking 1 GiB costs about 0.6 s the
 * first time (run 42), which would otherwise fall between a new size's
 * first scan's last frame and its slices. */
static void warm_slice_buffer(rtomod_worker *w, plan_state *s,
                              const rtomod_tomo_begin_job *b)
{
    if (w->device < 0 || b->n_resident == 0 || s->failed)
        return;
    rtomod_buffer_unref(batch_buffer(w, s, batch_slices(s, b->batch),
                                     b->n_rows));
}

void tomo_begin(rtomod_worker *w, plan_state *s, rtomod_job *job)
{
    rtomod_tomo_begin_job *b = &job->u.tomo;
    rtomo_error err;
    s->fbp = rtomo_fbp_create(&b->geometry, &w->options, &err);
    if (!s->fbp) {
        s->failed = 1;
        engine_failed(w, s, job->serial, "cannot create the FBP plan", &err);
        return;
    }
    log_debug("worker %d: scan %s: FBP plan on %s, rows [%d, %d), %d "
              "resident", w->index, s->scan,
              rtomo_backend_name(rtomo_fbp_backend(s->fbp)),
              b->geometry.row_first,
              b->geometry.row_first + b->geometry.row_count, b->n_resident);
    open_streaming(w, s, b, job->serial);
    warm_slice_buffer(w, s, b);
    if (axis_begin(s, b) != 0) {
        rtomo_set_error(&err, RTOMO_E_NOMEM, "out of memory");
        s->failed = 1;
        engine_failed(w, s, job->serial, "automatic axis", &err);
        return;
    }
    s->flats_after = b->flats_after;
    s->preview_every = b->preview_every;
    s->preview_rows = b->preview_rows;      /* the plan owns them now */
    s->n_preview = b->n_preview;
    b->preview_rows = NULL;
    if (iter_begin(s, b) != 0) {
        rtomo_set_error(&err, RTOMO_E_NOMEM, "out of memory for the line "
                        "integrals of %d rows", b->n_iter_rows);
        s->failed = 1;
        engine_failed(w, s, job->serial, "iterative reconstruction", &err);
    }
}

/* ---------------------------------------------------------- previews ---- */

/* The resident slices of the preview rows, published on topic "preview"
 * when the previous preview has gone out; dropped (and counted) while it
 * is still on its way, so that a slow publisher never holds up the
 * reconstruction. */
static void publish_preview(rtomod_worker *w, plan_state *s,
                            const rtomod_job *job)
{
    if (s->preview_last && atomic_load(&s->preview_last->refs) > 1) {
        atomic_fetch_add(&w->previews_dropped, 1);
        return;
    }
    int roi[4];
    rtomo_fbp_stream_roi(s->fbp, roi);
    const size_t pixels = (size_t)roi[2] * (size_t)roi[3];
    rtomod_buffer *buf = pooled_buffer(w, &s->previews, pixels *
                                       sizeof(float) * (size_t)s->n_preview);
    rtomo_error err;
    if (!buf || rtomo_fbp_stream_read(s->fbp, s->preview_rows, s->n_preview,
                                      (float *)buf->data, &err) != RTOMO_OK) {
        atomic_fetch_add(&w->previews_dropped, 1);
        rtomod_buffer_unref(buf);
        return;
    }
    for (int i = 0; i < s->n_preview; i++) {
        rtomo_image_header h;
        rtomo_image_header_init(&h);
        snprintf(h.topic, sizeof h.topic, "%s", RTOMO_TOPIC_PREVIEW);
        snprintf(h.scan, sizeof h.scan, "%s", s->scan);
        h.index = i;
        h.count = s->n_preview;
        h.slice = s->preview_rows[i];
        h.width = roi[2];
        h.height = roi[3];
        memcpy(h.roi, roi, sizeof h.roi);
        h.projections = s->projections;
        h.axis = rtomo_fbp_geometry_of(s->fbp)->axis;
        post_image(w, job->serial, -1, job->t_input, &h, buf,
                   (float *)buf->data + pixels * (size_t)i,
                   pixels * sizeof(float));
    }
    rtomod_buffer_unref(s->preview_last);
    s->preview_last = buf;      /* our reference: shared while in flight */
    atomic_fetch_add(&w->previews, 1);
}

static int previews_due(const plan_state *s)
{
    return s->preview_every > 0 && s->n_preview > 0 && !s->axis_pending &&
           (s->streaming || (s->window && rtomo_fbp_window_resident(s->window)))
           && s->projections % s->preview_every == 0;
}

/* ------------------------------------------------------------ frames ---- */

/* Feed a projection: into the window (continuous), or into its slot and,
 * when slices are resident, their queue (held back while an automatic
 * axis is sought: worker_axis.c). */
static rtomo_status feed_projection(rtomod_worker *w, plan_state *s,
                                    const rtomod_job *job, rtomo_error *err)
{
    const void *frame = zmq_msg_data((zmq_msg_t *)&job->payload);
    if (s->window) {
        rtomo_status st = rtomo_fbp_window_add(s->window, job->index, frame,
                                               job->dtype, job->angle,
                                               job->axis_shift, err);
        if (st == RTOMO_OK && s->track_every)
            axis_track_frame(w, s, job);
        return st;
    }
    rtomo_status st = rtomo_fbp_add_projection(s->fbp, (int)job->index, frame,
                                               job->dtype, job->angle,
                                               job->axis_shift, err);
    if (st == RTOMO_OK)
        st = iter_frame(s, job, err);
    if (st != RTOMO_OK)
        return st;
    if (s->axis_pending)
        axis_frame(w, s, job);
    else if (s->streaming)
        st = rtomo_fbp_stream_queue(s->fbp, (int)job->index, 1.0f, err);
    return st;
}

void tomo_frame(rtomod_worker *w, plan_state *s, rtomod_job *job)
{
    const void *frame = zmq_msg_data(&job->payload);
    rtomo_error err;
    rtomo_status st;
    const char *what;
    if (job->kind == RTOMOD_JOB_TOMO_DARK) {
        st = rtomo_fbp_add_dark(s->fbp, frame, job->dtype, &err);
        what = "dark frame";
    } else if (job->kind == RTOMOD_JOB_TOMO_FLAT) {
        st = rtomo_fbp_add_flat(s->fbp, frame, job->dtype, &err);
        what = "flat frame";
    } else if (job->kind == RTOMOD_JOB_TOMO_FLAT_AFTER) {
        st = rtomo_fbp_add_flat_after(s->fbp, frame, job->dtype, &err);
        s->flats_after_fed += st == RTOMO_OK;
        what = "flat frame after the projections";
    } else {
        double t0 = now_seconds();
        st = feed_projection(w, s, job, &err);
        s->set_seconds += now_seconds() - t0;
        what = "projection";
        if (st == RTOMO_OK) {
            s->projections++;
            if (previews_due(s))
                publish_preview(w, s, job);
        }
    }
    if (st != RTOMO_OK) {
        char buf[64];
        snprintf(buf, sizeof buf, "%s %lld", what, (long long)job->index);
        engine_failed(w, s, job->serial, buf, &err);
        post_dropped(w, job->serial, 1, -1);
    }
}

/* Projections in what a reconstruction reads now: the window's, or every
 * one fed. */
static long projections_held(const plan_state *s)
{
    return s->window ? rtomo_fbp_window_slot_list(s->window, NULL)
                     : s->projections;
}

void tomo_slice_header(const plan_state *s,
                       const rtomod_tomo_reconstruct_job *rc, int i,
                       rtomo_image_header *h)
{
    const rtomo_fbp_geometry *g = rtomo_fbp_geometry_of(s->fbp);
    rtomo_image_header_init(h);
    snprintf(h->topic, sizeof h->topic, "%s", RTOMO_TOPIC_SLICE);
    snprintf(h->scan, sizeof h->scan, "%s", s->scan);
    h->frame = rc->frame;
    h->index = rc->set_index[i];
    h->count = rc->set_count;
    h->slice = rc->rows[i];
    h->width = g->roi_width;
    h->height = g->roi_height;
    h->roi[0] = g->roi_x;
    h->roi[1] = g->roi_y;
    h->roi[2] = g->roi_width;
    h->roi[3] = g->roi_height;
    h->dtype = RTOMO_DTYPE_F32;
    h->angle_first = rc->angle_first;
    h->angle_last = rc->angle_last;
    h->projection_first = rc->projection_first;
    h->projection_last = rc->projection_last;
    h->projections = projections_held(s);
    h->axis = g->axis;
    h->compute_ms = 1e3 * s->set_seconds;
    /* A plain scan's slices say whether an iterative solve follows. */
    if (!s->window) {
        snprintf(h->method, sizeof h->method, "fbp");
        h->final = !iter_solves_row(s, rc->rows[i]);
    }
}

/* Slices per engine call when the reconstruction leaves it to the worker
 * (batch 0).  Every call drains the engine's pipeline: on a GPU the last
 * launch's download and host copy overlap nothing, and the call's set-up
 * (sync, kernel choice, constants) is paid again.  At 2048^2 a launch
 * holds 4 slices, so 16 slices per call leave a quarter of the launches
 * unoverlapped and 64 a sixteenth; the CPU backend has no such tail.  A
 * call's slices stay within AUTO_BATCH_BYTES, since the worker keeps a few
 * batch buffers alive (the finisher's and those being sent). */
#define AUTO_BATCH_CUDA 64
#define AUTO_BATCH_CPU 16
#define AUTO_BATCH_BYTES ((size_t)1 << 30)

static int batch_slices(const plan_state *s, int configured)
{
    if (configured > 0)
        return configured;
    const rtomo_fbp_geometry *g = rtomo_fbp_geometry_of(s->fbp);
    size_t slice = (size_t)g->roi_width * (size_t)g->roi_height *
                   sizeof(float);
    size_t n = rtomo_fbp_backend(s->fbp) == RTOMO_BACKEND_CUDA
                   ? AUTO_BATCH_CUDA : AUTO_BATCH_CPU;
    if (n * slice > AUTO_BATCH_BYTES)
        n = AUTO_BATCH_BYTES / slice;
    return n > 0 ? (int)n : 1;
}

/* A buffer for one batch of `batch` slices of a job of n_rows: every
 * batch of the job fits one of a full batch. */
static rtomod_buffer *batch_buffer(rtomod_worker *w, plan_state *s,
                                   int batch, int n_rows)
{
    const rtomo_fbp_geometry *g = rtomo_fbp_geometry_of(s->fbp);
    int slices = batch < n_rows ? batch : n_rows;
    return slice_buffer(w, s, (size_t)g->roi_width * (size_t)g->roi_height *
                                  sizeof(float) * (size_t)slices);
}

/* Back-project rows[first, first+n) of the job into one buffer of `batch`
 * slices and hand the slices to the finisher.  Returns 0, or -1 when the
 * engine failed. */
static int tomo_batch(rtomod_worker *w, plan_state *s, const rtomod_job *job,
                      int first, int n, int batch)
{
    const rtomod_tomo_reconstruct_job *rc = &job->u.recon;
    const rtomo_fbp_geometry *g = rtomo_fbp_geometry_of(s->fbp);
    size_t pixels = (size_t)g->roi_width * (size_t)g->roi_height;
    rtomod_buffer *buf = batch_buffer(w, s, batch, rc->n_rows);
    rtomo_error err;
    if (!buf) {
        rtomo_set_error(&err, RTOMO_E_NOMEM, "out of memory for %d slices", n);
        engine_failed(w, s, job->serial, "reconstruction", &err);
        return -1;
    }
    rtomo_fbp_stats before, after;
    rtomo_fbp_get_stats(s->fbp, &before);
    const double t_start = now_seconds(), blocked_start = w->blocked_seconds;
    float *out = (float *)buf->data;
    /* Resident slices are read, with their statistics made where they
     * are; the rest back-projected now (the finisher measures those). */
    double *stats = malloc(sizeof(double) * 3 * (size_t)n);
    rtomo_status st =
        !stats ? rtomo_set_error(&err, RTOMO_E_NOMEM, "out of memory")
        : s->window ? rtomo_fbp_window_read(s->window, rc->rows + first, n,
                                            out, stats, &err)
                    : rtomo_fbp_stream_collect(s->fbp, rc->rows + first, n,
                                               out, stats, &err);
    if (st != RTOMO_OK) {
        engine_failed(w, s, job->serial, "reconstruction", &err);
        rtomod_buffer_unref(buf);
        free(stats);
        return -1;
    }
    rtomo_fbp_get_stats(s->fbp, &after);
    const double t_read = now_seconds();
    double seconds = after.reconstruct_seconds - before.reconstruct_seconds;
    /* Back-projection since the last report: resident slices were made
     * while the frames came, so their work shows with the first batch. */
    double bp = after.backproject_seconds - s->reported.backproject_seconds;
    double updates = after.updates - s->reported.updates;
    s->reported = after;
    s->set_seconds += seconds;
    for (int i = 0; i < n; i++) {
        rtomo_image_header h;
        tomo_slice_header(s, rc, first + i, &h);
        h.min = stats[3 * i];
        h.max = stats[3 * i + 1];
        h.mean = stats[3 * i + 2];
        iter_keep_fbp(s, h.slice, out + pixels * (size_t)i, h.roi);
        post_image(w, job->serial, -1, job->t_input, &h, buf,
                   out + pixels * (size_t)i, pixels * sizeof(float));
    }
    s->t_ready = now_seconds();
    free(stats);
    rtomod_buffer_unref(buf);
    post_stats(w, job->serial, -1, n, 0, updates, bp > 0 ? bp : seconds);
    /* Statistics and publication of this batch overlap the next one. */
    flush_results(w);
    /* Where a batch's time goes, for whoever profiles the output path:
     * the engine's read (or back-projection), then handing the slices on,
     * of which waiting for the finisher. */
    log_debug("worker %d: scan %s: batch of %d slices from row %d: engine "
              "%.1f ms, handing on %.1f ms (waiting %.1f ms)", w->index,
              s->scan, n, rc->rows[first], 1e3 * (t_read - t_start),
              1e3 * (now_seconds() - t_read),
              1e3 * (w->blocked_seconds - blocked_start));
    return 0;
}

/* Back-project the job's rows batch by batch.  In continuous mode the
 * worker takes projection and window jobs in the order they were queued,
 * so a window reads exactly the projections that came before it, and no
 * projection overwrites a slot while a window reads it. */
/* Plane i of the job from the projections the plan holds (a window's
 * alone), published on topic "plane".  Returns 0, or -1 when the engine
 * failed. */
static int tomo_plane(rtomod_worker *w, plan_state *s, const rtomod_job *job,
                      int i)
{
    const rtomod_tomo_reconstruct_job *rc = &job->u.recon;
    const rtomo_fbp_plane *p = &rc->planes[i];
    const size_t pixels = (size_t)p->width * (size_t)p->height;
    rtomo_error err;
    int *slots = NULL, n_slots = 0;
    if (s->window) {
        const rtomo_fbp_geometry *g = rtomo_fbp_geometry_of(s->fbp);
        if (!(slots = malloc(sizeof(int) * (size_t)g->window_proj))) {
            rtomo_set_error(&err, RTOMO_E_NOMEM, "out of memory");
            engine_failed(w, s, job->serial, "plane", &err);
            return -1;
        }
        n_slots = rtomo_fbp_window_slot_list(s->window, slots);
    }
    rtomod_buffer *buf = rtomod_buffer_new(pixels * sizeof(float));
    rtomo_status st = RTOMO_E_NOMEM;
    double t0 = now_seconds();
    if (!buf)
        rtomo_set_error(&err, st, "out of memory for a %dx%d plane",
                        p->width, p->height);
    else
        st = rtomo_fbp_reconstruct_plane(s->fbp, p, slots, n_slots,
                                         (float *)buf->data, &err);
    free(slots);
    if (st != RTOMO_OK) {
        engine_failed(w, s, job->serial, "plane", &err);
        rtomod_buffer_unref(buf);
        return -1;
    }
    rtomo_image_header h;
    rtomo_image_header_init(&h);
    snprintf(h.topic, sizeof h.topic, "%s", RTOMO_TOPIC_PLANE);
    snprintf(h.scan, sizeof h.scan, "%s", s->scan);
    h.frame = rc->frame;
    h.index = i;
    h.count = rc->n_planes;
    h.plane = i;
    h.width = p->width;
    h.height = p->height;
    h.roi[2] = p->width;
    h.roi[3] = p->height;
    memcpy(h.centre, p->centre, sizeof h.centre);
    memcpy(h.u, p->u, sizeof h.u);
    memcpy(h.v, p->v, sizeof h.v);
    h.angle_first = rc->angle_first;
    h.angle_last = rc->angle_last;
    h.projection_first = rc->projection_first;
    h.projection_last = rc->projection_last;
    h.projections = projections_held(s);
    h.axis = rtomo_fbp_geometry_of(s->fbp)->axis;
    h.compute_ms = 1e3 * (now_seconds() - t0);
    /* With the rows split over workers each plane is a part: the loop
     * adds them up (rows a worker does not hold count 0 in its part). */
    post_image_as(w, rc->plane_parts > 1 ? RTOMOD_RESULT_PLANE_PART
                                         : RTOMOD_RESULT_IMAGE,
                  job->serial, -1, job->t_input, &h, buf, buf->data,
                  pixels * sizeof(float));
    rtomod_buffer_unref(buf);
    flush_results(w);
    return 0;
}

/* A scan with ring removal: its filtered projections are corrected once,
 * after the last one and before the first slice (the scan's plan has no
 * resident slices: scan_tomo.c admits none).  Later reconstructions of
 * the same plan (planes asked again) find them corrected. */
/* Flats after the projections announced: the projections were
 * normalised with the flats before; now each is corrected to the flat
 * interpolated by its index.  None came: the loop hears it, and the
 * slices keep the flats before. */
static rtomo_status interpolate_flats(rtomod_worker *w, plan_state *s,
                                      uint64_t serial, rtomo_error *err)
{
    if (!s->flats_after || s->window)
        return RTOMO_OK;
    s->flats_after = 0;
    if (s->flats_after_fed > 0)
        return rtomo_fbp_interpolate_flats(s->fbp, err);
    char message[2 * RTOMO_REASON_MAX];
    snprintf(message, sizeof message, "scan %s announced flats after its "
             "projections and none came; the projections keep the flats "
             "before them", s->scan);
    post_error(w, serial, 0, "flats_after_missing", message);
    return RTOMO_OK;
}

static rtomo_status remove_rings(plan_state *s, rtomo_error *err)
{
    if (s->window || s->rings_removed ||
        rtomo_fbp_geometry_of(s->fbp)->rings == RTOMO_RINGS_OFF)
        return RTOMO_OK;
    rtomo_status st = rtomo_fbp_remove_rings(s->fbp, err);
    if (st == RTOMO_OK)
        s->rings_removed = 1;
    return st;
}

void tomo_reconstruct(rtomod_worker *w, plan_state *s, rtomod_job *job)
{
    const rtomod_tomo_reconstruct_job *rc = &job->u.recon;
    rtomo_error err;
    axis_give_up(w, s, job->serial);
    if (rtomo_fbp_sync(s->fbp, &err) != RTOMO_OK ||
        rtomo_fbp_set_roi(s->fbp, rc->roi[0], rc->roi[1], rc->roi[2],
                          rc->roi[3], &err) != RTOMO_OK ||
        rtomo_fbp_set_interp(s->fbp, rc->interp, &err) != RTOMO_OK ||
        interpolate_flats(w, s, job->serial, &err) != RTOMO_OK ||
        remove_rings(s, &err) != RTOMO_OK) {
        engine_failed(w, s, job->serial, "reconstruction", &err);
        return;
    }
    axis_track_window(w, s, job);
    int batch = batch_slices(s, rc->batch);
    for (int first = 0; first < rc->n_rows; first += batch) {
        if (rtomod_worker_aborted(w, job->serial))
            return;
        int n = rc->n_rows - first < batch ? rc->n_rows - first : batch;
        if (tomo_batch(w, s, job, first, n, batch) != 0)
            return;
    }
    for (int i = 0; i < rc->n_planes; i++)
        if (rtomod_worker_aborted(w, job->serial) ||
            tomo_plane(w, s, job, i) != 0)
            return;
    /* The iterative solve comes after every FBP image is out: a control
     * loop has the fast answer while the better one is computed. */
    if (s->iter && !rtomod_worker_aborted(w, job->serial))
        iter_reconstruct(w, s, job);
    /* A window's compute_ms counts the filtering since the previous
     * window and its own back-projection. */
    s->set_seconds = 0;
}
