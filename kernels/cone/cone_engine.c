/*
 * cone_engine.c — the backend-neutral front end of the cone-beam engine:
 * plan creation (geometry, weights, filter, backend), argument checks, the
 * queue that gathers filtered projections into chunks for the
 * back-projector, and the engine's own timing.  The backends
 * (cpu_cone*.c, cuda_cone*.cu) see only valid requests.
 */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cone_internal.h"
#include "cpu_pool.h"
#include "engine_internal.h"
#include "fbp_filter_design.h"

const char *rtomo_cone_kernel_name(rtomo_cone_kernel k)
{
    switch (k) {
    case RTOMO_CONE_KERNEL_AUTO: return "auto";
    case RTOMO_CONE_KERNEL_TEXTURE: return "texture";
    case RTOMO_CONE_KERNEL_ALU: return "alu";
    }
    return "unknown";
}

rtomo_status rtomo_cone_kernel_parse(const char *name, rtomo_cone_kernel *out)
{
    static const rtomo_cone_kernel all[] = {RTOMO_CONE_KERNEL_AUTO,
                                            RTOMO_CONE_KERNEL_TEXTURE,
                                            RTOMO_CONE_KERNEL_ALU};
    for (size_t i = 0; name && out && i < sizeof all / sizeof all[0]; i++)
        if (!strcmp(name, rtomo_cone_kernel_name(all[i]))) {
            *out = all[i];
            return RTOMO_OK;
        }
    return RTOMO_E_INVALID;
}

static rtomo_status select_backend(rtomo_cone *c, rtomo_error *err)
{
    rtomo_backend backend;
    rtomo_status st = rtomo_resolve_backend(c->opt.backend, &backend, err);
    if (st != RTOMO_OK)
        return st;
    c->ops = &cone_cpu_ops;
#ifdef RTOMO_HAVE_CUDA
    if (backend == RTOMO_BACKEND_CUDA)
        c->ops = &cone_cuda_ops;
#endif
    c->backend = backend;
    return RTOMO_OK;
}

rtomo_cone *rtomo_cone_create(const rtomo_cone_geometry *g,
                              const rtomo_engine_options *opt,
                              rtomo_cone_kernel kernel, rtomo_error *err)
{
    rtomo_clear_error(err);
    if (kernel < RTOMO_CONE_KERNEL_AUTO || kernel > RTOMO_CONE_KERNEL_ALU) {
        rtomo_set_error(err, RTOMO_E_INVALID, "unknown cone kernel %d",
                        (int)kernel);
        return NULL;
    }
    rtomo_cone *c = calloc(1, sizeof *c);
    if (!c) {
        rtomo_set_error(err, RTOMO_E_NOMEM, "out of memory for the plan");
        return NULL;
    }
    if (opt)
        c->opt = *opt;
    else
        rtomo_engine_options_init(&c->opt);
    c->kernel = kernel;
    c->chunk = CONE_CHUNK;
    rtomo_status st = cone_geometry_setup(c, g, 0, err);
    if (st == RTOMO_OK)
        st = cone_make_tables(c, err);
    if (st == RTOMO_OK) {
        c->queue = malloc(sizeof(int) * (size_t)c->chunk);
        c->row_weights = malloc(sizeof(float) * (size_t)c->geom.det_u);
        if (!c->queue || !c->row_weights)
            st = rtomo_set_error(err, RTOMO_E_NOMEM, "out of memory");
    }
    if (st == RTOMO_OK)
        st = select_backend(c, err);
    if (st == RTOMO_OK)
        st = c->ops->create(c, err);
    if (st == RTOMO_OK)
        st = cone_frames_setup(c, err);
    if (st != RTOMO_OK) {
        rtomo_cone_destroy(c);
        return NULL;
    }
    return c;
}

void rtomo_cone_destroy(rtomo_cone *c)
{
    if (!c)
        return;
    if (c->ops && c->impl)
        c->ops->destroy(c);
    free(c->angles);
    free(c->dbeta);
    free(c->cos_beta);
    free(c->sin_beta);
    free(c->cos_weight);
    free(c->filter);
    free(c->queue);
    free(c->row_weights);
    free(c->frame_scratch);
    cpu_pool_destroy(c->frame_pool);
    free(c);
}

rtomo_backend rtomo_cone_backend(const rtomo_cone *c) { return c->backend; }
const rtomo_cone_geometry *rtomo_cone_geometry_of(const rtomo_cone *c)
{
    return &c->geom;
}
rtomo_cone_weighting rtomo_cone_weighting_of(const rtomo_cone *c)
{
    return c->weighting;
}
rtomo_cone_kernel rtomo_cone_kernel_of(const rtomo_cone *c)
{
    return c->kernel;
}
int rtomo_cone_chunk(const rtomo_cone *c) { return c->chunk; }
int rtomo_cone_filtered_width(const rtomo_cone *c) { return c->filt_u; }
size_t rtomo_cone_volume_size(const rtomo_cone *c) { return c->volume_len; }

void rtomo_cone_get_stats(const rtomo_cone *c, rtomo_cone_stats *out)
{
    *out = c->stats;
}

/* ---------------------------------------------------------- checks ---- */

static rtomo_status check_index(const rtomo_cone *c, int index,
                                rtomo_error *err)
{
    if (index < 0 || index >= c->geom.n_proj)
        return rtomo_set_error(err, RTOMO_E_RANGE,
                               "projection index %d outside 0..%d", index,
                               c->geom.n_proj - 1);
    return RTOMO_OK;
}

static rtomo_status check_plan(const rtomo_cone *c, const void *a,
                               const void *b, rtomo_error *err)
{
    rtomo_clear_error(err);
    if (!c || !a || !b)
        return rtomo_set_error(err, RTOMO_E_INVALID, "NULL plan or buffer");
    return RTOMO_OK;
}

/* ------------------------------------------------------- the queue ---- */

static rtomo_status filter_into(rtomo_cone *c, int index, const float *li,
                                int slot, rtomo_error *err)
{
    double t = rtomo_now_seconds();
    cone_row_weights(c, index, c->row_weights);
    rtomo_status st = c->ops->filter(c, li, c->row_weights, slot, err);
    c->stats.filter_seconds += rtomo_now_seconds() - t;
    if (st == RTOMO_OK)
        c->stats.projections_filtered++;
    return st;
}

static rtomo_status backproject_queue(rtomo_cone *c, rtomo_error *err)
{
    if (c->queue_n == 0)
        return RTOMO_OK;
    double t = rtomo_now_seconds();
    rtomo_status st = c->ops->backproject(c, c->queue, c->queue_n, err);
    c->stats.backproject_seconds += rtomo_now_seconds() - t;
    if (st == RTOMO_OK) {
        c->stats.projections_backprojected += c->queue_n;
        c->stats.updates += (double)c->queue_n * (double)c->volume_len;
    }
    c->queue_n = 0;
    return st;
}

rtomo_status rtomo_cone_add_projection(rtomo_cone *c, int index,
                                       const float *line_integrals,
                                       rtomo_error *err)
{
    rtomo_status st = check_plan(c, line_integrals, line_integrals, err);
    if (st == RTOMO_OK)
        st = check_index(c, index, err);
    if (st == RTOMO_OK)
        st = filter_into(c, index, line_integrals, c->queue_n, err);
    if (st != RTOMO_OK)
        return st;
    c->queue[c->queue_n++] = index;
    return c->queue_n == c->chunk ? backproject_queue(c, err) : RTOMO_OK;
}

rtomo_status rtomo_cone_flush(rtomo_cone *c, rtomo_error *err)
{
    rtomo_status st = check_plan(c, c, c, err);
    return st == RTOMO_OK ? backproject_queue(c, err) : st;
}

rtomo_status rtomo_cone_read(rtomo_cone *c, float *out, rtomo_error *err)
{
    rtomo_status st = check_plan(c, out, out, err);
    if (st == RTOMO_OK)
        st = backproject_queue(c, err);
    return st == RTOMO_OK ? c->ops->read(c, 0, c->bp.nz, out, err) : st;
}

rtomo_status rtomo_cone_read_slices(rtomo_cone *c, int z_first, int z_count,
                                    float *out, rtomo_error *err)
{
    rtomo_status st = check_plan(c, out, out, err);
    if (st != RTOMO_OK)
        return st;
    if (z_first < 0 || z_count < 1 || z_first + z_count > c->bp.nz)
        return rtomo_set_error(err, RTOMO_E_RANGE,
                               "slices %d..%d outside the ROI's 0..%d",
                               z_first, z_first + z_count - 1,
                               c->bp.nz - 1);
    st = backproject_queue(c, err);
    return st == RTOMO_OK ? c->ops->read(c, z_first, z_count, out, err) : st;
}

rtomo_status rtomo_cone_reset(rtomo_cone *c, rtomo_error *err)
{
    rtomo_status st = check_plan(c, c, c, err);
    if (st != RTOMO_OK)
        return st;
    c->queue_n = 0;
    return c->ops->reset(c, err);
}

rtomo_status rtomo_cone_filter(rtomo_cone *c, int index,
                               const float *line_integrals, float *filtered,
                               rtomo_error *err)
{
    rtomo_status st = check_plan(c, line_integrals, filtered, err);
    if (st == RTOMO_OK)
        st = check_index(c, index, err);
    if (st == RTOMO_OK)
        st = filter_into(c, index, line_integrals, c->chunk, err);
    return st == RTOMO_OK ? c->ops->fetch(c, c->chunk, filtered, err) : st;
}

rtomo_status rtomo_cone_add_filtered(rtomo_cone *c, const int *indices, int n,
                                     const float *filtered, rtomo_error *err)
{
    rtomo_status st = check_plan(c, indices, filtered, err);
    if (st == RTOMO_OK && n < 0)
        st = rtomo_set_error(err, RTOMO_E_INVALID, "n %d < 0", n);
    for (int i = 0; st == RTOMO_OK && i < n; i++)
        st = check_index(c, indices[i], err);
    /* What is queued was fed first: it goes first. */
    if (st == RTOMO_OK)
        st = backproject_queue(c, err);
    for (int i = 0; st == RTOMO_OK && i < n; i++) {
        st = c->ops->load(c, c->queue_n, filtered + (size_t)i * c->filt_len,
                          err);
        if (st == RTOMO_OK)
            c->queue[c->queue_n++] = indices[i];
        if (st == RTOMO_OK && (c->queue_n == c->chunk || i == n - 1))
            st = backproject_queue(c, err);
    }
    return st;
}

rtomo_status rtomo_cone_reconstruct(rtomo_cone *c, const float *projections,
                                    float *volume, rtomo_error *err)
{
    rtomo_status st = check_plan(c, projections, volume, err);
    if (st == RTOMO_OK)
        st = rtomo_cone_reset(c, err);
    for (int p = 0; st == RTOMO_OK && p < c->geom.n_proj; p++)
        st = rtomo_cone_add_projection(c, p, projections + (size_t)p *
                                                              c->frame_len,
                                       err);
    return st == RTOMO_OK ? rtomo_cone_read(c, volume, err) : st;
}

/* ----------------------------------------------------- memory needed ---- */

/* Bytes of one FFT buffer set per worker or device: the padded rows and
 * their spectra. */
static size_t filter_bytes(const rtomo_cone *c)
{
    const size_t n = (size_t)c->filter_length, rows = (size_t)c->geom.det_v;
    return sizeof(float) * rows * n + 2 * sizeof(float) * rows * (n / 2 + 1);
}

rtomo_status rtomo_cone_bytes(const rtomo_cone_geometry *g,
                              rtomo_backend backend, size_t *host,
                              size_t *device, rtomo_error *err)
{
    rtomo_clear_error(err);
    if (backend != RTOMO_BACKEND_CPU && backend != RTOMO_BACKEND_CUDA)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "rtomo_cone_bytes: the CPU or CUDA backend, "
                               "not %s", rtomo_backend_name(backend));
    rtomo_cone *c = calloc(1, sizeof *c);
    if (!c)
        return rtomo_set_error(err, RTOMO_E_NOMEM, "out of memory");
    c->chunk = CONE_CHUNK;
    rtomo_status st = cone_geometry_setup(c, g, 0, err);
    if (st == RTOMO_OK)
        st = rtomo_fbp_filter_design(c->filt_u, c->geom.window,
                                     c->geom.cutoff, 1.0, NULL, 0,
                                     &c->filter_length, err);
    if (st == RTOMO_OK) {
        const size_t slots = sizeof(float) * c->filt_len *
                             (size_t)(c->chunk + 1);
        const size_t volume = sizeof(float) * c->volume_len;
        const size_t tables = sizeof(float) * (2 * c->frame_len +
                              (size_t)c->filter_length + (size_t)g->det_u);
        size_t h = tables, d = 0;
        if (backend == RTOMO_BACKEND_CPU) {
            /* Per core: a complex FFT row and the back-projector's
             * scratch, counted for 64 cores. */
            h += volume + slots +
                 64 * (8 * (size_t)c->filter_length + 12 * (size_t)c->bp.nx);
        } else {
            /* The slots again as texture layers; the FFT buffers twice
             * (cuFFT's work area is about their size). */
            d = volume + slots + sizeof(float) * c->filt_len *
                (size_t)c->chunk + tables + 2 * filter_bytes(c);
        }
        if (host)
            *host = h;
        if (device)
            *device = d;
    }
    rtomo_cone_destroy(c);
    return st;
}
