/*
 * test_cuda_fbp_phase.c — phase retrieval on the CUDA backend against the
 * CPU backend (the reference, itself tested against the transport-of-
 * intensity model in test_fbp_phase.c), through the public API.
 *
 * Fresh random frames (uint16 and float, with a random flat field, and
 * without one) and Shepp-Logan phantom frames (transmission exp(-p) times
 * a flat), for kept rows of the whole detector, the middle, the top, the
 * bottom and a single row; one slot and one GPU split into 2 and 3 slots
 * (RTOMO_CUDA_FBP_SPLIT), whose rows interleave over the whole kept range
 * so that each slot filters all phase rows; small frames that share a
 * bank (batched transforms) and a partial last bank; a flat field
 * refreshed after the first projection; float and half storage.
 *
 * Bounds, relative L2:
 *   filtered sinograms      5e-5: FFTW and cuFFT round differently (2-D
 *       float transforms of ~1e-7 relative, then -log and the ramp
 *       filter's transforms, which amplify that rounding noise against
 *       the smooth phantom's low-frequency signal).  Measured on an H100
 *       (seed 12345): random frames 3.2e-6 .. 3.9e-6, phantom 1.2e-5 ..
 *       1.8e-5, 2048 x 2048 frames 1.7e-5;
 *   reconstructed slices    test_cpu_bound of the ALU kernel for the
 *       storage precision (float: the filter's error plus the
 *       back-projector's; half: 11-bit storage); measured 4e-5 .. 8e-5
 *       for half storage.
 * Exits 77 without a GPU.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_fbp_debug.h"
#include "rtomo_sim.h"
#include "test_cuda_fbp_common.h"

#define WIDTH 96
#define HEIGHT 72
#define N_PROJ 37               /* a partial last bank */
#define FILTER_BOUND 5e-5

/* 20 keV, 0.3 m, 4 um, delta/beta 300: a margin of 33 px. */
static rtomo_fbp_phase test_phase(void)
{
    rtomo_fbp_phase p = {.delta_beta = 300.0, .energy_kev = 20.0,
                         .distance_m = 0.3, .pixel_m = 4e-6};
    return p;
}

/* first, count; 0 count = to the bottom. */
static const int subsets[][2] = {{0, 0}, {30, 12}, {0, 9}, {60, 12}, {35, 1}};
#define N_SUBSETS ((int)(sizeof subsets / sizeof subsets[0]))

typedef enum source { RANDOM_U16, RANDOM_F32, RANDOM_NO_FLAT, PHANTOM } source;
#define N_SOURCES 4

typedef struct scan {
    void *frames;               /* N_PROJ frames */
    rtomo_dtype dtype;
    float *dark, *flat;         /* NULL: no flat field */
    float *dark2, *flat2;       /* a refreshed field, or NULL */
} scan;

static size_t frame_size(void) { return (size_t)WIDTH * HEIGHT; }

static void make_scan(scan *s, source src, uint64_t seed)
{
    memset(s, 0, sizeof *s);
    const size_t n = frame_size();
    if (src != RANDOM_NO_FLAT) {
        s->dark = malloc(sizeof(float) * n);
        s->flat = malloc(sizeof(float) * n);
        ck_assert(s->dark && s->flat);
        test_fill_uniform(&seed, s->dark, n, 90.0, 110.0);
        test_fill_uniform(&seed, s->flat, n, 3000.0, 4000.0);
    }
    if (src == RANDOM_U16) {
        uint16_t *f = malloc(sizeof(uint16_t) * n * N_PROJ);
        ck_assert_ptr_nonnull(f);
        for (size_t i = 0; i < n * N_PROJ; i++)
            f[i] = (uint16_t)test_rand_int(&seed, 600, 3500);
        s->frames = f;
        s->dtype = RTOMO_DTYPE_U16;
        return;
    }
    float *f = malloc(sizeof(float) * n * N_PROJ);
    ck_assert_ptr_nonnull(f);
    s->frames = f;
    s->dtype = RTOMO_DTYPE_F32;
    if (src == RANDOM_F32 || src == RANDOM_NO_FLAT) {
        /* Without a flat field the samples are the intensity ratio. */
        const double lo = src == RANDOM_F32 ? 600.0 : 0.2;
        const double hi = src == RANDOM_F32 ? 3500.0 : 1.1;
        test_fill_uniform(&seed, f, n * N_PROJ, lo, hi);
        return;
    }
    rtomo_phantom ph;
    rtomo_phantom_init(&ph, WIDTH, HEIGHT);
    ph.mu_scale = 6.0 / WIDTH;
    for (int p = 0; p < N_PROJ; p++) {
        float *frame = f + (size_t)p * n;
        rtomo_phantom_project(&ph, M_PI * p / N_PROJ, frame);
        for (size_t i = 0; i < n; i++)
            frame[i] = s->dark[i] + (s->flat[i] - s->dark[i]) * expf(-frame[i]);
    }
    /* The phantom scan also refreshes its flat field mid-scan. */
    s->dark2 = malloc(sizeof(float) * n);
    s->flat2 = malloc(sizeof(float) * n);
    ck_assert(s->dark2 && s->flat2);
    test_fill_uniform(&seed, s->dark2, n, 95.0, 105.0);
    test_fill_uniform(&seed, s->flat2, n, 3200.0, 3600.0);
}

static void free_scan(scan *s)
{
    free(s->frames);
    free(s->dark);
    free(s->flat);
    free(s->dark2);
    free(s->flat2);
}

static void add_field(rtomo_fbp *plan, const float *dark, const float *flat)
{
    rtomo_error err;
    ck_assert_msg(rtomo_fbp_add_dark(plan, dark, RTOMO_DTYPE_F32, &err) == RTOMO_OK,
                  "%s", err.message);
    ck_assert_msg(rtomo_fbp_add_flat(plan, flat, RTOMO_DTYPE_F32, &err) == RTOMO_OK,
                  "%s", err.message);
}

static void feed_scan(rtomo_fbp *plan, const scan *s)
{
    rtomo_error err;
    if (s->flat)
        add_field(plan, s->dark, s->flat);
    const size_t bytes = frame_size() * rtomo_dtype_size(s->dtype);
    for (int p = 0; p < N_PROJ; p++) {
        if (p == 1 && s->flat2)
            add_field(plan, s->dark2, s->flat2);
        ck_assert_msg(rtomo_fbp_add_projection(plan, p,
                                               (const char *)s->frames + p * bytes,
                                               s->dtype, NAN, NAN, &err) == RTOMO_OK,
                      "%s", err.message);
    }
    ck_assert_int_eq(rtomo_fbp_sync(plan, &err), RTOMO_OK);
}

static float *filtered(rtomo_fbp *plan, int first, int count)
{
    rtomo_error err;
    const size_t per_row = (size_t)N_PROJ * WIDTH;
    float *out = malloc(sizeof(float) * per_row * (size_t)count);
    ck_assert_ptr_nonnull(out);
    test_poison(out, per_row * (size_t)count);
    for (int r = 0; r < count; r++)
        ck_assert_msg(rtomo_fbp_get_filtered(plan, first + r, out + r * per_row,
                                             &err) == RTOMO_OK,
                      "%s", err.message);
    return out;
}

static float *reconstructed(rtomo_fbp *plan, int first, int count)
{
    int *rows = malloc(sizeof(int) * (size_t)count);
    float *out = malloc(sizeof(float) * (size_t)count * WIDTH * WIDTH);
    ck_assert(rows && out);
    for (int r = 0; r < count; r++)
        rows[r] = first + r;
    test_poison(out, (size_t)count * WIDTH * WIDTH);
    test_reconstruct(plan, rows, count, out);
    free(rows);
    return out;
}

static rtomo_fbp *create_gpu(const rtomo_fbp_geometry *g,
                             rtomo_precision precision, int split)
{
    rtomo_engine_options opt;
    test_gpu_options(&opt, RTOMO_BP_ALU, 1, precision);
    rtomo_fbp *plan = test_create_split(g, &opt, split);
    rtomo_cuda_fbp_debug_slot slots[16];
    const int n = rtomo_cuda_fbp_debug_slots(plan, slots, 16);
    ck_assert_int_ge(n, 1);
    ck_assert_int_le(n, split);
    return plan;
}

/* Loop index: source x subset x split (1, 2, 3) x precision. */
START_TEST(gpu_matches_cpu)
{
    const source src = (source)(_i % N_SOURCES);
    const int subset = _i / N_SOURCES % N_SUBSETS;
    const int split = 1 + _i / (N_SOURCES * N_SUBSETS) % 3;
    const rtomo_precision precision = _i / (N_SOURCES * N_SUBSETS * 3)
                                          ? RTOMO_PRECISION_HALF
                                          : RTOMO_PRECISION_FLOAT;
    const int first = subsets[subset][0];
    const int count = subsets[subset][1] ? subsets[subset][1] : HEIGHT - first;
    scan s;
    make_scan(&s, src, test_seed(0x9a5e, _i));
    rtomo_fbp_geometry g = test_fbp_geometry(WIDTH, HEIGHT, N_PROJ);
    g.row_first = first;
    g.row_count = count;
    g.phase = test_phase();

    rtomo_fbp *cpu = test_create_cpu(&g, 0);
    rtomo_fbp *gpu = create_gpu(&g, precision, split);
    feed_scan(cpu, &s);
    feed_scan(gpu, &s);
    const size_t n_sino = (size_t)count * N_PROJ * WIDTH;
    float *sc = filtered(cpu, first, count), *sg = filtered(gpu, first, count);
    const double e_sino = test_rel_l2(sg, sc, n_sino);
    const int n_rec = count < 4 ? count : 4;
    float *rc = reconstructed(cpu, first, n_rec);
    float *rg = reconstructed(gpu, first, n_rec);
    const double e_rec = test_rel_l2(rg, rc, (size_t)n_rec * WIDTH * WIDTH);
    const double bound = test_cpu_bound(RTOMO_BP_ALU, precision, RTOMO_INTERP_LINEAR);
    printf("source %d rows [%d, %d) split %d %s: filtered %.3g, slices %.3g\n",
           (int)src, first, first + count, split,
           precision == RTOMO_PRECISION_HALF ? "half" : "float", e_sino, e_rec);
    ck_assert_msg(e_sino < FILTER_BOUND, "filtered sinograms differ by %g", e_sino);
    ck_assert_msg(e_rec < bound, "slices differ by %g (bound %g)", e_rec, bound);
    rtomo_fbp_destroy(cpu);
    rtomo_fbp_destroy(gpu);
    free(sc);
    free(sg);
    free(rc);
    free(rg);
    free_scan(&s);
}
END_TEST

/* A 2048-wide, 2048-row frame region (one frame per bank, one transform
 * of the padded array per frame) with the kept rows in the middle. */
START_TEST(large_frames_like_cpu)
{
    const int w = 2048, h = 2048, n_proj = 3, first = 1000, count = 8;
    const size_t n = (size_t)w * h;
    uint16_t *frames = malloc(sizeof(uint16_t) * n * n_proj);
    float *dark = malloc(sizeof(float) * n), *flat = malloc(sizeof(float) * n);
    ck_assert(frames && dark && flat);
    uint64_t seed = test_seed(0x1a29e, 0);
    test_fill_uniform(&seed, dark, n, 90.0, 110.0);
    test_fill_uniform(&seed, flat, n, 3000.0, 4000.0);
    for (size_t i = 0; i < n * n_proj; i++)
        frames[i] = (uint16_t)test_rand_int(&seed, 600, 3500);
    rtomo_fbp_geometry g = test_fbp_geometry(w, h, n_proj);
    g.row_first = first;
    g.row_count = count;
    g.phase = test_phase();
    rtomo_fbp *plans[2] = {test_create_cpu(&g, 0),
                           create_gpu(&g, RTOMO_PRECISION_FLOAT, 2)};
    float *out[2];
    rtomo_error err;
    for (int k = 0; k < 2; k++) {
        add_field(plans[k], dark, flat);
        for (int p = 0; p < n_proj; p++)
            ck_assert_msg(rtomo_fbp_add_projection(plans[k], p, frames + p * n,
                                                   RTOMO_DTYPE_U16, NAN, NAN,
                                                   &err) == RTOMO_OK,
                          "%s", err.message);
        ck_assert_int_eq(rtomo_fbp_sync(plans[k], &err), RTOMO_OK);
        out[k] = malloc(sizeof(float) * (size_t)count * n_proj * w);
        ck_assert_ptr_nonnull(out[k]);
        for (int r = 0; r < count; r++)
            ck_assert_int_eq(rtomo_fbp_get_filtered(plans[k], first + r,
                                                    out[k] + (size_t)r * n_proj * w,
                                                    &err), RTOMO_OK);
        rtomo_fbp_destroy(plans[k]);
    }
    const double e = test_rel_l2(out[1], out[0], (size_t)count * n_proj * w);
    printf("2048 x 2048: filtered %.3g\n", e);
    ck_assert_msg(e < FILTER_BOUND, "filtered sinograms differ by %g", e);
    free(out[0]);
    free(out[1]);
    free(frames);
    free(dark);
    free(flat);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cuda_fbp_phase");
    TCase *tc = tcase_create("phase");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, gpu_matches_cpu, 0, N_SOURCES * N_SUBSETS * 3 * 2);
    tcase_add_test(tc, large_frames_like_cpu);
    suite_add_tcase(s, tc);
    return test_run_gpu_suite(s);
}
