/*
 * test_cuda_fbp_half.c — half acquisition (an off-centre axis over 360
 * degrees, rtomo_engine.h) on the CUDA backend against the CPU backend,
 * through the public API.
 *
 * Phantom projections cropped to a physical detector with the axis near
 * its right edge and near its left (a fractional axis, so the virtual
 * detector is offset and the mirrored bins fall between bins), fed as
 * float32 line integrals and as uint16 counts with darks and flats (the
 * widened raw frames and flat field); with phase retrieval too (its own
 * packing kernel, then the bin weights); kept rows that start inside the
 * detector; one GPU split into 2 slots; float and half storage.
 *
 * Bounds, relative L2 against the CPU:
 *   filtered sinograms  2e-5 (float storage; phase retrieval 5e-5 as in
 *       test_cuda_fbp_phase.c): FFTW and cuFFT round differently, the
 *       weights are the same numbers (computed in double on both);
 *   slices              test_cpu_bound of the ALU kernel (float: 1e-4,
 *       half storage: 2.1e-3) and of the texture kernel (5e-3, 7e-3).
 * The measured figures are printed; on an H100 (CUDA 13): filtered
 * 2.1e-6 .. 2.2e-6 (phase 3.4e-5), slices ALU float 4.4e-6 .. 5.5e-6,
 * ALU half 3.3e-5 .. 8.1e-5, texture 5.5e-4 (float), 6.7e-4 (half).
 * Exits 77 without a GPU.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rtomo_sim.h"
#include "test_cuda_fbp_common.h"

#define WIDE 160        /* the phantom's detector */
#define PHYS 96         /* the physical detector */
#define HEIGHT 12
#define ROW_FIRST 2
#define ROW_COUNT 8
#define N_PROJ 360      /* over 360 degrees */
#define AXIS_WIDE 79.3  /* the axis on the wide detector */
#define FILTER_BOUND 2e-5
#define PHASE_FILTER_BOUND 5e-5

typedef enum source { LINE_INTEGRALS, COUNTS, COUNTS_PHASE } source;

typedef struct half_case {
    int first;          /* the physical detector's first bin on the wide one */
    source src;
    rtomo_precision precision;
    rtomo_bp_kernel kernel;
    int split;
} half_case;

static const half_case cases[] = {
    {0, LINE_INTEGRALS, RTOMO_PRECISION_FLOAT, RTOMO_BP_ALU, 1},
    {WIDE - PHYS, LINE_INTEGRALS, RTOMO_PRECISION_FLOAT, RTOMO_BP_ALU, 1},
    {0, COUNTS, RTOMO_PRECISION_FLOAT, RTOMO_BP_ALU, 2},
    {WIDE - PHYS, COUNTS, RTOMO_PRECISION_HALF, RTOMO_BP_ALU, 1},
    {0, COUNTS, RTOMO_PRECISION_HALF, RTOMO_BP_TEXTURE, 1},
    {WIDE - PHYS, LINE_INTEGRALS, RTOMO_PRECISION_FLOAT, RTOMO_BP_TEXTURE, 2},
    {0, COUNTS_PHASE, RTOMO_PRECISION_FLOAT, RTOMO_BP_ALU, 1},
    {WIDE - PHYS, COUNTS_PHASE, RTOMO_PRECISION_HALF, RTOMO_BP_ALU, 2},
};
#define N_CASES ((int)(sizeof cases / sizeof cases[0]))

static double angle_of(int p)
{
    return 0.37 + p * (2 * M_PI / N_PROJ);
}

/* N_PROJ frames of HEIGHT x PHYS line integrals: the wide detector's
 * bins [first, first + PHYS). */
static float *project(int first)
{
    rtomo_phantom ph;
    rtomo_phantom_init(&ph, WIDE, HEIGHT);
    ph.axis = AXIS_WIDE;
    float *wide = malloc(sizeof(float) * WIDE * HEIGHT);
    float *out = malloc(sizeof(float) * N_PROJ * PHYS * HEIGHT);
    ck_assert(wide && out);
    for (int p = 0; p < N_PROJ; p++) {
        rtomo_phantom_project(&ph, angle_of(p), wide);
        for (int r = 0; r < HEIGHT; r++)
            memcpy(out + ((size_t)p * HEIGHT + r) * PHYS,
                   wide + (size_t)r * WIDE + first, sizeof(float) * PHYS);
    }
    free(wide);
    return out;
}

static void feed(rtomo_fbp *plan, const float *proj, source src)
{
    const size_t n = (size_t)PHYS * HEIGHT;
    rtomo_error err;
    if (src == LINE_INTEGRALS) {
        for (int p = 0; p < N_PROJ; p++)
            ck_assert_msg(rtomo_fbp_add_projection(plan, p, proj + p * n,
                                                   RTOMO_DTYPE_F32, NAN, NAN,
                                                   &err) == RTOMO_OK,
                          "%s", err.message);
        return;
    }
    uint16_t *frame = malloc(sizeof(uint16_t) * n);
    ck_assert_ptr_nonnull(frame);
    rtomo_camera cam;
    rtomo_camera_init(&cam);
    cam.noise = 1;
    rtomo_camera_dark(&cam, n, frame);
    ck_assert_int_eq(rtomo_fbp_add_dark(plan, frame, RTOMO_DTYPE_U16, NULL),
                     RTOMO_OK);
    rtomo_camera_flat(&cam, n, frame);
    ck_assert_int_eq(rtomo_fbp_add_flat(plan, frame, RTOMO_DTYPE_U16, NULL),
                     RTOMO_OK);
    for (int p = 0; p < N_PROJ; p++) {
        rtomo_camera_expose(&cam, proj + p * n, n, frame);
        ck_assert_msg(rtomo_fbp_add_projection(plan, p, frame, RTOMO_DTYPE_U16,
                                               NAN, NAN, &err) == RTOMO_OK,
                      "%s", err.message);
    }
    free(frame);
}

static float *filtered(rtomo_fbp *plan, int width)
{
    const size_t per_row = (size_t)N_PROJ * width;
    float *out = malloc(sizeof(float) * per_row * ROW_COUNT);
    ck_assert_ptr_nonnull(out);
    test_poison(out, per_row * ROW_COUNT);
    rtomo_error err;
    for (int r = 0; r < ROW_COUNT; r++)
        ck_assert_msg(rtomo_fbp_get_filtered(plan, ROW_FIRST + r,
                                             out + r * per_row, &err) == RTOMO_OK,
                      "%s", err.message);
    return out;
}

static float *slices(rtomo_fbp *plan, int size)
{
    static const int rows[] = {ROW_FIRST, ROW_FIRST + 3, ROW_FIRST + 7};
    float *out = malloc(sizeof(float) * 3 * size * size);
    ck_assert_ptr_nonnull(out);
    test_poison(out, (size_t)3 * size * size);
    test_reconstruct(plan, rows, 3, out);
    return out;
}

START_TEST(gpu_matches_cpu)
{
    const half_case *c = &cases[_i];
    float *proj = project(c->first);
    rtomo_fbp_geometry g = test_fbp_geometry(PHYS, HEIGHT, N_PROJ);
    g.angle_start = angle_of(0);
    g.angle_step = 2 * M_PI / N_PROJ;
    g.axis = AXIS_WIDE - c->first;
    g.half_acquisition = 1;
    g.row_first = ROW_FIRST;
    g.row_count = ROW_COUNT;
    if (c->src == COUNTS_PHASE) {
        rtomo_fbp_phase ph = {.delta_beta = 300.0, .energy_kev = 20.0,
                              .distance_m = 0.3, .pixel_m = 4e-6};
        g.phase = ph;
    }
    rtomo_fbp *cpu = test_create_cpu(&g, 0);
    rtomo_engine_options opt;
    test_gpu_options(&opt, c->kernel, 1, c->precision);
    rtomo_fbp *gpu = test_create_split(&g, &opt, c->split);
    const rtomo_fbp_geometry *vg = rtomo_fbp_geometry_of(gpu);
    ck_assert_int_eq(vg->det_width, rtomo_fbp_geometry_of(cpu)->det_width);
    ck_assert_int_eq(vg->frame_offset, rtomo_fbp_geometry_of(cpu)->frame_offset);
    ck_assert_int_gt(vg->det_width, PHYS);
    const int width = vg->det_width, size = vg->slice_size;

    feed(cpu, proj, c->src);
    feed(gpu, proj, c->src);
    float *fc = filtered(cpu, width), *fg = filtered(gpu, width);
    const double e_filter = test_rel_l2(fg, fc, (size_t)ROW_COUNT * N_PROJ * width);
    float *sc = slices(cpu, size), *sg = slices(gpu, size);
    const double e_slice = test_rel_l2(sg, sc, (size_t)3 * size * size);
    const double filter_bound = c->src == COUNTS_PHASE ? PHASE_FILTER_BOUND
                                                       : FILTER_BOUND;
    const double slice_bound = test_cpu_bound(c->kernel, c->precision,
                                              RTOMO_INTERP_LINEAR);
    printf("case %d (axis %g of %d bins, virtual %d at offset %d, %s, %s, %s, "
           "split %d): filtered %.3g (bound %g), slices %.3g (bound %g)\n", _i,
           g.axis, PHYS, width, vg->frame_offset,
           c->src == LINE_INTEGRALS ? "float32" : c->src == COUNTS
                                                      ? "uint16 + flats"
                                                      : "uint16 + phase",
           test_mode_name(c->kernel, 1, c->precision, RTOMO_INTERP_LINEAR),
           c->precision == RTOMO_PRECISION_HALF ? "half" : "float", c->split,
           e_filter, filter_bound, e_slice, slice_bound);
    /* Half storage: the filtered data read back are the stored halves. */
    if (c->precision == RTOMO_PRECISION_FLOAT)
        ck_assert_msg(e_filter < filter_bound, "filtered: %g", e_filter);
    ck_assert_msg(e_slice < slice_bound, "slices: %g", e_slice);
    rtomo_fbp_destroy(cpu);
    rtomo_fbp_destroy(gpu);
    free(fc);
    free(fg);
    free(sc);
    free(sg);
    free(proj);
}
END_TEST

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    Suite *s = suite_create("cuda_fbp_half");
    TCase *tc = tcase_create("half");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, gpu_matches_cpu, 0, N_CASES);
    suite_add_tcase(s, tc);
    return test_run_gpu_suite(s);
}
