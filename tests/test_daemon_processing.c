/*
 * test_daemon_processing.c — phase retrieval and ring removal through the
 * real rtomod (CPU backend, loopback): the settings a scan gives are
 * merged with the daemon's (`phase.*`, `reconstruction.rings`), said in
 * scan_started and status, and applied: the published slices equal the
 * CPU engine's with the same settings, and differ from the slices
 * without them.  Ring removal makes the scan's slices wait for its end
 * (after_scan) and takes a detector's striped columns out.  What cannot
 * work is refused naming the field: ring removal of a continuous stream,
 * an even median width, phase retrieval without an energy.  A half
 * acquisition scan (360 degrees, axis near an edge) gives slices of the
 * extended field, equal to the engine's; with an "auto" axis or in
 * continuous mode it is refused.
 *
 * The engine's own tests (test_fbp_phase, test_fbp_rings) check the
 * methods against independent derivations; this one checks the wiring.
 */
#include "config.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon_harness.h"

#define WIDTH 64
#define HEIGHT 8
#define N_PROJ 96

/* The scan's entry in status. */
static json_t *scan_status(rtomo_client *c, const char *id, json_t **status)
{
    *status = daemon_status(c);
    json_t *scans = json_object_get(*status, "scans");
    for (size_t i = 0; i < json_array_size(scans); i++) {
        json_t *s = json_array_get(scans, i);
        if (strcmp(json_string_value(json_object_get(s, "id")), id) == 0)
            return s;
    }
    ck_abort_msg("scan %s is not in status", id);
    return NULL;
}

/* Every projection's columns `cols` read `gain` times what they should:
 * a detector's miscalibrated columns, the cause of rings. */
static void add_stripes(daemon_scan *s, const int *cols, int n_cols,
                        double gain)
{
    for (int p = 0; p < s->n_projections; p++)
        for (int r = 0; r < HEIGHT; r++) {
            uint16_t *row = s->projections + s->frame_samples * (size_t)p +
                            (size_t)r * WIDTH;
            for (int i = 0; i < n_cols; i++)
                row[cols[i]] = (uint16_t)lround(row[cols[i]] * gain);
        }
}

/* Wait for n slices of `id` and return their relative L2 to ref. */
static double slices_error(daemon_inbox *in, const char *id, const float *ref,
                           int n)
{
    daemon_wait_images(in, RTOMO_TOPIC_SLICE, id, n);
    const size_t pixels = (size_t)WIDTH * WIDTH;
    double worst = 0.0;
    for (int i = 0; i < n; i++) {
        const daemon_image *im = daemon_find_image(in, RTOMO_TOPIC_SLICE, id,
                                                   -1, i);
        ck_assert_ptr_nonnull(im);
        double e = test_rel_l2(im->data, ref + pixels * (size_t)i, pixels);
        worst = e > worst ? e : worst;
    }
    return worst;
}

/* Three of phase retrieval's numbers from the daemon's configuration,
 * delta/beta from the scan; ring removal from the scan.  The configured
 * cgls gives way to FBP, and scan_started says all of it (more than the
 * 255 characters an event's message once held). */
START_TEST(phase_and_rings_applied)
{
    const char *args[] = {"--set", "phase.energy_kev=20", "--set",
                          "phase.distance_m=0.05", "--set",
                          "phase.pixel_m=2e-6", "--set",
                          "reconstruction.method=cgls", NULL};
    daemon_session t;
    daemon_session_open(&t, args, 1);
    const int rows[2] = {3, 4};
    const int stripes[4] = {20, 27, 35, 44};
    daemon_scan s;
    daemon_scan_make(&s, "processed", WIDTH, HEIGHT, N_PROJ, 1, 2, 0x9a9a);
    add_stripes(&s, stripes, 4, 0.96);
    daemon_scan_select_rows(&s, rows, 2);
    s.spec.geometry.phase.delta_beta = 20;
    s.spec.geometry.rings = RTOMO_RINGS_COLUMN_MEAN;
    s.spec.geometry.rings_width = 15;
    s.spec.given |= RTOMO_SPEC_HAS_PHASE_DELTA_BETA | RTOMO_SPEC_HAS_RINGS |
                    RTOMO_SPEC_HAS_RINGS_WIDTH;
    daemon_send_begin(t.c, &s);
    const rtomo_event *ev = daemon_wait_event(&t.in, "scan_started", NULL,
                                              "processed", 0);
    printf("scan_started: %s\n", ev->message);
    ck_assert_str_eq(ev->reason, "after_scan");
    ck_assert_msg(strstr(ev->message, "ring removal needs the whole sinogram") &&
                  strstr(ev->message, "phase: delta/beta 20 at 20 keV") &&
                  strstr(ev->message, "rings: column_mean, width 15") &&
                  strstr(ev->message, "the configured cgls does not go with"),
                  "scan_started says: %s", ev->message);
    ck_assert_uint_gt(strlen(ev->message), 255);
    json_t *status;
    json_t *entry = scan_status(t.c, "processed", &status);
    json_t *phase = json_object_get(entry, "phase");
    ck_assert(json_is_object(phase));
    ck_assert(json_number_value(json_object_get(phase, "delta_beta")) == 20);
    ck_assert(json_number_value(json_object_get(phase, "pixel_m")) == 2e-6);
    json_t *rings = json_object_get(entry, "rings");
    ck_assert_str_eq(json_string_value(json_object_get(rings, "method")),
                     "column_mean");
    ck_assert_int_eq(json_integer_value(json_object_get(rings, "width")), 15);
    json_decref(status);
    daemon_send_fields(t.c, &s);
    for (int p = 0; p < N_PROJ; p++)
        daemon_send_projection(t.c, &s, p);
    daemon_send_end(t.c, &s);

    /* The engine with every row kept (the daemon keeps rows 3-4 only:
     * phase retrieval must reach the neighbours all the same). */
    s.spec.geometry.phase.energy_kev = 20;
    s.spec.geometry.phase.distance_m = 0.05;
    s.spec.geometry.phase.pixel_m = 2e-6;
    float *ref = daemon_reference_slices(&s, rows, 2, NULL, NULL);
    double e = slices_error(&t.in, "processed", ref, 2);
    printf("phase + rings: relative L2 %.3g to the engine\n", e);
    ck_assert_msg(e <= 1e-5, "relative L2 %.3g to the engine", e);
    /* Each step changed the slices: without it they are far off. */
    s.spec.geometry.phase.delta_beta = 0;
    float *plain = daemon_reference_slices(&s, rows, 2, NULL, NULL);
    double without_phase = slices_error(&t.in, "processed", plain, 2);
    s.spec.geometry.phase.delta_beta = 20;
    s.spec.geometry.rings = RTOMO_RINGS_OFF;
    float *striped = daemon_reference_slices(&s, rows, 2, NULL, NULL);
    double without_rings = slices_error(&t.in, "processed", striped, 2);
    printf("without phase retrieval %.3g, without ring removal %.3g\n",
           without_phase, without_rings);
    ck_assert_msg(without_phase > 100 * e && without_rings > 100 * e,
                  "the steps change nothing measurable: %.3g, %.3g",
                  without_phase, without_rings);
    daemon_wait_event(&t.in, "scan_complete", NULL, "processed", 0);
    free(ref);
    free(plain);
    free(striped);
    daemon_scan_free(&s);
    daemon_session_close(&t);
}
END_TEST

/* A daemon default of ring removal: scans get it, continuous streams are
 * told they do not. */
START_TEST(rings_default_and_continuous)
{
    const char *args[] = {"--set", "reconstruction.rings=column_mean", NULL};
    daemon_session t;
    daemon_session_open(&t, args, 1);
    daemon_scan s;
    daemon_scan_make_continuous(&s, "endless", WIDTH, 2, 30, 10, 40, 1, 8);
    daemon_send_begin(t.c, &s);
    const rtomo_event *ev = daemon_wait_event(&t.in, "scan_started", NULL,
                                              "endless", 0);
    ck_assert_msg(strstr(ev->message, "rings: off (a continuous stream"),
                  "scan_started says: %s", ev->message);
    daemon_send_end(t.c, &s);
    daemon_scan_free(&s);
    /* Asked for explicitly, it is refused. */
    daemon_scan_make_continuous(&s, "endless-rings", WIDTH, 2, 30, 10, 40, 1,
                                9);
    s.spec.geometry.rings = RTOMO_RINGS_COLUMN_MEAN;
    s.spec.given |= RTOMO_SPEC_HAS_RINGS;
    daemon_send_begin(t.c, &s);
    ev = daemon_wait_event(&t.in, "rejected", "bad_field", "endless-rings", 0);
    ck_assert_msg(strstr(ev->message, "reconstruction.rings"), "%s",
                  ev->message);
    daemon_scan_free(&s);
    /* A plain scan takes the default and waits for its end. */
    daemon_scan_make(&s, "scan-rings", WIDTH, 2, 40, 0, 1, 10);
    daemon_send_begin(t.c, &s);
    ev = daemon_wait_event(&t.in, "scan_started", NULL, "scan-rings", 0);
    ck_assert_str_eq(ev->reason, "after_scan");
    ck_assert_msg(strstr(ev->message, "rings: column_mean, width 31"), "%s",
                  ev->message);
    daemon_send_fields(t.c, &s);
    for (int p = 0; p < 40; p++)
        daemon_send_projection(t.c, &s, p);
    daemon_send_end(t.c, &s);
    const int rows[2] = {0, 1};
    s.spec.geometry.rings = RTOMO_RINGS_COLUMN_MEAN;
    float *ref = daemon_reference_slices(&s, rows, 2, NULL, NULL);
    double e = slices_error(&t.in, "scan-rings", ref, 2);
    ck_assert_msg(e <= 1e-5, "relative L2 %.3g to the engine", e);
    free(ref);
    daemon_scan_free(&s);
    daemon_session_close(&t);
}
END_TEST

/* A 360-degree scan with the axis near the detector's edge: slices of
 * the extended field of view, equal to the engine's. */
START_TEST(half_acquisition_extends_the_field)
{
    daemon_session t;
    daemon_session_open(&t, NULL, 1);
    const int width = 48, rows[2] = {0, 1};
    daemon_scan s;
    daemon_scan_make(&s, "wide", width, 2, 120, 1, 2, 0x4a1f);
    s.spec.geometry.angle_step = 2 * M_PI / 120;
    s.spec.geometry.axis = 40.0;
    s.spec.geometry.half_acquisition = 1;
    daemon_send_scan(t.c, &s);
    daemon_wait_images(&t.in, RTOMO_TOPIC_SLICE, "wide", 2);
    float *ref = daemon_reference_slices(&s, rows, 2, NULL, NULL);
    /* The virtual detector: ceil(2 * 40) + 1 bins, the grid as wide. */
    const int field = 81;
    for (int i = 0; i < 2; i++) {
        const daemon_image *im = daemon_find_image(&t.in, RTOMO_TOPIC_SLICE,
                                                   "wide", -1, i);
        ck_assert_ptr_nonnull(im);
        ck_assert_int_eq(im->h.width, field);
        ck_assert_int_eq(im->h.height, field);
        double e = test_rel_l2(im->data, ref + (size_t)field * field * i,
                               (size_t)field * field);
        ck_assert_msg(e <= 1e-5, "slice %d: relative L2 %.3g to the engine",
                      i, e);
    }
    free(ref);
    daemon_wait_event(&t.in, "scan_complete", NULL, "wide", 0);
    daemon_scan_free(&s);
    /* Refused: a 180-degree scan (the engine says why), "auto" axis, a
     * continuous stream. */
    daemon_send_header(t.c, "{\"protocol\": 1, \"type\": \"scan_begin\", "
        "\"scan\": \"half-turn\", \"detector\": {\"width\": 32, "
        "\"height\": 2}, \"projections\": 60, \"axis\": 28, "
        "\"half_acquisition\": true}");
    const rtomo_event *ev = daemon_wait_event(&t.in, "rejected",
                                              "bad_geometry", "half-turn", 0);
    ck_assert_msg(strstr(ev->message, "360 degrees"), "%s", ev->message);
    daemon_send_header(t.c, "{\"protocol\": 1, \"type\": \"scan_begin\", "
        "\"scan\": \"half-auto\", \"detector\": {\"width\": 32, "
        "\"height\": 2}, \"projections\": 10, \"angle_step\": 36, "
        "\"axis\": \"auto\", \"half_acquisition\": true}");
    ev = daemon_wait_event(&t.in, "rejected", "bad_field", "half-auto", 0);
    ck_assert_msg(strstr(ev->message, "half_acquisition"), "%s", ev->message);
    daemon_send_header(t.c, "{\"protocol\": 1, \"type\": \"scan_begin\", "
        "\"scan\": \"half-cont\", \"detector\": {\"width\": 32, "
        "\"height\": 2}, \"projections\": 10, \"angle_step\": 36, \"axis\": 28, "
        "\"half_acquisition\": true, \"mode\": \"continuous\"}");
    ev = daemon_wait_event(&t.in, "rejected", "bad_field", "half-cont", 0);
    ck_assert_msg(strstr(ev->message, "half_acquisition"), "%s", ev->message);
    daemon_session_close(&t);
}
END_TEST

/* Flats after the projections: interpolated by projection index before
 * the slices are made (after the scan); the slices equal the engine's
 * and differ from those of the flats before alone. */
START_TEST(flats_after_interpolated)
{
    daemon_session t;
    daemon_session_open(&t, NULL, 1);
    const int rows[2] = {0, 1};
    daemon_scan s;
    daemon_scan_make(&s, "drift", WIDTH, 2, 60, 1, 2, 0xf1a1);
    daemon_scan_add_flats_after(&s, 2, 0.04, 0xf1a2);
    daemon_send_begin(t.c, &s);
    const rtomo_event *ev = daemon_wait_event(&t.in, "scan_started", NULL,
                                              "drift", 0);
    ck_assert_str_eq(ev->reason, "after_scan");
    ck_assert_msg(strstr(ev->message, "flats after the projections"), "%s",
                  ev->message);
    daemon_send_fields(t.c, &s);
    for (int p = 0; p < 60; p++)
        daemon_send_projection(t.c, &s, p);
    daemon_send_flats_after(t.c, &s);
    daemon_send_end(t.c, &s);
    float *ref = daemon_reference_slices(&s, rows, 2, NULL, NULL);
    double e = slices_error(&t.in, "drift", ref, 2);
    s.spec.n_flats_after = 0;
    float *before = daemon_reference_slices(&s, rows, 2, NULL, NULL);
    double e_before = slices_error(&t.in, "drift", before, 2);
    printf("flats after: relative L2 %.3g to the engine, %.3g to the flats "
           "before alone\n", e, e_before);
    ck_assert_msg(e <= 1e-5, "relative L2 %.3g to the engine", e);
    ck_assert_msg(e_before > 100 * e, "the flats after changed nothing");
    daemon_wait_event(&t.in, "scan_complete", NULL, "drift", 0);
    free(ref);
    free(before);
    daemon_scan_free(&s);
    /* Announced, none sent: the loop says so, the scan completes. */
    daemon_scan_make(&s, "no-after", WIDTH, 2, 30, 0, 1, 0xf1a3);
    s.spec.n_flats_after = 1;
    daemon_send_begin(t.c, &s);
    daemon_send_fields(t.c, &s);
    for (int p = 0; p < 30; p++)
        daemon_send_projection(t.c, &s, p);
    daemon_send_end(t.c, &s);
    ev = daemon_wait_event(&t.in, "error", "flats_after_missing", "no-after", 0);
    ck_assert_ptr_nonnull(strstr(ev->message, "none came"));
    daemon_wait_event(&t.in, "scan_complete", NULL, "no-after", 0);
    daemon_scan_free(&s);
    daemon_session_close(&t);
}
END_TEST

START_TEST(bad_settings_refused)
{
    daemon_session t;
    daemon_session_open(&t, NULL, 1);
    daemon_send_header(t.c, "{\"protocol\": 1, \"type\": \"scan_begin\", "
        "\"scan\": \"even\", \"detector\": {\"width\": 32, \"height\": 2}, \"projections\": 10, "
        "\"reconstruction\": {\"rings\": \"column_mean\", \"rings_width\": 8}}");
    const rtomo_event *ev = daemon_wait_event(&t.in, "rejected", "bad_field",
                                              "even", 0);
    ck_assert_msg(strstr(ev->message, "rings_width"), "%s", ev->message);
    daemon_send_header(t.c, "{\"protocol\": 1, \"type\": \"scan_begin\", "
        "\"scan\": \"no-energy\", \"detector\": {\"width\": 32, \"height\": 2}, \"projections\": 10, "
        "\"reconstruction\": {\"phase\": {\"delta_beta\": 250, "
        "\"distance_m\": 0.1, \"pixel_m\": 1e-6}}}");
    ev = daemon_wait_event(&t.in, "rejected", "bad_geometry", "no-energy", 0);
    ck_assert_msg(strstr(ev->message, "energy_kev"), "%s", ev->message);
    daemon_send_header(t.c, "{\"protocol\": 1, \"type\": \"scan_begin\", "
        "\"scan\": \"negative\", \"detector\": {\"width\": 32, \"height\": 2}, \"projections\": 10, "
        "\"reconstruction\": {\"phase\": {\"delta_beta\": -1}}}");
    ev = daemon_wait_event(&t.in, "rejected", "bad_field", "negative", 0);
    ck_assert_msg(strstr(ev->message, "reconstruction.phase.delta_beta"), "%s",
                  ev->message);
    daemon_send_header(t.c, "{\"protocol\": 1, \"type\": \"scan_begin\", "
        "\"scan\": \"unknown\", \"detector\": {\"width\": 32, \"height\": 2}, \"projections\": 10, "
        "\"reconstruction\": {\"rings\": \"wavelet\"}}");
    ev = daemon_wait_event(&t.in, "rejected", "bad_field", "unknown", 0);
    ck_assert_msg(strstr(ev->message, "column_mean"), "%s", ev->message);
    daemon_send_header(t.c, "{\"protocol\": 1, \"type\": \"scan_begin\", "
        "\"scan\": \"after-phase\", \"detector\": {\"width\": 32, "
        "\"height\": 2}, \"projections\": 10, \"flats\": 1, "
        "\"flats_after\": 1, \"reconstruction\": {\"phase\": "
        "{\"delta_beta\": 100, \"energy_kev\": 20, \"distance_m\": 0.1, "
        "\"pixel_m\": 1e-6}}}");
    ev = daemon_wait_event(&t.in, "rejected", "bad_geometry", "after-phase", 0);
    ck_assert_msg(strstr(ev->message, "phase retrieval"), "%s", ev->message);
    daemon_send_header(t.c, "{\"protocol\": 1, \"type\": \"scan_begin\", "
        "\"scan\": \"after-none\", \"detector\": {\"width\": 32, "
        "\"height\": 2}, \"projections\": 10, \"flats_after\": 1}");
    ev = daemon_wait_event(&t.in, "rejected", "bad_field", "after-none", 0);
    ck_assert_msg(strstr(ev->message, "flats_after"), "%s", ev->message);
    daemon_session_close(&t);
}
END_TEST

int main(void)
{
    const TTest *tests[] = {
        phase_and_rings_applied, rings_default_and_continuous,
        half_acquisition_extends_the_field, flats_after_interpolated,
        bad_settings_refused,
    };
    return daemon_run_tests("daemon_processing", tests,
                            (int)(sizeof tests / sizeof tests[0]), 120);
}
