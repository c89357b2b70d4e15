/*
 * fbp_filter_design.c — the FBP high-pass filter, shared by every backend.
 *
 * The ramp is built the way Kak & Slaney recommend: sample the band-limited
 * ramp's impulse response in space (h[0] = 1/4, h[odd n] = -1/(pi n)^2,
 * h[even n] = 0), lay it out circularly over the padded length and take its
 * DFT.  Unlike sampling |f| directly, this gives the right DC level for a
 * finite padded row, so flat regions reconstruct without a cupping offset.
 * The windows multiply that ramp in frequency with their closed forms.
 *
 * FFTW's planner is not thread-safe; every plan in the CPU code is created
 * under rtomo_fftw_planner_lock().
 */
#include "config.h"

#include <fftw3.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>

#include "engine_internal.h"
#include "fbp_filter_design.h"

static pthread_mutex_t planner_mutex = PTHREAD_MUTEX_INITIALIZER;

void rtomo_fftw_planner_lock(void) { pthread_mutex_lock(&planner_mutex); }
void rtomo_fftw_planner_unlock(void) { pthread_mutex_unlock(&planner_mutex); }

double rtomo_window_gain(rtomo_window window, double f, double cutoff)
{
    const double fc = 0.5 * cutoff;     /* cut-off in cycles per bin */
    const double a = fabs(f);
    if (a > fc)
        return 0.0;
    switch (window) {
    case RTOMO_WINDOW_RAMLAK:
        return 1.0;
    case RTOMO_WINDOW_SHEPP_LOGAN: {
        double x = M_PI * a / (2.0 * fc);
        return x == 0.0 ? 1.0 : sin(x) / x;
    }
    case RTOMO_WINDOW_COSINE:
        return cos(M_PI * a / (2.0 * fc));
    case RTOMO_WINDOW_HAMMING:
        return 0.54 + 0.46 * cos(M_PI * a / fc);
    case RTOMO_WINDOW_HANN:
        return 0.5 + 0.5 * cos(M_PI * a / fc);
    }
    return 0.0;
}

/* DFT of the circular spatial ramp kernel; real and even, so an r2r
 * transform of the even kernel gives it directly (REDFT00 over n/2+1
 * points equals the length-n DFT of the even extension). */
static rtomo_status spatial_ramp_spectrum(int n, double *spectrum,
                                          rtomo_error *err)
{
    const int half = n / 2;
    double *kernel = fftw_malloc(sizeof(double) * (size_t)(half + 1));
    double *out = fftw_malloc(sizeof(double) * (size_t)(half + 1));
    if (!kernel || !out) {
        fftw_free(kernel);
        fftw_free(out);
        return rtomo_set_error(err, RTOMO_E_NOMEM,
                               "out of memory designing a %d-point filter", n);
    }
    for (int i = 0; i <= half; i++) {
        if (i == 0)
            kernel[i] = 0.25;
        else if (i % 2)
            kernel[i] = -1.0 / (M_PI * M_PI * (double)i * (double)i);
        else
            kernel[i] = 0.0;
    }
    rtomo_fftw_planner_lock();
    fftw_plan plan = fftw_plan_r2r_1d(half + 1, kernel, out, FFTW_REDFT00,
                                      FFTW_ESTIMATE);
    rtomo_fftw_planner_unlock();
    if (!plan) {
        fftw_free(kernel);
        fftw_free(out);
        return rtomo_set_error(err, RTOMO_E_BACKEND,
                               "FFTW could not plan a %d-point transform", n);
    }
    fftw_execute(plan);
    rtomo_fftw_planner_lock();
    fftw_destroy_plan(plan);
    rtomo_fftw_planner_unlock();
    /* REDFT00 computes kernel[0] + (-1)^k kernel[half] + 2 sum_{j=1}^{half-1}
     * kernel[j] cos(pi j k / half): exactly the DFT of the even extension. */
    for (int k = 0; k <= half; k++)
        spectrum[k] = out[k];
    for (int k = half + 1; k < n; k++)
        spectrum[k] = out[n - k];
    fftw_free(kernel);
    fftw_free(out);
    return RTOMO_OK;
}

rtomo_status rtomo_fbp_filter_design(int det_width, rtomo_window window,
                                     double cutoff, double scale,
                                     float *out, int capacity, int *n_out,
                                     rtomo_error *err)
{
    const int n = rtomo_fbp_padded_length(det_width);
    if (n_out)
        *n_out = n;
    if (!out || capacity <= 0)
        return RTOMO_OK;
    double *spectrum = malloc(sizeof(double) * (size_t)n);
    if (!spectrum)
        return rtomo_set_error(err, RTOMO_E_NOMEM,
                               "out of memory designing a %d-point filter", n);
    rtomo_status st = spatial_ramp_spectrum(n, spectrum, err);
    if (st == RTOMO_OK) {
        int count = capacity < n ? capacity : n;
        for (int k = 0; k < count; k++) {
            double f = (k <= n / 2 ? k : k - n) / (double)n;
            out[k] = (float)(scale * spectrum[k] *
                             rtomo_window_gain(window, f, cutoff));
        }
    }
    free(spectrum);
    return st;
}

rtomo_status rtomo_fbp_filter_response(const rtomo_fbp_geometry *g,
                                       float *out, int capacity, int *n_out,
                                       rtomo_error *err)
{
    rtomo_status st = rtomo_fbp_geometry_validate(g, err);
    if (st != RTOMO_OK)
        return st;
    double cutoff = g->cutoff > 0 ? g->cutoff : 1.0;
    return rtomo_fbp_filter_design(rtomo_fbp_virtual_width(g), g->window, cutoff, 1.0, out,
                                   capacity, n_out, err);
}
