/*
 * router_route.c — rtomo-router's decisions about one ingest message
 * (router_route.h): may it be cut into rows, which rows each daemon needs,
 * and the header and payload range that carry them.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "router_route.h"

/* Detector rows and bins are at most this many (PROTOCOL.md 3.3). */
#define EDGE_MAX 65536L

/* The message type named by the header's "type"; -1 when none. */
static int message_type(const json_t *root)
{
    const char *name = json_string_value(json_object_get(root, "type"));
    for (int t = 0; name && t < RTOMO_MSG_TYPE_COUNT; t++)
        if (strcmp(name, rtomo_msg_type_name((rtomo_msg_type)t)) == 0)
            return t;
    return -1;
}

static int is_frame_type(int t)
{
    return t == RTOMO_MSG_DARK || t == RTOMO_MSG_FLAT ||
           t == RTOMO_MSG_PROJECTION || t == RTOMO_MSG_SBDX_FRAME;
}

/* Element i of "shape" when it is a JSON integer in [1, EDGE_MAX], else
 * -1. */
static long shape_edge(const json_t *shape, size_t i)
{
    const json_t *v = json_array_get(shape, i);
    if (!json_is_integer(v))
        return -1;
    json_int_t n = json_integer_value(v);
    return n >= 1 && n <= EDGE_MAX ? (long)n : -1;
}

/* Shape and dtype of a frame that is otherwise fit to cut, checked
 * against its payload; NULL when they agree (m's shape is set), else why
 * not. */
static const char *check_shape(const json_t *root, size_t payload_size,
                               router_message *m)
{
    const json_t *shape = json_object_get(root, "shape");
    long height = shape_edge(shape, 0), width = shape_edge(shape, 1);
    if (!json_is_array(shape) || json_array_size(shape) != 2 || height < 0 ||
        width < 0)
        return "its shape is not [height, width]";
    const char *name = json_string_value(json_object_get(root, "dtype"));
    rtomo_dtype dtype;
    if (!name || rtomo_dtype_parse(name, &dtype) != RTOMO_OK)
        return "its dtype is not one the router knows";
    size_t row_bytes = (size_t)width * rtomo_dtype_size(dtype);
    if (payload_size != (size_t)height * row_bytes)
        return "its payload is not shape x dtype size";
    m->height = height;
    m->width = width;
    m->row_bytes = row_bytes;
    return NULL;
}

/* Whether the header says protocol version 1: another version may lay
 * frames out differently, or give SBDX frames a meaning across frames,
 * so it is not the router's to cut or deal. */
static int version_1(const json_t *root)
{
    const json_t *version = json_object_get(root, "protocol");
    return json_is_integer(version) &&
           json_integer_value(version) == RTOMO_PROTOCOL_VERSION;
}

/* Why an sbdx_frame cannot be dealt to one daemon, or NULL when it can.
 * Its payload is not checked: whichever daemon gets it judges it, as it
 * would judge a frame sent to it alone. */
static const char *cannot_deal(const json_t *root, int parts)
{
    if (!version_1(root))
        return "not protocol version 1";
    return parts != 2 ? "not two parts" : NULL;
}

/* Why the message cannot be cut into rows, or NULL when it can. */
static const char *cannot_split(const json_t *root, int type, int parts,
                                size_t payload_size, router_message *m)
{
    if (type != RTOMO_MSG_DARK && type != RTOMO_MSG_FLAT &&
        type != RTOMO_MSG_PROJECTION)
        return "not a dark, flat or projection";
    if (!version_1(root))
        return "not protocol version 1";
    if (parts != 2)
        return "not two parts";
    /* Already cut once (by another router): cutting again would need the
     * offsets of both; the daemon decides. */
    const json_t *rows = json_object_get(root, "rows");
    if (rows && !json_is_null(rows))
        return "it already carries rows";
    return check_shape(root, payload_size, m);
}

/* Whether the header with the widest "rows" this frame can get still fits
 * the protocol's limit (jansson re-encodes it, so its length may
 * change). */
static int rows_header_fits(router_message *m)
{
    router_rows widest = {m->height - 1, m->height};
    char *text = router_header_with_rows(m, widest);
    int fits = text && strlen(text) <= RTOMO_HEADER_MAX;
    free(text);
    return fits;
}

void router_message_read(router_message *m, const void *header, size_t size,
                         int parts, size_t payload_size)
{
    memset(m, 0, sizeof *m);
    m->route = ROUTER_WHOLE;
    m->type = -1;
    /* Duplicate keys are refused: the daemon refuses them too (bad_json),
     * and a rewrite would silently pick one of them. */
    json_t *root = json_loadb(header, size, JSON_REJECT_DUPLICATES, NULL);
    if (!json_is_object(root)) {
        m->why_whole = "its header is not a JSON object";
        json_decref(root);
        return;
    }
    const char *scan = json_string_value(json_object_get(root, "scan"));
    if (scan && rtomo_proto_valid_id(scan))
        snprintf(m->scan, sizeof m->scan, "%s", scan);
    int type = message_type(root);
    m->type = type;
    m->is_frame = is_frame_type(type);
    if (type == RTOMO_MSG_SBDX_FRAME) {
        m->why_whole = cannot_deal(root, parts);
        m->route = m->why_whole ? ROUTER_WHOLE : ROUTER_DEAL;
        json_decref(root);
        return;
    }
    m->why_whole = type < 0 ? "its type is unknown"
                            : cannot_split(root, type, parts, payload_size, m);
    if (m->why_whole) {
        json_decref(root);
        return;
    }
    m->header = root;
    m->route = ROUTER_SPLIT;
    if (!rows_header_fits(m)) {
        router_message_clear(m);
        m->why_whole = "its header leaves no room for rows";
    }
}

void router_message_clear(router_message *m)
{
    json_decref(m->header);
    m->header = NULL;
    m->route = ROUTER_WHOLE;
}

int router_rows_needed(router_rows own, long margin, long height,
                       router_rows *out)
{
    long lo = own.first - margin, hi = own.first + own.count + margin;
    if (lo < 0)
        lo = 0;
    if (hi > height)
        hi = height;
    if (lo >= hi || (lo == 0 && hi == height))
        return 0;
    out->first = lo;
    out->count = hi - lo;
    return 1;
}

char *router_header_with_rows(router_message *m, router_rows rows)
{
    json_t *band = json_pack("{s:I, s:I}", "first", (json_int_t)rows.first,
                             "count", (json_int_t)rows.count);
    if (!band || json_object_set_new(m->header, "rows", band) != 0)
        return NULL;
    return json_dumps(m->header, JSON_COMPACT);
}

void router_payload_range(const router_message *m, router_rows rows,
                          size_t *offset, size_t *length)
{
    *offset = (size_t)rows.first * m->row_bytes;
    *length = (size_t)rows.count * m->row_bytes;
}

/* A whole number in [lo, hi] that is all of text[0..len). */
static int parse_bounded(const char *text, size_t len, long lo, long hi,
                         long *out)
{
    char digits[32], *end;
    if (len == 0 || len >= sizeof digits)
        return -1;
    memcpy(digits, text, len);
    digits[len] = '\0';
    errno = 0;
    long v = strtol(digits, &end, 10);
    if (errno || *end || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

/* ",stream2=EP2" at the end of a --daemon argument: the endpoint into
 * out->stream2 and the length of what comes before it in *length. */
static int parse_stream2(const char *text, router_target *out, size_t *length,
                         char *why, size_t why_size)
{
    static const char key[] = ",stream2=";
    const char *at = strstr(text, key);
    *length = at ? (size_t)(at - text) : strlen(text);
    out->stream2[0] = '\0';
    if (!at)
        return 0;
    const char *ep = at + strlen(key);
    if (!ep[0] || strlen(ep) >= sizeof out->stream2 || strchr(ep, ',')) {
        snprintf(why, why_size, "the Stream V2 endpoint of '%s' is not one "
                 "endpoint of 1 to %zu characters", text,
                 sizeof out->stream2 - 1);
        return -1;
    }
    memcpy(out->stream2, ep, strlen(ep) + 1);
    return 0;
}

int router_parse_target(const char *text, router_target *out, char *why,
                        size_t why_size)
{
    size_t total;
    if (parse_stream2(text, out, &total, why, why_size) != 0)
        return -1;
    const char *eq = NULL;
    for (const char *p = text; p < text + total; p++)
        eq = *p == '=' ? p : eq;
    const char *colon = eq ? memchr(eq, ':', total - (size_t)(eq - text))
                           : NULL;
    if (!eq || eq == text || !colon) {
        snprintf(why, why_size, "'%s' is not ENDPOINT=FIRST:COUNT"
                 "[,stream2=ENDPOINT]", text);
        return -1;
    }
    size_t len = (size_t)(eq - text);
    if (len >= sizeof out->endpoint) {
        snprintf(why, why_size, "the endpoint of '%s' is longer than %zu "
                 "characters", text, sizeof out->endpoint - 1);
        return -1;
    }
    long first, count;
    if (parse_bounded(eq + 1, (size_t)(colon - eq - 1), 0, EDGE_MAX - 1,
                      &first) != 0 ||
        parse_bounded(colon + 1, total - (size_t)(colon + 1 - text), 1,
                      EDGE_MAX, &count) != 0 ||
        first + count > EDGE_MAX) {
        snprintf(why, why_size, "the rows of '%s' are not FIRST:COUNT with "
                 "0 <= FIRST, 1 <= COUNT and FIRST + COUNT <= %ld (a "
                 "detector's rows)", text, EDGE_MAX);
        return -1;
    }
    memcpy(out->endpoint, text, len);
    out->endpoint[len] = '\0';
    out->rows = (router_rows){first, count};
    return 0;
}
