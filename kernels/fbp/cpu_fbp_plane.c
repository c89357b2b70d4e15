/*
 * cpu_fbp_plane.c — planes of any orientation on the CPU backend: the
 * reference that the CUDA plane is tested against, so it computes exactly
 * the definition in rtomo_engine.h.  Output pixel (i, j) is the point
 *     P = centre + (i - (w-1)/2) u + (j - (h-1)/2) v
 * with z0 = floor(P.z), fz = P.z - z0, and its value is
 *     (1 - fz) S(z0) + fz S(z0 + 1),
 *     S(r) = sum over the listed slots p of q_p(row r, s_p),
 *     s_p = axis + axis_shift[p] + (P.x - c) cos a_p - (P.y - c) sin a_p
 * where q_p is sampled as cpu_fbp_backproject.c samples it (linear or
 * nearest, 0 off the detector) and S(r) = 0 for rows that are not kept;
 * a row of weight 0 is not read at all.  The two sums S are float32, in
 * the order of the slot list.  With the circular field of view a point
 * farther than R from the rotation axis, (P.x - c)^2 + (P.y - c)^2 >
 * R^2 in double, is 0 (reads no row).
 *
 * s_p is computed with the back-projector's own arithmetic: a double base
 * per projection, one double product for the y term rounded to float, and
 * a float step along x.  A plane through grid points of a kept row is then
 * the slice there bit for bit (the slice's ROI being the whole grid),
 * instead of agreeing only to the rounding of s.
 *
 * Work is shared over the backend's thread pool in tasks of CHUNK pixels
 * of one output row; within a task the projections are the outer loop, so
 * that the rows of each projection are read from cache once per task.
 */
#include "config.h"

#include <math.h>
#include <stdlib.h>

#include "cpu_fbp.h"

#define CHUNK 64            /* output pixels of one row per task */

/* Per listed slot, computed once per call in double. */
typedef struct plane_projection {
    int slot;
    double base;            /* guarded coordinate of grid pixel (0, 0) */
    double sin;             /* minus the step along y */
    float cos;              /* the step along x */
} plane_projection;

typedef struct plane_job {
    const rtomo_fbp *plan;
    const cpu_fbp_state *st;
    const rtomo_fbp_plane *plane;
    const plane_projection *proj;
    int n_proj;             /* listed slots */
    int chunks_per_row;
    float *out;
} plane_job;

/* The pixels of one task: where they are and which rows they read. */
typedef struct pixel_chunk {
    int n;
    float x[CHUNK];         /* P.x, as the back-projector's float x */
    double y[CHUNK];        /* P.y */
    const float *row[2][CHUNK]; /* guarded rows z0, z0+1 of projection 0,
                                   NULL where the weight is 0 */
    float weight[2][CHUNK];
    float sum[2][CHUNK];
} pixel_chunk;

static void prepare_projections(const rtomo_fbp *plan, const int *slots,
                                int n, plane_projection *proj)
{
    const rtomo_fbp_geometry *g = &plan->geom;
    const double c = 0.5 * (g->slice_size - 1);
    for (int i = 0; i < n; i++) {
        const int p = slots ? slots[i] : i;
        const double cs = cos(plan->angles[p]), sn = sin(plan->angles[p]);
        /* The expression of cpu_fbp_backproject.c with its ROI at (0, 0),
         * term for term, so that both round alike. */
        proj[i].slot = p;
        proj[i].base = g->axis + plan->axis_shift[p] + CPU_FBP_GUARD_BEFORE +
                       (0 - c) * cs - (0 - c) * sn;
        proj[i].sin = sn;
        proj[i].cos = (float)cs;
    }
}

/* Rows read at height z and their weights.  The range test comes first,
 * in double, so that no far-off z is ever converted to int. */
static void pixel_rows(const rtomo_fbp *plan, const cpu_fbp_state *st,
                       double z, pixel_chunk *c, int k)
{
    const rtomo_fbp_geometry *g = &plan->geom;
    c->row[0][k] = c->row[1][k] = NULL;
    c->weight[0][k] = c->weight[1][k] = 0.0f;
    if (!(z > g->row_first - 1.0 && z < (double)g->row_first + g->row_count))
        return;
    const double z0 = floor(z), fz = z - z0;
    const int kept = (int)z0 - g->row_first;     /* -1 .. row_count-1 */
    if (kept >= 0) {
        c->row[0][k] = cpu_fbp_projection_row(st, g->n_proj, kept, 0) -
                       CPU_FBP_GUARD_BEFORE;
        c->weight[0][k] = (float)(1.0 - fz);
    }
    if (fz > 0.0 && kept + 1 < g->row_count) {
        c->row[1][k] = cpu_fbp_projection_row(st, g->n_proj, kept + 1, 0) -
                       CPU_FBP_GUARD_BEFORE;
        c->weight[1][k] = (float)fz;
    }
}

/* Outside the circular field of view (never without it). */
static int outside_fov(const rtomo_fbp *plan, const double p[3])
{
    if (plan->fov_limit < 0)
        return 0;
    const double c = 0.5 * (plan->geom.slice_size - 1);
    const double dx = p[0] - c, dy = p[1] - c;
    return dx * dx + dy * dy > plan->fov_radius * plan->fov_radius;
}

static void prepare_chunk(const plane_job *job, int j, int i0, pixel_chunk *c)
{
    const rtomo_fbp_plane *pl = job->plane;
    const double dj = j - 0.5 * (pl->height - 1);
    c->n = pl->width - i0 < CHUNK ? pl->width - i0 : CHUNK;
    for (int k = 0; k < c->n; k++) {
        const double di = i0 + k - 0.5 * (pl->width - 1);
        double p[3];
        for (int a = 0; a < 3; a++)
            p[a] = pl->centre[a] + di * pl->u[a] + dj * pl->v[a];
        c->x[k] = (float)p[0];
        c->y[k] = p[1];
        pixel_rows(job->plan, job->st, p[2], c, k);
        if (outside_fov(job->plan, p))
            c->row[0][k] = c->row[1][k] = NULL;
        c->sum[0][k] = c->sum[1][k] = 0.0f;
    }
}

/* q sampled at guarded coordinate t, as cpu_fbp_backproject.c does: t is
 * clamped into the guards (a NaN, from absurd coordinates, to guard 0). */
static inline float sample(const float *q, float t, float hi, int nearest)
{
    t = t >= 0.0f ? t : 0.0f;
    t = t <= hi ? t : hi;
    if (nearest)
        return q[(int)(t + 0.5f)];
    const int i = (int)t;
    const float f = t - (float)i;
    return (1.0f - f) * q[i] + f * q[i + 1];
}

static void sum_projections(const plane_job *job, pixel_chunk *c)
{
    const rtomo_fbp_geometry *g = &job->plan->geom;
    const size_t stride = (size_t)job->st->bin_stride;
    const float hi = (float)(g->det_width + CPU_FBP_GUARD_BEFORE);
    const int nearest = g->interp == RTOMO_INTERP_NEAREST;
    for (int i = 0; i < job->n_proj; i++) {
        const plane_projection *pr = &job->proj[i];
        const size_t offset = (size_t)pr->slot * stride;
        for (int k = 0; k < c->n; k++) {
            const float t0 = (float)(pr->base - c->y[k] * pr->sin);
            const float t = t0 + c->x[k] * pr->cos;
            for (int r = 0; r < 2; r++)
                if (c->row[r][k])
                    c->sum[r][k] += sample(c->row[r][k] + offset, t, hi,
                                           nearest);
        }
    }
}

static void plane_task(void *ctx, int task, int worker)
{
    (void)worker;
    const plane_job *job = ctx;
    const int j = task / job->chunks_per_row;
    const int i0 = (task % job->chunks_per_row) * CHUNK;
    pixel_chunk c;
    prepare_chunk(job, j, i0, &c);
    sum_projections(job, &c);
    float *out = job->out + (size_t)j * (size_t)job->plane->width + i0;
    for (int k = 0; k < c.n; k++) {
        /* A weight of exactly 1 gives the slice's sum unchanged. */
        float v = c.row[0][k] ? c.weight[0][k] * c.sum[0][k] : 0.0f;
        if (c.row[1][k])
            v += c.weight[1][k] * c.sum[1][k];
        out[k] = v;
    }
}

rtomo_status cpu_fbp_reconstruct_plane(rtomo_fbp *plan,
                                       const rtomo_fbp_plane *plane,
                                       const int *slots, int n_slots,
                                       float *out, rtomo_error *err)
{
    cpu_fbp_state *st = plan->impl;
    const double t0 = rtomo_now_seconds();
    plane_projection *proj = malloc(sizeof *proj * (size_t)(n_slots > 0 ? n_slots : 1));
    if (!proj)
        return rtomo_set_error(err, RTOMO_E_NOMEM,
                               "out of memory for the constants of %d "
                               "projections", n_slots);
    prepare_projections(plan, slots, n_slots, proj);
    plane_job job = {plan, st, plane, proj, n_slots,
                     (plane->width + CHUNK - 1) / CHUNK, out};
    cpu_pool_run(st->pool, plane->height * job.chunks_per_row, plane_task,
                 &job);
    free(proj);
    plan->stats.backproject_seconds += rtomo_now_seconds() - t0;
    return RTOMO_OK;
}
