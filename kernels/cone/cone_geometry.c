/*
 * cone_geometry.c — the cone-beam geometry: defaults, validation with a
 * specific reason for every set-up that cannot be reconstructed, the
 * choice of redundancy weighting (full, half fan, short scan) and the
 * normalised copy a plan keeps.  Conventions: rtomo_cone.h.
 */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cone_internal.h"

/* A scan covers 360 degrees when n_proj x its mean step is within half a
 * mean step of 2 pi: so irregular angles (an encoder's) of a full turn
 * count as one, and a turn and a half-step more is still one turn. */
static double turn_slack(double coverage, int n_proj)
{
    return 0.5 * coverage / n_proj;
}

void rtomo_cone_geometry_init(rtomo_cone_geometry *g)
{
    memset(g, 0, sizeof *g);
    g->window = RTOMO_WINDOW_RAMLAK;
    g->cutoff = 1.0;
}

double rtomo_cone_angle(const rtomo_cone_geometry *g, int p)
{
    if (g->angles)
        return g->angles[p];
    double step = g->angle_step != 0.0 ? g->angle_step
                                       : 2.0 * M_PI / g->n_proj;
    return g->angle_start + p * step;
}

const char *rtomo_cone_weighting_name(rtomo_cone_weighting w)
{
    switch (w) {
    case RTOMO_CONE_FULL: return "full";
    case RTOMO_CONE_HALF_FAN: return "half_fan";
    case RTOMO_CONE_SHORT_SCAN: return "short_scan";
    }
    return "unknown";
}

/* What validation works out and a plan keeps. */
typedef struct derived {
    int direction;
    double coverage;            /* n_proj x mean step */
    rtomo_cone_weighting weighting;
    double u_first, u_last;     /* u of the first and last column */
    double r_fov;               /* field of view's radius at the axis */
    int roi[6];                 /* x, y, z, nx, ny, nz filled in */
    int pair;                   /* the separable-footprint pair's geometry:
                                   any finite angles (a solve takes the
                                   projections that came, in the order they
                                   came); FDK's order, one-turn and
                                   short-scan rules are FDK's weighting's */
} derived;

static int positive(double v) { return isfinite(v) && v > 0.0; }

static rtomo_status check_scalars(const rtomo_cone_geometry *g,
                                  rtomo_error *err)
{
    if (!positive(g->sad))
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "sad %g: the source-to-axis distance must be "
                               "a finite number > 0", g->sad);
    if (!isfinite(g->sdd) || g->sdd <= g->sad)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "sdd %g is not beyond sad %g: the detector "
                               "must lie behind the rotation axis, seen "
                               "from the source", g->sdd, g->sad);
    if (g->det_u < 2 || g->det_u > RTOMO_CONE_MAX_EDGE ||
        g->det_v < 1 || g->det_v > RTOMO_CONE_MAX_EDGE)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "detector %d x %d: det_u 2..%d columns, det_v "
                               "1..%d rows", g->det_u, g->det_v,
                               RTOMO_CONE_MAX_EDGE, RTOMO_CONE_MAX_EDGE);
    if (!positive(g->pitch_u) || !positive(g->pitch_v))
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "detector pitch %g x %g: both must be finite "
                               "and > 0", g->pitch_u, g->pitch_v);
    if (!isfinite(g->offset_u) || !isfinite(g->offset_v))
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "detector offsets must be finite");
    if (!positive(g->voxel))
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "voxel %g: the voxel edge must be finite and "
                               "> 0", g->voxel);
    if (g->nx < 1 || g->ny < 1 || g->nz < 1 || g->nx > RTOMO_CONE_MAX_EDGE ||
        g->ny > RTOMO_CONE_MAX_EDGE || g->nz > RTOMO_CONE_MAX_EDGE)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "volume %d x %d x %d: each edge 1..%d voxels",
                               g->nx, g->ny, g->nz, RTOMO_CONE_MAX_EDGE);
    if (g->window < RTOMO_WINDOW_RAMLAK || g->window > RTOMO_WINDOW_HANN)
        return rtomo_set_error(err, RTOMO_E_INVALID, "unknown window %d",
                               (int)g->window);
    if (!(g->cutoff >= 0.0 && g->cutoff <= 1.0))
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "cutoff %g: a fraction of Nyquist in (0, 1], "
                               "0 = 1", g->cutoff);
    return RTOMO_OK;
}

static rtomo_status check_roi(const rtomo_cone_geometry *g, derived *d,
                              rtomo_error *err)
{
    const int first[3] = {g->roi_x, g->roi_y, g->roi_z};
    const int size[3] = {g->roi_nx, g->roi_ny, g->roi_nz};
    const int edge[3] = {g->nx, g->ny, g->nz};
    static const char axis[3] = {'x', 'y', 'z'};
    for (int a = 0; a < 3; a++) {
        int n = size[a] ? size[a] : edge[a] - first[a];
        if (first[a] < 0 || first[a] >= edge[a] || n < 1 ||
            first[a] + n > edge[a])
            return rtomo_set_error(err, RTOMO_E_INVALID,
                                   "ROI along %c: first %d, size %d does not "
                                   "fit in the volume's %d voxels", axis[a],
                                   first[a], size[a], edge[a]);
        d->roi[a] = first[a];
        d->roi[3 + a] = n;
    }
    return RTOMO_OK;
}

/* Angles: finite, strictly monotonic, at most one turn. */
static rtomo_status check_angles(const rtomo_cone_geometry *g, derived *d,
                                 rtomo_error *err)
{
    if (g->n_proj < 2 || g->n_proj > RTOMO_CONE_MAX_PROJ)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "n_proj %d: 2..%d projections", g->n_proj,
                               RTOMO_CONE_MAX_PROJ);
    if (!g->angles && (!isfinite(g->angle_start) || !isfinite(g->angle_step)))
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "angle_start and angle_step must be finite");
    double a0 = rtomo_cone_angle(g, 0), a1 = rtomo_cone_angle(g, 1);
    d->direction = a1 > a0 ? 1 : -1;
    for (int p = 0; p < g->n_proj; p++) {
        double a = rtomo_cone_angle(g, p);
        if (!isfinite(a))
            return rtomo_set_error(err, RTOMO_E_INVALID,
                                   "angle of projection %d is not finite", p);
        if (!d->pair && p > 0 &&
            (a - rtomo_cone_angle(g, p - 1)) * d->direction <= 0.0)
            return rtomo_set_error(err, RTOMO_E_INVALID,
                                   "angles must increase or decrease "
                                   "strictly: projection %d breaks the "
                                   "order", p);
    }
    double span = fabs(rtomo_cone_angle(g, g->n_proj - 1) - a0);
    d->coverage = span * g->n_proj / (g->n_proj - 1);
    if (!d->pair &&
        d->coverage > 2.0 * M_PI + turn_slack(d->coverage, g->n_proj))
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "the angles cover %.3f degrees (n_proj times "
                               "their mean step): more than one turn",
                               d->coverage * 180.0 / M_PI);
    return RTOMO_OK;
}

/* Full, half fan or short scan, and whether the scan can be weighted. */
static rtomo_status classify(const rtomo_cone_geometry *g, derived *d,
                             rtomo_error *err)
{
    const double half_width = 0.5 * (g->det_u - 1) * g->pitch_u;
    d->u_first = g->offset_u - half_width;
    d->u_last = g->offset_u + half_width;
    if (d->u_first > 0.0 || d->u_last < 0.0)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "offset_u %g puts the whole detector (u from "
                               "%g to %g) on one side of the central ray: "
                               "the axis is never seen", g->offset_u,
                               d->u_first, d->u_last);
    const int offset = fabs(g->offset_u) > g->pitch_u;
    const int full = d->coverage >= 2.0 * M_PI -
                                    turn_slack(d->coverage, g->n_proj);
    const double reach = fmax(-d->u_first, d->u_last) + 0.5 * g->pitch_u;
    const double fan = atan(reach / g->sdd);        /* half fan angle */
    d->r_fov = g->sad * sin(fan);
    if (d->pair) {              /* no FDK weighting to choose */
        d->weighting = RTOMO_CONE_FULL;
        return RTOMO_OK;
    }
    if (full) {
        d->weighting = offset ? RTOMO_CONE_HALF_FAN : RTOMO_CONE_FULL;
        if (offset && fmin(-d->u_first, d->u_last) < 2.0 * g->pitch_u)
            return rtomo_set_error(err, RTOMO_E_INVALID,
                                   "offset detector: it reaches only %g "
                                   "past the central ray; half-fan "
                                   "weighting needs at least 2 pixels",
                                   fmin(-d->u_first, d->u_last));
        return RTOMO_OK;
    }
    if (offset)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "offset detector (offset_u %g, beyond one "
                               "pixel) with a scan of %.3f degrees: half-fan "
                               "reconstruction needs a full 360-degree scan",
                               g->offset_u, d->coverage * 180.0 / M_PI);
    const double need = M_PI + 2.0 * fan;
    if (d->coverage < need * (1.0 - 1e-9))
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "short scan of %.3f degrees: FDK needs 180 "
                               "degrees plus the fan angle (%.3f), %.3f "
                               "degrees, or a full 360-degree scan",
                               d->coverage * 180.0 / M_PI,
                               2.0 * fan * 180.0 / M_PI, need * 180.0 / M_PI);
    d->weighting = RTOMO_CONE_SHORT_SCAN;
    return RTOMO_OK;
}

/* Position of voxel index i along an axis of n voxels. */
static double voxel_pos(const rtomo_cone_geometry *g, int n, double i)
{
    return (i - 0.5 * (n - 1)) * g->voxel;
}

/* Distance of 0 from the interval [lo, hi]. */
static double gap_to_zero(double lo, double hi)
{
    return lo > 0.0 ? lo : (hi < 0.0 ? -hi : 0.0);
}

/* The ROI must stay clear of the source and meet the cone of rays. */
static rtomo_status check_field(const rtomo_cone_geometry *g, const derived *d,
                                rtomo_error *err)
{
    const double x_lo = voxel_pos(g, g->nx, d->roi[0]);
    const double x_hi = voxel_pos(g, g->nx, d->roi[0] + d->roi[3] - 1);
    const double y_lo = voxel_pos(g, g->ny, d->roi[1]);
    const double y_hi = voxel_pos(g, g->ny, d->roi[1] + d->roi[4] - 1);
    const double z_lo = voxel_pos(g, g->nz, d->roi[2]);
    const double z_hi = voxel_pos(g, g->nz, d->roi[2] + d->roi[5] - 1);
    const double fx = fmax(fabs(x_lo), fabs(x_hi));
    const double fy = fmax(fabs(y_lo), fabs(y_hi));
    const double r_far = hypot(fx, fy) + M_SQRT1_2 * g->voxel;
    if (r_far >= g->sad)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "the ROI reaches %g from the axis, the source "
                               "orbit's radius (sad) is %g: voxels would lie "
                               "at or behind the source", r_far, g->sad);
    const double r_near = hypot(gap_to_zero(x_lo, x_hi),
                                gap_to_zero(y_lo, y_hi));
    if (r_near >= d->r_fov)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "the ROI lies outside the field of view: its "
                               "nearest voxel is %g from the axis, the "
                               "detector sees a radius of %g", r_near,
                               d->r_fov);
    /* Along z: a voxel at radius r is magnified by sdd/(sad - t), t in
     * [-r, r] as it turns; the detector's rows span [v_lo, v_hi]. */
    const double r = fmin(r_far, d->r_fov);
    const double m_lo = g->sdd / (g->sad + r), m_hi = g->sdd / (g->sad - r);
    const double v_lo = g->offset_v - 0.5 * g->det_v * g->pitch_v;
    const double v_hi = g->offset_v + 0.5 * g->det_v * g->pitch_v;
    const double reach_hi = fmax(z_hi * m_lo, z_hi * m_hi);
    const double reach_lo = fmin(z_lo * m_lo, z_lo * m_hi);
    if (reach_hi < v_lo || reach_lo > v_hi)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "the ROI (z from %g to %g) lies %s the cone "
                               "of rays that reach the detector (rows from "
                               "v = %g to %g)", z_lo, z_hi,
                               reach_lo > v_hi ? "above" : "below", v_lo,
                               v_hi);
    return RTOMO_OK;
}

static rtomo_status validate(const rtomo_cone_geometry *g, derived *d,
                             int pair, rtomo_error *err)
{
    if (!g)
        return rtomo_set_error(err, RTOMO_E_INVALID, "geometry is NULL");
    memset(d, 0, sizeof *d);
    d->pair = pair;
    rtomo_status st = check_scalars(g, err);
    if (st == RTOMO_OK)
        st = check_roi(g, d, err);
    if (st == RTOMO_OK)
        st = check_angles(g, d, err);
    if (st == RTOMO_OK)
        st = classify(g, d, err);
    if (st == RTOMO_OK)
        st = check_field(g, d, err);
    return st;
}

rtomo_status rtomo_cone_geometry_validate(const rtomo_cone_geometry *g,
                                          rtomo_error *err)
{
    derived d;
    rtomo_clear_error(err);
    return validate(g, &d, 0, err);
}

/* Angular interval of each projection: half the gaps to its neighbours;
 * the step for uniform angles.  At the ends of a full turn the outer
 * neighbour is across the wrap, 2 pi - span away (uneven encoder angles
 * close the turn with their own gap); of a short scan, the end's one gap
 * counts twice. */
static void angular_intervals(rtomo_cone *c)
{
    const int n = c->geom.n_proj;
    const double span = fabs(c->angles[n - 1] - c->angles[0]);
    const double wrap = c->weighting == RTOMO_CONE_SHORT_SCAN ||
                                2.0 * M_PI - span <= 0.0
                            ? -1 : 2.0 * M_PI - span;
    for (int p = 0; p < n; p++) {
        double before = p > 0 ? fabs(c->angles[p] - c->angles[p - 1]) : wrap;
        double after = p + 1 < n ? fabs(c->angles[p + 1] - c->angles[p])
                                 : wrap;
        if (before < 0)
            before = after;
        if (after < 0)
            after = before;
        c->dbeta[p] = 0.5 * (before + after);
    }
}

/* The filtered detector: for a half fan, widened on its short side to
 * mirror the long one. */
static void filtered_width(rtomo_cone *c)
{
    const rtomo_cone_geometry *g = &c->geom;
    c->filt_u = g->det_u;
    c->filt_off = 0;
    if (c->weighting == RTOMO_CONE_HALF_FAN) {
        int extra = (int)ceil(2.0 * fabs(g->offset_u) / g->pitch_u - 1e-9);
        c->filt_u += extra;
        if (c->half_fan_side > 0)
            c->filt_off = extra;
    }
    c->filt_len = (size_t)c->filt_u * (size_t)g->det_v;
}

static void bp_constants(rtomo_cone *c)
{
    const rtomo_cone_geometry *g = &c->geom;
    cone_bp_const *k = &c->bp;
    k->sad = (float)g->sad;
    k->sdd = (float)g->sdd;
    k->inv_pitch_u = (float)(1.0 / g->pitch_u);
    k->inv_pitch_v = (float)(1.0 / g->pitch_v);
    k->u0 = (float)(0.5 * (g->det_u - 1) - g->offset_u / g->pitch_u +
                    c->filt_off);
    k->v0 = (float)(0.5 * (g->det_v - 1) - g->offset_v / g->pitch_v);
    k->x0 = (float)voxel_pos(g, g->nx, g->roi_x);
    k->y0 = (float)voxel_pos(g, g->ny, g->roi_y);
    k->z0 = (float)voxel_pos(g, g->nz, g->roi_z);
    k->voxel = (float)g->voxel;
    k->det_u = c->filt_u;
    k->det_v = g->det_v;
    k->nx = g->roi_nx;
    k->ny = g->roi_ny;
    k->nz = g->roi_nz;
}

rtomo_status cone_geometry_setup(rtomo_cone *c, const rtomo_cone_geometry *g,
                                 int pair, rtomo_error *err)
{
    derived d;
    rtomo_status st = validate(g, &d, pair, err);
    if (st != RTOMO_OK)
        return st;
    const int n = g->n_proj;
    c->geom = *g;
    c->angles = malloc(sizeof(double) * (size_t)n);
    c->dbeta = malloc(sizeof(double) * (size_t)n);
    c->cos_beta = malloc(sizeof(float) * (size_t)n);
    c->sin_beta = malloc(sizeof(float) * (size_t)n);
    if (!c->angles || !c->dbeta || !c->cos_beta || !c->sin_beta)
        return rtomo_set_error(err, RTOMO_E_NOMEM,
                               "out of memory for %d projections", n);
    for (int p = 0; p < n; p++) {
        c->angles[p] = rtomo_cone_angle(g, p);
        c->cos_beta[p] = (float)cos(c->angles[p]);
        c->sin_beta[p] = (float)sin(c->angles[p]);
    }
    c->geom.angles = c->angles;
    c->geom.angle_step = (c->angles[n - 1] - c->angles[0]) / (n - 1);
    c->geom.angle_start = c->angles[0];
    if (c->geom.cutoff == 0.0)
        c->geom.cutoff = 1.0;
    c->geom.roi_x = d.roi[0];
    c->geom.roi_y = d.roi[1];
    c->geom.roi_z = d.roi[2];
    c->geom.roi_nx = d.roi[3];
    c->geom.roi_ny = d.roi[4];
    c->geom.roi_nz = d.roi[5];
    c->direction = d.direction;
    c->coverage = d.coverage;
    c->weighting = d.weighting;
    c->half_fan_ua = fmin(-d.u_first, d.u_last);
    c->half_fan_side = d.u_last > -d.u_first ? 1 : -1;
    angular_intervals(c);
    filtered_width(c);
    bp_constants(c);
    c->frame_len = (size_t)g->det_u * (size_t)g->det_v;
    c->volume_len = (size_t)d.roi[3] * (size_t)d.roi[4] * (size_t)d.roi[5];
    return RTOMO_OK;
}
