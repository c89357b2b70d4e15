/*
 * bench_stream2.c — how fast rtomod takes DECTRIS Stream V2 images in,
 * beside its native protocol in the same run: scans of large uint16
 * frames (2048x2048 by default) sent natively (ingest socket), as Stream
 * V2 uncompressed and as Stream V2 bitshuffle-LZ4 ("bslz4") to an armed
 * scan, each over 1 and 4 connections, into a freshly started rtomod.
 * Per run: the sustained rate (GB/s of pixels and frames/s, from the
 * first image sent to the daemon's count of accepted frames), the time
 * the daemon spent decoding (status inputs.stream2.decode_ms) and its
 * share of the run, rejects and the slices published.
 *
 * The frames are counts with noise (a smooth object in front of a flat
 * beam, plus a few counts of noise), so that bslz4 compresses them about
 * as much as a real detector's images (not the 100x of a noise-free
 * image).  Messages are built before the clock starts: the sender costs
 * nothing but ZeroMQ.  Only a few slices are reconstructed (--slices), so
 * that the run measures transport and decoding, not the back-projection.
 *
 *   bench_stream2 --rtomod PATH [--backend cpu|cuda|auto] [--width 2048]
 *                 [--height 2048] [--frames 200] [--connections 1,4]
 *                 [--modes native,raw,bslz4] [--slices 8] [--json FILE]
 *                 [--arg RTOMOD_ARGUMENT]...
 */
#include "config.h"

#include <arpa/inet.h>
#include <getopt.h>
#include <math.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cbor.h>
#include <jansson.h>
#include <lz4.h>
#include <zmq.h>

#include "bench_daemon.h"
#include "rtomod_bitshuffle.h"
#include "tool_common.h"

#define PROGRAM "bench_stream2"
#define USAGE "bench_stream2 [--rtomod PATH] [--backend NAME] [--width N] " \
              "[--height N] [--frames N] [--connections 1,4] " \
              "[--modes native,raw,bslz4] [--slices N] [--json FILE] " \
              "[--arg RTOMOD_ARGUMENT]..."
#define MAX_RUNS 16
#define TIMEOUT_S (BENCH_TIMEOUT_MS / 1000.0)
#define BSLZ4_BLOCK 4096        /* elements: bitshuffle's 8 KiB of uint16 */

typedef enum mode { MODE_NATIVE, MODE_RAW, MODE_BSLZ4, MODE_COUNT } mode;
static const char *const mode_names[MODE_COUNT] = {"native", "raw", "bslz4"};

typedef struct options {
    bench_daemon_cli cli;
    long width, height, frames, slices;
    long connections[MAX_RUNS];
    int n_connections;
    int modes[MODE_COUNT];
} options;

typedef struct result {
    mode m;
    int connections;
    double seconds, gb_per_s, frames_per_s;
    double decode_ms;           /* the daemon's decoding time */
    double wire_mb;             /* bytes sent per frame, MB */
    long accepted, rejected;
    int slices, exit_status;
} result;

/* ------------------------------------------------------ the images ---- */

/* Counts of a smooth object in a flat beam, with noise of a few counts:
 * what a detector's image compresses like. */
static uint16_t *noisy_frame(size_t width, size_t height)
{
    uint16_t *f = malloc(sizeof *f * width * height);
    uint64_t s = 88172645463325252ULL;
    for (size_t y = 0; f && y < height; y++)
        for (size_t x = 0; x < width; x++) {
            double r = hypot((double)x - width / 2.0, (double)y - height / 2.0);
            double mean = 20000.0 * exp(-0.02 * fmax(0.0, width / 3.0 - r));
            s ^= s << 13; s ^= s >> 7; s ^= s << 17;
            f[y * width + x] = (uint16_t)(mean + (double)(s % 64) - 32.0);
        }
    return f;
}

/* bslz4 of the frame (malloc'd), its size in *size. */
static uint8_t *compress_bslz4(const uint16_t *frame, size_t n, size_t *size)
{
    size_t cap = 12 + LZ4_compressBound((int)(n * 2)) + n / BSLZ4_BLOCK * 8 +
                 64;
    uint8_t *out = malloc(cap), *tmp = malloc(BSLZ4_BLOCK * 2);
    if (!out || !tmp) {
        free(out);
        free(tmp);
        return NULL;
    }
    uint64_t total = n * 2;
    for (int i = 0; i < 8; i++)
        out[i] = (uint8_t)(total >> (56 - 8 * i));
    uint32_t block = BSLZ4_BLOCK * 2;
    for (int i = 0; i < 4; i++)
        out[8 + i] = (uint8_t)(block >> (24 - 8 * i));
    size_t pos = 12, done = 0;
    while (done < n) {
        size_t m = n - done >= BSLZ4_BLOCK ? BSLZ4_BLOCK : (n - done) / 8 * 8;
        if (m == 0)
            break;
        rtomod_bitshuffle((const uint8_t *)(frame + done), tmp, m, 2);
        int c = LZ4_compress_default((const char *)tmp, (char *)out + pos + 4,
                                     (int)(m * 2), (int)(cap - pos - 4));
        for (int i = 0; i < 4; i++)
            out[pos + (size_t)i] = (uint8_t)((uint32_t)c >> (24 - 8 * i));
        pos += 4 + (size_t)c;
        done += m;
    }
    memcpy(out + pos, frame + done, (n - done) * 2);
    *size = pos + (n - done) * 2;
    free(tmp);
    return out;
}

/* ---------------------------------------------------- CBOR messages ---- */

typedef struct writer {
    uint8_t *p;
    size_t pos, cap;
} writer;

static void put_text(writer *w, const char *s)
{
    w->pos += cbor_encode_string_start(strlen(s), w->p + w->pos,
                                       w->cap - w->pos);
    memcpy(w->p + w->pos, s, strlen(s));
    w->pos += strlen(s);
}

static void put_uint(writer *w, uint64_t v)
{
    w->pos += cbor_encode_uint(v, w->p + w->pos, w->cap - w->pos);
}

static void put_key_uint(writer *w, const char *key, uint64_t v)
{
    put_text(w, key);
    put_uint(w, v);
}

/* The start message of series 1. */
static uint8_t *start_message(const options *o, size_t *size)
{
    writer w = {malloc(512), 0, 512};
    w.pos += cbor_encode_map_start(6, w.p, w.cap);
    put_text(&w, "type");
    put_text(&w, "start");
    put_key_uint(&w, "series_id", 1);
    put_key_uint(&w, "image_size_x", (uint64_t)o->width);
    put_key_uint(&w, "image_size_y", (uint64_t)o->height);
    put_key_uint(&w, "number_of_images", (uint64_t)o->frames);
    put_text(&w, "image_dtype");
    put_text(&w, "uint16");
    *size = w.pos;
    return w.p;
}

static uint8_t *end_message(size_t *size)
{
    writer w = {malloc(64), 0, 64};
    w.pos += cbor_encode_map_start(2, w.p, w.cap);
    put_text(&w, "type");
    put_text(&w, "end");
    put_key_uint(&w, "series_id", 1);
    *size = w.pos;
    return w.p;
}

/* Image `id`: {"type", "series_id", "image_id", "data": {"c": tag 40
 * [[h, w], tag 69 (bytes | tag 56500 ["bslz4", 2, bytes])]}}. */
static uint8_t *image_message(const options *o, uint64_t id,
                              const uint8_t *pixels, size_t bytes,
                              int bslz4, size_t *size)
{
    size_t cap = bytes + 256;
    writer w = {malloc(cap), 0, cap};
    if (!w.p)
        return NULL;
    w.pos += cbor_encode_map_start(4, w.p, w.cap);
    put_text(&w, "type");
    put_text(&w, "image");
    put_key_uint(&w, "series_id", 1);
    put_key_uint(&w, "image_id", id);
    put_text(&w, "data");
    w.pos += cbor_encode_map_start(1, w.p + w.pos, w.cap - w.pos);
    put_text(&w, "c");
    w.pos += cbor_encode_tag(40, w.p + w.pos, w.cap - w.pos);
    w.pos += cbor_encode_array_start(2, w.p + w.pos, w.cap - w.pos);
    w.pos += cbor_encode_array_start(2, w.p + w.pos, w.cap - w.pos);
    put_uint(&w, (uint64_t)o->height);
    put_uint(&w, (uint64_t)o->width);
    w.pos += cbor_encode_tag(69, w.p + w.pos, w.cap - w.pos);
    if (bslz4) {
        w.pos += cbor_encode_tag(56500, w.p + w.pos, w.cap - w.pos);
        w.pos += cbor_encode_array_start(3, w.p + w.pos, w.cap - w.pos);
        put_text(&w, "bslz4");
        put_uint(&w, 2);
    }
    w.pos += cbor_encode_bytestring_start(bytes, w.p + w.pos, w.cap - w.pos);
    memcpy(w.p + w.pos, pixels, bytes);
    w.pos += bytes;
    *size = w.pos;
    return w.p;
}

/* --------------------------------------------------------- options ---- */

static int parse_modes(const char *arg, options *o)
{
    memset(o->modes, 0, sizeof o->modes);
    char copy[128];
    snprintf(copy, sizeof copy, "%s", arg);
    for (char *t = strtok(copy, ","); t; t = strtok(NULL, ",")) {
        int m = 0;
        while (m < MODE_COUNT && strcmp(t, mode_names[m]) != 0)
            m++;
        if (m == MODE_COUNT)
            return tool_option_error(PROGRAM, "--modes: unknown mode '%s' "
                                     "(native, raw, bslz4)", t);
        o->modes[m] = 1;
    }
    return 0;
}

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
    case 'c': return tool_parse_int_list(PROGRAM, "--connections", arg, 1,
                                         64, o->connections, MAX_RUNS,
                                         &o->n_connections);
    case 'm': return parse_modes(arg, o);
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
        {"modes", required_argument, NULL, 'm'},
        {"slices", required_argument, NULL, 's'},
        {"help", no_argument, NULL, 'H'},
        {NULL, 0, NULL, 0}};
    memset(o, 0, sizeof *o);
    bench_cli_init(&o->cli);
    o->width = o->height = 2048;
    o->frames = 200;
    o->slices = 8;
    o->n_connections = 2;
    o->connections[0] = 1;
    o->connections[1] = 4;
    for (int m = 0; m < MODE_COUNT; m++)
        o->modes[m] = 1;
    int c, rc;
    while ((c = getopt_long(argc, argv, "", long_options, NULL)) != -1)
        if ((rc = parse_option(c, optarg, o)) != 0)
            return rc;
    if (o->slices > o->height)
        return tool_option_error(PROGRAM, "--slices %ld exceeds --height %ld",
                                 o->slices, o->height);
    return 0;
}

/* ------------------------------------------------------------ a run ---- */

/* A free loopback port for the Stream V2 input. */
static int free_port(void)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    int port = -1;
    if (s >= 0 && bind(s, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(s, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    if (s >= 0)
        close(s);
    return port;
}

/* status inputs.stream2.<name>, -1 when absent. */
static double input_number(rtomo_client *c, const char *name)
{
    json_t *reply = NULL;
    rtomo_error err;
    double v = -1;
    if (rtomo_client_command(c, "status", &reply, &err) == RTOMO_OK) {
        json_t *in = json_object_get(json_object_get(reply, "inputs"),
                                     "stream2");
        json_t *x = json_object_get(in, name);
        if (json_is_number(x))
            v = json_number_value(x);
        else if (strcmp(name, "series_bound") == 0)
            v = json_is_object(json_object_get(in, "armed")) &&
                json_is_integer(json_object_get(json_object_get(in, "armed"),
                                                "series"));
    }
    json_decref(reply);
    return v;
}

static void pause_ms(long ms)
{
    nanosleep(&(struct timespec){ms / 1000, (ms % 1000) * 1000000L}, NULL);
}

/* Wait until get(c, name) reaches want; 0 or -1 after the timeout. */
static int wait_for(rtomo_client *c, double (*get)(rtomo_client *, const char *),
                    const char *name, double want)
{
    double deadline = tool_now() + TIMEOUT_S;
    while (get(c, name) < want)
        if (tool_now() > deadline)
            return -1;
        else
            pause_ms(2);
    return 0;
}

static double counter(rtomo_client *c, const char *name)
{
    return (double)bench_counter(c, name);
}

static int arm_scan(const options *o, rtomo_client *c)
{
    int first = (int)(o->height - o->slices) / 2;
    json_t *req = json_pack(
        "{s:s, s:s, s:s, s:{s:I, s:I}, s:I, s:s, s:{s:{s:i, s:I}}}",
        "cmd", "arm", "input", "stream2", "scan", "bench",
        "detector", "width", (json_int_t)o->width, "height",
        (json_int_t)o->height, "projections", (json_int_t)o->frames,
        "dtype", "uint16", "reconstruction", "slices", "first", first,
        "count", (json_int_t)o->slices);
    json_t *reply = NULL;
    rtomo_error err;
    rtomo_status st = rtomo_client_request(c, req, &reply, &err);
    json_decref(req);
    json_decref(reply);
    if (st != RTOMO_OK)
        fprintf(stderr, PROGRAM ": arm refused: %s\n", err.message);
    return st == RTOMO_OK ? 0 : -1;
}

/* ZeroMQ's free function for images the bench keeps until its context
 * is gone: nothing to free. */
static void image_kept(void *data, void *hint)
{
    (void)data;
    (void)hint;
}

/* Image f on socket s without a copy: zmq_send would copy every image
 * into a new buffer on this one thread (8 MB raw, 4 MB bslz4), and that
 * copy, not the daemon, bounded the rates measured before (a sender's
 * thread at about 350 raw images/s). */
static int send_image(void *s, uint8_t *image, size_t size)
{
    zmq_msg_t msg;
    if (zmq_msg_init_data(&msg, image, size, image_kept, NULL) != 0)
        return -1;
    if (zmq_msg_send(&msg, s, 0) < 0) {
        zmq_msg_close(&msg);
        return -1;
    }
    return 0;
}

/* Send the armed scan's series over `k` PUSH sockets; time from the first
 * image to the daemon's count of accepted frames.  The images outlive the
 * sockets (zmq_ctx_term below waits for every send). */
static int push_stream2(const options *o, rtomo_client *c,
                        const char *endpoint, uint8_t **images,
                        const size_t *sizes, int k, result *r)
{
    void *ctx = zmq_ctx_new();
    zmq_ctx_set(ctx, ZMQ_IO_THREADS, k);
    void *socks[64];
    for (int i = 0; i < k; i++) {
        socks[i] = zmq_socket(ctx, ZMQ_PUSH);
        zmq_connect(socks[i], endpoint);
    }
    size_t size;
    uint8_t *start = start_message(o, &size);
    zmq_send(socks[0], start, size, 0);
    free(start);
    int rc = wait_for(c, input_number, "series_bound", 1);
    double t0 = tool_now();
    for (long f = 0; rc == 0 && f < o->frames; f++)
        if (send_image(socks[f % k], images[f], sizes[f]) != 0)
            rc = -1;
    if (rc == 0)
        rc = wait_for(c, input_number, "frames", (double)o->frames);
    r->seconds = tool_now() - t0;
    uint8_t *end = end_message(&size);
    zmq_send(socks[0], end, size, 0);
    free(end);
    for (int i = 0; i < k; i++) {
        int linger = 10000;
        zmq_setsockopt(socks[i], ZMQ_LINGER, &linger, sizeof linger);
        zmq_close(socks[i]);
    }
    zmq_ctx_term(ctx);
    return rc;
}

/* The same frames natively (as bench_ingest sends them). */
static int push_native(const options *o, rtomo_client *c,
                       const uint16_t *frame, result *r)
{
    rtomo_scan_spec spec;
    bench_scan_spec(&spec, "bench", o->width, o->height, o->frames, o->slices);
    rtomo_error err;
    size_t bytes = 2 * (size_t)o->width * (size_t)o->height;
    int rc = -1;
    double t0 = tool_now();
    if (rtomo_client_send_scan_begin(c, &spec, &err) == RTOMO_OK) {
        rtomo_frame_header f;
        bench_projection_header(&f, "bench", o->width, o->height);
        rc = 0;
        for (long p = 0; rc == 0 && p < o->frames; p++) {
            f.index = p;
            if (rtomo_client_send_frame_zero_copy(c, &f, (void *)frame, bytes,
                                                  NULL, NULL, &err) !=
                RTOMO_OK)
                rc = -1;
        }
    }
    if (rc == 0)
        rc = wait_for(c, counter, "accepted", (double)o->frames + 1);
    r->seconds = tool_now() - t0;
    if (rc == 0 &&
        rtomo_client_send_end(c, RTOMO_MSG_SCAN_END, "bench", &err) !=
            RTOMO_OK)
        rc = -1;
    rtomo_scan_spec_clear(&spec);
    return rc;
}

static void collect_slices(const options *o, rtomo_client *c, result *r)
{
    double deadline = tool_now() + TIMEOUT_S;
    while (r->slices < o->slices && tool_now() < deadline) {
        rtomo_published m = {0};
        rtomo_error err;
        if (rtomo_client_receive(c, &m, 100, &err) == RTOMO_OK &&
            m.kind == RTOMO_PUBLISHED_IMAGE &&
            strcmp(m.image.topic, RTOMO_TOPIC_SLICE) == 0)
            r->slices++;
        rtomo_published_clear(&m);
    }
}

typedef struct frames {
    const uint16_t *raw;
    uint8_t **images[MODE_COUNT];   /* per mode: a message per frame */
    size_t *sizes[MODE_COUNT];
} frames;

static int run_once(const options *o, mode m, int k, const frames *fr,
                    result *r)
{
    memset(r, 0, sizeof *r);
    r->m = m;
    r->connections = k;
    char endpoint[64], setting[96];
    snprintf(endpoint, sizeof endpoint, "tcp://127.0.0.1:%d", free_port());
    snprintf(setting, sizeof setting, "inputs.stream2.endpoint=%s", endpoint);
    const char *args[BENCH_MAX_ARGS + 12];
    bench_cli_daemon_args(&o->cli, NULL, args);
    int n = 0;
    while (args[n])
        n++;
    args[n++] = "--set";
    args[n++] = setting;
    args[n] = NULL;
    bench_daemon b;
    bench_daemon_options bo = {.rtomod = o->cli.rtomod, .args = args,
                               .connections = m == MODE_NATIVE ? k : 1};
    if (bench_daemon_open(&b, &bo) != 0)
        return -1;
    rtomo_client *c = b.client;
    size_t pixels = 2 * (size_t)o->width * (size_t)o->height;
    int rc;
    if (m == MODE_NATIVE) {
        rc = push_native(o, c, fr->raw, r);
        r->wire_mb = pixels / 1e6;
    } else {
        rc = arm_scan(o, c);
        if (rc == 0)
            rc = push_stream2(o, c, endpoint, fr->images[m], fr->sizes[m], k,
                              r);
        r->wire_mb = fr->sizes[m][0] / 1e6;
        r->decode_ms = input_number(c, "decode_ms");
    }
    r->accepted = bench_counter(c, "accepted");
    r->gb_per_s = (double)pixels * o->frames / r->seconds / 1e9;
    r->frames_per_s = o->frames / r->seconds;
    if (rc == 0)
        collect_slices(o, c, r);
    r->rejected = bench_counter(c, "rejected");
    r->exit_status = bench_daemon_close(&b);
    return rc == 0 && r->slices == o->slices ? 0 : -1;
}

/* ---------------------------------------------------------- report ---- */

static void print_table(const options *o, const result *r, int n)
{
    printf("rtomod Stream V2 ingest: %ldx%ld uint16 frames (%.1f MB), %ld "
           "per scan, %ld slices reconstructed, backend %s\n", o->width,
           o->height, 2.0 * o->width * o->height / 1e6, o->frames, o->slices,
           o->cli.backend);
    printf("%-7s %5s %8s %9s %9s %8s %10s %8s %8s %6s\n", "mode", "conn",
           "wire_MB", "GB/s", "frames/s", "seconds", "decode_ms", "decode%",
           "rejected", "slices");
    for (int i = 0; i < n; i++)
        printf("%-7s %5d %8.2f %9.3f %9.1f %8.3f %10.1f %8.1f %8ld %6d\n",
               mode_names[r[i].m], r[i].connections, r[i].wire_mb,
               r[i].gb_per_s, r[i].frames_per_s, r[i].seconds, r[i].decode_ms,
               r[i].seconds > 0 ? 100.0 * r[i].decode_ms / 1e3 / r[i].seconds
                                : 0.0,
               r[i].rejected, r[i].slices);
}

static json_t *results_json(const options *o, const result *r, int n)
{
    json_t *runs = json_array();
    for (int i = 0; i < n; i++)
        json_array_append_new(runs, json_pack(
            "{s:s, s:i, s:f, s:f, s:f, s:f, s:f, s:I, s:I, s:i, s:i}",
            "mode", mode_names[r[i].m], "connections", r[i].connections,
            "wire_mb", r[i].wire_mb, "gb_per_s", r[i].gb_per_s,
            "frames_per_s", r[i].frames_per_s, "seconds", r[i].seconds,
            "decode_ms", r[i].decode_ms, "accepted",
            (json_int_t)r[i].accepted, "rejected", (json_int_t)r[i].rejected,
            "slices", r[i].slices, "exit_status", r[i].exit_status));
    return json_pack("{s:s, s:s, s:i, s:i, s:i, s:i, s:s, s:o}",
                     "benchmark", "rtomod_stream2_ingest", "backend",
                     o->cli.backend, "width", (int)o->width, "height",
                     (int)o->height, "frames", (int)o->frames, "slices",
                     (int)o->slices, "dtype", "uint16", "runs", runs);
}

/* Every message of each mode, built before any clock starts. */
static int build_frames(const options *o, frames *fr)
{
    size_t n = (size_t)o->width * (size_t)o->height;
    memset(fr, 0, sizeof *fr);
    uint16_t *raw = noisy_frame((size_t)o->width, (size_t)o->height);
    fr->raw = raw;
    if (!raw)
        return -1;
    size_t packed_size = 0;
    uint8_t *packed = o->modes[MODE_BSLZ4] ? compress_bslz4(raw, n,
                                                            &packed_size)
                                           : NULL;
    for (int m = MODE_RAW; m < MODE_COUNT; m++) {
        if (!o->modes[m])
            continue;
        fr->images[m] = calloc((size_t)o->frames, sizeof *fr->images[m]);
        fr->sizes[m] = calloc((size_t)o->frames, sizeof *fr->sizes[m]);
        for (long f = 0; fr->images[m] && f < o->frames; f++)
            if (!(fr->images[m][f] = image_message(
                      o, (uint64_t)f, m == MODE_BSLZ4 ? packed
                                                      : (const uint8_t *)raw,
                      m == MODE_BSLZ4 ? packed_size : 2 * n,
                      m == MODE_BSLZ4, &fr->sizes[m][f])))
                return -1;
    }
    free(packed);
    return 0;
}

int main(int argc, char **argv)
{
    options o;
    int rc = parse_options(argc, argv, &o);
    if (rc != 0)
        return rc > 0 ? 0 : 2;
    frames fr;
    if (build_frames(&o, &fr) != 0) {
        fprintf(stderr, PROGRAM ": out of memory for the messages\n");
        return 1;
    }
    result results[MODE_COUNT * MAX_RUNS];
    int n = 0, failures = 0;
    for (int m = 0; m < MODE_COUNT; m++)
        for (int i = 0; o.modes[m] && i < o.n_connections; i++) {
            if (run_once(&o, (mode)m, (int)o.connections[i], &fr,
                         &results[n]) != 0) {
                fprintf(stderr, PROGRAM ": the %s run over %ld "
                        "connection(s) failed\n", mode_names[m],
                        o.connections[i]);
                failures++;
            }
            n++;
        }
    print_table(&o, results, n);
    bench_print_json(PROGRAM, results_json(&o, results, n), o.cli.json_path);
    return failures ? 1 : 0;
}
