/*
 * fbp_phase.c — the front end's part of single-distance phase retrieval
 * (see fbp_phase.h): the numbers both backends filter with, and the flat
 * field of the phase rows.
 *
 * Why the phase rows: the filter mixes every pixel with its neighbours
 * within its reach (the margin), vertical ones included, while a plan
 * keeps only rows [row_first, row_first + row_count).  Each frame is
 * therefore filtered over the kept rows plus `margin` rows on either side
 * (clipped to the detector), and only the kept rows go on to the
 * logarithm and the ramp filter.  The dark and flat of those rows are
 * averaged here from the full-frame sums that fbp_engine.c keeps, so a
 * refreshed flat field covers them too.
 */
#include "config.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "engine_internal.h"

/* h c in metre keV. */
#define HC_M_KEV 1.23984193e-9
/* The kernel of 1/(1 + a |2 pi f|^2) decays like exp(-r / sqrt(a)): at 8
 * decay lengths its weight is below 1e-3 of the whole (the 1-D tail beyond
 * r holds exp(-r/sqrt(a))/2, 2e-4 at 8). */
#define REACH_DECAY_LENGTHS 8.0
#define MAX_MARGIN (1 << 20)

double rtomo_fbp_phase_lambda(double energy_kev)
{
    return HC_M_KEV / energy_kev;
}

int rtomo_fbp_phase_reach(const rtomo_fbp_phase *p)
{
    return p && p->delta_beta > 0.0 ? rtomo_fbp_phase_margin(p) : 0;
}

int rtomo_fbp_phase_margin(const rtomo_fbp_phase *p)
{
    const double a = rtomo_fbp_phase_lambda(p->energy_kev) * p->distance_m *
                     p->delta_beta / (4.0 * M_PI) / (p->pixel_m * p->pixel_m);
    const double m = ceil(REACH_DECAY_LENGTHS * sqrt(a)) + 1.0;
    return !(m < MAX_MARGIN) ? MAX_MARGIN : (int)m;
}

static int only_small_primes(int n)
{
    static const int primes[] = {2, 3, 5, 7};
    for (size_t i = 0; i < sizeof primes / sizeof primes[0]; i++)
        while (n % primes[i] == 0)
            n /= primes[i];
    return n == 1;
}

int rtomo_fbp_phase_fast_size(int n)
{
    if (n < 1)
        return 1;
    while (!only_small_primes(n))
        n++;
    return n;
}

double rtomo_fbp_phase_coefficient(const rtomo_fbp_phase_plan *ph, int ky,
                                   int kx)
{
    const double y = rtomo_fbp_phase_signed(ky, ph->ny);
    const double x = kx;    /* a half spectrum: kx in [0, nx/2] */
    return 1.0 / (1.0 + ph->cy * y * y + ph->cx * x * x) /
           ((double)ph->ny * (double)ph->nx);
}

static int min_int(int a, int b) { return a < b ? a : b; }
static int max_int(int a, int b) { return a > b ? a : b; }

rtomo_status rtomo_fbp_phase_init(rtomo_fbp *plan, rtomo_error *err)
{
    const rtomo_fbp_geometry *g = &plan->geom;
    rtomo_fbp_phase_plan *ph = &plan->phase;
    const rtomo_fbp_phase *p = &g->phase;
    *ph = (rtomo_fbp_phase_plan){0};
    if (!(p->delta_beta > 0.0))
        return RTOMO_OK;
    ph->on = 1;
    ph->margin = rtomo_fbp_phase_margin(p);
    /* A reach beyond the detector only repeats edge values: cap it there
     * so that absurd parameters cost at most a 3x larger transform. */
    ph->margin_y = min_int(ph->margin, g->det_height);
    ph->margin_x = min_int(ph->margin, g->det_width);
    ph->row_first = max_int(0, g->row_first - ph->margin_y);
    const int end = min_int(g->det_height,
                            g->row_first + g->row_count + ph->margin_y);
    ph->row_count = end - ph->row_first;
    ph->kept_offset = g->row_first - ph->row_first;
    ph->pad_top = ph->margin_y;
    ph->pad_left = ph->margin_x;
    ph->ny = rtomo_fbp_phase_fast_size(ph->row_count + 2 * ph->margin_y);
    ph->nx = rtomo_fbp_phase_fast_size(g->det_width + 2 * ph->margin_x);
    ph->nh = ph->nx / 2 + 1;
    if ((double)ph->ny * 2.0 * ph->nh * sizeof(float) > (double)SIZE_MAX / 4)
        return rtomo_set_error(err, RTOMO_E_NOMEM,
                               "phase retrieval: a %d x %d transform does not "
                               "fit in memory", ph->ny, ph->nx);
    /* pi lambda z (delta/beta) |f|^2 with f = k / (n pixel). */
    const double c = M_PI * rtomo_fbp_phase_lambda(p->energy_kev) *
                     p->distance_m * p->delta_beta / (p->pixel_m * p->pixel_m);
    ph->cy = c / ((double)ph->ny * ph->ny);
    ph->cx = c / ((double)ph->nx * ph->nx);
    return RTOMO_OK;
}

rtomo_status rtomo_fbp_phase_average(rtomo_fbp *plan, rtomo_error *err)
{
    rtomo_fbp_phase_plan *ph = &plan->phase;
    if (!ph->on)
        return RTOMO_OK;
    const size_t width = (size_t)plan->geom.det_width;
    const size_t n = (size_t)ph->row_count * width;
    const size_t first = (size_t)ph->row_first * width;
    free(ph->dark);
    free(ph->flat);
    ph->dark = calloc(n, sizeof(float));
    ph->flat = calloc(n, sizeof(float));
    if (!ph->dark || !ph->flat)
        return rtomo_set_error(err, RTOMO_E_NOMEM,
                               "out of memory for the flat field of %d phase "
                               "retrieval rows", ph->row_count);
    for (size_t i = 0; i < n; i++) {
        if (plan->n_dark)
            ph->dark[i] = (float)(plan->dark_sum[first + i] / plan->n_dark);
        ph->flat[i] = (float)(plan->flat_sum[first + i] / plan->n_flat);
    }
    return RTOMO_OK;
}

void rtomo_fbp_phase_free(rtomo_fbp *plan)
{
    free(plan->phase.dark);
    free(plan->phase.flat);
    plan->phase.dark = plan->phase.flat = NULL;
}

int rtomo_fbp_phase_input_rows(const rtomo_fbp *plan)
{
    return plan->phase.on ? plan->phase.row_count : plan->geom.row_count;
}
