/*
 * sbdx_engine.c — the backend-neutral front end of the SBDX tomosynthesis
 * engine: geometry validation, the copy of the plane ratios, the bookkeeping
 * of the submit/collect pipeline, and dispatch to the selected backend.
 */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"

#define MAX_HOLES 4096
#define MAX_DETECTOR 4096
#define MAX_PLANE_EDGE 32768

void rtomo_sbdx_geometry_init(rtomo_sbdx_geometry *g)
{
    memset(g, 0, sizeof *g);
    g->composite_radius = 2;
    g->flat_field = 1;
}

static rtomo_status check_counts(const rtomo_sbdx_geometry *g, rtomo_error *err)
{
    if (g->holes_x < 1 || g->holes_x > MAX_HOLES || g->holes_y < 1 ||
        g->holes_y > MAX_HOLES)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "collimator holes %dx%d are outside [1, %d] each",
                               g->holes_x, g->holes_y, MAX_HOLES);
    if (g->det_width < 1 || g->det_width > MAX_DETECTOR || g->det_height < 1 ||
        g->det_height > MAX_DETECTOR)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "detector %dx%d is outside [1, %d] each",
                               g->det_width, g->det_height, MAX_DETECTOR);
    if (g->shift_m < 1 || g->shift_m > 1024)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "shift_m %d is outside [1, 1024]", g->shift_m);
    if (g->n_planes < 1 || g->n_planes > RTOMO_SBDX_MAX_PLANES)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "n_planes %d is outside [1, %d]", g->n_planes,
                               RTOMO_SBDX_MAX_PLANES);
    return RTOMO_OK;
}

static rtomo_status check_ratios(const rtomo_sbdx_geometry *g, rtomo_error *err)
{
    if (!g->ratios)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "no plane ratios given for %d planes",
                               g->n_planes);
    for (int k = 0; k < g->n_planes; k++)
        if (!isfinite(g->ratios[k]) || g->ratios[k] <= 0.0 ||
            g->ratios[k] > RTOMO_SBDX_MAX_RATIO)
            return rtomo_set_error(err, RTOMO_E_INVALID,
                                   "ratios[%d] = %g is not in (0, %g]", k,
                                   g->ratios[k], RTOMO_SBDX_MAX_RATIO);
    return RTOMO_OK;
}

static rtomo_status check_output(const rtomo_sbdx_geometry *g, rtomo_error *err)
{
    int w = g->out_width ? g->out_width : g->shift_m * g->holes_x;
    int h = g->out_height ? g->out_height : g->shift_m * g->holes_y;
    if (g->out_width < 0 || g->out_height < 0 || w > MAX_PLANE_EDGE ||
        h > MAX_PLANE_EDGE)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "plane size %dx%d is outside [1, %d] each", w, h,
                               MAX_PLANE_EDGE);
    if (abs(g->origin_x) > MAX_PLANE_EDGE || abs(g->origin_y) > MAX_PLANE_EDGE)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "plane origin (%d, %d) is absurd", g->origin_x,
                               g->origin_y);
    if (g->composite_radius < 0 || g->composite_radius > 32)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "composite_radius %d is outside [0, 32]",
                               g->composite_radius);
    if (g->flat_field != 0 && g->flat_field != 1)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "flat_field %d is neither 0 (raw planes) nor "
                               "1 (flat-fielded planes)", g->flat_field);
    return RTOMO_OK;
}

rtomo_status rtomo_sbdx_geometry_validate(const rtomo_sbdx_geometry *g,
                                          rtomo_error *err)
{
    if (!g)
        return rtomo_set_error(err, RTOMO_E_INVALID, "no geometry given");
    rtomo_status st;
    if ((st = check_counts(g, err)) || (st = check_ratios(g, err)) ||
        (st = check_output(g, err)))
        return st;
    return RTOMO_OK;
}

static rtomo_status select_backend(rtomo_sbdx *plan, rtomo_error *err)
{
    rtomo_backend backend;
    rtomo_status st = rtomo_resolve_backend(plan->opt.backend, &backend, err);
    if (st != RTOMO_OK)
        return st;
    plan->ops = &rtomo_cpu_sbdx_ops;
#ifdef RTOMO_HAVE_CUDA
    if (backend == RTOMO_BACKEND_CUDA)
        plan->ops = &rtomo_cuda_sbdx_ops;
#endif
    if ((unsigned)plan->opt.sbdx_method > RTOMO_SBDX_DETECTOR_CENTRIC)
        return rtomo_set_error(err, RTOMO_E_INVALID, "unknown SBDX method %d",
                               (int)plan->opt.sbdx_method);
    plan->backend = backend;
    return RTOMO_OK;
}

static rtomo_status copy_geometry(rtomo_sbdx *plan, const rtomo_sbdx_geometry *g,
                                  rtomo_error *err)
{
    plan->geom = *g;
    plan->ratios = malloc(sizeof(double) * (size_t)g->n_planes);
    if (!plan->ratios)
        return rtomo_set_error(err, RTOMO_E_NOMEM, "out of memory");
    memcpy(plan->ratios, g->ratios, sizeof(double) * (size_t)g->n_planes);
    plan->geom.ratios = plan->ratios;
    if (!plan->geom.out_width)
        plan->geom.out_width = g->shift_m * g->holes_x;
    if (!plan->geom.out_height)
        plan->geom.out_height = g->shift_m * g->holes_y;
    if (!plan->geom.composite_radius)
        plan->geom.composite_radius = 2;
    return RTOMO_OK;
}

rtomo_sbdx *rtomo_sbdx_create(const rtomo_sbdx_geometry *g,
                              const rtomo_engine_options *opt,
                              rtomo_error *err)
{
    rtomo_clear_error(err);
    if (rtomo_sbdx_geometry_validate(g, err) != RTOMO_OK)
        return NULL;
    rtomo_sbdx *plan = calloc(1, sizeof *plan);
    if (!plan) {
        rtomo_set_error(err, RTOMO_E_NOMEM, "out of memory for an SBDX plan");
        return NULL;
    }
    if (opt)
        plan->opt = *opt;
    else
        rtomo_engine_options_init(&plan->opt);
    if (copy_geometry(plan, g, err) != RTOMO_OK ||
        select_backend(plan, err) != RTOMO_OK ||
        plan->ops->create(plan, err) != RTOMO_OK) {
        rtomo_sbdx_destroy(plan);
        return NULL;
    }
    return plan;
}

void rtomo_sbdx_destroy(rtomo_sbdx *plan)
{
    if (!plan)
        return;
    if (plan->ops && plan->impl)
        plan->ops->destroy(plan);
    free(plan->ratios);
    free(plan);
}

rtomo_backend rtomo_sbdx_backend(const rtomo_sbdx *plan) { return plan->backend; }

const rtomo_sbdx_geometry *rtomo_sbdx_geometry_of(const rtomo_sbdx *plan)
{
    return &plan->geom;
}

int rtomo_sbdx_pipeline_depth(const rtomo_sbdx *plan)
{
    return plan->ops->pipeline_depth;
}

void rtomo_sbdx_get_stats(const rtomo_sbdx *plan, rtomo_sbdx_stats *out)
{
    *out = plan->stats;
}

rtomo_status rtomo_sbdx_submit(rtomo_sbdx *plan, const void *frame,
                               rtomo_dtype dtype, uint64_t tag,
                               rtomo_error *err)
{
    if (!frame)
        return rtomo_set_error(err, RTOMO_E_INVALID, "no frame data given");
    if ((unsigned)dtype > RTOMO_DTYPE_F32)
        return rtomo_set_error(err, RTOMO_E_INVALID, "unknown sample type %d",
                               (int)dtype);
    if (plan->outstanding >= plan->ops->pipeline_depth)
        return rtomo_set_error(err, RTOMO_E_STATE,
                               "%d frames already in flight: collect one "
                               "before submitting another", plan->outstanding);
    if (dtype == RTOMO_DTYPE_F32) {
        const rtomo_sbdx_geometry *g = &plan->geom;
        size_t n = (size_t)g->holes_x * g->holes_y * g->det_width * g->det_height;
        const float *f = frame;
        for (size_t i = 0; i < n; i++)
            if (!isfinite(f[i]))
                return rtomo_set_error(err, RTOMO_E_INVALID,
                                       "frame sample %zu is NaN or infinite", i);
    }
    rtomo_status st = plan->ops->submit(plan, frame, dtype, tag, err);
    if (st == RTOMO_OK)
        plan->outstanding++;
    return st;
}

rtomo_status rtomo_sbdx_collect(rtomo_sbdx *plan, const rtomo_sbdx_output *out,
                                uint64_t *tag, rtomo_error *err)
{
    if (!out)
        return rtomo_set_error(err, RTOMO_E_INVALID, "no output given");
    if (plan->outstanding == 0)
        return rtomo_set_error(err, RTOMO_E_STATE,
                               "no frame has been submitted");
    if (out->planes_u16 && !(out->u16_scale > 0.0f && isfinite(out->u16_scale)))
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "u16_scale %g must be a positive number",
                               (double)out->u16_scale);
    uint64_t t = 0;
    rtomo_status st = plan->ops->collect(plan, out, &t, err);
    /* Whatever the outcome, the frame has left the pipeline. */
    plan->outstanding--;
    if (st == RTOMO_OK) {
        plan->stats.frames++;
        if (tag)
            *tag = t;
    }
    return st;
}

rtomo_status rtomo_sbdx_reconstruct(rtomo_sbdx *plan, const void *frame,
                                    rtomo_dtype dtype,
                                    const rtomo_sbdx_output *out,
                                    rtomo_error *err)
{
    if (plan->outstanding)
        return rtomo_set_error(err, RTOMO_E_STATE,
                               "frames are in flight: collect them before a "
                               "synchronous reconstruction");
    rtomo_status st = rtomo_sbdx_submit(plan, frame, dtype, 0, err);
    if (st != RTOMO_OK)
        return st;
    return rtomo_sbdx_collect(plan, out, NULL, err);
}
