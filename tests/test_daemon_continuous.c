/*
 * test_daemon_continuous.c — continuous tomography through the real rtomod
 * (CPU backend, loopback): the sample turns on and on, projection i goes to
 * slot i mod n_proj, and every `every` projections the daemon reconstructs
 * the window of the last n_proj.  Checked here:
 *   - several windows, each equal to the CPU engine called directly on the
 *     same n_proj projections, with the window's number, projection range
 *     and angles in the slice headers;
 *   - a set_config of slices and ROI takes effect at the next window;
 *   - a daemon that falls behind skips windows beyond
 *     reconstruction.window_backlog and says so (events, counters,
 *     telemetry), and never drops a projection;
 *   - with reconstruction.field_of_view = circle every window is the
 *     engine's masked window: exact zeros in the corners.
 */
#include "config.h"

#include <unistd.h>

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "daemon_harness.h"

/* The daemon and the direct engine run the same code on the same frames;
 * only the order of floating-point sums (threads) may differ. */
#define SAME_AS_ENGINE 1e-5

static double degrees(double radians) { return radians * 180.0 / M_PI; }

/* Check window `window` of scan s (the slices `rows` of a roi-sized image)
 * against the engine on projections last - n_proj + 1 .. last. */
static void check_window(daemon_inbox *in, const daemon_scan *s, int window,
                         int last, const int *rows, int n_rows,
                         const int roi[4])
{
    const char *id = s->spec.scan;
    const rtomo_fbp_geometry *g = &s->spec.geometry;
    float *ref = daemon_reference_window(s, rows, n_rows, last, roi);
    size_t pixels = (size_t)roi[2] * (size_t)roi[3];
    int first = last - g->n_proj + 1;
    for (int i = 0; i < n_rows; i++) {
        const daemon_image *im = NULL;
        for (int waited = 0; !im && waited < DAEMON_TIMEOUT_MS / 100;
             waited++) {
            im = daemon_find_image(in, RTOMO_TOPIC_SLICE, id, window, i);
            if (!im)
                daemon_inbox_pump(in, 100);
        }
        ck_assert_msg(im, "window %d: slice %d is missing", window, i);
        ck_assert_int_eq(im->h.count, n_rows);
        ck_assert_int_eq(im->h.slice, rows[i]);
        ck_assert_int_eq(im->h.width, roi[2]);
        ck_assert_int_eq(im->h.height, roi[3]);
        for (int k = 0; k < 4; k++)
            ck_assert_int_eq(im->h.roi[k], roi[k]);
        ck_assert_int_eq(im->h.projection_first, first);
        ck_assert_int_eq(im->h.projection_last, last);
        ck_assert_double_eq_tol(im->h.angle_first,
                                degrees(g->angle_start + first * g->angle_step),
                                1e-9);
        ck_assert_double_eq_tol(im->h.angle_last,
                                degrees(g->angle_start + last * g->angle_step),
                                1e-9);
        const float *want = ref + pixels * (size_t)i;
        double scale = test_max_abs(want, pixels);
        double diff = test_max_abs_diff(im->data, want, pixels);
        ck_assert_msg(scale > 0 && diff <= SAME_AS_ENGINE * scale,
                      "window %d, slice %d: max difference %g to the engine "
                      "(scale %g)", window, rows[i], diff, scale);
        ck_assert(im->h.latency_ms >= 0 && im->h.compute_ms > 0);
    }
    free(ref);
}

static void send_projections(rtomo_client *c, const daemon_scan *s, int from,
                             int to)
{
    for (int p = from; p < to; p++)
        daemon_send_projection(c, s, p);
}

/* Like a camera: one projection every `period_us`. */
static void send_paced(rtomo_client *c, const daemon_scan *s, int from, int to,
                       long period_us)
{
    for (int p = from; p < to; p++) {
        daemon_send_projection(c, s, p);
        struct timespec pause = {0, period_us * 1000};
        nanosleep(&pause, NULL);
    }
}

static long telemetry_figure(const json_t *telemetry, const char *group,
                             const char *name)
{
    const json_t *v = json_object_get(json_object_get(telemetry, group), name);
    ck_assert_msg(json_is_integer(v), "telemetry has no %s.%s", group, name);
    return (long)json_integer_value(v);
}

/* Windows of 60 projections (180 degrees) every 20: the stream turns
 * through 360 degrees and more, and every window equals a one-shot scan of
 * its own projections. */
START_TEST(windows_match_one_shot_scans)
{
    const int n_proj = 60, every = 20, windows = 4;
    const int total = n_proj + (windows - 1) * every;
    daemon_session t;
    const char *args[] = {"--set", "reconstruction.window_backlog=0", NULL};
    daemon_session_open(&t, args, 1);
    daemon_scan s;
    daemon_scan_make_continuous(&s, "turning", 64, 3, n_proj, every, total,
                                2, 0xdae0401);
    daemon_send_begin(t.c, &s);
    daemon_send_fields(t.c, &s);
    send_projections(t.c, &s, 0, total);

    const int rows[3] = {0, 1, 2};
    const int full[4] = {0, 0, 64, 64};
    for (int w = 0; w < windows; w++)
        check_window(&t.in, &s, w, n_proj - 1 + w * every, rows, 3, full);
    /* A window per `every` projections and no more: the stream has not
     * reached window 4. */
    daemon_send_end(t.c, &s);
    daemon_wait_event(&t.in, "scan_complete", NULL, "turning", 0);
    ck_assert_int_eq(daemon_count_images(&t.in, RTOMO_TOPIC_SLICE, "turning"),
                     3 * windows);
    ck_assert_ptr_null(daemon_find_event(&t.in, "window_skipped", NULL, NULL));
    ck_assert_int_eq(daemon_counter(t.c, "rejected"), 0);
    ck_assert_int_eq(daemon_counter(t.c, "dropped"), 0);

    daemon_scan_free(&s);
    daemon_session_close(&t);
}
END_TEST

/* The daemon's circular field of view applies to every window of a
 * stream: each equals the engine's masked reconstruction of its
 * projections, and the slice corners are exactly 0. */
START_TEST(windows_keep_the_circle)
{
    const int n_proj = 60, every = 20, windows = 2;
    const int total = n_proj + (windows - 1) * every;
    daemon_session t;
    const char *args[] = {"--set", "reconstruction.window_backlog=0", "--set",
                          "reconstruction.field_of_view=circle", NULL};
    daemon_session_open(&t, args, 1);
    daemon_scan s;
    daemon_scan_make_continuous(&s, "circle", 64, 3, n_proj, every, total,
                                2, 0xdae0f0f);
    /* The daemon takes the circle from its configuration (the scan does
     * not give it); the reference needs it in its geometry. */
    s.spec.geometry.field_of_view = RTOMO_FOV_CIRCLE;
    daemon_send_begin(t.c, &s);
    daemon_send_fields(t.c, &s);
    send_projections(t.c, &s, 0, total);

    const int rows[3] = {0, 1, 2};
    const int full[4] = {0, 0, 64, 64};
    for (int w = 0; w < windows; w++) {
        check_window(&t.in, &s, w, n_proj - 1 + w * every, rows, 3, full);
        for (int i = 0; i < 3; i++) {
            const daemon_image *im =
                daemon_find_image(&t.in, RTOMO_TOPIC_SLICE, "circle", w, i);
            ck_assert_ptr_nonnull(im);
            const float *px = im->data;
            ck_assert_msg(px[0] == 0.0f && px[63] == 0.0f &&
                          px[63 * 64] == 0.0f && px[64 * 64 - 1] == 0.0f,
                          "window %d, slice %d: a corner is not 0", w, i);
            ck_assert_msg(px[32 * 64 + 32] != 0.0f,
                          "window %d, slice %d: the centre is 0", w, i);
        }
    }
    daemon_send_end(t.c, &s);
    daemon_wait_event(&t.in, "scan_complete", NULL, "circle", 0);
    ck_assert_int_eq(daemon_counter(t.c, "rejected"), 0);
    ck_assert_int_eq(daemon_counter(t.c, "dropped"), 0);
    daemon_scan_free(&s);
    daemon_session_close(&t);
}
END_TEST

/* Slices and ROI changed while the stream runs apply from the next window
 * on; the window in progress keeps what it started with. */
START_TEST(set_config_applies_at_the_next_window)
{
    const int n_proj = 40, every = 10;
    daemon_session t;
    const char *args[] = {"--set", "reconstruction.window_backlog=0", NULL};
    daemon_session_open(&t, args, 1);
    daemon_scan s;
    daemon_scan_make_continuous(&s, "steered", 48, 4, n_proj, every,
                                n_proj + 2 * every, 1, 0xdae0402);
    daemon_send_begin(t.c, &s);
    daemon_send_fields(t.c, &s);
    send_projections(t.c, &s, 0, n_proj);

    const int all[4] = {0, 1, 2, 3};
    const int full[4] = {0, 0, 48, 48};
    check_window(&t.in, &s, 0, n_proj - 1, all, 4, full);

    json_t *reply = daemon_request(
        t.c, "{\"cmd\": \"set_config\", \"config\": {\"reconstruction\": "
             "{\"slices\": [3, 1], \"roi\": [8, 4, 24, 32]}}}");
    ck_assert(json_is_true(json_object_get(reply, "ok")));
    json_decref(reply);
    send_projections(t.c, &s, n_proj, n_proj + every);
    const int picked[2] = {1, 3};
    const int roi[4] = {8, 4, 24, 32};
    check_window(&t.in, &s, 1, n_proj + every - 1, picked, 2, roi);

    /* And back to everything for the window after. */
    reply = daemon_request(
        t.c, "{\"cmd\": \"set_config\", \"config\": {\"reconstruction\": "
             "{\"slices\": \"all\", \"roi\": null}}}");
    json_decref(reply);
    send_projections(t.c, &s, n_proj + every, n_proj + 2 * every);
    check_window(&t.in, &s, 2, n_proj + 2 * every - 1, all, 4, full);

    /* A window is counted when its worker reports it done, which can come
     * just after its last slice is published: poll status for it. */
    json_t *status = NULL, *scan = NULL;
    for (int attempt = 0; attempt < 100; attempt++) {
        json_decref(status);
        status = daemon_status(t.c);
        scan = json_object_get(status, "scan");
        if (json_integer_value(json_object_get(scan, "windows")) >= 3)
            break;
        usleep(50 * 1000);
    }
    ck_assert_str_eq(json_string_value(json_object_get(scan, "mode")),
                     "continuous");
    ck_assert_int_eq(json_integer_value(json_object_get(scan, "received")),
                     n_proj + 2 * every);
    ck_assert_int_eq(json_integer_value(json_object_get(scan, "windows")), 3);
    json_decref(status);

    daemon_send_end(t.c, &s);
    daemon_wait_event(&t.in, "scan_complete", NULL, "steered", 0);
    daemon_scan_free(&s);
    daemon_session_close(&t);
}
END_TEST

/* A window after every projection of large slices: the CPU cannot keep
 * up.  Beyond one waiting window the daemon skips windows, reports each
 * skip and keeps every projection; published and skipped windows together
 * are all the windows due, and telemetry shows the backlog. */
START_TEST(falling_behind_skips_windows_and_reports_them)
{
    const int n_proj = 30, extra = 60, total = n_proj + extra;
    daemon_session t;
    const char *args[] = {"--set", "reconstruction.window_backlog=1", NULL};
    daemon_session_open(&t, args, 1);
    daemon_scan s;
    daemon_scan_make_continuous(&s, "hurried", 768, 4, n_proj, 1, total, 1,
                                0xdae0403);
    daemon_send_begin(t.c, &s);
    daemon_send_fields(t.c, &s);
    send_paced(t.c, &s, 0, total, 2000);
    daemon_send_end(t.c, &s);
    daemon_wait_event(&t.in, "scan_complete", NULL, "hurried", 0);

    const int due = total - n_proj + 1;
    unsigned char *seen = calloc((size_t)due, 1);
    int skipped = 0, published = 0;
    for (int i = 0; i < t.in.n_events; i++) {
        const rtomo_event *ev = &t.in.events[i];
        if (strcmp(ev->event, "window_skipped") != 0)
            continue;
        ck_assert_str_eq(ev->reason, "backlog");
        ck_assert(ev->index >= 0 && ev->index < due && !seen[ev->index]);
        seen[ev->index] = 1;
        skipped++;
    }
    for (int w = 0; w < due; w++) {
        if (daemon_find_image(&t.in, RTOMO_TOPIC_SLICE, "hurried", w, 0)) {
            ck_assert_msg(!seen[w], "window %d published and skipped", w);
            published++;
        }
    }
    printf("windows due %d: %d published, %d skipped\n", due, published,
           skipped);
    ck_assert_int_gt(skipped, 0);
    ck_assert_int_gt(published, 0);
    ck_assert_int_eq(published + skipped, due);
    /* The first window always goes out, and every published one is right. */
    const int rows[4] = {0, 1, 2, 3};
    const int full[4] = {0, 0, 768, 768};
    check_window(&t.in, &s, 0, n_proj - 1, rows, 4, full);

    ck_assert_int_eq(daemon_counter(t.c, "dropped"), 0);
    ck_assert_int_eq(daemon_counter(t.c, "rejected"), 0);
    json_t *status = daemon_status(t.c);
    json_t *tel = json_object_get(status, "telemetry");
    ck_assert_int_eq(telemetry_figure(tel, "reconstruction", "windows"),
                     published);
    ck_assert_int_eq(telemetry_figure(tel, "reconstruction",
                                      "windows_skipped"), skipped);
    json_decref(status);
    /* While it ran, telemetry showed windows waiting. */
    ck_assert_int_ge(t.in.peak_windows, 1);
    daemon_scan_free(&s);
    free(seen);
    daemon_session_close(&t);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {
        windows_match_one_shot_scans,
        windows_keep_the_circle,
        set_config_applies_at_the_next_window,
        falling_behind_skips_windows_and_reports_them,
    };
    return daemon_run_tests("daemon_continuous", tests,
                            (int)(sizeof tests / sizeof tests[0]), 120);
}
