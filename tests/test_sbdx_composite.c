/*
 * test_sbdx_composite.c — the best-focus composite (sbdx_composite.h)
 * against a brute-force evaluation of its rule on fresh random stacks:
 * O(r^2) two-pass variances in long double per pixel and plane, with and
 * without flat-fielding responses (some below the floor), for radii from 0
 * to larger than the image.  Also: bands give bit-identical results, exact
 * ties go to the lowest plane, and the composite is the chosen plane's
 * value.
 */
#include "config.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rtomo_sim.h"
#include "sbdx_composite.h"
#include "test_sbdx_support.h"

/* Depths may differ from the brute force only where its two largest
 * variances are this close, relative to the stack's squared value range:
 * there the order is decided by rounding. */
#define NEAR_TIE_REL 1e-9

typedef struct random_stack {
    rtomo_sbdx_stack stack;
    float *planes;
    float *rx, *ry;                 /* n_planes x width / height */
    const float *rx_of[8], *ry_of[8];
} random_stack;

static void random_stack_make(random_stack *s, uint64_t *seed, int n_planes,
                              int width, int height, int with_response)
{
    size_t img = (size_t)width * height;
    s->planes = malloc(sizeof(float) * img * n_planes);
    s->rx = malloc(sizeof(float) * (size_t)width * n_planes);
    s->ry = malloc(sizeof(float) * (size_t)height * n_planes);
    ck_assert(s->planes && s->rx && s->ry);
    for (int k = 0; k < n_planes; k++) {
        /* Planes of different contrast, so that depth is not uniform. */
        double amplitude = 1.0 + 100.0 * rtomo_random_uniform(seed);
        for (size_t p = 0; p < img; p++)
            s->planes[img * k + p] =
                (float)(50.0 + amplitude * rtomo_random_uniform(seed));
        /* Responses from 0.05 to 1.55: some products fall below the floor. */
        for (int i = 0; i < width; i++)
            s->rx[k * width + i] =
                (float)(0.05 + 1.5 * rtomo_random_uniform(seed));
        for (int j = 0; j < height; j++)
            s->ry[k * height + j] =
                (float)(0.05 + 1.5 * rtomo_random_uniform(seed));
        s->rx_of[k] = s->rx + (size_t)k * width;
        s->ry_of[k] = s->ry + (size_t)k * height;
    }
    s->stack = (rtomo_sbdx_stack){s->planes, n_planes, width, height,
                                  with_response ? s->rx_of : NULL,
                                  with_response ? s->ry_of : NULL};
}

static void random_stack_free(random_stack *s)
{
    free(s->planes);
    free(s->rx);
    free(s->ry);
}

/* u_k(i, j) of the rule, in long double. */
static long double flat_fielded(const rtomo_sbdx_stack *s, int k, int i, int j)
{
    long double v = s->planes[((size_t)k * s->height + j) * s->width + i];
    if (!s->response_x)
        return v;
    long double r = (long double)s->response_x[k][i] * s->response_y[k][j];
    return v / (r > RTOMO_SBDX_RESPONSE_FLOOR ? r : RTOMO_SBDX_RESPONSE_FLOOR);
}

/* Two-pass variance over the clipped window, straight from the rule. */
static long double window_variance(const rtomo_sbdx_stack *s, int k, int i,
                                   int j, int r)
{
    int x0 = i - r < 0 ? 0 : i - r;
    int x1 = i + r >= s->width ? s->width - 1 : i + r;
    int y0 = j - r < 0 ? 0 : j - r;
    int y1 = j + r >= s->height ? s->height - 1 : j + r;
    long double sum = 0.0L, sq = 0.0L;
    long n = (long)(x1 - x0 + 1) * (y1 - y0 + 1);
    for (int y = y0; y <= y1; y++)
        for (int x = x0; x <= x1; x++)
            sum += flat_fielded(s, k, x, y);
    long double mean = sum / n;
    for (int y = y0; y <= y1; y++)
        for (int x = x0; x <= x1; x++) {
            long double d = flat_fielded(s, k, x, y) - mean;
            sq += d * d;
        }
    return sq / n;
}

START_TEST(depth_and_composite_follow_the_rule)
{
    static const int radii[] = {0, 1, 2, 5, 40};
    uint64_t seed = 0xc0ffeeu + (uint64_t)_i;
    int radius = radii[_i % 5], with_response = _i >= 5;
    int n_planes = 2 + (int)(rtomo_random_uniform(&seed) * 6);
    int width = 10 + (int)(rtomo_random_uniform(&seed) * 40);
    int height = 10 + (int)(rtomo_random_uniform(&seed) * 40);
    random_stack rs;
    random_stack_make(&rs, &seed, n_planes, width, height, with_response);
    size_t img = (size_t)width * height;
    float *composite = malloc(sizeof(float) * img);
    uint16_t *depth = malloc(sizeof(uint16_t) * img);
    ck_assert(composite && depth);
    rtomo_error err;
    ck_assert_int_eq(rtomo_sbdx_composite(&rs.stack, radius, composite, depth,
                                          &err), RTOMO_OK);

    long double scale = 0.0L;  /* squared value range of u */
    for (int k = 0; k < n_planes; k++)
        for (int j = 0; j < height; j++)
            for (int i = 0; i < width; i++) {
                long double u = flat_fielded(&rs.stack, k, i, j);
                scale = fmaxl(scale, u * u);
            }
    int near_ties = 0, mismatches = 0;
    for (int j = 0; j < height; j++)
        for (int i = 0; i < width; i++) {
            int best = 0;
            long double best_var = -1.0L, second = -1.0L;
            for (int k = 0; k < n_planes; k++) {
                long double v = window_variance(&rs.stack, k, i, j, radius);
                if (v > best_var) {
                    second = best_var;
                    best_var = v;
                    best = k;
                } else if (v > second) {
                    second = v;
                }
            }
            size_t p = (size_t)j * width + i;
            int tie = best_var - second <= NEAR_TIE_REL * scale;
            near_ties += tie;
            if (depth[p] != best) {
                mismatches++;
                SBDX_REQUIRE(tie, "pixel (%d, %d): depth %u, rule says %d "
                             "(variances %Lg vs %Lg)", i, j, depth[p], best,
                             best_var, second);
            }
            SBDX_REQUIRE(composite[p] == rs.planes[img * depth[p] + p],
                         "pixel (%d, %d): composite is not plane %u's value",
                         i, j, depth[p]);
        }
    printf("%d planes of %dx%d, radius %d, %s responses: %d near ties, %d "
           "depth differences from the brute force (all at near ties)\n",
           n_planes, width, height, radius, with_response ? "with" : "without",
           near_ties, mismatches);
    ck_assert_int_eq(mismatches, 0);
    random_stack_free(&rs);
    free(composite);
    free(depth);
}
END_TEST

/* Any cut into bands gives bit-identical results (sums restart at fixed
 * rows, not at band edges). */
START_TEST(bands_give_identical_results)
{
    uint64_t seed = 0xba2du;
    random_stack rs;
    random_stack_make(&rs, &seed, 5, 61, 150, 1);
    size_t img = 61 * 150;
    float *c_whole = malloc(4 * img), *c_bands = malloc(4 * img);
    uint16_t *d_whole = malloc(2 * img), *d_bands = malloc(2 * img);
    ck_assert(c_whole && c_bands && d_whole && d_bands);
    rtomo_error err;
    ck_assert_int_eq(rtomo_sbdx_composite(&rs.stack, 3, c_whole, d_whole,
                                          &err), RTOMO_OK);
    for (int first = 0; first < 150;) {
        int rows = 1 + (int)(rtomo_random_uniform(&seed) * 45);
        if (rows > 150 - first)
            rows = 150 - first;
        ck_assert_int_eq(rtomo_sbdx_composite_rows(&rs.stack, 3, first, rows,
                                                   c_bands, d_bands, &err),
                         RTOMO_OK);
        first += rows;
    }
    ck_assert(memcmp(c_whole, c_bands, 4 * img) == 0);
    ck_assert(memcmp(d_whole, d_bands, 2 * img) == 0);
    random_stack_free(&rs);
    free(c_whole);
    free(c_bands);
    free(d_whole);
    free(d_bands);
}
END_TEST

/* Exact ties go to the lowest index: a flat plane 0 loses everywhere to
 * two identical textured planes 1 and 2, of which 1 wins. */
START_TEST(ties_go_to_the_lowest_plane)
{
    uint64_t seed = 0x71e5u;
    random_stack rs;
    random_stack_make(&rs, &seed, 3, 30, 20, 0);
    size_t img = 30 * 20;
    for (size_t p = 0; p < img; p++) {
        rs.planes[p] = 7.0f;
        rs.planes[2 * img + p] = rs.planes[img + p];
    }
    uint16_t *depth = malloc(2 * img);
    ck_assert_ptr_nonnull(depth);
    rtomo_error err;
    ck_assert_int_eq(rtomo_sbdx_composite(&rs.stack, 2, NULL, depth, &err),
                     RTOMO_OK);
    for (size_t p = 0; p < img; p++)
        SBDX_REQUIRE(depth[p] == 1, "pixel %zu: depth %u", p, depth[p]);
    /* All planes equal: all ties, plane 0. */
    memcpy(rs.planes + img, rs.planes, 4 * img);
    memcpy(rs.planes + 2 * img, rs.planes, 4 * img);
    ck_assert_int_eq(rtomo_sbdx_composite(&rs.stack, 2, NULL, depth, &err),
                     RTOMO_OK);
    for (size_t p = 0; p < img; p++)
        SBDX_REQUIRE(depth[p] == 0, "pixel %zu: depth %u", p, depth[p]);
    random_stack_free(&rs);
    free(depth);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("sbdx_composite");
    TCase *tc = tcase_create("composite");
    tcase_add_loop_test(tc, depth_and_composite_follow_the_rule, 0, 10);
    tcase_add_test(tc, bands_give_identical_results);
    tcase_add_test(tc, ties_go_to_the_lowest_plane);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
