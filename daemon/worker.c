/*
 * worker.c — rtomod's engine threads (see rtomod_worker.h).
 *
 * A worker holds the plans of every scan in flight (up to scans.max): jobs
 * of one scan arrive in order (begin, frames, reconstruct or close), jobs
 * of several scans interleave, and each job finds its plan by the scan's
 * serial.  Everything the engine reports goes back to the loop as a
 * result; a worker never touches a ZeroMQ socket.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "rtomod_config.h"
#include "rtomod_finisher.h"
#include "rtomod_log.h"
#include "rtomod_output.h"
#include "rtomod_worker.h"
#include "worker_cone.h"
#include "worker_internal.h"

/* ------------------------------------------------------------ jobs ---- */

rtomod_job *rtomod_job_new(rtomod_job_kind kind, uint64_t serial,
                           const char *scan)
{
    rtomod_job *job = calloc(1, sizeof *job);
    if (!job)
        return NULL;
    job->kind = kind;
    job->serial = serial;
    snprintf(job->scan, sizeof job->scan, "%s", scan);
    job->angle = NAN;
    job->axis_shift = NAN;
    job->index = -1;
    job->seq = -1;
    return job;
}

void rtomod_job_free(rtomod_job *job)
{
    if (!job)
        return;
    if (job->has_payload)
        zmq_msg_close(&job->payload);
    switch (job->kind) {
    case RTOMOD_JOB_TOMO_BEGIN:
        free((double *)job->u.tomo.geometry.angles);
        free((double *)job->u.tomo.geometry.axis_shift);
        free(job->u.tomo.resident);
        free(job->u.tomo.preview_rows);
        free(job->u.tomo.iter_rows);
        break;
    case RTOMOD_JOB_TOMO_RECONSTRUCT:
        free(job->u.recon.rows);
        free(job->u.recon.set_index);
        break;
    case RTOMOD_JOB_SBDX_BEGIN:
        free((double *)job->u.sbdx.geometry.ratios);
        break;
    case RTOMOD_JOB_CONE_BEGIN:
        free((double *)job->u.cone.geometry.angles);
        break;
    default:
        break;
    }
    free(job);
}

static size_t job_bytes(const rtomod_job *job)
{
    return job->has_payload ? zmq_msg_size((zmq_msg_t *)&job->payload) : 0;
}

static int job_is_frame(const rtomod_job *job)
{
    return job->kind == RTOMOD_JOB_TOMO_DARK ||
           job->kind == RTOMOD_JOB_TOMO_FLAT ||
           job->kind == RTOMOD_JOB_TOMO_FLAT_AFTER ||
           job->kind == RTOMOD_JOB_TOMO_PROJECTION ||
           job->kind == RTOMOD_JOB_SBDX_FRAME;
}

void rtomod_result_free(rtomod_result *r)
{
    if (r) {
        if (r->output_reserved)
            rtomod_output_unreserve(r->output_hold, r->output_reserved);
        rtomod_buffer_unref(r->buffer);
        free(r);
    }
}

/* ---------------------------------------------------------- results ---- */

double now_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

rtomod_result *result_new(rtomod_worker *w, rtomod_result_kind kind,
                                 uint64_t serial)
{
    rtomod_result *r = calloc(1, sizeof *r);
    if (!r) {
        log_error("worker %d: out of memory for a result; it is lost",
                  w->index);
        return NULL;
    }
    r->kind = kind;
    r->serial = serial;
    r->worker = w->index;
    r->frame = -1;
    r->seq = -1;
    return r;
}

/* Queue a result for the loop and wake it (any thread; the finishers'
 * rtomod_deliver_fn). */
static void deliver_to_loop(void *ctx, rtomod_result *r)
{
    rtomod_pool *pool = ctx;
    if (pool->gate)
        pool->gate(pool->gate_ctx, r);
    pthread_mutex_lock(&pool->lock);
    if (pool->results_tail)
        pool->results_tail->next = r;
    else
        pool->results_head = r;
    pool->results_tail = r;
    pool->n_results++;
    pthread_mutex_unlock(&pool->lock);
    ev_async_send(pool->loop, pool->wake_loop);
}

/* A result of the worker thread: it waits in the worker's outbox until
 * flush_results hands the outbox to the finisher, so that a worker's
 * results reach the loop in the order they were made. */
void post(rtomod_worker *w, rtomod_result *r)
{
    if (!r)
        return;
    r->next = NULL;
    if (w->outbox_tail)
        w->outbox_tail->next = r;
    else
        w->outbox_head = r;
    w->outbox_tail = r;
}

/* Hand the outbox to the finisher as one unit (a batch of slices, an SBDX
 * frame, what one job produced); blocks while the finisher is full.  The
 * time blocked is not the engine's: it is kept out of the load figure. */
void flush_results(rtomod_worker *w)
{
    rtomod_result *list = w->outbox_head;
    w->outbox_head = w->outbox_tail = NULL;
    w->blocked_seconds += rtomod_finisher_push(w->finisher, list);
}

void post_error(rtomod_worker *w, uint64_t serial, int fatal,
                       const char *reason, const char *message)
{
    rtomod_result *r = result_new(w, RTOMOD_RESULT_ERROR, serial);
    if (!r)
        return;
    r->fatal = fatal;
    snprintf(r->reason, sizeof r->reason, "%s", reason);
    snprintf(r->message, sizeof r->message, "%s", message);
    log_warn("worker %d: %s", w->index, message);
    post(w, r);
}

void post_dropped(rtomod_worker *w, uint64_t serial, long n,
                         int64_t seq)
{
    rtomod_result *r = result_new(w, RTOMOD_RESULT_DROPPED, serial);
    if (r) {
        r->dropped = n;
        r->seq = seq;
        post(w, r);
    }
}

/* This worker's part of a set is out (see RTOMOD_RESULT_SET_DONE). */
void post_set_done(rtomod_worker *w, uint64_t serial, int64_t frame,
                          int64_t seq, double t_input)
{
    rtomod_result *r = result_new(w, RTOMOD_RESULT_SET_DONE, serial);
    if (r) {
        r->frame = frame;
        r->seq = seq;
        r->t_input = t_input;
        post(w, r);
    }
}

void post_stats(rtomod_worker *w, uint64_t serial, int64_t seq,
                       long slices, long frames, double updates,
                       double seconds)
{
    rtomod_result *r = result_new(w, RTOMOD_RESULT_STATS, serial);
    if (!r)
        return;
    r->seq = seq;
    r->slices = slices;
    r->frames = frames;
    r->updates = updates;
    r->seconds = seconds;
    post(w, r);
}

void post_axis(rtomod_worker *w, uint64_t serial, double axis,
               double quality, int64_t window, int applied)
{
    rtomod_result *r = result_new(w, RTOMOD_RESULT_AXIS, serial);
    if (!r)
        return;
    r->axis = axis;
    r->axis_quality = quality;
    r->frame = window;
    r->axis_applied = applied;
    post(w, r);
}

void post_done(rtomod_worker *w, uint64_t serial)
{
    post(w, result_new(w, RTOMOD_RESULT_DONE, serial));
}

/* Publish `size` bytes at `data` inside `buffer` with header `h` (the
 * finisher fills in the image statistics); seq orders SBDX frames (-1). */
void post_image(rtomod_worker *w, uint64_t serial, int64_t seq,
                       double t_input, const rtomo_image_header *h,
                       rtomod_buffer *buffer, const void *data, size_t size)
{
    post_image_as(w, RTOMOD_RESULT_IMAGE, serial, seq, t_input, h, buffer,
                  data, size);
}

void post_image_as(rtomod_worker *w, rtomod_result_kind kind,
                   uint64_t serial, int64_t seq, double t_input,
                   const rtomo_image_header *h, rtomod_buffer *buffer,
                   const void *data, size_t size)
{
    rtomod_result *r = result_new(w, kind, serial);
    if (!r)
        return;
    r->header = *h;
    r->seq = seq;
    r->t_input = t_input;
    r->buffer = rtomod_buffer_ref(buffer);
    r->data = data;
    r->size = size;
    post(w, r);
}

/* ------------------------------------------------------ plan state ---- */


/* Output buffers returned by ZeroMQ kept for reuse, per pool: enough for
 * the one the engine fills, those in the finisher and a few still being
 * sent, so that a steady stream allocates none. */
int buffers_kept(const rtomod_worker *w)
{
    return w->pool->finish_capacity + 3;
}


void plan_close(plan_state *s)
{
    rtomo_fbp_window_destroy(s->window);
    axis_free(s);
    rtomod_buffer_unref(s->preview_last);
    rtomod_buffer_pool_close(s->previews);
    free(s->preview_rows);
    iter_free(s);
    rtomo_fbp_destroy(s->fbp);
    rtomo_sbdx_destroy(s->sbdx);
    cone_plan_free(s);
    rtomod_buffer_pool_close(s->slices);
    rtomod_buffer_pool_close(s->planes);
    rtomod_buffer_pool_close(s->composite);
    rtomod_buffer_pool_close(s->depth);
    memset(s, 0, sizeof *s);
}

/* A buffer of `size` bytes from *pool, which is (re)made for that size
 * when needed.  NULL when out of memory. */
rtomod_buffer *pooled_buffer(const rtomod_worker *w,
                                    rtomod_buffer_pool **pool, size_t size)
{
    if (*pool && rtomod_buffer_pool_size(*pool) != size) {
        rtomod_buffer_pool_close(*pool);
        *pool = NULL;
    }
    if (!*pool && !(*pool = rtomod_buffer_pool_new(size, buffers_kept(w))))
        return NULL;
    return rtomod_buffer_pool_get(*pool);
}

/*
 * A buffer for a batch of `size` bytes of slices.  A CUDA worker keeps
 * these pools across scans, their buffers page-locked up to
 * pool->locked_bytes: resident slices are then read from the GPU straight
 * into them at the bus's rate (rtomo_host_alloc), not through the
 * engine's staging buffers and a host copy, and no scan pays again for
 * fresh pages (a 2048^2 batch of 64 slices is 1 GiB; per-scan buffers
 * went back to the kernel when the scan ended, and the next scan's first
 * touch of each page cost a fault).  The pool of the least recently used
 * size makes way for a new size.  Other workers take the plan's pool.
 */
rtomod_buffer *slice_buffer(rtomod_worker *w, plan_state *s, size_t size)
{
    if (w->device < 0 || w->pool->locked_bytes < size)
        return pooled_buffer(w, &s->slices, size);
    int at = -1, oldest = 0;
    size_t locked_elsewhere = 0;
    for (int i = 0; i < RTOMOD_SLICE_POOLS; i++) {
        rtomod_buffer_pool *p = w->slice_pools[i];
        if (p && rtomod_buffer_pool_size(p) == size)
            at = i;
        else if (p)
            locked_elsewhere += rtomod_buffer_pool_size(p) *
                                (size_t)rtomod_buffer_pool_locked(p);
        if (w->slice_pool_used[i] < w->slice_pool_used[oldest])
            oldest = i;
    }
    if (at < 0) {
        at = oldest;
        if (w->slice_pools[at]) {
            rtomod_buffer_pool *p = w->slice_pools[at];
            locked_elsewhere -= rtomod_buffer_pool_size(p) *
                                (size_t)rtomod_buffer_pool_locked(p);
            rtomod_buffer_pool_close(p);
        }
        size_t room = w->pool->locked_bytes > locked_elsewhere
                          ? w->pool->locked_bytes - locked_elsewhere : 0;
        if (!(w->slice_pools[at] = rtomod_buffer_pool_new_locked(
                  size, buffers_kept(w), (int)(room / size))))
            return NULL;
    }
    w->slice_pool_used[at] = ++w->slice_pool_clock;
    return rtomod_buffer_pool_get(w->slice_pools[at]);
}

int job_matches_plan(const plan_state *s, const rtomod_job *job)
{
    return s && s->serial == job->serial && !s->failed;
}

/* A worker's plans, one per scan in flight. */
typedef struct plan_table {
    plan_state plans[RTOMOD_MAX_SCANS];
} plan_table;

/* The plan of this scan, or NULL. */
static plan_state *plan_of(plan_table *t, uint64_t serial)
{
    for (int i = 0; i < RTOMOD_MAX_SCANS; i++)
        if (t->plans[i].serial == serial)
            return &t->plans[i];
    return NULL;
}

/* A free slot for a new scan's plan, claimed for it; NULL when every slot
 * is taken (the loop admits at most scans.max <= RTOMOD_MAX_SCANS scans,
 * so only a bug gets here). */
static plan_state *plan_new(rtomod_worker *w, plan_table *t,
                            const rtomod_job *job)
{
    plan_state *s = plan_of(t, 0);
    if (!s) {
        post_error(w, job->serial, 1, "internal", "worker holds the plans "
                   "of too many scans");
        return NULL;
    }
    s->serial = job->serial;
    snprintf(s->scan, sizeof s->scan, "%s", job->scan);
    return s;
}

/* A plan with SBDX frames in its pipeline, or NULL. */
static plan_state *plan_pending(plan_table *t)
{
    for (int i = 0; i < RTOMOD_MAX_SCANS; i++)
        if (t->plans[i].n_pending > 0)
            return &t->plans[i];
    return NULL;
}

/* Report an engine failure; creation failures and backend errors make the
 * plan unusable, so later frames of the scan are dropped. */
void engine_failed(rtomod_worker *w, plan_state *s, uint64_t serial,
                          const char *what, const rtomo_error *err)
{
    char message[2 * RTOMO_REASON_MAX];
    snprintf(message, sizeof message, "scan %s: %s: %s", s->scan, what,
             err->message);
    if (err->code == RTOMO_E_BACKEND || err->code == RTOMO_E_NOMEM ||
        err->code == RTOMO_E_UNAVAILABLE)
        s->failed = 1;
    post_error(w, serial, s->failed, rtomo_status_name(err->code), message);
}

/* --------------------------------------------------------- dispatch ---- */

static void handle_job(rtomod_worker *w, plan_table *t, rtomod_job *job)
{
    plan_state *s = plan_of(t, job->serial);
    switch (job->kind) {
    case RTOMOD_JOB_TOMO_BEGIN:
    case RTOMOD_JOB_SBDX_BEGIN:
    case RTOMOD_JOB_CONE_BEGIN:
        if (s)
            plan_close(s);      /* cannot happen: serials are unique */
        if (!(s = plan_new(w, t, job)))
            return;
        if (job->kind == RTOMOD_JOB_TOMO_BEGIN)
            tomo_begin(w, s, job);
        else if (job->kind == RTOMOD_JOB_CONE_BEGIN)
            cone_begin(w, s, job);
        else
            sbdx_begin(w, s, job);
        return;
    case RTOMOD_JOB_CLOSE:
        if (s) {
            if (s->sbdx && !s->failed)
                sbdx_flush(w, s, job->u.abort);
            if (s->cone && !s->failed && !job->u.abort &&
                !rtomod_worker_aborted(w, job->serial))
                cone_finish(w, s, job);
            plan_close(s);
        }
        post_done(w, job->serial);
        return;
    case RTOMOD_JOB_TOMO_RECONSTRUCT:
        if (job_matches_plan(s, job) && s->fbp)
            tomo_reconstruct(w, s, job);
        post_set_done(w, job->serial, job->u.recon.frame, -1, job->t_input);
        if (s && w->outbox_tail)
            w->outbox_tail->t_ready = s->t_ready;
        if (job->u.recon.close_plan) {
            /* The set's end goes out before the plan is torn down:
             * freeing its device memory takes tens of milliseconds that
             * the scan's completion need not wait for. */
            flush_results(w);
            if (s)
                plan_close(s);
            post_done(w, job->serial);
        }
        return;
    default:
        break;
    }
    /* Frames: used by a live plan of their scan, else dropped. */
    int usable = job_matches_plan(s, job) &&
                 (job->kind == RTOMOD_JOB_SBDX_FRAME ? s->sbdx != NULL
                                                     : s->fbp || s->cone) &&
                 !rtomod_worker_aborted(w, job->serial);
    if (!usable) {
        post_dropped(w, job->serial, 1, job->seq);
        if (job->kind == RTOMOD_JOB_SBDX_FRAME)
            post_set_done(w, job->serial, job->index, job->seq,
                          job->t_input);
    } else if (job->kind == RTOMOD_JOB_SBDX_FRAME)
        sbdx_frame(w, s, job);
    else if (s->cone)
        cone_frame(w, s, job);
    else
        tomo_frame(w, s, job);
}

/* ----------------------------------------------------------- thread ---- */

static int queue_full(const rtomod_worker *w)
{
    return w->n_jobs >= w->pool->max_jobs || w->bytes >= w->pool->max_bytes;
}

/* The next job, waiting for one unless frames are pipelined (then NULL when
 * the queue is empty, so that the caller collects them).  NULL with
 * *stop set when the worker must end. */
static rtomod_job *next_job(rtomod_worker *w, int have_pending, int *stop)
{
    pthread_mutex_lock(&w->lock);
    if (!w->head && !have_pending)
        w->running = 0;
    while (!w->head && !w->stopping && !have_pending)
        pthread_cond_wait(&w->wake, &w->lock);
    rtomod_job *job = w->head;
    int was_full = 0;
    if (job) {
        was_full = queue_full(w);
        w->head = job->next;
        if (!w->head)
            w->tail = NULL;
        w->n_jobs--;
        w->n_frames -= job_is_frame(job);
        w->bytes -= job_bytes(job);
        w->running = 1;
    }
    *stop = !job && !have_pending && w->stopping;
    pthread_mutex_unlock(&w->lock);
    /* Room again: let the loop resume reading frames. */
    if (was_full)
        ev_async_send(w->pool->loop, w->pool->wake_loop);
    return job;
}

static void *worker_main(void *arg)
{
    rtomod_worker *w = arg;
    plan_table table = {0};
    plan_table *plans = &table;
    for (;;) {
        int stop;
        plan_state *pending = plan_pending(plans);
        rtomod_job *job = next_job(w, pending != NULL, &stop);
        if (stop)
            break;
        double t0 = now_seconds();
        w->blocked_seconds = 0.0;
        if (job) {
            handle_job(w, plans, job);
            rtomod_job_free(job);
        } else {
            sbdx_collect_one(w, pending, 0);
        }
        flush_results(w);
        double busy = now_seconds() - t0 - w->blocked_seconds;
        atomic_fetch_add(&w->busy_ns, (uint64_t)(busy > 0 ? busy * 1e9 : 0));
    }
    for (int i = 0; i < RTOMOD_MAX_SCANS; i++)
        plan_close(&plans->plans[i]);
    for (int i = 0; i < RTOMOD_SLICE_POOLS; i++)
        rtomod_buffer_pool_close(w->slice_pools[i]);
    pthread_mutex_lock(&w->lock);
    w->running = 0;
    pthread_mutex_unlock(&w->lock);
    ev_async_send(w->pool->loop, w->pool->wake_loop);
    return NULL;
}

/* ------------------------------------------------------------- pool ---- */

/* CPU threads of each of n CPU workers: an equal share of the configured
 * threads (or of the online cores), at least one. */
static int cpu_share(const rtomo_engine_options *options, int n)
{
    long total = options->cpu_threads > 0 ? options->cpu_threads
                                          : sysconf(_SC_NPROCESSORS_ONLN);
    long share = total / n;
    return share > 0 ? (int)share : 1;
}

int rtomod_pool_start(rtomod_pool *pool, const rtomo_engine_options *options,
                      const int *devices, int n_devices, int cpu_workers,
                      int max_jobs, size_t max_bytes, int stats_threads,
                      size_t locked_bytes, struct ev_loop *loop,
                      ev_async *wake_loop, char *error, size_t error_size)
{
    memset(pool, 0, sizeof *pool);
    pool->n = n_devices > 0 ? n_devices : cpu_workers > 0 ? cpu_workers : 1;
    pool->max_jobs = max_jobs;
    pool->max_bytes = max_bytes;
    pool->locked_bytes = n_devices > 0 ? locked_bytes : 0;
    /* Every finisher thread busy with a unit and one more unit waiting:
     * the worker is then a whole unit ahead of the finisher, no more. */
    pool->finish_capacity = (stats_threads > 0 ? stats_threads : 1) + 1;
    pool->loop = loop;
    pool->wake_loop = wake_loop;
    pthread_mutex_init(&pool->lock, NULL);
    pool->workers = calloc((size_t)pool->n, sizeof *pool->workers);
    if (!pool->workers) {
        snprintf(error, error_size, "out of memory for %d workers", pool->n);
        return -1;
    }
    for (int i = 0; i < pool->n; i++) {
        rtomod_worker *w = &pool->workers[i];
        w->pool = pool;
        w->index = i;
        w->options = *options;
        if (n_devices > 0) {
            w->device = devices[i];
            w->options.backend = RTOMO_BACKEND_CUDA;
            w->options.n_devices = 1;
            w->options.device_ids[0] = devices[i];
        } else {
            w->device = -1;
            w->options.backend = RTOMO_BACKEND_CPU;
            w->options.cpu_threads = cpu_share(options, pool->n);
        }
        pthread_mutex_init(&w->lock, NULL);
        pthread_cond_init(&w->wake, NULL);
        w->finisher = rtomod_finisher_start(stats_threads,
                                            pool->finish_capacity,
                                            deliver_to_loop, pool,
                                            &w->abort_serial, error,
                                            error_size);
        if (!w->finisher) {
            rtomod_pool_stop(pool, 1);
            return -1;
        }
        int rc = pthread_create(&w->thread, NULL, worker_main, w);
        if (rc != 0) {
            snprintf(error, error_size, "cannot start worker %d: %s", i,
                     strerror(rc));
            rtomod_pool_stop(pool, 1);
            return -1;
        }
        w->started = 1;
    }
    return 0;
}

/* Unlink the queued jobs of worker w that match (all when serial is 0). */
static long purge_worker(rtomod_worker *w, uint64_t serial)
{
    long frames = 0;
    rtomod_job **link = &w->head, *job;
    w->tail = NULL;
    while ((job = *link)) {
        if (serial == 0 || job->serial == serial) {
            *link = job->next;
            w->n_jobs--;
            w->n_frames -= job_is_frame(job);
            w->bytes -= job_bytes(job);
            frames += job_is_frame(job);
            rtomod_job_free(job);
        } else {
            w->tail = job;
            link = &job->next;
        }
    }
    return frames;
}

void rtomod_pool_stop(rtomod_pool *pool, int discard)
{
    for (int i = 0; i < pool->n; i++) {
        rtomod_worker *w = &pool->workers[i];
        pthread_mutex_lock(&w->lock);
        if (discard) {
            long dropped = purge_worker(w, 0);
            rtomod_result *r = dropped ? result_new(w, RTOMOD_RESULT_DROPPED,
                                                    0) : NULL;
            if (r) {
                r->dropped = dropped;
                deliver_to_loop(pool, r);
            }
        }
        w->stopping = 1;
        pthread_cond_signal(&w->wake);
        pthread_mutex_unlock(&w->lock);
    }
    for (int i = 0; i < pool->n; i++) {
        rtomod_worker *w = &pool->workers[i];
        if (w->started)
            pthread_join(w->thread, NULL);
        w->started = 0;
        /* After its worker: everything the worker made is delivered. */
        rtomod_finisher_stop(w->finisher);
        w->finisher = NULL;
    }
}

void rtomod_pool_free(rtomod_pool *pool)
{
    for (int i = 0; pool->workers && i < pool->n; i++) {
        rtomod_worker *w = &pool->workers[i];
        purge_worker(w, 0);
        pthread_mutex_destroy(&w->lock);
        pthread_cond_destroy(&w->wake);
    }
    free(pool->workers);
    rtomod_result *r = rtomod_pool_take_results(pool);
    while (r) {
        rtomod_result *next = r->next;
        rtomod_result_free(r);
        r = next;
    }
    pthread_mutex_destroy(&pool->lock);
    memset(pool, 0, sizeof *pool);
}

int rtomod_pool_has_room(rtomod_pool *pool)
{
    int room = 1;
    for (int i = 0; i < pool->n && room; i++) {
        rtomod_worker *w = &pool->workers[i];
        pthread_mutex_lock(&w->lock);
        room = !queue_full(w);
        pthread_mutex_unlock(&w->lock);
    }
    return room;
}

void rtomod_pool_push(rtomod_pool *pool, int index, rtomod_job *job)
{
    rtomod_worker *w = &pool->workers[index];
    job->next = NULL;
    pthread_mutex_lock(&w->lock);
    if (w->tail)
        w->tail->next = job;
    else
        w->head = job;
    w->tail = job;
    w->n_jobs++;
    w->n_frames += job_is_frame(job);
    w->bytes += job_bytes(job);
    w->running = 1;
    pthread_cond_signal(&w->wake);
    pthread_mutex_unlock(&w->lock);
}

int rtomod_worker_aborted(rtomod_worker *w, uint64_t serial)
{
    if (atomic_load(&w->abort_serial) == serial)
        return 1;
    for (int i = 0; i < RTOMOD_ABORTED_KEPT; i++)
        if (atomic_load(&w->aborted[i]) == serial)
            return 1;
    return 0;
}

long rtomod_pool_purge(rtomod_pool *pool, uint64_t serial)
{
    long frames = 0;
    for (int i = 0; i < pool->n; i++) {
        rtomod_worker *w = &pool->workers[i];
        unsigned slot = atomic_fetch_add(&w->aborted_next, 1u);
        atomic_store(&w->aborted[slot % RTOMOD_ABORTED_KEPT], serial);
        atomic_store(&w->abort_serial, serial);
        pthread_mutex_lock(&w->lock);
        frames += purge_worker(w, serial);
        pthread_mutex_unlock(&w->lock);
    }
    return frames;
}

rtomod_result *rtomod_pool_take_results(rtomod_pool *pool)
{
    pthread_mutex_lock(&pool->lock);
    rtomod_result *list = pool->results_head;
    pool->results_head = pool->results_tail = NULL;
    pool->n_results = 0;
    pthread_mutex_unlock(&pool->lock);
    return list;
}

/* Jobs and frames queued over all workers, each worker's pair read under
 * its lock. */
static void count_queued(rtomod_pool *pool, int *jobs, int *frames)
{
    *jobs = *frames = 0;
    for (int i = 0; i < pool->n; i++) {
        rtomod_worker *w = &pool->workers[i];
        pthread_mutex_lock(&w->lock);
        *jobs += w->n_jobs;
        *frames += w->n_frames;
        pthread_mutex_unlock(&w->lock);
    }
}

int rtomod_pool_queued_jobs(rtomod_pool *pool)
{
    int jobs, frames;
    count_queued(pool, &jobs, &frames);
    return jobs;
}

int rtomod_pool_queued_frames(rtomod_pool *pool)
{
    int jobs, frames;
    count_queued(pool, &jobs, &frames);
    return frames;
}

/* Results the loop has not taken yet. */
static int results_for_loop(rtomod_pool *pool)
{
    pthread_mutex_lock(&pool->lock);
    int n = pool->n_results;
    pthread_mutex_unlock(&pool->lock);
    return n;
}

int rtomod_pool_queued_results(rtomod_pool *pool)
{
    int n = 0;
    for (int i = 0; i < pool->n; i++)
        if (pool->workers[i].finisher)
            n += rtomod_finisher_pending(pool->workers[i].finisher);
    return n + results_for_loop(pool);
}

/* Results move forward only (worker, finisher, loop), each handed on
 * before its holder reports itself empty: checked in that order, nothing
 * can slip past unseen. */
int rtomod_pool_idle(rtomod_pool *pool)
{
    for (int i = 0; i < pool->n; i++) {
        rtomod_worker *w = &pool->workers[i];
        pthread_mutex_lock(&w->lock);
        int busy = w->running || w->head;
        pthread_mutex_unlock(&w->lock);
        if (busy)
            return 0;
    }
    return rtomod_pool_queued_results(pool) == 0;
}
