/*
 * worker_cone.h — cone-beam plans on rtomod's engine threads, private to
 * the worker's files:
 *   worker_cone.c   the FDK plan of one z-slab of a scan's volume: frames
 *                   in as they arrive, the slab's slices out at the end
 *   cone_fields.c   the darks and flats it averages and the line
 *                   integrals it makes of each projection
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
/* The line integrals of a projection, as PROTOCOL.md 3.10 defines them
 * and the FBP engine computes them: -ln((raw - dark) / (flat - dark))
 * with the mean dark (0 without darks) and flat, clamped at a
 * transmission of 1e-6; without flats the samples as they are.  The
 * means are taken at the first call; fields added later are ignored. */
void cone_fields_line_integrals(cone_fields *f, const void *frame,
                                rtomo_dtype dtype, float *out);

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
