/*
 * test_fbp_filter.c — the filtering half of the CPU FBP engine: the filter
 * response and its windows, the packed two-rows-per-transform path against
 * a direct double-precision filtering, and the flat-field normalisation
 * (per-pixel gain and offset, clamping of impossible samples).
 */
#include "config.h"

#include <check.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fbp_filter_design.h"
#include "rtomo_engine.h"
#include "rtomo_sim.h"
#include "check_run.h"
#include "test_util.h"

/* ------------------------------------------------------------ helpers ---- */

/* Filtered projection `proj` of detector row `row` (det_width values). */
static void filtered_row(rtomo_fbp *plan, int row, int proj, float *out)
{
    const rtomo_fbp_geometry *g = rtomo_fbp_geometry_of(plan);
    float *sino = malloc(sizeof(float) * g->n_proj * g->det_width);
    rtomo_error err;
    ck_assert_msg(rtomo_fbp_get_filtered(plan, row, sino, &err) == RTOMO_OK,
                  "get_filtered: %s", err.message);
    memcpy(out, sino + (size_t)proj * g->det_width,
           sizeof(float) * g->det_width);
    free(sino);
}

/* DFT bin k of an n-point transform as a frequency in cycles per bin. */
static double bin_frequency(int k, int n)
{
    return (k <= n / 2 ? k : k - n) / (double)n;
}

/* ------------------------------------------------------ filter design ---- */

/* The windows as rtomo_engine.h defines them, written out independently
 * of fbp_filter_design.c: ramp multipliers at |f| <= fc = cutoff / 2. */
static double closed_form_window(rtomo_window w, double f, double cutoff)
{
    const double fc = cutoff / 2, a = fabs(f);
    if (a > fc)
        return 0.0;
    switch (w) {
    case RTOMO_WINDOW_RAMLAK: return 1.0;
    case RTOMO_WINDOW_SHEPP_LOGAN: {
        double x = a / (2 * fc);    /* sinc(x) = sin(pi x) / (pi x) */
        return x == 0 ? 1.0 : sin(M_PI * x) / (M_PI * x);
    }
    case RTOMO_WINDOW_COSINE: return cos(M_PI * a / (2 * fc));
    case RTOMO_WINDOW_HAMMING: return 0.54 + 0.46 * cos(M_PI * a / fc);
    case RTOMO_WINDOW_HANN: return 0.5 + 0.5 * cos(M_PI * a / fc);
    }
    ck_abort_msg("unknown window %d", (int)w);
    return 0.0;
}

static float *filter_response(int width, rtomo_window w, double cutoff,
                              int *n)
{
    rtomo_fbp_geometry g = test_fbp_geometry(width, 1, 1);
    g.window = w;
    g.cutoff = cutoff;
    rtomo_error err;
    ck_assert(rtomo_fbp_filter_response(&g, NULL, 0, n, &err) == RTOMO_OK);
    float *r = malloc(sizeof(float) * *n);
    ck_assert_msg(rtomo_fbp_filter_response(&g, r, *n, n, &err) == RTOMO_OK,
                  "%s", err.message);
    return r;
}

START_TEST(windows_match_their_closed_forms)
{
    uint64_t rng = 0xf117e1;
    for (int trial = 0; trial < 6; trial++) {
        int width = 16 + (int)(rtomo_random_uniform(&rng) * 300);
        double cutoff = trial == 0 ? 1.0 : 0.3 + 0.7 * rtomo_random_uniform(&rng);
        int n;
        float *ramp = filter_response(width, RTOMO_WINDOW_RAMLAK, cutoff, &n);
        ck_assert_int_ge(n, 2 * width);
        ck_assert_int_eq(n & (n - 1), 0);
        for (int w = RTOMO_WINDOW_SHEPP_LOGAN; w <= RTOMO_WINDOW_HANN; w++) {
            int m;
            float *r = filter_response(width, (rtomo_window)w, cutoff, &m);
            ck_assert_int_eq(m, n);
            for (int k = 0; k < n; k++) {
                double f = bin_frequency(k, n);
                double gain = closed_form_window((rtomo_window)w, f, cutoff);
                ck_assert_msg(fabs(rtomo_window_gain((rtomo_window)w, f,
                                                     cutoff) - gain) < 1e-12,
                              "%s gain at f %g", rtomo_window_name(w), f);
                /* float rounding of both responses: 1e-6 relative */
                ck_assert_msg(fabs(r[k] - gain * ramp[k]) <=
                                  2e-6 * fabs(ramp[k]) + 1e-12,
                              "%s, cutoff %g, width %d, bin %d: %g, expected "
                              "%g", rtomo_window_name(w), cutoff, width, k,
                              r[k], gain * ramp[k]);
            }
            free(r);
        }
        free(ramp);
    }
}
END_TEST

/* The ramp of a finite padded row approximates |f|: exactly so only for an
 * infinite row, but the truncated kernel's tail sum is O(1/n). */
START_TEST(ramlak_approximates_abs_f)
{
    const int widths[] = {16, 100, 256, 1000};
    for (size_t i = 0; i < sizeof widths / sizeof widths[0]; i++) {
        int n;
        float *r = filter_response(widths[i], RTOMO_WINDOW_RAMLAK, 1.0, &n);
        double worst = 0.0;
        for (int k = 1; k < n; k++)
            worst = fmax(worst, fabs(r[k] - fabs(bin_frequency(k, n))));
        printf("  width %d (n %d): DC %.3e, max |H - |f|| %.3e = %.3f/n\n",
               widths[i], n, r[0], worst, worst * n);
        /* measured 0.2024/n (n = 32) to 0.2026/n, at DC and at Nyquist:
         * the tail 2/(pi^2 n) of the truncated kernel.  Away from DC that
         * is a relative error below 0.2/(n |f|), e.g. 0.6 % at f = 1/16 for
         * the smallest n. */
        ck_assert_msg(worst < 0.25 / n, "width %d: |H - |f|| up to %g",
                      widths[i], worst);
        ck_assert_msg(r[0] > 0 && r[0] < 0.25 / n, "width %d: DC %g",
                      widths[i], r[0]);
        free(r);
    }
}
END_TEST

/* ---------------------------------------------------------- filtering ---- */

/* Filter one real row in double precision, by definition: zero-pad to n,
 * DFT, multiply by the response times pi/n_proj, inverse DFT. */
static void filter_directly(const float *row, int width, const float *resp,
                            int n, int n_proj, double *out)
{
    double *re = calloc(n, sizeof(double)), *im = calloc(n, sizeof(double));
    for (int k = 0; k < n; k++) {
        for (int j = 0; j < width; j++) {
            double a = -2 * M_PI * (double)k * j / n;
            re[k] += row[j] * cos(a);
            im[k] += row[j] * sin(a);
        }
        re[k] *= resp[k] * M_PI / n_proj;
        im[k] *= resp[k] * M_PI / n_proj;
    }
    for (int j = 0; j < width; j++) {
        double s = 0.0;
        for (int k = 0; k < n; k++) {
            double a = 2 * M_PI * (double)k * j / n;
            s += re[k] * cos(a) - im[k] * sin(a);
        }
        out[j] = s / n;
    }
    free(re);
    free(im);
}

/* Every row of a frame with an odd number of rows (so one row is paired
 * with zeros) equals the direct filtering, and equals what a one-row plan
 * (always paired with zeros) gives. */
START_TEST(packed_rows_match_direct_filtering)
{
    const int width = 45, height = 5, n_proj = 7, index = 3;
    uint64_t rng = 0xf117e2;
    rtomo_fbp_geometry g = test_fbp_geometry(width, height, n_proj);
    g.window = RTOMO_WINDOW_HAMMING;
    g.cutoff = 0.8;
    rtomo_fbp *plan = test_create_cpu(&g, 2);
    float frame[45 * 5], got[45], single[45];
    test_fill_normal(&rng, frame, width * height);
    rtomo_error err;
    ck_assert(rtomo_fbp_add_projection(plan, index, frame, RTOMO_DTYPE_F32,
                                       NAN, NAN, &err) == RTOMO_OK);
    int n;
    float *resp = filter_response(width, g.window, g.cutoff, &n);
    double direct[45];
    double worst_direct = 0.0, worst_single = 0.0;
    for (int r = 0; r < height; r++) {
        filtered_row(plan, r, index, got);
        filter_directly(frame + r * width, width, resp, n, n_proj, direct);
        float directf[45];
        for (int i = 0; i < width; i++)
            directf[i] = (float)direct[i];
        double scale = test_max_abs(directf, width);
        worst_direct = fmax(worst_direct,
                            test_max_abs_diff(got, directf, width) / scale);

        rtomo_fbp_geometry one = g;
        one.row_first = r;
        one.row_count = 1;
        rtomo_fbp *alone = test_create_cpu(&one, 1);
        ck_assert(rtomo_fbp_add_projection(alone, index, frame,
                                           RTOMO_DTYPE_F32, NAN, NAN,
                                           &err) == RTOMO_OK);
        filtered_row(alone, r, index, single);
        worst_single = fmax(worst_single,
                            test_max_abs_diff(got, single, width) / scale);
        rtomo_fbp_destroy(alone);
    }
    printf("  packed vs direct %.2e, packed vs alone %.2e (of row max)\n",
           worst_direct, worst_single);
    /* float FFTs of 128 points: measured 1.6e-7 and 1.4e-7 */
    ck_assert_msg(worst_direct < 1e-5, "packed vs direct: %.2e", worst_direct);
    ck_assert_msg(worst_single < 1e-5, "packed vs alone: %.2e", worst_single);
    /* projections not fed stay empty */
    filtered_row(plan, 0, index + 1, got);
    ck_assert_double_eq(test_max_abs(got, width), 0.0);
    rtomo_fbp_stats stats;
    rtomo_fbp_get_stats(plan, &stats);
    ck_assert_int_eq(stats.projections_filtered, 1);
    free(resp);
    rtomo_fbp_destroy(plan);
}
END_TEST

/* Two rows in one plan equal two one-row plans; many threads equal one. */
START_TEST(two_rows_equal_two_single_rows)
{
    const int width = 200, n_proj = 16;
    uint64_t rng = 0xf117e3;
    rtomo_fbp_geometry g = test_fbp_geometry(width, 2, n_proj);
    rtomo_fbp *pair = test_create_cpu(&g, 4);
    rtomo_fbp_geometry g0 = g, g1 = g;
    g0.row_count = g1.row_count = 1;
    g1.row_first = 1;
    rtomo_fbp *alone0 = test_create_cpu(&g0, 1);
    rtomo_fbp *alone1 = test_create_cpu(&g1, 1);
    float frame[400], a[200], b[200];
    rtomo_error err;
    for (int p = 0; p < n_proj; p++) {
        test_fill_normal(&rng, frame, 2 * width);
        ck_assert(rtomo_fbp_add_projection(pair, p, frame, RTOMO_DTYPE_F32,
                                           NAN, NAN, &err) == RTOMO_OK);
        ck_assert(rtomo_fbp_add_projection(alone0, p, frame, RTOMO_DTYPE_F32,
                                           NAN, NAN, &err) == RTOMO_OK);
        ck_assert(rtomo_fbp_add_projection(alone1, p, frame, RTOMO_DTYPE_F32,
                                           NAN, NAN, &err) == RTOMO_OK);
    }
    double worst = 0.0;
    for (int p = 0; p < n_proj; p++)
        for (int r = 0; r < 2; r++) {
            filtered_row(pair, r, p, a);
            filtered_row(r ? alone1 : alone0, r, p, b);
            worst = fmax(worst, test_max_abs_diff(a, b, width) /
                                    test_max_abs(b, width));
        }
    printf("  two rows vs one: %.2e of row max\n", worst);
    /* measured 1.9e-7 */
    ck_assert_msg(worst < 1e-5, "packed pair differs by %.2e", worst);
    rtomo_fbp_destroy(pair);
    rtomo_fbp_destroy(alone0);
    rtomo_fbp_destroy(alone1);
}
END_TEST

/* ------------------------------------------------------ normalisation ---- */

/* Detector pixels with their own gain and dark offset: uint16 frames with
 * darks and flats filter to what the float line integrals filter to, up to
 * the counts' quantisation. */
START_TEST(flat_field_removes_gain_and_offset)
{
    enum { W = 64, H = 3, N = W * H, NPROJ = 4 };
    uint64_t rng = 0xf117e4;
    rtomo_fbp_geometry g = test_fbp_geometry(W, H, NPROJ);
    rtomo_fbp *counts_plan = test_create_cpu(&g, 2);
    rtomo_fbp *float_plan = test_create_cpu(&g, 2);
    double gain[N], dark[N];
    uint16_t frame[N];
    float integrals[N];
    rtomo_error err;
    for (int i = 0; i < N; i++) {
        gain[i] = 20000.0 * (0.5 + rtomo_random_uniform(&rng));
        dark[i] = 80.0 + 40.0 * rtomo_random_uniform(&rng);
    }
    /* Two dark and two flat frames that differ by a count: the engine must
     * average them (the averages are dark and dark + gain exactly). */
    for (int f = 0; f < 2; f++) {
        for (int i = 0; i < N; i++)
            frame[i] = (uint16_t)(dark[i] + (f ? 0.5 : -0.5) + 0.5);
        ck_assert(rtomo_fbp_add_dark(counts_plan, frame, RTOMO_DTYPE_U16,
                                     &err) == RTOMO_OK);
        for (int i = 0; i < N; i++)
            frame[i] = (uint16_t)(dark[i] + gain[i] + (f ? 0.5 : -0.5) + 0.5);
        ck_assert(rtomo_fbp_add_flat(counts_plan, frame, RTOMO_DTYPE_U16,
                                     &err) == RTOMO_OK);
    }
    /* What the averages really are, after rounding each frame. */
    for (int i = 0; i < N; i++) {
        double d = (floor(dark[i]) + floor(dark[i] + 1.0)) / 2;
        double fl = (floor(dark[i] + gain[i]) + floor(dark[i] + gain[i] + 1.0)) / 2;
        dark[i] = d;
        gain[i] = fl - d;
    }
    double worst = 0.0, scale = 0.0;
    for (int p = 0; p < NPROJ; p++) {
        for (int i = 0; i < N; i++) {
            double integral = 2.0 * rtomo_random_uniform(&rng);
            double counts = floor(dark[i] + gain[i] * exp(-integral) + 0.5);
            frame[i] = (uint16_t)counts;
            integrals[i] = (float)-log((counts - dark[i]) / gain[i]);
        }
        ck_assert(rtomo_fbp_add_projection(counts_plan, p, frame,
                                           RTOMO_DTYPE_U16, NAN, NAN,
                                           &err) == RTOMO_OK);
        ck_assert(rtomo_fbp_add_projection(float_plan, p, integrals,
                                           RTOMO_DTYPE_F32, NAN, NAN,
                                           &err) == RTOMO_OK);
        for (int r = 0; r < H; r++) {
            float a[W], b[W];
            filtered_row(counts_plan, r, p, a);
            filtered_row(float_plan, r, p, b);
            worst = fmax(worst, test_max_abs_diff(a, b, W));
            scale = fmax(scale, test_max_abs(b, W));
        }
    }
    printf("  counts vs line integrals: %.2e of max\n", worst / scale);
    /* The float plan gets -log of the very same ratio, so only float vs
     * double rounding of the log remains: measured 2.4e-7. */
    ck_assert_msg(worst < 1e-5 * scale, "normalised counts differ by %.2e",
                  worst / scale);
    rtomo_fbp_destroy(counts_plan);
    rtomo_fbp_destroy(float_plan);
}
END_TEST

/* Samples at or below the dark level, dead pixels (flat <= dark) and
 * absurd float samples all give finite line integrals: transmissions are
 * clamped to [1e-6, FLT_MAX]. */
START_TEST(impossible_samples_are_clamped)
{
    enum { W = 8, N = W };
    rtomo_fbp_geometry g = test_fbp_geometry(W, 1, 2);
    rtomo_fbp *plan = test_create_cpu(&g, 1);
    rtomo_fbp *expect_plan = test_create_cpu(&g, 1);
    const float dark[N] = {100, 100, 100, 100, 100, 0, 100, -3e38f};
    const float flat[N] = {1100, 1100, 100, 50, 1100, 1e-30f, 1100, 3e38f};
    const float raw[N] = {100, 20, 500, 500, 600, 1e30f, 1100, 0};
    rtomo_error err;
    ck_assert(rtomo_fbp_add_dark(plan, dark, RTOMO_DTYPE_F32, &err) == 0);
    ck_assert(rtomo_fbp_add_flat(plan, flat, RTOMO_DTYPE_F32, &err) == 0);
    ck_assert(rtomo_fbp_add_projection(plan, 0, raw, RTOMO_DTYPE_F32, NAN,
                                       NAN, &err) == RTOMO_OK);
    const float floor_p = (float)-log(1e-6);
    const float expect[N] = {
        floor_p,                    /* raw == dark */
        floor_p,                    /* raw below dark */
        floor_p,                    /* flat == dark: dead pixel */
        floor_p,                    /* flat below dark */
        (float)-log(0.5),           /* an ordinary sample */
        -logf(FLT_MAX),             /* ratio 1e60 overflows to inf */
        0.0f,                       /* open beam */
        floor_p,                    /* flat - dark overflows: ratio 0 */
    };
    ck_assert(rtomo_fbp_add_projection(expect_plan, 0, expect,
                                       RTOMO_DTYPE_F32, NAN, NAN, &err) == 0);
    float a[W], b[W];
    filtered_row(plan, 0, 0, a);
    filtered_row(expect_plan, 0, 0, b);
    for (int i = 0; i < W; i++)
        ck_assert_msg(isfinite(a[i]), "bin %d is %g", i, a[i]);
    double d = test_max_abs_diff(a, b, W);
    printf("  clamped samples vs expected line integrals: %.2e of max\n",
           d / test_max_abs(b, W));
    /* the same float line integrals reach the filter: measured 0 */
    ck_assert_msg(d <= 1e-5 * test_max_abs(b, W), "clamped values differ by %g",
                  d);
    int row = 0;
    float slice[W * W];
    ck_assert(rtomo_fbp_reconstruct(plan, &row, 1, slice, &err) == RTOMO_OK);
    for (int i = 0; i < W * W; i++)
        ck_assert_msg(isfinite(slice[i]), "pixel %d is %g", i, slice[i]);
    rtomo_fbp_destroy(plan);
    rtomo_fbp_destroy(expect_plan);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("fbp_filter");
    TCase *tc = tcase_create("filter");
    tcase_add_test(tc, windows_match_their_closed_forms);
    tcase_add_test(tc, ramlak_approximates_abs_f);
    tcase_add_test(tc, packed_rows_match_direct_filtering);
    tcase_add_test(tc, two_rows_equal_two_single_rows);
    tcase_add_test(tc, flat_field_removes_gain_and_offset);
    tcase_add_test(tc, impossible_samples_are_clamped);
    suite_add_tcase(s, tc);
    return rtomo_check_run(s);
}
