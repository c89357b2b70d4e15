/*
 * cuda_cone_sf_column_backproject.cu — the separable-footprint cone-beam
 * pair's A^T by z columns (issue 15): a thread per column of a tile, its
 * voxels' sums in shared memory, all views in one launch, each view's rows
 * read once by the row walk.  Why this shape and what each step measured:
 * cuda_cone_sf_column.h, which holds what A^T shares with A
 * (cuda_cone_sf_column_project.cu).
 */
#include "config.h"

#include "cuda_cone_sf_column.h"

/* A^T: 32 voxels of each column. */
#define SFC_BT_Z 32

/* ------------------------------------------------------------- A^T ---- */

/* R(t): sum_s F1(s) row[s] over the footprint, whose fits is FITS (a
 * constant in the row walk: a fitting footprint's walk then keeps no
 * corners tau in registers for cone_sf_f1). */
template <int FITS>
__device__ __forceinline__ float sfc_row_sum_of(const sfc_foot *ft,
                                                const float *__restrict__ row)
{
    float r = 0.0f;
    if (FITS) {
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

/* R(t) for any footprint. */
__device__ __forceinline__ float sfc_row_sum(const sfc_foot *ft,
                                             const float *__restrict__ row)
{
    return ft->fits ? sfc_row_sum_of<1>(ft, row) : sfc_row_sum_of<0>(ft, row);
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

/* sfc_backproject_view by the row walk: per row t, R(t) once and F2 R
 * into the running sum of voxel a; when a ends in the row, its sum goes to
 * its slot and b's starts with b's F2 R.  FITS: the footprint's fits.  The
 * loop runs on the float t + 1/2 (t itself is then not kept). */
template <int FITS>
__device__ __forceinline__ void sfc_backproject_walk(
    const cone_bp_const *k, const sfc_foot *ft, const float *__restrict__ q,
    int z0, int nzc, int ta, int tb, float *acc)
{
    sfc_walk w;
    if (!sfc_walk_start(k, ft, z0, nzc, ta, tb, &w))
        return;
    const float amp = ft->c.amp;
    const float *row = q + (size_t)w.t * k->det_u;
    float *slot = acc + w.m * SFC_SLOTS;    /* voxel a's */
    float sum = 0.0f;                       /* a's */
    const float t_stop = (float)w.t_end;    /* t < t_end: t + 1/2 < it */
    for (; w.t_hi < t_stop; sfc_walk_row(&w), row += k->det_u) {
        const float r = sfc_row_sum_of<FITS>(ft, row);
        sum += sfc_walk_f2(&w) * r;
        if (sfc_walk_ends(&w)) {
            /* Past the chunk (a the last voxel) b's sum is never stored:
             * its upper edge lies above row tb, so it never ends. */
            *slot += amp * sum;
            slot += SFC_SLOTS;
            sum = sfc_walk_f2_next(&w) * r;
            sfc_walk_next(z0, &w);
        }
    }
    if (w.m < nzc)
        *slot += amp * sum;
}

/* One view into the column's slots: the row walk, or voxel by voxel for
 * voxels under SFC_WALK_MIN_ROWS rows high. */
__device__ __forceinline__ void sfc_backproject_column(
    const cone_bp_const *k, const sfc_foot *ft, const float *__restrict__ q,
    int z0, int nzc, float *acc)
{
    if (!sfc_walks(k, ft)) {
        sfc_backproject_view(k, ft, q, z0, nzc, acc);
        return;
    }
    int ta, tb;
    sfc_walk_rows(k, ft, z0, nzc, &ta, &tb);
    if (ft->fits)
        sfc_backproject_walk<1>(k, ft, q, z0, nzc, ta, tb, acc);
    else
        sfc_backproject_walk<0>(k, ft, q, z0, nzc, ta, tb, acc);
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
            sfc_backproject_column(&k, &ft, proj + (size_t)p * frame_len,
                                   z0, nzc, acc_all + sfc_slot(cx, cy));
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

/* ------------------------------------------------------- launcher ---- */

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
