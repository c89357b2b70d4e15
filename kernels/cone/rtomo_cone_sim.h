/*
 * rtomo_cone_sim.h — analytic test data for the cone-beam engine
 * (rtomo_cone.h): phantoms made of ellipsoids, their exact cone-beam line
 * integrals (the chord of every ray through every ellipsoid, closed form)
 * and voxelised truth volumes on the geometry's ROI.
 */
#ifndef RTOMO_CONE_SIM_H
#define RTOMO_CONE_SIM_H

#include "rtomo_cone.h"

#ifdef __cplusplus
extern "C" {
#endif

/* An ellipsoid of world coordinates (L): centre, semi-axes along its own
 * axes, rotated by phi (radians) about z from +x towards +y; density (1/L)
 * is added inside. */
typedef struct rtomo_ellipsoid {
    double x0, y0, z0;
    double a, b, c;
    double phi;
    double density;
} rtomo_ellipsoid;

/* The most ellipsoids the projector and voxeliser take (more are
 * ignored). */
#define RTOMO_PHANTOM_MAX_ELLIPSOIDS 64

/* The 3-D Shepp-Logan phantom (Kak & Slaney's ellipsoids, Toft's
 * contrasts) with one phantom unit = `scale` L (the head is 0.69 x 0.92 x
 * 0.9 units) and contrasts times mu (1/L).  Returns the number written
 * (10), at most capacity. */
int rtomo_cone_shepp_logan(double scale, double mu, rtomo_ellipsoid *out,
                           int capacity);

/* Spheres: a ball of radius r (density mu) with four smaller balls of
 * +-0.5 mu and +0.3 mu inside, two of them off the mid-plane. */
int rtomo_cone_sphere_phantom(double r, double mu, rtomo_ellipsoid *out,
                              int capacity);

/* Defrise's disc stack: n_discs flat discs of radius r and thickness
 * `thick`, density mu, centred on the axis every `spacing` along z about
 * z = 0.  Thin structures across z show FDK's cone-angle artefact. */
int rtomo_cone_disc_stack(double r, double thick, double spacing, int n_discs,
                          double mu, rtomo_ellipsoid *out, int capacity);

/* Exact line integrals of projection p of geometry g (det_v x det_u into
 * out): the ray from the source through each pixel's centre. */
void rtomo_cone_project_ellipsoids(const rtomo_cone_geometry *g,
                                   const rtomo_ellipsoid *e, int n, int p,
                                   float *out);

/* The truth on g's ROI (roi_n* 0 = to the volume's end, as in
 * rtomo_cone.h): each voxel the mean density over sub^3 points spread
 * evenly in it (sub >= 1). */
void rtomo_cone_voxelise(const rtomo_cone_geometry *g,
                         const rtomo_ellipsoid *e, int n, int sub,
                         float *volume);

#ifdef __cplusplus
}
#endif

#endif
