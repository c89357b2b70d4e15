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
#include "engine_internal.h"

#define MIN_TRANSMISSION 1e-6f

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
    rtomo_convert_to_float(frame, dtype, n, out);
    if (!flat)
        return RTOMO_OK;
    for (size_t i = 0; i < n; i++)
        out[i] = line_integral(out[i], dark ? dark[i] : 0.0f, flat[i]);
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
