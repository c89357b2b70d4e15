/*
 * test_sbdx_support.h — helpers shared by the SBDX tests: standard small and
 * mid-size geometries, seeded random frames of every sample type, CPU plans
 * and one-call reconstructions, error measures, and the flat-fielding
 * contract (field of view, reference, uniform frames).  What all tests
 * share comes from test_util.h, which this header includes.
 */
#ifndef RTOMO_TEST_SBDX_SUPPORT_H
#define RTOMO_TEST_SBDX_SUPPORT_H

#include <stddef.h>
#include <stdint.h>

#include "rtomo_engine.h"
#include "sbdx_lut.h"
#include "test_util.h"

/* A check for tight loops: Check's ck_assert reports every passing
 * assertion to the parent process (one write each), which makes
 * per-element assertions over large arrays slow.  This one only reports a
 * failure. */
#define SBDX_REQUIRE(cond, ...)                                             \
    do {                                                                    \
        if (!(cond))                                                        \
            ck_abort_msg(__VA_ARGS__);                                      \
    } while (0)

/* 12x10 holes, 16x8 detector, m = 4, six planes spanning n < 1, n = 1 and
 * n > 1 (ratios below); output the default 48x40. */
extern const double sbdx_small_ratios[6];
void sbdx_small_geometry(rtomo_sbdx_geometry *g);

/* 40x30 holes, 48x32 detector, m = 6, eight planes from 0.55 to 3.1. */
extern const double sbdx_mid_ratios[8];
void sbdx_mid_geometry(rtomo_sbdx_geometry *g);

/* One plane, n = 1.4, m = 3, 6x6 holes of 12x12 elements, 38x38 output
 * from (-10, -10): a pixel there has the response 0.4 x 0.625 = 0.25 in
 * exact arithmetic but 0.249999985 as the product of float responses, on
 * the field-of-view threshold. */
extern const double sbdx_threshold_ratio[1];
void sbdx_threshold_geometry(rtomo_sbdx_geometry *g);

/* Samples per frame and pixels of all planes of g (output size filled in
 * as the engine does). */
size_t sbdx_frame_samples(const rtomo_sbdx_geometry *g);
size_t sbdx_planes_pixels(const rtomo_sbdx_geometry *g);

/* A frame of random samples of the given type (uint8 over [0, 255],
 * uint16 over [0, 65535], float32 over [-100, 1000)), from *seed.  The
 * caller frees it. */
void *sbdx_random_frame(const rtomo_sbdx_geometry *g, rtomo_dtype dtype,
                        uint64_t *seed);

/* A CPU plan with the given method and thread count (0 = one per core);
 * fails the running test on an engine error. */
rtomo_sbdx *sbdx_create_cpu(const rtomo_sbdx_geometry *g,
                            rtomo_sbdx_method method, int threads);

/* Reconstruct one frame into *out with a new CPU plan (destroyed after);
 * fails the running test on any engine error. */
void sbdx_reconstruct_into(const rtomo_sbdx_geometry *g,
                           rtomo_sbdx_method method, int threads,
                           const void *frame, rtomo_dtype dtype,
                           const rtomo_sbdx_output *out);

/* The same into new planes, which it returns (caller frees). */
float *sbdx_reconstruct(const rtomo_sbdx_geometry *g, rtomo_sbdx_method method,
                        int threads, const void *frame, rtomo_dtype dtype);

/* max |a - b| over one plane divided by max |b| over that plane (0 when
 * both are all zero); the largest over all planes. */
double sbdx_max_relative_error(const float *a, const float *b,
                               const rtomo_sbdx_geometry *g);

/* Whether the documented uniform response of plane k at pixel (i, j)
 * reaches RTOMO_SBDX_FIELD_OF_VIEW_MIN, i.e. whether flat_field = 1 keeps
 * the pixel (rtomo_engine.h): the product of the LUT's axis responses,
 * exact in double, as the contract states it.  lut from
 * rtomo_sbdx_lut_create(g). */
int sbdx_in_field_of_view(const rtomo_sbdx_lut *lut, int k, int i, int j);

/* Flat-fielding applied to reference planes computed independently in
 * double: raw[p] / ones[p], where ones are the raw planes of a frame of
 * ones, at pixels in the field of view (above), and 0 elsewhere.  In
 * place; both arrays n_planes x out_height x out_width of g. */
void sbdx_flat_field_reference(const rtomo_sbdx_geometry *g, double *raw,
                               const double *ones);

/* Planes reconstructed with flat_field = 1 from a uniform frame of value
 * v: every pixel in the field of view must be v within rel_tol (relative),
 * every other pixel exactly 0.  Fails the running test otherwise; returns
 * the number of pixels in the field of view, so that a caller can insist
 * that there are some. */
size_t sbdx_require_flat_uniform(const rtomo_sbdx_geometry *g,
                                 const float *planes, double v,
                                 double rel_tol);

/* The local variance that the composite rule (sbdx_composite.h) gives one
 * plane at pixel (i, j), by brute force in double: plane is width x height
 * with axis responses rx[width], ry[height]; raw planes (flat_field 0) are
 * divided by their floored response and count everywhere, flat-fielded
 * ones count in their field of view only; r is the window radius.  NaN
 * where (i, j) does not count, i.e. the plane is no candidate there. */
double sbdx_rule_variance(const float *plane, const float *rx,
                          const float *ry, int width, int height,
                          int flat_field, int r, int i, int j);

#endif /* RTOMO_TEST_SBDX_SUPPORT_H */
