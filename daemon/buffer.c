/*
 * buffer.c — reference-counted image buffers (see rtomod_buffer.h).
 */
#include "config.h"

#include <stdlib.h>

#include "rtomod_buffer.h"

rtomod_buffer *rtomod_buffer_new(size_t size)
{
    rtomod_buffer *b = aligned_alloc(64, (sizeof *b + size + 63) / 64 * 64);
    if (!b)
        return NULL;
    atomic_init(&b->refs, 1);
    b->size = size;
    return b;
}

rtomod_buffer *rtomod_buffer_ref(rtomod_buffer *b)
{
    atomic_fetch_add_explicit(&b->refs, 1, memory_order_relaxed);
    return b;
}

void rtomod_buffer_unref(rtomod_buffer *b)
{
    if (b && atomic_fetch_sub_explicit(&b->refs, 1, memory_order_acq_rel) == 1)
        free(b);
}
