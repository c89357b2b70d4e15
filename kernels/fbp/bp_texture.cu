/*
 * bp_texture.cu — the optimized texture back-projector (Algorithm 1 of
 * Chilingaryan et al., SBAC-PAD 2018).
 *
 * A block of 256 threads owns 16x16 pixels.  The low 4 bits of the thread
 * number walk a 4x4 square along a Z-order curve (so that the 4 and 16
 * neighbouring threads the texture unit serves together read neighbouring
 * bins), the next 2 bits pick one of 4 squares along x, and the top 2 bits
 * pick one of 4 interleaved projection subsets: every thread adds the
 * contributions of a quarter of the projections to 4 pixels (one per row of
 * squares), reusing each projection's constants 4 times.  All threads of a
 * warp share the projection, so constant reads are broadcasts.  The 4
 * partial sums of a pixel are then combined with a shuffle reduction over
 * groups of 4 lanes and the tile leaves through shared memory in row order,
 * so that the global stores are coalesced.
 */
#include "config.h"

#include "cuda_fbp_device.h"

#define TILE 16                 /* pixels per block edge */
#define SUBSETS 4               /* projection subsets per block */

template <int S>
__global__ void __launch_bounds__(CUDA_FBP_BLOCK_THREADS, 4)
texture_kernel(const cuda_fbp_launch l)
{
    typedef typename slice_vec<S>::type V;
    __shared__ float4 consts[CUDA_FBP_BLOCK_THREADS];
    __shared__ V partial[SUBSETS][64];
    __shared__ V tile[TILE * TILE];

    const int t = threadIdx.x;
    const int z = t & 15, square = (t >> 4) & 3, subset = t >> 6;
    const int lx = 4 * square + zorder_x(z), ly = zorder_y(z);
    const int g = blockIdx.z;
    const int x0 = blockIdx.x * TILE, y0 = blockIdx.y * TILE;
    const float fx0 = (float)(l.roi_x + x0) - l.center;
    const float fy0 = (float)(l.roi_y + y0) - l.center;
    const cudaTextureObject_t tex = l.tex[g];
    /* Blocks wholly outside the circular field of view leave at once; the
     * pixels of the others are zeroed at their store (the shuffles need
     * every thread). */
    if (fov_skip_tile<S>(l, g, x0, y0, TILE))
        return;

    V acc[4];
#pragma unroll
    for (int q = 0; q < 4; q++)
        acc[q] = vzero(V());

    for (int p0 = 0; p0 < l.n_proj; p0 += CUDA_FBP_BLOCK_THREADS) {
        const int n = min(CUDA_FBP_BLOCK_THREADS, l.n_proj - p0);
        __syncthreads();
        if (t < n) {
            float4 k = tile_constants(l.proj, p0 + t, fx0, fy0, 0.5f);
            k.w = 4.f * k.y;        /* bin step between the 4 rows */
            consts[t] = k;
        }
        __syncthreads();
#pragma unroll 2
        for (int i = subset; i < n; i += SUBSETS) {
            const float4 k = consts[i];
            float h = k.z + (float)lx * k.x - (float)ly * k.y;
            const float y = (float)(p0 + i) + 0.5f;
#pragma unroll
            for (int q = 0; q < 4; q++) {
                vadd(acc[q], fetch<S>(tex, h, y));
                h -= k.w;
            }
        }
    }

    /* Row q of squares: gather the 4 subsets' sums of its 64 pixels so that
     * 4 consecutive lanes hold one pixel's parts, reduce them by shuffles
     * and place the result at its row-major position in the tile. */
    const int pixel = t >> 2, part = t & 3;
    for (int q = 0; q < 4; q++) {
        partial[subset][square * 16 + z] = acc[q];
        __syncthreads();
        V r = partial[part][pixel];
        vadd(r, vshfl_xor(r, 1));
        vadd(r, vshfl_xor(r, 2));
        if (part == 0) {
            const int pz = pixel & 15, psq = pixel >> 4;
            tile[(4 * q + zorder_y(pz)) * TILE + 4 * psq + zorder_x(pz)] = r;
        }
        __syncthreads();
    }
    store_pixel(l, g, x0 + (t % TILE), y0 + t / TILE, tile[t],
                1.f / half_pack_scale(l.absmax, g));
}

extern "C" rtomo_status cuda_fbp_bp_texture(const cuda_fbp_launch *l,
                                            cudaStream_t stream,
                                            rtomo_error *err)
{
    const dim3 grid((l->roi_w + TILE - 1) / TILE, (l->roi_h + TILE - 1) / TILE,
                    l->n_groups);
    const int threads = CUDA_FBP_BLOCK_THREADS;
    switch (l->cfg.format.slices) {
    case 1: texture_kernel<1><<<grid, threads, 0, stream>>>(*l); break;
    case 2: texture_kernel<2><<<grid, threads, 0, stream>>>(*l); break;
    case 4: texture_kernel<4><<<grid, threads, 0, stream>>>(*l); break;
    default:
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "texture back-projector: %d slices per pass "
                               "is not 1, 2 or 4", l->cfg.format.slices);
    }
    RTOMO_CUDA_CHECK_LAUNCH(err, "texture back-projection");
    return RTOMO_OK;
}
