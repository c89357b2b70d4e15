/*
 * cpu_fbp_stream.c — resident slices on the CPU backend (the backend side
 * of rtomo_fbp_stream_*, see rtomo_engine.h), and the clearing of a
 * projection slot.
 *
 * The slices are host arrays at the ROI and interpolation fixed at open.
 * A chunk is back-projected by the reference back-projector
 * (cpu_fbp_backproject_request) with its list of weighted slots, added
 * into the slices; everything is synchronous, so the ordering the
 * contract asks for (a chunk reads its slots before they are overwritten)
 * holds by construction.
 */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_fbp.h"

static size_t stream_image_floats(const rtomo_fbp *plan)
{
    return (size_t)plan->stream_roi[2] * (size_t)plan->stream_roi[3];
}

rtomo_status cpu_fbp_stream_open(rtomo_fbp *plan, const int *kept_rows,
                                 int n_rows, rtomo_error *err)
{
    cpu_fbp_state *st = plan->impl;
    size_t floats;
    if (__builtin_mul_overflow(stream_image_floats(plan), (size_t)n_rows,
                               &floats) ||
        floats > SIZE_MAX / sizeof(float) ||
        !(st->stream_slices = calloc(floats, sizeof(float))) ||
        !(st->stream_kept = malloc(sizeof(int) * (size_t)n_rows))) {
        cpu_fbp_stream_close(plan);
        return rtomo_set_error(err, RTOMO_E_NOMEM,
                               "out of memory for %d resident slices of "
                               "%dx%d (%.1f MiB)", n_rows, plan->stream_roi[2],
                               plan->stream_roi[3],
                               (double)stream_image_floats(plan) * n_rows *
                                   sizeof(float) / (1 << 20));
    }
    memcpy(st->stream_kept, kept_rows, sizeof(int) * (size_t)n_rows);
    st->stream_n = n_rows;
    return RTOMO_OK;
}

rtomo_status cpu_fbp_stream_apply(rtomo_fbp *plan, const int *slots,
                                  const float *weights, int n,
                                  rtomo_error *err)
{
    (void)err;
    cpu_fbp_state *st = plan->impl;
    double t0 = rtomo_now_seconds();
    /* The front end's chunks never exceed CPU_FBP_STREAM_CHUNK, which the
     * per-projection tables hold; split anyway rather than trust it. */
    for (int first = 0; first < n; first += st->bp_capacity) {
        int count = n - first < st->bp_capacity ? n - first : st->bp_capacity;
        cpu_fbp_bp_request rq = {
            .kept_rows = st->stream_kept, .n_rows = st->stream_n,
            .slots = slots + first, .weights = weights + first,
            .n_slots = count,
            .roi = {plan->stream_roi[0], plan->stream_roi[1],
                    plan->stream_roi[2], plan->stream_roi[3]},
            .interp = plan->stream_interp, .out = st->stream_slices,
            .accumulate = 1,
        };
        cpu_fbp_backproject_request(plan, st, &rq);
    }
    plan->stats.backproject_seconds += rtomo_now_seconds() - t0;
    return RTOMO_OK;
}

/* min, max, mean of n floats. */
static void image_stats(const float *x, size_t n, double *stats)
{
    float lo = x[0], hi = x[0];
    double sum = 0.0;
    for (size_t i = 0; i < n; i++) {
        lo = x[i] < lo ? x[i] : lo;
        hi = x[i] > hi ? x[i] : hi;
        sum += x[i];
    }
    stats[0] = lo;
    stats[1] = hi;
    stats[2] = sum / (double)n;
}

rtomo_status cpu_fbp_stream_read(rtomo_fbp *plan, const int *positions, int n,
                                 float *out, double *stats, rtomo_error *err)
{
    (void)err;
    const cpu_fbp_state *st = plan->impl;
    const size_t image = stream_image_floats(plan);
    for (int i = 0; i < n; i++) {
        const float *src = st->stream_slices + (size_t)positions[i] * image;
        memcpy(out + (size_t)i * image, src, sizeof(float) * image);
        if (stats)
            image_stats(src, image, stats + 3 * (size_t)i);
    }
    return RTOMO_OK;
}

rtomo_status cpu_fbp_stream_reset(rtomo_fbp *plan, rtomo_error *err)
{
    (void)err;
    cpu_fbp_state *st = plan->impl;
    memset(st->stream_slices, 0,
           sizeof(float) * stream_image_floats(plan) * (size_t)st->stream_n);
    return RTOMO_OK;
}

void cpu_fbp_stream_close(rtomo_fbp *plan)
{
    cpu_fbp_state *st = plan->impl;
    if (!st)
        return;
    free(st->stream_slices);
    free(st->stream_kept);
    st->stream_slices = NULL;
    st->stream_kept = NULL;
    st->stream_n = 0;
}

int cpu_fbp_stream_chunk(const rtomo_fbp *plan)
{
    (void)plan;
    return CPU_FBP_STREAM_CHUNK;
}

rtomo_status cpu_fbp_clear_projection(rtomo_fbp *plan, int index,
                                      rtomo_error *err)
{
    (void)err;
    const cpu_fbp_state *st = plan->impl;
    const rtomo_fbp_geometry *g = &plan->geom;
    for (int r = 0; r < g->row_count; r++)
        memset(cpu_fbp_projection_row(st, g->n_proj, r, index), 0,
               sizeof(float) * (size_t)g->det_width);
    return RTOMO_OK;
}
