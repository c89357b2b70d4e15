/*
 * cuda_iter_kernels.cu — the CUDA kernels of the iterative engine: the
 * matched separable-footprint pair (A^T gathered per pixel, A gathered per
 * detector bin, both from the same per-pixel weights) and the vector ops
 * the solvers need.  cuda_iter.h has the contract.
 *
 * A^T (backproject_kernel): one 256-thread block per 32 x 32 tile of pixels
 * of CUDA_ITER_SLICES (16) rows, or 8 in a last group of at most 8, each
 * thread 4 pixels (one column: two pairs of neighbouring rows, 16 apart)
 * of the 16 (8) rows at once.  Projections go in groups of 8 (16 with 8
 * rows: the same 26 KiB): the group's footprints (iter_sf_proj) and the
 * bins the tile can touch (from its corners; at most 31 sqrt 2 + 5 of
 * them) go into shared memory, the rows' values of a bin side by side
 * (float4 planes), zeros outside the detector.  Each pixel then computes
 * its centre and three weights once per projection and adds 3 taps of 16
 * (8) floats: the footprint work is shared by the rows, the sinogram is
 * read from global memory once per tile.  Most of the cost is the
 * shared-memory loads (a warp's 16-byte load takes at least 4 passes
 * through the banks), so with 16 rows a pair's first bins, at most one
 * apart (|sin| <= 1), take one window of 4 bins: 4 loads per plane instead
 * of 6, the pixel's weight 0 on the bin it does not reach.  The sums are
 * the same as with separate taps, tap after tap, projection after
 * projection.
 *
 * A (project_kernel): a block of 4 warps, one per projection of 4
 * consecutive ones, each thread a run of 4 consecutive bins (128 per
 * warp) and the 16 rows of a packed copy (CUDA_ITER_A_SLICES; 8 when a
 * call has no more).  For |cos| >= |sin| a projection walks the image's
 * rows, else its columns (the transposed packed copy, so that loads stay
 * coalesced).  On a line, the pixels whose footprint reaches bin j are
 * those whose first bin j0 (iter_sf_weights) is j - 2, j - 1 or j: their
 * positions lie within 1.5 / max(|cos|, |sin|) (<= 2.13) of a middle that
 * is linear in the line (fp_low, below), so a run's pixels are the 7 to 9
 * after the low end of its first bin's interval, less a margin for float
 * rounding.  Line by line, the block puts into shared memory the 16 values
 * of every pixel the 4 projections' runs can reach (their windows overlap:
 * neighbouring projections cross nearly the same pixels, so each value is
 * read from global memory once for all 4; the next line's are copied in
 * by cp.async while a line is gathered).  Each thread then reads each of
 * its candidates' 16 values once, computes its first bin and three
 * weights exactly as A^T does (cuda_iter_center, then the float
 * operations of iter_sf_weights), and adds them into the 4 bins' sums
 * with the weight of each bin (0 for a bin the pixel does not reach):
 * the values are reused from registers by the bins that share them (the
 * kernel before, one bin a thread, read 4 or 5 candidates' values per
 * bin from shared memory and was bound by those loads, 522.4 ms per A
 * against 394.5 on an H100, 2048^2 x 64 x 2048).  Candidates that cannot
 * reach a bin (from the run's geometry: fp_run) take no multiply-adds for
 * it.  In blocks whose projections' windows spread too far apart (sparse
 * angles, steep ones near 45 degrees) or walk different ways, each warp
 * copies its own projection's window into its quarter of the buffers and
 * walks alone, without block barriers (before: one projection after the
 * other, the other warps waiting).  Measured together (H100, same run):
 * A 394.7 -> 388.5 ms at 2048^2 x 64 x 2048 (1415 GU/s), and the SIRT
 * test's A (256^2, 60 angles, 20 iterations) 0.024 -> 0.009 s.  Then
 * about 12% fewer instructions a line (a candidate's weights in 38 rather
 * than 50, fp_ramp; the run's first candidate with one cdf; the line's
 * window and copy, fp_line_at and fp_prefetch), and the weights written
 * with A^T's roundings, so that they are its floats to the bit (fp_weights:
 * before, 2 of the 3 were contracted differently): A 388.3 -> 386.0 ms
 * (1415.7 -> 1424.1 GU/s, H100, same run), which is about the spread
 * between runs, so A is not bound by instruction issue alone.  What bound
 * it were shared-memory bank conflicts: a warp's 16-byte loads go through
 * the banks 8 lanes at a time, and the lanes' candidates are 4 |inv| slots
 * apart, which a simulation of the slots puts at 2.56 passes per load on
 * average over the angles (1 without conflicts), near the whole time at one
 * pass a cycle.  Now each row of 8 slots of the value buffers is rotated by
 * an amount the block picks for its |inv| (fp_slot, fp_swizzle: 1.78 passes
 * in the same simulation), and a run's first 3 candidates are taken without
 * a test of nc between them (FP_UNBRANCHED): A 385.8, 385.9 -> 327.4, 328.2
 * ms (1425 -> 1677 GU/s; H100, the parent's binary and this one twice in
 * one run; the same sinograms, so the checks' figures are the same to the
 * digit with the same seed; A^T, unchanged, 239.1 -> 240.7 ms).  Measured
 * alongside and not kept (ms; a first run, base 383.5 and 386.0): the first
 * 7 candidates untested, rows unrotated, 369.8 (7 with the rotation spill
 * registers); the rotation alone 332.2; rotations from a table of 4 rows'
 * amounts (1.66 passes simulated) 336.0, 336.9, with 3 untested 332.6; a
 * second run (base 385.8, 385.7, this code 326.6, 327.6): the table with 3
 * untested 331.5, 331.7, 7 untested at 3 blocks an SM (168 registers)
 * 333.0, 333.3, with the table 338.3, 338.1; in the run of the figures
 * above, 4 untested 331.2, 331.0.  Lines whose windows miss the image are
 * skipped.  No atomics: each output bin is one thread's sum, line after
 * line, in pixel order along a line (the same in every mode).
 */
#include "config.h"

#include <cuda_pipeline.h>

#include "cuda_common.h"
#include "cuda_iter.h"

#define BP_TILE 32
#define BP_THREADS 256
#define BP_PIXELS (BP_TILE * BP_TILE / BP_THREADS)    /* 4 per thread */
/* A thread's pixels: two pairs of rows, 2 ty + {0, 1} and 16 more. */
#define BP_PAIR_STEP 16
/* Float4 planes the cache holds per bin, all projections of a group
 * together: 16 projections of 8 rows (2 planes) or 8 of 16 (4), 26 KiB. */
#define BP_CACHED 32
/* Bins cached per projection: a 32-pixel tile spans at most 31 (|cos| +
 * |sin|) <= 43.9 bins between its corner centres; the footprint adds its
 * half-width on each side (3 bins j0..j0+2 from the leftmost; a pair's 4
 * bins from the lower first bin end at the higher one's j0 + 2); +1 for
 * the cache starting a bin early and +2 for rounding. */
#define BP_WIDTH 52

static __device__ __forceinline__ void fma4(float4 &acc, float w, float4 v)
{
    acc.x = fmaf(w, v.x, acc.x);
    acc.y = fmaf(w, v.y, acc.y);
    acc.z = fmaf(w, v.z, acc.z);
    acc.w = fmaf(w, v.w, acc.w);
}

static __device__ __forceinline__ float comp4(const float4 &v, int k)
{
    return k == 0 ? v.x : k == 1 ? v.y : k == 2 ? v.z : v.w;
}

/* ------------------------------------------------------------- pack ---- */

/* Slices per pixel of A's packed copy, in float4s: 8 or 16 slices. */
static int fp_planes(int valid)
{
    return valid <= 8 ? 2 : 4;
}

/* P float4s per pixel: rows 4p .. 4p + 3 in plane p, zeros from valid on.
 * Plane by plane through a 32 x 32 tile for the transposed copy. */
template <int P>
__global__ void __launch_bounds__(256)
pack_kernel(const float *__restrict__ images, int valid, int size,
            float4 *__restrict__ packed, float4 *__restrict__ packed_t)
{
    __shared__ float4 tile[32][33];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int x0 = blockIdx.x * 32, y0 = blockIdx.y * 32;
    const size_t plane = (size_t)size * size;
#pragma unroll
    for (int p = 0; p < P; p++) {
        if (p > 0)
            __syncthreads();            /* the tile is read out */
#pragma unroll
        for (int q = 0; q < 4; q++) {
            const int x = x0 + tx, y = y0 + ty + 8 * q;
            float v[4] = {0.f, 0.f, 0.f, 0.f};
            if (x < size && y < size) {
                const size_t at = (size_t)y * size + x;
#pragma unroll
                for (int k = 0; k < 4; k++)
                    if (4 * p + k < valid)
                        v[k] = images[(4 * p + k) * plane + at];
                packed[P * at + p] = make_float4(v[0], v[1], v[2], v[3]);
            }
            tile[ty + 8 * q][tx] = make_float4(v[0], v[1], v[2], v[3]);
        }
        __syncthreads();
#pragma unroll
        for (int q = 0; q < 4; q++) {
            const int x = x0 + ty + 8 * q, y = y0 + tx;
            if (x < size && y < size)
                packed_t[P * ((size_t)x * size + y) + p] =
                    tile[tx][ty + 8 * q];
        }
    }
}

extern "C" rtomo_status cuda_iter_pack(const cuda_iter_launch *l,
                                       const float *images, int valid,
                                       float4 *packed, float4 *packed_t,
                                       cudaStream_t stream, rtomo_error *err)
{
    const dim3 grid((l->size + 31) / 32, (l->size + 31) / 32);
    if (fp_planes(valid) == 2)
        pack_kernel<2><<<grid, dim3(32, 8), 0, stream>>>(
            images, valid, l->size, packed, packed_t);
    else
        pack_kernel<4><<<grid, dim3(32, 8), 0, stream>>>(
            images, valid, l->size, packed, packed_t);
    RTOMO_CUDA_CHECK_LAUNCH(err, "iterative: pack");
    return RTOMO_OK;
}

/* -------------------------------------------------------------- A^T ---- */

/* Zero or w at an offset of d (0 or 1) in four taps: a pixel's three
 * weights in a pair's window of four bins.  An added 0 x v leaves a sum
 * as it was, so the pixel's sum is the one of its three taps. */
static __device__ __forceinline__ void bp_shift(const float w[3], bool d,
                                                float out[4])
{
    out[0] = d ? 0.f : w[0];
    out[1] = d ? w[0] : w[1];
    out[2] = d ? w[1] : w[2];
    out[3] = d ? w[2] : 0.f;
}

/* One pixel's three taps of projection pl (its first bin i in the cache). */
template <int P, int G>
static __device__ __forceinline__ void bp_taps(
    const float4 (&cache)[P][G][BP_WIDTH], int pl, int i, const float w[3],
    float4 *acc)
{
    i = min(max(i, 0), BP_WIDTH - 3);   /* never taken: rounding guard */
#pragma unroll
    for (int p = 0; p < P; p++) {
        fma4(acc[p], w[0], cache[p][pl][i]);
        fma4(acc[p], w[1], cache[p][pl][i + 1]);
        fma4(acc[p], w[2], cache[p][pl][i + 2]);
    }
}

/* A pair of pixels (one above the other) whose first bins ia, ib are at
 * most one apart share a window of four bins: 4 cache loads per plane
 * instead of 6, for 8 multiply-adds instead of 6.  Else (|sin| near 1
 * and rounding) each pixel takes its own three.  Only with 16 rows: with
 * 8 the window was slower than separate taps (H100, 2048^2 x 64 x 2048:
 * 300.3 against 285.8 ms per A^T). */
template <int P, int G>
static __device__ __forceinline__ void bp_pair(
    const float4 (&cache)[P][G][BP_WIDTH], int pl, int ia, int ib,
    const float wa[3], const float wb[3], float4 *acc_a, float4 *acc_b)
{
    const int m = min(ia, ib);
    if (P < 4 || max(ia, ib) - m > 1) {
        bp_taps<P, G>(cache, pl, ia, wa, acc_a);
        bp_taps<P, G>(cache, pl, ib, wb, acc_b);
        return;
    }
    float a[4], b[4];
    bp_shift(wa, ia > m, a);
    bp_shift(wb, ib > m, b);
    const int i = min(max(m, 0), BP_WIDTH - 4);     /* never taken */
#pragma unroll
    for (int p = 0; p < P; p++) {
        float4 v[4];
#pragma unroll
        for (int c = 0; c < 4; c++)
            v[c] = cache[p][pl][i + c];
#pragma unroll
        for (int c = 0; c < 4; c++) {
            fma4(acc_a[p], a[c], v[c]);
            fma4(acc_b[p], b[c], v[c]);
        }
    }
}

/* The group's sinogram values into the cache: per projection pl the
 * BP_WIDTH bins from pstart[pl], 4P rows side by side in P planes, zeros
 * outside the detector and from valid on. */
template <int P, int G>
static __device__ __forceinline__ void bp_fill(
    const float *__restrict__ rows, size_t sino_len, int width, int p0,
    int group, int valid, const int *pstart, float4 (&cache)[P][G][BP_WIDTH])
{
    for (int e = threadIdx.x; e < group * BP_WIDTH; e += BP_THREADS) {
        const int pl = e / BP_WIDTH, i = e % BP_WIDTH, bin = pstart[pl] + i;
        float v[4 * P];
#pragma unroll
        for (int k = 0; k < 4 * P; k++)
            v[k] = 0.f;
        if (bin >= 0 && bin < width) {
            const float *at = rows + (size_t)(p0 + pl) * width + bin;
#pragma unroll
            for (int k = 0; k < 4 * P; k++)
                if (k < valid)
                    v[k] = at[k * sino_len];
        }
#pragma unroll
        for (int p = 0; p < P; p++)
            cache[p][pl][i] = make_float4(v[4 * p], v[4 * p + 1],
                                          v[4 * p + 2], v[4 * p + 3]);
    }
}

/* The lowest first bin a tile at (x0, y0) can touch in projection q: its
 * corner centres, the footprint's left end, one bin of margin. */
static __device__ __forceinline__ int bp_start(const iter_sf_proj &q, int x0,
                                               int y0)
{
    const float xa = (float)x0, xb = (float)(x0 + BP_TILE - 1);
    const float ya = (float)y0, yb = (float)(y0 + BP_TILE - 1);
    const float lo = fminf(fminf(cuda_iter_center(q, xa, ya),
                                 cuda_iter_center(q, xb, ya)),
                           fminf(cuda_iter_center(q, xa, yb),
                                 cuda_iter_center(q, xb, yb)));
    return (int)floorf(lo + q.t0 + 0.5f) - 1;
}

/* One block: a 32 x 32 tile of 4P rows (file comment). */
template <int P>
__global__ void __launch_bounds__(BP_THREADS, P == 2 ? 3 : 2)
backproject_kernel(const cuda_iter_launch l, const float *__restrict__ sino,
                   int n, float *__restrict__ images)
{
    constexpr int G = BP_CACHED / P;    /* projections per group */
    /* Planes apart: each 16-byte load of a warp stays contiguous (one
     * pass through the banks per 8 lanes). */
    __shared__ float4 cache[P][G][BP_WIDTH];
    __shared__ iter_sf_proj pq[G];
    __shared__ int pstart[G];

    const int t = threadIdx.x;
    const int row0 = blockIdx.z * 4 * P;
    const int valid = min(4 * P, n - row0);
    const int x0 = blockIdx.x * BP_TILE, y0 = blockIdx.y * BP_TILE;
    /* Pixels (px, py + BP_PAIR_STEP h + m), h, m in {0, 1}. */
    const int px = x0 + t % BP_TILE, py = y0 + 2 * (t / BP_TILE);
    const float fx = (float)px;
    const size_t sino_len = (size_t)l.n_proj * l.width;
    const float *rows = sino + (size_t)row0 * sino_len;

    float4 acc[BP_PIXELS][P];
#pragma unroll
    for (int k = 0; k < BP_PIXELS; k++)
#pragma unroll
        for (int p = 0; p < P; p++)
            acc[k][p] = make_float4(0.f, 0.f, 0.f, 0.f);

    for (int p0 = 0; p0 < l.n_proj; p0 += G) {
        const int group = min(G, l.n_proj - p0);
        __syncthreads();                /* the previous group is consumed */
        if (t < group) {
            pq[t] = l.proj[p0 + t];
            pstart[t] = bp_start(pq[t], x0, y0);
        }
        __syncthreads();
        bp_fill<P, G>(rows, sino_len, l.width, p0, group, valid, pstart,
                      cache);
        __syncthreads();
        for (int pl = 0; pl < group; pl++) {
            const iter_sf_proj q = pq[pl];
            const int start = pstart[pl];
#pragma unroll
            for (int h = 0; h < BP_PIXELS / 2; h++) {
                const float y = (float)(py + h * BP_PAIR_STEP);
                float wa[3], wb[3];
                const int ia = iter_sf_weights(&q, cuda_iter_center(q, fx, y),
                                               wa) - start;
                const int ib = iter_sf_weights(
                                   &q, cuda_iter_center(q, fx, y + 1.f), wb) -
                               start;
                bp_pair<P, G>(cache, pl, ia, ib, wa, wb, acc[2 * h],
                              acc[2 * h + 1]);
            }
        }
    }

    const size_t plane = (size_t)l.size * l.size;
    float *out = images + (size_t)row0 * plane;
#pragma unroll
    for (int k = 0; k < BP_PIXELS; k++) {
        const int y = py + (k / 2) * BP_PAIR_STEP + k % 2;
        if (px < l.size && y < l.size) {
            const size_t at = (size_t)y * l.size + px;
#pragma unroll
            for (int r = 0; r < 4 * P; r++)
                if (r < valid)
                    out[r * plane + at] = comp4(acc[k][r / 4], r % 4);
        }
    }
}

/* images rows [0, n) from the kernel of 4P rows per thread. */
template <int P>
static rtomo_status bp_launch(const cuda_iter_launch *l,
                              const float *sinograms, int n, float *images,
                              cudaStream_t stream, rtomo_error *err)
{
    const int groups = (n + 4 * P - 1) / (4 * P);
    const int tiles = (l->size + BP_TILE - 1) / BP_TILE;
    /* gridDim.z is at most 65535: launch in runs of groups. */
    for (int g = 0; g < groups; g += 65535) {
        const int run = min(groups - g, 65535);
        const size_t skip = (size_t)g * 4 * P;
        backproject_kernel<P><<<dim3(tiles, tiles, run), BP_THREADS, 0,
                                stream>>>(
            *l, sinograms + skip * l->n_proj * l->width, n - (int)skip,
            images + skip * l->size * l->size);
        RTOMO_CUDA_CHECK_LAUNCH(err, "iterative: back-projection");
    }
    return RTOMO_OK;
}

extern "C" rtomo_status cuda_iter_backproject(const cuda_iter_launch *l,
                                              const float *sinograms, int n,
                                              float *images,
                                              cudaStream_t stream,
                                              rtomo_error *err)
{
    /* Groups of CUDA_ITER_SLICES (16) rows; a last group of at most 8
     * takes the 8-row kernel (half the loads and registers). */
    const int tail = n % CUDA_ITER_SLICES;
    const int wide = tail > 0 && tail <= 8 ? n - tail : n;
    rtomo_status st;
    if (wide > 0 &&
        (st = bp_launch<4>(l, sinograms, wide, images, stream, err)))
        return st;
    if (wide < n)
        return bp_launch<2>(l, sinograms + (size_t)wide * l->n_proj * l->width,
                            n - wide,
                            images + (size_t)wide * l->size * l->size, stream,
                            err);
    return RTOMO_OK;
}

/* ---------------------------------------------------------------- A ---- */

/* Consecutive bins per thread (each pixel value read once for all of
 * them), threads per projection (a warp), the projections of a block (a
 * warp each) and the block's bins of each.  4 bins of 16 rows are 64
 * accumulators: with 3 or 2 bins (more pixel reads and weights per bin)
 * A was slower, H100 2048^2 x 64 x 2048: 457.8 and 527.1 ms against 402.2
 * (with weights from a per-warp table, below). */
#define FP_RUN 4
#define FP_PROJ 4
#define FP_THREADS (32 * FP_PROJ)
#define FP_BINS (32 * FP_RUN)
/* Pixels of one projection's window on a line: the block's bins' low
 * ends span at most 127 sqrt 2 (floored: 180) pixels, plus a run's
 * candidates after the last (at most 9). */
#define FP_WIN 190
/* Pixels of the union of the projections' windows on a line: two of the
 * value buffers hold, as one, the 4 windows of projections that cannot
 * share lines (fp_walk_apart), 380 pixels.  The planes are 2 float4s
 * more apart (382 = 6 modulo 8), so that a warp's 32 copies of
 * consecutive (pixel, plane) float4s hit every bank once; 2 x 16 x 382
 * float4s and the block's fp_proj fit the 48 KiB of static shared
 * memory. */
#define FP_UNION (2 * FP_WIN)
#define FP_VSTRIDE (FP_UNION + 2)
/* How far, in pixels, a bin's candidates reach past the pixels that can
 * touch it, for the float rounding of the centres and middles (a few ulps
 * of the coordinates: < 0.02 pixel below 2^15). */
#define FP_MARGIN 0.1f
/* Most candidates per run and line (fp_params: ceil(6 sqrt 2 + 0.21)). */
#define FP_NC_MAX 9
/* Candidates per run and line taken without a test of nc between them
 * (fp_run; there are never fewer than 7, ceil(6 + 0.21)), so that the
 * compiler can overlap one's weights and loads with the multiply-adds of
 * the one before.  All 7 need more than the 128 registers a thread has at
 * 4 blocks an SM (ptxas spills to local memory; at 3 blocks an SM, 168
 * registers, A was slower: file comment). */
#define FP_UNBRANCHED 3

/* Where a line's slot i lies in the value buffers: in its row of 8 slots
 * (128 bytes, the 32 banks once), rotated by (sw (row + 1)) / 2.  A warp's
 * 16-byte loads go through the banks 8 lanes at a time, and the lanes'
 * candidates are 4 |inv| (4 to 5.66) slots apart: unrotated, their slots
 * often fall into the same bank group (4-way at |inv| = 1; over all
 * angles, a simulation of the lanes' slots gives 2.56 passes per 8 lanes
 * on average, against 1 without conflicts).  A block's sw (fp_swizzle,
 * 0 .. 15) is the one that spreads lanes 4 |inv| apart best (1.78 passes
 * on average in the same simulation).  The rotation stays in the row and
 * is 0 in row 47 (24 sw = 0 modulo 8), the last and partial one of
 * FP_VSTRIDE, so it is a bijection of the slots: the values, the weights
 * and the sums are those of the unrotated buffers, and so are the
 * sinograms, to the bit. */
static __device__ __forceinline__ int fp_slot(int i, int sw)
{
    return (i & ~7) | ((i + ((sw * ((i >> 3) + 1)) >> 1)) & 7);
}

/* The best sw per 1/32 of 4 |inv| from 4 (54 of them up to 4 sqrt 2),
 * from the simulation above: the lanes' slots floor(o + 4 |inv| lane) and
 * floor(o - 4 |inv| lane) (mirrored), the offset o over 8 slots, 6 values
 * of |inv| in each 1/32. */
#define FP_SW_BUCKETS 54
__constant__ unsigned char fp_sw_table[FP_SW_BUCKETS] = {
    14, 14, 14, 14, 5,  4,  4,  4,  4,  2, 2, 2, 4,  0,  0,  0, 0, 0,
    0,  0,  0,  1,  1,  4,  4,  8,  8,  4, 0, 0, 0,  0,  0,  0, 0, 0,
    15, 15, 14, 15, 15, 15, 15, 15, 2,  2, 2, 14, 14, 14, 1, 1, 0, 0};

/* One pixel's 4P values (slices 4p .. 4p + 3 in v[p]). */
template <int P>
struct fp_vals {
    float4 v[P];
};

/* A projection's walk: its footprint, then (pixels along the line) the
 * middle's step per line m1, the lower and the higher of the low ends of
 * the block's first and last bins on line 0, a thread's candidates per
 * line nc (also as a float, ncf), 1 / cos (rows) or 1 / sin (columns) and
 * the half-width hh of a bin's interval with the margin.  q comes first,
 * 16-byte aligned, so that fp_load_q reads it as two float4s, and m1 ..
 * ncf as the third, which is all that a line's window needs
 * (fp_line_at). */
struct __align__(16) fp_proj {
    iter_sf_proj q;
    float m1, lo_min, lo_max, ncf;
    float inv, hh;
    int rows, nc;
};

static __device__ __forceinline__ iter_sf_proj fp_load_q(const fp_proj &m)
{
    const float4 *p = reinterpret_cast<const float4 *>(&m.q);
    const float4 a = p[0], b = p[1];
    iter_sf_proj q;
    q.cos_a = a.x; q.sin_a = a.y; q.base = a.z; q.t0 = a.w;
    q.t2 = b.x; q.wb = b.y; q.inv_wb = b.z; q.inv_2wa = b.w;
    return q;
}

/* Bin j's pixels on line f: a pixel's j0 is j - 2 .. j where its centre s
 * lies in [j - 2.5 - t0, j + 0.5 - t0).  Along a row (s = base - f sin +
 * u cos) that is |u - mid| <= 1.5 / |cos| with mid = ((j - 1) - t0 -
 * base) / cos + f sin / cos; along a column (s = base - u sin + f cos)
 * |u - mid| <= 1.5 / |sin| with mid = (base - ((j - 1) - t0)) / sin + f
 * cos / sin.  fp_low is mid - hh on line 0; on line f it is fmaf(f, m1,
 * fp_low), and the pixels are among those after it, at most 2 hh on.
 * Each operation is correctly rounded (no contraction), so the low end is
 * monotone in j: a run's first and last bins bound its bins', the block's
 * first and last bins all of its bins'. */
static __device__ __forceinline__ float fp_low(const fp_proj &m, int j)
{
    const float b = __fsub_rn((float)(j - 1), m.q.t0);
    const float mid = m.rows ? __fmul_rn(__fsub_rn(b, m.q.base), m.inv)
                             : __fmul_rn(__fsub_rn(m.q.base, b), m.inv);
    return __fsub_rn(mid, m.hh);
}

static __device__ fp_proj fp_params(const iter_sf_proj &q, int jb)
{
    fp_proj m;
    m.q = q;
    m.rows = fabsf(q.cos_a) >= fabsf(q.sin_a);
    m.inv = 1.f / (m.rows ? q.cos_a : q.sin_a);
    m.m1 = (m.rows ? q.sin_a : q.cos_a) * m.inv;
    m.hh = 1.5f * fabsf(m.inv) + FP_MARGIN;
    /* A run's pixels lie after the lower of its end bins' low ends, within
     * (FP_RUN - 1) |inv| (the low ends' spread, plus a few ulps) + 2 hh:
     * at most the ceiling of that many integers, 7 to 9. */
    m.nc = (int)ceilf((float)(FP_RUN - 1) * fabsf(m.inv) + 2.f * m.hh +
                      0.01f);
    const float lo_a = fp_low(m, jb), lo_b = fp_low(m, jb + FP_BINS - 1);
    m.lo_min = fminf(lo_a, lo_b);
    m.lo_max = fmaxf(lo_a, lo_b);
    m.ncf = (float)m.nc;
    return m;
}

/* The block's rotation of the value buffers (fp_slot), from projection m
 * (its neighbours' |inv| are nearly the same). */
static __device__ __forceinline__ int fp_swizzle(const fp_proj &m)
{
    const int b = (int)((4.f * fabsf(m.inv) - 4.f) * 32.f);
    return fp_sw_table[min(max(b, 0), FP_SW_BUCKETS - 1)];
}

/* Line f of projections mp[0..np): the union of their windows (first ..
 * end - 1), and its part on the image (vlo .. vhi - 1; empty when off
 * it).  A projection's window on line f is every candidate of the
 * block's runs: pixels floor(a) + 1 .. floor(b) + nc, a and b its low ends
 * fmaf(f, m1, lo_min) and fmaf(f, m1, lo_max) (a correctly rounded fmaf is
 * monotone in its addend, so these are the lower and the higher of the
 * first and last bins' low ends on line f).  The union is taken in floats
 * (floors and nc are integers, exact) and converted once: every thread
 * computes it each line, and the kernel of 450ea1d spent about 60
 * instructions a line on it (8 conversions, 16 loads of mp) against about
 * 30 now; the windows are the same. */
struct fp_line {
    int first, end, vlo, vhi;
};

static __device__ __forceinline__ fp_line fp_line_at(const fp_proj *mp,
                                                     int np, int f, int size)
{
    const float ff = (float)f;
    float lo = 3.0e38f, hi = -3.0e38f;
    for (int k = 0; k < np; k++) {
        const float4 w = reinterpret_cast<const float4 *>(&mp[k])[2];
        lo = fminf(lo, fmaf(ff, w.x, w.y));
        hi = fmaxf(hi, floorf(fmaf(ff, w.x, w.z)) + w.w);
    }
    fp_line ln;
    ln.first = (int)floorf(lo) + 1;
    ln.end = (int)hi + 1;
    ln.vlo = max(ln.first, 0);
    ln.vhi = min(ln.end, size);
    return ln;
}

/* Start copying line f's values (pixels vlo .. vhi - 1, P float4s each,
 * consecutive in the packed copy) into v (slot: base + pixel - first),
 * one float4 per thread (t of NT, a multiple of P) at a time, and zero
 * the window's slots off the image (a pixel there adds nothing, and 0 x a
 * stale slot could be a NaN); the copies are waited for with
 * __pipeline_wait_prior.  Float4 e of the line is plane e % P of pixel
 * e / P: thread t's are all of plane t % P, NT / P pixels apart, so the
 * loop steps two pointers (the kernel of 450ea1d recomputed both
 * addresses from e, about 14 instructions a copy against 4 to 7 now). */
template <int P, int NT>
static __device__ __forceinline__ void fp_prefetch(
    const float4 *__restrict__ lines, int size, int f, const fp_line &ln,
    float4 (*v)[FP_VSTRIDE], int base, int t, int sw)
{
    static_assert(NT % P == 0, "a thread's copies are of one plane");
    const int nt = NT;
    if (ln.vlo < ln.vhi) {
        const float4 *src =
            lines + (size_t)P * ((size_t)f * size + ln.vlo) + t;
        const int n = P * (ln.vhi - ln.vlo), at = base + ln.vlo - ln.first;
        float4 *dst = v[t % P];
        int i = at + t / P;
#pragma unroll 4
        for (int e = t; e < n; e += NT, src += NT, i += NT / P)
            __pipeline_memcpy_async(dst + fp_slot(i, sw), src,
                                    sizeof(float4));
        const int below = ln.vlo - ln.first, off = below + ln.end - ln.vhi;
        for (int e = t; e < P * off; e += nt) {
            const int k = e / P;
            v[e % P][fp_slot(base + (k < below ? k : k - below + ln.vhi -
                                                        ln.first),
                             sw)] = make_float4(0.f, 0.f, 0.f, 0.f);
        }
    }
    __pipeline_commit();
}

/* One line of the walk (a row for ROWS, a column otherwise): the pixel at
 * position u along it, the fixed coordinate f. */
template <bool ROWS>
static __device__ __forceinline__ float line_center(const iter_sf_proj &q,
                                                    float u, float f)
{
    return ROWS ? cuda_iter_center(q, u, f) : cuda_iter_center(q, f, u);
}

/* iter_sf_ramp(v, wb, inv_wb) as A^T's compiled code computes it (its
 * SASS: vc * vc * inv_wb + 2 over contracted to fmaf(vc vc, inv_wb, 2 over),
 * 2 over as (v - wb) + (v - wb) where v > wb), in fewer instructions:
 * vc's clamp as fminf (vc >= 0 is never a NaN, its sign is squared away)
 * and 2 over as fmaxf(fmaf(v, 2, -2 wb), 0) (doubling is exact, so the
 * fmaf's single rounding of 2 v - 2 wb is 2 (v - wb) rounded, positive
 * exactly where v > wb), against two compares and selects and two adds:
 * 7 instructions for 10. m2wb is -2 wb. */
static __device__ __forceinline__ float fp_ramp(float v, float wb,
                                                float inv_wb, float m2wb)
{
    const float vc = fminf(fmaxf(v, 0.f), wb);
    const float over2 = fmaxf(__fmaf_rn(v, 2.f, m2wb), 0.f);
    return __fmaf_rn(__fmul_rn(vc, vc), inv_wb, over2);
}

/* iter_sf_cdf(q, u), the same floats as A^T's (fp_ramp). */
static __device__ __forceinline__ float fp_cdf(const iter_sf_proj &q,
                                               float m2wb, float u)
{
    return __fmul_rn(__fsub_rn(fp_ramp(__fsub_rn(u, q.t0), q.wb, q.inv_wb,
                                       m2wb),
                               fp_ramp(__fsub_rn(u, q.t2), q.wb, q.inv_wb,
                                       m2wb)),
                     q.inv_2wa);
}

/* iter_sf_weights with its first bin j0 as a float: the same operations on
 * the same floats ((float)j0 is floorf(left)), so the same weights as A^T's,
 * without the conversions to and from int (a quarter-rate pipe).  Every
 * operation is written rounded (_rn): A^T's compiled code rounds g2 and
 * then subtracts (w[1], w[2]), where the kernel of 450ea1d let the
 * compiler contract g2 - g1 and 1 - g2 into fmaf's, a weight an ulp or so
 * from A^T's.  A change to iter_sf_weights (or to how the compiler
 * contracts it in backproject_kernel) must be made here too
 * (test_cuda_iter's adjointness and CPU checks catch a difference larger
 * than rounding).  fp_first: j0 and u1 (the first bin's right edge less
 * s_c); fp_weights: the three weights from u1. */
static __device__ __forceinline__ float fp_first(const iter_sf_proj &q,
                                                 float s_c, float &u1)
{
    const float fl = floorf(__fadd_rn(__fadd_rn(s_c, q.t0), 0.5f));
    u1 = __fsub_rn(__fadd_rn(fl, 0.5f), s_c);
    return fl;
}

static __device__ __forceinline__ void fp_weights(const iter_sf_proj &q,
                                                  float m2wb, float u1,
                                                  float w[3])
{
    const float g1 = fp_cdf(q, m2wb, u1);
    const float g2 = fp_cdf(q, m2wb, __fadd_rn(u1, 1.0f));
    w[0] = g1;
    w[1] = __fsub_rn(g2, g1);
    w[2] = __fsub_rn(1.0f, g2);
}

/* 1 where a projection's pixels' first bins fall as the walk's position
 * grows (ds/du = cos along rows, -sin along columns): its runs' bins are
 * then held mirrored (acc[b] is bin jt + FP_RUN - 1 - b). */
static __device__ __forceinline__ bool fp_mirrored(const fp_proj &m)
{
    return (m.rows ? m.q.cos_a : -m.q.sin_a) < 0.f;
}

/* A thread's run on line f: its nc candidates from the pixel after lo (the
 * lower of its end bins' low ends), each pixel's values read once from the
 * line's slots (pixel - first) for all the bins it reaches.  In the run's
 * (possibly mirrored) bin order b, candidate k's offset d (first bin less
 * jt) is -3 or -2 for k = 0 (the run's first interval starts within the
 * margin before it), grows by 0 or 1 a step (pixels are |cos| or |sin|,
 * 0.71 to 1 bins apart), so it lies in [-3 + floor(0.7071 k), k - 2]: the
 * bins below or above that range get no multiply-adds (21 of 28 where nc
 * is 7, 26 of 36 where it is 9), the other bins' weights are picked by
 * the offset (0 where the pixel does not reach the bin).  The weights are
 * computed in each thread whose run the pixel reaches (1.5 threads on
 * average): taking them from a table in shared memory, computed once per
 * pixel by the warp, was slower (H100, 2048^2 x 64 x 2048: 402.2 against
 * 394.5 ms per A, the kernel of 0920bf8).  The lanes' loads at a step are
 * 4 |inv| pixels apart, in slots rotated so that they share banks less
 * (fp_slot).  The first FP_UNBRANCHED candidates are taken without a test
 * of nc between them. */
template <bool ROWS, int P>
static __device__ __forceinline__ void fp_run(
    const iter_sf_proj &q, bool mirror, int nc, int jt, float f, float lo,
    int first, int sw, const float4 (*v)[FP_VSTRIDE], fp_vals<P> *acc)
{
    const float fu = floorf(lo) + 1.f;          /* the first candidate */
    const int s0 = (int)fu - first;             /* its slot */
    const float m2wb = -2.f * q.wb;
    /* d = j0 - jt, or 1 - (j0 - jt) mirrored: one exact fmaf (integers). */
    const float dsign = mirror ? -1.f : 1.f;
    const float doff = mirror ? (float)(jt + 1) : -(float)jt;
#pragma unroll
    for (int k = 0; k < FP_NC_MAX; k++) {
        if (k >= FP_UNBRANCHED && k >= nc)
            break;                              /* uniform */
        float4 x[P];
#pragma unroll
        for (int p = 0; p < P; p++)
            x[p] = v[p][fp_slot(s0 + k, sw)];
        float u1;
        const float d = fmaf(
            dsign, fp_first(q, line_center<ROWS>(q, fu + (float)k, f), u1),
            doff);
        /* wa, w1, wc: the weights at offsets d, d + 1, d + 2. */
        float wa = 0.f, w1 = 0.f, wc;
        if (k == 0) {
            /* Only bin 0 at d = -2 is within reach (below): its weight
             * alone, w[2] = 1 - g2 (w[0] = g1 mirrored), one cdf. */
            const float g = fp_cdf(q, m2wb, mirror ? u1 : __fadd_rn(u1, 1.0f));
            wc = mirror ? g : __fsub_rn(1.0f, g);
        } else {
            float w[3];
            fp_weights(q, m2wb, u1, w);
            wa = mirror ? w[2] : w[0];
            w1 = w[1];
            wc = mirror ? w[0] : w[2];
        }
        const int dlo = -3 + (k * 7071) / 10000, dhi = k - 2;
#pragma unroll
        for (int b = 0; b < FP_RUN; b++) {
            if (b < dlo || b > dhi + 2)
                continue;                       /* never reached */
            float wb = 0.f;
            if (b - 2 >= dlo && b - 2 <= dhi)
                wb = d == (float)(b - 2) ? wc : wb;
            if (b - 1 >= dlo && b - 1 <= dhi)
                wb = d == (float)(b - 1) ? w1 : wb;
            if (b >= dlo && b <= dhi)
                wb = d == (float)b ? wa : wb;
#pragma unroll
            for (int p = 0; p < P; p++)
                fma4(acc[b].v[p], wb, x[p]);
        }
    }
}

/* Projections mp[0..np) over every line, the warp of projection kw (none
 * where kw is outside 0 .. np - 1) its thread's run from bin jt on.  All
 * of them walk rows (ROWS) or all columns. */
template <bool ROWS, int P>
static __device__ __forceinline__ void fp_walk(
    int size, const fp_proj *mp, int np, int kw, int jt, int sw,
    const float4 *__restrict__ lines, float4 (*v)[P][FP_VSTRIDE],
    fp_vals<P> *acc)
{
    const bool mine = kw >= 0 && kw < np;
    const fp_proj &m = mp[mine ? kw : 0];
    const iter_sf_proj q = fp_load_q(m);
    const float m1 = m.m1;
    const int nc = m.nc;
    const float la = fp_low(m, jt), lb = fp_low(m, jt + FP_RUN - 1);
    const bool mirror = fp_mirrored(m);
    fp_line ln = fp_line_at(mp, np, 0, size);
    fp_prefetch<P, FP_THREADS>(lines, size, 0, ln, v[0], 0, threadIdx.x, sw);
    for (int f = 0; f < size; f++) {
        const fp_line next = fp_line_at(mp, np, f + 1, size);
        __pipeline_wait_prior(0);
        __syncthreads();        /* line f's values are in, f - 1 consumed */
        if (f + 1 < size)
            fp_prefetch<P, FP_THREADS>(lines, size, f + 1, next,
                                       v[(f + 1) & 1], 0, threadIdx.x, sw);
        if (mine && ln.vlo < ln.vhi) {
            const float ff = (float)f;
            const float lo = fminf(fmaf(ff, m1, la), fmaf(ff, m1, lb));
            fp_run<ROWS, P>(q, mirror, nc, jt, ff, lo, ln.first, sw,
                            v[f & 1], acc);
        }
        ln = next;
    }
}

/* Projection m over every line by the calling warp alone, its window in
 * its own region of the buffers (from slot base of v): for blocks whose
 * projections cannot share lines (sparse angles), so that their 4 warps
 * still work at once.  A line's values are copied in by the warp and
 * then gathered (no copy ahead, no block barrier). */
template <bool ROWS, int P>
static __device__ __forceinline__ void fp_walk_apart(
    int size, const fp_proj &m, int jt, int sw,
    const float4 *__restrict__ lines, float4 (*v)[FP_VSTRIDE], int base,
    fp_vals<P> *acc)
{
    const iter_sf_proj q = fp_load_q(m);
    const float la = fp_low(m, jt), lb = fp_low(m, jt + FP_RUN - 1);
    for (int f = 0; f < size; f++) {
        const fp_line ln = fp_line_at(&m, 1, f, size);
        if (ln.vlo >= ln.vhi)
            continue;                   /* uniform: off the image */
        __syncwarp();                   /* line f - 1 is consumed */
        fp_prefetch<P, 32>(lines, size, f, ln, v, base, threadIdx.x % 32,
                           sw);
        __pipeline_wait_prior(0);
        __syncwarp();                   /* line f's values are in */
        const float ff = (float)f;
        const float lo = fminf(fmaf(ff, m.m1, la), fmaf(ff, m.m1, lb));
        fp_run<ROWS, P>(q, fp_mirrored(m), m.nc, jt, ff, lo, ln.first - base,
                        sw, v, acc);
    }
}

/* fp_walk in the projections' direction (those of mp[0..np) are the same
 * direction). */
template <int P>
static __device__ __forceinline__ void fp_walk_any(
    const cuda_iter_launch &l, const fp_proj *mp, int np, int kw, int jt,
    int sw, const float4 *__restrict__ packed,
    const float4 *__restrict__ packed_t, float4 (*v)[P][FP_VSTRIDE],
    fp_vals<P> *acc)
{
    if (mp[0].rows)
        fp_walk<true, P>(l.size, mp, np, kw, jt, sw, packed, v, acc);
    else
        fp_walk<false, P>(l.size, mp, np, kw, jt, sw, packed_t, v, acc);
}

/* 1 when projections mp[0..np) may share lines: the same direction, and
 * the union of their windows at most FP_UNION pixels on every line.  The
 * windows' ends are linear in the line up to the floors, so the union's
 * width is largest at the first or the last line, within 2 pixels. */
static __device__ __forceinline__ bool fp_shared(const fp_proj *mp, int np,
                                                 int size)
{
    for (int k = 0; k < np; k++)
        if (mp[k].rows != mp[0].rows)
            return false;
    const fp_line a = fp_line_at(mp, np, 0, size);
    const fp_line b = fp_line_at(mp, np, size - 1, size);
    return a.end - a.first <= FP_UNION - 3 && b.end - b.first <= FP_UNION - 3;
}

/* One block: FP_BINS consecutive bins of FP_PROJ consecutive projections,
 * a warp per projection, a run of FP_RUN bins per thread, 4P rows of
 * packed copies (file comment). */
template <int P>
__global__ void __launch_bounds__(FP_THREADS, 4)
project_kernel(const cuda_iter_launch l, const float4 *__restrict__ packed,
               const float4 *__restrict__ packed_t, int valid,
               float *__restrict__ sino)
{
    __shared__ float4 v[2][P][FP_VSTRIDE];
    __shared__ fp_proj mp[FP_PROJ];
    const int p0 = blockIdx.y * FP_PROJ, jb = blockIdx.x * FP_BINS;
    const int np = min(FP_PROJ, l.n_proj - p0);
    const int kw = threadIdx.x / 32;
    const int jt = jb + FP_RUN * (threadIdx.x % 32);
    if (threadIdx.x < np)
        mp[threadIdx.x] = fp_params(l.proj[p0 + threadIdx.x], jb);
    __syncthreads();
    const int sw = fp_swizzle(mp[0]);
    fp_vals<P> acc[FP_RUN];
#pragma unroll
    for (int b = 0; b < FP_RUN; b++)
#pragma unroll
        for (int p = 0; p < P; p++)
            acc[b].v[p] = make_float4(0.f, 0.f, 0.f, 0.f);

    if (!l.single && np > 1 && fp_shared(mp, np, l.size)) {
        fp_walk_any<P>(l, mp, np, kw, jt, sw, packed, packed_t, v, acc);
    } else if (kw < np) {
        /* Each warp its own projection, in its quarter of the buffers. */
        float4 (*vk)[FP_VSTRIDE] = v[kw / 2];
        const int base = (kw % 2) * FP_WIN;
        if (mp[kw].rows)
            fp_walk_apart<true, P>(l.size, mp[kw], jt, sw, packed, vk,
                                   base, acc);
        else
            fp_walk_apart<false, P>(l.size, mp[kw], jt, sw, packed_t, vk,
                                    base, acc);
    }

    if (kw >= np)
        return;
    const size_t sino_len = (size_t)l.n_proj * l.width;
    float *out = sino + (size_t)(p0 + kw) * l.width;
    const bool mirror = fp_mirrored(mp[kw]);
#pragma unroll
    for (int b = 0; b < FP_RUN; b++) {
        const int j = jt + (mirror ? FP_RUN - 1 - b : b);
        if (j >= l.width)
            continue;
#pragma unroll
        for (int r = 0; r < 4 * P; r++)
            if (r < valid)
                out[r * sino_len + j] = comp4(acc[b].v[r / 4], r % 4);
    }
}

extern "C" rtomo_status cuda_iter_project(const cuda_iter_launch *l,
                                          const float4 *packed,
                                          const float4 *packed_t, int valid,
                                          float *sinograms,
                                          cudaStream_t stream,
                                          rtomo_error *err)
{
    const dim3 grid((l->width + FP_BINS - 1) / FP_BINS,
                    (l->n_proj + FP_PROJ - 1) / FP_PROJ);
    if (fp_planes(valid) == 2)
        project_kernel<2><<<grid, FP_THREADS, 0, stream>>>(
            *l, packed, packed_t, valid, sinograms);
    else
        project_kernel<4><<<grid, FP_THREADS, 0, stream>>>(
            *l, packed, packed_t, valid, sinograms);
    RTOMO_CUDA_CHECK_LAUNCH(err, "iterative: projection");
    return RTOMO_OK;
}

/* ---------------------------------------------------------- vectors ---- */

#define VEC_THREADS 256
#define DOT_MAX_BLOCKS 128

extern "C" int cuda_iter_dot_blocks(size_t len)
{
    size_t b = (len + 8 * VEC_THREADS - 1) / (8 * VEC_THREADS);
    return b < 1 ? 1 : b > DOT_MAX_BLOCKS ? DOT_MAX_BLOCKS : (int)b;
}

__global__ void __launch_bounds__(VEC_THREADS)
dot_kernel(const float *__restrict__ a, const float *__restrict__ b,
           size_t len, double *__restrict__ partial)
{
    __shared__ double sum[VEC_THREADS];
    const size_t row = blockIdx.y;
    const float *ra = a + row * len, *rb = b + row * len;
    double s = 0.0;
    for (size_t i = (size_t)blockIdx.x * VEC_THREADS + threadIdx.x; i < len;
         i += (size_t)gridDim.x * VEC_THREADS)
        s += (double)ra[i] * (double)rb[i];
    sum[threadIdx.x] = s;
    __syncthreads();
    for (int h = VEC_THREADS / 2; h > 0; h /= 2) {
        if ((int)threadIdx.x < h)
            sum[threadIdx.x] += sum[threadIdx.x + h];
        __syncthreads();
    }
    if (threadIdx.x == 0)
        partial[row * gridDim.x + blockIdx.x] = sum[0];
}

extern "C" rtomo_status cuda_iter_dot(const float *a, const float *b, int n,
                                      size_t len, double *partial,
                                      cudaStream_t stream, rtomo_error *err)
{
    const int blocks = cuda_iter_dot_blocks(len);
    for (int r = 0; r < n; r += 65535) {
        const int run = min(n - r, 65535);
        dot_kernel<<<dim3(blocks, run), VEC_THREADS, 0, stream>>>(
            a + (size_t)r * len, b + (size_t)r * len, len,
            partial + (size_t)r * blocks);
        RTOMO_CUDA_CHECK_LAUNCH(err, "iterative: dot");
    }
    return RTOMO_OK;
}

static unsigned vec_blocks(size_t len)
{
    size_t b = (len + VEC_THREADS - 1) / VEC_THREADS;
    return b > 1024 ? 1024u : (unsigned)b;
}

__global__ void __launch_bounds__(VEC_THREADS)
axpby_kernel(const float *__restrict__ coef, int n, const float *__restrict__ x,
             float *__restrict__ y, size_t len)
{
    const size_t row = blockIdx.y;
    const float alpha = coef[row], beta = coef[n + row];
    const float *rx = x + row * len;
    float *ry = y + row * len;
    for (size_t i = (size_t)blockIdx.x * VEC_THREADS + threadIdx.x; i < len;
         i += (size_t)gridDim.x * VEC_THREADS)
        /* Rounded as the CPU's float expression (no FMA contraction). */
        ry[i] = beta == 0.f ? __fmul_rn(alpha, rx[i])
                            : __fadd_rn(__fmul_rn(alpha, rx[i]),
                                        __fmul_rn(beta, ry[i]));
}

extern "C" rtomo_status cuda_iter_axpby(const float *coef, const float *x,
                                        float *y, int n, size_t len,
                                        cudaStream_t stream, rtomo_error *err)
{
    for (int r = 0; r < n; r += 65535) {
        const int run = min(n - r, 65535);
        /* From coef + r the kernel reads alpha at [row] and beta at
         * [n + row]: rows r + row of the whole call. */
        axpby_kernel<<<dim3(vec_blocks(len), run), VEC_THREADS, 0, stream>>>(
            coef + r, n, x + (size_t)r * len, y + (size_t)r * len, len);
        RTOMO_CUDA_CHECK_LAUNCH(err, "iterative: axpby");
    }
    return RTOMO_OK;
}

__global__ void __launch_bounds__(VEC_THREADS)
mul_kernel(const float *__restrict__ w, float *__restrict__ y, size_t len)
{
    float *ry = y + (size_t)blockIdx.y * len;
    for (size_t i = (size_t)blockIdx.x * VEC_THREADS + threadIdx.x; i < len;
         i += (size_t)gridDim.x * VEC_THREADS)
        ry[i] *= w[i];
}

extern "C" rtomo_status cuda_iter_mul(const float *w, float *y, int n,
                                      size_t len, cudaStream_t stream,
                                      rtomo_error *err)
{
    for (int r = 0; r < n; r += 65535) {
        const int run = min(n - r, 65535);
        mul_kernel<<<dim3(vec_blocks(len), run), VEC_THREADS, 0, stream>>>(
            w, y + (size_t)r * len, len);
        RTOMO_CUDA_CHECK_LAUNCH(err, "iterative: mul");
    }
    return RTOMO_OK;
}

__global__ void __launch_bounds__(VEC_THREADS)
clamp_kernel(float *__restrict__ x, size_t count)
{
    for (size_t i = (size_t)blockIdx.x * VEC_THREADS + threadIdx.x; i < count;
         i += (size_t)gridDim.x * VEC_THREADS)
        x[i] = fmaxf(x[i], 0.f);
}

extern "C" rtomo_status cuda_iter_clamp(float *x, size_t count,
                                        cudaStream_t stream, rtomo_error *err)
{
    clamp_kernel<<<vec_blocks(count), VEC_THREADS, 0, stream>>>(x, count);
    RTOMO_CUDA_CHECK_LAUNCH(err, "iterative: clamp");
    return RTOMO_OK;
}
