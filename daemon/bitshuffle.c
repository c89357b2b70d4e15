/*
 * bitshuffle.c — the bitshuffle bit transpose and the "bslz4" framing of
 * DECTRIS Stream V2 images (rtomod_bitshuffle.h says the layout).
 *
 * The transpose works on 8 elements at a time: for byte j of the element
 * the 8 bit rows 8 j .. 8 j + 7 each hold one byte for those 8 elements,
 * which together form an 8 x 8 bit matrix; transposing it (three delta
 * swaps on a 64-bit word) gives byte j of each of the 8 elements.  That
 * keeps a 2048 x 2048 uint16 image well under the time LZ4 takes.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lz4.h>

#include "rtomod_bitshuffle.h"

/* Transpose the 8 x 8 bit matrix whose row r is byte r of x (bit c of the
 * row = bit 8 r + c of x): bit 8 r + c moves to bit 8 c + r.  The
 * transpose is its own inverse. */
static uint64_t transpose8x8(uint64_t x)
{
    uint64_t t;
    t = (x ^ (x >> 7)) & 0x00AA00AA00AA00AAULL;
    x ^= t ^ (t << 7);
    t = (x ^ (x >> 14)) & 0x0000CCCC0000CCCCULL;
    x ^= t ^ (t << 14);
    t = (x ^ (x >> 28)) & 0x00000000F0F0F0F0ULL;
    x ^= t ^ (t << 28);
    return x;
}

void rtomod_bitunshuffle(const uint8_t *in, uint8_t *out, size_t n_elem,
                         size_t elem_size)
{
    size_t row = n_elem / 8;    /* bytes per bit row */
    for (size_t j = 0; j < elem_size; j++) {
        const uint8_t *rows = in + 8 * j * row;
        for (size_t g = 0; g < row; g++) {
            uint64_t x = 0;
            for (int b = 0; b < 8; b++)
                x |= (uint64_t)rows[(size_t)b * row + g] << (8 * b);
            x = transpose8x8(x);
            uint8_t *dst = out + 8 * g * elem_size + j;
            for (int k = 0; k < 8; k++)
                dst[(size_t)k * elem_size] = (uint8_t)(x >> (8 * k));
        }
    }
}

void rtomod_bitshuffle(const uint8_t *in, uint8_t *out, size_t n_elem,
                       size_t elem_size)
{
    size_t row = n_elem / 8;
    for (size_t j = 0; j < elem_size; j++) {
        uint8_t *rows = out + 8 * j * row;
        for (size_t g = 0; g < row; g++) {
            const uint8_t *src = in + 8 * g * elem_size + j;
            uint64_t x = 0;
            for (int k = 0; k < 8; k++)
                x |= (uint64_t)src[(size_t)k * elem_size] << (8 * k);
            x = transpose8x8(x);
            for (int b = 0; b < 8; b++)
                rows[(size_t)b * row + g] = (uint8_t)(x >> (8 * b));
        }
    }
}

static uint64_t read_be(const uint8_t *p, int bytes)
{
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++)
        v = v << 8 | p[i];
    return v;
}

int64_t rtomod_bslz4_size(const uint8_t *in, size_t in_size)
{
    if (in_size < 12)
        return -1;
    uint64_t size = read_be(in, 8);
    return size > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)size;
}

/* The input being read and the error sink. */
typedef struct reader {
    const uint8_t *in;
    size_t size, pos;
    char *why;
    size_t why_size;
} reader;

/* One LZ4 block of n_elem elements into out (tmp: scratch of at least
 * n_elem * elem_size bytes). */
static int decode_block(reader *r, size_t n_elem, size_t elem_size,
                        uint8_t *tmp, uint8_t *out, size_t block_number)
{
    size_t bytes = n_elem * elem_size;
    if (r->size - r->pos < 4) {
        snprintf(r->why, r->why_size, "bslz4 data ends before block %zu's "
                 "size (at byte %zu of %zu)", block_number, r->pos, r->size);
        return -1;
    }
    uint64_t c = read_be(r->in + r->pos, 4);
    r->pos += 4;
    if (c > r->size - r->pos || c > (uint64_t)LZ4_MAX_INPUT_SIZE) {
        snprintf(r->why, r->why_size, "bslz4 block %zu announces %llu "
                 "compressed bytes, %zu are left", block_number,
                 (unsigned long long)c, r->size - r->pos);
        return -1;
    }
    int got = LZ4_decompress_safe((const char *)r->in + r->pos, (char *)tmp,
                                  (int)c, (int)bytes);
    if (got < 0 || (size_t)got != bytes) {
        snprintf(r->why, r->why_size, "bslz4 block %zu is not a valid LZ4 "
                 "block of %zu bytes (%s)", block_number, bytes,
                 got < 0 ? "corrupt" : "wrong size");
        return -1;
    }
    r->pos += (size_t)c;
    rtomod_bitunshuffle(tmp, out, n_elem, elem_size);
    return 0;
}

/* The header: the decompressed size must be out_size, the block size a
 * non-zero multiple of 8 elements.  Returns the block size in elements,
 * 0 on error. */
static size_t read_header(reader *r, size_t elem_size, size_t out_size)
{
    if (r->size < 12) {
        snprintf(r->why, r->why_size, "bslz4 data of %zu bytes is shorter "
                 "than its 12-byte header", r->size);
        return 0;
    }
    uint64_t total = read_be(r->in, 8);
    uint64_t block = read_be(r->in + 8, 4);
    r->pos = 12;
    if (total != out_size) {
        snprintf(r->why, r->why_size, "bslz4 header announces %llu bytes, "
                 "the image has %zu", (unsigned long long)total, out_size);
        return 0;
    }
    if (block == 0 || block % (8 * elem_size) != 0) {
        snprintf(r->why, r->why_size, "bslz4 block size %llu bytes is not a "
                 "positive multiple of 8 elements of %zu bytes",
                 (unsigned long long)block, elem_size);
        return 0;
    }
    return (size_t)(block / elem_size);
}

int rtomod_bslz4_decode(const uint8_t *in, size_t in_size, size_t elem_size,
                        uint8_t *out, size_t out_size, char *why,
                        size_t why_size)
{
    reader r = {in, in_size, 0, why, why_size};
    if (elem_size == 0 || elem_size > 8 || out_size % elem_size != 0) {
        snprintf(why, why_size, "bslz4 element size %zu does not divide an "
                 "image of %zu bytes", elem_size, out_size);
        return -1;
    }
    size_t block = read_header(&r, elem_size, out_size);
    if (block == 0)
        return -1;
    size_t n_elem = out_size / elem_size, done = 0, number = 0;
    size_t scratch = (block < n_elem ? block : n_elem) * elem_size;
    uint8_t *tmp = malloc(scratch ? scratch : 1);
    if (!tmp) {
        snprintf(why, why_size, "out of memory for a bslz4 block of %zu "
                 "bytes", scratch);
        return -1;
    }
    int rc = 0;
    while (rc == 0 && n_elem - done >= block) {
        rc = decode_block(&r, block, elem_size, tmp, out + done * elem_size,
                          number++);
        done += block;
    }
    size_t last = (n_elem - done) - (n_elem - done) % 8;
    if (rc == 0 && last > 0) {
        rc = decode_block(&r, last, elem_size, tmp, out + done * elem_size,
                          number++);
        done += last;
    }
    free(tmp);
    if (rc != 0)
        return -1;
    /* The elements that fill no group of 8 follow as they are. */
    size_t leftover = (n_elem - done) * elem_size;
    if (r.size - r.pos != leftover) {
        snprintf(why, why_size, "bslz4 data has %zu bytes after its %zu "
                 "blocks, %zu expected (the %zu elements beyond the last "
                 "group of 8)", r.size - r.pos, number, leftover,
                 n_elem - done);
        return -1;
    }
    memcpy(out + done * elem_size, in + r.pos, leftover);
    return 0;
}
