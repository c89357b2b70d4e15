/*
 * cuda_cone_sf_rows.cu — the separable-footprint cone-beam pair's
 * row-buffer kernels (issue 15), the default: A^T and A as two phases per
 * view over a thread's z column, the detector rows buffered in
 * thread-owned shared memory between them.  The z-column kernels
 * (cuda_cone_sf_column.cu, RTOMO_CONE_SF_KERNEL=column) and the first
 * ones (cuda_cone_sf.cu, =old) stay for comparison in one session.
 *
 * Why.  The z-column kernels (run 33's successor: A 12.6 s, A^T 8.1 s on
 * an H100 for 1024^3 voxels and 1024 views of 1536 x 1152) walk a
 * column's voxels and fetch a row's sum R(t) (A^T) or emit a row's
 * C(t) (A) when the walk reaches a new row.  A warp's 32 columns reach
 * new rows at different voxels (their magnifications differ by ~1% across
 * a tile: up to ~7 rows apart at the volume's ends), so the warp runs
 * the fetch (4 loads) or the emit (4 atomics) on nearly every one of a
 * voxel's 2-3 row steps with some lanes idle, and each fetch's L2 latency
 * (~300 cycles; L1 is mostly given to shared memory) sits in a serial
 * chain: ~3 latencies and ~75 issued instructions per voxel and view, in
 * line with the measured ~12% of the issue rate.
 *
 * The two phases take the data-dependent control flow away from the
 * loads and the atomics.  Per view a thread takes the rows T0..T1 that
 * its SFR_Z = 32 voxels touch (~1.3 x 32 + 2 rows: voxels' rows rise
 * with z, so that range is all of them) and:
 *   A^T: (1) R(t) = sum_s F1(s) g[t][s] for t = T0..T1 into its slots of
 *        a shared buffer: a loop with a fixed count (unrolled: 16
 *        independent loads in flight, no chain);  (2) per voxel (in
 *        registers, unrolled) b += l_phi sum_t F2_z(t) R(t) from the
 *        buffer: shared loads only.
 *   A:   the transpose: (2') C(t) += F2_z(t) f(z) into its own slots
 *        (plain adds: no other thread touches them), voxels in registers
 *        for SFR_P_VIEWS = 16 views (the volume read 64 times, 0.3 TB);
 *        (1') per row, l_phi F1(s) C(t) added into the block's detector
 *        patch in shared memory (atomics: neighbouring columns share
 *        cells), one global atomic per non-zero patch cell at the end of
 *        the view (~0.2 per voxel and view).
 * Counts per voxel and view (the paper's case, 1.05-1.4 rows per
 * voxel): A^T ~1.3 x (4 loads + 4 FMA + store) + ~2.3 x (shared load +
 * F2 + FMA) + the footprint's ~200-instruction set-up / 32, about 45
 * instructions and no dependent global loads; A the same with 4 shared
 * atomics per row in place of the loads.  A row range longer than the
 * buffer (SFR_ROWS; voxels far taller than a row) falls back, for the
 * rows beyond it, to the direct fetch (A^T) or emit (A): slower, the same
 * weights.
 *
 * Exactly a transpose: F1, F2 and l_phi come from cone_sf.h on the same
 * floats as in the CPU pair and the other kernels (only the order of
 * float sums differs), so GPU-vs-CPU and adjointness hold as before.
 * The footprint helpers are this file's own copies (sfr_), so the
 * z-column kernels stay as they were measured.
 */
#include "config.h"

#include <limits.h>

#include "cone_sf.h"
#include "cuda_cone_sf.h"

/* Columns per tile (x: a warp) and voxels per thread (registers). */
#define SFR_X 32
#define SFR_Y 4
#define SFR_THREADS (SFR_X * SFR_Y)
#define SFR_Z 32
/* Rows a thread buffers per view: 32 voxels of up to 1.4 rows and the
 * ends' partial rows in the paper's case; more go the slow way. */
#define SFR_ROWS 52
/* A: views per block (the voxels stay in registers across them). */
#define SFR_P_VIEWS 16
/* A: cells of the block's detector patch; the paper's case needs
 * ~2200 (tile 32 x 4 columns x 32 voxels). */
#define SFR_PATCH 4096
/* Cells whose F1 a thread keeps in registers. */
#define SFR_CELLS 4

typedef struct sfr_foot {
    cone_sf_column c;
    int s0, s1;
    int fits;
    float f[SFR_CELLS];
} sfr_foot;

/* The footprint of column (x, y) at view (cb, sb), cells clipped to the
 * detector, F1 in registers when it fits; 0 when it misses. */
__device__ __forceinline__ int sfr_foot_at(const cone_bp_const *k, float cb,
                                           float sb, float x, float y,
                                           sfr_foot *ft)
{
    ft->c = cone_sf_column_at(k, cb, sb, x, y);
    cone_sf_cells(&ft->c, &ft->s0, &ft->s1);
    ft->s0 = ft->s0 < 0 ? 0 : ft->s0;
    ft->s1 = ft->s1 >= k->det_u ? k->det_u - 1 : ft->s1;
    ft->fits = ft->s1 - ft->s0 < SFR_CELLS;
    /* F1(s) = I(s + 1/2) - I(s - 1/2), consecutive cells sharing one
     * integral (the same floats as cone_sf_f1). */
    float below = cone_sf_cdf(&ft->c, (float)ft->s0 - 0.5f);
#pragma unroll
    for (int q = 0; q < SFR_CELLS; q++) {
        const float above = cone_sf_cdf(&ft->c, (float)(ft->s0 + q) + 0.5f);
        ft->f[q] = ft->fits && ft->s0 + q <= ft->s1 ? above - below : 0.0f;
        below = above;
    }
    return ft->s0 <= ft->s1;
}

/* The rows [lo, hi] of voxel z (ROI index) and ta..tb, the detector's
 * rows it touches (ta > tb: none). */
__device__ __forceinline__ void sfr_rows(const cone_bp_const *k,
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

/* The rows T0..T1 the column's voxels z0..z0 + nzc - 1 touch (a voxel's
 * rows never fall before the first voxel's or after the last's: float
 * products and sums are monotonic; the buffers' users check anyway). */
__device__ __forceinline__ void sfr_span(const cone_bp_const *k,
                                         const cone_sf_column *c, int z0,
                                         int nzc, int *t0, int *t1)
{
    float lo, hi;
    int unused;
    sfr_rows(k, c, z0, &lo, &hi, t0, &unused);
    sfr_rows(k, c, z0 + nzc - 1, &lo, &hi, &unused, t1);
}

/* ------------------------------------------------------------- A^T ---- */

/* R(t) = sum_s F1(s) row[s] over the footprint. */
__device__ __forceinline__ float sfr_row_sum(const sfr_foot *ft,
                                             const float *__restrict__ row)
{
    float r = 0.0f;
    if (ft->fits) {
#pragma unroll
        for (int q = 0; q < SFR_CELLS; q++)
            if (ft->s0 + q <= ft->s1)
                r += ft->f[q] * __ldg(row + ft->s0 + q);
    } else {
        for (int s = ft->s0; s <= ft->s1; s++)
            r += cone_sf_f1(&ft->c, s) * __ldg(row + s);
    }
    return r;
}

/* R(t) the slow way, for rows beyond the buffer (never in the paper's
 * case): out of line, with every cell's F1 evaluated where used, so the
 * unrolled voxel loop that calls it keeps its registers. */
__device__ __noinline__ float sfr_row_sum_slow(cone_sf_column c, int s0,
                                               int s1,
                                               const float *__restrict__ row)
{
    float r = 0.0f;
    for (int s = s0; s <= s1; s++)
        r += cone_sf_f1(&c, s) * __ldg(row + s);
    return r;
}

/* Phase 1: R(t0 + r) into buf[r * SFR_THREADS] for r < nb.  Iterations
 * are independent, so unrolling puts their loads in flight together. */
__device__ __forceinline__ void sfr_fill_rows(const cone_bp_const *k,
                                              const sfr_foot *ft,
                                              const float *__restrict__ q,
                                              int t0, int nb, float *buf)
{
#pragma unroll 4
    for (int r = 0; r < nb; r++)
        buf[r * SFR_THREADS] =
            sfr_row_sum(ft, q + (size_t)(t0 + r) * k->det_u);
}

/* Phase 2: one view added into the column's voxels (acc: registers,
 * indexed by unrolled constants only). */
__device__ __forceinline__ void sfr_gather_voxels(
    const cone_bp_const *k, const sfr_foot *ft, const float *__restrict__ q,
    int z0, int nzc, int t0, int nb, const float *buf, float acc[SFR_Z])
{
#pragma unroll
    for (int m = 0; m < SFR_Z; m++) {
        if (m < nzc) {
            float lo, hi;
            int ta, tb;
            sfr_rows(k, &ft->c, z0 + m, &lo, &hi, &ta, &tb);
            float b = 0.0f;
            for (int t = ta; t <= tb; t++) {
                const unsigned r = (unsigned)(t - t0);
                const float rt = r < (unsigned)nb
                                     ? buf[r * SFR_THREADS]
                                     : sfr_row_sum_slow(
                                           ft->c, ft->s0, ft->s1,
                                           q + (size_t)t * k->det_u);
                b += cone_sf_f2(lo, hi, t) * rt;
            }
            acc[m] += ft->c.amp * b;
        }
    }
}

__global__ void __launch_bounds__(SFR_THREADS, 5)
sfr_backproject_kernel(const cone_bp_const k, int n_proj,
                       const float *__restrict__ cos_b,
                       const float *__restrict__ sin_b,
                       const float *__restrict__ proj, size_t frame_len,
                       float *volume)
{
    /* Row r of thread n at r * threads + n: no bank conflicts, no thread
     * reads another's, so no barriers. */
    __shared__ float rows_all[SFR_ROWS * SFR_THREADS];
    const int i = blockIdx.x * SFR_X + threadIdx.x;
    const int j = blockIdx.y * SFR_Y + threadIdx.y;
    const int z0 = blockIdx.z * SFR_Z;
    if (i >= k.nx || j >= k.ny)
        return;
    const int nzc = k.nz - z0 < SFR_Z ? k.nz - z0 : SFR_Z;
    float *buf = rows_all + threadIdx.y * SFR_X + threadIdx.x;
    float acc[SFR_Z];
#pragma unroll
    for (int m = 0; m < SFR_Z; m++)
        acc[m] = 0.0f;
    const float x = k.x0 + (float)i * k.voxel;
    const float y = k.y0 + (float)j * k.voxel;
    for (int p = 0; p < n_proj; p++) {
        sfr_foot ft;
        if (!sfr_foot_at(&k, cos_b[p], sin_b[p], x, y, &ft))
            continue;
        int t0, t1;
        sfr_span(&k, &ft.c, z0, nzc, &t0, &t1);
        if (t0 > t1)
            continue;
        const int nb = t1 - t0 + 1 < SFR_ROWS ? t1 - t0 + 1 : SFR_ROWS;
        const float *q = proj + (size_t)p * frame_len;
        sfr_fill_rows(&k, &ft, q, t0, nb, buf);
        sfr_gather_voxels(&k, &ft, q, z0, nzc, t0, nb, buf, acc);
    }
    const size_t plane = (size_t)k.nx * (size_t)k.ny;
    float *out = volume + (size_t)z0 * plane + (size_t)j * k.nx + i;
#pragma unroll
    for (int m = 0; m < SFR_Z; m++)
        if (m < nzc)
            out[(size_t)m * plane] = acc[m];
}

/* --------------------------------------------------------------- A ---- */

/* The block's patch of one view: cells smin.. (w wide), rows tmin..tmax;
 * on: in use (else every add goes to the view in global memory). */
typedef struct sfr_patch {
    int on, smin, w, tmin, tmax;
} sfr_patch;

/* F1(s) v added into row[s - s0] for the footprint's cells (inlined, so
 * each call site's atomics know their memory space). */
__device__ __forceinline__ void sfr_spread(const sfr_foot *ft, float *row,
                                           float v)
{
    if (ft->fits) {
#pragma unroll
        for (int q = 0; q < SFR_CELLS; q++)
            if (ft->s0 + q <= ft->s1)
                atomicAdd(row + q, ft->f[q] * v);
    } else {
        for (int s = ft->s0; s <= ft->s1; s++)
            atomicAdd(row + (s - ft->s0), cone_sf_f1(&ft->c, s) * v);
    }
}

/* v F1(s) into row t's cells: the patch's when it holds the row, else
 * the view's. */
__device__ __forceinline__ void sfr_emit(const cone_bp_const *k,
                                         const sfr_foot *ft,
                                         const sfr_patch *pt, float *patch,
                                         float *view, int t, float v)
{
    if (v == 0.0f)
        return;
    if (pt->on && t >= pt->tmin && t <= pt->tmax)
        sfr_spread(ft, patch + (t - pt->tmin) * pt->w + (ft->s0 - pt->smin),
                   v);
    else
        sfr_spread(ft, view + (size_t)t * k->det_u + ft->s0, v);
}

/* Phase 2': C(t) = sum_z F2_z(t) f(z) into the thread's slots buf[r]
 * (rows t0 + r, r < nb; rows beyond go out directly). */
__device__ __forceinline__ void sfr_gather_rows(
    const cone_bp_const *k, const sfr_foot *ft, const float vox[SFR_Z],
    int z0, int nzc, int t0, int nb, float *buf, const sfr_patch *pt,
    float *patch, float *view)
{
    for (int r = 0; r < nb; r++)
        buf[r * SFR_THREADS] = 0.0f;
#pragma unroll
    for (int m = 0; m < SFR_Z; m++) {
        if (m < nzc && vox[m] != 0.0f) {
            float lo, hi;
            int ta, tb;
            sfr_rows(k, &ft->c, z0 + m, &lo, &hi, &ta, &tb);
            for (int t = ta; t <= tb; t++) {
                const float w = cone_sf_f2(lo, hi, t) * vox[m];
                const unsigned r = (unsigned)(t - t0);
                if (r < (unsigned)nb)
                    buf[r * SFR_THREADS] += w;
                else
                    sfr_emit(k, ft, pt, patch, view, t, ft->c.amp * w);
            }
        }
    }
}

/* Phase 1': l_phi F1(s) C(t) into the rows' cells. */
__device__ __forceinline__ void sfr_scatter_rows(
    const cone_bp_const *k, const sfr_foot *ft, int t0, int nb,
    const float *buf, const sfr_patch *pt, float *patch, float *view)
{
    for (int r = 0; r < nb; r++)
        sfr_emit(k, ft, pt, patch, view, t0 + r,
                 ft->c.amp * buf[r * SFR_THREADS]);
}

/* The block's footprint from every thread's (bounds: shared, empty at
 * the call); the caller's barrier follows. */
__device__ __forceinline__ void sfr_bound(int *bounds, int s0, int s1,
                                          int t0, int t1)
{
    atomicMin(&bounds[0], s0);
    atomicMax(&bounds[1], s1);
    atomicMin(&bounds[2], t0);
    atomicMax(&bounds[3], t1);
}

__device__ __forceinline__ sfr_patch sfr_patch_of(const int *bounds,
                                                  int cap)
{
    sfr_patch pt;
    pt.smin = bounds[0];
    pt.w = bounds[1] - bounds[0] + 1;
    pt.tmin = bounds[2];
    pt.tmax = bounds[3];
    const long long cells = (long long)pt.w * (pt.tmax - pt.tmin + 1);
    pt.on = bounds[0] <= bounds[1] && bounds[2] <= bounds[3] && cells <= cap;
    return pt;
}

/* The patch's non-zero cells added into the view and set back to zero
 * (so the next view's patch starts zeroed without a pass of its own). */
__device__ __forceinline__ void sfr_patch_flush(const cone_bp_const *k,
                                                const sfr_patch *pt,
                                                float *patch, int tid,
                                                float *view)
{
    const int n = pt->w * (pt->tmax - pt->tmin + 1);
    for (int c = tid; c < n; c += SFR_THREADS) {
        const float v = patch[c];
        if (v != 0.0f) {
            patch[c] = 0.0f;
            atomicAdd(view + (size_t)(pt->tmin + c / pt->w) * k->det_u +
                          pt->smin + c % pt->w,
                      v);
        }
    }
}

__device__ __forceinline__ void sfr_bounds_reset(int *bounds)
{
    bounds[0] = bounds[2] = INT_MAX;
    bounds[1] = bounds[3] = INT_MIN;
}

/* blockIdx.z: the z chunk (fastest) and the group of views after
 * group_first. */
__global__ void __launch_bounds__(SFR_THREADS, 4)
sfr_project_kernel(const cone_bp_const k, int n_proj, int n_chunks,
                   int group_first, const float *__restrict__ cos_b,
                   const float *__restrict__ sin_b,
                   const float *__restrict__ volume, float *proj,
                   size_t frame_len, int cap)
{
    __shared__ float rows_all[SFR_ROWS * SFR_THREADS];
    __shared__ float patch[SFR_PATCH];
    __shared__ int bounds[4];
    const int tid = threadIdx.y * SFR_X + threadIdx.x;
    const int i = blockIdx.x * SFR_X + threadIdx.x;
    const int j = blockIdx.y * SFR_Y + threadIdx.y;
    const int z0 = (int)(blockIdx.z % (unsigned)n_chunks) * SFR_Z;
    const int p_begin = (group_first + (int)(blockIdx.z / (unsigned)n_chunks))
                        * SFR_P_VIEWS;
    const int p_end = p_begin + SFR_P_VIEWS < n_proj ? p_begin + SFR_P_VIEWS
                                                     : n_proj;
    const int nzc = k.nz - z0 < SFR_Z ? k.nz - z0 : SFR_Z;
    /* Threads outside the volume stay for the barriers, with no work. */
    const int inside = i < k.nx && j < k.ny;
    float *buf = rows_all + tid;
    const size_t plane = (size_t)k.nx * (size_t)k.ny;
    float vox[SFR_Z];
#pragma unroll
    for (int m = 0; m < SFR_Z; m++)
        vox[m] = inside && m < nzc
                     ? volume[(size_t)(z0 + m) * plane + (size_t)j * k.nx + i]
                     : 0.0f;
    for (int c = tid; c < SFR_PATCH; c += SFR_THREADS)
        patch[c] = 0.0f;
    if (tid == 0)
        sfr_bounds_reset(bounds);
    __syncthreads();
    const float x = k.x0 + (float)i * k.voxel;
    const float y = k.y0 + (float)j * k.voxel;
    for (int p = p_begin; p < p_end; p++) {
        sfr_foot ft;
        int has = inside && sfr_foot_at(&k, cos_b[p], sin_b[p], x, y, &ft);
        int t0 = 0, t1 = -1;
        if (has) {
            sfr_span(&k, &ft.c, z0, nzc, &t0, &t1);
            has = t0 <= t1;
        }
        if (has)
            sfr_bound(bounds, ft.s0, ft.s1, t0, t1);
        __syncthreads();        /* the bounds are complete */
        const sfr_patch pt = sfr_patch_of(bounds, cap);
        float *view = proj + (size_t)p * frame_len;
        if (has) {
            const int nb = t1 - t0 + 1 < SFR_ROWS ? t1 - t0 + 1 : SFR_ROWS;
            sfr_gather_rows(&k, &ft, vox, z0, nzc, t0, nb, buf, &pt, patch,
                            view);
            sfr_scatter_rows(&k, &ft, t0, nb, buf, &pt, patch, view);
        }
        __syncthreads();        /* the patch is complete, bounds read */
        if (tid == 0)
            sfr_bounds_reset(bounds);
        if (pt.on)
            sfr_patch_flush(&k, &pt, patch, tid, view);
        __syncthreads();        /* patch zero and bounds empty again */
    }
}

/* ------------------------------------------------------- launchers ---- */

extern "C" rtomo_status cuda_cone_sf_project_rows(cuda_cone_sf *s,
                                                  const float *volume,
                                                  float *projections,
                                                  rtomo_error *err)
{
    const cone_bp_const *k = &s->k;
    const int chunks = (k->nz + SFR_Z - 1) / SFR_Z;
    const int groups = (s->n_proj + SFR_P_VIEWS - 1) / SFR_P_VIEWS;
    /* gridDim.z is at most 65535: groups of views over several launches
     * when chunks x groups exceed it. */
    const int per_launch = 65535 / chunks > 0 ? 65535 / chunks : 1;
    const dim3 block(SFR_X, SFR_Y);
    const int cap = s->patch_cap < SFR_PATCH ? s->patch_cap : SFR_PATCH;
    for (int g = 0; g < groups; g += per_launch) {
        const int n = groups - g < per_launch ? groups - g : per_launch;
        const dim3 grid((k->nx + SFR_X - 1) / SFR_X,
                        (k->ny + SFR_Y - 1) / SFR_Y, (unsigned)(chunks * n));
        sfr_project_kernel<<<grid, block, 0, s->stream>>>(
            *k, s->n_proj, chunks, g, s->cos_b, s->sin_b, volume,
            projections, s->frame_len, cap);
        RTOMO_CUDA_CHECK_LAUNCH(err, "sfr_project_kernel");
    }
    return RTOMO_OK;
}

extern "C" rtomo_status cuda_cone_sf_backproject_rows(cuda_cone_sf *s,
                                                      const float *weighted,
                                                      float *volume,
                                                      rtomo_error *err)
{
    const cone_bp_const *k = &s->k;
    const dim3 block(SFR_X, SFR_Y);
    const dim3 grid((k->nx + SFR_X - 1) / SFR_X, (k->ny + SFR_Y - 1) / SFR_Y,
                    (k->nz + SFR_Z - 1) / SFR_Z);
    sfr_backproject_kernel<<<grid, block, 0, s->stream>>>(
        *k, s->n_proj, s->cos_b, s->sin_b, weighted, s->frame_len, volume);
    RTOMO_CUDA_CHECK_LAUNCH(err, "sfr_backproject_kernel");
    return RTOMO_OK;
}
