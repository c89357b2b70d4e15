/*
 * cuda_fbp_copy.cu — parallel host memory copies for the CUDA FBP backend.
 *
 * Two host copies sit on the critical path of a reconstruction: every frame
 * into pinned staging (add_projection) and every slice from pinned output
 * buffers into the caller's array.  One core copies a few GB/s; a 2048^3
 * volume moves 16 GiB in and 32 GiB out, so both copies are split over a
 * few helper threads (and the calling thread) when they are large.  Small
 * copies stay on the calling thread: waking helpers costs more.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuda_fbp.h"

/* Copies below this many bytes are done by the caller alone. */
#define PARALLEL_MIN_BYTES ((size_t)1 << 20)
#define MAX_HELPERS 15

struct cuda_fbp_copier {
    int helpers;
    pthread_t threads[MAX_HELPERS];
    pthread_mutex_t lock;
    pthread_cond_t start, done;
    pthread_mutex_t user;           /* one parallel copy at a time */
    unsigned long generation;
    int pending, quit;
    const cuda_fbp_copy_segment *segs;
    int n_segs;
    size_t total;
};

typedef struct helper_arg {
    cuda_fbp_copier *c;
    int part;
} helper_arg;

/* Copy bytes [begin, end) of the concatenation of the segments. */
static void copy_range(const cuda_fbp_copy_segment *segs, int n, size_t begin,
                       size_t end)
{
    size_t offset = 0;
    for (int i = 0; i < n && offset < end; i++) {
        const size_t a = begin > offset ? begin - offset : 0;
        const size_t b = end - offset < segs[i].bytes ? end - offset : segs[i].bytes;
        if (a < b)
            memcpy((char *)segs[i].dst + a, (const char *)segs[i].src + a, b - a);
        offset += segs[i].bytes;
    }
}

/* Part `part` of `parts` of the current job, cut at 4 KiB boundaries. */
static void copy_part(const cuda_fbp_copier *c, int part, int parts)
{
    const size_t pages = (c->total + 4095) / 4096;
    size_t begin = pages * (size_t)part / (size_t)parts * 4096;
    size_t end = pages * (size_t)(part + 1) / (size_t)parts * 4096;
    if (end > c->total)
        end = c->total;
    if (begin < end)
        copy_range(c->segs, c->n_segs, begin, end);
}

static void *helper_main(void *p)
{
    helper_arg *arg = (helper_arg *)p;
    cuda_fbp_copier *c = arg->c;
    const int part = arg->part;
    free(arg);
    unsigned long seen = 0;
    pthread_mutex_lock(&c->lock);
    for (;;) {
        while (c->generation == seen && !c->quit)
            pthread_cond_wait(&c->start, &c->lock);
        if (c->quit)
            break;
        seen = c->generation;
        pthread_mutex_unlock(&c->lock);
        copy_part(c, part, c->helpers + 1);
        pthread_mutex_lock(&c->lock);
        if (--c->pending == 0)
            pthread_cond_signal(&c->done);
    }
    pthread_mutex_unlock(&c->lock);
    return NULL;
}

extern "C" cuda_fbp_copier *cuda_fbp_copier_create(void)
{
    cuda_fbp_copier *c = (cuda_fbp_copier *)calloc(1, sizeof *c);
    if (!c)
        return NULL;
    pthread_mutex_init(&c->lock, NULL);
    pthread_mutex_init(&c->user, NULL);
    pthread_cond_init(&c->start, NULL);
    pthread_cond_init(&c->done, NULL);
    /* Three quarters of the cores, the caller included: copies are bound
     * by memory bandwidth, which one H100 host reaches only with many
     * threads (pinned to pageable, overlapping the GPU's DMA: 33 GB/s with
     * 8 threads, 39 with 12, 41 with 15), and the engine's other threads
     * need a few cores.  Reading 32 GiB of resident slices at the end of
     * a 2048^3 scan is the copy this sizes. */
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int want = (int)(cores * 3 / 4) - 1;
    if (want > MAX_HELPERS)
        want = MAX_HELPERS;
    for (int i = 0; i < want; i++) {
        helper_arg *arg = (helper_arg *)malloc(sizeof *arg);
        if (!arg)
            break;
        arg->c = c;
        arg->part = i + 1;
        if (pthread_create(&c->threads[i], NULL, helper_main, arg) != 0) {
            free(arg);
            break;
        }
        c->helpers++;
    }
    return c;
}

extern "C" void cuda_fbp_copier_destroy(cuda_fbp_copier *c)
{
    if (!c)
        return;
    pthread_mutex_lock(&c->lock);
    c->quit = 1;
    pthread_cond_broadcast(&c->start);
    pthread_mutex_unlock(&c->lock);
    for (int i = 0; i < c->helpers; i++)
        pthread_join(c->threads[i], NULL);
    pthread_cond_destroy(&c->start);
    pthread_cond_destroy(&c->done);
    pthread_mutex_destroy(&c->lock);
    pthread_mutex_destroy(&c->user);
    free(c);
}

extern "C" void cuda_fbp_copy(cuda_fbp_copier *c, const cuda_fbp_copy_segment *segs,
                              int n_segs)
{
    size_t total = 0;
    for (int i = 0; i < n_segs; i++)
        total += segs[i].bytes;
    if (!c || c->helpers == 0 || total < PARALLEL_MIN_BYTES) {
        copy_range(segs, n_segs, 0, total);
        return;
    }
    pthread_mutex_lock(&c->user);
    pthread_mutex_lock(&c->lock);
    c->segs = segs;
    c->n_segs = n_segs;
    c->total = total;
    c->pending = c->helpers;
    c->generation++;
    pthread_cond_broadcast(&c->start);
    pthread_mutex_unlock(&c->lock);
    copy_part(c, 0, c->helpers + 1);
    pthread_mutex_lock(&c->lock);
    while (c->pending > 0)
        pthread_cond_wait(&c->done, &c->lock);
    pthread_mutex_unlock(&c->lock);
    pthread_mutex_unlock(&c->user);
}
