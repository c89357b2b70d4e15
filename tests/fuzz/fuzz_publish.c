/*
 * fuzz_publish.c — libFuzzer harness of what a subscriber decodes: the
 * headers of published images (rtomo_proto_decode_image_header), events
 * (rtomo_proto_decode_event) and telemetry, chosen by topic as the client
 * library does (client/rtomo_client.c, decode_published: the header is
 * parsed as JSON, then decoded by its topic; telemetry is read from the
 * parsed JSON, so for it this harness fuzzes that parse and the "seq"
 * read).  A header that decodes must re-encode to one that decodes to the
 * same fields (the daemon's encoders and the clients' decoders agree).
 *
 * Input: byte 0 = topic (slice, plane, composite, depth, event, telemetry,
 * other), bytes 1-3 = the payload size the header is checked against
 * (little-endian; image headers check width x height x dtype against it),
 * then the header JSON.
 */
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "rtomo_protocol.h"

static const char *const topics[] = {
    RTOMO_TOPIC_SLICE, RTOMO_TOPIC_PLANE, RTOMO_TOPIC_COMPOSITE,
    RTOMO_TOPIC_DEPTH, RTOMO_TOPIC_EVENT, RTOMO_TOPIC_TELEMETRY, "other"};
#define N_TOPICS (sizeof topics / sizeof topics[0])

static int same_double(double a, double b)
{
    return (isnan(a) && isnan(b)) || a == b;
}

static void image(const char *header, size_t size, size_t payload_size)
{
    rtomo_image_header a, b;
    rtomo_reject_info why;
    if (rtomo_proto_decode_image_header(header, size, payload_size, &a,
                                        &why) != 0) {
        FUZZ_CHECK(why.reason != RTOMO_REJECT_NONE && why.message[0],
                   "a refused image header has no reason");
        return;
    }
    FUZZ_CHECK(a.width >= 1 && a.height >= 1 && a.count >= 1 &&
                   a.index >= 0 && a.index < a.count,
               "decoded image header out of range: %dx%d, %d of %d", a.width,
               a.height, a.index, a.count);
    char *text = rtomo_proto_encode_image_header(&a);
    FUZZ_CHECK(text, "rtomo_proto_encode_image_header failed on a decoded "
                     "header");
    int r = rtomo_proto_decode_image_header(text, strlen(text), payload_size,
                                            &b, &why);
    FUZZ_CHECK(r == 0, "re-encoded image header refused: %s: %s\n  %s",
               rtomo_reject_name(why.reason), why.message, text);
    FUZZ_CHECK(strcmp(a.topic, b.topic) == 0 && strcmp(a.scan, b.scan) == 0 &&
                   a.frame == b.frame && a.index == b.index &&
                   a.count == b.count && a.slice == b.slice &&
                   a.plane == b.plane && a.width == b.width &&
                   a.height == b.height && a.dtype == b.dtype &&
                   memcmp(a.roi, b.roi, sizeof a.roi) == 0 &&
                   a.u16_scale == b.u16_scale &&
                   a.u16_offset == b.u16_offset && a.seq == b.seq &&
                   a.projection_first == b.projection_first &&
                   a.projection_last == b.projection_last &&
                   same_double(a.ratio, b.ratio) &&
                   same_double(a.min, b.min) && same_double(a.max, b.max) &&
                   same_double(a.mean, b.mean) &&
                   same_double(a.latency_ms, b.latency_ms),
               "re-encoded image header decodes to other fields:\n  %s", text);
    free(text);
}

static void event(const char *header, size_t size)
{
    rtomo_event a, b;
    rtomo_reject_info why;
    if (rtomo_proto_decode_event(header, size, &a, &why) != 0) {
        FUZZ_CHECK(why.reason != RTOMO_REJECT_NONE && why.message[0],
                   "a refused event has no reason");
        return;
    }
    FUZZ_CHECK(strnlen(a.event, sizeof a.event) < sizeof a.event &&
                   strnlen(a.scan, sizeof a.scan) < sizeof a.scan &&
                   strnlen(a.reason, sizeof a.reason) < sizeof a.reason &&
                   strnlen(a.message, sizeof a.message) < sizeof a.message,
               "decoded event with an unterminated string");
    char *text = rtomo_proto_encode_event(&a);
    FUZZ_CHECK(text, "rtomo_proto_encode_event failed on a decoded event");
    int r = rtomo_proto_decode_event(text, strlen(text), &b, &why);
    FUZZ_CHECK(r == 0, "re-encoded event refused: %s: %s\n  %s",
               rtomo_reject_name(why.reason), why.message, text);
    FUZZ_CHECK(strcmp(a.event, b.event) == 0 && strcmp(a.scan, b.scan) == 0 &&
                   a.index == b.index && strcmp(a.reason, b.reason) == 0 &&
                   strcmp(a.message, b.message) == 0 && a.seq == b.seq,
               "re-encoded event decodes to other fields:\n  %s", text);
    free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 4)
        return 0;
    const char *topic = topics[data[0] % N_TOPICS];
    size_t payload_size = (size_t)data[1] | (size_t)data[2] << 8 |
                          (size_t)data[3] << 16;
    size_t n = size - 4;
    /* The client library keeps a NUL after the header it received. */
    char *header = fuzz_copy(data + 4, n, 1);

    /* As the client does: the header must be a JSON object whatever the
     * topic; "seq" is read from it for every topic. */
    json_error_t jerr;
    json_t *json = json_loadb(header, n, 0, &jerr);
    if (json_is_object(json)) {
        const json_t *seq = json_object_get(json, "seq");
        if (json_is_integer(seq))
            (void)json_integer_value(seq);
        if (strcmp(topic, RTOMO_TOPIC_EVENT) == 0)
            event(header, n);
        else if (strcmp(topic, RTOMO_TOPIC_TELEMETRY) == 0 ||
                 strcmp(topic, "other") == 0) {
            char *again = json_dumps(json, JSON_COMPACT);
            free(again);
        } else
            image(header, n, payload_size);
    }
    json_decref(json);
    /* The decoders must also cope with headers the client never hands
     * them (not objects, not JSON). */
    if (data[0] & 0x80) {
        rtomo_image_header h;
        rtomo_event ev;
        (void)rtomo_proto_decode_image_header(header, n, payload_size, &h,
                                              NULL);
        (void)rtomo_proto_decode_event(header, n, &ev, NULL);
    }
    free(header);
    return 0;
}
