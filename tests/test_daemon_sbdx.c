/*
 * test_daemon_sbdx.c — SBDX streams through the real rtomod: simulated
 * frames of point and wire objects are reconstructed and published as
 * planes, composite and depth map, each equal to what the CPU engine makes
 * of the same frame; uint16 planes without composite; frame rejects;
 * several workers reconstructing frames side by side still publish them
 * in order, with per-frame latency and GU/s in telemetry; an end that
 * overtakes frames held back by a full work queue waits for them.  The
 * composite and depth map are what PROTOCOL.md 3.7's written rule makes
 * of the published planes, computed here from that text alone, with raw
 * and with flat-fielded planes.
 */
#include "config.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon_harness.h"
#include "rtomo_sim.h"

#define N_PLANES 5
#define N_FRAMES 4
static const double ratios[N_PLANES] = {0.8, 1.0, 1.25, 1.6, 2.1};

/* 10x8 holes, 16x8 detector, m = 4: planes of 40x32. */
static void stream_spec(rtomo_sbdx_spec *spec, const char *id)
{
    rtomo_sbdx_spec_init(spec);
    snprintf(spec->scan, sizeof spec->scan, "%s", id);
    rtomo_sbdx_geometry *g = &spec->geometry;
    g->holes_x = 10;
    g->holes_y = 8;
    g->det_width = 16;
    g->det_height = 8;
    g->shift_m = 4;
    g->n_planes = N_PLANES;
    spec->ratios = malloc(sizeof ratios);
    memcpy(spec->ratios, ratios, sizeof ratios);
    g->ratios = spec->ratios;
    spec->dtype = RTOMO_DTYPE_U8;
}

static size_t frame_samples(const rtomo_sbdx_geometry *g)
{
    return (size_t)g->holes_x * g->holes_y * g->det_width * g->det_height;
}

/* n_frames frames of a few objects at random places and depths
 * (seeded). */
static uint8_t *simulate_n_frames(const rtomo_sbdx_geometry *g, int n_frames,
                                  uint64_t seed)
{
    size_t n = frame_samples(g);
    uint8_t *frames = malloc(n * (size_t)n_frames);
    ck_assert(frames);
    for (int f = 0; f < n_frames; f++) {
        rtomo_sbdx_object obj[3];
        for (int k = 0; k < 3; k++) {
            obj[k].kind = k == 2 ? RTOMO_SBDX_WIRE : RTOMO_SBDX_POINT;
            obj[k].ratio = ratios[(int)(rtomo_random_uniform(&seed) *
                                        N_PLANES)];
            obj[k].x0 = 5 + 30 * rtomo_random_uniform(&seed);
            obj[k].y0 = 5 + 22 * rtomo_random_uniform(&seed);
            obj[k].x1 = 5 + 30 * rtomo_random_uniform(&seed);
            obj[k].y1 = 5 + 22 * rtomo_random_uniform(&seed);
            obj[k].absorption = 60 + 100 * rtomo_random_uniform(&seed);
        }
        rtomo_error err;
        ck_assert_msg(rtomo_sbdx_simulate(g, obj, 3, 200.0, frames + n * f,
                                          &err) == RTOMO_OK,
                      "simulate: %s", err.message);
    }
    return frames;
}

static uint8_t *simulate_frames(const rtomo_sbdx_geometry *g, uint64_t seed)
{
    return simulate_n_frames(g, N_FRAMES, seed);
}

static void frame_header_of(const rtomo_sbdx_spec *spec, int64_t index,
                            rtomo_frame_header *f)
{
    const rtomo_sbdx_geometry *g = &spec->geometry;
    memset(f, 0, sizeof *f);
    f->type = RTOMO_MSG_SBDX_FRAME;
    snprintf(f->scan, sizeof f->scan, "%s", spec->scan);
    f->index = index;
    f->dtype = RTOMO_DTYPE_U8;
    f->ndim = 4;
    f->shape[0] = g->holes_y;
    f->shape[1] = g->holes_x;
    f->shape[2] = g->det_height;
    f->shape[3] = g->det_width;
    f->angle = NAN;
    f->axis_shift = NAN;
}

static void send_frame(rtomo_client *c, const rtomo_sbdx_spec *spec,
                       int64_t index, const uint8_t *data)
{
    rtomo_frame_header f;
    frame_header_of(spec, index, &f);
    rtomo_error err;
    ck_assert_msg(rtomo_client_send_frame(c, &f, data,
                                          frame_samples(&spec->geometry),
                                          &err) == RTOMO_OK,
                  "sbdx_frame: %s", err.message);
}

/* The same on one chosen connection. */
static void send_frame_on(rtomo_client *c, int connection,
                          const rtomo_sbdx_spec *spec, int64_t index,
                          const uint8_t *data)
{
    rtomo_frame_header f;
    frame_header_of(spec, index, &f);
    char *header = rtomo_proto_encode_frame(&f);
    ck_assert(header);
    rtomo_error err;
    ck_assert_msg(rtomo_client_send_raw(c, connection, header, strlen(header),
                                        2, data,
                                        frame_samples(&spec->geometry), &err)
                  == RTOMO_OK, "sbdx_frame %lld: %s", (long long)index,
                  err.message);
    free(header);
}

static void send_stream(rtomo_client *c, const rtomo_sbdx_spec *spec,
                        const uint8_t *frames, const int *order)
{
    rtomo_error err;
    ck_assert(rtomo_client_send_sbdx_begin(c, spec, &err) == RTOMO_OK);
    for (int i = 0; i < N_FRAMES; i++)
        send_frame(c, spec, order[i],
                   frames + frame_samples(&spec->geometry) * order[i]);
    ck_assert(rtomo_client_send_end(c, RTOMO_MSG_SBDX_END, spec->scan, &err)
              == RTOMO_OK);
}

/* What the CPU engine makes of one frame with the stream's settings. */
typedef struct engine_result {
    float *planes, *composite;
    uint16_t *planes_u16, *depth;
} engine_result;

static engine_result engine_frame(const rtomo_sbdx_spec *spec,
                                  const uint8_t *frame)
{
    rtomo_engine_options opt;
    rtomo_engine_options_init(&opt);
    opt.backend = RTOMO_BACKEND_CPU;
    opt.cpu_threads = 1;
    rtomo_error err;
    rtomo_sbdx *plan = rtomo_sbdx_create(&spec->geometry, &opt, &err);
    ck_assert_msg(plan, "plan: %s", err.message);
    const rtomo_sbdx_geometry *g = rtomo_sbdx_geometry_of(plan);
    size_t pixels = (size_t)g->out_width * g->out_height;
    engine_result r;
    r.planes = malloc(sizeof(float) * pixels * N_PLANES);
    r.planes_u16 = malloc(sizeof(uint16_t) * pixels * N_PLANES);
    r.composite = malloc(sizeof(float) * pixels);
    r.depth = malloc(sizeof(uint16_t) * pixels);
    rtomo_sbdx_output out = {r.planes, r.planes_u16, spec->u16_offset,
                             spec->u16_scale, r.composite, r.depth};
    ck_assert_msg(rtomo_sbdx_reconstruct(plan, frame, RTOMO_DTYPE_U8, &out,
                                         &err) == RTOMO_OK,
                  "reconstruct: %s", err.message);
    rtomo_sbdx_destroy(plan);
    return r;
}

static void engine_result_free(engine_result *r)
{
    free(r->planes);
    free(r->planes_u16);
    free(r->composite);
    free(r->depth);
}

static void assert_close(const float *got, const float *want, size_t n,
                         const char *what, int frame)
{
    double diff = test_max_abs_diff(got, want, n);
    double scale = test_max_abs(want, n);
    ck_assert_msg(diff <= 1e-5 * scale, "frame %d %s differs by %g (scale %g)",
                  frame, what, diff, scale);
}

START_TEST(stream_of_frames_end_to_end)
{
    daemon_session t;
    daemon_session_open(&t, NULL, 1);
    rtomo_client *c = t.c;
    daemon_inbox *in = &t.in;

    rtomo_sbdx_spec spec;
    stream_spec(&spec, "fluoro");
    uint8_t *frames = simulate_frames(&spec.geometry, 0xdae0401);
    const int order[N_FRAMES] = {2, 0, 3, 1};
    send_stream(c, &spec, frames, order);
    daemon_wait_images(in, RTOMO_TOPIC_PLANE, "fluoro", N_PLANES * N_FRAMES);
    daemon_wait_images(in, RTOMO_TOPIC_DEPTH, "fluoro", N_FRAMES);
    daemon_wait_event(in, "scan_complete", NULL, "fluoro", 0);

    const size_t w = 40, h = 32, pixels = w * h;
    for (int f = 0; f < N_FRAMES; f++) {
        engine_result want = engine_frame(&spec, frames +
                                          frame_samples(&spec.geometry) * f);
        for (int k = 0; k < N_PLANES; k++) {
            const daemon_image *im = daemon_find_image(in, RTOMO_TOPIC_PLANE,
                                                       "fluoro", f, k);
            ck_assert_msg(im, "frame %d plane %d is missing", f, k);
            ck_assert_int_eq(im->h.plane, k);
            ck_assert_int_eq(im->h.count, N_PLANES);
            ck_assert_double_eq_tol(im->h.ratio, ratios[k], 1e-12);
            ck_assert_int_eq(im->h.width, (int)w);
            ck_assert_int_eq(im->h.height, (int)h);
            ck_assert_int_eq(im->h.dtype, RTOMO_DTYPE_F32);
            assert_close(im->data, want.planes + pixels * k, pixels, "plane",
                         f);
            daemon_assert_image_stats(im, 1e-6);
        }
        const daemon_image *comp = daemon_find_image(in, RTOMO_TOPIC_COMPOSITE,
                                                     "fluoro", f, 0);
        const daemon_image *depth = daemon_find_image(in, RTOMO_TOPIC_DEPTH,
                                                      "fluoro", f, 0);
        ck_assert(comp && depth);
        ck_assert_int_eq(depth->h.dtype, RTOMO_DTYPE_U16);
        assert_close(comp->data, want.composite, pixels, "composite", f);
        ck_assert_msg(memcmp(depth->data, want.depth,
                             pixels * sizeof(uint16_t)) == 0,
                      "frame %d depth map differs from the engine's", f);
        daemon_assert_image_stats(comp, 1e-6);
        daemon_assert_image_stats(depth, 1e-6);
        engine_result_free(&want);
    }
    json_t *st = daemon_status(c);
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(
                         json_object_get(st, "telemetry"), "reconstruction"),
                         "frames")), N_FRAMES);
    json_decref(st);

    free(frames);
    rtomo_sbdx_spec_clear(&spec);
    daemon_session_close(&t);
}
END_TEST

/* ------------------------- PROTOCOL.md 3.7, written out independently -- */

/* Rx (or Ry) of one axis: n_det elements, n_holes holes, shift m, output
 * positions origin .. origin + n_out - 1, by the exact rule of 3.7 (each
 * float weight counted as floor(w 2^48), an exact integer sum). */
static void spec_response(double n, int n_det, int n_holes, int m,
                          int origin, int n_out, float *out)
{
    int64_t *sum = calloc((size_t)n_out, sizeof *sum);
    ck_assert_ptr_nonnull(sum);
    for (int d = 0; d < n_det; d++) {
        double t = n * (d - (n_det - 1) / 2.0), o = floor(t), f = t - o;
        float w[2] = {(float)(1.0 - f), (float)f};
        for (int c = 0; c < n_holes; c++)
            for (int e = 0; e < 2; e++) {
                long pos = (long)m * c + (long)o + e - origin;
                if (pos >= 0 && pos < n_out)
                    sum[pos] += (int64_t)((double)w[e] * 281474976710656.0);
            }
    }
    for (int i = 0; i < n_out; i++)
        out[i] = (float)(((double)sum[i] / 281474976710656.0) *
                         ((double)m / n_det));
    free(sum);
}

/* Depth and composite of one frame's published planes by the rule of 3.7;
 * compares with rtomod's and returns the pixels decided by a near-tie
 * (variances equal to 1e-9 of the largest u^2), the only ones where the
 * depth may differ. */
static int check_spec_composite(const rtomo_sbdx_spec *spec,
                                const float *const *planes,
                                const float *composite, const uint16_t *depth,
                                int w, int h)
{
    const rtomo_sbdx_geometry *g = &spec->geometry;
    int P = g->n_planes, r = g->composite_radius, ff = g->flat_field;
    float *rx = malloc(sizeof(float) * (size_t)P * w);
    float *ry = malloc(sizeof(float) * (size_t)P * h);
    double *u = malloc(sizeof(double) * (size_t)P * w * h);
    char *in = malloc((size_t)P * w * h);
    ck_assert(rx && ry && u && in);
    double scale = 0.0;
    for (int k = 0; k < P; k++) {
        spec_response(g->ratios[k], g->det_width, g->holes_x, g->shift_m,
                      g->origin_x, w, rx + (size_t)k * w);
        spec_response(g->ratios[k], g->det_height, g->holes_y, g->shift_m,
                      g->origin_y, h, ry + (size_t)k * h);
        for (int j = 0; j < h; j++)
            for (int i = 0; i < w; i++) {
                size_t q = ((size_t)k * h + j) * w + i;
                double R = (double)rx[k * w + i] * (double)ry[k * h + j];
                double v = planes[k][(size_t)j * w + i];
                in[q] = !ff || R >= 0.25 * (1.0 - 1.0 / 65536.0);
                u[q] = ff ? v : v / (R > 0.25 ? R : 0.25);
                scale = fmax(scale, u[q] * u[q]);
            }
    }
    int near_ties = 0;
    for (int j = 0; j < h; j++)
        for (int i = 0; i < w; i++) {
            int best = 65535;
            double best_var = -INFINITY, second = -INFINITY;
            for (int k = 0; k < P; k++) {
                if (!in[((size_t)k * h + j) * w + i])
                    continue;
                double s1 = 0.0, s2 = 0.0, n = 0.0;
                for (int y = j - r; y <= j + r; y++)
                    for (int x = i - r; x <= i + r; x++) {
                        size_t q = ((size_t)k * h + y) * w + x;
                        if (x < 0 || x >= w || y < 0 || y >= h || !in[q])
                            continue;
                        s1 += u[q];
                        s2 += u[q] * u[q];
                        n += 1.0;
                    }
                double var = s2 / n - (s1 / n) * (s1 / n);
                if (var > best_var) {
                    second = best_var;
                    best_var = var;
                    best = k;
                } else if (var > second) {
                    second = var;
                }
            }
            size_t p = (size_t)j * w + i;
            int tie = best_var - second <= 1e-9 * scale;
            near_ties += tie;
            ck_assert_msg(depth[p] == best || (tie && best != 65535 &&
                                               depth[p] != 65535),
                          "pixel (%d, %d): rtomod's depth %u, the written "
                          "rule's %d (variances %.17g, %.17g)", i, j,
                          depth[p], best, best_var, second);
            float want = depth[p] == 65535 ? 0.0f : planes[depth[p]][p];
            ck_assert_msg(composite[p] == want, "pixel (%d, %d): composite "
                          "%.9g, plane %u has %.9g", i, j,
                          (double)composite[p], depth[p], (double)want);
        }
    free(rx);
    free(ry);
    free(u);
    free(in);
    return near_ties;
}

/* A client that reads PROTOCOL.md 3.7 and nothing else computes rtomod's
 * composite and depth map from the published float32 planes: raw planes
 * (flat_field false), then flat-fielded ones, whose pixels outside every
 * field of view (origin shifted past the collimator's edge) have depth
 * 65535 and composite 0. */
START_TEST(composite_follows_the_written_rule)
{
    daemon_session t;
    daemon_session_open(&t, NULL, 1);
    for (int ff = 0; ff <= 1; ff++) {
        char id[16];
        snprintf(id, sizeof id, "rule-%d", ff);
        rtomo_sbdx_spec spec;
        stream_spec(&spec, id);
        spec.geometry.flat_field = ff;
        spec.geometry.composite_radius = 2;
        spec.geometry.origin_x = -6;
        uint8_t *frames = simulate_n_frames(&spec.geometry, 2, 0xdae0405 + ff);
        rtomo_error err;
        ck_assert(rtomo_client_send_sbdx_begin(t.c, &spec, &err) == RTOMO_OK);
        size_t n = frame_samples(&spec.geometry);
        for (int f = 0; f < 2; f++)
            send_frame(t.c, &spec, f, frames + n * f);
        ck_assert(rtomo_client_send_end(t.c, RTOMO_MSG_SBDX_END, id, &err) ==
                  RTOMO_OK);
        daemon_wait_event(&t.in, "scan_complete", NULL, id, 0);
        int none = 0;
        for (int f = 0; f < 2; f++) {
            const float *planes[N_PLANES];
            for (int k = 0; k < N_PLANES; k++) {
                const daemon_image *im = daemon_find_image(
                    &t.in, RTOMO_TOPIC_PLANE, id, f, k);
                ck_assert_msg(im, "frame %d plane %d missing", f, k);
                planes[k] = im->data;
            }
            const daemon_image *comp = daemon_find_image(
                &t.in, RTOMO_TOPIC_COMPOSITE, id, f, 0);
            const daemon_image *depth = daemon_find_image(
                &t.in, RTOMO_TOPIC_DEPTH, id, f, 0);
            ck_assert(comp && depth);
            int w = comp->h.width, h = comp->h.height;
            int ties = check_spec_composite(&spec, planes, comp->data,
                                            depth->data, w, h);
            const uint16_t *d = depth->data;
            for (int p = 0; p < w * h; p++)
                none += d[p] == 65535;
            printf("flat_field %d frame %d: composite and depth by the "
                   "written rule (%d near-ties)\n", ff, f, ties);
        }
        /* The shifted origin leaves columns no plane measures: only when
         * flat-fielded are they "no plane". */
        if (ff)
            ck_assert_int_gt(none, 0);
        else
            ck_assert_int_eq(none, 0);
        free(frames);
        rtomo_sbdx_spec_clear(&spec);
    }
    daemon_session_close(&t);
}
END_TEST

START_TEST(uint16_planes_without_composite_and_frame_rejects)
{
    daemon_session t;
    daemon_session_open(&t, NULL, 1);
    rtomo_client *c = t.c;
    daemon_inbox *in = &t.in;

    rtomo_sbdx_spec spec;
    stream_spec(&spec, "scaled");
    spec.planes = RTOMO_PLANES_UINT16;
    spec.u16_scale = 100.0f;
    spec.u16_offset = 50.0f;
    spec.composite = 0;
    uint8_t *frames = simulate_frames(&spec.geometry, 0xdae0402);
    rtomo_error err;
    ck_assert(rtomo_client_send_sbdx_begin(c, &spec, &err) == RTOMO_OK);
    size_t n = frame_samples(&spec.geometry);
    send_frame(c, &spec, 0, frames);
    send_frame(c, &spec, 0, frames + n);        /* duplicate */
    daemon_wait_event(in, "rejected", "duplicate_frame", "scaled", 0);
    /* A frame that names the wrong hole count. */
    const char *header =
        "{\"protocol\": 1, \"type\": \"sbdx_frame\", \"scan\": \"scaled\", "
        "\"index\": 1, \"dtype\": \"uint8\", \"shape\": [8, 9, 8, 16]}";
    ck_assert(rtomo_client_send_raw(c, 0, header, strlen(header), 2, frames,
                                    8 * 9 * 8 * 16, &err) == RTOMO_OK);
    daemon_wait_event(in, "rejected", "shape_mismatch", "scaled", 0);
    send_frame(c, &spec, 1, frames + n);
    ck_assert(rtomo_client_send_end(c, RTOMO_MSG_SBDX_END, "scaled", &err) ==
              RTOMO_OK);
    daemon_wait_images(in, RTOMO_TOPIC_PLANE, "scaled", 2 * N_PLANES);
    daemon_wait_event(in, "scan_complete", NULL, "scaled", 0);
    ck_assert_int_eq(daemon_count_images(in, RTOMO_TOPIC_COMPOSITE, NULL), 0);
    ck_assert_int_eq(daemon_count_images(in, RTOMO_TOPIC_DEPTH, NULL), 0);

    const size_t pixels = 40 * 32;
    for (int f = 0; f < 2; f++) {
        engine_result want = engine_frame(&spec, frames + n * f);
        for (int k = 0; k < N_PLANES; k++) {
            const daemon_image *im = daemon_find_image(in, RTOMO_TOPIC_PLANE,
                                                       "scaled", f, k);
            ck_assert(im);
            ck_assert_int_eq(im->h.dtype, RTOMO_DTYPE_U16);
            ck_assert_double_eq_tol(im->h.u16_scale, 100.0, 1e-6);
            ck_assert_double_eq_tol(im->h.u16_offset, 50.0, 1e-6);
            ck_assert_uint_eq(im->size, pixels * sizeof(uint16_t));
            ck_assert_msg(memcmp(im->data, want.planes_u16 + pixels * k,
                                 pixels * sizeof(uint16_t)) == 0,
                          "frame %d plane %d: uint16 values differ", f, k);
            daemon_assert_image_stats(im, 1e-6);
        }
        engine_result_free(&want);
    }
    free(frames);
    rtomo_sbdx_spec_clear(&spec);
    daemon_session_close(&t);
}
END_TEST

/* Three workers take frames in turn and finish them in any order, each
 * with three finisher threads; the subscriber still sees frame after
 * frame, each whole (planes, composite, depth) before the next, each equal
 * to the engine's. */
START_TEST(several_workers_keep_frame_order)
{
    enum { FRAMES = 15 };
    daemon_session t;
    const char *args[] = {"--set", "engine.workers=3", "--cpu-threads", "3",
                          "--set", "publish.stats_threads=3", NULL};
    daemon_session_open(&t, args, 1);
    rtomo_sbdx_spec spec;
    stream_spec(&spec, "ordered");
    uint8_t *frames = simulate_n_frames(&spec.geometry, FRAMES, 0xdae0403);
    rtomo_error err;
    ck_assert(rtomo_client_send_sbdx_begin(t.c, &spec, &err) == RTOMO_OK);
    size_t n = frame_samples(&spec.geometry);
    for (int f = 0; f < FRAMES; f++)
        send_frame(t.c, &spec, f, frames + n * (size_t)f);
    ck_assert(rtomo_client_send_end(t.c, RTOMO_MSG_SBDX_END, "ordered", &err)
              == RTOMO_OK);
    daemon_wait_event(&t.in, "scan_complete", NULL, "ordered", 0);
    ck_assert_int_eq(t.in.n_images, FRAMES * (N_PLANES + 2));

    /* Published order: frame by frame, planes 0..P-1, composite, depth. */
    const char *const topics[] = {RTOMO_TOPIC_COMPOSITE, RTOMO_TOPIC_DEPTH};
    for (int i = 0; i < t.in.n_images; i++) {
        const rtomo_image_header *h = &t.in.images[i].h;
        int f = i / (N_PLANES + 2), k = i % (N_PLANES + 2);
        /* Finished side by side, each image keeps its own statistics. */
        daemon_assert_image_stats(&t.in.images[i], 1e-6);
        ck_assert_msg(h->frame == f, "image %d is of frame %lld, expected %d",
                      i, (long long)h->frame, f);
        if (k < N_PLANES) {
            ck_assert_str_eq(h->topic, RTOMO_TOPIC_PLANE);
            ck_assert_int_eq(h->plane, k);
        } else {
            ck_assert_str_eq(h->topic, topics[k - N_PLANES]);
        }
    }
    const size_t pixels = 40 * 32;
    for (int f = 0; f < FRAMES; f++) {
        engine_result want = engine_frame(&spec, frames + n * (size_t)f);
        const daemon_image *comp = daemon_find_image(
            &t.in, RTOMO_TOPIC_COMPOSITE, "ordered", f, 0);
        assert_close(comp->data, want.composite, pixels, "composite", f);
        const daemon_image *plane = daemon_find_image(
            &t.in, RTOMO_TOPIC_PLANE, "ordered", f, N_PLANES - 1);
        assert_close(plane->data, want.planes + pixels * (N_PLANES - 1),
                     pixels, "last plane", f);
        ck_assert(comp->h.latency_ms >= 0);
        engine_result_free(&want);
    }

    json_t *st = daemon_status(t.c);
    ck_assert_int_eq(json_array_size(json_object_get(st, "workers")), 3);
    json_t *rec = json_object_get(json_object_get(st, "telemetry"),
                                  "reconstruction");
    ck_assert_int_eq(json_integer_value(json_object_get(rec, "frames")),
                     FRAMES);
    ck_assert(json_real_value(json_object_get(rec, "gu_per_s")) > 0);
    ck_assert(json_real_value(json_object_get(rec, "last_latency_ms")) > 0);
    json_decref(st);
    free(frames);
    rtomo_sbdx_spec_clear(&spec);
    daemon_session_close(&t);
}
END_TEST

/* Frames on a second connection, the end on the first: the end overtakes
 * them.  With one job queued at most and frames that take the CPU longer
 * than ingest.reorder_ms each, the frames wait in ZeroMQ's queue, held
 * back by rtomod itself, long after the end arrived; the end must wait for
 * them rather than reject them as belonging to no scan. */
START_TEST(end_waits_for_frames_held_back_by_back_pressure)
{
    enum { FRAMES = 8 };
    daemon_session t;
    const char *args[] = {"--cpu-threads", "1", "--set", "queue.frames=1",
                          "--set", "ingest.reorder_ms=20", "--set",
                          "ingest.rcvhwm=1", NULL};
    daemon_session_open(&t, args, 2);
    rtomo_sbdx_spec spec;
    stream_spec(&spec, "held-back");
    /* 64x64 holes of 32x32: 4 MB frames, 84 M deposits each. */
    spec.geometry.holes_x = spec.geometry.holes_y = 64;
    spec.geometry.det_width = spec.geometry.det_height = 32;
    size_t n = frame_samples(&spec.geometry);
    uint8_t *frames = malloc(n * FRAMES);
    ck_assert(frames);
    uint64_t seed = 0xdae0404;
    for (size_t i = 0; i < n * FRAMES; i++)
        frames[i] = (uint8_t)(rtomo_random_uniform(&seed) * 256.0);

    rtomo_error err;
    ck_assert(rtomo_client_send_sbdx_begin(t.c, &spec, &err) == RTOMO_OK);
    ck_assert_msg(rtomo_client_wait_for_scan(t.c, "held-back", 0, 5000, &err)
                  == RTOMO_OK, "begin: %s", err.message);
    for (int f = 0; f < FRAMES; f++)
        send_frame_on(t.c, 1, &spec, f, frames + n * (size_t)f);
    ck_assert(rtomo_client_send_end(t.c, RTOMO_MSG_SBDX_END, "held-back",
                                    &err) == RTOMO_OK);
    daemon_wait_event(&t.in, "scan_complete", NULL, "held-back", 0);

    ck_assert_int_eq(daemon_count_images(&t.in, RTOMO_TOPIC_COMPOSITE,
                                         "held-back"), FRAMES);
    ck_assert_int_eq(daemon_counter(t.c, "rejected"), 0);
    ck_assert_int_eq(daemon_counter(t.c, "dropped"), 0);
    free(frames);
    rtomo_sbdx_spec_clear(&spec);
    daemon_session_close(&t);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {
        stream_of_frames_end_to_end,
        composite_follows_the_written_rule,
        uint16_planes_without_composite_and_frame_rejects,
        several_workers_keep_frame_order,
        end_waits_for_frames_held_back_by_back_pressure,
    };
    return daemon_run_tests("daemon_sbdx", tests,
                            (int)(sizeof tests / sizeof tests[0]), 120);
}
