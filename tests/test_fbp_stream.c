/*
 * test_fbp_stream.c — streaming back-projection and sliding windows on the
 * CPU backend (the reference): resident slices fed in any order, with
 * projections missing, added and subtracted again, overwritten while
 * queued, cleared; the weight of a window smaller than the plan; reads
 * that fall back to back-projection when the ROI changed; the argument
 * checks; and sliding windows over a long stream, incremental and from
 * scratch, against separate from-scratch reconstructions of exactly the
 * window's projections (window 10 000 included).
 *
 * Bounds: streaming sums the same float terms as rtomo_fbp_reconstruct in
 * another grouping (chunk partial sums added into the slices), so the two
 * differ by float rounding alone: about 1e-7 relative here; the bound is
 * 1e-6.  A window after 10 000 windows of additions and subtractions must
 * stay within 1e-5 of a fresh reconstruction (measured with the default
 * refresh of 50 reads: about 1e-7; never refreshed, 2000 windows
 * drift to about 2e-6).
 *
 * The end of a scan on an asynchronous device (fbp_stream.c's
 * early_share) is checked here too, on the CPU backend behind a stand-in
 * for the device's idle signal: the plan's ops table is swapped for a
 * copy whose stream_idle the test sets, and whose stream_apply records
 * each chunk's size before the CPU's applies it.
 */
#include "config.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rtomo_engine.h"
#include "engine_internal.h"
#include "check_run.h"
#include "test_util.h"

#define STREAM_BOUND 1e-6
#define WINDOW_BOUND 1e-5

#define WIDTH 40
#define HEIGHT 5
#define N_PROJ 75

static rtomo_fbp_geometry small_geometry(int n_proj)
{
    rtomo_fbp_geometry g = test_fbp_geometry(WIDTH, HEIGHT, n_proj);
    g.row_first = 1;
    g.row_count = 3;
    g.slice_size = 36;
    return g;
}

/* A random float projection of the whole detector, reproducible from
 * (salt, index). */
static void random_frame(uint64_t salt, int64_t index, float *frame)
{
    uint64_t seed = test_seed(salt, (int)(index % 1000003));
    test_fill_uniform(&seed, frame, (size_t)WIDTH * HEIGHT, 0.0, 1.0);
}

static void feed(rtomo_fbp *plan, int slot, uint64_t salt, int64_t index,
                 double angle)
{
    float frame[WIDTH * HEIGHT];
    random_frame(salt, index, frame);
    rtomo_error err;
    ck_assert_msg(rtomo_fbp_add_projection(plan, slot, frame, RTOMO_DTYPE_F32,
                                           angle, NAN, &err) == RTOMO_OK,
                  "add_projection: %s", err.message);
}

static void queue(rtomo_fbp *plan, int slot, float weight)
{
    rtomo_error err;
    ck_assert_msg(rtomo_fbp_stream_queue(plan, slot, weight, &err) == RTOMO_OK,
                  "stream_queue: %s", err.message);
}

static void open_rows(rtomo_fbp *plan, const int *rows, int n)
{
    rtomo_error err;
    ck_assert_msg(rtomo_fbp_stream_open(plan, rows, n, &err) == RTOMO_OK,
                  "stream_open: %s", err.message);
}

static void read_rows(rtomo_fbp *plan, const int *rows, int n, float *out)
{
    rtomo_error err;
    ck_assert_msg(rtomo_fbp_stream_read(plan, rows, n, out, &err) == RTOMO_OK,
                  "stream_read: %s", err.message);
}

static size_t image_of(const rtomo_fbp *plan)
{
    const rtomo_fbp_geometry *g = rtomo_fbp_geometry_of(plan);
    return (size_t)g->roi_width * (size_t)g->roi_height;
}

static double test_min(const float *a, size_t n)
{
    float m = a[0];
    for (size_t i = 1; i < n; i++)
        m = a[i] < m ? a[i] : m;
    return m;
}

static double test_max(const float *a, size_t n)
{
    float m = a[0];
    for (size_t i = 1; i < n; i++)
        m = a[i] > m ? a[i] : m;
    return m;
}

/* Shuffle a[0..n-1]. */
static void shuffle(uint64_t *seed, int *a, int n)
{
    for (int i = n - 1; i > 0; i--) {
        int j = test_rand_int(seed, 0, i);
        int t = a[i];
        a[i] = a[j];
        a[j] = t;
    }
}

static void check_close(const float *a, const float *ref, size_t n,
                        double bound, const char *what)
{
    double e = test_rel_l2(a, ref, n);
    ck_assert_msg(test_max_abs(ref, n) > 0, "%s: the reference is all zero",
                  what);
    ck_assert_msg(e <= bound, "%s: relative L2 %.3g > %.1g", what, e, bound);
}

/* ------------------------------------------------------ streaming ---- */

/* Projections in a random order, a fifth never fed; some queued twice and
 * subtracted once; the slices equal a back-projection of the same slots. */
static void stream_matches_reconstruct(rtomo_interp interp, int roi)
{
    uint64_t seed = test_seed(11, (int)interp * 2 + roi);
    rtomo_fbp_geometry g = small_geometry(N_PROJ);
    g.interp = interp;
    if (roi) {
        g.roi_x = 5;
        g.roi_y = 3;
        g.roi_width = 21;
        g.roi_height = 27;
    }
    rtomo_fbp *plan = test_create_cpu(&g, 3);
    const int rows[] = {1, 3};
    open_rows(plan, rows, 2);
    int order[N_PROJ];
    for (int p = 0; p < N_PROJ; p++)
        order[p] = p;
    shuffle(&seed, order, N_PROJ);
    for (int i = 0; i < N_PROJ; i++) {
        int p = order[i];
        if (p % 5 == 2)
            continue;   /* never arrives */
        feed(plan, p, 1, p, NAN);
        queue(plan, p, 1.0f);
        if (p % 7 == 0) {   /* added twice, subtracted once */
            queue(plan, p, 1.0f);
            queue(plan, p, -1.0f);
        }
    }
    size_t image = image_of(plan);
    float *streamed = malloc(sizeof(float) * image * 2);
    float *ref = malloc(sizeof(float) * image * 2);
    read_rows(plan, rows, 2, streamed);
    test_reconstruct(plan, rows, 2, ref);
    check_close(streamed, ref, image * 2, STREAM_BOUND, "streamed slices");
    /* Reads leave the slices resident: a second read gives the same. */
    read_rows(plan, rows + 1, 1, streamed);
    check_close(streamed, ref + image, image, STREAM_BOUND, "second read");
    free(streamed);
    free(ref);
    rtomo_fbp_destroy(plan);
}

START_TEST(stream_linear) { stream_matches_reconstruct(RTOMO_INTERP_LINEAR, 0); }
END_TEST

/* ------------------------------------------------ a scan's last chunks ---- */

/* The stand-in device: idle when the test says, chunks recorded. */
static const rtomo_fbp_backend_ops *cpu_ops;
static rtomo_fbp_backend_ops device_ops;
static int device_idle;
static int chunk_sizes[16], n_chunks;

static int stand_in_idle(const rtomo_fbp *plan)
{
    (void)plan;
    return device_idle;
}

static rtomo_status stand_in_apply(rtomo_fbp *plan, const int *slots,
                                   const float *weights, int n,
                                   rtomo_error *err)
{
    ck_assert_int_lt(n_chunks, 16);
    chunk_sizes[n_chunks++] = n;
    return cpu_ops->stream_apply(plan, slots, weights, n, err);
}

/* Put the stand-in device behind the plan's CPU backend. */
static void stand_in_device(rtomo_fbp *plan)
{
    cpu_ops = plan->ops;
    device_ops = *cpu_ops;
    device_ops.stream_idle = stand_in_idle;
    device_ops.stream_apply = stand_in_apply;
    plan->ops = &device_ops;
    n_chunks = 0;
}

/* Feed and queue slots [first, last] with the device in state `idle`. */
static void feed_range(rtomo_fbp *plan, int first, int last, int idle)
{
    device_idle = idle;
    for (int p = first; p <= last; p++) {
        feed(plan, p, 5, p, NAN);
        queue(plan, p, 1.0f);
    }
}

static void check_chunks(const int *expected, int n, const char *what)
{
    ck_assert_msg(n_chunks == n, "%s: %d chunks, expected %d", what, n_chunks, n);
    for (int i = 0; i < n; i++)
        ck_assert_msg(chunk_sizes[i] == expected[i],
                      "%s: chunk %d holds %d projections, expected %d", what,
                      i, chunk_sizes[i], expected[i]);
}

/* An idle device gets every queued projection while more are still to come
 * than are queued; after that only what is still to come (at least 16),
 * and the read after the last frame flushes the rest as one chunk.  The
 * slices equal the after-the-scan back-projection. */
START_TEST(scan_end_keeps_the_last_chunk_whole)
{
    rtomo_fbp_geometry g = small_geometry(N_PROJ);
    rtomo_fbp *plan = test_create_cpu(&g, 2);
    stand_in_device(plan);
    const int rows[] = {1, 2, 3};
    open_rows(plan, rows, 3);
    /* The CPU's chunk is 32 projections: the queue never fills here. */
    ck_assert_int_eq(rtomo_fbp_stream_chunk(plan), 32);
    feed_range(plan, 0, 19, 0);
    feed_range(plan, 20, 20, 1);    /* 21 queued, 54 to come: all */
    feed_range(plan, 21, 49, 0);
    feed_range(plan, 50, 50, 1);    /* 30 queued, 24 to come: 24 */
    feed_range(plan, 51, 64, 0);
    feed_range(plan, 65, 65, 1);    /* 21 queued, 9 to come: 16 */
    feed_range(plan, 66, 74, 0);    /* 14 queued, none to come */
    const int before_read[] = {21, 24, 16};
    check_chunks(before_read, 3, "before the read");
    size_t image = image_of(plan);
    float *streamed = malloc(sizeof(float) * image * 3);
    float *ref = malloc(sizeof(float) * image * 3);
    ck_assert_ptr_nonnull(streamed);
    ck_assert_ptr_nonnull(ref);
    read_rows(plan, rows, 3, streamed);
    const int all[] = {21, 24, 16, 14};
    check_chunks(all, 4, "after the read");
    test_reconstruct(plan, rows, 3, ref);
    check_close(streamed, ref, image * 3, STREAM_BOUND, "streamed slices");
    free(streamed);
    free(ref);
    plan->ops = cpu_ops;
    rtomo_fbp_destroy(plan);
}
END_TEST

/* A sliding window (a projection taken out) never ends: an idle device
 * gets the whole queue however few projections are still to come. */
START_TEST(sliding_window_chunks_stay_whole)
{
    rtomo_fbp_geometry g = small_geometry(N_PROJ);
    rtomo_fbp *plan = test_create_cpu(&g, 2);
    stand_in_device(plan);
    const int rows[] = {2};
    open_rows(plan, rows, 1);
    for (int p = 0; p < 70; p++)
        feed(plan, p, 5, p, NAN);
    device_idle = 0;
    for (int p = 0; p < 20; p++)
        queue(plan, p, 1.0f);
    queue(plan, 3, -1.0f);
    feed_range(plan, 70, 70, 1);    /* 22 queued, 4 to come: all */
    const int whole[] = {22};
    check_chunks(whole, 1, "sliding window");
    plan->ops = cpu_ops;
    rtomo_fbp_destroy(plan);
}
END_TEST
START_TEST(stream_nearest_roi) { stream_matches_reconstruct(RTOMO_INTERP_NEAREST, 1); }
END_TEST

/* A queued slot fed again before its chunk ran: the chunk used the data
 * queued, not the new data. */
START_TEST(stream_queued_slot_overwritten)
{
    rtomo_fbp_geometry g = small_geometry(8);
    rtomo_fbp *plan = test_create_cpu(&g, 2);
    rtomo_fbp *ref_plan = test_create_cpu(&g, 2);
    const int row = 2;
    open_rows(plan, &row, 1);
    for (int p = 0; p < 8; p++) {
        feed(plan, p, 2, p, NAN);
        feed(ref_plan, p, 2, p, NAN);
        queue(plan, p, 1.0f);
    }
    ck_assert_int_gt(rtomo_fbp_stream_chunk(plan), 8);  /* all still queued */
    feed(plan, 3, 2, 1000, NAN);    /* new data into a queued slot */
    size_t image = image_of(plan);
    float *a = malloc(sizeof(float) * image), *b = malloc(sizeof(float) * image);
    read_rows(plan, &row, 1, a);
    test_reconstruct(ref_plan, &row, 1, b);
    check_close(a, b, image, STREAM_BOUND, "slices of the data queued");
    free(a);
    free(b);
    rtomo_fbp_destroy(plan);
    rtomo_fbp_destroy(ref_plan);
}
END_TEST

/* clear_projection: the slot contributes nothing afterwards. */
START_TEST(clear_projection_zeroes_slot)
{
    rtomo_fbp_geometry g = small_geometry(12);
    rtomo_fbp *plan = test_create_cpu(&g, 2);
    rtomo_fbp *ref_plan = test_create_cpu(&g, 2);
    for (int p = 0; p < 12; p++) {
        feed(plan, p, 3, p, NAN);
        if (p != 4 && p != 9)
            feed(ref_plan, p, 3, p, NAN);
    }
    rtomo_error err;
    ck_assert(rtomo_fbp_clear_projection(plan, 4, &err) == RTOMO_OK);
    ck_assert(rtomo_fbp_clear_projection(plan, 9, &err) == RTOMO_OK);
    ck_assert(rtomo_fbp_clear_projection(plan, 12, &err) == RTOMO_E_RANGE);
    const int row = 3;
    size_t image = image_of(plan);
    float *a = malloc(sizeof(float) * image), *b = malloc(sizeof(float) * image);
    test_reconstruct(plan, &row, 1, a);
    test_reconstruct(ref_plan, &row, 1, b);
    ck_assert(test_rel_l2(a, b, image) == 0.0);
    free(a);
    free(b);
    rtomo_fbp_destroy(plan);
    rtomo_fbp_destroy(ref_plan);
}
END_TEST

/* window_proj: a plan of 100 slots weighting as 60 equals a plan of 60. */
START_TEST(window_proj_sets_the_weight)
{
    rtomo_fbp_geometry g = small_geometry(100);
    g.window_proj = 60;
    g.angle_step = M_PI / 60;
    rtomo_fbp_geometry g60 = small_geometry(60);
    rtomo_fbp *plan = test_create_cpu(&g, 2);
    rtomo_fbp *ref_plan = test_create_cpu(&g60, 2);
    for (int p = 0; p < 60; p++) {
        feed(plan, p, 4, p, NAN);
        feed(ref_plan, p, 4, p, NAN);
    }
    const int row = 1;
    size_t image = image_of(plan);
    float *a = malloc(sizeof(float) * image), *b = malloc(sizeof(float) * image);
    test_reconstruct(plan, &row, 1, a);
    test_reconstruct(ref_plan, &row, 1, b);
    check_close(a, b, image, 1e-7, "window_proj weight");
    free(a);
    free(b);
    rtomo_fbp_destroy(plan);
    rtomo_fbp_destroy(ref_plan);
    g.window_proj = 101;
    rtomo_error err;
    ck_assert(rtomo_fbp_geometry_validate(&g, &err) == RTOMO_E_INVALID);
    ck_assert_ptr_nonnull(strstr(err.message, "window_proj"));
}
END_TEST

/* collect: resident rows are read, others (and every row once the ROI
 * changed) are back-projected; reset zeroes. */
START_TEST(collect_and_reset)
{
    rtomo_fbp_geometry g = small_geometry(30);
    rtomo_fbp *plan = test_create_cpu(&g, 2);
    const int resident = 2;
    open_rows(plan, &resident, 1);
    for (int p = 0; p < 30; p++) {
        feed(plan, p, 5, p, NAN);
        if (p < 20)
            queue(plan, p, 1.0f);   /* the last 10 not streamed */
    }
    const int rows[] = {1, 2, 3};
    ck_assert(rtomo_fbp_stream_has(plan, 2) && !rtomo_fbp_stream_has(plan, 1));
    size_t image = image_of(plan);
    float *a = malloc(sizeof(float) * image * 3);
    float *b = malloc(sizeof(float) * image * 3);
    rtomo_error err;
    double stats[9];
    ck_assert(rtomo_fbp_stream_collect(plan, rows, 3, a, stats, &err) ==
              RTOMO_OK);
    /* Statistics for the resident row only, describing it. */
    ck_assert(isnan(stats[0]) && isnan(stats[8]));
    ck_assert(stats[3] == test_min(a + image, image) &&
              stats[4] == test_max(a + image, image));
    test_reconstruct(plan, rows, 3, b);
    ck_assert(test_rel_l2(a, b, image) == 0.0);                 /* row 1 */
    ck_assert(test_rel_l2(a + 2 * image, b + 2 * image, image) == 0.0);
    ck_assert(test_rel_l2(a + image, b + image, image) > 1e-3); /* 20 of 30 */
    /* Another ROI: nothing is resident at it any more. */
    ck_assert(rtomo_fbp_set_roi(plan, 0, 0, 10, 10, &err) == RTOMO_OK);
    ck_assert(!rtomo_fbp_stream_has(plan, 2));
    ck_assert(rtomo_fbp_set_roi(plan, 0, 0, 0, 0, &err) == RTOMO_OK);
    ck_assert(rtomo_fbp_stream_reset(plan, &err) == RTOMO_OK);
    read_rows(plan, &resident, 1, a);
    ck_assert(test_max_abs(a, image) == 0.0);
    free(a);
    free(b);
    rtomo_fbp_destroy(plan);
}
END_TEST

START_TEST(stream_argument_checks)
{
    rtomo_fbp_geometry g = small_geometry(10);
    rtomo_fbp *plan = test_create_cpu(&g, 1);
    rtomo_error err;
    float out[36 * 36];
    ck_assert(rtomo_fbp_stream_queue(plan, 0, 1.0f, &err) == RTOMO_E_STATE);
    ck_assert(rtomo_fbp_stream_read(plan, (int[]){1}, 1, out, &err) ==
              RTOMO_E_STATE);
    ck_assert(rtomo_fbp_stream_open(plan, (int[]){2, 1}, 2, &err) ==
              RTOMO_E_INVALID);
    ck_assert(rtomo_fbp_stream_open(plan, (int[]){0}, 1, &err) ==
              RTOMO_E_RANGE);
    ck_assert_int_eq(rtomo_fbp_stream_rows(plan), 0);
    open_rows(plan, (int[]){1, 2}, 2);
    ck_assert_int_eq(rtomo_fbp_stream_rows(plan), 2);
    ck_assert(rtomo_fbp_stream_open(plan, (int[]){3}, 1, &err) ==
              RTOMO_E_STATE);
    ck_assert(rtomo_fbp_stream_queue(plan, 10, 1.0f, &err) == RTOMO_E_RANGE);
    ck_assert(rtomo_fbp_stream_queue(plan, 1, 0.5f, &err) == RTOMO_E_INVALID);
    ck_assert(rtomo_fbp_stream_read(plan, (int[]){3}, 1, out, &err) ==
              RTOMO_E_RANGE);
    ck_assert_ptr_nonnull(strstr(err.message, "no resident slice"));
    rtomo_fbp_stream_close(plan);
    ck_assert_int_eq(rtomo_fbp_stream_rows(plan), 0);
    rtomo_fbp_destroy(plan);
}
END_TEST

/* ------------------------------------------------- flats that change ---- */

/* Counts of a projection: flat level `open` (dark 100), transmission from
 * random line integrals p in [0, 1). */
static void camera_frame(uint64_t salt, int index, double open,
                         uint16_t *counts, float *line)
{
    random_frame(salt, index, line);
    for (int i = 0; i < WIDTH * HEIGHT; i++)
        counts[i] = (uint16_t)lrint(100.0 + (open - 100.0) * exp(-line[i]));
}

/* A stream whose flats are refreshed half-way (darks too): projections
 * before use the first field, those after the second; the slices equal a
 * plan fed line integrals computed here, in double, from each frame's own
 * field. */
START_TEST(flat_field_refreshed_mid_stream)
{
    rtomo_fbp_geometry g = small_geometry(40);
    rtomo_fbp *plan = test_create_cpu(&g, 2);
    rtomo_fbp *ref = test_create_cpu(&g, 2);
    uint16_t dark[WIDTH * HEIGHT], flat[WIDTH * HEIGHT];
    uint16_t counts[WIDTH * HEIGHT];
    float line[WIDTH * HEIGHT], truth[WIDTH * HEIGHT];
    rtomo_error err;
    for (int p = 0; p < 40; p++) {
        const double open = p < 20 ? 30000.0 : 12000.0;
        if (p == 0 || p == 20) {    /* a field: 1 dark, 1 flat */
            for (int i = 0; i < WIDTH * HEIGHT; i++) {
                dark[i] = 100;
                flat[i] = (uint16_t)open;
            }
            ck_assert(rtomo_fbp_add_dark(plan, dark, RTOMO_DTYPE_U16, &err) ==
                      RTOMO_OK);
            ck_assert(rtomo_fbp_add_flat(plan, flat, RTOMO_DTYPE_U16, &err) ==
                      RTOMO_OK);
        }
        camera_frame(9, p, open, counts, line);
        for (int i = 0; i < WIDTH * HEIGHT; i++)
            truth[i] = (float)-log((counts[i] - 100.0) / (open - 100.0));
        ck_assert(rtomo_fbp_add_projection(plan, p, counts, RTOMO_DTYPE_U16,
                                           NAN, NAN, &err) == RTOMO_OK);
        ck_assert(rtomo_fbp_add_projection(ref, p, truth, RTOMO_DTYPE_F32,
                                           NAN, NAN, &err) == RTOMO_OK);
    }
    const int row = 2;
    size_t image = image_of(plan);
    float *a = malloc(sizeof(float) * image), *b = malloc(sizeof(float) * image);
    test_reconstruct(plan, &row, 1, a);
    test_reconstruct(ref, &row, 1, b);
    /* float normalisation against double: 1e-6 of the values. */
    check_close(a, b, image, 1e-5, "slice across a flat refresh");
    free(a);
    free(b);
    rtomo_fbp_destroy(plan);
    rtomo_fbp_destroy(ref);
}
END_TEST

/* ---------------------------------------------------------- windows ---- */

#define WIN 24
#define EVERY 3

/* The window's slices rebuilt from scratch in a plan of exactly WIN
 * slots, fed the projections [highest - WIN + 1, highest] with their
 * angles (index * step: the ring's slots hold other indices). */
static void fresh_window(int64_t highest, double step, const int *rows,
                         int n, float *out)
{
    rtomo_fbp_geometry g = small_geometry(WIN);
    rtomo_fbp *plan = test_create_cpu(&g, 2);
    for (int64_t i = highest - WIN + 1; i <= highest; i++)
        feed(plan, (int)(i % WIN), 6, i, (double)i * step);
    test_reconstruct(plan, rows, n, out);
    rtomo_fbp_destroy(plan);
}

/* A stream of projections in index order (a few pairs swapped), window
 * read every EVERY projections, compared at a few windows up to `last`.
 * Returns the error at the last window. */
static double run_windows(int resident, int refresh, long last)
{
    const double step = M_PI / WIN * 1.37;  /* angles that never repeat */
    rtomo_fbp_geometry g = small_geometry(rtomo_fbp_window_slots(WIN));
    g.window_proj = WIN;
    rtomo_fbp *plan = test_create_cpu(&g, 2);
    const int rows[] = {1, 2, 3};
    rtomo_error err, why;
    rtomo_fbp_window *w = rtomo_fbp_window_create(plan, rows,
                                                  resident ? 3 : 0, refresh,
                                                  &why, &err);
    ck_assert_msg(w != NULL, "window_create: %s", err.message);
    ck_assert_int_eq(rtomo_fbp_window_resident(w), resident);
    size_t image = image_of(plan);
    float *got = malloc(sizeof(float) * image * 3);
    float *ref = malloc(sizeof(float) * image * 3);
    double e = 0.0;
    int64_t total = WIN + (int64_t)last * EVERY;
    for (int64_t k = 0; k < total; k++) {
        /* Swap neighbours now and then: arrival out of order. */
        int64_t i = k % 10 == 4 ? k + 1 : k % 10 == 5 ? k - 1 : k;
        float frame[WIDTH * HEIGHT];
        random_frame(6, i, frame);
        ck_assert_msg(rtomo_fbp_window_add(w, i, frame, RTOMO_DTYPE_F32,
                                           (double)i * step, NAN,
                                           &err) == RTOMO_OK,
                      "window_add %lld: %s", (long long)i, err.message);
        long window = (long)((k - (WIN - 1)) / EVERY);
        if (k < WIN - 1 || (k - (WIN - 1)) % EVERY != 0)
            continue;
        ck_assert(rtomo_fbp_window_read(w, rows, 3, got, NULL, &err) ==
                  RTOMO_OK);
        /* (k % 10 == 4: projection k itself is still to come.) */
        if ((window == 0 || window == 138 || window == last) &&
            k % 10 != 4) {
            fresh_window(k, step, rows, 3, ref);
            e = test_rel_l2(got, ref, image * 3);
            ck_assert_msg(e <= WINDOW_BOUND, "window %ld (%s, refresh %d): "
                          "relative L2 %.3g", window,
                          resident ? "incremental" : "from scratch", refresh,
                          e);
        }
    }
    if (resident && refresh > 0)
        ck_assert_int_eq(rtomo_fbp_window_refreshes(w),
                         (last + 1) / refresh);
    /* An index that left the window already is refused. */
    float frame[WIDTH * HEIGHT] = {0};
    ck_assert(rtomo_fbp_window_add(w, total - WIN - 5, frame,
                                   RTOMO_DTYPE_F32, 0.0, NAN, &err) ==
              RTOMO_E_RANGE);
    free(got);
    free(ref);
    rtomo_fbp_window_destroy(w);
    rtomo_fbp_destroy(plan);
    return e;
}

START_TEST(window_10000_incremental)
{
    double e = run_windows(1, 50, 10000);
    printf("window 10000, incremental, refresh 50: relative L2 %.3g\n", e);
}
END_TEST

START_TEST(window_from_scratch)
{
    run_windows(0, 50, 300);
}
END_TEST

/* Without refreshes the drift is only bounded by the stream's length;
 * over 2000 windows it must still be well inside the bound. */
START_TEST(window_without_refresh)
{
    double e = run_windows(1, 0, 2000);
    printf("window 2000, incremental, never refreshed: relative L2 %.3g\n", e);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("fbp_stream");
    TCase *tc = tcase_create("stream");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, stream_linear);
    tcase_add_test(tc, stream_nearest_roi);
    tcase_add_test(tc, scan_end_keeps_the_last_chunk_whole);
    tcase_add_test(tc, sliding_window_chunks_stay_whole);
    tcase_add_test(tc, stream_queued_slot_overwritten);
    tcase_add_test(tc, clear_projection_zeroes_slot);
    tcase_add_test(tc, window_proj_sets_the_weight);
    tcase_add_test(tc, collect_and_reset);
    tcase_add_test(tc, stream_argument_checks);
    tcase_add_test(tc, flat_field_refreshed_mid_stream);
    tcase_add_test(tc, window_10000_incremental);
    tcase_add_test(tc, window_from_scratch);
    tcase_add_test(tc, window_without_refresh);
    suite_add_tcase(s, tc);
    return rtomo_check_run(s);
}
