/*
 * bench_ingest.c — how fast rtomod takes frames in: pushes tomography scans
 * of large uint16 frames (2048x2048 by default) over 1, 2 and 4 ingest
 * connections into a freshly started rtomod and reports, per run, the
 * sustained ingest rate (GB/s and frames/s, from the first frame sent to
 * the daemon's count of accepted frames), drops and rejects, and the
 * latency from the scan's last input to its last slice published (as the
 * daemon measures it, and as this client sees it).
 *
 * Only a few slices are reconstructed (--slices), so that the engine
 * filters only those rows of each frame and the run measures the transport
 * and the daemon, not the reconstruction.  Any backend works.
 *
 *   bench_ingest --rtomod PATH [--backend cpu|cuda|auto] [--width 2048]
 *                [--height 2048] [--frames 200] [--connections 1,2,4]
 *                [--slices 8] [--json FILE] [--arg RTOMOD_ARGUMENT]...
 *
 * Prints a table, then the same results as JSON (also to --json FILE).
 */
#include "config.h"

#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "bench_daemon.h"
#include "tool_common.h"

#define TIMEOUT_MS BENCH_TIMEOUT_MS
#define MAX_RUNS 16

typedef struct options {
    bench_daemon_cli cli;       /* --rtomod, --backend, --json, --arg */
    long width, height, frames, slices;
    long connections[MAX_RUNS];
    int n_runs;
} options;

typedef struct result {
    int connections;
    double seconds;             /* first frame sent -> all accepted */
    double gb_per_s, frames_per_s;
    long accepted, rejected, dropped, pub_dropped;
    double latency_daemon_ms;   /* last slice's header latency_ms */
    double latency_client_ms;   /* scan_end sent -> last slice received */
    int slices;                 /* slices received */
    int exit_status;
} result;

#define PROGRAM "bench_ingest"
#define USAGE "bench_ingest [--rtomod PATH] [--backend NAME] [--width N] " \
              "[--height N] [--frames N] [--connections 1,2,4] " \
              "[--slices N] [--json FILE] [--arg RTOMOD_ARGUMENT]..."

/* One option's value; 0, 1 for --help, or -1 after a usage message. */
static int parse_option(int c, const char *arg, options *o)
{
    int rc = bench_cli_option(PROGRAM, &o->cli, c, arg);
    if (rc <= 0)
        return rc;
    switch (c) {
    case 'w': return tool_parse_int(PROGRAM, "--width", arg, 2, 65536,
                                    &o->width);
    case 'h': return tool_parse_int(PROGRAM, "--height", arg, 1, 65536,
                                    &o->height);
    case 'f': return tool_parse_int(PROGRAM, "--frames", arg, 1, 1 << 20,
                                    &o->frames);
    case 's': return tool_parse_int(PROGRAM, "--slices", arg, 1, 65536,
                                    &o->slices);
    case 'c': return tool_parse_int_list(PROGRAM, "--connections", arg, 1, 64,
                                         o->connections, MAX_RUNS,
                                         &o->n_runs);
    case 'H':
        printf("usage: %s\n", USAGE);
        return 1;
    }
    return tool_option_error(PROGRAM, "usage: %s", USAGE);
}

static int parse_options(int argc, char **argv, options *o)
{
    static const struct option long_options[] = {
        BENCH_DAEMON_LONG_OPTIONS,
        {"width", required_argument, NULL, 'w'},
        {"height", required_argument, NULL, 'h'},
        {"frames", required_argument, NULL, 'f'},
        {"connections", required_argument, NULL, 'c'},
        {"slices", required_argument, NULL, 's'},
        {"help", no_argument, NULL, 'H'},
        {NULL, 0, NULL, 0}};
    memset(o, 0, sizeof *o);
    bench_cli_init(&o->cli);
    o->width = o->height = 2048;
    o->frames = 200;
    o->slices = 8;
    o->n_runs = 3;
    o->connections[0] = 1;
    o->connections[1] = 2;
    o->connections[2] = 4;
    int c, rc;
    while ((c = getopt_long(argc, argv, "", long_options, NULL)) != -1)
        if ((rc = parse_option(c, optarg, o)) != 0)
            return rc;
    if (o->slices > o->height)
        return tool_option_error(PROGRAM, "--slices %ld exceeds --height %ld",
                                 o->slices, o->height);
    return 0;
}

/* ------------------------------------------------------------- a run ---- */

/* Push one scan; fill the ingest figures.  Returns 0 or -1. */
static int push_scan(const options *o, rtomo_client *c, const uint16_t *frame,
                     result *r, double *t_end_sent)
{
    rtomo_scan_spec spec;
    bench_scan_spec(&spec, "bench", o->width, o->height, o->frames, o->slices);
    rtomo_error err;
    size_t bytes = sizeof(uint16_t) * (size_t)o->width * (size_t)o->height;
    double t0 = tool_now();
    if (rtomo_client_send_scan_begin(c, &spec, &err) != RTOMO_OK)
        goto failed;
    rtomo_frame_header f;
    bench_projection_header(&f, "bench", o->width, o->height);
    for (int p = 0; p < o->frames; p++) {
        f.index = p;
        /* Static data: ZeroMQ sends straight from it, no copy. */
        if (rtomo_client_send_frame_zero_copy(c, &f, (void *)frame, bytes,
                                              NULL, NULL, &err) != RTOMO_OK)
            goto failed;
    }
    if (rtomo_client_send_end(c, RTOMO_MSG_SCAN_END, "bench", &err) !=
        RTOMO_OK)
        goto failed;
    *t_end_sent = tool_now();
    long want = o->frames + 2;
    double deadline = tool_now() + TIMEOUT_MS / 1000.0;
    while ((r->accepted = bench_counter(c, "accepted")) < want && tool_now() < deadline)
        nanosleep(&(struct timespec){0, 2000000}, NULL);
    r->seconds = tool_now() - t0;
    r->gb_per_s = (double)bytes * o->frames / r->seconds / 1e9;
    r->frames_per_s = o->frames / r->seconds;
    rtomo_scan_spec_clear(&spec);
    return r->accepted >= want ? 0 : -1;
failed:
    fprintf(stderr, "bench_ingest: sending failed: %s\n", err.message);
    rtomo_scan_spec_clear(&spec);
    return -1;
}

/* Receive the scan's slices; the last one's latency. */
static void collect_slices(const options *o, rtomo_client *c, result *r,
                           double t_end_sent)
{
    double deadline = tool_now() + TIMEOUT_MS / 1000.0;
    while (r->slices < o->slices && tool_now() < deadline) {
        rtomo_published m = {0};
        rtomo_error err;
        if (rtomo_client_receive(c, &m, 100, &err) == RTOMO_OK &&
            m.kind == RTOMO_PUBLISHED_IMAGE &&
            strcmp(m.image.topic, RTOMO_TOPIC_SLICE) == 0) {
            r->slices++;
            if (m.image.index == m.image.count - 1)
                r->latency_daemon_ms = m.image.latency_ms;
            r->latency_client_ms = 1e3 * (tool_now() - t_end_sent);
        }
        rtomo_published_clear(&m);
    }
}

static int run_once(const options *o, int connections, const uint16_t *frame,
                    result *r)
{
    memset(r, 0, sizeof *r);
    r->connections = connections;
    const char *args[BENCH_MAX_ARGS + 8];
    bench_cli_daemon_args(&o->cli, NULL, args);
    bench_daemon b;
    bench_daemon_options bo = {.rtomod = o->cli.rtomod, .args = args,
                               .connections = connections};
    if (bench_daemon_open(&b, &bo) != 0)
        return -1;
    rtomo_client *c = b.client;
    int rc = -1;
    double t_end_sent = 0;
    if (push_scan(o, c, frame, r, &t_end_sent) == 0) {
        collect_slices(o, c, r, t_end_sent);
        r->rejected = bench_counter(c, "rejected");
        r->dropped = bench_counter(c, "dropped");
        r->pub_dropped = bench_counter(c, "pub_dropped");
        rc = r->slices == o->slices ? 0 : -1;
    }
    r->exit_status = bench_daemon_close(&b);
    return rc;
}

/* ----------------------------------------------------------- report ---- */

static void print_table(const options *o, const result *r, int n)
{
    printf("rtomod ingest: %ldx%ld uint16 frames (%.1f MB), %ld per scan, %ld "
           "slices reconstructed, backend %s\n", o->width, o->height,
           2.0 * o->width * o->height / 1e6, o->frames, o->slices,
           o->cli.backend);
    printf("%5s %9s %9s %9s %8s %8s %8s %12s %12s\n", "conn", "GB/s",
           "frames/s", "seconds", "rejected", "dropped", "pub_drop",
           "latency_ms", "client_ms");
    for (int i = 0; i < n; i++)
        printf("%5d %9.3f %9.1f %9.3f %8ld %8ld %8ld %12.2f %12.2f\n",
               r[i].connections, r[i].gb_per_s, r[i].frames_per_s,
               r[i].seconds, r[i].rejected, r[i].dropped, r[i].pub_dropped,
               r[i].latency_daemon_ms, r[i].latency_client_ms);
}

static json_t *results_json(const options *o, const result *r, int n)
{
    json_t *runs = json_array();
    for (int i = 0; i < n; i++)
        json_array_append_new(runs, json_pack(
            "{s:i, s:f, s:f, s:f, s:I, s:I, s:I, s:I, s:f, s:f, s:i, s:i}",
            "connections", r[i].connections, "gb_per_s", r[i].gb_per_s,
            "frames_per_s", r[i].frames_per_s, "seconds", r[i].seconds,
            "accepted", (json_int_t)r[i].accepted,
            "rejected", (json_int_t)r[i].rejected,
            "dropped", (json_int_t)r[i].dropped,
            "pub_dropped", (json_int_t)r[i].pub_dropped,
            "latency_ms", r[i].latency_daemon_ms,
            "client_latency_ms", r[i].latency_client_ms,
            "slices", r[i].slices, "exit_status", r[i].exit_status));
    return json_pack("{s:s, s:s, s:i, s:i, s:i, s:i, s:s, s:o}",
                     "benchmark", "rtomod_ingest", "backend", o->cli.backend,
                     "width", (int)o->width, "height", (int)o->height,
                     "frames", (int)o->frames, "slices", (int)o->slices,
                     "dtype", "uint16", "runs", runs);
}

int main(int argc, char **argv)
{
    options o;
    int rc = parse_options(argc, argv, &o);
    if (rc != 0)
        return rc > 0 ? 0 : 2;
    uint16_t *frame = bench_smooth_frames((size_t)o.width * (size_t)o.height,
                                          1);
    if (!frame) {
        fprintf(stderr, "bench_ingest: out of memory\n");
        return 1;
    }
    result results[MAX_RUNS];
    int failures = 0;
    for (int i = 0; i < o.n_runs; i++) {
        if (run_once(&o, o.connections[i], frame, &results[i]) != 0) {
            fprintf(stderr, "bench_ingest: the run with %ld connection(s) "
                    "failed\n", o.connections[i]);
            failures++;
        }
    }
    print_table(&o, results, o.n_runs);
    bench_print_json(PROGRAM, results_json(&o, results, o.n_runs),
                     o.cli.json_path);
    free(frame);
    return failures ? 1 : 0;
}
