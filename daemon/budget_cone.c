/*
 * budget_cone.c — what a cone-beam scan's plan holds on one worker, for
 * admission (rtomod_budget.h): the engine's plan as the engine counts it
 * (rtomo_cone_bytes: the resident volume of its z-slab of the ROI, its
 * chunk of filtered projections, the filter's working set), the dark and
 * flat fields the worker averages, and the buffers its slices are read
 * out into and published from.
 */
#include "config.h"

#include <stdint.h>

#include "rtomod_budget.h"

static size_t mul(size_t a, size_t b)
{
    size_t r;
    return __builtin_mul_overflow(a, b, &r) ? SIZE_MAX : r;
}

static size_t add(size_t a, size_t b)
{
    return a > SIZE_MAX - b ? SIZE_MAX : a + b;
}

void rtomod_budget_cone_part(const rtomo_cone_geometry *g, int on_gpu,
                             size_t out_bytes, size_t *host, size_t *device)
{
    /* The plan, as the engine counts it (its volume, chunk of filtered
     * projections, filter and tables).  A geometry it refuses was
     * refused before; should one come here, it cannot be admitted. */
    size_t plan_host, plan_device;
    rtomo_error err;
    if (rtomo_cone_bytes(g, on_gpu ? RTOMO_BACKEND_CUDA : RTOMO_BACKEND_CPU,
                         &plan_host, &plan_device, &err) != RTOMO_OK) {
        *host = *device = SIZE_MAX;
        return;
    }
    /* The daemon's dark and flat sums (double) and means (float). */
    const size_t frame = mul((size_t)g->det_u, (size_t)g->det_v);
    const size_t fields = mul(frame, 2 * sizeof(double) + 2 * sizeof(float));
    *host = add(add(plan_host, fields), out_bytes);
    *device = on_gpu ? plan_device : 0;
}
