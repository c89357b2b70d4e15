/*
 * proto_ingest.c — ingest messages: the decoder every message on the PULL
 * socket goes through (parts, header syntax, version, type, fields, payload
 * size and finiteness), the checks of a frame against its scan, and the
 * encoders of frame and end headers for clients.
 */
#include "config.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto_internal.h"

/* Payloads are little-endian and handed to the engines as host samples. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "rtomo's wire format is little-endian; big-endian hosts would need byte swapping in proto_ingest.c"
#endif

static int is_frame_type(rtomo_msg_type t)
{
    return t == RTOMO_MSG_DARK || t == RTOMO_MSG_FLAT ||
           t == RTOMO_MSG_PROJECTION || t == RTOMO_MSG_SBDX_FRAME;
}

static int is_tomo_frame_type(rtomo_msg_type t)
{
    return t == RTOMO_MSG_DARK || t == RTOMO_MSG_FLAT ||
           t == RTOMO_MSG_PROJECTION;
}

/* --------------------------------------------------- envelope fields ---- */

static int decode_version(const json_t *root, rtomo_reject_info *why)
{
    json_t *v = json_object_get(root, "protocol");
    if (!v)
        return rtomo_reject_set(why, RTOMO_REJECT_VERSION,
                                "missing field \"protocol\" (this daemon "
                                "speaks protocol %d)", RTOMO_PROTOCOL_VERSION);
    if (!json_is_integer(v))
        return rtomo_reject_set(why, RTOMO_REJECT_VERSION,
                                "field \"protocol\" must be the integer %d, "
                                "got %s", RTOMO_PROTOCOL_VERSION,
                                proto_json_type_name(v));
    if (json_integer_value(v) != RTOMO_PROTOCOL_VERSION)
        return rtomo_reject_set(why, RTOMO_REJECT_VERSION,
                                "field \"protocol\" = %lld is not supported "
                                "(this daemon speaks protocol %d)",
                                (long long)json_integer_value(v),
                                RTOMO_PROTOCOL_VERSION);
    return 0;
}

static int decode_type(const json_t *root, rtomo_msg_type *type,
                       rtomo_reject_info *why)
{
    const char *name;
    if (proto_get_string(root, NULL, "type", REQUIRED, &name, why) < 0)
        return -1;
    for (int t = 0; t < RTOMO_MSG_TYPE_COUNT; t++)
        if (strcmp(name, rtomo_msg_type_name((rtomo_msg_type)t)) == 0) {
            *type = (rtomo_msg_type)t;
            return 0;
        }
    return rtomo_reject_set(why, RTOMO_REJECT_TYPE,
                            "field \"type\" = \"%.40s\" is not an ingest "
                            "message type (scan_begin, dark, flat, projection, "
                            "scan_end, sbdx_begin, sbdx_frame, sbdx_end)",
                            name);
}

/* ------------------------------------------------------------ frames ---- */

/* A projection's "axis_shift" (NaN when absent) in the range the FBP
 * engine takes for a detector of `width` bins (rtomo_fbp_axis_shift_valid,
 * as in scan_begin): refused here rather than accepted and then dropped by
 * the engine. */
static int check_axis_shift(const rtomo_frame_header *f, int64_t width,
                            rtomo_reject_info *why)
{
    if (f->type != RTOMO_MSG_PROJECTION || isnan(f->axis_shift) ||
        rtomo_fbp_axis_shift_valid(f->axis_shift, (int)width))
        return 0;
    return rtomo_reject_set(why, RTOMO_REJECT_FIELD,
                            "projection field \"axis_shift\" = %g is outside "
                            "[-%lld, %lld] (at most the detector width)",
                            f->axis_shift, (long long)width, (long long)width);
}

/* A tomography frame's optional "rows": {"first", "count"}: the payload
 * holds only those detector rows (PROTOCOL.md 3.4). */
static int decode_rows(const json_t *root, rtomo_frame_header *f,
                       rtomo_reject_info *why)
{
    const json_t *rows = NULL;
    if (proto_get_object(root, NULL, "rows", OPTIONAL, &rows, why) < 0)
        return -1;
    if (!rows)
        return 0;
    const int64_t height = f->shape[0];
    if (proto_get_int(rows, "rows", "first", REQUIRED, 0, height - 1,
                      &f->rows_first, why) < 0 ||
        proto_get_int(rows, "rows", "count", REQUIRED, 1,
                      height - f->rows_first, &f->rows_count, why) < 0)
        return -1;
    return 0;
}

static int decode_frame_header(const json_t *root, rtomo_frame_header *f,
                               rtomo_reject_info *why)
{
    int dtype;
    if (proto_get_int(root, NULL, "index", REQUIRED, INT64_MIN, INT64_MAX,
                      &f->index, why) < 0)
        return -1;
    if (f->index < 0)
        return rtomo_reject_set(why, RTOMO_REJECT_INDEX,
                                "field \"index\" = %lld is negative",
                                (long long)f->index);
    if (proto_get_enum(root, NULL, "dtype", REQUIRED, proto_parse_dtype,
                       "\"uint8\", \"uint16\", \"float32\"", &dtype, why) < 0)
        return -1;
    f->dtype = (rtomo_dtype)dtype;
    /* Bounds keep the product of the shape far from overflow. */
    f->ndim = f->type == RTOMO_MSG_SBDX_FRAME ? 4 : 2;
    int64_t edge = f->ndim == 4 ? PROTO_MAX_HOLES : PROTO_MAX_EDGE;
    if (proto_get_int_tuple(root, NULL, "shape", REQUIRED, f->ndim, 1, edge,
                            f->shape, why) < 0)
        return -1;
    if (f->ndim == 2 && decode_rows(root, f, why) < 0)
        return -1;
    if (f->type != RTOMO_MSG_PROJECTION)
        return 0;
    if (proto_get_number(root, NULL, "angle", OPTIONAL, &f->angle, why) < 0 ||
        proto_get_number(root, NULL, "axis_shift", OPTIONAL, &f->axis_shift,
                         why) < 0)
        return -1;
    return check_axis_shift(f, f->shape[1], why);
}

/* "[a, b, ...]" into buf. */
static const char *format_shape(char *buf, size_t size, const int64_t *shape,
                                int ndim)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int d = 0; d < ndim && used < size; d++)
        used += (size_t)snprintf(buf + used, size - used, "%s%lld",
                                 d ? ", " : "[", (long long)shape[d]);
    if (used < size)
        snprintf(buf + used, size - used, "]");
    return buf;
}

/* Samples in the payload: the whole shape, or the rows it carries. */
static size_t frame_samples(const rtomo_frame_header *f)
{
    size_t n = 1;
    for (int d = 0; d < f->ndim; d++)
        n *= (size_t)(d == 0 && f->rows_count > 0 ? f->rows_count
                                                   : f->shape[d]);
    return n;
}

/* Index of the first float32 sample that is NaN or infinite, or n.  The
 * payload may be unaligned, so samples are read as bytes. */
static size_t first_nonfinite(const unsigned char *p, size_t n)
{
    const uint32_t exponent = 0x7f800000u;
    for (size_t i = 0; i < n; i++) {
        uint32_t bits;
        memcpy(&bits, p + 4 * i, 4);
        if ((bits & exponent) == exponent)
            return i;
    }
    return n;
}

static int check_payload(const rtomo_frame_header *f, const void *payload,
                         size_t payload_size, rtomo_reject_info *why)
{
    size_t n = frame_samples(f);
    size_t expected = n * rtomo_dtype_size(f->dtype);
    char shape[96];
    format_shape(shape, sizeof shape, f->shape, f->ndim);
    if ((payload_size != expected || (expected && !payload)) &&
        f->rows_count > 0)
        return rtomo_reject_set(why, RTOMO_REJECT_SIZE,
                                "payload of %zu bytes does not match the %lld "
                                "\"rows\" of \"shape\" %s of \"dtype\" %s "
                                "(%zu bytes)", payload_size,
                                (long long)f->rows_count, shape,
                                rtomo_dtype_name(f->dtype), expected);
    if (payload_size != expected || (expected && !payload))
        return rtomo_reject_set(why, RTOMO_REJECT_SIZE,
                                "payload of %zu bytes does not match \"shape\" "
                                "%s of \"dtype\" %s (%zu bytes)", payload_size,
                                shape, rtomo_dtype_name(f->dtype), expected);
    if (f->dtype != RTOMO_DTYPE_F32)
        return 0;
    size_t bad = first_nonfinite(payload, n);
    if (bad < n) {
        size_t width = (size_t)f->shape[f->ndim - 1];
        return rtomo_reject_set(why, RTOMO_REJECT_NONFINITE,
                                "float32 payload sample %zu (row %zu, column "
                                "%zu of shape %s) is NaN or infinite", bad,
                                bad / width + (size_t)f->rows_first,
                                bad % width, shape);
    }
    return 0;
}

/* --------------------------------------------------------- the decoder ---- */

static int check_no_payload(const rtomo_ingest_msg *msg, int n_parts,
                            size_t payload_size, rtomo_reject_info *why)
{
    if (n_parts == 2 && payload_size != 0)
        return rtomo_reject_set(why, RTOMO_REJECT_SIZE,
                                "%s carries no payload, but its second part "
                                "has %zu bytes", rtomo_msg_type_name(msg->type),
                                payload_size);
    return 0;
}

/* The type-specific part of a message whose envelope is valid. */
static int decode_body(const json_t *root, int n_parts, const void *payload,
                       size_t payload_size, rtomo_ingest_msg *msg,
                       rtomo_reject_info *why)
{
    switch (msg->type) {
    case RTOMO_MSG_SCAN_BEGIN:
        return check_no_payload(msg, n_parts, payload_size, why) < 0 ? -1
               : proto_decode_scan_begin(root, msg->scan, &msg->scan_spec, why);
    case RTOMO_MSG_SBDX_BEGIN:
        return check_no_payload(msg, n_parts, payload_size, why) < 0 ? -1
               : proto_decode_sbdx_begin(root, msg->scan, &msg->sbdx_spec, why);
    case RTOMO_MSG_SCAN_END:
    case RTOMO_MSG_SBDX_END:
        return check_no_payload(msg, n_parts, payload_size, why);
    default:
        break;
    }
    if (n_parts != 2)
        return rtomo_reject_set(why, RTOMO_REJECT_PARTS,
                                "%s needs 2 parts (header, payload), got %d",
                                rtomo_msg_type_name(msg->type), n_parts);
    if (decode_frame_header(root, &msg->frame, why) < 0 ||
        check_payload(&msg->frame, payload, payload_size, why) < 0)
        return -1;
    msg->payload = payload;
    msg->payload_size = payload_size;
    return 0;
}

/* A reject names the scan whenever the header (root, may be NULL) has a
 * valid id, whatever else is wrong with the message. */
static void keep_scan_id(const json_t *root, rtomo_ingest_msg *msg)
{
    const char *id = json_string_value(json_object_get(root, "scan"));
    if (id && proto_scan_id_valid(id))
        snprintf(msg->scan, sizeof msg->scan, "%s", id);
}

int rtomo_proto_valid_id(const char *id)
{
    return id && proto_scan_id_valid(id);
}

int rtomo_proto_peek_scan(const void *header, size_t header_size,
                          char out[RTOMO_ID_MAX])
{
    rtomo_ingest_msg msg;
    memset(&msg, 0, sizeof msg);
    json_t *root = proto_parse_object(header, header_size, NULL);
    keep_scan_id(root, &msg);
    json_decref(root);
    memcpy(out, msg.scan, RTOMO_ID_MAX);
    return out[0] ? 0 : -1;
}

int rtomo_proto_decode_ingest(int n_parts, const void *header,
                              size_t header_size, const void *payload,
                              size_t payload_size, rtomo_ingest_msg *msg,
                              rtomo_reject_info *why)
{
    memset(msg, 0, sizeof *msg);
    msg->frame.angle = NAN;
    msg->frame.axis_shift = NAN;
    if (why) {
        why->reason = RTOMO_REJECT_NONE;
        why->message[0] = '\0';
    }
    if (n_parts < 1 || n_parts > 2) {
        rtomo_proto_peek_scan(header, header_size, msg->scan);
        return rtomo_reject_set(why, RTOMO_REJECT_PARTS,
                                "an ingest message has 1 or 2 parts (header, "
                                "payload), got %d", n_parts);
    }
    json_t *root = proto_parse_object(header, header_size, why);
    if (!root)
        return -1;
    int result = -1;
    if (decode_version(root, why) == 0 && decode_type(root, &msg->type, why) == 0 &&
        proto_get_scan_id(root, msg->scan, why) >= 0) {
        msg->frame.type = msg->type;
        memcpy(msg->frame.scan, msg->scan, sizeof msg->scan);
        result = decode_body(root, n_parts, payload, payload_size, msg, why);
    }
    if (result < 0) {
        /* A frame whose header decoded but whose payload failed (size,
         * NaN) is rejected under its index (PROTOCOL.md 6.3). */
        const int64_t index = msg->frame.index;
        const int payload_failed = why && is_frame_type(msg->type) &&
                                   (why->reason == RTOMO_REJECT_NONFINITE ||
                                    why->reason == RTOMO_REJECT_SIZE);
        rtomo_ingest_msg_clear(msg);
        keep_scan_id(root, msg);
        msg->frame.index = payload_failed ? index : -1;
    }
    json_decref(root);
    return result;
}

void rtomo_ingest_msg_clear(rtomo_ingest_msg *msg)
{
    if (!msg)
        return;
    if (msg->scan_spec) {
        rtomo_scan_spec_clear(msg->scan_spec);
        free(msg->scan_spec);
    }
    if (msg->sbdx_spec) {
        rtomo_sbdx_spec_clear(msg->sbdx_spec);
        free(msg->sbdx_spec);
    }
    rtomo_msg_type type = msg->type;
    memset(msg, 0, sizeof *msg);
    msg->type = type;
    msg->frame.angle = NAN;
    msg->frame.axis_shift = NAN;
}

/* ---------------------------------------------- frames against scans ---- */

static int check_common(const rtomo_frame_header *f, const char *scan,
                        rtomo_dtype dtype, const int64_t *shape, int ndim,
                        rtomo_reject_info *why)
{
    const char *what = rtomo_msg_type_name(f->type);
    if (strcmp(f->scan, scan) != 0)
        return rtomo_reject_set(why, RTOMO_REJECT_UNKNOWN_SCAN,
                                "%s for scan \"%s\", but the active scan is "
                                "\"%s\"", what, f->scan, scan);
    if (f->dtype != dtype)
        return rtomo_reject_set(why, RTOMO_REJECT_DTYPE,
                                "%s \"dtype\" %s differs from the scan's %s",
                                what, rtomo_dtype_name(f->dtype),
                                rtomo_dtype_name(dtype));
    int same = f->ndim == ndim;
    for (int d = 0; same && d < ndim; d++)
        same = f->shape[d] == shape[d];
    if (!same) {
        char got[96], want[96];
        return rtomo_reject_set(
            why, RTOMO_REJECT_SHAPE,
            "%s \"shape\" %s differs from the scan's %s (%s)", what,
            format_shape(got, sizeof got, f->shape, f->ndim),
            format_shape(want, sizeof want, shape, ndim),
            ndim > 2 ? "holes_y, holes_x, det_height, det_width"
                     : "det_height, det_width");
    }
    return 0;
}

int rtomo_proto_check_tomo_frame(const rtomo_frame_header *frame,
                                 const rtomo_scan_spec *scan,
                                 rtomo_reject_info *why)
{
    if (!is_tomo_frame_type(frame->type))
        return rtomo_reject_set(why, RTOMO_REJECT_STATE,
                                "%s is not a frame of a tomography scan",
                                rtomo_msg_type_name(frame->type));
    const int64_t shape[2] = {scan->geometry.det_height,
                              scan->geometry.det_width};
    if (check_common(frame, scan->scan, scan->dtype, shape, 2, why) < 0)
        return -1;
    int64_t limit = -1;     /* exclusive bound; -1 = none */
    if (frame->type == RTOMO_MSG_PROJECTION && !scan->continuous)
        limit = scan->geometry.n_proj;
    else if (frame->type == RTOMO_MSG_DARK && scan->n_darks > 0)
        limit = scan->n_darks;
    else if (frame->type == RTOMO_MSG_FLAT && scan->n_flats > 0)
        limit = (int64_t)scan->n_flats + scan->n_flats_after;
    const char *what = rtomo_msg_type_name(frame->type);
    if (frame->index < 0)
        return rtomo_reject_set(why, RTOMO_REJECT_INDEX,
                                "%s \"index\" %lld is negative", what,
                                (long long)frame->index);
    if (limit >= 0 && frame->index >= limit)
        return rtomo_reject_set(why, RTOMO_REJECT_INDEX,
                                "%s \"index\" %lld is outside [0, %lld) "
                                "announced by scan_begin", what,
                                (long long)frame->index, (long long)limit);
    return check_axis_shift(frame, scan->geometry.det_width, why);
}

int rtomo_proto_check_sbdx_frame(const rtomo_frame_header *frame,
                                 const rtomo_sbdx_spec *spec,
                                 rtomo_reject_info *why)
{
    if (frame->type != RTOMO_MSG_SBDX_FRAME)
        return rtomo_reject_set(why, RTOMO_REJECT_STATE,
                                "%s is not a frame of an SBDX stream",
                                rtomo_msg_type_name(frame->type));
    const rtomo_sbdx_geometry *g = &spec->geometry;
    const int64_t shape[4] = {g->holes_y, g->holes_x, g->det_height,
                              g->det_width};
    if (check_common(frame, spec->scan, spec->dtype, shape, 4, why) < 0)
        return -1;
    if (frame->index < 0)
        return rtomo_reject_set(why, RTOMO_REJECT_INDEX,
                                "sbdx_frame \"index\" %lld is negative",
                                (long long)frame->index);
    return 0;
}

/* ---------------------------------------------------------- encoders ---- */

char *rtomo_proto_encode_frame(const rtomo_frame_header *f)
{
    if (!is_frame_type(f->type) || f->ndim < 1 || f->ndim > 4)
        return NULL;
    json_t *shape = json_array();
    for (int d = 0; shape && d < f->ndim; d++)
        if (json_array_append_new(shape, json_integer(f->shape[d])) < 0) {
            json_decref(shape);
            shape = NULL;
        }
    if (!shape)
        return NULL;
    json_t *root = json_pack("{s:i, s:s, s:s, s:I, s:s, s:o}", "protocol",
                             RTOMO_PROTOCOL_VERSION, "type",
                             rtomo_msg_type_name(f->type), "scan", f->scan,
                             "index", (json_int_t)f->index, "dtype",
                             rtomo_dtype_name(f->dtype), "shape", shape);
    if (!root)
        return NULL;
    int e = 0;
    if (f->type == RTOMO_MSG_PROJECTION && isfinite(f->angle))
        e |= json_object_set_new(root, "angle", json_real(f->angle));
    if (f->type == RTOMO_MSG_PROJECTION && isfinite(f->axis_shift))
        e |= json_object_set_new(root, "axis_shift", json_real(f->axis_shift));
    if (f->ndim == 2 && f->rows_count > 0)
        e |= json_object_set_new(root, "rows",
                                 json_pack("{s:I, s:I}", "first",
                                           (json_int_t)f->rows_first, "count",
                                           (json_int_t)f->rows_count));
    if (e) {
        json_decref(root);
        return NULL;
    }
    return proto_dump(root);
}

char *rtomo_proto_encode_end(rtomo_msg_type type, const char *scan)
{
    if ((type != RTOMO_MSG_SCAN_END && type != RTOMO_MSG_SBDX_END) || !scan)
        return NULL;
    return proto_dump(json_pack("{s:i, s:s, s:s}", "protocol",
                                RTOMO_PROTOCOL_VERSION, "type",
                                rtomo_msg_type_name(type), "scan", scan));
}
