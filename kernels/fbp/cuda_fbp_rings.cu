/*
 * cuda_fbp_rings.cu — ring (detector stripe) removal in the CUDA FBP
 * backend (rtomo_rings, fbp_rings.c; the CPU twin is cpu_fbp_rings.c).
 *
 * While frames are filtered, a kernel after the packing step adds each
 * frame's line integrals (the packed rows, before the transform) into a
 * per-slot sum of row_count x det_width doubles, one per angular sector
 * (RTOMO_RINGS_SECTORS: the frame's by its angle).  It runs on the slot's
 * compute stream like the rest of the bank's work, so banks are added in
 * the order they were fed and no atomics are needed; double keeps the sum
 * of thousands of projections exact enough that the CPU's and the GPU's
 * offsets agree.
 *
 * remove_rings downloads the sums, computes the offsets on the host with
 * the same estimator as the CPU backend (rtomo_fbp_rings_offsets: rows of
 * at most 64 Ki doubles per sector, a one-off step after the scan), and on the
 * device filters c (and c - the offsets applied before) with the plan's
 * filter, as one complex row each, then subtracts proj_scale[p] times the
 * filtered offsets from the float sinogram row of every received
 * projection.  Slots hold disjoint rows; each is corrected in turn.
 */
#include "config.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_fbp.h"
#include "engine_internal.h"

#define RINGS_THREADS 256

struct cuda_fbp_rings {
    double *sum;                /* device: RTOMO_RINGS_SECTORS planes of
                                   row_count x det_width */
    double *applied;            /* host: offsets subtracted so far */
};

/* ------------------------------------------------------------ kernels ---- */

/* The sector of each frame of a bank, by value. */
typedef struct bank_sectors {
    int sector[CUDA_FBP_MAX_BANK_FRAMES];
} bank_sectors;

/* Add `frames` packed frames (spectrum[z][k][i] = rows 2k, 2k+1 at bin
 * i) into sum[sector of z][row][i], frame after frame (one thread per
 * bin and row pair: no two threads touch one sum). */
__global__ void rings_accumulate_kernel(const cufftComplex *spectrum,
                                        int frames, int pairs, int rows,
                                        int width, int length,
                                        bank_sectors sectors, double *sum)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    const int k = blockIdx.y;
    if (i >= width)
        return;
    const size_t plane = (size_t)rows * width;
    for (int z = 0; z < frames; z++) {
        const cufftComplex c = spectrum[((size_t)z * pairs + k) * length + i];
        double *s = sum + (size_t)sectors.sector[z] * plane;
        s[(size_t)(2 * k) * width + i] += c.x;
        if (2 * k + 1 < rows)
            s[(size_t)(2 * k + 1) * width + i] += c.y;
    }
}

/* Row r: (c, d) = (offsets[r], offsets[rows + r]) at bins < width, zero
 * padding beyond. */
__global__ void rings_pack_kernel(const float *offsets, int rows, int width,
                                  int length, cufftComplex *spectrum)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    const int r = blockIdx.y;
    if (i >= length)
        return;
    float2 v = make_float2(0.f, 0.f);
    if (i < width) {
        v.x = offsets[(size_t)r * width + i];
        v.y = offsets[((size_t)rows + r) * width + i];
    }
    spectrum[(size_t)r * length + i] = v;
}

/* Projection p of row r, bin i: minus weight[p].x times the filtered c,
 * or weight[p].y times the filtered c - c_applied (one of them is 0;
 * both for projections never received, which are not touched). */
__global__ void rings_subtract_kernel(const cufftComplex *spectrum,
                                      const float2 *weight, int rows,
                                      int n_proj, int width, int length,
                                      char *sino, size_t row_stride,
                                      size_t pitch)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= width)
        return;
    for (int r = blockIdx.z; r < rows; r += gridDim.z) {
        const cufftComplex q = spectrum[(size_t)r * length + i];
        for (int p = blockIdx.y; p < n_proj; p += gridDim.y) {
            const float2 w = weight[p];
            if (w.x == 0.f && w.y == 0.f)
                continue;
            float *line = (float *)(sino + (size_t)r * row_stride +
                                    (size_t)p * pitch);
            line[i] -= w.x != 0.f ? w.x * q.x : w.y * q.y;
        }
    }
}

/* ------------------------------------------------------- accumulation ---- */

/* The slot's sums, zeroed, on first use (its device is current). */
static rtomo_status ensure_rings(cuda_fbp_slot *slot, const rtomo_fbp *plan,
                                 rtomo_error *err)
{
    if (slot->rings)
        return RTOMO_OK;
    const size_t n = (size_t)slot->row_count * (size_t)plan->geom.det_width;
    cuda_fbp_rings *r = (cuda_fbp_rings *)calloc(1, sizeof *r);
    if (!r || !(r->applied = (double *)calloc(n, sizeof(double)))) {
        free(r);
        return rtomo_set_error(err, RTOMO_E_NOMEM,
                               "out of memory for ring removal offsets");
    }
    slot->rings = r;
    const size_t bytes = RTOMO_RINGS_SECTORS * n * sizeof(double);
    RTOMO_CUDA_TRY(err, cudaMalloc((void **)&r->sum, bytes));
    RTOMO_CUDA_TRY(err, cudaMemsetAsync(r->sum, 0, bytes, slot->compute));
    return RTOMO_OK;
}

extern "C" rtomo_status cuda_fbp_rings_accumulate(cuda_fbp_slot *slot,
                                                  const rtomo_fbp *plan,
                                                  const int *index, int frames,
                                                  rtomo_error *err)
{
    if (plan->geom.rings == RTOMO_RINGS_OFF || slot->row_count < 1)
        return RTOMO_OK;
    rtomo_status st = ensure_rings(slot, plan, err);
    if (st != RTOMO_OK)
        return st;
    const cuda_fbp_filter_state *f = &slot->filter;
    const int width = plan->geom.det_width;
    const dim3 grid((width + RINGS_THREADS - 1) / RINGS_THREADS, f->pairs);
    bank_sectors sectors;
    for (int z = 0; z < frames; z++)
        sectors.sector[z] = rtomo_fbp_rings_sector(plan, index[z]);
    rings_accumulate_kernel<<<grid, RINGS_THREADS, 0, slot->compute>>>(
        f->spectrum, frames, f->pairs, slot->row_count, width, f->length,
        sectors, slot->rings->sum);
    RTOMO_CUDA_CHECK_LAUNCH(err, "ring removal sums");
    return RTOMO_OK;
}

extern "C" void cuda_fbp_rings_free(cuda_fbp_slot *slot)
{
    if (!slot->rings)
        return;
    cudaFree(slot->rings->sum);
    free(slot->rings->applied);
    free(slot->rings);
    slot->rings = NULL;
}

/* ---------------------------------------------------------- correction ---- */

/* Device buffers of one slot's correction. */
typedef struct rings_work {
    float *offsets;             /* 2 x rows x width: c, then d */
    cufftComplex *spectrum;     /* rows x length */
    float2 *weight;             /* n_proj */
    cufftHandle fft;
    int have_fft;
} rings_work;

static void free_work(rings_work *w)
{
    cudaFree(w->offsets);
    cudaFree(w->spectrum);
    cudaFree(w->weight);
    if (w->have_fft)
        cufftDestroy(w->fft);
}

/* c and d = c - applied for the slot's rows into host[2][rows][width]
 * (floats), from the downloaded sums; applied becomes c. */
/* The offsets of rows first, first + step, ... of a slot (one thread's
 * share): c into host[0], c - applied into host[1], applied = c. */
typedef struct offsets_share {
    const rtomo_fbp *plan;
    cuda_fbp_slot *slot;
    const double *sum;          /* downloaded: sectors x rows x width */
    float *host;
    int first, step;
    int failed;
} offsets_share;

static void *share_offsets(void *arg)
{
    offsets_share *sh = (offsets_share *)arg;
    const rtomo_fbp *plan = sh->plan;
    const int width = plan->geom.det_width, rows = sh->slot->row_count;
    const size_t n = (size_t)rows * (size_t)width;
    double *c = (double *)malloc(sizeof(double) *
                                 ((size_t)width +
                                  RTOMO_RINGS_SCRATCH(width,
                                                      plan->geom.rings_width)));
    if (!c) {
        sh->failed = 1;
        return NULL;
    }
    double *scratch = c + width;
    for (int r = sh->first; r < rows; r += sh->step) {
        double *applied = sh->slot->rings->applied + (size_t)r * width;
        const double *sums[RTOMO_RINGS_SECTORS];
        for (int j = 0; j < RTOMO_RINGS_SECTORS; j++)
            sums[j] = sh->sum + (size_t)j * n + (size_t)r * width;
        rtomo_fbp_rings_offsets(sums, plan->rings_counts, width,
                                plan->geom.rings_width, scratch, c);
        for (int i = 0; i < width; i++) {
            sh->host[(size_t)r * width + i] = (float)c[i];
            sh->host[n + (size_t)r * width + i] = (float)(c[i] - applied[i]);
            applied[i] = c[i];
        }
    }
    free(c);
    return NULL;
}

/* The rows' offsets on the host's cores: a 2048^2 detector's estimate
 * takes seconds on one. */
static rtomo_status offsets_on_cores(const rtomo_fbp *plan, cuda_fbp_slot *slot,
                                     const double *sum, float *host,
                                     rtomo_error *err)
{
    enum { MAX_THREADS = 32 };
    const int threads = rtomo_cpu_thread_count(&plan->opt) < MAX_THREADS
                            ? rtomo_cpu_thread_count(&plan->opt) : MAX_THREADS;
    offsets_share share[MAX_THREADS];
    pthread_t id[MAX_THREADS];
    int started = 0;
    for (int k = 0; k < threads; k++) {
        share[k] = (offsets_share){plan, slot, sum, host, k, threads, 0};
        if (k > 0 && pthread_create(&id[k], NULL, share_offsets, &share[k]) == 0)
            started |= 1 << k;
        else if (k > 0)
            share_offsets(&share[k]);   /* no thread: this one does it */
    }
    share_offsets(&share[0]);
    int failed = share[0].failed;
    for (int k = 1; k < threads; k++) {
        if (started & (1 << k))
            pthread_join(id[k], NULL);
        failed |= share[k].failed;
    }
    return failed ? rtomo_set_error(err, RTOMO_E_NOMEM, "out of memory for "
                                    "ring removal") : RTOMO_OK;
}

static rtomo_status host_offsets(cuda_fbp_slot *slot, const rtomo_fbp *plan,
                                 float *host, rtomo_error *err)
{
    const size_t n = (size_t)slot->row_count * (size_t)plan->geom.det_width;
    const size_t all = RTOMO_RINGS_SECTORS * n;
    double *sum = (double *)malloc(all * sizeof(double));
    if (!sum)
        return rtomo_set_error(err, RTOMO_E_NOMEM, "out of memory for ring "
                               "removal");
    cudaError_t rc = cudaMemcpyAsync(sum, slot->rings->sum, all * sizeof(double),
                                     cudaMemcpyDeviceToHost, slot->compute);
    if (rc == cudaSuccess)
        rc = cudaStreamSynchronize(slot->compute);
    rtomo_status st = rc == cudaSuccess
                          ? offsets_on_cores(plan, slot, sum, host, err)
                          : rtomo_cuda_error(err, rc, "ring removal sums "
                                             "download", __FILE__, __LINE__);
    free(sum);
    return st;
}

/* Filter the slot's offsets and subtract them from its sinograms. */
static rtomo_status correct_slot(cuda_fbp_slot *slot, const rtomo_fbp *plan,
                                 const float *host, const float2 *weight,
                                 rings_work *w, rtomo_error *err)
{
    const int width = plan->geom.det_width, rows = slot->row_count;
    const int length = plan->filter_length, n_proj = plan->geom.n_proj;
    const size_t n = (size_t)rows * (size_t)width;
    RTOMO_CUDA_TRY(err, cudaMalloc((void **)&w->offsets, 2 * n * sizeof(float)));
    RTOMO_CUDA_TRY(err, cudaMalloc((void **)&w->spectrum,
                                   (size_t)rows * length * sizeof(cufftComplex)));
    RTOMO_CUDA_TRY(err, cudaMalloc((void **)&w->weight, n_proj * sizeof(float2)));
    RTOMO_CUDA_TRY(err, cudaMemcpyAsync(w->offsets, host, 2 * n * sizeof(float),
                                        cudaMemcpyHostToDevice, slot->compute));
    RTOMO_CUDA_TRY(err, cudaMemcpyAsync(w->weight, weight, n_proj * sizeof(float2),
                                        cudaMemcpyHostToDevice, slot->compute));
    RTOMO_CUFFT_TRY(err, cufftPlan1d(&w->fft, length, CUFFT_C2C, rows));
    w->have_fft = 1;
    RTOMO_CUFFT_TRY(err, cufftSetStream(w->fft, slot->compute));

    const dim3 grid((length + RINGS_THREADS - 1) / RINGS_THREADS, rows);
    rings_pack_kernel<<<grid, RINGS_THREADS, 0, slot->compute>>>(
        w->offsets, rows, width, length, w->spectrum);
    RTOMO_CUDA_CHECK_LAUNCH(err, "ring offsets packing");
    RTOMO_CUFFT_TRY(err, cufftExecC2C(w->fft, w->spectrum, w->spectrum, CUFFT_FORWARD));
    cuda_fbp_apply_filter(w->spectrum, slot->filter.coeffs, length, rows,
                          slot->compute);
    RTOMO_CUDA_CHECK_LAUNCH(err, "ring offsets filtering");
    RTOMO_CUFFT_TRY(err, cufftExecC2C(w->fft, w->spectrum, w->spectrum, CUFFT_INVERSE));
    const dim3 grid_out((width + RINGS_THREADS - 1) / RINGS_THREADS,
                        n_proj < 65535 ? n_proj : 65535,
                        rows < 64 ? rows : 64);
    rings_subtract_kernel<<<grid_out, RINGS_THREADS, 0, slot->compute>>>(
        w->spectrum, w->weight, rows, n_proj, width, length, (char *)slot->sino,
        cuda_fbp_row_offset(slot, plan, 1), slot->sino_pitch);
    RTOMO_CUDA_CHECK_LAUNCH(err, "ring offsets subtraction");
    RTOMO_CUDA_TRY(err, cudaStreamSynchronize(slot->compute));
    return RTOMO_OK;
}

static rtomo_status remove_slot(cuda_fbp_slot *slot, const rtomo_fbp *plan,
                                const float2 *weight, rtomo_error *err)
{
    if (!slot->rings)
        return RTOMO_OK;    /* no projection reached it */
    RTOMO_CUDA_TRY(err, cudaSetDevice(slot->device));
    const size_t n = (size_t)slot->row_count * (size_t)plan->geom.det_width;
    float *host = (float *)malloc(2 * n * sizeof(float));
    if (!host)
        return rtomo_set_error(err, RTOMO_E_NOMEM, "out of memory for ring "
                               "removal");
    rings_work w;
    memset(&w, 0, sizeof w);
    rtomo_status st = host_offsets(slot, plan, host, err);
    if (st == RTOMO_OK)
        st = correct_slot(slot, plan, host, weight, &w, err);
    free_work(&w);
    free(host);
    return st;
}

/* Before the held projections are corrected: queued streaming work that
 * reads them is done first; *weight: room for a weight per projection. */
static rtomo_status correction_weights(rtomo_fbp *plan, float2 **weight,
                                       rtomo_error *err)
{
    rtomo_status st = cuda_fbp_stream_before_write(
        (cuda_fbp_impl *)plan->impl, NULL, 0, err);
    if (st != RTOMO_OK)
        return st;
    *weight = (float2 *)malloc(sizeof(float2) * (size_t)plan->geom.n_proj);
    return *weight ? RTOMO_OK
                   : rtomo_set_error(err, RTOMO_E_NOMEM, "out of memory");
}

extern "C" rtomo_status cuda_fbp_remove_rings(rtomo_fbp *plan, rtomo_error *err)
{
    cuda_fbp_impl *impl = (cuda_fbp_impl *)plan->impl;
    if (plan->n_received < 1)
        return RTOMO_OK;
    const int n_proj = plan->geom.n_proj;
    float2 *weight;
    rtomo_status st = correction_weights(plan, &weight, err);
    if (st != RTOMO_OK)
        return st;
    for (int p = 0; p < n_proj; p++) {
        const float s = plan->received[p] ? plan->proj_scale[p] : 0.f;
        weight[p] = plan->rings_done[p] ? make_float2(0.f, s)
                                        : make_float2(s, 0.f);
    }
    for (int i = 0; i < impl->n_slots && st == RTOMO_OK; i++)
        st = remove_slot(&impl->slots[i], plan, weight, err);
    free(weight);
    return st;
}

/* ------------------------------------------- offsets from the front end ---- */

/* The held projections corrected by a per-pixel offset with a weight per
 * projection (flats interpolated, fbp_flats.c), with the kernels above:
 * each slot's rows of the offsets in its local order, filtered, and
 * weights[p] times them added to projection p (the subtraction kernel
 * takes minus the weight). */
static rtomo_status offsets_slot(cuda_fbp_slot *slot, const cuda_fbp_impl *impl,
                                 const rtomo_fbp *plan, const float *offsets,
                                 const float2 *weight, rtomo_error *err)
{
    if (slot->row_count < 1)
        return RTOMO_OK;
    RTOMO_CUDA_TRY(err, cudaSetDevice(slot->device));
    const int width = plan->geom.det_width;
    const size_t n = (size_t)slot->row_count * (size_t)width;
    float *host = (float *)calloc(2 * n, sizeof(float));
    if (!host)
        return rtomo_set_error(err, RTOMO_E_NOMEM, "out of memory for the "
                               "offset correction");
    for (int r = 0; r < slot->row_count; r++) {
        const int kept = fbp_partition_row(&impl->deal, slot->index, r);
        memcpy(host + (size_t)r * width, offsets + (size_t)kept * width,
               sizeof(float) * (size_t)width);
    }
    rings_work w;
    memset(&w, 0, sizeof w);
    rtomo_status st = correct_slot(slot, plan, host, weight, &w, err);
    free_work(&w);
    free(host);
    return st;
}

extern "C" rtomo_status cuda_fbp_add_offsets(rtomo_fbp *plan,
                                             const float *offsets,
                                             const float *weights,
                                             rtomo_error *err)
{
    cuda_fbp_impl *impl = (cuda_fbp_impl *)plan->impl;
    const int n_proj = plan->geom.n_proj;
    float2 *weight;
    rtomo_status st = correction_weights(plan, &weight, err);
    if (st != RTOMO_OK)
        return st;
    for (int p = 0; p < n_proj; p++)
        weight[p] = make_float2(-weights[p], 0.f);
    for (int i = 0; i < impl->n_slots && st == RTOMO_OK; i++)
        st = offsets_slot(&impl->slots[i], impl, plan, offsets, weight, err);
    free(weight);
    return st;
}
