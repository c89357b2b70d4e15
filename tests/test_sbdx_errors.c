/*
 * test_sbdx_errors.c — bad SBDX geometries, bad calls, bad frames and bad
 * simulator or composite arguments get the right status and a message that
 * names the problem, never a crash; the plan stays usable afterwards.
 */
#include "config.h"

#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rtomo_sim.h"
#include "sbdx_composite.h"
#include "test_sbdx_support.h"
#include "check_run.h"

/* create() must refuse g with `code` and a message containing `word`. */
static void expect_refused(const rtomo_sbdx_geometry *g,
                           const rtomo_engine_options *opt, rtomo_status code,
                           const char *word)
{
    rtomo_error err;
    rtomo_clear_error(&err);
    rtomo_sbdx *plan = rtomo_sbdx_create(g, opt, &err);
    ck_assert_msg(plan == NULL, "a geometry with bad %s was accepted", word);
    ck_assert_msg(err.code == code, "bad %s: status %s, want %s", word,
                  rtomo_status_name(err.code), rtomo_status_name(code));
    ck_assert_msg(strstr(err.message, word) != NULL,
                  "message \"%s\" does not mention %s", err.message, word);
}

START_TEST(bad_geometries_are_refused)
{
    rtomo_engine_options opt = test_cpu_options(2);
    rtomo_sbdx_geometry g;
    double bad_ratio[6];
    static const struct { int field, value; const char *word; } ints[] = {
        {0, 0, "holes"}, {0, 5000, "holes"}, {1, -3, "holes"},
        {2, 0, "detector"}, {3, 4097, "detector"}, {2, -1, "detector"},
        {4, 0, "shift_m"}, {4, 2000, "shift_m"},
        {5, 0, "n_planes"}, {5, 300, "n_planes"},
        {6, -1, "plane size"}, {6, 40000, "plane size"},
        {7, 50000, "origin"}, {8, -1, "composite_radius"},
        {8, 33, "composite_radius"}, {9, 2, "flat_field"},
        {9, -1, "flat_field"},
    };
    for (size_t t = 0; t < sizeof ints / sizeof ints[0]; t++) {
        sbdx_small_geometry(&g);
        int *field[] = {&g.holes_x, &g.holes_y, &g.det_width, &g.det_height,
                        &g.shift_m, &g.n_planes, &g.out_width, &g.origin_y,
                        &g.composite_radius, &g.flat_field};
        *field[ints[t].field] = ints[t].value;
        expect_refused(&g, &opt, RTOMO_E_INVALID, ints[t].word);
    }
    static const double ratios[] = {NAN, -1.0, 0.0, 65.0, INFINITY};
    for (size_t t = 0; t < sizeof ratios / sizeof ratios[0]; t++) {
        sbdx_small_geometry(&g);
        memcpy(bad_ratio, sbdx_small_ratios, sizeof bad_ratio);
        bad_ratio[3] = ratios[t];
        g.ratios = bad_ratio;
        expect_refused(&g, &opt, RTOMO_E_INVALID, "ratios[3]");
    }
    sbdx_small_geometry(&g);
    g.ratios = NULL;
    expect_refused(&g, &opt, RTOMO_E_INVALID, "ratios");

    rtomo_error err;
    ck_assert_ptr_null(rtomo_sbdx_create(NULL, &opt, &err));
    ck_assert_int_eq(err.code, RTOMO_E_INVALID);
    ck_assert_int_eq(rtomo_sbdx_geometry_validate(NULL, &err), RTOMO_E_INVALID);
}
END_TEST

START_TEST(bad_options_are_refused)
{
    rtomo_sbdx_geometry g;
    sbdx_small_geometry(&g);
    rtomo_engine_options opt = test_cpu_options(2);
    opt.sbdx_method = (rtomo_sbdx_method)9;
    expect_refused(&g, &opt, RTOMO_E_INVALID, "method");
    if (rtomo_cuda_device_count() == 0) {
        opt = test_cpu_options(2);
        opt.backend = RTOMO_BACKEND_CUDA;
        expect_refused(&g, &opt, RTOMO_E_UNAVAILABLE, "CUDA");
    }
}
END_TEST

static rtomo_sbdx *small_plan(rtomo_sbdx_geometry *g)
{
    sbdx_small_geometry(g);
    return sbdx_create_cpu(g, RTOMO_SBDX_PIXEL_CENTRIC, 2);
}

START_TEST(bad_calls_get_a_status_not_a_crash)
{
    rtomo_sbdx_geometry g;
    rtomo_sbdx *plan = small_plan(&g);
    uint64_t seed = 0xe1u;
    float *frame = sbdx_random_frame(&g, RTOMO_DTYPE_F32, &seed);
    size_t n = sbdx_planes_pixels(&g);
    float *planes = malloc(sizeof(float) * n);
    uint16_t *u16 = malloc(sizeof(uint16_t) * n);
    ck_assert(planes && u16);
    rtomo_sbdx_output out = {.planes = planes};
    rtomo_error err;

    ck_assert_int_eq(rtomo_sbdx_collect(plan, &out, NULL, &err), RTOMO_E_STATE);
    ck_assert_ptr_nonnull(strstr(err.message, "submitted"));
    ck_assert_int_eq(rtomo_sbdx_submit(plan, NULL, RTOMO_DTYPE_F32, 1, &err),
                     RTOMO_E_INVALID);
    ck_assert_int_eq(rtomo_sbdx_submit(plan, frame, (rtomo_dtype)7, 1, &err),
                     RTOMO_E_INVALID);
    ck_assert_ptr_nonnull(strstr(err.message, "sample type"));

    /* NaN and infinite samples, anywhere in the frame. */
    size_t where = sbdx_frame_samples(&g) - 1 -
                   (size_t)(rtomo_random_uniform(&seed) * 1000.0);
    float saved = frame[where];
    frame[where] = NAN;
    ck_assert_int_eq(rtomo_sbdx_reconstruct(plan, frame, RTOMO_DTYPE_F32, &out,
                                            &err), RTOMO_E_INVALID);
    ck_assert_ptr_nonnull(strstr(err.message, "NaN"));
    frame[where] = -INFINITY;
    ck_assert_int_eq(rtomo_sbdx_submit(plan, frame, RTOMO_DTYPE_F32, 1, &err),
                     RTOMO_E_INVALID);
    frame[where] = saved;

    ck_assert_int_eq(rtomo_sbdx_collect(plan, NULL, NULL, &err),
                     RTOMO_E_INVALID);
    ck_assert_int_eq(rtomo_sbdx_submit(plan, frame, RTOMO_DTYPE_F32, 1, &err),
                     RTOMO_OK);
    ck_assert_int_eq(rtomo_sbdx_reconstruct(plan, frame, RTOMO_DTYPE_F32, &out,
                                            &err), RTOMO_E_STATE);
    rtomo_sbdx_output bad_u16 = {.planes_u16 = u16, .u16_scale = 0.0f};
    ck_assert_int_eq(rtomo_sbdx_collect(plan, &bad_u16, NULL, &err),
                     RTOMO_E_INVALID);
    ck_assert_ptr_nonnull(strstr(err.message, "u16_scale"));
    bad_u16.u16_scale = NAN;
    ck_assert_int_eq(rtomo_sbdx_collect(plan, &bad_u16, NULL, &err),
                     RTOMO_E_INVALID);

    /* After all that the plan still reconstructs. */
    uint64_t tag = 0;
    ck_assert_int_eq(rtomo_sbdx_collect(plan, &out, &tag, &err), RTOMO_OK);
    ck_assert(tag == 1);
    ck_assert_int_eq(rtomo_sbdx_reconstruct(plan, frame, RTOMO_DTYPE_F32, &out,
                                            &err), RTOMO_OK);
    rtomo_sbdx_destroy(plan);
    rtomo_sbdx_destroy(NULL);
    free(frame);
    free(planes);
    free(u16);
}
END_TEST

/* rtomo_engine.h: composite_radius 0 means the default, 2. */
START_TEST(zero_composite_radius_means_two)
{
    rtomo_sbdx_geometry g;
    sbdx_small_geometry(&g);
    uint64_t seed = 0x2au;
    void *frame = sbdx_random_frame(&g, RTOMO_DTYPE_U8, &seed);
    size_t img = sbdx_planes_pixels(&g) / g.n_planes;
    uint16_t *d0 = malloc(2 * img), *d2 = malloc(2 * img);
    uint16_t *d5 = malloc(2 * img);
    ck_assert(d0 && d2 && d5);
    uint16_t *depths[3] = {d0, d2, d5};
    int radii[3] = {0, 2, 5};
    for (int t = 0; t < 3; t++) {
        g.composite_radius = radii[t];
        rtomo_sbdx_output out = {.depth = depths[t]};
        sbdx_reconstruct_into(&g, RTOMO_SBDX_PIXEL_CENTRIC, 2, frame,
                              RTOMO_DTYPE_U8, &out);
    }
    ck_assert(memcmp(d0, d2, 2 * img) == 0);
    ck_assert(memcmp(d2, d5, 2 * img) != 0);  /* the radius does matter */
    free(frame);
    free(d0);
    free(d2);
    free(d5);
}
END_TEST

START_TEST(simulator_refuses_bad_scenes)
{
    rtomo_sbdx_geometry g;
    sbdx_small_geometry(&g);
    uint8_t *frame = malloc(sbdx_frame_samples(&g));
    ck_assert_ptr_nonnull(frame);
    rtomo_sbdx_object ok = {RTOMO_SBDX_POINT, 1.0, 20, 20, 0, 0, 50};
    rtomo_error err;
    ck_assert_int_eq(rtomo_sbdx_simulate(&g, &ok, 1, 200, NULL, &err),
                     RTOMO_E_INVALID);
    ck_assert_int_eq(rtomo_sbdx_simulate(&g, NULL, 2, 200, frame, &err),
                     RTOMO_E_INVALID);
    ck_assert_int_eq(rtomo_sbdx_simulate(&g, &ok, -1, 200, frame, &err),
                     RTOMO_E_INVALID);
    ck_assert_int_eq(rtomo_sbdx_simulate(&g, &ok, 1, NAN, frame, &err),
                     RTOMO_E_INVALID);
    ck_assert_ptr_nonnull(strstr(err.message, "background"));
    rtomo_sbdx_object bad = ok;
    bad.kind = (rtomo_sbdx_object_kind)5;
    ck_assert_int_eq(rtomo_sbdx_simulate(&g, &bad, 1, 200, frame, &err),
                     RTOMO_E_INVALID);
    ck_assert_ptr_nonnull(strstr(err.message, "kind"));
    bad = ok;
    bad.ratio = -0.5;
    ck_assert_int_eq(rtomo_sbdx_simulate(&g, &bad, 1, 200, frame, &err),
                     RTOMO_E_INVALID);
    ck_assert_ptr_nonnull(strstr(err.message, "ratio"));
    bad = ok;
    bad.y1 = NAN;
    ck_assert_int_eq(rtomo_sbdx_simulate(&g, &bad, 1, 200, frame, &err),
                     RTOMO_E_INVALID);
    g.shift_m = 0;
    ck_assert_int_eq(rtomo_sbdx_simulate(&g, &ok, 1, 200, frame, &err),
                     RTOMO_E_INVALID);
    ck_assert_ptr_nonnull(strstr(err.message, "shift_m"));
    free(frame);
}
END_TEST

START_TEST(composite_refuses_bad_arguments)
{
    float planes[2 * 4 * 3] = {0};
    float resp[4] = {1, 1, 1, 1};
    const float *rx[2] = {resp, resp};
    float composite[12];
    uint16_t depth[12];
    rtomo_sbdx_stack s = {planes, 2, 4, 3, NULL, NULL, 0};
    rtomo_error err;
    ck_assert_int_eq(rtomo_sbdx_composite(NULL, 2, composite, depth, &err),
                     RTOMO_E_INVALID);
    ck_assert_int_eq(rtomo_sbdx_composite(&s, -1, composite, depth, &err),
                     RTOMO_E_INVALID);
    ck_assert_int_eq(rtomo_sbdx_composite_rows(&s, 2, 2, 2, composite, depth,
                                               &err), RTOMO_E_INVALID);
    ck_assert_ptr_nonnull(strstr(err.message, "rows"));
    ck_assert_int_eq(rtomo_sbdx_composite_rows(&s, 2, -1, 1, composite, depth,
                                               &err), RTOMO_E_INVALID);
    s.response_x = rx;
    ck_assert_int_eq(rtomo_sbdx_composite(&s, 2, composite, depth, &err),
                     RTOMO_E_INVALID);
    ck_assert_ptr_nonnull(strstr(err.message, "responses"));
    s.response_x = NULL;
    s.width = 0;
    ck_assert_int_eq(rtomo_sbdx_composite(&s, 2, composite, depth, &err),
                     RTOMO_E_INVALID);
    s.width = 4;
    s.planes = NULL;
    ck_assert_int_eq(rtomo_sbdx_composite(&s, 2, composite, depth, &err),
                     RTOMO_E_INVALID);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("sbdx_errors");
    TCase *tc = tcase_create("errors");
    tcase_add_test(tc, bad_geometries_are_refused);
    tcase_add_test(tc, bad_options_are_refused);
    tcase_add_test(tc, bad_calls_get_a_status_not_a_crash);
    tcase_add_test(tc, zero_composite_radius_means_two);
    tcase_add_test(tc, simulator_refuses_bad_scenes);
    tcase_add_test(tc, composite_refuses_bad_arguments);
    suite_add_tcase(s, tc);
    return rtomo_check_run(s);
}
