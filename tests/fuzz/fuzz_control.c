/*
 * fuzz_control.c — libFuzzer harness of the control socket's request
 * parsing.  The request handler itself (daemon/control.c, answer()) needs
 * a running daemon, so this harness takes its pure parts in the same
 * order: the request JSON (one part, duplicates refused), "cmd", the
 * set_config "config" object through rtomod_config_apply_json with
 * runtime_only (what rtomod_reconfigure does), abort's "scan", and the
 * error replies (rtomo_proto_control_error), which must always be valid
 * JSON whatever text they quote.
 *
 * Input: the request's bytes.
 */
#include <jansson.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_config_common.h"
#include "rtomo_protocol.h"

/* As control.c's error_reply: the message is cut at RTOMO_REASON_MAX
 * bytes (possibly inside a UTF-8 sequence) before it is quoted. */
static void error_reply(const char *code, const char *format, ...)
    __attribute__((format(printf, 2, 3)));
static void error_reply(const char *code, const char *format, ...)
{
    char message[RTOMO_REASON_MAX];
    va_list ap;
    va_start(ap, format);
    vsnprintf(message, sizeof message, format, ap);
    va_end(ap);
    char *reply = rtomo_proto_control_error(code, "%s", message);
    FUZZ_CHECK(reply, "rtomo_proto_control_error gave no reply for \"%s\"",
               message);
    json_error_t jerr;
    json_t *parsed = json_loads(reply, 0, &jerr);
    FUZZ_CHECK(json_is_object(parsed) &&
                   json_is_false(json_object_get(parsed, "ok")) &&
                   json_is_string(json_object_get(parsed, "error")),
               "error reply is not {\"ok\": false, \"error\": ...}: %s",
               reply);
    json_decref(parsed);
    free(reply);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_error_t jerr;
    json_t *request = json_loadb((const char *)data, size,
                                 JSON_REJECT_DUPLICATES, &jerr);
    if (!json_is_object(request)) {
        if (request)
            error_reply("bad_json", "a request must be a JSON object");
        else
            error_reply("bad_json", "request is not JSON: %s", jerr.text);
        json_decref(request);
        return 0;
    }
    const char *cmd = json_string_value(json_object_get(request, "cmd"));
    if (!cmd) {
        error_reply("bad_argument", "a request needs \"cmd\"");
    } else if (strcmp(cmd, "set_config") == 0) {
        const json_t *changes = json_object_get(request, "config");
        if (json_is_object(changes))
            fuzz_apply_checked(changes, 1);
        else
            error_reply("bad_argument", "set_config needs \"config\"");
    } else if (strcmp(cmd, "abort") == 0) {
        const json_t *id = json_object_get(request, "scan");
        if (id && !json_is_string(id) && !json_is_null(id))
            error_reply("bad_argument", "\"scan\" must be a scan id");
        else if (json_is_string(id))
            error_reply("bad_state", "no scan '%s' is active or "
                        "reconstructing", json_string_value(id));
    } else if (strcmp(cmd, "ping") != 0 && strcmp(cmd, "status") != 0 &&
               strcmp(cmd, "get_config") != 0) {
        error_reply("unknown_command", "unknown command '%s' (ping, status, "
                    "get_config, set_config, abort)", cmd);
    }
    json_decref(request);
    return 0;
}
