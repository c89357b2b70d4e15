/*
 * decode_pool.c — the event loop's decoding helpers
 * (rtomod_decode_pool.h): a generation counter under a mutex wakes the
 * helpers for each run; the items are claimed with an atomic word that
 * holds the run's generation beside the next item; the thread that
 * finishes the last item wakes the caller.
 *
 * The caller waits for the items, not for the helpers: a helper that
 * wakes late (its core busy with a worker or ZeroMQ's threads) finds its
 * run over and sleeps again, instead of holding up the loop, which under
 * the former "every helper checks out" rule waited on the slowest wake-up
 * of up to 8 helpers for every image even when the work was done.  That
 * is also why a claim carries the generation: a helper that copied the
 * run it woke for can never take an item of the next run with the last
 * run's function.
 */
#include "config.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "rtomod_decode_pool.h"

/* A run, as the helpers copy it under the lock. */
typedef struct run {
    uint32_t generation;
    void (*fn)(void *ctx, int i);
    void *ctx;
    int n;
} run;

struct rtomod_decode_pool {
    pthread_mutex_t lock;
    pthread_cond_t wake, done;
    pthread_t *threads;
    int n_threads;
    int stopping;
    run current;                /* the latest run, under lock */
    /* generation << 32 | next item: a claim succeeds only on its own
     * run's generation (a 32-bit count: a helper would have to sleep
     * through 2^32 runs between waking and claiming to be confused). */
    _Atomic uint64_t claim;
    atomic_int finished;        /* items of the current run done */
};

/* Item i of r, or -1 when r has no item left or is no longer current. */
static int claim_item(rtomod_decode_pool *p, const run *r)
{
    uint64_t c = atomic_load(&p->claim);
    for (;;) {
        if ((uint32_t)(c >> 32) != r->generation ||
            (uint32_t)c >= (uint32_t)r->n)
            return -1;
        if (atomic_compare_exchange_weak(&p->claim, &c, c + 1))
            return (int)(uint32_t)c;
    }
}

/* Claim and run items of r until none are left; whoever finishes the
 * last one wakes the caller. */
static void work(rtomod_decode_pool *p, const run *r)
{
    int i;
    while ((i = claim_item(p, r)) >= 0) {
        r->fn(r->ctx, i);
        if (atomic_fetch_add(&p->finished, 1) + 1 == r->n) {
            pthread_mutex_lock(&p->lock);
            pthread_cond_signal(&p->done);
            pthread_mutex_unlock(&p->lock);
        }
    }
}

static void *helper(void *arg)
{
    rtomod_decode_pool *p = arg;
    uint32_t seen = 0;
    pthread_mutex_lock(&p->lock);
    for (;;) {
        while (!p->stopping && p->current.generation == seen)
            pthread_cond_wait(&p->wake, &p->lock);
        if (p->stopping)
            break;
        run r = p->current;
        seen = r.generation;
        pthread_mutex_unlock(&p->lock);
        work(p, &r);
        pthread_mutex_lock(&p->lock);
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
    atomic_init(&p->claim, 0);
    atomic_init(&p->finished, 0);
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
    run r = {p->current.generation + 1, fn, ctx, n};
    if (r.generation == 0)      /* 0 is what a new helper has seen */
        r.generation = 1;
    p->current = r;
    atomic_store(&p->finished, 0);
    atomic_store(&p->claim, (uint64_t)r.generation << 32);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->lock);
    work(p, &r);
    pthread_mutex_lock(&p->lock);
    while (atomic_load(&p->finished) < n)
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
