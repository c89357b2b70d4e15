/*
 * decode_pool.c — the event loop's decoding helpers
 * (rtomod_decode_pool.h): a generation counter under a mutex wakes the
 * helpers for each run; the items are claimed with an atomic counter;
 * the last helper to finish wakes the caller.
 */
#include "config.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "rtomod_decode_pool.h"

struct rtomod_decode_pool {
    pthread_mutex_t lock;
    pthread_cond_t wake, done;
    pthread_t *threads;
    int n_threads;
    unsigned long generation;   /* runs started */
    int stopping;
    /* The run in progress. */
    void (*fn)(void *ctx, int i);
    void *ctx;
    int n;
    atomic_int next;            /* next item to claim */
    int busy;                   /* helpers still inside this run */
};

/* Claim and run items until none are left. */
static void work(rtomod_decode_pool *p)
{
    int i;
    while ((i = atomic_fetch_add(&p->next, 1)) < p->n)
        p->fn(p->ctx, i);
}

static void *helper(void *arg)
{
    rtomod_decode_pool *p = arg;
    unsigned long seen = 0;
    pthread_mutex_lock(&p->lock);
    for (;;) {
        while (!p->stopping && p->generation == seen)
            pthread_cond_wait(&p->wake, &p->lock);
        if (p->stopping)
            break;
        seen = p->generation;
        pthread_mutex_unlock(&p->lock);
        work(p);
        pthread_mutex_lock(&p->lock);
        if (--p->busy == 0)
            pthread_cond_signal(&p->done);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

rtomod_decode_pool *rtomod_decode_pool_new(int threads)
{
    rtomod_decode_pool *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->done, NULL);
    atomic_init(&p->next, 0);
    p->threads = calloc((size_t)(threads > 0 ? threads : 1),
                        sizeof *p->threads);
    if (!p->threads) {
        rtomod_decode_pool_free(p);
        return NULL;
    }
    for (int t = 0; t < threads; t++) {
        if (pthread_create(&p->threads[t], NULL, helper, p) != 0) {
            rtomod_decode_pool_free(p);
            return NULL;
        }
        p->n_threads++;
    }
    return p;
}

void rtomod_decode_pool_free(rtomod_decode_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->lock);
    p->stopping = 1;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->lock);
    for (int t = 0; t < p->n_threads; t++)
        pthread_join(p->threads[t], NULL);
    free(p->threads);
    pthread_cond_destroy(&p->wake);
    pthread_cond_destroy(&p->done);
    pthread_mutex_destroy(&p->lock);
    free(p);
}

void rtomod_decode_pool_run(void *pool, int n, void (*fn)(void *ctx, int i),
                            void *ctx)
{
    rtomod_decode_pool *p = pool;
    if (!p || p->n_threads == 0 || n < 2) {
        for (int i = 0; i < n; i++)
            fn(ctx, i);
        return;
    }
    pthread_mutex_lock(&p->lock);
    p->fn = fn;
    p->ctx = ctx;
    p->n = n;
    atomic_store(&p->next, 0);
    p->busy = p->n_threads;
    p->generation++;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->lock);
    work(p);
    pthread_mutex_lock(&p->lock);
    while (p->busy > 0)
        pthread_cond_wait(&p->done, &p->lock);
    pthread_mutex_unlock(&p->lock);
}

int rtomod_decode_pool_default_threads(void)
{
    /* The cores this process may run on (taskset, cgroups), not the
     * machine's. */
    cpu_set_t set;
    long cores = sched_getaffinity(0, sizeof set, &set) == 0
                     ? CPU_COUNT(&set) : sysconf(_SC_NPROCESSORS_ONLN);
    if (cores < 2)
        return 0;
    return cores - 1 > 8 ? 8 : (int)(cores - 1);
}
