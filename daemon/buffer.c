/*
 * buffer.c — reference-counted image buffers and their pools (see
 * rtomod_buffer.h).
 */
#include "config.h"

#include <pthread.h>
#include <stdlib.h>

#include "rtomod_buffer.h"
#include "rtomo_engine.h"

struct rtomod_buffer_pool {
    pthread_mutex_t lock;
    size_t size;
    int keep;                   /* free buffers kept at most */
    rtomod_buffer **free;       /* keep slots */
    int n_free;
    long alive;                 /* buffers of the pool not freed */
    int closed;
    int locked_max;             /* buffers that may be page-locked */
    int locked_alive;           /* page-locked buffers not freed */
};

/* A buffer of `size` bytes, page-locked when `lock` asks for it and the
 * engine can (rtomo_host_alloc), else in ordinary memory. */
static rtomod_buffer *allocate(size_t size, rtomod_buffer_pool *pool, int lock)
{
    size_t bytes = sizeof(rtomod_buffer) + size;
    int locked = 0;
    rtomod_buffer *b = lock ? rtomo_host_alloc(bytes, &locked)
                            : aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!b)
        return NULL;
    atomic_init(&b->refs, 1);
    b->size = size;
    b->pool = pool;
    b->locked = locked;
    return b;
}

/* rtomo_host_free frees ordinary memory with free() as well. */
static void buffer_free(rtomod_buffer *b)
{
    rtomo_host_free(b, b->locked);
}

rtomod_buffer *rtomod_buffer_new(size_t size)
{
    return allocate(size, NULL, 0);
}

rtomod_buffer *rtomod_buffer_ref(rtomod_buffer *b)
{
    atomic_fetch_add_explicit(&b->refs, 1, memory_order_relaxed);
    return b;
}

static void pool_free(rtomod_buffer_pool *pool)
{
    pthread_mutex_destroy(&pool->lock);
    free(pool->free);
    free(pool);
}

/* A buffer leaves the pool for good (pool->lock held): it is freed after
 * the lock is let go. */
static void pool_forget(rtomod_buffer_pool *pool, const rtomod_buffer *b)
{
    pool->alive--;
    pool->locked_alive -= b->locked;
}

/* A buffer's last reference is gone: keep it for reuse or free it. */
static void pool_return(rtomod_buffer_pool *pool, rtomod_buffer *b)
{
    pthread_mutex_lock(&pool->lock);
    int kept = !pool->closed && pool->n_free < pool->keep;
    if (kept)
        pool->free[pool->n_free++] = b;
    else
        pool_forget(pool, b);
    int last = pool->closed && pool->alive == 0;
    pthread_mutex_unlock(&pool->lock);
    if (!kept)
        buffer_free(b);
    if (last)
        pool_free(pool);
}

void rtomod_buffer_unref(rtomod_buffer *b)
{
    if (!b || atomic_fetch_sub_explicit(&b->refs, 1, memory_order_acq_rel) != 1)
        return;
    if (b->pool)
        pool_return(b->pool, b);
    else
        buffer_free(b);
}

rtomod_buffer_pool *rtomod_buffer_pool_new(size_t size, int keep)
{
    return rtomod_buffer_pool_new_locked(size, keep, 0);
}

rtomod_buffer_pool *rtomod_buffer_pool_new_locked(size_t size, int keep,
                                                  int locked_max)
{
    rtomod_buffer_pool *pool = calloc(1, sizeof *pool);
    if (!pool)
        return NULL;
    pool->size = size;
    pool->keep = keep > 0 ? keep : 1;
    pool->locked_max = locked_max > 0 ? locked_max : 0;
    pool->free = calloc((size_t)pool->keep, sizeof *pool->free);
    if (!pool->free) {
        free(pool);
        return NULL;
    }
    pthread_mutex_init(&pool->lock, NULL);
    return pool;
}

size_t rtomod_buffer_pool_size(const rtomod_buffer_pool *pool)
{
    return pool->size;
}

rtomod_buffer *rtomod_buffer_pool_get(rtomod_buffer_pool *pool)
{
    pthread_mutex_lock(&pool->lock);
    rtomod_buffer *b = pool->n_free > 0 ? pool->free[--pool->n_free] : NULL;
    pthread_mutex_unlock(&pool->lock);
    if (b) {
        atomic_store(&b->refs, 1);
        return b;
    }
    /* Page-locked while fewer than locked_max of them live: a count
     * taken before allocating, so that two threads may both lock one more
     * than the bound at worst, never an unbounded number. */
    pthread_mutex_lock(&pool->lock);
    int lock = pool->locked_alive < pool->locked_max;
    pthread_mutex_unlock(&pool->lock);
    if (!(b = allocate(pool->size, pool, lock)))
        return NULL;
    pthread_mutex_lock(&pool->lock);
    pool->alive++;
    pool->locked_alive += b->locked;
    pthread_mutex_unlock(&pool->lock);
    return b;
}

void rtomod_buffer_pool_close(rtomod_buffer_pool *pool)
{
    if (!pool)
        return;
    pthread_mutex_lock(&pool->lock);
    pool->closed = 1;
    for (int i = 0; i < pool->n_free; i++) {
        pool_forget(pool, pool->free[i]);
        buffer_free(pool->free[i]);
    }
    pool->n_free = 0;
    int last = pool->alive == 0;
    pthread_mutex_unlock(&pool->lock);
    if (last)
        pool_free(pool);
}

int rtomod_buffer_pool_locked(rtomod_buffer_pool *pool)
{
    pthread_mutex_lock(&pool->lock);
    int n = pool->locked_alive;
    pthread_mutex_unlock(&pool->lock);
    return n;
}
