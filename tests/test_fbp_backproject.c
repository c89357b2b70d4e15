/*
 * test_fbp_backproject.c — the CPU back-projector computes exactly the sum
 * rtomo_engine.h defines (it is the reference every GPU kernel is checked
 * against), for random sinograms, irregular angles, off-centre axes,
 * per-projection shifts, grids larger than the detector and random ROIs;
 * plus the filtered-data round trip and what missing projections do.
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

/* ------------------------------------------------------------ helpers ---- */

/* Bin j of a projection row, 0 outside the detector. */
static double bin_value(const float *q, int width, long j)
{
    return j >= 0 && j < width ? q[j] : 0.0;
}

/* The defined sum at one pixel, in double.  *slack gets what the float
 * computation may legitimately differ by: for NEAREST, where s + 0.5 lies
 * within `tie` of a whole number, either neighbour is a right answer. */
static double pixel_by_definition(const rtomo_fbp_geometry *g,
                                  const float *sino, int x, int y,
                                  double tie, double *slack)
{
    const double c = 0.5 * (g->slice_size - 1);
    double sum = 0.0;
    *slack = 0.0;
    for (int p = 0; p < g->n_proj; p++) {
        const float *q = sino + (size_t)p * g->det_width;
        double a = g->angles[p];
        double s = g->axis + g->axis_shift[p] + (x - c) * cos(a) -
                   (y - c) * sin(a);
        if (g->interp == RTOMO_INTERP_LINEAR) {
            double i = floor(s), f = s - i;
            sum += (1 - f) * bin_value(q, g->det_width, (long)i) +
                   f * bin_value(q, g->det_width, (long)i + 1);
        } else {
            double j = floor(s + 0.5);
            sum += bin_value(q, g->det_width, (long)j);
            double frac = s + 0.5 - j;
            if (frac < tie || frac > 1 - tie)
                *slack += fabs(bin_value(q, g->det_width, (long)j) -
                               bin_value(q, g->det_width,
                                         (long)(frac < tie ? j - 1 : j + 1)));
        }
    }
    return sum;
}

/* Reconstruct kept rows `rows` and compare every ROI pixel with the
 * definition.  Returns the worst error relative to sum_p max|q_p|. */
static double compare_with_definition(rtomo_fbp *plan, const int *rows,
                                      int n_rows, const float *sinograms)
{
    const rtomo_fbp_geometry *g = rtomo_fbp_geometry_of(plan);
    const size_t pixels = (size_t)g->roi_width * g->roi_height;
    const size_t sino_size = (size_t)g->n_proj * g->det_width;
    float *out = malloc(sizeof(float) * pixels * n_rows);
    rtomo_error err;
    ck_assert_msg(rtomo_fbp_reconstruct(plan, rows, n_rows, out, &err) == 0,
                  "%s", err.message);
    double worst = 0.0;
    for (int r = 0; r < n_rows; r++) {
        const float *sino = sinograms + (size_t)(rows[r] - g->row_first) *
                                            sino_size;
        double scale = 0.0;
        for (int p = 0; p < g->n_proj; p++) {
            double m = 0.0;
            for (int i = 0; i < g->det_width; i++)
                m = fmax(m, fabs(sino[(size_t)p * g->det_width + i]));
            scale += m;
        }
        for (int y = 0; y < g->roi_height; y++)
            for (int x = 0; x < g->roi_width; x++) {
                double slack;
                double want = pixel_by_definition(g, sino, g->roi_x + x,
                                                  g->roi_y + y, 1e-4, &slack);
                double got = out[r * pixels + (size_t)y * g->roi_width + x];
                double err_px = fmax(0.0, fabs(got - want) - slack) / scale;
                worst = fmax(worst, err_px);
            }
    }
    free(out);
    return worst;
}

/* A geometry that exercises every term of the definition. */
static rtomo_fbp_geometry irregular_geometry(int width, int n_proj, int slice,
                                             double *angles, double *shifts,
                                             uint64_t *rng)
{
    rtomo_fbp_geometry g = test_fbp_geometry(width, 6, n_proj);
    for (int p = 0; p < n_proj; p++) {
        angles[p] = 2 * M_PI * rtomo_random_uniform(rng);
        shifts[p] = 6.0 * (rtomo_random_uniform(rng) - 0.5);
    }
    g.angles = angles;
    g.axis_shift = shifts;
    g.axis = 0.5 * (width - 1) + 8.0 * (rtomo_random_uniform(rng) - 0.5);
    g.row_first = 1;
    g.row_count = 4;
    g.slice_size = slice;
    return g;
}

/* -------------------------------------------------------------- tests ---- */

static void check_definition(rtomo_interp interp, uint64_t seed)
{
    uint64_t rng = seed;
    double angles[50], shifts[50];
    /* a grid larger than the detector: many samples fall off its ends */
    rtomo_fbp_geometry g = irregular_geometry(37, 50, 53, angles, shifts, &rng);
    g.interp = interp;
    rtomo_fbp *plan = test_create_cpu(&g, 3);
    float *sino = test_random_normal(&rng, (size_t)4 * 50 * 37);
    rtomo_error err;
    ck_assert(rtomo_fbp_set_filtered(plan, 1, 4, sino, &err) == RTOMO_OK);
    const int rows[3] = {4, 1, 3};
    double full = compare_with_definition(plan, rows, 3, sino);
    ck_assert(rtomo_fbp_set_roi(plan, 5, 11, 31, 17, &err) == RTOMO_OK);
    double roi = compare_with_definition(plan, rows, 3, sino);
    printf("  %s: worst error %.2e (full), %.2e (ROI) of sum_p max|q_p|\n",
           rtomo_interp_name(interp), full, roi);
    /* Float32 detector coordinates (|s| < 64: a few 1e-6 bins) and float
     * sums of 50 terms.  Measured: linear 3.5e-7 / 3.2e-7, nearest
     * 6.3e-8 / 3.7e-8.  A misplaced half bin or a wrong sign gives O(1). */
    ck_assert_msg(full < 2e-6, "full slice off by %.2e", full);
    ck_assert_msg(roi < 2e-6, "ROI off by %.2e", roi);
    free(sino);
    rtomo_fbp_destroy(plan);
}

START_TEST(linear_matches_definition) { check_definition(RTOMO_INTERP_LINEAR, 0xb9001); }
END_TEST

START_TEST(nearest_matches_definition) { check_definition(RTOMO_INTERP_NEAREST, 0xb9002); }
END_TEST

/* The reference must not depend on how work is split over threads. */
START_TEST(threads_do_not_change_results)
{
    uint64_t rng = 0xb9003;
    double angles[64], shifts[64];
    rtomo_fbp_geometry g = irregular_geometry(64, 64, 64, angles, shifts, &rng);
    float *sino = test_random_normal(&rng, (size_t)4 * 64 * 64);
    float *out[3];
    const int threads[3] = {1, 2, 5};
    const int rows[4] = {1, 2, 3, 4};
    rtomo_error err;
    for (int t = 0; t < 3; t++) {
        rtomo_fbp *plan = test_create_cpu(&g, threads[t]);
        ck_assert(rtomo_fbp_set_filtered(plan, 1, 4, sino, &err) == RTOMO_OK);
        out[t] = malloc(sizeof(float) * 4 * 64 * 64);
        ck_assert(rtomo_fbp_reconstruct(plan, rows, 4, out[t], &err) == 0);
        rtomo_fbp_destroy(plan);
    }
    ck_assert(memcmp(out[0], out[1], sizeof(float) * 4 * 64 * 64) == 0);
    ck_assert(memcmp(out[0], out[2], sizeof(float) * 4 * 64 * 64) == 0);
    for (int t = 0; t < 3; t++)
        free(out[t]);
    free(sino);
}
END_TEST

START_TEST(filtered_round_trip)
{
    uint64_t rng = 0xb9004;
    double angles[20], shifts[20];
    rtomo_fbp_geometry g = irregular_geometry(33, 20, 0, angles, shifts, &rng);
    rtomo_fbp *plan = test_create_cpu(&g, 2);
    float *sino = test_random_normal(&rng, (size_t)2 * 20 * 33);
    float back[20 * 33];
    rtomo_error err;
    /* kept rows are 1..4: set rows 2 and 3, leave 1 and 4 untouched */
    ck_assert(rtomo_fbp_set_filtered(plan, 2, 2, sino, &err) == RTOMO_OK);
    for (int r = 0; r < 2; r++) {
        ck_assert(rtomo_fbp_get_filtered(plan, 2 + r, back, &err) == 0);
        ck_assert(memcmp(back, sino + r * 20 * 33, sizeof back) == 0);
    }
    ck_assert(rtomo_fbp_get_filtered(plan, 4, back, &err) == RTOMO_OK);
    for (int i = 0; i < 20 * 33; i++)
        ck_assert(back[i] == 0.0f);
    /* set_filtered replaces what a projection filtered there before */
    float frame[6 * 33];
    test_fill_normal(&rng, frame, 6 * 33);
    ck_assert(rtomo_fbp_add_projection(plan, 7, frame, RTOMO_DTYPE_F32, NAN,
                                       NAN, &err) == RTOMO_OK);
    ck_assert(rtomo_fbp_set_filtered(plan, 2, 2, sino, &err) == RTOMO_OK);
    ck_assert(rtomo_fbp_get_filtered(plan, 3, back, &err) == RTOMO_OK);
    ck_assert(memcmp(back, sino + 20 * 33, sizeof back) == 0);
    free(sino);
    rtomo_fbp_destroy(plan);
}
END_TEST

/* Projections never fed contribute nothing: a scan split into two halves
 * reconstructs, summed, to the whole scan. */
START_TEST(missing_projections_contribute_nothing)
{
    const int width = 48, n_proj = 30;
    uint64_t rng = 0xb9005;
    double angles[30], shifts[30];
    rtomo_fbp_geometry g = irregular_geometry(width, n_proj, 0, angles,
                                              shifts, &rng);
    rtomo_fbp *whole = test_create_cpu(&g, 2), *part[2];
    part[0] = test_create_cpu(&g, 2);
    part[1] = test_create_cpu(&g, 1);
    float frame[6 * 48];
    unsigned char in_first[30];
    rtomo_error err;
    for (int p = 0; p < n_proj; p++) {
        test_fill_uniform(&rng, frame, (size_t)6 * width, 0.0, 1.0);
        in_first[p] = rtomo_random_uniform(&rng) < 0.5;
        ck_assert(rtomo_fbp_add_projection(whole, p, frame, RTOMO_DTYPE_F32,
                                           NAN, NAN, &err) == RTOMO_OK);
        ck_assert(rtomo_fbp_add_projection(part[!in_first[p]], p, frame,
                                           RTOMO_DTYPE_F32, NAN, NAN,
                                           &err) == RTOMO_OK);
    }
    float sino[30 * 48];
    ck_assert(rtomo_fbp_get_filtered(part[0], 2, sino, &err) == RTOMO_OK);
    for (int p = 0; p < n_proj; p++)
        for (int i = 0; i < width && !in_first[p]; i++)
            ck_assert_msg(sino[p * width + i] == 0.0f, "projection %d was "
                          "never fed but holds %g", p, sino[p * width + i]);
    const int row = 2;
    float a[48 * 48], b[48 * 48], sum[48 * 48];
    ck_assert(rtomo_fbp_reconstruct(part[0], &row, 1, a, &err) == RTOMO_OK);
    ck_assert(rtomo_fbp_reconstruct(part[1], &row, 1, b, &err) == RTOMO_OK);
    ck_assert(rtomo_fbp_reconstruct(whole, &row, 1, sum, &err) == RTOMO_OK);
    double worst = 0.0, scale = 0.0;
    for (int i = 0; i < width * width; i++) {
        worst = fmax(worst, fabs((double)a[i] + b[i] - sum[i]));
        scale = fmax(scale, fabs(sum[i]));
    }
    printf("  halves vs whole: %.2e of max\n", worst / scale);
    /* float sums in a different order: measured 2.4e-7 */
    ck_assert_msg(worst < 1e-5 * scale, "halves differ from the whole by "
                  "%.2e", worst / scale);
    rtomo_fbp_stats st;
    rtomo_fbp_get_stats(whole, &st);
    ck_assert_int_eq(st.slices_reconstructed, 1);
    ck_assert_double_eq(st.updates, (double)width * width * n_proj);
    ck_assert(st.backproject_seconds > 0.0);
    ck_assert(st.reconstruct_seconds >= st.backproject_seconds);
    rtomo_fbp_destroy(whole);
    rtomo_fbp_destroy(part[0]);
    rtomo_fbp_destroy(part[1]);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("fbp_backproject");
    TCase *tc = tcase_create("backproject");
    tcase_add_test(tc, linear_matches_definition);
    tcase_add_test(tc, nearest_matches_definition);
    tcase_add_test(tc, threads_do_not_change_results);
    tcase_add_test(tc, filtered_round_trip);
    tcase_add_test(tc, missing_projections_contribute_nothing);
    suite_add_tcase(s, tc);
    return rtomo_check_run(s);
}
