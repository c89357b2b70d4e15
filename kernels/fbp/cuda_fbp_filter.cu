/*
 * cuda_fbp_filter.cu — pre-processing and ramp filtering of incoming
 * projections on the GPU.
 *
 * Frames travel in their own sample type (uint8/uint16 are 2-4x smaller
 * than float) from pinned staging to the device, where one kernel converts
 * them, applies dark/flat normalisation and -log, and packs two detector
 * rows into one complex row (real and imaginary parts) zero-padded to the
 * filter length: the filter is real and even, so one complex transform
 * filters two real rows.  A batched cuFFT C2C transform, a multiplication
 * by the front end's filter (which already holds pi/n_proj and 1/n) and the
 * inverse transform follow; the first det_width samples of each row land in
 * the row's filtered sinogram at the projection's index.
 *
 * Frames gather in two alternating banks (pinned staging on the host, a raw
 * buffer on each device) so that the upload of one bank overlaps the
 * filtering of the other; upload and filtering run on the slot's upload and
 * compute streams, ordered by events.  A bank holds one large frame or up
 * to CUDA_FBP_MAX_BANK_FRAMES small ones, which then share one upload and
 * one batch of transforms instead of paying the launches per frame.
 */
#include "config.h"

#include <math.h>
#include <string.h>

#include "cuda_fbp.h"
#include "cuda_fbp_half.h"

#define FILTER_THREADS 256
/* Ratios (raw - dark) / (flat - dark) below this (or with flat <= dark)
 * are clamped so that -log stays finite. */
#define MIN_TRANSMISSION 1e-6f

/* Line integral of one sample: -log of the flat-field ratio when dark and
 * flat are given, the sample itself otherwise. */
template <typename T>
__device__ __forceinline__ float line_integral(const T *raw, const float *dark,
                                               const float *flat, size_t at)
{
    const float x = (float)raw[at];
    if (!flat)
        return x;
    const float d = dark[at];
    const float range = flat[at] - d;
    const float ratio = range > 0.f ? (x - d) / range : MIN_TRANSMISSION;
    return -logf(fmaxf(ratio, MIN_TRANSMISSION));
}

/* Frame z of the bank: spectrum[z][k][i] = (row 2k, row 2k+1) at bin i,
 * zero past det_width and for a missing odd row. */
template <typename T>
__global__ void pack_rows_kernel(const T *raw, const float *dark,
                                 const float *flat, int rows, int width,
                                 int length, cufftComplex *spectrum)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    const int k = blockIdx.y, z = blockIdx.z;
    if (i >= length)
        return;
    float2 v = make_float2(0.f, 0.f);
    if (i < width) {
        const T *frame = raw + (size_t)z * rows * width;
        const size_t at = (size_t)(2 * k) * width + i;
        v.x = line_integral(frame, dark, flat, at);
        if (2 * k + 1 < rows)
            v.y = line_integral(frame, dark, flat, at + width);
    }
    spectrum[((size_t)z * gridDim.y + k) * length + i] = v;
}

__global__ void apply_filter_kernel(cufftComplex *spectrum, const float *coeffs,
                                    int length)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= length)
        return;
    cufftComplex *c = &spectrum[(size_t)blockIdx.y * length + i];
    const float f = coeffs[i];
    c->x *= f;
    c->y *= f;
}

extern "C" void cuda_fbp_apply_filter(cufftComplex *spectrum,
                                      const float *coeffs, int length,
                                      int rows, cudaStream_t stream)
{
    const dim3 grid((length + FILTER_THREADS - 1) / FILTER_THREADS, rows);
    apply_filter_kernel<<<grid, FILTER_THREADS, 0, stream>>>(spectrum, coeffs,
                                                             length);
}

/* Projection indices of the frames of a bank. */
typedef struct bank_indices {
    int index[CUDA_FBP_MAX_BANK_FRAMES];
    float scale[CUDA_FBP_MAX_BANK_FRAMES];  /* angular weights (1: uniform) */
} bank_indices;

/* Row r's sinogram starts at sino + r*row_stride; projection `index` is one
 * line of `pitch` bytes in it.  Frame z of the bank goes to
 * projection indices.index[z]. */
__global__ void unpack_rows_kernel(const cufftComplex *spectrum, int rows,
                                   int width, int length, char *sino,
                                   size_t row_stride, size_t pitch,
                                   const bank_indices indices)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    const int k = blockIdx.y, z = blockIdx.z;
    if (i >= width)
        return;
    const cufftComplex c = spectrum[((size_t)z * gridDim.y + k) * length + i];
    const float s = indices.scale[z];
    float *even = (float *)(sino + (size_t)(2 * k) * row_stride +
                            (size_t)indices.index[z] * pitch);
    even[i] = c.x * s;
    if (2 * k + 1 < rows) {
        float *odd = (float *)((char *)even + row_stride);
        odd[i] = c.y * s;
    }
}

/* ------------------------------------------------------------- state ---- */

/* float32 samples of `rows` rows of one frame. */
static size_t raw_bytes(const rtomo_fbp *plan, int rows)
{
    return (size_t)rows * (size_t)plan->geom.det_width * sizeof(float);
}

static size_t spectrum_bytes(const rtomo_fbp *plan, int rows, int frames)
{
    return (size_t)frames * (size_t)((rows + 1) / 2) *
           (size_t)plan->filter_length * sizeof(cufftComplex);
}

/* Rows of a frame a slot uploads: its own, or all phase rows. */
static int input_rows(const rtomo_fbp *plan, int rows)
{
    return plan->phase.on ? plan->phase.row_count : rows;
}

extern "C" int cuda_fbp_bank_frames(const rtomo_fbp *plan)
{
    /* With phase retrieval the padded transform is the largest array. */
    const size_t pixels = plan->phase.on
        ? (size_t)plan->phase.ny * (size_t)plan->phase.nx
        : (size_t)plan->geom.row_count * (size_t)plan->geom.det_width;
    size_t frames = CUDA_FBP_BANK_PIXELS / pixels;
    if (frames < 1)
        frames = 1;
    if (frames > CUDA_FBP_MAX_BANK_FRAMES)
        frames = CUDA_FBP_MAX_BANK_FRAMES;
    return (int)frames;
}

extern "C" size_t cuda_fbp_filter_bytes(const rtomo_fbp *plan, int rows,
                                        int frames)
{
    /* The spectrum twice: cuFFT may need a work area of its size; raw
     * banks twice, dark and flat. */
    return 2 * spectrum_bytes(plan, rows, frames) +
           2 * (size_t)frames * raw_bytes(plan, input_rows(plan, rows)) +
           2 * raw_bytes(plan, rows) + (size_t)plan->filter_length * sizeof(float) +
           cuda_fbp_phase_bytes(plan, frames);
}

static rtomo_status create_events(cuda_fbp_filter_state *f, rtomo_error *err)
{
    for (int j = 0; j < 2; j++) {
        RTOMO_CUDA_TRY(err, cudaEventCreateWithFlags(&f->uploaded[j], cudaEventDisableTiming));
        RTOMO_CUDA_TRY(err, cudaEventCreateWithFlags(&f->consumed[j], cudaEventDisableTiming));
        RTOMO_CUDA_TRY(err, cudaEventCreate(&f->start[j]));
        RTOMO_CUDA_TRY(err, cudaEventCreate(&f->done[j]));
    }
    return RTOMO_OK;
}

extern "C" rtomo_status cuda_fbp_filter_init(cuda_fbp_slot *slot,
                                             const rtomo_fbp *plan, int frames,
                                             rtomo_error *err)
{
    cuda_fbp_filter_state *f = &slot->filter;
    f->length = plan->filter_length;
    f->pairs = (slot->row_count + 1) / 2;
    rtomo_status st = create_events(f, err);
    if (st != RTOMO_OK)
        return st;
    RTOMO_CUDA_TRY(err, cudaMalloc((void **)&f->spectrum,
                                   spectrum_bytes(plan, slot->row_count, frames)));
    RTOMO_CUDA_TRY(err, cudaMalloc((void **)&f->coeffs, sizeof(float) * (size_t)f->length));
    for (int j = 0; j < 2; j++)
        RTOMO_CUDA_TRY(err, cudaMalloc(&f->raw[j], (size_t)frames *
                                                    raw_bytes(plan, input_rows(plan, slot->row_count))));
    RTOMO_CUDA_TRY(err, cudaMemcpyAsync(f->coeffs, plan->filter,
                                        sizeof(float) * (size_t)f->length,
                                        cudaMemcpyHostToDevice, slot->compute));
    int n = f->length;
    RTOMO_CUFFT_TRY(err, cufftPlanMany(&f->fft, 1, &n, NULL, 1, n, NULL, 1, n,
                                       CUFFT_C2C, f->pairs * frames));
    f->have_fft = 1;
    RTOMO_CUFFT_TRY(err, cufftSetStream(f->fft, slot->compute));
    return cuda_fbp_phase_init(slot, plan, frames, err);
}

extern "C" void cuda_fbp_filter_free(cuda_fbp_slot *slot)
{
    cuda_fbp_filter_state *f = &slot->filter;
    cuda_fbp_phase_free(slot);
    if (f->have_fft)
        cufftDestroy(f->fft);
    cudaFree(f->spectrum);
    cudaFree(f->coeffs);
    cudaFree(f->dark);
    cudaFree(f->flat);
    for (int j = 0; j < 2; j++) {
        cudaFree(f->raw[j]);
        if (f->uploaded[j]) cudaEventDestroy(f->uploaded[j]);
        if (f->consumed[j]) cudaEventDestroy(f->consumed[j]);
        if (f->start[j]) cudaEventDestroy(f->start[j]);
        if (f->done[j]) cudaEventDestroy(f->done[j]);
    }
    memset(f, 0, sizeof *f);
}

extern "C" rtomo_status cuda_fbp_filter_set_flat_field(cuda_fbp_slot *slot,
                                                       const rtomo_fbp *plan,
                                                       const float *dark,
                                                       const float *flat,
                                                       rtomo_error *err)
{
    if (!plan->normalise)
        return RTOMO_OK;
    cuda_fbp_filter_state *f = &slot->filter;
    const size_t bytes = raw_bytes(plan, slot->row_count);
    RTOMO_CUDA_TRY(err, cudaSetDevice(slot->device));
    if (!f->dark)
        RTOMO_CUDA_TRY(err, cudaMalloc((void **)&f->dark, bytes));
    if (!f->flat)
        RTOMO_CUDA_TRY(err, cudaMalloc((void **)&f->flat, bytes));
    RTOMO_CUDA_TRY(err, cudaMemcpyAsync(f->dark, dark, bytes,
                                        cudaMemcpyHostToDevice, slot->compute));
    RTOMO_CUDA_TRY(err, cudaMemcpyAsync(f->flat, flat, bytes,
                                        cudaMemcpyHostToDevice, slot->compute));
    RTOMO_CUDA_TRY(err, cudaStreamSynchronize(slot->compute));
    return RTOMO_OK;
}

/* ------------------------------------------------------------ per bank ---- */

static void launch_pack(const cuda_fbp_slot *slot, const rtomo_fbp *plan,
                        int bank, int frames, rtomo_dtype dtype)
{
    const cuda_fbp_filter_state *f = &slot->filter;
    const dim3 grid((f->length + FILTER_THREADS - 1) / FILTER_THREADS, f->pairs,
                    frames);
    const float *dark = plan->normalise ? f->dark : NULL;
    const float *flat = plan->normalise ? f->flat : NULL;
    const int rows = slot->row_count, width = plan->geom.det_width;
    switch (dtype) {
    case RTOMO_DTYPE_U8:
        pack_rows_kernel<<<grid, FILTER_THREADS, 0, slot->compute>>>(
            (const uint8_t *)f->raw[bank], dark, flat, rows, width, f->length, f->spectrum);
        break;
    case RTOMO_DTYPE_U16:
        pack_rows_kernel<<<grid, FILTER_THREADS, 0, slot->compute>>>(
            (const uint16_t *)f->raw[bank], dark, flat, rows, width, f->length, f->spectrum);
        break;
    case RTOMO_DTYPE_F32:
        pack_rows_kernel<<<grid, FILTER_THREADS, 0, slot->compute>>>(
            (const float *)f->raw[bank], dark, flat, rows, width, f->length, f->spectrum);
        break;
    }
}

/* Upload this slot's rows of a bank's frames (one strided copy: the slot's
 * rows are one range of every staged frame, already in its local order)
 * and filter them into their projections. */
static rtomo_status enqueue_slot(cuda_fbp_slot *slot, const cuda_fbp_impl *impl,
                                 int bank, rtomo_error *err)
{
    const rtomo_fbp *plan = impl->plan;
    const cuda_fbp_bank *b = &impl->banks[bank];
    cuda_fbp_filter_state *f = &slot->filter;
    const size_t line = (size_t)plan->geom.det_width * rtomo_dtype_size(b->dtype);
    /* With phase retrieval every slot takes all phase rows. */
    const int phase = plan->phase.on;
    const size_t frame = (size_t)input_rows(plan, plan->geom.row_count) * line;
    const size_t part = phase ? frame : (size_t)slot->row_count * line;
    const char *src = (const char *)b->staging +
                      (phase ? 0 : (size_t)slot->stage_row * line);

    RTOMO_CUDA_TRY(err, cudaSetDevice(slot->device));
    RTOMO_CUDA_TRY(err, cudaStreamWaitEvent(slot->upload, f->consumed[bank], 0));
    RTOMO_CUDA_TRY(err, cudaMemcpy2DAsync(f->raw[bank], part, src, frame, part,
                                          (size_t)b->count, cudaMemcpyHostToDevice,
                                          slot->upload));
    RTOMO_CUDA_TRY(err, cudaEventRecord(f->uploaded[bank], slot->upload));
    RTOMO_CUDA_TRY(err, cudaStreamWaitEvent(slot->compute, f->uploaded[bank], 0));
    RTOMO_CUDA_TRY(err, cudaEventRecord(f->start[bank], slot->compute));
    if (phase) {
        rtomo_status st = cuda_fbp_phase_pack(slot, plan, f->raw[bank], b->count,
                                              b->dtype, err);
        if (st != RTOMO_OK)
            return st;
    } else {
        launch_pack(slot, plan, bank, b->count, b->dtype);
        RTOMO_CUDA_CHECK_LAUNCH(err, "frame pre-processing");
    }
    rtomo_status summed = cuda_fbp_rings_accumulate(slot, plan, b->index,
                                                    b->count, err);
    if (summed != RTOMO_OK)
        return summed;
    /* Half acquisition: after the (unweighted) ring sums, before the
     * transform; cuda_fbp_half.cu says why not inside the packing. */
    rtomo_status weighed = cuda_fbp_half_weigh(slot, plan, b->count, err);
    if (weighed != RTOMO_OK)
        return weighed;
    RTOMO_CUDA_TRY(err, cudaEventRecord(f->consumed[bank], slot->compute));

    /* The plan transforms a full bank; rows past `count` frames hold stale
     * data whose results are never unpacked. */
    RTOMO_CUFFT_TRY(err, cufftExecC2C(f->fft, f->spectrum, f->spectrum, CUFFT_FORWARD));
    cuda_fbp_apply_filter(f->spectrum, f->coeffs, f->length,
                          f->pairs * b->count, slot->compute);
    RTOMO_CUDA_CHECK_LAUNCH(err, "filter multiplication");
    RTOMO_CUFFT_TRY(err, cufftExecC2C(f->fft, f->spectrum, f->spectrum, CUFFT_INVERSE));
    bank_indices indices;
    memcpy(indices.index, b->index, sizeof(int) * (size_t)b->count);
    for (int z = 0; z < b->count; z++)
        indices.scale[z] = plan->proj_scale[b->index[z]];
    const dim3 grid_out((plan->geom.det_width + FILTER_THREADS - 1) / FILTER_THREADS,
                        f->pairs, b->count);
    unpack_rows_kernel<<<grid_out, FILTER_THREADS, 0, slot->compute>>>(
        f->spectrum, slot->row_count, plan->geom.det_width, f->length,
        (char *)slot->sino, cuda_fbp_row_offset(slot, plan, 1), slot->sino_pitch,
        indices);
    RTOMO_CUDA_CHECK_LAUNCH(err, "filtered row unpacking");
    RTOMO_CUDA_TRY(err, cudaEventRecord(f->done[bank], slot->compute));
    f->pending[bank] = 1;
    return RTOMO_OK;
}

extern "C" rtomo_status cuda_fbp_filter_enqueue(cuda_fbp_impl *impl, int bank,
                                                rtomo_error *err)
{
    /* Streaming chunks run on their own stream: the bank's slots are
     * written only after the chunks that read them (a window's ring). */
    const cuda_fbp_bank *b = &impl->banks[bank];
    rtomo_status ordered = cuda_fbp_stream_before_write(impl, b->index, b->count,
                                                        err);
    if (ordered != RTOMO_OK)
        return ordered;
    for (int i = 0; i < impl->n_slots; i++) {
        rtomo_status st = enqueue_slot(&impl->slots[i], impl, bank, err);
        if (st != RTOMO_OK)
            return st;
    }
    return RTOMO_OK;
}

extern "C" rtomo_status cuda_fbp_filter_wait_bank(cuda_fbp_impl *impl, int bank,
                                                  rtomo_error *err)
{
    for (int i = 0; i < impl->n_slots; i++) {
        cuda_fbp_slot *slot = &impl->slots[i];
        cuda_fbp_filter_state *f = &slot->filter;
        if (!f->pending[bank])
            continue;
        RTOMO_CUDA_TRY(err, cudaSetDevice(slot->device));
        RTOMO_CUDA_TRY(err, cudaEventSynchronize(f->done[bank]));
        float ms = 0.f;
        RTOMO_CUDA_TRY(err, cudaEventElapsedTime(&ms, f->start[bank], f->done[bank]));
        slot->filter_seconds += 1e-3 * ms;
        f->pending[bank] = 0;
    }
    return RTOMO_OK;
}
