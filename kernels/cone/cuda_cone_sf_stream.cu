/*
 * cuda_cone_sf_stream.cu — the separable-footprint cone-beam pair for
 * volumes larger than the GPUs' memory (issue 15's multi-streaming; the
 * paper's section 2.3): the pair's vectors live in ordinary (pageable)
 * host memory and the ROI goes through the GPUs in z slabs sized to a
 * device-memory budget.  Every transfer is staged through the lanes'
 * page-locked buffers (made once per plan): page-locking the vectors
 * themselves cost seconds per solve (docs/PERFORMANCE.md, runs 66, 67),
 * and rtomod makes a new plan, so new vectors, for every scan.
 *
 *   A:   per slab, copy its slices into the lane's staging on the host,
 *        upload them, project them into the slab's window of detector
 *        rows (cone_sf_slab_rows, the split pair's windows and the same
 *        kernels, so the results are the resident pair's to about 1e-6),
 *        weigh the window by l_theta, download it into the lane's staging;
 *        the host adds the windows into y (slabs' windows overlap by the
 *        cone's spread).
 *   A^T: per slab, gather its window of y (those rows of every view) into
 *        the lane's staging on the host, upload it, weigh it by l_theta,
 *        back-project into the slab, download the slab into the lane's
 *        staging; the host copies it into x.
 *
 * Each GPU has CONE_SF_LANES buffer sets, each with its own stream; slab
 * b goes to GPU b mod n and, on it, to the next lane, so one slab's
 * uploads and downloads run beside another's kernels (the copy engines
 * and the SMs at once), and several GPUs take slabs in turn.  The host's
 * copies run while the GPUs work on other slabs: a slab is staged while
 * the slabs queued before it run, and its results are added (A) or
 * copied out (A^T) while the slabs queued after it run; a lane's staging
 * is refilled only once its last upload is done (event up) and its last
 * download was used (event done).
 * The vector ops run on the host over a thread pool (cone_host_vec.c:
 * the CPU pair's own loops, on chunks).
 *
 * This file: when to stream (cuda_cone_sf_stream_choose: the test hook
 * RTOMO_CONE_SF_STREAM=<slices a slab>, or the resident solve not fitting
 * the device budget), the devices' lanes and the slabs; A, A^T and the
 * backend ops are cuda_cone_sf_stream_ops.cu's.  A streamed pair is never
 * also split (RTOMO_CONE_SF_SPLIT does not apply: its GPUs take slabs in
 * turn instead).  Measurement hook RTOMO_CONE_SF_STREAM_COPY_ONLY=1:
 * every copy and host add as usual but no kernel, to time the transfers
 * alone.  On one H100 (docs/PERFORMANCE.md, run 66) the paper's
 * 1024^3 pair streamed in 4 slabs took 7.89 s against 7.70 s resident.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "cone_host_vec.h"
#include "cone_sf_plan.h"
#include "cuda_cone_sf_stream.h"

/* ------------------------------------------------------------ teardown ---- */

/* Failures have nowhere to go here. */
static void dev_destroy(stream_dev *d)
{
    if (cudaSetDevice(d->device) != cudaSuccess)
        return;
    for (int l = 0; l < CONE_SF_LANES; l++) {
        stream_lane *ln = &d->lane[l];
        if (ln->stream) {
            (void)cudaStreamSynchronize(ln->stream);
            (void)cudaStreamDestroy(ln->stream);
        }
        if (ln->up)
            (void)cudaEventDestroy(ln->up);
        if (ln->done)
            (void)cudaEventDestroy(ln->done);
        (void)cudaFree(ln->slab);
        (void)cudaFree(ln->window);
        (void)cudaFreeHost(ln->slab_host);
        (void)cudaFreeHost(ln->window_host);
    }
    (void)cudaFree(d->amp_theta);
    (void)cudaFree(d->cos_b);
    (void)cudaFree(d->sin_b);
}

extern "C" void cuda_cone_sf_stream_destroy(cuda_cone_sf *s)
{
    cuda_cone_sf_stream *st = s->streamed;
    if (!st)
        return;
    for (int d = 0; st->devs && d < st->n_devs; d++)
        dev_destroy(&st->devs[d]);
    cone_host_vec_destroy(st->host);
    free(st->devs);
    free(st->slabs);
    free(st);
    s->streamed = NULL;
}

/* --------------------------------------------------------------- setup ---- */

/* GPU d: its tables (as the resident pair uploads them) and lanes. */
static rtomo_status dev_setup(cuda_cone_sf_stream *st, const cone_iter *ci,
                              stream_dev *d, rtomo_error *err)
{
    const rtomo_cone *geo = ci->geo;
    const size_t np = (size_t)geo->geom.n_proj;
    const cone_sf_stream_plan *p = &st->plan;
    RTOMO_CUDA_TRY(err, cudaSetDevice(d->device));
    RTOMO_CUDA_TRY(err, cudaMalloc((void **)&d->amp_theta,
                                   sizeof(float) * geo->frame_len));
    RTOMO_CUDA_TRY(err, cudaMalloc((void **)&d->cos_b, sizeof(float) * np));
    RTOMO_CUDA_TRY(err, cudaMalloc((void **)&d->sin_b, sizeof(float) * np));
    RTOMO_CUDA_TRY(err, cudaMemcpy(d->amp_theta, ci->amp_theta,
                                   sizeof(float) * geo->frame_len,
                                   cudaMemcpyHostToDevice));
    RTOMO_CUDA_TRY(err, cudaMemcpy(d->cos_b, geo->cos_beta,
                                   sizeof(float) * np,
                                   cudaMemcpyHostToDevice));
    RTOMO_CUDA_TRY(err, cudaMemcpy(d->sin_b, geo->sin_beta,
                                   sizeof(float) * np,
                                   cudaMemcpyHostToDevice));
    for (int l = 0; l < CONE_SF_LANES; l++) {
        stream_lane *ln = &d->lane[l];
        RTOMO_CUDA_TRY(err, cudaStreamCreateWithFlags(&ln->stream,
                                                      cudaStreamNonBlocking));
        RTOMO_CUDA_TRY(err, cudaEventCreateWithFlags(&ln->up,
                                                     cudaEventDisableTiming));
        RTOMO_CUDA_TRY(err, cudaEventCreateWithFlags(&ln->done,
                                                     cudaEventDisableTiming));
        RTOMO_CUDA_TRY(err, cudaMalloc((void **)&ln->slab, p->slab_bytes));
        RTOMO_CUDA_TRY(err, cudaHostAlloc((void **)&ln->slab_host,
                                          p->slab_bytes,
                                          cudaHostAllocDefault));
        if (p->window_bytes == 0)
            continue;           /* the ROI misses the detector */
        RTOMO_CUDA_TRY(err, cudaMalloc((void **)&ln->window,
                                       p->window_bytes));
        RTOMO_CUDA_TRY(err, cudaHostAlloc((void **)&ln->window_host,
                                          p->window_bytes,
                                          cudaHostAllocDefault));
    }
    return RTOMO_OK;
}

/* The slabs of the plan: slices, window rows and each one's k, as the
 * split pair makes them (cuda_cone_sf_slabs.cu's deal_slabs). */
static void make_slabs(cuda_cone_sf_stream *st, const cuda_cone_sf *s)
{
    for (int b = 0; b < st->plan.n_slabs; b++) {
        cuda_cone_sf_slab *sl = &st->slabs[b];
        const int z = b * st->plan.slices;
        const int count = s->k.nz - z < st->plan.slices ? s->k.nz - z
                                                         : st->plan.slices;
        sl->dev = b % st->n_devs;
        cuda_cone_sf_place_slab(sl, &s->k, z, count);
    }
}

/* The smallest free memory of the devices, less a margin for the CUDA
 * context's own needs and other users (1/16, at least 256 MiB). */
static rtomo_status auto_budget(const int *ids, int n, size_t *out,
                                rtomo_error *err)
{
    size_t least = (size_t)-1;
    for (int d = 0; d < n; d++) {
        size_t free_b = 0, total = 0;
        RTOMO_CUDA_TRY(err, cudaSetDevice(ids[d]));
        RTOMO_CUDA_TRY(err, cudaMemGetInfo(&free_b, &total));
        least = free_b < least ? free_b : least;
    }
    const size_t margin = least / 16 > ((size_t)256 << 20)
                              ? least / 16 : (size_t)256 << 20;
    *out = least > margin ? least - margin : 0;
    return RTOMO_OK;
}

/* RTOMO_CONE_SF_STREAM: slices a slab, 0 when unset or not a number > 0. */
static int stream_hook(void)
{
    const char *v = getenv("RTOMO_CONE_SF_STREAM");
    char *end = NULL;
    const long n = v ? strtol(v, &end, 10) : 0;
    return v && end != v && *end == '\0' && n > 0 && n < (1L << 30)
               ? (int)n : 0;
}

static rtomo_status stream_create(rtomo_iter *it, cone_iter *ci,
                                  cuda_cone_sf *s, const int *ids, int n,
                                  const cone_sf_stream_plan *plan,
                                  rtomo_error *err);

extern "C" rtomo_status cuda_cone_sf_stream_choose(rtomo_iter *it,
                                                   cone_iter *ci,
                                                   cuda_cone_sf *s,
                                                   const int *ids, int n,
                                                   int *streamed,
                                                   rtomo_error *err)
{
    const int slices = stream_hook();
    size_t budget = it->opt.device_budget;
    rtomo_status st = RTOMO_OK;
    *streamed = 0;
    if (!slices) {
        if (!budget && (st = auto_budget(ids, n, &budget, err)) != RTOMO_OK)
            return st;
        /* The resident pair is made on the owner next. */
        RTOMO_CUDA_TRY(err, cudaSetDevice(s->device));
        if (cone_sf_resident_bytes(ci->geo, n, NULL) <= budget)
            return RTOMO_OK;
    }
    cone_sf_stream_plan plan;
    if ((st = cone_sf_stream_plan_make(ci->geo, n, budget, slices, &plan,
                                       err)) != RTOMO_OK)
        return st;
    *streamed = 1;
    return stream_create(it, ci, s, ids, n, &plan, err);
}

static rtomo_status stream_create(rtomo_iter *it, cone_iter *ci,
                                  cuda_cone_sf *s, const int *ids, int n,
                                  const cone_sf_stream_plan *plan,
                                  rtomo_error *err)
{
    cuda_cone_sf_stream *st =
        (cuda_cone_sf_stream *)calloc(1, sizeof *st);
    if (!st)
        return rtomo_set_error(err, RTOMO_E_NOMEM, "out of memory");
    s->streamed = st;
    it->ops = &cone_sf_stream_ops;
    st->plan = *plan;
    st->n_devs = n;
    const char *copy = getenv("RTOMO_CONE_SF_STREAM_COPY_ONLY");
    st->copy_only = copy && strcmp(copy, "1") == 0;
    st->devs = (stream_dev *)calloc((size_t)n, sizeof *st->devs);
    st->slabs = (cuda_cone_sf_slab *)calloc((size_t)plan->n_slabs,
                                            sizeof *st->slabs);
    if (!st->devs || !st->slabs)
        return rtomo_set_error(err, RTOMO_E_NOMEM, "out of memory");
    make_slabs(st, s);
    rtomo_status rc = cone_host_vec_create(it->opt.cpu_threads, &st->host,
                                           err);
    for (int d = 0; rc == RTOMO_OK && d < n; d++) {
        st->devs[d].device = ids[d];
        rc = dev_setup(st, ci, &st->devs[d], err);
    }
    return rc;
}
