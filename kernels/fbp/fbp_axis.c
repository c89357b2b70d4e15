/*
 * fbp_axis.c — the rotation axis of a parallel-beam scan from pairs of
 * opposed projections (rtomo_fbp_find_axis).
 *
 * With the geometry of rtomo_engine.h, bin s of the projection at angle a
 * sees s - axis = (x - c) cos a - (y - c) sin a, and at a + pi the same
 * line lies at axis - (s - axis): p_{a+pi}(u) = p_a(2 axis - u).  So for
 * the right t = 2 axis the mismatch
 *     SSD(t) = sum_s [a(s) - b(t - s)]^2     (a = p_a, b = p_{a+pi})
 * over the bins where both exist (the overlap) is zero up to noise.
 *
 * Method: minimise the overlap-normalised mismatch M(t) = SSD(t) / E(t),
 * E(t) = sum over the overlap of a(s)^2 + b(t - s)^2, summed over all rows
 * and pairs before the division.  M is 0 for a perfect mirror and about 1
 * for unrelated data (or overlap in air, where only noise is left), so it
 * needs no mean removal or window, and a partial overlap (axis off centre,
 * object cut by the detector edge) is compared on its own length.  Since
 * SSD = E - 2 X with X(t) = sum_s a(s) b(t - s), a convolution, all
 * integer t are done at once with FFTs of the zero-padded rows (linear,
 * not circular: padded length >= 2 width) and E from cumulative sums.
 *
 * Noise and sub-pixel: every row is first smoothed with a narrow
 * Gaussian (smoothing_sigma below).  Without it the product of the two
 * projections' noises, white in t, makes M jagged bin to bin; at 10^4
 * counts and 2048 bins that moved the minimum by whole bins.  Smoothed, M
 * is smooth on the scale of a bin, so the vertex of the parabola through
 * M at the best integer t and its two neighbours is the sub-bin minimum
 * (the usual refinement of a correlation peak).  The samples of M are
 * exact sums at integer t: no interpolation of the data, so nothing that
 * changes the noise variance with the fractional shift (linear
 * interpolation of b(t - s) halves it at half-integer shifts, which pulls
 * the minimum there) and no ringing at the detector edges (a first version
 * interpolated the convolution band-limited between integer t: 0.05 bin
 * off on noise-free data, 0.35 near an edge).  In t one bin is half a bin of axis, so the parabola spans +-0.5
 * bin of axis.
 *
 * Precision: M is a small difference of large sums (E - 2 X, cancelling to
 * about 1e-4 of E near the minimum at 2048 bins), so everything is done in
 * double precision, with double FFTW (the filters use single precision).
 */
#include "config.h"

#include <fftw3.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rtomo_engine.h"
#include "cpu_fbp.h"
#include "fbp_filter_design.h"
#include "fbp_half.h"

#define AXIS_MAX_WIDTH (1 << 24)    /* keeps 2 * padded length in an int */

/* What all rows of all pairs add up to: the convolution spectrum and the
 * per-bin energy, and the transforms that make them. */
typedef struct axis_work {
    int width, length;          /* smoothed bins; padded transform length */
    int radius;                 /* of the smoothing kernel: smoothed bin i
                                   is detector bin i + radius */
    double *kernel;             /* 2 radius + 1 Gaussian weights */
    double *smooth_a, *smooth_b;/* width: one smoothed row pair */
    double *row;                /* length: one zero-padded row */
    fftw_complex *first;        /* length/2 + 1: spectrum of a */
    fftw_complex *second;       /* length/2 + 1: spectrum of b */
    fftw_complex *cross;        /* length/2 + 1: sum of spectra a * b */
    double *energy;             /* width + 1: cumulative sum of a^2 + b^2,
                                   energy[i] over bins < i */
    double *conv;               /* length: X(t) at integer t */
    fftw_plan forward, backward;
} axis_work;

/* ------------------------------------------------------- validation ---- */

static rtomo_status check_arguments(const float *const *first,
                                    const float *const *opposed,
                                    int n_pairs, int rows, int width,
                                    const double *axis, rtomo_error *err)
{
    if (!first || !opposed)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "find_axis: the %s projection list is NULL",
                               first ? "opposed" : "first");
    if (!axis)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "find_axis: no place for the axis (NULL)");
    if (n_pairs < 1)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "find_axis: n_pairs is %d, need at least 1 "
                               "pair of opposed projections", n_pairs);
    if (rows < 1)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "find_axis: rows is %d, need at least 1",
                               rows);
    if (width < RTOMO_FBP_AXIS_MIN_WIDTH || width > AXIS_MAX_WIDTH)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "find_axis: width is %d bins, need %d to %d",
                               width, RTOMO_FBP_AXIS_MIN_WIDTH,
                               AXIS_MAX_WIDTH);
    for (int p = 0; p < n_pairs; p++)
        if (!first[p] || !opposed[p])
            return rtomo_set_error(err, RTOMO_E_INVALID,
                                   "find_axis: the %s projection of pair %d "
                                   "is NULL", first[p] ? "opposed" : "first",
                                   p);
    return RTOMO_OK;
}

/* A NaN or inf anywhere would spread through every FFT bin: refuse it
 * with where it is, so that the caller can find the bad frame. */
static rtomo_status check_finite(const float *const *proj, const char *which,
                                 int n_pairs, int rows, int width,
                                 rtomo_error *err)
{
    for (int p = 0; p < n_pairs; p++)
        for (int r = 0; r < rows; r++) {
            const float *v = proj[p] + (size_t)r * width;
            for (int s = 0; s < width; s++)
                if (!isfinite(v[s]))
                    return rtomo_set_error(
                        err, RTOMO_E_INVALID,
                        "find_axis: the %s projection of pair %d holds a "
                        "non-finite value at row %d, bin %d", which, p, r, s);
        }
    return RTOMO_OK;
}

/* ------------------------------------------------------- smoothing ---- */

/* Width of the Gaussian low-pass applied to every row first, in bins.
 * Noise makes the mismatch jagged: its part sum_s n_a(s) n_b(t - s), the
 * product of the two projections' noises, is white in t, and at 10^4
 * counts it is as large as the rise of M within a bin of the minimum.  A
 * low-pass of sigma bins cuts it by about sqrt(2 sqrt(pi) sigma) and makes
 * M smooth on the scale of one bin, which the parabolic refinement needs
 * (on noise-free data too: the phantom's cusps make the raw M a poor
 * parabola).  Features of a sample scale with the detector, noise is per
 * bin, so sigma grows with the width: width / 1024, within [1.5, 4]; more
 * would cost resolution at small widths and margin at the edges. */
static double smoothing_sigma(int det_width)
{
    return fmin(4.0, fmax(1.5, det_width / 1024.0));
}

static int smoothing_radius(int det_width)
{
    return (int)ceil(3.0 * smoothing_sigma(det_width));
}

/* The fewest bins two opposed (smoothed) rows must share for an axis to
 * be tried: a handful of bins can mirror each other by chance. */
static int min_overlap(int width)
{
    return width / 16 > 8 ? width / 16 : 8;
}

int rtomo_fbp_axis_margin(int det_width)
{
    if (det_width < RTOMO_FBP_AXIS_MIN_WIDTH)
        return -1;
    const int radius = smoothing_radius(det_width);
    return radius + min_overlap(det_width - 2 * radius) / 2;
}

static void make_kernel(double *kernel, int radius, double sigma)
{
    double sum = 0.0;
    for (int k = -radius; k <= radius; k++)
        sum += kernel[k + radius] = exp(-0.5 * k * k / (sigma * sigma));
    for (int k = 0; k <= 2 * radius; k++)
        kernel[k] /= sum;
}

/* Smoothed row: only where the whole kernel lies on the detector, so that
 * no edge rule is needed and the mirror relation holds exactly (smoothing
 * with an even kernel commutes with mirroring): smoothed bin i is detector
 * bin i + radius, and t = 2 axis shifts by 2 radius. */
static void smooth_row(const axis_work *w, const float *v, double *out)
{
    const int taps = 2 * w->radius + 1;
    for (int i = 0; i < w->width; i++) {
        double sum = 0.0;
        for (int k = 0; k < taps; k++)
            sum += w->kernel[k] * v[i + k];
        out[i] = sum;
    }
}

/* ------------------------------------------------------- workspace ---- */

static void work_free(axis_work *w)
{
    rtomo_fftw_planner_lock();
    if (w->forward)
        fftw_destroy_plan(w->forward);
    if (w->backward)
        fftw_destroy_plan(w->backward);
    rtomo_fftw_planner_unlock();
    fftw_free(w->row);
    fftw_free(w->first);
    fftw_free(w->second);
    fftw_free(w->cross);
    fftw_free(w->conv);
    free(w->energy);
    free(w->kernel);
    free(w->smooth_a);
    free(w->smooth_b);
}

/* Buffers and plans for rows of `width` bins.  The plans are made with
 * FFTW_ESTIMATE (quick, and the same roundings in every run) and run on
 * other buffers through the new-array execute functions. */
static rtomo_status work_init(axis_work *w, int det_width,
                              rtomo_error *err)
{
    memset(w, 0, sizeof *w);
    const double sigma = smoothing_sigma(det_width);
    w->radius = smoothing_radius(det_width);
    const int width = det_width - 2 * w->radius;
    w->width = width;
    w->length = 1;
    while (w->length < 2 * width)
        w->length *= 2;
    const size_t n = (size_t)w->length, half = n / 2 + 1;
    w->row = fftw_malloc(sizeof(double) * n);
    w->conv = fftw_malloc(sizeof(double) * n);
    w->first = fftw_malloc(sizeof(fftw_complex) * half);
    w->second = fftw_malloc(sizeof(fftw_complex) * half);
    w->cross = fftw_malloc(sizeof(fftw_complex) * half);
    w->energy = calloc((size_t)width + 1, sizeof(double));
    w->kernel = malloc(sizeof(double) * (size_t)(2 * w->radius + 1));
    w->smooth_a = malloc(sizeof(double) * (size_t)width);
    w->smooth_b = malloc(sizeof(double) * (size_t)width);
    if (!w->row || !w->conv || !w->first || !w->second || !w->cross ||
        !w->energy || !w->kernel || !w->smooth_a || !w->smooth_b) {
        work_free(w);
        return rtomo_set_error(err, RTOMO_E_NOMEM,
                               "find_axis: out of memory for rows of %d "
                               "bins", det_width);
    }
    make_kernel(w->kernel, w->radius, sigma);
    memset(w->cross, 0, sizeof(fftw_complex) * half);
    rtomo_fftw_planner_lock();
    w->forward = fftw_plan_dft_r2c_1d(w->length, w->row, w->first,
                                      FFTW_ESTIMATE);
    w->backward = fftw_plan_dft_c2r_1d(w->length, w->first, w->conv,
                                       FFTW_ESTIMATE);
    rtomo_fftw_planner_unlock();
    if (!w->forward || !w->backward) {
        work_free(w);
        return rtomo_set_error(err, RTOMO_E_BACKEND,
                               "find_axis: FFTW could not plan a transform "
                               "of %d points", w->length);
    }
    return RTOMO_OK;
}

/* -------------------------------------------------------- the sums ---- */

/* Spectrum of one row, zero-padded, into out. */
static void transform_row(axis_work *w, const double *v, fftw_complex *out)
{
    for (int s = 0; s < w->width; s++)
        w->row[s] = v[s];
    memset(w->row + w->width, 0,
           sizeof(double) * (size_t)(w->length - w->width));
    fftw_execute_dft_r2c(w->forward, w->row, out);
}

/* Add one row pair: its convolution spectrum and its energy per bin (the
 * energy array holds per-bin sums until make_cumulative). */
static void add_row_pair(axis_work *w, const float *row_a,
                         const float *row_b)
{
    const double *a = w->smooth_a, *b = w->smooth_b;
    smooth_row(w, row_a, w->smooth_a);
    smooth_row(w, row_b, w->smooth_b);
    transform_row(w, a, w->first);
    transform_row(w, b, w->second);
    for (int k = 0; k <= w->length / 2; k++) {
        const double ar = w->first[k][0], ai = w->first[k][1];
        const double br = w->second[k][0], bi = w->second[k][1];
        w->cross[k][0] += ar * br - ai * bi;
        w->cross[k][1] += ar * bi + ai * br;
    }
    for (int s = 0; s < w->width; s++)
        w->energy[s + 1] += a[s] * a[s] + b[s] * b[s];
}

static void make_cumulative(axis_work *w)
{
    for (int s = 1; s <= w->width; s++)
        w->energy[s] += w->energy[s - 1];
}

/* X(t) at every integer t: the inverse transform of the summed spectrum
 * (FFTW's inverse is unnormalised).  The c2r transform overwrites its
 * input, so it works on a copy (w->first is free by now). */
static void make_convolution(axis_work *w)
{
    memcpy(w->first, w->cross, sizeof(fftw_complex) * (w->length / 2 + 1));
    fftw_execute_dft_c2r(w->backward, w->first, w->conv);
    for (int t = 0; t < w->length; t++)
        w->conv[t] /= w->length;
}

/* ------------------------------------------------- the mismatch M(t) ---- */

/* Bins s where a(s) and b(t - s) both exist, at integer t: [lo, hi]. */
static void overlap(int width, int t, int *lo, int *hi)
{
    *lo = t - (width - 1) > 0 ? t - (width - 1) : 0;
    *hi = t < width - 1 ? t : width - 1;
}

/* E at integer t (0 <= t <= 2 width - 2).  The b bins u = t - s of the
 * overlap form the same interval as the a bins, so one cumulative sum of
 * a^2 + b^2 gives both. */
static double energy_at(const axis_work *w, int t)
{
    int lo, hi;
    overlap(w->width, t, &lo, &hi);
    return w->energy[hi + 1] - w->energy[lo];
}

/* M at integer t; NaN where the overlap holds no energy at all (nothing
 * to compare: noise-free air). */
static double mismatch_at(const axis_work *w, int t)
{
    const double e = energy_at(w, t);
    if (!(e > 0.0))
        return NAN;
    return (e - 2.0 * w->conv[t]) / e;
}

/* ---------------------------------------------------------- search ---- */

static int compare_doubles(const void *x, const void *y)
{
    const double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/* The best integer t among those with enough overlap and some energy, and
 * the median M over them (the scale for the quality figure).  Returns
 * RTOMO_E_INVALID when no t can be judged or M is flat (featureless data
 * mirror at every axis). */
static rtomo_status coarse_search(const axis_work *w, int *best,
                                  double *best_m, double *median,
                                  rtomo_error *err)
{
    const int needed = min_overlap(w->width);
    const int last = 2 * w->width - 2;
    double *all = malloc(sizeof(double) * (size_t)(last + 1));
    if (!all)
        return rtomo_set_error(err, RTOMO_E_NOMEM,
                               "find_axis: out of memory for the search");
    int n = 0;
    *best = -1;
    for (int t = 0; t <= last; t++) {
        int lo, hi;
        overlap(w->width, t, &lo, &hi);
        const double m = mismatch_at(w, t);
        if (hi - lo + 1 < needed || isnan(m))
            continue;
        all[n++] = m;
        if (*best < 0 || m < *best_m) {
            *best = t;
            *best_m = m;
        }
    }
    if (n == 0) {
        free(all);
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "find_axis: the projections are zero "
                               "everywhere: no axis can be found");
    }
    qsort(all, (size_t)n, sizeof(double), compare_doubles);
    *median = all[n / 2];
    const double spread = all[n - 1] - all[0];
    free(all);
    if (!(spread > 1e-12))
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "find_axis: the projections are featureless "
                               "(they mirror at every axis): no axis can be "
                               "found");
    return RTOMO_OK;
}

/* The vertex of the parabola through M at best - 1, best, best + 1: the
 * sub-bin minimum.  The smoothing makes M smooth on the scale of one bin,
 * so near its minimum it is a parabola to good accuracy; where a neighbour
 * is not a candidate (the end of the range) the integer t stands. */
static double refine(const axis_work *w, int best, int first, int last)
{
    if (best <= first || best >= last)
        return best;
    const double m0 = mismatch_at(w, best - 1), m1 = mismatch_at(w, best),
                 m2 = mismatch_at(w, best + 1);
    const double curvature = m0 - 2.0 * m1 + m2;
    if (!(curvature > 0.0))
        return best;
    const double step = 0.5 * (m0 - m2) / curvature;
    return best + fmax(-0.5, fmin(0.5, step));
}

/* M between integer samples, linearly: for the quality figure only. */
static double mismatch_near(const axis_work *w, double t)
{
    const int t0 = (int)floor(t);
    const double f = t - t0;
    if (f == 0.0)
        return mismatch_at(w, t0);
    return (1.0 - f) * mismatch_at(w, t0) + f * mismatch_at(w, t0 + 1);
}

/* ------------------------------------------------------------ entry ---- */

rtomo_status rtomo_fbp_find_axis(const float *const *first,
                                 const float *const *opposed, int n_pairs,
                                 int rows, int width, double *axis,
                                 double *quality, rtomo_error *err)
{
    rtomo_status st = check_arguments(first, opposed, n_pairs, rows, width,
                                      axis, err);
    if (st == RTOMO_OK)
        st = check_finite(first, "first", n_pairs, rows, width, err);
    if (st == RTOMO_OK)
        st = check_finite(opposed, "opposed", n_pairs, rows, width, err);
    if (st != RTOMO_OK)
        return st;

    axis_work w;
    if ((st = work_init(&w, width, err)) != RTOMO_OK)
        return st;
    for (int p = 0; p < n_pairs; p++)
        for (int r = 0; r < rows; r++)
            add_row_pair(&w, first[p] + (size_t)r * width,
                         opposed[p] + (size_t)r * width);
    make_cumulative(&w);
    make_convolution(&w);

    int best = -1;
    double best_m = NAN, median = NAN;
    st = coarse_search(&w, &best, &best_m, &median, err);
    if (st == RTOMO_OK) {
        const int reach = min_overlap(w.width) - 1;
        const double t = refine(&w, best, reach, 2 * w.width - 2 - reach);
        const double m = mismatch_near(&w, t);
        *axis = 0.5 * t + w.radius;
        if (quality)
            *quality = median > 0.0 ? fmin(1.0, fmax(0.0, 1.0 - m / median))
                                    : 0.0;
        rtomo_clear_error(err);
    }
    work_free(&w);
    return st;
}

/* --------------------------------------------------- plan-side helpers ---- */

rtomo_status rtomo_fbp_line_integrals(const rtomo_fbp *plan, const void *frame,
                                      rtomo_dtype dtype, const int *rows,
                                      int n_rows, float *out, rtomo_error *err)
{
    const rtomo_fbp_geometry *g = &plan->geom;
    if (!frame || !rows || !out || n_rows < 1)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "line integrals need a frame, rows and room");
    if (!plan->projections_started)
        return rtomo_set_error(err, RTOMO_E_STATE,
                               "the flat field is fixed with the first "
                               "projection; none came yet");
    for (int i = 0; i < n_rows; i++) {
        const int kept = rows[i] - g->row_first;
        if (kept < 0 || kept >= g->row_count)
            return rtomo_set_error(err, RTOMO_E_RANGE,
                                   "detector row %d is not among the kept "
                                   "rows [%d, %d)", rows[i], g->row_first,
                                   g->row_first + g->row_count);
        if (g->half_acquisition)
            continue;
        /* The CPU backend's normalisation is the definition (PROTOCOL.md
         * 3.10), whichever backend the plan runs on: it reads only the
         * plan's flat field. */
        cpu_fbp_normalise_row(plan, frame, dtype, kept,
                              out + (size_t)i * (size_t)g->det_width);
    }
    if (g->half_acquisition)    /* physical frames in, physical rows out */
        return rtomo_fbp_half_line_integrals(plan, frame, dtype, rows, n_rows,
                                             out, err);
    return RTOMO_OK;
}

rtomo_status rtomo_fbp_set_axis(rtomo_fbp *plan, double axis, rtomo_error *err)
{
    if (plan->geom.half_acquisition)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "the axis of a half-acquisition scan is fixed "
                               "when the plan is made (its bin weights, "
                               "applied before the filter, depend on it)");
    if (!rtomo_fbp_axis_valid(axis, plan->geom.det_width))
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "axis %g is not within one detector width of "
                               "the detector [0, %d)", axis,
                               plan->geom.det_width);
    rtomo_status st = rtomo_fbp_stream_flush(plan, err);
    if (st != RTOMO_OK)
        return st;
    /* The circle follows the axis; an axis whose circle is empty is
     * refused and the old one kept. */
    const double old = plan->geom.axis;
    plan->geom.axis = axis;
    if ((st = rtomo_fbp_fov_setup(plan, err)) != RTOMO_OK) {
        plan->geom.axis = old;
        rtomo_error ignored;
        rtomo_fbp_fov_setup(plan, &ignored);
    }
    return st;
}
