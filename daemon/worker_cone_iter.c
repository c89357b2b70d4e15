/*
 * worker_cone_iter.c — reconstruction.method "sirt" or "cgls" of a
 * cone-beam scan (PROTOCOL.md 3.13): the volume solved with the cone
 * engine's separable-footprint pair (rtomo_cone_iter_create: a matched
 * projector and back-projector, so the solvers converge) after its FDK
 * slices are out, as worker_iter.c does for parallel-beam slices.
 *
 * A scan with a solve is one FDK slab on worker 0 (scan_cone.c), whose
 * thread makes the pair over every GPU of the daemon (the begin job's
 * list, its own GPU first): the engine splits the volume in z slabs over
 * them and keeps the sinograms on the first; the other workers' threads
 * go on with their own jobs meanwhile, on streams of their own, and the
 * budget has claimed each GPU's share.  Each projection's line
 * integrals are kept in its slot as it arrives (n_proj x det_v x det_u
 * floats); at the end the projections that came are moved together and
 * solved at their own angles (missing ones are left out, not taken as
 * zero).  The solve starts from the FDK volume (warm_start, the default)
 * or from zero; every publish_every iterations the iterate's slices go
 * out, and last the final volume's, published from the solver's own
 * buffer.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rtomod_log.h"
#include "worker_cone.h"

/* Slices per unit handed to the finisher (as worker_cone.c). */
#define SLICES_PER_UNIT 16

int cone_iter_begin(struct cone_plan *p, const rtomod_cone_begin_job *b)
{
    p->method = b->method;
    p->n_solve_devices = b->n_solve_devices;
    memcpy(p->solve_devices, b->solve_devices, sizeof p->solve_devices);
    p->solve_device_budget = b->solve_device_budget;
    if (b->method.method == RTOMO_METHOD_FBP)
        return 0;
    const rtomo_cone_geometry *g = &b->geometry;
    size_t frame = (size_t)g->det_u * (size_t)g->det_v;
    p->sino = malloc(sizeof(float) * frame * (size_t)g->n_proj);
    p->received = calloc((size_t)g->n_proj, 1);
    return p->sino && p->received ? 0 : -1;
}

void cone_iter_free(struct cone_plan *p)
{
    free(p->sino);
    free(p->received);
    p->sino = NULL;
    p->received = NULL;
}

rtomo_status cone_iter_frame(struct cone_plan *p, int index,
                             const void *frame, rtomo_dtype dtype,
                             rtomo_error *err)
{
    const rtomo_cone_geometry *g = rtomo_cone_geometry_of(p->cone);
    size_t len = (size_t)g->det_u * (size_t)g->det_v;
    float *slot = p->sino + len * (size_t)index;
    rtomo_status st = rtomo_cone_line_integrals(
        p->cone, frame, dtype, cone_fields_dark(p->fields),
        cone_fields_flat(p->fields), slot, err);
    if (st == RTOMO_OK)
        st = rtomo_cone_add_projection(p->cone, index, slot, err);
    if (st == RTOMO_OK)
        p->received[index] = 1;
    return st;
}

/* The worker's engine options with the solve's GPUs, when it has them,
 * and the device budget its claim was made for: the engine then chooses
 * resident or streamed as the claim did. */
static void solve_options(const rtomod_worker *w, const struct cone_plan *p,
                          rtomo_engine_options *o)
{
    *o = w->options;
    o->device_budget = p->solve_device_budget;
    if (p->n_solve_devices > 0) {
        o->n_devices = p->n_solve_devices;
        memcpy(o->device_ids, p->solve_devices,
               sizeof(int) * (size_t)p->n_solve_devices);
    }
}

rtomo_iter *cone_iter_solver(rtomod_worker *w, struct cone_plan *p,
                             rtomo_error *err)
{
    rtomo_cone_geometry g = *rtomo_cone_geometry_of(p->cone);
    size_t len = (size_t)g.det_u * (size_t)g.det_v;
    double *angles = malloc(sizeof(double) * (size_t)g.n_proj);
    if (!angles) {
        rtomo_set_error(err, RTOMO_E_NOMEM, "no iterative solve: out of "
                        "memory");
        return NULL;
    }
    int n = 0;
    for (int q = 0; q < g.n_proj; q++) {
        if (!p->received[q])
            continue;
        angles[n] = rtomo_cone_angle(&g, q);
        if (n != q)
            memmove(p->sino + len * (size_t)n, p->sino + len * (size_t)q,
                    len * sizeof(float));
        n++;
    }
    g.n_proj = n;
    g.angles = angles;
    rtomo_iter *solver = NULL;
    rtomo_error why;
    if (n < 2) {
        rtomo_set_error(&why, RTOMO_E_INVALID, "%d projections", n);
    } else {
        rtomo_engine_options opt;
        solve_options(w, p, &opt);
        solver = rtomo_cone_iter_create(&g, &opt, &why);
    }
    free(angles);
    if (!solver)
        rtomo_set_error(err, why.code, "no %s solve of the %d projections "
                        "that came (the FDK slices are final): %s",
                        rtomo_method_name(p->method.method), n, why.message);
    p->projections = n;
    return solver;
}

/* What a solve's callback needs. */
typedef struct cone_solve {
    rtomod_worker *w;
    plan_state *s;
    const rtomod_job *job;
    double t0;
    double pair_updates;        /* of one iteration: A and A^T */
    int aborted;
} cone_solve;

static void post_iteration(const cone_solve *c, int k, double residual,
                           const rtomo_iter_result *end)
{
    rtomod_result *r = result_new(c->w, RTOMOD_RESULT_ITERATION,
                                  c->job->serial);
    if (!r)
        return;
    const struct cone_plan *p = c->s->cone;
    rtomod_iter_progress *it = &r->iter;
    snprintf(it->method, sizeof it->method, "%s",
             rtomo_method_name(p->method.method));
    it->iteration = k;
    it->iterations = p->method.iterations;
    it->rows = rtomo_cone_geometry_of(p->cone)->roi_nz;
    it->residual = residual;
    double dt = now_seconds() - c->t0;
    it->iterations_per_s = dt > 0 ? k / dt : 0.0;
    it->gu_per_s = dt > 0 ? c->pair_updates * k / dt * 1e-9 : 0.0;
    if (end) {
        it->done = 1;
        it->project_gu_per_s = end->project_seconds > 0
            ? 0.5 * end->updates / end->project_seconds * 1e-9 : 0.0;
        it->backproject_gu_per_s = end->backproject_seconds > 0
            ? 0.5 * end->updates / end->backproject_seconds * 1e-9 : 0.0;
    }
    post(c->w, r);
}

/* Post the slices of `volume` (inside `buf`) as iterate k; a unit at a
 * time. */
static void post_volume(const cone_solve *c, rtomod_buffer *buf,
                        const float *volume, int k, double residual,
                        int final)
{
    const plan_state *s = c->s;
    const rtomo_cone_geometry *g = rtomo_cone_geometry_of(s->cone->cone);
    const size_t pixels = (size_t)g->roi_nx * (size_t)g->roi_ny;
    for (int z = 0; z < g->roi_nz; z++) {
        rtomo_image_header h;
        cone_slice_header(s, z, &h);
        snprintf(h.method, sizeof h.method, "%s",
                 rtomo_method_name(s->cone->method.method));
        h.iteration = k;
        h.final = final;
        h.residual = residual;
        h.compute_ms = 1e3 * (now_seconds() - c->t0);
        post_image(c->w, c->job->serial, -1, c->job->t_input, &h, buf,
                   volume + pixels * (size_t)z, pixels * sizeof(float));
        if ((z + 1) % SLICES_PER_UNIT == 0)
            flush_results(c->w);
    }
    flush_results(c->w);
}

/* An iterate to publish: its copy (the solver goes on with its own). */
static void publish_iterate(const cone_solve *c, const float *images, int k,
                            double residual)
{
    size_t bytes = sizeof(float) *
                   rtomo_cone_volume_size(c->s->cone->cone);
    rtomod_buffer *buf = rtomod_buffer_new(bytes);
    if (!buf) {
        post_error(c->w, c->job->serial, 0, "iterate_dropped", "out of "
                   "memory for an iterate's slices: not published");
        return;
    }
    memcpy(buf->data, images, bytes);
    post_volume(c, buf, (const float *)buf->data, k, residual, 0);
    rtomod_buffer_unref(buf);
}

/* After each iteration: stop on an abort; publish every publish_every
 * (the final iterate is published once the solve returns). */
static int on_iteration(void *ctx, int k, double residual,
                        const float *images)
{
    cone_solve *c = ctx;
    const rtomo_method_settings *m = &c->s->cone->method;
    if (rtomod_worker_aborted(c->w, c->job->serial)) {
        c->aborted = 1;
        return 1;
    }
    post_iteration(c, k, residual, NULL);
    const int last = k == m->iterations ||
                     (m->tolerance > 0 && residual <= m->tolerance);
    if (images && !last)
        publish_iterate(c, images, k, residual);
    else
        flush_results(c->w);
    return 0;
}

void cone_iter_solve(rtomod_worker *w, plan_state *s, const rtomod_job *job,
                     rtomo_iter *solver)
{
    struct cone_plan *p = s->cone;
    const rtomo_method_settings *m = &p->method;
    size_t voxels = rtomo_cone_volume_size(p->cone);
    rtomod_buffer *x = rtomod_buffer_new(sizeof(float) * voxels);
    rtomo_error err;
    rtomo_status st = x ? RTOMO_OK
                        : rtomo_set_error(&err, RTOMO_E_NOMEM, "out of "
                                          "memory for the solve's volume");
    if (st == RTOMO_OK && m->warm_start)
        st = rtomo_cone_read(p->cone, (float *)x->data, &err);
    else if (st == RTOMO_OK)
        memset(x->data, 0, sizeof(float) * voxels);
    cone_solve c = {w, s, job, now_seconds(),
                    2.0 * (double)voxels * (double)p->projections, 0};
    rtomo_iter_options o;
    rtomo_iter_options_init(&o);
    o.method = m->method == RTOMO_METHOD_CGLS ? RTOMO_ITER_CGLS
                                              : RTOMO_ITER_SIRT;
    o.iterations = m->iterations;
    o.tolerance = m->tolerance;
    o.nonnegative = m->nonnegative;
    o.progress = on_iteration;
    o.ctx = &c;
    o.images_every = m->publish_every;
    rtomo_iter_result res;
    if (st == RTOMO_OK)
        st = rtomo_iter_solve(solver, p->sino, 1, (float *)x->data,
                              m->warm_start, &o, &res, &err);
    rtomo_iter_destroy(solver);
    if (st != RTOMO_OK)
        engine_failed(w, s, job->serial, "iterative reconstruction", &err);
    else if (!c.aborted) {
        post_iteration(&c, res.iterations, res.residual, &res);
        post_volume(&c, x, (const float *)x->data, res.iterations,
                    res.residual, 1);
        log_info("scan %s: %s of %zu voxels from %ld projections, %d "
                 "iterations, residual %.3g, %.2f s", s->scan,
                 rtomo_method_name(m->method), voxels, p->projections,
                 res.iterations, res.residual, res.seconds);
    }
    rtomod_buffer_unref(x);
}
