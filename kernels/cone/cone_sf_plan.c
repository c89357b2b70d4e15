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
#include "engine_internal.h"

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


/* ------------------------------------------------------ memory needed ---- */

size_t cone_sf_sino_bytes(const rtomo_cone *c)
{
    return sizeof(float) * c->frame_len * (size_t)c->geom.n_proj;
}

size_t cone_sf_volume_bytes(const rtomo_cone *c)
{
    return sizeof(float) * c->volume_len;
}

/* The pair's tables on a GPU: l_theta per cell (the first GPU's only),
 * cos and sin per view, the dot product's partial sums (CUDA_SF_DOT_BLOCKS
 * doubles, cuda_cone_sf.h, which a C file cannot include). */
#define SF_DOT_BYTES (256 * sizeof(double))

static size_t view_table_bytes(const rtomo_cone *c)
{
    return sizeof(float) * 2 * (size_t)c->geom.n_proj + SF_DOT_BYTES;
}

static size_t table_bytes(const rtomo_cone *c)
{
    return sizeof(float) * c->frame_len + view_table_bytes(c);
}

/* A split solve's image vectors on its GPUs: n slabs of the ROI's nz
 * slices as split_create deals them, slab b on the b-th of n "devices",
 * which are the n_devs GPUs in order, each taken n / n_devs times (the
 * test hook); each slab's share of the vectors and its window, a remote
 * slab's own tables, and on the first GPU the landing for the largest
 * remote window. */
static void split_bytes(const rtomo_cone *c, int n_devs, int n,
                        size_t *device)
{
    const cone_bp_const *k = &c->bp;
    const size_t plane = sizeof(float) * (size_t)k->nx * (size_t)k->ny;
    const size_t row = sizeof(float) * (size_t)c->geom.det_u *
                       (size_t)c->geom.n_proj;
    size_t landing = 0;
    for (int b = 0; b < n; b++) {
        int z, count, row0, rows;
        rtomo_deal_even(k->nz, n, b, &z, &count);
        cone_sf_slab_rows(k, z, count, &row0, &rows);
        const int gpu = (int)((long)b * n_devs / n);
        const size_t window = (size_t)rows * row;
        device[gpu] += CONE_SF_SOLVE_VOLUMES * plane * (size_t)count + window;
        if (b > 0) {
            device[gpu] += view_table_bytes(c);
            landing = window > landing ? window : landing;
        }
    }
    device[0] += landing;
}

size_t cone_sf_resident_bytes(const rtomo_cone *c, int n_devs,
                              size_t *device)
{
    size_t own[RTOMO_MAX_DEVICES];
    n_devs = n_devs < 1 ? 1 : n_devs > RTOMO_MAX_DEVICES ? RTOMO_MAX_DEVICES
                                                          : n_devs;
    device = device ? device : own;
    for (int d = 0; d < n_devs; d++)
        device[d] = 0;
    /* The first GPU: the solvers' sinograms, the pair's amplitude-
     * weighted one and its tables. */
    device[0] = (CONE_SF_SOLVE_SINOGRAMS + 1) * cone_sf_sino_bytes(c) +
                table_bytes(c);
    int n = n_devs * rtomo_split_hook("RTOMO_CONE_SF_SPLIT");
    n = n < c->bp.nz ? n : c->bp.nz;
    if (n > 1)
        split_bytes(c, n_devs, n, device);
    else
        device[0] += CONE_SF_SOLVE_VOLUMES * cone_sf_volume_bytes(c);
    size_t most = 0;
    for (int d = 0; d < n_devs; d++)
        most = device[d] > most ? device[d] : most;
    return most;
}

/* ------------------------------------------------------ streamed slabs ---- */

/* The plan of slabs of s slices: the largest window over them and the
 * bytes a GPU and the host need. */
static void plan_for(const rtomo_cone *c, int n_devs, int s,
                     cone_sf_stream_plan *p)
{
    const int nz = c->bp.nz;
    p->slices = s;
    p->n_slabs = (nz + s - 1) / s;
    p->max_rows = 0;
    for (int z = 0; z < nz; z += s) {
        int row0, rows;
        cone_sf_slab_rows(&c->bp, z, nz - z < s ? nz - z : s, &row0, &rows);
        p->max_rows = rows > p->max_rows ? rows : p->max_rows;
    }
    p->slab_bytes = sizeof(float) * (size_t)c->bp.nx * (size_t)c->bp.ny *
                    (size_t)s;
    p->window_bytes = sizeof(float) * (size_t)p->max_rows *
                      (size_t)c->geom.det_u * (size_t)c->geom.n_proj;
    p->device_bytes = table_bytes(c) +
                      CONE_SF_LANES * (p->slab_bytes + p->window_bytes);
    p->host_bytes = (size_t)n_devs * CONE_SF_LANES *
                    (p->slab_bytes + p->window_bytes);
}

rtomo_status cone_sf_stream_plan_make(const rtomo_cone *c, int n_devs,
                                      size_t budget, int slices,
                                      cone_sf_stream_plan *out,
                                      rtomo_error *err)
{
    const int nz = c->bp.nz;
    n_devs = n_devs < 1 ? 1 : n_devs;
    if (slices > 0) {
        plan_for(c, n_devs, slices < nz ? slices : nz, out);
        return RTOMO_OK;
    }
    /* The largest slabs that fit, from a size that leaves every GPU
     * CONE_SF_MIN_SLABS of them, down: a window's rows do not shrink
     * in proportion to its slices (the cone's spread and the margin),
     * so the sizes are tried one by one rather than computed. */
    const long want = (long)CONE_SF_MIN_SLABS * n_devs;
    int s = (int)((nz + want - 1) / want);
    for (; s >= 1; s--) {
        plan_for(c, n_devs, s, out);
        if (out->device_bytes <= budget)
            return RTOMO_OK;
    }
    /* In MiB with three digits: budgets of kilobytes (tests) and of
     * gigabytes both read. */
    return rtomo_set_error(err, RTOMO_E_NOMEM,
                           "the cone SF pair cannot stream this volume "
                           "through a GPU with %.3g MiB: %d buffer sets of "
                           "a slab of one slice and its window of %d "
                           "detector rows (with the tables) need %.3g MiB",
                           (double)budget / (1 << 20), CONE_SF_LANES,
                           out->max_rows,
                           (double)out->device_bytes / (1 << 20));
}
