/*
 * cuda_iter.h — the CUDA iterative backend's kernels (cuda_iter_kernels.cu),
 * as C-callable launchers for the backend (cuda_iter_backend.cu).  Private
 * to kernels/iterative/.
 *
 * The matched pair is iter_internal.h's separable footprint: both kernels
 * compute a pixel's centre s_c with cuda_iter_center() (below, the same
 * float operations as the CPU backend, no contraction into FMAs) and its
 * three bin weights with iter_sf_weights(), so that every (pixel, bin)
 * weight A^T uses is bit for bit the one A uses; A^T is A's transpose up
 * to the order of float sums.
 *
 * Layouts (device memory): images are rows of slice_size^2 floats (row-
 * major, y then x), sinograms rows of n_proj x det_width floats
 * (projection-major), as iter_vec holds them.  A works from a packed copy
 * of up to CUDA_ITER_A_SLICES rows: each pixel's values side by side (8,
 * or 16 where there are more than 8 rows; 16-byte loads), in the image's
 * order and transposed.
 */
#ifndef RTOMO_CUDA_ITER_H
#define RTOMO_CUDA_ITER_H

#include <cuda_runtime.h>

#include "iter_internal.h"

/* Rows (slices) one thread of A^T works on together (8 in a last group
 * of at most 8): they share the footprint computation. */
#define CUDA_ITER_SLICES 16
/* Rows one thread of A works on together (8 in a call of at most 8), and
 * the float4s per pixel of its packed copies. */
#define CUDA_ITER_A_SLICES 16
#define CUDA_ITER_A_PACK (CUDA_ITER_A_SLICES / 4)

#ifdef __cplusplus
extern "C" {
#endif

/* What the kernels need of a plan. */
typedef struct cuda_iter_launch {
    int size;                   /* slice_size */
    int width;                  /* det_width */
    int n_proj;
    const iter_sf_proj *proj;   /* device copy of it->proj, n_proj */
    int single;                 /* A one projection per block (the kernel
                                   before neighbouring projections shared
                                   their pixels; RTOMO_CUDA_ITER_SINGLE=1,
                                   for measurements) */
} cuda_iter_launch;

/* Pack rows[0..valid-1] (valid <= CUDA_ITER_A_SLICES; the others read as
 * zeros) of images (each size^2 floats, consecutive) into packed and
 * packed_t (size^2 x 2 float4 each where valid <= 8, else x
 * CUDA_ITER_A_PACK: [y][x] and [x][y]). */
rtomo_status cuda_iter_pack(const cuda_iter_launch *l, const float *images,
                            int valid, float4 *packed, float4 *packed_t,
                            cudaStream_t stream, rtomo_error *err);

/* sinograms rows [0, valid) = A (the packed rows). */
rtomo_status cuda_iter_project(const cuda_iter_launch *l,
                               const float4 *packed, const float4 *packed_t,
                               int valid, float *sinograms,
                               cudaStream_t stream, rtomo_error *err);

/* sinograms rows [0, n) = the unmatched ray-driven projection of images
 * rows [0, n) (cuda_iter_ray.cu); synchronises the stream. */
rtomo_status cuda_iter_ray_project(const cuda_iter_launch *l,
                                   const float *images, int n,
                                   float *sinograms, cudaStream_t stream,
                                   rtomo_error *err);

/* images rows [0, n) = A^T sinograms rows [0, n). */
rtomo_status cuda_iter_backproject(const cuda_iter_launch *l,
                                   const float *sinograms, int n,
                                   float *images, cudaStream_t stream,
                                   rtomo_error *err);

/* Per row i of n rows of len floats: partial sums of a_i . b_i in double,
 * blocks per row each (cuda_iter_dot_blocks(len)), into partial[i *
 * blocks + k]; the caller adds them up in order (deterministic). */
int cuda_iter_dot_blocks(size_t len);
rtomo_status cuda_iter_dot(const float *a, const float *b, int n, size_t len,
                           double *partial, cudaStream_t stream,
                           rtomo_error *err);

/* y_i = alpha[i] x_i + beta[i] y_i (coef: 2n floats on the device,
 * alpha then beta; y not read where beta is 0). */
rtomo_status cuda_iter_axpby(const float *coef, const float *x, float *y,
                             int n, size_t len, cudaStream_t stream,
                             rtomo_error *err);
/* y_i *= w for every row. */
rtomo_status cuda_iter_mul(const float *w, float *y, int n, size_t len,
                           cudaStream_t stream, rtomo_error *err);
/* x = max(x, 0). */
rtomo_status cuda_iter_clamp(float *x, size_t count, cudaStream_t stream,
                             rtomo_error *err);

#ifdef __cplusplus
}
#endif

#ifdef __CUDACC__
/* A pixel's footprint centre on the detector, s_c = (base - y sin) + x cos,
 * rounded after each operation exactly as the CPU backend's C expression
 * (cpu_iter.c: row_start, then pixel_s; no FMA contraction), so that both
 * backends and both kernels see the same float. */
__device__ __forceinline__ float cuda_iter_center(const iter_sf_proj &q,
                                                  float x, float y)
{
    return __fadd_rn(__fsub_rn(q.base, __fmul_rn(y, q.sin_a)),
                     __fmul_rn(x, q.cos_a));
}
#endif

#endif
