/*
 * input.c — the sockets of rtomod's detector-native inputs
 * (rtomod_input.h): one PULL socket per configured input, read like the
 * native ingest socket (only while the workers have room, a bounded
 * number of messages per loop iteration, the same size limit and the
 * same CURVE rules), their counters, their status and their
 * configuration keys.  What a message means is for input_stream2.c and
 * input_jsonhdr.c; what it becomes, for arm.c.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rtomod.h"
#include "rtomod_decode_pool.h"
#include "rtomod_input.h"

static const char *const input_names[RTOMOD_INPUT_COUNT] = {
    [RTOMOD_INPUT_STREAM2] = "stream2",
    [RTOMOD_INPUT_JSONHDR] = "jsonhdr",
};

const char *rtomod_input_name(rtomod_input_kind kind)
{
    return (unsigned)kind < RTOMOD_INPUT_COUNT ? input_names[kind]
                                               : "unknown";
}

static const char *endpoint_of(const rtomod_config *cfg,
                               rtomod_input_kind kind)
{
    return kind == RTOMOD_INPUT_STREAM2 ? cfg->inputs.stream2_endpoint
                                        : cfg->inputs.jsonhdr_endpoint;
}

/* ------------------------------------------------------------ counts ---- */

void rtomod_input_reject(rtomod_input *in, const rtomo_reject_info *why,
                         const char *scan, int64_t index)
{
    in->rejected++;
    if ((unsigned)why->reason < RTOMO_REJECT_COUNT)
        in->rejects[why->reason]++;
    rtomod_reject(in->d, why, scan, index);
}

/* ----------------------------------------------------------- receive ---- */

/* One whole message: up to 2 parts kept, more counted. */
typedef struct parts {
    zmq_msg_t part[2];
    int n;
} parts;

static int receive(void *socket, parts *m)
{
    zmq_msg_init(&m->part[0]);
    zmq_msg_init(&m->part[1]);
    m->n = 0;
    if (zmq_msg_recv(&m->part[0], socket, ZMQ_DONTWAIT) < 0)
        return errno == EAGAIN ? 0 : -1;
    m->n = 1;
    int more = zmq_msg_more(&m->part[0]);
    while (more) {
        zmq_msg_t extra, *dst = m->n == 1 ? &m->part[1] : &extra;
        if (dst == &extra)
            zmq_msg_init(&extra);
        if (zmq_msg_recv(dst, socket, 0) < 0) {
            if (dst == &extra)
                zmq_msg_close(&extra);
            return -1;
        }
        m->n++;
        more = zmq_msg_more(dst);
        if (dst == &extra)
            zmq_msg_close(&extra);
    }
    return 1;
}

static void handle(rtomod_input *in, parts *m)
{
    rtomod *d = in->d;
    size_t total = zmq_msg_size(&m->part[0]) + zmq_msg_size(&m->part[1]);
    size_t limit = rtomod_config_max_payload(&d->cfg) + RTOMO_HEADER_MAX;
    in->messages++;
    in->bytes_in += total;
    if (total > limit) {
        rtomo_reject_info why;
        rtomo_reject_set(&why, RTOMO_REJECT_OVERSIZE, "%s message of %zu "
                         "bytes exceeds ingest.max_message_mb (%zu bytes)",
                         rtomod_input_name(in->kind), total, limit);
        rtomod_input_reject(in, &why, in->arm.armed ? in->arm.scan : NULL,
                            -1);
        return;
    }
    if (in->kind == RTOMOD_INPUT_STREAM2)
        rtomod_stream2_message(in, zmq_msg_data(&m->part[0]),
                               zmq_msg_size(&m->part[0]), m->n);
    else
        rtomod_jsonhdr_message(in, zmq_msg_data(&m->part[0]),
                               zmq_msg_size(&m->part[0]),
                               zmq_msg_data(&m->part[1]),
                               zmq_msg_size(&m->part[1]), m->n);
}

static void on_readable(rtomod_zwatch *w)
{
    rtomod_input *in = w->data;
    rtomod *d = in->d;
    for (int i = 0; i < d->cfg.ingest.fairness; i++) {
        if (i > 0 && d->phase != RTOMOD_FINISHING &&
            !rtomod_pool_has_room(&d->pool))
            break;
        parts m;
        int rc = receive(in->socket, &m);
        if (rc > 0) {
            d->t_last_ingest = d->t_received = rtomod_now();
            handle(in, &m);
        } else if (rc < 0) {
            log_error("%s: receive failed: %s", rtomod_input_name(in->kind),
                      zmq_strerror(errno));
        }
        zmq_msg_close(&m.part[0]);
        zmq_msg_close(&m.part[1]);
        if (rc <= 0)
            break;
    }
}

/* As the native ingest: read while the workers can take a frame (and,
 * after the drain, only to refuse). */
static int can_read(rtomod_zwatch *w)
{
    rtomod *d = ((rtomod_input *)w->data)->d;
    return d->phase == RTOMOD_FINISHING ||
           (d->phase <= RTOMOD_DRAINING && rtomod_pool_has_room(&d->pool));
}

/* -------------------------------------------------------- open/close ---- */

/* A PULL socket that connects to a detector which binds its PUSH socket
 * (a DECTRIS DCU does, on port 31001): the detector is the server, so
 * rtomod's CURVE server keys and ZAP filters do not apply. */
static void *connect_pull(rtomod *d, const char *endpoint, const char *role,
                          int64_t hard, char *error, size_t error_size)
{
    void *s = zmq_socket(d->zmq, ZMQ_PULL);
    int hwm = d->cfg.ingest.rcvhwm;
    uint64_t affinity = rtomod_config_zmq_affinity(&d->cfg, 1);
    if (!s || zmq_setsockopt(s, ZMQ_RCVHWM, &hwm, sizeof hwm) != 0 ||
        zmq_setsockopt(s, ZMQ_MAXMSGSIZE, &hard, sizeof hard) != 0 ||
        zmq_setsockopt(s, ZMQ_AFFINITY, &affinity, sizeof affinity) != 0 ||
        zmq_connect(s, endpoint) != 0) {
        snprintf(error, error_size, "%s: cannot connect to %s: %s", role,
                 endpoint, zmq_strerror(errno));
        if (s)
            rtomod_zsock_close_now(s);
        return NULL;
    }
    log_info("%s connecting to %s", role, endpoint);
    return s;
}

static int open_input(rtomod *d, rtomod_input *in, const char *endpoint,
                      char *error, size_t error_size)
{
    int64_t hard = (int64_t)rtomod_config_max_payload(&d->cfg) * 2 +
                   RTOMO_HEADER_MAX;
    const int64_t options[] = {
        ZMQ_RCVHWM, d->cfg.ingest.rcvhwm, ZMQ_MAXMSGSIZE, hard,
        ZMQ_AFFINITY, (int64_t)rtomod_config_zmq_affinity(&d->cfg, 1), -1};
    char role[RTOMOD_INPUT_NAME_MAX + 16];
    snprintf(role, sizeof role, "input %s", rtomod_input_name(in->kind));
    /* CZMQ's convention: ">endpoint" connects, "@endpoint" (or none)
     * binds. */
    if (endpoint[0] == '>')
        in->socket = connect_pull(d, endpoint + 1, role, hard, error,
                                  error_size);
    else
        in->socket = rtomod_zsock_bind(d->zmq, ZMQ_PULL,
                                       endpoint + (endpoint[0] == '@'), role,
                                       options, error, error_size);
    if (!in->socket)
        return -1;
    if (rtomod_zwatch_start(d->loop, &in->watch, in->socket, on_readable,
                            can_read, in) != 0) {
        snprintf(error, error_size, "%s: cannot watch the socket: %s", role,
                 zmq_strerror(errno));
        rtomod_zsock_close_now(in->socket);
        in->socket = NULL;
        return -1;
    }
    return 0;
}

int rtomod_inputs_open(rtomod *d, char *error, size_t error_size)
{
    d->inputs = calloc(1, sizeof *d->inputs);
    if (!d->inputs) {
        snprintf(error, error_size, "out of memory for the inputs");
        return -1;
    }
    int any = 0;
    for (int k = 0; k < RTOMOD_INPUT_COUNT; k++) {
        rtomod_input *in = &d->inputs->in[k];
        in->d = d;
        in->kind = (rtomod_input_kind)k;
        const char *endpoint = endpoint_of(&d->cfg, in->kind);
        if (endpoint[0] && open_input(d, in, endpoint, error,
                                      error_size) != 0) {
            rtomod_inputs_close(d);
            return -1;
        }
        any |= endpoint[0] != '\0';
    }
    /* Helpers for decoding only where a detector may send. */
    int threads = rtomod_decode_pool_default_threads();
    if (any && !(d->inputs->pool = rtomod_decode_pool_new(threads))) {
        snprintf(error, error_size, "inputs: cannot start %d decoding "
                 "threads", threads);
        rtomod_inputs_close(d);
        return -1;
    }
    d->inputs->par.run = rtomod_decode_pool_run;
    d->inputs->par.pool = d->inputs->pool;
    if (any)
        log_info("inputs: %d decoding threads beside the loop", threads);
    return 0;
}

void rtomod_inputs_close(rtomod *d)
{
    if (!d->inputs)
        return;
    for (int k = 0; k < RTOMOD_INPUT_COUNT; k++) {
        rtomod_input *in = &d->inputs->in[k];
        if (!in->socket)
            continue;
        rtomod_zwatch_stop(d->loop, &in->watch);
        rtomod_zsock_close_now(in->socket);
        in->socket = NULL;
    }
    rtomod_decode_pool_free(d->inputs->pool);
    free(d->inputs);
    d->inputs = NULL;
}

/* ------------------------------------------------------------ status ---- */

static json_t *rejects_json(const rtomod_input *in)
{
    json_t *out = json_object();
    for (int r = RTOMO_REJECT_NONE + 1; r < RTOMO_REJECT_COUNT; r++)
        if (in->rejects[r])
            json_object_set_new(out, rtomo_reject_name((rtomo_reject)r),
                                json_integer((json_int_t)in->rejects[r]));
    return out;
}

static json_t *input_json(rtomod *d, rtomod_input *in)
{
    const rtomod_arm *a = &in->arm;
    json_t *armed = json_null();
    /* A stale arm (its scan ended or was aborted) is cleared here too. */
    if (rtomod_arm_live(in))
        armed = json_pack("{s:s, s:s, s:I, s:I, s:o}", "scan", a->scan,
                          "kind", a->sbdx ? "sbdx" : "tomo",
                          "frames", (json_int_t)a->frames_taken,
                          "expected", (json_int_t)a->frames_needed,
                          "series", a->series_started
                                        ? json_integer((json_int_t)
                                                       a->series_id)
                                        : json_null());
    return json_pack(
        "{s:s, s:o, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:f, s:o}",
        "endpoint", endpoint_of(&d->cfg, in->kind), "armed", armed,
        "messages", (json_int_t)in->messages,
        "frames", (json_int_t)in->frames,
        "rejected", (json_int_t)in->rejected,
        "series", (json_int_t)in->series,
        "series_ended", (json_int_t)in->series_ended,
        "bytes_in", (json_int_t)in->bytes_in,
        "bytes_out", (json_int_t)in->bytes_out,
        "decode_ms", in->decode_s * 1000.0, "rejects", rejects_json(in));
}

json_t *rtomod_inputs_json(rtomod *d)
{
    json_t *out = json_object();
    for (int k = 0; d->inputs && k < RTOMOD_INPUT_COUNT; k++)
        if (d->inputs->in[k].socket)
            json_object_set_new(out, input_names[k],
                                input_json(d, &d->inputs->in[k]));
    return out;
}

/* ----------------------------------------------------- configuration ---- */

/* null or "" switches the input off; else a string that fits. */
static int parse_text(const json_t *v, char *dst, size_t size, char *why,
                      size_t n)
{
    if (json_is_null(v)) {
        dst[0] = '\0';
        return 0;
    }
    if (!json_is_string(v) || json_string_length(v) >= size) {
        snprintf(why, n, "expected null or a string of less than %zu "
                 "characters", size);
        return -1;
    }
    snprintf(dst, size, "%s", json_string_value(v));
    return 0;
}

int rtomod_input_parse_stream2_endpoint(const json_t *v, rtomod_config *cfg,
                                        char *why, size_t n)
{
    return parse_text(v, cfg->inputs.stream2_endpoint,
                      sizeof cfg->inputs.stream2_endpoint, why, n);
}

json_t *rtomod_input_dump_stream2_endpoint(const rtomod_config *cfg)
{
    return json_string(cfg->inputs.stream2_endpoint);
}

int rtomod_input_parse_stream2_channel(const json_t *v, rtomod_config *cfg,
                                       char *why, size_t n)
{
    return parse_text(v, cfg->inputs.stream2_channel,
                      sizeof cfg->inputs.stream2_channel, why, n);
}

json_t *rtomod_input_dump_stream2_channel(const rtomod_config *cfg)
{
    return json_string(cfg->inputs.stream2_channel);
}

int rtomod_input_parse_jsonhdr_endpoint(const json_t *v, rtomod_config *cfg,
                                        char *why, size_t n)
{
    return parse_text(v, cfg->inputs.jsonhdr_endpoint,
                      sizeof cfg->inputs.jsonhdr_endpoint, why, n);
}

json_t *rtomod_input_dump_jsonhdr_endpoint(const rtomod_config *cfg)
{
    return json_string(cfg->inputs.jsonhdr_endpoint);
}
