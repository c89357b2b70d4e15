/*
 * test_sbdx_recon.c — CPU SBDX reconstruction on fresh random frames: the
 * pixel-centric gather and the detector-centric scatter agree to float32
 * rounding for every sample type and for n < 1, n = 1 and n > 1; both match
 * a direct double-precision evaluation of the equations of rtomo_engine.h;
 * output windows, thread counts and sample types do not change the result;
 * a uniform frame reconstructs to its value: on average over the field of
 * view as raw planes (the m^2/(Wd*Hd) scale), at every pixel of it as
 * flat-fielded ones, which are 0 outside it.  Raw (flat_field = 0) and
 * flat-fielded (1) planes are checked alike.
 */
#include "config.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rtomo_sim.h"
#include "test_sbdx_support.h"
#include "check_run.h"

/* Both methods add the same float32 products in the same order, so they
 * should agree exactly; the bound allows a compiler's reassociation. */
#define METHODS_REL_TOL 1e-5
/* A sum of a few hundred float32 terms against the same sum in double. */
#define EQUATIONS_REL_TOL 1e-5

static const rtomo_dtype dtypes[3] = {RTOMO_DTYPE_U8, RTOMO_DTYPE_U16,
                                      RTOMO_DTYPE_F32};

static void check_methods_agree(const rtomo_sbdx_geometry *g, rtomo_dtype dt,
                                uint64_t seed, const char *label)
{
    void *frame = sbdx_random_frame(g, dt, &seed);
    float *pc = sbdx_reconstruct(g, RTOMO_SBDX_PIXEL_CENTRIC, 2, frame, dt);
    float *dc = sbdx_reconstruct(g, RTOMO_SBDX_DETECTOR_CENTRIC, 2, frame, dt);
    double rel = sbdx_max_relative_error(pc, dc, g);
    printf("%s %s: pixel- vs detector-centric max relative error %.3g "
           "(bound %g)\n", label, rtomo_dtype_name(dt), rel, METHODS_REL_TOL);
    ck_assert_double_le(rel, METHODS_REL_TOL);
    /* A reconstruction of random data is not trivially zero. */
    double peak = 0.0;
    for (size_t i = 0; i < sbdx_planes_pixels(g); i++)
        peak = fmax(peak, fabs(dc[i]));
    ck_assert_double_gt(peak, 1.0);
    free(frame);
    free(pc);
    free(dc);
}

static const char *const mode_names[2] = {"raw", "flat-fielded"};

/* _i = 3 flat_field + dtype. */
START_TEST(methods_agree_small)
{
    rtomo_sbdx_geometry g;
    sbdx_small_geometry(&g);
    g.flat_field = _i / 3;
    char label[32];
    snprintf(label, sizeof label, "small %s", mode_names[g.flat_field]);
    check_methods_agree(&g, dtypes[_i % 3], 0x1234u + (uint64_t)_i, label);
}
END_TEST

START_TEST(methods_agree_mid_size)
{
    rtomo_sbdx_geometry g;
    sbdx_mid_geometry(&g);
    g.flat_field = _i;
    char label[32];
    snprintf(label, sizeof label, "mid-size %s", mode_names[g.flat_field]);
    check_methods_agree(&g, RTOMO_DTYPE_U8, 0xabcdu + (uint64_t)_i, label);
}
END_TEST

/* Bilinear deposit of value v at plane position (x, y) into a double
 * image whose pixel (0, 0) is position (ox, oy); outside pixels dropped. */
static void deposit_bilinear(double *img, int w, int h, int ox, int oy,
                             double x, double y, double v)
{
    double ix = floor(x), iy = floor(y);
    double fx = x - ix, fy = y - iy;
    for (int b = 0; b < 2; b++)
        for (int a = 0; a < 2; a++) {
            long px = (long)ix + a - ox, py = (long)iy + b - oy;
            if (px >= 0 && px < w && py >= 0 && py < h)
                img[py * w + px] += v * (a ? fx : 1.0 - fx) *
                                    (b ? fy : 1.0 - fy);
        }
}

/* The raw planes straight from the equations of rtomo_engine.h, in
 * double, without any table. */
static double *planes_from_equations(const rtomo_sbdx_geometry *g,
                                     const float *frame)
{
    int w = g->out_width, h = g->out_height;
    double scale = (double)g->shift_m * g->shift_m /
                   ((double)g->det_width * g->det_height);
    double *planes = malloc(sizeof(double) * (size_t)w * h * g->n_planes);
    ck_assert_ptr_nonnull(planes);
    double ex = (g->det_width - 1) / 2.0, ey = (g->det_height - 1) / 2.0;
    for (int k = 0; k < g->n_planes; k++) {
        double n = g->ratios[k];
        double *img = planes + (size_t)k * w * h;
        memset(img, 0, sizeof(double) * (size_t)w * h);
        const float *v = frame;
        for (int cy = 0; cy < g->holes_y; cy++)
            for (int cx = 0; cx < g->holes_x; cx++)
                for (int dy = 0; dy < g->det_height; dy++)
                    for (int dx = 0; dx < g->det_width; dx++)
                        deposit_bilinear(img, w, h, g->origin_x, g->origin_y,
                                         g->shift_m * cx + n * (dx - ex),
                                         g->shift_m * cy + n * (dy - ey),
                                         *v++);
        for (size_t i = 0; i < (size_t)w * h; i++)
            img[i] *= scale;
    }
    return planes;
}

/* The planes of g (raw or flat-fielded) from the equations: flat-fielded
 * ones divide by the equations' own reconstruction of a frame of ones. */
static float *reference_planes(const rtomo_sbdx_geometry *g,
                               const float *frame)
{
    size_t n = sbdx_planes_pixels(g);
    double *ref = planes_from_equations(g, frame);
    if (g->flat_field) {
        float *ones = malloc(sizeof(float) * sbdx_frame_samples(g));
        ck_assert_ptr_nonnull(ones);
        for (size_t i = 0; i < sbdx_frame_samples(g); i++)
            ones[i] = 1.0f;
        double *response = planes_from_equations(g, ones);
        sbdx_flat_field_reference(g, ref, response);
        free(response);
        free(ones);
    }
    float *planes = malloc(sizeof(float) * n);
    ck_assert_ptr_nonnull(planes);
    for (size_t i = 0; i < n; i++)
        planes[i] = (float)ref[i];
    free(ref);
    return planes;
}

START_TEST(both_methods_follow_the_equations)
{
    rtomo_sbdx_geometry g;
    sbdx_small_geometry(&g);
    g.origin_x = -5;    /* a window partly outside the holes' reach */
    g.origin_y = 7;
    g.out_width = 40;
    g.out_height = 33;
    g.flat_field = _i;
    uint64_t seed = 0x77aa55u;
    float *frame = sbdx_random_frame(&g, RTOMO_DTYPE_F32, &seed);
    float *ref = reference_planes(&g, frame);
    for (int m = 0; m < 2; m++) {
        float *got = sbdx_reconstruct(&g, (rtomo_sbdx_method)m, 1, frame,
                                      RTOMO_DTYPE_F32);
        double rel = sbdx_max_relative_error(got, ref, &g);
        printf("%s %s vs the equations in double: max relative error %.3g "
               "(bound %g)\n", m ? "detector-centric" : "pixel-centric",
               mode_names[g.flat_field], rel, EQUATIONS_REL_TOL);
        ck_assert_double_le(rel, EQUATIONS_REL_TOL);
        free(got);
    }
    free(frame);
    free(ref);
}
END_TEST

/* Any output window is the matching block of a window that holds all of
 * it: origins shift the planes, and deposits outside are dropped without
 * disturbing the rest (bit-identical, as the sums run in the same order,
 * and so do the responses that flat-fielding divides by).
 * _i = 2 flat_field + method. */
START_TEST(output_windows_are_blocks_of_the_whole_plane)
{
    rtomo_sbdx_geometry big;
    sbdx_small_geometry(&big);
    big.origin_x = -25;
    big.origin_y = -15;
    big.out_width = 100;
    big.out_height = 70;
    big.flat_field = _i / 2;
    uint64_t seed = 0xfeedu + (uint64_t)_i;
    rtomo_sbdx_method method = (rtomo_sbdx_method)(_i % 2);
    void *frame = sbdx_random_frame(&big, RTOMO_DTYPE_U8, &seed);
    float *full = sbdx_reconstruct(&big, method, 2, frame, RTOMO_DTYPE_U8);
    for (int trial = 0; trial < 6; trial++) {
        rtomo_sbdx_geometry g = big;
        g.out_width = 1 + (int)(rtomo_random_uniform(&seed) * 60);
        g.out_height = 1 + (int)(rtomo_random_uniform(&seed) * 50);
        g.origin_x = big.origin_x +
                     (int)(rtomo_random_uniform(&seed) * (101 - g.out_width));
        g.origin_y = big.origin_y +
                     (int)(rtomo_random_uniform(&seed) * (71 - g.out_height));
        float *win = sbdx_reconstruct(&g, method, 3, frame, RTOMO_DTYPE_U8);
        int dx = g.origin_x - big.origin_x, dy = g.origin_y - big.origin_y;
        for (int k = 0; k < g.n_planes; k++)
            for (int j = 0; j < g.out_height; j++)
                for (int i = 0; i < g.out_width; i++) {
                    float a = win[((size_t)k * g.out_height + j) * g.out_width +
                                  i];
                    float b = full[((size_t)k * big.out_height + j + dy) *
                                       big.out_width + i + dx];
                    SBDX_REQUIRE(a == b, "window %dx%d at (%d, %d), plane %d "
                                 "pixel (%d, %d): %g, whole plane %g",
                                 g.out_width, g.out_height, g.origin_x,
                                 g.origin_y, k, i, j, (double)a, (double)b);
                }
        free(win);
    }
    free(frame);
    free(full);
}
END_TEST

START_TEST(thread_count_does_not_change_the_result)
{
    rtomo_sbdx_geometry g;
    sbdx_small_geometry(&g);
    uint64_t seed = 0x51u + (uint64_t)_i;
    rtomo_sbdx_method method = (rtomo_sbdx_method)_i;
    void *frame = sbdx_random_frame(&g, RTOMO_DTYPE_U16, &seed);
    float *one = sbdx_reconstruct(&g, method, 1, frame, RTOMO_DTYPE_U16);
    float *many = sbdx_reconstruct(&g, method, 7, frame, RTOMO_DTYPE_U16);
    ck_assert(memcmp(one, many, sizeof(float) * sbdx_planes_pixels(&g)) == 0);
    free(frame);
    free(one);
    free(many);
}
END_TEST

/* The same values as uint8, uint16 and float32 give the same planes. */
START_TEST(sample_types_are_equivalent)
{
    rtomo_sbdx_geometry g;
    sbdx_small_geometry(&g);
    uint64_t seed = 0xd7u;
    size_t n = sbdx_frame_samples(&g);
    uint8_t *u8 = sbdx_random_frame(&g, RTOMO_DTYPE_U8, &seed);
    uint16_t *u16 = malloc(n * sizeof *u16);
    float *f32 = malloc(n * sizeof *f32);
    ck_assert(u16 && f32);
    for (size_t i = 0; i < n; i++) {
        u16[i] = u8[i];
        f32[i] = u8[i];
    }
    float *a = sbdx_reconstruct(&g, RTOMO_SBDX_PIXEL_CENTRIC, 2, u8,
                                RTOMO_DTYPE_U8);
    float *b = sbdx_reconstruct(&g, RTOMO_SBDX_PIXEL_CENTRIC, 2, u16,
                                RTOMO_DTYPE_U16);
    float *c = sbdx_reconstruct(&g, RTOMO_SBDX_PIXEL_CENTRIC, 2, f32,
                                RTOMO_DTYPE_F32);
    size_t bytes = sizeof(float) * sbdx_planes_pixels(&g);
    ck_assert(memcmp(a, b, bytes) == 0);
    ck_assert(memcmp(a, c, bytes) == 0);
    free(u8);
    free(u16);
    free(f32);
    free(a);
    free(b);
    free(c);
}
END_TEST

/* Inside the field of view (every hole whose footprint could reach the
 * pixel exists) the sample positions repeat with period m, one hole apart,
 * and each period holds Wd (Hd) samples whose bilinear weights sum to 1.  So
 * over any block of whole periods a uniform frame of value v reconstructs
 * to a mean of exactly v once scaled by m^2/(Wd*Hd), whatever n is.  Single
 * pixels of raw planes ripple around v (by up to 4x where n aliases with
 * the detector pitch, e.g. n = 2 leaves every other pixel empty): that is
 * the method, not an error, so for raw planes only the block mean is
 * asserted.  Flat-fielding removes the ripple: every pixel of the field of
 * view (response at or above the floor) is v (float sums of a few hundred
 * terms), every other pixel 0.  The whole-period block lies inside but for
 * the pixels that no ray reaches at all: three in four at n = 2 in the
 * mid-size geometry (even m and Wd, Hd: rays land on odd offsets only),
 * none at the other ratios. */
#define UNIFORM_MEAN_TOL 1e-5
#define UNIFORM_PIXEL_TOL 1e-5

/* First and one-past-last position of a whole number of periods m inside
 * the field of view of a plane of ratio n along one axis. */
static void field_of_view(int n_holes, int n_det, int m, double n, int *lo,
                          int *end)
{
    *lo = (int)ceil(n * (n_det - 1) / 2.0) + 1;
    int hi = m * (n_holes - 1) - *lo;  /* last inside */
    *end = *lo + (hi - *lo + 1) / m * m;
}

static void check_uniform(const rtomo_sbdx_geometry *g,
                          rtomo_sbdx_method method, double value)
{
    size_t n = sbdx_frame_samples(g);
    uint16_t *frame = malloc(n * sizeof *frame);
    ck_assert_ptr_nonnull(frame);
    for (size_t i = 0; i < n; i++)
        frame[i] = (uint16_t)value;
    float *planes = sbdx_reconstruct(g, method, 2, frame, RTOMO_DTYPE_U16);
    int w = g->shift_m * g->holes_x, h = g->shift_m * g->holes_y;
    for (int k = 0; k < g->n_planes; k++) {
        int x0, x1, y0, y1;
        field_of_view(g->holes_x, g->det_width, g->shift_m, g->ratios[k], &x0,
                      &x1);
        field_of_view(g->holes_y, g->det_height, g->shift_m, g->ratios[k], &y0,
                      &y1);
        ck_assert_msg(x0 < x1 && y0 < y1, "plane %d has no whole period "
                      "inside its field of view in this geometry", k);
        double sum = 0.0, ripple = 0.0;
        long zeros = 0, pixels = (long)(x1 - x0) * (y1 - y0);
        for (int y = y0; y < y1; y++)
            for (int x = x0; x < x1; x++) {
                double v = planes[((size_t)k * h + y) * w + x];
                sum += v;
                /* Flat-fielded zeros are pixels no ray reaches (checked
                 * below): not ripple. */
                if (g->flat_field && v == 0.0)
                    zeros++;
                else
                    ripple = fmax(ripple, fabs(v / value - 1.0));
            }
        double mean = sum / (double)pixels / value - 1.0;
        printf("uniform %g, %s %s, n = %g, %dx%d block: mean %+.2g, largest "
               "pixel ripple %.3g (relative), %ld pixels 0\n", value,
               method ? "detector" : "pixel", mode_names[g->flat_field],
               g->ratios[k], x1 - x0, y1 - y0, mean, ripple, zeros);
        if (g->flat_field) {
            ck_assert_double_le(ripple, UNIFORM_PIXEL_TOL);
            ck_assert_int_le(zeros, pixels * 3 / 4);
        } else {
            ck_assert_double_le(fabs(mean), UNIFORM_MEAN_TOL);
        }
    }
    if (g->flat_field) {
        size_t inside = sbdx_require_flat_uniform(g, planes, value,
                                                  UNIFORM_PIXEL_TOL);
        printf("uniform %g, %s flat-fielded: %zu of %zu pixels in the field "
               "of view, all within %g; the rest 0\n", value,
               method ? "detector" : "pixel", inside, sbdx_planes_pixels(g),
               UNIFORM_PIXEL_TOL);
    }
    free(frame);
    free(planes);
}

/* _i = 2 flat_field + method. */
START_TEST(uniform_frames_reconstruct_to_their_value)
{
    rtomo_sbdx_geometry g;
    rtomo_sbdx_method method = (rtomo_sbdx_method)(_i % 2);
    uint64_t seed = 0x99u + (uint64_t)_i;
    sbdx_small_geometry(&g);
    g.flat_field = _i / 2;
    check_uniform(&g, method,
                  1.0 + floor(rtomo_random_uniform(&seed) * 60000.0));
    sbdx_mid_geometry(&g);
    g.flat_field = _i / 2;
    check_uniform(&g, method,
                  1.0 + floor(rtomo_random_uniform(&seed) * 60000.0));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("sbdx_recon");
    TCase *tc = tcase_create("recon");
    tcase_add_loop_test(tc, methods_agree_small, 0, 6);
    tcase_add_loop_test(tc, methods_agree_mid_size, 0, 2);
    tcase_add_loop_test(tc, both_methods_follow_the_equations, 0, 2);
    tcase_add_loop_test(tc, output_windows_are_blocks_of_the_whole_plane, 0, 4);
    tcase_add_loop_test(tc, thread_count_does_not_change_the_result, 0, 2);
    tcase_add_test(tc, sample_types_are_equivalent);
    tcase_add_loop_test(tc, uniform_frames_reconstruct_to_their_value, 0, 4);
    suite_add_tcase(s, tc);
    return rtomo_check_run(s);
}
