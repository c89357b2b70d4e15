/*
 * sbdx_lut_gpu.cu — generates the SBDX look-up tables of every plane on the
 * GPU: the detector-centric table of each axis (the formulas of sbdx_lut.h,
 * in double precision, so the weights are bit-identical to the CPU's) and
 * from it the pixel-centric residue lists that the gathers read (layout in
 * cuda_sbdx.h), and the uniform responses that the composite
 * flat-fields with.
 */
#include "config.h"

#include <math.h>

#include "cuda_common.h"
#include "cuda_sbdx_device.h"
#include "sbdx_lut.h"

#define LUT_THREADS 128

/* Detector-centric entry of element d of an axis of n_det elements. */
SBDX_HD sbdx_gpu_dc lut_dc_entry(double ratio, int n_det, int d)
{
    double centre = (n_det - 1) / 2.0;
    double t = ratio * (d - centre);
    double offset = floor(t);
    double f = t - offset;
    sbdx_gpu_dc e;
    e.offset = (int32_t)offset;
    e.w_lo = (float)(1.0 - f);
    e.w_hi = (float)f;
    return e;
}

/* Thread idx fills one dc entry: plane idx / (Wd + Hd), then the x
 * elements followed by the y elements. */
SBDX_HD void lut_dc_thread(const sbdx_lut_params &p, int idx)
{
    int per_plane = p.x.n_det + p.y.n_det;
    if (idx >= p.n_planes * per_plane)
        return;
    int k = idx / per_plane, d = idx % per_plane;
    const sbdx_gpu_axis &a = d < p.x.n_det ? p.x : p.y;
    if (d >= p.x.n_det)
        d -= p.x.n_det;
    a.dc[(size_t)k * a.n_det + d] = lut_dc_entry(p.ratios[k], a.n_det, d);
}

/* Append tap (offset, w) of element d to its residue list: start[rho + 1]
 * is the list's fill cursor while building (see lut_lists_thread). */
SBDX_HD void lut_append(const sbdx_gpu_axis &a, int32_t *start,
                        sbdx_gpu_entry *ent, int m, int d, int offset, float w)
{
    int delta = sbdx_div_floor(offset, m);
    int rho = offset - delta * m;
    sbdx_gpu_entry e;
    e.j = d - delta * a.stride;
    e.w = w;
    ent[start[rho + 1]++] = e;
}

/* Thread idx = 2 k + axis builds the residue lists of plane k along one
 * axis by a counting sort of its 2 n_det taps.  Counts go to start[rho + 2],
 * an inclusive prefix sum turns start[rho + 1] into the first slot of list
 * rho, and filling advances it to the end of rho, which is the first slot of
 * rho + 1: afterwards list rho is [start[rho], start[rho + 1]).  Taps of
 * weight exactly 0 (w_hi when f == 0) are left out, as in the CPU tables;
 * within a list, entries keep ascending element order. */
SBDX_HD void lut_lists_thread(const sbdx_lut_params &p, int idx)
{
    if (idx >= 2 * p.n_planes)
        return;
    int k = idx / 2;
    const sbdx_gpu_axis &a = idx % 2 ? p.y : p.x;
    int m = p.shift_m;
    const sbdx_gpu_dc *dc = a.dc + (size_t)k * a.n_det;
    int32_t *start = a.start + (size_t)k * sbdx_start_pitch(m);
    sbdx_gpu_entry *ent = a.ent + (size_t)k * sbdx_entry_pitch(a.n_det);

    for (int i = 0; i < m + 2; i++)
        start[i] = 0;
    for (int d = 0; d < a.n_det; d++) {
        start[sbdx_mod_floor(dc[d].offset, m) + 2]++;
        if (dc[d].w_hi != 0.0f)
            start[sbdx_mod_floor(dc[d].offset + 1, m) + 2]++;
    }
    for (int i = 2; i < m + 2; i++)
        start[i] += start[i - 1];
    for (int d = 0; d < a.n_det; d++) {
        lut_append(a, start, ent, m, d, dc[d].offset, dc[d].w_lo);
        if (dc[d].w_hi != 0.0f)
            lut_append(a, start, ent, m, d, dc[d].offset + 1, dc[d].w_hi);
    }
}

/* Thread idx = output index i of one axis of one plane (the x indices of
 * all planes first): the uniform response, the weights of every entry that
 * reaches position origin + i from a hole inside the collimator, summed
 * exactly in fixed point and scaled by m / n_det by the CPU's expressions
 * (sbdx_lut.h), so that the responses are the CPU's bit for bit. */
SBDX_HD void lut_response_thread(const sbdx_lut_params &p, int idx)
{
    int nx = p.n_planes * p.x.n_out;
    if (idx >= nx + p.n_planes * p.y.n_out)
        return;
    const sbdx_gpu_axis &a = idx < nx ? p.x : p.y;
    if (idx >= nx)
        idx -= nx;
    int k = idx / a.n_out, i = idx % a.n_out, m = p.shift_m;
    int position = a.origin + i;
    int q = sbdx_div_floor(position, m), rho = position - q * m;
    const int32_t *start = a.start + (size_t)k * sbdx_start_pitch(m);
    const sbdx_gpu_entry *ent = a.ent + (size_t)k * sbdx_entry_pitch(a.n_det);
    int64_t sum = 0;
    for (int e = start[rho]; e < start[rho + 1]; e++) {
        /* entry.j = d - delta * stride with 0 <= d < stride. */
        int hole = q + sbdx_div_floor(ent[e].j, a.stride);
        if (hole >= 0 && hole < a.n_holes)
            sum += rtomo_sbdx_weight_fixed(ent[e].w);
    }
    a.response[(size_t)k * a.n_out + i] = rtomo_sbdx_response(sum, m, a.n_det);
}

__global__ void lut_dc_kernel(sbdx_lut_params p)
{
    lut_dc_thread(p, blockIdx.x * blockDim.x + threadIdx.x);
}

__global__ void lut_lists_kernel(sbdx_lut_params p)
{
    lut_lists_thread(p, blockIdx.x * blockDim.x + threadIdx.x);
}

__global__ void lut_response_kernel(sbdx_lut_params p)
{
    lut_response_thread(p, blockIdx.x * blockDim.x + threadIdx.x);
}

static size_t response_items(const sbdx_lut_params *p)
{
    return (size_t)p->n_planes * (p->x.n_out + p->y.n_out);
}

extern "C" rtomo_status sbdx_lut_launch(const sbdx_lut_params *p,
                                        cudaStream_t stream, rtomo_error *err)
{
    size_t dc_items = (size_t)p->n_planes * (p->x.n_det + p->y.n_det);
    lut_dc_kernel<<<sbdx_blocks_for(dc_items, LUT_THREADS), LUT_THREADS, 0,
                    stream>>>(*p);
    RTOMO_CUDA_CHECK_LAUNCH(err, "lut_dc_kernel");
    lut_lists_kernel<<<sbdx_blocks_for(2 * (size_t)p->n_planes, LUT_THREADS),
                       LUT_THREADS, 0, stream>>>(*p);
    RTOMO_CUDA_CHECK_LAUNCH(err, "lut_lists_kernel");
    lut_response_kernel<<<sbdx_blocks_for(response_items(p), LUT_THREADS),
                          LUT_THREADS, 0, stream>>>(*p);
    RTOMO_CUDA_CHECK_LAUNCH(err, "lut_response_kernel");
    return RTOMO_OK;
}

extern "C" void sbdx_lut_run_on_host(const sbdx_lut_params *p)
{
    int dc_items = p->n_planes * (p->x.n_det + p->y.n_det);
    for (int i = 0; i < dc_items; i++)
        lut_dc_thread(*p, i);
    for (int i = 0; i < 2 * p->n_planes; i++)
        lut_lists_thread(*p, i);
    for (size_t i = 0; i < response_items(p); i++)
        lut_response_thread(*p, (int)i);
}

extern "C" void sbdx_offset_range(const double *ratios, int n_planes,
                                  int n_det, int *lo, int *hi)
{
    for (int k = 0; k < n_planes; k++) {
        int first = lut_dc_entry(ratios[k], n_det, 0).offset;
        int last = lut_dc_entry(ratios[k], n_det, n_det - 1).offset + 1;
        if (k == 0 || first < *lo)
            *lo = first;
        if (k == 0 || last > *hi)
            *hi = last;
    }
}
