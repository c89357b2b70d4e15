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
#include "worker_internal.h"

/* ------------------------------------------------------ tomography ---- */

void tomo_begin(rtomod_worker *w, plan_state *s, rtomod_job *job)
{
    rtomo_error err;
    s->fbp = rtomo_fbp_create(&job->u.tomo.geometry, &w->options, &err);
    if (!s->fbp) {
        s->failed = 1;
        engine_failed(w, s, job->serial, "cannot create the FBP plan", &err);
        return;
    }
    log_debug("worker %d: scan %s: FBP plan on %s, rows [%d, %d)", w->index,
              s->scan, rtomo_backend_name(rtomo_fbp_backend(s->fbp)),
              job->u.tomo.geometry.row_first,
              job->u.tomo.geometry.row_first + job->u.tomo.geometry.row_count);
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
    } else {
        double t0 = now_seconds();
        st = rtomo_fbp_add_projection(s->fbp, (int)job->index, frame,
                                      job->dtype, job->angle, job->axis_shift,
                                      &err);
        s->set_seconds += now_seconds() - t0;
        what = "projection";
    }
    if (st != RTOMO_OK) {
        char buf[64];
        snprintf(buf, sizeof buf, "%s %lld", what, (long long)job->index);
        engine_failed(w, s, job->serial, buf, &err);
        post_dropped(w, job->serial, 1, -1);
    }
}

/* The header of the slice of reconstruct job `rc` at position i. */
static void slice_header(const plan_state *s,
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
    h->compute_ms = 1e3 * s->set_seconds;
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

static int batch_slices(const plan_state *s,
                        const rtomod_tomo_reconstruct_job *rc)
{
    if (rc->batch > 0)
        return rc->batch;
    const rtomo_fbp_geometry *g = rtomo_fbp_geometry_of(s->fbp);
    size_t slice = (size_t)g->roi_width * (size_t)g->roi_height *
                   sizeof(float);
    size_t n = rtomo_fbp_backend(s->fbp) == RTOMO_BACKEND_CUDA
                   ? AUTO_BATCH_CUDA : AUTO_BATCH_CPU;
    if (n * slice > AUTO_BATCH_BYTES)
        n = AUTO_BATCH_BYTES / slice;
    return n > 0 ? (int)n : 1;
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
    /* Every batch of the job fits a buffer of a full batch. */
    int slices = batch < rc->n_rows ? batch : rc->n_rows;
    rtomod_buffer *buf = pooled_buffer(w, &s->slices, pixels * sizeof(float) *
                                                       (size_t)slices);
    rtomo_error err;
    if (!buf) {
        rtomo_set_error(&err, RTOMO_E_NOMEM, "out of memory for %d slices", n);
        engine_failed(w, s, job->serial, "reconstruction", &err);
        return -1;
    }
    rtomo_fbp_stats before, after;
    rtomo_fbp_get_stats(s->fbp, &before);
    float *out = (float *)buf->data;
    if (rtomo_fbp_reconstruct(s->fbp, rc->rows + first, n, out, &err) !=
        RTOMO_OK) {
        engine_failed(w, s, job->serial, "reconstruction", &err);
        rtomod_buffer_unref(buf);
        return -1;
    }
    rtomo_fbp_get_stats(s->fbp, &after);
    double seconds = after.reconstruct_seconds - before.reconstruct_seconds;
    double bp = after.backproject_seconds - before.backproject_seconds;
    s->set_seconds += seconds;
    for (int i = 0; i < n; i++) {
        rtomo_image_header h;
        slice_header(s, rc, first + i, &h);
        post_image(w, job->serial, -1, job->t_input, &h, buf,
                   out + pixels * (size_t)i, pixels * sizeof(float));
    }
    rtomod_buffer_unref(buf);
    post_stats(w, job->serial, -1, n, 0, after.updates - before.updates,
               bp > 0 ? bp : seconds);
    /* Statistics and publication of this batch overlap the next one. */
    flush_results(w);
    return 0;
}

/* Back-project the job's rows batch by batch.  In continuous mode the
 * worker takes projection and window jobs in the order they were queued,
 * so a window reads exactly the projections that came before it, and no
 * projection overwrites a slot while a window reads it. */
void tomo_reconstruct(rtomod_worker *w, plan_state *s, rtomod_job *job)
{
    const rtomod_tomo_reconstruct_job *rc = &job->u.recon;
    rtomo_error err;
    if (rtomo_fbp_sync(s->fbp, &err) != RTOMO_OK ||
        rtomo_fbp_set_roi(s->fbp, rc->roi[0], rc->roi[1], rc->roi[2],
                          rc->roi[3], &err) != RTOMO_OK ||
        rtomo_fbp_set_interp(s->fbp, rc->interp, &err) != RTOMO_OK) {
        engine_failed(w, s, job->serial, "reconstruction", &err);
        return;
    }
    int batch = batch_slices(s, rc);
    for (int first = 0; first < rc->n_rows; first += batch) {
        if (atomic_load(&w->abort_serial) == job->serial)
            return;
        int n = rc->n_rows - first < batch ? rc->n_rows - first : batch;
        if (tomo_batch(w, s, job, first, n, batch) != 0)
            return;
    }
    /* A window's compute_ms counts the filtering since the previous
     * window and its own back-projection. */
    s->set_seconds = 0;
}
