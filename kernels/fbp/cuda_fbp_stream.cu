/*
 * cuda_fbp_stream.cu — resident slices on the GPU: the CUDA side of
 * streaming back-projection (rtomo_fbp_stream_*, see rtomo_engine.h; the
 * backend contract is in engine_internal.h), and the clearing of a
 * projection slot.
 *
 * Layout
 *   Every slot (device) holds accumulators for its share of the opened
 *   rows only, dealt as the kept rows are (fbp_partition.h).  Its open
 *   rows, ascending, form groups of the configuration's slices per texel,
 *   and group g's slices accumulate in images g*slices .. g*slices+slices-1
 *   of one array: the `out` layout of cuda_fbp_launch, so that one launch
 *   over consecutive groups adds into consecutive images.  The kernel
 *   family, texel format, tile and hybrid ratio are resolved once, at open,
 *   as rtomo_fbp_reconstruct resolves them for the same rows.
 *
 * Applying a chunk of projections
 *   Chunks run on each slot's own `work` stream, beside the compute stream
 *   where incoming frames are filtered: on one stream, the filtering of
 *   every new frame waited for the chunks queued before it (0.5 s each
 *   for 2048 slices of 2048^2), which held ingest to the back-projection's
 *   pace (measured: a 2048^3 scan's ingest took 6 s instead of 1.8 s).
 *   Two events keep the order the contract asks for: a chunk starts after
 *   the compute stream's work so far (the frames it reads are filtered:
 *   frames still gathering in the host staging bank are enqueued first
 *   when the chunk reads one of them), and a write to a slot on the
 *   compute stream (filtering a frame into it, clearing it, set_filtered)
 *   waits for the last chunk that reads it (cuda_fbp_stream_before_write:
 *   in a plain scan no slot is written after it is read, so nothing
 *   waits; in a sliding window a slot is reused a ring margin later,
 *   long after its chunk).  The chunk's projection constants, sinogram
 *   lines and weights travel in one small host-to-device copy from a ring
 *   of pinned entries; an entry is written again only after the GPU has
 *   finished the chunk that used it (its `end` event), CUDA_FBP_STREAM_RING
 *   chunks later, so the host waits for the GPU only when it runs that far
 *   ahead.  Per launch of up to CUDA_FBP_MAX_GROUPS groups, the groups'
 *   rows are gathered from the chunk's lines into a small packed pool,
 *   times their weights (half formats scale by the chunk's own largest
 *   magnitude), and the resolved kernel adds them into the accumulators.
 *   The chunk's time between its events becomes backproject_seconds when
 *   the events are next looked at, never by waiting for them.
 *
 * Reading
 *   Each slot's worker thread downloads its images into the two pinned
 *   output buffers of the reconstruct pipeline in turn while the host
 *   copies the previous buffer into the caller's array with the parallel
 *   copier, so the PCIe transfer and the host copy overlap.  When the
 *   caller's array is page-locked already (cudaHostAlloc, registered), the
 *   GPUs copy straight into it.  Measured on an H100 host (PCIe gen 5,
 *   16 cores): 2048 slices of 2048^2 (32 GiB) read in 1.30 s, 26 GB/s,
 *   bound by the host copy (8 copier threads copy 33 GB/s alone, 16 would
 *   copy 50; the link carries 55 GB/s into page-locked memory, which the
 *   direct path reaches).  Registering a pageable array for one read costs
 *   more than the copy it saves (14.5 GB/s in all), so it is a test hook
 *   only.
 *
 * Test hooks (environment):
 *   RTOMO_CUDA_FBP_STREAM_CHUNK=n    projections per chunk, at most
 *                                    (default STREAM_CHUNK_MAX, less for
 *                                    wide detectors), read at open, for tests
 *                                    and the benchmark's sweep;
 *   RTOMO_CUDA_FBP_READ_REGISTER=1   register a pageable output array for
 *                                    the read and copy straight into it,
 *                                    read at each read: the direct path in
 *                                    tests, its cost in the benchmark;
 *   RTOMO_CUDA_FBP_STREAM_TRACE=1    one line per chunk on stderr when it is
 *                                    retired: when the host enqueued it and
 *                                    when the GPU ran it, in ms after the
 *                                    open, and one per read: when it was
 *                                    called and when it returned; read at
 *                                    open: where a scan's back-projection
 *                                    and read-out time goes;
 *   RTOMO_CUDA_FBP_STREAM_ACCUMULATE=load   chunks load each stored sum
 *                                    at a block's start and store the new
 *                                    one, as before the reductions, read
 *                                    at open: the baseline in benchmarks.
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuda_fbp.h"

/*
 * Projections per chunk, at most.  A chunk reads and writes every
 * accumulator once (8 bytes per pixel and slice: a warp of the ALU and
 * hybrid kernels takes 4 rows of 8 pixels, whole 32-byte sectors) while it
 * adds `chunk` projections to it, which at the kernels' 3000-8000 GU/s
 * take 0.12-0.33 ns per projection and pixel-slice.  Measured on an H100
 * (bench-fbp --stream, 2048^2 x 64 slices, 2048 projections, AUTO), the
 * streamed back-projection costs, relative to reconstruct of the same
 * slices: 1.73 / 1.30 / 1.11 / 1.04 (float linear) and 2.48 / 1.68 / 1.30
 * / 1.11 (half nearest, 4 slices) at 32 / 64 / 128 / 256 projections per
 * chunk.  In rtomod (run 49 of docs/PERFORMANCE.md: 2048 slices of
 * 2048^2, half, 2048 projections) every chunk cost about 100 ms beyond
 * its projections, so chunks of 256 spent 1 s of the scan's 3.5 s of
 * back-projection on the accumulators alone; since the tile kernels load
 * the stored sums at a block's start (cuda_fbp_device.h, start_pixel),
 * about 50 ms (run 51).  Chunks now add their sums with reductions that
 * the L2 cache carries out (CUDA_FBP_ACCUMULATE_REDUCE, cuda_fbp.h): no
 * block waits for a stored sum, and the read-modify-write overlaps the
 * next blocks' projections.  At 64 slices a chunk's cost beyond its
 * projections fell from 0.52 to 0.27 ms at chunks of 64, 0.37 to 0.15 ms
 * at 256 (about 9 and 5 ms at 2048 slices; half nearest, run 62).  Chunks
 * of 16 stay bound by the accumulators' bandwidth either way.
 *
 * The front end (fbp_stream.c) hands a chunk over when it is full or when
 * the device has finished the last one, so a chunk holds what arrived
 * while the previous one ran: small while the device keeps up (64 slices:
 * chunks of 16), growing to this bound while it falls behind (the whole
 * volume: 16, 200, 600, 1024, ...), which spends the accumulators' cost
 * as few times as the device's pace allows.  The bound keeps the last
 * chunk (what remains after the last frame) short enough to overlap the
 * reads, and one group's packed chunk within STREAM_POOL_BYTES.
 */
#define STREAM_CHUNK_MAX 1024
/* Packed chunk pool per slot, at most (fewer groups per launch when one
 * group's chunk is larger: wide detectors, 4 float slices per texel).
 * 256 MiB (16 groups of 4 half slices a launch instead of 4 in chunks of
 * 1024, a quarter of the launches) was measured and not kept: in rtomod
 * a 2048^3 scan's last slice came no sooner (0.99 and 1.10 s after the
 * last frame, against 1.08 and 1.03 s), and bench-fbp's 64 slices in
 * chunks of 1024 took 0.0683 s instead of 0.0691 s, half nearest
 * (docs/PERFORMANCE.md, run 58). */
#define STREAM_POOL_BYTES ((size_t)64 << 20)
/* Device memory left free once the slices are in place: packed pools and
 * output buffers of later reconstructions, cuFFT's work area. */
#define STREAM_RESERVE ((size_t)256 << 20)
/* Images per read batch, at most (the copy list of one batch). */
#define READ_MAX_IMAGES 1024
#define CLEAR_THREADS 256

static cuda_fbp_impl *impl_of(const rtomo_fbp *plan)
{
    return (cuda_fbp_impl *)plan->impl;
}

static size_t image_floats(const cuda_fbp_stream_plan *sp)
{
    return (size_t)sp->roi[2] * (size_t)sp->roi[3];
}

/* Byte offsets, within a ring entry, of the chunk's lines and weights
 * (the projection constants come first). */
static size_t lines_offset(int chunk) { return sizeof(float4) * (size_t)chunk; }
static size_t weights_offset(int chunk)
{
    return lines_offset(chunk) + sizeof(int) * (size_t)chunk;
}

/* 1 when event e has completed, 0 when it has not yet. */
static rtomo_status event_done(cudaEvent_t e, int *done, rtomo_error *err)
{
    const cudaError_t rc = cudaEventQuery(e);
    if (rc == cudaErrorNotReady) {
        /* Not an error; make sure no later launch check reads it as one. */
        if (cudaPeekAtLastError() == cudaErrorNotReady)
            cudaGetLastError();
        *done = 0;
        return RTOMO_OK;
    }
    RTOMO_CUDA_TRY(err, rc);
    *done = 1;
    return RTOMO_OK;
}

/* cudaMalloc that reports an allocation failure as RTOMO_E_NOMEM, naming
 * what did not fit, and leaves no pending error behind. */
static rtomo_status device_alloc(void **p, size_t bytes, const cuda_fbp_slot *slot,
                                 const char *what, rtomo_error *err)
{
    if (cudaMalloc(p, bytes) == cudaSuccess)
        return RTOMO_OK;
    cudaGetLastError();
    *p = NULL;
    return rtomo_set_error(err, RTOMO_E_NOMEM,
                           "CUDA device %d: no room for %.1f MiB of %s",
                           slot->device, (double)bytes / (1 << 20), what);
}

/* --------------------------------------------------- staged frames ---- */

static int bank_holds(const cuda_fbp_bank *bank, const int *slots, int n)
{
    for (int i = 0; i < bank->count; i++)
        for (int j = 0; j < n; j++)
            if (bank->index[i] == slots[j])
                return 1;
    return 0;
}

/* When the host staging bank gathers a frame of one of `slots`, send the
 * bank to the GPUs for filtering now: filtering runs on each slot's
 * compute stream, and a chunk starts after the compute stream's work so
 * far (enqueue_chunk), so it reads the filtered frame. */
static rtomo_status flush_staged(cuda_fbp_impl *impl, const int *slots, int n,
                                 rtomo_error *err)
{
    if (!bank_holds(&impl->banks[impl->current], slots, n))
        return RTOMO_OK;
    return cuda_fbp_flush_bank(impl, err);
}

/* ------------------------------------------------- writes to slots ---- */

extern "C" rtomo_status cuda_fbp_stream_before_write(cuda_fbp_impl *impl,
                                                     const int *slots, int n,
                                                     rtomo_error *err)
{
    cuda_fbp_stream_plan *sp = &impl->stream;
    if (!sp->open)
        return RTOMO_OK;
    unsigned long long last = 0;
    if (!slots)
        last = sp->chunk_seq;
    for (int i = 0; slots && i < n; i++)
        if (sp->reader[slots[i]] > last)
            last = sp->reader[slots[i]];
    if (last == 0)
        return RTOMO_OK;
    /* Its ring entry, unless recycled: then the chunk was waited for. */
    int e = -1;
    for (int k = 0; k < CUDA_FBP_STREAM_RING && e < 0; k++)
        if (sp->entry_seq[k] == last)
            e = k;
    for (int i = 0; e >= 0 && i < impl->n_slots; i++) {
        cuda_fbp_slot *slot = &impl->slots[i];
        if (!slot->stream.used[e])
            continue;
        RTOMO_CUDA_TRY(err, cudaSetDevice(slot->device));
        RTOMO_CUDA_TRY(err, cudaStreamWaitEvent(slot->compute, slot->stream.end[e], 0));
    }
    return RTOMO_OK;
}

/* ------------------------------------------------- clearing a slot ---- */

/* Zero line `index` of every row: sino points at row 0's line. */
__global__ void clear_line_kernel(char *sino, size_t row_stride, int width,
                                  int rows)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= width)
        return;
    for (int r = blockIdx.y; r < rows; r += gridDim.y)
        ((float *)(sino + (size_t)r * row_stride))[i] = 0.f;
}

extern "C" rtomo_status cuda_fbp_clear_projection(rtomo_fbp *plan, int index,
                                                  rtomo_error *err)
{
    cuda_fbp_impl *impl = impl_of(plan);
    /* A frame of this slot fed earlier must not land after the zeros, and
     * a chunk that reads the slot must have read it. */
    rtomo_status st = flush_staged(impl, &index, 1, err);
    if (st == RTOMO_OK)
        st = cuda_fbp_stream_before_write(impl, &index, 1, err);
    if (st != RTOMO_OK)
        return st;
    const int width = plan->geom.det_width;
    for (int i = 0; i < impl->n_slots; i++) {
        cuda_fbp_slot *slot = &impl->slots[i];
        if (slot->row_count == 0)
            continue;
        RTOMO_CUDA_TRY(err, cudaSetDevice(slot->device));
        const dim3 grid((width + CLEAR_THREADS - 1) / CLEAR_THREADS,
                        slot->row_count < 65535 ? slot->row_count : 65535);
        /* A kernel, not cudaMemset2DAsync: the row stride (n_proj lines)
         * may exceed the largest pitch a 2-D memset takes. */
        clear_line_kernel<<<grid, CLEAR_THREADS, 0, slot->compute>>>(
            (char *)slot->sino + (size_t)index * slot->sino_pitch,
            cuda_fbp_row_offset(slot, plan, 1), width, slot->row_count);
        RTOMO_CUDA_CHECK_LAUNCH(err, "projection clearing");
    }
    return RTOMO_OK;
}

/* ------------------------------------------------------------ timing ---- */

/* The trace line of slot i's chunk in ring entry e (it has finished). */
static void trace_chunk(const cuda_fbp_impl *impl, int i, int e, float ms)
{
    const cuda_fbp_stream_plan *sp = &impl->stream;
    const cuda_fbp_stream_state *s = &impl->slots[i].stream;
    float at = 0.f;
    if (cudaEventElapsedTime(&at, s->origin, s->start[e]) != cudaSuccess) {
        cudaGetLastError();
        return;
    }
    fprintf(stderr, "rtomo fbp stream trace: slot %d chunk %llu: %d projections, "
            "enqueued at %.1f ms, GPU %.1f to %.1f ms (%.1f ms)\n", i,
            sp->entry_seq[e], sp->entry_n[e],
            1e3 * (sp->entry_host[e] - sp->host_origin), at, at + ms, ms);
}

/*
 * Retire ring entry `e` once every slot has finished its chunk: the
 * longest slot's time between its events joins backproject_seconds (the
 * slots run concurrently, as cuda_reconstruct counts them).  Waits when
 * `wait`; otherwise leaves *done 0 while some slot is still at it.
 */
static rtomo_status retire_entry(cuda_fbp_impl *impl, int e, int wait, int *done,
                                 rtomo_error *err)
{
    *done = 0;
    for (int i = 0; i < impl->n_slots; i++) {
        cuda_fbp_stream_state *s = &impl->slots[i].stream;
        if (!s->used[e])
            continue;
        RTOMO_CUDA_TRY(err, cudaSetDevice(impl->slots[i].device));
        if (wait) {
            RTOMO_CUDA_TRY(err, cudaEventSynchronize(s->end[e]));
            continue;
        }
        int finished = 0;
        rtomo_status st = event_done(s->end[e], &finished, err);
        if (st != RTOMO_OK || !finished)
            return st;
    }
    double longest = 0.0;
    for (int i = 0; i < impl->n_slots; i++) {
        cuda_fbp_stream_state *s = &impl->slots[i].stream;
        if (!s->used[e])
            continue;
        float ms = 0.f;
        RTOMO_CUDA_TRY(err, cudaEventElapsedTime(&ms, s->start[e], s->end[e]));
        if (1e-3 * ms > longest)
            longest = 1e-3 * ms;
        s->used[e] = 0;
        if (impl->stream.trace)
            trace_chunk(impl, i, e, ms);
    }
    impl->plan->stats.backproject_seconds += longest;
    *done = 1;
    return RTOMO_OK;
}

/* Retire entries oldest first: every finished one, or (wait) all. */
static rtomo_status retire(cuda_fbp_impl *impl, int wait, rtomo_error *err)
{
    cuda_fbp_stream_plan *sp = &impl->stream;
    while (sp->ring_pending > 0) {
        int done = 0;
        rtomo_status st = retire_entry(impl, sp->ring_oldest, wait, &done, err);
        if (st != RTOMO_OK || !done)
            return st;
        sp->ring_oldest = (sp->ring_oldest + 1) % CUDA_FBP_STREAM_RING;
        sp->ring_pending--;
    }
    return RTOMO_OK;
}

/* ------------------------------------------------------- open, close ---- */

/* Groups per launch: at most CUDA_FBP_MAX_GROUPS and `most`, in launches
 * of equal size (17 groups run as 9 + 8, not 16 + 1).  More groups per
 * launch than the reconstruct pipeline takes: there is no output buffer
 * to bound, and fewer launches keep the host's enqueueing short. */
static int batch_of(int groups, int most)
{
    const int cap = most < CUDA_FBP_MAX_GROUPS ? most : CUDA_FBP_MAX_GROUPS;
    const int launches = (groups + cap - 1) / cap;
    return launches > 0 ? (groups + launches - 1) / launches : 1;
}

static int uses_textures(rtomo_bp_kernel kernel)
{
    return kernel != RTOMO_BP_ALU;
}


/* Everything of one slot's resident slices (any part of it). */
static void free_slot(cuda_fbp_slot *slot)
{
    cuda_fbp_stream_state *s = &slot->stream;
    if (cudaSetDevice(slot->device) == cudaSuccess) {
        /* Nothing is freed under work still queued on it. */
        cudaStreamSynchronize(slot->compute);
        cudaStreamSynchronize(slot->download);
        if (s->work)
            cudaStreamSynchronize(s->work);
    }
    for (int i = 0; i < s->texture_count; i++)
        if (s->textures[i])
            cudaDestroyTextureObject(s->textures[i]);
    free(s->textures);
    cudaFree(s->acc);
    cudaFree(s->pool);
    cudaFree(s->absmax);
    cudaFree(s->block);
    cudaFreeHost(s->ring);
    for (int e = 0; e < CUDA_FBP_STREAM_RING; e++) {
        if (s->start[e]) cudaEventDestroy(s->start[e]);
        if (s->end[e]) cudaEventDestroy(s->end[e]);
    }
    if (s->ready) cudaEventDestroy(s->ready);
    if (s->filtered) cudaEventDestroy(s->filtered);
    if (s->stats_done) cudaEventDestroy(s->stats_done);
    if (s->origin) cudaEventDestroy(s->origin);
    cudaFree(s->stats_dev);
    cudaFreeHost(s->stats_host);
    if (s->work) cudaStreamDestroy(s->work);
    cudaFree(s->sm_counters);
    for (int b = 0; s->batch_done && b < s->n_batches; b++)
        if (s->batch_done[b]) cudaEventDestroy(s->batch_done[b]);
    free(s->batch_done);
    for (int j = 0; j < 2; j++)
        if (s->downloaded[j]) cudaEventDestroy(s->downloaded[j]);
    free(s->rows);
    memset(s, 0, sizeof *s);
}

/* Free every slot's part and the plan-wide maps; the plan keeps working
 * without resident slices. */
static void release(cuda_fbp_impl *impl)
{
    for (int i = 0; i < impl->n_slots; i++)
        free_slot(&impl->slots[i]);
    free(impl->stream.pos_slot);
    free(impl->stream.pos_image);
    free(impl->stream.reader);
    memset(&impl->stream, 0, sizeof impl->stream);
}

/* Deal the open rows to the slots: each slot's slot-local rows in
 * ascending kept order, and where each position's image lives. */
static rtomo_status deal_rows(cuda_fbp_impl *impl, const int *kept_rows,
                              int n_rows, rtomo_error *err)
{
    cuda_fbp_stream_plan *sp = &impl->stream;
    sp->pos_slot = (int *)malloc(sizeof(int) * (size_t)n_rows);
    sp->pos_image = (int *)malloc(sizeof(int) * (size_t)n_rows);
    if (!sp->pos_slot || !sp->pos_image)
        return rtomo_set_error(err, RTOMO_E_NOMEM,
                               "out of memory for %d resident rows", n_rows);
    sp->n_pos = n_rows;
    for (int k = 0; k < n_rows; k++)
        impl->slots[fbp_partition_owner(&impl->deal, kept_rows[k])].stream.n_rows++;
    for (int i = 0; i < impl->n_slots; i++) {
        cuda_fbp_stream_state *s = &impl->slots[i].stream;
        if (s->n_rows > 0 &&
            !(s->rows = (int *)malloc(sizeof(int) * (size_t)s->n_rows)))
            return rtomo_set_error(err, RTOMO_E_NOMEM, "out of memory");
        s->n_rows = 0;
    }
    for (int k = 0; k < n_rows; k++) {
        const int owner = fbp_partition_owner(&impl->deal, kept_rows[k]);
        cuda_fbp_stream_state *s = &impl->slots[owner].stream;
        sp->pos_slot[k] = owner;
        sp->pos_image[k] = s->n_rows;
        s->rows[s->n_rows++] = fbp_partition_local(&impl->deal, kept_rows[k]);
    }
    return RTOMO_OK;
}

/* The configuration, resolved as cuda_reconstruct resolves it for a call
 * of the open rows: by the autotuner on the slot with the most of them.
 * (The autotuner reads the plan's ROI and interpolation, which the front
 * end has just copied into the stream's.) */
static rtomo_status resolve(cuda_fbp_impl *impl, cuda_fbp_config *cfg,
                            rtomo_error *err)
{
    int best = 0;
    for (int i = 1; i < impl->n_slots; i++)
        if (impl->slots[i].stream.n_rows > impl->slots[best].stream.n_rows)
            best = i;
    cuda_fbp_slot *slot = &impl->slots[best];
    RTOMO_CUDA_TRY(err, cudaSetDevice(slot->device));
    return cuda_fbp_autotune(impl, slot, slot->stream.rows, slot->stream.n_rows,
                             cfg, err);
}

/* Sizes of a slot's part for the resolved configuration. */
static void size_slot(cuda_fbp_slot *slot, const rtomo_fbp *plan,
                      const cuda_fbp_stream_plan *sp)
{
    cuda_fbp_stream_state *s = &slot->stream;
    const int S = sp->cfg.format.slices;
    s->groups = (s->n_rows + S - 1) / S;
    s->acc_bytes = (size_t)s->groups * S * image_floats(sp) * sizeof(float);
    s->pool_pitch = cuda_fbp_pack_pitch(plan, sp->cfg.format);
    s->pool_buffer_bytes = s->pool_pitch * (size_t)sp->chunk;
    const size_t most = STREAM_POOL_BYTES / s->pool_buffer_bytes;
    s->batch = batch_of(s->groups, most > 1 ? (int)most : 1);
}

static size_t slot_device_bytes(const cuda_fbp_slot *slot,
                                const cuda_fbp_stream_plan *sp)
{
    const cuda_fbp_stream_state *s = &slot->stream;
    if (s->n_rows == 0)
        return 0;
    return s->acc_bytes + (size_t)s->batch * s->pool_buffer_bytes +
           sp->entry_bytes + sizeof(unsigned) * CUDA_FBP_MAX_GROUPS;
}

/* Refuse, with the numbers, slices that would not leave STREAM_RESERVE
 * free on a device (all slots of a device together). */
static rtomo_status check_memory(const cuda_fbp_impl *impl, rtomo_error *err)
{
    const cuda_fbp_stream_plan *sp = &impl->stream;
    for (int i = 0; i < impl->n_slots; i++) {
        const int dev = impl->slots[i].device;
        int first = 1, rows = 0;
        size_t need = 0;
        for (int j = 0; j < impl->n_slots; j++) {
            if (impl->slots[j].device != dev)
                continue;
            first &= j >= i;
            need += slot_device_bytes(&impl->slots[j], sp);
            rows += impl->slots[j].stream.n_rows;
        }
        if (!first || need == 0)
            continue;       /* the device's first slot checked it */
        size_t free_bytes = 0, total = 0;
        RTOMO_CUDA_TRY(err, cudaSetDevice(dev));
        RTOMO_CUDA_TRY(err, cudaMemGetInfo(&free_bytes, &total));
        if (need + STREAM_RESERVE > free_bytes)
            return rtomo_set_error(
                err, RTOMO_E_NOMEM,
                "%d resident slices of %dx%d need %.2f GiB on CUDA device %d, "
                "which has %.2f GiB free (%.2f GiB kept in reserve): open "
                "fewer rows or a smaller region", rows, sp->roi[2], sp->roi[3],
                (double)need / (1 << 30), dev, (double)free_bytes / (1 << 30),
                (double)STREAM_RESERVE / (1 << 30));
    }
    return RTOMO_OK;
}

/* Texture over pool buffer g holding the first `n` projections of a
 * chunk (made on first use: a chunk's height must be exact, so that the
 * border beyond its last projection reads 0 as in reconstruct). */
static rtomo_status chunk_texture(cuda_fbp_slot *slot, const rtomo_fbp *plan,
                                  const cuda_fbp_stream_plan *sp, int g, int n,
                                  cudaTextureObject_t *out, rtomo_error *err)
{
    cuda_fbp_stream_state *s = &slot->stream;
    cudaTextureObject_t *t = &s->textures[(size_t)g * sp->chunk + (size_t)(n - 1)];
    if (!*t) {
        rtomo_status st = cuda_fbp_texture(s->pool + (size_t)g * s->pool_buffer_bytes,
                                           sp->cfg.format, plan->geom.det_width, n,
                                           s->pool_pitch, sp->interp, t, err);
        if (st != RTOMO_OK)
            return st;
    }
    *out = *t;
    return RTOMO_OK;
}

static rtomo_status create_events(cuda_fbp_stream_state *s, rtomo_error *err)
{
    for (int e = 0; e < CUDA_FBP_STREAM_RING; e++) {
        RTOMO_CUDA_TRY(err, cudaEventCreate(&s->start[e]));
        RTOMO_CUDA_TRY(err, cudaEventCreate(&s->end[e]));
    }
    RTOMO_CUDA_TRY(err, cudaEventCreateWithFlags(&s->ready, cudaEventDisableTiming));
    RTOMO_CUDA_TRY(err, cudaEventCreateWithFlags(&s->filtered, cudaEventDisableTiming));
    RTOMO_CUDA_TRY(err, cudaEventCreateWithFlags(&s->stats_done, cudaEventDisableTiming));
    RTOMO_CUDA_TRY(err, cudaEventCreate(&s->origin));
    s->n_batches = (s->groups + s->batch - 1) / s->batch;
    s->batch_done = (cudaEvent_t *)calloc((size_t)s->n_batches, sizeof(cudaEvent_t));
    if (!s->batch_done)
        return rtomo_set_error(err, RTOMO_E_NOMEM, "out of memory for events");
    for (int b = 0; b < s->n_batches; b++)
        RTOMO_CUDA_TRY(err, cudaEventCreateWithFlags(&s->batch_done[b],
                                                     cudaEventDisableTiming));
    for (int j = 0; j < 2; j++)
        RTOMO_CUDA_TRY(err, cudaEventCreateWithFlags(&s->downloaded[j],
                                                     cudaEventDisableTiming));
    return RTOMO_OK;
}

/* Allocate a slot's part, accumulators zeroed (on its work stream,
 * ahead of any chunk). */
static rtomo_status alloc_slot(cuda_fbp_slot *slot, const rtomo_fbp *plan,
                               const cuda_fbp_stream_plan *sp, rtomo_error *err)
{
    cuda_fbp_stream_state *s = &slot->stream;
    if (s->n_rows == 0)
        return RTOMO_OK;
    RTOMO_CUDA_TRY(err, cudaSetDevice(slot->device));
    rtomo_status st;
    /* The lowest priority: filtering of new frames goes first. */
    int least, greatest;
    RTOMO_CUDA_TRY(err, cudaDeviceGetStreamPriorityRange(&least, &greatest));
    RTOMO_CUDA_TRY(err, cudaStreamCreateWithPriority(&s->work, cudaStreamNonBlocking,
                                                     least));
    if ((st = device_alloc((void **)&s->acc, s->acc_bytes, slot, "resident slices", err)) ||
        (st = device_alloc((void **)&s->sm_counters, sizeof(unsigned) * CUDA_FBP_MAX_SMS,
                           slot, "hybrid counters", err)) ||
        (st = device_alloc((void **)&s->pool, (size_t)s->batch * s->pool_buffer_bytes,
                           slot, "packed chunks", err)) ||
        (st = device_alloc((void **)&s->absmax, sizeof(unsigned) * CUDA_FBP_MAX_GROUPS,
                           slot, "chunk ranges", err)) ||
        (st = device_alloc((void **)&s->block, sp->entry_bytes, slot,
                           "chunk constants", err)) ||
        (st = create_events(s, err)))
        return st;
    RTOMO_CUDA_TRY(err, cudaHostAlloc((void **)&s->ring,
                                      sp->entry_bytes * CUDA_FBP_STREAM_RING,
                                      cudaHostAllocPortable));
    s->texture_count = s->batch * sp->chunk;
    s->textures = (cudaTextureObject_t *)calloc((size_t)s->texture_count,
                                                sizeof(cudaTextureObject_t));
    if (!s->textures)
        return rtomo_set_error(err, RTOMO_E_NOMEM, "out of memory for textures");
    /* Full chunks' textures now, partial ones on first use. */
    for (int g = 0; g < s->batch && uses_textures(sp->cfg.kernel); g++) {
        cudaTextureObject_t t;
        if ((st = chunk_texture(slot, plan, sp, g, sp->chunk, &t, err)))
            return st;
    }
    RTOMO_CUDA_TRY(err, cudaMemsetAsync(s->acc, 0, s->acc_bytes, s->work));
    RTOMO_CUDA_TRY(err, cudaMemsetAsync(s->sm_counters, 0,
                                        sizeof(unsigned) * CUDA_FBP_MAX_SMS, s->work));
    RTOMO_CUDA_TRY(err, cudaEventRecord(s->origin, s->work));
    return RTOMO_OK;
}

static rtomo_status sync_compute(const cuda_fbp_slot *slot, rtomo_error *err)
{
    RTOMO_CUDA_TRY(err, cudaSetDevice(slot->device));
    RTOMO_CUDA_TRY(err, cudaStreamSynchronize(slot->compute));
    if (slot->stream.work)
        RTOMO_CUDA_TRY(err, cudaStreamSynchronize(slot->stream.work));
    return RTOMO_OK;
}

static int chunk_from_env(void)
{
    const char *v = getenv("RTOMO_CUDA_FBP_STREAM_CHUNK");
    if (!v || !*v)
        return STREAM_CHUNK_MAX;
    char *end;
    const long n = strtol(v, &end, 10);
    return *end || n < 1 || n > STREAM_CHUNK_MAX ? STREAM_CHUNK_MAX : (int)n;
}

extern "C" int cuda_fbp_stream_idle(const rtomo_fbp *plan)
{
    const cuda_fbp_impl *impl = impl_of(plan);
    const cuda_fbp_stream_plan *sp = &impl->stream;
    if (!sp->open || sp->ring_pending == 0)
        return 1;
    /* The newest chunk: the work stream runs chunks in order. */
    const int e = (sp->ring_next + CUDA_FBP_STREAM_RING - 1) % CUDA_FBP_STREAM_RING;
    for (int i = 0; i < impl->n_slots; i++) {
        const cuda_fbp_slot *slot = &impl->slots[i];
        if (!slot->stream.used[e])
            continue;
        if (cudaSetDevice(slot->device) != cudaSuccess)
            return 0;
        cudaError_t rc = cudaEventQuery(slot->stream.end[e]);
        if (rc == cudaErrorNotReady)
            return 0;
        if (rc != cudaSuccess) {
            /* Left for the next call that checks errors to report. */
            return 0;
        }
    }
    return 1;
}

extern "C" int cuda_fbp_stream_chunk(const rtomo_fbp *plan)
{
    const cuda_fbp_impl *impl = impl_of(plan);
    if (impl->stream.open)
        return impl->stream.chunk;
    /* A chunk is one texture: at most texture_chunk projections high; and
     * one group's packed chunk, in the widest texel (4 float slices: the
     * format is resolved only at open), fits in STREAM_POOL_BYTES. */
    int chunk = chunk_from_env();
    if (chunk > impl->texture_chunk)
        chunk = impl->texture_chunk;
    cuda_fbp_format widest;
    widest.slices = 4;
    widest.precision = RTOMO_PRECISION_FLOAT;
    const size_t fit = STREAM_POOL_BYTES / cuda_fbp_pack_pitch(plan, widest);
    if ((size_t)chunk > fit)
        chunk = fit > 0 ? (int)fit : 1;
    return chunk;
}

extern "C" rtomo_status cuda_fbp_stream_open(rtomo_fbp *plan, const int *kept_rows,
                                             int n_rows, rtomo_error *err)
{
    cuda_fbp_impl *impl = impl_of(plan);
    cuda_fbp_stream_plan *sp = &impl->stream;
    release(impl);
    const char *trace = getenv("RTOMO_CUDA_FBP_STREAM_TRACE");
    sp->trace = trace && strcmp(trace, "1") == 0;
    const char *acc = getenv("RTOMO_CUDA_FBP_STREAM_ACCUMULATE");
    sp->accumulate = acc && strcmp(acc, "load") == 0 ? CUDA_FBP_ACCUMULATE_LOAD
                                                     : CUDA_FBP_ACCUMULATE_REDUCE;
    sp->host_origin = rtomo_now_seconds();
    sp->chunk = cuda_fbp_stream_chunk(plan);
    memcpy(sp->roi, plan->stream_roi, sizeof sp->roi);
    sp->interp = plan->stream_interp;
    /* 256-byte entries keep every entry's float4 constants aligned. */
    sp->entry_bytes = (weights_offset(sp->chunk) + sizeof(float) * (size_t)sp->chunk +
                       255) / 256 * 256;
    rtomo_status st = deal_rows(impl, kept_rows, n_rows, err);
    if (st == RTOMO_OK &&
        !(sp->reader = (unsigned long long *)calloc((size_t)plan->geom.n_proj,
                                                    sizeof *sp->reader)))
        st = rtomo_set_error(err, RTOMO_E_NOMEM, "out of memory");
    if (st == RTOMO_OK)
        st = resolve(impl, &sp->cfg, err);
    if (st == RTOMO_OK) {
        for (int i = 0; i < impl->n_slots; i++)
            size_slot(&impl->slots[i], plan, sp);
        st = check_memory(impl, err);
    }
    for (int i = 0; i < impl->n_slots && st == RTOMO_OK; i++)
        st = alloc_slot(&impl->slots[i], plan, sp, err);
    /* The zeroing's failures belong to the open. */
    for (int i = 0; i < impl->n_slots && st == RTOMO_OK; i++)
        st = sync_compute(&impl->slots[i], err);
    if (st != RTOMO_OK) {
        release(impl);
        return st;
    }
    sp->open = 1;
    return RTOMO_OK;
}

extern "C" void cuda_fbp_stream_close(rtomo_fbp *plan)
{
    cuda_fbp_impl *impl = impl_of(plan);
    if (!impl)
        return;
    /* The chunks' timing still counts; errors have nowhere to go. */
    rtomo_error ignored;
    if (impl->stream.open)
        retire(impl, 1, &ignored);
    release(impl);
}

extern "C" rtomo_status cuda_fbp_stream_reset(rtomo_fbp *plan, rtomo_error *err)
{
    cuda_fbp_impl *impl = impl_of(plan);
    /* Ordered after every chunk already enqueued: same stream. */
    for (int i = 0; i < impl->n_slots; i++) {
        cuda_fbp_slot *slot = &impl->slots[i];
        if (slot->stream.n_rows == 0)
            continue;
        RTOMO_CUDA_TRY(err, cudaSetDevice(slot->device));
        RTOMO_CUDA_TRY(err, cudaMemsetAsync(slot->stream.acc, 0, slot->stream.acc_bytes,
                                            slot->stream.work));
        slot->stream.chunk_last = 0;
    }
    return RTOMO_OK;
}

/* ------------------------------------------------------------- apply ---- */

/* Write a chunk's constants (from the plan's angles and shifts now),
 * sinogram lines and weights into ring entry `entry`. */
static void fill_entry(const rtomo_fbp *plan, const cuda_fbp_stream_plan *sp,
                       char *entry, const int *slots, const float *weights, int n)
{
    float4 *proj = (float4 *)entry;
    int *lines = (int *)(entry + lines_offset(sp->chunk));
    float *w = (float *)(entry + weights_offset(sp->chunk));
    for (int i = 0; i < n; i++) {
        proj[i] = cuda_fbp_projection_constants(plan, slots[i]);
        lines[i] = slots[i];
        w[i] = weights[i];
    }
}

/* Pack groups [g0, g0 + k) of the slot's open rows from the chunk's n
 * projections and add their back-projection into their images. */
static rtomo_status launch_groups(cuda_fbp_slot *slot, const rtomo_fbp *plan,
                                  const cuda_fbp_stream_plan *sp, int g0, int k,
                                  int n, rtomo_error *err)
{
    cuda_fbp_stream_state *s = &slot->stream;
    const int S = sp->cfg.format.slices;
    int rows[CUDA_FBP_MAX_GROUPS * 4];
    for (int j = 0; j < k * S; j++)
        rows[j] = g0 * S + j < s->n_rows ? s->rows[g0 * S + j] : -1;
    cuda_fbp_pack_job job;
    memset(&job, 0, sizeof job);
    job.format = sp->cfg.format;
    job.rows = rows;
    job.groups = k;
    job.n_proj = n;
    job.lines = (const int *)(s->block + lines_offset(sp->chunk));
    job.weights = (const float *)(s->block + weights_offset(sp->chunk));
    job.pool = s->pool;
    job.buffer_bytes = s->pool_buffer_bytes;
    job.pitch = s->pool_pitch;
    job.absmax = s->absmax;
    job.stream = s->work;
    rtomo_status st = cuda_fbp_pack(slot, plan, &job, err);
    if (st != RTOMO_OK)
        return st;

    const size_t image = image_floats(sp);
    cuda_fbp_launch l;
    memset(&l, 0, sizeof l);
    l.proj = (const float4 *)s->block;
    l.n_proj = n;
    l.det_width = plan->geom.det_width;
    l.center = (float)(0.5 * (plan->geom.slice_size - 1));
    l.fov_limit = plan->fov_limit;
    l.fov_span = plan->geom.slice_size - 1;
    l.roi_x = sp->roi[0];
    l.roi_y = sp->roi[1];
    l.roi_w = sp->roi[2];
    l.roi_h = sp->roi[3];
    l.accumulate = sp->accumulate;
    l.interp = sp->interp;
    l.cfg = sp->cfg;
    l.n_groups = k;
    l.pitch = s->pool_pitch;
    l.absmax = sp->cfg.format.precision == RTOMO_PRECISION_HALF ? s->absmax : NULL;
    l.out = s->acc + (size_t)g0 * S * image;
    l.sm_counters = s->sm_counters;
    for (int g = 0; g < k; g++) {
        l.data[g] = s->pool + (size_t)g * s->pool_buffer_bytes;
        if (uses_textures(sp->cfg.kernel) &&
            (st = chunk_texture(slot, plan, sp, g, n, &l.tex[g], err)) != RTOMO_OK)
            return st;
    }
    return cuda_fbp_backproject(&l, s->work, err);
}

/* Enqueue the chunk in ring entry `e` on the slot's work stream:
 * constants up, then every batch of groups, bracketed by the entry's
 * events. */
static rtomo_status enqueue_chunk(cuda_fbp_slot *slot, const rtomo_fbp *plan,
                                  const cuda_fbp_stream_plan *sp, int e, int n,
                                  rtomo_error *err)
{
    cuda_fbp_stream_state *s = &slot->stream;
    RTOMO_CUDA_TRY(err, cudaSetDevice(slot->device));
    /* After the filtering of every frame fed so far. */
    RTOMO_CUDA_TRY(err, cudaEventRecord(s->filtered, slot->compute));
    RTOMO_CUDA_TRY(err, cudaStreamWaitEvent(s->work, s->filtered, 0));
    RTOMO_CUDA_TRY(err, cudaEventRecord(s->start[e], s->work));
    /* In stream order, so the previous chunk's kernels have read the
     * block before this copy replaces it. */
    RTOMO_CUDA_TRY(err, cudaMemcpyAsync(s->block, s->ring + (size_t)e * sp->entry_bytes,
                                        sp->entry_bytes, cudaMemcpyHostToDevice,
                                        s->work));
    for (int g0 = 0; g0 < s->groups; g0 += s->batch) {
        const int k = s->groups - g0 < s->batch ? s->groups - g0 : s->batch;
        rtomo_status st = launch_groups(slot, plan, sp, g0, k, n, err);
        if (st != RTOMO_OK)
            return st;
        RTOMO_CUDA_TRY(err, cudaEventRecord(s->batch_done[g0 / s->batch], s->work));
    }
    s->chunk_last = 1;
    RTOMO_CUDA_TRY(err, cudaEventRecord(s->end[e], s->work));
    s->used[e] = 1;
    return RTOMO_OK;
}

/* One chunk of at most sp->chunk projections on every slot. */
static rtomo_status apply_chunk(cuda_fbp_impl *impl, const int *slots,
                                const float *weights, int n, rtomo_error *err)
{
    cuda_fbp_stream_plan *sp = &impl->stream;
    const rtomo_fbp *plan = impl->plan;
    /* Collect finished chunks' timing; wait only when the ring is full,
     * i.e. the host is CUDA_FBP_STREAM_RING chunks ahead. */
    rtomo_status st = retire(impl, 0, err);
    if (st == RTOMO_OK && sp->ring_pending == CUDA_FBP_STREAM_RING) {
        int done;
        st = retire_entry(impl, sp->ring_oldest, 1, &done, err);
        sp->ring_oldest = (sp->ring_oldest + 1) % CUDA_FBP_STREAM_RING;
        sp->ring_pending--;
    }
    if (st != RTOMO_OK)
        return st;
    const int e = sp->ring_next;
    sp->ring_next = (e + 1) % CUDA_FBP_STREAM_RING;
    sp->ring_pending++;
    sp->entry_seq[e] = ++sp->chunk_seq;
    sp->entry_host[e] = rtomo_now_seconds();
    sp->entry_n[e] = n;
    for (int i = 0; i < n; i++)
        sp->reader[slots[i]] = sp->chunk_seq;
    const char *filled = NULL;
    for (int i = 0; i < impl->n_slots; i++) {
        cuda_fbp_slot *slot = &impl->slots[i];
        if (slot->stream.n_rows == 0)
            continue;
        char *entry = slot->stream.ring + (size_t)e * sp->entry_bytes;
        if (filled)
            memcpy(entry, filled, sp->entry_bytes);
        else
            fill_entry(plan, sp, entry, slots, weights, n);
        filled = entry;
        if ((st = enqueue_chunk(slot, plan, sp, e, n, err)) != RTOMO_OK)
            return st;
    }
    return RTOMO_OK;
}

extern "C" rtomo_status cuda_fbp_stream_apply(rtomo_fbp *plan, const int *slots,
                                              const float *weights, int n,
                                              rtomo_error *err)
{
    cuda_fbp_impl *impl = impl_of(plan);
    cuda_fbp_stream_plan *sp = &impl->stream;
    if (!sp->open)
        return rtomo_set_error(err, RTOMO_E_STATE, "no resident slices are open");
    rtomo_status st = flush_staged(impl, slots, n, err);
    /* The front end's chunks never exceed sp->chunk; split anyway. */
    for (int first = 0; first < n && st == RTOMO_OK; first += sp->chunk)
        st = apply_chunk(impl, slots + first, weights + first,
                         n - first < sp->chunk ? n - first : sp->chunk, err);
    return st;
}

/* -------------------------------------------------------------- read ---- */

/* The images one slot downloads: its accumulator images[i] goes to
 * out[targets[i]]. */
typedef struct read_job {
    cuda_fbp_impl *impl;
    const int *images, *targets;
    int n;
    float *out;
    double *stats;              /* min, max, mean per target, or NULL */
    int direct;                 /* out is page-locked: copy straight in */
} read_job;

/* ----------------------------------------------------------- statistics ---- */

/* Every published image carries its min, max and mean.  For resident
 * slices the GPU computes them on its copy before the download, at memory
 * speed, instead of the daemon's finisher reading 32 GiB again on the host
 * (2 threads: seconds at 2048^3).  Each image is reduced by STATS_BLOCKS
 * blocks into partials, which the host combines. */
#define STATS_THREADS 256
#define STATS_BLOCKS 32

typedef struct stats_partial {
    float lo, hi;
    double sum;
} stats_partial;

__global__ void image_stats_kernel(const float *images, size_t pixels,
                                   stats_partial *out)
{
    const float *x = images + (size_t)blockIdx.y * pixels;
    float lo = INFINITY, hi = -INFINITY;
    double sum = 0.0;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < pixels;
         i += (size_t)gridDim.x * blockDim.x) {
        const float v = x[i];
        lo = fminf(lo, v);
        hi = fmaxf(hi, v);
        sum += v;
    }
    for (int o = 16; o > 0; o >>= 1) {
        lo = fminf(lo, __shfl_down_sync(0xffffffffu, lo, o));
        hi = fmaxf(hi, __shfl_down_sync(0xffffffffu, hi, o));
        sum += __shfl_down_sync(0xffffffffu, sum, o);
    }
    __shared__ stats_partial warps[STATS_THREADS / 32];
    if ((threadIdx.x & 31) == 0)
        warps[threadIdx.x >> 5] = stats_partial{lo, hi, sum};
    __syncthreads();
    if (threadIdx.x != 0)
        return;
    stats_partial p = warps[0];
    for (int w = 1; w < STATS_THREADS / 32; w++) {
        p.lo = fminf(p.lo, warps[w].lo);
        p.hi = fmaxf(p.hi, warps[w].hi);
        p.sum += warps[w].sum;
    }
    out[(size_t)blockIdx.y * gridDim.x + blockIdx.x] = p;
}

/* Room for the partials of n images on the device and the host. */
static rtomo_status stats_room(cuda_fbp_stream_state *s, int n, rtomo_error *err)
{
    const size_t bytes = sizeof(stats_partial) * STATS_BLOCKS * (size_t)n;
    if (bytes <= s->stats_bytes)
        return RTOMO_OK;
    /* Every read finishes its statistics before it returns; nothing
     * queued uses the old partials. */
    cudaFree(s->stats_dev);
    cudaFreeHost(s->stats_host);
    s->stats_dev = NULL;
    s->stats_host = NULL;
    s->stats_bytes = 0;
    RTOMO_CUDA_TRY(err, cudaMalloc(&s->stats_dev, bytes));
    RTOMO_CUDA_TRY(err, cudaHostAlloc(&s->stats_host, bytes, cudaHostAllocDefault));
    s->stats_bytes = bytes;
    return RTOMO_OK;
}

/* Queue the statistics of the job's images on the download stream (after
 * its waits: the images are final) and their partials' download;
 * stats_done marks the end. */
static rtomo_status enqueue_stats(cuda_fbp_slot *slot, const read_job *job,
                                  size_t image, rtomo_error *err)
{
    cuda_fbp_stream_state *s = &slot->stream;
    rtomo_status st = stats_room(s, job->n, err);
    if (st != RTOMO_OK)
        return st;
    stats_partial *partials = (stats_partial *)s->stats_dev;
    for (int j = 0; j < job->n;) {
        int run = 1;
        while (j + run < job->n && run < 65535 &&
               job->images[j + run] == job->images[j] + run)
            run++;
        image_stats_kernel<<<dim3(STATS_BLOCKS, run), STATS_THREADS, 0, slot->download>>>(
            s->acc + (size_t)job->images[j] * image, image,
            partials + (size_t)j * STATS_BLOCKS);
        RTOMO_CUDA_CHECK_LAUNCH(err, "slice statistics");
        j += run;
    }
    RTOMO_CUDA_TRY(err, cudaMemcpyAsync(s->stats_host, s->stats_dev,
                                        sizeof(stats_partial) * STATS_BLOCKS *
                                            (size_t)job->n,
                                        cudaMemcpyDeviceToHost, slot->download));
    RTOMO_CUDA_TRY(err, cudaEventRecord(s->stats_done, slot->download));
    return RTOMO_OK;
}

/* Wait for the partials and combine them into job->stats. */
static rtomo_status finish_stats(cuda_fbp_slot *slot, const read_job *job,
                                 size_t image, rtomo_error *err)
{
    const cuda_fbp_stream_state *s = &slot->stream;
    RTOMO_CUDA_TRY(err, cudaEventSynchronize(s->stats_done));
    const stats_partial *p = (const stats_partial *)s->stats_host;
    for (int j = 0; j < job->n; j++) {
        float lo = INFINITY, hi = -INFINITY;
        double sum = 0.0;
        for (int b = 0; b < STATS_BLOCKS; b++) {
            const stats_partial *q = &p[(size_t)j * STATS_BLOCKS + b];
            lo = q->lo < lo ? q->lo : lo;
            hi = q->hi > hi ? q->hi : hi;
            sum += q->sum;
        }
        double *out = job->stats + 3 * (size_t)job->targets[j];
        out[0] = lo;
        out[1] = hi;
        out[2] = sum / (double)image;
    }
    return RTOMO_OK;
}

/*
 * Make the download stream wait until job images [first, first + count)
 * are final.  After a chunk, only the launch of the latest chunk that
 * finishes them must be done: they leave while its later launches (the
 * rest of the slices) still run, so a scan's last chunk overlaps the
 * read of the slabs it has finished.  After a reset (or before any chunk)
 * everything queued on the work stream so far.
 */
static rtomo_status wait_images(cuda_fbp_slot *slot, const read_job *job,
                                int first, int count, rtomo_error *err)
{
    cuda_fbp_stream_state *s = &slot->stream;
    if (!s->chunk_last) {
        RTOMO_CUDA_TRY(err, cudaEventRecord(s->ready, s->work));
        RTOMO_CUDA_TRY(err, cudaStreamWaitEvent(slot->download, s->ready, 0));
        return RTOMO_OK;
    }
    const cuda_fbp_stream_plan *sp = &job->impl->stream;
    const int per_batch = s->batch * sp->cfg.format.slices;
    int last = 0;
    for (int j = 0; j < count; j++)
        if (job->images[first + j] > last)
            last = job->images[first + j];
    /* The last launch's images wait for the chunk's end event instead (the
     * same moment): then the read that takes them leaves the chunk done,
     * for its timing to be retired with that read. */
    const int newest = (sp->ring_next + CUDA_FBP_STREAM_RING - 1) % CUDA_FBP_STREAM_RING;
    const int b = last / per_batch;
    RTOMO_CUDA_TRY(err, cudaStreamWaitEvent(slot->download,
                                            b == s->n_batches - 1 && s->used[newest]
                                                ? s->end[newest]
                                                : s->batch_done[b],
                                            0));
    return RTOMO_OK;
}

/* Download every image of the job straight into `out`, which is
 * page-locked: one copy per run of images consecutive on both sides. */
static rtomo_status read_direct(cuda_fbp_slot *slot, const read_job *job,
                                size_t image, rtomo_error *err)
{
    const cuda_fbp_stream_state *s = &slot->stream;
    rtomo_status st = wait_images(slot, job, 0, job->n, err);
    if (st != RTOMO_OK)
        return st;
    for (int j = 0; j < job->n;) {
        int run = 1;
        while (j + run < job->n && job->images[j + run] == job->images[j] + run &&
               job->targets[j + run] == job->targets[j] + run)
            run++;
        RTOMO_CUDA_TRY(err, cudaMemcpyAsync(job->out + (size_t)job->targets[j] * image,
                                            s->acc + (size_t)job->images[j] * image,
                                            (size_t)run * image * sizeof(float),
                                            cudaMemcpyDeviceToHost, slot->download));
        j += run;
    }
    return RTOMO_OK;
}

/* Download job images [first, first + count) into output buffer `buf`:
 * one copy per run of consecutive accumulator images. */
static rtomo_status enqueue_read(cuda_fbp_slot *slot, const read_job *job, int buf,
                                 int first, int count, size_t image,
                                 rtomo_error *err)
{
    const cuda_fbp_stream_state *s = &slot->stream;
    float *host = slot->recon.host_out[buf];
    rtomo_status st = wait_images(slot, job, first, count, err);
    if (st != RTOMO_OK)
        return st;
    for (int j = 0; j < count;) {
        int run = 1;
        while (j + run < count &&
               job->images[first + j + run] == job->images[first + j] + run)
            run++;
        RTOMO_CUDA_TRY(err, cudaMemcpyAsync(host + (size_t)j * image,
                                            s->acc + (size_t)job->images[first + j] * image,
                                            (size_t)run * image * sizeof(float),
                                            cudaMemcpyDeviceToHost, slot->download));
        j += run;
    }
    RTOMO_CUDA_TRY(err, cudaEventRecord(s->downloaded[buf], slot->download));
    return RTOMO_OK;
}

/* Wait for buffer `buf` and copy its images to their places in out. */
static rtomo_status finish_read(cuda_fbp_slot *slot, const read_job *job, int buf,
                                int first, int count, size_t image,
                                cuda_fbp_copy_segment *segs, rtomo_error *err)
{
    RTOMO_CUDA_TRY(err, cudaEventSynchronize(slot->stream.downloaded[buf]));
    for (int j = 0; j < count; j++) {
        segs[j].dst = job->out + (size_t)job->targets[first + j] * image;
        segs[j].src = slot->recon.host_out[buf] + (size_t)j * image;
        segs[j].bytes = image * sizeof(float);
    }
    cuda_fbp_copy(job->impl->copier, segs, count);
    return RTOMO_OK;
}

/* A slot's share of a read, on its worker thread: while the GPU copies
 * batch b into one pinned buffer, the host copies batch b-1 out of the
 * other. */
static rtomo_status read_slot(cuda_fbp_slot *slot, void *arg, rtomo_error *err)
{
    const read_job *job = (const read_job *)arg;
    if (job->n == 0)
        return RTOMO_OK;
    const size_t image = image_floats(&job->impl->stream);
    /* Statistics go on the download stream after the downloads, whose
     * waits (wait_images) have made every image of the job final. */
    if (job->direct) {
        rtomo_status st = read_direct(slot, job, image, err);
        if (st == RTOMO_OK && job->stats && (st = enqueue_stats(slot, job, image, err)) ==
                                                RTOMO_OK)
            st = finish_stats(slot, job, image, err);
        if (st == RTOMO_OK)
            RTOMO_CUDA_TRY(err, cudaStreamSynchronize(slot->download));
        return st;
    }
    rtomo_status st = cuda_fbp_ensure_output(slot, image * sizeof(float), err);
    if (st != RTOMO_OK)
        return st;
    size_t per = slot->recon.out_bytes / (image * sizeof(float));
    if (per > READ_MAX_IMAGES)
        per = READ_MAX_IMAGES;
    cuda_fbp_copy_segment *segs =
        (cuda_fbp_copy_segment *)malloc(sizeof *segs * per);
    if (!segs)
        return rtomo_set_error(err, RTOMO_E_NOMEM, "out of memory");
    int first[2] = {0, 0}, count[2] = {0, 0};
    int done = 0, b = 0;
    for (; done < job->n && st == RTOMO_OK; b++) {
        const int buf = b & 1;
        first[buf] = done;
        count[buf] = job->n - done < (int)per ? job->n - done : (int)per;
        st = enqueue_read(slot, job, buf, first[buf], count[buf], image, err);
        if (st == RTOMO_OK && b > 0)
            st = finish_read(slot, job, buf ^ 1, first[buf ^ 1], count[buf ^ 1],
                             image, segs, err);
        done += count[buf];
    }
    const int last = (b - 1) & 1;
    if (st == RTOMO_OK && job->stats)
        st = enqueue_stats(slot, job, image, err);
    if (st == RTOMO_OK)
        st = finish_read(slot, job, last, first[last], count[last], image, segs, err);
    free(segs);
    if (st == RTOMO_OK && job->stats)
        st = finish_stats(slot, job, image, err);
    return st;
}

/* The page-aligned range around [p, p + bytes). */
static void page_range(const void *p, size_t bytes, char **base, size_t *length)
{
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    const uintptr_t a = (uintptr_t)p / page * page;
    const uintptr_t b = ((uintptr_t)p + bytes + page - 1) / page * page;
    *base = (char *)a;
    *length = (size_t)(b - a);
}

static int is_page_locked(const void *p)
{
    cudaPointerAttributes attr;
    if (cudaPointerGetAttributes(&attr, p) == cudaSuccess)
        return attr.type == cudaMemoryTypeHost;
    cudaGetLastError();
    return 0;
}

/*
 * Whether `out` is page-locked, so that the GPUs can copy straight into it
 * (no pinned buffer, no host copy): memory the caller allocated with
 * cudaHostAlloc or registered.  Its first and last floats are asked (one
 * C array is one allocation).  The test hook RTOMO_CUDA_FBP_READ_REGISTER=1
 * registers other memory for the read (*registered = 1), to measure that
 * against the staged copy.
 */
static int page_locked(float *out, size_t bytes, int *registered)
{
    if (is_page_locked(out) &&
        is_page_locked((const char *)out + bytes - sizeof(float)))
        return 1;
    const char *hook = getenv("RTOMO_CUDA_FBP_READ_REGISTER");
    if (!hook || strcmp(hook, "1") != 0)
        return 0;
    char *base;
    size_t length;
    page_range(out, bytes, &base, &length);
    if (cudaHostRegister(base, length, cudaHostRegisterPortable) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    *registered = 1;
    return 1;
}

static void unregister(float *out, size_t bytes)
{
    char *base;
    size_t length;
    page_range(out, bytes, &base, &length);
    cudaHostUnregister(base);
}

extern "C" rtomo_status cuda_fbp_stream_read(rtomo_fbp *plan, const int *positions,
                                             int n, float *out, double *stats,
                                             rtomo_error *err)
{
    cuda_fbp_impl *impl = impl_of(plan);
    const cuda_fbp_stream_plan *sp = &impl->stream;
    if (!sp->open)
        return rtomo_set_error(err, RTOMO_E_STATE, "no resident slices are open");
    int *lists = (int *)malloc(sizeof(int) * 2 * (size_t)n);
    read_job *jobs = (read_job *)calloc((size_t)impl->n_slots, sizeof *jobs);
    if (!lists || !jobs) {
        free(lists);
        free(jobs);
        return rtomo_set_error(err, RTOMO_E_NOMEM, "out of memory");
    }
    /* Each slot's images and targets, in request order, one after the
     * other in `lists`. */
    int used = 0;
    for (int i = 0; i < impl->n_slots; i++) {
        int count = 0;
        for (int k = 0; k < n; k++)
            count += sp->pos_slot[positions[k]] == i;
        jobs[i].impl = impl;
        jobs[i].images = lists + used;
        jobs[i].targets = lists + n + used;
        jobs[i].out = out;
        used += count;
    }
    for (int k = 0; k < n; k++) {
        read_job *job = &jobs[sp->pos_slot[positions[k]]];
        ((int *)job->images)[job->n] = sp->pos_image[positions[k]];
        ((int *)job->targets)[job->n] = k;
        job->n++;
    }
    const size_t bytes = image_floats(sp) * sizeof(float) * (size_t)n;
    int registered = 0;
    const int direct = page_locked(out, bytes, &registered);
    for (int i = 0; i < impl->n_slots; i++)
        jobs[i].direct = direct;
    for (int i = 0; i < impl->n_slots; i++)
        jobs[i].stats = stats;
    const double called = rtomo_now_seconds();
    rtomo_status st = cuda_fbp_workers_run(impl, read_slot, jobs, sizeof *jobs, err);
    if (sp->trace)
        fprintf(stderr, "rtomo fbp stream trace: read of %d slices (%s), "
                "called at %.1f ms, done at %.1f ms\n", n,
                direct ? "direct" : "staged", 1e3 * (called - sp->host_origin),
                1e3 * (rtomo_now_seconds() - sp->host_origin));
    if (registered)
        unregister(out, bytes);
    /* The chunks done so far give their timing to the stats; a read does
     * not wait for the rest (the slices after these may still be in the
     * last chunk's later launches). */
    if (st == RTOMO_OK)
        st = retire(impl, 0, err);
    free(lists);
    free(jobs);
    return st;
}
