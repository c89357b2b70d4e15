/*
 * cuda_cone_filter.cu — FDK's weighting and ramp filtering on the GPU:
 * each row of a projection is weighted (row weights x cosine weights, the
 * same float tables as the CPU's), zero-padded to the filter length at
 * the filtered detector's column offset, transformed with one batched
 * cuFFT R2C over all rows, multiplied by the real even filter (its bins
 * 0..n/2 suffice for a real transform), transformed back (C2R) and
 * cropped into a slot.  The filter coefficients include 1/n, so the
 * unnormalised inverse comes out right, as on the CPU.
 */
#include "config.h"

#include "cuda_cone.h"

#define FILTER_THREADS 256

/* padded[j][i'] = weighted sample of column i' - off, 0 elsewhere. */
__global__ void cone_weigh_pad_kernel(const float *frame, const float *cosw,
                                      const float *roww, int det_u, int off,
                                      int length, float *padded)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    const int j = blockIdx.y;
    if (i >= length)
        return;
    const int col = i - off;
    float v = 0.0f;
    if (col >= 0 && col < det_u) {
        const size_t at = (size_t)j * det_u + col;
        v = frame[at] * roww[col] * cosw[at];
    }
    padded[(size_t)j * length + i] = v;
}

__global__ void cone_apply_filter_kernel(cufftComplex *spectrum,
                                         const float *filter, int bins)
{
    const int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= bins)
        return;
    cufftComplex *z = &spectrum[(size_t)blockIdx.y * bins + k];
    const float h = filter[k];
    z->x *= h;
    z->y *= h;
}

__global__ void cone_crop_kernel(const float *padded, int length, int width,
                                 float *out)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    const int j = blockIdx.y;
    if (i >= width)
        return;
    out[(size_t)j * width + i] = padded[(size_t)j * length + i];
}

void cuda_cone_filter_destroy(cuda_cone_dev *s)
{
    /* Teardown: nothing to report failures to. */
    if (s->have_r2c)
        (void)cufftDestroy(s->r2c);
    if (s->have_c2r)
        (void)cufftDestroy(s->c2r);
    s->have_r2c = s->have_c2r = 0;
    (void)cudaFree(s->frame);
    (void)cudaFree(s->cos_weight);
    (void)cudaFree(s->row_weights);
    (void)cudaFree(s->padded);
    (void)cudaFree(s->spectrum);
    (void)cudaFree(s->filter);
    s->frame = s->cos_weight = s->row_weights = s->padded = s->filter = NULL;
    s->spectrum = NULL;
}

static rtomo_status allocate(const rtomo_cone *c, cuda_cone_dev *s,
                             rtomo_error *err)
{
    const size_t rows = (size_t)c->geom.det_v;
    const size_t n = (size_t)c->filter_length, bins = n / 2 + 1;
    RTOMO_CUDA_TRY(err, cudaMalloc((void **)&s->frame,
                                   sizeof(float) * c->frame_len));
    RTOMO_CUDA_TRY(err, cudaMalloc((void **)&s->cos_weight,
                                   sizeof(float) * c->frame_len));
    RTOMO_CUDA_TRY(err, cudaMalloc((void **)&s->row_weights,
                                   sizeof(float) * (size_t)c->geom.det_u));
    RTOMO_CUDA_TRY(err, cudaMalloc((void **)&s->padded,
                                   sizeof(float) * rows * n));
    RTOMO_CUDA_TRY(err, cudaMalloc((void **)&s->spectrum,
                                   sizeof(cufftComplex) * rows * bins));
    RTOMO_CUDA_TRY(err, cudaMalloc((void **)&s->filter,
                                   sizeof(float) * bins));
    /* Tables made once on the host: the same floats as the CPU uses.  On
     * the plan's stream: a copy on the legacy stream would not be ordered
     * before the plan's (non-blocking) kernels. */
    RTOMO_CUDA_TRY(err, cudaMemcpyAsync(s->cos_weight, c->cos_weight,
                                        sizeof(float) * c->frame_len,
                                        cudaMemcpyHostToDevice, s->stream));
    RTOMO_CUDA_TRY(err, cudaMemcpyAsync(s->filter, c->filter,
                                        sizeof(float) * bins,
                                        cudaMemcpyHostToDevice, s->stream));
    return RTOMO_OK;
}

rtomo_status cuda_cone_filter_create(const rtomo_cone *c, cuda_cone_dev *s,
                                     rtomo_error *err)
{
    rtomo_status st = allocate(c, s, err);
    if (st != RTOMO_OK)
        return st;
    int n = c->filter_length;
    const int rows = c->geom.det_v;
    RTOMO_CUFFT_TRY(err, cufftPlanMany(&s->r2c, 1, &n, NULL, 1, n, NULL, 1,
                                       n / 2 + 1, CUFFT_R2C, rows));
    s->have_r2c = 1;
    RTOMO_CUFFT_TRY(err, cufftPlanMany(&s->c2r, 1, &n, NULL, 1, n / 2 + 1,
                                       NULL, 1, n, CUFFT_C2R, rows));
    s->have_c2r = 1;
    RTOMO_CUFFT_TRY(err, cufftSetStream(s->r2c, s->stream));
    RTOMO_CUFFT_TRY(err, cufftSetStream(s->c2r, s->stream));
    return RTOMO_OK;
}

rtomo_status cuda_cone_filter_run(const rtomo_cone *c, cuda_cone_dev *s,
                                  int slot, rtomo_error *err)
{
    const int n = c->filter_length, bins = n / 2 + 1;
    const int rows = c->geom.det_v;
    const dim3 pad_grid((n + FILTER_THREADS - 1) / FILTER_THREADS, rows);
    cone_weigh_pad_kernel<<<pad_grid, FILTER_THREADS, 0, s->stream>>>(
        s->frame, s->cos_weight, s->row_weights, c->geom.det_u, c->filt_off,
        n, s->padded);
    RTOMO_CUDA_CHECK_LAUNCH(err, "cone_weigh_pad_kernel");
    RTOMO_CUFFT_TRY(err, cufftExecR2C(s->r2c, s->padded, s->spectrum));
    const dim3 bin_grid((bins + FILTER_THREADS - 1) / FILTER_THREADS, rows);
    cone_apply_filter_kernel<<<bin_grid, FILTER_THREADS, 0, s->stream>>>(
        s->spectrum, s->filter, bins);
    RTOMO_CUDA_CHECK_LAUNCH(err, "cone_apply_filter_kernel");
    RTOMO_CUFFT_TRY(err, cufftExecC2R(s->c2r, s->spectrum, s->padded));
    const dim3 crop_grid((c->filt_u + FILTER_THREADS - 1) / FILTER_THREADS,
                         rows);
    cone_crop_kernel<<<crop_grid, FILTER_THREADS, 0, s->stream>>>(
        s->padded, n, c->filt_u, s->slots + (size_t)slot * c->filt_len);
    RTOMO_CUDA_CHECK_LAUNCH(err, "cone_crop_kernel");
    return RTOMO_OK;
}
