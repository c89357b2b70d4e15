/*
 * sbdx_composite.h — the best-focus composite of a stack of SBDX planes: the
 * reference rule that every backend reproduces.
 *
 * Rule.  For output pixel (i, j) and plane k let W be the window
 * [i-r, i+r] x [j-r, j+r] clipped to the image (r = composite_radius), N its
 * pixel count, and S1, S2 the sum and the sum of squares of plane k over W.
 * The local variance is
 *     var_k(i, j) = S2 / N - (S1 / N)^2
 * depth(i, j) is the k with the largest var_k; ties go to the lowest plane
 * index (a NaN variance never wins).  composite(i, j) is plane depth(i, j)'s
 * value at (i, j).  In-focus structure is sharp, so it has the highest local
 * contrast on its own plane; where nothing varies (e.g. outside the field of
 * view, all planes 0) depth is 0.
 *
 * Precision.  The CPU computes S1 and S2 in double with running box sums
 * (O(1) per pixel and plane, whatever r is) that restart every 32 rows, so
 * its result does not depend on how the rows are split among threads.  Another implementation that
 * sums in another order or precision gets the same depth except where two
 * planes' variances are equal to within rounding; there it may choose the
 * other plane.  Bit-identical planes always tie exactly and give the lower
 * index.
 */
#ifndef RTOMO_SBDX_COMPOSITE_H
#define RTOMO_SBDX_COMPOSITE_H

#include <stdint.h>

#include "rtomo_engine.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Composite and depth of output rows [row_first, row_first + row_count) of
 * planes (n_planes x height x width floats, row-major).  Either output may
 * be NULL; each holds width x height values of which only the given rows are
 * written.  Bands of rows are independent, so threads may compute disjoint
 * bands at once.  Returns RTOMO_E_INVALID on bad sizes or a band outside the
 * image, RTOMO_E_NOMEM when the scratch rows cannot be allocated.
 */
rtomo_status rtomo_sbdx_composite_rows(const float *planes, int n_planes,
                                       int width, int height, int radius,
                                       int row_first, int row_count,
                                       float *composite, uint16_t *depth,
                                       rtomo_error *err);

/* The whole image, on the calling thread. */
rtomo_status rtomo_sbdx_composite(const float *planes, int n_planes,
                                  int width, int height, int radius,
                                  float *composite, uint16_t *depth,
                                  rtomo_error *err);

#ifdef __cplusplus
}
#endif

#endif /* RTOMO_SBDX_COMPOSITE_H */
