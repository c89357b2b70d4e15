/*
 * cuda_sbdx_copy.c — the parallel host copy pool of cuda_sbdx_copy.h.  A
 * batch is cut into fixed-size chunks that the workers and the caller take
 * from a shared counter, so a slow core delays the batch by one chunk at
 * most.  Workers sleep on a condition variable between batches.
 */
#include "config.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_sbdx_copy.h"

/* Big enough to amortise the hand-out, small enough to balance 8 cores on
 * a 4 MB plane. */
#define CHUNK_BYTES ((size_t)1 << 20)
/* Below this a batch is copied by the caller alone. */
#define PARALLEL_MIN_BYTES ((size_t)4 << 20)

struct sbdx_copy_pool {
    pthread_mutex_t lock;
    pthread_cond_t wake, done;
    pthread_t *workers;
    int n_workers;
    int stop;
    unsigned long generation;   /* batches started */
    int busy;                   /* workers still on the current batch */

    /* The current batch. */
    sbdx_copy_segment segments[SBDX_COPY_MAX_SEGMENTS];
    size_t first_chunk[SBDX_COPY_MAX_SEGMENTS + 1];
    int n_segments;
    size_t next_chunk;          /* taken with atomic adds */
};

/* Copy chunks until none is left. */
static void copy_chunks(sbdx_copy_pool *pool)
{
    size_t total = pool->first_chunk[pool->n_segments];
    for (;;) {
        size_t c = __atomic_fetch_add(&pool->next_chunk, 1, __ATOMIC_RELAXED);
        if (c >= total)
            return;
        int s = 0;
        while (c >= pool->first_chunk[s + 1])
            s++;
        const sbdx_copy_segment *seg = &pool->segments[s];
        size_t off = (c - pool->first_chunk[s]) * CHUNK_BYTES;
        size_t n = seg->bytes - off < CHUNK_BYTES ? seg->bytes - off
                                                  : CHUNK_BYTES;
        memcpy((char *)seg->dst + off, (const char *)seg->src + off, n);
    }
}

static void *worker_main(void *arg)
{
    sbdx_copy_pool *pool = arg;
    unsigned long seen = 0;
    pthread_mutex_lock(&pool->lock);
    for (;;) {
        while (!pool->stop && pool->generation == seen)
            pthread_cond_wait(&pool->wake, &pool->lock);
        if (pool->stop)
            break;
        seen = pool->generation;
        pthread_mutex_unlock(&pool->lock);
        copy_chunks(pool);
        pthread_mutex_lock(&pool->lock);
        if (--pool->busy == 0)
            pthread_cond_signal(&pool->done);
    }
    pthread_mutex_unlock(&pool->lock);
    return NULL;
}

sbdx_copy_pool *sbdx_copy_pool_create(int threads)
{
    sbdx_copy_pool *pool = calloc(1, sizeof *pool);
    if (!pool)
        return NULL;
    int wanted = threads > 1 ? threads - 1 : 0;
    pool->workers = calloc(wanted ? (size_t)wanted : 1, sizeof(pthread_t));
    if (!pool->workers) {
        free(pool);
        return NULL;
    }
    pthread_mutex_init(&pool->lock, NULL);
    pthread_cond_init(&pool->wake, NULL);
    pthread_cond_init(&pool->done, NULL);
    while (pool->n_workers < wanted &&
           pthread_create(&pool->workers[pool->n_workers], NULL, worker_main,
                          pool) == 0)
        pool->n_workers++;
    return pool;
}

void sbdx_copy_pool_destroy(sbdx_copy_pool *pool)
{
    if (!pool)
        return;
    pthread_mutex_lock(&pool->lock);
    pool->stop = 1;
    pthread_cond_broadcast(&pool->wake);
    pthread_mutex_unlock(&pool->lock);
    for (int i = 0; i < pool->n_workers; i++)
        pthread_join(pool->workers[i], NULL);
    pthread_cond_destroy(&pool->wake);
    pthread_cond_destroy(&pool->done);
    pthread_mutex_destroy(&pool->lock);
    free(pool->workers);
    free(pool);
}

int sbdx_copy_pool_threads(const sbdx_copy_pool *pool)
{
    return pool->n_workers + 1;
}

void sbdx_copy_run(sbdx_copy_pool *pool, const sbdx_copy_segment *segments,
                   int n)
{
    if (n > SBDX_COPY_MAX_SEGMENTS)
        n = SBDX_COPY_MAX_SEGMENTS;
    size_t total = 0;
    for (int s = 0; s < n; s++)
        total += segments[s].bytes;
    if (pool->n_workers == 0 || total < PARALLEL_MIN_BYTES) {
        for (int s = 0; s < n; s++)
            if (segments[s].bytes)
                memcpy(segments[s].dst, segments[s].src, segments[s].bytes);
        return;
    }

    pthread_mutex_lock(&pool->lock);
    pool->n_segments = n;
    pool->first_chunk[0] = 0;
    for (int s = 0; s < n; s++) {
        pool->segments[s] = segments[s];
        pool->first_chunk[s + 1] =
            pool->first_chunk[s] +
            (segments[s].bytes + CHUNK_BYTES - 1) / CHUNK_BYTES;
    }
    pool->next_chunk = 0;
    pool->busy = pool->n_workers;
    pool->generation++;
    pthread_cond_broadcast(&pool->wake);
    pthread_mutex_unlock(&pool->lock);

    copy_chunks(pool);

    pthread_mutex_lock(&pool->lock);
    while (pool->busy > 0)
        pthread_cond_wait(&pool->done, &pool->lock);
    pthread_mutex_unlock(&pool->lock);
}
