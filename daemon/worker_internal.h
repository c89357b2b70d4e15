/*
 * worker_internal.h — what the files of rtomod's engine threads share:
 *   worker.c        jobs, results, the plan table, dispatch, the threads
 *   worker_tomo.c   tomography plans: frames, reconstruction, publication
 *   worker_sbdx.c   SBDX plans: the frame pipeline and its publication
 * Private to those files (the loop sees rtomod_worker.h).
 */
#ifndef RTOMOD_WORKER_INTERNAL_H
#define RTOMOD_WORKER_INTERNAL_H

#include "rtomod_worker.h"

/* Detector rows an automatic axis is measured on, at most. */
#define RTOMOD_AXIS_ROWS 64

#define MAX_PIPELINE 8

typedef struct pending_frame {
    int64_t index;
    int64_t seq;
    double t_input;
} pending_frame;

/* reconstruction.method sirt / cgls: worker_iter.c's state. */
typedef struct iter_state iter_state;

/* The plan of one scan on this worker (serial 0: a free slot). */
typedef struct plan_state {
    uint64_t serial;            /* 0 = none */
    char scan[RTOMO_ID_MAX];
    int failed;                 /* creation or a fatal engine call failed */
    rtomo_fbp *fbp;
    rtomo_fbp_window *window;   /* continuous scans: the sliding window */
    int streaming;              /* plain scans: resident slices are open */
    int rings_removed;          /* rtomo_fbp_remove_rings done */
    int flats_after;            /* interpolate flats before reconstructing */
    int flats_after_fed;        /* flats after the projections fed */
    long projections;           /* projections fed so far */
    int preview_every;          /* 0 = no previews */
    int *preview_rows, n_preview;
    rtomod_buffer_pool *previews;
    rtomod_buffer *preview_last;    /* our reference to the last preview:
                                       still shared = not yet published */
    /* "axis": "auto" (worker_axis.c): while the pairs are incomplete,
     * projections are filtered but held back from the resident slices. */
    int axis_pending;
    int axis_pairs[RTOMOD_AXIS_PAIRS][2], n_axis_pairs;
    float *axis_lines[RTOMOD_AXIS_PAIRS][2];    /* line integrals, or NULL */
    int axis_rows[RTOMOD_AXIS_ROWS], n_axis_rows;
    unsigned char *held;        /* n_proj: fed, not yet queued */
    /* Continuous "axis": "auto": the axis re-measured every track_every
     * projections from pairs half a turn apart (worker_axis.c). */
    int64_t track_every;        /* 0 = not tracked */
    double track_tolerance;     /* bins */
    struct axis_lines_kept *track;  /* line integrals kept for pairs */
    int n_track, track_capacity;
    iter_state *iter;           /* NULL: FBP only */
    struct cone_plan *cone;     /* a cone-beam scan's plan (worker_cone.c) */
    rtomo_sbdx *sbdx;
    rtomod_sbdx_begin_job sbdx_out; /* output choices (ratios not owned) */
    pending_frame pending[MAX_PIPELINE];
    int n_pending, first_pending;
    double set_seconds;         /* engine time of the current set */
    rtomo_fbp_stats reported;   /* the plan's figures at the last stats */
    double t_ready;             /* the last reconstruction's last image
                                   in host memory (monotonic s) */
    rtomo_sbdx_stats sbdx_seen; /* SBDX statistics already reported */
    /* Output buffers: slice batches; SBDX planes, composite, depth. */
    rtomod_buffer_pool *slices, *planes, *composite, *depth;
} plan_state;

/* ------------------------------------------------- worker.c helpers ---- */

double now_seconds(void);
/* A result of the given kind for the scan, zeroed otherwise (NULL when
 * out of memory); post() hands it on. */
rtomod_result *result_new(rtomod_worker *w, rtomod_result_kind kind,
                          uint64_t serial);
/* Results go to the worker's outbox, handed to the finisher as one unit
 * by flush_results (see worker.c). */
void post(rtomod_worker *w, rtomod_result *r);
void flush_results(rtomod_worker *w);
void post_error(rtomod_worker *w, uint64_t serial, int fatal,
                const char *reason, const char *message);
void post_dropped(rtomod_worker *w, uint64_t serial, long n, int64_t seq);
void post_set_done(rtomod_worker *w, uint64_t serial, int64_t frame,
                   int64_t seq, double t_input);
void post_stats(rtomod_worker *w, uint64_t serial, int64_t seq, long slices,
                long frames, double updates, double seconds);
void post_done(rtomod_worker *w, uint64_t serial);
/* The rotation axis was found ("axis": "auto"): a scan's (window -1,
 * applied), or a continuous stream's measurement at a window. */
void post_axis(rtomod_worker *w, uint64_t serial, double axis,
               double quality, int64_t window, int applied);
void post_image(rtomod_worker *w, uint64_t serial, int64_t seq,
                double t_input, const rtomo_image_header *h,
                rtomod_buffer *buffer, const void *data, size_t size);
/* post_image with another kind (RTOMOD_RESULT_PLANE_PART). */
void post_image_as(rtomod_worker *w, rtomod_result_kind kind,
                   uint64_t serial, int64_t seq, double t_input,
                   const rtomo_image_header *h, rtomod_buffer *buffer,
                   const void *data, size_t size);
int buffers_kept(const rtomod_worker *w);
rtomod_buffer *pooled_buffer(const rtomod_worker *w,
                             rtomod_buffer_pool **pool, size_t size);
rtomod_buffer *slice_buffer(rtomod_worker *w, plan_state *s, size_t size);
void engine_failed(rtomod_worker *w, plan_state *s, uint64_t serial,
                   const char *what, const rtomo_error *err);
void plan_close(plan_state *s);

/* ------------------------------------------------------ worker_tomo.c ---- */

void tomo_begin(rtomod_worker *w, plan_state *s, rtomod_job *job);
void tomo_frame(rtomod_worker *w, plan_state *s, rtomod_job *job);
void tomo_reconstruct(rtomod_worker *w, plan_state *s, rtomod_job *job);
/* The header of the slice at position i of reconstruct job `rc`. */
void tomo_slice_header(const plan_state *s,
                       const rtomod_tomo_reconstruct_job *rc, int i,
                       rtomo_image_header *h);

/* ------------------------------------------------------ worker_iter.c ---- */

/* Keep what the begin job's iterative method needs (nothing for FBP).
 * Returns 0, or -1 when out of memory. */
int iter_begin(plan_state *s, rtomod_tomo_begin_job *b);
/* A projection the FBP plan took: keep its line integrals. */
rtomo_status iter_frame(plan_state *s, const rtomod_job *job,
                        rtomo_error *err);
/* 1 when detector row `row` is solved iteratively after its FBP. */
int iter_solves_row(const plan_state *s, int row);
/* Row `row`'s FBP slice (its ROI roi[]) as it is published: the solve's
 * start when the ROI is the whole grid. */
void iter_keep_fbp(plan_state *s, int row, const float *slice,
                   const int roi[4]);
/* Solve and publish the job's kept rows (after their FBP slices). */
void iter_reconstruct(rtomod_worker *w, plan_state *s, const rtomod_job *job);
void iter_free(plan_state *s);

/* ------------------------------------------------------ worker_axis.c ---- */

/* Set up the search of a begin job's axis pairs (nothing when none). */
int axis_begin(plan_state *s, const rtomod_tomo_begin_job *b);
/* Projection `index` was fed while the axis is sought: keep what the
 * search needs, and when the pairs are complete find the axis, tell the
 * loop and release the held projections into the resident slices. */
void axis_frame(rtomod_worker *w, plan_state *s, const rtomod_job *job);
/* The scan ends with pairs missing: say so, keep the axis it has, and
 * release the held projections. */
void axis_give_up(rtomod_worker *w, plan_state *s, uint64_t serial);
void axis_free(plan_state *s);
/* Continuous streams: a projection was fed (keep its line integrals when
 * a later measurement pairs it); a window `job` is about to be read
 * (measure the axis when due, and move the window to it). */
void axis_track_frame(rtomod_worker *w, plan_state *s, const rtomod_job *job);
void axis_track_window(rtomod_worker *w, plan_state *s, const rtomod_job *job);

/* ------------------------------------------------------ worker_sbdx.c ---- */

void sbdx_begin(rtomod_worker *w, plan_state *s, rtomod_job *job);
void sbdx_frame(rtomod_worker *w, plan_state *s, rtomod_job *job);
/* Publish (or discard) every frame still in the plan's pipeline. */
void sbdx_flush(rtomod_worker *w, plan_state *s, int discard);
/* Collect the oldest pipelined frame. */
void sbdx_collect_one(rtomod_worker *w, plan_state *s, int discard);

#endif /* RTOMOD_WORKER_INTERNAL_H */
