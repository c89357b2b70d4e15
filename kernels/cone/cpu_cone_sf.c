/*
 * cpu_cone_sf.c — the separable-footprint cone-beam pair on the CPU (the
 * reference): A (volume to projections) and A^T, with the footprints of
 * cone_sf.h, on the worker pool.
 *
 * A is voxel-driven but each task owns one projection, so no two threads
 * write one cell: per voxel column (x, y) the transaxial weights F1 are
 * computed once, the column's voxels are gathered per detector row
 * (C[t] = sum_z F2_z(t) f(z)), and the rows are spread over the cells
 * (p[t][s] += l_phi F1(s) C[t]); l_theta multiplies each cell at the end.
 * A^T owns one ROI row per task and, per column and projection, first sums
 * each row's cells (R[t] = sum_s F1(s) l_theta g[t][s]: the paper's
 * Algorithm 1, the transaxial sums shared by the whole z column), then
 * each voxel's rows (b(z) += l_phi sum_t F2_z(t) R[t]).  The same weights
 * in both, associated differently: a transpose to float rounding.
 */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cone_sf.h"
#include "cpu_cone_sf.h"
#include "engine_internal.h"

struct cpu_cone_sf {
    const rtomo_cone *geo;
    cone_bp_const k;            /* geo->bp on the physical detector (FDK's
                                   may be widened for a half fan) */
    const float *amp_theta;     /* det_v x det_u */
    cpu_pool *pool;
    float *scratch;             /* per worker: scratch_len floats */
    size_t scratch_len;
    float *weighted;            /* A^T's input times l_theta */
};

rtomo_status cpu_cone_sf_create(const rtomo_cone *geo, const float *amp_theta,
                                const rtomo_engine_options *opt,
                                cpu_cone_sf **out, rtomo_error *err)
{
    cpu_cone_sf *s = calloc(1, sizeof *s);
    *out = s;
    if (!s)
        return rtomo_set_error(err, RTOMO_E_NOMEM, "out of memory");
    s->geo = geo;
    s->amp_theta = amp_theta;
    s->k = geo->bp;
    s->k.det_u = geo->geom.det_u;
    s->k.u0 -= (float)geo->filt_off;
    rtomo_status st = cpu_pool_create(rtomo_cpu_thread_count(opt), &s->pool,
                                      err);
    if (st != RTOMO_OK)
        return st;
    const rtomo_cone_geometry *g = &geo->geom;
    s->scratch_len = (size_t)g->det_u + (size_t)g->det_v + (size_t)g->roi_nz;
    s->scratch = malloc(sizeof(float) * s->scratch_len *
                        (size_t)cpu_pool_size(s->pool));
    s->weighted = malloc(sizeof(float) * geo->frame_len * (size_t)g->n_proj);
    if (!s->scratch || !s->weighted)
        return rtomo_set_error(err, RTOMO_E_NOMEM,
                               "out of memory for the projector's scratch "
                               "(%d projections of %d x %d)", g->n_proj,
                               g->det_u, g->det_v);
    return RTOMO_OK;
}

void cpu_cone_sf_destroy(cpu_cone_sf *s)
{
    if (!s)
        return;
    cpu_pool_destroy(s->pool);
    free(s->scratch);
    free(s->weighted);
    free(s);
}

/* ------------------------------------------------ one column, one view ---- */

/* A column's footprint at one view, clipped to the detector: cells
 * s0..s1 with weights f1[0..], rows t0..t1 that any of its voxels
 * touches.  0 when it misses the detector. */
typedef struct column_view {
    cone_sf_column col;
    int s0, s1, t0, t1;
} column_view;

static int column_view_at(const rtomo_cone *geo, const cone_bp_const *k,
                          int p, int i, int j, float *f1, column_view *cv)
{
    const float x = k->x0 + (float)i * k->voxel;
    const float y = k->y0 + (float)j * k->voxel;
    cv->col = cone_sf_column_at(k, geo->cos_beta[p], geo->sin_beta[p], x, y);
    cone_sf_cells(&cv->col, &cv->s0, &cv->s1);
    cv->s0 = cv->s0 < 0 ? 0 : cv->s0;
    cv->s1 = cv->s1 >= k->det_u ? k->det_u - 1 : cv->s1;
    if (cv->s0 > cv->s1)
        return 0;
    float lo, hi, lo1, hi1;
    cone_sf_rows(k, &cv->col, k->z0, &lo, &hi);
    cone_sf_rows(k, &cv->col, k->z0 + (float)(k->nz - 1) * k->voxel, &lo1,
                 &hi1);
    cv->t0 = (int)floorf(lo + 0.5f);
    cv->t1 = (int)floorf(hi1 + 0.5f);
    cv->t0 = cv->t0 < 0 ? 0 : cv->t0;
    cv->t1 = cv->t1 >= k->det_v ? k->det_v - 1 : cv->t1;
    if (cv->t0 > cv->t1)
        return 0;
    for (int s = cv->s0; s <= cv->s1; s++)
        f1[s - cv->s0] = cone_sf_f1(&cv->col, s);
    return 1;
}

/* The rows of voxel z of the column, clipped to cv's rows. */
static void voxel_rows(const cone_bp_const *k, const column_view *cv, int z,
                       float *lo, float *hi, int *ta, int *tb)
{
    cone_sf_rows(k, &cv->col, k->z0 + (float)z * k->voxel, lo, hi);
    *ta = (int)floorf(*lo + 0.5f);
    *tb = (int)floorf(*hi + 0.5f);
    *ta = *ta < cv->t0 ? cv->t0 : *ta;
    *tb = *tb > cv->t1 ? cv->t1 : *tb;
}

/* --------------------------------------------------------------- A ---- */

typedef struct sf_job {
    const cpu_cone_sf *s;
    const float *in;
    float *out;
} sf_job;

/* A for column (i, j) into projection p. */
static void project_column(const sf_job *job, int p, int i, int j, float *f1,
                           float *rows, float *proj)
{
    const rtomo_cone *geo = job->s->geo;
    const cone_bp_const *k = &job->s->k;
    column_view cv;
    if (!column_view_at(geo, k, p, i, j, f1, &cv))
        return;
    const size_t plane = (size_t)k->nx * (size_t)k->ny;
    const float *vox = job->in + (size_t)j * k->nx + i;
    memset(rows, 0, sizeof(float) * (size_t)(cv.t1 - cv.t0 + 1));
    for (int z = 0; z < k->nz; z++) {
        const float f = vox[(size_t)z * plane];
        if (f == 0.0f)
            continue;
        float lo, hi;
        int ta, tb;
        voxel_rows(k, &cv, z, &lo, &hi, &ta, &tb);
        for (int t = ta; t <= tb; t++)
            rows[t - cv.t0] += cone_sf_f2(lo, hi, t) * f;
    }
    for (int t = cv.t0; t <= cv.t1; t++) {
        const float c = cv.col.amp * rows[t - cv.t0];
        if (c == 0.0f)
            continue;
        float *cell = proj + (size_t)t * k->det_u;
        for (int s = cv.s0; s <= cv.s1; s++)
            cell[s] += f1[s - cv.s0] * c;
    }
}

static void project_task(void *ctx, int p, int worker)
{
    const sf_job *job = ctx;
    const cpu_cone_sf *s = job->s;
    const rtomo_cone *geo = s->geo;
    float *f1 = s->scratch + (size_t)worker * s->scratch_len;
    float *rows = f1 + geo->geom.det_u;
    float *proj = job->out + (size_t)p * geo->frame_len;
    memset(proj, 0, sizeof(float) * geo->frame_len);
    for (int j = 0; j < s->k.ny; j++)
        for (int i = 0; i < s->k.nx; i++)
            project_column(job, p, i, j, f1, rows, proj);
    for (size_t c = 0; c < geo->frame_len; c++)
        proj[c] *= s->amp_theta[c];
}

void cpu_cone_sf_project(cpu_cone_sf *s, const float *volume,
                         float *projections)
{
    sf_job job = {s, volume, projections};
    cpu_pool_run(s->pool, s->geo->geom.n_proj, project_task, &job);
}

/* ------------------------------------------------------------- A^T ---- */

/* A^T of projection p (already times l_theta) added into the column's
 * voxels acc[0..nz-1]. */
static void backproject_column(const sf_job *job, int p, int i, int j,
                               float *f1, float *rows, float *acc)
{
    const rtomo_cone *geo = job->s->geo;
    const cone_bp_const *k = &job->s->k;
    column_view cv;
    if (!column_view_at(geo, k, p, i, j, f1, &cv))
        return;
    const float *proj = job->in + (size_t)p * geo->frame_len;
    for (int t = cv.t0; t <= cv.t1; t++) {
        const float *cell = proj + (size_t)t * k->det_u;
        float sum = 0.0f;
        for (int s = cv.s0; s <= cv.s1; s++)
            sum += f1[s - cv.s0] * cell[s];
        rows[t - cv.t0] = sum;
    }
    for (int z = 0; z < k->nz; z++) {
        float lo, hi;
        int ta, tb;
        voxel_rows(k, &cv, z, &lo, &hi, &ta, &tb);
        float b = 0.0f;
        for (int t = ta; t <= tb; t++)
            b += cone_sf_f2(lo, hi, t) * rows[t - cv.t0];
        acc[z] += cv.col.amp * b;
    }
}

static void backproject_task(void *ctx, int j, int worker)
{
    const sf_job *job = ctx;
    const cpu_cone_sf *s = job->s;
    const rtomo_cone *geo = s->geo;
    const cone_bp_const *k = &s->k;
    float *f1 = s->scratch + (size_t)worker * s->scratch_len;
    float *rows = f1 + geo->geom.det_u;
    float *acc = rows + geo->geom.det_v;
    const size_t plane = (size_t)k->nx * (size_t)k->ny;
    for (int i = 0; i < k->nx; i++) {
        memset(acc, 0, sizeof(float) * (size_t)k->nz);
        for (int p = 0; p < geo->geom.n_proj; p++)
            backproject_column(job, p, i, j, f1, rows, acc);
        float *vox = job->out + (size_t)j * k->nx + i;
        for (int z = 0; z < k->nz; z++)
            vox[(size_t)z * plane] = acc[z];
    }
}

typedef struct weigh_job {
    const cpu_cone_sf *s;
    const float *in;
} weigh_job;

static void weigh_task(void *ctx, int p, int worker)
{
    (void)worker;
    const weigh_job *job = ctx;
    const size_t n = job->s->geo->frame_len, at = (size_t)p * n;
    for (size_t c = 0; c < n; c++)
        job->s->weighted[at + c] = job->in[at + c] * job->s->amp_theta[c];
}

void cpu_cone_sf_backproject(cpu_cone_sf *s, const float *projections,
                             float *volume)
{
    weigh_job wj = {s, projections};
    cpu_pool_run(s->pool, s->geo->geom.n_proj, weigh_task, &wj);
    sf_job job = {s, s->weighted, volume};
    cpu_pool_run(s->pool, s->k.ny, backproject_task, &job);
}
