/*
 * fbp_half.c — half acquisition ("extended field of view") in the FBP
 * front end: a 360-degree scan whose rotation axis lies near one edge of
 * the detector, reconstructed on a virtual detector symmetric about the
 * axis (the contract is in rtomo_engine.h).
 *
 * Why a virtual detector: the ramp filter's response reaches far beyond
 * the data, and a line near the axis is measured twice (at theta in bin s
 * and at theta + 180 in bin 2 axis - s) while one far from it is measured
 * once.  Weighting each measurement (w(s) + w(2 axis - s) = 2) and then
 * filtering and back-projecting the whole virtual width keeps the
 * filtered tails beyond the physical edge, which a reconstruction on the
 * physical width would cut off (that cost a previous attempt 34% error).
 * So the plan simply is a plain plan of W' bins; what half acquisition
 * adds lives here: the layout, the checks, the widening of frames and the
 * bin weights (which the backends apply before the filter).
 */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_fbp.h"
#include "fbp_half.h"

#define MAX_EDGE 65536          /* as fbp_engine.c: the widest detector */
/* An axis closer than this to the detector's centre is a plain
 * 360-degree scan: the overlap is then (almost) the whole detector. */
#define MIN_AXIS_OFFCENTRE 2.0
/* The overlap must hold at least this many bins for the blend. */
#define MIN_OVERLAP 1.0

typedef struct half_layout {
    int width;              /* W', virtual bins */
    int offset;             /* virtual bin of physical bin 0 */
    rtomo_fbp_half_weights w;
} half_layout;

/* The physical detector width and axis of g (which is virtual already
 * when frame_width is set: a geometry reported by geometry_of). */
static void physical_of(const rtomo_fbp_geometry *g, int *width, double *axis)
{
    if (g->frame_width > 0) {
        *width = g->frame_width;
        *axis = g->axis - g->frame_offset;
    } else {
        *width = g->det_width;
        *axis = g->axis;
    }
}

/* The virtual detector of a physical one of `width` bins with the axis
 * at `axis` (rtomo_engine.h).  A tiny slack keeps an axis such as 95.5
 * from rounding up a whole bin through 2 axis = 191.00000000001. */
static void layout_of(int width, double axis, half_layout *L)
{
    const double centre = 0.5 * (width - 1), slack = 1e-9;
    if (axis > centre) {
        L->offset = 0;
        L->width = (int)ceil(2.0 * axis - slack) + 1;
    } else {
        L->offset = (int)ceil(width - 1 - 2.0 * axis - slack);
        L->width = width + L->offset;
    }
    if (L->width < width)
        L->width = width;
    L->w.first = L->offset;
    L->w.last = L->offset + width - 1;
    L->w.axis = axis + L->offset;
    L->w.overlap = fmin(L->w.axis - L->w.first, L->w.last - L->w.axis);
    L->w.sign = axis > centre ? -1.0 : 1.0;
}

static double weight_at(const rtomo_fbp_half_weights *w, int s)
{
    if (s < w->first || s > w->last)
        return 0.0;
    const double x = s - w->axis;
    if (fabs(x) > w->overlap)
        return 2.0;
    return 1.0 + w->sign * sin(M_PI * x / (2.0 * w->overlap));
}

/* The span of the angles: max - min over the list, or over the steps. */
static double angle_span(const rtomo_fbp_geometry *g)
{
    if (!g->angles) {
        double step = g->angle_step != 0.0 ? g->angle_step : M_PI / g->n_proj;
        return fabs(step) * (g->n_proj - 1);
    }
    double lo = g->angles[0], hi = g->angles[0];
    for (int p = 1; p < g->n_proj; p++) {
        lo = fmin(lo, g->angles[p]);
        hi = fmax(hi, g->angles[p]);
    }
    return hi - lo;
}

/* Angles over 360 degrees: the span less at most two average steps (a
 * uniform scan of n spans 360 less one step). */
static rtomo_status check_full_turn(const rtomo_fbp_geometry *g,
                                    rtomo_error *err)
{
    const double span = g->n_proj > 1 ? angle_span(g) : 0.0;
    const double step = g->n_proj > 1 ? span / (g->n_proj - 1) : 0.0;
    if (g->n_proj < 2 || span + 2.0 * step < 2.0 * M_PI - 1e-9)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "half acquisition needs angles over 360 "
                               "degrees; these span %.1f", span * 180 / M_PI);
    return RTOMO_OK;
}

static rtomo_status check_axis_place(int width, double axis, rtomo_error *err)
{
    const double centre = 0.5 * (width - 1);
    if (isnan(axis))
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "half acquisition needs the rotation axis "
                               "given (it lies off the detector's centre)");
    if (!(axis >= MIN_OVERLAP && axis <= width - 1 - MIN_OVERLAP))
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "half acquisition: axis %g must lie at least "
                               "%g bin inside the detector [0, %d] (the two "
                               "halves are blended across their overlap)",
                               axis, MIN_OVERLAP, width - 1);
    if (fabs(axis - centre) < MIN_AXIS_OFFCENTRE)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "half acquisition: axis %g is within %g bins "
                               "of the detector's centre %g: that is a plain "
                               "360-degree scan (switch half_acquisition off)",
                               axis, MIN_AXIS_OFFCENTRE, centre);
    return RTOMO_OK;
}

/* A geometry reported by geometry_of: its virtual detector must be the
 * one its physical frame and axis make. */
static rtomo_status check_reported(const rtomo_fbp_geometry *g, int width,
                                   double axis, rtomo_error *err)
{
    half_layout L;
    layout_of(width, axis, &L);
    if (g->frame_offset != L.offset || g->det_width != L.width)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "half acquisition: det_width %d and "
                               "frame_offset %d are not the virtual detector "
                               "(%d bins, offset %d) of a %d-bin frame with "
                               "the axis at %g", g->det_width, g->frame_offset,
                               L.width, L.offset, width, axis);
    return RTOMO_OK;
}

rtomo_status rtomo_fbp_half_validate(const rtomo_fbp_geometry *g,
                                     rtomo_error *err)
{
    if (!g->half_acquisition) {
        if ((g->frame_width != 0 && g->frame_width != g->det_width) ||
            g->frame_offset != 0)
            return rtomo_set_error(err, RTOMO_E_INVALID,
                                   "frame_width %d and frame_offset %d are "
                                   "set by the engine for half acquisition "
                                   "only (leave them 0)", g->frame_width,
                                   g->frame_offset);
        return RTOMO_OK;
    }
    if (g->half_acquisition != 1)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "half_acquisition %d is not 0 or 1",
                               g->half_acquisition);
    if (g->frame_width < 0 || g->frame_width > g->det_width)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "frame_width %d is outside [0, det_width %d]",
                               g->frame_width, g->det_width);
    int width;
    double axis;
    physical_of(g, &width, &axis);
    rtomo_status st;
    if ((st = check_axis_place(width, axis, err)) ||
        (st = check_full_turn(g, err)))
        return st;
    if (g->frame_width > 0 && (st = check_reported(g, width, axis, err)))
        return st;
    if (rtomo_fbp_virtual_width(g) > MAX_EDGE)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "half acquisition: the virtual detector of "
                               "%d bins is wider than %d",
                               rtomo_fbp_virtual_width(g), MAX_EDGE);
    /* Ring removal's column means would run across the widened edge and
     * its offsets would need the bin weights: not combined yet. */
    if (g->rings != RTOMO_RINGS_OFF)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "ring removal is not combined with half "
                               "acquisition yet");
    return RTOMO_OK;
}

int rtomo_fbp_virtual_width(const rtomo_fbp_geometry *g)
{
    if (!g->half_acquisition || g->frame_width > 0)
        return g->det_width;
    if (!(isfinite(g->axis) && g->det_width >= 2))
        return -1;
    half_layout L;
    layout_of(g->det_width, g->axis, &L);
    return L.width;
}

void rtomo_fbp_half_detector(const rtomo_fbp_geometry *g, int *width,
                             double *axis)
{
    *width = g->det_width;
    *axis = isnan(g->axis) ? 0.5 * (g->det_width - 1) : g->axis;
    if (!g->half_acquisition || g->frame_width > 0 || !isfinite(g->axis))
        return;
    half_layout L;
    layout_of(g->det_width, g->axis, &L);
    *width = L.width;
    *axis = L.w.axis;
}

rtomo_status rtomo_fbp_half_setup(rtomo_fbp *plan, rtomo_error *err)
{
    rtomo_fbp_geometry *g = &plan->geom;
    if (!g->half_acquisition) {
        g->frame_width = g->det_width;
        g->frame_offset = 0;
        return RTOMO_OK;
    }
    int width;
    double axis;
    physical_of(g, &width, &axis);
    half_layout L;
    layout_of(width, axis, &L);
    g->frame_width = width;
    g->frame_offset = L.offset;
    g->det_width = L.width;
    g->axis = L.w.axis;
    plan->bin_weight = malloc(sizeof(float) * (size_t)L.width);
    if (!plan->bin_weight)
        return rtomo_set_error(err, RTOMO_E_NOMEM,
                               "out of memory for the bin weights");
    for (int s = 0; s < L.width; s++)
        plan->bin_weight[s] = (float)weight_at(&L.w, s);
    return RTOMO_OK;
}

void rtomo_fbp_half_free(rtomo_fbp *plan)
{
    free(plan->bin_weight);
    free(plan->half_frame);
    plan->bin_weight = NULL;
    plan->half_frame = NULL;
    plan->half_frame_bytes = 0;
}

int rtomo_fbp_half_weights_of(const rtomo_fbp *plan,
                              rtomo_fbp_half_weights *out)
{
    const rtomo_fbp_geometry *g = &plan->geom;
    if (!g->half_acquisition)
        return 0;
    half_layout L;
    layout_of(g->frame_width, g->axis - g->frame_offset, &L);
    *out = L.w;
    return 1;
}

void rtomo_fbp_half_weigh(const rtomo_fbp *plan, float *row)
{
    const float *w = plan->bin_weight;
    if (!w)
        return;
    for (int s = 0; s < plan->geom.det_width; s++)
        row[s] *= w[s];
}

/* Rows [r0, r1) of a physical frame widened into dst (a frame of the
 * virtual width), each row's edge samples repeated: the flat-field ratio
 * there is the edge's, finite, and the zero weight makes it vanish; phase
 * retrieval, which filters across the edge, sees what it would see on
 * the physical frame (it repeats edges too).  A device-side widening
 * would save this host copy and the padded bytes over PCIe: a
 * follow-up. */
static void widen_rows(const rtomo_fbp_geometry *g, const void *src,
                       rtomo_dtype dtype, void *dst, int r0, int r1)
{
    const size_t es = rtomo_dtype_size(dtype);
    const size_t w = (size_t)g->frame_width, wv = (size_t)g->det_width;
    const size_t o = (size_t)g->frame_offset;
    for (int r = r0; r < r1; r++) {
        const char *in = (const char *)src + (size_t)r * w * es;
        char *out = (char *)dst + (size_t)r * wv * es;
        for (size_t i = 0; i < o; i++)
            memcpy(out + i * es, in, es);
        memcpy(out + o * es, in, w * es);
        for (size_t i = o + w; i < wv; i++)
            memcpy(out + i * es, in + (w - 1) * es, es);
    }
}

rtomo_status rtomo_fbp_half_widen(rtomo_fbp *plan, const void **frame,
                                  rtomo_dtype dtype, rtomo_error *err)
{
    const rtomo_fbp_geometry *g = &plan->geom;
    if (!g->half_acquisition)
        return RTOMO_OK;
    /* One buffer per plan: a plan is used by one thread at a time, and
     * every consumer (sums, the CPU filter, the CUDA staging copy) is
     * done with the frame when its call returns. */
    const size_t bytes = (size_t)g->det_width * (size_t)g->det_height *
                         rtomo_dtype_size(dtype);
    if (plan->half_frame_bytes < bytes) {
        void *grown = realloc(plan->half_frame, bytes);
        if (!grown)
            return rtomo_set_error(err, RTOMO_E_NOMEM,
                                   "out of memory for a widened frame of "
                                   "%zu bytes", bytes);
        plan->half_frame = grown;
        plan->half_frame_bytes = bytes;
    }
    widen_rows(g, *frame, dtype, plan->half_frame, 0, g->det_height);
    *frame = plan->half_frame;
    return RTOMO_OK;
}

rtomo_status rtomo_fbp_half_line_integrals(const rtomo_fbp *plan,
                                           const void *frame,
                                           rtomo_dtype dtype, const int *rows,
                                           int n_rows, float *out,
                                           rtomo_error *err)
{
    const rtomo_fbp_geometry *g = &plan->geom;
    const size_t wv = (size_t)g->det_width, w = (size_t)g->frame_width;
    /* The plan is const here: a buffer of its own, the size of a frame
     * (the normaliser indexes rows by their place in the frame). */
    void *wide = malloc(wv * (size_t)g->det_height * rtomo_dtype_size(dtype));
    float *line = malloc(sizeof(float) * wv);
    if (!wide || !line) {
        free(wide);
        free(line);
        return rtomo_set_error(err, RTOMO_E_NOMEM,
                               "out of memory for line integrals");
    }
    for (int i = 0; i < n_rows; i++) {
        widen_rows(g, frame, dtype, wide, rows[i], rows[i] + 1);
        cpu_fbp_normalise_row(plan, wide, dtype, rows[i] - g->row_first, line);
        memcpy(out + (size_t)i * w, line + g->frame_offset, sizeof(float) * w);
    }
    free(wide);
    free(line);
    return RTOMO_OK;
}
