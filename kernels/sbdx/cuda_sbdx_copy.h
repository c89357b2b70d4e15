/*
 * cuda_sbdx_copy.h — a small pool of host threads that copies large buffers
 * in parallel.  The CUDA SBDX backend moves every frame into pinned memory
 * and every result out of it (256 MB per frame in the reference
 * configuration); one core copies about 10 GB/s, which alone would cap the
 * pipeline below 50 frames/s, so these copies are spread over several cores.
 */
#ifndef RTOMO_CUDA_SBDX_COPY_H
#define RTOMO_CUDA_SBDX_COPY_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One contiguous copy of a batch. */
typedef struct sbdx_copy_segment {
    void *dst;
    const void *src;
    size_t bytes;
} sbdx_copy_segment;

#define SBDX_COPY_MAX_SEGMENTS 8

typedef struct sbdx_copy_pool sbdx_copy_pool;

/* A pool in which `threads` threads copy (the caller of sbdx_copy_run is
 * one of them, so threads - 1 are started).  Threads that cannot be started
 * are done without: the copy still happens, on fewer cores.  Returns NULL
 * only when memory runs out. */
sbdx_copy_pool *sbdx_copy_pool_create(int threads);
void sbdx_copy_pool_destroy(sbdx_copy_pool *pool);

/* Threads that actually copy (the caller included). */
int sbdx_copy_pool_threads(const sbdx_copy_pool *pool);

/* Copy n (<= SBDX_COPY_MAX_SEGMENTS) non-overlapping segments; returns
 * when all bytes are in place.  One caller at a time. */
void sbdx_copy_run(sbdx_copy_pool *pool, const sbdx_copy_segment *segments,
                   int n);

#ifdef __cplusplus
}
#endif

#endif
