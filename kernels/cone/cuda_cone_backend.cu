/*
 * cuda_cone_backend.cu — the CUDA backend's ops table (cone_cuda_ops):
 * the ROI's slices dealt out in slabs over the plan's devices, each slab
 * with its own stream, slots, filter and part of the volume (cuda_cone.h),
 * and the ops that move data; filtering and back-projection are launched
 * from cuda_cone_filter.cu and cuda_cone_bp.cu.
 *
 * Every projection is uploaded to and filtered on every slab's device,
 * and every chunk back-projected by every slab into its own slices, so
 * the devices work side by side and the host waits for none of them until
 * a read.  The test hook RTOMO_CUDA_CONE_SPLIT=k deals k slabs to each
 * device, so that one GPU exercises the multi-device path.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "cuda_cone.h"

static cuda_cone *impl(rtomo_cone *c) { return (cuda_cone *)c->impl; }

/* Teardown of one slab: failures have nowhere to go and are dropped. */
static void slab_destroy(cuda_cone_dev *s)
{
    if (cudaSetDevice(s->device) != cudaSuccess)
        return;
    if (s->stream)
        (void)cudaStreamSynchronize(s->stream);
    cuda_cone_bp_destroy(s);
    cuda_cone_filter_destroy(s);
    (void)cudaFree(s->volume);
    (void)cudaFree(s->slots);
    if (s->stream)
        (void)cudaStreamDestroy(s->stream);
}

static void cuda_destroy(rtomo_cone *c)
{
    cuda_cone *s = impl(c);
    if (!s)
        return;
    for (int i = 0; s->dev && i < s->n; i++)
        slab_destroy(&s->dev[i]);
    free(s->dev);
    free(s);
    c->impl = NULL;
}

/* Deal the ROI's slices to the slabs: the first nz % n get one more. */
static rtomo_status deal_slabs(rtomo_cone *c, cuda_cone *s, rtomo_error *err)
{
    int ids[RTOMO_MAX_DEVICES], n_dev = 0;
    rtomo_status st = rtomo_cuda_plan_devices(&c->opt, ids, &n_dev, err);
    if (st != RTOMO_OK)
        return st;
    const int split = rtomo_split_hook("RTOMO_CUDA_CONE_SPLIT"), nz = c->bp.nz;
    int n = n_dev * split;
    n = n < nz ? n : nz;
    s->dev = (cuda_cone_dev *)calloc((size_t)n, sizeof *s->dev);
    if (!s->dev)
        return rtomo_set_error(err, RTOMO_E_NOMEM, "out of memory");
    s->n = n;
    for (int i = 0; i < n; i++) {
        cuda_cone_dev *d = &s->dev[i];
        int z, count;
        rtomo_deal_even(nz, n, i, &z, &count);
        d->device = ids[i % n_dev];
        d->z_first = z;
        d->k = c->bp;
        d->k.nz = count;
        d->k.z0 = c->bp.z0 + (float)z * c->bp.voxel;
    }
    return RTOMO_OK;
}

static rtomo_status slab_allocate(const rtomo_cone *c, cuda_cone_dev *d,
                                  rtomo_error *err)
{
    RTOMO_CUDA_TRY(err, cudaSetDevice(d->device));
    RTOMO_CUDA_TRY(err, cudaStreamCreateWithFlags(&d->stream,
                                                  cudaStreamNonBlocking));
    const size_t voxels = (size_t)d->k.nx * d->k.ny * (size_t)d->k.nz;
    const size_t slot_bytes = sizeof(float) * c->filt_len *
                              (size_t)(c->chunk + 1);
    RTOMO_CUDA_TRY(err, cudaMalloc((void **)&d->volume,
                                   sizeof(float) * voxels));
    RTOMO_CUDA_TRY(err, cudaMalloc((void **)&d->slots, slot_bytes));
    RTOMO_CUDA_TRY(err, cudaMemsetAsync(d->volume, 0, sizeof(float) * voxels,
                                        d->stream));
    RTOMO_CUDA_TRY(err, cudaMemsetAsync(d->slots, 0, slot_bytes, d->stream));
    return RTOMO_OK;
}

static rtomo_status cuda_create(rtomo_cone *c, rtomo_error *err)
{
    cuda_cone *s = (cuda_cone *)calloc(1, sizeof *s);
    if (!s)
        return rtomo_set_error(err, RTOMO_E_NOMEM, "out of memory");
    c->impl = s;
    rtomo_status st = deal_slabs(c, s, err);
    for (int i = 0; st == RTOMO_OK && i < s->n; i++) {
        st = slab_allocate(c, &s->dev[i], err);
        if (st == RTOMO_OK)
            st = cuda_cone_filter_create(c, &s->dev[i], err);
        if (st == RTOMO_OK)
            st = cuda_cone_bp_create(c, &s->dev[i], err);
    }
    /* Timed on the first slab; every slab then runs the same kernel. */
    if (st == RTOMO_OK) {
        const cudaError_t rc = cudaSetDevice(s->dev[0].device);
        if (rc != cudaSuccess)
            st = rtomo_cuda_error(err, rc, "cudaSetDevice", __FILE__,
                                  __LINE__);
    }
    if (st == RTOMO_OK)
        st = cuda_cone_autotune(c, &s->dev[0], err);
    if (st != RTOMO_OK)
        cuda_destroy(c);
    return st;
}

static rtomo_status cuda_filter(rtomo_cone *c, const float *li,
                                const float *row_weights, int slot,
                                rtomo_error *err)
{
    cuda_cone *s = impl(c);
    for (int i = 0; i < s->n; i++) {
        cuda_cone_dev *d = &s->dev[i];
        RTOMO_CUDA_TRY(err, cudaSetDevice(d->device));
        RTOMO_CUDA_TRY(err, cudaMemcpyAsync(d->frame, li,
                                            sizeof(float) * c->frame_len,
                                            cudaMemcpyHostToDevice,
                                            d->stream));
        RTOMO_CUDA_TRY(err, cudaMemcpyAsync(d->row_weights, row_weights,
                                            sizeof(float) * c->geom.det_u,
                                            cudaMemcpyHostToDevice,
                                            d->stream));
        rtomo_status st = cuda_cone_filter_run(c, d, slot, err);
        if (st != RTOMO_OK)
            return st;
    }
    return RTOMO_OK;
}

static rtomo_status cuda_load(rtomo_cone *c, int slot, const float *filtered,
                              rtomo_error *err)
{
    cuda_cone *s = impl(c);
    for (int i = 0; i < s->n; i++) {
        cuda_cone_dev *d = &s->dev[i];
        RTOMO_CUDA_TRY(err, cudaSetDevice(d->device));
        RTOMO_CUDA_TRY(err, cudaMemcpyAsync(d->slots +
                                                (size_t)slot * c->filt_len,
                                            filtered,
                                            sizeof(float) * c->filt_len,
                                            cudaMemcpyHostToDevice,
                                            d->stream));
    }
    return RTOMO_OK;
}

/* Every slab filtered the same projection: the first one's copy. */
static rtomo_status cuda_fetch(rtomo_cone *c, int slot, float *filtered,
                               rtomo_error *err)
{
    cuda_cone_dev *d = &impl(c)->dev[0];
    RTOMO_CUDA_TRY(err, cudaSetDevice(d->device));
    RTOMO_CUDA_TRY(err, cudaMemcpyAsync(filtered,
                                        d->slots + (size_t)slot * c->filt_len,
                                        sizeof(float) * c->filt_len,
                                        cudaMemcpyDeviceToHost, d->stream));
    RTOMO_CUDA_TRY(err, cudaStreamSynchronize(d->stream));
    return RTOMO_OK;
}

static rtomo_status cuda_backproject(rtomo_cone *c, const int *indices, int n,
                                     rtomo_error *err)
{
    cuda_cone *s = impl(c);
    cuda_cone_views views;
    views.n = n;
    for (int i = 0; i < n; i++) {
        views.cos_b[i] = c->cos_beta[indices[i]];
        views.sin_b[i] = c->sin_beta[indices[i]];
    }
    for (int i = 0; i < s->n; i++) {
        cuda_cone_dev *d = &s->dev[i];
        RTOMO_CUDA_TRY(err, cudaSetDevice(d->device));
        rtomo_status st = cuda_cone_bp_launch(c, d, c->kernel, &views, 0,
                                              d->k.nz, err);
        if (st != RTOMO_OK)
            return st;
    }
    return RTOMO_OK;
}

/* The part of ROI slices [z_first, z_first + z_count) in each slab. */
static rtomo_status cuda_read(rtomo_cone *c, int z_first, int z_count,
                              float *out, rtomo_error *err)
{
    cuda_cone *s = impl(c);
    const size_t plane = (size_t)c->bp.nx * (size_t)c->bp.ny;
    const int z_end = z_first + z_count;
    for (int i = 0; i < s->n; i++) {
        cuda_cone_dev *d = &s->dev[i];
        const int lo = z_first > d->z_first ? z_first : d->z_first;
        const int hi = z_end < d->z_first + d->k.nz ? z_end
                                                     : d->z_first + d->k.nz;
        if (lo >= hi)
            continue;
        RTOMO_CUDA_TRY(err, cudaSetDevice(d->device));
        RTOMO_CUDA_TRY(err, cudaMemcpyAsync(
                                out + (size_t)(lo - z_first) * plane,
                                d->volume + (size_t)(lo - d->z_first) * plane,
                                sizeof(float) * plane * (size_t)(hi - lo),
                                cudaMemcpyDeviceToHost, d->stream));
    }
    for (int i = 0; i < s->n; i++) {
        RTOMO_CUDA_TRY(err, cudaSetDevice(s->dev[i].device));
        RTOMO_CUDA_TRY(err, cudaStreamSynchronize(s->dev[i].stream));
    }
    return RTOMO_OK;
}

static rtomo_status cuda_reset(rtomo_cone *c, rtomo_error *err)
{
    cuda_cone *s = impl(c);
    for (int i = 0; i < s->n; i++) {
        cuda_cone_dev *d = &s->dev[i];
        const size_t voxels = (size_t)d->k.nx * d->k.ny * (size_t)d->k.nz;
        RTOMO_CUDA_TRY(err, cudaSetDevice(d->device));
        RTOMO_CUDA_TRY(err, cudaMemsetAsync(d->volume, 0,
                                            sizeof(float) * voxels,
                                            d->stream));
    }
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
