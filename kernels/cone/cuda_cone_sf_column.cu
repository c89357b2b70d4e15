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
 * once (F1 from SFC_CELLS + 1 values of the trapezoid's integral instead of
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
 * ~50 x 24 cells; 32 voxels now, below), and the patch goes to the
 * projections with one global atomic per non-zero cell: ~0.3 global
 * atomics per voxel and view instead of 3.6, the other 3.6 on the SM.  A
 * block keeps its voxels in shared memory across SFC_P_VIEWS = 8 views, so
 * the volume is read 128 times (0.5 TB) rather than 1024 (4.4 TB).  A patch that would not fit
 * (huge magnifications; or RTOMO_CONE_SF_PATCH=0, the test hook) falls
 * back to global atomics per cell: the same weights, slower.  (The patch
 * is now a gather, below.)
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
 * The row walk (sfc_walk; issue 15's second step).  The voxel-by-voxel
 * walk above branches per voxel on how many rows it meets (1-3) and per
 * row on whether the row's sum is new, and its lanes branch apart.  For
 * voxels at least a row high (the paper's case: 1.05-1.40 rows) the
 * kernels now step a row at a time: a row meets at most two voxels of
 * the column (a and the next, b), so every step is the same straight-line
 * code: one row sum or one row's adds, two F2, and a predicated hand-over
 * from a to b when a ends.  A^T makes one row sum per row (1.2 per voxel)
 * instead of one per voxel and row; A one row's adds per row, as before,
 * without the loop over the voxel's rows.  Flatter voxels keep the old
 * walk.  With it: the set-up's divisions for F1 replaced by reciprocals
 * taken once (sfc_cdf), footprints kept in registers up to 3 cells (all
 * a footprint under 2 cells wide touches), A with 32 voxels a column (55 KB
 * of dynamic shared memory: the set-up spread over twice the voxels, half
 * the patch flushes per voxel), a copy of A's patch per half warp (the
 * halves, side by side in depth, hit the same cells at the same moment
 * and retried each other's compare-and-swap adds), and A skipping blocks
 * whose voxels are all 0 (the solvers' first A, of x = 0, which the
 * benchmark's SIRT timed then; air around an object).  Paper's case on
 * one H100, same run as 6cf34cc's kernels: A^T 6.35 -> 4.70 s.  Then F2
 * by fminf/fmaxf (sfc_f2) and a slot pointer carried along A^T's walk
 * (the SASS had 40 instructions a row plus 28 per voxel hand-over, 7 of
 * the row's and 8 of the hand-over's in compares, selects and slot
 * addresses): A^T 4.31 s.  A barely moved: timed on a volume that is not
 * 0 (run 52 of docs/PERFORMANCE.md), 9.35 -> 9.14 s, pair 15.69 -> 13.45
 * s; the figures first given for it (4.79, 4.69 s) halved the time of
 * the benchmark's two A, one of them of x = 0, which the skip makes
 * almost free.  Tried and not kept:
 * A^T with 64 voxels a column (64 KB, 3 blocks an SM): A^T 4.67 ->
 * 5.57 s, so A^T is latency-bound at 4 blocks as well as issue-bound.
 *
 * A without shared float atomics (issue 15's third step: the bench now
 * times A of a volume that is not 0, 9.14 s).  The patch's adds were
 * compare-and-swap loops, and the 8 warps of a block, walking columns
 * behind one another along the rays in step, added into the same row of
 * cells at the same moment and failed each other's.  Now the owner
 * computes: a column stores its rows' values l_phi C(t) in a row buffer
 * of its own (plain stores), and after a barrier each cell gathers its
 * sum from the columns that reach it and adds it to the view once
 * (sfc_gather: a half warp per cell and 16 rows, the columns found in
 * buckets by cell, sfc_entries).  The chunk's 32 voxels go in parts of
 * 11 (17 buffered rows a column), so that the buffers fit beside the
 * voxels in the 55 KB of 4 blocks an SM; a row where two parts meet gets
 * two adds.  The cell weight is the same F1 times the same l_phi C(t) as
 * before, so A stays A^T's transpose.  Paper's case on one H100, same
 * run: A 9.14 -> 7.08 s, A^T 4.30 -> 4.31 s, pair 13.43 -> 11.39 s.
 * Then entries that carry the part's first row of their column (one
 * dependent shared load fewer per entry), the gather's entry loop
 * unrolled by 4 and a warp per cell for parts over 16 rows high: A
 * 6.81 s, pair 11.10 s (same run: 7.08 s before, 9.14 s at the patch).
 * Tried: parts of 8 voxels (15 rows): the 512^3 bench's pair 0.75 s
 * against 0.69 s with 11; 2 parts of 16 (25 rows, 64 KB: 3 blocks an
 * SM): A 7.09 s where 11 gave 6.81 s in the same run; staggering the
 * warps' walks by 4 voxels so that the patch's adds did not collide:
 * slower than the gather at 512^3.
 *
 * Fewer instructions a row (issue 15's fourth step).  The SASS of A^T's
 * row step had ~34 instructions: a branch on fits at every row (the
 * general row sum kept the corners tau live across the walk), the
 * conversion (float)t and t -/+ 1/2 for F2, the loads' predicates and
 * addresses recomputed.  Now the walk carries t -/+ 1/2 as floats (a step
 * of 1.0f, exact, no I2F a row; both kernels), A^T's walk is compiled
 * once per value of fits (sfc_backproject_walk<FITS>: ~29 instructions a
 * row), and A zeroes only the buffer slots its walk did not store (~2 of
 * 17 a part rather than all 17).  The weights are bit for bit the same.
 * Paper's case on one H100, same run: A 6.81 -> 6.69 s, A^T 4.31 ->
 * 3.58 s, pair 11.12 -> 10.27 s.
 * Tried and not kept: A^T at 5 blocks an SM (launch bounds (256, 5): 48
 * registers, 128-176 bytes of spills, inside the walk's loop); the voxel
 * index carried as a float for the hand-over (one register more: spills
 * inside A^T's loop); A's walk compiled per fits as well (68 bytes of
 * spills in A, some in its loops).  None of these was timed.
 *
 * Multi-streaming: the iterative engine keeps both vectors on the device
 * (cuda_cone_sf_backend.cu), so A and A^T move no data between host and
 * device; there is no transfer to hide until volumes outgrow the device.
 */
#include "config.h"

#include <float.h>
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
/* A: 32 voxels of each column, 8 views per block. */
#define SFC_P_Z 32
#define SFC_P_VIEWS 8
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
/* Cells whose F1 a thread keeps in registers: 3, all a footprint under
 * 2 cells wide touches (the paper's case: under 1.98); wider footprints
 * evaluate F1 where they use it, with cone_sf_f1. */
#define SFC_CELLS 3
/* The row walk (sfc_walk) takes voxels at least this many rows high: a
 * row then meets at most 2 of them and at most one ends in it (1 plus a
 * margin far above the floats' error in lo, hi).  Flatter voxels take
 * the voxel-by-voxel walk. */
#define SFC_WALK_MIN_ROWS 1.01f

/* A column's footprint at one view: cells s0..s1 on the detector, their
 * weights F1 when they fit in SFC_CELLS. */
typedef struct sfc_foot {
    cone_sf_column c;
    int s0, s1;
    int fits;
    float f[SFC_CELLS];
} sfc_foot;

/* cone_sf_ramp2 with 1 / w given (0 when w is 0, where vc is 0 too). */
__device__ __forceinline__ float sfc_ramp2(float v, float w, float inv_w)
{
    const float vc = v < 0.0f ? 0.0f : (v < w ? v : w);
    const float over = v - w > 0.0f ? v - w : 0.0f;
    return vc * vc * inv_w + 2.0f * over;
}

/* cone_sf_cdf with the ramps' reciprocals taken once per footprint: the
 * SFC_CELLS + 1 integrals cost no divisions (the set-up's 8 of 14; last
 * bits of F1 differ from cone_sf_f1's, the same in A and A^T). */
__device__ __forceinline__ float sfc_cdf(const cone_sf_column *c, float p,
                                         float inv_w0, float inv_w2)
{
    return 0.5f * (sfc_ramp2(p - c->tau[0], c->tau[1] - c->tau[0], inv_w0) -
                   sfc_ramp2(p - c->tau[2], c->tau[3] - c->tau[2], inv_w2));
}

/* 1 / w for w >= 0, 0 for 0. */
__device__ __forceinline__ float sfc_inv(float w)
{
    return w > 0.0f ? __frcp_rn(w) : 0.0f;
}

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
    /* F1(s) = I(s + 1/2) - I(s - 1/2): SFC_CELLS + 1 integrals (s - 1/2
     * and (s - 1) + 1/2 are the same float).  Only fitting footprints use
     * them; wider ones call cone_sf_f1 in both kernels. */
    const float inv_w0 = sfc_inv(ft->c.tau[1] - ft->c.tau[0]);
    const float inv_w2 = sfc_inv(ft->c.tau[3] - ft->c.tau[2]);
    float below = sfc_cdf(&ft->c, (float)ft->s0 - 0.5f, inv_w0, inv_w2);
#pragma unroll
    for (int q = 0; q < SFC_CELLS; q++) {
        const float above = sfc_cdf(&ft->c, (float)(ft->s0 + q) + 0.5f,
                                    inv_w0, inv_w2);
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

/* -------------------------------------------------------- row walk ---- */

/* The row walk of a column's voxels z0 .. z0 + nzc - 1 at one view (both
 * kernels, voxels at least SFC_WALK_MIN_ROWS rows high): a step per row t
 * of the detector, in which voxel a (chunk index m) and the next, b, are
 * the only voxels that can reach the row; a ends in row t when
 * hi_a <= t + 1/2, and then b becomes a.  So every step does the same
 * work: two F2 (0 where a voxel misses the row), one row sum (A^T) or one
 * row's adds (A), no branch on the row's voxels, one row sum per row
 * rather than one per voxel and row.  The weights are cone_sf_f2's of
 * cone_sf_rows' lo, hi, as in the voxel-by-voxel walk; only pairs whose
 * F2 is 0 are left out. */
typedef struct sfc_walk {
    int t, t_end;               /* the row; one past the last */
    float t_lo, t_hi;           /* t - 1/2, t + 1/2 (sfc_f2) */
    int m;                      /* voxel a */
    float lo_a, hi_a, lo_b, hi_b;
} sfc_walk;

/* Voxel m's rows [lo, hi]; for m past the chunk an empty span above every
 * row (F2 0, never ends). */
__device__ __forceinline__ void sfc_span(const cone_bp_const *k,
                                         const sfc_foot *ft, int z0, int nzc,
                                         int m, float *lo, float *hi)
{
    cone_sf_rows(k, &ft->c, k->z0 + (float)(z0 + m) * k->voxel, lo, hi);
    *lo = m < nzc ? *lo : FLT_MAX;
    *hi = m < nzc ? *hi : FLT_MAX;
}

/* cone_sf_f2 of row t with fminf/fmaxf: the same value (no NaN here) in
 * 4 instructions where the ternaries' compares and selects took 7.  t_lo,
 * t_hi: t -/+ 1/2, which the walks carry as floats, a step of 1 per row
 * (exact below 2^23 rows), instead of converting t every row. */
__device__ __forceinline__ float sfc_f2(float lo, float hi, float t_lo,
                                        float t_hi)
{
    return fmaxf(fminf(t_hi, hi) - fmaxf(t_lo, lo), 0.0f);
}

/* The walk's next row. */
__device__ __forceinline__ void sfc_walk_row(sfc_walk *w)
{
    w->t++;
    w->t_lo += 1.0f;
    w->t_hi += 1.0f;
}

/* b becomes a; the voxel after it becomes b. */
__device__ __forceinline__ void sfc_walk_next(const cone_bp_const *k,
                                              const sfc_foot *ft, int z0,
                                              int nzc, sfc_walk *w)
{
    w->m++;
    w->lo_a = w->lo_b;
    w->hi_a = w->hi_b;
    sfc_span(k, ft, z0, nzc, w->m + 1, &w->lo_b, &w->hi_b);
}

/* Whether the column takes the row walk at this view. */
__device__ __forceinline__ int sfc_walks(const cone_bp_const *k,
                                         const sfc_foot *ft)
{
    return k->voxel * ft->c.rows_per_z >= SFC_WALK_MIN_ROWS;
}

/* The walk's first row (rows ta .. tb: the chunk's, clipped to the
 * detector) with a the first voxel that reaches it; 0 when no row is
 * left. */
__device__ __forceinline__ int sfc_walk_start(const cone_bp_const *k,
                                              const sfc_foot *ft, int z0,
                                              int nzc, int ta, int tb,
                                              sfc_walk *w)
{
    if (ta > tb)
        return 0;
    w->t = ta;
    w->t_end = tb + 1;
    w->t_lo = (float)ta - 0.5f;
    w->t_hi = (float)ta + 0.5f;
    w->m = 0;
    sfc_span(k, ft, z0, nzc, 0, &w->lo_a, &w->hi_a);
    sfc_span(k, ft, z0, nzc, 1, &w->lo_b, &w->hi_b);
    /* Voxels below the detector's first row (ta clipped to 0). */
    while (w->m < nzc && w->hi_a <= (float)ta - 0.5f)
        sfc_walk_next(k, ft, z0, nzc, w);
    return w->m < nzc;
}

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

/* sfc_backproject_view by the row walk: per row t, R(t) once and
 * F2 R into the running sums of voxels a and b; a's sum goes to its slot
 * when a ends.  FITS: the footprint's fits.  The loop runs on the float
 * t + 1/2 (t itself is then not kept). */
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
    float sum_a = 0.0f, sum_b = 0.0f;
    const float t_stop = (float)w.t_end;    /* t < t_end: t + 1/2 < it */
    for (; w.t_hi < t_stop; sfc_walk_row(&w), row += k->det_u) {
        const float r = sfc_row_sum_of<FITS>(ft, row);
        sum_a += sfc_f2(w.lo_a, w.hi_a, w.t_lo, w.t_hi) * r;
        sum_b += sfc_f2(w.lo_b, w.hi_b, w.t_lo, w.t_hi) * r;
        if (w.hi_a <= w.t_hi) {
            *slot += amp * sum_a;
            slot += SFC_SLOTS;
            sum_a = sum_b;
            sum_b = 0.0f;
            sfc_walk_next(k, ft, z0, nzc, &w);
        }
    }
    if (w.m < nzc)
        slot[0] += amp * sum_a;
    if (w.m + 1 < nzc)
        slot[SFC_SLOTS] += amp * sum_b;
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
    float lo, hi;
    int ta, tb, unused;
    sfc_rows(k, &ft->c, z0, &lo, &hi, &ta, &unused);
    sfc_rows(k, &ft->c, z0 + nzc - 1, &lo, &hi, &unused, &tb);
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

/* sfc_project_view by the row walk: per row t, C(t) from voxels a and b
 * (in z order, as the CPU sums) and the row's value; f_a, f_b their
 * values.  Every row ta .. tb is emitted, so the buffer's first
 * min(tb - ta + 1, SFC_OC_ROWS) rows are stored: returns that count (0
 * when no row is left). */
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
        float c = sfc_f2(w.lo_a, w.hi_a, w.t_lo, w.t_hi) * f_a;
        c += sfc_f2(w.lo_b, w.hi_b, w.t_lo, w.t_hi) * f_b;
        sfc_emit(k, ft, rb, view, w.t, ft->c.amp * c);
        if (w.hi_a <= w.t_hi) {
            sfc_walk_next(k, ft, z0, nzc, &w);
            f_a = f_b;
            f_b = w.m + 1 < nzc ? vox[(w.m + 1) * SFC_SLOTS] : 0.0f;
        }
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

/* The chunk's rows ta .. tb of the column (clipped); has: whether the
 * column meets the detector. */
__device__ __forceinline__ int sfc_chunk_rows(const cone_bp_const *k,
                                              const sfc_foot *ft, int z0,
                                              int nzc, int *ta, int *tb)
{
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
 * the view: a half warp per cell and 16 rows, lanes along the rows, each
 * cell's sum gathered from the entries of its bucket (the columns that
 * reach it; their row buffers zero outside their rows) and added once. */
__device__ __forceinline__ void sfc_gather(const cone_bp_const *k,
                                           const sfc_oc *o, int smin, int w,
                                           int tmin, int tmax, int tid,
                                           float *view)
{
    if (tmin > tmax)
        return;
    /* Lanes per item: a half warp, or a warp for parts over 16 rows high
     * (else a second item of 16 rows for the few rows past 16). */
    const int g = tmax - tmin >= 16 ? 32 : 16;
    const int nrb = (tmax - tmin) / g + 1;
    for (int item = tid / g; item < w * nrb; item += SFC_THREADS / g) {
        const int s = item / nrb;
        const int t = tmin + (item - s * nrb) * g + tid % g;
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
