/*
 * bench_daemon_cone.c — one cone-beam scan through rtomod ("beam":
 * "cone", PROTOCOL.md 3.13): by default FDK of a 1024^3 volume from 1024
 * projections of 1024x1024 uint16 (with one dark and one flat, so that
 * the daemon's normalisation is in the figures), on the devices rtomod
 * is given.  Projections are sent as fast as the daemon takes them, or at
 * --rate frames per second (a camera's pace: the reconstruction then
 * keeps up with the acquisition, and what the tail measures is what is
 * left after the last frame).
 *
 * Figures: send_s (first frame sent -> last frame sent), ingest_s (-> all
 * frames accepted), tail_s (scan_end sent -> scan_complete received),
 * the daemon's own ready_s (its last input -> last slice in host memory)
 * and latency_s (-> last slice published), the daemon's GU/s (bp_GU/s:
 * voxels x projections / the engine's filtering and back-projection
 * time, most of it while the frames came), and GU/s over the whole scan
 * (voxels x projections / first frame sent -> scan_complete).  Before the
 * daemon starts, the engine's back-projection alone is timed in this
 * process (--engine-bp N projections, default 256, 0 = not): N filtered
 * projections added to a plan of the same geometry on the first device,
 * on the wall clock up to a read that waits for them (a CUDA launch
 * returns before its kernel ends, so the engine's own timers cannot say
 * it).  By default
 * only events are subscribed to, so the daemon's PUB socket drops the
 * 4 GB of slices instead of sending them over loopback; --receive-slices
 * takes them in and counts them.
 *
 *   bench_daemon_cone --rtomod PATH --backend cuda [--devices LIST]
 *                     [--size 1024] [--projections 1024] [--rate 0]
 *                     [--connections 1] [--receive-slices]
 *                     [--json FILE] [--arg RTOMOD_ARGUMENT]...
 */
#include "config.h"

#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "bench_daemon.h"
#include "rtomo_proto_cone.h"
#include "tool_common.h"

#define PROGRAM "bench_daemon_cone"
#define SCAN_ID "bench-cone"

typedef struct options {
    bench_daemon_cli cli;       /* --rtomod, --backend, --json, --arg */
    const char *devices;
    long size, projections, connections;
    double rate;                /* frames/s, 0 = as fast as taken */
    int receive_slices;
    long engine_bp;             /* projections of the engine's own BP
                                   timing, 0 = none */
} options;

typedef struct result {
    double send_s, ingest_s, tail_s, total_s, ready_s, latency_s;
    double bp_gu_per_s, scan_gu_per_s;
    double engine_bp_gu_per_s, engine_bp_s;     /* 0: not measured */
    long slices_received, accepted, dropped, rejected;
    int complete, exit_status;
    json_t *gpus;
} result;

static void usage(FILE *out)
{
    fprintf(out,
"usage: " PROGRAM " [--rtomod PATH] [--backend NAME] [--devices LIST]\n"
"       [--size N] [--projections N] [--rate FRAMES_PER_S]\n"
"       [--connections K] [--receive-slices] [--engine-bp N]\n"
"       [--json FILE]\n"
"       [--arg RTOMOD_ARGUMENT]...\n");
}

enum {
    OPT_DEVICES = 256, OPT_SIZE, OPT_PROJECTIONS, OPT_RATE, OPT_CONNECTIONS,
    OPT_RECEIVE, OPT_ENGINE_BP, OPT_HELP
};

static int apply_option(int c, const char *arg, options *o)
{
    int rc = bench_cli_option(PROGRAM, &o->cli, c, arg);
    if (rc <= 0)
        return rc;
    switch (c) {
    case OPT_DEVICES: o->devices = arg; return 0;
    case OPT_SIZE: return tool_parse_int(PROGRAM, "--size", arg, 8, 16384,
                                         &o->size);
    case OPT_PROJECTIONS: return tool_parse_int(PROGRAM, "--projections", arg,
                                                2, 1 << 20, &o->projections);
    case OPT_CONNECTIONS: return tool_parse_int(PROGRAM, "--connections", arg,
                                                1, 64, &o->connections);
    case OPT_RATE: {
        char *end;
        o->rate = strtod(arg, &end);
        if (*end || !(o->rate >= 0))
            return tool_option_error(PROGRAM, "--rate wants frames per "
                                     "second >= 0, not \"%s\"", arg);
        return 0;
    }
    case OPT_RECEIVE: o->receive_slices = 1; return 0;
    case OPT_ENGINE_BP: return tool_parse_int(PROGRAM, "--engine-bp", arg, 0,
                                              4096, &o->engine_bp);
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
        {"rate", required_argument, NULL, OPT_RATE},
        {"connections", required_argument, NULL, OPT_CONNECTIONS},
        {"receive-slices", no_argument, NULL, OPT_RECEIVE},
        {"engine-bp", required_argument, NULL, OPT_ENGINE_BP},
        {"help", no_argument, NULL, OPT_HELP},
        {NULL, 0, NULL, 0}};
    *o = (options){.size = 1024, .projections = 1024, .connections = 1,
                   .engine_bp = 256};
    bench_cli_init(&o->cli);
    int c, rc;
    while ((c = getopt_long(argc, argv, "", long_options, NULL)) != -1)
        if ((rc = apply_option(c, optarg, o)) != 0)
            return rc;
    return 0;
}

/* ---------------------------------------------------------------- run ---- */

/* A full turn seen by an N x N panel of 0.2 mm, the source 500 mm from
 * the axis and 1000 mm from the panel, into N^3 voxels of a panel pixel
 * at the axis (0.1 mm). */
static void cone_spec(const options *o, rtomo_scan_spec *spec)
{
    rtomo_scan_spec_init(spec);
    snprintf(spec->scan, sizeof spec->scan, SCAN_ID);
    spec->geometry.det_width = spec->geometry.det_height = (int)o->size;
    spec->geometry.n_proj = (int)o->projections;
    spec->geometry.angle_step = 2 * M_PI / (double)o->projections;
    spec->dtype = RTOMO_DTYPE_U16;
    spec->n_darks = spec->n_flats = 1;
    spec->cone = calloc(1, sizeof *spec->cone);
    if (!spec->cone)
        return;
    spec->cone->source_to_axis = 500.0;
    spec->cone->source_to_detector = 1000.0;
    spec->cone->pitch[0] = spec->cone->pitch[1] = 0.2;
    spec->cone->voxel = 0.1;
    for (int a = 0; a < 3; a++)
        spec->cone->volume[a] = (int)o->size;
}

/* The engine's back-projection of n filtered projections into the scan's
 * volume on the wall clock (see the top); GU/s, or 0 after a message. */
static double engine_bp(const options *o, double *seconds)
{
    rtomo_scan_spec spec;
    cone_spec(o, &spec);
    rtomo_cone_geometry g;
    rtomo_proto_cone_geometry(&spec, &g);
    rtomo_engine_options opt;
    rtomo_engine_options_init(&opt);
    rtomo_error err;
    rtomo_cone *c = NULL;
    if (rtomo_backend_parse(o->cli.backend, &opt.backend) != RTOMO_OK)
        rtomo_set_error(&err, RTOMO_E_INVALID, "unknown backend %s",
                        o->cli.backend);
    else {
        if (o->devices) {
            opt.n_devices = 1;
            opt.device_ids[0] = atoi(o->devices);
        }
        c = rtomo_cone_create(&g, &opt, RTOMO_CONE_KERNEL_AUTO, &err);
    }
    rtomo_scan_spec_clear(&spec);
    const int n = (int)o->engine_bp;
    size_t frame = (size_t)g.det_u * (size_t)g.det_v;
    size_t len = c ? frame / (size_t)g.det_u *
                     (size_t)rtomo_cone_filtered_width(c) : 0;
    float *li = c ? calloc(frame, sizeof *li) : NULL;
    float *filtered = li ? malloc(sizeof(float) * len * (size_t)n) : NULL;
    int *idx = filtered ? malloc(sizeof(int) * (size_t)n) : NULL;
    double gu = 0.0;
    if (c && !idx)
        rtomo_set_error(&err, RTOMO_E_NOMEM, "out of memory");
    if (idx) {
        for (size_t i = 0; i < frame; i++)
            li[i] = 0.5f;
        rtomo_status st = rtomo_cone_filter(c, 0, li, filtered, &err);
        for (int k = 0; k < n; k++) {
            idx[k] = k % g.n_proj;
            if (k > 0)
                memcpy(filtered + len * (size_t)k, filtered,
                       sizeof(float) * len);
        }
        double t0 = tool_now();
        if (st == RTOMO_OK)
            st = rtomo_cone_add_filtered(c, idx, n, filtered, &err);
        /* A read waits for every launch before it; one voxel row is
         * enough (cheap beside the back-projection). */
        if (st == RTOMO_OK)
            st = rtomo_cone_flush(c, &err);
        float *one = st == RTOMO_OK ? malloc(sizeof(float) * (size_t)g.nx *
                                             (size_t)g.ny) : NULL;
        if (one)
            st = rtomo_cone_read_slices(c, 0, 1, one, &err);
        *seconds = tool_now() - t0;
        if (st == RTOMO_OK && one)
            gu = (double)n * (double)rtomo_cone_volume_size(c) / *seconds /
                 1e9;
        free(one);
    }
    if (gu == 0.0)
        fprintf(stderr, PROGRAM ": the engine's back-projection was not "
                "timed: %s\n", err.message);
    free(idx);
    free(filtered);
    free(li);
    rtomo_cone_destroy(c);
    return gu;
}

static void pace(const options *o, double t0, long sent)
{
    if (o->rate <= 0)
        return;
    double wait = t0 + (double)sent / o->rate - tool_now();
    if (wait > 0) {
        struct timespec t = {(time_t)wait,
                             (long)((wait - floor(wait)) * 1e9)};
        nanosleep(&t, NULL);
    }
}

/* The dark, the flat, the projections (alternating two frames, sent
 * without a copy), the end. */
static int send_scan(const options *o, rtomo_client *c, uint16_t *frames,
                     uint16_t *fields, double *t_last, double *t_end)
{
    rtomo_scan_spec spec;
    cone_spec(o, &spec);
    rtomo_error err;
    rtomo_set_error(&err, RTOMO_E_NOMEM, "out of memory");
    int rc = spec.cone && rtomo_client_send_scan_begin(c, &spec, &err) ==
                              RTOMO_OK ? 0 : -1;
    rtomo_scan_spec_clear(&spec);
    size_t samples = (size_t)o->size * (size_t)o->size;
    rtomo_frame_header f;
    bench_projection_header(&f, SCAN_ID, o->size, o->size);
    if (rc == 0 && o->connections > 1 &&
        rtomo_client_wait_for_scan(c, SCAN_ID, 0, 30000, &err) != RTOMO_OK)
        rc = -1;
    for (int k = 0; rc == 0 && k < 2; k++) {
        f.type = k ? RTOMO_MSG_FLAT : RTOMO_MSG_DARK;
        f.index = 0;
        if (rtomo_client_send_frame(c, &f, fields + samples * (size_t)k,
                                    samples * sizeof *fields, &err) !=
            RTOMO_OK)
            rc = -1;
    }
    if (rc == 0 && o->connections > 1 &&
        rtomo_client_wait_for_scan(c, SCAN_ID, 2, 30000, &err) != RTOMO_OK)
        rc = -1;
    f.type = RTOMO_MSG_PROJECTION;
    double t0 = tool_now();
    for (long p = 0; rc == 0 && p < o->projections; p++) {
        pace(o, t0, p);
        f.index = p;
        if (rtomo_client_send_frame_zero_copy(
                c, &f, (void *)(frames + (size_t)(p % 2) * samples),
                samples * sizeof *frames, NULL, NULL, &err) != RTOMO_OK)
            rc = -1;
    }
    *t_last = tool_now();
    if (rc == 0 && o->connections > 1 &&
        rtomo_client_wait_for_scan(c, SCAN_ID, o->projections + 2, 60000,
                                   &err) != RTOMO_OK)
        rc = -1;
    if (rc == 0 && rtomo_client_send_end(c, RTOMO_MSG_SCAN_END, SCAN_ID,
                                         &err) != RTOMO_OK)
        rc = -1;
    *t_end = tool_now();
    if (rc != 0)
        fprintf(stderr, PROGRAM ": sending failed: %s\n", err.message);
    return rc;
}

static void await_completion(const options *o, rtomo_client *c, result *r,
                             double t0)
{
    double deadline = tool_now() + BENCH_TIMEOUT_MS / 1000.0;
    long want = o->projections + 2;
    while (!r->complete && tool_now() < deadline && !tool_interrupted) {
        rtomo_published m = {0};
        rtomo_error err;
        if (rtomo_client_receive(c, &m, 50, &err) == RTOMO_OK) {
            if (m.kind == RTOMO_PUBLISHED_IMAGE)
                r->slices_received++;
            else if (m.kind == RTOMO_PUBLISHED_EVENT &&
                     strcmp(m.event.event, "scan_complete") == 0)
                r->complete = 1;
            else if (m.kind == RTOMO_PUBLISHED_EVENT &&
                     strcmp(m.event.event, "rejected") == 0)
                fprintf(stderr, PROGRAM ": rejected (%s): %s\n",
                        m.event.reason, m.event.message);
        }
        rtomo_published_clear(&m);
        if (r->ingest_s == 0 && bench_counter(c, "accepted") >= want)
            r->ingest_s = tool_now() - t0;
    }
    r->total_s = tool_now() - t0;
}

static int run(const options *o, uint16_t *frames, uint16_t *fields,
               result *r)
{
    memset(r, 0, sizeof *r);
    const char *args[BENCH_MAX_ARGS + 8];
    bench_cli_daemon_args(&o->cli, o->devices, args);
    const char *events[] = {RTOMO_TOPIC_EVENT, NULL};
    const char *all[] = {RTOMO_TOPIC_EVENT, RTOMO_TOPIC_SLICE, NULL};
    bench_daemon b;
    bench_daemon_options bo = {.rtomod = o->cli.rtomod, .args = args,
                               .connections = (int)o->connections,
                               .topics = o->receive_slices ? all : events,
                               .receive_hwm = 100000};
    if (bench_daemon_open(&b, &bo) != 0)
        return -1;
    double t0 = tool_now(), t_last = 0, t_end = 0;
    int rc = send_scan(o, b.client, frames, fields, &t_last, &t_end);
    if (rc == 0) {
        await_completion(o, b.client, r, t0);
        r->send_s = t_last - t0;
        r->tail_s = t0 + r->total_s - t_end;
        double updates = pow((double)o->size, 3) * (double)o->projections;
        r->scan_gu_per_s = updates / r->total_s / 1e9;
        r->bp_gu_per_s = bench_telemetry(b.client, "reconstruction",
                                         "gu_per_s");
        r->ready_s = 1e-3 * bench_telemetry(b.client, "reconstruction",
                                            "last_ready_ms");
        r->latency_s = 1e-3 * bench_telemetry(b.client, "reconstruction",
                                              "last_latency_ms");
        r->accepted = bench_counter(b.client, "accepted");
        r->dropped = bench_counter(b.client, "dropped");
        r->rejected = bench_counter(b.client, "rejected");
        r->gpus = bench_gpus(b.client);
    }
    r->exit_status = bench_daemon_close(&b);
    return rc == 0 && r->complete ? 0 : -1;
}

/* ------------------------------------------------------------ report ---- */

static void print_table(const options *o, const result *r)
{
    const char *gpu = json_string_value(json_object_get(
        json_array_get(r->gpus, 0), "name"));
    printf("rtomod cone-beam FDK: %ld^3 voxels from %ld projections of "
           "%ldx%ld uint16, backend %s, devices %s (%s), %s, %ld "
           "connection%s%s\n", o->size, o->projections, o->size, o->size,
           o->cli.backend, o->devices ? o->devices : "default",
           gpu ? gpu : "-", o->rate > 0 ? "paced" : "as fast as taken",
           o->connections, o->connections > 1 ? "s" : "",
           o->receive_slices ? ", slices received" : "");
    printf("%9s %9s %9s %9s %9s %10s %9s %9s %10s %8s %8s\n", "rate",
           "send_s", "ingest_s", "tail_s", "ready_s", "latency_s", "bp_GU/s",
           "scan_GU/s", "engine_bp", "dropped", "slices");
    printf("%9.1f %9.2f %9.2f %9.3f %9.3f %10.3f %9.1f %9.1f %10.1f %8ld "
           "%8ld\n", o->rate, r->send_s, r->ingest_s, r->tail_s, r->ready_s,
           r->latency_s, r->bp_gu_per_s, r->scan_gu_per_s,
           r->engine_bp_gu_per_s, r->dropped, r->slices_received);
}

static json_t *result_json(const options *o, const result *r)
{
    return json_pack(
        "{s:s, s:s, s:s?, s:i, s:i, s:f, s:i, s:b, s:O, s:f, s:f, s:f, s:f,"
        " s:f, s:f, s:f, s:f, s:i, s:f, s:f, s:I, s:I, s:I, s:I, s:b, s:i}",
        "benchmark", "rtomod_cone", "backend", o->cli.backend,
        "devices", o->devices, "size", (int)o->size,
        "projections", (int)o->projections, "rate", o->rate,
        "connections", (int)o->connections,
        "receive_slices", o->receive_slices,
        "gpus", r->gpus ? r->gpus : json_null(),
        "send_s", r->send_s, "ingest_s", r->ingest_s, "tail_s", r->tail_s,
        "total_s", r->total_s, "ready_s", r->ready_s,
        "latency_s", r->latency_s, "bp_gu_per_s", r->bp_gu_per_s,
        "scan_gu_per_s", r->scan_gu_per_s,
        "engine_bp_projections", (int)o->engine_bp,
        "engine_bp_s", r->engine_bp_s,
        "engine_bp_gu_per_s", r->engine_bp_gu_per_s,
        "accepted", (json_int_t)r->accepted,
        "rejected", (json_int_t)r->rejected,
        "dropped", (json_int_t)r->dropped,
        "slices_received", (json_int_t)r->slices_received,
        "complete", r->complete, "exit_status", r->exit_status);
}

int main(int argc, char **argv)
{
    options o;
    int rc = parse_options(argc, argv, &o);
    if (rc != 0)
        return rc > 0 ? 0 : 2;
    size_t samples = (size_t)o.size * (size_t)o.size;
    uint16_t *frames = bench_smooth_frames(samples, 2);
    uint16_t *fields = malloc(2 * samples * sizeof *fields);
    if (!frames || !fields) {
        fprintf(stderr, PROGRAM ": out of memory\n");
        return 1;
    }
    /* A dark of 100 counts and a flat above every projection sample. */
    for (size_t i = 0; i < samples; i++) {
        fields[i] = 100;
        fields[samples + i] = 65000;
    }
    tool_catch_signals();
    result r;
    double bp_gu = 0.0, bp_s = 0.0;
    if (o.engine_bp > 0)
        bp_gu = engine_bp(&o, &bp_s);
    int failed = run(&o, frames, fields, &r) != 0;
    r.engine_bp_gu_per_s = bp_gu;
    r.engine_bp_s = bp_s;
    if (failed)
        fprintf(stderr, PROGRAM ": the scan did not complete\n");
    print_table(&o, &r);
    bench_print_json(PROGRAM, result_json(&o, &r), o.cli.json_path);
    json_decref(r.gpus);
    free(frames);
    free(fields);
    return failed ? 1 : 0;
}
