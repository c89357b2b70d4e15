/*
 * cuda_cone_sf_backend.cu — the iterative engine's backend ops for the
 * separable-footprint cone-beam pair on CUDA (cone_sf_cuda_ops): vectors
 * in device memory on the first of the plan's devices, A and A^T and the
 * vector ops from cuda_cone_sf.cu.  Every op is synchronous, as the
 * iterative front end wants (iter_internal.h).  Not done: several GPUs,
 * multi-streaming of volume slabs larger than the device.
 *
 * Two switches, read when a pair is made, for comparing kernels in one
 * session: RTOMO_CONE_SF_KERNEL=old (the first kernels instead of the
 * z-column ones) and RTOMO_CONE_SF_PATCH=N (at most N cells in A's
 * shared patch; 0 sends every add to global memory).
 */
#include "config.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_cone_sf.h"

static cuda_cone_sf *pair_of(rtomo_iter *it)
{
    return (cuda_cone_sf *)((cone_iter *)it->impl)->pair;
}

extern "C" void cuda_cone_sf_destroy(void *pair)
{
    cuda_cone_sf *s = (cuda_cone_sf *)pair;
    if (!s)
        return;
    /* Teardown: failures have nowhere to go. */
    if (cudaSetDevice(s->device) == cudaSuccess) {
        if (s->stream) {
            (void)cudaStreamSynchronize(s->stream);
            (void)cudaStreamDestroy(s->stream);
        }
        (void)cudaFree(s->amp_theta);
        (void)cudaFree(s->cos_b);
        (void)cudaFree(s->sin_b);
        (void)cudaFree(s->weighted);
        (void)cudaFree(s->partial);
        (void)cudaFreeHost(s->partial_host);
    }
    free(s);
}

static rtomo_status upload_tables(cuda_cone_sf *s, const cone_iter *ci,
                                  rtomo_error *err)
{
    const rtomo_cone *geo = ci->geo;
    const size_t np = (size_t)geo->geom.n_proj;
    RTOMO_CUDA_TRY(err, cudaMalloc((void **)&s->amp_theta,
                                   sizeof(float) * s->frame_len));
    RTOMO_CUDA_TRY(err, cudaMalloc((void **)&s->cos_b, sizeof(float) * np));
    RTOMO_CUDA_TRY(err, cudaMalloc((void **)&s->sin_b, sizeof(float) * np));
    RTOMO_CUDA_TRY(err, cudaMalloc((void **)&s->weighted,
                                   sizeof(float) * s->frame_len * np));
    RTOMO_CUDA_TRY(err, cudaMalloc((void **)&s->partial,
                                   sizeof(double) * CUDA_SF_DOT_BLOCKS));
    RTOMO_CUDA_TRY(err, cudaMallocHost((void **)&s->partial_host,
                                       sizeof(double) * CUDA_SF_DOT_BLOCKS));
    RTOMO_CUDA_TRY(err, cudaMemcpyAsync(s->amp_theta, ci->amp_theta,
                                        sizeof(float) * s->frame_len,
                                        cudaMemcpyHostToDevice, s->stream));
    RTOMO_CUDA_TRY(err, cudaMemcpyAsync(s->cos_b, geo->cos_beta,
                                        sizeof(float) * np,
                                        cudaMemcpyHostToDevice, s->stream));
    RTOMO_CUDA_TRY(err, cudaMemcpyAsync(s->sin_b, geo->sin_beta,
                                        sizeof(float) * np,
                                        cudaMemcpyHostToDevice, s->stream));
    RTOMO_CUDA_TRY(err, cudaStreamSynchronize(s->stream));
    return RTOMO_OK;
}

/* The kernel switches (see the file comment); anything else in them
 * means the defaults. */
static void choose_kernels(cuda_cone_sf *s)
{
    const char *kernel = getenv("RTOMO_CONE_SF_KERNEL");
    s->old_kernels = kernel && strcmp(kernel, "old") == 0;
    const char *patch = getenv("RTOMO_CONE_SF_PATCH");
    char *end = NULL;
    const long cap = patch ? strtol(patch, &end, 10) : -1;
    s->patch_cap = patch && end != patch && *end == '\0' && cap >= 0 &&
                           cap < INT_MAX
                       ? (int)cap
                       : INT_MAX;
}

extern "C" rtomo_status cuda_cone_sf_create(rtomo_iter *it, cone_iter *ci,
                                            rtomo_error *err)
{
    cuda_cone_sf *s = (cuda_cone_sf *)calloc(1, sizeof *s);
    if (!s)
        return rtomo_set_error(err, RTOMO_E_NOMEM, "out of memory");
    ci->pair = s;
    const rtomo_cone *geo = ci->geo;
    int ids[RTOMO_MAX_DEVICES], n = 0;
    rtomo_status st = rtomo_cuda_plan_devices(&it->opt, ids, &n, err);
    if (st != RTOMO_OK)
        return st;
    s->device = ids[0];
    /* The pair works on the physical detector (FDK's constants may be
     * widened for a half fan). */
    s->k = geo->bp;
    s->k.det_u = geo->geom.det_u;
    s->k.u0 -= (float)geo->filt_off;
    s->n_proj = geo->geom.n_proj;
    s->frame_len = geo->frame_len;
    s->cos_host = geo->cos_beta;
    s->sin_host = geo->sin_beta;
    choose_kernels(s);
    RTOMO_CUDA_TRY(err, cudaSetDevice(s->device));
    RTOMO_CUDA_TRY(err, cudaStreamCreateWithFlags(&s->stream,
                                                  cudaStreamNonBlocking));
    return upload_tables(s, ci, err);
}

/* ------------------------------------------------------------ the ops ---- */

static rtomo_status use_device(rtomo_iter *it, rtomo_error *err)
{
    RTOMO_CUDA_TRY(err, cudaSetDevice(pair_of(it)->device));
    return RTOMO_OK;
}

static size_t floats(const iter_vec *v) { return (size_t)v->n * v->row_len; }

static rtomo_status vec_alloc(rtomo_iter *it, iter_vec *v, rtomo_error *err)
{
    rtomo_status st = use_device(it, err);
    if (st != RTOMO_OK)
        return st;
    RTOMO_CUDA_TRY(err, cudaMalloc((void **)&v->data,
                                   sizeof(float) * floats(v)));
    /* Every transfer on the pair's stream, waited for: the legacy
     * stream's would not be ordered before the pair's kernels. */
    cudaStream_t stream = pair_of(it)->stream;
    cudaError_t rc = cudaMemsetAsync(v->data, 0, sizeof(float) * floats(v),
                                     stream);
    if (rc == cudaSuccess)
        rc = cudaStreamSynchronize(stream);
    if (rc != cudaSuccess) {
        (void)cudaFree(v->data);
        v->data = NULL;
        return rtomo_cuda_error(err, rc, "cudaMemset", __FILE__, __LINE__);
    }
    return RTOMO_OK;
}

static void vec_free(rtomo_iter *it, iter_vec *v)
{
    if (v->data && cudaSetDevice(pair_of(it)->device) == cudaSuccess)
        (void)cudaFree(v->data);
    v->data = NULL;
}

static rtomo_status vec_upload(rtomo_iter *it, iter_vec *v, const float *host,
                               rtomo_error *err)
{
    rtomo_status st = use_device(it, err);
    if (st != RTOMO_OK)
        return st;
    cudaStream_t stream = pair_of(it)->stream;
    RTOMO_CUDA_TRY(err, cudaMemcpyAsync(v->data, host,
                                        sizeof(float) * floats(v),
                                        cudaMemcpyHostToDevice, stream));
    RTOMO_CUDA_TRY(err, cudaStreamSynchronize(stream));
    return RTOMO_OK;
}

static rtomo_status vec_download(rtomo_iter *it, const iter_vec *v,
                                 float *host, rtomo_error *err)
{
    rtomo_status st = use_device(it, err);
    if (st != RTOMO_OK)
        return st;
    cudaStream_t stream = pair_of(it)->stream;
    RTOMO_CUDA_TRY(err, cudaMemcpyAsync(host, v->data,
                                        sizeof(float) * floats(v),
                                        cudaMemcpyDeviceToHost, stream));
    RTOMO_CUDA_TRY(err, cudaStreamSynchronize(stream));
    return RTOMO_OK;
}

static rtomo_status project(rtomo_iter *it, const iter_vec *x, iter_vec *y,
                            rtomo_error *err)
{
    rtomo_status st = use_device(it, err);
    for (int i = 0; st == RTOMO_OK && i < x->n; i++)
        st = cuda_cone_sf_project(pair_of(it), x->data + (size_t)i * x->row_len,
                                  y->data + (size_t)i * y->row_len, err);
    return st;
}

static rtomo_status backproject(rtomo_iter *it, const iter_vec *y,
                                iter_vec *x, rtomo_error *err)
{
    rtomo_status st = use_device(it, err);
    for (int i = 0; st == RTOMO_OK && i < y->n; i++)
        st = cuda_cone_sf_backproject(pair_of(it),
                                      y->data + (size_t)i * y->row_len,
                                      x->data + (size_t)i * x->row_len, err);
    return st;
}

static rtomo_status dot(rtomo_iter *it, const iter_vec *a, const iter_vec *b,
                        double *out, rtomo_error *err)
{
    rtomo_status st = use_device(it, err);
    for (int i = 0; st == RTOMO_OK && i < a->n; i++)
        st = cuda_cone_sf_dot(pair_of(it), a->data + (size_t)i * a->row_len,
                              b->data + (size_t)i * b->row_len, a->row_len,
                              &out[i], err);
    return st;
}

static rtomo_status axpby(rtomo_iter *it, const double *alpha,
                          const iter_vec *x, const double *beta, iter_vec *y,
                          rtomo_error *err)
{
    rtomo_status st = use_device(it, err);
    for (int i = 0; st == RTOMO_OK && i < y->n; i++)
        st = cuda_cone_sf_axpby(pair_of(it), (float)alpha[i],
                                x->data + (size_t)i * y->row_len,
                                (float)beta[i],
                                y->data + (size_t)i * y->row_len, y->row_len,
                                err);
    return st;
}

static rtomo_status mul(rtomo_iter *it, const iter_vec *w, iter_vec *y,
                        rtomo_error *err)
{
    rtomo_status st = use_device(it, err);
    for (int i = 0; st == RTOMO_OK && i < y->n; i++)
        st = cuda_cone_sf_mul(pair_of(it), w->data,
                              y->data + (size_t)i * y->row_len, y->row_len,
                              err);
    return st;
}

static rtomo_status clamp_nonneg(rtomo_iter *it, iter_vec *x,
                                 rtomo_error *err)
{
    rtomo_status st = use_device(it, err);
    return st == RTOMO_OK ? cuda_cone_sf_clamp(pair_of(it), x->data,
                                               floats(x), err)
                          : st;
}

static rtomo_status refuse_create(rtomo_iter *it, rtomo_error *err)
{
    (void)it;
    return rtomo_set_error(err, RTOMO_E_STATE,
                           "cone-beam iterative plans are made by "
                           "rtomo_cone_iter_create");
}

/* Positional: C++ before C++20 has no designated initialisers; the order
 * is rtomo_iter_backend_ops' (iter_internal.h), fields after clamp_nonneg
 * left NULL. */
extern "C" const rtomo_iter_backend_ops cone_sf_cuda_ops = {
    "cuda-cone-sf",
    refuse_create,
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
