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
#ifdef __SSE2__
#include <emmintrin.h>
#endif

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

static uint64_t load64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);    /* little-endian hosts (configure checks) */
    return v;
}

static void store64(uint8_t *p, uint64_t v)
{
    memcpy(p, &v, sizeof v);
}

/* Transpose the 8 x 8 byte matrix whose row b is r[b] (byte t of the row
 * = column t): afterwards r[t] holds byte t of every former row, in row
 * order.  Three rounds of block swaps: 4 x 4, 2 x 2, 1 x 1 bytes. */
static void transpose_bytes(uint64_t r[8])
{
    for (int i = 0; i < 4; i++) {
        uint64_t a = r[i], c = r[i + 4];
        r[i] = (a & 0x00000000FFFFFFFFULL) | c << 32;
        r[i + 4] = a >> 32 | (c & 0xFFFFFFFF00000000ULL);
    }
    for (int i = 0; i < 8; i += (i & 1) ? 3 : 1) {     /* 0, 1, 4, 5 */
        uint64_t a = r[i], c = r[i + 2];
        r[i] = (a & 0x0000FFFF0000FFFFULL) |
               (c & 0x0000FFFF0000FFFFULL) << 16;
        r[i + 2] = (a >> 16 & 0x0000FFFF0000FFFFULL) |
                   (c & 0xFFFF0000FFFF0000ULL);
    }
    for (int i = 0; i < 8; i += 2) {
        uint64_t a = r[i], c = r[i + 1];
        r[i] = (a & 0x00FF00FF00FF00FFULL) |
               (c & 0x00FF00FF00FF00FFULL) << 8;
        r[i + 1] = (a >> 8 & 0x00FF00FF00FF00FFULL) |
                   (c & 0xFF00FF00FF00FF00ULL);
    }
}

/* The 4 bytes of x spread to every other byte: abcd -> 0a0b0c0d. */
static uint64_t spread8(uint32_t x)
{
    uint64_t v = x;
    v = (v | v << 16) & 0x0000FFFF0000FFFFULL;
    return (v | v << 8) & 0x00FF00FF00FF00FFULL;
}

/* The 2 16-bit halves of x spread to every other 16 bits. */
static uint64_t spread16(uint32_t x)
{
    uint64_t v = x;
    return (v | v << 16) & 0x0000FFFF0000FFFFULL;
}

/* 64 elements of 1, 2 or 4 bytes from the bit rows at `rows` (row length
 * `row` bytes, these elements at byte offset g0 of each): 8 word loads
 * per bit-row group instead of 64 byte loads. */
static void unshuffle64(const uint8_t *rows, size_t row, size_t g0,
                        size_t elem_size, uint8_t *out)
{
    uint64_t y[4][8];
    for (size_t j = 0; j < elem_size; j++) {
        uint64_t r[8];
        for (int b = 0; b < 8; b++)
            r[b] = load64(rows + (8 * j + (size_t)b) * row + g0);
        transpose_bytes(r);
        for (int t = 0; t < 8; t++)
            y[j][t] = transpose8x8(r[t]);
    }
    for (int t = 0; t < 8; t++) {
        uint8_t *dst = out + (size_t)t * 8 * elem_size;
        if (elem_size == 1) {
            store64(dst, y[0][t]);
        } else if (elem_size == 2) {
            store64(dst, spread8((uint32_t)y[0][t]) |
                         spread8((uint32_t)y[1][t]) << 8);
            store64(dst + 8, spread8((uint32_t)(y[0][t] >> 32)) |
                             spread8((uint32_t)(y[1][t] >> 32)) << 8);
        } else {
            for (int h = 0; h < 2; h++) {
                uint64_t lo = spread8((uint32_t)(y[0][t] >> 32 * h)) |
                              spread8((uint32_t)(y[1][t] >> 32 * h)) << 8;
                uint64_t hi = spread8((uint32_t)(y[2][t] >> 32 * h)) |
                              spread8((uint32_t)(y[3][t] >> 32 * h)) << 8;
                /* lo, hi: 4 elements' 16-bit halves, low and high. */
                store64(dst + 16 * h, spread16((uint32_t)lo) |
                                      spread16((uint32_t)hi) << 16);
                store64(dst + 16 * h + 8,
                        spread16((uint32_t)(lo >> 32)) |
                        spread16((uint32_t)(hi >> 32)) << 16);
            }
        }
    }
}

#ifdef __SSE2__
/* 16 groups of 8 elements (g0 .. g0 + 15) of plane j: d[q] holds groups
 * 2 q and 2 q + 1, 8 bytes each, byte b = bit row 8 j + b's byte of the
 * group (a byte transpose in three rounds of unpacks). */
static void gather16(const uint8_t *rows, size_t row, size_t g0, size_t j,
                     __m128i d[8])
{
    __m128i v[8], a[8], c[8];
    for (int b = 0; b < 8; b++)
        v[b] = _mm_loadu_si128((const __m128i *)(rows + (8 * j + (size_t)b) *
                                                 row + g0));
    for (int i = 0; i < 4; i++) {
        a[2 * i] = _mm_unpacklo_epi8(v[2 * i], v[2 * i + 1]);
        a[2 * i + 1] = _mm_unpackhi_epi8(v[2 * i], v[2 * i + 1]);
    }
    /* a[0], a[2], a[4], a[6]: groups 0-7; a[1], ...: groups 8-15 */
    for (int h = 0; h < 2; h++) {
        c[4 * h] = _mm_unpacklo_epi16(a[h], a[h + 2]);
        c[4 * h + 1] = _mm_unpackhi_epi16(a[h], a[h + 2]);
        c[4 * h + 2] = _mm_unpacklo_epi16(a[h + 4], a[h + 6]);
        c[4 * h + 3] = _mm_unpackhi_epi16(a[h + 4], a[h + 6]);
    }
    for (int h = 0; h < 2; h++) {
        d[4 * h] = _mm_unpacklo_epi32(c[4 * h], c[4 * h + 2]);
        d[4 * h + 1] = _mm_unpackhi_epi32(c[4 * h], c[4 * h + 2]);
        d[4 * h + 2] = _mm_unpacklo_epi32(c[4 * h + 1], c[4 * h + 3]);
        d[4 * h + 3] = _mm_unpackhi_epi32(c[4 * h + 1], c[4 * h + 3]);
    }
}

/* Bit k of each of the 16 bytes of v, byte i's in bit i. */
static unsigned bits_k(__m128i v, int k)
{
    return (unsigned)_mm_movemask_epi8(
        _mm_sll_epi16(v, _mm_cvtsi32_si128(7 - k)));
}

/* 128 elements of 1, 2 or 4 bytes (16 groups from g0). */
static void unshuffle128(const uint8_t *rows, size_t row, size_t g0,
                         size_t elem_size, uint8_t *out)
{
    __m128i d[4][8];
    for (size_t j = 0; j < elem_size; j++)
        gather16(rows, row, g0, j, d[j]);
    for (int q = 0; q < 8; q++)
        for (int half = 0; half < 2; half++) {
            size_t g = 2 * (size_t)q + (size_t)half;
            uint8_t *dst = out + 8 * g * elem_size;
            if (elem_size == 1) {
                /* d[0][q] holds groups 2q and 2q + 1 already. */
                if (half)
                    continue;
                for (int k = 0; k < 8; k++) {
                    unsigned m = bits_k(d[0][q], k);
                    dst[k] = (uint8_t)m;
                    dst[8 + k] = (uint8_t)(m >> 8);
                }
                continue;
            }
            __m128i p01 = half ? _mm_unpackhi_epi64(d[0][q], d[1][q])
                               : _mm_unpacklo_epi64(d[0][q], d[1][q]);
            if (elem_size == 2) {
                /* Four elements per 8-byte store: one store per element
                 * was what bounded this loop. */
                for (int k = 0; k < 8; k += 4) {
                    uint64_t m = (uint64_t)bits_k(p01, k) |
                                 (uint64_t)bits_k(p01, k + 1) << 16 |
                                 (uint64_t)bits_k(p01, k + 2) << 32 |
                                 (uint64_t)bits_k(p01, k + 3) << 48;
                    memcpy(dst + 2 * k, &m, 8);
                }
                continue;
            }
            __m128i p23 = half ? _mm_unpackhi_epi64(d[2][q], d[3][q])
                               : _mm_unpacklo_epi64(d[2][q], d[3][q]);
            for (int k = 0; k < 8; k++) {
                uint32_t m = bits_k(p01, k) | bits_k(p23, k) << 16;
                memcpy(dst + 4 * k, &m, 4);
            }
        }
}
#endif

void rtomod_bitunshuffle(const uint8_t *in, uint8_t *out, size_t n_elem,
                         size_t elem_size)
{
    size_t row = n_elem / 8;    /* bytes per bit row */
#ifdef __SSE2__
    if (row % 16 == 0 && (elem_size == 1 || elem_size == 2 ||
                          elem_size == 4)) {
        for (size_t g0 = 0; g0 < row; g0 += 16)
            unshuffle128(in, row, g0, elem_size, out + 8 * g0 * elem_size);
        return;
    }
#endif
    if (row % 8 == 0 && (elem_size == 1 || elem_size == 2 ||
                         elem_size == 4)) {
        for (size_t g0 = 0; g0 < row; g0 += 8)
            unshuffle64(in, row, g0, elem_size, out + 8 * g0 * elem_size);
        return;
    }
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

/* One block located in the buffer. */
typedef struct block_at {
    size_t in;                  /* offset of its LZ4 data */
    size_t c;                   /* its compressed bytes */
    size_t out;                 /* its first element */
    size_t n;                   /* its elements */
} block_at;

/* Where every block and the leftover elements lie. */
typedef struct plan {
    block_at *blocks;
    size_t n_blocks;
    size_t block_elems;         /* of the largest block present (not the
                                   header's block size, which a hostile
                                   header may make huge) */
    size_t leftover_in, leftover_out, leftover_bytes;
} plan;

/* The header: the decompressed size must be out_size, the block size a
 * non-zero multiple of 8 elements.  Returns the block size in elements,
 * 0 on error. */
static size_t read_header(const uint8_t *in, size_t size, size_t elem_size,
                          size_t out_size, char *why, size_t why_size)
{
    if (size < 12) {
        snprintf(why, why_size, "bslz4 data of %zu bytes is shorter than "
                 "its 12-byte header", size);
        return 0;
    }
    uint64_t total = read_be(in, 8);
    uint64_t block = read_be(in + 8, 4);
    if (total != out_size) {
        snprintf(why, why_size, "bslz4 header announces %llu bytes, the "
                 "image has %zu", (unsigned long long)total, out_size);
        return 0;
    }
    if (block == 0 || block % (8 * elem_size) != 0) {
        snprintf(why, why_size, "bslz4 block size %llu bytes is not a "
                 "positive multiple of 8 elements of %zu bytes",
                 (unsigned long long)block, elem_size);
        return 0;
    }
    return (size_t)(block / elem_size);
}

/* Locate the blocks from their size fields: full blocks, then the last
 * partial one rounded down to 8 elements, then the leftover elements,
 * which must end the buffer exactly. */
static int locate(const uint8_t *in, size_t size, size_t elem_size,
                  size_t out_size, plan *p, char *why, size_t why_size)
{
    memset(p, 0, sizeof *p);
    size_t block = read_header(in, size, elem_size, out_size, why, why_size);
    if (block == 0)
        return -1;
    size_t n_elem = out_size / elem_size;
    size_t last = (n_elem % block) / 8 * 8;
    p->block_elems = n_elem >= block ? block : last;
    p->n_blocks = n_elem / block + (last > 0);
    /* Each block takes 4 bytes at least: no table for more blocks than
     * the data can hold. */
    if (p->n_blocks > (size - 12) / 4) {
        snprintf(why, why_size, "bslz4 data of %zu bytes cannot hold the "
                 "%zu blocks its header implies", size, p->n_blocks);
        return -1;
    }
    p->blocks = malloc(sizeof *p->blocks * (p->n_blocks ? p->n_blocks : 1));
    if (!p->blocks) {
        snprintf(why, why_size, "out of memory for %zu bslz4 blocks",
                 p->n_blocks);
        return -1;
    }
    size_t pos = 12, done = 0;
    for (size_t i = 0; i < p->n_blocks; i++) {
        if (size - pos < 4) {
            snprintf(why, why_size, "bslz4 data ends before block %zu's "
                     "size (at byte %zu of %zu)", i, pos, size);
            return -1;
        }
        uint64_t c = read_be(in + pos, 4);
        pos += 4;
        if (c > size - pos || c > (uint64_t)LZ4_MAX_INPUT_SIZE) {
            snprintf(why, why_size, "bslz4 block %zu announces %llu "
                     "compressed bytes, %zu are left", i,
                     (unsigned long long)c, size - pos);
            return -1;
        }
        size_t n = n_elem - done >= block ? block : last;
        p->blocks[i] = (block_at){pos, (size_t)c, done, n};
        pos += (size_t)c;
        done += n;
    }
    p->leftover_in = pos;
    p->leftover_out = done;
    p->leftover_bytes = (n_elem - done) * elem_size;
    if (size - pos != p->leftover_bytes) {
        snprintf(why, why_size, "bslz4 data has %zu bytes after its %zu "
                 "blocks, %zu expected (the %zu elements beyond the last "
                 "group of 8)", size - pos, p->n_blocks, p->leftover_bytes,
                 n_elem - done);
        return -1;
    }
    return 0;
}

/* Block i of the plan into out (tmp: scratch of a block). */
static int decode_one(const uint8_t *in, const plan *p, size_t i,
                      size_t elem_size, uint8_t *tmp, uint8_t *out, char *why,
                      size_t why_size)
{
    const block_at *b = &p->blocks[i];
    size_t bytes = b->n * elem_size;
    int got = LZ4_decompress_safe((const char *)in + b->in, (char *)tmp,
                                  (int)b->c, (int)bytes);
    if (got < 0 || (size_t)got != bytes) {
        snprintf(why, why_size, "bslz4 block %zu is not a valid LZ4 block "
                 "of %zu bytes (%s)", i, bytes,
                 got < 0 ? "corrupt" : "wrong size");
        return -1;
    }
    rtomod_bitunshuffle(tmp, out + b->out * elem_size, b->n, elem_size);
    return 0;
}

/* Blocks are decoded in chunks, one chunk per call of the parallel for;
 * each chunk has its scratch block and its own error slot. */
#define CHUNKS_MAX 64
#define ERROR_MAX 200

typedef struct job {
    const uint8_t *in;
    const plan *p;
    size_t elem_size;
    uint8_t *out;
    size_t per_chunk;
    size_t failed[CHUNKS_MAX];  /* first failing block, or SIZE_MAX */
    char why[CHUNKS_MAX][ERROR_MAX];
} job;

static void decode_chunk(void *ctx, int chunk)
{
    job *j = ctx;
    size_t first = (size_t)chunk * j->per_chunk;
    size_t end = first + j->per_chunk < j->p->n_blocks
                     ? first + j->per_chunk : j->p->n_blocks;
    j->failed[chunk] = SIZE_MAX;
    uint8_t *tmp = malloc(j->p->block_elems * j->elem_size + 1);
    if (!tmp) {
        j->failed[chunk] = first;
        snprintf(j->why[chunk], ERROR_MAX, "out of memory for a bslz4 "
                 "block");
        return;
    }
    for (size_t i = first; i < end; i++)
        if (decode_one(j->in, j->p, i, j->elem_size, tmp, j->out,
                       j->why[chunk], ERROR_MAX) != 0) {
            j->failed[chunk] = i;
            break;
        }
    free(tmp);
}

int rtomod_bslz4_decode_parallel(const uint8_t *in, size_t in_size,
                                 size_t elem_size, uint8_t *out,
                                 size_t out_size, const rtomod_parallel *par,
                                 char *why, size_t why_size)
{
    if (elem_size == 0 || elem_size > 8 || out_size % elem_size != 0) {
        snprintf(why, why_size, "bslz4 element size %zu does not divide an "
                 "image of %zu bytes", elem_size, out_size);
        return -1;
    }
    plan p;
    if (locate(in, in_size, elem_size, out_size, &p, why, why_size) != 0) {
        free(p.blocks);
        return -1;
    }
    job *j = malloc(sizeof *j);
    if (!j) {
        free(p.blocks);
        snprintf(why, why_size, "out of memory for a bslz4 job");
        return -1;
    }
    j->in = in;
    j->p = &p;
    j->elem_size = elem_size;
    j->out = out;
    int chunks = p.n_blocks < CHUNKS_MAX ? (int)p.n_blocks : CHUNKS_MAX;
    if (!par)
        chunks = p.n_blocks > 0;
    j->per_chunk = chunks ? (p.n_blocks + (size_t)chunks - 1) / (size_t)chunks
                          : 0;
    if (chunks > 0 && par)
        par->run(par->pool, chunks, decode_chunk, j);
    else if (chunks > 0)
        decode_chunk(j, 0);
    int rc = 0;
    for (int c = 0; c < chunks && rc == 0; c++)
        if (j->failed[c] != SIZE_MAX) {
            snprintf(why, why_size, "%s", j->why[c]);
            rc = -1;
        }
    if (rc == 0)
        memcpy(out + p.leftover_out * elem_size, in + p.leftover_in,
               p.leftover_bytes);
    free(j);
    free(p.blocks);
    return rc;
}

int rtomod_bslz4_decode(const uint8_t *in, size_t in_size, size_t elem_size,
                        uint8_t *out, size_t out_size, char *why,
                        size_t why_size)
{
    return rtomod_bslz4_decode_parallel(in, in_size, elem_size, out,
                                        out_size, NULL, why, why_size);
}
