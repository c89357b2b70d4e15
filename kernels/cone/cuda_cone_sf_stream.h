/*
 * cuda_cone_sf_stream.h — the streamed mode of the CUDA cone SF pair
 * (cuda_cone_sf_stream.cu: when, and the state; cuda_cone_sf_stream_ops.cu:
 * A, A^T and the backend ops): vectors in host memory, the ROI's z slabs
 * taken through the GPUs one after another.  Private to kernels/cone;
 * CUDA C++ only.
 */
#ifndef RTOMO_CUDA_CONE_SF_STREAM_H
#define RTOMO_CUDA_CONE_SF_STREAM_H

#include "cone_host_vec.h"
#include "cone_sf_plan.h"
#include "cuda_cone_sf.h"

/* A buffer set of a GPU: its stream, a slab of slices and a window on
 * the device, and their page-locked staging on the host: every copy
 * between the host vectors (pageable) and the GPU goes through these,
 * copied on the host's cores, so that the vectors need no page-locking
 * (which cost seconds per solve) and the lane's copies still run
 * asynchronously beside the other lane's kernels. */
typedef struct stream_lane {
    cudaStream_t stream;
    cudaEvent_t up;             /* the staged slab (A) or window (A^T)
                                   uploaded: its staging free again */
    cudaEvent_t done;           /* the window (A) or slab (A^T)
                                   downloaded into its staging */
    float *slab, *window;       /* device */
    float *slab_host;           /* pinned: A's slab up, A^T's down */
    float *window_host;         /* pinned: A's window down, A^T's up */
} stream_lane;

/* A GPU of the streamed pair: its tables and lanes. */
typedef struct stream_dev {
    int device;
    float *amp_theta, *cos_b, *sin_b;
    stream_lane lane[CONE_SF_LANES];
} stream_dev;

typedef struct cuda_cone_sf_stream {
    cone_sf_stream_plan plan;
    int n_devs;
    stream_dev *devs;
    cuda_cone_sf_slab *slabs;   /* plan.n_slabs; window unused */
    cone_host_vec *host;
    int copy_only;              /* RTOMO_CONE_SF_STREAM_COPY_ONLY */
} cuda_cone_sf_stream;

extern "C" {

/* The streamed pair's backend ops (cuda_cone_sf_stream_ops.cu). */
extern const rtomo_iter_backend_ops cone_sf_stream_ops;

/* Decide whether the pair s (its owner's device, stream, k and kernel
 * switches set; nothing on the device yet) streams: the test hook
 * RTOMO_CONE_SF_STREAM=<slices a slab> forces it; else when the resident
 * solve's vectors do not fit it->opt.device_budget (0: the smallest free
 * memory of devices ids[0 .. n_ids - 1], less a margin).  When it does,
 * make the streamed state on those devices into s->streamed and set
 * it->ops to the streamed ops; *streamed says which. */
rtomo_status cuda_cone_sf_stream_choose(rtomo_iter *it, cone_iter *ci,
                                        cuda_cone_sf *s, const int *ids,
                                        int n_ids, int *streamed,
                                        rtomo_error *err);
/* Free s->streamed (NULL allowed). */
void cuda_cone_sf_stream_destroy(cuda_cone_sf *s);

}

#endif /* RTOMO_CUDA_CONE_SF_STREAM_H */
