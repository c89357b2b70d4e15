/*
 * test_cuda_fbp_rings.c — ring removal in the CUDA FBP backend against the
 * CPU backend (the reference, tested on its own in test_fbp_rings.c).
 *
 * The same frames go to a CPU plan and a GPU plan with rings on, then
 * remove_rings on both.  Compared:
 *   - the corrected filtered sinograms (float storage on both backends, so
 *     whatever the precision): relative L2 <= 1e-5 (cuFFT against FFTW and
 *     the sums' last bits; measured about 1e-7);
 *   - the GPU's slices against the GPU's own slices of the CPU's corrected
 *     sinograms (set_filtered, same options): the back-projection is then
 *     the same, and what is left is the correction: 1e-5 for float, 1e-3
 *     for half storage (a last-bit change can move a half rounding);
 *   - the GPU's slices against the CPU's: the mode's usual bound
 *     (test_cpu_bound).
 * Variants: float and half, one slot and three (RTOMO_CUDA_FBP_SPLIT, the
 * same GPU split, each slot with its own rows), irregular angles with
 * angle weights, missing projections, line integrals or raw frames with
 * flats, one call or two (remove_rings half way); and the striped
 * Shepp-Logan phantom (256 bins, 360 projections).  Exit 77 without a GPU.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_fbp_debug.h"
#include "rtomo_sim.h"
#include "test_cuda_fbp_common.h"

#define SINO_BOUND 1e-5
#define FLOAT_BOUND 1e-5
#define HALF_BOUND 1e-3

typedef struct scan {
    rtomo_fbp_geometry g;
    double *angles;
    float **frames;             /* n_proj frames of det_height x det_width */
    unsigned char *fed;
    int raw;                    /* frames are intensities: feed a flat */
    float *flat;
} scan;

static void free_scan(scan *s)
{
    for (int p = 0; p < s->g.n_proj; p++)
        free(s->frames[p]);
    free(s->frames);
    free(s->fed);
    free(s->angles);
    free(s->flat);
}

/* Random line integrals with column offsets (or the striped phantom when
 * `phantom`), as intensities over a flat of 1e4 when raw. */
static void make_scan(scan *s, uint64_t seed, int width, int height,
                      int row_first, int rows, int n_proj, int weighted,
                      int raw, int phantom)
{
    memset(s, 0, sizeof *s);
    s->g = test_fbp_geometry(width, height, n_proj);
    s->g.row_first = row_first;
    s->g.row_count = rows;
    s->g.rings = RTOMO_RINGS_COLUMN_MEAN;
    s->g.rings_width = phantom ? 0 : 9;
    s->angles = malloc(sizeof(double) * n_proj);
    s->frames = malloc(sizeof(float *) * n_proj);
    s->fed = malloc((size_t)n_proj);
    ck_assert(s->angles && s->frames && s->fed);
    for (int p = 0; p < n_proj; p++)
        s->angles[p] = M_PI * (p + (weighted ? test_rand_real(&seed, -0.4, 0.4)
                                             : 0.0)) / n_proj;
    s->g.angles = s->angles;
    s->g.angle_weights = weighted;
    const size_t frame = (size_t)width * height;
    double *offset = calloc((size_t)width, sizeof(double));
    ck_assert_ptr_nonnull(offset);
    for (int x = 0; x < width; x++)
        if (!phantom || test_rand_int(&seed, 0, 11) == 0)
            offset[x] = test_rand_real(&seed, -0.03, 0.03);
    rtomo_phantom ph;
    rtomo_phantom_init(&ph, width, height);
    for (int p = 0; p < n_proj; p++) {
        float *f = s->frames[p] = malloc(sizeof(float) * frame);
        ck_assert_ptr_nonnull(f);
        if (phantom)
            rtomo_phantom_project(&ph, s->angles[p], f);
        else
            test_fill_uniform(&seed, f, frame, 0.0, 1.0);
        for (size_t i = 0; i < frame; i++) {
            f[i] += (float)offset[i % width];
            if (raw)
                f[i] = (float)(1e4 * exp(-f[i]));
        }
        s->fed[p] = phantom || test_rand_int(&seed, 0, 7) != 0;
    }
    free(offset);
    s->raw = raw;
    if (raw) {
        s->flat = malloc(sizeof(float) * frame);
        ck_assert_ptr_nonnull(s->flat);
        for (size_t i = 0; i < frame; i++)
            s->flat[i] = 1e4f;
    }
}

static void feed_scan(rtomo_fbp *plan, const scan *s, int instalments)
{
    rtomo_error err;
    if (s->raw)
        ck_assert(rtomo_fbp_add_flat(plan, s->flat, RTOMO_DTYPE_F32, &err) ==
                  RTOMO_OK);
    const int n = s->g.n_proj;
    for (int part = 0; part < instalments; part++) {
        for (int p = 0; p < n; p++) {
            int in_part = instalments == 1 || (p < n / 2) == (part == 0);
            if (!s->fed[p] || !in_part)
                continue;
            rtomo_status st = rtomo_fbp_add_projection(
                plan, p, s->frames[p], RTOMO_DTYPE_F32, NAN, NAN, &err);
            ck_assert_msg(st == RTOMO_OK, "projection %d: %s", p, err.message);
        }
        rtomo_status st = rtomo_fbp_remove_rings(plan, &err);
        ck_assert_msg(st == RTOMO_OK, "remove_rings: %s", err.message);
    }
}

/* All kept rows' filtered sinograms, one after the other. */
static float *filtered(rtomo_fbp *plan, const rtomo_fbp_geometry *g)
{
    const size_t sino = (size_t)g->n_proj * g->det_width;
    float *out = malloc(sizeof(float) * sino * g->row_count);
    ck_assert_ptr_nonnull(out);
    rtomo_error err;
    for (int r = 0; r < g->row_count; r++)
        ck_assert(rtomo_fbp_get_filtered(plan, g->row_first + r,
                                         out + r * sino, &err) == RTOMO_OK);
    return out;
}

static float *slices(rtomo_fbp *plan, const rtomo_fbp_geometry *g, size_t *n)
{
    int rows[64];
    ck_assert_int_le(g->row_count, 64);
    for (int r = 0; r < g->row_count; r++)
        rows[r] = g->row_first + r;
    *n = (size_t)g->row_count * g->det_width * g->det_width;
    float *out = malloc(sizeof(float) * *n);
    ck_assert_ptr_nonnull(out);
    test_reconstruct(plan, rows, g->row_count, out);
    return out;
}

static rtomo_fbp *create_gpu(const rtomo_fbp_geometry *g,
                             const rtomo_engine_options *opt, int split)
{
    rtomo_fbp *plan = test_create_split(g, opt, split);
    rtomo_cuda_fbp_debug_slot slot[16];
    ck_assert_int_eq(rtomo_cuda_fbp_debug_slots(plan, slot, 16), split);
    return plan;
}

/* CPU and GPU plans on the scan; the three comparisons of the file
 * comment. */
static void compare(const scan *s, rtomo_precision precision, int split,
                    int instalments, const char *what)
{
    rtomo_engine_options opt;
    test_gpu_options(&opt, RTOMO_BP_ALU, 1, precision);
    rtomo_fbp *cpu = test_create_cpu(&s->g, 0);
    rtomo_fbp *gpu = create_gpu(&s->g, &opt, split);
    feed_scan(cpu, s, instalments);
    feed_scan(gpu, s, instalments);

    const rtomo_fbp_geometry *g = rtomo_fbp_geometry_of(cpu);
    const size_t n_sino = (size_t)g->row_count * g->n_proj * g->det_width;
    float *sino_cpu = filtered(cpu, g), *sino_gpu = filtered(gpu, g);
    const double e_sino = test_rel_l2(sino_gpu, sino_cpu, n_sino);

    /* The GPU's back-projection of the CPU's corrected sinograms. */
    rtomo_fbp_geometry plain = s->g;
    plain.rings = RTOMO_RINGS_OFF;
    rtomo_fbp *ref = create_gpu(&plain, &opt, split);
    rtomo_error err;
    ck_assert(rtomo_fbp_set_filtered(ref, g->row_first, g->row_count, sino_cpu,
                                     &err) == RTOMO_OK);
    size_t n;
    float *img_gpu = slices(gpu, g, &n), *img_ref = slices(ref, g, &n);
    float *img_cpu = slices(cpu, g, &n);
    const double e_same = test_rel_l2(img_gpu, img_ref, n);
    const double e_cpu = test_rel_l2(img_gpu, img_cpu, n);
    const double same_bound =
        precision == RTOMO_PRECISION_HALF ? HALF_BOUND : FLOAT_BOUND;
    const double cpu_bound =
        test_cpu_bound(RTOMO_BP_ALU, precision, RTOMO_INTERP_LINEAR);
    printf("cuda rings %s, %s, %d slot(s)%s: sinograms %.2e, slices %.2e "
           "(same back-projection), %.2e (CPU)\n", what,
           precision == RTOMO_PRECISION_HALF ? "half" : "float", split,
           instalments > 1 ? ", two calls" : "", e_sino, e_same, e_cpu);
    ck_assert_msg(e_sino <= SINO_BOUND, "%s: sinograms %.3g", what, e_sino);
    ck_assert_msg(e_same <= same_bound, "%s: slices %.3g", what, e_same);
    ck_assert_msg(e_cpu <= cpu_bound, "%s: slices against the CPU %.3g", what,
                  e_cpu);
    rtomo_fbp_destroy(cpu);
    rtomo_fbp_destroy(gpu);
    rtomo_fbp_destroy(ref);
    free(sino_cpu);
    free(sino_gpu);
    free(img_gpu);
    free(img_ref);
    free(img_cpu);
}

/* _i: bit 0 half, bit 1 three slots, bit 2 weighted, bit 3 raw with
 * flats, bit 4 two calls. */
START_TEST(random_scans_like_the_cpu)
{
    const rtomo_precision precision =
        _i & 1 ? RTOMO_PRECISION_HALF : RTOMO_PRECISION_FLOAT;
    const int split = _i & 2 ? 3 : 1, weighted = !!(_i & 4), raw = !!(_i & 8);
    const int instalments = _i & 16 ? 2 : 1;
    scan s;
    make_scan(&s, test_seed(0xc1a55, _i), 45, 14, 1, 12, 41, weighted, raw, 0);
    char what[64];
    snprintf(what, sizeof what, "random%s%s", weighted ? ", weighted" : "",
             raw ? ", raw with flats" : "");
    compare(&s, precision, split, instalments, what);
    free_scan(&s);
}
END_TEST

START_TEST(striped_phantom_like_the_cpu)
{
    const rtomo_precision precision =
        _i & 1 ? RTOMO_PRECISION_HALF : RTOMO_PRECISION_FLOAT;
    scan s;
    make_scan(&s, test_seed(0x5e7, _i), 256, 16, 6, 2, 360, 0, !!(_i & 2), 1);
    compare(&s, precision, 1, 1, _i & 2 ? "phantom, raw with flats"
                                        : "phantom");
    free_scan(&s);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cuda_fbp_rings");
    TCase *tc = tcase_create("rings");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, random_scans_like_the_cpu, 0, 32);
    tcase_add_loop_test(tc, striped_phantom_like_the_cpu, 0, 4);
    suite_add_tcase(s, tc);
    return test_run_gpu_suite(s);
}
