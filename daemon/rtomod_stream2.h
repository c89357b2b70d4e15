/*
 * rtomod_stream2.h — DECTRIS Stream V2 messages (start, image, end) as
 * rtomod reads them: one CBOR map per ZeroMQ message, parsed with libcbor
 * into the few fields a reconstruction needs, every malformation refused
 * with a reject reason of PROTOCOL.md section 4 and a sentence naming what
 * is wrong.  No socket code and no daemon state: the fuzz harness and the
 * unit tests call it directly.  input_stream2.c is the socket side.
 *
 * What is read (DECTRIS' stream_v2 documentation; RFC 8746 typed arrays):
 *   start: series_id, series_unique_id, image_size_x, image_size_y,
 *          image_dtype, number_of_images, channels
 *   image: series_id, series_unique_id, image_id, data (channel ->
 *          tag 40 [[height, width], typed array]), user_data, and
 *          rtomo_rows, rtomo's own extension: rtomo-router's share of an
 *          image (PROTOCOL.md 10.5)
 *   end:   series_id, series_unique_id
 * A typed array is tag 64 (uint8), 69 (uint16 little-endian) or 70
 * (uint32 little-endian) over a byte string or over DECTRIS' compression
 * tag 56500 ["bslz4", element size, bytes]; other element types are
 * refused (dtype_mismatch), other compressions too (bad_compression).
 */
#ifndef RTOMOD_STREAM2_H
#define RTOMOD_STREAM2_H

#include <stddef.h>
#include <stdint.h>

#include "rtomo_protocol.h"
#include "rtomod_bitshuffle.h"

#define RTOMOD_S2_CHANNELS_MAX 8
#define RTOMOD_S2_NAME_MAX 64
/* Nesting of CBOR containers and tags accepted at most (a Stream V2
 * message nests 5 deep; the bound keeps hostile input from costing
 * stack). */
#define RTOMOD_S2_DEPTH_MAX 32
/* CBOR items in one message at most: libcbor allocates a few dozen bytes
 * per item, so a message of a million one-byte items would cost far more
 * memory than its size; a Stream V2 message has a few hundred (images
 * and tables are byte strings, one item each). */
#define RTOMOD_S2_ITEMS_MAX 65536
/* Byte strings of 64 KiB and more (the images) taken where they lie in
 * the message rather than copied, at most this many per message. */
#define RTOMOD_S2_REFS_MAX 16

typedef enum rtomod_s2_kind {
    RTOMOD_S2_START,
    RTOMOD_S2_IMAGE,
    RTOMOD_S2_END
} rtomod_s2_kind;

/* The selected channel's pixels, where they lie in the message. */
typedef struct rtomod_s2_pixels {
    uint64_t height, width;     /* the whole image's */
    int elem_size;              /* 1, 2 or 4 bytes (uint8/16/32) */
    int bslz4;                  /* 1: bitshuffle-LZ4, 0: raw */
    const uint8_t *data;        /* inside the parsed message */
    size_t size;                /* bytes at data */
    /* A router's share ("rtomo_rows"; rows_count 0: the whole image):
     * the data decode to `elements` elements of the image from element
     * `offset` on (row-major), which hold rows [rows_first, rows_first +
     * rows_count) whole.  Checked against the image by the parser. */
    uint64_t rows_first, rows_count, offset, elements;
} rtomod_s2_pixels;

typedef struct rtomod_s2_msg {
    rtomod_s2_kind kind;
    uint64_t series_id;
    char series_unique_id[RTOMOD_S2_NAME_MAX];
    /* start */
    uint64_t width, height;     /* image_size_x, image_size_y */
    int elem_size;              /* from image_dtype; 0 when absent */
    uint64_t number_of_images;  /* 0 when absent */
    int n_channels;
    char channels[RTOMOD_S2_CHANNELS_MAX][RTOMOD_S2_NAME_MAX];
    /* image */
    uint64_t image_id;
    double angle;               /* user_data[angle_key]; NaN when absent */
    char channel[RTOMOD_S2_NAME_MAX];   /* the one taken */
    rtomod_s2_pixels pixels;
    void *root;                 /* the parsed CBOR */
    /* Large byte strings (pixels.data among them) are read in place:
     * the caller's buffer must outlive the message. */
    const uint8_t *source;
    int n_refs;
    size_t ref_pos[RTOMOD_S2_REFS_MAX], ref_len[RTOMOD_S2_REFS_MAX];
} rtomod_s2_msg;

/* Parse one message (`buf` must stay valid until rtomod_s2_clear: the
 * pixels are read where they lie).  `channel` selects the image channel by name (NULL
 * or "": the first); `angle_key` names a number in an image's user_data
 * map taken as its angle in degrees (NULL: none).  Returns 0 (release
 * with rtomod_s2_clear), or -1 with *why filled and nothing held. */
int rtomod_s2_parse(const void *buf, size_t size, const char *channel,
                    const char *angle_key, rtomod_s2_msg *msg,
                    rtomo_reject_info *why);
void rtomod_s2_clear(rtomod_s2_msg *msg);

/* The pixels decoded (decompressed when bslz4) into `out` of exactly
 * elements x elem_size bytes (height x width x elem_size for a whole
 * image).  Returns 0, or -1 with *why (bad_compression, size_mismatch). */
int rtomod_s2_pixels_decode(const rtomod_s2_pixels *px, uint8_t *out,
                            size_t out_size, rtomo_reject_info *why);
/* The same with the work spread over `par` (rtomod_bitshuffle.h; NULL: in
 * the calling thread). */
int rtomod_s2_pixels_decode_on(const rtomod_s2_pixels *px, uint8_t *out,
                               size_t out_size, const rtomod_parallel *par,
                               rtomo_reject_info *why);

/* Check that `buf` is well-formed CBOR whose containers fit the bytes
 * they claim, nest at most RTOMOD_S2_DEPTH_MAX deep and hold at most
 * RTOMOD_S2_ITEMS_MAX items, before libcbor allocates for it.  0, or -1 with a bad_cbor reject in *why. */
int rtomod_s2_precheck(const uint8_t *buf, size_t size,
                       rtomo_reject_info *why);

#endif /* RTOMOD_STREAM2_H */
