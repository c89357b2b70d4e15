/*
 * cuda_sbdx_slot.cu — one band of output rows on one device (see
 * cuda_sbdx_slot.h): its geometry, its resources, and the per-frame chain
 * of upload, reconstruction and download on three streams.
 */
#include "config.h"

#include <string.h>

#include "cuda_common.h"
#include "cuda_sbdx_slot.h"

/* ------------------------------------------------------------- bands ---- */

void sbdx_band_of(const rtomo_sbdx_geometry *g, int index, int count,
                  sbdx_band *band)
{
    int h = g->out_height, r = g->composite_radius, m = g->shift_m;
    band->own_first = (int)((long)h * index / count);
    band->own_rows = (int)((long)h * (index + 1) / count) - band->own_first;
    band->ext_first = band->own_first - r > 0 ? band->own_first - r : 0;
    int ext_end = band->own_first + band->own_rows + r;
    if (ext_end > h)
        ext_end = h;
    band->ext_rows = ext_end - band->ext_first;

    /* Hole rows cy with m cy + offset inside the ext rows' plane positions
     * for some offset of some plane. */
    int lo, hi;
    sbdx_offset_range(g->ratios, g->n_planes, g->det_height, &lo, &hi);
    int y_first = g->origin_y + band->ext_first;
    int y_last = g->origin_y + ext_end - 1;
    int cy_first = -sbdx_floor_div(hi - y_first, m);
    int cy_last = sbdx_floor_div(y_last - lo, m);
    if (cy_first < 0)
        cy_first = 0;
    if (cy_last > g->holes_y - 1)
        cy_last = g->holes_y - 1;
    band->hole_first = cy_first <= cy_last ? cy_first : 0;
    band->hole_rows = cy_first <= cy_last ? cy_last - cy_first + 1 : 0;
}

size_t sbdx_slot_frame_offset(const sbdx_slot *s, size_t sample_size)
{
    const rtomo_sbdx_geometry *g = s->geom;
    return (size_t)s->band.hole_first * g->holes_x * g->det_height *
           g->det_width * sample_size;
}

size_t sbdx_slot_frame_bytes(const sbdx_slot *s, size_t sample_size)
{
    const rtomo_sbdx_geometry *g = s->geom;
    return (size_t)s->band.hole_rows * g->holes_x * g->det_height *
           g->det_width * sample_size;
}

/* ------------------------------------------------------------- set-up ---- */

/* cudaMalloc of at least one byte, so that empty buffers are still valid
 * pointers. */
static rtomo_status device_alloc(void **p, size_t bytes, rtomo_error *err)
{
    RTOMO_CUDA_TRY(err, cudaMalloc(p, bytes ? bytes : 1));
    return RTOMO_OK;
}

static rtomo_status make_streams_and_events(sbdx_slot *s, rtomo_error *err)
{
    RTOMO_CUDA_TRY(err, cudaStreamCreateWithFlags(&s->upload, cudaStreamNonBlocking));
    RTOMO_CUDA_TRY(err, cudaStreamCreateWithFlags(&s->compute, cudaStreamNonBlocking));
    RTOMO_CUDA_TRY(err, cudaStreamCreateWithFlags(&s->download, cudaStreamNonBlocking));
    RTOMO_CUDA_TRY(err, cudaStreamCreateWithFlags(&s->aux, cudaStreamNonBlocking));
    for (int b = 0; b < 2; b++) {
        RTOMO_CUDA_TRY(err, cudaEventCreateWithFlags(&s->h2d_done[b], cudaEventDisableTiming));
        s->events_made++;
        RTOMO_CUDA_TRY(err, cudaEventCreateWithFlags(&s->d2h_done[b], cudaEventDisableTiming));
        s->events_made++;
        RTOMO_CUDA_TRY(err, cudaEventCreate(&s->compute_start[b]));
        s->events_made++;
        RTOMO_CUDA_TRY(err, cudaEventCreate(&s->compute_done[b]));
        s->events_made++;
    }
    return RTOMO_OK;
}

/* Allocate and build the look-up tables on the GPU; time the build. */
static rtomo_status build_tables(sbdx_slot *s, double *seconds,
                                 rtomo_error *err)
{
    const rtomo_sbdx_geometry *g = s->geom;
    size_t p = (size_t)g->n_planes, m = (size_t)g->shift_m;
    sbdx_lut_params *l = &s->lut;
    l->n_planes = g->n_planes;
    l->shift_m = g->shift_m;
    l->x.n_det = g->det_width;
    l->x.stride = sbdx_staged_stride(g->det_width);
    l->x.n_holes = g->holes_x;
    l->x.origin = g->origin_x;
    l->x.n_out = g->out_width;
    l->y.n_det = g->det_height;
    l->y.stride = g->det_height;
    l->y.n_holes = g->holes_y;
    l->y.origin = g->origin_y;
    l->y.n_out = g->out_height;
    rtomo_status st;
    if ((st = device_alloc((void **)&s->ratios, sizeof(double) * p, err)) ||
        (st = device_alloc((void **)&l->x.dc, sizeof(sbdx_gpu_dc) * p * g->det_width, err)) ||
        (st = device_alloc((void **)&l->y.dc, sizeof(sbdx_gpu_dc) * p * g->det_height, err)) ||
        (st = device_alloc((void **)&l->x.start, sizeof(int32_t) * p * (m + 2), err)) ||
        (st = device_alloc((void **)&l->y.start, sizeof(int32_t) * p * (m + 2), err)) ||
        (st = device_alloc((void **)&l->x.ent, sizeof(sbdx_gpu_entry) * p * 2 * g->det_width, err)) ||
        (st = device_alloc((void **)&l->y.ent, sizeof(sbdx_gpu_entry) * p * 2 * g->det_height, err)) ||
        (st = device_alloc((void **)&l->x.response, sizeof(float) * p * g->out_width, err)) ||
        (st = device_alloc((void **)&l->y.response, sizeof(float) * p * g->out_height, err)))
        return st;
    l->ratios = s->ratios;

    RTOMO_CUDA_TRY(err, cudaMemcpyAsync(s->ratios, g->ratios, sizeof(double) * p,
                                        cudaMemcpyHostToDevice, s->compute));
    RTOMO_CUDA_TRY(err, cudaEventRecord(s->compute_start[0], s->compute));
    if ((st = sbdx_lut_launch(l, s->compute, err)))
        return st;
    RTOMO_CUDA_TRY(err, cudaEventRecord(s->compute_done[0], s->compute));
    RTOMO_CUDA_TRY(err, cudaEventSynchronize(s->compute_done[0]));
    float ms = 0.0f;
    RTOMO_CUDA_TRY(err, cudaEventElapsedTime(&ms, s->compute_start[0],
                                             s->compute_done[0]));
    *seconds += 1e-3 * ms;
    return RTOMO_OK;
}

/* The x-pass configuration: staged rows per block and the q tile, reduced
 * until a block's staging fits in smem_limit bytes. */
static rtomo_status configure_xpass(const rtomo_sbdx_geometry *g,
                                    const sbdx_band *band, int rows_per_block,
                                    int smem_limit, sbdx_xpass_params *x,
                                    rtomo_error *err)
{
    int m = g->shift_m, lo, hi;
    sbdx_offset_range(g->ratios, g->n_planes, g->det_width, &lo, &hi);
    memset(x, 0, sizeof *x);
    x->start_pitch = sbdx_start_pitch(m);
    x->ent_pitch = sbdx_entry_pitch(g->det_width);
    x->holes_x = g->holes_x;
    x->det_w = g->det_width;
    x->det_h = g->det_height;
    x->shift_m = m;
    x->rows = band->hole_rows * g->det_height;
    x->q0 = sbdx_floor_div(g->origin_x, m);
    x->nq = sbdx_floor_div(g->origin_x + g->out_width - 1, m) + 1 - x->q0;
    x->delta_min = sbdx_floor_div(lo, m);
    x->delta_max = sbdx_floor_div(hi, m);
    x->stride = sbdx_staged_stride(g->det_width);
    x->rows_per_block = rows_per_block;
    x->q_tile = x->nq;
    while (sbdx_xpass_smem_bytes(x) > (size_t)smem_limit) {
        if (x->rows_per_block > 1) {
            x->rows_per_block = 1;
            continue;
        }
        int holes = smem_limit / (int)(sizeof(float) * x->stride);
        x->q_tile = holes - (x->delta_max - x->delta_min);
        if (x->q_tile < 1)
            return rtomo_set_error(
                err, RTOMO_E_UNAVAILABLE,
                "the CUDA SBDX x-pass cannot stage the %d holes that one "
                "plane column reaches (detector width %d) in %d bytes of "
                "shared memory", x->delta_max - x->delta_min + 1,
                g->det_width, smem_limit);
        break;
    }
    return RTOMO_OK;
}

static void configure_ypass(const rtomo_sbdx_geometry *g,
                            const sbdx_band *band, const sbdx_xpass_params *x,
                            sbdx_ypass_params *y)
{
    memset(y, 0, sizeof *y);
    y->start_pitch = sbdx_start_pitch(g->shift_m);
    y->ent_pitch = sbdx_entry_pitch(g->det_height);
    y->rows = x->rows;
    y->q0 = x->q0;
    y->nq = x->nq;
    y->shift_m = g->shift_m;
    y->det_h = g->det_height;
    y->q_tile = sbdx_ypass_q_tile(g->shift_m, x->nq);
    y->out_w = g->out_width;
    y->origin_x = g->origin_x;
    y->origin_y = g->origin_y;
    y->ext_first = band->ext_first;
    y->ext_rows = band->ext_rows;
    y->hole_first = band->hole_first;
    y->scale = (float)((double)g->shift_m * g->shift_m /
                       ((double)g->det_width * g->det_height));
    y->out_h = g->out_height;
}

/* Planes per round: as many as the x-pass output budget holds. */
static int choose_group(const rtomo_sbdx_geometry *g, const sbdx_tuning *t,
                        const sbdx_xpass_params *x)
{
    size_t per_plane = sizeof(float) * (size_t)x->rows * x->shift_m * x->nq;
    size_t n = per_plane ? t->t_budget / per_plane : (size_t)g->n_planes;
    if (n < 1)
        n = 1;
    if (n > (size_t)g->n_planes)
        n = (size_t)g->n_planes;
    if (t->max_group > 0 && n > (size_t)t->max_group)
        n = (size_t)t->max_group;
    return (int)n;
}

rtomo_status sbdx_kernel_config(const rtomo_sbdx_geometry *g,
                                const sbdx_band *band, const sbdx_tuning *t,
                                int smem_limit, sbdx_xpass_params *x,
                                sbdx_ypass_params *y, int *group,
                                rtomo_error *err)
{
    rtomo_status st = configure_xpass(g, band, t->xpass_rows, smem_limit, x,
                                      err);
    if (st)
        return st;
    configure_ypass(g, band, x, y);
    *group = choose_group(g, t, x);
    return RTOMO_OK;
}

static rtomo_status allocate_banks(sbdx_slot *s, rtomo_error *err)
{
    const rtomo_sbdx_geometry *g = s->geom;
    size_t w = (size_t)g->out_width;
    size_t planes = (size_t)g->n_planes * s->band.ext_rows * w;
    size_t own = (size_t)s->band.own_rows * w;
    size_t t = (size_t)s->group * s->xpass.rows * s->xpass.shift_m *
               s->xpass.nq;
    rtomo_status st;
    if ((st = device_alloc((void **)&s->t, sizeof(float) * t, err)))
        return st;
    for (int b = 0; b < 2; b++)
        if ((st = device_alloc((void **)&s->planes[b], sizeof(float) * planes, err)) ||
            (st = device_alloc((void **)&s->composite[b], sizeof(float) * own, err)) ||
            (st = device_alloc((void **)&s->depth[b], sizeof(uint16_t) * own, err)))
            return st;
    return RTOMO_OK;
}

static rtomo_status configure_composite(sbdx_slot *s, int smem_limit,
                                        rtomo_error *err)
{
    size_t bytes = sbdx_composite_smem_bytes(s->geom->composite_radius);
    if (bytes > (size_t)smem_limit)
        return rtomo_set_error(err, RTOMO_E_UNAVAILABLE,
                               "composite radius %d needs %zu bytes of shared "
                               "memory per block; the GPU has %d",
                               s->geom->composite_radius, bytes, smem_limit);
    return sbdx_composite_prepare((size_t)smem_limit, err);
}

rtomo_status sbdx_slot_init(sbdx_slot *s, const rtomo_sbdx *plan, int device,
                            const sbdx_band *band, const sbdx_tuning *tune,
                            double *lut_seconds, rtomo_error *err)
{
    memset(s, 0, sizeof *s);
    s->device = device;
    s->band = *band;
    s->geom = &plan->geom;
    s->method = plan->opt.sbdx_method;
    s->tune = *tune;
    RTOMO_CUDA_TRY(err, cudaSetDevice(device));
    int smem_limit = 0;
    RTOMO_CUDA_TRY(err, cudaDeviceGetAttribute(
                            &smem_limit, cudaDevAttrMaxSharedMemoryPerBlockOptin,
                            device));
    rtomo_status st;
    if ((st = make_streams_and_events(s, err)) ||
        (st = build_tables(s, lut_seconds, err)) ||
        (st = sbdx_kernel_config(s->geom, band, tune, smem_limit, &s->xpass,
                                 &s->ypass, &s->group, err)) ||
        (st = sbdx_xpass_prepare((size_t)smem_limit, err)) ||
        (st = configure_composite(s, smem_limit, err)))
        return st;
    return allocate_banks(s, err);
}

void sbdx_slot_release(sbdx_slot *s)
{
    if (cudaSetDevice(s->device) != cudaSuccess)
        return;
    rtomo_error ignored;
    sbdx_slot_drain(s, &ignored);
    void *buffers[] = {s->ratios, s->lut.x.dc, s->lut.y.dc, s->lut.x.start,
                       s->lut.y.start, s->lut.x.ent, s->lut.y.ent,
                       s->lut.x.response, s->lut.y.response, s->t,
                       s->frame[0], s->frame[1], s->planes[0], s->planes[1],
                       s->composite[0], s->composite[1], s->depth[0],
                       s->depth[1], s->planes_u16};
    for (size_t i = 0; i < sizeof buffers / sizeof buffers[0]; i++)
        if (buffers[i])
            cudaFree(buffers[i]);
    cudaEvent_t *events[] = {s->h2d_done, s->d2h_done, s->compute_start,
                             s->compute_done};
    for (int i = 0; i < s->events_made; i++)
        cudaEventDestroy(events[i % 4][i / 4]);
    cudaStream_t streams[] = {s->upload, s->compute, s->download, s->aux};
    for (int i = 0; i < 4; i++)
        if (streams[i])
            cudaStreamDestroy(streams[i]);
    cudaGetLastError();
    memset(s, 0, sizeof *s);
}

/* ---------------------------------------------------------- per frame ---- */

/* Both device frame banks hold at least `bytes` (after draining the slot
 * when they must grow, so that no queued work still reads them). */
static rtomo_status ensure_frame_banks(sbdx_slot *s, size_t bytes,
                                       rtomo_error *err)
{
    if (bytes <= s->frame_capacity && s->frame[0])
        return RTOMO_OK;
    rtomo_status st = sbdx_slot_drain(s, err);
    if (st)
        return st;
    for (int b = 0; b < 2; b++) {
        if (s->frame[b])
            RTOMO_CUDA_TRY(err, cudaFree(s->frame[b]));
        s->frame[b] = NULL;
    }
    s->frame_capacity = 0;
    for (int b = 0; b < 2; b++)
        if ((st = device_alloc(&s->frame[b], bytes, err)))
            return st;
    s->frame_capacity = bytes;
    return RTOMO_OK;
}

static rtomo_status enqueue_pixel_centric(sbdx_slot *s, int b,
                                          rtomo_dtype dtype, rtomo_error *err)
{
    const rtomo_sbdx_geometry *g = s->geom;
    size_t plane_size = (size_t)s->band.ext_rows * g->out_width;
    for (int k0 = 0; k0 < g->n_planes; k0 += s->group) {
        int n = g->n_planes - k0 < s->group ? g->n_planes - k0 : s->group;
        sbdx_xpass_params x = s->xpass;
        x.frame = s->frame[b];
        x.dtype = dtype;
        x.t = s->t;
        x.start = s->lut.x.start + (size_t)k0 * x.start_pitch;
        x.ent = s->lut.x.ent + (size_t)k0 * x.ent_pitch;
        x.planes = n;
        sbdx_ypass_params y = s->ypass;
        y.t = s->t;
        y.planes = s->planes[b] + plane_size * k0;
        y.start = s->lut.y.start + (size_t)k0 * y.start_pitch;
        y.ent = s->lut.y.ent + (size_t)k0 * y.ent_pitch;
        y.planes_n = n;
        if (g->flat_field) {
            y.response_x = s->lut.x.response + (size_t)k0 * g->out_width;
            y.response_y = s->lut.y.response + (size_t)k0 * g->out_height;
        }
        rtomo_status st;
        if ((st = sbdx_xpass_launch(&x, s->tune.xpass_threads, s->compute, err)) ||
            (st = sbdx_ypass_launch(&y, s->tune.ypass_threads, s->compute, err)))
            return st;
    }
    return RTOMO_OK;
}

static rtomo_status enqueue_detector_centric(sbdx_slot *s, int b,
                                             rtomo_dtype dtype,
                                             rtomo_error *err)
{
    const rtomo_sbdx_geometry *g = s->geom;
    sbdx_scatter_params p;
    p.frame = s->frame[b];
    p.dtype = dtype;
    p.planes = s->planes[b];
    p.dc_x = s->lut.x.dc;
    p.dc_y = s->lut.y.dc;
    p.n_planes = g->n_planes;
    p.holes_x = g->holes_x;
    p.hole_first = s->band.hole_first;
    p.hole_rows = s->band.hole_rows;
    p.det_w = g->det_width;
    p.det_h = g->det_height;
    p.shift_m = g->shift_m;
    p.out_w = g->out_width;
    p.origin_x = g->origin_x;
    p.origin_y = g->origin_y;
    p.ext_first = s->band.ext_first;
    p.ext_rows = s->band.ext_rows;
    p.scale = s->ypass.scale;
    p.response_x = g->flat_field ? s->lut.x.response : NULL;
    p.response_y = g->flat_field ? s->lut.y.response : NULL;
    p.out_h = g->out_height;
    return sbdx_scatter_launch(&p, s->compute, err);
}

static rtomo_status enqueue_composite(sbdx_slot *s, int b, rtomo_error *err)
{
    const rtomo_sbdx_geometry *g = s->geom;
    sbdx_composite_params p;
    p.planes = s->planes[b];
    p.response_x = s->lut.x.response;
    p.response_y = s->lut.y.response;
    p.flat_fielded = g->flat_field;
    p.n_planes = g->n_planes;
    p.width = g->out_width;
    p.height = g->out_height;
    p.radius = g->composite_radius;
    p.ext_first = s->band.ext_first;
    p.ext_rows = s->band.ext_rows;
    p.own_first = s->band.own_first;
    p.own_rows = s->band.own_rows;
    p.composite = s->composite[b];
    p.depth = s->depth[b];
    return sbdx_composite_launch(&p, s->compute, err);
}

static rtomo_status enqueue_upload(sbdx_slot *s, int b, const void *pinned_frame,
                                   size_t sample_size, rtomo_error *err)
{
    size_t bytes = sbdx_slot_frame_bytes(s, sample_size);
    RTOMO_CUDA_TRY(err, cudaStreamWaitEvent(s->upload, s->compute_done[b], 0));
    if (bytes)
        RTOMO_CUDA_TRY(err, cudaMemcpyAsync(
                                s->frame[b],
                                (const char *)pinned_frame +
                                    sbdx_slot_frame_offset(s, sample_size),
                                bytes, cudaMemcpyHostToDevice, s->upload));
    RTOMO_CUDA_TRY(err, cudaEventRecord(s->h2d_done[b], s->upload));
    return RTOMO_OK;
}

static rtomo_status enqueue_download(sbdx_slot *s, int b, float *pinned_planes,
                                     float *pinned_composite,
                                     uint16_t *pinned_depth, rtomo_error *err)
{
    const rtomo_sbdx_geometry *g = s->geom;
    size_t w = (size_t)g->out_width;
    size_t own = (size_t)s->band.own_rows * w;
    size_t halo = (size_t)(s->band.own_first - s->band.ext_first) * w;
    size_t first = (size_t)s->band.own_first * w;
    RTOMO_CUDA_TRY(err, cudaStreamWaitEvent(s->download, s->compute_done[b], 0));
    RTOMO_CUDA_TRY(err, cudaMemcpy2DAsync(
                            pinned_planes + first,
                            sizeof(float) * w * g->out_height,
                            s->planes[b] + halo,
                            sizeof(float) * w * s->band.ext_rows,
                            sizeof(float) * own, (size_t)g->n_planes,
                            cudaMemcpyDeviceToHost, s->download));
    RTOMO_CUDA_TRY(err, cudaMemcpyAsync(pinned_composite + first,
                                        s->composite[b], sizeof(float) * own,
                                        cudaMemcpyDeviceToHost, s->download));
    RTOMO_CUDA_TRY(err, cudaMemcpyAsync(pinned_depth + first, s->depth[b],
                                        sizeof(uint16_t) * own,
                                        cudaMemcpyDeviceToHost, s->download));
    RTOMO_CUDA_TRY(err, cudaEventRecord(s->d2h_done[b], s->download));
    return RTOMO_OK;
}

rtomo_status sbdx_slot_enqueue(sbdx_slot *s, int b, const void *pinned_frame,
                               rtomo_dtype dtype, float *pinned_planes,
                               float *pinned_composite,
                               uint16_t *pinned_depth, rtomo_error *err)
{
    size_t sample_size = rtomo_dtype_size(dtype);
    rtomo_status st;
    if ((st = ensure_frame_banks(s, sbdx_slot_frame_bytes(s, sample_size), err)) ||
        (st = enqueue_upload(s, b, pinned_frame, sample_size, err)))
        return st;

    RTOMO_CUDA_TRY(err, cudaStreamWaitEvent(s->compute, s->h2d_done[b], 0));
    RTOMO_CUDA_TRY(err, cudaStreamWaitEvent(s->compute, s->d2h_done[b], 0));
    RTOMO_CUDA_TRY(err, cudaEventRecord(s->compute_start[b], s->compute));
    st = s->method == RTOMO_SBDX_DETECTOR_CENTRIC
             ? enqueue_detector_centric(s, b, dtype, err)
             : enqueue_pixel_centric(s, b, dtype, err);
    if (st || (st = enqueue_composite(s, b, err)))
        return st;
    RTOMO_CUDA_TRY(err, cudaEventRecord(s->compute_done[b], s->compute));
    return enqueue_download(s, b, pinned_planes, pinned_composite, pinned_depth,
                            err);
}

rtomo_status sbdx_slot_wait_upload(sbdx_slot *s, int b, rtomo_error *err)
{
    RTOMO_CUDA_TRY(err, cudaEventSynchronize(s->h2d_done[b]));
    return RTOMO_OK;
}

rtomo_status sbdx_slot_wait_results(sbdx_slot *s, int b, double *seconds,
                                    rtomo_error *err)
{
    RTOMO_CUDA_TRY(err, cudaEventSynchronize(s->d2h_done[b]));
    float ms = 0.0f;
    RTOMO_CUDA_TRY(err, cudaEventElapsedTime(&ms, s->compute_start[b],
                                             s->compute_done[b]));
    *seconds = 1e-3 * ms;
    return RTOMO_OK;
}

rtomo_status sbdx_slot_download_u16(sbdx_slot *s, int b, float offset,
                                    float scale, uint16_t *pinned_u16,
                                    rtomo_error *err)
{
    const rtomo_sbdx_geometry *g = s->geom;
    size_t w = (size_t)g->out_width;
    size_t own = (size_t)s->band.own_rows * w;
    rtomo_status st;
    if (!s->planes_u16 &&
        (st = device_alloc((void **)&s->planes_u16,
                           sizeof(uint16_t) * own * g->n_planes, err)))
        return st;
    sbdx_u16_params p;
    p.planes = s->planes[b];
    p.n_planes = g->n_planes;
    p.width = g->out_width;
    p.ext_rows = s->band.ext_rows;
    p.row_offset = s->band.own_first - s->band.ext_first;
    p.rows = s->band.own_rows;
    p.offset = offset;
    p.scale = scale;
    p.out = s->planes_u16;
    RTOMO_CUDA_TRY(err, cudaStreamWaitEvent(s->aux, s->compute_done[b], 0));
    if ((st = sbdx_u16_launch(&p, s->aux, err)))
        return st;
    RTOMO_CUDA_TRY(err, cudaMemcpy2DAsync(
                            pinned_u16 + (size_t)s->band.own_first * w,
                            sizeof(uint16_t) * w * g->out_height,
                            s->planes_u16, sizeof(uint16_t) * own,
                            sizeof(uint16_t) * own, (size_t)g->n_planes,
                            cudaMemcpyDeviceToHost, s->aux));
    RTOMO_CUDA_TRY(err, cudaStreamSynchronize(s->aux));
    return RTOMO_OK;
}

rtomo_status sbdx_slot_drain(sbdx_slot *s, rtomo_error *err)
{
    cudaStream_t streams[] = {s->upload, s->compute, s->download, s->aux};
    for (int i = 0; i < 4; i++)
        if (streams[i])
            RTOMO_CUDA_TRY(err, cudaStreamSynchronize(streams[i]));
    return RTOMO_OK;
}
