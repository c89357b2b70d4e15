/*
 * test_fbp_phase.c — single-distance phase retrieval on the CPU backend.
 *
 * The reference is not the engine's formula but the model it inverts: the
 * transport-of-intensity equation for a homogeneous object of projected
 * attenuation g = mu T at propagation distance z,
 *     I_z = (1 - (z delta / mu) Laplacian) exp(-g),   mu = 4 pi beta / lambda,
 * so z delta / mu = lambda z (delta/beta) / (4 pi) = a.  g is a sum of
 * Gaussian blobs whose Laplacian of exp(-g) is written out here in closed
 * form (exp(-g) (|grad g|^2 - Laplacian g)).  Frames dark + (flat - dark)
 * I_z through the engine with phase retrieval must give the filtered
 * sinograms that g itself gives without it (fed as line integrals, no flat
 * field): the exact answer.  Without phase retrieval the same frames are
 * far from it (the phase term matters at these parameters).
 *
 * Tolerances (relative L2 of filtered sinograms; measured values, gcc 12
 * x86-64, in brackets):
 *   TIE model                 1e-4   [7e-6]: the blobs are smooth (sigma
 *       >= 4 px, so the spectral Laplacian equals the analytic one to
 *       exp(-pi^2 sigma^2 / 2)) and lie > 5 sigma inside the frame, where
 *       the edge replication continues a flat background; what is left is
 *       float rounding through -log and the ramp filter.
 *   kept rows vs full detector: TIE frames 1e-4 [4e-6, 9e-7], random
 *       frames 5e-4 [5e-5 .. 1e-4]: a kept row sees its neighbours within
 *       the margin (8 decay lengths, where the 1-D kernel's tail holds
 *       exp(-8)/2 = 2e-4 of its weight); the rows beyond are replaced by
 *       repeated edge rows, which on random frames differ by tens of
 *       percent.  With a margin of 2 decay lengths instead, the random
 *       frames miss by about 1e-2.
 *   weak phase vs off         5e-5   [5e-6]: a vanishing delta/beta still
 *       pads, transforms and crops: only rounding (two 2-D float
 *       transforms, then the ramp filter's amplification) may differ.
 * Bit-identical: phase off with the other parameters set; a refreshed flat
 * field against the same field from the start.
 */
#include "config.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rtomo_engine.h"
#include "check_run.h"
#include "test_util.h"

#define HEIGHT 96
#define WIDTH 128
#define N_PROJ 8
#define N_BLOBS 3

#define TOL_TIE 1e-4
#define TOL_ROWS_TIE 1e-4
#define TOL_ROWS_RANDOM 5e-4
#define TOL_WEAK 5e-5

/* 20 keV, 0.2 m, 3 um pixels, delta/beta 100: a = 11 px^2 (decay length
 * 3.3 px, margin 28 px), against blobs of sigma 4-6 px: the Laplacian
 * term changes the intensity by tens of percent. */
static rtomo_fbp_phase test_phase(void)
{
    rtomo_fbp_phase p = {.delta_beta = 100.0, .energy_kev = 20.0,
                         .distance_m = 0.2, .pixel_m = 3e-6};
    return p;
}

/* a in pixels^2, computed from the physics (not the engine's code). */
static double phase_a_px(const rtomo_fbp_phase *p)
{
    const double lambda = 6.62607015e-34 * 299792458.0 /
                          (p->energy_kev * 1e3 * 1.602176634e-19);
    return lambda * p->distance_m * p->delta_beta / (4.0 * M_PI) /
           (p->pixel_m * p->pixel_m);
}

/* ------------------------------------------------------------ model ---- */

typedef struct blob {
    double b, x, y, sigma;      /* peak attenuation, centre, width (px) */
} blob;

/* Blobs of projection p: they circle the axis as the object turns. */
static void blobs_of(int p, blob out[N_BLOBS])
{
    static const blob base[N_BLOBS] = {
        {0.6, 24.0, 40.0, 5.0}, {0.4, 16.0, 52.0, 6.0}, {0.5, 8.0, 46.0, 4.0}};
    const double angle = M_PI * p / N_PROJ;
    for (int j = 0; j < N_BLOBS; j++) {
        out[j] = base[j];
        const double phi = 2.1 * j;
        out[j].x = 0.5 * (WIDTH - 1) + base[j].x * cos(angle + phi);
    }
}

/* g = sum b G at (x, y), and exp(-g) (|grad g|^2 - Laplacian g), the
 * Laplacian of exp(-g), with G = exp(-r^2 / (2 sigma^2)):
 * grad G = -(r / sigma^2) G, Laplacian G = (r^2/sigma^4 - 2/sigma^2) G. */
static void model_at(const blob *bl, double x, double y, double *g,
                     double *lap_u)
{
    double sum = 0, gx = 0, gy = 0, lap = 0;
    for (int j = 0; j < N_BLOBS; j++) {
        const double dx = x - bl[j].x, dy = y - bl[j].y;
        const double s2 = bl[j].sigma * bl[j].sigma;
        const double r2 = dx * dx + dy * dy;
        const double G = bl[j].b * exp(-r2 / (2 * s2));
        sum += G;
        gx += -dx / s2 * G;
        gy += -dy / s2 * G;
        lap += (r2 / (s2 * s2) - 2 / s2) * G;
    }
    *g = sum;
    *lap_u = exp(-sum) * (gx * gx + gy * gy - lap);
}

static double flat_at(int y, int x) { return 1000.0 * (1 + 0.2 * sin(0.11 * x + 0.07 * y)); }
static double dark_at(int y, int x) { return 20.0 + 5.0 * cos(0.05 * x - 0.13 * y); }

/* Projection p: the raw TIE frame (with dark and flat) and the exact line
 * integrals g.  Returns the smallest I_z, which must stay positive. */
static double make_tie_frame(int p, double a_px, float *raw, float *exact)
{
    blob bl[N_BLOBS];
    blobs_of(p, bl);
    double least = INFINITY;
    for (int y = 0; y < HEIGHT; y++)
        for (int x = 0; x < WIDTH; x++) {
            double g, lap_u;
            model_at(bl, x, y, &g, &lap_u);
            const double iz = exp(-g) - a_px * lap_u;
            least = fmin(least, iz);
            const double d = dark_at(y, x), f = flat_at(y, x);
            raw[y * WIDTH + x] = (float)(d + (f - d) * iz);
            exact[y * WIDTH + x] = (float)g;
        }
    return least;
}

static void make_field(float *dark, float *flat, double scale)
{
    for (int y = 0; y < HEIGHT; y++)
        for (int x = 0; x < WIDTH; x++) {
            dark[y * WIDTH + x] = (float)dark_at(y, x);
            flat[y * WIDTH + x] = (float)(scale * flat_at(y, x));
        }
}

/* ----------------------------------------------------------- engine ---- */

static rtomo_fbp_geometry geometry(int row_first, int row_count,
                                   const rtomo_fbp_phase *phase)
{
    rtomo_fbp_geometry g = test_fbp_geometry(WIDTH, HEIGHT, N_PROJ);
    g.row_first = row_first;
    g.row_count = row_count;
    if (phase)
        g.phase = *phase;
    return g;
}

static void add_field(rtomo_fbp *plan, const float *dark, const float *flat)
{
    rtomo_error err;
    ck_assert_msg(rtomo_fbp_add_dark(plan, dark, RTOMO_DTYPE_F32, &err) == RTOMO_OK,
                  "%s", err.message);
    ck_assert_msg(rtomo_fbp_add_flat(plan, flat, RTOMO_DTYPE_F32, &err) == RTOMO_OK,
                  "%s", err.message);
}

static void feed(rtomo_fbp *plan, int p, const void *frame, rtomo_dtype dtype)
{
    rtomo_error err;
    ck_assert_msg(rtomo_fbp_add_projection(plan, p, frame, dtype, NAN, NAN,
                                           &err) == RTOMO_OK,
                  "%s", err.message);
}

/* The filtered sinograms of detector rows [first, first + count) of a
 * plan: count x N_PROJ x WIDTH (malloc'd). */
static float *filtered(rtomo_fbp *plan, int first, int count)
{
    rtomo_error err;
    ck_assert_int_eq(rtomo_fbp_sync(plan, &err), RTOMO_OK);
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

/* Every frame of a scan (N_PROJ x HEIGHT x WIDTH floats). */
typedef struct scan {
    float *raw, *exact, *dark, *flat;
} scan;

static scan tie_scan(double a_px)
{
    const size_t frame = (size_t)HEIGHT * WIDTH;
    scan s = {malloc(sizeof(float) * frame * N_PROJ),
              malloc(sizeof(float) * frame * N_PROJ),
              malloc(sizeof(float) * frame), malloc(sizeof(float) * frame)};
    ck_assert(s.raw && s.exact && s.dark && s.flat);
    make_field(s.dark, s.flat, 1.0);
    for (int p = 0; p < N_PROJ; p++) {
        const double least = make_tie_frame(p, a_px, s.raw + p * frame,
                                            s.exact + p * frame);
        ck_assert_msg(least > 0.05, "the TIE intensity reaches %g", least);
    }
    return s;
}

static void scan_free(scan *s)
{
    free(s->raw);
    free(s->exact);
    free(s->dark);
    free(s->flat);
}

/* Rows [first, first+count) of a plan fed the scan's raw frames with its
 * flat field (phase retrieval as given). */
static float *run_raw(const scan *s, int first, int count,
                      const rtomo_fbp_phase *phase)
{
    rtomo_fbp_geometry g = geometry(first, count, phase);
    rtomo_fbp *plan = test_create_cpu(&g, 0);
    add_field(plan, s->dark, s->flat);
    for (int p = 0; p < N_PROJ; p++)
        feed(plan, p, s->raw + (size_t)p * HEIGHT * WIDTH, RTOMO_DTYPE_F32);
    float *out = filtered(plan, first, count);
    rtomo_fbp_destroy(plan);
    return out;
}

/* The exact answer: g as line integrals, no flat field, no phase. */
static float *run_exact(const scan *s, int first, int count)
{
    rtomo_fbp_geometry g = geometry(first, count, NULL);
    rtomo_fbp *plan = test_create_cpu(&g, 0);
    for (int p = 0; p < N_PROJ; p++)
        feed(plan, p, s->exact + (size_t)p * HEIGHT * WIDTH, RTOMO_DTYPE_F32);
    float *out = filtered(plan, first, count);
    rtomo_fbp_destroy(plan);
    return out;
}

/* ------------------------------------------------------------ tests ---- */

START_TEST(test_tie_model)
{
    const rtomo_fbp_phase phase = test_phase();
    scan s = tie_scan(phase_a_px(&phase));
    const size_t n = (size_t)HEIGHT * N_PROJ * WIDTH;
    float *exact = run_exact(&s, 0, HEIGHT);
    float *retrieved = run_raw(&s, 0, HEIGHT, &phase);
    float *plain = run_raw(&s, 0, HEIGHT, NULL);
    const double e = test_rel_l2(retrieved, exact, n);
    const double e_plain = test_rel_l2(plain, exact, n);
    printf("TIE model: phase retrieval %.3g, without %.3g (relative L2)\n", e,
           e_plain);
    ck_assert_msg(e < TOL_TIE, "phase retrieval misses the TIE model by %g", e);
    ck_assert_msg(e_plain > 0.1, "the phase term is too weak to test (%g)",
                  e_plain);
    free(exact);
    free(retrieved);
    free(plain);
    scan_free(&s);
}
END_TEST

/* Kept rows in the middle, at the top, at the bottom, a single row: the
 * same values as those rows of the full-detector plan.  (The TIE frames
 * use only subsets through the blobs: elsewhere the filtered rows are
 * rounding noise about zero, whose relative error means nothing.) */
static const int subsets[][2] = {{30, 20}, {0, 10}, {80, 16}, {47, 1}, {5, 86}};
static const int tie_subsets[][2] = {{30, 20}, {47, 1}, {5, 86}, {40, 30}};

START_TEST(test_kept_rows_tie)
{
    const rtomo_fbp_phase phase = test_phase();
    scan s = tie_scan(phase_a_px(&phase));
    float *full = run_raw(&s, 0, HEIGHT, &phase);
    const size_t per_row = (size_t)N_PROJ * WIDTH;
    for (size_t i = 0; i < sizeof tie_subsets / sizeof tie_subsets[0]; i++) {
        const int first = tie_subsets[i][0], count = tie_subsets[i][1];
        float *part = run_raw(&s, first, count, &phase);
        const double e = test_rel_l2(part, full + first * per_row,
                                     per_row * (size_t)count);
        printf("TIE rows [%d, %d): %.3g against the full detector\n", first,
               first + count, e);
        ck_assert_msg(e < TOL_ROWS_TIE, "rows [%d, %d) differ by %g", first,
                      first + count, e);
        free(part);
    }
    free(full);
    scan_free(&s);
}
END_TEST

/* Random uint16 frames and a random flat field: every row's neighbours
 * differ, so a missing margin would show. */
START_TEST(test_kept_rows_random)
{
    uint64_t seed = test_seed(0x9a6a, 0);
    const size_t frame = (size_t)HEIGHT * WIDTH;
    uint16_t *raw = malloc(sizeof(uint16_t) * frame * N_PROJ);
    float *dark = malloc(sizeof(float) * frame);
    float *flat = malloc(sizeof(float) * frame);
    ck_assert(raw && dark && flat);
    test_fill_uniform(&seed, dark, frame, 90.0, 110.0);
    test_fill_uniform(&seed, flat, frame, 3000.0, 4000.0);
    for (size_t i = 0; i < frame * N_PROJ; i++)
        raw[i] = (uint16_t)test_rand_int(&seed, 600, 3500);
    const rtomo_fbp_phase phase = test_phase();
    const size_t per_row = (size_t)N_PROJ * WIDTH;
    float *full = NULL;
    for (int i = -1; i < (int)(sizeof subsets / sizeof subsets[0]); i++) {
        const int first = i < 0 ? 0 : subsets[i][0];
        const int count = i < 0 ? HEIGHT : subsets[i][1];
        rtomo_fbp_geometry g = geometry(first, count, &phase);
        rtomo_fbp *plan = test_create_cpu(&g, 0);
        add_field(plan, dark, flat);
        for (int p = 0; p < N_PROJ; p++)
            feed(plan, p, raw + (size_t)p * frame, RTOMO_DTYPE_U16);
        float *out = filtered(plan, first, count);
        rtomo_fbp_destroy(plan);
        if (i < 0) {
            full = out;
            continue;
        }
        const double e = test_rel_l2(out, full + first * per_row,
                                     per_row * (size_t)count);
        printf("random rows [%d, %d): %.3g against the full detector\n",
               first, first + count, e);
        ck_assert_msg(e < TOL_ROWS_RANDOM, "rows [%d, %d) differ by %g",
                      first, first + count, e);
        free(out);
    }
    free(full);
    free(raw);
    free(dark);
    free(flat);
}
END_TEST

static int all_finite(const float *a, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(a[i]))
            return 0;
    return 1;
}

/* Dead pixels (flat <= dark), samples at or below the dark, absurdly
 * bright ones: with and without a flat field, every output is finite. */
START_TEST(test_bad_samples)
{
    const size_t frame = (size_t)HEIGHT * WIDTH;
    float *raw = malloc(sizeof(float) * frame);
    float *dark = malloc(sizeof(float) * frame);
    float *flat = malloc(sizeof(float) * frame);
    ck_assert(raw && dark && flat);
    make_field(dark, flat, 1.0);
    for (size_t i = 0; i < frame; i++)
        raw[i] = 0.5f * flat[i];
    for (size_t i = 0; i < frame; i += 7)
        flat[i] = dark[i];              /* dead */
    for (size_t i = 3; i < frame; i += 11)
        flat[i] = dark[i] - 5.0f;       /* worse than dead */
    for (size_t i = 1; i < frame; i += 13)
        raw[i] = 0.0f;                  /* below the dark */
    for (size_t i = 2; i < frame; i += 17)
        raw[i] = 3e38f;                 /* absurdly bright */
    for (size_t i = 5; i < frame; i += 19)
        raw[i] = -3e38f;
    rtomo_fbp_phase phase = test_phase();
    for (int with_flat = 0; with_flat < 2; with_flat++) {
        rtomo_fbp_geometry g = geometry(20, 40, &phase);
        rtomo_fbp *plan = test_create_cpu(&g, 0);
        if (with_flat)
            add_field(plan, dark, flat);
        for (int p = 0; p < N_PROJ; p++)
            feed(plan, p, raw, RTOMO_DTYPE_F32);
        float *out = filtered(plan, 20, 40);
        ck_assert_msg(all_finite(out, (size_t)40 * N_PROJ * WIDTH),
                      "non-finite output %s a flat field",
                      with_flat ? "with" : "without");
        free(out);
        rtomo_fbp_destroy(plan);
    }
    free(raw);
    free(dark);
    free(flat);
}
END_TEST

/* delta_beta 0 switches phase retrieval off whatever the other three
 * say: bit for bit the plain path. */
START_TEST(test_off_is_plain)
{
    const rtomo_fbp_phase phase = test_phase();
    scan s = tie_scan(phase_a_px(&phase));
    rtomo_fbp_phase off = phase;
    off.delta_beta = 0.0;
    float *plain = run_raw(&s, 10, 50, NULL);
    float *also = run_raw(&s, 10, 50, &off);
    ck_assert(memcmp(plain, also, sizeof(float) * 50 * N_PROJ * WIDTH) == 0);
    free(plain);
    free(also);
    scan_free(&s);
}
END_TEST

/* A vanishing delta/beta pads, transforms and crops but changes nothing:
 * the scaling (1/(ny nx)) and the crop's place are right. */
START_TEST(test_weak_phase_is_off)
{
    const rtomo_fbp_phase phase = test_phase();
    scan s = tie_scan(phase_a_px(&phase));
    rtomo_fbp_phase weak = phase;
    weak.delta_beta = 1e-9;
    float *plain = run_raw(&s, 10, 50, NULL);
    float *filtered_weak = run_raw(&s, 10, 50, &weak);
    const double e = test_rel_l2(filtered_weak, plain, (size_t)50 * N_PROJ * WIDTH);
    printf("vanishing delta/beta: %.3g from no phase retrieval\n", e);
    ck_assert_msg(e < TOL_WEAK, "a vanishing phase filter changes by %g", e);
    free(plain);
    free(filtered_weak);
    scan_free(&s);
}
END_TEST

/* Darks and flats added after the first projection become the flat
 * field of the phase rows too: projections fed after them equal, bit for
 * bit, those of a plan that had that field from the start. */
START_TEST(test_refreshed_flat)
{
    const rtomo_fbp_phase phase = test_phase();
    scan s = tie_scan(phase_a_px(&phase));
    const size_t frame = (size_t)HEIGHT * WIDTH;
    float *old_dark = malloc(sizeof(float) * frame);
    float *old_flat = malloc(sizeof(float) * frame);
    ck_assert(old_dark && old_flat);
    make_field(old_dark, old_flat, 0.6);
    const int first = 40, count = 12;
    rtomo_fbp_geometry g = geometry(first, count, &phase);
    rtomo_fbp *refreshed = test_create_cpu(&g, 0);
    rtomo_fbp *fresh = test_create_cpu(&g, 0);
    add_field(refreshed, old_dark, old_flat);
    feed(refreshed, 0, s.raw, RTOMO_DTYPE_F32);
    add_field(refreshed, s.dark, s.flat);
    add_field(fresh, s.dark, s.flat);
    for (int p = 1; p < N_PROJ; p++) {
        feed(refreshed, p, s.raw + p * frame, RTOMO_DTYPE_F32);
        feed(fresh, p, s.raw + p * frame, RTOMO_DTYPE_F32);
    }
    float *a = filtered(refreshed, first, count);
    float *b = filtered(fresh, first, count);
    for (int r = 0; r < count; r++)
        ck_assert(memcmp(a + ((size_t)r * N_PROJ + 1) * WIDTH,
                         b + ((size_t)r * N_PROJ + 1) * WIDTH,
                         sizeof(float) * (N_PROJ - 1) * WIDTH) == 0);
    rtomo_fbp_destroy(refreshed);
    rtomo_fbp_destroy(fresh);
    free(a);
    free(b);
    free(old_dark);
    free(old_flat);
    scan_free(&s);
}
END_TEST

/* Invalid parameters are refused at creation. */
START_TEST(test_invalid)
{
    rtomo_fbp_phase bad = test_phase();
    bad.energy_kev = 0.0;
    rtomo_fbp_geometry g = geometry(0, 0, &bad);
    rtomo_error err;
    rtomo_engine_options opt = test_cpu_options(1);
    ck_assert_ptr_null(rtomo_fbp_create(&g, &opt, &err));
    ck_assert_int_eq(err.code, RTOMO_E_INVALID);
    bad = test_phase();
    bad.pixel_m = NAN;
    g = geometry(0, 0, &bad);
    ck_assert_ptr_null(rtomo_fbp_create(&g, &opt, &err));
    ck_assert_int_eq(err.code, RTOMO_E_INVALID);
}
END_TEST

static Suite *phase_suite(void)
{
    Suite *s = suite_create("fbp_phase");
    TCase *tc = tcase_create("phase");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_tie_model);
    tcase_add_test(tc, test_kept_rows_tie);
    tcase_add_test(tc, test_kept_rows_random);
    tcase_add_test(tc, test_bad_samples);
    tcase_add_test(tc, test_off_is_plain);
    tcase_add_test(tc, test_weak_phase_is_off);
    tcase_add_test(tc, test_refreshed_flat);
    tcase_add_test(tc, test_invalid);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    /* Measured errors must reach the log even from a failing test. */
    setvbuf(stdout, NULL, _IOLBF, 0);
    return rtomo_check_run(phase_suite());
}
