/*
 * cuda_iter_backend.cu — the CUDA backend of the iterative engine
 * (rtomo_cuda_iter_ops): vectors in device memory, the matched pair and
 * the vector ops as kernels (cuda_iter_kernels.cu), on the plan's devices
 * (rtomo_cuda_plan_devices: opt->device_ids, or every visible one).
 *
 * Slabs of rows.  Rows (slices) are independent problems and every solver
 * scalar is per row (iter_engine.c), so a plan deals the rows of each
 * vector to its slabs, one per device (at most row_count of them), and
 * the slabs compute side by side.  A row's arithmetic is that of one
 * device except where a slab's share changes which kernel its rows go to
 * (A^T takes a last group of at most 8 rows in a kernel whose sums round
 * differently from the 16-row one's): calls of at most 8 rows give one
 * device's iterates to the bit, larger ones agree within float rounding
 * (tests/test_cuda_iter.c: 3e-8 for A^T, 1e-7 for the solves).  A vector of
 * n rows gives slab s the contiguous rows [s (n / k) + min(s, n % k), ...)
 * of length n / k + (s < n % k) over k slabs (the first n % k one row
 * longer; slabs past the n-th get none), so that every call, the solver's
 * whole batch or a few rows, keeps as many devices busy as it has rows.
 * A vector of one row is held whole by every slab instead: it is what the
 * SIRT weights are (mul's w, applied to every row of every slab), and one
 * row cannot be split anyway; every op that writes it runs on every slab
 * (the copies stay equal: the same kernel on the same inputs), reads
 * (dot, download) take slab 0's.  Each op launches its work on every
 * slab before it waits for any, so the devices run concurrently; dot
 * products come back per row in row order; uploads and downloads move
 * each slab's part between its rows of the host array and its device,
 * slab after slab (the host's copies through the staging buffers bound
 * them; an upload does not wait for a slab's last chunks before the
 * next slab's).
 * With one slab a vector is one device array (iter_vec.data) and the ops
 * do exactly what they did before slabs; with several, data is NULL and
 * iter_vec.priv holds the slabs' parts (NULL where a slab has no rows).
 * The ray-driven baseline projector (measurements only) runs slab after
 * slab: its launcher synchronises (cuda_iter_ray.cu).
 *
 * Streams: two per slab.  A (project) packs group g + 1 of
 * CUDA_ITER_A_SLICES rows on one stream while group g projects on the
 * other (two packed scratch slots).
 * Uploads and downloads go through two pinned staging buffers of 8 MiB
 * per slab: the host copies chunk k + 1 into one while the DMA engine
 * moves chunk k from the other, so pageable caller memory moves at close
 * to pinned speed.  Every op is synchronous (iter_internal.h): it waits
 * for its streams before returning.
 *
 * Test hook (environment, read at plan creation): RTOMO_CUDA_ITER_SPLIT=k
 * (1 to 8) gives each device k slabs, so that one GPU runs the
 * several-device path (tests/test_cuda_iter.c); rtomo_cuda_iter_debug_slabs
 * (iter_internal.h) reports the slabs a plan got.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "cuda_common.h"
#include "cuda_iter.h"

#define STAGE_BYTES ((size_t)8 << 20)

/* One device's share of a plan: its streams, scratch and staging. */
typedef struct iter_slab {
    int device;
    int rows_max;               /* rows of a row_count call it may get */
    cudaStream_t stream[2];
    cudaEvent_t staged[2];      /* staging buffer k is free again */
    cuda_iter_launch launch;
    iter_sf_proj *proj;         /* device copy of it->proj */
    float4 *packed[2], *packed_t[2];    /* A's scratch, per stream */
    float *coef;                /* axpby: 2 x rows_max floats, device */
    float *coef_host;           /* pinned */
    double *partial;            /* dot: rows_max x blocks, device */
    double *partial_host;       /* pinned */
    size_t partial_cap;         /* doubles */
    void *stage[2];             /* pinned, STAGE_BYTES each */
} iter_slab;

typedef struct cuda_iter {
    int n;                      /* slabs */
    iter_slab *slab;
} cuda_iter;

static cuda_iter *impl(rtomo_iter *it) { return (cuda_iter *)it->impl; }

/* ------------------------------------------------------------- slabs ---- */

/* Rows [*first, *first + *count) of an n-row vector in slab s of k (file
 * comment): a one-row vector is whole in every slab. */
static void slab_rows(int n, int k, int s, int *first, int *count)
{
    if (n == 1) {
        *first = 0;
        *count = 1;
        return;
    }
    rtomo_deal_even(n, k, s, first, count);
}

/* Slab s's part of v: its first row's floats on the slab's device. */
static float *part(const cuda_iter *c, const iter_vec *v, int s)
{
    return c->n == 1 ? v->data : ((float *const *)v->priv)[s];
}

/* op(s, slab, first, count) for every slab holding rows of an n-row
 * vector (first .. first + count - 1 of them), its device made current,
 * until one fails: that status, or RTOMO_OK.  The ops that launch on every
 * slab before any waits (wait_slabs) share this walk. */
template <typename Op>
static rtomo_status for_slabs(cuda_iter *c, int n, rtomo_error *err, Op op)
{
    for (int s = 0; s < c->n; s++) {
        int first, count;
        slab_rows(n, c->n, s, &first, &count);
        if (count == 0)
            continue;
        RTOMO_CUDA_TRY(err, cudaSetDevice(c->slab[s].device));
        const rtomo_status st = op(s, &c->slab[s], first, count);
        if (st != RTOMO_OK)
            return st;
    }
    return RTOMO_OK;
}

/* Whether slab s writes its rows of an n-row vector (a one-row vector:
 * every slab, to keep the copies equal). */
static int writes(const cuda_iter *c, int n, int s)
{
    int first, count;
    slab_rows(n, c->n, s, &first, &count);
    return count > 0;
}

/* Whether slab s's rows are read back (a one-row vector: slab 0's). */
static int reads(const cuda_iter *c, int n, int s)
{
    return n == 1 ? s == 0 : writes(c, n, s);
}

/* Wait for the first `streams` streams of every slab.  Also after a
 * failed launch on some slab: no kernel may outlive the op that launched
 * it (the caller may free its vectors next), so st is returned as given
 * unless it was RTOMO_OK and a wait fails. */
static rtomo_status wait_slabs(cuda_iter *c, int streams, rtomo_status st,
                               rtomo_error *err)
{
    for (int s = 0; s < c->n; s++) {
        iter_slab *sl = &c->slab[s];
        /* One slab: its device is still the current one (the launch set
         * it), so the one-device path makes no extra call. */
        cudaError_t rc = c->n > 1 ? cudaSetDevice(sl->device) : cudaSuccess;
        for (int k = 0; rc == cudaSuccess && k < streams; k++)
            rc = cudaStreamSynchronize(sl->stream[k]);
        if (rc != cudaSuccess && st == RTOMO_OK)
            st = rtomo_cuda_error(err, rc, "cudaStreamSynchronize(slab)",
                                  __FILE__, __LINE__);
    }
    return st;
}

/* ----------------------------------------------------------- lifetime ---- */

/* Teardown of one slab: errors have nowhere to go (a failed free leaves
 * nothing to retry), so they are read and dropped. */
static void slab_destroy(iter_slab *sl)
{
    if (cudaSetDevice(sl->device) != cudaSuccess) {
        (void)cudaGetLastError();
        return;
    }
    for (int k = 0; k < 2; k++) {
        if (sl->stream[k]) {
            (void)cudaStreamSynchronize(sl->stream[k]);
            (void)cudaStreamDestroy(sl->stream[k]);
        }
        if (sl->staged[k])
            (void)cudaEventDestroy(sl->staged[k]);
        (void)cudaFree(sl->packed[k]);
        (void)cudaFree(sl->packed_t[k]);
        (void)cudaFreeHost(sl->stage[k]);
    }
    (void)cudaFree(sl->proj);
    (void)cudaFree(sl->coef);
    (void)cudaFree(sl->partial);
    (void)cudaFreeHost(sl->coef_host);
    (void)cudaFreeHost(sl->partial_host);
    (void)cudaGetLastError();
}

static void cuda_destroy(rtomo_iter *it)
{
    cuda_iter *c = impl(it);
    if (!c)
        return;
    for (int s = 0; c->slab && s < c->n; s++)
        slab_destroy(&c->slab[s]);
    free(c->slab);
    free(c);
    it->impl = NULL;
}

/* Streams, A's scratch and the staging buffers of one slab. */
static rtomo_status slab_streams(const rtomo_iter *it, iter_slab *sl,
                                 rtomo_error *err)
{
    const size_t plane = (size_t)it->geom.slice_size * it->geom.slice_size;
    const size_t packed_bytes = sizeof(float4) * CUDA_ITER_A_PACK * plane;
    for (int k = 0; k < 2; k++) {
        RTOMO_CUDA_TRY(err, cudaStreamCreateWithFlags(&sl->stream[k],
                                                      cudaStreamNonBlocking));
        RTOMO_CUDA_TRY(err, cudaEventCreateWithFlags(&sl->staged[k],
                                                     cudaEventDisableTiming));
        RTOMO_CUDA_TRY(err, cudaMalloc((void **)&sl->packed[k], packed_bytes));
        RTOMO_CUDA_TRY(err, cudaMalloc((void **)&sl->packed_t[k],
                                       packed_bytes));
        RTOMO_CUDA_TRY(err, cudaHostAlloc(&sl->stage[k], STAGE_BYTES,
                                          cudaHostAllocDefault));
    }
    return RTOMO_OK;
}

/* The footprints, axpby's coefficients and dot's partial sums of one
 * slab, for at most sl->rows_max rows. */
static rtomo_status slab_buffers(const rtomo_iter *it, iter_slab *sl,
                                 rtomo_error *err)
{
    const size_t rows = (size_t)sl->rows_max;
    RTOMO_CUDA_TRY(err, cudaMalloc((void **)&sl->proj,
                                   sizeof(iter_sf_proj) * it->geom.n_proj));
    RTOMO_CUDA_TRY(err, cudaMemcpy(sl->proj, it->proj,
                                   sizeof(iter_sf_proj) * it->geom.n_proj,
                                   cudaMemcpyHostToDevice));
    RTOMO_CUDA_TRY(err, cudaMalloc((void **)&sl->coef,
                                   sizeof(float) * 2 * rows));
    RTOMO_CUDA_TRY(err, cudaHostAlloc((void **)&sl->coef_host,
                                      sizeof(float) * 2 * rows,
                                      cudaHostAllocDefault));
    /* Dot partial sums for the longer of the two spaces. */
    const size_t longest = it->image_len > it->sino_len ? it->image_len
                                                        : it->sino_len;
    sl->partial_cap = rows * cuda_iter_dot_blocks(longest);
    RTOMO_CUDA_TRY(err, cudaMalloc((void **)&sl->partial,
                                   sizeof(double) * sl->partial_cap));
    RTOMO_CUDA_TRY(err, cudaHostAlloc((void **)&sl->partial_host,
                                      sizeof(double) * sl->partial_cap,
                                      cudaHostAllocDefault));
    return RTOMO_OK;
}

static rtomo_status slab_create(const rtomo_iter *it, iter_slab *sl,
                                int single, rtomo_error *err)
{
    RTOMO_CUDA_TRY(err, cudaSetDevice(sl->device));
    rtomo_status st = slab_streams(it, sl, err);
    if (st == RTOMO_OK)
        st = slab_buffers(it, sl, err);
    sl->launch.size = it->geom.slice_size;
    sl->launch.width = it->geom.det_width;
    sl->launch.n_proj = it->geom.n_proj;
    sl->launch.proj = sl->proj;
    sl->launch.single = single;
    return st;
}

/* Deal the slabs to the devices: split per device, at most row_count in
 * all (a slab beyond would never get a row of a full call), device after
 * device in turn so that fewer slabs than that still spread out. */
static rtomo_status deal_slabs(rtomo_iter *it, cuda_iter *c, rtomo_error *err)
{
    int ids[RTOMO_MAX_DEVICES], n_devices = 0;
    rtomo_status st = rtomo_cuda_plan_devices(&it->opt, ids, &n_devices, err);
    if (st != RTOMO_OK)
        return st;
    const int rows = it->geom.row_count;
    int n = n_devices * rtomo_split_hook("RTOMO_CUDA_ITER_SPLIT");
    n = n < rows ? n : rows;
    c->slab = (iter_slab *)calloc((size_t)n, sizeof *c->slab);
    if (!c->slab)
        return rtomo_set_error(err, RTOMO_E_NOMEM, "out of memory");
    c->n = n;
    for (int s = 0; s < n; s++) {
        c->slab[s].device = ids[s % n_devices];
        c->slab[s].rows_max = rows / n + (rows % n != 0);
    }
    return RTOMO_OK;
}

static rtomo_status cuda_create(rtomo_iter *it, rtomo_error *err)
{
    cuda_iter *c = (cuda_iter *)calloc(1, sizeof *c);
    if (!c)
        return rtomo_set_error(err, RTOMO_E_NOMEM, "out of memory");
    it->impl = c;
    const char *single = getenv("RTOMO_CUDA_ITER_SINGLE");
    const int one = single && strcmp(single, "1") == 0;
    rtomo_status st = deal_slabs(it, c, err);
    /* On failure the front end destroys the plan, slabs and all. */
    for (int s = 0; st == RTOMO_OK && s < c->n; s++)
        st = slab_create(it, &c->slab[s], one, err);
    return st;
}

extern "C" int rtomo_cuda_iter_debug_slabs(const rtomo_iter *it, int *devices,
                                           int capacity)
{
    if (!it || it->ops != &rtomo_cuda_iter_ops || !it->impl)
        return -1;
    const cuda_iter *c = (const cuda_iter *)it->impl;
    for (int s = 0; s < c->n && s < capacity; s++)
        devices[s] = c->slab[s].device;
    return c->n;
}

/* ------------------------------------------------------------ vectors ---- */

/* count rows of row_len zeros on slab sl's device, in *out. */
static rtomo_status alloc_zeros(iter_slab *sl, int count, size_t row_len,
                                float **out, rtomo_error *err)
{
    RTOMO_CUDA_TRY(err, cudaSetDevice(sl->device));
    const size_t bytes = sizeof(float) * (size_t)count * row_len;
    float *d = NULL;
    RTOMO_CUDA_TRY(err, cudaMalloc((void **)&d, bytes ? bytes : 1));
    /* On the slab's stream and waited for: cudaMemset may return before
     * it is done, on the legacy stream, which the ops' non-blocking
     * streams do not wait for; the vector must be zero when returned. */
    cudaError_t rc = cudaMemsetAsync(d, 0, bytes, sl->stream[0]);
    if (rc == cudaSuccess)
        rc = cudaStreamSynchronize(sl->stream[0]);
    if (rc != cudaSuccess) {
        (void)cudaFree(d);
        return rtomo_cuda_error(err, rc, "cudaMemsetAsync(vector)", __FILE__,
                                __LINE__);
    }
    *out = d;
    return RTOMO_OK;
}

static void cuda_vec_free(rtomo_iter *it, iter_vec *v)
{
    cuda_iter *c = impl(it);
    float **parts = (float **)v->priv;
    /* Nothing to do about a failure: the memory is lost either way. */
    if (c->n == 1 && v->data && cudaSetDevice(c->slab[0].device) ==
                                    cudaSuccess)
        (void)cudaFree(v->data);
    for (int s = 0; parts && s < c->n; s++)
        if (parts[s] && cudaSetDevice(c->slab[s].device) == cudaSuccess)
            (void)cudaFree(parts[s]);
    (void)cudaGetLastError();
    free(parts);
    v->data = NULL;
    v->priv = NULL;
}

static rtomo_status cuda_vec_alloc(rtomo_iter *it, iter_vec *v,
                                   rtomo_error *err)
{
    cuda_iter *c = impl(it);
    v->data = NULL;
    v->priv = NULL;
    if (c->n == 1)
        return alloc_zeros(&c->slab[0], v->n, v->row_len, &v->data, err);
    float **parts = (float **)calloc((size_t)c->n, sizeof *parts);
    if (!parts)
        return rtomo_set_error(err, RTOMO_E_NOMEM, "out of memory");
    v->priv = parts;
    rtomo_status st = for_slabs(c, v->n, err, [&](int s, iter_slab *sl,
                                                  int, int count) {
        return alloc_zeros(sl, count, v->row_len, &parts[s], err);
    });
    if (st != RTOMO_OK)
        cuda_vec_free(it, v);   /* nothing stays allocated */
    return st;
}

/* bytes from host to dev through slab sl's staging, not waited for. */
static rtomo_status upload_slab(iter_slab *sl, const char *src, char *dst,
                                size_t bytes, rtomo_error *err)
{
    RTOMO_CUDA_TRY(err, cudaSetDevice(sl->device));
    int k = 0;
    for (size_t off = 0; off < bytes; off += STAGE_BYTES, k ^= 1) {
        const size_t len = bytes - off < STAGE_BYTES ? bytes - off : STAGE_BYTES;
        /* Buffer k's previous chunk is on its way: wait, refill, send. */
        RTOMO_CUDA_TRY(err, cudaEventSynchronize(sl->staged[k]));
        memcpy(sl->stage[k], src + off, len);
        RTOMO_CUDA_TRY(err, cudaMemcpyAsync(dst + off, sl->stage[k], len,
                                            cudaMemcpyHostToDevice,
                                            sl->stream[k]));
        RTOMO_CUDA_TRY(err, cudaEventRecord(sl->staged[k], sl->stream[k]));
    }
    return RTOMO_OK;
}

static rtomo_status cuda_vec_upload(rtomo_iter *it, iter_vec *v,
                                    const float *host, rtomo_error *err)
{
    cuda_iter *c = impl(it);
    const size_t row_bytes = sizeof(float) * v->row_len;
    /* A slab's last chunks are in flight while the host fills the next
     * slab's staging. */
    const rtomo_status st = for_slabs(c, v->n, err, [&](int s, iter_slab *sl,
                                                        int first, int count) {
        return upload_slab(sl, (const char *)host + (size_t)first * row_bytes,
                           (char *)part(c, v, s), (size_t)count * row_bytes,
                           err);
    });
    return wait_slabs(c, 2, st, err);
}

/* bytes from dev to host through slab sl's staging; returns when the
 * host has them. */
static rtomo_status download_slab(iter_slab *sl, const char *src, char *dst,
                                  size_t bytes, rtomo_error *err)
{
    RTOMO_CUDA_TRY(err, cudaSetDevice(sl->device));
    const size_t chunks = (bytes + STAGE_BYTES - 1) / STAGE_BYTES;
    /* Chunk k goes to buffer k % 2; chunk k + 1 is in flight while the
     * host copies chunk k out. */
    for (size_t k = 0; k <= chunks; k++) {
        if (k < chunks) {
            const size_t off = k * STAGE_BYTES;
            const size_t len = bytes - off < STAGE_BYTES ? bytes - off
                                                          : STAGE_BYTES;
            RTOMO_CUDA_TRY(err, cudaMemcpyAsync(sl->stage[k % 2], src + off,
                                                len, cudaMemcpyDeviceToHost,
                                                sl->stream[k % 2]));
            RTOMO_CUDA_TRY(err, cudaEventRecord(sl->staged[k % 2],
                                                sl->stream[k % 2]));
        }
        if (k > 0) {
            const size_t d = k - 1, off = d * STAGE_BYTES;
            const size_t len = bytes - off < STAGE_BYTES ? bytes - off
                                                          : STAGE_BYTES;
            RTOMO_CUDA_TRY(err, cudaEventSynchronize(sl->staged[d % 2]));
            memcpy(dst + off, sl->stage[d % 2], len);
        }
    }
    return RTOMO_OK;
}

static rtomo_status cuda_vec_download(rtomo_iter *it, const iter_vec *v,
                                      float *host, rtomo_error *err)
{
    cuda_iter *c = impl(it);
    const size_t row_bytes = sizeof(float) * v->row_len;
    rtomo_status st = RTOMO_OK;
    for (int s = 0; st == RTOMO_OK && s < c->n; s++) {
        int first, count;
        slab_rows(v->n, c->n, s, &first, &count);
        if (reads(c, v->n, s))
            st = download_slab(&c->slab[s], (const char *)part(c, v, s),
                               (char *)host + (size_t)first * row_bytes,
                               (size_t)count * row_bytes, err);
    }
    return wait_slabs(c, 2, st, err);
}

/* ---------------------------------------------------------- projector ---- */

/* A on slab sl's n rows: group g + 1 packs on the other stream while g
 * projects. */
static rtomo_status project_slab(const rtomo_iter *it, iter_slab *sl,
                                 const float *x, int n, float *y,
                                 rtomo_error *err)
{
    RTOMO_CUDA_TRY(err, cudaSetDevice(sl->device));
    rtomo_status st = RTOMO_OK;
    for (int g = 0, k = 0; g < n; g += CUDA_ITER_A_SLICES, k ^= 1) {
        const int valid = n - g < CUDA_ITER_A_SLICES ? n - g
                                                     : CUDA_ITER_A_SLICES;
        if ((st = cuda_iter_pack(&sl->launch, x + (size_t)g * it->image_len,
                                 valid, sl->packed[k], sl->packed_t[k],
                                 sl->stream[k], err)) ||
            (st = cuda_iter_project(&sl->launch, sl->packed[k],
                                    sl->packed_t[k], valid,
                                    y + (size_t)g * it->sino_len,
                                    sl->stream[k], err)))
            return st;
    }
    return st;
}

static rtomo_status cuda_project(rtomo_iter *it, const iter_vec *x,
                                 iter_vec *y, rtomo_error *err)
{
    cuda_iter *c = impl(it);
    const rtomo_status st = for_slabs(c, x->n, err, [&](int s, iter_slab *sl,
                                                        int, int count) {
        return project_slab(it, sl, part(c, x, s), count, part(c, y, s), err);
    });
    return wait_slabs(c, 2, st, err);
}

static rtomo_status cuda_backproject(rtomo_iter *it, const iter_vec *y,
                                     iter_vec *x, rtomo_error *err)
{
    cuda_iter *c = impl(it);
    const rtomo_status st = for_slabs(c, y->n, err, [&](int s, iter_slab *sl,
                                                        int, int count) {
        return cuda_iter_backproject(&sl->launch, part(c, y, s), count,
                                     part(c, x, s), sl->stream[0], err);
    });
    return wait_slabs(c, 1, st, err);
}

/* -------------------------------------------------------- vector ops ---- */

/* Slab sl's partial sums of its count rows, copied to its pinned host
 * buffer; not waited for. */
static rtomo_status dot_slab(const rtomo_iter *it, iter_slab *sl,
                             const float *a, const float *b, int count,
                             size_t len, rtomo_error *err)
{
    const size_t need = (size_t)count * cuda_iter_dot_blocks(len);
    if (need > sl->partial_cap)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "iterative dot: %d rows exceed the plan's %d",
                               count, it->geom.row_count);
    RTOMO_CUDA_TRY(err, cudaSetDevice(sl->device));
    rtomo_status st = cuda_iter_dot(a, b, count, len, sl->partial,
                                    sl->stream[0], err);
    if (st != RTOMO_OK)
        return st;
    RTOMO_CUDA_TRY(err, cudaMemcpyAsync(sl->partial_host, sl->partial,
                                        sizeof(double) * need,
                                        cudaMemcpyDeviceToHost,
                                        sl->stream[0]));
    return RTOMO_OK;
}

static rtomo_status cuda_dot(rtomo_iter *it, const iter_vec *a,
                             const iter_vec *b, double *out, rtomo_error *err)
{
    cuda_iter *c = impl(it);
    rtomo_status st = RTOMO_OK;
    for (int s = 0; st == RTOMO_OK && s < c->n; s++) {
        int first, count;
        slab_rows(a->n, c->n, s, &first, &count);
        if (reads(c, a->n, s))
            st = dot_slab(it, &c->slab[s], part(c, a, s), part(c, b, s),
                          count, a->row_len, err);
    }
    if ((st = wait_slabs(c, 1, st, err)) != RTOMO_OK)
        return st;
    /* Each row's partial sums added in a fixed order, whichever slab
     * holds it: the same inputs give the same bits. */
    const int blocks = cuda_iter_dot_blocks(a->row_len);
    for (int s = 0; s < c->n; s++) {
        int first, count;
        slab_rows(a->n, c->n, s, &first, &count);
        if (!reads(c, a->n, s))
            continue;
        const double *partial = c->slab[s].partial_host;
        for (int i = 0; i < count; i++) {
            double sum = 0.0;
            for (int k = 0; k < blocks; k++)
                sum += partial[(size_t)i * blocks + k];
            out[first + i] = sum;
        }
    }
    return RTOMO_OK;
}

/* Slab sl's rows [first, first + count) of y = alpha x + beta y. */
static rtomo_status axpby_slab(const rtomo_iter *it, iter_slab *sl,
                               const double *alpha, const double *beta,
                               int first, int count, const float *x,
                               float *y, size_t len, rtomo_error *err)
{
    if (count > sl->rows_max)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "iterative axpby: %d rows exceed the plan's %d",
                               count, it->geom.row_count);
    /* The previous call's coefficients are no longer in flight: every
     * call waits for its streams before returning. */
    for (int i = 0; i < count; i++) {
        sl->coef_host[i] = (float)alpha[first + i];
        sl->coef_host[count + i] = (float)beta[first + i];
    }
    RTOMO_CUDA_TRY(err, cudaSetDevice(sl->device));
    RTOMO_CUDA_TRY(err, cudaMemcpyAsync(sl->coef, sl->coef_host,
                                        sizeof(float) * 2 * (size_t)count,
                                        cudaMemcpyHostToDevice,
                                        sl->stream[0]));
    return cuda_iter_axpby(sl->coef, x, y, count, len, sl->stream[0], err);
}

static rtomo_status cuda_axpby(rtomo_iter *it, const double *alpha,
                               const iter_vec *x, const double *beta,
                               iter_vec *y, rtomo_error *err)
{
    cuda_iter *c = impl(it);
    const rtomo_status st = for_slabs(c, y->n, err, [&](int s, iter_slab *sl,
                                                        int first, int count) {
        return axpby_slab(it, sl, alpha, beta, first, count, part(c, x, s),
                          part(c, y, s), y->row_len, err);
    });
    return wait_slabs(c, 1, st, err);
}

static rtomo_status cuda_mul(rtomo_iter *it, const iter_vec *w, iter_vec *y,
                             rtomo_error *err)
{
    cuda_iter *c = impl(it);
    /* w has one row: every slab holds it whole (file comment). */
    const rtomo_status st = for_slabs(c, y->n, err, [&](int s, iter_slab *sl,
                                                        int, int count) {
        return cuda_iter_mul(part(c, w, s), part(c, y, s), count, y->row_len,
                             sl->stream[0], err);
    });
    return wait_slabs(c, 1, st, err);
}

static rtomo_status cuda_clamp(rtomo_iter *it, iter_vec *x, rtomo_error *err)
{
    cuda_iter *c = impl(it);
    const rtomo_status st = for_slabs(c, x->n, err, [&](int s, iter_slab *sl,
                                                        int, int count) {
        return cuda_iter_clamp(part(c, x, s), (size_t)count * x->row_len,
                               sl->stream[0], err);
    });
    return wait_slabs(c, 1, st, err);
}

static rtomo_status cuda_ray(rtomo_iter *it, const iter_vec *x, iter_vec *y,
                             rtomo_error *err)
{
    cuda_iter *c = impl(it);
    /* Slab after slab: the launcher waits for its stream (it frees its
     * texture), and this projector is for measurements only. */
    const rtomo_status st = for_slabs(c, x->n, err, [&](int s, iter_slab *sl,
                                                        int, int count) {
        return cuda_iter_ray_project(&sl->launch, part(c, x, s), count,
                                     part(c, y, s), sl->stream[0], err);
    });
    /* Synchronous like every op (file comment): the caller may read y or
     * time the call as soon as it returns. */
    return wait_slabs(c, 1, st, err);
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
