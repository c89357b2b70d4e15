/*
 * cone_host_vec.c — the iterative engine's vector ops on host vectors
 * over a thread pool, for the streamed CUDA cone pair (its vectors are in
 * host memory: gigabytes each at 1024^3, seconds per op for one thread).
 * The arithmetic is not written again: each task hands one chunk of a
 * row, as a one-row iter_vec, to the CPU cone pair's ops (cone_iter.c's
 * cone_sf_cpu_ops), which read neither the plan nor err.  So an element
 * is computed exactly as the CPU backend computes it; only dot's sum is
 * cut into chunks (each summed as the CPU op sums, then the chunks in
 * order), so that the result does not depend on the threads.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "cone_host_vec.h"
#include "cone_iter.h"
#include "cpu_pool.h"
#include "engine_internal.h"

struct cone_host_vec {
    cpu_pool *pool;
    double *partial;            /* dot: one sum per task */
    size_t partial_cap;
};

rtomo_status cone_host_vec_create(int threads, cone_host_vec **out,
                                  rtomo_error *err)
{
    cone_host_vec *h = calloc(1, sizeof *h);
    if (!h)
        return rtomo_set_error(err, RTOMO_E_NOMEM, "out of memory");
    rtomo_engine_options opt;
    rtomo_engine_options_init(&opt);
    opt.cpu_threads = threads;
    rtomo_status st = cpu_pool_create(rtomo_cpu_thread_count(&opt),
                                      &h->pool, err);
    if (st != RTOMO_OK) {
        free(h);
        return st;
    }
    *out = h;
    return RTOMO_OK;
}

void cone_host_vec_destroy(cone_host_vec *h)
{
    if (!h)
        return;
    cpu_pool_destroy(h->pool);
    free(h->partial);
    free(h);
}

/* ---------------------------------------------------------------- jobs ---- */

typedef enum job_kind { JOB_DOT, JOB_AXPBY, JOB_MUL, JOB_CLAMP } job_kind;

typedef struct chunk_job {
    job_kind kind;
    size_t row_len, chunks;     /* chunks per row */
    const iter_vec *a, *b;      /* dot: a, b; axpby: x (a); mul: w (a) */
    iter_vec *y;                /* axpby, mul, clamp */
    const double *alpha, *beta;
    double *partial;
} chunk_job;

/* Chunk c of a row of v from `off` (length len) as a one-row vector. */
static iter_vec view(const iter_vec *v, size_t row, size_t off, size_t len)
{
    iter_vec out = *v;
    out.n = 1;
    out.row_len = len;
    out.data = v->data + row * v->row_len + off;
    return out;
}

static void chunk_task(void *ctx, int t, int worker)
{
    (void)worker;
    const chunk_job *j = ctx;
    const rtomo_iter_backend_ops *ops = &cone_sf_cpu_ops;
    const size_t row = (size_t)t / j->chunks, c = (size_t)t % j->chunks;
    const size_t off = c * CONE_HOST_CHUNK;
    const size_t len = j->row_len - off < CONE_HOST_CHUNK ? j->row_len - off
                                                          : CONE_HOST_CHUNK;
    iter_vec a, b, y;
    switch (j->kind) {
    case JOB_DOT:
        a = view(j->a, row, off, len);
        b = view(j->b, row, off, len);
        (void)ops->dot(NULL, &a, &b, &j->partial[t], NULL);
        break;
    case JOB_AXPBY:
        a = view(j->a, row, off, len);
        y = view(j->y, row, off, len);
        (void)ops->axpby(NULL, &j->alpha[row], &a, &j->beta[row], &y, NULL);
        break;
    case JOB_MUL:
        a = view(j->a, 0, off, len);    /* w: one row */
        y = view(j->y, row, off, len);
        (void)ops->mul(NULL, &a, &y, NULL);
        break;
    case JOB_CLAMP:
        y = view(j->y, row, off, len);
        (void)ops->clamp_nonneg(NULL, &y, NULL);
        break;
    }
}

/* j over every chunk of n rows of j->row_len. */
static void run_chunks(cone_host_vec *h, chunk_job *j, int n)
{
    j->chunks = (j->row_len + CONE_HOST_CHUNK - 1) / CONE_HOST_CHUNK;
    if (j->chunks == 0)
        return;
    cpu_pool_run(h->pool, (int)(j->chunks * (size_t)n), chunk_task, j);
}

/* ----------------------------------------------------------------- ops ---- */

void cone_host_dot(cone_host_vec *h, const iter_vec *a, const iter_vec *b,
                   double *out)
{
    chunk_job j = {.kind = JOB_DOT, .row_len = a->row_len, .a = a, .b = b};
    const size_t chunks = (a->row_len + CONE_HOST_CHUNK - 1) / CONE_HOST_CHUNK;
    const size_t need = chunks * (size_t)a->n;
    if (need > h->partial_cap) {
        double *p = realloc(h->partial, sizeof(double) * need);
        if (!p) {
            /* No room for the partial sums: one thread, the whole row. */
            (void)cone_sf_cpu_ops.dot(NULL, a, b, out, NULL);
            return;
        }
        h->partial = p;
        h->partial_cap = need;
    }
    j.partial = h->partial;
    run_chunks(h, &j, a->n);
    for (int i = 0; i < a->n; i++) {
        double s = 0.0;
        for (size_t c = 0; c < chunks; c++)
            s += h->partial[(size_t)i * chunks + c];
        out[i] = s;
    }
}

void cone_host_axpby(cone_host_vec *h, const double *alpha,
                     const iter_vec *x, const double *beta, iter_vec *y)
{
    chunk_job j = {.kind = JOB_AXPBY, .row_len = y->row_len, .a = x, .y = y,
                   .alpha = alpha, .beta = beta};
    run_chunks(h, &j, y->n);
}

void cone_host_mul(cone_host_vec *h, const iter_vec *w, iter_vec *y)
{
    chunk_job j = {.kind = JOB_MUL, .row_len = y->row_len, .a = w, .y = y};
    run_chunks(h, &j, y->n);
}

void cone_host_clamp(cone_host_vec *h, iter_vec *x)
{
    chunk_job j = {.kind = JOB_CLAMP, .row_len = x->row_len, .y = x};
    run_chunks(h, &j, x->n);
}

/* ------------------------------------------------ the pair's host side ---- */

/* The streamed pair's host steps: zeroing a sinogram, adding a window
 * into it, gathering a window out of it, copying a slab to or from a
 * lane's page-locked staging. */
typedef enum window_kind { WIN_ZERO, WIN_ADD, WIN_GATHER, WIN_COPY } window_kind;

typedef struct window_job {
    window_kind kind;
    float *y;                   /* zero, add: the sinogram; copy: dst */
    const float *src;           /* gather: the sinogram; copy: src */
    float *out;                 /* gather: the window */
    const float *window;        /* add */
    size_t win, offset, frame, n;
} window_job;

/* Chunk t of n floats: its first float and its length. */
static size_t chunk_of(size_t n, int t, size_t *len)
{
    const size_t off = (size_t)t * CONE_HOST_CHUNK;
    *len = n - off < CONE_HOST_CHUNK ? n - off : CONE_HOST_CHUNK;
    return off;
}

/* Zero and copy: chunk t; add and gather: frame t's window. */
static void window_task(void *ctx, int t, int worker)
{
    (void)worker;
    const window_job *j = ctx;
    size_t len, off;
    switch (j->kind) {
    case WIN_ZERO:
        off = chunk_of(j->n, t, &len);
        memset(j->y + off, 0, sizeof(float) * len);
        break;
    case WIN_COPY:
        off = chunk_of(j->n, t, &len);
        memcpy(j->y + off, j->src + off, sizeof(float) * len);
        break;
    case WIN_ADD: {
        float *y = j->y + (size_t)t * j->frame + j->offset;
        const float *w = j->window + (size_t)t * j->win;
        for (size_t c = 0; c < j->win; c++)
            y[c] += w[c];
        break;
    }
    case WIN_GATHER:
        memcpy(j->out + (size_t)t * j->win,
               j->src + (size_t)t * j->frame + j->offset,
               sizeof(float) * j->win);
        break;
    }
}

static int chunks_of(size_t n)
{
    return (int)((n + CONE_HOST_CHUNK - 1) / CONE_HOST_CHUNK);
}

void cone_host_zero(cone_host_vec *h, float *y, size_t n)
{
    window_job j = {.kind = WIN_ZERO, .y = y, .n = n};
    cpu_pool_run(h->pool, chunks_of(n), window_task, &j);
}

void cone_host_copy(cone_host_vec *h, float *dst, const float *src, size_t n)
{
    window_job j = {.kind = WIN_COPY, .y = dst, .src = src, .n = n};
    cpu_pool_run(h->pool, chunks_of(n), window_task, &j);
}

void cone_host_add_window(cone_host_vec *h, const float *window, size_t win,
                          size_t offset, size_t frame, int n_frames,
                          float *y)
{
    window_job j = {.kind = WIN_ADD, .y = y, .window = window, .win = win,
                    .offset = offset, .frame = frame};
    cpu_pool_run(h->pool, n_frames, window_task, &j);
}

void cone_host_gather_window(cone_host_vec *h, const float *y, size_t win,
                             size_t offset, size_t frame, int n_frames,
                             float *window)
{
    window_job j = {.kind = WIN_GATHER, .src = y, .out = window, .win = win,
                    .offset = offset, .frame = frame};
    cpu_pool_run(h->pool, n_frames, window_task, &j);
}
