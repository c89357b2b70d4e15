/*
 * cone_sf.h — the separable-footprint cone-beam projector pair's
 * footprint arithmetic (SF-TR with the A2 amplitudes: Long, Fessler &
 * Balter, IEEE TMI 29 (2010) 1839; the form of Georgin et al.,
 * Fully3D 2019, eqs. 1-2), shared by the CPU pair (cpu_cone_sf.c) and,
 * being plain float code, usable on a GPU.  A and A^T evaluate the same
 * functions on the same floats, so A^T is A's transpose up to the order
 * of float sums.
 *
 * In detector pixel units (column fu = u / pitch_u + u0, row
 * fv = v / pitch_v + v0, cell (s, t) covering [s - 1/2, s + 1/2] x
 * [t - 1/2, t + 1/2]), voxel (x, y, z) of edge d at view beta contributes
 * to cell (s, t)
 *     A = l_theta(s, t) l_phi(x, y) F1(s) F2(t)
 *   - F1: the mean over the cell of the transaxial footprint, the
 *     trapezoid of unit height through the four projected corners of the
 *     voxel's square (sorted tau0 <= tau1 <= tau2 <= tau3);
 *   - F2: the overlap of the cell with the rectangle [fv_c - h, fv_c + h],
 *     the voxel's z extent magnified at its centre (h = d M_c / (2
 *     pitch_v)); "TR": trapezoid x rectangle;
 *   - l_phi = d / max(|cos phi|, |sin phi|), phi the in-plane direction of
 *     the ray through the voxel's centre (the chord of an in-plane ray
 *     through the square's middle), l_theta = 1 / cos theta of the cell's
 *     ray to the plane (its polar angle): a table per cell.
 * A of a volume in 1/L gives line integrals (dimensionless), like the
 * data FDK takes.
 */
#ifndef RTOMO_CONE_SF_H
#define RTOMO_CONE_SF_H

#include "cone_internal.h"

typedef struct cone_sf_column {
    float tau[4];               /* corners' columns, ascending */
    float amp;                  /* l_phi */
    float rows_per_z;           /* M_c / pitch_v: fv_c = z rows_per_z + v0 */
} cone_sf_column;

/* Column of the detector that world point (x, y) projects to. */
CONE_HD float cone_sf_column_of(const cone_bp_const *k, float cb, float sb,
                                float x, float y)
{
    const float t = x * cb + y * sb;
    const float s = -x * sb + y * cb;
    return k->sdd * s / (k->sad - t) * k->inv_pitch_u + k->u0;
}

CONE_HD void cone_sf_swap(float *a, float *b)
{
    const float lo = *a < *b ? *a : *b, hi = *a < *b ? *b : *a;
    *a = lo;
    *b = hi;
}

CONE_HD cone_sf_column cone_sf_column_at(const cone_bp_const *k, float cb,
                                         float sb, float x, float y)
{
    cone_sf_column c;
    const float h = 0.5f * k->voxel;
    c.tau[0] = cone_sf_column_of(k, cb, sb, x - h, y - h);
    c.tau[1] = cone_sf_column_of(k, cb, sb, x + h, y - h);
    c.tau[2] = cone_sf_column_of(k, cb, sb, x - h, y + h);
    c.tau[3] = cone_sf_column_of(k, cb, sb, x + h, y + h);
    /* A sorting network of four. */
    cone_sf_swap(&c.tau[0], &c.tau[1]);
    cone_sf_swap(&c.tau[2], &c.tau[3]);
    cone_sf_swap(&c.tau[0], &c.tau[2]);
    cone_sf_swap(&c.tau[1], &c.tau[3]);
    cone_sf_swap(&c.tau[1], &c.tau[2]);
    const float dx = x - k->sad * cb, dy = y - k->sad * sb;
    const float ax = dx < 0.0f ? -dx : dx, ay = dy < 0.0f ? -dy : dy;
    c.amp = k->voxel * sqrtf(dx * dx + dy * dy) / (ax > ay ? ax : ay);
    const float t = x * cb + y * sb;
    c.rows_per_z = k->sdd / (k->sad - t) * k->inv_pitch_v;
    return c;
}

/* Twice the integral of a ramp rising from 0 at v = 0 to 1 at v = w and
 * then flat: v^2 / w below w, 2 v - w beyond (a step when w is 0). */
CONE_HD float cone_sf_ramp2(float v, float w)
{
    const float vc = v < 0.0f ? 0.0f : (v < w ? v : w);
    const float over = v - w > 0.0f ? v - w : 0.0f;
    return (w > 0.0f ? vc * vc / w : 0.0f) + 2.0f * over;
}

/* The trapezoid's integral from tau0 to p. */
CONE_HD float cone_sf_cdf(const cone_sf_column *c, float p)
{
    return 0.5f * (cone_sf_ramp2(p - c->tau[0], c->tau[1] - c->tau[0]) -
                   cone_sf_ramp2(p - c->tau[2], c->tau[3] - c->tau[2]));
}

/* Cells s_first..s_last the trapezoid touches (not clipped to the
 * detector). */
CONE_HD void cone_sf_cells(const cone_sf_column *c, int *s_first,
                           int *s_last)
{
    *s_first = (int)floorf(c->tau[0] + 0.5f);
    *s_last = (int)floorf(c->tau[3] + 0.5f);
}

/* F1 of cell s. */
CONE_HD float cone_sf_f1(const cone_sf_column *c, int s)
{
    return cone_sf_cdf(c, (float)s + 0.5f) - cone_sf_cdf(c, (float)s - 0.5f);
}

/* The rows of the voxel at world z: [lo, hi] in row units. */
CONE_HD void cone_sf_rows(const cone_bp_const *k, const cone_sf_column *c,
                          float z, float *lo, float *hi)
{
    const float centre = z * c->rows_per_z + k->v0;
    const float h = 0.5f * k->voxel * c->rows_per_z;
    *lo = centre - h;
    *hi = centre + h;
}

/* F2 of row t for the rows [lo, hi]. */
CONE_HD float cone_sf_f2(float lo, float hi, int t)
{
    const float a = (float)t - 0.5f > lo ? (float)t - 0.5f : lo;
    const float b = (float)t + 0.5f < hi ? (float)t + 0.5f : hi;
    return b > a ? b - a : 0.0f;
}

#endif
