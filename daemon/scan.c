/*
 * scan.c — the scan registry of rtomod: the live scans, acquiring (taking
 * input) or finishing (ended, waiting until every worker holding a plan of
 * theirs reported DONE), and their way out into the history.  Also the
 * pieces both scan kinds share: index bookkeeping, frame jobs, rejects,
 * the end's wait for stragglers and the idle timeout.
 *
 * Why several scans at once: a camera starts its next scan as soon as the
 * last one's frames are sent, often over a new connection, while rtomod
 * still reads the last one's frames (ZeroMQ interleaves connections) or
 * reconstructs them.  Refusing that begin lost whole scans.  Each scan has
 * its own plans on the workers, admitted against the memory budgets
 * (budget.c), up to scans.max at a time.
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

void rtomod_seen_unmark(rtomod_seen *s, int64_t index)
{
    if (rtomod_seen_has(s, index)) {
        bit_set(s, index, 0);
        s->count--;
    }
}

/* ---------------------------------------------------------- rejects ---- */

rtomod_outcome *rtomod_outcome_for(rtomod *d, const char *id)
{
    rtomod_outcome *o = rtomod_history_find(&d->history, id);
    return o ? o : rtomod_history_add(&d->history, id);
}

/* Count a reject on the scan it names: a live scan, else that id's record
 * in the history (a refused begin makes a new one). */
static void count_reject(rtomod *d, const rtomo_reject_info *why,
                         const char *id)
{
    rtomod_scan *scan = rtomod_scan_named(d, id);
    if (scan) {
        scan->rejected++;
        if ((unsigned)why->reason < RTOMO_REJECT_COUNT)
            scan->rejects[why->reason]++;
        return;
    }
    rtomod_outcome *o;
    if (d->handling_begin) {
        d->counters.scans_refused++;
        o = rtomod_history_add(&d->history, id);
        o->state = "refused";
        snprintf(o->code, sizeof o->code, "%s", rtomo_reject_name(why->reason));
        snprintf(o->reason, sizeof o->reason, "%s", why->message);
    } else {
        o = rtomod_outcome_for(d, id);
    }
    rtomod_outcome_count_reject(o, why->reason);
}

void rtomod_reject(rtomod *d, const rtomo_reject_info *why, const char *scan,
                   int64_t index)
{
    d->counters.rejected++;
    if ((unsigned)why->reason < RTOMO_REJECT_COUNT)
        d->counters.rejects[why->reason]++;
    if (scan && *scan)
        count_reject(d, why, scan);
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

/* ----------------------------------------------------------- method ---- */

void rtomod_scan_method(const rtomod_config *cfg, const rtomo_scan_spec *spec,
                        rtomo_method method, rtomo_method_settings *m)
{
    const rtomo_method_settings *dflt = &cfg->reconstruction.method;
    const unsigned has = spec->given;
    *m = spec->method;
    if (!(has & RTOMO_SPEC_HAS_METHOD))
        m->method = method;
    if (!(has & RTOMO_SPEC_HAS_ITERATIONS))
        m->iterations = dflt->iterations;
    if (!(has & RTOMO_SPEC_HAS_PUBLISH_EVERY))
        m->publish_every = dflt->publish_every;
    if (!(has & RTOMO_SPEC_HAS_TOLERANCE))
        m->tolerance = dflt->tolerance;
    if (!(has & RTOMO_SPEC_HAS_WARM_START))
        m->warm_start = dflt->warm_start;
    if (!(has & RTOMO_SPEC_HAS_NONNEGATIVE))
        m->nonnegative = dflt->nonnegative && m->method == RTOMO_METHOD_SIRT;
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

static void on_end_timer(struct ev_loop *loop, ev_timer *timer, int revents);
static void on_idle_timer(struct ev_loop *loop, ev_timer *timer, int revents);

rtomod_scan *rtomod_scan_new(rtomod *d, rtomod_scan_kind kind, const char *id)
{
    rtomod_scan *scan = calloc(1, sizeof *scan);
    if (!scan)
        return NULL;
    scan->d = d;
    scan->kind = kind;
    snprintf(scan->id, sizeof scan->id, "%s", id);
    scan->serial = ++d->next_serial;
    scan->t_begin = scan->t_last_input = rtomod_now();
    ev_init(&scan->end_timer, on_end_timer);
    ev_init(&scan->idle_timer, on_idle_timer);
    scan->end_timer.data = scan->idle_timer.data = scan;
    return scan;
}

void rtomod_scan_free(rtomod_scan *scan)
{
    if (!scan)
        return;
    if (scan->d && scan->d->loop) {
        ev_timer_stop(scan->d->loop, &scan->end_timer);
        ev_timer_stop(scan->d->loop, &scan->idle_timer);
    }
    if (scan->d)
        rtomod_budget_release(&scan->d->budget, &scan->claim);
    rtomod_tomo_free(scan->tomo);
    rtomod_cone_free(scan->cone);
    rtomod_sbdx_free(scan->sbdx);
    free(scan);
}

rtomod_scan *rtomod_scan_find(rtomod *d, uint64_t serial)
{
    for (rtomod_scan *s = d->scans; s; s = s->next)
        if (s->serial == serial)
            return s;
    return NULL;
}

rtomod_scan *rtomod_scan_acquiring(rtomod *d, const char *id)
{
    for (rtomod_scan *s = d->scans; s; s = s->next)
        if (s->phase == RTOMOD_SCAN_ACQUIRING && strcmp(s->id, id) == 0)
            return s;
    return NULL;
}

rtomod_scan *rtomod_scan_named(rtomod *d, const char *id)
{
    rtomod_scan *found = NULL;
    for (rtomod_scan *s = d->scans; s; s = s->next)
        if (strcmp(s->id, id) == 0)
            found = s;          /* the newest */
    return found;
}

int rtomod_scan_count(rtomod *d, rtomod_scan_phase phase)
{
    int n = 0;
    for (rtomod_scan *s = d->scans; s; s = s->next)
        n += s->phase == phase;
    return n;
}

static void unlink_scan(rtomod *d, rtomod_scan *scan)
{
    for (rtomod_scan **link = &d->scans; *link; link = &(*link)->next) {
        if (*link == scan) {
            *link = scan->next;
            return;
        }
    }
}

static const char *kind_short(rtomod_scan_kind kind)
{
    return kind == RTOMOD_SCAN_TOMO ? "tomo" : "sbdx";
}

void rtomod_scan_outcome(const rtomod_scan *scan, rtomod_outcome *out)
{
    memset(out, 0, sizeof *out);
    snprintf(out->id, sizeof out->id, "%s", scan->id);
    out->kind = kind_short(scan->kind);
    out->state = scan->phase == RTOMOD_SCAN_FINISHING ? "reconstructing"
                 : scan->end_pending                   ? "ending"
                                                       : "acquiring";
    out->frames = scan->frames;
    out->dropped = scan->dropped;
    out->missing = scan->kind == RTOMOD_SCAN_TOMO
                       ? rtomod_tomo_missing(scan) : 0;
    out->images = scan->images;
    out->rejected = scan->rejected;
    memcpy(out->rejects, scan->rejects, sizeof out->rejects);
    out->incomplete = scan->incomplete;
    snprintf(out->code, sizeof out->code, "%s",
             scan->failed ? "failed" : scan->end_code);
    snprintf(out->reason, sizeof out->reason, "%s", scan->failure);
}

/* The scan leaves: its outcome goes to the history, its record is freed. */
static void retire(rtomod *d, rtomod_scan *scan, const char *state,
                   const char *code, const char *why)
{
    unlink_scan(d, scan);
    rtomod_outcome *o = rtomod_history_add(&d->history, scan->id);
    rtomod_scan_outcome(scan, o);
    o->state = state;
    if (code) {
        snprintf(o->code, sizeof o->code, "%s", code);
        snprintf(o->reason, sizeof o->reason, "%s", why);
    }
    rtomod_scan_free(scan);
}

static void complete(rtomod *d, rtomod_scan *scan)
{
    long missing = scan->kind == RTOMOD_SCAN_TOMO ? rtomod_tomo_missing(scan)
                                                  : 0;
    char note[96] = "";
    if (scan->kind == RTOMOD_SCAN_TOMO)
        rtomod_tomo_end_note(scan, note, sizeof note);
    d->counters.scans_complete++;
    d->counters.scans_incomplete += scan->incomplete != 0;
    rtomod_publish_event(&d->pub, scan->failed || scan->incomplete
                                      ? RTOMOD_LOG_WARN : RTOMOD_LOG_INFO,
                         "scan_complete", scan->id, -1,
                         scan->failed ? "failed" : scan->end_code,
                         "%ld frames, %ld images published, %ld frames "
                         "dropped, %ld rejected, %ld projections missing%s%s%s%s",
                         scan->frames, scan->images, scan->dropped,
                         scan->rejected, missing, note,
                         scan->incomplete ? "; incomplete: " : "",
                         scan->incomplete ? scan->failure : "",
                         scan->failed ? "; failed: " : "");
    if (scan->output_file)
        rtomod_output_close(d->output, scan->serial,
                            !scan->failed && !scan->incomplete,
                            scan->failed ? "failed" : scan->end_code,
                            scan->failure);
    retire(d, scan, "complete", NULL, NULL);
}

void rtomod_scan_finish(rtomod *d, rtomod_scan *scan, int parts)
{
    ev_timer_stop(d->loop, &scan->end_timer);
    ev_timer_stop(d->loop, &scan->idle_timer);
    scan->phase = RTOMOD_SCAN_FINISHING;
    scan->end_pending = 0;
    scan->parts_pending = parts;
    if (parts == 0)
        complete(d, scan);
}

void rtomod_scan_end_now(rtomod *d, rtomod_scan *scan)
{
    ev_timer_stop(d->loop, &scan->end_timer);
    scan->end_pending = 0;
    if (scan->kind == RTOMOD_SCAN_TOMO)
        rtomod_tomo_finish(d, scan);
    else
        rtomod_sbdx_finish(d, scan);
}

void rtomod_scan_end_incomplete(rtomod *d, rtomod_scan *scan,
                                const char *code, const char *why)
{
    int whole = scan->kind == RTOMOD_SCAN_SBDX || rtomod_tomo_complete(scan);
    snprintf(scan->end_code, sizeof scan->end_code, "%s", code);
    if (!whole && d->cfg.scans.incomplete_abort) {
        rtomod_scan_abort(d, scan, code, why);
        return;
    }
    /* An SBDX stream or a scan that has all its projections lost only
     * its end message: it completes as if that had come. */
    if (!whole) {
        scan->incomplete = 1;
        snprintf(scan->failure, sizeof scan->failure, "%s", why);
    }
    rtomod_publish_event(&d->pub, RTOMOD_LOG_WARN, "scan_ending", scan->id,
                         -1, code, "%s; %s", why,
                         whole ? "it had all its frames: finishing it"
                               : "reconstructing what arrived");
    rtomod_scan_end_now(d, scan);
}

void rtomod_scan_request_end(rtomod *d, rtomod_scan *scan)
{
    scan->t_last_input = rtomod_now();
    if (rtomod_tomo_complete(scan) || scan->failed ||
        d->cfg.ingest.reorder_ms == 0) {
        rtomod_scan_end_now(d, scan);
        return;
    }
    scan->end_pending = 1;
    ev_timer_set(&scan->end_timer, d->cfg.ingest.reorder_ms / 1000.0, 0.0);
    ev_timer_start(d->loop, &scan->end_timer);
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

static void on_end_timer(struct ev_loop *loop, ev_timer *timer, int revents)
{
    (void)revents;
    rtomod_scan *scan = timer->data;
    if (scan->phase != RTOMOD_SCAN_ACQUIRING || !scan->end_pending)
        return;
    double left = end_wait_left(scan->d, scan);
    if (left > 0) {
        ev_timer_set(timer, left, 0.0);
        ev_timer_start(loop, timer);
        return;
    }
    rtomod_scan_end_now(scan->d, scan);
}

/* Seconds until the scan counts as abandoned, or <= 0 when it does.  As
 * for the end's wait, time in which rtomod itself held frames back (full
 * queues, unread messages) does not count against the sender. */
static double idle_left(rtomod *d, const rtomod_scan *scan)
{
    double limit = d->cfg.scans.idle_timeout_ms / 1000.0;
    if (!rtomod_pool_has_room(&d->pool) || rtomod_ingest_has_waiting(d))
        return limit;
    return limit - (rtomod_now() - scan->t_last_input);
}

static void arm_idle_timer(rtomod *d, rtomod_scan *scan, double after)
{
    ev_timer_stop(d->loop, &scan->idle_timer);
    if (d->cfg.scans.idle_timeout_ms <= 0)
        return;
    ev_timer_set(&scan->idle_timer, after, 0.0);
    ev_timer_start(d->loop, &scan->idle_timer);
}

static void on_idle_timer(struct ev_loop *loop, ev_timer *timer, int revents)
{
    (void)loop; (void)revents;
    rtomod_scan *scan = timer->data;
    rtomod *d = scan->d;
    if (scan->phase != RTOMOD_SCAN_ACQUIRING || scan->end_pending)
        return;
    if (d->cfg.scans.idle_timeout_ms <= 0)
        return;             /* switched off since it was armed */
    double left = idle_left(d, scan);
    if (left > 0) {
        arm_idle_timer(d, scan, left);
        return;
    }
    d->counters.scans_timed_out++;
    char why[160];
    snprintf(why, sizeof why, "nothing received for %.1f s "
             "(scans.idle_timeout_ms)", rtomod_now() - scan->t_last_input);
    rtomod_scan_end_incomplete(d, scan, "idle_timeout", why);
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
    if (scan->phase != RTOMOD_SCAN_FINISHING || --scan->parts_pending > 0)
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

/* Frames of the scan that no published image will ever contain: all of a
 * tomography scan's (its images come only at its end or with windows
 * already counted), an SBDX stream's not yet published. */
static long frames_lost(const rtomod_scan *scan)
{
    long used = scan->kind == RTOMOD_SCAN_TOMO ? rtomod_tomo_frames_used(scan)
                                               : rtomod_sbdx_frames_done(scan);
    long lost = scan->frames - used - scan->dropped;
    return lost > 0 ? lost : 0;
}

void rtomod_scan_abort(rtomod *d, rtomod_scan *scan, const char *code,
                       const char *why)
{
    rtomod_pool_purge(&d->pool, scan->serial);
    /* Results still on their way for this serial find no record and are
     * discarded (their drops were counted here); the CLOSE jobs free the
     * plans. */
    long lost = frames_lost(scan);
    d->counters.scans_aborted++;
    d->counters.dropped += (uint64_t)lost;
    scan->dropped += lost;
    rtomod_scan_close_plans(d, scan, 1);
    rtomod_publish_event(&d->pub, RTOMOD_LOG_WARN, "scan_aborted", scan->id,
                         -1, code, "%s; %ld frames accepted, %ld dropped, "
                         "%ld rejected", why, scan->frames, scan->dropped,
                         scan->rejected);
    if (scan->output_file) {
        char text[RTOMO_REASON_MAX];
        snprintf(text, sizeof text, "scan aborted (%s): %s", code, why);
        rtomod_output_close(d->output, scan->serial, 0, code, text);
    }
    retire(d, scan, "aborted", code, why);
}

json_t *rtomod_scan_json(const rtomod_scan *scan)
{
    json_t *out = json_pack("{s:s, s:s, s:s, s:b}", "id", scan->id, "kind",
                            kind_short(scan->kind), "phase",
                            scan->phase == RTOMOD_SCAN_FINISHING
                                ? "reconstructing"
                                : scan->end_pending ? "ending" : "acquiring",
                            "failed", scan->failed);
    if (scan->failed)
        json_object_set_new(out, "failure", json_string(scan->failure));
    if (scan->kind == RTOMOD_SCAN_TOMO)
        rtomod_tomo_status(scan, out);
    else
        rtomod_sbdx_status(scan, out);
    return out;
}

json_t *rtomod_scan_status(rtomod *d)
{
    for (rtomod_scan *s = d->scans; s; s = s->next)
        if (s->phase == RTOMOD_SCAN_ACQUIRING)
            return rtomod_scan_json(s);
    return json_null();
}

json_t *rtomod_scans_status(rtomod *d)
{
    json_t *list = json_array();
    for (rtomod_scan *s = d->scans; s; s = s->next)
        json_array_append_new(list, rtomod_scan_json(s));
    return list;
}

static const char *kind_name(rtomod_scan_kind kind)
{
    return kind == RTOMOD_SCAN_TOMO ? "tomography scan" : "SBDX stream";
}

/* Reject input for a scan that is not acquiring, with the most useful
 * reason: it ended already, or the daemon does not know it. */
static void reject_not_acquiring(rtomod *d, const rtomo_ingest_msg *msg,
                                 int64_t index)
{
    rtomod_scan *live = rtomod_scan_named(d, msg->scan);
    rtomod_outcome *past = live ? NULL
                                : rtomod_history_find(&d->history, msg->scan);
    if (live || (past && strcmp(past->state, "unknown") != 0 &&
                 strcmp(past->state, "refused") != 0))
        rtomod_rejectf(d, RTOMO_REJECT_ENDED, msg->scan, index,
                       "scan '%s' already ended (%s)", msg->scan,
                       live ? "reconstructing" : past->state);
    else if (past && strcmp(past->state, "refused") == 0)
        rtomod_rejectf(d, RTOMO_REJECT_UNKNOWN_SCAN, msg->scan, index,
                       "scan '%s' was refused at its begin (%s)", msg->scan,
                       past->code);
    else
        rtomod_rejectf(d, RTOMO_REJECT_UNKNOWN_SCAN, msg->scan, index,
                       "scan '%s' is not acquiring (%d scan%s %s)",
                       msg->scan, rtomod_scan_count(d, RTOMOD_SCAN_ACQUIRING),
                       rtomod_scan_count(d, RTOMOD_SCAN_ACQUIRING) == 1
                           ? " is" : "s are", "acquiring");
}

rtomod_scan *rtomod_scan_for_input(rtomod *d, const rtomo_ingest_msg *msg,
                                   rtomod_scan_kind kind)
{
    int64_t index = msg->type == RTOMO_MSG_SCAN_END ||
                    msg->type == RTOMO_MSG_SBDX_END ? -1 : msg->frame.index;
    if (d->phase > RTOMOD_DRAINING) {
        rtomod_rejectf(d, RTOMO_REJECT_SHUTDOWN, msg->scan, index,
                       "rtomod is shutting down and accepts no more input");
        return NULL;
    }
    rtomod_scan *scan = rtomod_scan_acquiring(d, msg->scan);
    if (!scan) {
        reject_not_acquiring(d, msg, index);
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
        rtomod_rejectf(d, RTOMO_REJECT_SHUTDOWN, msg->scan, -1,
                       "rtomod is shutting down and starts no new scan");
        return 0;
    }
    rtomod_scan *same = rtomod_scan_acquiring(d, msg->scan);
    if (same) {
        rtomod_rejectf(d, RTOMO_REJECT_STATE, msg->scan, -1,
                       "%s '%s' is already acquiring: a scan id names one "
                       "scan at a time", kind_name(same->kind), same->id);
        return 0;
    }
    int live = 0;
    for (rtomod_scan *s = d->scans; s; s = s->next)
        live++;
    if (live >= d->cfg.scans.max) {
        rtomod_rejectf(d, RTOMO_REJECT_BUDGET, msg->scan, -1,
                       "%d scans are in flight, the most scans.max allows: "
                       "wait for one to finish", live);
        return 0;
    }
    return 1;
}

int rtomod_scan_check_image(rtomod *d, const char *id, size_t bytes,
                            const char *what)
{
    size_t most = rtomod_config_max_image(&d->cfg);
    if (bytes <= most)
        return 0;
    rtomod_rejectf(d, RTOMO_REJECT_BUDGET, id, -1, "its %s of %.1f MB exceed "
                   "publish.max_image_mb (%.1f MB), which bounds what a "
                   "subscriber may hold back", what,
                   (double)bytes / (1 << 20), (double)most / (1 << 20));
    return -1;
}

/* What the scans that ended still hold: their plans close (the last job
 * of theirs is queued on every worker holding one) before a scan begun
 * now opens its plans behind them, so a new begin need not wait for
 * their reconstruction.  (Without this, a camera's next large scan was
 * refused while the last one reconstructed.) */
static void leaving_claims(rtomod *d, rtomod_budget_claim *leaving)
{
    memset(leaving, 0, sizeof *leaving);
    for (rtomod_scan *s = d->scans; s; s = s->next) {
        if (s->phase != RTOMOD_SCAN_FINISHING)
            continue;
        leaving->host += s->claim.host;
        for (int i = 0; i < RTOMO_MAX_DEVICES; i++)
            leaving->device[i] += s->claim.device[i];
    }
}

int rtomod_scan_try_admit(rtomod *d, rtomod_scan *scan, char *why,
                          size_t why_size)
{
    rtomod_budget_claim leaving;
    leaving_claims(d, &leaving);
    if (rtomod_budget_take(&d->budget, &scan->claim, &leaving, why,
                           why_size) == 0)
        return 0;
    memset(&scan->claim, 0, sizeof scan->claim);
    return -1;
}

int rtomod_scan_admit(rtomod *d, rtomod_scan *scan, const char *what)
{
    char why[RTOMO_REASON_MAX - 64];
    if (rtomod_scan_try_admit(d, scan, why, sizeof why) == 0)
        return 0;
    rtomod_rejectf(d, RTOMO_REJECT_BUDGET, scan->id, -1, "%s %s", what, why);
    return -1;
}

void rtomod_scan_activate(rtomod *d, rtomod_scan *scan)
{
    rtomod_scan **tail = &d->scans;
    while (*tail)
        tail = &(*tail)->next;
    scan->next = NULL;
    *tail = scan;
    scan->phase = RTOMOD_SCAN_ACQUIRING;
    d->counters.scans_started++;
    arm_idle_timer(d, scan, d->cfg.scans.idle_timeout_ms / 1000.0);
    rtomod_publish_event(&d->pub, RTOMOD_LOG_INFO, "scan_started", scan->id,
                         -1, scan->start_reason[0] ? scan->start_reason : NULL,
                         "%s started (%d scans in flight)%s%s",
                         kind_name(scan->kind), rtomod_scan_count(d,
                             RTOMOD_SCAN_ACQUIRING) +
                             rtomod_scan_count(d, RTOMOD_SCAN_FINISHING),
                         scan->start_note[0] ? "; " : "", scan->start_note);
    rtomod_ingest_replay_early(d, scan->id);
}
