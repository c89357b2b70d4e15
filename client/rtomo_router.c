/*
 * rtomo_router.c — rtomo-router: receives a camera's stream once and sends
 * each of several rtomod daemons only the detector rows it reconstructs
 * (issue 16, docs/rtomod.md "Several daemons").  Fanning every full frame
 * out to every daemon costs the sender and the network N times the
 * stream; cut into rows, the stream crosses the network about once.
 *
 * What is cut and how (router_route.h): darks, flats and projections go
 * to each daemon as its rows (plus --margin) with "rows" in the header
 * (PROTOCOL.md 3.4); SBDX frames are dealt to one daemon each, in turn
 * (router_sbdx.h); everything else, and whatever the router cannot read,
 * goes whole to every daemon, so that each daemon judges it as usual.
 * Payloads are never copied: each daemon's part points into the received
 * message, which lives until the last daemon's part has left.
 *
 * A second input (--stream2) takes a detector's DECTRIS Stream V2 and
 * feeds each daemon's Stream V2 input: images cut by rows
 * (router_stream2.h; the one copy the router makes, of each daemon's
 * share of the image, since a Stream V2 message is one CBOR item),
 * everything else whole.
 *
 * Daemons that go away: every PUSH socket has ZMQ_IMMEDIATE (nothing
 * queues for a daemon that is not connected) and a monitor that keeps the
 * daemon's state, per input of the daemon.  A connected daemon whose queue
 * is full is waited for (back-pressure: the slowest sets the pace, as with
 * fan-out); one that is not connected is skipped, and what it misses is
 * counted and logged, never dropped silently; its turns of SBDX frames go
 * to the others.  The control socket (status) and the monitors are served
 * in the same poll loop as the inputs, also while the router waits for a
 * daemon.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include <jansson.h>
#include <zmq.h>

#include "router_route.h"
#include "router_sbdx.h"
#include "router_stream2.h"
#include "rtomo_keys.h"
#include "tool_common.h"

static const char *program = "rtomo-router";

#define DEFAULT_INGEST "tcp://127.0.0.1:5550"
#define DEFAULT_CONTROL "tcp://127.0.0.1:5551"
/* How long one poll lasts at most: a signal is noticed at once (zmq_poll
 * returns EINTR), this only bounds the rare case where it is not. */
#define POLL_STEP_MS 100
/* On stop, how long frames still queued for connected daemons may take to
 * leave. */
#define LINGER_MS 2000
/* Scans per daemon whose losses were logged (each is logged once). */
#define GONE_SCANS 8

/* ZeroMQ before 4.3 has no handshake event: the TCP connect then stands in
 * for it. */
#ifndef ZMQ_EVENT_HANDSHAKE_SUCCEEDED
#define ZMQ_EVENT_HANDSHAKE_SUCCEEDED ZMQ_EVENT_CONNECTED
#endif

typedef enum daemon_state {
    NEVER_CONNECTED = 0,
    CONNECTED,
    DISCONNECTED
} daemon_state;

static const char *const state_names[] = {"never_connected", "connected",
                                          "disconnected"};

/* The inputs of a daemon the router feeds: its ingest socket (the native
 * stream) and its Stream V2 input (inputs.stream2.endpoint). */
enum { LINK_INGEST, LINK_STREAM2, LINKS };

/* "scan X", "series N": what a loss is logged by, once each. */
#define GONE_KEY 96

/* The router's connection to one input of a daemon. */
typedef struct router_link {
    const char *endpoint;       /* NULL: the daemon has no such input */
    void *push;
    void *monitor;              /* PAIR reading the PUSH socket's events */
    daemon_state state;
    uint64_t messages, bytes;   /* sent to it (all parts) */
    uint64_t lost_frames;       /* frames it missed, not connected */
    uint64_t lost_messages;     /* every message it missed, frames too */
    long long lost_since_ms;    /* Unix time (ms) of its first loss since it
                                   was last connected; 0 = none */
    char gone[GONE_SCANS][GONE_KEY];        /* losses logged */
    int gone_next;
} router_link;

typedef struct router_daemon {
    router_target target;
    router_link link[LINKS];
    uint64_t sbdx_frames;       /* SBDX frames dealt to it and sent */
    uint64_t rerouted_frames;   /* SBDX frames of its turns that went to
                                   another daemon */
} router_daemon;

typedef struct router_options {
    const char *ingest, *control;
    const char *stream2;        /* the Stream V2 input; NULL = none */
    router_target targets[ROUTER_MAX_DAEMONS];
    int n_targets;
    long margin;
    long io_threads;            /* ZeroMQ I/O threads; 0 = by the daemons */
    int help;
    /* CURVE towards the daemons: key files, then the keys (Z85). */
    const char *server_key, *client_key;
    int curve;
    char server_z85[RTOMO_KEY_Z85_SIZE], public_z85[RTOMO_KEY_Z85_SIZE],
        secret_z85[RTOMO_KEY_Z85_SIZE];
} router_options;

/* A received message: its parts, in a buffer kept from one message to the
 * next. */
typedef struct message_parts {
    zmq_msg_t *msg;
    int n, cap;
} message_parts;

/* What came in on the Stream V2 input. */
typedef struct router_stream2_counts {
    uint64_t messages, bytes_in;
    uint64_t images;            /* image messages */
    uint64_t cut, whole;        /* cut by rows / passed on as they came */
} router_stream2_counts;

typedef struct router {
    const router_options *opt;
    void *context, *ingest, *control;
    void *stream2;              /* the Stream V2 input; NULL = none */
    router_stream2_counts s2;
    router_daemon daemons[ROUTER_MAX_DAEMONS];
    int n;
    message_parts in, out;      /* received; one daemon's copies */
    uint64_t messages, bytes_in;        /* received */
    uint64_t frames;            /* of them darks, flats, projections and
                                   SBDX frames */
    uint64_t split, whole;      /* cut into rows / passed on as they came */
    uint64_t dealt;             /* SBDX frames given to one daemon */
    uint64_t rerouted_frames;   /* ... not to the one whose turn it was */
    uint64_t lost_frames;       /* SBDX frames no daemon could take */
    router_sbdx sbdx;           /* the SBDX streams and whose turn it is */
    char lost_stream[RTOMO_ID_MAX];     /* the last one whose loss was
                                           logged */
} router;

static void usage(FILE *out)
{
    fprintf(out,
"Usage: rtomo-router [OPTION]...\n"
"Receive a camera's stream once and send each of several rtomod daemons only\n"
"the detector rows it reconstructs (docs/rtomod.md, \"Several daemons\").\n"
"\n"
"  -i, --ingest ENDPOINT    where the camera pushes: a bound PULL socket\n"
"                           (default " DEFAULT_INGEST ")\n"
"  -d, --daemon EP=FIRST:COUNT[,stream2=EP2]\n"
"                           a daemon's ingest endpoint and the detector rows\n"
"                           it reconstructs (its reconstruction.rows), and\n"
"                           with stream2= its Stream V2 input (its\n"
"                           inputs.stream2.endpoint, bound: the router\n"
"                           connects); once per daemon, 1 to 64 daemons\n"
"  -s, --stream2 ENDPOINT   a second input, for a detector's DECTRIS Stream V2:\n"
"                           a bound PULL socket, or after a leading '>' one\n"
"                           that connects to a detector that binds (a DCU)\n"
"  -m, --margin N           rows more on either side of each daemon's rows,\n"
"                           for filters that reach across rows (phase\n"
"                           retrieval); clipped to the detector (default 0)\n"
"  -c, --control ENDPOINT   a bound REP socket answering {\"cmd\": \"status\"}\n"
"                           (default " DEFAULT_CONTROL ")\n"
"  -t, --io-threads N       ZeroMQ I/O threads, 1 to 64 (default: 4 for the\n"
"                           inputs and one per daemon, at most 16); one\n"
"                           thread moves about 1 GB/s\n"
"      --server-key FILE    CURVE towards the daemons: their public key\n"
"                           (NAME.key; the daemons of one router share a\n"
"                           key pair)\n"
"      --client-key FILE    CURVE: the router's key pair (NAME.key_secret,\n"
"                           rtomo-keygen), listed in each daemon's\n"
"                           security.client_keys\n"
"  -h, --help               show this help\n"
"\n"
"Darks, flats and projections reach each daemon as its rows (with the\n"
"margin), the header saying which (\"rows\", PROTOCOL.md 3.4); a daemon whose\n"
"rows cover the whole detector, or lie outside it, gets the whole frame.\n"
"With CURVE a daemon that refuses the router's key never completes the\n"
"handshake: it stays never_connected in the status, and what it misses is\n"
"counted as lost.  The ingest and control sockets are plain ZeroMQ: bind\n"
"them to a trusted network (the detector's) or to loopback.\n"
"\n"
"Begins and ends go to every daemon.  SBDX frames are dealt: each goes whole\n"
"to one daemon, in turn (the FIRST:COUNT rows do not matter), and each\n"
"daemon publishes the planes and composite of the frames it got (their\n"
"\"frame\" is the stream's index).  What the router cannot read or cut (not\n"
"JSON, an unknown type, a payload that does not match its shape) goes whole\n"
"to every daemon, which rejects it with its usual reason.\n"
"\n"
"Stream V2 (--stream2): start, end and every other message go whole to each\n"
"daemon's Stream V2 input; each image goes as the daemon's rows (with the\n"
"margin), marked by \"rtomo_rows\" (PROTOCOL.md 10.5): uncompressed images cut\n"
"to those rows, bitshuffle-LZ4 images to the whole compressed blocks that hold\n"
"them (walking the block sizes only: never decompressed).  An image the\n"
"router cannot read completely goes whole.  Arm every daemon with the same\n"
"scan (\"arm\", PROTOCOL.md 10.2) before the detector starts.\n"
"\n"
"The slowest daemon sets the pace: while a connected daemon's queue is full\n"
"the router waits, and so does the camera.  A daemon that is not connected\n"
"gets nothing: what it misses is counted (status: lost_frames) and logged\n"
"once per scan.  Its rows cannot go to another daemon instead (the others'\n"
"plans do not hold them), so its slices of that scan are lost.  Once it is\n"
"back it gets the messages that follow; a scan whose begin it missed, it\n"
"rejects.  SBDX frames are rerouted instead: a turn of a daemon that is not\n"
"connected, or was not sent the stream's sbdx_begin (it was away, or its\n"
"connection broke since: it may have restarted), goes to the next daemon\n"
"that can take the frame, counted (rerouted_frames) and logged once per\n"
"stream; a frame is lost only when no daemon can take it.  A connected\n"
"daemon whose queue is full is waited for, not passed over.  Frames already\n"
"queued for a daemon when its connection breaks may be lost without being\n"
"counted.\n"
"\n"
"Status (--control): messages and bytes_in received; frames among them\n"
"(darks, flats, projections, SBDX frames); split (cut into rows), dealt (SBDX\n"
"frames given to one daemon) and whole (passed on as they came to every\n"
"daemon); rerouted_frames (SBDX frames that went to another daemon than the\n"
"one whose turn it was); lost_frames (SBDX frames no daemon could take);\n"
"forwarded (sent, summed over the daemons); per daemon its endpoint, rows,\n"
"state (connected, disconnected or never_connected), messages and bytes\n"
"sent, sbdx_frames (SBDX frames dealt to it), rerouted_frames (its turns\n"
"that went to another daemon), lost_frames and lost_messages (frames, and\n"
"every message, it missed while not connected), lost_since_ms (Unix time\n"
"of its first loss since it was last connected, or null), stream2 (its\n"
"Stream V2 input, or null: endpoint, state, messages, bytes, lost_frames\n"
"(images), lost_messages, lost_since_ms).  With --stream2, stream2:\n"
"endpoint, messages and bytes_in received, images among them, cut (into\n"
"rows) and whole (passed on as they came), forwarded (sent, summed over the\n"
"daemons); null without.\n"
"\n"
"Exit status: 0 stopped by SIGINT or SIGTERM, 1 failure (a socket could not\n"
"be bound or connected, out of memory), 2 bad usage.\n");
}

/* ----------------------------------------------------------- options ---- */

static int apply_option(int c, const char *arg, router_options *o)
{
    char why[512];
    switch (c) {
    case 'i': o->ingest = arg; return 0;
    case 'c': o->control = arg; return 0;
    case 's': o->stream2 = arg; return 0;
    case 'm':
        return tool_parse_int(program, "--margin", arg, 0, 65536, &o->margin);
    case 't':
        return tool_parse_int(program, "--io-threads", arg, 1, 64,
                              &o->io_threads);
    case TOOL_OPT_SERVER_KEY: o->server_key = arg; return 0;
    case TOOL_OPT_CLIENT_KEY: o->client_key = arg; return 0;
    case 'd':
        if (o->n_targets == ROUTER_MAX_DAEMONS)
            return tool_option_error(program, "--daemon: at most %d daemons",
                                     ROUTER_MAX_DAEMONS);
        if (router_parse_target(arg, &o->targets[o->n_targets], why,
                                sizeof why) != 0)
            return tool_option_error(program, "--daemon: %s", why);
        o->n_targets++;
        return 0;
    default:
        return tool_option_error(program, "bad option");
    }
}

/* Daemons whose Stream V2 input was given. */
static int stream2_targets(const router_options *o)
{
    int n = 0;
    for (int i = 0; i < o->n_targets; i++)
        n += o->targets[i].stream2[0] != '\0';
    return n;
}

/* The CURVE keys named by --server-key and --client-key (both or
 * neither). */
static int read_keys(router_options *o)
{
    if (!o->server_key && !o->client_key)
        return TOOL_OK;
    if (!o->server_key || !o->client_key)
        return tool_usage_error(program, "CURVE needs both --server-key and "
                                "--client-key");
    if (!rtomo_keys_curve_available())
        return tool_usage_error(program, "this libzmq was built without "
                                "CURVE: --server-key cannot be used");
    rtomo_error err;
    if (rtomo_keys_read(o->server_key, "--server-key", o->server_z85, NULL,
                        &err) != RTOMO_OK ||
        rtomo_keys_read(o->client_key, "--client-key", o->public_z85,
                        o->secret_z85, &err) != RTOMO_OK)
        return tool_report_error(program, &err);
    o->curve = 1;
    return TOOL_OK;
}

static int parse_args(int argc, char **argv, router_options *o)
{
    static const struct option options[] = {
        {"ingest", required_argument, NULL, 'i'},
        {"daemon", required_argument, NULL, 'd'},
        {"margin", required_argument, NULL, 'm'},
        {"control", required_argument, NULL, 'c'},
        {"stream2", required_argument, NULL, 's'},
        {"io-threads", required_argument, NULL, 't'},
        {"help", no_argument, NULL, 'h'},
        TOOL_CURVE_OPTIONS,
        {NULL, 0, NULL, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "i:d:m:c:s:t:h", options, NULL)) !=
           -1) {
        if (c == 'h') {
            o->help = 1;
            return TOOL_OK;
        }
        if (c == '?')
            return tool_usage_error(program, "bad option");
        if (apply_option(c, optarg, o) != 0)
            return TOOL_USAGE;
    }
    if (optind < argc)
        return tool_usage_error(program, "unexpected argument '%s'",
                                argv[optind]);
    if (o->n_targets == 0)
        return tool_usage_error(program, "no daemon: give --daemon "
                                "EP=FIRST:COUNT for each");
    if (o->stream2 && !stream2_targets(o))
        return tool_usage_error(program, "--stream2 without a daemon's "
                                "Stream V2 input: give --daemon "
                                "EP=FIRST:COUNT,stream2=EP2");
    if (!o->stream2 && stream2_targets(o))
        return tool_usage_error(program, "a --daemon names a Stream V2 "
                                "input (stream2=), but the router has none: "
                                "give --stream2 ENDPOINT");
    return read_keys(o);
}

/* ----------------------------------------------------------- helpers ---- */

static int zmq_failed(const char *what)
{
    fprintf(stderr, "%s: %s: %s\n", program, what, zmq_strerror(zmq_errno()));
    return -1;
}

static long long unix_ms(void)
{
    struct timeval t;
    gettimeofday(&t, NULL);
    return (long long)t.tv_sec * 1000 + t.tv_usec / 1000;
}

/* Room for at least n parts. */
static int parts_reserve(message_parts *p, int n)
{
    if (n <= p->cap)
        return 0;
    int cap = p->cap ? p->cap : 4;
    while (cap < n)
        cap *= 2;
    zmq_msg_t *grown = realloc(p->msg, sizeof *grown * (size_t)cap);
    if (!grown) {
        fprintf(stderr, "%s: out of memory for a message of %d parts\n",
                program, n);
        return -1;
    }
    p->msg = grown;
    p->cap = cap;
    return 0;
}

static void parts_close(message_parts *p)
{
    for (int i = 0; i < p->n; i++)
        zmq_msg_close(&p->msg[i]);
    p->n = 0;
}

/* ZeroMQ's free function for a header made by json_dumps. */
static void free_text(void *data, void *hint)
{
    (void)hint;
    free(data);
}

/* The received payload, shared by the parts that point into it: each
 * holds a reference, and the last one to go (in whichever ZeroMQ thread
 * sends it) closes the message. */
typedef struct payload_hold {
    zmq_msg_t msg;
    atomic_int refs;
} payload_hold;

static void release_hold(void *data, void *hint)
{
    (void)data;
    payload_hold *h = hint;
    if (atomic_fetch_sub(&h->refs, 1) == 1) {
        zmq_msg_close(&h->msg);
        free(h);
    }
}

/* ------------------------------------------------ daemons' connections ---- */

static const char *const link_names[LINKS] = {"ingest", "Stream V2 input"};

static void log_link(const router_daemon *d, int input, const char *what)
{
    const router_rows *rows = &d->target.rows;
    char via[300] = "";
    if (input == LINK_STREAM2)
        snprintf(via, sizeof via, ", %s %s,", link_names[input],
                 d->target.stream2);
    fprintf(stderr, "%s: daemon %s (rows %ld..%ld)%s %s\n", program,
            d->target.endpoint, rows->first, rows->first + rows->count - 1,
            via, what);
}

/* A daemon counts as connected once the ZeroMQ handshake succeeded, not
 * at the TCP connect: with ZMQ_IMMEDIATE nothing can be sent before it,
 * and a peer that never completes it (a CURVE daemon, another service on
 * the port) must not hold the stream up. */
static void note_event(router *r, int k, int input, unsigned event)
{
    router_daemon *d = &r->daemons[k];
    router_link *l = &d->link[input];
    if (event == ZMQ_EVENT_HANDSHAKE_SUCCEEDED && l->state != CONNECTED) {
        log_link(d, input, l->state == NEVER_CONNECTED
                               ? "connected"
                               : "is back: sending resumes");
        l->state = CONNECTED;
        l->lost_since_ms = 0;
    } else if (event == ZMQ_EVENT_DISCONNECTED && l->state == CONNECTED) {
        log_link(d, input, "disconnected: it gets nothing until it is back");
        l->state = DISCONNECTED;
        if (input == LINK_INGEST)
            router_sbdx_forget(&r->sbdx, k);
    }
}

/* Read every event the monitor of daemon k's input holds (two parts
 * each: the event number and value, then the peer's address). */
static void read_monitor(router *r, int k, int input)
{
    router_link *l = &r->daemons[k].link[input];
    for (;;) {
        zmq_msg_t part;
        zmq_msg_init(&part);
        if (zmq_msg_recv(&part, l->monitor, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&part);
            return;
        }
        uint16_t event = 0;
        if (zmq_msg_size(&part) >= sizeof event)
            memcpy(&event, zmq_msg_data(&part), sizeof event);
        int more = zmq_msg_more(&part);
        /* The parts of one event come together: the rest never waits. */
        while (more && zmq_msg_recv(&part, l->monitor, ZMQ_DONTWAIT) >= 0)
            more = zmq_msg_more(&part);
        zmq_msg_close(&part);
        note_event(r, k, input, event);
    }
}

/* What a daemon misses of a message: whether it is a frame, what its
 * loss is logged by (once), and what becomes of the daemon's share. */
typedef struct router_loss {
    int is_frame;
    char key[GONE_KEY];         /* "scan X", "series N" */
    char fate[160];             /* "its rows of scan X are lost" */
} router_loss;

/* Say once per key what becomes of the share of a daemon's input that
 * cannot take it. */
static void log_gone(router_daemon *d, int input, const router_loss *loss)
{
    router_link *l = &d->link[input];
    for (int i = 0; i < GONE_SCANS; i++)
        if (strcmp(l->gone[i], loss->key) == 0 && l->gone[i][0])
            return;
    snprintf(l->gone[l->gone_next], GONE_KEY, "%s", loss->key);
    l->gone_next = (l->gone_next + 1) % GONE_SCANS;
    const char *away = l->state == NEVER_CONNECTED
                           ? "is not there (never connected)"
                       : l->state == DISCONNECTED
                           ? "is gone"
                           : "was not sent the stream's begin";
    char what[300];
    snprintf(what, sizeof what, "%s: %s", away, loss->fate);
    log_link(d, input, what);
}

/* Count what a daemon's input misses, and say so once per key. */
static void lose(router_daemon *d, int input, const router_loss *loss)
{
    router_link *l = &d->link[input];
    l->lost_messages++;
    l->lost_frames += loss->is_frame != 0;
    if (!l->lost_since_ms)
        l->lost_since_ms = unix_ms();
    log_gone(d, input, loss);
}

static int is_sbdx(const router_message *m)
{
    return m->type == RTOMO_MSG_SBDX_BEGIN || m->type == RTOMO_MSG_SBDX_END ||
           m->type == RTOMO_MSG_SBDX_FRAME;
}

/* What a daemon that misses native message m loses. */
static void native_loss(const router_message *m, router_loss *loss)
{
    const char *scan = m->scan[0] ? m->scan : "(none named)";
    loss->is_frame = m->is_frame;
    snprintf(loss->key, sizeof loss->key, "scan %s", scan);
    if (is_sbdx(m))
        snprintf(loss->fate, sizeof loss->fate, "its SBDX frames of stream "
                 "%s go to the other daemons", scan);
    else
        snprintf(loss->fate, sizeof loss->fate, "its rows of scan %s are "
                 "lost", scan);
}

/* What a daemon that misses a Stream V2 message of `series` loses. */
static void stream2_loss(int is_image, uint64_t series, router_loss *loss)
{
    loss->is_frame = is_image;
    snprintf(loss->key, sizeof loss->key, "series %llu",
             (unsigned long long)series);
    snprintf(loss->fate, sizeof loss->fate, "its rows of Stream V2 series "
             "%llu are lost", (unsigned long long)series);
}

/* ------------------------------------------------------------ control ---- */

static json_t *bad_request(const char *format, ...)
    __attribute__((format(printf, 1, 2)));

static json_t *bad_request(const char *format, ...)
{
    char message[512];
    va_list ap;
    va_start(ap, format);
    vsnprintf(message, sizeof message, format, ap);
    va_end(ap);
    return json_pack("{s:b, s:s, s:s}", "ok", 0, "error", "bad_request",
                     "message", message);
}

static json_t *since_json(const router_link *l)
{
    return l->lost_since_ms ? json_integer(l->lost_since_ms) : json_null();
}

/* Daemon d's Stream V2 input, or null when it has none. */
static json_t *stream2_link_json(const router_daemon *d)
{
    const router_link *l = &d->link[LINK_STREAM2];
    if (!l->endpoint)
        return json_null();
    return json_pack("{s:s, s:s, s:I, s:I, s:I, s:I, s:o}",
                     "endpoint", l->endpoint, "state", state_names[l->state],
                     "messages", (json_int_t)l->messages,
                     "bytes", (json_int_t)l->bytes,
                     "lost_frames", (json_int_t)l->lost_frames,
                     "lost_messages", (json_int_t)l->lost_messages,
                     "lost_since_ms", since_json(l));
}

static json_t *daemon_json(const router_daemon *d)
{
    const router_link *l = &d->link[LINK_INGEST];
    return json_pack("{s:s, s:{s:I, s:I}, s:s, s:I, s:I, s:I, s:I, s:I, s:I,"
                     " s:o, s:o}",
                     "endpoint", d->target.endpoint, "rows",
                     "first", (json_int_t)d->target.rows.first,
                     "count", (json_int_t)d->target.rows.count,
                     "state", state_names[l->state],
                     "messages", (json_int_t)l->messages,
                     "bytes", (json_int_t)l->bytes,
                     "sbdx_frames", (json_int_t)d->sbdx_frames,
                     "rerouted_frames", (json_int_t)d->rerouted_frames,
                     "lost_frames", (json_int_t)l->lost_frames,
                     "lost_messages", (json_int_t)l->lost_messages,
                     "lost_since_ms", since_json(l),
                     "stream2", stream2_link_json(d));
}

/* Messages sent to the daemons' inputs of one kind, summed. */
static uint64_t forwarded(const router *r, int input)
{
    uint64_t n = 0;
    for (int k = 0; k < r->n; k++)
        n += r->daemons[k].link[input].messages;
    return n;
}

/* What came in on the Stream V2 input, or null when there is none. */
static json_t *stream2_json(const router *r)
{
    if (!r->stream2)
        return json_null();
    const router_stream2_counts *c = &r->s2;
    return json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:I}",
                     "endpoint", r->opt->stream2,
                     "messages", (json_int_t)c->messages,
                     "bytes_in", (json_int_t)c->bytes_in,
                     "images", (json_int_t)c->images,
                     "cut", (json_int_t)c->cut, "whole", (json_int_t)c->whole,
                     "forwarded", (json_int_t)forwarded(r, LINK_STREAM2));
}

static json_t *status_json(const router *r)
{
    json_t *daemons = json_array();
    for (int i = 0; daemons && i < r->n; i++)
        if (json_array_append_new(daemons, daemon_json(&r->daemons[i])) != 0) {
            json_decref(daemons);
            daemons = NULL;
        }
    if (!daemons)
        return NULL;
    return json_pack("{s:b, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, "
                     "s:I, s:o, s:o}",
                     "ok", 1, "messages", (json_int_t)r->messages,
                     "bytes_in", (json_int_t)r->bytes_in,
                     "frames", (json_int_t)r->frames,
                     "split", (json_int_t)r->split,
                     "dealt", (json_int_t)r->dealt,
                     "whole", (json_int_t)r->whole,
                     "rerouted_frames", (json_int_t)r->rerouted_frames,
                     "lost_frames", (json_int_t)r->lost_frames,
                     "forwarded", (json_int_t)forwarded(r, LINK_INGEST),
                     "margin", (json_int_t)r->opt->margin,
                     "stream2", stream2_json(r), "daemons", daemons);
}

/* The reply to one request of `parts` parts, the first `request`. */
static json_t *control_reply(const router *r, const zmq_msg_t *request,
                             int parts)
{
    if (parts != 1)
        return bad_request("a request is one part (a JSON object), not %d",
                           parts);
    json_error_t e;
    json_t *req = json_loadb(zmq_msg_data((zmq_msg_t *)request),
                             zmq_msg_size((zmq_msg_t *)request),
                             JSON_REJECT_DUPLICATES, &e);
    json_t *reply;
    const char *cmd = json_string_value(json_object_get(req, "cmd"));
    if (!req)
        reply = bad_request("the request is not JSON: %s", e.text);
    else if (!json_is_object(req))
        reply = bad_request("the request is not a JSON object");
    else if (!cmd)
        reply = bad_request("the request has no \"cmd\" string");
    else if (strcmp(cmd, "status") != 0)
        reply = bad_request("unknown command \"%.64s\": the router answers "
                            "only \"status\"", cmd);
    else
        reply = status_json(r);
    json_decref(req);
    return reply;
}

/* Receive one message (all its parts) from `socket` into p; 1 when there
 * is none.  The parts of a message arrive together: only the first may be
 * missing; a signal may still interrupt any. */
static int receive_parts(void *socket, message_parts *p, const char *what)
{
    int more = 1;
    while (more) {
        if (parts_reserve(p, p->n + 1) != 0)
            return -1;
        zmq_msg_t *part = &p->msg[p->n];
        zmq_msg_init(part);
        int got;
        while ((got = zmq_msg_recv(part, socket, ZMQ_DONTWAIT)) < 0 &&
               zmq_errno() == EINTR && p->n > 0)
            ;
        if (got < 0) {
            zmq_msg_close(part);
            if (p->n == 0 && (zmq_errno() == EAGAIN || zmq_errno() == EINTR))
                return 1;
            return zmq_failed(what);
        }
        p->n++;
        more = zmq_msg_more(part);
    }
    return 0;
}

/* Answer every request the control socket holds. */
static int serve_control(router *r)
{
    message_parts request = {0};
    int rc;
    while ((rc = receive_parts(r->control, &request,
                               "control receive")) == 0) {
        json_t *reply = control_reply(r, &request.msg[0], request.n);
        char *text = reply ? json_dumps(reply, JSON_COMPACT) : NULL;
        static const char no_memory[] = "{\"ok\":false,\"error\":\"internal\","
                                        "\"message\":\"out of memory\"}";
        const char *out = text ? text : no_memory;
        /* REP must answer before it can receive again. */
        if (zmq_send(r->control, out, strlen(out), 0) < 0)
            rc = zmq_failed("control reply");
        free(text);
        json_decref(reply);
        parts_close(&request);
        if (rc != 0)
            break;
    }
    parts_close(&request);
    free(request.msg);
    return rc < 0 ? -1 : 0;
}

/* --------------------------------------------------------------- poll ---- */

/* Poll the control socket, every monitor and the n_extra items in
 * `extra` for up to ms; serve the monitors and the control socket (the
 * extra items' revents are the caller's).  0, also when interrupted by a
 * signal (revents 0), or -1 on a failure. */
static int poll_and_serve(router *r, zmq_pollitem_t *extra, int n_extra,
                          long ms)
{
    zmq_pollitem_t items[1 + LINKS * ROUTER_MAX_DAEMONS + 2];
    int owner[LINKS * ROUTER_MAX_DAEMONS], n = 0, n_monitors = 0;
    items[n++] = (zmq_pollitem_t){r->control, 0, ZMQ_POLLIN, 0};
    for (int i = 0; i < r->n * LINKS; i++)
        if (r->daemons[i / LINKS].link[i % LINKS].monitor) {
            owner[n_monitors++] = i;
            items[n++] = (zmq_pollitem_t){
                r->daemons[i / LINKS].link[i % LINKS].monitor, 0,
                ZMQ_POLLIN, 0};
        }
    for (int i = 0; i < n_extra; i++)
        items[n++] = extra[i];
    if (zmq_poll(items, n, ms) < 0)
        return zmq_errno() == EINTR ? 0 : zmq_failed("poll");
    /* Monitors first, so that status tells the latest state. */
    for (int i = 0; i < n_monitors; i++)
        if (items[1 + i].revents & ZMQ_POLLIN)
            read_monitor(r, owner[i] / LINKS, owner[i] % LINKS);
    for (int i = 0; i < n_extra; i++)
        extra[i].revents = items[1 + n_monitors + i].revents;
    if ((items[0].revents & ZMQ_POLLIN) && serve_control(r) != 0)
        return -1;
    return 0;
}

/* ------------------------------------------------------------ sending ---- */

/* Send the first part to l, waiting while l is connected and its queue is
 * full (back-pressure).  0 sent; 1 l is not connected (nothing sent); -1
 * failed or interrupted. */
static int send_first(router *r, router_link *l, zmq_msg_t *part, int more)
{
    const int flags = ZMQ_DONTWAIT | (more ? ZMQ_SNDMORE : 0);
    for (;;) {
        if (l->state != CONNECTED)
            return 1;
        if (zmq_msg_send(part, l->push, flags) >= 0)
            return 0;
        if (zmq_errno() != EAGAIN && zmq_errno() != EINTR)
            return zmq_failed("send to a daemon");
        if (tool_interrupted)
            return -1;
        zmq_pollitem_t room = {l->push, 0, ZMQ_POLLOUT, 0};
        if (poll_and_serve(r, &room, 1, POLL_STEP_MS) < 0)
            return -1;
    }
}

/* Send the parts in p to l; consumes them.  0 sent (and counted); 1 l is
 * not connected (nothing sent); -1 sending failed or was interrupted. */
static int send_parts(router *r, router_link *l, message_parts *p)
{
    size_t bytes = 0;
    for (int i = 0; i < p->n; i++)
        bytes += zmq_msg_size(&p->msg[i]);
    int rc = send_first(r, l, &p->msg[0], p->n > 1);
    /* Once the first part is in, ZeroMQ takes the others of the message
     * without waiting. */
    for (int i = 1; rc == 0 && i < p->n; i++)
        if (zmq_msg_send(&p->msg[i], l->push, i + 1 < p->n ? ZMQ_SNDMORE
                                                           : 0) < 0)
            rc = zmq_failed("send to a daemon");
    parts_close(p);             /* a no-op for the parts sent */
    if (rc == 0) {
        l->messages++;
        l->bytes += bytes;
    }
    return rc;
}

/* Send the parts in p to daemon d's input, or count them lost when it is
 * not connected; consumes them.  0 sent, 1 lost, -1 sending failed or was
 * interrupted. */
static int deliver(router *r, router_daemon *d, int input, message_parts *p,
                   const router_loss *loss)
{
    int rc = send_parts(r, &d->link[input], p);
    if (rc == 1)
        lose(d, input, loss);
    return rc;
}

/* The received parts as they came into r->out (shared, not copied). */
static int copy_received(router *r)
{
    if (parts_reserve(&r->out, r->in.n) != 0)
        return -1;
    for (int i = 0; i < r->in.n; i++) {
        zmq_msg_init(&r->out.msg[i]);
        zmq_msg_copy(&r->out.msg[i], &r->in.msg[i]);
    }
    r->out.n = r->in.n;
    return 0;
}

/* Every daemon's input of this kind gets the received parts as they
 * came; *sent says which did. */
static int route_whole(router *r, int input, const router_loss *loss,
                       router_set *sent)
{
    *sent = 0;
    for (int k = 0; k < r->n; k++) {
        if (!r->daemons[k].link[input].endpoint)
            continue;
        if (copy_received(r) != 0)
            return -1;
        int rc = deliver(r, &r->daemons[k], input, &r->out, loss);
        if (rc < 0)
            return -1;
        if (rc == 0)
            *sent |= (router_set)1 << k;
    }
    return 0;
}

/* ------------------------------------------------------- SBDX frames ---- */

/* A begin or end of an SBDX stream went out: the dealing follows which
 * daemons have the stream. */
static void follow_sbdx(router *r, const router_message *m, router_set sent)
{
    if (m->type == RTOMO_MSG_SBDX_BEGIN)
        router_sbdx_begun(&r->sbdx, m->scan, sent);
    else if (m->type == RTOMO_MSG_SBDX_END)
        router_sbdx_ended(&r->sbdx, m->scan);
}

static router_set connected_daemons(const router *r)
{
    router_set set = 0;
    for (int k = 0; k < r->n; k++)
        if (r->daemons[k].link[LINK_INGEST].state == CONNECTED)
            set |= (router_set)1 << k;
    return set;
}

/* An SBDX frame no daemon can take: counted against the daemon whose turn
 * it was, and logged once per stream. */
static void lose_dealt(router *r, int turn, const router_message *m,
                       const router_loss *loss)
{
    r->lost_frames++;
    lose(&r->daemons[turn], LINK_INGEST, loss);
    if (strcmp(r->lost_stream, m->scan) == 0)
        return;
    snprintf(r->lost_stream, sizeof r->lost_stream, "%s", m->scan);
    fprintf(stderr, "%s: no daemon can take SBDX frames of stream %s (none "
            "is connected and was sent its begin): they are lost\n", program,
            m->scan[0] ? m->scan : "(none named)");
}

/* The frame went to another daemon although it was daemon turn's turn. */
static void note_rerouted(router *r, int turn, const router_loss *loss)
{
    router_daemon *d = &r->daemons[turn];
    r->rerouted_frames++;
    d->rerouted_frames++;
    log_gone(d, LINK_INGEST, loss);
}

/* One daemon gets the received SBDX frame as it came: the next in turn
 * that can take it (router_sbdx.h).  One that goes away while the router
 * waits for room in its queue passes the frame on to the next. */
static int route_deal(router *r, const router_message *m)
{
    router_loss loss;
    native_loss(m, &loss);
    int first_turn = -1;
    for (;;) {
        int turn, k = router_sbdx_deal(&r->sbdx, m->scan, r->n,
                                       connected_daemons(r), &turn);
        if (first_turn < 0)
            first_turn = turn;
        if (k < 0) {
            lose_dealt(r, first_turn, m, &loss);
            return 0;
        }
        if (copy_received(r) != 0)
            return -1;
        int rc = send_parts(r, &r->daemons[k].link[LINK_INGEST], &r->out);
        if (rc < 0)
            return -1;
        if (rc == 0) {
            r->daemons[k].sbdx_frames++;
            if (k != first_turn)
                note_rerouted(r, first_turn, &loss);
            return 0;
        }
        /* rc == 1: k is no longer connected, so it is not picked again. */
    }
}

/* -------------------------------------------------- frames into rows ---- */

/* Daemon d's parts of a split frame: its rows, with a header that says
 * which, or the whole frame when it needs every row (or none). */
static int split_parts(router *r, const router_daemon *d, router_message *m,
                       payload_hold *hold)
{
    zmq_msg_t *out = r->out.msg;
    router_rows rows;
    r->out.n = 0;
    if (!router_rows_needed(d->target.rows, r->opt->margin, m->height,
                            &rows)) {
        zmq_msg_init(&out[0]);
        zmq_msg_copy(&out[0], &r->in.msg[0]);
        zmq_msg_init(&out[1]);
        zmq_msg_copy(&out[1], &hold->msg);
        r->out.n = 2;
        return 0;
    }
    char *header = router_header_with_rows(m, rows);
    if (!header || zmq_msg_init_data(&out[0], header, strlen(header),
                                     free_text, NULL) != 0) {
        free(header);
        fprintf(stderr, "%s: out of memory for a header\n", program);
        return -1;
    }
    size_t offset, length;
    router_payload_range(m, rows, &offset, &length);
    unsigned char *data = zmq_msg_data(&hold->msg);
    atomic_fetch_add(&hold->refs, 1);
    if (zmq_msg_init_data(&out[1], data + offset, length, release_hold,
                          hold) != 0) {
        release_hold(NULL, hold);
        zmq_msg_close(&out[0]);
        return zmq_failed("wrapping a frame's rows");
    }
    r->out.n = 2;
    return 0;
}

/* Each daemon gets its rows of the frame.  The payload moves into a hold
 * that the parts share; the router's own reference goes at the end. */
static int route_split(router *r, router_message *m)
{
    payload_hold *hold = malloc(sizeof *hold);
    if (!hold || parts_reserve(&r->out, 2) != 0) {
        free(hold);
        fprintf(stderr, "%s: out of memory for a frame\n", program);
        return -1;
    }
    zmq_msg_init(&hold->msg);
    zmq_msg_move(&hold->msg, &r->in.msg[1]);
    atomic_init(&hold->refs, 1);
    router_loss loss;
    native_loss(m, &loss);
    int rc = 0;
    for (int k = 0; rc == 0 && k < r->n; k++) {
        rc = split_parts(r, &r->daemons[k], m, hold);
        if (rc == 0)
            rc = deliver(r, &r->daemons[k], LINK_INGEST, &r->out, &loss) < 0
                     ? -1 : 0;
    }
    release_hold(NULL, hold);
    return rc;
}

/* ---------------------------------------------------- Stream V2 images ---- */

/* Daemon d's Stream V2 message of a cut image: its rows
 * (router_stream2.h), or the image as it came when it needs every row
 * (or none). */
static int stream2_part(router *r, const router_daemon *d,
                        const router_s2_message *m)
{
    router_rows rows;
    r->out.n = 1;
    if (!router_rows_needed(d->target.rows, r->opt->margin, m->height,
                            &rows)) {
        zmq_msg_init(&r->out.msg[0]);
        zmq_msg_copy(&r->out.msg[0], &r->in.msg[0]);
        return 0;
    }
    size_t size;
    uint8_t *cut = router_s2_cut(m, rows, &size);
    if (!cut || zmq_msg_init_data(&r->out.msg[0], cut, size, free_text,
                                  NULL) != 0) {
        free(cut);
        r->out.n = 0;
        fprintf(stderr, "%s: out of memory for a Stream V2 image\n",
                program);
        return -1;
    }
    return 0;
}

/* Each daemon's Stream V2 input gets its rows of the image.  A daemon
 * that is not connected is counted lost before anything is cut for it. */
static int route_stream2_cut(router *r, const router_s2_message *m,
                             const router_loss *loss)
{
    if (parts_reserve(&r->out, 1) != 0)
        return -1;
    for (int k = 0; k < r->n; k++) {
        router_daemon *d = &r->daemons[k];
        if (!d->link[LINK_STREAM2].endpoint)
            continue;
        if (d->link[LINK_STREAM2].state != CONNECTED) {
            lose(d, LINK_STREAM2, loss);
            continue;
        }
        if (stream2_part(r, d, m) != 0 ||
            deliver(r, d, LINK_STREAM2, &r->out, loss) < 0)
            return -1;
    }
    return 0;
}

/* ------------------------------------------------------------ receive ---- */

/* Count a message received on an input. */
static void count_in(const message_parts *in, uint64_t *messages,
                     uint64_t *bytes)
{
    ++*messages;
    for (int i = 0; i < in->n; i++)
        *bytes += zmq_msg_size(&in->msg[i]);
}

/* Receive a native message and pass it on.  0, or -1 when the router must
 * stop. */
static int route_one(router *r)
{
    int rc = receive_parts(r->ingest, &r->in, "ingest receive");
    if (rc != 0)
        return rc < 0 ? -1 : 0;
    size_t payload = r->in.n > 1 ? zmq_msg_size(&r->in.msg[1]) : 0;
    router_message m;
    router_message_read(&m, zmq_msg_data(&r->in.msg[0]),
                        zmq_msg_size(&r->in.msg[0]), r->in.n, payload);
    count_in(&r->in, &r->messages, &r->bytes_in);
    r->frames += m.is_frame != 0;
    if (m.route == ROUTER_SPLIT) {
        r->split++;
        rc = route_split(r, &m);
    } else if (m.route == ROUTER_DEAL) {
        r->dealt++;
        rc = route_deal(r, &m);
    } else {
        r->whole++;
        router_loss loss;
        router_set sent;
        native_loss(&m, &loss);
        rc = route_whole(r, LINK_INGEST, &loss, &sent);
        if (rc == 0)
            follow_sbdx(r, &m, sent);
    }
    router_message_clear(&m);
    parts_close(&r->in);
    return rc;
}

/* Receive a Stream V2 message and pass it on: an image cut by rows,
 * anything else (and what cannot be read: a message of several parts,
 * not CBOR) whole, for each daemon to judge.  0, or -1 when the router
 * must stop. */
static int route_one_stream2(router *r)
{
    int rc = receive_parts(r->stream2, &r->in, "Stream V2 receive");
    if (rc != 0)
        return rc < 0 ? -1 : 0;
    count_in(&r->in, &r->s2.messages, &r->s2.bytes_in);
    router_s2_message m;
    memset(&m, 0, sizeof m);
    if (r->in.n == 1)
        router_s2_read(&m, zmq_msg_data(&r->in.msg[0]),
                       zmq_msg_size(&r->in.msg[0]));
    r->s2.images += m.is_image != 0;
    router_loss loss;
    stream2_loss(m.is_image, m.series_id, &loss);
    if (m.cut) {
        r->s2.cut++;
        rc = route_stream2_cut(r, &m, &loss);
    } else {
        r->s2.whole++;
        router_set sent;
        rc = route_whole(r, LINK_STREAM2, &loss, &sent);
    }
    router_s2_clear(&m);
    parts_close(&r->in);
    return rc;
}

/* One message from each input that has one, in turn, so that neither
 * starves the other. */
static int run(router *r)
{
    while (!tool_interrupted) {
        zmq_pollitem_t in[2] = {{r->ingest, 0, ZMQ_POLLIN, 0},
                                {r->stream2, 0, ZMQ_POLLIN, 0}};
        if (poll_and_serve(r, in, r->stream2 ? 2 : 1, POLL_STEP_MS) < 0)
            return -1;
        if ((in[0].revents & ZMQ_POLLIN) && route_one(r) != 0)
            return tool_interrupted ? 0 : -1;
        if ((in[1].revents & ZMQ_POLLIN) && route_one_stream2(r) != 0)
            return tool_interrupted ? 0 : -1;
    }
    return 0;
}

/* ---------------------------------------------------------- sockets ---- */

/* A socket bound to `endpoint`, or for an input (`may_connect`)
 * connected to what follows a leading '>' (a detector that binds, as a
 * DECTRIS DCU does). */
static void *input_socket(router *r, int type, const char *endpoint,
                          const char *role, int may_connect)
{
    void *s = zmq_socket(r->context, type);
    int linger = 0, connect = may_connect && endpoint[0] == '>';
    const char *at = endpoint + connect;
    if (!s || zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger) != 0 ||
        (connect ? zmq_connect(s, at) : zmq_bind(s, at)) != 0) {
        fprintf(stderr, "%s: cannot %s the %s socket to %s: %s\n", program,
                connect ? "connect" : "bind", role, at,
                zmq_strerror(zmq_errno()));
        if (s)
            zmq_close(s);
        return NULL;
    }
    return s;
}

/* Make s a CURVE client of the daemons when keys were given. */
static int set_curve(const router_options *o, void *s)
{
    return o->curve ? rtomo_keys_set_client(s, o->server_z85, o->public_z85,
                                            o->secret_z85)
                    : 0;
}

/* The PUSH socket to one input of daemon d (number `index`), with its
 * monitor connected before the socket connects, so that no event is
 * missed. */
static int open_link(router *r, router_daemon *d, int index, int input)
{
    router_link *l = &d->link[input];
    char monitor[64];
    snprintf(monitor, sizeof monitor, "inproc://rtomo-router-monitor-%d-%d",
             index, input);
    int one = 1, linger = LINGER_MS;
    l->push = zmq_socket(r->context, ZMQ_PUSH);
    if (!l->push || set_curve(r->opt, l->push) != 0 ||
        zmq_setsockopt(l->push, ZMQ_IMMEDIATE, &one, sizeof one) != 0 ||
        zmq_setsockopt(l->push, ZMQ_LINGER, &linger, sizeof linger) != 0 ||
        zmq_socket_monitor(l->push, monitor, ZMQ_EVENT_HANDSHAKE_SUCCEEDED |
                                             ZMQ_EVENT_DISCONNECTED) != 0)
        return zmq_failed("a daemon's socket");
    l->monitor = zmq_socket(r->context, ZMQ_PAIR);
    if (!l->monitor || zmq_connect(l->monitor, monitor) != 0)
        return zmq_failed("a daemon's socket monitor");
    if (zmq_connect(l->push, l->endpoint) != 0) {
        fprintf(stderr, "%s: cannot connect to daemon %s's %s %s: %s\n",
                program, d->target.endpoint, link_names[input], l->endpoint,
                zmq_strerror(zmq_errno()));
        return -1;
    }
    return 0;
}

/* Daemon d's links: its ingest, and its Stream V2 input when the router
 * has one and the daemon names its endpoint. */
static int open_daemon(router *r, router_daemon *d, int index)
{
    d->link[LINK_INGEST].endpoint = d->target.endpoint;
    if (r->stream2 && d->target.stream2[0])
        d->link[LINK_STREAM2].endpoint = d->target.stream2;
    for (int input = 0; input < LINKS; input++)
        if (d->link[input].endpoint &&
            open_link(r, d, index, input) != 0)
            return -1;
    return 0;
}

/* ZeroMQ's I/O threads move the bytes: with its default of one the router
 * carried 1.1 GB/s (130 frames of 2048^2 uint16 per second, run 37) while
 * the same sender fanned out 4.3 GB/s to each of three daemons.  A camera's
 * connections spread over some, each daemon's link takes one. */
static int io_threads(const router_options *o)
{
    if (o->io_threads > 0)
        return (int)o->io_threads;
    const int n = 4 + o->n_targets;
    return n < 16 ? n : 16;
}

static int open_router(router *r, const router_options *o)
{
    memset(r, 0, sizeof *r);
    r->opt = o;
    r->context = zmq_ctx_new();
    if (!r->context)
        return zmq_failed("ZeroMQ context");
    if (zmq_ctx_set(r->context, ZMQ_IO_THREADS, io_threads(o)) != 0)
        return zmq_failed("ZeroMQ I/O threads");
    r->ingest = input_socket(r, ZMQ_PULL, o->ingest, "ingest", 0);
    r->control = input_socket(r, ZMQ_REP, o->control, "control", 0);
    if (o->stream2)
        r->stream2 = input_socket(r, ZMQ_PULL, o->stream2, "Stream V2", 1);
    if (!r->ingest || !r->control || (o->stream2 && !r->stream2))
        return -1;
    for (; r->n < o->n_targets; r->n++) {
        r->daemons[r->n].target = o->targets[r->n];
        if (open_daemon(r, &r->daemons[r->n], r->n) != 0) {
            r->n++;             /* closed with the others */
            return -1;
        }
    }
    return 0;
}

/* Close everything; frames queued for connected daemons get LINGER_MS to
 * leave (zmq_ctx_term waits for them). */
static void close_router(router *r)
{
    for (int i = 0; i < r->n * LINKS; i++) {
        router_link *l = &r->daemons[i / LINKS].link[i % LINKS];
        if (l->push)
            zmq_socket_monitor(l->push, NULL, 0);
        if (l->monitor)
            zmq_close(l->monitor);
        if (l->push)
            zmq_close(l->push);
    }
    void *sockets[3] = {r->ingest, r->control, r->stream2};
    for (int i = 0; i < 3; i++)
        if (sockets[i])
            zmq_close(sockets[i]);
    parts_close(&r->in);
    free(r->in.msg);
    free(r->out.msg);
    if (r->context)
        zmq_ctx_term(r->context);
}

/* ------------------------------------------------------------- main ---- */

static void print_plan(const router *r)
{
    printf("%s: ingest %s, Stream V2 %s, control %s, margin %ld rows, "
           "%d I/O threads\n", program, r->opt->ingest,
           r->opt->stream2 ? r->opt->stream2 : "none", r->opt->control,
           r->opt->margin, io_threads(r->opt));
    for (int i = 0; i < r->n; i++) {
        const router_daemon *d = &r->daemons[i];
        const router_target *t = &d->target;
        printf("%s: daemon %s: rows %ld..%ld%s%s\n", program, t->endpoint,
               t->rows.first, t->rows.first + t->rows.count - 1,
               d->link[LINK_STREAM2].endpoint ? ", Stream V2 input " : "",
               d->link[LINK_STREAM2].endpoint ? t->stream2 : "");
    }
    fflush(stdout);
}

static void print_summary(const router *r)
{
    printf("%s: %llu messages (%.1f MB) received: %llu frames cut into "
           "rows, %llu SBDX frames dealt (%llu rerouted, %llu lost), %llu "
           "passed on whole\n", program,
           (unsigned long long)r->messages, (double)r->bytes_in / 1e6,
           (unsigned long long)r->split, (unsigned long long)r->dealt,
           (unsigned long long)r->rerouted_frames,
           (unsigned long long)r->lost_frames, (unsigned long long)r->whole);
    if (r->stream2)
        printf("%s: Stream V2: %llu messages (%.1f MB) received: %llu "
               "images cut into rows, %llu messages passed on whole\n",
               program, (unsigned long long)r->s2.messages,
               (double)r->s2.bytes_in / 1e6, (unsigned long long)r->s2.cut,
               (unsigned long long)r->s2.whole);
    for (int i = 0; i < r->n * LINKS; i++) {
        const router_link *l = &r->daemons[i / LINKS].link[i % LINKS];
        if (l->endpoint)
            printf("%s: daemon %s: %s: %llu messages (%.1f MB) sent, %llu "
                   "frames lost\n", program,
                   r->daemons[i / LINKS].target.endpoint,
                   link_names[i % LINKS], (unsigned long long)l->messages,
                   (double)l->bytes / 1e6,
                   (unsigned long long)l->lost_frames);
    }
}

int main(int argc, char **argv)
{
    router_options o = {.ingest = DEFAULT_INGEST, .control = DEFAULT_CONTROL};
    int st = parse_args(argc, argv, &o);
    if (st != TOOL_OK)
        return st;
    if (o.help) {
        usage(stdout);
        return TOOL_OK;
    }
    router r;
    tool_catch_signals();
    st = open_router(&r, &o) == 0 ? TOOL_OK : TOOL_FAILED;
    if (st == TOOL_OK) {
        print_plan(&r);
        st = run(&r) == 0 ? TOOL_OK : TOOL_FAILED;
        print_summary(&r);
    }
    close_router(&r);
    return st;
}
