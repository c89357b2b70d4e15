/*
 * cone_sf_plan.c — host-side planning of the separable-footprint cone-
 * beam pair's z slabs: the detector-row window of a slab of the ROI
 * (what the split pair on several GPUs, cuda_cone_sf_slabs.cu, projects
 * into and back-projects from).  Plain C so that it builds and is tested
 * without CUDA.
 */
#include "config.h"

#include <math.h>

#include "cone_sf_plan.h"

/* Rows beyond the window's bound on either side: the bound is computed
 * in double, the kernels' rows in float (errors far below a row). */
#define SLAB_ROW_MARGIN 2

/* The detector rows the ROI's slices z_first .. z_first + nz - 1 reach at
 * any view (k: the whole ROI's): *row0 and *rows, 0 rows when none.  A
 * voxel at height z of a column at depth t (toward the source) covers
 * rows (z -/+ voxel / 2) M(t) / pitch_v + v0, M(t) = sdd / (sad - t)
 * (cone_sf_rows), and |t| is at most R, the farthest column centre's
 * distance from the axis; linear in M, so the extremes are at M(-R) and
 * M(R). */
void cone_sf_slab_rows(const cone_bp_const *k, int z_first, int nz,
                       int *row0, int *rows)
{
    const double vx = k->voxel;
    const double x = fmax(fabs(k->x0), fabs(k->x0 + (k->nx - 1) * vx));
    const double y = fmax(fabs(k->y0), fabs(k->y0 + (k->ny - 1) * vx));
    const double r = sqrt(x * x + y * y);
    double lo = -0.5, hi = k->det_v - 0.5;  /* every row */
    if (k->sad - r > 0.0) {
        const double m1 = k->sdd / (k->sad + r) * k->inv_pitch_v;
        const double m2 = k->sdd / (k->sad - r) * k->inv_pitch_v;
        const double zb = k->z0 + (z_first - 0.5) * vx;
        const double zt = k->z0 + (z_first + nz - 0.5) * vx;
        lo = fmin(zb * m1, zb * m2) + k->v0;
        hi = fmax(zt * m1, zt * m2) + k->v0;
    }
    const double a = fmax(floor(lo + 0.5) - SLAB_ROW_MARGIN, 0.0);
    const double b = fmin(floor(hi + 0.5) + SLAB_ROW_MARGIN, k->det_v - 1.0);
    *row0 = a <= b ? (int)a : 0;
    *rows = a <= b ? (int)(b - a) + 1 : 0;
}

