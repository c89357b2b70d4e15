/*
 * cpu_fbp_backend.c — the CPU FBP backend (rtomo_cpu_fbp_ops): the plan
 * state and the entry points the front end (fbp_engine.c) calls.  The work
 * itself is in cpu_fbp_normalise.c, cpu_fbp_filter.c and
 * cpu_fbp_backproject.c; see cpu_fbp.h for the storage layout.
 *
 * Everything is synchronous: add_projection has filtered the frame when it
 * returns, so sync has nothing to wait for.  All memory is allocated at
 * create, so the per-frame and per-slice calls cannot fail.
 */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_fbp.h"

static cpu_fbp_state *state_of(const rtomo_fbp *plan) { return plan->impl; }

static void cpu_destroy(rtomo_fbp *plan)
{
    cpu_fbp_state *st = state_of(plan);
    if (!st)
        return;
    cpu_fbp_stream_close(plan);
    cpu_pool_destroy(st->pool);
    cpu_fbp_filter_destroy(st->filter);
    cpu_fbp_phase_destroy(st);
    cpu_fbp_rings_destroy(st);
    free(st->sinograms);
    free(st->bp_rows);
    free(st->bp_base);
    free(st->bp_cos);
    free(st->bp_sin);
    free(st);
    plan->impl = NULL;
}

/* Filtered sinograms of every kept row, guards included, zeroed so that
 * projections never fed contribute nothing. */
static rtomo_status allocate_sinograms(const rtomo_fbp *plan, cpu_fbp_state *st,
                                       rtomo_error *err)
{
    const rtomo_fbp_geometry *g = &plan->geom;
    st->bin_stride = g->det_width + CPU_FBP_GUARD_BEFORE + CPU_FBP_GUARD_AFTER;
    size_t floats;
    if (__builtin_mul_overflow((size_t)g->row_count, (size_t)g->n_proj,
                               &floats) ||
        __builtin_mul_overflow(floats, (size_t)st->bin_stride, &floats) ||
        floats > SIZE_MAX / sizeof(float) ||
        !(st->sinograms = calloc(floats, sizeof(float))))
        return rtomo_set_error(err, RTOMO_E_NOMEM,
                               "out of memory for the filtered sinograms of "
                               "%d rows x %d projections x %d bins (%.1f GiB)",
                               g->row_count, g->n_proj, g->det_width,
                               (double)g->row_count * g->n_proj *
                                   st->bin_stride * sizeof(float) /
                                   (1024.0 * 1024.0 * 1024.0));
    return RTOMO_OK;
}

static rtomo_status allocate_backprojection(const rtomo_fbp *plan,
                                            cpu_fbp_state *st, rtomo_error *err)
{
    /* Room for every projection, or a streaming chunk of them. */
    const int n_proj = plan->geom.n_proj > CPU_FBP_STREAM_CHUNK
                           ? plan->geom.n_proj : CPU_FBP_STREAM_CHUNK;
    st->bp_capacity = n_proj;
    st->bp_row_capacity = cpu_fbp_backproject_row_capacity(plan->geom.slice_size);
    st->bp_rows = malloc(sizeof(float) * (size_t)st->n_workers *
                         (size_t)st->bp_row_capacity);
    st->bp_base = malloc(sizeof(double) * (size_t)n_proj);
    st->bp_cos = malloc(sizeof(float) * (size_t)n_proj);
    st->bp_sin = malloc(sizeof(double) * (size_t)n_proj);
    if (!st->bp_rows || !st->bp_base || !st->bp_cos || !st->bp_sin)
        return rtomo_set_error(err, RTOMO_E_NOMEM,
                               "out of memory for back-projection buffers");
    return RTOMO_OK;
}

static rtomo_status cpu_create(rtomo_fbp *plan, rtomo_error *err)
{
    cpu_fbp_state *st = calloc(1, sizeof *st);
    if (!st)
        return rtomo_set_error(err, RTOMO_E_NOMEM,
                               "out of memory for the CPU FBP backend");
    plan->impl = st;
    rtomo_status s = cpu_pool_create(rtomo_cpu_thread_count(&plan->opt),
                                         &st->pool, err);
    if (s != RTOMO_OK)
        return s;
    st->n_workers = cpu_pool_size(st->pool);
    if ((s = allocate_sinograms(plan, st, err)) != RTOMO_OK ||
        (s = allocate_backprojection(plan, st, err)) != RTOMO_OK ||
        (s = cpu_fbp_phase_create(plan, st, err)) != RTOMO_OK ||
        (s = cpu_fbp_rings_create(plan, st, err)) != RTOMO_OK)
        return s;
    return cpu_fbp_filter_create(plan, st->n_workers, &st->filter, err);
}

static rtomo_status cpu_begin_projections(rtomo_fbp *plan, rtomo_error *err)
{
    /* Dark and flat are read from the plan as each row is normalised. */
    (void)plan;
    (void)err;
    return RTOMO_OK;
}

static rtomo_status cpu_add_projection(rtomo_fbp *plan, int index,
                                       const void *frame, rtomo_dtype dtype,
                                       rtomo_error *err)
{
    (void)err;
    double t0 = rtomo_now_seconds();
    if (plan->phase.on)
        cpu_fbp_phase_frame(plan, state_of(plan), frame, dtype);
    cpu_fbp_filter_frame(plan, state_of(plan), index, frame, dtype);
    plan->stats.filter_seconds += rtomo_now_seconds() - t0;
    plan->stats.projections_filtered++;
    return RTOMO_OK;
}

static rtomo_status cpu_set_filtered(rtomo_fbp *plan, int kept_row, int rows,
                                     const float *sinograms, rtomo_error *err)
{
    (void)err;
    const cpu_fbp_state *st = state_of(plan);
    const int n_proj = plan->geom.n_proj;
    const size_t width = (size_t)plan->geom.det_width;
    for (int r = 0; r < rows; r++)
        for (int p = 0; p < n_proj; p++) {
            const float *src = sinograms + ((size_t)r * n_proj + p) * width;
            memcpy(cpu_fbp_projection_row(st, n_proj, kept_row + r, p), src,
                   sizeof(float) * width);
        }
    return RTOMO_OK;
}

static rtomo_status cpu_get_filtered(rtomo_fbp *plan, int kept_row,
                                     float *sinogram, rtomo_error *err)
{
    (void)err;
    const cpu_fbp_state *st = state_of(plan);
    const int n_proj = plan->geom.n_proj;
    const size_t width = (size_t)plan->geom.det_width;
    for (int p = 0; p < n_proj; p++)
        memcpy(sinogram + (size_t)p * width,
               cpu_fbp_projection_row(st, n_proj, kept_row, p),
               sizeof(float) * width);
    return RTOMO_OK;
}

static rtomo_status cpu_sync(rtomo_fbp *plan, rtomo_error *err)
{
    /* Filtering finished inside add_projection. */
    (void)plan;
    (void)err;
    return RTOMO_OK;
}

static rtomo_status cpu_reconstruct(rtomo_fbp *plan, const int *kept_rows,
                                    int n_rows, float *out, rtomo_error *err)
{
    (void)err;
    double t0 = rtomo_now_seconds();
    cpu_fbp_backproject(plan, state_of(plan), kept_rows, n_rows, out);
    plan->stats.backproject_seconds += rtomo_now_seconds() - t0;
    return RTOMO_OK;
}

const rtomo_fbp_backend_ops rtomo_cpu_fbp_ops = {
    .name = "cpu",
    .create = cpu_create,
    .destroy = cpu_destroy,
    .begin_projections = cpu_begin_projections,
    .add_projection = cpu_add_projection,
    .set_filtered = cpu_set_filtered,
    .get_filtered = cpu_get_filtered,
    .sync = cpu_sync,
    .reconstruct = cpu_reconstruct,
    .clear_projection = cpu_fbp_clear_projection,
    .stream_open = cpu_fbp_stream_open,
    .stream_apply = cpu_fbp_stream_apply,
    .stream_read = cpu_fbp_stream_read,
    .stream_reset = cpu_fbp_stream_reset,
    .stream_close = cpu_fbp_stream_close,
    .stream_chunk = cpu_fbp_stream_chunk,
    .reconstruct_plane = cpu_fbp_reconstruct_plane,
    .remove_rings = cpu_fbp_remove_rings,
    .add_offsets = cpu_fbp_add_offsets,
};
