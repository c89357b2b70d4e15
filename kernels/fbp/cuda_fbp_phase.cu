/*
 * cuda_fbp_phase.cu — single-distance phase retrieval on the GPU, the
 * CUDA counterpart of cpu_fbp_phase.c (same padded array, same clamps,
 * same coefficients from fbp_phase.h).
 *
 * With phase retrieval a staged frame holds the phase rows (kept rows plus
 * the filter's margin, in detector order) instead of the kept rows in
 * staged order, and every slot uploads all of them: the deal
 * (fbp_partition.h) spreads each slot's groups of 4 rows over the whole
 * kept range, so every slot needs nearly every phase row anyway, and
 * splitting one 2-D transform over devices would need exchanges between
 * them.  Each slot therefore filters the whole frame region (redundant
 * across slots; the back-projection, the dominant cost, still splits) and
 * keeps only its own rows.
 *
 * Per bank, on the slot's compute stream: pad_kernel turns the raw
 * samples into clamped intensity ratios in the padded array (edges
 * repeated); one batched in-place R2C 2-D cuFFT over the bank's frames;
 * multiply_kernel applies the Paganin coefficient; the C2R inverse;
 * pack_kernel takes -log of the slot's rows and packs them, two rows per
 * complex line, into the ramp filter's spectrum exactly as
 * cuda_fbp_filter.cu's own packing does.  The bank's frames are
 * transformed as one batch: banks are sized (cuda_fbp_bank_frames) to
 * about CUDA_FBP_BANK_PIXELS padded samples, so a 2048 x 2048 frame is a
 * batch of one (a padded array of ~20-70 MB) while small frames share
 * their launches.  The two plans share one work area.
 */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_fbp.h"

#define PHASE_THREADS 256

struct cuda_fbp_phase_state {
    int frames;                 /* transforms per batch */
    float *array;               /* frames x ny x 2 nh floats */
    float *dark, *flat;         /* phase rows x det_width */
    int *rows;                  /* slot-local row -> row of the array */
    void *work;                 /* cuFFT work area of both plans */
    cufftHandle r2c, c2r;
    int have_r2c, have_c2r;
};

/* Floats of one frame's padded array. */
static size_t array_floats(const rtomo_fbp_phase_plan *ph)
{
    return (size_t)ph->ny * 2 * (size_t)ph->nh;
}

/* ------------------------------------------------------------ kernels ---- */

/* The flat-field ratio (the sample without a flat field), clamped as in
 * cpu_fbp_phase.c. */
__device__ __forceinline__ float intensity(float raw, const float *dark,
                                           const float *flat, size_t at)
{
    float ratio = raw;
    if (flat) {
        const float open = flat[at] - dark[at];
        ratio = open > 0.f ? (raw - dark[at]) / open : RTOMO_PHASE_MIN_RATIO;
    }
    /* fmaxf returns the number when the other is NaN. */
    return fminf(fmaxf(ratio, RTOMO_PHASE_MIN_RATIO), RTOMO_PHASE_MAX_RATIO);
}

/* Frame z, padded row y (blockIdx.y), column x: the nearest phase
 * sample's intensity. */
template <typename T>
__global__ void pad_kernel(const T *raw, const float *dark, const float *flat,
                           int rows, int width, int nx, int stride,
                           int pad_top, int pad_left, float *array,
                           size_t frame_floats)
{
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y, z = blockIdx.z;
    if (x >= nx)
        return;
    const int r = min(max(y - pad_top, 0), rows - 1);
    const int c = min(max(x - pad_left, 0), width - 1);
    const size_t at = (size_t)r * width + c;
    const float v = (float)raw[(size_t)z * rows * width + at];
    array[(size_t)z * frame_floats + (size_t)y * stride + x] =
        intensity(v, dark, flat, at);
}

/* Spectrum row ky (blockIdx.y) of frame z times the coefficient, computed
 * in double as the CPU does (rtomo_fbp_phase_coefficient). */
__global__ void multiply_kernel(cufftComplex *spectrum, int ny, int nh,
                                double cy, double cx, double scale,
                                size_t frame_values)
{
    const int kx = blockIdx.x * blockDim.x + threadIdx.x;
    const int ky = blockIdx.y, z = blockIdx.z;
    if (kx >= nh)
        return;
    const double y = ky < (ny + 1) / 2 ? ky : ky - ny;
    const float w = (float)(scale / (1.0 + cy * y * y + cx * (double)kx * kx));
    cufftComplex *c = &spectrum[(size_t)z * frame_values + (size_t)ky * nh + kx];
    c->x *= w;
    c->y *= w;
}

/* As pack_rows_kernel (cuda_fbp_filter.cu): spectrum[z][k][i] = slot rows
 * 2k and 2k+1 at bin i, here -log of the filtered intensities. */
__global__ void pack_kernel(const float *array, size_t frame_floats,
                            int stride, int pad_left, const int *row_of,
                            int rows, int width, int length,
                            cufftComplex *spectrum)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    const int k = blockIdx.y, z = blockIdx.z;
    if (i >= length)
        return;
    float2 v = make_float2(0.f, 0.f);
    if (i < width) {
        const float *frame = array + (size_t)z * frame_floats + pad_left + i;
        v.x = -logf(fmaxf(frame[(size_t)row_of[2 * k] * stride],
                          RTOMO_PHASE_MIN_RATIO));
        if (2 * k + 1 < rows)
            v.y = -logf(fmaxf(frame[(size_t)row_of[2 * k + 1] * stride],
                              RTOMO_PHASE_MIN_RATIO));
    }
    spectrum[((size_t)z * gridDim.y + k) * length + i] = v;
}

/* -------------------------------------------------------------- state ---- */

extern "C" size_t cuda_fbp_phase_bytes(const rtomo_fbp *plan, int frames)
{
    const rtomo_fbp_phase_plan *ph = &plan->phase;
    if (!ph->on)
        return 0;
    /* The array, a work area of about its size, dark and flat. */
    return 2 * (size_t)frames * array_floats(ph) * sizeof(float) +
           2 * (size_t)ph->row_count * (size_t)plan->geom.det_width * sizeof(float);
}

/* Batched in-place 2-D plans without their own work areas. */
static rtomo_status make_plans(cuda_fbp_phase_state *p,
                               const rtomo_fbp_phase_plan *ph, cudaStream_t s,
                               rtomo_error *err)
{
    int n[2] = {ph->ny, ph->nx};
    int real_embed[2] = {ph->ny, 2 * ph->nh};
    int complex_embed[2] = {ph->ny, ph->nh};
    const int real_dist = ph->ny * 2 * ph->nh, complex_dist = ph->ny * ph->nh;
    size_t ws_r2c = 0, ws_c2r = 0;
    RTOMO_CUFFT_TRY(err, cufftCreate(&p->r2c));
    p->have_r2c = 1;
    RTOMO_CUFFT_TRY(err, cufftCreate(&p->c2r));
    p->have_c2r = 1;
    RTOMO_CUFFT_TRY(err, cufftSetAutoAllocation(p->r2c, 0));
    RTOMO_CUFFT_TRY(err, cufftSetAutoAllocation(p->c2r, 0));
    RTOMO_CUFFT_TRY(err, cufftMakePlanMany(p->r2c, 2, n, real_embed, 1, real_dist,
                                           complex_embed, 1, complex_dist,
                                           CUFFT_R2C, p->frames, &ws_r2c));
    RTOMO_CUFFT_TRY(err, cufftMakePlanMany(p->c2r, 2, n, complex_embed, 1,
                                           complex_dist, real_embed, 1, real_dist,
                                           CUFFT_C2R, p->frames, &ws_c2r));
    const size_t ws = ws_r2c > ws_c2r ? ws_r2c : ws_c2r;
    if (ws)
        RTOMO_CUDA_TRY(err, cudaMalloc(&p->work, ws));
    RTOMO_CUFFT_TRY(err, cufftSetWorkArea(p->r2c, p->work));
    RTOMO_CUFFT_TRY(err, cufftSetWorkArea(p->c2r, p->work));
    RTOMO_CUFFT_TRY(err, cufftSetStream(p->r2c, s));
    RTOMO_CUFFT_TRY(err, cufftSetStream(p->c2r, s));
    return RTOMO_OK;
}

/* Where each slot-local row lies in the padded array. */
static rtomo_status upload_rows(cuda_fbp_phase_state *p, const cuda_fbp_slot *slot,
                                const rtomo_fbp *plan, rtomo_error *err)
{
    const cuda_fbp_impl *impl = (const cuda_fbp_impl *)plan->impl;
    const rtomo_fbp_phase_plan *ph = &plan->phase;
    int *host = (int *)malloc(sizeof(int) * (size_t)slot->row_count);
    if (!host)
        return rtomo_set_error(err, RTOMO_E_NOMEM, "out of memory");
    for (int local = 0; local < slot->row_count; local++)
        host[local] = ph->pad_top + ph->kept_offset +
                      fbp_partition_row(&impl->deal, slot->index, local);
    cudaError_t rc = cudaMemcpy(p->rows, host, sizeof(int) * (size_t)slot->row_count,
                                cudaMemcpyHostToDevice);
    free(host);
    RTOMO_CUDA_TRY(err, rc);
    return RTOMO_OK;
}

extern "C" rtomo_status cuda_fbp_phase_init(cuda_fbp_slot *slot,
                                            const rtomo_fbp *plan, int frames,
                                            rtomo_error *err)
{
    const rtomo_fbp_phase_plan *ph = &plan->phase;
    if (!ph->on)
        return RTOMO_OK;
    cuda_fbp_phase_state *p = (cuda_fbp_phase_state *)calloc(1, sizeof *p);
    if (!p)
        return rtomo_set_error(err, RTOMO_E_NOMEM, "out of memory");
    slot->phase = p;
    p->frames = frames;
    const size_t bytes = (size_t)frames * array_floats(ph) * sizeof(float);
    RTOMO_CUDA_TRY(err, cudaMalloc((void **)&p->array, bytes));
    /* Frames past a bank's count are transformed too: keep them finite. */
    RTOMO_CUDA_TRY(err, cudaMemsetAsync(p->array, 0, bytes, slot->compute));
    RTOMO_CUDA_TRY(err, cudaMalloc((void **)&p->rows,
                                   sizeof(int) * (size_t)slot->row_count));
    rtomo_status st = upload_rows(p, slot, plan, err);
    if (st != RTOMO_OK)
        return st;
    return make_plans(p, ph, slot->compute, err);
}

extern "C" void cuda_fbp_phase_free(cuda_fbp_slot *slot)
{
    cuda_fbp_phase_state *p = slot->phase;
    if (!p)
        return;
    if (p->have_r2c)
        cufftDestroy(p->r2c);
    if (p->have_c2r)
        cufftDestroy(p->c2r);
    cudaFree(p->work);
    cudaFree(p->array);
    cudaFree(p->dark);
    cudaFree(p->flat);
    cudaFree(p->rows);
    free(p);
    slot->phase = NULL;
}

extern "C" rtomo_status cuda_fbp_phase_set_flat_field(cuda_fbp_slot *slot,
                                                      const rtomo_fbp *plan,
                                                      rtomo_error *err)
{
    cuda_fbp_phase_state *p = slot->phase;
    if (!p || !plan->normalise)
        return RTOMO_OK;
    const size_t bytes = (size_t)plan->phase.row_count *
                         (size_t)plan->geom.det_width * sizeof(float);
    RTOMO_CUDA_TRY(err, cudaSetDevice(slot->device));
    if (!p->dark)
        RTOMO_CUDA_TRY(err, cudaMalloc((void **)&p->dark, bytes));
    if (!p->flat)
        RTOMO_CUDA_TRY(err, cudaMalloc((void **)&p->flat, bytes));
    /* On the compute stream: after every frame queued with the old field. */
    RTOMO_CUDA_TRY(err, cudaMemcpyAsync(p->dark, plan->phase.dark, bytes,
                                        cudaMemcpyHostToDevice, slot->compute));
    RTOMO_CUDA_TRY(err, cudaMemcpyAsync(p->flat, plan->phase.flat, bytes,
                                        cudaMemcpyHostToDevice, slot->compute));
    RTOMO_CUDA_TRY(err, cudaStreamSynchronize(slot->compute));
    return RTOMO_OK;
}

extern "C" void cuda_fbp_phase_stage(cuda_fbp_impl *impl, const void *frame,
                                     size_t line, void *staged)
{
    const rtomo_fbp_phase_plan *ph = &impl->plan->phase;
    cuda_fbp_copy_segment seg;
    seg.dst = staged;
    seg.src = (const char *)frame + (size_t)ph->row_first * line;
    seg.bytes = (size_t)ph->row_count * line;
    cuda_fbp_copy(impl->copier, &seg, 1);
}

/* ----------------------------------------------------------- per bank ---- */

static rtomo_status launch_pad(const cuda_fbp_slot *slot, const rtomo_fbp *plan,
                               const void *raw, int frames, rtomo_dtype dtype,
                               rtomo_error *err)
{
    const rtomo_fbp_phase_plan *ph = &plan->phase;
    const cuda_fbp_phase_state *p = slot->phase;
    const dim3 grid((ph->nx + PHASE_THREADS - 1) / PHASE_THREADS, ph->ny, frames);
    const float *dark = plan->normalise ? p->dark : NULL;
    const float *flat = plan->normalise ? p->flat : NULL;
    const int rows = ph->row_count, width = plan->geom.det_width;
    const int stride = 2 * ph->nh;
    const size_t ff = array_floats(ph);
    switch (dtype) {
    case RTOMO_DTYPE_U8:
        pad_kernel<<<grid, PHASE_THREADS, 0, slot->compute>>>(
            (const uint8_t *)raw, dark, flat, rows, width, ph->nx, stride,
            ph->pad_top, ph->pad_left, p->array, ff);
        break;
    case RTOMO_DTYPE_U16:
        pad_kernel<<<grid, PHASE_THREADS, 0, slot->compute>>>(
            (const uint16_t *)raw, dark, flat, rows, width, ph->nx, stride,
            ph->pad_top, ph->pad_left, p->array, ff);
        break;
    case RTOMO_DTYPE_F32:
        pad_kernel<<<grid, PHASE_THREADS, 0, slot->compute>>>(
            (const float *)raw, dark, flat, rows, width, ph->nx, stride,
            ph->pad_top, ph->pad_left, p->array, ff);
        break;
    }
    RTOMO_CUDA_CHECK_LAUNCH(err, "phase retrieval padding");
    return RTOMO_OK;
}

extern "C" rtomo_status cuda_fbp_phase_pack(cuda_fbp_slot *slot,
                                            const rtomo_fbp *plan,
                                            const void *raw, int frames,
                                            rtomo_dtype dtype, rtomo_error *err)
{
    const rtomo_fbp_phase_plan *ph = &plan->phase;
    cuda_fbp_phase_state *p = slot->phase;
    cuda_fbp_filter_state *f = &slot->filter;
    rtomo_status st = launch_pad(slot, plan, raw, frames, dtype, err);
    if (st != RTOMO_OK)
        return st;
    cufftComplex *spectrum = (cufftComplex *)p->array;
    RTOMO_CUFFT_TRY(err, cufftExecR2C(p->r2c, p->array, spectrum));
    const dim3 grid_mul((ph->nh + PHASE_THREADS - 1) / PHASE_THREADS, ph->ny, frames);
    multiply_kernel<<<grid_mul, PHASE_THREADS, 0, slot->compute>>>(
        spectrum, ph->ny, ph->nh, ph->cy, ph->cx,
        1.0 / ((double)ph->ny * (double)ph->nx), (size_t)ph->ny * ph->nh);
    RTOMO_CUDA_CHECK_LAUNCH(err, "phase retrieval filter");
    RTOMO_CUFFT_TRY(err, cufftExecC2R(p->c2r, spectrum, p->array));
    const dim3 grid_pack((f->length + PHASE_THREADS - 1) / PHASE_THREADS, f->pairs,
                         frames);
    pack_kernel<<<grid_pack, PHASE_THREADS, 0, slot->compute>>>(
        p->array, array_floats(ph), 2 * ph->nh, ph->pad_left, p->rows,
        slot->row_count, plan->geom.det_width, f->length, f->spectrum);
    RTOMO_CUDA_CHECK_LAUNCH(err, "phase retrieval row packing");
    return RTOMO_OK;
}
