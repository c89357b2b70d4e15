/*
 * fbp_rings.c — the backend-neutral part of ring (detector stripe)
 * removal: rtomo_fbp_remove_rings with its state checks, the bookkeeping of
 * which projections the backends' column sums hold, and the angular
 * sector of a projection.  The estimator that turns a row's sector means
 * into stripe offsets is fbp_rings_estimate.c (see rtomo_rings in
 * rtomo_engine.h for the method).
 *
 * The backends sum every kept row's line integrals per bin as projections
 * are fed, before filtering.  A slot fed twice would be summed twice, and
 * a cleared or set_filtered slot would be summed although its data left,
 * and nothing unfiltered is kept to take it back out; so ring removal needs
 * every projection fed once (the scan mode, not a continuous stream's ring
 * of slots), and remove_rings refuses with RTOMO_E_STATE, naming the slot,
 * once that is broken.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"

void rtomo_fbp_rings_note_feed(rtomo_fbp *plan, int index)
{
    plan->rings_counts[rtomo_fbp_rings_sector(plan, index)]++;
    if (plan->received[index] && !plan->rings_spoilt)
        plan->rings_spoilt = 1 + index;
    plan->rings_fresh++;
}

void rtomo_fbp_rings_note_spoil(rtomo_fbp *plan, int index)
{
    if (!plan->rings_spoilt)
        plan->rings_spoilt = 1 + (index < 0 ? 0 : index);
}

/* ------------------------------------------------------------ sectors ---- */

int rtomo_fbp_rings_sector(const rtomo_fbp *plan, int index)
{
    double a = fmod(plan->angles[index], M_PI);
    if (a < 0)
        a += M_PI;
    int s = (int)(a / M_PI * RTOMO_RINGS_SECTORS);
    return s < 0 ? 0 : s >= RTOMO_RINGS_SECTORS ? RTOMO_RINGS_SECTORS - 1 : s;
}

/* ---------------------------------------------------------- the call ---- */

static rtomo_status check_state(const rtomo_fbp *plan, rtomo_error *err)
{
    if (plan->stream_n > 0)
        return rtomo_set_error(err, RTOMO_E_STATE,
                               "ring removal corrects the held projections, "
                               "which the open resident slices have already "
                               "summed: close them first");
    if (plan->rings_spoilt)
        return rtomo_set_error(err, RTOMO_E_STATE,
                               "ring removal needs every projection fed "
                               "once: projection slot %d was fed again, "
                               "cleared or set directly",
                               plan->rings_spoilt - 1);
    if (plan->rings_fresh == 0)
        return rtomo_set_error(err, RTOMO_E_STATE,
                               "rings already removed: no projection was "
                               "fed since");
    if (!plan->ops->remove_rings)
        return rtomo_set_error(err, RTOMO_E_UNAVAILABLE,
                               "the %s backend cannot remove rings",
                               plan->ops->name);
    return RTOMO_OK;
}

rtomo_status rtomo_fbp_remove_rings(rtomo_fbp *plan, rtomo_error *err)
{
    if (!plan)
        return rtomo_set_error(err, RTOMO_E_INVALID, "no plan given");
    if (plan->geom.rings == RTOMO_RINGS_OFF)
        return RTOMO_OK;
    rtomo_status st = check_state(plan, err);
    if (st != RTOMO_OK)
        return st;
    const int n = plan->geom.n_proj;
    if (!plan->rings_done && !(plan->rings_done = calloc((size_t)n, 1)))
        return rtomo_set_error(err, RTOMO_E_NOMEM, "out of memory");
    if ((st = plan->ops->sync(plan, err)) != RTOMO_OK ||
        (st = plan->ops->remove_rings(plan, err)) != RTOMO_OK)
        return st;
    for (int p = 0; p < n; p++)
        plan->rings_done[p] |= plan->received[p];
    plan->rings_fresh = 0;
    return RTOMO_OK;
}
