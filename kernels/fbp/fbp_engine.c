/*
 * fbp_engine.c — the backend-neutral front end of the FBP engine.
 *
 * Validates geometry and every call's arguments, owns the copies of angles
 * and axis corrections, averages dark and flat frames, tracks which
 * projections arrived and dispatches to the selected backend.  Backends see
 * only valid requests (see engine_internal.h).
 */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"
#include "fbp_filter_design.h"
#include "fbp_half.h"

#define MAX_EDGE 65536          /* detector width/height, slice size */
#define MAX_PROJECTIONS (1 << 20)

void rtomo_fbp_geometry_init(rtomo_fbp_geometry *g)
{
    memset(g, 0, sizeof *g);
    g->axis = NAN;
    g->window = RTOMO_WINDOW_RAMLAK;
    g->interp = RTOMO_INTERP_LINEAR;
    g->cutoff = 1.0;
}

/* ----------------------------------------------------------- validation ---- */

static rtomo_status check_sizes(const rtomo_fbp_geometry *g, rtomo_error *err)
{
    if (g->det_width < 2 || g->det_width > MAX_EDGE)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "det_width %d is outside [2, %d]", g->det_width,
                               MAX_EDGE);
    if (g->det_height < 1 || g->det_height > MAX_EDGE)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "det_height %d is outside [1, %d]",
                               g->det_height, MAX_EDGE);
    if (g->n_proj < 1 || g->n_proj > MAX_PROJECTIONS)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "n_proj %d is outside [1, %d]", g->n_proj,
                               MAX_PROJECTIONS);
    return RTOMO_OK;
}

static rtomo_status check_angles(const rtomo_fbp_geometry *g, rtomo_error *err)
{
    if (g->angles) {
        for (int p = 0; p < g->n_proj; p++)
            if (!isfinite(g->angles[p]))
                return rtomo_set_error(err, RTOMO_E_INVALID,
                                       "angles[%d] is not a finite number", p);
        return RTOMO_OK;
    }
    if (!isfinite(g->angle_start))
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "angle_start is not a finite number");
    if (!isfinite(g->angle_step))
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "angle_step is not a finite number");
    return RTOMO_OK;
}

int rtomo_fbp_axis_valid(double axis, int det_width)
{
    const double w = det_width;
    return isfinite(axis) && axis >= -w && axis <= 2 * w;
}

int rtomo_fbp_axis_shift_valid(double axis_shift, int det_width)
{
    return isfinite(axis_shift) && fabs(axis_shift) <= (double)det_width;
}

static rtomo_status check_axis(const rtomo_fbp_geometry *g, rtomo_error *err)
{
    if (!isnan(g->axis) && !rtomo_fbp_axis_valid(g->axis, g->det_width))
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "axis %g is not within one detector width of "
                               "the detector [0, %d)", g->axis, g->det_width);
    if (g->axis_shift) {
        for (int p = 0; p < g->n_proj; p++)
            if (!rtomo_fbp_axis_shift_valid(g->axis_shift[p], g->det_width))
                return rtomo_set_error(err, RTOMO_E_INVALID,
                                       "axis_shift[%d] = %g is not a finite "
                                       "shift of at most %d bins", p,
                                       g->axis_shift[p], g->det_width);
    }
    return RTOMO_OK;
}

static rtomo_status check_filter(const rtomo_fbp_geometry *g, rtomo_error *err)
{
    if ((unsigned)g->window > RTOMO_WINDOW_HANN)
        return rtomo_set_error(err, RTOMO_E_INVALID, "unknown filter window %d",
                               (int)g->window);
    if (!(g->cutoff == 0.0 || (g->cutoff > 0.0 && g->cutoff <= 1.0)))
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "cutoff %g is outside (0, 1] (fraction of "
                               "Nyquist)", g->cutoff);
    if ((unsigned)g->interp > RTOMO_INTERP_NEAREST)
        return rtomo_set_error(err, RTOMO_E_INVALID, "unknown interpolation %d",
                               (int)g->interp);
    return RTOMO_OK;
}

/* Phase retrieval's four parameters: all zero (off), or delta/beta,
 * energy, distance and pixel size all positive and finite. */
static rtomo_status check_phase(const rtomo_fbp_phase *p, rtomo_error *err)
{
    if (p->delta_beta == 0.0)
        return RTOMO_OK;
    const struct { const char *name; double value; double max; } field[] = {
        {"delta_beta", p->delta_beta, 1e6},
        {"energy_kev", p->energy_kev, 1e4},
        {"distance_m", p->distance_m, 1e3},
        {"pixel_m", p->pixel_m, 1.0},
    };
    for (size_t i = 0; i < sizeof field / sizeof field[0]; i++)
        if (!(field[i].value > 0.0 && field[i].value <= field[i].max))
            return rtomo_set_error(err, RTOMO_E_INVALID,
                                   "phase retrieval: %s %g is outside (0, %g]",
                                   field[i].name, field[i].value, field[i].max);
    return RTOMO_OK;
}

static rtomo_status check_rings(const rtomo_fbp_geometry *g, rtomo_error *err)
{
    if ((unsigned)g->rings > RTOMO_RINGS_COLUMN_MEAN)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "unknown ring removal method %d", (int)g->rings);
    if (g->rings_width != 0 &&
        (g->rings_width < 3 || g->rings_width > 255 || g->rings_width % 2 == 0))
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "ring removal width %d is not an odd number of "
                               "bins in [3, 255]", g->rings_width);
    return RTOMO_OK;
}

static rtomo_status check_rows(const rtomo_fbp_geometry *g, rtomo_error *err)
{
    if (g->row_first < 0 || g->row_first >= g->det_height)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "row_first %d is outside the detector's rows "
                               "[0, %d)", g->row_first, g->det_height);
    if (g->row_count < 0 || g->row_first + g->row_count > g->det_height)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "rows [%d, %d) reach beyond the detector's %d "
                               "rows", g->row_first, g->row_first + g->row_count,
                               g->det_height);
    return RTOMO_OK;
}

static rtomo_status check_roi(int size, int x, int y, int w, int h,
                              rtomo_error *err)
{
    if (w == 0 && h == 0 && x == 0 && y == 0)
        return RTOMO_OK;
    if (w < 1 || h < 1 || x < 0 || y < 0 || x + w > size || y + h > size)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "region of interest (roi) %dx%d at (%d, %d) is "
                               "not inside the %dx%d slice grid", w, h, x, y,
                               size, size);
    return RTOMO_OK;
}

rtomo_status rtomo_fbp_geometry_validate(const rtomo_fbp_geometry *g,
                                         rtomo_error *err)
{
    if (!g)
        return rtomo_set_error(err, RTOMO_E_INVALID, "no geometry given");
    rtomo_status st;
    if ((st = check_sizes(g, err)) || (st = check_angles(g, err)) ||
        (st = check_axis(g, err)) || (st = check_filter(g, err)) ||
        (st = check_rows(g, err)) || (st = check_phase(&g->phase, err)) ||
        (st = check_rings(g, err)) || (st = rtomo_fbp_half_validate(g, err)))
        return st;
    if (g->angle_weights && g->window_proj != 0 && g->window_proj != g->n_proj)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "angle_weights needs the whole plan as one "
                               "reconstruction (window_proj %d of %d)",
                               g->window_proj, g->n_proj);
    if (g->window_proj < 0 || g->window_proj > g->n_proj)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "window_proj %d is outside [0, n_proj = %d]",
                               g->window_proj, g->n_proj);
    if (g->slice_size < 0 || g->slice_size > MAX_EDGE)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "slice_size %d is outside [1, %d]",
                               g->slice_size, MAX_EDGE);
    if ((unsigned)g->field_of_view > RTOMO_FOV_CIRCLE)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "unknown field_of_view %d (full or circle)",
                               (int)g->field_of_view);
    double radius;
    if (g->field_of_view == RTOMO_FOV_CIRCLE &&
        (st = rtomo_fbp_fov_radius(g, &radius, err)) != RTOMO_OK)
        return st;
    int size = g->slice_size ? g->slice_size : rtomo_fbp_virtual_width(g);
    return check_roi(size, g->roi_x, g->roi_y, g->roi_width, g->roi_height, err);
}

/* ------------------------------------------------------------- creation ---- */

static rtomo_status select_backend(rtomo_fbp *plan, rtomo_error *err)
{
    rtomo_backend backend;
    rtomo_status st = rtomo_resolve_backend(plan->opt.backend, &backend, err);
    if (st != RTOMO_OK)
        return st;
    plan->ops = &rtomo_cpu_fbp_ops;
#ifdef RTOMO_HAVE_CUDA
    if (backend == RTOMO_BACKEND_CUDA)
        plan->ops = &rtomo_cuda_fbp_ops;
#endif
    plan->backend = backend;
    return RTOMO_OK;
}

/* Copy g into the plan with every default filled in. */
static rtomo_status copy_geometry(rtomo_fbp *plan, const rtomo_fbp_geometry *g,
                                  rtomo_error *err)
{
    rtomo_fbp_geometry *c = &plan->geom;
    *c = *g;
    plan->angles = malloc(sizeof(double) * (size_t)g->n_proj);
    plan->axis_shift = calloc((size_t)g->n_proj, sizeof(double));
    plan->received = calloc((size_t)g->n_proj, 1);
    if (!plan->angles || !plan->axis_shift || !plan->received)
        return rtomo_set_error(err, RTOMO_E_NOMEM,
                               "out of memory for %d projections", g->n_proj);
    double step = g->angle_step != 0.0 ? g->angle_step : M_PI / g->n_proj;
    for (int p = 0; p < g->n_proj; p++) {
        plan->angles[p] = g->angles ? g->angles[p] : g->angle_start + p * step;
        if (g->axis_shift)
            plan->axis_shift[p] = g->axis_shift[p];
    }
    c->angles = plan->angles;
    c->axis_shift = plan->axis_shift;
    c->angle_step = step;
    if (isnan(c->axis))
        c->axis = 0.5 * (g->det_width - 1);
    if (c->cutoff == 0.0)
        c->cutoff = 1.0;
    if (c->rings_width == 0)
        c->rings_width = 31;
    if (c->window_proj == 0)
        c->window_proj = g->n_proj;
    if (c->row_count == 0)
        c->row_count = g->det_height - g->row_first;
    /* Onto the virtual detector before what depends on det_width. */
    rtomo_status st = rtomo_fbp_half_setup(plan, err);
    if (st != RTOMO_OK)
        return st;
    if (c->slice_size == 0)
        c->slice_size = c->det_width;
    if (c->roi_width == 0 && c->roi_height == 0) {
        c->roi_x = c->roi_y = 0;
        c->roi_width = c->roi_height = c->slice_size;
    }
    return rtomo_fbp_fov_setup(plan, err);
}

typedef struct folded_angle {
    double a;                   /* the angle modulo pi, [0, pi) */
    int p;
} folded_angle;

static int compare_folded(const void *x, const void *y)
{
    double a = ((const folded_angle *)x)->a, b = ((const folded_angle *)y)->a;
    return (a > b) - (a < b);
}

/* Each projection's weight: the angular interval it stands for, half the
 * gaps to its neighbours among all angles folded modulo pi (a parallel
 * beam sees the same lines at a and a + pi), relative to pi/n (so 1 for
 * uniform sets, 180 or 360 degrees).  All 1 without angle_weights. */
static rtomo_status weigh_projections(rtomo_fbp *plan, rtomo_error *err)
{
    const int n = plan->geom.n_proj;
    if (!(plan->proj_scale = malloc(sizeof(float) * (size_t)n)))
        return rtomo_set_error(err, RTOMO_E_NOMEM, "out of memory");
    for (int p = 0; p < n; p++)
        plan->proj_scale[p] = 1.0f;
    if (!plan->geom.angle_weights || n < 2)
        return RTOMO_OK;
    folded_angle *f = malloc(sizeof *f * (size_t)n);
    if (!f)
        return rtomo_set_error(err, RTOMO_E_NOMEM, "out of memory");
    for (int p = 0; p < n; p++) {
        double a = fmod(plan->angles[p], M_PI);
        f[p].a = a < 0 ? a + M_PI : a;
        f[p].p = p;
    }
    qsort(f, (size_t)n, sizeof *f, compare_folded);
    for (int k = 0; k < n; k++) {
        double prev = k > 0 ? f[k - 1].a : f[n - 1].a - M_PI;
        double next = k < n - 1 ? f[k + 1].a : f[0].a + M_PI;
        plan->proj_scale[f[k].p] = (float)(0.5 * (next - prev) * n / M_PI);
    }
    free(f);
    return RTOMO_OK;
}

static rtomo_status design_filter(rtomo_fbp *plan, rtomo_error *err)
{
    const rtomo_fbp_geometry *g = &plan->geom;
    int n = rtomo_fbp_padded_length(g->det_width);
    plan->filter = malloc(sizeof(float) * (size_t)n);
    if (!plan->filter)
        return rtomo_set_error(err, RTOMO_E_NOMEM,
                               "out of memory for the filter");
    plan->filter_length = n;
    /* Fold in the back-projection weight and the 1/n of the unnormalised
     * inverse FFT, so that backends apply one multiplication per bin. */
    double scale = M_PI / g->window_proj / n;
    return rtomo_fbp_filter_design(g->det_width, g->window, g->cutoff, scale,
                                   plan->filter, n, NULL, err);
}

rtomo_fbp *rtomo_fbp_create(const rtomo_fbp_geometry *g,
                            const rtomo_engine_options *opt, rtomo_error *err)
{
    rtomo_clear_error(err);
    if (rtomo_fbp_geometry_validate(g, err) != RTOMO_OK)
        return NULL;
    rtomo_fbp *plan = calloc(1, sizeof *plan);
    if (!plan) {
        rtomo_set_error(err, RTOMO_E_NOMEM, "out of memory for an FBP plan");
        return NULL;
    }
    if (opt)
        plan->opt = *opt;
    else
        rtomo_engine_options_init(&plan->opt);
    if (copy_geometry(plan, g, err) != RTOMO_OK ||
        rtomo_fbp_phase_init(plan, err) != RTOMO_OK ||
        weigh_projections(plan, err) != RTOMO_OK ||
        design_filter(plan, err) != RTOMO_OK ||
        select_backend(plan, err) != RTOMO_OK ||
        plan->ops->create(plan, err) != RTOMO_OK) {
        rtomo_fbp_destroy(plan);
        return NULL;
    }
    return plan;
}

void rtomo_fbp_destroy(rtomo_fbp *plan)
{
    if (!plan)
        return;
    rtomo_fbp_stream_close(plan);
    if (plan->ops && plan->impl)
        plan->ops->destroy(plan);
    free(plan->angles);
    free(plan->axis_shift);
    free(plan->proj_scale);
    free(plan->received);
    free(plan->rings_done);
    free(plan->dark_sum);
    free(plan->flat_sum);
    free(plan->dark_next);
    free(plan->flat_next);
    free(plan->flat_after_sum);
    free(plan->dark);
    free(plan->flat);
    rtomo_fbp_phase_free(plan);
    rtomo_fbp_half_free(plan);
    free(plan->filter);
    free(plan);
}

rtomo_backend rtomo_fbp_backend(const rtomo_fbp *plan) { return plan->backend; }

const rtomo_fbp_geometry *rtomo_fbp_geometry_of(const rtomo_fbp *plan)
{
    return &plan->geom;
}

void rtomo_fbp_get_stats(const rtomo_fbp *plan, rtomo_fbp_stats *out)
{
    *out = plan->stats;
}

/* ------------------------------------------------------- dark and flat ---- */

static size_t frame_samples(const rtomo_fbp *plan)
{
    return (size_t)plan->geom.det_width * (size_t)plan->geom.det_height;
}

static rtomo_status check_frame(const void *frame, rtomo_dtype dtype,
                                rtomo_error *err)
{
    if (!frame)
        return rtomo_set_error(err, RTOMO_E_INVALID, "no frame data given");
    if ((unsigned)dtype > RTOMO_DTYPE_F32)
        return rtomo_set_error(err, RTOMO_E_INVALID, "unknown sample type %d",
                               (int)dtype);
    return RTOMO_OK;
}

/* Add a frame (physical: widened first with half acquisition) into a
 * running sum (allocated on first use). */
static rtomo_status accumulate(rtomo_fbp *plan, double **sum, int *count,
                               const void *frame, rtomo_dtype dtype,
                               const char *what, rtomo_error *err)
{
    rtomo_status st = check_frame(frame, dtype, err);
    if (st != RTOMO_OK || (st = rtomo_fbp_half_widen(plan, &frame, dtype, err)))
        return st;
    size_t n = frame_samples(plan);
    /* Check the whole frame first: a refused frame must not leave part of
     * itself in the running sum. */
    for (size_t i = 0; dtype == RTOMO_DTYPE_F32 && i < n; i++)
        if (!isfinite(((const float *)frame)[i]))
            return rtomo_set_error(err, RTOMO_E_INVALID,
                                   "%s frame sample %zu is not finite", what, i);
    if (!*sum && !(*sum = calloc(n, sizeof(double))))
        return rtomo_set_error(err, RTOMO_E_NOMEM,
                               "out of memory for %s frames", what);
    double *s = *sum;
    for (size_t i = 0; i < n; i++)
        s[i] += dtype == RTOMO_DTYPE_U8 ? ((const uint8_t *)frame)[i]
              : dtype == RTOMO_DTYPE_U16 ? ((const uint16_t *)frame)[i]
              : ((const float *)frame)[i];
    (*count)++;
    return RTOMO_OK;
}

/* Once projections started, darks and flats gather into the next field. */
rtomo_status rtomo_fbp_add_dark(rtomo_fbp *plan, const void *frame,
                                rtomo_dtype dtype, rtomo_error *err)
{
    return plan->projections_started
               ? accumulate(plan, &plan->dark_next, &plan->n_dark_next, frame,
                            dtype, "dark", err)
               : accumulate(plan, &plan->dark_sum, &plan->n_dark, frame,
                            dtype, "dark", err);
}

rtomo_status rtomo_fbp_add_flat(rtomo_fbp *plan, const void *frame,
                                rtomo_dtype dtype, rtomo_error *err)
{
    return plan->projections_started
               ? accumulate(plan, &plan->flat_next, &plan->n_flat_next, frame,
                            dtype, "flat", err)
               : accumulate(plan, &plan->flat_sum, &plan->n_flat, frame,
                            dtype, "flat", err);
}

rtomo_status rtomo_fbp_add_flat_after(rtomo_fbp *plan, const void *frame,
                                      rtomo_dtype dtype, rtomo_error *err)
{
    if (plan->flats_interpolated)
        return rtomo_set_error(err, RTOMO_E_STATE, "the flats are "
                               "interpolated already: a flat after them "
                               "comes too late");
    return accumulate(plan, &plan->flat_after_sum, &plan->n_flat_after, frame,
                      dtype, "flat", err);
}

/* Average darks and flats over the kept rows (dark 0 when none came). */
static rtomo_status average_flat_field(rtomo_fbp *plan, rtomo_error *err)
{
    const rtomo_fbp_geometry *g = &plan->geom;
    size_t n = (size_t)g->row_count * (size_t)g->det_width;
    size_t first = (size_t)g->row_first * (size_t)g->det_width;
    free(plan->dark);
    free(plan->flat);
    plan->dark = calloc(n, sizeof(float));
    plan->flat = calloc(n, sizeof(float));
    if (!plan->dark || !plan->flat)
        return rtomo_set_error(err, RTOMO_E_NOMEM,
                               "out of memory for the flat field");
    for (size_t i = 0; i < n; i++) {
        if (plan->n_dark)
            plan->dark[i] = (float)(plan->dark_sum[first + i] / plan->n_dark);
        plan->flat[i] = (float)(plan->flat_sum[first + i] / plan->n_flat);
    }
    /* Phase retrieval filters more rows than it keeps. */
    return rtomo_fbp_phase_average(plan, err);
}

static rtomo_status start_projections(rtomo_fbp *plan, rtomo_error *err)
{
    plan->normalise = plan->n_flat > 0;
    if (plan->normalise) {
        rtomo_status st = average_flat_field(plan, err);
        if (st != RTOMO_OK)
            return st;
    }
    rtomo_status st = plan->ops->begin_projections(plan, err);
    if (st == RTOMO_OK)
        plan->projections_started = 1;
    return st;
}

/* Move the next field's sums in place of the current ones (each only when
 * frames of it came). */
static void take_next(double **sum, int *count, double **next, int *n_next)
{
    if (*n_next == 0)
        return;
    free(*sum);
    *sum = *next;
    *count = *n_next;
    *next = NULL;
    *n_next = 0;
}

/* Darks or flats came after the first projection: they are the flat field
 * from this projection on. */
static rtomo_status refresh_flat_field(rtomo_fbp *plan, rtomo_error *err)
{
    take_next(&plan->dark_sum, &plan->n_dark, &plan->dark_next,
              &plan->n_dark_next);
    take_next(&plan->flat_sum, &plan->n_flat, &plan->flat_next,
              &plan->n_flat_next);
    plan->flat_refreshes++;
    plan->normalise = plan->n_flat > 0;
    if (!plan->normalise)
        return RTOMO_OK;    /* darks alone do nothing without flats */
    rtomo_status st = average_flat_field(plan, err);
    if (st == RTOMO_OK && plan->ops->update_flat_field)
        st = plan->ops->update_flat_field(plan, err);
    return st;
}

/* -------------------------------------------------------- projections ---- */

static int float_frame_is_finite(const float *f, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(f[i]))
            return 0;
    return 1;
}

rtomo_status rtomo_fbp_add_projection(rtomo_fbp *plan, int index,
                                      const void *frame, rtomo_dtype dtype,
                                      double angle, double axis_shift,
                                      rtomo_error *err)
{
    rtomo_status st = check_frame(frame, dtype, err);
    if (st != RTOMO_OK)
        return st;
    const rtomo_fbp_geometry *g = &plan->geom;
    if (index < 0 || index >= g->n_proj)
        return rtomo_set_error(err, RTOMO_E_RANGE,
                               "projection index %d is outside [0, %d)", index,
                               g->n_proj);
    if (isinf(angle))
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "angle of projection %d is infinite", index);
    if (!isnan(axis_shift) && !rtomo_fbp_axis_shift_valid(axis_shift,
                                                          g->det_width))
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "axis shift %g of projection %d is not a finite "
                               "shift of at most %d bins", axis_shift, index,
                               g->det_width);
    /* From here on the frame is det_width wide (half acquisition). */
    if ((st = rtomo_fbp_half_widen(plan, &frame, dtype, err)) != RTOMO_OK)
        return st;
    if (dtype == RTOMO_DTYPE_F32 &&
        !float_frame_is_finite(frame, frame_samples(plan)))
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "projection %d contains NaN or infinite samples",
                               index);
    if (!plan->projections_started && (st = start_projections(plan, err)))
        return st;
    if ((plan->n_dark_next || plan->n_flat_next) &&
        (st = refresh_flat_field(plan, err)) != RTOMO_OK)
        return st;
    if ((st = rtomo_fbp_stream_settle(plan, index, err)) != RTOMO_OK)
        return st;
    /* After the settle (queued chunks read the slot's old angle), before
     * the backend (ring removal sorts the frame by its angle). */
    if (!isnan(angle))
        plan->angles[index] = angle;
    if (!isnan(axis_shift))
        plan->axis_shift[index] = axis_shift;
    st = plan->ops->add_projection(plan, index, frame, dtype, err);
    if (st != RTOMO_OK)
        return st;
    rtomo_fbp_rings_note_feed(plan, index);
    if (!plan->received[index]) {
        plan->received[index] = 1;
        plan->n_received++;
    }
    return RTOMO_OK;
}

static rtomo_status check_kept_row(const rtomo_fbp *plan, int row,
                                   rtomo_error *err)
{
    const rtomo_fbp_geometry *g = &plan->geom;
    if (row < g->row_first || row >= g->row_first + g->row_count)
        return rtomo_set_error(err, RTOMO_E_RANGE,
                               "detector row %d is not among the kept rows "
                               "[%d, %d)", row, g->row_first,
                               g->row_first + g->row_count);
    return RTOMO_OK;
}

rtomo_status rtomo_fbp_set_filtered(rtomo_fbp *plan, int row, int rows,
                                    const float *sinograms, rtomo_error *err)
{
    rtomo_status st;
    if (!sinograms || rows < 1)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "no sinogram data given");
    if ((st = check_kept_row(plan, row, err)) ||
        (st = check_kept_row(plan, row + rows - 1, err)))
        return st;
    if (!plan->projections_started && (st = start_projections(plan, err)))
        return st;
    if ((st = rtomo_fbp_stream_settle(plan, -1, err)) != RTOMO_OK)
        return st;
    st = plan->ops->set_filtered(plan, row - plan->geom.row_first, rows,
                                 sinograms, err);
    rtomo_fbp_rings_note_spoil(plan, -1);
    if (st == RTOMO_OK && plan->n_received < plan->geom.n_proj) {
        memset(plan->received, 1, (size_t)plan->geom.n_proj);
        plan->n_received = plan->geom.n_proj;
    }
    return st;
}

rtomo_status rtomo_fbp_get_filtered(rtomo_fbp *plan, int row, float *sinogram,
                                    rtomo_error *err)
{
    rtomo_status st;
    if (!sinogram)
        return rtomo_set_error(err, RTOMO_E_INVALID, "no output buffer given");
    if ((st = check_kept_row(plan, row, err)))
        return st;
    return plan->ops->get_filtered(plan, row - plan->geom.row_first, sinogram,
                                   err);
}

rtomo_status rtomo_fbp_sync(rtomo_fbp *plan, rtomo_error *err)
{
    return plan->ops->sync(plan, err);
}

/* ------------------------------------------------------ reconstruction ---- */

rtomo_status rtomo_fbp_reconstruct(rtomo_fbp *plan, const int *rows,
                                   int n_rows, float *out, rtomo_error *err)
{
    if (!rows || n_rows < 1 || !out)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "reconstruct needs at least one row and an "
                               "output buffer");
    int *kept = malloc(sizeof(int) * (size_t)n_rows);
    if (!kept)
        return rtomo_set_error(err, RTOMO_E_NOMEM, "out of memory");
    rtomo_status st = RTOMO_OK;
    for (int i = 0; i < n_rows && st == RTOMO_OK; i++) {
        st = check_kept_row(plan, rows[i], err);
        kept[i] = rows[i] - plan->geom.row_first;
    }
    if (st == RTOMO_OK && !plan->projections_started)
        st = start_projections(plan, err);
    if (st == RTOMO_OK) {
        double t0 = rtomo_now_seconds();
        st = plan->ops->reconstruct(plan, kept, n_rows, out, err);
        plan->stats.reconstruct_seconds += rtomo_now_seconds() - t0;
        if (st == RTOMO_OK) {
            plan->stats.slices_reconstructed += n_rows;
            plan->stats.updates += (double)n_rows * plan->geom.roi_width *
                                   plan->geom.roi_height * plan->geom.n_proj;
        }
    }
    free(kept);
    return st;
}

rtomo_status rtomo_fbp_set_roi(rtomo_fbp *plan, int roi_x, int roi_y,
                               int roi_width, int roi_height, rtomo_error *err)
{
    rtomo_fbp_geometry *g = &plan->geom;
    rtomo_status st = check_roi(g->slice_size, roi_x, roi_y, roi_width,
                                roi_height, err);
    if (st != RTOMO_OK)
        return st;
    if (roi_width == 0) {
        roi_x = roi_y = 0;
        roi_width = roi_height = g->slice_size;
    }
    g->roi_x = roi_x;
    g->roi_y = roi_y;
    g->roi_width = roi_width;
    g->roi_height = roi_height;
    return RTOMO_OK;
}

rtomo_status rtomo_fbp_set_interp(rtomo_fbp *plan, rtomo_interp interp,
                                  rtomo_error *err)
{
    if ((unsigned)interp > RTOMO_INTERP_NEAREST)
        return rtomo_set_error(err, RTOMO_E_INVALID, "unknown interpolation %d",
                               (int)interp);
    plan->geom.interp = interp;
    return RTOMO_OK;
}
