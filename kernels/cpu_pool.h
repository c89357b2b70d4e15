/*
 * cpu_pool.h — a fixed pool of worker threads that runs "parallel for"
 * jobs for the CPU backends (FBP and SBDX): a job is n independent tasks
 * and a function; the calling thread takes part, so a pool of n threads
 * starts n - 1 of its own.
 */
#ifndef RTOMO_CPU_POOL_H
#define RTOMO_CPU_POOL_H

#include "rtomo_engine.h"

typedef struct cpu_pool cpu_pool;

/* One task of a job.  `worker` is in [0, pool size) and is unique among the
 * tasks running at the same moment, so it can index per-worker scratch. */
typedef void (*cpu_pool_task_fn)(void *ctx, int task, int worker);

/* Start a pool of n_threads >= 1 (the caller counts as one) into *out.
 * Fails with RTOMO_E_NOMEM or RTOMO_E_BACKEND (a thread would not start). */
rtomo_status cpu_pool_create(int n_threads, cpu_pool **out,
                                 rtomo_error *err);

/* Stop and join the threads.  NULL is allowed. */
void cpu_pool_destroy(cpu_pool *pool);

/* Threads that take part in a job, the caller included. */
int cpu_pool_size(const cpu_pool *pool);

/* Run fn(ctx, task, worker) for every task in [0, n_tasks) and return when
 * all have finished.  Tasks are handed out dynamically, in increasing order,
 * so uneven tasks balance.  Not reentrant: one job per pool at a time. */
void cpu_pool_run(cpu_pool *pool, int n_tasks, cpu_pool_task_fn fn,
                      void *ctx);

#endif
