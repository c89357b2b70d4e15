/*
 * test_daemon_lifecycle.c — the life of scans in rtomod as a camera lives
 * it (issue: no lost scans, a sender that knows what happened):
 *   - scans in a row, each over a new connection, the next begun while
 *     the last one still acquires: none is refused, every one is
 *     reconstructed equal to the engine's;
 *   - a sender that goes quiet: its scan ends by itself after
 *     scans.idle_timeout_ms, reconstructed from what arrived (marked
 *     incomplete) or aborted with its frames counted dropped, and the next
 *     scan works;
 *   - the control request "scan" tells a sender what became of its scan:
 *     complete, aborted, refused (with the reason), unknown, and frames
 *     that came after the end (scan_ended);
 *   - scans.max bounds the scans in flight (over_budget beyond);
 *   - a scan sent over several connections finds itself among the scans
 *     in flight when the client waits for the daemon to have its frames.
 */
#include "config.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "daemon_harness.h"

/* The "scan" reply's object for `id`. */
static json_t *outcome(rtomo_client *c, const char *id)
{
    char request[128];
    snprintf(request, sizeof request, "{\"cmd\": \"scan\", \"scan\": \"%s\"}",
             id);
    json_t *reply = daemon_request(c, request);
    ck_assert_msg(json_is_true(json_object_get(reply, "ok")), "scan %s: %s",
                  id, json_string_value(json_object_get(reply, "message")));
    json_t *o = json_incref(json_object_get(reply, "scan"));
    json_decref(reply);
    return o;
}

static const char *str(const json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : "(null)";
}

static long num(const json_t *o, const char *key)
{
    return (long)json_integer_value(json_object_get(o, key));
}

/* Poll "scan" until its state is final. */
static json_t *final_outcome(rtomo_client *c, const char *id)
{
    for (int i = 0; i < 3000; i++) {
        json_t *o = outcome(c, id);
        if (json_is_true(json_object_get(o, "final")))
            return o;
        json_decref(o);
        struct timespec pause = {0, 10 * 1000 * 1000};
        nanosleep(&pause, NULL);
    }
    ck_abort_msg("scan %s never reached a final state", id);
    return NULL;
}

/* A client of its own (a new connection, as a new rtomo-push has). */
static rtomo_client *new_sender(const daemon_proc *d)
{
    rtomo_client_options opt;
    rtomo_client_options_init(&opt);
    opt.ingest = d->ingest;
    opt.control = d->control;
    opt.control_timeout_ms = 10000;
    rtomo_error err;
    rtomo_client *c = rtomo_client_open(&opt, &err);
    ck_assert_msg(c, "client: %s", err.message);
    return c;
}

#define N_ROW 12

/* Twelve scans, each over a new connection.  Scan k+1's begin and frames
 * go out while scan k still acquires, its last frames and end still to
 * come on the other connection (ZeroMQ interleaves connections): before,
 * that begin was refused (bad_state) and the scan's frames with it
 * (unknown_scan). */
START_TEST(scans_in_a_row_over_new_connections_are_never_lost)
{
    daemon_session t;
    daemon_session_open(&t, NULL, 1);
    daemon_scan s[N_ROW];
    rtomo_client *senders[N_ROW];
    for (int k = 0; k < N_ROW; k++) {
        char id[32];
        snprintf(id, sizeof id, "row-%02d", k);
        daemon_scan_make(&s[k], id, 48, 2, 60, 1, 1, 0xdae0400 + (uint64_t)k);
        senders[k] = new_sender(&t.d);
    }
    for (int k = 0; k < N_ROW; k++) {
        daemon_send_begin(senders[k], &s[k]);
        daemon_send_fields(senders[k], &s[k]);
        for (int p = 0; p < 30; p++)
            daemon_send_projection(senders[k], &s[k], p);
        /* The rest of the previous scan, interleaved with this one. */
        if (k > 0) {
            for (int p = 30; p < 60; p++)
                daemon_send_projection(senders[k - 1], &s[k - 1], p);
            daemon_send_end(senders[k - 1], &s[k - 1]);
        }
        /* A camera is not a burst of twelve scans at once: two at a time
         * are in flight here (scans.max bounds them). */
        daemon_wait_counter(t.c, "accepted", 64L * k + 1 + 2 + 30);
    }
    for (int p = 30; p < 60; p++)
        daemon_send_projection(senders[N_ROW - 1], &s[N_ROW - 1], p);
    daemon_send_end(senders[N_ROW - 1], &s[N_ROW - 1]);

    for (int k = 0; k < N_ROW; k++) {
        daemon_check_against_engine(&t.in, &s[k], 2);
        json_t *o = final_outcome(t.c, s[k].spec.scan);
        ck_assert_msg(strcmp(str(o, "state"), "complete") == 0 &&
                      num(o, "rejected") == 0 && num(o, "dropped") == 0 &&
                      num(o, "missing") == 0 && num(o, "frames") == 62,
                      "scan %s: %s", s[k].spec.scan,
                      json_dumps(o, JSON_COMPACT));
        json_decref(o);
    }
    ck_assert_int_eq(daemon_counter(t.c, "rejected"), 0);
    for (int k = 0; k < N_ROW; k++) {
        rtomo_client_close(senders[k]);
        daemon_scan_free(&s[k]);
    }
    daemon_session_close(&t);
}
END_TEST

/* A sender that stops sending: by default its scan is reconstructed from
 * what arrived after scans.idle_timeout_ms; with scans.incomplete = abort
 * it is aborted and its frames counted dropped.  The daemon then takes the
 * next scan; the quiet one's late frames are refused as scan_ended. */
START_TEST(a_quiet_sender_does_not_block_the_instrument)
{
    for (int abort = 0; abort <= 1; abort++) {
        const char *args[] = {"--set", "scans.idle_timeout_ms=400", "--set",
                              abort ? "scans.incomplete=abort"
                                    : "scans.incomplete=reconstruct", NULL};
        daemon_session t;
        daemon_session_open(&t, args, 1);
        daemon_scan s, next;
        daemon_scan_make(&s, "vanished", 48, 2, 60, 1, 1, 0xdae0410);
        daemon_scan_make(&next, "after", 48, 2, 60, 1, 1, 0xdae0411);
        daemon_send_begin(t.c, &s);
        daemon_send_fields(t.c, &s);
        for (int p = 0; p < 40; p++)
            daemon_send_projection(t.c, &s, p);
        if (abort) {
            const rtomo_event *ev = daemon_wait_event(&t.in, "scan_aborted",
                                                      "idle_timeout",
                                                      "vanished", 0);
            ck_assert_msg(strstr(ev->message, "42 dropped"), "%s",
                          ev->message);
            ck_assert_int_eq(daemon_counter(t.c, "dropped"), 42);
        } else {
            daemon_wait_event(&t.in, "scan_complete", "idle_timeout",
                              "vanished", 0);
            daemon_wait_images(&t.in, RTOMO_TOPIC_SLICE, "vanished", 2);
            ck_assert_ptr_nonnull(daemon_find_event(&t.in,
                                                    "missing_projections",
                                                    NULL, "vanished"));
        }
        json_t *st = daemon_status(t.c);
        json_t *scans = json_object_get(json_object_get(st, "counters"),
                                        "scans");
        ck_assert_int_eq(num(scans, "timed_out"), 1);
        ck_assert_int_eq(num(scans, abort ? "aborted" : "incomplete"), 1);
        json_decref(st);
        json_t *o = final_outcome(t.c, "vanished");
        ck_assert_str_eq(str(o, "state"), abort ? "aborted" : "complete");
        ck_assert_str_eq(str(o, "code"), "idle_timeout");
        ck_assert_int_eq(num(o, "frames"), 42);
        ck_assert_int_eq(num(o, "dropped"), abort ? 42 : 0);
        if (!abort) {
            ck_assert(json_is_true(json_object_get(o, "incomplete")));
            ck_assert_int_eq(num(o, "missing"), 20);
        }
        json_decref(o);

        /* The sender comes back too late. */
        daemon_send_projection(t.c, &s, 40);
        daemon_wait_event(&t.in, "rejected", "scan_ended", "vanished", 0);
        o = outcome(t.c, "vanished");
        ck_assert_int_eq(num(o, "rejected"), 1);
        ck_assert_int_eq(json_integer_value(json_object_get(
                             json_object_get(o, "rejects"), "scan_ended")), 1);
        json_decref(o);

        daemon_send_scan(t.c, &next);
        daemon_check_against_engine(&t.in, &next, 2);
        daemon_scan_free(&s);
        daemon_scan_free(&next);
        daemon_session_close(&t);
    }
}
END_TEST

/* Send a begin that the daemon refuses and check its record: refused,
 * with the reject's name as its code, a reason naming `field`, one
 * message rejected. */
static void expect_refused(daemon_session *t, const char *id,
                           const char *header, const char *code,
                           const char *field)
{
    daemon_send_header(t->c, header);
    daemon_wait_event(&t->in, "rejected", code, id, 0);
    json_t *o = outcome(t->c, id);
    ck_assert_str_eq(str(o, "state"), "refused");
    ck_assert_str_eq(str(o, "code"), code);
    ck_assert_int_eq(num(o, "rejected"), 1);
    ck_assert_msg(strstr(str(o, "reason"), field), "reason: %s",
                  str(o, "reason"));
    json_decref(o);
}

/* What "scan" answers for a refused begin, an id never seen, and an
 * aborted scan; and scans.max. */
START_TEST(the_scan_request_tells_what_happened)
{
    const char *args[] = {"--set", "scans.max=1", NULL};
    daemon_session t;
    daemon_session_open(&t, args, 1);

    /* Never seen. */
    json_t *o = outcome(t.c, "nobody");
    ck_assert_str_eq(str(o, "state"), "unknown");
    ck_assert(json_is_true(json_object_get(o, "final")));
    ck_assert(json_is_null(json_object_get(o, "kind")));
    json_decref(o);
    json_t *bad = daemon_request(t.c, "{\"cmd\": \"scan\", \"scan\": \"a b\"}");
    ck_assert_str_eq(str(bad, "error"), "bad_argument");
    json_decref(bad);

    /* A begin the daemon refuses with its configuration, and one the
     * decoder refuses (a field out of range). */
    expect_refused(&t, "refused",
        "{\"protocol\": 1, \"type\": \"scan_begin\", \"scan\": \"refused\", "
        "\"detector\": {\"width\": 16, \"height\": 1}, \"projections\": 8, "
        "\"reconstruction\": {\"roi\": [0, 0, 500, 500]}}", "bad_geometry",
        "roi");
    expect_refused(&t, "bad-width",
        "{\"protocol\": 1, \"type\": \"scan_begin\", \"scan\": "
        "\"bad-width\", \"detector\": {\"width\": 1, \"height\": 1}, "
        "\"projections\": 8}", "bad_field", "detector.width");

    /* One scan in flight at most: a second begin is refused, over_budget,
     * and may come again once the first is over. */
    daemon_scan s, second;
    daemon_scan_make(&s, "first", 32, 2, 30, 0, 1, 0xdae0420);
    daemon_scan_make(&second, "second", 32, 2, 30, 0, 1, 0xdae0421);
    daemon_send_begin(t.c, &s);
    daemon_send_begin(t.c, &second);
    const rtomo_event *ev = daemon_wait_event(&t.in, "rejected", "over_budget",
                                              "second", 0);
    ck_assert_msg(strstr(ev->message, "scans.max"), "%s", ev->message);
    o = outcome(t.c, "second");
    ck_assert_str_eq(str(o, "state"), "refused");
    ck_assert_str_eq(str(o, "code"), "over_budget");
    json_decref(o);
    o = outcome(t.c, "first");
    ck_assert_str_eq(str(o, "state"), "acquiring");
    ck_assert(json_is_false(json_object_get(o, "final")));
    json_decref(o);

    /* Aborted: every accepted frame dropped, the reason given. */
    daemon_send_fields(t.c, &s);
    for (int p = 0; p < 10; p++)
        daemon_send_projection(t.c, &s, p);
    daemon_wait_counter(t.c, "accepted", 1 + 1 + 10);
    json_decref(daemon_request(t.c, "{\"cmd\": \"abort\", \"scan\": "
                                    "\"first\"}"));
    o = final_outcome(t.c, "first");
    ck_assert_str_eq(str(o, "state"), "aborted");
    ck_assert_str_eq(str(o, "code"), "aborted");
    ck_assert_int_eq(num(o, "frames"), 11);
    ck_assert_int_eq(num(o, "dropped"), 11);
    json_decref(o);

    daemon_send_scan(t.c, &second);
    daemon_check_against_engine(&t.in, &second, 2);
    o = final_outcome(t.c, "second");
    ck_assert_str_eq(str(o, "state"), "complete");
    ck_assert_int_eq(num(o, "images"), 2);
    json_decref(o);

    daemon_scan_free(&s);
    daemon_scan_free(&second);
    daemon_session_close(&t);
}
END_TEST

/* A scan sent over three connections waits, as PROTOCOL.md 3.2 asks, until
 * the daemon has its begin and then all its frames (the client library's
 * rtomo_client_wait_for_scan), while an earlier scan still acquires: the
 * wait must find its own scan among those in flight, not the oldest. */
START_TEST(a_scan_over_several_connections_beside_another)
{
    daemon_session t;
    daemon_session_open(&t, NULL, 3);
    daemon_scan blocker, s;
    daemon_scan_make(&blocker, "blocker", 32, 2, 30, 0, 1, 0xdae0440);
    daemon_scan_make(&s, "spread", 48, 2, 60, 1, 1, 0xdae0441);
    daemon_send_begin(t.c, &blocker);
    daemon_wait_event(&t.in, "scan_started", NULL, "blocker", 0);
    rtomo_error err;
    daemon_send_begin(t.c, &s);
    ck_assert_msg(rtomo_client_wait_for_scan(t.c, "spread", 0, 3000, &err) ==
                  RTOMO_OK, "waiting for the begin: %s", err.message);
    daemon_send_fields(t.c, &s);
    for (int p = 0; p < 60; p++)
        daemon_send_projection_via(t.c, &s, p, p % 3);
    ck_assert_msg(rtomo_client_wait_for_scan(t.c, "spread", 2 + 60, 3000,
                                             &err) == RTOMO_OK,
                  "waiting for the frames: %s", err.message);
    daemon_send_end(t.c, &s);
    daemon_check_against_engine(&t.in, &s, 2);
    json_t *o = final_outcome(t.c, "spread");
    ck_assert_str_eq(str(o, "state"), "complete");
    ck_assert_int_eq(num(o, "rejected") + num(o, "missing"), 0);
    json_decref(o);
    json_decref(daemon_request(t.c, "{\"cmd\": \"abort\", \"scan\": "
                                    "\"blocker\"}"));
    daemon_scan_free(&blocker);
    daemon_scan_free(&s);
    daemon_session_close(&t);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {
        scans_in_a_row_over_new_connections_are_never_lost,
        a_scan_over_several_connections_beside_another,
        a_quiet_sender_does_not_block_the_instrument,
        the_scan_request_tells_what_happened,
    };
    return daemon_run_tests("daemon_lifecycle", tests,
                            (int)(sizeof tests / sizeof tests[0]), 120);
}
