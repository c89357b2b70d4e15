/*
 * cone_iter.h — the state of a cone-beam iterative plan (cone_iter.c),
 * shared with the CUDA pair's ops (cuda_cone_sf*.cu): the geometry, the
 * l_theta amplitudes and the backend's pair.
 */
#ifndef RTOMO_CONE_ITER_H
#define RTOMO_CONE_ITER_H

#include "../iterative/iter_internal.h"
#include "cone_internal.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cone_iter {
    rtomo_cone *geo;            /* the geometry (no FDK backend) */
    float *amp_theta;           /* det_v x det_u, host */
    void *pair;                 /* cpu_cone_sf or cuda_cone_sf */
} cone_iter;

/* The CPU pair's ops (cone_iter.c).  Its vector ops (dot, axpby, mul,
 * clamp_nonneg) read neither the plan nor err: the streamed CUDA pair
 * calls them on chunks of host vectors (cone_host_vec.c). */
extern const rtomo_iter_backend_ops cone_sf_cpu_ops;

/* Every backend's create op: plans of the pair are made by
 * rtomo_cone_iter_create only (RTOMO_E_STATE). */
rtomo_status cone_iter_refuse_create(rtomo_iter *it, rtomo_error *err);

/* Free a plan's state (every backend): its ops' destroy. */
void cone_iter_destroy(rtomo_iter *it);

#ifdef RTOMO_HAVE_CUDA
/* The CUDA pair and its vector ops (cuda_cone_sf_backend.cu): device
 * vectors on the first of it->opt's devices, image vectors in z slabs
 * over all of them when there are several; or, when they would not fit,
 * host vectors and slabs streamed (cuda_cone_sf_stream.cu, its own ops).
 * create fills s->pair and may replace it->ops. */
extern const rtomo_iter_backend_ops cone_sf_cuda_ops;
rtomo_status cuda_cone_sf_create(rtomo_iter *it, cone_iter *s,
                                 rtomo_error *err);
void cuda_cone_sf_destroy(void *pair);
/* Test hook (cuda_cone_sf_stream_ops.cu): the z slabs a streamed pair
 * takes through its GPUs, 0 for a resident pair or another backend's.
 * Include config.h first: builds without CUDA get a stand-in that
 * reports 0, so that the GPU tests build there (and skip). */
int cuda_cone_sf_stream_slabs(const rtomo_iter *it);
#else
static inline int cuda_cone_sf_stream_slabs(const rtomo_iter *it)
{
    (void)it;
    return 0;
}
#endif

#ifdef __cplusplus
}
#endif

#endif
