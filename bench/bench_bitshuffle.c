/*
 * bench_bitshuffle.c — how fast rtomod decodes DECTRIS bitshuffle-LZ4
 * ("bslz4") images per core, without a daemon: the inverse bit transpose
 * with each kernel this machine has (portable, SSE2, AVX2) on a 2048x2048
 * image of uint8, uint16 and uint32 elements, and the whole bslz4 decode
 * (LZ4 and the transpose) of a 2048x2048 uint16 phantom with counting
 * noise, compressed here with rtomod's own shuffle and liblz4 in
 * bitshuffle's 8 KiB blocks: with each kernel, LZ4 alone, and on the
 * daemon's decoding helpers.
 *
 * The transpose is timed as the decoder runs it: each block comes from a
 * scratch that stays in cache (where LZ4 leaves it) and goes to its place
 * in the image.  Figures are GB/s of decoded image per thread, the median
 * of --runs runs (the best run beside it, less disturbed by a busy host).
 * Built by make, never run by make check.
 *
 *   bench_bitshuffle [--width 2048] [--height 2048] [--runs 21]
 *                    [--threads N (helpers; default: the daemon's)]
 */
#include "config.h"

#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <lz4.h>

#include "rtomod_bitshuffle.h"
#include "rtomod_decode_pool.h"

#define PROGRAM "bench_bitshuffle"
#define BLOCK_BYTES 8192        /* bitshuffle's default block */
#define SCRATCH_BLOCKS 4        /* distinct shuffled blocks kept in cache */
#define MAX_RUNS 1001

typedef struct options {
    long width, height, runs, threads;
} options;

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* GB/s of `bytes` from the run times t[0..n-1]: the median's and the
 * best's. */
typedef struct rate {
    double median, best;
} rate;

static rate rate_of(double *t, int n, size_t bytes)
{
    qsort(t, (size_t)n, sizeof *t, by_value);
    return (rate){(double)bytes / t[n / 2] / 1e9, (double)bytes / t[0] / 1e9};
}

/* ----------------------------------------------------- the images ---- */

static uint64_t next_random(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* A flat beam of 20000 counts through a disc a third of the width wide
 * (attenuated along its chord), with 64 counts of uniform noise: what a
 * detector's projection compresses like (about 2x), unlike a noise-free
 * image. */
static uint16_t *phantom(size_t width, size_t height)
{
    uint16_t *f = malloc(sizeof *f * width * height);
    uint64_t s = 0x2545F4914F6CDD1DULL;
    double r = (double)width / 3.0;
    for (size_t y = 0; f && y < height; y++)
        for (size_t x = 0; x < width; x++) {
            double dx = (double)x - (double)width / 2.0;
            double chord = dx * dx < r * r ? 2.0 * sqrt(r * r - dx * dx) : 0;
            double mean = 20000.0 * exp(-0.002 * chord);
            f[y * width + x] = (uint16_t)(mean + (double)(next_random(&s) %
                                                          64) - 32.0);
        }
    return f;
}

static void put_be(uint8_t *p, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        p[i] = (uint8_t)(v >> (8 * (bytes - 1 - i)));
}

/* The bslz4 framing of n elements of `size` bytes (rtomod_bitshuffle.h),
 * malloc'd, its length in *len; NULL when out of memory. */
static uint8_t *compress_bslz4(const uint8_t *data, size_t n, size_t size,
                               size_t *len)
{
    size_t block = BLOCK_BYTES / size;
    size_t cap = 12 + (n / block + 2) * 4 +
                 (size_t)LZ4_compressBound((int)(n * size)) + 64;
    uint8_t *out = malloc(cap), *tmp = malloc(BLOCK_BYTES);
    if (!out || !tmp) {
        free(out);
        free(tmp);
        return NULL;
    }
    put_be(out, n * size, 8);
    put_be(out + 8, BLOCK_BYTES, 4);
    size_t pos = 12, done = 0;
    for (;;) {
        size_t m = n - done >= block ? block : (n - done) / 8 * 8;
        if (m == 0)
            break;
        rtomod_bitshuffle(data + done * size, tmp, m, size);
        int c = LZ4_compress_default((const char *)tmp,
                                     (char *)out + pos + 4, (int)(m * size),
                                     (int)(cap - pos - 4));
        put_be(out + pos, (uint64_t)c, 4);
        pos += 4 + (size_t)c;
        done += m;
    }
    memcpy(out + pos, data + done * size, (n - done) * size);
    *len = pos + (n - done) * size;
    free(tmp);
    return out;
}

/* ------------------------------------------------- the transpose ---- */

/* One run: every block of the image from the scratch blocks (cycled, so
 * they stay in cache) to its place in out; seconds. */
static double unshuffle_run(rtomod_unshuffle_kernel k, const uint8_t *scratch,
                            uint8_t *out, size_t n, size_t size)
{
    size_t block = BLOCK_BYTES / size;
    double t0 = now();
    for (size_t e = 0, b = 0; e + block <= n; e += block, b++)
        rtomod_bitunshuffle_with(k, scratch + (b % SCRATCH_BLOCKS) *
                                                  BLOCK_BYTES,
                                 out + e * size, block, size);
    return now() - t0;
}

/* The transpose of one element size with each kernel into r[k] (0 where
 * the kernel is missing); -1 when a kernel decodes wrong. */
static int bench_unshuffle(const options *o, size_t size,
                           rate r[RTOMOD_UNSHUFFLE_KERNELS])
{
    size_t n = (size_t)(o->width * o->height), block = BLOCK_BYTES / size;
    uint8_t *img = malloc(SCRATCH_BLOCKS * BLOCK_BYTES),
            *scratch = malloc(SCRATCH_BLOCKS * BLOCK_BYTES),
            *out = malloc(n * size);
    double t[MAX_RUNS];
    int rc = img && scratch && out ? 0 : -1;
    uint64_t s = 88172645463325252ULL;
    for (size_t i = 0; rc == 0 && i < SCRATCH_BLOCKS * BLOCK_BYTES; i++)
        img[i] = (uint8_t)(next_random(&s) >> 32);
    for (size_t b = 0; rc == 0 && b < SCRATCH_BLOCKS; b++)
        rtomod_bitshuffle(img + b * BLOCK_BYTES, scratch + b * BLOCK_BYTES,
                          block, size);
    for (int k = 0; rc == 0 && k < RTOMOD_UNSHUFFLE_KERNELS; k++) {
        r[k] = (rate){0, 0};
        if (!rtomod_unshuffle_has((rtomod_unshuffle_kernel)k))
            continue;
        unshuffle_run((rtomod_unshuffle_kernel)k, scratch, out, n, size);
        for (size_t b = 0; b * block + block <= n && b < SCRATCH_BLOCKS; b++)
            if (memcmp(out + b * BLOCK_BYTES, img + b * BLOCK_BYTES,
                       BLOCK_BYTES) != 0)
                rc = -1;
        for (long i = 0; i < o->runs; i++)
            t[i] = unshuffle_run((rtomod_unshuffle_kernel)k, scratch, out, n,
                                 size);
        r[k] = rate_of(t, (int)o->runs, n / block * BLOCK_BYTES);
    }
    free(img);
    free(scratch);
    free(out);
    return rc;
}

/* ---------------------------------------------------- whole decode ---- */

/* LZ4 alone over every block of the uint16 framing (the last block
 * rounded down to 8 elements, 16 bytes) into a scratch block: what the
 * decode costs without the transpose; seconds, < 0 on error. */
static double lz4_run(const uint8_t *packed, size_t len, size_t bytes)
{
    static char tmp[BLOCK_BYTES];
    size_t pos = 12, done = 0;
    double t0 = now();
    while (bytes - done >= 8 * 2 && pos + 4 <= len) {
        size_t want = bytes - done >= BLOCK_BYTES ? BLOCK_BYTES
                                                  : (bytes - done) / 16 * 16;
        size_t c = (size_t)packed[pos] << 24 | (size_t)packed[pos + 1] << 16 |
                   (size_t)packed[pos + 2] << 8 | packed[pos + 3];
        if (LZ4_decompress_safe((const char *)packed + pos + 4, tmp, (int)c,
                                (int)want) != (int)want)
            return -1;
        pos += 4 + c;
        done += want;
    }
    return now() - t0;
}

/* The whole decode with `par` (NULL: this thread alone); seconds, < 0
 * when it fails or decodes wrong. */
static double decode_run(const uint8_t *packed, size_t len,
                         const uint16_t *img, uint16_t *out, size_t n,
                         const rtomod_parallel *par)
{
    char why[256];
    double t0 = now();
    if (rtomod_bslz4_decode_parallel(packed, len, 2, (uint8_t *)out, 2 * n,
                                     par, why, sizeof why) != 0) {
        fprintf(stderr, PROGRAM ": %s\n", why);
        return -1;
    }
    double t = now() - t0;
    return memcmp(out, img, 2 * n) == 0 ? t : -1;
}

typedef struct decode_rates {
    double ratio;               /* image bytes / compressed bytes */
    rate lz4;
    rate kernel[RTOMOD_UNSHUFFLE_KERNELS];
    rate pool;                  /* all threads together */
} decode_rates;

/* The whole decode --runs times on `par` (NULL: this thread) into *r; -1
 * when a decode fails or decodes wrong. */
static int time_decodes(const options *o, const uint8_t *packed, size_t len,
                        const uint16_t *img, uint16_t *out,
                        const rtomod_parallel *par, rate *r)
{
    size_t n = (size_t)(o->width * o->height);
    double t[MAX_RUNS];
    for (long i = 0; i < o->runs; i++)
        if ((t[i] = decode_run(packed, len, img, out, n, par)) < 0)
            return -1;
    *r = rate_of(t, (int)o->runs, 2 * n);
    return 0;
}

static int bench_decode(const options *o, decode_rates *d)
{
    size_t n = (size_t)(o->width * o->height), len = 0;
    uint16_t *img = phantom((size_t)o->width, (size_t)o->height);
    uint16_t *out = malloc(2 * n);
    uint8_t *packed = img ? compress_bslz4((const uint8_t *)img, n, 2, &len)
                          : NULL;
    rtomod_decode_pool *pool = o->threads > 0
                                   ? rtomod_decode_pool_new((int)o->threads)
                                   : NULL;
    int rc = packed && out && (pool || o->threads == 0) ? 0 : -1;
    double t[MAX_RUNS];
    d->ratio = rc == 0 ? (double)(2 * n) / (double)len : 0;
    for (long i = 0; rc == 0 && i < o->runs; i++)
        if ((t[i] = lz4_run(packed, len, 2 * n)) < 0)
            rc = -1;
    if (rc == 0)
        d->lz4 = rate_of(t, (int)o->runs, 2 * n);
    rtomod_unshuffle_kernel best = rtomod_unshuffle_current();
    for (int k = 0; rc == 0 && k < RTOMOD_UNSHUFFLE_KERNELS; k++) {
        d->kernel[k] = (rate){0, 0};
        if (rtomod_unshuffle_use((rtomod_unshuffle_kernel)k) == 0)
            rc = time_decodes(o, packed, len, img, out, NULL, &d->kernel[k]);
    }
    rtomod_unshuffle_use(best);
    rtomod_parallel par = {rtomod_decode_pool_run, pool};
    if (rc == 0)
        rc = time_decodes(o, packed, len, img, out, &par, &d->pool);
    rtomod_decode_pool_free(pool);
    free(img);
    free(out);
    free(packed);
    return rc;
}

/* -------------------------------------------------------- report ---- */

static void cpu_name(char *name, size_t size)
{
    snprintf(name, size, "unknown CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[256];
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "model name", 10) == 0 && strchr(line, ':')) {
            snprintf(name, size, "%s", strchr(line, ':') + 2);
            name[strcspn(name, "\n")] = '\0';
            break;
        }
    if (f)
        fclose(f);
}

static void print_rate(rate r)
{
    if (r.median > 0)
        printf(" %7.2f (%5.2f)", r.median, r.best);
    else
        printf(" %15s", "absent");
}

static void print_header(const options *o)
{
    char cpu[200];
    cpu_name(cpu, sizeof cpu);
    printf("bslz4 decoding on %s: %ldx%ld images, blocks of %d bytes, GB/s "
           "of image per thread, median (best) of %ld runs; the decoders "
           "use the %s kernel here\n", cpu, o->width, o->height,
           BLOCK_BYTES, o->runs,
           rtomod_unshuffle_name(rtomod_unshuffle_current()));
}

static void print_unshuffle(size_t size, const rate r[])
{
    printf("%-30s", size == 1 ? "transpose, uint8" : size == 2
                                    ? "transpose, uint16"
                                    : "transpose, uint32");
    for (int k = 0; k < RTOMOD_UNSHUFFLE_KERNELS; k++)
        print_rate(r[k]);
    printf("\n");
}

static void print_decode(const options *o, const decode_rates *d)
{
    printf("%-30s", "decode uint16 phantom");
    for (int k = 0; k < RTOMOD_UNSHUFFLE_KERNELS; k++)
        print_rate(d->kernel[k]);
    printf("\n%-30s", "LZ4 alone (no transpose)");
    print_rate(d->lz4);
    printf("\nthe phantom compresses %.2fx; decoded on %ld helper(s) and "
           "the caller: %.2f GB/s together, %.2f per thread\n", d->ratio,
           o->threads, d->pool.median,
           d->pool.median / (double)(o->threads + 1));
}

/* -------------------------------------------------------- options ---- */

static int parse_long(const char *name, const char *arg, long lo, long hi,
                      long *v)
{
    char *end;
    long x = strtol(arg, &end, 10);
    if (*arg == '\0' || *end != '\0' || x < lo || x > hi) {
        fprintf(stderr, PROGRAM ": %s takes an integer in [%ld, %ld], not "
                "'%s'\n", name, lo, hi, arg);
        return -1;
    }
    *v = x;
    return 0;
}

static int parse_options(int argc, char **argv, options *o)
{
    static const struct option opts[] = {
        {"width", required_argument, NULL, 'w'},
        {"height", required_argument, NULL, 'h'},
        {"runs", required_argument, NULL, 'r'},
        {"threads", required_argument, NULL, 't'},
        {NULL, 0, NULL, 0}};
    *o = (options){2048, 2048, 21, rtomod_decode_pool_default_threads()};
    int c, rc = 0;
    while (rc == 0 && (c = getopt_long(argc, argv, "", opts, NULL)) != -1)
        rc = c == 'w'   ? parse_long("--width", optarg, 64, 16384, &o->width)
             : c == 'h' ? parse_long("--height", optarg, 64, 16384,
                                     &o->height)
             : c == 'r' ? parse_long("--runs", optarg, 1, MAX_RUNS, &o->runs)
             : c == 't' ? parse_long("--threads", optarg, 0, 64, &o->threads)
                        : -1;
    if (rc != 0 || optind != argc)
        fprintf(stderr, "usage: " PROGRAM " [--width N] [--height N] "
                "[--runs N] [--threads N]\n");
    return rc != 0 || optind != argc ? -1 : 0;
}

int main(int argc, char **argv)
{
    options o;
    if (parse_options(argc, argv, &o) != 0)
        return 2;
    print_header(&o);
    printf("%-30s %15s %15s %15s\n", "", "portable", "sse2", "avx2");
    for (size_t size = 1; size <= 4; size *= 2) {
        rate r[RTOMOD_UNSHUFFLE_KERNELS];
        if (bench_unshuffle(&o, size, r) != 0) {
            fprintf(stderr, PROGRAM ": the transpose of %zu-byte elements "
                    "failed or decoded wrong\n", size);
            return 1;
        }
        print_unshuffle(size, r);
    }
    decode_rates d;
    if (bench_decode(&o, &d) != 0) {
        fprintf(stderr, PROGRAM ": the bslz4 decode failed or decoded "
                "wrong\n");
        return 1;
    }
    print_decode(&o, &d);
    return 0;
}
