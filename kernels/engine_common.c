/*
 * engine_common.c — pieces of the engine API shared by both engines and all
 * backends: error reporting, enum names and parsers, option defaults, sample
 * conversion, clocks and thread counts.
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "engine_internal.h"

/* ----------------------------------------------------------- errors ---- */

const char *rtomo_status_name(rtomo_status status)
{
    switch (status) {
    case RTOMO_OK: return "ok";
    case RTOMO_E_INVALID: return "invalid";
    case RTOMO_E_NOMEM: return "out-of-memory";
    case RTOMO_E_STATE: return "bad-state";
    case RTOMO_E_RANGE: return "out-of-range";
    case RTOMO_E_BACKEND: return "backend-failure";
    case RTOMO_E_UNAVAILABLE: return "unavailable";
    }
    return "unknown";
}

rtomo_status rtomo_set_error(rtomo_error *err, rtomo_status code,
                             const char *format, ...)
{
    if (err) {
        va_list ap;
        err->code = code;
        va_start(ap, format);
        vsnprintf(err->message, sizeof err->message, format, ap);
        va_end(ap);
    }
    return code;
}

void rtomo_clear_error(rtomo_error *err)
{
    if (err) {
        err->code = RTOMO_OK;
        err->message[0] = '\0';
    }
}

/* ------------------------------------------------ names and parsers ---- */

/* Look `name` up case-insensitively in a NULL-terminated table; the index is
 * the enum value. */
static rtomo_status parse_name(const char *name, const char *const *table,
                               int *out)
{
    if (!name)
        return RTOMO_E_INVALID;
    for (int i = 0; table[i]; i++) {
        if (strcasecmp(name, table[i]) == 0) {
            *out = i;
            return RTOMO_OK;
        }
    }
    return RTOMO_E_INVALID;
}

static const char *const backend_names[] = {"auto", "cpu", "cuda", NULL};
static const char *const dtype_names[] = {"uint8", "uint16", "float32", NULL};
static const char *const bp_kernel_names[] = {
    "auto", "standard", "texture", "alu", "hybrid", NULL};
static const char *const window_names[] = {
    "ram-lak", "shepp-logan", "cosine", "hamming", "hann", NULL};
static const char *const interp_names[] = {"linear", "nearest", NULL};
static const char *const rings_names[] = {"off", "column_mean", NULL};
static const char *const fov_names[] = {"full", "circle", NULL};

#define NAME_OF(table, value)                                              \
    ((unsigned)(value) < sizeof(table) / sizeof(table[0]) - 1              \
         ? table[(unsigned)(value)] : "unknown")

const char *rtomo_backend_name(rtomo_backend b) { return NAME_OF(backend_names, b); }
const char *rtomo_dtype_name(rtomo_dtype d) { return NAME_OF(dtype_names, d); }
const char *rtomo_bp_kernel_name(rtomo_bp_kernel k) { return NAME_OF(bp_kernel_names, k); }
const char *rtomo_window_name(rtomo_window w) { return NAME_OF(window_names, w); }
const char *rtomo_interp_name(rtomo_interp i) { return NAME_OF(interp_names, i); }
const char *rtomo_rings_name(rtomo_rings r) { return NAME_OF(rings_names, r); }
const char *rtomo_fov_name(rtomo_fov f) { return NAME_OF(fov_names, f); }

rtomo_status rtomo_backend_parse(const char *name, rtomo_backend *out)
{
    int v;
    rtomo_status s = parse_name(name, backend_names, &v);
    if (s == RTOMO_OK)
        *out = (rtomo_backend)v;
    return s;
}

rtomo_status rtomo_dtype_parse(const char *name, rtomo_dtype *out)
{
    int v;
    rtomo_status s = parse_name(name, dtype_names, &v);
    if (s == RTOMO_OK)
        *out = (rtomo_dtype)v;
    return s;
}

rtomo_status rtomo_bp_kernel_parse(const char *name, rtomo_bp_kernel *out)
{
    int v;
    rtomo_status s = parse_name(name, bp_kernel_names, &v);
    if (s == RTOMO_OK)
        *out = (rtomo_bp_kernel)v;
    return s;
}

rtomo_status rtomo_window_parse(const char *name, rtomo_window *out)
{
    int v;
    /* "ramlak" and "none" are common spellings of the plain ramp. */
    if (name && (strcasecmp(name, "ramlak") == 0 || strcasecmp(name, "none") == 0 ||
                 strcasecmp(name, "ramp") == 0)) {
        *out = RTOMO_WINDOW_RAMLAK;
        return RTOMO_OK;
    }
    rtomo_status s = parse_name(name, window_names, &v);
    if (s == RTOMO_OK)
        *out = (rtomo_window)v;
    return s;
}

rtomo_status rtomo_interp_parse(const char *name, rtomo_interp *out)
{
    int v;
    rtomo_status s = parse_name(name, interp_names, &v);
    if (s == RTOMO_OK)
        *out = (rtomo_interp)v;
    return s;
}

rtomo_status rtomo_fov_parse(const char *name, rtomo_fov *out)
{
    int v;
    rtomo_status s = parse_name(name, fov_names, &v);
    if (s == RTOMO_OK)
        *out = (rtomo_fov)v;
    return s;
}

size_t rtomo_dtype_size(rtomo_dtype dtype)
{
    switch (dtype) {
    case RTOMO_DTYPE_U8: return 1;
    case RTOMO_DTYPE_U16: return 2;
    case RTOMO_DTYPE_F32: return 4;
    }
    return 0;
}

void rtomo_engine_options_init(rtomo_engine_options *opt)
{
    memset(opt, 0, sizeof *opt);
    opt->backend = RTOMO_BACKEND_AUTO;
    opt->bp_kernel = RTOMO_BP_AUTO;
    opt->precision = RTOMO_PRECISION_FLOAT;
    opt->sbdx_method = RTOMO_SBDX_PIXEL_CENTRIC;
}

/* ------------------------------------------------------ conversions ---- */

void rtomo_convert_to_float(const void *src, rtomo_dtype dtype, size_t n,
                            float *dst)
{
    switch (dtype) {
    case RTOMO_DTYPE_U8: {
        const uint8_t *s = src;
        for (size_t i = 0; i < n; i++)
            dst[i] = (float)s[i];
        break;
    }
    case RTOMO_DTYPE_U16: {
        const uint16_t *s = src;
        for (size_t i = 0; i < n; i++)
            dst[i] = (float)s[i];
        break;
    }
    case RTOMO_DTYPE_F32:
        memcpy(dst, src, n * sizeof(float));
        break;
    }
}

/* ---------------------------------------------------- clock, threads ---- */

double rtomo_now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int rtomo_cpu_thread_count(const rtomo_engine_options *opt)
{
    if (opt && opt->cpu_threads > 0)
        return opt->cpu_threads;
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1)
        n = 1;
    if (n > 256)
        n = 256;
    return (int)n;
}

void rtomo_deal_even(int n, int parts, int part, int *first, int *count)
{
    const int base = n / parts, extra = n % parts;
    *first = part * base + (part < extra ? part : extra);
    *count = base + (part < extra);
}

int rtomo_split_hook(const char *name)
{
    const char *env = getenv(name);
    if (!env || !*env)
        return 1;
    char *end;
    long k = strtol(env, &end, 10);
    return *end == '\0' && k >= 1 && k <= RTOMO_SPLIT_HOOK_MAX ? (int)k : 1;
}

int rtomo_fbp_padded_length(int det_width)
{
    int n = 1;
    while (n < 2 * det_width)
        n <<= 1;
    return n;
}

/* Ordinary host memory for rtomo_host_alloc: 64-byte aligned, the size
 * rounded up as aligned_alloc wants. */
void *rtomo_host_alloc_plain(size_t bytes)
{
    return aligned_alloc(64, (bytes + 63) / 64 * 64);
}

/* --------------------------------------------- CUDA availability stubs ---- */

#ifndef RTOMO_HAVE_CUDA
void *rtomo_host_alloc(size_t bytes, int *locked)
{
    *locked = 0;
    return rtomo_host_alloc_plain(bytes);
}

void rtomo_host_free(void *p, int locked)
{
    (void)locked;
    free(p);
}

int rtomo_cuda_built(void) { return 0; }
int rtomo_cuda_device_count(void) { return 0; }
rtomo_status rtomo_cuda_device_info(int index, rtomo_device_info *out,
                                    rtomo_error *err)
{
    (void)index;
    (void)out;
    return rtomo_set_error(err, RTOMO_E_UNAVAILABLE,
                           "this build of rtomo has no CUDA backend "
                           "(configured --without-cuda or nvcc not found)");
}
#endif

rtomo_status rtomo_rings_parse(const char *name, rtomo_rings *out)
{
    int v;
    rtomo_status s = parse_name(name, rings_names, &v);
    if (s == RTOMO_OK)
        *out = (rtomo_rings)v;
    return s;
}

rtomo_status rtomo_resolve_backend(rtomo_backend want, rtomo_backend *out,
                                   rtomo_error *err)
{
    if (want == RTOMO_BACKEND_AUTO)
        want = rtomo_cuda_device_count() > 0 ? RTOMO_BACKEND_CUDA
                                             : RTOMO_BACKEND_CPU;
    if (want == RTOMO_BACKEND_CUDA && !rtomo_cuda_built())
        return rtomo_set_error(err, RTOMO_E_UNAVAILABLE,
                               "CUDA backend requested but this build has no "
                               "CUDA support");
    if (want == RTOMO_BACKEND_CUDA && rtomo_cuda_device_count() < 1)
        return rtomo_set_error(err, RTOMO_E_UNAVAILABLE,
                               "CUDA backend requested but no GPU is visible");
    if (want != RTOMO_BACKEND_CPU && want != RTOMO_BACKEND_CUDA)
        return rtomo_set_error(err, RTOMO_E_INVALID, "unknown backend %d",
                               (int)want);
    *out = want;
    return RTOMO_OK;
}
