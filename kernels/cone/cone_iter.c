/*
 * cone_iter.c — iterative cone-beam reconstruction: the separable-
 * footprint cone-beam pair (cpu_cone_sf.c) behind the iterative engine's
 * backend ops (kernels/iterative/iter_internal.h), so that the engine's
 * SIRT and CGLS (rtomo_iter_solve), rtomo_iter_project and
 * rtomo_iter_backproject run on a cone-beam geometry unchanged.
 *
 * The plan is an rtomo_iter as iter_engine.c makes one, with one "row":
 * images are the ROI volume, sinograms all n_proj projections.  Only what
 * the front end reads is set (geom.row_count = 1 and geom.n_proj for its
 * checks and counts, the vector lengths, the ops); it never reads the
 * parallel-beam footprints (it->proj) through these ops.  The CPU's
 * vector ops are this file's own host loops, so nothing here depends on
 * the CPU parallel-beam backend's state; the CUDA pair brings its own
 * (cuda_cone_sf_backend.cu), and its streamed mode runs these host loops
 * on chunks over a thread pool (cone_host_vec.c).
 */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cone_iter.h"
#include "cone_sf_plan.h"
#include "cpu_cone_sf.h"
#include "engine_internal.h"

static cone_iter *state(rtomo_iter *it) { return (cone_iter *)it->impl; }

/* ------------------------------------------------------------ vectors ---- */

static rtomo_status vec_alloc(rtomo_iter *it, iter_vec *v, rtomo_error *err)
{
    (void)it;
    v->data = calloc((size_t)v->n * v->row_len, sizeof(float));
    if (!v->data)
        return rtomo_set_error(err, RTOMO_E_NOMEM,
                               "out of memory for %d vectors of %zu floats",
                               v->n, v->row_len);
    return RTOMO_OK;
}

static void vec_free(rtomo_iter *it, iter_vec *v)
{
    (void)it;
    free(v->data);
    v->data = NULL;
}

static rtomo_status vec_upload(rtomo_iter *it, iter_vec *v, const float *host,
                               rtomo_error *err)
{
    (void)it;
    (void)err;
    memcpy(v->data, host, sizeof(float) * (size_t)v->n * v->row_len);
    return RTOMO_OK;
}

static rtomo_status vec_download(rtomo_iter *it, const iter_vec *v,
                                 float *host, rtomo_error *err)
{
    (void)it;
    (void)err;
    memcpy(host, v->data, sizeof(float) * (size_t)v->n * v->row_len);
    return RTOMO_OK;
}

/* Per row, four partial sums of float products in double (exact
 * products). */
static rtomo_status dot(rtomo_iter *it, const iter_vec *a, const iter_vec *b,
                        double *out, rtomo_error *err)
{
    (void)it;
    (void)err;
    for (int i = 0; i < a->n; i++) {
        const float *x = a->data + (size_t)i * a->row_len;
        const float *y = b->data + (size_t)i * b->row_len;
        double s[4] = {0, 0, 0, 0};
        size_t k = 0;
        for (; k + 4 <= a->row_len; k += 4)
            for (int l = 0; l < 4; l++)
                s[l] += (double)x[k + l] * y[k + l];
        for (; k < a->row_len; k++)
            s[0] += (double)x[k] * y[k];
        out[i] = (s[0] + s[1]) + (s[2] + s[3]);
    }
    return RTOMO_OK;
}

static rtomo_status axpby(rtomo_iter *it, const double *alpha,
                          const iter_vec *x, const double *beta, iter_vec *y,
                          rtomo_error *err)
{
    (void)it;
    (void)err;
    const size_t len = y->row_len;
    for (int i = 0; i < y->n; i++) {
        const float *xs = x->data + (size_t)i * len;
        float *ys = y->data + (size_t)i * len;
        const float a = (float)alpha[i], b = (float)beta[i];
        for (size_t k = 0; k < len; k++)
            ys[k] = b == 0.0f ? a * xs[k] : a * xs[k] + b * ys[k];
    }
    return RTOMO_OK;
}

static rtomo_status mul(rtomo_iter *it, const iter_vec *w, iter_vec *y,
                        rtomo_error *err)
{
    (void)it;
    (void)err;
    for (int i = 0; i < y->n; i++) {
        float *ys = y->data + (size_t)i * y->row_len;
        for (size_t k = 0; k < y->row_len; k++)
            ys[k] *= w->data[k];
    }
    return RTOMO_OK;
}

static rtomo_status clamp_nonneg(rtomo_iter *it, iter_vec *x,
                                 rtomo_error *err)
{
    (void)it;
    (void)err;
    const size_t len = (size_t)x->n * x->row_len;
    for (size_t k = 0; k < len; k++)
        x->data[k] = x->data[k] > 0.0f ? x->data[k] : 0.0f;
    return RTOMO_OK;
}

/* ------------------------------------------------------------- the pair ---- */

static rtomo_status project(rtomo_iter *it, const iter_vec *x, iter_vec *y,
                            rtomo_error *err)
{
    (void)err;
    for (int i = 0; i < x->n; i++)
        cpu_cone_sf_project((cpu_cone_sf *)state(it)->pair, x->data + (size_t)i * x->row_len,
                            y->data + (size_t)i * y->row_len);
    return RTOMO_OK;
}

static rtomo_status backproject(rtomo_iter *it, const iter_vec *y,
                                iter_vec *x, rtomo_error *err)
{
    (void)err;
    for (int i = 0; i < y->n; i++)
        cpu_cone_sf_backproject((cpu_cone_sf *)state(it)->pair,
                                y->data + (size_t)i * y->row_len,
                                x->data + (size_t)i * x->row_len);
    return RTOMO_OK;
}

void cone_iter_destroy(rtomo_iter *it)
{
    cone_iter *s = state(it);
    if (!s)
        return;
#ifdef RTOMO_HAVE_CUDA
    if (it->backend == RTOMO_BACKEND_CUDA)
        cuda_cone_sf_destroy(s->pair);
    else
#endif
        cpu_cone_sf_destroy((cpu_cone_sf *)s->pair);
    rtomo_cone_destroy(s->geo);
    free(s->amp_theta);
    free(s);
    it->impl = NULL;
}

rtomo_status cone_iter_refuse_create(rtomo_iter *it, rtomo_error *err)
{
    (void)it;
    return rtomo_set_error(err, RTOMO_E_STATE,
                           "cone-beam iterative plans are made by "
                           "rtomo_cone_iter_create");
}

const rtomo_iter_backend_ops cone_sf_cpu_ops = {
    .name = "cpu-cone-sf",
    .create = cone_iter_refuse_create,
    .destroy = cone_iter_destroy,
    .vec_alloc = vec_alloc,
    .vec_free = vec_free,
    .vec_upload = vec_upload,
    .vec_download = vec_download,
    .project = project,
    .backproject = backproject,
    .dot = dot,
    .axpby = axpby,
    .mul = mul,
    .clamp_nonneg = clamp_nonneg,
};

/* ----------------------------------------------------------------- plan ---- */

/* l_theta per cell: 1 / cos of the ray's angle to the central plane. */
static rtomo_status make_amplitudes(cone_iter *s, rtomo_error *err)
{
    const rtomo_cone_geometry *g = &s->geo->geom;
    s->amp_theta = malloc(sizeof(float) * s->geo->frame_len);
    if (!s->amp_theta)
        return rtomo_set_error(err, RTOMO_E_NOMEM, "out of memory");
    for (int j = 0; j < g->det_v; j++) {
        const double v = (j - 0.5 * (g->det_v - 1)) * g->pitch_v + g->offset_v;
        for (int i = 0; i < g->det_u; i++) {
            const double u = (i - 0.5 * (g->det_u - 1)) * g->pitch_u +
                             g->offset_u;
            const double in_plane = g->sdd * g->sdd + u * u;
            s->amp_theta[(size_t)j * g->det_u + i] =
                (float)sqrt((in_plane + v * v) / in_plane);
        }
    }
    return RTOMO_OK;
}

/* The backend's pair into s->pair, and its ops. */
static rtomo_status make_pair(rtomo_iter *it, cone_iter *s, rtomo_error *err)
{
#ifdef RTOMO_HAVE_CUDA
    if (it->backend == RTOMO_BACKEND_CUDA) {
        it->ops = &cone_sf_cuda_ops;
        return cuda_cone_sf_create(it, s, err);
    }
#endif
    it->ops = &cone_sf_cpu_ops;
    cpu_cone_sf *pair = NULL;
    rtomo_status st = cpu_cone_sf_create(s->geo, s->amp_theta, &it->opt,
                                         &pair, err);
    s->pair = pair;
    return st;
}

static rtomo_status setup(rtomo_iter *it, const rtomo_cone_geometry *g,
                          rtomo_error *err)
{
    rtomo_backend backend;
    rtomo_status st = rtomo_resolve_backend(it->opt.backend, &backend, err);
    if (st != RTOMO_OK)
        return st;
    it->backend = backend;
    cone_iter *s = calloc(1, sizeof *s);
    if (!s)
        return rtomo_set_error(err, RTOMO_E_NOMEM, "out of memory");
    it->impl = s;
    it->ops = &cone_sf_cpu_ops;
    s->geo = calloc(1, sizeof *s->geo);
    if (!s->geo)
        return rtomo_set_error(err, RTOMO_E_NOMEM, "out of memory");
    if ((st = cone_geometry_setup(s->geo, g, 1, err)) != RTOMO_OK ||
        (st = make_amplitudes(s, err)) != RTOMO_OK ||
        (st = make_pair(it, s, err)) != RTOMO_OK)
        return st;
    /* What the front end reads: one row, the counts, the lengths. */
    rtomo_fbp_geometry_init(&it->geom);
    it->geom.det_width = g->det_u;
    it->geom.det_height = 1;
    it->geom.n_proj = g->n_proj;
    it->geom.row_count = 1;
    it->image_len = s->geo->volume_len;
    it->sino_len = s->geo->frame_len * (size_t)g->n_proj;
    return RTOMO_OK;
}

rtomo_iter *rtomo_cone_iter_create(const rtomo_cone_geometry *g,
                                   const rtomo_engine_options *opt,
                                   rtomo_error *err)
{
    rtomo_clear_error(err);
    rtomo_iter *it = calloc(1, sizeof *it);
    if (!it) {
        rtomo_set_error(err, RTOMO_E_NOMEM, "out of memory for the plan");
        return NULL;
    }
    if (opt)
        it->opt = *opt;
    else
        rtomo_engine_options_init(&it->opt);
    if (setup(it, g, err) != RTOMO_OK) {
        if (it->impl)
            cone_iter_destroy(it);
        free(it);
        return NULL;
    }
    return it;
}

/* ------------------------------------------------------ memory needed ---- */

/* What a solve of c holds (rtomo_cone_iter_bytes): the solvers'
 * sinograms and volumes where the backend keeps its vectors (at most),
 * the pair's own, and on the host the front end's staging of one of them
 * (SIRT's weights); device[d] for each of n GPUs. */
static rtomo_status iter_bytes(const rtomo_cone *c, rtomo_backend backend,
                               int n, size_t budget, size_t *host,
                               size_t *device, int *slices, rtomo_error *err)
{
    const size_t sino = cone_sf_sino_bytes(c), vol = cone_sf_volume_bytes(c);
    const size_t vectors = CONE_SF_SOLVE_SINOGRAMS * sino +
                           CONE_SF_SOLVE_VOLUMES * vol;
    const size_t staging = sino > vol ? sino : vol;
    *slices = 0;
    for (int d = 0; d < n; d++)
        device[d] = 0;
    if (backend == RTOMO_BACKEND_CPU) {
        /* The CPU pair's l_theta and amplitude-weighted sinogram besides
         * (cpu_cone_sf.c; its per-thread scratch is a few rows). */
        *host = vectors + staging + sizeof(float) * c->frame_len + sino;
        return RTOMO_OK;
    }
    *host = staging;
    const size_t resident = cone_sf_resident_bytes(c, n, device);
    if (!budget || resident <= budget)
        return RTOMO_OK;
    cone_sf_stream_plan plan;
    rtomo_status st = cone_sf_stream_plan_make(c, n, budget, 0, &plan, err);
    if (st != RTOMO_OK)
        return st;
    for (int d = 0; d < n; d++)
        device[d] = plan.device_bytes;
    *host = vectors + staging + plan.host_bytes;
    *slices = plan.slices;
    return RTOMO_OK;
}

rtomo_status rtomo_cone_iter_bytes(const rtomo_cone_geometry *g,
                                   rtomo_backend backend, int n_devices,
                                   size_t device_budget, size_t *host,
                                   size_t *device, int *slab_slices,
                                   rtomo_error *err)
{
    rtomo_clear_error(err);
    if (backend != RTOMO_BACKEND_CPU && backend != RTOMO_BACKEND_CUDA)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "rtomo_cone_iter_bytes: the CPU or CUDA "
                               "backend, not %s", rtomo_backend_name(backend));
    if (n_devices < 0 || n_devices > RTOMO_MAX_DEVICES)
        return rtomo_set_error(err, RTOMO_E_INVALID, "rtomo_cone_iter_bytes: "
                               "%d devices (0 to %d)", n_devices,
                               RTOMO_MAX_DEVICES);
    const int n = n_devices < 1 ? 1 : n_devices;
    rtomo_cone *c = calloc(1, sizeof *c);
    if (!c)
        return rtomo_set_error(err, RTOMO_E_NOMEM, "out of memory");
    size_t h = 0, d[RTOMO_MAX_DEVICES];
    int s = 0;
    rtomo_status st = cone_geometry_setup(c, g, 1, err);
    if (st == RTOMO_OK)
        st = iter_bytes(c, backend, n, device_budget, &h, d, &s, err);
    if (st == RTOMO_OK) {
        if (host)
            *host = h;
        for (int i = 0; device && i < n; i++)
            device[i] = d[i];
        if (slab_slices)
            *slab_slices = s;
    }
    rtomo_cone_destroy(c);
    return st;
}
