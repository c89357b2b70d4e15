/*
 * test_daemon_router.c — rtomo-router (issue 16): one stream received once
 * and cut into detector rows for several daemons.
 *   - the router's decisions on their own (router_route.h): the rows a
 *     daemon needs, the header that names them and where they lie in the
 *     payload; what goes whole to every daemon (what the router cannot
 *     read or cut); the --daemon argument;
 *   - the real router ($RTOMO_ROUTER, else $top_builddir/rtomo-router)
 *     between a client and three real daemons, each reconstructing a third
 *     of the rows, beside a fourth that gets whole frames: the merged
 *     slices equal the fourth's (and the engine's), each of the three
 *     received a third of the frame bytes, and the router's counts agree;
 *   - a daemon that is gone before a scan: the router's status says so
 *     (disconnected, lost_frames = the scan's frames), it logs the loss
 *     once, and the two other daemons complete the scan;
 *   - SBDX frames dealt in turn to three daemons: each publishes a third of
 *     the frames, and together exactly what a fourth daemon fed the whole
 *     stream publishes; with one daemon gone the two others take its turns
 *     (rerouted, counted, logged once), nothing lost.
 */
#include "config.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "router_harness.h"
#include "router_route.h"
#include "router_sbdx.h"
#include "rtomo_keys.h"

/* ------------------------------------------------------- decisions ---- */

static const char PROJECTION_U16[] =
    "{\"protocol\": 1, \"type\": \"projection\", \"scan\": \"s1\", "
    "\"index\": 7, \"dtype\": \"uint16\", \"shape\": [48, 64], "
    "\"angle\": 12.5}";

START_TEST(rows_needed_widen_and_clip)
{
    router_rows out;
    const router_rows middle = {16, 16};
    ck_assert_int_eq(router_rows_needed(middle, 0, 48, &out), 1);
    ck_assert(out.first == 16 && out.count == 16);
    ck_assert_int_eq(router_rows_needed(middle, 4, 48, &out), 1);
    ck_assert(out.first == 12 && out.count == 24);
    /* The margin stops at the detector's edges. */
    ck_assert_int_eq(router_rows_needed((router_rows){0, 16}, 4, 48, &out), 1);
    ck_assert(out.first == 0 && out.count == 20);
    ck_assert_int_eq(router_rows_needed((router_rows){32, 16}, 4, 48, &out),
                     1);
    ck_assert(out.first == 28 && out.count == 20);
    /* Rows beyond the detector's last are clipped. */
    ck_assert_int_eq(router_rows_needed((router_rows){40, 16}, 0, 48, &out),
                     1);
    ck_assert(out.first == 40 && out.count == 8);
    /* Every row, or none of the detector's: the frame goes whole. */
    ck_assert_int_eq(router_rows_needed((router_rows){0, 48}, 0, 48, &out), 0);
    ck_assert_int_eq(router_rows_needed(middle, 16, 48, &out), 0);
    ck_assert_int_eq(router_rows_needed((router_rows){60, 8}, 0, 48, &out), 0);
    ck_assert_int_eq(router_rows_needed((router_rows){48, 1}, 0, 48, &out), 0);
}
END_TEST

/* The rewritten header is the original with "rows" added, nothing else
 * changed. */
static void check_rewrite(router_message *m, const char *original,
                          router_rows rows)
{
    char *text = router_header_with_rows(m, rows);
    ck_assert_ptr_nonnull(text);
    ck_assert_msg(!strchr(text, ' '), "not compact: %s", text);
    json_t *got = json_loads(text, JSON_REJECT_DUPLICATES, NULL);
    json_t *want = json_loads(original, 0, NULL);
    ck_assert(got && want);
    json_t *band = json_object_get(got, "rows");
    ck_assert_int_eq(json_integer_value(json_object_get(band, "first")),
                     rows.first);
    ck_assert_int_eq(json_integer_value(json_object_get(band, "count")),
                     rows.count);
    ck_assert_int_eq(json_object_size(band), 2);
    json_object_del(got, "rows");
    json_object_del(want, "rows");
    ck_assert_msg(json_equal(got, want), "%s is not %s plus rows", text,
                  original);
    json_decref(got);
    json_decref(want);
    free(text);
}

START_TEST(frames_are_cut_into_rows)
{
    router_message m;
    router_message_read(&m, PROJECTION_U16, strlen(PROJECTION_U16), 2,
                        ROUTED_FRAME_BYTES);
    ck_assert_msg(m.route == ROUTER_SPLIT, "not split: %s", m.why_whole);
    ck_assert(m.is_frame);
    ck_assert_str_eq(m.scan, "s1");
    ck_assert(m.height == 48 && m.width == 64 && m.row_bytes == 128);
    check_rewrite(&m, PROJECTION_U16, (router_rows){16, 16});
    /* A second daemon's rows replace the first's. */
    check_rewrite(&m, PROJECTION_U16, (router_rows){28, 20});
    size_t offset, length;
    router_payload_range(&m, (router_rows){28, 20}, &offset, &length);
    ck_assert_uint_eq(offset, 28 * 128);
    ck_assert_uint_eq(length, 20 * 128);
    router_message_clear(&m);
    ck_assert_ptr_null(m.header);

    /* float32 darks and flats too, and "rows": null is no rows at all. */
    const char *flat = "{\"protocol\":1,\"type\":\"flat\",\"scan\":\"s2\","
                       "\"index\":0,\"dtype\":\"float32\",\"shape\":[3,5],"
                       "\"rows\":null}";
    router_message_read(&m, flat, strlen(flat), 2, 3 * 5 * 4);
    ck_assert_msg(m.route == ROUTER_SPLIT, "not split: %s", m.why_whole);
    ck_assert_uint_eq(m.row_bytes, 20);
    check_rewrite(&m, flat, (router_rows){1, 1});
    router_message_clear(&m);
    const char *dark = "{\"protocol\":1,\"type\":\"dark\",\"scan\":\"s2\","
                       "\"index\":0,\"dtype\":\"uint8\",\"shape\":[4,2]}";
    router_message_read(&m, dark, strlen(dark), 2, 8);
    ck_assert(m.route == ROUTER_SPLIT && m.row_bytes == 2);
    router_message_clear(&m);
}
END_TEST

/* One message the router must pass on as it came. */
typedef struct whole_case {
    const char *header;
    int parts;
    size_t payload;
    int is_frame;
} whole_case;

#define FRAME_HEAD "{\"protocol\":1,\"type\":\"projection\",\"scan\":\"s\"," \
                   "\"index\":0,"

START_TEST(what_cannot_be_cut_goes_whole)
{
    static const whole_case cases[] = {
        {"not json", 2, ROUTED_FRAME_BYTES, 0},
        {"[48, 64]", 2, ROUTED_FRAME_BYTES, 0},
        {"{\"protocol\":1,\"type\":\"scan_begin\",\"scan\":\"s\"}", 1, 0, 0},
        {"{\"protocol\":1,\"type\":\"scan_end\",\"scan\":\"s\"}", 2, 0, 0},
        {"{\"protocol\":2,\"type\":\"sbdx_frame\",\"scan\":\"s\","
         "\"dtype\":\"uint8\",\"shape\":[2,2,3,4]}", 2, 48, 1},
        {"{\"protocol\":1,\"type\":\"sbdx_frame\",\"scan\":\"s\","
         "\"dtype\":\"uint8\",\"shape\":[2,2,3,4]}", 1, 0, 1},
        {"{\"protocol\":1,\"type\":\"sbdx_begin\",\"scan\":\"s\"}", 1, 0,
         0},
        {"{\"protocol\":1,\"type\":\"photo\",\"scan\":\"s\","
         "\"dtype\":\"uint16\",\"shape\":[48,64]}", 2, ROUTED_FRAME_BYTES, 0},
        {FRAME_HEAD "\"dtype\":\"uint16\",\"shape\":[48,64]}", 1, 0, 1},
        {FRAME_HEAD "\"dtype\":\"uint16\",\"shape\":[48,64]}", 3,
         ROUTED_FRAME_BYTES, 1},
        {FRAME_HEAD "\"dtype\":\"uint16\",\"shape\":[48,64]}", 2,
         ROUTED_FRAME_BYTES - 1, 1},
        {FRAME_HEAD "\"dtype\":\"uint16\",\"shape\":[48,64,1]}", 2,
         ROUTED_FRAME_BYTES, 1},
        {FRAME_HEAD "\"dtype\":\"uint16\",\"shape\":[48.0,64]}", 2,
         ROUTED_FRAME_BYTES, 1},
        {FRAME_HEAD "\"dtype\":\"uint16\",\"shape\":[0,64]}", 2, 0, 1},
        {FRAME_HEAD "\"dtype\":\"uint16\"}", 2, ROUTED_FRAME_BYTES, 1},
        {FRAME_HEAD "\"dtype\":\"uint32\",\"shape\":[48,64]}", 2,
         2 * ROUTED_FRAME_BYTES, 1},
        {FRAME_HEAD "\"shape\":[48,64]}", 2, ROUTED_FRAME_BYTES, 1},
        {FRAME_HEAD "\"dtype\":\"uint16\",\"shape\":[48,64],"
         "\"rows\":{\"first\":0,\"count\":16}}", 2, ROUTED_FRAME_BYTES / 3, 1},
        {"{\"protocol\":2,\"type\":\"projection\",\"scan\":\"s\","
         "\"dtype\":\"uint16\",\"shape\":[48,64]}", 2, ROUTED_FRAME_BYTES, 1},
        {"{\"type\":\"projection\",\"scan\":\"s\","
         "\"dtype\":\"uint16\",\"shape\":[48,64]}", 2, ROUTED_FRAME_BYTES, 1},
        {FRAME_HEAD "\"index\":1,\"dtype\":\"uint16\",\"shape\":[48,64]}", 2,
         ROUTED_FRAME_BYTES, 0},       /* duplicate keys: not read at all */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const whole_case *w = &cases[i];
        router_message m;
        router_message_read(&m, w->header, strlen(w->header), w->parts,
                            w->payload);
        ck_assert_msg(m.route == ROUTER_WHOLE, "case %zu (%s) was split", i,
                      w->header);
        ck_assert_msg(m.why_whole && m.why_whole[0], "case %zu: no reason",
                      i);
        ck_assert_msg(m.is_frame == w->is_frame, "case %zu: is_frame %d",
                      i, m.is_frame);
        ck_assert_ptr_null(m.header);
        router_message_clear(&m);
    }
}
END_TEST

/* SBDX frames are dealt whatever their payload: the daemon that gets one
 * judges it. */
START_TEST(sbdx_frames_are_dealt)
{
    const char *frame = "{\"protocol\":1,\"type\":\"sbdx_frame\","
                        "\"scan\":\"x1\",\"index\":3,\"dtype\":\"uint8\","
                        "\"shape\":[2,2,3,4]}";
    router_message m;
    router_message_read(&m, frame, strlen(frame), 2, 47);
    ck_assert_msg(m.route == ROUTER_DEAL, "not dealt: %s", m.why_whole);
    ck_assert(m.is_frame && m.type == RTOMO_MSG_SBDX_FRAME);
    ck_assert_str_eq(m.scan, "x1");
    ck_assert_ptr_null(m.header);
    router_message_clear(&m);
}
END_TEST

/* Deal the next frame of `scan` among 3 daemons; check who gets it and
 * whose turn it was. */
static void deal(router_sbdx *t, const char *scan, router_set connected,
                 int want, int want_turn)
{
    int turn = -2;
    int k = router_sbdx_deal(t, scan, 3, connected, &turn);
    ck_assert_msg(k == want && turn == want_turn, "dealt to %d (turn %d), "
                  "expected %d (turn %d)", k, turn, want, want_turn);
}

START_TEST(sbdx_turns_pass_over_daemons_that_cannot_take_frames)
{
    router_sbdx t;
    memset(&t, 0, sizeof t);
    const router_set all = 7;
    /* A stream the router never saw begin: every connected daemon. */
    deal(&t, "s", all, 0, 0);
    deal(&t, "s", all, 1, 1);
    deal(&t, "s", all, 2, 2);
    deal(&t, "s", all, 0, 0);
    /* Daemon 1 was not sent the begin: its turns go on to daemon 2. */
    router_sbdx_begun(&t, "s", 5);
    deal(&t, "s", all, 2, 1);
    deal(&t, "s", all, 0, 0);
    /* Another stream has its own set, the same turn. */
    router_sbdx_begun(&t, "u", all);
    deal(&t, "u", all, 1, 1);
    /* Daemon 2's connection broke: it may have restarted without them. */
    router_sbdx_forget(&t, 2);
    deal(&t, "s", all, 0, 2);
    deal(&t, "u", all, 1, 1);
    deal(&t, "u", all, 0, 2);
    /* Not connected: nothing to take it, and the turn stays. */
    deal(&t, "u", 4, -1, 1);
    deal(&t, "u", 2, 1, 1);
    /* Ended: no longer followed (every connected daemon again). */
    router_sbdx_ended(&t, "s");
    deal(&t, "s", all, 2, 2);
    /* More streams than followed: the oldest is forgotten. */
    for (int i = 0; i < ROUTER_SBDX_STREAMS; i++) {
        char id[16];
        snprintf(id, sizeof id, "m%d", i);
        router_sbdx_begun(&t, id, 1);
    }
    deal(&t, "u", all, 0, 0);   /* forgotten: anyone may take it */
    deal(&t, "m3", all, 0, 1);
}
END_TEST

START_TEST(daemon_arguments)
{
    router_target t;
    char why[512];
    ck_assert_int_eq(router_parse_target("tcp://10.0.0.2:5555=1024:512", &t,
                                         why, sizeof why), 0);
    ck_assert_str_eq(t.endpoint, "tcp://10.0.0.2:5555");
    ck_assert(t.rows.first == 1024 && t.rows.count == 512);
    static const char *const bad[] = {
        "tcp://10.0.0.2:5555", "=0:16", "tcp://h:1=16", "tcp://h:1=0:0",
        "tcp://h:1=-1:4", "tcp://h:1=0:x", "tcp://h:1=65535:2",
        "tcp://h:1=:4", "tcp://h:1=0:16:2"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        why[0] = '\0';
        ck_assert_msg(router_parse_target(bad[i], &t, why, sizeof why) != 0,
                      "'%s' was taken", bad[i]);
        ck_assert_msg(strstr(why, bad[i]), "the message '%s' does not name "
                      "'%s'", why, bad[i]);
    }
}
END_TEST

/* ------------------------------------------------------- the router ---- */

/* ------------------------------------------------------- daemons ---- */

/* The daemon's status.telemetry.ingest.<name> (frames, bytes). */
static long ingest_count(const daemon_proc *d, const char *name)
{
    rtomo_client *c = daemon_control_client(d);
    json_t *st = daemon_status(c);
    long n = status_field(json_object_get(json_object_get(st, "telemetry"),
                                   "ingest"), name);
    json_decref(st);
    rtomo_client_close(c);
    return n;
}

/* Each third daemon accepted every frame, at a third of the bytes of the
 * whole daemon's. */
static void check_bytes(const daemon_proc *d)
{
    const long whole = ingest_count(&d[3], "bytes");
    ck_assert_int_eq(whole, (long)ROUTED_FRAMES * ROUTED_FRAME_BYTES);
    for (int k = 0; k < 3; k++) {
        ck_assert_int_eq(ingest_count(&d[k], "frames"), ROUTED_FRAMES);
        long bytes = ingest_count(&d[k], "bytes");
        printf("daemon %d (rows %d..%d): %ld bytes of frames, the whole "
               "daemon %ld\n", k, k * ROUTED_THIRD,
               k * ROUTED_THIRD + ROUTED_THIRD - 1, bytes,
               whole);
        ck_assert_msg(bytes * 2 < whole && bytes * 10 > whole * 3,
                      "daemon %d received %ld bytes of %ld: not a third", k,
                      bytes, whole);
    }
}

/* The router's counts after one scan to the four daemons. */
static void check_router_counts(json_t *st)
{
    ck_assert_int_eq(status_field(st, "messages"), ROUTED_MESSAGES);
    ck_assert_int_eq(status_field(st, "frames"), ROUTED_FRAMES);
    ck_assert_int_eq(status_field(st, "split"), ROUTED_FRAMES);
    ck_assert_int_eq(status_field(st, "whole"), 2);
    ck_assert_int_eq(status_field(st, "forwarded"), 4 * ROUTED_MESSAGES);
    ck_assert_int_gt(status_field(st, "bytes_in"),
                     (long)ROUTED_FRAMES * ROUTED_FRAME_BYTES);
    long whole_bytes = status_field(router_daemon_json(st, 3), "bytes");
    for (int k = 0; k < 4; k++) {
        json_t *d = router_daemon_json(st, k);
        ck_assert_str_eq(router_state_of(st, k), "connected");
        ck_assert_int_eq(status_field(d, "messages"), ROUTED_MESSAGES);
        ck_assert_int_eq(status_field(d, "lost_frames"), 0);
        ck_assert_int_eq(status_field(d, "lost_messages"), 0);
        ck_assert(json_is_null(json_object_get(d, "lost_since_ms")));
        if (k < 3)
            ck_assert_int_lt(2 * status_field(d, "bytes"), whole_bytes);
    }
    /* The whole daemon got every byte the camera sent. */
    ck_assert_int_eq(whole_bytes, status_field(st, "bytes_in"));
}

START_TEST(router_cuts_one_stream_for_three_daemons)
{
    daemon_proc d[4];
    routed_daemons_start(d, 1, NULL);
    router_proc r;
    const char *const rows[] = {"0:16", "16:16", "32:16", "0:48"};
    router_start(&r, d, rows, 4, NULL);
    rtomo_client *rc = router_client(&r);
    wait_router_state(rc, -1, 4, "connected");
    rtomo_client *c = daemon_connect_all(d, 4, r.p.ingest);
    daemon_inbox in;
    daemon_inbox_init(&in, c);

    daemon_scan s;
    routed_scan_make(&s, "routed", 0xdae1601);
    daemon_send_scan(c, &s);
    const int want[4] = {ROUTED_THIRD, ROUTED_THIRD, ROUTED_THIRD,
                         ROUTED_HEIGHT};
    routed_wait_slices(&in, "routed", want, 4);
    routed_check_merged(&in, &s);
    check_bytes(d);
    json_t *st = wait_router_messages(rc, 4, ROUTED_MESSAGES);
    check_router_counts(st);
    json_decref(st);
    /* Any request but status is refused, naming what it answers. */
    json_t *reply = NULL;
    rtomo_error err;
    ck_assert(rtomo_client_command(rc, "abort", &reply, &err) != RTOMO_OK);
    ck_assert_str_eq(json_string_value(json_object_get(reply, "error")),
                     "bad_request");
    json_decref(reply);

    rtomo_client_close(rc);
    free(router_stop(&r));
    daemon_scan_free(&s);
    daemon_inbox_free(&in);
    rtomo_client_close(c);
    for (int k = 0; k < 4; k++)
        daemon_stop(&d[k]);
}
END_TEST

START_TEST(router_counts_what_a_gone_daemon_misses)
{
    daemon_proc d[3];
    routed_daemons_start(d, 0, NULL);
    router_proc r;
    const char *const rows[] = {"0:16", "16:16", "32:16"};
    router_start(&r, d, rows, 3, NULL);
    rtomo_client *rc = router_client(&r);
    wait_router_state(rc, -1, 3, "connected");
    rtomo_client *c = daemon_connect_all(d, 3, r.p.ingest);
    daemon_inbox in;
    daemon_inbox_init(&in, c);
    const int thirds[3] = {ROUTED_THIRD, ROUTED_THIRD, ROUTED_THIRD};

    daemon_scan before, after;
    routed_scan_make(&before, "before", 0xdae1602);
    routed_scan_make(&after, "after", 0xdae1603);
    daemon_send_scan(c, &before);
    routed_wait_slices(&in, "before", thirds, 3);

    /* The last third's daemon goes away; the router notices. */
    daemon_stop(&d[2]);
    wait_router_state(rc, 2, 3, "disconnected");
    daemon_send_scan(c, &after);
    json_t *st = wait_router_messages(rc, 3, 2 * ROUTED_MESSAGES);
    json_t *gone = router_daemon_json(st, 2);
    ck_assert_str_eq(router_state_of(st, 2), "disconnected");
    ck_assert_int_eq(status_field(gone, "lost_frames"), ROUTED_FRAMES);
    ck_assert_int_eq(status_field(gone, "lost_messages"), ROUTED_MESSAGES);
    ck_assert_int_eq(status_field(gone, "messages"), ROUTED_MESSAGES);
    ck_assert_int_gt(status_field(gone, "lost_since_ms"), 0);
    for (int k = 0; k < 2; k++) {
        json_t *d_k = router_daemon_json(st, k);
        ck_assert_str_eq(router_state_of(st, k), "connected");
        ck_assert_int_eq(status_field(d_k, "messages"), 2 * ROUTED_MESSAGES);
        ck_assert_int_eq(status_field(d_k, "lost_frames"), 0);
    }
    ck_assert_int_eq(status_field(st, "forwarded"), 5 * ROUTED_MESSAGES);
    json_decref(st);

    /* The other two complete the scan: their thirds, nothing of the
     * last. */
    const int two[2] = {ROUTED_THIRD, ROUTED_THIRD};
    routed_wait_slices(&in, "after", two, 2);
    double deadline = daemon_now_ms() + DAEMON_TIMEOUT_MS;
    while (routed_count_events(&in, "scan_complete", "after") < 2 &&
           daemon_now_ms() < deadline)
        daemon_inbox_pump(&in, 100);
    ck_assert_int_eq(routed_count_events(&in, "scan_complete", "after"), 2);
    ck_assert_int_eq(daemon_count_slices_from(&in, 2, "after"), 0);

    rtomo_client_close(rc);
    char *log = router_stop(&r);
    char line[256];
    snprintf(line, sizeof line, "daemon %s (rows 32..47) is gone: its rows "
             "of scan after are lost", d[2].ingest);
    ck_assert_msg(text_occurrences(log, line) == 1, "the router's log says %d "
                  "times \"%s\":\n%s", text_occurrences(log, line), line, log);
    ck_assert_int_eq(text_occurrences(log, "is gone"), 1);
    free(log);
    daemon_scan_free(&before);
    daemon_scan_free(&after);
    daemon_inbox_free(&in);
    rtomo_client_close(c);
    daemon_stop(&d[0]);
    daemon_stop(&d[1]);
}
END_TEST

/* ------------------------------------------------------------ SBDX ---- */

#define SBDX_FRAMES 12
#define SBDX_PLANES 3

/* 10x8 holes of 16x8 elements, m = 4, three planes: composites of 40x32;
 * no planes published (the composite and depth map are what is merged). */
static void sbdx_spec(rtomo_sbdx_spec *spec, const char *id)
{
    static const double ratios[SBDX_PLANES] = {0.8, 1.25, 2.1};
    rtomo_sbdx_spec_init(spec);
    snprintf(spec->scan, sizeof spec->scan, "%s", id);
    rtomo_sbdx_geometry *g = &spec->geometry;
    g->holes_x = 10;
    g->holes_y = 8;
    g->det_width = 16;
    g->det_height = 8;
    g->shift_m = 4;
    g->n_planes = SBDX_PLANES;
    spec->ratios = malloc(sizeof ratios);
    ck_assert_ptr_nonnull(spec->ratios);
    memcpy(spec->ratios, ratios, sizeof ratios);
    g->ratios = spec->ratios;
    spec->dtype = RTOMO_DTYPE_U8;
    spec->planes = RTOMO_PLANES_NONE;
}

static size_t sbdx_samples(const rtomo_sbdx_spec *spec)
{
    const rtomo_sbdx_geometry *g = &spec->geometry;
    return (size_t)g->holes_x * g->holes_y * g->det_width * g->det_height;
}

/* SBDX_FRAMES frames of random counts (seeded), one after another. */
static uint8_t *sbdx_frames(const rtomo_sbdx_spec *spec, uint64_t seed)
{
    size_t n = sbdx_samples(spec) * SBDX_FRAMES;
    uint8_t *frames = malloc(n);
    ck_assert_ptr_nonnull(frames);
    for (size_t i = 0; i < n; i++)
        frames[i] = (uint8_t)test_rand_int(&seed, 0, 255);
    return frames;
}

/* The stream (begin, frames 0 .. SBDX_FRAMES - 1, end) through c. */
static void send_sbdx(rtomo_client *c, const rtomo_sbdx_spec *spec,
                      const uint8_t *frames)
{
    rtomo_error err;
    ck_assert(rtomo_client_send_sbdx_begin(c, spec, &err) == RTOMO_OK);
    const rtomo_sbdx_geometry *g = &spec->geometry;
    for (int i = 0; i < SBDX_FRAMES; i++) {
        rtomo_frame_header f;
        memset(&f, 0, sizeof f);
        f.type = RTOMO_MSG_SBDX_FRAME;
        snprintf(f.scan, sizeof f.scan, "%s", spec->scan);
        f.index = i;
        f.dtype = RTOMO_DTYPE_U8;
        f.ndim = 4;
        f.shape[0] = g->holes_y;
        f.shape[1] = g->holes_x;
        f.shape[2] = g->det_height;
        f.shape[3] = g->det_width;
        f.angle = f.axis_shift = NAN;
        ck_assert_msg(rtomo_client_send_frame(c, &f, frames +
                                              sbdx_samples(spec) * i,
                                              sbdx_samples(spec), &err) ==
                      RTOMO_OK, "sbdx_frame %d: %s", i, err.message);
    }
    ck_assert(rtomo_client_send_end(c, RTOMO_MSG_SBDX_END, spec->scan,
                                    &err) == RTOMO_OK);
}

/* The same straight to daemon d (no router): the reference. */
static void send_sbdx_to(const daemon_proc *d, const rtomo_sbdx_spec *spec,
                         const uint8_t *frames)
{
    rtomo_client_options opt;
    rtomo_client_options_init(&opt);
    opt.ingest = d->ingest;
    rtomo_error err;
    rtomo_client *c = rtomo_client_open(&opt, &err);
    ck_assert_msg(c, "client of the reference daemon: %s", err.message);
    send_sbdx(c, spec, frames);
    rtomo_client_close(c);
}

/* Publisher `source`'s image of topic/scan for SBDX frame `frame`, or
 * NULL; *count says how many it sent of that topic. */
static const daemon_image *sbdx_image_from(const daemon_inbox *in,
                                           int source, const char *topic,
                                           const char *scan, int frame,
                                           int *count)
{
    const daemon_image *found = NULL;
    *count = 0;
    for (int i = 0; i < in->n_images; i++) {
        const daemon_image *im = &in->images[i];
        if (im->source != source || strcmp(im->h.topic, topic) != 0 ||
            strcmp(im->h.scan, scan) != 0)
            continue;
        ++*count;
        if (im->h.frame == frame)
            found = im;
    }
    return found;
}

/* Wait until publisher k has sent want[k] depth maps of `scan` (the last
 * image of each frame), each of the n. */
static void wait_sbdx(daemon_inbox *in, const char *scan, const int *want,
                      int n)
{
    double deadline = daemon_now_ms() + DAEMON_TIMEOUT_MS;
    for (;;) {
        int done = 1, count;
        for (int k = 0; k < n; k++) {
            sbdx_image_from(in, k, RTOMO_TOPIC_DEPTH, scan, -1, &count);
            done &= count >= want[k];
        }
        if (done)
            break;
        ck_assert_msg(daemon_now_ms() < deadline, "SBDX frames of %s "
                      "missing", scan);
        daemon_inbox_pump(in, 100);
    }
}

/* Every frame's composite and depth map came from exactly one of the
 * dealt daemons 0 .. n_dealt - 1, daemon k got want[k] frames, and their
 * union is what publisher `whole` (fed the whole stream) made. */
static void check_dealt(const daemon_inbox *in, const char *scan,
                        int n_dealt, const int *want, int whole)
{
    int got[4] = {0}, count;
    for (int f = 0; f < SBDX_FRAMES; f++) {
        const daemon_image *ref = sbdx_image_from(
            in, whole, RTOMO_TOPIC_COMPOSITE, scan, f, &count);
        const daemon_image *ref_depth = sbdx_image_from(
            in, whole, RTOMO_TOPIC_DEPTH, scan, f, &count);
        ck_assert_msg(ref && ref_depth, "frame %d: nothing from the whole "
                      "daemon", f);
        int from = -1;
        for (int k = 0; k < n_dealt; k++) {
            const daemon_image *c = sbdx_image_from(
                in, k, RTOMO_TOPIC_COMPOSITE, scan, f, &count);
            const daemon_image *depth = sbdx_image_from(
                in, k, RTOMO_TOPIC_DEPTH, scan, f, &count);
            if (!c)
                continue;
            ck_assert_msg(from < 0, "frame %d came from daemons %d and %d",
                          f, from, k);
            from = k;
            ck_assert_uint_eq(c->size, ref->size);
            size_t pixels = c->size / sizeof(float);
            double scale = test_max_abs(ref->data, pixels);
            double diff = test_max_abs_diff(c->data, ref->data, pixels);
            ck_assert_msg(diff <= SAME_AS_ENGINE * scale, "frame %d's "
                          "composite differs by %g (scale %g)", f, diff,
                          scale);
            ck_assert_msg(depth && depth->size == ref_depth->size &&
                              memcmp(depth->data, ref_depth->data,
                                     depth->size) == 0,
                          "frame %d's depth map differs", f);
        }
        ck_assert_msg(from >= 0, "frame %d came from no dealt daemon", f);
        got[from]++;
    }
    for (int k = 0; k < n_dealt; k++) {
        printf("SBDX stream %s: daemon %d published %d of %d frames\n", scan,
               k, got[k], SBDX_FRAMES);
        ck_assert_msg(got[k] == want[k], "daemon %d published %d frames, "
                      "expected %d", k, got[k], want[k]);
    }
}

/* Wait until the router has received `messages` messages and sent
 * `forwarded` in all; returns its status then. */
static json_t *wait_router_forwarded(rtomo_client *rc, long messages,
                                     long forwarded)
{
    double deadline = daemon_now_ms() + DAEMON_TIMEOUT_MS;
    for (;;) {
        json_t *st = router_status(rc);
        if (status_field(st, "messages") == messages &&
            status_field(st, "forwarded") == forwarded)
            return st;
        ck_assert_msg(daemon_now_ms() < deadline, "the router received %ld "
                      "messages and sent %ld, expected %ld and %ld",
                      status_field(st, "messages"),
                      status_field(st, "forwarded"),
                      messages, forwarded);
        json_decref(st);
        daemon_pause_ms(20);
    }
}

/* The router's daemon k: SBDX frames dealt to it, messages sent, turns
 * passed on, and nothing lost. */
static void check_dealt_to(json_t *st, int k, long frames, long messages,
                           long rerouted, long lost_messages)
{
    json_t *d = router_daemon_json(st, k);
    printf("router: daemon %d sent %ld messages, %ld bytes; %ld SBDX frames, "
           "%ld rerouted, %ld messages lost\n", k, status_field(d, "messages"),
           status_field(d, "bytes"), status_field(d, "sbdx_frames"),
           status_field(d, "rerouted_frames"),
           status_field(d, "lost_messages"));
    ck_assert_int_eq(status_field(d, "sbdx_frames"), frames);
    ck_assert_int_eq(status_field(d, "messages"), messages);
    ck_assert_int_eq(status_field(d, "rerouted_frames"), rerouted);
    ck_assert_int_eq(status_field(d, "lost_frames"), 0);
    ck_assert_int_eq(status_field(d, "lost_messages"), lost_messages);
}

/* Three daemons behind the router share an SBDX stream frame by frame;
 * a fourth fed the whole stream directly is the reference.  Then the
 * third daemon goes away: the two others take every frame. */
START_TEST(router_deals_sbdx_frames_in_turn)
{
    daemon_proc d[4];
    for (int k = 0; k < 4; k++)
        daemon_start(&d[k], NULL);
    router_proc r;
    const char *const rows[] = {"0:16", "16:16", "32:16"};
    router_start(&r, d, rows, 3, NULL);
    rtomo_client *rc = router_client(&r);
    wait_router_state(rc, -1, 3, "connected");
    rtomo_client *c = daemon_connect_all(d, 4, r.p.ingest);
    daemon_inbox in;
    daemon_inbox_init(&in, c);

    rtomo_sbdx_spec spec;
    sbdx_spec(&spec, "dealt");
    uint8_t *frames = sbdx_frames(&spec, 0xdae1606);
    send_sbdx(c, &spec, frames);
    send_sbdx_to(&d[3], &spec, frames);
    const int thirds[4] = {4, 4, 4, SBDX_FRAMES};
    wait_sbdx(&in, "dealt", thirds, 4);
    check_dealt(&in, "dealt", 3, thirds, 3);
    /* Begin and end to each, every frame to one. */
    json_t *st = wait_router_forwarded(rc, SBDX_FRAMES + 2,
                                       3 * 2 + SBDX_FRAMES);
    ck_assert_int_eq(status_field(st, "dealt"), SBDX_FRAMES);
    ck_assert_int_eq(status_field(st, "whole"), 2);
    ck_assert_int_eq(status_field(st, "frames"), SBDX_FRAMES);
    ck_assert_int_eq(status_field(st, "rerouted_frames"), 0);
    ck_assert_int_eq(status_field(st, "lost_frames"), 0);
    for (int k = 0; k < 3; k++)
        check_dealt_to(st, k, 4, 2 + 4, 0, 0);
    json_decref(st);

    /* Daemon 2 goes away.  Each of its turns passes to the next daemon
     * (0), after which the turn goes on from there (to 1): frames 2, 4,
     * 6, 8 and 10 are rerouted, and 0 and 1 take six frames each. */
    daemon_stop(&d[2]);
    wait_router_state(rc, 2, 3, "disconnected");
    rtomo_sbdx_spec_clear(&spec);
    sbdx_spec(&spec, "rerouted");
    send_sbdx(c, &spec, frames);
    send_sbdx_to(&d[3], &spec, frames);
    const int halves[4] = {6, 6, 0, SBDX_FRAMES};
    wait_sbdx(&in, "rerouted", halves, 4);
    check_dealt(&in, "rerouted", 3, halves, 3);
    st = wait_router_forwarded(rc, 2 * (SBDX_FRAMES + 2),
                               3 * 2 + SBDX_FRAMES + 2 * 2 + SBDX_FRAMES);
    ck_assert_int_eq(status_field(st, "rerouted_frames"), 5);
    ck_assert_int_eq(status_field(st, "lost_frames"), 0);
    check_dealt_to(st, 0, 4 + 6, 6 + 2 + 6, 0, 0);
    check_dealt_to(st, 1, 4 + 6, 6 + 2 + 6, 0, 0);
    check_dealt_to(st, 2, 4, 6, 5, 2);  /* the begin and end it missed */
    ck_assert_str_eq(router_state_of(st, 2), "disconnected");
    json_decref(st);
    /* Daemons 0 and 1, and the reference, complete the stream. */
    double deadline = daemon_now_ms() + DAEMON_TIMEOUT_MS;
    while (routed_count_events(&in, "scan_complete", "rerouted") < 3 &&
           daemon_now_ms() < deadline)
        daemon_inbox_pump(&in, 100);
    ck_assert_int_eq(routed_count_events(&in, "scan_complete", "rerouted"), 3);

    rtomo_client_close(rc);
    char *log = router_stop(&r);
    char line[256];
    snprintf(line, sizeof line, "daemon %s (rows 32..47) is gone: its SBDX "
             "frames of stream rerouted go to the other daemons", d[2].ingest);
    ck_assert_msg(text_occurrences(log, line) == 1, "the router's log says %d "
                  "times \"%s\":\n%s", text_occurrences(log, line), line, log);
    free(log);
    free(frames);
    rtomo_sbdx_spec_clear(&spec);
    daemon_inbox_free(&in);
    rtomo_client_close(c);
    for (int k = 0; k < 4; k++)
        if (k != 2)
            daemon_stop(&d[k]);
}
END_TEST

/* A client of a CURVE daemon with the given key pair (the router's),
 * once the daemon answers it. */
static rtomo_client *keyed_client(const daemon_proc *d, const char *server,
                                  const char *pair)
{
    rtomo_client_options opt;
    rtomo_client_options_init(&opt);
    opt.control = d->control;
    opt.server_key = server;
    opt.client_key = pair;
    opt.control_timeout_ms = 1000;
    rtomo_error err;
    rtomo_client *c = rtomo_client_open(&opt, &err);
    ck_assert_msg(c, "keyed client: %s", err.message);
    double deadline = daemon_now_ms() + DAEMON_TIMEOUT_MS;
    rtomo_status st = RTOMO_E_UNAVAILABLE;
    while (st != RTOMO_OK && daemon_now_ms() < deadline) {
        json_t *reply = NULL;
        st = rtomo_client_command(c, "ping", &reply, &err);
        json_decref(reply);
    }
    ck_assert_msg(st == RTOMO_OK, "the CURVE daemon does not answer");
    return c;
}

/* A daemon that admits only listed CURVE keys: the router with its key
 * pair delivers a whole scan; a router without keys never completes the
 * handshake, says so (never_connected) and counts the scan as lost. */
START_TEST(router_speaks_curve_to_secure_daemons)
{
    if (!rtomo_keys_curve_available()) {
        printf("libzmq without CURVE: skipped\n");
        return;
    }
    char dir[256], clients[300], server_public[256], server_secret[256];
    char router_secret[256];
    test_make_temp_dir("rtomo-router-keys", dir, sizeof dir);
    snprintf(clients, sizeof clients, "%s/clients", dir);
    ck_assert(mkdir(clients, 0755) == 0);
    daemon_make_key_pair(dir, "daemons", server_public, server_secret);
    daemon_make_key_pair(clients, "router", NULL, router_secret);
    char secret_arg[320], clients_arg[360];
    snprintf(secret_arg, sizeof secret_arg,
             "security.curve_secret_key_file=%s", server_secret);
    snprintf(clients_arg, sizeof clients_arg, "security.client_keys=%s",
             clients);
    const char *args[] = {"--set", secret_arg, "--set", clients_arg, NULL};
    daemon_proc d;
    daemon_spawn(&d, args);
    rtomo_client *keyed = keyed_client(&d, server_public, router_secret);

    const char *const rows[] = {"0:48"};
    const char *const keys[] = {"--server-key", server_public,
                                "--client-key", router_secret, NULL};
    router_proc with, without;
    router_start(&with, &d, rows, 1, keys);
    router_start(&without, &d, rows, 1, NULL);
    rtomo_client *rc_with = router_client(&with);
    rtomo_client *rc_without = router_client(&without);
    wait_router_state(rc_with, 0, 1, "connected");

    /* Through the keyed router: the daemon takes the whole scan. */
    daemon_scan s;
    routed_scan_make(&s, "curve", 0xdae1604);
    rtomo_client_options opt;
    rtomo_client_options_init(&opt);
    opt.ingest = with.p.ingest;
    rtomo_error err;
    rtomo_client *cam = rtomo_client_open(&opt, &err);
    ck_assert_msg(cam, "camera: %s", err.message);
    daemon_send_scan(cam, &s);
    rtomo_client_close(cam);
    json_t *st = wait_router_messages(rc_with, 1, ROUTED_MESSAGES);
    ck_assert_int_eq(status_field(router_daemon_json(st, 0),
                                  "lost_messages"), 0);
    json_decref(st);
    rtomo_scan_outcome out;
    ck_assert_msg(rtomo_client_scan_outcome(keyed, "curve", DAEMON_TIMEOUT_MS,
                                            &out, &err) == RTOMO_OK,
                  "%s", err.message);
    ck_assert_msg(out.final && out.state == RTOMO_SCAN_COMPLETE &&
                      out.frames == ROUTED_FRAMES,
                  "scan curve through the keyed router: %s, %ld frames (%s)",
                  rtomo_scan_state_name(out.state), out.frames, out.reason);

    /* The router without keys: refused, reported, counted. */
    st = router_status(rc_without);
    ck_assert_str_eq(router_state_of(st, 0), "never_connected");
    json_decref(st);
    opt.ingest = without.p.ingest;
    cam = rtomo_client_open(&opt, &err);
    ck_assert_msg(cam, "camera: %s", err.message);
    daemon_scan t;
    routed_scan_make(&t, "no-key", 0xdae1605);
    daemon_send_scan(cam, &t);
    rtomo_client_close(cam);
    st = wait_router_messages(rc_without, 1, ROUTED_MESSAGES);
    ck_assert_str_eq(router_state_of(st, 0), "never_connected");
    ck_assert_int_eq(status_field(router_daemon_json(st, 0), "lost_frames"),
                     ROUTED_FRAMES);
    json_decref(st);

    rtomo_client_close(rc_with);
    rtomo_client_close(rc_without);
    free(router_stop(&with));
    free(router_stop(&without));
    daemon_scan_free(&s);
    daemon_scan_free(&t);
    rtomo_client_close(keyed);
    daemon_stop(&d);
    test_remove_tree(dir);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {
        rows_needed_widen_and_clip,
        frames_are_cut_into_rows,
        what_cannot_be_cut_goes_whole,
        sbdx_frames_are_dealt,
        sbdx_turns_pass_over_daemons_that_cannot_take_frames,
        daemon_arguments,
        router_cuts_one_stream_for_three_daemons,
        router_counts_what_a_gone_daemon_misses,
        router_deals_sbdx_frames_in_turn,
        router_speaks_curve_to_secure_daemons,
    };
    return daemon_run_tests("daemon_router", tests,
                            (int)(sizeof tests / sizeof tests[0]), 300);
}
