/*
 * test_cuda_fbp_stream.c — resident slices on the GPU (streaming
 * back-projection, rtomo_fbp_stream_*), checked through the public API
 * against the after-the-scan path, rtomo_fbp_reconstruct of the same plan
 * over the same projections, and against the CPU backend.
 *
 * Every kernel family (the hybrid kernel with each path alone, where it
 * is deterministic, and mixed) x interpolation x precision, with slots
 * queued in a random order, some never queued, some added and taken out
 * again, chunks cut by the backend's size and by flushes; projections fed
 * as frames while slices stream (a sliding window), reset, clearing a
 * projection slot (also while its frame still waits in the host staging
 * bank, and while it is queued), one GPU split into 2 and 3 slots, reads
 * through the pinned buffers and straight into page-locked memory (also
 * slab by slab while the last chunk still runs), and a set of slices too
 * large for the GPU refused with the plan still usable.
 *
 * Bounds: float32 storage streams what reconstruct computes, summed in
 * another order: 1e-6 relative L2.  Half storage scales each chunk by its
 * own largest magnitude (reconstruct: the whole scan's), so both round
 * differently to 11 bits: 2e-3.  Against the CPU, the bounds of
 * test_cuda_fbp_bp.c.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_fbp_debug.h"
#include "rtomo_sim.h"
#include "test_cuda_fbp_common.h"

#define FLOAT_BOUND 1e-6
#define HALF_BOUND 2e-3
/* The hybrid kernel at ratio 0.5 lets each block pick its path at run
 * time, so one tile may interpolate on the texture unit in one call and on
 * the cores in the other: the texture unit's 8-bit weights then bound the
 * difference (test_cuda_fbp_bp.c). */
#define MIXED_BOUND 5e-3

/* A configuration a looped test runs. */
typedef struct gpu_mode {
    rtomo_bp_kernel kernel;
    int slices;
    rtomo_precision precision;
    rtomo_interp interp;
} gpu_mode;

/* ------------------------------------------------------------ scans ---- */

typedef struct scan {
    rtomo_fbp_geometry g;
    double *angles, *shifts;
    float *sinograms;           /* row_count x n_proj x det_width */
    size_t image;               /* pixels of one ROI image */
} scan;

/* An irregular geometry (odd width, off-centre axis with per-projection
 * shifts, irregular angles, an ROI at an odd offset) with random filtered
 * sinograms, smoothed for nearest-neighbour sampling. */
static void make_scan(scan *s, uint64_t seed, int width, int rows, int n_proj,
                      int slice, rtomo_interp interp)
{
    rtomo_fbp_geometry *g = &s->g;
    *g = test_fbp_geometry(width, rows + 2, n_proj);
    s->angles = malloc(sizeof(double) * (size_t)n_proj);
    s->shifts = malloc(sizeof(double) * (size_t)n_proj);
    ck_assert(s->angles && s->shifts);
    const double start = rtomo_random_uniform(&seed);
    for (int p = 0; p < n_proj; p++) {
        s->angles[p] = start + M_PI * (p + 0.3 * rtomo_random_uniform(&seed)) / n_proj;
        s->shifts[p] = 4.0 * rtomo_random_uniform(&seed) - 2.0;
    }
    g->angles = s->angles;
    g->axis_shift = s->shifts;
    g->axis = 0.5 * (width - 1) + 2.0 * rtomo_random_uniform(&seed) - 0.7;
    g->interp = interp;
    g->row_first = 1;
    g->row_count = rows;
    g->slice_size = slice;
    g->roi_x = slice / 13;
    g->roi_y = slice / 9;
    g->roi_width = slice - g->roi_x - 3;
    g->roi_height = slice - g->roi_y - slice / 5;
    const size_t n = (size_t)rows * (size_t)n_proj * (size_t)width;
    s->sinograms = malloc(sizeof(float) * n);
    ck_assert_ptr_nonnull(s->sinograms);
    test_fill_uniform(&seed, s->sinograms, n, -1.0, 1.0);
    if (interp == RTOMO_INTERP_NEAREST)
        test_smooth_lines(s->sinograms, (size_t)rows * n_proj, width, 16);
    s->image = (size_t)g->roi_width * (size_t)g->roi_height;
}

static void free_scan(scan *s)
{
    free(s->angles);
    free(s->shifts);
    free(s->sinograms);
}

static void feed(rtomo_fbp *plan, const scan *s, const float *sinograms)
{
    rtomo_error err;
    ck_assert_msg(rtomo_fbp_set_filtered(plan, s->g.row_first, s->g.row_count,
                                         sinograms, &err) == RTOMO_OK,
                  "set_filtered: %s", err.message);
}

/* The scan's sinograms with projections zeroed[p] != 0 set to zero. */
static float *zeroed_copy(const scan *s, const unsigned char *zeroed)
{
    const int w = s->g.det_width, np = s->g.n_proj;
    const size_t n = (size_t)s->g.row_count * np * w;
    float *z = malloc(sizeof(float) * n);
    ck_assert_ptr_nonnull(z);
    memcpy(z, s->sinograms, sizeof(float) * n);
    for (int r = 0; r < s->g.row_count; r++)
        for (int p = 0; p < np; p++)
            if (zeroed[p])
                memset(z + ((size_t)r * np + p) * w, 0, sizeof(float) * (size_t)w);
    return z;
}

/* -------------------------------------------------------- API helpers ---- */

static void shuffle(uint64_t *seed, int *a, int n)
{
    for (int i = n - 1; i > 0; i--) {
        const int j = test_rand_int(seed, 0, i);
        const int t = a[i];
        a[i] = a[j];
        a[j] = t;
    }
}

/* Open resident slices for rows[0..n-1]; `chunk` > 0 sets the backend's
 * chunk size (the RTOMO_CUDA_FBP_STREAM_CHUNK hook) for this open. */
static void open_rows(rtomo_fbp *plan, const int *rows, int n, int chunk)
{
    char value[16];
    if (chunk > 0) {
        snprintf(value, sizeof value, "%d", chunk);
        setenv("RTOMO_CUDA_FBP_STREAM_CHUNK", value, 1);
    }
    rtomo_error err;
    const rtomo_status st = rtomo_fbp_stream_open(plan, rows, n, &err);
    unsetenv("RTOMO_CUDA_FBP_STREAM_CHUNK");
    ck_assert_msg(st == RTOMO_OK, "stream_open: %s", err.message);
    ck_assert_int_eq(rtomo_fbp_stream_rows(plan), n);
    if (chunk > 0)
        ck_assert_int_eq(rtomo_fbp_stream_chunk(plan), chunk);
}

static void queue(rtomo_fbp *plan, int slot, float weight)
{
    rtomo_error err;
    ck_assert_msg(rtomo_fbp_stream_queue(plan, slot, weight, &err) == RTOMO_OK,
                  "queue %d (%+g): %s", slot, (double)weight, err.message);
}

static void flush(rtomo_fbp *plan)
{
    rtomo_error err;
    ck_assert_msg(rtomo_fbp_stream_flush(plan, &err) == RTOMO_OK, "flush: %s",
                  err.message);
}

static void clear_slot(rtomo_fbp *plan, int slot)
{
    rtomo_error err;
    ck_assert_msg(rtomo_fbp_clear_projection(plan, slot, &err) == RTOMO_OK,
                  "clear_projection %d: %s", slot, err.message);
}

/* Read resident rows[0..n-1] into a new, poisoned array.  `direct`: with
 * the output page-locked for the read (the RTOMO_CUDA_FBP_READ_REGISTER
 * hook), so that the GPU copies straight into it instead of through the
 * pinned buffers. */
static float *read_rows_as(rtomo_fbp *plan, const int *rows, int n, size_t image,
                           int direct)
{
    float *out = malloc(sizeof(float) * image * (size_t)n);
    ck_assert_ptr_nonnull(out);
    test_poison(out, image * (size_t)n);
    if (direct)
        setenv("RTOMO_CUDA_FBP_READ_REGISTER", "1", 1);
    rtomo_error err;
    double *stats = malloc(sizeof(double) * 3 * (size_t)n);
    ck_assert_ptr_nonnull(stats);
    const rtomo_status st = rtomo_fbp_stream_read_stats(plan, rows, n, out,
                                                        stats, &err);
    unsetenv("RTOMO_CUDA_FBP_READ_REGISTER");
    ck_assert_msg(st == RTOMO_OK, "stream_read: %s", err.message);
    /* The GPU's statistics describe the images read: min and max exactly,
     * the mean to double rounding of float sums. */
    for (int i = 0; i < n; i++) {
        const float *x = out + image * (size_t)i;
        double lo = x[0], hi = x[0], sum = 0.0;
        for (size_t k = 0; k < image; k++) {
            lo = x[k] < lo ? x[k] : lo;
            hi = x[k] > hi ? x[k] : hi;
            sum += x[k];
        }
        ck_assert_msg(stats[3 * i] == lo && stats[3 * i + 1] == hi,
                      "image %d: GPU min/max %g/%g, host %g/%g", i,
                      stats[3 * i], stats[3 * i + 1], lo, hi);
        const double mean = sum / (double)image;
        ck_assert_msg(fabs(stats[3 * i + 2] - mean) <=
                          1e-9 * (fabs(lo) + fabs(hi)) + 1e-30,
                      "image %d: GPU mean %.17g, host %.17g", i,
                      stats[3 * i + 2], mean);
    }
    free(stats);
    return out;
}

static float *read_rows(rtomo_fbp *plan, const int *rows, int n, size_t image)
{
    return read_rows_as(plan, rows, n, image, 0);
}

/* Reconstruct rows[0..n-1] into a new, poisoned array. */
static float *reconstruct_rows(rtomo_fbp *plan, const int *rows, int n, size_t image)
{
    float *out = malloc(sizeof(float) * image * (size_t)n);
    ck_assert_ptr_nonnull(out);
    test_poison(out, image * (size_t)n);
    test_reconstruct(plan, rows, n, out);
    return out;
}

/* --------------------------------------------------------- schedules ---- */

/* What happens to each projection of a random schedule. */
enum { NEVER, ADDED, ADDED_REMOVED };

typedef struct event {
    double key;
    int slot;
    float weight;
} event;

static int by_key(const void *a, const void *b)
{
    const double x = ((const event *)a)->key, y = ((const event *)b)->key;
    return x < y ? -1 : x > y;
}

/* A random schedule over n_proj slots: about 1/8 never queued, 1/8 added
 * and later taken out again, the rest added once, in a random order.
 * Sets zeroed[p] for the slots that end up contributing nothing; returns
 * the events (count in *n_events). */
static event *make_schedule(uint64_t *seed, int n_proj, unsigned char *zeroed,
                            int *n_events)
{
    event *ev = malloc(sizeof(event) * 2 * (size_t)n_proj);
    ck_assert_ptr_nonnull(ev);
    int n = 0;
    for (int p = 0; p < n_proj; p++) {
        const int r = test_rand_int(seed, 0, 7);
        const int fate = r == 0 ? NEVER : r == 1 ? ADDED_REMOVED : ADDED;
        zeroed[p] = fate != ADDED;
        if (fate == NEVER)
            continue;
        const double at = test_rand_real(seed, 0.0, 1.0);
        ev[n++] = (event){at, p, 1.0f};
        if (fate == ADDED_REMOVED)
            ev[n++] = (event){at + test_rand_real(seed, 1e-9, 1.0 - at), p, -1.0f};
    }
    qsort(ev, (size_t)n, sizeof *ev, by_key);
    *n_events = n;
    return ev;
}

/* Queue the events, flushing now and then (chunks shorter than the
 * backend's), never at the end: the read must flush. */
static void play(rtomo_fbp *plan, uint64_t *seed, const event *ev, int n)
{
    for (int i = 0; i < n; i++) {
        queue(plan, ev[i].slot, ev[i].weight);
        if (i + 1 < n && test_rand_int(seed, 0, 16) == 0)
            flush(plan);
    }
}

/* A random ascending subset of the kept rows (at least 2/3 of them, the
 * first and last always), as detector rows. */
static int pick_rows(uint64_t *seed, const rtomo_fbp_geometry *g, int *rows)
{
    int n = 0;
    for (int r = 0; r < g->row_count; r++)
        if (r == 0 || r == g->row_count - 1 || test_rand_int(seed, 0, 2) > 0)
            rows[n++] = g->row_first + r;
    return n;
}

/* ------------------------------------------------- every mode vs CPU ---- */

typedef struct variant {
    rtomo_bp_kernel kernel;
    double ratio;               /* hybrid: texture fraction */
    const char *name;
} variant;

static const variant variants[] = {
    {RTOMO_BP_STANDARD, 0.0, "standard"},
    {RTOMO_BP_TEXTURE, 0.0, "texture"},
    {RTOMO_BP_ALU, 0.0, "alu"},
    /* Ratio 1: every block on the texture path; 1e-6 rounds to no texture
     * tickets at all: every block on the ALU path. */
    {RTOMO_BP_HYBRID, 1.0, "hybrid/texture path"},
    {RTOMO_BP_HYBRID, 1e-6, "hybrid/ALU path"},
    {RTOMO_BP_HYBRID, 0.5, "hybrid/mixed"},
};
#define N_VARIANTS ((int)(sizeof variants / sizeof variants[0]))

/*
 * Loop index: variant x precision x interpolation; slices per pass cycle
 * over 1, 2, 4, and one run in three uses chunks of 13 projections.
 */

/* One run of the test below; with `circle` masked (rtomo_engine.h's
 * circular field of view) on a larger grid, whole tiles outside, where
 * the streamed slices must also be exactly 0 outside the circle. */
static void stream_case(int _i, int circle)
{
    static const int slice_choices[] = {1, 2, 4};
    const variant *v = &variants[_i / 4];
    const rtomo_precision precision = (rtomo_precision)((_i / 2) % 2);
    const rtomo_interp interp = (rtomo_interp)(_i % 2);
    const int slices = slice_choices[_i % 3];
    const int chunk = _i % 3 == 1 ? 13 : 0;
    char name[128];
    snprintf(name, sizeof name, "%s/%d/%s/%s%s%s", v->name, slices,
             precision == RTOMO_PRECISION_HALF ? "half" : "float",
             rtomo_interp_name(interp), chunk ? ", chunks of 13" : "",
             _i % 4 == 3 ? ", direct read" : "");
    if (circle)
        strncat(name, ", circle", sizeof name - strlen(name) - 1);
    uint64_t seed = test_seed(0x57e4a0, _i);
    scan s;
    make_scan(&s, seed, 101, 9, 181, circle ? 176 : 96, interp);
    s.g.field_of_view = circle ? RTOMO_FOV_CIRCLE : RTOMO_FOV_FULL;
    rtomo_engine_options opt;
    test_gpu_options(&opt, v->kernel, slices, precision);
    if (v->kernel == RTOMO_BP_HYBRID)
        opt.hybrid_ratio = v->ratio;
    rtomo_fbp *plan = test_create(&s.g, &opt);
    feed(plan, &s, s.sinograms);

    int rows[16];
    const int n_open = pick_rows(&seed, &s.g, rows);
    open_rows(plan, rows, n_open, chunk);
    int roi[4];
    rtomo_fbp_stream_roi(plan, roi);
    ck_assert_int_eq(roi[2], s.g.roi_width);
    ck_assert_int_eq(roi[3], s.g.roi_height);
    unsigned char zeroed[181];
    int n_events;
    event *ev = make_schedule(&seed, s.g.n_proj, zeroed, &n_events);
    play(plan, &seed, ev, n_events);

    /* Read in a random order; the after-the-scan path on the same plan
     * once the projections that contribute nothing are cleared. */
    int order[16];
    memcpy(order, rows, sizeof(int) * (size_t)n_open);
    shuffle(&seed, order, n_open);
    float *streamed = read_rows_as(plan, order, n_open, s.image, _i % 4 == 3);
    rtomo_fbp_stats stats;
    rtomo_fbp_get_stats(plan, &stats);
    ck_assert_msg(stats.backproject_seconds > 0.0 && stats.updates > 0.0,
                  "%s: streaming work missing from the stats", name);
    for (int p = 0; p < s.g.n_proj; p++)
        if (zeroed[p])
            clear_slot(plan, p);
    float *after = reconstruct_rows(plan, order, n_open, s.image);
    const size_t n = s.image * (size_t)n_open;
    const double rel = test_rel_l2(streamed, after, n);
    double bound = precision == RTOMO_PRECISION_HALF ? HALF_BOUND : FLOAT_BOUND;
    if (v->kernel == RTOMO_BP_HYBRID && v->ratio == 0.5)
        bound += MIXED_BOUND;

    /* The CPU, fed the same sinograms with those projections zeroed. */
    float *z = zeroed_copy(&s, zeroed);
    rtomo_fbp *cpu = test_create_cpu(&s.g, 0);
    feed(cpu, &s, z);
    float *ref = reconstruct_rows(cpu, order, n_open, s.image);
    const double rel_cpu = test_rel_l2(streamed, ref, n);
    const rtomo_bp_kernel like = v->kernel == RTOMO_BP_HYBRID && v->ratio < 0.5
                                     ? RTOMO_BP_ALU : v->kernel;
    const double bound_cpu = test_cpu_bound(like, precision, interp);
    printf("stream %-36s %2d rows, %3d events: vs reconstruct %.3e (bound %.0e), "
           "vs CPU %.3e (bound %.0e)\n", name, n_open, n_events, rel, bound,
           rel_cpu, bound_cpu);
    if (circle) {
        const long outside = test_zeros_outside_fov(&s.g, streamed, n_open, name);
        test_zeros_outside_fov(&s.g, after, n_open, name);
        ck_assert_msg(outside > 0, "%s: no pixel outside the circle", name);
    }
    ck_assert_msg(rel <= bound, "%s: streamed slices differ from reconstruct "
                  "by %g (relative L2)", name, rel);
    ck_assert_msg(rel_cpu <= bound_cpu, "%s: streamed slices differ from the "
                  "CPU by %g (relative L2)", name, rel_cpu);
    rtomo_fbp_destroy(cpu);
    rtomo_fbp_destroy(plan);
    free(ref);
    free(z);
    free(after);
    free(streamed);
    free(ev);
    free_scan(&s);
}

START_TEST(stream_matches_reconstruct_and_cpu)
{
    stream_case(_i, 0);
}
END_TEST

/* Masked: streamed chunks equal the after-the-scan masked path. */
START_TEST(stream_masked_matches_reconstruct_and_cpu)
{
    stream_case(_i, 1);
}
END_TEST

/* ------------------------------------------ frames, sliding window ---- */

#define WIN_WIDTH 64
#define WIN_ROWS 8
#define WIN_PROJ 120
#define WIN_LENGTH 45

/*
 * Phantom frames fed one by one (uint16, with a dark and a flat) while the
 * slices stream a sliding window: each projection is queued right after it
 * is fed and taken out WIN_LENGTH projections later.  Small frames gather
 * in the host staging bank, so chunks read projections whose frames are
 * still there: the backend must send them to filtering first.  Loop index:
 * ALU 1 float linear, texture 2 float linear, hybrid 4 half nearest.
 */
/* Flats refreshed half-way through a stream (rtomo_fbp_add_flat after
 * the first projection): frames staged on the host before the refresh
 * are filtered with the old field, later ones with the new, as on the
 * CPU (the reference), within the filter test's float bound. */
START_TEST(flat_field_refreshed_like_the_cpu)
{
    const int width = 96, rows = 4, n_proj = 48;
    rtomo_fbp_geometry g = test_fbp_geometry(width, rows, n_proj);
    rtomo_engine_options opt;
    test_gpu_options(&opt, RTOMO_BP_ALU, 1, RTOMO_PRECISION_FLOAT);
    rtomo_fbp *gpu = test_create(&g, &opt);
    rtomo_fbp *cpu = test_create_cpu(&g, 2);
    rtomo_phantom ph;
    rtomo_phantom_init(&ph, width, rows);
    rtomo_camera cam;
    rtomo_camera_init(&cam);
    const size_t pixels = (size_t)width * rows;
    uint16_t *frame = malloc(sizeof(uint16_t) * pixels);
    float *p = malloc(sizeof(float) * pixels);
    ck_assert(frame && p);
    rtomo_error err;
    for (int k = 0; k < n_proj; k++) {
        if (k == 0 || k == n_proj / 2) {
            cam.flat_level = k == 0 ? 40000 : 15000;
            rtomo_camera_flat(&cam, pixels, frame);
            ck_assert(rtomo_fbp_add_flat(gpu, frame, RTOMO_DTYPE_U16, &err) == RTOMO_OK);
            ck_assert(rtomo_fbp_add_flat(cpu, frame, RTOMO_DTYPE_U16, &err) == RTOMO_OK);
        }
        rtomo_phantom_project(&ph, M_PI * k / n_proj, p);
        rtomo_camera_expose(&cam, p, pixels, frame);
        ck_assert(rtomo_fbp_add_projection(gpu, k, frame, RTOMO_DTYPE_U16, NAN,
                                           NAN, &err) == RTOMO_OK);
        ck_assert(rtomo_fbp_add_projection(cpu, k, frame, RTOMO_DTYPE_U16, NAN,
                                           NAN, &err) == RTOMO_OK);
    }
    const int row = 2;
    const size_t image = (size_t)width * width;
    float *a = malloc(sizeof(float) * image), *b = malloc(sizeof(float) * image);
    test_reconstruct(gpu, &row, 1, a);
    test_reconstruct(cpu, &row, 1, b);
    const double e = test_rel_l2(a, b, image);
    ck_assert_msg(e <= 1e-4, "GPU vs CPU across a flat refresh: %.3g", e);
    free(a);
    free(b);
    free(frame);
    free(p);
    rtomo_fbp_destroy(gpu);
    rtomo_fbp_destroy(cpu);
}
END_TEST

/* Angle weights (irregular angles): the GPU's filtered projections carry
 * the same per-projection weights as the CPU's. */
START_TEST(angle_weights_like_the_cpu)
{
    const int width = 80, rows = 2, n_proj = 40;
    double angles[40];
    for (int p = 0; p < n_proj; p++)
        angles[p] = M_PI * pow((double)p / n_proj, 1.6);
    rtomo_fbp_geometry g = test_fbp_geometry(width, rows, n_proj);
    g.angles = angles;
    g.angle_weights = 1;
    rtomo_engine_options opt;
    test_gpu_options(&opt, RTOMO_BP_ALU, 1, RTOMO_PRECISION_FLOAT);
    rtomo_fbp *gpu = test_create(&g, &opt);
    rtomo_fbp *cpu = test_create_cpu(&g, 2);
    uint64_t seed = test_seed(0xa61e, 0);
    float *frame = malloc(sizeof(float) * (size_t)width * rows);
    rtomo_error err;
    for (int p = 0; p < n_proj; p++) {
        test_fill_uniform(&seed, frame, (size_t)width * rows, 0.0, 1.0);
        ck_assert(rtomo_fbp_add_projection(gpu, p, frame, RTOMO_DTYPE_F32, NAN,
                                           NAN, &err) == RTOMO_OK);
        ck_assert(rtomo_fbp_add_projection(cpu, p, frame, RTOMO_DTYPE_F32, NAN,
                                           NAN, &err) == RTOMO_OK);
    }
    float *a = malloc(sizeof(float) * (size_t)n_proj * width);
    float *b = malloc(sizeof(float) * (size_t)n_proj * width);
    ck_assert(rtomo_fbp_get_filtered(gpu, 1, a, &err) == RTOMO_OK);
    ck_assert(rtomo_fbp_get_filtered(cpu, 1, b, &err) == RTOMO_OK);
    const double e = test_rel_l2(a, b, (size_t)n_proj * width);
    ck_assert_msg(e <= 1e-5, "weighted filtered rows, GPU vs CPU: %.3g", e);
    free(a);
    free(b);
    free(frame);
    rtomo_fbp_destroy(gpu);
    rtomo_fbp_destroy(cpu);
}
END_TEST

START_TEST(sliding_window_over_fed_frames)
{
    static const gpu_mode modes[] = {
        {RTOMO_BP_ALU, 1, RTOMO_PRECISION_FLOAT, RTOMO_INTERP_LINEAR},
        {RTOMO_BP_TEXTURE, 2, RTOMO_PRECISION_FLOAT, RTOMO_INTERP_LINEAR},
        {RTOMO_BP_TEXTURE, 4, RTOMO_PRECISION_HALF, RTOMO_INTERP_NEAREST},
    };
    const char *name = test_mode_name(modes[_i].kernel, modes[_i].slices,
                                      modes[_i].precision, modes[_i].interp);
    rtomo_fbp_geometry g = test_fbp_geometry(WIN_WIDTH, WIN_ROWS, WIN_PROJ);
    g.interp = modes[_i].interp;
    g.window_proj = WIN_LENGTH;
    rtomo_engine_options opt;
    test_gpu_options(&opt, modes[_i].kernel, modes[_i].slices, modes[_i].precision);
    rtomo_fbp *plan = test_create(&g, &opt);

    rtomo_phantom ph;
    rtomo_phantom_init(&ph, WIN_WIDTH, WIN_ROWS);
    rtomo_camera cam;
    rtomo_camera_init(&cam);
    const size_t pixels = (size_t)WIN_WIDTH * WIN_ROWS;
    uint16_t *frame = malloc(sizeof(uint16_t) * pixels);
    float *p = malloc(sizeof(float) * pixels);
    ck_assert(frame && p);
    rtomo_error err;
    rtomo_camera_dark(&cam, pixels, frame);
    ck_assert_int_eq(rtomo_fbp_add_dark(plan, frame, RTOMO_DTYPE_U16, &err), RTOMO_OK);
    rtomo_camera_flat(&cam, pixels, frame);
    ck_assert_int_eq(rtomo_fbp_add_flat(plan, frame, RTOMO_DTYPE_U16, &err), RTOMO_OK);

    int rows[WIN_ROWS];
    for (int r = 0; r < WIN_ROWS; r++)
        rows[r] = r;
    open_rows(plan, rows, WIN_ROWS, 16);
    for (int k = 0; k < WIN_PROJ; k++) {
        rtomo_phantom_project(&ph, M_PI * k / WIN_PROJ, p);
        rtomo_camera_expose(&cam, p, pixels, frame);
        ck_assert_msg(rtomo_fbp_add_projection(plan, k, frame, RTOMO_DTYPE_U16, NAN,
                                               NAN, &err) == RTOMO_OK,
                      "add_projection %d: %s", k, err.message);
        queue(plan, k, 1.0f);
        if (k >= WIN_LENGTH)
            queue(plan, k - WIN_LENGTH, -1.0f);
    }
    const size_t image = (size_t)WIN_WIDTH * WIN_WIDTH;
    float *streamed = read_rows(plan, rows, WIN_ROWS, image);
    for (int k = 0; k < WIN_PROJ - WIN_LENGTH; k++)
        clear_slot(plan, k);
    float *after = reconstruct_rows(plan, rows, WIN_ROWS, image);
    const double rel = test_rel_l2(streamed, after, image * WIN_ROWS);
    const double bound = modes[_i].precision == RTOMO_PRECISION_HALF ? HALF_BOUND
                                                                     : FLOAT_BOUND;
    printf("window of %d over %d fed frames, %-24s vs reconstruct %.3e (bound %.0e), "
           "max |slice| %.3g\n", WIN_LENGTH, WIN_PROJ, name, rel, bound,
           test_max_abs(after, image * WIN_ROWS));
    ck_assert_msg(test_max_abs(after, image * WIN_ROWS) > 1e-3,
                  "%s: the window reconstructs to nothing", name);
    ck_assert_msg(rel <= bound, "%s: sliding window differs from reconstruct by %g",
                  name, rel);
    rtomo_fbp_destroy(plan);
    free(after);
    free(streamed);
    free(frame);
    free(p);
}
END_TEST

/* ----------------------------------------------------- reset, clear ---- */

/* A plan fed random sinograms (ALU, float, linear: deterministic) with
 * every kept row resident. */
static rtomo_fbp *resident_plan(scan *s, uint64_t seed, int *rows, int chunk)
{
    make_scan(s, seed, 53, 6, 37, 48, RTOMO_INTERP_LINEAR);
    rtomo_engine_options opt;
    test_gpu_options(&opt, RTOMO_BP_ALU, 1, RTOMO_PRECISION_FLOAT);
    rtomo_fbp *plan = test_create(&s->g, &opt);
    feed(plan, s, s->sinograms);
    for (int r = 0; r < s->g.row_count; r++)
        rows[r] = s->g.row_first + r;
    open_rows(plan, rows, s->g.row_count, chunk);
    return plan;
}

/* Reset zeroes the slices after the chunks already running and drops the
 * queue: only what is queued after it remains.  Chunks of one projection:
 * more chunks than the backend's ring of pinned entries, which wraps. */
START_TEST(reset_keeps_only_later_work)
{
    scan s;
    int rows[6];
    rtomo_fbp *plan = resident_plan(&s, test_seed(0x7e5e7, 0), rows, 1);
    for (int p = 0; p < s.g.n_proj; p += 2)
        queue(plan, p, 1.0f);
    flush(plan);
    queue(plan, 1, 1.0f);
    queue(plan, 3, 1.0f);
    rtomo_error err;
    ck_assert_int_eq(rtomo_fbp_stream_reset(plan, &err), RTOMO_OK);
    for (int p = 1; p < s.g.n_proj; p += 2)
        queue(plan, p, 1.0f);
    float *streamed = read_rows(plan, rows, 6, s.image);
    for (int p = 0; p < s.g.n_proj; p += 2)
        clear_slot(plan, p);
    float *after = reconstruct_rows(plan, rows, 6, s.image);
    const double rel = test_rel_l2(streamed, after, s.image * 6);
    printf("reset: odd projections only, vs reconstruct %.3e\n", rel);
    ck_assert_msg(rel <= FLOAT_BOUND, "after a reset: relative L2 %g", rel);
    rtomo_fbp_destroy(plan);
    free(after);
    free(streamed);
    free_scan(&s);
}
END_TEST

/* clear_projection zeroes one line of every kept row and nothing else. */
START_TEST(clear_projection_zeroes_one_line)
{
    scan s;
    make_scan(&s, test_seed(0xc1ea4, 0), 53, 6, 37, 48, RTOMO_INTERP_LINEAR);
    rtomo_engine_options opt;
    test_gpu_options(&opt, RTOMO_BP_ALU, 1, RTOMO_PRECISION_FLOAT);
    rtomo_fbp *plan = test_create(&s.g, &opt);
    feed(plan, &s, s.sinograms);
    clear_slot(plan, 11);
    const int w = s.g.det_width, np = s.g.n_proj;
    float *line = malloc(sizeof(float) * (size_t)np * w);
    ck_assert_ptr_nonnull(line);
    rtomo_error err;
    for (int r = 0; r < s.g.row_count; r++) {
        ck_assert_int_eq(rtomo_fbp_get_filtered(plan, s.g.row_first + r, line, &err),
                         RTOMO_OK);
        for (int p = 0; p < np; p++) {
            const float *want = s.sinograms + ((size_t)r * np + p) * w;
            for (int i = 0; i < w; i++)
                ck_assert_msg(line[(size_t)p * w + i] == (p == 11 ? 0.f : want[i]),
                              "row %d, projection %d, bin %d", r, p, i);
        }
    }
    free(line);
    rtomo_fbp_destroy(plan);
    free_scan(&s);
}
END_TEST

/* A frame still gathering in the host staging bank (small frames: many
 * per bank) is cleared too: it must not land after the zeros. */
START_TEST(clear_projection_after_a_staged_frame)
{
    rtomo_fbp_geometry g = test_fbp_geometry(32, 4, 16);
    rtomo_engine_options opt;
    test_gpu_options(&opt, RTOMO_BP_ALU, 1, RTOMO_PRECISION_FLOAT);
    rtomo_fbp *plan = test_create(&g, &opt);
    float frame[32 * 4], line[16 * 32];
    for (int i = 0; i < 32 * 4; i++)
        frame[i] = 1.0f + 0.01f * (float)i;
    rtomo_error err;
    ck_assert_int_eq(rtomo_fbp_add_projection(plan, 5, frame, RTOMO_DTYPE_F32, NAN, NAN,
                                              &err), RTOMO_OK);
    ck_assert_int_eq(rtomo_fbp_add_projection(plan, 6, frame, RTOMO_DTYPE_F32, NAN, NAN,
                                              &err), RTOMO_OK);
    clear_slot(plan, 5);
    ck_assert_int_eq(rtomo_fbp_sync(plan, &err), RTOMO_OK);
    for (int r = 0; r < 4; r++) {
        ck_assert_int_eq(rtomo_fbp_get_filtered(plan, r, line, &err), RTOMO_OK);
        double five = 0.0, six = 0.0;
        for (int i = 0; i < 32; i++) {
            five += fabs(line[5 * 32 + i]);
            six += fabs(line[6 * 32 + i]);
        }
        ck_assert_msg(five == 0.0, "row %d: the cleared slot holds %g", r, five);
        ck_assert_msg(six > 0.0, "row %d: the slot fed after it is empty", r);
    }
    rtomo_fbp_destroy(plan);
}
END_TEST

/* Clearing a queued slot first applies the queue, which reads the slot's
 * data as it was. */
START_TEST(clear_projection_after_queued_work)
{
    scan s;
    int rows[6];
    rtomo_fbp *plan = resident_plan(&s, test_seed(0xc1ea5, 0), rows, 64);
    float *before = reconstruct_rows(plan, rows, 6, s.image);
    for (int p = 0; p < s.g.n_proj; p++)
        queue(plan, p, 1.0f);       /* 37 < 64: all still queued */
    clear_slot(plan, 20);
    float *streamed = read_rows(plan, rows, 6, s.image);
    const double rel = test_rel_l2(streamed, before, s.image * 6);
    printf("clear of a queued slot: vs reconstruct before the clear %.3e\n", rel);
    ck_assert_msg(rel <= FLOAT_BOUND, "the queued slot was cleared before it was "
                  "applied: relative L2 %g", rel);
    rtomo_fbp_destroy(plan);
    free(before);
    free(streamed);
    free_scan(&s);
}
END_TEST

/* ------------------------------------------------------------ slots ---- */

#define SPLIT_ROWS 94
#define SPLIT_WIDTH 40
#define SPLIT_PROJ 37

static rtomo_fbp *create_split(const rtomo_fbp_geometry *g,
                               const rtomo_engine_options *opt, int split)
{
    rtomo_fbp *plan = test_create_split(g, opt, split);
    rtomo_cuda_fbp_debug_slot slots[16];
    ck_assert_int_eq(rtomo_cuda_fbp_debug_slots(plan, slots, 16), split);
    return plan;
}

/* Stream the schedule into `plan`, read the rows in `order`. */
static float *stream_schedule(rtomo_fbp *plan, const int *rows, int n_rows,
                              const int *order, const event *ev, int n_events,
                              size_t image, uint64_t seed, int direct)
{
    open_rows(plan, rows, n_rows, 0);
    play(plan, &seed, ev, n_events);
    return read_rows_as(plan, order, n_rows, image, direct);
}

/*
 * One GPU split into 2 and 3 slots (RTOMO_CUDA_FBP_SPLIT): every slot
 * holds only its rows, each chunk runs on all; the slices equal one slot's
 * and the after-the-scan path.  94 rows give each slot more than 16
 * groups: several launches per chunk.  Loop index: ALU 1 float linear,
 * texture 4 float nearest, standard 2 half linear; from 3 on the same
 * with the circular field of view (each slot's launches mask alike, the
 * slices exactly 0 outside).
 */
START_TEST(split_slots_match_one_slot)
{
    static const gpu_mode modes[] = {
        {RTOMO_BP_ALU, 1, RTOMO_PRECISION_FLOAT, RTOMO_INTERP_LINEAR},
        {RTOMO_BP_TEXTURE, 4, RTOMO_PRECISION_FLOAT, RTOMO_INTERP_NEAREST},
        {RTOMO_BP_STANDARD, 2, RTOMO_PRECISION_HALF, RTOMO_INTERP_LINEAR},
    };
    const int circle = _i >= 3;
    _i %= 3;
    char name[96];
    snprintf(name, sizeof name, "%s%s", test_mode_name(modes[_i].kernel,
             modes[_i].slices, modes[_i].precision, modes[_i].interp),
             circle ? " circle" : "");
    uint64_t seed = test_seed(0x5b1170, _i + 3 * circle);
    scan s;
    make_scan(&s, seed, SPLIT_WIDTH, SPLIT_ROWS, SPLIT_PROJ, SPLIT_WIDTH,
              modes[_i].interp);
    s.g.field_of_view = circle ? RTOMO_FOV_CIRCLE : RTOMO_FOV_FULL;
    s.g.roi_x = s.g.roi_y = 0;
    s.g.roi_width = s.g.roi_height = SPLIT_WIDTH;
    s.image = (size_t)SPLIT_WIDTH * SPLIT_WIDTH;
    rtomo_engine_options opt;
    test_gpu_options(&opt, modes[_i].kernel, modes[_i].slices, modes[_i].precision);
    /* One GPU, split: with all of a 2-GPU host's devices each would be
     * split (4 slots where 2 are asked; seen on an H200 pair). */
    opt.n_devices = 1;
    opt.device_ids[0] = 0;
    int rows[SPLIT_ROWS], order[SPLIT_ROWS + 3];
    const int n_rows = pick_rows(&seed, &s.g, rows);
    memcpy(order, rows, sizeof(int) * (size_t)n_rows);
    shuffle(&seed, order, n_rows);
    unsigned char zeroed[SPLIT_PROJ];
    int n_events;
    event *ev = make_schedule(&seed, SPLIT_PROJ, zeroed, &n_events);
    const uint64_t play_seed = seed;
    const size_t n = s.image * (size_t)n_rows;
    const double bound = modes[_i].precision == RTOMO_PRECISION_HALF ? HALF_BOUND
                                                                     : FLOAT_BOUND;

    rtomo_fbp *one = test_create(&s.g, &opt);
    feed(one, &s, s.sinograms);
    float *ref = stream_schedule(one, rows, n_rows, order, ev, n_events, s.image,
                                 play_seed, 0);
    for (int split = 2; split <= 3; split++) {
        rtomo_fbp *parts = create_split(&s.g, &opt, split);
        feed(parts, &s, s.sinograms);
        float *out = stream_schedule(parts, rows, n_rows, order, ev, n_events,
                                     s.image, play_seed, split == 3);
        const double rel_one = test_rel_l2(out, ref, n);
        for (int p = 0; p < SPLIT_PROJ; p++)
            if (zeroed[p])
                clear_slot(parts, p);
        float *after = reconstruct_rows(parts, order, n_rows, s.image);
        const double rel = test_rel_l2(out, after, n);
        printf("%d slots, %-24s %d rows%s: vs one slot %.3e, vs reconstruct %.3e "
               "(bound %.0e)\n", split, name, n_rows, split == 3 ? ", direct read" : "",
               rel_one, rel, bound);
        ck_assert_msg(rel_one <= bound, "%s, %d slots: differs from one slot by %g",
                      name, split, rel_one);
        ck_assert_msg(rel <= bound, "%s, %d slots: differs from reconstruct by %g",
                      name, split, rel);
        if (circle) {
            ck_assert(test_zeros_outside_fov(&s.g, out, n_rows, name) > 0);
            test_zeros_outside_fov(&s.g, after, n_rows, name);
        }
        free(after);
        free(out);
        rtomo_fbp_destroy(parts);
    }
    free(ref);
    free(ev);
    rtomo_fbp_destroy(one);
    free_scan(&s);
}
END_TEST

/* ------------------------------------------------- slab by slab ---- */

#define SLAB_ROWS 96
#define SLAB_WIDTH 384
#define SLAB_PROJ 256
#define SLAB_READ 16

/*
 * rtomod reads a scan's resident slices in batches, straight into
 * page-locked memory, right after the last chunk is queued.  Each batch
 * waits only for the launch of the last chunk that finishes its images
 * (several launches: 96 rows give more than 16 groups), so a batch leaves
 * while the chunk's later launches still add into the slices after it.
 * Every batch read so, first to last and last to first, equals the
 * after-the-scan path.  Loop index: ALU 1 float linear, texture 4 half
 * nearest.
 */
START_TEST(slabs_read_while_the_last_chunk_runs)
{
    static const gpu_mode modes[] = {
        {RTOMO_BP_ALU, 1, RTOMO_PRECISION_FLOAT, RTOMO_INTERP_LINEAR},
        {RTOMO_BP_TEXTURE, 4, RTOMO_PRECISION_HALF, RTOMO_INTERP_NEAREST},
    };
    const char *name = test_mode_name(modes[_i].kernel, modes[_i].slices,
                                      modes[_i].precision, modes[_i].interp);
    uint64_t seed = test_seed(0x51ab5, _i);
    scan s;
    make_scan(&s, seed, SLAB_WIDTH, SLAB_ROWS, SLAB_PROJ, SLAB_WIDTH,
              modes[_i].interp);
    rtomo_engine_options opt;
    test_gpu_options(&opt, modes[_i].kernel, modes[_i].slices, modes[_i].precision);
    opt.n_devices = 1;
    opt.device_ids[0] = 0;
    rtomo_fbp *plan = test_create(&s.g, &opt);
    feed(plan, &s, s.sinograms);
    int rows[SLAB_ROWS];
    for (int r = 0; r < SLAB_ROWS; r++)
        rows[r] = s.g.row_first + r;
    const size_t n = s.image * SLAB_ROWS;
    float *after = reconstruct_rows(plan, rows, SLAB_ROWS, s.image);
    const double bound = modes[_i].precision == RTOMO_PRECISION_HALF ? HALF_BOUND
                                                                     : FLOAT_BOUND;
    for (int backwards = 0; backwards <= 1; backwards++) {
        open_rows(plan, rows, SLAB_ROWS, SLAB_PROJ);
        for (int p = 0; p < SLAB_PROJ; p++)
            queue(plan, p, 1.0f);
        float *streamed = malloc(sizeof(float) * n);
        ck_assert_ptr_nonnull(streamed);
        for (int b = 0; b < SLAB_ROWS / SLAB_READ; b++) {
            const int first = SLAB_READ * (backwards ? SLAB_ROWS / SLAB_READ - 1 - b : b);
            float *part = read_rows_as(plan, rows + first, SLAB_READ, s.image, 1);
            memcpy(streamed + s.image * (size_t)first, part,
                   sizeof(float) * s.image * SLAB_READ);
            free(part);
        }
        const double rel = test_rel_l2(streamed, after, n);
        printf("%-24s %d rows read %d at a time%s, directly: vs reconstruct %.3e "
               "(bound %.0e)\n", name, SLAB_ROWS, SLAB_READ,
               backwards ? ", last first" : "", rel, bound);
        ck_assert_msg(rel <= bound, "%s: slabs read while the chunk ran differ "
                      "from reconstruct by %g", name, rel);
        free(streamed);
        rtomo_fbp_stream_close(plan);
    }
    free(after);
    rtomo_fbp_destroy(plan);
    free_scan(&s);
}
END_TEST

/* -------------------------------------------------- too large a set ---- */

/*
 * More slices of 4096^2 than the GPU's memory holds: stream_open refuses
 * them with RTOMO_E_NOMEM and the plan works on, streaming a few slices of
 * a smaller region and reconstructing as before.
 */
START_TEST(too_large_a_set_is_refused)
{
    rtomo_device_info info;
    rtomo_error err;
    ck_assert_int_eq(rtomo_cuda_device_info(0, &info, &err), RTOMO_OK);
    const size_t image = (size_t)4096 * 4096 * sizeof(float);
    const int rows = (int)(info.memory_total / image) / 4 * 4 + 16;
    rtomo_fbp_geometry g = test_fbp_geometry(4096, rows, 4);
    rtomo_engine_options opt;
    test_gpu_options(&opt, RTOMO_BP_ALU, 1, RTOMO_PRECISION_FLOAT);
    opt.n_devices = 1;
    opt.device_ids[0] = 0;
    rtomo_fbp *plan = test_create(&g, &opt);
    int *all = malloc(sizeof(int) * (size_t)rows);
    ck_assert_ptr_nonnull(all);
    for (int r = 0; r < rows; r++)
        all[r] = r;
    const rtomo_status st = rtomo_fbp_stream_open(plan, all, rows, &err);
    printf("%d resident slices of 4096^2 on %s (%.1f GiB): %s\n", rows, info.name,
           (double)info.memory_total / (1 << 30),
           st == RTOMO_OK ? "accepted" : err.message);
    ck_assert_int_eq(st, RTOMO_E_NOMEM);
    ck_assert_int_eq(rtomo_fbp_stream_rows(plan), 0);

    /* Still usable: a few slices of a small region, against reconstruct. */
    ck_assert_int_eq(rtomo_fbp_set_roi(plan, 1900, 2000, 200, 150, &err), RTOMO_OK);
    const int few[4] = {3, 400, 401, rows - 1};
    const size_t line = (size_t)4 * 4096;
    float *sino = malloc(sizeof(float) * line);
    ck_assert_ptr_nonnull(sino);
    uint64_t seed = test_seed(0x10a6e, 0);
    for (int k = 0; k < 4; k++) {
        test_fill_uniform(&seed, sino, line, -1.0, 1.0);
        ck_assert_int_eq(rtomo_fbp_set_filtered(plan, few[k], 1, sino, &err), RTOMO_OK);
    }
    open_rows(plan, few, 4, 0);
    for (int p = 3; p >= 0; p--)
        queue(plan, p, 1.0f);
    const size_t small = (size_t)200 * 150;
    float *streamed = read_rows(plan, few, 4, small);
    float *after = reconstruct_rows(plan, few, 4, small);
    const double rel = test_rel_l2(streamed, after, small * 4);
    printf("after the refusal: 4 slices streamed vs reconstruct %.3e\n", rel);
    ck_assert_msg(rel <= FLOAT_BOUND, "after a refused open: relative L2 %g", rel);
    ck_assert_msg(test_max_abs(after, small * 4) > 0.0, "nothing reconstructed");
    rtomo_fbp_destroy(plan);
    free(streamed);
    free(after);
    free(sino);
    free(all);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cuda_fbp_stream");
    TCase *tc = tcase_create("stream");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, stream_matches_reconstruct_and_cpu, 0, 4 * N_VARIANTS);
    tcase_add_loop_test(tc, stream_masked_matches_reconstruct_and_cpu, 0,
                        4 * N_VARIANTS);
    tcase_add_loop_test(tc, sliding_window_over_fed_frames, 0, 3);
    tcase_add_test(tc, reset_keeps_only_later_work);
    tcase_add_test(tc, flat_field_refreshed_like_the_cpu);
    tcase_add_test(tc, angle_weights_like_the_cpu);
    tcase_add_test(tc, clear_projection_zeroes_one_line);
    tcase_add_test(tc, clear_projection_after_a_staged_frame);
    tcase_add_test(tc, clear_projection_after_queued_work);
    tcase_add_loop_test(tc, split_slots_match_one_slot, 0, 6);
    tcase_add_loop_test(tc, slabs_read_while_the_last_chunk_runs, 0, 2);
    tcase_add_test(tc, too_large_a_set_is_refused);
    suite_add_tcase(s, tc);
    return test_run_gpu_suite(s);
}
