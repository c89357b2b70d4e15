/*
 * test_fbp_fov.c — the circular field of view (rtomo_engine.h, "Circular
 * field of view") on the CPU backend, the reference the GPU kernels are
 * checked against: a masked reconstruction equals the unmasked one bit for
 * bit inside the circle and is exactly 0 outside, with the radius computed
 * here from the documented formula (not from the engine), on an off-centre
 * axis with per-projection shifts, a grid larger than the detector and an
 * ROI at an odd offset; the same on half acquisition's virtual detector
 * and on an oblique plane; and an axis whose circle is under one bin is
 * refused with a message naming the axis and the width.
 *
 * Random data come from test_seed (RTOMO_TEST_SEED replays a run).
 */
#include "config.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rtomo_engine.h"
#include "check_run.h"
#include "test_util.h"

#define DET_W 40
#define N_PROJ 30
#define SLICE 52            /* != DET_W: the grid's centre is not the axis */
#define ROWS 3

/* R of the header, from the axis and shifts of the detector that is
 * back-projected, written out here rather than asked of the engine. */
static double radius_of(double axis, const double *shifts, int n, int width)
{
    double r = INFINITY;
    for (int p = 0; p < n; p++) {
        const double s = axis + (shifts ? shifts[p] : 0.0);
        r = fmin(r, fmin(s, (width - 1) - s));
    }
    return r;
}

static int inside(int x, int y, int size, double r)
{
    const double c = 0.5 * (size - 1);
    return (x - c) * (x - c) + (y - c) * (y - c) <= r * r;
}

/* Masked image against the unmasked one over an ROI of a size x size
 * grid: equal bits inside, 0.0f outside; counts both kinds of pixel. */
static void compare(const float *masked, const float *full, const int roi[4],
                    int size, double r, int images, long *n_in, long *n_out)
{
    *n_in = *n_out = 0;
    for (int k = 0; k < images; k++)
        for (int j = 0; j < roi[3]; j++)
            for (int i = 0; i < roi[2]; i++) {
                const size_t o = ((size_t)k * roi[3] + j) * roi[2] + i;
                if (inside(roi[0] + i, roi[1] + j, size, r)) {
                    ck_assert_msg(memcmp(&masked[o], &full[o], sizeof(float))
                                      == 0,
                                  "pixel (%d, %d) inside: %.9g != %.9g",
                                  roi[0] + i, roi[1] + j, masked[o], full[o]);
                    (*n_in)++;
                } else {
                    ck_assert_msg(masked[o] == 0.0f && !signbit(masked[o]),
                                  "pixel (%d, %d) outside is %g, not 0",
                                  roi[0] + i, roi[1] + j, masked[o]);
                    (*n_out)++;
                }
            }
}

/* Two CPU plans of g, full and circle, with the same random filtered
 * sinograms on rows 0..ROWS-1. */
static void make_pair(rtomo_fbp_geometry *g, uint64_t *rng, int threads,
                      rtomo_fbp **full, rtomo_fbp **circle)
{
    g->field_of_view = RTOMO_FOV_FULL;
    *full = test_create_cpu(g, threads);
    g->field_of_view = RTOMO_FOV_CIRCLE;
    *circle = test_create_cpu(g, threads);
    const int w = rtomo_fbp_geometry_of(*full)->det_width;
    const size_t n = (size_t)ROWS * g->n_proj * w;
    float *sino = test_random_normal(rng, n);
    rtomo_error err;
    ck_assert_int_eq(rtomo_fbp_set_filtered(*full, 0, ROWS, sino, &err),
                     RTOMO_OK);
    ck_assert_int_eq(rtomo_fbp_set_filtered(*circle, 0, ROWS, sino, &err),
                     RTOMO_OK);
    free(sino);
}

static void check_slices(const rtomo_fbp_geometry *g, rtomo_fbp *full,
                         rtomo_fbp *circle, double r, int size)
{
    const rtomo_fbp_geometry *pg = rtomo_fbp_geometry_of(circle);
    const int roi[4] = {pg->roi_x, pg->roi_y, pg->roi_width, pg->roi_height};
    const int rows[ROWS] = {0, 1, 2};
    const size_t n = (size_t)ROWS * roi[2] * roi[3];
    float *a = malloc(sizeof(float) * n), *b = malloc(sizeof(float) * n);
    test_poison(a, n);
    test_poison(b, n);
    for (int interp = 0; interp <= RTOMO_INTERP_NEAREST; interp++) {
        rtomo_error err;
        ck_assert_int_eq(rtomo_fbp_set_interp(full, interp, &err), RTOMO_OK);
        ck_assert_int_eq(rtomo_fbp_set_interp(circle, interp, &err), RTOMO_OK);
        test_reconstruct(full, rows, ROWS, b);
        test_reconstruct(circle, rows, ROWS, a);
        long n_in, n_out;
        compare(a, b, roi, size, r, ROWS, &n_in, &n_out);
        printf("%s R = %.4f: %ld pixels inside, %ld outside\n",
               rtomo_interp_name(interp), r, n_in, n_out);
        ck_assert_msg(n_in > 0 && n_out > 0, "the ROI should straddle the "
                      "circle (%ld in, %ld out)", n_in, n_out);
    }
    (void)g;
    free(a);
    free(b);
}

START_TEST(test_slices_match_inside_zero_outside)
{
    uint64_t rng = test_seed(0xf0f, _i);
    double angles[N_PROJ], shifts[N_PROJ];
    rtomo_fbp_geometry g = test_fbp_geometry(DET_W, ROWS, N_PROJ);
    for (int p = 0; p < N_PROJ; p++) {
        angles[p] = test_rand_real(&rng, 0.0, M_PI);
        shifts[p] = test_rand_real(&rng, -2.5, 2.5);
    }
    g.angles = angles;
    g.axis_shift = shifts;
    g.axis = 0.5 * (DET_W - 1) + test_rand_real(&rng, -4.0, 4.0);
    g.slice_size = SLICE;
    /* An ROI at odd offsets that crosses the circle's edge. */
    g.roi_x = 3;
    g.roi_y = 7;
    g.roi_width = 45;
    g.roi_height = 41;
    rtomo_fbp *full, *circle;
    make_pair(&g, &rng, 1 + _i % 3, &full, &circle);
    const double r = radius_of(g.axis, shifts, N_PROJ, DET_W);
    check_slices(&g, full, circle, r, SLICE);
    rtomo_fbp_destroy(full);
    rtomo_fbp_destroy(circle);
}
END_TEST

START_TEST(test_half_acquisition)
{
    uint64_t rng = test_seed(0xf1f, _i);
    const double axis = _i ? 5.25 : 33.5;   /* left and right of the centre */
    rtomo_fbp_geometry g = test_fbp_geometry(DET_W, ROWS, 2 * N_PROJ);
    g.angle_step = 2 * M_PI / g.n_proj;
    g.axis = axis;
    g.half_acquisition = 1;
    rtomo_fbp *full, *circle;
    make_pair(&g, &rng, 2, &full, &circle);
    /* The virtual detector of the header: W' = ceil(2a) + 1 right of the
     * centre, else W + ceil(W - 1 - 2a) with the axis moved as much. */
    int w;
    double a;
    if (axis > 0.5 * (DET_W - 1)) {
        w = (int)ceil(2 * axis) + 1;
        a = axis;
    } else {
        const int o = (int)ceil(DET_W - 1 - 2 * axis);
        w = DET_W + o;
        a = axis + o;
    }
    const rtomo_fbp_geometry *pg = rtomo_fbp_geometry_of(circle);
    ck_assert_int_eq(pg->det_width, w);
    const double r = radius_of(a, NULL, g.n_proj, w);
    /* A grid larger than the virtual detector, so that corners fall out. */
    check_slices(&g, full, circle, r, pg->slice_size);
    rtomo_fbp_destroy(full);
    rtomo_fbp_destroy(circle);
}
END_TEST

START_TEST(test_plane)
{
    uint64_t rng = test_seed(0xf2f, 0);
    double shifts[N_PROJ];
    rtomo_fbp_geometry g = test_fbp_geometry(DET_W, ROWS, N_PROJ);
    for (int p = 0; p < N_PROJ; p++)
        shifts[p] = test_rand_real(&rng, -2.0, 2.0);
    g.axis_shift = shifts;
    g.axis = 0.5 * (DET_W - 1) + 2.75;
    g.slice_size = SLICE;
    rtomo_fbp *full, *circle;
    make_pair(&g, &rng, 3, &full, &circle);
    const double r = radius_of(g.axis, shifts, N_PROJ, DET_W);
    /* Oblique: through the volume at a slant, reaching past the circle. */
    rtomo_fbp_plane pl = {{25.3, 26.1, 1.0}, {0.8, 0.6, 0.0},
                          {-0.6 * 0.1, 0.8 * 0.1, 0.99}, 70, 3};
    ck_assert_int_eq(rtomo_fbp_plane_validate(&pl, &pl, NULL), RTOMO_OK);
    const size_t n = (size_t)pl.width * pl.height;
    float *a = malloc(sizeof(float) * n), *b = malloc(sizeof(float) * n);
    rtomo_error err;
    ck_assert_int_eq(rtomo_fbp_reconstruct_plane(full, &pl, NULL, 0, b, &err),
                     RTOMO_OK);
    ck_assert_int_eq(rtomo_fbp_reconstruct_plane(circle, &pl, NULL, 0, a, &err),
                     RTOMO_OK);
    const double c = 0.5 * (SLICE - 1);
    long n_in = 0, n_out = 0;
    for (int j = 0; j < pl.height; j++)
        for (int i = 0; i < pl.width; i++) {
            const double di = i - 0.5 * (pl.width - 1);
            const double dj = j - 0.5 * (pl.height - 1);
            double p[3];
            for (int k = 0; k < 3; k++)
                p[k] = pl.centre[k] + di * pl.u[k] + dj * pl.v[k];
            const size_t o = (size_t)j * pl.width + i;
            const double d2 = (p[0] - c) * (p[0] - c) + (p[1] - c) * (p[1] - c);
            if (d2 > r * r) {
                ck_assert_msg(a[o] == 0.0f, "plane (%d, %d) outside: %g", i,
                              j, a[o]);
                n_out++;
            } else {
                ck_assert_msg(memcmp(&a[o], &b[o], sizeof(float)) == 0,
                              "plane (%d, %d) inside: %.9g != %.9g", i, j,
                              a[o], b[o]);
                n_in++;
            }
        }
    printf("plane R = %.4f: %ld inside, %ld outside\n", r, n_in, n_out);
    ck_assert(n_in > 0 && n_out > 0);
    free(a);
    free(b);
    rtomo_fbp_destroy(full);
    rtomo_fbp_destroy(circle);
}
END_TEST

static void expect_refused(const rtomo_fbp_geometry *g, const char *why)
{
    rtomo_error err;
    ck_assert_int_eq(rtomo_fbp_geometry_validate(g, &err), RTOMO_E_INVALID);
    printf("refused (%s): %s\n", why, err.message);
    ck_assert_msg(strstr(err.message, "field_of_view") &&
                      strstr(err.message, "axis") &&
                      strstr(err.message, "width"),
                  "%s: the message should name the field, axis and width: %s",
                  why, err.message);
    rtomo_engine_options opt = test_cpu_options(1);
    ck_assert_ptr_null(rtomo_fbp_create(g, &opt, &err));
}

START_TEST(test_refusals)
{
    double shifts[N_PROJ] = {0};
    rtomo_fbp_geometry g = test_fbp_geometry(DET_W, ROWS, N_PROJ);
    g.field_of_view = RTOMO_FOV_CIRCLE;
    g.axis = 0.75;                          /* R = 0.75 */
    expect_refused(&g, "axis near the left edge");
    g.axis = DET_W - 1.5;                   /* R = 0.5 */
    expect_refused(&g, "axis near the right edge");
    g.axis = 1.0;                           /* R = 1: accepted */
    rtomo_error err;
    ck_assert_int_eq(rtomo_fbp_geometry_validate(&g, &err), RTOMO_OK);
    g.axis = 10.0;
    shifts[7] = -9.5;                       /* one projection at 0.5 */
    g.axis_shift = shifts;
    expect_refused(&g, "a shift to the edge");
    g.axis_shift = NULL;
    g.field_of_view = (rtomo_fov)7;
    ck_assert_int_eq(rtomo_fbp_geometry_validate(&g, &err), RTOMO_E_INVALID);
    ck_assert_ptr_nonnull(strstr(err.message, "field_of_view"));
    /* The axis moved later is checked as well; the old circle stays. */
    g.field_of_view = RTOMO_FOV_CIRCLE;
    rtomo_fbp *plan = test_create_cpu(&g, 1);
    ck_assert_int_eq(rtomo_fbp_set_axis(plan, 0.25, &err), RTOMO_E_INVALID);
    ck_assert_int_eq(rtomo_fbp_set_axis(plan, 12.0, &err), RTOMO_OK);
    rtomo_fbp_destroy(plan);
    /* The names the daemon and the protocol use. */
    rtomo_fov f;
    ck_assert_int_eq(rtomo_fov_parse("circle", &f), RTOMO_OK);
    ck_assert_int_eq(f, RTOMO_FOV_CIRCLE);
    ck_assert_str_eq(rtomo_fov_name(RTOMO_FOV_FULL), "full");
    ck_assert_int_ne(rtomo_fov_parse("square", &f), RTOMO_OK);
}
END_TEST

static Suite *fov_suite(void)
{
    Suite *s = suite_create("fbp_fov");
    TCase *tc = tcase_create("fov");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_slices_match_inside_zero_outside, 0, 4);
    tcase_add_loop_test(tc, test_half_acquisition, 0, 2);
    tcase_add_test(tc, test_plane);
    tcase_add_test(tc, test_refusals);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    return rtomo_check_run(fov_suite());
}
