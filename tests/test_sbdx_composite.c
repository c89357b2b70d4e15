/*
 * test_sbdx_composite.c — the best-focus composite (sbdx_composite.h)
 * against a brute-force evaluation of its rule on fresh random stacks:
 * O(r^2) two-pass variances in long double per pixel and plane, for raw
 * planes with and without flat-fielding responses (some below the floor)
 * and for flat-fielded planes (whose pixels outside the field of view do
 * not count), for radii from 0 to larger than the image; and the CPU
 * engine's own composite of reconstructed planes, raw and flat-fielded,
 * against the same brute force.  Also: bands give bit-identical results,
 * exact ties go to the lowest plane, and the composite is the chosen
 * plane's value.  A pixel where no plane counts has depth
 * RTOMO_SBDX_DEPTH_NONE (not plane 0) and composite 0; a pixel whose
 * response is exactly the floor in exact arithmetic is in the field of
 * view however its weights round.
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
#include "check_run.h"

/* Depths may differ from the brute force only where its two largest
 * variances are this close, relative to the stack's squared value range:
 * there the order is decided by rounding. */
#define NEAR_TIE_REL 1e-9

/* What a stack holds. */
enum stack_kind { RAW_PLAIN, RAW_WITH_RESPONSES, FLAT_FIELDED };
static const char *const kind_names[3] = {"raw without responses",
                                          "raw with responses",
                                          "flat-fielded"};

typedef struct random_stack {
    rtomo_sbdx_stack stack;
    float *planes;
    float *rx, *ry;                 /* n_planes x width / height */
    const float *rx_of[8], *ry_of[8];
} random_stack;

static void random_stack_make(random_stack *s, uint64_t *seed, int n_planes,
                              int width, int height, enum stack_kind kind)
{
    size_t img = (size_t)width * height;
    s->planes = malloc(sizeof(float) * img * n_planes);
    s->rx = malloc(sizeof(float) * (size_t)width * n_planes);
    s->ry = malloc(sizeof(float) * (size_t)height * n_planes);
    ck_assert(s->planes && s->rx && s->ry);
    for (int k = 0; k < n_planes; k++) {
        /* Responses from 0.05 to 1.55: some products fall below the floor. */
        for (int i = 0; i < width; i++)
            s->rx[k * width + i] =
                (float)(0.05 + 1.5 * rtomo_random_uniform(seed));
        for (int j = 0; j < height; j++)
            s->ry[k * height + j] =
                (float)(0.05 + 1.5 * rtomo_random_uniform(seed));
        /* Planes of different contrast, so that depth is not uniform;
         * flat-fielded ones are 0 outside the field of view, as the
         * engine makes them. */
        double amplitude = 1.0 + 100.0 * rtomo_random_uniform(seed);
        for (int j = 0; j < height; j++)
            for (int i = 0; i < width; i++) {
                float v = (float)(50.0 + amplitude *
                                             rtomo_random_uniform(seed));
                double r = (double)s->rx[k * width + i] * s->ry[k * height + j];
                if (kind == FLAT_FIELDED && !(r >= RTOMO_SBDX_FIELD_OF_VIEW_MIN))
                    v = 0.0f;
                s->planes[img * k + (size_t)j * width + i] = v;
            }
        s->rx_of[k] = s->rx + (size_t)k * width;
        s->ry_of[k] = s->ry + (size_t)k * height;
    }
    int with_response = kind != RAW_PLAIN;
    s->stack = (rtomo_sbdx_stack){s->planes, n_planes, width, height,
                                  with_response ? s->rx_of : NULL,
                                  with_response ? s->ry_of : NULL,
                                  kind == FLAT_FIELDED};
}

static void random_stack_free(random_stack *s)
{
    free(s->planes);
    free(s->rx);
    free(s->ry);
}

/* Whether pixel (i, j) of plane k counts, straight from the rule: raw
 * planes everywhere, flat-fielded ones where the product of the responses
 * (exact in double) reaches RTOMO_SBDX_FIELD_OF_VIEW_MIN. */
static int counts(const rtomo_sbdx_stack *s, int k, int i, int j)
{
    if (!s->flat_fielded)
        return 1;
    double r = (double)s->response_x[k][i] * s->response_y[k][j];
    return r >= RTOMO_SBDX_FIELD_OF_VIEW_MIN;
}

/* u_k(i, j) of the rule, in long double. */
static long double flat_fielded(const rtomo_sbdx_stack *s, int k, int i, int j)
{
    long double v = s->planes[((size_t)k * s->height + j) * s->width + i];
    if (!s->response_x || s->flat_fielded)
        return v;
    long double r = (long double)s->response_x[k][i] * s->response_y[k][j];
    return v / (r > RTOMO_SBDX_RESPONSE_FLOOR ? r : RTOMO_SBDX_RESPONSE_FLOOR);
}

/* Two-pass variance over the counting pixels of the clipped window,
 * straight from the rule. */
static long double window_variance(const rtomo_sbdx_stack *s, int k, int i,
                                   int j, int r)
{
    int x0 = i - r < 0 ? 0 : i - r;
    int x1 = i + r >= s->width ? s->width - 1 : i + r;
    int y0 = j - r < 0 ? 0 : j - r;
    int y1 = j + r >= s->height ? s->height - 1 : j + r;
    long double sum = 0.0L, sq = 0.0L;
    long n = 0;
    for (int y = y0; y <= y1; y++)
        for (int x = x0; x <= x1; x++)
            if (counts(s, k, x, y)) {
                sum += flat_fielded(s, k, x, y);
                n++;
            }
    long double mean = sum / n;
    for (int y = y0; y <= y1; y++)
        for (int x = x0; x <= x1; x++)
            if (counts(s, k, x, y)) {
                long double d = flat_fielded(s, k, x, y) - mean;
                sq += d * d;
            }
    return sq / n;
}

/* Depth and composite of a whole stack against the brute force: depth
 * equal but at near-ties (returned through *near_ties, with the number of
 * differences, all of them at near-ties), composite the chosen plane's
 * value. */
static int check_against_rule(const rtomo_sbdx_stack *st, int radius,
                              const float *composite, const uint16_t *depth,
                              int *near_ties)
{
    int width = st->width, height = st->height;
    size_t img = (size_t)width * height;
    long double scale = 0.0L;  /* squared value range of u */
    for (int k = 0; k < st->n_planes; k++)
        for (int j = 0; j < height; j++)
            for (int i = 0; i < width; i++) {
                long double u = flat_fielded(st, k, i, j);
                scale = fmaxl(scale, u * u);
            }
    int mismatches = 0;
    *near_ties = 0;
    for (int j = 0; j < height; j++)
        for (int i = 0; i < width; i++) {
            /* No candidate: no plane.  r = 0: every candidate's variance
             * is 0, so the lowest candidate by the tie rule. */
            int best = RTOMO_SBDX_DEPTH_NONE;
            long double best_var = -1.0L, second = -1.0L;
            for (int k = 0; k < st->n_planes; k++) {
                if (!counts(st, k, i, j))
                    continue;
                long double v =
                    radius ? window_variance(st, k, i, j, radius) : 0.0L;
                if (v > best_var) {
                    second = best_var;
                    best_var = v;
                    best = k;
                } else if (v > second) {
                    second = v;
                }
            }
            size_t p = (size_t)j * width + i;
            int tie = second >= 0.0L && best_var - second <= NEAR_TIE_REL * scale;
            *near_ties += tie;
            if (depth[p] != best) {
                mismatches++;
                SBDX_REQUIRE(tie, "pixel (%d, %d): depth %u, rule says %d "
                             "(variances %Lg vs %Lg)", i, j, depth[p], best,
                             best_var, second);
            }
            if (depth[p] == RTOMO_SBDX_DEPTH_NONE)
                SBDX_REQUIRE(composite[p] == 0.0f, "pixel (%d, %d): no plane "
                             "but composite %g", i, j, (double)composite[p]);
            else
                SBDX_REQUIRE(composite[p] == st->planes[img * depth[p] + p],
                             "pixel (%d, %d): composite is not plane %u's "
                             "value", i, j, depth[p]);
        }
    return mismatches;
}

/* _i = 5 kind + radius index. */
START_TEST(depth_and_composite_follow_the_rule)
{
    static const int radii[] = {0, 1, 2, 5, 40};
    uint64_t seed = 0xc0ffeeu + (uint64_t)_i;
    int radius = radii[_i % 5];
    enum stack_kind kind = (enum stack_kind)(_i / 5);
    int n_planes = 2 + (int)(rtomo_random_uniform(&seed) * 6);
    int width = 10 + (int)(rtomo_random_uniform(&seed) * 40);
    int height = 10 + (int)(rtomo_random_uniform(&seed) * 40);
    random_stack rs;
    random_stack_make(&rs, &seed, n_planes, width, height, kind);
    size_t img = (size_t)width * height;
    float *composite = malloc(sizeof(float) * img);
    uint16_t *depth = malloc(sizeof(uint16_t) * img);
    ck_assert(composite && depth);
    rtomo_error err;
    ck_assert_int_eq(rtomo_sbdx_composite(&rs.stack, radius, composite, depth,
                                          &err), RTOMO_OK);
    int near_ties;
    int mismatches = check_against_rule(&rs.stack, radius, composite, depth,
                                        &near_ties);
    printf("%d planes of %dx%d, radius %d, %s: %d near ties, %d depth "
           "differences from the brute force (all at near ties)\n",
           n_planes, width, height, radius, kind_names[kind], near_ties,
           mismatches);
    ck_assert_int_eq(mismatches, 0);
    random_stack_free(&rs);
    free(composite);
    free(depth);
}
END_TEST

/* The CPU engine's composite of its own planes (random frame, both
 * methods, raw and flat-fielded planes) is the rule applied to those
 * planes with the plan's responses.  _i = 2 flat_field + method. */
START_TEST(engine_composite_is_the_rule_on_its_planes)
{
    rtomo_sbdx_geometry g;
    sbdx_small_geometry(&g);
    g.flat_field = _i / 2;
    g.composite_radius = 1 + _i % 2;
    uint64_t seed = 0xe1a7eu + (uint64_t)_i;
    void *frame = sbdx_random_frame(&g, RTOMO_DTYPE_U8, &seed);
    size_t n = sbdx_planes_pixels(&g), img = n / g.n_planes;
    float *planes = malloc(sizeof(float) * n);
    float *composite = malloc(sizeof(float) * img);
    uint16_t *depth = malloc(sizeof(uint16_t) * img);
    ck_assert(planes && composite && depth);
    rtomo_sbdx *plan = sbdx_create_cpu(&g, (rtomo_sbdx_method)(_i % 2), 3);
    rtomo_error err;
    rtomo_sbdx_output out = {.planes = planes, .composite = composite,
                             .depth = depth};
    ck_assert_int_eq(rtomo_sbdx_reconstruct(plan, frame, RTOMO_DTYPE_U8, &out,
                                            &err), RTOMO_OK);
    const rtomo_sbdx_geometry *pg = rtomo_sbdx_geometry_of(plan);
    rtomo_sbdx_lut *lut = rtomo_sbdx_lut_create(pg, &err);
    ck_assert_ptr_nonnull(lut);
    const float *rx[6], *ry[6];
    for (int k = 0; k < g.n_planes; k++)
        rx[k] = lut->x[k].response, ry[k] = lut->y[k].response;
    rtomo_sbdx_stack st = {planes, g.n_planes, pg->out_width, pg->out_height,
                           rx, ry, g.flat_field};
    int near_ties;
    int mismatches = check_against_rule(&st, g.composite_radius, composite,
                                        depth, &near_ties);
    printf("engine composite, %s planes, %s: %d near ties, %d depth "
           "differences from the brute force\n",
           g.flat_field ? "flat-fielded" : "raw",
           _i % 2 ? "detector-centric" : "pixel-centric", near_ties,
           mismatches);
    ck_assert_int_eq(mismatches, 0);
    rtomo_sbdx_lut_destroy(lut);
    rtomo_sbdx_destroy(plan);
    free(frame);
    free(planes);
    free(composite);
    free(depth);
}
END_TEST

/* Any cut into bands gives bit-identical results (sums restart at fixed
 * rows, not at band edges). */
START_TEST(bands_give_identical_results)
{
    uint64_t seed = 0xba2du + (uint64_t)_i;
    random_stack rs;
    random_stack_make(&rs, &seed, 5, 61, 150,
                      _i ? FLAT_FIELDED : RAW_WITH_RESPONSES);
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
    random_stack_make(&rs, &seed, 3, 30, 20, RAW_PLAIN);
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

/* "No plane measured this pixel" is not plane 0: on flat-fielded planes a
 * pixel outside every field of view has depth RTOMO_SBDX_DEPTH_NONE and
 * composite 0, one inside plane 1's only has depth 1, with any radius. */
START_TEST(no_plane_is_not_plane_0)
{
    enum { W = 6, H = 5, P = 2 };
    float planes[P * W * H], rx[P][W], ry[P][H];
    for (int k = 0; k < P; k++) {
        for (int i = 0; i < W; i++)
            rx[k][i] = 1.0f;
        for (int j = 0; j < H; j++)
            ry[k][j] = 1.0f;
    }
    rx[0][2] = rx[1][2] = 0.1f;     /* column 2: outside on both planes */
    rx[0][4] = 0.1f;                /* column 4: inside plane 1 only */
    for (int p = 0; p < P * W * H; p++)
        planes[p] = (float)(1 + p % 7);
    for (int k = 0; k < P; k++)
        for (int j = 0; j < H; j++)
            for (int i = 0; i < W; i++)
                if (rx[k][i] * ry[k][j] < 0.25f)
                    planes[(k * H + j) * W + i] = 0.0f;
    const float *rxs[P] = {rx[0], rx[1]}, *rys[P] = {ry[0], ry[1]};
    rtomo_sbdx_stack st = {planes, P, W, H, rxs, rys, 1};
    for (int radius = 0; radius <= 2; radius++) {
        float composite[W * H];
        uint16_t depth[W * H];
        rtomo_error err;
        ck_assert_int_eq(rtomo_sbdx_composite(&st, radius, composite, depth,
                                              &err), RTOMO_OK);
        for (int j = 0; j < H; j++) {
            ck_assert_msg(depth[j * W + 2] == RTOMO_SBDX_DEPTH_NONE,
                          "radius %d row %d: depth %u where no plane "
                          "measured", radius, j, depth[j * W + 2]);
            ck_assert(composite[j * W + 2] == 0.0f);
            ck_assert_int_eq(depth[j * W + 4], 1);
            ck_assert(composite[j * W + 4] == planes[(H + j) * W + 4]);
        }
    }
}
END_TEST

/* A pixel whose response is 0.25 in exact arithmetic (0.4 x 0.625 for
 * n = 1.4, m = 3, 12 detector elements) but whose float responses
 * multiply to 0.249999985: in the field of view by the documented rule,
 * so a uniform frame flat-fields to its value there, on both CPU methods. */
START_TEST(a_pixel_at_the_threshold_is_in_the_field_of_view)
{
    rtomo_sbdx_geometry g;
    sbdx_threshold_geometry(&g);
    rtomo_error err;
    rtomo_sbdx_lut *lut = rtomo_sbdx_lut_create(&g, &err);
    ck_assert_ptr_nonnull(lut);
    const int i = 5, j = 8;     /* Rx = 0.4, Ry = 0.625 exactly */
    double r = (double)lut->x[0].response[i] * lut->y[0].response[j];
    ck_assert_msg(fabs(r - 0.25) < 1e-6, "response %.12g is not at the "
                  "threshold: the scene no longer tests it", r);
    ck_assert(r >= RTOMO_SBDX_FIELD_OF_VIEW_MIN);
    rtomo_sbdx_lut_destroy(lut);

    size_t n = (size_t)6 * 6 * 12 * 12;
    float *frame = malloc(sizeof(float) * n);
    ck_assert_ptr_nonnull(frame);
    for (size_t s = 0; s < n; s++)
        frame[s] = 100.0f;
    for (int method = 0; method < 2; method++) {
        float *planes = sbdx_reconstruct(&g, (rtomo_sbdx_method)method, 1,
                                         frame, RTOMO_DTYPE_F32);
        float v = planes[j * 38 + i];
        ck_assert_msg(fabs(v - 100.0) < 1e-3, "method %d: the pixel at the "
                      "threshold flat-fields to %.9g, not 100", method,
                      (double)v);
        free(planes);
    }
    free(frame);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("sbdx_composite");
    TCase *tc = tcase_create("composite");
    tcase_add_loop_test(tc, depth_and_composite_follow_the_rule, 0, 15);
    tcase_add_loop_test(tc, engine_composite_is_the_rule_on_its_planes, 0, 4);
    tcase_add_loop_test(tc, bands_give_identical_results, 0, 2);
    tcase_add_test(tc, ties_go_to_the_lowest_plane);
    tcase_add_test(tc, no_plane_is_not_plane_0);
    tcase_add_test(tc, a_pixel_at_the_threshold_is_in_the_field_of_view);
    suite_add_tcase(s, tc);
    return rtomo_check_run(s);
}
