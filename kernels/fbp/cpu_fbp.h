/*
 * cpu_fbp.h — internals shared by the files of the CPU FBP backend:
 *   cpu_fbp_backend.c      the ops table and the plan state (this header's
 *                          cpu_fbp_state)
 *   cpu_fbp_normalise.c    raw frame row -> line integrals
 *   cpu_fbp_filter.c       FFTW ramp filtering, two rows per transform
 *   cpu_fbp_backproject.c  the reference back-projector
 *   cpu_pool.c         the worker threads
 *
 * Filtered sinograms are stored [kept_row][projection][bin] with a few zero
 * guard bins around every projection row, so that the back-projector can
 * clamp its detector coordinate into the guards instead of testing bounds:
 * that keeps its inner loop branch-free and lets the compiler vectorise it.
 */
#ifndef RTOMO_CPU_FBP_H
#define RTOMO_CPU_FBP_H

#include <stddef.h>

#include "cpu_pool.h"
#include "engine_internal.h"

/* Zero bins stored before bin 0 and after bin det_width-1 of every
 * projection row.  The back-projector relies on exactly these: one before
 * (bin -1) and two after (bins w and w+1, the right neighbour of w). */
#define CPU_FBP_GUARD_BEFORE 1
#define CPU_FBP_GUARD_AFTER 2
/* Projections per streaming chunk: a chunk reads and writes the resident
 * slices once, so it should hold enough projections to make that pass
 * small beside the sums (a pass costs about what 2 projections do). */
#define CPU_FBP_STREAM_CHUNK 32

typedef struct cpu_fbp_filter cpu_fbp_filter;
typedef struct cpu_fbp_phase cpu_fbp_phase;

typedef struct cpu_fbp_state {
    cpu_pool *pool;
    int n_workers;
    int bin_stride;         /* det_width + guards: floats per projection row */
    float *sinograms;       /* row_count x n_proj x bin_stride, guards zero */
    cpu_fbp_filter *filter;
    cpu_fbp_phase *phase;   /* phase retrieval (cpu_fbp_phase.c), or NULL */
    float *bp_rows;         /* per worker: accumulator pixel rows */
    int bp_row_capacity;    /* floats per worker in bp_rows */
    double *bp_base;        /* per projection: guarded coordinate of ROI
                               pixel (0, 0) */
    float *bp_cos;          /* per projection: x step */
    double *bp_sin;         /* per projection: minus the y step */
    int bp_capacity;        /* entries of bp_base/bp_cos/bp_sin */
    /* Streaming back-projection (cpu_fbp_stream.c): resident slices. */
    float *stream_slices;   /* stream_n images of the stream ROI */
    int *stream_kept;       /* their kept-row offsets */
    int stream_n;
    /* Ring removal (cpu_fbp_rings.c), with geom.rings set: */
    double *rings_sum;      /* RTOMO_RINGS_SECTORS planes of row_count x
                               det_width line integral sums */
    double *rings_applied;  /* row_count x det_width offsets subtracted */
} cpu_fbp_state;

/* Bin 0 of projection `proj` of kept row `kept_row` (guards around it). */
static inline float *cpu_fbp_projection_row(const cpu_fbp_state *st,
                                            int n_proj, int kept_row, int proj)
{
    return st->sinograms +
           ((size_t)kept_row * (size_t)n_proj + (size_t)proj) *
               (size_t)st->bin_stride +
           CPU_FBP_GUARD_BEFORE;
}

/* ---------------------------------------------------- normalisation ---- */

/* Line integrals of kept row `kept_row` of a raw frame into out[det_width]:
 * the samples as floats, or -log((raw - dark) / (flat - dark)) when
 * plan->normalise, with the ratio clamped to [1e-6, FLT_MAX] (a flat no
 * brighter than the dark counts as ratio 1e-6) so that every output is
 * finite. */
void cpu_fbp_normalise_row(const rtomo_fbp *plan, const void *frame,
                           rtomo_dtype dtype, int kept_row, float *out);

/* The line integrals the ramp filter takes for kept row `kept_row` of the
 * frame being filtered: cpu_fbp_normalise_row, or with phase retrieval
 * the logarithm of the phase-retrieved intensities (cpu_fbp_phase_frame
 * must have run on the frame). */
void cpu_fbp_line_integral_row(const rtomo_fbp *plan, const cpu_fbp_state *st,
                               const void *frame, rtomo_dtype dtype,
                               int kept_row, float *out);

/* ------------------------------------------------- phase retrieval ---- */

/* FFTW plans and the padded array when plan->phase.on (else nothing). */
rtomo_status cpu_fbp_phase_create(const rtomo_fbp *plan, cpu_fbp_state *st,
                                  rtomo_error *err);
void cpu_fbp_phase_destroy(cpu_fbp_state *st);
/* Filter the phase rows of a raw frame (fbp_phase.h) into st's array. */
void cpu_fbp_phase_frame(const rtomo_fbp *plan, cpu_fbp_state *st,
                         const void *frame, rtomo_dtype dtype);
/* -log of kept row `kept_row` of the filtered intensities, floored at
 * RTOMO_PHASE_MIN_RATIO, into out[det_width]. */
void cpu_fbp_phase_row(const rtomo_fbp *plan, const cpu_fbp_state *st,
                       int kept_row, float *out);

/* -------------------------------------------------------- filtering ---- */

/* FFTW plans and per-worker buffers for plan->filter_length, into *out.
 * Fails with RTOMO_E_NOMEM, or RTOMO_E_BACKEND when FFTW cannot plan. */
rtomo_status cpu_fbp_filter_create(const rtomo_fbp *plan, int n_workers,
                                   cpu_fbp_filter **out, rtomo_error *err);
void cpu_fbp_filter_destroy(cpu_fbp_filter *filter);

/* Normalise and filter every kept row of `frame` into projection slot
 * `index` of the stored sinograms, using the pool. */
void cpu_fbp_filter_frame(const rtomo_fbp *plan, cpu_fbp_state *st,
                          int index, const void *frame, rtomo_dtype dtype);

/* Filter real rows a and b (b may be NULL: zeros) of det_width samples
 * into out_a and out_b as projections are filtered, with worker `worker`'s
 * buffer (out may be the input). */
void cpu_fbp_filter_rows(const rtomo_fbp *plan, const cpu_fbp_state *st,
                         int worker, const float *a, const float *b,
                         float *out_a, float *out_b);

/* ---------------------------------------------------- ring removal ---- */

/* The add_offsets op (engine_internal.h; cpu_fbp_rings.c). */
rtomo_status cpu_fbp_add_offsets(rtomo_fbp *plan, const float *offsets,
                                 const float *weights, rtomo_error *err);

/* Allocate the column sums when geom.rings is set (cpu_fbp_rings.c). */
rtomo_status cpu_fbp_rings_create(const rtomo_fbp *plan, cpu_fbp_state *st,
                                  rtomo_error *err);
void cpu_fbp_rings_destroy(cpu_fbp_state *st);
/* Add the line integrals of kept row `kept_row` of projection `index`
 * to its sector's sums (nothing without rings).  Distinct rows may be
 * added concurrently. */
void cpu_fbp_rings_add(const rtomo_fbp *plan, cpu_fbp_state *st,
                       int kept_row, int index, const float *line);
/* The backend op (engine_internal.h). */
rtomo_status cpu_fbp_remove_rings(rtomo_fbp *plan, rtomo_error *err);

/* --------------------------------------------------- back-projection ---- */

/* Back-project kept rows kept_rows[0..n_rows-1] into out (n_rows images of
 * roi_height x roi_width), with plan->geom's ROI and interpolation and
 * plan->angles / plan->axis_shift as they are now. */
void cpu_fbp_backproject(const rtomo_fbp *plan, cpu_fbp_state *st,
                         const int *kept_rows, int n_rows, float *out);

/* A general back-projection: the listed projection slots (all n_proj in
 * order when slots is NULL) of kept rows kept_rows[0..n_rows-1] at ROI
 * roi = {x, y, w, h} into out (n_rows images of h x w).  Without weights
 * out is overwritten with the sums; with weights (each +1 or -1) the
 * added and the subtracted projections are summed apart and added to or
 * taken from out (`accumulate` must then be set). */
typedef struct cpu_fbp_bp_request {
    const int *kept_rows;
    int n_rows;
    const int *slots;
    const float *weights;
    int n_slots;                /* at most st->bp_capacity */
    int roi[4];
    rtomo_interp interp;
    float *out;
    int accumulate;             /* add into out instead of overwriting */
} cpu_fbp_bp_request;

void cpu_fbp_backproject_request(const rtomo_fbp *plan, cpu_fbp_state *st,
                                 const cpu_fbp_bp_request *rq);

/* Floats of accumulator a worker needs for pixel rows up to `width` wide. */
int cpu_fbp_backproject_row_capacity(int width);

/* -------------------------------------------- streaming, planes, slots ---- */

/* The CPU side of the backend ops of the same names (engine_internal.h):
 * resident slices in host memory (cpu_fbp_stream.c), planes of any
 * orientation (cpu_fbp_plane.c). */
rtomo_status cpu_fbp_clear_projection(rtomo_fbp *plan, int index,
                                      rtomo_error *err);
rtomo_status cpu_fbp_stream_open(rtomo_fbp *plan, const int *kept_rows,
                                 int n_rows, rtomo_error *err);
rtomo_status cpu_fbp_stream_apply(rtomo_fbp *plan, const int *slots,
                                  const float *weights, int n,
                                  rtomo_error *err);
rtomo_status cpu_fbp_stream_read(rtomo_fbp *plan, const int *positions, int n,
                                 float *out, double *stats, rtomo_error *err);
rtomo_status cpu_fbp_stream_reset(rtomo_fbp *plan, rtomo_error *err);
void cpu_fbp_stream_close(rtomo_fbp *plan);
int cpu_fbp_stream_chunk(const rtomo_fbp *plan);
rtomo_status cpu_fbp_reconstruct_plane(rtomo_fbp *plan,
                                       const rtomo_fbp_plane *plane,
                                       const int *slots, int n_slots,
                                       float *out, rtomo_error *err);

#endif
