/*
 * test_daemon_outcome.c — the sender learns what became of its scans
 * (issue 10, PROTOCOL.md 3.9).  The real rtomo-push and rtomoctl
 * ($top_builddir) against the real daemon on loopback:
 *   - a good scan (tomography and SBDX) exits 0 and says "complete";
 *     fanned out to two daemons, both are asked and their counts added;
 *   - a begin the daemon refuses exits 3 with the daemon's reason;
 *   - frames the daemon rejects make rtomo-push exit non-zero, naming the
 *     reject, and the library reports a partial scan with its counts;
 *   - scans pushed back to back by new rtomo-push processes that do not
 *     wait (a camera's pattern, which used to lose scans) all complete;
 *   - no answer from the control socket exits 5, an endpoint it cannot
 *     derive one from exits 2.
 */
#include "config.h"

#include <check.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "daemon_harness.h"

/* How long rtomo-push may wait for an outcome; far above what these small
 * scans need, below the test's own timeout. */
#define WAIT_S "30"

/* What a program run left behind. */
typedef struct run_result {
    int status;                 /* exit status */
    char out[8192], err[8192];  /* its stdout and stderr (cut) */
} run_result;

/* $top_builddir/NAME, asserted to exist. */
static void program_path(const char *name, char *path, size_t size)
{
    const char *build = getenv("top_builddir");
    snprintf(path, size, "%s/%s", build ? build : ".", name);
    ck_assert_msg(access(path, X_OK) == 0, "%s is not built", path);
}

static void slurp(const char *path, char *text, size_t size)
{
    FILE *f = fopen(path, "r");
    ck_assert_msg(f, "cannot read %s", path);
    size_t n = fread(text, 1, size - 1, f);
    text[n] = '\0';
    fclose(f);
}

/* Run the program NAME with args (NULL-terminated) to its exit. */
static void run_program(const char *name, const char *const *args,
                        run_result *r)
{
    char path[1024], dir[256], out[300], err[300];
    program_path(name, path, sizeof path);
    test_make_temp_dir("rtomo-outcome", dir, sizeof dir);
    snprintf(out, sizeof out, "%s/stdout", dir);
    snprintf(err, sizeof err, "%s/stderr", dir);
    const char *argv[48];
    int n = 0;
    argv[n++] = path;
    while (*args && n < 47)
        argv[n++] = *args++;
    argv[n] = NULL;
    pid_t pid = fork();
    ck_assert(pid >= 0);
    if (pid == 0) {
        int o = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int e = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(o, 1);
        dup2(e, 2);
        execv(path, (char *const *)argv);
        _exit(127);
    }
    int status;
    ck_assert(waitpid(pid, &status, 0) == pid);
    ck_assert_msg(WIFEXITED(status), "%s died", name);
    r->status = WEXITSTATUS(status);
    slurp(out, r->out, sizeof r->out);
    slurp(err, r->err, sizeof r->err);
    test_remove_tree(dir);
}

/* rtomo-push of a small tomography scan `id` to daemon d, with more
 * options (NULL-terminated, may be NULL) after the defaults. */
static void push_scan(const daemon_proc *d, const char *id,
                      const char *const *more, run_result *r)
{
    const char *args[40] = {"--ingest", d->ingest, "--control", d->control,
                            "--scan", id, "--size", "64", "--height", "4",
                            "--angles", "48", "--darks", "1", "--flats", "1",
                            "--wait", WAIT_S};
    int n = 18;
    while (more && *more && n < 39)
        args[n++] = *more++;
    args[n] = NULL;
    run_program("rtomo-push", args, r);
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

static void assert_contains(const char *text, const char *part,
                            const char *what)
{
    ck_assert_msg(strstr(text, part), "%s lacks \"%s\":\n%s", what, part,
                  text);
}

/* A good scan: exit 0, its line says complete; rtomoctl shows the same. */
START_TEST(good_scan_exits_zero)
{
    daemon_proc d;
    daemon_start(&d, NULL);
    run_result r;
    push_scan(&d, "good", NULL, &r);
    ck_assert_msg(r.status == 0, "exit %d:\n%s%s", r.status, r.out, r.err);
    assert_contains(r.out, "scan good complete: 50 frames accepted",
                    "rtomo-push's output");

    const char *ctl[] = {"--control", d.control, "scan", "good", NULL};
    run_program("rtomoctl", ctl, &r);
    ck_assert_msg(r.status == 0, "rtomoctl exit %d: %s", r.status, r.err);
    json_error_t jerr;
    json_t *reply = json_loads(r.out, 0, &jerr);
    ck_assert_msg(reply, "rtomoctl printed no JSON: %s\n%s", jerr.text,
                  r.out);
    json_t *scan = json_object_get(reply, "scan");
    ck_assert_str_eq(json_string_value(json_object_get(scan, "state")),
                     "complete");
    ck_assert(json_is_true(json_object_get(scan, "final")));
    ck_assert_int_eq(json_integer_value(json_object_get(scan, "frames")), 50);
    ck_assert_int_eq(json_integer_value(json_object_get(scan, "rejected")),
                     0);
    json_decref(reply);
    daemon_stop(&d);
}
END_TEST

/* An SBDX stream is judged the same way after its sbdx_end. */
START_TEST(good_sbdx_stream_exits_zero)
{
    daemon_proc d;
    daemon_start(&d, NULL);
    const char *args[] = {"--ingest", d.ingest, "--control", d.control,
                          "--scan", "stream", "--sbdx", "--holes", "10,10",
                          "--detector", "16,8", "--shift", "4", "--ratios",
                          "1:2:4", "--frames", "3", "--wait", WAIT_S, NULL};
    run_result r;
    run_program("rtomo-push", args, &r);
    ck_assert_msg(r.status == 0, "exit %d:\n%s%s", r.status, r.out, r.err);
    assert_contains(r.out, "scan stream complete: 3 frames accepted",
                    "rtomo-push's output");
    daemon_stop(&d);
}
END_TEST

/* Two daemons share the stream (rows 0-1 and 2-3): rtomo-push asks both
 * and adds up what they say. */
START_TEST(fanned_out_scan_asks_every_daemon)
{
    const char *top[] = {"--set", "reconstruction.rows={\"first\": 0, "
                         "\"count\": 2}", NULL};
    const char *bottom[] = {"--set", "reconstruction.rows={\"first\": 2, "
                            "\"count\": 2}", NULL};
    daemon_proc d[2];
    daemon_start(&d[0], top);
    daemon_start(&d[1], bottom);
    char ingest[160], control[160];
    snprintf(ingest, sizeof ingest, "%s,%s", d[0].ingest, d[1].ingest);
    snprintf(control, sizeof control, "%s,%s", d[0].control, d[1].control);
    const char *args[] = {"--fanout", ingest, "--control", control, "--scan",
                          "fan", "--size", "64", "--height", "4", "--angles",
                          "48", "--darks", "1", "--flats", "1", "--wait",
                          WAIT_S, NULL};
    run_result r;
    run_program("rtomo-push", args, &r);
    ck_assert_msg(r.status == 0, "exit %d:\n%s%s", r.status, r.out, r.err);
    assert_contains(r.out, "scan fan complete: 100 frames accepted, 4 images "
                    "published (2 daemons together)", "rtomo-push's output");
    daemon_stop(&d[0]);
    daemon_stop(&d[1]);
}
END_TEST

/* The daemon refuses the begin (its configured ROI does not fit the
 * scan's grid): every frame after it is rejected too, and rtomo-push
 * says so with the daemon's reason instead of exiting 0. */
START_TEST(refused_begin_exits_3)
{
    const char *conf[] = {"--set", "reconstruction.roi=[0,0,100,100]", NULL};
    daemon_proc d;
    daemon_start(&d, conf);
    run_result r;
    push_scan(&d, "roi-misfit", NULL, &r);
    ck_assert_msg(r.status == 3, "exit %d:\n%s%s", r.status, r.out, r.err);
    assert_contains(r.err, "scan roi-misfit refused: ",
                    "rtomo-push's errors");
    /* Its begin, 50 frames and its end, each counted. */
    assert_contains(r.err, "0 frames accepted, 52 rejected (bad_geometry: 1, "
                    "unknown_scan: 51)", "rtomo-push's errors");
    daemon_stop(&d);
}
END_TEST

/* Every frame is beyond the daemon's message size: rtomo-push names the
 * reject and exits non-zero (3 or 4: a scan without one projection is not
 * a success, whichever state the daemon gives it). */
START_TEST(rejected_frames_exit_nonzero)
{
    const char *conf[] = {"--set", "ingest.max_message_mb=0.001", NULL};
    daemon_proc d;
    daemon_start(&d, conf);
    const char *wide[] = {"--size", "1024", NULL};    /* 8 KiB frames */
    run_result r;
    push_scan(&d, "big", wide, &r);
    ck_assert_msg(r.status == 3 || r.status == 4, "exit %d:\n%s%s",
                  r.status, r.out, r.err);
    assert_contains(r.err, "50 rejected (oversize: 50)",
                    "rtomo-push's errors");
    daemon_stop(&d);
}
END_TEST

/* Through the library: a scan of which some projections have the wrong
 * shape completes with losses; the outcome counts them by reason. */
START_TEST(library_reports_partial_scan)
{
    daemon_session t;
    daemon_session_open(&t, NULL, 1);
    daemon_scan s;
    daemon_scan_make(&s, "partial", 32, 2, 24, 1, 1, 7);
    daemon_send_begin(t.c, &s);
    daemon_send_fields(t.c, &s);
    const int bad[] = {3, 10, 17};
    for (int p = 0, k = 0; p < s.spec.geometry.n_proj; p++) {
        if (k < 3 && p == bad[k]) {
            k++;
            rtomo_frame_header f = {.type = RTOMO_MSG_PROJECTION,
                                    .index = p, .dtype = RTOMO_DTYPE_U16,
                                    .ndim = 2, .shape = {2, 30},
                                    .angle = NAN, .axis_shift = NAN};
            snprintf(f.scan, sizeof f.scan, "%s", s.spec.scan);
            char *header = rtomo_proto_encode_frame(&f);
            rtomo_error err;
            ck_assert(rtomo_client_send_raw(t.c, 0, header, strlen(header),
                                            2, s.projections, 2 * 30 * 2,
                                            &err) == RTOMO_OK);
            free(header);
            continue;
        }
        daemon_send_projection(t.c, &s, p);
    }
    daemon_send_end(t.c, &s);
    rtomo_scan_outcome o;
    rtomo_error err;
    ck_assert_msg(rtomo_client_scan_outcome(t.c, "partial", DAEMON_TIMEOUT_MS,
                                            &o, &err) == RTOMO_OK,
                  "%s", err.message);
    char line[1024];
    ck_assert_msg(rtomo_scan_outcome_verdict(&o, line, sizeof line) ==
                  RTOMO_VERDICT_PARTIAL, "%s", line);
    ck_assert_int_eq(o.state, RTOMO_SCAN_COMPLETE);
    ck_assert_int_eq(o.frames, 2 + 21);
    ck_assert_int_eq(o.rejected, 3);
    ck_assert_int_eq(o.missing, 3);
    ck_assert_str_eq(o.kind, "tomo");
    assert_contains(line, "(shape_mismatch: 3)", "the outcome's line");
    daemon_scan_free(&s);
    daemon_session_close(&t);
}
END_TEST

/* A begin the decoder refuses (a detector 1 bin wide) leaves the daemon
 * only rejects of the id: the outcome says so at once instead of waiting
 * for a scan that cannot come. */
START_TEST(undecodable_begin_fails_fast)
{
    daemon_session t;
    daemon_session_open(&t, NULL, 1);
    const char *begin = "{\"protocol\": 1, \"type\": \"scan_begin\", "
                        "\"scan\": \"narrow\", \"detector\": {\"width\": 1, "
                        "\"height\": 1}, \"projections\": 4}";
    const char *end = "{\"protocol\": 1, \"type\": \"scan_end\", "
                      "\"scan\": \"narrow\"}";
    rtomo_error err;
    ck_assert(rtomo_client_send_raw(t.c, 0, begin, strlen(begin), 1, NULL, 0,
                                    &err) == RTOMO_OK);
    ck_assert(rtomo_client_send_raw(t.c, 0, end, strlen(end), 1, NULL, 0,
                                    &err) == RTOMO_OK);
    double t0 = now_ms();
    rtomo_scan_outcome o;
    ck_assert_msg(rtomo_client_scan_outcome(t.c, "narrow", DAEMON_TIMEOUT_MS,
                                            &o, &err) == RTOMO_OK,
                  "%s", err.message);
    ck_assert_double_lt(now_ms() - t0, 5000);
    char line[1024];
    ck_assert_msg(rtomo_scan_outcome_verdict(&o, line, sizeof line) ==
                  RTOMO_VERDICT_FAILED, "%s", line);
    ck_assert_int_eq(o.frames, 0);
    ck_assert_int_eq(o.rejected, 2);
    assert_contains(line, "bad_field: 1", "the outcome's line");
    daemon_session_close(&t);
}
END_TEST

/* A camera's pattern: each scan pushed by a new process on a new
 * connection, the next one right after, nobody waiting in between.  Every
 * push succeeds and every scan completes whole. */
START_TEST(back_to_back_pushes_all_complete)
{
    enum { SCANS = 6 };
    daemon_proc d;
    daemon_start(&d, NULL);
    const char *fire[] = {"--no-wait", NULL};
    for (int k = 0; k < SCANS; k++) {
        char id[32];
        snprintf(id, sizeof id, "cam-%d", k);
        run_result r;
        push_scan(&d, id, fire, &r);
        ck_assert_msg(r.status == 0, "push %d: exit %d:\n%s%s", k, r.status,
                      r.out, r.err);
    }
    rtomo_client *c = daemon_connect(&d, 1);
    for (int k = 0; k < SCANS; k++) {
        char id[32], line[1024];
        snprintf(id, sizeof id, "cam-%d", k);
        rtomo_scan_outcome o;
        rtomo_error err;
        ck_assert_msg(rtomo_client_scan_outcome(c, id, DAEMON_TIMEOUT_MS, &o,
                                                &err) == RTOMO_OK,
                      "%s: %s", id, err.message);
        ck_assert_msg(rtomo_scan_outcome_verdict(&o, line, sizeof line) ==
                      RTOMO_VERDICT_SUCCEEDED, "%s", line);
        ck_assert_int_eq(o.frames, 50);
    }
    /* And rtomo-push itself says so when it waits. */
    run_result r;
    push_scan(&d, "cam-last", NULL, &r);
    ck_assert_msg(r.status == 0, "exit %d:\n%s%s", r.status, r.out, r.err);
    rtomo_client_close(c);
    daemon_stop(&d);
}
END_TEST

/* No daemon answers on the control endpoint: the outcome is not known
 * (5); an ingest endpoint no control endpoint follows from is bad usage
 * (2). */
START_TEST(unknown_outcome_and_usage)
{
    daemon_proc d;
    daemon_start(&d, NULL);
    /* The daemon takes the scan (else its frames would wait for it
     * forever), but nothing listens on the control endpoint given. */
    const char *args[] = {"--ingest", d.ingest, "--control",
                          "tcp://127.0.0.1:1", "--size", "16", "--height",
                          "1", "--angles", "4", "--darks", "0", "--flats",
                          "0", NULL};
    run_result r;
    run_program("rtomo-push", args, &r);
    ck_assert_msg(r.status == 5, "exit %d:\n%s%s", r.status, r.out, r.err);
    assert_contains(r.err, "cannot learn what became of scan",
                    "rtomo-push's errors");
    daemon_stop(&d);

    const char *ipc[] = {"--ingest", "ipc:///nonexistent/rtomo", NULL};
    run_program("rtomo-push", ipc, &r);
    ck_assert_int_eq(r.status, 2);
    assert_contains(r.err, "give --control, or --no-wait",
                    "rtomo-push's errors");
    const char *two[] = {"--fanout", "tcp://a:5555,tcp://b:5555",
                         "--control", "tcp://a:5557", NULL};
    run_program("rtomo-push", two, &r);
    ck_assert_int_eq(r.status, 2);
    assert_contains(r.err, "for 2 daemons", "rtomo-push's errors");
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {
        good_scan_exits_zero,
        good_sbdx_stream_exits_zero,
        fanned_out_scan_asks_every_daemon,
        refused_begin_exits_3,
        rejected_frames_exit_nonzero,
        library_reports_partial_scan,
        undecodable_begin_fails_fast,
        back_to_back_pushes_all_complete,
        unknown_outcome_and_usage,
    };
    return daemon_run_tests("daemon_outcome", tests,
                            (int)(sizeof tests / sizeof tests[0]), 180);
}
