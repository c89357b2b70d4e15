/*
 * cuda_cone_sf_stream_ops.cu — the streamed cone SF pair's A, A^T and
 * backend ops (cone_sf_stream_ops): host vectors, slabs through the GPUs'
 * lanes.  The how and why are in cuda_cone_sf_stream.cu's comment; the
 * state is cuda_cone_sf_stream.h's.  Every op is synchronous, as the
 * iterative front end wants (iter_internal.h).
 */
#include "config.h"

#include <stdlib.h>

#include "cuda_cone_sf_stream.h"

static cuda_cone_sf *pair_of(rtomo_iter *it)
{
    return (cuda_cone_sf *)((cone_iter *)it->impl)->pair;
}

static cuda_cone_sf_stream *streamed_of(rtomo_iter *it)
{
    return pair_of(it)->streamed;
}

static size_t plane_of(const cuda_cone_sf *s)
{
    return (size_t)s->k.nx * (size_t)s->k.ny;
}

/* Slab b's lane: the GPUs in turn, on each its lanes in turn. */
static stream_lane *lane_of(cuda_cone_sf_stream *st, int b)
{
    return &st->devs[b % st->n_devs]
                .lane[(b / st->n_devs) % CONE_SF_LANES];
}

/* Slab b as its kernels see the pair: the owner's switches, the slab's
 * k and window rows, its GPU's tables (l_theta from the window's first
 * row) and its lane's stream. */
static cuda_cone_sf slab_view(const cuda_cone_sf *s, int b)
{
    const cuda_cone_sf_stream *st = s->streamed;
    const cuda_cone_sf_slab *sl = &st->slabs[b];
    const stream_dev *d = &st->devs[sl->dev];
    cuda_cone_sf v = *s;
    v.device = d->device;
    v.stream = d->lane[(b / st->n_devs) % CONE_SF_LANES].stream;
    v.k = sl->k;
    v.frame_len = (size_t)sl->rows * (size_t)s->k.det_u;
    v.amp_theta = d->amp_theta + (size_t)sl->row0 * s->k.det_u;
    v.cos_b = d->cos_b;
    v.sin_b = d->sin_b;
    v.weighted = NULL;
    v.n_slabs = 1;
    v.n_devs = 0;
    v.slabs = NULL;
    v.devs = NULL;
    v.streamed = NULL;
    return v;
}

/* Every lane drained, even after a failure (the host buffers they copy
 * from or into must not change under them); the first error returned. */
static rtomo_status drain(cuda_cone_sf_stream *st, rtomo_status was,
                          rtomo_error *err)
{
    rtomo_status rc = was;
    for (int d = 0; d < st->n_devs; d++) {
        cudaError_t e = cudaSetDevice(st->devs[d].device);
        for (int l = 0; e == cudaSuccess && l < CONE_SF_LANES; l++)
            e = cudaStreamSynchronize(st->devs[d].lane[l].stream);
        if (e != cudaSuccess && rc == RTOMO_OK)
            rc = rtomo_cuda_error(err, e, "cudaStreamSynchronize", __FILE__,
                                  __LINE__);
    }
    return rc;
}

/* ------------------------------------------------------------------ A ---- */

/* Slab b of x (host) through its lane: copied on the host into the
 * lane's pinned slab staging (once the lane's last upload from it is
 * done), uploaded, projected into the zeroed window, l_theta, the window
 * downloaded into the lane's pinned window staging, the lane's event.
 * The host copy runs while the GPUs work on the slabs queued before. */
static rtomo_status queue_project(cuda_cone_sf *s, int b, const float *x,
                                  rtomo_error *err)
{
    cuda_cone_sf_stream *st = s->streamed;
    const cuda_cone_sf_slab *sl = &st->slabs[b];
    stream_lane *ln = lane_of(st, b);
    cuda_cone_sf v = slab_view(s, b);
    const size_t win = sizeof(float) * v.frame_len * (size_t)s->n_proj;
    const size_t n = plane_of(s) * (size_t)sl->k.nz;
    rtomo_status rc = RTOMO_OK;
    RTOMO_CUDA_TRY(err, cudaEventSynchronize(ln->up));
    cone_host_copy(st->host, ln->slab_host,
                   x + plane_of(s) * (size_t)sl->z_first, n);
    RTOMO_CUDA_TRY(err, cudaSetDevice(v.device));
    RTOMO_CUDA_TRY(err, cudaMemcpyAsync(ln->slab, ln->slab_host,
                                        sizeof(float) * n,
                                        cudaMemcpyHostToDevice, v.stream));
    RTOMO_CUDA_TRY(err, cudaEventRecord(ln->up, v.stream));
    RTOMO_CUDA_TRY(err, cudaMemsetAsync(ln->window, 0, win, v.stream));
    if (!st->copy_only &&
        ((rc = cuda_cone_sf_project_raw(&v, ln->slab, ln->window, err)) !=
             RTOMO_OK ||
         (rc = cuda_cone_sf_amplitude(&v, ln->window, ln->window, err)) !=
             RTOMO_OK))
        return rc;
    RTOMO_CUDA_TRY(err, cudaMemcpyAsync(ln->window_host, ln->window, win,
                                        cudaMemcpyDeviceToHost, v.stream));
    RTOMO_CUDA_TRY(err, cudaEventRecord(ln->done, v.stream));
    return RTOMO_OK;
}

/* Slab b's window, once downloaded, added into y on the host. */
static rtomo_status add_slab(cuda_cone_sf *s, int b, float *y,
                             rtomo_error *err)
{
    cuda_cone_sf_stream *st = s->streamed;
    const cuda_cone_sf_slab *sl = &st->slabs[b];
    stream_lane *ln = lane_of(st, b);
    RTOMO_CUDA_TRY(err, cudaEventSynchronize(ln->done));
    const size_t win = (size_t)sl->rows * (size_t)s->k.det_u;
    cone_host_add_window(st->host, ln->window_host, win,
                         (size_t)sl->row0 * s->k.det_u, s->frame_len,
                         s->n_proj, y);
    return RTOMO_OK;
}

/* y = A x, one row (host arrays).  Slab b is copied into its staging
 * while the slabs queued before it run, and added while the slabs queued
 * after it run; its lane is queued again only after that (the window
 * staging is reused), lanes - 1 slabs later. */
static rtomo_status stream_project(cuda_cone_sf *s, const float *x, float *y,
                                   rtomo_error *err)
{
    cuda_cone_sf_stream *st = s->streamed;
    const int lanes = st->n_devs * CONE_SF_LANES, n = st->plan.n_slabs;
    rtomo_status rc = RTOMO_OK;
    int added = 0;
    for (int b = 0; rc == RTOMO_OK && b < n; b++) {
        if (st->slabs[b].rows > 0)
            rc = queue_project(s, b, x, err);
        /* y zeroed while the first slab runs (no add comes before). */
        if (b == 0)
            cone_host_zero(st->host, y, s->frame_len * (size_t)s->n_proj);
        for (; rc == RTOMO_OK && added <= b - (lanes - 1); added++)
            if (st->slabs[added].rows > 0)
                rc = add_slab(s, added, y, err);
    }
    for (; rc == RTOMO_OK && added < n; added++)
        if (st->slabs[added].rows > 0)
            rc = add_slab(s, added, y, err);
    return drain(st, rc, err);
}

/* ---------------------------------------------------------------- A^T ---- */

/* Slab b's rows of every view of y gathered on the host into its lane's
 * pinned window staging, once the lane's last upload from it is done (a
 * slab that misses the detector: its part of x zeroed instead). */
static rtomo_status gather_slab(cuda_cone_sf *s, int b, const float *y,
                                float *x, rtomo_error *err)
{
    cuda_cone_sf_stream *st = s->streamed;
    const cuda_cone_sf_slab *sl = &st->slabs[b];
    if (sl->rows == 0) {
        cone_host_zero(st->host, x + plane_of(s) * (size_t)sl->z_first,
                       plane_of(s) * (size_t)sl->k.nz);
        return RTOMO_OK;
    }
    stream_lane *ln = lane_of(st, b);
    RTOMO_CUDA_TRY(err, cudaEventSynchronize(ln->up));
    cone_host_gather_window(st->host, y, (size_t)sl->rows * s->k.det_u,
                            (size_t)sl->row0 * s->k.det_u, s->frame_len,
                            s->n_proj, ln->window_host);
    return RTOMO_OK;
}

/* Slab b's A^T through its lane: the gathered window uploaded (one
 * copy), l_theta, back-projected, the slab downloaded into the lane's
 * pinned slab staging, the lane's event. */
static rtomo_status queue_backproject(cuda_cone_sf *s, int b,
                                      rtomo_error *err)
{
    cuda_cone_sf_stream *st = s->streamed;
    const cuda_cone_sf_slab *sl = &st->slabs[b];
    if (sl->rows == 0)
        return RTOMO_OK;
    const size_t slab = sizeof(float) * plane_of(s) * (size_t)sl->k.nz;
    stream_lane *ln = lane_of(st, b);
    cuda_cone_sf v = slab_view(s, b);
    rtomo_status rc = RTOMO_OK;
    RTOMO_CUDA_TRY(err, cudaSetDevice(v.device));
    RTOMO_CUDA_TRY(err, cudaMemcpyAsync(ln->window, ln->window_host,
                                        sizeof(float) * v.frame_len *
                                            (size_t)s->n_proj,
                                        cudaMemcpyHostToDevice, v.stream));
    RTOMO_CUDA_TRY(err, cudaEventRecord(ln->up, v.stream));
    if (st->copy_only)
        RTOMO_CUDA_TRY(err, cudaMemsetAsync(ln->slab, 0, slab, v.stream));
    else if ((rc = cuda_cone_sf_amplitude(&v, ln->window, ln->window,
                                          err)) != RTOMO_OK ||
             (rc = cuda_cone_sf_backproject_raw(&v, ln->window, ln->slab,
                                                err)) != RTOMO_OK)
        return rc;
    RTOMO_CUDA_TRY(err, cudaMemcpyAsync(ln->slab_host, ln->slab, slab,
                                        cudaMemcpyDeviceToHost, v.stream));
    RTOMO_CUDA_TRY(err, cudaEventRecord(ln->done, v.stream));
    return RTOMO_OK;
}

/* Slab b, once downloaded, copied from its staging into x. */
static rtomo_status finish_slab(cuda_cone_sf *s, int b, float *x,
                                rtomo_error *err)
{
    cuda_cone_sf_stream *st = s->streamed;
    const cuda_cone_sf_slab *sl = &st->slabs[b];
    if (sl->rows == 0)
        return RTOMO_OK;
    stream_lane *ln = lane_of(st, b);
    RTOMO_CUDA_TRY(err, cudaEventSynchronize(ln->done));
    cone_host_copy(st->host, x + plane_of(s) * (size_t)sl->z_first,
                   ln->slab_host, plane_of(s) * (size_t)sl->k.nz);
    return RTOMO_OK;
}

/* x = A^T y, one row.  Slab b's window is gathered while the lane's
 * previous slab (b - lanes) may still run, that slab is then copied out
 * of the staging b's download will reuse while b - 1 runs, and b is
 * queued; the last lanes slabs are copied out at the end. */
static rtomo_status stream_backproject(cuda_cone_sf *s, const float *y,
                                       float *x, rtomo_error *err)
{
    cuda_cone_sf_stream *st = s->streamed;
    const int lanes = st->n_devs * CONE_SF_LANES, n = st->plan.n_slabs;
    rtomo_status rc = RTOMO_OK;
    int done = 0;
    for (int b = 0; rc == RTOMO_OK && b < n; b++) {
        rc = gather_slab(s, b, y, x, err);
        for (; rc == RTOMO_OK && done <= b - lanes; done++)
            rc = finish_slab(s, done, x, err);
        if (rc == RTOMO_OK)
            rc = queue_backproject(s, b, err);
    }
    for (; rc == RTOMO_OK && done < n; done++)
        rc = finish_slab(s, done, x, err);
    return drain(st, rc, err);
}

/* ------------------------------------------------------------ the ops ---- */

static size_t floats(const iter_vec *v) { return (size_t)v->n * v->row_len; }

/* Ordinary pageable memory: every transfer goes through the lanes'
 * page-locked staging, so the vectors need no page-locking (seconds per
 * solve at these sizes, and a new plan, so a new solve, for every scan
 * in rtomod).  Zeroed over the pool: the first touch, so that its page
 * faults are spread over the threads. */
static rtomo_status vec_alloc(rtomo_iter *it, iter_vec *v, rtomo_error *err)
{
    v->priv = NULL;
    v->data = (float *)malloc(sizeof(float) * floats(v));
    if (!v->data)
        return rtomo_set_error(err, RTOMO_E_NOMEM,
                               "out of host memory for %d vectors of %zu "
                               "floats", v->n, v->row_len);
    cone_host_zero(streamed_of(it)->host, v->data, floats(v));
    return RTOMO_OK;
}

static void vec_free(rtomo_iter *it, iter_vec *v)
{
    (void)it;
    free(v->data);
    v->data = NULL;
}

/* A copy as axpby with alpha 1, beta 0 (exact), on the pool. */
static void host_copy(rtomo_iter *it, float *dst, const float *src,
                      const iter_vec *shape)
{
    iter_vec x = *shape, y = *shape;
    x.data = (float *)src;
    y.data = dst;
    double one[1] = {1.0}, zero[1] = {0.0};
    for (int i = 0; i < shape->n; i++) {
        iter_vec xi = x, yi = y;
        xi.n = yi.n = 1;
        xi.data += (size_t)i * shape->row_len;
        yi.data += (size_t)i * shape->row_len;
        cone_host_axpby(streamed_of(it)->host, one, &xi, zero, &yi);
    }
}

static rtomo_status vec_upload(rtomo_iter *it, iter_vec *v, const float *host,
                               rtomo_error *err)
{
    (void)err;
    host_copy(it, v->data, host, v);
    return RTOMO_OK;
}

static rtomo_status vec_download(rtomo_iter *it, const iter_vec *v,
                                 float *host, rtomo_error *err)
{
    (void)err;
    host_copy(it, host, v->data, v);
    return RTOMO_OK;
}

static rtomo_status project(rtomo_iter *it, const iter_vec *x, iter_vec *y,
                            rtomo_error *err)
{
    rtomo_status rc = RTOMO_OK;
    for (int i = 0; rc == RTOMO_OK && i < x->n; i++)
        rc = stream_project(pair_of(it), x->data + (size_t)i * x->row_len,
                            y->data + (size_t)i * y->row_len, err);
    return rc;
}

static rtomo_status backproject(rtomo_iter *it, const iter_vec *y,
                                iter_vec *x, rtomo_error *err)
{
    rtomo_status rc = RTOMO_OK;
    for (int i = 0; rc == RTOMO_OK && i < y->n; i++)
        rc = stream_backproject(pair_of(it),
                                y->data + (size_t)i * y->row_len,
                                x->data + (size_t)i * x->row_len, err);
    return rc;
}

static rtomo_status dot(rtomo_iter *it, const iter_vec *a, const iter_vec *b,
                        double *out, rtomo_error *err)
{
    (void)err;
    cone_host_dot(streamed_of(it)->host, a, b, out);
    return RTOMO_OK;
}

static rtomo_status axpby(rtomo_iter *it, const double *alpha,
                          const iter_vec *x, const double *beta, iter_vec *y,
                          rtomo_error *err)
{
    (void)err;
    cone_host_axpby(streamed_of(it)->host, alpha, x, beta, y);
    return RTOMO_OK;
}

static rtomo_status mul(rtomo_iter *it, const iter_vec *w, iter_vec *y,
                        rtomo_error *err)
{
    (void)err;
    cone_host_mul(streamed_of(it)->host, w, y);
    return RTOMO_OK;
}

static rtomo_status clamp_nonneg(rtomo_iter *it, iter_vec *x,
                                 rtomo_error *err)
{
    (void)err;
    cone_host_clamp(streamed_of(it)->host, x);
    return RTOMO_OK;
}

/* Positional, in rtomo_iter_backend_ops' order (iter_internal.h). */
extern "C" const rtomo_iter_backend_ops cone_sf_stream_ops = {
    "cuda-cone-sf-stream",
    cone_iter_refuse_create,
    cone_iter_destroy,
    vec_alloc,
    vec_free,
    vec_upload,
    vec_download,
    project,
    backproject,
    dot,
    axpby,
    mul,
    clamp_nonneg,
};

/* The test hook of cone_iter.h: the streamed slabs of a plan. */
extern "C" int cuda_cone_sf_stream_slabs(const rtomo_iter *it)
{
    if (it->ops != &cone_sf_stream_ops)
        return 0;
    const cone_iter *ci = (const cone_iter *)it->impl;
    return ((const cuda_cone_sf *)ci->pair)->streamed->plan.n_slabs;
}
