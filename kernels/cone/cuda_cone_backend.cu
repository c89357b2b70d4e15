/*
 * cuda_cone_backend.cu — the CUDA backend's ops table (cone_cuda_ops):
 * its state on the plan's first device (one stream, the ROI volume and
 * the slots in device memory), and the ops that move data; filtering and
 * back-projection are launched from cuda_cone_filter.cu and
 * cuda_cone_bp.cu.  Not done: several GPUs (slabs of the volume over
 * devices would share every filtered projection).
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "cuda_cone.h"

static cuda_cone *impl(rtomo_cone *c) { return (cuda_cone *)c->impl; }

static void cuda_destroy(rtomo_cone *c)
{
    cuda_cone *s = impl(c);
    if (!s)
        return;
    /* Teardown: failures have nowhere to go and are dropped. */
    if (cudaSetDevice(s->device) == cudaSuccess) {
        if (s->stream)
            (void)cudaStreamSynchronize(s->stream);
        cuda_cone_bp_destroy(s);
        cuda_cone_filter_destroy(s);
        (void)cudaFree(s->volume);
        (void)cudaFree(s->slots);
        if (s->stream)
            (void)cudaStreamDestroy(s->stream);
    }
    free(s);
    c->impl = NULL;
}

static rtomo_status allocate(rtomo_cone *c, cuda_cone *s, rtomo_error *err)
{
    int ids[RTOMO_MAX_DEVICES], n = 0;
    rtomo_status st = rtomo_cuda_plan_devices(&c->opt, ids, &n, err);
    if (st != RTOMO_OK)
        return st;
    s->device = ids[0];
    RTOMO_CUDA_TRY(err, cudaSetDevice(s->device));
    RTOMO_CUDA_TRY(err, cudaStreamCreateWithFlags(&s->stream,
                                                  cudaStreamNonBlocking));
    const size_t slot_bytes = sizeof(float) * c->filt_len *
                              (size_t)(c->chunk + 1);
    RTOMO_CUDA_TRY(err, cudaMalloc((void **)&s->volume,
                                   sizeof(float) * c->volume_len));
    RTOMO_CUDA_TRY(err, cudaMalloc((void **)&s->slots, slot_bytes));
    RTOMO_CUDA_TRY(err, cudaMemsetAsync(s->volume, 0,
                                        sizeof(float) * c->volume_len,
                                        s->stream));
    RTOMO_CUDA_TRY(err, cudaMemsetAsync(s->slots, 0, slot_bytes, s->stream));
    return RTOMO_OK;
}

static rtomo_status cuda_create(rtomo_cone *c, rtomo_error *err)
{
    cuda_cone *s = (cuda_cone *)calloc(1, sizeof *s);
    if (!s)
        return rtomo_set_error(err, RTOMO_E_NOMEM, "out of memory");
    c->impl = s;
    rtomo_status st = allocate(c, s, err);
    if (st == RTOMO_OK)
        st = cuda_cone_filter_create(c, s, err);
    if (st == RTOMO_OK)
        st = cuda_cone_bp_create(c, s, err);
    if (st == RTOMO_OK)
        st = cuda_cone_autotune(c, s, err);
    if (st != RTOMO_OK)
        cuda_destroy(c);
    return st;
}

static rtomo_status cuda_filter(rtomo_cone *c, const float *li,
                                const float *row_weights, int slot,
                                rtomo_error *err)
{
    cuda_cone *s = impl(c);
    RTOMO_CUDA_TRY(err, cudaSetDevice(s->device));
    RTOMO_CUDA_TRY(err, cudaMemcpyAsync(s->frame, li,
                                        sizeof(float) * c->frame_len,
                                        cudaMemcpyHostToDevice, s->stream));
    RTOMO_CUDA_TRY(err, cudaMemcpyAsync(s->row_weights, row_weights,
                                        sizeof(float) * c->geom.det_u,
                                        cudaMemcpyHostToDevice, s->stream));
    return cuda_cone_filter_run(c, s, slot, err);
}

static rtomo_status cuda_load(rtomo_cone *c, int slot, const float *filtered,
                              rtomo_error *err)
{
    cuda_cone *s = impl(c);
    RTOMO_CUDA_TRY(err, cudaSetDevice(s->device));
    RTOMO_CUDA_TRY(err, cudaMemcpyAsync(s->slots + (size_t)slot * c->filt_len,
                                        filtered,
                                        sizeof(float) * c->filt_len,
                                        cudaMemcpyHostToDevice, s->stream));
    return RTOMO_OK;
}

static rtomo_status cuda_fetch(rtomo_cone *c, int slot, float *filtered,
                               rtomo_error *err)
{
    cuda_cone *s = impl(c);
    RTOMO_CUDA_TRY(err, cudaSetDevice(s->device));
    RTOMO_CUDA_TRY(err, cudaMemcpyAsync(filtered,
                                        s->slots + (size_t)slot * c->filt_len,
                                        sizeof(float) * c->filt_len,
                                        cudaMemcpyDeviceToHost, s->stream));
    RTOMO_CUDA_TRY(err, cudaStreamSynchronize(s->stream));
    return RTOMO_OK;
}

static rtomo_status cuda_backproject(rtomo_cone *c, const int *indices, int n,
                                     rtomo_error *err)
{
    cuda_cone *s = impl(c);
    RTOMO_CUDA_TRY(err, cudaSetDevice(s->device));
    cuda_cone_views views;
    views.n = n;
    for (int i = 0; i < n; i++) {
        views.cos_b[i] = c->cos_beta[indices[i]];
        views.sin_b[i] = c->sin_beta[indices[i]];
    }
    return cuda_cone_bp_launch(c, s, c->kernel, &views, 0, c->bp.nz, err);
}

static rtomo_status cuda_read(rtomo_cone *c, int z_first, int z_count,
                              float *out, rtomo_error *err)
{
    cuda_cone *s = impl(c);
    const size_t plane = (size_t)c->bp.nx * (size_t)c->bp.ny;
    RTOMO_CUDA_TRY(err, cudaSetDevice(s->device));
    RTOMO_CUDA_TRY(err, cudaMemcpyAsync(out,
                                        s->volume + (size_t)z_first * plane,
                                        sizeof(float) * plane *
                                            (size_t)z_count,
                                        cudaMemcpyDeviceToHost, s->stream));
    RTOMO_CUDA_TRY(err, cudaStreamSynchronize(s->stream));
    return RTOMO_OK;
}

static rtomo_status cuda_reset(rtomo_cone *c, rtomo_error *err)
{
    cuda_cone *s = impl(c);
    RTOMO_CUDA_TRY(err, cudaSetDevice(s->device));
    RTOMO_CUDA_TRY(err, cudaMemsetAsync(s->volume, 0,
                                        sizeof(float) * c->volume_len,
                                        s->stream));
    return RTOMO_OK;
}

extern "C" const cone_backend_ops cone_cuda_ops = {
    "cuda",
    cuda_create,
    cuda_destroy,
    cuda_filter,
    cuda_load,
    cuda_fetch,
    cuda_backproject,
    cuda_read,
    cuda_reset,
};
