/*
 * fbp_half.h — half acquisition in the FBP engine (fbp_half.c): a
 * 360-degree scan with an off-centre axis reconstructed on a virtual
 * detector symmetric about the axis (rtomo_engine.h says what the caller
 * sees).  Private to kernels/.
 *
 * The front end moves the plan's geometry onto the virtual detector at
 * creation, widens every physical frame to it before anything else reads
 * the frame, and the backends multiply each row of line integrals by the
 * bin weights before the ramp filter.
 */
#ifndef RTOMO_FBP_HALF_H
#define RTOMO_FBP_HALF_H

#include "engine_internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The weight of virtual bin s: 0 for s < first or s > last (outside the
 * physical detector), 1 + sign sin(pi (s - axis) / (2 overlap)) for
 * |s - axis| <= overlap, else 2.  Plain numbers so that a GPU kernel can
 * take them by value and compute the weights where it needs them. */
typedef struct rtomo_fbp_half_weights {
    double axis;        /* virtual bins */
    double overlap;     /* axis to the nearer physical edge, >= 1 */
    double sign;        /* -1: axis right of the centre, +1: left of it */
    int first, last;    /* the physical detector's virtual bins */
} rtomo_fbp_half_weights;

/* Check g's half acquisition (nothing to check when it is off, but
 * frame_width/frame_offset must then be 0 or det_width/0). */
rtomo_status rtomo_fbp_half_validate(const rtomo_fbp_geometry *g,
                                     rtomo_error *err);

/* Move plan->geom (a validated copy, axis filled in) onto the virtual
 * detector and make the bin weights; sets frame_width and frame_offset
 * of every plan.  Before the defaults that depend on det_width. */
rtomo_status rtomo_fbp_half_setup(rtomo_fbp *plan, rtomo_error *err);

/* The detector g's back-projection uses: its width and axis (the centre
 * when NaN), the virtual ones with half acquisition (g checked). */
void rtomo_fbp_half_detector(const rtomo_fbp_geometry *g, int *width,
                             double *axis);

/* Compute plan->fov_radius and fov_limit from plan->geom (fbp_fov.c);
 * RTOMO_E_INVALID when the circle's radius is below 1 bin. */
rtomo_status rtomo_fbp_fov_setup(rtomo_fbp *plan, rtomo_error *err);
void rtomo_fbp_half_free(rtomo_fbp *plan);

/* With half acquisition, *frame (physical, checked not NULL) is replaced
 * by the plan's buffer holding it widened to the virtual detector (valid
 * until the next call); otherwise nothing happens. */
rtomo_status rtomo_fbp_half_widen(rtomo_fbp *plan, const void **frame,
                                  rtomo_dtype dtype, rtomo_error *err);

/* Multiply row[det_width] of line integrals by the bin weights (nothing
 * without half acquisition). */
void rtomo_fbp_half_weigh(const rtomo_fbp *plan, float *row);

/* The weights' parameters; 0 without half acquisition. */
int rtomo_fbp_half_weights_of(const rtomo_fbp *plan,
                              rtomo_fbp_half_weights *out);

/* rtomo_fbp_line_integrals of a half-acquisition plan (rows checked):
 * frame_width samples per row. */
rtomo_status rtomo_fbp_half_line_integrals(const rtomo_fbp *plan,
                                           const void *frame,
                                           rtomo_dtype dtype, const int *rows,
                                           int n_rows, float *out,
                                           rtomo_error *err);

#ifdef __cplusplus
}
#endif

#endif /* RTOMO_FBP_HALF_H */
