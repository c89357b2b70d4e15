/*
 * test_daemon_sbdx.c — SBDX streams through the real rtomod: simulated
 * frames of point and wire objects are reconstructed and published as
 * planes, composite and depth map, each equal to what the CPU engine makes
 * of the same frame; uint16 planes without composite; frame rejects;
 * several workers reconstructing frames side by side still publish them
 * in order, with per-frame latency and GU/s in telemetry; an end that
 * overtakes frames held back by a full work queue waits for them.
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
        uint16_planes_without_composite_and_frame_rejects,
        several_workers_keep_frame_order,
        end_waits_for_frames_held_back_by_back_pressure,
    };
    return daemon_run_tests("daemon_sbdx", tests,
                            (int)(sizeof tests / sizeof tests[0]), 120);
}
