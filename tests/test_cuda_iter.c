/*
 * test_cuda_iter.c — the iterative engine's CUDA backend: its matched pair
 * is A's transpose on the GPU (<A x, y> = <x, A^T y> within 1e-5 relative
 * over odd and even sizes, irregular angles, off-centre axes, per-
 * projection shifts, slices other than the detector, row counts that are
 * not a multiple of the 4 rows a thread carries); GPU A and A^T equal the
 * CPU's (the same float weights, only the order of the sums differs:
 * within 1e-5 relative L2); SIRT and CGLS on a sparse-angle phantom give
 * the CPU's images (within 1e-4 relative L2: SIRT after 20 iterations,
 * CGLS after 10, 1e-2 after 20 as rounding grows with its iterations; see
 * SOLVE_BOUND) and CGLS's residual falls monotonically;
 * and the speed of A and A^T (printed, GU/s).
 *
 * Exits 77 (skipped) without a GPU.  The speed test takes its size from
 * RTOMO_ITER_BENCH="size,slices,angles" (default 512,8,512); the issue's
 * benchmark is RTOMO_ITER_BENCH=2048,64,2048 (targets on one H100: >= 1500
 * GU/s for A and for A^T, one CGLS iteration of the 64 slices <= 0.8 s).
 */
#include "config.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rtomo_engine.h"
#include "rtomo_sim.h"
#include "test_cuda_fbp_common.h"
#include "test_iter_cases.h"

static double dot(const float *a, const float *b, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += (double)a[i] * b[i];
    return s;
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

static rtomo_iter *create(const rtomo_fbp_geometry *g, rtomo_backend backend)
{
    rtomo_engine_options opt;
    if (backend == RTOMO_BACKEND_CPU) {
        opt = test_cpu_options(0);
    } else {
        rtomo_engine_options_init(&opt);
        opt.backend = RTOMO_BACKEND_CUDA;
    }
    rtomo_error err;
    rtomo_iter *it = rtomo_iter_create(g, &opt, &err);
    ck_assert_msg(it != NULL, "rtomo_iter_create (%s): %s",
                  backend == RTOMO_BACKEND_CPU ? "cpu" : "cuda", err.message);
    ck_assert_int_eq(rtomo_iter_backend(it), backend);
    return it;
}

/* ------------------------------------------------------- adjointness ---- */

START_TEST(test_adjoint)
{
    const pair_case *c = &iter_cases[_i];
    uint64_t seed = test_seed(0xc0ad, _i);
    pair_data d;
    pair_setup(c, &seed, &d);
    rtomo_iter *it = create(&d.g, RTOMO_BACKEND_CUDA);
    float *x = malloc(sizeof(float) * d.ni), *atx = malloc(sizeof(float) * d.ni);
    float *y = malloc(sizeof(float) * d.ns), *ax = malloc(sizeof(float) * d.ns);
    ck_assert(x && atx && y && ax);
    rtomo_error err;
    for (int signed_data = 0; signed_data < 2; signed_data++) {
        if (signed_data) {
            test_fill_normal(&seed, x, d.ni);
            test_fill_normal(&seed, y, d.ns);
        } else {
            test_fill_uniform(&seed, x, d.ni, 0.0, 1.0);
            test_fill_uniform(&seed, y, d.ns, 0.0, 1.0);
        }
        test_poison(ax, d.ns);
        test_poison(atx, d.ni);
        ck_assert_msg(rtomo_iter_project(it, x, c->rows, ax, &err) == RTOMO_OK,
                      "%s", err.message);
        ck_assert_msg(rtomo_iter_backproject(it, y, c->rows, atx, &err) ==
                      RTOMO_OK, "%s", err.message);
        double lhs = dot(ax, y, d.ns), rhs = dot(x, atx, d.ni);
        double scale = signed_data ? sqrt(dot(ax, ax, d.ns) * dot(y, y, d.ns))
                                   : fabs(lhs);
        double rel = fabs(lhs - rhs) / scale;
        fprintf(stderr, "gpu adjoint %-38s %s: <Ax,y> %.9g <x,A^Ty> %.9g "
                "rel %.2e\n", c->what, signed_data ? "signed  " : "positive",
                lhs, rhs, rel);
        ck_assert_msg(rel <= 1e-5, "%s: <Ax,y> = %.9g, <x,A^T y> = %.9g, "
                      "relative difference %.3g", c->what, lhs, rhs, rel);
    }
    free(x); free(atx); free(y); free(ax);
    pair_free(&d);
    rtomo_iter_destroy(it);
}
END_TEST

/* ------------------------------------------------------ against CPU ---- */

/* The same weights on both backends (iter_sf_weights on the same float
 * centre): the results differ only by the order of the float sums, a few
 * units in the last place per bin or pixel. */
#define CPU_BOUND 1e-5
#define RAY_BOUND 1e-2

START_TEST(test_against_cpu)
{
    const pair_case *c = &iter_cases[_i];
    uint64_t seed = test_seed(0xc0c9, _i);
    pair_data d;
    pair_setup(c, &seed, &d);
    rtomo_iter *gpu = create(&d.g, RTOMO_BACKEND_CUDA);
    rtomo_iter *cpu = create(&d.g, RTOMO_BACKEND_CPU);
    float *x = malloc(sizeof(float) * d.ni), *y = malloc(sizeof(float) * d.ns);
    float *ag = malloc(sizeof(float) * d.ns), *ac = malloc(sizeof(float) * d.ns);
    float *bg = malloc(sizeof(float) * d.ni), *bc = malloc(sizeof(float) * d.ni);
    ck_assert(x && y && ag && ac && bg && bc);
    test_fill_normal(&seed, x, d.ni);
    test_fill_normal(&seed, y, d.ns);
    test_poison(ag, d.ns);
    test_poison(bg, d.ni);
    rtomo_error err;
    ck_assert_msg(rtomo_iter_project(gpu, x, c->rows, ag, &err) == RTOMO_OK,
                  "%s", err.message);
    ck_assert_msg(rtomo_iter_project(cpu, x, c->rows, ac, &err) == RTOMO_OK,
                  "%s", err.message);
    ck_assert_msg(rtomo_iter_backproject(gpu, y, c->rows, bg, &err) ==
                  RTOMO_OK, "%s", err.message);
    ck_assert_msg(rtomo_iter_backproject(cpu, y, c->rows, bc, &err) ==
                  RTOMO_OK, "%s", err.message);
    double ea = test_rel_l2(ag, ac, d.ns), eb = test_rel_l2(bg, bc, d.ni);
    fprintf(stderr, "gpu vs cpu %-38s: A %.2e, A^T %.2e (relative L2)\n",
            c->what, ea, eb);
    ck_assert_msg(ea <= CPU_BOUND, "%s: A differs from the CPU's by %.3g",
                  c->what, ea);
    ck_assert_msg(eb <= CPU_BOUND, "%s: A^T differs from the CPU's by %.3g",
                  c->what, eb);
    /* The unmatched ray-driven projector (the measurements' baseline):
     * the texture unit interpolates with 8-bit weights, the CPU in float,
     * so they agree to about 1e-3 on noise. */
    ck_assert_msg(rtomo_iter_project_ray(gpu, x, c->rows, ag, &err) ==
                  RTOMO_OK, "%s", err.message);
    ck_assert_msg(rtomo_iter_project_ray(cpu, x, c->rows, ac, &err) ==
                  RTOMO_OK, "%s", err.message);
    double er = test_rel_l2(ag, ac, d.ns);
    fprintf(stderr, "gpu vs cpu %-38s: ray-driven projector %.2e\n",
            c->what, er);
    ck_assert_msg(er <= RAY_BOUND, "%s: the ray-driven projector differs "
                  "from the CPU's by %.3g", c->what, er);
    free(x); free(y); free(ag); free(ac); free(bg); free(bc);
    pair_free(&d);
    rtomo_iter_destroy(gpu);
    rtomo_iter_destroy(cpu);
}
END_TEST

/* ------------------------------------------------------------ solves ---- */

#define SN 256          /* slice and detector */
#define SNP 60          /* sparse angles */
#define SROWS 3
/* GPU and CPU differ in the order of float sums (a few 1e-7 relative per
 * A or A^T, see test_against_cpu); the solvers carry that forward.  SIRT
 * damps it (measured on an H100: 2e-7 after 20 iterations).  CGLS
 * amplifies it, as any Krylov method in float does once its search
 * directions lose orthogonality on this ill-posed problem: its images
 * agree within 1e-4 up to about 10 iterations and drift apart slowly
 * after (1e-3 relative L2 after 20, where the residuals still agree to
 * 5e-3); both runs are equally good solutions. */
#define SOLVE_BOUND 1e-4

typedef struct history {
    int n;
    double r[64];
} history;

static int record(void *ctx, int k, double r, const float *images)
{
    history *h = ctx;
    (void)images;
    if (h->n < 64)
        h->r[h->n++] = r;
    (void)k;
    return 0;
}

static void solve_case(rtomo_iter_method method, int nonneg, int iterations,
                       double bound)
{
    rtomo_phantom ph;
    rtomo_phantom_init(&ph, SN, 64);
    rtomo_fbp_geometry g = test_fbp_geometry(SN, SROWS, SNP);
    const size_t ns = (size_t)SROWS * SNP * SN, ni = (size_t)SROWS * SN * SN;
    float *sino = malloc(sizeof(float) * ns);
    float *xg = malloc(sizeof(float) * ni), *xc = malloc(sizeof(float) * ni);
    ck_assert(sino && xg && xc);
    static const int rows[SROWS] = {20, 32, 45};
    for (int r = 0; r < SROWS; r++)
        for (int p = 0; p < SNP; p++)
            rtomo_phantom_project_row(&ph, rows[r], p * M_PI / SNP,
                                      sino + ((size_t)r * SNP + p) * SN);

    rtomo_iter *gpu = create(&g, RTOMO_BACKEND_CUDA);
    rtomo_iter *cpu = create(&g, RTOMO_BACKEND_CPU);
    rtomo_iter_options o;
    rtomo_iter_options_init(&o);
    o.method = method;
    o.iterations = iterations;
    o.nonnegative = nonneg;
    rtomo_iter_result rg, rc;
    rtomo_error err;
    history hg = {0}, hc = {0};
    o.progress = record;
    o.ctx = &hg;
    ck_assert_msg(rtomo_iter_solve(gpu, sino, SROWS, xg, 0, &o, &rg, &err) ==
                  RTOMO_OK, "gpu solve: %s", err.message);
    o.ctx = &hc;
    ck_assert_msg(rtomo_iter_solve(cpu, sino, SROWS, xc, 0, &o, &rc, &err) ==
                  RTOMO_OK, "cpu solve: %s", err.message);
    double e = test_rel_l2(xg, xc, ni);
    double er = fabs(rg.residual - rc.residual) / rc.residual;
    fprintf(stderr, "%s%s %d^2 x %d angles x %d rows, %d iterations: gpu vs "
            "cpu images %.2e, residual gpu %.6g cpu %.6g (%.2e); gpu %.3f s "
            "(A %.3f, A^T %.3f), cpu %.3f s\n",
            rtomo_iter_method_name(method), nonneg ? "+" : "", SN, SNP,
            SROWS, iterations, e, rg.residual, rc.residual, er, rg.seconds,
            rg.project_seconds, rg.backproject_seconds, rc.seconds);
    fprintf(stderr, "  residuals gpu/cpu - 1 at iterations 1, 2, 5, 10, 20:");
    static const int at[] = {1, 2, 5, 10, 20};
    for (int k = 0; k < 5; k++)
        if (at[k] <= hg.n)
            fprintf(stderr, " %.1e", hg.r[at[k] - 1] / hc.r[at[k] - 1] - 1);
    fprintf(stderr, "\n");
    ck_assert_int_eq(rg.iterations, iterations);
    ck_assert_int_eq(hg.n, iterations);
    ck_assert_msg(e <= bound, "images differ from the CPU's by %.3g", e);
    ck_assert_msg(er <= bound, "residuals differ by %.3g", er);
    if (method == RTOMO_ITER_CGLS)
        for (int k = 1; k < hg.n; k++)
            ck_assert_msg(hg.r[k] <= hg.r[k - 1] * (1 + 1e-6),
                          "CGLS residual rose at iteration %d: %.9g -> %.9g",
                          k + 1, hg.r[k - 1], hg.r[k]);
    free(sino); free(xg); free(xc);
    rtomo_iter_destroy(gpu);
    rtomo_iter_destroy(cpu);
}

START_TEST(test_sirt) { solve_case(RTOMO_ITER_SIRT, 0, 20, SOLVE_BOUND); }
END_TEST
START_TEST(test_sirt_nonneg) { solve_case(RTOMO_ITER_SIRT, 1, 20, SOLVE_BOUND); }
END_TEST
START_TEST(test_cgls) { solve_case(RTOMO_ITER_CGLS, 0, 10, SOLVE_BOUND); }
END_TEST
/* 20 iterations: the drift above, bounded loosely. */
START_TEST(test_cgls_long) { solve_case(RTOMO_ITER_CGLS, 0, 20, 1e-2); }
END_TEST

/* ------------------------------------------------------------- speed ---- */

START_TEST(test_speed)
{
    int N = 512, S = 8, NP = 512;
    const char *env = getenv("RTOMO_ITER_BENCH");
    if (env && *env)
        ck_assert_msg(sscanf(env, "%d,%d,%d", &N, &S, &NP) == 3 && N >= 8 &&
                      S >= 1 && NP >= 1,
                      "RTOMO_ITER_BENCH=%s: expected size,slices,angles", env);
    rtomo_fbp_geometry g = test_fbp_geometry(N, S, NP);
    rtomo_iter *it = create(&g, RTOMO_BACKEND_CUDA);
    const size_t ni = (size_t)S * N * N, ns = (size_t)S * NP * N;
    float *img = malloc(sizeof(float) * ni), *sino = malloc(sizeof(float) * ns);
    ck_assert(img && sino);
    uint64_t seed = test_seed(0x5eed, 0);
    test_fill_uniform(&seed, img, ni, 0.0, 1.0);
    rtomo_error err;
    /* The public calls include the uploads and downloads: the solver's
     * own timing (below) is the operators on device-resident vectors. */
    double up = (double)S * N * N * NP;
    double best_a = 1e30, best_at = 1e30;
    for (int rep = 0; rep < 2; rep++) {
        double t = now();
        ck_assert_msg(rtomo_iter_project(it, img, S, sino, &err) == RTOMO_OK,
                      "%s", err.message);
        double t1 = now();
        ck_assert_msg(rtomo_iter_backproject(it, sino, S, img, &err) ==
                      RTOMO_OK, "%s", err.message);
        double t2 = now();
        if (t1 - t < best_a) best_a = t1 - t;
        if (t2 - t1 < best_at) best_at = t2 - t1;
    }
    fprintf(stderr, "gpu speed %d^2 x %d slices x %d angles, with transfers: "
            "A %.1f GU/s (%.1f ms), A^T %.1f GU/s (%.1f ms)\n", N, S, NP,
            up / best_a * 1e-9, best_a * 1e3, up / best_at * 1e-9,
            best_at * 1e3);
    /* The unmatched projector one would write first, the same way. */
    double best_ray = 1e30;
    for (int rep = 0; rep < 2; rep++) {
        double t = now();
        ck_assert_msg(rtomo_iter_project_ray(it, img, S, sino, &err) ==
                      RTOMO_OK, "%s", err.message);
        if (now() - t < best_ray)
            best_ray = now() - t;
    }
    fprintf(stderr, "gpu speed, unmatched ray-driven projector (texture), "
            "with transfers: %.1f GU/s (%.1f ms)\n", up / best_ray * 1e-9,
            best_ray * 1e3);

    /* A with one projection per block (the kernel before neighbouring
     * projections shared their pixels), in the same run. */
    setenv("RTOMO_CUDA_ITER_SINGLE", "1", 1);
    rtomo_iter *single = create(&g, RTOMO_BACKEND_CUDA);
    unsetenv("RTOMO_CUDA_ITER_SINGLE");
    float *sino1 = malloc(sizeof(float) * ns);
    ck_assert(sino1);
    double best_single = 1e30;
    for (int rep = 0; rep < 2; rep++) {
        double t = now();
        ck_assert_msg(rtomo_iter_project(single, img, S, sino1, &err) ==
                      RTOMO_OK, "%s", err.message);
        if (now() - t < best_single)
            best_single = now() - t;
    }
    ck_assert_msg(rtomo_iter_project(it, img, S, sino, &err) == RTOMO_OK,
                  "%s", err.message);
    fprintf(stderr, "gpu speed, A one projection per block, with transfers: "
            "%.1f GU/s (%.1f ms); the same sinograms: max difference %.3g\n",
            up / best_single * 1e-9, best_single * 1e3,
            test_max_abs_diff(sino, sino1, ns));
    /* The same pixels, weights and order of sums: equal to the bit unless
     * the compiler contracted a weight's float operations differently. */
    ck_assert(test_max_abs_diff(sino, sino1, ns) <=
              1e-6 * test_max_abs(sino1, ns));
    free(sino1);
    rtomo_iter_destroy(single);

    /* Two CGLS iterations on device vectors: its start costs one A and
     * one A^T more, so 3 of each. */
    rtomo_iter_options o;
    rtomo_iter_options_init(&o);
    o.method = RTOMO_ITER_CGLS;
    o.iterations = 2;
    rtomo_iter_result r;
    ck_assert_msg(rtomo_iter_solve(it, sino, S, img, 0, &o, &r, &err) ==
                  RTOMO_OK, "%s", err.message);
    const int applied = r.iterations + 1;
    fprintf(stderr, "gpu cgls %d^2 x %d slices x %d angles: %d iterations "
            "%.3f s in all (uploads included); on device vectors A %.1f ms "
            "(%.1f GU/s), A^T %.1f ms (%.1f GU/s), %.3f s per iteration of "
            "A + A^T\n", N, S, NP, r.iterations, r.seconds,
            1e3 * r.project_seconds / applied,
            up * applied / r.project_seconds * 1e-9,
            1e3 * r.backproject_seconds / applied,
            up * applied / r.backproject_seconds * 1e-9,
            (r.project_seconds + r.backproject_seconds) / applied);
    free(img); free(sino);
    rtomo_iter_destroy(it);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cuda_iter");
    TCase *tc = tcase_create("gpu");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, test_adjoint, 0, ITER_N_CASES);
    tcase_add_loop_test(tc, test_against_cpu, 0, ITER_N_CASES);
    tcase_add_test(tc, test_sirt);
    tcase_add_test(tc, test_sirt_nonneg);
    tcase_add_test(tc, test_cgls);
    tcase_add_test(tc, test_cgls_long);
    tcase_add_test(tc, test_speed);
    suite_add_tcase(s, tc);
    return test_run_gpu_suite(s);
}
