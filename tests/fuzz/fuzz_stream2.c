/*
 * fuzz_stream2.c — libFuzzer harness of rtomod's DECTRIS Stream V2 parser
 * (rtomod_s2_parse: the CBOR pre-check, libcbor, the message fields) and
 * of the bslz4 decoder behind it, the path every message of a stream2
 * input takes.  Beyond "no crash, no leak, no UB":
 *   - a refused message holds nothing and names a reason;
 *   - an accepted image's pixels lie inside the message and, raw, are
 *     exactly height x width x element size bytes, or for a router's
 *     share ("rtomo_rows") elements x element size bytes that lie in the
 *     image from their offset and hold the share's rows whole;
 *   - decoding an image either fills the buffer or names a reason
 *     (bad_compression or size_mismatch), never anything else.
 *
 * Input: byte 0 = control (bit 0: select channel "c1" instead of the
 * first; bit 1: read an angle from user_data "angle"), then the message.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "rtomod_stream2.h"

/* Images decoded at most (a message may announce up to 65536^2). */
#define DECODE_MAX (64u << 20)

static void check_image(const rtomod_s2_msg *m, const uint8_t *msg,
                        size_t size)
{
    const rtomod_s2_pixels *px = &m->pixels;
    FUZZ_CHECK(px->elem_size == 1 || px->elem_size == 2 ||
                   px->elem_size == 4, "element size %d", px->elem_size);
    FUZZ_CHECK(px->height >= 1 && px->width >= 1 && px->height <= 65536 &&
                   px->width <= 65536, "image %llu x %llu",
               (unsigned long long)px->height,
               (unsigned long long)px->width);
    FUZZ_CHECK(px->size <= size, "pixels of %zu bytes in a message of %zu",
               px->size, size);
    /* Pixels of 64 KiB and more are read where they lie in the message
     * (stream2.c), never from a copy elsewhere. */
    FUZZ_CHECK(px->size < 65536 ||
                   (px->data >= msg && px->data + px->size <= msg + size),
               "%zu bytes of pixels not inside the message", px->size);
    const uint64_t image = px->height * px->width;
    if (px->rows_count > 0) {
        FUZZ_CHECK(px->rows_first + px->rows_count <= px->height &&
                       px->offset <= px->rows_first * px->width &&
                       px->offset + px->elements >=
                           (px->rows_first + px->rows_count) * px->width &&
                       px->offset + px->elements <= image,
                   "a share of %llu elements at %llu for rows %llu+%llu",
                   (unsigned long long)px->elements,
                   (unsigned long long)px->offset,
                   (unsigned long long)px->rows_first,
                   (unsigned long long)px->rows_count);
    } else {
        FUZZ_CHECK(px->elements == image, "a whole image of %llu elements",
                   (unsigned long long)px->elements);
    }
    size_t need = (size_t)px->elements * (size_t)px->elem_size;
    FUZZ_CHECK(px->bslz4 || px->size == need, "raw image of %zu bytes, "
               "%zu expected", px->size, need);
    if (need > DECODE_MAX)
        return;
    uint8_t *out = malloc(need ? need : 1);
    if (!out)
        abort();
    rtomo_reject_info why;
    if (rtomod_s2_pixels_decode(px, out, need, &why) != 0)
        FUZZ_CHECK(why.reason == RTOMO_REJECT_COMPRESSION ||
                       why.reason == RTOMO_REJECT_SIZE,
                   "decode refused with %s: %s",
                   rtomo_reject_name(why.reason), why.message);
    free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint8_t control = data[0];
    uint8_t *msg = fuzz_copy(data + 1, size - 1, 0);
    rtomod_s2_msg m;
    rtomo_reject_info why;
    memset(&why, 0, sizeof why);
    int rc = rtomod_s2_parse(msg, size - 1, control & 1 ? "c1" : NULL,
                             control & 2 ? "angle" : NULL, &m, &why);
    if (rc != 0) {
        FUZZ_CHECK(m.root == NULL, "a refused message holds its CBOR");
        FUZZ_CHECK(why.reason > RTOMO_REJECT_NONE &&
                       why.reason < RTOMO_REJECT_COUNT && why.message[0],
                   "refused without a reason");
    } else {
        FUZZ_CHECK(m.root != NULL, "an accepted message without its CBOR");
        if (m.kind == RTOMOD_S2_IMAGE) {
            FUZZ_CHECK(isnan(m.angle) || isfinite(m.angle), "angle");
            check_image(&m, msg, size - 1);
        }
        rtomod_s2_clear(&m);
    }
    free(msg);
    return 0;
}
