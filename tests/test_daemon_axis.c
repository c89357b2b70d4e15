/*
 * test_daemon_axis.c — "axis": "auto" through the real rtomod (CPU
 * backend, loopback): a phantom turning about an off-centre axis, the
 * axis found from its opposed projections while the scan arrives, set on
 * the plan before any projection enters the resident slices, published in
 * an axis_found event, status and every slice header; the slices equal
 * the engine's at that axis.  A continuous stream's axis is measured
 * again as it turns, and when the stage moves the windows follow it:
 * drift telemetry, an axis_found event, slices equal to the engine's at
 * the new axis.  Scans whose angles have no opposed pair, and continuous
 * windows that are not half a turn, are refused naming the field.
 *
 * Bounds: the phantom's projections carry the camera's Poisson-like noise
 * (40000 counts open beam); the axis is found within 0.3 bins (the
 * engine's own test, tests/test_fbp_axis.c, measures the method's
 * accuracy: 0.1 bins at 10^4 counts).
 */
#include "config.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon_harness.h"

#define AXIS_BOUND 0.3

static double scan_axis(rtomo_client *c, const char *id)
{
    json_t *status = daemon_status(c);
    json_t *scans = json_object_get(status, "scans");
    double axis = NAN;
    for (size_t i = 0; i < json_array_size(scans); i++) {
        json_t *s = json_array_get(scans, i);
        if (strcmp(json_string_value(json_object_get(s, "id")), id) == 0)
            axis = json_is_number(json_object_get(s, "axis"))
                       ? json_number_value(json_object_get(s, "axis"))
                       : NAN;
    }
    json_decref(status);
    return axis;
}

/* A 360-degree scan about `axis`: found, used, reported. */
static void find_axis(double axis, int width)
{
    daemon_session t;
    daemon_session_open(&t, NULL, 1);
    const int rows[4] = {0, 1, 2, 3};
    daemon_scan s;
    daemon_scan_make_auto_axis(&s, "auto-axis", width, 4, 160, 360.0, axis, 2,
                               0xa815 + (uint64_t)width);
    daemon_send_begin(t.c, &s);
    const rtomo_event *started = daemon_wait_event(&t.in, "scan_started",
                                                   NULL, "auto-axis", 0);
    ck_assert_msg(strstr(started->message, "axis: auto, from 4 pairs"),
                  "scan_started says: %s", started->message);
    daemon_send_fields(t.c, &s);
    /* The pairs are (0, 80) .. (3, 83): the axis is known from
     * projection 83 on, long before the scan ends. */
    for (int p = 0; p < 84; p++)
        daemon_send_projection(t.c, &s, p);
    daemon_wait_event(&t.in, "axis_found", NULL, "auto-axis", 0);
    for (int p = 84; p < 160; p++)
        daemon_send_projection(t.c, &s, p);
    double found = scan_axis(t.c, "auto-axis");
    daemon_send_end(t.c, &s);
    printf("axis %.3f found as %.3f (error %.3f)\n", axis, found,
           found - axis);
    ck_assert_msg(fabs(found - axis) <= AXIS_BOUND, "axis %.3f found as %.3f",
                  axis, found);
    daemon_wait_images(&t.in, RTOMO_TOPIC_SLICE, "auto-axis", 4);
    /* The slices are the engine's at the axis found. */
    s.spec.geometry.axis = found;
    float *ref = daemon_reference_slices(&s, rows, 4, NULL, NULL);
    const size_t pixels = (size_t)width * (size_t)width;
    for (int i = 0; i < 4; i++) {
        const daemon_image *im = daemon_find_image(&t.in, RTOMO_TOPIC_SLICE,
                                                   "auto-axis", -1, i);
        ck_assert_ptr_nonnull(im);
        ck_assert(im->h.axis == found);
        double e = test_rel_l2(im->data, ref + pixels * (size_t)i, pixels);
        ck_assert_msg(e <= 1e-6, "slice %d: relative L2 %.3g to the engine "
                      "at the axis found", i, e);
    }
    free(ref);
    const rtomo_event *done = daemon_wait_event(&t.in, "scan_complete", NULL,
                                                "auto-axis", 0);
    char expect[48];
    snprintf(expect, sizeof expect, "axis %.3f (found)", found);
    ck_assert_msg(strstr(done->message, expect), "scan_complete says: %s",
                  done->message);
    daemon_scan_free(&s);
    daemon_session_close(&t);
}

START_TEST(off_centre_axis_found) { find_axis(70.4, 128); }
END_TEST
START_TEST(axis_left_of_centre_found) { find_axis(55.75, 128); }
END_TEST

/* The value in an axis_found event's message ("rotation axis 33.012
 * bins ..."). */
static double event_axis(const rtomo_event *ev)
{
    const char *at = strstr(ev->message, "rotation axis ");
    ck_assert_ptr_nonnull(at);
    return strtod(at + strlen("rotation axis "), NULL);
}

/* A continuous stream turning about 33.0 bins, then (the stage moved)
 * about 34.5 from projection 200 on.  Windows of 60 every 20; the axis
 * is measured every 100 projections, at the windows ending with 159,
 * 259, 359: the first finds 33.0 (the start was the centre, 31.5), the
 * last 34.5; the window ending at 359 holds only projections after the
 * move and equals the engine's at the axis found. */
START_TEST(continuous_axis_tracked)
{
    const char *args[] = {"--set", "reconstruction.window_backlog=0", NULL};
    daemon_session t;
    daemon_session_open(&t, args, 1);
    const int n = 60, every = 20, total = 400;
    daemon_scan s;
    daemon_scan_make_axis_jump(&s, "drifting", 64, 2, n, every, total, 33.0,
                               200, 34.5, 0xd41f7);
    daemon_send_begin(t.c, &s);
    const rtomo_event *ev = daemon_wait_event(&t.in, "scan_started", NULL,
                                              "drifting", 0);
    ck_assert_msg(strstr(ev->message, "axis: auto, measured every 100 "
                                      "projections from 31.500"),
                  "scan_started says: %s", ev->message);
    daemon_send_fields(t.c, &s);
    for (int p = 0; p < 170; p++)
        daemon_send_projection(t.c, &s, p);
    ev = daemon_wait_event(&t.in, "axis_found", "axis_moved", "drifting", 0);
    double first = event_axis(ev);
    printf("continuous: first measurement %.3f (true 33.0): %s\n", first,
           ev->message);
    ck_assert_msg(fabs(first - 33.0) <= AXIS_BOUND, "found %.3f", first);
    for (int p = 170; p < total; p++)
        daemon_send_projection(t.c, &s, p);
    /* Windows 0..17 end with projections 59..399. */
    const int last_window = (total - n) / every;
    daemon_wait_images(&t.in, RTOMO_TOPIC_SLICE, "drifting",
                       2 * (last_window + 1));
    double moved = NAN;
    for (int i = 0; i < t.in.n_events; i++)
        if (strcmp(t.in.events[i].event, "axis_found") == 0 &&
            strcmp(t.in.events[i].scan, "drifting") == 0)
            moved = event_axis(&t.in.events[i]);
    printf("continuous: last measurement %.3f (true 34.5)\n", moved);
    ck_assert_msg(fabs(moved - 34.5) <= AXIS_BOUND, "found %.3f", moved);
    /* Window 15 (projections 300..359) at the axis found. */
    const int rows[2] = {0, 1};
    const daemon_image *im = daemon_find_image(&t.in, RTOMO_TOPIC_SLICE,
                                               "drifting", 15, 0);
    ck_assert_ptr_nonnull(im);
    /* The event says the axis to 3 decimals, the header exactly. */
    ck_assert_msg(fabs(im->h.axis - moved) <= 5e-4, "window 15 at axis %.4f",
                  im->h.axis);
    moved = im->h.axis;
    s.spec.geometry.axis = moved;
    float *ref = daemon_reference_window(&s, rows, 2, 359, NULL);
    const size_t pixels = 64 * 64;
    for (int i = 0; i < 2; i++) {
        im = daemon_find_image(&t.in, RTOMO_TOPIC_SLICE, "drifting", 15, i);
        double e = test_rel_l2(im->data, ref + pixels * (size_t)i, pixels);
        ck_assert_msg(e <= 1e-5, "window 15 slice %d: relative L2 %.3g", i,
                      e);
    }
    free(ref);
    /* Drift telemetry: the last measurement, against the first. */
    json_t *axis = NULL;
    for (int tries = 0; tries < 50; tries++) {
        daemon_inbox_pump(&t.in, 100);
        axis = json_object_get(t.in.last_telemetry, "axis");
        if (json_is_object(axis) &&
            fabs(json_number_value(json_object_get(axis, "value")) - moved) <
                1e-9)
            break;
    }
    ck_assert_msg(json_is_object(axis), "telemetry has no axis");
    ck_assert_str_eq(json_string_value(json_object_get(axis, "scan")),
                     "drifting");
    double drift = json_number_value(json_object_get(axis, "drift"));
    ck_assert_msg(fabs(drift - (moved - first)) <= 1e-3, "drift %.4f, "
                  "measurements %.4f and %.3f", drift, moved, first);
    daemon_send_end(t.c, &s);
    daemon_scan_free(&s);
    daemon_session_close(&t);
}
END_TEST

START_TEST(refused_without_opposed_projections)
{
    daemon_session t;
    daemon_session_open(&t, NULL, 1);
    daemon_scan s;
    /* 90 degrees: no projection has an opposite. */
    daemon_scan_make_auto_axis(&s, "quarter", 64, 2, 30, 90.0, 33.0, 1, 7);
    daemon_send_begin(t.c, &s);
    const rtomo_event *ev = daemon_wait_event(&t.in, "rejected",
                                              "bad_field", "quarter", 0);
    ck_assert_ptr_nonnull(strstr(ev->message, "180 degrees apart"));
    daemon_scan_free(&s);
    /* A continuous stream's windows must be half a turn. */
    daemon_scan_make_continuous(&s, "endless", 64, 2, 30, 10, 40, 1, 8);
    s.spec.axis_auto = 1;
    s.spec.geometry.angle_step = M_PI / 40;
    daemon_send_begin(t.c, &s);
    ev = daemon_wait_event(&t.in, "rejected", "bad_field", "endless", 0);
    ck_assert_msg(strstr(ev->message, "half a turn"), "%s", ev->message);
    daemon_scan_free(&s);
    daemon_session_close(&t);
}
END_TEST

int main(void)
{
    const TTest *tests[] = {
        off_centre_axis_found, axis_left_of_centre_found,
        continuous_axis_tracked, refused_without_opposed_projections,
    };
    return daemon_run_tests("daemon_axis", tests,
                            (int)(sizeof tests / sizeof tests[0]), 120);
}
