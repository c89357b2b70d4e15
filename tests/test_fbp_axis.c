/*
 * test_fbp_axis.c — rtomo_fbp_find_axis finds the rotation axis of
 * simulated Shepp-Logan scans: noise-free (within 0.1 px) and with the
 * camera's Poisson-like noise at 10^4 flat counts (within 0.3 px), for
 * axes off centre, near either edge and at small widths, from one pair or
 * from all opposed pairs of a 360-degree scan; the axis found minimises a
 * mismatch computed here without the engine; bad inputs are refused.
 *
 * Every measured error is printed; the bounds are the (12), with
 * the measured values (gcc 12, x86-64, several seeds) next to them.  A
 * broken method misses by whole bins (a sign error by 2 |axis - centre|).
 *
 * Rows: 64 of a 128-row phantom, from the skull-and-brain rows at the top
 * down through the small features.  The noise bound is about information,
 * not method: one pair of only 4 rows near z = 0.35, where the phantom is
 * a smooth skull and a uniform brain, leaves an off-centre axis (whose
 * overlap holds only the featureless interior) 0.3 to 3.7 px off at 10^4
 * counts; 4 rows at z = -0.25 (small features) 0.2 px at worst; 64 rows
 * 0.10 px (27 seeds).  A real detector gives hundreds of rows.  The whole program
 * runs in about 6 s.
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

#define DET_HEIGHT 128  /* the phantom's rows; ROWS of them are used */
#ifndef ROW_FIRST
#define ROW_FIRST 40    /* z from 0.37 to -0.62: skull and brain at the
                           top, the small features below */
#endif
#ifndef ROWS
#define ROWS 64
#endif
#define FLAT_COUNTS 1e4
#define N_FLATS 16      /* flats and darks averaged, as at a beamline */

/* ------------------------------------------------------------ helpers ---- */

/* One pair of projections (ROWS x width each, malloc'd). */
typedef struct scan_pair {
    float *first, *opposed;
} scan_pair;

/* Rows ROW_FIRST.. of the phantom's projection at `angle`, axis at `axis`. */
static float *project(int width, double axis, double angle)
{
    rtomo_phantom ph;
    rtomo_phantom_init(&ph, width, DET_HEIGHT);
    ph.axis = axis;
    float *out = malloc(sizeof(float) * ROWS * width);
    ck_assert_ptr_nonnull(out);
    for (int r = 0; r < ROWS; r++)
        rtomo_phantom_project_row(&ph, ROW_FIRST + r, angle,
                                  out + (size_t)r * width);
    return out;
}

/* Mean of N_FLATS camera frames of n pixels (dark or flat). */
static double *mean_frame(rtomo_camera *cam, size_t n, int flat)
{
    double *sum = calloc(n, sizeof(double));
    uint16_t *frame = malloc(sizeof(uint16_t) * n);
    ck_assert(sum && frame);
    for (int i = 0; i < N_FLATS; i++) {
        if (flat)
            rtomo_camera_flat(cam, n, frame);
        else
            rtomo_camera_dark(cam, n, frame);
        for (size_t j = 0; j < n; j++)
            sum[j] += frame[j] / (double)N_FLATS;
    }
    free(frame);
    return sum;
}

/* Line integrals through the camera: counts with noise, then normalised
 * as a beamline would, -log((raw - dark) / (flat - dark)), in place. */
static void expose(rtomo_camera *cam, float *p, size_t n)
{
    uint16_t *raw = malloc(sizeof(uint16_t) * n);
    ck_assert_ptr_nonnull(raw);
    double *dark = mean_frame(cam, n, 0), *flat = mean_frame(cam, n, 1);
    rtomo_camera_expose(cam, p, n, raw);
    for (size_t i = 0; i < n; i++) {
        const double ratio = (raw[i] - dark[i]) / (flat[i] - dark[i]);
        p[i] = (float)-log(ratio > 1e-6 ? ratio : 1e-6);
    }
    free(raw);
    free(dark);
    free(flat);
}

/* The camera of the issue: 10^4 counts in the flat, Poisson-like noise. */
static rtomo_camera noisy_camera(uint64_t salt)
{
    rtomo_camera cam;
    rtomo_camera_init(&cam);
    cam.flat_level = FLAT_COUNTS;
    cam.noise = 1;
    cam.seed = test_seed(salt, 0);
    return cam;
}

/* A pair at angles a and a + pi; with cam, through the camera. */
static scan_pair make_pair(int width, double axis, double a,
                           rtomo_camera *cam)
{
    scan_pair p = {project(width, axis, a), project(width, axis, a + M_PI)};
    if (cam) {
        expose(cam, p.first, (size_t)ROWS * width);
        expose(cam, p.opposed, (size_t)ROWS * width);
    }
    return p;
}

static void free_pairs(scan_pair *pairs, int n)
{
    for (int i = 0; i < n; i++) {
        free(pairs[i].first);
        free(pairs[i].opposed);
    }
}

/* The engine's axis from pairs[0..n-1]; fails the test on an error. */
static double find_axis(const scan_pair *pairs, int n, int width,
                        double *quality)
{
    const float *first[64], *opposed[64];
    ck_assert_int_le(n, 64);
    for (int i = 0; i < n; i++) {
        first[i] = pairs[i].first;
        opposed[i] = pairs[i].opposed;
    }
    double axis = NAN;
    rtomo_error err;
    ck_assert_msg(rtomo_fbp_find_axis(first, opposed, n, ROWS, width, &axis,
                                      quality, &err) == RTOMO_OK,
                  "find_axis: %s", err.message);
    return axis;
}

/* Axis of one pair at angle 0.3 rad (nothing special about it). */
static double axis_error(int width, double truth, rtomo_camera *cam,
                         const char *label)
{
    scan_pair p = make_pair(width, truth, 0.3, cam);
    double quality;
    const double found = find_axis(&p, 1, width, &quality);
    free_pairs(&p, 1);
    const double error = found - truth;
    printf("%-10s width %4d axis %8.3f: found %9.4f, error %+.4f px, "
           "quality %.4f\n", label, width, truth, found, error, quality);
    ck_assert_msg(quality > 0.5, "quality %g for a clear mirror image",
                  quality);
    return fabs(error);
}

/* ---------------------------------------------------- noise-free data ---- */

START_TEST(test_noise_free)
{
    const double axes[] = {1023.37, 600.8, 1480.25, 1023.5, 1100.0};
    double worst = 0.0;
    for (size_t i = 0; i < sizeof axes / sizeof *axes; i++)
        worst = fmax(worst, axis_error(2048, axes[i], NULL, "exact"));
    printf("exact, width 2048: worst error %.4f px\n", worst);
    ck_assert_msg(worst <= 0.1, "worst error %g px", worst); /* 0.011 */
}
END_TEST

START_TEST(test_small_widths)
{
    const int widths[] = {256, 257, 64};
    const double offsets[] = {0.37, -40.2, 35.85};  /* from the centre */
    double worst = 0.0;
    for (size_t w = 0; w < sizeof widths / sizeof *widths; w++)
        for (size_t i = 0; i < sizeof offsets / sizeof *offsets; i++) {
            const double centre = (widths[w] - 1) / 2.0;
            const double truth = centre + offsets[i] * widths[w] / 256.0;
            worst = fmax(worst, axis_error(widths[w], truth, NULL, "exact"));
        }
    printf("exact, small widths: worst error %.4f px\n", worst);
    ck_assert_msg(worst <= 0.1, "worst error %g px", worst); /* 0.027 */
}
END_TEST

/* The axis close to either edge, just inside the margin: the mirror
 * images share only ~130 bins, which hold the phantom's skull, cut by the
 * detector edge. */
START_TEST(test_near_edges)
{
    const int margin = rtomo_fbp_axis_margin(2048);
    printf("margin at width 2048: %d bins\n", margin);
    ck_assert_int_gt(margin, 0);
    ck_assert_int_lt(margin, 100);
    const double axes[] = {margin + 0.3, 2047 - margin - 0.6};
    double worst = 0.0;
    for (size_t i = 0; i < sizeof axes / sizeof *axes; i++)
        worst = fmax(worst, axis_error(2048, axes[i], NULL, "edge"));
    printf("edge, width 2048: worst error %.4f px\n", worst);
    ck_assert_msg(worst <= 0.1, "worst error %g px", worst); /* 0.004 */
}
END_TEST

/* ------------------------------------------------------- noisy data ---- */

START_TEST(test_noisy)
{
    const double axes[] = {1023.37, 600.8, 1480.25};
    double worst = 0.0;
    for (size_t i = 0; i < sizeof axes / sizeof *axes; i++) {
        rtomo_camera cam = noisy_camera(100 + i);
        worst = fmax(worst, axis_error(2048, axes[i], &cam, "noisy"));
    }
    for (int i = 0; i < 3; i++) {
        rtomo_camera cam = noisy_camera(200 + i);
        worst = fmax(worst, axis_error(256, 140.62 - 20 * i, &cam, "noisy"));
    }
    printf("noisy (10^4 counts): worst error %.4f px\n", worst);
    ck_assert_msg(worst <= 0.3, "worst error %g px", worst); /* 0.10 */
}
END_TEST

/* A 360-degree scan of n projections: pairs (p, p + n/2), all combined. */
START_TEST(test_360_scan)
{
    enum { N_PROJ = 24, WIDTH = 1024 };
    const double truth = 700.63;
    rtomo_camera cam = noisy_camera(300);
    scan_pair pairs[N_PROJ / 2];
    double worst_single = 0.0;
    for (int p = 0; p < N_PROJ / 2; p++) {
        const double a = 2.0 * M_PI * p / N_PROJ;
        pairs[p] = make_pair(WIDTH, truth, a, &cam);
        worst_single = fmax(worst_single,
                            fabs(find_axis(&pairs[p], 1, WIDTH, NULL) -
                                 truth));
    }
    double quality;
    const double found = find_axis(pairs, N_PROJ / 2, WIDTH, &quality);
    free_pairs(pairs, N_PROJ / 2);
    printf("360 scan, %d pairs, noisy: found %.4f, error %+.4f px "
           "(worst single pair %.4f), quality %.4f\n", N_PROJ / 2, found,
           found - truth, worst_single, quality);
    /* Combined: 0.014 px at worst over 27 seeds; single pairs (printed, not
     * bounded: some angles put little structure in the overlap) 0.1 to
     * 0.31 px. */
    ck_assert_msg(fabs(found - truth) <= 0.1, "error %g px", found - truth);
}
END_TEST

/* Swapping the roles of the two projections mirrors nothing: the same
 * axis. */
START_TEST(test_symmetric_in_pair)
{
    rtomo_camera cam = noisy_camera(400);
    scan_pair p = make_pair(512, 300.41, 1.1, &cam);
    scan_pair q = {p.opposed, p.first};
    const double ab = find_axis(&p, 1, 512, NULL);
    const double ba = find_axis(&q, 1, 512, NULL);
    free_pairs(&p, 1);
    printf("swapped pair: %.6f vs %.6f\n", ab, ba);
    ck_assert_msg(fabs(ab - ba) < 1e-6, "%.9f vs %.9f", ab, ba);
}
END_TEST

/* ------------------------------------------ an independent mismatch ---- */

/* Mean squared difference of a(s) and b(2 c - s) over the bins where both
 * exist; b is the exact projection at a + pi of the phantom moved by
 * 2 c - round(2 c) bins, so that b(2 c - s) is a sample of it: no
 * interpolation, no FFT, nothing of the engine. */
static double exact_mismatch(int width, double truth, double angle,
                             const float *a, double c)
{
    const int t = (int)lround(2.0 * c);
    float *b = project(width, truth + (t - 2.0 * c), angle + M_PI);
    double sum = 0.0;
    long n = 0;
    for (int r = 0; r < ROWS; r++)
        for (int s = 0; s < width; s++) {
            if (t - s < 0 || t - s >= width)
                continue;
            const double d = a[r * width + s] - b[r * width + t - s];
            sum += d * d;
            n++;
        }
    free(b);
    return sum / n;
}

START_TEST(test_found_minimises_mismatch)
{
    enum { WIDTH = 1024 };
    const double truth = 512.77, angle = 0.7;
    scan_pair p = make_pair(WIDTH, truth, angle, NULL);
    const double found = find_axis(&p, 1, WIDTH, NULL);
    const double at = exact_mismatch(WIDTH, truth, angle, p.first, found);
    const double steps[] = {-0.5, -0.25, 0.25, 0.5};
    printf("mismatch at the axis found (%.4f): %.3g\n", found, at);
    for (size_t i = 0; i < sizeof steps / sizeof *steps; i++) {
        const double m = exact_mismatch(WIDTH, truth, angle, p.first,
                                        found + steps[i]);
        printf("  at %+.2f px: %.3g\n", steps[i], m);
        ck_assert_msg(m > at, "mismatch %g at %+g px is not above %g", m,
                      steps[i], at);
    }
    free_pairs(&p, 1);
}
END_TEST

/* On noisy data: the direct sum of squared differences on the half-bin
 * grid of axes (2 c integer: no interpolation) is smallest at the grid
 * point nearest the axis found.  The true axis lies 0.1 px from a grid
 * point: at 0.2 px (tried first) the two nearest grid points differ in
 * mismatch by less than the noise does between seeds, and one seed in
 * ~30 put the smaller one 0.3 px away (RTOMO_TEST_SEED=1795500523). */
static double grid_mismatch(const float *a, const float *b, int width,
                            int t)
{
    double sum = 0.0;
    long n = 0;
    for (int r = 0; r < ROWS; r++)
        for (int s = 0; s < width; s++)
            if (t - s >= 0 && t - s < width) {
                const double d = a[r * width + s] - b[r * width + t - s];
                sum += d * d;
                n++;
            }
    return sum / n;
}

START_TEST(test_found_minimises_noisy_mismatch)
{
    enum { WIDTH = 1024 };
    rtomo_camera cam = noisy_camera(500);
    scan_pair p = make_pair(WIDTH, 430.1, 2.0, &cam);
    const double found = find_axis(&p, 1, WIDTH, NULL);
    const int t = (int)lround(2.0 * found);
    const double at = grid_mismatch(p.first, p.opposed, WIDTH, t);
    printf("noisy grid mismatch at %.1f: %.4g\n", t / 2.0, at);
    for (int d = -4; d <= 4; d++) {
        if (d == 0)
            continue;
        const double m = grid_mismatch(p.first, p.opposed, WIDTH, t + d);
        printf("  at %+.1f px: %.4g\n", d / 2.0, m);
        ck_assert_msg(m > at, "mismatch %g at %+g px is not above %g", m,
                      d / 2.0, at);
    }
    free_pairs(&p, 1);
}
END_TEST

/* ------------------------------------------------------------ errors ---- */

static void expect_invalid(const float *const *first,
                           const float *const *opposed, int n_pairs,
                           int rows, int width, double *axis,
                           const char *fragment)
{
    rtomo_error err;
    rtomo_status st = rtomo_fbp_find_axis(first, opposed, n_pairs, rows,
                                          width, axis, NULL, &err);
    ck_assert_int_eq(st, RTOMO_E_INVALID);
    ck_assert_int_eq(err.code, RTOMO_E_INVALID);
    ck_assert_msg(strstr(err.message, fragment), "message \"%s\" lacks "
                  "\"%s\"", err.message, fragment);
}

START_TEST(test_errors)
{
    enum { WIDTH = 64 };
    scan_pair p = make_pair(WIDTH, 31.5, 0.2, NULL);
    const float *first[1] = {p.first}, *opposed[1] = {p.opposed};
    const float *none[1] = {NULL};
    double axis;
    expect_invalid(NULL, opposed, 1, ROWS, WIDTH, &axis, "first");
    expect_invalid(first, NULL, 1, ROWS, WIDTH, &axis, "opposed");
    expect_invalid(none, opposed, 1, ROWS, WIDTH, &axis, "pair 0");
    expect_invalid(first, none, 1, ROWS, WIDTH, &axis, "pair 0");
    expect_invalid(first, opposed, 0, ROWS, WIDTH, &axis, "n_pairs");
    expect_invalid(first, opposed, 1, 0, WIDTH, &axis, "rows");
    expect_invalid(first, opposed, 1, ROWS, 7, &axis, "width");
    expect_invalid(first, opposed, 1, ROWS, WIDTH, NULL, "axis");
    /* A NaN or inf is reported where it is. */
    p.opposed[2 * WIDTH + 17] = NAN;
    expect_invalid(first, opposed, 1, ROWS, WIDTH, &axis,
                   "opposed projection of pair 0 holds a non-finite value "
                   "at row 2, bin 17");
    p.opposed[2 * WIDTH + 17] = 0.0f;
    p.first[5] = INFINITY;
    expect_invalid(first, opposed, 1, ROWS, WIDTH, &axis, "row 0, bin 5");
    /* Nothing to compare: all zero, or uniform. */
    for (int i = 0; i < ROWS * WIDTH; i++)
        p.first[i] = p.opposed[i] = 0.0f;
    expect_invalid(first, opposed, 1, ROWS, WIDTH, &axis, "zero");
    for (int i = 0; i < ROWS * WIDTH; i++)
        p.first[i] = p.opposed[i] = 0.25f;
    expect_invalid(first, opposed, 1, ROWS, WIDTH, &axis, "featureless");
    free_pairs(&p, 1);
    /* A NULL error is allowed. */
    ck_assert_int_eq(rtomo_fbp_find_axis(NULL, NULL, 1, 1, 64, &axis, NULL,
                                         NULL), RTOMO_E_INVALID);
}
END_TEST

/* Frames that are not opposed have no clear mirror image: a low quality
 * figure, not an error. */
START_TEST(test_quality_without_mirror)
{
    enum { WIDTH = 512 };
    float *a = project(WIDTH, 255.5, 0.0);
    float *b = project(WIDTH, 255.5, M_PI / 2);   /* 90 degrees, not 180 */
    const float *first[1] = {a}, *opposed[1] = {b};
    double axis, quality, good;
    scan_pair p = make_pair(WIDTH, 255.5, 0.0, NULL);
    find_axis(&p, 1, WIDTH, &good);
    free_pairs(&p, 1);
    rtomo_error err;
    ck_assert_int_eq(rtomo_fbp_find_axis(first, opposed, 1, ROWS, WIDTH,
                                         &axis, &quality, &err), RTOMO_OK);
    printf("quality: opposed pair %.4f, frames 90 degrees apart %.4f\n",
           good, quality);
    ck_assert_msg(quality < good, "%g vs %g", quality, good);
    free(a);
    free(b);
}
END_TEST

static Suite *axis_suite(void)
{
    Suite *s = suite_create("fbp_axis");
    TCase *tc = tcase_create("axis");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_noise_free);
    tcase_add_test(tc, test_small_widths);
    tcase_add_test(tc, test_near_edges);
    tcase_add_test(tc, test_noisy);
    tcase_add_test(tc, test_360_scan);
    tcase_add_test(tc, test_symmetric_in_pair);
    tcase_add_test(tc, test_found_minimises_mismatch);
    tcase_add_test(tc, test_found_minimises_noisy_mismatch);
    tcase_add_test(tc, test_errors);
    tcase_add_test(tc, test_quality_without_mirror);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    /* Measured errors must reach the log even from a failing test. */
    setvbuf(stdout, NULL, _IOLBF, 0);
    return rtomo_check_run(axis_suite());
}
