/*
 * cuda_cone_sf_column.h — what the separable-footprint cone-beam pair's
 * z-column kernels share (issue 15): their tiles, the footprint of a column
 * at one view and the row walk.  The kernels: A^T as a gather
 * (cuda_cone_sf_column_backproject.cu) and A as its exact transpose
 * (cuda_cone_sf_column_project.cu), both walking a column of voxels in z
 * with the column's transaxial footprint computed once per projection.
 * The older kernels (cuda_cone_sf.cu) stay behind RTOMO_CONE_SF_KERNEL=old
 * for comparison.
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
 * block keeps its voxels in shared memory across SFC_P_VIEWS = 8 views
 * (16 now, below), so the volume is read 128 times (0.5 TB) rather than
 * 1024 (4.4 TB).  A patch that would not fit (huge magnifications; or
 * RTOMO_CONE_SF_PATCH=0, the test hook) falls back to global atomics per
 * cell: the same weights, slower.  (The patch is now a gather, below.)
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
 * Shared edges (issue 15's fifth step; the kernels in their own files).
 * The walk kept both voxels' spans from cone_sf_rows (centre -/+ h: a's
 * hi and b's lo, equal but for rounding) and evaluated two F2 a row
 * (sfc_f2, 4 instructions each), and A^T two running sums; the hand-over
 * recomputed b's span (a conversion, 3 FMA, 2 selects against the chunk's
 * end).  Now a voxel's edges are E(z), E(z + 1) of one affine function of
 * its index (sfc_edge: a conversion and an FMA), a's upper edge is b's
 * lower one, and b reaches a row only where a ends in it: a row costs one
 * F2 (sfc_walk_f2: 3 instructions) and one running sum, and the row where
 * a ends starts b's with t + 1/2 - hi.  Past the chunk b needs no
 * sentinel: its upper edge lies above the last row, so it never ends and
 * its sum is never stored (A: its value is 0).  A's rows, buffers and
 * gather bounds take the same edges (sfc_walk_rows).  The weights are
 * still cone_sf_f2's forms, of edges that differ from cone_sf_rows' in the
 * last bits, the same in A and A^T: in one run, adjointness at most
 * 1.2e-8, GPU against CPU at most 3.7e-6 (3.7e-6 before; the small cases
 * 1.6e-6 where they were 1.0e-6).  Paper's case on one H100, same run:
 * A^T 3.59 -> 1.93 s, A 6.69 -> 5.99 s (a scratch bench of the same solve,
 * outside the repository).  Tried and not kept: A^T at 5 blocks an SM (48
 * registers, 120 bytes of spills): A^T 2.04 s against 1.93 s in that run.
 * Then A's gather with as many lanes per cell as the part has rows (up to
 * 32; cells side by side share a warp) where it took a half warp, or a
 * whole warp for parts of 17-20 rows (12-15 lanes idle): in the same run,
 * test_cuda_cone's A 5.86 s (the scratch bench's 5.99 s without it), A^T
 * 1.93 s, pair 7.79 s against f590ece's 10.28 s.
 * Then A with 16 views a block (SFC_P_VIEWS) where 8 were: the tile's
 * voxels loaded and tested for zeros half as often (the volume read 64
 * times), each block's start-up spread over twice the views.  Paper's case
 * on one H100, same run: test_cuda_cone A 5.77 s, A^T 1.93 s, pair 7.70 s
 * (all 59 checks passed), the previous kernels (the scratch bench) A 5.86
 * s, pair 7.79 s, f590ece's test_cuda_cone A 6.69 s, A^T 3.63 s, pair
 * 10.32 s.  Tried and not kept: A with 8 barriers a view rather than 10
 * (two sets of the reach and the bucket counts, each emptied while the
 * other is in use; the counts indexed by cell mod SFC_OC_W so that they
 * are taken with the reach): A 6.30 s against 5.86 s in one run (why was
 * not examined); the gather with two rows a lane (half the entries'
 * loads): 6.37 s against 6.20 s for the same kernel without it.
 *
 * Multi-streaming: the iterative engine keeps both vectors on the device
 * (cuda_cone_sf_backend.cu), so A and A^T move no data between host and
 * device; there is no transfer to hide until volumes outgrow the device.
 */
#ifndef RTOMO_CUDA_CONE_SF_COLUMN_H
#define RTOMO_CUDA_CONE_SF_COLUMN_H

#include <float.h>

#include "cone_sf.h"
#include "cuda_cone_sf.h"

/* Both kernels: a TILE x TILE tile of columns, a thread per column, the
 * thread's column chosen per view (sfc_column_of).  A column's slots in
 * shared memory: sfc_slot, stride SFC_SLOTS. */
#define SFC_TILE 16
#define SFC_THREADS (SFC_TILE * SFC_TILE)
#define SFC_SLOTS SFC_THREADS
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
 * the only voxels that can reach the row; a ends in row t when its upper
 * edge hi <= t + 1/2, and then b becomes a.  So every step does the same
 * work, with no branch on the row's voxels and one row sum per row rather
 * than one per voxel and row.
 *
 * The voxels' edges in rows: voxel z (ROI index) spans [E(z), E(z + 1)],
 * E(z) = base + z d (sfc_edge), so a voxel's upper edge is the next one's
 * lower edge, the same float.  In a row where a ends, a's F2 is
 * min(t + 1/2, hi) - max(t - 1/2, lo) and b's is t + 1/2 - hi (b, at least
 * SFC_WALK_MIN_ROWS high, reaches past the row): cone_sf_f2's forms, of
 * edges that differ from cone_sf_rows' lo, hi (centre -/+ h) in the last
 * bits, the same in A and A^T.  A row where no voxel ends costs one F2. */
typedef struct sfc_walk {
    int t, t_end;               /* the row; one past the last */
    float t_lo, t_hi;           /* t - 1/2, t + 1/2, carried as floats (a
                                   step of 1.0f a row, exact below 2^23
                                   rows) rather than converted a row */
    int m;                      /* voxel a */
    float lo, hi;               /* a's edges */
    float base, d;              /* E(z) = base + z d */
} sfc_walk;

/* base and d of the edges E(z) (sfc_walk) of the column's voxels. */
__device__ __forceinline__ void sfc_edges(const cone_bp_const *k,
                                          const cone_sf_column *c,
                                          float *base, float *d)
{
    *d = k->voxel * c->rows_per_z;
    *base = (k->z0 - 0.5f * k->voxel) * c->rows_per_z + k->v0;
}

/* E(z), ROI index z: one function of z in both kernels, so that A's F2 are
 * A^T's to the bit whatever their chunks. */
__device__ __forceinline__ float sfc_edge(float base, float d, int z)
{
    return fmaf((float)z, d, base);
}

/* The walk's next row. */
__device__ __forceinline__ void sfc_walk_row(sfc_walk *w)
{
    w->t++;
    w->t_lo += 1.0f;
    w->t_hi += 1.0f;
}

/* b becomes a (z0: the chunk's first voxel). */
__device__ __forceinline__ void sfc_walk_next(int z0, sfc_walk *w)
{
    w->m++;
    w->lo = w->hi;
    w->hi = sfc_edge(w->base, w->d, z0 + w->m + 1);
}

/* Whether the column takes the row walk at this view. */
__device__ __forceinline__ int sfc_walks(const cone_bp_const *k,
                                         const sfc_foot *ft)
{
    return k->voxel * ft->c.rows_per_z >= SFC_WALK_MIN_ROWS;
}

/* The rows ta .. tb of the walk's voxels z0 .. z0 + nzc - 1 (their edges'
 * cells), clipped to the detector (ta > tb when they miss it). */
__device__ __forceinline__ void sfc_walk_rows(const cone_bp_const *k,
                                              const sfc_foot *ft, int z0,
                                              int nzc, int *ta, int *tb)
{
    float base, d;
    sfc_edges(k, &ft->c, &base, &d);
    *ta = (int)floorf(sfc_edge(base, d, z0) + 0.5f);
    *tb = (int)floorf(sfc_edge(base, d, z0 + nzc) + 0.5f);
    *ta = *ta < 0 ? 0 : *ta;
    *tb = *tb >= k->det_v ? k->det_v - 1 : *tb;
}

/* The walk's first row ta (rows ta .. tb: sfc_walk_rows') with a the first
 * voxel that reaches it; 0 when no row is left. */
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
    sfc_edges(k, &ft->c, &w->base, &w->d);
    w->lo = sfc_edge(w->base, w->d, z0);
    w->hi = sfc_edge(w->base, w->d, z0 + 1);
    /* Voxels below the detector's first row (ta clipped to 0). */
    while (w->m < nzc && w->hi <= w->t_lo)
        sfc_walk_next(z0, w);
    return w->m < nzc;
}

/* F2 of voxel a in the walk's row. */
__device__ __forceinline__ float sfc_walk_f2(const sfc_walk *w)
{
    return fminf(w->t_hi, w->hi) - fmaxf(w->t_lo, w->lo);
}

/* Whether a ends in the walk's row, and b's F2 there when it does. */
__device__ __forceinline__ int sfc_walk_ends(const sfc_walk *w)
{
    return w->hi <= w->t_hi;
}
__device__ __forceinline__ float sfc_walk_f2_next(const sfc_walk *w)
{
    return w->t_hi - w->hi;
}

#endif
