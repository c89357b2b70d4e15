/*
 * cuda_sbdx_backend.cu — the CUDA SBDX backend (rtomo_cuda_sbdx_ops): plan
 * state, the slots (bands of output rows) on the plan's devices, the pinned
 * host banks, and the submit/collect pipeline of depth 2.
 *
 * submit() copies the frame into pinned input bank b (in parallel, on the
 * copy pool) and enqueues, on every slot, its upload, reconstruction and the
 * download of planes, composite and depth into pinned output bank b; it
 * returns without waiting for the GPU.  collect() waits for the oldest bank,
 * converts to 16 bits on the GPU when asked, and copies the results to the
 * caller.  The GPU thus reconstructs frame k while frame k+1 uploads and
 * frame k-1 downloads (cuda_sbdx_slot.h has the event chain).
 *
 * Tuning knobs, read from the environment when a plan is created (for the
 * benchmark and the tests; defaults are the tuned values):
 *   RTOMO_SBDX_XPASS="rows,threads"   x-pass staged rows (1, 2), block size
 *   RTOMO_SBDX_GROUP=n                at most n planes per x/y-pass round
 *   RTOMO_SBDX_BANDS=n                slots per device (tests the band split
 *                                     on a single GPU)
 * The host copy threads are opt->cpu_threads when set, else one per core
 * up to 16.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_common.h"
#include "cuda_sbdx_copy.h"
#include "cuda_sbdx_slot.h"

/* x-pass: 2 staged rows (128.8 KB of shared memory in the reference
 * configuration, so one block per SM) and 1024 threads to fill it with 32
 * warps.  Measured on an H200, 2026-11-21 (docs/perf-sbdx.md): planes +
 * composite 5.15 ms/frame, against 7.41 (2 rows, 512), 5.79 (1 row, 512),
 * 8.00 (1, 256), 11.50 (2, 256). */
#define DEFAULT_XPASS_ROWS 2
#define DEFAULT_XPASS_THREADS 1024
#define DEFAULT_YPASS_THREADS 256
#define DEFAULT_T_BUDGET ((size_t)1 << 30)
/* Host copies into and out of the pinned banks bound the pipeline: on the
 * 16-core host of an H100, 2026-11-21, 200 frames of [0.6, 2.25] ran at
 * 79.8 / 110.3 / 119.7 / 126.2 frames/s with 4 / 8 / 12 / 16 copy threads
 * (docs/PERFORMANCE.md), so use every core the machine has, up to 16. */
#define DEFAULT_COPY_THREADS 16
#define MAX_SLOTS 256

typedef struct cuda_sbdx {
    int n_slots;
    sbdx_slot *slots;
    sbdx_copy_pool *pool;

    /* Pinned host banks: frames grow with the sample type; outputs are
     * full images, each slot filling its own rows. */
    void *frame[2];
    size_t frame_capacity[2];
    float *planes[2], *composite[2];
    uint16_t *depth[2];
    uint16_t *planes_u16;

    uint64_t tag[2];
    double submitted_at[2];
    long submitted, collected;
} cuda_sbdx;

/* ------------------------------------------------------------ tuning ---- */

static rtomo_status env_int(const char *name, int lo, int hi, int *value,
                            rtomo_error *err)
{
    const char *s = getenv(name);
    if (!s || !*s)
        return RTOMO_OK;
    char *end;
    long v = strtol(s, &end, 10);
    if (*end || v < lo || v > hi)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "%s=%s: expected an integer in [%d, %d]", name,
                               s, lo, hi);
    *value = (int)v;
    return RTOMO_OK;
}

static rtomo_status read_tuning(sbdx_tuning *t, int *bands, rtomo_error *err)
{
    t->xpass_rows = DEFAULT_XPASS_ROWS;
    t->xpass_threads = DEFAULT_XPASS_THREADS;
    t->ypass_threads = DEFAULT_YPASS_THREADS;
    t->max_group = 0;
    t->t_budget = DEFAULT_T_BUDGET;
    *bands = 1;
    const char *x = getenv("RTOMO_SBDX_XPASS");
    if (x && *x) {
        int rows = 0, threads = 0;
        char extra;
        if (sscanf(x, "%d,%d%c", &rows, &threads, &extra) != 2 ||
            (rows != 1 && rows != 2) || threads < 32 || threads > 1024 ||
            threads % 32)
            return rtomo_set_error(err, RTOMO_E_INVALID,
                                   "RTOMO_SBDX_XPASS=%s: expected \"rows,"
                                   "threads\" with rows 1 or 2 and threads a "
                                   "multiple of 32 up to 1024", x);
        t->xpass_rows = rows;
        t->xpass_threads = threads;
    }
    rtomo_status st;
    if ((st = env_int("RTOMO_SBDX_GROUP", 0, RTOMO_SBDX_MAX_PLANES,
                      &t->max_group, err)) ||
        (st = env_int("RTOMO_SBDX_BANDS", 1, 16, bands, err)))
        return st;
    return RTOMO_OK;
}

/* ------------------------------------------------------ create/destroy ---- */

static size_t plane_pixels(const rtomo_sbdx_geometry *g)
{
    return (size_t)g->out_width * g->out_height;
}

static size_t frame_samples(const rtomo_sbdx_geometry *g)
{
    return (size_t)g->holes_x * g->holes_y * g->det_width * g->det_height;
}

static void free_host_banks(cuda_sbdx *c)
{
    for (int b = 0; b < 2; b++) {
        void *p[] = {c->frame[b], c->planes[b], c->composite[b], c->depth[b]};
        for (int i = 0; i < 4; i++)
            if (p[i])
                cudaFreeHost(p[i]);
    }
    if (c->planes_u16)
        cudaFreeHost(c->planes_u16);
    cudaGetLastError();
}

static rtomo_status pinned_alloc(void **p, size_t bytes, rtomo_error *err)
{
    RTOMO_CUDA_TRY(err, cudaHostAlloc(p, bytes ? bytes : 1,
                                      cudaHostAllocPortable));
    return RTOMO_OK;
}

static rtomo_status allocate_output_banks(cuda_sbdx *c,
                                          const rtomo_sbdx_geometry *g,
                                          rtomo_error *err)
{
    size_t n = plane_pixels(g);
    rtomo_status st;
    for (int b = 0; b < 2; b++)
        if ((st = pinned_alloc((void **)&c->planes[b],
                               sizeof(float) * n * g->n_planes, err)) ||
            (st = pinned_alloc((void **)&c->composite[b], sizeof(float) * n, err)) ||
            (st = pinned_alloc((void **)&c->depth[b], sizeof(uint16_t) * n, err)))
            return st;
    return RTOMO_OK;
}

static void cuda_destroy(rtomo_sbdx *plan)
{
    cuda_sbdx *c = (cuda_sbdx *)plan->impl;
    if (!c)
        return;
    int previous = 0;
    cudaGetDevice(&previous);
    for (int i = 0; i < c->n_slots; i++)
        sbdx_slot_release(&c->slots[i]);
    free(c->slots);
    free_host_banks(c);
    sbdx_copy_pool_destroy(c->pool);
    cudaSetDevice(previous);
    cudaGetLastError();
    free(c);
    plan->impl = NULL;
}

static int copy_threads(const rtomo_engine_options *opt)
{
    if (opt->cpu_threads > 0)
        return opt->cpu_threads;
    int n = rtomo_cpu_thread_count(opt);
    return n < DEFAULT_COPY_THREADS ? n : DEFAULT_COPY_THREADS;
}

static rtomo_status make_slots(rtomo_sbdx *plan, cuda_sbdx *c,
                               rtomo_error *err)
{
    sbdx_tuning tune;
    int bands, ids[RTOMO_MAX_DEVICES], n_devices = 0;
    rtomo_status st;
    if ((st = read_tuning(&tune, &bands, err)) ||
        (st = rtomo_cuda_plan_devices(&plan->opt, ids, &n_devices, err)))
        return st;
    int count = n_devices * bands;
    if (count > plan->geom.out_height)
        count = plan->geom.out_height;
    if (count > MAX_SLOTS)
        count = MAX_SLOTS;
    c->slots = (sbdx_slot *)calloc((size_t)count, sizeof(sbdx_slot));
    if (!c->slots)
        return rtomo_set_error(err, RTOMO_E_NOMEM, "out of memory for %d "
                               "SBDX slots", count);
    for (int i = 0; i < count; i++) {
        sbdx_band band;
        sbdx_band_of(&plan->geom, i, count, &band);
        c->n_slots = i + 1;     /* so that destroy releases this one too */
        if ((st = sbdx_slot_init(&c->slots[i], plan, ids[i * n_devices / count],
                                 &band, &tune, &plan->stats.compute_seconds,
                                 err)))
            return st;
    }
    return RTOMO_OK;
}

static rtomo_status create_on_devices(rtomo_sbdx *plan, rtomo_error *err)
{
    cuda_sbdx *c = (cuda_sbdx *)calloc(1, sizeof *c);
    if (!c)
        return rtomo_set_error(err, RTOMO_E_NOMEM,
                               "out of memory for the CUDA SBDX backend");
    plan->impl = c;
    c->pool = sbdx_copy_pool_create(copy_threads(&plan->opt));
    if (!c->pool)
        return rtomo_set_error(err, RTOMO_E_NOMEM,
                               "out of memory for the host copy threads");
    rtomo_status st;
    if ((st = make_slots(plan, c, err)) ||
        (st = allocate_output_banks(c, &plan->geom, err)))
        return st;
    return RTOMO_OK;
}

static rtomo_status cuda_create(rtomo_sbdx *plan, rtomo_error *err)
{
    int previous = 0;
    RTOMO_CUDA_TRY(err, cudaGetDevice(&previous));
    rtomo_status st = create_on_devices(plan, err);
    if (st != RTOMO_OK)
        cuda_destroy(plan);
    cudaSetDevice(previous);
    return st;
}

/* ------------------------------------------------------------ submit ---- */

static sbdx_copy_segment segment(void *dst, const void *src, size_t bytes)
{
    sbdx_copy_segment s = {dst, src, bytes};
    return s;
}

/* Pinned frame bank b holds at least `bytes` once its last upload is done. */
static rtomo_status ensure_frame_bank(cuda_sbdx *c, int b, size_t bytes,
                                      rtomo_error *err)
{
    rtomo_status st;
    for (int i = 0; i < c->n_slots; i++) {
        RTOMO_CUDA_TRY(err, cudaSetDevice(c->slots[i].device));
        if ((st = sbdx_slot_wait_upload(&c->slots[i], b, err)))
            return st;
    }
    if (bytes <= c->frame_capacity[b])
        return RTOMO_OK;
    if (c->frame[b])
        RTOMO_CUDA_TRY(err, cudaFreeHost(c->frame[b]));
    c->frame[b] = NULL;
    c->frame_capacity[b] = 0;
    if ((st = pinned_alloc(&c->frame[b], bytes, err)))
        return st;
    c->frame_capacity[b] = bytes;
    return RTOMO_OK;
}

static rtomo_status submit_on_devices(rtomo_sbdx *plan, const void *frame,
                                      rtomo_dtype dtype, rtomo_error *err)
{
    cuda_sbdx *c = (cuda_sbdx *)plan->impl;
    int b = (int)(c->submitted % 2);
    size_t bytes = frame_samples(&plan->geom) * rtomo_dtype_size(dtype);
    rtomo_status st = ensure_frame_bank(c, b, bytes, err);
    if (st)
        return st;
    sbdx_copy_segment seg = segment(c->frame[b], frame, bytes);
    sbdx_copy_run(c->pool, &seg, 1);
    for (int i = 0; i < c->n_slots; i++) {
        sbdx_slot *s = &c->slots[i];
        RTOMO_CUDA_TRY(err, cudaSetDevice(s->device));
        if ((st = sbdx_slot_enqueue(s, b, c->frame[b], dtype, c->planes[b],
                                    c->composite[b], c->depth[b], err)))
            return st;
    }
    return RTOMO_OK;
}

static rtomo_status cuda_submit(rtomo_sbdx *plan, const void *frame,
                                rtomo_dtype dtype, uint64_t tag,
                                rtomo_error *err)
{
    cuda_sbdx *c = (cuda_sbdx *)plan->impl;
    double t0 = rtomo_now_seconds();
    int previous = 0;
    RTOMO_CUDA_TRY(err, cudaGetDevice(&previous));
    rtomo_status st = submit_on_devices(plan, frame, dtype, err);
    cudaSetDevice(previous);
    if (st != RTOMO_OK)
        return st;
    int b = (int)(c->submitted % 2);
    c->tag[b] = tag;
    c->submitted_at[b] = t0;
    c->submitted++;
    return RTOMO_OK;
}

/* ----------------------------------------------------------- collect ---- */

/* Wait for bank b on every slot; *seconds = the slowest slot's compute. */
static rtomo_status wait_results(cuda_sbdx *c, int b, double *seconds,
                                 rtomo_error *err)
{
    *seconds = 0.0;
    for (int i = 0; i < c->n_slots; i++) {
        double s = 0.0;
        RTOMO_CUDA_TRY(err, cudaSetDevice(c->slots[i].device));
        rtomo_status st = sbdx_slot_wait_results(&c->slots[i], b, &s, err);
        if (st)
            return st;
        if (s > *seconds)
            *seconds = s;
    }
    return RTOMO_OK;
}

static rtomo_status download_u16(rtomo_sbdx *plan, cuda_sbdx *c, int b,
                                 const rtomo_sbdx_output *out,
                                 rtomo_error *err)
{
    const rtomo_sbdx_geometry *g = &plan->geom;
    rtomo_status st;
    if (!c->planes_u16 &&
        (st = pinned_alloc((void **)&c->planes_u16, sizeof(uint16_t) *
                           plane_pixels(g) * g->n_planes, err)))
        return st;
    for (int i = 0; i < c->n_slots; i++) {
        RTOMO_CUDA_TRY(err, cudaSetDevice(c->slots[i].device));
        if ((st = sbdx_slot_download_u16(&c->slots[i], b, out->u16_offset,
                                         out->u16_scale, c->planes_u16, err)))
            return st;
    }
    return RTOMO_OK;
}

static rtomo_status collect_on_devices(rtomo_sbdx *plan, int b,
                                       const rtomo_sbdx_output *out,
                                       rtomo_error *err)
{
    cuda_sbdx *c = (cuda_sbdx *)plan->impl;
    const rtomo_sbdx_geometry *g = &plan->geom;
    double seconds;
    rtomo_status st = wait_results(c, b, &seconds, err);
    if (st || (out->planes_u16 && (st = download_u16(plan, c, b, out, err))))
        return st;

    size_t n = plane_pixels(g), planes = n * g->n_planes;
    sbdx_copy_segment seg[4];
    int n_seg = 0;
    if (out->planes)
        seg[n_seg++] = segment(out->planes, c->planes[b],
                               sizeof(float) * planes);
    if (out->planes_u16)
        seg[n_seg++] = segment(out->planes_u16, c->planes_u16,
                               sizeof(uint16_t) * planes);
    if (out->composite)
        seg[n_seg++] = segment(out->composite, c->composite[b],
                               sizeof(float) * n);
    if (out->depth)
        seg[n_seg++] = segment(out->depth, c->depth[b],
                               sizeof(uint16_t) * n);
    sbdx_copy_run(c->pool, seg, n_seg);
    plan->stats.compute_seconds += seconds;
    plan->stats.updates += 4.0 * (double)frame_samples(g) * g->n_planes;
    return RTOMO_OK;
}

static rtomo_status cuda_collect(rtomo_sbdx *plan, const rtomo_sbdx_output *out,
                                 uint64_t *tag, rtomo_error *err)
{
    cuda_sbdx *c = (cuda_sbdx *)plan->impl;
    int b = (int)(c->collected % 2);
    /* The frame leaves the pipeline whatever happens (as in the front end). */
    c->collected++;
    int previous = 0;
    RTOMO_CUDA_TRY(err, cudaGetDevice(&previous));
    rtomo_status st = collect_on_devices(plan, b, out, err);
    cudaSetDevice(previous);
    if (st != RTOMO_OK)
        return st;
    *tag = c->tag[b];
    plan->stats.latency_seconds_last = rtomo_now_seconds() - c->submitted_at[b];
    return RTOMO_OK;
}

extern "C" const rtomo_sbdx_backend_ops rtomo_cuda_sbdx_ops = {
    "cuda", cuda_create, cuda_destroy, cuda_submit, cuda_collect, 2,
};
