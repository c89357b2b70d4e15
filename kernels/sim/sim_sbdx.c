/*
 * sim_sbdx.c — the SBDX scene simulator of rtomo_sim.h: point and wire
 * absorbers at the depth of a plane ratio, forward-projected through the
 * collimator/detector geometry into an 8-bit frame.  Each ray (hole,
 * detector element) crosses the object's depth at
 *     X = m cx + n_o (dx - (Wd-1)/2),  Y = m cy + n_o (dy - (Hd-1)/2)
 * which is exactly where shift-and-add puts the sample on the plane of
 * ratio n_o: so an object comes out sharp on that plane and blurred on the
 * others, which is what the focus tests rely on.
 */
#include "config.h"

#include <math.h>

#include "rtomo_sim.h"

/* The 1-pixel absorption profile. */
static double tent(double d)
{
    d = fabs(d);
    return d < 1.0 ? 1.0 - d : 0.0;
}

/* Distance from (x, y) to the segment (x0, y0)-(x1, y1). */
static double segment_distance(double x, double y, double x0, double y0,
                               double x1, double y1)
{
    double ux = x1 - x0, uy = y1 - y0;
    double len2 = ux * ux + uy * uy;
    double s = len2 > 0.0 ? ((x - x0) * ux + (y - y0) * uy) / len2 : 0.0;
    if (s < 0.0)
        s = 0.0;
    else if (s > 1.0)
        s = 1.0;
    return hypot(x - (x0 + s * ux), y - (y0 + s * uy));
}

/* Absorption of one object for the ray of hole (cx, cy) and detector
 * element offsets (ex, ey) = (dx - (Wd-1)/2, dy - (Hd-1)/2). */
static double object_absorption(const rtomo_sbdx_object *o, int m, int cx,
                                int cy, double ex, double ey)
{
    double x = (double)m * cx + o->ratio * ex;
    double y = (double)m * cy + o->ratio * ey;
    if (o->kind == RTOMO_SBDX_POINT)
        return o->absorption * tent(x - o->x0) * tent(y - o->y0);
    return o->absorption *
           tent(segment_distance(x, y, o->x0, o->y0, o->x1, o->y1));
}

static rtomo_status check_objects(const rtomo_sbdx_object *objects,
                                  int n_objects, rtomo_error *err)
{
    if (n_objects < 0 || (n_objects > 0 && !objects))
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "%d objects given%s", n_objects,
                               objects ? "" : " without an object array");
    for (int i = 0; i < n_objects; i++) {
        const rtomo_sbdx_object *o = &objects[i];
        if (o->kind != RTOMO_SBDX_POINT && o->kind != RTOMO_SBDX_WIRE)
            return rtomo_set_error(err, RTOMO_E_INVALID,
                                   "object %d has unknown kind %d", i,
                                   (int)o->kind);
        if (!isfinite(o->ratio) || o->ratio <= 0.0)
            return rtomo_set_error(err, RTOMO_E_INVALID,
                                   "object %d: depth ratio %g is not a "
                                   "positive number", i, o->ratio);
        if (!isfinite(o->x0) || !isfinite(o->y0) || !isfinite(o->x1) ||
            !isfinite(o->y1) || !isfinite(o->absorption))
            return rtomo_set_error(err, RTOMO_E_INVALID,
                                   "object %d has a NaN or infinite position "
                                   "or absorption", i);
    }
    return RTOMO_OK;
}

rtomo_status rtomo_sbdx_simulate(const rtomo_sbdx_geometry *g,
                                 const rtomo_sbdx_object *objects,
                                 int n_objects, double background,
                                 uint8_t *frame, rtomo_error *err)
{
    rtomo_status st = rtomo_sbdx_geometry_validate(g, err);
    if (st != RTOMO_OK)
        return st;
    if ((st = check_objects(objects, n_objects, err)) != RTOMO_OK)
        return st;
    if (!frame)
        return rtomo_set_error(err, RTOMO_E_INVALID, "no frame buffer given");
    if (!isfinite(background))
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "background %g is not a finite number",
                               background);

    double cx0 = (g->det_width - 1) / 2.0, cy0 = (g->det_height - 1) / 2.0;
    size_t i = 0;
    for (int cy = 0; cy < g->holes_y; cy++)
        for (int cx = 0; cx < g->holes_x; cx++)
            for (int dy = 0; dy < g->det_height; dy++)
                for (int dx = 0; dx < g->det_width; dx++) {
                    double v = background;
                    for (int k = 0; k < n_objects; k++)
                        v -= object_absorption(&objects[k], g->shift_m, cx,
                                               cy, dx - cx0, dy - cy0);
                    v = v < 0.0 ? 0.0 : v > 255.0 ? 255.0 : v;
                    frame[i++] = (uint8_t)lround(v);
                }
    return RTOMO_OK;
}
