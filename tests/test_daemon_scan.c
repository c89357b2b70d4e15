/*
 * test_daemon_scan.c — tomography scans through the real rtomod (CPU
 * backend, loopback): a phantom scan end to end, compared with the CPU
 * engine called directly on the same frames (the daemon must add nothing
 * but float rounding) and with the phantom's ground truth; projections out
 * of order and missing; slice selection, ROI and interpolation from the
 * scan; scans back to back; several CPU workers splitting the slices
 * give exactly what one worker gives, and their finishers keep each
 * worker's order.
 */
#include "config.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "daemon_harness.h"
#include "rtomo_sim.h"

/* The daemon and the direct engine run the same code on the same frames;
 * only the order of floating-point sums (threads) may differ. */
#define SAME_AS_ENGINE 1e-5

/* Check the slices of `scan` (n_rows images of width x height, in set
 * order) against `reference` and their own headers. */
static void check_slices(daemon_inbox *in, const char *scan, const int *rows,
                         int n_rows, const float *reference, int width,
                         int height, const int roi[4])
{
    daemon_wait_images(in, RTOMO_TOPIC_SLICE, scan, n_rows);
    ck_assert_int_eq(daemon_count_images(in, RTOMO_TOPIC_SLICE, scan), n_rows);
    size_t pixels = (size_t)width * (size_t)height;
    for (int i = 0; i < n_rows; i++) {
        const daemon_image *im = daemon_find_image(in, RTOMO_TOPIC_SLICE, scan,
                                                   -1, i);
        ck_assert_msg(im, "slice %d of scan %s is missing", i, scan);
        ck_assert_int_eq(im->h.count, n_rows);
        ck_assert_int_eq(im->h.slice, rows[i]);
        ck_assert_int_eq(im->h.width, width);
        ck_assert_int_eq(im->h.height, height);
        ck_assert_int_eq(im->h.dtype, RTOMO_DTYPE_F32);
        for (int k = 0; k < 4; k++)
            ck_assert_int_eq(im->h.roi[k], roi[k]);
        ck_assert_uint_eq(im->size, pixels * sizeof(float));
        const float *got = im->data;
        const float *want = reference + pixels * (size_t)i;
        double scale = test_max_abs(want, pixels);
        double diff = test_max_abs_diff(got, want, pixels);
        ck_assert_msg(diff <= SAME_AS_ENGINE * scale,
                      "slice %d (row %d): max difference %g to the engine "
                      "(scale %g)", i, rows[i], diff, scale);
        /* The header's statistics describe the payload (float sums in
         * blocks: a few float roundings of the largest value). */
        daemon_assert_image_stats(im, 1e-6);
        ck_assert(im->h.latency_ms >= 0 && im->h.compute_ms > 0);
    }
}

static const int FULL_96[4] = {0, 0, 96, 96};

START_TEST(phantom_scan_end_to_end)
{
    daemon_session t;
    daemon_session_open(&t, NULL, 1);
    rtomo_client *c = t.c;
    daemon_inbox *in = &t.in;

    daemon_scan s;
    daemon_scan_make(&s, "phantom-1", 96, 4, 120, 2, 3, 0xdae0001);
    daemon_send_scan(c, &s);
    const int rows[4] = {0, 1, 2, 3};
    float *ref = daemon_reference_slices(&s, rows, 4, NULL, NULL);
    check_slices(in, "phantom-1", rows, 4, ref, 96, 96, FULL_96);
    daemon_wait_event(in, "scan_complete", NULL, "phantom-1", 0);
    ck_assert_ptr_null(daemon_find_event(in, "missing_projections", NULL,
                                         NULL));

    /* Against the truth: row 2 crosses the phantom's small features.  The
     * large ellipse is flat: its mean must come out right (measured error
     * 0.8 %; a wrong scale or sign gives 50 % and more).  The L2 error in
     * the head is dominated by the edges at 96 pixels (measured 0.223). */
    const daemon_image *im = daemon_find_image(in, RTOMO_TOPIC_SLICE,
                                               "phantom-1", -1, 2);
    rtomo_phantom ph;
    rtomo_phantom_init(&ph, 96, 4);
    float *truth = malloc(sizeof(float) * 96 * 96);
    unsigned char *mask = malloc(96 * 96);
    rtomo_phantom_slice(&ph, 2, 96, truth);
    ck_assert(rtomo_phantom_region_mask(&ph, 2, 96,
                                        RTOMO_PHANTOM_LARGE_ELLIPSE, 2.0,
                                        mask) > 50);
    double want = rtomo_masked_mean(truth, mask, 96 * 96);
    double got = rtomo_masked_mean(im->data, mask, 96 * 96);
    printf("large ellipse mean: %.5f, truth %.5f\n", got, want);
    ck_assert_msg(fabs(got - want) < 0.02 * want,
                  "large ellipse mean %g, truth %g", got, want);
    ck_assert(rtomo_phantom_region_mask(&ph, 2, 96, RTOMO_PHANTOM_HEAD, 2.0,
                                        mask) > 1000);
    double head = rtomo_masked_relative_error(im->data, truth, mask, 96 * 96);
    printf("head relative L2 error: %.4f\n", head);
    ck_assert_msg(head < 0.3, "head relative error %.4f", head);

    json_t *status = daemon_status(c);
    ck_assert_str_eq(json_string_value(json_object_get(status, "state")),
                     "idle");
    ck_assert(json_is_null(json_object_get(status, "scan")));
    json_t *counters = json_object_get(status, "counters");
    /* begin + 2 darks + 3 flats + 120 projections + end */
    ck_assert_int_eq(json_integer_value(json_object_get(counters, "accepted")),
                     127);
    ck_assert_int_eq(json_integer_value(json_object_get(counters, "rejected")),
                     0);
    ck_assert_int_eq(json_integer_value(json_object_get(counters, "dropped")),
                     0);
    json_decref(status);

    free(truth);
    free(mask);
    free(ref);
    daemon_scan_free(&s);
    daemon_session_close(&t);
}
END_TEST

START_TEST(out_of_order_and_missing_projections)
{
    daemon_session t;
    daemon_session_open(&t, NULL, 2);
    rtomo_client *c = t.c;
    daemon_inbox *in = &t.in;

    const int n_proj = 90, n_missing = 7;
    daemon_scan s;
    daemon_scan_make(&s, "shuffled", 64, 3, n_proj, 1, 2, 0xdae0002);
    uint64_t seed = 0xdae0002;
    int *order = daemon_shuffled(n_proj, &seed);
    unsigned char received[90];
    memset(received, 1, sizeof received);
    int first_missing = n_proj;
    for (int i = 0; i < n_missing; i++) {
        received[order[i]] = 0;
        first_missing = order[i] < first_missing ? order[i] : first_missing;
    }
    daemon_send_begin(c, &s);
    daemon_send_fields(c, &s);
    /* Two connections: frames interleave in the daemon as well. */
    for (int i = n_missing; i < n_proj; i++)
        daemon_send_projection(c, &s, order[i]);
    daemon_send_end(c, &s);

    const rtomo_event *ev = daemon_wait_event(in, "missing_projections",
                                              NULL, "shuffled", 0);
    ck_assert_int_eq(ev->index, first_missing);
    char expect[64];
    snprintf(expect, sizeof expect, "%d of %d projections missing", n_missing,
             n_proj);
    ck_assert_msg(strstr(ev->message, expect), "event says: %s", ev->message);
    const int rows[3] = {0, 1, 2};
    float *ref = daemon_reference_slices(&s, rows, 3, received, NULL);
    const int full[4] = {0, 0, 64, 64};
    check_slices(in, "shuffled", rows, 3, ref, 64, 64, full);
    daemon_wait_event(in, "scan_complete", NULL, "shuffled", 0);

    free(ref);
    free(order);
    daemon_scan_free(&s);
    daemon_session_close(&t);
}
END_TEST

/* The scan's own slices, ROI and interpolation win over the configuration;
 * single-slice batches; a second scan begins while the first is still
 * being reconstructed. */
START_TEST(scan_settings_and_back_to_back_scans)
{
    daemon_session t;
    const char *args[] = {"--set", "reconstruction.batch=1", NULL};
    daemon_session_open(&t, args, 1);
    rtomo_client *c = t.c;
    daemon_inbox *in = &t.in;

    daemon_scan a, b;
    daemon_scan_make(&a, "first", 80, 5, 100, 0, 1, 0xdae0003);
    daemon_scan_make(&b, "second", 80, 5, 100, 1, 1, 0xdae0004);
    daemon_scan_select_rows(&a, (const int[]){4, 1}, 2);    /* out of order */
    a.spec.given |= RTOMO_SPEC_HAS_ROI | RTOMO_SPEC_HAS_INTERP;
    const int roi[4] = {10, 20, 40, 30};
    a.spec.geometry.roi_x = roi[0];
    a.spec.geometry.roi_y = roi[1];
    a.spec.geometry.roi_width = roi[2];
    a.spec.geometry.roi_height = roi[3];
    a.spec.geometry.interp = RTOMO_INTERP_NEAREST;
    daemon_send_scan(c, &a);
    daemon_send_scan(c, &b);

    const int rows_a[2] = {1, 4};           /* published in row order */
    float *ref_a = daemon_reference_slices(&a, rows_a, 2, NULL, roi);
    check_slices(in, "first", rows_a, 2, ref_a, 40, 30, roi);

    const int rows_b[5] = {0, 1, 2, 3, 4};
    const int full[4] = {0, 0, 80, 80};
    float *ref_b = daemon_reference_slices(&b, rows_b, 5, NULL, NULL);
    check_slices(in, "second", rows_b, 5, ref_b, 80, 80, full);
    daemon_wait_event(in, "scan_complete", NULL, "second", 0);
    ck_assert_int_eq(daemon_counter(c, "rejected"), 0);

    free(ref_a);
    free(ref_b);
    daemon_scan_free(&a);
    daemon_scan_free(&b);
    daemon_session_close(&t);
}
END_TEST

/* ZeroMQ orders each connection, not several: a frame may overtake its
 * scan_begin and a scan_end its last frame.  Whichever order the daemon
 * sees them in, the scan is complete (the pauses only make the overtaking
 * likely; the assertions hold in any order). */
START_TEST(frames_overtaking_begin_and_end_on_other_connections)
{
    daemon_session t;
    daemon_session_open(&t, NULL, 2);
    rtomo_client *c = t.c;
    daemon_inbox *in = &t.in;
    const struct timespec pause = {0, 50 * 1000 * 1000};

    daemon_scan s;
    daemon_scan_make(&s, "overtaken", 48, 2, 60, 0, 1, 0xdae0005);
    daemon_send_projection_via(c, &s, 0, 1);
    nanosleep(&pause, NULL);
    daemon_send_begin(c, &s);               /* begin: connection 0 */
    daemon_send_fields(c, &s);
    for (int p = 1; p < 59; p++)
        daemon_send_projection_via(c, &s, p, p % 2);
    daemon_send_end(c, &s);                 /* end: connection 0 */
    nanosleep(&pause, NULL);
    daemon_send_projection_via(c, &s, 59, 1);

    const int rows[2] = {0, 1};
    const int full[4] = {0, 0, 48, 48};
    float *ref = daemon_reference_slices(&s, rows, 2, NULL, NULL);
    check_slices(in, "overtaken", rows, 2, ref, 48, 48, full);
    daemon_wait_event(in, "scan_complete", NULL, "overtaken", 0);
    ck_assert_ptr_null(daemon_find_event(in, "missing_projections", NULL,
                                         NULL));
    ck_assert_int_eq(daemon_counter(c, "rejected"), 0);

    free(ref);
    daemon_scan_free(&s);
    daemon_session_close(&t);
}
END_TEST

/* A worker slower than ingest: its queue stays within queue.frames (the
 * loop stops reading instead), and nothing is lost. */
START_TEST(back_pressure_bounds_the_queue_and_loses_nothing)
{
    daemon_session t;
    const char *args[] = {"--set", "queue.frames=3", NULL};
    daemon_session_open(&t, args, 1);
    rtomo_client *c = t.c;
    daemon_inbox *in = &t.in;

    /* Slices 0 and 255 keep all 256 rows: every frame is filtered in full
     * (milliseconds each), while it arrives in a fraction of that. */
    daemon_scan s;
    daemon_scan_make(&s, "pressed", 1024, 256, 60, 0, 1, 0xdae0006);
    daemon_scan_select_rows(&s, (const int[]){0, 255}, 2);
    daemon_send_scan(c, &s);

    long deepest = 0;
    while (daemon_count_images(in, RTOMO_TOPIC_SLICE, "pressed") < 2) {
        json_t *st = daemon_status(c);
        long work = (long)json_integer_value(json_object_get(json_object_get(
            json_object_get(st, "telemetry"), "queues"), "work"));
        deepest = work > deepest ? work : deepest;
        json_decref(st);
        daemon_inbox_pump(in, 5);
    }
    printf("deepest work queue seen: %ld (bound 3)\n", deepest);
    /* The bound, plus the reconstruction job queued at scan_end. */
    ck_assert_int_le(deepest, 3 + 1);
    const int rows[2] = {0, 255};
    const int full[4] = {0, 0, 1024, 1024};
    float *ref = daemon_reference_slices(&s, rows, 2, NULL, NULL);
    check_slices(in, "pressed", rows, 2, ref, 1024, 1024, full);
    ck_assert_int_eq(daemon_counter(c, "dropped"), 0);
    ck_assert_int_eq(daemon_counter(c, "accepted"), 1 + 1 + 60 + 1);

    free(ref);
    daemon_scan_free(&s);
    daemon_session_close(&t);
}
END_TEST

/* Run scan s through a daemon with the given extra arguments; returns the
 * n_rows slices (set order) and checks them against the engine. */
static float *slices_through_daemon(const daemon_scan *s,
                                    const char *const *args, const int *rows,
                                    int n_rows, const int roi[4])
{
    daemon_session t;
    daemon_session_open(&t, args, 1);
    daemon_send_scan(t.c, s);
    float *ref = daemon_reference_slices(s, rows, n_rows, NULL, roi);
    check_slices(&t.in, s->spec.scan, rows, n_rows, ref, roi[2], roi[3], roi);
    size_t pixels = (size_t)roi[2] * (size_t)roi[3];
    float *out = malloc(sizeof(float) * pixels * (size_t)n_rows);
    ck_assert(out);
    for (int i = 0; i < n_rows; i++)
        memcpy(out + pixels * (size_t)i,
               daemon_find_image(&t.in, RTOMO_TOPIC_SLICE, s->spec.scan, -1,
                                 i)->data, pixels * sizeof(float));
    json_t *status = daemon_status(t.c);
    printf("%zu workers\n", json_array_size(json_object_get(status,
                                                            "workers")));
    json_decref(status);
    free(ref);
    daemon_session_close(&t);
    return out;
}

/* engine.workers = 3: the rows are split in three plans, every projection
 * goes to all three, and the slices merge into one set with the same
 * indices and values as from one worker.  Not bit for bit: the CPU filter
 * transforms two rows at once as one complex row, and which rows pair up
 * depends on the rows a plan keeps (measured: 3.5e-7 of the largest
 * value; the engine itself is checked to 1e-5). */
START_TEST(several_workers_match_one_worker)
{
    daemon_scan s;
    daemon_scan_make(&s, "split", 64, 7, 72, 1, 2, 0xdae0007);
    s.spec.slices.kind = RTOMO_SLICES_RANGE;
    s.spec.slices.first = 1;
    s.spec.slices.count = 5;
    s.spec.slices.step = 1;
    s.spec.given |= RTOMO_SPEC_HAS_SLICES;
    const int rows[5] = {1, 2, 3, 4, 5};
    const int full[4] = {0, 0, 64, 64};
    const char *one[] = {"--set", "engine.workers=1", NULL};
    const char *three[] = {"--set", "engine.workers=3", "--set",
                           "reconstruction.batch=1", NULL};
    float *a = slices_through_daemon(&s, one, rows, 5, full);
    float *b = slices_through_daemon(&s, three, rows, 5, full);
    size_t n = 64 * 64 * 5;
    double diff = test_max_abs_diff(a, b, n), scale = test_max_abs(a, n);
    printf("three workers vs one: max difference %.3g (scale %.3g)\n", diff,
           scale);
    ck_assert_msg(diff <= SAME_AS_ENGINE * scale, "three workers differ "
                  "from one by %g (scale %g)", diff, scale);
    free(a);
    free(b);
    daemon_scan_free(&s);
}
END_TEST

/* Many small slices in single-slice batches through three workers, each
 * with three finisher threads, so that units of one worker are finished
 * side by side and could overtake each other: every slice still arrives,
 * equal to the engine's and with its own statistics; each worker's part
 * of the set (contiguous rows, split as scan_tomo.c does) arrives in row
 * order; and scan_complete comes after the last slice. */
START_TEST(finishers_keep_each_workers_order)
{
    enum { WIDTH = 32, ROWS = 60, WORKERS = 3 };
    const char *args[] = {"--set", "engine.workers=3", "--set",
                          "reconstruction.batch=1", "--set",
                          "publish.stats_threads=3", NULL};
    daemon_session t;
    daemon_session_open(&t, args, 1);
    daemon_scan s;
    daemon_scan_make(&s, "many", WIDTH, ROWS, 48, 1, 1, 0xdae0008);
    daemon_send_scan(t.c, &s);
    daemon_wait_event(&t.in, "scan_complete", NULL, "many", 0);
    ck_assert_int_eq(daemon_count_images(&t.in, RTOMO_TOPIC_SLICE, "many"),
                     ROWS);

    int rows[ROWS], last[WORKERS];
    for (int i = 0; i < ROWS; i++)
        rows[i] = i;
    for (int w = 0; w < WORKERS; w++)
        last[w] = -1;
    for (int i = 0; i < t.in.n_images; i++) {
        const rtomo_image_header *h = &t.in.images[i].h;
        int w = 0;
        while (w + 1 < WORKERS && h->index >= ROWS * (w + 1) / WORKERS)
            w++;
        ck_assert_msg(h->index > last[w], "slice %d of worker %d arrived "
                      "after slice %d", h->index, w, last[w]);
        last[w] = h->index;
    }
    const int full[4] = {0, 0, WIDTH, WIDTH};
    float *ref = daemon_reference_slices(&s, rows, ROWS, NULL, NULL);
    check_slices(&t.in, "many", rows, ROWS, ref, WIDTH, WIDTH, full);
    ck_assert_int_eq(daemon_counter(t.c, "dropped"), 0);

    free(ref);
    daemon_scan_free(&s);
    daemon_session_close(&t);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {
        phantom_scan_end_to_end,
        out_of_order_and_missing_projections,
        scan_settings_and_back_to_back_scans,
        frames_overtaking_begin_and_end_on_other_connections,
        back_pressure_bounds_the_queue_and_loses_nothing,
        several_workers_match_one_worker,
        finishers_keep_each_workers_order,
    };
    return daemon_run_tests("daemon_scan", tests,
                            (int)(sizeof tests / sizeof tests[0]), 120);
}
