/*
 * test_daemon_iterative.c — reconstruction.method "sirt" and "cgls"
 * through the real rtomod (CPU backend, loopback), on sparse-angle scans
 * of the phantom with camera noise:
 *   - the FBP slices come first (method "fbp", iteration 0, not final),
 *     then the iterates every publish_every iterations, then the final
 *     one; each final slice equals the engine's own solve (FBP start, the
 *     line integrals as the FBP plan normalises them) and is nearer the
 *     phantom than FBP;
 *   - missing projections are left out of the solve, a tolerance stops
 *     it early, CGLS's residuals fall; telemetry and status say how it
 *     goes;
 *   - an abort stops the iterations at once, and the daemon goes on;
 *   - a scan that asks for an iterative method with a setting that
 *     excludes it is refused naming the conflict; the daemon's default
 *     method gives way to FBP there and says so.
 * The engine's tests (test_iter_*) check the projector pair and solvers;
 * this one checks the wiring.
 */
#include "config.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "daemon_harness.h"
#include "rtomo_sim.h"

#define WIDTH 64
#define HEIGHT 8
#define N_PROJ 16               /* sparse: a 64-bin row wants ~100 */

static const int ROWS[2] = {3, 4};

/* CGLS's tolerance: midway between its residuals at iterations 4 (0.0267)
 * and 5 (0.0199), so that the CPU and the GPU stop at the same one. */
#define TOLERANCE 0.023

/*
 * Built twice (tests/daemon.am): as test_daemon_iterative, the daemon on
 * the CPU backend; with ITER_ON_GPU as test_cuda_daemon_iterative, the
 * daemon on the CUDA backend (exit 77 without a GPU), against the same
 * CPU engine.  There the FBP back-projector is the ALU kernel: the
 * texture unit's 8-bit interpolation weights put the autotuned kernels'
 * FBP of these 16-projection, 64-bin scans 1.3e-3 from the CPU's (a first
 * device run), and the solve starts from it; the ALU kernel interpolates
 * in float, and the pair differs from the CPU's by 4e-7 per application
 * (test_cuda_iter).
 */
#ifdef ITER_ON_GPU
#define BACKEND_ARGS "--backend", "cuda", "--set", "engine.bp_kernel=alu",
#define ENGINE_TOL 1e-4
#else
#define BACKEND_ARGS
#define ENGINE_TOL 1e-5
#endif
static const char *const backend_args[] = {BACKEND_ARGS NULL};

static double seconds_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* ------------------------------------------------------- the engine ---- */

/* The scan's line integrals of `rows` as the daemon keeps them: an FBP
 * plan's normalisation of every received projection, in arrival order
 * (p ascending), with their angles; returns the number of projections. */
static int line_integrals(const daemon_scan *s, const int *rows, int n_rows,
                          const unsigned char *received, float *sino,
                          double *angles)
{
    const rtomo_fbp_geometry *g = &s->spec.geometry;
    rtomo_fbp_geometry fg = *g;
    rtomo_fbp *plan = test_create_cpu(&fg, 1);
    rtomo_error err;
    const size_t n = s->frame_samples, w = (size_t)g->det_width;
    for (int i = 0; i < s->spec.n_darks; i++)
        ck_assert(rtomo_fbp_add_dark(plan, s->darks + n * (size_t)i,
                                     RTOMO_DTYPE_U16, &err) == RTOMO_OK);
    for (int i = 0; i < s->spec.n_flats; i++)
        ck_assert(rtomo_fbp_add_flat(plan, s->flats + n * (size_t)i,
                                     RTOMO_DTYPE_U16, &err) == RTOMO_OK);
    float *frame = malloc(sizeof(float) * w * (size_t)n_rows);
    int k = 0;
    for (int p = 0; p < g->n_proj; p++) {
        if (received && !received[p])
            continue;
        const uint16_t *raw = s->projections + n * (size_t)p;
        ck_assert(rtomo_fbp_add_projection(plan, p, raw, RTOMO_DTYPE_U16,
                                           NAN, NAN, &err) == RTOMO_OK);
        ck_assert_msg(rtomo_fbp_line_integrals(plan, raw, RTOMO_DTYPE_U16,
                                               rows, n_rows, frame, &err) ==
                      RTOMO_OK, "%s", err.message);
        angles[k] = g->angle_start + p * g->angle_step;
        for (int r = 0; r < n_rows; r++)
            memcpy(sino + ((size_t)r * (size_t)g->n_proj + (size_t)k) * w,
                   frame + (size_t)r * w, w * sizeof(float));
        k++;
    }
    free(frame);
    rtomo_fbp_destroy(plan);
    return k;
}

/* The engine's solve of the scan's rows from their FBP slices (from zero
 * when cold), as rtomod is to run it (n_rows images, malloc'd). */
static float *engine_solve_from(const daemon_scan *s, const int *rows,
                                int n_rows, const unsigned char *received,
                                const rtomo_iter_options *o,
                                rtomo_iter_result *res, int cold)
{
    const rtomo_fbp_geometry *g = &s->spec.geometry;
    const size_t w = (size_t)g->det_width, plane = w * w;
    float *sino = malloc(sizeof(float) * (size_t)n_rows * (size_t)g->n_proj * w);
    double *angles = malloc(sizeof(double) * (size_t)g->n_proj);
    int k = line_integrals(s, rows, n_rows, received, sino, angles);
    /* Compact: row r's k arrivals one row after the other. */
    for (int r = 1; r < n_rows; r++)
        memmove(sino + (size_t)r * (size_t)k * w,
                sino + (size_t)r * (size_t)g->n_proj * w,
                sizeof(float) * (size_t)k * w);
    rtomo_fbp_geometry ig;
    rtomo_fbp_geometry_init(&ig);
    ig.det_width = g->det_width;
    ig.det_height = g->det_height;
    ig.n_proj = k;
    ig.angles = angles;
    ig.row_count = n_rows;
    rtomo_engine_options opt = test_cpu_options(1);
    rtomo_error err;
    rtomo_iter *it = rtomo_iter_create(&ig, &opt, &err);
    ck_assert_msg(it, "%s", err.message);
    /* The start on the whole grid, whatever ROI the scan publishes. */
    daemon_scan whole = *s;
    whole.spec.geometry.roi_x = whole.spec.geometry.roi_y = 0;
    whole.spec.geometry.roi_width = whole.spec.geometry.roi_height = 0;
    float *x = daemon_reference_slices(&whole, rows, n_rows, received, NULL);
    ck_assert(x && plane > 0);
    ck_assert_msg(rtomo_iter_solve(it, sino, n_rows, x, !cold, o, res,
                                   &err) == RTOMO_OK, "%s", err.message);
    rtomo_iter_destroy(it);
    free(sino);
    free(angles);
    return x;
}

static float *engine_solve(const daemon_scan *s, const int *rows, int n_rows,
                           const unsigned char *received,
                           const rtomo_iter_options *o, rtomo_iter_result *res)
{
    return engine_solve_from(s, rows, n_rows, received, o, res, 0);
}

/* The relative L2 of `image` to the phantom's slice of `row` (what the
 * scan saw, in attenuation per pixel) inside the skull, 2 pixels from
 * its edges: a pixel grid of 64 cannot hold the skull's sharp rims,
 * whose error every method shares and which would hide the difference. */
static double brain_error(const float *image, int row)
{
    rtomo_phantom ph;
    rtomo_phantom_init(&ph, WIDTH, HEIGHT);
    float *t = malloc(sizeof(float) * WIDTH * WIDTH);
    unsigned char *mask = malloc(WIDTH * WIDTH);
    rtomo_phantom_slice(&ph, row, WIDTH, t);
    rtomo_phantom_region_mask(&ph, row, WIDTH, RTOMO_PHANTOM_BRAIN, 2.0, mask);
    double e = rtomo_masked_relative_error(image, t, mask, WIDTH * WIDTH);
    free(mask);
    free(t);
    return e;
}

/* ------------------------------------------------------ the inbox ---- */

/* The slice of `row` of scan `id` at iteration k (method given), or NULL. */
static const daemon_image *iterate(const daemon_inbox *in, const char *id,
                                   int row, int k)
{
    for (int i = 0; i < in->n_images; i++) {
        const daemon_image *im = &in->images[i];
        if (strcmp(im->h.topic, RTOMO_TOPIC_SLICE) == 0 &&
            strcmp(im->h.scan, id) == 0 && im->h.slice == row &&
            im->h.iteration == k)
            return im;
    }
    return NULL;
}

static const daemon_image *final_of(const daemon_inbox *in, const char *id,
                                    int row)
{
    for (int i = 0; i < in->n_images; i++) {
        const daemon_image *im = &in->images[i];
        if (strcmp(im->h.scan, id) == 0 && im->h.slice == row &&
            im->h.final)
            return im;
    }
    return NULL;
}

static void set_method(daemon_scan *s, rtomo_method m, int iterations,
                       int every)
{
    s->spec.method.method = m;
    s->spec.method.iterations = iterations;
    s->spec.method.publish_every = every;
    s->spec.given |= RTOMO_SPEC_HAS_METHOD | RTOMO_SPEC_HAS_ITERATIONS |
                     RTOMO_SPEC_HAS_PUBLISH_EVERY;
}

/* ----------------------------------------------------------- tests ---- */

/* SIRT, 30 iterations published every 10: FBP first, then 10, 20 and the
 * final 30; the final slices are the engine's and beat FBP. */
START_TEST(sirt_after_fbp)
{
    daemon_session t;
    daemon_session_open(&t, backend_args, 1);
    daemon_scan s;
    daemon_scan_make(&s, "sirt", WIDTH, HEIGHT, N_PROJ, 1, 2, 0x5127);
    daemon_scan_select_rows(&s, ROWS, 2);
    set_method(&s, RTOMO_METHOD_SIRT, 30, 10);
    daemon_send_begin(t.c, &s);
    const rtomo_event *ev = daemon_wait_event(&t.in, "scan_started", NULL,
                                              "sirt", 0);
    printf("scan_started: %s\n", ev->message);
    ck_assert_msg(strstr(ev->message, "method: sirt after fbp, 30 "
                         "iterations from the fbp slices, published "
                         "progressively"), "%s", ev->message);
    daemon_send_fields(t.c, &s);
    for (int p = 0; p < N_PROJ; p++)
        daemon_send_projection(t.c, &s, p);
    daemon_send_end(t.c, &s);
    daemon_wait_event(&t.in, "scan_complete", NULL, "sirt", 0);
    ck_assert_int_eq(daemon_count_images(&t.in, RTOMO_TOPIC_SLICE, "sirt"),
                     2 * 4);

    /* Order and headers: both FBP slices before any iterate. */
    int seen_iterate = 0;
    for (int i = 0; i < t.in.n_images; i++) {
        const rtomo_image_header *h = &t.in.images[i].h;
        if (strcmp(h->scan, "sirt") != 0)
            continue;
        if (h->iteration == 0) {
            ck_assert_msg(!seen_iterate, "an FBP slice after an iterate");
            ck_assert_str_eq(h->method, "fbp");
            ck_assert(!h->final && isnan(h->residual));
        } else {
            seen_iterate = 1;
            ck_assert_str_eq(h->method, "sirt");
            ck_assert(h->iteration % 10 == 0 && h->iteration <= 30);
            ck_assert_int_eq(h->final, h->iteration == 30);
            ck_assert(h->residual > 0 && h->residual < 1);
        }
        ck_assert_int_eq(h->count, 2);
        ck_assert_int_eq(h->slice, ROWS[h->index]);
    }

    rtomo_iter_options o;
    rtomo_iter_options_init(&o);
    o.iterations = 30;
    rtomo_iter_result res;
    float *ref = engine_solve(&s, ROWS, 2, NULL, &o, &res);
    float *fbp = daemon_reference_slices(&s, ROWS, 2, NULL, NULL);
    const size_t plane = WIDTH * WIDTH;
    for (int r = 0; r < 2; r++) {
        const daemon_image *fin = final_of(&t.in, "sirt", ROWS[r]);
        ck_assert_ptr_nonnull(fin);
        double e_ref = test_rel_l2(fin->data, ref + plane * r, plane);
        double e_fbp = brain_error(fbp + plane * r, ROWS[r]);
        double e_it = brain_error(fin->data, ROWS[r]);
        printf("row %d: final to the engine %.2e; to the phantom's brain: "
               "FBP %.4f, SIRT %.4f (residual %.4f, engine %.4f)\n", ROWS[r], e_ref,
               e_fbp, e_it, fin->h.residual, res.residual);
        ck_assert_msg(e_ref <= ENGINE_TOL, "row %d: final slice %.3g from "
                      "the engine's solve", ROWS[r], e_ref);
        ck_assert_msg(e_it < 0.95 * e_fbp, "row %d: SIRT %.4f, FBP %.4f",
                      ROWS[r], e_it, e_fbp);
        const daemon_image *first = iterate(&t.in, "sirt", ROWS[r], 0);
        ck_assert(first && test_rel_l2(first->data, fbp + plane * r, plane) <=
                  ENGINE_TOL);
        daemon_assert_image_stats(fin, 1e-5);
    }
    /* Telemetry (in status) saw the end of the solve. */
    daemon_inbox_pump(&t.in, 200);
    json_t *status = daemon_status(t.c);
    json_t *iter = json_object_get(json_object_get(status, "telemetry"),
                                   "iterative");
    ck_assert_msg(json_is_object(iter), "no iterative telemetry in status");
    ck_assert_str_eq(json_string_value(json_object_get(iter, "method")),
                     "sirt");
    ck_assert_int_eq(json_integer_value(json_object_get(iter, "iteration")),
                     30);
    ck_assert(json_is_true(json_object_get(iter, "done")));
    double gu_a = json_number_value(json_object_get(iter, "project_gu_per_s"));
    double gu_t = json_number_value(json_object_get(iter,
                                                    "backproject_gu_per_s"));
    double per_s = json_number_value(json_object_get(iter,
                                                     "iterations_per_s"));
    printf("telemetry: %.1f iterations/s, A %.4f GU/s, A^T %.4f GU/s\n",
           per_s, gu_a, gu_t);
    ck_assert(gu_a > 0 && gu_t > 0 && per_s > 0);
    json_decref(status);
    free(ref); free(fbp);
    daemon_scan_free(&s);
    daemon_session_close(&t);
}
END_TEST

/* CGLS with two projections missing and a tolerance, every iterate
 * published: the residuals fall, it stops at the tolerance, and the final
 * slices are the engine's solve of the projections that came. */
START_TEST(cgls_missing_and_tolerance)
{
    daemon_session t;
    daemon_session_open(&t, backend_args, 1);
    daemon_scan s;
    daemon_scan_make(&s, "cgls", WIDTH, HEIGHT, N_PROJ, 1, 2, 0xc915);
    daemon_scan_select_rows(&s, ROWS, 2);
    set_method(&s, RTOMO_METHOD_CGLS, 200, 1);
    s.spec.method.tolerance = TOLERANCE;
    s.spec.given |= RTOMO_SPEC_HAS_TOLERANCE;
    unsigned char received[N_PROJ];
    memset(received, 1, sizeof received);
    received[5] = received[11] = 0;
    daemon_send_begin(t.c, &s);
    daemon_send_fields(t.c, &s);
    for (int p = 0; p < N_PROJ; p++)
        if (received[p])
            daemon_send_projection(t.c, &s, p);
    daemon_send_end(t.c, &s);
    daemon_wait_event(&t.in, "scan_complete", NULL, "cgls", 0);

    rtomo_iter_options o;
    rtomo_iter_options_init(&o);
    o.method = RTOMO_ITER_CGLS;
    o.iterations = 200;
    o.tolerance = TOLERANCE;
    rtomo_iter_result res;
    float *ref = engine_solve(&s, ROWS, 2, received, &o, &res);
    printf("engine: tolerance reached after %d iterations (residual %.4f)\n",
           res.iterations, res.residual);
    ck_assert(res.iterations < 200);
    const size_t plane = WIDTH * WIDTH;
    for (int r = 0; r < 2; r++) {
        const daemon_image *fin = final_of(&t.in, "cgls", ROWS[r]);
        ck_assert_ptr_nonnull(fin);
        ck_assert_int_eq(fin->h.iteration, res.iterations);
        ck_assert_int_eq(fin->h.projections, N_PROJ - 2);
        ck_assert(fin->h.residual <= TOLERANCE);
        double e = test_rel_l2(fin->data, ref + plane * r, plane);
        ck_assert_msg(e <= ENGINE_TOL, "row %d: %.3g from the engine",
                      ROWS[r], e);
        /* Every iterate before the last was published, residuals falling
         * (the batch's residual: both rows together). */
        double before = INFINITY;
        for (int k = 1; k <= res.iterations; k++) {
            const daemon_image *im = iterate(&t.in, "cgls", ROWS[r], k);
            ck_assert_msg(im, "iterate %d of row %d missing", k, ROWS[r]);
            ck_assert_int_eq(im->h.final, k == res.iterations);
            if (r == 0)
                printf("iteration %d: residual %.5f\n", k, im->h.residual);
            ck_assert_msg(im->h.residual < before, "residual rose at %d", k);
            before = im->h.residual;
        }
        ck_assert_ptr_null(iterate(&t.in, "cgls", ROWS[r],
                                   res.iterations + 1));
    }
    free(ref);
    daemon_scan_free(&s);
    daemon_session_close(&t);
}
END_TEST

/* Projections whose indices are not in the order of their angles (an
 * interlaced scan, each frame giving its angle), sent in reverse: the
 * daemon stores each in its index's slot and solves them in the order of
 * their angles, and the final slices are the engine's solve of the same
 * projections. */
START_TEST(angles_out_of_index_order)
{
    daemon_session t;
    daemon_session_open(&t, backend_args, 1);
    daemon_scan s;
    daemon_scan_make(&s, "interlaced", WIDTH, HEIGHT, N_PROJ, 1, 2, 0x1a7e);
    daemon_scan_select_rows(&s, ROWS, 2);
    set_method(&s, RTOMO_METHOD_SIRT, 10, 0);
    const rtomo_fbp_geometry *g = &s.spec.geometry;
    daemon_send_begin(t.c, &s);
    daemon_send_fields(t.c, &s);
    for (int q = N_PROJ - 1; q >= 0; q--) {
        const int p = (q % 4) * (N_PROJ / 4) + q / 4;   /* q's angle */
        daemon_send_projection_as(t.c, &s, p, q,
                                  (g->angle_start + p * g->angle_step) *
                                      180.0 / M_PI);
    }
    daemon_send_end(t.c, &s);
    daemon_wait_event(&t.in, "scan_complete", NULL, "interlaced", 0);

    rtomo_iter_options o;
    rtomo_iter_options_init(&o);
    o.iterations = 10;
    rtomo_iter_result res;
    float *ref = engine_solve(&s, ROWS, 2, NULL, &o, &res);
    const size_t plane = WIDTH * WIDTH;
    for (int r = 0; r < 2; r++) {
        const daemon_image *fin = final_of(&t.in, "interlaced", ROWS[r]);
        ck_assert_ptr_nonnull(fin);
        ck_assert_int_eq(fin->h.projections, N_PROJ);
        double e = test_rel_l2(fin->data, ref + plane * r, plane);
        printf("interlaced, row %d: final %.2e from the engine's solve in "
               "angle order\n", ROWS[r], e);
        ck_assert_msg(e <= ENGINE_TOL, "row %d: %.3g from the engine",
                      ROWS[r], e);
    }
    free(ref);
    daemon_scan_free(&s);
    daemon_session_close(&t);
}
END_TEST

/* Two workers, two rows each, and a ROI: each worker solves its rows;
 * the solve runs on the whole grid from zero (the FBP slices, cut to the
 * ROI, cannot start it) and the ROI of its result is published. */
START_TEST(roi_and_two_workers)
{
    const char *args[] = {BACKEND_ARGS "--set", "engine.workers=2", NULL};
    daemon_session t;
    daemon_session_open(&t, args, 1);
    static const int rows[4] = {2, 3, 4, 5};
    const int roi[4] = {8, 12, 40, 36};
    daemon_scan s;
    daemon_scan_make(&s, "roi", WIDTH, HEIGHT, N_PROJ, 1, 2, 0x7012);
    daemon_scan_select_rows(&s, rows, 4);
    set_method(&s, RTOMO_METHOD_SIRT, 10, 0);
    s.spec.geometry.roi_x = roi[0];
    s.spec.geometry.roi_y = roi[1];
    s.spec.geometry.roi_width = roi[2];
    s.spec.geometry.roi_height = roi[3];
    s.spec.given |= RTOMO_SPEC_HAS_ROI;
    daemon_send_scan(t.c, &s);
    daemon_wait_event(&t.in, "scan_complete", NULL, "roi", 0);
    ck_assert_int_eq(daemon_count_images(&t.in, RTOMO_TOPIC_SLICE, "roi"),
                     4 * 2);
    rtomo_iter_options o;
    rtomo_iter_options_init(&o);
    o.iterations = 10;
    rtomo_iter_result res;
    float *ref = engine_solve_from(&s, rows, 4, NULL, &o, &res, 1);
    const size_t plane = WIDTH * WIDTH;
    float *crop = malloc(sizeof(float) * (size_t)roi[2] * (size_t)roi[3]);
    for (int r = 0; r < 4; r++) {
        const daemon_image *fin = final_of(&t.in, "roi", rows[r]);
        ck_assert_ptr_nonnull(fin);
        ck_assert_int_eq(fin->h.width, roi[2]);
        ck_assert_int_eq(fin->h.height, roi[3]);
        ck_assert_int_eq(fin->h.index, r);
        for (int y = 0; y < roi[3]; y++)
            memcpy(crop + (size_t)y * roi[2],
                   ref + plane * r + (size_t)(roi[1] + y) * WIDTH + roi[0],
                   sizeof(float) * (size_t)roi[2]);
        double e = test_rel_l2(fin->data, crop, (size_t)roi[2] * roi[3]);
        printf("roi, row %d (worker %d): final %.2e from the engine's cold "
               "solve\n", rows[r], r / 2, e);
        ck_assert_msg(e <= ENGINE_TOL, "row %d: %.3g from the engine",
                      rows[r], e);
    }
    free(crop);
    free(ref);
    daemon_scan_free(&s);
    daemon_session_close(&t);
}
END_TEST

/* An abort during 10000 iterations: the scan ends aborted within a
 * moment, no iterate follows the event, and the next scan works. */
START_TEST(abort_stops_the_iterations)
{
    daemon_session t;
    daemon_session_open(&t, backend_args, 1);
    daemon_scan s;
    daemon_scan_make(&s, "long", WIDTH, HEIGHT, N_PROJ, 1, 2, 0xab07);
    set_method(&s, RTOMO_METHOD_SIRT, RTOMO_MAX_ITERATIONS, 1);
    daemon_send_scan(t.c, &s);
    /* The third iterate of any row: the solve is under way. */
    double t0 = seconds_now();
    while (!iterate(&t.in, "long", 0, 3))
        ck_assert_msg(daemon_inbox_pump(&t.in, 1000) || seconds_now() - t0 < 30,
                      "no iterate came");
    json_decref(daemon_request(t.c, "{\"cmd\": \"abort\", \"scan\": "
                                    "\"long\"}"));
    double t_abort = seconds_now();
    daemon_wait_event(&t.in, "scan_aborted", NULL, "long", 0);
    printf("aborted %.0f ms after the request\n", 1e3 * (seconds_now() -
                                                         t_abort));
    int images = daemon_count_images(&t.in, RTOMO_TOPIC_SLICE, "long");
    daemon_inbox_pump(&t.in, 300);
    ck_assert_int_eq(daemon_count_images(&t.in, RTOMO_TOPIC_SLICE, "long"),
                     images);
    ck_assert_ptr_null(final_of(&t.in, "long", 0));
    /* The daemon goes on: an FBP scan after it. */
    daemon_scan next;
    daemon_scan_make(&next, "after", WIDTH, HEIGHT, N_PROJ, 1, 2, 0xaf7e);
    daemon_send_scan(t.c, &next);
    /* ENGINE_TOL, not the harness's CPU 1e-5: on the GPU the FBP differs
     * from the CPU's by float rounding alone (cuFFT against the CPU's
     * transform, the back-projector's sums), measured 1.13e-5 of the
     * largest value on an H100 whose autotuner chose the 1-slice ALU
     * kernel with 64-pixel tiles (a timed choice, per machine, so other
     * machines may round below 1e-5: not measured).  Anything of the
     * aborted scan in these slices (its data, a projection dropped or
     * added) moves them by far more. */
    daemon_check_against_engine_tol(&t.in, &next, 2, ENGINE_TOL);
    daemon_scan_free(&next);
    daemon_scan_free(&s);
    daemon_session_close(&t);
}
END_TEST

#ifndef ITER_ON_GPU         /* the protocol's and the loop's: no GPU in it */
/* What excludes an iterative method is refused naming it; the daemon's
 * default method applies to plain scans and gives way to FBP, said in
 * scan_started, where it cannot apply. */
START_TEST(conflicts_and_defaults)
{
    const char *args[] = {"--set", "reconstruction.method=cgls", "--set",
                          "reconstruction.iterations=3", NULL};
    daemon_session t;
    daemon_session_open(&t, args, 1);
    daemon_send_header(t.c, "{\"protocol\": 1, \"type\": \"scan_begin\", "
        "\"scan\": \"cont\", \"detector\": {\"width\": 32, \"height\": 2}, "
        "\"projections\": 10, \"mode\": \"continuous\", "
        "\"reconstruction\": {\"method\": \"sirt\"}}");
    const rtomo_event *ev = daemon_wait_event(&t.in, "rejected", "bad_field",
                                              "cont", 0);
    ck_assert_msg(strstr(ev->message, "reconstruction.method") &&
                  strstr(ev->message, "continuous"), "%s", ev->message);
    /* A clamp without a method of the scan's own: judged against the
     * daemon's method (cgls here), so refused by the daemon. */
    daemon_send_header(t.c, "{\"protocol\": 1, \"type\": \"scan_begin\", "
        "\"scan\": \"nonneg\", \"detector\": {\"width\": 32, \"height\": 2}, "
        "\"projections\": 10, \"reconstruction\": {\"nonnegative\": true}}");
    ev = daemon_wait_event(&t.in, "rejected", "bad_field", "nonneg", 0);
    ck_assert_msg(strstr(ev->message, "nonnegative") &&
                  strstr(ev->message, "\"cgls\""), "%s", ev->message);

    /* The default applies to a plain scan: FBP then 3 CGLS iterations. */
    daemon_scan s;
    daemon_scan_make(&s, "dflt", 32, 2, 16, 1, 1, 0xdef1);
    daemon_send_scan(t.c, &s);
    ev = daemon_wait_event(&t.in, "scan_started", NULL, "dflt", 0);
    ck_assert_msg(strstr(ev->message, "method: cgls after fbp, 3 "
                         "iterations"), "%s", ev->message);
    daemon_wait_event(&t.in, "scan_complete", NULL, "dflt", 0);
    for (int r = 0; r < 2; r++) {
        const daemon_image *fin = final_of(&t.in, "dflt", r);
        ck_assert(fin && fin->h.iteration == 3 &&
                  strcmp(fin->h.method, "cgls") == 0);
    }
    /* ... and gives way to FBP for a continuous stream, which says so. */
    daemon_scan c;
    daemon_scan_make_continuous(&c, "stream", 32, 2, 16, 8, 24, 1, 0x57e4);
    daemon_send_begin(t.c, &c);
    daemon_send_fields(t.c, &c);
    for (int p = 0; p < 24; p++)
        daemon_send_projection(t.c, &c, p);
    daemon_send_end(t.c, &c);
    ev = daemon_wait_event(&t.in, "scan_started", NULL, "stream", 0);
    ck_assert_msg(strstr(ev->message, "method: fbp (the configured cgls does "
                         "not go with a continuous stream)"), "%s",
                  ev->message);
    daemon_wait_event(&t.in, "scan_complete", NULL, "stream", 0);
    /* Windows end at projections 15 and 23: two, of two slices each. */
    ck_assert_int_eq(daemon_count_images(&t.in, RTOMO_TOPIC_SLICE, "stream"),
                     2 * 2);
    /* A scan that asks for sirt with the daemon's ring removal on. */
    json_decref(daemon_request(t.c, "{\"cmd\": \"set_config\", \"config\": "
                                    "{\"reconstruction\": {\"rings\": "
                                    "\"column_mean\"}}}"));
    /* ... and a plain scan without a method: the configured cgls gives
     * way to FBP, really (its slices are final, no iterate follows). */
    daemon_scan r;
    daemon_scan_make(&r, "ringed-fbp", 32, 2, 16, 1, 1, 0x219e);
    daemon_send_scan(t.c, &r);
    ev = daemon_wait_event(&t.in, "scan_started", NULL, "ringed-fbp", 0);
    ck_assert_msg(strstr(ev->message, "method: fbp (the configured cgls does "
                         "not go with ring removal)"), "%s", ev->message);
    daemon_wait_event(&t.in, "scan_complete", NULL, "ringed-fbp", 0);
    ck_assert_int_eq(daemon_count_images(&t.in, RTOMO_TOPIC_SLICE,
                                         "ringed-fbp"), 2);
    for (int i = 0; i < 2; i++) {
        const daemon_image *im = daemon_find_image(&t.in, RTOMO_TOPIC_SLICE,
                                                   "ringed-fbp", -1, i);
        ck_assert(im && im->h.final && im->h.iteration == 0 &&
                  strcmp(im->h.method, "fbp") == 0);
    }
    daemon_scan_free(&r);
    daemon_send_header(t.c, "{\"protocol\": 1, \"type\": \"scan_begin\", "
        "\"scan\": \"ringed\", \"detector\": {\"width\": 32, \"height\": 2}, "
        "\"projections\": 10, \"reconstruction\": {\"method\": \"sirt\"}}");
    ev = daemon_wait_event(&t.in, "rejected", "bad_field", "ringed", 0);
    ck_assert_msg(strstr(ev->message, "ring removal"), "%s", ev->message);
    daemon_scan_free(&c);
    daemon_scan_free(&s);
    daemon_session_close(&t);
}
END_TEST
#endif

int main(void)
{
#ifdef ITER_ON_GPU
    if (rtomo_cuda_device_count() < 1) {
        printf("no CUDA device: the daemon's GPU solve is not tested\n");
        return 77;
    }
    const TTest *tests[] = {
        sirt_after_fbp, cgls_missing_and_tolerance, roi_and_two_workers,
        angles_out_of_index_order,
        abort_stops_the_iterations,
    };
    const char *name = "cuda_daemon_iterative";
#else
    const TTest *tests[] = {
        sirt_after_fbp, cgls_missing_and_tolerance, roi_and_two_workers,
        angles_out_of_index_order,
        abort_stops_the_iterations, conflicts_and_defaults,
    };
    const char *name = "daemon_iterative";
#endif
    return daemon_run_tests(name, tests,
                            (int)(sizeof tests / sizeof tests[0]), 120);
}
