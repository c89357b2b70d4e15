/*
 * sbdx_composite.c — the CPU (reference) best-focus composite of SBDX
 * planes: per pixel, the plane of highest local variance after flat-fielding
 * (the rule is stated in sbdx_composite.h).  Box sums (of u, u^2 and of the
 * pixels that count) come from running column sums and a prefix sum along
 * each row, so the cost per pixel does not grow with the window radius.
 */
#include "config.h"

#include <math.h>
#include <stdlib.h>

#include "sbdx_composite.h"
#include "sbdx_lut.h"

/* Running sums restart from scratch every SUM_BLOCK rows (at absolute row
 * indices), which bounds the rounding drift of add-then-subtract and makes
 * every pixel's result independent of how the image is cut into bands. */
#define SUM_BLOCK 32

/* One plane as the variance sees it. */
typedef struct plane_view {
    const float *img;               /* height x width */
    const float *rx, *ry;           /* responses, or NULL */
    int flat_fielded;               /* img is u already; rx, ry: the mask */
    int width, height;
} plane_view;

/* Scratch of one band: running column sums of u, u^2 and of the pixels
 * that count over the vertical window, their prefix sums along the current
 * row, and the best variance and plane found so far for every pixel of the
 * band. */
typedef struct band_work {
    double *col_sum, *col_sq, *col_n;       /* [width] */
    double *pre_sum, *pre_sq, *pre_n;       /* [width + 1] */
    double *best_var;                       /* [rows * width] */
    uint16_t *best_plane;                   /* [rows * width] */
} band_work;

static void band_work_free(band_work *w)
{
    double *arrays[] = {w->col_sum, w->col_sq, w->col_n, w->pre_sum,
                        w->pre_sq, w->pre_n, w->best_var};
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++)
        free(arrays[i]);
    free(w->best_plane);
}

static int band_work_alloc(band_work *w, int width, int rows)
{
    size_t n = (size_t)width * (size_t)rows;
    double **row_arrays[] = {&w->col_sum, &w->col_sq, &w->col_n};
    double **prefix_arrays[] = {&w->pre_sum, &w->pre_sq, &w->pre_n};
    int ok = 1;
    for (int i = 0; i < 3; i++) {
        *row_arrays[i] = malloc(sizeof(double) * (size_t)width);
        *prefix_arrays[i] = malloc(sizeof(double) * ((size_t)width + 1));
        ok = ok && *row_arrays[i] && *prefix_arrays[i];
    }
    w->best_var = malloc(sizeof(double) * n);
    w->best_plane = malloc(sizeof(uint16_t) * n);
    return ok && w->best_var && w->best_plane ? 0 : -1;
}

static int clip(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* Whether pixel (i, r) of a plane counts in windows and may be chosen:
 * always for raw planes, inside the field of view for flat-fielded ones. */
static int pixel_counts(const plane_view *p, int i, int r)
{
    return !p->flat_fielded || rtomo_sbdx_in_field_of_view(p->rx[i], p->ry[r]);
}

/* Add (sign +1) or remove (sign -1) row r's flat-fielded values u from the
 * column sums.  Removing recomputes the same u bit for bit. */
static void column_sums_update(band_work *w, const plane_view *p, int r,
                               double sign)
{
    const float *row = p->img + (size_t)r * p->width;
    int divide = p->rx && !p->flat_fielded;
    double ry = divide ? p->ry[r] : 1.0;
    for (int i = 0; i < p->width; i++) {
        if (!pixel_counts(p, i, r))
            continue;
        double u = row[i];
        if (divide) {
            double resp = (double)p->rx[i] * ry;
            u /= resp > RTOMO_SBDX_RESPONSE_FLOOR ? resp
                                                  : RTOMO_SBDX_RESPONSE_FLOOR;
        }
        w->col_sum[i] += sign * u;
        w->col_sq[i] += sign * u * u;
        w->col_n[i] += sign;
    }
}

/* Column sums of the vertical window of row j, computed afresh. */
static void column_sums_reset(band_work *w, const plane_view *p, int radius,
                              int j)
{
    for (int i = 0; i < p->width; i++)
        w->col_sum[i] = w->col_sq[i] = w->col_n[i] = 0.0;
    int bottom = clip(j + radius, 0, p->height - 1);
    for (int r = clip(j - radius, 0, p->height - 1); r <= bottom; r++)
        column_sums_update(w, p, r, 1.0);
}

/* Move the vertical window from row j-1 to row j. */
static void column_sums_slide(band_work *w, const plane_view *p, int radius,
                              int j)
{
    if (j + radius < p->height)
        column_sums_update(w, p, j + radius, 1.0);
    if (j - radius - 1 >= 0)
        column_sums_update(w, p, j - radius - 1, -1.0);
}

/* Local variances of row j (whose column sums are current), folded into
 * the band's best plane so far.  Counts are exact integers in double, so
 * sliding them leaves no residue.  A one-pixel window (radius 0) has
 * variance 0 by the rule: said outright, as running sums of u and u^2
 * could leave rounding residue. */
static void fold_row_variance(band_work *w, const plane_view *p, int radius,
                              int j, int plane, double *best_var,
                              uint16_t *best_plane)
{
    int width = p->width;
    w->pre_sum[0] = w->pre_sq[0] = w->pre_n[0] = 0.0;
    for (int i = 0; i < width; i++) {
        w->pre_sum[i + 1] = w->pre_sum[i] + w->col_sum[i];
        w->pre_sq[i + 1] = w->pre_sq[i] + w->col_sq[i];
        w->pre_n[i + 1] = w->pre_n[i] + w->col_n[i];
    }
    for (int i = 0; i < width; i++) {
        if (!pixel_counts(p, i, j))
            continue;
        int lo = clip(i - radius, 0, width - 1);
        int hi = clip(i + radius, 0, width - 1);
        double n = w->pre_n[hi + 1] - w->pre_n[lo];
        double mean = (w->pre_sum[hi + 1] - w->pre_sum[lo]) / n;
        double var = radius == 0
                         ? 0.0
                         : (w->pre_sq[hi + 1] - w->pre_sq[lo]) / n -
                               mean * mean;
        if (var > best_var[i]) {
            best_var[i] = var;
            best_plane[i] = (uint16_t)plane;
        }
    }
}

/* Fold plane `plane` into the best variances of rows [first, end). */
static void fold_plane(band_work *w, const plane_view *p, int plane,
                       int radius, int first, int end)
{
    int block_start = first - first % SUM_BLOCK;
    column_sums_reset(w, p, radius, block_start);
    for (int j = block_start + 1; j <= first; j++)
        column_sums_slide(w, p, radius, j);

    for (int j = first; j < end; j++) {
        if (j > first && j % SUM_BLOCK == 0)
            column_sums_reset(w, p, radius, j);
        else if (j > first)
            column_sums_slide(w, p, radius, j);
        size_t band_off = (size_t)(j - first) * p->width;
        fold_row_variance(w, p, radius, j, plane, w->best_var + band_off,
                          w->best_plane + band_off);
    }
}

static rtomo_status check_stack(const rtomo_sbdx_stack *s, int radius,
                                rtomo_error *err)
{
    if (!s || !s->planes)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "no planes given for the composite");
    if (s->n_planes < 1 || s->n_planes > 65536 || s->width < 1 ||
        s->height < 1 || radius < 0)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "composite of %d planes of %dx%d with radius "
                               "%d is not possible", s->n_planes, s->width,
                               s->height, radius);
    if (!s->response_x != !s->response_y)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "composite needs both axis responses or none");
    if (s->flat_fielded && !s->response_x)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "composite of flat-fielded planes needs their "
                               "responses (the field of view)");
    return RTOMO_OK;
}

rtomo_status rtomo_sbdx_composite_rows(const rtomo_sbdx_stack *stack,
                                       int radius, int row_first,
                                       int row_count, float *composite,
                                       uint16_t *depth, rtomo_error *err)
{
    rtomo_status st = check_stack(stack, radius, err);
    if (st != RTOMO_OK)
        return st;
    int width = stack->width, height = stack->height;
    if (row_first < 0 || row_count < 0 || row_count > height - row_first)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "composite rows [%d, %d) are outside the "
                               "image's %d rows", row_first,
                               row_first + row_count, height);
    if (row_count == 0 || (!composite && !depth))
        return RTOMO_OK;

    band_work w = {0};
    if (band_work_alloc(&w, width, row_count) != 0) {
        band_work_free(&w);
        return rtomo_set_error(err, RTOMO_E_NOMEM,
                               "out of memory for the composite of %d rows "
                               "of width %d", row_count, width);
    }
    size_t plane_size = (size_t)width * height;
    /* No candidate yet: "no plane", which stays where none counts. */
    for (size_t b = 0; b < (size_t)row_count * width; b++) {
        w.best_plane[b] = RTOMO_SBDX_DEPTH_NONE;
        w.best_var[b] = -INFINITY;
    }
    for (int k = 0; k < stack->n_planes; k++) {
        plane_view p = {stack->planes + plane_size * k,
                        stack->response_x ? stack->response_x[k] : NULL,
                        stack->response_y ? stack->response_y[k] : NULL,
                        stack->flat_fielded, width, height};
        fold_plane(&w, &p, k, radius, row_first, row_first + row_count);
    }

    for (size_t b = 0; b < (size_t)row_count * width; b++) {
        size_t pix = (size_t)row_first * width + b;
        uint16_t k = w.best_plane[b];
        if (composite)
            composite[pix] = k == RTOMO_SBDX_DEPTH_NONE
                                 ? 0.0f
                                 : stack->planes[plane_size * k + pix];
        if (depth)
            depth[pix] = k;
    }
    band_work_free(&w);
    return RTOMO_OK;
}

rtomo_status rtomo_sbdx_composite(const rtomo_sbdx_stack *stack, int radius,
                                  float *composite, uint16_t *depth,
                                  rtomo_error *err)
{
    rtomo_status st = check_stack(stack, radius, err);
    if (st != RTOMO_OK)
        return st;
    return rtomo_sbdx_composite_rows(stack, radius, 0, stack->height,
                                     composite, depth, err);
}
