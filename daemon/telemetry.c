/*
 * telemetry.c — rtomod's running figures: ingest rates, reconstruction
 * speed and latency, queue depths, counters and the workers' load, published
 * on the "telemetry" topic every telemetry.interval_ms and after
 * reconstructed batches (rate limited), and returned by the status command.
 */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <time.h>

#include "rtomod.h"

/* Telemetry triggered by finished batches comes at most this often. */
#define MIN_GAP_S 0.1

/* The scan telemetry and the state speak of: the oldest acquiring one,
 * else the oldest finishing one. */
static const rtomod_scan *current(rtomod *d)
{
    for (const rtomod_scan *s = d->scans; s; s = s->next)
        if (s->phase == RTOMOD_SCAN_ACQUIRING)
            return s;
    return d->scans;
}

const char *rtomod_state_name(rtomod *d)
{
    const rtomod_scan *scan = current(d);
    if (!scan)
        return "idle";
    if (scan->phase == RTOMOD_SCAN_FINISHING)
        return "reconstructing";
    return scan->kind == RTOMOD_SCAN_SBDX ? "streaming" : "acquiring";
}

static json_t *counters_json(rtomod *d)
{
    json_t *rejects = json_object();
    for (int r = RTOMO_REJECT_NONE + 1; r < RTOMO_REJECT_COUNT; r++)
        json_object_set_new(rejects, rtomo_reject_name((rtomo_reject)r),
                            json_integer((json_int_t)d->counters.rejects[r]));
    const rtomod_counters *n = &d->counters;
    json_t *scans = json_pack("{s:I, s:I, s:I, s:I, s:I, s:I}",
                              "started", (json_int_t)n->scans_started,
                              "complete", (json_int_t)n->scans_complete,
                              "incomplete", (json_int_t)n->scans_incomplete,
                              "aborted", (json_int_t)n->scans_aborted,
                              "refused", (json_int_t)n->scans_refused,
                              "timed_out", (json_int_t)n->scans_timed_out);
    uint64_t previews = 0, previews_dropped = 0;
    for (int w = 0; w < d->pool.n; w++) {
        previews += atomic_load(&d->pool.workers[w].previews);
        previews_dropped += atomic_load(&d->pool.workers[w].previews_dropped);
    }
    return json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:o, s:o}",
                     "previews", (json_int_t)previews,
                     "previews_dropped", (json_int_t)previews_dropped,
                     "accepted", (json_int_t)d->counters.accepted,
                     "rejected", (json_int_t)d->counters.rejected,
                     "dropped", (json_int_t)d->counters.dropped,
                     "published", (json_int_t)d->pub.published,
                     "pub_dropped", (json_int_t)d->pub.dropped,
                     "auth_refused", (json_int_t)rtomod_security_refused(),
                     "rejects", rejects, "scans", scans);
}

static json_t *current_scan(rtomod *d)
{
    const rtomod_scan *scan = current(d);
    return scan ? json_string(scan->id) : json_null();
}

/* Continuous windows waiting for the workers, over all scans. */
static int pending_windows(rtomod *d)
{
    int n = 0;
    for (const rtomod_scan *s = d->scans; s; s = s->next)
        n += rtomod_tomo_pending_windows(s);
    return n;
}

/* The last continuous axis measurement, or null before the first. */
static json_t *axis_json(const rtomod_telemetry *t)
{
    if (!t->axis_scan[0])
        return json_null();
    return json_pack("{s:s, s:f, s:f, s:f, s:I, s:b}", "scan", t->axis_scan,
                     "value", t->axis, "quality", t->axis_quality, "drift",
                     t->axis_drift, "window", (json_int_t)t->axis_window,
                     "applied", t->axis_applied);
}

/* The last iteration of an iterative solve, or null before the first. */
static json_t *iterative_json(const rtomod_telemetry *t)
{
    if (!t->iter_scan[0])
        return json_null();
    const rtomod_iter_progress *p = &t->iter;
    json_t *j = json_pack(
        "{s:s, s:s, s:i, s:i, s:i, s:f, s:f, s:f, s:b}", "scan", t->iter_scan,
        "method", p->method, "iteration", p->iteration, "iterations",
        p->iterations, "rows", p->rows, "residual", p->residual,
        "iterations_per_s", p->iterations_per_s, "gu_per_s", p->gu_per_s,
        "done", p->done);
    /* A and A^T apart: measured over a whole solve, so from its end on. */
    if (j && p->done) {
        json_object_set_new(j, "project_gu_per_s",
                            json_real(p->project_gu_per_s));
        json_object_set_new(j, "backproject_gu_per_s",
                            json_real(p->backproject_gu_per_s));
    }
    return j;
}

json_t *rtomod_telemetry_json(rtomod *d)
{
    const rtomod_telemetry *t = &d->telemetry;
    json_t *j = json_pack(
        "{s:s, s:{s:f, s:f, s:I, s:I}, s:{s:f, s:f, s:f, s:I, s:I, s:I, s:I},"
        " s:{s:i, s:i, s:i, s:i}, s:o, s:o}",
        "state", rtomod_state_name(d),
        "ingest", "frames_per_s", t->frames_per_s, "mb_per_s", t->mb_per_s,
        "frames", (json_int_t)d->counters.frames,
        "bytes", (json_int_t)d->counters.bytes,
        "reconstruction", "gu_per_s", t->gu_per_s,
        "last_latency_ms", t->last_latency_ms,
        "last_ready_ms", t->last_ready_ms,
        "slices", (json_int_t)d->counters.slices,
        "frames", (json_int_t)d->counters.sbdx_frames,
        "windows", (json_int_t)d->counters.windows,
        "windows_skipped", (json_int_t)d->counters.windows_skipped,
        "queues", "work", rtomod_pool_queued_jobs(&d->pool),
        "frames", rtomod_pool_queued_frames(&d->pool),
        "windows", pending_windows(d),
        "publish", rtomod_pool_queued_results(&d->pool),
        "counters", counters_json(d), "axis", axis_json(t));
    /* HDF5 files (rtomod_output.h): null when off. */
    if (j) {
        json_object_set_new(j, "output", rtomod_output_json(d->output));
        json_object_set_new(j, "iterative", iterative_json(t));
    }
    return j;
}

/* Rates over the time since the last telemetry message. */
static void update_rates(rtomod *d, double now)
{
    rtomod_telemetry *t = &d->telemetry;
    double dt = now - t->t_last;
    if (dt <= 0)
        return;
    t->frames_per_s = (double)(d->counters.frames - t->frames_last) / dt;
    t->mb_per_s = (double)(d->counters.bytes - t->bytes_last) / dt / 1e6;
    t->frames_last = d->counters.frames;
    t->bytes_last = d->counters.bytes;
    for (int i = 0; i < d->pool.n && i < RTOMO_MAX_DEVICES; i++) {
        uint64_t busy = atomic_load(&d->pool.workers[i].busy_ns);
        double load = (double)(busy - t->busy_last[i]) / 1e9 / dt;
        t->load[i] = load > 1.0 ? 1.0 : load;
        t->busy_last[i] = busy;
    }
    t->t_last = now;
}

/* One line of live figures for `systemctl status rtomod`, at most once
 * a second (systemd keeps only the last; more would be noise). */
static void notify_status(rtomod *d, double now)
{
    rtomod_telemetry *t = &d->telemetry;
    if (!rtomo_notifier_active(&d->notifier) || now - t->t_status < 1.0)
        return;
    t->t_status = now;
    const rtomod_scan *scan = current(d);
    char line[512];
    snprintf(line, sizeof line, "STATUS=%s%s%s; ingest %.1f frames/s %.1f "
             "MB/s; %.2f GU/s; queue %d jobs (%d frames), %d windows; "
             "%llu accepted, %llu rejected, %llu dropped",
             rtomod_state_name(d), scan ? " " : "", scan ? scan->id : "",
             t->frames_per_s, t->mb_per_s, t->gu_per_s,
             rtomod_pool_queued_jobs(&d->pool),
             rtomod_pool_queued_frames(&d->pool), pending_windows(d),
             (unsigned long long)d->counters.accepted,
             (unsigned long long)d->counters.rejected,
             (unsigned long long)d->counters.dropped);
    rtomo_notify(&d->notifier, line);
}

static void publish_now(rtomod *d)
{
    double now = rtomod_now();
    update_rates(d, now);
    d->telemetry.pending = 0;
    json_t *msg = rtomod_telemetry_json(d);
    struct timespec wall;
    clock_gettime(CLOCK_REALTIME, &wall);
    json_object_set_new(msg, "protocol", json_integer(RTOMO_PROTOCOL_VERSION));
    json_object_set_new(msg, "type", json_string(RTOMO_TOPIC_TELEMETRY));
    json_object_set_new(msg, "time", json_real((double)wall.tv_sec +
                                               1e-9 * (double)wall.tv_nsec));
    json_object_set_new(msg, "uptime_s", json_real(now - d->t_start));
    json_object_set_new(msg, "scan", current_scan(d));
    uint64_t seq = rtomod_publish_seq(&d->pub, RTOMO_TOPIC_TELEMETRY);
    json_object_set_new(msg, "seq", json_integer((json_int_t)seq));
    char *text = json_dumps(msg, JSON_COMPACT);
    json_decref(msg);
    if (!text) {
        log_error("telemetry: cannot encode the message");
        return;
    }
    rtomod_publish(&d->pub, RTOMO_TOPIC_TELEMETRY, text, NULL, NULL, 0);
    free(text);
    notify_status(d, now);
}

static void on_timer(struct ev_loop *loop, ev_timer *timer, int revents)
{
    (void)loop; (void)revents;
    publish_now(timer->data);
}

void rtomod_telemetry_start(rtomod *d)
{
    rtomod_telemetry *t = &d->telemetry;
    t->t_last = rtomod_now();
    double interval = d->cfg.telemetry.interval_ms / 1000.0;
    ev_timer_init(&t->timer, on_timer, interval, interval);
    t->timer.data = d;
    ev_timer_start(d->loop, &t->timer);
}

void rtomod_telemetry_stop(rtomod *d)
{
    ev_timer_stop(d->loop, &d->telemetry.timer);
}

void rtomod_telemetry_reconfigure(rtomod *d)
{
    rtomod_telemetry *t = &d->telemetry;
    double interval = d->cfg.telemetry.interval_ms / 1000.0;
    ev_timer_stop(d->loop, &t->timer);
    ev_timer_set(&t->timer, interval, interval);
    ev_timer_start(d->loop, &t->timer);
}

void rtomod_telemetry_stats(rtomod *d, const rtomod_result *r)
{
    d->counters.slices += (uint64_t)r->slices;
    d->counters.sbdx_frames += (uint64_t)r->frames;
    if (r->seconds > 0 && r->updates > 0)
        d->telemetry.gu_per_s = r->updates / r->seconds / 1e9;
    d->telemetry.pending = 1;
}

void rtomod_telemetry_iteration(rtomod *d, const char *scan,
                                const rtomod_result *r)
{
    rtomod_telemetry *t = &d->telemetry;
    snprintf(t->iter_scan, sizeof t->iter_scan, "%s", scan);
    t->iter = r->iter;
    t->pending = 1;
}

void rtomod_telemetry_latency(rtomod *d, double latency_ms)
{
    d->telemetry.last_latency_ms = latency_ms;
}

void rtomod_telemetry_maybe_publish(rtomod *d)
{
    double gap = d->cfg.telemetry.interval_ms / 1000.0;
    if (gap > MIN_GAP_S)
        gap = MIN_GAP_S;
    if (d->telemetry.pending && rtomod_now() - d->telemetry.t_last >= gap)
        publish_now(d);
}
