/*
 * cuda_cone_sf_column_project.cu — the separable-footprint cone-beam
 * pair's A by z columns (issue 15), the exact transpose of A^T
 * (cuda_cone_sf_column_backproject.cu): a thread per column of a tile
 * walks its voxels' rows as A^T does, stores each row's value in a buffer
 * of its own, and each detector cell gathers its sum from the columns
 * that reach it.  Why this shape and what each step measured:
 * cuda_cone_sf_column.h, which holds what A shares with A^T.
 */
#include "config.h"

#include <limits.h>

#include "cuda_cone_sf_column.h"

/* A: 32 voxels of each column, 16 views per block. */
#define SFC_P_Z 32
#define SFC_P_VIEWS 16
/* A's gather (sfc_gather): the chunk in parts of SFC_OC_PART voxels
 * (the paper's case: at most 11 x 1.40 + 2 = 17 rows a column), a column's
 * row values in SFC_OC_ROWS slots (odd: a warp's stores and a half warp's
 * reads fall in distinct banks), buckets for footprints up to SFC_OC_W
 * cells across (2 a lane of the scan), an entry per (column, cell). */
#define SFC_OC_PART 11
#define SFC_OC_PARTS ((SFC_P_Z + SFC_OC_PART - 1) / SFC_OC_PART)
#define SFC_OC_ROWS 17
#define SFC_OC_W 64
#define SFC_OC_ENTRIES (SFC_CELLS * SFC_THREADS)
#define SFC_OC_BOUNDS (4 + 2 * SFC_OC_PARTS)
/* An entry index's 10 bits all set: no entry (SFC_OC_ENTRIES < 1023);
 * all three of a column's. */
#define SFC_OC_NONE 1023
#define SFC_OC_NO_ENTRIES (SFC_OC_NONE * (1 + (1 << 10) + (1 << 20)))
/* 55 KB of dynamic shared memory, so that 4 blocks fit an SM (228 KB):
 * the voxels, the row buffers, the entries, the buckets' starts and
 * counts. */
#define SFC_P_SHARED                                                        \
    (sizeof(float) * (SFC_P_Z * SFC_SLOTS + SFC_OC_ROWS * SFC_SLOTS) +      \
     sizeof(int2) * SFC_OC_ENTRIES + sizeof(int) * (2 * SFC_OC_W + 1))

/* --------------------------------------------------------------- A ---- */

/* Where a column's row values go at one part of the chunk: on, its rows
 * ta .. ta + SFC_OC_ROWS - 1 into r[] (its slots of the row buffer, read
 * by the gather), every other row (and every row when not on) straight
 * into the view with global atomics. */
typedef struct sfc_rowbuf {
    int on, ta;
    float *r;
} sfc_rowbuf;

/* F1(s) v added into the view's row for the footprint's cells (global
 * atomics: the columns the gather does not take, rows past the buffer).
 * f[] is indexed only by unrolled constants, so it stays in registers. */
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

/* l_phi C(t) of row t: a plain store into the column's row buffer when
 * it holds the row (each row is emitted once per part), else F1(s) times
 * it into the view's cells. */
__device__ __forceinline__ void sfc_emit(const cone_bp_const *k,
                                         const sfc_foot *ft,
                                         const sfc_rowbuf *rb, float *view,
                                         int t, float v)
{
    const int idx = t - rb->ta;
    if (rb->on && idx >= 0 && idx < SFC_OC_ROWS)
        rb->r[idx] = v;
    else if (v != 0.0f)
        sfc_spread(ft, view + (size_t)t * k->det_u + ft->s0, v);
}

/* The column's voxels (vox: its slots, stride SFC_SLOTS) projected into
 * one view: rows summed in z order, each row emitted when the walk leaves
 * it. */
__device__ __forceinline__ void sfc_project_view(
    const cone_bp_const *k, const sfc_foot *ft, const float *vox, int z0,
    int nzc, const sfc_rowbuf *rb, float *view)
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
                    sfc_emit(k, ft, rb, view, cur_t, ft->c.amp * cur);
                cur_t = t;
                cur = 0.0f;
            }
            cur += cone_sf_f2(lo, hi, t) * f;
        }
    }
    if (cur_t != INT_MIN)
        sfc_emit(k, ft, rb, view, cur_t, ft->c.amp * cur);
}

/* sfc_project_view by the row walk: per row t, C(t) from voxel a and,
 * in a row where a ends, b (in z order, as the CPU sums); f_a, f_b their
 * values (f_b 0 past the part).  Every row ta .. tb is emitted, so the
 * buffer's first min(tb - ta + 1, SFC_OC_ROWS) rows are stored: returns
 * that count (0 when no row is left). */
__device__ __forceinline__ int sfc_project_walk(
    const cone_bp_const *k, const sfc_foot *ft, const float *vox, int z0,
    int nzc, int ta, int tb, const sfc_rowbuf *rb, float *view)
{
    sfc_walk w;
    if (!sfc_walk_start(k, ft, z0, nzc, ta, tb, &w))
        return 0;
    float f_a = vox[w.m * SFC_SLOTS];
    float f_b = w.m + 1 < nzc ? vox[(w.m + 1) * SFC_SLOTS] : 0.0f;
    for (; w.t < w.t_end; sfc_walk_row(&w)) {
        float c = sfc_walk_f2(&w) * f_a;
        if (sfc_walk_ends(&w)) {
            c += sfc_walk_f2_next(&w) * f_b;
            sfc_walk_next(z0, &w);
            f_a = f_b;
            f_b = w.m + 1 < nzc ? vox[(w.m + 1) * SFC_SLOTS] : 0.0f;
        }
        sfc_emit(k, ft, rb, view, w.t, ft->c.amp * c);
    }
    return tb - ta < SFC_OC_ROWS ? tb - ta + 1 : SFC_OC_ROWS;
}

/* The column's buffer rows from .. SFC_OC_ROWS - 1 set to 0 (the gather
 * reads all of them), when it has one. */
__device__ __forceinline__ void sfc_zero_rows(const sfc_rowbuf *rb, int from)
{
    if (rb->on)
        for (int q = from; q < SFC_OC_ROWS; q++)
            rb->r[q] = 0.0f;
}

/* One view from the column's voxels: the row walk, or voxel by voxel for
 * voxels under SFC_WALK_MIN_ROWS rows high.  ta .. tb: the voxels' rows.
 * Returns the rows stored at the head of the buffer; the voxel-by-voxel
 * walk skips rows, so its buffer is zeroed first. */
__device__ __forceinline__ int sfc_project_column(
    const cone_bp_const *k, const sfc_foot *ft, const float *vox, int z0,
    int nzc, int ta, int tb, const sfc_rowbuf *rb, float *view)
{
    if (sfc_walks(k, ft))
        return sfc_project_walk(k, ft, vox, z0, nzc, ta, tb, rb, view);
    sfc_zero_rows(rb, 0);
    sfc_project_view(k, ft, vox, z0, nzc, rb, view);
    return SFC_OC_ROWS;
}

/* The chunk's rows ta .. tb of the column (clipped): the row walk's when
 * the column takes it (the buffers and the gather then cover the rows the
 * walk emits), else its voxels' (cone_sf_rows'); whether the column meets
 * the detector. */
__device__ __forceinline__ int sfc_chunk_rows(const cone_bp_const *k,
                                              const sfc_foot *ft, int z0,
                                              int nzc, int *ta, int *tb)
{
    if (sfc_walks(k, ft)) {
        sfc_walk_rows(k, ft, z0, nzc, ta, tb);
        return *ta <= *tb;
    }
    float lo, hi;
    int unused;
    sfc_rows(k, &ft->c, z0, &lo, &hi, ta, &unused);
    sfc_rows(k, &ft->c, z0 + nzc - 1, &lo, &hi, &unused, tb);
    return *ta <= *tb;
}

/* The block's reach at one view (bounds: shared, SFC_OC_BOUNDS ints):
 * [0], [1] the cells s, [2], [3] the chunk's rows, [4 + 2p], [5 + 2p] part
 * p's rows; set to empty by the caller, reduced a warp at a time (one
 * shared atomic per warp and bound). */
__device__ __forceinline__ void sfc_bound(int *bound, int lo, int hi)
{
    lo = __reduce_min_sync(0xffffffffu, lo);
    hi = __reduce_max_sync(0xffffffffu, hi);
    if (threadIdx.x % 32 == 0) {
        atomicMin(&bound[0], lo);
        atomicMax(&bound[1], hi);
    }
}

/* Whether the column meets the chunk's rows on the detector. */
__device__ __forceinline__ int sfc_reach(const cone_bp_const *k,
                                         const sfc_foot *ft, int has, int z0,
                                         int nzc, int *bounds)
{
    int ta = 0, tb = -1;
    has = has && sfc_chunk_rows(k, ft, z0, nzc, &ta, &tb);
    sfc_bound(bounds, has ? ft->s0 : INT_MAX, has ? ft->s1 : INT_MIN);
    sfc_bound(bounds + 2, has ? ta : INT_MAX, has ? tb : INT_MIN);
    for (int mb = 0, p = 0; mb < nzc; mb += SFC_OC_PART, p++) {
        const int me = mb + SFC_OC_PART < nzc ? mb + SFC_OC_PART : nzc;
        const int in = has && sfc_chunk_rows(k, ft, z0 + mb, me - mb, &ta, &tb);
        sfc_bound(bounds + 4 + 2 * p, in ? ta : INT_MAX, in ? tb : INT_MIN);
    }
    return has;
}

/* Bucket starts: start[s] = the entries of cells before s (count: the
 * entries of each cell, w <= SFC_OC_W = 2 x 32 cells); warp 0's lanes
 * take 2 cells each. */
__device__ __forceinline__ void sfc_bucket_starts(const int *count, int w,
                                                  int *start, int lane)
{
    const int c0 = 2 * lane < w ? count[2 * lane] : 0;
    const int c1 = 2 * lane + 1 < w ? count[2 * lane + 1] : 0;
    int incl = c0 + c1;
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
        const int v = __shfl_up_sync(0xffffffffu, incl, d);
        incl += lane >= d ? v : 0;
    }
    start[2 * lane] = incl - c0 - c1;
    start[2 * lane + 1] = incl - c1;
    if (lane == 31)
        start[SFC_OC_W] = incl;
}

/* The shared arrays of the gather (see SFC_P_SHARED). */
typedef struct sfc_oc {
    float *rbuf;                /* SFC_OC_ROWS per slot */
    int2 *ent;                  /* an entry per (column, cell): F1's
                                   bits; the part's first buffered row
                                   << 8 | the column's slot */
    int *start, *count;         /* the cells' buckets of entries */
} sfc_oc;

/* Part rows tmin .. tmax of patch cells smin .. smin + w - 1 added into
 * the view: g lanes per cell, one a row (g the part's rows, up to 32:
 * items of a warp may be cells side by side; parts over 32 rows take
 * several items a cell), each cell's sum gathered from the entries of its
 * bucket (the columns that reach it; their row buffers zero outside their
 * rows) and added once. */
__device__ __forceinline__ void sfc_gather(const cone_bp_const *k,
                                           const sfc_oc *o, int smin, int w,
                                           int tmin, int tmax, int tid,
                                           float *view)
{
    if (tmin > tmax)
        return;
    const int g = tmax - tmin < 32 ? tmax - tmin + 1 : 32;
    const int nrb = (tmax - tmin) / g + 1;
    const int per_pass = SFC_THREADS / g;
    if (tid >= per_pass * g)
        return;
    const int lane = tid % g;
    for (int item = tid / g; item < w * nrb; item += per_pass) {
        /* (nrb is 1 but for parts over 32 rows: no division.) */
        const int s = nrb == 1 ? item : item / nrb;
        const int t = tmin + (item - s * nrb) * g + lane;
        float acc = 0.0f;
        const int e_end = o->start[s + 1];
        /* Unrolled: the entries' loads overlap. */
#pragma unroll 4
        for (int e = o->start[s]; e < e_end; e++) {
            const int2 v = o->ent[e];
            const int idx = t - (v.y >> 8);
            if ((unsigned)idx < SFC_OC_ROWS)
                acc += __int_as_float(v.x) *
                       o->rbuf[(v.y & 255) * SFC_OC_ROWS + idx];
        }
        if (t <= tmax && acc != 0.0f)
            atomicAdd(view + (size_t)t * k->det_u + smin + s, acc);
    }
}

/* The tile's voxels z0 .. z0 + nzc - 1 into shared memory (columns
 * outside the volume 0), rows of the tile to consecutive threads; whether
 * any of the thread's is not 0. */
__device__ __forceinline__ int sfc_load_tile(const cone_bp_const *k,
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
    int any = 0;
    for (int m = 0; m < nzc; m++) {
        const float f =
            inside ? volume[(size_t)(z0 + m) * plane + (size_t)j * k->nx + i]
                   : 0.0f;
        vox[m * SFC_SLOTS] = f;
        any |= f != 0.0f;
    }
    return any;
}

/* The column's entries (one per cell of a fitting footprint) into the
 * buckets: positions counted, starts scanned, entries' F1 written (their
 * rows and slots: sfc_project_part).  Three barriers; mine: whether the
 * column takes part.  Returns the entries' indices, 10 bits each
 * (SFC_OC_NONE: none). */
__device__ __forceinline__ int sfc_entries(const sfc_foot *ft, int mine,
                                           int slot, int smin, int w,
                                           int tid, const sfc_oc *o)
{
    int ep = SFC_OC_NO_ENTRIES;
    int pos[SFC_CELLS];
#pragma unroll
    for (int q = 0; q < SFC_CELLS; q++)
        if (mine && ft->s0 + q <= ft->s1)
            pos[q] = atomicAdd(&o->count[ft->s0 + q - smin], 1);
    __syncthreads();
    if (tid < 32)
        sfc_bucket_starts(o->count, w, o->start, tid);
    __syncthreads();
#pragma unroll
    for (int q = 0; q < SFC_CELLS; q++)
        if (mine && ft->s0 + q <= ft->s1) {
            const int e = o->start[ft->s0 + q - smin] + pos[q];
            o->ent[e].x = __float_as_int(ft->f[q]);
            ep ^= (e ^ SFC_OC_NONE) << (10 * q);
        }
    return ep;
}

/* Part p of the chunk (voxels mb .. me - 1) at one view: each column's row
 * values into its buffer (the slots its walk did not store zeroed: the
 * gather reads all SFC_OC_ROWS; the walk stores ~15 of the 17 in the
 * paper's case, so ~2 zeros rather than 17 a part) and its first row
 * into its entries (ep: their indices), a barrier, the gather of the
 * part's rows, a barrier. */
__device__ __forceinline__ void sfc_project_part(
    const cone_bp_const *k, const sfc_foot *ft, int has, int mine,
    const float *vox, int slot, int ep, int z0, int mb, int me,
    const sfc_oc *o, int smin, int w, const int *part_rows, int tid,
    float *view)
{
    int ta = 0, tb = -1;
    const int rows = has && sfc_chunk_rows(k, ft, z0 + mb, me - mb, &ta, &tb);
    sfc_rowbuf rb;
    rb.on = mine;
    rb.ta = ta;
    rb.r = o->rbuf + slot * SFC_OC_ROWS;
    if (mine) {
#pragma unroll
        for (int q = 0; q < SFC_CELLS; q++) {
            const int e = ep >> (10 * q) & SFC_OC_NONE;
            if (e != SFC_OC_NONE)
                o->ent[e].y = ta << 8 | slot;
        }
    }
    const int stored =
        rows ? sfc_project_column(k, ft, vox + mb * SFC_SLOTS, z0 + mb,
                                  me - mb, ta, tb, &rb, view)
             : 0;
    sfc_zero_rows(&rb, stored);
    __syncthreads();
    if (w > 0)
        sfc_gather(k, o, smin, w, part_rows[0], part_rows[1], tid, view);
    __syncthreads();
}

/* blockIdx.z: the z chunk (fastest) and the group of views after
 * group_first.  The tile's voxels stay in shared memory for the group's
 * views; a thread per column, the column chosen per view.  No shared
 * atomics on floats (each a compare-and-swap loop on sm_90, and the 8
 * warps, walking columns behind one another along the rays in step,
 * failed each other's): the columns store their row values, then each
 * cell gathers its own (sfc_gather), in parts of SFC_OC_PART voxels.  A
 * block whose voxels are all 0 has nothing to add (the solvers' first A,
 * of x = 0; the air around an object). */
__global__ void __launch_bounds__(SFC_THREADS, 4)
sfc_project_kernel(const cone_bp_const k, int n_proj, int n_chunks,
                   int group_first, const float *__restrict__ cos_b,
                   const float *__restrict__ sin_b,
                   const float *__restrict__ volume, float *proj,
                   size_t frame_len, int cap)
{
    /* SFC_P_SHARED bytes: the voxels, then the gather's arrays. */
    extern __shared__ float shared[];
    float *vox_all = shared;
    sfc_oc o;
    o.rbuf = vox_all + SFC_P_Z * SFC_SLOTS;
    o.ent = (int2 *)(o.rbuf + SFC_OC_ROWS * SFC_SLOTS);
    o.start = (int *)(o.ent + SFC_OC_ENTRIES);
    o.count = o.start + SFC_OC_W + 1;
    __shared__ int bounds[SFC_OC_BOUNDS];
    const int tid = threadIdx.x;
    const int z0 = (int)(blockIdx.z % (unsigned)n_chunks) * SFC_P_Z;
    const int p_begin = (group_first + (int)(blockIdx.z / (unsigned)n_chunks))
                        * SFC_P_VIEWS;
    const int p_end = p_begin + SFC_P_VIEWS < n_proj ? p_begin + SFC_P_VIEWS
                                                     : n_proj;
    const int nzc = k.nz - z0 < SFC_P_Z ? k.nz - z0 : SFC_P_Z;
    if (!__syncthreads_or(sfc_load_tile(&k, volume, z0, nzc, tid, vox_all)))
        return;
    for (int p = p_begin; p < p_end; p++) {
        if (tid < SFC_OC_BOUNDS)
            bounds[tid] = tid % 2 ? INT_MIN : INT_MAX;
        if (tid < SFC_OC_W)
            o.count[tid] = 0;
        /* Also: the last view's gather is done. */
        __syncthreads();
        const float cb = cos_b[p], sb = sin_b[p];
        int cx, cy;
        sfc_column_of(tid, sfc_lanes_along_x(cb, sb), &cx, &cy);
        const int i = blockIdx.x * SFC_TILE + cx;
        const int j = blockIdx.y * SFC_TILE + cy;
        const int slot = sfc_slot(cx, cy);
        /* Threads outside the volume stay for the barriers, with no work. */
        sfc_foot ft;
        ft.s0 = ft.s1 = 0;      /* read below only when has */
        ft.fits = 0;
        int has = i < k.nx && j < k.ny &&
                  sfc_foot_at(&k, cb, sb, k.x0 + (float)i * k.voxel,
                              k.y0 + (float)j * k.voxel, &ft);
        has = sfc_reach(&k, &ft, has, z0, nzc, bounds);
        __syncthreads();
        const int hit = bounds[0] <= bounds[1] && bounds[2] <= bounds[3];
        const int smin = bounds[0];
        const int w = hit ? bounds[1] - bounds[0] + 1 : 0;
        const long long cells =
            hit ? (long long)w * (bounds[3] - bounds[2] + 1) : 0;
        const int on = hit && w <= SFC_OC_W && cells <= cap;
        const int mine = on && has && ft.fits;
        const int ep = sfc_entries(&ft, mine, slot, smin, w, tid, &o);
        float *view = proj + (size_t)p * frame_len;
        for (int mb = 0, q = 0; mb < nzc; mb += SFC_OC_PART, q++)
            sfc_project_part(&k, &ft, has, mine, vox_all + slot, slot, ep, z0,
                             mb, mb + SFC_OC_PART < nzc ? mb + SFC_OC_PART
                                                        : nzc,
                             &o, smin, on ? w : 0, bounds + 4 + 2 * q, tid,
                             view);
    }
}

/* ------------------------------------------------------- launcher ---- */

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
    const int cap = s->patch_cap;
    /* Over 48 KB of shared memory must be asked for. */
    RTOMO_CUDA_TRY(err, cudaFuncSetAttribute(
                            sfc_project_kernel,
                            cudaFuncAttributeMaxDynamicSharedMemorySize,
                            (int)SFC_P_SHARED));
    for (int g = 0; g < groups; g += per_launch) {
        const int n = groups - g < per_launch ? groups - g : per_launch;
        const dim3 grid((k->nx + SFC_TILE - 1) / SFC_TILE,
                        (k->ny + SFC_TILE - 1) / SFC_TILE,
                        (unsigned)(chunks * n));
        sfc_project_kernel<<<grid, block, SFC_P_SHARED, s->stream>>>(
            *k, s->n_proj, chunks, g, s->cos_b, s->sin_b, volume,
            projections, s->frame_len, cap);
        RTOMO_CUDA_CHECK_LAUNCH(err, "sfc_project_kernel");
    }
    return RTOMO_OK;
}
