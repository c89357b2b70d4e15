/*
 * cuda_fbp_device.h — device-side pieces shared by the back-projection
 * kernel families and the packing kernels of the CUDA FBP backend: the texel
 * formats (1, 2 or 4 sinograms per texel, float or half), small vector
 * arithmetic over the slices of a texel, the thread-to-pixel mappings of the
 * paper (4x4 squares along a Z-order curve), staging of per-projection
 * constants in shared memory, output stores, and the circular field of
 * view's pixel and tile tests (fbp_fov.h).  CUDA C++ only.
 */
#ifndef RTOMO_CUDA_FBP_DEVICE_H
#define RTOMO_CUDA_FBP_DEVICE_H

#include <cuda_fp16.h>

#include "cuda_fbp.h"
#include "fbp_fov.h"

/* ------------------------------------------------------- slice vectors ---- */

/* The float vector holding one value per slice of a texel. */
template <int S> struct slice_vec;
template <> struct slice_vec<1> { typedef float type; };
template <> struct slice_vec<2> { typedef float2 type; };
template <> struct slice_vec<4> { typedef float4 type; };

__device__ __forceinline__ float vzero(float) { return 0.f; }
__device__ __forceinline__ float2 vzero(float2) { return make_float2(0.f, 0.f); }
__device__ __forceinline__ float4 vzero(float4) { return make_float4(0.f, 0.f, 0.f, 0.f); }

__device__ __forceinline__ void vadd(float &a, float b) { a += b; }
__device__ __forceinline__ void vadd(float2 &a, float2 b) { a.x += b.x; a.y += b.y; }
__device__ __forceinline__ void vadd(float4 &a, float4 b)
{
    a.x += b.x; a.y += b.y; a.z += b.z; a.w += b.w;
}

/* a += f * b */
__device__ __forceinline__ void vfma(float &a, float f, float b) { a = fmaf(f, b, a); }
__device__ __forceinline__ void vfma(float2 &a, float f, float2 b)
{
    a.x = fmaf(f, b.x, a.x); a.y = fmaf(f, b.y, a.y);
}
__device__ __forceinline__ void vfma(float4 &a, float f, float4 b)
{
    a.x = fmaf(f, b.x, a.x); a.y = fmaf(f, b.y, a.y);
    a.z = fmaf(f, b.z, a.z); a.w = fmaf(f, b.w, a.w);
}

__device__ __forceinline__ float vsub(float a, float b) { return a - b; }
__device__ __forceinline__ float2 vsub(float2 a, float2 b) { return make_float2(a.x - b.x, a.y - b.y); }
__device__ __forceinline__ float4 vsub(float4 a, float4 b)
{
    return make_float4(a.x - b.x, a.y - b.y, a.z - b.z, a.w - b.w);
}

__device__ __forceinline__ float vget(float v, int) { return v; }
__device__ __forceinline__ float vget(float2 v, int i) { return i ? v.y : v.x; }
__device__ __forceinline__ float vget(float4 v, int i)
{
    return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

__device__ __forceinline__ void vset(float &v, int, float x) { v = x; }
__device__ __forceinline__ void vset(float2 &v, int s, float x) { (s ? v.y : v.x) = x; }
__device__ __forceinline__ void vset(float4 &v, int s, float x)
{
    (s == 0 ? v.x : s == 1 ? v.y : s == 2 ? v.z : v.w) = x;
}

__device__ __forceinline__ float vshfl_xor(float v, int m)
{
    return __shfl_xor_sync(0xffffffffu, v, m);
}
__device__ __forceinline__ float2 vshfl_xor(float2 v, int m)
{
    return make_float2(vshfl_xor(v.x, m), vshfl_xor(v.y, m));
}
__device__ __forceinline__ float4 vshfl_xor(float4 v, int m)
{
    return make_float4(vshfl_xor(v.x, m), vshfl_xor(v.y, m),
                       vshfl_xor(v.z, m), vshfl_xor(v.w, m));
}

/* --------------------------------------------------------- texel types ---- */

struct __align__(8) half4_storage { __half2 lo, hi; };

/* Storage of one texel with S slices; HALF selects float16.  raw() reads a
 * texel as stored, widen() turns it into floats (exactly), load() does
 * both; zero() is the stored zero; pack() stores floats scaled by `scale`. */
template <int S, bool HALF> struct texel;

template <> struct texel<1, false> {
    typedef float storage;
    static __device__ __forceinline__ storage raw(const storage *p) { return __ldg(p); }
    static __device__ __forceinline__ float widen(storage v) { return v; }
    static __device__ __forceinline__ float load(const storage *p) { return __ldg(p); }
    static __device__ __forceinline__ storage zero() { return 0.f; }
    static __device__ __forceinline__ storage pack(float v, float) { return v; }
};
template <> struct texel<2, false> {
    typedef float2 storage;
    static __device__ __forceinline__ storage raw(const storage *p) { return __ldg(p); }
    static __device__ __forceinline__ float2 widen(storage v) { return v; }
    static __device__ __forceinline__ float2 load(const storage *p) { return __ldg(p); }
    static __device__ __forceinline__ storage zero() { return make_float2(0.f, 0.f); }
    static __device__ __forceinline__ storage pack(float2 v, float) { return v; }
};
template <> struct texel<4, false> {
    typedef float4 storage;
    static __device__ __forceinline__ storage raw(const storage *p) { return __ldg(p); }
    static __device__ __forceinline__ float4 widen(storage v) { return v; }
    static __device__ __forceinline__ float4 load(const storage *p) { return __ldg(p); }
    static __device__ __forceinline__ storage zero() { return make_float4(0.f, 0.f, 0.f, 0.f); }
    static __device__ __forceinline__ storage pack(float4 v, float) { return v; }
};
template <> struct texel<1, true> {
    typedef __half storage;
    static __device__ __forceinline__ storage raw(const storage *p) { return __ldg(p); }
    static __device__ __forceinline__ float widen(storage v) { return __half2float(v); }
    static __device__ __forceinline__ float load(const storage *p) { return widen(raw(p)); }
    static __device__ __forceinline__ storage zero() { return __ushort_as_half(0); }
    static __device__ __forceinline__ storage pack(float v, float s)
    {
        return __float2half_rn(v * s);
    }
};
template <> struct texel<2, true> {
    typedef __half2 storage;
    static __device__ __forceinline__ storage raw(const storage *p) { return __ldg(p); }
    static __device__ __forceinline__ float2 widen(storage v) { return __half22float2(v); }
    static __device__ __forceinline__ float2 load(const storage *p) { return widen(raw(p)); }
    static __device__ __forceinline__ storage zero() { return __halves2half2(zero1(), zero1()); }
    static __device__ __forceinline__ storage pack(float2 v, float s)
    {
        return __floats2half2_rn(v.x * s, v.y * s);
    }
private:
    static __device__ __forceinline__ __half zero1() { return __ushort_as_half(0); }
};
template <> struct texel<4, true> {
    typedef half4_storage storage;
    static __device__ __forceinline__ storage raw(const storage *p)
    {
        const uint2 bits = __ldg(reinterpret_cast<const uint2 *>(p));
        return *reinterpret_cast<const half4_storage *>(&bits);
    }
    static __device__ __forceinline__ float4 widen(storage v)
    {
        const float2 lo = __half22float2(v.lo), hi = __half22float2(v.hi);
        return make_float4(lo.x, lo.y, hi.x, hi.y);
    }
    static __device__ __forceinline__ float4 load(const storage *p) { return widen(raw(p)); }
    static __device__ __forceinline__ storage zero()
    {
        const uint2 bits = make_uint2(0u, 0u);
        return *reinterpret_cast<const half4_storage *>(&bits);
    }
    static __device__ __forceinline__ storage pack(float4 v, float s)
    {
        half4_storage h;
        h.lo = __floats2half2_rn(v.x * s, v.y * s);
        h.hi = __floats2half2_rn(v.z * s, v.w * s);
        return h;
    }
};

/* Texture fetch returning one float per slice (half textures are promoted
 * to float by the texture unit). */
template <int S>
__device__ __forceinline__ typename slice_vec<S>::type
fetch(cudaTextureObject_t tex, float x, float y)
{
    return tex2D<typename slice_vec<S>::type>(tex, x, y);
}

/* -------------------------------------------------------- half scaling ---- */

/* Half-precision packing multiplies a group by a power of two that brings
 * its largest magnitude near 2^14: filtered values carry the pi/n_proj
 * weight and would otherwise sit among float16's subnormals (or overflow
 * for raw, unnormalised counts).  The back-projection divides it out.  The
 * same function of the same bits gives the same factor in both kernels. */
__device__ __forceinline__ float half_pack_scale(const unsigned *absmax, int g)
{
    if (!absmax)
        return 1.f;
    float m = __uint_as_float(absmax[g]);
    if (!(m > 0.f) || !isfinite(m))
        return 1.f;
    return exp2f(floorf(log2f(16384.f / m)));
}

/* ------------------------------------------------------ pixel mapping ---- */

/* Column and row of thread `z` (0..15) within a 4x4 square along the
 * Z-order curve: neighbouring threads read neighbouring bins. */
__device__ __forceinline__ int zorder_x(int z) { return (z & 1) | ((z >> 1) & 2); }
__device__ __forceinline__ int zorder_y(int z) { return ((z >> 1) & 1) | ((z >> 2) & 2); }

/*
 * Mapping of 256 threads onto an N x N tile (N = 32 or 64) used by the ALU
 * and hybrid kernels: each half-warp covers one 4x4 square (Z-order), the 16
 * squares of a block lie in rows of N/4 squares, and each thread then walks
 * down the tile in PIXELS steps of ROW_STEP rows.
 */
template <int N> struct tile_map {
    static constexpr int SQUARES_PER_ROW = N / 4;
    static constexpr int ROW_STEP = 4 * (16 / SQUARES_PER_ROW);
    static constexpr int PIXELS = N / ROW_STEP;
    static __device__ __forceinline__ int col(int t)
    {
        return 4 * ((t >> 4) % SQUARES_PER_ROW) + zorder_x(t & 15);
    }
    static __device__ __forceinline__ int row(int t)
    {
        return 4 * ((t >> 4) / SQUARES_PER_ROW) + zorder_y(t & 15);
    }
};

/* ---------------------------------------------------- output stores ---- */

/* Floats between one slice's image and the next's in l.out. */
__device__ __forceinline__ size_t image_stride(const cuda_fbp_launch &l)
{
    return (size_t)l.roi_w * (size_t)l.roi_h;
}

/* Pixel (x, y) of the first of group g's `slices` images in l.out (the
 * others follow image_stride apart), or NULL outside the ROI. */
__device__ __forceinline__ float *pixel_address(const cuda_fbp_launch &l, int g,
                                                int slices, int x, int y)
{
    if (x >= l.roi_w || y >= l.roi_h)
        return NULL;
    return l.out + (size_t)g * slices * image_stride(l) + (size_t)y * l.roi_w + x;
}

/* ------------------------------------------------- field of view ---- */

/* ROI pixel (x, y) of launch l lies in the circular field of view (always
 * without one). */
__device__ __forceinline__ bool fov_inside(const cuda_fbp_launch &l, int x,
                                           int y)
{
    return fbp_fov_inside(l.fov_limit, l.fov_span, l.roi_x + x, l.roi_y + y);
}

/*
 * At a kernel's entry, for the block's n x n tile at ROI (x0, y0) of group
 * g (S slices): true when the whole tile lies outside the field of view,
 * after the block has written 0 to the tile's ROI pixels if the launch
 * overwrites (nothing when it adds: what is there stays, 0 from the first
 * launch).  The block must then return at once: the test is uniform over
 * the block, so no barrier is left waiting.  Pixels of boundary tiles are
 * zeroed one by one at their store (store_pixel, finish_pixel).
 */
template <int S>
__device__ __forceinline__ bool fov_skip_tile(const cuda_fbp_launch &l, int g,
                                              int x0, int y0, int n)
{
    if (!fbp_fov_rect_outside(l.fov_limit, l.fov_span, l.roi_x + x0,
                              l.roi_y + y0, l.roi_x + x0 + n - 1,
                              l.roi_y + y0 + n - 1))
        return false;
    if (l.accumulate != CUDA_FBP_OVERWRITE)
        return true;
    const int threads = blockDim.x * blockDim.y;
    for (int i = threadIdx.y * blockDim.x + threadIdx.x; i < n * n;
         i += threads) {
        float *o = pixel_address(l, g, S, x0 + i % n, y0 + i / n);
        if (o)
#pragma unroll
            for (int s = 0; s < S; s++)
                o[s * image_stride(l)] = 0.f;
    }
    return true;
}

/* Outside the field of view: 0 when the launch overwrites, else nothing. */
__device__ __forceinline__ void fov_clear(const cuda_fbp_launch &l, float *o,
                                          int slices)
{
    if (l.accumulate != CUDA_FBP_OVERWRITE)
        return;
    for (int s = 0; s < slices; s++)
        o[s * image_stride(l)] = 0.f;
}

/* *o += v in the L2 cache, without returning the old value, so that the
 * thread goes on at once (CUDA_FBP_ACCUMULATE_REDUCE).  Written as PTX's
 * red: atomicAdd whose result is unused becomes PTX's atom, which leaves
 * it to the assembler to see that nothing waits for it. */
__device__ __forceinline__ void reduce_add(float *o, float v)
{
    asm volatile("red.global.add.f32 [%0], %1;" :: "l"(o), "f"(v) : "memory");
}

/* Write v (one value per slice) to pixel (x, y) of the ROI images of group
 * g, when inside the ROI; adds to what is there for later projection
 * chunks.  `unscale` undoes the half packing factor. */
template <typename V>
__device__ __forceinline__ void store_pixel(const cuda_fbp_launch &l, int g,
                                            int x, int y, V v, float unscale)
{
    const int slices = sizeof(V) / sizeof(float);
    float *o = pixel_address(l, g, slices, x, y);
    if (!o)
        return;
    if (!fov_inside(l, x, y)) {
        fov_clear(l, o, slices);
        return;
    }
#pragma unroll
    for (int s = 0; s < slices; s++) {
        float value = vget(v, s) * unscale;
        if (l.accumulate == CUDA_FBP_ACCUMULATE_REDUCE)
            reduce_add(&o[s * image_stride(l)], value);
        else if (l.accumulate == CUDA_FBP_ACCUMULATE_LOAD)
            o[s * image_stride(l)] = value + o[s * image_stride(l)];
        else
            o[s * image_stride(l)] = value;
    }
}

/*
 * The tile kernels (ALU, hybrid) start each pixel's sums from what its
 * images hold, times `scale` (the half packing factor, a power of two, so
 * exactly), instead of adding it at the end: the loads then leave at the
 * block's start and their latency hides behind its projections, where at
 * the end every block stalled on them.  This is what a chunk of resident
 * slices pays whatever its size (streaming adds chunks into 2048 slices:
 * runs 49 and 51 of docs/PERFORMANCE.md).  Streaming no longer loads at
 * all (CUDA_FBP_ACCUMULATE_REDUCE, cuda_fbp.h); the after-the-scan path's
 * later texture chunks still do.  Zero when the launch does not load
 * (overwrites or reduces) or the pixel is outside the ROI.
 */
template <typename V>
__device__ __forceinline__ V start_pixel(const cuda_fbp_launch &l, int g,
                                         int x, int y, float scale)
{
    const int slices = sizeof(V) / sizeof(float);
    const float *o = l.accumulate == CUDA_FBP_ACCUMULATE_LOAD
                         ? pixel_address(l, g, slices, x, y) : NULL;
    V v = vzero(V());
    if (!o || !fov_inside(l, x, y))
        return v;
#pragma unroll
    for (int s = 0; s < slices; s++)
        vset(v, s, o[s * image_stride(l)] * scale);
    return v;
}

/* Write the sums v of a pixel started by start_pixel, times `unscale`
 * (added to the stored value when the launch reduces). */
template <typename V>
__device__ __forceinline__ void finish_pixel(const cuda_fbp_launch &l, int g,
                                             int x, int y, V v, float unscale)
{
    const int slices = sizeof(V) / sizeof(float);
    float *o = pixel_address(l, g, slices, x, y);
    if (!o)
        return;
    if (!fov_inside(l, x, y)) {
        fov_clear(l, o, slices);
        return;
    }
#pragma unroll
    for (int s = 0; s < slices; s++) {
        if (l.accumulate == CUDA_FBP_ACCUMULATE_REDUCE)
            reduce_add(&o[s * image_stride(l)], vget(v, s) * unscale);
        else
            o[s * image_stride(l)] = vget(v, s) * unscale;
    }
}

/* ------------------------------------------------ projection constants ---- */

/* Constants of projection p for a tile whose first pixel lies at (fx0, fy0)
 * from the slice centre: {cos, sin, base + offset, 0}, where pixel (lx, ly)
 * of the tile sees bin  base + lx*cos - ly*sin.  Tile-relative positions
 * keep the float sums small, hence exact to a fraction of a bin. */
__device__ __forceinline__ float4 tile_constants(const float4 *proj, int p,
                                                 float fx0, float fy0,
                                                 float offset)
{
    float4 k = __ldg(&proj[p]);
    return make_float4(k.x, k.y, k.z + fx0 * k.x - fy0 * k.y + offset, 0.f);
}

/* SM this block runs on. */
__device__ __forceinline__ unsigned current_smid(void)
{
    unsigned id;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
    return id;
}

#endif
