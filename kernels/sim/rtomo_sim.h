/*
 * rtomo_sim.h — simulators for tests, demos and benchmarks.
 *
 * Parallel beam: the 3-D Shepp-Logan phantom (ellipsoids, Kak & Slaney's
 * table with the "modified" contrasts of Toft), projected exactly: every
 * line integral is the analytic chord length through each ellipsoid.  Its
 * coordinates match rtomo_fbp_geometry: the phantom's unit cube [-1, 1]^3
 * spans det_width/2 pixels either side of the rotation axis in x and y, and
 * det_height/2 rows either side of the detector's centre row in z.  Bin s of
 * the projection at angle a integrates along the line of pixels (x, y) with
 *     (x - c) cos a - (y - c) sin a = s - axis,   c = (slice_size - 1) / 2
 * so an FBP of these projections reconstructs rtomo_phantom_slice().
 *
 * A camera model turns line integrals into counts: dark + (flat - dark) *
 * exp(-p), with optional Poisson-like noise, quantised to uint16.
 *
 * SBDX: point and wire objects at the depth of a given plane ratio,
 * forward-projected through the collimator/detector geometry of
 * rtomo_sbdx_geometry into 8-bit detector frames.
 */
#ifndef RTOMO_SIM_H
#define RTOMO_SIM_H

#include <stddef.h>
#include <stdint.h>

#include "rtomo_engine.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------- Shepp-Logan phantom ---- */

typedef struct rtomo_phantom {
    int det_width;      /* detector bins; the phantom spans det_width/2 either
                           side of the axis */
    int det_height;     /* detector rows */
    double axis;        /* rotation axis in bins; NaN = (det_width-1)/2 */
    double mu_scale;    /* attenuation per pixel of phantom value 1.0;
                           0 = 2/det_width: line integrals are then in
                           phantom units, at most about 0.52 with Toft's
                           contrasts (transmission >= ~60%) */
} rtomo_phantom;

/* Defaults for a detector of the given size. */
void rtomo_phantom_init(rtomo_phantom *ph, int det_width, int det_height);

/* Line integrals (attenuation, dimensionless) of detector row `row` at
 * angle `angle` (radians) for every bin: out[det_width]. */
void rtomo_phantom_project_row(const rtomo_phantom *ph, int row, double angle,
                               float *out);

/* A whole projection: out[det_height * det_width]. */
void rtomo_phantom_project(const rtomo_phantom *ph, double angle, float *out);

/* Ground truth: attenuation per pixel of slice `row` on a size x size grid
 * centred on the axis (size = the FBP's slice_size). */
void rtomo_phantom_slice(const rtomo_phantom *ph, int row, int size,
                         float *out);

/* Regions of the phantom, for measuring a reconstruction against the truth
 * away from the sharp edges (where any band-limited reconstruction differs
 * from the point-sampled truth). */
typedef enum rtomo_phantom_region {
    RTOMO_PHANTOM_HEAD = 0,     /* the outer ellipsoid: the whole support */
    RTOMO_PHANTOM_BRAIN = 1,    /* inside the skull */
    RTOMO_PHANTOM_LARGE_ELLIPSE = 4 /* the large ellipse above the ventricles
                                       (reaches rows with |z + 0.25| < 0.5) */
} rtomo_phantom_region;

/* mask[size*size] on the grid of rtomo_phantom_slice(): 1 where the pixel and
 * every pixel within `margin` pixels of it lie inside `region` in slice
 * `row`, else 0.  Returns the number of pixels set. */
size_t rtomo_phantom_region_mask(const rtomo_phantom *ph, int row, int size,
                                 rtomo_phantom_region region, double margin,
                                 unsigned char *mask);

/* ||image - truth|| / ||truth|| over the pixels where mask is set (L2). */
double rtomo_masked_relative_error(const float *image, const float *truth,
                                   const unsigned char *mask, size_t n);
/* Mean of image over the pixels where mask is set (0 when none is). */
double rtomo_masked_mean(const float *image, const unsigned char *mask,
                         size_t n);

/* ------------------------------------------------------------ camera ---- */

typedef struct rtomo_camera {
    double dark_level;  /* counts without beam */
    double flat_level;  /* counts with beam and no sample */
    int noise;          /* 1 = Poisson-like noise (Gaussian, variance = mean) */
    uint64_t seed;      /* noise stream; advanced by every call */
} rtomo_camera;

/* Defaults: dark 100, flat 40000, no noise, seed 1. */
void rtomo_camera_init(rtomo_camera *cam);

/* Counts for n line integrals p[], quantised to uint16 (clamped). */
void rtomo_camera_expose(rtomo_camera *cam, const float *p, size_t n,
                         uint16_t *out);
/* A dark frame and a flat frame of n pixels. */
void rtomo_camera_dark(rtomo_camera *cam, size_t n, uint16_t *out);
void rtomo_camera_flat(rtomo_camera *cam, size_t n, uint16_t *out);

/* ------------------------------------------------------- SBDX scenes ---- */

typedef enum rtomo_sbdx_object_kind {
    RTOMO_SBDX_POINT = 0,   /* a small absorber at (x0, y0) */
    RTOMO_SBDX_WIRE         /* a thin absorber from (x0, y0) to (x1, y1) */
} rtomo_sbdx_object_kind;

typedef struct rtomo_sbdx_object {
    rtomo_sbdx_object_kind kind;
    double ratio;       /* depth, as the reconstruction ratio n of its plane */
    double x0, y0;      /* plane position (pixels, as X, Y in rtomo_engine.h) */
    double x1, y1;      /* wire end */
    double absorption;  /* counts removed where a ray passes through the
                           object's centre (the profile is a 1-pixel tent) */
} rtomo_sbdx_object;

/* Forward-project objects into one 8-bit frame (layout of
 * rtomo_sbdx_geometry): background counts minus each object's absorption,
 * clamped to [0, 255].  The frame holds holes_x*holes_y*det_width*det_height
 * samples. */
rtomo_status rtomo_sbdx_simulate(const rtomo_sbdx_geometry *g,
                                 const rtomo_sbdx_object *objects,
                                 int n_objects, double background,
                                 uint8_t *frame, rtomo_error *err);

/* ----------------------------------------------------------- numbers ---- */

/* A small, fast, reproducible random stream (splitmix64 / xoshiro-like). */
uint64_t rtomo_random_next(uint64_t *state);
/* Uniform in [0, 1). */
double rtomo_random_uniform(uint64_t *state);
/* Standard normal. */
double rtomo_random_normal(uint64_t *state);

#ifdef __cplusplus
}
#endif

#endif /* RTOMO_SIM_H */
