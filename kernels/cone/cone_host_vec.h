/*
 * cone_host_vec.h — the iterative engine's vector ops on host vectors,
 * spread over a thread pool (cone_host_vec.c): the CPU cone pair's own
 * ops (cone_iter.c's cone_sf_cpu_ops) applied to chunks of each row, for
 * the streamed CUDA pair, whose vectors live in host memory and are too
 * large (gigabytes) for one thread.  Also the streamed pair's host steps:
 * zeroing a sinogram, adding a window into it or gathering one out of it,
 * copying slabs to and from its page-locked staging.  Plain C,
 * tested without a GPU.  Private to kernels/cone.
 */
#ifndef RTOMO_CONE_HOST_VEC_H
#define RTOMO_CONE_HOST_VEC_H

#include "../iterative/iter_internal.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cone_host_vec cone_host_vec;

/* Floats of a chunk: one task of the pool. */
#define CONE_HOST_CHUNK ((size_t)1 << 18)

/* threads workers (0: one per online core). */
rtomo_status cone_host_vec_create(int threads, cone_host_vec **out,
                                  rtomo_error *err);
void cone_host_vec_destroy(cone_host_vec *h);

/* The backend ops' contract (iter_internal.h) on host vectors.  dot sums
 * each chunk as cone_sf_cpu_ops does, then the chunks in order, in
 * double: the same result from run to run whatever the threads. */
void cone_host_dot(cone_host_vec *h, const iter_vec *a, const iter_vec *b,
                   double *out);
void cone_host_axpby(cone_host_vec *h, const double *alpha,
                     const iter_vec *x, const double *beta, iter_vec *y);
void cone_host_mul(cone_host_vec *h, const iter_vec *w, iter_vec *y);
void cone_host_clamp(cone_host_vec *h, iter_vec *x);

/* n floats of y set to 0 (also the first touch of new pageable memory,
 * so that its page faults are spread over the pool's threads). */
void cone_host_zero(cone_host_vec *h, float *y, size_t n);
/* n floats of src into dst (not overlapping): a slab between a host
 * vector and a lane's page-locked staging. */
void cone_host_copy(cone_host_vec *h, float *dst, const float *src,
                    size_t n);
/* y[p frame + offset + c] += window[p win + c] for every c < win and
 * frame p < n_frames: a slab's window of rows added into a sinogram. */
void cone_host_add_window(cone_host_vec *h, const float *window, size_t win,
                          size_t offset, size_t frame, int n_frames,
                          float *y);
/* window[p win + c] = y[p frame + offset + c], the same indices: a
 * slab's window of rows gathered out of a sinogram. */
void cone_host_gather_window(cone_host_vec *h, const float *y, size_t win,
                             size_t offset, size_t frame, int n_frames,
                             float *window);

#ifdef __cplusplus
}
#endif

#endif /* RTOMO_CONE_HOST_VEC_H */
