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
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "daemon_harness.h"
#include "router_route.h"
#include "router_sbdx.h"
#include "rtomo_keys.h"

#define SAME_AS_ENGINE 1e-5

/* The detector of the routed scans: three daemons take 16 rows each. */
#define WIDTH 64
#define HEIGHT 48
#define THIRD 16
#define PROJECTIONS 60
#define DARKS 1
#define FLATS 2
#define FRAMES (DARKS + FLATS + PROJECTIONS)
#define MESSAGES (FRAMES + 2)           /* with the begin and the end */
#define FRAME_BYTES (WIDTH * HEIGHT * 2)        /* uint16 */

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
                        FRAME_BYTES);
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
        {"not json", 2, FRAME_BYTES, 0},
        {"[48, 64]", 2, FRAME_BYTES, 0},
        {"{\"protocol\":1,\"type\":\"scan_begin\",\"scan\":\"s\"}", 1, 0, 0},
        {"{\"protocol\":1,\"type\":\"scan_end\",\"scan\":\"s\"}", 2, 0, 0},
        {"{\"protocol\":2,\"type\":\"sbdx_frame\",\"scan\":\"s\","
         "\"dtype\":\"uint8\",\"shape\":[2,2,3,4]}", 2, 48, 1},
        {"{\"protocol\":1,\"type\":\"sbdx_frame\",\"scan\":\"s\","
         "\"dtype\":\"uint8\",\"shape\":[2,2,3,4]}", 1, 0, 1},
        {"{\"protocol\":1,\"type\":\"sbdx_begin\",\"scan\":\"s\"}", 1, 0,
         0},
        {"{\"protocol\":1,\"type\":\"photo\",\"scan\":\"s\","
         "\"dtype\":\"uint16\",\"shape\":[48,64]}", 2, FRAME_BYTES, 0},
        {FRAME_HEAD "\"dtype\":\"uint16\",\"shape\":[48,64]}", 1, 0, 1},
        {FRAME_HEAD "\"dtype\":\"uint16\",\"shape\":[48,64]}", 3,
         FRAME_BYTES, 1},
        {FRAME_HEAD "\"dtype\":\"uint16\",\"shape\":[48,64]}", 2,
         FRAME_BYTES - 1, 1},
        {FRAME_HEAD "\"dtype\":\"uint16\",\"shape\":[48,64,1]}", 2,
         FRAME_BYTES, 1},
        {FRAME_HEAD "\"dtype\":\"uint16\",\"shape\":[48.0,64]}", 2,
         FRAME_BYTES, 1},
        {FRAME_HEAD "\"dtype\":\"uint16\",\"shape\":[0,64]}", 2, 0, 1},
        {FRAME_HEAD "\"dtype\":\"uint16\"}", 2, FRAME_BYTES, 1},
        {FRAME_HEAD "\"dtype\":\"uint32\",\"shape\":[48,64]}", 2,
         2 * FRAME_BYTES, 1},
        {FRAME_HEAD "\"shape\":[48,64]}", 2, FRAME_BYTES, 1},
        {FRAME_HEAD "\"dtype\":\"uint16\",\"shape\":[48,64],"
         "\"rows\":{\"first\":0,\"count\":16}}", 2, FRAME_BYTES / 3, 1},
        {"{\"protocol\":2,\"type\":\"projection\",\"scan\":\"s\","
         "\"dtype\":\"uint16\",\"shape\":[48,64]}", 2, FRAME_BYTES, 1},
        {"{\"type\":\"projection\",\"scan\":\"s\","
         "\"dtype\":\"uint16\",\"shape\":[48,64]}", 2, FRAME_BYTES, 1},
        {FRAME_HEAD "\"index\":1,\"dtype\":\"uint16\",\"shape\":[48,64]}", 2,
         FRAME_BYTES, 0},       /* duplicate keys: not read at all */
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

/* The router as a child process; its stdout and stderr go to `log`. */
typedef struct router_proc {
    daemon_process p;           /* its pid, ingest and control endpoints */
    char dir[256], log[300];
} router_proc;

static void router_path(char *out, size_t size)
{
    const char *explicit_path = getenv("RTOMO_ROUTER");
    const char *builddir = getenv("top_builddir");
    if (explicit_path)
        snprintf(out, size, "%s", explicit_path);
    else
        snprintf(out, size, "%s/rtomo-router", builddir ? builddir : ".");
    ck_assert_msg(access(out, X_OK) == 0, "%s is not built", out);
}

/* A loopback port that is free now (the kernel picks it). */
static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert(fd >= 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    ck_assert(bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
              getsockname(fd, (struct sockaddr *)&a, &len) == 0);
    close(fd);
    return ntohs(a.sin_port);
}

static void router_spawn(router_proc *r, const char *const *argv)
{
    pid_t parent = getpid();
    r->p.pid = fork();
    ck_assert(r->p.pid >= 0);
    if (r->p.pid == 0) {
        /* A test that fails must not leave a router behind. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127);
        int fd = open(r->log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        dup2(fd, 1);
        dup2(fd, 2);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
}

/* A control client of the router. */
static rtomo_client *router_client(const router_proc *r)
{
    rtomo_client_options opt;
    rtomo_client_options_init(&opt);
    opt.control = r->p.control;
    opt.control_timeout_ms = 1000;
    rtomo_error err;
    rtomo_client *c = rtomo_client_open(&opt, &err);
    ck_assert_msg(c, "router control client: %s", err.message);
    return c;
}

/* The router's status reply, or NULL when it does not answer. */
static json_t *router_status_or_null(rtomo_client *rc)
{
    json_t *reply = NULL;
    rtomo_error err;
    if (rtomo_client_command(rc, "status", &reply, &err) == RTOMO_OK)
        return reply;
    json_decref(reply);
    return NULL;
}

static json_t *router_status(rtomo_client *rc)
{
    json_t *reply = router_status_or_null(rc);
    ck_assert_msg(reply, "the router does not answer status");
    return reply;
}

/* Wait until the router answers or exits; 0 when it answers. */
static int router_answers(router_proc *r)
{
    rtomo_client *rc = router_client(r);
    double deadline = daemon_now_ms() + DAEMON_TIMEOUT_MS;
    int status, up = 0;
    while (!up && !daemon_process_exited(&r->p, &status) &&
           daemon_now_ms() < deadline) {
        json_t *reply = router_status_or_null(rc);
        up = reply != NULL;
        json_decref(reply);
    }
    rtomo_client_close(rc);
    return up ? 0 : -1;
}

/* Start the router in front of daemons d[0..n-1], daemon k with rows
 * rows[k] ("FIRST:COUNT"), and the options in `extra` (NULL-terminated,
 * or NULL).  A port taken between its choice and the router's bind
 * (tests run in parallel) costs another attempt. */
static void router_start(router_proc *r, const daemon_proc *d,
                         const char *const *rows, int n,
                         const char *const *extra)
{
    char path[1024], targets[8][128];
    router_path(path, sizeof path);
    memset(r, 0, sizeof *r);
    test_make_temp_dir("rtomo-router", r->dir, sizeof r->dir);
    snprintf(r->log, sizeof r->log, "%s/log", r->dir);
    for (int attempt = 0; attempt < 3; attempt++) {
        snprintf(r->p.ingest, sizeof r->p.ingest, "tcp://127.0.0.1:%d",
                 free_port());
        snprintf(r->p.control, sizeof r->p.control, "tcp://127.0.0.1:%d",
                 free_port());
        const char *argv[32] = {path, "--ingest", r->p.ingest, "--control",
                                r->p.control};
        int argc = 5;
        for (int k = 0; k < n; k++) {
            snprintf(targets[k], sizeof targets[k], "%s=%s", d[k].ingest,
                     rows[k]);
            argv[argc++] = "--daemon";
            argv[argc++] = targets[k];
        }
        for (int i = 0; extra && extra[i] && argc < 30; i++)
            argv[argc++] = extra[i];
        argv[argc] = NULL;
        router_spawn(r, argv);
        if (router_answers(r) == 0)
            return;
        if (r->p.pid)
            daemon_process_stop(&r->p, SIGKILL, DAEMON_TIMEOUT_MS);
    }
    ck_abort_msg("rtomo-router does not start (its log: %s)", r->log);
}

/* SIGTERM: a clean exit (status 0) is expected.  Returns its log
 * (malloc'd) and removes it. */
static char *router_stop(router_proc *r)
{
    ck_assert_int_eq(daemon_process_stop(&r->p, SIGTERM, DAEMON_TIMEOUT_MS),
                     0);
    FILE *f = fopen(r->log, "r");
    ck_assert_msg(f, "cannot read %s", r->log);
    char *text = calloc(1, 65536);
    ck_assert(text);
    size_t n = fread(text, 1, 65535, f);
    text[n] = '\0';
    fclose(f);
    test_remove_tree(r->dir);
    return text;
}

static json_t *router_daemon_json(json_t *status, int k)
{
    json_t *d = json_array_get(json_object_get(status, "daemons"), (size_t)k);
    ck_assert_msg(json_is_object(d), "router status has no daemon %d", k);
    return d;
}

static long field(json_t *object, const char *name)
{
    json_t *v = json_object_get(object, name);
    ck_assert_msg(json_is_integer(v), "status has no integer %s", name);
    return (long)json_integer_value(v);
}

static const char *daemon_state(json_t *status, int k)
{
    const char *s = json_string_value(
        json_object_get(router_daemon_json(status, k), "state"));
    ck_assert_ptr_nonnull(s);
    return s;
}

/* Wait until the router's daemon k (every daemon when k < 0, n of them)
 * is in `state`. */
static void wait_router_state(rtomo_client *rc, int k, int n,
                              const char *state)
{
    double deadline = daemon_now_ms() + DAEMON_TIMEOUT_MS;
    for (;;) {
        json_t *st = router_status(rc);
        int done = 1;
        for (int i = k < 0 ? 0 : k; i < (k < 0 ? n : k + 1); i++)
            done &= strcmp(daemon_state(st, i), state) == 0;
        json_decref(st);
        if (done)
            return;
        ck_assert_msg(daemon_now_ms() < deadline, "the router's daemon %d "
                      "is not %s", k, state);
        daemon_pause_ms(20);
    }
}

/* Wait until the router has received `messages` messages and accounted
 * for each with every one of its n daemons (sent or lost); returns its
 * status then. */
static json_t *wait_router_messages(rtomo_client *rc, int n, long messages)
{
    double deadline = daemon_now_ms() + DAEMON_TIMEOUT_MS;
    for (;;) {
        json_t *st = router_status(rc);
        int done = field(st, "messages") == messages;
        for (int k = 0; done && k < n; k++) {
            json_t *d = router_daemon_json(st, k);
            done = field(d, "messages") + field(d, "lost_messages") ==
                   messages;
        }
        if (done)
            return st;
        ck_assert_msg(daemon_now_ms() < deadline, "the router received %ld "
                      "messages, expected %ld", field(st, "messages"),
                      messages);
        json_decref(st);
        daemon_pause_ms(20);
    }
}

/* ------------------------------------------------------- daemons ---- */

/* Three daemons, each with a third of the rows, and, when `whole`, a
 * fourth with all of them. */
static void start_daemons(daemon_proc *d, int whole)
{
    char rows[3][96];
    for (int k = 0; k < 3; k++) {
        snprintf(rows[k], sizeof rows[k], "reconstruction.rows={\"first\": "
                 "%d, \"count\": %d}", k * THIRD, THIRD);
        const char *args[] = {"--set", rows[k], NULL};
        daemon_start(&d[k], args);
    }
    if (whole)
        daemon_start(&d[3], NULL);
}

/* A scan of the routed detector that reconstructs every row. */
static void make_scan(daemon_scan *s, const char *id, uint64_t seed)
{
    daemon_scan_make(s, id, WIDTH, HEIGHT, PROJECTIONS, DARKS, FLATS, seed);
    int rows[HEIGHT];
    for (int i = 0; i < HEIGHT; i++)
        rows[i] = i;
    daemon_scan_select_rows(s, rows, HEIGHT);
}

/* Wait until publisher k has sent want[k] slices of `scan`, for each of
 * the n; asserts within the timeout. */
static void wait_slices(daemon_inbox *in, const char *scan, const int *want,
                        int n)
{
    double deadline = daemon_now_ms() + DAEMON_TIMEOUT_MS;
    for (;;) {
        int done = 1;
        for (int k = 0; k < n; k++)
            done &= daemon_count_slices_from(in, k, scan) >= want[k];
        if (done)
            break;
        ck_assert_msg(daemon_now_ms() < deadline, "slices of %s missing", scan);
        daemon_inbox_pump(in, 100);
    }
    for (int k = 0; k < n; k++)
        ck_assert_int_eq(daemon_count_slices_from(in, k, scan), want[k]);
}

static int count_events(const daemon_inbox *in, const char *event,
                        const char *scan)
{
    int n = 0;
    for (int i = 0; i < in->n_events; i++)
        n += strcmp(in->events[i].event, event) == 0 &&
             strcmp(in->events[i].scan, scan) == 0;
    return n;
}

/* Every slice of daemon 3 (whole frames) came from exactly the daemon of
 * its third, with the same place in the set and the same values; and
 * daemon 3's equal the engine's. */
static void check_merged(const daemon_inbox *in, const daemon_scan *s)
{
    const char *scan = s->spec.scan;
    const size_t pixels = (size_t)WIDTH * WIDTH;
    int rows[HEIGHT];
    for (int i = 0; i < HEIGHT; i++)
        rows[i] = i;
    float *ref = daemon_reference_slices(s, rows, HEIGHT, NULL, NULL);
    for (int row = 0; row < HEIGHT; row++) {
        const daemon_image *whole = daemon_slice_from(in, 3, scan, row);
        const int mine = row / THIRD;
        const daemon_image *part = daemon_slice_from(in, mine, scan, row);
        ck_assert_msg(whole && part, "slice %d: from the whole daemon %s, "
                      "from daemon %d %s", row, whole ? "yes" : "no", mine,
                      part ? "yes" : "no");
        for (int k = 0; k < 3; k++)
            ck_assert_msg(k == mine || !daemon_slice_from(in, k, scan, row),
                          "slice %d came from daemon %d too", row, k);
        ck_assert_int_eq(part->h.index, whole->h.index);
        ck_assert_int_eq(part->h.count, whole->h.count);
        ck_assert_int_eq(whole->h.index, row);
        ck_assert_int_eq(whole->h.count, HEIGHT);
        ck_assert_uint_eq(part->size, whole->size);
        ck_assert_uint_eq(whole->size, pixels * sizeof(float));
        double scale = test_max_abs(whole->data, pixels);
        double diff = test_max_abs_diff(part->data, whole->data, pixels);
        ck_assert_msg(diff <= SAME_AS_ENGINE * scale, "slice %d differs by "
                      "%g (scale %g)", row, diff, scale);
        scale = test_max_abs(ref + pixels * row, pixels);
        diff = test_max_abs_diff(whole->data, ref + pixels * row, pixels);
        ck_assert_msg(diff <= SAME_AS_ENGINE * scale, "slice %d differs from "
                      "the engine's by %g (scale %g)", row, diff, scale);
    }
    free(ref);
}

/* The daemon's status.telemetry.ingest.<name> (frames, bytes). */
static long ingest_count(const daemon_proc *d, const char *name)
{
    rtomo_client_options opt;
    rtomo_client_options_init(&opt);
    opt.control = d->control;
    opt.control_timeout_ms = 10000;
    rtomo_error err;
    rtomo_client *c = rtomo_client_open(&opt, &err);
    ck_assert_msg(c, "control client: %s", err.message);
    json_t *st = daemon_status(c);
    long n = field(json_object_get(json_object_get(st, "telemetry"),
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
    ck_assert_int_eq(whole, (long)FRAMES * FRAME_BYTES);
    for (int k = 0; k < 3; k++) {
        ck_assert_int_eq(ingest_count(&d[k], "frames"), FRAMES);
        long bytes = ingest_count(&d[k], "bytes");
        printf("daemon %d (rows %d..%d): %ld bytes of frames, the whole "
               "daemon %ld\n", k, k * THIRD, k * THIRD + THIRD - 1, bytes,
               whole);
        ck_assert_msg(bytes * 2 < whole && bytes * 10 > whole * 3,
                      "daemon %d received %ld bytes of %ld: not a third", k,
                      bytes, whole);
    }
}

/* The router's counts after one scan to the four daemons. */
static void check_router_counts(json_t *st)
{
    ck_assert_int_eq(field(st, "messages"), MESSAGES);
    ck_assert_int_eq(field(st, "frames"), FRAMES);
    ck_assert_int_eq(field(st, "split"), FRAMES);
    ck_assert_int_eq(field(st, "whole"), 2);
    ck_assert_int_eq(field(st, "forwarded"), 4 * MESSAGES);
    ck_assert_int_gt(field(st, "bytes_in"), (long)FRAMES * FRAME_BYTES);
    long whole_bytes = field(router_daemon_json(st, 3), "bytes");
    for (int k = 0; k < 4; k++) {
        json_t *d = router_daemon_json(st, k);
        ck_assert_str_eq(daemon_state(st, k), "connected");
        ck_assert_int_eq(field(d, "messages"), MESSAGES);
        ck_assert_int_eq(field(d, "lost_frames"), 0);
        ck_assert_int_eq(field(d, "lost_messages"), 0);
        ck_assert(json_is_null(json_object_get(d, "lost_since_ms")));
        if (k < 3)
            ck_assert_int_lt(2 * field(d, "bytes"), whole_bytes);
    }
    /* The whole daemon got every byte the camera sent. */
    ck_assert_int_eq(whole_bytes, field(st, "bytes_in"));
}

START_TEST(router_cuts_one_stream_for_three_daemons)
{
    daemon_proc d[4];
    start_daemons(d, 1);
    router_proc r;
    const char *const rows[] = {"0:16", "16:16", "32:16", "0:48"};
    router_start(&r, d, rows, 4, NULL);
    rtomo_client *rc = router_client(&r);
    wait_router_state(rc, -1, 4, "connected");
    rtomo_client *c = daemon_connect_all(d, 4, r.p.ingest);
    daemon_inbox in;
    daemon_inbox_init(&in, c);

    daemon_scan s;
    make_scan(&s, "routed", 0xdae1601);
    daemon_send_scan(c, &s);
    const int want[4] = {THIRD, THIRD, THIRD, HEIGHT};
    wait_slices(&in, "routed", want, 4);
    check_merged(&in, &s);
    check_bytes(d);
    json_t *st = wait_router_messages(rc, 4, MESSAGES);
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

/* Occurrences of `needle` in `text`. */
static int occurrences(const char *text, const char *needle)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

START_TEST(router_counts_what_a_gone_daemon_misses)
{
    daemon_proc d[3];
    start_daemons(d, 0);
    router_proc r;
    const char *const rows[] = {"0:16", "16:16", "32:16"};
    router_start(&r, d, rows, 3, NULL);
    rtomo_client *rc = router_client(&r);
    wait_router_state(rc, -1, 3, "connected");
    rtomo_client *c = daemon_connect_all(d, 3, r.p.ingest);
    daemon_inbox in;
    daemon_inbox_init(&in, c);
    const int thirds[3] = {THIRD, THIRD, THIRD};

    daemon_scan before, after;
    make_scan(&before, "before", 0xdae1602);
    make_scan(&after, "after", 0xdae1603);
    daemon_send_scan(c, &before);
    wait_slices(&in, "before", thirds, 3);

    /* The last third's daemon goes away; the router notices. */
    daemon_stop(&d[2]);
    wait_router_state(rc, 2, 3, "disconnected");
    daemon_send_scan(c, &after);
    json_t *st = wait_router_messages(rc, 3, 2 * MESSAGES);
    json_t *gone = router_daemon_json(st, 2);
    ck_assert_str_eq(daemon_state(st, 2), "disconnected");
    ck_assert_int_eq(field(gone, "lost_frames"), FRAMES);
    ck_assert_int_eq(field(gone, "lost_messages"), MESSAGES);
    ck_assert_int_eq(field(gone, "messages"), MESSAGES);
    ck_assert_int_gt(field(gone, "lost_since_ms"), 0);
    for (int k = 0; k < 2; k++) {
        json_t *d_k = router_daemon_json(st, k);
        ck_assert_str_eq(daemon_state(st, k), "connected");
        ck_assert_int_eq(field(d_k, "messages"), 2 * MESSAGES);
        ck_assert_int_eq(field(d_k, "lost_frames"), 0);
    }
    ck_assert_int_eq(field(st, "forwarded"), 5 * MESSAGES);
    json_decref(st);

    /* The other two complete the scan: their thirds, nothing of the
     * last. */
    const int two[2] = {THIRD, THIRD};
    wait_slices(&in, "after", two, 2);
    double deadline = daemon_now_ms() + DAEMON_TIMEOUT_MS;
    while (count_events(&in, "scan_complete", "after") < 2 &&
           daemon_now_ms() < deadline)
        daemon_inbox_pump(&in, 100);
    ck_assert_int_eq(count_events(&in, "scan_complete", "after"), 2);
    ck_assert_int_eq(daemon_count_slices_from(&in, 2, "after"), 0);

    rtomo_client_close(rc);
    char *log = router_stop(&r);
    char line[256];
    snprintf(line, sizeof line, "daemon %s (rows 32..47) is gone: its rows "
             "of scan after are lost", d[2].ingest);
    ck_assert_msg(occurrences(log, line) == 1, "the router's log says %d "
                  "times \"%s\":\n%s", occurrences(log, line), line, log);
    ck_assert_int_eq(occurrences(log, "is gone"), 1);
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
        if (field(st, "messages") == messages &&
            field(st, "forwarded") == forwarded)
            return st;
        ck_assert_msg(daemon_now_ms() < deadline, "the router received %ld "
                      "messages and sent %ld, expected %ld and %ld",
                      field(st, "messages"), field(st, "forwarded"),
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
           "%ld rerouted, %ld messages lost\n", k, field(d, "messages"),
           field(d, "bytes"), field(d, "sbdx_frames"),
           field(d, "rerouted_frames"), field(d, "lost_messages"));
    ck_assert_int_eq(field(d, "sbdx_frames"), frames);
    ck_assert_int_eq(field(d, "messages"), messages);
    ck_assert_int_eq(field(d, "rerouted_frames"), rerouted);
    ck_assert_int_eq(field(d, "lost_frames"), 0);
    ck_assert_int_eq(field(d, "lost_messages"), lost_messages);
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
    ck_assert_int_eq(field(st, "dealt"), SBDX_FRAMES);
    ck_assert_int_eq(field(st, "whole"), 2);
    ck_assert_int_eq(field(st, "frames"), SBDX_FRAMES);
    ck_assert_int_eq(field(st, "rerouted_frames"), 0);
    ck_assert_int_eq(field(st, "lost_frames"), 0);
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
    ck_assert_int_eq(field(st, "rerouted_frames"), 5);
    ck_assert_int_eq(field(st, "lost_frames"), 0);
    check_dealt_to(st, 0, 4 + 6, 6 + 2 + 6, 0, 0);
    check_dealt_to(st, 1, 4 + 6, 6 + 2 + 6, 0, 0);
    check_dealt_to(st, 2, 4, 6, 5, 2);  /* the begin and end it missed */
    ck_assert_str_eq(daemon_state(st, 2), "disconnected");
    json_decref(st);
    /* Daemons 0 and 1, and the reference, complete the stream. */
    double deadline = daemon_now_ms() + DAEMON_TIMEOUT_MS;
    while (count_events(&in, "scan_complete", "rerouted") < 3 &&
           daemon_now_ms() < deadline)
        daemon_inbox_pump(&in, 100);
    ck_assert_int_eq(count_events(&in, "scan_complete", "rerouted"), 3);

    rtomo_client_close(rc);
    char *log = router_stop(&r);
    char line[256];
    snprintf(line, sizeof line, "daemon %s (rows 32..47) is gone: its SBDX "
             "frames of stream rerouted go to the other daemons", d[2].ingest);
    ck_assert_msg(occurrences(log, line) == 1, "the router's log says %d "
                  "times \"%s\":\n%s", occurrences(log, line), line, log);
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
    make_scan(&s, "curve", 0xdae1604);
    rtomo_client_options opt;
    rtomo_client_options_init(&opt);
    opt.ingest = with.p.ingest;
    rtomo_error err;
    rtomo_client *cam = rtomo_client_open(&opt, &err);
    ck_assert_msg(cam, "camera: %s", err.message);
    daemon_send_scan(cam, &s);
    rtomo_client_close(cam);
    json_t *st = wait_router_messages(rc_with, 1, MESSAGES);
    ck_assert_int_eq(field(router_daemon_json(st, 0), "lost_messages"), 0);
    json_decref(st);
    rtomo_scan_outcome out;
    ck_assert_msg(rtomo_client_scan_outcome(keyed, "curve", DAEMON_TIMEOUT_MS,
                                            &out, &err) == RTOMO_OK,
                  "%s", err.message);
    ck_assert_msg(out.final && out.state == RTOMO_SCAN_COMPLETE &&
                      out.frames == FRAMES,
                  "scan curve through the keyed router: %s, %ld frames (%s)",
                  rtomo_scan_state_name(out.state), out.frames, out.reason);

    /* The router without keys: refused, reported, counted. */
    st = router_status(rc_without);
    ck_assert_str_eq(daemon_state(st, 0), "never_connected");
    json_decref(st);
    opt.ingest = without.p.ingest;
    cam = rtomo_client_open(&opt, &err);
    ck_assert_msg(cam, "camera: %s", err.message);
    daemon_scan t;
    make_scan(&t, "no-key", 0xdae1605);
    daemon_send_scan(cam, &t);
    rtomo_client_close(cam);
    st = wait_router_messages(rc_without, 1, MESSAGES);
    ck_assert_str_eq(daemon_state(st, 0), "never_connected");
    ck_assert_int_eq(field(router_daemon_json(st, 0), "lost_frames"), FRAMES);
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
