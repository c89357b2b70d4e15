/*
 * test_fbp_errors.c — bad geometry and bad calls get the right status and a
 * message that names the problem, and never crash or corrupt the plan:
 * after every refused call the plan still reconstructs correctly.
 */
#include "config.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rtomo_engine.h"
#include "rtomo_sim.h"
#include "check_run.h"
#include "test_util.h"

#define W 16
#define H 4
#define NPROJ 8

static rtomo_fbp_geometry good_geometry(void)
{
    rtomo_fbp_geometry g = test_fbp_geometry(W, H, NPROJ);
    g.row_first = 1;
    g.row_count = 2;
    return g;
}

static void assert_error(rtomo_status got, const rtomo_error *err,
                         rtomo_status want, const char *word, const char *what)
{
    ck_assert_msg(got == want, "%s: status %s, expected %s (%s)", what,
                  rtomo_status_name(got), rtomo_status_name(want),
                  err->message);
    ck_assert_msg(err->code == want, "%s: err->code %s", what,
                  rtomo_status_name(err->code));
    ck_assert_msg(strstr(err->message, word), "%s: message '%s' does not "
                  "name '%s'", what, err->message, word);
}

/* ------------------------------------------------------------ geometry ---- */

typedef struct bad_geometry {
    const char *what;
    void (*spoil)(rtomo_fbp_geometry *g);
    const char *word;           /* the message must contain it */
} bad_geometry;

static const double nan_angles[NPROJ] = {0, 0.1, 0.2, NAN, 0.4, 0.5, 0.6, 0.7};
static const double huge_shifts[NPROJ] = {0, 0, 0, 0, 0, 1e9, 0, 0};

static void zero_width(rtomo_fbp_geometry *g) { g->det_width = 0; }
static void one_bin(rtomo_fbp_geometry *g) { g->det_width = 1; }
static void absurd_width(rtomo_fbp_geometry *g) { g->det_width = 1 << 30; }
static void zero_height(rtomo_fbp_geometry *g) { g->det_height = 0; }
static void negative_height(rtomo_fbp_geometry *g) { g->det_height = -4; }
static void zero_projections(rtomo_fbp_geometry *g) { g->n_proj = 0; }
static void absurd_projections(rtomo_fbp_geometry *g) { g->n_proj = 1 << 30; }
static void nan_start(rtomo_fbp_geometry *g) { g->angle_start = NAN; }
static void inf_step(rtomo_fbp_geometry *g) { g->angle_step = INFINITY; }
static void nan_in_list(rtomo_fbp_geometry *g) { g->angles = nan_angles; }
/* An angle list with no projections to go with it. */
static void list_without_count(rtomo_fbp_geometry *g)
{
    g->angles = nan_angles + 0;
    g->n_proj = 0;
}
static void far_axis(rtomo_fbp_geometry *g) { g->axis = 5.0 * W; }
static void inf_axis(rtomo_fbp_geometry *g) { g->axis = -INFINITY; }
static void huge_shift(rtomo_fbp_geometry *g) { g->axis_shift = huge_shifts; }
static void bad_window(rtomo_fbp_geometry *g) { g->window = (rtomo_window)17; }
static void bad_cutoff(rtomo_fbp_geometry *g) { g->cutoff = 1.5; }
static void nan_cutoff(rtomo_fbp_geometry *g) { g->cutoff = NAN; }
static void bad_interp(rtomo_fbp_geometry *g) { g->interp = (rtomo_interp)-1; }
static void rows_below(rtomo_fbp_geometry *g) { g->row_first = -1; }
static void rows_past_end(rtomo_fbp_geometry *g) { g->row_count = H; }
static void first_row_outside(rtomo_fbp_geometry *g) { g->row_first = H; }
static void negative_slice(rtomo_fbp_geometry *g) { g->slice_size = -1; }
static void huge_slice(rtomo_fbp_geometry *g) { g->slice_size = 1 << 20; }
static void roi_outside(rtomo_fbp_geometry *g)
{
    g->roi_x = 10;
    g->roi_y = 0;
    g->roi_width = 7;
    g->roi_height = 4;
}
static void roi_negative(rtomo_fbp_geometry *g)
{
    g->roi_x = -1;
    g->roi_width = 4;
    g->roi_height = 4;
}
static void roi_empty(rtomo_fbp_geometry *g)
{
    g->roi_x = 3;
    g->roi_y = 3;
}

static const bad_geometry bad_geometries[] = {
    {"zero width", zero_width, "det_width"},
    {"one bin", one_bin, "det_width"},
    {"absurd width", absurd_width, "det_width"},
    {"zero height", zero_height, "det_height"},
    {"negative height", negative_height, "det_height"},
    {"zero projections", zero_projections, "n_proj"},
    {"absurd projections", absurd_projections, "n_proj"},
    {"NaN angle_start", nan_start, "angle_start"},
    {"infinite angle_step", inf_step, "angle_step"},
    {"NaN in the angle list", nan_in_list, "angles[3]"},
    {"angle list without projections", list_without_count, "n_proj"},
    {"axis far off the detector", far_axis, "axis"},
    {"infinite axis", inf_axis, "axis"},
    {"huge axis shift", huge_shift, "axis_shift[5]"},
    {"unknown window", bad_window, "window"},
    {"cut-off above Nyquist", bad_cutoff, "cutoff"},
    {"NaN cut-off", nan_cutoff, "cutoff"},
    {"unknown interpolation", bad_interp, "interpolation"},
    {"negative first row", rows_below, "row_first"},
    {"rows past the detector", rows_past_end, "rows"},
    {"first row outside", first_row_outside, "row_first"},
    {"negative slice size", negative_slice, "slice_size"},
    {"huge slice size", huge_slice, "slice_size"},
    {"ROI outside the slice", roi_outside, "region of interest"},
    {"ROI at negative x", roi_negative, "region of interest"},
    {"ROI of no pixels", roi_empty, "region of interest"},
};

START_TEST(bad_geometry_is_refused)
{
    const bad_geometry *b = &bad_geometries[_i];
    rtomo_fbp_geometry g = good_geometry();
    b->spoil(&g);
    rtomo_engine_options opt = test_cpu_options(2);
    rtomo_error err;
    assert_error(rtomo_fbp_geometry_validate(&g, &err), &err, RTOMO_E_INVALID,
                 b->word, b->what);
    rtomo_clear_error(&err);
    rtomo_fbp *plan = rtomo_fbp_create(&g, &opt, &err);
    ck_assert_msg(!plan, "%s: plan created", b->what);
    assert_error(RTOMO_E_INVALID, &err, RTOMO_E_INVALID, b->word, b->what);
    int n;
    assert_error(rtomo_fbp_filter_response(&g, NULL, 0, &n, &err), &err,
                 RTOMO_E_INVALID, b->word, b->what);
}
END_TEST

START_TEST(null_geometry_and_null_error_are_safe)
{
    rtomo_error err;
    ck_assert(rtomo_fbp_create(NULL, NULL, &err) == NULL);
    ck_assert_int_eq(err.code, RTOMO_E_INVALID);
    rtomo_fbp_geometry g = good_geometry();
    g.det_width = 0;
    ck_assert(rtomo_fbp_create(&g, NULL, NULL) == NULL);
    rtomo_fbp_destroy(NULL);
}
END_TEST

START_TEST(cuda_without_cuda_is_unavailable)
{
    if (rtomo_cuda_device_count() > 0)
        return;     /* covered by the CUDA tests where a GPU exists */
    rtomo_fbp_geometry g = good_geometry();
    rtomo_engine_options opt = test_cpu_options(2);
    opt.backend = RTOMO_BACKEND_CUDA;
    rtomo_error err;
    ck_assert(rtomo_fbp_create(&g, &opt, &err) == NULL);
    assert_error(err.code, &err, RTOMO_E_UNAVAILABLE, "CUDA", "cuda backend");
    opt.backend = RTOMO_BACKEND_AUTO;
    rtomo_fbp *plan = rtomo_fbp_create(&g, &opt, &err);
    ck_assert_msg(plan, "auto without a GPU: %s", err.message);
    ck_assert_int_eq(rtomo_fbp_backend(plan), RTOMO_BACKEND_CPU);
    rtomo_fbp_destroy(plan);
}
END_TEST

/* --------------------------------------------------------------- calls ---- */

static rtomo_fbp *good_plan(void)
{
    rtomo_fbp_geometry g = good_geometry();
    return test_create_cpu(&g, 2);
}

/* A frame of line integrals of the phantom at projection p's angle. */
static void phantom_frame(const rtomo_fbp *plan, int p, float *frame)
{
    const rtomo_fbp_geometry *g = rtomo_fbp_geometry_of(plan);
    rtomo_phantom ph;
    rtomo_phantom_init(&ph, W, H);
    rtomo_phantom_project(&ph, g->angles[p], frame);
}

/* The plan still works: feed the phantom and compare with a fresh plan. */
static void assert_plan_still_works(rtomo_fbp *plan)
{
    rtomo_fbp *fresh = good_plan();
    float frame[W * H], a[W * W], b[W * W];
    rtomo_error err;
    for (int p = 0; p < NPROJ; p++) {
        phantom_frame(fresh, p, frame);
        ck_assert(rtomo_fbp_add_projection(plan, p, frame, RTOMO_DTYPE_F32,
                                           NAN, NAN, &err) == RTOMO_OK);
        ck_assert(rtomo_fbp_add_projection(fresh, p, frame, RTOMO_DTYPE_F32,
                                           NAN, NAN, &err) == RTOMO_OK);
    }
    int row = 2;
    ck_assert(rtomo_fbp_reconstruct(plan, &row, 1, a, &err) == RTOMO_OK);
    ck_assert(rtomo_fbp_reconstruct(fresh, &row, 1, b, &err) == RTOMO_OK);
    ck_assert(memcmp(a, b, sizeof a) == 0);
    rtomo_fbp_destroy(fresh);
}

START_TEST(bad_projection_calls)
{
    rtomo_fbp *plan = good_plan();
    float frame[W * H] = {0};
    rtomo_error err;
    assert_error(rtomo_fbp_add_projection(plan, -1, frame, RTOMO_DTYPE_F32,
                                          NAN, NAN, &err),
                 &err, RTOMO_E_RANGE, "index -1", "negative index");
    assert_error(rtomo_fbp_add_projection(plan, NPROJ, frame, RTOMO_DTYPE_F32,
                                          NAN, NAN, &err),
                 &err, RTOMO_E_RANGE, "index 8", "index n_proj");
    assert_error(rtomo_fbp_add_projection(plan, 0, NULL, RTOMO_DTYPE_F32, NAN,
                                          NAN, &err),
                 &err, RTOMO_E_INVALID, "frame", "no frame");
    assert_error(rtomo_fbp_add_projection(plan, 0, frame, (rtomo_dtype)9, NAN,
                                          NAN, &err),
                 &err, RTOMO_E_INVALID, "sample type", "bad dtype");
    assert_error(rtomo_fbp_add_projection(plan, 0, frame, RTOMO_DTYPE_F32,
                                          INFINITY, NAN, &err),
                 &err, RTOMO_E_INVALID, "angle", "infinite angle");
    assert_error(rtomo_fbp_add_projection(plan, 0, frame, RTOMO_DTYPE_F32,
                                          NAN, 1e6, &err),
                 &err, RTOMO_E_INVALID, "axis shift", "huge shift");
    frame[3 * W + 3] = NAN;     /* outside the kept rows: still refused */
    assert_error(rtomo_fbp_add_projection(plan, 0, frame, RTOMO_DTYPE_F32,
                                          NAN, NAN, &err),
                 &err, RTOMO_E_INVALID, "NaN", "NaN sample");
    frame[3 * W + 3] = INFINITY;
    assert_error(rtomo_fbp_add_projection(plan, 0, frame, RTOMO_DTYPE_F32,
                                          NAN, NAN, &err),
                 &err, RTOMO_E_INVALID, "infinite", "infinite sample");
    assert_plan_still_works(plan);
    rtomo_fbp_destroy(plan);
}
END_TEST

/* Dark 100 and flat 1000 counts, then a projection of 400 counts. */
static void feed_references_and_projection(rtomo_fbp *plan)
{
    uint16_t dark[W * H], flat[W * H], proj[W * H];
    for (int i = 0; i < W * H; i++) {
        dark[i] = 100;
        flat[i] = 1000;
        proj[i] = (uint16_t)(400 + 10 * (i % W));
    }
    rtomo_error err;
    ck_assert(rtomo_fbp_add_dark(plan, dark, RTOMO_DTYPE_U16, &err) == 0);
    ck_assert(rtomo_fbp_add_flat(plan, flat, RTOMO_DTYPE_U16, &err) == 0);
    ck_assert(rtomo_fbp_add_projection(plan, 0, proj, RTOMO_DTYPE_U16, NAN,
                                       NAN, &err) == RTOMO_OK);
}

START_TEST(bad_and_late_references)
{
    rtomo_fbp *plan = good_plan(), *fresh = good_plan();
    float bad[W * H];
    rtomo_error err;
    for (int i = 0; i < W * H; i++)
        bad[i] = 1e4f;
    bad[3 * W + 1] = NAN;   /* after the kept rows 1 and 2 */
    /* refused frames must leave no trace in the averages */
    assert_error(rtomo_fbp_add_dark(plan, bad, RTOMO_DTYPE_F32, &err), &err,
                 RTOMO_E_INVALID, "dark frame sample 49", "NaN dark");
    assert_error(rtomo_fbp_add_flat(plan, bad, RTOMO_DTYPE_F32, &err), &err,
                 RTOMO_E_INVALID, "flat frame sample 49", "NaN flat");
    assert_error(rtomo_fbp_add_flat(plan, NULL, RTOMO_DTYPE_U16, &err), &err,
                 RTOMO_E_INVALID, "frame", "no flat");
    feed_references_and_projection(plan);
    feed_references_and_projection(fresh);
    float a[NPROJ * W], b[NPROJ * W];
    ck_assert(rtomo_fbp_get_filtered(plan, 1, a, &err) == RTOMO_OK);
    ck_assert(rtomo_fbp_get_filtered(fresh, 1, b, &err) == RTOMO_OK);
    ck_assert_msg(memcmp(a, b, sizeof a) == 0,
                  "a refused dark or flat frame changed the averages");
    /* Late darks and flats start the next flat field: the projection
     * already fed keeps the one it was normalised with. */
    uint16_t counts[W * H] = {0};
    ck_assert(rtomo_fbp_add_dark(plan, counts, RTOMO_DTYPE_U16, &err) ==
              RTOMO_OK);
    ck_assert(rtomo_fbp_add_flat(plan, counts, RTOMO_DTYPE_U16, &err) ==
              RTOMO_OK);
    ck_assert(rtomo_fbp_get_filtered(plan, 1, a, &err) == RTOMO_OK);
    ck_assert(memcmp(a, b, sizeof a) == 0);
    rtomo_fbp_destroy(plan);
    rtomo_fbp_destroy(fresh);
}
END_TEST

START_TEST(bad_rows_and_buffers)
{
    rtomo_fbp *plan = good_plan();      /* kept rows 1 and 2 */
    float sino[NPROJ * W * 2] = {0}, out[W * W * 2];
    rtomo_error err;
    int rows[2] = {1, 3};
    assert_error(rtomo_fbp_reconstruct(plan, rows, 2, out, &err), &err,
                 RTOMO_E_RANGE, "row 3", "reconstruct a row not kept");
    assert_error(rtomo_fbp_reconstruct(plan, rows, 0, out, &err), &err,
                 RTOMO_E_INVALID, "row", "no rows");
    assert_error(rtomo_fbp_reconstruct(plan, rows, 1, NULL, &err), &err,
                 RTOMO_E_INVALID, "output", "no output");
    assert_error(rtomo_fbp_reconstruct(plan, NULL, 1, out, &err), &err,
                 RTOMO_E_INVALID, "row", "no row list");
    /* two rows starting at the last kept one overrun the kept range */
    assert_error(rtomo_fbp_set_filtered(plan, 2, 2, sino, &err), &err,
                 RTOMO_E_RANGE, "row 3", "set_filtered past the kept rows");
    assert_error(rtomo_fbp_set_filtered(plan, 0, 1, sino, &err), &err,
                 RTOMO_E_RANGE, "row 0", "set_filtered before the kept rows");
    assert_error(rtomo_fbp_set_filtered(plan, 1, 0, sino, &err), &err,
                 RTOMO_E_INVALID, "sinogram", "set_filtered of no rows");
    assert_error(rtomo_fbp_get_filtered(plan, 3, sino, &err), &err,
                 RTOMO_E_RANGE, "row 3", "get_filtered of a row not kept");
    assert_error(rtomo_fbp_get_filtered(plan, 1, NULL, &err), &err,
                 RTOMO_E_INVALID, "buffer", "get_filtered without buffer");
    assert_error(rtomo_fbp_set_roi(plan, 0, 0, W + 1, 1, &err), &err,
                 RTOMO_E_INVALID, "region of interest", "set_roi too wide");
    assert_error(rtomo_fbp_set_interp(plan, (rtomo_interp)5, &err), &err,
                 RTOMO_E_INVALID, "interpolation", "set_interp unknown");
    assert_plan_still_works(plan);
    rtomo_fbp_destroy(plan);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("fbp_errors");
    TCase *tc = tcase_create("errors");
    tcase_add_loop_test(tc, bad_geometry_is_refused, 0,
                        sizeof bad_geometries / sizeof bad_geometries[0]);
    tcase_add_test(tc, null_geometry_and_null_error_are_safe);
    tcase_add_test(tc, cuda_without_cuda_is_unavailable);
    tcase_add_test(tc, bad_projection_calls);
    tcase_add_test(tc, bad_and_late_references);
    tcase_add_test(tc, bad_rows_and_buffers);
    suite_add_tcase(s, tc);
    return rtomo_check_run(s);
}
