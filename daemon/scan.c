/*
 * scan.c — the scan registry of rtomod: at most one active scan takes input;
 * scans that ended wait in the finishing list until every worker holding a
 * plan of theirs reported DONE.  Also the pieces both scan kinds share:
 * index bookkeeping, frame jobs, rejects.
 *
 * Why one active scan: a detector produces one stream at a time, and a
 * second scan_begin while one is active is almost always a client that lost
 * track (it is refused with bad_state; abort clears the way).
 */
#include "config.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rtomod.h"

/* ------------------------------------------------------------- seen ---- */

int rtomod_seen_init(rtomod_seen *s, int64_t capacity)
{
    s->capacity = capacity;
    s->highest = -1;
    s->count = 0;
    s->bits = calloc((size_t)(capacity + 7) / 8, 1);
    return s->bits ? 0 : -1;
}

void rtomod_seen_free(rtomod_seen *s)
{
    free(s->bits);
    s->bits = NULL;
}

static int bit_get(const rtomod_seen *s, int64_t index)
{
    int64_t slot = index % s->capacity;
    return (s->bits[slot / 8] >> (slot % 8)) & 1;
}

static void bit_set(rtomod_seen *s, int64_t index, int value)
{
    int64_t slot = index % s->capacity;
    unsigned char mask = (unsigned char)(1u << (slot % 8));
    if (value)
        s->bits[slot / 8] |= mask;
    else
        s->bits[slot / 8] &= (unsigned char)~mask;
}

int rtomod_seen_has(const rtomod_seen *s, int64_t index)
{
    if (index < 0 || index > s->highest || index <= s->highest - s->capacity)
        return 0;
    return bit_get(s, index);
}

int rtomod_seen_mark(rtomod_seen *s, int64_t index)
{
    if (index <= s->highest - s->capacity)
        return -1;
    if (index > s->highest) {
        /* Slide the window: slots that now stand for new indices are
         * cleared (at most one full turn). */
        int64_t from = s->highest + 1;
        if (index - from >= s->capacity)
            from = index - s->capacity + 1;
        for (int64_t i = from; i < index; i++)
            bit_set(s, i, 0);
        s->highest = index;
    } else if (bit_get(s, index)) {
        return 1;
    }
    bit_set(s, index, 1);
    s->count++;
    return 0;
}

/* ---------------------------------------------------------- rejects ---- */

void rtomod_reject(rtomod *d, const rtomo_reject_info *why, const char *scan,
                   int64_t index)
{
    d->counters.rejected++;
    if ((unsigned)why->reason < RTOMO_REJECT_COUNT)
        d->counters.rejects[why->reason]++;
    /* A flood of bad messages must not flood the log: after a burst, only
     * every 1000th reject is logged (all are counted and published). */
    uint64_t n = d->counters.rejected;
    rtomod_log_level level = n <= 100 || n % 1000 == 0 ? RTOMOD_LOG_WARN
                                                       : RTOMOD_LOG_DEBUG;
    rtomod_publish_event(&d->pub, level, "rejected", scan, index,
                         rtomo_reject_name(why->reason), "%s", why->message);
}

void rtomod_rejectf(rtomod *d, rtomo_reject reason, const char *scan,
                    int64_t index, const char *format, ...)
{
    rtomo_reject_info why;
    why.reason = reason;
    va_list ap;
    va_start(ap, format);
    vsnprintf(why.message, sizeof why.message, format, ap);
    va_end(ap);
    rtomod_reject(d, &why, scan, index);
}

/* ------------------------------------------------------- frame jobs ---- */

rtomod_job *rtomod_frame_job(const rtomod *d, rtomod_job_kind kind,
                             const rtomod_scan *scan,
                             const rtomo_frame_header *frame,
                             zmq_msg_t *payload)
{
    rtomod_job *job = rtomod_job_new(kind, scan->serial, scan->id);
    if (!job)
        return NULL;
    zmq_msg_init(&job->payload);
    zmq_msg_move(&job->payload, payload);
    job->has_payload = 1;
    job->dtype = frame->dtype;
    job->index = frame->index;
    job->angle = isnan(frame->angle) ? NAN : frame->angle * M_PI / 180.0;
    job->axis_shift = frame->axis_shift;
    job->t_input = d->t_received;
    return job;
}

/* ---------------------------------------------------------- registry ---- */

rtomod_scan *rtomod_scan_new(rtomod *d, rtomod_scan_kind kind, const char *id)
{
    rtomod_scan *scan = calloc(1, sizeof *scan);
    if (!scan)
        return NULL;
    scan->kind = kind;
    snprintf(scan->id, sizeof scan->id, "%s", id);
    scan->serial = ++d->next_serial;
    scan->t_begin = scan->t_last_input = rtomod_now();
    return scan;
}

void rtomod_scan_free(rtomod_scan *scan)
{
    if (!scan)
        return;
    rtomod_tomo_free(scan->tomo);
    rtomod_sbdx_free(scan->sbdx);
    free(scan);
}

rtomod_scan *rtomod_scan_find(rtomod *d, uint64_t serial)
{
    if (d->active && d->active->serial == serial)
        return d->active;
    for (rtomod_scan *s = d->finishing; s; s = s->next)
        if (s->serial == serial)
            return s;
    return NULL;
}

static void unlink_finishing(rtomod *d, rtomod_scan *scan)
{
    for (rtomod_scan **link = &d->finishing; *link; link = &(*link)->next) {
        if (*link == scan) {
            *link = scan->next;
            return;
        }
    }
}

static void complete(rtomod *d, rtomod_scan *scan)
{
    unlink_finishing(d, scan);
    rtomod_publish_event(&d->pub, RTOMOD_LOG_INFO, "scan_complete", scan->id,
                         -1, NULL, "%ld frames, %ld images published, %ld "
                         "frames dropped%s%s", scan->frames, scan->images,
                         scan->dropped, scan->failed ? "; failed: " : "",
                         scan->failed ? scan->failure : "");
    rtomod_scan_free(scan);
}

void rtomod_scan_finish(rtomod *d, int parts)
{
    rtomod_scan *scan = d->active;
    d->active = NULL;
    scan->parts_pending = parts;
    scan->next = d->finishing;
    d->finishing = scan;
    if (parts == 0)
        complete(d, scan);
}

void rtomod_scan_end_now(rtomod *d)
{
    ev_timer_stop(d->loop, &d->end_timer);
    d->active->end_pending = 0;
    if (d->active->kind == RTOMOD_SCAN_TOMO)
        rtomod_tomo_finish(d);
    else
        rtomod_sbdx_finish(d);
}

void rtomod_scan_request_end(rtomod *d, rtomod_scan *scan)
{
    scan->t_last_input = rtomod_now();
    if (rtomod_tomo_complete(scan) || scan->failed ||
        d->cfg.ingest.reorder_ms == 0) {
        rtomod_scan_end_now(d);
        return;
    }
    scan->end_pending = 1;
    ev_timer_set(&d->end_timer, d->cfg.ingest.reorder_ms / 1000.0, 0.0);
    ev_timer_start(d->loop, &d->end_timer);
}

/* Seconds the pending end must still wait for stragglers.  The wait is
 * reorder_ms of quiet for this scan while rtomod could read: when the work
 * queues are full, or messages wait unread, frames sent before the end may
 * still sit in ZeroMQ's and TCP's queues, held back by rtomod itself, and
 * the wait starts again.  (Under load the end may overtake thousands of
 * frames on other connections: a wall-clock wait would reject them.) */
static double end_wait_left(rtomod *d, const rtomod_scan *scan)
{
    double wait = d->cfg.ingest.reorder_ms / 1000.0;
    if (!rtomod_pool_has_room(&d->pool) || rtomod_ingest_has_waiting(d))
        return wait;
    return wait - (rtomod_now() - scan->t_last_input);
}

void rtomod_scan_end_timer(struct ev_loop *loop, ev_timer *timer, int revents)
{
    (void)revents;
    rtomod *d = timer->data;
    if (!d->active || !d->active->end_pending)
        return;
    double left = end_wait_left(d, d->active);
    if (left > 0) {
        ev_timer_set(timer, left, 0.0);
        ev_timer_start(loop, timer);
        return;
    }
    rtomod_scan_end_now(d);
}

void rtomod_scan_set_done(rtomod *d, rtomod_scan *scan,
                          const rtomod_result *r)
{
    if (scan->kind == RTOMOD_SCAN_TOMO)
        rtomod_tomo_set_done(d, scan, r);
    else
        rtomod_telemetry_latency(d, 1e3 * (rtomod_now() - r->t_input));
    d->telemetry.pending = 1;
}

void rtomod_scan_part_done(rtomod *d, rtomod_scan *scan)
{
    if (scan == d->active || --scan->parts_pending > 0)
        return;
    complete(d, scan);
}

void rtomod_scan_push(rtomod *d, rtomod_scan *scan, int w, rtomod_job *job)
{
    scan->workers |= 1u << w;
    rtomod_pool_push(&d->pool, w, job);
}

int rtomod_scan_close_plans(rtomod *d, rtomod_scan *scan, int abort)
{
    int queued = 0;
    for (int w = 0; w < d->pool.n; w++) {
        if (!(scan->workers & (1u << w)))
            continue;
        rtomod_job *job = rtomod_job_new(RTOMOD_JOB_CLOSE, scan->serial,
                                         scan->id);
        if (!job) {
            log_error("scan %s: out of memory closing its plan on worker %d",
                      scan->id, w);
            continue;
        }
        job->u.abort = abort;
        rtomod_pool_push(&d->pool, w, job);
        queued++;
    }
    return queued;
}

void rtomod_scan_abort(rtomod *d, rtomod_scan *scan, const char *why)
{
    long dropped = rtomod_pool_purge(&d->pool, scan->serial);
    d->counters.dropped += (uint64_t)dropped;
    scan->dropped += dropped;
    /* Results still on their way for this serial find no record and are
     * discarded; the CLOSE jobs free the plans. */
    rtomod_scan_close_plans(d, scan, 1);
    if (scan == d->active) {
        ev_timer_stop(d->loop, &d->end_timer);
        d->active = NULL;
    } else {
        unlink_finishing(d, scan);
    }
    rtomod_publish_event(&d->pub, RTOMOD_LOG_INFO, "scan_aborted", scan->id,
                         -1, "aborted", "%s; %ld frames accepted, %ld "
                         "dropped", why, scan->frames, scan->dropped);
    rtomod_scan_free(scan);
}

json_t *rtomod_scan_status(rtomod *d)
{
    rtomod_scan *scan = d->active;
    if (!scan)
        return json_null();
    json_t *out = json_pack("{s:s, s:s, s:b}", "id", scan->id, "kind",
                            scan->kind == RTOMOD_SCAN_TOMO ? "tomo" : "sbdx",
                            "failed", scan->failed);
    if (scan->failed)
        json_object_set_new(out, "failure", json_string(scan->failure));
    if (scan->kind == RTOMOD_SCAN_TOMO)
        rtomod_tomo_status(scan, out);
    else
        rtomod_sbdx_status(scan, out);
    return out;
}

static const char *kind_name(rtomod_scan_kind kind)
{
    return kind == RTOMOD_SCAN_TOMO ? "tomography scan" : "SBDX stream";
}

rtomod_scan *rtomod_scan_for_input(rtomod *d, const rtomo_ingest_msg *msg,
                                   rtomod_scan_kind kind)
{
    rtomod_scan *scan = d->active;
    int64_t index = msg->type == RTOMO_MSG_SCAN_END ||
                    msg->type == RTOMO_MSG_SBDX_END ? -1 : msg->frame.index;
    if (!scan || strcmp(scan->id, msg->scan) != 0) {
        if (scan)
            rtomod_rejectf(d, RTOMO_REJECT_UNKNOWN_SCAN, msg->scan, index,
                           "scan '%s' is not the active scan ('%s' is)",
                           msg->scan, scan->id);
        else
            rtomod_rejectf(d, RTOMO_REJECT_UNKNOWN_SCAN, msg->scan, index,
                           "scan '%s' is not active (no scan is)", msg->scan);
        return NULL;
    }
    if (scan->kind != kind) {
        rtomod_rejectf(d, RTOMO_REJECT_STATE, msg->scan, index,
                       "%s is a %s, not a %s", scan->id, kind_name(scan->kind),
                       kind_name(kind));
        return NULL;
    }
    if (scan->end_pending) {
        if (index < 0) {
            rtomod_rejectf(d, RTOMO_REJECT_STATE, msg->scan, -1,
                           "scan %s has already received its end", scan->id);
            return NULL;
        }
        return scan;            /* a straggler: welcome */
    }
    /* The end of a failed scan is welcome: it clears the way. */
    if (scan->failed && index >= 0) {
        rtomod_rejectf(d, RTOMO_REJECT_STATE, msg->scan, index,
                       "scan %s failed: %s", scan->id, scan->failure);
        return NULL;
    }
    return scan;
}

int rtomod_scan_may_begin(rtomod *d, const rtomo_ingest_msg *msg)
{
    if (d->phase != RTOMOD_RUNNING) {
        rtomod_rejectf(d, RTOMO_REJECT_STATE, msg->scan, -1,
                       "rtomod is shutting down and starts no new scan");
        return 0;
    }
    rtomod_scan *scan = d->active;
    /* The previous scan's end came: its stragglers have had their chance. */
    if (scan && scan->end_pending) {
        rtomod_scan_end_now(d);
        scan = NULL;
    }
    if (scan && scan->failed) {
        rtomod_scan_abort(d, scan, "replaced by a new scan after failing");
        scan = NULL;
    }
    if (scan) {
        rtomod_rejectf(d, RTOMO_REJECT_STATE, msg->scan, -1,
                       "%s '%s' is active: end or abort it before "
                       "beginning '%s'", kind_name(scan->kind), scan->id,
                       msg->scan);
        return 0;
    }
    return 1;
}

void rtomod_scan_activate(rtomod *d, rtomod_scan *scan)
{
    d->active = scan;
    rtomod_publish_event(&d->pub, RTOMOD_LOG_INFO, "scan_started", scan->id,
                         -1, NULL, "%s started", kind_name(scan->kind));
    rtomod_ingest_replay_early(d, scan->id);
}
