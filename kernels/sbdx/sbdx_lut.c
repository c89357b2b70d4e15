/*
 * sbdx_lut.c — builds the SBDX look-up tables described in sbdx_lut.h:
 * per plane and axis, the detector-centric table, its pixel-centric
 * transpose in compact (start, entries) form, and the per-output lists of
 * contributing holes used for row skipping.
 */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sbdx_lut.h"

/* floor(a / b) for b > 0 and any sign of a (C division truncates). */
static int floor_div(int a, int b)
{
    int q = a / b;
    return (a % b != 0 && a < 0) ? q - 1 : q;
}

static void fill_detector_centric(rtomo_sbdx_axis_lut *a)
{
    double centre = (a->n_det - 1) / 2.0;
    for (int d = 0; d < a->n_det; d++) {
        double t = a->ratio * (d - centre);
        double offset = floor(t);
        double f = t - offset;
        a->dc[d].offset = (int32_t)offset;
        a->dc[d].w_lo = (float)(1.0 - f);
        a->dc[d].w_hi = (float)f;
    }
}

/* Counting sort of the 2 N_d deposits by offset.  Iterating d upwards keeps
 * the entries of each offset sorted by det, which is what makes a gather in
 * (hole, det) order add in the same order as a scatter over the frame. */
static int fill_pixel_centric(rtomo_sbdx_axis_lut *a)
{
    a->span_first = a->dc[0].offset;
    a->span_len = a->dc[a->n_det - 1].offset + 2 - a->span_first;
    a->start = calloc((size_t)a->span_len + 1, sizeof *a->start);
    a->pc = malloc(sizeof *a->pc * 2 * (size_t)a->n_det);
    if (!a->start || !a->pc)
        return -1;

    for (int d = 0; d < a->n_det; d++) {
        int o = a->dc[d].offset - a->span_first;
        a->start[o + 1]++;
        if (a->dc[d].w_hi != 0.0f)
            a->start[o + 2]++;
    }
    a->max_per_offset = 0;
    for (int o = 0; o < a->span_len; o++) {
        if (a->start[o + 1] > a->max_per_offset)
            a->max_per_offset = a->start[o + 1];
        a->start[o + 1] += a->start[o];
    }
    a->n_entries = a->start[a->span_len];

    /* fill[o] is the next free slot of offset o; start[] stays intact. */
    int32_t *fill = malloc(sizeof *fill * (size_t)a->span_len);
    if (!fill)
        return -1;
    memcpy(fill, a->start, sizeof *fill * (size_t)a->span_len);
    for (int d = 0; d < a->n_det; d++) {
        int o = a->dc[d].offset - a->span_first;
        a->pc[fill[o]++] = (rtomo_sbdx_pc_entry){d, a->dc[d].w_lo};
        if (a->dc[d].w_hi != 0.0f)
            a->pc[fill[o + 1]++] = (rtomo_sbdx_pc_entry){d, a->dc[d].w_hi};
    }
    free(fill);
    return 0;
}

/* The holes c (ascending) whose offset P - m c has entries, for plane
 * position P: when `at` >= 0 written to the hole lists from index `at` on,
 * with their entry ranges; returns how many there are. */
static int holes_of_position(const rtomo_sbdx_axis_lut *a, int position,
                             long at)
{
    int span_last = a->span_first + a->span_len - 1;
    /* span_first <= P - m c <= span_last  <=>  c in [c_lo, c_hi]. */
    int c_lo = -floor_div(span_last - position, a->shift_m);
    int c_hi = floor_div(position - a->span_first, a->shift_m);
    if (c_lo < 0)
        c_lo = 0;
    if (c_hi > a->n_holes - 1)
        c_hi = a->n_holes - 1;
    int n = 0;
    for (int c = c_lo; c <= c_hi; c++) {
        int o = position - a->shift_m * c - a->span_first;
        if (a->start[o + 1] > a->start[o]) {
            if (at >= 0) {
                a->holes[at + n] = c;
                a->hole_entry_first[at + n] = a->start[o];
                a->hole_entry_count[at + n] = a->start[o + 1] - a->start[o];
            }
            n++;
        }
    }
    return n;
}

static int fill_hole_lists(rtomo_sbdx_axis_lut *a)
{
    a->hole_start = malloc(sizeof *a->hole_start * ((size_t)a->n_out + 1));
    if (!a->hole_start)
        return -1;
    /* Two passes (count, then fill) so that the list is one exact-size
     * array, ready to copy to a device. */
    size_t total = 0;
    a->max_holes = 0;
    for (int i = 0; i < a->n_out; i++) {
        a->hole_start[i] = (int32_t)total;
        int n = holes_of_position(a, a->origin + i, -1);
        if (n > a->max_holes)
            a->max_holes = n;
        total += (size_t)n;
        if (total > INT32_MAX)
            return -1;
    }
    a->hole_start[a->n_out] = (int32_t)total;
    size_t slots = total ? total : 1;
    a->holes = malloc(sizeof *a->holes * slots);
    a->hole_entry_first = malloc(sizeof *a->hole_entry_first * slots);
    a->hole_entry_count = malloc(sizeof *a->hole_entry_count * slots);
    if (!a->holes || !a->hole_entry_first || !a->hole_entry_count)
        return -1;
    for (int i = 0; i < a->n_out; i++)
        holes_of_position(a, a->origin + i, a->hole_start[i]);
    return 0;
}

/* The uniform response of sbdx_lut.h: the exact fixed-point sum of the
 * weights of the lists just built, scaled by the m / N_d density of the
 * plane scale (rtomo_sbdx_response, as on the GPU). */
static int fill_response(rtomo_sbdx_axis_lut *a)
{
    a->response = malloc(sizeof *a->response * (size_t)a->n_out);
    if (!a->response)
        return -1;
    for (int i = 0; i < a->n_out; i++) {
        int64_t sum = 0;
        for (int32_t h = a->hole_start[i]; h < a->hole_start[i + 1]; h++) {
            const rtomo_sbdx_pc_entry *e = a->pc + a->hole_entry_first[h];
            for (int j = 0; j < a->hole_entry_count[h]; j++)
                sum += rtomo_sbdx_weight_fixed(e[j].weight);
        }
        a->response[i] = rtomo_sbdx_response(sum, a->shift_m, a->n_det);
    }
    return 0;
}

static void axis_free(rtomo_sbdx_axis_lut *a)
{
    free(a->dc);
    free(a->start);
    free(a->pc);
    free(a->hole_start);
    free(a->holes);
    free(a->hole_entry_first);
    free(a->hole_entry_count);
    free(a->response);
}

static int axis_build(rtomo_sbdx_axis_lut *a, double ratio, int n_det,
                      int shift_m, int n_holes, int origin, int n_out)
{
    memset(a, 0, sizeof *a);
    if (n_det < 1 || n_out < 1)
        return -1;  /* excluded by validation; keeps the tables non-empty */
    a->ratio = ratio;
    a->n_det = n_det;
    a->shift_m = shift_m;
    a->n_holes = n_holes;
    a->origin = origin;
    a->n_out = n_out;
    a->dc = malloc(sizeof *a->dc * (size_t)n_det);
    if (!a->dc)
        return -1;
    fill_detector_centric(a);
    if (fill_pixel_centric(a) != 0 || fill_hole_lists(a) != 0 ||
        fill_response(a) != 0)
        return -1;
    return 0;
}

rtomo_sbdx_lut *rtomo_sbdx_lut_create(const rtomo_sbdx_geometry *g,
                                      rtomo_error *err)
{
    if (rtomo_sbdx_geometry_validate(g, err) != RTOMO_OK)
        return NULL;
    int out_w = g->out_width ? g->out_width : g->shift_m * g->holes_x;
    int out_h = g->out_height ? g->out_height : g->shift_m * g->holes_y;

    rtomo_sbdx_lut *lut = calloc(1, sizeof *lut);
    if (!lut)
        goto nomem;
    lut->x = calloc((size_t)g->n_planes, sizeof *lut->x);
    lut->y = calloc((size_t)g->n_planes, sizeof *lut->y);
    if (!lut->x || !lut->y)
        goto nomem;
    for (int k = 0; k < g->n_planes; k++) {
        lut->n_planes = k + 1;  /* so that destroy frees what was built */
        if (axis_build(&lut->x[k], g->ratios[k], g->det_width, g->shift_m,
                       g->holes_x, g->origin_x, out_w) != 0 ||
            axis_build(&lut->y[k], g->ratios[k], g->det_height, g->shift_m,
                       g->holes_y, g->origin_y, out_h) != 0)
            goto nomem;
    }
    return lut;

nomem:
    rtomo_sbdx_lut_destroy(lut);
    rtomo_set_error(err, RTOMO_E_NOMEM,
                    "out of memory for the SBDX look-up tables of %d planes",
                    g->n_planes);
    return NULL;
}

void rtomo_sbdx_lut_destroy(rtomo_sbdx_lut *lut)
{
    if (!lut)
        return;
    for (int k = 0; k < lut->n_planes; k++) {
        if (lut->x)
            axis_free(&lut->x[k]);
        if (lut->y)
            axis_free(&lut->y[k]);
    }
    free(lut->x);
    free(lut->y);
    free(lut);
}

size_t rtomo_sbdx_axis_lut_table_bytes(const rtomo_sbdx_axis_lut *a)
{
    return sizeof(int32_t) * ((size_t)a->span_len + 1) +
           sizeof(rtomo_sbdx_pc_entry) * (size_t)a->n_entries;
}
