/*
 * rtomod_buffer.h — reference-counted image buffers.  A worker
 * reconstructs a batch of slices (or an SBDX frame's planes) into one
 * buffer; every published image is a ZeroMQ message that points into it
 * without a copy and drops its reference when ZeroMQ is done with it
 * (possibly on a ZeroMQ I/O thread, hence the atomic count).
 */
#ifndef RTOMOD_BUFFER_H
#define RTOMOD_BUFFER_H

#include <stdatomic.h>
#include <stddef.h>

typedef struct rtomod_buffer {
    atomic_int refs;
    size_t size;
    _Alignas(64) unsigned char data[];  /* aligned for any sample type */
} rtomod_buffer;

/* A buffer of `size` bytes with one reference, or NULL. */
rtomod_buffer *rtomod_buffer_new(size_t size);
rtomod_buffer *rtomod_buffer_ref(rtomod_buffer *b);
/* Drop one reference; the last one frees the buffer.  NULL is ignored. */
void rtomod_buffer_unref(rtomod_buffer *b);

#endif /* RTOMOD_BUFFER_H */
