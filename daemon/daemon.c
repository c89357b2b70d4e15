/*
 * daemon.c — rtomod's life cycle: build the sockets, workers and watchers
 * from the configuration; dispatch the workers' results on the loop thread
 * (publish images, count, report errors, complete scans); and shut down
 * cleanly on SIGTERM/SIGINT.
 *
 * Shutdown, in phases (rtomod_phase):
 *   DRAINING   no new scan is accepted (shutting_down); frames of scans
 *              already acquiring are still taken until ingest has been
 *              quiet for shutdown.drain_quiet_ms, or for at most
 *              shutdown.drain_max_ms, so that frames sent before the signal
 *              are not lost while a sender that keeps streaming cannot
 *              hold the daemon up.  Then every acquiring scan ends: one
 *              that has its frames (or an SBDX stream) is finished, another
 *              reconstructed from what arrived or aborted, as
 *              scans.incomplete says.
 *   FINISHING  every message is rejected (shutting_down) so that senders
 *              learn; the workers finish every queued job and their
 *              results are published.
 *   STOPPING   leave the loop; PUB lingers so the last messages flush.
 * shutdown.timeout_ms bounds FINISHING: what is still unfinished then is
 * aborted and its frames counted dropped, and rtomod exits 0, every
 * accepted frame accounted for.  A second signal stops at once (exit 1).
 */
#include "config.h"

#include <math.h>
#include <stdint.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rtomod.h"
#include "rtomod_input.h"
#include "rtomod_memory.h"

double rtomod_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* ---------------------------------------------------------- results ---- */

void rtomod_publish_result(rtomod *d, rtomod_scan *scan, rtomod_result *r)
{
    rtomo_image_header *h = &r->header;
    h->latency_ms = 1e3 * (rtomod_now() - r->t_input);
    h->seq = rtomod_publish_seq(&d->pub, h->topic);
    char *header = rtomo_proto_encode_image_header(h);
    if (!header) {
        log_error("publish: out of memory encoding an image header");
        return;
    }
    /* The HDF5 file shares the buffer (a reference, no copy): a plain
     * scan's slices, an SBDX stream's images.  Of an iterative scan the
     * FBP slice and the final iterate, which overwrites it (an abort
     * leaves the FBP); the iterates between are for the live view. */
    if (scan->output_file &&
        (scan->kind == RTOMOD_SCAN_SBDX
             ? strcmp(h->topic, RTOMO_TOPIC_PREVIEW) != 0
             : strcmp(h->topic, RTOMO_TOPIC_SLICE) == 0 && h->frame < 0 &&
                   (h->iteration == 0 || h->final)))
        rtomod_output_image(d->output, scan->serial, r);
    rtomod_publish(&d->pub, h->topic, header, r->buffer, r->data, r->size);
    r->buffer = NULL;           /* the publisher took the reference */
    free(header);
    scan->images++;
}

static void report_error(rtomod *d, rtomod_scan *scan, const rtomod_result *r)
{
    rtomod_publish_event(&d->pub, RTOMOD_LOG_ERROR, "error",
                         scan ? scan->id : NULL, -1, r->reason, "%s",
                         r->message);
    if (scan && r->fatal && !scan->failed) {
        scan->failed = 1;
        snprintf(scan->failure, sizeof scan->failure, "%s", r->message);
    }
}

static void report_dropped(rtomod *d, rtomod_scan *scan, const rtomod_result *r)
{
    /* A result of a scan that was aborted finds no record: the abort
     * counted every frame of it that was lost. */
    if (!scan)
        return;
    d->counters.dropped += (uint64_t)r->dropped;
    /* One event per scan: a failed plan may drop every frame after it. */
    if (scan->dropped == 0)
        rtomod_publish_event(&d->pub, RTOMOD_LOG_WARN, "dropped", scan->id, -1,
                             "dropped", "accepted frames of scan %s could not "
                             "be used (see the error events); the count is in "
                             "status and scan_complete", scan->id);
    scan->dropped += r->dropped;
}

static void dispatch(rtomod *d, rtomod_scan *scan, rtomod_result *r)
{
    switch (r->kind) {
    case RTOMOD_RESULT_IMAGE:
        if (scan)
            rtomod_publish_result(d, scan, r);
        break;
    case RTOMOD_RESULT_STATS:
        rtomod_telemetry_stats(d, r);
        break;
    case RTOMOD_RESULT_ITERATION:
        if (scan)
            rtomod_telemetry_iteration(d, scan->id, r);
        break;
    case RTOMOD_RESULT_ERROR:
        report_error(d, scan, r);
        break;
    case RTOMOD_RESULT_DROPPED:
        report_dropped(d, scan, r);
        break;
    case RTOMOD_RESULT_DONE:
        if (scan)
            rtomod_scan_part_done(d, scan);
        break;
    case RTOMOD_RESULT_SET_DONE:
        if (scan)
            rtomod_scan_set_done(d, scan, r);
        break;
    case RTOMOD_RESULT_AXIS:
        if (scan)
            rtomod_tomo_axis_found(d, scan, r);
        break;
    case RTOMOD_RESULT_PLANE_PART:
        if (scan)
            rtomod_tomo_plane_part(d, scan, r);
        break;
    }
}

/* Dispatch a list of results in order and free them.  Results of a scan
 * that was aborted find no record: images are discarded, counts still
 * count.  SBDX results wait for earlier frames (rtomod_sbdx_hold); a
 * frame's end releases the next frame's results, dispatched next. */
static void dispatch_list(rtomod *d, rtomod_result *r)
{
    while (r) {
        rtomod_result *next = r->next;
        rtomod_scan *scan = rtomod_scan_find(d, r->serial);
        int ordered = scan && scan->kind == RTOMOD_SCAN_SBDX && r->seq >= 0;
        if (ordered && rtomod_sbdx_hold(scan, r)) {
            r = next;
            continue;
        }
        rtomod_result *released = ordered ? rtomod_sbdx_release(scan, r)
                                          : NULL;
        dispatch(d, scan, r);
        rtomod_result_free(r);
        if (released) {
            rtomod_result *tail = released;
            while (tail->next)
                tail = tail->next;
            tail->next = next;
            next = released;
        }
        r = next;
    }
}

static void dispatch_results(rtomod *d)
{
    dispatch_list(d, rtomod_pool_take_results(&d->pool));
    rtomod_output_poll(d->output, &d->pub);
    rtomod_telemetry_maybe_publish(d);
}

/* Workers wake the loop for results, and when their queue has room again
 * (then the prepare watchers resume ingest by themselves). */
static void on_wake(struct ev_loop *loop, ev_async *async, int revents)
{
    (void)loop; (void)revents;
    dispatch_results(async->data);
}

/* --------------------------------------------------------- shutdown ---- */

static void enter_phase(rtomod *d, rtomod_phase phase)
{
    d->phase = phase;
    d->t_phase = rtomod_now();
}

/* An acquiring scan at the end of the drain: one that has its frames
 * (or an SBDX stream, which announces no count) is finished, another ends
 * incomplete (reconstructed from what arrived, or aborted). */
static void settle_scan(rtomod *d, rtomod_scan *scan)
{
    if (scan->end_pending || scan->kind == RTOMOD_SCAN_SBDX ||
        rtomod_tomo_complete(scan)) {
        log_info("shutdown: finishing scan %s", scan->id);
        rtomod_scan_end_now(d, scan);
    } else {
        rtomod_scan_end_incomplete(d, scan, "shutdown", "rtomod shut down "
                                   "before the scan's end");
    }
}

/* End of the drain: every acquiring scan ends now; input is refused from
 * here on. */
static void end_drain(rtomod *d)
{
    rtomod_scan *scan = d->scans;
    while (scan) {
        rtomod_scan *next = scan->next;     /* settling may free it */
        if (scan->phase == RTOMOD_SCAN_ACQUIRING)
            settle_scan(d, scan);
        scan = next;
    }
    log_info("shutdown: %llu messages read since the signal; finishing "
             "accepted work, refusing new input",
             (unsigned long long)(d->counters.accepted + d->counters.rejected -
                                  d->messages_at_signal));
    enter_phase(d, RTOMOD_FINISHING);
    rtomod_ingest_flush_early(d);
}

/* shutdown.timeout_ms ran out: what is unfinished is aborted, counted. */
static void give_up(rtomod *d)
{
    log_error("shutdown: gave up waiting for the workers after %d ms; "
              "aborting what is unfinished", d->cfg.shutdown.timeout_ms);
    while (d->scans)
        rtomod_scan_abort(d, d->scans, "shutdown", "rtomod shut down before "
                          "the reconstruction finished "
                          "(shutdown.timeout_ms)");
    enter_phase(d, RTOMOD_STOPPING);
}

static void on_drain_timer(struct ev_loop *loop, ev_timer *timer, int revents)
{
    (void)revents;
    rtomod *d = timer->data;
    double now = rtomod_now();
    dispatch_results(d);
    if (d->phase == RTOMOD_DRAINING) {
        double quiet = d->cfg.shutdown.drain_quiet_ms / 1000.0;
        double most = d->cfg.shutdown.drain_max_ms / 1000.0;
        int waiting = d->ingest && rtomod_zsock_readable(d->ingest);
        if ((!waiting && now - d->t_last_ingest >= quiet &&
             now - d->t_phase >= quiet) || now - d->t_phase >= most)
            end_drain(d);
    }
    if (d->phase == RTOMOD_FINISHING && !d->scans &&
        rtomod_pool_idle(&d->pool)) {
        log_info("shutdown: all work published");
        enter_phase(d, RTOMOD_STOPPING);
    }
    if (d->phase == RTOMOD_FINISHING &&
        now - d->t_phase > d->cfg.shutdown.timeout_ms / 1000.0)
        give_up(d);
    if (d->phase == RTOMOD_STOPPING)
        ev_break(loop, EVBREAK_ALL);
}

static void on_signal(struct ev_loop *loop, ev_signal *sig, int revents)
{
    (void)revents;
    rtomod *d = sig->data;
    if (d->phase != RTOMOD_RUNNING) {
        log_warn("signal %d again: stopping now, dropping queued work",
                 sig->signum);
        while (d->scans)
            rtomod_scan_abort(d, d->scans, "shutdown", "rtomod was stopped "
                              "by a second signal");
        d->exit_code = 1;
        enter_phase(d, RTOMOD_STOPPING);
        ev_break(loop, EVBREAK_ALL);
        return;
    }
    log_info("signal %d: draining (no new scans; taking the frames already "
             "sent for at most %d ms)", sig->signum,
             d->cfg.shutdown.drain_max_ms);
    rtomo_notify(&d->notifier, "STOPPING=1");
    d->messages_at_signal = d->counters.accepted + d->counters.rejected;
    enter_phase(d, RTOMOD_DRAINING);
    ev_timer_init(&d->drain_timer, on_drain_timer, 0.02, 0.02);
    d->drain_timer.data = d;
    ev_timer_start(loop, &d->drain_timer);
}

/* ------------------------------------------------------------ setup ---- */

/* Decide the backend and, for CUDA, the devices (one worker each). */
static int choose_devices(rtomod *d, int *devices, int *n_devices, char *error,
                          size_t error_size)
{
    const rtomo_engine_options *e = &d->cfg.engine;
    int visible = rtomo_cuda_device_count();
    d->backend = e->backend;
    if (d->backend == RTOMO_BACKEND_AUTO)
        d->backend = visible > 0 ? RTOMO_BACKEND_CUDA : RTOMO_BACKEND_CPU;
    *n_devices = 0;
    if (d->backend == RTOMO_BACKEND_CPU)
        return 0;
    if (d->cfg.workers > 0)
        log_warn("engine.workers applies to the CPU backend; with CUDA "
                 "there is one worker per GPU (engine.devices)");
    if (visible < 1) {
        snprintf(error, error_size, "engine.backend: cuda, but no GPU is "
                 "visible");
        return -1;
    }
    int n = e->n_devices > 0 ? e->n_devices : visible;
    if (n > RTOMO_MAX_DEVICES)
        n = RTOMO_MAX_DEVICES;
    for (int i = 0; i < n; i++) {
        int dev = e->n_devices > 0 ? e->device_ids[i] : i;
        rtomo_device_info info;
        rtomo_error err;
        if (dev >= visible ||
            rtomo_cuda_device_info(dev, &info, &err) != RTOMO_OK) {
            snprintf(error, error_size, "engine.devices: device %d is not "
                     "usable (%d visible)", dev, visible);
            return -1;
        }
        devices[i] = dev;
        d->gpus[i].index = dev;
        snprintf(d->gpus[i].name, sizeof d->gpus[i].name, "%s", info.name);
        d->gpus[i].memory_total = info.memory_total;
    }
    *n_devices = d->n_gpus = n;
    return 0;
}

static int start_workers(rtomod *d, char *error, size_t error_size)
{
    int devices[RTOMO_MAX_DEVICES], n_devices;
    if (choose_devices(d, devices, &n_devices, error, error_size) != 0)
        return -1;
    size_t max_bytes = (size_t)(d->cfg.queue.mb * 1024.0 * 1024.0);
    if (rtomod_pool_start(&d->pool, &d->cfg.engine, devices, n_devices,
                          d->cfg.workers, d->cfg.queue.frames, max_bytes,
                          d->cfg.publish.stats_threads,
                          (size_t)(d->cfg.publish.pinned_mb * 1048576.0),
                          d->loop, &d->wake, error, error_size) != 0)
        return -1;
    size_t gpu_memory[RTOMO_MAX_DEVICES];
    for (int i = 0; i < d->n_gpus; i++)
        gpu_memory[i] = d->gpus[i].memory_total;
    d->output = rtomod_output_start(&d->cfg, d->loop, &d->wake, error,
                                    error_size);
    if (!d->output && error[0])
        return -1;
    if (d->output) {
        d->pool.gate = rtomod_output_gate;
        d->pool.gate_ctx = d->output;
    }
    if (rtomod_budget_init(&d->budget, &d->cfg, gpu_memory, d->n_gpus,
                           d->pool.n, error, error_size) != 0)
        return -1;
    int batch = d->cfg.reconstruction.batch > 0 ? d->cfg.reconstruction.batch
                                                : d->n_gpus > 0 ? 64 : 16;
    if (rtomod_config_publish_hwm(&d->cfg) < 2 * batch)
        log_warn("publish: %d messages per subscriber at most "
                 "(publish.queue_mb / publish.max_image_mb), fewer than two "
                 "batches of %d slices: a subscriber may lose slices of a "
                 "batch published at once", rtomod_config_publish_hwm(&d->cfg),
                 batch);
    log_info("engine: %s backend, %d worker%s; scans may hold %.0f MB of "
             "host memory", rtomo_backend_name(d->backend), d->pool.n,
             d->pool.n == 1 ? "" : "s",
             (double)d->budget.host_limit / (1 << 20));
    for (int i = 0; i < d->n_gpus; i++)
        log_info("engine: worker %d on GPU %d (%s)", i, d->gpus[i].index,
                 d->gpus[i].name);
    return 0;
}

/* Memory a burst needed goes back to the kernel once rtomod is idle: no
 * scan, no queued work, no early frame.  Once per idle spell. */
#define TRIM_CHECK_S 1.0

static void on_trim_timer(struct ev_loop *loop, ev_timer *timer, int revents)
{
    (void)loop; (void)revents;
    rtomod *d = timer->data;
    static uint64_t trimmed_at = UINT64_MAX;
    uint64_t activity = d->counters.accepted + d->counters.rejected;
    int idle = !d->scans && d->n_early == 0 && rtomod_pool_idle(&d->pool);
    if (!idle || activity == trimmed_at)
        return;
    rtomod_memory_return();
    trimmed_at = activity;
}

/* The watchdog is pinged from the loop: a loop that stops turning stops
 * pinging, and systemd restarts the daemon. */
static void on_watchdog(struct ev_loop *loop, ev_timer *timer, int revents)
{
    (void)loop; (void)revents;
    rtomod *d = timer->data;
    rtomo_notify(&d->notifier, "WATCHDOG=1");
}

static void start_notifier(rtomod *d)
{
    char error[256];
    if (rtomo_notifier_open(&d->notifier, error, sizeof error) != 0)
        log_warn("systemd notification disabled: %s", error);
    double period = rtomo_notifier_watchdog_period(&d->notifier);
    if (period > 0) {
        ev_timer_init(&d->watchdog_timer, on_watchdog, period, period);
        d->watchdog_timer.data = d;
        ev_timer_start(d->loop, &d->watchdog_timer);
    }
}

static void start_signals(rtomod *d)
{
    ev_signal_init(&d->sigterm, on_signal, SIGTERM);
    ev_signal_init(&d->sigint, on_signal, SIGINT);
    d->sigterm.data = d->sigint.data = d;
    ev_signal_start(d->loop, &d->sigterm);
    ev_signal_start(d->loop, &d->sigint);
    /* A subscriber or sender that vanishes must not kill the daemon. */
    signal(SIGPIPE, SIG_IGN);
    /* A file size limit (RLIMIT_FSIZE) fails an output file's write with
     * EFBIG, reported as output_error, instead of killing the daemon. */
    signal(SIGXFSZ, SIG_IGN);
}

int rtomod_open(rtomod *d, const rtomod_config *cfg, char *error,
                size_t error_size)
{
    memset(d, 0, sizeof *d);
    d->notifier.fd = -1;        /* not open: closing must not touch fd 0 */
    if (rtomod_config_copy(&d->cfg, cfg) != 0) {
        snprintf(error, error_size, "out of memory");
        return -1;
    }
    rtomod_log_set_level(d->cfg.log.level);
    d->t_start = d->t_last_ingest = rtomod_now();
    d->loop = ev_default_loop(EVFLAG_AUTO);
    /* Before ZeroMQ's I/O threads start allocating message buffers. */
    rtomod_memory_setup(d->cfg.ingest.keep_buffers,
                        (size_t)(d->cfg.ingest.keep_mb * 1024.0 * 1024.0));
    d->zmq = zmq_ctx_new();
    if (d->zmq)
        zmq_ctx_set(d->zmq, ZMQ_IO_THREADS, rtomod_config_zmq_threads(&d->cfg));
    if (!d->loop || !d->zmq) {
        snprintf(error, error_size, "cannot create the event loop or the "
                 "ZeroMQ context");
        rtomod_close(d);
        return -1;
    }
    ev_async_init(&d->wake, on_wake);
    d->wake.data = d;
    ev_async_start(d->loop, &d->wake);
    /* Publisher first: rejects and events of everything else go there. */
    if (rtomod_publisher_open(&d->pub, d->zmq, &d->cfg, error, error_size) ||
        start_workers(d, error, error_size) ||
        rtomod_ingest_open(d, error, error_size) ||
        rtomod_inputs_open(d, error, error_size) ||
        rtomod_control_open(d, error, error_size)) {
        rtomod_close(d);
        return -1;
    }
    start_signals(d);
    start_notifier(d);
    rtomod_telemetry_start(d);
    ev_timer_init(&d->trim_timer, on_trim_timer, TRIM_CHECK_S, TRIM_CHECK_S);
    d->trim_timer.data = d;
    ev_timer_start(d->loop, &d->trim_timer);
    return 0;
}

int rtomod_run(rtomod *d)
{
    log_info("rtomod %s ready", RTOMOD_VERSION);
    rtomo_notify(&d->notifier, "READY=1\nSTATUS=idle");
    ev_run(d->loop, 0);
    return d->exit_code;
}

void rtomod_close(rtomod *d)
{
    if (d->loop) {
        rtomod_telemetry_stop(d);
        ev_timer_stop(d->loop, &d->drain_timer);
        ev_timer_stop(d->loop, &d->trim_timer);
        ev_timer_stop(d->loop, &d->watchdog_timer);
        ev_signal_stop(d->loop, &d->sigterm);
        ev_signal_stop(d->loop, &d->sigint);
    }
    rtomod_ingest_close(d);
    rtomod_inputs_close(d);
    rtomod_control_close(d);
    /* The loop takes no more results: a worker must not wait for room
     * in the output queue. */
    rtomod_output_no_wait(d->output);
    if (d->pool.workers) {
        /* Anything still queued here was cut short by a second signal or
         * the shutdown timeout. */
        rtomod_pool_stop(&d->pool, 1);
        dispatch_results(d);
        rtomod_pool_free(&d->pool);
    }
    while (d->scans) {
        rtomod_scan *next = d->scans->next;
        if (d->scans->output_file)
            rtomod_output_close(d->output, d->scans->serial, 0, "shutdown",
                                "rtomod stopped before the scan ended");
        rtomod_scan_free(d->scans);
        d->scans = next;
    }
    /* Every file written and closed; its last events published. */
    rtomod_output_stop(d->output, &d->pub);
    d->output = NULL;
    if (d->loop)
        ev_async_stop(d->loop, &d->wake);
    rtomod_publisher_close(&d->pub, d->cfg.publish.linger_ms);
    rtomo_notifier_close(&d->notifier);
    if (d->zmq)
        zmq_ctx_term(d->zmq);
    d->zmq = NULL;
    rtomod_config_clear(&d->cfg);
}

int rtomod_reconfigure(rtomod *d, const json_t *changes, char *error,
                       size_t error_size)
{
    int old_interval = d->cfg.telemetry.interval_ms;
    if (rtomod_config_apply_json(&d->cfg, changes, 1, error, error_size) != 0)
        return -1;
    rtomod_log_set_level(d->cfg.log.level);
    if (d->cfg.telemetry.interval_ms != old_interval)
        rtomod_telemetry_reconfigure(d);
    log_info("configuration changed by a control request");
    return 0;
}
