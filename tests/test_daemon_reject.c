/*
 * test_daemon_reject.c — bad ingest input never crashes, stalls or
 * corrupts rtomod: every kind of bad message, sent in the middle of a good
 * scan, is rejected with its specific reason on the event topic and in the
 * status counters (naming the scan whenever the header does), and the
 * scan still reconstructs exactly as the engine
 * does from its good frames; so does the next scan.  A flood of bad
 * messages does not keep control from answering.
 */
#include "config.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "daemon_harness.h"

#define SCAN "victim"
#define WIDTH 64
#define HEIGHT 3
#define N_PROJ 90
/* ingest.max_message_mb for this test: frames of WIDTH x HEIGHT fit. */
#define MAX_MB "0.01"
#define MAX_BYTES 10485

typedef struct bad_message {
    const char *what;
    const char *reason;         /* the reject expected */
    const char *header;         /* NULL: built by the case itself */
    int n_parts;                /* 1, 2 or 3 */
    size_t payload_size;
    int payload_kind;           /* 0 zeros, 1 float32 ones, 2 float32 NaN */
} bad_message;

/* A frame header of the victim scan with the given fields. */
#define FRAME(type, fields)                                      \
    "{\"protocol\": 1, \"type\": \"" type "\", \"scan\": \"" SCAN \
    "\", " fields "}"
#define U16_SHAPE "\"dtype\": \"uint16\", \"shape\": [3, 64]"
#define F32_SHAPE "\"dtype\": \"float32\", \"shape\": [3, 64]"
#define U16_BYTES (WIDTH * HEIGHT * 2)
#define F32_BYTES (WIDTH * HEIGHT * 4)

static const bad_message bad_messages[] = {
    {"one part for a frame", "bad_parts",
     FRAME("projection", "\"index\": 50, " U16_SHAPE), 1, 0, 0},
    {"three parts", "bad_parts",
     FRAME("projection", "\"index\": 50, " U16_SHAPE), 3, U16_BYTES, 0},
    {"header not JSON", "bad_json", "{\"protocol\": 1, \"type\": ", 2,
     U16_BYTES, 0},
    {"protocol 2", "bad_version",
     "{\"protocol\": 2, \"type\": \"scan_end\", \"scan\": \"" SCAN "\"}", 1, 0,
     0},
    {"unknown type", "unknown_type",
     "{\"protocol\": 1, \"type\": \"teleport\", \"scan\": \"" SCAN "\"}", 1, 0,
     0},
    {"no index", "bad_field", FRAME("projection", U16_SHAPE), 2, U16_BYTES, 0},
    {"wrong shape", "shape_mismatch",
     FRAME("projection", "\"index\": 50, \"dtype\": \"uint16\", "
                         "\"shape\": [3, 63]"), 2, 3 * 63 * 2, 0},
    {"wrong dtype", "dtype_mismatch",
     FRAME("projection", "\"index\": 50, " F32_SHAPE), 2, F32_BYTES, 1},
    {"payload size", "size_mismatch",
     FRAME("projection", "\"index\": 50, " U16_SHAPE), 2, 100, 0},
    {"unknown scan", "unknown_scan",
     "{\"protocol\": 1, \"type\": \"projection\", \"scan\": \"ghost\", "
     "\"index\": 50, " U16_SHAPE "}", 2, U16_BYTES, 0},
    {"index past the scan", "index_out_of_range",
     FRAME("projection", "\"index\": 90, " U16_SHAPE), 2, U16_BYTES, 0},
    {"duplicate", "duplicate_frame",
     FRAME("projection", "\"index\": 3, " U16_SHAPE), 2, U16_BYTES, 0},
    {"payload over the maximum", "oversize",
     FRAME("projection", "\"index\": 50, " U16_SHAPE), 2, MAX_BYTES + 1000, 0},
    {"header over 64 KiB", "oversize", NULL, 2, U16_BYTES, 0},
    {"NaN in a float frame", "non_finite",
     FRAME("projection", "\"index\": 50, " F32_SHAPE), 2, F32_BYTES, 2},
    {"dark after projections", "bad_state",
     FRAME("dark", "\"index\": 0, " U16_SHAPE), 2, U16_BYTES, 0},
    /* bad_field: a field outside its documented range, also one that
     * depends on another field of the same message (PROTOCOL.md 4). */
    {"axis_shift past the width", "bad_field",
     FRAME("projection", "\"index\": 50, " U16_SHAPE
                         ", \"axis_shift\": 64.5"), 2, U16_BYTES, 0},
    {"begin axis_shift[1]", "bad_field",
     "{\"protocol\": 1, \"type\": \"scan_begin\", \"scan\": \"other\", "
     "\"detector\": {\"width\": 16, \"height\": 1}, \"projections\": 2, "
     "\"axis_shift\": [0, 17]}", 1, 0, 0},
    {"ROI outside slice_size", "bad_field",
     "{\"protocol\": 1, \"type\": \"scan_begin\", \"scan\": \"other\", "
     "\"detector\": {\"width\": 16, \"height\": 1}, \"projections\": 8, "
     "\"reconstruction\": {\"slice_size\": 32, \"roi\": [0, 0, 33, 1]}}",
     1, 0, 0},
    {"SBDX ratio 0", "bad_field",
     "{\"protocol\": 1, \"type\": \"sbdx_begin\", \"scan\": \"other\", "
     "\"holes\": [4, 4], \"detector\": {\"width\": 4, \"height\": 4}, "
     "\"shift\": 2, \"ratios\": [1, 0]}", 1, 0, 0},
    {"SBDX ratio 65", "bad_field",
     "{\"protocol\": 1, \"type\": \"sbdx_begin\", \"scan\": \"other\", "
     "\"holes\": [4, 4], \"detector\": {\"width\": 4, \"height\": 4}, "
     "\"shift\": 2, \"ratios\": [65]}", 1, 0, 0},
    {"u16_scale 1e-300", "bad_field",
     "{\"protocol\": 1, \"type\": \"sbdx_begin\", \"scan\": \"other\", "
     "\"holes\": [4, 4], \"detector\": {\"width\": 4, \"height\": 4}, "
     "\"shift\": 2, \"ratios\": [1], \"output\": {\"planes\": "
     "\"uint16\", \"u16_scale\": 1e-300}}", 1, 0, 0},
    /* Other scans may begin while one acquires; the same id may not. */
    {"begin of an id that is acquiring", "bad_state",
     "{\"protocol\": 1, \"type\": \"scan_begin\", \"scan\": \"" SCAN "\", "
     "\"detector\": {\"width\": 16, \"height\": 1}, \"projections\": 8}", 1,
     0, 0},
};
#define N_BAD (sizeof bad_messages / sizeof bad_messages[0])

static void *make_payload(const bad_message *m)
{
    void *p = calloc(1, m->payload_size + 4);
    ck_assert(p);
    float *f = p;
    for (size_t i = 0; m->payload_kind && i < m->payload_size / 4; i++)
        f[i] = 1.0f;
    if (m->payload_kind == 2)
        f[m->payload_size / 4 / 2] = NAN;
    return p;
}

/* A header past RTOMO_HEADER_MAX: a valid frame padded with a long
 * string. */
static char *huge_header(void)
{
    size_t pad = RTOMO_HEADER_MAX + 100;
    char *h = malloc(pad + 256);
    ck_assert(h);
    int n = sprintf(h, FRAME("projection", "\"index\": 50, " U16_SHAPE
                                           ", \"note\": \""));
    memset(h + n, 'x', pad);
    strcpy(h + n + pad, "\"}");
    return h;
}

/* Three parts cannot go through the client library (it speaks the
 * protocol); a plain PUSH socket sends them. */
static void send_three_parts(const daemon_proc *d, const char *header,
                             const void *payload, size_t size)
{
    void *ctx = zmq_ctx_new();
    void *push = zmq_socket(ctx, ZMQ_PUSH);
    int linger = DAEMON_TIMEOUT_MS;
    zmq_setsockopt(push, ZMQ_LINGER, &linger, sizeof linger);
    ck_assert(zmq_connect(push, d->ingest) == 0);
    ck_assert(zmq_send(push, header, strlen(header), ZMQ_SNDMORE) >= 0);
    ck_assert(zmq_send(push, payload, size, ZMQ_SNDMORE) >= 0);
    ck_assert(zmq_send(push, "extra", 5, 0) >= 0);
    zmq_close(push);
    zmq_ctx_term(ctx);
}

static void send_bad(const daemon_proc *d, rtomo_client *c,
                     const bad_message *m)
{
    void *payload = make_payload(m);
    char *header = m->header ? strdup(m->header) : huge_header();
    rtomo_error err;
    if (m->n_parts == 3)
        send_three_parts(d, header, payload, m->payload_size);
    else
        ck_assert_msg(rtomo_client_send_raw(c, 0, header, strlen(header),
                                            m->n_parts, payload,
                                            m->payload_size, &err) == RTOMO_OK,
                      "%s: %s", m->what, err.message);
    free(header);
    free(payload);
}

static void check_slices(daemon_inbox *in, const daemon_scan *s,
                         const char *id)
{
    const int rows[HEIGHT] = {0, 1, 2};
    daemon_wait_images(in, RTOMO_TOPIC_SLICE, id, HEIGHT);
    float *ref = daemon_reference_slices(s, rows, HEIGHT, NULL, NULL);
    const size_t pixels = WIDTH * WIDTH;
    for (int i = 0; i < HEIGHT; i++) {
        const daemon_image *im = daemon_find_image(in, RTOMO_TOPIC_SLICE, id,
                                                   -1, i);
        ck_assert(im && im->h.slice == rows[i]);
        double diff = test_max_abs_diff(im->data, ref + pixels * i, pixels);
        ck_assert_msg(diff <= 1e-5 * test_max_abs(ref + pixels * i, pixels),
                      "scan %s slice %d differs from the engine by %g", id, i,
                      diff);
    }
    free(ref);
}

START_TEST(every_bad_input_is_rejected_and_harmless)
{
    daemon_session t;
    const char *args[] = {"--set", "ingest.max_message_mb=" MAX_MB, NULL};
    daemon_session_open(&t, args, 1);
    rtomo_client *c = t.c;
    daemon_inbox *in = &t.in;

    /* A begin whose ROI is outside the grid of the daemon's configured
     * slice size (here the default, the detector width): the daemon's
     * verdict with its settings, bad_geometry (PROTOCOL.md 4). */
    const char *bad_begin =
        "{\"protocol\": 1, \"type\": \"scan_begin\", \"scan\": \"bad-roi\", "
        "\"detector\": {\"width\": 16, \"height\": 1}, \"projections\": 8, "
        "\"reconstruction\": {\"roi\": [0, 0, 500, 500]}}";
    rtomo_error err;
    ck_assert(rtomo_client_send_raw(c, 0, bad_begin, strlen(bad_begin), 1,
                                    NULL, 0, &err) == RTOMO_OK);
    const rtomo_event *ev = daemon_wait_event(in, "rejected", NULL, NULL, 0);
    ck_assert_msg(strcmp(ev->reason, "bad_geometry") == 0,
                  "a begin with an impossible ROI: %s (%s)", ev->reason,
                  ev->message);
    ck_assert_msg(strstr(ev->message, "roi"), "message: %s", ev->message);

    daemon_scan s;
    daemon_scan_make(&s, SCAN, WIDTH, HEIGHT, N_PROJ, 1, 1, 0xdae0201);
    daemon_send_begin(c, &s);
    daemon_send_fields(c, &s);
    for (int p = 0; p < N_PROJ / 2; p++)
        daemon_send_projection(c, &s, p);

    for (size_t i = 0; i < N_BAD; i++) {
        const bad_message *m = &bad_messages[i];
        int before = in->n_events;
        send_bad(&t.d, c, m);
        ev = daemon_wait_event(in, "rejected", NULL, NULL, before);
        ck_assert_msg(strcmp(ev->reason, m->reason) == 0,
                      "%s: rejected as %s (%s), expected %s", m->what,
                      ev->reason, ev->message, m->reason);
        ck_assert_msg(ev->message[0], "%s: the reject says nothing", m->what);
        /* A header that parses and names the scan: the reject names it
         * too, whatever else is wrong. */
        json_t *parsed = m->header ? json_loads(m->header, 0, NULL) : NULL;
        const char *named = json_string_value(json_object_get(parsed, "scan"));
        if (named)
            ck_assert_msg(strcmp(ev->scan, named) == 0, "%s: the reject "
                          "names scan '%s', not '%s'", m->what, ev->scan,
                          named);
        json_decref(parsed);
        printf("%-26s -> %-18s %s\n", m->what, ev->reason, ev->message);
    }
    /* Each reason is counted in status. */
    json_t *st = daemon_status(c);
    json_t *counters = json_object_get(st, "counters");
    json_t *rejects = json_object_get(counters, "rejects");
    ck_assert_int_eq(json_integer_value(json_object_get(counters, "rejected")),
                     (json_int_t)N_BAD + 1);
    for (size_t i = 0; i < N_BAD; i++) {
        long expected = 0;
        for (size_t j = 0; j < N_BAD; j++)
            expected += strcmp(bad_messages[j].reason,
                               bad_messages[i].reason) == 0;
        ck_assert_msg(json_integer_value(json_object_get(
                          rejects, bad_messages[i].reason)) == expected,
                      "counter %s", bad_messages[i].reason);
    }
    json_decref(st);

    for (int p = N_PROJ / 2; p < N_PROJ; p++)
        daemon_send_projection(c, &s, p);
    daemon_send_end(c, &s);
    check_slices(in, &s, SCAN);
    daemon_wait_event(in, "scan_complete", NULL, SCAN, 0);
    ck_assert_ptr_null(daemon_find_event(in, "missing_projections", NULL,
                                         NULL));

    daemon_scan next;
    daemon_scan_make(&next, "next", WIDTH, HEIGHT, N_PROJ, 0, 1, 0xdae0202);
    daemon_send_scan(c, &next);
    check_slices(in, &next, "next");

    daemon_scan_free(&s);
    daemon_scan_free(&next);
    daemon_session_close(&t);
}
END_TEST

/* Ingest reads a bounded number of messages per loop turn: control is
 * answered in the middle of a flood, not after it. */
START_TEST(control_answers_during_a_flood)
{
    daemon_proc d;
    daemon_start(&d, NULL);
    rtomo_client_options opt;
    rtomo_client_options_init(&opt);
    opt.ingest = d.ingest;
    opt.control = d.control;
    opt.send_hwm = 100000;      /* queue the whole flood at once */
    opt.control_timeout_ms = 10000;
    rtomo_error err;
    rtomo_client *c = rtomo_client_open(&opt, &err);
    ck_assert(c);
    const long flood = 50000;
    for (long i = 0; i < flood; i++)
        ck_assert(rtomo_client_send_raw(c, 0, "x", 1, 1, NULL, 0, &err) ==
                  RTOMO_OK);
    long during = daemon_counter(c, "rejected");
    printf("rejected when status was answered: %ld of %ld\n", during, flood);
    ck_assert_msg(during < flood, "status waited for the whole flood");
    daemon_wait_counter(c, "rejected", flood);
    ck_assert_int_eq(daemon_reject_counter(c, "bad_json"), flood);
    rtomo_client_close(c);
    daemon_stop(&d);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {
        every_bad_input_is_rejected_and_harmless,
        control_answers_during_a_flood,
    };
    return daemon_run_tests("daemon_reject", tests,
                            (int)(sizeof tests / sizeof tests[0]), 120);
}
