/*
 * cpu_fbp_backproject.c — the reference back-projector.  Every GPU kernel is
 * checked against this function, so it computes exactly the documented sum
 * (rtomo_engine.h): pixel (x, y), c = (slice_size - 1) / 2,
 *     s_p = axis + axis_shift[p] + (x - c) cos a_p - (y - c) sin a_p
 *     LINEAR:  i = floor(s_p), f = s_p - i, (1 - f) q_p[i] + f q_p[i + 1]
 *     NEAREST: q_p[floor(s_p + 0.5)]
 * with q_p[j] = 0 outside [0, det_width), summed over p in float32.
 *
 * How it stays fast without leaving that definition:
 *   - the detector coordinate is kept shifted by the guard (t = s + 1 >= 0
 *     after clamping), so (int)t is floor(s) + 1 without calling floorf;
 *   - t is clamped into [0, det_width + 1]: any s beyond the detector lands
 *     on a zero guard bin with the same (zero) result, so the inner loop has
 *     no branches and gcc -O2 vectorises it;
 *   - the x loop runs over fixed chunks of CHUNK pixels (gcc's -O2 cost
 *     model vectorises only loops whose trip count is a known multiple of
 *     the vector width); pixels past the ROI's right edge are computed into
 *     scratch and dropped;
 *   - a task is a few pixel rows of one slice, so each projection row is
 *     read from cache once for those rows;
 *   - with the circular field of view (fbp_fov.h) each pixel row sums only
 *     the chunks that hold its inside pixels, with the same per-pixel
 *     arithmetic (the chunk index is the pixel's own, so the sums inside
 *     are bit for bit the unmasked ones), and stores 0 outside.
 */
#include "config.h"

#include <math.h>
#include <string.h>

#include "cpu_fbp.h"
#include "fbp_fov.h"

#define CHUNK 16            /* pixels per vectorised inner loop */
#define ROWS_PER_TASK 4     /* pixel rows sharing one pass over projections */

int cpu_fbp_backproject_row_capacity(int width)
{
    return ROWS_PER_TASK * ((width + CHUNK - 1) / CHUNK * CHUNK);
}

/* acc[x] += q sampled at t0 + x*step for chunk0*CHUNK <= x <
 * chunk_end*CHUNK, by linear interpolation or, when `nearest`, at the
 * nearest bin.  q is the guarded row (q[0] is the guard before bin 0),
 * hi = det_width + 1 the last guard.
 * Always inlined with a constant `nearest`, so that each caller gets its
 * own branch-free loop that gcc vectorises (checked with -fopt-info-vec). */
static inline __attribute__((always_inline)) void
accumulate(float *restrict acc, const float *restrict q, float t0, float step,
           float hi, int chunk0, int chunk_end, int nearest)
{
    for (int x0 = chunk0 * CHUNK; x0 < chunk_end * CHUNK; x0 += CHUNK) {
        float *a = acc + x0;
        for (int x = 0; x < CHUNK; x++) {
            float t = t0 + (float)(x0 + x) * step;
            t = t < 0.0f ? 0.0f : t;
            t = t > hi ? hi : t;
            if (nearest) {
                a[x] += q[(int)(t + 0.5f)];
            } else {
                int i = (int)t;
                float f = t - (float)i;
                a[x] += (1.0f - f) * q[i] + f * q[i + 1];
            }
        }
    }
}

/* Per listed projection: the guarded detector coordinate of ROI pixel
 * (0, 0), and the steps along x (cos) and y (-sin).  Done in double once
 * per call, so that the float inner loop starts every row from an exact
 * base. */
static void prepare_projections(const rtomo_fbp *plan, cpu_fbp_state *st,
                                const cpu_fbp_bp_request *rq)
{
    const rtomo_fbp_geometry *g = &plan->geom;
    const double c = 0.5 * (g->slice_size - 1);
    for (int i = 0; i < rq->n_slots; i++) {
        const int p = rq->slots ? rq->slots[i] : i;
        double cs = cos(plan->angles[p]), sn = sin(plan->angles[p]);
        st->bp_base[i] = g->axis + plan->axis_shift[p] + CPU_FBP_GUARD_BEFORE +
                         (rq->roi[0] - c) * cs - (rq->roi[1] - c) * sn;
        st->bp_cos[i] = (float)cs;
        st->bp_sin[i] = sn;
    }
}

typedef struct bp_job {
    const rtomo_fbp *plan;
    cpu_fbp_state *st;
    const cpu_fbp_bp_request *rq;
    int blocks_per_slice;       /* ROWS_PER_TASK pixel rows per block */
} bp_job;

/* The ROI columns [first[r], end[r]) of ROI row y_first + r that lie in
 * the field of view (the whole row without the circle). */
typedef struct row_span {
    int first[ROWS_PER_TASK], end[ROWS_PER_TASK];
} row_span;

static void field_of_view(const bp_job *job, int y_first, int rows,
                          row_span *sp)
{
    const rtomo_fbp *plan = job->plan;
    const int *roi = job->rq->roi;
    for (int r = 0; r < rows; r++) {
        int first, end;
        fbp_fov_row(plan->fov_limit, plan->geom.slice_size - 1,
                    roi[1] + y_first + r, &first, &end);
        first -= roi[0];
        end -= roi[0];
        sp->first[r] = first < 0 ? 0 : first;
        sp->end[r] = end > roi[2] ? roi[2] : end;
        if (sp->end[r] < sp->first[r])
            sp->end[r] = sp->first[r];
    }
}

/* acc (rows x stride) = the sum over the listed projections of sign
 * `sign` (every one when sign is 0) for pixel rows y_first.. of a slice,
 * over the chunks that hold each row's span sp (others stay 0). */
static void sum_projections(const bp_job *job, int slice, int y_first,
                            int rows, int sign, float *acc, int stride,
                            const row_span *sp)
{
    const rtomo_fbp_geometry *g = &job->plan->geom;
    const cpu_fbp_state *st = job->st;
    const cpu_fbp_bp_request *rq = job->rq;
    const float hi = (float)(g->det_width + CPU_FBP_GUARD_BEFORE);
    memset(acc, 0, sizeof(float) * (size_t)(rows * stride));
    for (int i = 0; i < rq->n_slots; i++) {
        if (sign && (rq->weights[i] > 0) != (sign > 0))
            continue;
        const int p = rq->slots ? rq->slots[i] : i;
        const float *q = cpu_fbp_projection_row(st, g->n_proj,
                                                rq->kept_rows[slice], p) -
                         CPU_FBP_GUARD_BEFORE;
        for (int r = 0; r < rows; r++) {
            if (sp->end[r] <= sp->first[r])
                continue;
            const int c0 = sp->first[r] / CHUNK;
            const int c1 = (sp->end[r] + CHUNK - 1) / CHUNK;
            float t0 = (float)(st->bp_base[i] - (y_first + r) * st->bp_sin[i]);
            /* A literal for `nearest`: one specialised loop each. */
            if (rq->interp == RTOMO_INTERP_NEAREST)
                accumulate(acc + r * stride, q, t0, st->bp_cos[i], hi,
                           c0, c1, 1);
            else
                accumulate(acc + r * stride, q, t0, st->bp_cos[i], hi,
                           c0, c1, 0);
        }
    }
}

/* out rows (+)= acc rows, or -= when sign < 0, over each row's span sp;
 * outside it 0 when overwriting, nothing when adding. */
static void store_rows(float *out, int width, const float *acc, int stride,
                       int rows, int accumulate_out, int sign,
                       const row_span *sp)
{
    for (int r = 0; r < rows; r++) {
        float *o = out + (size_t)r * (size_t)width;
        const float *a = acc + r * stride;
        const int x0 = sp->first[r], x1 = sp->end[r];
        if (!accumulate_out) {
            memset(o, 0, sizeof(float) * (size_t)x0);
            memcpy(o + x0, a + x0, sizeof(float) * (size_t)(x1 - x0));
            memset(o + x1, 0, sizeof(float) * (size_t)(width - x1));
        } else if (sign < 0) {
            for (int x = x0; x < x1; x++)
                o[x] -= a[x];
        } else {
            for (int x = x0; x < x1; x++)
                o[x] += a[x];
        }
    }
}

static void backproject_block_task(void *ctx, int task, int worker)
{
    const bp_job *job = ctx;
    const cpu_fbp_bp_request *rq = job->rq;
    const int width = rq->roi[2], height = rq->roi[3];
    const int slice = task / job->blocks_per_slice;
    const int y_first = (task % job->blocks_per_slice) * ROWS_PER_TASK;
    const int rows = height - y_first < ROWS_PER_TASK ? height - y_first
                                                      : ROWS_PER_TASK;
    const int stride = (width + CHUNK - 1) / CHUNK * CHUNK;
    float *acc = job->st->bp_rows +
                 (size_t)worker * (size_t)job->st->bp_row_capacity;
    float *out = rq->out + ((size_t)slice * (size_t)height +
                            (size_t)y_first) * (size_t)width;
    row_span sp = {{0}, {0}};
    field_of_view(job, y_first, rows, &sp);
    if (!rq->weights) {
        sum_projections(job, slice, y_first, rows, 0, acc, stride, &sp);
        store_rows(out, width, acc, stride, rows, rq->accumulate, 1, &sp);
        return;
    }
    /* Added and subtracted projections are summed apart, each sum then
     * added to or taken from the slice: the inner loop stays the plain
     * sum that every path shares. */
    for (int sign = 1; sign >= -1; sign -= 2) {
        sum_projections(job, slice, y_first, rows, sign, acc, stride, &sp);
        store_rows(out, width, acc, stride, rows, 1, sign, &sp);
    }
}

void cpu_fbp_backproject_request(const rtomo_fbp *plan, cpu_fbp_state *st,
                                 const cpu_fbp_bp_request *rq)
{
    prepare_projections(plan, st, rq);
    bp_job job = {plan, st, rq, (rq->roi[3] + ROWS_PER_TASK - 1) /
                                    ROWS_PER_TASK};
    cpu_pool_run(st->pool, rq->n_rows * job.blocks_per_slice,
                 backproject_block_task, &job);
}

void cpu_fbp_backproject(const rtomo_fbp *plan, cpu_fbp_state *st,
                         const int *kept_rows, int n_rows, float *out)
{
    const rtomo_fbp_geometry *g = &plan->geom;
    cpu_fbp_bp_request rq = {
        .kept_rows = kept_rows, .n_rows = n_rows,
        .n_slots = g->n_proj,
        .roi = {g->roi_x, g->roi_y, g->roi_width, g->roi_height},
        .interp = g->interp, .out = out,
    };
    cpu_fbp_backproject_request(plan, st, &rq);
}
