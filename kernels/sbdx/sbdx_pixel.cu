/*
 * sbdx_pixel.cu — the pixel-centric SBDX reconstruction: the x-pass and
 * y-pass gathers of cuda_sbdx.h with their launchers and host runners.
 *
 * x-pass.  A block stages rows_per_block frame rows (every hole a tile of
 * columns needs, converted to float) in shared memory, then loops over the
 * planes of the group: thread items are (rho, q), so neighbouring lanes
 * share rho and read one residue list (a broadcast) and neighbouring holes,
 * whose staged pitch is odd, so the lanes hit distinct banks.  Each item
 * keeps one sum per staged row in registers; the entry and its bounds test
 * are shared by the rows.  A hole outside the frame is recognised by its
 * staged index leaving [0, holes * stride), one unsigned comparison.
 *
 * y-pass.  A block owns one output row of one plane for a tile of q: its
 * residue list is uniform over the block, its T reads are coalesced (the
 * items are laid out in T's (rho, q) order), and the results are put back
 * in column order through shared memory so that plane rows are written
 * contiguously.  Flat-fielding happens in that write: one division per
 * output pixel, against hundreds of multiply-adds behind it.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "cuda_common.h"
#include "cuda_sbdx_device.h"
#include "sbdx_lut.h"

/* Largest output tile a y-pass block stages (floats). */
#define YPASS_TILE_VALUES 4096

SBDX_HD sbdx_gpu_entry load_entry(const sbdx_gpu_entry *e)
{
#ifdef __CUDA_ARCH__
    int2 v = __ldg((const int2 *)e);
    sbdx_gpu_entry r;
    r.j = v.x;
    r.w = __int_as_float(v.y);
    return r;
#else
    return *e;
#endif
}

SBDX_HD int min_int(int a, int b) { return a < b ? a : b; }
SBDX_HD int max_int(int a, int b) { return a > b ? a : b; }

/* ------------------------------------------------------------- x-pass ---- */

/* What one x-pass block covers: frame rows [row0, row0 + rows_per_block),
 * columns q in [qa, qa + qn), and the staged holes [cx_first,
 * cx_first + holes) that those columns can reach. */
struct xpass_block {
    int row0, qa, qn, cx_first, holes;
};

SBDX_HD xpass_block xpass_block_of(const sbdx_xpass_params &p, int bx, int by)
{
    xpass_block b;
    b.row0 = bx * p.rows_per_block;
    b.qa = p.q0 + by * p.q_tile;
    b.qn = min_int(p.q_tile, p.q0 + p.nq - b.qa);
    int lo = max_int(b.qa - p.delta_max, 0);
    int hi = min_int(b.qa + b.qn - 1 - p.delta_min, p.holes_x - 1);
    b.cx_first = lo;
    b.holes = max_int(hi - lo + 1, 0);
    return b;
}

/* Phase 1: stage the block's rows, hole-major with p.stride floats per
 * hole; rows past the slot's last row are zeros.  A warp copies one hole's
 * detector row (contiguous in the frame) at a time, two at once so that
 * their loads are in flight together.  nt is a multiple of 32. */
SBDX_HD void xpass_stage_segment(const sbdx_xpass_params &p,
                                 const xpass_block &b, float *smem, int seg,
                                 int lane)
{
    int rr = seg / b.holes, h = seg - rr * b.holes;
    int r = b.row0 + rr;
    float *dst = smem + (size_t)seg * p.stride;
    if (r >= p.rows) {
        for (int dx = lane; dx < p.det_w; dx += 32)
            dst[dx] = 0.0f;
        return;
    }
    int cy = r / p.det_h, dy = r - cy * p.det_h;
    size_t src = (((size_t)cy * p.holes_x + b.cx_first + h) * p.det_h + dy) *
                 p.det_w;
    for (int dx = lane; dx < p.det_w; dx += 32)
        dst[dx] = sbdx_sample(p.frame, p.dtype, src + dx);
}

SBDX_HD void xpass_stage(const sbdx_xpass_params &p, const xpass_block &b,
                         float *smem, int tid, int nt)
{
    int segs = p.rows_per_block * b.holes;
    int lane = tid % 32, warps = nt / 32;
    SBDX_UNROLL_2
    for (int seg = tid / 32; seg < segs; seg += warps)
        xpass_stage_segment(p, b, smem, seg, lane);
}

/* Phase 2: every (plane, rho, q) item of the block, for all staged rows. */
template <int RPT>
SBDX_HD void xpass_items(const sbdx_xpass_params &p, const xpass_block &b,
                         const float *smem, int tid, int nt)
{
    int items = p.shift_m * b.qn;
    int row_pitch = b.holes * p.stride;
    int rows_here = min_int(RPT, p.rows - b.row0);
    size_t ng = (size_t)p.shift_m * p.nq;
    size_t plane_pitch = (size_t)p.rows * ng;
    for (int k = 0; k < p.planes; k++) {
        const int32_t *start = p.start + (size_t)k * p.start_pitch;
        const sbdx_gpu_entry *ent = p.ent + (size_t)k * p.ent_pitch;
        float *t = p.t + k * plane_pitch + (size_t)b.row0 * ng;
        for (int it = tid; it < items; it += nt) {
            int rho = it / b.qn;
            int q = b.qa + (it - rho * b.qn);
            int base = (q - b.cx_first) * p.stride;
            int e1 = sbdx_ldg(start + rho + 1);
            float acc[RPT];
SBDX_UNROLL
            for (int rr = 0; rr < RPT; rr++)
                acc[rr] = 0.0f;
SBDX_UNROLL_4
            for (int e = sbdx_ldg(start + rho); e < e1; e++) {
                sbdx_gpu_entry en = load_entry(ent + e);
                int a = base + en.j;
                if ((unsigned)a < (unsigned)row_pitch) {
SBDX_UNROLL
                    for (int rr = 0; rr < RPT; rr++)
                        acc[rr] += en.w * smem[rr * row_pitch + a];
                }
            }
            size_t g = (size_t)rho * p.nq + (size_t)(q - p.q0);
SBDX_UNROLL
            for (int rr = 0; rr < RPT; rr++)
                if (rr < rows_here)
                    t[rr * ng + g] = acc[rr];
        }
    }
}

template <int RPT> __global__ void xpass_kernel(sbdx_xpass_params p)
{
    extern __shared__ float staged[];
    xpass_block b = xpass_block_of(p, blockIdx.x, blockIdx.y);
    xpass_stage(p, b, staged, threadIdx.x, blockDim.x);
    __syncthreads();
    xpass_items<RPT>(p, b, staged, threadIdx.x, blockDim.x);
}

extern "C" int sbdx_xpass_staged_holes(const sbdx_xpass_params *p, int q_tile)
{
    return min_int(p->holes_x, q_tile + p->delta_max - p->delta_min);
}

extern "C" size_t sbdx_xpass_smem_bytes(const sbdx_xpass_params *p)
{
    return sizeof(float) * (size_t)p->rows_per_block * p->stride *
           (size_t)sbdx_xpass_staged_holes(p, p->q_tile);
}

extern "C" rtomo_status sbdx_xpass_prepare(size_t bytes, rtomo_error *err)
{
    RTOMO_CUDA_TRY(err, cudaFuncSetAttribute(
                            xpass_kernel<1>,
                            cudaFuncAttributeMaxDynamicSharedMemorySize,
                            (int)bytes));
    RTOMO_CUDA_TRY(err, cudaFuncSetAttribute(
                            xpass_kernel<2>,
                            cudaFuncAttributeMaxDynamicSharedMemorySize,
                            (int)bytes));
    return RTOMO_OK;
}

static dim3 xpass_grid(const sbdx_xpass_params *p)
{
    return dim3(sbdx_blocks_for((size_t)p->rows, p->rows_per_block),
                sbdx_blocks_for((size_t)p->nq, p->q_tile), 1);
}

extern "C" rtomo_status sbdx_xpass_launch(const sbdx_xpass_params *p,
                                          int threads, cudaStream_t stream,
                                          rtomo_error *err)
{
    if (p->rows < 1 || p->planes < 1)
        return RTOMO_OK;
    size_t smem = sbdx_xpass_smem_bytes(p);
    if (p->rows_per_block == 2)
        xpass_kernel<2><<<xpass_grid(p), threads, smem, stream>>>(*p);
    else
        xpass_kernel<1><<<xpass_grid(p), threads, smem, stream>>>(*p);
    RTOMO_CUDA_CHECK_LAUNCH(err, "xpass_kernel");
    return RTOMO_OK;
}

extern "C" void sbdx_xpass_run_on_host(const sbdx_xpass_params *p, int threads)
{
    if (p->rows < 1 || p->planes < 1)
        return;
    float *staged = (float *)malloc(sbdx_xpass_smem_bytes(p));
    if (!staged)
        return;
    dim3 grid = xpass_grid(p);
    for (unsigned by = 0; by < grid.y; by++)
        for (unsigned bx = 0; bx < grid.x; bx++) {
            xpass_block b = xpass_block_of(*p, bx, by);
            for (int tid = 0; tid < threads; tid++)
                xpass_stage(*p, b, staged, tid, threads);
            for (int tid = 0; tid < threads; tid++) {
                if (p->rows_per_block == 2)
                    xpass_items<2>(*p, b, staged, tid, threads);
                else
                    xpass_items<1>(*p, b, staged, tid, threads);
            }
        }
    free(staged);
}

/* ------------------------------------------------------------- y-pass ---- */

/* Phase 1: the block's items (rho, q) of output row jl of plane k, in T's
 * order, each written to the tile at its column offset from m qa. */
SBDX_HD void ypass_items(const sbdx_ypass_params &p, int jl, int k, int qt,
                         float *tile, int tid, int nt)
{
    int m = p.shift_m;
    int qa = p.q0 + qt * p.q_tile;
    int qn = min_int(p.q_tile, p.q0 + p.nq - qa);
    int y = p.origin_y + p.ext_first + jl;
    int qy = sbdx_div_floor(y, m), rho_y = y - qy * m;
    int base = (qy - p.hole_first) * p.det_h;
    const int32_t *start = p.start + (size_t)k * p.start_pitch + rho_y;
    const sbdx_gpu_entry *ent = p.ent + (size_t)k * p.ent_pitch;
    int e0 = sbdx_ldg(start), e1 = sbdx_ldg(start + 1);
    size_t ng = (size_t)m * p.nq;
    const float *t = p.t + (size_t)k * p.rows * ng;

    for (int it = tid; it < m * qn; it += nt) {
        int rho = it / qn, dq = it - rho * qn;
        size_t g = (size_t)rho * p.nq + (size_t)(qa - p.q0 + dq);
        float acc = 0.0f;
        for (int e = e0; e < e1; e++) {
            sbdx_gpu_entry en = load_entry(ent + e);
            int r = base + en.j;
            if ((unsigned)r < (unsigned)p.rows)
                acc += en.w * sbdx_ldg(t + (size_t)r * ng + g);
        }
        tile[dq * m + rho] = acc * p.scale;
    }
}

/* Phase 2: the tile's columns that fall inside the output, in order,
 * flat-fielded when the parameters carry responses. */
SBDX_HD void ypass_store(const sbdx_ypass_params &p, int jl, int k, int qt,
                         const float *tile, int tid, int nt)
{
    int m = p.shift_m;
    int qa = p.q0 + qt * p.q_tile;
    int qn = min_int(p.q_tile, p.q0 + p.nq - qa);
    float *row = p.planes + ((size_t)k * p.ext_rows + jl) * p.out_w;
    int i0 = m * qa - p.origin_x;
    const float *rx = p.response_x ? p.response_x + (size_t)k * p.out_w
                                   : NULL;
    float ry = rx ? sbdx_ldg(p.response_y + (size_t)k * p.out_h +
                             p.ext_first + jl)
                  : 1.0f;
    for (int lx = tid; lx < m * qn; lx += nt) {
        int i = i0 + lx;
        if (i >= 0 && i < p.out_w)
            row[i] = rx ? rtomo_sbdx_flat_field(tile[lx], sbdx_ldg(rx + i), ry)
                        : tile[lx];
    }
}

__global__ void ypass_kernel(sbdx_ypass_params p)
{
    extern __shared__ float tile[];
    ypass_items(p, blockIdx.x, blockIdx.y, blockIdx.z, tile, threadIdx.x,
                blockDim.x);
    __syncthreads();
    ypass_store(p, blockIdx.x, blockIdx.y, blockIdx.z, tile, threadIdx.x,
                blockDim.x);
}

extern "C" int sbdx_ypass_q_tile(int shift_m, int nq)
{
    int q_tile = YPASS_TILE_VALUES / shift_m;
    return q_tile < 1 ? 1 : q_tile > nq ? nq : q_tile;
}

static dim3 ypass_grid(const sbdx_ypass_params *p)
{
    return dim3((unsigned)p->ext_rows, (unsigned)p->planes_n,
                sbdx_blocks_for((size_t)p->nq, p->q_tile));
}

extern "C" rtomo_status sbdx_ypass_launch(const sbdx_ypass_params *p,
                                          int threads, cudaStream_t stream,
                                          rtomo_error *err)
{
    if (p->ext_rows < 1 || p->planes_n < 1)
        return RTOMO_OK;
    size_t smem = sizeof(float) * (size_t)p->shift_m * p->q_tile;
    ypass_kernel<<<ypass_grid(p), threads, smem, stream>>>(*p);
    RTOMO_CUDA_CHECK_LAUNCH(err, "ypass_kernel");
    return RTOMO_OK;
}

extern "C" void sbdx_ypass_run_on_host(const sbdx_ypass_params *p, int threads)
{
    if (p->ext_rows < 1 || p->planes_n < 1)
        return;
    float *tile = (float *)malloc(sizeof(float) * (size_t)p->shift_m * p->q_tile);
    if (!tile)
        return;
    dim3 grid = ypass_grid(p);
    for (unsigned z = 0; z < grid.z; z++)
        for (unsigned y = 0; y < grid.y; y++)
            for (unsigned x = 0; x < grid.x; x++) {
                for (int tid = 0; tid < threads; tid++)
                    ypass_items(*p, x, y, z, tile, tid, threads);
                for (int tid = 0; tid < threads; tid++)
                    ypass_store(*p, x, y, z, tile, tid, threads);
            }
    free(tile);
}
