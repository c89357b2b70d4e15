/*
 * sbdx_detector.cu — the detector-centric SBDX reconstruction (the paper's
 * scatter formulation): one thread per sample of the slot's hole rows adds
 * its bilinear deposits to every plane with atomic adds.  It is the
 * cross-check of the pixel-centric gathers and the baseline of the
 * benchmark, not the fast path: 4 atomics per sample and plane.  Planes
 * are flat-fielded by a second kernel, as no thread knows when a pixel's
 * last deposit has landed.
 */
#include "config.h"

#include <string.h>

#include "cuda_common.h"
#include "cuda_sbdx_device.h"
#include "sbdx_lut.h"

#define SCATTER_THREADS 256

SBDX_HD void scatter_deposit(const sbdx_scatter_params &p, float *plane, int x,
                             int y, float value)
{
    if (x >= 0 && x < p.out_w && y >= 0 && y < p.ext_rows)
        sbdx_atomic_add(plane + (size_t)y * p.out_w + x, value);
}

/* Sample idx (frame order within the slot: hole row, hole column, detector
 * row, detector column) into all planes.  Deposits outside the slot's rows
 * or the output are dropped, as in the CPU scatter; zero weights are
 * skipped. */
SBDX_HD void scatter_thread(const sbdx_scatter_params &p, size_t idx)
{
    size_t n = (size_t)p.hole_rows * p.holes_x * p.det_h * p.det_w;
    if (idx >= n)
        return;
    int dx = (int)(idx % p.det_w);
    size_t rest = idx / p.det_w;
    int dy = (int)(rest % p.det_h);
    rest /= p.det_h;
    int cx = (int)(rest % p.holes_x);
    int cy = p.hole_first + (int)(rest / p.holes_x);

    float v = sbdx_sample(p.frame, p.dtype, idx) * p.scale;
    int x0 = p.shift_m * cx - p.origin_x;
    int y0 = p.shift_m * cy - p.origin_y - p.ext_first;
    size_t plane_size = (size_t)p.ext_rows * p.out_w;
    for (int k = 0; k < p.n_planes; k++) {
        sbdx_gpu_dc ex = p.dc_x[(size_t)k * p.det_w + dx];
        sbdx_gpu_dc ey = p.dc_y[(size_t)k * p.det_h + dy];
        float *plane = p.planes + plane_size * k;
        int x = x0 + ex.offset, y = y0 + ey.offset;
        scatter_deposit(p, plane, x, y, v * (ex.w_lo * ey.w_lo));
        if (ex.w_hi != 0.0f)
            scatter_deposit(p, plane, x + 1, y, v * (ex.w_hi * ey.w_lo));
        if (ey.w_hi != 0.0f) {
            scatter_deposit(p, plane, x, y + 1, v * (ex.w_lo * ey.w_hi));
            if (ex.w_hi != 0.0f)
                scatter_deposit(p, plane, x + 1, y + 1,
                                v * (ex.w_hi * ey.w_hi));
        }
    }
}

__global__ void scatter_kernel(sbdx_scatter_params p)
{
    scatter_thread(p, (size_t)blockIdx.x * blockDim.x + threadIdx.x);
}

/* Pixel idx of the planes ([n_planes][ext_rows][out_w]) flat-fielded by
 * its plane's responses. */
SBDX_HD void flat_field_thread(const sbdx_scatter_params &p, size_t idx)
{
    size_t plane_size = (size_t)p.ext_rows * p.out_w;
    if (idx >= plane_size * p.n_planes)
        return;
    int k = (int)(idx / plane_size);
    size_t in_plane = idx - plane_size * k;
    int row = (int)(in_plane / p.out_w), col = (int)(in_plane % p.out_w);
    p.planes[idx] = rtomo_sbdx_flat_field(
        p.planes[idx], sbdx_ldg(p.response_x + (size_t)k * p.out_w + col),
        sbdx_ldg(p.response_y + (size_t)k * p.out_h + p.ext_first + row));
}

__global__ void flat_field_kernel(sbdx_scatter_params p)
{
    flat_field_thread(p, (size_t)blockIdx.x * blockDim.x + threadIdx.x);
}

static size_t plane_pixels(const sbdx_scatter_params *p)
{
    return (size_t)p->n_planes * p->ext_rows * p->out_w;
}

static size_t sample_count(const sbdx_scatter_params *p)
{
    return (size_t)p->hole_rows * p->holes_x * p->det_h * p->det_w;
}

extern "C" rtomo_status sbdx_scatter_launch(const sbdx_scatter_params *p,
                                            cudaStream_t stream,
                                            rtomo_error *err)
{
    RTOMO_CUDA_TRY(err, cudaMemsetAsync(p->planes, 0,
                                        sizeof(float) * plane_pixels(p),
                                        stream));
    size_t n = sample_count(p);
    if (n > 0) {
        scatter_kernel<<<sbdx_blocks_for(n, SCATTER_THREADS), SCATTER_THREADS,
                         0, stream>>>(*p);
        RTOMO_CUDA_CHECK_LAUNCH(err, "scatter_kernel");
    }
    if (p->response_x && plane_pixels(p) > 0) {
        flat_field_kernel<<<sbdx_blocks_for(plane_pixels(p), SCATTER_THREADS),
                            SCATTER_THREADS, 0, stream>>>(*p);
        RTOMO_CUDA_CHECK_LAUNCH(err, "flat_field_kernel");
    }
    return RTOMO_OK;
}

extern "C" void sbdx_scatter_run_on_host(const sbdx_scatter_params *p)
{
    memset(p->planes, 0, sizeof(float) * plane_pixels(p));
    size_t n = sample_count(p);
    for (size_t i = 0; i < n; i++)
        scatter_thread(*p, i);
    if (p->response_x)
        for (size_t i = 0; i < plane_pixels(p); i++)
            flat_field_thread(*p, i);
}
