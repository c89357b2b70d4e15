/*
 * budget_cone.c — what a cone-beam scan's plan holds on one worker, for
 * admission (rtomod_budget.h): the engine's plan as the engine counts it
 * (rtomo_cone_bytes: the resident volume of its z-slab of the ROI, its
 * chunk of filtered projections, the filter's working set), the dark and
 * flat fields the worker averages, and the buffers its slices are read
 * out into and published from; and what an iterative solve adds.
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

void rtomod_budget_cone_iter(const rtomo_cone_geometry *g, int on_gpu,
                             size_t *host, size_t *device)
{
    const size_t f = sizeof(float);
    const size_t sino = mul(mul(mul((size_t)g->det_u, (size_t)g->det_v),
                                (size_t)g->n_proj), f);
    const size_t nx = (size_t)(g->roi_nx ? g->roi_nx : g->nx - g->roi_x);
    const size_t ny = (size_t)(g->roi_ny ? g->roi_ny : g->ny - g->roi_y);
    const size_t nz = (size_t)(g->roi_nz ? g->roi_nz : g->nz - g->roi_z);
    const size_t volume = mul(mul(mul(nx, ny), nz), f);
    /* The solvers (kernels/iterative): b, CGLS's residual and direction
     * in both spaces, SIRT's row and column weights and its update, and
     * during SIRT's set-up a sinogram of ones: 4 sinograms and 4 volumes;
     * the pair's own amplitude-weighted sinogram besides.  On the host,
     * beside the daemon's line integrals, the solve's volume and an
     * iterate being published, the engine's staging of one sinogram or
     * volume (SIRT's weights). */
    const size_t solver = add(mul(sino, 5), mul(volume, 4));
    const size_t daemon = add(add(sino, sino > volume ? sino : volume),
                              mul(volume, 2));
    *host = on_gpu ? daemon : add(daemon, solver);
    *device = on_gpu ? solver : 0;
}
