/*
 * bench_daemon_scan.c — one large tomography scan through rtomod, once per
 * GPU set: by default 2048 projections of 2048x2048 uint16 and all 2048
 * slices (the "2048^3" case), with --devices 0 and then --devices 0,1, so
 * that the speed-up of a second GPU is measured end to end (ingest,
 * filtering, back-projection split over the GPUs, publication).
 *
 * Per run: ingest time (first frame sent -> every frame accepted), total
 * time (first frame sent -> scan_complete received), the tail after the
 * last frame (scan_end sent -> scan_complete), GU/s over the total
 * (slices x pixels x projections / total), the daemon's own figure for
 * its last frame -> last slice in host memory, ready to publish (ready_s:
 * the reconstruction's share of the tail), its last frame -> last slice
 * handed to its PUB socket (published_s), the daemon's last GU/s and its
 * GPUs; the speed-up of each run over the first (total_s; in the JSON
 * also speedup_ready, first frame sent -> last slice ready, to_ready_s).  By default only events
 * are subscribed to: the daemon's PUB socket then drops the 32 GB of
 * slices instead of sending them, so the figures are the reconstruction's;
 * --receive-slices subscribes to them and counts them (delivery over
 * loopback included).
 *
 *   bench_daemon_scan --rtomod PATH --backend cuda --devices 0 --devices 0,1
 *                     [--size 2048] [--projections 2048] [--slices 2048]
 *                     [--connections 4] [--scans N] [--receive-slices]
 *                     [--axis-auto] [--json FILE] [--arg RTOMOD_ARGUMENT]...
 *
 * --scans N sends N scans one after the other to the same daemon, a row
 * each: the first pays for what a fresh daemon sets up (output buffers
 * allocated and their pages touched), the later ones show a daemon that
 * has been running.
 *
 * --axis-auto asks for "axis": "auto" (the cost of finding it; with the
 * daemon's phase.* and reconstruction.rings settings given by --arg the
 * whole beamline processing chain is measured).
 */
#include "config.h"

#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "bench_daemon.h"
#include "tool_common.h"

#define PROGRAM "bench_daemon_scan"
#define MAX_RUNS 8
#define MAX_SCANS 8

typedef struct options {
    bench_daemon_cli cli;       /* --rtomod, --backend, --json, --arg */
    const char *devices[MAX_RUNS];
    int n_runs;
    long size, projections, slices, connections, scans;
    int receive_slices, ipc, axis_auto;
} options;

typedef struct result {
    const char *devices;
    int scan;                   /* 1 for a daemon's first scan */
    double ingest_s, total_s, tail_s, gu_per_s, daemon_gu_per_s;
    double ready_s;             /* the daemon's: last frame received ->
                                   last slice in host memory */
    double to_ready_s;          /* first frame sent -> last slice ready:
                                   the send span plus ready_s */
    double published_s;         /* the daemon's: last frame received ->
                                   last slice handed to the PUB socket */
    long slices_received, accepted, dropped, rejected;
    int complete, exit_status;
    json_t *gpus;
} result;

static void usage(FILE *out)
{
    fprintf(out,
"usage: " PROGRAM " [--rtomod PATH] [--backend NAME] [--devices LIST]...\n"
"       [--size N] [--projections N] [--slices N] [--connections K] [--ipc]\n"
"       [--scans N] [--receive-slices] [--axis-auto] [--json FILE]\n"
"       [--arg RTOMOD_ARGUMENT]...\n"
"One run per --devices (default: one run with rtomod's default devices),\n"
"each of --scans scans (default 1) to one daemon.\n");
}

enum {
    OPT_DEVICES = 256, OPT_SIZE, OPT_PROJECTIONS, OPT_SLICES,
    OPT_CONNECTIONS, OPT_SCANS, OPT_RECEIVE, OPT_IPC, OPT_AXIS_AUTO, OPT_HELP
};

/* One option; 0, 1 for --help, -1 after a usage message. */
static int apply_option(int c, const char *arg, options *o)
{
    int rc = bench_cli_option(PROGRAM, &o->cli, c, arg);
    if (rc <= 0)
        return rc;
    switch (c) {
    case OPT_DEVICES:
        if (o->n_runs == MAX_RUNS)
            return tool_option_error(PROGRAM, "at most %d --devices",
                                     MAX_RUNS);
        o->devices[o->n_runs++] = arg;
        return 0;
    case OPT_SIZE: return tool_parse_int(PROGRAM, "--size", arg, 2, 65536,
                                         &o->size);
    case OPT_PROJECTIONS: return tool_parse_int(PROGRAM, "--projections", arg,
                                                1, 1 << 20, &o->projections);
    case OPT_SLICES: return tool_parse_int(PROGRAM, "--slices", arg, 1, 65536,
                                           &o->slices);
    case OPT_CONNECTIONS: return tool_parse_int(PROGRAM, "--connections", arg,
                                                1, 64, &o->connections);
    case OPT_SCANS: return tool_parse_int(PROGRAM, "--scans", arg, 1,
                                          MAX_SCANS, &o->scans);
    case OPT_RECEIVE: o->receive_slices = 1; return 0;
    case OPT_IPC: o->ipc = 1; return 0;
    case OPT_AXIS_AUTO: o->axis_auto = 1; return 0;
    case OPT_HELP: usage(stdout); return 1;
    }
    usage(stderr);
    return -1;
}

static int parse_options(int argc, char **argv, options *o)
{
    static const struct option long_options[] = {
        BENCH_DAEMON_LONG_OPTIONS,
        {"devices", required_argument, NULL, OPT_DEVICES},
        {"size", required_argument, NULL, OPT_SIZE},
        {"projections", required_argument, NULL, OPT_PROJECTIONS},
        {"slices", required_argument, NULL, OPT_SLICES},
        {"connections", required_argument, NULL, OPT_CONNECTIONS},
        {"scans", required_argument, NULL, OPT_SCANS},
        {"receive-slices", no_argument, NULL, OPT_RECEIVE},
        {"ipc", no_argument, NULL, OPT_IPC},
        {"axis-auto", no_argument, NULL, OPT_AXIS_AUTO},
        {"help", no_argument, NULL, OPT_HELP},
        {NULL, 0, NULL, 0}};
    *o = (options){.size = 2048, .projections = 2048, .slices = 2048,
                   .connections = 4, .scans = 1};
    bench_cli_init(&o->cli);
    int c, rc;
    while ((c = getopt_long(argc, argv, "", long_options, NULL)) != -1)
        if ((rc = apply_option(c, optarg, o)) != 0)
            return rc;
    if (o->slices > o->size)
        o->slices = o->size;
    if (o->n_runs == 0)
        o->devices[o->n_runs++] = NULL;
    return 0;
}

/* ---------------------------------------------------------------- run ---- */

static int send_scan(const options *o, rtomo_client *c, const char *id,
                     const uint16_t *frames, double *t_end)
{
    rtomo_scan_spec spec;
    bench_scan_spec(&spec, id, o->size, o->size, o->projections, o->slices);
    spec.axis_auto = o->axis_auto;
    rtomo_error err;
    int rc = rtomo_client_send_scan_begin(c, &spec, &err) == RTOMO_OK ? 0 : -1;
    rtomo_scan_spec_clear(&spec);
    size_t samples = (size_t)o->size * (size_t)o->size;
    rtomo_frame_header f;
    bench_projection_header(&f, id, o->size, o->size);
    /* With several connections the frames may overtake the begin. */
    if (rc == 0 && o->connections > 1 &&
        rtomo_client_wait_for_scan(c, id, 0, 30000, &err) != RTOMO_OK)
        rc = -1;
    for (long p = 0; rc == 0 && p < o->projections; p++) {
        f.index = p;
        /* The frames outlive the client: ZeroMQ sends straight from them. */
        if (rtomo_client_send_frame_zero_copy(
                c, &f, (void *)(frames + (size_t)(p % 2) * samples),
                samples * sizeof *frames, NULL, NULL, &err) != RTOMO_OK)
            rc = -1;
    }
    if (rc == 0 && o->connections > 1 &&
        rtomo_client_wait_for_scan(c, id, o->projections, 60000, &err) !=
            RTOMO_OK)
        rc = -1;
    if (rc == 0 && rtomo_client_send_end(c, RTOMO_MSG_SCAN_END, id, &err) !=
                       RTOMO_OK)
        rc = -1;
    *t_end = tool_now();
    if (rc != 0)
        fprintf(stderr, PROGRAM ": sending failed: %s\n", err.message);
    return rc;
}

/* Receive until scan `id` is complete (counting slices when subscribed),
 * noting when every frame had been accepted: the daemon's counter, which
 * counts every scan, reaches `accepted_before` plus this scan's messages. */
static void await_completion(const options *o, rtomo_client *c,
                             const char *id, long accepted_before, result *r,
                             double t0)
{
    double deadline = tool_now() + BENCH_TIMEOUT_MS / 1000.0;
    long want = accepted_before + o->projections + 2;
    while (!r->complete && tool_now() < deadline && !tool_interrupted) {
        rtomo_published m = {0};
        rtomo_error err;
        if (rtomo_client_receive(c, &m, 50, &err) == RTOMO_OK) {
            if (m.kind == RTOMO_PUBLISHED_IMAGE)
                r->slices_received++;
            else if (m.kind == RTOMO_PUBLISHED_EVENT &&
                     strcmp(m.event.event, "scan_complete") == 0 &&
                     strcmp(m.event.scan, id) == 0)
                r->complete = 1;
        }
        rtomo_published_clear(&m);
        if (r->ingest_s == 0 && bench_counter(c, "accepted") >= want)
            r->ingest_s = tool_now() - t0;
    }
    r->total_s = tool_now() - t0;
}

/* One scan to the open daemon; 0 when it completed. */
static int scan_once(const options *o, bench_daemon *b, int scan,
                     const uint16_t *frames, result *r)
{
    char id[32];
    snprintf(id, sizeof id, "bench-scan-%d", scan);
    r->scan = scan;
    long accepted_before = bench_counter(b->client, "accepted");
    long dropped_before = bench_counter(b->client, "dropped");
    long rejected_before = bench_counter(b->client, "rejected");
    double t0 = tool_now(), t_end = 0;
    if (send_scan(o, b->client, id, frames, &t_end) != 0)
        return -1;
    await_completion(o, b->client, id, accepted_before, r, t0);
    r->tail_s = t0 + r->total_s - t_end;
    double updates = (double)o->slices * o->size * o->size *
                     (double)o->projections;
    r->gu_per_s = updates / r->total_s / 1e9;
    r->daemon_gu_per_s = bench_telemetry(b->client, "reconstruction",
                                         "gu_per_s");
    r->ready_s = 1e-3 * bench_telemetry(b->client, "reconstruction",
                                        "last_ready_ms");
    r->to_ready_s = t_end - t0 + r->ready_s;
    r->published_s = 1e-3 * bench_telemetry(b->client, "reconstruction",
                                            "last_latency_ms");
    r->accepted = bench_counter(b->client, "accepted") - accepted_before;
    r->dropped = bench_counter(b->client, "dropped") - dropped_before;
    r->rejected = bench_counter(b->client, "rejected") - rejected_before;
    r->gpus = bench_gpus(b->client);
    return r->complete ? 0 : -1;
}

/* o->scans scans to one daemon started for `devices`, into r[0..scans). */
static int run_once(const options *o, const char *devices,
                    const uint16_t *frames, result *r)
{
    memset(r, 0, sizeof *r * (size_t)o->scans);
    const char *name = devices ? devices : "default";
    const char *args[BENCH_MAX_ARGS + 8];
    bench_cli_daemon_args(&o->cli, devices, args);
    const char *events[] = {RTOMO_TOPIC_EVENT, NULL};
    const char *all[] = {RTOMO_TOPIC_EVENT, RTOMO_TOPIC_SLICE, NULL};
    bench_daemon b;
    bench_daemon_options bo = {.rtomod = o->cli.rtomod, .args = args,
                               .connections = (int)o->connections,
                               .topics = o->receive_slices ? all : events,
                               .receive_hwm = 100000, .ipc = o->ipc};
    for (long k = 0; k < o->scans; k++)
        r[k].devices = name;
    if (bench_daemon_open(&b, &bo) != 0)
        return -1;
    int rc = 0;
    for (long k = 0; k < o->scans && rc == 0; k++)
        rc = scan_once(o, &b, (int)k + 1, frames, &r[k]);
    int exit_status = bench_daemon_close(&b);
    for (long k = 0; k < o->scans; k++)
        r[k].exit_status = exit_status;
    return rc;
}

/* ------------------------------------------------------------ report ---- */

static void print_table(const options *o, const result *r, int n)
{
    printf("rtomod scan: %ld projections of %ldx%ld uint16, %ld slices of "
           "%ldx%ld, backend %s, %ld connection%s%s\n", o->projections,
           o->size, o->size, o->slices, o->size, o->size, o->cli.backend,
           o->connections, o->connections > 1 ? "s" : "",
           o->receive_slices ? ", slices received" : "");
    printf("%-10s %4s %-28s %9s %9s %9s %9s %11s %10s %9s %9s %8s %8s\n",
           "devices", "scan", "GPUs", "ingest_s", "total_s", "tail_s", "ready_s",
           "published_s", "to_ready_s",
           "GU/s", "speed-up", "dropped", "slices");
    for (int i = 0; i < n; i++) {
        char gpus[256] = "";
        size_t used = 0;
        for (size_t g = 0; g < json_array_size(r[i].gpus) &&
                           used < sizeof gpus; g++)
            used += (size_t)snprintf(gpus + used, sizeof gpus - used, "%s%s",
                                     g ? "+" : "",
                                     json_string_value(json_object_get(
                                         json_array_get(r[i].gpus, g),
                                         "name")));
        printf("%-10s %4d %-28.28s %9.2f %9.2f %9.3f %9.3f %11.3f %10.3f "
               "%9.1f %9.2f %8ld %8ld\n", r[i].devices, r[i].scan,
               used ? gpus : "-", r[i].ingest_s,
               r[i].total_s, r[i].tail_s, r[i].ready_s, r[i].published_s,
               r[i].to_ready_s,
               r[i].gu_per_s, r[0].total_s / r[i].total_s,
               r[i].dropped, r[i].slices_received);
    }
}

static json_t *results_json(const options *o, const result *r, int n)
{
    json_t *runs = json_array();
    for (int i = 0; i < n; i++)
        json_array_append_new(runs, json_pack(
            "{s:s, s:i, s:O, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f,"
            " s:I, s:I,"
            " s:I, s:I,"
            " s:b, s:i}",
            "devices", r[i].devices, "scan", r[i].scan,
            "gpus", r[i].gpus ? r[i].gpus : json_null(),
            "ingest_s", r[i].ingest_s, "total_s", r[i].total_s,
            "tail_s", r[i].tail_s, "ready_s", r[i].ready_s,
            "to_ready_s", r[i].to_ready_s, "published_s", r[i].published_s,
            "gu_per_s", r[i].gu_per_s,
            "daemon_gu_per_s", r[i].daemon_gu_per_s,
            "speedup", r[0].total_s / r[i].total_s,
            "speedup_ready", r[0].to_ready_s / r[i].to_ready_s,
            "accepted", (json_int_t)r[i].accepted,
            "rejected", (json_int_t)r[i].rejected,
            "dropped", (json_int_t)r[i].dropped,
            "slices_received", (json_int_t)r[i].slices_received,
            "complete", r[i].complete, "exit_status", r[i].exit_status));
    return json_pack("{s:s, s:s, s:i, s:i, s:i, s:i, s:b, s:o}",
                     "benchmark", "rtomod_scan", "backend", o->cli.backend,
                     "size", (int)o->size, "projections",
                     (int)o->projections, "slices", (int)o->slices,
                     "connections", (int)o->connections, "receive_slices",
                     o->receive_slices, "runs", runs);
}

int main(int argc, char **argv)
{
    options o;
    int rc = parse_options(argc, argv, &o);
    if (rc != 0)
        return rc > 0 ? 0 : 2;
    uint16_t *frames = bench_smooth_frames((size_t)o.size * (size_t)o.size,
                                           2);
    if (!frames) {
        fprintf(stderr, PROGRAM ": out of memory\n");
        return 1;
    }
    tool_catch_signals();
    result results[MAX_RUNS * MAX_SCANS];
    const int n = o.n_runs * (int)o.scans;
    int failures = 0;
    for (int i = 0; i < o.n_runs; i++) {
        result *r = &results[i * o.scans];
        if (run_once(&o, o.devices[i], frames, r) != 0) {
            fprintf(stderr, PROGRAM ": the run with devices %s failed\n",
                    r->devices);
            failures++;
        }
    }
    print_table(&o, results, n);
    bench_print_json(PROGRAM, results_json(&o, results, n), o.cli.json_path);
    for (int i = 0; i < n; i++)
        json_decref(results[i].gpus);
    free(frames);
    return failures ? 1 : 0;
}
