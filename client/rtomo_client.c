/*
 * rtomo_client.c — the client library (rtomo_client.h): ZeroMQ sockets to
 * one rtomod (or, fanned out, several), messages built and checked with the
 * protocol codec.
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

#include "rtomo_client.h"
#include "rtomo_keys.h"

/* ZeroMQ I/O threads of a client at most (one per ingest connection). */
#define MAX_IO_THREADS 8
/* How long opening waits for each of several connections' handshake. */
#define HANDSHAKE_WAIT_MS 200

/* Sequence numbers seen from one publisher, per topic. */
#define SEQ_TOPICS 16

typedef struct seq_track {
    char topic[SEQ_TOPICS][32];
    uint64_t next[SEQ_TOPICS];  /* the seq expected next */
    int n;
} seq_track;

/* A comma-separated endpoint list, split. */
typedef struct endpoint_list {
    char *text;                 /* the copy the pointers point into */
    char **at;
    int n;
} endpoint_list;

struct rtomo_client {
    rtomo_client_options opt;
    char server_key[RTOMO_KEY_Z85_SIZE];    /* CURVE, Z85; "" = none */
    char public_key[RTOMO_KEY_Z85_SIZE], secret_key[RTOMO_KEY_Z85_SIZE];
    void *context;
    endpoint_list ingests, publishes;
    void **push;                /* ingests.n x opt.connections PUSH
                                   sockets (daemon-major), or NULL */
    int io_threads;             /* of the context */
    int next_push;              /* round-robin position of frames */
    void **sub;                 /* publishes.n SUB sockets, or NULL */
    seq_track *seqs;            /* per SUB socket */
    int next_sub;               /* where the next receive looks first */
    uint64_t missed;
    char *control;              /* copy of the control option */
    endpoint_list controls;     /* it split: one endpoint per daemon */
    void **req;                 /* controls.n REQ sockets; a NULL entry is
                                   (re)opened at its next request */
};

void rtomo_client_options_init(rtomo_client_options *opt)
{
    memset(opt, 0, sizeof *opt);
    opt->connections = 1;
    opt->control_timeout_ms = 3000;
    opt->send_timeout_ms = -1;
    opt->linger_ms = 10000;
}

static double monotonic_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static rtomo_status zmq_failure(rtomo_error *err, const char *what)
{
    return rtomo_set_error(err, RTOMO_E_BACKEND, "%s: %s", what,
                           zmq_strerror(zmq_errno()));
}

/* ----------------------------------------------------------- sockets ---- */

static int set_int(void *socket, int option, int value)
{
    return zmq_setsockopt(socket, option, &value, sizeof value);
}

/* How one socket is made (see connect_socket). */
typedef struct socket_setup {
    int type;
    const char *endpoint;
    const char *role;           /* for messages */
    int linger_ms;
    int hwm_option, hwm;        /* hwm 0 keeps ZeroMQ's default */
    int io_thread;              /* >= 0: this ZeroMQ I/O thread; -1: any */
    int await_ms;               /* > 0: wait this long at most for the
                                   handshake with the peer */
} socket_setup;

/* ZeroMQ before 4.3 has no handshake event: the TCP connect then stands in
 * for it (the daemon's side may not have counted the connection yet). */
#ifndef ZMQ_EVENT_HANDSHAKE_SUCCEEDED
#define ZMQ_EVENT_HANDSHAKE_SUCCEEDED ZMQ_EVENT_CONNECTED
#endif

/* A monitor on s that reports a completed handshake, and the PAIR socket
 * reading it; NULL when it cannot be made (then nobody waits). */
static void *handshake_monitor(rtomo_client *c, void *s)
{
    char endpoint[96];
    snprintf(endpoint, sizeof endpoint, "inproc://rtomo-client-%p-%p",
             (void *)c, s);
    if (zmq_socket_monitor(s, endpoint, ZMQ_EVENT_HANDSHAKE_SUCCEEDED) != 0)
        return NULL;
    void *pair = zmq_socket(c->context, ZMQ_PAIR);
    if (pair && zmq_connect(pair, endpoint) == 0)
        return pair;
    if (pair)
        zmq_close(pair);
    zmq_socket_monitor(s, NULL, 0);
    return NULL;
}

/* Wait up to ms for the monitor's event (two parts), then stop it.  A
 * daemon that is not up yet costs the wait once; ZeroMQ goes on
 * connecting in the background. */
static void await_handshake(void *s, void *pair, int ms)
{
    zmq_pollitem_t item = {pair, 0, ZMQ_POLLIN, 0};
    if (zmq_poll(&item, 1, ms) == 1) {
        zmq_msg_t part;
        zmq_msg_init(&part);
        while (zmq_msg_recv(&part, pair, ZMQ_DONTWAIT) >= 0 &&
               zmq_msg_more(&part))
            ;
        zmq_msg_close(&part);
    }
    zmq_socket_monitor(s, NULL, 0);
    zmq_close(pair);
}

/* Read the CURVE keys named in the options (none: plain ZeroMQ). */
static rtomo_status load_keys(rtomo_client *c, const rtomo_client_options *o,
                              rtomo_error *err)
{
    if (!o->server_key && !o->client_key)
        return RTOMO_OK;
    if (!o->server_key || !o->client_key)
        return rtomo_set_error(err, RTOMO_E_INVALID, "CURVE needs both the "
                               "daemon's public key (server_key, "
                               "--server-key) and this client's key pair "
                               "(client_key, --client-key)");
    if (!rtomo_keys_curve_available())
        return rtomo_set_error(err, RTOMO_E_UNAVAILABLE, "this libzmq was "
                               "built without CURVE (zmq_has(\"curve\") is "
                               "false)");
    rtomo_status st = rtomo_keys_read(o->server_key, "server key",
                                      c->server_key, NULL, err);
    if (st == RTOMO_OK)
        st = rtomo_keys_read(o->client_key, "client key", c->public_key,
                             c->secret_key, err);
    return st;
}

/* Make s a CURVE client of the daemon when keys were given.  A daemon
 * that refuses the key (or does not know CURVE) never completes the
 * handshake: nothing sent on s is delivered, and requests time out. */
static int set_curve(const rtomo_client *c, void *s)
{
    if (!c->server_key[0])
        return 0;
    return rtomo_keys_set_client(s, c->server_key, c->public_key,
                                 c->secret_key);
}

/* A socket made as `how` says, connected: linger time, high-water mark
 * and I/O thread set, PUSH sockets with the send timeout, SUB sockets
 * with the receive buffer (all before connecting: ZeroMQ applies them to
 * the connections it makes). */
static void *connect_socket(rtomo_client *c, const socket_setup *how,
                            rtomo_error *err)
{
    void *s = zmq_socket(c->context, how->type);
    if (!s) {
        zmq_failure(err, "cannot create a ZeroMQ socket");
        return NULL;
    }
    uint64_t affinity = how->io_thread >= 0 ? (uint64_t)1 << how->io_thread
                                            : 0;
    if (zmq_setsockopt(s, ZMQ_AFFINITY, &affinity, sizeof affinity) != 0 ||
        set_int(s, ZMQ_LINGER, how->linger_ms) != 0 ||
        (how->hwm > 0 && set_int(s, how->hwm_option, how->hwm) != 0) ||
        (how->type == ZMQ_PUSH && set_int(s, ZMQ_SNDTIMEO,
                                          c->opt.send_timeout_ms) != 0) ||
        (how->type == ZMQ_SUB && c->opt.receive_buffer > 0 &&
         set_int(s, ZMQ_RCVBUF, c->opt.receive_buffer) != 0)) {
        zmq_failure(err, "cannot set socket options");
        zmq_close(s);
        return NULL;
    }
    if (set_curve(c, s) != 0) {
        zmq_failure(err, "cannot set the CURVE keys");
        zmq_close(s);
        return NULL;
    }
    void *monitor = how->await_ms > 0 ? handshake_monitor(c, s) : NULL;
    if (zmq_connect(s, how->endpoint) != 0) {
        rtomo_set_error(err, RTOMO_E_INVALID,
                        "cannot connect the %s socket to \"%s\": %s",
                        how->role, how->endpoint, zmq_strerror(zmq_errno()));
        if (monitor)
            await_handshake(s, monitor, 0);
        zmq_close(s);
        return NULL;
    }
    if (monitor)
        await_handshake(s, monitor, how->await_ms);
    return s;
}

/* The REQ socket of daemon d's control endpoint. */
static rtomo_status open_control(rtomo_client *c, int d, rtomo_error *err)
{
    const socket_setup how = {ZMQ_REQ, c->controls.at[d], "control", 0, 0, 0,
                              -1, 0};
    c->req[d] = connect_socket(c, &how, err);
    return c->req[d] ? RTOMO_OK : err ? err->code : RTOMO_E_BACKEND;
}

static rtomo_status open_controls(rtomo_client *c, rtomo_error *err)
{
    if (c->controls.n == 0)
        return RTOMO_OK;
    c->req = calloc((size_t)c->controls.n, sizeof *c->req);
    if (!c->req)
        return rtomo_set_error(err, RTOMO_E_NOMEM, "out of memory");
    for (int d = 0; d < c->controls.n; d++)
        if (open_control(c, d, err) != RTOMO_OK)
            return err ? err->code : RTOMO_E_BACKEND;
    return RTOMO_OK;
}

static char *copy_endpoint(const char *endpoint, int *failed)
{
    if (!endpoint)
        return NULL;
    char *copy = strdup(endpoint);
    *failed |= copy == NULL;
    return copy;
}

/* Split "a,b,c" (NULL: an empty list).  Returns 0, or -1 when out of
 * memory or an endpoint is empty (with err set). */
static rtomo_status split_endpoints(const char *text, const char *role,
                                    endpoint_list *list, rtomo_error *err)
{
    memset(list, 0, sizeof *list);
    if (!text)
        return RTOMO_OK;
    list->text = strdup(text);
    int n = 1;
    for (const char *p = text; *p; p++)
        n += *p == ',';
    list->at = calloc((size_t)n, sizeof *list->at);
    if (!list->text || !list->at)
        return rtomo_set_error(err, RTOMO_E_NOMEM, "out of memory");
    char *save = NULL;
    for (char *e = strtok_r(list->text, ",", &save); e;
         e = strtok_r(NULL, ",", &save))
        list->at[list->n++] = e;
    if (list->n != n)
        return rtomo_set_error(err, RTOMO_E_INVALID, "%s endpoint list "
                               "\"%s\" has an empty entry", role, text);
    return RTOMO_OK;
}

static void free_endpoints(endpoint_list *list)
{
    free(list->text);
    free(list->at);
    memset(list, 0, sizeof *list);
}

static rtomo_status check_options(const rtomo_client_options *opt,
                                  rtomo_error *err)
{
    if (!opt)
        return rtomo_set_error(err, RTOMO_E_INVALID, "no client options");
    if (!opt->ingest && !opt->publish && !opt->control)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "no endpoint given (ingest, publish or "
                               "control)");
    if (opt->connections < 1 || opt->connections > 256)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "connections %d is outside [1, 256]",
                               opt->connections);
    if (opt->control_timeout_ms < 1)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "control timeout %d ms must be positive",
                               opt->control_timeout_ms);
    return RTOMO_OK;
}

static rtomo_status open_sockets(rtomo_client *c, rtomo_error *err)
{
    int n_push = c->ingests.n * c->opt.connections;
    if (n_push > 0) {
        c->push = calloc((size_t)n_push, sizeof *c->push);
        if (!c->push)
            return rtomo_set_error(err, RTOMO_E_NOMEM, "out of memory");
        /* Several connections to a daemon add bandwidth only with an I/O
         * thread each on both sides.  Here: each socket is pinned to its
         * own thread (left to choose, ZeroMQ put them all on the first).
         * There: the daemon's ZeroMQ gives an accepted connection the I/O
         * thread with the fewest connections, but counts a connection only
         * once it runs, so connections made back to back all land on one
         * thread; waiting for each handshake lets the next see the count. */
        int await_ms = c->opt.connections > 1 ? HANDSHAKE_WAIT_MS : 0;
        for (int i = 0; i < n_push; i++) {
            const socket_setup how = {
                ZMQ_PUSH, c->ingests.at[i / c->opt.connections], "ingest",
                c->opt.linger_ms, ZMQ_SNDHWM, c->opt.send_hwm,
                i % c->io_threads, await_ms};
            c->push[i] = connect_socket(c, &how, err);
            if (!c->push[i])
                return err ? err->code : RTOMO_E_BACKEND;
        }
    }
    if (c->publishes.n > 0) {
        c->sub = calloc((size_t)c->publishes.n, sizeof *c->sub);
        c->seqs = calloc((size_t)c->publishes.n, sizeof *c->seqs);
        if (!c->sub || !c->seqs)
            return rtomo_set_error(err, RTOMO_E_NOMEM, "out of memory");
        for (int i = 0; i < c->publishes.n; i++) {
            const socket_setup how = {ZMQ_SUB, c->publishes.at[i],
                                      "subscriber", 0, ZMQ_RCVHWM,
                                      c->opt.receive_hwm, -1, 0};
            c->sub[i] = connect_socket(c, &how, err);
            if (!c->sub[i])
                return err ? err->code : RTOMO_E_BACKEND;
        }
    }
    return open_controls(c, err);
}

rtomo_client *rtomo_client_open(const rtomo_client_options *opt,
                                rtomo_error *err)
{
    if (check_options(opt, err) != RTOMO_OK)
        return NULL;
    rtomo_client *c = calloc(1, sizeof *c);
    if (!c) {
        rtomo_set_error(err, RTOMO_E_NOMEM, "out of memory");
        return NULL;
    }
    c->opt = *opt;
    if (load_keys(c, opt, err) != RTOMO_OK) {
        rtomo_client_close(c);
        return NULL;
    }
    int failed = 0;
    c->control = copy_endpoint(opt->control, &failed);
    c->opt.ingest = c->opt.publish = NULL;
    c->opt.control = c->control;
    if (failed) {
        rtomo_set_error(err, RTOMO_E_NOMEM, "out of memory");
        rtomo_client_close(c);
        return NULL;
    }
    if (split_endpoints(opt->ingest, "ingest", &c->ingests, err) !=
            RTOMO_OK ||
        split_endpoints(opt->publish, "publish", &c->publishes, err) !=
            RTOMO_OK ||
        split_endpoints(opt->control, "control", &c->controls, err) !=
            RTOMO_OK) {
        rtomo_client_close(c);
        return NULL;
    }
    c->context = zmq_ctx_new();
    if (!c->context) {
        rtomo_set_error(err, RTOMO_E_NOMEM, "cannot create a ZeroMQ context");
        rtomo_client_close(c);
        return NULL;
    }
    /* One ZeroMQ I/O thread moves about one TCP connection's worth of bytes
     * (5-6 GB/s): several connections only add bandwidth with a thread
     * each.  Set before the sockets exist, as ZeroMQ requires. */
    int io_threads = c->ingests.n * c->opt.connections;
    if (io_threads < 1)
        io_threads = 1;     /* subscriber or control only */
    c->io_threads = io_threads < MAX_IO_THREADS ? io_threads : MAX_IO_THREADS;
    zmq_ctx_set(c->context, ZMQ_IO_THREADS, c->io_threads);
    if (open_sockets(c, err) != RTOMO_OK) {
        rtomo_client_close(c);
        return NULL;
    }
    return c;
}

void rtomo_client_close(rtomo_client *c)
{
    if (!c)
        return;
    for (int i = 0; c->push && i < c->ingests.n * c->opt.connections; i++)
        if (c->push[i])
            zmq_close(c->push[i]);
    for (int i = 0; c->sub && i < c->publishes.n; i++)
        if (c->sub[i])
            zmq_close(c->sub[i]);
    for (int d = 0; c->req && d < c->controls.n; d++)
        if (c->req[d])
            zmq_close(c->req[d]);
    if (c->context)
        zmq_ctx_term(c->context);   /* waits up to linger_ms for frames */
    free(c->push);
    free(c->sub);
    free(c->seqs);
    free_endpoints(&c->ingests);
    free_endpoints(&c->publishes);
    free_endpoints(&c->controls);
    free(c->req);
    free(c->control);
    explicit_bzero(c->secret_key, sizeof c->secret_key);
    free(c);
}

int rtomo_client_connections(const rtomo_client *c)
{
    return c->push ? c->opt.connections : 0;
}

int rtomo_client_daemons(const rtomo_client *c)
{
    return c->push ? c->ingests.n : 0;
}

int rtomo_client_publishers(const rtomo_client *c)
{
    return c->publishes.n;
}

uint64_t rtomo_client_missed(const rtomo_client *c)
{
    return c->missed;
}

/* ------------------------------------------------------------ ingest ---- */

static rtomo_status send_failure(const rtomo_client *c, int daemon,
                                 rtomo_error *err)
{
    if (zmq_errno() == EAGAIN)
        return rtomo_set_error(err, RTOMO_E_UNAVAILABLE,
                               "ingest send to %s timed out after %d ms: the "
                               "daemon is not reading (its queue is full) or "
                               "not reachable", c->ingests.at[daemon],
                               c->opt.send_timeout_ms);
    return zmq_failure(err, "ingest send failed");
}

static rtomo_status check_connection(const rtomo_client *c, int connection,
                                     rtomo_error *err)
{
    if (!c->push)
        return rtomo_set_error(err, RTOMO_E_STATE,
                               "no ingest endpoint configured");
    if (connection < 0 || connection >= c->opt.connections)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "connection %d is outside [0, %d)", connection,
                               c->opt.connections);
    return RTOMO_OK;
}

/* The PUSH socket of daemon d's connection k. */
static void *push_socket(const rtomo_client *c, int d, int k)
{
    return c->push[d * c->opt.connections + k];
}

rtomo_status rtomo_client_send_raw(rtomo_client *c, int connection,
                                   const void *header, size_t header_size,
                                   int n_parts, const void *payload,
                                   size_t payload_size, rtomo_error *err)
{
    rtomo_status st = check_connection(c, connection, err);
    if (st != RTOMO_OK)
        return st;
    if (n_parts != 1 && n_parts != 2)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "a raw message has 1 or 2 parts, not %d",
                               n_parts);
    for (int d = 0; d < c->ingests.n; d++) {
        void *s = push_socket(c, d, connection);
        if (zmq_send(s, header, header_size,
                     n_parts == 2 ? ZMQ_SNDMORE : 0) < 0)
            return send_failure(c, d, err);
        /* Further parts of a multipart message never block once the first
         * part is queued. */
        if (n_parts == 2 && zmq_send(s, payload, payload_size, 0) < 0)
            return zmq_failure(err, "ingest send of the payload failed");
    }
    return RTOMO_OK;
}

/* Check a message exactly as the daemon will decode it. */
static rtomo_status check_message(const char *header, int n_parts,
                                  const void *payload, size_t size,
                                  rtomo_error *err)
{
    if (!header)
        return rtomo_set_error(err, RTOMO_E_NOMEM,
                               "cannot encode the header (out of memory or "
                               "text that is not UTF-8)");
    rtomo_ingest_msg msg;
    rtomo_reject_info why;
    if (rtomo_proto_decode_ingest(n_parts, header, strlen(header), payload,
                                  size, &msg, &why) != 0)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "the daemon would reject this message (%s): %s",
                               rtomo_reject_name(why.reason), why.message);
    rtomo_ingest_msg_clear(&msg);
    return RTOMO_OK;
}

/* Check and send a header-only message on the first connection; consumes
 * `header`. */
static rtomo_status send_control_message(rtomo_client *c, char *header,
                                         rtomo_error *err)
{
    rtomo_status st = check_message(header, 1, NULL, 0, err);
    if (st == RTOMO_OK)
        st = rtomo_client_send_raw(c, 0, header, strlen(header), 1, NULL, 0,
                                   err);
    free(header);
    return st;
}

rtomo_status rtomo_client_send_scan_begin(rtomo_client *c,
                                          const rtomo_scan_spec *spec,
                                          rtomo_error *err)
{
    return send_control_message(c, rtomo_proto_encode_scan_begin(spec), err);
}

rtomo_status rtomo_client_send_sbdx_begin(rtomo_client *c,
                                          const rtomo_sbdx_spec *spec,
                                          rtomo_error *err)
{
    /* The encoder refuses these settings with NULL; say why instead. */
    rtomo_reject_info why;
    if (rtomo_proto_check_sbdx_output(spec, &why) != 0)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "the daemon would reject this message (%s): "
                               "%s", rtomo_reject_name(why.reason),
                               why.message);
    return send_control_message(c, rtomo_proto_encode_sbdx_begin(spec), err);
}

rtomo_status rtomo_client_send_end(rtomo_client *c, rtomo_msg_type type,
                                   const char *scan, rtomo_error *err)
{
    if (type != RTOMO_MSG_SCAN_END && type != RTOMO_MSG_SBDX_END)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "%s is not an end message",
                               rtomo_msg_type_name(type));
    return send_control_message(c, rtomo_proto_encode_end(type, scan), err);
}

static int take_connection(rtomo_client *c)
{
    int k = c->next_push;
    c->next_push = (k + 1) % c->opt.connections;
    return k;
}

rtomo_status rtomo_client_send_frame(rtomo_client *c,
                                     const rtomo_frame_header *frame,
                                     const void *payload, size_t size,
                                     rtomo_error *err)
{
    if (!c->push)
        return rtomo_set_error(err, RTOMO_E_STATE,
                               "no ingest endpoint configured");
    char *header = rtomo_proto_encode_frame(frame);
    rtomo_status st = check_message(header, 2, payload, size, err);
    if (st == RTOMO_OK)
        st = rtomo_client_send_raw(c, take_connection(c), header,
                                   strlen(header), 2, payload, size, err);
    free(header);
    return st;
}

/* Send [header, payload] on connection k of every daemon: the payload
 * message is shared by all (ZeroMQ counts references; its free function
 * runs once, when the last daemon's copy is sent).  Consumes `payload`. */
static rtomo_status send_shared(rtomo_client *c, int k, const char *header,
                                zmq_msg_t *payload, rtomo_error *err)
{
    rtomo_status st = RTOMO_OK;
    for (int d = 0; d < c->ingests.n && st == RTOMO_OK; d++) {
        void *s = push_socket(c, d, k);
        zmq_msg_t part;
        zmq_msg_init(&part);
        if (d == c->ingests.n - 1)
            zmq_msg_move(&part, payload);
        else
            zmq_msg_copy(&part, payload);
        if (zmq_send(s, header, strlen(header), ZMQ_SNDMORE) < 0)
            st = send_failure(c, d, err);
        else if (zmq_msg_send(&part, s, 0) < 0)
            st = zmq_failure(err, "ingest send of the payload failed");
        zmq_msg_close(&part);   /* a no-op once sent */
    }
    zmq_msg_close(payload);
    return st;
}

/* ZeroMQ's free callback takes one hint; ours carries the caller's. */
typedef struct release_call {
    rtomo_client_release_fn *release;
    void *hint;
} release_call;

static void release_adapter(void *data, void *hint)
{
    release_call *call = hint;
    if (call->release)
        call->release(data, call->hint);
    free(call);
}

rtomo_status rtomo_client_send_frame_zero_copy(
    rtomo_client *c, const rtomo_frame_header *frame, void *payload,
    size_t size, rtomo_client_release_fn *release, void *hint,
    rtomo_error *err)
{
    char *header = rtomo_proto_encode_frame(frame);
    release_call *call = malloc(sizeof *call);
    rtomo_status st = !c->push ? rtomo_set_error(err, RTOMO_E_STATE,
                                                 "no ingest endpoint "
                                                 "configured")
                    : !call ? rtomo_set_error(err, RTOMO_E_NOMEM,
                                              "out of memory")
                    : check_message(header, 2, payload, size, err);
    if (st != RTOMO_OK) {
        free(header);
        free(call);
        if (release)
            release(payload, hint);
        return st;
    }
    *call = (release_call){release, hint};
    zmq_msg_t msg;
    if (zmq_msg_init_data(&msg, payload, size, release_adapter, call) != 0) {
        free(header);
        release_adapter(payload, call);
        return zmq_failure(err, "cannot wrap the frame for sending");
    }
    /* Closing the last reference (sent or not) calls release_adapter. */
    st = send_shared(c, take_connection(c), header, &msg, err);
    free(header);
    return st;
}

/* ----------------------------------------------------------- publish ---- */

rtomo_status rtomo_client_subscribe(rtomo_client *c, const char *topic,
                                    rtomo_error *err)
{
    if (!c->sub)
        return rtomo_set_error(err, RTOMO_E_STATE,
                               "no publish endpoint configured");
    if (!topic)
        topic = "";
    for (int i = 0; i < c->publishes.n; i++)
        if (zmq_setsockopt(c->sub[i], ZMQ_SUBSCRIBE, topic, strlen(topic)) !=
            0)
            return zmq_failure(err, "cannot subscribe");
    return RTOMO_OK;
}

/* Owner of a received payload: the ZeroMQ message, or an aligned copy when
 * ZeroMQ's buffer is not 16-byte aligned. */
typedef struct payload_holder {
    zmq_msg_t msg;
    void *copy;
} payload_holder;

void rtomo_published_clear(rtomo_published *m)
{
    if (!m)
        return;
    free(m->header);
    json_decref(m->json);
    payload_holder *h = m->priv;
    if (h) {
        zmq_msg_close(&h->msg);
        free(h->copy);
        free(h);
    }
    memset(m, 0, sizeof *m);
}

enum { READABLE = 1, TIMED_OUT = 0, INTERRUPTED = -1, POLL_FAILED = -2 };

/* Wait up to timeout_ms (-1 = forever) until `socket` is readable. */
static int wait_readable(void *socket, int timeout_ms)
{
    zmq_pollitem_t item = {.socket = socket, .events = ZMQ_POLLIN};
    int n = zmq_poll(&item, 1, timeout_ms);
    if (n < 0)
        return zmq_errno() == EINTR ? INTERRUPTED : POLL_FAILED;
    return n > 0 ? READABLE : TIMED_OUT;
}

/* Wait up to timeout_ms (-1 = forever) until one of the SUB sockets is
 * readable; *which is that socket, the first readable one from
 * c->next_sub on (so that a busy publisher cannot starve the others). */
static int wait_any_sub(rtomo_client *c, int timeout_ms, int *which)
{
    enum { MAX_POLLED = 64 };
    zmq_pollitem_t items[MAX_POLLED];
    int n = c->publishes.n < MAX_POLLED ? c->publishes.n : MAX_POLLED;
    for (int i = 0; i < n; i++)
        items[i] = (zmq_pollitem_t){.socket = c->sub[i], .events = ZMQ_POLLIN};
    int ready = zmq_poll(items, n, timeout_ms);
    if (ready < 0)
        return zmq_errno() == EINTR ? INTERRUPTED : POLL_FAILED;
    if (ready == 0)
        return TIMED_OUT;
    for (int k = 0; k < n; k++) {
        int i = (c->next_sub + k) % n;
        if (items[i].revents & ZMQ_POLLIN) {
            *which = i;
            c->next_sub = (i + 1) % n;
            return READABLE;
        }
    }
    return TIMED_OUT;
}

static rtomo_status wait_failure(int waited, const char *what, int timeout_ms,
                                 rtomo_error *err)
{
    if (waited == INTERRUPTED)
        return rtomo_set_error(err, RTOMO_E_UNAVAILABLE,
                               "interrupted while waiting for %s", what);
    if (waited == TIMED_OUT)
        return rtomo_set_error(err, RTOMO_E_UNAVAILABLE,
                               "no %s within %d ms", what, timeout_ms);
    return zmq_failure(err, "poll failed");
}

/* Receive all parts of one message: the first `max` into parts[], the rest
 * dropped.  Returns the number of parts, or -1. */
static int receive_parts(void *socket, zmq_msg_t *parts, int max)
{
    int n = 0, more = 1;
    while (more) {
        zmq_msg_t part;
        zmq_msg_init(&part);
        if (zmq_msg_recv(&part, socket, 0) < 0) {
            zmq_msg_close(&part);
            for (int i = 0; i < n && i < max; i++)
                zmq_msg_close(&parts[i]);
            return -1;
        }
        more = zmq_msg_more(&part);
        if (n < max)
            parts[n] = part;
        else
            zmq_msg_close(&part);
        n++;
    }
    return n;
}

static rtomo_status keep_payload(rtomo_published *m, zmq_msg_t *part,
                                 rtomo_error *err)
{
    payload_holder *h = calloc(1, sizeof *h);
    if (!h)
        return rtomo_set_error(err, RTOMO_E_NOMEM, "out of memory");
    h->msg = *part;
    zmq_msg_init(part);
    m->priv = h;
    m->payload_size = zmq_msg_size(&h->msg);
    if (m->payload_size == 0)
        return RTOMO_OK;
    const void *data = zmq_msg_data(&h->msg);
    if ((uintptr_t)data % 16 == 0) {
        m->payload = data;
        return RTOMO_OK;
    }
    if (posix_memalign(&h->copy, 16, m->payload_size) != 0) {
        h->copy = NULL;
        return rtomo_set_error(err, RTOMO_E_NOMEM, "out of memory");
    }
    memcpy(h->copy, data, m->payload_size);
    m->payload = h->copy;
    return RTOMO_OK;
}

static rtomo_status decode_published(rtomo_published *m, rtomo_error *err)
{
    rtomo_reject_info why;
    json_error_t jerr;
    m->json = json_loadb(m->header, m->header_size, 0, &jerr);
    if (!json_is_object(m->json))
        return rtomo_set_error(err, RTOMO_E_BACKEND,
                               "%s header is not a JSON object: %s", m->topic,
                               m->json ? "other JSON value" : jerr.text);
    static const char *const images[] = {RTOMO_TOPIC_SLICE, RTOMO_TOPIC_PLANE,
                                         RTOMO_TOPIC_COMPOSITE,
                                         RTOMO_TOPIC_DEPTH,
                                         RTOMO_TOPIC_PREVIEW};
    m->kind = RTOMO_PUBLISHED_OTHER;
    for (size_t i = 0; i < sizeof images / sizeof images[0]; i++)
        if (strcmp(m->topic, images[i]) == 0)
            m->kind = RTOMO_PUBLISHED_IMAGE;
    if (strcmp(m->topic, RTOMO_TOPIC_EVENT) == 0)
        m->kind = RTOMO_PUBLISHED_EVENT;
    if (strcmp(m->topic, RTOMO_TOPIC_TELEMETRY) == 0)
        m->kind = RTOMO_PUBLISHED_TELEMETRY;
    int r = 0;
    if (m->kind == RTOMO_PUBLISHED_IMAGE)
        r = rtomo_proto_decode_image_header(m->header, m->header_size,
                                            m->payload_size, &m->image, &why);
    else if (m->kind == RTOMO_PUBLISHED_EVENT)
        r = rtomo_proto_decode_event(m->header, m->header_size, &m->event,
                                     &why);
    if (r != 0)
        return rtomo_set_error(err, RTOMO_E_BACKEND,
                               "malformed %s message (%s): %s", m->topic,
                               rtomo_reject_name(why.reason), why.message);
    return RTOMO_OK;
}

/* Fill m from the three parts of a published message. */
static rtomo_status unpack_published(rtomo_published *m, zmq_msg_t *parts,
                                     rtomo_error *err)
{
    size_t topic_size = zmq_msg_size(&parts[0]);
    if (topic_size >= sizeof m->topic)
        return rtomo_set_error(err, RTOMO_E_BACKEND,
                               "published topic of %zu bytes is too long",
                               topic_size);
    memcpy(m->topic, zmq_msg_data(&parts[0]), topic_size);
    m->topic[topic_size] = '\0';
    m->header_size = zmq_msg_size(&parts[1]);
    m->header = malloc(m->header_size + 1);
    if (!m->header)
        return rtomo_set_error(err, RTOMO_E_NOMEM, "out of memory");
    memcpy(m->header, zmq_msg_data(&parts[1]), m->header_size);
    m->header[m->header_size] = '\0';
    rtomo_status st = keep_payload(m, &parts[2], err);
    return st != RTOMO_OK ? st : decode_published(m, err);
}

/* Follow the message's per-topic sequence number from its publisher:
 * a jump forward is that many messages lost.  (A jump back is a daemon
 * that restarted: counting starts again.) */
static void track_seq(rtomo_client *c, rtomo_published *m)
{
    const json_t *seq = json_object_get(m->json, "seq");
    if (!json_is_integer(seq) || json_integer_value(seq) < 0)
        return;
    m->has_seq = 1;
    m->seq = (uint64_t)json_integer_value(seq);
    seq_track *t = &c->seqs[m->source];
    int k = 0;
    while (k < t->n && strcmp(t->topic[k], m->topic) != 0)
        k++;
    if (k == t->n) {
        if (t->n == SEQ_TOPICS)
            return;             /* more topics than anyone publishes */
        snprintf(t->topic[k], sizeof t->topic[k], "%s", m->topic);
        t->n++;
    } else if (m->seq > t->next[k]) {
        m->missed = m->seq - t->next[k];
        c->missed += m->missed;
    }
    t->next[k] = m->seq + 1;
}

rtomo_status rtomo_client_receive(rtomo_client *c, rtomo_published *m,
                                  int timeout_ms, rtomo_error *err)
{
    rtomo_published_clear(m);
    if (!c->sub)
        return rtomo_set_error(err, RTOMO_E_STATE,
                               "no publish endpoint configured");
    int source = 0;
    int waited = wait_any_sub(c, timeout_ms, &source);
    if (waited != READABLE)
        return wait_failure(waited, "published message", timeout_ms, err);
    rtomo_status st;
    zmq_msg_t parts[3];
    m->source = source;
    int n = receive_parts(c->sub[source], parts, 3);
    if (n < 0)
        return zmq_failure(err, "receive failed");
    if (n != 3) {
        for (int i = 0; i < n && i < 3; i++)
            zmq_msg_close(&parts[i]);
        return rtomo_set_error(err, RTOMO_E_BACKEND,
                               "published message has %d parts; expected 3 "
                               "(topic, header, payload)", n);
    }
    st = unpack_published(m, parts, err);
    for (int i = 0; i < 3; i++)
        zmq_msg_close(&parts[i]);
    if (st != RTOMO_OK) {
        /* keep the topic and text for the caller's diagnostics */
        m->payload = NULL;
    } else {
        track_seq(c, m);
    }
    return st;
}

/* ----------------------------------------------------------- control ---- */

/* Status of an {"ok": false, "error": code} reply. */
static rtomo_status status_of_error(const char *code)
{
    if (!code)
        return RTOMO_E_BACKEND;
    if (strcmp(code, "bad_state") == 0)
        return RTOMO_E_STATE;
    if (strcmp(code, "bad_json") == 0 || strcmp(code, "unknown_command") == 0 ||
        strcmp(code, "bad_argument") == 0)
        return RTOMO_E_INVALID;
    return RTOMO_E_BACKEND;
}

static rtomo_status read_reply(rtomo_client *c, int d, json_t **reply,
                               rtomo_error *err)
{
    zmq_msg_t part;
    int n = receive_parts(c->req[d], &part, 1);
    if (n < 0)
        return zmq_failure(err, "control receive failed");
    json_error_t jerr;
    json_t *j = json_loadb(zmq_msg_data(&part), zmq_msg_size(&part), 0, &jerr);
    zmq_msg_close(&part);
    json_t *ok = json_object_get(j, "ok");
    if (!json_is_object(j) || !json_is_boolean(ok)) {
        json_decref(j);
        return rtomo_set_error(err, RTOMO_E_BACKEND,
                               "malformed control reply from %s: %s",
                               c->controls.at[d],
                               j ? "not an object with \"ok\"" : jerr.text);
    }
    *reply = j;
    if (json_is_true(ok))
        return RTOMO_OK;
    const char *code = json_string_value(json_object_get(j, "error"));
    const char *message = json_string_value(json_object_get(j, "message"));
    return rtomo_set_error(err, status_of_error(code), "rtomod refused: %s: %s",
                           code ? code : "(no error code)",
                           message ? message : "(no message)");
}

/* A REQ socket that missed its reply is stuck; only a new one can send. */
static void reset_control(rtomo_client *c, int d)
{
    zmq_close(c->req[d]);
    c->req[d] = NULL;
    open_control(c, d, NULL);
}

/* rtomo_client_request to daemon d's control endpoint. */
static rtomo_status request_to(rtomo_client *c, int d, const json_t *request,
                               json_t **reply, rtomo_error *err)
{
    *reply = NULL;
    if (c->controls.n == 0)
        return rtomo_set_error(err, RTOMO_E_STATE,
                               "no control endpoint configured");
    if (!c->req[d] && open_control(c, d, err) != RTOMO_OK)
        return err ? err->code : RTOMO_E_BACKEND;
    char *text = json_dumps(request, JSON_COMPACT);
    if (!text)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "request cannot be encoded as JSON");
    int sent = zmq_send(c->req[d], text, strlen(text), 0);
    free(text);
    if (sent < 0) {
        reset_control(c, d);
        return zmq_failure(err, "control send failed");
    }
    int waited = wait_readable(c->req[d], c->opt.control_timeout_ms);
    if (waited == READABLE)
        return read_reply(c, d, reply, err);
    reset_control(c, d);
    if (waited == TIMED_OUT)
        return rtomo_set_error(err, RTOMO_E_UNAVAILABLE,
                               "rtomod at %s did not answer within %d ms (is "
                               "it running, and is this its control "
                               "endpoint?)", c->controls.at[d],
                               c->opt.control_timeout_ms);
    return wait_failure(waited, "control reply", c->opt.control_timeout_ms,
                        err);
}

rtomo_status rtomo_client_request(rtomo_client *c, const json_t *request,
                                  json_t **reply, rtomo_error *err)
{
    return request_to(c, 0, request, reply, err);
}

rtomo_status rtomo_client_command(rtomo_client *c, const char *cmd,
                                  json_t **reply, rtomo_error *err)
{
    json_t *request = json_pack("{s:s}", "cmd", cmd ? cmd : "");
    if (!request)
        return rtomo_set_error(err, RTOMO_E_NOMEM, "out of memory");
    rtomo_status st = rtomo_client_request(c, request, reply, err);
    json_decref(request);
    return st;
}

/* `scan` among the scans a status reply lists as in flight ("scans"; a
 * daemon that knows one scan at a time lists it as "scan"), while it
 * takes input; NULL otherwise. */
static const json_t *acquiring_scan(const json_t *status, const char *scan)
{
    const json_t *list = json_object_get(status, "scans"), *s;
    size_t i;
    if (!json_is_array(list))
        list = NULL;
    json_array_foreach(list, i, s) {
        const char *id = json_string_value(json_object_get(s, "id"));
        const char *phase = json_string_value(json_object_get(s, "phase"));
        if (id && strcmp(id, scan) == 0 &&
            (!phase || strcmp(phase, "reconstructing") != 0))
            return s;
    }
    s = json_object_get(status, "scan");
    const char *id = json_string_value(json_object_get(s, "id"));
    return !list && id && strcmp(id, scan) == 0 ? s : NULL;
}

/* Frames the daemon holds for `scan` according to a status reply, or -1
 * when `scan` is not acquiring there. */
static double frames_held(const json_t *status, const char *scan)
{
    const json_t *active = acquiring_scan(status, scan);
    if (!active)
        return -1;
    static const char *const counts[] = {"received", "darks", "flats"};
    double n = 0;
    for (int i = 0; i < 3; i++) {
        const json_t *v = json_object_get(active, counts[i]);
        n += json_is_number(v) ? json_number_value(v) : 0;
    }
    return n;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* rtomo_client_wait_for_scan on daemon d alone. */
static rtomo_status wait_on_daemon(rtomo_client *c, int d, const char *scan,
                                   long frames, int stall_ms,
                                   rtomo_error *err)
{
    json_t *request = json_pack("{s:s}", "cmd", "status");
    if (!request)
        return rtomo_set_error(err, RTOMO_E_NOMEM, "out of memory");
    double held = -2, t_change = monotonic_ms();
    rtomo_status st;
    for (;;) {
        json_t *reply = NULL;
        st = request_to(c, d, request, &reply, err);
        double now = held;
        if (st == RTOMO_OK)
            now = frames_held(reply, scan);
        json_decref(reply);
        if (st != RTOMO_OK || now >= (double)frames)
            break;
        if (now != held) {
            held = now;
            t_change = monotonic_ms();
        } else if (monotonic_ms() - t_change > stall_ms) {
            st = held < 0
                ? rtomo_set_error(err, RTOMO_E_UNAVAILABLE, "scan %s did not "
                                  "become active at %s within %d ms", scan,
                                  c->controls.at[d], stall_ms)
                : rtomo_set_error(err, RTOMO_E_UNAVAILABLE, "scan %s stalled "
                                  "at %.0f of %ld frames at %s for %d ms",
                                  scan, held, frames, c->controls.at[d],
                                  stall_ms);
            break;
        }
        sleep_ms(5);
    }
    json_decref(request);
    return st;
}

rtomo_status rtomo_client_wait_for_scan(rtomo_client *c, const char *scan,
                                        long frames, int stall_ms,
                                        rtomo_error *err)
{
    if (c->controls.n == 0)
        return rtomo_set_error(err, RTOMO_E_STATE,
                               "no control endpoint configured");
    /* Every daemon of a fanned-out stream must hold the frames before
     * the end goes to all of them. */
    for (int d = 0; d < c->controls.n; d++) {
        rtomo_status st = wait_on_daemon(c, d, scan, frames, stall_ms, err);
        if (st != RTOMO_OK)
            return st;
    }
    return RTOMO_OK;
}

/* ------------------------------------------------------ scan outcome ---- */

static const char *const state_names[] = {
    [RTOMO_SCAN_UNKNOWN] = "unknown",
    [RTOMO_SCAN_ACQUIRING] = "acquiring",
    [RTOMO_SCAN_ENDING] = "ending",
    [RTOMO_SCAN_RECONSTRUCTING] = "reconstructing",
    [RTOMO_SCAN_COMPLETE] = "complete",
    [RTOMO_SCAN_ABORTED] = "aborted",
    [RTOMO_SCAN_REFUSED] = "refused",
    [RTOMO_SCAN_OTHER] = "other"};

const char *rtomo_scan_state_name(rtomo_scan_state state)
{
    return (unsigned)state <= RTOMO_SCAN_OTHER ? state_names[state] : "other";
}

static rtomo_scan_state parse_state(const char *name)
{
    for (int s = 0; s < RTOMO_SCAN_OTHER; s++)
        if (strcmp(name, state_names[s]) == 0)
            return (rtomo_scan_state)s;
    return RTOMO_SCAN_OTHER;    /* a newer daemon's: "final" still says */
}

void rtomo_scan_outcome_init(rtomo_scan_outcome *out, const char *scan)
{
    memset(out, 0, sizeof *out);
    snprintf(out->scan, sizeof out->scan, "%s", scan ? scan : "");
}

/* Add `count` rejects of reason `name`.  The table has room for more
 * names than the protocol has; a flood of invented ones is not kept. */
static void add_rejects(rtomo_scan_outcome *o, const char *name, long count)
{
    if (count <= 0)
        return;
    for (int i = 0; i < o->n_rejects; i++)
        if (strcmp(o->rejects[i].name, name) == 0) {
            o->rejects[i].count += count;
            return;
        }
    if (o->n_rejects == RTOMO_OUTCOME_REJECTS)
        return;
    rtomo_reject_tally *t = &o->rejects[o->n_rejects++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->count = count;
}

/* Member `key` as a count >= 0 (absent or null: 0).  0, or -1 when it is
 * something else. */
static int get_count(json_t *scan, const char *key, long *out)
{
    const json_t *v = json_object_get(scan, key);
    *out = 0;
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return -1;
    *out = (long)json_integer_value(v);
    return 0;
}

/* Member `key` as text (absent or null: ""), cut to size. */
static int get_text(json_t *scan, const char *key, char *out, size_t size)
{
    const json_t *v = json_object_get(scan, key);
    out[0] = '\0';
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_string(v))
        return -1;
    snprintf(out, size, "%s", json_string_value(v));
    return 0;
}

static int get_rejects(json_t *scan, rtomo_scan_outcome *o)
{
    json_t *rejects = json_object_get(scan, "rejects"), *v;
    const char *name;
    if (!rejects || json_is_null(rejects))
        return 0;
    if (!json_is_object(rejects))
        return -1;
    json_object_foreach(rejects, name, v) {
        if (!json_is_integer(v) || json_integer_value(v) < 0)
            return -1;
        add_rejects(o, name, (long)json_integer_value(v));
    }
    return 0;
}

rtomo_status rtomo_scan_outcome_from_json(const json_t *scan_object,
                                          rtomo_scan_outcome *o,
                                          rtomo_error *err)
{
    /* jansson's getters take no const; nothing here changes the object */
    json_t *scan = (json_t *)scan_object;
    rtomo_scan_outcome_init(o, NULL);
    if (!json_is_object(scan))
        return rtomo_set_error(err, RTOMO_E_BACKEND,
                               "the \"scan\" answer is not an object");
    const json_t *state = json_object_get(scan, "state");
    const json_t *final = json_object_get(scan, "final");
    if (!json_is_string(state) || !json_is_boolean(final))
        return rtomo_set_error(err, RTOMO_E_BACKEND, "the \"scan\" answer "
                               "lacks a string \"state\" or a boolean "
                               "\"final\"");
    o->state = parse_state(json_string_value(state));
    o->final = json_is_true(final);
    o->incomplete = json_is_true(json_object_get(scan, "incomplete"));
    static const char *const counts[] = {"frames", "rejected", "dropped",
                                         "missing", "images"};
    long *fields[] = {&o->frames, &o->rejected, &o->dropped, &o->missing,
                      &o->images};
    for (int i = 0; i < 5; i++)
        if (get_count(scan, counts[i], fields[i]) != 0)
            return rtomo_set_error(err, RTOMO_E_BACKEND, "the \"scan\" "
                                   "answer's \"%s\" is not a count",
                                   counts[i]);
    if (get_text(scan, "id", o->scan, sizeof o->scan) != 0 ||
        get_text(scan, "kind", o->kind, sizeof o->kind) != 0 ||
        get_text(scan, "code", o->code, sizeof o->code) != 0 ||
        get_text(scan, "reason", o->reason, sizeof o->reason) != 0 ||
        get_rejects(scan, o) != 0)
        return rtomo_set_error(err, RTOMO_E_BACKEND, "the \"scan\" answer "
                               "has a malformed \"id\", \"kind\", \"code\", "
                               "\"reason\" or \"rejects\"");
    o->daemons = 1;
    return RTOMO_OK;
}

/* How bad a state is when daemons disagree (higher wins): anything still
 * changing first, so that a merged outcome is final only when all are;
 * then the failures, the most telling first. */
static int severity(const rtomo_scan_outcome *o)
{
    if (!o->final)
        return o->state == RTOMO_SCAN_ACQUIRING ? 13
             : o->state == RTOMO_SCAN_ENDING ? 12
             : o->state == RTOMO_SCAN_RECONSTRUCTING ? 11 : 10;
    switch (o->state) {
    case RTOMO_SCAN_REFUSED: return 5;
    case RTOMO_SCAN_ABORTED: return 4;
    case RTOMO_SCAN_UNKNOWN: return 2;
    case RTOMO_SCAN_COMPLETE: return 1;
    default: return 3;          /* final in a state we do not know */
    }
}

static void take_explanation(rtomo_scan_outcome *into,
                             const rtomo_scan_outcome *from)
{
    memcpy(into->code, from->code, sizeof into->code);
    memcpy(into->reason, from->reason, sizeof into->reason);
}

void rtomo_scan_outcome_merge(rtomo_scan_outcome *into,
                              const rtomo_scan_outcome *from)
{
    if (from->daemons == 0)
        return;
    if (into->daemons == 0) {
        *into = *from;
        return;
    }
    int worse = severity(from) - severity(into);
    if (worse > 0) {
        into->state = from->state;
        take_explanation(into, from);
    } else if (worse == 0 && !into->reason[0] && !into->code[0]) {
        take_explanation(into, from);
    }
    into->final = into->final && from->final;
    into->incomplete |= from->incomplete;
    into->frames += from->frames;
    into->rejected += from->rejected;
    into->dropped += from->dropped;
    into->missing += from->missing;
    into->images += from->images;
    for (int i = 0; i < from->n_rejects; i++)
        add_rejects(into, from->rejects[i].name, from->rejects[i].count);
    if (!into->kind[0])
        memcpy(into->kind, from->kind, sizeof into->kind);
    into->daemons += from->daemons;
}

/* Daemon d's answer about `scan` in a reply. */
static rtomo_status outcome_of_reply(const rtomo_client *c, int d,
                                     const json_t *reply, const char *scan,
                                     rtomo_scan_outcome *one,
                                     rtomo_error *err)
{
    rtomo_error why;
    if (rtomo_scan_outcome_from_json(json_object_get(reply, "scan"), one,
                                     &why) != RTOMO_OK)
        return rtomo_set_error(err, why.code, "rtomod at %s: %s",
                               c->controls.at[d], why.message);
    if (strcmp(one->scan, scan) != 0)
        return rtomo_set_error(err, RTOMO_E_BACKEND, "rtomod at %s answered "
                               "about scan \"%s\", not \"%s\"",
                               c->controls.at[d], one->scan, scan);
    return RTOMO_OK;
}

/* Ask every daemon once; *out gets their answers merged (none after an
 * error). */
static rtomo_status ask_outcome(rtomo_client *c, const json_t *request,
                                const char *scan, rtomo_scan_outcome *out,
                                rtomo_error *err)
{
    rtomo_scan_outcome_init(out, scan);
    for (int d = 0; d < c->controls.n; d++) {
        json_t *reply = NULL;
        rtomo_scan_outcome one;
        rtomo_status st = request_to(c, d, request, &reply, err);
        if (st == RTOMO_OK)
            st = outcome_of_reply(c, d, reply, scan, &one, err);
        json_decref(reply);
        if (st != RTOMO_OK) {
            rtomo_scan_outcome_init(out, scan);
            return st;
        }
        rtomo_scan_outcome_merge(out, &one);
    }
    return RTOMO_OK;
}

/* Final, and known: a daemon without a record may not have the scan's
 * messages yet.  One that rejected messages of it and accepted none (a
 * begin the decoder refused leaves only rejects) has them. */
static int settled(const rtomo_scan_outcome *o)
{
    return o->final && (o->state != RTOMO_SCAN_UNKNOWN || o->rejected > 0);
}

/* A failed scan's counts may still grow once its state is final: the
 * daemon goes on rejecting its messages that are still on their way, and
 * holds a frame without an acquiring scan up to ingest.reorder_ms
 * (default 200 ms) before it rejects it.  The counts are taken as whole
 * once they held still this long. */
#define SETTLE_MS 500

/* Whether to stop asking: settled and, for a scan that did not complete,
 * its counts unchanged for SETTLE_MS (*total and *since follow them).  A
 * complete scan's end came after all its frames (PROTOCOL.md 3.2): none is
 * on its way any more. */
static int done_waiting(const rtomo_scan_outcome *o, long *total,
                        double *since)
{
    if (!settled(o))
        return 0;
    if (o->state == RTOMO_SCAN_COMPLETE)
        return 1;
    long now_total = o->frames + o->rejected;
    double now = monotonic_ms();
    if (now_total != *total) {
        *total = now_total;
        *since = now;
        return 0;
    }
    return now - *since >= SETTLE_MS;
}

static rtomo_status not_settled(const rtomo_scan_outcome *o, int timeout_ms,
                                rtomo_error *err)
{
    if (o->state == RTOMO_SCAN_UNKNOWN)
        return rtomo_set_error(err, RTOMO_E_UNAVAILABLE, "no record of scan "
                               "%s at rtomod after %d ms: nothing of it "
                               "arrived", o->scan, timeout_ms);
    return rtomo_set_error(err, RTOMO_E_UNAVAILABLE, "scan %s still %s "
                           "after %d ms", o->scan,
                           rtomo_scan_state_name(o->state), timeout_ms);
}

rtomo_status rtomo_client_scan_outcome(rtomo_client *c, const char *scan,
                                       int timeout_ms,
                                       rtomo_scan_outcome *out,
                                       rtomo_error *err)
{
    rtomo_scan_outcome_init(out, scan);
    if (c->controls.n == 0)
        return rtomo_set_error(err, RTOMO_E_STATE,
                               "no control endpoint configured");
    if (!scan || !scan[0] || strlen(scan) >= RTOMO_ID_MAX)
        return rtomo_set_error(err, RTOMO_E_INVALID, "scan id \"%s\" is not "
                               "1 to %d characters", scan ? scan : "(null)",
                               RTOMO_ID_MAX - 1);
    json_t *request = json_pack("{s:s, s:s}", "cmd", "scan", "scan", scan);
    if (!request)
        return rtomo_set_error(err, RTOMO_E_NOMEM, "out of memory");
    double deadline = monotonic_ms() + timeout_ms;
    int pause_ms = 5;           /* short at first: small scans end fast */
    long total = -1;
    double since = 0;
    rtomo_status st;
    for (;;) {
        st = ask_outcome(c, request, scan, out, err);
        if (st != RTOMO_OK || timeout_ms == 0 ||
            done_waiting(out, &total, &since))
            break;
        double left = deadline - monotonic_ms();
        if (timeout_ms > 0 && left <= 0) {
            if (!settled(out))
                st = not_settled(out, timeout_ms, err);
            break;
        }
        pause_ms = settled(out) ? SETTLE_MS / 4
                 : pause_ms < 100 ? pause_ms * 2 : 200;
        sleep_ms(timeout_ms > 0 && left < pause_ms ? (int)left + 1
                                                   : pause_ms);
    }
    json_decref(request);
    return st;
}

/* printf at the end of line[size], cut to fit. */
__attribute__((format(printf, 3, 4)))
static void append(char *line, size_t size, const char *format, ...)
{
    size_t used = strlen(line);
    if (used + 1 >= size)
        return;
    va_list ap;
    va_start(ap, format);
    vsnprintf(line + used, size - used, format, ap);
    va_end(ap);
}

/* "unknown", "complete", "complete with losses", ... */
static void describe_state(const rtomo_scan_outcome *o,
                           rtomo_scan_verdict v, char *line, size_t size)
{
    const char *state = rtomo_scan_state_name(o->state);
    if (v == RTOMO_VERDICT_PENDING)
        append(line, size, "scan %s not finished (%s)", o->scan,
               o->daemons ? state : "no answer");
    else if (v == RTOMO_VERDICT_PARTIAL)
        append(line, size, "scan %s complete with losses", o->scan);
    else
        append(line, size, "scan %s %s%s", o->scan, state,
               o->incomplete ? " (incomplete)" : "");
    if (o->code[0])
        append(line, size, ": %s", o->code);
    if (o->reason[0])
        append(line, size, ": %s", o->reason);
    else if (o->state == RTOMO_SCAN_UNKNOWN && v == RTOMO_VERDICT_FAILED)
        append(line, size, o->rejected > 0 ? ": no message of it was "
               "accepted" : ": rtomod has no record of it");
}

/* "; 500 frames accepted, 12 rejected (shape_mismatch: 12), ..." */
static void describe_counts(const rtomo_scan_outcome *o, char *line,
                            size_t size)
{
    append(line, size, "%s%ld frame%s accepted", o->code[0] ||
           o->reason[0] ? "; " : ": ", o->frames, o->frames == 1 ? "" : "s");
    if (o->rejected > 0) {
        append(line, size, ", %ld rejected", o->rejected);
        for (int i = 0; i < o->n_rejects; i++)
            append(line, size, "%s%s: %ld", i ? ", " : " (",
                   o->rejects[i].name, o->rejects[i].count);
        if (o->n_rejects > 0)
            append(line, size, ")");
    }
    if (o->dropped > 0)
        append(line, size, ", %ld dropped", o->dropped);
    if (o->missing > 0)
        append(line, size, ", %ld missing", o->missing);
    if (o->images > 0 || o->state == RTOMO_SCAN_COMPLETE)
        append(line, size, ", %ld image%s published", o->images,
               o->images == 1 ? "" : "s");
    if (o->daemons > 1)
        append(line, size, " (%d daemons together)", o->daemons);
}

rtomo_scan_verdict rtomo_scan_outcome_verdict(const rtomo_scan_outcome *o,
                                              char *line, size_t size)
{
    rtomo_scan_verdict v;
    if (o->daemons == 0 || !o->final)
        v = RTOMO_VERDICT_PENDING;
    else if (o->state != RTOMO_SCAN_COMPLETE || o->incomplete)
        v = RTOMO_VERDICT_FAILED;
    else if (o->rejected > 0 || o->dropped > 0 || o->missing > 0)
        v = RTOMO_VERDICT_PARTIAL;
    else
        v = RTOMO_VERDICT_SUCCEEDED;
    if (line && size > 0) {
        line[0] = '\0';
        describe_state(o, v, line, size);
        describe_counts(o, line, size);
    }
    return v;
}
