/*
 * bitshuffle.c — the bitshuffle bit transpose and the "bslz4" framing of
 * DECTRIS Stream V2 images (rtomod_bitshuffle.h says the layout).
 *
 * The inverse transpose, which the daemon runs on every block of every
 * compressed image, has three kernels of the same results: a portable one
 * (64-bit words: a byte transpose of 8 bit rows, then an 8 x 8 bit
 * transpose per word), one of SSE2 vectors (x86-64's baseline) and one of
 * AVX2 vectors, built with a target attribute (no -mavx2 for the whole
 * build) and chosen at run time where the CPU has AVX2.  The portable
 * kernel stays for other machines and as the tests' reference.  Blocks
 * are decoded side by side on the threads a caller lends
 * (rtomod_bslz4_decode_parallel).
 */
#include "config.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lz4.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif
#if defined(__SSE2__) && defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
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

/* Groups g_begin .. row - 1 of every byte plane, one group (8 elements)
 * at a time: any element size, any group count. */
static void unshuffle_groups(const uint8_t *in, uint8_t *out, size_t row,
                             size_t elem_size, size_t g_begin)
{
    for (size_t j = 0; j < elem_size; j++) {
        const uint8_t *rows = in + 8 * j * row;
        for (size_t g = g_begin; g < row; g++) {
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

/* The portable kernel: 64 elements at a time in 64-bit words where the
 * element size allows, the groups left over one at a time. */
static void unshuffle_portable(const uint8_t *in, uint8_t *out,
                               size_t n_elem, size_t elem_size)
{
    size_t row = n_elem / 8, g = 0;     /* bytes per bit row */
    if (elem_size == 1 || elem_size == 2 || elem_size == 4)
        for (; g + 8 <= row; g += 8)
            unshuffle64(in, row, g, elem_size, out + 8 * g * elem_size);
    unshuffle_groups(in, out, row, elem_size, g);
}

/*
 * The vector kernels.  For byte j of the element, the 8 bit rows 8 j + b
 * are loaded 16 (SSE2) or 32 (AVX2) bytes each, one register per row:
 * byte m of register b holds bit b of that byte of the elements 8 m ..
 * 8 m + 7, element 8 m + k in bit k.  In every byte position that is an
 * 8 x 8 bit matrix (register b, bit k); transposing it across the 8
 * registers (three rounds of masked shifts and xors, 4 x 4, 2 x 2 and
 * 1 x 1 blocks) leaves in register k, byte m, byte j of element 8 m + k.
 * Three rounds of byte interleaves (unpacks) put those bytes in element
 * order, and for elements of 2, 4 or 8 bytes one more round per doubling
 * interleaves the byte planes into whole elements.  That is about 15
 * vector instructions per 16 output bytes, none of them a movemask: the
 * SSE2 kernel this replaces (bitshuffle's published method: a byte
 * transpose, then one movemask per 16 bits) assembled the elements from
 * 16-bit masks with scalar shifts and stores, and took 1.8 GB/s per core
 * for uint16 on the 2-core host of docs/PERFORMANCE.md where this takes 5
 * (bench_bitshuffle).
 *
 * The unpacks of AVX2 work within each 128-bit half, so its two halves
 * are two independent SSE2 steps on groups g0 .. g0 + 15 and g0 + 16 ..
 * g0 + 31, stored 16 bytes at a time to their two places.
 *
 * A block whose row is not a multiple of the step (16 or 32 bytes) ends
 * with one step over its last 16 or 32 groups, overlapping the one before
 * it: those elements are written twice with the same values, which is
 * cheaper than a scalar tail (in and out must not overlap).  Rows shorter
 * than one step (blocks under 128 elements) take the portable kernel.
 */
#ifdef __SSE2__

/* Every vector of a step is a named register only if the compiler unrolls
 * the short loops over them and inlines the steps: an array of vectors
 * indexed in a loop lives in memory, which halved the speed. */
#define UNROLL _Pragma("GCC unroll 8")
#define ALWAYS_INLINE static inline __attribute__((always_inline))

/* Exchange the bits of *a at (mask << shift) with the bits of *b at mask
 * (16-bit shifts; the masks keep every bit inside its byte). */
static inline void swap_bits_sse2(__m128i *a, __m128i *b, int shift,
                                  __m128i mask)
{
    __m128i t = _mm_and_si128(_mm_xor_si128(_mm_srli_epi16(*a, shift), *b),
                              mask);
    *b = _mm_xor_si128(*b, t);
    *a = _mm_xor_si128(*a, _mm_slli_epi16(t, shift));
}

/* The 8 x 8 bit transpose across r[0..7] in every byte position. */
static inline void transpose_bits_sse2(__m128i r[8])
{
    const __m128i m4 = _mm_set1_epi8(0x0F), m2 = _mm_set1_epi8(0x33),
                  m1 = _mm_set1_epi8(0x55);
    UNROLL
    for (int b = 0; b < 4; b++)
        swap_bits_sse2(&r[b], &r[b + 4], 4, m4);
    UNROLL
    for (int b = 0; b < 4; b++)     /* rows 0, 1, 4, 5 (counted to unroll) */
        swap_bits_sse2(&r[b + (b & 2)], &r[b + (b & 2) + 2], 2, m2);
    UNROLL
    for (int b = 0; b < 8; b += 2)
        swap_bits_sse2(&r[b], &r[b + 1], 1, m1);
}

/* (*a, *b) <- their bytes interleaved: the first halves, the second. */
static inline void zip_sse2(__m128i *a, __m128i *b)
{
    __m128i lo = _mm_unpacklo_epi8(*a, *b);
    *b = _mm_unpackhi_epi8(*a, *b);
    *a = lo;
}

/* Zip v[i] with v[i + d] for d = n / 2, ..., 1 (n = 1, 2, 4 or 8): where
 * register i held item i's byte of 16 items, the n registers then hold
 * the items' n bytes each, in order.  After the bit transpose (n = 8,
 * register k holding element 8 m + k in byte m) register v holds
 * elements 16 v .. 16 v + 15; on n byte planes of 16 elements it makes
 * the elements of n bytes. */
static inline void zip_all_sse2(__m128i *v, int n)
{
    UNROLL
    for (int d = n / 2; d >= 1; d /= 2) {
        UNROLL
        for (int i = 0; i < n; i++)
            if (!(i & d))
                zip_sse2(&v[i], &v[i + d]);
    }
}

/* Byte plane j of the 128 elements of groups g0 .. g0 + 15, in element
 * order, into p[0..7]. */
ALWAYS_INLINE void plane_sse2(const uint8_t *in, size_t row, size_t g0,
                              size_t j, __m128i p[8])
{
    UNROLL
    for (int b = 0; b < 8; b++)
        p[b] = _mm_loadu_si128(
            (const __m128i *)(in + (8 * j + (size_t)b) * row + g0));
    transpose_bits_sse2(p);
    zip_all_sse2(p, 8);
}

/* The 128 elements of groups g0 .. g0 + 15 to out (their first byte).
 * Always inlined, so that each element size gets its own unrolled copy
 * with the planes in registers. */
ALWAYS_INLINE void
step_sse2(const uint8_t *in, size_t row, size_t g0, size_t elem_size,
          uint8_t *out)
{
    __m128i p[8][8];            /* p[j][v]: plane j, bytes 16 v .. */
    UNROLL
    for (size_t j = 0; j < elem_size; j++)
        plane_sse2(in, row, g0, j, p[j]);
    UNROLL
    for (int v = 0; v < 8; v++) {
        __m128i e[8];           /* the planes of these 16 elements */
        UNROLL
        for (size_t j = 0; j < elem_size; j++)
            e[j] = p[j][v];
        zip_all_sse2(e, (int)elem_size);
        UNROLL
        for (size_t j = 0; j < elem_size; j++)
            _mm_storeu_si128((__m128i *)(out + 16 * (elem_size * (size_t)v +
                                                     j)), e[j]);
    }
}

/* Every 16 groups of the block with step_sse2 (elem_size 1, 2, 4 or 8,
 * row >= 16), the last step overlapping. */
ALWAYS_INLINE void
steps_sse2(const uint8_t *in, uint8_t *out, size_t row, size_t elem_size)
{
    for (size_t g0 = 0;; g0 += 16) {
        if (g0 + 16 > row)
            g0 = row - 16;
        step_sse2(in, row, g0, elem_size, out + 8 * g0 * elem_size);
        if (g0 + 16 == row)
            break;
    }
}

static void unshuffle_sse2(const uint8_t *in, uint8_t *out, size_t n_elem,
                           size_t elem_size)
{
    size_t row = n_elem / 8;
    if (row < 16)
        unshuffle_portable(in, out, n_elem, elem_size);
    else if (elem_size == 1)
        steps_sse2(in, out, row, 1);
    else if (elem_size == 2)
        steps_sse2(in, out, row, 2);
    else if (elem_size == 4)
        steps_sse2(in, out, row, 4);
    else if (elem_size == 8)
        steps_sse2(in, out, row, 8);
    else
        unshuffle_portable(in, out, n_elem, elem_size);
}
#endif /* __SSE2__ */

/* AVX2 where the compiler can build it without -mavx2 (GCC and clang on
 * x86-64 with target attributes); used only where the CPU has it. */
#if defined(__SSE2__) && defined(__x86_64__) && defined(__GNUC__)
#define HAVE_AVX2_KERNEL 1
#define AVX2 __attribute__((target("avx2")))

AVX2 static inline void swap_bits_avx2(__m256i *a, __m256i *b, int shift,
                                       __m256i mask)
{
    __m256i t = _mm256_and_si256(
        _mm256_xor_si256(_mm256_srli_epi16(*a, shift), *b), mask);
    *b = _mm256_xor_si256(*b, t);
    *a = _mm256_xor_si256(*a, _mm256_slli_epi16(t, shift));
}

AVX2 static inline void transpose_bits_avx2(__m256i r[8])
{
    const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(0x33),
                  m1 = _mm256_set1_epi8(0x55);
    UNROLL
    for (int b = 0; b < 4; b++)
        swap_bits_avx2(&r[b], &r[b + 4], 4, m4);
    UNROLL
    for (int b = 0; b < 4; b++)     /* rows 0, 1, 4, 5 (counted to unroll) */
        swap_bits_avx2(&r[b + (b & 2)], &r[b + (b & 2) + 2], 2, m2);
    UNROLL
    for (int b = 0; b < 8; b += 2)
        swap_bits_avx2(&r[b], &r[b + 1], 1, m1);
}

AVX2 static inline void zip_avx2(__m256i *a, __m256i *b)
{
    __m256i lo = _mm256_unpacklo_epi8(*a, *b);
    *b = _mm256_unpackhi_epi8(*a, *b);
    *a = lo;
}

AVX2 static inline void zip_all_avx2(__m256i *v, int n)
{
    UNROLL
    for (int d = n / 2; d >= 1; d /= 2) {
        UNROLL
        for (int i = 0; i < n; i++)
            if (!(i & d))
                zip_avx2(&v[i], &v[i + d]);
    }
}

/* Byte plane j of groups g0 .. g0 + 31: the low halves of p[0..7] hold
 * the first 128 elements in order, the high halves the next 128. */
AVX2 ALWAYS_INLINE void plane_avx2(const uint8_t *in, size_t row, size_t g0,
                                   size_t j, __m256i p[8])
{
    UNROLL
    for (int b = 0; b < 8; b++)
        p[b] = _mm256_loadu_si256(
            (const __m256i *)(in + (8 * j + (size_t)b) * row + g0));
    transpose_bits_avx2(p);
    zip_all_avx2(p, 8);
}

/* The 256 elements of groups g0 .. g0 + 31 to out. */
AVX2 ALWAYS_INLINE void
step_avx2(const uint8_t *in, size_t row, size_t g0, size_t elem_size,
          uint8_t *out)
{
    __m256i p[8][8];
    UNROLL
    for (size_t j = 0; j < elem_size; j++)
        plane_avx2(in, row, g0, j, p[j]);
    uint8_t *second = out + 128 * elem_size;    /* the high halves' */
    UNROLL
    for (int v = 0; v < 8; v++) {
        __m256i e[8];
        UNROLL
        for (size_t j = 0; j < elem_size; j++)
            e[j] = p[j][v];
        zip_all_avx2(e, (int)elem_size);
        UNROLL
        for (size_t j = 0; j < elem_size; j++) {
            size_t at = 16 * (elem_size * (size_t)v + j);
            _mm_storeu_si128((__m128i *)(out + at),
                             _mm256_castsi256_si128(e[j]));
            _mm_storeu_si128((__m128i *)(second + at),
                             _mm256_extracti128_si256(e[j], 1));
        }
    }
}

AVX2 ALWAYS_INLINE void
steps_avx2(const uint8_t *in, uint8_t *out, size_t row, size_t elem_size)
{
    for (size_t g0 = 0;; g0 += 32) {
        if (g0 + 32 > row)
            g0 = row - 32;
        step_avx2(in, row, g0, elem_size, out + 8 * g0 * elem_size);
        if (g0 + 32 == row)
            break;
    }
}

AVX2 static void unshuffle_avx2(const uint8_t *in, uint8_t *out,
                                size_t n_elem, size_t elem_size)
{
    size_t row = n_elem / 8;
    if (row < 32)
        unshuffle_sse2(in, out, n_elem, elem_size);
    else if (elem_size == 1)
        steps_avx2(in, out, row, 1);
    else if (elem_size == 2)
        steps_avx2(in, out, row, 2);
    else if (elem_size == 4)
        steps_avx2(in, out, row, 4);
    else if (elem_size == 8)
        steps_avx2(in, out, row, 8);
    else
        unshuffle_portable(in, out, n_elem, elem_size);
}
#endif /* HAVE_AVX2_KERNEL */

/* ------------------------------------------------- kernel choice ---- */

typedef void (*unshuffle_fn)(const uint8_t *, uint8_t *, size_t, size_t);

static const char *const kernel_names[RTOMOD_UNSHUFFLE_KERNELS] = {
    "portable", "sse2", "avx2"};

int rtomod_unshuffle_has(rtomod_unshuffle_kernel k)
{
    switch (k) {
    case RTOMOD_UNSHUFFLE_PORTABLE:
        return 1;
    case RTOMOD_UNSHUFFLE_SSE2:
#ifdef __SSE2__
        return 1;
#else
        return 0;
#endif
    case RTOMOD_UNSHUFFLE_AVX2:
#ifdef HAVE_AVX2_KERNEL
        __builtin_cpu_init();
        return __builtin_cpu_supports("avx2") != 0;
#else
        return 0;
#endif
    default:
        return 0;
    }
}

const char *rtomod_unshuffle_name(rtomod_unshuffle_kernel k)
{
    return (unsigned)k < RTOMOD_UNSHUFFLE_KERNELS ? kernel_names[k] : "?";
}

static unshuffle_fn kernel_fn(rtomod_unshuffle_kernel k)
{
#ifdef HAVE_AVX2_KERNEL
    if (k == RTOMOD_UNSHUFFLE_AVX2)
        return unshuffle_avx2;
#endif
#ifdef __SSE2__
    if (k == RTOMOD_UNSHUFFLE_SSE2)
        return unshuffle_sse2;
#endif
    return unshuffle_portable;
}

/* The kernel rtomod_bitunshuffle uses: -1 until first asked, then the
 * best this CPU has (or what rtomod_unshuffle_use set).  Any thread may
 * make the first choice; they all make the same one. */
static _Atomic int chosen = -1;

rtomod_unshuffle_kernel rtomod_unshuffle_best(void)
{
    for (int k = RTOMOD_UNSHUFFLE_KERNELS - 1; k > 0; k--)
        if (rtomod_unshuffle_has((rtomod_unshuffle_kernel)k))
            return (rtomod_unshuffle_kernel)k;
    return RTOMOD_UNSHUFFLE_PORTABLE;
}

rtomod_unshuffle_kernel rtomod_unshuffle_current(void)
{
    int k = atomic_load_explicit(&chosen, memory_order_relaxed);
    if (k < 0) {
        k = (int)rtomod_unshuffle_best();
        atomic_store_explicit(&chosen, k, memory_order_relaxed);
    }
    return (rtomod_unshuffle_kernel)k;
}

int rtomod_unshuffle_use(rtomod_unshuffle_kernel k)
{
    if (!rtomod_unshuffle_has(k))
        return -1;
    atomic_store_explicit(&chosen, (int)k, memory_order_relaxed);
    return 0;
}

void rtomod_bitunshuffle_with(rtomod_unshuffle_kernel k, const uint8_t *in,
                              uint8_t *out, size_t n_elem, size_t elem_size)
{
    kernel_fn(rtomod_unshuffle_has(k) ? k : RTOMOD_UNSHUFFLE_PORTABLE)(
        in, out, n_elem, elem_size);
}

void rtomod_bitunshuffle(const uint8_t *in, uint8_t *out, size_t n_elem,
                         size_t elem_size)
{
    kernel_fn(rtomod_unshuffle_current())(in, out, n_elem, elem_size);
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

/* Block i of the plan into out (tmp: scratch of a block); the reason
 * goes to why unless why_size is 0. */
static int decode_one(const uint8_t *in, const plan *p, size_t i,
                      size_t elem_size, uint8_t *tmp, uint8_t *out, char *why,
                      size_t why_size)
{
    const block_at *b = &p->blocks[i];
    size_t bytes = b->n * elem_size;
    int got = LZ4_decompress_safe((const char *)in + b->in, (char *)tmp,
                                  (int)b->c, (int)bytes);
    if (got < 0 || (size_t)got != bytes) {
        if (why_size)
            snprintf(why, why_size, "bslz4 block %zu is not a valid LZ4 "
                     "block of %zu bytes (%s)", i, bytes,
                     got < 0 ? "corrupt" : "wrong size");
        return -1;
    }
    rtomod_bitunshuffle(tmp, out + b->out * elem_size, b->n, elem_size);
    return 0;
}

/* Blocks are decoded in chunks of about CHUNK_BYTES of image, which the
 * threads of the parallel for claim one at a time: an image waits for
 * its last chunk, so chunks must be small for the threads to finish
 * together (64 chunks of a 2048 x 2048 uint16 image, as before, left up
 * to an eighth of a helper's share at the end), and claiming one costs a
 * contended atomic, so not too small. */
#define CHUNK_BYTES (64 * 1024)
#define CHUNKS_MAX (1 << 20)
/* A block's scratch lies on the stack where it fits (bitshuffle's blocks
 * are 8 KiB), so a chunk needs no allocation. */
#define STACK_SCRATCH (16 * 1024)

typedef struct job {
    const uint8_t *in;
    const plan *p;
    size_t elem_size;
    uint8_t *out;
    size_t per_chunk;           /* blocks per chunk */
    _Atomic size_t failed;      /* the first block that failed, or
                                   SIZE_MAX: no text per chunk, the reason
                                   is found again afterwards */
} job;

/* Lower j->failed to `block` if that is earlier. */
static void note_failure(job *j, size_t block)
{
    size_t seen = atomic_load(&j->failed);
    while (block < seen &&
           !atomic_compare_exchange_weak(&j->failed, &seen, block))
        ;
}

static void decode_chunk(void *ctx, int chunk)
{
    job *j = ctx;
    size_t first = (size_t)chunk * j->per_chunk;
    size_t end = j->p->n_blocks - first > j->per_chunk
                     ? first + j->per_chunk : j->p->n_blocks;
    /* Blocks beyond one known to fail need not be decoded: the image is
     * refused for the first one. */
    if (first > atomic_load(&j->failed))
        return;
    uint8_t stack[STACK_SCRATCH];
    size_t need = j->p->block_elems * j->elem_size;
    uint8_t *tmp = need <= sizeof stack ? stack : malloc(need);
    if (!tmp) {
        note_failure(j, first);
        return;
    }
    for (size_t i = first; i < end; i++)
        if (decode_one(j->in, j->p, i, j->elem_size, tmp, j->out, NULL,
                       0) != 0) {
            note_failure(j, i);
            break;
        }
    if (tmp != stack)
        free(tmp);
}

/* Why block i failed: decoded again, here, with its text (the same bytes
 * fail the same way; only a scratch that could not be allocated may not
 * fail twice). */
static void failure_reason(const uint8_t *in, const plan *p, size_t i,
                           size_t elem_size, uint8_t *out, char *why,
                           size_t why_size)
{
    uint8_t *tmp = malloc(p->block_elems * elem_size + 1);
    if (!tmp || decode_one(in, p, i, elem_size, tmp, out, why,
                           why_size) == 0)
        snprintf(why, why_size, "out of memory for bslz4 block %zu", i);
    free(tmp);
}

/* Blocks per chunk: about CHUNK_BYTES of image, at most CHUNKS_MAX
 * chunks; all in one chunk without a parallel for. */
static size_t blocks_per_chunk(const plan *p, size_t elem_size, int parallel)
{
    size_t block_bytes = p->block_elems * elem_size;
    if (!parallel || block_bytes == 0)
        return p->n_blocks ? p->n_blocks : 1;
    size_t per = block_bytes < CHUNK_BYTES ? CHUNK_BYTES / block_bytes : 1;
    return p->n_blocks / per >= CHUNKS_MAX ? p->n_blocks / CHUNKS_MAX + 1
                                           : per;
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
    job j = {.in = in, .p = &p, .elem_size = elem_size, .out = out};
    atomic_init(&j.failed, SIZE_MAX);
    j.per_chunk = blocks_per_chunk(&p, elem_size, par != NULL);
    int chunks = (int)((p.n_blocks + j.per_chunk - 1) / j.per_chunk);
    if (par && chunks > 1)
        par->run(par->pool, chunks, decode_chunk, &j);
    else
        for (int c = 0; c < chunks; c++)
            decode_chunk(&j, c);
    size_t bad = atomic_load(&j.failed);
    if (bad != SIZE_MAX)
        failure_reason(in, &p, bad, elem_size, out, why, why_size);
    else
        memcpy(out + p.leftover_out * elem_size, in + p.leftover_in,
               p.leftover_bytes);
    free(p.blocks);
    return bad != SIZE_MAX ? -1 : 0;
}

int rtomod_bslz4_decode(const uint8_t *in, size_t in_size, size_t elem_size,
                        uint8_t *out, size_t out_size, char *why,
                        size_t why_size)
{
    return rtomod_bslz4_decode_parallel(in, in_size, elem_size, out,
                                        out_size, NULL, why, why_size);
}
