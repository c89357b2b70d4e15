/*
 * cpu_pool.c — the worker pool behind the CPU backends' parallel
 * loops (see cpu_pool.h).
 *
 * Threads are started once per plan and sleep on a condition variable
 * between jobs: a frame's filtering takes well under a millisecond on small
 * detectors, so starting threads per call would cost more than the work.
 * Every worker checks in for every job (even when there is nothing left for
 * it to take), which lets run() return only when no worker can still touch
 * the job's context.
 */
#include "config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_pool.h"

struct cpu_pool {
    pthread_mutex_t lock;
    pthread_cond_t job_posted;      /* generation advanced, or stopping */
    pthread_cond_t job_finished;    /* the last worker checked out */
    unsigned long generation;       /* one per job */
    int stopping;
    int busy;                       /* workers not yet done with the job */

    cpu_pool_task_fn fn;             /* the current job */
    void *ctx;
    int n_tasks;
    atomic_int next_task;

    int n_threads;                  /* started threads, caller excluded */
    pthread_t *threads;
    struct worker_arg { cpu_pool *pool; int worker; } *args;
};

/* Take tasks of the current job until none are left. */
static void drain_tasks(cpu_pool *pool, int worker)
{
    for (;;) {
        int task = atomic_fetch_add_explicit(&pool->next_task, 1,
                                             memory_order_relaxed);
        if (task >= pool->n_tasks)
            return;
        pool->fn(pool->ctx, task, worker);
    }
}

static void *worker_main(void *p)
{
    struct worker_arg *arg = p;
    cpu_pool *pool = arg->pool;
    unsigned long seen = 0;
    pthread_mutex_lock(&pool->lock);
    for (;;) {
        while (!pool->stopping && pool->generation == seen)
            pthread_cond_wait(&pool->job_posted, &pool->lock);
        if (pool->stopping)
            break;
        seen = pool->generation;
        pthread_mutex_unlock(&pool->lock);
        drain_tasks(pool, arg->worker);
        pthread_mutex_lock(&pool->lock);
        if (--pool->busy == 0)
            pthread_cond_signal(&pool->job_finished);
    }
    pthread_mutex_unlock(&pool->lock);
    return NULL;
}

static void stop_threads(cpu_pool *pool, int started)
{
    pthread_mutex_lock(&pool->lock);
    pool->stopping = 1;
    pthread_cond_broadcast(&pool->job_posted);
    pthread_mutex_unlock(&pool->lock);
    for (int i = 0; i < started; i++)
        pthread_join(pool->threads[i], NULL);
}

static void free_pool(cpu_pool *pool)
{
    pthread_cond_destroy(&pool->job_finished);
    pthread_cond_destroy(&pool->job_posted);
    pthread_mutex_destroy(&pool->lock);
    free(pool->threads);
    free(pool->args);
    free(pool);
}

rtomo_status cpu_pool_create(int n_threads, cpu_pool **out,
                                 rtomo_error *err)
{
    *out = NULL;
    if (n_threads < 1)
        n_threads = 1;
    cpu_pool *pool = calloc(1, sizeof *pool);
    if (!pool)
        return rtomo_set_error(err, RTOMO_E_NOMEM,
                               "out of memory for a thread pool");
    pthread_mutex_init(&pool->lock, NULL);
    pthread_cond_init(&pool->job_posted, NULL);
    pthread_cond_init(&pool->job_finished, NULL);
    atomic_init(&pool->next_task, 0);
    pool->n_threads = n_threads - 1;
    pool->threads = calloc((size_t)n_threads, sizeof *pool->threads);
    pool->args = calloc((size_t)n_threads, sizeof *pool->args);
    if (!pool->threads || !pool->args) {
        free_pool(pool);
        return rtomo_set_error(err, RTOMO_E_NOMEM,
                               "out of memory for a thread pool");
    }
    for (int i = 0; i < pool->n_threads; i++) {
        pool->args[i].pool = pool;
        pool->args[i].worker = i + 1;   /* worker 0 is the caller */
        int rc = pthread_create(&pool->threads[i], NULL, worker_main,
                                &pool->args[i]);
        if (rc != 0) {
            stop_threads(pool, i);
            free_pool(pool);
            return rtomo_set_error(err, RTOMO_E_BACKEND,
                                   "could not start CPU worker thread %d of "
                                   "%d: %s", i + 2, n_threads, strerror(rc));
        }
    }
    *out = pool;
    return RTOMO_OK;
}

void cpu_pool_destroy(cpu_pool *pool)
{
    if (!pool)
        return;
    stop_threads(pool, pool->n_threads);
    free_pool(pool);
}

int cpu_pool_size(const cpu_pool *pool) { return pool->n_threads + 1; }

void cpu_pool_run(cpu_pool *pool, int n_tasks, cpu_pool_task_fn fn,
                      void *ctx)
{
    if (n_tasks <= 0)
        return;
    if (n_tasks == 1 || pool->n_threads == 0) {
        /* Waking the workers would cost more than it could save. */
        for (int t = 0; t < n_tasks; t++)
            fn(ctx, t, 0);
        return;
    }
    pthread_mutex_lock(&pool->lock);
    pool->fn = fn;
    pool->ctx = ctx;
    pool->n_tasks = n_tasks;
    atomic_store(&pool->next_task, 0);
    pool->busy = pool->n_threads;
    pool->generation++;
    pthread_cond_broadcast(&pool->job_posted);
    pthread_mutex_unlock(&pool->lock);

    drain_tasks(pool, 0);

    pthread_mutex_lock(&pool->lock);
    while (pool->busy > 0)
        pthread_cond_wait(&pool->job_finished, &pool->lock);
    pthread_mutex_unlock(&pool->lock);
}
