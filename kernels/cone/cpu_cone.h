/*
 * cpu_cone.h — the CPU backend of the cone-beam engine (the reference):
 * its state, shared by the filter (cpu_cone_filter.c), the back-projector
 * (cpu_cone_backproject.c) and the ops table (cpu_cone.c).
 */
#ifndef RTOMO_CPU_CONE_H
#define RTOMO_CPU_CONE_H

#include "cone_internal.h"
#include "cpu_pool.h"

typedef struct cpu_cone_filter cpu_cone_filter;

typedef struct cpu_cone {
    cpu_pool *pool;
    float *slots;               /* (chunk + 1) x filt_len */
    float *volume;              /* the ROI */
    float *scratch;             /* per worker: 3 x roi_nx (columns) */
    cpu_cone_filter *filter;
} cpu_cone;

static inline float *cpu_cone_slot(const rtomo_cone *c, int slot)
{
    const cpu_cone *s = (const cpu_cone *)c->impl;
    return s->slots + (size_t)slot * c->filt_len;
}

/* FFTW plans and per-worker buffers for rows of det_u samples. */
rtomo_status cpu_cone_filter_create(const rtomo_cone *c, int n_workers,
                                    cpu_cone_filter **out, rtomo_error *err);
void cpu_cone_filter_destroy(cpu_cone_filter *f);
/* Weight (row_weights x cos_weight) and filter every row of a projection
 * into `out` (det_v x filt_u), on the pool. */
void cpu_cone_filter_projection(const rtomo_cone *c, const float *li,
                                const float *row_weights, float *out);

/* Add slots 0..n-1 (projections indices[]) into the volume, on the pool. */
void cpu_cone_backproject(const rtomo_cone *c, const int *indices, int n);

#endif
