/*
 * test_cuda_fbp_flats.c — flats before and after the projections
 * (rtomo_fbp_interpolate_flats) in the CUDA FBP backend against the CPU
 * backend (the reference, checked against the truth and the formula in
 * test_fbp_flats.c).
 *
 * Raw frames exposed with a flat field drifting by up to 3% per pixel go
 * to a CPU plan and a GPU plan, the flat after the projections too, and
 * both interpolate.  Compared: the corrected filtered sinograms (float on
 * both backends whatever the storage precision): relative L2 <= 1e-5
 * (cuFFT against FFTW); and the slices, within the mode's usual bound
 * (test_cpu_bound).  Float and half, one slot and three
 * (RTOMO_CUDA_FBP_SPLIT: each slot corrects its own rows), some
 * projections missing.  Exit 77 without a GPU.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_fbp_debug.h"
#include "rtomo_sim.h"
#include "test_cuda_fbp_common.h"

#define W 128
#define H 12
#define N_PROJ 150
#define SINO_BOUND 1e-5

typedef struct scan {
    float dark[W * H], before[W * H], after[W * H];
    float *raw[N_PROJ];
    unsigned char fed[N_PROJ];
} scan;

static void make_scan(scan *s, uint64_t seed)
{
    rtomo_phantom ph;
    rtomo_phantom_init(&ph, W, H);
    float *lines = malloc(sizeof(float) * W * H);
    ck_assert_ptr_nonnull(lines);
    for (int i = 0; i < W * H; i++) {
        s->dark[i] = 100.f;
        s->before[i] = (float)(100 + 2e4 * (1 + 0.1 * sin(0.2 * i)));
        s->after[i] = (float)(100 + (s->before[i] - 100) *
                                        (1 + test_rand_real(&seed, -0.03, 0.03)));
    }
    for (int p = 0; p < N_PROJ; p++) {
        s->raw[p] = malloc(sizeof(float) * W * H);
        ck_assert_ptr_nonnull(s->raw[p]);
        s->fed[p] = test_rand_int(&seed, 0, 9) != 0;
        rtomo_phantom_project(&ph, M_PI * p / N_PROJ, lines);
        const double t = (double)p / (N_PROJ - 1);
        for (int i = 0; i < W * H; i++) {
            const double flat = (1 - t) * s->before[i] + t * s->after[i];
            s->raw[p][i] = (float)(100 + (flat - 100) * exp(-lines[i]));
        }
    }
    free(lines);
}

static void feed(rtomo_fbp *plan, const scan *s)
{
    rtomo_error err;
    ck_assert(rtomo_fbp_add_dark(plan, s->dark, RTOMO_DTYPE_F32, &err) == RTOMO_OK);
    ck_assert(rtomo_fbp_add_flat(plan, s->before, RTOMO_DTYPE_F32, &err) == RTOMO_OK);
    for (int p = 0; p < N_PROJ; p++)
        if (s->fed[p])
            ck_assert(rtomo_fbp_add_projection(plan, p, s->raw[p],
                                               RTOMO_DTYPE_F32, NAN, NAN,
                                               &err) == RTOMO_OK);
    ck_assert(rtomo_fbp_add_flat_after(plan, s->after, RTOMO_DTYPE_F32, &err) == RTOMO_OK);
    rtomo_status st = rtomo_fbp_interpolate_flats(plan, &err);
    ck_assert_msg(st == RTOMO_OK, "interpolate_flats: %s", err.message);
}

static float *filtered(rtomo_fbp *plan)
{
    const size_t sino = (size_t)N_PROJ * W;
    float *out = malloc(sizeof(float) * sino * H);
    ck_assert_ptr_nonnull(out);
    rtomo_error err;
    for (int r = 0; r < H; r++)
        ck_assert(rtomo_fbp_get_filtered(plan, r, out + r * sino, &err) ==
                  RTOMO_OK);
    return out;
}

static float *slices(rtomo_fbp *plan)
{
    int rows[H];
    for (int r = 0; r < H; r++)
        rows[r] = r;
    float *out = malloc(sizeof(float) * W * W * H);
    ck_assert_ptr_nonnull(out);
    test_reconstruct(plan, rows, H, out);
    return out;
}

START_TEST(interpolated_like_the_cpu)
{
    const rtomo_precision precision =
        _i % 2 ? RTOMO_PRECISION_HALF : RTOMO_PRECISION_FLOAT;
    const int split = _i / 2 ? 3 : 1;
    scan s;
    make_scan(&s, test_seed(0xf1a9, _i));
    rtomo_fbp_geometry g = test_fbp_geometry(W, H, N_PROJ);
    rtomo_engine_options opt;
    test_gpu_options(&opt, RTOMO_BP_ALU, 1, precision);
    rtomo_fbp *gpu = test_create_split(&g, &opt, split);
    rtomo_cuda_fbp_debug_slot slot[16];
    ck_assert_int_eq(rtomo_cuda_fbp_debug_slots(gpu, slot, 16), split);
    rtomo_fbp *cpu = test_create_cpu(&g, 0);
    feed(cpu, &s);
    feed(gpu, &s);
    float *sino_cpu = filtered(cpu), *sino_gpu = filtered(gpu);
    const double e_sino = test_rel_l2(sino_gpu, sino_cpu, (size_t)N_PROJ * W * H);
    float *img_cpu = slices(cpu), *img_gpu = slices(gpu);
    const double e_img = test_rel_l2(img_gpu, img_cpu, (size_t)W * W * H);
    const double bound = test_cpu_bound(RTOMO_BP_ALU, precision,
                                        RTOMO_INTERP_LINEAR);
    printf("flats %s, %d slot(s): filtered %.2e (bound %.0e), slices %.2e "
           "(bound %.1e)\n", precision == RTOMO_PRECISION_HALF ? "half" : "float",
           split, e_sino, SINO_BOUND, e_img, bound);
    ck_assert_msg(e_sino <= SINO_BOUND, "filtered sinograms %.3g", e_sino);
    ck_assert_msg(e_img <= bound, "slices %.3g", e_img);
    free(sino_cpu);
    free(sino_gpu);
    free(img_cpu);
    free(img_gpu);
    rtomo_fbp_destroy(cpu);
    rtomo_fbp_destroy(gpu);
    for (int p = 0; p < N_PROJ; p++)
        free(s.raw[p]);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cuda_fbp_flats");
    TCase *tc = tcase_create("flats");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, interpolated_like_the_cpu, 0, 4);
    suite_add_tcase(s, tc);
    return test_run_gpu_suite(s);
}
