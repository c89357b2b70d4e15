/*
 * bp_standard.cu — the standard texture back-projector: one thread per
 * output pixel looping over all projections, the texture unit doing the
 * interpolation.  It is the baseline the other families are measured
 * against (and the simplest statement of what they all compute).
 *
 * The per-projection constants are staged through shared memory 256 at a
 * time, so any number of projections works (no constant-memory limit).
 */
#include "config.h"

#include "cuda_fbp_device.h"

#define STANDARD_EDGE 16    /* 16 x 16 threads, one pixel each */

template <int S>
__global__ void __launch_bounds__(CUDA_FBP_BLOCK_THREADS)
standard_kernel(const cuda_fbp_launch l)
{
    typedef typename slice_vec<S>::type V;
    __shared__ float4 consts[CUDA_FBP_BLOCK_THREADS];
    const int t = threadIdx.y * STANDARD_EDGE + threadIdx.x;
    const int g = blockIdx.z;
    const int x0 = blockIdx.x * STANDARD_EDGE, y0 = blockIdx.y * STANDARD_EDGE;
    const float fx0 = (float)(l.roi_x + x0) - l.center;
    const float fy0 = (float)(l.roi_y + y0) - l.center;
    const float lx = (float)threadIdx.x, ly = (float)threadIdx.y;
    const cudaTextureObject_t tex = l.tex[g];
    /* The circular field of view: blocks wholly outside leave at once,
     * pixels outside skip their sums (store_pixel writes their 0). */
    if (fov_skip_tile<S>(l, g, x0, y0, STANDARD_EDGE))
        return;
    const bool inside = fov_inside(l, x0 + threadIdx.x, y0 + threadIdx.y);

    V acc = vzero(V());
    for (int p0 = 0; p0 < l.n_proj; p0 += CUDA_FBP_BLOCK_THREADS) {
        const int n = min(CUDA_FBP_BLOCK_THREADS, l.n_proj - p0);
        __syncthreads();
        if (t < n)  /* +0.5: texel i covers coordinates [i, i+1) */
            consts[t] = tile_constants(l.proj, p0 + t, fx0, fy0, 0.5f);
        __syncthreads();
        if (!inside)
            continue;       /* still at every barrier of the loop */
#pragma unroll 4
        for (int i = 0; i < n; i++) {
            const float4 k = consts[i];
            const float s = k.z + lx * k.x - ly * k.y;
            vadd(acc, fetch<S>(tex, s, (float)(p0 + i) + 0.5f));
        }
    }
    store_pixel(l, g, x0 + threadIdx.x, y0 + threadIdx.y, acc,
                1.f / half_pack_scale(l.absmax, g));
}

extern "C" rtomo_status cuda_fbp_bp_standard(const cuda_fbp_launch *l,
                                             cudaStream_t stream,
                                             rtomo_error *err)
{
    const dim3 block(STANDARD_EDGE, STANDARD_EDGE);
    const dim3 grid((l->roi_w + STANDARD_EDGE - 1) / STANDARD_EDGE,
                    (l->roi_h + STANDARD_EDGE - 1) / STANDARD_EDGE,
                    l->n_groups);
    switch (l->cfg.format.slices) {
    case 1: standard_kernel<1><<<grid, block, 0, stream>>>(*l); break;
    case 2: standard_kernel<2><<<grid, block, 0, stream>>>(*l); break;
    case 4: standard_kernel<4><<<grid, block, 0, stream>>>(*l); break;
    default:
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "standard back-projector: %d slices per pass "
                               "is not 1, 2 or 4", l->cfg.format.slices);
    }
    RTOMO_CUDA_CHECK_LAUNCH(err, "standard back-projection");
    return RTOMO_OK;
}
