/*
 * test_iter_projector.c — the iterative engine's matched pair on the CPU:
 * A^T is A's transpose (<A x, y> = <x, A^T y>) over odd and even sizes,
 * irregular angles, an off-centre axis, per-projection axis shifts and
 * slice sizes other than the detector's; A of a disc gives its line
 * integrals (and so, less exactly, does the unmatched ray-driven
 * projector kept for measurements); and the speed of both (printed).
 */
#include "config.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rtomo_engine.h"
#include "check_run.h"
#include "test_iter_cases.h"
#include "test_util.h"

static double dot(const float *a, const float *b, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += (double)a[i] * b[i];
    return s;
}

static rtomo_iter *create_cpu(const rtomo_fbp_geometry *g)
{
    rtomo_engine_options opt = test_cpu_options(0);
    rtomo_error err;
    rtomo_iter *it = rtomo_iter_create(g, &opt, &err);
    ck_assert_msg(it != NULL, "rtomo_iter_create: %s", err.message);
    ck_assert_int_eq(rtomo_iter_backend(it), RTOMO_BACKEND_CPU);
    return it;
}

/* ------------------------------------------------------- adjointness ---- */

START_TEST(test_adjoint)
{
    const pair_case *c = &iter_cases[_i];
    uint64_t seed = test_seed(0xad1, _i);
    pair_data d;
    pair_setup(c, &seed, &d);
    rtomo_iter *it = create_cpu(&d.g);
    const size_t ni = d.ni, ns = d.ns;
    float *x = malloc(sizeof(float) * ni), *atx = malloc(sizeof(float) * ni);
    float *y = malloc(sizeof(float) * ns), *ax = malloc(sizeof(float) * ns);
    rtomo_error err;
    /* Positive data (inner products far from 0, so the relative figure
     * means something), then signed data against the norms. */
    for (int signed_data = 0; signed_data < 2; signed_data++) {
        if (signed_data) {
            test_fill_normal(&seed, x, ni);
            test_fill_normal(&seed, y, ns);
        } else {
            test_fill_uniform(&seed, x, ni, 0.0, 1.0);
            test_fill_uniform(&seed, y, ns, 0.0, 1.0);
        }
        test_poison(ax, ns);
        test_poison(atx, ni);
        ck_assert_msg(rtomo_iter_project(it, x, c->rows, ax, &err) == RTOMO_OK,
                      "%s", err.message);
        ck_assert_msg(rtomo_iter_backproject(it, y, c->rows, atx, &err) ==
                      RTOMO_OK, "%s", err.message);
        double lhs = dot(ax, y, ns), rhs = dot(x, atx, ni);
        double scale = signed_data
                           ? sqrt(dot(ax, ax, ns) * dot(y, y, ns))
                           : fabs(lhs);
        double rel = fabs(lhs - rhs) / scale;
        fprintf(stderr, "adjoint %-40s %s: <Ax,y> %.9g <x,A^Ty> %.9g "
                "rel %.2e\n", c->what, signed_data ? "signed" : "positive",
                lhs, rhs, rel);
        ck_assert_msg(rel <= 1e-5, "%s: <Ax,y> = %.9g, <x,A^T y> = %.9g, "
                      "relative difference %.3g", c->what, lhs, rhs, rel);
    }
    free(x); free(atx); free(y); free(ax);
    pair_free(&d);
    rtomo_iter_destroy(it);
}
END_TEST

/* Rows of a batch are independent: row 1 of a two-row batch is the
 * one-row result of row 1's data. */
START_TEST(test_rows_independent)
{
    uint64_t seed = test_seed(0xb0b, 0);
    rtomo_fbp_geometry g = test_fbp_geometry(40, 2, 20);
    g.slice_size = 36;
    rtomo_iter *it = create_cpu(&g);
    size_t ni = 36 * 36, ns = 20 * 40;
    float x[2 * 36 * 36], ax[2 * 20 * 40], one[20 * 40];
    test_fill_uniform(&seed, x, 2 * ni, 0.0, 1.0);
    rtomo_error err;
    ck_assert(rtomo_iter_project(it, x, 2, ax, &err) == RTOMO_OK);
    ck_assert(rtomo_iter_project(it, x + ni, 1, one, &err) == RTOMO_OK);
    ck_assert(test_max_abs_diff(ax + ns, one, ns) == 0.0);
    rtomo_iter_destroy(it);
}
END_TEST

/* ------------------------------------------------------------ a disc ---- */

/* Area of the unit pixel centred at (px, py) inside the disc of radius r
 * at the origin, by 16 x 16 subsamples. */
static double pixel_cover(double px, double py, double r)
{
    double d = sqrt(px * px + py * py);
    if (d > r + 0.75)
        return 0.0;
    if (d < r - 0.75)
        return 1.0;
    int in = 0;
    for (int a = 0; a < 16; a++)
        for (int b = 0; b < 16; b++) {
            double x = px - 0.5 + (a + 0.5) / 16, y = py - 0.5 + (b + 0.5) / 16;
            in += x * x + y * y <= r * r;
        }
    return in / 256.0;
}

/* The mean over bin [s - 1/2, s + 1/2] of 2 mu sqrt(r^2 - t^2), t the
 * distance from the disc's centre: the chord's integral in closed form. */
static double disc_bin(double t, double r, double mu)
{
    double lo = t - 0.5, hi = t + 0.5;
    if (lo < -r) lo = -r;
    if (hi > r) hi = r;
    if (hi <= lo)
        return 0.0;
    /* int sqrt(r^2 - u^2) du = (u sqrt(r^2-u^2) + r^2 asin(u/r)) / 2 */
#define PRIM(u) (0.5 * ((u) * sqrt(fmax(r * r - (u) * (u), 0.0)) + \
                        r * r * asin(fmax(-1.0, fmin(1.0, (u) / r)))))
    return 2.0 * mu * (PRIM(hi) - PRIM(lo));
#undef PRIM
}

START_TEST(test_disc)
{
    const int W = 256, N = 256, NP = 90;
    const double r = 80.0, mu = 0.01, cx = 12.0, cy = -7.0;
    rtomo_fbp_geometry g = test_fbp_geometry(W, 1, NP);
    g.axis = 0.5 * (W - 1) + 2.25;  /* off-centre */
    rtomo_iter *it = create_cpu(&g);
    float *img = malloc(sizeof(float) * N * N);
    float *sino = malloc(sizeof(float) * NP * W);
    float *ref = malloc(sizeof(float) * NP * W);
    double c = 0.5 * (N - 1);
    for (int y = 0; y < N; y++)
        for (int x = 0; x < N; x++)
            img[y * N + x] = (float)(mu * pixel_cover(x - c - cx,
                                                      y - c - cy, r));
    rtomo_error err;
    ck_assert(rtomo_iter_project(it, img, 1, sino, &err) == RTOMO_OK);
    double peak = 2 * mu * r, worst = 0.0, worst_in = 0.0;
    for (int p = 0; p < NP; p++) {
        double a = p * M_PI / NP;
        double sd = g.axis + cx * cos(a) - cy * sin(a);
        for (int j = 0; j < W; j++) {
            double want = disc_bin(j - sd, r, mu);
            ref[p * W + j] = (float)want;
            double e = fabs(sino[p * W + j] - want) / peak;
            if (e > worst)
                worst = e;
            if (fabs(j - sd) < r - 2 && e > worst_in)
                worst_in = e;
        }
    }
    double rel = test_rel_l2(sino, ref, (size_t)NP * W);
    fprintf(stderr, "disc r=%g: relative L2 %.2e, max error %.2e of the "
            "peak (%.2e more than 2 bins inside the edge)\n", r, rel, worst,
            worst_in);
    /* What is left is the pixelated edge of the disc (area-weighted
     * pixels against the round disc: up to about half a pixel of mu at
     * each end of a chord, 1/(2 r) = 6e-3 of the peak); a pixel-driven
     * (sampled) footprint would ripple by 10% at 45 degrees. */
    ck_assert_msg(rel < 3e-3, "disc: relative L2 %.3g", rel);
    ck_assert_msg(worst < 2e-2, "disc: max error %.3g of the peak", worst);
    ck_assert_msg(worst_in < 6e-3, "disc: inside max error %.3g", worst_in);
    /* The unmatched ray-driven projector (the measurements' baseline)
     * gives the same line integrals, less exactly: bilinear samples at
     * unit steps blur the edge and alias along the ray. */
    ck_assert(rtomo_iter_project_ray(it, img, 1, sino, &err) == RTOMO_OK);
    double rel_ray = test_rel_l2(sino, ref, (size_t)NP * W);
    fprintf(stderr, "disc r=%g, ray-driven projector: relative L2 %.2e\n", r,
            rel_ray);
    ck_assert_msg(rel_ray < 5e-3, "disc, ray-driven: relative L2 %.3g",
                  rel_ray);
    free(img); free(sino); free(ref);
    rtomo_iter_destroy(it);
}
END_TEST

/* ------------------------------------------------------------- speed ---- */

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

START_TEST(test_speed)
{
    const int N = 256, NP = 256;
    rtomo_fbp_geometry g = test_fbp_geometry(N, 1, NP);
    rtomo_iter *it = create_cpu(&g);
    uint64_t seed = test_seed(0x5ee, 0);
    float *img = malloc(sizeof(float) * N * N);
    float *sino = malloc(sizeof(float) * NP * N);
    test_fill_uniform(&seed, img, (size_t)N * N, 0.0, 1.0);
    rtomo_error err;
    double up = (double)N * N * NP;
    double best_a = 1e30, best_at = 1e30;
    for (int rep = 0; rep < 3; rep++) {
        double t = now();
        ck_assert(rtomo_iter_project(it, img, 1, sino, &err) == RTOMO_OK);
        double t1 = now();
        ck_assert(rtomo_iter_backproject(it, sino, 1, img, &err) == RTOMO_OK);
        double t2 = now();
        if (t1 - t < best_a) best_a = t1 - t;
        if (t2 - t1 < best_at) best_at = t2 - t1;
    }
    fprintf(stderr, "speed %d^2 x %d angles, %d threads: A %.3f GU/s "
            "(%.1f ms), A^T %.3f GU/s (%.1f ms)\n", N, NP,
            test_cpu_options(0).cpu_threads, up / best_a * 1e-9,
            best_a * 1e3, up / best_at * 1e-9, best_at * 1e3);
    free(img); free(sino);
    rtomo_iter_destroy(it);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("iter_projector");
    TCase *tc = tcase_create("cpu");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_adjoint, 0, ITER_N_CASES);
    tcase_add_test(tc, test_rows_independent);
    tcase_add_test(tc, test_disc);
    tcase_add_test(tc, test_speed);
    suite_add_tcase(s, tc);
    return rtomo_check_run(s);
}
