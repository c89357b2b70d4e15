/*
 * cpu_fbp_normalise.c — turns one detector row of a raw frame into line
 * integrals for the CPU FBP backend: sample conversion and the flat-field
 * correction p = -log((raw - dark) / (flat - dark)).
 *
 * The correction must never produce NaN or inf: a single non-finite sample
 * would spread through the filter into a whole row and from there into the
 * whole slice.  Dead pixels (flat <= dark), saturated or underexposed
 * samples (raw <= dark) and absurd ratios are therefore clamped.
 */
#include "config.h"

#include <float.h>
#include <math.h>

#include "cpu_fbp.h"

/* Transmission floor: -log(1e-6) = 13.8 is far more attenuation than any
 * real sample shows, yet finite. */
#define MIN_TRANSMISSION 1e-6f

static float line_integral(float raw, float dark, float flat)
{
    float open = flat - dark;
    float ratio = open > 0.0f ? (raw - dark) / open : MIN_TRANSMISSION;
    /* The negated test also catches a NaN from inf/inf. */
    if (!(ratio >= MIN_TRANSMISSION))
        ratio = MIN_TRANSMISSION;
    if (ratio > FLT_MAX)
        ratio = FLT_MAX;
    return -logf(ratio);
}

void cpu_fbp_normalise_row(const rtomo_fbp *plan, const void *frame,
                           rtomo_dtype dtype, int kept_row, float *out)
{
    const rtomo_fbp_geometry *g = &plan->geom;
    const size_t width = (size_t)g->det_width;
    const size_t row = (size_t)(g->row_first + kept_row);
    const char *src = (const char *)frame + row * width * rtomo_dtype_size(dtype);
    rtomo_convert_to_float(src, dtype, width, out);
    if (!plan->normalise)
        return;
    const float *dark = plan->dark + (size_t)kept_row * width;
    const float *flat = plan->flat + (size_t)kept_row * width;
    for (size_t i = 0; i < width; i++)
        out[i] = line_integral(out[i], dark[i], flat[i]);
}

/* Phase retrieval replaces the plain normalisation for filtering only:
 * rtomo_fbp_line_integrals (fbp_axis.c) keeps calling
 * cpu_fbp_normalise_row, whose result needs no other row. */
void cpu_fbp_line_integral_row(const rtomo_fbp *plan, const cpu_fbp_state *st,
                               const void *frame, rtomo_dtype dtype,
                               int kept_row, float *out)
{
    if (plan->phase.on)
        cpu_fbp_phase_row(plan, st, kept_row, out);
    else
        cpu_fbp_normalise_row(plan, frame, dtype, kept_row, out);
}
