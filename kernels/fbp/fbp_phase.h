/*
 * fbp_phase.h — the backend-neutral part of single-distance phase
 * retrieval (Paganin et al. 2002; see rtomo_fbp_phase in rtomo_engine.h):
 * the filter's reach, the padded transform size, the Fourier coefficient,
 * which detector rows a frame's filter needs (the "phase rows") and their
 * averaged dark and flat.  Computed once per plan by fbp_phase.c; the CPU
 * (cpu_fbp_phase.c) and CUDA (cuda_fbp_phase.cu) backends apply the filter
 * from these numbers, so that both filter exactly the same array.
 *
 * The padded array (both backends): ny x nx real samples, stored as for an
 * in-place real-to-complex transform (rows of 2*nh floats, nh = nx/2 + 1).
 * Phase row r, bin i lies at row pad_top + r, column pad_left + i; every
 * other sample repeats the nearest sample of the phase rows (edge
 * replication), so the transform's wrap-around meets a continuation of
 * the frame rather than its opposite edge.
 */
#ifndef RTOMO_FBP_PHASE_H
#define RTOMO_FBP_PHASE_H

#include "rtomo_engine.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Intensity ratios I/I0 entering the filter are clamped to
 * [RTOMO_PHASE_MIN_RATIO, RTOMO_PHASE_MAX_RATIO]: the floor is today's
 * normalisation's (-log(1e-6) is finite), the ceiling replaces its
 * FLT_MAX, which a transform's sums would turn into inf and NaN across
 * the whole frame.  The filtered intensity is floored at MIN again
 * before the logarithm. */
#define RTOMO_PHASE_MIN_RATIO 1e-6f
#define RTOMO_PHASE_MAX_RATIO 1e6f

typedef struct rtomo_fbp_phase_plan {
    int on;                     /* geom.phase.delta_beta > 0 */
    int margin;                 /* the filter's reach in pixels (uncapped) */
    int margin_y, margin_x;     /* margin, at most det_height / det_width */
    int row_first, row_count;   /* phase rows: detector rows filtered */
    int kept_offset;            /* geom.row_first - row_first */
    int ny, nx, nh;             /* transform size; nh = nx/2 + 1 */
    int pad_top, pad_left;      /* the phase rows' place in the array */
    double cy, cx;              /* coefficient(ky, kx) =
                                   1 / (1 + cy ky^2 + cx kx^2) / (ny nx) */
    float *dark, *flat;         /* row_count x det_width, averaged (when
                                   the plan normalises; dark 0 without
                                   darks) */
} rtomo_fbp_phase_plan;

/* Wavelength in metres of photons of `energy_kev`. */
double rtomo_fbp_phase_lambda(double energy_kev);
/* The filter's reach in pixels for valid, enabled parameters:
 * ceil(8 sqrt(a)) + 1 with a = lambda z (delta/beta) / (4 pi pixel^2),
 * the decay length squared of its real-space kernel; capped at 1 << 20. */
int rtomo_fbp_phase_margin(const rtomo_fbp_phase *p);
/* Smallest n' >= n whose only prime factors are 2, 3, 5 and 7 (fast for
 * FFTW and cuFFT). */
int rtomo_fbp_phase_fast_size(int n);
/* The filter's coefficient at signed frequency indices (ky, kx), with the
 * 1/(ny nx) of the unnormalised inverse transform folded in.  ky, kx are
 * transform indices: ky in [0, ny), kx in [0, nh). */
double rtomo_fbp_phase_coefficient(const rtomo_fbp_phase_plan *ph, int ky,
                                   int kx);
/* Signed frequency index of transform index k of an n-point transform. */
static inline int rtomo_fbp_phase_signed(int k, int n)
{
    return k < (n + 1) / 2 ? k : k - n;
}

/* Fill plan->phase from plan->geom (normalised): off, or the sizes and
 * coefficients above.  RTOMO_E_NOMEM when the padded array would not fit
 * in memory's address range. */
rtomo_status rtomo_fbp_phase_init(rtomo_fbp *plan, rtomo_error *err);
/* Average plan->dark_sum / flat_sum (n_dark, n_flat) over the phase rows
 * into plan->phase.dark / flat; nothing when phase retrieval is off.
 * Called wherever the kept rows' flat field is averaged. */
rtomo_status rtomo_fbp_phase_average(rtomo_fbp *plan, rtomo_error *err);
void rtomo_fbp_phase_free(rtomo_fbp *plan);

/* Rows of each frame a backend keeps before filtering: the phase rows with
 * phase retrieval, the kept rows without. */
int rtomo_fbp_phase_input_rows(const rtomo_fbp *plan);

#ifdef __cplusplus
}
#endif

#endif /* RTOMO_FBP_PHASE_H */
