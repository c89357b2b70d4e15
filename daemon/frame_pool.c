/*
 * frame_pool.c — recycled frame buffers for the detector inputs
 * (rtomod_frame_pool.h says why).
 *
 * Each buffer carries a small header before its data (the pool and the
 * size it was made for), which ZeroMQ hands back to the free function as
 * its hint.  One mutex guards the list and the counts: a buffer is taken
 * by the loop and given back by a worker.
 */
#include "config.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "rtomod_frame_pool.h"

typedef struct frame_buffer {
    struct rtomod_frame_pool *pool;
    size_t size;
    struct frame_buffer *next;  /* in the pool's list while kept */
    /* 64-byte aligned data follows (the header is padded to 64). */
} frame_buffer;

#define HEADER_SIZE 64

struct rtomod_frame_pool {
    pthread_mutex_t lock;
    frame_buffer *kept;         /* free buffers of `size` bytes */
    int held, lent;
    size_t size, keep_bytes;
    int closed;
};

static uint8_t *buffer_data(frame_buffer *b)
{
    return (uint8_t *)b + HEADER_SIZE;
}

rtomod_frame_pool *rtomod_frame_pool_new(size_t keep_bytes)
{
    rtomod_frame_pool *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    if (pthread_mutex_init(&p->lock, NULL) != 0) {
        free(p);
        return NULL;
    }
    p->keep_bytes = keep_bytes;
    return p;
}

/* Free every kept buffer; the lock is held. */
static void drop_kept(rtomod_frame_pool *p)
{
    while (p->kept) {
        frame_buffer *b = p->kept;
        p->kept = b->next;
        free(b);
    }
    p->held = 0;
}

static void destroy(rtomod_frame_pool *p)
{
    pthread_mutex_destroy(&p->lock);
    free(p);
}

/* ZeroMQ's free function: back to the pool when it is open, still wants
 * buffers of this size and has room; else to the allocator. */
static void give_back(void *data, void *hint)
{
    (void)data;
    frame_buffer *b = hint;
    rtomod_frame_pool *p = b->pool;
    pthread_mutex_lock(&p->lock);
    p->lent--;
    if (!p->closed && b->size == p->size &&
        (p->held == 0 || (size_t)(p->held + 1) * b->size <= p->keep_bytes)) {
        b->next = p->kept;
        p->kept = b;
        p->held++;
        b = NULL;
    }
    const int last = p->closed && p->lent == 0;
    pthread_mutex_unlock(&p->lock);
    free(b);
    if (last)
        destroy(p);
}

/* A kept buffer of `size` bytes, or a new one; NULL when out of memory. */
static frame_buffer *take(rtomod_frame_pool *p, size_t size)
{
    pthread_mutex_lock(&p->lock);
    if (size != p->size) {
        drop_kept(p);           /* another detector size: start again */
        p->size = size;
    }
    frame_buffer *b = p->kept;
    if (b) {
        p->kept = b->next;
        p->held--;
    }
    pthread_mutex_unlock(&p->lock);
    if (!b) {
        void *mem = NULL;
        if (posix_memalign(&mem, HEADER_SIZE, HEADER_SIZE + size) != 0)
            return NULL;
        b = mem;
        b->pool = p;
        b->size = size;
    }
    return b;
}

int rtomod_frame_pool_msg(rtomod_frame_pool *p, size_t size, zmq_msg_t *msg)
{
    frame_buffer *b = take(p, size);
    if (!b)
        return -1;
    pthread_mutex_lock(&p->lock);
    p->lent++;
    pthread_mutex_unlock(&p->lock);
    if (zmq_msg_init_data(msg, buffer_data(b), size, give_back, b) != 0) {
        give_back(NULL, b);
        return -1;
    }
    return 0;
}

void rtomod_frame_pool_counts(rtomod_frame_pool *p, int *held, int *lent)
{
    pthread_mutex_lock(&p->lock);
    *held = p->held;
    *lent = p->lent;
    pthread_mutex_unlock(&p->lock);
}

void rtomod_frame_pool_close(rtomod_frame_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->lock);
    drop_kept(p);
    p->closed = 1;
    const int last = p->lent == 0;
    pthread_mutex_unlock(&p->lock);
    if (last)
        destroy(p);
}
