/*
 * cuda_iter_ray.cu — the unmatched ray-driven forward projector on the GPU,
 * for measurements only (rtomo_iter_project_ray; iter_internal.h defines
 * it): the pair one would write first, so that the price of the matched
 * pair shows beside it.  One thread per detector bin of one projection
 * walks its ray at unit steps and sums the texture unit's bilinear samples
 * (8-bit interpolation weights: not the CPU's values to float rounding,
 * about 1e-3 apart).  Each slice goes through one 2-D cudaArray in turn.
 */
#include "config.h"

#include "cuda_common.h"
#include "cuda_iter.h"

#define RAY_THREADS 128

__global__ void ray_project_kernel(cudaTextureObject_t tex,
                                   const iter_sf_proj *proj, int size,
                                   int width, float *sino)
{
    const int j = blockIdx.x * RAY_THREADS + threadIdx.x;
    const int p = blockIdx.y;
    if (j >= width)
        return;
    const iter_sf_proj q = proj[p];
    const float c = 0.5f * (float)(size - 1);
    float x0, y0;
    iter_ray_centre(&q, j, c, &x0, &y0);
    /* Texel centres lie at i + 0.5 in unnormalised coordinates. */
    x0 += 0.5f;
    y0 += 0.5f;
    const int half = iter_ray_half(size);
    float sum = 0.0f;
    for (int t = -half; t <= half; t++)
        sum += tex2D<float>(tex, x0 + (float)t * q.sin_a,
                            y0 + (float)t * q.cos_a);
    sino[(size_t)p * (size_t)width + (size_t)j] = sum;
}

/* A size x size float array and its texture: bilinear, 0 outside. */
static rtomo_status make_texture(int size, cudaArray_t *array,
                                 cudaTextureObject_t *tex, rtomo_error *err)
{
    cudaChannelFormatDesc f = cudaCreateChannelDesc<float>();
    RTOMO_CUDA_TRY(err, cudaMallocArray(array, &f, (size_t)size,
                                        (size_t)size));
    cudaResourceDesc res = {};
    res.resType = cudaResourceTypeArray;
    res.res.array.array = *array;
    cudaTextureDesc td = {};
    td.addressMode[0] = td.addressMode[1] = cudaAddressModeBorder;
    td.filterMode = cudaFilterModeLinear;
    td.readMode = cudaReadModeElementType;
    td.normalizedCoords = 0;
    RTOMO_CUDA_TRY(err, cudaCreateTextureObject(tex, &res, &td, NULL));
    return RTOMO_OK;
}

extern "C" rtomo_status cuda_iter_ray_project(const cuda_iter_launch *l,
                                              const float *images, int n,
                                              float *sinograms,
                                              cudaStream_t stream,
                                              rtomo_error *err)
{
    cudaArray_t array = NULL;
    cudaTextureObject_t tex = 0;
    rtomo_status st = make_texture(l->size, &array, &tex, err);
    const size_t row = sizeof(float) * (size_t)l->size;
    const dim3 grid((unsigned)((l->width + RAY_THREADS - 1) / RAY_THREADS),
                    (unsigned)l->n_proj);
    for (int i = 0; st == RTOMO_OK && i < n; i++) {
        const float *img = images + (size_t)i * (size_t)l->size * l->size;
        cudaError_t e = cudaMemcpy2DToArrayAsync(
            array, 0, 0, img, row, row, (size_t)l->size,
            cudaMemcpyDeviceToDevice, stream);
        if (e != cudaSuccess) {
            st = rtomo_set_error(err, RTOMO_E_BACKEND, "iterative: copy to "
                                 "the ray projector's texture: %s",
                                 cudaGetErrorString(e));
            break;
        }
        ray_project_kernel<<<grid, RAY_THREADS, 0, stream>>>(
            tex, l->proj, l->size, l->width,
            sinograms + (size_t)i * (size_t)l->n_proj * l->width);
        e = cudaGetLastError();
        if (e != cudaSuccess)
            st = rtomo_set_error(err, RTOMO_E_BACKEND, "iterative: ray "
                                 "projector launch: %s", cudaGetErrorString(e));
    }
    /* The array is read until the last kernel ends. */
    cudaError_t e = cudaStreamSynchronize(stream);
    if (st == RTOMO_OK && e != cudaSuccess)
        st = rtomo_set_error(err, RTOMO_E_BACKEND, "iterative: ray "
                             "projector: %s", cudaGetErrorString(e));
    if (tex && cudaDestroyTextureObject(tex) != cudaSuccess && st == RTOMO_OK)
        st = rtomo_set_error(err, RTOMO_E_BACKEND, "iterative: cannot "
                             "destroy the ray projector's texture");
    if (array && cudaFreeArray(array) != cudaSuccess && st == RTOMO_OK)
        st = rtomo_set_error(err, RTOMO_E_BACKEND, "iterative: cannot free "
                             "the ray projector's array");
    return st;
}
