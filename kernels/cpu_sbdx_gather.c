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

/* One output pixel: position (px, py), hole rows hy[0..n_hy), hole columns
 * hx[0..n_hx).  Holes are visited in frame order (cy, then cx) so that the
 * sum adds in the same order as the scatter. */
static float gather_pixel(const cpu_sbdx_job *job,
                          const rtomo_sbdx_axis_lut *lx,
                          const rtomo_sbdx_axis_lut *ly, int px, int py,
                          const int32_t *hy, int n_hy, const int32_t *hx,
                          int n_hx)
{
    const rtomo_sbdx_geometry *g = job->geom;
    size_t hole_size = (size_t)g->det_width * g->det_height;
    float sum = 0.0f;
    for (int a = 0; a < n_hy; a++) {
        int cy = hy[a];
        const rtomo_sbdx_pc_entry *ey = NULL;
        int ny = rtomo_sbdx_axis_lut_entries(ly, py - g->shift_m * cy, &ey);
        const float *hole_row =
            job->frame + (size_t)cy * g->holes_x * hole_size;
        for (int b = 0; b < n_hx; b++) {
            int cx = hx[b];
            const rtomo_sbdx_pc_entry *ex = NULL;
            int nx = rtomo_sbdx_axis_lut_entries(lx, px - g->shift_m * cx, &ex);
            sum = gather_hole(hole_row + (size_t)cx * hole_size, g->det_width,
                              ey, ny, ex, nx, sum);
        }
    }
    return sum;
}

void cpu_sbdx_gather_row(const cpu_sbdx_job *job, int k, int row)
{
    const rtomo_sbdx_geometry *g = job->geom;
    const rtomo_sbdx_axis_lut *lx = &job->lut->x[k];
    const rtomo_sbdx_axis_lut *ly = &job->lut->y[k];
    float *out = job->planes + ((size_t)k * g->out_height + row) * g->out_width;
    const int32_t *hy = ly->holes + ly->hole_start[row];
    int n_hy = ly->hole_start[row + 1] - ly->hole_start[row];
    int py = g->origin_y + row;

    for (int i = 0; i < g->out_width; i++) {
        const int32_t *hx = lx->holes + lx->hole_start[i];
        int n_hx = lx->hole_start[i + 1] - lx->hole_start[i];
        out[i] = gather_pixel(job, lx, ly, g->origin_x + i, py, hy, n_hy, hx,
                              n_hx) * job->scale;
    }
}
