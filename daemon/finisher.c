/*
 * finisher.c — image statistics and delivery of a worker's results in
 * order (see rtomod_finisher.h).
 *
 * Several threads finish units side by side; each unit carries a ticket
 * (its push order), and a thread that is done with its unit waits for its
 * ticket's turn before delivering, so results leave exactly in push order
 * whichever thread is faster.  Queued units sit in a ring of `capacity`
 * slots: a push never allocates.
 */
#include "config.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rtomod_finisher.h"

typedef struct unit {
    rtomod_result *results;
    int n_results;
    uint64_t ticket;
} unit;

struct rtomod_finisher {
    pthread_mutex_t lock;
    pthread_cond_t work;        /* a unit was queued, or stopping */
    pthread_cond_t room;        /* a unit was delivered */
    pthread_cond_t turn;        /* the next ticket may deliver */
    unit *ring;                 /* `capacity` slots */
    int capacity;
    int first, queued;          /* units in the ring */
    int held;                   /* queued or being finished */
    int results_held;
    uint64_t next_ticket;       /* of the next push */
    uint64_t delivered;         /* tickets delivered so far */
    int stopping;
    rtomod_deliver_fn deliver;
    void *ctx;
    const _Atomic uint64_t *abort_serial;
    int n_threads;
    pthread_t *threads;
};

/* -------------------------------------------------------- statistics ---- */

/* min, max and mean of n samples (float or uint16), read in blocks with
 * LANES independent minima, maxima and float sums so that the compiler
 * vectorises the loop: an SBDX frame has 32 M plane samples, and a
 * sample-by-sample double loop costs 3-4 times the memory time. */
#define STATS_LANES 16
#define STATS_BLOCK 4096        /* samples per float partial sum */

typedef struct sample_stats {
    float lo[STATS_LANES], hi[STATS_LANES];
    double sum;
} sample_stats;

#define STATS_BLOCK_LOOP(type)                                              \
    static void stats_block_##type(const type *x, size_t n, sample_stats *st) \
    {                                                                       \
        float part[STATS_LANES] = {0};                                      \
        for (size_t j = 0; j + STATS_LANES <= n; j += STATS_LANES)          \
            for (int k = 0; k < STATS_LANES; k++) {                         \
                float v = (float)x[j + k];                                  \
                st->lo[k] = v < st->lo[k] ? v : st->lo[k];                  \
                st->hi[k] = v > st->hi[k] ? v : st->hi[k];                  \
                part[k] += v;                                               \
            }                                                               \
        for (size_t j = n - n % STATS_LANES; j < n; j++) {                  \
            float v = (float)x[j];                                          \
            st->lo[0] = v < st->lo[0] ? v : st->lo[0];                      \
            st->hi[0] = v > st->hi[0] ? v : st->hi[0];                      \
            part[0] += v;                                                   \
        }                                                                   \
        for (int k = 0; k < STATS_LANES; k++)                               \
            st->sum += part[k];                                             \
    }
STATS_BLOCK_LOOP(float)
STATS_BLOCK_LOOP(uint16_t)

/* Fill h->min, max and mean from the image's samples (0 for none). */
void rtomod_image_stats(const void *data, int is_u16, size_t n,
                        rtomo_image_header *h)
{
    sample_stats st = {.sum = 0.0};
    for (int k = 0; k < STATS_LANES; k++) {
        st.lo[k] = INFINITY;
        st.hi[k] = -INFINITY;
    }
    for (size_t i = 0; i < n; i += STATS_BLOCK) {
        size_t m = n - i < STATS_BLOCK ? n - i : STATS_BLOCK;
        if (is_u16)
            stats_block_uint16_t((const uint16_t *)data + i, m, &st);
        else
            stats_block_float((const float *)data + i, m, &st);
    }
    double lo = INFINITY, hi = -INFINITY;
    for (int k = 0; k < STATS_LANES; k++) {
        lo = st.lo[k] < lo ? st.lo[k] : lo;
        hi = st.hi[k] > hi ? st.hi[k] : hi;
    }
    h->min = n ? lo : 0.0;
    h->max = n ? hi : 0.0;
    h->mean = n ? st.sum / (double)n : 0.0;
}

/* A depth map's statistics leave out the pixels no plane measured
 * (RTOMO_SBDX_DEPTH_NONE): they are no depth.  A million samples: a plain
 * loop. */
static void depth_stats(const uint16_t *depth, size_t n, rtomo_image_header *h)
{
    unsigned lo = RTOMO_SBDX_DEPTH_NONE, hi = 0;
    double sum = 0.0;
    size_t measured = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned v = depth[i];
        if (v == RTOMO_SBDX_DEPTH_NONE)
            continue;
        lo = v < lo ? v : lo;
        hi = v > hi ? v : hi;
        sum += v;
        measured++;
    }
    h->min = measured ? lo : 0.0;
    h->max = measured ? hi : 0.0;
    h->mean = measured ? sum / (double)measured : 0.0;
}

/* The statistics of every image of the list, unless its scan was aborted. */
static void finish_results(const rtomod_finisher *f, rtomod_result *r)
{
    uint64_t aborted = f->abort_serial ? atomic_load(f->abort_serial) : 0;
    for (; r; r = r->next) {
        if (r->kind != RTOMOD_RESULT_IMAGE || (aborted && r->serial == aborted))
            continue;
        /* Measured by the engine already (resident slices, on the GPU). */
        if (isfinite(r->header.min) && isfinite(r->header.max) &&
            isfinite(r->header.mean))
            continue;
        int is_u16 = r->header.dtype == RTOMO_DTYPE_U16;
        if (strcmp(r->header.topic, RTOMO_TOPIC_DEPTH) == 0)
            depth_stats(r->data, r->size / 2, &r->header);
        else
            rtomod_image_stats(r->data, is_u16, r->size / (is_u16 ? 2 : 4),
                               &r->header);
    }
}

/* ----------------------------------------------------------- threads ---- */

/* The next unit to finish, waiting for one; 0 when the finisher stops and
 * nothing is left.  Called and returns with the lock held. */
static int take_unit(rtomod_finisher *f, unit *u)
{
    while (f->queued == 0 && !f->stopping)
        pthread_cond_wait(&f->work, &f->lock);
    if (f->queued == 0)
        return 0;
    *u = f->ring[f->first];
    f->first = (f->first + 1) % f->capacity;
    f->queued--;
    return 1;
}

/* Deliver unit u once every earlier unit is out.  Called and returns with
 * the lock held; delivers without it (only the ticket's owner may). */
static void deliver_in_turn(rtomod_finisher *f, const unit *u)
{
    while (f->delivered != u->ticket)
        pthread_cond_wait(&f->turn, &f->lock);
    pthread_mutex_unlock(&f->lock);
    rtomod_result *r = u->results;
    while (r) {
        rtomod_result *next = r->next;
        r->next = NULL;
        f->deliver(f->ctx, r);
        r = next;
    }
    pthread_mutex_lock(&f->lock);
    f->delivered++;
    f->held--;
    f->results_held -= u->n_results;
    pthread_cond_broadcast(&f->turn);
    pthread_cond_signal(&f->room);
}

static void *finisher_main(void *arg)
{
    rtomod_finisher *f = arg;
    unit u;
    pthread_mutex_lock(&f->lock);
    while (take_unit(f, &u)) {
        pthread_mutex_unlock(&f->lock);
        finish_results(f, u.results);
        pthread_mutex_lock(&f->lock);
        deliver_in_turn(f, &u);
    }
    pthread_mutex_unlock(&f->lock);
    return NULL;
}

/* ------------------------------------------------------------- public ---- */

static void finisher_free(rtomod_finisher *f)
{
    pthread_mutex_destroy(&f->lock);
    pthread_cond_destroy(&f->work);
    pthread_cond_destroy(&f->room);
    pthread_cond_destroy(&f->turn);
    free(f->ring);
    free(f->threads);
    free(f);
}

rtomod_finisher *rtomod_finisher_start(int threads, int capacity,
                                       rtomod_deliver_fn deliver, void *ctx,
                                       const _Atomic uint64_t *abort_serial,
                                       char *error, size_t error_size)
{
    threads = threads < 1 ? 1 : threads;
    capacity = capacity < 1 ? 1 : capacity;
    rtomod_finisher *f = calloc(1, sizeof *f);
    if (!f || !(f->ring = calloc((size_t)capacity, sizeof *f->ring)) ||
        !(f->threads = calloc((size_t)threads, sizeof *f->threads))) {
        if (f)
            free(f->ring);
        free(f);
        snprintf(error, error_size, "out of memory for a finisher");
        return NULL;
    }
    pthread_mutex_init(&f->lock, NULL);
    pthread_cond_init(&f->work, NULL);
    pthread_cond_init(&f->room, NULL);
    pthread_cond_init(&f->turn, NULL);
    f->capacity = capacity;
    f->deliver = deliver;
    f->ctx = ctx;
    f->abort_serial = abort_serial;
    int rc = 0;
    while (f->n_threads < threads &&
           (rc = pthread_create(&f->threads[f->n_threads], NULL,
                                finisher_main, f)) == 0)
        f->n_threads++;
    if (f->n_threads == 0) {
        snprintf(error, error_size, "cannot start a finisher thread: %s",
                 strerror(rc));
        finisher_free(f);
        return NULL;
    }
    return f;
}

static double now_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

double rtomod_finisher_push(rtomod_finisher *f, rtomod_result *list)
{
    if (!list)
        return 0.0;
    int n = 0;
    for (rtomod_result *r = list; r; r = r->next)
        n++;
    double waited = 0.0;
    pthread_mutex_lock(&f->lock);
    if (f->held >= f->capacity) {
        double t0 = now_seconds();
        while (f->held >= f->capacity)
            pthread_cond_wait(&f->room, &f->lock);
        waited = now_seconds() - t0;
    }
    unit *u = &f->ring[(f->first + f->queued) % f->capacity];
    u->results = list;
    u->n_results = n;
    u->ticket = f->next_ticket++;
    f->queued++;
    f->held++;
    f->results_held += n;
    pthread_cond_signal(&f->work);
    pthread_mutex_unlock(&f->lock);
    return waited;
}

int rtomod_finisher_pending(rtomod_finisher *f)
{
    pthread_mutex_lock(&f->lock);
    int n = f->results_held;
    pthread_mutex_unlock(&f->lock);
    return n;
}

void rtomod_finisher_stop(rtomod_finisher *f)
{
    if (!f)
        return;
    pthread_mutex_lock(&f->lock);
    f->stopping = 1;
    pthread_cond_broadcast(&f->work);
    pthread_mutex_unlock(&f->lock);
    for (int i = 0; i < f->n_threads; i++)
        pthread_join(f->threads[i], NULL);
    finisher_free(f);
}
