/*
 * cpu_iter.c — the CPU backend of the iterative engine: the separable-
 * footprint pair of iter_internal.h on the thread pool, and the vector ops
 * on host arrays.
 *
 * A (project) is a scatter, but each task owns one (row, projection) line
 * of the output and walks every pixel of that row's image into it, so no
 * two threads write the same bin.  A^T (backproject) is a gather: each task
 * owns one image row of one slice and sums, per pixel, the footprint
 * weights times the bins it touches over all projections.  Both evaluate
 * iter_sf_weights() on the same s_c (the same float expression), so A^T is
 * A's transpose up to the order of the float sums.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "cpu_pool.h"
#include "engine_internal.h"
#include "iter_internal.h"

typedef struct cpu_iter {
    cpu_pool *pool;
    float **acc;                /* per worker: one image row (backproject) */
} cpu_iter;

static rtomo_status cpu_create(rtomo_iter *it, rtomo_error *err)
{
    cpu_iter *c = calloc(1, sizeof *c);
    if (!c)
        return rtomo_set_error(err, RTOMO_E_NOMEM, "out of memory");
    it->impl = c;
    int threads = rtomo_cpu_thread_count(&it->opt);
    rtomo_status st = cpu_pool_create(threads, &c->pool, err);
    if (st != RTOMO_OK)
        return st;
    int workers = cpu_pool_size(c->pool);
    c->acc = calloc((size_t)workers, sizeof *c->acc);
    if (!c->acc)
        return rtomo_set_error(err, RTOMO_E_NOMEM, "out of memory");
    for (int w = 0; w < workers; w++)
        if (!(c->acc[w] = malloc(sizeof(float) *
                                 (size_t)it->geom.slice_size)))
            return rtomo_set_error(err, RTOMO_E_NOMEM, "out of memory");
    return RTOMO_OK;
}

static void cpu_destroy(rtomo_iter *it)
{
    cpu_iter *c = it->impl;
    if (!c)
        return;
    if (c->acc && c->pool)
        for (int w = 0; w < cpu_pool_size(c->pool); w++)
            free(c->acc[w]);
    free(c->acc);
    cpu_pool_destroy(c->pool);
    free(c);
    it->impl = NULL;
}

/* ------------------------------------------------------------ vectors ---- */

static rtomo_status cpu_vec_alloc(rtomo_iter *it, iter_vec *v, rtomo_error *err)
{
    (void)it;
    v->data = calloc((size_t)v->n * v->row_len, sizeof(float));
    if (!v->data)
        return rtomo_set_error(err, RTOMO_E_NOMEM,
                               "out of memory for %d rows of %zu floats",
                               v->n, v->row_len);
    return RTOMO_OK;
}

static void cpu_vec_free(rtomo_iter *it, iter_vec *v)
{
    (void)it;
    free(v->data);
    v->data = NULL;
}

static rtomo_status cpu_vec_upload(rtomo_iter *it, iter_vec *v,
                                   const float *host, rtomo_error *err)
{
    (void)it;
    (void)err;
    memcpy(v->data, host, sizeof(float) * (size_t)v->n * v->row_len);
    return RTOMO_OK;
}

static rtomo_status cpu_vec_download(rtomo_iter *it, const iter_vec *v,
                                     float *host, rtomo_error *err)
{
    (void)it;
    (void)err;
    memcpy(host, v->data, sizeof(float) * (size_t)v->n * v->row_len);
    return RTOMO_OK;
}

static rtomo_status cpu_dot(rtomo_iter *it, const iter_vec *a,
                            const iter_vec *b, double *out, rtomo_error *err)
{
    (void)it;
    (void)err;
    for (int i = 0; i < a->n; i++) {
        const float *x = a->data + (size_t)i * a->row_len;
        const float *y = b->data + (size_t)i * b->row_len;
        /* Four partial sums of float products in double: the products
         * are exact in double, so this is as good as a long sum gets. */
        double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
        size_t k = 0, len = a->row_len;
        for (; k + 4 <= len; k += 4) {
            s0 += (double)x[k] * y[k];
            s1 += (double)x[k + 1] * y[k + 1];
            s2 += (double)x[k + 2] * y[k + 2];
            s3 += (double)x[k + 3] * y[k + 3];
        }
        for (; k < len; k++)
            s0 += (double)x[k] * y[k];
        out[i] = (s0 + s1) + (s2 + s3);
    }
    return RTOMO_OK;
}

static rtomo_status cpu_axpby(rtomo_iter *it, const double *alpha,
                              const iter_vec *x, const double *beta,
                              iter_vec *y, rtomo_error *err)
{
    (void)it;
    (void)err;
    size_t len = y->row_len;
    for (int i = 0; i < y->n; i++) {
        const float *xs = x->data + (size_t)i * len;
        float *ys = y->data + (size_t)i * len;
        float a = (float)alpha[i], b = (float)beta[i];
        if (b == 0.0f)
            for (size_t k = 0; k < len; k++)
                ys[k] = a * xs[k];
        else
            for (size_t k = 0; k < len; k++)
                ys[k] = a * xs[k] + b * ys[k];
    }
    return RTOMO_OK;
}

static rtomo_status cpu_mul(rtomo_iter *it, const iter_vec *w, iter_vec *y,
                            rtomo_error *err)
{
    (void)it;
    (void)err;
    size_t len = y->row_len;
    for (int i = 0; i < y->n; i++) {
        float *ys = y->data + (size_t)i * len;
        for (size_t k = 0; k < len; k++)
            ys[k] *= w->data[k];
    }
    return RTOMO_OK;
}

static rtomo_status cpu_clamp(rtomo_iter *it, iter_vec *x, rtomo_error *err)
{
    (void)it;
    (void)err;
    size_t len = (size_t)x->n * x->row_len;
    for (size_t k = 0; k < len; k++)
        x->data[k] = x->data[k] > 0.0f ? x->data[k] : 0.0f;
    return RTOMO_OK;
}

/* ---------------------------------------------------------- projector ---- */

typedef struct apply_job {
    const rtomo_iter *it;
    const float *in;
    float *out;
    float **acc;
} apply_job;

/* The pixel centre (x, y) on the detector at projection q: one expression
 * for A and A^T. */
static inline float pixel_s(const iter_sf_proj *q, float row_s, int x)
{
    return row_s + (float)x * q->cos_a;
}

static inline float row_start(const iter_sf_proj *q, int y)
{
    return q->base - (float)y * q->sin_a;
}

/* Task t: row t / n_proj, projection t % n_proj; writes that line. */
static void project_task(void *ctx, int t, int worker)
{
    (void)worker;
    const apply_job *j = ctx;
    const rtomo_iter *it = j->it;
    const int np = it->geom.n_proj, W = it->geom.det_width;
    const int N = it->geom.slice_size;
    const int i = t / np, p = t % np;
    const iter_sf_proj *q = &it->proj[p];
    const float *img = j->in + (size_t)i * it->image_len;
    float *line = j->out + (size_t)i * it->sino_len + (size_t)p * W;
    memset(line, 0, sizeof(float) * (size_t)W);
    for (int y = 0; y < N; y++) {
        const float *r = img + (size_t)y * N;
        float rs = row_start(q, y);
        for (int x = 0; x < N; x++) {
            float w[3];
            int j0 = iter_sf_weights(q, pixel_s(q, rs, x), w);
            float v = r[x];
            if (j0 >= 0 && j0 + 2 < W) {
                line[j0] += w[0] * v;
                line[j0 + 1] += w[1] * v;
                line[j0 + 2] += w[2] * v;
            } else if (j0 >= -2 && j0 < W) {
                for (int k = 0; k < 3; k++)
                    if (j0 + k >= 0 && j0 + k < W)
                        line[j0 + k] += w[k] * v;
            }
        }
    }
}

/* Task t: slice t / N, image row t % N; gathers over all projections. */
static void backproject_task(void *ctx, int t, int worker)
{
    const apply_job *j = ctx;
    const rtomo_iter *it = j->it;
    const int np = it->geom.n_proj, W = it->geom.det_width;
    const int N = it->geom.slice_size;
    const int i = t / N, y = t % N;
    const float *sino = j->in + (size_t)i * it->sino_len;
    float *acc = j->acc[worker];
    for (int x = 0; x < N; x++)
        acc[x] = 0.0f;
    for (int p = 0; p < np; p++) {
        const iter_sf_proj *q = &it->proj[p];
        const float *line = sino + (size_t)p * W;
        float rs = row_start(q, y);
        for (int x = 0; x < N; x++) {
            float w[3];
            int j0 = iter_sf_weights(q, pixel_s(q, rs, x), w);
            if (j0 >= 0 && j0 + 2 < W) {
                acc[x] += w[0] * line[j0] + w[1] * line[j0 + 1] +
                          w[2] * line[j0 + 2];
            } else if (j0 >= -2 && j0 < W) {
                float s = 0.0f;
                for (int k = 0; k < 3; k++)
                    if (j0 + k >= 0 && j0 + k < W)
                        s += w[k] * line[j0 + k];
                acc[x] += s;
            }
        }
    }
    memcpy(j->out + (size_t)i * it->image_len + (size_t)y * N, acc,
           sizeof(float) * (size_t)N);
}

static rtomo_status cpu_project(rtomo_iter *it, const iter_vec *x, iter_vec *y,
                                rtomo_error *err)
{
    (void)err;
    cpu_iter *c = it->impl;
    apply_job j = { it, x->data, y->data, c->acc };
    cpu_pool_run(c->pool, x->n * it->geom.n_proj, project_task, &j);
    return RTOMO_OK;
}

static rtomo_status cpu_backproject(rtomo_iter *it, const iter_vec *y,
                                    iter_vec *x, rtomo_error *err)
{
    (void)err;
    cpu_iter *c = it->impl;
    apply_job j = { it, y->data, x->data, c->acc };
    cpu_pool_run(c->pool, y->n * it->geom.slice_size, backproject_task, &j);
    return RTOMO_OK;
}

/* The image at (x, y), bilinear between pixel centres, 0 outside. */
static float bilinear(const float *img, int N, float x, float y)
{
    float fx = floorf(x), fy = floorf(y);
    int x0 = (int)fx, y0 = (int)fy;
    float ax = x - fx, ay = y - fy, v = 0.0f;
    for (int dy = 0; dy <= 1; dy++)
        for (int dx = 0; dx <= 1; dx++) {
            int xi = x0 + dx, yi = y0 + dy;
            if (xi >= 0 && xi < N && yi >= 0 && yi < N)
                v += (dx ? ax : 1.0f - ax) * (dy ? ay : 1.0f - ay) *
                     img[(size_t)yi * (size_t)N + (size_t)xi];
        }
    return v;
}

/* One (row, projection) of the unmatched ray-driven projector. */
static void ray_task(void *ctx, int task, int worker)
{
    (void)worker;
    const apply_job *j = ctx;
    const rtomo_iter *it = j->it;
    const int N = it->geom.slice_size, W = it->geom.det_width;
    const int P = it->geom.n_proj, row = task / P, p = task % P;
    const iter_sf_proj *q = &it->proj[p];
    const float *img = j->in + (size_t)row * it->image_len;
    float *out = j->out + (size_t)row * it->sino_len + (size_t)p * W;
    const float c = 0.5f * (float)(N - 1);
    const int half = iter_ray_half(N);
    for (int b = 0; b < W; b++) {
        float x0, y0, sum = 0.0f;
        iter_ray_centre(q, b, c, &x0, &y0);
        for (int t = -half; t <= half; t++)
            sum += bilinear(img, N, x0 + (float)t * q->sin_a,
                            y0 + (float)t * q->cos_a);
        out[b] = sum;
    }
}

static rtomo_status cpu_ray_project(rtomo_iter *it, const iter_vec *x,
                                    iter_vec *y, rtomo_error *err)
{
    (void)err;
    cpu_iter *c = it->impl;
    apply_job j = { it, x->data, y->data, c->acc };
    cpu_pool_run(c->pool, x->n * it->geom.n_proj, ray_task, &j);
    return RTOMO_OK;
}

const rtomo_iter_backend_ops rtomo_cpu_iter_ops = {
    .name = "cpu",
    .create = cpu_create,
    .destroy = cpu_destroy,
    .vec_alloc = cpu_vec_alloc,
    .vec_free = cpu_vec_free,
    .vec_upload = cpu_vec_upload,
    .vec_download = cpu_vec_download,
    .project = cpu_project,
    .backproject = cpu_backproject,
    .dot = cpu_dot,
    .axpby = cpu_axpby,
    .mul = cpu_mul,
    .clamp_nonneg = cpu_clamp,
    .ray_project = cpu_ray_project,
};
