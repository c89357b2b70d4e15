/*
 * cuda_cone_sf.h — the separable-footprint cone-beam pair on the GPU: its
 * state (cuda_cone_sf_backend.cu) and the launchers of its kernels
 * (cuda_cone_sf.cu: the first kernels and the vector ops;
 * cuda_cone_sf_column.cu: the z-column kernels, the default).  The
 * footprints are cone_sf.h's, the same code as the CPU pair's.
 */
#ifndef RTOMO_CUDA_CONE_SF_H
#define RTOMO_CUDA_CONE_SF_H

#include <cuda_runtime.h>

#include "cone_iter.h"
#include "cuda_common.h"

/* Voxels of a column per thread (A^T accumulates them in registers; A
 * gathers their rows before it scatters). */
#define CUDA_SF_ZBLOCK 8
/* Rows a thread of A gathers before scattering them (a z block's rows
 * beyond this go to the cells one voxel at a time). */
#define CUDA_SF_ROWS 32
/* Blocks of the dot product's first pass. */
#define CUDA_SF_DOT_BLOCKS 256

typedef struct cuda_cone_sf {
    int device;
    cudaStream_t stream;
    cone_bp_const k;            /* on the physical detector */
    int n_proj;
    size_t frame_len;
    float *amp_theta;           /* det_v x det_u, device */
    float *cos_b, *sin_b;       /* n_proj, device */
    const float *cos_host, *sin_host;   /* the same, the plan's (host) */
    float *weighted;            /* A^T's input times l_theta, device */
    double *partial;            /* CUDA_SF_DOT_BLOCKS, device */
    double *partial_host;       /* pinned */
    int old_kernels;            /* RTOMO_CONE_SF_KERNEL=old: the first
                                   kernels, to compare against */
    int patch_cap;              /* cells of A's shared patch allowed
                                   (RTOMO_CONE_SF_PATCH; 0: global atomics
                                   only, the test of that path) */
} cuda_cone_sf;

#ifdef __cplusplus
extern "C" {
#endif

/* projections = A volume (device arrays; projections overwritten). */
rtomo_status cuda_cone_sf_project(cuda_cone_sf *s, const float *volume,
                                  float *projections, rtomo_error *err);
/* volume = A^T projections (device arrays; volume overwritten). */
rtomo_status cuda_cone_sf_backproject(cuda_cone_sf *s,
                                      const float *projections, float *volume,
                                      rtomo_error *err);
/* The z-column kernels behind the two above (cuda_cone_sf_column.cu):
 * A into zeroed projections (without l_theta), A^T of projections already
 * times l_theta; queued on s->stream, not waited for. */
rtomo_status cuda_cone_sf_project_columns(cuda_cone_sf *s,
                                          const float *volume,
                                          float *projections,
                                          rtomo_error *err);
rtomo_status cuda_cone_sf_backproject_columns(cuda_cone_sf *s,
                                              const float *weighted,
                                              float *volume,
                                              rtomo_error *err);
/* Vector kernels on n floats (device). */
rtomo_status cuda_cone_sf_dot(cuda_cone_sf *s, const float *a, const float *b,
                              size_t n, double *out, rtomo_error *err);
rtomo_status cuda_cone_sf_axpby(cuda_cone_sf *s, float alpha, const float *x,
                                float beta, float *y, size_t n,
                                rtomo_error *err);
rtomo_status cuda_cone_sf_mul(cuda_cone_sf *s, const float *w, float *y,
                              size_t n, rtomo_error *err);
rtomo_status cuda_cone_sf_clamp(cuda_cone_sf *s, float *x, size_t n,
                                rtomo_error *err);

#ifdef __cplusplus
}
#endif

#endif
