/*
 * rtomod_bitshuffle.h — decoding of DECTRIS "bslz4" data: bitshuffle
 * (Masui et al.) blocks compressed with LZ4, in the framing of the
 * bitshuffle HDF5 filter that DECTRIS Stream V2 uses inside its
 * compression tag (CBOR tag 56500).  No Debian package provides the
 * bitshuffle format as a C library, so this is an implementation of its
 * published layout; LZ4 itself comes from liblz4.
 *
 * The framing, all integers big-endian:
 *   uint64  size of the decompressed data, bytes
 *   uint32  block size, bytes (a multiple of 8 elements)
 *   then, for every full block and for the last partial block rounded
 *   down to a multiple of 8 elements:
 *     uint32  compressed size c
 *     c bytes LZ4 block (raw LZ4 block format, no frame)
 *   then the (n mod 8) elements that fit in no block, copied as they are.
 * Within a block of n elements (n a multiple of 8) of s bytes each, the
 * decompressed bytes hold 8 s "bit rows" of n / 8 bytes: row 8 j + b
 * (byte j of the element, bit b, 0 = least significant), byte i, bit k
 * is bit b of byte j of element 8 i + k.
 */
#ifndef RTOMOD_BITSHUFFLE_H
#define RTOMOD_BITSHUFFLE_H

#include <stddef.h>
#include <stdint.h>

/* Undo the bit transpose of one block: n_elem elements (a multiple of 8)
 * of elem_size bytes, from `in` (bit rows) to `out` (elements), which
 * must not overlap.  Uses rtomod_unshuffle_current()'s kernel. */
void rtomod_bitunshuffle(const uint8_t *in, uint8_t *out, size_t n_elem,
                         size_t elem_size);

/* The kernels of the inverse transpose, all of the same results: 64-bit
 * words on any machine, SSE2 (x86-64), AVX2 (x86-64 CPUs that have it,
 * chosen at run time).  Element sizes 1, 2, 4 and 8 and blocks of 128
 * elements or more take the vector kernels' fast path; anything else
 * falls back to the portable kernel. */
typedef enum rtomod_unshuffle_kernel {
    RTOMOD_UNSHUFFLE_PORTABLE,
    RTOMOD_UNSHUFFLE_SSE2,
    RTOMOD_UNSHUFFLE_AVX2,
    RTOMOD_UNSHUFFLE_KERNELS
} rtomod_unshuffle_kernel;

/* Whether this build and this CPU have kernel k. */
int rtomod_unshuffle_has(rtomod_unshuffle_kernel k);
/* "portable", "sse2", "avx2". */
const char *rtomod_unshuffle_name(rtomod_unshuffle_kernel k);
/* The fastest kernel this CPU has. */
rtomod_unshuffle_kernel rtomod_unshuffle_best(void);
/* The kernel rtomod_bitunshuffle (and so the decoders) use: the best one
 * unless rtomod_unshuffle_use chose another. */
rtomod_unshuffle_kernel rtomod_unshuffle_current(void);
/* Make every later rtomod_bitunshuffle use kernel k (for tests and
 * benchmarks: the daemon keeps the best one); -1 when k is not available
 * here. */
int rtomod_unshuffle_use(rtomod_unshuffle_kernel k);
/* rtomod_bitunshuffle with kernel k (the portable one where k is not
 * available here). */
void rtomod_bitunshuffle_with(rtomod_unshuffle_kernel k, const uint8_t *in,
                              uint8_t *out, size_t n_elem,
                              size_t elem_size);

/* The forward transpose (for tests and benchmarks: the daemon only
 * decodes). */
void rtomod_bitshuffle(const uint8_t *in, uint8_t *out, size_t n_elem,
                       size_t elem_size);

/* Decode a whole bslz4 buffer of `in_size` bytes into `out`, which must
 * hold exactly `out_size` bytes: the header's decompressed size must
 * equal it, and out_size must be a multiple of elem_size (1, 2, 4 or 8).
 * Returns 0, or -1 with `why` saying what is wrong (truncated header or
 * block, sizes that disagree, a corrupt LZ4 block, bytes left over). */
int rtomod_bslz4_decode(const uint8_t *in, size_t in_size, size_t elem_size,
                        uint8_t *out, size_t out_size, char *why,
                        size_t why_size);

/* A "parallel for" the caller may lend to the decoder: run(pool, n, fn,
 * ctx) calls fn(ctx, i) once for every i in [0, n), on any threads, and
 * returns when all calls have returned (rtomod_decode_pool.h). */
typedef struct rtomod_parallel {
    void (*run)(void *pool, int n, void (*fn)(void *ctx, int i), void *ctx);
    void *pool;
} rtomod_parallel;

/* rtomod_bslz4_decode with its blocks decoded side by side on `par`
 * (NULL: in the calling thread).  The blocks are located first, in one
 * pass over their size fields, so the same buffers are refused for the
 * same reasons; where several blocks are corrupt, the first one's reason
 * is given. */
int rtomod_bslz4_decode_parallel(const uint8_t *in, size_t in_size,
                                 size_t elem_size, uint8_t *out,
                                 size_t out_size, const rtomod_parallel *par,
                                 char *why, size_t why_size);

/* The decompressed size a bslz4 header announces, or -1 when in_size is
 * below the 12-byte header. */
int64_t rtomod_bslz4_size(const uint8_t *in, size_t in_size);

#endif /* RTOMOD_BITSHUFFLE_H */
