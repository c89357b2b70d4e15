/*
 * cone_sim.c — analytic cone-beam test data (rtomo_cone_sim.h): phantoms
 * of ellipsoids, the exact line integral of every detector pixel's ray
 * (closed-form chords, no voxel sums: FDK is tested against geometry, not
 * against another discretisation) and supersampled truth volumes.
 *
 * A chord: in the ellipsoid's frame (centred, rotated by -phi, axes scaled
 * to 1) the ray o + t d becomes q0 + t q1 and meets the unit sphere where
 * |q1|^2 t^2 + 2 (q0.q1) t + |q0|^2 - 1 = 0; with d a unit vector the
 * chord's length is the distance between the roots, 2 sqrt(disc) / |q1|^2.
 */
#include "config.h"

#include <math.h>
#include <string.h>

#include "rtomo_cone_sim.h"

/* Kak & Slaney's ellipsoids with Toft's contrasts (as sim_phantom.c):
 * x0, y0, z0, a, b, c, phi (degrees), density. */
static const double shepp_logan[][8] = {
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

static int put(rtomo_ellipsoid *out, int capacity, int n, rtomo_ellipsoid e)
{
    if (n < capacity)
        out[n] = e;
    return n + 1;
}

int rtomo_cone_shepp_logan(double scale, double mu, rtomo_ellipsoid *out,
                           int capacity)
{
    int n = 0;
    const int count = (int)(sizeof shepp_logan / sizeof shepp_logan[0]);
    for (int i = 0; i < count; i++) {
        const double *r = shepp_logan[i];
        rtomo_ellipsoid e = {r[0] * scale, r[1] * scale, r[2] * scale,
                             r[3] * scale, r[4] * scale, r[5] * scale,
                             r[6] * M_PI / 180.0, r[7] * mu};
        n = put(out, capacity, n, e);
    }
    return n < capacity ? n : capacity;
}

static rtomo_ellipsoid ball(double x, double y, double z, double r,
                            double density)
{
    return (rtomo_ellipsoid){x, y, z, r, r, r, 0.0, density};
}

int rtomo_cone_sphere_phantom(double r, double mu, rtomo_ellipsoid *out,
                              int capacity)
{
    int n = 0;
    n = put(out, capacity, n, ball(0, 0, 0, r, mu));
    n = put(out, capacity, n, ball(0.4 * r, 0, 0, 0.25 * r, 0.5 * mu));
    n = put(out, capacity, n, ball(-0.35 * r, 0.2 * r, 0, 0.2 * r, -0.5 * mu));
    n = put(out, capacity, n, ball(0, 0.3 * r, 0.45 * r, 0.2 * r, 0.3 * mu));
    n = put(out, capacity, n, ball(0, -0.3 * r, -0.45 * r, 0.2 * r, 0.3 * mu));
    return n < capacity ? n : capacity;
}

int rtomo_cone_disc_stack(double r, double thick, double spacing, int n_discs,
                          double mu, rtomo_ellipsoid *out, int capacity)
{
    int n = 0;
    for (int i = 0; i < n_discs; i++) {
        double z = (i - 0.5 * (n_discs - 1)) * spacing;
        rtomo_ellipsoid e = {0, 0, z, r, r, 0.5 * thick, 0.0, mu};
        n = put(out, capacity, n, e);
    }
    return n < capacity ? n : capacity;
}

/* An ellipsoid ready for many rays and points: its rotation's cosine and
 * sine, and the radius of a ball around its centre that holds it. */
typedef struct prepared {
    const rtomo_ellipsoid *e;
    double cos_phi, sin_phi;
    double bound2;              /* squared */
} prepared;

static void prepare(const rtomo_ellipsoid *e, int n, prepared *out)
{
    for (int k = 0; k < n && k < RTOMO_PHANTOM_MAX_ELLIPSOIDS; k++) {
        double r = fmax(fabs(e[k].a), fmax(fabs(e[k].b), fabs(e[k].c)));
        out[k] = (prepared){&e[k], cos(e[k].phi), sin(e[k].phi), r * r};
    }
}

/* Into the frame of p's ellipsoid: translated, rotated by -phi, scaled to
 * unit axes; `point` selects whether v is a point (translated) or a
 * direction. */
static void to_unit(const prepared *p, const double v[3], int point,
                    double q[3])
{
    const rtomo_ellipsoid *e = p->e;
    double x = v[0] - (point ? e->x0 : 0.0);
    double y = v[1] - (point ? e->y0 : 0.0);
    double z = v[2] - (point ? e->z0 : 0.0);
    q[0] = (x * p->cos_phi + y * p->sin_phi) / e->a;
    q[1] = (-x * p->sin_phi + y * p->cos_phi) / e->b;
    q[2] = z / e->c;
}

static double dot3(const double a[3], const double b[3])
{
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
}

/* Length of the unit-direction ray o + t d inside p's ellipsoid. */
static double chord(const prepared *p, const double o[3], const double d[3])
{
    double q0[3], q1[3];
    to_unit(p, o, 1, q0);
    to_unit(p, d, 0, q1);
    const double a = dot3(q1, q1), b = dot3(q0, q1);
    const double disc = b * b - a * (dot3(q0, q0) - 1.0);
    return disc > 0.0 ? 2.0 * sqrt(disc) / a : 0.0;
}

void rtomo_cone_project_ellipsoids(const rtomo_cone_geometry *g,
                                   const rtomo_ellipsoid *e, int n, int p,
                                   float *out)
{
    const double beta = rtomo_cone_angle(g, p);
    const double cb = cos(beta), sb = sin(beta);
    const double src[3] = {g->sad * cb, g->sad * sb, 0.0};
    prepared prep[RTOMO_PHANTOM_MAX_ELLIPSOIDS];
    if (n > RTOMO_PHANTOM_MAX_ELLIPSOIDS)
        n = RTOMO_PHANTOM_MAX_ELLIPSOIDS;
    prepare(e, n, prep);
    for (int j = 0; j < g->det_v; j++) {
        const double v = (j - 0.5 * (g->det_v - 1)) * g->pitch_v + g->offset_v;
        for (int i = 0; i < g->det_u; i++) {
            const double u = (i - 0.5 * (g->det_u - 1)) * g->pitch_u +
                             g->offset_u;
            /* From the source: sdd towards the axis, then u e_u + v e_v. */
            double d[3] = {-g->sdd * cb - u * sb, -g->sdd * sb + u * cb, v};
            const double len = sqrt(dot3(d, d));
            d[0] /= len;
            d[1] /= len;
            d[2] /= len;
            double sum = 0.0;
            for (int k = 0; k < n; k++)
                sum += e[k].density * chord(&prep[k], src, d);
            out[(size_t)j * g->det_u + i] = (float)sum;
        }
    }
}

static int inside(const prepared *p, const double x[3])
{
    const double dx = x[0] - p->e->x0, dy = x[1] - p->e->y0;
    const double dz = x[2] - p->e->z0;
    if (dx * dx + dy * dy + dz * dz > p->bound2)
        return 0;
    double q[3];
    to_unit(p, x, 1, q);
    return dot3(q, q) <= 1.0;
}

static double density_at(const prepared *p, int n, const double x[3])
{
    double sum = 0.0;
    for (int k = 0; k < n; k++)
        if (inside(&p[k], x))
            sum += p[k].e->density;
    return sum;
}

/* Mean density over sub^3 points of the voxel centred at x. */
static double voxel_mean(const rtomo_cone_geometry *g, const prepared *e,
                         int n, int sub, const double x[3])
{
    double sum = 0.0;
    for (int a = 0; a < sub; a++)
        for (int b = 0; b < sub; b++)
            for (int c = 0; c < sub; c++) {
                const double pt[3] = {
                    x[0] + ((a + 0.5) / sub - 0.5) * g->voxel,
                    x[1] + ((b + 0.5) / sub - 0.5) * g->voxel,
                    x[2] + ((c + 0.5) / sub - 0.5) * g->voxel};
                sum += density_at(e, n, pt);
            }
    return sum / ((double)sub * sub * sub);
}

void rtomo_cone_voxelise(const rtomo_cone_geometry *g,
                         const rtomo_ellipsoid *e, int n, int sub,
                         float *volume)
{
    const int nx = g->roi_nx ? g->roi_nx : g->nx - g->roi_x;
    const int ny = g->roi_ny ? g->roi_ny : g->ny - g->roi_y;
    const int nz = g->roi_nz ? g->roi_nz : g->nz - g->roi_z;
    if (sub < 1)
        sub = 1;
    prepared prep[RTOMO_PHANTOM_MAX_ELLIPSOIDS];
    if (n > RTOMO_PHANTOM_MAX_ELLIPSOIDS)
        n = RTOMO_PHANTOM_MAX_ELLIPSOIDS;
    prepare(e, n, prep);
    size_t at = 0;
    for (int k = 0; k < nz; k++)
        for (int j = 0; j < ny; j++)
            for (int i = 0; i < nx; i++) {
                const double x[3] = {
                    (g->roi_x + i - 0.5 * (g->nx - 1)) * g->voxel,
                    (g->roi_y + j - 0.5 * (g->ny - 1)) * g->voxel,
                    (g->roi_z + k - 0.5 * (g->nz - 1)) * g->voxel};
                volume[at++] = (float)voxel_mean(g, prep, n, sub, x);
            }
}
