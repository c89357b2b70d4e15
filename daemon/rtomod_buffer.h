/*
 * rtomod_buffer.h — reference-counted image buffers.  A worker
 * reconstructs a batch of slices (or an SBDX frame's planes) into one
 * buffer; every published image is a ZeroMQ message that points into it
 * without a copy and drops its reference when ZeroMQ is done with it
 * (possibly on a ZeroMQ I/O thread, hence the atomic count).
 *
 * Buffers may come from a pool that takes them back when their last
 * reference goes: an SBDX frame's planes are 128 MB, and a fresh buffer of
 * that size is a fresh mapping whose every page faults and is zeroed on
 * first write — tens of milliseconds per frame that reuse avoids.
 */
#ifndef RTOMOD_BUFFER_H
#define RTOMOD_BUFFER_H

#include <stdatomic.h>
#include <stddef.h>

typedef struct rtomod_buffer_pool rtomod_buffer_pool;

typedef struct rtomod_buffer {
    atomic_int refs;
    size_t size;
    rtomod_buffer_pool *pool;           /* where it returns, or NULL */
    int locked;                         /* page-locked (rtomo_host_alloc) */
    _Alignas(64) unsigned char data[];  /* aligned for any sample type */
} rtomod_buffer;

/* A buffer of `size` bytes with one reference, or NULL. */
rtomod_buffer *rtomod_buffer_new(size_t size);
rtomod_buffer *rtomod_buffer_ref(rtomod_buffer *b);
/* Drop one reference; the last one frees the buffer or returns it to its
 * pool.  NULL is ignored.  Any thread. */
void rtomod_buffer_unref(rtomod_buffer *b);

/* A pool of buffers of `size` bytes that keeps up to `keep` returned ones
 * for reuse; NULL when out of memory. */
rtomod_buffer_pool *rtomod_buffer_pool_new(size_t size, int keep);
/* The same, with up to `locked_max` of its buffers page-locked where the
 * engine can (rtomo_host_alloc): the GPUs then read results straight into
 * them.  Locking costs about what first touching the pages costs, so such
 * a pool is worth keeping across scans. */
rtomod_buffer_pool *rtomod_buffer_pool_new_locked(size_t size, int keep,
                                                  int locked_max);
/* Buffers of the pool that are page-locked now (kept or out). */
int rtomod_buffer_pool_locked(rtomod_buffer_pool *pool);
/* Size of the pool's buffers. */
size_t rtomod_buffer_pool_size(const rtomod_buffer_pool *pool);
/* A buffer of the pool's size (reused or new) with one reference, or
 * NULL. */
rtomod_buffer *rtomod_buffer_pool_get(rtomod_buffer_pool *pool);
/* The owner is done with the pool: buffers still out are freed when they
 * come back, and the pool with the last of them.  NULL is ignored. */
void rtomod_buffer_pool_close(rtomod_buffer_pool *pool);

#endif /* RTOMOD_BUFFER_H */
