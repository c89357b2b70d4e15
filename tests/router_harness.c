/*
 * router_harness.c — what the tests of rtomo-router share
 * (router_harness.h): the router as a child process, its status, and the
 * three daemons of a third of the rows each that it feeds.
 */
#include "config.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "router_harness.h"

/* ------------------------------------------------------- the router ---- */

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
int router_free_port(void)
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
rtomo_client *router_client(const router_proc *r)
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

json_t *router_status(rtomo_client *rc)
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

void router_start_targets(router_proc *r, const char *const *targets,
                          int n, const char *const *extra)
{
    char path[1024];
    router_path(path, sizeof path);
    memset(r, 0, sizeof *r);
    test_make_temp_dir("rtomo-router", r->dir, sizeof r->dir);
    snprintf(r->log, sizeof r->log, "%s/log", r->dir);
    for (int attempt = 0; attempt < 3; attempt++) {
        snprintf(r->p.ingest, sizeof r->p.ingest, "tcp://127.0.0.1:%d",
                 router_free_port());
        snprintf(r->p.control, sizeof r->p.control, "tcp://127.0.0.1:%d",
                 router_free_port());
        const char *argv[48] = {path, "--ingest", r->p.ingest, "--control",
                                r->p.control};
        int argc = 5;
        for (int k = 0; k < n && argc < 40; k++) {
            argv[argc++] = "--daemon";
            argv[argc++] = targets[k];
        }
        for (int i = 0; extra && extra[i] && argc < 46; i++)
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

void router_start(router_proc *r, const daemon_proc *d,
                  const char *const *rows, int n, const char *const *extra)
{
    char targets[8][128];
    const char *list[8];
    ck_assert_int_le(n, 8);
    for (int k = 0; k < n; k++) {
        snprintf(targets[k], sizeof targets[k], "%s=%s", d[k].ingest,
                 rows[k]);
        list[k] = targets[k];
    }
    router_start_targets(r, list, n, extra);
}

/* SIGTERM: a clean exit (status 0) is expected.  Returns its log
 * (malloc'd) and removes it. */
char *router_stop(router_proc *r)
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

json_t *router_daemon_json(json_t *status, int k)
{
    json_t *d = json_array_get(json_object_get(status, "daemons"), (size_t)k);
    ck_assert_msg(json_is_object(d), "router status has no daemon %d", k);
    return d;
}

long status_field(json_t *object, const char *name)
{
    json_t *v = json_object_get(object, name);
    ck_assert_msg(json_is_integer(v), "status has no integer %s", name);
    return (long)json_integer_value(v);
}

const char *router_state_of(json_t *status, int k)
{
    const char *s = json_string_value(
        json_object_get(router_daemon_json(status, k), "state"));
    ck_assert_ptr_nonnull(s);
    return s;
}

/* Wait until the router's daemon k (every daemon when k < 0, n of them)
 * is in `state`. */
void wait_router_state(rtomo_client *rc, int k, int n,
                              const char *state)
{
    double deadline = daemon_now_ms() + DAEMON_TIMEOUT_MS;
    for (;;) {
        json_t *st = router_status(rc);
        int done = 1;
        for (int i = k < 0 ? 0 : k; i < (k < 0 ? n : k + 1); i++)
            done &= strcmp(router_state_of(st, i), state) == 0;
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
json_t *wait_router_messages(rtomo_client *rc, int n, long messages)
{
    double deadline = daemon_now_ms() + DAEMON_TIMEOUT_MS;
    for (;;) {
        json_t *st = router_status(rc);
        int done = status_field(st, "messages") == messages;
        for (int k = 0; done && k < n; k++) {
            json_t *d = router_daemon_json(st, k);
            done = status_field(d, "messages") +
                       status_field(d, "lost_messages") ==
                   messages;
        }
        if (done)
            return st;
        ck_assert_msg(daemon_now_ms() < deadline, "the router received %ld "
                      "messages, expected %ld", status_field(st, "messages"),
                      messages);
        json_decref(st);
        daemon_pause_ms(20);
    }
}

/* ------------------------------------------------------- daemons ---- */

void routed_daemons_start(daemon_proc *d, int whole,
                          char (*stream2)[ROUTED_ENDPOINT])
{
    char rows[3][96], input[4][ROUTED_ENDPOINT + 32];
    for (int k = 0; k < 3 + (whole != 0); k++) {
        const char *args[5] = {NULL};
        int n = 0;
        if (k < 3) {
            snprintf(rows[k], sizeof rows[k], "reconstruction.rows="
                     "{\"first\": %d, \"count\": %d}", k * ROUTED_THIRD,
                     ROUTED_THIRD);
            args[n++] = "--set";
            args[n++] = rows[k];
        }
        if (stream2) {
            snprintf(stream2[k], ROUTED_ENDPOINT, "tcp://127.0.0.1:%d",
                     router_free_port());
            snprintf(input[k], sizeof input[k], "inputs.stream2.endpoint=%s",
                     stream2[k]);
            args[n++] = "--set";
            args[n++] = input[k];
        }
        daemon_start(&d[k], args);
    }
}

/* A scan of the routed detector that reconstructs every row. */
void routed_scan_make(daemon_scan *s, const char *id, uint64_t seed)
{
    daemon_scan_make(s, id, ROUTED_WIDTH, ROUTED_HEIGHT, ROUTED_PROJECTIONS,
                     ROUTED_DARKS, ROUTED_FLATS, seed);
    int rows[ROUTED_HEIGHT];
    for (int i = 0; i < ROUTED_HEIGHT; i++)
        rows[i] = i;
    daemon_scan_select_rows(s, rows, ROUTED_HEIGHT);
}

/* Wait until publisher k has sent want[k] slices of `scan`, for each of
 * the n; asserts within the timeout. */
void routed_wait_slices(daemon_inbox *in, const char *scan, const int *want,
                        int n)
{
    double deadline = daemon_now_ms() + DAEMON_TIMEOUT_MS;
    for (;;) {
        int done = 1;
        for (int k = 0; k < n; k++)
            done &= daemon_count_slices_from(in, k, scan) >= want[k];
        if (done)
            break;
        ck_assert_msg(daemon_now_ms() < deadline, "slices of %s missing",
                      scan);
        daemon_inbox_pump(in, 100);
    }
    for (int k = 0; k < n; k++)
        ck_assert_int_eq(daemon_count_slices_from(in, k, scan), want[k]);
}

int routed_count_events(const daemon_inbox *in, const char *event,
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
void routed_check_merged(const daemon_inbox *in, const daemon_scan *s)
{
    const char *scan = s->spec.scan;
    const size_t pixels = (size_t)ROUTED_WIDTH * ROUTED_WIDTH;
    int rows[ROUTED_HEIGHT];
    for (int i = 0; i < ROUTED_HEIGHT; i++)
        rows[i] = i;
    float *ref = daemon_reference_slices(s, rows, ROUTED_HEIGHT, NULL, NULL);
    for (int row = 0; row < ROUTED_HEIGHT; row++) {
        const daemon_image *whole = daemon_slice_from(in, 3, scan, row);
        const int mine = row / ROUTED_THIRD;
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
        ck_assert_int_eq(whole->h.count, ROUTED_HEIGHT);
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

/* Occurrences of `needle` in `text`. */
int text_occurrences(const char *text, const char *needle)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

