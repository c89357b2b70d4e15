/*
 * test_cone_support.h — what the cone-beam tests share (CPU and GPU): the
 * standard test geometry, exact projections of a phantom, plans that fail
 * the running test on an engine error, and errors measured over a slab of
 * slices within a radius.
 */
#ifndef RTOMO_TEST_CONE_SUPPORT_H
#define RTOMO_TEST_CONE_SUPPORT_H

#include <stddef.h>

#include "rtomo_cone.h"
#include "rtomo_engine.h"
#include "rtomo_cone_sim.h"

/* 64^3 voxels of 1 mm; sad 200, sdd 400 (magnification 2), an 80 x 64
 * detector of 2 mm pixels (1 mm at the axis), 180 projections over 360
 * degrees: a cone half-angle of 9 degrees in z, 11 in u. */
rtomo_cone_geometry cone_test_geometry(void);

/* The GPU pair tests' sphere phantom grid: cone_test_geometry with 40 x
 * 40 x 37 voxels of 1.5 mm and 24 views. */
rtomo_cone_geometry cone_test_phantom_geometry(void);

/* The sphere phantom seen on cone_test_phantom_geometry (into *g): its
 * exact projections and, when truth is not NULL, its voxel values
 * (cone_test_project, cone_test_truth; caller frees). */
float *cone_test_phantom_scan(rtomo_cone_geometry *g, float **truth);

/* The pair benchmarks' shape (RTOMO_CONE_SF_BENCH and the streamed
 * pair's): n^3 voxels, n_proj views of det_u x det_v, sad 4 det_u, sdd 8
 * det_u, the volume 0.8 det_u across. */
rtomo_cone_geometry cone_test_bench_geometry(int n, int n_proj, int det_u,
                                             int det_v);
/* The same, its sizes read from environment variable `var` as
 * "N,NP,DU,DV" (the benchmark cases, registered only when it is set) and
 * given back through the pointers. */
rtomo_cone_geometry cone_test_bench_env(const char *var, int *n, int *n_proj,
                                        int *det_u, int *det_v);

/* The sphere phantom of radius 24 mm, mu 0.02 / mm, into e (room for
 * RTOMO_PHANTOM_MAX_ELLIPSOIDS); returns the count. */
int cone_test_spheres(rtomo_ellipsoid *e);

/* All n_proj exact projections (n_proj x det_v x det_u; caller frees). */
float *cone_test_project(const rtomo_cone_geometry *g,
                         const rtomo_ellipsoid *e, int n);
/* The truth on g's ROI, 3^3 points per voxel (caller frees). */
float *cone_test_truth(const rtomo_cone_geometry *g, const rtomo_ellipsoid *e,
                       int n);

/* A plan on `backend` (CPU: all cores), failing the test if none. */
rtomo_cone *cone_test_create(const rtomo_cone_geometry *g,
                             rtomo_backend backend, rtomo_cone_kernel kernel);
/* FDK of a whole scan (caller frees the ROI volume). */
float *cone_test_fdk(rtomo_cone *c, const float *projections);

/* ||vol - truth|| / ||truth|| over ROI slices k_lo..k_hi and voxels
 * within radius r (L) of the axis. */
double cone_test_slab_error(const rtomo_cone_geometry *g, const float *vol,
                            const float *truth, int k_lo, int k_hi, double r);

/* Geometries for the projector pair's tests (CPU and GPU): 0 even sizes,
 * 1 odd sizes and a ROI off centre, 2 an offset detector, 3 a short scan
 * with a cone angle of 2 x 20 degrees and a row offset. */
#define CONE_TEST_PAIR_CASES 4
rtomo_cone_geometry cone_test_pair_case(int i);
/* ROI voxels of g. */
size_t cone_test_roi_voxels(const rtomo_cone_geometry *g);

/* The ROI slice index nearest to z = 0. */
int cone_test_mid_slice(const rtomo_cone_geometry *g);

/* SIRT (10 iterations from 0.01, nonnegative) and CGLS (6 from zero) of
 * the projections proj (one row) on plan `other` against plan `ref`: the
 * images within relative L2 `bound` and the residuals within bound of
 * each other, printed as `what`. */
void cone_test_same_solves(rtomo_iter *ref, rtomo_iter *other,
                           const float *proj, size_t nv, double bound,
                           const char *what);

#endif
