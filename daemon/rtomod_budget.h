/*
 * rtomod_budget.h — admission control: the host and device memory that
 * every scan in flight may use, claimed when its begin message arrives and
 * released when it is over, so that no begin can exhaust memory.
 *
 * A scan's claim is an estimate, from its geometry, of what its plans hold
 * for as long as the scan lives: the filtered sinograms (on the GPU, or in
 * host memory with the CPU backend), the filter's working set, the pinned
 * staging of the CUDA pipeline and the output buffers that wait to be
 * published.  It is an upper bound of the big allocations, not a byte
 * count of every malloc: small tables and the libraries' own overheads are
 * covered by what the budgets leave free (see budget.c for the defaults).
 * Frames in flight are bounded apart from scans: by the work queues
 * (queue.mb per worker), ZeroMQ's high-water marks and the early-frame
 * hold (limits.early_mb).
 */
#ifndef RTOMOD_BUDGET_H
#define RTOMOD_BUDGET_H

#include <stddef.h>

#include "rtomo_cone.h"
#include "rtomo_engine.h"
#include "rtomod_config.h"

typedef struct rtomod_budget_claim {
    size_t host;                            /* bytes */
    size_t device[RTOMO_MAX_DEVICES];       /* bytes, per worker's GPU */
} rtomod_budget_claim;

typedef struct rtomod_budget {
    size_t host_limit, host_used;
    size_t device_limit[RTOMO_MAX_DEVICES], device_used[RTOMO_MAX_DEVICES];
    int n_devices;                          /* workers with a GPU */
    size_t early_limit, early_used;         /* frames held for a begin */
} rtomod_budget;

/* Budgets from the configuration (limits.*), the machine's memory and the
 * GPUs' (gpu_memory[i]: worker i's device, n_gpus 0 with the CPU
 * backend).  The host budget for scans is what remains of limits.host_mb
 * (default: 3/4 of the machine's memory) after the fixed reservations:
 * the work queues (queue.mb per worker) and the early-frame hold
 * (limits.early_mb).  Returns 0, or -1 with `error` filled when those
 * reservations leave nothing for scans. */
int rtomod_budget_init(rtomod_budget *b, const rtomod_config *cfg,
                       const size_t *gpu_memory, int n_gpus, int n_workers,
                       char *error, size_t error_size);

/* The bytes of one published slice (its ROI, else slice size, else the
 * detector width, squared), and of an SBDX stream's largest image (a
 * plane of plane_bytes per sample, or the float32 composite). */
size_t rtomod_budget_slice_bytes(const rtomo_fbp_geometry *g);
size_t rtomod_budget_sbdx_image_bytes(const rtomo_sbdx_geometry *g,
                                      int plane_bytes);

/* What one worker's part of a tomography scan holds: `rows` detector rows
 * of the geometry's width, n_proj projections, `resident` of the slices
 * kept resident (streaming), `batch` slices of the output size per
 * publication batch, `buffers` batch buffers alive. */
void rtomod_budget_tomo_part(const rtomo_fbp_geometry *g, int rows,
                             int resident, int batch, int buffers, int on_gpu,
                             size_t *host, size_t *device);
/* What one worker's iterative solve adds (reconstruction.method sirt or
 * cgls, worker_iter.c): the line integrals and images of its `rows`
 * selected rows in host memory, and the solver's plan and vectors for
 * `solve_rows` rows at a time (on the GPU when on_gpu, else in host
 * memory). */
void rtomod_budget_iter_part(const rtomo_fbp_geometry *g, int rows,
                             int solve_rows, int on_gpu, size_t *host,
                             size_t *device);
/* What one worker's SBDX plan holds (output planes as float32 or uint16,
 * `buffers` output sets alive). */
void rtomod_budget_sbdx_part(const rtomo_sbdx_geometry *g, int plane_bytes,
                             int composite, int buffers, int on_gpu,
                             size_t *host, size_t *device);

/* What one worker's cone-beam plan holds (budget_cone.c): g is the
 * geometry of its z-slab (the ROI it reconstructs), whose volume lives
 * on the GPU when on_gpu, else in host memory; out_bytes: the buffers
 * its slices are read out into while they are published. */
void rtomod_budget_cone_part(const rtomo_cone_geometry *g, int on_gpu,
                             size_t out_bytes, size_t *host, size_t *device);
/* What a cone-beam solve adds (worker_cone_iter.c): in host memory every
 * projection's line integrals, the solve's volume and an iterate; the
 * solver's vectors and the pair's own in host memory with the CPU
 * backend (n_gpus 0), else on the n_gpus GPUs the pair is split over
 * (rtomo_cone_iter_bytes): device[i] the bytes on the i-th (the first
 * holds the sinograms), device untouched when n_gpus is 0. */
void rtomod_budget_cone_iter(const rtomo_cone_geometry *g, int n_gpus,
                             size_t *host, size_t *device);
/* How a cone-beam solve's pair is to hold its vectors, as its claim was
 * made (rtomod_budget_cone_solve), for the engine to make the same choice
 * (rtomo_engine_options.device_budget). */
typedef struct rtomod_cone_solve_plan {
    size_t device_budget;       /* bytes a GPU's share may take (0: no
                                   limit, or the CPU) */
    int stream_slices;          /* 0: resident on the GPUs; else the
                                   vectors in host memory and the volume
                                   streamed through the GPUs in slabs of
                                   this many slices */
} rtomod_cone_solve_plan;

/* The claim of a cone-beam scan with a solve: its FDK is one slab (g, the
 * whole ROI) on worker 0, the solve's pair split over the n_gpus GPUs of
 * workers 0 .. n_gpus - 1 (0: the CPU backend); out_bytes as for
 * rtomod_budget_cone_part.  Worker 0's GPU holds the FDK plan and the
 * sinograms beside its share of the pair, each other GPU its share, so a
 * solve too large for one GPU fits when the shares do.  device_limit
 * (per worker's GPU, NULL: none): when the resident shares do not fit
 * beside the FDK plan, the solve streams (rtomo_cone.h) within what is
 * left of the smallest limit, its vectors claimed in host memory; when
 * not even that fits, the resident claim stands (and is refused).  plan
 * (may be NULL) says which. */
void rtomod_budget_cone_solve(const rtomo_cone_geometry *g, int n_gpus,
                              size_t out_bytes, const size_t *device_limit,
                              rtomod_budget_claim *claim,
                              rtomod_cone_solve_plan *plan);

/* Take the claim when it fits beside everything claimed so far, less
 * `leaving` (memory claimed by scans whose plans will be closed before
 * this one's are created: may be NULL); else leave the budget as it was
 * and say why (a sentence with the numbers and the setting that bounds
 * them).  Returns 0 or -1. */
int rtomod_budget_take(rtomod_budget *b, const rtomod_budget_claim *c,
                       const rtomod_budget_claim *leaving, char *why,
                       size_t why_size);
/* Give a claim back (it is zeroed). */
void rtomod_budget_release(rtomod_budget *b, rtomod_budget_claim *c);

/* The memory of this machine that rtomod may count on: the smaller of the
 * physical memory and the limit of its control group (systemd's
 * MemoryMax), in bytes. */
size_t rtomod_budget_machine_memory(void);

#endif /* RTOMOD_BUDGET_H */
