/*
 * test_sbdx_output.c — what collect() hands back on the CPU SBDX backend:
 * 16-bit planes that follow clamp(round((v - offset) * scale)), any subset
 * of outputs giving the same values, the frame's tag, the pipeline depth,
 * and the stats (frames, deposits, times).
 */
#include "config.h"

#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rtomo_sim.h"
#include "test_sbdx_support.h"
#include "check_run.h"

/* The contract of rtomo_sbdx_output, evaluated independently: the product
 * in float32 as the engine does, the rounding and clamping in double. */
static uint16_t expected_u16(float v, float offset, float scale)
{
    double t = (double)((v - offset) * scale);
    if (t <= 0.0)
        return 0;
    if (t >= 65535.0)
        return 65535;
    return (uint16_t)floor(t + 0.5);
}

START_TEST(u16_planes_follow_their_formula)
{
    rtomo_sbdx_geometry g;
    sbdx_small_geometry(&g);
    uint64_t seed = 0x16u;
    void *frame = sbdx_random_frame(&g, RTOMO_DTYPE_U8, &seed);
    size_t n = sbdx_planes_pixels(&g);
    float *planes = malloc(n * sizeof *planes);
    uint16_t *u16 = malloc(n * sizeof *u16);
    ck_assert(planes && u16);
    rtomo_sbdx *plan = sbdx_create_cpu(&g, RTOMO_SBDX_PIXEL_CENTRIC, 2);
    rtomo_sbdx_output out = {.planes = planes};
    rtomo_error err;
    ck_assert_int_eq(rtomo_sbdx_reconstruct(plan, frame, RTOMO_DTYPE_U8, &out,
                                            &err), RTOMO_OK);
    float peak = 0.0f;
    for (size_t i = 0; i < n; i++)
        peak = fmaxf(peak, planes[i]);

    /* An offset and scale that clip both ends of the range. */
    memset(&out, 0, sizeof out);
    out.planes_u16 = u16;
    out.u16_offset = 0.3f * peak;
    out.u16_scale = (float)(65535.0 / (0.5 * peak));
    ck_assert_int_eq(rtomo_sbdx_reconstruct(plan, frame, RTOMO_DTYPE_U8, &out,
                                            &err), RTOMO_OK);
    size_t low = 0, high = 0;
    for (size_t i = 0; i < n; i++) {
        uint16_t want = expected_u16(planes[i], out.u16_offset, out.u16_scale);
        SBDX_REQUIRE(u16[i] == want, "pixel %zu: value %g gives %u, want %u",
                     i, (double)planes[i], u16[i], want);
        low += u16[i] == 0;
        high += u16[i] == 65535;
    }
    ck_assert_uint_gt(low, 0);      /* both clamps were exercised */
    ck_assert_uint_gt(high, 0);
    ck_assert_uint_gt(n - low - high, n / 10);

    rtomo_sbdx_destroy(plan);
    free(frame);
    free(planes);
    free(u16);
}
END_TEST

/* Asking for every output at once or for one at a time gives the same
 * values: outputs are views of one reconstruction (raw or flat-fielded
 * planes: _i is flat_field). */
START_TEST(outputs_are_independent_of_each_other)
{
    rtomo_sbdx_geometry g;
    sbdx_small_geometry(&g);
    g.flat_field = _i;
    uint64_t seed = 0x0u + (uint64_t)_i;
    void *frame = sbdx_random_frame(&g, RTOMO_DTYPE_U16, &seed);
    size_t n = sbdx_planes_pixels(&g), img = n / g.n_planes;
    float *p1 = malloc(n * 4), *c1 = malloc(img * 4), *c2 = malloc(img * 4);
    uint16_t *d1 = malloc(img * 2), *d2 = malloc(img * 2);
    ck_assert(p1 && c1 && c2 && d1 && d2);
    rtomo_sbdx *plan = sbdx_create_cpu(&g, RTOMO_SBDX_PIXEL_CENTRIC, 2);
    rtomo_error err;
    rtomo_sbdx_output all = {.planes = p1, .composite = c1, .depth = d1};
    ck_assert_int_eq(rtomo_sbdx_reconstruct(plan, frame, RTOMO_DTYPE_U16,
                                            &all, &err), RTOMO_OK);
    rtomo_sbdx_output only_composite = {.composite = c2};
    ck_assert_int_eq(rtomo_sbdx_reconstruct(plan, frame, RTOMO_DTYPE_U16,
                                            &only_composite, &err), RTOMO_OK);
    rtomo_sbdx_output only_depth = {.depth = d2};
    ck_assert_int_eq(rtomo_sbdx_reconstruct(plan, frame, RTOMO_DTYPE_U16,
                                            &only_depth, &err), RTOMO_OK);
    rtomo_sbdx_output nothing = {0};
    ck_assert_int_eq(rtomo_sbdx_reconstruct(plan, frame, RTOMO_DTYPE_U16,
                                            &nothing, &err), RTOMO_OK);
    ck_assert(memcmp(c1, c2, img * 4) == 0);
    ck_assert(memcmp(d1, d2, img * 2) == 0);
    for (size_t i = 0; i < img; i++) {
        SBDX_REQUIRE(d1[i] < g.n_planes, "depth %u", d1[i]);
        SBDX_REQUIRE(c1[i] == p1[(size_t)d1[i] * img + i],
                     "composite pixel %zu is not its depth plane's value", i);
    }
    rtomo_sbdx_destroy(plan);
    free(frame);
    free(p1);
    free(c1);
    free(c2);
    free(d1);
    free(d2);
}
END_TEST

START_TEST(pipeline_returns_tags_and_counts_stats)
{
    rtomo_sbdx_geometry g;
    sbdx_small_geometry(&g);
    uint64_t seed = 0x7a9u;
    void *frame = sbdx_random_frame(&g, RTOMO_DTYPE_U8, &seed);
    rtomo_sbdx *plan = sbdx_create_cpu(&g, RTOMO_SBDX_PIXEL_CENTRIC, 2);
    ck_assert_int_eq(rtomo_sbdx_pipeline_depth(plan), 1);
    ck_assert_int_eq(rtomo_sbdx_backend(plan), RTOMO_BACKEND_CPU);
    rtomo_error err;
    rtomo_sbdx_output none = {0};
    for (int f = 0; f < 3; f++) {
        uint64_t tag = rtomo_random_next(&seed), got = 0;
        ck_assert_int_eq(rtomo_sbdx_submit(plan, frame, RTOMO_DTYPE_U8, tag,
                                           &err), RTOMO_OK);
        /* Depth 1: a second frame must wait for the first's collect. */
        ck_assert_int_eq(rtomo_sbdx_submit(plan, frame, RTOMO_DTYPE_U8, tag,
                                           &err), RTOMO_E_STATE);
        ck_assert_int_eq(rtomo_sbdx_collect(plan, &none, &got, &err),
                         RTOMO_OK);
        ck_assert(got == tag);
    }
    rtomo_sbdx_stats st;
    rtomo_sbdx_get_stats(plan, &st);
    ck_assert_int_eq(st.frames, 3);
    ck_assert_double_eq(st.updates,
                        3.0 * 4.0 * sbdx_frame_samples(&g) * g.n_planes);
    ck_assert_double_gt(st.compute_seconds, 0.0);
    ck_assert_double_gt(st.latency_seconds_last, 0.0);
    ck_assert_double_lt(st.latency_seconds_last, 60.0);
    rtomo_sbdx_destroy(plan);
    free(frame);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("sbdx_output");
    TCase *tc = tcase_create("output");
    tcase_add_test(tc, u16_planes_follow_their_formula);
    tcase_add_loop_test(tc, outputs_are_independent_of_each_other, 0, 2);
    tcase_add_test(tc, pipeline_returns_tags_and_counts_stats);
    suite_add_tcase(s, tc);
    return rtomo_check_run(s);
}
