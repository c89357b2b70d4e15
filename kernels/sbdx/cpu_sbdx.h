/*
 * cpu_sbdx.h — private to the CPU SBDX backend: the two reconstruction
 * formulations (scatter and gather).  The backend (cpu_sbdx.c) owns the plan state; these functions only
 * read the frame and LUTs and write plane pixels.
 *
 * Both formulations add, into every plane pixel, the products
 * v * (wx * wy) in the order of the samples in the frame (hole row, hole
 * column, detector row, detector column), in float32, then finish the sum
 * with cpu_sbdx_finish() (scale, flat-field).  So they agree to the last
 * bit unless the compiler reorders float arithmetic.
 */
#ifndef RTOMO_CPU_SBDX_H
#define RTOMO_CPU_SBDX_H

#include "engine_internal.h"
#include "sbdx_lut.h"

/* What one frame's reconstruction reads and writes. */
typedef struct cpu_sbdx_job {
    const rtomo_sbdx_geometry *geom;    /* normalised (out_* filled in) */
    const rtomo_sbdx_lut *lut;
    const float *frame;                 /* holes x detector samples */
    float *planes;                      /* n_planes x out_height x out_width */
    float scale;                        /* m^2 / (Wd * Hd) */
} cpu_sbdx_job;

/* Plane k's pixel (i, j) from its float sum of deposits: scaled by
 * m^2 / (Wd * Hd), then flat-fielded when the geometry asks for it
 * (rtomo_engine.h). */
static inline float cpu_sbdx_finish(const cpu_sbdx_job *job, int k, int i,
                                    int j, float sum)
{
    float raw = sum * job->scale;
    if (!job->geom->flat_field)
        return raw;
    return rtomo_sbdx_flat_field(raw, job->lut->x[k].response[i],
                                 job->lut->y[k].response[j]);
}

/* Detector-centric: scatter every sample of the frame into plane k (zeroed
 * first, finished last).  Deposits outside the output are dropped.  Threads
 * may run different planes at once. */
void cpu_sbdx_scatter_plane(const cpu_sbdx_job *job, int k);

/* Pixel-centric: gather output row `row` of plane k from the samples that
 * reach it, skipping the hole rows and columns that cannot.  Threads may
 * run different (plane, row) pairs at once. */
void cpu_sbdx_gather_row(const cpu_sbdx_job *job, int k, int row);

#endif /* RTOMO_CPU_SBDX_H */
