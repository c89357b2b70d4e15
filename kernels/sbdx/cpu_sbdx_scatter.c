/*
 * cpu_sbdx_scatter.c — detector-centric SBDX reconstruction on the CPU (the
 * paper's scatter formulation): every sample deposits bilinear weights into
 * the 2x2 plane pixels around its ray's position, using the
 * detector-centric tables.  A thread owns a whole plane, so no deposits
 * race.  This is the cross-check of the pixel-centric gather.
 */
#include "config.h"

#include <string.h>

#include "cpu_sbdx.h"

/* One detector row of one hole: the samples' x weights and the two output
 * rows (either may be outside the output: NULL) with their y weights. */
typedef struct scatter_row {
    float *row_lo, *row_hi;
    float wy_lo, wy_hi;
} scatter_row;

static void deposit(float *row, int width, int x, float value)
{
    if (row && x >= 0 && x < width)
        row[x] += value;
}

/* Scatter the Wd samples of one detector row of one hole.  x0 is the
 * output column of the hole centre (m cx - origin_x).  The four deposits of
 * a sample go to four different pixels, so their order does not matter. */
static void scatter_detector_row(const rtomo_sbdx_axis_lut *lx,
                                 const float *samples, int x0, int width,
                                 const scatter_row *r)
{
    for (int dx = 0; dx < lx->n_det; dx++) {
        const rtomo_sbdx_dc_entry *e = &lx->dc[dx];
        float v = samples[dx];
        int x = x0 + e->offset;
        deposit(r->row_lo, width, x, v * (e->w_lo * r->wy_lo));
        if (e->w_hi != 0.0f)
            deposit(r->row_lo, width, x + 1, v * (e->w_hi * r->wy_lo));
        if (r->wy_hi != 0.0f) {
            deposit(r->row_hi, width, x, v * (e->w_lo * r->wy_hi));
            if (e->w_hi != 0.0f)
                deposit(r->row_hi, width, x + 1, v * (e->w_hi * r->wy_hi));
        }
    }
}

static float *output_row(float *plane, int width, int height, int y)
{
    return (y >= 0 && y < height) ? plane + (size_t)y * width : NULL;
}

void cpu_sbdx_scatter_plane(const cpu_sbdx_job *job, int k)
{
    const rtomo_sbdx_geometry *g = job->geom;
    const rtomo_sbdx_axis_lut *lx = &job->lut->x[k];
    const rtomo_sbdx_axis_lut *ly = &job->lut->y[k];
    int width = g->out_width, height = g->out_height;
    size_t plane_size = (size_t)width * height;
    float *plane = job->planes + plane_size * k;
    size_t hole_size = (size_t)g->det_width * g->det_height;

    memset(plane, 0, sizeof(float) * plane_size);
    for (int cy = 0; cy < g->holes_y; cy++) {
        for (int cx = 0; cx < g->holes_x; cx++) {
            const float *hole =
                job->frame + ((size_t)cy * g->holes_x + cx) * hole_size;
            int x0 = g->shift_m * cx - g->origin_x;
            int y0 = g->shift_m * cy - g->origin_y;
            for (int dy = 0; dy < g->det_height; dy++) {
                const rtomo_sbdx_dc_entry *e = &ly->dc[dy];
                int y = y0 + e->offset;
                scatter_row r = {output_row(plane, width, height, y),
                                 output_row(plane, width, height, y + 1),
                                 e->w_lo, e->w_hi};
                if (!r.row_lo && !r.row_hi)
                    continue;
                scatter_detector_row(lx, hole + (size_t)dy * g->det_width,
                                     x0, width, &r);
            }
        }
    }
    for (int y = 0; y < height; y++) {
        float *row = plane + (size_t)y * width;
        for (int x = 0; x < width; x++)
            row[x] = cpu_sbdx_finish(job, k, x, y, row[x]);
    }
}
