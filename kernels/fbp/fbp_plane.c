/*
 * fbp_plane.c — the front end of planes of any orientation (rtomo_engine.h,
 * "Planes of any orientation"): checking a plane, checking the slot list,
 * and handing a valid request to the backend's reconstruct_plane.
 *
 * Rules beyond the header's words, chosen here:
 *   - slots == NULL means every slot, whatever n_slots says; a given list
 *     is summed as listed (a slot listed twice counts twice), and an empty
 *     list gives a plane of zeros.
 *   - A plane's time goes into stats.backproject_seconds (added by the
 *     backend, as for slices) and its pixels x projections into
 *     stats.updates; reconstruct_seconds and slices_reconstructed stay
 *     those of rtomo_fbp_reconstruct.
 */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"

/* |angle between u and v - 90 degrees| allowed, radians. */
#define RIGHT_ANGLE_TOLERANCE 1e-3

/* ---------------------------------------------------------- checking ---- */

static rtomo_status check_size(const char *name, int value, rtomo_error *err)
{
    if (value < 1 || value > RTOMO_FBP_PLANE_MAX_EDGE)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "plane %s %d is outside [1, %d]", name, value,
                               RTOMO_FBP_PLANE_MAX_EDGE);
    return RTOMO_OK;
}

static rtomo_status check_finite(const char *name, const double v[3],
                                 rtomo_error *err)
{
    for (int k = 0; k < 3; k++)
        if (!isfinite(v[k]))
            return rtomo_set_error(err, RTOMO_E_INVALID,
                                   "plane %s[%d] is not a finite number",
                                   name, k);
    return RTOMO_OK;
}

/* v / |v| into out.  The components are scaled by the largest first, so
 * that neither tiny nor huge (finite) vectors under- or overflow on the
 * way; fails on the zero vector. */
static rtomo_status normalise(const char *name, const double v[3],
                              double out[3], rtomo_error *err)
{
    double m = fmax(fabs(v[0]), fmax(fabs(v[1]), fabs(v[2])));
    if (m == 0.0)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "plane %s is the zero vector: it must give a "
                               "direction", name);
    double s[3] = {v[0] / m, v[1] / m, v[2] / m};
    double n = sqrt(s[0] * s[0] + s[1] * s[1] + s[2] * s[2]);
    for (int k = 0; k < 3; k++)
        out[k] = s[k] / n;
    return RTOMO_OK;
}

/* u and v unit: their angle is acos(u.v); compare |90 deg - angle| as
 * asin(|u.v|), which is exact near the right angle where acos is not. */
static rtomo_status check_right_angle(const double u[3], const double v[3],
                                      rtomo_error *err)
{
    double dot = u[0] * v[0] + u[1] * v[1] + u[2] * v[2];
    double off = asin(fmin(1.0, fabs(dot)));
    if (off > RIGHT_ANGLE_TOLERANCE)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "plane u and v are not at right angles: they "
                               "are %.4f degrees apart (90 +- %.4f allowed)",
                               acos(fmax(-1.0, fmin(1.0, dot))) * 180.0 / M_PI,
                               RIGHT_ANGLE_TOLERANCE * 180.0 / M_PI);
    return RTOMO_OK;
}

rtomo_status rtomo_fbp_plane_validate(const rtomo_fbp_plane *plane,
                                      rtomo_fbp_plane *out, rtomo_error *err)
{
    if (!plane)
        return rtomo_set_error(err, RTOMO_E_INVALID, "no plane given");
    rtomo_fbp_plane p = *plane;
    rtomo_status st;
    if ((st = check_size("width", p.width, err)) ||
        (st = check_size("height", p.height, err)) ||
        (st = check_finite("centre", p.centre, err)) ||
        (st = check_finite("u", p.u, err)) ||
        (st = check_finite("v", p.v, err)) ||
        (st = normalise("u", plane->u, p.u, err)) ||
        (st = normalise("v", plane->v, p.v, err)) ||
        (st = check_right_angle(p.u, p.v, err)))
        return st;
    if (out)
        *out = p;
    return RTOMO_OK;
}

/* ---------------------------------------------------- reconstruction ---- */

static rtomo_status check_slots(const rtomo_fbp *plan, const int *slots,
                                int n_slots, rtomo_error *err)
{
    if (!slots)
        return RTOMO_OK;
    if (n_slots < 0)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "n_slots %d is negative", n_slots);
    for (int i = 0; i < n_slots; i++)
        if (slots[i] < 0 || slots[i] >= plan->geom.n_proj)
            return rtomo_set_error(err, RTOMO_E_RANGE,
                                   "slots[%d] = %d is outside the plan's "
                                   "projection slots [0, %d)", i, slots[i],
                                   plan->geom.n_proj);
    return RTOMO_OK;
}

rtomo_status rtomo_fbp_reconstruct_plane(rtomo_fbp *plan,
                                         const rtomo_fbp_plane *plane,
                                         const int *slots, int n_slots,
                                         float *out, rtomo_error *err)
{
    if (!plan || !out)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "reconstruct_plane needs a plan and an output "
                               "buffer");
    rtomo_fbp_plane p;
    rtomo_status st = rtomo_fbp_plane_validate(plane, &p, err);
    if (st == RTOMO_OK)
        st = check_slots(plan, slots, n_slots, err);
    if (st != RTOMO_OK)
        return st;
    const int n = slots ? n_slots : plan->geom.n_proj;
    const size_t pixels = (size_t)p.width * (size_t)p.height;
    /* Nothing fed, or nothing listed: every term of the sum is 0.  (A
     * backend may not even have its buffers before the first projection.) */
    if (!plan->projections_started || n == 0) {
        memset(out, 0, sizeof(float) * pixels);
        return RTOMO_OK;
    }
    st = plan->ops->reconstruct_plane(plan, &p, slots, n, out, err);
    if (st == RTOMO_OK)
        plan->stats.updates += (double)pixels * n;
    return st;
}
