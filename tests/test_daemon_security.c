/*
 * test_daemon_security.c — only authorised senders reach rtomod: the real
 * daemon on loopback with CURVE keys made by rtomo_keys_generate (as
 * rtomo-keygen does) and real ZeroMQ clients.  A sender without a key,
 * with a key the daemon does not list, or with the wrong server key, and
 * one from an address not allowed, is refused: its frames never reach a
 * scan (the counters say exactly which messages were accepted, and the
 * victim scan reconstructs as the engine does from the good frames alone),
 * and every refusal is counted in status as auth_refused.  A secret key
 * file others may read, and inconsistent security settings, are refused
 * at start with messages naming the file or key.
 */
#include "config.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "daemon_harness.h"
#include "rtomo_keys.h"

#define SCAN "victim"
#define WIDTH 32
#define HEIGHT 2
#define N_PROJ 24

/* Key files of one test: the daemon's pair, an allowed client, a client
 * the daemon does not list, and the directory of allowed public keys. */
typedef struct keyring {
    char dir[64];
    char server_public[256], server_secret[256];
    char good_secret[256], stranger_secret[256], stranger_public[256];
    char clients[128];
} keyring;

static void keyring_make(keyring *k)
{
    if (!rtomo_keys_curve_available()) {
        fprintf(stderr, "libzmq without CURVE: security tests skipped\n");
        exit(77);
    }
    memset(k, 0, sizeof *k);
    snprintf(k->dir, sizeof k->dir, "/tmp/rtomod-keys-XXXXXX");
    ck_assert(mkdtemp(k->dir));
    snprintf(k->clients, sizeof k->clients, "%s/clients", k->dir);
    ck_assert(mkdir(k->clients, 0755) == 0);
    daemon_make_key_pair(k->dir, "server", k->server_public, k->server_secret);
    daemon_make_key_pair(k->clients, "good", NULL, k->good_secret);
    daemon_make_key_pair(k->dir, "stranger", k->stranger_public, k->stranger_secret);
}

static void keyring_remove(keyring *k)
{
    char command[256];
    snprintf(command, sizeof command, "rm -rf '%s'", k->dir);
    ck_assert(system(command) == 0);
}

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return 1e3 * (double)t.tv_sec + 1e-6 * (double)t.tv_nsec;
}

/* A client of the daemon with CURVE keys (NULL: none). */
static rtomo_client *open_client(const daemon_proc *d, const char *server_key,
                                 const char *client_key, int all_sockets)
{
    rtomo_client_options opt;
    rtomo_client_options_init(&opt);
    opt.ingest = d->ingest;
    opt.publish = all_sockets ? d->publish : NULL;
    opt.control = all_sockets ? d->control : NULL;
    opt.server_key = server_key;
    opt.client_key = client_key;
    opt.control_timeout_ms = 1000;
    /* A refused sender's frames wait forever: do not wait for them at
     * close, nor block on a full queue. */
    opt.linger_ms = all_sockets ? 10000 : 0;
    opt.send_timeout_ms = all_sockets ? -1 : 2000;
    rtomo_error err;
    rtomo_client *c = rtomo_client_open(&opt, &err);
    ck_assert_msg(c, "client: %s", err.message);
    return c;
}

/* Ping until the daemon answers this (keyed) client. */
static void wait_for_ping(rtomo_client *c)
{
    double deadline = now_ms() + DAEMON_TIMEOUT_MS;
    rtomo_status st = RTOMO_E_UNAVAILABLE;
    while (st != RTOMO_OK && now_ms() < deadline) {
        json_t *reply = NULL;
        rtomo_error err;
        st = rtomo_client_command(c, "ping", &reply, &err);
        json_decref(reply);
    }
    ck_assert_msg(st == RTOMO_OK, "rtomod does not answer an allowed client");
}

/* The daemon with CURVE on: a keyed client with all sockets, subscribed.
 * The harness's own ping has no key, so the daemon is spawned and pinged
 * here. */
static rtomo_client *start_secure(daemon_proc *d, const keyring *k)
{
    const char *args[] = {"--set", NULL, "--set", NULL, NULL};
    char secret[320], clients[192];
    snprintf(secret, sizeof secret, "security.curve_secret_key_file=%s",
             k->server_secret);
    snprintf(clients, sizeof clients, "security.client_keys=%s", k->clients);
    args[1] = secret;
    args[3] = clients;
    daemon_spawn(d, args);
    rtomo_client *c = open_client(d, k->server_public, k->good_secret, 1);
    wait_for_ping(c);
    daemon_subscribe_all(c);
    return c;
}

/* What an intruder sends: frames of the victim scan that would spoil it
 * (a projection the scan already has, with other data) and an early
 * end. */
static void intrude(rtomo_client *intruder, const daemon_scan *s)
{
    rtomo_error err;
    for (int p = 0; p < 3; p++)
        rtomo_client_send_frame(intruder, &(rtomo_frame_header){
                                    .type = RTOMO_MSG_PROJECTION,
                                    .scan = SCAN, .index = p,
                                    .dtype = RTOMO_DTYPE_U16, .ndim = 2,
                                    .shape = {HEIGHT, WIDTH},
                                    .angle = NAN, .axis_shift = NAN},
                                s->darks, s->frame_samples * 2, &err);
    rtomo_client_send_end(intruder, RTOMO_MSG_SCAN_END, SCAN, &err);
}

static void check_slices(daemon_inbox *in, const daemon_scan *s)
{
    const int rows[HEIGHT] = {0, 1};
    daemon_wait_images(in, RTOMO_TOPIC_SLICE, SCAN, HEIGHT);
    float *ref = daemon_reference_slices(s, rows, HEIGHT, NULL, NULL);
    const size_t pixels = WIDTH * WIDTH;
    for (int i = 0; i < HEIGHT; i++) {
        const daemon_image *im = daemon_find_image(in, RTOMO_TOPIC_SLICE,
                                                   SCAN, -1, i);
        ck_assert(im && im->h.slice == rows[i]);
        double diff = test_max_abs_diff(im->data, ref + pixels * i, pixels);
        ck_assert_msg(diff <= 1e-5 * test_max_abs(ref + pixels * i, pixels),
                      "slice %d differs from the engine by %g: foreign "
                      "frames reached the scan?", i, diff);
    }
    free(ref);
}

START_TEST(only_listed_keys_reach_a_scan)
{
    keyring k;
    keyring_make(&k);
    daemon_proc d;
    rtomo_client *c = start_secure(&d, &k);
    daemon_inbox in;
    daemon_inbox_init(&in, c);

    daemon_scan s;
    daemon_scan_make(&s, SCAN, WIDTH, HEIGHT, N_PROJ, 1, 1, 0x5ec0de);
    daemon_send_begin(c, &s);
    rtomo_error err;
    ck_assert_msg(rtomo_client_wait_for_scan(c, SCAN, 0, 10000, &err) ==
                  RTOMO_OK, "scan did not start: %s", err.message);
    daemon_send_fields(c, &s);
    daemon_send_projection(c, &s, 0);
    ck_assert_int_eq(daemon_counter(c, "auth_refused"), 0);

    /* No key; a key the daemon does not list; the daemon's key wrong. */
    rtomo_client *intruders[3] = {
        open_client(&d, NULL, NULL, 0),
        open_client(&d, k.server_public, k.stranger_secret, 0),
        open_client(&d, k.stranger_public, k.good_secret, 0)};
    for (int i = 0; i < 3; i++)
        intrude(intruders[i], &s);
    daemon_wait_counter(c, "auth_refused", 3);

    for (int p = 1; p < N_PROJ; p++)
        daemon_send_projection(c, &s, p);
    daemon_send_end(c, &s);
    check_slices(&in, &s);
    /* begin, dark, flat, the projections, end: nothing else arrived. */
    ck_assert_int_eq(daemon_counter(c, "accepted"), 3 + N_PROJ + 1);
    ck_assert_int_eq(daemon_counter(c, "rejected"), 0);
    ck_assert_ptr_null(daemon_find_event(&in, "rejected", NULL, NULL));

    for (int i = 0; i < 3; i++)
        rtomo_client_close(intruders[i]);
    daemon_scan_free(&s);
    daemon_inbox_free(&in);
    rtomo_client_close(c);
    daemon_stop(&d);
    keyring_remove(&k);
}
END_TEST

/* Without CURVE, security.allow_addresses alone: a sender connecting from
 * 127.0.0.2 (a loopback address too, but not listed) is refused. */
START_TEST(address_not_allowed_is_refused)
{
    daemon_session t;
    const char *args[] = {"--set",
                          "security.allow_addresses=[\"127.0.0.1/32\", "
                          "\"::1\"]", NULL};
    daemon_session_open(&t, args, 1);
    char from_elsewhere[320];
    /* ZeroMQ's "source;destination" form picks the local address. */
    snprintf(from_elsewhere, sizeof from_elsewhere, "tcp://127.0.0.2:0;%s",
             t.d.ingest + 6);
    rtomo_client_options opt;
    rtomo_client_options_init(&opt);
    opt.ingest = from_elsewhere;
    opt.linger_ms = 0;
    opt.send_timeout_ms = 2000;
    rtomo_error err;
    rtomo_client *intruder = rtomo_client_open(&opt, &err);
    ck_assert_msg(intruder, "client: %s", err.message);
    daemon_scan s;
    daemon_scan_make(&s, "occupier", 16, 1, 8, 0, 0, 0xadd7);
    rtomo_client_send_scan_begin(intruder, &s.spec, &err);
    daemon_wait_counter(t.c, "auth_refused", 1);
    json_t *status = daemon_status(t.c);
    ck_assert_msg(json_is_null(json_object_get(status, "scan")),
                  "the refused sender's scan_begin started a scan");
    json_decref(status);
    ck_assert_int_eq(daemon_counter(t.c, "accepted"), 0);
    rtomo_client_close(intruder);
    daemon_scan_free(&s);
    daemon_session_close(&t);
}
END_TEST

typedef struct run_result {
    int status;
    char output[16384];
} run_result;

/* Run rtomod with `args` (a shell fragment) on free-for-all loopback
 * ports, collect its output and exit status. */
static void run(const char *args, run_result *r)
{
    char path[1024], command[4096];
    daemon_process_default_path(path, sizeof path);
    snprintf(command, sizeof command, "'%s' --backend cpu --ingest "
             "tcp://127.0.0.1:0 --publish tcp://127.0.0.1:0 --control "
             "tcp://127.0.0.1:0 %s 2>&1 </dev/null", path, args);
    FILE *p = popen(command, "r");
    ck_assert(p);
    size_t n = fread(r->output, 1, sizeof r->output - 1, p);
    r->output[n] = '\0';
    int status = pclose(p);
    r->status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void expect(const char *args, int status, const char *says,
                   const char *and_says)
{
    run_result r;
    run(args, &r);
    ck_assert_msg(r.status == status, "rtomod %s: exit %d, expected %d: %s",
                  args, r.status, status, r.output);
    ck_assert_msg(strstr(r.output, says) && strstr(r.output, and_says),
                  "rtomod %s says '%s', not naming '%s' and '%s'", args,
                  r.output, says, and_says);
}

START_TEST(unsafe_key_files_are_refused_at_start)
{
    keyring k;
    keyring_make(&k);
    char args[1024];
    snprintf(args, sizeof args, "--set security.curve_secret_key_file=%s "
             "--set security.client_keys=%s --check-config", k.server_secret,
             k.clients);
    expect(args, 0, "curve_secret_key_file", k.server_secret);

    /* Others may read the daemon's secret key. */
    ck_assert(chmod(k.server_secret, 0640) == 0);
    snprintf(args, sizeof args, "--set security.curve_secret_key_file=%s "
             "--set security.client_keys=%s", k.server_secret, k.clients);
    expect(args, 1, k.server_secret, "chmod 600");
    ck_assert(chmod(k.server_secret, 0600) == 0);

    /* Anyone may add a key to the list of clients. */
    ck_assert(chmod(k.clients, 0777) == 0);
    expect(args, 1, k.clients, "chmod go-w");
    ck_assert(chmod(k.clients, 0755) == 0);

    /* A secret key in the list; a list without keys. */
    snprintf(args, sizeof args, "--set security.curve_secret_key_file=%s "
             "--set security.client_keys=%s", k.server_secret,
             k.server_secret);
    expect(args, 1, "security.client_keys", "holds a secret key");
    char empty[128];
    snprintf(empty, sizeof empty, "%s/empty", k.dir);
    ck_assert(mkdir(empty, 0755) == 0);
    snprintf(args, sizeof args, "--set security.curve_secret_key_file=%s "
             "--set security.client_keys=%s", k.server_secret, empty);
    expect(args, 1, "security.client_keys", "no public key");
    /* A public key where the pair is needed. */
    snprintf(args, sizeof args, "--set security.curve_secret_key_file=%s "
             "--set security.client_keys=%s", k.server_public, k.clients);
    expect(args, 1, "security.curve_secret_key_file", "no secret key");
    keyring_remove(&k);
}
END_TEST

START_TEST(security_settings_are_checked)
{
    /* Beyond loopback without CURVE: refused unless explicitly allowed. */
    expect("--ingest 'tcp://*:0' --check-config", 2, "ingest.endpoint",
           "allow_insecure_remote");
    expect("--publish tcp://0.0.0.0:0 --check-config", 2,
           "publish.endpoint", "beyond loopback");
    expect("--control tcp://eth0:0 --check-config", 2, "control.endpoint",
           "beyond loopback");
    expect("--set security.allow_insecure_remote=true --ingest 'tcp://*:0' "
           "--check-config", 0, "\"allow_insecure_remote\": true",
           "tcp://*:0");
    /* Loopback in its other spellings, ipc. */
    expect("--ingest 'tcp://[::1]:0' --publish tcp://localhost:0 --control "
           "ipc:///tmp/rtomod-security-test --check-config", 0, "[::1]",
           "ipc://");
    /* CURVE needs both key settings. */
    expect("--set security.curve_secret_key_file=/x --check-config", 2,
           "security.client_keys", "needed with");
    expect("--set security.client_keys=/x --check-config", 2,
           "security.client_keys", "needs security.curve_secret_key_file");
    expect("--set security.curve_secret_key_file=/nonexistent/k "
           "--set security.client_keys=/nonexistent", 1,
           "security.curve_secret_key_file", "/nonexistent/k");
    /* Addresses. */
    expect("--set 'security.allow_addresses=[\"10.0.0.300/8\"]'", 2,
           "security.allow_addresses", "element 0");
    expect("--set 'security.allow_addresses=[\"::1\", \"10.0.0.0/33\"]'", 2,
           "security.allow_addresses", "element 1");
    expect("--set 'security.allow_addresses=\"10.0.0.0/8\"'", 2,
           "security.allow_addresses", "a list");
    expect("--set 'security.allow_addresses=[\"10.1.2.3/8\", \"fd00::/8\"]' "
           "--check-config", 0, "10.1.2.3/8", "fd00::/8");
    expect("--set security.secret=1", 2, "security.secret", "unknown");
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {
        only_listed_keys_reach_a_scan,
        address_not_allowed_is_refused,
        unsafe_key_files_are_refused_at_start,
        security_settings_are_checked,
    };
    return daemon_run_tests("daemon_security", tests,
                            (int)(sizeof tests / sizeof tests[0]), 120);
}
