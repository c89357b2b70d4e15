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
 * a plan split into slabs of rows (several GPUs, or one GPU in parts under
 * RTOMO_CUDA_ITER_SPLIT) gives the one-slab plan's A, A^T, SIRT and CGLS
 * iterates to the bit for calls of at most 8 rows (within CPU_BOUND and
 * SOLVE_BOUND above that, see test_slabs);
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
#include "iterative/iter_internal.h"

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

/* ------------------------------------------------------------ slabs ---- */

/*
 * Slabs of rows (cuda_iter_backend.cu): a plan whose rows are dealt to
 * slabs, on one GPU (RTOMO_CUDA_ITER_SPLIT) and on every visible GPU where
 * there are two or more, against a plan of one slab on device 0.  Rows are
 * independent, and a row's arithmetic depends only on the kernel that
 * takes it: A and A^T take a call's rows in groups of 16, a last group of
 * at most 8 in an 8-row kernel, and a row that moves between the 8- and
 * the 16-row kernel may change in the last bits.  In A^T it does (seen on
 * an H100: -8.66326046 against -8.66326141), as a row already does on one
 * GPU when it is solved in batches of other sizes; A's kernels gave the
 * same bits (those of f590ece), but they are being tuned and nothing
 * promises it.  So calls of at most 8 rows, where every slab uses the
 * 8-row kernels as one slab does, must give A, A^T, the SIRT and CGLS
 * images and every residual to the bit (memcmp); larger calls A and A^T
 * within CPU_BOUND and the iterates within SOLVE_BOUND (float rounding of
 * the order of the GPU against the CPU; a row dealt wrongly differs by
 * O(1)), the differences printed.
 *
 * The solves' data are consistent, b = A x (the one-slab plan's A of a
 * random image), as measured data nearly are: with random sinograms
 * instead, 4 SIRT iterations of 37 rows differed by 5e-8 to 8.7e-4
 * (relative L2, six draws, H100) where CGLS stayed within 1e-7.  SIRT's
 * weights 1 / (A 1) of bins the slice's shadow barely grazes are huge, and
 * random data leave residuals of order 1 there: R r, which A^T's last-bit
 * differences multiply, reached 9.3e5 after 4 iterations (this geometry on
 * the CPU backend, the largest of 20 draws) against 0.38 with consistent
 * data.  The slice lies inside the detector at every angle (radius 20 sqrt
 * 2 + 0.71 < 29.75 bins from the axis, shifts included), so no pixel has a
 * tiny column sum either.
 *
 * 37 rows over 2 slabs are 19 + 18: groups of 16 + 3 and 16 + 2 where one
 * slab has 16 + 16 + 5; 5 over 2 are 3 + 2; 3 over 4 leave a slab empty; a
 * row alone is held whole by every slab.
 */
typedef struct split_config {
    const char *what;
    int split;                  /* RTOMO_CUDA_ITER_SPLIT */
    int every_gpu;              /* all visible devices (needs 2 or more) */
} split_config;

static const split_config split_configs[] = {
    {"one GPU in 2 slabs", 2, 0},
    {"one GPU in 4 slabs", 4, 0},
    {"every GPU, a slab each", 1, 1},
    {"every GPU in 2 slabs", 2, 1},
};
#define N_SPLIT_CONFIGS \
    ((int)(sizeof split_configs / sizeof split_configs[0]))

static const pair_case split_case = {"37 rows, odd, irregular, shifts", 67, 41,
                                     45, 37, 1, -2.75, 1.0};

static rtomo_iter *create_on(const rtomo_fbp_geometry *g, int every_gpu,
                             int split)
{
    rtomo_engine_options opt;
    rtomo_engine_options_init(&opt);
    opt.backend = RTOMO_BACKEND_CUDA;
    if (!every_gpu) {
        opt.n_devices = 1;
        opt.device_ids[0] = 0;
    }
    char value[8];
    snprintf(value, sizeof value, "%d", split);
    setenv("RTOMO_CUDA_ITER_SPLIT", value, 1);
    rtomo_error err;
    rtomo_iter *it = rtomo_iter_create(g, &opt, &err);
    unsetenv("RTOMO_CUDA_ITER_SPLIT");
    ck_assert_msg(it != NULL, "rtomo_iter_create (%d slabs per device): %s",
                  split, err.message);
    return it;
}

/* The split plan has the slabs asked for, on the devices asked for. */
static void check_slabs(const rtomo_iter *it, const split_config *sc,
                        int visible, int rows)
{
    int devices[RTOMO_MAX_DEVICES * 8];
    const int gpus = sc->every_gpu ? visible : 1;
    int want = gpus * sc->split;
    want = want < rows ? want : rows;
    const int n = rtomo_cuda_iter_debug_slabs(it, devices,
                                              RTOMO_MAX_DEVICES * 8);
    ck_assert_msg(n == want, "%s: %d slabs, expected %d", sc->what, n, want);
    for (int s = 0; s < n; s++)
        ck_assert_msg(devices[s] == s % gpus, "%s: slab %d on device %d, "
                      "expected %d", sc->what, s, devices[s], s % gpus);
}

/* Rows up to which every call runs the 8-row kernels of A and A^T only. */
#define SPLIT_EXACT_ROWS 8

/* The split plan's a against the one-slab plan's b (finite): the same
 * bits where bound is 0, else within bound (relative L2). */
static void same_as_one(const float *a, const float *b, size_t n,
                        double bound, const char *what, const char *op,
                        int rows)
{
    ck_assert_msg(isfinite(test_max_abs(b, n)), "%s, %d rows: the one-slab "
                  "plan's %s is not finite", what, rows, op);
    size_t differ = 0, first = 0;
    for (size_t i = 0; i < n; i++)
        if (memcmp(&a[i], &b[i], sizeof(float)) != 0 && differ++ == 0)
            first = i;
    const double rel = test_rel_l2(a, b, n);
    if (bound > 0.0)
        fprintf(stderr, "slabs %-24s %-4s %2d rows: %zu of %zu floats not "
                "the one slab's bits, relative L2 %.2e (bound %.0e)\n", what,
                op, rows, differ, n, rel, bound);
    ck_assert_msg(bound > 0.0 ? rel <= bound : differ == 0,
                  "%s, %d rows: %s differs from one slab's in %zu floats "
                  "(relative L2 %.3g), first at %zu: %.9g against %.9g",
                  what, rows, op, differ, rel, first, a[first], b[first]);
}

/* A and A^T of n rows on both plans. */
static void split_pair(rtomo_iter *split, rtomo_iter *one, const pair_data *d,
                       int n, uint64_t *seed, const char *what)
{
    const size_t ni = (size_t)n * d->g.slice_size * d->g.slice_size;
    const size_t ns = (size_t)n * d->g.n_proj * d->g.det_width;
    float *x = test_random_normal(seed, ni), *y = test_random_normal(seed, ns);
    float *as = malloc(sizeof(float) * ns), *a1 = malloc(sizeof(float) * ns);
    float *bs = malloc(sizeof(float) * ni), *b1 = malloc(sizeof(float) * ni);
    ck_assert(as && a1 && bs && b1);
    test_poison(as, ns);
    test_poison(a1, ns);
    test_poison(bs, ni);
    test_poison(b1, ni);
    rtomo_error err;
    ck_assert_msg(rtomo_iter_project(split, x, n, as, &err) == RTOMO_OK,
                  "%s", err.message);
    ck_assert_msg(rtomo_iter_project(one, x, n, a1, &err) == RTOMO_OK, "%s",
                  err.message);
    ck_assert_msg(rtomo_iter_backproject(split, y, n, bs, &err) == RTOMO_OK,
                  "%s", err.message);
    ck_assert_msg(rtomo_iter_backproject(one, y, n, b1, &err) == RTOMO_OK,
                  "%s", err.message);
    const double bound = n <= SPLIT_EXACT_ROWS ? 0.0 : CPU_BOUND;
    same_as_one(as, a1, ns, bound, what, "A", n);
    same_as_one(bs, b1, ni, bound, what, "A^T", n);
    free(x); free(y); free(as); free(a1); free(bs); free(b1);
}

/* A few SIRT (non-negative) and CGLS (warm) iterations of n rows on both
 * plans: the same images, residuals and residual histories. */
static void split_solve(rtomo_iter *split, rtomo_iter *one,
                        const pair_data *d, int n, rtomo_iter_method method,
                        uint64_t *seed, const char *what)
{
    const size_t ni = (size_t)n * d->g.slice_size * d->g.slice_size;
    const size_t ns = (size_t)n * d->g.n_proj * d->g.det_width;
    float *b = malloc(sizeof(float) * ns), *start = malloc(sizeof(float) * ni);
    float *xs = malloc(sizeof(float) * ni), *x1 = malloc(sizeof(float) * ni);
    ck_assert(b && start && xs && x1);
    rtomo_error err;
    /* Consistent data (test_slabs): b = A of a random image. */
    test_fill_uniform(seed, xs, ni, 0.0, 1.0);
    ck_assert_msg(rtomo_iter_project(one, xs, n, b, &err) == RTOMO_OK, "%s",
                  err.message);
    test_fill_uniform(seed, start, ni, 0.0, 0.01);
    const int warm = method == RTOMO_ITER_CGLS;
    memcpy(xs, start, sizeof(float) * ni);
    memcpy(x1, start, sizeof(float) * ni);
    rtomo_iter_options o;
    rtomo_iter_options_init(&o);
    o.method = method;
    o.iterations = 4;
    o.nonnegative = method == RTOMO_ITER_SIRT;
    o.progress = record;
    history hs = {0}, h1 = {0};
    rtomo_iter_result rs, r1;
    o.ctx = &hs;
    ck_assert_msg(rtomo_iter_solve(split, b, n, xs, warm, &o, &rs, &err) ==
                  RTOMO_OK, "split solve: %s", err.message);
    o.ctx = &h1;
    ck_assert_msg(rtomo_iter_solve(one, b, n, x1, warm, &o, &r1, &err) ==
                  RTOMO_OK, "one-slab solve: %s", err.message);
    const char *name = rtomo_iter_method_name(method);
    fprintf(stderr, "slabs %-24s %-4s %2d rows: residual %.9g, one slab "
            "%.9g\n", what, name, n, rs.residual, r1.residual);
    const double bound = n <= SPLIT_EXACT_ROWS ? 0.0 : SOLVE_BOUND;
    same_as_one(xs, x1, ni, bound, what, name, n);
    ck_assert_int_eq(rs.iterations, o.iterations);
    ck_assert_int_eq(hs.n, h1.n);
    for (int k = 0; k < hs.n; k++)
        ck_assert_msg(bound > 0.0 ? fabs(hs.r[k] - h1.r[k]) <= bound * h1.r[k]
                                  : hs.r[k] == h1.r[k],
                      "%s, %s, %d rows: residual at iteration %d %.17g, one "
                      "slab %.17g", what, name, n, k + 1, hs.r[k], h1.r[k]);
    ck_assert_msg(bound > 0.0 ? fabs(rs.residual - r1.residual) <=
                                    bound * r1.residual
                              : rs.residual == r1.residual,
                  "%s, %s: final residual %.17g, one slab %.17g", what, name,
                  rs.residual, r1.residual);
    free(b); free(start); free(xs); free(x1);
}

START_TEST(test_slabs)
{
    const split_config *sc = &split_configs[_i];
    const int visible = rtomo_cuda_device_count();
    if (sc->every_gpu && visible < 2) {
        fprintf(stderr, "slabs %s: not run, %d GPU visible\n", sc->what,
                visible);
        return;
    }
    uint64_t seed = test_seed(0x51ab, _i);
    pair_data d;
    pair_setup(&split_case, &seed, &d);
    rtomo_iter *one = create_on(&d.g, 0, 1);
    rtomo_iter *split = create_on(&d.g, sc->every_gpu, sc->split);
    int device = -1;
    ck_assert_int_eq(rtomo_cuda_iter_debug_slabs(one, &device, 1), 1);
    ck_assert_int_eq(device, 0);
    check_slabs(split, sc, visible, split_case.rows);
    static const int pair_rows[] = {37, 5, 3, 1};
    for (int k = 0; k < 4; k++)
        split_pair(split, one, &d, pair_rows[k], &seed, sc->what);
    static const int solve_rows[] = {37, 5, 1};
    for (int k = 0; k < 3; k++) {
        split_solve(split, one, &d, solve_rows[k], RTOMO_ITER_SIRT, &seed,
                    sc->what);
        split_solve(split, one, &d, solve_rows[k], RTOMO_ITER_CGLS, &seed,
                    sc->what);
    }
    fprintf(stderr, "slabs %s: one slab's bits in A and A^T (5, 3, 1 "
            "rows), sirt and cgls (5, 1); 37 rows within the bounds\n",
            sc->what);
    rtomo_iter_destroy(split);
    rtomo_iter_destroy(one);
    pair_free(&d);
}
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
    tcase_add_loop_test(tc, test_slabs, 0, N_SPLIT_CONFIGS);
    tcase_add_test(tc, test_speed);
    suite_add_tcase(s, tc);
    return test_run_gpu_suite(s);
}
