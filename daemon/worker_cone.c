/*
 * worker_cone.c — cone-beam scans on an engine thread: the FDK plan of
 * one z-slab of the scan's volume (the whole volume with one worker).
 * Darks and flats are summed as they come; each projection goes to the
 * cone engine at once with their means, which normalises, weights and
 * filters it and back-projects every full chunk into the resident slab,
 * so that when the scan ends only the last chunk is left.  At the end the
 * slab is read out a batch of z-slices at a time into pooled buffers and
 * published from them: the host never holds a second copy of the volume.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rtomod_log.h"
#include "worker_cone.h"

/* Slices read out and handed to the finisher as one unit: their
 * statistics are taken while the next batch is read. */
#define SLICES_PER_UNIT 16

void cone_plan_free(plan_state *s)
{
    struct cone_plan *p = s->cone;
    if (!p)
        return;
    rtomo_cone_destroy(p->cone);
    cone_fields_free(p->fields);
    cone_iter_free(p);
    free(p);
    s->cone = NULL;
}

void cone_begin(rtomod_worker *w, plan_state *s, rtomod_job *job)
{
    const rtomod_cone_begin_job *b = &job->u.cone;
    rtomo_error err;
    struct cone_plan *p = s->cone = calloc(1, sizeof *p);
    if (!p) {
        rtomo_set_error(&err, RTOMO_E_NOMEM, "out of memory");
        engine_failed(w, s, job->serial, "cannot create the cone-beam plan",
                      &err);
        s->failed = 1;
        return;
    }
    p->set_first = b->set_first;
    p->set_count = b->set_count;
    p->fields = cone_fields_new((size_t)b->geometry.det_u *
                                (size_t)b->geometry.det_v);
    if (!p->fields)
        rtomo_set_error(&err, RTOMO_E_NOMEM, "out of memory for the dark "
                        "and flat fields of a %dx%d detector",
                        b->geometry.det_u, b->geometry.det_v);
    else if (cone_iter_begin(p, b) != 0)
        rtomo_set_error(&err, RTOMO_E_NOMEM, "out of memory for the line "
                        "integrals the iterative solve keeps (%d "
                        "projections of %dx%d)", b->geometry.n_proj,
                        b->geometry.det_u, b->geometry.det_v);
    else
        p->cone = rtomo_cone_create(&b->geometry, &w->options, b->kernel,
                                    &err);
    if (!p->cone) {
        s->failed = 1;
        engine_failed(w, s, job->serial, "cannot create the cone-beam plan",
                      &err);
    }
}

void cone_frame(rtomod_worker *w, plan_state *s, rtomod_job *job)
{
    struct cone_plan *p = s->cone;
    const void *frame = zmq_msg_data(&job->payload);
    if (job->kind != RTOMOD_JOB_TOMO_PROJECTION) {
        cone_fields_add(p->fields, job->kind != RTOMOD_JOB_TOMO_DARK, frame,
                        job->dtype);
        return;
    }
    rtomo_error err;
    rtomo_status st =
        p->sino ? cone_iter_frame(p, (int)job->index, frame, job->dtype, &err)
                : rtomo_cone_add_frame(p->cone, (int)job->index, frame,
                                       job->dtype, cone_fields_dark(p->fields),
                                       cone_fields_flat(p->fields), &err);
    if (st != RTOMO_OK) {
        char what[64];
        snprintf(what, sizeof what, "projection %lld", (long long)job->index);
        engine_failed(w, s, job->serial, what, &err);
        post_dropped(w, job->serial, 1, -1);
        return;
    }
    p->projections++;
}

void cone_slice_header(const plan_state *s, int k, rtomo_image_header *h)
{
    const struct cone_plan *p = s->cone;
    const rtomo_cone_geometry *g = rtomo_cone_geometry_of(p->cone);
    rtomo_image_header_init(h);
    snprintf(h->topic, sizeof h->topic, "%s", RTOMO_TOPIC_SLICE);
    snprintf(h->scan, sizeof h->scan, "%s", s->scan);
    h->index = p->set_first + k;
    h->count = p->set_count;
    h->slice = g->roi_z + k;
    h->width = g->roi_nx;
    h->height = g->roi_ny;
    h->roi[0] = g->roi_x;
    h->roi[1] = g->roi_y;
    h->roi[2] = g->roi_nx;
    h->roi[3] = g->roi_ny;
    h->dtype = RTOMO_DTYPE_F32;
    h->projections = p->projections;
    h->compute_ms = 1e3 * s->set_seconds;
    /* FDK is the cone beam's "fbp" (PROTOCOL.md 3.13). */
    snprintf(h->method, sizeof h->method, "fbp");
    h->final = p->method.method == RTOMO_METHOD_FBP;
}

/* Read the slab's slices k .. k + n - 1 into a pooled buffer and post
 * them.  Returns 0, or -1 when the engine failed (reported). */
static int publish_batch(rtomod_worker *w, plan_state *s,
                         const rtomod_job *job, int k, int n, int final)
{
    struct cone_plan *p = s->cone;
    const rtomo_cone_geometry *g = rtomo_cone_geometry_of(p->cone);
    const size_t pixels = (size_t)g->roi_nx * (size_t)g->roi_ny;
    int unit = g->roi_nz < SLICES_PER_UNIT ? g->roi_nz : SLICES_PER_UNIT;
    rtomod_buffer *buf = slice_buffer(w, s, pixels * sizeof(float) *
                                            (size_t)unit);
    rtomo_error err;
    rtomo_status st = buf ? rtomo_cone_read_slices(p->cone, k, n,
                                                   (float *)buf->data, &err)
                          : rtomo_set_error(&err, RTOMO_E_NOMEM, "out of "
                                            "memory for %d slices", n);
    if (st != RTOMO_OK) {
        engine_failed(w, s, job->serial, "reading the volume", &err);
        rtomod_buffer_unref(buf);
        return -1;
    }
    const float *out = (const float *)buf->data;
    for (int i = 0; i < n; i++) {
        rtomo_image_header h;
        cone_slice_header(s, k + i, &h);
        h.final = final;
        post_image(w, job->serial, -1, job->t_input, &h, buf,
                   out + pixels * (size_t)i, pixels * sizeof(float));
    }
    rtomod_buffer_unref(buf);
    return 0;
}

/* The FDK slab's slices, a unit at a time; -1 when aborted or failed
 * (a failure reported, its projections dropped). */
static int publish_fdk(rtomod_worker *w, plan_state *s, const rtomod_job *job,
                       int final)
{
    struct cone_plan *p = s->cone;
    const int nz = rtomo_cone_geometry_of(p->cone)->roi_nz;
    for (int k = 0; k < nz; k += SLICES_PER_UNIT) {
        if (rtomod_worker_aborted(w, job->serial))
            return -1;          /* the loop discards the rest anyway */
        int n = nz - k < SLICES_PER_UNIT ? nz - k : SLICES_PER_UNIT;
        if (publish_batch(w, s, job, k, n, final) != 0) {
            post_dropped(w, job->serial, p->projections, -1);
            return -1;
        }
        /* Statistics and publication of this batch overlap the next. */
        flush_results(w);
    }
    return 0;
}

void cone_finish(rtomod_worker *w, plan_state *s, const rtomod_job *job)
{
    struct cone_plan *p = s->cone;
    double t0 = now_seconds();
    rtomo_error err;
    /* The last chunk first, so that the reads below only copy. */
    if (rtomo_cone_flush(p->cone, &err) != RTOMO_OK) {
        engine_failed(w, s, job->serial, "back-projecting the last chunk",
                      &err);
        post_dropped(w, job->serial, p->projections, -1);
        return;
    }
    double t_flushed = now_seconds();
    s->set_seconds = t_flushed - t0;
    /* Whether a solve follows decides whether these slices are final. */
    rtomo_iter *solver = NULL;
    if (p->method.method != RTOMO_METHOD_FBP &&
        !(solver = cone_iter_solver(w, p, &err)))
        post_error(w, job->serial, 0, "iterative_skipped", err.message);
    if (publish_fdk(w, s, job, !solver) != 0) {
        rtomo_iter_destroy(solver);
        return;
    }
    s->t_ready = now_seconds();
    rtomo_cone_stats st;
    rtomo_cone_get_stats(p->cone, &st);
    /* The whole scan's back-projection, most of it done while the frames
     * came, over the engine's own time: filtering and back-projection
     * together, since on CUDA a back-projection returns at its launch and
     * its kernel's time shows in the next call (the next frame's upload
     * waits for it). */
    const int nz = rtomo_cone_geometry_of(p->cone)->roi_nz;
    post_stats(w, job->serial, -1, nz, 0, st.updates,
               st.filter_seconds + st.backproject_seconds);
    log_info("scan %s: cone-beam slab of %d slices from %ld projections; "
             "filter %.3f s, back-projection %.3f s (%.2f GU/s); last chunk "
             "%.3f s, read-out %.3f s", s->scan, nz, p->projections,
             st.filter_seconds, st.backproject_seconds,
             st.backproject_seconds > 0
                 ? 1e-9 * st.updates / st.backproject_seconds : 0.0,
             t_flushed - t0, s->t_ready - t_flushed);
    if (solver)
        cone_iter_solve(w, s, job, solver);
    post_set_done(w, job->serial, -1, -1, job->t_input);
    if (w->outbox_tail)
        w->outbox_tail->t_ready = s->t_ready;
}
