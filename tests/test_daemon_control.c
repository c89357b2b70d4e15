/*
 * test_daemon_control.c — rtomod's control socket: every command, every
 * kind of bad request, configuration changes that reach the next scan, and
 * abort of a scan that never ends.
 */
#include "config.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "daemon_harness.h"

/* Send raw request parts on a fresh REQ socket; returns the parsed reply. */
static json_t *raw_request(const daemon_proc *d, const char *const *parts,
                           int n_parts)
{
    void *ctx = zmq_ctx_new();
    void *req = zmq_socket(ctx, ZMQ_REQ);
    int timeout = DAEMON_TIMEOUT_MS, zero = 0;
    zmq_setsockopt(req, ZMQ_RCVTIMEO, &timeout, sizeof timeout);
    zmq_setsockopt(req, ZMQ_LINGER, &zero, sizeof zero);
    ck_assert(zmq_connect(req, d->control) == 0);
    for (int i = 0; i < n_parts; i++)
        ck_assert(zmq_send(req, parts[i], strlen(parts[i]),
                           i + 1 < n_parts ? ZMQ_SNDMORE : 0) >= 0);
    char buf[65536];
    int n = zmq_recv(req, buf, sizeof buf - 1, 0);
    ck_assert_msg(n > 0, "no reply to a raw request");
    buf[n] = '\0';
    zmq_close(req);
    zmq_ctx_term(ctx);
    json_t *reply = json_loads(buf, 0, NULL);
    ck_assert_msg(reply, "reply is not JSON: %s", buf);
    return reply;
}

/* The reply must be an error with `code` whose message contains `words`. */
static void assert_error(json_t *reply, const char *code, const char *words)
{
    ck_assert(json_is_false(json_object_get(reply, "ok")));
    const char *got = json_string_value(json_object_get(reply, "error"));
    const char *message = json_string_value(json_object_get(reply, "message"));
    ck_assert_msg(got && strcmp(got, code) == 0, "error %s, expected %s (%s)",
                  got ? got : "(none)", code, message ? message : "");
    ck_assert_msg(message && strstr(message, words),
                  "message '%s' does not mention '%s'", message ? message : "",
                  words);
    json_decref(reply);
}

static const char *string_at(json_t *obj, const char *a, const char *b)
{
    json_t *v = json_object_get(obj, a);
    return json_string_value(b ? json_object_get(v, b) : v);
}

START_TEST(commands_and_bad_requests)
{
    daemon_session t;
    daemon_session_open(&t, NULL, 1);
    rtomo_client *c = t.c;

    json_t *r = daemon_request(c, "{\"cmd\": \"ping\"}");
    ck_assert(json_is_true(json_object_get(r, "ok")));
    ck_assert(json_is_true(json_object_get(r, "pong")));
    ck_assert_str_eq(string_at(r, "version", NULL), PACKAGE_VERSION);
    json_decref(r);

    r = daemon_status(c);
    ck_assert_str_eq(string_at(r, "state", NULL), "idle");
    ck_assert_str_eq(string_at(r, "backend", NULL), "cpu");
    ck_assert_str_eq(string_at(r, "version", NULL), PACKAGE_VERSION);
    ck_assert(json_number_value(json_object_get(r, "uptime_s")) >= 0);
    ck_assert(json_is_array(json_object_get(r, "gpus")));
    ck_assert(json_is_null(json_object_get(r, "scan")));
    json_t *counters = json_object_get(r, "counters");
    const char *names[] = {"accepted", "rejected", "dropped", "published",
                           "pub_dropped"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        ck_assert_msg(json_is_integer(json_object_get(counters, names[i])),
                      "counter %s", names[i]);
    /* The telemetry messages so far were published. */
    ck_assert(json_integer_value(json_object_get(counters, "published")) > 0);
    json_t *rejects = json_object_get(counters, "rejects");
    for (int k = RTOMO_REJECT_NONE + 1; k < RTOMO_REJECT_COUNT; k++)
        ck_assert_msg(json_integer_value(json_object_get(
                          rejects, rtomo_reject_name((rtomo_reject)k))) == 0 &&
                      json_object_get(rejects,
                                      rtomo_reject_name((rtomo_reject)k)),
                      "reject counter %s", rtomo_reject_name((rtomo_reject)k));
    json_t *tele = json_object_get(r, "telemetry");
    ck_assert(json_is_object(json_object_get(tele, "ingest")));
    ck_assert(json_is_object(json_object_get(tele, "reconstruction")));
    ck_assert(json_is_object(json_object_get(tele, "queues")));
    json_decref(r);

    r = daemon_request(c, "{\"cmd\": \"get_config\"}");
    ck_assert_str_eq(string_at(json_object_get(r, "config"), "ingest",
                               "endpoint"), t.d.ingest);
    ck_assert_str_eq(string_at(json_object_get(r, "config"), "engine",
                               "backend"), "cpu");
    json_decref(r);

    assert_error(daemon_request(c, "{\"cmd\": \"reboot\"}"), "unknown_command",
                 "reboot");
    /* PROTOCOL.md 7: a missing or non-string "cmd" is unknown_command. */
    assert_error(daemon_request(c, "{\"command\": \"ping\"}"),
                 "unknown_command", "cmd");
    assert_error(daemon_request(c, "{\"cmd\": 5}"), "unknown_command", "cmd");
    assert_error(daemon_request(c, "{\"cmd\": \"abort\"}"), "bad_state",
                 "no scan");
    assert_error(daemon_request(c, "{\"cmd\": \"set_config\"}"),
                 "bad_argument", "config");
    assert_error(daemon_request(c, "{\"cmd\": \"set_config\", \"config\": "
                                   "{\"reconstruction\": {\"bogus\": 1}}}"),
                 "bad_argument", "reconstruction.bogus");
    assert_error(daemon_request(c, "{\"cmd\": \"set_config\", \"config\": "
                                   "{\"ingest\": {\"endpoint\": \"tcp://*:1\""
                                   "}}}"),
                 "bad_argument", "ingest.endpoint");
    assert_error(daemon_request(c, "{\"cmd\": \"set_config\", \"config\": "
                                   "{\"reconstruction\": {\"filter\": "
                                   "\"nope\"}}}"),
                 "bad_argument", "reconstruction.filter");
    const char *bad_json[] = {"{\"cmd\": "};
    assert_error(raw_request(&t.d, bad_json, 1), "bad_json", "JSON");
    const char *array[] = {"[1, 2]"};
    assert_error(raw_request(&t.d, array, 1), "bad_json", "object");
    const char *two_parts[] = {"{\"cmd\": \"ping\"}", "extra"};
    assert_error(raw_request(&t.d, two_parts, 2), "bad_json", "part");

    /* None of that changed the configuration. */
    r = daemon_request(c, "{\"cmd\": \"get_config\"}");
    ck_assert_str_eq(string_at(json_object_get(r, "config"), "reconstruction",
                               "filter"), "ram-lak");
    ck_assert_str_eq(string_at(json_object_get(r, "config"), "ingest",
                               "endpoint"), t.d.ingest);
    json_decref(r);

    daemon_session_close(&t);
}
END_TEST

/* set_config of the reconstruction reaches the next scan. */
START_TEST(set_config_reaches_the_next_scan)
{
    daemon_session t;
    daemon_session_open(&t, NULL, 1);
    rtomo_client *c = t.c;
    daemon_inbox *in = &t.in;

    json_t *r = daemon_request(c,
        "{\"cmd\": \"set_config\", \"config\": {\"reconstruction\": "
        "{\"slices\": [2], \"roi\": [4, 6, 20, 10], \"filter\": \"hann\", "
        "\"cutoff\": 0.8, \"interpolation\": \"nearest\"}, "
        "\"telemetry\": {\"interval_ms\": 40}, \"log\": {\"level\": "
        "\"debug\"}}}");
    ck_assert(json_is_true(json_object_get(r, "ok")));
    json_t *cfg = json_object_get(r, "config");
    ck_assert_str_eq(string_at(cfg, "reconstruction", "filter"), "hann");
    ck_assert_str_eq(string_at(cfg, "log", "level"), "debug");
    ck_assert_int_eq(json_integer_value(json_object_get(
                         json_object_get(cfg, "telemetry"), "interval_ms")),
                     40);
    json_t *slices = json_object_get(json_object_get(cfg, "reconstruction"),
                                     "slices");
    ck_assert(json_is_array(slices) && json_array_size(slices) == 1 &&
              json_integer_value(json_array_get(slices, 0)) == 2);
    json_decref(r);

    daemon_scan s;
    daemon_scan_make(&s, "configured", 48, 4, 60, 1, 1, 0xdae0101);
    daemon_send_scan(c, &s);
    daemon_wait_images(in, RTOMO_TOPIC_SLICE, "configured", 1);
    daemon_wait_event(in, "scan_complete", NULL, "configured", 0);
    ck_assert_int_eq(daemon_count_images(in, RTOMO_TOPIC_SLICE, "configured"),
                     1);
    const daemon_image *im = daemon_find_image(in, RTOMO_TOPIC_SLICE,
                                               "configured", -1, 0);
    ck_assert_int_eq(im->h.slice, 2);
    ck_assert_int_eq(im->h.width, 20);
    ck_assert_int_eq(im->h.height, 10);

    s.spec.geometry.window = RTOMO_WINDOW_HANN;
    s.spec.geometry.cutoff = 0.8;
    s.spec.geometry.interp = RTOMO_INTERP_NEAREST;
    const int row = 2, roi[4] = {4, 6, 20, 10};
    float *ref = daemon_reference_slices(&s, &row, 1, NULL, roi);
    double diff = test_max_abs_diff(im->data, ref, 200);
    ck_assert_msg(diff <= 1e-5 * test_max_abs(ref, 200),
                  "configured slice differs from the engine by %g", diff);

    free(ref);
    daemon_scan_free(&s);
    daemon_session_close(&t);
}
END_TEST

/* A scan that never ends stays active (status shows it) until aborted. */
START_TEST(abort_a_scan_that_never_ends)
{
    daemon_session t;
    daemon_session_open(&t, NULL, 1);
    rtomo_client *c = t.c;
    daemon_inbox *in = &t.in;

    daemon_scan s, other, next;
    daemon_scan_make(&s, "endless", 32, 2, 40, 1, 1, 0xdae0102);
    daemon_scan_make(&other, "intruder", 32, 2, 40, 0, 0, 0xdae0103);
    daemon_scan_make(&next, "after-abort", 32, 2, 40, 0, 1, 0xdae0104);
    daemon_send_begin(c, &s);
    daemon_send_fields(c, &s);
    for (int p = 0; p < 25; p++)
        daemon_send_projection(c, &s, p);
    daemon_wait_counter(c, "accepted", 1 + 2 + 25);

    json_t *st = daemon_status(c);
    ck_assert_str_eq(string_at(st, "state", NULL), "acquiring");
    json_t *scan = json_object_get(st, "scan");
    ck_assert_str_eq(string_at(scan, "id", NULL), "endless");
    ck_assert_str_eq(string_at(scan, "kind", NULL), "tomo");
    ck_assert_int_eq(json_integer_value(json_object_get(scan, "received")), 25);
    ck_assert_int_eq(json_integer_value(json_object_get(scan, "expected")), 40);
    ck_assert_int_eq(json_integer_value(json_object_get(scan, "missing")), 15);
    ck_assert_int_eq(json_integer_value(json_object_get(scan, "darks")), 1);
    ck_assert_int_eq(json_integer_value(json_object_get(scan, "flats")), 1);
    json_decref(st);

    /* A second scan may begin while this one acquires: both are listed. */
    daemon_send_begin(c, &other);
    daemon_wait_event(in, "scan_started", NULL, "intruder", 0);
    st = daemon_status(c);
    ck_assert_int_eq(json_array_size(json_object_get(st, "scans")), 2);
    ck_assert_str_eq(string_at(json_object_get(st, "scan"), "id", NULL),
                     "endless");
    json_decref(st);

    assert_error(daemon_request(c, "{\"cmd\": \"abort\", \"scan\": "
                                   "\"nobody\"}"), "bad_state", "nobody");
    const char *aborts[] = {"endless", "intruder"};
    for (int i = 0; i < 2; i++) {
        char request[128];
        snprintf(request, sizeof request, "{\"cmd\": \"abort\", \"scan\": "
                 "\"%s\"}", aborts[i]);
        json_t *r = daemon_request(c, request);
        ck_assert(json_is_true(json_object_get(r, "ok")));
        ck_assert_str_eq(string_at(r, "aborted", NULL), aborts[i]);
        json_decref(r);
        daemon_wait_event(in, "scan_aborted", NULL, aborts[i], 0);
    }
    st = daemon_status(c);
    ck_assert(json_is_null(json_object_get(st, "scan")));
    ck_assert_int_eq(json_array_size(json_object_get(st, "scans")), 0);
    json_decref(st);
    /* Every accepted frame of the aborted scan is counted dropped. */
    ck_assert_int_eq(daemon_counter(c, "dropped"), 2 + 25);

    /* Its frames are now refused as late; the next scan works. */
    daemon_send_projection(c, &s, 30);
    daemon_wait_event(in, "rejected", "scan_ended", "endless", 0);
    daemon_send_scan(c, &next);
    daemon_wait_images(in, RTOMO_TOPIC_SLICE, "after-abort", 2);
    const int rows[2] = {0, 1};
    float *ref = daemon_reference_slices(&next, rows, 2, NULL, NULL);
    for (int i = 0; i < 2; i++) {
        const daemon_image *im = daemon_find_image(in, RTOMO_TOPIC_SLICE,
                                                   "after-abort", -1, i);
        ck_assert(im);
        ck_assert(test_max_abs_diff(im->data, ref + 32 * 32 * i, 32 * 32) <=
                  1e-5 * test_max_abs(ref + 32 * 32 * i, 32 * 32));
    }
    ck_assert_int_eq(daemon_count_images(in, RTOMO_TOPIC_SLICE, "endless"), 0);

    free(ref);
    daemon_scan_free(&s);
    daemon_scan_free(&other);
    daemon_scan_free(&next);
    daemon_session_close(&t);
}
END_TEST

/* Abort also stops a scan that ended and is still being reconstructed:
 * its remaining slices are not published, and the daemon goes idle. */
START_TEST(abort_during_reconstruction)
{
    daemon_session t;
    /* Slices back-projected after the scan, one per batch: the first is
     * out soon after the end and the others take seconds.  (Streamed, all
     * 64 would be back-projected during the acquisition and come out
     * together at its end: under ASan on a loaded CI machine not within
     * the harness's 30 s.) */
    const char *args[] = {"--set", "reconstruction.batch=1", "--set",
                          "reconstruction.streaming=false", NULL};
    daemon_session_open(&t, args, 1);
    rtomo_client *c = t.c;
    daemon_inbox *in = &t.in;

    /* 64 slices of 512x512 from 180 projections: seconds of CPU work. */
    daemon_scan big, next;
    daemon_scan_make(&big, "long", 512, 64, 180, 0, 1, 0xdae0105);
    daemon_scan_make(&next, "short", 32, 2, 30, 0, 1, 0xdae0106);
    daemon_send_scan(c, &big);
    daemon_wait_images(in, RTOMO_TOPIC_SLICE, "long", 1);
    json_t *r = daemon_request(c, "{\"cmd\": \"abort\"}");
    ck_assert_msg(json_is_true(json_object_get(r, "ok")),
                  "abort while reconstructing: %s",
                  json_string_value(json_object_get(r, "message")));
    ck_assert_str_eq(string_at(r, "aborted", NULL), "long");
    json_decref(r);
    daemon_wait_event(in, "scan_aborted", NULL, "long", 0);

    daemon_send_scan(c, &next);
    daemon_wait_images(in, RTOMO_TOPIC_SLICE, "short", 2);
    daemon_wait_event(in, "scan_complete", NULL, "short", 0);
    int published = daemon_count_images(in, RTOMO_TOPIC_SLICE, "long");
    printf("slices of the aborted scan published: %d of 64\n", published);
    ck_assert_int_lt(published, 64);
    ck_assert_ptr_null(daemon_find_event(in, "scan_complete", NULL, "long"));
    json_t *st = daemon_status(c);
    ck_assert_str_eq(string_at(st, "state", NULL), "idle");
    json_decref(st);

    daemon_scan_free(&big);
    daemon_scan_free(&next);
    daemon_session_close(&t);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {
        commands_and_bad_requests,
        set_config_reaches_the_next_scan,
        abort_a_scan_that_never_ends,
        abort_during_reconstruction,
    };
    return daemon_run_tests("daemon_control", tests,
                            (int)(sizeof tests / sizeof tests[0]), 120);
}
