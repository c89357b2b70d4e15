/*
 * test_daemon_buffer.c — rtomod's reference-counted buffers and their pools
 * (daemon/buffer.c) on their own:
 *   - a pool hands a returned buffer out again (the same memory, its
 *     contents kept), keeps at most `keep` of them and frees the rest;
 *   - buffers still out when the pool closes stay valid until their last
 *     reference goes (ASan and valgrind see the frees);
 *   - a pool with page-locked buffers locks at most locked_max of them at
 *     a time, and only where the engine can (a GPU visible: with none,
 *     rtomo_host_alloc gives ordinary memory and no buffer says locked);
 *     a locked buffer freed makes room for the next one to be locked.
 */
#include "config.h"

#include <check.h>
#include <string.h>

#include "check_run.h"
#include "rtomo_engine.h"
#include "rtomod_buffer.h"

START_TEST(pool_reuses_and_bounds_what_it_keeps)
{
    rtomod_buffer_pool *pool = rtomod_buffer_pool_new(4096, 2);
    ck_assert(pool);
    rtomod_buffer *b[3];
    for (int i = 0; i < 3; i++) {
        ck_assert(b[i] = rtomod_buffer_pool_get(pool));
        ck_assert_uint_eq(b[i]->size, 4096);
        memset(b[i]->data, 'a' + i, 4096);
    }
    /* Returned in order 0, 1, 2: two are kept (the third is freed), and
     * they come back last in, first out, with their contents. */
    for (int i = 0; i < 3; i++)
        rtomod_buffer_unref(b[i]);
    rtomod_buffer *again = rtomod_buffer_pool_get(pool);
    ck_assert_ptr_eq(again, b[1]);
    ck_assert_int_eq(again->data[4095], 'b');
    rtomod_buffer *next = rtomod_buffer_pool_get(pool);
    ck_assert_ptr_eq(next, b[0]);
    /* A second reference keeps a buffer out after the first goes. */
    rtomod_buffer_ref(next);
    rtomod_buffer_unref(next);
    ck_assert_int_eq(next->data[0], 'a');
    /* Closed with both out: they stay usable, then free the pool. */
    rtomod_buffer_pool_close(pool);
    memset(again->data, 0, 4096);
    rtomod_buffer_unref(again);
    rtomod_buffer_unref(next);
}
END_TEST

START_TEST(pool_locks_at_most_locked_max)
{
    const int gpu = rtomo_cuda_device_count() > 0;
    const size_t size = 1 << 20;
    rtomod_buffer_pool *pool = rtomod_buffer_pool_new_locked(size, 4, 2);
    ck_assert(pool);
    rtomod_buffer *b[4];
    int locked = 0;
    for (int i = 0; i < 4; i++) {
        ck_assert(b[i] = rtomod_buffer_pool_get(pool));
        memset(b[i]->data, i, size);    /* every page writable */
        locked += b[i]->locked;
    }
    ck_assert_int_eq(locked, gpu ? 2 : 0);
    ck_assert_int_eq(rtomod_buffer_pool_locked(pool), locked);
    /* The first two were locked (with a GPU); give one back beyond what
     * the pool keeps, so that it is freed, and the next new one is locked
     * in its place. */
    rtomod_buffer_pool *small = rtomod_buffer_pool_new_locked(size, 1, 1);
    ck_assert(small);
    rtomod_buffer *s1 = rtomod_buffer_pool_get(small);
    rtomod_buffer *s2 = rtomod_buffer_pool_get(small);
    ck_assert(s1 && s2);
    ck_assert_int_eq(s1->locked, gpu);
    ck_assert_int_eq(s2->locked, 0);
    rtomod_buffer_unref(s2);            /* kept: the pool keeps one */
    rtomod_buffer_unref(s1);            /* freed: the pool is full */
    ck_assert_int_eq(rtomod_buffer_pool_locked(small), 0);
    rtomod_buffer *s3 = rtomod_buffer_pool_get(small);   /* s2 again */
    rtomod_buffer *s4 = rtomod_buffer_pool_get(small);   /* new */
    ck_assert_ptr_eq(s3, s2);
    ck_assert_int_eq(s4->locked, gpu);
    ck_assert_int_eq(rtomod_buffer_pool_locked(small), gpu);
    rtomod_buffer_unref(s3);
    rtomod_buffer_unref(s4);
    rtomod_buffer_pool_close(small);
    for (int i = 0; i < 4; i++)
        rtomod_buffer_unref(b[i]);
    rtomod_buffer_pool_close(pool);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("daemon_buffer");
    TCase *tc = tcase_create("buffer");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, pool_reuses_and_bounds_what_it_keeps);
    tcase_add_test(tc, pool_locks_at_most_locked_max);
    suite_add_tcase(s, tc);
    return rtomo_check_run(s);
}
