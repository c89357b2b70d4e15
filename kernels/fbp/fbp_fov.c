/*
 * fbp_fov.c — the circular field of view in the FBP front end
 * (rtomo_engine.h, "Circular field of view"): the radius from the
 * geometry, its check, the plan's integer limit that every backend's pixel
 * test (fbp_fov.h) reads, and the CPU's row ranges.
 */
#include "config.h"

#include <math.h>

#include "engine_internal.h"
#include "fbp_fov.h"
#include "fbp_half.h"

rtomo_status rtomo_fbp_fov_radius(const rtomo_fbp_geometry *g, double *radius,
                                  rtomo_error *err)
{
    int w;
    double axis;
    rtomo_fbp_half_detector(g, &w, &axis);
    double r = INFINITY;
    for (int p = 0; p < g->n_proj; p++) {
        const double s = axis + (g->axis_shift ? g->axis_shift[p] : 0.0);
        r = fmin(r, fmin(s, (w - 1) - s));
    }
    if (g->n_proj < 1 || !(r >= 1.0))
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "field_of_view circle: the rotation axis %g "
                               "(with its per-projection shifts) lies less "
                               "than 1 bin inside the detector of width %d "
                               "that is back-projected, so no circle is seen "
                               "by every projection (radius %g)", axis, w,
                               isfinite(r) ? r : -1.0);
    *radius = r;
    return RTOMO_OK;
}

rtomo_status rtomo_fbp_fov_setup(rtomo_fbp *plan, rtomo_error *err)
{
    plan->fov_radius = 0.0;
    plan->fov_limit = -1;
    if (plan->geom.field_of_view != RTOMO_FOV_CIRCLE)
        return RTOMO_OK;
    double r;
    rtomo_status st = rtomo_fbp_fov_radius(&plan->geom, &r, err);
    if (st != RTOMO_OK)
        return st;
    /* 4 R^2 as the header's test computes it: (2 (x - c))^2 is exact, so
     * comparing the integer dx^2 + dy^2 with floor(4 (R R)) is comparing
     * (x - c)^2 + (y - c)^2 with R R in double.  Beyond the grid's corner
     * the limit only needs to hold the corner (no 64-bit overflow). */
    const double span = plan->geom.slice_size - 1.0;
    const double all = 2.0 * span * span + 1.0;
    const double four = 4.0 * (r * r);
    plan->fov_radius = r;
    plan->fov_limit = (long long)floor(four < all ? four : all);
    return RTOMO_OK;
}

void fbp_fov_row(long long limit, int span, int y, int *first, int *end)
{
    if (limit < 0) {
        *first = 0;
        *end = span + 1;
        return;
    }
    const long long dy = 2LL * y - span, rest = limit - dy * dy;
    if (rest < 0) {
        *first = *end = 0;
        return;
    }
    /* m = floor(sqrt(rest)), corrected for the double's rounding. */
    long long m = (long long)sqrt((double)rest);
    while (m > 0 && m * m > rest)
        m--;
    while ((m + 1) * (m + 1) <= rest)
        m++;
    /* |2x - span| <= m  <=>  (span - m) / 2 <= x <= (span + m) / 2 */
    long long lo = (span - m + 1) / 2, hi = (span + m) / 2;
    if (span - m < 0)
        lo = -((m - span) / 2);
    lo = lo < 0 ? 0 : lo;
    hi = hi > span ? span : hi;
    *first = (int)lo;
    *end = hi >= lo ? (int)hi + 1 : (int)lo;
}
