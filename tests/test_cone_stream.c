/*
 * test_cone_stream.c — streaming FDK on the CPU: projections fed in any
 * order with flushes at random points, or filtered apart and added in
 * groups of any size, give the whole scan's volume (within STREAM_BOUND
 * relative L2: only the order of float sums differs); a filter call in
 * the middle of a chunk leaves the queue alone; the volume of a subset
 * plus that of the rest is the whole; reset zeroes; raw camera frames with
 * dark and flat give the volume of their line integrals; bad indices and
 * NULL buffers are refused.
 */
#include "config.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_run.h"
#include "rtomo_sim.h"
#include "test_cone_support.h"
#include "test_util.h"

#define STREAM_BOUND 1e-6

/* A smaller set-up than the FDK tests (odd sizes, a ROI off centre, noisy
 * data): 120 views, 45 x 38 x 41 voxels. */
static rtomo_cone_geometry stream_geometry(void)
{
    rtomo_cone_geometry g = cone_test_geometry();
    g.n_proj = 120;
    g.det_u = 71;
    g.det_v = 57;
    g.nx = 49;
    g.ny = 45;
    g.nz = 41;
    g.roi_x = 4;
    g.roi_y = 7;
    g.roi_nx = 45;
    g.roi_ny = 38;
    return g;
}

static float *stream_data(const rtomo_cone_geometry *g, uint64_t *seed)
{
    rtomo_ellipsoid e[RTOMO_PHANTOM_MAX_ELLIPSOIDS];
    float *p = cone_test_project(g, e, cone_test_spheres(e));
    const size_t n = (size_t)g->n_proj * g->det_u * g->det_v;
    for (size_t i = 0; i < n; i++)
        p[i] += (float)(0.01 * rtomo_random_normal(seed));
    return p;
}

static void shuffle(uint64_t *seed, int *a, int n)
{
    for (int i = n - 1; i > 0; i--) {
        int j = test_rand_int(seed, 0, i);
        int t = a[i];
        a[i] = a[j];
        a[j] = t;
    }
}

static int *permutation(uint64_t *seed, int n)
{
    int *a = malloc(sizeof(int) * (size_t)n);
    ck_assert_ptr_nonnull(a);
    for (int i = 0; i < n; i++)
        a[i] = i;
    shuffle(seed, a, n);
    return a;
}

START_TEST(test_any_order)
{
    uint64_t seed = test_seed(0xc0e1, 0);
    rtomo_cone_geometry g = stream_geometry();
    float *proj = stream_data(&g, &seed);
    rtomo_cone *c = cone_test_create(&g, RTOMO_BACKEND_CPU,
                                     RTOMO_CONE_KERNEL_AUTO);
    const size_t frame = (size_t)g.det_u * g.det_v;
    const size_t nv = rtomo_cone_volume_size(c);
    float *whole = cone_test_fdk(c, proj);
    float *streamed = malloc(sizeof(float) * nv);
    float *scratch = malloc(sizeof(float) * frame);
    ck_assert(streamed && scratch);
    rtomo_error err;
    ck_assert_int_eq(rtomo_cone_reset(c, &err), RTOMO_OK);
    int *order = permutation(&seed, g.n_proj);
    for (int i = 0; i < g.n_proj; i++) {
        const int p = order[i];
        ck_assert_int_eq(rtomo_cone_add_projection(c, p, proj + p * frame,
                                                   &err), RTOMO_OK);
        if (test_rand_int(&seed, 0, 9) == 0)
            ck_assert_int_eq(rtomo_cone_flush(c, &err), RTOMO_OK);
        /* a filter in the middle of a chunk leaves the queue alone */
        if (i == 45)
            ck_assert_int_eq(rtomo_cone_filter(c, 3, proj + 3 * frame,
                                               scratch, &err), RTOMO_OK);
    }
    test_poison(streamed, nv);
    ck_assert_int_eq(rtomo_cone_read(c, streamed, &err), RTOMO_OK);
    double e = test_rel_l2(streamed, whole, nv);
    fprintf(stderr, "streamed in random order vs whole scan: relative L2 "
            "%.2e (bound %.0e)\n", e, STREAM_BOUND);
    ck_assert_double_le(e, STREAM_BOUND);
    rtomo_cone_stats st;
    rtomo_cone_get_stats(c, &st);
    ck_assert_int_eq(st.projections_backprojected, 2 * g.n_proj);
    ck_assert_int_eq(st.projections_filtered, 2 * g.n_proj + 1);
    free(order);
    free(whole);
    free(streamed);
    free(scratch);
    free(proj);
    rtomo_cone_destroy(c);
}
END_TEST

START_TEST(test_filtered_groups)
{
    uint64_t seed = test_seed(0xc0e2, 0);
    rtomo_cone_geometry g = stream_geometry();
    float *proj = stream_data(&g, &seed);
    rtomo_cone *c = cone_test_create(&g, RTOMO_BACKEND_CPU,
                                     RTOMO_CONE_KERNEL_AUTO);
    const size_t frame = (size_t)g.det_u * g.det_v;
    const size_t nv = rtomo_cone_volume_size(c);
    float *whole = cone_test_fdk(c, proj);
    rtomo_error err;
    ck_assert_int_eq(rtomo_cone_reset(c, &err), RTOMO_OK);
    /* filtered apart, in a shuffled order, added in groups of 1..70 */
    int *order = permutation(&seed, g.n_proj);
    const size_t ff = (size_t)rtomo_cone_filtered_width(c) * g.det_v;
    float *filtered = malloc(sizeof(float) * ff * g.n_proj);
    ck_assert_ptr_nonnull(filtered);
    for (int i = 0; i < g.n_proj; i++)
        ck_assert_int_eq(rtomo_cone_filter(c, order[i],
                                           proj + order[i] * frame,
                                           filtered + i * ff, &err),
                         RTOMO_OK);
    for (int i = 0; i < g.n_proj;) {
        int n = test_rand_int(&seed, 1, 70);
        if (n > g.n_proj - i)
            n = g.n_proj - i;
        ck_assert_int_eq(rtomo_cone_add_filtered(c, order + i, n,
                                                 filtered + i * ff, &err),
                         RTOMO_OK);
        i += n;
    }
    float *streamed = malloc(sizeof(float) * nv);
    ck_assert_ptr_nonnull(streamed);
    test_poison(streamed, nv);
    ck_assert_int_eq(rtomo_cone_read(c, streamed, &err), RTOMO_OK);
    double e = test_rel_l2(streamed, whole, nv);
    fprintf(stderr, "filtered apart, added in random groups: relative L2 "
            "%.2e (bound %.0e)\n", e, STREAM_BOUND);
    ck_assert_double_le(e, STREAM_BOUND);
    free(order);
    free(filtered);
    free(whole);
    free(streamed);
    free(proj);
    rtomo_cone_destroy(c);
}
END_TEST

/* Even projections, then (after reading) the odd ones: the two volumes
 * add up to the whole scan's; reset gives zeros. */
START_TEST(test_subsets_and_reset)
{
    uint64_t seed = test_seed(0xc0e3, 0);
    rtomo_cone_geometry g = stream_geometry();
    float *proj = stream_data(&g, &seed);
    rtomo_cone *c = cone_test_create(&g, RTOMO_BACKEND_CPU,
                                     RTOMO_CONE_KERNEL_AUTO);
    const size_t frame = (size_t)g.det_u * g.det_v;
    const size_t nv = rtomo_cone_volume_size(c);
    float *whole = cone_test_fdk(c, proj);
    float *even = malloc(sizeof(float) * nv), *all = malloc(sizeof(float) * nv);
    ck_assert(even && all);
    rtomo_error err;
    ck_assert_int_eq(rtomo_cone_reset(c, &err), RTOMO_OK);
    ck_assert_int_eq(rtomo_cone_read(c, even, &err), RTOMO_OK);
    ck_assert_double_eq(test_max_abs(even, nv), 0.0);
    for (int parity = 0; parity < 2; parity++) {
        for (int p = parity; p < g.n_proj; p += 2)
            ck_assert_int_eq(rtomo_cone_add_projection(c, p, proj + p * frame,
                                                       &err), RTOMO_OK);
        ck_assert_int_eq(rtomo_cone_read(c, parity ? all : even, &err),
                         RTOMO_OK);
    }
    double e_all = test_rel_l2(all, whole, nv);
    ck_assert_double_le(e_all, STREAM_BOUND);
    /* slices 5..11 alone are those of the whole read */
    const size_t plane = (size_t)rtomo_cone_geometry_of(c)->roi_nx *
                         rtomo_cone_geometry_of(c)->roi_ny;
    ck_assert_int_eq(rtomo_cone_read_slices(c, 5, 7, even, &err), RTOMO_OK);
    ck_assert_double_eq(test_max_abs_diff(even, all + 5 * plane, 7 * plane),
                        0.0);
    ck_assert_int_eq(rtomo_cone_read_slices(c, 40, 2, even, &err),
                     RTOMO_E_RANGE);
    /* the even half alone is not the whole */
    ck_assert_double_gt(test_rel_l2(even, whole, nv), 0.1);
    free(even);
    free(all);
    free(whole);
    free(proj);
    rtomo_cone_destroy(c);
}
END_TEST

/* Counts of a camera (dark 100, flat 40000, 16 bits) through
 * rtomo_cone_add_frame give the volume of the line integrals, up to the
 * counts' quantisation (measured 7e-5; bound 1e-3); the correction's
 * clamps keep dead and dark pixels finite; a dark without a flat is
 * refused. */
START_TEST(test_raw_frames)
{
    rtomo_cone_geometry g = stream_geometry();
    rtomo_ellipsoid e[RTOMO_PHANTOM_MAX_ELLIPSOIDS];
    float *proj = cone_test_project(&g, e, cone_test_spheres(e));
    rtomo_cone *c = cone_test_create(&g, RTOMO_BACKEND_CPU,
                                     RTOMO_CONE_KERNEL_AUTO);
    const size_t frame = (size_t)g.det_u * g.det_v;
    const size_t nv = rtomo_cone_volume_size(c);
    float *whole = cone_test_fdk(c, proj);
    rtomo_camera cam;
    rtomo_camera_init(&cam);
    uint16_t *raw = malloc(sizeof(uint16_t) * frame);
    float *dark = malloc(sizeof(float) * frame);
    float *flat = malloc(sizeof(float) * frame);
    float *vol = malloc(sizeof(float) * nv);
    ck_assert(raw && dark && flat && vol);
    rtomo_camera_dark(&cam, frame, raw);
    for (size_t i = 0; i < frame; i++)
        dark[i] = raw[i];
    rtomo_camera_flat(&cam, frame, raw);
    for (size_t i = 0; i < frame; i++)
        flat[i] = raw[i];
    rtomo_error err;
    ck_assert_int_eq(rtomo_cone_reset(c, &err), RTOMO_OK);
    for (int p = 0; p < g.n_proj; p++) {
        rtomo_camera_expose(&cam, proj + p * frame, frame, raw);
        ck_assert_int_eq(rtomo_cone_add_frame(c, p, raw, RTOMO_DTYPE_U16,
                                              dark, flat, &err), RTOMO_OK);
    }
    ck_assert_int_eq(rtomo_cone_read(c, vol, &err), RTOMO_OK);
    double e_raw = test_rel_l2(vol, whole, nv);
    fprintf(stderr, "raw 16-bit frames with dark and flat vs line "
            "integrals: relative L2 %.2e (bound 1e-3)\n", e_raw);
    ck_assert_double_le(e_raw, 1e-3);
    /* clamps: a dead pixel, a sample below the dark, an absurd one */
    float *li = malloc(sizeof(float) * frame);
    ck_assert_ptr_nonnull(li);
    raw[0] = 50;
    raw[1] = 65535;
    flat[1] = dark[1];
    flat[2] = dark[2] + 1.0f;
    raw[2] = 65535;
    ck_assert_int_eq(rtomo_cone_line_integrals(c, raw, RTOMO_DTYPE_U16, dark,
                                               flat, li, &err), RTOMO_OK);
    ck_assert_double_eq_tol(li[0], -log(1e-6), 1e-4);
    ck_assert_double_eq_tol(li[1], -log(1e-6), 1e-4);
    ck_assert(isfinite(li[2]));
    ck_assert_int_eq(rtomo_cone_line_integrals(c, raw, RTOMO_DTYPE_U16, dark,
                                               NULL, li, &err),
                     RTOMO_E_INVALID);
    ck_assert_ptr_nonnull(strstr(err.message, "a dark without a flat"));
    /* without a flat the samples are line integrals already */
    ck_assert_int_eq(rtomo_cone_line_integrals(c, proj, RTOMO_DTYPE_F32,
                                               NULL, NULL, li, &err),
                     RTOMO_OK);
    ck_assert_double_eq(test_max_abs_diff(li, proj, frame), 0.0);
    free(li);
    free(raw);
    free(dark);
    free(flat);
    free(vol);
    free(whole);
    free(proj);
    rtomo_cone_destroy(c);
}
END_TEST

/* A frame large enough to be normalised by several threads (520 x 510:
 * rows not a multiple of a task's 16), against -log((raw - dark) /
 * (flat - dark)) computed here in double, sample by sample. */
START_TEST(test_large_frame_threads)
{
    rtomo_cone_geometry g = cone_test_geometry();
    g.det_u = 520;
    g.det_v = 510;
    g.n_proj = 8;
    g.nx = g.ny = g.nz = 8;
    rtomo_cone *c = cone_test_create(&g, RTOMO_BACKEND_CPU,
                                     RTOMO_CONE_KERNEL_AUTO);
    const size_t frame = (size_t)g.det_u * g.det_v;
    uint16_t *raw = malloc(sizeof(uint16_t) * frame);
    float *dark = malloc(sizeof(float) * frame);
    float *flat = malloc(sizeof(float) * frame);
    float *li = malloc(sizeof(float) * frame);
    ck_assert(raw && dark && flat && li);
    uint64_t seed = test_seed(0xf7a3e, 0);
    for (size_t i = 0; i < frame; i++) {
        dark[i] = (float)test_rand_int(&seed, 90, 110);
        flat[i] = (float)test_rand_int(&seed, 30000, 40000);
        raw[i] = (uint16_t)test_rand_int(&seed, 200, 29000);
    }
    rtomo_error err;
    ck_assert_int_eq(rtomo_cone_line_integrals(c, raw, RTOMO_DTYPE_U16, dark,
                                               flat, li, &err), RTOMO_OK);
    double worst = 0.0;
    for (size_t i = 0; i < frame; i++) {
        double want = -log(((double)raw[i] - dark[i]) / (flat[i] - dark[i]));
        double d = fabs(li[i] - want);
        worst = d > worst ? d : worst;
    }
    fprintf(stderr, "520 x 510 frame, threads: max error %.2e\n", worst);
    ck_assert_double_le(worst, 1e-5);
    free(raw);
    free(dark);
    free(flat);
    free(li);
    rtomo_cone_destroy(c);
}
END_TEST

START_TEST(test_refused)
{
    rtomo_cone_geometry g = stream_geometry();
    rtomo_cone *c = cone_test_create(&g, RTOMO_BACKEND_CPU,
                                     RTOMO_CONE_KERNEL_AUTO);
    float *frame = calloc((size_t)g.det_u * g.det_v, sizeof(float));
    ck_assert_ptr_nonnull(frame);
    rtomo_error err;
    ck_assert_int_eq(rtomo_cone_add_projection(c, -1, frame, &err),
                     RTOMO_E_RANGE);
    ck_assert_ptr_nonnull(strstr(err.message, "index -1 outside 0..119"));
    ck_assert_int_eq(rtomo_cone_add_projection(c, g.n_proj, frame, &err),
                     RTOMO_E_RANGE);
    ck_assert_int_eq(rtomo_cone_add_projection(c, 0, NULL, &err),
                     RTOMO_E_INVALID);
    ck_assert_int_eq(rtomo_cone_read(c, NULL, &err), RTOMO_E_INVALID);
    int bad = 500;
    ck_assert_int_eq(rtomo_cone_add_filtered(c, &bad, 1, frame, &err),
                     RTOMO_E_RANGE);
    ck_assert_int_eq(rtomo_cone_add_filtered(c, &bad, -1, frame, &err),
                     RTOMO_E_INVALID);
    free(frame);
    rtomo_cone_destroy(c);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cone_stream");
    TCase *tc = tcase_create("stream");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_any_order);
    tcase_add_test(tc, test_filtered_groups);
    tcase_add_test(tc, test_subsets_and_reset);
    tcase_add_test(tc, test_raw_frames);
    tcase_add_test(tc, test_large_frame_threads);
    tcase_add_test(tc, test_refused);
    suite_add_tcase(s, tc);
    return rtomo_check_run(s);
}
