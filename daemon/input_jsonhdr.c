/*
 * input_jsonhdr.c — an input for JSON-header streams (rtomod_input.h):
 * PSI std-daq and areaDetector's ZeroMQ plugin (NDPluginZMQ) send each
 * image as two parts, a JSON header of "htype" "array-1.0" (PSI's htypes:
 * "type", "shape" [..., y, x], "frame", optional "endianness" and
 * "encoding") and the raw image.  Such a stream has no start or end
 * message: the arm binds the next images, and the scan ends with the
 * arm's last frame or with "disarm".  A per-image angle may come in the
 * header or in its "ndattr" attributes (the arm's "angle_key").
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "rtomod.h"
#include "rtomod_input.h"

/* An image header as read. */
typedef struct jsonhdr {
    int64_t frame, height, width;
    int elem_size;              /* 1, 2, 4 */
    int is_float;               /* float32 */
    double angle;               /* NaN: none */
} jsonhdr;

static int htype_ok(const json_t *h)
{
    if (json_is_string(h))
        return strcmp(json_string_value(h), "array-1.0") == 0;
    /* ADZMQ before 1.4.0 sent ["array-1.0"]. */
    return json_is_array(h) && json_array_size(h) == 1 &&
           json_is_string(json_array_get(h, 0)) &&
           strcmp(json_string_value(json_array_get(h, 0)), "array-1.0") == 0;
}

static int read_type(const json_t *hdr, jsonhdr *out, rtomo_reject_info *why)
{
    const char *type = json_string_value(json_object_get(hdr, "type"));
    if (!type)
        return rtomo_reject_set(why, RTOMO_REJECT_FIELD, "header lacks "
                                "\"type\" (a string)");
    static const struct { const char *name; int size, is_float; } types[] = {
        {"uint8", 1, 0}, {"uint16", 2, 0}, {"uint32", 4, 0},
        {"float32", 4, 1}};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (strcmp(type, types[i].name) == 0) {
            out->elem_size = types[i].size;
            out->is_float = types[i].is_float;
            return 0;
        }
    return rtomo_reject_set(why, RTOMO_REJECT_DTYPE, "\"type\" \"%.32s\" is "
                            "none of uint8, uint16, uint32, float32", type);
}

/* "shape": [height, width], or [1, ..., height, width]. */
static int read_shape(const json_t *hdr, jsonhdr *out, rtomo_reject_info *why)
{
    const json_t *shape = json_object_get(hdr, "shape");
    size_t n = json_array_size(shape);
    if (!json_is_array(shape) || n < 2 || n > 4)
        return rtomo_reject_set(why, RTOMO_REJECT_SHAPE, "\"shape\" must be "
                                "[height, width] (z, y, x order)");
    for (size_t i = 0; i < n; i++) {
        const json_t *v = json_array_get(shape, i);
        json_int_t x = json_is_integer(v) ? json_integer_value(v) : -1;
        if (x < 1 || x > 65536 || (i + 2 < n && x != 1))
            return rtomo_reject_set(why, RTOMO_REJECT_SHAPE, "\"shape\"[%zu] "
                                    "is not %s", i, i + 2 < n
                                        ? "1 (one image per message)"
                                        : "an integer in 1..65536");
    }
    out->height = json_integer_value(json_array_get(shape, n - 2));
    out->width = json_integer_value(json_array_get(shape, n - 1));
    return 0;
}

/* The angle under `key`: in the header, else in its "ndattr". */
static int read_angle(const json_t *hdr, const char *key, jsonhdr *out,
                      rtomo_reject_info *why)
{
    out->angle = NAN;
    if (!key[0])
        return 0;
    const json_t *v = json_object_get(hdr, key);
    if (!v)
        v = json_object_get(json_object_get(hdr, "ndattr"), key);
    if (!v)
        return 0;
    if (!json_is_number(v) || !isfinite(json_number_value(v)))
        return rtomo_reject_set(why, RTOMO_REJECT_FIELD, "angle \"%s\" is "
                                "not a finite number", key);
    out->angle = json_number_value(v);
    return 0;
}

static int read_header(const void *text, size_t size, const char *angle_key,
                       jsonhdr *out, rtomo_reject_info *why)
{
    json_error_t jerr;
    json_t *hdr = json_loadb(text, size, JSON_REJECT_DUPLICATES, &jerr);
    if (!json_is_object(hdr)) {
        json_decref(hdr);
        return rtomo_reject_set(why, RTOMO_REJECT_JSON, "the header is not "
                                "a JSON object%s%s", hdr ? "" : ": ",
                                hdr ? "" : jerr.text);
    }
    int rc = -1;
    const json_t *frame = json_object_get(hdr, "frame");
    const char *endian = json_string_value(json_object_get(hdr,
                                                           "endianness"));
    const char *encoding = json_string_value(json_object_get(hdr,
                                                             "encoding"));
    if (!htype_ok(json_object_get(hdr, "htype")))
        rtomo_reject_set(why, RTOMO_REJECT_TYPE, "\"htype\" is not "
                         "\"array-1.0\"");
    else if (!json_is_integer(frame) || json_integer_value(frame) < 0 ||
             json_integer_value(frame) > INT32_MAX)
        rtomo_reject_set(why, RTOMO_REJECT_FIELD, "\"frame\" must be an "
                         "integer, 0 to 2^31 - 1");
    else if (endian && strcmp(endian, "little") != 0)
        rtomo_reject_set(why, RTOMO_REJECT_DTYPE, "\"endianness\" \"%.16s\" "
                         "(only little-endian images are taken)", endian);
    else if (encoding && encoding[0])
        rtomo_reject_set(why, RTOMO_REJECT_COMPRESSION, "\"encoding\" "
                         "\"%.32s\" (only raw images are taken)", encoding);
    else if (read_type(hdr, out, why) == 0 && read_shape(hdr, out, why) == 0 &&
             read_angle(hdr, angle_key, out, why) == 0)
        rc = 0;
    if (rc == 0)
        out->frame = json_integer_value(frame);
    json_decref(hdr);
    return rc;
}

/* The raw part, checked against the header's size. */
typedef struct raw {
    const uint8_t *data;
    size_t size;
} raw;

static int copy_raw(void *ctx, uint8_t *out, size_t out_size,
                    rtomo_reject_info *why)
{
    const raw *r = ctx;
    if (r->size != out_size)
        return rtomo_reject_set(why, RTOMO_REJECT_SIZE, "image part has %zu "
                                "bytes, its header's shape and type need %zu",
                                r->size, out_size);
    memcpy(out, r->data, out_size);
    return 0;
}

void rtomod_jsonhdr_message(rtomod_input *in, const void *header,
                            size_t header_size, const void *data,
                            size_t size, int n_parts)
{
    rtomo_reject_info why;
    const char *scan = in->arm.armed ? in->arm.scan : NULL;
    jsonhdr h = {0};
    if (n_parts != 2) {
        rtomo_reject_set(&why, RTOMO_REJECT_PARTS, "a JSON-header image is 2 "
                         "parts (header, image), not %d", n_parts);
        rtomod_input_reject(in, &why, scan, -1);
        return;
    }
    if (read_header(header, header_size, in->arm.angle_key, &h, &why) != 0) {
        rtomod_input_reject(in, &why, scan, -1);
        return;
    }
    if (!rtomod_arm_live(in)) {
        rtomo_reject_set(&why, RTOMO_REJECT_NOT_ARMED, "image %lld, and no "
                         "scan is armed on input jsonhdr", (long long)h.frame);
        rtomod_input_reject(in, &why, NULL, h.frame);
        return;
    }
    /* The part must match before any work is spent on it. */
    size_t need = (size_t)(h.height * h.width) * (size_t)h.elem_size;
    if (size != need) {
        rtomo_reject_set(&why, RTOMO_REJECT_SIZE, "image part has %zu bytes, "
                         "its header's shape and type need %zu", size, need);
        rtomod_input_reject(in, &why, scan, h.frame);
        return;
    }
    rtomod_arm_touch(in);
    raw r = {data, size};
    rtomod_image im = {
        .frame = h.frame, .angle = h.angle, .height = h.height,
        .width = h.width, .src_size = h.elem_size, .src_float = h.is_float,
        .decode = copy_raw, .ctx = &r};
    rtomod_arm_image(in, &im);
}
