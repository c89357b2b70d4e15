/*
 * fbp_stream.c — the backend-neutral front end of streaming
 * back-projection (rtomo_fbp_stream_*, see rtomo_engine.h) and of clearing
 * a projection slot.
 *
 * The front end owns the queue: slots and their weights wait here until a
 * chunk of rtomo_fbp_stream_chunk() is full (or a flush, a read, or the
 * overwrite of a queued slot), or until an asynchronous backend's device
 * is idle, and are then handed to the backend's stream_apply in one call
 * (near a scan's end an idle device gets only part of them: early_share).  Each queued slot is flagged, so that
 * rtomo_fbp_stream_settle, which the calls that overwrite slots make
 * first, knows whether the queue reads the slot about to change.
 */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"

/* A partial chunk of at least this many slots goes to an asynchronous
 * backend at once when its device has nothing left to do: chunks are large
 * for throughput (the read-modify-write of every resident slice per
 * chunk), but a device that keeps up should not let projections wait, or
 * they all remain at the end of the scan.  While the device is busy the
 * queue grows to a full chunk. */
#define STREAM_EARLY_SLOTS 16

/* The ROI a geometry's slices have, its defaults filled in. */
static void geometry_roi(const rtomo_fbp_geometry *g, int roi[4])
{
    const int size = g->slice_size ? g->slice_size : rtomo_fbp_virtual_width(g);
    roi[0] = g->roi_x;
    roi[1] = g->roi_y;
    roi[2] = g->roi_width ? g->roi_width : size;
    roi[3] = g->roi_height ? g->roi_height : size;
}

size_t rtomo_fbp_stream_bytes(const rtomo_fbp_geometry *g, int n_rows,
                              rtomo_backend backend)
{
    int roi[4];
    geometry_roi(g, roi);
    /* The slices, and on a GPU what a chunk holds on the side: its packed
     * projections, at most 64 MiB per device (STREAM_POOL_BYTES in
     * cuda_fbp_stream.cu; the CPU backend packs nothing). */
    const size_t slices = (size_t)roi[2] * (size_t)roi[3] * sizeof(float) *
                          (size_t)(n_rows > 0 ? n_rows : 0);
    const size_t chunk = backend == RTOMO_BACKEND_CUDA ? (size_t)64 << 20 : 0;
    return slices + chunk;
}

static int stream_is_open(const rtomo_fbp *plan, rtomo_error *err)
{
    if (plan->stream_n > 0)
        return 1;
    rtomo_set_error(err, RTOMO_E_STATE, "no resident slices are open "
                    "(rtomo_fbp_stream_open)");
    return 0;
}

static void free_stream(rtomo_fbp *plan)
{
    free(plan->stream_rows);
    free(plan->queue_slot);
    free(plan->queue_weight);
    free(plan->queued);
    plan->stream_rows = NULL;
    plan->queue_slot = NULL;
    plan->queue_weight = NULL;
    plan->queued = NULL;
    plan->stream_n = plan->queue_n = plan->queue_capacity = 0;
}

/* The kept-row offsets of rows[], checked: kept, ascending, distinct. */
static rtomo_status kept_offsets(const rtomo_fbp *plan, const int *rows, int n,
                                 int *kept, rtomo_error *err)
{
    const rtomo_fbp_geometry *g = &plan->geom;
    for (int i = 0; i < n; i++) {
        if (rows[i] < g->row_first || rows[i] >= g->row_first + g->row_count)
            return rtomo_set_error(err, RTOMO_E_RANGE,
                                   "detector row %d is not among the kept "
                                   "rows [%d, %d)", rows[i], g->row_first,
                                   g->row_first + g->row_count);
        if (i > 0 && rows[i] <= rows[i - 1])
            return rtomo_set_error(err, RTOMO_E_INVALID,
                                   "resident rows must be ascending and "
                                   "distinct (row %d after %d)", rows[i],
                                   rows[i - 1]);
        kept[i] = rows[i] - g->row_first;
    }
    return RTOMO_OK;
}

static rtomo_status allocate_stream(rtomo_fbp *plan, const int *rows, int n,
                                    rtomo_error *err)
{
    int chunk = plan->ops->stream_chunk(plan);
    plan->queue_capacity = chunk > 0 ? chunk : 1;
    plan->stream_rows = malloc(sizeof(int) * (size_t)n);
    plan->queue_slot = malloc(sizeof(int) * (size_t)plan->queue_capacity);
    plan->queue_weight = malloc(sizeof(float) * (size_t)plan->queue_capacity);
    plan->queued = calloc((size_t)plan->geom.n_proj, 1);
    if (!plan->stream_rows || !plan->queue_slot || !plan->queue_weight ||
        !plan->queued)
        return rtomo_set_error(err, RTOMO_E_NOMEM,
                               "out of memory for the streaming queue");
    memcpy(plan->stream_rows, rows, sizeof(int) * (size_t)n);
    return RTOMO_OK;
}

rtomo_status rtomo_fbp_stream_open(rtomo_fbp *plan, const int *rows,
                                   int n_rows, rtomo_error *err)
{
    if (!rows || n_rows < 1)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "resident slices need at least one row");
    if (plan->stream_n > 0)
        return rtomo_set_error(err, RTOMO_E_STATE,
                               "resident slices are open already");
    int *kept = malloc(sizeof(int) * (size_t)n_rows);
    if (!kept)
        return rtomo_set_error(err, RTOMO_E_NOMEM, "out of memory");
    rtomo_status st = kept_offsets(plan, rows, n_rows, kept, err);
    if (st == RTOMO_OK)
        st = allocate_stream(plan, rows, n_rows, err);
    if (st == RTOMO_OK) {
        geometry_roi(&plan->geom, plan->stream_roi);
        plan->stream_interp = plan->geom.interp;
        st = plan->ops->stream_open(plan, kept, n_rows, err);
    }
    free(kept);
    if (st != RTOMO_OK) {
        free_stream(plan);
        return st;
    }
    plan->stream_n = n_rows;
    plan->stream_sliding = 0;
    return RTOMO_OK;
}

int rtomo_fbp_stream_rows(const rtomo_fbp *plan) { return plan->stream_n; }

void rtomo_fbp_stream_roi(const rtomo_fbp *plan, int roi[4])
{
    memcpy(roi, plan->stream_roi, sizeof plan->stream_roi);
}

int rtomo_fbp_stream_chunk(const rtomo_fbp *plan)
{
    return plan->stream_n > 0 ? plan->queue_capacity
                              : plan->ops->stream_chunk(plan);
}

/* Hand the first n queued slots to the backend; the rest stay queued, in
 * order. */
static rtomo_status flush_first(rtomo_fbp *plan, int n, rtomo_error *err)
{
    rtomo_status st = plan->ops->stream_apply(plan, plan->queue_slot,
                                              plan->queue_weight, n, err);
    /* Applied or failed, those slots are spent: a failed chunk is reported
     * once, not retried into slices it may have half updated. */
    for (int i = 0; i < n; i++)
        plan->queued[plan->queue_slot[i]] = 0;
    plan->queue_n -= n;
    memmove(plan->queue_slot, plan->queue_slot + n,
            sizeof(int) * (size_t)plan->queue_n);
    memmove(plan->queue_weight, plan->queue_weight + n,
            sizeof(float) * (size_t)plan->queue_n);
    if (st == RTOMO_OK)
        plan->stats.updates += (double)n * plan->stream_n *
                               plan->stream_roi[2] * plan->stream_roi[3];
    return st;
}

rtomo_status rtomo_fbp_stream_flush(rtomo_fbp *plan, rtomo_error *err)
{
    if (plan->stream_n == 0 || plan->queue_n == 0)
        return RTOMO_OK;
    return flush_first(plan, plan->queue_n, err);
}

/*
 * How many of the queued slots an idle device gets now.  All of them,
 * except near the end of a scan whose device has fallen behind: once the
 * queue holds more than the R projections still to come, a chunk of all
 * of it would still run when the last frame lands, and every slice waits
 * for it; the read after the last frame (which flushes the rest as one
 * chunk, group by group) could then start only when it ends.  So the
 * device gets R (at least STREAM_EARLY_SLOTS) now: about what it can do
 * while those R arrive when it keeps about pace with them.  What remains
 * is one final chunk that runs slab after slab, so the first slabs leave
 * the device while the last are still added to.  Measured on an H100
 * (docs/PERFORMANCE.md, run 58: a 2048^3 scan through rtomod, half
 * precision, nearest): last frame -> last slice 1.41 and 1.73 s before,
 * 1.08 and 1.03 s with this rule, in the same run.
 * A sliding window never ends, and its scans keep their chunks whole.
 */
static int early_share(const rtomo_fbp *plan)
{
    const int still_to_come = plan->geom.n_proj - plan->n_received;
    if (plan->stream_sliding || still_to_come <= 0 ||
        plan->queue_n <= still_to_come)
        return plan->queue_n;
    return still_to_come > STREAM_EARLY_SLOTS ? still_to_come
                                              : STREAM_EARLY_SLOTS;
}

rtomo_status rtomo_fbp_stream_queue(rtomo_fbp *plan, int index, float weight,
                                    rtomo_error *err)
{
    if (!stream_is_open(plan, err))
        return RTOMO_E_STATE;
    if (index < 0 || index >= plan->geom.n_proj)
        return rtomo_set_error(err, RTOMO_E_RANGE,
                               "projection index %d is outside [0, %d)", index,
                               plan->geom.n_proj);
    if (weight != 1.0f && weight != -1.0f)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "a streamed projection's weight is +1 or -1, "
                               "not %g", (double)weight);
    /* Nothing was ever stored: the slot holds zeros everywhere. */
    if (!plan->projections_started)
        return RTOMO_OK;
    plan->queue_slot[plan->queue_n] = index;
    plan->queue_weight[plan->queue_n] = weight;
    plan->queue_n++;
    plan->queued[index] = 1;
    if (weight < 0.0f)
        plan->stream_sliding = 1;
    if (plan->queue_n == plan->queue_capacity)
        return rtomo_fbp_stream_flush(plan, err);
    if (plan->queue_n >= STREAM_EARLY_SLOTS && plan->ops->stream_idle &&
        plan->ops->stream_idle(plan))
        return flush_first(plan, early_share(plan), err);
    return RTOMO_OK;
}

rtomo_status rtomo_fbp_stream_settle(rtomo_fbp *plan, int index,
                                     rtomo_error *err)
{
    if (plan->stream_n == 0 || plan->queue_n == 0 ||
        (index >= 0 && !plan->queued[index]))
        return RTOMO_OK;
    return rtomo_fbp_stream_flush(plan, err);
}

/* The position of detector row `row` among the resident rows, or -1. */
static int stream_position(const rtomo_fbp *plan, int row)
{
    int lo = 0, hi = plan->stream_n - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        if (plan->stream_rows[mid] == row)
            return mid;
        if (plan->stream_rows[mid] < row)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

rtomo_status rtomo_fbp_stream_read(rtomo_fbp *plan, const int *rows, int n,
                                   float *out, rtomo_error *err)
{
    return rtomo_fbp_stream_read_stats(plan, rows, n, out, NULL, err);
}

rtomo_status rtomo_fbp_stream_read_stats(rtomo_fbp *plan, const int *rows,
                                         int n, float *out, double *stats,
                                         rtomo_error *err)
{
    if (!stream_is_open(plan, err))
        return RTOMO_E_STATE;
    if (!rows || n < 1 || !out)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "a read needs at least one row and an output "
                               "buffer");
    int *positions = malloc(sizeof(int) * (size_t)n);
    if (!positions)
        return rtomo_set_error(err, RTOMO_E_NOMEM, "out of memory");
    rtomo_status st = RTOMO_OK;
    for (int i = 0; i < n && st == RTOMO_OK; i++)
        if ((positions[i] = stream_position(plan, rows[i])) < 0)
            st = rtomo_set_error(err, RTOMO_E_RANGE,
                                 "detector row %d has no resident slice",
                                 rows[i]);
    double t0 = rtomo_now_seconds();
    if (st == RTOMO_OK)
        st = rtomo_fbp_stream_flush(plan, err);
    if (st == RTOMO_OK)
        st = plan->ops->stream_read(plan, positions, n, out, stats, err);
    if (st == RTOMO_OK) {
        plan->stats.reconstruct_seconds += rtomo_now_seconds() - t0;
        plan->stats.slices_reconstructed += n;
    }
    free(positions);
    return st;
}

rtomo_status rtomo_fbp_stream_reset(rtomo_fbp *plan, rtomo_error *err)
{
    if (!stream_is_open(plan, err))
        return RTOMO_E_STATE;
    for (int i = 0; i < plan->queue_n; i++)
        plan->queued[plan->queue_slot[i]] = 0;
    plan->queue_n = 0;
    plan->stream_sliding = 0;
    return plan->ops->stream_reset(plan, err);
}

void rtomo_fbp_stream_close(rtomo_fbp *plan)
{
    if (!plan || plan->stream_n == 0)
        return;
    plan->ops->stream_close(plan);
    free_stream(plan);
}

rtomo_status rtomo_fbp_clear_projection(rtomo_fbp *plan, int index,
                                        rtomo_error *err)
{
    if (index < 0 || index >= plan->geom.n_proj)
        return rtomo_set_error(err, RTOMO_E_RANGE,
                               "projection index %d is outside [0, %d)", index,
                               plan->geom.n_proj);
    if (plan->received[index]) {
        rtomo_fbp_rings_note_spoil(plan, index);
        plan->received[index] = 0;
        plan->n_received--;
    }
    if (!plan->projections_started)
        return RTOMO_OK;
    rtomo_status st = rtomo_fbp_stream_settle(plan, index, err);
    return st != RTOMO_OK ? st : plan->ops->clear_projection(plan, index, err);
}

/* ------------------------------------------------------------ collect ---- */

int rtomo_fbp_stream_has(const rtomo_fbp *plan, int row)
{
    const rtomo_fbp_geometry *g = &plan->geom;
    return plan->stream_n > 0 && g->roi_x == plan->stream_roi[0] &&
           g->roi_y == plan->stream_roi[1] &&
           g->roi_width == plan->stream_roi[2] &&
           g->roi_height == plan->stream_roi[3] &&
           g->interp == plan->stream_interp &&
           stream_position(plan, row) >= 0;
}

rtomo_status rtomo_fbp_stream_collect(rtomo_fbp *plan, const int *rows, int n,
                                      float *out, double *stats,
                                      rtomo_error *err)
{
    if (!rows || n < 1 || !out)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "collect needs at least one row and an output "
                               "buffer");
    const size_t image = (size_t)plan->geom.roi_width *
                         (size_t)plan->geom.roi_height;
    rtomo_status st = RTOMO_OK;
    /* Runs of rows that go the same way, each in one call. */
    for (int first = 0; first < n && st == RTOMO_OK;) {
        const int resident = rtomo_fbp_stream_has(plan, rows[first]);
        int end = first + 1;
        while (end < n && rtomo_fbp_stream_has(plan, rows[end]) == resident)
            end++;
        float *dst = out + (size_t)first * image;
        double *dst_stats = stats ? stats + 3 * (size_t)first : NULL;
        st = resident ? rtomo_fbp_stream_read_stats(plan, rows + first,
                                                    end - first, dst,
                                                    dst_stats, err)
                      : rtomo_fbp_reconstruct(plan, rows + first, end - first,
                                              dst, err);
        for (int i = first; !resident && stats && i < end; i++)
            stats[3 * i] = stats[3 * i + 1] = stats[3 * i + 2] = NAN;
        first = end;
    }
    return st;
}
