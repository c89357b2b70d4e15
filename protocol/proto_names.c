/*
 * proto_names.c — the stable names of the protocol (message types, reject
 * reasons, SBDX plane formats), reject reporting and control error
 * replies.  These names are
 * part of the wire format: PROTOCOL.md lists them, status counters and
 * events use them, so they never change within a protocol version.
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "proto_internal.h"

static const char *const msg_type_names[RTOMO_MSG_TYPE_COUNT] = {
    [RTOMO_MSG_SCAN_BEGIN] = "scan_begin",
    [RTOMO_MSG_DARK] = "dark",
    [RTOMO_MSG_FLAT] = "flat",
    [RTOMO_MSG_PROJECTION] = "projection",
    [RTOMO_MSG_SCAN_END] = "scan_end",
    [RTOMO_MSG_SBDX_BEGIN] = "sbdx_begin",
    [RTOMO_MSG_SBDX_FRAME] = "sbdx_frame",
    [RTOMO_MSG_SBDX_END] = "sbdx_end",
};

static const char *const reject_names[RTOMO_REJECT_COUNT] = {
    [RTOMO_REJECT_NONE] = "none",
    [RTOMO_REJECT_PARTS] = "bad_parts",
    [RTOMO_REJECT_JSON] = "bad_json",
    [RTOMO_REJECT_VERSION] = "bad_version",
    [RTOMO_REJECT_TYPE] = "unknown_type",
    [RTOMO_REJECT_FIELD] = "bad_field",
    [RTOMO_REJECT_GEOMETRY] = "bad_geometry",
    [RTOMO_REJECT_UNKNOWN_SCAN] = "unknown_scan",
    [RTOMO_REJECT_STATE] = "bad_state",
    [RTOMO_REJECT_INDEX] = "index_out_of_range",
    [RTOMO_REJECT_DUPLICATE] = "duplicate_frame",
    [RTOMO_REJECT_SHAPE] = "shape_mismatch",
    [RTOMO_REJECT_DTYPE] = "dtype_mismatch",
    [RTOMO_REJECT_SIZE] = "size_mismatch",
    [RTOMO_REJECT_OVERSIZE] = "oversize",
    [RTOMO_REJECT_NONFINITE] = "non_finite",
    [RTOMO_REJECT_BUDGET] = "over_budget",
    [RTOMO_REJECT_SHUTDOWN] = "shutting_down",
    [RTOMO_REJECT_ENDED] = "scan_ended",
    [RTOMO_REJECT_CBOR] = "bad_cbor",
    [RTOMO_REJECT_COMPRESSION] = "bad_compression",
    [RTOMO_REJECT_NOT_ARMED] = "not_armed",
};

const char *rtomo_msg_type_name(rtomo_msg_type type)
{
    return (unsigned)type < RTOMO_MSG_TYPE_COUNT ? msg_type_names[type]
                                                 : "unknown";
}

const char *rtomo_reject_name(rtomo_reject reason)
{
    return (unsigned)reason < RTOMO_REJECT_COUNT ? reject_names[reason]
                                                 : "unknown";
}

static const char *const plane_format_names[] = {
    [RTOMO_PLANES_FLOAT32] = "float32",
    [RTOMO_PLANES_UINT16] = "uint16",
    [RTOMO_PLANES_NONE] = "none",
};
#define PLANE_FORMAT_COUNT \
    (sizeof plane_format_names / sizeof plane_format_names[0])

const char *rtomo_plane_format_name(rtomo_plane_format format)
{
    return (unsigned)format < PLANE_FORMAT_COUNT ? plane_format_names[format]
                                                 : "unknown";
}

rtomo_status rtomo_plane_format_parse(const char *name,
                                      rtomo_plane_format *out)
{
    for (unsigned i = 0; name && i < PLANE_FORMAT_COUNT; i++)
        if (strcmp(name, plane_format_names[i]) == 0) {
            *out = (rtomo_plane_format)i;
            return RTOMO_OK;
        }
    return RTOMO_E_INVALID;
}

static const char *const method_names[] = {
    [RTOMO_METHOD_FBP] = "fbp",
    [RTOMO_METHOD_SIRT] = "sirt",
    [RTOMO_METHOD_CGLS] = "cgls",
};
#define METHOD_COUNT (sizeof method_names / sizeof method_names[0])

const char *rtomo_method_name(rtomo_method m)
{
    return (unsigned)m < METHOD_COUNT ? method_names[m] : "unknown";
}

rtomo_status rtomo_method_parse(const char *name, rtomo_method *out)
{
    for (unsigned i = 0; name && i < METHOD_COUNT; i++)
        if (strcmp(name, method_names[i]) == 0) {
            *out = (rtomo_method)i;
            return RTOMO_OK;
        }
    return RTOMO_E_INVALID;
}

/* Length of the valid UTF-8 sequence starting at s (1..4), or 0. */
static int utf8_sequence_length(const unsigned char *s)
{
    int n = s[0] < 0x80 ? 1 : (s[0] & 0xE0) == 0xC0 ? 2
          : (s[0] & 0xF0) == 0xE0 ? 3 : (s[0] & 0xF8) == 0xF0 ? 4 : 0;
    if (n == 2 && s[0] < 0xC2)
        return 0;               /* overlong */
    for (int i = 1; i < n; i++)
        if ((s[i] & 0xC0) != 0x80)
            return 0;
    return n;
}

void proto_utf8_sanitize(char *text)
{
    unsigned char *s = (unsigned char *)text;
    while (*s) {
        int n = utf8_sequence_length(s);
        if (n == 0) {
            *s++ = '?';
            continue;
        }
        s += n;
    }
}

int rtomo_reject_set(rtomo_reject_info *why, rtomo_reject reason,
                     const char *format, ...)
{
    if (why) {
        va_list ap;
        why->reason = reason;
        va_start(ap, format);
        vsnprintf(why->message, sizeof why->message, format, ap);
        va_end(ap);
        proto_utf8_sanitize(why->message);
    }
    return -1;
}

char *rtomo_proto_control_error(const char *code, const char *format, ...)
{
    char message[RTOMO_REASON_MAX * 2];
    va_list ap;
    va_start(ap, format);
    vsnprintf(message, sizeof message, format, ap);
    va_end(ap);
    proto_utf8_sanitize(message);
    return proto_dump(json_pack("{s:b, s:s, s:s}", "ok", 0, "error",
                                code ? code : "internal", "message", message));
}
