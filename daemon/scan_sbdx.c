/*
 * scan_sbdx.c — SBDX streams in rtomod: sbdx_begin creates an SBDX plan on
 * every worker, each sbdx_frame is checked and handed to the next worker in
 * turn (so several GPUs reconstruct successive frames at once), and every
 * reconstructed frame is published as its planes, composite and depth map.
 * sbdx_end lets the workers finish the frames they hold, then the stream is
 * complete.
 *
 * Frames come out in the order they were accepted, whichever worker is
 * done first: each frame job gets a sequence number, and the results of a
 * frame wait here until every earlier frame is out (its SET_DONE passed).
 * Only results wait, never images' pixels: they stay in their buffers.
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rtomod.h"

/* Duplicate frames are recognised among this many recent indices. */
#define FRAME_INDEX_WINDOW 4096

struct rtomod_sbdx_scan {
    rtomo_sbdx_spec *spec;      /* owned */
    rtomod_seen frames;
    int next_worker;            /* round robin */
    int64_t next_seq;           /* of the next frame accepted */
    int64_t due_seq;            /* the frame whose results go out now */
    rtomod_result *held;        /* results of later frames, in arrival
                                   order */
};

static void free_results(rtomod_result *r)
{
    while (r) {
        rtomod_result *next = r->next;
        rtomod_result_free(r);
        r = next;
    }
}

void rtomod_sbdx_free(rtomod_sbdx_scan *s)
{
    if (!s)
        return;
    if (s->spec) {
        rtomo_sbdx_spec_clear(s->spec);
        free(s->spec);
    }
    rtomod_seen_free(&s->frames);
    free_results(s->held);
    free(s);
}

int rtomod_sbdx_hold(rtomod_scan *scan, rtomod_result *r)
{
    rtomod_sbdx_scan *s = scan->sbdx;
    if (r->seq <= s->due_seq)
        return 0;
    rtomod_result **tail = &s->held;
    while (*tail)
        tail = &(*tail)->next;
    r->next = NULL;
    *tail = r;
    return 1;
}

rtomod_result *rtomod_sbdx_release(rtomod_scan *scan, const rtomod_result *r)
{
    rtomod_sbdx_scan *s = scan->sbdx;
    if (r->kind != RTOMOD_RESULT_SET_DONE || r->seq != s->due_seq)
        return NULL;
    s->due_seq++;
    rtomod_result *due = NULL, **due_tail = &due, **link = &s->held;
    while (*link) {
        rtomod_result *h = *link;
        if (h->seq == s->due_seq) {
            *link = h->next;
            h->next = NULL;
            *due_tail = h;
            due_tail = &h->next;
        } else {
            link = &h->next;
        }
    }
    return due;
}

static rtomod_job *begin_job(const rtomod_scan *scan,
                             const rtomo_sbdx_spec *spec)
{
    rtomod_job *job = rtomod_job_new(RTOMOD_JOB_SBDX_BEGIN, scan->serial,
                                     scan->id);
    if (!job)
        return NULL;
    rtomod_sbdx_begin_job *b = &job->u.sbdx;
    b->geometry = spec->geometry;
    size_t bytes = sizeof(double) * (size_t)spec->geometry.n_planes;
    double *ratios = malloc(bytes);
    if (!ratios) {
        rtomod_job_free(job);
        return NULL;
    }
    memcpy(ratios, spec->geometry.ratios, bytes);
    b->geometry.ratios = ratios;
    b->planes = spec->planes;
    b->u16_scale = spec->u16_scale;
    b->u16_offset = spec->u16_offset;
    b->composite = spec->composite;
    return job;
}

/* The memory of the stream's plans (budget.c): every worker holds one. */
static void estimate(const rtomod *d, const rtomo_sbdx_spec *spec,
                     rtomod_budget_claim *claim)
{
    int plane_bytes = spec->planes == RTOMO_PLANES_UINT16 ? 2
                      : spec->planes == RTOMO_PLANES_NONE ? 0 : 4;
    int buffers = d->cfg.publish.stats_threads + 1 + 3;
    memset(claim, 0, sizeof *claim);
    for (int w = 0; w < d->pool.n; w++) {
        size_t host, device;
        rtomod_budget_sbdx_part(&spec->geometry, plane_bytes, spec->composite,
                                buffers, d->n_gpus > 0, &host, &device);
        claim->host = claim->host > SIZE_MAX - host ? SIZE_MAX
                                                    : claim->host + host;
        claim->device[w] = device;
    }
}

/* The stream's HDF5 file: its geometry and output settings. */
static void open_output(rtomod *d, rtomod_scan *scan,
                        const rtomo_sbdx_spec *spec)
{
    const rtomo_sbdx_geometry *g = &spec->geometry;
    json_t *ratios = json_array();
    for (int i = 0; i < g->n_planes; i++)
        json_array_append_new(ratios, json_real(g->ratios[i]));
    json_t *meta = json_pack(
        "{s:{s:i, s:i}, s:[i, i], s:i, s:o, s:i, s:i, s:[i, i], s:i, s:b, "
        "s:s, s:s, s:b, s:f, s:f}",
        "detector", "width", g->det_width, "height", g->det_height,
        "holes", g->holes_x, g->holes_y, "shift", g->shift_m,
        "ratios", ratios, "plane_width", g->out_width,
        "plane_height", g->out_height, "origin", g->origin_x, g->origin_y,
        "composite_radius", g->composite_radius, "flat_field", g->flat_field,
        "dtype", rtomo_dtype_name(spec->dtype),
        "planes", rtomo_plane_format_name(spec->planes),
        "composite", spec->composite, "u16_scale", (double)spec->u16_scale,
        "u16_offset", (double)spec->u16_offset);
    scan->output_file = rtomod_output_open_sbdx(
        d->output, scan->serial, scan->id, meta, d->begin_header,
        d->begin_header_size);
}

int rtomod_sbdx_begin(rtomod *d, rtomo_ingest_msg *msg)
{
    if (!rtomod_scan_may_begin(d, msg))
        return -1;
    int plane_bytes = msg->sbdx_spec->planes == RTOMO_PLANES_UINT16 ? 2 : 4;
    if (rtomod_scan_check_image(d, msg->scan, rtomod_budget_sbdx_image_bytes(
                                    &msg->sbdx_spec->geometry, plane_bytes),
                                "planes") != 0)
        return -1;
    rtomod_scan *scan = rtomod_scan_new(d, RTOMOD_SCAN_SBDX, msg->scan);
    if (scan) {
        const rtomo_sbdx_geometry *g = &msg->sbdx_spec->geometry;
        char what[160];
        snprintf(what, sizeof what, "an SBDX stream of %d planes from %dx%d "
                 "holes", g->n_planes, g->holes_x, g->holes_y);
        estimate(d, msg->sbdx_spec, &scan->claim);
        if (rtomod_scan_admit(d, scan, what) != 0) {
            rtomod_scan_free(scan);
            return -1;
        }
    }
    rtomod_sbdx_scan *s = calloc(1, sizeof *s);
    rtomod_job *jobs[RTOMO_MAX_DEVICES] = {0};
    int ok = scan && s && rtomod_seen_init(&s->frames, FRAME_INDEX_WINDOW) == 0;
    for (int w = 0; ok && w < d->pool.n; w++)
        ok = (jobs[w] = begin_job(scan, msg->sbdx_spec)) != NULL;
    if (!ok) {
        for (int w = 0; w < d->pool.n; w++)
            rtomod_job_free(jobs[w]);
        rtomod_sbdx_free(s);
        rtomod_scan_free(scan);
        rtomod_rejectf(d, RTOMO_REJECT_BUDGET, msg->scan, -1,
                       "out of memory for an SBDX stream");
        return -1;
    }
    s->spec = msg->sbdx_spec;
    msg->sbdx_spec = NULL;      /* the stream owns it now */
    scan->sbdx = s;
    for (int w = 0; w < d->pool.n; w++)
        rtomod_scan_push(d, scan, w, jobs[w]);
    if (d->output)
        open_output(d, scan, s->spec);
    rtomod_scan_activate(d, scan);
    const rtomo_sbdx_geometry *g = &s->spec->geometry;
    log_info("SBDX stream %s: %dx%d holes, %dx%d detector, %d planes",
             scan->id, g->holes_x, g->holes_y, g->det_width, g->det_height,
             g->n_planes);
    return 0;
}

int rtomod_sbdx_frame(rtomod *d, rtomo_ingest_msg *msg, zmq_msg_t *payload)
{
    rtomod_scan *scan = rtomod_scan_for_input(d, msg, RTOMOD_SCAN_SBDX);
    if (!scan)
        return -1;
    rtomod_sbdx_scan *s = scan->sbdx;
    rtomo_reject_info why;
    if (rtomo_proto_check_sbdx_frame(&msg->frame, s->spec, &why) != 0) {
        rtomod_reject(d, &why, msg->scan, msg->frame.index);
        return -1;
    }
    int seen = rtomod_seen_mark(&s->frames, msg->frame.index);
    if (seen != 0) {
        rtomod_rejectf(d, seen > 0 ? RTOMO_REJECT_DUPLICATE
                                   : RTOMO_REJECT_INDEX,
                       msg->scan, msg->frame.index, "SBDX frame %lld %s",
                       (long long)msg->frame.index,
                       seen > 0 ? "was already received"
                                : "is older than the last 4096 frames");
        return -1;
    }
    rtomod_job *job = rtomod_frame_job(d, RTOMOD_JOB_SBDX_FRAME, scan,
                                       &msg->frame, payload);
    if (!job) {
        rtomod_rejectf(d, RTOMO_REJECT_OVERSIZE, msg->scan, msg->frame.index,
                       "out of memory for a job");
        return -1;
    }
    job->seq = s->next_seq++;
    rtomod_scan_push(d, scan, s->next_worker, job);
    s->next_worker = (s->next_worker + 1) % d->pool.n;
    scan->frames++;
    scan->t_last_input = rtomod_now();
    return 0;
}

void rtomod_sbdx_finish(rtomod *d, rtomod_scan *scan)
{
    log_info("SBDX stream %s: ended after %ld frames", scan->id, scan->frames);
    rtomod_scan_finish(d, scan, rtomod_scan_close_plans(d, scan,
                                                        scan->failed));
}

long rtomod_sbdx_frames_done(const rtomod_scan *scan)
{
    return (long)scan->sbdx->due_seq;
}

/* A stream announces no frame count: its end always waits
 * ingest.reorder_ms for frames overtaken on other connections. */
int rtomod_sbdx_end(rtomod *d, rtomo_ingest_msg *msg)
{
    rtomod_scan *scan = rtomod_scan_for_input(d, msg, RTOMOD_SCAN_SBDX);
    if (!scan)
        return -1;
    rtomod_scan_request_end(d, scan);
    return 0;
}

void rtomod_sbdx_status(const rtomod_scan *scan, json_t *out)
{
    json_object_set_new(out, "received", json_integer(scan->frames));
    json_object_set_new(out, "expected", json_null());
    json_object_set_new(out, "darks", json_integer(0));
    json_object_set_new(out, "flats", json_integer(0));
    json_object_set_new(out, "missing", json_integer(0));
}
