/*
 * cuda_fbp_workers.cu — one host thread per slot (device) of a CUDA FBP
 * plan.  A reconstruction keeps every device busy only if each has a host
 * thread that feeds it and copies its finished slices out; the caller's
 * thread hands a job to every worker and waits for all of them.  A worker
 * selects its device once, at start.
 */
#include "config.h"

#include <string.h>

#include "cuda_fbp.h"

/* Thread body: wait for a job, run it, report, until told to quit. */
static void *worker_main(void *arg)
{
    cuda_fbp_slot *slot = (cuda_fbp_slot *)arg;
    cudaError_t device_rc = cudaSetDevice(slot->device);
    pthread_mutex_lock(&slot->lock);
    for (;;) {
        while (!slot->has_job && !slot->quit)
            pthread_cond_wait(&slot->wake, &slot->lock);
        if (slot->quit)
            break;
        pthread_mutex_unlock(&slot->lock);
        rtomo_error err;
        rtomo_clear_error(&err);
        rtomo_status st =
            device_rc != cudaSuccess
                ? rtomo_cuda_error(&err, device_rc, "cudaSetDevice", __FILE__, __LINE__)
                : slot->job(slot, slot->job_arg, &err);
        pthread_mutex_lock(&slot->lock);
        slot->job_status = st;
        slot->job_error = err;
        slot->has_job = 0;
        pthread_cond_broadcast(&slot->idle);
    }
    pthread_mutex_unlock(&slot->lock);
    return NULL;
}

extern "C" rtomo_status cuda_fbp_worker_start(cuda_fbp_slot *slot,
                                              rtomo_error *err)
{
    if (pthread_mutex_init(&slot->lock, NULL) != 0)
        return rtomo_set_error(err, RTOMO_E_NOMEM, "cannot create a mutex");
    if (pthread_cond_init(&slot->wake, NULL) != 0 ||
        pthread_cond_init(&slot->idle, NULL) != 0) {
        pthread_mutex_destroy(&slot->lock);
        return rtomo_set_error(err, RTOMO_E_NOMEM,
                               "cannot create a condition variable");
    }
    if (pthread_create(&slot->thread, NULL, worker_main, slot) != 0) {
        pthread_cond_destroy(&slot->wake);
        pthread_cond_destroy(&slot->idle);
        pthread_mutex_destroy(&slot->lock);
        return rtomo_set_error(err, RTOMO_E_NOMEM,
                               "cannot start the worker thread of CUDA device %d",
                               slot->device);
    }
    slot->thread_started = 1;
    return RTOMO_OK;
}

extern "C" void cuda_fbp_worker_stop(cuda_fbp_slot *slot)
{
    if (!slot->thread_started)
        return;
    pthread_mutex_lock(&slot->lock);
    slot->quit = 1;
    pthread_cond_broadcast(&slot->wake);
    pthread_mutex_unlock(&slot->lock);
    pthread_join(slot->thread, NULL);
    pthread_cond_destroy(&slot->wake);
    pthread_cond_destroy(&slot->idle);
    pthread_mutex_destroy(&slot->lock);
    slot->thread_started = 0;
}

extern "C" rtomo_status cuda_fbp_workers_run(
    cuda_fbp_impl *impl,
    rtomo_status (*fn)(cuda_fbp_slot *, void *, rtomo_error *), void *args,
    size_t arg_stride, rtomo_error *err)
{
    for (int i = 0; i < impl->n_slots; i++) {
        cuda_fbp_slot *slot = &impl->slots[i];
        pthread_mutex_lock(&slot->lock);
        slot->job = fn;
        slot->job_arg = (char *)args + arg_stride * (size_t)i;
        slot->has_job = 1;
        pthread_cond_broadcast(&slot->wake);
        pthread_mutex_unlock(&slot->lock);
    }
    rtomo_status first = RTOMO_OK;
    for (int i = 0; i < impl->n_slots; i++) {
        cuda_fbp_slot *slot = &impl->slots[i];
        pthread_mutex_lock(&slot->lock);
        while (slot->has_job)
            pthread_cond_wait(&slot->idle, &slot->lock);
        if (slot->job_status != RTOMO_OK && first == RTOMO_OK) {
            first = slot->job_status;
            if (err)
                *err = slot->job_error;
        }
        pthread_mutex_unlock(&slot->lock);
    }
    return first;
}
