/*
 * cuda_iter_kernels.cu — the CUDA kernels of the iterative engine: the
 * matched separable-footprint pair (A^T gathered per pixel, A gathered per
 * detector bin, both from the same per-pixel weights) and the vector ops
 * the solvers need.  cuda_iter.h has the contract.
 *
 * A^T (backproject_kernel): one 256-thread block per 32 x 32 tile of pixels
 * of CUDA_ITER_SLICES (8) rows, each thread 4 pixels (one column, rows 8
 * apart) of the 8 rows at once.  Projections go in groups of 16: the
 * group's footprints (iter_sf_proj) and the bins the tile can touch (from
 * its corners; at most 31 sqrt 2 + 5 of them) go into shared memory, the 8
 * rows' values of a bin side by side (two float4s), zeros outside the
 * detector.  Each pixel then computes its centre and three weights once
 * per projection and adds 3 8-float taps: the footprint work is shared by
 * the 8 rows, the sinogram is read from global memory once per tile.
 *
 * A (project_kernel): a block of 128 threads, one per bin of 128
 * consecutive bins, of 4 consecutive projections that share each line's
 * pixels where their windows overlap (project_walk_multi, below; else one
 * projection after the other as follows).  For |cos| >= |sin| the block walks
 * the image's rows y: the pixels of row y whose footprint may reach bin j
 * are those whose first bin j0 (iter_sf_weights) is j - 2, j - 1 or j,
 * i.e. whose centre lies in [j - 2.5 - t0, j + 0.5 - t0): an interval of
 * 3 / |cos| <= 3 sqrt 2 pixels, so 6 candidates around its middle cover it
 * with a margin of more than 0.8 pixel for the rounding of the middle.
 * Rows go in batches of FP_LINES: the block first computes, once per pixel, the
 * first bin and three weights exactly as A^T does (cuda_iter_center, then
 * iter_sf_weights) for every pixel any of its bins' candidates can be (at
 * most 192 per row, from the monotone middles of its first and last bin),
 * into shared memory with the pixel's 8 values; each thread then takes,
 * for each of its 6 candidates, the weight for bin j - j0 (none where j0
 * is not j - 2 .. j, as in A^T; none off the image).  The weights are
 * computed once per pixel instead of once per candidate (3 / |cos| + 6
 * times).  For |sin| > |cos| it walks columns, reading the transposed
 * packed copy so that the table's loads stay coalesced.  Batches whose
 * table misses the image are skipped by the whole block.  No atomics:
 * each output bin is one thread's sum, in a fixed order.
 */
#include "config.h"

#include "cuda_common.h"
#include "cuda_iter.h"

#define BP_TILE 32
#define BP_THREADS 256
#define BP_PIXELS (BP_TILE * BP_TILE / BP_THREADS)    /* 4 per thread */
#define BP_ROW_STEP (BP_THREADS / BP_TILE)             /* 8 */
#define BP_GROUP 16
/* Bins cached per projection: a 32-pixel tile spans at most 31 (|cos| +
 * |sin|) <= 43.9 bins between its corner centres; the footprint adds its
 * half-width on each side (3 bins j0..j0+2 from the leftmost); +1 for the
 * cache starting a bin early and +2 for rounding. */
#define BP_WIDTH 52

#define FP_BINS 128
#define FP_LINES 2
#define FP_CANDIDATES 6
/* Pixels per line in A's table: (FP_BINS - 1) sqrt 2 + 2 between the
 * block's extreme middles (floored), 2 before, the 6 candidates after. */
#define FP_WIDTH 192

/* One pixel's CUDA_ITER_SLICES (8) values. */
struct f8 {
    float4 a, b;
};

static __device__ __forceinline__ f8 zero8()
{
    f8 v;
    v.a = make_float4(0.f, 0.f, 0.f, 0.f);
    v.b = v.a;
    return v;
}

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

static __device__ __forceinline__ float comp(const f8 &v, int k)
{
    return k < 4 ? comp4(v.a, k) : comp4(v.b, k - 4);
}

/* Slice k of v (k < CUDA_ITER_SLICES). */
static __device__ __forceinline__ float &slot(f8 &v, int k)
{
    float *f = k < 4 ? &v.a.x : &v.b.x;
    return f[k & 3];
}

static __device__ __forceinline__ f8 ldg8(const float4 *__restrict__ p,
                                          size_t at)
{
    f8 v;
    v.a = __ldg(p + CUDA_ITER_PACK * at);
    v.b = __ldg(p + CUDA_ITER_PACK * at + 1);
    return v;
}

/* ------------------------------------------------------------- pack ---- */

__global__ void __launch_bounds__(256)
pack_kernel(const float *__restrict__ images, int valid, int size,
            float4 *__restrict__ packed, float4 *__restrict__ packed_t)
{
    __shared__ f8 tile[32][33];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int x0 = blockIdx.x * 32, y0 = blockIdx.y * 32;
    const size_t plane = (size_t)size * size;
#pragma unroll
    for (int q = 0; q < 4; q++) {
        const int x = x0 + tx, y = y0 + ty + 8 * q;
        f8 v = zero8();
        if (x < size && y < size) {
            const size_t at = (size_t)y * size + x;
#pragma unroll
            for (int k = 0; k < CUDA_ITER_SLICES; k++)
                if (k < valid) slot(v, k) = images[k * plane + at];
            packed[CUDA_ITER_PACK * at] = v.a;
            packed[CUDA_ITER_PACK * at + 1] = v.b;
        }
        tile[ty + 8 * q][tx] = v;
    }
    __syncthreads();
#pragma unroll
    for (int q = 0; q < 4; q++) {
        const int x = x0 + ty + 8 * q, y = y0 + tx;
        if (x < size && y < size) {
            const size_t at = (size_t)x * size + y;
            packed_t[CUDA_ITER_PACK * at] = tile[tx][ty + 8 * q].a;
            packed_t[CUDA_ITER_PACK * at + 1] = tile[tx][ty + 8 * q].b;
        }
    }
}

extern "C" rtomo_status cuda_iter_pack(const cuda_iter_launch *l,
                                       const float *images, int valid,
                                       float4 *packed, float4 *packed_t,
                                       cudaStream_t stream, rtomo_error *err)
{
    const dim3 grid((l->size + 31) / 32, (l->size + 31) / 32);
    pack_kernel<<<grid, dim3(32, 8), 0, stream>>>(images, valid, l->size,
                                                  packed, packed_t);
    RTOMO_CUDA_CHECK_LAUNCH(err, "iterative: pack");
    return RTOMO_OK;
}

/* -------------------------------------------------------------- A^T ---- */

__global__ void __launch_bounds__(BP_THREADS)
backproject_kernel(const cuda_iter_launch l, const float *__restrict__ sino,
                   int n, float *__restrict__ images)
{
    /* Slices 0-3 and 4-7 apart: each 16-byte load of a warp stays
     * contiguous (one pass through the banks per 8 lanes). */
    __shared__ float4 cache_a[BP_GROUP][BP_WIDTH], cache_b[BP_GROUP][BP_WIDTH];
    __shared__ iter_sf_proj pq[BP_GROUP];
    __shared__ int pstart[BP_GROUP];

    const int t = threadIdx.x;
    const int row0 = blockIdx.z * CUDA_ITER_SLICES;
    const int valid = min(CUDA_ITER_SLICES, n - row0);
    const int x0 = blockIdx.x * BP_TILE, y0 = blockIdx.y * BP_TILE;
    const int px = x0 + t % BP_TILE, py = y0 + t / BP_TILE;
    const float fx = (float)px;
    const size_t sino_len = (size_t)l.n_proj * l.width;
    const float *rows = sino + (size_t)row0 * sino_len;

    f8 acc[BP_PIXELS];
#pragma unroll
    for (int q = 0; q < BP_PIXELS; q++)
        acc[q] = zero8();

    for (int p0 = 0; p0 < l.n_proj; p0 += BP_GROUP) {
        const int group = min(BP_GROUP, l.n_proj - p0);
        __syncthreads();                /* the previous group is consumed */
        if (t < group) {
            const iter_sf_proj q = l.proj[p0 + t];
            pq[t] = q;
            /* The lowest first bin of the tile: its corner centres, the
             * footprint's left end, one bin of margin. */
            const float a = cuda_iter_center(q, (float)x0, (float)y0);
            const float b = cuda_iter_center(q, (float)(x0 + BP_TILE - 1), (float)y0);
            const float c = cuda_iter_center(q, (float)x0, (float)(y0 + BP_TILE - 1));
            const float d = cuda_iter_center(q, (float)(x0 + BP_TILE - 1),
                                             (float)(y0 + BP_TILE - 1));
            const float lo = fminf(fminf(a, b), fminf(c, d));
            pstart[t] = (int)floorf(lo + q.t0 + 0.5f) - 1;
        }
        __syncthreads();
        for (int e = t; e < group * BP_WIDTH; e += BP_THREADS) {
            const int pl = e / BP_WIDTH, bin = pstart[pl] + e % BP_WIDTH;
            f8 v = zero8();
            if (bin >= 0 && bin < l.width) {
                const float *at = rows + (size_t)(p0 + pl) * l.width + bin;
#pragma unroll
                for (int k = 0; k < CUDA_ITER_SLICES; k++)
                    if (k < valid) slot(v, k) = at[k * sino_len];
            }
            cache_a[pl][e % BP_WIDTH] = v.a;
            cache_b[pl][e % BP_WIDTH] = v.b;
        }
        __syncthreads();
        for (int pl = 0; pl < group; pl++) {
            const iter_sf_proj q = pq[pl];
            const int start = pstart[pl];
#pragma unroll
            for (int k = 0; k < BP_PIXELS; k++) {
                const float s = cuda_iter_center(q, fx, (float)(py + k * BP_ROW_STEP));
                float w[3];
                int i = iter_sf_weights(&q, s, w) - start;
                i = min(max(i, 0), BP_WIDTH - 3);   /* never taken: rounding guard */
                fma4(acc[k].a, w[0], cache_a[pl][i]);
                fma4(acc[k].a, w[1], cache_a[pl][i + 1]);
                fma4(acc[k].a, w[2], cache_a[pl][i + 2]);
                fma4(acc[k].b, w[0], cache_b[pl][i]);
                fma4(acc[k].b, w[1], cache_b[pl][i + 1]);
                fma4(acc[k].b, w[2], cache_b[pl][i + 2]);
            }
        }
    }

    const size_t plane = (size_t)l.size * l.size;
    float *out = images + (size_t)row0 * plane;
#pragma unroll
    for (int k = 0; k < BP_PIXELS; k++) {
        const int y = py + k * BP_ROW_STEP;
        if (px < l.size && y < l.size) {
            const size_t at = (size_t)y * l.size + px;
            for (int r = 0; r < valid; r++)
                out[r * plane + at] = comp(acc[k], r);
        }
    }
}

extern "C" rtomo_status cuda_iter_backproject(const cuda_iter_launch *l,
                                              const float *sinograms, int n,
                                              float *images,
                                              cudaStream_t stream,
                                              rtomo_error *err)
{
    const int groups = (n + CUDA_ITER_SLICES - 1) / CUDA_ITER_SLICES;
    const int tiles = (l->size + BP_TILE - 1) / BP_TILE;
    /* gridDim.z is at most 65535: launch in runs of groups. */
    for (int g = 0; g < groups; g += 65535) {
        const int run = min(groups - g, 65535);
        const size_t skip = (size_t)g * CUDA_ITER_SLICES;
        backproject_kernel<<<dim3(tiles, tiles, run), BP_THREADS, 0, stream>>>(
            *l, sinograms + skip * l->n_proj * l->width, n - (int)skip,
            images + skip * l->size * l->size);
        RTOMO_CUDA_CHECK_LAUNCH(err, "iterative: back-projection");
    }
    return RTOMO_OK;
}

/* ---------------------------------------------------------------- A ---- */

/* A's per-batch table, one entry per pixel of each line, as arrays of
 * 4-byte and 16-byte elements so that a warp's loads stay contiguous: the
 * pixel's first bin (-2^30 off the image), its three weights, its 8 values
 * (slices 0-3, 4-7). */
struct fp_table {
    int j0[FP_LINES][FP_WIDTH];
    float w[FP_LINES][3][FP_WIDTH];
    float4 va[FP_LINES][FP_WIDTH];
    float4 vb[FP_LINES][FP_WIDTH];
};

/* One line of the walk (a row for ROWS, a column otherwise): the pixel at
 * position u along it, the fixed coordinate f. */
template <bool ROWS>
static __device__ __forceinline__ float line_center(const iter_sf_proj &q,
                                                    float u, float f)
{
    return ROWS ? cuda_iter_center(q, u, f) : cuda_iter_center(q, f, u);
}

template <bool ROWS>
static __device__ __forceinline__ void project_walk(
    const cuda_iter_launch &l, const iter_sf_proj &q, int jb, int j,
    const float4 *__restrict__ lines, fp_table &tb, f8 &acc)
{
    const int size = l.size, t = threadIdx.x;
    /* The middle of the candidates of bin k at line f is fmaf(f, m1, m0(k))
     * (the walk of the commit before: rows x = (target - base + y sin) /
     * cos, columns y = (base + x cos - target) / sin).  m0 is monotone in
     * k (correctly rounded operations), so the block's lines need the
     * pixels from floor(min(mid(jb), mid(jb + FP_BINS - 1))) - 2 on: at
     * most (FP_BINS - 1) sqrt 2 + 2 + 6 < FP_WIDTH of them. */
    float inv, m1;
    if (ROWS) {
        inv = 1.f / q.cos_a;
        m1 = q.sin_a * inv;
    } else {
        inv = 1.f / q.sin_a;
        m1 = q.cos_a * inv;
    }
#define FP_M0(k) (ROWS ? (((float)((k) - 1) - q.t0) - q.base) * inv \
                       : (q.base - ((float)((k) - 1) - q.t0)) * inv)
    const float m0 = FP_M0(j);
    const float m0a = FP_M0(jb), m0b = FP_M0(jb + FP_BINS - 1);
#undef FP_M0

    for (int f0 = 0; f0 < size; f0 += FP_LINES) {
        /* Uniform: skip the batch when every line's table misses the
         * image (the start is linear in f, so the ends decide). */
        const int fl = min(f0 + FP_LINES - 1, size - 1);
        const int sa = (int)floorf(fminf(fmaf((float)f0, m1, m0a),
                                         fmaf((float)f0, m1, m0b))) - 2;
        const int sb = (int)floorf(fminf(fmaf((float)fl, m1, m0a),
                                         fmaf((float)fl, m1, m0b))) - 2;
        if ((sa >= size && sb >= size) ||
            (sa + FP_WIDTH <= 0 && sb + FP_WIDTH <= 0))
            continue;
        __syncthreads();                /* the previous batch is consumed */
        for (int e = t; e < FP_LINES * FP_WIDTH; e += FP_BINS) {
            const int r = e / FP_WIDTH, i = e % FP_WIDTH;
            const int f = f0 + r;
            const float ff = (float)f;
            const int u = (int)floorf(fminf(fmaf(ff, m1, m0a),
                                            fmaf(ff, m1, m0b))) - 2 + i;
            int j0 = -(1 << 30);
            float w[3] = {0.f, 0.f, 0.f};
            f8 v = zero8();
            if (f < size && u >= 0 && u < size) {
                /* Exactly A^T's weights of this pixel. */
                j0 = iter_sf_weights(&q, line_center<ROWS>(q, (float)u, ff), w);
                v = ldg8(lines, (size_t)f * size + u);
            }
            tb.j0[r][i] = j0;
            tb.w[r][0][i] = w[0];
            tb.w[r][1][i] = w[1];
            tb.w[r][2][i] = w[2];
            tb.va[r][i] = v.a;
            tb.vb[r][i] = v.b;
        }
        __syncthreads();
#pragma unroll
        for (int r = 0; r < FP_LINES; r++) {
            const float ff = (float)(f0 + r);
            const int s0 = (int)floorf(fminf(fmaf(ff, m1, m0a),
                                             fmaf(ff, m1, m0b))) - 2;
            int i = (int)floorf(fmaf(ff, m1, m0)) - 2 - s0;
            i = min(max(i, 0), FP_WIDTH - FP_CANDIDATES); /* never taken */
#pragma unroll
            for (int c = 0; c < FP_CANDIDATES; c++) {
                const int d = j - tb.j0[r][i + c];
                if ((unsigned)d <= 2u) {
                    const float w = tb.w[r][d][i + c];
                    if (w != 0.f) {
                        fma4(acc.a, w, tb.va[r][i + c]);
                        fma4(acc.b, w, tb.vb[r][i + c]);
                    }
                }
            }
        }
    }
}

/* ------------------------------------------- A, projections together ---- */

/*
 * Neighbouring projections' rays cross nearly the same pixels, so a block
 * takes FPM_PROJ of them over the same FP_BINS bins: per line it loads the
 * union of their pixel windows once (the 8 values, FPM_WIDTH pixels from
 * the leftmost window's start) and computes each projection's first bin
 * and weights of every pixel of it, then each thread gathers its bin of
 * every projection from there.  A pixel, its weights and the order of the
 * sums are exactly those of project_walk (the candidates of bin j are the
 * same pixels, taken in the same order), so the result is the same to the
 * bit; what changes is that the image is read once per FPM_PROJ
 * projections.  The windows' starts are linear in the line (each one's
 * leftmost middle is one bin's), so their spread is largest at the first
 * or the last line: a block whose spread there exceeds FPM_WIDTH - FP_WIDTH
 * (sparse angles, or steep ones near 45 degrees), or whose projections
 * walk different ways (rows and columns), goes one projection at a time
 * through project_walk instead.
 */
#define FPM_PROJ 4
#define FPM_WIDTH 224

struct fpm_table {
    float4 va[FPM_WIDTH];
    float4 vb[FPM_WIDTH];
    int j0[FPM_PROJ][FPM_WIDTH];
    float w[FPM_PROJ][3][FPM_WIDTH];
};

/* A projection's walk parameters (project_walk's m1, m0 of the block's
 * first and last bin, and 1 / cos or 1 / sin). */
struct fpm_proj {
    iter_sf_proj q;
    float m1, m0a, m0b, inv;
};

template <bool ROWS>
static __device__ __forceinline__ fpm_proj fpm_params(const iter_sf_proj &q,
                                                      int jb)
{
    fpm_proj m;
    m.q = q;
    m.inv = 1.f / (ROWS ? q.cos_a : q.sin_a);
    m.m1 = (ROWS ? q.sin_a : q.cos_a) * m.inv;
    m.m0a = ROWS ? (((float)(jb - 1) - q.t0) - q.base) * m.inv
                 : (q.base - ((float)(jb - 1) - q.t0)) * m.inv;
    const int jl = jb + FP_BINS - 1;
    m.m0b = ROWS ? (((float)(jl - 1) - q.t0) - q.base) * m.inv
                 : (q.base - ((float)(jl - 1) - q.t0)) * m.inv;
    return m;
}

/* project_walk's window start of projection m at line f. */
static __device__ __forceinline__ int fpm_start(const fpm_proj &m, float f)
{
    return (int)floorf(fminf(fmaf(f, m.m1, m.m0a), fmaf(f, m.m1, m.m0b))) - 2;
}

template <bool ROWS>
static __device__ void project_walk_multi(
    const cuda_iter_launch &l, const fpm_proj *mp, int np, int j,
    const float4 *__restrict__ lines, fpm_table &tb, f8 *acc)
{
    const int size = l.size, t = threadIdx.x;
    /* This thread's bin's middle per projection (project_walk's m0). */
    float m0[FPM_PROJ];
#pragma unroll
    for (int k = 0; k < FPM_PROJ; k++) {
        const iter_sf_proj &q = mp[k < np ? k : 0].q;
        const float inv = mp[k < np ? k : 0].inv;
        m0[k] = ROWS ? (((float)(j - 1) - q.t0) - q.base) * inv
                     : (q.base - ((float)(j - 1) - q.t0)) * inv;
    }
    for (int f = 0; f < size; f++) {
        const float ff = (float)f;
        int start = 1 << 30;
        for (int k = 0; k < np; k++)
            start = min(start, fpm_start(mp[k], ff));
        if (start >= size || start + FPM_WIDTH <= 0)
            continue;
        __syncthreads();                /* the previous line is consumed */
        for (int i = t; i < FPM_WIDTH; i += FP_BINS) {
            const int u = start + i;
            const bool in = u >= 0 && u < size;
            const f8 v = in ? ldg8(lines, (size_t)f * size + u) : zero8();
            tb.va[i] = v.a;
            tb.vb[i] = v.b;
            for (int k = 0; k < np; k++) {
                float w[3] = {0.f, 0.f, 0.f};
                int j0 = -(1 << 30);
                if (in)
                    j0 = iter_sf_weights(&mp[k].q, line_center<ROWS>(
                                             mp[k].q, (float)u, ff), w);
                tb.j0[k][i] = j0;
                tb.w[k][0][i] = w[0];
                tb.w[k][1][i] = w[1];
                tb.w[k][2][i] = w[2];
            }
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < FPM_PROJ; k++) {
            if (k >= np)
                break;
            int i = (int)floorf(fmaf(ff, mp[k].m1, m0[k])) - 2 - start;
            i = min(max(i, 0), FPM_WIDTH - FP_CANDIDATES); /* never taken */
#pragma unroll
            for (int c = 0; c < FP_CANDIDATES; c++) {
                const int d = j - tb.j0[k][i + c];
                if ((unsigned)d <= 2u) {
                    const float w = tb.w[k][d][i + c];
                    if (w != 0.f) {
                        fma4(acc[k].a, w, tb.va[i + c]);
                        fma4(acc[k].b, w, tb.vb[i + c]);
                    }
                }
            }
        }
    }
}

/* 1 when projections mp[0..np) may share windows over lines 0..size-1:
 * their spread at either end leaves FP_WIDTH pixels each, with a pixel
 * to spare for the floors. */
static __device__ __forceinline__ bool fpm_shared(const fpm_proj *mp, int np,
                                                  int size)
{
    const float ends[2] = {0.f, (float)(size - 1)};
    for (int e = 0; e < 2; e++) {
        int lo = 1 << 30, hi = -(1 << 30);
        for (int k = 0; k < np; k++) {
            const int s = fpm_start(mp[k], ends[e]);
            lo = min(lo, s);
            hi = max(hi, s);
        }
        if (hi - lo > FPM_WIDTH - FP_WIDTH - 2)
            return false;
    }
    return true;
}

union fp_shared {
    fp_table one;
    fpm_table multi;
};

/* One block: FP_BINS consecutive bins of FPM_PROJ consecutive projections,
 * one thread per bin.  Together (project_walk_multi) where their windows
 * overlap enough and they walk the same way; else one projection after
 * the other (project_walk: per batch of FP_LINES lines the block computes
 * every pixel's first bin and three weights once, exactly as A^T does,
 * into shared memory with its 8 values, then each bin thread picks its 6
 * candidates per line from there; lines outside the image's reach are
 * skipped for the whole block). */
__global__ void __launch_bounds__(FP_BINS)
project_kernel(const cuda_iter_launch l, const float4 *__restrict__ packed,
               const float4 *__restrict__ packed_t, int valid,
               float *__restrict__ sino)
{
    __shared__ fp_shared sh;
    __shared__ fpm_proj mp[FPM_PROJ];
    const int p0 = blockIdx.y * FPM_PROJ, jb = blockIdx.x * FP_BINS;
    const int np = min(FPM_PROJ, l.n_proj - p0);
    const int j = jb + threadIdx.x;
    const bool rows0 = fabsf(l.proj[p0].cos_a) >= fabsf(l.proj[p0].sin_a);
    bool same = true;
    for (int k = 1; k < np; k++)
        same &= (fabsf(l.proj[p0 + k].cos_a) >= fabsf(l.proj[p0 + k].sin_a))
                == rows0;
    if (threadIdx.x < np)
        mp[threadIdx.x] = rows0 ? fpm_params<true>(l.proj[p0 + threadIdx.x], jb)
                                : fpm_params<false>(l.proj[p0 + threadIdx.x],
                                                    jb);
    __syncthreads();
    f8 acc[FPM_PROJ];
#pragma unroll
    for (int k = 0; k < FPM_PROJ; k++)
        acc[k] = zero8();

    if (!l.single && same && np > 1 && fpm_shared(mp, np, l.size)) {
        if (rows0)
            project_walk_multi<true>(l, mp, np, j, packed, sh.multi, acc);
        else
            project_walk_multi<false>(l, mp, np, j, packed_t, sh.multi, acc);
    } else {
        /* Unrolled, so that acc[k] stays in registers. */
#pragma unroll
        for (int k = 0; k < FPM_PROJ; k++) {
            if (k >= np)
                break;
            const iter_sf_proj q = l.proj[p0 + k];
            if (k > 0)
                __syncthreads();        /* the table is free again */
            if (fabsf(q.cos_a) >= fabsf(q.sin_a))
                project_walk<true>(l, q, jb, j, packed, sh.one, acc[k]);
            else
                project_walk<false>(l, q, jb, j, packed_t, sh.one, acc[k]);
        }
    }

    if (j >= l.width)
        return;
    const size_t sino_len = (size_t)l.n_proj * l.width;
#pragma unroll
    for (int k = 0; k < FPM_PROJ; k++) {
        if (k >= np)
            break;
        float *out = sino + (size_t)(p0 + k) * l.width + j;
        for (int r = 0; r < valid; r++)
            out[r * sino_len] = comp(acc[k], r);
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
                    (l->n_proj + FPM_PROJ - 1) / FPM_PROJ);
    project_kernel<<<grid, FP_BINS, 0, stream>>>(*l, packed, packed_t, valid,
                                                 sinograms);
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
