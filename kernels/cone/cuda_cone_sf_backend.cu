/*
 * cuda_cone_sf_backend.cu — the iterative engine's backend ops for the
 * separable-footprint cone-beam pair on CUDA (cone_sf_cuda_ops): vectors
 * in device memory, A and A^T and the vector ops from cuda_cone_sf.cu.
 * Every op is synchronous, as the iterative front end wants
 * (iter_internal.h).  A pair whose vectors would not fit on its GPUs
 * streams instead (cuda_cone_sf_stream.cu: host vectors, slabs through
 * the GPUs, its own ops); cuda_cone_sf_create makes the choice.
 *
 * Several GPUs: the slabs, their windows and the image vectors' parts
 * are cuda_cone_sf_slabs.cu's; the ops below call them when a pair has
 * more than one slab.
 *
 * Three switches, read when a pair is made: RTOMO_CONE_SF_KERNEL=old
 * (the first kernels instead of the z-column ones) and
 * RTOMO_CONE_SF_PATCH=N (at most N cells in A's shared patch; 0 sends
 * every add to global memory), for comparing kernels in one session; and
 * the test hook RTOMO_CONE_SF_SPLIT=k (1 to 8): each device taken as k
 * devices of a slab each (their own streams and parts of the image
 * vectors, windows sent by peer copies to the same GPU), so that one GPU
 * runs the whole split path.
 */
#include "config.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_cone_sf.h"
#include "cuda_cone_sf_slabs.h"
#include "cuda_cone_sf_stream.h"

static cuda_cone_sf *pair_of(rtomo_iter *it)
{
    return (cuda_cone_sf *)((cone_iter *)it->impl)->pair;
}

/* ----------------------------------------------------------- teardown ---- */

extern "C" void cuda_cone_sf_destroy(void *pair)
{
    cuda_cone_sf *s = (cuda_cone_sf *)pair;
    if (!s)
        return;
    split_destroy(s);
    cuda_cone_sf_stream_destroy(s);
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
        (void)cudaFree(s->landing);
        if (s->copied)
            (void)cudaEventDestroy(s->copied);
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
    s->n_slabs = 1;
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
    /* Streamed (cuda_cone_sf_stream.cu) when the resident vectors would
     * not fit: then nothing of the resident pair is made. */
    int streamed = 0;
    if ((st = cuda_cone_sf_stream_choose(it, ci, s, ids, n, &streamed,
                                         err)) != RTOMO_OK)
        return st;
    if (streamed) {
        RTOMO_CUDA_TRY(err, cudaSetDevice(s->device));
        return RTOMO_OK;
    }
    if ((st = upload_tables(s, ci, err)) != RTOMO_OK ||
        (st = split_create(s, ids, n, err)) != RTOMO_OK)
        return st;
    /* The ops expect the owner current, as after every op. */
    RTOMO_CUDA_TRY(err, cudaSetDevice(s->device));
    return RTOMO_OK;
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
    if (in_parts(pair_of(it), v))
        return parts_alloc(pair_of(it), v, err);
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
    if (v->priv) {
        parts_free(pair_of(it), v);
        return;
    }
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
    if (in_parts(pair_of(it), v))
        return parts_copy(pair_of(it), v, (float *)host, 0, err);
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
    if (in_parts(pair_of(it), v))
        return parts_copy(pair_of(it), v, host, 1, err);
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
    cuda_cone_sf *s = pair_of(it);
    rtomo_status st = use_device(it, err);
    for (int i = 0; st == RTOMO_OK && i < x->n; i++) {
        float *yi = y->data + (size_t)i * y->row_len;
        st = s->n_slabs > 1
                 ? split_project(s, x, i, yi, err)
                 : cuda_cone_sf_project(s, x->data + (size_t)i * x->row_len,
                                        yi, err);
    }
    return st;
}

static rtomo_status backproject(rtomo_iter *it, const iter_vec *y,
                                iter_vec *x, rtomo_error *err)
{
    cuda_cone_sf *s = pair_of(it);
    rtomo_status st = use_device(it, err);
    for (int i = 0; st == RTOMO_OK && i < y->n; i++) {
        const float *yi = y->data + (size_t)i * y->row_len;
        st = s->n_slabs > 1
                 ? split_backproject(s, yi, x, i, err)
                 : cuda_cone_sf_backproject(
                       s, yi, x->data + (size_t)i * x->row_len, err);
    }
    return st;
}

/* The vector ops on a split pair's image vectors: each device's part on
 * its own view, one after another (each op waits for its kernel; A and
 * A^T take the time); the owner current after. */
static rtomo_status parts_dot(cuda_cone_sf *s, const iter_vec *a,
                              const iter_vec *b, double *out,
                              rtomo_error *err)
{
    rtomo_status st = RTOMO_OK;
    for (int i = 0; i < a->n; i++) {
        out[i] = 0.0;
        for (int d = 0; st == RTOMO_OK && d < s->n_devs; d++) {
            double part = 0.0;
            RTOMO_CUDA_TRY(err, cudaSetDevice(s->devs[d].view.device));
            st = cuda_cone_sf_dot(&s->devs[d].view, part_of(s, a, d, i),
                                  part_of(s, b, d, i), part_len(s, d), &part,
                                  err);
            out[i] += part;
        }
    }
    if (st == RTOMO_OK)
        RTOMO_CUDA_TRY(err, cudaSetDevice(s->device));
    return st;
}

static rtomo_status dot(rtomo_iter *it, const iter_vec *a, const iter_vec *b,
                        double *out, rtomo_error *err)
{
    rtomo_status st = use_device(it, err);
    if (st == RTOMO_OK && in_parts(pair_of(it), a))
        return parts_dot(pair_of(it), a, b, out, err);
    for (int i = 0; st == RTOMO_OK && i < a->n; i++)
        st = cuda_cone_sf_dot(pair_of(it), a->data + (size_t)i * a->row_len,
                              b->data + (size_t)i * b->row_len, a->row_len,
                              &out[i], err);
    return st;
}

/* The elementwise ops, per part: axpby (w NULL), mul (x NULL: y *= w, w
 * one row) or clamp (both NULL). */
static rtomo_status parts_map(cuda_cone_sf *s, const double *alpha,
                              const iter_vec *x, const double *beta,
                              const iter_vec *w, iter_vec *y,
                              rtomo_error *err)
{
    rtomo_status st = RTOMO_OK;
    for (int d = 0; st == RTOMO_OK && d < s->n_devs; d++) {
        cuda_cone_sf *v = &s->devs[d].view;
        const size_t n = part_len(s, d);
        RTOMO_CUDA_TRY(err, cudaSetDevice(v->device));
        for (int i = 0; st == RTOMO_OK && i < y->n; i++) {
            float *yi = part_of(s, y, d, i);
            if (x)
                st = cuda_cone_sf_axpby(v, (float)alpha[i],
                                        part_of(s, x, d, i), (float)beta[i],
                                        yi, n, err);
            else if (w)
                st = cuda_cone_sf_mul(v, part_of(s, w, d, 0), yi, n, err);
            else
                st = cuda_cone_sf_clamp(v, yi, n, err);
        }
    }
    if (st == RTOMO_OK)
        RTOMO_CUDA_TRY(err, cudaSetDevice(s->device));
    return st;
}

static rtomo_status axpby(rtomo_iter *it, const double *alpha,
                          const iter_vec *x, const double *beta, iter_vec *y,
                          rtomo_error *err)
{
    rtomo_status st = use_device(it, err);
    if (st == RTOMO_OK && in_parts(pair_of(it), y))
        return parts_map(pair_of(it), alpha, x, beta, NULL, y, err);
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
    if (st == RTOMO_OK && in_parts(pair_of(it), y))
        return parts_map(pair_of(it), NULL, NULL, NULL, w, y, err);
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
    if (st == RTOMO_OK && in_parts(pair_of(it), x))
        return parts_map(pair_of(it), NULL, NULL, NULL, NULL, x, err);
    return st == RTOMO_OK ? cuda_cone_sf_clamp(pair_of(it), x->data,
                                               floats(x), err)
                          : st;
}

/* Positional: C++ before C++20 has no designated initialisers; the order
 * is rtomo_iter_backend_ops' (iter_internal.h), fields after clamp_nonneg
 * left NULL. */
extern "C" const rtomo_iter_backend_ops cone_sf_cuda_ops = {
    "cuda-cone-sf",
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
