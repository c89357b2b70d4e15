/*
 * fbp_filter_design.h — the FBP ramp filter and its windows (shared by the
 * CPU and CUDA backends), and the lock that serialises FFTW planning.
 */
#ifndef RTOMO_FBP_FILTER_DESIGN_H
#define RTOMO_FBP_FILTER_DESIGN_H

#include "rtomo_engine.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Gain of `window` at frequency f (cycles per bin, |f| <= 1/2) for a cut-off
 * `cutoff` in (0, 1] as a fraction of Nyquist; 0 beyond the cut-off. */
double rtomo_window_gain(rtomo_window window, double f, double cutoff);

/* Filter coefficients for DFT bins 0..n-1 of a padded row (n =
 * rtomo_fbp_padded_length(det_width), stored in *n_out), each multiplied by
 * `scale`.  Writes min(n, capacity) values; out may be NULL to query n. */
rtomo_status rtomo_fbp_filter_design(int det_width, rtomo_window window,
                                     double cutoff, double scale,
                                     float *out, int capacity, int *n_out,
                                     rtomo_error *err);

/* FFTW's planner is not thread-safe: hold this lock around every
 * fftw(f)_plan_* and fftw(f)_destroy_plan call. */
void rtomo_fftw_planner_lock(void);
void rtomo_fftw_planner_unlock(void);

#ifdef __cplusplus
}
#endif

#endif
