/*
 * cuda_cone.h — the CUDA backend of the cone-beam engine: its state and
 * the launchers of its two kernel families, FDK filtering
 * (cuda_cone_filter.cu) and voxel-driven back-projection with the texture
 * and ALU kernels and their autotuning (cuda_cone_bp.cu).  The ops table
 * is in cuda_cone_backend.cu.
 *
 * Each slab's work runs on one stream of its device, so that it is
 * ordered without host waits: a projection filtered into slot 0 is queued
 * after the back-projection that still reads slot 0.  Host
 * buffers handed in (frames, weights, filtered data) are pageable; the
 * runtime stages them before cudaMemcpyAsync returns, so callers may
 * reuse them at once.  Only read and fetch wait.
 */
#ifndef RTOMO_CUDA_CONE_H
#define RTOMO_CUDA_CONE_H

#include <cuda_runtime.h>
#include <cufft.h>

#include "cone_internal.h"
#include "cuda_common.h"

/* One slab of the ROI's slices on one device, with everything it needs
 * to filter projections and back-project them into its slices. */
typedef struct cuda_cone_dev {
    int device;
    cudaStream_t stream;
    cone_bp_const k;            /* the plan's, for this slab's slices */
    int z_first;                /* its first ROI slice */
    float *volume;              /* its slices, device */
    float *slots;               /* (chunk + 1) x filt_len, device */
    cudaArray_t layers;         /* texture path: chunk layers of
                                   filt_u x det_v */
    cudaTextureObject_t tex;
    /* filtering */
    float *frame;               /* det_v x det_u line integrals */
    float *cos_weight;          /* det_v x det_u */
    float *row_weights;         /* det_u */
    float *padded;              /* det_v x filter_length */
    cufftComplex *spectrum;     /* det_v x (filter_length / 2 + 1) */
    float *filter;              /* filter_length / 2 + 1 coefficients */
    cufftHandle r2c, c2r;
    int have_r2c, have_c2r;
} cuda_cone_dev;

/* The plan's slabs: the ROI's slices dealt out evenly over the devices
 * (each filters every projection itself: a filter costs little beside a
 * slab's back-projection, and no device waits for another). */
typedef struct cuda_cone {
    int n;
    cuda_cone_dev *dev;
} cuda_cone;

/* Projections of one back-projection launch: at most CONE_CHUNK, each
 * with its rotation; passed by value as a kernel argument. */
typedef struct cuda_cone_views {
    float cos_b[CONE_CHUNK], sin_b[CONE_CHUNK];
    int n;
} cuda_cone_views;

/* Voxels of a column each thread carries. */
#define CUDA_CONE_ZCOL 16

/* cuda_cone_filter.cu: plans and buffers; filter the frame in s->frame
 * (already uploaded with s->row_weights) into slot `slot`. */
rtomo_status cuda_cone_filter_create(const rtomo_cone *c, cuda_cone_dev *s,
                                     rtomo_error *err);
void cuda_cone_filter_destroy(cuda_cone_dev *s);
rtomo_status cuda_cone_filter_run(const rtomo_cone *c, cuda_cone_dev *s,
                                  int slot, rtomo_error *err);

/* cuda_cone_bp.cu: the layered texture over the slots, the launch of
 * `kernel` (TEXTURE or ALU) for the views of slots 0..views->n - 1 over
 * the slab's slices [z_first, z_first + z_count) (counted in the slab),
 * and the choice between the kernels (c->kernel AUTO: timed once per
 * device and slab shape, cached for the process). */
rtomo_status cuda_cone_bp_create(const rtomo_cone *c, cuda_cone_dev *s,
                                 rtomo_error *err);
void cuda_cone_bp_destroy(cuda_cone_dev *s);
rtomo_status cuda_cone_bp_launch(const rtomo_cone *c, cuda_cone_dev *s,
                                 rtomo_cone_kernel kernel,
                                 const cuda_cone_views *views, int z_first,
                                 int z_count, rtomo_error *err);
rtomo_status cuda_cone_autotune(rtomo_cone *c, cuda_cone_dev *s,
                                rtomo_error *err);

#endif
