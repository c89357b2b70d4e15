/*
 * cpu_sbdx_parallel.c — the CPU SBDX backend's parallel loop: tasks handed
 * out in chunks through an atomic counter to short-lived threads.  A frame
 * takes milliseconds to seconds, so starting threads per call costs little
 * and keeps the backend free of persistent worker state.
 */
#include "config.h"

#include <pthread.h>
#include <stdatomic.h>

#include "cpu_sbdx.h"

#define MAX_THREADS 256

typedef struct parallel_run {
    atomic_long next;
    long n_tasks, chunk;
    cpu_sbdx_task_fn fn;
    void *ctx;
} parallel_run;

static void *run_tasks(void *arg)
{
    parallel_run *run = arg;
    for (;;) {
        long first = atomic_fetch_add(&run->next, run->chunk);
        if (first >= run->n_tasks)
            break;
        long end = first + run->chunk < run->n_tasks ? first + run->chunk
                                                     : run->n_tasks;
        for (long t = first; t < end; t++)
            run->fn(run->ctx, t);
    }
    return NULL;
}

void cpu_sbdx_parallel_for(int threads, long n_tasks, long chunk,
                           cpu_sbdx_task_fn fn, void *ctx)
{
    if (chunk < 1)
        chunk = 1;
    long chunks = (n_tasks + chunk - 1) / chunk;
    if (threads > MAX_THREADS)
        threads = MAX_THREADS;
    if (threads > chunks)
        threads = (int)chunks;

    parallel_run run = {.n_tasks = n_tasks, .chunk = chunk, .fn = fn,
                        .ctx = ctx};
    atomic_init(&run.next, 0);
    pthread_t helpers[MAX_THREADS];
    int started = 0;
    while (started < threads - 1 &&
           pthread_create(&helpers[started], NULL, run_tasks, &run) == 0)
        started++;
    run_tasks(&run);
    for (int i = 0; i < started; i++)
        pthread_join(helpers[i], NULL);
}
