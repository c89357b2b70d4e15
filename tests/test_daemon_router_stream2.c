/*
 * test_daemon_router_stream2.c — rtomo-router's Stream V2 input (issue
 * 16): a detector's DECTRIS Stream V2 received once and each image cut to
 * the rows each daemon reconstructs.
 *   - the cut on its own (router_stream2.h), read back by the daemon's own
 *     parser and decoder (daemon/stream2.c): uncompressed and bslz4 images
 *     of 1-, 2- and 4-byte pixels, blocks that do and do not line up with
 *     rows, partial last blocks and elements left in no block, one and two
 *     channels, definite and indefinite maps; every band of rows decodes
 *     to exactly the image's elements from its offset, and holds the band;
 *   - what the router passes on whole (start, end, what it cannot read),
 *     and what the daemon refuses of a share that lies (bad_field,
 *     size_mismatch); the --daemon argument's stream2=;
 *   - the real router between a detector and three real daemons armed with
 *     the same scan, each reconstructing a third of the rows, beside a
 *     fourth fed the whole stream: uncompressed and bslz4, the merged
 *     slices equal the fourth's (and the engine's) and each of the three
 *     received about a third of the bytes; a share that lacks rows a
 *     daemon reads is refused shape_mismatch; a daemon that is gone has
 *     its share counted lost and logged once.
 */
#include "config.h"

#include <check.h>
#include <lz4.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "router_harness.h"
#include "router_stream2.h"
#include "rtomod_bitshuffle.h"
#include "rtomod_stream2.h"

/* --------------------------------------------------- CBOR messages ---- */

/* A growing buffer of CBOR. */
typedef struct cbor_out {
    uint8_t *p;
    size_t n, cap;
} cbor_out;

static void out_bytes(cbor_out *o, const void *src, size_t n)
{
    if (o->n + n > o->cap) {
        o->cap = (o->n + n) * 2 + 64;
        o->p = realloc(o->p, o->cap);
        ck_assert_ptr_nonnull(o->p);
    }
    memcpy(o->p + o->n, src, n);
    o->n += n;
}

static void out_head(cbor_out *o, int major, uint64_t v)
{
    uint8_t b[9];
    int n = v < 24 ? 0 : v <= 0xff ? 1 : v <= 0xffff ? 2
            : v <= 0xffffffffu ? 4 : 8;
    static const int info[9] = {0, 24, 25, 0, 26, 0, 0, 0, 27};
    b[0] = (uint8_t)(major << 5 | (n ? info[n] : (int)v));
    for (int i = 0; i < n; i++)
        b[1 + i] = (uint8_t)(v >> (8 * (n - 1 - i)));
    out_bytes(o, b, 1 + (size_t)n);
}

static void out_text(cbor_out *o, const char *s)
{
    out_head(o, 3, strlen(s));
    out_bytes(o, s, strlen(s));
}

static void out_key_uint(cbor_out *o, const char *key, uint64_t v)
{
    out_text(o, key);
    out_head(o, 0, v);
}

/* The sample value of channel c at element i, in `size` bytes. */
static uint32_t sample(int c, size_t i, int size)
{
    uint32_t v = (uint32_t)(i * 2654435761u >> 7) + (uint32_t)c * 977u;
    return size == 4 ? v : size == 2 ? v & 0xffff : v & 0xff;
}

/* n elements of `size` bytes of channel c, little-endian. */
static uint8_t *channel_data(int c, size_t n, int size)
{
    uint8_t *d = malloc(n * (size_t)size + 1);
    ck_assert_ptr_nonnull(d);
    for (size_t i = 0; i < n; i++)
        for (int b = 0; b < size; b++)
            d[i * (size_t)size + (size_t)b] =
                (uint8_t)(sample(c, i, size) >> (8 * b));
    return d;
}

/* bslz4 of n elements of `size` bytes in blocks of `block` elements, as
 * the bitshuffle HDF5 filter frames them (PROTOCOL.md 10.5). */
static uint8_t *bslz4(const uint8_t *data, size_t n, int size, size_t block,
                      size_t *out_size)
{
    const size_t s = (size_t)size;
    size_t cap = 12 + (n / 8 + 2) * 4 +
                 (size_t)LZ4_compressBound((int)(n * s)) + n * s + 64;
    uint8_t *out = malloc(cap), *tmp = malloc(block * s + 8);
    ck_assert(out && tmp);
    for (int i = 0; i < 8; i++)
        out[i] = (uint8_t)((uint64_t)(n * s) >> (56 - 8 * i));
    for (int i = 0; i < 4; i++)
        out[8 + i] = (uint8_t)((uint32_t)(block * s) >> (24 - 8 * i));
    size_t pos = 12, done = 0;
    for (;;) {
        size_t m = n - done >= block ? block : (n - done) / 8 * 8;
        if (m == 0)
            break;
        rtomod_bitshuffle(data + done * s, tmp, m, s);
        int c = LZ4_compress_default((const char *)tmp, (char *)out + pos + 4,
                                     (int)(m * s), (int)(cap - pos - 4));
        ck_assert_int_gt(c, 0);
        for (int i = 0; i < 4; i++)
            out[pos + (size_t)i] = (uint8_t)((uint32_t)c >> (24 - 8 * i));
        pos += 4 + (size_t)c;
        done += m;
    }
    memcpy(out + pos, data + done * s, (n - done) * s);
    *out_size = pos + (n - done) * s;
    free(tmp);
    return out;
}

/* What an image message holds. */
typedef struct image_spec {
    uint64_t series, id;
    int height, width, size;    /* size: bytes per pixel */
    int channels;               /* 1 or 2: "c0", "c1" */
    size_t block;               /* bslz4 block elements; 0 = uncompressed */
    int raw_second;             /* channel 1 uncompressed all the same */
    int indefinite;             /* the top-level map of indefinite length */
    const uint8_t *const *data; /* per channel: its bytes (NULL: the
                                   sample pattern) */
    const size_t *data_size;
} image_spec;

/* One channel's typed array: tag 40 [[h, w], tag (bytes | 56500 [...])]. */
static void out_array(cbor_out *o, const image_spec *im, int c)
{
    static const int tags[5] = {0, 64, 69, 0, 70};
    size_t n = (size_t)im->height * (size_t)im->width, bytes;
    size_t block = im->raw_second && c == 1 ? 0 : im->block;
    uint8_t *own = im->data ? NULL : channel_data(c, n, im->size);
    const uint8_t *data = own ? own : im->data[c];
    bytes = own ? n * (size_t)im->size : im->data_size[c];
    uint8_t *packed = NULL;
    if (block && own) {
        packed = bslz4(own, n, im->size, block, &bytes);
        data = packed;
    }
    out_head(o, 6, 40);
    out_head(o, 4, 2);
    out_head(o, 4, 2);
    out_head(o, 0, (uint64_t)im->height);
    out_head(o, 0, (uint64_t)im->width);
    out_head(o, 6, (uint64_t)tags[im->size]);
    if (block) {
        out_head(o, 6, 56500);
        out_head(o, 4, 3);
        out_text(o, "bslz4");
        out_head(o, 0, (uint64_t)im->size);
    }
    out_head(o, 2, bytes);
    out_bytes(o, data, bytes);
    free(own);
    free(packed);
}

/* An image message; `extra` (may be NULL) writes more pairs, counted in
 * n_extra. */
static uint8_t *image_message(const image_spec *im,
                              void (*extra)(cbor_out *), int n_extra,
                              size_t *size)
{
    cbor_out o = {0};
    if (im->indefinite)
        out_bytes(&o, "\xbf", 1);
    else
        out_head(&o, 5, 6 + (uint64_t)n_extra);
    out_text(&o, "type");
    out_text(&o, "image");
    out_key_uint(&o, "series_id", im->series);
    out_text(&o, "series_unique_id");
    out_text(&o, "router-test");
    out_key_uint(&o, "image_id", im->id);
    out_text(&o, "data");
    out_head(&o, 5, (uint64_t)im->channels);
    for (int c = 0; c < im->channels; c++) {
        out_text(&o, c ? "c1" : "c0");
        out_array(&o, im, c);
    }
    out_text(&o, "user_data");
    out_head(&o, 5, 1);
    out_text(&o, "angle");
    out_head(&o, 0, 42);
    if (extra)
        extra(&o);
    if (im->indefinite)
        out_bytes(&o, "\xff", 1);
    *size = o.n;
    return o.p;
}

static uint8_t *start_message(uint64_t series, int height, int width,
                              uint64_t images, size_t *size)
{
    cbor_out o = {0};
    out_head(&o, 5, 8);
    out_text(&o, "type");
    out_text(&o, "start");
    out_key_uint(&o, "series_id", series);
    out_text(&o, "series_unique_id");
    out_text(&o, "router-test");
    out_key_uint(&o, "image_size_x", (uint64_t)width);
    out_key_uint(&o, "image_size_y", (uint64_t)height);
    out_text(&o, "image_dtype");
    out_text(&o, "uint16");
    out_key_uint(&o, "number_of_images", images);
    out_text(&o, "channels");
    out_head(&o, 4, 1);
    out_text(&o, "c0");
    *size = o.n;
    return o.p;
}

static uint8_t *end_message(uint64_t series, size_t *size)
{
    cbor_out o = {0};
    out_head(&o, 5, 3);
    out_text(&o, "type");
    out_text(&o, "end");
    out_key_uint(&o, "series_id", series);
    out_text(&o, "series_unique_id");
    out_text(&o, "router-test");
    *size = o.n;
    return o.p;
}

/* ------------------------------------------------------------ the cut ---- */

/* The cut of `msg` for `rows`, read back by the daemon's parser: every
 * channel decodes to the image's elements from the offset, which hold
 * the rows; the message's other fields are unchanged. */
static void check_cut(const uint8_t *msg, size_t size, const image_spec *im,
                      router_rows rows)
{
    router_s2_message m;
    router_s2_read(&m, msg, size);
    ck_assert_msg(m.cut, "not cut: %s", m.why_whole);
    size_t cut_size;
    uint8_t *cut = router_s2_cut(&m, rows, &cut_size);
    ck_assert_ptr_nonnull(cut);
    const uint64_t w = (uint64_t)im->width;
    for (int c = 0; c < im->channels; c++) {
        rtomod_s2_msg p;
        rtomo_reject_info why;
        ck_assert_msg(rtomod_s2_parse(cut, cut_size, c ? "c1" : "c0",
                                      "angle", &p, &why) == 0,
                      "rows %ld+%ld: %s", rows.first, rows.count,
                      why.message);
        const rtomod_s2_pixels *px = &p.pixels;
        ck_assert(p.image_id == im->id && p.series_id == im->series);
        ck_assert(p.angle == 42.0);
        ck_assert(px->height == (uint64_t)im->height && px->width == w);
        ck_assert(px->rows_first == (uint64_t)rows.first &&
                  px->rows_count == (uint64_t)rows.count);
        ck_assert_uint_eq(px->offset, router_s2_offset(&m, rows));
        ck_assert(px->offset <= rows.first * w &&
                  px->offset + px->elements >= (rows.first + rows.count) * w);
        size_t bytes = (size_t)px->elements * (size_t)im->size;
        uint8_t *got = malloc(bytes + 1);
        ck_assert_msg(rtomod_s2_pixels_decode(px, got, bytes, &why) == 0,
                      "rows %ld+%ld do not decode: %s", rows.first,
                      rows.count, why.message);
        uint8_t *want = channel_data(c, (size_t)(px->offset + px->elements),
                                     im->size);
        ck_assert_msg(memcmp(got, want + px->offset * (uint64_t)im->size,
                             bytes) == 0,
                      "rows %ld+%ld of channel %d differ", rows.first,
                      rows.count, c);
        free(got);
        free(want);
        rtomod_s2_clear(&p);
    }
    free(cut);
    router_s2_clear(&m);
}

/* Every band of rows of the image (all of them for small images, a
 * selection of a tall one's). */
static void check_every_band(const image_spec *im)
{
    size_t size;
    uint8_t *msg = image_message(im, NULL, 0, &size);
    const int h = im->height, step = h > 16 ? 5 : 1;
    for (int first = 0; first < h; first += step)
        for (int count = 1; first + count <= h; count += step)
            check_cut(msg, size, im, (router_rows){first, count});
    free(msg);
}

START_TEST(cut_images_decode_to_their_rows)
{
    /* h, w, pixel bytes, channels, block elements (0 = uncompressed). */
    static const int cases[][5] = {
        {48, 64, 2, 1, 0},   {48, 64, 2, 1, 200}, {48, 64, 2, 1, 256},
        {48, 64, 2, 2, 0},   {48, 64, 2, 2, 200}, {13, 7, 2, 1, 16},
        {13, 7, 1, 1, 8},    {13, 7, 4, 1, 24},   {5, 3, 2, 1, 4096},
        {9, 5, 4, 2, 0},     {17, 3, 1, 1, 64},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        image_spec im = {.series = 3, .id = 11 + i, .height = cases[i][0],
                         .width = cases[i][1], .size = cases[i][2],
                         .channels = cases[i][3],
                         .block = (size_t)cases[i][4],
                         .indefinite = (int)(i % 3 == 1)};
        check_every_band(&im);
    }
}
END_TEST

/* A message the router must pass on as it came. */
static void assert_whole(const uint8_t *msg, size_t size, int is_image,
                         const char *what)
{
    router_s2_message m;
    router_s2_read(&m, msg, size);
    ck_assert_msg(!m.cut, "%s was cut", what);
    ck_assert_msg(m.why_whole && m.why_whole[0], "%s: no reason", what);
    ck_assert_msg(m.is_image == is_image, "%s: is_image %d", what,
                  m.is_image);
    router_s2_clear(&m);
}

static void already_cut(cbor_out *o)
{
    out_text(o, "rtomo_rows");
    out_head(o, 5, 0);
}

START_TEST(what_cannot_be_cut_goes_whole)
{
    size_t size;
    uint8_t *msg = start_message(1, 48, 64, 10, &size);
    assert_whole(msg, size, 0, "a start message");
    router_s2_message m;
    router_s2_read(&m, msg, size);
    ck_assert_uint_eq(m.series_id, 1);
    router_s2_clear(&m);
    free(msg);
    msg = end_message(1, &size);
    assert_whole(msg, size, 0, "an end message");
    free(msg);
    assert_whole((const uint8_t *)"not cbor at all", 15, 0, "text");
    assert_whole((const uint8_t *)"", 0, 0, "nothing");

    image_spec im = {.series = 1, .id = 2, .height = 6, .width = 8,
                     .size = 2, .channels = 1};
    msg = image_message(&im, already_cut, 1, &size);
    assert_whole(msg, size, 1, "an image already cut");
    free(msg);
    msg = image_message(&im, NULL, 0, &size);
    msg = realloc(msg, size + 1);
    msg[size] = 0;
    assert_whole(msg, size + 1, 1, "an image with a byte after it");
    /* Its type came before the end that is missing. */
    assert_whole(msg, size - 1, 1, "an image cut short");
    free(msg);

    /* Uncompressed bytes that are not the image's. */
    uint8_t bytes[96] = {0};
    const uint8_t *data[1] = {bytes};
    const size_t short_size[1] = {95};
    im.data = data;
    im.data_size = short_size;
    msg = image_message(&im, NULL, 0, &size);
    assert_whole(msg, size, 1, "an image of 95 bytes for 6 x 8 uint16");
    free(msg);

    /* bslz4 whose last block runs past its data, or leaves bytes over. */
    size_t packed_size;
    uint8_t *pixels = channel_data(0, 48, 2);
    uint8_t *packed = bslz4(pixels, 48, 2, 16, &packed_size);
    im.block = 16;
    const uint8_t *pk[1] = {packed};
    size_t sizes[1] = {packed_size - 1};
    im.data = pk;
    im.data_size = sizes;
    msg = image_message(&im, NULL, 0, &size);
    assert_whole(msg, size, 1, "bslz4 cut short");
    free(msg);
    free(packed);
    free(pixels);
}
END_TEST

/* Channels of different compression cannot share one offset. */
START_TEST(channels_laid_out_differently_go_whole)
{
    image_spec im = {.series = 1, .id = 2, .height = 6, .width = 8,
                     .size = 2, .channels = 2, .block = 16,
                     .raw_second = 1};
    size_t size;
    uint8_t *msg = image_message(&im, NULL, 0, &size);
    assert_whole(msg, size, 1, "a bslz4 and a raw channel");
    free(msg);
}
END_TEST

/* rtomo_rows as the test writes it: {first, count, offset}. */
static uint64_t part_first, part_count, part_offset;

static void out_part(cbor_out *o)
{
    out_text(o, "rtomo_rows");
    out_head(o, 5, 3);
    out_key_uint(o, "first", part_first);
    out_key_uint(o, "count", part_count);
    out_key_uint(o, "offset", part_offset);
}

/* A share of a 48 x 64 uint16 image of `rows` rows of data, claiming
 * first/count/offset; the daemon's parser's verdict. */
static void share_refused(int rows, uint64_t first, uint64_t count,
                          uint64_t offset, rtomo_reject reason)
{
    uint8_t *bytes = calloc((size_t)rows * 64, 2);
    const uint8_t *data[1] = {bytes};
    const size_t sizes[1] = {(size_t)rows * 64 * 2};
    image_spec im = {.series = 1, .id = 2, .height = 48, .width = 64,
                     .size = 2, .channels = 1, .data = data,
                     .data_size = sizes};
    part_first = first;
    part_count = count;
    part_offset = offset;
    size_t size;
    uint8_t *msg = image_message(&im, out_part, 1, &size);
    rtomod_s2_msg p;
    rtomo_reject_info why;
    ck_assert_msg(rtomod_s2_parse(msg, size, NULL, NULL, &p, &why) != 0,
                  "a share of %d rows claiming %llu+%llu at %llu was taken",
                  rows, (unsigned long long)first, (unsigned long long)count,
                  (unsigned long long)offset);
    ck_assert_msg(why.reason == reason, "reason %s (%s)",
                  rtomo_reject_name(why.reason), why.message);
    printf("refused as it should be: %s\n", why.message);
    free(msg);
    free(bytes);
}

START_TEST(daemon_refuses_shares_that_lie)
{
    share_refused(16, 0, 0, 0, RTOMO_REJECT_FIELD);         /* no rows */
    share_refused(16, 40, 16, 40 * 64, RTOMO_REJECT_FIELD); /* past 48 */
    /* Data of 15 rows for a claim of 16. */
    share_refused(15, 16, 16, 16 * 64, RTOMO_REJECT_SIZE);
    /* Data starting after the claimed first row. */
    share_refused(16, 16, 16, 16 * 64 + 1, RTOMO_REJECT_SIZE);
    /* Data running past the image's end. */
    share_refused(16, 32, 16, 33 * 64, RTOMO_REJECT_SIZE);
}
END_TEST

START_TEST(daemon_arguments_name_stream2_inputs)
{
    router_target t;
    char why[512];
    ck_assert_int_eq(router_parse_target("tcp://a:5555=16:16,stream2="
                                         "tcp://a:5560", &t, why,
                                         sizeof why), 0);
    ck_assert_str_eq(t.endpoint, "tcp://a:5555");
    ck_assert(t.rows.first == 16 && t.rows.count == 16);
    ck_assert_str_eq(t.stream2, "tcp://a:5560");
    ck_assert_int_eq(router_parse_target("tcp://a:5555=0:8", &t, why,
                                         sizeof why), 0);
    ck_assert_str_eq(t.stream2, "");
    static const char *const bad[] = {
        "tcp://a:5555=0:8,stream2=", "tcp://a:5555,stream2=tcp://a:1",
        "tcp://a:5555=0:8,stream2=tcp://a:1,tcp://b:2",
        "tcp://a:5555=0:x,stream2=tcp://a:1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_msg(router_parse_target(bad[i], &t, why, sizeof why) != 0,
                      "'%s' was taken", bad[i]);
        ck_assert_msg(strstr(why, bad[i]), "'%s' does not name '%s'", why,
                      bad[i]);
    }
}
END_TEST

/* ------------------------------------------------------- the router ---- */

/* A detector: a PUSH socket connected to `endpoint`. */
static void *detector(void *context, const char *endpoint)
{
    void *s = zmq_socket(context, ZMQ_PUSH);
    int linger = 10000;
    ck_assert(s && zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger) == 0);
    ck_assert_msg(zmq_connect(s, endpoint) == 0, "connect %s", endpoint);
    return s;
}

static void push(void *s, const uint8_t *msg, size_t size)
{
    ck_assert_msg(zmq_send(s, msg, size, 0) == (int)size, "send: %s",
                  zmq_strerror(zmq_errno()));
}

/* The same message to the router and to the whole daemon. */
static void push_both(void *const *to, uint8_t *msg, size_t size)
{
    push(to[0], msg, size);
    push(to[1], msg, size);
    free(msg);
}

/* Scan s as a Stream V2 series: start, its darks, flats and projections
 * as images 0, 1, ... (uint16, bslz4 in blocks of `block` elements or
 * uncompressed), end. */
static void send_series(void *const *to, const daemon_scan *s,
                        uint64_t series, size_t block)
{
    const size_t n = (size_t)ROUTED_WIDTH * ROUTED_HEIGHT;
    const int frames = ROUTED_FRAMES;
    size_t size;
    uint8_t *msg = start_message(series, ROUTED_HEIGHT, ROUTED_WIDTH,
                                 (uint64_t)frames, &size);
    push_both(to, msg, size);
    for (int f = 0; f < frames; f++) {
        const uint16_t *frame =
            f < ROUTED_DARKS ? s->darks + n * (size_t)f
            : f < ROUTED_DARKS + ROUTED_FLATS
                ? s->flats + n * (size_t)(f - ROUTED_DARKS)
                : s->projections +
                      n * (size_t)(f - ROUTED_DARKS - ROUTED_FLATS);
        size_t bytes = n * 2;
        uint8_t *packed = block ? bslz4((const uint8_t *)frame, n, 2, block,
                                        &bytes)
                                : NULL;
        const uint8_t *data[1] = {packed ? packed : (const uint8_t *)frame};
        const size_t sizes[1] = {bytes};
        image_spec im = {.series = series, .id = (uint64_t)f,
                         .height = ROUTED_HEIGHT, .width = ROUTED_WIDTH,
                         .size = 2, .channels = 1, .block = block,
                         .data = data, .data_size = sizes};
        msg = image_message(&im, NULL, 0, &size);
        push_both(to, msg, size);
        free(packed);
    }
    msg = end_message(series, &size);
    push_both(to, msg, size);
}

/* Arm daemon d's Stream V2 input with scan s. */
static void arm(rtomo_client *c, const daemon_scan *s)
{
    char *begin = rtomo_proto_encode_scan_begin(&s->spec);
    json_t *request = json_loads(begin, 0, NULL);
    ck_assert_ptr_nonnull(request);
    json_object_set_new(request, "cmd", json_string("arm"));
    json_object_set_new(request, "input", json_string("stream2"));
    char *text = json_dumps(request, JSON_COMPACT);
    json_t *reply = daemon_request(c, text);
    ck_assert_msg(json_is_true(json_object_get(reply, "ok")), "arm: %s",
                  json_string_value(json_object_get(reply, "message")));
    json_decref(reply);
    free(text);
    json_decref(request);
    free(begin);
}

/* Daemon d's status.inputs.stream2.<name>. */
static long stream2_count(rtomo_client *c, const char *name)
{
    json_t *st = daemon_status(c);
    long n = status_field(json_object_get(json_object_get(st, "inputs"),
                                          "stream2"), name);
    json_decref(st);
    return n;
}

/* The three daemons each received about a third of the whole daemon's
 * message bytes (bslz4: a little more, the blocks that hold their rows),
 * after `before` of earlier series; returns the whole's. */
static long check_thirds(rtomo_client *const *ctl, const long *before,
                         const char *what)
{
    long whole = stream2_count(ctl[3], "bytes_in") - before[3];
    for (int k = 0; k < 3; k++) {
        long got = stream2_count(ctl[k], "bytes_in") - before[k];
        printf("Stream V2 %s: daemon %d (rows %d..%d) received %ld bytes, "
               "%.1f%% of the %ld the whole daemon received\n", what, k,
               k * ROUTED_THIRD, k * ROUTED_THIRD + ROUTED_THIRD - 1, got,
               100.0 * (double)got / (double)whole, whole);
        ck_assert_msg(got * 2 < whole && got * 4 > whole, "daemon %d "
                      "received %ld bytes of %ld: not about a third", k, got,
                      whole);
    }
    return whole;
}

/* One series through the router (raw or bslz4) and straight to the whole
 * daemon: the merged slices, the bytes, every daemon's scan complete. */
static void routed_series(void *const *to, rtomo_client *const *ctl,
                          daemon_inbox *in, const char *id, uint64_t series,
                          size_t block, uint64_t seed)
{
    long before[4];
    for (int k = 0; k < 4; k++)
        before[k] = stream2_count(ctl[k], "bytes_in");
    daemon_scan s;
    routed_scan_make(&s, id, seed);
    for (int k = 0; k < 4; k++)
        arm(ctl[k], &s);
    send_series(to, &s, series, block);
    const int want[4] = {ROUTED_THIRD, ROUTED_THIRD, ROUTED_THIRD,
                         ROUTED_HEIGHT};
    routed_wait_slices(in, id, want, 4);
    routed_check_merged(in, &s);
    check_thirds(ctl, before, block ? "bslz4" : "uncompressed");
    for (int k = 0; k < 4; k++) {
        rtomo_scan_outcome out;
        rtomo_error err;
        ck_assert_msg(rtomo_client_scan_outcome(ctl[k], id, DAEMON_TIMEOUT_MS,
                                                &out, &err) == RTOMO_OK,
                      "%s", err.message);
        ck_assert_msg(out.final && out.state == RTOMO_SCAN_COMPLETE &&
                          out.frames == ROUTED_FRAMES,
                      "daemon %d, scan %s: %s, %ld frames (%s)", k, id,
                      rtomo_scan_state_name(out.state), out.frames,
                      out.reason);
    }
    daemon_scan_free(&s);
}

/* The router's counts after two series of ROUTED_FRAMES images. */
static void check_router_stream2(rtomo_client *rc)
{
    const long messages = 2 * (ROUTED_FRAMES + 2);
    double deadline = daemon_now_ms() + DAEMON_TIMEOUT_MS;
    json_t *st, *s2;
    for (;;) {
        st = router_status(rc);
        s2 = json_object_get(st, "stream2");
        if (status_field(s2, "forwarded") == 3 * messages)
            break;
        ck_assert_msg(daemon_now_ms() < deadline, "the router forwarded %ld "
                      "Stream V2 messages", status_field(s2, "forwarded"));
        json_decref(st);
        daemon_pause_ms(20);
    }
    ck_assert_int_eq(status_field(s2, "messages"), messages);
    ck_assert_int_eq(status_field(s2, "images"), 2 * ROUTED_FRAMES);
    ck_assert_int_eq(status_field(s2, "cut"), 2 * ROUTED_FRAMES);
    ck_assert_int_eq(status_field(s2, "whole"), 4);
    for (int k = 0; k < 3; k++) {
        json_t *d = json_object_get(router_daemon_json(st, k), "stream2");
        ck_assert_int_eq(status_field(d, "messages"), messages);
        ck_assert_int_eq(status_field(d, "lost_messages"), 0);
        printf("router: daemon %d's Stream V2 input sent %ld messages, %ld "
               "bytes (%ld received)\n", k, status_field(d, "messages"),
               status_field(d, "bytes"), status_field(s2, "bytes_in"));
        ck_assert_int_lt(2 * status_field(d, "bytes"),
                         status_field(s2, "bytes_in"));
    }
    json_decref(st);
}

/* A share that lacks rows the daemon reads is refused shape_mismatch:
 * daemon 1 (rows 16..31), at its Stream V2 input `endpoint`, sent rows
 * 0..15 of an image. */
static void share_of_other_rows_refused(void *context, const char *endpoint,
                                        rtomo_client *ctl)
{
    void *s2 = detector(context, endpoint);
    daemon_scan s;
    routed_scan_make(&s, "wrong-rows", 0xdae1609);
    arm(ctl, &s);
    long before = daemon_reject_counter(ctl, "shape_mismatch");
    size_t size;
    uint8_t *msg = start_message(9, ROUTED_HEIGHT, ROUTED_WIDTH, 1, &size);
    push(s2, msg, size);
    free(msg);
    image_spec im = {.series = 9, .id = 0, .height = ROUTED_HEIGHT,
                     .width = ROUTED_WIDTH, .size = 2, .channels = 1};
    uint8_t *image = image_message(&im, NULL, 0, &size);
    router_s2_message m;
    router_s2_read(&m, image, size);
    size_t cut_size;
    uint8_t *cut = router_s2_cut(&m, (router_rows){0, ROUTED_THIRD},
                                 &cut_size);
    push(s2, cut, cut_size);
    double deadline = daemon_now_ms() + DAEMON_TIMEOUT_MS;
    while (daemon_reject_counter(ctl, "shape_mismatch") == before &&
           daemon_now_ms() < deadline)
        daemon_pause_ms(20);
    ck_assert_int_eq(daemon_reject_counter(ctl, "shape_mismatch"),
                     before + 1);
    json_decref(daemon_request(ctl, "{\"cmd\": \"disarm\", "
                                    "\"input\": \"stream2\"}"));
    zmq_close(s2);
    free(cut);
    router_s2_clear(&m);
    free(image);
    daemon_scan_free(&s);
}

/* Wait until the router's daemon k's Stream V2 input is in `state`. */
static void wait_stream2_state(rtomo_client *rc, int k, const char *state)
{
    double deadline = daemon_now_ms() + DAEMON_TIMEOUT_MS;
    for (;;) {
        json_t *st = router_status(rc);
        json_t *s2 = json_object_get(router_daemon_json(st, k), "stream2");
        const char *now = json_string_value(json_object_get(s2, "state"));
        int done = now && strcmp(now, state) == 0;
        json_decref(st);
        if (done)
            return;
        ck_assert_msg(daemon_now_ms() < deadline, "daemon %d's Stream V2 "
                      "input is not %s", k, state);
        daemon_pause_ms(20);
    }
}

/* Daemon 2 is gone: a series through the router (start, one image, end)
 * is counted lost for it (the others, not armed, reject it). */
static void gone_daemon_counted(void *router_in, rtomo_client *rc)
{
    wait_stream2_state(rc, 2, "disconnected");
    size_t size;
    uint8_t *msg = start_message(5, ROUTED_HEIGHT, ROUTED_WIDTH, 1, &size);
    push(router_in, msg, size);
    free(msg);
    image_spec im = {.series = 5, .id = 0, .height = ROUTED_HEIGHT,
                     .width = ROUTED_WIDTH, .size = 2, .channels = 1};
    msg = image_message(&im, NULL, 0, &size);
    push(router_in, msg, size);
    free(msg);
    msg = end_message(5, &size);
    push(router_in, msg, size);
    free(msg);
    double deadline = daemon_now_ms() + DAEMON_TIMEOUT_MS;
    for (;;) {
        json_t *st = router_status(rc);
        json_t *s2 = json_object_get(router_daemon_json(st, 2), "stream2");
        long lost = status_field(s2, "lost_messages");
        if (lost == 3) {
            ck_assert_int_eq(status_field(s2, "lost_frames"), 1);
            ck_assert_int_gt(status_field(s2, "lost_since_ms"), 0);
            json_decref(st);
            return;
        }
        ck_assert_msg(daemon_now_ms() < deadline, "the router counted %ld "
                      "Stream V2 messages lost, expected 3", lost);
        json_decref(st);
        daemon_pause_ms(20);
    }
}

START_TEST(router_cuts_stream2_images_for_three_armed_daemons)
{
    daemon_proc d[4];
    char inputs[4][ROUTED_ENDPOINT];
    routed_daemons_start(d, 1, inputs);
    char targets[3][200], stream2[ROUTED_ENDPOINT];
    const char *list[3];
    for (int k = 0; k < 3; k++) {
        snprintf(targets[k], sizeof targets[k], "%s=%d:%d,stream2=%s",
                 d[k].ingest, k * ROUTED_THIRD, ROUTED_THIRD, inputs[k]);
        list[k] = targets[k];
    }
    snprintf(stream2, sizeof stream2, "tcp://127.0.0.1:%d",
             router_free_port());
    const char *const extra[] = {"--stream2", stream2, NULL};
    router_proc r;
    router_start_targets(&r, list, 3, extra);
    rtomo_client *rc = router_client(&r);
    for (int k = 0; k < 3; k++)
        wait_stream2_state(rc, k, "connected");
    rtomo_client *c = daemon_connect_all(d, 4, r.p.ingest);
    daemon_inbox in;
    daemon_inbox_init(&in, c);
    rtomo_client *ctl[4];
    for (int k = 0; k < 4; k++)
        ctl[k] = daemon_control_client(&d[k]);
    void *context = zmq_ctx_new();
    void *to[2] = {detector(context, stream2), detector(context, inputs[3])};

    routed_series(to, ctl, &in, "s2-raw", 1, 0, 0xdae1607);
    routed_series(to, ctl, &in, "s2-bslz4", 2, 200, 0xdae1608);
    check_router_stream2(rc);
    share_of_other_rows_refused(context, inputs[1], ctl[1]);
    daemon_stop(&d[2]);
    gone_daemon_counted(to[0], rc);

    zmq_close(to[0]);
    zmq_close(to[1]);
    rtomo_client_close(rc);
    char *log = router_stop(&r);
    char line[400];
    snprintf(line, sizeof line, "daemon %s (rows 32..47), Stream V2 input "
             "%s, is gone: its rows of Stream V2 series 5 are lost",
             d[2].ingest, inputs[2]);
    ck_assert_msg(text_occurrences(log, line) == 1, "the router's log says "
                  "%d times \"%s\":\n%s", text_occurrences(log, line), line,
                  log);
    free(log);
    for (int k = 0; k < 4; k++)
        rtomo_client_close(ctl[k]);
    daemon_inbox_free(&in);
    rtomo_client_close(c);
    for (int k = 0; k < 4; k++)
        if (k != 2)
            daemon_stop(&d[k]);
    zmq_ctx_term(context);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {
        cut_images_decode_to_their_rows,
        what_cannot_be_cut_goes_whole,
        channels_laid_out_differently_go_whole,
        daemon_refuses_shares_that_lie,
        daemon_arguments_name_stream2_inputs,
        router_cuts_stream2_images_for_three_armed_daemons,
    };
    return daemon_run_tests("daemon_router_stream2", tests,
                            (int)(sizeof tests / sizeof tests[0]), 300);
}
