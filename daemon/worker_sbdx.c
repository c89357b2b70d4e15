/*
 * worker_sbdx.c — SBDX plans on an engine thread: frames submitted into
 * the engine's pipeline, collected in order, and their planes, composite
 * and depth map published.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rtomod_log.h"
#include "worker_internal.h"

/* ------------------------------------------------------------ SBDX ---- */

void sbdx_begin(rtomod_worker *w, plan_state *s, rtomod_job *job)
{
    s->sbdx_out = job->u.sbdx;
    s->sbdx_out.geometry.ratios = NULL;
    rtomo_error err;
    s->sbdx = rtomo_sbdx_create(&job->u.sbdx.geometry, &w->options, &err);
    if (!s->sbdx) {
        s->failed = 1;
        engine_failed(w, s, job->serial, "cannot create the SBDX plan", &err);
        return;
    }
    rtomo_sbdx_get_stats(s->sbdx, &s->sbdx_seen);
}

/* Buffers for one frame's results; NULL members are outputs not wanted. */
typedef struct sbdx_buffers {
    rtomod_buffer *planes, *composite, *depth;
} sbdx_buffers;

static void sbdx_buffers_free(sbdx_buffers *b)
{
    rtomod_buffer_unref(b->planes);
    rtomod_buffer_unref(b->composite);
    rtomod_buffer_unref(b->depth);
}

static int sbdx_buffers_new(const rtomod_worker *w, plan_state *s,
                            sbdx_buffers *b,
                            rtomo_sbdx_output *out)
{
    const rtomo_sbdx_geometry *g = rtomo_sbdx_geometry_of(s->sbdx);
    size_t pixels = (size_t)g->out_width * (size_t)g->out_height;
    memset(b, 0, sizeof *b);
    memset(out, 0, sizeof *out);
    int ok = 1;
    if (s->sbdx_out.planes != RTOMO_PLANES_NONE) {
        size_t sample = s->sbdx_out.planes == RTOMO_PLANES_UINT16 ? 2 : 4;
        ok &= (b->planes = pooled_buffer(w, &s->planes, pixels * sample *
                                         (size_t)g->n_planes)) != NULL;
        if (b->planes && sample == 2) {
            out->planes_u16 = (uint16_t *)b->planes->data;
            out->u16_scale = s->sbdx_out.u16_scale;
            out->u16_offset = s->sbdx_out.u16_offset;
        } else if (b->planes) {
            out->planes = (float *)b->planes->data;
        }
    }
    if (s->sbdx_out.composite) {
        b->composite = pooled_buffer(w, &s->composite, pixels * sizeof(float));
        b->depth = pooled_buffer(w, &s->depth, pixels * sizeof(uint16_t));
        ok &= b->composite && b->depth;
        if (ok) {
            out->composite = (float *)b->composite->data;
            out->depth = (uint16_t *)b->depth->data;
        }
    }
    if (!ok)
        sbdx_buffers_free(b);
    return ok ? 0 : -1;
}

static void sbdx_header(const plan_state *s, const char *topic,
                        int64_t frame, rtomo_image_header *h)
{
    const rtomo_sbdx_geometry *g = rtomo_sbdx_geometry_of(s->sbdx);
    rtomo_image_header_init(h);
    snprintf(h->topic, sizeof h->topic, "%s", topic);
    snprintf(h->scan, sizeof h->scan, "%s", s->scan);
    h->frame = frame;
    h->count = 1;
    h->width = g->out_width;
    h->height = g->out_height;
    h->dtype = RTOMO_DTYPE_F32;
    h->compute_ms = 1e3 * s->set_seconds;
}

static void sbdx_publish(rtomod_worker *w, const plan_state *s,
                         const pending_frame *f, const sbdx_buffers *b)
{
    const rtomo_sbdx_geometry *g = rtomo_sbdx_geometry_of(s->sbdx);
    size_t pixels = (size_t)g->out_width * (size_t)g->out_height;
    rtomo_image_header h;
    if (b->planes) {
        int u16 = s->sbdx_out.planes == RTOMO_PLANES_UINT16;
        size_t bytes = pixels * (u16 ? 2 : 4);
        for (int k = 0; k < g->n_planes; k++) {
            sbdx_header(s, RTOMO_TOPIC_PLANE, f->index, &h);
            h.index = k;
            h.count = g->n_planes;
            h.plane = k;
            h.ratio = g->ratios[k];
            if (u16) {
                h.dtype = RTOMO_DTYPE_U16;
                h.u16_scale = s->sbdx_out.u16_scale;
                h.u16_offset = s->sbdx_out.u16_offset;
            }
            post_image(w, s->serial, f->seq, f->t_input, &h, b->planes,
                       b->planes->data + bytes * (size_t)k, bytes);
        }
    }
    if (b->composite) {
        sbdx_header(s, RTOMO_TOPIC_COMPOSITE, f->index, &h);
        post_image(w, s->serial, f->seq, f->t_input, &h, b->composite,
                   b->composite->data, pixels * sizeof(float));
        sbdx_header(s, RTOMO_TOPIC_DEPTH, f->index, &h);
        h.dtype = RTOMO_DTYPE_U16;
        post_image(w, s->serial, f->seq, f->t_input, &h, b->depth,
                   b->depth->data, pixels * sizeof(uint16_t));
    }
}

/* Collect the oldest pipelined frame into new buffers and publish it
 * (discard: collect into nothing).  Returns 0, or -1 when the frame was
 * dropped. */
static int sbdx_collect_into(rtomod_worker *w, plan_state *s,
                             const pending_frame *f, int discard)
{
    sbdx_buffers b;
    rtomo_sbdx_output out;
    rtomo_error err;
    uint64_t tag;
    if (discard || sbdx_buffers_new(w, s, &b, &out) != 0) {
        if (!discard)
            post_error(w, s->serial, 0, "out-of-memory",
                       "out of memory for an SBDX frame's results");
        memset(&out, 0, sizeof out);
        rtomo_sbdx_collect(s->sbdx, &out, &tag, &err);
        return -1;
    }
    if (rtomo_sbdx_collect(s->sbdx, &out, &tag, &err) != RTOMO_OK) {
        char what[64];
        snprintf(what, sizeof what, "SBDX frame %lld", (long long)f->index);
        engine_failed(w, s, s->serial, what, &err);
        sbdx_buffers_free(&b);
        return -1;
    }
    /* A backend may work at submit (the CPU) or at collect: what the engine
     * did since the last frame collected is this frame's share. */
    rtomo_sbdx_stats now;
    rtomo_sbdx_get_stats(s->sbdx, &now);
    double seconds = now.compute_seconds - s->sbdx_seen.compute_seconds;
    double updates = now.updates - s->sbdx_seen.updates;
    s->sbdx_seen = now;
    s->set_seconds = seconds;
    sbdx_publish(w, s, f, &b);
    sbdx_buffers_free(&b);
    post_stats(w, s->serial, f->seq, 0, 1, updates, seconds);
    return 0;
}

void sbdx_collect_one(rtomod_worker *w, plan_state *s, int discard)
{
    pending_frame f = s->pending[s->first_pending];
    s->first_pending = (s->first_pending + 1) % MAX_PIPELINE;
    s->n_pending--;
    if (sbdx_collect_into(w, s, &f, discard) != 0)
        post_dropped(w, s->serial, 1, f.seq);
    post_set_done(w, s->serial, f.index, f.seq, f.t_input);
}

/* Submit the job's frame, first collecting the oldest when the engine's
 * pipeline is full.  The collected frame's results stay in the outbox
 * until after the submit (worker_main flushes it): should the finisher be
 * full, the engine has its next frame before the worker waits. */
void sbdx_frame(rtomod_worker *w, plan_state *s, rtomod_job *job)
{
    int depth = rtomo_sbdx_pipeline_depth(s->sbdx);
    depth = depth < 1 ? 1 : depth > MAX_PIPELINE ? MAX_PIPELINE : depth;
    if (s->n_pending >= depth)
        sbdx_collect_one(w, s, 0);
    rtomo_error err;
    if (rtomo_sbdx_submit(s->sbdx, zmq_msg_data(&job->payload), job->dtype,
                          (uint64_t)job->index, &err) != RTOMO_OK) {
        char what[64];
        snprintf(what, sizeof what, "SBDX frame %lld", (long long)job->index);
        engine_failed(w, s, job->serial, what, &err);
        post_dropped(w, job->serial, 1, job->seq);
        post_set_done(w, job->serial, job->index, job->seq, job->t_input);
        return;
    }
    int slot = (s->first_pending + s->n_pending) % MAX_PIPELINE;
    s->pending[slot].index = job->index;
    s->pending[slot].seq = job->seq;
    s->pending[slot].t_input = job->t_input;
    s->n_pending++;
}

void sbdx_flush(rtomod_worker *w, plan_state *s, int discard)
{
    while (s->n_pending > 0)
        sbdx_collect_one(w, s, discard);
}
