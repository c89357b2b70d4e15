/*
 * rtomo_sub.c — the subscriber tool: receives what rtomod publishes (from
 * one daemon, or merged from several that share a stream), prints one line
 * per message (images, telemetry, events) and optionally saves every image
 * as its raw payload, its JSON header and a PNG preview.  Messages lost on
 * the way (gaps in a publisher's per-topic sequence numbers) are reported
 * as they are noticed and counted in the summary.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "image_png.h"
#include "rtomo_client.h"
#include "tool_common.h"

#define MAX_TOPICS 16
#define MAX_PUBLISHERS 32

static const char *program = "rtomo-sub";

typedef struct sub_options {
    rtomo_client_options client;
    char publish[MAX_PUBLISHERS * 128];     /* the endpoints, comma-joined */
    int n_publish;
    const char *topics[MAX_TOPICS];
    int n_topics;
    const char *output;         /* directory, or NULL: print only */
    int png;
    long count;                 /* stop after this many messages; 0 = never */
    double timeout_s;           /* stop after this long without a message */
    int quiet;
} sub_options;

static void usage(FILE *out)
{
    fprintf(out,
"Usage: rtomo-sub [OPTION]...\n"
"Subscribe to rtomod's published messages: print one line per image,\n"
"telemetry and event message, and save images when asked.\n"
"\n"
"  -p, --publish ENDPOINT  publish socket (default tcp://localhost:5556);\n"
"                          repeat it (or give EP1,EP2) to merge what several\n"
"                          daemons publish\n"
TOOL_CURVE_HELP
"  -t, --topic TOPIC       receive topics starting with TOPIC: slice, plane,\n"
"                          composite, depth, telemetry, event (repeatable;\n"
"                          default: all)\n"
"  -o, --output DIR        save each image as DIR/NAME.raw (the payload as\n"
"                          published: float32, or uint16 for depth), NAME.json\n"
"                          (its header) and NAME.png (a preview), where NAME\n"
"                          is SCAN_TOPIC[_fFRAME]_WHICH and WHICH is rROW for\n"
"                          slices (rROW_iK for iterate K of sirt/cgls),\n"
"                          pPLANE for planes, else the index\n"
"      --no-png            do not write PNG previews\n"
"  -n, --count N           exit after N messages\n"
"  -T, --timeout SECONDS   exit when nothing arrives for this long\n"
"  -q, --quiet             print only errors and the final summary\n"
"  -h, --help              show this help\n"
"\n"
"Messages lost on the way (ZeroMQ drops them when a subscriber falls\n"
"behind) show as gaps in each publisher's sequence numbers: reported as\n"
"\"lost N TOPIC messages\" lines and in the summary.\n"
"\n"
"Exit status: 0 done (count reached, or interrupted / timed out without\n"
"--count), 1 error or --count not reached, 2 bad usage.\n");
}

static int parse_args(int argc, char **argv, sub_options *o)
{
    static const struct option options[] = {
        {"publish", required_argument, NULL, 'p'},
        TOOL_CURVE_OPTIONS,
        {"topic", required_argument, NULL, 't'},
        {"output", required_argument, NULL, 'o'},
        {"no-png", no_argument, NULL, 'P'},
        {"count", required_argument, NULL, 'n'},
        {"timeout", required_argument, NULL, 'T'},
        {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "p:t:o:n:T:qh", options, NULL)) != -1) {
        switch (c) {
        case 'p': {
            size_t used = strlen(o->publish);
            if (o->n_publish == MAX_PUBLISHERS ||
                used + strlen(optarg) + 2 > sizeof o->publish)
                return tool_usage_error(program, "too many --publish");
            snprintf(o->publish + used, sizeof o->publish - used, "%s%s",
                     used ? "," : "", optarg);
            o->n_publish++;
            break;
        }
        case 't':
            if (o->n_topics == MAX_TOPICS)
                return tool_usage_error(program, "at most %d topics",
                                        MAX_TOPICS);
            o->topics[o->n_topics++] = optarg;
            break;
        case 'o': o->output = optarg; break;
        case TOOL_OPT_SERVER_KEY: o->client.server_key = optarg; break;
        case TOOL_OPT_CLIENT_KEY: o->client.client_key = optarg; break;
        case 'P': o->png = 0; break;
        case 'n':
            if (tool_parse_int(program, "--count", optarg, 1, 1L << 40,
                               &o->count) != 0)
                return TOOL_USAGE;
            break;
        case 'T':
            if (tool_parse_double(program, "--timeout", optarg, 0.001, 1e7,
                                  &o->timeout_s) != 0)
                return TOOL_USAGE;
            break;
        case 'q': o->quiet = 1; break;
        case 'h': usage(stdout); exit(TOOL_OK);
        default: return tool_usage_error(program, "bad option");
        }
    }
    if (optind < argc)
        return tool_usage_error(program, "unexpected argument '%s'",
                                argv[optind]);
    if (o->n_publish)
        o->client.publish = o->publish;
    return TOOL_OK;
}

/* ------------------------------------------------------------ saving ---- */

/* The image as float32 for the preview: uint16 planes scaled back to
 * values, depth as plane numbers.  Returns malloc'd memory, or NULL. */
static float *preview_values(const rtomo_published *m)
{
    size_t n = (size_t)m->image.width * (size_t)m->image.height;
    float *values = malloc(n * sizeof *values);
    if (!values)
        return NULL;
    if (m->image.dtype == RTOMO_DTYPE_F32) {
        memcpy(values, m->payload, n * sizeof *values);
        return values;
    }
    const uint16_t *u = m->payload;
    int scaled = strcmp(m->topic, RTOMO_TOPIC_DEPTH) != 0 &&
                 m->image.u16_scale > 0;
    for (size_t i = 0; i < n; i++)
        values[i] = scaled ? u[i] / m->image.u16_scale + m->image.u16_offset
                           : (float)u[i];
    /* Depth 65535 is "no plane" (PROTOCOL.md 3.7): NaN keeps it out of
     * the preview's value range. */
    for (size_t i = 0; !scaled && i < n; i++)
        if (u[i] == 65535 && strcmp(m->topic, RTOMO_TOPIC_DEPTH) == 0)
            values[i] = NAN;
    return values;
}

static int write_file(const char *path, const void *data, size_t size)
{
    FILE *f = fopen(path, "wb");
    if (!f) {
        fprintf(stderr, "%s: cannot write %s: %s\n", program, path,
                strerror(errno));
        return -1;
    }
    size_t written = size ? fwrite(data, 1, size, f) : 0;
    int failed = fclose(f) != 0 || written != size;
    if (failed)
        fprintf(stderr, "%s: cannot write %s: %s\n", program, path,
                strerror(errno));
    return failed ? -1 : 0;
}

static int save_image(const sub_options *o, const rtomo_published *m)
{
    char base[1024], path[1100], frame[32] = "", which[32];
    const rtomo_image_header *h = &m->image;
    if (h->frame >= 0)
        snprintf(frame, sizeof frame, "_f%lld", (long long)h->frame);
    /* An iterate of an iterative method keeps its own file: rROW_iK. */
    if (h->slice >= 0 && h->iteration > 0)
        snprintf(which, sizeof which, "r%d_i%d", h->slice, h->iteration);
    else if (h->slice >= 0)
        snprintf(which, sizeof which, "r%d", h->slice);
    else if (h->plane >= 0)
        snprintf(which, sizeof which, "p%d", h->plane);
    else
        snprintf(which, sizeof which, "%d", h->index);
    snprintf(base, sizeof base, "%s/%s_%s%s_%s", o->output, h->scan, m->topic,
             frame, which);
    /* The scan id comes from the network: keep it a plain file name. */
    for (char *p = base + strlen(o->output) + 1; *p; p++)
        if (!strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                    "0123456789_.:-", *p) || (*p == '.' && p[1] == '.'))
            *p = '_';
    snprintf(path, sizeof path, "%s.raw", base);
    if (write_file(path, m->payload, m->payload_size) != 0)
        return -1;
    snprintf(path, sizeof path, "%s.json", base);
    if (write_file(path, m->header, m->header_size) != 0)
        return -1;
    if (!o->png)
        return 0;
    float *values = preview_values(m);
    if (!values) {
        fprintf(stderr, "%s: out of memory\n", program);
        return -1;
    }
    rtomo_error err;
    snprintf(path, sizeof path, "%s.png", base);
    rtomo_status st = rtomo_image_write_png(path, values, h->width, h->height,
                                            0.0, 0.0, &err);
    free(values);
    if (st != RTOMO_OK)
        fprintf(stderr, "%s: %s\n", program, err.message);
    return st == RTOMO_OK ? 0 : -1;
}

/* ---------------------------------------------------------- printing ---- */

static double number(const json_t *obj, const char *path)
{
    const json_t *v = obj;
    char key[64];
    while (v && *path) {
        size_t n = strcspn(path, ".");
        snprintf(key, sizeof key, "%.*s", (int)n, path);
        v = json_object_get(v, key);
        path += n + (path[n] == '.');
    }
    return json_is_number(v) ? json_number_value(v) : 0.0;
}

static void print_telemetry(const json_t *t)
{
    const char *state = json_string_value(json_object_get(t, "state"));
    const char *scan = json_string_value(json_object_get(t, "scan"));
    printf("telemetry %-14s scan %-16s in %8.1f frames/s %8.1f MB/s | "
           "%8.2f GU/s latency %7.1f ms | queues %g/%g | accepted %g "
           "rejected %g dropped %g pub_dropped %g\n",
           state ? state : "?", scan ? scan : "-",
           number(t, "ingest.frames_per_s"), number(t, "ingest.mb_per_s"),
           number(t, "reconstruction.gu_per_s"),
           number(t, "reconstruction.last_latency_ms"),
           number(t, "queues.work"), number(t, "queues.publish"),
           number(t, "counters.accepted"), number(t, "counters.rejected"),
           number(t, "counters.dropped"), number(t, "counters.pub_dropped"));
}

static void print_message(const rtomo_published *m)
{
    const rtomo_image_header *h = &m->image;
    const rtomo_event *e = &m->event;
    switch (m->kind) {
    case RTOMO_PUBLISHED_IMAGE: {
        char which[96] = "";
        if (h->slice >= 0 && h->iteration > 0)
            snprintf(which, sizeof which, " slice %d %s iteration %d%s "
                     "residual %.4g", h->slice, h->method, h->iteration,
                     h->final ? " (final)" : "", h->residual);
        else if (h->slice >= 0)
            snprintf(which, sizeof which, " slice %d", h->slice);
        else if (h->plane >= 0)
            snprintf(which, sizeof which, " plane %d (n = %g)", h->plane,
                     h->ratio);
        printf("%-9s %s %d/%d%s %dx%d %s min %.6g max %.6g mean %.6g "
               "latency %.1f ms\n", m->topic, h->scan, h->index + 1, h->count,
               which, h->width, h->height, rtomo_dtype_name(h->dtype), h->min,
               h->max, h->mean, h->latency_ms);
        break;
    }
    case RTOMO_PUBLISHED_EVENT:
        printf("event     %-20s scan %s index %lld%s%s: %s\n", e->event,
               e->scan[0] ? e->scan : "-", (long long)e->index,
               e->reason[0] ? " reason " : "", e->reason, e->message);
        break;
    case RTOMO_PUBLISHED_TELEMETRY:
        print_telemetry(m->json);
        break;
    default:
        printf("%-9s %s\n", m->topic, m->header);
    }
    fflush(stdout);
}

/* -------------------------------------------------------------- main ---- */

static int subscribe_all(rtomo_client *c, const sub_options *o)
{
    rtomo_error err;
    int n = o->n_topics ? o->n_topics : 1;
    for (int i = 0; i < n; i++)
        if (rtomo_client_subscribe(c, o->n_topics ? o->topics[i] : "",
                                   &err) != RTOMO_OK) {
            fprintf(stderr, "%s: %s\n", program, err.message);
            return -1;
        }
    return 0;
}

/* Receive until count, timeout or Ctrl-C; returns the exit status. */
static int receive_loop(rtomo_client *c, const sub_options *o)
{
    rtomo_published m = {0};
    long received = 0, images = 0, failures = 0;
    double last = tool_now();
    int status = TOOL_OK;
    while (!tool_interrupted && (o->count == 0 || received < o->count)) {
        rtomo_error err;
        rtomo_status st = rtomo_client_receive(c, &m, 200, &err);
        if (st == RTOMO_E_UNAVAILABLE) {
            if (o->timeout_s > 0 && tool_now() - last > o->timeout_s)
                break;
            continue;
        }
        last = tool_now();
        received++;
        if (st != RTOMO_OK) {
            fprintf(stderr, "%s: %s\n", program, err.message);
            failures++;
            continue;
        }
        if (m.missed)
            printf("lost      %llu %s message%s from publisher %d before "
                   "seq %llu\n", (unsigned long long)m.missed, m.topic,
                   m.missed == 1 ? "" : "s", m.source,
                   (unsigned long long)m.seq);
        if (!o->quiet)
            print_message(&m);
        if (m.kind == RTOMO_PUBLISHED_IMAGE) {
            images++;
            if (o->output && save_image(o, &m) != 0)
                failures++;
        }
    }
    rtomo_published_clear(&m);
    if (failures || (o->count && received < o->count))
        status = TOOL_FAILED;
    fprintf(stderr, "%s: %ld messages (%ld images), %ld failed, %llu lost "
            "(sequence gaps)%s\n", program, received, images, failures,
            (unsigned long long)rtomo_client_missed(c),
            o->count && received < o->count ? ", count not reached" : "");
    return status;
}

int main(int argc, char **argv)
{
    sub_options o = {.png = 1};
    rtomo_client_options_init(&o.client);
    o.client.publish = "tcp://localhost:5556";
    o.client.receive_hwm = 10000;
    int st = parse_args(argc, argv, &o);
    if (st != TOOL_OK)
        return st;
    if (o.output && mkdir(o.output, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "%s: cannot create %s: %s\n", program, o.output,
                strerror(errno));
        return TOOL_FAILED;
    }
    rtomo_error err;
    rtomo_client *c = rtomo_client_open(&o.client, &err);
    if (!c)
        return tool_report_error(program, &err);
    tool_catch_signals();
    st = subscribe_all(c, &o) == 0 ? receive_loop(c, &o) : TOOL_FAILED;
    rtomo_client_close(c);
    return st;
}
