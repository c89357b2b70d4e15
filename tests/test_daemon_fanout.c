/*
 * test_daemon_fanout.c — beyond one daemon, and losses on the way out:
 *   - several daemons share one stream: the client fans every message out
 *     to each, each daemon takes the rows of its reconstruction.rows, and
 *     the union of what they publish (merged by one subscriber) equals what
 *     a single daemon publishes for the same stream: the same slices, with
 *     the same index and count, the same values;
 *   - the same when each daemon is sent only its rows of every frame
 *     ("rows", as rtomo-router sends them), and a frame without a row
 *     the daemon reconstructs is refused saying which rows it needs;
 *   - per-topic sequence numbers: a subscriber that falls behind loses
 *     messages (ZeroMQ drops them silently), and the gaps in "seq" account
 *     for every one of them.
 */
#include "config.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "daemon_harness.h"

#define SAME_AS_ENGINE 1e-5

/* Daemons 0 and 1 split the slices of `scan`; daemon 2 takes them all.
 * Every slice of daemon 2 comes from exactly one of the others, equal. */
static void check_union(daemon_inbox *in, const char *scan, const int *rows,
                        int n_rows, int split)
{
    for (int k = 0; k < 3; k++)
        daemon_wait_event(in, "scan_complete", NULL, scan, 0);
    for (int tries = 0;
         tries < 100 && (daemon_count_slices_from(in, 0, scan) +
                                 daemon_count_slices_from(in, 1, scan) <
                             n_rows ||
                         daemon_count_slices_from(in, 2, scan) < n_rows);
         tries++)
        daemon_inbox_pump(in, 100);
    ck_assert_int_eq(daemon_count_slices_from(in, 2, scan), n_rows);
    ck_assert_int_eq(daemon_count_slices_from(in, 0, scan) +
                         daemon_count_slices_from(in, 1, scan),
                     n_rows);
    for (int i = 0; i < n_rows; i++) {
        const daemon_image *whole = daemon_slice_from(in, 2, scan, rows[i]);
        int mine = rows[i] < split ? 0 : 1;
        const daemon_image *part = daemon_slice_from(in, mine, scan, rows[i]);
        ck_assert_msg(whole && part, "slice %d: from the single daemon %s, "
                      "from daemon %d %s", rows[i], whole ? "yes" : "no",
                      mine, part ? "yes" : "no");
        ck_assert_ptr_null(daemon_slice_from(in, 1 - mine, scan, rows[i]));
        ck_assert_int_eq(part->h.index, whole->h.index);
        ck_assert_int_eq(part->h.count, whole->h.count);
        ck_assert_int_eq(whole->h.index, i);
        ck_assert_int_eq(whole->h.count, n_rows);
        size_t n = whole->size / sizeof(float);
        ck_assert_uint_eq(part->size, whole->size);
        double scale = test_max_abs(whole->data, n);
        double diff = test_max_abs_diff(part->data, whole->data, n);
        ck_assert_msg(diff <= SAME_AS_ENGINE * scale, "slice %d differs by "
                      "%g (scale %g)", rows[i], diff, scale);
    }
}

/* Daemons 0 and 1 take rows 0..2 and 3..5 of a 6-row detector, daemon 2
 * all of them.  Daemon 1 does not keep received memory, so that frames of
 * some rows are made whole both ways (frame_rows.c: cleared heap memory,
 * or a fresh zero mapping). */
static void start_split(daemon_proc d[3])
{
    const char *low[] = {"--set", "reconstruction.rows={\"first\": 0, "
                         "\"count\": 3}", NULL};
    const char *high[] = {"--set", "reconstruction.rows={\"first\": 3, "
                          "\"count\": 3}", "--set",
                          "ingest.keep_buffers=false", NULL};
    daemon_start(&d[0], low);
    daemon_start(&d[1], high);
    daemon_start(&d[2], NULL);
}

START_TEST(two_daemons_split_one_stream)
{
    daemon_proc d[3];
    start_split(d);
    rtomo_client *c = daemon_connect_all(d, 3, NULL);
    daemon_inbox in;
    daemon_inbox_init(&in, c);

    /* All rows, as each daemon's configuration has it. */
    daemon_scan a;
    daemon_scan_make(&a, "shared-all", 64, 6, 72, 1, 2, 0xdae0501);
    daemon_send_scan(c, &a);
    const int all[6] = {0, 1, 2, 3, 4, 5};
    check_union(&in, "shared-all", all, 6, 3);
    /* Compared with the engine too: the single daemon is right. */
    float *ref = daemon_reference_slices(&a, all, 6, NULL, NULL);
    for (int i = 0; i < 6; i++) {
        const daemon_image *im = daemon_slice_from(&in, 2, "shared-all", i);
        double scale = test_max_abs(ref + 64 * 64 * i, 64 * 64);
        ck_assert(test_max_abs_diff(im->data, ref + 64 * 64 * i, 64 * 64) <=
                  SAME_AS_ENGINE * scale);
    }
    free(ref);

    /* The scan's own selection: each daemon takes its part of it. */
    daemon_scan b;
    daemon_scan_make(&b, "shared-some", 64, 6, 72, 0, 1, 0xdae0502);
    const int some[3] = {1, 4, 5};
    daemon_scan_select_rows(&b, some, 3);
    daemon_send_scan(c, &b);
    check_union(&in, "shared-some", some, 3, 3);
    ck_assert_int_eq(daemon_count_slices_from(&in, 0, "shared-some"), 1);
    ck_assert_int_eq(daemon_count_slices_from(&in, 1, "shared-some"), 2);

    daemon_scan_free(&a);
    daemon_scan_free(&b);
    daemon_inbox_free(&in);
    rtomo_client_close(c);
    for (int i = 0; i < 3; i++)
        daemon_stop(&d[i]);
}
END_TEST

/* A client that only pushes, to daemon d. */
static rtomo_client *ingest_only(const daemon_proc *d)
{
    rtomo_client_options opt;
    rtomo_client_options_init(&opt);
    opt.ingest = d->ingest;
    rtomo_error err;
    rtomo_client *c = rtomo_client_open(&opt, &err);
    ck_assert_msg(c, "client: %s", err.message);
    return c;
}

START_TEST(daemons_take_frames_of_their_rows_only)
{
    daemon_proc d[3];
    start_split(d);
    rtomo_client *c = daemon_connect_all(d, 3, NULL);
    rtomo_client *to_low = ingest_only(&d[0]), *to_high = ingest_only(&d[1]);
    daemon_inbox in;
    daemon_inbox_init(&in, c);

    /* Each of the two gets its own rows of every frame (as rtomo-router
     * sends them), the third the whole frames: the same slices. */
    daemon_scan a;
    daemon_scan_make(&a, "rows-only", 64, 6, 72, 1, 2, 0xdae0503);
    daemon_send_scan_rows(to_low, &a, 0, 3);
    daemon_send_scan_rows(to_high, &a, 3, 3);
    rtomo_client *to_all = ingest_only(&d[2]);
    daemon_send_scan(to_all, &a);
    const int all[6] = {0, 1, 2, 3, 4, 5};
    check_union(&in, "rows-only", all, 6, 3);

    /* Frames without a row the daemon reconstructs are refused, named. */
    daemon_scan b;
    daemon_scan_make(&b, "rows-short", 64, 6, 12, 0, 1, 0xdae0504);
    daemon_send_scan_rows(to_low, &b, 1, 2);
    const rtomo_event *ev = daemon_wait_event(&in, "rejected",
                                              "shape_mismatch", "rows-short",
                                              0);
    ck_assert_msg(strstr(ev->message, "rows 1..2") &&
                  strstr(ev->message, "reads rows 0..2"), "%s", ev->message);

    daemon_scan_free(&a);
    daemon_scan_free(&b);
    daemon_inbox_free(&in);
    rtomo_client_close(to_low);
    rtomo_client_close(to_high);
    rtomo_client_close(to_all);
    rtomo_client_close(c);
    for (int i = 0; i < 3; i++)
        daemon_stop(&d[i]);
}
END_TEST

/* What a subscriber read, by sequence number. */
typedef struct seq_tally {
    long received;
    uint64_t first, last, missed;
} seq_tally;

/* Read everything the slow subscriber holds (until 500 ms of silence),
 * checking that seq grows. */
static void drain(rtomo_client *slow, seq_tally *t)
{
    rtomo_error err;
    for (;;) {
        rtomo_published m = {0};
        if (rtomo_client_receive(slow, &m, 500, &err) != RTOMO_OK)
            break;
        ck_assert(m.has_seq);
        if (t->received > 0)
            ck_assert_msg(m.seq > t->last, "seq %llu after %llu",
                          (unsigned long long)m.seq,
                          (unsigned long long)t->last);
        else
            t->first = m.seq;
        t->last = m.seq;
        t->missed += m.missed;
        t->received++;
        rtomo_published_clear(&m);
    }
}

/* A subscriber that reads nothing while 48 slices of 1 MB go out (more
 * than its one-message queue, the daemon's 16 and the kernel's buffers
 * hold): ZeroMQ drops slices for it alone, silently.  The next slice it
 * does get (of a second scan) shows the gap: seq says how many were lost,
 * message for message.  A subscriber that reads (batches of 4 slices,
 * back-projected after the scan: resident slices would all be ready at
 * once, a burst beyond its 16-message queue) loses none. */
START_TEST(sequence_gaps_count_lost_messages)
{
    daemon_proc d;
    const char *args[] = {"--set", "publish.sndhwm=16", "--set",
                          "reconstruction.batch=4", "--set",
                          "reconstruction.streaming=false", NULL};
    daemon_start(&d, args);
    rtomo_client_options opt;
    rtomo_client_options_init(&opt);
    opt.publish = d.publish;
    opt.receive_hwm = 1;
    opt.receive_buffer = 1024;
    rtomo_error err;
    rtomo_client *slow = rtomo_client_open(&opt, &err);
    ck_assert(slow);
    ck_assert(rtomo_client_subscribe(slow, RTOMO_TOPIC_SLICE, &err) ==
              RTOMO_OK);
    rtomo_client *c = daemon_connect(&d, 1);    /* subscribed: all topics */
    daemon_inbox in;
    daemon_inbox_init(&in, c);

    daemon_scan s, next;
    daemon_scan_make(&s, "lossy", 512, 48, 40, 0, 1, 0xdae0503);
    daemon_scan_make(&next, "next", 32, 1, 20, 0, 1, 0xdae0504);
    daemon_send_scan(c, &s);
    daemon_wait_images(&in, RTOMO_TOPIC_SLICE, "lossy", 48);
    seq_tally t = {0};
    drain(slow, &t);
    daemon_send_scan(c, &next);
    daemon_wait_images(&in, RTOMO_TOPIC_SLICE, "next", 1);
    drain(slow, &t);
    printf("slow subscriber: %ld slices received, %llu lost (seq %llu to "
           "%llu)\n", t.received, (unsigned long long)t.missed,
           (unsigned long long)t.first, (unsigned long long)t.last);
    ck_assert_int_gt(t.received, 0);
    ck_assert_uint_eq(t.last, 48);      /* the next scan's slice */
    ck_assert_msg(t.missed > 0, "no slice was lost: the test did not "
                  "overflow the subscriber");
    ck_assert_uint_eq((uint64_t)t.received + t.missed, t.last - t.first + 1);
    ck_assert_uint_eq(rtomo_client_missed(slow), t.missed);
    /* The reading subscriber lost nothing, and saw every slice's seq. */
    ck_assert_int_eq(daemon_count_images(&in, RTOMO_TOPIC_SLICE, NULL), 49);
    for (int i = 0; i < 49; i++)
        ck_assert_uint_eq(in.images[i].h.seq, (uint64_t)i);
    ck_assert_uint_eq(rtomo_client_missed(c), 0);

    daemon_scan_free(&s);
    daemon_scan_free(&next);
    daemon_inbox_free(&in);
    rtomo_client_close(slow);
    rtomo_client_close(c);
    daemon_stop(&d);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {
        two_daemons_split_one_stream,
        daemons_take_frames_of_their_rows_only,
        sequence_gaps_count_lost_messages,
    };
    return daemon_run_tests("daemon_fanout", tests,
                            (int)(sizeof tests / sizeof tests[0]), 120);
}
