/*
 * cuda_sbdx_device.h — small __host__ __device__ helpers shared by the SBDX
 * kernel families (CUDA C++ only).  Each helper has one meaning on both
 * sides, so that a kernel's thread body runs unchanged in its host runner
 * (see cuda_sbdx.h): read-only loads, atomic adds, sample conversion, and the
 * grid-stride bookkeeping of a kernel launch.
 */
#ifndef RTOMO_CUDA_SBDX_DEVICE_H
#define RTOMO_CUDA_SBDX_DEVICE_H

#include <cuda_runtime.h>

#include "cuda_sbdx.h"

#define SBDX_HD __host__ __device__ __forceinline__

/* Loop unrolling hints for the device compiler only (the host compiler
 * would warn about an unknown pragma). */
#ifdef __CUDA_ARCH__
#define SBDX_UNROLL _Pragma("unroll")
#define SBDX_UNROLL_4 _Pragma("unroll 4")
#define SBDX_UNROLL_2 _Pragma("unroll 2")
#else
#define SBDX_UNROLL
#define SBDX_UNROLL_4
#define SBDX_UNROLL_2
#endif

/* A load through the read-only data path where there is one. */
template <typename T> SBDX_HD T sbdx_ldg(const T *p)
{
#ifdef __CUDA_ARCH__
    return __ldg(p);
#else
    return *p;
#endif
}

/* An add that may race with other threads on the device. */
SBDX_HD void sbdx_atomic_add(float *p, float v)
{
#ifdef __CUDA_ARCH__
    atomicAdd(p, v);
#else
    *p += v;
#endif
}

/* floor(a / b) and a - b floor(a / b) for b > 0. */
SBDX_HD int sbdx_div_floor(int a, int b)
{
    int q = a / b;
    return (a % b != 0 && a < 0) ? q - 1 : q;
}

SBDX_HD int sbdx_mod_floor(int a, int b)
{
    int r = a % b;
    return r < 0 ? r + b : r;
}

/* Sample i of a frame of any sample type, as float. */
SBDX_HD float sbdx_sample(const void *frame, rtomo_dtype dtype, size_t i)
{
    switch (dtype) {
    case RTOMO_DTYPE_U8:
        return (float)sbdx_ldg((const unsigned char *)frame + i);
    case RTOMO_DTYPE_U16:
        return (float)sbdx_ldg((const unsigned short *)frame + i);
    default:
        return sbdx_ldg((const float *)frame + i);
    }
}

/* Blocks of `threads` covering n items (at least 1: grids may not be 0). */
static inline unsigned sbdx_blocks_for(size_t n, int threads)
{
    size_t b = (n + (size_t)threads - 1) / (size_t)threads;
    return b ? (unsigned)b : 1u;
}

#endif
