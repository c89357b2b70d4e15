/*
 * test_daemon_finisher.c — rtomod's finisher (daemon/finisher.c) on its
 * own, with real buffers and random images:
 *   - the statistics of float32 and uint16 images of awkward sizes (empty,
 *     around the vector width and the block size, large) match a double
 *     precision scan of the pixels;
 *   - with several threads finishing units of very different sizes, every
 *     result leaves exactly once and in push order, also when the finisher
 *     is stopped while units are still queued;
 *   - a full finisher blocks the pusher until a unit is delivered;
 *   - images of an aborted scan are delivered without statistics.
 */
#include "config.h"

#include <check.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check_run.h"
#include "rtomo_sim.h"
#include "rtomod_buffer.h"
#include "rtomod_finisher.h"

/* ---------------------------------------------------------- collector ---- */

/* What the deliver callback saw, in delivery order. */
typedef struct collector {
    pthread_mutex_t lock;
    pthread_cond_t changed;
    rtomod_result **got;        /* kept results (keep_results) */
    int64_t *seq;               /* the seq of every result delivered */
    int n, cap;
    int keep_results;           /* 0: free each result once recorded */
    int gate_closed;            /* deliveries wait while set */
    int entered;                /* deliveries begun */
} collector;

static void collector_init(collector *c, int cap, int keep_results)
{
    memset(c, 0, sizeof *c);
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->changed, NULL);
    c->cap = cap;
    c->keep_results = keep_results;
    c->got = calloc((size_t)cap, sizeof *c->got);
    c->seq = calloc((size_t)cap, sizeof *c->seq);
    ck_assert(c->got && c->seq);
}

static void result_release(rtomod_result *r)
{
    rtomod_buffer_unref(r->buffer);
    free(r);
}

static void collector_free(collector *c)
{
    for (int i = 0; i < c->n; i++)
        if (c->got[i])
            result_release(c->got[i]);
    free(c->got);
    free(c->seq);
    pthread_mutex_destroy(&c->lock);
    pthread_cond_destroy(&c->changed);
}

/* The rtomod_deliver_fn: record (no assertions off the test's thread). */
static void collect(void *ctx, rtomod_result *r)
{
    collector *c = ctx;
    pthread_mutex_lock(&c->lock);
    c->entered++;
    pthread_cond_broadcast(&c->changed);
    while (c->gate_closed)
        pthread_cond_wait(&c->changed, &c->lock);
    if (c->n < c->cap) {
        c->seq[c->n] = r->seq;
        c->got[c->n] = c->keep_results ? r : NULL;
    }
    c->n++;
    pthread_mutex_unlock(&c->lock);
    if (!c->keep_results)
        result_release(r);
}

static void open_gate(collector *c)
{
    pthread_mutex_lock(&c->lock);
    c->gate_closed = 0;
    pthread_cond_broadcast(&c->changed);
    pthread_mutex_unlock(&c->lock);
}

static void wait_entered(collector *c, int n)
{
    pthread_mutex_lock(&c->lock);
    while (c->entered < n)
        pthread_cond_wait(&c->changed, &c->lock);
    pthread_mutex_unlock(&c->lock);
}

/* ------------------------------------------------------------ results ---- */

/* An image result of `n` random samples (uint16 or float32) in a buffer of
 * its own, statistics NaN until finished. */
static rtomod_result *random_image(uint64_t serial, int64_t seq, size_t n,
                                   int is_u16, uint64_t *rng)
{
    rtomod_result *r = calloc(1, sizeof *r);
    size_t bytes = n * (is_u16 ? sizeof(uint16_t) : sizeof(float));
    ck_assert(r && (r->buffer = rtomod_buffer_new(bytes ? bytes : 1)));
    r->kind = RTOMOD_RESULT_IMAGE;
    r->serial = serial;
    r->seq = seq;
    r->header.dtype = is_u16 ? RTOMO_DTYPE_U16 : RTOMO_DTYPE_F32;
    r->header.min = r->header.max = r->header.mean = NAN;
    r->data = r->buffer->data;
    r->size = bytes;
    /* Floats around an offset, so that the mean is not near 0. */
    double offset = 1000.0 * (rtomo_random_uniform(rng) - 0.5);
    for (size_t i = 0; i < n; i++) {
        if (is_u16)
            ((uint16_t *)r->buffer->data)[i] =
                (uint16_t)(rtomo_random_next(rng) & 0xffff);
        else
            ((float *)r->buffer->data)[i] =
                (float)(offset + 100.0 * rtomo_random_normal(rng));
    }
    return r;
}

static rtomod_result *plain_result(rtomod_result_kind kind, uint64_t serial,
                                   int64_t seq)
{
    rtomod_result *r = calloc(1, sizeof *r);
    ck_assert(r);
    r->kind = kind;
    r->serial = serial;
    r->seq = seq;
    return r;
}

/* Link results into a unit list. */
static rtomod_result *unit_of(rtomod_result **r, int n)
{
    for (int i = 0; i + 1 < n; i++)
        r[i]->next = r[i + 1];
    r[n - 1]->next = NULL;
    return r[0];
}

static rtomod_finisher *start(int threads, int capacity, collector *c,
                              const _Atomic uint64_t *abort_serial)
{
    char error[256];
    rtomod_finisher *f = rtomod_finisher_start(threads, capacity, collect, c,
                                               abort_serial, error,
                                               sizeof error);
    ck_assert_msg(f, "finisher: %s", error);
    return f;
}

/* -------------------------------------------------------------- tests ---- */

/* Float sums in blocks: a lane adds 4096 / 16 = 256 samples (lane 0 up to
 * 15 more) in float, so the mean is off by at most that many float
 * roundings of the largest sample (bound doubled). */
#define MEAN_TOLERANCE (512 * 0x1p-24)

START_TEST(statistics_match_the_pixels)
{
    static const size_t sizes[] = {0, 1, 15, 16, 17, 4095, 4096, 4097,
                                   65536 + 3};
    enum { N_SIZES = sizeof sizes / sizeof sizes[0], N = 2 * N_SIZES + 4 };
    uint64_t rng = 0xf1a15e1;
    collector c;
    collector_init(&c, N, 1);
    rtomod_finisher *f = start(2, 3, &c, NULL);
    int64_t seq = 0;
    for (int is_u16 = 0; is_u16 < 2; is_u16++)
        for (int i = 0; i < N_SIZES; i++) {
            rtomod_result *r = random_image(1, seq++, sizes[i], is_u16, &rng);
            rtomod_finisher_push(f, r);
        }
    for (int i = 0; i < 4; i++) {
        size_t n = 1 + (size_t)(rtomo_random_uniform(&rng) * 300000);
        rtomod_result *r = random_image(1, seq++, n, i % 2, &rng);
        rtomod_finisher_push(f, r);
    }
    rtomod_finisher_stop(f);
    ck_assert_int_eq(c.n, N);

    for (int i = 0; i < N; i++) {
        const rtomod_result *r = c.got[i];
        int is_u16 = r->header.dtype == RTOMO_DTYPE_U16;
        size_t n = r->size / (is_u16 ? 2 : 4);
        double lo = n ? INFINITY : 0, hi = n ? -INFINITY : 0, sum = 0;
        for (size_t k = 0; k < n; k++) {
            double v = is_u16 ? ((const uint16_t *)r->data)[k]
                              : ((const float *)r->data)[k];
            lo = fmin(lo, v);
            hi = fmax(hi, v);
            sum += v;
        }
        double mean = n ? sum / (double)n : 0;
        /* min and max are samples: exact. */
        ck_assert_msg(r->header.min == lo && r->header.max == hi,
                      "%zu %s samples: min %g max %g, expected %g %g", n,
                      is_u16 ? "uint16" : "float", r->header.min,
                      r->header.max, lo, hi);
        double tol = MEAN_TOLERANCE * fmax(fabs(lo), fabs(hi));
        ck_assert_msg(fabs(r->header.mean - mean) <= tol,
                      "%zu %s samples: mean %.9g, expected %.9g (tolerance "
                      "%g)", n, is_u16 ? "uint16" : "float", r->header.mean,
                      mean, tol);
    }
    collector_free(&c);
}
END_TEST

/* Units alternate between large images and a few small results, so that
 * four threads finish them out of order; stop comes right after the last
 * push, with units still queued. */
START_TEST(results_leave_in_push_order)
{
    enum { UNITS = 300, MAX_PER_UNIT = 3 };
    uint64_t rng = 0x0bde4;
    collector c;
    collector_init(&c, UNITS * MAX_PER_UNIT, 0);
    rtomod_finisher *f = start(4, 5, &c, NULL);
    int64_t seq = 0;
    for (int u = 0; u < UNITS; u++) {
        rtomod_result *r[MAX_PER_UNIT];
        int n = 1 + (int)(rtomo_random_next(&rng) % MAX_PER_UNIT);
        int large = rtomo_random_uniform(&rng) < 0.3;
        for (int i = 0; i < n; i++) {
            if (i == n - 1 && n > 1)
                r[i] = plain_result(RTOMOD_RESULT_SET_DONE, 1, seq++);
            else
                r[i] = random_image(1, seq++, large ? 200000 : 16, i % 2,
                                    &rng);
        }
        rtomod_finisher_push(f, unit_of(r, n));
    }
    rtomod_finisher_stop(f);
    ck_assert_int_eq(c.n, seq);
    for (int i = 0; i < c.n; i++)
        ck_assert_msg(c.seq[i] == i, "delivery %d was result %lld", i,
                      (long long)c.seq[i]);
    collector_free(&c);
}
END_TEST

typedef struct pusher {
    rtomod_finisher *f;
    rtomod_result *unit;
    double waited;
    _Atomic int done;
} pusher;

static void *push_in_thread(void *arg)
{
    pusher *p = arg;
    p->waited = rtomod_finisher_push(p->f, p->unit);
    atomic_store(&p->done, 1);
    return NULL;
}

/* Capacity 2, one thread: unit A is being delivered (held at the gate), B
 * waits; pushing C must block until A is out. */
START_TEST(full_finisher_blocks_the_pusher)
{
    uint64_t rng = 0xb10c;
    collector c;
    collector_init(&c, 3, 0);
    c.gate_closed = 1;
    rtomod_finisher *f = start(1, 2, &c, NULL);
    rtomod_finisher_push(f, random_image(1, 0, 1000, 0, &rng));
    wait_entered(&c, 1);
    ck_assert(rtomod_finisher_push(f, random_image(1, 1, 1000, 0, &rng)) ==
              0.0);
    pusher p = {f, random_image(1, 2, 1000, 0, &rng), 0.0, 0};
    pthread_t t;
    ck_assert(pthread_create(&t, NULL, push_in_thread, &p) == 0);
    struct timespec pause = {0, 200 * 1000 * 1000};
    nanosleep(&pause, NULL);
    ck_assert_msg(!atomic_load(&p.done), "a push into a full finisher "
                  "returned without waiting");
    ck_assert_int_eq(rtomod_finisher_pending(f), 2);
    open_gate(&c);
    pthread_join(t, NULL);
    ck_assert_msg(p.waited >= 0.15, "the blocked push reports %.3f s",
                  p.waited);
    rtomod_finisher_stop(f);
    ck_assert_int_eq(c.n, 3);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(c.seq[i], i);
    collector_free(&c);
}
END_TEST

START_TEST(aborted_scan_goes_without_statistics)
{
    uint64_t rng = 0xab07;
    _Atomic uint64_t aborted = 7;
    collector c;
    collector_init(&c, 3, 1);
    rtomod_finisher *f = start(2, 2, &c, &aborted);
    rtomod_result *r[3] = {random_image(7, 0, 5000, 0, &rng),
                           random_image(8, 1, 5000, 1, &rng),
                           plain_result(RTOMOD_RESULT_DONE, 7, 2)};
    rtomod_finisher_push(f, unit_of(r, 3));
    rtomod_finisher_stop(f);
    ck_assert_int_eq(c.n, 3);
    ck_assert(isnan(c.got[0]->header.min) && isnan(c.got[0]->header.mean));
    ck_assert(!isnan(c.got[1]->header.min) && !isnan(c.got[1]->header.mean));
    ck_assert_int_eq(c.got[2]->kind, RTOMOD_RESULT_DONE);
    collector_free(&c);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("daemon_finisher");
    TCase *tc = tcase_create("finisher");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, statistics_match_the_pixels);
    tcase_add_test(tc, results_leave_in_push_order);
    tcase_add_test(tc, full_finisher_blocks_the_pusher);
    tcase_add_test(tc, aborted_scan_goes_without_statistics);
    suite_add_tcase(s, tc);
    return rtomo_check_run(s);
}
