/*
 * cuda_iter_backend.cu — the CUDA backend of the iterative engine
 * (rtomo_cuda_iter_ops): vectors in device memory, the matched pair and
 * the vector ops as kernels (cuda_iter_kernels.cu), on the first of the
 * plan's devices.
 *
 * Streams: two per plan.  A (project) packs group g + 1 of
 * CUDA_ITER_A_SLICES rows on one stream while group g projects on the
 * other (two packed scratch slots).
 * Uploads and downloads go through two pinned staging buffers of 8 MiB:
 * the host copies chunk k + 1 into one while the DMA engine moves chunk k
 * from the other, so pageable caller memory moves at close to pinned
 * speed.  Every op is synchronous (iter_internal.h): it waits for its
 * streams before returning.
 *
 * Not done: several GPUs (slabs of rows over devices); a plan uses
 * opt->device_ids[0] (or device 0).
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "cuda_common.h"
#include "cuda_iter.h"

#define STAGE_BYTES ((size_t)8 << 20)

typedef struct cuda_iter {
    int device;
    cudaStream_t stream[2];
    cudaEvent_t staged[2];      /* staging buffer k is free again */
    cuda_iter_launch launch;
    iter_sf_proj *proj;         /* device copy of it->proj */
    float4 *packed[2], *packed_t[2];    /* A's scratch, per stream */
    float *coef;                /* axpby: 2 x row_count floats, device */
    float *coef_host;           /* pinned */
    double *partial;            /* dot: row_count x blocks, device */
    double *partial_host;       /* pinned */
    size_t partial_cap;         /* doubles */
    void *stage[2];             /* pinned, STAGE_BYTES each */
} cuda_iter;

static cuda_iter *impl(rtomo_iter *it) { return (cuda_iter *)it->impl; }

static rtomo_status use_device(cuda_iter *c, rtomo_error *err)
{
    RTOMO_CUDA_TRY(err, cudaSetDevice(c->device));
    return RTOMO_OK;
}

static rtomo_status sync_streams(cuda_iter *c, rtomo_error *err)
{
    RTOMO_CUDA_TRY(err, cudaStreamSynchronize(c->stream[0]));
    RTOMO_CUDA_TRY(err, cudaStreamSynchronize(c->stream[1]));
    return RTOMO_OK;
}

static void cuda_destroy(rtomo_iter *it)
{
    cuda_iter *c = impl(it);
    if (!c)
        return;
    /* Teardown: errors here have nowhere to go (a failed free leaves
     * nothing to retry), so they are read and dropped. */
    if (cudaSetDevice(c->device) == cudaSuccess) {
        for (int k = 0; k < 2; k++) {
            if (c->stream[k]) {
                (void)cudaStreamSynchronize(c->stream[k]);
                (void)cudaStreamDestroy(c->stream[k]);
            }
            if (c->staged[k])
                (void)cudaEventDestroy(c->staged[k]);
            (void)cudaFree(c->packed[k]);
            (void)cudaFree(c->packed_t[k]);
            (void)cudaFreeHost(c->stage[k]);
        }
        (void)cudaFree(c->proj);
        (void)cudaFree(c->coef);
        (void)cudaFree(c->partial);
        (void)cudaFreeHost(c->coef_host);
        (void)cudaFreeHost(c->partial_host);
        (void)cudaGetLastError();
    }
    free(c);
    it->impl = NULL;
}

static rtomo_status cuda_create(rtomo_iter *it, rtomo_error *err)
{
    int ids[RTOMO_MAX_DEVICES], n_devices = 0;
    rtomo_status st = rtomo_cuda_plan_devices(&it->opt, ids, &n_devices, err);
    if (st != RTOMO_OK)
        return st;
    cuda_iter *c = (cuda_iter *)calloc(1, sizeof *c);
    if (!c)
        return rtomo_set_error(err, RTOMO_E_NOMEM, "out of memory");
    it->impl = c;
    c->device = ids[0];
    RTOMO_CUDA_TRY(err, cudaSetDevice(c->device));

    const int N = it->geom.slice_size, rows = it->geom.row_count;
    const size_t plane = (size_t)N * N;
    for (int k = 0; k < 2; k++) {
        RTOMO_CUDA_TRY(err, cudaStreamCreateWithFlags(&c->stream[k],
                                                      cudaStreamNonBlocking));
        RTOMO_CUDA_TRY(err, cudaEventCreateWithFlags(&c->staged[k],
                                                     cudaEventDisableTiming));
        const size_t packed_bytes = sizeof(float4) * CUDA_ITER_A_PACK * plane;
        RTOMO_CUDA_TRY(err, cudaMalloc((void **)&c->packed[k], packed_bytes));
        RTOMO_CUDA_TRY(err, cudaMalloc((void **)&c->packed_t[k],
                                       packed_bytes));
        RTOMO_CUDA_TRY(err, cudaHostAlloc(&c->stage[k], STAGE_BYTES,
                                          cudaHostAllocDefault));
    }
    RTOMO_CUDA_TRY(err, cudaMalloc((void **)&c->proj,
                                   sizeof(iter_sf_proj) * it->geom.n_proj));
    RTOMO_CUDA_TRY(err, cudaMemcpy(c->proj, it->proj,
                                   sizeof(iter_sf_proj) * it->geom.n_proj,
                                   cudaMemcpyHostToDevice));
    RTOMO_CUDA_TRY(err, cudaMalloc((void **)&c->coef,
                                   sizeof(float) * 2 * (size_t)rows));
    RTOMO_CUDA_TRY(err, cudaHostAlloc((void **)&c->coef_host,
                                      sizeof(float) * 2 * (size_t)rows,
                                      cudaHostAllocDefault));
    /* Dot partial sums for the longer of the two spaces. */
    const size_t longest = it->image_len > it->sino_len ? it->image_len
                                                        : it->sino_len;
    c->partial_cap = (size_t)rows * cuda_iter_dot_blocks(longest);
    RTOMO_CUDA_TRY(err, cudaMalloc((void **)&c->partial,
                                   sizeof(double) * c->partial_cap));
    RTOMO_CUDA_TRY(err, cudaHostAlloc((void **)&c->partial_host,
                                      sizeof(double) * c->partial_cap,
                                      cudaHostAllocDefault));

    c->launch.size = N;
    c->launch.width = it->geom.det_width;
    c->launch.n_proj = it->geom.n_proj;
    c->launch.proj = c->proj;
    const char *single = getenv("RTOMO_CUDA_ITER_SINGLE");
    c->launch.single = single && strcmp(single, "1") == 0;
    return RTOMO_OK;
}

/* ------------------------------------------------------------ vectors ---- */

static rtomo_status cuda_vec_alloc(rtomo_iter *it, iter_vec *v,
                                   rtomo_error *err)
{
    cuda_iter *c = impl(it);
    rtomo_status st = use_device(c, err);
    if (st != RTOMO_OK)
        return st;
    const size_t bytes = sizeof(float) * (size_t)v->n * v->row_len;
    float *d = NULL;
    RTOMO_CUDA_TRY(err, cudaMalloc((void **)&d, bytes ? bytes : 1));
    cudaError_t rc = cudaMemset(d, 0, bytes);
    if (rc != cudaSuccess) {
        (void)cudaFree(d);
        return rtomo_cuda_error(err, rc, "cudaMemset(vector)", __FILE__,
                                __LINE__);
    }
    v->data = d;
    v->priv = NULL;
    return RTOMO_OK;
}

static void cuda_vec_free(rtomo_iter *it, iter_vec *v)
{
    cuda_iter *c = impl(it);
    if (v->data && cudaSetDevice(c->device) == cudaSuccess)
        (void)cudaFree(v->data);    /* nothing to do about a failure */
    (void)cudaGetLastError();
    v->data = NULL;
}

static rtomo_status cuda_vec_upload(rtomo_iter *it, iter_vec *v,
                                    const float *host, rtomo_error *err)
{
    cuda_iter *c = impl(it);
    rtomo_status st = use_device(c, err);
    if (st != RTOMO_OK)
        return st;
    const size_t bytes = sizeof(float) * (size_t)v->n * v->row_len;
    const char *src = (const char *)host;
    char *dst = (char *)v->data;
    int k = 0;
    for (size_t off = 0; off < bytes; off += STAGE_BYTES, k ^= 1) {
        const size_t len = bytes - off < STAGE_BYTES ? bytes - off : STAGE_BYTES;
        /* Buffer k's previous chunk is on its way: wait, refill, send. */
        RTOMO_CUDA_TRY(err, cudaEventSynchronize(c->staged[k]));
        memcpy(c->stage[k], src + off, len);
        RTOMO_CUDA_TRY(err, cudaMemcpyAsync(dst + off, c->stage[k], len,
                                            cudaMemcpyHostToDevice,
                                            c->stream[k]));
        RTOMO_CUDA_TRY(err, cudaEventRecord(c->staged[k], c->stream[k]));
    }
    return sync_streams(c, err);
}

static rtomo_status cuda_vec_download(rtomo_iter *it, const iter_vec *v,
                                      float *host, rtomo_error *err)
{
    cuda_iter *c = impl(it);
    rtomo_status st = use_device(c, err);
    if (st != RTOMO_OK)
        return st;
    const size_t bytes = sizeof(float) * (size_t)v->n * v->row_len;
    const size_t chunks = (bytes + STAGE_BYTES - 1) / STAGE_BYTES;
    const char *src = (const char *)v->data;
    char *dst = (char *)host;
    /* Chunk k goes to buffer k % 2; chunk k + 1 is in flight while the
     * host copies chunk k out. */
    for (size_t k = 0; k <= chunks; k++) {
        if (k < chunks) {
            const size_t off = k * STAGE_BYTES;
            const size_t len = bytes - off < STAGE_BYTES ? bytes - off
                                                          : STAGE_BYTES;
            RTOMO_CUDA_TRY(err, cudaMemcpyAsync(c->stage[k % 2], src + off,
                                                len, cudaMemcpyDeviceToHost,
                                                c->stream[k % 2]));
            RTOMO_CUDA_TRY(err, cudaEventRecord(c->staged[k % 2],
                                                c->stream[k % 2]));
        }
        if (k > 0) {
            const size_t d = k - 1, off = d * STAGE_BYTES;
            const size_t len = bytes - off < STAGE_BYTES ? bytes - off
                                                          : STAGE_BYTES;
            RTOMO_CUDA_TRY(err, cudaEventSynchronize(c->staged[d % 2]));
            memcpy(dst + off, c->stage[d % 2], len);
        }
    }
    return sync_streams(c, err);
}

/* ---------------------------------------------------------- projector ---- */

static rtomo_status cuda_project(rtomo_iter *it, const iter_vec *x,
                                 iter_vec *y, rtomo_error *err)
{
    cuda_iter *c = impl(it);
    rtomo_status st = use_device(c, err);
    if (st != RTOMO_OK)
        return st;
    const int n = x->n;
    for (int g = 0, k = 0; g < n; g += CUDA_ITER_A_SLICES, k ^= 1) {
        const int valid = n - g < CUDA_ITER_A_SLICES ? n - g
                                                     : CUDA_ITER_A_SLICES;
        /* Group g + 1 packs on the other stream while g projects. */
        if ((st = cuda_iter_pack(&c->launch, x->data + (size_t)g * it->image_len,
                                 valid, c->packed[k], c->packed_t[k],
                                 c->stream[k], err)) ||
            (st = cuda_iter_project(&c->launch, c->packed[k], c->packed_t[k],
                                    valid, y->data + (size_t)g * it->sino_len,
                                    c->stream[k], err)))
            return st;
    }
    return sync_streams(c, err);
}

static rtomo_status cuda_backproject(rtomo_iter *it, const iter_vec *y,
                                     iter_vec *x, rtomo_error *err)
{
    cuda_iter *c = impl(it);
    rtomo_status st = use_device(c, err);
    if (st != RTOMO_OK ||
        (st = cuda_iter_backproject(&c->launch, y->data, y->n, x->data,
                                    c->stream[0], err)))
        return st;
    RTOMO_CUDA_TRY(err, cudaStreamSynchronize(c->stream[0]));
    return RTOMO_OK;
}

/* -------------------------------------------------------- vector ops ---- */

static rtomo_status cuda_dot(rtomo_iter *it, const iter_vec *a,
                             const iter_vec *b, double *out, rtomo_error *err)
{
    cuda_iter *c = impl(it);
    rtomo_status st = use_device(c, err);
    if (st != RTOMO_OK)
        return st;
    const int blocks = cuda_iter_dot_blocks(a->row_len);
    const size_t count = (size_t)a->n * blocks;
    if (count > c->partial_cap)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "iterative dot: %d rows exceed the plan's %d",
                               a->n, it->geom.row_count);
    if ((st = cuda_iter_dot(a->data, b->data, a->n, a->row_len, c->partial,
                            c->stream[0], err)))
        return st;
    RTOMO_CUDA_TRY(err, cudaMemcpyAsync(c->partial_host, c->partial,
                                        sizeof(double) * count,
                                        cudaMemcpyDeviceToHost, c->stream[0]));
    RTOMO_CUDA_TRY(err, cudaStreamSynchronize(c->stream[0]));
    /* Summed in a fixed order: the same inputs give the same bits. */
    for (int i = 0; i < a->n; i++) {
        double s = 0.0;
        for (int k = 0; k < blocks; k++)
            s += c->partial_host[(size_t)i * blocks + k];
        out[i] = s;
    }
    return RTOMO_OK;
}

static rtomo_status cuda_axpby(rtomo_iter *it, const double *alpha,
                               const iter_vec *x, const double *beta,
                               iter_vec *y, rtomo_error *err)
{
    cuda_iter *c = impl(it);
    rtomo_status st = use_device(c, err);
    if (st != RTOMO_OK)
        return st;
    const int n = y->n;
    if (n > it->geom.row_count)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "iterative axpby: %d rows exceed the plan's %d",
                               n, it->geom.row_count);
    /* The previous call's coefficients may still be in flight: the stream
     * is synchronised at the end of every call, so the buffer is free. */
    for (int i = 0; i < n; i++) {
        c->coef_host[i] = (float)alpha[i];
        c->coef_host[n + i] = (float)beta[i];
    }
    RTOMO_CUDA_TRY(err, cudaMemcpyAsync(c->coef, c->coef_host,
                                        sizeof(float) * 2 * (size_t)n,
                                        cudaMemcpyHostToDevice, c->stream[0]));
    if ((st = cuda_iter_axpby(c->coef, x->data, y->data, n, y->row_len,
                              c->stream[0], err)))
        return st;
    RTOMO_CUDA_TRY(err, cudaStreamSynchronize(c->stream[0]));
    return RTOMO_OK;
}

static rtomo_status cuda_mul(rtomo_iter *it, const iter_vec *w, iter_vec *y,
                             rtomo_error *err)
{
    cuda_iter *c = impl(it);
    rtomo_status st = use_device(c, err);
    if (st != RTOMO_OK ||
        (st = cuda_iter_mul(w->data, y->data, y->n, y->row_len, c->stream[0],
                            err)))
        return st;
    RTOMO_CUDA_TRY(err, cudaStreamSynchronize(c->stream[0]));
    return RTOMO_OK;
}

static rtomo_status cuda_clamp(rtomo_iter *it, iter_vec *x, rtomo_error *err)
{
    cuda_iter *c = impl(it);
    rtomo_status st = use_device(c, err);
    if (st != RTOMO_OK ||
        (st = cuda_iter_clamp(x->data, (size_t)x->n * x->row_len,
                              c->stream[0], err)))
        return st;
    RTOMO_CUDA_TRY(err, cudaStreamSynchronize(c->stream[0]));
    return RTOMO_OK;
}

static rtomo_status cuda_ray(rtomo_iter *it, const iter_vec *x, iter_vec *y,
                             rtomo_error *err)
{
    cuda_iter *c = impl(it);
    rtomo_status st = use_device(c, err);
    if (st == RTOMO_OK)
        st = cuda_iter_ray_project(&c->launch, x->data, x->n, y->data,
                                   c->stream[0], err);
    if (st != RTOMO_OK)
        return st;
    /* Synchronous like every op (file comment): the caller may read y or
     * time the call as soon as it returns. */
    RTOMO_CUDA_TRY(err, cudaStreamSynchronize(c->stream[0]));
    return RTOMO_OK;
}

extern "C" const rtomo_iter_backend_ops rtomo_cuda_iter_ops = {
    "cuda",
    cuda_create,
    cuda_destroy,
    cuda_vec_alloc,
    cuda_vec_free,
    cuda_vec_upload,
    cuda_vec_download,
    cuda_project,
    cuda_backproject,
    cuda_dot,
    cuda_axpby,
    cuda_mul,
    cuda_clamp,
    cuda_ray,
};
