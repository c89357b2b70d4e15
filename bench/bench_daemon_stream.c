/*
 * bench_daemon_stream.c — does rtomod keep up with a stream?  Starts the
 * given rtomod, pushes frames at a fixed rate (zero-copy from two
 * prepared frames) and, in the same thread between sends, receives what
 * it publishes.  Two modes:
 *
 *   sbdx        SBDX frames (default: the reference configuration, 100x100
 *               holes of 160x80 uint8, m = 10, 32 planes of 1000x1000 with
 *               n from 0.6 to 2.25) at --rate frames/s; a frame counts as
 *               done when its composite arrives.
 *   continuous  a continuous tomography scan (uint16 projections) at --rate
 *               projections/s, a window of --projections every --every; a
 *               window is done when its last slice arrives.
 *
 * Reported per run: frames sent and the rate achieved, sets (frames or
 * windows) published and their rate, latency median / p99 / max as the
 * daemon measures it (last input received -> set published, from the
 * image headers) and as this client sees it (send of the last input ->
 * set received), drops (daemon "dropped", "pub_dropped", windows skipped,
 * sets never received), frames the daemon rejected, the daemon's last
 * GU/s, its GPUs.  A table, then JSON (also to --json FILE).
 *
 *   bench_daemon_stream --rtomod PATH --backend cuda --rate 30 --frames 300
 *   bench_daemon_stream --rtomod PATH --mode continuous --rate 1000 \
 *                       --projections 1800 --every 180 --frames 9000
 *
 * Only composite and depth (SBDX) or slices (continuous) are subscribed
 * to: the daemon's PUB socket then never sends the 128 MB of planes per
 * frame (--planes-out subscribes to them too, to measure their delivery).
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

#define PROGRAM "bench_daemon_stream"
#define QUIET_S 20.0            /* give up when nothing arrives this long */

typedef enum { MODE_SBDX, MODE_CONTINUOUS } stream_mode;

typedef struct options {
    bench_daemon_cli cli;       /* --rtomod, --backend, --json, --arg */
    const char *devices;
    stream_mode mode;
    double rate;                /* frames/s, 0 = as fast as accepted */
    long frames, warmup, connections;
    int ipc, planes_out;
    /* SBDX */
    long holes[2], detector[2], shift, n_planes;
    double ratio_first, ratio_last;
    rtomo_plane_format planes;
    /* continuous */
    long width, height, projections, every, slices;
} options;

/* What came back for one set (SBDX frame or window). */
typedef struct set_record {
    int images;                 /* received so far */
    int done;
    double daemon_ms;           /* largest header latency_ms */
    double t_done;              /* client time of the set's last image */
} set_record;

typedef struct run {
    const options *o;
    rtomo_client *c;
    double *t_send;             /* per frame: when its send began */
    set_record *sets;
    long n_sets;                /* capacity: sets that can be due */
    long sets_done, out_of_order, skipped;
    int64_t last_done;
    double t_last_send, t_first_done, t_last_done;
} run;

/* ----------------------------------------------------------- options ---- */

static void usage(FILE *out)
{
    fprintf(out,
"usage: " PROGRAM " [--rtomod PATH] [--backend NAME] [--devices LIST]\n"
"       [--mode sbdx|continuous] [--rate FPS] [--frames N] [--warmup N]\n"
"       [--connections K] [--ipc] [--json FILE] [--arg RTOMOD_ARGUMENT]...\n"
"  sbdx:       [--holes X,Y] [--detector W,H] [--shift M]\n"
"              [--ratios A:B:N] [--planes float32|uint16|none] [--planes-out]\n"
"  continuous: [--width W] [--height H] [--projections N] [--every K]\n"
"              [--slices N]\n");
}

enum {
    OPT_DEVICES = 256, OPT_MODE, OPT_RATE, OPT_FRAMES, OPT_WARMUP,
    OPT_CONNECTIONS, OPT_IPC, OPT_HOLES, OPT_DETECTOR, OPT_SHIFT, OPT_RATIOS,
    OPT_PLANES, OPT_PLANES_OUT, OPT_WIDTH, OPT_HEIGHT, OPT_PROJECTIONS,
    OPT_EVERY, OPT_SLICES, OPT_HELP
};

/* One option; 0, 1 for --help, -1 after a usage message. */
static int apply_option(int c, const char *arg, options *o)
{
    int rc = bench_cli_option(PROGRAM, &o->cli, c, arg);
    if (rc <= 0)
        return rc;
    switch (c) {
    case OPT_DEVICES: o->devices = arg; return 0;
    case OPT_MODE:
        if (strcmp(arg, "sbdx") == 0 || strcmp(arg, "continuous") == 0) {
            o->mode = arg[0] == 's' ? MODE_SBDX : MODE_CONTINUOUS;
            return 0;
        }
        return tool_option_error(PROGRAM, "--mode: sbdx or continuous");
    case OPT_RATE: return tool_parse_double(PROGRAM, "--rate", arg, 0, 1e6,
                                            &o->rate);
    case OPT_FRAMES: return tool_parse_int(PROGRAM, "--frames", arg, 1,
                                           1L << 30, &o->frames);
    case OPT_WARMUP: return tool_parse_int(PROGRAM, "--warmup", arg, 0,
                                           1L << 30, &o->warmup);
    case OPT_CONNECTIONS: return tool_parse_int(PROGRAM, "--connections", arg,
                                                1, 64, &o->connections);
    case OPT_IPC: o->ipc = 1; return 0;
    case OPT_HOLES: return tool_parse_pair(PROGRAM, "--holes", arg, 1, 4096,
                                           o->holes);
    case OPT_DETECTOR: return tool_parse_pair(PROGRAM, "--detector", arg, 1,
                                              4096, o->detector);
    case OPT_SHIFT: return tool_parse_int(PROGRAM, "--shift", arg, 1, 1024,
                                          &o->shift);
    case OPT_RATIOS:
        return tool_parse_ratios(PROGRAM, "--ratios", arg,
                                 RTOMO_SBDX_MAX_PLANES, &o->ratio_first,
                                 &o->ratio_last, &o->n_planes);
    case OPT_PLANES:
        if (rtomo_plane_format_parse(arg, &o->planes) != RTOMO_OK)
            return tool_option_error(PROGRAM, "--planes: '%s' is not "
                                     "float32, uint16 or none", arg);
        return 0;
    case OPT_PLANES_OUT: o->planes_out = 1; return 0;
    case OPT_WIDTH: return tool_parse_int(PROGRAM, "--width", arg, 2, 65536,
                                          &o->width);
    case OPT_HEIGHT: return tool_parse_int(PROGRAM, "--height", arg, 1, 65536,
                                           &o->height);
    case OPT_PROJECTIONS: return tool_parse_int(PROGRAM, "--projections", arg,
                                                1, 1 << 20, &o->projections);
    case OPT_EVERY: return tool_parse_int(PROGRAM, "--every", arg, 1, 1 << 20,
                                          &o->every);
    case OPT_SLICES: return tool_parse_int(PROGRAM, "--slices", arg, 1, 65536,
                                           &o->slices);
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
        {"mode", required_argument, NULL, OPT_MODE},
        {"rate", required_argument, NULL, OPT_RATE},
        {"frames", required_argument, NULL, OPT_FRAMES},
        {"warmup", required_argument, NULL, OPT_WARMUP},
        {"connections", required_argument, NULL, OPT_CONNECTIONS},
        {"ipc", no_argument, NULL, OPT_IPC},
        {"holes", required_argument, NULL, OPT_HOLES},
        {"detector", required_argument, NULL, OPT_DETECTOR},
        {"shift", required_argument, NULL, OPT_SHIFT},
        {"ratios", required_argument, NULL, OPT_RATIOS},
        {"planes", required_argument, NULL, OPT_PLANES},
        {"planes-out", no_argument, NULL, OPT_PLANES_OUT},
        {"width", required_argument, NULL, OPT_WIDTH},
        {"height", required_argument, NULL, OPT_HEIGHT},
        {"projections", required_argument, NULL, OPT_PROJECTIONS},
        {"every", required_argument, NULL, OPT_EVERY},
        {"slices", required_argument, NULL, OPT_SLICES},
        {"help", no_argument, NULL, OPT_HELP},
        {NULL, 0, NULL, 0}};
    *o = (options){.mode = MODE_SBDX, .rate = 30,
                   .frames = 300, .warmup = -1, .connections = 1,
                   .holes = {100, 100}, .detector = {160, 80}, .shift = 10,
                   .n_planes = 32, .ratio_first = 0.6, .ratio_last = 2.25,
                   .width = 2048, .height = 2048, .projections = 1800,
                   .every = 180, .slices = 8};
    bench_cli_init(&o->cli);
    int c, rc;
    while ((c = getopt_long(argc, argv, "", long_options, NULL)) != -1)
        if ((rc = apply_option(c, optarg, o)) != 0)
            return rc;
    if (o->mode == MODE_CONTINUOUS && o->frames < o->projections)
        return tool_option_error(PROGRAM, "--frames %ld is less than one "
                                 "window (--projections %ld)", o->frames,
                                 o->projections);
    if (o->slices > o->height)
        o->slices = o->height;
    if (o->warmup < 0)          /* plan creation and first uploads */
        o->warmup = o->mode == MODE_SBDX ? 10 : 2;
    return 0;
}

/* ------------------------------------------------------------ frames ---- */

/* Two distinct frames of plausible samples (a ramp with noise): what is
 * sent does not change the work, only the values. */
static void *make_frames(size_t bytes, rtomo_dtype dtype)
{
    unsigned char *f = malloc(2 * bytes);
    if (!f)
        return NULL;
    uint64_t x = 0x9e3779b97f4a7c15ull;
    size_t n = 2 * bytes / rtomo_dtype_size(dtype);
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        if (dtype == RTOMO_DTYPE_U8)
            f[i] = (unsigned char)(100 + (i % 97) + (x & 31));
        else
            ((uint16_t *)f)[i] = (uint16_t)(30000 + (i % 1009) + (x & 255));
    }
    return f;
}

static size_t frame_bytes(const options *o)
{
    if (o->mode == MODE_SBDX)
        return (size_t)o->holes[0] * o->holes[1] * o->detector[0] *
               o->detector[1];
    return sizeof(uint16_t) * (size_t)o->width * (size_t)o->height;
}

static int send_begin(const options *o, rtomo_client *c)
{
    rtomo_error err;
    rtomo_status st;
    if (o->mode == MODE_SBDX) {
        rtomo_sbdx_spec spec;
        rtomo_sbdx_spec_init(&spec);
        snprintf(spec.scan, sizeof spec.scan, "bench-sbdx");
        rtomo_sbdx_geometry *g = &spec.geometry;
        g->holes_x = (int)o->holes[0];
        g->holes_y = (int)o->holes[1];
        g->det_width = (int)o->detector[0];
        g->det_height = (int)o->detector[1];
        g->shift_m = (int)o->shift;
        g->n_planes = (int)o->n_planes;
        spec.ratios = tool_ratios(o->ratio_first, o->ratio_last, g->n_planes);
        g->ratios = spec.ratios;
        spec.dtype = RTOMO_DTYPE_U8;
        spec.planes = o->planes;
        spec.u16_scale = 257.0f;
        st = rtomo_client_send_sbdx_begin(c, &spec, &err);
        rtomo_sbdx_spec_clear(&spec);
    } else {
        rtomo_scan_spec spec;
        bench_scan_spec(&spec, "bench-continuous", o->width, o->height,
                        o->projections, o->slices);
        spec.continuous = 1;
        spec.window_every = (int)o->every;
        st = rtomo_client_send_scan_begin(c, &spec, &err);
        rtomo_scan_spec_clear(&spec);
    }
    if (st != RTOMO_OK)
        fprintf(stderr, PROGRAM ": begin: %s\n", err.message);
    return st == RTOMO_OK ? 0 : -1;
}

static int send_frame(run *r, long k, const unsigned char *frames,
                      size_t bytes)
{
    const options *o = r->o;
    rtomo_frame_header f;
    if (o->mode == MODE_SBDX) {
        memset(&f, 0, sizeof f);
        f.angle = f.axis_shift = NAN;
        f.type = RTOMO_MSG_SBDX_FRAME;
        snprintf(f.scan, sizeof f.scan, "bench-sbdx");
        f.dtype = RTOMO_DTYPE_U8;
        f.ndim = 4;
        int64_t shape[4] = {o->holes[1], o->holes[0], o->detector[1],
                            o->detector[0]};
        memcpy(f.shape, shape, sizeof shape);
    } else {
        bench_projection_header(&f, "bench-continuous", o->width, o->height);
    }
    f.index = k;
    rtomo_error err;
    r->t_send[k] = tool_now();
    /* The frames outlive the client: ZeroMQ sends straight from them. */
    if (rtomo_client_send_frame_zero_copy(r->c, &f,
                                          (void *)(frames + (k % 2) * bytes),
                                          bytes, NULL, NULL, &err) !=
        RTOMO_OK) {
        fprintf(stderr, PROGRAM ": frame %ld: %s\n", k, err.message);
        return -1;
    }
    return 0;
}

/* ---------------------------------------------------------- receiving ---- */

/* The frame (projection) whose send a set's latency counts from. */
static long set_input(const options *o, const rtomo_image_header *h)
{
    return o->mode == MODE_SBDX ? (long)h->frame : (long)h->projection_last;
}

static void take_image(run *r, const rtomo_published *m)
{
    const rtomo_image_header *h = &m->image;
    int sbdx = r->o->mode == MODE_SBDX;
    if (sbdx ? strcmp(m->topic, RTOMO_TOPIC_COMPOSITE) != 0
             : strcmp(m->topic, RTOMO_TOPIC_SLICE) != 0)
        return;
    if (h->frame < 0 || h->frame >= r->n_sets)
        return;
    set_record *s = &r->sets[h->frame];
    s->images++;
    if (h->latency_ms > s->daemon_ms)
        s->daemon_ms = h->latency_ms;
    long input = set_input(r->o, h);
    if (s->done || s->images < (sbdx ? 1 : h->count) || input < 0 ||
        input >= r->o->frames)
        return;
    s->done = 1;
    s->t_done = tool_now() - r->t_send[input];
    r->t_last_done = tool_now();
    if (r->sets_done++ == 0)
        r->t_first_done = r->t_last_done;
    if (h->frame < r->last_done)
        r->out_of_order++;
    r->last_done = h->frame;
}

/* Receive what arrives within timeout_s; returns 1 when a message came. */
static int receive_one(run *r, double timeout_s)
{
    rtomo_published m = {0};
    rtomo_error err;
    int ms = timeout_s > 0 ? (int)ceil(timeout_s * 1e3) : 0;
    rtomo_status st = rtomo_client_receive(r->c, &m, ms, &err);
    if (st == RTOMO_OK && m.kind == RTOMO_PUBLISHED_IMAGE)
        take_image(r, &m);
    else if (st == RTOMO_OK && m.kind == RTOMO_PUBLISHED_EVENT &&
             strcmp(m.event.event, "window_skipped") == 0)
        r->skipped++;
    rtomo_published_clear(&m);
    return st == RTOMO_OK;
}

/* Sets (frames or windows) the stream of o->frames frames makes due. */
static long sets_due(const options *o)
{
    if (o->mode == MODE_SBDX)
        return o->frames;
    return (o->frames - o->projections) / o->every + 1;
}

/* ---------------------------------------------------------------- run ---- */

static int stream(run *r, const unsigned char *frames, size_t bytes)
{
    const options *o = r->o;
    if (send_begin(o, r->c) != 0)
        return -1;
    double t0 = tool_now() + 0.2;       /* the plans are being made */
    for (long k = 0; k < o->frames && !tool_interrupted; k++) {
        double due = o->rate > 0 ? t0 + (double)k / o->rate : 0;
        while (tool_now() < due)
            receive_one(r, due - tool_now());
        if (send_frame(r, k, frames, bytes) != 0)
            return -1;
        while (receive_one(r, 0))
            ;
    }
    r->t_last_send = tool_now();
    rtomo_error err;
    rtomo_client_send_end(r->c, o->mode == MODE_SBDX ? RTOMO_MSG_SBDX_END
                                                     : RTOMO_MSG_SCAN_END,
                          o->mode == MODE_SBDX ? "bench-sbdx"
                                               : "bench-continuous", &err);
    double quiet_since = tool_now();
    while (r->sets_done + r->skipped < sets_due(o) &&
           tool_now() - quiet_since < QUIET_S && !tool_interrupted)
        if (receive_one(r, 0.2))
            quiet_since = tool_now();
    return 0;
}

typedef struct summary {
    long sent, done, skipped, missing, rejected, dropped, pub_dropped,
        out_of_order;
    double send_rate, set_rate, gu_per_s;
    double daemon_ms[3], client_ms[3];  /* median, p99, max */
    int exit_status;
    json_t *gpus;
} summary;

static void latency_stats(const run *r, int daemon_side, double out[3])
{
    double *v = malloc(sizeof(double) * (size_t)r->n_sets);
    int n = 0;
    for (long i = r->o->warmup; v && i < r->n_sets; i++)
        if (r->sets[i].done)
            v[n++] = daemon_side ? r->sets[i].daemon_ms
                                 : 1e3 * r->sets[i].t_done;
    out[0] = bench_percentile(v, n, 50);
    out[1] = bench_percentile(v, n, 99);
    out[2] = bench_percentile(v, n, 100);
    free(v);
}

static void summarise(const run *r, summary *s)
{
    const options *o = r->o;
    s->sent = o->frames;
    s->done = r->sets_done;
    s->skipped = r->skipped;
    s->missing = sets_due(o) - r->sets_done - r->skipped;
    s->out_of_order = r->out_of_order;
    double send_span = r->t_last_send - r->t_send[0];
    s->send_rate = send_span > 0 ? (o->frames - 1) / send_span : 0;
    double done_span = r->t_last_done - r->t_first_done;
    s->set_rate = done_span > 0 ? (r->sets_done - 1) / done_span : 0;
    latency_stats(r, 1, s->daemon_ms);
    latency_stats(r, 0, s->client_ms);
    s->rejected = bench_counter(r->c, "rejected");
    s->dropped = bench_counter(r->c, "dropped");
    s->pub_dropped = bench_counter(r->c, "pub_dropped");
    s->gu_per_s = bench_telemetry(r->c, "reconstruction", "gu_per_s");
    s->gpus = bench_gpus(r->c);
    if (!s->gpus)
        s->gpus = json_array();
}

static int run_stream(const options *o, const unsigned char *frames,
                      size_t bytes, summary *s)
{
    const char *args[BENCH_MAX_ARGS + 8];
    bench_cli_daemon_args(&o->cli, o->devices, args);
    const char *sbdx_topics[] = {RTOMO_TOPIC_COMPOSITE, RTOMO_TOPIC_EVENT,
                                 o->planes_out ? RTOMO_TOPIC_PLANE : NULL,
                                 NULL};
    const char *tomo_topics[] = {RTOMO_TOPIC_SLICE, RTOMO_TOPIC_EVENT, NULL};
    bench_daemon b;
    bench_daemon_options bo = {
        .rtomod = o->cli.rtomod, .args = args,
        .connections = (int)o->connections,
        .topics = o->mode == MODE_SBDX ? sbdx_topics : tomo_topics,
        .receive_hwm = 100000, .ipc = o->ipc};
    if (bench_daemon_open(&b, &bo) != 0)
        return -1;
    run r = {.o = o, .c = b.client, .n_sets = sets_due(o), .last_done = -1};
    r.t_send = calloc((size_t)o->frames, sizeof *r.t_send);
    r.sets = calloc((size_t)r.n_sets, sizeof *r.sets);
    int rc = r.t_send && r.sets ? stream(&r, frames, bytes) : -1;
    if (rc == 0)
        summarise(&r, s);
    s->exit_status = bench_daemon_close(&b);
    free(r.t_send);
    free(r.sets);
    return rc;
}

/* ------------------------------------------------------------ report ---- */

static const char *gpu_names(const summary *s, char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < json_array_size(s->gpus) && used < size; i++)
        used += (size_t)snprintf(buf + used, size - used, "%s%s", i ? ", " : "",
                                 json_string_value(json_object_get(
                                     json_array_get(s->gpus, i), "name")));
    return used ? buf : "none (CPU backend)";
}

static void print_table(const options *o, const summary *s)
{
    char gpus[512];
    if (o->mode == MODE_SBDX)
        printf("rtomod SBDX stream: %ldx%ld holes, %ldx%ld uint8 detector "
               "(%.1f MB/frame), m %ld, %ld planes, planes %s, target %.1f "
               "frames/s, backend %s, GPUs: %s\n", o->holes[0], o->holes[1],
               o->detector[0], o->detector[1], frame_bytes(o) / 1e6, o->shift,
               o->n_planes, rtomo_plane_format_name(o->planes), o->rate,
               o->cli.backend, gpu_names(s, gpus, sizeof gpus));
    else
        printf("rtomod continuous scan: %ldx%ld uint16 projections (%.1f MB), "
               "window %ld every %ld, %ld slices, target %.1f projections/s, "
               "backend %s, GPUs: %s\n", o->width, o->height,
               frame_bytes(o) / 1e6, o->projections, o->every, o->slices,
               o->rate, o->cli.backend, gpu_names(s, gpus, sizeof gpus));
    printf("%8s %10s %8s %10s %8s %8s %8s %8s %8s %8s\n", "sent", "sent/s",
           "sets", "sets/s", "skipped", "missing", "rejected", "dropped",
           "pub_drop", "GU/s");
    printf("%8ld %10.1f %8ld %10.2f %8ld %8ld %8ld %8ld %8ld %8.1f\n",
           s->sent, s->send_rate, s->done, s->set_rate, s->skipped,
           s->missing, s->rejected, s->dropped, s->pub_dropped, s->gu_per_s);
    printf("latency ms (after %ld warm-up sets)  median %8.2f  p99 %8.2f  "
           "max %8.2f   (daemon: input received -> published)\n", o->warmup,
           s->daemon_ms[0], s->daemon_ms[1], s->daemon_ms[2]);
    printf("latency ms                           median %8.2f  p99 %8.2f  "
           "max %8.2f   (client: send -> received)\n", s->client_ms[0],
           s->client_ms[1], s->client_ms[2]);
    if (s->out_of_order)
        printf("sets out of order: %ld\n", s->out_of_order);
}

/* A number, or null when not measured (JSON has no NaN). */
static json_t *number(double x)
{
    return isfinite(x) ? json_real(x) : json_null();
}

static json_t *latency_json(const double v[3])
{
    return json_pack("{s:o, s:o, s:o}", "median", number(v[0]), "p99",
                     number(v[1]), "max", number(v[2]));
}

static json_t *results_json(const options *o, const summary *s)
{
    json_t *setup = o->mode == MODE_SBDX
        ? json_pack("{s:[i,i], s:[i,i], s:i, s:i, s:f, s:f, s:s}",
                    "holes", (int)o->holes[0], (int)o->holes[1],
                    "detector", (int)o->detector[0], (int)o->detector[1],
                    "shift", (int)o->shift, "planes", (int)o->n_planes,
                    "ratio_first", o->ratio_first, "ratio_last",
                    o->ratio_last, "plane_format",
                    rtomo_plane_format_name(o->planes))
        : json_pack("{s:i, s:i, s:i, s:i, s:i}", "width", (int)o->width,
                    "height", (int)o->height, "projections",
                    (int)o->projections, "every", (int)o->every, "slices",
                    (int)o->slices);
    return json_pack(
        "{s:s, s:s, s:s, s:O, s:o, s:f, s:I, s:I, s:i, s:b, s:f, s:f, s:I,"
        " s:I, s:I, s:I, s:I, s:I, s:I, s:o, s:o, s:o, s:i}",
        "benchmark", "rtomod_stream",
        "mode", o->mode == MODE_SBDX ? "sbdx" : "continuous",
        "backend", o->cli.backend, "gpus", s->gpus, "setup", setup,
        "target_rate", o->rate, "frames", (json_int_t)o->frames,
        "warmup", (json_int_t)o->warmup, "connections", (int)o->connections,
        "ipc", o->ipc, "sent_per_s", s->send_rate, "sets_per_s", s->set_rate,
        "sets", (json_int_t)s->done, "skipped", (json_int_t)s->skipped,
        "missing", (json_int_t)s->missing,
        "rejected", (json_int_t)s->rejected, "dropped", (json_int_t)s->dropped,
        "pub_dropped", (json_int_t)s->pub_dropped,
        "out_of_order", (json_int_t)s->out_of_order,
        "gu_per_s", number(s->gu_per_s),
        "latency_daemon_ms", latency_json(s->daemon_ms),
        "latency_client_ms", latency_json(s->client_ms),
        "exit_status", s->exit_status);
}

int main(int argc, char **argv)
{
    options o;
    int rc = parse_options(argc, argv, &o);
    if (rc != 0)
        return rc > 0 ? 0 : 2;
    size_t bytes = frame_bytes(&o);
    unsigned char *frames = make_frames(bytes, o.mode == MODE_SBDX
                                                   ? RTOMO_DTYPE_U8
                                                   : RTOMO_DTYPE_U16);
    if (!frames) {
        fprintf(stderr, PROGRAM ": out of memory for frames of %zu bytes\n",
                bytes);
        return 1;
    }
    tool_catch_signals();
    summary s = {.gpus = NULL};
    if (run_stream(&o, frames, bytes, &s) != 0) {
        fprintf(stderr, PROGRAM ": the run failed\n");
        free(frames);
        return 1;
    }
    print_table(&o, &s);
    bench_print_json(PROGRAM, results_json(&o, &s), o.cli.json_path);
    json_decref(s.gpus);
    free(frames);
    return s.missing > 0 || s.exit_status != 0 ? 1 : 0;
}
