/*
 * cone_weights.c — the weights FDK applies before the ramp filter: the
 * cosine of each ray to the central ray, and the redundancy weight that
 * makes every line count once (1/2 for a full scan, Wang's half-fan
 * weights for an offset detector, Parker's for a short scan), times each
 * projection's angular interval; and the filter itself (the FBP ramp and
 * windows of fbp_filter_design.c on the virtual detector at the axis).
 *
 * Redundant rays.  With the conventions of rtomo_cone.h the ray through
 * detector u at angle beta has fan angle gamma = atan(u / sdd) and is the
 * ray at (beta + pi - 2 gamma, -gamma) traversed the other way (for
 * increasing angles; a scan turning the other way is its mirror image,
 * u -> -u, so gamma takes the direction's sign).  Weights of a ray and its
 * conjugate add up to 1: on a flat detector u -> -u.
 */
#include "config.h"

#include <math.h>
#include <stdlib.h>

#include "cone_internal.h"
#include "engine_internal.h"
#include "fbp_filter_design.h"

static double sin2(double x)
{
    double s = sin(x);
    return s * s;
}

double cone_parker(double beta, double gamma, double delta)
{
    if (beta < 0.0 || beta > M_PI + 2.0 * delta)
        return 0.0;
    if (beta < 2.0 * (delta + gamma))
        return sin2(0.25 * M_PI * beta / (delta + gamma));
    if (beta <= M_PI + 2.0 * gamma)
        return 1.0;
    if (delta - gamma <= 0.0)
        return 0.0;
    return sin2(0.25 * M_PI * (M_PI + 2.0 * delta - beta) / (delta - gamma));
}

/* Wang's weight: 1 on the long side beyond the band |u| < ua both sides
 * see, 0 on the short side beyond it, a smooth step across it whose
 * values at u and -u add up to 1. */
static double half_fan(const rtomo_cone *c, double u)
{
    const double su = c->half_fan_side * u, ua = c->half_fan_ua;
    if (su >= ua)
        return 1.0;
    if (su <= -ua)
        return 0.0;
    return 0.5 * (1.0 + sin(0.5 * M_PI * su / ua));
}

double cone_redundancy(const rtomo_cone *c, int p, double u)
{
    switch (c->weighting) {
    case RTOMO_CONE_FULL:
        return 0.5;
    case RTOMO_CONE_HALF_FAN:
        return half_fan(c, u);
    case RTOMO_CONE_SHORT_SCAN: {
        /* Each projection stands for the interval around it, so the scan
         * covers [0, coverage] with projection p at its interval's
         * middle. */
        const double mean_step = c->coverage / c->geom.n_proj;
        const double beta = c->direction * (c->angles[p] - c->angles[0]) +
                            0.5 * mean_step;
        const double delta = 0.5 * (c->coverage - M_PI);
        const double gamma = c->direction * atan(u / c->geom.sdd);
        return cone_parker(beta, gamma, delta);
    }
    }
    return 0.0;
}

static double column_u(const rtomo_cone_geometry *g, int i)
{
    return (i - 0.5 * (g->det_u - 1)) * g->pitch_u + g->offset_u;
}

static double row_v(const rtomo_cone_geometry *g, int j)
{
    return (j - 0.5 * (g->det_v - 1)) * g->pitch_v + g->offset_v;
}

void cone_row_weights(const rtomo_cone *c, int p, float *w)
{
    const rtomo_cone_geometry *g = &c->geom;
    for (int i = 0; i < g->det_u; i++)
        w[i] = (float)(c->dbeta[p] * cone_redundancy(c, p, column_u(g, i)));
}

rtomo_status cone_make_tables(rtomo_cone *c, rtomo_error *err)
{
    const rtomo_cone_geometry *g = &c->geom;
    c->cos_weight = malloc(sizeof(float) * c->frame_len);
    if (!c->cos_weight)
        return rtomo_set_error(err, RTOMO_E_NOMEM,
                               "out of memory for the cosine weights");
    const double d2 = g->sdd * g->sdd;
    for (int j = 0; j < g->det_v; j++) {
        const double v = row_v(g, j);
        for (int i = 0; i < g->det_u; i++) {
            const double u = column_u(g, i);
            c->cos_weight[(size_t)j * g->det_u + i] =
                (float)(g->sdd / sqrt(d2 + u * u + v * v));
        }
    }
    int n = 0;
    rtomo_status st = rtomo_fbp_filter_design(c->filt_u, g->window, g->cutoff,
                                              1.0, NULL, 0, &n, err);
    if (st != RTOMO_OK)
        return st;
    c->filter_length = n;
    c->filter = malloc(sizeof(float) * (size_t)n);
    if (!c->filter)
        return rtomo_set_error(err, RTOMO_E_NOMEM,
                               "out of memory for the filter");
    /* The ramp per bin of the virtual detector (pitch dp at the axis)
     * and the 1/n of an unnormalised inverse transform. */
    const double dp = g->pitch_u * g->sad / g->sdd;
    return rtomo_fbp_filter_design(c->filt_u, g->window, g->cutoff,
                                   1.0 / (dp * n), c->filter, n, NULL, err);
}
