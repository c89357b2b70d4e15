/*
 * test_cuda_sbdx.c — the CUDA SBDX backend on the device against the CPU
 * backend (the reference): both formulations on random frames of every
 * sample type and on simulated point and wire scenes, n < 1 and n > 1, with
 * raw and with flat-fielded planes; uniform frames flat-fielded to their
 * value; points in focus on their own plane; composite and depth equal to
 * the CPU's except at near-ties (counted and bounded); 16-bit planes; the
 * submit/collect pipeline (depth 2, order, tags, changing sample types);
 * and the band split that multi-GPU uses.  Exits 77 (skip) without a GPU.
 *
 * Tolerance: max |gpu - cpu| over a plane <= 1e-4 of the plane's max |cpu|
 * (float sums of some hundred terms in another order; the paper saw
 * 1.2e-4 with its own GPU code).
 */
#include "config.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rtomo_sim.h"
#include "sbdx_lut.h"
#include "sbdx_composite.h"
#include "test_sbdx_support.h"
#include "check_run.h"

#define PLANE_TOL 1e-4
/* Depth may differ from the CPU's only where the two planes' local
 * variances (from the CPU planes) agree to NEAR_TIE_REL of the larger, or
 * to NEAR_TIE_ABS of the squared largest flat-fielded value: flat regions
 * (a uniform background) have variances of pure rounding noise, ~1e-14 of
 * the squared value, and their depth is arbitrary on either side. */
#define NEAR_TIE_REL 1e-4
#define NEAR_TIE_ABS 1e-9
/* On random frames, which have no flat regions, near-ties are rare: at most
 * this fraction of the pixels. */
#define MAX_TIE_FRACTION 0.005

/* ------------------------------------------------------------ helpers ---- */

typedef struct outputs {
    float *planes, *composite;
    uint16_t *depth, *u16;
    size_t pixels, plane_pixels;
} outputs;

static outputs outputs_make(const rtomo_sbdx_geometry *g)
{
    outputs o;
    o.plane_pixels = sbdx_planes_pixels(g);
    o.pixels = o.plane_pixels / g->n_planes;
    o.planes = malloc(sizeof(float) * o.plane_pixels);
    o.u16 = malloc(sizeof(uint16_t) * o.plane_pixels);
    o.composite = malloc(sizeof(float) * o.pixels);
    o.depth = malloc(sizeof(uint16_t) * o.pixels);
    ck_assert(o.planes && o.u16 && o.composite && o.depth);
    /* Poison, so that an output never written cannot pass. */
    for (size_t i = 0; i < o.plane_pixels; i++)
        o.planes[i] = NAN, o.u16[i] = 0xdead;
    for (size_t i = 0; i < o.pixels; i++)
        o.composite[i] = NAN, o.depth[i] = 0xdead;
    return o;
}

static void outputs_free(outputs *o)
{
    free(o->planes);
    free(o->composite);
    free(o->depth);
    free(o->u16);
}

static rtomo_sbdx_output output_of(outputs *o, float offset, float scale)
{
    rtomo_sbdx_output out = {o->planes, o->u16, offset, scale, o->composite,
                             o->depth};
    return out;
}

static rtomo_sbdx *make_plan(const rtomo_sbdx_geometry *g, rtomo_backend b,
                             rtomo_sbdx_method method)
{
    rtomo_engine_options opt;
    rtomo_engine_options_init(&opt);
    opt.backend = b;
    opt.sbdx_method = method;
    opt.n_devices = b == RTOMO_BACKEND_CUDA ? 1 : 0;
    opt.device_ids[0] = 0;
    rtomo_error err;
    rtomo_sbdx *plan = rtomo_sbdx_create(g, &opt, &err);
    ck_assert_msg(plan != NULL, "%s plan: %s", rtomo_backend_name(b),
                  err.message);
    return plan;
}

/* One frame, all outputs, u16 over [offset, offset + 65535 / scale]. */
static outputs run(const rtomo_sbdx_geometry *g, rtomo_backend b,
                   rtomo_sbdx_method method, const void *frame,
                   rtomo_dtype dtype, float offset, float scale)
{
    rtomo_sbdx *plan = make_plan(g, b, method);
    outputs o = outputs_make(g);
    rtomo_sbdx_output out = output_of(&o, offset, scale);
    rtomo_error err;
    ck_assert_msg(rtomo_sbdx_reconstruct(plan, frame, dtype, &out, &err) ==
                  RTOMO_OK, "%s reconstruct: %s", rtomo_backend_name(b),
                  err.message);
    rtomo_sbdx_destroy(plan);
    return o;
}

static void require_planes_close(const rtomo_sbdx_geometry *g,
                                 const outputs *gpu, const outputs *cpu,
                                 const char *what)
{
    for (size_t i = 0; i < gpu->plane_pixels; i++)
        SBDX_REQUIRE(isfinite(gpu->planes[i]), "%s: plane value %zu is %g",
                     what, i, (double)gpu->planes[i]);
    double e = sbdx_max_relative_error(gpu->planes, cpu->planes, g);
    printf("%-44s max relative error %.2e\n", what, e);
    ck_assert_msg(e <= PLANE_TOL, "%s: max relative error %g > %g", what, e,
                  PLANE_TOL);
}

static void require_identical(const outputs *a, const outputs *b,
                              const char *what)
{
    ck_assert_msg(memcmp(a->planes, b->planes,
                         sizeof(float) * a->plane_pixels) == 0,
                  "%s: planes differ", what);
    ck_assert_msg(memcmp(a->composite, b->composite,
                         sizeof(float) * a->pixels) == 0,
                  "%s: composites differ", what);
    ck_assert_msg(memcmp(a->depth, b->depth, sizeof(uint16_t) * a->pixels) == 0,
                  "%s: depth maps differ", what);
}

/* Local variance of plane k by the composite rule (sbdx_composite.h), by
 * brute force in double; NaN where plane k is no candidate. */
static double window_variance(const rtomo_sbdx_geometry *g,
                              const rtomo_sbdx_lut *lut, const float *planes,
                              int k, int i, int j)
{
    int w = lut->x[k].n_out, h = lut->y[k].n_out;
    return sbdx_rule_variance(planes + (size_t)k * w * h, lut->x[k].response,
                              lut->y[k].response, w, h, g->flat_field,
                              g->composite_radius ? g->composite_radius : 2,
                              i, j);
}

/* Depth equal to the CPU's but at near-ties of the CPU planes' variances
 * (counted; bounded by max_fraction of the pixels); composite is the GPU
 * plane at the GPU's depth. */
static void require_composite_close(const rtomo_sbdx_geometry *g,
                                    const outputs *gpu, const outputs *cpu,
                                    double max_fraction, const char *what)
{
    rtomo_error err;
    rtomo_sbdx_lut *lut = rtomo_sbdx_lut_create(g, &err);
    ck_assert_msg(lut != NULL, "%s", err.message);
    int w = g->out_width ? g->out_width : g->shift_m * g->holes_x;
    double peak = 0.0;
    for (size_t i = 0; i < cpu->plane_pixels; i++)
        peak = fmax(peak, fabs(cpu->planes[i]) / RTOMO_SBDX_RESPONSE_FLOOR);
    size_t ties = 0;
    for (size_t p = 0; p < gpu->pixels; p++) {
        int dg = gpu->depth[p], dc = cpu->depth[p];
        /* "No plane" is decided by the field of view alone, whose
         * responses are the CPU's bit for bit: no tie to excuse. */
        if (dg == RTOMO_SBDX_DEPTH_NONE || dc == RTOMO_SBDX_DEPTH_NONE) {
            SBDX_REQUIRE(dg == dc && gpu->composite[p] == 0.0f,
                         "%s: pixel %zu has depth %d (composite %g) on the "
                         "GPU, %d on the CPU", what, p, dg,
                         (double)gpu->composite[p], dc);
            continue;
        }
        SBDX_REQUIRE(dg < g->n_planes, "%s: depth %d at %zu", what, dg, p);
        SBDX_REQUIRE(gpu->composite[p] == gpu->planes[gpu->pixels * dg + p],
                     "%s: composite at %zu is not plane %d's value", what, p,
                     dg);
        if (dg == dc)
            continue;
        int i = (int)(p % w), j = (int)(p / w);
        double vg = window_variance(g, lut, cpu->planes, dg, i, j);
        double vc = window_variance(g, lut, cpu->planes, dc, i, j);
        SBDX_REQUIRE(fabs(vg - vc) <= NEAR_TIE_REL * fmax(fabs(vg), fabs(vc)) +
                                          NEAR_TIE_ABS * peak * peak,
                     "%s: pixel (%d, %d) has depth %d (variance %.9g) on the "
                     "GPU, %d (%.9g) on the CPU", what, i, j, dg, vg, dc, vc);
        ties++;
    }
    printf("%-44s depth differs at %zu near-ties of %zu pixels\n", what, ties,
           gpu->pixels);
    ck_assert_msg(ties <= (size_t)(max_fraction * gpu->pixels) + 1,
                  "%s: %zu near-ties", what, ties);
    rtomo_sbdx_lut_destroy(lut);
}

/* --------------------------------------------------------- geometries ---- */

static double shifted_ratios[4] = {0.7, 1.0, 1.9, 3.82};

/* 0: small, 1: mid (both from the support), 2: odd detector, output
 * shifted and smaller than the default, radius 3.  All flat-fielded (the
 * default); tests set flat_field = 0 for raw planes. */
static void geometry(rtomo_sbdx_geometry *g, int which)
{
    if (which == 0) {
        sbdx_small_geometry(g);
    } else if (which == 1) {
        sbdx_mid_geometry(g);
    } else {
        rtomo_sbdx_geometry_init(g);
        g->holes_x = 23, g->holes_y = 17;
        g->det_width = 21, g->det_height = 13;
        g->shift_m = 5, g->n_planes = 4, g->ratios = shifted_ratios;
        g->out_width = 90, g->out_height = 70;
        g->origin_x = 12, g->origin_y = -6;
        g->composite_radius = 3;
    }
}

static const rtomo_dtype dtypes[3] = {RTOMO_DTYPE_U8, RTOMO_DTYPE_U16,
                                      RTOMO_DTYPE_F32};

/* -------------------------------------------------------------- tests ---- */

/* _i = flat_field * 18 + geometry * 6 + method * 3 + dtype. */
START_TEST(random_frames_match_cpu)
{
    rtomo_sbdx_geometry g;
    geometry(&g, _i / 6 % 3);
    g.flat_field = _i / 18;
    rtomo_sbdx_method method = (rtomo_sbdx_method)(_i / 3 % 2);
    rtomo_dtype dtype = dtypes[_i % 3];
    uint64_t seed = 0xc0da5b0ull + (uint64_t)_i;
    void *frame = sbdx_random_frame(&g, dtype, &seed);
    outputs cpu = run(&g, RTOMO_BACKEND_CPU, method, frame, dtype, 0, 1);
    outputs gpu = run(&g, RTOMO_BACKEND_CUDA, method, frame, dtype, 0, 1);
    char what[96];
    snprintf(what, sizeof what, "geometry %d %s %s %s", _i / 6 % 3,
             g.flat_field ? "flat" : "raw", method ? "detector" : "pixel",
             rtomo_dtype_name(dtype));
    require_planes_close(&g, &gpu, &cpu, what);
    require_composite_close(&g, &gpu, &cpu, MAX_TIE_FRACTION, what);
    outputs_free(&cpu);
    outputs_free(&gpu);
    free(frame);
}
END_TEST

/* A uniform frame flat-fields to its value on the GPU: v within 1e-5 in
 * the field of view, 0 outside (test_sbdx_support).  _i = geometry * 2 +
 * method. */
START_TEST(uniform_frames_are_flat)
{
    rtomo_sbdx_geometry g;
    geometry(&g, _i / 2);
    rtomo_sbdx_method method = (rtomo_sbdx_method)(_i % 2);
    uint64_t seed = 0xf1a7ull + (uint64_t)_i;
    double v = 1.0 + floor(rtomo_random_uniform(&seed) * 60000.0);
    uint16_t *frame = malloc(sizeof(uint16_t) * sbdx_frame_samples(&g));
    ck_assert_ptr_nonnull(frame);
    for (size_t i = 0; i < sbdx_frame_samples(&g); i++)
        frame[i] = (uint16_t)v;
    outputs gpu = run(&g, RTOMO_BACKEND_CUDA, method, frame, RTOMO_DTYPE_U16,
                      0, 1);
    size_t inside = sbdx_require_flat_uniform(&g, gpu.planes, v, 1e-5);
    printf("uniform %g, geometry %d %s: %zu of %zu pixels in the field of "
           "view, all within 1e-5; the rest 0\n", v, _i / 2,
           method ? "detector" : "pixel", inside, gpu.plane_pixels);
    ck_assert_uint_gt(inside, gpu.plane_pixels / 4);
    outputs_free(&gpu);
    free(frame);
}
END_TEST

/* 16-bit planes: the formula on the GPU's own floats exactly, and within
 * one code of the CPU's. */
START_TEST(u16_planes)
{
    rtomo_sbdx_geometry g;
    geometry(&g, 1);
    uint64_t seed = 0x16b175ull;
    void *frame = sbdx_random_frame(&g, RTOMO_DTYPE_U8, &seed);
    float offset = 40.0f, scale = 300.0f;
    outputs cpu = run(&g, RTOMO_BACKEND_CPU, RTOMO_SBDX_PIXEL_CENTRIC, frame,
                      RTOMO_DTYPE_U8, offset, scale);
    outputs gpu = run(&g, RTOMO_BACKEND_CUDA, RTOMO_SBDX_PIXEL_CENTRIC, frame,
                      RTOMO_DTYPE_U8, offset, scale);
    size_t clipped = 0;
    for (size_t i = 0; i < gpu.plane_pixels; i++) {
        float t = roundf((gpu.planes[i] - offset) * scale);
        uint16_t want = !(t > 0.0f) ? 0 : t >= 65535.0f ? 65535 : (uint16_t)t;
        SBDX_REQUIRE(gpu.u16[i] == want, "pixel %zu: %g gives %u, want %u", i,
                     (double)gpu.planes[i], gpu.u16[i], want);
        SBDX_REQUIRE(abs((int)gpu.u16[i] - (int)cpu.u16[i]) <= 1,
                     "pixel %zu: GPU %u, CPU %u", i, gpu.u16[i], cpu.u16[i]);
        clipped += want == 0 || want == 65535;
    }
    /* The range must exercise both clamps and the codes in between. */
    ck_assert(clipped > 0 && clipped < gpu.plane_pixels / 2);
    outputs_free(&cpu);
    outputs_free(&gpu);
    free(frame);
}
END_TEST

/* Contrast of the object on plane k at pixel p: the departure from the
 * background's own reconstruction. */
static double contrast(const outputs *obj, const outputs *bg, int k, size_t p)
{
    size_t i = obj->pixels * k + p;
    return fabs((double)bg->planes[i] - obj->planes[i]);
}

/* Mean contrast on plane k over the pixels within half a pixel of the
 * wire, and the fraction of them whose depth is `plane`. */
static double on_wire(const outputs *obj, const outputs *bg, int w, int k,
                      const rtomo_sbdx_object *o, int plane, double *hits)
{
    double sum = 0.0, ux = o->x1 - o->x0, uy = o->y1 - o->y0;
    int n = 0, right = 0;
    for (size_t p = 0; p < obj->pixels; p++) {
        double x = (double)(p % w), y = (double)(p / w);
        double s = ((x - o->x0) * ux + (y - o->y0) * uy) / (ux * ux + uy * uy);
        s = s < 0.0 ? 0.0 : s > 1.0 ? 1.0 : s;
        if (hypot(x - o->x0 - s * ux, y - o->y0 - s * uy) <= 0.5) {
            sum += contrast(obj, bg, k, p);
            right += obj->depth[p] == plane;
            n++;
        }
    }
    ck_assert_int_gt(n, 5);
    *hits = (double)right / n;
    return sum / n;
}

/* The scenes of test_sbdx_scene.c (same geometry, seeds and placement, so
 * the CPU is known to put them in focus): _i = 12 * flat_field + 2 * plane
 * + (0 point, 1 wire).  GPU planes and composite against the CPU's; then
 * the focus properties on the GPU's own output. */
START_TEST(scenes_match_cpu_and_focus)
{
    static const double ratios[6] = {0.6, 0.85, 1.0, 1.37, 1.8, 2.25};
    rtomo_sbdx_geometry g;
    rtomo_sbdx_geometry_init(&g);
    g.holes_x = 20, g.holes_y = 16, g.det_width = 16, g.det_height = 12;
    g.shift_m = 4, g.n_planes = 6, g.ratios = ratios;
    g.flat_field = _i / 12;
    int w = 80, h = 64, ko = _i / 2 % 6, wire = _i % 2;
    rtomo_sbdx_object o = {.kind = wire ? RTOMO_SBDX_WIRE : RTOMO_SBDX_POINT,
                           .ratio = ratios[ko], .absorption = 150.0};
    uint64_t seed = (wire ? 0x3141u : 0x9017u) + (uint64_t)ko;
    double angle = wire ? M_PI * rtomo_random_uniform(&seed) : 0.0;
    double cx = w / 2.0 - 4.0 + 8.0 * rtomo_random_uniform(&seed);
    double cy = h / 2.0 - 4.0 + 8.0 * rtomo_random_uniform(&seed);
    if (wire) {
        o.x0 = cx - 8.0 * cos(angle), o.y0 = cy - 8.0 * sin(angle);
        o.x1 = cx + 8.0 * cos(angle), o.y1 = cy + 8.0 * sin(angle);
    } else {
        o.x0 = cx, o.y0 = cy;
    }
    uint8_t *scene = malloc(sbdx_frame_samples(&g));
    uint8_t *empty = malloc(sbdx_frame_samples(&g));
    ck_assert(scene && empty);
    rtomo_error err;
    ck_assert(rtomo_sbdx_simulate(&g, &o, 1, 200.0, scene, &err) == RTOMO_OK);
    ck_assert(rtomo_sbdx_simulate(&g, NULL, 0, 200.0, empty, &err) == RTOMO_OK);

    outputs cpu = run(&g, RTOMO_BACKEND_CPU, RTOMO_SBDX_PIXEL_CENTRIC, scene,
                      RTOMO_DTYPE_U8, 0, 1);
    outputs gpu = run(&g, RTOMO_BACKEND_CUDA, RTOMO_SBDX_PIXEL_CENTRIC, scene,
                      RTOMO_DTYPE_U8, 0, 1);
    outputs bg = run(&g, RTOMO_BACKEND_CUDA, RTOMO_SBDX_PIXEL_CENTRIC, empty,
                     RTOMO_DTYPE_U8, 0, 1);
    char what[96];
    snprintf(what, sizeof what, "%s %s on plane %d",
             g.flat_field ? "flat" : "raw", wire ? "wire" : "point", ko);
    require_planes_close(&g, &gpu, &cpu, what);
    /* The uniform background is one big near-tie: no bound on the count. */
    require_composite_close(&g, &gpu, &cpu, 1.0, what);

    if (wire) {
        double hits, unused;
        double focus = on_wire(&gpu, &bg, w, ko, &o, ko, &hits);
        for (int k = 0; k < 6; k++) {
            double other = on_wire(&gpu, &bg, w, k, &o, ko, &unused);
            ck_assert_msg(k == ko || other < focus, "%s: plane %d has "
                          "contrast %.2f along it, its own %.2f", what, k,
                          other, focus);
        }
        ck_assert_msg(hits >= 0.9, "%s: depth right on %.0f%% of it", what,
                      100.0 * hits);
    } else {
        size_t at = 0;
        double peak[6] = {0};
        for (int k = 0; k < 6; k++)
            for (size_t p = 0; p < gpu.pixels; p++) {
                double c = contrast(&gpu, &bg, k, p);
                if (c > peak[k]) {
                    peak[k] = c;
                    if (k == ko)
                        at = p;
                }
            }
        for (int k = 0; k < 6; k++)
            ck_assert_msg(k == ko || peak[k] < peak[ko], "%s: plane %d peaks "
                          "at %.2f, its own at %.2f", what, k, peak[k],
                          peak[ko]);
        ck_assert_msg(fabs((double)(at % w) - o.x0) <= 1.0 &&
                      fabs((double)(at / w) - o.y0) <= 1.0,
                      "%s: peak at (%zu, %zu), point at (%.2f, %.2f)", what,
                      at % w, at / w, o.x0, o.y0);
        size_t centre = (size_t)lround(o.y0) * w + (size_t)lround(o.x0);
        ck_assert_msg(gpu.depth[centre] == ko, "%s: depth %d at the point",
                      what, gpu.depth[centre]);
    }
    outputs_free(&cpu);
    outputs_free(&gpu);
    outputs_free(&bg);
    free(scene);
    free(empty);
}
END_TEST

/* Two frames in flight, a third refused, results in order with their tags
 * and equal bit for bit to one-at-a-time reconstructions; the sample type
 * changes between frames (the banks grow). */
START_TEST(pipeline_order_and_tags)
{
    rtomo_sbdx_geometry g;
    geometry(&g, 1);
    uint64_t seed = 0x919e11eull;
    void *frames[3];
    rtomo_dtype types[3] = {RTOMO_DTYPE_U8, RTOMO_DTYPE_F32, RTOMO_DTYPE_U16};
    outputs want[3], got[3];
    for (int f = 0; f < 3; f++) {
        frames[f] = sbdx_random_frame(&g, types[f], &seed);
        want[f] = run(&g, RTOMO_BACKEND_CUDA, RTOMO_SBDX_PIXEL_CENTRIC,
                      frames[f], types[f], 0, 1);
        got[f] = outputs_make(&g);
    }
    rtomo_sbdx *plan = make_plan(&g, RTOMO_BACKEND_CUDA,
                                 RTOMO_SBDX_PIXEL_CENTRIC);
    ck_assert_int_eq(rtomo_sbdx_pipeline_depth(plan), 2);
    rtomo_error err;
    uint64_t tag = 0;
    rtomo_sbdx_output out;
    ck_assert_int_eq(rtomo_sbdx_submit(plan, frames[0], types[0], 70, &err), RTOMO_OK);
    ck_assert_int_eq(rtomo_sbdx_submit(plan, frames[1], types[1], 71, &err), RTOMO_OK);
    ck_assert_int_eq(rtomo_sbdx_submit(plan, frames[2], types[2], 72, &err),
                     RTOMO_E_STATE);
    out = output_of(&got[0], 0, 1);
    ck_assert_int_eq(rtomo_sbdx_collect(plan, &out, &tag, &err), RTOMO_OK);
    ck_assert_uint_eq(tag, 70);
    ck_assert_int_eq(rtomo_sbdx_submit(plan, frames[2], types[2], 72, &err), RTOMO_OK);
    for (int f = 1; f < 3; f++) {
        out = output_of(&got[f], 0, 1);
        ck_assert_int_eq(rtomo_sbdx_collect(plan, &out, &tag, &err), RTOMO_OK);
        ck_assert_uint_eq(tag, 70 + f);
    }
    ck_assert_int_eq(rtomo_sbdx_collect(plan, &out, &tag, &err), RTOMO_E_STATE);
    rtomo_sbdx_stats st;
    rtomo_sbdx_get_stats(plan, &st);
    ck_assert_int_eq(st.frames, 3);
    ck_assert(st.compute_seconds > 0.0 && st.latency_seconds_last > 0.0);
    ck_assert(st.updates == 3 * 4.0 * sbdx_frame_samples(&g) * g.n_planes);
    rtomo_sbdx_destroy(plan);
    for (int f = 0; f < 3; f++) {
        char what[32];
        snprintf(what, sizeof what, "pipelined frame %d", f);
        require_identical(&got[f], &want[f], what);
        outputs_free(&want[f]);
        outputs_free(&got[f]);
        free(frames[f]);
    }
}
END_TEST

/* Bands of output rows (what multi-GPU splits), the x-pass's one-row
 * staging and plane rounds: identical bit for bit.  With two GPUs, so is a
 * plan over devices 0 and 1.  _i = 2 flat_field + (small or shifted). */
START_TEST(splits_are_bit_identical)
{
    rtomo_sbdx_geometry g;
    geometry(&g, 2 * (_i % 2));
    g.flat_field = _i / 2;
    uint64_t seed = 0xba4d5ull + (uint64_t)_i;
    void *frame = sbdx_random_frame(&g, RTOMO_DTYPE_U8, &seed);
    outputs whole = run(&g, RTOMO_BACKEND_CUDA, RTOMO_SBDX_PIXEL_CENTRIC,
                        frame, RTOMO_DTYPE_U8, 0, 1);
    setenv("RTOMO_SBDX_BANDS", "3", 1);
    setenv("RTOMO_SBDX_XPASS", "1,128", 1);
    setenv("RTOMO_SBDX_GROUP", "2", 1);
    outputs split = run(&g, RTOMO_BACKEND_CUDA, RTOMO_SBDX_PIXEL_CENTRIC,
                        frame, RTOMO_DTYPE_U8, 0, 1);
    unsetenv("RTOMO_SBDX_BANDS");
    unsetenv("RTOMO_SBDX_XPASS");
    unsetenv("RTOMO_SBDX_GROUP");
    require_identical(&split, &whole, "3 bands, 1 row, 2 planes a round");
    outputs_free(&split);

    if (rtomo_cuda_device_count() >= 2) {
        rtomo_engine_options opt;
        rtomo_engine_options_init(&opt);
        opt.backend = RTOMO_BACKEND_CUDA;
        opt.n_devices = 2;
        opt.device_ids[0] = 0, opt.device_ids[1] = 1;
        rtomo_error err;
        rtomo_sbdx *plan = rtomo_sbdx_create(&g, &opt, &err);
        ck_assert_msg(plan != NULL, "%s", err.message);
        outputs two = outputs_make(&g);
        rtomo_sbdx_output out = output_of(&two, 0, 1);
        ck_assert_int_eq(rtomo_sbdx_reconstruct(plan, frame, RTOMO_DTYPE_U8,
                                                &out, &err), RTOMO_OK);
        rtomo_sbdx_destroy(plan);
        require_identical(&two, &whole, "devices 0 and 1");
        outputs_free(&two);
        printf("two devices: identical to one\n");
    }
    outputs_free(&whole);
    free(frame);
}
END_TEST

/* A bad knob is an error with its name, not a crash or a silent default. */
START_TEST(bad_tuning_is_refused)
{
    rtomo_sbdx_geometry g;
    geometry(&g, 0);
    rtomo_engine_options opt;
    rtomo_engine_options_init(&opt);
    opt.backend = RTOMO_BACKEND_CUDA;
    setenv("RTOMO_SBDX_XPASS", "3,100", 1);
    rtomo_error err;
    rtomo_sbdx *plan = rtomo_sbdx_create(&g, &opt, &err);
    unsetenv("RTOMO_SBDX_XPASS");
    ck_assert_ptr_null(plan);
    ck_assert_int_eq(err.code, RTOMO_E_INVALID);
    ck_assert_ptr_nonnull(strstr(err.message, "RTOMO_SBDX_XPASS"));
}
END_TEST

static TCase *tcase(Suite *s, const char *name)
{
    TCase *tc = tcase_create(name);
    tcase_set_timeout(tc, 300);
    suite_add_tcase(s, tc);
    return tc;
}

/* Test cases by name, so that CK_RUN_CASE can pick one (the device script
 * runs "pipeline" under compute-sanitizer). */
static Suite *suite(void)
{
    Suite *s = suite_create("cuda_sbdx");
    TCase *tc = tcase(s, "planes");
    tcase_add_loop_test(tc, random_frames_match_cpu, 0, 36);
    tcase_add_loop_test(tc, uniform_frames_are_flat, 0, 6);
    tcase_add_test(tc, u16_planes);
    tc = tcase(s, "scenes");
    tcase_add_loop_test(tc, scenes_match_cpu_and_focus, 0, 24);
    tc = tcase(s, "pipeline");
    tcase_add_test(tc, pipeline_order_and_tags);
    tcase_add_loop_test(tc, splits_are_bit_identical, 0, 4);
    tcase_add_test(tc, bad_tuning_is_refused);
    return s;
}

int main(void)
{
    if (rtomo_cuda_device_count() < 1) {
        printf("no CUDA device: skipped\n");
        return 77;
    }
    /* The CUDA context lives in this process: no fork per test. */
    return rtomo_check_run_in_process(suite());
}
