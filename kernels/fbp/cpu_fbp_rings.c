/*
 * cpu_fbp_rings.c — ring (detector stripe) removal in the CPU FBP backend:
 * the per-bin sums of every kept row's line integrals, added as each
 * projection is filtered, and the correction of the held filtered
 * projections by the filtered stripe offsets (rtomo_rings, fbp_rings.c).
 *
 * The ramp filter is linear and rows are zero-padded before the transform,
 * so filter(s_p - c) = filter(s_p) - filter(c): one filtered offset row per
 * kept row corrects every projection of it, times the projection's angular
 * weight proj_scale[p] that filtering applied.  A second call after more
 * projections came subtracts filter(c_new - c_old) from the projections
 * corrected before and filter(c_new) from the new ones; the pair is one
 * complex transform (the filter's two-rows trick).  Sums are double: they
 * run over thousands of projections.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "cpu_fbp.h"

rtomo_status cpu_fbp_rings_create(const rtomo_fbp *plan, cpu_fbp_state *st,
                                  rtomo_error *err)
{
    if (plan->geom.rings == RTOMO_RINGS_OFF)
        return RTOMO_OK;
    size_t n = (size_t)plan->geom.row_count * (size_t)plan->geom.det_width;
    st->rings_sum = calloc(RTOMO_RINGS_SECTORS * n, sizeof(double));
    st->rings_applied = calloc(n, sizeof(double));
    if (!st->rings_sum || !st->rings_applied)
        return rtomo_set_error(err, RTOMO_E_NOMEM,
                               "out of memory for the ring removal sums of "
                               "%d rows", plan->geom.row_count);
    return RTOMO_OK;
}

void cpu_fbp_rings_destroy(cpu_fbp_state *st)
{
    free(st->rings_sum);
    free(st->rings_applied);
    st->rings_sum = st->rings_applied = NULL;
}

void cpu_fbp_rings_add(const rtomo_fbp *plan, cpu_fbp_state *st,
                       int kept_row, int index, const float *line)
{
    if (!st->rings_sum)
        return;
    const int width = plan->geom.det_width;
    const size_t plane = (size_t)plan->geom.row_count * (size_t)width;
    double *sum = st->rings_sum +
                  (size_t)rtomo_fbp_rings_sector(plan, index) * plane +
                  (size_t)kept_row * (size_t)width;
    for (int i = 0; i < width; i++)
        sum[i] += line[i];
}

/* Per worker: the row's mean, offsets and median window (doubles), and
 * the offsets to filter: c and c - c_applied (floats). */
typedef struct rings_job {
    rtomo_fbp *plan;
    cpu_fbp_state *st;
    double *scratch;            /* per worker: width + RTOMO_RINGS_SCRATCH */
    float *rows;                /* per worker: 2 width */
} rings_job;

/* Doubles per worker: the offsets and the estimator's scratch. */
static size_t scratch_size(const rtomo_fbp *plan)
{
    const int width = plan->geom.det_width;
    return (size_t)width + RTOMO_RINGS_SCRATCH(width, plan->geom.rings_width);
}

/* This row's offsets c into fc, and fd = c - the offsets applied before
 * (which c then replaces). */
static void row_offsets(const rings_job *job, int kept_row, int worker,
                        float *fc, float *fd)
{
    const rtomo_fbp *plan = job->plan;
    const int width = plan->geom.det_width;
    double *c = job->scratch +
                (size_t)worker * scratch_size(plan);
    double *scratch = c + width;
    const size_t at = (size_t)kept_row * (size_t)width;
    const size_t plane = (size_t)plan->geom.row_count * (size_t)width;
    const double *sums[RTOMO_RINGS_SECTORS];
    for (int j = 0; j < RTOMO_RINGS_SECTORS; j++)
        sums[j] = job->st->rings_sum + (size_t)j * plane + at;
    double *applied = job->st->rings_applied + at;
    rtomo_fbp_rings_offsets(sums, plan->rings_counts, width,
                            plan->geom.rings_width, scratch, c);
    for (int i = 0; i < width; i++) {
        fc[i] = (float)c[i];
        fd[i] = (float)(c[i] - applied[i]);
        applied[i] = c[i];
    }
}

static void rings_row_task(void *ctx, int kept_row, int worker)
{
    const rings_job *job = ctx;
    const rtomo_fbp *plan = job->plan;
    const int width = plan->geom.det_width, n_proj = plan->geom.n_proj;
    float *fc = job->rows + (size_t)worker * 2 * (size_t)width;
    float *fd = fc + width;
    row_offsets(job, kept_row, worker, fc, fd);
    cpu_fbp_filter_rows(plan, job->st, worker, fc, fd, fc, fd);
    for (int p = 0; p < n_proj; p++) {
        if (!plan->received[p])
            continue;       /* never fed: stays zero */
        const float *q = plan->rings_done[p] ? fd : fc;
        const float scale = plan->proj_scale[p];
        float *row = cpu_fbp_projection_row(job->st, n_proj, kept_row, p);
        for (int i = 0; i < width; i++)
            row[i] -= scale * q[i];
    }
}

rtomo_status cpu_fbp_remove_rings(rtomo_fbp *plan, rtomo_error *err)
{
    cpu_fbp_state *st = plan->impl;
    const size_t width = (size_t)plan->geom.det_width;
    const size_t workers = (size_t)st->n_workers;
    rings_job job = {plan, st, NULL, NULL};
    job.scratch = malloc(sizeof(double) * workers * scratch_size(plan));
    job.rows = malloc(sizeof(float) * workers * 2 * width);
    if (!job.scratch || !job.rows) {
        free(job.scratch);
        free(job.rows);
        return rtomo_set_error(err, RTOMO_E_NOMEM,
                               "out of memory for ring removal");
    }
    if (plan->n_received > 0)
        cpu_pool_run(st->pool, plan->geom.row_count, rings_row_task, &job);
    free(job.scratch);
    free(job.rows);
    return RTOMO_OK;
}

/* ------------------------------------------- offsets from the front end ---- */

/* The held projections corrected by a per-pixel offset with a weight per
 * projection (flats interpolated, fbp_flats.c): the same filtering of one
 * offset row and the same update of every projection row as above. */
typedef struct offsets_job {
    const rtomo_fbp *plan;
    cpu_fbp_state *st;
    const float *offsets, *weights;
    float *rows;                /* per worker: 2 width */
} offsets_job;

static void offsets_row_task(void *ctx, int kept_row, int worker)
{
    const offsets_job *job = ctx;
    const rtomo_fbp *plan = job->plan;
    const int width = plan->geom.det_width, n_proj = plan->geom.n_proj;
    float *q = job->rows + (size_t)worker * 2 * (size_t)width;
    cpu_fbp_filter_rows(plan, job->st, worker,
                        job->offsets + (size_t)kept_row * width, NULL, q,
                        NULL);
    for (int p = 0; p < n_proj; p++) {
        const float w = job->weights[p];
        if (w == 0.f)
            continue;
        float *row = cpu_fbp_projection_row(job->st, n_proj, kept_row, p);
        for (int i = 0; i < width; i++)
            row[i] += w * q[i];
    }
}

rtomo_status cpu_fbp_add_offsets(rtomo_fbp *plan, const float *offsets,
                                 const float *weights, rtomo_error *err)
{
    cpu_fbp_state *st = plan->impl;
    offsets_job job = {plan, st, offsets, weights, NULL};
    job.rows = malloc(sizeof(float) * (size_t)st->n_workers * 2 *
                      (size_t)plan->geom.det_width);
    if (!job.rows)
        return rtomo_set_error(err, RTOMO_E_NOMEM,
                               "out of memory for the offset correction");
    cpu_pool_run(st->pool, plan->geom.row_count, offsets_row_task, &job);
    free(job.rows);
    return RTOMO_OK;
}
