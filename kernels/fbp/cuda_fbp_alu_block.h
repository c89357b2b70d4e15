/*
 * cuda_fbp_alu_block.h — the ALU back-projection of one N x N tile by one
 * 256-thread block (Algorithm 2 of Chilingaryan et al., SBAC-PAD 2018), as a
 * device template shared by the ALU kernel (bp_alu.cu) and the ALU path of
 * the hybrid kernel (bp_hybrid.cu).  CUDA C++ only.
 *
 * Projections are processed in groups of 16.  For each group the block
 * first computes, per projection, the first bin its tile can touch (from the
 * tile's corners) and keeps that cache offset in shared memory; then it
 * copies the bins the tile needs (at most (N-1)*sqrt(2) + 2 of them, plus a
 * margin) from the packed sinograms into shared memory, as float.  For
 * linear interpolation each cache entry holds the pair (q[i], q[i+1]-q[i])
 * so that one load and one FMA per slice interpolate.  Each thread then
 * walks its pixels (tile_map<N>) and interpolates on the cores.
 *
 * With nearest interpolation of half texels the cache may also be kept as
 * stored, float16 (STORED): a float cache makes this path bound by its
 * shared-memory loads (one 16-byte load a sample of 4 slices: the L1 at
 * 94% and instruction issue at 61% on an H100, run 71 of
 * docs/PERFORMANCE.md), a half cache by instruction issue (an exact
 * conversion a slice: L1 57%, issue 85%).  Blocks of both kinds on one SM
 * use both (bp_hybrid.cu mixes them); the sums are the same to the bit.
 *
 * The bin index comes from one directed-rounding add: floor(h) + 1.5*2^23
 * is exactly representable and its low mantissa bits are the index, so no
 * conversion instruction is needed (conversions run at quarter rate).
 */
#ifndef RTOMO_CUDA_FBP_ALU_BLOCK_H
#define RTOMO_CUDA_FBP_ALU_BLOCK_H

#include <type_traits>

#include "cuda_fbp_device.h"

#define ALU_MAGIC 12582912.0f       /* 1.5 * 2^23 */
#define ALU_MAGIC_BITS 0x4B400000   /* its bit pattern */

/* A linear-interpolation cache entry: value and forward difference. */
template <typename V> struct lerp_entry { V q, d; };

template <int S, bool HALF, int N, bool LINEAR, bool STORED = false>
struct alu_block {
    static_assert(!STORED || (HALF && !LINEAR),
                  "a stored cache is for nearest interpolation of half texels");
    typedef typename slice_vec<S>::type V;
    typedef texel<S, HALF> T;
    typedef typename T::storage storage;
    typedef tile_map<N> map;
    typedef typename std::conditional<
        LINEAR, lerp_entry<V>,
        typename std::conditional<STORED, storage, V>::type>::type entry;

    static constexpr int GROUP = 16;
    /* Bins cached per projection: the tile spans at most (N-1)*sqrt(2)
     * bins; +1 for the right neighbour, +1 for the cache starting one bin
     * early and +2 for rounding in the pixel positions. */
    static constexpr int WIDTH = ((N - 1) * 1449 + 1023) / 1024 + 4;
    static constexpr size_t CACHE_BYTES = sizeof(entry) * GROUP * WIDTH;
    static constexpr size_t SMEM_BYTES = CACHE_BYTES + sizeof(float4) * GROUP;

    /* Constants of projection p0 + t for this tile: {cos, sin, first bin
     * relative to the cache start, cache start}.  Projections past the
     * launch get a cache start far left of the detector (all zeros). */
    static __device__ __forceinline__ float4
    group_constants(const cuda_fbp_launch &l, int p, float fx0, float fy0)
    {
        if (p >= l.n_proj)
            return make_float4(0.f, 0.f, 1.f, -4.f * WIDTH);
        /* Nearest reads bin floor(s + 0.5): fold the 0.5 in here. */
        float4 k = tile_constants(l.proj, p, fx0, fy0, LINEAR ? 0.f : 0.5f);
        const float lowest = k.z + fminf(0.f, (float)(N - 1) * k.x) +
                             fminf(0.f, -(float)(N - 1) * k.y);
        const float start = floorf(lowest) - 1.f;
        k.z -= start;
        k.w = start;
        return k;
    }

    /* Copy the bins of the group's projections into the cache. */
    static __device__ __forceinline__ void
    fill_cache(const cuda_fbp_launch &l, const char *data, int p0,
               entry (*cache)[WIDTH], const float4 *pc)
    {
        for (int e = threadIdx.x; e < GROUP * WIDTH; e += CUDA_FBP_BLOCK_THREADS) {
            const int pl = e / WIDTH, b = e - pl * WIDTH;
            const int bin = (int)pc[pl].w + b;
            const storage *row =
                reinterpret_cast<const storage *>(data + (size_t)(p0 + pl) * l.pitch);
            const bool live = p0 + pl < l.n_proj;
            const bool in0 = live && bin >= 0 && bin < l.det_width;
            if constexpr (STORED) {
                cache[pl][b] = in0 ? T::raw(row + bin) : T::zero();
            } else {
                const V v0 = in0 ? T::load(row + bin) : vzero(V());
                if constexpr (LINEAR) {
                    const V v1 = live && bin + 1 >= 0 && bin + 1 < l.det_width
                                     ? T::load(row + bin + 1) : vzero(V());
                    cache[pl][b].q = v0;
                    cache[pl][b].d = vsub(v1, v0);
                } else {
                    cache[pl][b] = v0;
                }
            }
        }
    }

    /* acc += the interpolated cache value at position h. */
    static __device__ __forceinline__ void sample(V &acc, const entry *row,
                                                  float h)
    {
        const float t = __fadd_rd(h, ALU_MAGIC);       /* floor(h) + M */
        const int i = __float_as_int(t) - ALU_MAGIC_BITS;
        if constexpr (LINEAR) {
            const float f = h - (t - ALU_MAGIC);       /* in [0, 1) */
            const entry e = row[i];
            vadd(acc, e.q);
            vfma(acc, f, e.d);
        } else if constexpr (STORED) {
            vadd(acc, T::widen(row[i]));
        } else {
            vadd(acc, row[i]);
        }
    }

    /* Reconstruct the tile whose first pixel is (x0, y0) of the ROI into
     * group g's images.  smem holds SMEM_BYTES, 16-byte aligned. */
    static __device__ __forceinline__ void run(const cuda_fbp_launch &l,
                                               char *smem, int g, int x0,
                                               int y0)
    {
        entry (*cache)[WIDTH] = reinterpret_cast<entry (*)[WIDTH]>(smem);
        float4 *pc = reinterpret_cast<float4 *>(smem + CACHE_BYTES);
        const int t = threadIdx.x;
        const float lx = (float)map::col(t), ly = (float)map::row(t);
        const float fx0 = (float)(l.roi_x + x0) - l.center;
        const float fy0 = (float)(l.roi_y + y0) - l.center;
        const char *data = static_cast<const char *>(l.data[g]);

        const float scale = half_pack_scale(l.absmax, g);
        const int px = x0 + map::col(t), py = y0 + map::row(t);
        V acc[map::PIXELS];
#pragma unroll
        for (int q = 0; q < map::PIXELS; q++)
            acc[q] = start_pixel<V>(l, g, px, py + q * map::ROW_STEP, scale);

        for (int p0 = 0; p0 < l.n_proj; p0 += GROUP) {
            __syncthreads();            /* the previous group is consumed */
            if (t < GROUP)
                pc[t] = group_constants(l, p0 + t, fx0, fy0);
            __syncthreads();
            fill_cache(l, data, p0, cache, pc);
            __syncthreads();
#pragma unroll 2
            for (int pl = 0; pl < GROUP; pl++) {
                const float4 k = pc[pl];
                float h = k.z + lx * k.x - ly * k.y;
                const float step = (float)map::ROW_STEP * k.y;
                const entry *row = cache[pl];
#pragma unroll
                for (int q = 0; q < map::PIXELS; q++) {
                    sample(acc[q], row, h);
                    h -= step;
                }
            }
        }

#pragma unroll
        for (int q = 0; q < map::PIXELS; q++)
            finish_pixel(l, g, px, py + q * map::ROW_STEP, acc[q], 1.f / scale);
    }
};

/* Whether ALU ticket m keeps its cache as stored: a fraction h of any run of
 * consecutive tickets, floor((m+1) h) > floor(m h), h in 1/65536. */
__device__ __forceinline__ bool alu_ticket_stored(unsigned long long m,
                                                  unsigned stored_q16)
{
    return (((m + 1) * stored_q16) >> 16) > ((m * stored_q16) >> 16);
}

/* The launch's stored-cache share (cfg.stored_ratio, checked where the
 * configuration is resolved) in 1/65536; 0 where no stored cache exists
 * (only half nearest launches have one). */
static inline unsigned alu_stored_share(const cuda_fbp_launch *l)
{
    const bool can = l->cfg.format.precision == RTOMO_PRECISION_HALF &&
                     l->interp != RTOMO_INTERP_LINEAR;
    return can ? (unsigned)(l->cfg.stored_ratio * 65536.0 + 0.5) : 0u;
}

/* Blocks per SM to ask of the register allocator: keep 4 resident while
 * the accumulators are few, fewer when a thread holds 32 or more. */
template <int S, int N> struct alu_occupancy {
    static constexpr int ACCUMULATORS = S * tile_map<N>::PIXELS;
    static constexpr int BLOCKS = ACCUMULATORS <= 16 ? 4 : ACCUMULATORS <= 32 ? 3 : 2;
};

#endif
