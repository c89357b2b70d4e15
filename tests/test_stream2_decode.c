/*
 * test_stream2_decode.c — the pieces of rtomod's DECTRIS Stream V2 input
 * that need no socket: the bitshuffle transpose against a bit-by-bit
 * reference written from the format's description, bslz4 buffers (encoded
 * here from the same description with liblz4) of every size class
 * (multiples of 8 elements or not, partial last blocks, leftover bytes)
 * decoded back, every malformed bslz4 buffer refused with a reason, and
 * the CBOR pre-check refusing hostile structure (deep nesting, lying
 * lengths, trailing bytes) before libcbor allocates for it.  The vector
 * kernels of the inverse transpose (SSE2, AVX2) are compared bit for bit
 * with the portable one, and round-trip whole bslz4 buffers, on data
 * drawn fresh every run (the seed is printed; RTOMO_TEST_SEED replays
 * one); the decoding helpers run every item of every run exactly once.
 */
#include "config.h"

#include <check.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <lz4.h>

#include "check_run.h"
#include "rtomod_bitshuffle.h"
#include "rtomod_decode_pool.h"
#include "rtomod_stream2.h"

static uint64_t rng = 0x9E3779B97F4A7C15ULL;

static uint8_t random_byte(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint8_t)rng;
}

static void fill_random(uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        p[i] = random_byte();
}

/* The run's seed for fresh data: RTOMO_TEST_SEED or the clock, printed by
 * main() so that a failure can be replayed.  The older tests keep the
 * fixed stream above (their corruptions are placed for it). */
static uint64_t base_seed;

/* A stream of its own for each test (salt), from the base seed. */
static uint64_t seeded(uint64_t salt)
{
    uint64_t s = base_seed ^ (salt * 0x9E3779B97F4A7C15ULL);
    return s ? s : 1;           /* xorshift must not start at 0 */
}

static uint64_t next_random(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void fill_seeded(uint64_t *s, uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)(next_random(s) >> 24);
}

/* The transpose by its definition: bit row 8 j + b, byte i, bit k is bit
 * b of byte j of element 8 i + k. */
static void reference_shuffle(const uint8_t *in, uint8_t *out, size_t n,
                              size_t size)
{
    memset(out, 0, n * size);
    for (size_t e = 0; e < n; e++)
        for (size_t j = 0; j < size; j++)
            for (int b = 0; b < 8; b++) {
                int bit = in[e * size + j] >> b & 1;
                size_t row = 8 * j + (size_t)b;
                out[row * (n / 8) + e / 8] |= (uint8_t)(bit << (e % 8));
            }
}

START_TEST(transpose_matches_definition)
{
    static const size_t sizes[] = {1, 2, 4, 8};
    static const size_t counts[] = {8, 16, 64, 120, 1024};
    for (size_t s = 0; s < 4; s++)
        for (size_t c = 0; c < 5; c++) {
            size_t n = counts[c], size = sizes[s], bytes = n * size;
            uint8_t *in = malloc(bytes), *ref = malloc(bytes),
                    *got = malloc(bytes), *back = malloc(bytes);
            fill_random(in, bytes);
            reference_shuffle(in, ref, n, size);
            rtomod_bitshuffle(in, got, n, size);
            ck_assert_msg(memcmp(ref, got, bytes) == 0,
                          "shuffle differs: %zu elements of %zu bytes", n,
                          size);
            rtomod_bitunshuffle(ref, back, n, size);
            ck_assert_msg(memcmp(in, back, bytes) == 0,
                          "unshuffle differs: %zu elements of %zu bytes", n,
                          size);
            free(in); free(ref); free(got); free(back);
        }
}
END_TEST

/* A bslz4 buffer of `data` (n elements of `size` bytes) with blocks of
 * `block` elements, as the bitshuffle HDF5 filter frames it. */
static uint8_t *encode(const uint8_t *data, size_t n, size_t size,
                       size_t block, size_t *out_size)
{
    size_t cap = 12 + (n / 8 + 2) * 4 + LZ4_compressBound((int)(n * size)) +
                 n * size + 64;
    uint8_t *out = malloc(cap), *tmp = malloc(n * size + 8);
    size_t pos = 12, done = 0;
    uint64_t total = n * size;
    for (int i = 0; i < 8; i++)
        out[i] = (uint8_t)(total >> (56 - 8 * i));
    uint32_t bb = (uint32_t)(block * size);
    for (int i = 0; i < 4; i++)
        out[8 + i] = (uint8_t)(bb >> (24 - 8 * i));
    while (done < n) {
        size_t m = n - done >= block ? block : (n - done) / 8 * 8;
        if (m == 0)
            break;
        rtomod_bitshuffle(data + done * size, tmp, m, size);
        int c = LZ4_compress_default((const char *)tmp, (char *)out + pos + 4,
                                     (int)(m * size), (int)(cap - pos - 4));
        ck_assert_int_gt(c, 0);
        for (int i = 0; i < 4; i++)
            out[pos + (size_t)i] = (uint8_t)((uint32_t)c >> (24 - 8 * i));
        pos += 4 + (size_t)c;
        done += m;
    }
    memcpy(out + pos, data + done * size, (n - done) * size);
    *out_size = pos + (n - done) * size;
    free(tmp);
    return out;
}

START_TEST(bslz4_round_trips_every_size_class)
{
    /* Multiples of the block, partial last blocks, sizes that are no
     * multiple of 8 (leftover bytes), fewer than 8 elements (no block),
     * and an empty image. */
    static const size_t counts[] = {0, 1, 7, 8, 9, 63, 64, 65, 200, 1021,
                                    4096, 4099};
    static const size_t sizes[] = {1, 2, 4};
    for (size_t s = 0; s < 3; s++)
        for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
            size_t n = counts[c], size = sizes[s];
            uint8_t *data = malloc(n * size + 1), *back = malloc(n * size + 1);
            fill_random(data, n * size);
            for (size_t i = 0; i < n * size; i += 3)
                data[i] = 0;            /* something to compress */
            size_t len;
            uint8_t *packed = encode(data, n, size, 64, &len);
            char why[256] = "";
            ck_assert_msg(rtomod_bslz4_decode(packed, len, size, back,
                                              n * size, why, sizeof why) == 0,
                          "%zu x %zu bytes: %s", n, size, why);
            ck_assert(memcmp(data, back, n * size) == 0);
            ck_assert_int_eq(rtomod_bslz4_size(packed, len), (int64_t)(n * size));
            free(packed); free(data); free(back);
        }
}
END_TEST

/* decode must refuse `packed` (len bytes) for an image of n x size, with
 * `words` in its reason. */
static void refused(const uint8_t *packed, size_t len, size_t n, size_t size,
                    const char *words)
{
    uint8_t *out = malloc(n * size + 1);
    char why[256] = "";
    ck_assert_int_eq(rtomod_bslz4_decode(packed, len, size, out, n * size,
                                         why, sizeof why), -1);
    ck_assert_msg(strstr(why, words), "reason \"%s\" lacks \"%s\"", why,
                  words);
    free(out);
}

/* An independent vector: 300 uint16 values (i * 37 + 5) compressed by
 * Debian's bitshuffle 0.3.5 (python3 bitshuffle.compress_lz4(a, 0): one
 * block of 296 elements, the 4 left over copied) behind the HDF5
 * filter's header (uint64 BE 600 bytes, uint32 BE block of 8192 bytes),
 * as a DECTRIS detector sends it.  Not made by our encoder, so it checks
 * the decoder against the library the format comes from. */
static const uint8_t debian_bitshuffle_vector[] = {
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x58, 0x00, 0x00, 0x20, 0x00,
    0x00, 0x00, 0x00, 0xff, 0x1f, 0x55, 0x01, 0x00, 0x11, 0x1f, 0x66, 0x01,
    0x00, 0x11, 0x1f, 0x2d, 0x01, 0x00, 0x11, 0x2f, 0xb6, 0x49, 0x02, 0x00,
    0x10, 0x4f, 0x38, 0x8e, 0xc7, 0x71, 0x04, 0x00, 0x0e, 0x8f, 0x6a, 0xa5,
    0x52, 0x2b, 0x95, 0x5a, 0xad, 0xd4, 0x08, 0x00, 0x0a, 0xff, 0x01, 0x4c,
    0x36, 0x9b, 0x4d, 0x26, 0x93, 0xc9, 0x66, 0xb3, 0xc9, 0x64, 0xb2, 0xd9,
    0x6c, 0x36, 0x99, 0x10, 0x00, 0x02, 0xf1, 0x11, 0x70, 0x38, 0x1c, 0x8e,
    0xc7, 0xe3, 0xf1, 0x78, 0x3c, 0x0e, 0x87, 0xc3, 0xe1, 0x70, 0x38, 0x1e,
    0x8f, 0xc7, 0xe3, 0x71, 0x38, 0x1c, 0x0e, 0x87, 0xc3, 0xf1, 0x78, 0x3c,
    0x1e, 0x8f, 0xc7, 0xe1, 0x20, 0x00, 0xf4, 0x05, 0x80, 0x3f, 0xe0, 0x0f,
    0xf8, 0x03, 0xfe, 0x80, 0x3f, 0xf0, 0x07, 0xfc, 0x01, 0x7f, 0xc0, 0x1f,
    0xf0, 0x07, 0xfc, 0x81, 0x13, 0x00, 0x32, 0xe0, 0x0f, 0xf8, 0x13, 0x00,
    0xf0, 0x01, 0x00, 0xc0, 0xff, 0x0f, 0x00, 0xfc, 0xff, 0x00, 0xc0, 0xff,
    0x07, 0x00, 0xfe, 0x7f, 0x00, 0xe0, 0x07, 0x00, 0x70, 0x3f, 0x00, 0xf0,
    0xff, 0x03, 0x00, 0xff, 0x07, 0x00, 0xf2, 0x05, 0x01, 0x80, 0xff, 0x1f,
    0x00, 0xf8, 0x00, 0x00, 0x00, 0xf0, 0xff, 0xff, 0xff, 0x00, 0x00, 0x00,
    0xf8, 0xff, 0xff, 0x7f, 0x07, 0x00, 0x52, 0x3f, 0x00, 0x00, 0x00, 0xfc,
    0x07, 0x00, 0x54, 0xfe, 0xff, 0xff, 0x1f, 0x00, 0x01, 0x00, 0x11, 0xff,
    0x01, 0x00, 0x00, 0x25, 0x00, 0x41, 0x00, 0x00, 0x00, 0xc0, 0x0d, 0x00,
    0x01, 0x2c, 0x00, 0x41, 0x00, 0x00, 0x00, 0xe0, 0x43, 0x00, 0x06, 0x02,
    0x00, 0x12, 0x80, 0x1e, 0x00, 0x03, 0x02, 0x00, 0x03, 0x25, 0x00, 0x0f,
    0x02, 0x00, 0x0b, 0x03, 0x51, 0x00, 0x02, 0x8d, 0x00, 0x0f, 0x02, 0x00,
    0x2f, 0x50, 0x00, 0x00, 0x00, 0x00, 0x00, 0xcd, 0x2a, 0xf2, 0x2a, 0x17,
    0x2b, 0x3c, 0x2b,
};

START_TEST(bslz4_decodes_real_bitshuffle)
{
    uint16_t out[300];
    char why[256];
    ck_assert_msg(rtomod_bslz4_decode(debian_bitshuffle_vector,
                                      sizeof debian_bitshuffle_vector, 2,
                                      (uint8_t *)out, sizeof out, why,
                                      sizeof why) == 0, "%s", why);
    for (int i = 0; i < 300; i++)
        ck_assert_msg(out[i] == (uint16_t)(i * 37 + 5), "element %d: %u", i,
                      out[i]);
}
END_TEST

START_TEST(bslz4_malformed_refused)
{
    size_t n = 200, size = 2, len;
    uint8_t data[400];
    fill_random(data, sizeof data);
    uint8_t *p = encode(data, n, size, 64, &len);
    uint8_t *bad = malloc(len + 16);
    refused(p, 11, n, size, "shorter than its 12-byte header");
    refused(p, len, n + 1, size, "announces 400 bytes");
    memcpy(bad, p, len);
    memset(bad + 8, 0, 4);                      /* block size 0 */
    refused(bad, len, n, size, "block size 0");
    memcpy(bad, p, len);
    bad[11] = 12;                               /* 6 elements: not 8k */
    bad[10] = 0;
    refused(bad, len, n, size, "not a positive multiple of 8");
    refused(p, 14, n, size, "cannot hold the 4 blocks");
    memcpy(bad, p, len);
    bad[12] = 0x7f;                             /* compressed size huge */
    refused(bad, len, n, size, "compressed bytes");
    memcpy(bad, p, len);
    memset(bad + 16, 0xff, 12);                 /* corrupt LZ4 */
    refused(bad, len, n, size, "not a valid LZ4 block");
    memcpy(bad, p, len);
    bad[len] = 0;                               /* one byte too many */
    refused(bad, len + 1, n, size, "after its");
    refused(p, len - 1, n, size, "");           /* truncated anywhere */
    refused(p, len, n, 0, "does not divide");
    /* A block size far beyond the image (2^31 bytes): the image is then
     * one partial block, which is how these 20 elements were framed, and
     * the scratch is sized by it, not by the header (the fuzzer found a
     * 512 MB allocation for a 60-byte image). */
    uint8_t small[40];
    fill_random(small, sizeof small);
    size_t slen;
    uint8_t *sp = encode(small, 20, 2, 16, &slen);
    sp[8] = 0x80;
    sp[9] = sp[10] = sp[11] = 0;
    uint8_t back[40];
    char text[256];
    ck_assert_msg(rtomod_bslz4_decode(sp, slen, 2, back, 40, text,
                                      sizeof text) == 0, "%s", text);
    ck_assert(memcmp(back, small, sizeof small) == 0);
    free(sp);
    free(bad);
    free(p);
}
END_TEST

/* The blocks decoded side by side by the loop's helpers: the same image,
 * and with two corrupt blocks the first one's reason. */
START_TEST(bslz4_parallel_matches_sequential)
{
    size_t n = 100000 + 5, size = 2, len;
    uint8_t *data = malloc(n * size), *a = malloc(n * size),
            *b = malloc(n * size);
    fill_random(data, n * size);
    for (size_t i = 0; i < n * size; i += 2)
        data[i] = 0;
    uint8_t *packed = encode(data, n, size, 256, &len);
    rtomod_decode_pool *pool = rtomod_decode_pool_new(3);
    ck_assert_ptr_nonnull(pool);
    rtomod_parallel par = {rtomod_decode_pool_run, pool};
    char why[256];
    for (int round = 0; round < 20; round++) {
        memset(b, 0, n * size);
        ck_assert_int_eq(rtomod_bslz4_decode_parallel(packed, len, size, b,
                                                      n * size, &par, why,
                                                      sizeof why), 0);
        ck_assert(memcmp(b, data, n * size) == 0);
    }
    ck_assert_int_eq(rtomod_bslz4_decode(packed, len, size, a, n * size, why,
                                         sizeof why), 0);
    ck_assert(memcmp(a, data, n * size) == 0);
    /* Corrupt blocks 300 and 100 (each LZ4 block's first bytes). */
    size_t pos = 12, block = 0;
    while (block <= 300) {
        size_t c = (size_t)packed[pos] << 24 | (size_t)packed[pos + 1] << 16 |
                   (size_t)packed[pos + 2] << 8 | packed[pos + 3];
        if (block == 100 || block == 300)
            memset(packed + pos + 4, 0xff, c < 16 ? c : 16);
        pos += 4 + c;
        block++;
    }
    ck_assert_int_eq(rtomod_bslz4_decode_parallel(packed, len, size, b,
                                                  n * size, &par, why,
                                                  sizeof why), -1);
    ck_assert_msg(strstr(why, "block 100 "), "reason: %s", why);
    rtomod_decode_pool_free(pool);
    free(packed); free(data); free(a); free(b);
}
END_TEST

/* ------------------------------------------------ vector kernels ---- */

/* Whether kernel k is here to be tested (for `what`); says so either
 * way, so that a host without AVX2 shows its tests skipped, not passed. */
static int kernel_present(rtomod_unshuffle_kernel k, const char *what)
{
    if (rtomod_unshuffle_has(k)) {
        fprintf(stderr, "%s kernel: %s\n", rtomod_unshuffle_name(k), what);
        return 1;
    }
    fprintf(stderr, "SKIPPED: %s kernel: %s (this build or CPU has no %s "
            "kernel)\n", rtomod_unshuffle_name(k), what,
            rtomod_unshuffle_name(k));
    return 0;
}

/* Bit-row lengths (block elements / 8) to compare: every one up to 70
 * (under, at and beyond one SSE2 step of 16 and one AVX2 step of 32, so
 * every overlapping last step), around the larger powers of 2, and a few
 * drawn from s. */
static size_t rows_case(size_t i, uint64_t *s)
{
    static const size_t fixed[] = {127, 128, 129, 255, 256, 257, 511, 512,
                                   513, 1023, 1024, 1025, 2048};
    size_t n_fixed = sizeof fixed / sizeof fixed[0];
    if (i < 70)
        return i + 1;
    if (i < 70 + n_fixed)
        return fixed[i - 70];
    return 1 + (size_t)(next_random(s) % 3000);
}
#define ROWS_CASES (70 + 13 + 8)
#define GUARD 64                /* bytes around an output that must stay */

/* Kernel k against the portable one on n elements of `size` bytes of
 * fresh data, in and out at odd addresses, nothing written outside. */
static void compare_kernel(rtomod_unshuffle_kernel k, size_t n, size_t size,
                           uint64_t *s)
{
    size_t bytes = n * size;
    uint8_t *in = malloc(bytes + 1), *want = malloc(bytes + 1),
            *got = malloc(bytes + 2 * GUARD + 3);
    ck_assert(in && want && got);
    fill_seeded(s, in + 1, bytes);
    memset(got, 0xA5, bytes + 2 * GUARD + 3);
    rtomod_bitunshuffle_with(RTOMOD_UNSHUFFLE_PORTABLE, in + 1, want, n,
                             size);
    rtomod_bitunshuffle_with(k, in + 1, got + GUARD + 3, n, size);
    ck_assert_msg(memcmp(want, got + GUARD + 3, bytes) == 0,
                  "%s kernel differs from the portable one: %zu elements "
                  "of %zu bytes", rtomod_unshuffle_name(k), n, size);
    for (size_t i = 0; i < GUARD; i++)
        ck_assert_msg(got[3 + i] == 0xA5 && got[GUARD + 3 + bytes + i] == 0xA5,
                      "%s kernel wrote outside %zu elements of %zu bytes",
                      rtomod_unshuffle_name(k), n, size);
    free(in); free(want); free(got);
}

START_TEST(vector_kernels_match_portable)
{
    /* 3 bytes: no vector path, the kernels must fall back correctly. */
    static const size_t sizes[] = {1, 2, 4, 8, 3};
    static const rtomod_unshuffle_kernel kernels[] = {
        RTOMOD_UNSHUFFLE_SSE2, RTOMOD_UNSHUFFLE_AVX2};
    uint64_t s = seeded(1);
    for (size_t k = 0; k < 2; k++) {
        if (!kernel_present(kernels[k], "comparison with the portable one"))
            continue;
        for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++)
            for (size_t i = 0; i < ROWS_CASES; i++)
                compare_kernel(kernels[k], 8 * rows_case(i, &s), sizes[z],
                               &s);
    }
}
END_TEST

/* n elements of `size` bytes that compress somewhat, as counts do: a
 * ramp with random low bits. */
static void fill_counts(uint64_t *s, uint8_t *p, size_t n, size_t size)
{
    for (size_t e = 0; e < n; e++) {
        uint64_t v = e * 3 + (next_random(s) >> 40) % 16;
        for (size_t j = 0; j < size; j++)
            p[e * size + j] = (uint8_t)(v >> (8 * j));
    }
}

/* Encode, then decode with the current kernel alone and on the pool. */
static void round_trip(const uint8_t *data, size_t n, size_t size,
                       size_t block, const rtomod_parallel *par)
{
    size_t len, bytes = n * size;
    uint8_t *packed = encode(data, n, size, block, &len);
    uint8_t *back = malloc(bytes + 1);
    char why[256] = "";
    for (int on_pool = 0; on_pool < 2; on_pool++) {
        memset(back, 0x5A, bytes);
        ck_assert_msg(rtomod_bslz4_decode_parallel(
                          packed, len, size, back, bytes,
                          on_pool ? par : NULL, why, sizeof why) == 0,
                      "%zu x %zu bytes, blocks of %zu: %s", n, size, block,
                      why);
        ck_assert_msg(memcmp(back, data, bytes) == 0, "%s kernel: %zu "
                      "elements of %zu bytes, blocks of %zu, %s, decoded "
                      "wrong", rtomod_unshuffle_name(
                          rtomod_unshuffle_current()), n, size, block,
                      on_pool ? "on the pool" : "alone");
    }
    free(packed); free(back);
}

START_TEST(kernels_round_trip_bslz4)
{
    /* Counts that are and are not multiples of 8, 16, 32, 64 and of the
     * blocks; blocks under, at and over one vector step. */
    static const size_t counts[] = {0, 5, 8, 100, 1021, 8248, 4099, 16387,
                                    65536};
    static const size_t blocks[] = {8, 24, 128, 136, 1000, 0};
    static const size_t sizes[] = {1, 2, 4};
    uint64_t s = seeded(2);
    rtomod_decode_pool *pool = rtomod_decode_pool_new(2);
    ck_assert_ptr_nonnull(pool);
    rtomod_parallel par = {rtomod_decode_pool_run, pool};
    fprintf(stderr, "the decoders' kernel here: %s\n",
            rtomod_unshuffle_name(rtomod_unshuffle_current()));
    for (int k = 0; k < RTOMOD_UNSHUFFLE_KERNELS; k++) {
        if (!kernel_present((rtomod_unshuffle_kernel)k,
                            "bslz4 round trips"))
            continue;
        ck_assert_int_eq(rtomod_unshuffle_use((rtomod_unshuffle_kernel)k),
                         0);
        for (size_t z = 0; z < 3; z++)
            for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
                size_t n = counts[c], size = sizes[z];
                uint8_t *data = malloc(n * size + 1);
                fill_counts(&s, data, n, size);
                for (size_t b = 0; b < sizeof blocks / sizeof blocks[0]; b++)
                    /* 0: bitshuffle's default, 8 KiB of elements */
                    round_trip(data, n, size,
                               blocks[b] ? blocks[b] : 8192 / size, &par);
                free(data);
            }
    }
    ck_assert_int_eq(rtomod_unshuffle_use(rtomod_unshuffle_best()), 0);
    rtomod_decode_pool_free(pool);
}
END_TEST

/* ------------------------------------------------- decoding pool ---- */

typedef struct tally {
    atomic_int hits[257];
    int slow;                   /* every 7th item sleeps: late helpers */
} tally;

static void count_item(void *ctx, int i)
{
    tally *t = ctx;
    atomic_fetch_add(&t->hits[i], 1);
    if (t->slow && i % 7 == 0)
        nanosleep(&(struct timespec){0, 20000}, NULL);
}

/* Runs back to back, each tally on the same stack spot: an item run
 * twice, skipped, or taken by a helper still in the run before (with
 * that run's tally) shows as a wrong count. */
START_TEST(pool_runs_every_item_once)
{
    rtomod_decode_pool *pool = rtomod_decode_pool_new(3);
    ck_assert_ptr_nonnull(pool);
    uint64_t s = seeded(3);
    for (int run = 0; run < 3000; run++) {
        tally t;
        for (int i = 0; i < 257; i++)
            atomic_init(&t.hits[i], 0);
        t.slow = run % 10 == 0;
        int n = (int)(next_random(&s) % 257);
        rtomod_decode_pool_run(pool, n, count_item, &t);
        for (int i = 0; i < 257; i++)
            ck_assert_msg(atomic_load(&t.hits[i]) == (i < n),
                          "run %d of %d items: item %d ran %d times", run,
                          n, i, atomic_load(&t.hits[i]));
    }
    rtomod_decode_pool_free(pool);
}
END_TEST

START_TEST(precheck_refuses_hostile_cbor)
{
    rtomo_reject_info why;
    /* 100 nested arrays */
    uint8_t deep[101];
    memset(deep, 0x81, 100);
    deep[100] = 0x00;
    ck_assert_int_eq(rtomod_s2_precheck(deep, sizeof deep, &why), -1);
    ck_assert_int_eq(why.reason, RTOMO_REJECT_CBOR);
    ck_assert(strstr(why.message, "deeper"));
    /* an array claiming 2^32 items in 9 bytes */
    const uint8_t liar[] = {0x9b, 0, 0, 0, 1, 0, 0, 0, 0};
    ck_assert_int_eq(rtomod_s2_precheck(liar, sizeof liar, &why), -1);
    ck_assert(strstr(why.message, "larger than the message"));
    /* 100000 one-byte items: each would cost libcbor an allocation */
    size_t many_n = 5 + 100000;
    uint8_t *many = malloc(many_n);
    many[0] = 0x9a;                             /* array of 100000 */
    many[1] = 0; many[2] = 0x01; many[3] = 0x86; many[4] = 0xa0;
    memset(many + 5, 0x01, 100000);
    ck_assert_int_eq(rtomod_s2_precheck(many, many_n, &why), -1);
    ck_assert(strstr(why.message, "items"));
    free(many);
    /* a byte string longer than the message */
    const uint8_t long_bytes[] = {0x5a, 0, 1, 0, 0, 1, 2};
    ck_assert_int_eq(rtomod_s2_precheck(long_bytes, sizeof long_bytes, &why),
                     -1);
    /* trailing bytes after a whole item */
    const uint8_t trailing[] = {0xa0, 0x00};
    ck_assert_int_eq(rtomod_s2_precheck(trailing, sizeof trailing, &why), -1);
    ck_assert(strstr(why.message, "follow"));
    /* a break with nothing open; reserved additional info */
    const uint8_t stray_break[] = {0xff};
    ck_assert_int_eq(rtomod_s2_precheck(stray_break, 1, &why), -1);
    const uint8_t reserved[] = {0x1c};
    ck_assert_int_eq(rtomod_s2_precheck(reserved, 1, &why), -1);
    /* well-formed: {"a": [1, 2, tag 40 (h'00')], "b": indefinite [1]} */
    const uint8_t good[] = {0xa2, 0x61, 'a', 0x83, 0x01, 0x02, 0xd8, 0x28,
                            0x41, 0x00, 0x61, 'b', 0x9f, 0x01, 0xff};
    ck_assert_int_eq(rtomod_s2_precheck(good, sizeof good, &why), 0);
    /* and parsed: not a Stream V2 message (no "type") */
    rtomod_s2_msg msg;
    ck_assert_int_eq(rtomod_s2_parse(good, sizeof good, NULL, NULL, &msg,
                                     &why), -1);
    ck_assert_int_eq(why.reason, RTOMO_REJECT_TYPE);
}
END_TEST

/* A CBOR head of major type `major` with argument n at p; its length. */
static size_t head(uint8_t *p, int major, uint64_t n)
{
    if (n < 24) {
        p[0] = (uint8_t)(major << 5 | (int)n);
        return 1;
    }
    p[0] = (uint8_t)(major << 5 | 26);
    for (int i = 0; i < 4; i++)
        p[1 + i] = (uint8_t)(n >> (24 - 8 * i));
    return 5;
}

static size_t text(uint8_t *p, const char *s)
{
    size_t n = head(p, 3, strlen(s));
    memcpy(p + n, s, strlen(s));
    return n + strlen(s);
}

/* An image message of a 256 x 256 uint16 image (128 KiB: read in place)
 * whose image_id is, with id_bytes > 0, a byte string of that many bytes,
 * else the integer 5. */
static uint8_t *big_image(size_t id_bytes, size_t *size)
{
    size_t pixels = 256 * 256 * 2;
    uint8_t *m = malloc(pixels + id_bytes + 256), *p = m;
    p += head(p, 5, 4);                         /* map of 4 */
    p += text(p, "type");
    p += text(p, "image");
    p += text(p, "series_id");
    p += head(p, 0, 1);
    p += text(p, "image_id");
    if (id_bytes) {
        p += head(p, 2, id_bytes);
        memset(p, 7, id_bytes);
        p += id_bytes;
    } else {
        p += head(p, 0, 5);
    }
    p += text(p, "data");
    p += head(p, 5, 1);                         /* {"c": ...} */
    p += text(p, "c");
    *p++ = 0xd8, *p++ = 40;                     /* tag 40 */
    p += head(p, 4, 2);                         /* [dims, array] */
    p += head(p, 4, 2);
    *p++ = 0x19, *p++ = 1, *p++ = 0;            /* 256 */
    *p++ = 0x19, *p++ = 1, *p++ = 0;            /* 256 */
    *p++ = 0xd8, *p++ = 69;                     /* tag 69: uint16 LE */
    p += head(p, 2, pixels);
    for (size_t i = 0; i < pixels; i++)
        p[i] = (uint8_t)(i * 7);
    p += pixels;
    *size = (size_t)(p - m);
    return m;
}

START_TEST(large_strings_read_in_place)
{
    size_t size;
    uint8_t *m = big_image(0, &size);
    rtomod_s2_msg msg;
    rtomo_reject_info why;
    ck_assert_msg(rtomod_s2_parse(m, size, NULL, NULL, &msg, &why) == 0,
                  "%s", why.message);
    ck_assert_int_eq(msg.kind, RTOMOD_S2_IMAGE);
    ck_assert_int_eq((int)msg.image_id, 5);
    ck_assert_int_eq((int)msg.pixels.height, 256);
    /* the pixels are the message's own bytes, not a copy */
    ck_assert(msg.pixels.data >= m && msg.pixels.data < m + size);
    ck_assert_int_eq((int)msg.pixels.size, 256 * 256 * 2);
    ck_assert_int_eq(msg.pixels.data[3], (uint8_t)21);
    rtomod_s2_clear(&msg);
    free(m);
    /* A big byte string where a number belongs is still no number. */
    m = big_image(100000, &size);
    ck_assert_int_eq(rtomod_s2_parse(m, size, NULL, NULL, &msg, &why), -1);
    ck_assert_int_eq(why.reason, RTOMO_REJECT_FIELD);
    ck_assert_msg(strstr(why.message, "image_id"), "%s", why.message);
    free(m);
    /* The reserved reference tag is refused in input. */
    const uint8_t reserved[] = {0xda, 0x72, 0x74, 0x6f, 0x6d, 0x00};
    ck_assert_int_eq(rtomod_s2_parse(reserved, sizeof reserved, NULL, NULL,
                                     &msg, &why), -1);
    ck_assert_int_eq(why.reason, RTOMO_REJECT_CBOR);
}
END_TEST

int main(void)
{
    const char *env = getenv("RTOMO_TEST_SEED");
    base_seed = env ? strtoull(env, NULL, 0) : (uint64_t)time(NULL);
    fprintf(stderr, "random seed: RTOMO_TEST_SEED=%llu\n",
            (unsigned long long)base_seed);
    Suite *s = suite_create("stream2_decode");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, transpose_matches_definition);
    tcase_add_test(tc, bslz4_round_trips_every_size_class);
    tcase_add_test(tc, bslz4_malformed_refused);
    tcase_add_test(tc, bslz4_decodes_real_bitshuffle);
    tcase_add_test(tc, bslz4_parallel_matches_sequential);
    tcase_add_test(tc, vector_kernels_match_portable);
    tcase_add_test(tc, kernels_round_trip_bslz4);
    tcase_add_test(tc, pool_runs_every_item_once);
    tcase_add_test(tc, large_strings_read_in_place);
    tcase_add_test(tc, precheck_refuses_hostile_cbor);
    suite_add_tcase(s, tc);
    return rtomo_check_run(s);
}
