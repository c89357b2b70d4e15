/*
 * rtomod_frame_pool.h — recycled frame buffers for the detector inputs.
 *
 * A detector input decodes every image into a new frame message (8 MB for
 * 2048 x 2048 uint16).  Allocated fresh, each frame's pages are faulted in
 * and zeroed by the kernel while the decoding threads write them, once per
 * image; with frames freed by the workers and allocated by the loop, the
 * allocator also gives memory back to the system and takes it again.  A
 * pool keeps buffers of the current frame size, up to `keep_bytes` of
 * them, and hands them out again, so their pages stay mapped.  Messages made from it may
 * outlive the input: the pool goes when it is closed and its last buffer
 * has come back.
 */
#ifndef RTOMOD_FRAME_POOL_H
#define RTOMOD_FRAME_POOL_H

#include <stddef.h>

#include <zmq.h>

typedef struct rtomod_frame_pool rtomod_frame_pool;

/* A pool that keeps at most keep_bytes of buffers (at least one buffer);
 * NULL when out of memory. */
rtomod_frame_pool *rtomod_frame_pool_new(size_t keep_bytes);

/* *msg (uninitialised) becomes a message of `size` bytes whose buffer is
 * the pool's (contents undefined), returned to the pool when the message
 * is freed, by whichever thread frees it.  0, or -1 when out of memory
 * (*msg untouched).  A size other than the last one empties the pool. */
int rtomod_frame_pool_msg(rtomod_frame_pool *pool, size_t size,
                          zmq_msg_t *msg);

/* Buffers held now, and messages made from them not yet freed. */
void rtomod_frame_pool_counts(rtomod_frame_pool *pool, int *held,
                              int *lent);

/* The owner lets go: the kept buffers are freed now, the pool itself when
 * the last lent buffer comes back.  NULL is fine. */
void rtomod_frame_pool_close(rtomod_frame_pool *pool);

#endif
