/*
 * test_daemon_stream.c — streaming reconstruction through the real rtomod
 * (CPU backend, loopback): the selected slices are resident from
 * scan_begin on and every projection is back-projected into them as it
 * arrives.  Checked here:
 *   - a scan sent out of order over two connections with projections
 *     missing gives the slices of the after-the-scan path (the CPU engine
 *     called directly on the projections received) within 1e-6 relative
 *     L2, and scan_started and status say the slices are resident;
 *   - with a memory budget too small for every slice, some are resident
 *     and the others back-projected after the scan ("streaming_partial"),
 *     with the same slices; with reconstruction.streaming off, none
 *     ("after_scan");
 *   - previews: every preview.every projections the resident slices are
 *     published on topic "preview", each equal to the reconstruction of
 *     the projections received so far, and counted;
 *   - planes of any orientation asked for on the control socket: a
 *     vertical plane through the volume equals the rows of the slices it
 *     crosses; bad planes are refused naming the field.
 */
#include "config.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon_harness.h"

/* Streaming sums the same terms as the after-the-scan path in chunks: the
 * two differ by float rounding (about 1e-7). */
#define SAME_AS_AFTER_SCAN 1e-6

/* The status of scan `id` among the scans in flight (borrowed from
 * status, which the caller frees), or NULL. */
static json_t *scan_status(json_t *status, const char *id)
{
    json_t *scans = json_object_get(status, "scans");
    for (size_t i = 0; i < json_array_size(scans); i++) {
        json_t *s = json_array_get(scans, i);
        if (strcmp(json_string_value(json_object_get(s, "id")), id) == 0)
            return s;
    }
    return NULL;
}

/* status.scans[id].resident.<key> */
static long resident_field(rtomo_client *c, const char *id, const char *key)
{
    json_t *status = daemon_status(c);
    json_t *s = scan_status(status, id);
    ck_assert_msg(s, "scan %s is not in status", id);
    json_t *r = json_object_get(s, "resident");
    ck_assert_msg(json_is_object(r), "status of %s has no \"resident\"", id);
    long v = (long)json_integer_value(json_object_get(r, key));
    json_decref(status);
    return v;
}

static double memory_mb(rtomo_client *c, const char *key)
{
    json_t *status = daemon_status(c);
    double v = json_number_value(json_object_get(
        json_object_get(status, "memory"), key));
    json_decref(status);
    return v;
}

/* Wait for the slices rows[0..n-1] of scan s and compare each with the
 * engine's after-the-scan reconstruction of the projections received. */
static void check_slices(daemon_inbox *in, const daemon_scan *s,
                         const int *rows, int n, const unsigned char *received)
{
    const char *id = s->spec.scan;
    daemon_wait_images(in, RTOMO_TOPIC_SLICE, id, n);
    float *ref = daemon_reference_slices(s, rows, n, received, NULL);
    const int size = s->spec.geometry.det_width;
    const size_t pixels = (size_t)size * (size_t)size;
    for (int i = 0; i < n; i++) {
        const daemon_image *im = daemon_find_image(in, RTOMO_TOPIC_SLICE, id,
                                                   -1, i);
        ck_assert_msg(im, "slice %d of %s is missing", i, id);
        ck_assert_int_eq(im->h.slice, rows[i]);
        double e = test_rel_l2(im->data, ref + pixels * (size_t)i, pixels);
        ck_assert_msg(e <= SAME_AS_AFTER_SCAN, "slice %d (row %d) of %s: "
                      "relative L2 %.3g to the after-the-scan path", i,
                      rows[i], id, e);
        daemon_assert_image_stats(im, 1e-6);
    }
    free(ref);
}

static const int ALL_6[6] = {0, 1, 2, 3, 4, 5};

START_TEST(streamed_scan_equals_after_the_scan)
{
    daemon_session t;
    daemon_session_open(&t, NULL, 2);
    const int n_proj = 80, n_missing = 5;
    daemon_scan s;
    daemon_scan_make(&s, "streamed", 64, 6, n_proj, 1, 2, 0x57e0001);
    uint64_t seed = 0x57e0001;
    int *order = daemon_shuffled(n_proj, &seed);
    unsigned char received[80];
    memset(received, 1, sizeof received);
    for (int i = 0; i < n_missing; i++)
        received[order[i]] = 0;
    daemon_send_begin(t.c, &s);
    const rtomo_event *ev = daemon_wait_event(&t.in, "scan_started", NULL,
                                              "streamed", 0);
    ck_assert_str_eq(ev->reason, "streaming");
    ck_assert_msg(strstr(ev->message, "all 6 slices resident"),
                  "scan_started says: %s", ev->message);
    ck_assert_int_eq(resident_field(t.c, "streamed", "slices"), 6);
    ck_assert_int_eq(resident_field(t.c, "streamed", "of"), 6);
    daemon_send_fields(t.c, &s);
    for (int i = n_missing; i < n_proj; i++)
        daemon_send_projection_via(t.c, &s, order[i], i % 2);
    daemon_send_end(t.c, &s);
    check_slices(&t.in, &s, ALL_6, 6, received);
    daemon_wait_event(&t.in, "scan_complete", NULL, "streamed", 0);
    free(order);
    daemon_scan_free(&s);
    daemon_session_close(&t);
}
END_TEST

/* Begin scan s and return the host memory it claims, MB. */
static double claimed_mb(daemon_session *t, const daemon_scan *s)
{
    daemon_send_begin(t->c, s);
    daemon_wait_event(&t->in, "scan_started", NULL, s->spec.scan, 0);
    return memory_mb(t->c, "host_used_mb");
}

START_TEST(partly_resident_within_budget)
{
    const char *args[] = {"--set", "limits.host_mb=1500", "--set",
                          "queue.mb=64", "--set", "limits.early_mb=64", NULL};
    daemon_session t;
    daemon_session_open(&t, args, 1);
    daemon_scan s;
    daemon_scan_make(&s, "measure", 128, 16, 24, 0, 1, 0x57e0002);
    /* With every slice resident, and what one resident slice takes. */
    double all = claimed_mb(&t, &s);
    double fixed = 1500 - memory_mb(t.c, "host_budget_mb");
    double slice = (double)(rtomo_fbp_stream_bytes(&s.spec.geometry, 16, RTOMO_BACKEND_CPU) -
                            rtomo_fbp_stream_bytes(&s.spec.geometry, 15, RTOMO_BACKEND_CPU)) /
                   (1024.0 * 1024.0);
    daemon_scan_free(&s);
    daemon_session_close(&t);

    /* Room for about half of them. */
    char limit[64];
    snprintf(limit, sizeof limit, "limits.host_mb=%.3f",
             fixed + all - 7.5 * slice);
    const char *tight[] = {"--set", limit, "--set", "queue.mb=64", "--set",
                           "limits.early_mb=64", NULL};
    daemon_session_open(&t, tight, 1);
    daemon_scan_make(&s, "partial", 128, 16, 24, 0, 1, 0x57e0002);
    claimed_mb(&t, &s);
    const rtomo_event *ev = daemon_find_event(&t.in, "scan_started", NULL,
                                              "partial");
    ck_assert_str_eq(ev->reason, "streaming_partial");
    long resident = resident_field(t.c, "partial", "slices");
    ck_assert_msg(resident > 0 && resident < 16, "%ld of 16 resident",
                  resident);
    printf("%ld of 16 slices resident: %s\n", resident, ev->message);
    daemon_send_fields(t.c, &s);
    for (int p = 0; p < 24; p++)
        daemon_send_projection(t.c, &s, p);
    daemon_send_end(t.c, &s);
    int rows[16];
    for (int i = 0; i < 16; i++)
        rows[i] = i;
    check_slices(&t.in, &s, rows, 16, NULL);
    daemon_scan_free(&s);
    daemon_session_close(&t);
}
END_TEST

START_TEST(streaming_off_reconstructs_after_the_scan)
{
    const char *args[] = {"--set", "reconstruction.streaming=false", NULL};
    daemon_session t;
    daemon_session_open(&t, args, 1);
    daemon_scan s;
    daemon_scan_make(&s, "after", 64, 6, 40, 1, 1, 0x57e0003);
    daemon_send_scan(t.c, &s);
    const rtomo_event *ev = daemon_wait_event(&t.in, "scan_started", NULL,
                                              "after", 0);
    ck_assert_str_eq(ev->reason, "after_scan");
    ck_assert_msg(strstr(ev->message, "reconstruction.streaming is off"),
                  "scan_started says: %s", ev->message);
    check_slices(&t.in, &s, ALL_6, 6, NULL);
    daemon_scan_free(&s);
    daemon_session_close(&t);
}
END_TEST

START_TEST(previews_show_the_slice_forming)
{
    const char *args[] = {"--set", "preview.every=10", "--set",
                          "preview.slices=[1, 4]", NULL};
    daemon_session t;
    daemon_session_open(&t, args, 1);
    const int n_proj = 40;
    daemon_scan s;
    daemon_scan_make(&s, "previewed", 48, 6, n_proj, 0, 1, 0x57e0004);
    daemon_send_scan(t.c, &s);
    check_slices(&t.in, &s, ALL_6, 6, NULL);
    long shown = daemon_counter(t.c, "previews");
    long dropped = daemon_counter(t.c, "previews_dropped");
    ck_assert_int_eq(shown + dropped, n_proj / 10);
    ck_assert_int_ge(shown, 1);
    /* Projections went in order on one connection: the preview after k
     * holds projections 0..k-1. */
    const int rows[2] = {1, 4};
    const size_t pixels = 48 * 48;
    int seen = 0;
    for (int k = 10; k <= n_proj; k += 10) {
        unsigned char received[40] = {0};
        memset(received, 1, (size_t)k);
        float *ref = NULL;
        for (int m = 0; m < t.in.n_images; m++) {
            const daemon_image *im = &t.in.images[m];
            if (strcmp(im->h.topic, RTOMO_TOPIC_PREVIEW) != 0 ||
                im->h.projections != k)
                continue;
            if (!ref)
                ref = daemon_reference_slices(&s, rows, 2, received, NULL);
            ck_assert_int_eq(im->h.count, 2);
            ck_assert_int_eq(im->h.slice, rows[im->h.index]);
            double e = test_rel_l2(im->data,
                                   ref + pixels * (size_t)im->h.index,
                                   pixels);
            ck_assert_msg(e <= SAME_AS_AFTER_SCAN, "preview of row %d after "
                          "%d projections: relative L2 %.3g", im->h.slice, k,
                          e);
            seen++;
        }
        free(ref);
    }
    ck_assert_int_eq(seen, 2 * shown);
    daemon_scan_free(&s);
    daemon_session_close(&t);
}
END_TEST

/* A control reply's "error" code, or "" when ok. */
static const char *reply_error(json_t *reply)
{
    const char *e = json_string_value(json_object_get(reply, "error"));
    return e ? e : "";
}

/* Planes with `workers` CPU workers: with two, each holds three of the
 * six rows and the loop adds the two parts of every plane. */
static void planes_with_workers(int workers)
{
    char setting[64];
    snprintf(setting, sizeof setting, "engine.workers=%d", workers);
    const char *args[] = {"--set", setting, NULL};
    daemon_session t;
    daemon_session_open(&t, args, 1);
    /* Bad planes are refused, naming what is wrong. */
    json_t *r = daemon_request(t.c, "{\"cmd\": \"planes\", \"planes\": "
                               "[{\"centre\": [1, 2], \"u\": [1, 0, 0], "
                               "\"v\": [0, 0, 1], \"width\": 4, \"height\": "
                               "4}]}");
    ck_assert_str_eq(reply_error(r), "bad_argument");
    ck_assert_ptr_nonnull(strstr(json_string_value(json_object_get(
                                     r, "message")), "planes[0].centre"));
    json_decref(r);
    r = daemon_request(t.c, "{\"cmd\": \"planes\", \"planes\": "
                       "[{\"centre\": [1, 2, 3], \"u\": [1, 0, 0], "
                       "\"v\": [1, 0, 0], \"width\": 4, \"height\": 4}]}");
    ck_assert_str_eq(reply_error(r), "bad_argument");
    json_decref(r);
    /* A vertical plane x-z at y = 20 through every slice, pixel (i, j)
     * at x = i, z = j: one row of each slice.  And an oblique one, which
     * only has to come out. */
    r = daemon_request(t.c, "{\"cmd\": \"planes\", \"planes\": ["
                       "{\"centre\": [31.5, 20, 2.5], \"u\": [2, 0, 0], "
                       "\"v\": [0, 0, 1], \"width\": 64, \"height\": 6},"
                       "{\"centre\": [31.5, 31.5, 2.5], \"u\": [1, 1, 0], "
                       "\"v\": [0, 0, 1], \"width\": 40, \"height\": 5}]}");
    ck_assert_str_eq(reply_error(r), "");
    json_t *u = json_object_get(json_array_get(json_object_get(r, "planes"),
                                               0), "u");
    ck_assert(json_number_value(json_array_get(u, 0)) == 1.0);  /* unit */
    json_decref(r);

    daemon_scan s;
    daemon_scan_make(&s, "planes", 64, 6, 60, 1, 1, 0x57e0005);
    daemon_send_scan(t.c, &s);
    check_slices(&t.in, &s, ALL_6, 6, NULL);
    daemon_wait_images(&t.in, RTOMO_TOPIC_PLANE, "planes", 2);
    const daemon_image *plane = daemon_find_image(&t.in, RTOMO_TOPIC_PLANE,
                                                  "planes", -1, 0);
    ck_assert_ptr_nonnull(plane);
    ck_assert_int_eq(plane->h.width, 64);
    ck_assert_int_eq(plane->h.height, 6);
    ck_assert_int_eq(plane->h.count, 2);
    ck_assert(plane->h.centre[1] == 20 && plane->h.v[2] == 1);
    ck_assert_int_eq(plane->h.projections, 60);
    for (int j = 0; j < 6; j++) {
        const daemon_image *slice = daemon_find_image(
            &t.in, RTOMO_TOPIC_SLICE, "planes", -1, j);
        const float *row = (const float *)slice->data + 20 * 64;
        const float *got = (const float *)plane->data + 64 * j;
        double e = test_rel_l2(got, row, 64);
        ck_assert_msg(e <= 1e-5, "plane row %d vs slice %d row 20: relative "
                      "L2 %.3g", j, j, e);
    }
    const daemon_image *oblique = daemon_find_image(&t.in, RTOMO_TOPIC_PLANE,
                                                    "planes", -1, 1);
    ck_assert_ptr_nonnull(oblique);
    ck_assert(test_max_abs(oblique->data, 40 * 5) > 0);
    daemon_assert_image_stats(plane, 1e-6);
    /* Cleared: the next scan publishes none. */
    r = daemon_request(t.c, "{\"cmd\": \"planes\", \"planes\": []}");
    ck_assert_int_eq(json_array_size(json_object_get(r, "planes")), 0);
    json_decref(r);
    daemon_scan_free(&s);
    daemon_session_close(&t);
}

START_TEST(planes_of_any_orientation) { planes_with_workers(1); }
END_TEST
START_TEST(planes_over_two_workers) { planes_with_workers(2); }
END_TEST

/* A continuous stream takes a new set of flats on the way (applied from
 * the next projection on); the same flats again change nothing, so the
 * windows still equal the engine's.  A plain scan refuses them. */
START_TEST(continuous_takes_new_flats)
{
    /* Every window, however fast the frames come. */
    const char *args[] = {"--set", "reconstruction.window_backlog=0", NULL};
    daemon_session t;
    daemon_session_open(&t, args, 1);
    daemon_scan s;
    daemon_scan_make_continuous(&s, "refreshed", 48, 2, 24, 12, 72, 1,
                                0x57e0006);
    daemon_send_begin(t.c, &s);
    daemon_send_fields(t.c, &s);
    for (int p = 0; p < 72; p++) {
        if (p == 30)
            daemon_send_fields(t.c, &s);    /* flat 0 again: a new set */
        daemon_send_projection(t.c, &s, p);
    }
    /* Windows end at projections 23, 35, 47, 59, 71: the last one. */
    daemon_wait_images(&t.in, RTOMO_TOPIC_SLICE, "refreshed", 2 * 5);
    const int rows[2] = {0, 1};
    float *ref = daemon_reference_window(&s, rows, 2, 71, NULL);
    for (int i = 0; i < 2; i++) {
        const daemon_image *im = daemon_find_image(&t.in, RTOMO_TOPIC_SLICE,
                                                   "refreshed", 4, i);
        ck_assert_ptr_nonnull(im);
        double e = test_rel_l2(im->data, ref + 48 * 48 * (size_t)i, 48 * 48);
        ck_assert_msg(e <= 1e-5, "window 4 slice %d: relative L2 %.3g", i, e);
    }
    free(ref);
    ck_assert_int_eq(daemon_counter(t.c, "rejected"), 0);
    daemon_send_end(t.c, &s);
    daemon_scan_free(&s);
    /* A plain scan: darks and flats only before its projections. */
    daemon_scan_make(&s, "plain", 48, 2, 20, 0, 1, 0x57e0007);
    daemon_send_begin(t.c, &s);
    daemon_send_fields(t.c, &s);
    daemon_send_projection(t.c, &s, 0);
    daemon_send_fields(t.c, &s);
    const rtomo_event *ev = daemon_wait_event(&t.in, "rejected", "bad_state",
                                              "plain", 0);
    ck_assert_ptr_nonnull(strstr(ev->message, "only a continuous scan"));
    daemon_scan_free(&s);
    daemon_session_close(&t);
}
END_TEST

int main(void)
{
    const TTest *tests[] = {
        streamed_scan_equals_after_the_scan, partly_resident_within_budget,
        streaming_off_reconstructs_after_the_scan,
        previews_show_the_slice_forming, planes_of_any_orientation,
        planes_over_two_workers, continuous_takes_new_flats,
    };
    return daemon_run_tests("daemon_stream", tests,
                            (int)(sizeof tests / sizeof tests[0]), 120);
}
