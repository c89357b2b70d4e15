/*
 * cuda_cone_bp.cu — FDK's voxel-driven back-projection on the GPU: the
 * texture kernel (hardware bilinear interpolation from a layered texture
 * of the chunk's filtered projections) and the ALU kernel (the same
 * interpolation on the cores, cone_bilinear, from global memory through
 * the read-only cache), and the choice between them.
 *
 * One thread per voxel column (x, y) and CUDA_CONE_ZCOL slices of it: the
 * column's detector position, its rows per unit z and the distance weight
 * (cone_column_at, shared with the CPU) are computed once per projection
 * and serve the whole column, which accumulates in registers across the
 * chunk; the volume is read and written once per chunk.  Threads of a
 * warp are neighbours in x, so volume accesses coalesce and their
 * detector samples are neighbours too.
 *
 * The texture path's bilinear weights have 8 bits of fraction (the
 * hardware's), so it differs from the CPU by about 1e-3 relative; the ALU
 * path differs by float rounding only.  The faster one for a device and
 * volume shape is timed once (cuda_cone_autotune) and kept for the
 * process.
 */
#include "config.h"

#include <pthread.h>
#include <string.h>

#include "cuda_cone.h"

#define BP_BLOCK_X 32
#define BP_BLOCK_Y 8

template <bool TEXTURE>
__global__ void __launch_bounds__(BP_BLOCK_X * BP_BLOCK_Y)
cone_bp_kernel(const cone_bp_const k, const cuda_cone_views views,
               cudaTextureObject_t tex, const float *__restrict__ slots,
               size_t filt_len, float *volume, int z_first, int z_end)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    const int j = blockIdx.y * blockDim.y + threadIdx.y;
    const int z0 = z_first + blockIdx.z * CUDA_CONE_ZCOL;
    if (i >= k.nx || j >= k.ny)
        return;
    const float x = k.x0 + (float)i * k.voxel;
    const float y = k.y0 + (float)j * k.voxel;
    float acc[CUDA_CONE_ZCOL];
#pragma unroll
    for (int m = 0; m < CUDA_CONE_ZCOL; m++)
        acc[m] = 0.0f;
    for (int p = 0; p < views.n; p++) {
        const cone_column col =
            cone_column_at(&k, views.cos_b[p], views.sin_b[p], x, y);
        const float *q = slots + (size_t)p * filt_len;
#pragma unroll
        for (int m = 0; m < CUDA_CONE_ZCOL; m++) {
            /* As the CPU computes it: the slice's z, then its row. */
            const float z = k.z0 + (float)(z0 + m) * k.voxel;
            const float fv = z * col.dv_dz + k.v0;
            float v;
            if (TEXTURE)
                v = tex2DLayered<float>(tex, col.fu + 0.5f, fv + 0.5f, p);
            else
                v = cone_bilinear(q, k.det_u, k.det_v, col.fu, fv);
            acc[m] += col.weight * v;
        }
    }
    const size_t plane = (size_t)k.nx * (size_t)k.ny;
    float *out = volume + (size_t)z0 * plane + (size_t)j * k.nx + i;
#pragma unroll
    for (int m = 0; m < CUDA_CONE_ZCOL; m++)
        if (z0 + m < z_end)
            out[(size_t)m * plane] += acc[m];
}

rtomo_status cuda_cone_bp_create(const rtomo_cone *c, cuda_cone_dev *s,
                                 rtomo_error *err)
{
    const cudaChannelFormatDesc desc = cudaCreateChannelDesc<float>();
    RTOMO_CUDA_TRY(err, cudaMalloc3DArray(&s->layers, &desc,
                                          make_cudaExtent(c->filt_u,
                                                          c->geom.det_v,
                                                          c->chunk),
                                          cudaArrayLayered));
    cudaResourceDesc res;
    memset(&res, 0, sizeof res);
    res.resType = cudaResourceTypeArray;
    res.res.array.array = s->layers;
    cudaTextureDesc td;
    memset(&td, 0, sizeof td);
    /* Border: 0 beyond the detector, as cone_bilinear. */
    td.addressMode[0] = cudaAddressModeBorder;
    td.addressMode[1] = cudaAddressModeBorder;
    td.filterMode = cudaFilterModeLinear;
    td.readMode = cudaReadModeElementType;
    td.normalizedCoords = 0;
    RTOMO_CUDA_TRY(err, cudaCreateTextureObject(&s->tex, &res, &td, NULL));
    return RTOMO_OK;
}

void cuda_cone_bp_destroy(cuda_cone_dev *s)
{
    if (s->tex)
        (void)cudaDestroyTextureObject(s->tex);
    if (s->layers)
        (void)cudaFreeArray(s->layers);
    s->tex = 0;
    s->layers = NULL;
}

/* Slots 0..n-1 into the texture's layers. */
static rtomo_status copy_layers(const rtomo_cone *c, cuda_cone_dev *s, int n,
                                rtomo_error *err)
{
    cudaMemcpy3DParms p;
    memset(&p, 0, sizeof p);
    p.srcPtr = make_cudaPitchedPtr(s->slots, sizeof(float) * c->filt_u,
                                   c->filt_u, c->geom.det_v);
    p.dstArray = s->layers;
    p.extent = make_cudaExtent(c->filt_u, c->geom.det_v, n);
    p.kind = cudaMemcpyDeviceToDevice;
    RTOMO_CUDA_TRY(err, cudaMemcpy3DAsync(&p, s->stream));
    return RTOMO_OK;
}

rtomo_status cuda_cone_bp_launch(const rtomo_cone *c, cuda_cone_dev *s,
                                 rtomo_cone_kernel kernel,
                                 const cuda_cone_views *views, int z_first,
                                 int z_count, rtomo_error *err)
{
    if (views->n < 1 || z_count < 1)
        return RTOMO_OK;
    const cone_bp_const k = s->k;
    const dim3 block(BP_BLOCK_X, BP_BLOCK_Y);
    const dim3 grid((k.nx + BP_BLOCK_X - 1) / BP_BLOCK_X,
                    (k.ny + BP_BLOCK_Y - 1) / BP_BLOCK_Y,
                    (z_count + CUDA_CONE_ZCOL - 1) / CUDA_CONE_ZCOL);
    if (kernel == RTOMO_CONE_KERNEL_TEXTURE) {
        rtomo_status st = copy_layers(c, s, views->n, err);
        if (st != RTOMO_OK)
            return st;
        cone_bp_kernel<true><<<grid, block, 0, s->stream>>>(
            k, *views, s->tex, s->slots, c->filt_len, s->volume, z_first,
            z_first + z_count);
    } else {
        cone_bp_kernel<false><<<grid, block, 0, s->stream>>>(
            k, *views, s->tex, s->slots, c->filt_len, s->volume, z_first,
            z_first + z_count);
    }
    RTOMO_CUDA_CHECK_LAUNCH(err, "cone_bp_kernel");
    return RTOMO_OK;
}

/* ------------------------------------------------------------ autotune ---- */

/* The choice per device and shape, for the process. */
typedef struct tuned {
    int device, nx, ny, nz, width, rows;
    rtomo_cone_kernel kernel;
} tuned;

#define TUNED_MAX 32
static tuned tuned_cache[TUNED_MAX];
static int tuned_n;
static pthread_mutex_t tuned_lock = PTHREAD_MUTEX_INITIALIZER;

static int tuned_find(const tuned *key, rtomo_cone_kernel *out)
{
    int found = 0;
    pthread_mutex_lock(&tuned_lock);
    for (int i = 0; i < tuned_n && !found; i++) {
        const tuned *t = &tuned_cache[i];
        if (t->device == key->device && t->nx == key->nx &&
            t->ny == key->ny && t->nz == key->nz && t->width == key->width &&
            t->rows == key->rows) {
            *out = t->kernel;
            found = 1;
        }
    }
    pthread_mutex_unlock(&tuned_lock);
    return found;
}

static void tuned_store(const tuned *t)
{
    pthread_mutex_lock(&tuned_lock);
    if (tuned_n < TUNED_MAX)
        tuned_cache[tuned_n++] = *t;
    pthread_mutex_unlock(&tuned_lock);
}

/* Slices the timing runs over: enough for every SM to be busy. */
#define TUNE_SLICES 128

/* Best of 3 timed runs (after one warm-up) of `kernel` on a full chunk of
 * the zeroed slots into the volume: zeros add nothing to it. */
static rtomo_status time_kernel(const rtomo_cone *c, cuda_cone_dev *s,
                                rtomo_cone_kernel kernel, float *best_ms,
                                rtomo_error *err)
{
    cuda_cone_views views;
    views.n = c->chunk;
    for (int p = 0; p < c->chunk; p++) {
        views.cos_b[p] = c->cos_beta[p % c->geom.n_proj];
        views.sin_b[p] = c->sin_beta[p % c->geom.n_proj];
    }
    const int z_count = s->k.nz < TUNE_SLICES ? s->k.nz : TUNE_SLICES;
    cudaEvent_t start, stop;
    RTOMO_CUDA_TRY(err, cudaEventCreate(&start));
    cudaError_t rc = cudaEventCreate(&stop);
    if (rc != cudaSuccess) {
        (void)cudaEventDestroy(start);
        return rtomo_cuda_error(err, rc, "cudaEventCreate", __FILE__,
                                __LINE__);
    }
    rtomo_status st = RTOMO_OK;
    *best_ms = 1e30f;
    for (int run = 0; run < 4 && st == RTOMO_OK; run++) {
        rc = cudaEventRecord(start, s->stream);
        if (rc == cudaSuccess)
            st = cuda_cone_bp_launch(c, s, kernel, &views, 0, z_count, err);
        if (st == RTOMO_OK && rc == cudaSuccess)
            rc = cudaEventRecord(stop, s->stream);
        if (st == RTOMO_OK && rc == cudaSuccess)
            rc = cudaEventSynchronize(stop);
        float ms = 0.0f;
        if (st == RTOMO_OK && rc == cudaSuccess)
            rc = cudaEventElapsedTime(&ms, start, stop);
        if (st == RTOMO_OK && rc != cudaSuccess)
            st = rtomo_cuda_error(err, rc, "timing a cone kernel", __FILE__,
                                  __LINE__);
        if (st == RTOMO_OK && run > 0 && ms < *best_ms)
            *best_ms = ms;
    }
    (void)cudaEventDestroy(start);
    (void)cudaEventDestroy(stop);
    return st;
}

rtomo_status cuda_cone_autotune(rtomo_cone *c, cuda_cone_dev *s, rtomo_error *err)
{
    if (c->kernel != RTOMO_CONE_KERNEL_AUTO)
        return RTOMO_OK;
    tuned key = {s->device, s->k.nx, s->k.ny, s->k.nz, c->filt_u,
                 c->geom.det_v, RTOMO_CONE_KERNEL_AUTO};
    if (tuned_find(&key, &c->kernel))
        return RTOMO_OK;
    float tex_ms, alu_ms;
    rtomo_status st = time_kernel(c, s, RTOMO_CONE_KERNEL_TEXTURE, &tex_ms,
                                  err);
    if (st == RTOMO_OK)
        st = time_kernel(c, s, RTOMO_CONE_KERNEL_ALU, &alu_ms, err);
    if (st != RTOMO_OK)
        return st;
    key.kernel = tex_ms <= alu_ms ? RTOMO_CONE_KERNEL_TEXTURE
                                  : RTOMO_CONE_KERNEL_ALU;
    tuned_store(&key);
    c->kernel = key.kernel;
    return RTOMO_OK;
}
