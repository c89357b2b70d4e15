/*
 * fbp_flats.c — flats before and after the projections, interpolated by
 * projection index (rtomo_fbp_interpolate_flats; rtomo_engine.h has the
 * formula).
 *
 * The projections were normalised with the flat field before them as
 * they came.  The field after them changes each line integral by
 * t_p (ln(flat_after - dark) - ln(flat_before - dark)) to first order: an
 * offset per detector pixel, the same for every projection but for its
 * weight t_p.  The ramp filter is linear, so the backends add t_p (times
 * the projection's angular weight, as filtering applied) times the
 * filtered offset row to each held filtered projection (the add_offsets
 * op, shared with nothing else but built like ring removal's correction).
 */
#include "config.h"

#include <math.h>
#include <stdlib.h>

#include "engine_internal.h"

static rtomo_status check_state(const rtomo_fbp *plan, rtomo_error *err)
{
    if (plan->flats_interpolated)
        return rtomo_set_error(err, RTOMO_E_STATE,
                               "the flats are interpolated already");
    if (!plan->normalise || plan->n_flat_after == 0)
        return rtomo_set_error(err, RTOMO_E_STATE,
                               "interpolating flats needs flats before the "
                               "first projection and after the last one");
    if (plan->flat_refreshes > 0)
        return rtomo_set_error(err, RTOMO_E_STATE,
                               "the flat field changed between projections "
                               "already; flats before and after cannot be "
                               "interpolated over it");
    if (plan->stream_n > 0)
        return rtomo_set_error(err, RTOMO_E_STATE,
                               "interpolating flats corrects the held "
                               "projections, which the open resident slices "
                               "have already summed: close them first");
    if (plan->geom.phase.delta_beta > 0.0)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "flats are not interpolated with phase "
                               "retrieval: its filter acts on intensities, "
                               "where the flat is no offset");
    if (!plan->ops->add_offsets)
        return rtomo_set_error(err, RTOMO_E_UNAVAILABLE,
                               "the %s backend cannot correct held "
                               "projections", plan->ops->name);
    return RTOMO_OK;
}

/* ln(flat_after - dark) - ln(flat_before - dark) over the kept rows; 0
 * where either is <= 0 (a dead pixel: the normalisation clamps it). */
static float *flat_change(const rtomo_fbp *plan)
{
    const rtomo_fbp_geometry *g = &plan->geom;
    const size_t n = (size_t)g->row_count * (size_t)g->det_width;
    const size_t first = (size_t)g->row_first * (size_t)g->det_width;
    float *delta = malloc(sizeof(float) * n);
    if (!delta)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        const double after = plan->flat_after_sum[first + i] /
                             plan->n_flat_after;
        const double dark = plan->dark[i], before = plan->flat[i];
        delta[i] = after > dark && before > dark
                       ? (float)(log(after - dark) - log(before - dark))
                       : 0.0f;
    }
    return delta;
}

rtomo_status rtomo_fbp_interpolate_flats(rtomo_fbp *plan, rtomo_error *err)
{
    if (!plan)
        return rtomo_set_error(err, RTOMO_E_INVALID, "no plan given");
    rtomo_status st = check_state(plan, err);
    if (st != RTOMO_OK)
        return st;
    const int n_proj = plan->geom.n_proj;
    float *delta = flat_change(plan);
    float *weights = malloc(sizeof(float) * (size_t)n_proj);
    if (!delta || !weights) {
        free(delta);
        free(weights);
        return rtomo_set_error(err, RTOMO_E_NOMEM, "out of memory");
    }
    for (int p = 0; p < n_proj; p++) {
        const double t = n_proj > 1 ? (double)p / (n_proj - 1) : 0.0;
        weights[p] = plan->received[p] ? (float)(t * plan->proj_scale[p]) : 0.f;
    }
    st = plan->ops->sync(plan, err);
    if (st == RTOMO_OK)
        st = plan->ops->add_offsets(plan, delta, weights, err);
    if (st == RTOMO_OK)
        plan->flats_interpolated = 1;
    free(delta);
    free(weights);
    return st;
}
