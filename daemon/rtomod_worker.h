/*
 * rtomod_worker.h — the engine threads of rtomod and the queues that
 * connect them to the event loop.
 *
 * Each worker owns its engine plans: one worker per GPU with the CUDA
 * backend, or one worker whose CPU plans run the CPU backend's own threads.
 * The loop pushes jobs (scan begin, frames, reconstruct, close) into a
 * worker's bounded FIFO; the worker hands its results (images, statistics,
 * errors, completion) to its finisher (rtomod_finisher.h), whose threads
 * compute the images' statistics while the worker is back at the engine,
 * then queue the results, in the worker's order, for the loop and wake it
 * with ev_async.  The loop never waits on a worker: it checks for room
 * before it reads a frame (back-pressure) and collects results when woken.
 *
 * A frame's ZeroMQ message travels inside its job and is closed by the
 * worker once the engine has consumed it, so a frame is never copied on its
 * way to the engine.
 */
#ifndef RTOMOD_WORKER_H
#define RTOMOD_WORKER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include <ev.h>
#include <zmq.h>

#include "rtomod_buffer.h"
#include "rtomo_cone.h"
#include "rtomo_engine.h"
#include "rtomo_protocol.h"

typedef enum rtomod_job_kind {
    RTOMOD_JOB_TOMO_BEGIN,      /* create an FBP plan */
    RTOMOD_JOB_TOMO_DARK,
    RTOMOD_JOB_TOMO_FLAT,
    RTOMOD_JOB_TOMO_FLAT_AFTER, /* a flat after the projections */
    RTOMOD_JOB_TOMO_PROJECTION,
    RTOMOD_JOB_TOMO_RECONSTRUCT,/* back-project rows, publish, maybe close */
    RTOMOD_JOB_SBDX_BEGIN,      /* create an SBDX plan */
    RTOMOD_JOB_SBDX_FRAME,
    RTOMOD_JOB_CONE_BEGIN,      /* create a cone-beam plan (worker_cone.c);
                                   its frames are TOMO_DARK, TOMO_FLAT and
                                   TOMO_PROJECTION jobs, its end a CLOSE */
    RTOMOD_JOB_CLOSE            /* finish (SBDX: flush) or abort, free plans */
} rtomod_job_kind;

/* Opposed pairs of projections an automatic axis is found from, at most. */
#define RTOMOD_AXIS_PAIRS 4

/* Aborted scans a worker remembers (rtomod_worker_aborted). */
#define RTOMOD_ABORTED_KEPT 16

/* Sizes of slice buffers a CUDA worker keeps pools of across scans. */
#define RTOMOD_SLICE_POOLS 2

/* What a tomography plan needs beyond its geometry, decided by the loop. */
typedef struct rtomod_tomo_begin_job {
    rtomo_fbp_geometry geometry;    /* kept rows of this worker; owns angles
                                       and axis_shift.  Continuous: n_proj
                                       is the window's ring of slots,
                                       window_proj the window */
    int continuous;             /* projections arrive by global index into
                                   a sliding window (rtomo_fbp_window) */
    int window_refresh;         /* continuous: reads between exact
                                   recomputations of resident slices */
    int *resident;              /* rows kept as resident slices, ascending
                                   (owned); n_resident 0 = none */
    int n_resident;
    int n_rows;                 /* rows this worker reconstructs */
    int batch;                  /* reconstruction.batch: slices per read
                                   (0 = the worker's choice) */
    int preview_every;          /* projections between previews, 0 = none */
    int *preview_rows;          /* resident rows previewed (owned) */
    int n_preview;
    /* "axis": "auto": pairs of opposed projections to find it from
     * (n_axis_pairs 0 = the axis is given). */
    int axis_pairs[RTOMOD_AXIS_PAIRS][2];
    int n_axis_pairs;
    /* Continuous "axis": "auto": re-measure the axis at every window
     * that ends a multiple of axis_every projections after the first
     * (0 = not tracked), and apply a change beyond axis_tolerance bins. */
    int64_t axis_every;
    double axis_tolerance;
    int flats_after;            /* flats after the projections announced:
                                   interpolate before reconstructing */
    /* reconstruction.method sirt or cgls (worker_iter.c): the line
     * integrals of iter_rows (ascending, owned) are kept as frames come,
     * and solved for iter_batch rows at a time after their FBP. */
    rtomo_method_settings method;
    int *iter_rows;
    int n_iter_rows;
    int iter_batch;
} rtomod_tomo_begin_job;

/* Planes of any orientation an operator asked for (control "planes"). */
#define RTOMOD_MAX_PLANES 4

typedef struct rtomod_tomo_reconstruct_job {
    int *rows;                  /* detector rows (owned) */
    int *set_index;             /* their positions in the published set */
    int n_rows;
    int set_count;              /* images in the whole set (all workers) */
    int roi[4];                 /* x, y, w, h; all 0 = the whole grid */
    rtomo_interp interp;
    int batch;                  /* slices per engine call */
    int64_t frame;              /* window index (continuous), -1 otherwise */
    /* Continuous windows: the projections the window holds (indices) and
     * their angles in degrees, for the slice headers; -1 and NaN for a
     * plain scan. */
    int64_t projection_first, projection_last;
    double angle_first, angle_last;
    int close_plan;             /* 1: the scan is over, free the plan */
    /* Planes to reconstruct after the slices (one worker holds every
     * row; see scan_tomo.c). */
    rtomo_fbp_plane planes[RTOMOD_MAX_PLANES];
    int n_planes;
    int plane_parts;            /* workers whose planes sum (1: publish) */
} rtomod_tomo_reconstruct_job;

typedef struct rtomod_sbdx_begin_job {
    rtomo_sbdx_geometry geometry;   /* owns ratios */
    rtomo_plane_format planes;
    float u16_scale, u16_offset;
    int composite;
} rtomod_sbdx_begin_job;

/* A cone-beam plan: FDK of this worker's z-slab of the scan's volume. */
typedef struct rtomod_cone_begin_job {
    rtomo_cone_geometry geometry;   /* the slab as the ROI; owns angles */
    rtomo_cone_kernel kernel;       /* CUDA back-projector */
    int set_first;              /* index of the slab's first slice among
                                   the scan's published slices */
    int set_count;              /* slices of the whole scan */
    rtomo_method_settings method;   /* sirt / cgls: solved after FDK
                                   (worker_cone_iter.c; one slab) */
    int n_solve_devices;        /* the solve's GPUs (0: the worker's
                                   own options, as on the CPU) */
    int solve_devices[RTOMO_MAX_DEVICES];
    size_t solve_device_budget; /* rtomo_engine_options.device_budget of
                                   the solve's pair (budget_cone.c) */
} rtomod_cone_begin_job;

typedef struct rtomod_job {
    struct rtomod_job *next;
    rtomod_job_kind kind;
    uint64_t serial;            /* the scan this job belongs to */
    char scan[RTOMO_ID_MAX];
    double t_input;             /* monotonic seconds: when the job's input
                                   (frame, or the scan's last input) arrived */
    int64_t seq;                /* SBDX frames: position in the stream's
                                   publication order; -1 otherwise */
    /* frames */
    zmq_msg_t payload;          /* valid when has_payload */
    int has_payload;
    rtomo_dtype dtype;
    int64_t index;
    double angle;               /* radians, NaN = the geometry's */
    double axis_shift;          /* bins, NaN = the geometry's */
    /* begin / reconstruct / close */
    union {
        rtomod_tomo_begin_job tomo;
        rtomod_tomo_reconstruct_job recon;
        rtomod_sbdx_begin_job sbdx;
        rtomod_cone_begin_job cone;
        int abort;              /* CLOSE: 1 = discard, 0 = finish */
    } u;
} rtomod_job;

/* A job with the given kind and scan, zeroed otherwise; NULL when out of
 * memory. */
rtomod_job *rtomod_job_new(rtomod_job_kind kind, uint64_t serial,
                           const char *scan);
/* Release a job and everything it owns (closes its ZeroMQ message). */
void rtomod_job_free(rtomod_job *job);

typedef enum rtomod_result_kind {
    RTOMOD_RESULT_IMAGE,        /* publish: topic, header, image */
    RTOMOD_RESULT_STATS,        /* a batch or frame was reconstructed */
    RTOMOD_RESULT_ERROR,        /* the engine failed on this scan */
    RTOMOD_RESULT_DROPPED,      /* accepted frames that were not used */
    RTOMOD_RESULT_DONE,         /* a RECONSTRUCT with close_plan or a CLOSE
                                   job finished on this worker */
    RTOMOD_RESULT_AXIS,         /* the rotation axis was found (value) */
    RTOMOD_RESULT_PLANE_PART,   /* a worker's part of a plane (its rows);
                                   the loop sums the parts and publishes */
    RTOMOD_RESULT_SET_DONE,     /* this worker's part of an image set (a
                                   reconstruction, a window, an SBDX frame)
                                   is published or failed: posted exactly
                                   once per RECONSTRUCT and SBDX_FRAME job,
                                   after the set's images */
    RTOMOD_RESULT_ITERATION     /* an iteration of a solve is done (iter) */
} rtomod_result_kind;

/* How an iterative solve goes (worker_iter.c), for the telemetry. */
typedef struct rtomod_iter_progress {
    char method[8];             /* "sirt", "cgls" */
    int iteration, iterations;  /* done; at most */
    int rows;                   /* rows solved together */
    double residual;            /* ||A x - b|| / ||b|| */
    double iterations_per_s;    /* of this solve so far */
    double gu_per_s;            /* A and A^T together, wall clock */
    int done;                   /* the solve ended; then: */
    double project_gu_per_s;    /* A alone, in its own time */
    double backproject_gu_per_s;/* A^T alone */
} rtomod_iter_progress;

typedef struct rtomod_result {
    struct rtomod_result *next;
    rtomod_result_kind kind;
    uint64_t serial;
    int worker;
    double t_input;             /* IMAGE, SET_DONE: latency reference
                                   (monotonic s) */
    int64_t frame;              /* SET_DONE: window or SBDX frame, or -1 */
    double axis, axis_quality;  /* AXIS: bins, and rtomo_fbp_find_axis's
                                   quality; frame: the continuous window
                                   measured at (-1: a scan's one axis) */
    int axis_applied;           /* AXIS: the plan uses it from now on (a
                                   continuous change within the tolerance
                                   is measured, not applied) */
    double t_ready;             /* SET_DONE of a reconstruction: when its
                                   last image was in host memory
                                   (monotonic s), 0 = not measured */
    int64_t seq;                /* the SBDX frame's job seq, or -1 */
    /* IMAGE */
    rtomo_image_header header;  /* min, max, mean: by the finisher;
                                   latency_ms: when published */
    rtomod_buffer *buffer;      /* reference held by the result */
    const void *data;           /* within buffer */
    size_t size;
    /* STATS */
    long slices, frames;
    double updates, seconds;
    /* ERROR */
    int fatal;                  /* the plan is unusable: the scan failed */
    char reason[32];
    char message[RTOMO_REASON_MAX];
    /* DROPPED */
    long dropped;
    /* ITERATION */
    rtomod_iter_progress iter;
    /* IMAGE: room reserved in the HDF5 output's queue (rtomod_output.h,
     * when_full "block"), released when queued there or freed. */
    size_t output_reserved;
    struct rtomod_output *output_hold;
} rtomod_result;

void rtomod_result_free(rtomod_result *r);

typedef struct rtomod_pool rtomod_pool;
typedef struct rtomod_finisher rtomod_finisher;

typedef struct rtomod_worker {
    rtomod_pool *pool;
    int index;
    int device;                 /* CUDA ordinal, -1 for the CPU */
    rtomo_engine_options options;
    pthread_t thread;
    int started;

    pthread_mutex_t lock;
    pthread_cond_t wake;
    rtomod_job *head, *tail;    /* FIFO */
    int n_jobs;
    int n_frames;               /* of which frames (projections, darks,
                                   flats, SBDX frames) */
    size_t bytes;               /* payload bytes queued */
    int running;                /* a job or pipelined frames in progress */
    int stopping;

    /* The loop marks a scan aborted here so that a long job in progress
     * stops early: abort_serial is the last one (the finisher drops its
     * results), aborted[] the last RTOMOD_ABORTED_KEPT, so that a solve of
     * minutes still sees its abort after later scans were aborted too
     * (rtomod_worker_aborted). */
    _Atomic uint64_t abort_serial;
    _Atomic uint64_t aborted[RTOMOD_ABORTED_KEPT];
    _Atomic unsigned aborted_next;
    /* Busy time for the "load" figure (nanoseconds, written by the worker). */
    _Atomic uint64_t busy_ns;
    /* Previews published and dropped (the publisher was behind). */
    _Atomic uint64_t previews, previews_dropped;

    /* Results on their way to the loop (rtomod_finisher.h).  The outbox
     * and blocked_seconds belong to the worker thread. */
    rtomod_finisher *finisher;
    rtomod_result *outbox_head, *outbox_tail;   /* not handed over yet */
    double blocked_seconds;     /* waiting for the finisher, this job */

    /* A CUDA worker's slice buffers, kept across scans for the last
     * RTOMOD_SLICE_POOLS buffer sizes and page-locked (worker thread
     * only; slice_buffer in worker.c says why). */
    rtomod_buffer_pool *slice_pools[RTOMOD_SLICE_POOLS];
    uint64_t slice_pool_used[RTOMOD_SLICE_POOLS];
    uint64_t slice_pool_clock;

    void *state;                /* the worker thread's plans (worker.c) */
} rtomod_worker;

struct rtomod_pool {
    int n;
    rtomod_worker *workers;
    int max_jobs;               /* per worker */
    size_t max_bytes;           /* per worker */
    int finish_capacity;        /* units a worker's finisher holds */
    size_t locked_bytes;        /* per CUDA worker, page-locked slice
                                   buffers kept at most */

    pthread_mutex_t lock;       /* results */
    rtomod_result *results_head, *results_tail;
    int n_results;
    struct ev_loop *loop;
    ev_async *wake_loop;        /* sent when results arrive or room frees */
    /* Called for every result on its way to the loop, from the finisher
     * (may wait: the HDF5 output's "block", rtomod_output_gate); NULL =
     * none.  Set before the first job. */
    void (*gate)(void *ctx, rtomod_result *r);
    void *gate_ctx;
};

/*
 * Start `n_devices` CUDA workers (device ordinals in `devices`) or, with
 * n_devices == 0, `cpu_workers` CPU workers (at least 1) that share the
 * configured CPU threads.  `options` is the configured engine options
 * (backend, kernels); each worker gets a copy bound to its device, and a
 * finisher of `stats_threads` threads.  The loop splits work among CPU
 * workers exactly as among GPUs, so that this split and merge is tested
 * without a GPU.  A CUDA worker keeps up to `locked_bytes` of page-locked
 * slice buffers across scans (publish.pinned_mb).  Returns 0, or -1 with
 * `error` filled.
 */
int rtomod_pool_start(rtomod_pool *pool, const rtomo_engine_options *options,
                      const int *devices, int n_devices, int cpu_workers,
                      int max_jobs, size_t max_bytes, int stats_threads,
                      size_t locked_bytes, struct ev_loop *loop,
                      ev_async *wake_loop, char *error, size_t error_size);

/* Stop after the queued jobs are done (or, with discard, drop them and
 * report them dropped), join the threads (the finishers after delivering
 * everything) and free the pool's queues.  Results still queued remain for
 * rtomod_pool_take_results. */
void rtomod_pool_stop(rtomod_pool *pool, int discard);
void rtomod_pool_free(rtomod_pool *pool);

/* 1 when every worker's queue has room for one more frame. */
int rtomod_pool_has_room(rtomod_pool *pool);

/* Queue a job on worker `w` (never blocks; the caller checked for room). */
void rtomod_pool_push(rtomod_pool *pool, int w, rtomod_job *job);

/* Remove every queued job of `serial` from all workers and mark it aborted
 * for the jobs in progress.  Returns the number of frames removed. */
long rtomod_pool_purge(rtomod_pool *pool, uint64_t serial);
/* 1 when scan `serial` was aborted (one of the last RTOMOD_ABORTED_KEPT
 * purged): long jobs of the worker thread check it between steps. */
int rtomod_worker_aborted(rtomod_worker *w, uint64_t serial);

/* Take all results queued so far (a list in arrival order, or NULL). */
rtomod_result *rtomod_pool_take_results(rtomod_pool *pool);

/* Jobs queued on all workers, of which frames, and results on their way
 * to the loop (in the finishers or waiting for it). */
int rtomod_pool_queued_jobs(rtomod_pool *pool);
int rtomod_pool_queued_frames(rtomod_pool *pool);
int rtomod_pool_queued_results(rtomod_pool *pool);
/* 1 when no job is queued or running and no result waits. */
int rtomod_pool_idle(rtomod_pool *pool);

#endif /* RTOMOD_WORKER_H */
