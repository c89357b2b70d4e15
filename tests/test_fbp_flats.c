/*
 * test_fbp_flats.c — flats before and after the projections, interpolated
 * by projection index (rtomo_fbp_interpolate_flats), in the CPU backend.
 *
 * A phantom's projections are exposed with a flat field that drifts from
 * `before` to `after` (each pixel by its own amount, up to 3%) linearly
 * over the scan: raw_p = dark + (flat_p - dark) exp(-L) with flat_p =
 * (1 - t_p) before + t_p after, t_p = p / (n_proj - 1).
 *  1. Against the truth: the slices after interpolation equal those of the
 *     exact line integrals L within 1e-3 relative L2 (the method is first
 *     order in the drift: its error is (t(1-t)/2) ln(after/before)^2, 1e-4
 *     of a line integral here), and at least 20 times closer than without
 *     interpolation (the flats before alone).
 *  2. The formula, written here without the engine: frames normalised by
 *     the flat before, plus t_p (ln(after - dark) - ln(before - dark)),
 *     fed as line integrals to a plain plan: 1e-5 relative L2.
 *  3. The state rules: no flats after, a second call, resident slices, a
 *     field refreshed between projections, phase retrieval.
 */
#include "config.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rtomo_engine.h"
#include "rtomo_sim.h"
#include "check_run.h"
#include "test_util.h"

#define W 96
#define H 6
#define N_PROJ 120
#define DARK 100.0
#define OPEN 2e4

typedef struct drift_scan {
    float *lines[N_PROJ];       /* the phantom's line integrals */
    float before[W * H], after[W * H], dark[W * H];
    float *raw[N_PROJ];         /* exposed with the drifting flat */
} drift_scan;

static double t_of(int p) { return (double)p / (N_PROJ - 1); }

static void make_scan(drift_scan *s, uint64_t seed)
{
    rtomo_phantom ph;
    rtomo_phantom_init(&ph, W, H);
    for (int i = 0; i < W * H; i++) {
        s->dark[i] = (float)DARK;
        s->before[i] = (float)(DARK + OPEN * (1.0 + 0.1 * sin(0.3 * i)));
        s->after[i] = (float)(DARK + (s->before[i] - DARK) *
                                         (1.0 + test_rand_real(&seed, -0.03, 0.03)));
    }
    for (int p = 0; p < N_PROJ; p++) {
        s->lines[p] = malloc(sizeof(float) * W * H);
        s->raw[p] = malloc(sizeof(float) * W * H);
        ck_assert(s->lines[p] && s->raw[p]);
        rtomo_phantom_project(&ph, M_PI * p / N_PROJ, s->lines[p]);
        const double t = t_of(p);
        for (int i = 0; i < W * H; i++) {
            const double flat = (1 - t) * s->before[i] + t * s->after[i];
            s->raw[p][i] = (float)(DARK + (flat - DARK) * exp(-s->lines[p][i]));
        }
    }
}

static void free_scan(drift_scan *s)
{
    for (int p = 0; p < N_PROJ; p++) {
        free(s->lines[p]);
        free(s->raw[p]);
    }
}

static rtomo_fbp *plan_of(int threads)
{
    rtomo_fbp_geometry g = test_fbp_geometry(W, H, N_PROJ);
    return test_create_cpu(&g, threads);
}

static void ok(rtomo_status st, const rtomo_error *err)
{
    ck_assert_msg(st == RTOMO_OK, "%s", err->message);
}

/* Dark and flat before, the raw projections, the flat after. */
static void feed_raw(rtomo_fbp *plan, const drift_scan *s, int with_after)
{
    rtomo_error err;
    ok(rtomo_fbp_add_dark(plan, s->dark, RTOMO_DTYPE_F32, &err), &err);
    ok(rtomo_fbp_add_flat(plan, s->before, RTOMO_DTYPE_F32, &err), &err);
    for (int p = 0; p < N_PROJ; p++)
        ok(rtomo_fbp_add_projection(plan, p, s->raw[p], RTOMO_DTYPE_F32, NAN,
                                    NAN, &err), &err);
    if (with_after)
        ok(rtomo_fbp_add_flat_after(plan, s->after, RTOMO_DTYPE_F32, &err), &err);
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

/* Slices of line-integral frames made by `make(p, out)`. */
static float *slices_of_lines(const drift_scan *s,
                              void (*make)(const drift_scan *, int, float *))
{
    rtomo_fbp *plan = plan_of(0);
    float *frame = malloc(sizeof(float) * W * H);
    ck_assert_ptr_nonnull(frame);
    rtomo_error err;
    for (int p = 0; p < N_PROJ; p++) {
        make(s, p, frame);
        ok(rtomo_fbp_add_projection(plan, p, frame, RTOMO_DTYPE_F32, NAN, NAN,
                                    &err), &err);
    }
    float *out = slices(plan);
    rtomo_fbp_destroy(plan);
    free(frame);
    return out;
}

static void exact_lines(const drift_scan *s, int p, float *out)
{
    memcpy(out, s->lines[p], sizeof(float) * W * H);
}

/* The method as rtomo_engine.h states it, from the raw frames. */
static void corrected_lines(const drift_scan *s, int p, float *out)
{
    for (int i = 0; i < W * H; i++) {
        const double d = s->dark[i];
        const double line = -log((s->raw[p][i] - d) / (s->before[i] - d));
        out[i] = (float)(line + t_of(p) * (log(s->after[i] - d) -
                                           log(s->before[i] - d)));
    }
}

START_TEST(interpolation_against_truth_and_formula)
{
    drift_scan s;
    make_scan(&s, test_seed(0xf1a7, 0));
    rtomo_error err;
    rtomo_fbp *plan = plan_of(0);
    feed_raw(plan, &s, 1);
    ok(rtomo_fbp_interpolate_flats(plan, &err), &err);
    float *got = slices(plan);
    rtomo_fbp *plain = plan_of(0);
    feed_raw(plain, &s, 0);
    float *before_only = slices(plain);
    float *truth = slices_of_lines(&s, exact_lines);
    float *formula = slices_of_lines(&s, corrected_lines);
    const size_t n = (size_t)W * W * H;
    const double e_truth = test_rel_l2(got, truth, n);
    const double e_plain = test_rel_l2(before_only, truth, n);
    const double e_formula = test_rel_l2(got, formula, n);
    printf("flats interpolated: %.3g from the exact line integrals (flats "
           "before alone: %.3g, %.0fx); %.3g from the formula\n", e_truth,
           e_plain, e_plain / e_truth, e_formula);
    ck_assert_msg(e_truth <= 1e-3, "%.3g from the truth", e_truth);
    ck_assert_msg(e_plain >= 20 * e_truth, "only %.1fx better than the "
                  "flats before alone", e_plain / e_truth);
    ck_assert_msg(e_formula <= 1e-5, "%.3g from the formula", e_formula);
    free(got);
    free(before_only);
    free(truth);
    free(formula);
    rtomo_fbp_destroy(plan);
    rtomo_fbp_destroy(plain);
    free_scan(&s);
}
END_TEST

START_TEST(refused_when_it_cannot_work)
{
    drift_scan s;
    make_scan(&s, test_seed(0xf1a8, 0));
    rtomo_error err;
    /* No flats after the projections. */
    rtomo_fbp *plan = plan_of(1);
    feed_raw(plan, &s, 0);
    ck_assert_int_eq(rtomo_fbp_interpolate_flats(plan, &err), RTOMO_E_STATE);
    ck_assert_ptr_nonnull(strstr(err.message, "after the last one"));
    /* Twice. */
    ok(rtomo_fbp_add_flat_after(plan, s.after, RTOMO_DTYPE_F32, &err), &err);
    ok(rtomo_fbp_interpolate_flats(plan, &err), &err);
    ck_assert_int_eq(rtomo_fbp_interpolate_flats(plan, &err), RTOMO_E_STATE);
    rtomo_fbp_destroy(plan);
    /* A field refreshed between projections. */
    plan = plan_of(1);
    ok(rtomo_fbp_add_flat(plan, s.before, RTOMO_DTYPE_F32, &err), &err);
    ok(rtomo_fbp_add_projection(plan, 0, s.raw[0], RTOMO_DTYPE_F32, NAN, NAN,
                                &err), &err);
    ok(rtomo_fbp_add_flat(plan, s.after, RTOMO_DTYPE_F32, &err), &err);
    ok(rtomo_fbp_add_projection(plan, 1, s.raw[1], RTOMO_DTYPE_F32, NAN, NAN,
                                &err), &err);
    ok(rtomo_fbp_add_flat_after(plan, s.after, RTOMO_DTYPE_F32, &err), &err);
    ck_assert_int_eq(rtomo_fbp_interpolate_flats(plan, &err), RTOMO_E_STATE);
    ck_assert_ptr_nonnull(strstr(err.message, "changed between projections"));
    rtomo_fbp_destroy(plan);
    /* Resident slices. */
    plan = plan_of(1);
    feed_raw(plan, &s, 1);
    const int row = 2;
    ok(rtomo_fbp_stream_open(plan, &row, 1, &err), &err);
    ck_assert_int_eq(rtomo_fbp_interpolate_flats(plan, &err), RTOMO_E_STATE);
    rtomo_fbp_destroy(plan);
    /* Phase retrieval. */
    rtomo_fbp_geometry g = test_fbp_geometry(W, H, N_PROJ);
    g.phase = (rtomo_fbp_phase){100, 20, 0.1, 1e-6};
    plan = test_create_cpu(&g, 1);
    feed_raw(plan, &s, 1);
    ck_assert_int_eq(rtomo_fbp_interpolate_flats(plan, &err), RTOMO_E_INVALID);
    rtomo_fbp_destroy(plan);
    free_scan(&s);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("fbp_flats");
    TCase *tc = tcase_create("flats");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, interpolation_against_truth_and_formula);
    tcase_add_test(tc, refused_when_it_cannot_work);
    suite_add_tcase(s, tc);
    return rtomo_check_run(s);
}
