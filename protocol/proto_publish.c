/*
 * proto_publish.c — headers of published messages: images (slice, plane,
 * composite, depth) and events.  Image headers always carry every field
 * (null where a value does not apply) so that subscribers see one schema.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "proto_internal.h"

static const char *const image_topics[] = {
    RTOMO_TOPIC_SLICE, RTOMO_TOPIC_PLANE, RTOMO_TOPIC_COMPOSITE,
    RTOMO_TOPIC_DEPTH, RTOMO_TOPIC_PREVIEW, NULL};

void rtomo_image_header_init(rtomo_image_header *h)
{
    memset(h, 0, sizeof *h);
    snprintf(h->topic, sizeof h->topic, "%s", RTOMO_TOPIC_SLICE);
    h->frame = -1;
    h->slice = -1;
    h->plane = -1;
    h->count = 1;
    h->ratio = NAN;
    h->dtype = RTOMO_DTYPE_F32;
    h->u16_scale = 1.0f;
    h->min = h->max = h->mean = NAN;
    h->angle_first = h->angle_last = NAN;
    h->projection_first = h->projection_last = -1;
    h->projections = -1;
    h->axis = NAN;
    for (int i = 0; i < 3; i++)
        h->centre[i] = h->u[i] = h->v[i] = NAN;
    h->latency_ms = h->compute_ms = NAN;
    h->residual = NAN;
}

/* A number, or null where it does not apply (JSON has no NaN). */
static json_t *number_or_null(double x)
{
    return isfinite(x) ? json_real(x) : json_null();
}

/* A non-negative integer, or null where it does not apply (-1). */
static json_t *index_or_null(int64_t i)
{
    return i >= 0 ? json_integer((json_int_t)i) : json_null();
}

/* Unix time in seconds, for "time" fields. */
static double unix_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A tomography plane's "centre", "u", "v": three numbers each, or null
 * for every other image. */
static int encode_plane_geometry(json_t *root, const rtomo_image_header *h)
{
    const struct { const char *key; const double *v; } vectors[] = {
        {"centre", h->centre}, {"u", h->u}, {"v", h->v}};
    int e = 0;
    for (size_t i = 0; i < 3; i++) {
        const double *v = vectors[i].v;
        json_t *value = isfinite(v[0]) && isfinite(v[1]) && isfinite(v[2])
                            ? json_pack("[f, f, f]", v[0], v[1], v[2])
                            : json_null();
        e |= json_object_set_new(root, vectors[i].key, value);
    }
    return e;
}

/* A tomography slice's method, iteration, final and residual; nothing
 * for other images. */
static int encode_method(json_t *root, const rtomo_image_header *h)
{
    if (!h->method[0])
        return 0;
    return json_object_set_new(root, "method", json_string(h->method)) |
           json_object_set_new(root, "iteration", json_integer(h->iteration)) |
           json_object_set_new(root, "final", json_boolean(h->final)) |
           json_object_set_new(root, "residual", number_or_null(h->residual));
}

char *rtomo_proto_encode_image_header(const rtomo_image_header *h)
{
    json_t *root = json_pack(
        "{s:i, s:s, s:s, s:I, s:i, s:i, s:i, s:i, s:o, s:i, s:i, "
        "s:[i, i, i, i], s:s, s:f, s:f}",
        "protocol", RTOMO_PROTOCOL_VERSION, "type", h->topic, "scan", h->scan,
        "frame", (json_int_t)h->frame, "index", h->index, "count", h->count,
        "slice", h->slice, "plane", h->plane, "ratio", number_or_null(h->ratio),
        "width", h->width, "height", h->height, "roi", h->roi[0], h->roi[1],
        h->roi[2], h->roi[3], "dtype", rtomo_dtype_name(h->dtype), "u16_scale",
        (double)h->u16_scale, "u16_offset", (double)h->u16_offset);
    if (!root)
        return NULL;
    const struct { const char *key; double value; } numbers[] = {
        {"min", h->min}, {"max", h->max}, {"mean", h->mean},
        {"angle_first", h->angle_first}, {"angle_last", h->angle_last},
        {"latency_ms", h->latency_ms}, {"compute_ms", h->compute_ms},
        {"axis", h->axis}};
    int e = 0;
    for (size_t i = 0; i < sizeof numbers / sizeof numbers[0]; i++)
        e |= json_object_set_new(root, numbers[i].key,
                                 number_or_null(numbers[i].value));
    e |= json_object_set_new(root, "projection_first",
                             index_or_null(h->projection_first));
    e |= json_object_set_new(root, "projection_last",
                             index_or_null(h->projection_last));
    e |= json_object_set_new(root, "projections",
                             index_or_null(h->projections));
    e |= encode_plane_geometry(root, h);
    e |= encode_method(root, h);
    e |= json_object_set_new(root, "seq", json_integer((json_int_t)h->seq));
    if (e) {
        json_decref(root);
        return NULL;
    }
    return proto_dump(root);
}

/* The envelope of a published header: protocol version and type. */
static int decode_envelope(const json_t *root, const char **type,
                           rtomo_reject_info *why)
{
    int64_t version;
    if (proto_get_int(root, NULL, "protocol", REQUIRED, INT64_MIN, INT64_MAX,
                      &version, why) < 0)
        return rtomo_reject_set(why, RTOMO_REJECT_VERSION,
                                "field \"protocol\" is missing or not an "
                                "integer");
    if (version != RTOMO_PROTOCOL_VERSION)
        return rtomo_reject_set(why, RTOMO_REJECT_VERSION,
                                "field \"protocol\" = %lld is not supported "
                                "(this library speaks protocol %d)",
                                (long long)version, RTOMO_PROTOCOL_VERSION);
    return proto_get_string(root, NULL, "type", REQUIRED, type, why) < 0 ? -1
                                                                        : 0;
}

/* Copy string field `key` (optional) into out[size], truncating. */
static int copy_string(const json_t *root, const char *key, char *out,
                       size_t size, rtomo_reject_info *why)
{
    const char *s;
    int r = proto_get_string(root, NULL, key, OPTIONAL, &s, why);
    if (r == FIELD_OK) {
        snprintf(out, size, "%s", s);
        proto_utf8_sanitize(out);
    }
    return r;
}

/* "centre", "u", "v" when present: arrays of three finite numbers. */
static int decode_plane_geometry(const json_t *root, rtomo_image_header *h,
                                 rtomo_reject_info *why)
{
    const struct { const char *key; double *v; } vectors[] = {
        {"centre", h->centre}, {"u", h->u}, {"v", h->v}};
    for (size_t i = 0; i < 3; i++) {
        const json_t *a = json_object_get(root, vectors[i].key);
        if (!a || json_is_null(a))
            continue;
        if (!json_is_array(a) || json_array_size(a) != 3)
            return rtomo_reject_set(why, RTOMO_REJECT_FIELD,
                                    "field \"%s\" is not an array of 3 "
                                    "numbers", vectors[i].key);
        for (size_t k = 0; k < 3; k++) {
            const json_t *x = json_array_get(a, k);
            if (!json_is_number(x) || !isfinite(json_number_value(x)))
                return rtomo_reject_set(why, RTOMO_REJECT_FIELD,
                                        "field \"%s\"[%zu] is not a finite "
                                        "number", vectors[i].key, k);
            vectors[i].v[k] = json_number_value(x);
        }
    }
    return 0;
}

/* "method", "iteration", "final" of a tomography slice, when present. */
static int decode_method(const json_t *root, rtomo_image_header *h,
                         rtomo_reject_info *why)
{
    const char *method = NULL;
    int r = proto_get_string(root, NULL, "method", OPTIONAL, &method, why);
    if (r < 0)
        return -1;
    if (r == FIELD_OK) {
        rtomo_method m;
        if (rtomo_method_parse(method, &m) != RTOMO_OK)
            return rtomo_reject_set(why, RTOMO_REJECT_FIELD,
                                    "field \"method\" is not one of "
                                    "\"fbp\", \"sirt\", \"cgls\"");
        snprintf(h->method, sizeof h->method, "%s", rtomo_method_name(m));
    }
    return proto_get_int32(root, NULL, "iteration", OPTIONAL, 0,
                           RTOMO_MAX_ITERATIONS, &h->iteration, why) < 0 ||
                   proto_get_bool(root, NULL, "final", OPTIONAL, &h->final,
                                  why) < 0
               ? -1 : 0;
}

static int decode_image_numbers(const json_t *root, rtomo_image_header *h,
                                rtomo_reject_info *why)
{
    double scale = h->u16_scale, offset = h->u16_offset;
    int64_t roi[4] = {0, 0, h->width, h->height};
    int64_t seq = 0;
    if (proto_get_int(root, NULL, "frame", OPTIONAL, INT64_MIN, INT64_MAX,
                      &h->frame, why) < 0 ||
        proto_get_int(root, NULL, "projection_first", OPTIONAL, 0, INT64_MAX,
                      &h->projection_first, why) < 0 ||
        proto_get_int(root, NULL, "projection_last", OPTIONAL, 0, INT64_MAX,
                      &h->projection_last, why) < 0 ||
        proto_get_int(root, NULL, "seq", OPTIONAL, 0, INT64_MAX, &seq,
                      why) < 0 ||
        proto_get_int(root, NULL, "projections", OPTIONAL, 0, INT64_MAX,
                      &h->projections, why) < 0 ||
        decode_plane_geometry(root, h, why) < 0 ||
        proto_get_int32(root, NULL, "slice", OPTIONAL, -1, INT32_MAX, &h->slice,
                        why) < 0 ||
        proto_get_int32(root, NULL, "plane", OPTIONAL, -1, INT32_MAX, &h->plane,
                        why) < 0 ||
        proto_get_int_tuple(root, NULL, "roi", OPTIONAL, 4, 0, INT32_MAX, roi,
                            why) < 0 ||
        proto_get_number(root, NULL, "u16_scale", OPTIONAL, &scale, why) < 0 ||
        proto_get_number(root, NULL, "u16_offset", OPTIONAL, &offset, why) < 0 ||
        proto_check_u16_scaling(scale, offset, "", why) < 0)
        return -1;
    for (int i = 0; i < 4; i++)
        h->roi[i] = (int)roi[i];
    h->seq = (uint64_t)seq;
    h->u16_scale = (float)scale;
    h->u16_offset = (float)offset;
    struct { const char *key; double *value; } numbers[] = {
        {"ratio", &h->ratio}, {"min", &h->min}, {"max", &h->max},
        {"mean", &h->mean}, {"angle_first", &h->angle_first},
        {"angle_last", &h->angle_last}, {"latency_ms", &h->latency_ms},
        {"compute_ms", &h->compute_ms}, {"axis", &h->axis},
        {"residual", &h->residual}};
    for (size_t i = 0; i < sizeof numbers / sizeof numbers[0]; i++)
        if (proto_get_number(root, NULL, numbers[i].key, OPTIONAL,
                             numbers[i].value, why) < 0)
            return -1;
    return decode_method(root, h, why);
}

static int decode_image(const json_t *root, const char *type,
                        size_t payload_size, rtomo_image_header *h,
                        rtomo_reject_info *why)
{
    int known = 0;
    for (int i = 0; image_topics[i]; i++)
        known |= strcmp(type, image_topics[i]) == 0;
    if (!known)
        return rtomo_reject_set(why, RTOMO_REJECT_TYPE,
                                "field \"type\" = \"%.40s\" is not an image "
                                "topic (slice, plane, composite, depth, "
                                "preview)", type);
    snprintf(h->topic, sizeof h->topic, "%s", type);
    int dtype = (int)h->dtype;
    if (copy_string(root, "scan", h->scan, sizeof h->scan, why) < 0 ||
        proto_get_int32(root, NULL, "width", REQUIRED, 1, PROTO_MAX_EDGE,
                        &h->width, why) < 0 ||
        proto_get_int32(root, NULL, "height", REQUIRED, 1, PROTO_MAX_EDGE,
                        &h->height, why) < 0 ||
        proto_get_enum(root, NULL, "dtype", REQUIRED, proto_parse_dtype,
                       "\"uint8\", \"uint16\", \"float32\"", &dtype, why) < 0 ||
        proto_get_int32(root, NULL, "count", REQUIRED, 1, INT32_MAX, &h->count,
                        why) < 0 ||
        proto_get_int32(root, NULL, "index", REQUIRED, 0, h->count - 1,
                        &h->index, why) < 0 ||
        decode_image_numbers(root, h, why) < 0)
        return -1;
    h->dtype = (rtomo_dtype)dtype;
    size_t expected = (size_t)h->width * (size_t)h->height *
                      rtomo_dtype_size(h->dtype);
    if (payload_size != expected)
        return rtomo_reject_set(why, RTOMO_REJECT_SIZE,
                                "%s payload of %zu bytes does not match "
                                "\"width\" %d x \"height\" %d of \"dtype\" %s "
                                "(%zu bytes)", h->topic, payload_size,
                                h->width, h->height,
                                rtomo_dtype_name(h->dtype), expected);
    return 0;
}

int rtomo_proto_decode_image_header(const void *json, size_t size,
                                    size_t payload_size,
                                    rtomo_image_header *h,
                                    rtomo_reject_info *why)
{
    rtomo_image_header_init(h);
    json_t *root = proto_parse_object(json, size, why);
    if (!root)
        return -1;
    const char *type;
    int result = decode_envelope(root, &type, why);
    if (result == 0)
        result = decode_image(root, type, payload_size, h, why);
    json_decref(root);
    return result;
}

/* ------------------------------------------------------------ events ---- */

char *rtomo_proto_encode_event(const rtomo_event *ev)
{
    /* Fields are copied so that a truncated multi-byte character cannot
     * make the JSON encoder fail. */
    rtomo_event e = *ev;
    e.event[sizeof e.event - 1] = '\0';
    e.scan[sizeof e.scan - 1] = '\0';
    e.reason[sizeof e.reason - 1] = '\0';
    e.message[sizeof e.message - 1] = '\0';
    proto_utf8_sanitize(e.event);
    proto_utf8_sanitize(e.scan);
    proto_utf8_sanitize(e.reason);
    proto_utf8_sanitize(e.message);
    return proto_dump(json_pack(
        "{s:i, s:s, s:f, s:s, s:o, s:I, s:s, s:s, s:I}", "protocol",
        RTOMO_PROTOCOL_VERSION, "type", RTOMO_TOPIC_EVENT, "time",
        unix_seconds(), "event", e.event, "scan",
        e.scan[0] ? json_string(e.scan) : json_null(), "index",
        (json_int_t)e.index, "reason", e.reason, "message", e.message,
        "seq", (json_int_t)e.seq));
}

int rtomo_proto_decode_event(const void *json, size_t size, rtomo_event *ev,
                             rtomo_reject_info *why)
{
    memset(ev, 0, sizeof *ev);
    ev->index = -1;
    json_t *root = proto_parse_object(json, size, why);
    if (!root)
        return -1;
    const char *type, *name;
    int64_t seq = 0;
    int result = decode_envelope(root, &type, why);
    if (result == 0 && strcmp(type, RTOMO_TOPIC_EVENT) != 0)
        result = rtomo_reject_set(why, RTOMO_REJECT_TYPE,
                                  "field \"type\" = \"%.40s\" is not \"event\"",
                                  type);
    if (result == 0 &&
        (proto_get_string(root, NULL, "event", REQUIRED, &name, why) < 0 ||
         copy_string(root, "scan", ev->scan, sizeof ev->scan, why) < 0 ||
         proto_get_int(root, NULL, "index", OPTIONAL, INT64_MIN, INT64_MAX,
                       &ev->index, why) < 0 ||
         copy_string(root, "reason", ev->reason, sizeof ev->reason, why) < 0 ||
         copy_string(root, "message", ev->message, sizeof ev->message,
                     why) < 0 ||
         proto_get_int(root, NULL, "seq", OPTIONAL, 0, INT64_MAX, &seq,
                       why) < 0))
        result = -1;
    if (result == 0) {
        ev->seq = (uint64_t)seq;
        snprintf(ev->event, sizeof ev->event, "%s", name);
        proto_utf8_sanitize(ev->event);
    }
    json_decref(root);
    return result;
}
