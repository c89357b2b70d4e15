/*
 * cuda_fbp_half.cu — half acquisition on the GPU: the bin weights
 * (fbp_half.h) multiply the packed line integrals of a bank before the
 * forward transform.
 *
 * A kernel of its own, launched after the packing step and the ring sums,
 * rather than a factor inside pack_rows_kernel: phase retrieval packs
 * through its own kernel (cuda_fbp_phase.cu), and the ring sums want the
 * unweighted line integrals, so this one place serves every path.  It
 * costs one pass over the packed rows' first det_width bins, for half
 * acquisition plans only.  The weights are computed where they are used
 * from the few numbers that define them (passed by value), in double as
 * on the CPU, so no per-slot device array is needed.
 */
#include "config.h"

#include <math.h>

#include "cuda_fbp_half.h"
#include "fbp_half.h"

#define HALF_THREADS 256

__device__ __forceinline__ float bin_weight(const rtomo_fbp_half_weights w,
                                            int s)
{
    if (s < w.first || s > w.last)
        return 0.f;
    const double x = s - w.axis;
    if (fabs(x) > w.overlap)
        return 2.f;
    return (float)(1.0 + w.sign * sin(M_PI * x / (2.0 * w.overlap)));
}

/* Row y of the packed spectrum (frames x pairs rows of `length`), bins
 * below `width`: both packed rows times the weight of their bin. */
__global__ void weigh_bins_kernel(cufftComplex *spectrum, int width,
                                  int length, rtomo_fbp_half_weights w)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= width)
        return;
    cufftComplex *c = &spectrum[(size_t)blockIdx.y * length + i];
    const float f = bin_weight(w, i);
    c->x *= f;
    c->y *= f;
}

extern "C" rtomo_status cuda_fbp_half_weigh(cuda_fbp_slot *slot,
                                            const rtomo_fbp *plan, int frames,
                                            rtomo_error *err)
{
    rtomo_fbp_half_weights w;
    if (!rtomo_fbp_half_weights_of(plan, &w))
        return RTOMO_OK;
    const cuda_fbp_filter_state *f = &slot->filter;
    const int width = plan->geom.det_width;
    const dim3 grid((width + HALF_THREADS - 1) / HALF_THREADS,
                    f->pairs * frames);
    weigh_bins_kernel<<<grid, HALF_THREADS, 0, slot->compute>>>(
        f->spectrum, width, f->length, w);
    RTOMO_CUDA_CHECK_LAUNCH(err, "half acquisition bin weights");
    return RTOMO_OK;
}
