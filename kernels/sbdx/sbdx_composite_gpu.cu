/*
 * sbdx_composite_gpu.cu — the best-focus composite and depth map on the GPU,
 * by the rule of sbdx_composite.h: per pixel the plane of largest local
 * variance S2/N - (S1/N)^2 of the flat-fielded plane u over the pixels of
 * the (2r+1)^2 window, clipped to the image, that count, ties to the lowest
 * plane, RTOMO_SBDX_DEPTH_NONE (composite 0) where no plane is a
 * candidate.  u is the plane value itself when the planes are flat-fielded
 * already, and then only the field of view counts; raw planes give
 * v / max(R, floor) and count everywhere.  u and the sums are in double,
 * as on the CPU; the sums are taken in
 * another order (a row sum, then a column sum of row sums), so the depth can
 * differ from the CPU's only where two planes tie to rounding.
 *
 * A block of 32 x 8 threads owns a 32 x 8 tile of the slot's own rows and
 * walks the planes: stage the tile's u plus its r-wide halo (NaN for a
 * pixel that does not count), form the horizontal window sums and counts
 * of every staged row, then each thread sums its column of them and keeps
 * the best plane in registers.
 */
#include "config.h"

#include <math.h>
#include <stdlib.h>

#include "cuda_common.h"
#include "cuda_sbdx_device.h"
#include "sbdx_composite.h"
#include "sbdx_lut.h"

#define TILE_W 32
#define TILE_H 8
#define COMPOSITE_THREADS (TILE_W * TILE_H)

/* Shared memory of one block: horizontal sums, sums of squares and counts
 * of (TILE_H + 2r) rows x TILE_W columns, then the staged flat-fielded
 * values of (TILE_H + 2r) x (TILE_W + 2r); all double. */
struct composite_smem {
    double *h1, *h2, *hn;
    double *values;
    int rows, cols;     /* staged rows and columns */
};

SBDX_HD composite_smem composite_smem_of(void *base, int radius)
{
    composite_smem s;
    s.rows = TILE_H + 2 * radius;
    s.cols = TILE_W + 2 * radius;
    s.h1 = (double *)base;
    s.h2 = s.h1 + s.rows * TILE_W;
    s.hn = s.h2 + s.rows * TILE_W;
    s.values = s.hn + s.rows * TILE_W;
    return s;
}

/* A staged value of a pixel that does not count (outside a flat-fielded
 * plane's field of view) is NaN. */
SBDX_HD bool staged_counts(double u) { return u == u; }

SBDX_HD int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* Phase A: stage plane k's flat-fielded values around the tile whose
 * top-left own pixel is (i0, j0) (absolute row), NaN where a pixel does
 * not count.  Positions outside the image or the slot's reconstructed rows
 * are never part of a window that is used: zeros. */
SBDX_HD void composite_stage(const sbdx_composite_params &p,
                             const composite_smem &s, int k, int i0, int j0,
                             int tid)
{
    const float *plane = p.planes + (size_t)k * p.ext_rows * p.width;
    const float *rx = p.response_x ? p.response_x + (size_t)k * p.width : NULL;
    const float *ry = p.response_x ? p.response_y + (size_t)k * p.height : NULL;
    for (int idx = tid; idx < s.rows * s.cols; idx += COMPOSITE_THREADS) {
        int lr = idx / s.cols, lc = idx - lr * s.cols;
        int row = j0 - p.radius + lr, col = i0 - p.radius + lc;
        int er = row - p.ext_first;
        double u = 0.0;
        if (col >= 0 && col < p.width && row >= 0 && row < p.height &&
            er >= 0 && er < p.ext_rows) {
            u = (double)plane[(size_t)er * p.width + col];
            if (p.flat_fielded) {
                if (!rtomo_sbdx_in_field_of_view(rx[col], ry[row]))
                    u = NAN;
            } else if (rx) {
                double response = (double)rx[col] * (double)ry[row];
                u /= response > RTOMO_SBDX_RESPONSE_FLOOR
                         ? response : RTOMO_SBDX_RESPONSE_FLOOR;
            }
        }
        s.values[idx] = u;
    }
}

/* Phase B: window sums and counts along x for every staged row and tile
 * column. */
SBDX_HD void composite_rows(const sbdx_composite_params &p,
                            const composite_smem &s, int i0, int tid)
{
    for (int idx = tid; idx < s.rows * TILE_W; idx += COMPOSITE_THREADS) {
        int lr = idx / TILE_W, c = idx - lr * TILE_W;
        int i = i0 + c;
        int lo = clampi(i - p.radius, 0, p.width - 1);
        int hi = clampi(i + p.radius, 0, p.width - 1);
        const double *v = s.values + lr * s.cols;
        int shift = p.radius - i0;  /* staged column of image column col */
        double s1 = 0.0, s2 = 0.0, n = 0.0;
        for (int col = lo; col <= hi; col++) {
            double x = v[col + shift];
            if (staged_counts(x)) {
                s1 += x;
                s2 += x * x;
                n += 1.0;
            }
        }
        s.h1[idx] = s1;
        s.h2[idx] = s2;
        s.hn[idx] = n;
    }
}

/* Phase C: thread (c, r) finishes the window of its pixel (i0 + c, j0 + r)
 * and, if the pixel counts on plane k, folds the plane into its best
 * variance so far. */
SBDX_HD void composite_fold(const sbdx_composite_params &p,
                            const composite_smem &s, int k, int i0, int j0,
                            int tid, double *best_var, int *best_plane)
{
    int c = tid % TILE_W, r = tid / TILE_W;
    int i = i0 + c, j = j0 + r;
    if (i >= p.width || j >= p.own_first + p.own_rows)
        return;
    if (!staged_counts(s.values[(r + p.radius) * s.cols + c + p.radius]))
        return;
    int lo = clampi(j - p.radius, 0, p.height - 1);
    int hi = clampi(j + p.radius, 0, p.height - 1);
    double s1 = 0.0, s2 = 0.0, n = 0.0;
    for (int row = lo; row <= hi; row++) {
        int lr = row - (j0 - p.radius);
        s1 += s.h1[lr * TILE_W + c];
        s2 += s.h2[lr * TILE_W + c];
        n += s.hn[lr * TILE_W + c];
    }
    double mean = s1 / n;
    /* r = 0: variance 0 by the rule, free of FMA or rounding residue. */
    double var = p.radius == 0 ? 0.0 : s2 / n - mean * mean;
    if (var > *best_var) {
        *best_var = var;
        *best_plane = k;
    }
}

/* Last: write the chosen plane's value and index (0 and
 * RTOMO_SBDX_DEPTH_NONE where no plane was a candidate). */
SBDX_HD void composite_store(const sbdx_composite_params &p, int i0, int j0,
                             int tid, int best_plane)
{
    int i = i0 + tid % TILE_W, j = j0 + tid / TILE_W;
    if (i >= p.width || j >= p.own_first + p.own_rows)
        return;
    size_t own = (size_t)(j - p.own_first) * p.width + i;
    bool none = best_plane == RTOMO_SBDX_DEPTH_NONE;
    size_t src = ((size_t)(none ? 0 : best_plane) * p.ext_rows +
                  (j - p.ext_first)) * p.width + i;
    if (p.composite)
        p.composite[own] = none ? 0.0f : p.planes[src];
    if (p.depth)
        p.depth[own] = (uint16_t)best_plane;
}

__global__ void __launch_bounds__(COMPOSITE_THREADS)
composite_kernel(sbdx_composite_params p)
{
    extern __shared__ double smem_base[];
    composite_smem s = composite_smem_of(smem_base, p.radius);
    int tid = threadIdx.y * TILE_W + threadIdx.x;
    int i0 = blockIdx.x * TILE_W, j0 = p.own_first + blockIdx.y * TILE_H;
    double best_var = -INFINITY;
    int best_plane = RTOMO_SBDX_DEPTH_NONE;
    for (int k = 0; k < p.n_planes; k++) {
        composite_stage(p, s, k, i0, j0, tid);
        __syncthreads();
        composite_rows(p, s, i0, tid);
        __syncthreads();
        composite_fold(p, s, k, i0, j0, tid, &best_var, &best_plane);
        __syncthreads();
    }
    composite_store(p, i0, j0, tid, best_plane);
}

extern "C" size_t sbdx_composite_smem_bytes(int radius)
{
    size_t rows = TILE_H + 2 * (size_t)radius;
    size_t cols = TILE_W + 2 * (size_t)radius;
    return sizeof(double) * rows * (3 * TILE_W + cols);
}

extern "C" rtomo_status sbdx_composite_prepare(size_t bytes, rtomo_error *err)
{
    RTOMO_CUDA_TRY(err, cudaFuncSetAttribute(
                            composite_kernel,
                            cudaFuncAttributeMaxDynamicSharedMemorySize,
                            (int)bytes));
    return RTOMO_OK;
}

static dim3 composite_grid(const sbdx_composite_params *p)
{
    return dim3(sbdx_blocks_for((size_t)p->width, TILE_W),
                sbdx_blocks_for((size_t)p->own_rows, TILE_H), 1);
}

extern "C" rtomo_status sbdx_composite_launch(const sbdx_composite_params *p,
                                              cudaStream_t stream,
                                              rtomo_error *err)
{
    if (p->own_rows < 1 || (!p->composite && !p->depth))
        return RTOMO_OK;
    composite_kernel<<<composite_grid(p), dim3(TILE_W, TILE_H),
                       sbdx_composite_smem_bytes(p->radius), stream>>>(*p);
    RTOMO_CUDA_CHECK_LAUNCH(err, "composite_kernel");
    return RTOMO_OK;
}

extern "C" void sbdx_composite_run_on_host(const sbdx_composite_params *p)
{
    if (p->own_rows < 1 || (!p->composite && !p->depth))
        return;
    void *base = malloc(sbdx_composite_smem_bytes(p->radius));
    if (!base)
        return;
    composite_smem s = composite_smem_of(base, p->radius);
    dim3 grid = composite_grid(p);
    double best_var[COMPOSITE_THREADS];
    int best_plane[COMPOSITE_THREADS];
    for (unsigned by = 0; by < grid.y; by++)
        for (unsigned bx = 0; bx < grid.x; bx++) {
            int i0 = bx * TILE_W, j0 = p->own_first + by * TILE_H;
            for (int t = 0; t < COMPOSITE_THREADS; t++) {
                best_var[t] = -INFINITY;
                best_plane[t] = RTOMO_SBDX_DEPTH_NONE;
            }
            for (int k = 0; k < p->n_planes; k++) {
                for (int t = 0; t < COMPOSITE_THREADS; t++)
                    composite_stage(*p, s, k, i0, j0, t);
                for (int t = 0; t < COMPOSITE_THREADS; t++)
                    composite_rows(*p, s, i0, t);
                for (int t = 0; t < COMPOSITE_THREADS; t++)
                    composite_fold(*p, s, k, i0, j0, t, &best_var[t],
                                   &best_plane[t]);
            }
            for (int t = 0; t < COMPOSITE_THREADS; t++)
                composite_store(*p, i0, j0, t, best_plane[t]);
        }
    free(base);
}
