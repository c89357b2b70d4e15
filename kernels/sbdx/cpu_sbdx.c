/*
 * cpu_sbdx.c — the CPU SBDX backend (rtomo_cpu_sbdx_ops): plan state, the
 * synchronous submit/collect pipeline of depth 1, and the conversion of the
 * reconstructed planes into the outputs the caller asks for.  It is the
 * reference every other SBDX backend is tested against.
 *
 * submit() converts the frame to float32 and reconstructs every plane
 * (flat-fielded or raw, as the geometry says) into the plan's own buffer
 * with the method of plan->opt.sbdx_method; collect()
 * copies or converts them and computes the composite when it is requested.
 */
#include "config.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_pool.h"
#include "cpu_sbdx.h"
#include "sbdx_composite.h"

/* Rows per composite band: a multiple of the composite's running-sum block
 * so that bands do not recompute sums. */
#define COMPOSITE_BAND_ROWS 64

typedef struct cpu_sbdx {
    rtomo_sbdx_lut *lut;
    float *frame;           /* the submitted frame as float32 */
    float *planes;          /* n_planes x out_height x out_width */
    size_t n_samples;       /* samples per frame */
    size_t plane_size;      /* pixels per plane */
    float **response_x;     /* [n_planes] views of the LUT's responses, */
    float **response_y;     /* as the composite takes them */
    cpu_pool *pool;         /* worker threads, started once per plan */
    uint64_t tag;           /* of the frame in the buffer */
    double submitted_at;    /* rtomo_now_seconds() at submit */
} cpu_sbdx;

static void cpu_sbdx_free(cpu_sbdx *s)
{
    if (!s)
        return;
    cpu_pool_destroy(s->pool);
    rtomo_sbdx_lut_destroy(s->lut);
    free(s->frame);
    free(s->planes);
    free(s->response_x);
    free(s->response_y);
    free(s);
}

static rtomo_status cpu_create(rtomo_sbdx *plan, rtomo_error *err)
{
    double t0 = rtomo_now_seconds();
    const rtomo_sbdx_geometry *g = &plan->geom;
    cpu_sbdx *s = calloc(1, sizeof *s);
    if (!s)
        return rtomo_set_error(err, RTOMO_E_NOMEM,
                               "out of memory for the CPU SBDX backend");
    rtomo_error lut_err;
    s->lut = rtomo_sbdx_lut_create(g, &lut_err);
    if (!s->lut) {
        cpu_sbdx_free(s);
        return rtomo_set_error(err, lut_err.code, "%s", lut_err.message);
    }
    s->n_samples = (size_t)g->holes_x * g->holes_y * g->det_width *
                   g->det_height;
    s->plane_size = (size_t)g->out_width * g->out_height;
    s->frame = malloc(sizeof(float) * s->n_samples);
    s->planes = malloc(sizeof(float) * s->plane_size * g->n_planes);
    s->response_x = malloc(sizeof(float *) * (size_t)g->n_planes);
    s->response_y = malloc(sizeof(float *) * (size_t)g->n_planes);
    if (!s->frame || !s->planes || !s->response_x || !s->response_y) {
        size_t n_samples = s->n_samples;
        cpu_sbdx_free(s);
        return rtomo_set_error(err, RTOMO_E_NOMEM,
                               "out of memory for a frame of %zu samples and "
                               "%d planes of %dx%d", n_samples, g->n_planes,
                               g->out_width, g->out_height);
    }
    for (int k = 0; k < g->n_planes; k++) {
        s->response_x[k] = s->lut->x[k].response;
        s->response_y[k] = s->lut->y[k].response;
    }
    rtomo_status st = cpu_pool_create(rtomo_cpu_thread_count(&plan->opt),
                                      &s->pool, err);
    if (st != RTOMO_OK) {
        cpu_sbdx_free(s);
        return st;
    }
    plan->impl = s;
    /* Building the LUTs is part of the engine's compute time. */
    plan->stats.compute_seconds += rtomo_now_seconds() - t0;
    return RTOMO_OK;
}

static void cpu_destroy(rtomo_sbdx *plan)
{
    cpu_sbdx_free(plan->impl);
    plan->impl = NULL;
}

static void scatter_task(void *ctx, int task, int worker)
{
    (void)worker;
    cpu_sbdx_scatter_plane(ctx, task);
}

static void gather_task(void *ctx, int task, int worker)
{
    const cpu_sbdx_job *job = ctx;
    int rows = job->geom->out_height;
    (void)worker;
    cpu_sbdx_gather_row(job, task / rows, task % rows);
}

static void reconstruct_planes(rtomo_sbdx *plan, cpu_sbdx *s)
{
    const rtomo_sbdx_geometry *g = &plan->geom;
    cpu_sbdx_job job = {
        .geom = g,
        .lut = s->lut,
        .frame = s->frame,
        .planes = s->planes,
        .scale = (float)((double)g->shift_m * g->shift_m /
                         ((double)g->det_width * g->det_height)),
    };
    if (plan->opt.sbdx_method == RTOMO_SBDX_DETECTOR_CENTRIC) {
        cpu_pool_run(s->pool, g->n_planes, scatter_task, &job);
    } else {
        /* One task per (plane, row): at most 256 x 32768 tasks, and each
         * row is heavy enough that handing them out one by one is cheap. */
        cpu_pool_run(s->pool, g->n_planes * g->out_height, gather_task, &job);
    }
}

static rtomo_status cpu_submit(rtomo_sbdx *plan, const void *frame,
                               rtomo_dtype dtype, uint64_t tag,
                               rtomo_error *err)
{
    cpu_sbdx *s = plan->impl;
    double t0 = rtomo_now_seconds();
    rtomo_convert_to_float(frame, dtype, s->n_samples, s->frame);
    reconstruct_planes(plan, s);
    s->tag = tag;
    s->submitted_at = t0;
    plan->stats.compute_seconds += rtomo_now_seconds() - t0;
    plan->stats.updates += 4.0 * (double)s->n_samples * plan->geom.n_planes;
    return RTOMO_OK;
}

/* clamp(round((v - offset) * scale)) into [0, 65535]; round() is roundf
 * (halves away from zero); NaN maps to 0. */
static uint16_t to_u16(float v, float offset, float scale)
{
    float t = roundf((v - offset) * scale);
    if (!(t > 0.0f))
        return 0;
    return t >= 65535.0f ? 65535 : (uint16_t)t;
}

/* Shared by the composite's band tasks; the first failure is kept. */
typedef struct composite_run {
    rtomo_sbdx_stack stack;
    int radius;
    float *composite;
    uint16_t *depth;
    pthread_mutex_t lock;
    rtomo_error error;
} composite_run;

static void composite_task(void *ctx, int band, int worker)
{
    composite_run *run = ctx;
    int first = band * COMPOSITE_BAND_ROWS;
    (void)worker;
    int rows = run->stack.height - first < COMPOSITE_BAND_ROWS
                   ? run->stack.height - first : COMPOSITE_BAND_ROWS;
    rtomo_error e;
    if (rtomo_sbdx_composite_rows(&run->stack, run->radius, first, rows,
                                  run->composite, run->depth,
                                  &e) != RTOMO_OK) {
        pthread_mutex_lock(&run->lock);
        if (run->error.code == RTOMO_OK)
            run->error = e;
        pthread_mutex_unlock(&run->lock);
    }
}

static rtomo_status compute_composite(rtomo_sbdx *plan, cpu_sbdx *s,
                                      float *composite, uint16_t *depth,
                                      rtomo_error *err)
{
    const rtomo_sbdx_geometry *g = &plan->geom;
    composite_run run = {
        .stack = {s->planes, g->n_planes, g->out_width, g->out_height,
                  (const float *const *)s->response_x,
                  (const float *const *)s->response_y, g->flat_field},
        /* rtomo_engine.h: a radius of 0 means the default, 2. */
        .radius = g->composite_radius ? g->composite_radius : 2,
        .composite = composite,
        .depth = depth,
    };
    rtomo_clear_error(&run.error);
    pthread_mutex_init(&run.lock, NULL);
    int bands = (g->out_height + COMPOSITE_BAND_ROWS - 1) /
                COMPOSITE_BAND_ROWS;
    cpu_pool_run(s->pool, bands, composite_task, &run);
    pthread_mutex_destroy(&run.lock);
    if (run.error.code != RTOMO_OK)
        return rtomo_set_error(err, run.error.code, "%s", run.error.message);
    return RTOMO_OK;
}

static rtomo_status cpu_collect(rtomo_sbdx *plan, const rtomo_sbdx_output *out,
                                uint64_t *tag, rtomo_error *err)
{
    cpu_sbdx *s = plan->impl;
    size_t n = s->plane_size * plan->geom.n_planes;
    if (out->planes)
        memcpy(out->planes, s->planes, sizeof(float) * n);
    if (out->planes_u16)
        for (size_t i = 0; i < n; i++)
            out->planes_u16[i] =
                to_u16(s->planes[i], out->u16_offset, out->u16_scale);
    if (out->composite || out->depth) {
        double t0 = rtomo_now_seconds();
        rtomo_status st =
            compute_composite(plan, s, out->composite, out->depth, err);
        plan->stats.compute_seconds += rtomo_now_seconds() - t0;
        if (st != RTOMO_OK)
            return st;
    }
    *tag = s->tag;
    plan->stats.latency_seconds_last = rtomo_now_seconds() - s->submitted_at;
    return RTOMO_OK;
}

const rtomo_sbdx_backend_ops rtomo_cpu_sbdx_ops = {
    .name = "cpu",
    .create = cpu_create,
    .destroy = cpu_destroy,
    .submit = cpu_submit,
    .collect = cpu_collect,
    .pipeline_depth = 1,
};
