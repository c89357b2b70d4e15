/*
 * test_phantom.c — the simulators the FBP tests rely on as ground truth:
 * the analytic Shepp-Logan projections agree with sums over the phantom's
 * own slice along the same lines (so projections and slice share one
 * geometry: axis, orientation, scale), the camera model's counts and noise,
 * and the region masks and masked statistics.
 */
#include "config.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "rtomo_sim.h"
#include "check_run.h"

#define WIDTH 512           /* fine grid: pixel-sum errors stay small */
#define HEIGHT 4
#define ROW 2               /* z = -0.25: every feature is cut */

/* ||a - b|| / ||b|| over n values. */
static double relative_l2(const double *a, const double *b, int n)
{
    double d = 0.0, s = 0.0;
    for (int i = 0; i < n; i++) {
        d += (a[i] - b[i]) * (a[i] - b[i]);
        s += b[i] * b[i];
    }
    return sqrt(d / s);
}

/* The line integral of detector bin `bin` at angle `angle` for a phantom
 * whose axis is at `axis`. */
static double projection_at(double axis, double angle, int bin)
{
    rtomo_phantom ph;
    rtomo_phantom_init(&ph, WIDTH, HEIGHT);
    ph.axis = axis;
    float row[WIDTH];
    rtomo_phantom_project_row(&ph, ROW, angle, row);
    return row[bin];
}

/* Angle 0 integrates columns; pi/2 integrates rows, bin s seeing row
 * c - (s - axis) (the slice's y axis points down, the phantom's up). */
START_TEST(projections_are_column_and_row_sums)
{
    rtomo_phantom ph;
    rtomo_phantom_init(&ph, WIDTH, HEIGHT);
    float *slice = malloc(sizeof(float) * WIDTH * WIDTH);
    float proj0[WIDTH], proj90[WIDTH], half[WIDTH];
    rtomo_phantom_slice(&ph, ROW, WIDTH, slice);
    rtomo_phantom_project_row(&ph, ROW, 0.0, proj0);
    rtomo_phantom_project_row(&ph, ROW, M_PI / 2, proj90);
    rtomo_phantom moved = ph;
    moved.axis = 0.5 * (WIDTH - 1) + 0.5;
    rtomo_phantom_project_row(&moved, ROW, 0.0, half);
    double cols[WIDTH], rows[WIDTH], p0[WIDTH], p90[WIDTH], ph0[WIDTH];
    for (int s = 0; s < WIDTH; s++) {
        cols[s] = rows[s] = 0.0;
        for (int k = 0; k < WIDTH; k++) {
            cols[s] += slice[k * WIDTH + s];
            rows[s] += slice[(WIDTH - 1 - s) * WIDTH + k];
        }
        p0[s] = proj0[s];
        p90[s] = proj90[s];
        ph0[s] = half[s];
    }
    double e0 = relative_l2(cols, p0, WIDTH);
    double e90 = relative_l2(rows, p90, WIDTH);
    double shifted = relative_l2(cols, ph0, WIDTH);
    printf("  column sums %.2e, row sums %.2e, half a bin off %.2e\n", e0,
           e90, shifted);
    /* measured 8.1e-3 and 1.1e-2: pixel sums cut every edge to whole
     * pixels (the skull is only 7-12 px thick).  Half a bin off, the column
     * sums agree to only 2.8e-2 (a quarter bin: 2.0e-2), so the bound pins
     * the axis to better than half a bin. */
    ck_assert_msg(e0 < 1.6e-2, "angle 0 vs column sums: %.2e", e0);
    ck_assert_msg(e90 < 1.6e-2, "angle pi/2 vs row sums: %.2e", e90);
    ck_assert_msg(shifted > 2e-2, "half a bin off agrees too well: %.2e",
                  shifted);
    free(slice);
}
END_TEST

/* At 45 degrees the lines are the slice's diagonals x - y = k.  This is the
 * angle that tells the sense of rotation (and the tilt of the ventricles)
 * apart: 0 and 90 degrees cannot. */
START_TEST(projections_follow_the_rotation_sense)
{
    rtomo_phantom ph;
    rtomo_phantom_init(&ph, WIDTH, HEIGHT);
    float *slice = malloc(sizeof(float) * WIDTH * WIDTH);
    rtomo_phantom_slice(&ph, ROW, WIDTH, slice);
    const int n = 2 * WIDTH - 1, bin = WIDTH / 2;
    double *sums = calloc(n, sizeof(double)), *proj = calloc(n, sizeof(double));
    double *mirrored = calloc(n, sizeof(double));
    for (int k = -(WIDTH - 1); k < WIDTH; k++) {
        int i = k + WIDTH - 1;
        for (int y = 0; y < WIDTH; y++) {
            int x = y + k;
            if (x >= 0 && x < WIDTH)
                sums[i] += M_SQRT2 * slice[y * WIDTH + x];
        }
        /* x - y = k is s - axis = k / sqrt(2) at angle pi/4 */
        proj[i] = projection_at(bin - k / M_SQRT2, M_PI / 4, bin);
        mirrored[i] = projection_at(bin - k / M_SQRT2, -M_PI / 4, bin);
    }
    double e = relative_l2(sums, proj, n);
    double wrong = relative_l2(sums, mirrored, n);
    printf("  diagonal sums %.2e, with the opposite sense %.2e\n", e, wrong);
    /* measured 9.5e-3 (whole-pixel edges, as for columns); the opposite
     * sense gives 0.186 */
    ck_assert_msg(e < 1.6e-2, "angle pi/4 vs diagonal sums: %.2e", e);
    ck_assert_msg(wrong > 0.05, "the sense of rotation is not tested "
                  "(%.2e)", wrong);
    free(sums);
    free(proj);
    free(mirrored);
    free(slice);
}
END_TEST

/* Projections at a and a + pi are mirror images about the axis. */
START_TEST(opposite_projections_mirror)
{
    uint64_t rng = 0x9a4701;
    rtomo_phantom ph;
    rtomo_phantom_init(&ph, 128, HEIGHT);
    for (int trial = 0; trial < 20; trial++) {
        double a = 2 * M_PI * rtomo_random_uniform(&rng);
        float p[128], q[128];
        rtomo_phantom_project_row(&ph, ROW, a, p);
        rtomo_phantom_project_row(&ph, ROW, a + M_PI, q);
        for (int s = 0; s < 128; s++)
            /* the centred axis maps bin s to 127 - s; float rounding only */
            ck_assert_msg(fabs(p[s] - q[127 - s]) <= 1e-6,
                          "angle %g bin %d: %g vs %g", a, s, p[s], q[127 - s]);
    }
}
END_TEST

START_TEST(attenuation_scale)
{
    /* A line through the centre at angle 0 crosses the skull twice and the
     * brain: Kak & Slaney's ellipsoids at z = -0.25, in phantom units times
     * mu_scale (default 2/width) times width/2 pixels per unit. */
    rtomo_phantom ph;
    rtomo_phantom_init(&ph, 256, HEIGHT);
    ph.axis = 100.0;        /* the phantom follows its axis */
    float p[256];
    rtomo_phantom_project_row(&ph, ROW, 0.0, p);
    double k1 = sqrt(1 - 0.25 * 0.25 / (0.9 * 0.9));
    double k2 = sqrt(1 - 0.25 * 0.25 / (0.88 * 0.88));
    double ke = sqrt(1 - 0.0);          /* large ellipse centred at -0.25 */
    double kf = 1.0;                    /* small sphere centred at -0.25 */
    /* vertical chords through x = 0: outer, inner, large ellipse (y from
     * 0.35 - 0.25 to 0.35 + 0.25), sphere f (radius 0.046) */
    double expect = 2 * 0.92 * k1 * 1.0 - 2 * 0.874 * k2 * 0.8 +
                    2 * 0.25 * ke * 0.1 + 2 * 0.046 * kf * 0.1;
    /* bin 100 is the axis: x = 0 exactly */
    ck_assert_msg(fabs(p[100] - expect) < 1e-6, "central line integral %g, "
                  "expected %g", p[100], expect);
    ph.mu_scale = 0.5;
    rtomo_phantom_project_row(&ph, ROW, 0.0, p);
    ck_assert_msg(fabs(p[100] - expect * 0.5 * 128) < 1e-4,
                  "mu_scale 0.5: %g, expected %g", p[100], expect * 64);
}
END_TEST

/* ------------------------------------------------------------- camera ---- */

START_TEST(camera_counts_without_noise)
{
    uint64_t rng = 0xca3e01;
    rtomo_camera cam;
    rtomo_camera_init(&cam);
    cam.dark_level = 123.0;
    cam.flat_level = 45678.0;
    float p[1000];
    uint16_t counts[1000];
    for (int i = 0; i < 1000; i++)
        p[i] = (float)(3.0 * rtomo_random_uniform(&rng));
    p[0] = -20.0f;          /* brighter than the flat: saturates */
    p[1] = 1e6f;            /* opaque: the dark level */
    rtomo_camera_expose(&cam, p, 1000, counts);
    ck_assert_int_eq(counts[0], 65535);
    ck_assert_int_eq(counts[1], 123);
    for (int i = 2; i < 1000; i++) {
        double expect = floor(123.0 + (45678.0 - 123.0) * exp(-(double)p[i]) + 0.5);
        ck_assert_msg(fabs(counts[i] - expect) <= 1.0, "p %g: %d counts, "
                      "expected %g", p[i], counts[i], expect);
    }
    rtomo_camera_dark(&cam, 10, counts);
    for (int i = 0; i < 10; i++)
        ck_assert_int_eq(counts[i], 123);
    rtomo_camera_flat(&cam, 10, counts);
    for (int i = 0; i < 10; i++)
        ck_assert_int_eq(counts[i], 45678);
}
END_TEST

START_TEST(camera_noise_is_shot_noise)
{
    enum { N = 40000 };
    rtomo_camera cam;
    rtomo_camera_init(&cam);
    cam.noise = 1;
    cam.seed = 0xca3e02;
    static float p[N];
    static uint16_t counts[N];
    for (int i = 0; i < N; i++)
        p[i] = 1.0f;
    rtomo_camera_expose(&cam, p, N, counts);
    const double mean = cam.dark_level + (cam.flat_level - cam.dark_level) *
                        exp(-1.0);
    double sum = 0.0, sq = 0.0;
    for (int i = 0; i < N; i++) {
        sum += counts[i];
        sq += ((double)counts[i] - mean) * ((double)counts[i] - mean);
    }
    double m = sum / N, var = sq / N;
    /* the sample mean is off by sqrt(mean/N) = 0.6 counts rms; the sample
     * variance by sqrt(2/N) = 0.7 % rms: bounds at about 5 sigma */
    ck_assert_msg(fabs(m - mean) < 3.0, "mean %g, expected %g", m, mean);
    ck_assert_msg(fabs(var / mean - 1.0) < 0.035, "variance %g, expected %g",
                  var, mean);
    /* the stream advances: a second exposure differs */
    uint16_t again[16];
    rtomo_camera_expose(&cam, p, 16, again);
    int same = 0;
    for (int i = 0; i < 16; i++)
        same += again[i] == counts[i];
    ck_assert_int_lt(same, 16);
}
END_TEST

/* ------------------------------------------------------------ regions ---- */

START_TEST(region_masks)
{
    const int size = 256;
    rtomo_phantom ph;
    rtomo_phantom_init(&ph, size, HEIGHT);
    unsigned char *full = malloc(size * size), *eroded = malloc(size * size);
    size_t n0 = rtomo_phantom_region_mask(&ph, ROW, size, RTOMO_PHANTOM_HEAD,
                                          0.0, full);
    size_t n2 = rtomo_phantom_region_mask(&ph, ROW, size, RTOMO_PHANTOM_HEAD,
                                          2.0, eroded);
    /* area of the outer ellipse at z = -0.25, in pixels */
    double k = sqrt(1 - 0.25 * 0.25 / 0.81), r = size / 2.0;
    double area = M_PI * 0.69 * k * r * 0.92 * k * r;
    ck_assert_msg(fabs(n0 - area) < 0.01 * area, "head %zu px, ellipse area "
                  "%g", n0, area);
    ck_assert(n2 < n0);
    for (int i = 0; i < size * size; i++)
        ck_assert(!eroded[i] || full[i]);
    /* the eroded band is about 2 px wide along the perimeter */
    double a = 0.69 * k * r, b = 0.92 * k * r;
    double perimeter = M_PI * (3 * (a + b) - sqrt((3 * a + b) * (a + 3 * b)));
    double band = (double)(n0 - n2) / perimeter;
    ck_assert_msg(band > 1.5 && band < 2.5, "band %.2f px wide", band);
    /* of 40 rows, row 0 (z = 0.975) is above the head (|z| < 0.9) */
    rtomo_phantom tall;
    rtomo_phantom_init(&tall, size, 40);
    ck_assert_uint_eq(rtomo_phantom_region_mask(&tall, 0, size,
                                                RTOMO_PHANTOM_HEAD, 0.0, full),
                      0);
    for (int i = 0; i < size * size; i++)
        ck_assert(!full[i]);
    ck_assert_uint_gt(rtomo_phantom_region_mask(&tall, 3, size,
                                                RTOMO_PHANTOM_HEAD, 0.0, full),
                      0);
    free(full);
    free(eroded);
}
END_TEST

START_TEST(masked_statistics)
{
    uint64_t rng = 0x3a5c01;
    float a[100], t[100];
    unsigned char m[100];
    double d = 0.0, s = 0.0, sum = 0.0;
    int count = 0;
    for (int i = 0; i < 100; i++) {
        a[i] = (float)rtomo_random_normal(&rng);
        t[i] = (float)rtomo_random_normal(&rng);
        m[i] = rtomo_random_uniform(&rng) < 0.5;
        if (m[i]) {
            d += ((double)a[i] - t[i]) * ((double)a[i] - t[i]);
            s += (double)t[i] * t[i];
            sum += a[i];
            count++;
        }
    }
    ck_assert_double_eq_tol(rtomo_masked_relative_error(a, t, m, 100),
                            sqrt(d / s), 1e-12);
    ck_assert_double_eq_tol(rtomo_masked_mean(a, m, 100), sum / count, 1e-12);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("phantom");
    TCase *tc = tcase_create("phantom");
    tcase_add_test(tc, projections_are_column_and_row_sums);
    tcase_add_test(tc, projections_follow_the_rotation_sense);
    tcase_add_test(tc, opposite_projections_mirror);
    tcase_add_test(tc, attenuation_scale);
    tcase_add_test(tc, camera_counts_without_noise);
    tcase_add_test(tc, camera_noise_is_shot_noise);
    tcase_add_test(tc, region_masks);
    tcase_add_test(tc, masked_statistics);
    suite_add_tcase(s, tc);
    return rtomo_check_run(s);
}
