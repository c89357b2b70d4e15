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
 * SFC_BT_Z voxels of it, accumulators in shared memory (one thread's per
 * view, no atomics), all views in one launch.  Per view: the footprint
 * once (F1 from SF_CELLS + 1 values of the trapezoid's integral instead of
 * 2 per cell), then the voxels in z order; the rows they touch rise with
 * z, so each row's sum R(t) = sum_s F1(s) g[t][s] is read once (1.2 new
 * rows x 3 cells per voxel) and kept while the next voxel shares it.
 * Per voxel and view: ~3.6 cached loads and ~2.2 F2 (estimated ~30
 * instructions; measured ~150, below); the set-up is spread over the
 * column's voxels.  Projections read: the tile's footprint per view,
 * mostly from L1 (95% hits measured).
 *
 * A (sfc_project_kernel): the same walk transposed.  A thread sums its
 * voxels' F2 f into the current row, C(t) = sum_z F2_z(t) f(z) (the CPU's
 * order), and when the walk leaves row t adds l_phi F1(s) C(t) into the
 * row's cells.  Those adds go into a patch of the detector in shared
 * memory that covers the block's footprint (16 x 16 columns x 16 voxels:
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
 *
 * Measured (H100, Nsight Compute on 256^3 voxels and 256 views of
 * 384 x 288, the paper's voxel and cell sizes).  The first version (a
 * warp = 32 columns along x for every view; A 32 x 8 x 16, A^T 32 x 4 x
 * 64 voxels) issued ~370 warp instructions per warp-voxel step in A and
 * A^T was far over its estimate too, at ~0.55 issued per scheduler cycle:
 *   - a float atomicAdd into shared memory is a compare-and-swap loop on
 *     sm_90 (ATOMS.CAST.SPIN, no native float add), which a lane repeats
 *     while another lane of its warp hits the same cell;
 *   - for the views whose rays run along x, the 32 columns of a warp
 *     project onto the same 3-4 cells (up to 32-way retries in A's patch)
 *     and lie 38 mm apart in depth, so their magnifications differ and
 *     they step to new rows at different voxels: 19.7 of 32 lanes active,
 *     branch efficiency 72%.
 * So the tile is 16 x 16 columns and each view picks how a warp lies
 * (sfc_lanes_along_x): 16 lanes along the direction in which u moves
 * faster, i.e. across the rays.  Then a warp's columns are at nearly one
 * depth (A^T: 28.5 lanes active, branch efficiency 95%) and their cells
 * side by side (A's retries mostly gone).  A column's slots in shared
 * memory (sfc_slot) fall in distinct banks under either mapping.  A^T
 * keeps 32 voxels a column (32 KB of shared memory, 4 blocks an SM), A 16
 * (4 blocks an SM).  Paper's case, same run: A 12.62 -> 9.35 s, A^T
 * 7.67 -> 6.35 s, pair 20.29 -> 15.70 s.  What bounds them now: A^T
 * issues ~150 instructions per voxel and view (the F2 row walk, the row
 * sums, the ~400-instruction footprint set-up with its 16 divisions over
 * 32 voxels) at 0.83 per scheduler cycle, instruction-bound; A the
 * compare-and-swap loops of ~4 shared adds per voxel and view and the 2-way
 * clashes left between a warp's two rows of columns.
 *
 * Multi-streaming: the iterative engine keeps both vectors on the device
 * (cuda_cone_sf_backend.cu), so A and A^T move no data between host and
 * device; there is no transfer to hide until volumes outgrow the device.
 */
#include "config.h"

#include <limits.h>

#include "cone_sf.h"
#include "cuda_cone_sf.h"

/* Both kernels: a TILE x TILE tile of columns, a thread per column, the
 * thread's column chosen per view (sfc_column_of).  A column's slots in
 * shared memory: sfc_slot, stride SFC_SLOTS. */
#define SFC_TILE 16
#define SFC_THREADS (SFC_TILE * SFC_TILE)
#define SFC_SLOTS SFC_THREADS
/* A^T: 32 voxels of each column. */
#define SFC_BT_Z 32
/* A: 16 voxels of each column, 8 views per block. */
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

/* A warp's lanes lie along the tile's x when the detector's u moves more
 * with x than with y (|du/dx| ~ M |sin b|, |du/dy| ~ M |cos b|): then the
 * lanes' columns are nearly at one depth, so they have one magnification
 * and cross row boundaries at the same voxels (no divergence in the z
 * walk), and their footprints lie side by side on the detector (few lanes
 * add into one cell of A's patch at once). */
__device__ __forceinline__ int sfc_lanes_along_x(float cb, float sb)
{
    return fabsf(sb) >= fabsf(cb);
}

/* Thread tid's column (cx, cy) of the tile under that choice. */
__device__ __forceinline__ void sfc_column_of(int tid, int along_x, int *cx,
                                              int *cy)
{
    const int a = tid % SFC_TILE, b = tid / SFC_TILE;
    *cx = along_x ? a : b;
    *cy = along_x ? b : a;
}

/* Column (cx, cy)'s slot: 16 cy + (cx + cy) mod 16, so that a warp's 32
 * columns fall in 32 banks under either mapping (16 x 2 columns along x:
 * rows cy and cy + 1 in the two halves; along y: each half's 16 cy, odd and
 * even ones in different halves of the banks). */
__device__ __forceinline__ int sfc_slot(int cx, int cy)
{
    return SFC_TILE * cy + ((cx + cy) & (SFC_TILE - 1));
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
 * column's slots, stride SFC_SLOTS). */
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
        acc[m * SFC_SLOTS] += ft->c.amp * b;
    }
}

/* All views into the tile's columns, voxels z0 .. z0 + SFC_BT_Z - 1 of
 * each; a thread per column, the column chosen per view.  The sums stay in
 * shared memory (a column's are touched by one thread per view; a barrier
 * where the mapping changes). */
__global__ void __launch_bounds__(SFC_THREADS, 4)
sfc_backproject_kernel(const cone_bp_const k, int n_proj,
                       const float *__restrict__ cos_b,
                       const float *__restrict__ sin_b,
                       const float *__restrict__ proj, size_t frame_len,
                       float *volume)
{
    __shared__ float acc_all[SFC_BT_Z * SFC_SLOTS];
    const int tid = threadIdx.x;
    const int z0 = blockIdx.z * SFC_BT_Z;
    const int nzc = k.nz - z0 < SFC_BT_Z ? k.nz - z0 : SFC_BT_Z;
    for (int c = tid; c < SFC_BT_Z * SFC_SLOTS; c += SFC_THREADS)
        acc_all[c] = 0.0f;
    int along = -1;
    for (int p = 0; p < n_proj; p++) {
        const float cb = cos_b[p], sb = sin_b[p];
        const int a = sfc_lanes_along_x(cb, sb);
        if (a != along) {       /* the same for the whole block */
            __syncthreads();
            along = a;
        }
        int cx, cy;
        sfc_column_of(tid, along, &cx, &cy);
        const int i = blockIdx.x * SFC_TILE + cx;
        const int j = blockIdx.y * SFC_TILE + cy;
        sfc_foot ft;
        if (i < k.nx && j < k.ny &&
            sfc_foot_at(&k, cb, sb, k.x0 + (float)i * k.voxel,
                        k.y0 + (float)j * k.voxel, &ft))
            sfc_backproject_view(&k, &ft, proj + (size_t)p * frame_len, z0,
                                 nzc, acc_all + sfc_slot(cx, cy));
    }
    __syncthreads();
    const int cx = tid % SFC_TILE, cy = tid / SFC_TILE;
    const int i = blockIdx.x * SFC_TILE + cx;
    const int j = blockIdx.y * SFC_TILE + cy;
    if (i >= k.nx || j >= k.ny)
        return;
    const size_t plane = (size_t)k.nx * (size_t)k.ny;
    float *out = volume + (size_t)z0 * plane + (size_t)j * k.nx + i;
    const float *acc = acc_all + sfc_slot(cx, cy);
    for (int m = 0; m < nzc; m++)
        out[(size_t)m * plane] = acc[m * SFC_SLOTS];
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

/* The column's voxels (vox: its slots, stride SFC_SLOTS) projected into
 * one view:
 * rows summed in z order, each row emitted when the walk leaves it. */
__device__ __forceinline__ void sfc_project_view(
    const cone_bp_const *k, const sfc_foot *ft, const float *vox, int z0,
    int nzc, const sfc_patch *pt, float *patch, float *view)
{
    int cur_t = INT_MIN;        /* the row cur sums */
    float cur = 0.0f;
    for (int m = 0; m < nzc; m++) {
        const float f = vox[m * SFC_SLOTS];
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
    for (int c = tid; c < n; c += SFC_THREADS) {
        const float v = patch[c];
        if (v != 0.0f)
            atomicAdd(view + (size_t)(pt->tmin + c / pt->w) * k->det_u +
                          pt->smin + c % pt->w,
                      v);
    }
}

/* The tile's voxels z0 .. z0 + nzc - 1 into shared memory (columns
 * outside the volume 0), rows of the tile to consecutive threads. */
__device__ __forceinline__ void sfc_load_tile(const cone_bp_const *k,
                                              const float *__restrict__ volume,
                                              int z0, int nzc, int tid,
                                              float *vox_all)
{
    const int cx = tid % SFC_TILE, cy = tid / SFC_TILE;
    const int i = blockIdx.x * SFC_TILE + cx;
    const int j = blockIdx.y * SFC_TILE + cy;
    const int inside = i < k->nx && j < k->ny;
    const size_t plane = (size_t)k->nx * (size_t)k->ny;
    float *vox = vox_all + sfc_slot(cx, cy);
    for (int m = 0; m < nzc; m++)
        vox[m * SFC_SLOTS] =
            inside ? volume[(size_t)(z0 + m) * plane + (size_t)j * k->nx + i]
                   : 0.0f;
}

/* blockIdx.z: the z chunk (fastest) and the group of views after
 * group_first.  The tile's voxels stay in shared memory for the group's
 * views; a thread per column, the column chosen per view. */
__global__ void __launch_bounds__(SFC_THREADS, 4)
sfc_project_kernel(const cone_bp_const k, int n_proj, int n_chunks,
                   int group_first, const float *__restrict__ cos_b,
                   const float *__restrict__ sin_b,
                   const float *__restrict__ volume, float *proj,
                   size_t frame_len, int cap)
{
    __shared__ float vox_all[SFC_P_Z * SFC_SLOTS];
    __shared__ float patch[SFC_PATCH];
    __shared__ int bounds[4];
    const int tid = threadIdx.x;
    const int z0 = (int)(blockIdx.z % (unsigned)n_chunks) * SFC_P_Z;
    const int p_begin = (group_first + (int)(blockIdx.z / (unsigned)n_chunks))
                        * SFC_P_VIEWS;
    const int p_end = p_begin + SFC_P_VIEWS < n_proj ? p_begin + SFC_P_VIEWS
                                                     : n_proj;
    const int nzc = k.nz - z0 < SFC_P_Z ? k.nz - z0 : SFC_P_Z;
    sfc_load_tile(&k, volume, z0, nzc, tid, vox_all);
    for (int p = p_begin; p < p_end; p++) {
        if (tid == 0) {
            bounds[0] = bounds[2] = INT_MAX;
            bounds[1] = bounds[3] = INT_MIN;
        }
        /* Also: the tile is loaded, the last view's flush has read the
         * patch. */
        __syncthreads();
        const float cb = cos_b[p], sb = sin_b[p];
        int cx, cy;
        sfc_column_of(tid, sfc_lanes_along_x(cb, sb), &cx, &cy);
        const int i = blockIdx.x * SFC_TILE + cx;
        const int j = blockIdx.y * SFC_TILE + cy;
        /* Threads outside the volume stay for the barriers, with no work. */
        sfc_foot ft;
        ft.s0 = ft.s1 = 0;      /* read below only when has */
        int has = i < k.nx && j < k.ny &&
                  sfc_foot_at(&k, cb, sb, k.x0 + (float)i * k.voxel,
                              k.y0 + (float)j * k.voxel, &ft);
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
                 c += SFC_THREADS)
                patch[c] = 0.0f;
        __syncthreads();
        float *view = proj + (size_t)p * frame_len;
        if (has)
            sfc_project_view(&k, &ft, vox_all + sfc_slot(cx, cy), z0, nzc,
                             &pt, patch, view);
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
    const dim3 block(SFC_THREADS);
    const int cap = s->patch_cap < SFC_PATCH ? s->patch_cap : SFC_PATCH;
    for (int g = 0; g < groups; g += per_launch) {
        const int n = groups - g < per_launch ? groups - g : per_launch;
        const dim3 grid((k->nx + SFC_TILE - 1) / SFC_TILE,
                        (k->ny + SFC_TILE - 1) / SFC_TILE,
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
    const dim3 block(SFC_THREADS);
    const dim3 grid((k->nx + SFC_TILE - 1) / SFC_TILE,
                    (k->ny + SFC_TILE - 1) / SFC_TILE,
                    (k->nz + SFC_BT_Z - 1) / SFC_BT_Z);
    sfc_backproject_kernel<<<grid, block, 0, s->stream>>>(
        *k, s->n_proj, s->cos_b, s->sin_b, weighted, s->frame_len, volume);
    RTOMO_CUDA_CHECK_LAUNCH(err, "sfc_backproject_kernel");
    return RTOMO_OK;
}
