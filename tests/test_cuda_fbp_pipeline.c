/*
 * test_cuda_fbp_pipeline.c — the parts of the CUDA FBP backend around the
 * kernels: the deal of rows to several slots and their worker threads (one
 * GPU split into several slots by the test hook RTOMO_CUDA_FBP_SPLIT, and
 * two GPUs where there are two: results must be identical to one slot, and
 * every slab of slices must be spread over all slots, as the backend's
 * debug hook counts them), the
 * double-buffered batch pipeline over many rows, ROI and interpolation
 * changes on a live plan, scans with projections never fed, the autotuner
 * and its cache file, option checks, statistics, and the clear refusal of
 * a plan whose sinograms cannot fit on the GPU.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuda_fbp_debug.h"
#include "fbp_partition.h"
#include "rtomo_sim.h"
#include "test_cuda_fbp_common.h"

/* Same bounds as test_cuda_fbp_bp.c for float storage. */
#define TEXTURE_BOUND 5e-3
#define ALU_BOUND 1e-4

typedef struct scan {
    rtomo_fbp_geometry g;
    float *sinograms;
    int *rows;
    int n_rows;
} scan;

/* `height` kept rows of random sinograms; all of them requested. */
static void make_scan(scan *s, uint64_t seed, int width, int height, int n_proj)
{
    s->g = test_fbp_geometry(width, height, n_proj);
    s->g.axis = 0.5 * (width - 1) + 1.3;
    const size_t n = (size_t)height * n_proj * width;
    s->sinograms = malloc(sizeof(float) * n);
    s->rows = malloc(sizeof(int) * (size_t)height);
    ck_assert(s->sinograms && s->rows);
    test_fill_uniform(&seed, s->sinograms, n, -1.0, 1.0);
    s->n_rows = height;
    for (int r = 0; r < height; r++)
        s->rows[r] = height - 1 - r;
}

static void free_scan(scan *s)
{
    free(s->sinograms);
    free(s->rows);
}

static size_t output_size(const rtomo_fbp *plan, int n_rows)
{
    const rtomo_fbp_geometry *g = rtomo_fbp_geometry_of(plan);
    return (size_t)g->roi_width * g->roi_height * (size_t)n_rows;
}

/* Feed the scan's sinograms and reconstruct its rows into a new array. */
static float *run(rtomo_fbp *plan, const scan *s)
{
    rtomo_error err;
    ck_assert_msg(rtomo_fbp_set_filtered(plan, 0, s->g.det_height, s->sinograms, &err) == RTOMO_OK,
                  "set_filtered: %s", err.message);
    const size_t n = output_size(plan, s->n_rows);
    float *out = malloc(sizeof(float) * n);
    ck_assert_ptr_nonnull(out);
    test_poison(out, n);
    test_reconstruct(plan, s->rows, s->n_rows, out);
    return out;
}

static float *run_new_plan(const scan *s, const rtomo_engine_options *opt)
{
    rtomo_fbp *plan = test_create(&s->g, opt);
    float *out = run(plan, s);
    rtomo_fbp_destroy(plan);
    return out;
}

static float *run_cpu(const scan *s)
{
    rtomo_engine_options opt;
    rtomo_engine_options_init(&opt);
    opt.backend = RTOMO_BACKEND_CPU;
    return run_new_plan(s, &opt);
}

/* ---------------------------------------------------- the deal of rows ---- */

/* A plan of SPLIT_ROWS kept rows (23 groups of 4 and a half group) asked
 * for in slabs as a service asks: consecutive rows, ascending, from
 * multiples of 4. */
#define SPLIT_ROWS 94
#define SPLIT_WIDTH 40
#define SPLIT_PROJ 37
static const int split_slabs[][2] = {{0, 32}, {32, 32}, {64, 30}, {0, SPLIT_ROWS}};
#define N_SPLIT_SLABS ((int)(sizeof split_slabs / sizeof split_slabs[0]))
#define MAX_TEST_SLOTS 16

/* The slot layouts compared with one slot on device 0: one GPU split by
 * RTOMO_CUDA_FBP_SPLIT and, where two GPUs are visible, two devices. */
typedef struct slot_layout {
    int devices, split;
} slot_layout;
static const slot_layout layouts[] = {{1, 2}, {1, 3}, {2, 1}, {2, 2}};
#define N_LAYOUTS ((int)(sizeof layouts / sizeof layouts[0]))

static int layout_usable(const slot_layout *l)
{
    return l->devices <= rtomo_cuda_device_count();
}

static rtomo_fbp *create_with_layout(const rtomo_fbp_geometry *g,
                                     rtomo_engine_options opt,
                                     const slot_layout *l)
{
    opt.n_devices = l->devices;
    for (int d = 0; d < l->devices; d++)
        opt.device_ids[d] = d;
    char value[8];
    snprintf(value, sizeof value, "%d", l->split);
    setenv("RTOMO_CUDA_FBP_SPLIT", value, 1);
    rtomo_fbp *plan = test_create(g, &opt);
    unsetenv("RTOMO_CUDA_FBP_SPLIT");
    return plan;
}

/* The plan's slots, from the backend's test hook; `expected` of them,
 * owning nearly equal shares of the kept rows (memory ~1/n per slot). */
static int plan_slots(const rtomo_fbp *plan, int expected,
                      rtomo_cuda_fbp_debug_slot *slots)
{
    const int n = rtomo_cuda_fbp_debug_slots(plan, slots, MAX_TEST_SLOTS);
    ck_assert_int_eq(n, expected);
    int total = 0, lo = slots[0].rows_owned, hi = lo;
    for (int i = 0; i < n; i++) {
        total += slots[i].rows_owned;
        if (slots[i].rows_owned < lo) lo = slots[i].rows_owned;
        if (slots[i].rows_owned > hi) hi = slots[i].rows_owned;
    }
    ck_assert_int_eq(total, rtomo_fbp_geometry_of(plan)->row_count);
    ck_assert_msg(hi - lo <= FBP_PARTITION_GROUP, "slots own %d to %d rows", lo, hi);
    return n;
}

/* The rows of the latest call went to every slot, within two groups of
 * each other: a slab that lands on one slot fails here. */
static void check_call_spread(const rtomo_fbp *plan, int expected, int n_rows,
                              const char *what)
{
    rtomo_cuda_fbp_debug_slot slots[MAX_TEST_SLOTS];
    const int n = plan_slots(plan, expected, slots);
    int total = 0, lo = slots[0].rows_last_call, hi = lo;
    char shares[128] = "";
    for (int i = 0; i < n; i++) {
        const int c = slots[i].rows_last_call;
        total += c;
        if (c < lo) lo = c;
        if (c > hi) hi = c;
        snprintf(shares + strlen(shares), sizeof shares - strlen(shares), "%s%d@%d",
                 i ? " " : "", c, slots[i].device);
    }
    printf("  %s: %d rows over %d slots as rows@device: %s\n", what, n_rows, n, shares);
    ck_assert_int_eq(total, n_rows);
    ck_assert_msg(hi - lo <= 2 * FBP_PARTITION_GROUP,
                  "%s: slots got %d to %d of %d rows", what, lo, hi, n_rows);
    if (n_rows >= 2 * n * FBP_PARTITION_GROUP)
        ck_assert_msg(lo > 0, "%s: a slot got none of %d rows", what, n_rows);
}

/* Reconstruct kept rows rows[0..n-1] into a new, poisoned array. */
static float *reconstruct_rows(rtomo_fbp *plan, const int *rows, int n)
{
    const size_t size = output_size(plan, n);
    float *out = malloc(sizeof(float) * size);
    ck_assert_ptr_nonnull(out);
    test_poison(out, size);
    test_reconstruct(plan, rows, n, out);
    return out;
}

/*
 * Loop index: kernel (standard, texture, ALU) x slices x precision.  One GPU
 * split into 2 and 3 slots, and two GPUs with 1 and 2 slots each where
 * there are two, reconstruct every slab bit for bit as one slot does, and
 * every slab is spread over all slots.  Half storage scales each packed
 * group by its own maximum, so bit-identity needs the same packing
 * partners as one slot: the slabs start at multiples of 4, and groups of 4
 * rows stay on one slot.  Float storage keeps slices apart, so the whole
 * scan asked in reverse order (other partners) must match too.  (The
 * hybrid kernel is left out: its blocks choose their path at run time, so
 * it does not repeat itself bit for bit even on one slot.)
 */
START_TEST(slot_layouts_give_identical_results)
{
    static const int slice_choices[] = {1, 2, 4};
    const rtomo_bp_kernel kernel = (rtomo_bp_kernel)(RTOMO_BP_STANDARD + _i / 6);
    const int slices = slice_choices[(_i / 2) % 3];
    const rtomo_precision precision = (rtomo_precision)(_i % 2);
    const char *name = test_mode_name(kernel, slices, precision, RTOMO_INTERP_LINEAR);
    scan s;
    make_scan(&s, 0xd1517ULL + (uint64_t)_i, SPLIT_WIDTH, SPLIT_ROWS, SPLIT_PROJ);
    rtomo_engine_options opt;
    test_gpu_options(&opt, kernel, slices, precision);
    const slot_layout single = {1, 1};
    rtomo_fbp *one = create_with_layout(&s.g, opt, &single);
    rtomo_error err;
    ck_assert_int_eq(rtomo_fbp_set_filtered(one, 0, SPLIT_ROWS, s.sinograms, &err), RTOMO_OK);
    const size_t image = (size_t)SPLIT_WIDTH * SPLIT_WIDTH;
    if (precision == RTOMO_PRECISION_FLOAT) {
        float *ref = run_cpu(&s);
        float *out = reconstruct_rows(one, s.rows, s.n_rows);
        const double rel = test_rel_l2(out, ref, image * SPLIT_ROWS);
        const double bound = kernel == RTOMO_BP_ALU ? ALU_BOUND : TEXTURE_BOUND;
        printf("%s: one slot relative L2 to CPU %.3e\n", name, rel);
        ck_assert_msg(rel <= bound, "%s, one slot: relative L2 %g", name, rel);
        free(out);
        free(ref);
    }
    for (int l = 0; l < N_LAYOUTS; l++) {
        if (!layout_usable(&layouts[l]))
            continue;
        const int expected = layouts[l].devices * layouts[l].split;
        rtomo_fbp *parts = create_with_layout(&s.g, opt, &layouts[l]);
        ck_assert_int_eq(rtomo_fbp_set_filtered(parts, 0, SPLIT_ROWS, s.sinograms, &err), RTOMO_OK);
        char what[96];
        for (int k = 0; k <= N_SPLIT_SLABS; k++) {
            const int reversed = k == N_SPLIT_SLABS;
            if (reversed && precision == RTOMO_PRECISION_HALF)
                break;
            const int first = reversed ? 0 : split_slabs[k][0];
            const int n = reversed ? s.n_rows : split_slabs[k][1];
            int rows[SPLIT_ROWS];
            for (int i = 0; i < n; i++)
                rows[i] = reversed ? s.rows[i] : first + i;
            snprintf(what, sizeof what, "%s, %d device(s) x %d, rows %s%d..%d", name,
                     layouts[l].devices, layouts[l].split, reversed ? "reversed " : "",
                     first, first + n - 1);
            float *a = reconstruct_rows(one, rows, n);
            float *b = reconstruct_rows(parts, rows, n);
            check_call_spread(parts, expected, n, what);
            ck_assert_msg(memcmp(a, b, sizeof(float) * image * (size_t)n) == 0,
                          "%s: differs from one slot (max %g)", what,
                          test_max_abs_diff(b, a, image * (size_t)n));
            free(a);
            free(b);
        }
        rtomo_fbp_destroy(parts);
    }
    rtomo_fbp_destroy(one);
    free_scan(&s);
}
END_TEST

/* Enough small slices for several batches through both output buffers. */
START_TEST(many_batches_match_cpu)
{
    scan s;
    make_scan(&s, 0xba7c4ULL, 40, 150, 31);
    float *ref = run_cpu(&s);
    rtomo_engine_options opt;
    test_gpu_options(&opt, RTOMO_BP_TEXTURE, 1 + _i, RTOMO_PRECISION_FLOAT);
    float *out = run_new_plan(&s, &opt);
    const double rel = test_rel_l2(out, ref, (size_t)40 * 40 * 150);
    printf("150 slices, %d per pass: relative L2 %.3e\n", 1 + _i, rel);
    ck_assert_msg(rel <= TEXTURE_BOUND, "relative L2 %g", rel);
    free(out);
    free(ref);
    free_scan(&s);
}
END_TEST

/* ROI and interpolation changed on live plans, same data. */
START_TEST(roi_and_interp_changes_apply)
{
    scan s;
    make_scan(&s, 0x401ULL, 64, 3, 50);
    test_smooth_lines(s.sinograms, (size_t)3 * 50, 64, 16);
    rtomo_engine_options opt;
    test_gpu_options(&opt, RTOMO_BP_HYBRID, 1, RTOMO_PRECISION_FLOAT);
    rtomo_fbp *gpu = test_create(&s.g, &opt);
    rtomo_fbp *cpu = test_create_cpu(&s.g, 0);
    rtomo_error err;
    for (int step = 0; step < 2; step++) {
        ck_assert_int_eq(rtomo_fbp_set_roi(gpu, 5 + step, 9, 31, 17 + step, &err), RTOMO_OK);
        ck_assert_int_eq(rtomo_fbp_set_roi(cpu, 5 + step, 9, 31, 17 + step, &err), RTOMO_OK);
        const rtomo_interp interp = step ? RTOMO_INTERP_NEAREST : RTOMO_INTERP_LINEAR;
        ck_assert_int_eq(rtomo_fbp_set_interp(gpu, interp, &err), RTOMO_OK);
        ck_assert_int_eq(rtomo_fbp_set_interp(cpu, interp, &err), RTOMO_OK);
        float *ref = run(cpu, &s);
        float *out = run(gpu, &s);
        const double rel = test_rel_l2(out, ref, output_size(gpu, s.n_rows));
        printf("roi step %d (%s): relative L2 %.3e\n", step, rtomo_interp_name(interp), rel);
        ck_assert_msg(rel <= TEXTURE_BOUND, "step %d: relative L2 %g", step, rel);
        free(ref);
        free(out);
    }
    rtomo_fbp_destroy(gpu);
    rtomo_fbp_destroy(cpu);
    free_scan(&s);
}
END_TEST

/* Half the projections fed as float frames (no flats): the missing ones
 * contribute nothing on either backend. */
START_TEST(unfed_projections_contribute_nothing)
{
    rtomo_fbp_geometry g = test_fbp_geometry(48, 3, 40);
    uint64_t seed = 0x4a1f;
    const size_t pixels = (size_t)g.det_width * g.det_height;
    float *frame = malloc(sizeof(float) * pixels);
    ck_assert_ptr_nonnull(frame);
    rtomo_fbp *cpu = test_create_cpu(&g, 0);
    rtomo_engine_options opt;
    test_gpu_options(&opt, RTOMO_BP_ALU, 1, RTOMO_PRECISION_FLOAT);
    rtomo_fbp *gpu = test_create(&g, &opt);
    rtomo_error err;
    for (int p = 0; p < g.n_proj; p += 2) {
        test_fill_uniform(&seed, frame, pixels, 0.0, 2.0);
        ck_assert_int_eq(rtomo_fbp_add_projection(cpu, p, frame, RTOMO_DTYPE_F32, NAN, NAN, &err), RTOMO_OK);
        ck_assert_int_eq(rtomo_fbp_add_projection(gpu, p, frame, RTOMO_DTYPE_F32, NAN, NAN, &err), RTOMO_OK);
    }
    const int rows[] = {0, 1, 2};
    const size_t n = (size_t)g.det_width * g.det_width * 3;
    float *ref = malloc(sizeof(float) * n), *out = malloc(sizeof(float) * n);
    ck_assert(ref && out);
    test_poison(out, n);
    test_reconstruct(cpu, rows, 3, ref);
    test_reconstruct(gpu, rows, 3, out);
    const double rel = test_rel_l2(out, ref, n);
    printf("half-fed scan: relative L2 %.3e\n", rel);
    ck_assert_msg(rel <= ALU_BOUND, "relative L2 %g", rel);
    rtomo_fbp_stats st;
    rtomo_fbp_get_stats(gpu, &st);
    ck_assert_int_eq(st.projections_filtered, g.n_proj / 2);
    ck_assert_int_eq(st.slices_reconstructed, 3);
    ck_assert(st.backproject_seconds > 0.0 && st.filter_seconds > 0.0);
    ck_assert(st.updates == (double)n * g.n_proj);
    free(ref);
    free(out);
    free(frame);
    rtomo_fbp_destroy(cpu);
    rtomo_fbp_destroy(gpu);
}
END_TEST

/* Continuous mode: projections fed again replace what they held, also
 * when both frames wait in the same staging bank, and a change of sample
 * type between frames is handled. */
START_TEST(refed_projections_replace_old_data)
{
    rtomo_fbp_geometry g = test_fbp_geometry(33, 4, 12);
    uint64_t seed = 0x4efed;
    const size_t pixels = (size_t)g.det_width * g.det_height;
    float *frame = malloc(sizeof(float) * pixels);
    uint16_t *counts = malloc(sizeof(uint16_t) * pixels);
    ck_assert(frame && counts);
    rtomo_fbp *cpu = test_create_cpu(&g, 0);
    rtomo_engine_options opt;
    test_gpu_options(&opt, RTOMO_BP_ALU, 1, RTOMO_PRECISION_FLOAT);
    rtomo_fbp *gpu = test_create(&g, &opt);
    rtomo_fbp *plans[] = {cpu, gpu};
    static const int order[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 5, 6, 5, 0};
    rtomo_error err;
    for (size_t k = 0; k < sizeof order / sizeof order[0]; k++) {
        test_fill_uniform(&seed, frame, pixels, 0.0, 3.0);
        for (size_t i = 0; i < pixels; i++)
            counts[i] = (uint16_t)(1000.0 * frame[i]);
        const int as_counts = k % 3 == 1;
        for (int b = 0; b < 2; b++)
            ck_assert_int_eq(rtomo_fbp_add_projection(plans[b], order[k],
                                                      as_counts ? (const void *)counts : frame,
                                                      as_counts ? RTOMO_DTYPE_U16 : RTOMO_DTYPE_F32,
                                                      NAN, NAN, &err), RTOMO_OK);
    }
    const size_t n = (size_t)g.n_proj * g.det_width;
    float *a = malloc(sizeof(float) * n), *b = malloc(sizeof(float) * n);
    ck_assert(a && b);
    for (int r = 0; r < g.det_height; r++) {
        test_poison(b, n);
        ck_assert_int_eq(rtomo_fbp_get_filtered(cpu, r, a, &err), RTOMO_OK);
        ck_assert_int_eq(rtomo_fbp_get_filtered(gpu, r, b, &err), RTOMO_OK);
        const double rel = test_rel_l2(b, a, n);
        ck_assert_msg(rel <= 1e-5, "row %d: relative L2 %g", r, rel);
    }
    free(a);
    free(b);
    free(frame);
    free(counts);
    rtomo_fbp_destroy(cpu);
    rtomo_fbp_destroy(gpu);
}
END_TEST

static int count_lines(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    int n = 0, c;
    while ((c = fgetc(f)) != EOF)
        n += c == '\n';
    fclose(f);
    return n;
}

/* AUTO everything: the result is right, the choice lands in the cache
 * file, a second plan reuses it, and an unusable cache directory is not an
 * error. */
START_TEST(autotune_chooses_and_caches)
{
    char dir[200];
    test_make_temp_dir("rtomo-autotune", dir, sizeof dir);
    char path[256];
    snprintf(path, sizeof path, "%s/fbp-autotune-v2.txt", dir);
    setenv("RTOMO_CACHE_DIR", dir, 1);
    scan s;
    make_scan(&s, 0xa070ULL, 96, 8, 64);
    float *ref = run_cpu(&s);
    rtomo_engine_options opt;
    rtomo_engine_options_init(&opt);
    opt.backend = RTOMO_BACKEND_CUDA;
    const size_t n = (size_t)96 * 96 * 8;
    for (int round = 0; round < 2; round++) {
        float *out = run_new_plan(&s, &opt);
        const double rel = test_rel_l2(out, ref, n);
        printf("autotuned plan %d: relative L2 %.3e, cache lines %d\n", round, rel,
               count_lines(path));
        ck_assert_msg(rel <= TEXTURE_BOUND, "relative L2 %g", rel);
        ck_assert_int_eq(count_lines(path), 1);
        free(out);
    }
    setenv("RTOMO_CACHE_DIR", "/proc/no/such/dir", 1);
    opt.hybrid_ratio = 0.0;
    opt.bp_kernel = RTOMO_BP_HYBRID;
    opt.slices_per_pass = 2;
    float *out = run_new_plan(&s, &opt);
    const double rel = test_rel_l2(out, ref, n);
    ck_assert_msg(rel <= TEXTURE_BOUND, "hybrid, tuned ratio: relative L2 %g", rel);
    unsetenv("RTOMO_CACHE_DIR");
    test_remove_tree(dir);
    free(out);
    free(ref);
    free_scan(&s);
}
END_TEST

START_TEST(options_are_checked)
{
    rtomo_fbp_geometry g = test_fbp_geometry(16, 1, 8);
    rtomo_engine_options opt;
    rtomo_error err;
    test_gpu_options(&opt, RTOMO_BP_TEXTURE, 3, RTOMO_PRECISION_FLOAT);
    ck_assert_ptr_null(rtomo_fbp_create(&g, &opt, &err));
    ck_assert_int_eq(err.code, RTOMO_E_INVALID);
    ck_assert_ptr_nonnull(strstr(err.message, "slices_per_pass"));
    test_gpu_options(&opt, RTOMO_BP_HYBRID, 1, RTOMO_PRECISION_FLOAT);
    opt.hybrid_ratio = 1.5;
    ck_assert_ptr_null(rtomo_fbp_create(&g, &opt, &err));
    ck_assert_int_eq(err.code, RTOMO_E_INVALID);
    test_gpu_options(&opt, RTOMO_BP_ALU, 1, (rtomo_precision)7);
    ck_assert_ptr_null(rtomo_fbp_create(&g, &opt, &err));
    ck_assert_int_eq(err.code, RTOMO_E_INVALID);
    test_gpu_options(&opt, RTOMO_BP_ALU, 1, RTOMO_PRECISION_FLOAT);
    opt.n_devices = 1;
    opt.device_ids[0] = rtomo_cuda_device_count();
    ck_assert_ptr_null(rtomo_fbp_create(&g, &opt, &err));
    ck_assert_int_eq(err.code, RTOMO_E_RANGE);
}
END_TEST

/* 65536 rows x 65536 projections x 65536 bins: petabytes, refused with
 * RTOMO_E_NOMEM and the numbers, before anything is allocated. */
START_TEST(oversized_plan_is_refused)
{
    rtomo_fbp_geometry g = test_fbp_geometry(65536, 65536, 65536);
    rtomo_engine_options opt;
    test_gpu_options(&opt, RTOMO_BP_ALU, 1, RTOMO_PRECISION_FLOAT);
    rtomo_error err;
    ck_assert_ptr_null(rtomo_fbp_create(&g, &opt, &err));
    printf("oversized plan: %s\n", err.message);
    ck_assert_int_eq(err.code, RTOMO_E_NOMEM);
    ck_assert_ptr_nonnull(strstr(err.message, "GiB"));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cuda_fbp_pipeline");
    TCase *tc = tcase_create("pipeline");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, slot_layouts_give_identical_results, 0, 3 * 3 * 2);
    tcase_add_loop_test(tc, many_batches_match_cpu, 0, 2);
    tcase_add_test(tc, roi_and_interp_changes_apply);
    tcase_add_test(tc, unfed_projections_contribute_nothing);
    tcase_add_test(tc, refed_projections_replace_old_data);
    tcase_add_test(tc, autotune_chooses_and_caches);
    tcase_add_test(tc, options_are_checked);
    tcase_add_test(tc, oversized_plan_is_refused);
    suite_add_tcase(s, tc);
    return test_run_gpu_suite(s);
}
