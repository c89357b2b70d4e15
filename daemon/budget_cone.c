/*
 * budget_cone.c — what a cone-beam scan's plan holds on one worker, for
 * admission (rtomod_budget.h): the engine's resident volume (its z-slab
 * of the ROI) and its chunk of filtered projections, the filter's working
 * set, the dark and flat fields the worker normalises with, and the
 * buffers its slices are read out into and published from.
 */
#include "config.h"

#include <math.h>
#include <stdint.h>

#include "rtomod_budget.h"

/* Filtered projections the engine holds: its chunk plus a scratch slot
 * (kernels/cone/cone_internal.h, CONE_CHUNK = 32). */
#define CONE_SLOTS 33
/* cuFFT's plans and the libraries' own allocations beside the buffers
 * counted here. */
#define CUDA_SLACK ((size_t)64 << 20)

static size_t mul(size_t a, size_t b)
{
    size_t r;
    return __builtin_mul_overflow(a, b, &r) ? SIZE_MAX : r;
}

static size_t add(size_t a, size_t b)
{
    return a > SIZE_MAX - b ? SIZE_MAX : a + b;
}

static size_t extent(int size, int volume, int first)
{
    return (size_t)(size > 0 ? size : volume - first);
}

size_t rtomod_budget_cone_volume(const rtomo_cone_geometry *g)
{
    return mul(mul(extent(g->roi_nx, g->nx, g->roi_x),
                   extent(g->roi_ny, g->ny, g->roi_y)),
               extent(g->roi_nz, g->nz, g->roi_z));
}

void rtomod_budget_cone_part(const rtomo_cone_geometry *g, int on_gpu,
                             size_t out_bytes, size_t *host, size_t *device)
{
    const size_t f = sizeof(float);
    const size_t frame = mul((size_t)g->det_u, (size_t)g->det_v);
    /* A half fan's filtered projections extend over the mirrored side. */
    size_t filt_u = (size_t)g->det_u;
    if (fabs(g->offset_u) > g->pitch_u)
        filt_u += (size_t)ceil(2.0 * fabs(g->offset_u) / g->pitch_u);
    size_t fft = 1;
    while (fft < 2 * filt_u && fft < ((size_t)1 << 40))
        fft <<= 1;
    const size_t volume = mul(rtomod_budget_cone_volume(g), f);
    const size_t slots = mul(mul(mul(filt_u, (size_t)g->det_v), f),
                             CONE_SLOTS);
    /* Padded rows, their spectrum and the transform's own work. */
    const size_t filter = mul(mul(mul(fft, (size_t)g->det_v), f), 3);
    /* Engine tables (cosine weights), the daemon's dark and flat sums
     * (double) and means (float), the engine's frame of line integrals. */
    const size_t fields = add(mul(frame, 2 * sizeof(double) + 2 * f),
                              mul(frame, 2 * f));
    size_t engine = add(add(volume, slots), filter);
    *host = add(out_bytes, fields);
    if (on_gpu) {
        *device = add(add(engine, mul(frame, 2 * f)), CUDA_SLACK);
    } else {
        *device = 0;
        *host = add(*host, engine);
    }
}
