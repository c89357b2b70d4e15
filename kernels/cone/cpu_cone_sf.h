/*
 * cpu_cone_sf.h — the separable-footprint cone-beam pair on the CPU
 * (cpu_cone_sf.c): A maps the ROI volume to n_proj projections of det_v x
 * det_u line integrals, A^T back.
 */
#ifndef RTOMO_CPU_CONE_SF_H
#define RTOMO_CPU_CONE_SF_H

#include "cone_internal.h"
#include "cpu_pool.h"

typedef struct cpu_cone_sf cpu_cone_sf;

/* geo: a plan's geometry (cone_geometry_setup); amp_theta: det_v x det_u
 * amplitudes l_theta; both outlive the pair.  *out is set even on
 * failure (free it with cpu_cone_sf_destroy). */
rtomo_status cpu_cone_sf_create(const rtomo_cone *geo, const float *amp_theta,
                                const rtomo_engine_options *opt,
                                cpu_cone_sf **out, rtomo_error *err);
void cpu_cone_sf_destroy(cpu_cone_sf *s);
/* projections = A volume (overwritten). */
void cpu_cone_sf_project(cpu_cone_sf *s, const float *volume,
                         float *projections);
/* volume = A^T projections (overwritten). */
void cpu_cone_sf_backproject(cpu_cone_sf *s, const float *projections,
                             float *volume);

#endif
