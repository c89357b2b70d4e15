/*
 * image_png.h — saving reconstructed images for people and for programs:
 * float32 images as 8-bit grayscale PNG with a display window, and as raw
 * float32 (numpy.fromfile-friendly).  Used by the command-line tools.
 */
#ifndef RTOMO_IMAGE_PNG_H
#define RTOMO_IMAGE_PNG_H

#include <stddef.h>

#include "rtomo_engine.h"

/* Lower and upper percentiles of the automatic display window. */
#define RTOMO_IMAGE_AUTO_LOW_PERCENT 0.5
#define RTOMO_IMAGE_AUTO_HIGH_PERCENT 99.5

/* The automatic display window of n samples: the 0.5 and 99.5 percentiles of
 * the finite values, widened to a non-empty interval when they coincide.
 * Fails with RTOMO_E_INVALID when there is no finite sample. */
rtomo_status rtomo_image_auto_window(const float *image, size_t n, double *lo,
                                     double *hi, rtomo_error *err);

/* Write image (height x width, row-major) to `path` as an 8-bit grayscale
 * PNG: lo maps to black, hi to white, values beyond are clipped and
 * non-finite values are black.  lo == hi selects the automatic window.
 * Fails with RTOMO_E_INVALID on bad arguments, RTOMO_E_NOMEM, or
 * RTOMO_E_BACKEND when the file cannot be written (the message names the
 * file and the reason). */
rtomo_status rtomo_image_write_png(const char *path, const float *image,
                                   int width, int height, double lo, double hi,
                                   rtomo_error *err);

/* Write n float32 samples to `path` in host byte order, nothing else. */
rtomo_status rtomo_image_write_raw(const char *path, const float *image,
                                   size_t n, rtomo_error *err);

#endif
