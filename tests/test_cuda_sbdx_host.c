/*
 * test_cuda_sbdx_host.c — the CUDA SBDX kernels' thread code, replayed on
 * the CPU through their host runners (cuda_sbdx.h), against the SBDX
 * equations of rtomo_engine.h evaluated in double precision.  Needs no GPU,
 * so CI checks the tables, the index arithmetic of both gathers and of the
 * scatter, flat-fielding, the band split, the tiling fallbacks, the
 * composite rule and the 16-bit conversion on every build, for raw and
 * flat-fielded planes; tests/test_cuda_sbdx.c checks the same code on the
 * device against the CPU backend.
 */
#include "config.h"

#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_sbdx.h"
#include "cuda_sbdx_slot.h"
#include "rtomo_sim.h"
#include "sbdx_composite.h"
#include "test_sbdx_support.h"
#include "check_run.h"

/* ------------------------------------------------------------ scenes ---- */

typedef struct scene {
    rtomo_sbdx_geometry g;
    double ratios[8];
} scene;

/* Three geometries: even and odd detector sizes, n < 1, n = 1, n = 2
 * (weights of exactly 0), n > 3, default and shifted outputs, radius 1-3;
 * raw (flat_field 0) or flat-fielded (1) planes. */
static void scene_make(scene *s, int which, int flat_field)
{
    static const double r0[] = {0.6, 0.85, 1.0, 1.37, 2.0, 2.25};
    static const double r1[] = {0.5, 1.5, 3.82};
    static const double r2[] = {1.0, 1.25};
    rtomo_sbdx_geometry *g = &s->g;
    rtomo_sbdx_geometry_init(g);
    const double *r = r0;
    switch (which) {
    case 0:
        g->holes_x = 12, g->holes_y = 10, g->det_width = 16, g->det_height = 8;
        g->shift_m = 4, g->n_planes = 6, g->composite_radius = 2;
        break;
    case 1:
        g->holes_x = 9, g->holes_y = 11, g->det_width = 15, g->det_height = 7;
        g->shift_m = 3, g->n_planes = 3, r = r1, g->composite_radius = 1;
        g->out_width = 40, g->out_height = 30, g->origin_x = -5;
        g->origin_y = 7;
        break;
    default:
        g->holes_x = 7, g->holes_y = 5, g->det_width = 6, g->det_height = 10;
        g->shift_m = 5, g->n_planes = 2, r = r2, g->composite_radius = 3;
        g->out_width = 50, g->out_height = 40, g->origin_x = 3;
        g->origin_y = -4;
        break;
    }
    memcpy(s->ratios, r, sizeof(double) * g->n_planes);
    g->ratios = s->ratios;
    g->flat_field = flat_field;
    if (!g->out_width)
        g->out_width = g->shift_m * g->holes_x;
    if (!g->out_height)
        g->out_height = g->shift_m * g->holes_y;
}

static size_t pixels_of(const rtomo_sbdx_geometry *g)
{
    return (size_t)g->out_width * g->out_height;
}

static double sample_value(const void *f, rtomo_dtype dtype, size_t i)
{
    if (dtype == RTOMO_DTYPE_U8)
        return ((const uint8_t *)f)[i];
    if (dtype == RTOMO_DTYPE_U16)
        return ((const uint16_t *)f)[i];
    return ((const float *)f)[i];
}

/* --------------------------------------------------------- reference ---- */

/* The equations of rtomo_engine.h, in double: every sample into the 2x2
 * pixels around (X, Y) of every plane, then the m^2/(Wd Hd) scale: the raw
 * planes. */
static double *raw_reference_planes(const rtomo_sbdx_geometry *g,
                                    const void *f, rtomo_dtype dtype)
{
    size_t n = pixels_of(g);
    double *out = calloc(n * g->n_planes, sizeof(double));
    ck_assert_ptr_nonnull(out);
    double scale = (double)g->shift_m * g->shift_m /
                   ((double)g->det_width * g->det_height);
    double cx0 = (g->det_width - 1) / 2.0, cy0 = (g->det_height - 1) / 2.0;
    size_t i = 0;
    for (int cy = 0; cy < g->holes_y; cy++)
        for (int cx = 0; cx < g->holes_x; cx++)
            for (int dy = 0; dy < g->det_height; dy++)
                for (int dx = 0; dx < g->det_width; dx++, i++) {
                    double v = sample_value(f, dtype, i) * scale;
                    for (int k = 0; k < g->n_planes; k++) {
                        double n_k = g->ratios[k];
                        double X = g->shift_m * cx + n_k * (dx - cx0);
                        double Y = g->shift_m * cy + n_k * (dy - cy0);
                        double ix = floor(X), iy = floor(Y);
                        double fx = X - ix, fy = Y - iy;
                        for (int a = 0; a < 2; a++)
                            for (int b = 0; b < 2; b++) {
                                int px = (int)ix + a - g->origin_x;
                                int py = (int)iy + b - g->origin_y;
                                if (px < 0 || px >= g->out_width || py < 0 ||
                                    py >= g->out_height)
                                    continue;
                                double w = (a ? fx : 1 - fx) * (b ? fy : 1 - fy);
                                out[k * n + (size_t)py * g->out_width + px] +=
                                    v * w;
                            }
                    }
                }
    return out;
}

/* The planes of g, raw or flat-fielded: flat-fielded ones divide by the
 * equations' own reconstruction of a frame of ones. */
static double *reference_planes(const rtomo_sbdx_geometry *g, const void *f,
                                rtomo_dtype dtype)
{
    double *ref = raw_reference_planes(g, f, dtype);
    if (g->flat_field) {
        float *ones = malloc(sizeof(float) * sbdx_frame_samples(g));
        ck_assert_ptr_nonnull(ones);
        for (size_t i = 0; i < sbdx_frame_samples(g); i++)
            ones[i] = 1.0f;
        double *response = raw_reference_planes(g, ones, RTOMO_DTYPE_F32);
        sbdx_flat_field_reference(g, ref, response);
        free(response);
        free(ones);
    }
    return ref;
}

/* max |a - ref| / max |ref| over each plane; the largest over planes. */
static double plane_error(const rtomo_sbdx_geometry *g, const float *a,
                          const double *ref)
{
    size_t n = pixels_of(g);
    double worst = 0.0;
    for (int k = 0; k < g->n_planes; k++) {
        double max_ref = 0.0, max_diff = 0.0;
        for (size_t i = 0; i < n; i++) {
            double r = ref[k * n + i];
            max_ref = fmax(max_ref, fabs(r));
            max_diff = fmax(max_diff, fabs(a[k * n + i] - r));
            SBDX_REQUIRE(isfinite(a[k * n + i]), "plane %d pixel %zu is %g",
                         k, i, (double)a[k * n + i]);
        }
        double e = max_ref > 0.0 ? max_diff / max_ref : max_diff;
        worst = fmax(worst, e);
    }
    return worst;
}

/* -------------------------------------------------- emulated pipeline ---- */

typedef struct host_tables {
    double *ratios;
    sbdx_lut_params p;
} host_tables;

static void tables_build(host_tables *t, const rtomo_sbdx_geometry *g)
{
    size_t P = (size_t)g->n_planes, m = (size_t)g->shift_m;
    memset(t, 0, sizeof *t);
    t->p.ratios = g->ratios;
    t->p.n_planes = g->n_planes;
    t->p.shift_m = g->shift_m;
    t->p.x.n_det = g->det_width;
    t->p.x.stride = sbdx_staged_stride(g->det_width);
    t->p.x.n_holes = g->holes_x;
    t->p.x.origin = g->origin_x;
    t->p.x.n_out = g->out_width;
    t->p.y.n_det = g->det_height;
    t->p.y.stride = g->det_height;
    t->p.y.n_holes = g->holes_y;
    t->p.y.origin = g->origin_y;
    t->p.y.n_out = g->out_height;
    t->p.x.dc = calloc(P * g->det_width, sizeof(sbdx_gpu_dc));
    t->p.y.dc = calloc(P * g->det_height, sizeof(sbdx_gpu_dc));
    t->p.x.start = calloc(P * (m + 2), sizeof(int32_t));
    t->p.y.start = calloc(P * (m + 2), sizeof(int32_t));
    t->p.x.ent = calloc(P * 2 * g->det_width, sizeof(sbdx_gpu_entry));
    t->p.y.ent = calloc(P * 2 * g->det_height, sizeof(sbdx_gpu_entry));
    t->p.x.response = calloc(P * g->out_width, sizeof(float));
    t->p.y.response = calloc(P * g->out_height, sizeof(float));
    ck_assert(t->p.x.dc && t->p.y.dc && t->p.x.start && t->p.y.start &&
              t->p.x.ent && t->p.y.ent && t->p.x.response && t->p.y.response);
    sbdx_lut_run_on_host(&t->p);
}

static void tables_free(host_tables *t)
{
    free(t->p.x.dc);
    free(t->p.y.dc);
    free(t->p.x.start);
    free(t->p.y.start);
    free(t->p.x.ent);
    free(t->p.y.ent);
    free(t->p.x.response);
    free(t->p.y.response);
}

typedef struct emulation {
    int bands;
    sbdx_tuning tune;
    int smem_limit;
    rtomo_sbdx_method method;
} emulation;

static emulation default_emulation(void)
{
    emulation e = {1, {2, 512, 256, 0, (size_t)1 << 30}, 227 * 1024,
                   RTOMO_SBDX_PIXEL_CENTRIC};
    return e;
}

/* Planes (or scatter) of one band into band_planes [P][ext_rows][W]. */
static void emulate_band_planes(const rtomo_sbdx_geometry *g,
                                const host_tables *t, const sbdx_band *band,
                                const emulation *e, const void *frame,
                                rtomo_dtype dtype, float *band_planes)
{
    size_t off = (size_t)band->hole_first * g->holes_x * g->det_height *
                 g->det_width * rtomo_dtype_size(dtype);
    const void *band_frame = (const char *)frame + off;
    size_t plane_size = (size_t)band->ext_rows * g->out_width;
    sbdx_xpass_params x;
    sbdx_ypass_params y;
    int group;
    rtomo_error err;
    ck_assert_int_eq(sbdx_kernel_config(g, band, &e->tune, e->smem_limit, &x,
                                        &y, &group, &err), RTOMO_OK);
    int flat = g->flat_field;
    if (e->method == RTOMO_SBDX_DETECTOR_CENTRIC) {
        sbdx_scatter_params s = {band_frame, dtype, band_planes, t->p.x.dc,
                                 t->p.y.dc, g->n_planes, g->holes_x,
                                 band->hole_first, band->hole_rows,
                                 g->det_width, g->det_height, g->shift_m,
                                 g->out_width, g->origin_x, g->origin_y,
                                 band->ext_first, band->ext_rows, y.scale,
                                 flat ? t->p.x.response : NULL,
                                 flat ? t->p.y.response : NULL,
                                 g->out_height};
        sbdx_scatter_run_on_host(&s);
        return;
    }
    float *tbuf = calloc((size_t)group * x.rows * x.shift_m * x.nq + 1,
                         sizeof(float));
    ck_assert_ptr_nonnull(tbuf);
    for (int k0 = 0; k0 < g->n_planes; k0 += group) {
        int n = g->n_planes - k0 < group ? g->n_planes - k0 : group;
        x.frame = band_frame;
        x.dtype = dtype;
        x.t = tbuf;
        x.start = t->p.x.start + (size_t)k0 * x.start_pitch;
        x.ent = t->p.x.ent + (size_t)k0 * x.ent_pitch;
        x.planes = n;
        sbdx_xpass_run_on_host(&x, e->tune.xpass_threads);
        y.t = tbuf;
        y.planes = band_planes + plane_size * k0;
        y.start = t->p.y.start + (size_t)k0 * y.start_pitch;
        y.ent = t->p.y.ent + (size_t)k0 * y.ent_pitch;
        y.planes_n = n;
        if (flat) {
            y.response_x = t->p.x.response + (size_t)k0 * g->out_width;
            y.response_y = t->p.y.response + (size_t)k0 * g->out_height;
        }
        sbdx_ypass_run_on_host(&y, e->tune.ypass_threads);
    }
    free(tbuf);
}

/* The whole backend's arithmetic for one frame: every band's planes and
 * composite, own rows copied into full-image outputs. */
static void emulate(const rtomo_sbdx_geometry *g, const emulation *e,
                    const void *frame, rtomo_dtype dtype, float *planes,
                    float *composite, uint16_t *depth)
{
    host_tables t;
    tables_build(&t, g);
    size_t w = (size_t)g->out_width, n = pixels_of(g);
    for (int i = 0; i < e->bands; i++) {
        sbdx_band band;
        sbdx_band_of(g, i, e->bands, &band);
        size_t ext = (size_t)band.ext_rows * w, own = (size_t)band.own_rows * w;
        float *bp = malloc(sizeof(float) * (ext * g->n_planes + 1));
        float *bc = malloc(sizeof(float) * (own + 1));
        uint16_t *bd = malloc(sizeof(uint16_t) * (own + 1));
        ck_assert(bp && bc && bd);
        /* Poison: every output value must be written. */
        for (size_t j = 0; j < ext * g->n_planes; j++)
            bp[j] = NAN;
        emulate_band_planes(g, &t, &band, e, frame, dtype, bp);
        sbdx_composite_params c = {bp, t.p.x.response, t.p.y.response,
                                   g->n_planes, g->out_width,
                                   g->out_height, g->composite_radius,
                                   band.ext_first, band.ext_rows,
                                   band.own_first, band.own_rows, bc, bd,
                                   g->flat_field};
        sbdx_composite_run_on_host(&c);
        size_t halo = (size_t)(band.own_first - band.ext_first) * w;
        for (int k = 0; k < g->n_planes; k++)
            memcpy(planes + k * n + band.own_first * w, bp + k * ext + halo,
                   sizeof(float) * own);
        memcpy(composite + band.own_first * w, bc, sizeof(float) * own);
        memcpy(depth + band.own_first * w, bd, sizeof(uint16_t) * own);
        free(bp);
        free(bc);
        free(bd);
    }
    tables_free(&t);
}

typedef struct result {
    float *planes, *composite;
    uint16_t *depth;
} result;

static result run(const rtomo_sbdx_geometry *g, const emulation *e,
                  const void *frame, rtomo_dtype dtype)
{
    result r;
    size_t n = pixels_of(g);
    r.planes = malloc(sizeof(float) * n * g->n_planes);
    r.composite = malloc(sizeof(float) * n);
    r.depth = malloc(sizeof(uint16_t) * n);
    ck_assert(r.planes && r.composite && r.depth);
    emulate(g, e, frame, dtype, r.planes, r.composite, r.depth);
    return r;
}

static void result_free(result *r)
{
    free(r->planes);
    free(r->composite);
    free(r->depth);
}

static void require_identical(const rtomo_sbdx_geometry *g, const result *a,
                              const result *b, const char *what)
{
    size_t n = pixels_of(g);
    ck_assert_msg(memcmp(a->planes, b->planes, sizeof(float) * n * g->n_planes) == 0,
                  "%s: planes differ", what);
    ck_assert_msg(memcmp(a->composite, b->composite, sizeof(float) * n) == 0,
                  "%s: composites differ", what);
    ck_assert_msg(memcmp(a->depth, b->depth, sizeof(uint16_t) * n) == 0,
                  "%s: depth maps differ", what);
}

/* -------------------------------------------------------------- tests ---- */

/* dc entries are the double formula rounded to float; each residue list
 * holds exactly the non-zero taps of its residue, in element order, with
 * j = d - floor(offset / m) * stride. */
START_TEST(test_tables_are_the_transposed_taps)
{
    scene s;
    scene_make(&s, _i, 1);
    const rtomo_sbdx_geometry *g = &s.g;
    host_tables t;
    tables_build(&t, g);
    int m = g->shift_m;
    for (int axis = 0; axis < 2; axis++) {
        const sbdx_gpu_axis *a = axis ? &t.p.y : &t.p.x;
        for (int k = 0; k < g->n_planes; k++) {
            const sbdx_gpu_dc *dc = a->dc + (size_t)k * a->n_det;
            const int32_t *start = a->start + (size_t)k * sbdx_start_pitch(m);
            const sbdx_gpu_entry *ent = a->ent + (size_t)k * sbdx_entry_pitch(a->n_det);
            int next[1024] = {0};
            int taps = 0;
            for (int d = 0; d < a->n_det; d++) {
                double tt = g->ratios[k] * (d - (a->n_det - 1) / 2.0);
                double off = floor(tt);
                SBDX_REQUIRE(dc[d].offset == (int)off &&
                             dc[d].w_lo == (float)(1.0 - (tt - off)) &&
                             dc[d].w_hi == (float)(tt - off),
                             "axis %d plane %d element %d: wrong dc entry",
                             axis, k, d);
                for (int hi = 0; hi < 2; hi++) {
                    float w = hi ? dc[d].w_hi : dc[d].w_lo;
                    if (w == 0.0f)
                        continue;
                    int o = dc[d].offset + hi;
                    int delta = (int)floor((double)o / m);
                    int rho = o - delta * m;
                    int e = start[rho] + next[rho]++;
                    SBDX_REQUIRE(e < start[rho + 1], "axis %d plane %d: "
                                 "list %d too short", axis, k, rho);
                    SBDX_REQUIRE(ent[e].j == d - delta * a->stride &&
                                     ent[e].w == w,
                                 "axis %d plane %d element %d tap %d: entry "
                                 "%d is (%d, %g)", axis, k, d, hi, e,
                                 ent[e].j, (double)ent[e].w);
                    taps++;
                }
            }
            ck_assert_int_eq(start[0], 0);
            ck_assert_int_eq(start[m], taps);
            for (int rho = 0; rho < m; rho++)
                ck_assert_int_eq(start[rho] + next[rho], start[rho + 1]);
        }
    }
    tables_free(&t);
}
END_TEST

static void check_against_equations(int which, int flat_field,
                                    rtomo_sbdx_method method,
                                    rtomo_dtype dtype, uint64_t seed)
{
    scene s;
    scene_make(&s, which, flat_field);
    void *frame = sbdx_random_frame(&s.g, dtype, &seed);
    double *ref = reference_planes(&s.g, frame, dtype);
    emulation e = default_emulation();
    e.method = method;
    result r = run(&s.g, &e, frame, dtype);
    double err = plane_error(&s.g, r.planes, ref);
    /* float sums of a few hundred terms: ~1e-6 relative. */
    ck_assert_msg(err <= 2e-6, "scene %d flat_field %d method %d dtype %d: "
                  "max relative error %g", which, flat_field, (int)method,
                  (int)dtype, err);
    result_free(&r);
    free(ref);
    free(frame);
}

/* _i = 3 flat_field + scene, here and below. */
START_TEST(test_pixel_centric_matches_equations)
{
    int which = _i % 3, flat = _i / 3;
    rtomo_sbdx_method pc = RTOMO_SBDX_PIXEL_CENTRIC;
    check_against_equations(which, flat, pc, RTOMO_DTYPE_U8, 11 + _i);
    check_against_equations(which, flat, pc, RTOMO_DTYPE_U16, 21 + _i);
    check_against_equations(which, flat, pc, RTOMO_DTYPE_F32, 31 + _i);
}
END_TEST

START_TEST(test_detector_centric_matches_equations)
{
    int which = _i % 3, flat = _i / 3;
    rtomo_sbdx_method dc = RTOMO_SBDX_DETECTOR_CENTRIC;
    check_against_equations(which, flat, dc, RTOMO_DTYPE_U8, 41 + _i);
    check_against_equations(which, flat, dc, RTOMO_DTYPE_F32, 51 + _i);
}
END_TEST

/* The band split (multi-GPU), the staging fallbacks (one staged row, q
 * tiles) and plane rounds change nothing, bit for bit. */
START_TEST(test_splits_do_not_change_the_result)
{
    scene s;
    scene_make(&s, _i % 3, _i / 3);
    uint64_t seed = 61 + _i;
    void *frame = sbdx_random_frame(&s.g, RTOMO_DTYPE_U8, &seed);
    emulation e = default_emulation();
    result whole = run(&s.g, &e, frame, RTOMO_DTYPE_U8);

    emulation banded = e;
    banded.bands = 3;
    result r = run(&s.g, &banded, frame, RTOMO_DTYPE_U8);
    require_identical(&s.g, &whole, &r, "3 bands");
    result_free(&r);

    emulation tiled = e;
    int stride = sbdx_staged_stride(s.g.det_width);
    /* Room for a few holes only: forces 1 staged row and several q tiles. */
    int lo, hi;
    sbdx_offset_range(s.g.ratios, s.g.n_planes, s.g.det_width, &lo, &hi);
    int span = hi / s.g.shift_m - (int)floor((double)lo / s.g.shift_m);
    tiled.smem_limit = (int)sizeof(float) * stride * (span + 2);
    tiled.tune.max_group = 2;
    tiled.tune.xpass_threads = 96;
    tiled.tune.ypass_threads = 64;
    result t = run(&s.g, &tiled, frame, RTOMO_DTYPE_U8);
    require_identical(&s.g, &whole, &t, "tiled");
    result_free(&t);

    result_free(&whole);
    free(frame);
}
END_TEST

/* Local variance of plane k at (i, j) by the composite rule, by brute
 * force (NaN where plane k is no candidate). */
static double window_variance(const rtomo_sbdx_geometry *g,
                              const host_tables *t, const float *planes,
                              int k, int i, int j)
{
    return sbdx_rule_variance(planes + (size_t)k * pixels_of(g),
                              t->p.x.response + (size_t)k * g->out_width,
                              t->p.y.response + (size_t)k * g->out_height,
                              g->out_width, g->out_height, g->flat_field,
                              g->composite_radius, i, j);
}

/* The GPU's responses are the CPU's bit for bit (both sum exactly,
 * sbdx_lut.h), so the field of view and flat-fielding agree everywhere. */
START_TEST(test_responses_are_the_cpus)
{
    scene s;
    scene_make(&s, _i, 1);
    const rtomo_sbdx_geometry *g = &s.g;
    host_tables t;
    tables_build(&t, g);
    rtomo_error err;
    rtomo_sbdx_lut *lut = rtomo_sbdx_lut_create(g, &err);
    ck_assert_ptr_nonnull(lut);
    for (int k = 0; k < g->n_planes; k++) {
        ck_assert(memcmp(t.p.x.response + (size_t)k * g->out_width,
                         lut->x[k].response,
                         sizeof(float) * g->out_width) == 0);
        ck_assert(memcmp(t.p.y.response + (size_t)k * g->out_height,
                         lut->y[k].response,
                         sizeof(float) * g->out_height) == 0);
    }
    rtomo_sbdx_lut_destroy(lut);
    tables_free(&t);
}
END_TEST

/* A pixel whose response is 0.25 in exact arithmetic (0.4 x 0.625) but
 * 0.249999985 as the product of its float responses is in the field of
 * view on the GPU too: a uniform frame flat-fields to its value there
 * with both methods (as in tests/test_sbdx_composite.c on the CPU). */
START_TEST(test_threshold_pixel_is_in_view)
{
    rtomo_sbdx_geometry g;
    sbdx_threshold_geometry(&g);
    g.composite_radius = 2;
    size_t n = sbdx_frame_samples(&g);
    float *frame = malloc(sizeof(float) * n);
    ck_assert_ptr_nonnull(frame);
    for (size_t s = 0; s < n; s++)
        frame[s] = 100.0f;
    for (int method = 0; method < 2; method++) {
        emulation e = default_emulation();
        e.method = (rtomo_sbdx_method)method;
        result r = run(&g, &e, frame, RTOMO_DTYPE_F32);
        float v = r.planes[8 * 38 + 5];
        ck_assert_msg(fabs(v - 100.0) < 1e-3, "method %d: the pixel at the "
                      "threshold flat-fields to %.9g", method, (double)v);
        ck_assert_int_eq(r.depth[8 * 38 + 5], 0);
        result_free(&r);
    }
    free(frame);
}
END_TEST

/* The responses are what a frame of ones reconstructs to. */
START_TEST(test_responses_are_the_uniform_frame)
{
    scene s;
    scene_make(&s, _i, 0);
    const rtomo_sbdx_geometry *g = &s.g;
    size_t n = sbdx_frame_samples(g), np = pixels_of(g);
    float *ones = malloc(sizeof(float) * n);
    ck_assert_ptr_nonnull(ones);
    for (size_t i = 0; i < n; i++)
        ones[i] = 1.0f;
    double *ref = raw_reference_planes(g, ones, RTOMO_DTYPE_F32);
    host_tables t;
    tables_build(&t, g);
    for (int k = 0; k < g->n_planes; k++)
        for (int j = 0; j < g->out_height; j++)
            for (int i = 0; i < g->out_width; i++) {
                double r = (double)t.p.x.response[k * g->out_width + i] *
                           t.p.y.response[k * g->out_height + j];
                double want = ref[k * np + (size_t)j * g->out_width + i];
                SBDX_REQUIRE(fabs(r - want) <= 1e-6 * fmax(1.0, want),
                             "plane %d pixel (%d, %d): response %.9g, a "
                             "frame of ones gives %.9g", k, i, j, r, want);
            }
    tables_free(&t);
    free(ref);
    free(ones);
}
END_TEST

/* Depth is the candidate plane of largest local variance (the lowest on a
 * tie to rounding; RTOMO_SBDX_DEPTH_NONE, composite 0, without
 * candidates), composite its value. */
START_TEST(test_composite_rule)
{
    scene s;
    scene_make(&s, _i % 3, _i / 3);
    const rtomo_sbdx_geometry *g = &s.g;
    uint64_t seed = 71 + _i;
    void *frame = sbdx_random_frame(g, RTOMO_DTYPE_U8, &seed);
    emulation e = default_emulation();
    e.bands = 2;
    result r = run(g, &e, frame, RTOMO_DTYPE_U8);
    host_tables t;
    tables_build(&t, g);
    size_t n = pixels_of(g);
    int ties = 0;
    for (int j = 0; j < g->out_height; j++)
        for (int i = 0; i < g->out_width; i++) {
            size_t p = (size_t)j * g->out_width + i;
            int best = RTOMO_SBDX_DEPTH_NONE;
            double best_var = -INFINITY;
            for (int k = 0; k < g->n_planes; k++) {
                double v = window_variance(g, &t, r.planes, k, i, j);
                if (v > best_var)
                    best_var = v, best = k;
            }
            int d = r.depth[p];
            if (best == RTOMO_SBDX_DEPTH_NONE || d == RTOMO_SBDX_DEPTH_NONE) {
                SBDX_REQUIRE(d == best && r.composite[p] == 0.0f,
                             "pixel (%d, %d): depth %d, composite %g; the "
                             "rule says %d", i, j, d, (double)r.composite[p],
                             best);
                continue;
            }
            SBDX_REQUIRE(d >= 0 && d < g->n_planes, "depth %d at %zu", d, p);
            SBDX_REQUIRE(r.composite[p] == r.planes[d * n + p],
                         "composite at %zu is not plane %d's value", p, d);
            if (d != best) {
                double vd = window_variance(g, &t, r.planes, d, i, j);
                SBDX_REQUIRE(fabs(vd - best_var) <=
                                 1e-9 * fmax(1.0, best_var),
                             "pixel (%d, %d): depth %d (variance %.17g) but "
                             "plane %d has %.17g", i, j, d, vd, best,
                             best_var);
                ties++;
            }
        }
    /* Random frames leave no exact ties except where all planes are 0. */
    ck_assert_int_le(ties, (int)(n / 100));
    tables_free(&t);
    result_free(&r);
    free(frame);
}
END_TEST

START_TEST(test_u16_formula)
{
    scene s;
    scene_make(&s, 0, 1);
    const rtomo_sbdx_geometry *g = &s.g;
    size_t n = pixels_of(g);
    uint64_t seed = 81;
    float *planes = malloc(sizeof(float) * n * g->n_planes);
    uint16_t *out = malloc(sizeof(uint16_t) * n * g->n_planes);
    ck_assert(planes && out);
    for (size_t i = 0; i < n * g->n_planes; i++)
        planes[i] = (float)(rtomo_random_uniform(&seed) * 300.0 - 20.0);
    planes[3] = NAN;
    planes[4] = 1e30f;
    sbdx_u16_params p = {planes, g->n_planes, g->out_width, g->out_height,
                         0, g->out_height, 10.0f, 300.0f, out};
    sbdx_u16_run_on_host(&p);
    for (size_t i = 0; i < n * g->n_planes; i++) {
        float t = roundf((planes[i] - 10.0f) * 300.0f);
        uint16_t want = !(t > 0.0f) ? 0 : t >= 65535.0f ? 65535 : (uint16_t)t;
        SBDX_REQUIRE(out[i] == want, "value %g: code %u, want %u",
                     (double)planes[i], out[i], want);
    }
    ck_assert_int_eq(out[3], 0);
    ck_assert_int_eq(out[4], 65535);
    free(planes);
    free(out);
}
END_TEST

/* Bands cover the rows once, their halos stay in the image, and their hole
 * rows include every hole row that reaches an ext row. */
START_TEST(test_bands_cover_rows_and_holes)
{
    scene s;
    scene_make(&s, _i, 1);
    const rtomo_sbdx_geometry *g = &s.g;
    for (int count = 1; count <= 5; count++) {
        int next = 0;
        for (int b = 0; b < count; b++) {
            sbdx_band band;
            sbdx_band_of(g, b, count, &band);
            ck_assert_int_eq(band.own_first, next);
            next += band.own_rows;
            ck_assert_int_ge(band.ext_first, 0);
            ck_assert_int_le(band.ext_first + band.ext_rows, g->out_height);
            for (int cy = 0; cy < g->holes_y; cy++)
                for (int k = 0; k < g->n_planes; k++)
                    for (int dy = 0; dy < g->det_height; dy++) {
                        double Y = g->shift_m * cy +
                                   g->ratios[k] * (dy - (g->det_height - 1) / 2.0);
                        int row = (int)floor(Y) - g->origin_y;
                        int reaches = row + 1 >= band.ext_first &&
                                      row < band.ext_first + band.ext_rows;
                        SBDX_REQUIRE(!reaches ||
                                         (cy >= band.hole_first &&
                                          cy < band.hole_first +
                                                   band.hole_rows),
                                     "band %d/%d misses hole row %d", b,
                                     count, cy);
                    }
        }
        ck_assert_int_eq(next, g->out_height);
    }
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("cuda_sbdx_host");
    TCase *tc = tcase_create("kernels on the host");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_tables_are_the_transposed_taps, 0, 3);
    tcase_add_loop_test(tc, test_pixel_centric_matches_equations, 0, 6);
    tcase_add_loop_test(tc, test_detector_centric_matches_equations, 0, 6);
    tcase_add_loop_test(tc, test_splits_do_not_change_the_result, 0, 6);
    tcase_add_loop_test(tc, test_composite_rule, 0, 6);
    tcase_add_loop_test(tc, test_responses_are_the_uniform_frame, 0, 3);
    tcase_add_loop_test(tc, test_responses_are_the_cpus, 0, 3);
    tcase_add_test(tc, test_threshold_pixel_is_in_view);
    tcase_add_test(tc, test_u16_formula);
    tcase_add_loop_test(tc, test_bands_cover_rows_and_holes, 0, 3);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return rtomo_check_run(suite());
}
