/*
 * bench_daemon.c — the rtomod benchmarks' shared pieces (see
 * bench_daemon.h).
 */
#include "config.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "bench_daemon.h"
#include "tool_common.h"

#define MAX_ARGS 128

/* ------------------------------------------------------ command line ---- */

void bench_cli_init(bench_daemon_cli *cli)
{
    memset(cli, 0, sizeof *cli);
    daemon_process_default_path(cli->rtomod, sizeof cli->rtomod);
    cli->backend = "auto";
}

int bench_cli_option(const char *program, bench_daemon_cli *cli, int c,
                     const char *arg)
{
    switch (c) {
    case BENCH_OPT_RTOMOD:
        snprintf(cli->rtomod, sizeof cli->rtomod, "%s", arg);
        return 0;
    case BENCH_OPT_BACKEND: cli->backend = arg; return 0;
    case BENCH_OPT_JSON: cli->json_path = arg; return 0;
    case BENCH_OPT_ARG:
        if (cli->n_args == BENCH_MAX_ARGS)
            return tool_option_error(program, "too many --arg");
        cli->args[cli->n_args++] = arg;
        return 0;
    }
    return 1;
}

void bench_cli_daemon_args(const bench_daemon_cli *cli, const char *devices,
                           const char **args)
{
    int n = 0;
    args[n++] = "--backend";
    args[n++] = cli->backend;
    args[n++] = "--log-level";
    args[n++] = "warn";
    if (devices) {
        args[n++] = "--devices";
        args[n++] = devices;
    }
    for (int i = 0; i < cli->n_args; i++)
        args[n++] = cli->args[i];
    args[n] = NULL;
}

/* ------------------------------------------------------------ daemon ---- */

/* Wait for a telemetry message: the subscription is live from then on. */
static int wait_subscribed(rtomo_client *c)
{
    double deadline = tool_now() + BENCH_TIMEOUT_MS / 1000.0;
    while (tool_now() < deadline) {
        rtomo_published m = {0};
        rtomo_error err;
        int live = rtomo_client_receive(c, &m, 100, &err) == RTOMO_OK &&
                   m.kind == RTOMO_PUBLISHED_TELEMETRY;
        rtomo_published_clear(&m);
        if (live)
            return 0;
    }
    return -1;
}

/* The daemon's arguments, with ipc endpoints appended when asked (later
 * options win over the loopback ports daemon_process chooses). */
static int build_args(bench_daemon *b, const bench_daemon_options *opt,
                      const char **args, char *ingest, char *publish,
                      size_t size)
{
    int n = 0;
    for (int i = 0; opt->args && opt->args[i] && n < MAX_ARGS - 5; i++)
        args[n++] = opt->args[i];
    if (opt->ipc) {
        snprintf(b->ipc_dir, sizeof b->ipc_dir, "/tmp/rtomo-bench-%d",
                 (int)getpid());
        snprintf(ingest, size, "ipc://%s-ingest", b->ipc_dir);
        snprintf(publish, size, "ipc://%s-publish", b->ipc_dir);
        args[n++] = "--ingest";
        args[n++] = ingest;
        args[n++] = "--publish";
        args[n++] = publish;
    }
    args[n] = NULL;
    return n;
}

static int subscribe(rtomo_client *c, const char *const *topics)
{
    rtomo_error err;
    int r = 0;
    if (!topics)
        return rtomo_client_subscribe(c, "", &err) == RTOMO_OK ? 0 : -1;
    for (int i = 0; topics[i] && r == 0; i++)
        r = rtomo_client_subscribe(c, topics[i], &err) == RTOMO_OK ? 0 : -1;
    if (r == 0 &&
        rtomo_client_subscribe(c, RTOMO_TOPIC_TELEMETRY, &err) != RTOMO_OK)
        r = -1;
    return r;
}

int bench_daemon_open(bench_daemon *b, const bench_daemon_options *opt)
{
    memset(b, 0, sizeof *b);
    const char *args[MAX_ARGS];
    char ingest[sizeof b->proc.ingest], publish[sizeof b->proc.publish];
    char error[512];
    build_args(b, opt, args, ingest, publish, sizeof ingest);
    if (daemon_process_start(&b->proc, opt->rtomod, args, BENCH_TIMEOUT_MS,
                             error, sizeof error) != 0) {
        fprintf(stderr, "bench: cannot start %s: %s\n", opt->rtomod, error);
        return -1;
    }
    if (opt->ipc) {
        snprintf(b->proc.ingest, sizeof b->proc.ingest, "%s", ingest);
        snprintf(b->proc.publish, sizeof b->proc.publish, "%s", publish);
    }
    rtomo_client_options copt;
    rtomo_client_options_init(&copt);
    copt.ingest = b->proc.ingest;
    copt.publish = b->proc.publish;
    copt.control = b->proc.control;
    copt.connections = opt->connections > 0 ? opt->connections : 1;
    copt.control_timeout_ms = 10000;
    copt.receive_hwm = opt->receive_hwm;
    rtomo_error err;
    b->client = rtomo_client_open(&copt, &err);
    if (!b->client) {
        fprintf(stderr, "bench: client: %s\n", err.message);
    } else if (subscribe(b->client, opt->topics) != 0 ||
               wait_subscribed(b->client) != 0) {
        fprintf(stderr, "bench: no telemetry from rtomod on %s\n",
                b->proc.publish);
    } else {
        return 0;
    }
    bench_daemon_close(b);
    return -1;
}

int bench_daemon_close(bench_daemon *b)
{
    if (b->client)
        rtomo_client_close(b->client);
    b->client = NULL;
    return b->proc.pid ? daemon_process_stop(&b->proc, SIGTERM,
                                             BENCH_TIMEOUT_MS)
                       : -1;
}

/* A number at status.<group>.<name> (group may be "telemetry.x"). */
static double status_number(rtomo_client *c, const char *group,
                            const char *name)
{
    json_t *reply = NULL;
    rtomo_error err;
    double v = -1;
    if (rtomo_client_command(c, "status", &reply, &err) == RTOMO_OK) {
        json_t *obj = reply;
        char path[128];
        snprintf(path, sizeof path, "%s", group);
        for (char *part = strtok(path, "."); part && obj;
             part = strtok(NULL, "."))
            obj = json_object_get(obj, part);
        json_t *value = json_object_get(obj, name);
        if (json_is_number(value))
            v = json_number_value(value);
    }
    json_decref(reply);
    return v;
}

long bench_counter(rtomo_client *c, const char *name)
{
    return (long)status_number(c, "counters", name);
}

double bench_telemetry(rtomo_client *c, const char *group, const char *name)
{
    char path[128];
    snprintf(path, sizeof path, "telemetry.%s", group);
    return status_number(c, path, name);
}

json_t *bench_gpus(rtomo_client *c)
{
    json_t *reply = NULL;
    rtomo_error err;
    json_t *gpus = NULL;
    if (rtomo_client_command(c, "status", &reply, &err) == RTOMO_OK)
        gpus = json_incref(json_object_get(reply, "gpus"));
    json_decref(reply);
    return gpus;
}

/* -------------------------------------------------------------- scans ---- */

void bench_scan_spec(rtomo_scan_spec *spec, const char *id, long width,
                     long height, long n_proj, long slices)
{
    rtomo_scan_spec_init(spec);
    snprintf(spec->scan, sizeof spec->scan, "%s", id);
    spec->geometry.det_width = (int)width;
    spec->geometry.det_height = (int)height;
    spec->geometry.n_proj = (int)n_proj;
    spec->dtype = RTOMO_DTYPE_U16;
    spec->slices.kind = RTOMO_SLICES_RANGE;
    spec->slices.first = (int)((height - slices) / 2);
    spec->slices.count = (int)slices;
    spec->slices.step = 1;
    spec->given |= RTOMO_SPEC_HAS_SLICES;
}

void bench_projection_header(rtomo_frame_header *f, const char *id,
                             long width, long height)
{
    memset(f, 0, sizeof *f);
    f->type = RTOMO_MSG_PROJECTION;
    snprintf(f->scan, sizeof f->scan, "%s", id);
    f->dtype = RTOMO_DTYPE_U16;
    f->ndim = 2;
    f->shape[0] = height;
    f->shape[1] = width;
    f->angle = f->axis_shift = NAN;
}

uint16_t *bench_smooth_frames(size_t samples, int n)
{
    size_t total = samples * (size_t)n;
    uint16_t *f = malloc(sizeof *f * (total ? total : 1));
    for (size_t i = 0; f && i < total; i++)
        f[i] = (uint16_t)(30000 + 20000 * sin(0.001 * (double)i));
    return f;
}

/* ------------------------------------------------------------ results ---- */

static int compare_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double bench_percentile(double *values, int n, double p)
{
    if (n < 1)
        return NAN;
    qsort(values, (size_t)n, sizeof *values, compare_double);
    int rank = (int)ceil(p / 100.0 * n);
    rank = rank < 1 ? 1 : rank > n ? n : rank;
    return values[rank - 1];
}

void bench_print_json(const char *program, json_t *json, const char *path)
{
    json_dumpf(json, stdout, JSON_INDENT(2));
    putchar('\n');
    if (path && json_dump_file(json, path, JSON_INDENT(2)) != 0)
        fprintf(stderr, "%s: cannot write %s\n", program, path);
    json_decref(json);
}
