/*
 * test_protocol_codec.c — the wire codec (protocol/): encode -> decode round
 * trips of every message type with random contents, every reject reason
 * produced by a crafted bad message (expected reason, and a message naming
 * the offending field), frames checked against their scan, slice
 * selections, published image headers and events, and fuzzing (random
 * bytes, truncated and mutated headers never crash).
 *
 * Headers in the tables are written with single quotes for readability;
 * quoted() turns them into JSON.
 */
#include "config.h"

#include <check.h>
#include <float.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rtomo_protocol.h"
#include "rtomo_sim.h"
#include "test_util.h"
#include "check_run.h"

/* ------------------------------------------------------------ helpers ---- */

/* s with every ' replaced by "; malloc'd. */
static char *quoted(const char *s)
{
    char *q = strdup(s);
    ck_assert_ptr_nonnull(q);
    for (char *p = q; *p; p++)
        if (*p == '\'')
            *p = '"';
    return q;
}

static int decode_text(const char *header, int parts, const void *payload,
                       size_t size, rtomo_ingest_msg *msg,
                       rtomo_reject_info *why)
{
    return rtomo_proto_decode_ingest(parts, header, strlen(header), payload,
                                     size, msg, why);
}

/* Decode text that must be valid; fails the test with the reject. */
static void decode_ok(const char *header, int parts, const void *payload,
                      size_t size, rtomo_ingest_msg *msg)
{
    rtomo_reject_info why;
    int r = decode_text(header, parts, payload, size, msg, &why);
    ck_assert_msg(r == 0, "valid message rejected (%s: %s): %s",
                  rtomo_reject_name(why.reason), why.message, header);
}

static void assert_close(double a, double b, double tol, const char *what,
                         int i)
{
    ck_assert_msg((isnan(a) && isnan(b)) || fabs(a - b) <= tol,
                  "%s[%d]: %.17g != %.17g (tolerance %g)", what, i, a, b, tol);
}

/* -------------------------------------------- random specs and checks ---- */

static void random_slices(uint64_t *s, int height, rtomo_slice_selection *sel)
{
    rtomo_slice_selection_clear(sel);
    switch (test_rand_int(s, 0, 2)) {
    case 0:
        break;
    case 1:
        sel->kind = RTOMO_SLICES_RANGE;
        sel->first = test_rand_int(s, 0, height - 1);
        sel->step = test_rand_int(s, 1, 3);
        sel->count =
            test_rand_int(s, 1, (height - 1 - sel->first) / sel->step + 1);
        break;
    default: {
        /* Distinct rows in random order: a partial Fisher-Yates shuffle. */
        int *all = malloc((size_t)height * sizeof *all);
        ck_assert_ptr_nonnull(all);
        for (int r = 0; r < height; r++)
            all[r] = r;
        sel->kind = RTOMO_SLICES_LIST;
        sel->n_rows = test_rand_int(s, 1, height < 20 ? height : 20);
        for (int i = 0; i < sel->n_rows; i++) {
            int j = test_rand_int(s, i, height - 1), t = all[i];
            all[i] = all[j];
            all[j] = t;
        }
        sel->rows = all;
    }
    }
}

/* reconstruction.method and its options, each given or not (a scan
 * with an iterative method is made a plain scan below). */
static void random_method(uint64_t *s, rtomo_scan_spec *spec)
{
    rtomo_method_settings *m = &spec->method;
    spec->given |= (unsigned)test_rand_int(s, 0, 63) * RTOMO_SPEC_HAS_METHOD;
    if (spec->given & RTOMO_SPEC_HAS_METHOD)
        m->method = (rtomo_method)test_rand_int(s, 0, RTOMO_METHOD_CGLS);
    if (spec->given & RTOMO_SPEC_HAS_ITERATIONS)
        m->iterations = test_rand_int(s, 1, RTOMO_MAX_ITERATIONS);
    if (spec->given & RTOMO_SPEC_HAS_PUBLISH_EVERY)
        m->publish_every = test_rand_int(s, 0, 100);
    if (spec->given & RTOMO_SPEC_HAS_TOLERANCE)
        m->tolerance = test_rand_real(s, 0, 0.5);
    if (spec->given & RTOMO_SPEC_HAS_NONNEGATIVE)
        m->nonnegative = m->method == RTOMO_METHOD_SIRT && test_rand_int(s, 0, 1);
    if (spec->given & RTOMO_SPEC_HAS_WARM_START)
        m->warm_start = test_rand_int(s, 0, 1);
}

static void random_reconstruction(uint64_t *s, rtomo_scan_spec *spec)
{
    rtomo_fbp_geometry *g = &spec->geometry;
    spec->given = (unsigned)test_rand_int(s, 0, 63);
    if (spec->given & RTOMO_SPEC_HAS_WINDOW)
        g->window = (rtomo_window)test_rand_int(s, 0, RTOMO_WINDOW_HANN);
    if (spec->given & RTOMO_SPEC_HAS_CUTOFF)
        g->cutoff = test_rand_real(s, 0.05, 1.0);
    if (spec->given & RTOMO_SPEC_HAS_INTERP)
        g->interp = (rtomo_interp)test_rand_int(s, 0, 1);
    if (test_rand_int(s, 0, 1)) {
        /* The circle only where the axis leaves it a radius of a bin
         * (else the geometry is refused, rightly). */
        double radius;
        spec->given |= RTOMO_SPEC_HAS_FOV;
        g->field_of_view = (rtomo_fov)test_rand_int(s, 0, 1);
        if (rtomo_fbp_fov_radius(g, &radius, NULL) != RTOMO_OK)
            g->field_of_view = RTOMO_FOV_FULL;
    }
    if (spec->given & RTOMO_SPEC_HAS_SLICES)
        random_slices(s, g->det_height, &spec->slices);
    if (spec->given & RTOMO_SPEC_HAS_SLICE_SIZE)
        g->slice_size = test_rand_int(s, 1, 2 * g->det_width);
    if (spec->given & RTOMO_SPEC_HAS_ROI) {
        int size = g->slice_size ? g->slice_size : g->det_width;
        g->roi_x = test_rand_int(s, 0, size - 1);
        g->roi_y = test_rand_int(s, 0, size - 1);
        g->roi_width = test_rand_int(s, 1, size - g->roi_x);
        g->roi_height = test_rand_int(s, 1, size - g->roi_y);
    }
    random_method(s, spec);
}

static double *random_list(uint64_t *s, int n, double lo, double hi)
{
    double *v = malloc((size_t)n * sizeof *v);
    ck_assert_ptr_nonnull(v);
    for (int i = 0; i < n; i++)
        v[i] = test_rand_real(s, lo, hi);
    return v;
}

static void random_scan_spec(uint64_t *s, rtomo_scan_spec *spec)
{
    rtomo_scan_spec_init(spec);
    rtomo_fbp_geometry *g = &spec->geometry;
    snprintf(spec->scan, sizeof spec->scan, "scan-%d.A_b:%d",
             test_rand_int(s, 0, 999), test_rand_int(s, 0, 9));
    g->det_width = test_rand_int(s, 2, 2048);
    g->det_height = test_rand_int(s, 1, 256);
    g->n_proj = test_rand_int(s, 1, 1000);
    if (test_rand_int(s, 0, 1)) {
        spec->angles = random_list(s, g->n_proj, -2 * M_PI, 2 * M_PI);
        g->angles = spec->angles;
    } else {
        g->angle_start = test_rand_real(s, -M_PI, M_PI);
        g->angle_step =
            test_rand_int(s, 0, 1) ? test_rand_real(s, 1e-4, 0.1) : 0.0;
    }
    if (test_rand_int(s, 0, 1))
        g->axis = test_rand_real(s, 0, g->det_width);
    if (test_rand_int(s, 0, 1)) {
        spec->axis_shift = random_list(s, g->n_proj, -2, 2);
        g->axis_shift = spec->axis_shift;
    }
    spec->dtype = (rtomo_dtype)test_rand_int(s, 0, 2);
    spec->n_darks = test_rand_int(s, 0, 20);
    spec->n_flats = test_rand_int(s, 0, 20);
    random_reconstruction(s, spec);
    spec->continuous = spec->method.method == RTOMO_METHOD_FBP &&
                       test_rand_int(s, 0, 1);
    if (spec->continuous)
        spec->window_every = test_rand_int(s, 1, 2 * g->n_proj);
}

static void assert_same_slices(const rtomo_slice_selection *a,
                               const rtomo_slice_selection *b)
{
    ck_assert_int_eq(a->kind, b->kind);
    if (a->kind == RTOMO_SLICES_RANGE) {
        ck_assert_int_eq(a->first, b->first);
        ck_assert_int_eq(a->count, b->count);
        ck_assert_int_eq(a->step, b->step);
    } else if (a->kind == RTOMO_SLICES_LIST) {
        ck_assert_int_eq(a->n_rows, b->n_rows);
        for (int i = 0; i < a->n_rows; i++)
            ck_assert_int_eq(a->rows[i], b->rows[i]);
    }
}

/* Every value a client can set survives the trip (angles to 1e-12 rad). */
static void assert_same_scan(const rtomo_scan_spec *want,
                             const rtomo_scan_spec *got)
{
    const rtomo_fbp_geometry *a = &want->geometry, *b = &got->geometry;
    ck_assert_str_eq(want->scan, got->scan);
    ck_assert_int_eq(a->det_width, b->det_width);
    ck_assert_int_eq(a->det_height, b->det_height);
    ck_assert_int_eq(a->n_proj, b->n_proj);
    ck_assert_int_eq(a->angles != NULL, b->angles != NULL);
    for (int p = 0; a->angles && p < a->n_proj; p++)
        assert_close(a->angles[p], b->angles[p], 1e-12, "angles", p);
    if (!a->angles) {
        double step = a->angle_step != 0.0 ? a->angle_step : M_PI / a->n_proj;
        assert_close(a->angle_start, b->angle_start, 1e-12, "angle_start", 0);
        assert_close(step, b->angle_step, 1e-12, "angle_step", 0);
    }
    assert_close(a->axis, b->axis, 1e-12, "axis", 0);
    ck_assert_int_eq(a->axis_shift != NULL, b->axis_shift != NULL);
    for (int p = 0; a->axis_shift && p < a->n_proj; p++)
        assert_close(a->axis_shift[p], b->axis_shift[p], 0, "axis_shift", p);
    ck_assert_ptr_eq(b->angles, got->angles);
    ck_assert_ptr_eq(b->axis_shift, got->axis_shift);
    ck_assert_int_eq(want->dtype, got->dtype);
    ck_assert_int_eq(want->n_darks, got->n_darks);
    ck_assert_int_eq(want->n_flats, got->n_flats);
    ck_assert_uint_eq(want->given, got->given);
    ck_assert_int_eq(a->window, b->window);
    ck_assert_int_eq(a->interp, b->interp);
    ck_assert_int_eq(a->field_of_view, b->field_of_view);
    assert_close(a->cutoff, b->cutoff, 0, "cutoff", 0);
    ck_assert_int_eq(a->slice_size, b->slice_size);
    ck_assert_int_eq(a->roi_x, b->roi_x);
    ck_assert_int_eq(a->roi_y, b->roi_y);
    ck_assert_int_eq(a->roi_width, b->roi_width);
    ck_assert_int_eq(a->roi_height, b->roi_height);
    assert_same_slices(&want->slices, &got->slices);
    ck_assert_int_eq(want->continuous, got->continuous);
    ck_assert_int_eq(want->window_every, got->window_every);
    const rtomo_method_settings *m = &want->method, *n = &got->method;
    ck_assert_int_eq(m->method, n->method);
    ck_assert_int_eq(m->iterations, n->iterations);
    ck_assert_int_eq(m->publish_every, n->publish_every);
    assert_close(m->tolerance, n->tolerance, 0, "tolerance", 0);
    ck_assert_int_eq(m->nonnegative, n->nonnegative);
    ck_assert_int_eq(m->warm_start, n->warm_start);
}

START_TEST(scan_begin_round_trip)
{
    uint64_t s = test_seed(1, _i);
    rtomo_scan_spec spec;
    random_scan_spec(&s, &spec);
    char *text = rtomo_proto_encode_scan_begin(&spec);
    ck_assert_ptr_nonnull(text);
    rtomo_ingest_msg msg;
    decode_ok(text, test_rand_int(&s, 1, 2), "", 0, &msg);
    ck_assert_int_eq(msg.type, RTOMO_MSG_SCAN_BEGIN);
    ck_assert_str_eq(msg.scan, spec.scan);
    ck_assert_ptr_nonnull(msg.scan_spec);
    ck_assert_ptr_null(msg.sbdx_spec);
    assert_same_scan(&spec, msg.scan_spec);
    rtomo_ingest_msg_clear(&msg);
    ck_assert_ptr_null(msg.scan_spec);
    free(text);
    rtomo_scan_spec_clear(&spec);
}
END_TEST

/* Defaults a minimal scan_begin gets, as PROTOCOL.md states them. */
START_TEST(scan_begin_defaults)
{
    char *text = quoted("{'protocol':1,'type':'scan_begin','scan':'d',"
                        "'detector':{'width':100,'height':3},"
                        "'projections':40,'future_field':{'x':[1,2]}}");
    rtomo_ingest_msg msg;
    decode_ok(text, 1, NULL, 0, &msg);
    const rtomo_scan_spec *spec = msg.scan_spec;
    ck_assert_ptr_null(spec->angles);
    ck_assert_double_eq_tol(spec->geometry.angle_start, 0.0, 1e-15);
    ck_assert_double_eq_tol(spec->geometry.angle_step, M_PI / 40, 1e-15);
    ck_assert(isnan(spec->geometry.axis));
    ck_assert_ptr_null(spec->axis_shift);
    ck_assert_int_eq(spec->dtype, RTOMO_DTYPE_U16);
    ck_assert_int_eq(spec->n_darks, 0);
    ck_assert_int_eq(spec->n_flats, 0);
    ck_assert_uint_eq(spec->given, 0);
    ck_assert_int_eq(spec->slices.kind, RTOMO_SLICES_ALL);
    ck_assert_int_eq(spec->continuous, 0);
    ck_assert_int_eq(spec->window_every, 0);
    rtomo_ingest_msg_clear(&msg);
    free(text);

    /* Continuous mode defaults to one reconstruction per window. */
    text = quoted("{'protocol':1,'type':'scan_begin','scan':'c',"
                  "'detector':{'width':16,'height':2},'projections':360,"
                  "'angle_step':0.5,'mode':'continuous'}");
    decode_ok(text, 2, NULL, 0, &msg);
    ck_assert_int_eq(msg.scan_spec->continuous, 1);
    ck_assert_int_eq(msg.scan_spec->window_every, 360);
    ck_assert_double_eq_tol(msg.scan_spec->geometry.angle_step,
                            0.5 * M_PI / 180, 1e-15);
    rtomo_ingest_msg_clear(&msg);
    free(text);
}
END_TEST

static void random_sbdx_spec(uint64_t *s, rtomo_sbdx_spec *spec)
{
    rtomo_sbdx_spec_init(spec);
    rtomo_sbdx_geometry *g = &spec->geometry;
    snprintf(spec->scan, sizeof spec->scan, "sbdx-%d",
             test_rand_int(s, 0, 99999));
    g->holes_x = test_rand_int(s, 1, 120);
    g->holes_y = test_rand_int(s, 1, 120);
    g->det_width = test_rand_int(s, 1, 200);
    g->det_height = test_rand_int(s, 1, 200);
    g->shift_m = test_rand_int(s, 1, 20);
    g->n_planes = test_rand_int(s, 1, 40);
    spec->ratios = random_list(s, g->n_planes, 0.1, 5.0);
    g->ratios = spec->ratios;
    if (test_rand_int(s, 0, 1)) {
        g->out_width = test_rand_int(s, 1, 3000);
        g->out_height = test_rand_int(s, 1, 3000);
    }
    if (test_rand_int(s, 0, 1)) {
        g->origin_x = test_rand_int(s, -100, 100);
        g->origin_y = test_rand_int(s, -100, 100);
    }
    g->composite_radius = test_rand_int(s, 1, 32);
    g->flat_field = test_rand_int(s, 0, 1);
    spec->dtype = (rtomo_dtype)test_rand_int(s, 0, 2);
    spec->planes = (rtomo_plane_format)test_rand_int(s, 0, 2);
    spec->u16_scale = (float)test_rand_real(s, 0.5, 1000);
    spec->u16_offset = (float)test_rand_real(s, -100, 100);
    spec->composite =
        spec->planes == RTOMO_PLANES_NONE || test_rand_int(s, 0, 1);
}

START_TEST(sbdx_begin_round_trip)
{
    uint64_t s = test_seed(2, _i);
    rtomo_sbdx_spec spec;
    random_sbdx_spec(&s, &spec);
    char *text = rtomo_proto_encode_sbdx_begin(&spec);
    ck_assert_ptr_nonnull(text);
    rtomo_ingest_msg msg;
    decode_ok(text, 1, NULL, 0, &msg);
    ck_assert_int_eq(msg.type, RTOMO_MSG_SBDX_BEGIN);
    const rtomo_sbdx_spec *got = msg.sbdx_spec;
    const rtomo_sbdx_geometry *a = &spec.geometry, *b = &got->geometry;
    ck_assert_str_eq(got->scan, spec.scan);
    ck_assert_int_eq(a->holes_x, b->holes_x);
    ck_assert_int_eq(a->holes_y, b->holes_y);
    ck_assert_int_eq(a->det_width, b->det_width);
    ck_assert_int_eq(a->det_height, b->det_height);
    ck_assert_int_eq(a->shift_m, b->shift_m);
    ck_assert_int_eq(a->n_planes, b->n_planes);
    ck_assert_ptr_eq(b->ratios, got->ratios);
    for (int k = 0; k < a->n_planes; k++)
        assert_close(a->ratios[k], b->ratios[k], 0, "ratios", k);
    ck_assert_int_eq(a->out_width, b->out_width);
    ck_assert_int_eq(a->out_height, b->out_height);
    ck_assert_int_eq(a->origin_x, b->origin_x);
    ck_assert_int_eq(a->origin_y, b->origin_y);
    ck_assert_int_eq(a->composite_radius, b->composite_radius);
    ck_assert_int_eq(a->flat_field, b->flat_field);
    ck_assert_int_eq(spec.dtype, got->dtype);
    ck_assert_int_eq(spec.planes, got->planes);
    ck_assert_float_eq(spec.u16_scale, got->u16_scale);
    ck_assert_float_eq(spec.u16_offset, got->u16_offset);
    ck_assert_int_eq(spec.composite, got->composite);
    rtomo_ingest_msg_clear(&msg);
    free(text);
    rtomo_sbdx_spec_clear(&spec);
}
END_TEST

/* The reference configuration's "ratio_range" expands to evenly spaced
 * ratios that hit both ends exactly, and defaults apply. */
START_TEST(sbdx_ratio_range)
{
    char *text = quoted("{'protocol':1,'type':'sbdx_begin','scan':'ref',"
                        "'holes':[100,100],'detector':{'width':160,"
                        "'height':80},'shift':10,'ratio_range':{'first':0.6,"
                        "'last':2.25,'count':32}}");
    rtomo_ingest_msg msg;
    decode_ok(text, 1, NULL, 0, &msg);
    const rtomo_sbdx_spec *spec = msg.sbdx_spec;
    ck_assert_int_eq(spec->geometry.n_planes, 32);
    ck_assert_double_eq(spec->ratios[0], 0.6);
    ck_assert_double_eq(spec->ratios[31], 2.25);
    for (int k = 1; k < 32; k++)
        ck_assert_double_eq_tol(spec->ratios[k] - spec->ratios[k - 1],
                                1.65 / 31, 1e-12);
    ck_assert_int_eq(spec->dtype, RTOMO_DTYPE_U8);
    ck_assert_int_eq(spec->planes, RTOMO_PLANES_FLOAT32);
    ck_assert_float_eq(spec->u16_scale, 257.0f);
    ck_assert_int_eq(spec->composite, 1);
    ck_assert_int_eq(spec->geometry.flat_field, 1);
    rtomo_ingest_msg_clear(&msg);
    free(text);
}
END_TEST

/* 256 ratios are the most (RTOMO_SBDX_MAX_PLANES): 257 are a bad_field
 * naming "ratios", as the spec says, not the engine's bad_geometry. */
START_TEST(sbdx_ratio_count_limit)
{
    for (int n = 256; n <= 257; n++) {
        char *text = malloc(8 * (size_t)n + 256);
        ck_assert_ptr_nonnull(text);
        int used = sprintf(text, "{\"protocol\":1,\"type\":\"sbdx_begin\","
                                 "\"scan\":\"x\",\"holes\":[4,4],"
                                 "\"detector\":{\"width\":4,\"height\":4},"
                                 "\"shift\":2,\"ratios\":[");
        for (int k = 0; k < n; k++)
            used += sprintf(text + used, "%s1.5", k ? "," : "");
        strcpy(text + used, "]}");
        rtomo_ingest_msg msg;
        rtomo_reject_info why;
        int r = decode_text(text, 1, NULL, 0, &msg, &why);
        if (n == 256) {
            ck_assert_msg(r == 0, "256 ratios refused: %s", why.message);
            rtomo_ingest_msg_clear(&msg);
        } else {
            ck_assert_int_eq(r, -1);
            ck_assert_msg(why.reason == RTOMO_REJECT_FIELD, "257 ratios: %s (%s)",
                          rtomo_reject_name(why.reason), why.message);
            ck_assert_ptr_nonnull(strstr(why.message, "\"ratios\""));
        }
        free(text);
    }
}
END_TEST

/* A ROI without "slice_size" lies in the grid of the daemon's configured
 * slice size, which the decoder does not know: the daemon judges it
 * (bad_geometry), the decoder lets it through. */
START_TEST(roi_against_the_configured_grid_is_the_daemons)
{
    char *text = quoted("{'protocol':1,'type':'scan_begin','scan':'s1',"
                        "'detector':{'width':64,'height':8},'projections':9,"
                        "'reconstruction':{'roi':[60,0,10,10]}}");
    rtomo_ingest_msg msg;
    decode_ok(text, 1, NULL, 0, &msg);
    ck_assert_int_eq(msg.scan_spec->geometry.roi_x, 60);
    rtomo_ingest_msg_clear(&msg);
    free(text);
}
END_TEST

/* The encoder refuses the u16 scalings the decoder refuses: a spec whose
 * float u16_scale is 0 or subnormal (what 1e-300 became before) or
 * infinite gives no header, and the check says which field. */
START_TEST(sbdx_encoder_refuses_what_the_decoder_refuses)
{
    const float scales[] = {0.0f, 1e-39f, -2.0f, INFINITY, NAN, 1e31f};
    for (size_t i = 0; i < sizeof scales / sizeof scales[0]; i++) {
        uint64_t s = test_seed(9, (int)i);
        rtomo_sbdx_spec spec;
        random_sbdx_spec(&s, &spec);
        spec.u16_scale = scales[i];
        ck_assert_msg(rtomo_proto_encode_sbdx_begin(&spec) == NULL,
                      "u16_scale %g was encoded", (double)scales[i]);
        rtomo_reject_info why;
        ck_assert_int_eq(rtomo_proto_check_sbdx_output(&spec, &why), -1);
        ck_assert_int_eq(why.reason, RTOMO_REJECT_FIELD);
        ck_assert_ptr_nonnull(strstr(why.message, "output.u16_scale"));
        rtomo_sbdx_spec_clear(&spec);
    }
    /* The smallest normal float is a valid scale, both ways. */
    uint64_t s = test_seed(9, 99);
    rtomo_sbdx_spec spec;
    random_sbdx_spec(&s, &spec);
    spec.u16_scale = FLT_MIN;
    char *text = rtomo_proto_encode_sbdx_begin(&spec);
    ck_assert_ptr_nonnull(text);
    rtomo_ingest_msg msg;
    decode_ok(text, 1, NULL, 0, &msg);
    ck_assert_float_eq(msg.sbdx_spec->u16_scale, FLT_MIN);
    rtomo_ingest_msg_clear(&msg);
    free(text);
    rtomo_sbdx_spec_clear(&spec);
}
END_TEST

/* Random payload of n samples of dtype; float32 samples are finite. */
static void *random_payload(uint64_t *s, rtomo_dtype dtype, size_t n)
{
    size_t bytes = n * rtomo_dtype_size(dtype);
    unsigned char *p = malloc(bytes ? bytes : 1);
    ck_assert_ptr_nonnull(p);
    for (size_t i = 0; i < n; i++) {
        if (dtype == RTOMO_DTYPE_F32) {
            float v = (float)rtomo_random_normal(s) * 1e3f;
            memcpy(p + 4 * i, &v, 4);
        } else {
            uint64_t v = rtomo_random_next(s);
            memcpy(p + i * rtomo_dtype_size(dtype), &v,
                   rtomo_dtype_size(dtype));
        }
    }
    return p;
}

/* Samples the payload holds: the shape, or the rows it carries. */
static size_t shape_samples(const rtomo_frame_header *f)
{
    size_t n = 1;
    for (int d = 0; d < f->ndim; d++)
        n *= (size_t)(d == 0 && f->rows_count ? f->rows_count : f->shape[d]);
    return n;
}

static void random_frame(uint64_t *s, rtomo_frame_header *f)
{
    static const rtomo_msg_type types[] = {
        RTOMO_MSG_DARK, RTOMO_MSG_FLAT, RTOMO_MSG_PROJECTION,
        RTOMO_MSG_SBDX_FRAME};
    memset(f, 0, sizeof *f);
    f->type = types[test_rand_int(s, 0, 3)];
    snprintf(f->scan, sizeof f->scan, "f%d", test_rand_int(s, 0, 1000));
    f->index = test_rand_int(s, 0, 1) ? test_rand_int(s, 0, 5000)
                                 : (int64_t)(rtomo_random_next(s) >> 2);
    f->dtype = (rtomo_dtype)test_rand_int(s, 0, 2);
    f->ndim = f->type == RTOMO_MSG_SBDX_FRAME ? 4 : 2;
    for (int d = 0; d < f->ndim; d++)
        f->shape[d] = test_rand_int(s, 1, f->ndim == 4 ? 6 : 40);
    f->angle = test_rand_int(s, 0, 1) ? test_rand_real(s, -720, 720) : NAN;
    /* A shift of at most the detector width, as the decoder demands. */
    f->axis_shift = test_rand_int(s, 0, 1)
                        ? test_rand_real(s, -1, 1) * (double)f->shape[1]
                        : NAN;
    /* Some tomography frames carry only some rows (a router's share). */
    if (f->ndim == 2 && test_rand_int(s, 0, 1)) {
        f->rows_first = test_rand_int(s, 0, (int)f->shape[0] - 1);
        f->rows_count = test_rand_int(s, 1, (int)(f->shape[0] - f->rows_first));
    }
}

START_TEST(frame_round_trip)
{
    uint64_t s = test_seed(3, _i);
    rtomo_frame_header f;
    random_frame(&s, &f);
    void *payload = random_payload(&s, f.dtype, shape_samples(&f));
    size_t size = shape_samples(&f) * rtomo_dtype_size(f.dtype);
    char *text = rtomo_proto_encode_frame(&f);
    ck_assert_ptr_nonnull(text);
    rtomo_ingest_msg msg;
    decode_ok(text, 2, payload, size, &msg);
    ck_assert_int_eq(msg.type, f.type);
    ck_assert_int_eq(msg.frame.type, f.type);
    ck_assert_str_eq(msg.frame.scan, f.scan);
    ck_assert_str_eq(msg.scan, f.scan);
    ck_assert(msg.frame.index == f.index);
    ck_assert_int_eq(msg.frame.dtype, f.dtype);
    ck_assert_int_eq(msg.frame.ndim, f.ndim);
    for (int d = 0; d < f.ndim; d++)
        ck_assert(msg.frame.shape[d] == f.shape[d]);
    ck_assert(msg.frame.rows_first == f.rows_first);
    ck_assert(msg.frame.rows_count == f.rows_count);
    /* angle and axis_shift belong to projections only */
    int proj = f.type == RTOMO_MSG_PROJECTION;
    assert_close(proj ? f.angle : NAN, msg.frame.angle, 0, "angle", 0);
    assert_close(proj ? f.axis_shift : NAN, msg.frame.axis_shift, 0,
                 "axis_shift", 0);
    ck_assert_ptr_eq(msg.payload, payload);
    ck_assert_uint_eq(msg.payload_size, size);
    rtomo_ingest_msg_clear(&msg);
    free(text);
    free(payload);
}
END_TEST

START_TEST(end_round_trip)
{
    const rtomo_msg_type types[] = {RTOMO_MSG_SCAN_END, RTOMO_MSG_SBDX_END};
    for (int t = 0; t < 2; t++) {
        char *text = rtomo_proto_encode_end(types[t], "the-scan");
        ck_assert_ptr_nonnull(text);
        rtomo_ingest_msg msg;
        decode_ok(text, 1, NULL, 0, &msg);
        ck_assert_int_eq(msg.type, types[t]);
        ck_assert_str_eq(msg.scan, "the-scan");
        decode_ok(text, 2, "", 0, &msg);
        ck_assert_int_eq(msg.type, types[t]);
        rtomo_reject_info why;
        ck_assert_int_eq(decode_text(text, 2, "x", 1, &msg, &why), -1);
        ck_assert_int_eq(why.reason, RTOMO_REJECT_SIZE);
        free(text);
    }
    ck_assert_ptr_null(rtomo_proto_encode_end(RTOMO_MSG_PROJECTION, "s"));
}
END_TEST

/* -------------------------------------------------------- reject table ---- */

typedef struct bad_case {
    const char *header;     /* single-quoted JSON */
    int parts;
    size_t payload;         /* bytes of zeros */
    rtomo_reject reason;
    const char *names;      /* must appear in the message */
} bad_case;

#define BEGIN_BASE "'protocol':1,'type':'scan_begin','scan':'s1'"
#define DET "'detector':{'width':64,'height':8}"
#define BEGIN(extra) "{" BEGIN_BASE "," DET ",'projections':90" extra "}"
#define SBDX(extra) "{'protocol':1,'type':'sbdx_begin','scan':'x'," \
    "'detector':{'width':16,'height':8}" extra "}"
#define SBDX_OK ",'holes':[10,10],'shift':4"
#define PROJ(extra) "{'protocol':1,'type':'projection','scan':'s1'" extra "}"
#define PROJ_OK ",'index':3,'dtype':'uint16','shape':[2,3]"
#define CONE(members) ",'beam':'cone','cone':{" members "}"
#define CONE_DIST "'source_to_axis':200,'source_to_detector':400"
#define CONE_OK "'beam':'cone','cone':{'source_to_axis':200," \
    "'source_to_detector':400,'pitch':[2,2],'volume':[32,32,32]}"

static const bad_case bad_cases[] = {
    /* envelope */
    {BEGIN(""), 0, 0, RTOMO_REJECT_PARTS, "parts"},
    {BEGIN(""), 3, 0, RTOMO_REJECT_PARTS, "parts"},
    {PROJ(PROJ_OK), 1, 0, RTOMO_REJECT_PARTS, "projection"},
    {"this is not json", 1, 0, RTOMO_REJECT_JSON, "JSON"},
    {"[1,2,3]", 1, 0, RTOMO_REJECT_JSON, "object"},
    {"", 1, 0, RTOMO_REJECT_JSON, "empty"},
    {"{'protocol':1,'protocol':1,'type':'scan_end','scan':'a'}", 1, 0,
     RTOMO_REJECT_JSON, "duplicate"},
    {"{'type':'scan_end','scan':'a'}", 1, 0, RTOMO_REJECT_VERSION, "protocol"},
    {"{'protocol':'1','type':'scan_end','scan':'a'}", 1, 0,
     RTOMO_REJECT_VERSION, "protocol"},
    {"{'protocol':2,'type':'scan_end','scan':'a'}", 1, 0, RTOMO_REJECT_VERSION,
     "protocol"},
    {"{'protocol':1,'scan':'a'}", 1, 0, RTOMO_REJECT_FIELD, "type"},
    {"{'protocol':1,'type':5,'scan':'a'}", 1, 0, RTOMO_REJECT_FIELD, "type"},
    {"{'protocol':1,'type':'frame','scan':'a'}", 1, 0, RTOMO_REJECT_TYPE,
     "frame"},
    {"{'protocol':1,'type':'scan_end'}", 1, 0, RTOMO_REJECT_FIELD, "scan"},
    {"{'protocol':1,'type':'scan_end','scan':'a b'}", 1, 0, RTOMO_REJECT_FIELD,
     "scan"},
    {"{'protocol':1,'type':'scan_end','scan':''}", 1, 0, RTOMO_REJECT_FIELD,
     "scan"},
    {"{'protocol':1,'type':'scan_end','scan':"
     "'0123456789012345678901234567890123456789012345678901234567890123'}",
     1, 0, RTOMO_REJECT_FIELD, "scan"},
    {"{'protocol':1,'type':'scan_end','scan':'a'}", 2, 4, RTOMO_REJECT_SIZE,
     "payload"},
    /* scan_begin */
    {"{" BEGIN_BASE ",'projections':90}", 1, 0, RTOMO_REJECT_FIELD,
     "detector"},
    {"{" BEGIN_BASE ",'detector':[64,8],'projections':9}", 1, 0,
     RTOMO_REJECT_FIELD, "detector"},
    {"{" BEGIN_BASE ",'detector':{'width':'64','height':8},'projections':9}",
     1, 0, RTOMO_REJECT_FIELD, "detector.width"},
    {"{" BEGIN_BASE ",'detector':{'width':1,'height':8},'projections':9}", 1,
     0, RTOMO_REJECT_FIELD, "detector.width"},
    {"{" BEGIN_BASE ",'detector':{'width':64,'height':-5},'projections':9}",
     1, 0, RTOMO_REJECT_FIELD, "detector.height"},
    {"{" BEGIN_BASE ",'detector':{'width':64},'projections':9}", 1, 0,
     RTOMO_REJECT_FIELD, "detector.height"},
    {"{" BEGIN_BASE ",'detector':{'width':99999999,'height':1},"
     "'projections':9}", 1, 0, RTOMO_REJECT_FIELD, "detector.width"},
    {"{" BEGIN_BASE "," DET "}", 1, 0, RTOMO_REJECT_FIELD, "projections"},
    {"{" BEGIN_BASE "," DET ",'projections':0}", 1, 0, RTOMO_REJECT_FIELD,
     "projections"},
    {"{" BEGIN_BASE "," DET ",'projections':2.5}", 1, 0, RTOMO_REJECT_FIELD,
     "projections"},
    {"{" BEGIN_BASE "," DET ",'projections':3,'angles':[0,1]}", 1, 0,
     RTOMO_REJECT_FIELD, "angles"},
    {"{" BEGIN_BASE "," DET ",'projections':3,'angles':[0,'1',2]}", 1, 0,
     RTOMO_REJECT_FIELD, "angles[1]"},
    {"{" BEGIN_BASE "," DET ",'projections':2,'angles':[0,1],"
     "'angle_start':0}", 1, 0, RTOMO_REJECT_FIELD, "angle_start"},
    {BEGIN(",'angle_step':'x'"), 1, 0, RTOMO_REJECT_FIELD, "angle_step"},
    {BEGIN(",'angle_start':[1]"), 1, 0, RTOMO_REJECT_FIELD, "angle_start"},
    {BEGIN(",'axis':'centre'"), 1, 0, RTOMO_REJECT_FIELD, "axis"},
    /* Ranges that depend on another field of the same message are
     * bad_field too (PROTOCOL.md 4); bad_geometry is the daemon's. */
    {BEGIN(",'axis':1000"), 1, 0, RTOMO_REJECT_FIELD, "axis"},
    {BEGIN(",'axis':-64.5"), 1, 0, RTOMO_REJECT_FIELD, "axis"},
    {"{" BEGIN_BASE "," DET ",'projections':2,'axis_shift':[0,1000]}", 1, 0,
     RTOMO_REJECT_FIELD, "axis_shift[1]"},
    {"{" BEGIN_BASE "," DET ",'projections':2,'axis_shift':[-64.01,0]}", 1,
     0, RTOMO_REJECT_FIELD, "axis_shift[0]"},
    {"{" BEGIN_BASE "," DET ",'projections':2,'axis_shift':[0]}", 1, 0,
     RTOMO_REJECT_FIELD, "axis_shift"},
    {BEGIN(",'dtype':'int32'"), 1, 0, RTOMO_REJECT_FIELD, "dtype"},
    {BEGIN(",'darks':-1"), 1, 0, RTOMO_REJECT_FIELD, "darks"},
    {BEGIN(",'flats':true"), 1, 0, RTOMO_REJECT_FIELD, "flats"},
    {BEGIN(",'reconstruction':5"), 1, 0, RTOMO_REJECT_FIELD, "reconstruction"},
    {BEGIN(",'reconstruction':{'filter':'gauss'}"), 1, 0, RTOMO_REJECT_FIELD,
     "reconstruction.filter"},
    {BEGIN(",'reconstruction':{'cutoff':1.5}"), 1, 0, RTOMO_REJECT_FIELD,
     "reconstruction.cutoff"},
    {BEGIN(",'reconstruction':{'cutoff':0}"), 1, 0, RTOMO_REJECT_FIELD,
     "reconstruction.cutoff"},
    {BEGIN(",'reconstruction':{'interpolation':'cubic'}"), 1, 0,
     RTOMO_REJECT_FIELD, "reconstruction.interpolation"},
    {BEGIN(",'reconstruction':{'field_of_view':'oval'}"), 1, 0,
     RTOMO_REJECT_FIELD, "reconstruction.field_of_view"},
    /* the circular field of view is a parallel beam's: refused by name */
    {BEGIN(",'reconstruction':{'field_of_view':'circle'}," CONE_OK), 1, 0,
     RTOMO_REJECT_FIELD, "reconstruction.field_of_view"},
    {SBDX(SBDX_OK ",'ratios':[1,2],'reconstruction':{'field_of_view':"
          "'circle'}"), 1, 0, RTOMO_REJECT_FIELD,
     "reconstruction.field_of_view"},
    {BEGIN(",'reconstruction':{'roi':[0,0,0,5]}"), 1, 0, RTOMO_REJECT_FIELD,
     "reconstruction.roi"},
    {BEGIN(",'reconstruction':{'roi':[0,0,5]}"), 1, 0, RTOMO_REJECT_FIELD,
     "reconstruction.roi"},
    {BEGIN(",'reconstruction':{'roi':[-1,0,5,5]}"), 1, 0, RTOMO_REJECT_FIELD,
     "reconstruction.roi[0]"},
    {BEGIN(",'reconstruction':{'roi':[60,0,10,10],'slice_size':64}"), 1, 0,
     RTOMO_REJECT_FIELD, "reconstruction.roi"},
    {BEGIN(",'reconstruction':{'roi':[0,0,100,100],'slice_size':64}"), 1, 0,
     RTOMO_REJECT_FIELD, "reconstruction.roi"},
    {BEGIN(",'reconstruction':{'slice_size':0}"), 1, 0, RTOMO_REJECT_FIELD,
     "reconstruction.slice_size"},
    {BEGIN(",'reconstruction':{'slices':'some'}"), 1, 0, RTOMO_REJECT_FIELD,
     "reconstruction.slices"},
    {BEGIN(",'reconstruction':{'slices':[]}"), 1, 0, RTOMO_REJECT_FIELD,
     "reconstruction.slices"},
    {BEGIN(",'reconstruction':{'slices':[1,1]}"), 1, 0, RTOMO_REJECT_FIELD,
     "reconstruction.slices"},
    {BEGIN(",'reconstruction':{'slices':[1,'2']}"), 1, 0, RTOMO_REJECT_FIELD,
     "reconstruction.slices[1]"},
    {BEGIN(",'reconstruction':{'slices':[1,-2]}"), 1, 0, RTOMO_REJECT_FIELD,
     "reconstruction.slices[1]"},
    {BEGIN(",'reconstruction':{'slices':{'first':0}}"), 1, 0,
     RTOMO_REJECT_FIELD, "reconstruction.slices.count"},
    {BEGIN(",'reconstruction':{'slices':{'first':0,'count':2,'step':0}}"), 1,
     0, RTOMO_REJECT_FIELD, "reconstruction.slices.step"},
    {BEGIN(",'reconstruction':{'slices':[3,100]}"), 1, 0,
     RTOMO_REJECT_FIELD, "reconstruction.slices[1]"},
    {BEGIN(",'reconstruction':{'slices':{'first':4,'count':3,'step':2}}"), 1,
     0, RTOMO_REJECT_FIELD, "reconstruction.slices"},
    {BEGIN(",'reconstruction':{'method':'art'}"), 1, 0, RTOMO_REJECT_FIELD,
     "reconstruction.method"},
    {BEGIN(",'reconstruction':{'method':'sirt','iterations':0}"), 1, 0,
     RTOMO_REJECT_FIELD, "reconstruction.iterations"},
    {BEGIN(",'reconstruction':{'iterations':10001}"), 1, 0,
     RTOMO_REJECT_FIELD, "reconstruction.iterations"},
    {BEGIN(",'reconstruction':{'publish_every':-1}"), 1, 0,
     RTOMO_REJECT_FIELD, "reconstruction.publish_every"},
    {BEGIN(",'reconstruction':{'tolerance':1}"), 1, 0, RTOMO_REJECT_FIELD,
     "reconstruction.tolerance"},
    {BEGIN(",'reconstruction':{'warm_start':1}"), 1, 0, RTOMO_REJECT_FIELD,
     "reconstruction.warm_start"},
    {BEGIN(",'reconstruction':{'method':'cgls','nonnegative':true}"), 1, 0,
     RTOMO_REJECT_FIELD, "reconstruction.nonnegative"},
    {BEGIN(",'reconstruction':{'method':'sirt'},'mode':'continuous'"), 1, 0,
     RTOMO_REJECT_FIELD, "reconstruction.method"},
    {BEGIN(",'reconstruction':{'method':'cgls','rings':'column_mean'}"), 1, 0,
     RTOMO_REJECT_FIELD, "ring removal"},
    {BEGIN(",'reconstruction':{'method':'sirt','phase':{'delta_beta':50}}"),
     1, 0, RTOMO_REJECT_FIELD, "phase retrieval"},
    {BEGIN(",'flats':2,'flats_after':1,'reconstruction':{'method':'sirt'}"),
     1, 0, RTOMO_REJECT_FIELD, "flats_after"},
    {BEGIN(",'mode':'burst'"), 1, 0, RTOMO_REJECT_FIELD, "mode"},
    {BEGIN(",'every':5"), 1, 0, RTOMO_REJECT_FIELD, "every"},
    {BEGIN(",'mode':'continuous','every':0"), 1, 0, RTOMO_REJECT_FIELD,
     "every"},
    {BEGIN(""), 2, 1, RTOMO_REJECT_SIZE, "payload"},
    /* sbdx_begin */
    {SBDX(",'holes':[0,5],'shift':4,'ratios':[1]"), 1, 0, RTOMO_REJECT_FIELD,
     "holes[0]"},
    {SBDX(",'holes':[5],'shift':4,'ratios':[1]"), 1, 0, RTOMO_REJECT_FIELD,
     "holes"},
    {SBDX(",'holes':[5,5],'ratios':[1]"), 1, 0, RTOMO_REJECT_FIELD, "shift"},
    {SBDX(",'holes':[5,5],'shift':0,'ratios':[1]"), 1, 0, RTOMO_REJECT_FIELD,
     "shift"},
    {SBDX(SBDX_OK), 1, 0, RTOMO_REJECT_FIELD, "ratios"},
    {SBDX(SBDX_OK ",'ratios':[]"), 1, 0, RTOMO_REJECT_FIELD, "ratios"},
    {SBDX(SBDX_OK ",'ratios':[1,-1]"), 1, 0, RTOMO_REJECT_FIELD,
     "ratios[1]"},
    {SBDX(SBDX_OK ",'ratios':[0]"), 1, 0, RTOMO_REJECT_FIELD, "ratios[0]"},
    {SBDX(SBDX_OK ",'ratios':[1,64,65]"), 1, 0, RTOMO_REJECT_FIELD,
     "ratios[2]"},
    {SBDX(SBDX_OK ",'ratio_range':{'first':0,'last':2,'count':3}"), 1, 0,
     RTOMO_REJECT_FIELD, "ratio_range.first"},
    {SBDX(SBDX_OK ",'ratio_range':{'first':1,'last':64.5,'count':3}"), 1, 0,
     RTOMO_REJECT_FIELD, "ratio_range.last"},
    {SBDX(",'holes':[4096,10],'shift':1024,'ratios':[1]"), 1, 0,
     RTOMO_REJECT_FIELD, "plane_size"},
    {SBDX(SBDX_OK ",'ratios':[1],'ratio_range':{'first':1,'last':2,"
          "'count':2}"), 1, 0, RTOMO_REJECT_FIELD, "ratio_range"},
    {SBDX(SBDX_OK ",'ratio_range':{'first':1,'last':2,'count':0}"), 1, 0,
     RTOMO_REJECT_FIELD, "ratio_range.count"},
    {SBDX(SBDX_OK ",'ratio_range':{'first':1,'count':3}"), 1, 0,
     RTOMO_REJECT_FIELD, "ratio_range.last"},
    {SBDX(SBDX_OK ",'ratios':[1],'plane_size':[0,10]"), 1, 0,
     RTOMO_REJECT_FIELD, "plane_size[0]"},
    {SBDX(SBDX_OK ",'ratios':[1],'origin':[1000000000,0]"), 1, 0,
     RTOMO_REJECT_FIELD, "origin[0]"},
    {SBDX(SBDX_OK ",'ratios':[1],'composite_radius':99"), 1, 0,
     RTOMO_REJECT_FIELD, "composite_radius"},
    {SBDX(SBDX_OK ",'ratios':[1],'flat_field':1"), 1, 0,
     RTOMO_REJECT_FIELD, "flat_field"},
    {SBDX(SBDX_OK ",'ratios':[1],'output':{'planes':'jpeg'}"), 1, 0,
     RTOMO_REJECT_FIELD, "output.planes"},
    {SBDX(SBDX_OK ",'ratios':[1],'output':{'planes':'none',"
          "'composite':false}"), 1, 0, RTOMO_REJECT_FIELD, "output"},
    {SBDX(SBDX_OK ",'ratios':[1],'output':{'u16_scale':0}"), 1, 0,
     RTOMO_REJECT_FIELD, "output.u16_scale"},
    /* Judged as the float it becomes: 0.0f and subnormals are refused. */
    {SBDX(SBDX_OK ",'ratios':[1],'output':{'u16_scale':1e-300}"), 1, 0,
     RTOMO_REJECT_FIELD, "output.u16_scale"},
    {SBDX(SBDX_OK ",'ratios':[1],'output':{'u16_scale':1e-39}"), 1, 0,
     RTOMO_REJECT_FIELD, "output.u16_scale"},
    {SBDX(SBDX_OK ",'ratios':[1],'output':{'u16_scale':1e31}"), 1, 0,
     RTOMO_REJECT_FIELD, "output.u16_scale"},
    {SBDX(SBDX_OK ",'ratios':[1],'output':{'u16_offset':-1e300}"), 1, 0,
     RTOMO_REJECT_FIELD, "output.u16_offset"},
    {SBDX(SBDX_OK ",'ratios':[1],'output':{'composite':1}"), 1, 0,
     RTOMO_REJECT_FIELD, "output.composite"},
    {SBDX(SBDX_OK ",'ratios':[1],'dtype':'uint32'"), 1, 0, RTOMO_REJECT_FIELD,
     "dtype"},
    /* frames */
    {PROJ(",'dtype':'uint16','shape':[2,3]"), 2, 12, RTOMO_REJECT_FIELD,
     "index"},
    {PROJ(",'index':'3','dtype':'uint16','shape':[2,3]"), 2, 12,
     RTOMO_REJECT_FIELD, "index"},
    {PROJ(",'index':-1,'dtype':'uint16','shape':[2,3]"), 2, 12,
     RTOMO_REJECT_INDEX, "index"},
    {PROJ(",'index':3,'shape':[2,3]"), 2, 12, RTOMO_REJECT_FIELD, "dtype"},
    {PROJ(",'index':3,'dtype':'uint16'"), 2, 12, RTOMO_REJECT_FIELD, "shape"},
    {PROJ(",'index':3,'dtype':'uint16','shape':[2,3,1]"), 2, 12,
     RTOMO_REJECT_FIELD, "shape"},
    {PROJ(",'index':3,'dtype':'uint16','shape':6"), 2, 12, RTOMO_REJECT_FIELD,
     "shape"},
    {PROJ(",'index':3,'dtype':'uint16','shape':[0,3]"), 2, 0,
     RTOMO_REJECT_FIELD, "shape[0]"},
    {PROJ(",'index':3,'dtype':'uint16','shape':[2,-3]"), 2, 12,
     RTOMO_REJECT_FIELD, "shape[1]"},
    {PROJ(",'index':3,'dtype':'uint16','shape':[1000000,1000000]"), 2, 12,
     RTOMO_REJECT_FIELD, "shape[0]"},
    {PROJ(PROJ_OK ",'angle':'x'"), 2, 12, RTOMO_REJECT_FIELD, "angle"},
    {PROJ(PROJ_OK ",'axis_shift':true"), 2, 12, RTOMO_REJECT_FIELD,
     "axis_shift"},
    /* At most the detector width (shape[1] = 3), as in scan_begin and
     * as the engine takes it. */
    {PROJ(PROJ_OK ",'axis_shift':3.5"), 2, 12, RTOMO_REJECT_FIELD,
     "axis_shift"},
    {PROJ(PROJ_OK ",'axis_shift':-1000"), 2, 12, RTOMO_REJECT_FIELD,
     "[-3, 3]"},
    {PROJ(PROJ_OK), 2, 11, RTOMO_REJECT_SIZE, "shape"},
    /* "rows": the payload holds those rows only (a router's share) */
    {PROJ(PROJ_OK ",'rows':{'first':1,'count':1}"), 2, 12, RTOMO_REJECT_SIZE,
     "the 1 \"rows\""},
    {PROJ(PROJ_OK ",'rows':{'first':2,'count':1}"), 2, 6, RTOMO_REJECT_FIELD,
     "rows.first"},
    {PROJ(PROJ_OK ",'rows':{'first':1,'count':2}"), 2, 6, RTOMO_REJECT_FIELD,
     "rows.count"},
    {PROJ(PROJ_OK ",'rows':{'first':0,'count':0}"), 2, 0, RTOMO_REJECT_FIELD,
     "rows.count"},
    {PROJ(PROJ_OK ",'rows':{'count':1}"), 2, 6, RTOMO_REJECT_FIELD,
     "rows.first"},
    {PROJ(PROJ_OK ",'rows':[0,1]"), 2, 6, RTOMO_REJECT_FIELD, "rows"},
    {PROJ(PROJ_OK), 2, 0, RTOMO_REJECT_SIZE, "payload"},
    {"{'protocol':1,'type':'dark','scan':'s1','index':0,'dtype':'float32',"
     "'shape':[2,3]}", 2, 12, RTOMO_REJECT_SIZE, "float32"},
    {"{'protocol':1,'type':'sbdx_frame','scan':'x','index':0,"
     "'dtype':'uint8','shape':[2,3]}", 2, 6, RTOMO_REJECT_FIELD, "shape"},
    {"{'protocol':1,'type':'sbdx_frame','scan':'x','index':0,"
     "'dtype':'uint8','shape':[2,3,4,5]}", 2, 119, RTOMO_REJECT_SIZE,
     "[2, 3, 4, 5]"},
    /* cone-beam scan_begin (PROTOCOL.md 3.13); CONE_OK alone is valid */
    {BEGIN(",'beam':'fan'"), 1, 0, RTOMO_REJECT_FIELD, "beam"},
    {BEGIN(",'beam':'cone'"), 1, 0, RTOMO_REJECT_FIELD, "cone"},
    {BEGIN(",'cone':{'source_to_axis':200}"), 1, 0, RTOMO_REJECT_FIELD,
     "\"beam\": \"cone\""},
    {BEGIN(CONE("'source_to_axis':200,'source_to_detector':150,"
                "'pitch':[2,2],'volume':[32,32,32]")), 1, 0,
     RTOMO_REJECT_FIELD, "cone.source_to_detector"},
    {BEGIN(CONE("'source_to_axis':-1,'source_to_detector':150,"
                "'pitch':[2,2],'volume':[32,32,32]")), 1, 0,
     RTOMO_REJECT_FIELD, "cone.source_to_axis"},
    {BEGIN(CONE(CONE_DIST ",'volume':[32,32,32]")), 1, 0,
     RTOMO_REJECT_FIELD, "cone.pitch"},
    {BEGIN(CONE(CONE_DIST ",'pitch':[2,0],'volume':[32,32,32]")), 1, 0,
     RTOMO_REJECT_FIELD, "cone.pitch[1]"},
    {BEGIN(CONE(CONE_DIST ",'pitch':[2,2],'volume':[32,0,32]")), 1, 0,
     RTOMO_REJECT_FIELD, "cone.volume"},
    {BEGIN(CONE(CONE_DIST ",'pitch':[2,2],'volume':[32,32]")), 1, 0,
     RTOMO_REJECT_FIELD, "cone.volume"},
    {BEGIN(CONE(CONE_DIST ",'pitch':[2,2],'volume':[32,32,32],"
                "'voxel':0")), 1, 0, RTOMO_REJECT_FIELD, "cone.voxel"},
    {BEGIN(CONE(CONE_DIST ",'pitch':[2,2],'volume':[32,32,32],"
                "'offset':[1,'x']")), 1, 0, RTOMO_REJECT_FIELD,
     "cone.offset[1]"},
    {BEGIN(CONE(CONE_DIST ",'pitch':[2,2],'volume':[32,32,32],"
                "'roi':[0,0,20,32,32,13]")), 1, 0, RTOMO_REJECT_FIELD,
     "cone.roi"},
    {BEGIN(",'axis':31.5," CONE_OK), 1, 0, RTOMO_REJECT_FIELD, "\"axis\""},
    {BEGIN(",'half_acquisition':true," CONE_OK), 1, 0, RTOMO_REJECT_FIELD,
     "half_acquisition"},
    {BEGIN(",'mode':'continuous'," CONE_OK), 1, 0, RTOMO_REJECT_FIELD,
     "mode"},
    {BEGIN(",'reconstruction':{'slices':[1,2]}," CONE_OK), 1, 0,
     RTOMO_REJECT_FIELD, "reconstruction.slices"},
    {BEGIN(",'reconstruction':{'method':'cgls','nonnegative':true}," CONE_OK),
     1, 0, RTOMO_REJECT_FIELD, "reconstruction.nonnegative"},
    /* set-ups the engine's validator refuses: its reason, as bad_geometry */
    {BEGIN(",'angle_step':2," CONE_OK), 1, 0, RTOMO_REJECT_GEOMETRY,
     "short scan"},
    {BEGIN(",'angle_step':3" CONE(CONE_DIST ",'pitch':[2,2],"
           "'volume':[32,32,32],'offset':[20,0]")), 1, 0,
     RTOMO_REJECT_GEOMETRY, "offset detector"},
    {BEGIN(CONE(CONE_DIST ",'pitch':[2,2],'volume':[200,200,32],"
                "'roi':[0,0,0,10,10,32]")), 1, 0, RTOMO_REJECT_GEOMETRY,
     "field of view"},
    {BEGIN(CONE(CONE_DIST ",'pitch':[2,2],'volume':[32,32,32],"
                "'offset':[80,0]")), 1, 0, RTOMO_REJECT_GEOMETRY,
     "never seen"},
};

START_TEST(reject_reasons)
{
    const bad_case *c = &bad_cases[_i];
    char *header = quoted(c->header);
    void *payload = calloc(1, c->payload + 1);
    rtomo_ingest_msg msg;
    rtomo_reject_info why;
    int r = decode_text(header, c->parts, payload, c->payload, &msg, &why);
    ck_assert_msg(r == -1, "accepted: %s", header);
    ck_assert_msg(why.reason == c->reason, "%s: got %s (%s), expected %s",
                  header, rtomo_reject_name(why.reason), why.message,
                  rtomo_reject_name(c->reason));
    ck_assert_msg(strstr(why.message, c->names) != NULL,
                  "message \"%s\" does not name \"%s\"", why.message,
                  c->names);
    ck_assert_ptr_null(msg.scan_spec);
    ck_assert_ptr_null(msg.sbdx_spec);
    free(payload);
    free(header);
}
END_TEST

START_TEST(oversize_header)
{
    size_t n = RTOMO_HEADER_MAX + 1;
    char *big = malloc(n);
    memset(big, ' ', n);
    memcpy(big, "{\"protocol\":1", 13);
    big[n - 1] = '}';
    rtomo_ingest_msg msg;
    rtomo_reject_info why;
    ck_assert_int_eq(rtomo_proto_decode_ingest(1, big, n, NULL, 0, &msg, &why),
                     -1);
    ck_assert_int_eq(why.reason, RTOMO_REJECT_OVERSIZE);
    ck_assert_ptr_nonnull(strstr(why.message, "header"));
    free(big);
}
END_TEST

/* A NaN or infinity anywhere in a float32 frame is found and located. */
START_TEST(non_finite_payload)
{
    uint64_t s = test_seed(4, _i);
    rtomo_frame_header f;
    random_frame(&s, &f);
    f.dtype = RTOMO_DTYPE_F32;
    size_t n = shape_samples(&f);
    /* Misalign the payload on purpose: wire data need not be aligned. */
    unsigned char *samples = random_payload(&s, f.dtype, n);
    unsigned char *buf = malloc(4 * n + 1), *payload = buf + 1;
    ck_assert_ptr_nonnull(buf);
    memcpy(payload, samples, 4 * n);
    free(samples);
    size_t bad = (size_t)test_rand_int(&s, 0, (int)n - 1);
    const float specials[] = {NAN, INFINITY, -INFINITY};
    float v = specials[test_rand_int(&s, 0, 2)];
    memcpy(payload + 4 * bad, &v, 4);
    char *text = rtomo_proto_encode_frame(&f);
    rtomo_ingest_msg msg;
    rtomo_reject_info why;
    ck_assert_int_eq(decode_text(text, 2, payload, 4 * n, &msg, &why), -1);
    ck_assert_int_eq(why.reason, RTOMO_REJECT_NONFINITE);
    char where[48];
    snprintf(where, sizeof where, "sample %zu ", bad);
    ck_assert_msg(strstr(why.message, where), "\"%s\" lacks \"%s\"",
                  why.message, where);
    /* Restoring a finite value makes the same frame acceptable. */
    v = 1.0f;
    memcpy(payload + 4 * bad, &v, 4);
    decode_ok(text, 2, payload, 4 * n, &msg);
    rtomo_ingest_msg_clear(&msg);
    free(text);
    free(buf);
}
END_TEST

/* ----------------------------------------- frames against their scan ---- */

static rtomo_ingest_msg decode_scan(const char *single_quoted)
{
    char *text = quoted(single_quoted);
    rtomo_ingest_msg msg;
    decode_ok(text, 1, NULL, 0, &msg);
    free(text);
    return msg;
}

static rtomo_frame_header frame_of(rtomo_msg_type type, const char *scan,
                                   int64_t index, rtomo_dtype dtype,
                                   int64_t h, int64_t w)
{
    rtomo_frame_header f = {.type = type, .index = index, .dtype = dtype,
                            .ndim = 2, .shape = {h, w}, .angle = NAN,
                            .axis_shift = NAN};
    snprintf(f.scan, sizeof f.scan, "%s", scan);
    return f;
}

static void expect_check(int r, const rtomo_reject_info *why,
                         rtomo_reject reason, const char *names)
{
    if (reason == RTOMO_REJECT_NONE) {
        ck_assert_msg(r == 0, "rejected: %s", why->message);
        return;
    }
    ck_assert_int_eq(r, -1);
    ck_assert_msg(why->reason == reason, "got %s (%s), expected %s",
                  rtomo_reject_name(why->reason), why->message,
                  rtomo_reject_name(reason));
    ck_assert_msg(strstr(why->message, names), "\"%s\" lacks \"%s\"",
                  why->message, names);
}

START_TEST(tomo_frame_checks)
{
    rtomo_ingest_msg begin = decode_scan(
        "{'protocol':1,'type':'scan_begin','scan':'t','detector':{'width':6,"
        "'height':4},'projections':10,'darks':2}");
    const rtomo_scan_spec *scan = begin.scan_spec;
    const rtomo_msg_type P = RTOMO_MSG_PROJECTION, D = RTOMO_MSG_DARK,
                         F = RTOMO_MSG_FLAT;
    const rtomo_dtype U16 = RTOMO_DTYPE_U16;
    struct {
        rtomo_frame_header f;
        rtomo_reject reason;
        const char *names;
    } cases[] = {
        {frame_of(P, "t", 0, U16, 4, 6), RTOMO_REJECT_NONE, ""},
        {frame_of(P, "t", 9, U16, 4, 6), RTOMO_REJECT_NONE, ""},
        {frame_of(D, "t", 1, U16, 4, 6), RTOMO_REJECT_NONE, ""},
        {frame_of(F, "t", 500, U16, 4, 6), RTOMO_REJECT_NONE, ""},
        {frame_of(P, "u", 0, U16, 4, 6), RTOMO_REJECT_UNKNOWN_SCAN, "\"u\""},
        {frame_of(P, "t", 0, RTOMO_DTYPE_U8, 4, 6), RTOMO_REJECT_DTYPE,
         "dtype"},
        {frame_of(P, "t", 0, U16, 6, 4), RTOMO_REJECT_SHAPE, "shape"},
        {frame_of(P, "t", 10, U16, 4, 6), RTOMO_REJECT_INDEX, "index"},
        {frame_of(P, "t", -1, U16, 4, 6), RTOMO_REJECT_INDEX, "index"},
        {frame_of(D, "t", 2, U16, 4, 6), RTOMO_REJECT_INDEX, "index"},
        {frame_of(RTOMO_MSG_SBDX_FRAME, "t", 0, U16, 4, 6), RTOMO_REJECT_STATE,
         "sbdx_frame"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rtomo_reject_info why;
        int r = rtomo_proto_check_tomo_frame(&cases[i].f, scan, &why);
        expect_check(r, &why, cases[i].reason, cases[i].names);
    }
    /* A projection's axis_shift: the engine's range, |shift| <= width. */
    const struct {
        double shift;
        rtomo_reject reason;
    } shifts[] = {{6.0, RTOMO_REJECT_NONE}, {-6.0, RTOMO_REJECT_NONE},
                  {6.001, RTOMO_REJECT_FIELD}, {-1000.0, RTOMO_REJECT_FIELD},
                  {INFINITY, RTOMO_REJECT_FIELD}};
    for (size_t i = 0; i < sizeof shifts / sizeof shifts[0]; i++) {
        rtomo_frame_header f = frame_of(P, "t", 0, U16, 4, 6);
        f.axis_shift = shifts[i].shift;
        rtomo_reject_info why;
        int r = rtomo_proto_check_tomo_frame(&f, scan, &why);
        expect_check(r, &why, shifts[i].reason, "axis_shift");
    }
    rtomo_ingest_msg_clear(&begin);

    /* Continuous mode: projection indices grow without bound. */
    begin = decode_scan("{'protocol':1,'type':'scan_begin','scan':'c',"
                        "'detector':{'width':6,'height':4},'projections':10,"
                        "'mode':'continuous','every':5}");
    rtomo_frame_header f = frame_of(P, "c", 1000000000007LL, U16, 4, 6);
    rtomo_reject_info why;
    expect_check(rtomo_proto_check_tomo_frame(&f, begin.scan_spec, &why), &why,
                 RTOMO_REJECT_NONE, "");
    rtomo_ingest_msg_clear(&begin);
}
END_TEST

START_TEST(sbdx_frame_checks)
{
    rtomo_ingest_msg begin = decode_scan(
        "{'protocol':1,'type':'sbdx_begin','scan':'x','holes':[5,3],"
        "'detector':{'width':8,'height':4},'shift':2,'ratios':[1,1.5]}");
    rtomo_frame_header f = {.type = RTOMO_MSG_SBDX_FRAME, .scan = "x",
                            .index = 7, .dtype = RTOMO_DTYPE_U8, .ndim = 4,
                            .shape = {3, 5, 4, 8}};
    rtomo_reject_info why;
    expect_check(rtomo_proto_check_sbdx_frame(&f, begin.sbdx_spec, &why), &why,
                 RTOMO_REJECT_NONE, "");
    f.shape[0] = 5;
    f.shape[1] = 3;
    expect_check(rtomo_proto_check_sbdx_frame(&f, begin.sbdx_spec, &why), &why,
                 RTOMO_REJECT_SHAPE, "holes_y, holes_x");
    f.shape[0] = 3;
    f.shape[1] = 5;
    f.dtype = RTOMO_DTYPE_U16;
    expect_check(rtomo_proto_check_sbdx_frame(&f, begin.sbdx_spec, &why), &why,
                 RTOMO_REJECT_DTYPE, "uint16");
    f.dtype = RTOMO_DTYPE_U8;
    snprintf(f.scan, sizeof f.scan, "y");
    expect_check(rtomo_proto_check_sbdx_frame(&f, begin.sbdx_spec, &why), &why,
                 RTOMO_REJECT_UNKNOWN_SCAN, "\"y\"");
    rtomo_frame_header p = frame_of(RTOMO_MSG_PROJECTION, "x", 0,
                                    RTOMO_DTYPE_U8, 4, 8);
    expect_check(rtomo_proto_check_sbdx_frame(&p, begin.sbdx_spec, &why), &why,
                 RTOMO_REJECT_STATE, "projection");
    rtomo_ingest_msg_clear(&begin);
}
END_TEST

/* ------------------------------------------------------------- slices ---- */

static void expect_rows(const rtomo_slice_selection *sel, int height,
                        const int *want, int n)
{
    int *rows, n_rows;
    rtomo_reject_info why;
    ck_assert_msg(rtomo_slice_selection_expand(sel, height, &rows, &n_rows,
                                               &why) == 0, "%s", why.message);
    ck_assert_int_eq(n_rows, n);
    for (int i = 0; i < n; i++)
        ck_assert_int_eq(rows[i], want[i]);
    free(rows);
}

static void expect_expand_error(const rtomo_slice_selection *sel, int height,
                                rtomo_reject reason, const char *names)
{
    int *rows = (int *)1, n_rows = -1;
    rtomo_reject_info why;
    ck_assert_int_eq(rtomo_slice_selection_expand(sel, height, &rows, &n_rows,
                                                  &why), -1);
    ck_assert_ptr_null(rows);
    ck_assert_int_eq(n_rows, 0);
    expect_check(-1, &why, reason, names);
}

START_TEST(slice_expansion)
{
    rtomo_slice_selection all = {.kind = RTOMO_SLICES_ALL};
    expect_rows(&all, 4, (int[]){0, 1, 2, 3}, 4);
    rtomo_slice_selection range = {.kind = RTOMO_SLICES_RANGE, .first = 1,
                                   .count = 3, .step = 3};
    expect_rows(&range, 8, (int[]){1, 4, 7}, 3);
    expect_expand_error(&range, 7, RTOMO_REJECT_GEOMETRY, "row 7");
    range.step = 0;
    expect_expand_error(&range, 8, RTOMO_REJECT_FIELD, "step");
    range.step = 1;
    range.count = 0;
    expect_expand_error(&range, 8, RTOMO_REJECT_FIELD, "count");
    int list_rows[] = {5, 0, 2};
    rtomo_slice_selection list = {.kind = RTOMO_SLICES_LIST,
                                  .rows = list_rows, .n_rows = 3};
    expect_rows(&list, 6, list_rows, 3);
    expect_expand_error(&list, 5, RTOMO_REJECT_GEOMETRY, "slices[0] = 5");
    list_rows[2] = 5;
    expect_expand_error(&list, 6, RTOMO_REJECT_FIELD, "repeats row 5");
    list.n_rows = 0;
    expect_expand_error(&list, 6, RTOMO_REJECT_FIELD, "empty");
    expect_expand_error(&all, 0, RTOMO_REJECT_GEOMETRY, "0 rows");
}
END_TEST

/* from_json(to_json(sel)) == sel, copies are deep, errors keep *sel. */
START_TEST(slice_json_round_trip)
{
    uint64_t s = test_seed(5, _i);
    int height = test_rand_int(&s, 1, 500);
    rtomo_slice_selection sel = {0}, back = {0}, copy = {0};
    random_slices(&s, height, &sel);
    json_t *j = rtomo_slice_selection_to_json(&sel);
    ck_assert_ptr_nonnull(j);
    rtomo_reject_info why;
    ck_assert_int_eq(rtomo_slice_selection_from_json(j, "x", &back, &why), 0);
    assert_same_slices(&sel, &back);
    ck_assert_int_eq(rtomo_slice_selection_copy(&copy, &sel), 0);
    assert_same_slices(&sel, &copy);
    if (sel.kind == RTOMO_SLICES_LIST)
        ck_assert_ptr_ne(copy.rows, sel.rows);
    json_t *bad = json_pack("{s:i}", "first", 1);
    ck_assert_int_eq(rtomo_slice_selection_from_json(bad, "cfg.slices", &back,
                                                     &why), -1);
    ck_assert_ptr_nonnull(strstr(why.message, "cfg.slices.count"));
    assert_same_slices(&sel, &back);
    json_decref(bad);
    json_decref(j);
    rtomo_slice_selection_clear(&sel);
    rtomo_slice_selection_clear(&back);
    rtomo_slice_selection_clear(&copy);
    ck_assert_int_eq(copy.kind, RTOMO_SLICES_ALL);
    ck_assert_ptr_null(copy.rows);
}
END_TEST

/* -------------------------------------------------- published headers ---- */

static void random_image_header(uint64_t *s, rtomo_image_header *h)
{
    static const char *const topics[] = {"slice", "plane", "composite",
                                         "depth"};
    rtomo_image_header_init(h);
    snprintf(h->topic, sizeof h->topic, "%s", topics[test_rand_int(s, 0, 3)]);
    snprintf(h->scan, sizeof h->scan, "img%d", test_rand_int(s, 0, 99));
    h->frame = test_rand_int(s, -1, 100000);
    h->count = test_rand_int(s, 1, 64);
    h->index = test_rand_int(s, 0, h->count - 1);
    h->slice = test_rand_int(s, -1, 2000);
    h->plane = test_rand_int(s, -1, 31);
    h->ratio = test_rand_int(s, 0, 1) ? test_rand_real(s, 0.5, 3) : NAN;
    h->width = test_rand_int(s, 1, 300);
    h->height = test_rand_int(s, 1, 300);
    for (int i = 0; i < 4; i++)
        h->roi[i] = test_rand_int(s, 0, 300);
    h->dtype = test_rand_int(s, 0, 1) ? RTOMO_DTYPE_F32 : RTOMO_DTYPE_U16;
    h->u16_scale = (float)test_rand_real(s, 1, 300);
    h->u16_offset = (float)test_rand_real(s, -5, 5);
    h->min = test_rand_real(s, -1, 0);
    h->max = test_rand_real(s, 0, 1);
    h->mean = test_rand_int(s, 0, 1) ? test_rand_real(s, -1, 1) : NAN;
    h->angle_first = test_rand_int(s, 0, 1) ? test_rand_real(s, 0, 360) : NAN;
    h->angle_last = test_rand_real(s, 0, 360);
    h->latency_ms = test_rand_real(s, 0, 50);
    h->compute_ms = test_rand_real(s, 0, 50);
    if (test_rand_int(s, 0, 1)) {
        rtomo_method m = (rtomo_method)test_rand_int(s, 0, RTOMO_METHOD_CGLS);
        snprintf(h->method, sizeof h->method, "%s", rtomo_method_name(m));
        h->iteration = m == RTOMO_METHOD_FBP ? 0 : test_rand_int(s, 1, 500);
        h->final = test_rand_int(s, 0, 1);
        h->residual = m == RTOMO_METHOD_FBP ? NAN : test_rand_real(s, 0, 1);
    }
}

START_TEST(image_header_round_trip)
{
    uint64_t s = test_seed(6, _i);
    rtomo_image_header h, got;
    random_image_header(&s, &h);
    char *text = rtomo_proto_encode_image_header(&h);
    ck_assert_ptr_nonnull(text);
    size_t bytes = (size_t)h.width * h.height * rtomo_dtype_size(h.dtype);
    rtomo_reject_info why;
    ck_assert_msg(rtomo_proto_decode_image_header(text, strlen(text), bytes,
                                                  &got, &why) == 0,
                  "%s", why.message);
    ck_assert_str_eq(got.topic, h.topic);
    ck_assert_str_eq(got.scan, h.scan);
    ck_assert(got.frame == h.frame);
    ck_assert_int_eq(got.index, h.index);
    ck_assert_int_eq(got.count, h.count);
    ck_assert_int_eq(got.slice, h.slice);
    ck_assert_int_eq(got.plane, h.plane);
    ck_assert_int_eq(got.width, h.width);
    ck_assert_int_eq(got.height, h.height);
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(got.roi[i], h.roi[i]);
    ck_assert_int_eq(got.dtype, h.dtype);
    ck_assert_float_eq(got.u16_scale, h.u16_scale);
    ck_assert_float_eq(got.u16_offset, h.u16_offset);
    const double want[] = {h.ratio, h.min, h.max, h.mean, h.angle_first,
                           h.angle_last, h.latency_ms, h.compute_ms};
    const double have[] = {got.ratio, got.min, got.max, got.mean,
                           got.angle_first, got.angle_last, got.latency_ms,
                           got.compute_ms};
    for (int i = 0; i < 8; i++)
        assert_close(want[i], have[i], 0, "numbers", i);
    ck_assert_str_eq(got.method, h.method);
    ck_assert_int_eq(got.iteration, h.iteration);
    ck_assert_int_eq(got.final, h.final);
    assert_close(h.residual, got.residual, 0, "residual", 0);
    /* One byte more or less is refused, naming the size fields. */
    size_t wrong = test_rand_int(&s, 0, 1) ? bytes + 1 : bytes - 1;
    ck_assert_int_eq(rtomo_proto_decode_image_header(text, strlen(text), wrong,
                                                     &got, &why), -1);
    expect_check(-1, &why, RTOMO_REJECT_SIZE, "\"width\"");
    free(text);
}
END_TEST

START_TEST(image_header_rejects)
{
    struct {
        const char *json;
        size_t payload;
        rtomo_reject reason;
        const char *names;
    } cases[] = {
        {"{'protocol':1,'type':'slice','width':2,'height':2,'dtype':'float32',"
         "'index':0,'count':1}", 16, RTOMO_REJECT_NONE, ""},
        {"{'protocol':1,'type':'telemetry','width':2,'height':2,"
         "'dtype':'float32','index':0,'count':1}", 16, RTOMO_REJECT_TYPE,
         "telemetry"},
        {"{'protocol':1,'type':'slice','height':2,'dtype':'float32',"
         "'index':0,'count':1}", 16, RTOMO_REJECT_FIELD, "width"},
        /* uint16 scaling beyond float32 (the fuzzer's finding: it became
         * inf, and the encoder then refused the header it had decoded). */
        {"{'protocol':1,'type':'plane','width':2,'height':2,'dtype':'uint16',"
         "'index':0,'count':1,'u16_scale':1e300}", 8, RTOMO_REJECT_FIELD,
         "u16_scale"},
        {"{'protocol':1,'type':'plane','width':2,'height':2,'dtype':'uint16',"
         "'index':0,'count':1,'u16_scale':1e-300}", 8, RTOMO_REJECT_FIELD,
         "u16_scale"},
        {"{'protocol':1,'type':'plane','width':2,'height':2,'dtype':'uint16',"
         "'index':0,'count':1,'u16_offset':-1e39}", 8, RTOMO_REJECT_FIELD,
         "u16_offset"},
        {"{'protocol':1,'type':'slice','width':2,'height':2,'dtype':'float32',"
         "'index':1,'count':1}", 16, RTOMO_REJECT_FIELD, "index"},
        {"{'protocol':1,'type':'slice','width':2,'height':2,'dtype':'float64',"
         "'index':0,'count':1}", 16, RTOMO_REJECT_FIELD, "dtype"},
        {"{'protocol':3,'type':'slice','width':2,'height':2,'dtype':'float32',"
         "'index':0,'count':1}", 16, RTOMO_REJECT_VERSION, "protocol"},
        {"{'protocol':1,'type':'slice','width':2,'height':2,'dtype':'float32',"
         "'index':0,'count':1,'min':'low'}", 16, RTOMO_REJECT_FIELD, "min"},
        {"{'protocol':1,'type':'depth','width':2,'height':2,'dtype':'uint16',"
         "'index':0,'count':1}", 16, RTOMO_REJECT_SIZE, "uint16"},
        {"{'protocol':1,", 16, RTOMO_REJECT_JSON, "JSON"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *text = quoted(cases[i].json);
        rtomo_image_header h;
        rtomo_reject_info why;
        int r = rtomo_proto_decode_image_header(text, strlen(text),
                                                cases[i].payload, &h, &why);
        expect_check(r, &why, cases[i].reason, cases[i].names);
        free(text);
    }
}
END_TEST

START_TEST(event_round_trip)
{
    uint64_t s = test_seed(7, _i);
    rtomo_event ev = {0}, got;
    snprintf(ev.event, sizeof ev.event, "ev_%d", test_rand_int(&s, 0, 1 << 20));
    if (test_rand_int(&s, 0, 1))
        snprintf(ev.scan, sizeof ev.scan, "scan.%d", test_rand_int(&s, 0, 999));
    ev.index = test_rand_int(&s, 0, 1) ? -1
                                       : (int64_t)(rtomo_random_next(&s) >> 3);
    snprintf(ev.reason, sizeof ev.reason, "%s",
             rtomo_reject_name((rtomo_reject)test_rand_int(&s, 0,
                                                      RTOMO_REJECT_COUNT - 1)));
    /* A message that fills the buffer and ends in a multi-byte character
     * cut in half: the encoder must still produce valid JSON. */
    memset(ev.message, 'm', sizeof ev.message - 1);
    ev.message[sizeof ev.message - 1] = '\0';
    memcpy(ev.message + sizeof ev.message - 4, "\xc3\xa9\xc3", 3);
    char *text = rtomo_proto_encode_event(&ev);
    ck_assert_ptr_nonnull(text);
    json_t *j = json_loads(text, 0, NULL);
    ck_assert_ptr_nonnull(j);
    ck_assert(json_is_number(json_object_get(j, "time")));
    json_decref(j);
    rtomo_reject_info why;
    ck_assert_int_eq(rtomo_proto_decode_event(text, strlen(text), &got, &why),
                     0);
    ck_assert_str_eq(got.event, ev.event);
    ck_assert_str_eq(got.scan, ev.scan);
    ck_assert(got.index == ev.index);
    ck_assert_str_eq(got.reason, ev.reason);
    ck_assert_uint_eq(strlen(got.message), sizeof ev.message - 1);
    ck_assert_int_eq(strncmp(got.message, ev.message, sizeof ev.message - 2),
                     0);
    ck_assert_int_eq(got.message[sizeof ev.message - 2], '?');
    free(text);

    char *slice = quoted("{'protocol':1,'type':'slice','event':'x'}");
    ck_assert_int_eq(rtomo_proto_decode_event(slice, strlen(slice), &got,
                                              &why), -1);
    expect_check(-1, &why, RTOMO_REJECT_TYPE, "slice");
    free(slice);
}
END_TEST

START_TEST(control_error_reply)
{
    char *text = rtomo_proto_control_error("bad_argument",
                                           "unknown key \"%s\"", "frobnicate");
    ck_assert_ptr_nonnull(text);
    json_t *j = json_loads(text, 0, NULL);
    ck_assert_ptr_nonnull(j);
    ck_assert(json_is_false(json_object_get(j, "ok")));
    ck_assert_str_eq(json_string_value(json_object_get(j, "error")),
                     "bad_argument");
    ck_assert_str_eq(json_string_value(json_object_get(j, "message")),
                     "unknown key \"frobnicate\"");
    json_decref(j);
    free(text);
}
END_TEST

START_TEST(names_are_stable)
{
    /* These strings are wire format (PROTOCOL.md, status counters). */
    const char *want[RTOMO_REJECT_COUNT] = {
        "none", "bad_parts", "bad_json", "bad_version", "unknown_type",
        "bad_field", "bad_geometry", "unknown_scan", "bad_state",
        "index_out_of_range", "duplicate_frame", "shape_mismatch",
        "dtype_mismatch", "size_mismatch", "oversize", "non_finite",
        "over_budget", "shutting_down", "scan_ended", "bad_cbor",
        "bad_compression", "not_armed"};
    for (int r = 0; r < RTOMO_REJECT_COUNT; r++)
        ck_assert_str_eq(rtomo_reject_name((rtomo_reject)r), want[r]);
    ck_assert_str_eq(rtomo_reject_name(RTOMO_REJECT_COUNT), "unknown");
    ck_assert_str_eq(rtomo_msg_type_name(RTOMO_MSG_SBDX_FRAME), "sbdx_frame");
    ck_assert_str_eq(rtomo_msg_type_name(RTOMO_MSG_TYPE_COUNT), "unknown");
}
END_TEST

/* --------------------------------------------------------------- fuzz ---- */

static void expect_reject_in(const rtomo_reject_info *why,
                             const rtomo_reject *allowed, int n,
                             const void *input, size_t size)
{
    for (int i = 0; i < n; i++)
        if (why->reason == allowed[i])
            return;
    ck_abort_msg("unexpected reason %s (%s) for %zu input bytes %.*s",
                 rtomo_reject_name(why->reason), why->message, size,
                 (int)(size < 200 ? size : 200), (const char *)input);
}

/* Random byte strings: never accepted; bad_json or bad_field, or
 * bad_version when the bytes happen to form a JSON object (e.g. "{}"),
 * which then lacks the "protocol" field. */
START_TEST(fuzz_random_bytes)
{
    uint64_t s = test_seed(8, _i);
    const rtomo_reject allowed[] = {RTOMO_REJECT_JSON, RTOMO_REJECT_FIELD,
                                    RTOMO_REJECT_VERSION};
    for (int k = 0; k < 200; k++) {
        size_t n = (size_t)test_rand_int(&s, 0, 300);
        unsigned char buf[300];
        /* Half the inputs start like JSON to get past the first byte. */
        for (size_t i = 0; i < n; i++)
            buf[i] = (unsigned char)rtomo_random_next(&s);
        if (n && test_rand_int(&s, 0, 1))
            buf[0] = '{';
        rtomo_ingest_msg msg;
        rtomo_reject_info why;
        int r = rtomo_proto_decode_ingest(2, buf, n, buf, n, &msg, &why);
        ck_assert_int_eq(r, -1);
        expect_reject_in(&why, allowed, 3, buf, n);
    }
}
END_TEST

/* Every proper prefix of valid headers is bad_json. */
START_TEST(fuzz_truncated)
{
    uint64_t s = test_seed(9, _i);
    rtomo_scan_spec scan;
    rtomo_sbdx_spec sbdx;
    rtomo_frame_header f;
    random_scan_spec(&s, &scan);
    random_sbdx_spec(&s, &sbdx);
    random_frame(&s, &f);
    char *texts[3] = {rtomo_proto_encode_scan_begin(&scan),
                      rtomo_proto_encode_sbdx_begin(&sbdx),
                      rtomo_proto_encode_frame(&f)};
    const rtomo_reject allowed[] = {RTOMO_REJECT_JSON};
    for (int t = 0; t < 3; t++) {
        size_t len = strlen(texts[t]);
        for (size_t n = 0; n < len; n += 1 + len / 300) {
            rtomo_ingest_msg msg;
            rtomo_reject_info why;
            ck_assert_int_eq(rtomo_proto_decode_ingest(1, texts[t], n, NULL, 0,
                                                       &msg, &why), -1);
            expect_reject_in(&why, allowed, 1, texts[t], n);
        }
        free(texts[t]);
    }
    rtomo_scan_spec_clear(&scan);
    rtomo_sbdx_spec_clear(&sbdx);
}
END_TEST

/* Mutated valid messages (random bytes overwritten, random payload sizes):
 * any outcome but a crash; accepted ones are internally consistent. */
START_TEST(fuzz_mutated)
{
    uint64_t s = test_seed(10, _i);
    rtomo_frame_header f;
    random_frame(&s, &f);
    size_t bytes = shape_samples(&f) * rtomo_dtype_size(f.dtype);
    void *payload = random_payload(&s, f.dtype, shape_samples(&f));
    rtomo_scan_spec scan;
    random_scan_spec(&s, &scan);
    char *texts[2] = {rtomo_proto_encode_frame(&f),
                      rtomo_proto_encode_scan_begin(&scan)};
    for (int k = 0; k < 200; k++) {
        char *t = strdup(texts[k % 2]);
        size_t len = strlen(t);
        for (int m = test_rand_int(&s, 1, 4); m > 0; m--)
            t[test_rand_int(&s, 0, (int)len - 1)] =
                "{}[]\":,-0123456789.eEtfn x"[test_rand_int(&s, 0, 26)];
        size_t size =
            test_rand_int(&s, 0, 3) ? bytes : (size_t)test_rand_int(&s, 0, 64);
        rtomo_ingest_msg msg;
        rtomo_reject_info why;
        if (rtomo_proto_decode_ingest(test_rand_int(&s, 1, 2), t, len, payload,
                                      size, &msg, &why) == 0) {
            ck_assert(msg.type >= 0 && msg.type < RTOMO_MSG_TYPE_COUNT);
            ck_assert_int_eq(msg.scan_spec != NULL,
                             msg.type == RTOMO_MSG_SCAN_BEGIN);
            rtomo_ingest_msg_clear(&msg);
        } else {
            ck_assert(why.reason > RTOMO_REJECT_NONE &&
                      why.reason < RTOMO_REJECT_COUNT);
            ck_assert(strlen(why.message) > 0);
        }
        free(t);
    }
    free(texts[0]);
    free(texts[1]);
    free(payload);
    rtomo_scan_spec_clear(&scan);
}
END_TEST

/* -------------------------------------------------- cone-beam begins ---- */

/* A cone-beam scan the engine accepts: a full turn (angles from a start
 * and step, or a list with jittered inner angles spanning the same),
 * a detector possibly offset (a half fan), a centred volume inside the
 * field of view, possibly an ROI about its centre. */
static void random_cone_spec(uint64_t *s, rtomo_scan_spec *spec)
{
    rtomo_scan_spec_init(spec);
    rtomo_fbp_geometry *g = &spec->geometry;
    snprintf(spec->scan, sizeof spec->scan, "cone-%d", test_rand_int(s, 0, 999));
    g->det_width = test_rand_int(s, 16, 256);
    g->det_height = test_rand_int(s, 8, 128);
    g->n_proj = test_rand_int(s, 8, 720);
    double step = 2 * M_PI / g->n_proj;
    g->angle_start = test_rand_real(s, -M_PI, M_PI);
    if (test_rand_int(s, 0, 1)) {
        spec->angles = malloc((size_t)g->n_proj * sizeof *spec->angles);
        ck_assert_ptr_nonnull(spec->angles);
        for (int p = 0; p < g->n_proj; p++)
            spec->angles[p] = g->angle_start + p * step +
                (p > 0 && p < g->n_proj - 1
                     ? test_rand_real(s, -0.2, 0.2) * step : 0.0);
        g->angles = spec->angles;
    } else {
        g->angle_step = step;
    }
    spec->dtype = (rtomo_dtype)test_rand_int(s, 0, 2);
    spec->n_darks = test_rand_int(s, 0, 20);
    spec->n_flats = test_rand_int(s, 0, 20);
    spec->given = (unsigned)test_rand_int(s, 0, 3) *
                  RTOMO_SPEC_HAS_WINDOW;    /* window and cutoff */
    if (spec->given & RTOMO_SPEC_HAS_WINDOW)
        g->window = (rtomo_window)test_rand_int(s, 0, RTOMO_WINDOW_HANN);
    if (spec->given & RTOMO_SPEC_HAS_CUTOFF)
        g->cutoff = test_rand_real(s, 0.05, 1.0);
    if (test_rand_int(s, 0, 1)) {           /* fbp (FDK), sirt or cgls */
        spec->given |= RTOMO_SPEC_HAS_METHOD | RTOMO_SPEC_HAS_ITERATIONS;
        spec->method.method = (rtomo_method)test_rand_int(s, 0, 2);
        spec->method.iterations = test_rand_int(s, 1, 100);
    }
    rtomo_cone_spec *c = spec->cone = calloc(1, sizeof *spec->cone);
    ck_assert_ptr_nonnull(c);
    c->source_to_axis = test_rand_real(s, 100, 1000);
    c->source_to_detector = c->source_to_axis * test_rand_real(s, 1.2, 4);
    c->pitch[0] = test_rand_real(s, 0.05, 1);
    c->pitch[1] = c->pitch[0] * test_rand_real(s, 0.5, 2);
    double half = 0.5 * (g->det_width - 1) * c->pitch[0];
    c->offset[0] = test_rand_int(s, 0, 1) ? test_rand_real(s, -0.4, 0.4) * half
                                          : 0.0;
    c->offset[1] = test_rand_real(s, -0.1, 0.1) * g->det_height * c->pitch[1];
    c->voxel = c->pitch[0] * c->source_to_axis / c->source_to_detector *
               test_rand_real(s, 0.5, 1);
    for (int a = 0; a < 3; a++)
        c->volume[a] = test_rand_int(s, 4, a < 2 ? g->det_width
                                                 : g->det_height);
    if (test_rand_int(s, 0, 1))
        for (int a = 0; a < 3; a++) {
            c->roi[a] = test_rand_int(s, 0, (c->volume[a] - 1) / 2);
            c->roi[3 + a] = c->volume[a] - 2 * c->roi[a];
        }
}

START_TEST(cone_begin_round_trip)
{
    uint64_t s = test_seed(0xc0e, _i);
    rtomo_scan_spec spec;
    random_cone_spec(&s, &spec);
    char *text = rtomo_proto_encode_scan_begin(&spec);
    ck_assert_ptr_nonnull(text);
    ck_assert_ptr_nonnull(strstr(text, "\"beam\":\"cone\""));
    rtomo_ingest_msg msg;
    decode_ok(text, 1, NULL, 0, &msg);
    const rtomo_scan_spec *got = msg.scan_spec;
    assert_same_scan(&spec, got);
    ck_assert_ptr_nonnull(got->cone);
    const rtomo_cone_spec *a = spec.cone, *b = got->cone;
    assert_close(a->source_to_axis, b->source_to_axis, 0, "sad", 0);
    assert_close(a->source_to_detector, b->source_to_detector, 0, "sdd", 0);
    assert_close(a->voxel, b->voxel, 0, "voxel", 0);
    for (int i = 0; i < 2; i++) {
        assert_close(a->pitch[i], b->pitch[i], 0, "pitch", i);
        assert_close(a->offset[i], b->offset[i], 0, "offset", i);
    }
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(a->volume[i], b->volume[i]);
    for (int i = 0; i < 6; i++)
        ck_assert_int_eq(a->roi[i], b->roi[i]);
    rtomo_ingest_msg_clear(&msg);
    free(text);
    rtomo_scan_spec_clear(&spec);
    ck_assert_ptr_null(spec.cone);
}
END_TEST

/* A minimal cone-beam begin: a full turn of 2 pi / n steps, the voxel
 * of a detector pixel at the axis, the whole volume, no offsets. */
START_TEST(cone_begin_defaults)
{
    char *text = quoted("{'protocol':1,'type':'scan_begin','scan':'k',"
                        "'detector':{'width':64,'height':48},"
                        "'projections':90,'beam':'cone','cone':{"
                        "'source_to_axis':200,'source_to_detector':500,"
                        "'pitch':[0.5,0.25],'volume':[40,40,30]}}");
    rtomo_ingest_msg msg;
    decode_ok(text, 1, NULL, 0, &msg);
    const rtomo_scan_spec *spec = msg.scan_spec;
    ck_assert_ptr_nonnull(spec->cone);
    ck_assert_double_eq_tol(spec->geometry.angle_step, 2 * M_PI / 90, 1e-15);
    ck_assert_double_eq_tol(spec->cone->voxel, 0.2, 1e-15);
    ck_assert_double_eq(spec->cone->offset[0], 0.0);
    ck_assert_int_eq(spec->cone->roi[3], 0);
    ck_assert_int_eq(spec->method.method, RTOMO_METHOD_FBP);
    rtomo_ingest_msg_clear(&msg);
    free(text);

    /* "beam": "parallel" is the default and may be said. */
    text = quoted("{'protocol':1,'type':'scan_begin','scan':'p',"
                  "'detector':{'width':16,'height':2},'projections':10,"
                  "'beam':'parallel'}");
    decode_ok(text, 1, NULL, 0, &msg);
    ck_assert_ptr_null(msg.scan_spec->cone);
    rtomo_ingest_msg_clear(&msg);
    free(text);
}
END_TEST

/* ---------------------------------------------------------------- main ---- */

static Suite *codec_suite(void)
{
    Suite *suite = suite_create("protocol codec");
    TCase *round = tcase_create("round trips");
    tcase_add_loop_test(round, scan_begin_round_trip, 0, 200);
    tcase_add_test(round, scan_begin_defaults);
    tcase_add_loop_test(round, sbdx_begin_round_trip, 0, 100);
    tcase_add_test(round, sbdx_ratio_range);
    tcase_add_test(round, sbdx_ratio_count_limit);
    tcase_add_test(round, roi_against_the_configured_grid_is_the_daemons);
    tcase_add_test(round, sbdx_encoder_refuses_what_the_decoder_refuses);
    tcase_add_loop_test(round, frame_round_trip, 0, 200);
    tcase_add_test(round, end_round_trip);
    tcase_add_loop_test(round, cone_begin_round_trip, 0, 100);
    tcase_add_test(round, cone_begin_defaults);
    suite_add_tcase(suite, round);

    TCase *rejects = tcase_create("rejects");
    tcase_add_loop_test(rejects, reject_reasons, 0,
                        (int)(sizeof bad_cases / sizeof bad_cases[0]));
    tcase_add_test(rejects, oversize_header);
    tcase_add_loop_test(rejects, non_finite_payload, 0, 50);
    tcase_add_test(rejects, tomo_frame_checks);
    tcase_add_test(rejects, sbdx_frame_checks);
    tcase_add_test(rejects, names_are_stable);
    suite_add_tcase(suite, rejects);

    TCase *slices = tcase_create("slices");
    tcase_add_test(slices, slice_expansion);
    tcase_add_loop_test(slices, slice_json_round_trip, 0, 100);
    suite_add_tcase(suite, slices);

    TCase *publish = tcase_create("published");
    tcase_add_loop_test(publish, image_header_round_trip, 0, 100);
    tcase_add_test(publish, image_header_rejects);
    tcase_add_loop_test(publish, event_round_trip, 0, 50);
    tcase_add_test(publish, control_error_reply);
    suite_add_tcase(suite, publish);

    TCase *fuzz = tcase_create("fuzz");
    tcase_add_loop_test(fuzz, fuzz_random_bytes, 0, 20);
    tcase_add_loop_test(fuzz, fuzz_truncated, 0, 10);
    tcase_add_loop_test(fuzz, fuzz_mutated, 0, 20);
    suite_add_tcase(suite, fuzz);
    return suite;
}

int main(void)
{
    test_base_seed();
    return rtomo_check_run(codec_suite());
}
