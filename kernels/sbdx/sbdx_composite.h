/*
 * sbdx_composite.h — the best-focus composite of a stack of SBDX planes: the
 * reference rule that every backend reproduces.
 *
 * Rule.  Focus is judged on flat-fielded values u_k of the pixels that
 * count:
 *   - raw planes (flat_fielded = 0; rtomo_engine.h flat_field = 0) with
 *     responses: plane k is divided by its uniform response
 *     R_k(i, j) = response_x[k][i] * response_y[k][j] (sbdx_lut.h: what a
 *     frame of ones reconstructs to),
 *         u_k(i, j) = plane_k(i, j) / max(R_k(i, j), RTOMO_SBDX_RESPONSE_FLOOR)
 *     with R_k = (double)response_x * (double)response_y (exact), in double,
 *     and every pixel counts.  Without responses (NULL) u_k is the plane
 *     itself, and every pixel counts.
 *   - flat-fielded planes (flat_fielded = 1, responses required): u_k is
 *     the plane itself (no second division), and only the pixels of plane
 *     k's field of view count (rtomo_sbdx_in_field_of_view of sbdx_lut.h:
 *     (double)Rx * Ry >= RTOMO_SBDX_FIELD_OF_VIEW_MIN).
 *     The others hold 0 because no ray measured them, not because the
 *     object is dark there: at ratios that alias with the hole shift (n
 *     near 2) they form combs of whole rows or columns, whose variance
 *     would otherwise pick that plane everywhere.
 * For output pixel (i, j) let W be the window [i-r, i+r] x [j-r, j+r]
 * clipped to the image (r = composite_radius), N the number of pixels of
 * W that count on plane k, and S1, S2 the sum and the sum of squares of u_k
 * over them.  The local variance is
 *     var_k(i, j) = S2 / N - (S1 / N)^2      (0 when r = 0)
 * Plane k is a candidate at (i, j) if (i, j) itself counts on it.  depth(i,
 * j) is the candidate with the largest var_k; ties go to the lowest plane
 * index (a NaN variance never wins).  With no candidate (a flat-fielded
 * pixel outside every plane's field of view) depth is
 * RTOMO_SBDX_DEPTH_NONE and the composite 0: "no plane measured it" is
 * not plane 0.  Otherwise composite(i, j) is plane depth(i, j)'s own
 * value at (i, j), as the stack holds it (so flat-fielded exactly when the
 * planes are).  In-focus structure is sharp, so it has the highest local
 * contrast on its own plane; where nothing varies all candidates tie and
 * the lowest wins.
 *
 * Why flat-field first: shift-and-add with bilinear deposits leaves a fixed
 * ripple on every plane (a uniform frame reconstructs to 1 +- 15% per pixel
 * for most planes of the reference configuration, and 0..4x at ratios that
 * alias with the hole shift, such as n = 2).  Its variance, different on
 * every plane, would otherwise outweigh the object's and pick planes by their
 * sampling pattern.  The floor keeps pixels at the edge of the field of
 * view, which few rays reach, from being amplified without bound.
 *
 * Precision.  The CPU computes u_k, S1, S2 and N in double with running
 * box sums (O(1) per pixel and plane, whatever r is) that restart every 32
 * rows, so its result does not depend on how the rows are split among
 * threads.  Another implementation that sums in another order or precision
 * gets the same depth except where two planes' variances are equal to
 * within rounding; there it may choose the other plane.  Bit-identical
 * planes always tie exactly and give the lower index.
 */
#ifndef RTOMO_SBDX_COMPOSITE_H
#define RTOMO_SBDX_COMPOSITE_H

#include <stdint.h>

#include "rtomo_engine.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The planes a composite is made of. */
typedef struct rtomo_sbdx_stack {
    const float *planes;            /* n_planes x height x width, row-major */
    int n_planes, width, height;
    const float *const *response_x; /* NULL, or n_planes arrays of width */
    const float *const *response_y; /* NULL, or n_planes arrays of height */
    int flat_fielded;               /* planes flat-fielded already (needs
                                       the responses: the field of view) */
} rtomo_sbdx_stack;

/*
 * Composite and depth of output rows [row_first, row_first + row_count).
 * Either output may be NULL; each holds width x height values of which only
 * the given rows are written.  Bands of rows are independent, so threads
 * may compute disjoint bands at once.  Returns RTOMO_E_INVALID on bad sizes
 * or a band outside the image, RTOMO_E_NOMEM when the scratch rows cannot
 * be allocated.
 */
rtomo_status rtomo_sbdx_composite_rows(const rtomo_sbdx_stack *stack,
                                       int radius, int row_first,
                                       int row_count, float *composite,
                                       uint16_t *depth, rtomo_error *err);

/* The whole image, on the calling thread. */
rtomo_status rtomo_sbdx_composite(const rtomo_sbdx_stack *stack, int radius,
                                  float *composite, uint16_t *depth,
                                  rtomo_error *err);

#ifdef __cplusplus
}
#endif

#endif /* RTOMO_SBDX_COMPOSITE_H */
