/*
 * test_cuda_cone.c — the cone-beam engine's CUDA backend against the CPU
 * backend, on data drawn fresh every run (RTOMO_TEST_SEED replays one):
 *   - filtering (cuFFT R2C/C2R against FFTW): random line integrals,
 *     centred and offset (half-fan, widened) detectors, within
 *     FILTER_BOUND relative L2;
 *   - back-projection of the same random filtered projections: the ALU
 *     kernel (the CPU's interpolation code; float rounding and FMA
 *     contraction only) within ALU_BOUND, the texture kernel (8-bit
 *     hardware interpolation weights) within TEXTURE_BOUND, over odd
 *     volume sizes, an off-centre ROI, a half fan and a short scan;
 *   - FDK of the sphere phantom end to end: both kernels against the CPU
 *     volume (PHANTOM_ALU_BOUND, PHANTOM_TEXTURE_BOUND) and against the
 *     truth in the central slice (the CPU test's bound, 0.035);
 *   - streamed in random order equals the whole scan within 1e-6;
 *   - the volume dealt in slabs (several devices, or one split by
 *     RTOMO_CUDA_CONE_SPLIT) equals one slab's, read across the borders;
 *   - the autotuned kernel is one of the two; GU/s of both kernels
 *     printed (RTOMO_CONE_BENCH="volume,projections,detector", default
 *     256,256,256; the figure is 1024,1024,1024);
 *   - the separable-footprint pair on the GPU, each of its kernels (the
 *     z-column ones, the same with A's shared patch off, the first ones:
 *     PAIR_VARIANTS): adjoint within 1e-5 (PAIR_ADJOINT_BOUND) over the
 *     CPU test's geometries and three more (several z chunks and thin
 *     voxels, footprints wider than the kernels keep in registers, the
 *     speed test's shape with partial tiles), A and A^T against the CPU's
 *     (PAIR_CPU_BOUND) on random data and on the sphere phantom, SIRT and
 *     CGLS against the CPU's images (SOLVE_CPU_BOUND) and better than FDK
 *     on 24 views; its speed when
 *     RTOMO_CONE_SF_BENCH="volume,projections,width,height" is set (the
 *     issue's figure: 1024,1024,1536,1152; RTOMO_CONE_SF_KERNEL=old for
 *     the first kernels');
 *   - the pair split in z slabs (RTOMO_CONE_SF_SPLIT=k slabs per GPU; with
 *     several GPUs visible, over all of them): A, A^T, SIRT and CGLS
 *     against one slab on GPU 0 (SLAB_BOUND, SLAB_SOLVE_BOUND) and adjoint
 *     within 1e-5, over slab counts that do not divide nz, thin slabs
 *     whose rows are a few of the detector's and slabs that miss it.
 * Exits 77 (skipped) without a GPU.
 */
#include "config.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "test_cone_support.h"
#include "test_cuda_fbp_common.h"

/* cuFFT and FFTW round differently: about 1e-7 relative; 1e-5 leaves
 * room for any transform length here. */
#define FILTER_BOUND 1e-5
/* Random filtered data (white: neighbours as different as values) make
 * every last-bit difference in a detector position visible; 1e-4. */
#define ALU_BOUND 1e-4
/* 8-bit interpolation weights: at most 1/512 of a neighbour difference
 * per sample, about 2e-3 relative on white data; 1e-2. */
#define TEXTURE_BOUND 1e-2
/* Phantom data: smooth but for the balls' edges, where neighbours differ
 * by as much as white data's; the texture's 8-bit weights show there. */
#define PHANTOM_ALU_BOUND 3e-5
#define PHANTOM_TEXTURE_BOUND 5e-3
#define TRUTH_BOUND 0.035
#define STREAM_BOUND 1e-6

/* The geometries compared: centred, half fan, short scan, odd sizes with
 * an off-centre ROI. */
#define N_CASES 4
static rtomo_cone_geometry case_geometry(int i)
{
    rtomo_cone_geometry g = cone_test_geometry();
    g.n_proj = 64;
    switch (i) {
    case 1:
        g.det_u = 48;
        g.offset_u = 30.0;
        break;
    case 2:
        g.n_proj = 120;
        g.angle_step = -1.75 * M_PI / 180.0;
        break;
    case 3:
        g.det_u = 77;
        g.det_v = 59;
        g.nx = 61;
        g.ny = 53;
        g.nz = 47;
        g.roi_x = 5;
        g.roi_nx = 50;
        g.roi_z = 3;
        break;
    }
    return g;
}

static const char *case_name(int i)
{
    static const char *names[N_CASES] = {"centred", "half fan", "short scan",
                                         "odd sizes, ROI"};
    return names[i];
}

static float *random_frames(uint64_t *seed, size_t n)
{
    float *a = malloc(sizeof(float) * n);
    ck_assert_ptr_nonnull(a);
    test_fill_uniform(seed, a, n, -1.0, 1.0);
    return a;
}

START_TEST(test_filter)
{
    uint64_t seed = test_seed(0xc0c1, _i);
    rtomo_cone_geometry g = case_geometry(_i);
    rtomo_cone *cpu = cone_test_create(&g, RTOMO_BACKEND_CPU,
                                       RTOMO_CONE_KERNEL_AUTO);
    rtomo_cone *gpu = cone_test_create(&g, RTOMO_BACKEND_CUDA,
                                       RTOMO_CONE_KERNEL_AUTO);
    ck_assert_int_eq(rtomo_cone_filtered_width(gpu),
                     rtomo_cone_filtered_width(cpu));
    const size_t frame = (size_t)g.det_u * g.det_v;
    const size_t ff = (size_t)rtomo_cone_filtered_width(cpu) * g.det_v;
    float *li = random_frames(&seed, frame);
    float *a = malloc(sizeof(float) * ff), *b = malloc(sizeof(float) * ff);
    ck_assert(a && b);
    rtomo_error err;
    double worst = 0.0;
    for (int p = 0; p < g.n_proj; p += 7) {
        test_poison(b, ff);
        ck_assert_int_eq(rtomo_cone_filter(cpu, p, li, a, &err), RTOMO_OK);
        ck_assert_msg(rtomo_cone_filter(gpu, p, li, b, &err) == RTOMO_OK,
                      "%s", err.message);
        double e = test_rel_l2(b, a, ff);
        worst = e > worst ? e : worst;
    }
    fprintf(stderr, "filter, %s: GPU vs CPU relative L2 %.2e (bound %.0e)\n",
            case_name(_i), worst, FILTER_BOUND);
    ck_assert_double_le(worst, FILTER_BOUND);
    free(li);
    free(a);
    free(b);
    rtomo_cone_destroy(cpu);
    rtomo_cone_destroy(gpu);
}
END_TEST

/* The same random filtered projections back-projected by the CPU and by
 * one GPU kernel; the relative L2 between the volumes. */
static double bp_difference(const rtomo_cone_geometry *g,
                            rtomo_cone_kernel kernel, uint64_t *seed)
{
    rtomo_cone *cpu = cone_test_create(g, RTOMO_BACKEND_CPU,
                                       RTOMO_CONE_KERNEL_AUTO);
    rtomo_cone *gpu = cone_test_create(g, RTOMO_BACKEND_CUDA, kernel);
    ck_assert_int_eq(rtomo_cone_kernel_of(gpu), kernel);
    const size_t ff = (size_t)rtomo_cone_filtered_width(cpu) * g->det_v;
    const size_t nv = rtomo_cone_volume_size(cpu);
    float *q = random_frames(seed, ff * g->n_proj);
    int *idx = malloc(sizeof(int) * g->n_proj);
    float *a = malloc(sizeof(float) * nv), *b = malloc(sizeof(float) * nv);
    ck_assert(idx && a && b);
    for (int p = 0; p < g->n_proj; p++)
        idx[p] = p;
    rtomo_error err;
    ck_assert_int_eq(rtomo_cone_add_filtered(cpu, idx, g->n_proj, q, &err),
                     RTOMO_OK);
    ck_assert_msg(rtomo_cone_add_filtered(gpu, idx, g->n_proj, q, &err) ==
                  RTOMO_OK, "%s", err.message);
    test_poison(b, nv);
    ck_assert_int_eq(rtomo_cone_read(cpu, a, &err), RTOMO_OK);
    ck_assert_msg(rtomo_cone_read(gpu, b, &err) == RTOMO_OK, "%s",
                  err.message);
    double e = test_rel_l2(b, a, nv);
    free(q);
    free(idx);
    free(a);
    free(b);
    rtomo_cone_destroy(cpu);
    rtomo_cone_destroy(gpu);
    return e;
}

START_TEST(test_backproject)
{
    uint64_t seed = test_seed(0xc0c2, _i);
    rtomo_cone_geometry g = case_geometry(_i);
    double alu = bp_difference(&g, RTOMO_CONE_KERNEL_ALU, &seed);
    double tex = bp_difference(&g, RTOMO_CONE_KERNEL_TEXTURE, &seed);
    fprintf(stderr, "back-projection of white data, %s: GPU vs CPU relative "
            "L2 %.2e alu (bound %.0e), %.2e texture (bound %.0e)\n",
            case_name(_i), alu, ALU_BOUND, tex, TEXTURE_BOUND);
    ck_assert_double_le(alu, ALU_BOUND);
    ck_assert_double_le(tex, TEXTURE_BOUND);
}
END_TEST

START_TEST(test_phantom)
{
    rtomo_cone_geometry g = cone_test_geometry();
    rtomo_ellipsoid e[RTOMO_PHANTOM_MAX_ELLIPSOIDS];
    const int n = cone_test_spheres(e);
    float *proj = cone_test_project(&g, e, n);
    float *truth = cone_test_truth(&g, e, n);
    rtomo_cone *cpu = cone_test_create(&g, RTOMO_BACKEND_CPU,
                                       RTOMO_CONE_KERNEL_AUTO);
    float *ref = cone_test_fdk(cpu, proj);
    const size_t nv = rtomo_cone_volume_size(cpu);
    const int mid = cone_test_mid_slice(&g);
    const rtomo_cone_kernel kernels[2] = {RTOMO_CONE_KERNEL_ALU,
                                          RTOMO_CONE_KERNEL_TEXTURE};
    const double bounds[2] = {PHANTOM_ALU_BOUND, PHANTOM_TEXTURE_BOUND};
    for (int k = 0; k < 2; k++) {
        rtomo_cone *gpu = cone_test_create(&g, RTOMO_BACKEND_CUDA,
                                           kernels[k]);
        float *vol = cone_test_fdk(gpu, proj);
        double vs_cpu = test_rel_l2(vol, ref, nv);
        double vs_truth = cone_test_slab_error(&g, vol, truth, mid, mid,
                                               28.0);
        fprintf(stderr, "sphere phantom FDK on the GPU (%s): relative L2 "
                "%.2e against the CPU (bound %.0e), %.4f against the truth "
                "in the central slice (bound %.3f)\n",
                rtomo_cone_kernel_name(kernels[k]), vs_cpu, bounds[k],
                vs_truth, TRUTH_BOUND);
        ck_assert_double_le(vs_cpu, bounds[k]);
        ck_assert_double_le(vs_truth, TRUTH_BOUND);
        free(vol);
        rtomo_cone_destroy(gpu);
    }
    free(ref);
    free(truth);
    free(proj);
    rtomo_cone_destroy(cpu);
}
END_TEST

START_TEST(test_stream)
{
    uint64_t seed = test_seed(0xc0c3, 0);
    rtomo_cone_geometry g = case_geometry(3);
    g.n_proj = 150;
    const size_t frame = (size_t)g.det_u * g.det_v;
    float *proj = random_frames(&seed, frame * g.n_proj);
    rtomo_cone *gpu = cone_test_create(&g, RTOMO_BACKEND_CUDA,
                                       RTOMO_CONE_KERNEL_AUTO);
    const size_t nv = rtomo_cone_volume_size(gpu);
    float *whole = cone_test_fdk(gpu, proj);
    float *streamed = malloc(sizeof(float) * nv);
    int *order = malloc(sizeof(int) * g.n_proj);
    ck_assert(streamed && order);
    for (int i = 0; i < g.n_proj; i++)
        order[i] = i;
    for (int i = g.n_proj - 1; i > 0; i--) {
        int j = test_rand_int(&seed, 0, i), t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    rtomo_error err;
    ck_assert_int_eq(rtomo_cone_reset(gpu, &err), RTOMO_OK);
    for (int i = 0; i < g.n_proj; i++) {
        ck_assert_int_eq(rtomo_cone_add_projection(gpu, order[i],
                                                   proj + order[i] * frame,
                                                   &err), RTOMO_OK);
        if (test_rand_int(&seed, 0, 9) == 0)
            ck_assert_int_eq(rtomo_cone_flush(gpu, &err), RTOMO_OK);
    }
    test_poison(streamed, nv);
    ck_assert_int_eq(rtomo_cone_read(gpu, streamed, &err), RTOMO_OK);
    double e = test_rel_l2(streamed, whole, nv);
    fprintf(stderr, "GPU (%s) streamed in random order vs whole scan: "
            "relative L2 %.2e (bound %.0e)\n",
            rtomo_cone_kernel_name(rtomo_cone_kernel_of(gpu)), e,
            STREAM_BOUND);
    ck_assert_double_le(e, STREAM_BOUND);
    free(order);
    free(streamed);
    free(whole);
    free(proj);
    rtomo_cone_destroy(gpu);
}
END_TEST

/* ------------------------------------------------ the SF pair on CUDA ---- */

/* Atomic sums in A: the order of float sums changes from run to run. */
#define PAIR_ADJOINT_BOUND 1e-5
/* The same weights, evaluated with FMA contraction on the GPU (last-bit
 * differences in the corners' columns) and summed in another order. */
#define PAIR_CPU_BOUND 1e-4
/* SIRT (30 iterations) and CGLS (8) images, GPU vs CPU: the pair's
 * differences carried through the iterations. */
#define SOLVE_CPU_BOUND 1e-3

/* The pair's geometries on the GPU: the CPU test's, then three more:
 * several z chunks of both kernels (75 slices of 0.7 mm: footprints under
 * a row), voxels of 3 mm (footprints of up to 6 cells, wider than the
 * kernels keep in registers), and the speed test's shape (sad 4 det_u,
 * sdd 8 det_u) with tiles and chunks cut short at every edge. */
#define PAIR_CASES (CONE_TEST_PAIR_CASES + 3)
static rtomo_cone_geometry pair_case(int i)
{
    if (i < CONE_TEST_PAIR_CASES)
        return cone_test_pair_case(i);
    rtomo_cone_geometry g = cone_test_pair_case(0);
    switch (i - CONE_TEST_PAIR_CASES) {
    case 0:
        g.nx = 40;
        g.ny = 36;
        g.nz = 75;
        g.voxel = 0.7;
        g.det_u = 44;
        g.det_v = 40;
        g.n_proj = 20;
        break;
    case 1:
        g.nx = g.ny = g.nz = 20;
        g.voxel = 3.0;
        g.n_proj = 19;
        break;
    default:
        g.nx = 70;
        g.ny = 70;
        g.nz = 41;
        g.det_u = 75;
        g.det_v = 57;
        g.n_proj = 21;
        g.sad = 4.0 * g.det_u;
        g.sdd = 8.0 * g.det_u;
        g.voxel = 0.8 * g.det_u / g.nx;
        break;
    }
    return g;
}

/* The GPU pair's kernels under test: the z-column kernels (the default),
 * the same with A's shared patch off (every add a global atomic), and
 * the first kernels (RTOMO_CONE_SF_KERNEL=old). */
#define PAIR_VARIANTS 3
static const char *const variant_names[PAIR_VARIANTS] = {
    "z-column", "z-column, no patch", "first"};

static rtomo_iter *create_pair(const rtomo_cone_geometry *g,
                               rtomo_backend backend);

/* A GPU pair with variant v's kernels (the switches are read when a pair
 * is made; whatever the environment said before is put back). */
static rtomo_iter *create_gpu_variant(const rtomo_cone_geometry *g, int v)
{
    char *kernel = test_swap_env("RTOMO_CONE_SF_KERNEL",
                                 v == 2 ? "old" : "new");
    char *patch = test_swap_env("RTOMO_CONE_SF_PATCH", v == 1 ? "0" : NULL);
    rtomo_iter *it = create_pair(g, RTOMO_BACKEND_CUDA);
    test_restore_env("RTOMO_CONE_SF_KERNEL", kernel);
    test_restore_env("RTOMO_CONE_SF_PATCH", patch);
    return it;
}

static rtomo_iter *create_pair(const rtomo_cone_geometry *g,
                               rtomo_backend backend)
{
    rtomo_engine_options opt;
    if (backend == RTOMO_BACKEND_CPU) {
        opt = test_cpu_options(0);
    } else {
        rtomo_engine_options_init(&opt);
        opt.backend = RTOMO_BACKEND_CUDA;
    }
    rtomo_error err;
    rtomo_iter *it = rtomo_cone_iter_create(g, &opt, &err);
    ck_assert_msg(it != NULL, "rtomo_cone_iter_create: %s", err.message);
    ck_assert_int_eq(rtomo_iter_backend(it), backend);
    return it;
}

static double dot(const float *a, const float *b, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += (double)a[i] * b[i];
    return s;
}

/* _i: case _i / PAIR_VARIANTS, variant _i % PAIR_VARIANTS. */
START_TEST(test_pair_adjoint)
{
    uint64_t seed = test_seed(0xc0c5, _i);
    const int c = _i / PAIR_VARIANTS, v = _i % PAIR_VARIANTS;
    rtomo_cone_geometry g = pair_case(c);
    rtomo_iter *it = create_gpu_variant(&g, v);
    const size_t nv = cone_test_roi_voxels(&g);
    const size_t ns = (size_t)g.n_proj * g.det_u * g.det_v;
    float *x = random_frames(&seed, nv), *y = random_frames(&seed, ns);
    float *ax = malloc(sizeof(float) * ns), *aty = malloc(sizeof(float) * nv);
    ck_assert(ax && aty);
    rtomo_error err;
    for (int signed_data = 0; signed_data < 2; signed_data++) {
        if (!signed_data) {
            for (size_t i = 0; i < nv; i++)
                x[i] = fabsf(x[i]);
            for (size_t i = 0; i < ns; i++)
                y[i] = fabsf(y[i]);
        } else {
            test_fill_uniform(&seed, x, nv, -1.0, 1.0);
            test_fill_uniform(&seed, y, ns, -1.0, 1.0);
        }
        test_poison(ax, ns);
        test_poison(aty, nv);
        ck_assert_msg(rtomo_iter_project(it, x, 1, ax, &err) == RTOMO_OK,
                      "%s", err.message);
        ck_assert_msg(rtomo_iter_backproject(it, y, 1, aty, &err) == RTOMO_OK,
                      "%s", err.message);
        const double a = dot(ax, y, ns), b = dot(x, aty, nv);
        const double scale = signed_data
                                 ? sqrt(dot(ax, ax, ns) * dot(y, y, ns))
                                 : fabs(a);
        const double rel = fabs(a - b) / scale;
        fprintf(stderr, "GPU SF pair (%s kernels) adjointness, %s data, "
                "case %d: relative %.2e (bound %.0e)\n", variant_names[v],
                signed_data ? "signed" : "positive", c, rel,
                PAIR_ADJOINT_BOUND);
        ck_assert(isfinite(a) && isfinite(b) && a != 0.0);
        ck_assert_double_le(rel, PAIR_ADJOINT_BOUND);
    }
    free(x);
    free(y);
    free(ax);
    free(aty);
    rtomo_iter_destroy(it);
}
END_TEST

/* A x and A^T y on the GPU (variant v) against the CPU's; the relative
 * L2 differences into ea, eb. */
static void pair_vs_cpu(const rtomo_cone_geometry *g, int v, const float *x,
                        const float *y, double *ea, double *eb)
{
    rtomo_iter *cpu = create_pair(g, RTOMO_BACKEND_CPU);
    rtomo_iter *gpu = create_gpu_variant(g, v);
    const size_t nv = cone_test_roi_voxels(g);
    const size_t ns = (size_t)g->n_proj * g->det_u * g->det_v;
    float *a1 = malloc(sizeof(float) * ns), *a2 = malloc(sizeof(float) * ns);
    float *b1 = malloc(sizeof(float) * nv), *b2 = malloc(sizeof(float) * nv);
    ck_assert(a1 && a2 && b1 && b2);
    rtomo_error err;
    test_poison(a2, ns);
    test_poison(b2, nv);
    ck_assert_int_eq(rtomo_iter_project(cpu, x, 1, a1, &err), RTOMO_OK);
    ck_assert_int_eq(rtomo_iter_backproject(cpu, y, 1, b1, &err), RTOMO_OK);
    ck_assert_int_eq(rtomo_iter_project(gpu, x, 1, a2, &err), RTOMO_OK);
    ck_assert_int_eq(rtomo_iter_backproject(gpu, y, 1, b2, &err), RTOMO_OK);
    *ea = test_rel_l2(a2, a1, ns);
    *eb = test_rel_l2(b2, b1, nv);
    free(a1);
    free(a2);
    free(b1);
    free(b2);
    rtomo_iter_destroy(cpu);
    rtomo_iter_destroy(gpu);
}

/* _i: case _i / PAIR_VARIANTS, variant _i % PAIR_VARIANTS; fresh random
 * data. */
START_TEST(test_pair_vs_cpu)
{
    uint64_t seed = test_seed(0xc0c6, _i);
    const int c = _i / PAIR_VARIANTS, v = _i % PAIR_VARIANTS;
    rtomo_cone_geometry g = pair_case(c);
    const size_t nv = cone_test_roi_voxels(&g);
    const size_t ns = (size_t)g.n_proj * g.det_u * g.det_v;
    float *x = random_frames(&seed, nv), *y = random_frames(&seed, ns);
    double ea, eb;
    pair_vs_cpu(&g, v, x, y, &ea, &eb);
    fprintf(stderr, "GPU SF pair (%s kernels) vs CPU, case %d: A %.2e, "
            "A^T %.2e relative L2 (bound %.0e)\n", variant_names[v], c, ea,
            eb, PAIR_CPU_BOUND);
    ck_assert_double_le(ea, PAIR_CPU_BOUND);
    ck_assert_double_le(eb, PAIR_CPU_BOUND);
    free(x);
    free(y);
}
END_TEST

/* The sphere phantom's voxels (A) and its exact projections (A^T), GPU
 * variant _i against the CPU: smooth data with sharp edges, where random
 * data have none. */
START_TEST(test_pair_phantom)
{
    rtomo_cone_geometry g;
    float *truth;
    float *proj = cone_test_phantom_scan(&g, &truth);
    double ea, eb;
    pair_vs_cpu(&g, _i, truth, proj, &ea, &eb);
    fprintf(stderr, "GPU SF pair (%s kernels) vs CPU, sphere phantom: "
            "A %.2e, A^T %.2e relative L2 (bound %.0e)\n",
            variant_names[_i], ea, eb, PAIR_CPU_BOUND);
    ck_assert_double_le(ea, PAIR_CPU_BOUND);
    ck_assert_double_le(eb, PAIR_CPU_BOUND);
    free(proj);
    free(truth);
}
END_TEST

/* SIRT and CGLS on 24 views of the sphere phantom (40^3 voxels of
 * 1.5 mm), GPU against CPU, and both beat FDK as on the CPU. */
START_TEST(test_pair_solve)
{
    rtomo_cone_geometry g = cone_test_geometry();
    g.nx = g.ny = g.nz = 40;
    g.voxel = 1.5;
    g.n_proj = 24;
    rtomo_ellipsoid e[RTOMO_PHANTOM_MAX_ELLIPSOIDS];
    const int n = cone_test_spheres(e);
    float *proj = cone_test_project(&g, e, n);
    float *truth = cone_test_truth(&g, e, n);
    const size_t nv = cone_test_roi_voxels(&g);
    const int mid = cone_test_mid_slice(&g);
    rtomo_cone *fdk = cone_test_create(&g, RTOMO_BACKEND_CUDA,
                                       RTOMO_CONE_KERNEL_AUTO);
    float *vol = cone_test_fdk(fdk, proj);
    const double e_fdk = cone_test_slab_error(&g, vol, truth, mid - 8,
                                              mid + 8, 28.0);
    rtomo_iter *cpu = create_pair(&g, RTOMO_BACKEND_CPU);
    rtomo_iter *gpu = create_pair(&g, RTOMO_BACKEND_CUDA);
    const rtomo_iter_method methods[2] = {RTOMO_ITER_SIRT, RTOMO_ITER_CGLS};
    const int iterations[2] = {30, 8};
    float *x1 = malloc(sizeof(float) * nv), *x2 = malloc(sizeof(float) * nv);
    ck_assert(x1 && x2);
    for (int m = 0; m < 2; m++) {
        rtomo_iter_options o;
        rtomo_iter_options_init(&o);
        o.method = methods[m];
        o.iterations = iterations[m];
        rtomo_iter_result r1, r2;
        rtomo_error err;
        memset(x1, 0, sizeof(float) * nv);
        memset(x2, 0, sizeof(float) * nv);
        ck_assert_int_eq(rtomo_iter_solve(cpu, proj, 1, x1, 0, &o, &r1, &err),
                         RTOMO_OK);
        ck_assert_msg(rtomo_iter_solve(gpu, proj, 1, x2, 0, &o, &r2, &err) ==
                      RTOMO_OK, "%s", err.message);
        const double vs_cpu = test_rel_l2(x2, x1, nv);
        const double e_gpu = cone_test_slab_error(&g, x2, truth, mid - 8,
                                                  mid + 8, 28.0);
        fprintf(stderr, "GPU %s (%d iterations, %.3f s; CPU %.3f s): "
                "relative L2 %.2e against the CPU (bound %.0e), %.4f "
                "against the truth (GPU FDK %.4f)\n",
                rtomo_iter_method_name(methods[m]), iterations[m],
                r2.seconds, r1.seconds, vs_cpu, SOLVE_CPU_BOUND, e_gpu,
                e_fdk);
        ck_assert_double_le(vs_cpu, SOLVE_CPU_BOUND);
        ck_assert_double_lt(e_gpu, 0.9 * e_fdk);
    }
    free(x1);
    free(x2);
    free(vol);
    free(truth);
    free(proj);
    rtomo_iter_destroy(cpu);
    rtomo_iter_destroy(gpu);
    rtomo_cone_destroy(fdk);
}
END_TEST

/* The SF pair's speed: one A and one A^T (one SIRT iteration's work) on
 * N^3 voxels and NP projections of DU x DV, only when
 * RTOMO_CONE_SF_BENCH="N,NP,DU,DV" is set (the paper's configuration,
 * 1024,1024,1536,1152, needs about 19 GB of device memory; the paper's
 * Titan V took 95.7 s for the pair, issue 15 asks for <= 8 s on an H100). */
START_TEST(test_pair_speed)
{
    int N, NP, DU, DV;
    rtomo_cone_geometry g = cone_test_bench_env("RTOMO_CONE_SF_BENCH", &N, &NP, &DU, &DV);
    rtomo_iter *gpu = create_pair(&g, RTOMO_BACKEND_CUDA);
    rtomo_iter_options o;
    rtomo_iter_options_init(&o);
    o.method = RTOMO_ITER_SIRT;
    o.iterations = 1;
    const size_t nv = (size_t)N * N * N, ns = (size_t)NP * DU * DV;
    uint64_t seed = test_seed(0xc0c7, 0);
    float *proj = random_frames(&seed, ns);
    /* A warm start from a random volume: both of the solve's A then
     * project voxels that are not zero (the GPU's A skips all-zero blocks,
     * so a cold start's first A would take almost no time and halve the
     * figure). */
    float *x = malloc(sizeof(float) * nv);
    ck_assert_ptr_nonnull(x);
    test_fill_uniform(&seed, x, nv, 0.0, 1.0);
    rtomo_iter_result r;
    rtomo_error err;
    ck_assert_msg(rtomo_iter_solve(gpu, proj, 1, x, 1, &o, &r, &err) ==
                  RTOMO_OK, "%s", err.message);
    /* The engine times the solve's A (twice: the start's residual and
     * the iteration's) and A^T (once); the SIRT weights' are not timed. */
    const double a = 0.5 * r.project_seconds, at = r.backproject_seconds;
    const char *kernels = getenv("RTOMO_CONE_SF_KERNEL");
    fprintf(stderr, "SF pair %d^3, %d projections of %d x %d, %s kernels: "
            "A %.2f s, A^T %.2f s, %.2f s for the pair (the paper: 95.7 s on "
            "a Titan V)\n", N, NP, DU, DV,
            kernels && strcmp(kernels, "old") == 0 ? "first" : "z-column", a,
            at, a + at);
    free(proj);
    free(x);
    rtomo_iter_destroy(gpu);
}
END_TEST

/* The ROI's slices dealt to 3 slabs on one GPU (the test hook
 * RTOMO_CUDA_CONE_SPLIT, as several GPUs would hold them): the same volume
 * as one slab (the ALU kernel; slab origins round a little differently:
 * SPLIT_BOUND), and slices read across the slabs' borders. */
#define SPLIT_BOUND 1e-5

START_TEST(test_split)
{
    uint64_t seed = test_seed(0xc0c8, 0);
    rtomo_cone_geometry g = case_geometry(3);
    const size_t frame = (size_t)g.det_u * g.det_v;
    float *proj = random_frames(&seed, frame * g.n_proj);
    rtomo_cone *one = cone_test_create(&g, RTOMO_BACKEND_CUDA,
                                       RTOMO_CONE_KERNEL_ALU);
    float *a = cone_test_fdk(one, proj);
    setenv("RTOMO_CUDA_CONE_SPLIT", "3", 1);
    rtomo_cone *three = cone_test_create(&g, RTOMO_BACKEND_CUDA,
                                         RTOMO_CONE_KERNEL_ALU);
    unsetenv("RTOMO_CUDA_CONE_SPLIT");
    float *b = cone_test_fdk(three, proj);
    const size_t nv = rtomo_cone_volume_size(one);
    double e = test_rel_l2(b, a, nv);
    fprintf(stderr, "3 slabs vs 1: relative L2 %.2e (bound %.0e)\n", e,
            SPLIT_BOUND);
    ck_assert_double_le(e, SPLIT_BOUND);
    /* slices 10..39 of 44 span the three slabs' borders (15, 30) */
    const rtomo_cone_geometry *n = rtomo_cone_geometry_of(three);
    const size_t plane = (size_t)n->roi_nx * n->roi_ny;
    float *part = malloc(sizeof(float) * plane * 30);
    ck_assert_ptr_nonnull(part);
    rtomo_error err;
    ck_assert_int_eq(rtomo_cone_read_slices(three, 10, 30, part, &err),
                     RTOMO_OK);
    ck_assert_double_eq(test_max_abs_diff(part, b + 10 * plane, 30 * plane),
                        0.0);
    free(part);
    free(a);
    free(b);
    free(proj);
    rtomo_cone_destroy(one);
    rtomo_cone_destroy(three);
}
END_TEST

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

/* Back-projection speed of each kernel: N^3 voxels from NP projections of
 * D x D (filtered data loaded, so only back-projection is timed). */
START_TEST(test_speed)
{
    int N = 256, NP = 256, D = 256;
    const char *env = getenv("RTOMO_CONE_BENCH");
    if (env)
        ck_assert_int_eq(sscanf(env, "%d,%d,%d", &N, &NP, &D), 3);
    rtomo_cone_geometry g = cone_test_geometry();
    g.nx = g.ny = g.nz = N;
    g.det_u = g.det_v = D;
    g.n_proj = NP;
    /* The detector is D mm wide at the axis (2 mm pixels, magnification
     * 2); the volume 0.8 D mm, its corners well clear of the source. */
    g.sad = 4.0 * D;
    g.sdd = 8.0 * D;
    g.voxel = 0.8 * D / N;
    const size_t ff = (size_t)D * D;
    const rtomo_cone_kernel kernels[2] = {RTOMO_CONE_KERNEL_TEXTURE,
                                          RTOMO_CONE_KERNEL_ALU};
    for (int k = 0; k < 2; k++) {
        uint64_t seed = test_seed(0xc0c4, 0);
        rtomo_cone *gpu = cone_test_create(&g, RTOMO_BACKEND_CUDA,
                                           kernels[k]);
        const int chunk = rtomo_cone_chunk(gpu);
        /* One chunk of random filtered projections, fed again and again. */
        float *q = random_frames(&seed, ff * (size_t)chunk);
        int *idx = malloc(sizeof(int) * chunk);
        float *vol = malloc(sizeof(float) * rtomo_cone_volume_size(gpu));
        ck_assert(idx && vol);
        rtomo_error err;
        double t0 = now();
        for (int p = 0; p < NP; p += chunk) {
            int n = NP - p < chunk ? NP - p : chunk;
            for (int i = 0; i < n; i++)
                idx[i] = p + i;
            ck_assert_int_eq(rtomo_cone_add_filtered(gpu, idx, n, q, &err),
                             RTOMO_OK);
        }
        ck_assert_int_eq(rtomo_cone_read(gpu, vol, &err), RTOMO_OK);
        double t = now() - t0;
        fprintf(stderr, "cone back-projection %d^3 from %d projections of "
                "%d^2, %s kernel: %.3f s with uploads and the read, %.1f "
                "GU/s\n", N, NP, D, rtomo_cone_kernel_name(kernels[k]), t,
                (double)N * N * N * NP / t * 1e-9);
        free(q);
        free(idx);
        free(vol);
        rtomo_cone_destroy(gpu);
    }
    rtomo_cone *autotuned = cone_test_create(&g, RTOMO_BACKEND_CUDA,
                                             RTOMO_CONE_KERNEL_AUTO);
    rtomo_cone_kernel chosen = rtomo_cone_kernel_of(autotuned);
    fprintf(stderr, "autotuned: %s\n", rtomo_cone_kernel_name(chosen));
    ck_assert(chosen == RTOMO_CONE_KERNEL_TEXTURE ||
              chosen == RTOMO_CONE_KERNEL_ALU);
    rtomo_cone_destroy(autotuned);
}
END_TEST

/* The pair split in z slabs (cuda_cone_sf_backend.cu): the test hook
 * RTOMO_CONE_SF_SPLIT=k deals k slabs to each visible GPU, so that one
 * GPU runs the windows, their adds and sends, and several GPUs all take
 * part; compared with one slab on GPU 0.  A slab's constants round a
 * little differently from the whole volume's (its z0; v0 less its
 * window's first row): 1.0e-6 relative L2 for A measured in a CPU
 * emulation of these cases (the same weights, summed in one order), and
 * the GPU's sums come in another order each run; 1e-5. */
#define SLAB_BOUND 1e-5
/* SIRT (10 iterations, nonnegative) and CGLS (6): the pairs' differences
 * carried through the iterations. */
#define SLAB_SOLVE_BOUND 1e-4

/* The split cases: 37 slices over 2 and 3 slabs a GPU, over 8 (thin
 * slabs: 4-5 slices reach 2-16 of the 36 rows), 60 slices over 6 (the
 * outer two miss the detector: no window), an off-centre ROI over 3, a
 * wider cone with the detector offset over 2, one slab a GPU (on one GPU
 * the pair as it always was), and the first kernels over 3. */
#define SLAB_CASES 8
static rtomo_cone_geometry slab_case(int i, int *per_device, int *variant)
{
    static const int split[SLAB_CASES] = {2, 3, 8, 6, 3, 2, 1, 3};
    rtomo_cone_geometry g = cone_test_pair_case(i == 4 ? 1 : i == 5 ? 3 : 0);
    if (i < 4 || i > 5)
        g.nz = i == 3 ? 60 : 37;
    *per_device = split[i];
    *variant = i == 7 ? 2 : 0;
    return g;
}

/* A GPU pair with variant v's kernels: per_device slabs on every GPU, or
 * (per_device 0) one slab on GPU 0 only. */
static rtomo_iter *create_slabbed(const rtomo_cone_geometry *g, int v,
                                  int per_device)
{
    char k[16];
    snprintf(k, sizeof k, "%d", per_device);
    char *split = test_swap_env("RTOMO_CONE_SF_SPLIT", per_device ? k : NULL);
    char *kernel = test_swap_env("RTOMO_CONE_SF_KERNEL",
                                 v == 2 ? "old" : "new");
    char *patch = test_swap_env("RTOMO_CONE_SF_PATCH", v == 1 ? "0" : NULL);
    rtomo_engine_options opt;
    rtomo_engine_options_init(&opt);
    opt.backend = RTOMO_BACKEND_CUDA;
    if (!per_device) {
        opt.n_devices = 1;
        opt.device_ids[0] = 0;
    }
    rtomo_error err;
    rtomo_iter *it = rtomo_cone_iter_create(g, &opt, &err);
    test_restore_env("RTOMO_CONE_SF_SPLIT", split);
    test_restore_env("RTOMO_CONE_SF_KERNEL", kernel);
    test_restore_env("RTOMO_CONE_SF_PATCH", patch);
    ck_assert_msg(it != NULL, "rtomo_cone_iter_create: %s", err.message);
    return it;
}

/* A x and A^T y of the split pair against one slab's, and its
 * adjointness, on signed random data. */
START_TEST(test_pair_slabs)
{
    uint64_t seed = test_seed(0xc0c9, _i);
    int per_device, v;
    rtomo_cone_geometry g = slab_case(_i, &per_device, &v);
    rtomo_iter *one = create_slabbed(&g, v, 0);
    rtomo_iter *split = create_slabbed(&g, v, per_device);
    const size_t nv = cone_test_roi_voxels(&g);
    const size_t ns = (size_t)g.n_proj * g.det_u * g.det_v;
    float *x = random_frames(&seed, nv), *y = random_frames(&seed, ns);
    float *a1 = malloc(sizeof(float) * ns), *a2 = malloc(sizeof(float) * ns);
    float *b1 = malloc(sizeof(float) * nv), *b2 = malloc(sizeof(float) * nv);
    ck_assert(a1 && a2 && b1 && b2);
    test_poison(a2, ns);
    test_poison(b2, nv);
    rtomo_error err;
    ck_assert_int_eq(rtomo_iter_project(one, x, 1, a1, &err), RTOMO_OK);
    ck_assert_int_eq(rtomo_iter_backproject(one, y, 1, b1, &err), RTOMO_OK);
    ck_assert_msg(rtomo_iter_project(split, x, 1, a2, &err) == RTOMO_OK,
                  "%s", err.message);
    ck_assert_msg(rtomo_iter_backproject(split, y, 1, b2, &err) == RTOMO_OK,
                  "%s", err.message);
    const double ea = test_rel_l2(a2, a1, ns), eb = test_rel_l2(b2, b1, nv);
    const double ax_y = dot(a2, y, ns), x_aty = dot(x, b2, nv);
    const double adj = fabs(ax_y - x_aty) / sqrt(dot(a2, a2, ns) *
                                                 dot(y, y, ns));
    const int nz = g.roi_nz ? g.roi_nz : g.nz - g.roi_z;
    fprintf(stderr, "GPU SF pair in slabs, case %d (%d slices, %d slabs a "
            "GPU, %d GPUs, %s kernels): A %.2e, A^T %.2e relative L2 "
            "against one slab (bound %.0e), adjoint %.2e (bound %.0e)\n",
            _i, nz, per_device, rtomo_cuda_device_count(), variant_names[v],
            ea, eb, SLAB_BOUND, adj, PAIR_ADJOINT_BOUND);
    ck_assert(isfinite(ax_y) && isfinite(x_aty) && ax_y != 0.0);
    ck_assert_double_le(ea, SLAB_BOUND);
    ck_assert_double_le(eb, SLAB_BOUND);
    ck_assert_double_le(adj, PAIR_ADJOINT_BOUND);
    free(x);
    free(y);
    free(a1);
    free(a2);
    free(b1);
    free(b2);
    rtomo_iter_destroy(one);
    rtomo_iter_destroy(split);
}
END_TEST

/* SIRT (nonnegative) and CGLS on 24 views of the sphere phantom, 37
 * slices dealt to 3 slabs a GPU, against one slab; from a warm start of
 * 0.01 everywhere for SIRT (its clamp and the start's upload go through
 * the slabs too). */
START_TEST(test_pair_slabs_solve)
{
    rtomo_cone_geometry g;
    float *proj = cone_test_phantom_scan(&g, NULL);
    const size_t nv = cone_test_roi_voxels(&g);
    rtomo_iter *one = create_slabbed(&g, 0, 0);
    rtomo_iter *split = create_slabbed(&g, 0, 3);
    char what[64];
    snprintf(what, sizeof what, "GPU pair in 3 slabs a GPU (%d GPUs)",
             rtomo_cuda_device_count());
    cone_test_same_solves(one, split, proj, nv, SLAB_SOLVE_BOUND, what);
    free(proj);
    rtomo_iter_destroy(one);
    rtomo_iter_destroy(split);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cuda_cone");
    TCase *tc = tcase_create("gpu");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, test_filter, 0, N_CASES);
    tcase_add_loop_test(tc, test_backproject, 0, N_CASES);
    tcase_add_test(tc, test_phantom);
    tcase_add_test(tc, test_stream);
    tcase_add_test(tc, test_split);
    tcase_add_test(tc, test_speed);
    tcase_add_loop_test(tc, test_pair_adjoint, 0,
                        PAIR_CASES * PAIR_VARIANTS);
    tcase_add_loop_test(tc, test_pair_vs_cpu, 0, PAIR_CASES * PAIR_VARIANTS);
    tcase_add_loop_test(tc, test_pair_phantom, 0, PAIR_VARIANTS);
    tcase_add_test(tc, test_pair_solve);
    /* A timing, not a check: registered only when asked for, so that an
     * unset variable never counts as a passed check. */
    if (getenv("RTOMO_CONE_SF_BENCH"))
        tcase_add_test(tc, test_pair_speed);
    tcase_add_loop_test(tc, test_pair_slabs, 0, SLAB_CASES);
    tcase_add_test(tc, test_pair_slabs_solve);
    suite_add_tcase(s, tc);
    return test_run_gpu_suite(s);
}
