/*
 * stream2.c — DECTRIS Stream V2 messages parsed with libcbor
 * (rtomod_stream2.h).  A structural pre-check walks the bytes first, so
 * that libcbor never allocates for containers the message cannot hold and
 * never recurses deeper than RTOMOD_S2_DEPTH_MAX when it frees them.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include <cbor.h>

#include "rtomod_bitshuffle.h"
#include "rtomod_stream2.h"

#define TAG_MULTIDIM 40             /* RFC 8746 3.1.1, row-major */
#define TAG_UINT8 64                /* RFC 8746 2.1 */
#define TAG_UINT16_LE 69
#define TAG_UINT32_LE 70
#define TAG_DECTRIS_COMPRESSION 56500

/* ------------------------------------------------------- pre-check ---- */

/* The argument of an item head at p (additional info `info`): *value, and
 * the head's length in bytes, or 0 when it is truncated or reserved. */
static size_t head_argument(const uint8_t *p, size_t left, int info,
                            uint64_t *value)
{
    if (info < 24) {
        *value = (uint64_t)info;
        return 1;
    }
    if (info > 27)
        return 0;
    size_t n = (size_t)1 << (info - 24);
    if (left < 1 + n)
        return 0;
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++)
        v = v << 8 | p[1 + i];
    *value = v;
    return 1 + n;
}

/* One open container: items still expected (-1: until a break), and its
 * major type (2: the chunks of an indefinite byte string). */
typedef struct open_item {
    int64_t left;
    int major;
} open_item;

/* Definite byte strings of at least BIG_STRING bytes are not copied by
 * libcbor: the walk records where they lie, the message libcbor parses
 * has a reference in their place (tag REF_TAG over their number), and
 * the accessors resolve it to the bytes in the caller's buffer. */
#define BIG_STRING 65536
#define REF_TAG 0x72746F6DULL       /* "rtom", reserved: refused in input */

typedef struct big_strings {
    int n;
    size_t head[RTOMOD_S2_REFS_MAX];    /* where its head starts */
    size_t data[RTOMOD_S2_REFS_MAX];    /* where its bytes start */
    size_t len[RTOMOD_S2_REFS_MAX];
} big_strings;

static int pre_fail(rtomo_reject_info *why, size_t at, const char *what)
{
    return rtomo_reject_set(why, RTOMO_REJECT_CBOR, "not well-formed CBOR: "
                            "%s at byte %zu", what, at);
}

/* A container or string opened by the head at `at`: push what it holds. */
static int open_container(open_item *stack, int *depth, int major,
                          uint64_t n, int indefinite, size_t left,
                          size_t at, rtomo_reject_info *why)
{
    if (*depth >= RTOMOD_S2_DEPTH_MAX)
        return rtomo_reject_set(why, RTOMO_REJECT_CBOR, "CBOR nests deeper "
                                "than %d at byte %zu", RTOMOD_S2_DEPTH_MAX,
                                at);
    int64_t items = -1;
    if (!indefinite) {
        /* Every item needs a byte at least: a count beyond the bytes
         * left is a lie that must not become an allocation. */
        uint64_t need = major == 5 ? 2 * n : n;
        if (n > left || need > left)
            return pre_fail(why, at, "a container larger than the message");
        items = (int64_t)need;
    }
    stack[*depth].major = major;
    stack[(*depth)++].left = items;
    return 0;
}

/* Walk the item heads; 0 when exactly one top-level item fills the
 * buffer.  Big byte strings go to *big when it is not NULL. */
static int walk(const uint8_t *buf, size_t size, big_strings *big,
                rtomo_reject_info *why)
{
    open_item stack[RTOMOD_S2_DEPTH_MAX];
    int depth = 0;
    size_t pos = 0, items = 0;
    int done = 0;
    while (!done) {
        if (pos >= size)
            return pre_fail(why, pos, "the message ends inside an item");
        if (++items > RTOMOD_S2_ITEMS_MAX)
            return rtomo_reject_set(why, RTOMO_REJECT_CBOR, "more than %d "
                                    "CBOR items in one message",
                                    RTOMOD_S2_ITEMS_MAX);
        int major = buf[pos] >> 5, info = buf[pos] & 31;
        size_t at = pos;
        if (info == 31) {               /* indefinite length, or break */
            pos++;
            if (major == 7) {
                if (depth == 0 || stack[depth - 1].left != -1)
                    return pre_fail(why, at, "a break outside an "
                                    "indefinite item");
                depth--;
            } else if (major >= 2 && major <= 5) {
                if (open_container(stack, &depth, major, 0, 1, size - pos,
                                   at, why) != 0)
                    return -1;
                continue;
            } else {
                return pre_fail(why, at, "an indefinite length on a "
                                "number or tag");
            }
        } else {
            uint64_t n;
            size_t head = head_argument(buf + pos, size - pos, info, &n);
            if (head == 0)
                return pre_fail(why, at, "a truncated or reserved item head");
            pos += head;
            if (major == 6 && n == REF_TAG)
                return pre_fail(why, at, "tag 0x72746F6D, which rtomod "
                                "reserves,");
            if (major == 2 || major == 3) {
                if (n > size - pos)
                    return pre_fail(why, at, "a string longer than the "
                                    "message");
                int chunk = depth > 0 && stack[depth - 1].left == -1 &&
                            stack[depth - 1].major == 2;
                if (big && major == 2 && n >= BIG_STRING && !chunk &&
                    big->n < RTOMOD_S2_REFS_MAX) {
                    big->head[big->n] = at;
                    big->data[big->n] = pos;
                    big->len[big->n++] = (size_t)n;
                }
                pos += (size_t)n;
            } else if (major == 4 || major == 5 || major == 6) {
                uint64_t count = major == 6 ? 1 : n;
                if (count > 0) {
                    if (open_container(stack, &depth, major == 6 ? 4 : major,
                                       count, 0, size - pos, at, why) != 0)
                        return -1;
                    continue;
                }
            }
        }
        /* One item completed: count it against the open containers. */
        while (depth > 0 && stack[depth - 1].left > 0 &&
               --stack[depth - 1].left == 0)
            depth--;
        done = depth == 0;
    }
    if (pos != size)
        return rtomo_reject_set(why, RTOMO_REJECT_CBOR, "%zu bytes follow "
                                "the message's CBOR item", size - pos);
    return 0;
}

int rtomod_s2_precheck(const uint8_t *buf, size_t size,
                       rtomo_reject_info *why)
{
    return walk(buf, size, NULL, why);
}

/* The message with each big string replaced by tag REF_TAG over its
 * number (malloc'd, *out_size bytes); NULL when out of memory. */
static uint8_t *skeleton(const uint8_t *buf, size_t size,
                         const big_strings *big, size_t *out_size)
{
    size_t total = size;
    for (int i = 0; i < big->n; i++)
        total -= big->data[i] + big->len[i] - big->head[i];
    total += (size_t)big->n * 6;        /* 0xda + 4-byte tag, uint 0..23 */
    uint8_t *out = malloc(total ? total : 1);
    if (!out)
        return NULL;
    size_t from = 0, to = 0;
    for (int i = 0; i < big->n; i++) {
        memcpy(out + to, buf + from, big->head[i] - from);
        to += big->head[i] - from;
        to += cbor_encode_tag(REF_TAG, out + to, total - to);
        to += cbor_encode_uint((uint64_t)i, out + to, total - to);
        from = big->data[i] + big->len[i];
    }
    memcpy(out + to, buf + from, size - from);
    *out_size = to + size - from;
    return out;
}

/* ------------------------------------------------------ accessors ---- */

/* The value of `key` in map `map` (text keys; NULL when absent). */
static cbor_item_t *map_get(const cbor_item_t *map, const char *key)
{
    size_t len = strlen(key), n = cbor_map_size(map);
    struct cbor_pair *pairs = cbor_map_handle(map);
    for (size_t i = 0; i < n; i++) {
        const cbor_item_t *k = pairs[i].key;
        if (cbor_isa_string(k) && cbor_string_is_definite(k) &&
            cbor_string_length(k) == len &&
            memcmp(cbor_string_handle(k), key, len) == 0)
            return pairs[i].value;
    }
    return NULL;
}

/* The tagged item without a new reference (the tag keeps its own). */
static cbor_item_t *tagged(const cbor_item_t *tag)
{
    cbor_item_t *item = cbor_tag_item(tag);
    cbor_decref(&item);
    return tag->metadata.tag_metadata.tagged_item;
}

/* Stream V2 may tag any value (e.g. dates): look through tags other than
 * the typed-array ones where a plain value is wanted. */
static const cbor_item_t *untag(const cbor_item_t *item)
{
    int hops = 0;
    while (item && cbor_isa_tag(item) && cbor_tag_value(item) != REF_TAG &&
           hops++ < RTOMOD_S2_DEPTH_MAX)
        item = tagged(item);
    return item;
}

/* A byte string's bytes: its own, or a big one's in the message. */
static int bytes_of(const cbor_item_t *item, const rtomod_s2_msg *msg,
                    const uint8_t **data, size_t *size)
{
    if (cbor_isa_tag(item) && cbor_tag_value(item) == REF_TAG) {
        const cbor_item_t *k = tagged(item);
        if (!cbor_isa_uint(k) || cbor_get_int(k) >= (uint64_t)msg->n_refs)
            return -1;
        *data = msg->source + msg->ref_pos[cbor_get_int(k)];
        *size = msg->ref_len[cbor_get_int(k)];
        return 0;
    }
    if (!cbor_isa_bytestring(item) || !cbor_bytestring_is_definite(item))
        return -1;
    *data = cbor_bytestring_handle(item);
    *size = cbor_bytestring_length(item);
    return 0;
}

static int get_uint(const cbor_item_t *map, const char *key, int required,
                    uint64_t *out, rtomo_reject_info *why)
{
    const cbor_item_t *v = untag(map_get(map, key));
    if (!v) {
        if (!required)
            return 0;
        return rtomo_reject_set(why, RTOMO_REJECT_FIELD, "Stream V2 message "
                                "lacks \"%s\"", key);
    }
    if (!cbor_isa_uint(v))
        return rtomo_reject_set(why, RTOMO_REJECT_FIELD, "Stream V2 field "
                                "\"%s\" is not an unsigned integer", key);
    *out = cbor_get_int(v);
    return 0;
}

/* A definite text value of at most RTOMOD_S2_NAME_MAX - 1 bytes into out
 * ("" when absent and not required). */
static int get_text(const cbor_item_t *item, const char *what, char *out,
                    rtomo_reject_info *why)
{
    item = untag(item);
    if (!cbor_isa_string(item) || !cbor_string_is_definite(item) ||
        cbor_string_length(item) >= RTOMOD_S2_NAME_MAX)
        return rtomo_reject_set(why, RTOMO_REJECT_FIELD, "Stream V2 field "
                                "\"%s\" is not a text of less than %d bytes",
                                what, RTOMOD_S2_NAME_MAX);
    size_t n = cbor_string_length(item);
    memcpy(out, cbor_string_handle(item), n);
    out[n] = '\0';
    return 0;
}

static int get_number(const cbor_item_t *item, double *out)
{
    item = untag(item);
    if (item && cbor_isa_uint(item))
        *out = (double)cbor_get_int(item);
    else if (item && cbor_isa_negint(item))
        *out = -1.0 - (double)cbor_get_int(item);
    else if (item && cbor_is_float(item))
        *out = cbor_float_get_float(item);
    else
        return -1;
    return isfinite(*out) ? 0 : -1;
}

/* --------------------------------------------------------- messages ---- */

static int parse_series(const cbor_item_t *map, rtomod_s2_msg *msg,
                        rtomo_reject_info *why)
{
    if (get_uint(map, "series_id", 1, &msg->series_id, why) != 0)
        return -1;
    const cbor_item_t *uid = map_get(map, "series_unique_id");
    return uid ? get_text(uid, "series_unique_id", msg->series_unique_id,
                          why) : 0;
}

static int dtype_size(const char *name)
{
    return strcmp(name, "uint8") == 0 ? 1 : strcmp(name, "uint16") == 0 ? 2
           : strcmp(name, "uint32") == 0 ? 4 : 0;
}

static int parse_start(const cbor_item_t *map, rtomod_s2_msg *msg,
                       rtomo_reject_info *why)
{
    if (get_uint(map, "image_size_x", 1, &msg->width, why) != 0 ||
        get_uint(map, "image_size_y", 1, &msg->height, why) != 0 ||
        get_uint(map, "number_of_images", 0, &msg->number_of_images,
                 why) != 0)
        return -1;
    const cbor_item_t *dtype = map_get(map, "image_dtype");
    if (dtype) {
        char name[RTOMOD_S2_NAME_MAX];
        if (get_text(dtype, "image_dtype", name, why) != 0)
            return -1;
        if (!(msg->elem_size = dtype_size(name)))
            return rtomo_reject_set(why, RTOMO_REJECT_DTYPE, "Stream V2 "
                                    "image_dtype \"%s\" is none of uint8, "
                                    "uint16, uint32", name);
    }
    const cbor_item_t *channels = untag(map_get(map, "channels"));
    if (!channels)
        return 0;
    if (!cbor_isa_array(channels))
        return rtomo_reject_set(why, RTOMO_REJECT_FIELD, "Stream V2 field "
                                "\"channels\" is not an array");
    size_t n = cbor_array_size(channels);
    cbor_item_t **items = cbor_array_handle(channels);
    for (size_t i = 0; i < n && i < RTOMOD_S2_CHANNELS_MAX; i++)
        if (get_text(items[i], "channels", msg->channels[i], why) != 0)
            return -1;
    msg->n_channels = n < RTOMOD_S2_CHANNELS_MAX ? (int)n
                                                 : RTOMOD_S2_CHANNELS_MAX;
    return 0;
}

/* The bytes of a typed array's content: a byte string, or DECTRIS'
 * compression tag over one. */
static int typed_bytes(const cbor_item_t *content, const rtomod_s2_msg *msg,
                       rtomod_s2_pixels *px, rtomo_reject_info *why)
{
    if (cbor_isa_tag(content) && cbor_tag_value(content) != REF_TAG) {
        if (cbor_tag_value(content) != TAG_DECTRIS_COMPRESSION)
            return rtomo_reject_set(why, RTOMO_REJECT_COMPRESSION, "typed "
                                    "array content has tag %llu, not the "
                                    "compression tag 56500",
                                    (unsigned long long)
                                        cbor_tag_value(content));
        const cbor_item_t *a = tagged(content);
        if (!cbor_isa_array(a) || cbor_array_size(a) != 3)
            return rtomo_reject_set(why, RTOMO_REJECT_COMPRESSION, "tag "
                                    "56500 holds no [algorithm, element "
                                    "size, bytes] array");
        cbor_item_t **f = cbor_array_handle(a);
        char algorithm[RTOMOD_S2_NAME_MAX];
        if (get_text(f[0], "compression algorithm", algorithm, why) != 0) {
            why->reason = RTOMO_REJECT_COMPRESSION;
            return -1;
        }
        if (strcmp(algorithm, "bslz4") != 0)
            return rtomo_reject_set(why, RTOMO_REJECT_COMPRESSION,
                                    "compression \"%s\" is not supported "
                                    "(only \"bslz4\")", algorithm);
        if (!cbor_isa_uint(f[1]) ||
            cbor_get_int(f[1]) != (uint64_t)px->elem_size)
            return rtomo_reject_set(why, RTOMO_REJECT_COMPRESSION, "bslz4 "
                                    "element size is not the typed array's "
                                    "%d bytes", px->elem_size);
        px->bslz4 = 1;
        content = f[2];
    }
    if (bytes_of(content, msg, &px->data, &px->size) != 0)
        return rtomo_reject_set(why, RTOMO_REJECT_FIELD, "typed array "
                                "content is not a definite byte string");
    return 0;
}

/* The elements a router's share of an image decodes to: its bytes, or
 * the size its bslz4 header announces; -1 with *why when that is no
 * whole number of elements. */
static int part_elements(rtomod_s2_pixels *px, rtomo_reject_info *why)
{
    int64_t bytes = px->bslz4 ? rtomod_bslz4_size(px->data, px->size)
                              : (int64_t)px->size;
    if (bytes < 0)
        return rtomo_reject_set(why, RTOMO_REJECT_COMPRESSION, "bslz4 data "
                                "of %zu bytes is shorter than its 12-byte "
                                "header", px->size);
    if (bytes % px->elem_size != 0)
        return rtomo_reject_set(why, RTOMO_REJECT_SIZE, "image data of "
                                "%lld bytes is no whole number of %d-byte "
                                "elements", (long long)bytes, px->elem_size);
    px->elements = (uint64_t)bytes / (uint64_t)px->elem_size;
    return 0;
}

/* A router's share ("rtomo_rows") must lie in the image and hold its rows
 * whole: what a daemon reads of rows it does not hold would be zeros. */
static int check_part(rtomod_s2_pixels *px, rtomo_reject_info *why)
{
    if (part_elements(px, why) != 0)
        return -1;
    const uint64_t w = px->width, end = px->offset + px->elements;
    if (px->rows_first + px->rows_count > px->height)
        return rtomo_reject_set(why, RTOMO_REJECT_FIELD, "\"rtomo_rows\" "
                                "%llu..%llu lie beyond the image's %llu rows",
                                (unsigned long long)px->rows_first,
                                (unsigned long long)(px->rows_first +
                                                     px->rows_count - 1),
                                (unsigned long long)px->height);
    if (px->offset > px->rows_first * w ||
        end < (px->rows_first + px->rows_count) * w ||
        end > px->height * w || end < px->offset)
        return rtomo_reject_set(why, RTOMO_REJECT_SIZE, "image data of %llu "
                                "elements from element %llu do not hold "
                                "\"rtomo_rows\" %llu..%llu of a %llu x %llu "
                                "image whole",
                                (unsigned long long)px->elements,
                                (unsigned long long)px->offset,
                                (unsigned long long)px->rows_first,
                                (unsigned long long)(px->rows_first +
                                                     px->rows_count - 1),
                                (unsigned long long)px->height,
                                (unsigned long long)w);
    return 0;
}

/* tag 40 [[height, width], tag 64/69/70 (bytes or tag 56500)] */
static int parse_multidim(const cbor_item_t *item, const rtomod_s2_msg *msg,
                          rtomod_s2_pixels *px, rtomo_reject_info *why)
{
    if (!cbor_isa_tag(item) || cbor_tag_value(item) != TAG_MULTIDIM)
        return rtomo_reject_set(why, RTOMO_REJECT_FIELD, "image data is not "
                                "a multi-dimensional array (tag 40)");
    const cbor_item_t *a = tagged(item);
    if (!cbor_isa_array(a) || cbor_array_size(a) != 2)
        return rtomo_reject_set(why, RTOMO_REJECT_FIELD, "tag 40 holds no "
                                "[dimensions, array] pair");
    cbor_item_t **f = cbor_array_handle(a);
    if (!cbor_isa_array(f[0]) || cbor_array_size(f[0]) != 2 ||
        !cbor_isa_uint(cbor_array_handle(f[0])[0]) ||
        !cbor_isa_uint(cbor_array_handle(f[0])[1]))
        return rtomo_reject_set(why, RTOMO_REJECT_SHAPE, "image dimensions "
                                "are not [height, width]");
    px->height = cbor_get_int(cbor_array_handle(f[0])[0]);
    px->width = cbor_get_int(cbor_array_handle(f[0])[1]);
    if (!cbor_isa_tag(f[1]))
        return rtomo_reject_set(why, RTOMO_REJECT_FIELD, "image array is "
                                "not a typed array");
    uint64_t tag = cbor_tag_value(f[1]);
    px->elem_size = tag == TAG_UINT8 ? 1 : tag == TAG_UINT16_LE ? 2
                    : tag == TAG_UINT32_LE ? 4 : 0;
    if (!px->elem_size)
        return rtomo_reject_set(why, RTOMO_REJECT_DTYPE, "typed array tag "
                                "%llu is none of uint8 (64), uint16 LE (69), "
                                "uint32 LE (70)", (unsigned long long)tag);
    if (typed_bytes(tagged(f[1]), msg, px, why) != 0)
        return -1;
    if (px->height == 0 || px->width == 0 || px->height > 65536 ||
        px->width > 65536)
        return rtomo_reject_set(why, RTOMO_REJECT_SHAPE, "image of %llu x "
                                "%llu pixels (each side 1..65536)",
                                (unsigned long long)px->height,
                                (unsigned long long)px->width);
    size_t need = (size_t)(px->height * px->width) * (size_t)px->elem_size;
    if (px->rows_count > 0)
        return check_part(px, why);
    px->elements = px->height * px->width;
    if (!px->bslz4 && px->size != need)
        return rtomo_reject_set(why, RTOMO_REJECT_SIZE, "image of %llu x "
                                "%llu pixels of %d bytes has %zu bytes, not "
                                "%zu", (unsigned long long)px->height,
                                (unsigned long long)px->width, px->elem_size,
                                px->size, need);
    return 0;
}

/* The channel to take from the image's data map. */
static int pick_channel(const cbor_item_t *data, const char *channel,
                        rtomod_s2_msg *msg, rtomo_reject_info *why)
{
    if (!data || !cbor_isa_map(data) || cbor_map_size(data) == 0)
        return rtomo_reject_set(why, RTOMO_REJECT_FIELD, "Stream V2 image "
                                "lacks \"data\": a map of channels");
    struct cbor_pair *pairs = cbor_map_handle(data);
    size_t n = cbor_map_size(data), i = 0;
    if (channel && channel[0]) {
        while (i < n && !(cbor_isa_string(pairs[i].key) &&
                          cbor_string_is_definite(pairs[i].key) &&
                          cbor_string_length(pairs[i].key) == strlen(channel) &&
                          memcmp(cbor_string_handle(pairs[i].key), channel,
                                 strlen(channel)) == 0))
            i++;
        if (i == n)
            return rtomo_reject_set(why, RTOMO_REJECT_FIELD, "Stream V2 "
                                    "image has no channel \"%s\" (%zu "
                                    "channels)", channel, n);
    }
    if (get_text(pairs[i].key, "data key", msg->channel, why) != 0)
        return -1;
    return parse_multidim(pairs[i].value, msg, &msg->pixels, why);
}

/* "rtomo_rows": {"first", "count", "offset"} (PROTOCOL.md 10.5), what
 * rtomo-router adds to a daemon's share of an image. */
static int parse_part(const cbor_item_t *map, rtomod_s2_pixels *px,
                      rtomo_reject_info *why)
{
    const cbor_item_t *part = untag(map_get(map, "rtomo_rows"));
    if (!part)
        return 0;
    if (!cbor_isa_map(part))
        return rtomo_reject_set(why, RTOMO_REJECT_FIELD, "\"rtomo_rows\" is "
                                "not a map of first, count, offset");
    if (get_uint(part, "first", 1, &px->rows_first, why) != 0 ||
        get_uint(part, "count", 1, &px->rows_count, why) != 0 ||
        get_uint(part, "offset", 1, &px->offset, why) != 0)
        return -1;
    if (px->rows_count == 0 || px->rows_first > 65535 ||
        px->rows_count > 65536)
        return rtomo_reject_set(why, RTOMO_REJECT_FIELD, "\"rtomo_rows\" "
                                "first %llu, count %llu: not rows of an "
                                "image (count >= 1, each at most 65536)",
                                (unsigned long long)px->rows_first,
                                (unsigned long long)px->rows_count);
    if (px->offset > (uint64_t)65536 * 65536)
        return rtomo_reject_set(why, RTOMO_REJECT_FIELD, "\"rtomo_rows\" "
                                "offset %llu lies beyond any image",
                                (unsigned long long)px->offset);
    return 0;
}

static int parse_image(const cbor_item_t *map, const char *channel,
                       const char *angle_key, rtomod_s2_msg *msg,
                       rtomo_reject_info *why)
{
    if (get_uint(map, "image_id", 1, &msg->image_id, why) != 0)
        return -1;
    if (parse_part(map, &msg->pixels, why) != 0)
        return -1;
    if (msg->image_id > (uint64_t)INT32_MAX)
        return rtomo_reject_set(why, RTOMO_REJECT_INDEX, "image_id %llu is "
                                "beyond 2^31 - 1",
                                (unsigned long long)msg->image_id);
    const cbor_item_t *user = untag(map_get(map, "user_data"));
    if (angle_key && angle_key[0] && user && cbor_isa_map(user)) {
        const cbor_item_t *a = map_get(user, angle_key);
        if (a && get_number(a, &msg->angle) != 0)
            return rtomo_reject_set(why, RTOMO_REJECT_FIELD, "user_data "
                                    "\"%s\" is not a finite number",
                                    angle_key);
    }
    return pick_channel(map_get(map, "data"), channel, msg, why);
}

static int parse_map(const cbor_item_t *map, const char *channel,
                     const char *angle_key, rtomod_s2_msg *msg,
                     rtomo_reject_info *why)
{
    if (!cbor_isa_map(map))
        return rtomo_reject_set(why, RTOMO_REJECT_CBOR, "a Stream V2 message "
                                "is a CBOR map, not major type %d",
                                (int)cbor_typeof(map));
    const cbor_item_t *type = map_get(map, "type");
    char name[RTOMOD_S2_NAME_MAX];
    if (!type || get_text(type, "type", name, why) != 0)
        return rtomo_reject_set(why, RTOMO_REJECT_TYPE, "Stream V2 message "
                                "lacks a text \"type\"");
    if (parse_series(map, msg, why) != 0)
        return -1;
    if (strcmp(name, "start") == 0) {
        msg->kind = RTOMOD_S2_START;
        return parse_start(map, msg, why);
    }
    if (strcmp(name, "image") == 0) {
        msg->kind = RTOMOD_S2_IMAGE;
        return parse_image(map, channel, angle_key, msg, why);
    }
    if (strcmp(name, "end") == 0) {
        msg->kind = RTOMOD_S2_END;
        return 0;
    }
    return rtomo_reject_set(why, RTOMO_REJECT_TYPE, "Stream V2 type \"%s\" "
                            "is none of start, image, end", name);
}

int rtomod_s2_parse(const void *buf, size_t size, const char *channel,
                    const char *angle_key, rtomod_s2_msg *msg,
                    rtomo_reject_info *why)
{
    memset(msg, 0, sizeof *msg);
    msg->angle = NAN;
    big_strings big = {0};
    if (walk(buf, size, &big, why) != 0)
        return -1;
    msg->source = buf;
    msg->n_refs = big.n;
    for (int i = 0; i < big.n; i++) {
        msg->ref_pos[i] = big.data[i];
        msg->ref_len[i] = big.len[i];
    }
    size_t parsed_size = size;
    uint8_t *parsed = big.n ? skeleton(buf, size, &big, &parsed_size) : NULL;
    if (big.n && !parsed)
        return rtomo_reject_set(why, RTOMO_REJECT_OVERSIZE, "out of memory "
                                "for a message of %zu bytes", size);
    struct cbor_load_result result;
    cbor_item_t *root = cbor_load(parsed ? parsed : buf, parsed_size,
                                  &result);
    free(parsed);
    if (!root || result.error.code != CBOR_ERR_NONE) {
        if (root)
            cbor_decref(&root);
        return rtomo_reject_set(why, RTOMO_REJECT_CBOR, "libcbor refuses the "
                                "message (error %d at byte %zu)",
                                (int)result.error.code,
                                result.error.position);
    }
    if (parse_map(root, channel, angle_key, msg, why) != 0) {
        cbor_decref(&root);
        double angle = NAN;
        memset(msg, 0, sizeof *msg);
        msg->angle = angle;
        return -1;
    }
    msg->root = root;
    return 0;
}

void rtomod_s2_clear(rtomod_s2_msg *msg)
{
    cbor_item_t *root = msg->root;
    if (root)
        cbor_decref(&root);
    msg->root = NULL;
}

/* A large copy in pieces, side by side. */
#define COPY_PIECES 16

typedef struct copy_job {
    const uint8_t *src;
    uint8_t *dst;
    size_t size;
} copy_job;

static void copy_piece(void *ctx, int i)
{
    const copy_job *c = ctx;
    size_t piece = (c->size + COPY_PIECES - 1) / COPY_PIECES;
    size_t first = (size_t)i * piece;
    if (first < c->size)
        memcpy(c->dst + first, c->src + first,
               c->size - first < piece ? c->size - first : piece);
}

int rtomod_s2_pixels_decode_on(const rtomod_s2_pixels *px, uint8_t *out,
                               size_t out_size, const rtomod_parallel *par,
                               rtomo_reject_info *why)
{
    if (!px->bslz4) {
        if (px->size != out_size)
            return rtomo_reject_set(why, RTOMO_REJECT_SIZE, "image has %zu "
                                    "bytes, %zu expected", px->size,
                                    out_size);
        copy_job c = {px->data, out, out_size};
        if (par && out_size >= (1u << 20))
            par->run(par->pool, COPY_PIECES, copy_piece, &c);
        else
            memcpy(out, px->data, out_size);
        return 0;
    }
    char text[RTOMO_REASON_MAX - 32];
    if (rtomod_bslz4_decode_parallel(px->data, px->size,
                                     (size_t)px->elem_size, out, out_size,
                                     par, text, sizeof text) != 0)
        return rtomo_reject_set(why, RTOMO_REJECT_COMPRESSION, "%s", text);
    return 0;
}

int rtomod_s2_pixels_decode(const rtomod_s2_pixels *px, uint8_t *out,
                            size_t out_size, rtomo_reject_info *why)
{
    return rtomod_s2_pixels_decode_on(px, out, out_size, NULL, why);
}
