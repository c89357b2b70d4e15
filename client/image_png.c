/*
 * image_png.c — float32 images to 8-bit grayscale PNG (libpng) and to raw
 * float32 files; see image_png.h.
 *
 * The automatic window uses percentiles rather than the minimum and maximum
 * so that a few hot pixels or streaks do not squeeze the picture into a
 * handful of gray levels.
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <png.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "image_png.h"

/* Largest PNG edge we write (libpng's default user limit). */
#define MAX_PNG_EDGE 1000000

/* -------------------------------------------------------- percentiles ---- */

static void swap_floats(float *a, float *b)
{
    float t = *a;
    *a = *b;
    *b = t;
}

/* Rearrange v[0..n-1] so that v[k] is the k-th smallest (Wirth's form of
 * Hoare's select): O(n) on average, where sorting would be O(n log n).
 * Signed indices, because j may step to -1. */
static float select_kth(float *v, size_t n, size_t k)
{
    ptrdiff_t lo = 0, hi = (ptrdiff_t)n - 1, kk = (ptrdiff_t)k;
    while (lo < hi) {
        const float pivot = v[kk];
        ptrdiff_t i = lo, j = hi;
        do {
            while (v[i] < pivot)
                i++;
            while (pivot < v[j])
                j--;
            if (i <= j)
                swap_floats(&v[i++], &v[j--]);
        } while (i <= j);
        if (j < kk)
            lo = i;
        if (kk < i)
            hi = j;
    }
    return v[kk];
}

/* Percentile `pct` of the n values in v (rearranges v). */
static double percentile(float *v, size_t n, double pct)
{
    size_t k = (size_t)floor(pct / 100.0 * (double)(n - 1) + 0.5);
    return select_kth(v, n, k);
}

rtomo_status rtomo_image_auto_window(const float *image, size_t n, double *lo,
                                     double *hi, rtomo_error *err)
{
    if (!image || !lo || !hi)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "no image or window given");
    float *finite = malloc(sizeof(float) * (n ? n : 1));
    if (!finite)
        return rtomo_set_error(err, RTOMO_E_NOMEM,
                               "out of memory for an image window");
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (isfinite(image[i]))
            finite[m++] = image[i];
    if (m == 0) {
        free(finite);
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "the image has no finite value to scale by");
    }
    *lo = percentile(finite, m, RTOMO_IMAGE_AUTO_LOW_PERCENT);
    *hi = percentile(finite, m, RTOMO_IMAGE_AUTO_HIGH_PERCENT);
    free(finite);
    if (!(*hi > *lo)) {
        /* A flat image: show it mid-gray rather than divide by zero. */
        double pad = fabs(*lo) > 0.0 ? 0.5 * fabs(*lo) : 0.5;
        *lo -= pad;
        *hi += pad;
    }
    return RTOMO_OK;
}

/* ---------------------------------------------------------------- PNG ---- */

static png_byte gray_level(float v, double lo, double scale)
{
    if (!isfinite(v))
        return 0;
    double g = (v - lo) * scale;
    if (g <= 0.0)
        return 0;
    if (g >= 255.0)
        return 255;
    return (png_byte)(g + 0.5);
}

static void image_to_gray(const float *image, int width, int height,
                          double lo, double hi, png_byte *gray)
{
    const double scale = 255.0 / (hi - lo);
    const size_t n = (size_t)width * (size_t)height;
    for (size_t i = 0; i < n; i++)
        gray[i] = gray_level(image[i], lo, scale);
}

/* libpng reports errors by longjmp to the caller; the message is kept for
 * our own error report. */
typedef struct png_failure {
    jmp_buf jump;
    char message[160];
} png_failure;

static void on_png_error(png_structp png, png_const_charp message)
{
    png_failure *failure = png_get_error_ptr(png);
    snprintf(failure->message, sizeof failure->message, "%s", message);
    longjmp(failure->jump, 1);
}

static void on_png_warning(png_structp png, png_const_charp message)
{
    (void)png;
    (void)message;
}

/* Encode gray (height x width bytes) into an open file. */
static rtomo_status encode_png(FILE *file, const char *path,
                               const png_byte *gray, int width, int height,
                               rtomo_error *err)
{
    png_failure failure = {.message = ""};
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &failure,
                                              on_png_error, on_png_warning);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!png || !info) {
        png_destroy_write_struct(&png, NULL);
        return rtomo_set_error(err, RTOMO_E_NOMEM,
                               "out of memory encoding %s", path);
    }
    if (setjmp(failure.jump)) {
        png_destroy_write_struct(&png, &info);
        return rtomo_set_error(err, RTOMO_E_BACKEND,
                               "could not write PNG %s: %s", path,
                               failure.message);
    }
    png_init_io(png, file);
    png_set_IHDR(png, info, (png_uint_32)width, (png_uint_32)height, 8,
                 PNG_COLOR_TYPE_GRAY, PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_write_info(png, info);
    for (int y = 0; y < height; y++)
        png_write_row(png, gray + (size_t)y * (size_t)width);
    png_write_end(png, NULL);
    png_destroy_write_struct(&png, &info);
    return RTOMO_OK;
}

/* Close a file we wrote, turning a late write error into a status. */
static rtomo_status close_written(FILE *file, const char *path,
                                  rtomo_status st, rtomo_error *err)
{
    int failed = ferror(file);
    int saved = errno;
    if (fclose(file) != 0 && !failed) {
        failed = 1;
        saved = errno;
    }
    if (st == RTOMO_OK && failed)
        return rtomo_set_error(err, RTOMO_E_BACKEND, "could not write %s: %s",
                               path, strerror(saved));
    return st;
}

rtomo_status rtomo_image_write_png(const char *path, const float *image,
                                   int width, int height, double lo, double hi,
                                   rtomo_error *err)
{
    if (!path || !image)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "no file name or image given");
    if (width < 1 || height < 1 || width > MAX_PNG_EDGE || height > MAX_PNG_EDGE)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "image size %dx%d is outside [1, %d] per edge",
                               width, height, MAX_PNG_EDGE);
    if (!isfinite(lo) || !isfinite(hi) || lo > hi)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "display window [%g, %g] is not a finite "
                               "interval", lo, hi);
    const size_t n = (size_t)width * (size_t)height;
    rtomo_status st;
    if (lo == hi && (st = rtomo_image_auto_window(image, n, &lo, &hi, err)))
        return st;
    png_byte *gray = malloc(n);
    if (!gray)
        return rtomo_set_error(err, RTOMO_E_NOMEM,
                               "out of memory for a %dx%d image", width,
                               height);
    image_to_gray(image, width, height, lo, hi, gray);
    FILE *file = fopen(path, "wb");
    if (!file) {
        st = rtomo_set_error(err, RTOMO_E_BACKEND, "could not create %s: %s",
                             path, strerror(errno));
    } else {
        st = encode_png(file, path, gray, width, height, err);
        st = close_written(file, path, st, err);
    }
    free(gray);
    return st;
}

/* -------------------------------------------------------------- raw ---- */

rtomo_status rtomo_image_write_raw(const char *path, const float *image,
                                   size_t n, rtomo_error *err)
{
    if (!path || !image)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "no file name or image given");
    FILE *file = fopen(path, "wb");
    if (!file)
        return rtomo_set_error(err, RTOMO_E_BACKEND, "could not create %s: %s",
                               path, strerror(errno));
    rtomo_status st = RTOMO_OK;
    if (fwrite(image, sizeof(float), n, file) != n)
        st = rtomo_set_error(err, RTOMO_E_BACKEND, "could not write %s: %s",
                             path, strerror(errno));
    return close_written(file, path, st, err);
}
