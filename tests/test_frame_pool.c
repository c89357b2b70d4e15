/*
 * test_frame_pool.c — the detector inputs' recycled frame buffers
 * (daemon/frame_pool.c): a freed message's buffer is handed out again,
 * the pool keeps no more than its bytes allow and nothing of another
 * size, buffers given back by other threads (as rtomod's workers do) come
 * back whole, and messages that outlive the closed pool free it last
 * (run under ASan in CI, which catches a leak or a use after free).
 */
#include "config.h"

#include <check.h>
#include <pthread.h>
#include <string.h>

#include <zmq.h>

#include "check_run.h"
#include "rtomod_frame_pool.h"

#define MB ((size_t)1 << 20)

static void expect_counts(rtomod_frame_pool *p, int held, int lent)
{
    int h, l;
    rtomod_frame_pool_counts(p, &h, &l);
    ck_assert_int_eq(h, held);
    ck_assert_int_eq(l, lent);
}

START_TEST(buffer_comes_back)
{
    rtomod_frame_pool *p = rtomod_frame_pool_new(4 * MB);
    ck_assert_ptr_nonnull(p);
    zmq_msg_t a;
    ck_assert_int_eq(rtomod_frame_pool_msg(p, MB, &a), 0);
    ck_assert_uint_eq(zmq_msg_size(&a), MB);
    void *first = zmq_msg_data(&a);
    ck_assert_uint_eq((uintptr_t)first % 64, 0);
    memset(first, 0x5a, MB);                /* all of it is ours */
    expect_counts(p, 0, 1);
    zmq_msg_close(&a);
    expect_counts(p, 1, 0);
    ck_assert_int_eq(rtomod_frame_pool_msg(p, MB, &a), 0);
    ck_assert_ptr_eq(zmq_msg_data(&a), first);  /* the same pages again */
    zmq_msg_close(&a);
    rtomod_frame_pool_close(p);
}
END_TEST

START_TEST(keeps_at_most_its_bytes)
{
    rtomod_frame_pool *p = rtomod_frame_pool_new(3 * MB);
    zmq_msg_t m[5];
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(rtomod_frame_pool_msg(p, MB, &m[i]), 0);
    expect_counts(p, 0, 5);
    for (int i = 0; i < 5; i++)
        zmq_msg_close(&m[i]);
    expect_counts(p, 3, 0);                 /* 3 MB kept, 2 freed */
    /* Another size (a new detector): the kept ones go. */
    ck_assert_int_eq(rtomod_frame_pool_msg(p, 2 * MB, &m[0]), 0);
    expect_counts(p, 0, 1);
    zmq_msg_close(&m[0]);
    expect_counts(p, 1, 0);
    /* A buffer larger than the pool's bytes is still kept alone. */
    ck_assert_int_eq(rtomod_frame_pool_msg(p, 8 * MB, &m[0]), 0);
    zmq_msg_close(&m[0]);
    expect_counts(p, 1, 0);
    rtomod_frame_pool_close(p);
}
END_TEST

static void *close_message(void *arg)
{
    zmq_msg_close(arg);
    return NULL;
}

START_TEST(given_back_by_other_threads)
{
    enum { N = 16 };
    rtomod_frame_pool *p = rtomod_frame_pool_new(64 * MB);
    zmq_msg_t m[N];
    pthread_t t[N];
    for (int round = 0; round < 50; round++) {
        for (int i = 0; i < N; i++) {
            ck_assert_int_eq(rtomod_frame_pool_msg(p, 64 * 1024, &m[i]), 0);
            memset(zmq_msg_data(&m[i]), i, 64 * 1024);
        }
        for (int i = 0; i < N; i++)
            ck_assert_int_eq(pthread_create(&t[i], NULL, close_message,
                                            &m[i]), 0);
        for (int i = 0; i < N; i++)
            pthread_join(t[i], NULL);
        expect_counts(p, N, 0);
    }
    rtomod_frame_pool_close(p);
}
END_TEST

START_TEST(outlives_its_owner)
{
    rtomod_frame_pool *p = rtomod_frame_pool_new(4 * MB);
    zmq_msg_t kept, lent;
    ck_assert_int_eq(rtomod_frame_pool_msg(p, MB, &kept), 0);
    ck_assert_int_eq(rtomod_frame_pool_msg(p, MB, &lent), 0);
    zmq_msg_close(&kept);
    /* A frame still queued in a worker when the input closes. */
    rtomod_frame_pool_close(p);
    memset(zmq_msg_data(&lent), 1, MB);
    zmq_msg_close(&lent);                   /* frees the pool too */
    rtomod_frame_pool_close(NULL);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("frame_pool");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, buffer_comes_back);
    tcase_add_test(tc, keeps_at_most_its_bytes);
    tcase_add_test(tc, given_back_by_other_threads);
    tcase_add_test(tc, outlives_its_owner);
    suite_add_tcase(s, tc);
    return rtomo_check_run(s);
}
