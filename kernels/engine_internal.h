/*
 * engine_internal.h — what a backend implements, and the plan state that the
 * backend-neutral front end (engine.c) shares with the backends.  Private to
 * kernels/: the daemon and clients see only rtomo_engine.h.
 *
 * Division of labour
 *   engine.c validates every argument, copies the geometry (angles and axis
 *   shifts into arrays the plan owns), averages dark and flat frames on the
 *   host, tracks which projections arrived, and then calls the backend.  A
 *   backend therefore receives only valid, in-range requests and need not
 *   re-check them.
 */
#ifndef RTOMO_ENGINE_INTERNAL_H
#define RTOMO_ENGINE_INTERNAL_H

#include "rtomo_engine.h"
#include "fbp_phase.h"

#ifdef __cplusplus
extern "C" {
#endif

/* rtomo_host_alloc's ordinary memory (engine_common.c), also what the CUDA
 * build falls back to. */
void *rtomo_host_alloc_plain(size_t bytes);

/* ---------------------------------------------------------------- FBP ---- */

typedef struct rtomo_fbp_backend_ops {
    const char *name;
    /* Allocate plan->impl.  Called once, geometry already validated. */
    rtomo_status (*create)(rtomo_fbp *plan, rtomo_error *err);
    void (*destroy)(rtomo_fbp *plan);
    /* Called once before the first projection, with the averaged flat field
     * of the kept rows in plan->dark / plan->flat (row_count x det_width) when
     * plan->normalise is set. */
    rtomo_status (*begin_projections)(rtomo_fbp *plan, rtomo_error *err);
    /* Normalise (when plan->normalise) and filter the kept rows of a frame
     * into slot `index`.  The frame buffer belongs to the caller and is valid
     * only during the call. */
    rtomo_status (*add_projection)(rtomo_fbp *plan, int index,
                                   const void *frame, rtomo_dtype dtype,
                                   rtomo_error *err);
    /* `rows` kept rows starting at kept-row offset `kept_row`. */
    rtomo_status (*set_filtered)(rtomo_fbp *plan, int kept_row, int rows,
                                 const float *sinograms, rtomo_error *err);
    rtomo_status (*get_filtered)(rtomo_fbp *plan, int kept_row,
                                 float *sinogram, rtomo_error *err);
    rtomo_status (*sync)(rtomo_fbp *plan, rtomo_error *err);
    /* kept_rows[i] are offsets within the kept range.  Uses plan->angles,
     * plan->axis_shift, plan->geom (ROI, interpolation) as they are now.
     * Adds its own timing to plan->stats. */
    rtomo_status (*reconstruct)(rtomo_fbp *plan, const int *kept_rows,
                                int n_rows, float *out, rtomo_error *err);
    /* Zero slot `index` of every kept row (ordered after every earlier
     * call, stream_apply included). */
    rtomo_status (*clear_projection)(rtomo_fbp *plan, int index,
                                     rtomo_error *err);

    /* Streaming back-projection (see rtomo_fbp_stream_open).  The front
     * end keeps the queue; the backend holds the resident slices. */
    /* Allocate zeroed slices for kept_rows[0..n_rows-1] (kept-row offsets,
     * ascending, distinct) at plan->stream_roi and plan->geom.interp, fixed
     * until stream_close.  RTOMO_E_NOMEM leaves nothing allocated. */
    rtomo_status (*stream_open)(rtomo_fbp *plan, const int *kept_rows,
                                int n_rows, rtomo_error *err);
    /* Back-project slots[0..n-1], each times weights[i], into every open
     * slice, with plan->angles/axis_shift as they are now.  May run
     * asynchronously, but must read the slots' data as they are at this
     * call: a later add_projection, set_filtered or clear_projection of
     * those slots (and a stream_reset) must be ordered after it, and it
     * after every earlier add_projection. */
    rtomo_status (*stream_apply)(rtomo_fbp *plan, const int *slots,
                                 const float *weights, int n,
                                 rtomo_error *err);
    /* Copy the open slices at positions[0..n-1] (indices into the
     * kept_rows given to stream_open) into out, and when stats is not
     * NULL each one's min, max, mean into stats[3i..3i+2]; blocks until
     * done. */
    rtomo_status (*stream_read)(rtomo_fbp *plan, const int *positions, int n,
                                float *out, double *stats, rtomo_error *err);
    rtomo_status (*stream_reset)(rtomo_fbp *plan, rtomo_error *err);
    void (*stream_close)(rtomo_fbp *plan);
    /* Slots per stream_apply, at most (the front end's queue length). */
    int (*stream_chunk)(const rtomo_fbp *plan);
    /* A plane (already validated, u and v unit) from slots[0..n-1]
     * (all slots when slots is NULL); blocks. */
    rtomo_status (*reconstruct_plane)(rtomo_fbp *plan,
                                      const rtomo_fbp_plane *plane,
                                      const int *slots, int n_slots,
                                      float *out, rtomo_error *err);
    /* 1 when every chunk applied so far is done (the device would idle);
     * NULL: a synchronous backend, for which chunks are always done. */
    int (*stream_idle)(const rtomo_fbp *plan);
    /* plan->dark / plan->flat (and plan->normalise) changed after the
     * first projection: frames fed from now on use them, frames fed
     * before keep the old ones.  NULL: the backend reads them per frame. */
    rtomo_status (*update_flat_field)(rtomo_fbp *plan, rtomo_error *err);
    /* Ring removal (fbp_rings.c): with geom.rings set, add_projection also
     * sums each kept row's line integrals (before filtering) per bin.
     * This subtracts proj_scale[p] x filter(c) from every received
     * projection p, c = rtomo_fbp_rings_offsets of the sums / n_received,
     * or filter(c - c_applied) where plan->rings_done[p] (already
     * corrected by the offsets c_applied of the previous call, which the
     * backend keeps).  Called after sync; NULL: not supported. */
    rtomo_status (*remove_rings)(rtomo_fbp *plan, rtomo_error *err);
    /* Add weights[p] times the filtered offsets[kept row] (row_count x
     * det_width, kept-row order) to every projection p with weights[p]
     * != 0, ordered after all earlier work (fbp_flats.c). */
    rtomo_status (*add_offsets)(rtomo_fbp *plan, const float *offsets,
                                const float *weights, rtomo_error *err);
} rtomo_fbp_backend_ops;

/* Angular sectors of ring removal's column sums (fbp_rings.c). */
#define RTOMO_RINGS_SECTORS 8

struct rtomo_fbp {
    rtomo_fbp_geometry geom;    /* normalised copy: angles, axis_shift point
                                   to the arrays below; axis is finite;
                                   row_count, slice_size, roi_* filled in */
    double *angles;             /* n_proj, radians */
    double *axis_shift;         /* n_proj, bins (zeros when not given) */
    float *proj_scale;          /* n_proj: each filtered projection's
                                   weight relative to pi/window_proj (1
                                   unless geom.angle_weights) */
    rtomo_engine_options opt;
    rtomo_backend backend;      /* CPU or CUDA, never AUTO */
    const rtomo_fbp_backend_ops *ops;
    void *impl;                 /* backend state */

    /* Flat-field correction, owned by engine.c. */
    double *dark_sum, *flat_sum;    /* full frames, running sums */
    int n_dark, n_flat;
    /* Darks and flats added after the first projection: the next flat
     * field, which replaces the current one at the next projection. */
    double *dark_next, *flat_next;
    int n_dark_next, n_flat_next;
    float *dark, *flat;         /* kept rows, averaged; set before
                                   begin_projections when normalise */
    int normalise;              /* 1 when at least one flat was added */
    int flat_refreshes;         /* times the field changed between
                                   projections (refresh_flat_field) */
    int flats_interpolated;     /* rtomo_fbp_interpolate_flats done */
    double *flat_after_sum;     /* full frames: rtomo_fbp_add_flat_after */
    int n_flat_after;
    rtomo_fbp_phase_plan phase; /* phase retrieval, owned by fbp_phase.c */
    int projections_started;

    unsigned char *received;    /* n_proj flags */
    int n_received;

    /* Ring removal, owned by fbp_rings.c. */
    unsigned char *rings_done;  /* n_proj: corrected by remove_rings */
    int rings_fresh;            /* projections fed since the last one */
    long rings_counts[RTOMO_RINGS_SECTORS]; /* projections fed per sector */
    int rings_spoilt;           /* 1 + a slot whose data left or entered
                                   other than by one add_projection (fed
                                   twice, cleared, set_filtered): the
                                   sums no longer match; 0 = none */

    /* Streaming back-projection, owned by fbp_engine.c (the backend
     * holds the slices). */
    int *stream_rows;           /* open detector rows, ascending */
    int stream_n;               /* 0 = not open */
    int stream_roi[4];          /* x, y, width, height, fixed at open */
    rtomo_interp stream_interp; /* fixed at open */
    int *queue_slot;            /* queued slots and weights: */
    float *queue_weight;        /* stream_capacity entries */
    int queue_n, queue_capacity;
    unsigned char *queued;      /* n_proj flags: slot has queued work */
    int stream_sliding;         /* a projection was taken out (weight -1)
                                   since open or reset: a sliding window,
                                   whose scan has no last frame */

    /* Half acquisition, owned by fbp_half.c: */
    float *bin_weight;          /* det_width weights applied to the line
                                   integrals before the filter; NULL
                                   without half acquisition */
    void *half_frame;           /* a frame widened to det_width */
    size_t half_frame_bytes;

    /* Circular field of view, owned by fbp_fov.c (fbp_fov.h's test): */
    double fov_radius;          /* R in bins; 0 without the circle */
    long long fov_limit;        /* floor(4 R^2); -1 = the whole grid */

    int filter_length;          /* padded row length, power of two */
    float *filter;              /* filter_length coefficients times the
                                   back-projection weight pi/n_proj */
    rtomo_fbp_stats stats;
};

/* --------------------------------------------------------------- SBDX ---- */

typedef struct rtomo_sbdx_backend_ops {
    const char *name;
    rtomo_status (*create)(rtomo_sbdx *plan, rtomo_error *err);
    void (*destroy)(rtomo_sbdx *plan);
    rtomo_status (*submit)(rtomo_sbdx *plan, const void *frame,
                           rtomo_dtype dtype, uint64_t tag, rtomo_error *err);
    rtomo_status (*collect)(rtomo_sbdx *plan, const rtomo_sbdx_output *out,
                            uint64_t *tag, rtomo_error *err);
    int pipeline_depth;         /* frames that may be outstanding */
} rtomo_sbdx_backend_ops;

struct rtomo_sbdx {
    rtomo_sbdx_geometry geom;   /* normalised copy: ratios points below,
                                   out_* and composite_radius filled in */
    double *ratios;
    rtomo_engine_options opt;
    rtomo_backend backend;
    const rtomo_sbdx_backend_ops *ops;
    void *impl;
    int outstanding;            /* submitted, not yet collected */
    rtomo_sbdx_stats stats;
};

/* ---------------------------------------------------- backend registry ---- */

extern const rtomo_fbp_backend_ops rtomo_cpu_fbp_ops;
extern const rtomo_sbdx_backend_ops rtomo_cpu_sbdx_ops;
#ifdef RTOMO_HAVE_CUDA
extern const rtomo_fbp_backend_ops rtomo_cuda_fbp_ops;
extern const rtomo_sbdx_backend_ops rtomo_cuda_sbdx_ops;
#endif

/* ------------------------------------------------------ shared helpers ---- */

/* Monotonic wall clock in seconds. */
double rtomo_now_seconds(void);

/* The backend a plan asking for `want` gets: AUTO is CUDA when the build
 * has it and a GPU is visible, else the CPU; CUDA asked for without CUDA
 * in the build or without a GPU is RTOMO_E_UNAVAILABLE saying which. */
rtomo_status rtomo_resolve_backend(rtomo_backend want, rtomo_backend *out,
                                   rtomo_error *err);

/* Number of CPU worker threads for opt (cpu_threads, or online cores). */
int rtomo_cpu_thread_count(const rtomo_engine_options *opt);

/* Part `part` of `parts` of n items dealt contiguously and evenly (the
 * first n % parts parts one item more): items [*first, *first + *count).
 * How the multi-GPU plans split slices into slabs (cone FDK, the cone SF
 * pair, the iterative engine's rows). */
void rtomo_deal_even(int n, int parts, int part, int *first, int *count);

/* Slabs per device asked for by the test hook environment variable
 * `name` (1 to RTOMO_SPLIT_HOOK_MAX), 1 when unset or not such a number:
 * one GPU then runs a plan's several-device path. */
#define RTOMO_SPLIT_HOOK_MAX 8
int rtomo_split_hook(const char *name);

/* Convert n samples of any dtype to float32. */
void rtomo_convert_to_float(const void *src, rtomo_dtype dtype, size_t n,
                            float *dst);

/* Before slot `index` (-1: any slot) is overwritten: do the queued
 * streaming work if it reads that slot (fbp_stream.c). */
rtomo_status rtomo_fbp_stream_settle(rtomo_fbp *plan, int index,
                                     rtomo_error *err);

/* Ring removal (fbp_rings.c).  Each add_projection tells it the slot
 * (before received[] is updated); set_filtered and clear_projection of a
 * received slot spoil the sums (index -1 for all). */
void rtomo_fbp_rings_note_feed(rtomo_fbp *plan, int index);
void rtomo_fbp_rings_note_spoil(rtomo_fbp *plan, int index);
/* Ring removal keeps, per kept row, the sums of the line integrals over
 * the projections fed in each of RTOMO_RINGS_SECTORS angular sectors
 * (angle modulo 180 degrees): RTOMO_RINGS_SECTORS planes of row_count x
 * det_width.  A stripe is the same in every sector; the sample's
 * structure moves across the detector as it turns, so a median over the
 * sectors sees the stripes and not the few sectors where an edge of the
 * sample passes a column (RTOMO_RINGS_SECTORS, above). */
/* The sector of projection `index` (by plan->angles). */
int rtomo_fbp_rings_sector(const rtomo_fbp *plan, int index);
/* The stripe offsets c of one row of n bins from its sector sums and the
 * projections counted in each sector (see rtomo_rings and PROTOCOL.md
 * 3.10).  `scratch` holds RTOMO_RINGS_SCRATCH(n, width) doubles. */
#define RTOMO_RINGS_SIGMAS 4.0       /* detection threshold, robust sigmas */
#define RTOMO_RINGS_FLOOR 2e-3       /* ... and at least this */
#define RTOMO_RINGS_PASSES 3         /* detection passes */
#define RTOMO_RINGS_DECONV_MAX 64    /* longest run separated into stripes */
#define RTOMO_RINGS_ANCHORS 4        /* bridge anchors on either side */
#define RTOMO_RINGS_IRLS 10          /* reweighting rounds of a bridge */
#define RTOMO_RINGS_IRLS_DONE 1e-6   /* ... fewer once no weight moves more */
#define RTOMO_RINGS_BIWEIGHT 4.685   /* Tukey's constant, scales */
#define RTOMO_RINGS_SCRATCH(n, width) \
    ((size_t)(RTOMO_RINGS_SECTORS + 10) * (size_t)(n) + \
     8 * RTOMO_RINGS_ANCHORS + RTOMO_RINGS_SECTORS + \
     RTOMO_RINGS_DECONV_MAX * (RTOMO_RINGS_DECONV_MAX + 1) + \
     (size_t)(width) + 1)
void rtomo_fbp_rings_offsets(const double *const sums[RTOMO_RINGS_SECTORS],
                             const long counts[RTOMO_RINGS_SECTORS], int n,
                             int width, double *scratch, double *c);

/* Smallest power of two >= 2*det_width: the padded filter length. */
int rtomo_fbp_padded_length(int det_width);

#ifdef __cplusplus
}
#endif

#endif /* RTOMO_ENGINE_INTERNAL_H */
