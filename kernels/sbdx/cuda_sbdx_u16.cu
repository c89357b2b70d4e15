/*
 * cuda_sbdx_u16.cu — converts reconstructed SBDX planes to the 16-bit output
 * of rtomo_sbdx_output on the GPU, so that only half the bytes cross PCIe.
 * The formula is the CPU backend's, in float: clamp(roundf((v - offset) *
 * scale)) into [0, 65535], NaN to 0; given the same planes it gives the same
 * codes bit for bit.
 */
#include "config.h"

#include "cuda_common.h"
#include "cuda_sbdx_device.h"

#define U16_THREADS 256

SBDX_HD uint16_t u16_code(float v, float offset, float scale)
{
    float t = roundf((v - offset) * scale);
    if (!(t > 0.0f))
        return 0;
    return t >= 65535.0f ? (uint16_t)65535 : (uint16_t)t;
}

SBDX_HD void u16_thread(const sbdx_u16_params &p, size_t idx)
{
    size_t per_plane = (size_t)p.rows * p.width;
    if (idx >= per_plane * p.n_planes)
        return;
    size_t k = idx / per_plane, rest = idx - k * per_plane;
    size_t src = (k * p.ext_rows + p.row_offset) * p.width + rest;
    p.out[idx] = u16_code(p.planes[src], p.offset, p.scale);
}

__global__ void u16_kernel(sbdx_u16_params p)
{
    u16_thread(p, (size_t)blockIdx.x * blockDim.x + threadIdx.x);
}

static size_t u16_count(const sbdx_u16_params *p)
{
    return (size_t)p->n_planes * p->rows * p->width;
}

extern "C" rtomo_status sbdx_u16_launch(const sbdx_u16_params *p,
                                        cudaStream_t stream, rtomo_error *err)
{
    size_t n = u16_count(p);
    if (n == 0)
        return RTOMO_OK;
    u16_kernel<<<sbdx_blocks_for(n, U16_THREADS), U16_THREADS, 0, stream>>>(*p);
    RTOMO_CUDA_CHECK_LAUNCH(err, "u16_kernel");
    return RTOMO_OK;
}

extern "C" void sbdx_u16_run_on_host(const sbdx_u16_params *p)
{
    size_t n = u16_count(p);
    for (size_t i = 0; i < n; i++)
        u16_thread(*p, i);
}
