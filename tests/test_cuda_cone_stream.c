/*
 * test_cuda_cone_stream.c — the cone SF pair streamed through the GPU
 * (cuda_cone_sf_stream.cu: host vectors, z slabs) against the resident
 * pair on GPU 0, on data drawn fresh every run (RTOMO_TEST_SEED replays
 * one):
 *   - A and A^T on signed random data within STREAM_BOUND relative L2 of
 *     the resident pair's, and adjoint within 1e-5, over slab sizes that
 *     do not divide nz, one slice a slab, one slab for the whole ROI,
 *     odd sizes with an off-centre ROI, a wide cone with a row offset,
 *     slabs that miss the detector, a half fan, and the first kernels;
 *     the slab count the plan reports is the one asked for;
 *   - the sphere phantom (A of its voxels, A^T of its exact projections);
 *   - SIRT (nonnegative, warm start) and CGLS streamed against resident
 *     (STREAM_SOLVE_BOUND);
 *   - the budget decides: a budget a third of the resident solve's
 *     streams (and agrees), a large one stays resident, one too small
 *     for a slice is refused with RTOMO_E_NOMEM naming what a slice
 *     needs;
 *   - timings only when asked: RTOMO_CONE_SF_STREAM_BENCH=
 *     "N,NP,DU,DV,G1[,G2]" (the paper's configuration: 1024,1024,1536,
 *     1152,G1) times one CGLS iteration's A and A^T resident, streamed
 *     within G1 GiB, streamed with the copies and host adds only (no
 *     kernels: how much of the transfers the kernels hide), and streamed
 *     within G2 GiB; RTOMO_CONE_SF_STREAM_BIG=
 *     "N,NP,DU,DV" runs one A and one A^T of a volume whose resident solve
 *     does not fit (the automatic choice must stream it); each in a case
 *     of its own (CK_RUN_CASE=bench, CK_RUN_CASE=big).
 * Exits 77 (skipped) without a GPU.
 */
#include "config.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cone_iter.h"
#include "test_cone_support.h"
#include "test_cuda_fbp_common.h"

/* The streamed pair's slabs are the split pair's windows and kernels:
 * the same rounding as SLAB_BOUND of test_cuda_cone.c (1.0e-6 measured
 * there for A; the atomic sums' order changes from run to run). */
#define STREAM_BOUND 1e-5
#define ADJOINT_BOUND 1e-5
/* SIRT (10 iterations) and CGLS (6): the pairs' differences carried
 * through the iterations (host dots and GPU dots sum in other orders). */
#define STREAM_SOLVE_BOUND 1e-4

/* A GPU pair on GPU 0: streamed in slabs of `slices` (0: resident, unless
 * the budget says otherwise), kernels "old" or the default. */
static rtomo_iter *create(const rtomo_cone_geometry *g, int slices,
                          size_t budget, const char *kernels,
                          rtomo_error *err)
{
    char k[16];
    snprintf(k, sizeof k, "%d", slices);
    char *hook = test_swap_env("RTOMO_CONE_SF_STREAM", slices ? k : NULL);
    char *kern = test_swap_env("RTOMO_CONE_SF_KERNEL", kernels);
    rtomo_engine_options opt;
    rtomo_engine_options_init(&opt);
    opt.backend = RTOMO_BACKEND_CUDA;
    opt.n_devices = 1;
    opt.device_ids[0] = 0;
    opt.device_budget = budget;
    rtomo_iter *it = rtomo_cone_iter_create(g, &opt, err);
    test_restore_env("RTOMO_CONE_SF_STREAM", hook);
    test_restore_env("RTOMO_CONE_SF_KERNEL", kern);
    return it;
}

static rtomo_iter *create_ok(const rtomo_cone_geometry *g, int slices,
                             size_t budget, const char *kernels)
{
    rtomo_error err;
    rtomo_iter *it = create(g, slices, budget, kernels, &err);
    ck_assert_msg(it != NULL, "rtomo_cone_iter_create: %s", err.message);
    return it;
}

static int roi_nz(const rtomo_cone_geometry *g)
{
    return g->roi_nz ? g->roi_nz : g->nz - g->roi_z;
}

static double dot(const float *a, const float *b, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += (double)a[i] * b[i];
    return s;
}

static float *random_data(uint64_t *seed, size_t n)
{
    float *a = malloc(sizeof(float) * n);
    ck_assert_ptr_nonnull(a);
    test_fill_uniform(seed, a, n, -1.0, 1.0);
    return a;
}

/* A x and A^T y of the two plans: relative L2 of the second against the
 * first into ea, eb; the second's adjointness into adj. */
static void compare(rtomo_iter *ref, rtomo_iter *streamed,
                    const rtomo_cone_geometry *g, const float *x,
                    const float *y, double *ea, double *eb, double *adj)
{
    const size_t nv = cone_test_roi_voxels(g);
    const size_t ns = (size_t)g->n_proj * g->det_u * g->det_v;
    float *a1 = malloc(sizeof(float) * ns), *a2 = malloc(sizeof(float) * ns);
    float *b1 = malloc(sizeof(float) * nv), *b2 = malloc(sizeof(float) * nv);
    ck_assert(a1 && a2 && b1 && b2);
    test_poison(a2, ns);
    test_poison(b2, nv);
    rtomo_error err;
    ck_assert_int_eq(rtomo_iter_project(ref, x, 1, a1, &err), RTOMO_OK);
    ck_assert_int_eq(rtomo_iter_backproject(ref, y, 1, b1, &err), RTOMO_OK);
    ck_assert_msg(rtomo_iter_project(streamed, x, 1, a2, &err) == RTOMO_OK,
                  "%s", err.message);
    ck_assert_msg(rtomo_iter_backproject(streamed, y, 1, b2, &err) ==
                  RTOMO_OK, "%s", err.message);
    *ea = test_rel_l2(a2, a1, ns);
    *eb = test_rel_l2(b2, b1, nv);
    const double ax_y = dot(a2, y, ns), x_aty = dot(x, b2, nv);
    ck_assert(isfinite(ax_y) && isfinite(x_aty) && ax_y != 0.0);
    *adj = fabs(ax_y - x_aty) / sqrt(dot(a2, a2, ns) * dot(y, y, ns));
    free(a1);
    free(a2);
    free(b1);
    free(b2);
}

/* The cases: geometry, slices a slab, kernels. */
#define STREAM_CASES 7
static rtomo_cone_geometry stream_case(int i, int *slices,
                                       const char **kernels)
{
    static const int pair[STREAM_CASES] = {0, 1, 3, 0, 0, 2, 0};
    static const int per_slab[STREAM_CASES] = {5, 4, 3, 7, 1, 32, 6};
    rtomo_cone_geometry g = cone_test_pair_case(pair[i]);
    if (i == 0 || i == 6)
        g.nz = 37;              /* 37 = 7 x 5 + 2; 6 x 6 + 1 */
    if (i == 3)
        g.nz = 60;              /* the outer slabs miss the detector */
    *slices = per_slab[i];
    *kernels = i == 6 ? "old" : NULL;
    return g;
}

static const char *case_name(int i)
{
    static const char *names[STREAM_CASES] = {
        "37 slices in slabs of 5", "odd sizes, off-centre ROI, slabs of 4",
        "wide cone, row offset, slabs of 3",
        "60 slices in 7s, outer slabs off the detector",
        "one slice a slab", "half fan, one slab of 32",
        "first kernels, slabs of 6"};
    return names[i];
}

START_TEST(test_stream_vs_resident)
{
    uint64_t seed = test_seed(0x5713, _i);
    int slices;
    const char *kernels;
    rtomo_cone_geometry g = stream_case(_i, &slices, &kernels);
    rtomo_iter *ref = create_ok(&g, 0, 0, kernels);
    rtomo_iter *st = create_ok(&g, slices, 0, kernels);
    const int nz = roi_nz(&g);
    ck_assert_int_eq(cuda_cone_sf_stream_slabs(ref), 0);
    ck_assert_int_eq(cuda_cone_sf_stream_slabs(st),
                     (nz + (slices < nz ? slices : nz) - 1) /
                         (slices < nz ? slices : nz));
    const size_t nv = cone_test_roi_voxels(&g);
    const size_t ns = (size_t)g.n_proj * g.det_u * g.det_v;
    float *x = random_data(&seed, nv), *y = random_data(&seed, ns);
    double ea, eb, adj;
    compare(ref, st, &g, x, y, &ea, &eb, &adj);
    fprintf(stderr, "streamed SF pair, %s (%d slabs): A %.2e, A^T %.2e "
            "relative L2 against resident (bound %.0e), adjoint %.2e "
            "(bound %.0e)\n", case_name(_i), cuda_cone_sf_stream_slabs(st),
            ea, eb, STREAM_BOUND, adj, ADJOINT_BOUND);
    ck_assert_double_le(ea, STREAM_BOUND);
    ck_assert_double_le(eb, STREAM_BOUND);
    ck_assert_double_le(adj, ADJOINT_BOUND);
    free(x);
    free(y);
    rtomo_iter_destroy(ref);
    rtomo_iter_destroy(st);
}
END_TEST

START_TEST(test_stream_phantom)
{
    rtomo_cone_geometry g;
    float *truth;
    float *proj = cone_test_phantom_scan(&g, &truth);
    rtomo_iter *ref = create_ok(&g, 0, 0, NULL);
    rtomo_iter *st = create_ok(&g, 6, 0, NULL);
    double ea, eb, adj;
    compare(ref, st, &g, truth, proj, &ea, &eb, &adj);
    fprintf(stderr, "streamed SF pair, sphere phantom in slabs of 6: A "
            "%.2e, A^T %.2e relative L2 against resident (bound %.0e)\n",
            ea, eb, STREAM_BOUND);
    ck_assert_double_le(ea, STREAM_BOUND);
    ck_assert_double_le(eb, STREAM_BOUND);
    free(proj);
    free(truth);
    rtomo_iter_destroy(ref);
    rtomo_iter_destroy(st);
}
END_TEST

/* SIRT (nonnegative, warm start 0.01) and CGLS on 24 views of the sphere
 * phantom, streamed in slabs of 5 against resident. */
START_TEST(test_stream_solve)
{
    rtomo_cone_geometry g;
    float *proj = cone_test_phantom_scan(&g, NULL);
    const size_t nv = cone_test_roi_voxels(&g);
    rtomo_iter *ref = create_ok(&g, 0, 0, NULL);
    rtomo_iter *st = create_ok(&g, 5, 0, NULL);
    cone_test_same_solves(ref, st, proj, nv, STREAM_SOLVE_BOUND,
                          "streamed (slabs of 5)");
    free(proj);
    rtomo_iter_destroy(ref);
    rtomo_iter_destroy(st);
}
END_TEST

/* The budget decides: a third of the resident solve's bytes streams (at
 * least 4 slabs, the same results), a large budget stays resident, one
 * too small for a slice is refused. */
START_TEST(test_stream_budget)
{
    uint64_t seed = test_seed(0x5714, 0);
    rtomo_cone_geometry g = cone_test_pair_case(0);
    g.nz = 41;
    size_t resident = 0;
    int slices = -1;
    rtomo_error err;
    ck_assert_int_eq(rtomo_cone_iter_bytes(&g, RTOMO_BACKEND_CUDA, 1, 0,
                                           NULL, &resident, &slices, &err),
                     RTOMO_OK);
    ck_assert_int_eq(slices, 0);
    rtomo_iter *ref = create_ok(&g, 0, (size_t)1 << 40, NULL);
    ck_assert_int_eq(cuda_cone_sf_stream_slabs(ref), 0);
    rtomo_iter *st = create_ok(&g, 0, resident / 3, NULL);
    size_t device = 0;
    ck_assert_int_eq(rtomo_cone_iter_bytes(&g, RTOMO_BACKEND_CUDA, 1,
                                           resident / 3, NULL, &device,
                                           &slices, &err), RTOMO_OK);
    const int slabs = cuda_cone_sf_stream_slabs(st);
    fprintf(stderr, "budget %zu of %zu bytes: %d slabs of %d slices, %zu "
            "bytes on the GPU\n", resident / 3, resident, slabs, slices,
            device);
    ck_assert_int_ge(slabs, 4);
    ck_assert_int_eq(slabs, (41 + slices - 1) / slices);
    ck_assert_uint_le(device, resident / 3);
    const size_t nv = cone_test_roi_voxels(&g);
    const size_t ns = (size_t)g.n_proj * g.det_u * g.det_v;
    float *x = random_data(&seed, nv), *y = random_data(&seed, ns);
    double ea, eb, adj;
    compare(ref, st, &g, x, y, &ea, &eb, &adj);
    fprintf(stderr, "streamed within the budget: A %.2e, A^T %.2e, adjoint "
            "%.2e\n", ea, eb, adj);
    ck_assert_double_le(ea, STREAM_BOUND);
    ck_assert_double_le(eb, STREAM_BOUND);
    ck_assert_double_le(adj, ADJOINT_BOUND);
    /* too small: refused, saying why */
    ck_assert_ptr_null(create(&g, 0, 4096, NULL, &err));
    ck_assert_int_eq(err.code, RTOMO_E_NOMEM);
    fprintf(stderr, "a 4 KiB budget: %s\n", err.message);
    ck_assert_ptr_nonnull(strstr(err.message, "one slice"));
    free(x);
    free(y);
    rtomo_iter_destroy(ref);
    rtomo_iter_destroy(st);
}
END_TEST

/* ------------------------------------------------------------ timings ---- */

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* One CGLS iteration from a warm start (A twice, A^T twice, nothing
 * else on the GPUs); the mean A and A^T into a, at. */
static void time_cgls(rtomo_iter *it, const float *proj, float *x,
                      size_t nv, double *a, double *at)
{
    uint64_t seed = test_seed(0x5715, 0);
    test_fill_uniform(&seed, x, nv, 0.0, 1.0);
    rtomo_iter_options o;
    rtomo_iter_options_init(&o);
    o.method = RTOMO_ITER_CGLS;
    o.iterations = 1;
    rtomo_iter_result r;
    rtomo_error err;
    ck_assert_msg(rtomo_iter_solve(it, proj, 1, x, 1, &o, &r, &err) ==
                  RTOMO_OK, "%s", err.message);
    *a = 0.5 * r.project_seconds;
    *at = 0.5 * r.backproject_seconds;
}

/* A plan of g (budget 0: resident; copy_only: the streamed pair's
 * transfers and host adds alone) timed over one CGLS iteration. */
static void time_mode(const rtomo_cone_geometry *g, size_t budget,
                      int copy_only, const float *proj, float *x,
                      double *a, double *at, int *slabs)
{
    char *copy = test_swap_env("RTOMO_CONE_SF_STREAM_COPY_ONLY",
                          copy_only ? "1" : NULL);
    const double t0 = now();
    rtomo_iter *it = create_ok(g, 0, budget, NULL);
    const double made = now() - t0;
    test_restore_env("RTOMO_CONE_SF_STREAM_COPY_ONLY", copy);
    *slabs = cuda_cone_sf_stream_slabs(it);
    ck_assert_int_eq(*slabs > 0, budget > 0);
    const double t1 = now();
    time_cgls(it, proj, x, (size_t)g->nx * g->ny * g->nz, a, at);
    fprintf(stderr, "SF pair %d^3, %d views of %d x %d, %s (%d slabs "
            "within %.1f GiB): A %.2f s, A^T %.2f s, pair %.2f s (plan made "
            "in %.1f s, the CGLS iteration %.1f s in all)\n", g->nx,
            g->n_proj, g->det_u, g->det_v,
            !budget ? "resident" : copy_only ? "streamed, copies only"
                                             : "streamed", *slabs,
            (double)budget / (1u << 30), *a, *at, *a + *at, made,
            now() - t1);
    rtomo_iter_destroy(it);
}

/* RTOMO_CONE_SF_STREAM_BENCH="N,NP,DU,DV,G1[,G2]": resident; streamed
 * within G1 GiB, the same with copies only; streamed within G2. */
START_TEST(test_stream_speed)
{
    const char *env = getenv("RTOMO_CONE_SF_STREAM_BENCH");
    ck_assert_ptr_nonnull(env);     /* registered only when set */
    int N, NP, DU, DV;
    double gib[2] = {0.0, 0.0};
    const int got = sscanf(env, "%d,%d,%d,%d,%lf,%lf", &N, &NP, &DU, &DV,
                           &gib[0], &gib[1]);
    ck_assert_int_ge(got, 5);
    rtomo_cone_geometry g = cone_test_bench_geometry(N, NP, DU, DV);
    const size_t nv = (size_t)N * N * N, ns = (size_t)NP * DU * DV;
    uint64_t seed = test_seed(0x5716, 0);
    float *proj = random_data(&seed, ns);
    float *x = malloc(sizeof(float) * nv);
    ck_assert_ptr_nonnull(x);
    double a[4], at[4];
    int slabs[4];
    time_mode(&g, 0, 0, proj, x, &a[0], &at[0], &slabs[0]);
    for (int m = 1; m < (got == 6 ? 4 : 3); m++) {
        const size_t budget = (size_t)(gib[m == 3] * (double)(1u << 30));
        time_mode(&g, budget, m == 2, proj, x, &a[m], &at[m], &slabs[m]);
    }
    /* Hidden: of the transfers' time alone, the part the streamed pair
     * did not add to the resident pair's time. */
    for (int k = 0; k < 2; k++) {
        const double res = k ? at[0] : a[0], str = k ? at[1] : a[1];
        const double cp = k ? at[2] : a[2];
        fprintf(stderr, "%s, %d slabs: streamed %.2f s against resident "
                "%.2f s (x%.2f); transfers and host adds alone %.2f s, "
                "%.0f%% of them hidden\n", k ? "A^T" : "A", slabs[1], str,
                res, str / res, cp,
                cp > 0 ? 100.0 * (1.0 - (str - res) / cp) : 0.0);
    }
    free(proj);
    free(x);
}
END_TEST

/* One A and one A^T of a volume whose resident solve does not fit: the
 * automatic choice streams it.  A volume of ones (A skips only all-zero
 * blocks, so every voxel costs). */
START_TEST(test_stream_big)
{
    int N, NP, DU, DV;
    rtomo_cone_geometry g = cone_test_bench_env("RTOMO_CONE_SF_STREAM_BIG", &N, &NP, &DU, &DV);
    const size_t nv = (size_t)N * N * N, ns = (size_t)NP * DU * DV;
    size_t resident = 0;
    rtomo_error err;
    ck_assert_int_eq(rtomo_cone_iter_bytes(&g, RTOMO_BACKEND_CUDA, 1, 0,
                                           NULL, &resident, NULL, &err),
                     RTOMO_OK);
    double t = now();
    rtomo_iter *it = create_ok(&g, 0, 0, NULL);
    const double made = now() - t;
    const int slabs = cuda_cone_sf_stream_slabs(it);
    ck_assert_int_gt(slabs, 0);
    float *x = malloc(sizeof(float) * nv), *y = malloc(sizeof(float) * ns);
    ck_assert(x && y);
    for (size_t i = 0; i < nv; i++)
        x[i] = 1.0f;
    t = now();
    ck_assert_msg(rtomo_iter_project(it, x, 1, y, &err) == RTOMO_OK, "%s",
                  err.message);
    const double ta = now() - t;
    t = now();
    ck_assert_msg(rtomo_iter_backproject(it, y, 1, x, &err) == RTOMO_OK,
                  "%s", err.message);
    const double tat = now() - t;
    ck_assert(isfinite(test_max_abs(y, ns)) && test_max_abs(y, ns) > 0.0);
    ck_assert(isfinite(x[nv / 2 + (size_t)N * N / 2]) &&
              x[nv / 2 + (size_t)N * N / 2] > 0.0f);
    fprintf(stderr, "SF pair %d^3 (%.1f GiB), %d views of %d x %d: the "
            "resident solve would need %.1f GiB on the GPU; streamed in %d "
            "slabs (plan made in %.1f s): A %.2f s, A^T %.2f s with the "
            "engine's host copies (rtomo_iter_project, _backproject)\n", N,
            (double)nv * 4 / (1u << 30), NP, DU, DV,
            (double)resident / (1u << 30), slabs, made, ta, tat);
    free(x);
    free(y);
    rtomo_iter_destroy(it);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cuda_cone_stream");
    TCase *tc = tcase_create("gpu");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, test_stream_vs_resident, 0, STREAM_CASES);
    tcase_add_test(tc, test_stream_phantom);
    tcase_add_test(tc, test_stream_solve);
    tcase_add_test(tc, test_stream_budget);
    suite_add_tcase(s, tc);
    /* The timings in cases of their own, so that CK_RUN_CASE=bench or
     * CK_RUN_CASE=big runs one of them without the rest (the big one
     * needs its minutes to itself: run 66 gave it 80 s after
     * the correctness tests, which was not enough); registered only
     * when their variable is set, so that an unset one never counts as a
     * passed check. */
    if (getenv("RTOMO_CONE_SF_STREAM_BENCH")) {
        TCase *bench = tcase_create("bench");
        tcase_set_timeout(bench, 600);
        tcase_add_test(bench, test_stream_speed);
        suite_add_tcase(s, bench);
    }
    if (getenv("RTOMO_CONE_SF_STREAM_BIG")) {
        TCase *big = tcase_create("big");
        tcase_set_timeout(big, 600);
        tcase_add_test(big, test_stream_big);
        suite_add_tcase(s, big);
    }
    return test_run_gpu_suite(s);
}
