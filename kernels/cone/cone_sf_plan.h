/*
 * cone_sf_plan.h — host-side planning of the separable-footprint cone-
 * beam pair's z slabs (cone_sf_plan.c): the detector rows a slab of the
 * ROI reaches (its window), shared by the split pair on several GPUs
 * (cuda_cone_sf_slabs.cu).  Plain C, no CUDA: the planning is tested
 * and used where no GPU is.  Private to kernels/cone.
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

#ifdef __cplusplus
}
#endif

#endif /* RTOMO_CONE_SF_PLAN_H */
