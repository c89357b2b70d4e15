/*
 * worker_cone.c — cone-beam scans on an engine thread: the FDK plan of
 * one z-slab of the scan's volume (the whole volume with one worker).
 * Darks and flats are summed as they come; each projection is turned into
 * line integrals and handed to the cone engine at once, which weights and
 * filters it and back-projects every full chunk into the resident slab,
 * so that when the scan ends only the last chunk is left.  At the end the
 * slab is read into one buffer and published as its z-slices, a batch at
 * a time, straight from that buffer.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rtomod_log.h"
#include "worker_cone.h"

/* Slices handed to the finisher as one unit: their statistics are taken
 * while the next batch is posted. */
#define SLICES_PER_UNIT 16

struct cone_plan {
    rtomo_cone *cone;
    cone_fields *fields;
    float *line;                /* one frame of line integrals */
    size_t frame_len;
    int set_first, set_count;   /* the slab's place among the slices */
    long projections;           /* fed to the engine */
};

void cone_plan_free(plan_state *s)
{
    struct cone_plan *p = s->cone;
    if (!p)
        return;
    rtomo_cone_destroy(p->cone);
    cone_fields_free(p->fields);
    free(p->line);
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
    p->frame_len = (size_t)b->geometry.det_u * (size_t)b->geometry.det_v;
    p->set_first = b->set_first;
    p->set_count = b->set_count;
    p->fields = cone_fields_new(p->frame_len);
    p->line = malloc(sizeof(float) * p->frame_len);
    if (!p->fields || !p->line)
        rtomo_set_error(&err, RTOMO_E_NOMEM, "out of memory for the dark "
                        "and flat fields of a %dx%d detector",
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
    cone_fields_line_integrals(p->fields, frame, job->dtype, p->line);
    rtomo_error err;
    if (rtomo_cone_add_projection(p->cone, (int)job->index, p->line, &err) !=
        RTOMO_OK) {
        char what[64];
        snprintf(what, sizeof what, "projection %lld", (long long)job->index);
        engine_failed(w, s, job->serial, what, &err);
        post_dropped(w, job->serial, 1, -1);
        return;
    }
    p->projections++;
}

/* The header of slab slice k (z index within the slab). */
static void slice_header(const plan_state *s, int k, rtomo_image_header *h)
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
    /* No "method": the header's names are fbp, sirt and cgls of parallel
     * beams; a cone-beam slice is FDK's (PROTOCOL.md 3.13). */
}

/* Publish the slab's slices from `buf`, a unit of SLICES_PER_UNIT at a
 * time. */
static void publish_slab(rtomod_worker *w, const plan_state *s,
                         const rtomod_job *job, rtomod_buffer *buf)
{
    const rtomo_cone_geometry *g = rtomo_cone_geometry_of(s->cone->cone);
    const size_t pixels = (size_t)g->roi_nx * (size_t)g->roi_ny;
    const float *vol = (const float *)buf->data;
    for (int k = 0; k < g->roi_nz; k++) {
        if (atomic_load(&w->abort_serial) == job->serial)
            return;             /* the loop discards the rest anyway */
        rtomo_image_header h;
        slice_header(s, k, &h);
        post_image(w, job->serial, -1, job->t_input, &h, buf,
                   vol + pixels * (size_t)k, pixels * sizeof(float));
        if ((k + 1) % SLICES_PER_UNIT == 0)
            flush_results(w);
    }
}

void cone_finish(rtomod_worker *w, plan_state *s, const rtomod_job *job)
{
    struct cone_plan *p = s->cone;
    rtomo_cone_stats after;
    double t0 = now_seconds();
    size_t bytes = sizeof(float) * rtomo_cone_volume_size(p->cone);
    rtomod_buffer *buf = rtomod_buffer_new(bytes);
    rtomo_error err;
    rtomo_status st = buf ? rtomo_cone_read(p->cone, (float *)buf->data, &err)
                          : rtomo_set_error(&err, RTOMO_E_NOMEM, "out of "
                                            "memory for a volume of %zu MB",
                                            bytes >> 20);
    if (st != RTOMO_OK) {
        engine_failed(w, s, job->serial, "reading the volume", &err);
        post_dropped(w, job->serial, p->projections, -1);
        rtomod_buffer_unref(buf);
        return;
    }
    rtomo_cone_get_stats(p->cone, &after);
    s->set_seconds = now_seconds() - t0;
    s->t_ready = now_seconds();
    publish_slab(w, s, job, buf);
    rtomod_buffer_unref(buf);
    /* The whole scan's back-projection, most of it done while the frames
     * came: GU/s of the engine's own time. */
    post_stats(w, job->serial, -1, rtomo_cone_geometry_of(p->cone)->roi_nz,
               0, after.updates, after.backproject_seconds);
    post_set_done(w, job->serial, -1, -1, job->t_input);
    if (w->outbox_tail)
        w->outbox_tail->t_ready = s->t_ready;
    log_info("scan %s: cone-beam slab of %d slices from %ld projections; "
             "filter %.3f s, back-projection %.3f s (%.2f GU/s), last chunk "
             "and read %.3f s", s->scan,
             rtomo_cone_geometry_of(p->cone)->roi_nz, p->projections,
             after.filter_seconds, after.backproject_seconds,
             after.backproject_seconds > 0
                 ? 1e-9 * after.updates / after.backproject_seconds : 0.0,
             s->set_seconds);
}
