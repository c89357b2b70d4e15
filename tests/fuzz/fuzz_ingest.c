/*
 * fuzz_ingest.c — libFuzzer harness of the ingest decoder
 * (rtomo_proto_decode_ingest), the path every message on rtomod's PULL
 * socket takes, with 0..3 parts and any payload.  Beyond "no crash, no
 * leak, no UB" it holds the codec to its promises:
 *   - a failed decode leaves nothing owned and a valid (or empty) scan id;
 *   - rtomo_proto_peek_scan names the same scan as a successful decode;
 *   - what decodes re-encodes (the clients' encoders) to a message that
 *     decodes again to the same fields;
 *   - a decoded frame checked against a scan or stream
 *     (rtomo_proto_check_*_frame) passes only when it fits it.
 *
 * Input: byte 0 = control (bits 0-1: the part count 0..3; bit 2: pass a
 * NULL payload pointer when the payload is empty), then the header JSON,
 * then optionally a NUL byte and the payload (fuzz_common.h).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "rtomo_protocol.h"

static void check_scan_id(const char *scan)
{
    size_t n = strnlen(scan, RTOMO_ID_MAX);
    FUZZ_CHECK(n < RTOMO_ID_MAX, "scan id not terminated");
    FUZZ_CHECK(strspn(scan, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                            "0123456789_.:-") == n,
               "scan id \"%s\" has characters outside the id alphabet", scan);
}

/* A decoded begin re-encodes to a begin that decodes to the same scan. */
static void round_trip_scan_begin(const rtomo_scan_spec *a)
{
    char *text = rtomo_proto_encode_scan_begin(a);
    FUZZ_CHECK(text, "rtomo_proto_encode_scan_begin failed on a decoded spec");
    rtomo_ingest_msg m;
    rtomo_reject_info why;
    int r = rtomo_proto_decode_ingest(1, text, strlen(text), NULL, 0, &m, &why);
    FUZZ_CHECK(r == 0, "re-encoded scan_begin refused: %s: %s\n  %s",
               rtomo_reject_name(why.reason), why.message, text);
    const rtomo_scan_spec *b = m.scan_spec;
    FUZZ_CHECK(b && strcmp(a->scan, b->scan) == 0 &&
                   a->geometry.det_width == b->geometry.det_width &&
                   a->geometry.det_height == b->geometry.det_height &&
                   a->geometry.n_proj == b->geometry.n_proj &&
                   a->dtype == b->dtype && a->n_darks == b->n_darks &&
                   a->n_flats == b->n_flats &&
                   a->continuous == b->continuous &&
                   a->window_every == b->window_every &&
                   a->given == b->given && a->slices.kind == b->slices.kind &&
                   a->slices.n_rows == b->slices.n_rows &&
                   (a->angles != NULL) == (b->angles != NULL) &&
                   (a->axis_shift != NULL) == (b->axis_shift != NULL),
               "re-encoded scan_begin decodes to another scan:\n  %s", text);
    rtomo_ingest_msg_clear(&m);
    free(text);
}

static void round_trip_sbdx_begin(const rtomo_sbdx_spec *a)
{
    char *text = rtomo_proto_encode_sbdx_begin(a);
    FUZZ_CHECK(text, "rtomo_proto_encode_sbdx_begin failed on a decoded spec");
    rtomo_ingest_msg m;
    rtomo_reject_info why;
    int r = rtomo_proto_decode_ingest(1, text, strlen(text), NULL, 0, &m, &why);
    FUZZ_CHECK(r == 0, "re-encoded sbdx_begin refused: %s: %s\n  %s",
               rtomo_reject_name(why.reason), why.message, text);
    const rtomo_sbdx_spec *b = m.sbdx_spec;
    const rtomo_sbdx_geometry *ga = &a->geometry, *gb = &b->geometry;
    FUZZ_CHECK(b && strcmp(a->scan, b->scan) == 0 &&
                   ga->holes_x == gb->holes_x && ga->holes_y == gb->holes_y &&
                   ga->det_width == gb->det_width &&
                   ga->det_height == gb->det_height &&
                   ga->shift_m == gb->shift_m &&
                   ga->n_planes == gb->n_planes && a->dtype == b->dtype &&
                   a->planes == b->planes && a->composite == b->composite &&
                   a->u16_scale == b->u16_scale &&
                   a->u16_offset == b->u16_offset,
               "re-encoded sbdx_begin decodes to another stream:\n  %s", text);
    rtomo_ingest_msg_clear(&m);
    free(text);
}

static void round_trip_frame(const rtomo_ingest_msg *a)
{
    char *text = rtomo_proto_encode_frame(&a->frame);
    FUZZ_CHECK(text, "rtomo_proto_encode_frame failed on a decoded frame");
    rtomo_ingest_msg m;
    rtomo_reject_info why;
    int r = rtomo_proto_decode_ingest(2, text, strlen(text), a->payload,
                                      a->payload_size, &m, &why);
    FUZZ_CHECK(r == 0, "re-encoded frame refused: %s: %s\n  %s",
               rtomo_reject_name(why.reason), why.message, text);
    int same = m.type == a->type && strcmp(m.scan, a->scan) == 0 &&
               m.frame.index == a->frame.index &&
               m.frame.dtype == a->frame.dtype &&
               m.frame.ndim == a->frame.ndim &&
               memcmp(m.frame.shape, a->frame.shape, sizeof m.frame.shape) == 0;
    FUZZ_CHECK(same, "re-encoded frame decodes to another frame:\n  %s", text);
    rtomo_ingest_msg_clear(&m);
    free(text);
}

static void round_trip_end(const rtomo_ingest_msg *a)
{
    char *text = rtomo_proto_encode_end(a->type, a->scan);
    FUZZ_CHECK(text, "rtomo_proto_encode_end failed");
    rtomo_ingest_msg m;
    rtomo_reject_info why;
    int r = rtomo_proto_decode_ingest(1, text, strlen(text), NULL, 0, &m, &why);
    FUZZ_CHECK(r == 0 && m.type == a->type && strcmp(m.scan, a->scan) == 0,
               "re-encoded end refused or changed: %s\n  %s", why.message,
               text);
    rtomo_ingest_msg_clear(&m);
    free(text);
}

/* A frame that passes the check against a scan fits it. */
static void check_against_scans(const rtomo_frame_header *f)
{
    rtomo_scan_spec scan;
    rtomo_scan_spec_init(&scan);
    snprintf(scan.scan, sizeof scan.scan, "%s", f->scan);
    scan.geometry.det_width = 8;
    scan.geometry.det_height = 4;
    scan.geometry.n_proj = 16;
    scan.dtype = RTOMO_DTYPE_U16;
    scan.n_darks = 2;
    for (int continuous = 0; continuous < 2; continuous++) {
        scan.continuous = continuous;
        rtomo_reject_info why;
        if (rtomo_proto_check_tomo_frame(f, &scan, &why) == 0) {
            FUZZ_CHECK(f->ndim == 2 && f->shape[0] == 4 && f->shape[1] == 8 &&
                           f->dtype == RTOMO_DTYPE_U16 && f->index >= 0,
                       "frame passed the check against a scan it does not fit");
            FUZZ_CHECK(f->type != RTOMO_MSG_PROJECTION || continuous ||
                           f->index < 16,
                       "projection index %lld passed n_proj 16",
                       (long long)f->index);
            FUZZ_CHECK(f->type != RTOMO_MSG_DARK || f->index < 2,
                       "dark index %lld passed 2 darks", (long long)f->index);
        }
    }
    rtomo_scan_spec_clear(&scan);

    rtomo_sbdx_spec sbdx;
    rtomo_sbdx_spec_init(&sbdx);
    snprintf(sbdx.scan, sizeof sbdx.scan, "%s", f->scan);
    sbdx.geometry.holes_x = 3;
    sbdx.geometry.holes_y = 2;
    sbdx.geometry.det_width = 4;
    sbdx.geometry.det_height = 2;
    rtomo_reject_info why;
    if (rtomo_proto_check_sbdx_frame(f, &sbdx, &why) == 0)
        FUZZ_CHECK(f->type == RTOMO_MSG_SBDX_FRAME && f->ndim == 4 &&
                       f->shape[0] == 2 && f->shape[1] == 3 &&
                       f->shape[2] == 2 && f->shape[3] == 4 &&
                       f->dtype == sbdx.dtype,
                   "sbdx frame passed the check against a stream it does not "
                   "fit");
    rtomo_sbdx_spec_clear(&sbdx);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    int n_parts = data[0] & 3;
    int null_empty = (data[0] & 4) != 0;
    const uint8_t *h, *p;
    size_t hn, pn;
    int has_payload;
    fuzz_split(data + 1, size - 1, &h, &hn, &p, &pn, &has_payload);
    if (n_parts < 2)
        pn = 0;
    void *header = fuzz_copy(h, hn, 0);
    void *payload = (pn == 0 && null_empty) ? NULL : fuzz_copy(p, pn, 0);

    rtomo_ingest_msg msg;
    rtomo_reject_info why;
    int r = rtomo_proto_decode_ingest(n_parts, header, hn, payload, pn, &msg,
                                      &why);
    check_scan_id(msg.scan);
    char peek[RTOMO_ID_MAX];
    int peeked = rtomo_proto_peek_scan(header, hn, peek);
    check_scan_id(peek);
    if (r != 0) {
        FUZZ_CHECK(why.reason != RTOMO_REJECT_NONE && why.message[0],
                   "a refused message has no reason");
        FUZZ_CHECK(strnlen(why.message, sizeof why.message) <
                       sizeof why.message, "reason not terminated");
        FUZZ_CHECK(!msg.scan_spec && !msg.sbdx_spec && !msg.payload,
                   "a refused message still owns something");
        FUZZ_CHECK(!msg.scan[0] || (peeked == 0 && !strcmp(peek, msg.scan)),
                   "refused message names scan \"%s\", peek \"%s\"",
                   msg.scan, peek);
    } else {
        FUZZ_CHECK(peeked == 0 && strcmp(peek, msg.scan) == 0,
                   "peek_scan \"%s\" differs from the decoded scan \"%s\"",
                   peek, msg.scan);
        switch (msg.type) {
        case RTOMO_MSG_SCAN_BEGIN:
            FUZZ_CHECK(msg.scan_spec, "scan_begin without its spec");
            round_trip_scan_begin(msg.scan_spec);
            break;
        case RTOMO_MSG_SBDX_BEGIN:
            FUZZ_CHECK(msg.sbdx_spec, "sbdx_begin without its spec");
            round_trip_sbdx_begin(msg.sbdx_spec);
            break;
        case RTOMO_MSG_SCAN_END:
        case RTOMO_MSG_SBDX_END:
            round_trip_end(&msg);
            break;
        default:
            FUZZ_CHECK(n_parts == 2 && msg.payload_size == pn,
                       "frame accepted with %d parts, %zu of %zu bytes",
                       n_parts, msg.payload_size, pn);
            round_trip_frame(&msg);
            check_against_scans(&msg.frame);
            break;
        }
    }
    rtomo_ingest_msg_clear(&msg);
    free(header);
    free(payload);
    return 0;
}
