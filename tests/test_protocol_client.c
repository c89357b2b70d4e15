/*
 * test_protocol_client.c — the client library (client/rtomo_client.c)
 * against plain ZeroMQ peers played by the test itself on loopback TCP:
 * a PULL socket that decodes what the client pushes, a PUB socket that
 * publishes images and events, and a REP socket (in a thread) that answers,
 * refuses, stays silent or babbles.  No daemon is involved.
 */
#include "config.h"

#include <check.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

#include "rtomo_client.h"
#include "rtomo_sim.h"
#include "test_util.h"
#include "check_run.h"

#define RECEIVE_TIMEOUT_MS 5000

/* A socket of `type` bound to a free loopback port; its endpoint in ep. */
static void *bind_loopback(void *ctx, int type, char *ep, size_t size)
{
    void *s = zmq_socket(ctx, type);
    ck_assert_ptr_nonnull(s);
    int linger = 0;
    zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
    ck_assert_int_eq(zmq_bind(s, "tcp://127.0.0.1:*"), 0);
    ck_assert_int_eq(zmq_getsockopt(s, ZMQ_LAST_ENDPOINT, ep, &size), 0);
    return s;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

/* Receive one multipart message from a PULL socket and decode it. */
static int pull_message(void *pull, rtomo_ingest_msg *msg, zmq_msg_t *parts,
                        int *n_parts, rtomo_reject_info *why)
{
    zmq_pollitem_t item = {.socket = pull, .events = ZMQ_POLLIN};
    ck_assert_msg(zmq_poll(&item, 1, RECEIVE_TIMEOUT_MS) == 1,
                  "nothing arrived on the PULL socket");
    int n = 0, more = 1;
    while (more) {
        ck_assert_int_lt(n, 2);
        zmq_msg_init(&parts[n]);
        ck_assert_int_ge(zmq_msg_recv(&parts[n], pull, 0), 0);
        more = zmq_msg_more(&parts[n]);
        n++;
    }
    *n_parts = n;
    return rtomo_proto_decode_ingest(
        n, zmq_msg_data(&parts[0]), zmq_msg_size(&parts[0]),
        n > 1 ? zmq_msg_data(&parts[1]) : NULL,
        n > 1 ? zmq_msg_size(&parts[1]) : 0, msg, why);
}

static void close_parts(zmq_msg_t *parts, int n)
{
    for (int i = 0; i < n; i++)
        zmq_msg_close(&parts[i]);
}

static rtomo_client *open_client(const char *ingest, const char *publish,
                                 const char *control, int connections)
{
    rtomo_client_options opt;
    rtomo_client_options_init(&opt);
    opt.ingest = ingest;
    opt.publish = publish;
    opt.control = control;
    opt.connections = connections;
    opt.control_timeout_ms = 300;
    rtomo_error err;
    rtomo_client *c = rtomo_client_open(&opt, &err);
    ck_assert_msg(c != NULL, "open: %s", err.message);
    return c;
}

/* ------------------------------------------------------------ ingest ---- */

/* A whole small scan over several connections arrives intact: every
 * frame decodes, carries its own samples, and none is lost. */
START_TEST(push_scan)
{
    uint64_t s = test_seed(101, 0);
    void *ctx = zmq_ctx_new();
    char ep[256];
    void *pull = bind_loopback(ctx, ZMQ_PULL, ep, sizeof ep);
    int connections = test_rand_int(&s, 1, 4);
    rtomo_client *c = open_client(ep, NULL, NULL, connections);
    ck_assert_int_eq(rtomo_client_connections(c), connections);

    rtomo_scan_spec spec;
    rtomo_scan_spec_init(&spec);
    snprintf(spec.scan, sizeof spec.scan, "loop-%d", test_rand_int(&s, 0, 999));
    spec.geometry.det_width = test_rand_int(&s, 2, 64);
    spec.geometry.det_height = test_rand_int(&s, 1, 16);
    spec.geometry.n_proj = test_rand_int(&s, 5, 40);
    spec.n_flats = 1;
    rtomo_error err;
    ck_assert_int_eq(rtomo_client_send_scan_begin(c, &spec, &err), RTOMO_OK);

    int n_frames = spec.geometry.n_proj + 1;     /* one flat + projections */
    size_t samples = (size_t)spec.geometry.det_width * spec.geometry.det_height;
    uint16_t *data = malloc(samples * sizeof *data * (size_t)n_frames);
    for (size_t i = 0; i < samples * (size_t)n_frames; i++)
        data[i] = (uint16_t)rtomo_random_next(&s);
    for (int k = 0; k < n_frames; k++) {
        rtomo_frame_header f = {
            .type = k == 0 ? RTOMO_MSG_FLAT : RTOMO_MSG_PROJECTION,
            .index = k == 0 ? 0 : k - 1, .dtype = RTOMO_DTYPE_U16, .ndim = 2,
            .shape = {spec.geometry.det_height, spec.geometry.det_width},
            .angle = k * 0.5, .axis_shift = NAN};
        memcpy(f.scan, spec.scan, sizeof f.scan);
        ck_assert_int_eq(rtomo_client_send_frame(c, &f, data + k * samples,
                                                 samples * 2, &err), RTOMO_OK);
    }
    ck_assert_int_eq(rtomo_client_send_end(c, RTOMO_MSG_SCAN_END, spec.scan,
                                           &err), RTOMO_OK);

    /* Order holds only within one connection (PULL fair-queues between
     * them), so the begin may arrive after frames sent on other
     * connections: check that every message arrives exactly once. */
    int seen_begin = 0, seen_end = 0, n_seen = 0;
    unsigned char *seen = calloc((size_t)n_frames, 1);
    for (int m = 0; m < n_frames + 2; m++) {
        rtomo_ingest_msg msg;
        rtomo_reject_info why;
        zmq_msg_t parts[2];
        int n;
        ck_assert_msg(pull_message(pull, &msg, parts, &n, &why) == 0,
                      "received message rejected: %s", why.message);
        ck_assert_str_eq(msg.scan, spec.scan);
        if (msg.type == RTOMO_MSG_SCAN_BEGIN) {
            seen_begin++;
            ck_assert_int_eq(msg.scan_spec->geometry.n_proj,
                             spec.geometry.n_proj);
        } else if (msg.type == RTOMO_MSG_SCAN_END) {
            seen_end++;
        } else {
            int k = msg.type == RTOMO_MSG_FLAT ? 0 : (int)msg.frame.index + 1;
            ck_assert(!seen[k]);
            seen[k] = 1;
            n_seen++;
            ck_assert_int_eq(memcmp(msg.payload, data + k * samples,
                                    samples * 2), 0);
            if (msg.type == RTOMO_MSG_PROJECTION)
                ck_assert_double_eq(msg.frame.angle, k * 0.5);
        }
        rtomo_ingest_msg_clear(&msg);
        close_parts(parts, n);
    }
    ck_assert_int_eq(seen_begin, 1);
    ck_assert_int_eq(seen_end, 1);
    ck_assert_int_eq(n_seen, n_frames);
    free(seen);
    free(data);
    rtomo_client_close(c);
    zmq_close(pull);
    zmq_ctx_term(ctx);
}
END_TEST

static void count_release(void *payload, void *hint)
{
    (void)payload;
    __atomic_add_fetch((int *)hint, 1, __ATOMIC_SEQ_CST);
}

/* Zero-copy frames arrive byte for byte; the release callback runs once,
 * also when the frame is refused before sending. */
START_TEST(push_zero_copy)
{
    uint64_t s = test_seed(102, 0);
    void *ctx = zmq_ctx_new();
    char ep[256];
    void *pull = bind_loopback(ctx, ZMQ_PULL, ep, sizeof ep);
    rtomo_client *c = open_client(ep, NULL, NULL, 1);
    rtomo_frame_header f = {.type = RTOMO_MSG_SBDX_FRAME, .scan = "zc",
                            .index = 9, .dtype = RTOMO_DTYPE_U8, .ndim = 4,
                            .shape = {3, 4, 8, 16}};
    size_t size = 3 * 4 * 8 * 16;
    unsigned char *frame = malloc(size);
    for (size_t i = 0; i < size; i++)
        frame[i] = (unsigned char)rtomo_random_next(&s);
    int released = 0;
    rtomo_error err;
    ck_assert_int_eq(rtomo_client_send_frame_zero_copy(c, &f, frame, size,
                                                       count_release,
                                                       &released, &err),
                     RTOMO_OK);
    rtomo_ingest_msg msg;
    rtomo_reject_info why;
    zmq_msg_t parts[2];
    int n;
    ck_assert_int_eq(pull_message(pull, &msg, parts, &n, &why), 0);
    ck_assert_int_eq(msg.type, RTOMO_MSG_SBDX_FRAME);
    ck_assert(msg.frame.index == 9);
    ck_assert_int_eq(memcmp(msg.payload, frame, size), 0);
    rtomo_ingest_msg_clear(&msg);
    close_parts(parts, n);

    /* One byte short: refused locally, released at once, nothing sent. */
    ck_assert_int_eq(rtomo_client_send_frame_zero_copy(c, &f, frame, size - 1,
                                                       count_release,
                                                       &released, &err),
                     RTOMO_E_INVALID);
    ck_assert_ptr_nonnull(strstr(err.message, "size_mismatch"));
    rtomo_client_close(c);      /* flushes: the first release has run */
    ck_assert_int_eq(released, 2);
    zmq_pollitem_t item = {.socket = pull, .events = ZMQ_POLLIN};
    ck_assert_int_eq(zmq_poll(&item, 1, 100), 0);
    free(frame);
    zmq_close(pull);
    zmq_ctx_term(ctx);
}
END_TEST

/* Frames the daemon would reject are refused before sending, with the
 * reject name; messages without an ingest socket are a state error. */
START_TEST(push_refuses_bad_frames)
{
    void *ctx = zmq_ctx_new();
    char ep[256];
    void *pull = bind_loopback(ctx, ZMQ_PULL, ep, sizeof ep);
    rtomo_client *c = open_client(ep, NULL, NULL, 2);
    float samples[6] = {1, 2, 3, 4, 5, 6};
    samples[test_rand_int(&(uint64_t){test_seed(103, 0)}, 0, 5)] = NAN;
    rtomo_frame_header f = {.type = RTOMO_MSG_PROJECTION, .scan = "bad",
                            .index = 0, .dtype = RTOMO_DTYPE_F32, .ndim = 2,
                            .shape = {2, 3}, .angle = NAN, .axis_shift = NAN};
    rtomo_error err;
    ck_assert_int_eq(rtomo_client_send_frame(c, &f, samples, sizeof samples,
                                             &err), RTOMO_E_INVALID);
    ck_assert_ptr_nonnull(strstr(err.message, "non_finite"));
    rtomo_scan_spec spec;
    rtomo_scan_spec_init(&spec);
    snprintf(spec.scan, sizeof spec.scan, "no spaces allowed");
    spec.geometry.det_width = 4;
    spec.geometry.det_height = 4;
    spec.geometry.n_proj = 4;
    ck_assert_int_eq(rtomo_client_send_scan_begin(c, &spec, &err),
                     RTOMO_E_INVALID);
    ck_assert_ptr_nonnull(strstr(err.message, "scan"));
    /* A u16_scale that is 0 as a float (what 1e-300 became): refused
     * with the decoder's reason, not as an encoding failure. */
    rtomo_sbdx_spec sbdx;
    rtomo_sbdx_spec_init(&sbdx);
    snprintf(sbdx.scan, sizeof sbdx.scan, "sbdx");
    static const double ratio[1] = {1.0};
    sbdx.geometry.holes_x = sbdx.geometry.holes_y = 2;
    sbdx.geometry.det_width = sbdx.geometry.det_height = 2;
    sbdx.geometry.shift_m = 1;
    sbdx.geometry.n_planes = 1;
    sbdx.geometry.ratios = ratio;
    sbdx.u16_scale = (float)1e-300;
    ck_assert_int_eq(rtomo_client_send_sbdx_begin(c, &sbdx, &err),
                     RTOMO_E_INVALID);
    ck_assert_msg(strstr(err.message, "bad_field") &&
                  strstr(err.message, "output.u16_scale"), "%s",
                  err.message);
    ck_assert_int_eq(rtomo_client_send_end(c, RTOMO_MSG_DARK, "x", &err),
                     RTOMO_E_INVALID);
    ck_assert_int_eq(rtomo_client_send_raw(c, 2, "{}", 2, 1, NULL, 0, &err),
                     RTOMO_E_INVALID);
    zmq_pollitem_t item = {.socket = pull, .events = ZMQ_POLLIN};
    ck_assert_int_eq(zmq_poll(&item, 1, 100), 0);
    /* Raw bytes go out unchecked, for testing daemons. */
    ck_assert_int_eq(rtomo_client_send_raw(c, 1, "{}", 2, 2, "ab", 2, &err),
                     RTOMO_OK);
    rtomo_ingest_msg msg;
    rtomo_reject_info why;
    zmq_msg_t parts[2];
    int n;
    ck_assert_int_eq(pull_message(pull, &msg, parts, &n, &why), -1);
    ck_assert_int_eq(n, 2);
    ck_assert_int_eq(why.reason, RTOMO_REJECT_VERSION);
    close_parts(parts, n);
    rtomo_client_close(c);

    rtomo_client *sub_only = open_client(NULL, ep, NULL, 1);
    ck_assert_int_eq(rtomo_client_send_frame(sub_only, &f, samples,
                                             sizeof samples, &err),
                     RTOMO_E_STATE);
    rtomo_client_close(sub_only);
    zmq_close(pull);
    zmq_ctx_term(ctx);
}
END_TEST

/* With nobody reading, a bounded send gives up with a clear message. */
START_TEST(push_times_out)
{
    rtomo_client_options opt;
    rtomo_client_options_init(&opt);
    opt.ingest = "tcp://127.0.0.1:1";   /* nothing listens on port 1 */
    opt.send_timeout_ms = 50;
    opt.send_hwm = 1;
    opt.linger_ms = 0;
    rtomo_error err;
    rtomo_client *c = rtomo_client_open(&opt, &err);
    ck_assert_ptr_nonnull(c);
    uint8_t frame[4] = {0};
    rtomo_frame_header f = {.type = RTOMO_MSG_DARK, .scan = "t", .index = 0,
                            .dtype = RTOMO_DTYPE_U8, .ndim = 2,
                            .shape = {2, 2}};
    rtomo_status st = RTOMO_OK;
    for (int k = 0; k < 100 && st == RTOMO_OK; k++)
        st = rtomo_client_send_frame(c, &f, frame, 4, &err);
    ck_assert_int_eq(st, RTOMO_E_UNAVAILABLE);
    ck_assert_ptr_nonnull(strstr(err.message, "timed out after 50 ms"));
    rtomo_client_close(c);

    opt.ingest = "no-such-transport://x";
    ck_assert_ptr_null(rtomo_client_open(&opt, &err));
    ck_assert_int_eq(err.code, RTOMO_E_INVALID);
    ck_assert_ptr_nonnull(strstr(err.message, "no-such-transport://x"));
}
END_TEST

/* ----------------------------------------------------------- publish ---- */

static void publish(void *pub, const char *topic, const char *header,
                    const void *payload, size_t size)
{
    ck_assert_int_ge(zmq_send(pub, topic, strlen(topic), ZMQ_SNDMORE), 0);
    ck_assert_int_ge(zmq_send(pub, header, strlen(header), ZMQ_SNDMORE), 0);
    ck_assert_int_ge(zmq_send(pub, payload, size, 0), 0);
}

/* Publish events until the subscriber sees one: PUB drops everything sent
 * before a subscription arrives. */
static void wait_for_subscription(void *pub, rtomo_client *c)
{
    rtomo_event ev = {.event = "hello", .index = -1};
    char *text = rtomo_proto_encode_event(&ev);
    rtomo_published m = {0};
    rtomo_status st = RTOMO_E_UNAVAILABLE;
    for (int tries = 0; tries < 100 && st != RTOMO_OK; tries++) {
        publish(pub, "event", text, NULL, 0);
        st = rtomo_client_receive(c, &m, 50, NULL);
    }
    ck_assert_int_eq(st, RTOMO_OK);
    /* drain the surplus hellos */
    while (rtomo_client_receive(c, &m, 100, NULL) == RTOMO_OK)
        ck_assert_str_eq(m.event.event, "hello");
    rtomo_published_clear(&m);
    free(text);
}

START_TEST(subscribe_images_and_events)
{
    uint64_t s = test_seed(104, 0);
    void *ctx = zmq_ctx_new();
    char ep[256];
    void *pub = bind_loopback(ctx, ZMQ_PUB, ep, sizeof ep);
    rtomo_client *c = open_client(NULL, ep, NULL, 1);
    rtomo_error err;
    ck_assert_int_eq(rtomo_client_subscribe(c, "slice", &err), RTOMO_OK);
    ck_assert_int_eq(rtomo_client_subscribe(c, "event", &err), RTOMO_OK);
    wait_for_subscription(pub, c);

    rtomo_image_header h;
    rtomo_image_header_init(&h);
    snprintf(h.scan, sizeof h.scan, "pub");
    h.width = test_rand_int(&s, 1, 200);
    h.height = test_rand_int(&s, 1, 200);
    h.slice = test_rand_int(&s, 0, 100);
    h.count = 3;
    h.index = 2;
    size_t n = (size_t)h.width * h.height;
    float *image = malloc(n * sizeof *image);
    test_fill_normal(&s, image, n);
    char *header = rtomo_proto_encode_image_header(&h);
    publish(pub, "telemetry", "{\"protocol\":1,\"type\":\"telemetry\"}",
            NULL, 0);                           /* not subscribed */
    publish(pub, "slice", header, image, n * sizeof *image);
    rtomo_event ev = {.event = "scan_complete", .scan = "pub", .index = -1};
    char *event = rtomo_proto_encode_event(&ev);
    publish(pub, "event", event, NULL, 0);
    publish(pub, "slice", header, image, n * sizeof *image - 4);

    rtomo_published m = {0};
    ck_assert_int_eq(rtomo_client_receive(c, &m, RECEIVE_TIMEOUT_MS, &err),
                     RTOMO_OK);
    ck_assert_str_eq(m.topic, "slice");
    ck_assert_int_eq(m.kind, RTOMO_PUBLISHED_IMAGE);
    ck_assert_int_eq(m.image.width, h.width);
    ck_assert_int_eq(m.image.height, h.height);
    ck_assert_int_eq(m.image.slice, h.slice);
    ck_assert_int_eq(m.image.index, 2);
    ck_assert_uint_eq(m.payload_size, n * sizeof *image);
    ck_assert_uint_eq((uintptr_t)m.payload % 16, 0);
    ck_assert_int_eq(memcmp(m.payload, image, m.payload_size), 0);
    ck_assert(json_is_object(m.json));
    ck_assert_int_eq(rtomo_client_receive(c, &m, RECEIVE_TIMEOUT_MS, &err),
                     RTOMO_OK);
    ck_assert_int_eq(m.kind, RTOMO_PUBLISHED_EVENT);
    ck_assert_str_eq(m.event.event, "scan_complete");
    ck_assert_ptr_null(m.payload);
    ck_assert_int_eq(rtomo_client_receive(c, &m, RECEIVE_TIMEOUT_MS, &err),
                     RTOMO_E_BACKEND);
    ck_assert_ptr_nonnull(strstr(err.message, "size_mismatch"));

    double t0 = now_ms();
    ck_assert_int_eq(rtomo_client_receive(c, &m, 150, &err),
                     RTOMO_E_UNAVAILABLE);
    ck_assert_double_ge(now_ms() - t0, 140);
    rtomo_published_clear(&m);
    free(image);
    free(header);
    free(event);
    rtomo_client_close(c);
    zmq_close(pub);
    zmq_ctx_term(ctx);
}
END_TEST

/* ----------------------------------------------------------- control ---- */

/* A stand-in daemon on a REP socket in its own thread: answers requests
 * with `script` in order (the last reply repeated); a NULL entry answers
 * only after 1.5 s, long after the client gave up (300 ms): at 400 ms a
 * CI machine under load once woke the client's poll late enough to find
 * the answer there. */
typedef struct responder {
    void *ctx;
    const char *const *script;
    int n;
    char endpoint[256];
    int ready;
    int late;                   /* late answers sent (NULL entries) */
    pthread_mutex_t lock;
    pthread_cond_t cond;
    pthread_t thread;
} responder;

static void *respond(void *arg)
{
    responder *r = arg;
    void *rep = bind_loopback(r->ctx, ZMQ_REP, r->endpoint, sizeof r->endpoint);
    pthread_mutex_lock(&r->lock);
    r->ready = 1;
    pthread_cond_signal(&r->cond);
    pthread_mutex_unlock(&r->lock);
    for (int k = 0;; k++) {
        char buf[512];
        if (zmq_recv(rep, buf, sizeof buf - 1, 0) < 0)
            break;              /* the context was shut down */
        const char *reply = r->script[k < r->n ? k : r->n - 1];
        if (!reply) {
            struct timespec pause = {1, 500 * 1000 * 1000};
            nanosleep(&pause, NULL);
            reply = "{\"ok\":true}";
        }
        zmq_send(rep, reply, strlen(reply), 0);
        if (!r->script[k < r->n ? k : r->n - 1]) {
            pthread_mutex_lock(&r->lock);
            r->late++;
            pthread_cond_signal(&r->cond);
            pthread_mutex_unlock(&r->lock);
        }
    }
    zmq_close(rep);
    return NULL;
}

static void start_responder(responder *r, const char *const *script, int n)
{
    *r = (responder){.ctx = zmq_ctx_new(), .script = script, .n = n};
    pthread_mutex_init(&r->lock, NULL);
    pthread_cond_init(&r->cond, NULL);
    ck_assert_int_eq(pthread_create(&r->thread, NULL, respond, r), 0);
    pthread_mutex_lock(&r->lock);
    while (!r->ready)
        pthread_cond_wait(&r->cond, &r->lock);
    pthread_mutex_unlock(&r->lock);
}

static void stop_responder(responder *r)
{
    zmq_ctx_shutdown(r->ctx);
    pthread_join(r->thread, NULL);
    zmq_ctx_term(r->ctx);
    pthread_mutex_destroy(&r->lock);
    pthread_cond_destroy(&r->cond);
}

/* Answers, refusals, silence and babble; the REQ socket survives them. */
START_TEST(control_requests)
{
    static const char *const script[] = {
        "{\"ok\":true,\"pong\":true,\"version\":\"0.1.0\"}",
        "{\"ok\":false,\"error\":\"bad_argument\",\"message\":\"no key zz\"}",
        NULL, "this is not JSON", "{\"ok\":true,\"n\":5}"};
    responder r;
    start_responder(&r, script, 5);
    rtomo_client *c = open_client(NULL, NULL, r.endpoint, 1);
    json_t *reply;
    rtomo_error err;
    ck_assert_int_eq(rtomo_client_command(c, "ping", &reply, &err), RTOMO_OK);
    ck_assert(json_is_true(json_object_get(reply, "pong")));
    json_decref(reply);

    ck_assert_int_eq(rtomo_client_command(c, "set_config", &reply, &err),
                     RTOMO_E_INVALID);
    ck_assert_ptr_nonnull(reply);
    ck_assert_ptr_nonnull(strstr(err.message, "bad_argument: no key zz"));
    json_decref(reply);

    double t0 = now_ms();
    ck_assert_int_eq(rtomo_client_command(c, "status", &reply, &err),
                     RTOMO_E_UNAVAILABLE);
    ck_assert_double_ge(now_ms() - t0, 290);
    ck_assert_ptr_null(reply);
    ck_assert_ptr_nonnull(strstr(err.message, "did not answer within 300 ms"));
    ck_assert_ptr_nonnull(strstr(err.message, r.endpoint));
    /* The stand-in answers one request at a time: the next ones wait for
     * its late answer to the abandoned one. */
    pthread_mutex_lock(&r.lock);
    while (r.late < 1)
        pthread_cond_wait(&r.cond, &r.lock);
    pthread_mutex_unlock(&r.lock);

    /* The socket was recreated, so the next requests go through. */
    ck_assert_int_eq(rtomo_client_command(c, "status", &reply, &err),
                     RTOMO_E_BACKEND);
    ck_assert_ptr_null(reply);
    ck_assert_ptr_nonnull(strstr(err.message, "malformed"));
    ck_assert_int_eq(rtomo_client_command(c, "status", &reply, &err), RTOMO_OK);
    ck_assert_int_eq(json_integer_value(json_object_get(reply, "n")), 5);
    json_decref(reply);
    rtomo_client_close(c);

    rtomo_client *none = open_client(NULL, r.endpoint, NULL, 1);
    ck_assert_int_eq(rtomo_client_command(none, "ping", &reply, &err),
                     RTOMO_E_STATE);
    ck_assert_int_eq(rtomo_client_wait_for_scan(none, "w", 0, 10, &err),
                     RTOMO_E_STATE);
    rtomo_client_close(none);
    stop_responder(&r);
}
END_TEST

/* wait_for_scan follows the daemon's status until the scan is active and
 * holds enough frames, and gives up on a stalled count. */
START_TEST(wait_for_scan_progress)
{
    static const char *const script[] = {
        "{\"ok\":true,\"scan\":null}",
        "{\"ok\":true,\"scan\":{\"id\":\"other\",\"received\":50}}",
        "{\"ok\":true,\"scan\":{\"id\":\"w\",\"received\":0,\"darks\":1}}",
        "{\"ok\":true,\"scan\":{\"id\":\"w\",\"received\":2,\"darks\":2,"
        "\"flats\":1}}",
        "{\"ok\":true,\"scan\":{\"id\":\"w\",\"received\":7,\"darks\":2,"
        "\"flats\":1}}"};
    responder r;
    start_responder(&r, script, 5);
    rtomo_client *c = open_client(NULL, NULL, r.endpoint, 1);
    rtomo_error err;
    ck_assert_int_eq(rtomo_client_wait_for_scan(c, "w", 0, 1000, &err),
                     RTOMO_OK);             /* the third status */
    ck_assert_int_eq(rtomo_client_wait_for_scan(c, "w", 10, 1000, &err),
                     RTOMO_OK);             /* the fifth */
    double t0 = now_ms();
    ck_assert_int_eq(rtomo_client_wait_for_scan(c, "w", 11, 100, &err),
                     RTOMO_E_UNAVAILABLE);
    ck_assert_double_ge(now_ms() - t0, 100);
    ck_assert_ptr_nonnull(strstr(err.message, "stalled at 10 of 11"));
    ck_assert_int_eq(rtomo_client_wait_for_scan(c, "v", 0, 50, &err),
                     RTOMO_E_UNAVAILABLE);
    ck_assert_ptr_nonnull(strstr(err.message, "did not become active"));
    rtomo_client_close(c);
    stop_responder(&r);
}
END_TEST

/* ------------------------------------------------------ scan outcome ---- */

/* One daemon's answer, parsed from JSON text. */
static rtomo_scan_outcome outcome_of(const char *text)
{
    json_error_t jerr;
    json_t *j = json_loads(text, 0, &jerr);
    ck_assert_msg(j != NULL, "test JSON: %s", jerr.text);
    rtomo_scan_outcome o;
    rtomo_error err;
    ck_assert_msg(rtomo_scan_outcome_from_json(j, &o, &err) == RTOMO_OK,
                  "from_json: %s", err.message);
    json_decref(j);
    return o;
}

static rtomo_scan_verdict verdict_of(const rtomo_scan_outcome *o,
                                     char *line, size_t size)
{
    return rtomo_scan_outcome_verdict(o, line, size);
}

/* The success rule: complete and nothing rejected, dropped, missing or
 * incomplete; each departure has its verdict and its line says why. */
START_TEST(outcome_success_rule)
{
    char line[1024];
    rtomo_scan_outcome o = outcome_of(
        "{\"id\":\"s1\",\"kind\":\"tomo\",\"state\":\"complete\",\"final\":true,"
        "\"frames\":368,\"rejected\":0,\"rejects\":{},\"dropped\":0,"
        "\"missing\":0,\"images\":8,\"incomplete\":false,\"reason\":null,"
        "\"code\":null}");
    ck_assert_int_eq(verdict_of(&o, line, sizeof line),
                     RTOMO_VERDICT_SUCCEEDED);
    ck_assert_str_eq(line, "scan s1 complete: 368 frames accepted, 8 images "
                           "published");
    ck_assert_str_eq(o.kind, "tomo");

    static const char *const partial[] = {"\"rejected\":1", "\"dropped\":2",
                                          "\"missing\":3"};
    for (int i = 0; i < 3; i++) {
        char text[512];
        snprintf(text, sizeof text, "{\"id\":\"s1\",\"state\":\"complete\","
                 "\"final\":true,\"frames\":5,%s}", partial[i]);
        rtomo_scan_outcome p = outcome_of(text);
        ck_assert_int_eq(verdict_of(&p, line, sizeof line),
                         RTOMO_VERDICT_PARTIAL);
        ck_assert_msg(strstr(line, "complete with losses"), "%s", line);
    }
    rtomo_scan_outcome inc = outcome_of(
        "{\"id\":\"s1\",\"state\":\"complete\",\"final\":true,\"frames\":50,"
        "\"missing\":462,\"incomplete\":true,\"code\":\"idle_timeout\","
        "\"reason\":\"nothing arrived for 30000 ms\"}");
    ck_assert_int_eq(verdict_of(&inc, line, sizeof line),
                     RTOMO_VERDICT_FAILED);
    ck_assert_str_eq(line, "scan s1 complete (incomplete): idle_timeout: "
                           "nothing arrived for 30000 ms; 50 frames "
                           "accepted, 462 missing, 0 images published");

    rtomo_scan_outcome refused = outcome_of(
        "{\"id\":\"s1\",\"kind\":null,\"state\":\"refused\",\"final\":true,"
        "\"frames\":0,\"rejected\":513,\"rejects\":{\"bad_state\":1,"
        "\"unknown_scan\":512},\"code\":\"bad_state\",\"reason\":\"another "
        "scan is active\"}");
    ck_assert_int_eq(verdict_of(&refused, line, sizeof line),
                     RTOMO_VERDICT_FAILED);
    ck_assert_str_eq(line, "scan s1 refused: bad_state: another scan is "
                           "active; 0 frames accepted, 513 rejected "
                           "(bad_state: 1, unknown_scan: 512)");
    ck_assert_str_eq(refused.kind, "");

    rtomo_scan_outcome unknown = outcome_of(
        "{\"id\":\"s1\",\"state\":\"unknown\",\"final\":true}");
    ck_assert_int_eq(verdict_of(&unknown, line, sizeof line),
                     RTOMO_VERDICT_FAILED);
    ck_assert_msg(strstr(line, "no record"), "%s", line);
    rtomo_scan_outcome later = outcome_of(
        "{\"id\":\"s1\",\"state\":\"reconstructing\",\"final\":false,"
        "\"frames\":9}");
    ck_assert_int_eq(verdict_of(&later, NULL, 0), RTOMO_VERDICT_PENDING);
    rtomo_scan_outcome newer = outcome_of(
        "{\"id\":\"s1\",\"state\":\"archived\",\"final\":true}");
    ck_assert_int_eq(newer.state, RTOMO_SCAN_OTHER);
    ck_assert_int_eq(verdict_of(&newer, NULL, 0), RTOMO_VERDICT_FAILED);
    rtomo_scan_outcome none;
    rtomo_scan_outcome_init(&none, "s1");
    ck_assert_int_eq(verdict_of(&none, line, sizeof line),
                     RTOMO_VERDICT_PENDING);

    /* A line never overflows its buffer. */
    char small[24];
    memset(small, 'x', sizeof small);
    verdict_of(&refused, small, 20);
    ck_assert_uint_eq(strlen(small), 19);
    ck_assert_int_eq(small[20], 'x');
}
END_TEST

/* Malformed answers are errors, not outcomes. */
START_TEST(outcome_malformed)
{
    static const char *const bad[] = {
        "[]", "{\"id\":\"s\",\"final\":true}",
        "{\"id\":\"s\",\"state\":\"complete\"}",
        "{\"id\":\"s\",\"state\":\"complete\",\"final\":1}",
        "{\"id\":\"s\",\"state\":\"complete\",\"final\":true,\"frames\":-1}",
        "{\"id\":\"s\",\"state\":\"complete\",\"final\":true,\"frames\":1.5}",
        "{\"id\":\"s\",\"state\":\"complete\",\"final\":true,\"reason\":3}",
        "{\"id\":\"s\",\"state\":\"complete\",\"final\":true,"
        "\"rejects\":{\"bad_json\":\"2\"}}"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        json_t *j = json_loads(bad[i], 0, NULL);
        ck_assert_ptr_nonnull(j);
        rtomo_scan_outcome o;
        rtomo_error err;
        ck_assert_msg(rtomo_scan_outcome_from_json(j, &o, &err) ==
                      RTOMO_E_BACKEND, "accepted %s", bad[i]);
        json_decref(j);
    }
}
END_TEST

/* Daemons sharing a stream: counts and rejects add up, the worst state
 * wins with its reason, and the merge is final only when every answer
 * is. */
START_TEST(outcome_merge)
{
    rtomo_scan_outcome a = outcome_of(
        "{\"id\":\"f\",\"kind\":\"tomo\",\"state\":\"complete\",\"final\":true,"
        "\"frames\":100,\"rejected\":2,\"rejects\":{\"shape_mismatch\":2},"
        "\"images\":4}");
    rtomo_scan_outcome b = outcome_of(
        "{\"id\":\"f\",\"kind\":\"tomo\",\"state\":\"aborted\",\"final\":true,"
        "\"frames\":60,\"rejected\":3,\"rejects\":{\"shape_mismatch\":1,"
        "\"duplicate_frame\":2},\"dropped\":60,\"code\":\"aborted\","
        "\"reason\":\"aborted by a control request\"}");
    rtomo_scan_outcome m;
    rtomo_scan_outcome_init(&m, "f");
    rtomo_scan_outcome_merge(&m, &a);
    rtomo_scan_outcome_merge(&m, &b);
    ck_assert_int_eq(m.daemons, 2);
    ck_assert_int_eq(m.state, RTOMO_SCAN_ABORTED);
    ck_assert(m.final);
    ck_assert_int_eq(m.frames, 160);
    ck_assert_int_eq(m.rejected, 5);
    ck_assert_int_eq(m.dropped, 60);
    ck_assert_int_eq(m.images, 4);
    ck_assert_int_eq(m.n_rejects, 2);
    ck_assert_str_eq(m.rejects[0].name, "shape_mismatch");
    ck_assert_int_eq(m.rejects[0].count, 3);
    ck_assert_str_eq(m.rejects[1].name, "duplicate_frame");
    ck_assert_int_eq(m.rejects[1].count, 2);
    ck_assert_str_eq(m.code, "aborted");
    char line[1024];
    ck_assert_int_eq(rtomo_scan_outcome_verdict(&m, line, sizeof line),
                     RTOMO_VERDICT_FAILED);
    ck_assert_msg(strstr(line, "2 daemons"), "%s", line);

    /* Order does not matter for the state, and one daemon still working
     * keeps the whole unsettled, whatever the others say. */
    rtomo_scan_outcome busy = outcome_of(
        "{\"id\":\"f\",\"state\":\"reconstructing\",\"final\":false}");
    rtomo_scan_outcome early = outcome_of(
        "{\"id\":\"f\",\"state\":\"acquiring\",\"final\":false}");
    rtomo_scan_outcome refused = outcome_of(
        "{\"id\":\"f\",\"state\":\"refused\",\"final\":true,\"rejected\":1,"
        "\"code\":\"over_budget\",\"reason\":\"needs 9 GiB\"}");
    rtomo_scan_outcome unknown = outcome_of(
        "{\"id\":\"f\",\"state\":\"unknown\",\"final\":true}");
    const rtomo_scan_outcome *orders[][3] = {
        {&busy, &refused, &early}, {&early, &busy, &refused},
        {&refused, &early, &busy}};
    for (int k = 0; k < 3; k++) {
        rtomo_scan_outcome_init(&m, "f");
        for (int i = 0; i < 3; i++)
            rtomo_scan_outcome_merge(&m, orders[k][i]);
        ck_assert_int_eq(m.state, RTOMO_SCAN_ACQUIRING);
        ck_assert(!m.final);
        ck_assert_int_eq(rtomo_scan_outcome_verdict(&m, NULL, 0),
                         RTOMO_VERDICT_PENDING);
    }
    const rtomo_scan_outcome *finals[] = {&a, &unknown, &refused};
    rtomo_scan_outcome_init(&m, "f");
    for (int i = 0; i < 3; i++)
        rtomo_scan_outcome_merge(&m, finals[i]);
    ck_assert_int_eq(m.state, RTOMO_SCAN_REFUSED);
    ck_assert_str_eq(m.reason, "needs 9 GiB");
    rtomo_scan_outcome_init(&m, "f");
    rtomo_scan_outcome_merge(&m, &a);
    rtomo_scan_outcome_merge(&m, &unknown);
    ck_assert_int_eq(m.state, RTOMO_SCAN_UNKNOWN);  /* one never saw it */
    ck_assert(m.final);
}
END_TEST

/* Two stand-in daemons answer "scan": the client asks both, polls until
 * both are final (a daemon without a record yet counts as not final),
 * and merges; it gives up after its timeout with the last answers. */
START_TEST(outcome_over_control)
{
    static const char *const first[] = {
        "{\"ok\":true,\"scan\":{\"id\":\"f\",\"state\":\"reconstructing\","
        "\"final\":false,\"frames\":10}}",
        "{\"ok\":true,\"scan\":{\"id\":\"f\",\"state\":\"complete\","
        "\"final\":true,\"frames\":10,\"images\":2}}"};
    static const char *const second[] = {
        "{\"ok\":true,\"scan\":{\"id\":\"f\",\"state\":\"unknown\","
        "\"final\":true}}",
        "{\"ok\":true,\"scan\":{\"id\":\"f\",\"state\":\"unknown\","
        "\"final\":true}}",
        "{\"ok\":true,\"scan\":{\"id\":\"f\",\"state\":\"complete\","
        "\"final\":true,\"frames\":9,\"images\":2,\"rejected\":1,"
        "\"rejects\":{\"duplicate_frame\":1}}}"};
    responder r1, r2;
    start_responder(&r1, first, 2);
    start_responder(&r2, second, 3);
    char controls[600];
    snprintf(controls, sizeof controls, "%s,%s", r1.endpoint, r2.endpoint);
    rtomo_client *c = open_client(NULL, NULL, controls, 1);
    rtomo_scan_outcome o;
    rtomo_error err;
    ck_assert_msg(rtomo_client_scan_outcome(c, "f", 5000, &o, &err) ==
                  RTOMO_OK, "%s", err.message);
    ck_assert_int_eq(o.daemons, 2);
    ck_assert_int_eq(o.state, RTOMO_SCAN_COMPLETE);
    ck_assert_int_eq(o.frames, 19);
    ck_assert_int_eq(o.images, 4);
    ck_assert_int_eq(o.rejected, 1);
    ck_assert_int_eq(rtomo_scan_outcome_verdict(&o, NULL, 0),
                     RTOMO_VERDICT_PARTIAL);
    rtomo_client_close(c);
    stop_responder(&r1);
    stop_responder(&r2);

    /* Never final: the wait ends at its timeout, with the last answer. */
    static const char *const stuck[] = {
        "{\"ok\":true,\"scan\":{\"id\":\"g\",\"state\":\"acquiring\","
        "\"final\":false,\"frames\":3}}"};
    start_responder(&r1, stuck, 1);
    c = open_client(NULL, NULL, r1.endpoint, 1);
    double t0 = now_ms();
    ck_assert_int_eq(rtomo_client_scan_outcome(c, "g", 150, &o, &err),
                     RTOMO_E_UNAVAILABLE);
    ck_assert_double_ge(now_ms() - t0, 150);
    ck_assert_double_lt(now_ms() - t0, 2000);
    ck_assert_int_eq(o.daemons, 1);
    ck_assert_int_eq(o.frames, 3);
    ck_assert_msg(strstr(err.message, "still acquiring"), "%s", err.message);
    /* Asked once (timeout 0), the answer comes back as it is. */
    ck_assert_int_eq(rtomo_client_scan_outcome(c, "g", 0, &o, &err),
                     RTOMO_OK);
    ck_assert_int_eq(o.state, RTOMO_SCAN_ACQUIRING);
    ck_assert_int_eq(rtomo_client_scan_outcome(c, "", 0, &o, &err),
                     RTOMO_E_INVALID);
    /* An answer about another scan is not this scan's. */
    ck_assert_int_eq(rtomo_client_scan_outcome(c, "h", 0, &o, &err),
                     RTOMO_E_BACKEND);
    ck_assert_int_eq(o.daemons, 0);
    rtomo_client_close(c);
    stop_responder(&r1);

    /* A daemon that only rejected messages of the scan (a begin it could
     * not decode) has them all: "unknown" with rejects is an answer, read
     * once its counts hold still. */
    static const char *const rejected[] = {
        "{\"ok\":true,\"scan\":{\"id\":\"n\",\"state\":\"unknown\","
        "\"final\":true,\"rejected\":2,\"rejects\":{\"bad_field\":1,"
        "\"unknown_scan\":1}}}"};
    start_responder(&r1, rejected, 1);
    c = open_client(NULL, NULL, r1.endpoint, 1);
    t0 = now_ms();
    ck_assert_int_eq(rtomo_client_scan_outcome(c, "n", 10000, &o, &err),
                     RTOMO_OK);
    ck_assert_double_lt(now_ms() - t0, 3000);
    char line[512];
    ck_assert_int_eq(rtomo_scan_outcome_verdict(&o, line, sizeof line),
                     RTOMO_VERDICT_FAILED);
    ck_assert_msg(strstr(line, "no message of it was accepted"), "%s", line);
    rtomo_client_close(c);
    stop_responder(&r1);

    /* Refusals of the request itself are errors. */
    static const char *const refuse[] = {
        "{\"ok\":false,\"error\":\"unknown_command\",\"message\":\"no scan\"}"};
    start_responder(&r1, refuse, 1);
    c = open_client(NULL, NULL, r1.endpoint, 1);
    ck_assert_int_eq(rtomo_client_scan_outcome(c, "g", 1000, &o, &err),
                     RTOMO_E_INVALID);
    ck_assert_int_eq(o.daemons, 0);
    rtomo_client_close(c);
    stop_responder(&r1);
    rtomo_client *none = open_client(NULL, r1.endpoint, NULL, 1);
    ck_assert_int_eq(rtomo_client_scan_outcome(none, "g", 10, &o, &err),
                     RTOMO_E_STATE);
    rtomo_client_close(none);
}
END_TEST

static Suite *client_suite(void)
{
    Suite *suite = suite_create("protocol client");
    TCase *ingest = tcase_create("ingest");
    tcase_add_test(ingest, push_scan);
    tcase_add_test(ingest, push_zero_copy);
    tcase_add_test(ingest, push_refuses_bad_frames);
    tcase_add_test(ingest, push_times_out);
    suite_add_tcase(suite, ingest);
    TCase *pub = tcase_create("publish");
    tcase_add_test(pub, subscribe_images_and_events);
    suite_add_tcase(suite, pub);
    TCase *control = tcase_create("control");
    tcase_add_test(control, control_requests);
    tcase_add_test(control, wait_for_scan_progress);
    suite_add_tcase(suite, control);
    TCase *outcome = tcase_create("outcome");
    tcase_add_test(outcome, outcome_success_rule);
    tcase_add_test(outcome, outcome_malformed);
    tcase_add_test(outcome, outcome_merge);
    tcase_add_test(outcome, outcome_over_control);
    suite_add_tcase(suite, outcome);
    return suite;
}

int main(void)
{
    test_base_seed();
    return rtomo_check_run(client_suite());
}
