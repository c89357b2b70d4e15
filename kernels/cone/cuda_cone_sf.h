/*
 * cuda_cone_sf.h — the separable-footprint cone-beam pair on the GPU: its
 * state (cuda_cone_sf_backend.cu; its z slabs over several GPUs,
 * cuda_cone_sf_slabs.cu) and the launchers of its kernels
 * (cuda_cone_sf.cu: the first kernels, the vector ops and the row
 * windows of a split pair; cuda_cone_sf_column_project.cu and
 * cuda_cone_sf_column_backproject.cu, with cuda_cone_sf_column.h: the
 * z-column kernels, the default).  The footprints are cone_sf.h's, the
 * same code as the CPU pair's.
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

/* A z slab of a split pair (cuda_cone_sf_slabs.cu): its voxels' k
 * (nz, z0 its own), the detector rows they can reach at any view, and its
 * window of those rows on its device: A's partial projections, A^T's
 * input. */
typedef struct cuda_cone_sf_slab {
    int dev;                    /* its device: index into the pair's devs */
    int z_first;                /* its first slice in the ROI */
    cone_bp_const k;
    int row0, rows;             /* rows row0 .. row0 + rows - 1; rows 0:
                                   the slab misses the detector */
    float *window;              /* n_proj x rows x det_u, device */
} cuda_cone_sf_slab;

struct cuda_cone_sf_dev;
struct cuda_cone_sf_stream;

#ifdef __cplusplus
extern "C" {
#endif
/* Slab sl of the ROI (k the whole ROI's constants): slices z_first ..
 * z_first + count - 1 and its window of detector rows, its k moved onto
 * them (nz, z0) and onto the window (v0 less the window's first row,
 * det_v its rows), so that the kernels clip to the window themselves
 * (cuda_cone_sf_slabs.cu; the split pair's and the streamed pair's
 * slabs). */
void cuda_cone_sf_place_slab(cuda_cone_sf_slab *sl, const cone_bp_const *k,
                             int z_first, int count);
#ifdef __cplusplus
}
#endif

/*
 * The pair's state.  Copied whole into the views that slab kernels see:
 * a split device's (dev_setup, cuda_cone_sf_slabs.cu) and a streamed
 * slab's (slab_view, cuda_cone_sf_stream_ops.cu).  A field added here that
 * points at memory the pair owns must be cleared or replaced in both, or
 * a view would use (and dev_destroy free) the owner's memory on another
 * device.
 */
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
    /* Split (several devices, or RTOMO_CONE_SF_SPLIT): n_slabs > 1 slabs
     * over n_devs devices, devs[0] the pair's own device, which holds the
     * sinogram vectors and adds the slabs' windows up in landing.  One
     * slab: n_slabs 1, the rest NULL, the pair as it always was. */
    int n_slabs, n_devs;
    cuda_cone_sf_slab *slabs;
    struct cuda_cone_sf_dev *devs;
    float *landing;             /* the largest remote window, on device */
    cudaEvent_t copied;         /* on device: a window sent to a slab */
    /* Streamed (cuda_cone_sf_stream.cu): vectors in host memory, slabs
     * taken through the GPUs; NULL for a resident pair.  A streamed pair
     * has none of the device arrays above (its devices hold their own). */
    struct cuda_cone_sf_stream *streamed;
} cuda_cone_sf;

/* A device of a split pair: the pair as its kernels there see it (view:
 * the pair's fields with this device's stream, tables and dot buffers),
 * the slices of the ROI it holds (its slabs', contiguous) and an event
 * for its slabs' work done. */
typedef struct cuda_cone_sf_dev {
    cuda_cone_sf view;
    int z_first, nz;
    cudaEvent_t done;
} cuda_cone_sf_dev;

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
/* The z-column kernels behind the two above (cuda_cone_sf_column_project.cu,
 * cuda_cone_sf_column_backproject.cu):
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
/* A of a slab or of the whole volume into zeroed projections (without
 * l_theta), A^T of projections already times l_theta: the kernels s
 * picks (z-column or first), s->k's voxels and rows, frames
 * s->frame_len apart; queued on s->stream, not waited for. */
rtomo_status cuda_cone_sf_project_raw(cuda_cone_sf *s, const float *volume,
                                      float *projections, rtomo_error *err);
rtomo_status cuda_cone_sf_backproject_raw(cuda_cone_sf *s,
                                          const float *weighted,
                                          float *volume, rtomo_error *err);
/* out = in times l_theta over all n_proj frames (in may be out); queued. */
rtomo_status cuda_cone_sf_amplitude(cuda_cone_sf *s, const float *in,
                                    float *out, rtomo_error *err);
/* A slab's window (n_proj x rows x det_u, from row row0) added into the
 * projections' frames; queued. */
rtomo_status cuda_cone_sf_add_window(cuda_cone_sf *s, const float *window,
                                     int row0, int rows, float *projections,
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
