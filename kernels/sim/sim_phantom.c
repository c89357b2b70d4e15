/*
 * sim_phantom.c — the 3-D Shepp-Logan phantom with exact parallel-beam
 * projections, and the camera model that turns line integrals into detector
 * counts (rtomo_sim.h).  Tests and the offline demo use it as ground truth
 * for the FBP engines, so the projections are analytic, not voxel sums.
 *
 * Geometry: Kak & Slaney's ellipsoids ("Principles of Computerized
 * Tomographic Imaging", 1988, p. 102; every ellipsoid is rotated about z
 * only) with the "modified" contrasts of Toft, which make the inner
 * structures visible.  Phantom coordinates (X, Y, Z) in [-1, 1]: X grows with
 * the slice column, Y grows upwards (against the slice row, so the phantom
 * appears in its usual orientation), Z grows upwards (against the detector
 * row).  One unit is det_width/2 pixels in X and Y and det_height/2 rows in
 * Z.  Because every ellipsoid has an axis along z, a detector row cuts each
 * ellipsoid in an ellipse with the same centre and orientation, scaled by
 * sqrt(1 - ((Z - z0) / c)^2); the chord of a line through an ellipse is
 * closed-form, so line integrals are exact.
 */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rtomo_sim.h"

typedef struct ellipsoid {
    double x0, y0, z0;          /* centre */
    double a, b, c;             /* semi-axes along the rotated x, y and z */
    double phi_deg;             /* rotation of the a axis from +X towards +Y */
    double density;             /* added inside (Toft's contrasts) */
} ellipsoid;

/* The order matters: rtomo_phantom_region values index this table. */
static const ellipsoid shepp_logan[] = {
    {0.00, 0.000, 0.000, 0.6900, 0.920, 0.900, 0, 1.0},
    {0.00, 0.000, 0.000, 0.6624, 0.874, 0.880, 0, -0.8},
    {-0.22, 0.000, -0.250, 0.4100, 0.160, 0.210, 108, -0.2},
    {0.22, 0.000, -0.250, 0.3100, 0.110, 0.220, 72, -0.2},
    {0.00, 0.350, -0.250, 0.2100, 0.250, 0.500, 0, 0.1},
    {0.00, 0.100, -0.250, 0.0460, 0.046, 0.046, 0, 0.1},
    {-0.08, -0.650, -0.250, 0.0460, 0.023, 0.020, 0, 0.1},
    {0.06, -0.650, -0.250, 0.0460, 0.023, 0.020, 90, 0.1},
    {0.06, -0.105, 0.625, 0.0560, 0.040, 0.100, 90, 0.1},
    {0.00, 0.100, 0.625, 0.0560, 0.056, 0.100, 0, 0.1},
};
#define N_ELLIPSOIDS ((int)(sizeof shepp_logan / sizeof shepp_logan[0]))

/* The ellipse an ellipsoid cuts at height Z. */
typedef struct section {
    double x0, y0, a, b, cos_phi, sin_phi, phi, density;
} section;

/* The section of ellipsoid e at height z; 0 when z misses it. */
static int section_of(const ellipsoid *e, double z, section *out)
{
    double dz = (z - e->z0) / e->c;
    if (dz * dz >= 1.0)
        return 0;
    double k = sqrt(1.0 - dz * dz);
    double phi = e->phi_deg * M_PI / 180.0;
    *out = (section){e->x0, e->y0, e->a * k, e->b * k,
                     cos(phi), sin(phi), phi, e->density};
    return 1;
}

/* Sections of all ellipsoids that reach height z; returns their number. */
static int sections_at(double z, section *out)
{
    int n = 0;
    for (int i = 0; i < N_ELLIPSOIDS; i++)
        n += section_of(&shepp_logan[i], z, &out[n]);
    return n;
}

/* A section seen at one projection angle theta: lines
 * {X cos(theta) + Y sin(theta) = t} cross it along a chord that depends on
 * t only through t - centre. */
typedef struct view {
    double centre;      /* t of the line through the section's centre */
    double r2;          /* squared half-width of its shadow */
    double area2;       /* 2 a b: chord = area2 sqrt(r2 - dt^2) / r2 */
    double density;
} view;

static view view_of(const section *s, double theta)
{
    double c = cos(theta - s->phi), d = sin(theta - s->phi);
    return (view){s->x0 * cos(theta) + s->y0 * sin(theta),
                  s->a * s->a * c * c + s->b * s->b * d * d,
                  2.0 * s->a * s->b, s->density};
}

/* Density times chord length of the line at t through the view's ellipse. */
static double weighted_chord(const view *v, double t)
{
    double dt = t - v->centre;
    if (dt * dt >= v->r2)
        return 0.0;
    return v->density * v->area2 * sqrt(v->r2 - dt * dt) / v->r2;
}

static int inside(const section *s, double x, double y)
{
    double dx = x - s->x0, dy = y - s->y0;
    double u = (dx * s->cos_phi + dy * s->sin_phi) / s->a;
    double v = (-dx * s->sin_phi + dy * s->cos_phi) / s->b;
    return u * u + v * v <= 1.0;
}

/* ------------------------------------------------------- coordinates ---- */

static double pixels_per_unit(const rtomo_phantom *ph)
{
    return 0.5 * ph->det_width;
}

static double axis_of(const rtomo_phantom *ph)
{
    return isnan(ph->axis) ? 0.5 * (ph->det_width - 1) : ph->axis;
}

static double mu_of(const rtomo_phantom *ph)
{
    return ph->mu_scale > 0.0 ? ph->mu_scale : 2.0 / ph->det_width;
}

/* Phantom Z of the centre of detector row `row`. */
static double z_of_row(const rtomo_phantom *ph, int row)
{
    return (0.5 * (ph->det_height - 1) - row) / (0.5 * ph->det_height);
}

/* --------------------------------------------------------- interface ---- */

void rtomo_phantom_init(rtomo_phantom *ph, int det_width, int det_height)
{
    memset(ph, 0, sizeof *ph);
    ph->det_width = det_width;
    ph->det_height = det_height;
    ph->axis = NAN;
    ph->mu_scale = 0.0;
}

void rtomo_phantom_project_row(const rtomo_phantom *ph, int row, double angle,
                               float *out)
{
    section sec[N_ELLIPSOIDS];
    view views[N_ELLIPSOIDS];
    const int n = sections_at(z_of_row(ph, row), sec);
    for (int i = 0; i < n; i++)
        views[i] = view_of(&sec[i], angle);
    const double unit = pixels_per_unit(ph), axis = axis_of(ph);
    /* chord lengths are in phantom units: times unit gives pixels */
    const double scale = unit * mu_of(ph);
    for (int s = 0; s < ph->det_width; s++) {
        double t = (s - axis) / unit, sum = 0.0;
        for (int i = 0; i < n; i++)
            sum += weighted_chord(&views[i], t);
        out[s] = (float)(sum * scale);
    }
}

void rtomo_phantom_project(const rtomo_phantom *ph, double angle, float *out)
{
    for (int r = 0; r < ph->det_height; r++)
        rtomo_phantom_project_row(ph, r, angle,
                                  out + (size_t)r * (size_t)ph->det_width);
}

void rtomo_phantom_slice(const rtomo_phantom *ph, int row, int size,
                         float *out)
{
    section sec[N_ELLIPSOIDS];
    const int n = sections_at(z_of_row(ph, row), sec);
    const double unit = pixels_per_unit(ph), mu = mu_of(ph);
    const double c = 0.5 * (size - 1);
    for (int y = 0; y < size; y++) {
        double py = -(y - c) / unit;
        for (int x = 0; x < size; x++) {
            double px = (x - c) / unit, sum = 0.0;
            for (int i = 0; i < n; i++)
                if (inside(&sec[i], px, py))
                    sum += sec[i].density;
            out[(size_t)y * (size_t)size + (size_t)x] = (float)(sum * mu);
        }
    }
}

/* ---------------------------------------------------- truth regions ---- */

/* Pixels of the grid inside `sec` (no margin). */
static void fill_inside(const rtomo_phantom *ph, const section *sec, int size,
                        unsigned char *inside_mask)
{
    const double unit = pixels_per_unit(ph), c = 0.5 * (size - 1);
    for (int y = 0; y < size; y++)
        for (int x = 0; x < size; x++)
            inside_mask[(size_t)y * size + x] =
                (unsigned char)inside(sec, (x - c) / unit, -(y - c) / unit);
}

/* 1 when every pixel within `margin` of (x, y) is set in `in`. */
static int disk_inside(const unsigned char *in, int size, int x, int y,
                       double margin)
{
    const int r = (int)floor(margin);
    for (int dy = -r; dy <= r; dy++)
        for (int dx = -r; dx <= r; dx++) {
            if (dx * dx + dy * dy > margin * margin)
                continue;
            int u = x + dx, v = y + dy;
            if (u < 0 || v < 0 || u >= size || v >= size ||
                !in[(size_t)v * size + u])
                return 0;
        }
    return 1;
}

size_t rtomo_phantom_region_mask(const rtomo_phantom *ph, int row, int size,
                                 rtomo_phantom_region region, double margin,
                                 unsigned char *mask)
{
    const size_t n = (size_t)size * (size_t)size;
    memset(mask, 0, n);
    section sec;
    if ((unsigned)region >= N_ELLIPSOIDS ||
        !section_of(&shepp_logan[region], z_of_row(ph, row), &sec))
        return 0;
    unsigned char *in = malloc(n);
    if (!in)
        return 0;
    fill_inside(ph, &sec, size, in);
    size_t count = 0;
    for (int y = 0; y < size; y++)
        for (int x = 0; x < size; x++)
            if (disk_inside(in, size, x, y, margin)) {
                mask[(size_t)y * size + x] = 1;
                count++;
            }
    free(in);
    return count;
}

double rtomo_masked_relative_error(const float *image, const float *truth,
                                   const unsigned char *mask, size_t n)
{
    double diff = 0.0, norm = 0.0;
    for (size_t i = 0; i < n; i++)
        if (mask[i]) {
            double d = (double)image[i] - truth[i];
            diff += d * d;
            norm += (double)truth[i] * truth[i];
        }
    return norm > 0.0 ? sqrt(diff / norm) : sqrt(diff);
}

double rtomo_masked_mean(const float *image, const unsigned char *mask,
                         size_t n)
{
    double sum = 0.0;
    size_t count = 0;
    for (size_t i = 0; i < n; i++)
        if (mask[i]) {
            sum += image[i];
            count++;
        }
    return count ? sum / (double)count : 0.0;
}

/* ------------------------------------------------------------ camera ---- */

void rtomo_camera_init(rtomo_camera *cam)
{
    memset(cam, 0, sizeof *cam);
    cam->dark_level = 100.0;
    cam->flat_level = 40000.0;
    cam->noise = 0;
    cam->seed = 1;
}

/* A detector reading of expected value `mean`: shot noise when enabled
 * (Gaussian with variance = mean, good above a few tens of counts), then
 * the ADC's rounding and range. */
static uint16_t read_out(rtomo_camera *cam, double mean)
{
    double v = mean;
    if (cam->noise && mean > 0.0)
        v += sqrt(mean) * rtomo_random_normal(&cam->seed);
    v = floor(v + 0.5);
    if (!(v >= 0.0))
        return 0;
    return v > 65535.0 ? 65535 : (uint16_t)v;
}

void rtomo_camera_expose(rtomo_camera *cam, const float *p, size_t n,
                         uint16_t *out)
{
    const double open = cam->flat_level - cam->dark_level;
    for (size_t i = 0; i < n; i++)
        out[i] = read_out(cam, cam->dark_level + open * exp(-(double)p[i]));
}

void rtomo_camera_dark(rtomo_camera *cam, size_t n, uint16_t *out)
{
    for (size_t i = 0; i < n; i++)
        out[i] = read_out(cam, cam->dark_level);
}

void rtomo_camera_flat(rtomo_camera *cam, size_t n, uint16_t *out)
{
    for (size_t i = 0; i < n; i++)
        out[i] = read_out(cam, cam->flat_level);
}
