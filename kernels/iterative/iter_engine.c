/*
 * iter_engine.c — the backend-neutral front end of the iterative engine:
 * argument and geometry checks, the plan, and SIRT and CGLS written once
 * over the backend ops of iter_internal.h (vectors stay in the backend's
 * memory; only per-row scalars cross to the host each iteration).
 *
 * Rows (slices) are independent problems: every scalar of the solvers
 * (CGLS's alpha and beta) is per row, so n rows solved together give the
 * same iterates as n solves of one row.  The residual reported is that of
 * all rows together, ||A x - b|| / ||b|| (||A x|| when b is all zero).
 */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"
#include "iter_internal.h"

/* ------------------------------------------------------------- names ---- */

const char *rtomo_iter_method_name(rtomo_iter_method m)
{
    switch (m) {
    case RTOMO_ITER_SIRT: return "sirt";
    case RTOMO_ITER_CGLS: return "cgls";
    }
    return "unknown";
}

rtomo_status rtomo_iter_method_parse(const char *name, rtomo_iter_method *out)
{
    if (name && out) {
        if (!strcmp(name, "sirt")) { *out = RTOMO_ITER_SIRT; return RTOMO_OK; }
        if (!strcmp(name, "cgls")) { *out = RTOMO_ITER_CGLS; return RTOMO_OK; }
    }
    return RTOMO_E_INVALID;
}

void rtomo_iter_options_init(rtomo_iter_options *o)
{
    memset(o, 0, sizeof *o);
    o->method = RTOMO_ITER_SIRT;
    o->iterations = 100;
    o->images_every = 1;
}

/* ---------------------------------------------------------- geometry ---- */

/* What the FBP geometry has and the iterative engine does not take: each
 * must be at its default (rtomo_fbp_geometry_init). */
static rtomo_status check_defaults(const rtomo_fbp_geometry *g,
                                   rtomo_error *err)
{
    const char *field = NULL;
    if (g->window != RTOMO_WINDOW_RAMLAK) field = "window";
    else if (g->cutoff != 0.0 && g->cutoff != 1.0) field = "cutoff";
    else if (g->interp != RTOMO_INTERP_LINEAR) field = "interp";
    else if (g->roi_x || g->roi_y || g->roi_width || g->roi_height)
        field = "roi";
    else if (g->angle_weights) field = "angle_weights";
    else if (g->window_proj != 0 && g->window_proj != g->n_proj)
        field = "window_proj";
    else if (g->phase.delta_beta != 0.0) field = "phase";
    else if (g->rings != RTOMO_RINGS_OFF) field = "rings";
    else if (g->half_acquisition) field = "half_acquisition";
    else if (g->frame_width || g->frame_offset) field = "frame_width";
    if (field)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "iterative reconstruction: geometry field %s "
                               "does not apply and must be left at its "
                               "default", field);
    return RTOMO_OK;
}

static rtomo_status select_backend(rtomo_iter *it, rtomo_error *err)
{
    rtomo_backend backend;
    rtomo_status st = rtomo_resolve_backend(it->opt.backend, &backend, err);
    if (st != RTOMO_OK)
        return st;
    it->ops = &rtomo_cpu_iter_ops;
#ifdef RTOMO_HAVE_CUDA
    if (backend == RTOMO_BACKEND_CUDA)
        it->ops = &rtomo_cuda_iter_ops;
#endif
    it->backend = backend;
    return RTOMO_OK;
}

static rtomo_status copy_geometry(rtomo_iter *it, const rtomo_fbp_geometry *g,
                                  rtomo_error *err)
{
    rtomo_fbp_geometry *c = &it->geom;
    *c = *g;
    const int n = g->n_proj;
    it->angles = malloc(sizeof(double) * (size_t)n);
    it->axis_shift = calloc((size_t)n, sizeof(double));
    it->proj = malloc(sizeof(iter_sf_proj) * (size_t)n);
    if (!it->angles || !it->axis_shift || !it->proj)
        return rtomo_set_error(err, RTOMO_E_NOMEM,
                               "out of memory for %d projections", n);
    double step = g->angle_step != 0.0 ? g->angle_step : M_PI / n;
    for (int p = 0; p < n; p++) {
        it->angles[p] = g->angles ? g->angles[p] : g->angle_start + p * step;
        if (g->axis_shift)
            it->axis_shift[p] = g->axis_shift[p];
    }
    c->angles = it->angles;
    c->axis_shift = it->axis_shift;
    c->angle_step = step;
    if (isnan(c->axis))
        c->axis = 0.5 * (g->det_width - 1);
    if (c->cutoff == 0.0)
        c->cutoff = 1.0;
    if (c->window_proj == 0)
        c->window_proj = n;
    if (c->row_count == 0)
        c->row_count = g->det_height - g->row_first;
    if (c->slice_size == 0)
        c->slice_size = g->det_width;
    c->roi_x = c->roi_y = 0;
    c->roi_width = c->roi_height = c->slice_size;
    double centre = 0.5 * (c->slice_size - 1);
    for (int p = 0; p < n; p++)
        iter_sf_proj_init(&it->proj[p], it->angles[p],
                          c->axis + it->axis_shift[p], centre);
    it->image_len = (size_t)c->slice_size * (size_t)c->slice_size;
    it->sino_len = (size_t)n * (size_t)c->det_width;
    return RTOMO_OK;
}

rtomo_iter *rtomo_iter_create(const rtomo_fbp_geometry *g,
                              const rtomo_engine_options *opt,
                              rtomo_error *err)
{
    rtomo_clear_error(err);
    if (!g) {
        rtomo_set_error(err, RTOMO_E_INVALID, "geometry is NULL");
        return NULL;
    }
    if (rtomo_fbp_geometry_validate(g, err) != RTOMO_OK ||
        check_defaults(g, err) != RTOMO_OK)
        return NULL;
    rtomo_iter *it = calloc(1, sizeof *it);
    if (!it) {
        rtomo_set_error(err, RTOMO_E_NOMEM, "out of memory for the plan");
        return NULL;
    }
    if (opt)
        it->opt = *opt;
    else
        rtomo_engine_options_init(&it->opt);
    if (copy_geometry(it, g, err) != RTOMO_OK ||
        select_backend(it, err) != RTOMO_OK ||
        it->ops->create(it, err) != RTOMO_OK) {
        rtomo_iter_destroy(it);
        return NULL;
    }
    return it;
}

void rtomo_iter_destroy(rtomo_iter *it)
{
    if (!it)
        return;
    if (it->ops && it->impl) {
        it->ops->vec_free(it, &it->sirt_row);
        it->ops->vec_free(it, &it->sirt_col);
        it->ops->destroy(it);
    }
    free(it->angles);
    free(it->axis_shift);
    free(it->proj);
    free(it);
}

rtomo_backend rtomo_iter_backend(const rtomo_iter *it) { return it->backend; }

/* ----------------------------------------------------------- vectors ---- */

static rtomo_status vec_make(rtomo_iter *it, iter_vec *v, iter_space space,
                             int n, rtomo_error *err)
{
    memset(v, 0, sizeof *v);
    v->space = space;
    v->n = n;
    v->row_len = space == ITER_IMAGES ? it->image_len : it->sino_len;
    return it->ops->vec_alloc(it, v, err);
}

static void vec_drop(rtomo_iter *it, iter_vec *v)
{
    if (v->data || v->priv)
        it->ops->vec_free(it, v);
    memset(v, 0, sizeof *v);
}

static rtomo_status check_batch(const rtomo_iter *it, const void *in, int n,
                                const void *out, rtomo_error *err)
{
    if (!it || !in || !out)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "NULL plan or buffer");
    if (n < 1 || n > it->geom.row_count)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "%d rows: a call takes 1 to row_count = %d",
                               n, it->geom.row_count);
    return RTOMO_OK;
}

/* Apply one of A / A^T to host arrays through backend vectors. */
typedef enum host_op { OP_PROJECT, OP_BACKPROJECT, OP_RAY } host_op;

static rtomo_status host_apply(rtomo_iter *it, host_op op, const float *in,
                               int n, float *out, rtomo_error *err)
{
    const int forward = op != OP_BACKPROJECT;
    iter_vec a, b;
    iter_space sin_ = forward ? ITER_IMAGES : ITER_SINOGRAMS;
    iter_space sout = forward ? ITER_SINOGRAMS : ITER_IMAGES;
    rtomo_status st = vec_make(it, &a, sin_, n, err);
    if (st != RTOMO_OK)
        return st;
    st = vec_make(it, &b, sout, n, err);
    if (st == RTOMO_OK)
        st = it->ops->vec_upload(it, &a, in, err);
    if (st == RTOMO_OK)
        st = op == OP_PROJECT ? it->ops->project(it, &a, &b, err)
             : op == OP_RAY   ? it->ops->ray_project(it, &a, &b, err)
                              : it->ops->backproject(it, &a, &b, err);
    if (st == RTOMO_OK)
        st = it->ops->vec_download(it, &b, out, err);
    vec_drop(it, &b);
    vec_drop(it, &a);
    return st;
}

rtomo_status rtomo_iter_project(rtomo_iter *it, const float *images, int n,
                                float *sinograms, rtomo_error *err)
{
    rtomo_clear_error(err);
    rtomo_status st = check_batch(it, images, n, sinograms, err);
    return st != RTOMO_OK ? st : host_apply(it, OP_PROJECT, images, n,
                                            sinograms, err);
}

rtomo_status rtomo_iter_project_ray(rtomo_iter *it, const float *images,
                                    int n, float *sinograms, rtomo_error *err)
{
    rtomo_clear_error(err);
    rtomo_status st = check_batch(it, images, n, sinograms, err);
    if (st == RTOMO_OK && !it->ops->ray_project)
        st = rtomo_set_error(err, RTOMO_E_INVALID, "the ray-driven baseline "
                             "projector is parallel beam only (this plan's "
                             "backend is %s)", it->ops->name);
    return st != RTOMO_OK ? st : host_apply(it, OP_RAY, images, n, sinograms,
                                            err);
}

rtomo_status rtomo_iter_backproject(rtomo_iter *it, const float *sinograms,
                                    int n, float *images, rtomo_error *err)
{
    rtomo_clear_error(err);
    rtomo_status st = check_batch(it, sinograms, n, images, err);
    return st != RTOMO_OK ? st : host_apply(it, OP_BACKPROJECT, sinograms, n,
                                            images, err);
}

/* ------------------------------------------------------------ solvers ---- */

typedef struct solve_ctx {
    rtomo_iter *it;
    int n;
    const rtomo_iter_options *o;
    rtomo_iter_result *res;
    float *images;              /* the caller's, for the callback and end */
    double b_norm;              /* ||b|| over all rows (1 when b is 0) */
    double *alpha, *beta, *d1, *d2;     /* n per-row scalars each */
} solve_ctx;

static rtomo_status timed_project(solve_ctx *s, const iter_vec *x, iter_vec *y,
                                  rtomo_error *err)
{
    double t = rtomo_now_seconds();
    rtomo_status st = s->it->ops->project(s->it, x, y, err);
    s->res->project_seconds += rtomo_now_seconds() - t;
    s->res->updates += iter_updates(s->it, x->n);
    return st;
}

static rtomo_status timed_backproject(solve_ctx *s, const iter_vec *y,
                                      iter_vec *x, rtomo_error *err)
{
    double t = rtomo_now_seconds();
    rtomo_status st = s->it->ops->backproject(s->it, y, x, err);
    s->res->backproject_seconds += rtomo_now_seconds() - t;
    s->res->updates += iter_updates(s->it, y->n);
    return st;
}

static double sum(const double *v, int n)
{
    double t = 0.0;
    for (int i = 0; i < n; i++)
        t += v[i];
    return t;
}

static void fill(double *v, int n, double value)
{
    for (int i = 0; i < n; i++)
        v[i] = value;
}

/* The relative residual from per-row squared norms in s->d1. */
static double residual_of(const solve_ctx *s, const double *sq)
{
    return sqrt(sum(sq, s->n)) / s->b_norm;
}

/* After iteration k with residual r: record it, call the callback (with
 * the images downloaded), and say whether to stop (1: stop). */
static int after_iteration(solve_ctx *s, const iter_vec *x, int k, double r,
                           rtomo_status *st, rtomo_error *err)
{
    s->res->iterations = k;
    s->res->residual = r;
    if (s->o->progress) {
        /* Downloads only when the callback is to see the images: a
         * daemon watching for an abort every iteration pays nothing. */
        const int look = s->o->images_every > 0 && k % s->o->images_every == 0;
        if (look) {
            *st = s->it->ops->vec_download(s->it, x, s->images, err);
            if (*st != RTOMO_OK)
                return 1;
        }
        if (s->o->progress(s->o->ctx, k, r, look ? s->images : NULL)) {
            s->res->stopped = 1;
            return 1;
        }
    }
    return s->o->tolerance > 0.0 && r <= s->o->tolerance;
}

/* The SIRT weights 1 / (A 1) and 1 / (A^T 1), once per plan. */
static rtomo_status sirt_weights(solve_ctx *s, rtomo_error *err)
{
    rtomo_iter *it = s->it;
    if (it->sirt_ready)
        return RTOMO_OK;
    const rtomo_iter_backend_ops *ops = it->ops;
    size_t nmax = it->image_len > it->sino_len ? it->image_len : it->sino_len;
    float *h = malloc(sizeof(float) * nmax);
    iter_vec ones_img, ones_sino;
    memset(&ones_img, 0, sizeof ones_img);
    memset(&ones_sino, 0, sizeof ones_sino);
    rtomo_status st = h ? RTOMO_OK
                        : rtomo_set_error(err, RTOMO_E_NOMEM, "out of memory");
    if (st == RTOMO_OK)
        st = vec_make(it, &ones_img, ITER_IMAGES, 1, err);
    if (st == RTOMO_OK)
        st = vec_make(it, &ones_sino, ITER_SINOGRAMS, 1, err);
    if (st == RTOMO_OK)
        st = vec_make(it, &it->sirt_row, ITER_SINOGRAMS, 1, err);
    if (st == RTOMO_OK)
        st = vec_make(it, &it->sirt_col, ITER_IMAGES, 1, err);
    /* Row sums: A 1. */
    if (st == RTOMO_OK) {
        for (size_t i = 0; i < it->image_len; i++)
            h[i] = 1.0f;
        st = ops->vec_upload(it, &ones_img, h, err);
    }
    if (st == RTOMO_OK)
        st = ops->project(it, &ones_img, &it->sirt_row, err);
    if (st == RTOMO_OK)
        st = ops->vec_download(it, &it->sirt_row, h, err);
    if (st == RTOMO_OK) {
        for (size_t i = 0; i < it->sino_len; i++)
            h[i] = h[i] > ITER_SIRT_MIN_SUM ? 1.0f / h[i] : 0.0f;
        st = ops->vec_upload(it, &it->sirt_row, h, err);
    }
    /* Column sums: A^T 1. */
    if (st == RTOMO_OK) {
        for (size_t i = 0; i < it->sino_len; i++)
            h[i] = 1.0f;
        st = ops->vec_upload(it, &ones_sino, h, err);
    }
    if (st == RTOMO_OK)
        st = ops->backproject(it, &ones_sino, &it->sirt_col, err);
    if (st == RTOMO_OK)
        st = ops->vec_download(it, &it->sirt_col, h, err);
    if (st == RTOMO_OK) {
        for (size_t i = 0; i < it->image_len; i++)
            h[i] = h[i] > ITER_SIRT_MIN_SUM ? 1.0f / h[i] : 0.0f;
        st = ops->vec_upload(it, &it->sirt_col, h, err);
    }
    vec_drop(it, &ones_img);
    vec_drop(it, &ones_sino);
    free(h);
    if (st == RTOMO_OK)
        it->sirt_ready = 1;
    else {
        vec_drop(it, &it->sirt_row);
        vec_drop(it, &it->sirt_col);
    }
    return st;
}

/*
 * SIRT: x <- x + C A^T R (b - A x), R and C the inverse row and column
 * sums.  The residual r = b - A x of the current x is kept, so each
 * iteration is one A^T and one A, and the residual reported is exactly
 * that of the images handed to the callback.
 */
static rtomo_status solve_sirt(solve_ctx *s, const iter_vec *b, iter_vec *x,
                               rtomo_error *err)
{
    rtomo_iter *it = s->it;
    const rtomo_iter_backend_ops *ops = it->ops;
    iter_vec r, g;
    rtomo_status st = sirt_weights(s, err);
    if (st != RTOMO_OK)
        return st;
    if ((st = vec_make(it, &r, ITER_SINOGRAMS, s->n, err)) != RTOMO_OK)
        return st;
    if ((st = vec_make(it, &g, ITER_IMAGES, s->n, err)) != RTOMO_OK) {
        vec_drop(it, &r);
        return st;
    }
    double *one = s->alpha, *minus = s->beta;
    fill(one, s->n, 1.0);
    fill(minus, s->n, -1.0);
    /* r = b - A x */
    if ((st = timed_project(s, x, &r, err)) == RTOMO_OK &&
        (st = ops->axpby(it, one, b, minus, &r, err)) == RTOMO_OK &&
        (st = ops->dot(it, &r, &r, s->d1, err)) == RTOMO_OK) {
        s->res->residual = residual_of(s, s->d1);
        int stop = s->o->tolerance > 0.0 && s->res->residual <= s->o->tolerance;
        for (int k = 1; !stop && k <= s->o->iterations; k++) {
            /* x += C A^T R r */
            if ((st = ops->mul(it, &it->sirt_row, &r, err)) != RTOMO_OK ||
                (st = timed_backproject(s, &r, &g, err)) != RTOMO_OK ||
                (st = ops->mul(it, &it->sirt_col, &g, err)) != RTOMO_OK ||
                (st = ops->axpby(it, one, &g, one, x, err)) != RTOMO_OK)
                break;
            if (s->o->nonnegative &&
                (st = ops->clamp_nonneg(it, x, err)) != RTOMO_OK)
                break;
            /* r = b - A x */
            if ((st = timed_project(s, x, &r, err)) != RTOMO_OK ||
                (st = ops->axpby(it, one, b, minus, &r, err)) != RTOMO_OK ||
                (st = ops->dot(it, &r, &r, s->d1, err)) != RTOMO_OK)
                break;
            stop = after_iteration(s, x, k, residual_of(s, s->d1), &st, err);
            if (st != RTOMO_OK)
                break;
        }
    }
    vec_drop(it, &g);
    vec_drop(it, &r);
    return st;
}

/*
 * CGLS (Hestenes-Stiefel on the normal equations, Bjorck's form), per row:
 *   r = b - A x, s = A^T r, p = s, gamma = ||s||^2
 *   repeat: q = A p; alpha = gamma / ||q||^2; x += alpha p; r -= alpha q;
 *           s = A^T r; gamma' = ||s||^2; p = s + (gamma'/gamma) p
 * One A and one A^T per iteration.  A row whose gamma or ||q|| is 0 has
 * converged (or is empty) and stays where it is.
 */
static rtomo_status solve_cgls(solve_ctx *s, const iter_vec *b, iter_vec *x,
                               rtomo_error *err)
{
    rtomo_iter *it = s->it;
    const rtomo_iter_backend_ops *ops = it->ops;
    const int n = s->n;
    iter_vec r, q, g, p;
    memset(&q, 0, sizeof q);
    memset(&g, 0, sizeof g);
    memset(&p, 0, sizeof p);
    rtomo_status st = vec_make(it, &r, ITER_SINOGRAMS, n, err);
    if (st == RTOMO_OK)
        st = vec_make(it, &q, ITER_SINOGRAMS, n, err);
    if (st == RTOMO_OK)
        st = vec_make(it, &g, ITER_IMAGES, n, err);
    if (st == RTOMO_OK)
        st = vec_make(it, &p, ITER_IMAGES, n, err);
    double *gamma = malloc(sizeof(double) * (size_t)n * 2);
    double *rr = gamma ? gamma + n : NULL;
    if (st == RTOMO_OK && !gamma)
        st = rtomo_set_error(err, RTOMO_E_NOMEM, "out of memory");
    double *a = s->alpha, *c = s->beta;
    if (st == RTOMO_OK) {
        fill(a, n, 1.0);
        fill(c, n, -1.0);
        if ((st = timed_project(s, x, &r, err)) == RTOMO_OK &&
            (st = ops->axpby(it, a, b, c, &r, err)) == RTOMO_OK &&
            (st = ops->dot(it, &r, &r, rr, err)) == RTOMO_OK &&
            (st = timed_backproject(s, &r, &g, err)) == RTOMO_OK &&
            (st = ops->dot(it, &g, &g, gamma, err)) == RTOMO_OK) {
            fill(c, n, 0.0);
            st = ops->axpby(it, a, &g, c, &p, err);     /* p = s */
        }
    }
    if (st == RTOMO_OK) {
        s->res->residual = residual_of(s, rr);
        int stop = s->o->tolerance > 0.0 && s->res->residual <= s->o->tolerance;
        for (int k = 1; !stop && k <= s->o->iterations; k++) {
            if ((st = timed_project(s, &p, &q, err)) != RTOMO_OK ||
                (st = ops->dot(it, &q, &q, s->d1, err)) != RTOMO_OK)
                break;
            for (int i = 0; i < n; i++) {
                double al = gamma[i] > 0.0 && s->d1[i] > 0.0
                                ? gamma[i] / s->d1[i] : 0.0;
                a[i] = al;
                c[i] = 1.0;
                s->d2[i] = -al;
            }
            /* x += alpha p; r -= alpha q */
            if ((st = ops->axpby(it, a, &p, c, x, err)) != RTOMO_OK ||
                (st = ops->axpby(it, s->d2, &q, c, &r, err)) != RTOMO_OK ||
                (st = ops->dot(it, &r, &r, rr, err)) != RTOMO_OK ||
                (st = timed_backproject(s, &r, &g, err)) != RTOMO_OK ||
                (st = ops->dot(it, &g, &g, s->d1, err)) != RTOMO_OK)
                break;
            for (int i = 0; i < n; i++) {
                c[i] = gamma[i] > 0.0 ? s->d1[i] / gamma[i] : 0.0;
                a[i] = 1.0;
                gamma[i] = s->d1[i];
            }
            if ((st = ops->axpby(it, a, &g, c, &p, err)) != RTOMO_OK)
                break;
            stop = after_iteration(s, x, k, residual_of(s, rr), &st, err);
            if (st != RTOMO_OK)
                break;
        }
    }
    free(gamma);
    vec_drop(it, &p);
    vec_drop(it, &g);
    vec_drop(it, &q);
    vec_drop(it, &r);
    return st;
}

static rtomo_status check_options(const rtomo_iter_options *o,
                                  rtomo_error *err)
{
    if (o->method != RTOMO_ITER_SIRT && o->method != RTOMO_ITER_CGLS)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "unknown iterative method %d (sirt or cgls)",
                               (int)o->method);
    if (o->iterations < 1)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "iterations %d: at least 1", o->iterations);
    if (!isfinite(o->tolerance) || o->tolerance < 0.0)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "tolerance %g: a finite number >= 0 "
                               "(0 = run every iteration)", o->tolerance);
    if (o->images_every < 0)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "images_every %d: at least 0 (0 = never)",
                               o->images_every);
    if (o->nonnegative && o->method != RTOMO_ITER_SIRT)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "nonnegative applies to sirt only (a clamp "
                               "would break cgls's conjugate directions)");
    return RTOMO_OK;
}

rtomo_status rtomo_iter_solve(rtomo_iter *it, const float *sinograms, int n,
                              float *images, int warm,
                              const rtomo_iter_options *o,
                              rtomo_iter_result *res, rtomo_error *err)
{
    rtomo_clear_error(err);
    rtomo_iter_result local;
    if (!res)
        res = &local;
    memset(res, 0, sizeof *res);
    rtomo_status st = check_batch(it, sinograms, n, images, err);
    if (st != RTOMO_OK)
        return st;
    if (!o)
        return rtomo_set_error(err, RTOMO_E_INVALID, "options are NULL");
    if ((st = check_options(o, err)) != RTOMO_OK)
        return st;
    double t0 = rtomo_now_seconds();

    solve_ctx s;
    memset(&s, 0, sizeof s);
    s.it = it;
    s.n = n;
    s.o = o;
    s.res = res;
    s.images = images;
    double *scalars = malloc(sizeof(double) * 4 * (size_t)n);
    if (!scalars)
        return rtomo_set_error(err, RTOMO_E_NOMEM, "out of memory");
    s.alpha = scalars;
    s.beta = scalars + n;
    s.d1 = scalars + 2 * n;
    s.d2 = scalars + 3 * n;

    iter_vec b, x;
    memset(&x, 0, sizeof x);
    st = vec_make(it, &b, ITER_SINOGRAMS, n, err);
    if (st == RTOMO_OK)
        st = vec_make(it, &x, ITER_IMAGES, n, err);
    if (st == RTOMO_OK)
        st = it->ops->vec_upload(it, &b, sinograms, err);
    if (st == RTOMO_OK && warm)
        st = it->ops->vec_upload(it, &x, images, err);
    if (st == RTOMO_OK)
        st = it->ops->dot(it, &b, &b, s.d1, err);
    if (st == RTOMO_OK) {
        double bn = sqrt(sum(s.d1, n));
        s.b_norm = bn > 0.0 ? bn : 1.0;
        st = o->method == RTOMO_ITER_SIRT ? solve_sirt(&s, &b, &x, err)
                                          : solve_cgls(&s, &b, &x, err);
    }
    /* The images of the last iteration done (also after an abort). */
    if (st == RTOMO_OK)
        st = it->ops->vec_download(it, &x, images, err);
    vec_drop(it, &x);
    vec_drop(it, &b);
    free(scalars);
    res->seconds = rtomo_now_seconds() - t0;
    return st;
}
