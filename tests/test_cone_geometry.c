/*
 * test_cone_geometry.c — the cone-beam geometry's checks and weights:
 * every impossible set-up is refused with its own reason (the message is
 * matched, so a check that fires for the wrong reason fails); the scan is
 * classified as full, half fan or short scan; Parker's weights of a ray
 * and its conjugates add up to 1 everywhere in the scan; Wang's half-fan
 * weights of u and -u add up to 1 across the band both sides see; names
 * parse and print; the memory a plan would hold is estimated.
 */
#include "config.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check_run.h"
#include "cone_internal.h"
#include "test_cone_support.h"
#include "test_util.h"

typedef struct reject_case {
    const char *what;           /* the mutation, for the failure message */
    const char *expect;         /* a piece of the error message */
} reject_case;

static const double bad_order[4] = {0.0, 0.1, 0.05, 0.2};

static const reject_case rejects[] = {
    {"sad 0", "the source-to-axis distance must be"},
    {"sad NaN", "the source-to-axis distance must be"},
    {"sdd = sad", "is not beyond sad"},
    {"sdd < sad", "is not beyond sad"},
    {"pitch_u 0", "detector pitch"},
    {"pitch_v < 0", "detector pitch"},
    {"det_u 1", "det_u 2.."},
    {"voxel 0", "the voxel edge must be"},
    {"nx 0", "volume 0 x 64 x 64"},
    {"n_proj 1", "n_proj 1"},
    {"angles out of order", "projection 2 breaks the order"},
    {"540 degrees", "more than one turn"},
    {"180-degree short scan", "FDK needs 180 degrees plus the fan angle"},
    {"offset detector, short scan", "needs a full 360-degree scan"},
    {"detector beside the central ray", "on one side of the central ray"},
    {"offset detector, 1-pixel overlap", "needs at least 2 pixels"},
    {"volume reaching the source", "at or behind the source"},
    {"ROI outside the field of view", "outside the field of view"},
    {"ROI above the cone", "lies above the cone of rays"},
    {"ROI beyond the volume", "ROI along x"},
    {"cutoff 1.5", "cutoff 1.5"},
    {"window 99", "unknown window 99"},
};
#define N_REJECTS ((int)(sizeof rejects / sizeof rejects[0]))

/* Geometry of reject case i: the standard one, broken one way. */
static rtomo_cone_geometry broken(int i)
{
    rtomo_cone_geometry g = cone_test_geometry();
    switch (i) {
    case 0: g.sad = 0.0; break;
    case 1: g.sad = NAN; break;
    case 2: g.sdd = g.sad; break;
    case 3: g.sdd = 150.0; break;
    case 4: g.pitch_u = 0.0; break;
    case 5: g.pitch_v = -1.0; break;
    case 6: g.det_u = 1; break;
    case 7: g.voxel = 0.0; break;
    case 8: g.nx = 0; break;
    case 9: g.n_proj = 1; break;
    case 10: g.n_proj = 4; g.angles = bad_order; break;
    case 11: g.angle_step = 3.0 * M_PI / 180.0; break;
    case 12: g.n_proj = 100; g.angle_step = 1.8 * M_PI / 180.0; break;
    case 13: g.offset_u = 30.0; g.n_proj = 120;
             g.angle_step = 1.75 * M_PI / 180.0; break;
    case 14: g.offset_u = 100.0; break;
    case 15: g.det_u = 48; g.offset_u = 45.0; break;
    case 16: g.voxel = 5.0; break;
    case 17: g.nx = g.ny = 100; g.roi_x = g.roi_y = 90; break;
    case 18: g.nz = 400; g.roi_z = 350; break;
    case 19: g.roi_x = 10; g.roi_nx = 60; break;
    case 20: g.cutoff = 1.5; break;
    case 21: g.window = (rtomo_window)99; break;
    }
    return g;
}

START_TEST(test_rejects)
{
    const reject_case *rc = &rejects[_i];
    rtomo_cone_geometry g = broken(_i);
    rtomo_error err;
    ck_assert_int_eq(rtomo_cone_geometry_validate(&g, &err), RTOMO_E_INVALID);
    ck_assert_int_eq(err.code, RTOMO_E_INVALID);
    ck_assert_msg(strstr(err.message, rc->expect) != NULL,
                  "%s: got \"%s\", expected \"%s\"", rc->what, err.message,
                  rc->expect);
    /* create refuses it the same way */
    rtomo_engine_options opt = test_cpu_options(1);
    ck_assert_ptr_null(rtomo_cone_create(&g, &opt, RTOMO_CONE_KERNEL_AUTO,
                                         &err));
    ck_assert_msg(strstr(err.message, rc->expect) != NULL, "%s: create: %s",
                  rc->what, err.message);
}
END_TEST

START_TEST(test_classify)
{
    rtomo_cone_geometry g = cone_test_geometry();
    rtomo_error err;
    ck_assert_int_eq(rtomo_cone_geometry_validate(&g, &err), RTOMO_OK);
    rtomo_cone *c = cone_test_create(&g, RTOMO_BACKEND_CPU,
                                     RTOMO_CONE_KERNEL_AUTO);
    ck_assert_int_eq(rtomo_cone_weighting_of(c), RTOMO_CONE_FULL);
    ck_assert_int_eq(rtomo_cone_volume_size(c), 64 * 64 * 64);
    ck_assert_double_eq_tol(rtomo_cone_geometry_of(c)->angle_step,
                            2.0 * M_PI / 180, 1e-12);
    rtomo_cone_destroy(c);
    /* An offset of one pixel is still a centred detector. */
    g.offset_u = 2.0;
    c = cone_test_create(&g, RTOMO_BACKEND_CPU, RTOMO_CONE_KERNEL_AUTO);
    ck_assert_int_eq(rtomo_cone_weighting_of(c), RTOMO_CONE_FULL);
    rtomo_cone_destroy(c);
    g.offset_u = 2.5;
    c = cone_test_create(&g, RTOMO_BACKEND_CPU, RTOMO_CONE_KERNEL_AUTO);
    ck_assert_int_eq(rtomo_cone_weighting_of(c), RTOMO_CONE_HALF_FAN);
    rtomo_cone_destroy(c);
    /* A ROI is what the plan reconstructs. */
    g = cone_test_geometry();
    g.roi_x = 3;
    g.roi_nx = 5;
    g.roi_z = 60;
    c = cone_test_create(&g, RTOMO_BACKEND_CPU, RTOMO_CONE_KERNEL_AUTO);
    ck_assert_int_eq(rtomo_cone_volume_size(c), 5 * 64 * 4);
    ck_assert_int_eq(rtomo_cone_geometry_of(c)->roi_nz, 4);
    rtomo_cone_destroy(c);
}
END_TEST

/* Parker: the ray (beta, gamma) is also (beta + pi - 2 gamma, -gamma) and
 * (beta - pi - 2 gamma, -gamma); over a scan of pi + 2 delta its weights
 * must add up to 1 for every ray the scan sees. */
START_TEST(test_parker_sums)
{
    const double delta = 0.3;
    double worst = 0.0;
    for (int a = 0; a <= 200; a++) {
        const double beta = (M_PI + 2.0 * delta) * a / 200.0;
        for (int b = -20; b <= 20; b++) {
            const double gamma = delta * b / 20.5;
            double sum = cone_parker(beta, gamma, delta) +
                         cone_parker(beta + M_PI - 2.0 * gamma, -gamma,
                                     delta) +
                         cone_parker(beta - M_PI - 2.0 * gamma, -gamma,
                                     delta);
            worst = fmax(worst, fabs(sum - 1.0));
        }
    }
    ck_assert_double_le(worst, 1e-12);
    /* 0 outside the scan and 1 in its middle */
    ck_assert_double_eq(cone_parker(-0.01, 0.0, delta), 0.0);
    ck_assert_double_eq(cone_parker(M_PI + 2.0 * delta + 0.01, 0.0, delta),
                        0.0);
    ck_assert_double_eq(cone_parker(0.5 * M_PI + delta, 0.1, delta), 1.0);
}
END_TEST

/* A full turn of encoder angles whose closing gap is wider than the
 * others: each projection's interval is half the gaps to its neighbours,
 * across the wrap at the ends, so the intervals add up to the turn. */
START_TEST(test_intervals_wrap)
{
    rtomo_cone_geometry g = cone_test_geometry();
    enum { N = 90 };
    double angles[N];
    for (int p = 0; p < N; p++)
        angles[p] = 0.2 + p * (2.0 * M_PI - 0.02) / N;  /* gap step + 0.02 */
    g.n_proj = N;
    g.angles = angles;
    rtomo_cone *c = cone_test_create(&g, RTOMO_BACKEND_CPU,
                                     RTOMO_CONE_KERNEL_AUTO);
    ck_assert_int_eq(rtomo_cone_weighting_of(c), RTOMO_CONE_FULL);
    double sum = 0.0;
    for (int p = 0; p < N; p++)
        sum += c->dbeta[p];
    const double step = (2.0 * M_PI - 0.02) / N;
    const double closing = 2.0 * M_PI - (N - 1) * step;
    printf("intervals of a full turn with a wide closing gap: sum %.9f "
           "(2 pi %.9f), ends %.6f (step %.6f, closing gap %.6f)\n", sum,
           2.0 * M_PI, c->dbeta[0], step, closing);
    ck_assert_double_eq_tol(sum, 2.0 * M_PI, 1e-12);
    ck_assert_double_eq_tol(c->dbeta[0], 0.5 * (step + closing), 1e-12);
    ck_assert_double_eq_tol(c->dbeta[N - 1], 0.5 * (step + closing), 1e-12);
    rtomo_cone_destroy(c);
}
END_TEST

/* Wang: w(u) + w(-u) = 1 across the band both sides see, 1 beyond it on
 * the detector's long side. */
START_TEST(test_half_fan_sums)
{
    for (int side = -1; side <= 1; side += 2) {
        rtomo_cone_geometry g = cone_test_geometry();
        g.det_u = 48;
        g.offset_u = 30.0 * side;
        rtomo_cone *c = cone_test_create(&g, RTOMO_BACKEND_CPU,
                                         RTOMO_CONE_KERNEL_AUTO);
        ck_assert_int_eq(rtomo_cone_weighting_of(c), RTOMO_CONE_HALF_FAN);
        /* the band: |u| <= 17 mm (the short side's last column) */
        for (int i = 0; i <= 34; i++) {
            double u = -17.0 + i;
            double sum = cone_redundancy(c, 5, u) + cone_redundancy(c, 5, -u);
            ck_assert_double_eq_tol(sum, 1.0, 1e-12);
        }
        ck_assert_double_eq(cone_redundancy(c, 0, 40.0 * side), 1.0);
        ck_assert_double_eq_tol(cone_redundancy(c, 0, -17.0 * side), 0.0,
                                1e-12);
        rtomo_cone_destroy(c);
    }
}
END_TEST

START_TEST(test_names)
{
    rtomo_cone_kernel k;
    ck_assert_int_eq(rtomo_cone_kernel_parse("texture", &k), RTOMO_OK);
    ck_assert_int_eq(k, RTOMO_CONE_KERNEL_TEXTURE);
    ck_assert_int_eq(rtomo_cone_kernel_parse("alu", &k), RTOMO_OK);
    ck_assert_int_eq(k, RTOMO_CONE_KERNEL_ALU);
    ck_assert_int_eq(rtomo_cone_kernel_parse("fast", &k), RTOMO_E_INVALID);
    ck_assert_str_eq(rtomo_cone_kernel_name(RTOMO_CONE_KERNEL_AUTO), "auto");
    ck_assert_str_eq(rtomo_cone_weighting_name(RTOMO_CONE_SHORT_SCAN),
                     "short_scan");
    rtomo_cone_geometry g = cone_test_geometry();
    rtomo_error err;
    ck_assert_ptr_null(rtomo_cone_create(&g, NULL, (rtomo_cone_kernel)7,
                                         &err));
    ck_assert_ptr_nonnull(strstr(err.message, "unknown cone kernel 7"));
}
END_TEST

/* What a plan would hold: at least its volume and slots, the CPU's on the
 * host, the GPU's on the device; an invalid geometry says why. */
START_TEST(test_bytes)
{
    rtomo_cone_geometry g = cone_test_geometry();
    size_t host = 0, device = 1;
    rtomo_error err;
    const size_t volume = 64 * 64 * 64 * sizeof(float);
    const size_t slots = 33 * 80 * 64 * sizeof(float);
    ck_assert_int_eq(rtomo_cone_bytes(&g, RTOMO_BACKEND_CPU, &host, &device,
                                      &err), RTOMO_OK);
    ck_assert_uint_ge(host, volume + slots);
    ck_assert_uint_le(host, 2 * (volume + slots));
    ck_assert_uint_eq(device, 0);
    ck_assert_int_eq(rtomo_cone_bytes(&g, RTOMO_BACKEND_CUDA, &host, &device,
                                      &err), RTOMO_OK);
    ck_assert_uint_ge(device, volume + slots);
    ck_assert_uint_le(device, 3 * (volume + slots));
    /* a ROI holds less */
    g.roi_z = 32;
    size_t roi_device = 0;
    ck_assert_int_eq(rtomo_cone_bytes(&g, RTOMO_BACKEND_CUDA, NULL,
                                      &roi_device, &err), RTOMO_OK);
    ck_assert_uint_lt(roi_device, device);
    g.sdd = 100.0;
    ck_assert_int_eq(rtomo_cone_bytes(&g, RTOMO_BACKEND_CPU, &host, NULL,
                                      &err), RTOMO_E_INVALID);
    ck_assert_ptr_nonnull(strstr(err.message, "is not beyond sad"));
    g = cone_test_geometry();
    ck_assert_int_eq(rtomo_cone_bytes(&g, RTOMO_BACKEND_AUTO, &host, NULL,
                                      &err), RTOMO_E_INVALID);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cone_geometry");
    TCase *tc = tcase_create("geometry");
    tcase_add_loop_test(tc, test_rejects, 0, N_REJECTS);
    tcase_add_test(tc, test_classify);
    tcase_add_test(tc, test_parker_sums);
    tcase_add_test(tc, test_half_fan_sums);
    tcase_add_test(tc, test_intervals_wrap);
    tcase_add_test(tc, test_names);
    tcase_add_test(tc, test_bytes);
    suite_add_tcase(s, tc);
    return rtomo_check_run(s);
}
