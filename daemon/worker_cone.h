/*
 * worker_cone.h — cone-beam plans on rtomod's engine threads, private to
 * the worker's files:
 *   worker_cone.c   the FDK plan of one z-slab of a scan's volume: frames
 *                   in as they arrive, the slab's slices out at the end
 *   cone_fields.c   the darks and flats it averages
 *   worker_cone_iter.c  reconstruction.method sirt / cgls: the line
 *                   integrals kept, and the volume solved with the
 *                   separable-footprint pair after its FDK
 */
#ifndef RTOMOD_WORKER_CONE_H
#define RTOMOD_WORKER_CONE_H

#include <stddef.h>

#include "worker_internal.h"

/* The cone-beam state of a plan (plan_state.cone). */
struct cone_plan {
    rtomo_cone *cone;           /* FDK of this worker's slab */
    struct cone_fields *fields;
    int set_first, set_count;   /* the slab's place among the slices */
    long projections;           /* fed to the engine */
    /* reconstruction.method sirt or cgls (worker_cone_iter.c; the slab
     * is then the whole ROI): every projection's line integrals in its
     * slot (n_proj x det_v x det_u), and which came. */
    rtomo_method_settings method;
    float *sino;
    unsigned char *received;
    /* The GPUs the solve's pair is split over (the begin job's; 0: the
     * worker's own options). */
    int n_solve_devices;
    int solve_devices[RTOMO_MAX_DEVICES];
    size_t solve_device_budget; /* the begin job's (0: the engine's own) */
};

/* ------------------------------------------------------ cone_fields.c ---- */

/* Dark and flat fields of frames of `samples` samples. */
typedef struct cone_fields cone_fields;

/* NULL when out of memory. */
cone_fields *cone_fields_new(size_t samples);
void cone_fields_free(cone_fields *f);
/* Add a dark (flat = 0) or flat frame of `dtype` samples to its sum. */
void cone_fields_add(cone_fields *f, int flat, const void *frame,
                     rtomo_dtype dtype);
/* The mean dark and flat fields as rtomo_cone_add_frame takes them: the
 * flat NULL without flats (the samples are line integrals already), the
 * dark NULL without darks or flats (0).  The means are taken at the
 * first call, when the projections begin; fields added later are
 * ignored. */
const float *cone_fields_dark(cone_fields *f);
const float *cone_fields_flat(cone_fields *f);

/* ------------------------------------------------------ worker_cone.c ---- */

/* A RTOMOD_JOB_CONE_BEGIN: make the slab's plan (on failure the plan is
 * marked failed and the loop told). */
void cone_begin(rtomod_worker *w, plan_state *s, rtomod_job *job);
/* A dark, flat or projection of the scan. */
void cone_frame(rtomod_worker *w, plan_state *s, rtomod_job *job);
/* The scan's end (a CLOSE job that does not abort): back-project what is
 * queued, read the slab and publish its slices, then SET_DONE. */
void cone_finish(rtomod_worker *w, plan_state *s, const rtomod_job *job);
/* Release the plan's cone state (plan_close). */
void cone_plan_free(plan_state *s);
/* The header of slice k of the plan's slab: FDK's ("fbp", iteration 0;
 * final unless a solve follows). */
void cone_slice_header(const plan_state *s, int k, rtomo_image_header *h);

/* ------------------------------------------------- worker_cone_iter.c ---- */

/* Keep what an iterative method needs (nothing for FDK alone); -1 when
 * out of memory. */
int cone_iter_begin(struct cone_plan *p, const rtomod_cone_begin_job *b);
/* Projection `index`: its line integrals into its slot, then to FDK. */
rtomo_status cone_iter_frame(struct cone_plan *p, int index,
                             const void *frame, rtomo_dtype dtype,
                             rtomo_error *err);
/* The solver of the projections that came (their line integrals moved
 * together); NULL with *err when there is none to make (the FDK slices
 * are then the final ones). */
rtomo_iter *cone_iter_solver(rtomod_worker *w, struct cone_plan *p,
                             rtomo_error *err);
/* Solve from the FDK volume (or zero) and publish the iterates and the
 * final volume's slices; the solver is destroyed. */
void cone_iter_solve(rtomod_worker *w, plan_state *s, const rtomod_job *job,
                     rtomo_iter *solver);
void cone_iter_free(struct cone_plan *p);

#endif /* RTOMOD_WORKER_CONE_H */
