/*
 * budget_cone.c — what a cone-beam scan's plan holds on one worker, for
 * admission (rtomod_budget.h): the engine's plan as the engine counts it
 * (rtomo_cone_bytes: the resident volume of its z-slab of the ROI, its
 * chunk of filtered projections, the filter's working set), the dark and
 * flat fields the worker averages, and the buffers its slices are read
 * out into and published from; and what an iterative solve adds, on
 * each GPU its separable-footprint pair is split over (as the engine
 * counts it: rtomo_cone_iter_bytes).
 */
#include "config.h"

#include <stdint.h>
#include <string.h>

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

/* What the daemon itself holds for a solve, in host memory: every
 * projection's line integrals, the solve's volume and an iterate being
 * published. */
static size_t daemon_solve_bytes(const rtomo_cone_geometry *g)
{
    const size_t f = sizeof(float);
    const size_t sino = mul(mul(mul((size_t)g->det_u, (size_t)g->det_v),
                                (size_t)g->n_proj), f);
    const size_t nx = (size_t)(g->roi_nx ? g->roi_nx : g->nx - g->roi_x);
    const size_t ny = (size_t)(g->roi_ny ? g->roi_ny : g->ny - g->roi_y);
    const size_t nz = (size_t)(g->roi_nz ? g->roi_nz : g->nz - g->roi_z);
    return add(sino, mul(mul(mul(mul(nx, ny), nz), f), 2));
}

void rtomod_budget_cone_iter(const rtomo_cone_geometry *g, int n_gpus,
                             size_t *host, size_t *device)
{
    /* Beside the daemon's own, the engine's solve as it counts it
     * (rtomo_cone_iter_bytes): on the CPU the solver's vectors, the
     * pair's tables and staging; on the GPUs, split as the engine splits
     * the pair over them (z slabs of the image vectors, the sinograms on
     * the first), the staging of one vector on the host.  A geometry it
     * refuses was refused before; should one come here, it cannot be
     * admitted. */
    size_t engine_host;
    rtomo_error err;
    const rtomo_backend backend = n_gpus > 0 ? RTOMO_BACKEND_CUDA
                                             : RTOMO_BACKEND_CPU;
    if (rtomo_cone_iter_bytes(g, backend, n_gpus, 0, &engine_host,
                              n_gpus > 0 ? device : NULL, NULL,
                              &err) != RTOMO_OK) {
        *host = SIZE_MAX;
        for (int i = 0; i < n_gpus; i++)
            device[i] = SIZE_MAX;
        return;
    }
    *host = add(daemon_solve_bytes(g), engine_host);
}

/* The device budget a GPU's share of the solve may take beside the FDK
 * plan (on worker 0's GPU): the smallest over the solve's GPUs. */
static size_t share_limit(const size_t *device_limit, int n_gpus,
                          size_t fdk_device)
{
    size_t least = SIZE_MAX;
    for (int i = 0; i < n_gpus; i++) {
        size_t room = device_limit[i];
        if (i == 0)
            room = room > fdk_device ? room - fdk_device : 0;
        least = room < least ? room : least;
    }
    return least;
}

/* The streamed solve within `budget` per GPU: its device claim, and on
 * the host its vectors and staging beside the daemon's own.  Returns 0,
 * or -1 when not even a streamed plan fits. */
static int streamed_claim(const rtomo_cone_geometry *g, int n_gpus,
                          size_t budget, size_t *solve_host,
                          size_t *solve_device, rtomod_cone_solve_plan *plan)
{
    size_t engine_host;
    int slices;
    rtomo_error err;
    if (rtomo_cone_iter_bytes(g, RTOMO_BACKEND_CUDA, n_gpus, budget,
                              &engine_host, solve_device, &slices,
                              &err) != RTOMO_OK || slices < 1)
        return -1;
    *solve_host = add(daemon_solve_bytes(g), engine_host);
    plan->device_budget = budget;
    plan->stream_slices = slices;
    return 0;
}

void rtomod_budget_cone_solve(const rtomo_cone_geometry *g, int n_gpus,
                              size_t out_bytes, const size_t *device_limit,
                              rtomod_budget_claim *claim,
                              rtomod_cone_solve_plan *plan)
{
    rtomod_cone_solve_plan own;
    plan = plan ? plan : &own;
    memset(claim, 0, sizeof *claim);
    memset(plan, 0, sizeof *plan);
    size_t host, device, solve_host;
    size_t solve_device[RTOMO_MAX_DEVICES] = {0};
    rtomod_budget_cone_part(g, n_gpus > 0, out_bytes, &host, &device);
    rtomod_budget_cone_iter(g, n_gpus, &solve_host, solve_device);
    if (n_gpus > 0 && device_limit) {
        /* Resident when every share fits (the engine is told the largest,
         * so that it chooses the same); streamed otherwise. */
        const size_t room = share_limit(device_limit, n_gpus, device);
        size_t largest = 0;
        for (int i = 0; i < n_gpus; i++)
            largest = solve_device[i] > largest ? solve_device[i] : largest;
        if (largest <= room)
            plan->device_budget = largest;
        else
            (void)streamed_claim(g, n_gpus, room, &solve_host, solve_device,
                                 plan);
    }
    claim->host = add(host, solve_host);
    /* The FDK plan on worker 0's GPU, the pair's first, beside its
     * share: the FDK volume is the solve's start. */
    claim->device[0] = n_gpus > 0 ? device : 0;
    for (int i = 0; i < n_gpus; i++)
        claim->device[i] = add(claim->device[i], solve_device[i]);
}
