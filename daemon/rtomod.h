/*
 * rtomod.h — the state of rtomod shared by its subsystems, all of which run
 * on the event loop's thread (only worker.c and finisher.c have threads of
 * their own):
 *
 *   daemon.c     start-up, the result dispatch, signals, drain and exit
 *   ingest.c     the PULL socket: receive, validate, reject, dispatch
 *   scan.c       the scan registry: scans acquiring and reconstructing,
 *                their history, admission (budget.c, history.c)
 *   scan_tomo.c  tomography scans: begin, frames, end -> reconstruction jobs
 *   scan_sbdx.c  SBDX streams: begin, frames, end
 *   scan_cone.c  cone-beam tomography scans (a "tomo" scan with `cone`)
 *   control.c    the REP socket: status, configuration, abort
 *   telemetry.c  rates, state and the periodic telemetry message
 *   publish.c    the PUB socket
 *   worker.c     engine threads and their queues
 *   finisher.c   image statistics and delivery of the workers' results
 */
#ifndef RTOMOD_DAEMON_H
#define RTOMOD_DAEMON_H

#include <stdint.h>
#include <time.h>

#include <ev.h>
#include <jansson.h>
#include <zmq.h>

#include "rtomod_budget.h"
#include "rtomod_config.h"
#include "rtomod_history.h"
#include "rtomod_loop.h"
#include "rtomod_output.h"
#include "rtomod_publish.h"
#include "rtomo_protocol.h"
#include "rtomod_worker.h"
#include "sd_notify.h"

#define RTOMOD_VERSION PACKAGE_VERSION

typedef struct rtomod rtomod;

/* ---------------------------------------------------------- counters ---- */

typedef struct rtomod_counters {
    uint64_t accepted;          /* ingest messages accepted */
    uint64_t rejected;          /* ingest messages rejected, ... */
    uint64_t rejects[RTOMO_REJECT_COUNT];   /* ... by reason */
    uint64_t dropped;           /* accepted frames never reconstructed */
    uint64_t frames;            /* frame messages accepted */
    uint64_t bytes;             /* their payload bytes */
    uint64_t slices;            /* slices reconstructed */
    uint64_t sbdx_frames;       /* SBDX frames reconstructed */
    uint64_t windows;           /* continuous windows published */
    uint64_t windows_skipped;   /* continuous windows skipped */
    /* Scans: begun; completed (of which incomplete: ended by rtomod before
     * their end message with projections missing); aborted; begins
     * refused; ended by the idle timeout (complete or aborted). */
    uint64_t scans_started, scans_complete, scans_incomplete;
    uint64_t scans_aborted, scans_refused, scans_timed_out;
} rtomod_counters;

/* ------------------------------------------------------------- scans ---- */

/* Which indices of a stream were seen: a bitmap over a window of indices
 * that slides forward with the highest index (for unbounded streams). */
typedef struct rtomod_seen {
    unsigned char *bits;
    int64_t capacity;           /* indices remembered */
    int64_t highest;            /* -1 before the first */
    int64_t count;              /* distinct indices marked */
} rtomod_seen;

int rtomod_seen_init(rtomod_seen *s, int64_t capacity);
void rtomod_seen_free(rtomod_seen *s);
/* 0: newly marked; 1: already seen; -1: too old to tell (before the
 * window). */
int rtomod_seen_mark(rtomod_seen *s, int64_t index);
int rtomod_seen_has(const rtomod_seen *s, int64_t index);
/* Forget `index` again (its frame was refused after it was marked, e.g.
 * out of memory for its job): it counts as missing and may be resent. */
void rtomod_seen_unmark(rtomod_seen *s, int64_t index);

typedef enum rtomod_scan_kind { RTOMOD_SCAN_TOMO, RTOMOD_SCAN_SBDX }
    rtomod_scan_kind;

/* Where a live scan is in its life (what happens after is in history.c). */
typedef enum rtomod_scan_phase {
    RTOMOD_SCAN_ACQUIRING,      /* takes input (end_pending: its end came,
                                   stragglers are still welcome) */
    RTOMOD_SCAN_FINISHING       /* ended, waiting for the workers */
} rtomod_scan_phase;

typedef struct rtomod_tomo_scan rtomod_tomo_scan;   /* scan_tomo.c */
typedef struct rtomod_sbdx_scan rtomod_sbdx_scan;   /* scan_sbdx.c */
typedef struct rtomod_cone_scan rtomod_cone_scan;   /* scan_cone.c */

typedef struct rtomod_scan {
    struct rtomod_scan *next;   /* in d->scans, oldest first */
    rtomod *d;
    rtomod_scan_kind kind;
    rtomod_scan_phase phase;
    char id[RTOMO_ID_MAX];
    uint64_t serial;            /* unique per scan, names its jobs */
    int end_pending;            /* end received, frames still missing: wait
                                   ingest.reorder_ms for stragglers */
    ev_timer end_timer;         /* the pending end's wait */
    ev_timer idle_timer;        /* ends a scan whose sender went quiet */
    int failed;                 /* the engine refused the scan */
    char failure[RTOMO_REASON_MAX];
    int incomplete;             /* ended by the idle timeout or a shutdown
                                   before its own end */
    char end_code[32];          /* why it ended without its end: "idle_timeout",
                                   "shutdown"; "" otherwise */
    uint32_t workers;           /* bit i: worker i holds a plan of it */
    int parts_pending;          /* DONE results still expected */
    double t_begin;             /* monotonic seconds */
    double t_last_input;        /* latest frame or end message */
    long frames;                /* frames accepted */
    long dropped;               /* frames accepted but not used */
    long images;                /* images published */
    long rejected;              /* messages naming it that were rejected */
    uint32_t rejects[RTOMO_REJECT_COUNT];
    rtomod_budget_claim claim;  /* memory admitted for it (budget.c) */
    char start_note[896];       /* added to the scan_started message
                                   (RTOMO_MESSAGE_MAX, with room for its
                                   opening) */
    char start_reason[32];      /* its reason code ("" = none) */
    rtomod_tomo_scan *tomo;
    rtomod_sbdx_scan *sbdx;
    rtomod_cone_scan *cone;     /* a cone-beam tomography scan: kind TOMO,
                                   tomo NULL */
    int output_file;            /* has an HDF5 file (rtomod_output.h) */
} rtomod_scan;

/* A new scan record (not yet registered), with the next serial. */
rtomod_scan *rtomod_scan_new(rtomod *d, rtomod_scan_kind kind,
                             const char *id);
void rtomod_scan_free(rtomod_scan *scan);
/* The live scan (acquiring or finishing) with this serial, or NULL. */
rtomod_scan *rtomod_scan_find(rtomod *d, uint64_t serial);
/* The acquiring scan with this id, or NULL. */
rtomod_scan *rtomod_scan_acquiring(rtomod *d, const char *id);
/* The newest live scan with this id, or NULL. */
rtomod_scan *rtomod_scan_named(rtomod *d, const char *id);
/* Live scans in a phase. */
int rtomod_scan_count(rtomod *d, rtomod_scan_phase phase);
/* A scan's method settings: its own where it gave them, the
 * configuration's elsewhere, `method` when it named none (parallel beams
 * take the daemon's default method, cone beams FDK).  The configured
 * clamp applies to SIRT only. */
void rtomod_scan_method(const rtomod_config *cfg, const rtomo_scan_spec *spec,
                        rtomo_method method, rtomo_method_settings *m);
/* The scan no longer takes input: it waits for `parts` DONE results from
 * the workers (0: it completes now). */
void rtomod_scan_finish(rtomod *d, rtomod_scan *scan, int parts);
/* An end message for an acquiring scan: it finishes now when nothing is
 * missing, else after ingest.reorder_ms unless the missing frames come
 * first (they may be overtaken on another connection). */
void rtomod_scan_request_end(rtomod *d, rtomod_scan *scan);
/* Finish an acquiring scan now (its kind's way). */
void rtomod_scan_end_now(rtomod *d, rtomod_scan *scan);
/* End an acquiring scan that will get no end message (idle timeout,
 * shutdown): reconstructed from what arrived, or aborted, as
 * scans.incomplete says.  `code` and the sentence say why. */
void rtomod_scan_end_incomplete(rtomod *d, rtomod_scan *scan,
                                const char *code, const char *why);
/* A worker finished its part; the last part completes the scan. */
void rtomod_scan_part_done(rtomod *d, rtomod_scan *scan);
/* Cancel a scan (acquiring or finishing): queued jobs are dropped, plans
 * closed, every accepted frame not yet reconstructed counted dropped,
 * "scan_aborted" published.  The record is freed.  `code` is the short
 * reason ("aborted", "shutdown", "idle_timeout", "failed"). */
void rtomod_scan_abort(rtomod *d, rtomod_scan *scan, const char *code,
                       const char *why);
/* Queue a CLOSE job (finish or abort) on every worker holding a plan of
 * the scan; returns how many were queued. */
int rtomod_scan_close_plans(rtomod *d, rtomod_scan *scan, int abort);
/* Queue a job for worker w and count it as holding a plan of the scan. */
void rtomod_scan_push(rtomod *d, rtomod_scan *scan, int w, rtomod_job *job);
/* The first acquiring scan as status JSON, or null; and every live scan
 * as a list. */
json_t *rtomod_scan_status(rtomod *d);
json_t *rtomod_scans_status(rtomod *d);
/* One scan's status object. */
json_t *rtomod_scan_json(const rtomod_scan *scan);

/* The acquiring scan `msg` (a frame or end message) may feed: its id must
 * name an acquiring scan of the right kind, not failed.  Otherwise the
 * message is rejected and NULL returned. */
rtomod_scan *rtomod_scan_for_input(rtomod *d, const rtomo_ingest_msg *msg,
                                   rtomod_scan_kind kind);
/* Whether a begin message may start a scan now (not shutting down, no
 * acquiring scan of that id, fewer than scans.max in flight); rejects
 * it otherwise. */
int rtomod_scan_may_begin(rtomod *d, const rtomo_ingest_msg *msg);
/* Refuse a begin (over_budget) whose images of `bytes` each exceed
 * publish.max_image_mb; `what` names them.  Returns 0 or -1. */
int rtomod_scan_check_image(rtomod *d, const char *id, size_t bytes,
                            const char *what);
/* Claim the memory in scan->claim against the budgets, beside what the
 * acquiring scans hold (scans that ended close their plans before this
 * one's open), or reject the begin (over_budget, with the numbers; `what`
 * names the scan's kind and size).  Returns 0 or -1. */
int rtomod_scan_admit(rtomod *d, rtomod_scan *scan, const char *what);
/* The same claim without the reject: -1 with why[] filled when it does
 * not fit (the caller may then ask for less). */
int rtomod_scan_try_admit(rtomod *d, rtomod_scan *scan, char *why,
                          size_t why_size);
/* Register a new scan as acquiring, start its idle timer and announce
 * it. */
void rtomod_scan_activate(rtomod *d, rtomod_scan *scan);

/* Reject an ingest message: count it, log it, publish a "rejected" event.
 * `scan` may be NULL, index -1 when none. */
void rtomod_reject(rtomod *d, const rtomo_reject_info *why, const char *scan,
                   int64_t index);
/* Fill why and reject (printf-style message). */
void rtomod_rejectf(rtomod *d, rtomo_reject reason, const char *scan,
                    int64_t index, const char *format, ...)
    __attribute__((format(printf, 5, 6)));

/* Frame jobs: a job for a frame whose payload message is moved in (the
 * caller's message is left empty and must still be closed).  Its latency
 * counts from d->t_received, when the frame came in. */
rtomod_job *rtomod_frame_job(const rtomod *d, rtomod_job_kind kind,
                             const rtomod_scan *scan,
                             const rtomo_frame_header *frame,
                             zmq_msg_t *payload);
/* A worker's part of an image set is out (RTOMOD_RESULT_SET_DONE). */
void rtomod_scan_set_done(rtomod *d, rtomod_scan *scan,
                          const rtomod_result *r);

/* Tomography (scan_tomo.c).  Each takes the decoded message; frames also
 * their payload message (moved into a job when accepted).  Each returns 0
 * when the message was accepted, -1 when it was rejected (already counted
 * and reported). */
int rtomod_tomo_begin(rtomod *d, rtomo_ingest_msg *msg);
int rtomod_tomo_frame(rtomod *d, rtomo_ingest_msg *msg, zmq_msg_t *payload);
int rtomod_tomo_end(rtomod *d, rtomo_ingest_msg *msg);
/* End an acquiring tomography scan and start its reconstruction. */
void rtomod_tomo_finish(rtomod *d, rtomod_scan *scan);
/* Projections of a plain scan that have not arrived (0 in continuous
 * mode). */
long rtomod_tomo_missing(const rtomod_scan *scan);
/* Accepted frames that published images contain: all of a plain scan's
 * once its slices are out, a continuous stream's up to its last published
 * window. */
long rtomod_tomo_frames_used(const rtomod_scan *scan);
/* 1 when every projection of the scan has arrived (always for a
 * continuous stream). */
int rtomod_tomo_complete(const rtomod_scan *scan);
/* 1 while the scan waits for announced darks or flats before its first
 * projection. */
int rtomod_tomo_awaits_fields(const rtomod_scan *scan);
void rtomod_tomo_free(rtomod_tomo_scan *tomo);
void rtomod_tomo_status(const rtomod_scan *scan, json_t *out);
/* A worker finished its part of a reconstruction or window. */
void rtomod_tomo_set_done(rtomod *d, rtomod_scan *scan,
                          const rtomod_result *r);
/* A worker's part of a plane of any orientation: summed with the other
 * workers' parts, published with the last. */
void rtomod_tomo_plane_part(rtomod *d, rtomod_scan *scan, rtomod_result *r);
/* Publish an image result (its buffer reference goes to the publisher). */
void rtomod_publish_result(rtomod *d, rtomod_scan *scan, rtomod_result *r);
/* What scan_complete adds for a tomography scan ("; axis 1023.370
 * (found)" for "axis": "auto"), or "". */
void rtomod_tomo_end_note(const rtomod_scan *scan, char *out, size_t size);
/* A worker found the scan's rotation axis ("axis": "auto"). */
void rtomod_tomo_axis_found(rtomod *d, rtomod_scan *scan,
                            const rtomod_result *r);
/* Continuous windows queued and not yet published (0 for other scans). */
int rtomod_tomo_pending_windows(const rtomod_scan *scan);

/* Cone-beam scans (scan_cone.c): kind RTOMOD_SCAN_TOMO with scan->cone
 * set; the rtomod_tomo_* entry points hand such a scan to these.  As
 * their rtomod_tomo_* counterparts. */
int rtomod_cone_begin(rtomod *d, rtomo_ingest_msg *msg);
int rtomod_cone_frame(rtomod *d, rtomod_scan *scan, rtomo_ingest_msg *msg,
                      zmq_msg_t *payload);
void rtomod_cone_finish(rtomod *d, rtomod_scan *scan);
long rtomod_cone_missing(const rtomod_scan *scan);
int rtomod_cone_complete(const rtomod_scan *scan);
int rtomod_cone_awaits_fields(const rtomod_scan *scan);
void rtomod_cone_status(const rtomod_scan *scan, json_t *out);
void rtomod_cone_end_note(const rtomod_scan *scan, char *out, size_t size);
void rtomod_cone_free(rtomod_cone_scan *cone);

/* SBDX (scan_sbdx.c). */
int rtomod_sbdx_begin(rtomod *d, rtomo_ingest_msg *msg);
int rtomod_sbdx_frame(rtomod *d, rtomo_ingest_msg *msg, zmq_msg_t *payload);
int rtomod_sbdx_end(rtomod *d, rtomo_ingest_msg *msg);
/* End an acquiring SBDX stream: the workers finish the frames they hold. */
void rtomod_sbdx_finish(rtomod *d, rtomod_scan *scan);
/* Frames of the stream whose images are out. */
long rtomod_sbdx_frames_done(const rtomod_scan *scan);
void rtomod_sbdx_free(rtomod_sbdx_scan *sbdx);
void rtomod_sbdx_status(const rtomod_scan *scan, json_t *out);
/* Results of a stream's frames are published in frame order: a result
 * (r->seq >= 0) of a frame after the one due is kept by the stream
 * (returns 1; the stream owns it now). */
int rtomod_sbdx_hold(rtomod_scan *scan, rtomod_result *r);
/* After result r of the frame due was dispatched: when it was the frame's
 * SET_DONE, the next frame is due, and its results kept so far are
 * returned (a list in arrival order, the caller's) to be dispatched. */
rtomod_result *rtomod_sbdx_release(rtomod_scan *scan, const rtomod_result *r);

/* --------------------------------------------------------- telemetry ---- */

typedef struct rtomod_telemetry {
    ev_timer timer;
    double t_last;              /* monotonic time of the last message */
    uint64_t frames_last, bytes_last;   /* counters at the last message */
    uint64_t busy_last[RTOMO_MAX_DEVICES];
    double frames_per_s, mb_per_s;
    double gu_per_s;            /* of the last batch or frame */
    double last_latency_ms;     /* last input to last publication */
    double last_ready_ms;       /* tomography: last input to the last
                                   image of the set in host memory, ready
                                   to publish (the engine's share) */
    double load[RTOMO_MAX_DEVICES]; /* workers' busy fraction */
    /* The last continuous axis measurement ("axis": "auto"): drift
     * telemetry for control loops (axis_scan "" = none yet). */
    char axis_scan[RTOMO_ID_MAX];
    double axis, axis_quality, axis_drift;
    int64_t axis_window;
    int axis_applied;
    int pending;                /* a batch finished since the last message */
    double t_status;            /* last systemd STATUS= line */
    /* The last iteration of an iterative solve (iter_scan "" = none yet):
     * how far it is and how fast it goes. */
    char iter_scan[RTOMO_ID_MAX];
    rtomod_iter_progress iter;
} rtomod_telemetry;

void rtomod_telemetry_start(rtomod *d);
void rtomod_telemetry_stop(rtomod *d);
/* An iteration of a solve of `scan` is done (RTOMOD_RESULT_ITERATION). */
void rtomod_telemetry_iteration(rtomod *d, const char *scan,
                                const rtomod_result *r);
/* A worker's batch statistics arrived. */
void rtomod_telemetry_stats(rtomod *d, const rtomod_result *r);
/* An image set was published with this latency. */
void rtomod_telemetry_latency(rtomod *d, double latency_ms);
/* Publish telemetry now unless one went out less than the rate limit ago. */
void rtomod_telemetry_maybe_publish(rtomod *d);
/* Reschedule after telemetry.interval_ms changed. */
void rtomod_telemetry_reconfigure(rtomod *d);
/* "idle", "acquiring", "reconstructing", "streaming". */
const char *rtomod_state_name(rtomod *d);
/* The figures of the last telemetry message (new reference). */
json_t *rtomod_telemetry_json(rtomod *d);

/* ----------------------------------------------------------- control ---- */

int rtomod_control_open(rtomod *d, char *error, size_t error_size);
void rtomod_control_close(rtomod *d);

/* ------------------------------------------------------------ ingest ---- */

int rtomod_ingest_open(rtomod *d, char *error, size_t error_size);
void rtomod_ingest_close(rtomod *d);
/* Whether a message waits unread on the ingest socket. */
int rtomod_ingest_has_waiting(rtomod *d);
/* Frames that arrive before their scan's begin (over another connection)
 * wait up to ingest.reorder_ms; a begin replays those of its scan. */
void rtomod_ingest_replay_early(rtomod *d, const char *scan);
/* Reject every waiting early frame now (shutdown). */
void rtomod_ingest_flush_early(rtomod *d);
/* Accept or reject a message decoded elsewhere (a detector-native input,
 * a control request's begin) exactly as one read from the socket, now:
 * 0 when accepted. */
int rtomod_ingest_deliver(rtomod *d, rtomo_ingest_msg *msg,
                          zmq_msg_t *payload);

/* ------------------------------------------------------------ daemon ---- */

typedef enum rtomod_phase {
    RTOMOD_RUNNING = 0,
    RTOMOD_DRAINING,            /* signal received: reading what was sent */
    RTOMOD_FINISHING,           /* ingest closed: waiting for the workers */
    RTOMOD_STOPPING             /* leave the loop */
} rtomod_phase;

typedef struct rtomod_gpu {
    int index;
    char name[256];
    size_t memory_total;
} rtomod_gpu;

struct rtomod {
    rtomod_config cfg;
    struct ev_loop *loop;
    void *zmq;
    void *ingest;
    void *control;
    rtomod_zwatch ingest_watch, control_watch;
    rtomod_publisher pub;
    rtomod_pool pool;
    struct rtomod_inputs *inputs;   /* detector-native (rtomod_input.h) */
    struct rtomod_output *output;   /* HDF5 files, or NULL (off) */
    /* The begin message being handled, as received (for the files). */
    const char *begin_header;
    size_t begin_header_size;
    rtomo_backend backend;      /* resolved: CPU or CUDA */
    rtomod_gpu gpus[RTOMO_MAX_DEVICES];
    int n_gpus;                 /* = workers with CUDA, 0 with the CPU */
    ev_async wake;              /* workers: results, or room in a queue */
    ev_signal sigterm, sigint;
    rtomo_notifier notifier;    /* systemd, when run by it */
    ev_timer watchdog_timer;
    ev_timer drain_timer;
    ev_timer trim_timer;        /* returns idle memory (rtomod_memory.h) */
    struct rtomod_early *early_head, *early_tail;   /* frames before begin */
    int n_early;
    ev_timer early_timer;
    rtomod_counters counters;
    rtomod_telemetry telemetry;
    /* The last axis found (any scan, "axis": "auto") and its detector's
     * width: where a continuous stream of that width starts. */
    double last_axis;
    int last_axis_width;
    rtomod_scan *scans;         /* live scans, oldest first */
    rtomod_budget budget;       /* memory admitted for them */
    rtomod_history history;     /* what became of recent scans */
    rtomo_fbp_plane planes[RTOMOD_MAX_PLANES];  /* asked for by operators */
    int n_planes;
    int handling_begin;         /* the message being handled is a begin:
                                   a reject of it is a refusal */
    uint64_t next_serial;
    double t_start;             /* monotonic */
    rtomod_phase phase;
    double t_phase;             /* when the phase began */
    double t_last_ingest;       /* last message read */
    double t_received;          /* arrival of the message being handled */
    uint64_t messages_at_signal;/* ingest messages read before the signal */
    int exit_code;
};

/* Put every message of a scan on the right record: a live scan, or its
 * history (rejects are counted there; a begin's refusal makes a record
 * "refused"). */
rtomod_outcome *rtomod_outcome_for(rtomod *d, const char *id);
/* A live scan's outcome so far (for the "scan" request). */
void rtomod_scan_outcome(const rtomod_scan *scan, rtomod_outcome *out);

/* Monotonic seconds. */
double rtomod_now(void);

/* Planes of any orientation in their control form (planes.c): a JSON list
 * of {"centre", "u", "v", "width", "height"} checked into planes[] (u, v
 * normalised); -1 with why[] naming the field. */
int rtomod_planes_from_json(const json_t *list, rtomo_fbp_plane *planes,
                            int *n_planes, char *why, size_t n);
json_t *rtomod_planes_to_json(const rtomo_fbp_plane *planes, int n_planes);

/* Build everything from the configuration (sockets, workers, watchers).
 * Returns 0, or -1 with `error` filled and everything released. */
int rtomod_open(rtomod *d, const rtomod_config *cfg, char *error,
                size_t error_size);
/* Run until a signal's drain completes; returns the exit status. */
int rtomod_run(rtomod *d);
void rtomod_close(rtomod *d);

/* Apply a runtime configuration change (control's set_config). */
int rtomod_reconfigure(rtomod *d, const json_t *changes, char *error,
                       size_t error_size);

#endif /* RTOMOD_DAEMON_H */
