/*
 * cuda_cone_sf_column.cu — the separable-footprint cone-beam pair's
 * z-column kernels (issue 15): A^T as a gather and A as its exact
 * transpose, both walking a column of voxels in z with the column's
 * transaxial footprint computed once per projection.  The older kernels
 * (cuda_cone_sf.cu) stay behind RTOMO_CONE_SF_KERNEL=old for comparison.
 *
 * Why this shape.  In the paper's configuration (1024^3 voxels of 1.2 mm,
 * 1024 views of 1536 x 1152 cells of 2 mm, magnification 2) a voxel's
 * footprint covers 2-3 cells in u and 2-3 rows in v (1.2 rows per voxel).
 * The old kernels recomputed the column's footprint (four divisions, a
 * square root, F1 of 8 cells: ~300 instructions) for every 8 voxels, read
 * every row of every voxel again (2.2 rows x 3 cells per voxel and view)
 * and A scattered 3-4 global atomics per voxel and view (4e12 in all).
 *
 * A^T (sfc_backproject_kernel): a thread per column (i, j) and
 * SFC_BT_Z = 64 voxels of it, accumulators in shared memory (thread-owned
 * slots, no atomics), all views in one launch.  Per view: the footprint
 * once (F1 from SF_CELLS + 1 values of the trapezoid's integral instead of
 * 2 per cell), then the voxels in z order; the rows they touch rise with
 * z, so each row's sum R(t) = sum_s F1(s) g[t][s] is read once (1.2 new
 * rows x 3 cells per voxel) and kept while the next voxel shares it.
 * Per voxel and view: ~3.6 cached loads, ~2.2 F2 and ~30 instructions
 * against ~95 before; the ~200-instruction set-up is spread over 64
 * voxels.  Projections read: a 32 x 4 column tile's footprint per view,
 * ~50 cells x (1.2 x 64 + 4) rows, about 1.5 bytes per voxel and view
 * from L2 (1.7 TB in all, much of it shared by neighbouring tiles).
 *
 * A (sfc_project_kernel): the same walk transposed.  A thread sums its
 * voxels' F2 f into the current row, C(t) = sum_z F2_z(t) f(z) (the CPU's
 * order), and when the walk leaves row t adds l_phi F1(s) C(t) into the
 * row's cells.  Those adds go into a patch of the detector in shared
 * memory that covers the block's footprint (32 x 8 columns x 16 voxels:
 * ~50 x 24 cells), and the patch goes to the projections with one global
 * atomic per non-zero cell: ~0.3 global atomics per voxel and view
 * instead of 3.6, the other 3.6 on the SM.  A block keeps its voxels in
 * shared memory across SFC_P_VIEWS = 8 views, so the volume is read 128
 * times (0.5 TB) rather than 1024 (4.4 TB).  A patch that would not fit
 * (huge magnifications; or RTOMO_CONE_SF_PATCH=0, the test hook) falls
 * back to global atomics per cell: the same weights, slower.
 *
 * Exactly a transpose: both kernels take F1, F2 and l_phi from the same
 * functions on the same floats (cone_sf.h, sfc_foot below), so A's cell
 * weight is A^T's voxel weight; only the order of float sums differs.
 * Expected (a guess until measured): ~30-40 instructions per voxel and
 * view for each, 1.1e12 voxel-views each, 3-6 s for the pair on an H100
 * against 45.6 s (run 33).
 *
 * Multi-streaming: the iterative engine keeps both vectors on the device
 * (cuda_cone_sf_backend.cu), so A and A^T move no data between host and
 * device; there is no transfer to hide until volumes outgrow the device.
 */
#include "config.h"

#include <limits.h>

#include "cone_sf.h"
#include "cuda_cone_sf.h"

/* A^T: a 32 x 4 tile of columns, 64 voxels of each. */
#define SFC_BT_X 32
#define SFC_BT_Y 4
#define SFC_BT_THREADS (SFC_BT_X * SFC_BT_Y)
#define SFC_BT_Z 64
/* A: a 32 x 8 tile of columns, 16 voxels of each, 8 views per block. */
#define SFC_P_X 32
#define SFC_P_Y 8
#define SFC_P_THREADS (SFC_P_X * SFC_P_Y)
#define SFC_P_Z 16
#define SFC_P_VIEWS 8
/* Cells of the shared patch; the paper's case needs ~1300. */
#define SFC_PATCH 6144
/* Cells whose F1 a thread keeps in registers (wider footprints evaluate F1
 * where they use it, with the same function). */
#define SFC_CELLS 4

/* A column's footprint at one view: cells s0..s1 on the detector, their
 * weights F1 when they fit in SFC_CELLS. */
typedef struct sfc_foot {
    cone_sf_column c;
    int s0, s1;
    int fits;
    float f[SFC_CELLS];
} sfc_foot;

/* The footprint of column (x, y) at view (cb, sb); 0 when it misses the
 * detector. */
__device__ __forceinline__ int sfc_foot_at(const cone_bp_const *k, float cb,
                                           float sb, float x, float y,
                                           sfc_foot *ft)
{
    ft->c = cone_sf_column_at(k, cb, sb, x, y);
    cone_sf_cells(&ft->c, &ft->s0, &ft->s1);
    ft->s0 = ft->s0 < 0 ? 0 : ft->s0;
    ft->s1 = ft->s1 >= k->det_u ? k->det_u - 1 : ft->s1;
    ft->fits = ft->s1 - ft->s0 < SFC_CELLS;
    /* F1(s) = I(s + 1/2) - I(s - 1/2): SFC_CELLS + 1 integrals; s - 1/2
     * and (s - 1) + 1/2 are the same float, so each equals cone_sf_f1
     * (which wider footprints call where they use it). */
    float below = cone_sf_cdf(&ft->c, (float)ft->s0 - 0.5f);
#pragma unroll
    for (int q = 0; q < SFC_CELLS; q++) {
        const float above = cone_sf_cdf(&ft->c, (float)(ft->s0 + q) + 0.5f);
        ft->f[q] = ft->fits && ft->s0 + q <= ft->s1 ? above - below : 0.0f;
        below = above;
    }
    return ft->s0 <= ft->s1;
}

/* The rows of voxel z (ROI index), clipped to the detector (ta > tb when
 * it misses). */
__device__ __forceinline__ void sfc_rows(const cone_bp_const *k,
                                         const cone_sf_column *c, int z,
                                         float *lo, float *hi, int *ta,
                                         int *tb)
{
    cone_sf_rows(k, c, k->z0 + (float)z * k->voxel, lo, hi);
    *ta = (int)floorf(*lo + 0.5f);
    *tb = (int)floorf(*hi + 0.5f);
    *ta = *ta < 0 ? 0 : *ta;
    *tb = *tb >= k->det_v ? k->det_v - 1 : *tb;
}

/* ------------------------------------------------------------- A^T ---- */

/* R(t): sum_s F1(s) row[s] over the footprint. */
__device__ __forceinline__ float sfc_row_sum(const sfc_foot *ft,
                                             const float *__restrict__ row)
{
    float r = 0.0f;
    if (ft->fits) {
#pragma unroll
        for (int q = 0; q < SFC_CELLS; q++)
            if (ft->s0 + q <= ft->s1)
                r += ft->f[q] * __ldg(row + ft->s0 + q);
    } else {
        for (int s = ft->s0; s <= ft->s1; s++)
            r += cone_sf_f1(&ft->c, s) * __ldg(row + s);
    }
    return r;
}

/* One view added into the column's voxels z0 .. z0 + nzc - 1 (acc: the
 * thread's slots, stride SFC_BT_THREADS). */
__device__ __forceinline__ void sfc_backproject_view(
    const cone_bp_const *k, const sfc_foot *ft, const float *__restrict__ q,
    int z0, int nzc, float *acc)
{
    int r_t = -1;               /* the row whose sum r holds */
    float r = 0.0f;
    for (int m = 0; m < nzc; m++) {
        float lo, hi;
        int ta, tb;
        sfc_rows(k, &ft->c, z0 + m, &lo, &hi, &ta, &tb);
        float b = 0.0f;
        for (int t = ta; t <= tb; t++) {
            if (t != r_t) {
                r = sfc_row_sum(ft, q + (size_t)t * k->det_u);
                r_t = t;
            }
            b += cone_sf_f2(lo, hi, t) * r;
        }
        acc[m * SFC_BT_THREADS] += ft->c.amp * b;
    }
}

__global__ void __launch_bounds__(SFC_BT_THREADS)
sfc_backproject_kernel(const cone_bp_const k, int n_proj,
                       const float *__restrict__ cos_b,
                       const float *__restrict__ sin_b,
                       const float *__restrict__ proj, size_t frame_len,
                       float *volume)
{
    /* The voxels' sums, slot m of thread n at m * threads + n (no bank
     * conflicts; no thread reads another's, so no barriers). */
    __shared__ float acc_all[SFC_BT_Z * SFC_BT_THREADS];
    const int i = blockIdx.x * SFC_BT_X + threadIdx.x;
    const int j = blockIdx.y * SFC_BT_Y + threadIdx.y;
    const int z0 = blockIdx.z * SFC_BT_Z;
    if (i >= k.nx || j >= k.ny)
        return;
    const int nzc = k.nz - z0 < SFC_BT_Z ? k.nz - z0 : SFC_BT_Z;
    float *acc = acc_all + threadIdx.y * SFC_BT_X + threadIdx.x;
    for (int m = 0; m < nzc; m++)
        acc[m * SFC_BT_THREADS] = 0.0f;
    const float x = k.x0 + (float)i * k.voxel;
    const float y = k.y0 + (float)j * k.voxel;
    for (int p = 0; p < n_proj; p++) {
        sfc_foot ft;
        if (sfc_foot_at(&k, cos_b[p], sin_b[p], x, y, &ft))
            sfc_backproject_view(&k, &ft, proj + (size_t)p * frame_len, z0,
                                 nzc, acc);
    }
    const size_t plane = (size_t)k.nx * (size_t)k.ny;
    float *out = volume + (size_t)z0 * plane + (size_t)j * k.nx + i;
    for (int m = 0; m < nzc; m++)
        out[(size_t)m * plane] = acc[m * SFC_BT_THREADS];
}

/* --------------------------------------------------------------- A ---- */

/* The block's patch of one view: cells smin.. (w wide), rows tmin..tmax;
 * on says whether it is in use (else every add goes to the view). */
typedef struct sfc_patch {
    int on, smin, w, tmin, tmax;
} sfc_patch;

/* F1(s) v added into row[s] for the footprint's cells (row: a patch row
 * in shared memory or a view's row in global memory; inlined, so each
 * call site's atomics know their memory).  f[] is indexed only by
 * unrolled constants, so it stays in registers. */
__device__ __forceinline__ void sfc_spread(const sfc_foot *ft, float *row,
                                           float v)
{
    if (ft->fits) {
#pragma unroll
        for (int q = 0; q < SFC_CELLS; q++)
            if (ft->s0 + q <= ft->s1)
                atomicAdd(row + q, ft->f[q] * v);
    } else {
        for (int s = ft->s0; s <= ft->s1; s++)
            atomicAdd(row + (s - ft->s0), cone_sf_f1(&ft->c, s) * v);
    }
}

/* l_phi F1(s) C(t) into row t's cells: the patch's when it holds the row,
 * else the view's (global) ones. */
__device__ __forceinline__ void sfc_emit(const cone_bp_const *k,
                                         const sfc_foot *ft,
                                         const sfc_patch *pt, float *patch,
                                         float *view, int t, float v)
{
    if (v == 0.0f)
        return;
    if (pt->on && t >= pt->tmin && t <= pt->tmax)
        sfc_spread(ft, patch + (t - pt->tmin) * pt->w + (ft->s0 - pt->smin),
                   v);
    else
        sfc_spread(ft, view + (size_t)t * k->det_u + ft->s0, v);
}

/* The column's voxels (vox: the thread's slots) projected into one view:
 * rows summed in z order, each row emitted when the walk leaves it. */
__device__ __forceinline__ void sfc_project_view(
    const cone_bp_const *k, const sfc_foot *ft, const float *vox, int z0,
    int nzc, const sfc_patch *pt, float *patch, float *view)
{
    int cur_t = INT_MIN;        /* the row cur sums */
    float cur = 0.0f;
    for (int m = 0; m < nzc; m++) {
        const float f = vox[m * SFC_P_THREADS];
        if (f == 0.0f)
            continue;
        float lo, hi;
        int ta, tb;
        sfc_rows(k, &ft->c, z0 + m, &lo, &hi, &ta, &tb);
        for (int t = ta; t <= tb; t++) {
            if (t != cur_t) {
                if (cur_t != INT_MIN)
                    sfc_emit(k, ft, pt, patch, view, cur_t, ft->c.amp * cur);
                cur_t = t;
                cur = 0.0f;
            }
            cur += cone_sf_f2(lo, hi, t) * f;
        }
    }
    if (cur_t != INT_MIN)
        sfc_emit(k, ft, pt, patch, view, cur_t, ft->c.amp * cur);
}

/* The block's footprint at one view from every thread's (bounds: shared,
 * set to empty by the caller): the patch, on when it fits in cap cells. */
__device__ __forceinline__ sfc_patch sfc_patch_of(int *bounds, int has,
                                                  int s0, int s1, int ta,
                                                  int tb, int cap)
{
    if (has) {
        atomicMin(&bounds[0], s0);
        atomicMax(&bounds[1], s1);
        atomicMin(&bounds[2], ta);
        atomicMax(&bounds[3], tb);
    }
    __syncthreads();
    sfc_patch pt;
    pt.smin = bounds[0];
    pt.w = bounds[1] - bounds[0] + 1;
    pt.tmin = bounds[2];
    pt.tmax = bounds[3];
    const long long cells = (long long)pt.w * (pt.tmax - pt.tmin + 1);
    pt.on = bounds[0] <= bounds[1] && bounds[2] <= bounds[3] && cells <= cap;
    return pt;
}

/* The patch's non-zero cells added into the view, a row of cells to
 * consecutive threads. */
__device__ __forceinline__ void sfc_patch_flush(const cone_bp_const *k,
                                                const sfc_patch *pt,
                                                const float *patch, int tid,
                                                float *view)
{
    const int n = pt->w * (pt->tmax - pt->tmin + 1);
    for (int c = tid; c < n; c += SFC_P_THREADS) {
        const float v = patch[c];
        if (v != 0.0f)
            atomicAdd(view + (size_t)(pt->tmin + c / pt->w) * k->det_u +
                          pt->smin + c % pt->w,
                      v);
    }
}

/* blockIdx.z: the z chunk (fastest) and the group of views after
 * group_first. */
__global__ void __launch_bounds__(SFC_P_THREADS, 3)
sfc_project_kernel(const cone_bp_const k, int n_proj, int n_chunks,
                   int group_first, const float *__restrict__ cos_b,
                   const float *__restrict__ sin_b,
                   const float *__restrict__ volume, float *proj,
                   size_t frame_len, int cap)
{
    __shared__ float vox_all[SFC_P_Z * SFC_P_THREADS];
    __shared__ float patch[SFC_PATCH];
    __shared__ int bounds[4];
    const int tid = threadIdx.y * SFC_P_X + threadIdx.x;
    const int i = blockIdx.x * SFC_P_X + threadIdx.x;
    const int j = blockIdx.y * SFC_P_Y + threadIdx.y;
    const int z0 = (int)(blockIdx.z % (unsigned)n_chunks) * SFC_P_Z;
    const int p_begin = (group_first + (int)(blockIdx.z / (unsigned)n_chunks))
                        * SFC_P_VIEWS;
    const int p_end = p_begin + SFC_P_VIEWS < n_proj ? p_begin + SFC_P_VIEWS
                                                     : n_proj;
    const int nzc = k.nz - z0 < SFC_P_Z ? k.nz - z0 : SFC_P_Z;
    /* Threads outside the volume stay for the barriers, with no work. */
    const int inside = i < k.nx && j < k.ny;
    float *vox = vox_all + tid;
    const size_t plane = (size_t)k.nx * (size_t)k.ny;
    for (int m = 0; m < nzc; m++)
        vox[m * SFC_P_THREADS] =
            inside ? volume[(size_t)(z0 + m) * plane + (size_t)j * k.nx + i]
                   : 0.0f;
    const float x = k.x0 + (float)i * k.voxel;
    const float y = k.y0 + (float)j * k.voxel;
    for (int p = p_begin; p < p_end; p++) {
        if (tid == 0) {
            bounds[0] = bounds[2] = INT_MAX;
            bounds[1] = bounds[3] = INT_MIN;
        }
        __syncthreads();    /* also: the last view's flush has read patch */
        sfc_foot ft;
        ft.s0 = ft.s1 = 0;      /* read below only when has */
        int has = inside && sfc_foot_at(&k, cos_b[p], sin_b[p], x, y, &ft);
        int ta = 0, tb = -1;
        if (has) {
            float lo, hi;
            int unused;
            sfc_rows(&k, &ft.c, z0, &lo, &hi, &ta, &unused);
            sfc_rows(&k, &ft.c, z0 + nzc - 1, &lo, &hi, &unused, &tb);
            has = ta <= tb;
        }
        const sfc_patch pt = sfc_patch_of(bounds, has, ft.s0, ft.s1, ta, tb,
                                          cap);
        if (pt.on)
            for (int c = tid; c < pt.w * (pt.tmax - pt.tmin + 1);
                 c += SFC_P_THREADS)
                patch[c] = 0.0f;
        __syncthreads();
        float *view = proj + (size_t)p * frame_len;
        if (has)
            sfc_project_view(&k, &ft, vox, z0, nzc, &pt, patch, view);
        __syncthreads();
        if (pt.on)
            sfc_patch_flush(&k, &pt, patch, tid, view);
    }
}

/* ------------------------------------------------------- launchers ---- */

extern "C" rtomo_status cuda_cone_sf_project_columns(cuda_cone_sf *s,
                                                     const float *volume,
                                                     float *projections,
                                                     rtomo_error *err)
{
    const cone_bp_const *k = &s->k;
    const int chunks = (k->nz + SFC_P_Z - 1) / SFC_P_Z;
    const int groups = (s->n_proj + SFC_P_VIEWS - 1) / SFC_P_VIEWS;
    /* gridDim.z is at most 65535: groups of views over several launches
     * when chunks x groups exceed it. */
    const int per_launch = 65535 / chunks > 0 ? 65535 / chunks : 1;
    const dim3 block(SFC_P_X, SFC_P_Y);
    const int cap = s->patch_cap < SFC_PATCH ? s->patch_cap : SFC_PATCH;
    for (int g = 0; g < groups; g += per_launch) {
        const int n = groups - g < per_launch ? groups - g : per_launch;
        const dim3 grid((k->nx + SFC_P_X - 1) / SFC_P_X,
                        (k->ny + SFC_P_Y - 1) / SFC_P_Y,
                        (unsigned)(chunks * n));
        sfc_project_kernel<<<grid, block, 0, s->stream>>>(
            *k, s->n_proj, chunks, g, s->cos_b, s->sin_b, volume,
            projections, s->frame_len, cap);
        RTOMO_CUDA_CHECK_LAUNCH(err, "sfc_project_kernel");
    }
    return RTOMO_OK;
}

extern "C" rtomo_status cuda_cone_sf_backproject_columns(cuda_cone_sf *s,
                                                         const float *weighted,
                                                         float *volume,
                                                         rtomo_error *err)
{
    const cone_bp_const *k = &s->k;
    const dim3 block(SFC_BT_X, SFC_BT_Y);
    const dim3 grid((k->nx + SFC_BT_X - 1) / SFC_BT_X,
                    (k->ny + SFC_BT_Y - 1) / SFC_BT_Y,
                    (k->nz + SFC_BT_Z - 1) / SFC_BT_Z);
    sfc_backproject_kernel<<<grid, block, 0, s->stream>>>(
        *k, s->n_proj, s->cos_b, s->sin_b, weighted, s->frame_len, volume);
    RTOMO_CUDA_CHECK_LAUNCH(err, "sfc_backproject_kernel");
    return RTOMO_OK;
}
