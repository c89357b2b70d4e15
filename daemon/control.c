/*
 * control.c — rtomod's REP socket (loopback by default): single-part JSON
 * requests {"cmd": ...} answered at once from the loop's own state, so a
 * status query never waits on the engines.
 *
 * Commands: ping, status, get_config, set_config, abort, scan, planes.  Every request gets
 * exactly one reply (REP demands it); a bad one gets
 * {"ok": false, "error": code, "message": words}.
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rtomod.h"
#include "rtomod_input.h"

/* Requests answered per loop iteration at most. */
#define CONTROL_FAIRNESS 16

/* A reply or an error: handlers return a new JSON object or NULL with
 * *error set to the malloc'd error reply text. */
typedef json_t *(*command_fn)(rtomod *d, const json_t *request, char **error);

static char *error_reply(const char *code, const char *format, ...)
    __attribute__((format(printf, 2, 3)));
static char *error_reply(const char *code, const char *format, ...)
{
    char message[RTOMO_REASON_MAX];
    va_list ap;
    va_start(ap, format);
    vsnprintf(message, sizeof message, format, ap);
    va_end(ap);
    return rtomo_proto_control_error(code, "%s", message);
}

static json_t *ok_reply(void) { return json_pack("{s:b}", "ok", 1); }

static json_t *cmd_ping(rtomod *d, const json_t *request, char **error)
{
    (void)d; (void)request; (void)error;
    return json_pack("{s:b, s:b, s:s}", "ok", 1, "pong", 1, "version",
                     RTOMOD_VERSION);
}

static json_t *gpus_json(rtomod *d)
{
    json_t *list = json_array();
    for (int i = 0; i < d->n_gpus; i++)
        json_array_append_new(list, json_pack(
            "{s:i, s:s, s:I, s:f}", "index", d->gpus[i].index,
            "name", d->gpus[i].name,
            "memory_total", (json_int_t)d->gpus[i].memory_total,
            "load", d->telemetry.load[i]));
    return list;
}

/* Every worker, GPU or CPU, with its busy fraction. */
static json_t *workers_json(rtomod *d)
{
    json_t *list = json_array();
    for (int i = 0; i < d->pool.n; i++)
        json_array_append_new(list, json_pack(
            "{s:i, s:i, s:i, s:f}", "index", i,
            "device", d->pool.workers[i].device,
            "cpu_threads", d->pool.workers[i].device < 0
                               ? d->pool.workers[i].options.cpu_threads : 0,
            "load", d->telemetry.load[i]));
    return list;
}

/* The budgets of admission control and what scans hold of them, MB. */
static json_t *memory_json(rtomod *d)
{
    const rtomod_budget *b = &d->budget;
    const double mib = 1024.0 * 1024.0;
    json_t *gpus = json_array();
    for (int i = 0; i < b->n_devices; i++)
        json_array_append_new(gpus, json_pack(
            "{s:f, s:f}", "budget_mb", (double)b->device_limit[i] / mib,
            "used_mb", (double)b->device_used[i] / mib));
    return json_pack("{s:f, s:f, s:f, s:f, s:o}",
                     "host_budget_mb", (double)b->host_limit / mib,
                     "host_used_mb", (double)b->host_used / mib,
                     "early_budget_mb", (double)b->early_limit / mib,
                     "early_used_mb", (double)b->early_used / mib,
                     "devices", gpus);
}

static json_t *cmd_status(rtomod *d, const json_t *request, char **error)
{
    (void)request; (void)error;
    json_t *reply = ok_reply();
    json_t *telemetry = rtomod_telemetry_json(d);
    json_object_set_new(reply, "state", json_string(rtomod_state_name(d)));
    json_object_set_new(reply, "version", json_string(RTOMOD_VERSION));
    json_object_set_new(reply, "uptime_s",
                        json_real(rtomod_now() - d->t_start));
    json_object_set_new(reply, "backend",
                        json_string(rtomo_backend_name(d->backend)));
    json_object_set_new(reply, "gpus", gpus_json(d));
    json_object_set_new(reply, "workers", workers_json(d));
    json_object_set_new(reply, "scan", rtomod_scan_status(d));
    json_object_set_new(reply, "scans", rtomod_scans_status(d));
    json_object_set_new(reply, "memory", memory_json(d));
    json_object_set_new(reply, "output", rtomod_output_json(d->output));
    json_object_set_new(reply, "inputs", rtomod_inputs_json(d));
    json_object_set(reply, "counters", json_object_get(telemetry, "counters"));
    json_object_del(telemetry, "counters");
    json_object_set_new(reply, "telemetry", telemetry);
    return reply;
}

static json_t *config_reply(rtomod *d)
{
    json_t *reply = ok_reply();
    json_object_set_new(reply, "config", rtomod_config_to_json(&d->cfg));
    return reply;
}

static json_t *cmd_get_config(rtomod *d, const json_t *request, char **error)
{
    (void)request; (void)error;
    return config_reply(d);
}

static json_t *cmd_set_config(rtomod *d, const json_t *request, char **error)
{
    const json_t *changes = json_object_get(request, "config");
    if (!json_is_object(changes)) {
        *error = error_reply("bad_argument",
                             "set_config needs \"config\": an object of "
                             "sections");
        return NULL;
    }
    char why[RTOMOD_CONFIG_ERROR_MAX];
    if (rtomod_reconfigure(d, changes, why, sizeof why) != 0) {
        *error = error_reply("bad_argument", "%s", why);
        return NULL;
    }
    return config_reply(d);
}

/* The scan `id` names (the newest of that id), or without id the oldest
 * acquiring scan, else the oldest one still reconstructing. */
static rtomod_scan *scan_to_abort(rtomod *d, const char *id)
{
    if (id)
        return rtomod_scan_named(d, id);
    for (rtomod_scan *s = d->scans; s; s = s->next)
        if (s->phase == RTOMOD_SCAN_ACQUIRING)
            return s;
    return d->scans;
}

static json_t *cmd_abort(rtomod *d, const json_t *request, char **error)
{
    const json_t *id = json_object_get(request, "scan");
    if (id && !json_is_string(id) && !json_is_null(id)) {
        *error = error_reply("bad_argument", "\"scan\" must be a scan id");
        return NULL;
    }
    const char *name = json_is_string(id) ? json_string_value(id) : NULL;
    rtomod_scan *scan = scan_to_abort(d, name);
    if (!scan) {
        *error = name ? error_reply("bad_state", "no scan '%s' is active or "
                                    "reconstructing", name)
                      : error_reply("bad_state", "no scan is active or "
                                    "reconstructing");
        return NULL;
    }
    json_t *reply = json_pack("{s:b, s:s}", "ok", 1, "aborted", scan->id);
    rtomod_scan_abort(d, scan, "aborted", "aborted by a control request");
    return reply;
}

/* What became of a scan: live, from the history, or "unknown". */
static json_t *cmd_scan(rtomod *d, const json_t *request, char **error)
{
    const char *id = json_string_value(json_object_get(request, "scan"));
    if (!id || !rtomo_proto_valid_id(id)) {
        *error = error_reply("bad_argument", "\"scan\" must be a scan id "
                             "(1 to 63 characters from A-Z a-z 0-9 _ . : -)");
        return NULL;
    }
    rtomod_outcome live, unknown;
    const rtomod_outcome *o = NULL;
    rtomod_scan *scan = rtomod_scan_named(d, id);
    if (scan) {
        rtomod_scan_outcome(scan, &live);
        o = &live;
    } else if (!(o = rtomod_history_find(&d->history, id))) {
        memset(&unknown, 0, sizeof unknown);
        snprintf(unknown.id, sizeof unknown.id, "%s", id);
        unknown.state = "unknown";
        o = &unknown;
    }
    json_t *reply = ok_reply();
    json_object_set_new(reply, "scan", rtomod_outcome_json(o));
    return reply;
}

/* Planes of any orientation: replaced when "planes" is given, reported
 * either way.  With several workers each makes the plane from its rows
 * and the loop adds the parts up (scan_tomo.c). */
static json_t *cmd_planes(rtomod *d, const json_t *request, char **error)
{
    const json_t *list = json_object_get(request, "planes");
    if (list) {
        char why[RTOMO_REASON_MAX];
        rtomo_fbp_plane planes[RTOMOD_MAX_PLANES];
        int n = 0;
        if (rtomod_planes_from_json(list, planes, &n, why, sizeof why) != 0) {
            *error = error_reply("bad_argument", "%s", why);
            return NULL;
        }
        memcpy(d->planes, planes, sizeof planes[0] * (size_t)n);
        d->n_planes = n;
    }
    json_t *reply = ok_reply();
    json_object_set_new(reply, "planes",
                        rtomod_planes_to_json(d->planes, d->n_planes));
    return reply;
}

/* Scans armed on detector-native inputs (arm.c). */
static json_t *cmd_arm(rtomod *d, const json_t *request, char **error)
{
    (void)error;
    return rtomod_cmd_arm(d, request);
}

static json_t *cmd_disarm(rtomod *d, const json_t *request, char **error)
{
    (void)error;
    return rtomod_cmd_disarm(d, request);
}

static const struct {
    const char *name;
    command_fn fn;
} commands[] = {
    {"planes", cmd_planes},
    {"ping", cmd_ping},
    {"status", cmd_status},
    {"get_config", cmd_get_config},
    {"set_config", cmd_set_config},
    {"abort", cmd_abort},
    {"scan", cmd_scan},
    {"arm", cmd_arm},
    {"disarm", cmd_disarm},
};

/* The reply text for one request (malloc'd). */
static char *answer(rtomod *d, const char *text, size_t size, int n_parts)
{
    if (n_parts != 1)
        return error_reply("bad_json", "a request is one message part, not %d",
                           n_parts);
    json_error_t jerr;
    json_t *request = json_loadb(text, size, JSON_REJECT_DUPLICATES, &jerr);
    if (!json_is_object(request)) {
        json_decref(request);
        return request ? error_reply("bad_json", "a request must be a JSON "
                                     "object")
                       : error_reply("bad_json", "request is not JSON: %s",
                                     jerr.text);
    }
    const char *cmd = json_string_value(json_object_get(request, "cmd"));
    char *error = NULL;
    json_t *reply = NULL;
    if (!cmd) {
        /* PROTOCOL.md 7: no command named is an unknown command. */
        error = error_reply("unknown_command", "a request needs \"cmd\": a "
                            "command name string");
    } else {
        size_t i = 0;
        while (i < sizeof commands / sizeof commands[0] &&
               strcmp(commands[i].name, cmd) != 0)
            i++;
        if (i == sizeof commands / sizeof commands[0])
            error = error_reply("unknown_command", "unknown command '%s' "
                                "(ping, status, get_config, set_config, "
                                "abort, scan, planes, arm, disarm)", cmd);
        else
            reply = commands[i].fn(d, request, &error);
    }
    json_decref(request);
    if (error)
        return error;
    char *out = json_dumps(reply, JSON_COMPACT);
    json_decref(reply);
    return out ? out : error_reply("internal", "cannot encode the reply");
}

/* Receive one request (all parts); -1 when none waits. */
static int receive_request(void *socket, zmq_msg_t *first, int *n_parts)
{
    zmq_msg_init(first);
    if (zmq_msg_recv(first, socket, ZMQ_DONTWAIT) < 0)
        return -1;
    *n_parts = 1;
    int more = zmq_msg_more(first);
    while (more) {
        zmq_msg_t extra;
        zmq_msg_init(&extra);
        if (zmq_msg_recv(&extra, socket, 0) < 0) {
            zmq_msg_close(&extra);
            break;
        }
        (*n_parts)++;
        more = zmq_msg_more(&extra);
        zmq_msg_close(&extra);
    }
    return 0;
}

static void on_readable(rtomod_zwatch *w)
{
    rtomod *d = w->data;
    for (int i = 0; i < CONTROL_FAIRNESS; i++) {
        zmq_msg_t request;
        int n_parts;
        if (receive_request(d->control, &request, &n_parts) != 0) {
            zmq_msg_close(&request);
            break;
        }
        char *reply = answer(d, zmq_msg_data(&request), zmq_msg_size(&request),
                             n_parts);
        zmq_msg_close(&request);
        /* REP must answer before it can receive again, memory or not. */
        static const char no_memory[] = "{\"ok\":false,\"error\":"
                                        "\"internal\",\"message\":"
                                        "\"out of memory\"}";
        const char *text = reply ? reply : no_memory;
        if (zmq_send(d->control, text, strlen(text), 0) < 0)
            log_error("control: cannot send a reply: %s", zmq_strerror(errno));
        free(reply);
    }
}

int rtomod_control_open(rtomod *d, char *error, size_t error_size)
{
    const int64_t options[] = {
        ZMQ_AFFINITY, (int64_t)rtomod_config_zmq_affinity(&d->cfg, 0), -1};
    d->control = rtomod_zsock_bind(d->zmq, ZMQ_REP, d->cfg.control.endpoint,
                                   "control", options, error, error_size);
    if (!d->control)
        return -1;
    if (rtomod_zwatch_start(d->loop, &d->control_watch, d->control,
                            on_readable, NULL, d) != 0) {
        snprintf(error, error_size, "control: cannot watch the socket: %s",
                 zmq_strerror(errno));
        rtomod_control_close(d);
        return -1;
    }
    return 0;
}

void rtomod_control_close(rtomod *d)
{
    if (!d->control)
        return;
    rtomod_zwatch_stop(d->loop, &d->control_watch);
    rtomod_zsock_close_now(d->control);
    d->control = NULL;
}
