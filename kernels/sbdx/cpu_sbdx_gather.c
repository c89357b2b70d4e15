/*
 * cpu_sbdx_gather.c — pixel-centric SBDX reconstruction on the CPU (the
 * paper's gather formulation, the fast one): each output pixel sums the
 * samples that reach it, found through the pixel-centric tables.  The hole
 * rows of an output row and the hole columns of an output column come from
 * the LUT's hole lists, so holes that cannot contribute (including whole
 * hole rows, by separability) are never visited.
 */
#include "config.h"

#include "cpu_sbdx.h"

/* Sum of one hole's samples at one output pixel.  ey/ny are the hole's y
 * entries at this row's offset, ex/nx its x entries at this column's. */
static float gather_hole(const float *hole, int det_width,
                         const rtomo_sbdx_pc_entry *ey, int ny,
                         const rtomo_sbdx_pc_entry *ex, int nx, float sum)
{
    for (int a = 0; a < ny; a++) {
        const float *samples = hole + (size_t)ey[a].det * det_width;
        float wy = ey[a].weight;
        for (int b = 0; b < nx; b++)
            sum += samples[ex[b].det] * (ex[b].weight * wy);
    }
    return sum;
}

/* One output pixel: hole rows ly's list of output row `row`, hole columns
 * lx's list of output column `col`.  Holes are visited in frame order (cy,
 * then cx) so that the sum adds in the same order as the scatter. */
static float gather_pixel(const cpu_sbdx_job *job,
                          const rtomo_sbdx_axis_lut *lx, int col,
                          const rtomo_sbdx_axis_lut *ly, int row)
{
    const rtomo_sbdx_geometry *g = job->geom;
    size_t hole_size = (size_t)g->det_width * g->det_height;
    size_t hole_row_size = hole_size * g->holes_x;
    float sum = 0.0f;
    for (int32_t a = ly->hole_start[row]; a < ly->hole_start[row + 1]; a++) {
        const float *hole_row = job->frame + ly->holes[a] * hole_row_size;
        const rtomo_sbdx_pc_entry *ey = ly->pc + ly->hole_entry_first[a];
        int ny = ly->hole_entry_count[a];
        for (int32_t b = lx->hole_start[col]; b < lx->hole_start[col + 1];
             b++)
            sum = gather_hole(hole_row + lx->holes[b] * hole_size,
                              g->det_width, ey, ny,
                              lx->pc + lx->hole_entry_first[b],
                              lx->hole_entry_count[b], sum);
    }
    return sum;
}

void cpu_sbdx_gather_row(const cpu_sbdx_job *job, int k, int row)
{
    const rtomo_sbdx_geometry *g = job->geom;
    const rtomo_sbdx_axis_lut *lx = &job->lut->x[k];
    const rtomo_sbdx_axis_lut *ly = &job->lut->y[k];
    float *out = job->planes + ((size_t)k * g->out_height + row) * g->out_width;
    for (int i = 0; i < g->out_width; i++)
        out[i] = cpu_sbdx_finish(job, k, i, row,
                                 gather_pixel(job, lx, i, ly, row));
}
