/*
 * cone_fields.c — the dark and flat fields of a cone-beam plan and the
 * line integrals of its projections.  The cone engine takes line
 * integrals (rtomo_cone_add_projection), so the daemon normalises raw
 * frames itself, exactly as the FBP engine does for parallel beams
 * (kernels/fbp/fbp_engine.c, cpu_fbp_normalise.c): running sums in
 * double, means rounded to float, and a float ratio clamped so that a
 * dead pixel or a sample at or below the dark gives a large finite line
 * integral (13.8) instead of NaN or infinity, which the filter would
 * spread over a whole detector row and the back-projection over the
 * volume.
 */
#include "config.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "worker_cone.h"

/* -ln(1e-6) = 13.8: more attenuation than any sample shows, yet finite. */
#define MIN_TRANSMISSION 1e-6f

struct cone_fields {
    size_t samples;
    double *dark_sum, *flat_sum;
    int n_dark, n_flat;
    float *dark, *flat;         /* the means, once projections began */
    int started;
};

cone_fields *cone_fields_new(size_t samples)
{
    cone_fields *f = calloc(1, sizeof *f);
    if (!f)
        return NULL;
    f->samples = samples;
    f->dark_sum = calloc(samples, sizeof(double));
    f->flat_sum = calloc(samples, sizeof(double));
    f->dark = calloc(samples, sizeof(float));
    f->flat = calloc(samples, sizeof(float));
    if (!f->dark_sum || !f->flat_sum || !f->dark || !f->flat) {
        cone_fields_free(f);
        return NULL;
    }
    return f;
}

void cone_fields_free(cone_fields *f)
{
    if (!f)
        return;
    free(f->dark_sum);
    free(f->flat_sum);
    free(f->dark);
    free(f->flat);
    free(f);
}

static double sample(const void *frame, rtomo_dtype dtype, size_t i)
{
    switch (dtype) {
    case RTOMO_DTYPE_U8: return ((const uint8_t *)frame)[i];
    case RTOMO_DTYPE_U16: return ((const uint16_t *)frame)[i];
    default: return ((const float *)frame)[i];
    }
}

void cone_fields_add(cone_fields *f, int flat, const void *frame,
                     rtomo_dtype dtype)
{
    if (f->started)
        return;
    double *sum = flat ? f->flat_sum : f->dark_sum;
    for (size_t i = 0; i < f->samples; i++)
        sum[i] += sample(frame, dtype, i);
    if (flat)
        f->n_flat++;
    else
        f->n_dark++;
}

static void take_means(cone_fields *f)
{
    f->started = 1;
    for (size_t i = 0; f->n_flat > 0 && i < f->samples; i++) {
        if (f->n_dark)
            f->dark[i] = (float)(f->dark_sum[i] / f->n_dark);
        f->flat[i] = (float)(f->flat_sum[i] / f->n_flat);
    }
}

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

void cone_fields_line_integrals(cone_fields *f, const void *frame,
                                rtomo_dtype dtype, float *out)
{
    if (!f->started)
        take_means(f);
    for (size_t i = 0; i < f->samples; i++)
        out[i] = (float)sample(frame, dtype, i);
    if (f->n_flat == 0)
        return;
    for (size_t i = 0; i < f->samples; i++)
        out[i] = line_integral(out[i], f->dark[i], f->flat[i]);
}
