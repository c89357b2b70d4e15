/*
 * test_cuda_fbp_bp.c — every back-projector of the CUDA backend (kernel x
 * slices per pass x precision x interpolation) against the CPU backend, on
 * fresh random filtered sinograms fed through rtomo_fbp_set_filtered.
 *
 * The geometry is chosen to break lazy indexing: an odd detector width, a
 * slice grid of another size, an off-centre axis with per-projection
 * shifts, irregular angles, a region of interest at an odd offset, a
 * number of projections that is a multiple of no batch size, and rows
 * requested out of order so that the last group of a multi-slice pass is
 * short.  A second case has more than 16384 projections, back-projected
 * from one texture and from textures of 4096 projections each.  With the
 * circular field of view every mode again, on a grid large enough that
 * whole tiles lie outside (and with textures of 4096 projections, whose
 * later chunks add into the first's): the CPU's masked slices within the
 * same bounds, and exact zeros outside.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rtomo_sim.h"
#include "test_cuda_fbp_common.h"

/* The four kernel families, for the tests that loop over them alone. */
static const rtomo_bp_kernel kernels[] = {
    RTOMO_BP_STANDARD, RTOMO_BP_TEXTURE, RTOMO_BP_ALU, RTOMO_BP_HYBRID};

typedef struct bp_case {
    rtomo_fbp_geometry g;
    double *angles, *shifts;
    float *sinograms;           /* row_count x n_proj x det_width */
    int rows[16];
    int n_rows;
    size_t image;               /* pixels of one output image */
} bp_case;

/* Random irregular geometry around the given sizes and random sinograms
 * (smoothed for nearest-neighbour modes). */
static void make_case(bp_case *c, uint64_t seed, int width, int height,
                      int n_proj, int slice, rtomo_interp interp)
{
    rtomo_fbp_geometry *g = &c->g;
    *g = test_fbp_geometry(width, height, n_proj);
    c->angles = malloc(sizeof(double) * (size_t)n_proj);
    c->shifts = malloc(sizeof(double) * (size_t)n_proj);
    ck_assert(c->angles && c->shifts);
    const double start = rtomo_random_uniform(&seed);
    for (int p = 0; p < n_proj; p++) {
        c->angles[p] = start + M_PI * (p + 0.3 * rtomo_random_uniform(&seed)) / n_proj;
        c->shifts[p] = 4.0 * rtomo_random_uniform(&seed) - 2.0;
    }
    g->angles = c->angles;
    g->axis_shift = c->shifts;
    g->axis = 0.5 * (width - 1) + 2.0 * rtomo_random_uniform(&seed) - 0.7;
    g->interp = interp;
    g->row_first = 1;
    g->row_count = height - 2;
    g->slice_size = slice;
    g->roi_x = slice / 13;
    g->roi_y = slice / 9;
    g->roi_width = slice - g->roi_x - 3;
    g->roi_height = slice - g->roi_y - slice / 5;
    const size_t n = (size_t)g->row_count * (size_t)n_proj * (size_t)width;
    c->sinograms = malloc(sizeof(float) * n);
    ck_assert_ptr_nonnull(c->sinograms);
    test_fill_uniform(&seed, c->sinograms, n, -1.0, 1.0);
    if (interp == RTOMO_INTERP_NEAREST)
        test_smooth_lines(c->sinograms, (size_t)g->row_count * n_proj, width, 16);
    /* Every kept row, out of order: the last multi-slice group is short. */
    c->n_rows = 0;
    for (int r = g->row_count - 1; r >= 0; r -= 2)
        c->rows[c->n_rows++] = g->row_first + r;
    for (int r = g->row_count - 2; r >= 0; r -= 2)
        c->rows[c->n_rows++] = g->row_first + r;
    c->image = (size_t)g->roi_width * (size_t)g->roi_height;
}

static void free_case(bp_case *c)
{
    free(c->angles);
    free(c->shifts);
    free(c->sinograms);
}

/* Reconstruct the case's rows on `plan` (after feeding the sinograms) into
 * a freshly poisoned array. */
static float *run_plan(rtomo_fbp *plan, const bp_case *c)
{
    rtomo_error err;
    rtomo_status st = rtomo_fbp_set_filtered(plan, c->g.row_first, c->g.row_count,
                                             c->sinograms, &err);
    ck_assert_msg(st == RTOMO_OK, "set_filtered: %s", err.message);
    float *out = malloc(sizeof(float) * c->image * (size_t)c->n_rows);
    ck_assert_ptr_nonnull(out);
    test_poison(out, c->image * (size_t)c->n_rows);
    test_reconstruct(plan, c->rows, c->n_rows, out);
    return out;
}

static float *run_cpu(const bp_case *c)
{
    rtomo_fbp *plan = test_create_cpu(&c->g, 0);
    float *out = run_plan(plan, c);
    rtomo_fbp_destroy(plan);
    return out;
}

/* GPU mode against a CPU reference; returns the relative L2 error.  With
 * `outside` (the case masked), first checks the GPU's zeros outside the
 * circle and counts them in one image. */
static double compare_mode(const bp_case *c, const float *ref,
                           rtomo_bp_kernel kernel, int slices,
                           rtomo_precision precision, const char *name,
                           long *outside)
{
    rtomo_engine_options opt;
    test_gpu_options(&opt, kernel, slices, precision);
    rtomo_fbp *plan = test_create(&c->g, &opt);
    float *out = run_plan(plan, c);
    if (outside)
        *outside = test_zeros_outside_fov(&c->g, out, c->n_rows, name);
    double rel = test_rel_l2(out, ref, c->image * (size_t)c->n_rows);
    free(out);
    rtomo_fbp_destroy(plan);
    return rel;
}

/* Masked, with the texture path's projection chunks (the later ones add
 * into the first's: outside pixels must stay the first's 0). */
START_TEST(chunked_masked_matches_cpu)
{
    const rtomo_bp_kernel kernel = kernels[_i];
    bp_case c;
    make_case(&c, 0xf1a26e00ULL + (uint64_t)_i, 23, 4, 9001, 28,
              RTOMO_INTERP_LINEAR);
    c.g.field_of_view = RTOMO_FOV_CIRCLE;
    float *ref = run_cpu(&c);
    setenv("RTOMO_CUDA_FBP_TEXTURE_CHUNK", "4096", 1);
    const char *name = test_mode_name(kernel, 1, RTOMO_PRECISION_FLOAT,
                                      RTOMO_INTERP_LINEAR);
    long outside;
    const double rel = compare_mode(&c, ref, kernel, 1,
                                      RTOMO_PRECISION_FLOAT, name, &outside);
    unsetenv("RTOMO_CUDA_FBP_TEXTURE_CHUNK");
    const double bound = test_cpu_bound(kernel, RTOMO_PRECISION_FLOAT,
                                        RTOMO_INTERP_LINEAR);
    printf("9001 projections (chunks of 4096) circle %-26s relative L2 "
           "%.3e (bound %.1e), %ld pixels outside\n", name, rel, bound,
           outside);
    ck_assert_msg(rel <= bound && outside > 0, "%s, chunked circle: "
                  "relative L2 %g exceeds %g", name, rel, bound);
    free(ref);
    free_case(&c);
}
END_TEST

/* _i < TEST_MODES: every mode on a 96 grid; then every mode again with the
 * circular field of view, on a 256 grid round a circle of about 48 pixels
 * (whole 64-pixel tiles fall outside, others straddle the edge), with the
 * GPU's zeros outside checked too. */
START_TEST(every_mode_matches_cpu)
{
    const int masked = _i >= TEST_MODES;
    rtomo_bp_kernel kernel;
    int slices;
    rtomo_precision precision;
    rtomo_interp interp;
    test_mode(_i % TEST_MODES, &kernel, &slices, &precision, &interp);
    bp_case c;
    make_case(&c, (masked ? 0xf0c0ffee00ULL : 0xb0c0ffee00ULL) +
                      (uint64_t)(_i % TEST_MODES),
              101, 9, 181, masked ? 256 : 96, interp);
    if (masked)
        c.g.field_of_view = RTOMO_FOV_CIRCLE;
    float *ref = run_cpu(&c);
    const char *name = test_mode_name(kernel, slices, precision, interp);
    long outside = 0;
    const double rel = compare_mode(&c, ref, kernel, slices, precision, name,
                                    masked ? &outside : NULL);
    const double bound = test_cpu_bound(kernel, precision, interp);
    if (masked)
        printf("bp circle %-26s relative L2 %.3e (bound %.1e), %ld of %zu "
               "pixels outside are 0\n", name, rel, bound, outside, c.image);
    else
        printf("bp %-26s relative L2 %.3e (bound %.1e)\n", name, rel, bound);
    ck_assert_msg(rel <= bound, "%s%s: relative L2 error %g exceeds %g", name,
                  masked ? ", circle" : "", rel, bound);
    free(ref);
    free_case(&c);
}
END_TEST

/* The hybrid kernel's texture path alone (ratio 1): with the default
 * ratio a small grid may give most blocks to the ALU path. */
START_TEST(hybrid_texture_path_matches_cpu)
{
    rtomo_bp_kernel kernel;
    int slices;
    rtomo_precision precision;
    rtomo_interp interp;
    test_mode(_i, &kernel, &slices, &precision, &interp);   /* _i < 12 */
    bp_case c;
    make_case(&c, 0x4b1d00ULL + (uint64_t)_i, 101, 9, 181, 96, interp);
    float *ref = run_cpu(&c);
    rtomo_engine_options opt;
    test_gpu_options(&opt, RTOMO_BP_HYBRID, slices, precision);
    opt.hybrid_ratio = 1.0;
    rtomo_fbp *plan = test_create(&c.g, &opt);
    float *out = run_plan(plan, &c);
    const double rel = test_rel_l2(out, ref, c.image * (size_t)c.n_rows);
    const double bound = test_cpu_bound(RTOMO_BP_TEXTURE, precision, interp);
    const char *name = test_mode_name(RTOMO_BP_HYBRID, slices, precision, interp);
    printf("bp %-26s ratio 1: relative L2 %.3e (bound %.1e)\n", name, rel, bound);
    ck_assert_msg(rel <= bound, "%s, texture path: relative L2 %g exceeds %g",
                  name, rel, bound);
    rtomo_fbp_destroy(plan);
    free(out);
    free(ref);
    free_case(&c);
}
END_TEST

/* Half nearest tile kernels whose ALU blocks keep the cache as the texels
 * are stored (RTOMO_CUDA_FBP_STORED forces the share): the ALU kernel gives
 * the float cache's sums to the bit at every share (the conversion from
 * float16 is exact either way, the order of the sums the same), and the
 * hybrid kernel with every ALU block stored matches the CPU.  _i: slices
 * per pass 1, 2, 4. */
START_TEST(stored_cache_sums_are_the_same)
{
    static const int slice_choices[] = {1, 2, 4};
    const int slices = slice_choices[_i];
    bp_case c;
    make_case(&c, 0x57023dULL + (uint64_t)_i, 101, 9, 181, 96, RTOMO_INTERP_NEAREST);
    float *ref = run_cpu(&c);
    const size_t n = c.image * (size_t)c.n_rows;
    float *out[3];
    static const char *shares[] = {"0", "1", "0.5"};
    for (int k = 0; k < 3; k++) {
        char *old = test_swap_env("RTOMO_CUDA_FBP_STORED", shares[k]);
        rtomo_engine_options opt;
        test_gpu_options(&opt, RTOMO_BP_ALU, slices, RTOMO_PRECISION_HALF);
        rtomo_fbp *plan = test_create(&c.g, &opt);
        out[k] = run_plan(plan, &c);
        rtomo_fbp_destroy(plan);
        test_restore_env("RTOMO_CUDA_FBP_STORED", old);
    }
    const double rel = test_rel_l2(out[0], ref, n);
    printf("bp alu/%d/half/nearest, stored shares 0, 1, 0.5: relative L2 %.3e, "
           "same bits %d %d\n", slices, rel,
           memcmp(out[0], out[1], sizeof(float) * n) == 0,
           memcmp(out[0], out[2], sizeof(float) * n) == 0);
    ck_assert_msg(memcmp(out[0], out[1], sizeof(float) * n) == 0,
                  "alu/%d: every block stored differs from the float cache", slices);
    ck_assert_msg(memcmp(out[0], out[2], sizeof(float) * n) == 0,
                  "alu/%d: half the blocks stored differs from the float cache", slices);

    char *old = test_swap_env("RTOMO_CUDA_FBP_STORED", "1");
    rtomo_engine_options opt;
    test_gpu_options(&opt, RTOMO_BP_HYBRID, slices, RTOMO_PRECISION_HALF);
    rtomo_fbp *plan = test_create(&c.g, &opt);
    float *hybrid = run_plan(plan, &c);
    rtomo_fbp_destroy(plan);
    test_restore_env("RTOMO_CUDA_FBP_STORED", old);
    const double rel_h = test_rel_l2(hybrid, ref, n);
    const double bound = test_cpu_bound(RTOMO_BP_HYBRID, RTOMO_PRECISION_HALF,
                                        RTOMO_INTERP_NEAREST);
    printf("bp hybrid/%d/half/nearest, every ALU block stored: relative L2 %.3e "
           "(bound %.1e)\n", slices, rel_h, bound);
    ck_assert_msg(rel_h <= bound, "hybrid/%d stored: relative L2 %g exceeds %g",
                  slices, rel_h, bound);
    free(hybrid);
    for (int k = 0; k < 3; k++)
        free(out[k]);
    free(ref);
    free_case(&c);
}
END_TEST

/* More projections than the old 16384 limits, in one texture and in
 * chunks of 4096 (RTOMO_CUDA_FBP_TEXTURE_CHUNK). */
START_TEST(many_projections_match_cpu)
{
    const int chunked = _i / 8;
    const rtomo_bp_kernel kernel = kernels[(_i / 2) % 4];
    const int wide = _i % 2;    /* 2 half slices, nearest; else 1 float linear */
    const rtomo_interp interp = wide ? RTOMO_INTERP_NEAREST : RTOMO_INTERP_LINEAR;
    const rtomo_precision precision = wide ? RTOMO_PRECISION_HALF : RTOMO_PRECISION_FLOAT;
    bp_case c;
    make_case(&c, 0x1a26e00ULL + (uint64_t)_i, 23, 4, 20011, 20, interp);
    float *ref = run_cpu(&c);
    if (chunked)
        setenv("RTOMO_CUDA_FBP_TEXTURE_CHUNK", "4096", 1);
    const double rel = compare_mode(&c, ref, kernel, wide ? 2 : 1, precision, NULL,
                                    NULL);
    unsetenv("RTOMO_CUDA_FBP_TEXTURE_CHUNK");
    const double bound = test_cpu_bound(kernel, precision, interp);
    const char *name = test_mode_name(kernel, wide ? 2 : 1, precision, interp);
    printf("20011 projections%s %-26s relative L2 %.3e (bound %.1e)\n",
           chunked ? " (chunks of 4096)" : "", name, rel, bound);
    ck_assert_msg(rel <= bound, "%s, %d projections%s: relative L2 %g exceeds %g",
                  name, c.g.n_proj, chunked ? " in chunks" : "", rel, bound);
    free(ref);
    free_case(&c);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cuda_fbp_bp");
    TCase *tc = tcase_create("backprojection");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, every_mode_matches_cpu, 0, 2 * TEST_MODES);
    tcase_add_loop_test(tc, hybrid_texture_path_matches_cpu, 0, TEST_MODES / 4);
    tcase_add_loop_test(tc, many_projections_match_cpu, 0, 16);
    tcase_add_loop_test(tc, stored_cache_sums_are_the_same, 0, 3);
    tcase_add_loop_test(tc, chunked_masked_matches_cpu, 0, 4);
    suite_add_tcase(s, tc);
    return test_run_gpu_suite(s);
}
