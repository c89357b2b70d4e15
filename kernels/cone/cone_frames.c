/*
 * cone_frames.c — raw detector frames into the line integrals FDK takes:
 * sample conversion and the flat-field correction
 * p = -log((raw - dark) / (flat - dark)) with the FBP engine's clamps
 * (cpu_fbp_normalise.c, PROTOCOL.md 3.10), so that a daemon feeds cone
 * plans the frames it receives as it feeds parallel-beam plans.
 *
 * The correction never produces NaN or inf (one would spread through the
 * filter into a whole row and the volume): dead pixels (flat <= dark),
 * samples at or below the dark level and absurd ratios are clamped to a
 * transmission in [1e-6, FLT_MAX].
 */
#include "config.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>

#include "cone_internal.h"
#include "cpu_pool.h"
#include "engine_internal.h"

#define MIN_TRANSMISSION 1e-6f
/* A 1024 x 1024 frame takes about 8 ms on one core (a logf per pixel):
 * at a camera's 100+ frames/s that thread would bound the scan.  Frames
 * of at least FRAME_POOL_MIN pixels are normalised by up to
 * FRAME_POOL_THREADS threads, FRAME_ROWS detector rows per task. */
#define FRAME_POOL_MIN ((size_t)1 << 18)
#define FRAME_POOL_THREADS 8
#define FRAME_ROWS 16

static float line_integral(float raw, float dark, float flat)
{
    const float open = flat - dark;
    float ratio = open > 0.0f ? (raw - dark) / open : MIN_TRANSMISSION;
    if (!(ratio >= MIN_TRANSMISSION))   /* also a NaN */
        ratio = MIN_TRANSMISSION;
    if (ratio > FLT_MAX)
        ratio = FLT_MAX;
    return -logf(ratio);
}

rtomo_status cone_frames_setup(rtomo_cone *c, rtomo_error *err)
{
    int threads = rtomo_cpu_thread_count(&c->opt);
    if (threads > FRAME_POOL_THREADS)
        threads = FRAME_POOL_THREADS;
    if (c->frame_len < FRAME_POOL_MIN || threads < 2)
        return RTOMO_OK;
    return cpu_pool_create(threads, &c->frame_pool, err);
}

/* Samples [first, first + n) of a frame into line integrals. */
static void normalise_span(const void *frame, rtomo_dtype dtype,
                           const float *dark, const float *flat, size_t first,
                           size_t n, float *out)
{
    rtomo_convert_to_float((const char *)frame +
                               first * rtomo_dtype_size(dtype),
                           dtype, n, out + first);
    if (!flat)
        return;
    for (size_t i = first; i < first + n; i++)
        out[i] = line_integral(out[i], dark ? dark[i] : 0.0f, flat[i]);
}

typedef struct frame_job {
    const void *frame;
    rtomo_dtype dtype;
    const float *dark, *flat;
    float *out;
    size_t row, len;            /* samples per row, per frame */
} frame_job;

static void frame_task(void *ctx, int task, int worker)
{
    (void)worker;
    const frame_job *j = ctx;
    const size_t first = (size_t)task * FRAME_ROWS * j->row;
    const size_t n = first + FRAME_ROWS * j->row <= j->len
                         ? FRAME_ROWS * j->row : j->len - first;
    normalise_span(j->frame, j->dtype, j->dark, j->flat, first, n, j->out);
}

rtomo_status rtomo_cone_line_integrals(const rtomo_cone *c, const void *frame,
                                       rtomo_dtype dtype, const float *dark,
                                       const float *flat, float *out,
                                       rtomo_error *err)
{
    rtomo_clear_error(err);
    if (!c || !frame || !out)
        return rtomo_set_error(err, RTOMO_E_INVALID, "NULL plan or buffer");
    if (dtype != RTOMO_DTYPE_U8 && dtype != RTOMO_DTYPE_U16 &&
        dtype != RTOMO_DTYPE_F32)
        return rtomo_set_error(err, RTOMO_E_INVALID, "unknown dtype %d",
                               (int)dtype);
    if (dark && !flat)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "a dark without a flat: the flat-field "
                               "correction needs the flat");
    const size_t n = c->frame_len;
    if (!c->frame_pool) {
        normalise_span(frame, dtype, dark, flat, 0, n, out);
        return RTOMO_OK;
    }
    frame_job job = {frame, dtype, dark, flat, out,
                     (size_t)c->geom.det_u, n};
    const int rows = c->geom.det_v;
    cpu_pool_run(c->frame_pool, (rows + FRAME_ROWS - 1) / FRAME_ROWS,
                 frame_task, &job);
    return RTOMO_OK;
}

rtomo_status rtomo_cone_add_frame(rtomo_cone *c, int index, const void *frame,
                                  rtomo_dtype dtype, const float *dark,
                                  const float *flat, rtomo_error *err)
{
    if (!c)
        return rtomo_set_error(err, RTOMO_E_INVALID, "NULL plan");
    if (!c->frame_scratch) {
        c->frame_scratch = malloc(sizeof(float) * c->frame_len);
        if (!c->frame_scratch)
            return rtomo_set_error(err, RTOMO_E_NOMEM,
                                   "out of memory for a frame");
    }
    rtomo_status st = rtomo_cone_line_integrals(c, frame, dtype, dark, flat,
                                                c->frame_scratch, err);
    return st == RTOMO_OK
               ? rtomo_cone_add_projection(c, index, c->frame_scratch, err)
               : st;
}
