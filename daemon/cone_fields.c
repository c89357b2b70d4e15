/*
 * cone_fields.c — the dark and flat fields of a cone-beam plan: the darks
 * and flats summed as they come, and their means once the projections
 * begin, averaged exactly as the FBP engine averages them for parallel
 * beams (kernels/fbp/fbp_engine.c: running sums in double, means rounded
 * to float), so that both beams normalise a frame alike.  The cone
 * engine makes the line integrals from them (rtomo_cone_add_frame, with
 * the clamps of PROTOCOL.md 3.10).
 */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>

#include "worker_cone.h"

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

const float *cone_fields_dark(cone_fields *f)
{
    if (!f->started)
        take_means(f);
    return f->n_flat > 0 && f->n_dark > 0 ? f->dark : NULL;
}

const float *cone_fields_flat(cone_fields *f)
{
    if (!f->started)
        take_means(f);
    return f->n_flat > 0 ? f->flat : NULL;
}
