/*
 * cpu_cone_backproject.c — FDK's voxel-driven weighted back-projection on
 * the CPU, threaded over the ROI's y rows.
 *
 * Every voxel of a column (x, y) sees a projection at the same detector
 * column and with the same distance weight (cone_column_at); only its
 * row depends on z, linearly.  So per row of the ROI and projection the
 * columns' geometry is computed once into scratch, and the z loop then
 * walks x innermost, writing the volume contiguously.  A task owns its y
 * row in every z plane: no two tasks write one voxel.
 */
#include "config.h"

#include "cpu_cone.h"

typedef struct bp_job {
    const rtomo_cone *c;
    const int *indices;
    int n;
} bp_job;

/* The geometry of the ROI row y at projection p into fu, dv, w. */
static void row_columns(const rtomo_cone *c, int p, float y, float *fu,
                        float *dv, float *w)
{
    const cone_bp_const *k = &c->bp;
    const float cb = c->cos_beta[p], sb = c->sin_beta[p];
    for (int i = 0; i < k->nx; i++) {
        float x = k->x0 + (float)i * k->voxel;
        cone_column col = cone_column_at(k, cb, sb, x, y);
        fu[i] = col.fu;
        dv[i] = col.dv_dz;
        w[i] = col.weight;
    }
}

static void bp_task(void *ctx, int j, int worker)
{
    const bp_job *job = ctx;
    const rtomo_cone *c = job->c;
    const cone_bp_const *k = &c->bp;
    const cpu_cone *s = (const cpu_cone *)c->impl;
    float *fu = s->scratch + (size_t)worker * 3 * (size_t)k->nx;
    float *dv = fu + k->nx, *w = dv + k->nx;
    const float y = k->y0 + (float)j * k->voxel;
    const size_t plane = (size_t)k->nx * (size_t)k->ny;
    for (int n = 0; n < job->n; n++) {
        const float *q = cpu_cone_slot(c, n);
        row_columns(c, job->indices[n], y, fu, dv, w);
        for (int z = 0; z < k->nz; z++) {
            const float zz = k->z0 + (float)z * k->voxel;
            float *out = s->volume + (size_t)z * plane + (size_t)j * k->nx;
            for (int i = 0; i < k->nx; i++)
                out[i] += w[i] * cone_bilinear(q, k->det_u, k->det_v, fu[i],
                                               zz * dv[i] + k->v0);
        }
    }
}

void cpu_cone_backproject(const rtomo_cone *c, const int *indices, int n)
{
    const cpu_cone *s = (const cpu_cone *)c->impl;
    bp_job job = {c, indices, n};
    cpu_pool_run(s->pool, c->bp.ny, bp_task, &job);
}
