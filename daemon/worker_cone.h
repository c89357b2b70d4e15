/*
 * worker_cone.h — cone-beam plans on rtomod's engine threads, private to
 * the worker's files:
 *   worker_cone.c   the FDK plan of one z-slab of a scan's volume: frames
 *                   in as they arrive, the slab's slices out at the end
 *   cone_fields.c   the darks and flats it averages
 */
#ifndef RTOMOD_WORKER_CONE_H
#define RTOMOD_WORKER_CONE_H

#include <stddef.h>

#include "worker_internal.h"

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

#endif /* RTOMOD_WORKER_CONE_H */
