/*
 * bp_alu.cu — the ALU back-projector: sinogram bins cached in shared memory
 * per group of projections, interpolation on the cores, several pixels per
 * thread (the block body is cuda_fbp_alu_block.h, shared with the hybrid
 * kernel).  This family leaves the texture units idle, which is what makes
 * the hybrid kernel worth having.
 */
#include "config.h"

#include "cuda_fbp_alu_block.h"

/* stored_q16: the fraction of blocks, in 1/65536, whose cache holds the
 * texels as stored (cuda_fbp_alu_block.h), by block number: blocks go to
 * the SMs in that order, so each SM gets about that mix. */
template <int S, bool HALF, int N, bool LINEAR>
__global__ void __launch_bounds__(CUDA_FBP_BLOCK_THREADS,
                                  (alu_occupancy<S, N>::BLOCKS))
alu_kernel(const cuda_fbp_launch l, unsigned stored_q16)
{
    constexpr bool CAN_STORE = HALF && !LINEAR;
    typedef alu_block<S, HALF, N, LINEAR> block;
    typedef alu_block<S, HALF, N, LINEAR, CAN_STORE> stored;
    __shared__ __align__(16) char smem[block::SMEM_BYTES];
    if (fov_skip_tile<S>(l, blockIdx.z, blockIdx.x * N, blockIdx.y * N, N))
        return;     /* outside the field of view (cuda_fbp_device.h) */
    const unsigned long long m =
        blockIdx.x + (unsigned long long)gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    if (CAN_STORE && alu_ticket_stored(m, stored_q16))
        stored::run(l, smem, blockIdx.z, blockIdx.x * N, blockIdx.y * N);
    else
        block::run(l, smem, blockIdx.z, blockIdx.x * N, blockIdx.y * N);
}

template <int S, bool HALF, int N>
static void launch_interp(const cuda_fbp_launch *l, dim3 grid, unsigned stored,
                          cudaStream_t s)
{
    if (l->interp == RTOMO_INTERP_LINEAR)
        alu_kernel<S, HALF, N, true><<<grid, CUDA_FBP_BLOCK_THREADS, 0, s>>>(*l, stored);
    else
        alu_kernel<S, HALF, N, false><<<grid, CUDA_FBP_BLOCK_THREADS, 0, s>>>(*l, stored);
}

template <int S, bool HALF>
static void launch_tile(const cuda_fbp_launch *l, unsigned stored, cudaStream_t s)
{
    const int n = cuda_fbp_config_tile(&l->cfg);
    const dim3 grid((l->roi_w + n - 1) / n, (l->roi_h + n - 1) / n, l->n_groups);
    /* 64-pixel tiles would hold 64 accumulators per thread at 4 slices:
     * cuda_fbp_config_tile() never asks for them. */
    if constexpr (S < 4) {
        if (n == 64) {
            launch_interp<S, HALF, 64>(l, grid, stored, s);
            return;
        }
    }
    launch_interp<S, HALF, 32>(l, grid, stored, s);
}

extern "C" rtomo_status cuda_fbp_bp_alu(const cuda_fbp_launch *l,
                                        cudaStream_t stream, rtomo_error *err)
{
    const unsigned stored = alu_stored_share(l);
    const bool half = l->cfg.format.precision == RTOMO_PRECISION_HALF;
    switch (l->cfg.format.slices) {
    case 1: half ? launch_tile<1, true>(l, stored, stream) : launch_tile<1, false>(l, stored, stream); break;
    case 2: half ? launch_tile<2, true>(l, stored, stream) : launch_tile<2, false>(l, stored, stream); break;
    case 4: half ? launch_tile<4, true>(l, stored, stream) : launch_tile<4, false>(l, stored, stream); break;
    default:
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "ALU back-projector: %d slices per pass is not "
                               "1, 2 or 4", l->cfg.format.slices);
    }
    RTOMO_CUDA_CHECK_LAUNCH(err, "ALU back-projection");
    return RTOMO_OK;
}
