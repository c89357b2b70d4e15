/*
 * fbp_window.c — sliding windows over a continuous stream of projections
 * (rtomo_fbp_window_*, see rtomo_engine.h): which slot of the plan's ring
 * each projection takes, which projections leave the window as new ones
 * arrive, their addition to and subtraction from the resident slices, the
 * periodic exact recomputation that bounds float drift, and the clearing
 * of slots that left, for reads from scratch.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"

/* What a slot of the ring holds. */
enum {
    SLOT_EMPTY = 0,     /* zeros */
    SLOT_IN,            /* a projection of the window */
    SLOT_LEFT           /* a projection that left; its data still there */
};

struct rtomo_fbp_window {
    rtomo_fbp *plan;
    int window, ring;           /* window_proj, n_proj */
    int resident;               /* slices are resident and incremental */
    int refresh;                /* reads between recomputations, 0 = never */
    long reads, refreshes;
    int64_t highest;            /* highest index so far, -1 = none */
    int64_t *index;             /* ring: the projection in each slot */
    unsigned char *state;       /* ring: SLOT_* */
    int n_left;                 /* slots in SLOT_LEFT */
};

int rtomo_fbp_window_slots(int window)
{
    return window + RTOMO_FBP_WINDOW_MARGIN;
}

rtomo_fbp_window *rtomo_fbp_window_create(rtomo_fbp *plan, const int *rows,
                                          int n_rows, int refresh,
                                          rtomo_error *resident_err,
                                          rtomo_error *err)
{
    const rtomo_fbp_geometry *g = &plan->geom;
    rtomo_clear_error(resident_err);
    if (g->n_proj < rtomo_fbp_window_slots(g->window_proj) || refresh < 0) {
        rtomo_set_error(err, RTOMO_E_INVALID, "a window of %d projections "
                        "needs a plan of %d slots (it has %d) and a refresh "
                        "period >= 0", g->window_proj,
                        rtomo_fbp_window_slots(g->window_proj), g->n_proj);
        return NULL;
    }
    rtomo_fbp_window *w = calloc(1, sizeof *w);
    if (w) {
        w->index = malloc(sizeof(int64_t) * (size_t)g->n_proj);
        w->state = calloc((size_t)g->n_proj, 1);
    }
    if (!w || !w->index || !w->state) {
        rtomo_fbp_window_destroy(w);
        rtomo_set_error(err, RTOMO_E_NOMEM, "out of memory for a window");
        return NULL;
    }
    w->plan = plan;
    w->window = g->window_proj;
    w->ring = g->n_proj;
    w->refresh = refresh;
    w->highest = -1;
    rtomo_error why;
    if (n_rows > 0) {
        w->resident = rtomo_fbp_stream_open(plan, rows, n_rows, &why) ==
                      RTOMO_OK;
        if (!w->resident && resident_err)
            *resident_err = why;
    }
    return w;
}

void rtomo_fbp_window_destroy(rtomo_fbp_window *w)
{
    if (!w)
        return;
    if (w->resident)
        rtomo_fbp_stream_close(w->plan);
    free(w->index);
    free(w->state);
    free(w);
}

int rtomo_fbp_window_resident(const rtomo_fbp_window *w) { return w->resident; }

long rtomo_fbp_window_refreshes(const rtomo_fbp_window *w)
{
    return w->refreshes;
}

/* Slot `slot` leaves the window: subtracted from the resident slices now
 * (queued), cleared only when a read from scratch needs it. */
static rtomo_status leave(rtomo_fbp_window *w, int slot, rtomo_error *err)
{
    w->state[slot] = SLOT_LEFT;
    w->n_left++;
    return w->resident ? rtomo_fbp_stream_queue(w->plan, slot, -1.0f, err)
                       : RTOMO_OK;
}

/* Every projection with index below `lowest` leaves. */
static rtomo_status leave_below(rtomo_fbp_window *w, int64_t lowest,
                                rtomo_error *err)
{
    rtomo_status st = RTOMO_OK;
    for (int s = 0; s < w->ring && st == RTOMO_OK; s++)
        if (w->state[s] == SLOT_IN && w->index[s] < lowest)
            st = leave(w, s, err);
    return st;
}

rtomo_status rtomo_fbp_window_add(rtomo_fbp_window *w, int64_t index,
                                  const void *frame, rtomo_dtype dtype,
                                  double angle, double axis_shift,
                                  rtomo_error *err)
{
    if (index < 0 || (w->highest >= 0 && index <= w->highest - w->window))
        return rtomo_set_error(err, RTOMO_E_RANGE,
                               "projection %lld is outside the window of the "
                               "%d latest (highest %lld)", (long long)index,
                               w->window, (long long)w->highest);
    const int slot = (int)(index % w->ring);
    if (w->state[slot] == SLOT_IN && w->index[slot] == index)
        return rtomo_set_error(err, RTOMO_E_STATE,
                               "projection %lld is in the window already",
                               (long long)index);
    rtomo_status st;
    if (index > w->highest) {
        if ((st = leave_below(w, index - w->window + 1, err)) != RTOMO_OK)
            return st;
        w->highest = index;
    }
    /* The slot's previous projection left long ago (the ring is larger
     * than the window); the engine subtracts it before overwriting. */
    st = rtomo_fbp_add_projection(w->plan, slot, frame, dtype, angle,
                                  axis_shift, err);
    if (st != RTOMO_OK)
        return st;
    if (w->state[slot] == SLOT_LEFT)
        w->n_left--;
    w->state[slot] = SLOT_IN;
    w->index[slot] = index;
    return w->resident ? rtomo_fbp_stream_queue(w->plan, slot, 1.0f, err)
                       : RTOMO_OK;
}

int rtomo_fbp_window_slot_list(const rtomo_fbp_window *w, int *slots)
{
    int n = 0;
    for (int s = 0; s < w->ring; s++)
        if (w->state[s] == SLOT_IN) {
            if (slots)
                slots[n] = s;
            n++;
        }
    return n;
}

/* Zero the slots that left, so that a read from scratch (which sums every
 * slot) sees the window alone.  Their subtraction, if queued, runs first. */
static rtomo_status clear_left(rtomo_fbp_window *w, rtomo_error *err)
{
    for (int s = 0; s < w->ring && w->n_left > 0; s++) {
        if (w->state[s] != SLOT_LEFT)
            continue;
        rtomo_status st = rtomo_fbp_clear_projection(w->plan, s, err);
        if (st != RTOMO_OK)
            return st;
        w->state[s] = SLOT_EMPTY;
        w->n_left--;
    }
    return RTOMO_OK;
}

/* Recompute the resident slices from the window's projections alone. */
static rtomo_status recompute(rtomo_fbp_window *w, rtomo_error *err)
{
    rtomo_status st = rtomo_fbp_stream_reset(w->plan, err);
    for (int s = 0; s < w->ring && st == RTOMO_OK; s++)
        if (w->state[s] == SLOT_IN)
            st = rtomo_fbp_stream_queue(w->plan, s, 1.0f, err);
    if (st == RTOMO_OK)
        w->refreshes++;
    return st;
}

rtomo_status rtomo_fbp_window_read(rtomo_fbp_window *w, const int *rows,
                                   int n, float *out, double *stats,
                                   rtomo_error *err)
{
    rtomo_status st = RTOMO_OK;
    int from_scratch = 0;
    for (int i = 0; i < n && !from_scratch; i++)
        from_scratch = !rtomo_fbp_stream_has(w->plan, rows[i]);
    if (from_scratch && w->resident)
        st = rtomo_fbp_stream_flush(w->plan, err);
    if (st == RTOMO_OK && from_scratch)
        st = clear_left(w, err);
    if (st == RTOMO_OK)
        st = rtomo_fbp_stream_collect(w->plan, rows, n, out, stats, err);
    if (st != RTOMO_OK)
        return st;
    /* The recomputation is queued behind this read (on the GPU it runs
     * while the next projections arrive), not in front of it. */
    w->reads++;
    if (w->resident && w->refresh > 0 && w->reads % w->refresh == 0)
        st = recompute(w, err);
    return st;
}

rtomo_status rtomo_fbp_window_set_axis(rtomo_fbp_window *w, double axis,
                                       rtomo_error *err)
{
    rtomo_status st = rtomo_fbp_set_axis(w->plan, axis, err);
    if (st == RTOMO_OK && w->resident)
        st = recompute(w, err);
    return st;
}
