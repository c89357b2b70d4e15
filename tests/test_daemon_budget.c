/*
 * test_daemon_budget.c — nothing a sender sends may exhaust rtomod's
 * memory (admission control, the bounded early-frame hold, memory given
 * back), tried with the inputs that once got it killed or bloated:
 *   - an sbdx_begin asking for 4 GiB of planes, a scan_begin for a 16 GiB
 *     sinogram, a geometry of about a TiB, slices larger than
 *     publish.max_image_mb: each refused, over_budget, with the numbers and
 *     the setting in the message; rtomod's memory does not move;
 *   - two scans that each fit alone but not together: the second is
 *     refused while the first acquires, and admitted as soon as the first
 *     has ended (its plans close before the second's open);
 *   - a burst of 16 MiB frames for scans that do not exist: all rejected,
 *     the hold never above limits.early_mb, and the memory back to where it
 *     was once rtomod is idle.
 */
#include "config.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "daemon_harness.h"

/* Send a begin and expect its refusal as over_budget naming `setting`. */
static void expect_over_budget(daemon_session *t, const char *scan,
                               const char *header, const char *setting)
{
    int before = t->in.n_events;
    daemon_send_header(t->c, header);
    const rtomo_event *ev = daemon_wait_event(&t->in, "rejected", NULL, scan,
                                              before);
    ck_assert_msg(strcmp(ev->reason, "over_budget") == 0 &&
                  strstr(ev->message, setting), "%s: %s (%s)", scan,
                  ev->reason, ev->message);
    printf("%-10s -> %s: %s\n", scan, ev->reason, ev->message);
}

static double settled_mb(const daemon_proc *d)
{
    struct timespec pause = {2, 500 * 1000 * 1000};
    nanosleep(&pause, NULL);
    return daemon_resident_mb(d);
}

START_TEST(begins_beyond_the_budgets_are_refused)
{
    const char *args[] = {"--set", "limits.host_mb=3072", "--set",
                          "queue.mb=256", NULL};
    daemon_session t;
    daemon_session_open(&t, args, 1);
    double before = daemon_resident_mb(&t.d);
    /* 1000 x 1000 holes, shift 8: planes of 8000^2 float32 = 256 MB, 16 of
     * them: 4 GiB of planes. */
    expect_over_budget(&t, "planes4g",
        "{\"protocol\": 1, \"type\": \"sbdx_begin\", \"scan\": \"planes4g\", "
        "\"holes\": [1000, 1000], \"detector\": {\"width\": 4, \"height\": 4},"
        " \"shift\": 8, \"ratio_range\": {\"first\": 1.0, \"last\": 2.0, \"count\": 16}}", "max_image_mb");
    /* The same with planes small enough to publish, but many: 2 GiB of
     * planes held per set. */
    expect_over_budget(&t, "planes2g",
        "{\"protocol\": 1, \"type\": \"sbdx_begin\", \"scan\": \"planes2g\", "
        "\"holes\": [250, 250], \"detector\": {\"width\": 4, \"height\": 4},"
        " \"shift\": 8, \"ratio_range\": {\"first\": 1.0, \"last\": 2.0, \"count\": 128}}", "limits.host_mb");
    /* 2048 rows x 1024 projections x 2048 bins: a 16 GiB sinogram. */
    expect_over_budget(&t, "sino16g",
        "{\"protocol\": 1, \"type\": \"scan_begin\", \"scan\": \"sino16g\", "
        "\"detector\": {\"width\": 2048, \"height\": 2048}, "
        "\"projections\": 1024, \"reconstruction\": {\"slice_size\": 64}}",
        "limits.host_mb");
    /* About a TiB: every limit of the decoder at once. */
    expect_over_budget(&t, "tebibyte",
        "{\"protocol\": 1, \"type\": \"scan_begin\", \"scan\": \"tebibyte\", "
        "\"detector\": {\"width\": 65536, \"height\": 4096}, "
        "\"projections\": 1048576, \"reconstruction\": {\"slice_size\": 64}}",
        "limits.host_mb");
    /* Slices of 4096^2 float32, 64 MB each. */
    expect_over_budget(&t, "bigslice",
        "{\"protocol\": 1, \"type\": \"scan_begin\", \"scan\": \"bigslice\", "
        "\"detector\": {\"width\": 4096, \"height\": 1}, "
        "\"projections\": 8}", "publish.max_image_mb");
    /* Nothing was half-accepted: no scan started, no memory taken. */
    ck_assert_ptr_null(daemon_find_event(&t.in, "scan_started", NULL, NULL));
    json_t *st = daemon_status(t.c);
    json_t *memory = json_object_get(st, "memory");
    ck_assert(json_real_value(json_object_get(memory, "host_used_mb")) == 0);
    ck_assert(json_real_value(json_object_get(memory, "host_budget_mb")) ==
              3072 - 256 - 256);
    json_decref(st);
    daemon_assert_memory_growth(before, daemon_resident_mb(&t.d), 16,
                                "the refusals");
    daemon_session_close(&t);
}
END_TEST

/* Each scan holds more than half of the budget (96 rows x 240
 * projections x 1024 bins: about 170 MB with the filter's working set, in
 * a budget of 400 - 64 - 64 = 272 MB). */
START_TEST(scans_that_do_not_fit_together_wait_their_turn)
{
    const char *args[] = {"--set", "limits.host_mb=400", "--set",
                          "queue.mb=64", "--set", "limits.early_mb=64",
                          "--set", "reconstruction.slice_size=64", NULL};
    daemon_session t;
    daemon_session_open(&t, args, 1);
    daemon_scan a, b;
    daemon_scan_make(&a, "big-a", 1024, 96, 240, 0, 1, 0xdae0430);
    daemon_scan_make(&b, "big-b", 1024, 96, 240, 0, 1, 0xdae0431);
    daemon_send_begin(t.c, &a);
    daemon_wait_event(&t.in, "scan_started", NULL, "big-a", 0);
    json_t *st = daemon_status(t.c);
    double used = json_real_value(json_object_get(json_object_get(st,
                                                                  "memory"),
                                                  "host_used_mb"));
    printf("one scan holds %.1f MB of the 272 MB budget\n", used);
    ck_assert(used > 272 / 2 && used < 272);
    json_decref(st);

    daemon_send_begin(t.c, &b);
    const rtomo_event *ev = daemon_wait_event(&t.in, "rejected", "over_budget",
                                              "big-b", 0);
    ck_assert_msg(strstr(ev->message, "limits.host_mb"), "%s", ev->message);

    /* The first ends and the second begins right behind its end: the
     * first's plan closes before the second's opens on the worker, so the
     * second is admitted while the first still reconstructs. */
    daemon_send_fields(t.c, &a);
    for (int p = 0; p < 240; p++)
        daemon_send_projection(t.c, &a, p);
    daemon_send_end(t.c, &a);
    daemon_send_scan(t.c, &b);
    daemon_wait_event(&t.in, "scan_complete", NULL, "big-b", 0);
    const rtomo_event *a_done = daemon_find_event(&t.in, "scan_complete",
                                                  NULL, "big-a");
    const rtomo_event *b_started = daemon_find_event(&t.in, "scan_started",
                                                     NULL, "big-b");
    ck_assert(a_done && b_started);
    ck_assert_msg(b_started < a_done, "big-b began only after big-a was "
                  "reconstructed");
    ck_assert_int_eq(daemon_count_images(&t.in, RTOMO_TOPIC_SLICE, "big-a"),
                     96);
    ck_assert_int_eq(daemon_count_images(&t.in, RTOMO_TOPIC_SLICE, "big-b"),
                     96);
    st = daemon_status(t.c);
    ck_assert(json_real_value(json_object_get(json_object_get(st, "memory"),
                                              "host_used_mb")) == 0);
    json_decref(st);
    daemon_scan_free(&a);
    daemon_scan_free(&b);
    daemon_session_close(&t);
}
END_TEST

#define BURST 48
#define BURST_SHAPE "[2048, 4096]"
#define BURST_BYTES ((size_t)2048 * 4096 * 2)

/* 48 frames of 16 MiB (768 MiB) for scans that never begin, as fast as
 * they go: every one rejected unknown_scan, the hold within early_mb, and
 * rtomod's memory back near where it was once idle (it once kept 700 MB). */
START_TEST(a_burst_for_unknown_scans_leaves_no_memory_behind)
{
    const char *args[] = {"--set", "limits.early_mb=64", NULL};
    daemon_session t;
    daemon_session_open(&t, args, 1);
    double before = settled_mb(&t.d);
    uint16_t *frame = calloc(BURST_BYTES / 2, sizeof(uint16_t));
    ck_assert(frame);
    double peak = 0;
    for (int i = 0; i < BURST; i++) {
        char header[256];
        snprintf(header, sizeof header,
                 "{\"protocol\": 1, \"type\": \"projection\", \"scan\": "
                 "\"ghost-%d\", \"index\": 0, \"dtype\": \"uint16\", "
                 "\"shape\": " BURST_SHAPE "}", i % 4);
        rtomo_error err;
        ck_assert(rtomo_client_send_raw(t.c, 0, header, strlen(header), 2,
                                        frame, BURST_BYTES, &err) ==
                  RTOMO_OK);
        json_t *st = daemon_status(t.c);
        double held = json_real_value(json_object_get(
            json_object_get(st, "memory"), "early_used_mb"));
        json_decref(st);
        peak = held > peak ? held : peak;
        ck_assert_msg(held <= 64, "early frames hold %.0f MB", held);
    }
    free(frame);
    daemon_wait_counter(t.c, "rejected", BURST);
    ck_assert_int_eq(daemon_reject_counter(t.c, "unknown_scan"), BURST);
    printf("the early-frame hold peaked at %.0f MB of 64\n", peak);
    daemon_assert_memory_growth(before, settled_mb(&t.d), 48,
                                "48 frames of 16 MiB for unknown scans");
    daemon_session_close(&t);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {
        begins_beyond_the_budgets_are_refused,
        scans_that_do_not_fit_together_wait_their_turn,
        a_burst_for_unknown_scans_leaves_no_memory_behind,
    };
    return daemon_run_tests("daemon_budget", tests,
                            (int)(sizeof tests / sizeof tests[0]), 120);
}
