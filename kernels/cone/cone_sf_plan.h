/*
 * cone_sf_plan.h — host-side planning of the separable-footprint cone-
 * beam pair's z slabs (cone_sf_plan.c): the detector rows a slab of the
 * ROI reaches (its window), shared by the split pair on several GPUs
 * (cuda_cone_sf_slabs.cu) and the streamed pair (cuda_cone_sf_stream.cu);
 * what a resident solve needs on a GPU, and how a device-memory budget
 * cuts the ROI into streamed slabs.  Plain C, no CUDA: the planning is
 * tested and used (rtomo_cone_iter_bytes) where no GPU is.  Private to
 * kernels/cone.
 */
#ifndef RTOMO_CONE_SF_PLAN_H
#define RTOMO_CONE_SF_PLAN_H

#include "cone_internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The detector rows the ROI's slices z_first .. z_first + nz - 1 reach at
 * any view (k: the whole ROI's): *row0 and *rows, 0 rows when none. */
void cone_sf_slab_rows(const cone_bp_const *k, int z_first, int nz,
                       int *row0, int *rows);

/* Buffer sets (each its own CUDA stream) per GPU of a streamed pair:
 * one slab's transfers overlap the other's kernels. */
#define CONE_SF_LANES 2
/* Slabs a GPU gets at least when the budget would allow fewer: with two
 * lanes, the first upload and the last download are not hidden; more
 * slabs make them a smaller part of the whole. */
#define CONE_SF_MIN_SLABS 4

/* The slabs of a streamed pair: the ROI's slices in slabs of `slices`
 * (the last one fewer when slices does not divide nz). */
typedef struct cone_sf_stream_plan {
    int slices;                 /* per slab */
    int n_slabs;
    int max_rows;               /* the largest window's rows */
    size_t slab_bytes;          /* one slab of slices, bytes */
    size_t window_bytes;        /* the largest window, bytes */
    size_t device_bytes;        /* per GPU: tables and the lanes */
    size_t host_bytes;          /* the lanes' pinned staging (a slab
                                   and a window each), all GPUs (the
                                   vectors, pageable, not counted) */
} cone_sf_stream_plan;

/* The vectors a solve holds at most (kernels/iterative): b, CGLS's
 * residual and direction in both spaces, SIRT's row and column weights
 * and its update, and during SIRT's set-up a sinogram of ones. */
#define CONE_SF_SOLVE_SINOGRAMS 4
#define CONE_SF_SOLVE_VOLUMES 4

/* Device bytes of a resident solve of c's geometry over n_devs GPUs, as
 * the pair splits it (cuda_cone_sf_slabs.cu; the test hook
 * RTOMO_CONE_SF_SPLIT included): the first GPU the solver's sinograms,
 * the pair's weighted sinogram and tables; every GPU its slabs' share of
 * the image vectors and their detector-row windows; the first also the
 * landing for the others' windows.  device[d] (d < n_devs; device may be
 * NULL) per GPU; returns the largest. */
size_t cone_sf_resident_bytes(const rtomo_cone *c, int n_devs,
                              size_t *device);

/* Bytes of one sinogram and one ROI volume of c. */
size_t cone_sf_sino_bytes(const rtomo_cone *c);
size_t cone_sf_volume_bytes(const rtomo_cone *c);

/* Plan streamed slabs for n_devs GPUs: `slices` per slab when > 0 (the
 * test hook; clamped to nz; the budget not checked), else the most that
 * fit in `budget` bytes per GPU, but at least CONE_SF_MIN_SLABS slabs per
 * GPU where nz allows.  RTOMO_E_NOMEM, saying what one slice needs, when
 * not even slabs of one slice fit. */
rtomo_status cone_sf_stream_plan_make(const rtomo_cone *c, int n_devs,
                                      size_t budget, int slices,
                                      cone_sf_stream_plan *out,
                                      rtomo_error *err);

#ifdef __cplusplus
}
#endif

#endif /* RTOMO_CONE_SF_PLAN_H */
