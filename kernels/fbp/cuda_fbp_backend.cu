/*
 * cuda_fbp_backend.cu — the CUDA FBP backend: plan creation on one or more
 * GPUs, the operations table the front end (fbp_engine.c) dispatches to,
 * and the hand-off between the caller's thread and the per-device workers.
 *
 * The kept rows are dealt to the devices (rtomo_cuda_plan_devices) in
 * groups of 4 consecutive rows (fbp_partition.h), so that every
 * reconstruct call, typically a slab of consecutive slices, keeps all of
 * them busy; each device keeps the filtered sinograms of its rows for the
 * whole scan, so a reconstruction needs no transfer but the slices.
 * Frames are copied once, into pinned staging where each device's rows lie
 * together, and filtered asynchronously (cuda_fbp_filter.cu);
 * reconstructions run on one host thread per device (cuda_fbp_pipeline.cu,
 * cuda_fbp_workers.cu), each copying its slices straight to their places
 * in the caller's array, with the kernel, slices per pass and hybrid ratio
 * resolved by the autotuner where the options leave them on AUTO
 * (cuda_fbp_autotune.cu).
 *
 * Test hooks (environment, read at plan creation):
 *   RTOMO_CUDA_FBP_SPLIT=n          give each device n slots, so that the
 *                                   multi-device deal runs on one GPU;
 *   RTOMO_CUDA_FBP_TEXTURE_CHUNK=n  at most n projections per texture, so
 *                                   that chunked back-projection runs on
 *                                   small scans.
 */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_fbp.h"
#include "cuda_fbp_debug.h"

#define MAX_SPLIT 8
/* Row pitch of the filtered sinograms: coalesced lines. */
#define SINOGRAM_ALIGNMENT 128
/* Device memory kept free beyond the sinograms and filter buffers: packed
 * sinograms, output buffers, cuFFT and the CUDA context. */
#define DEVICE_RESERVE ((size_t)768 << 20)

static cuda_fbp_impl *impl_of(const rtomo_fbp *plan)
{
    return (cuda_fbp_impl *)plan->impl;
}

/* ----------------------------------------------------------- options ---- */

static rtomo_status check_options(const rtomo_engine_options *opt,
                                  rtomo_error *err)
{
    if ((unsigned)opt->bp_kernel > RTOMO_BP_HYBRID)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "unknown back-projection kernel %d",
                               (int)opt->bp_kernel);
    if (opt->slices_per_pass != 0 && opt->slices_per_pass != 1 &&
        opt->slices_per_pass != 2 && opt->slices_per_pass != 4)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "slices_per_pass %d is not 0 (auto), 1, 2 or 4",
                               opt->slices_per_pass);
    if ((unsigned)opt->precision > RTOMO_PRECISION_HALF)
        return rtomo_set_error(err, RTOMO_E_INVALID, "unknown precision %d",
                               (int)opt->precision);
    if (!(opt->hybrid_ratio >= 0.0 && opt->hybrid_ratio <= 1.0))
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "hybrid_ratio %g is outside [0, 1] (0 = "
                               "autotuned)", opt->hybrid_ratio);
    return RTOMO_OK;
}

/* A positive integer from the environment, or `fallback`. */
static int env_int(const char *name, int fallback, int lo, int hi)
{
    const char *s = getenv(name);
    if (!s || !*s)
        return fallback;
    char *end;
    long v = strtol(s, &end, 10);
    if (*end || v < lo || v > hi)
        return fallback;
    return (int)v;
}

/* ------------------------------------------------------------- slots ---- */

/* Device ordinals of the slots, in order; returns the count. */
static rtomo_status plan_slots(const rtomo_fbp *plan, int *devices, int *n,
                               rtomo_error *err)
{
    int ids[RTOMO_MAX_DEVICES], n_dev = 0;
    rtomo_status st = rtomo_cuda_plan_devices(&plan->opt, ids, &n_dev, err);
    if (st != RTOMO_OK)
        return st;
    const int split = env_int("RTOMO_CUDA_FBP_SPLIT", 1, 1, MAX_SPLIT);
    int count = 0;
    for (int i = 0; i < n_dev; i++)
        for (int j = 0; j < split; j++)
            devices[count++] = ids[i];
    /* Never more slots than groups of rows: every slot owns rows. */
    const int most = fbp_partition_max_parts(plan->geom.row_count);
    if (count > most)
        count = most;
    *n = count;
    return RTOMO_OK;
}

static size_t sinogram_pitch(const rtomo_fbp *plan)
{
    const size_t line = (size_t)plan->geom.det_width * sizeof(float);
    return (line + SINOGRAM_ALIGNMENT - 1) / SINOGRAM_ALIGNMENT * SINOGRAM_ALIGNMENT;
}

static size_t slot_bytes(const rtomo_fbp *plan, int rows)
{
    return (size_t)rows * (size_t)plan->geom.n_proj * sinogram_pitch(plan) +
           cuda_fbp_filter_bytes(plan, rows, cuda_fbp_bank_frames(plan));
}

/* Refuse, with the numbers, a plan whose sinograms cannot fit. */
static rtomo_status check_memory(const cuda_fbp_impl *impl, rtomo_error *err)
{
    const rtomo_fbp *plan = impl->plan;
    for (int i = 0; i < impl->n_slots; i++) {
        const int dev = impl->slots[i].device;
        int rows = 0;
        size_t need = DEVICE_RESERVE;
        for (int j = 0; j < impl->n_slots; j++)
            if (impl->slots[j].device == dev) {
                need += slot_bytes(plan, impl->slots[j].row_count);
                rows += impl->slots[j].row_count;
            }
        rtomo_device_info info;
        rtomo_status st = rtomo_cuda_device_info(dev, &info, err);
        if (st != RTOMO_OK)
            return st;
        if (need > info.memory_free)
            return rtomo_set_error(
                err, RTOMO_E_NOMEM,
                "the filtered sinograms of %d rows (%d projections x %d bins) "
                "need %.1f GiB on CUDA device %d (%s), which has %.1f GiB "
                "free: keep fewer rows, use more devices or fewer projections",
                rows, plan->geom.n_proj, plan->geom.det_width,
                (double)need / (1 << 30), dev, info.name,
                (double)info.memory_free / (1 << 30));
    }
    return RTOMO_OK;
}

/* Runs on the slot's worker: streams, sinogram memory, filter and
 * reconstruction state. */
static rtomo_status slot_init(cuda_fbp_slot *slot, void *arg, rtomo_error *err)
{
    const rtomo_fbp *plan = (const rtomo_fbp *)arg;
    cudaDeviceProp prop;
    RTOMO_CUDA_TRY(err, cudaGetDeviceProperties(&prop, slot->device));
    slot->sm_count = prop.multiProcessorCount;
    RTOMO_CUDA_TRY(err, cudaStreamCreateWithFlags(&slot->upload, cudaStreamNonBlocking));
    /* Filtering runs at the device's highest priority: streaming chunks
     * (cuda_fbp_stream.cu) fill the GPU for seconds at a time, and the
     * frames arriving meanwhile must not wait for them, or ingest slows to
     * the back-projection's pace. */
    int least, greatest;
    RTOMO_CUDA_TRY(err, cudaDeviceGetStreamPriorityRange(&least, &greatest));
    RTOMO_CUDA_TRY(err, cudaStreamCreateWithPriority(&slot->compute, cudaStreamNonBlocking,
                                                     greatest));
    RTOMO_CUDA_TRY(err, cudaStreamCreateWithFlags(&slot->download, cudaStreamNonBlocking));
    slot->sino_pitch = sinogram_pitch(plan);
    const size_t bytes = cuda_fbp_row_offset(slot, plan, slot->row_count);
    if (cudaMalloc((void **)&slot->sino, bytes) != cudaSuccess) {
        cudaGetLastError();
        return rtomo_set_error(err, RTOMO_E_NOMEM,
                               "CUDA device %d: cannot allocate %.1f GiB for "
                               "the filtered sinograms of %d rows",
                               slot->device, (double)bytes / (1 << 30),
                               slot->row_count);
    }
    /* Rows never fed must reconstruct to 0, not to whatever was there.
     * (All set-up work goes to the compute stream: the streams do not
     * synchronise with the legacy default stream.) */
    RTOMO_CUDA_TRY(err, cudaMemsetAsync(slot->sino, 0, bytes, slot->compute));
    rtomo_status st = cuda_fbp_filter_init(slot, plan, cuda_fbp_bank_frames(plan), err);
    if (st == RTOMO_OK)
        st = cuda_fbp_recon_init(slot, plan, err);
    if (st == RTOMO_OK)
        RTOMO_CUDA_TRY(err, cudaStreamSynchronize(slot->compute));
    return st;
}

/* Runs on the slot's worker: everything slot_init made (any part of it). */
static rtomo_status slot_free(cuda_fbp_slot *slot, void *arg, rtomo_error *err)
{
    (void)arg;
    (void)err;
    if (slot->compute)
        cudaStreamSynchronize(slot->compute);
    if (slot->download)
        cudaStreamSynchronize(slot->download);
    if (slot->upload)
        cudaStreamSynchronize(slot->upload);
    cuda_fbp_recon_free(slot);
    cuda_fbp_filter_free(slot);
    cuda_fbp_rings_free(slot);
    cudaFree(slot->sino);
    slot->sino = NULL;
    if (slot->upload) cudaStreamDestroy(slot->upload);
    if (slot->compute) cudaStreamDestroy(slot->compute);
    if (slot->download) cudaStreamDestroy(slot->download);
    slot->upload = slot->compute = slot->download = NULL;
    return RTOMO_OK;
}

/* ---------------------------------------------------------- lifecycle ---- */

static void cuda_destroy(rtomo_fbp *plan)
{
    cuda_fbp_impl *impl = impl_of(plan);
    if (!impl)
        return;
    int all_started = impl->slots != NULL;
    for (int i = 0; impl->slots && i < impl->n_slots; i++)
        all_started &= impl->slots[i].thread_started;
    if (all_started)
        cuda_fbp_workers_run(impl, slot_free, NULL, 0, NULL);
    for (int i = 0; impl->slots && i < impl->n_slots; i++)
        cuda_fbp_worker_stop(&impl->slots[i]);
    for (int j = 0; j < 2; j++)
        if (impl->banks[j].staging)
            cudaFreeHost(impl->banks[j].staging);
    cuda_fbp_copier_destroy(impl->copier);
    free(impl->stage_runs);
    free(impl->stage_segs);
    free(impl->slots);
    free(impl);
    plan->impl = NULL;
}

/* The runs that take a frame's kept rows to staged order: slot by slot,
 * the longest stretches of its local rows that are consecutive kept rows
 * (one run in all for one slot). */
static rtomo_status make_stage_runs(cuda_fbp_impl *impl, rtomo_error *err)
{
    const int rows = impl->plan->geom.row_count;
    const size_t most = (size_t)fbp_partition_max_parts(rows);
    impl->stage_runs = (cuda_fbp_stage_run *)malloc(most * sizeof *impl->stage_runs);
    impl->stage_segs = (cuda_fbp_copy_segment *)malloc(most * sizeof *impl->stage_segs);
    if (!impl->stage_runs || !impl->stage_segs)
        return rtomo_set_error(err, RTOMO_E_NOMEM,
                               "out of memory for the staging map of %d rows", rows);
    int n = 0;
    for (int i = 0; i < impl->n_slots; i++) {
        const cuda_fbp_slot *slot = &impl->slots[i];
        for (int local = 0; local < slot->row_count;) {
            cuda_fbp_stage_run *run = &impl->stage_runs[n++];
            run->kept_row = fbp_partition_row(&impl->deal, i, local);
            run->staged_row = slot->stage_row + local;
            run->rows = fbp_partition_run(&impl->deal, run->kept_row, rows);
            local += run->rows;
        }
    }
    impl->n_stage_runs = n;
    return RTOMO_OK;
}

/* Copy the kept rows of one frame (lines of `line` bytes, kept order) to
 * `staged` in staged order. */
static void stage_rows(cuda_fbp_impl *impl, const void *kept, size_t line,
                       void *staged)
{
    for (int i = 0; i < impl->n_stage_runs; i++) {
        const cuda_fbp_stage_run *run = &impl->stage_runs[i];
        cuda_fbp_copy_segment *seg = &impl->stage_segs[i];
        seg->dst = (char *)staged + (size_t)run->staged_row * line;
        seg->src = (const char *)kept + (size_t)run->kept_row * line;
        seg->bytes = (size_t)run->rows * line;
    }
    cuda_fbp_copy(impl->copier, impl->stage_segs, impl->n_stage_runs);
}

static rtomo_status create_slots(cuda_fbp_impl *impl, rtomo_error *err)
{
    const rtomo_fbp *plan = impl->plan;
    int devices[RTOMO_MAX_DEVICES * MAX_SPLIT];
    rtomo_status st = plan_slots(plan, devices, &impl->n_slots, err);
    if (st != RTOMO_OK)
        return st;
    if (impl->n_slots < 1)
        return rtomo_set_error(err, RTOMO_E_UNAVAILABLE, "no CUDA device to use");
    impl->slots = (cuda_fbp_slot *)calloc((size_t)impl->n_slots, sizeof(cuda_fbp_slot));
    if (!impl->slots)
        return rtomo_set_error(err, RTOMO_E_NOMEM, "out of memory for devices");
    impl->deal = fbp_partition_make(plan->geom.row_count, impl->n_slots);
    int staged = 0;
    for (int i = 0; i < impl->n_slots; i++) {
        cuda_fbp_slot *slot = &impl->slots[i];
        slot->index = i;
        slot->device = devices[i];
        slot->row_count = fbp_partition_count(&impl->deal, i);
        slot->stage_row = staged;
        staged += slot->row_count;
    }
    st = make_stage_runs(impl, err);
    if (st != RTOMO_OK)
        return st;
    return check_memory(impl, err);
}

static rtomo_status cuda_create(rtomo_fbp *plan, rtomo_error *err)
{
    rtomo_status st = check_options(&plan->opt, err);
    if (st != RTOMO_OK)
        return st;
    cuda_fbp_impl *impl = (cuda_fbp_impl *)calloc(1, sizeof *impl);
    if (!impl)
        return rtomo_set_error(err, RTOMO_E_NOMEM, "out of memory for a CUDA plan");
    plan->impl = impl;
    impl->plan = plan;
    impl->texture_chunk = env_int("RTOMO_CUDA_FBP_TEXTURE_CHUNK",
                                  CUDA_FBP_TEXTURE_CHUNK, 1, CUDA_FBP_TEXTURE_CHUNK);
    if ((st = create_slots(impl, err)) != RTOMO_OK)
        return st;      /* the front end calls destroy */
    for (int i = 0; i < impl->n_slots; i++)
        if ((st = cuda_fbp_worker_start(&impl->slots[i], err)) != RTOMO_OK)
            return st;
    if ((st = cuda_fbp_workers_run(impl, slot_init, plan, 0, err)) != RTOMO_OK)
        return st;
    rtomo_device_info info;
    if ((st = rtomo_cuda_device_info(impl->slots[0].device, &info, err)) != RTOMO_OK)
        return st;
    memcpy(impl->device_name, info.name, sizeof impl->device_name);
    impl->bank_frames = cuda_fbp_bank_frames(plan);
    const size_t bank_bytes = (size_t)impl->bank_frames *
                              (size_t)rtomo_fbp_phase_input_rows(plan) *
                              (size_t)plan->geom.det_width * sizeof(float);
    for (int j = 0; j < 2; j++)
        RTOMO_CUDA_TRY(err, cudaHostAlloc(&impl->banks[j].staging, bank_bytes,
                                          cudaHostAllocPortable));
    impl->copier = cuda_fbp_copier_create();
    return RTOMO_OK;
}

/* -------------------------------------------------------- projections ---- */

/* Move the slots' engine-measured filter time into the plan's stats. */
static void collect_filter_time(rtomo_fbp *plan)
{
    cuda_fbp_impl *impl = impl_of(plan);
    for (int i = 0; i < impl->n_slots; i++) {
        plan->stats.filter_seconds += impl->slots[i].filter_seconds;
        impl->slots[i].filter_seconds = 0.0;
    }
}

/* The averaged dark and flat, in staged order, to every slot. */
static rtomo_status cuda_begin_projections(rtomo_fbp *plan, rtomo_error *err)
{
    if (!plan->normalise)
        return RTOMO_OK;
    cuda_fbp_impl *impl = impl_of(plan);
    const size_t width = (size_t)plan->geom.det_width;
    const size_t values = (size_t)plan->geom.row_count * width;
    float *dark = (float *)malloc(sizeof(float) * values);
    float *flat = (float *)malloc(sizeof(float) * values);
    rtomo_status st = RTOMO_OK;
    if (!dark || !flat)
        st = rtomo_set_error(err, RTOMO_E_NOMEM,
                             "out of memory for the dark and flat of %d rows",
                             plan->geom.row_count);
    if (st == RTOMO_OK) {
        stage_rows(impl, plan->dark, sizeof(float) * width, dark);
        stage_rows(impl, plan->flat, sizeof(float) * width, flat);
    }
    for (int i = 0; i < impl->n_slots && st == RTOMO_OK; i++) {
        cuda_fbp_slot *slot = &impl->slots[i];
        const size_t first = (size_t)slot->stage_row * width;
        st = cuda_fbp_filter_set_flat_field(slot, plan, dark + first, flat + first, err);
        if (st == RTOMO_OK)
            st = cuda_fbp_phase_set_flat_field(slot, plan, err);
    }
    free(dark);
    free(flat);
    return st;
}

/* A new flat field after the first projection: frames staged so far are
 * filtered with the old one (sent now), and the upload of the new one is
 * ordered after them on each slot's compute stream. */
static rtomo_status cuda_update_flat_field(rtomo_fbp *plan, rtomo_error *err)
{
    rtomo_status st = cuda_fbp_flush_bank(impl_of(plan), err);
    return st == RTOMO_OK ? cuda_begin_projections(plan, err) : st;
}

/* Send the current bank's frames to the GPUs and start gathering in the
 * other bank. */
extern "C" rtomo_status cuda_fbp_flush_bank(cuda_fbp_impl *impl, rtomo_error *err)
{
    cuda_fbp_bank *bank = &impl->banks[impl->current];
    if (bank->count == 0)
        return RTOMO_OK;
    rtomo_status st = cuda_fbp_filter_enqueue(impl, impl->current, err);
    bank->count = 0;
    impl->current ^= 1;
    return st;
}

/* A bank holds frames of one sample type, each projection at most once
 * (a frame fed again must land after the one it replaces). */
static int bank_accepts(const cuda_fbp_bank *bank, int index, rtomo_dtype dtype)
{
    if (bank->count == 0)
        return 1;
    if (bank->dtype != dtype)
        return 0;
    for (int i = 0; i < bank->count; i++)
        if (bank->index[i] == index)
            return 0;
    return 1;
}

static rtomo_status cuda_add_projection(rtomo_fbp *plan, int index,
                                        const void *frame, rtomo_dtype dtype,
                                        rtomo_error *err)
{
    cuda_fbp_impl *impl = impl_of(plan);
    rtomo_status st;
    if (!bank_accepts(&impl->banks[impl->current], index, dtype) &&
        (st = cuda_fbp_flush_bank(impl_of(plan), err)) != RTOMO_OK)
        return st;
    cuda_fbp_bank *bank = &impl->banks[impl->current];
    if (bank->count == 0) {
        /* Reuse the bank only once the GPUs are done with its last use. */
        st = cuda_fbp_filter_wait_bank(impl, impl->current, err);
        collect_filter_time(plan);
        if (st != RTOMO_OK)
            return st;
    }
    const rtomo_fbp_geometry *g = &plan->geom;
    const size_t line = (size_t)g->det_width * rtomo_dtype_size(dtype);
    const size_t bytes = (size_t)rtomo_fbp_phase_input_rows(plan) * line;
    char *staged = (char *)bank->staging + (size_t)bank->count * bytes;
    if (plan->phase.on)
        cuda_fbp_phase_stage(impl, frame, line, staged);
    else
        stage_rows(impl, (const char *)frame + (size_t)g->row_first * line, line,
                   staged);
    bank->dtype = dtype;
    bank->index[bank->count++] = index;
    plan->stats.projections_filtered++;
    if (bank->count == impl->bank_frames)
        return cuda_fbp_flush_bank(impl_of(plan), err);
    return RTOMO_OK;
}

static rtomo_status cuda_sync(rtomo_fbp *plan, rtomo_error *err)
{
    cuda_fbp_impl *impl = impl_of(plan);
    rtomo_status st = cuda_fbp_flush_bank(impl_of(plan), err);
    for (int bank = 0; bank < 2 && st == RTOMO_OK; bank++)
        st = cuda_fbp_filter_wait_bank(impl, bank, err);
    collect_filter_time(plan);
    for (int i = 0; i < impl->n_slots && st == RTOMO_OK; i++) {
        RTOMO_CUDA_TRY(err, cudaSetDevice(impl->slots[i].device));
        RTOMO_CUDA_TRY(err, cudaStreamSynchronize(impl->slots[i].compute));
    }
    return st;
}

/* The slot holding kept row `row`. */
static cuda_fbp_slot *slot_of(cuda_fbp_impl *impl, int row)
{
    return &impl->slots[fbp_partition_owner(&impl->deal, row)];
}

static rtomo_status cuda_set_filtered(rtomo_fbp *plan, int kept_row, int rows,
                                      const float *sinograms, rtomo_error *err)
{
    rtomo_status st = cuda_sync(plan, err);
    if (st != RTOMO_OK)
        return st;
    cuda_fbp_impl *impl = impl_of(plan);
    /* Every slot is written: after every streaming chunk that reads one. */
    if ((st = cuda_fbp_stream_before_write(impl, NULL, 0, err)) != RTOMO_OK)
        return st;
    const size_t line = (size_t)plan->geom.det_width * sizeof(float);
    const size_t per_row = (size_t)plan->geom.n_proj;
    for (int r = kept_row; r < kept_row + rows;) {
        cuda_fbp_slot *slot = slot_of(impl, r);
        const int n = fbp_partition_run(&impl->deal, r, kept_row + rows);
        const int local = fbp_partition_local(&impl->deal, r);
        RTOMO_CUDA_TRY(err, cudaSetDevice(slot->device));
        /* A run's rows are consecutive in both layouts, so one 2-D copy of
         * n * n_proj lines moves them all.  On the compute stream, which
         * is the one that reads them. */
        RTOMO_CUDA_TRY(err, cudaMemcpy2DAsync(
            (char *)slot->sino + cuda_fbp_row_offset(slot, plan, local),
            slot->sino_pitch, sinograms + (size_t)(r - kept_row) * per_row * plan->geom.det_width,
            line, line, (size_t)n * per_row, cudaMemcpyHostToDevice, slot->compute));
        r += n;
    }
    /* The caller's array must outlive the copies. */
    for (int i = 0; i < impl->n_slots; i++) {
        RTOMO_CUDA_TRY(err, cudaSetDevice(impl->slots[i].device));
        RTOMO_CUDA_TRY(err, cudaStreamSynchronize(impl->slots[i].compute));
    }
    return RTOMO_OK;
}

static rtomo_status cuda_get_filtered(rtomo_fbp *plan, int kept_row,
                                      float *sinogram, rtomo_error *err)
{
    rtomo_status st = cuda_sync(plan, err);
    if (st != RTOMO_OK)
        return st;
    cuda_fbp_impl *impl = impl_of(plan);
    cuda_fbp_slot *slot = slot_of(impl, kept_row);
    const int local = fbp_partition_local(&impl->deal, kept_row);
    const size_t line = (size_t)plan->geom.det_width * sizeof(float);
    RTOMO_CUDA_TRY(err, cudaSetDevice(slot->device));
    RTOMO_CUDA_TRY(err, cudaMemcpy2DAsync(
        sinogram, line,
        (const char *)slot->sino + cuda_fbp_row_offset(slot, plan, local),
        slot->sino_pitch, line, (size_t)plan->geom.n_proj, cudaMemcpyDeviceToHost,
        slot->compute));
    RTOMO_CUDA_TRY(err, cudaStreamSynchronize(slot->compute));
    return RTOMO_OK;
}

/* ----------------------------------------------------- reconstruction ---- */

/* Split the requested rows by slot: jobs[i] gets slot i's rows (local
 * indices, in request order, so that a slab's groups of 4 pack as on one
 * device) and their places in the output; each slot's count is kept for
 * the test hook.  `lists` holds 2 * n_rows ints. */
static void assign_rows(cuda_fbp_impl *impl, const int *kept_rows, int n_rows,
                        int *lists, cuda_fbp_recon_job *jobs)
{
    for (int i = 0; i < impl->n_slots; i++)
        impl->slots[i].rows_last_call = 0;
    for (int k = 0; k < n_rows; k++)
        slot_of(impl, kept_rows[k])->rows_last_call++;
    /* Each slot's lists start where the previous slot's end. */
    int *rows[RTOMO_MAX_DEVICES * MAX_SPLIT], *targets[RTOMO_MAX_DEVICES * MAX_SPLIT];
    int used = 0;
    for (int i = 0; i < impl->n_slots; i++) {
        rows[i] = lists + used;
        targets[i] = lists + n_rows + used;
        jobs[i].rows = rows[i];
        jobs[i].targets = targets[i];
        jobs[i].n_rows = 0;
        used += impl->slots[i].rows_last_call;
    }
    for (int k = 0; k < n_rows; k++) {
        const int i = slot_of(impl, kept_rows[k])->index;
        rows[i][jobs[i].n_rows] = fbp_partition_local(&impl->deal, kept_rows[k]);
        targets[i][jobs[i].n_rows] = k;
        jobs[i].n_rows++;
    }
}

/* Resolve the configuration on the slot with the most rows to do. */
static rtomo_status resolve_config(cuda_fbp_impl *impl, cuda_fbp_recon_job *jobs,
                                   cuda_fbp_config *cfg, rtomo_error *err)
{
    int best = 0;
    for (int i = 1; i < impl->n_slots; i++)
        if (jobs[i].n_rows > jobs[best].n_rows)
            best = i;
    RTOMO_CUDA_TRY(err, cudaSetDevice(impl->slots[best].device));
    return cuda_fbp_autotune(impl, &impl->slots[best], jobs[best].rows,
                             jobs[best].n_rows, cfg, err);
}

static rtomo_status cuda_reconstruct(rtomo_fbp *plan, const int *kept_rows,
                                     int n_rows, float *out, rtomo_error *err)
{
    cuda_fbp_impl *impl = impl_of(plan);
    rtomo_status st = cuda_sync(plan, err);
    if (st != RTOMO_OK)
        return st;
    int *lists = (int *)malloc(sizeof(int) * 2 * (size_t)n_rows);
    cuda_fbp_recon_job *jobs = (cuda_fbp_recon_job *)calloc((size_t)impl->n_slots,
                                                            sizeof *jobs);
    if (!lists || !jobs) {
        free(lists);
        free(jobs);
        return rtomo_set_error(err, RTOMO_E_NOMEM, "out of memory");
    }
    assign_rows(impl, kept_rows, n_rows, lists, jobs);
    cuda_fbp_config cfg;
    st = resolve_config(impl, jobs, &cfg, err);
    if (st == RTOMO_OK) {
        for (int i = 0; i < impl->n_slots; i++) {
            jobs[i].plan = plan;
            jobs[i].impl = impl;
            jobs[i].cfg = cfg;
            jobs[i].out = out;
            impl->slots[i].backproject_seconds = 0.0;
        }
        st = cuda_fbp_workers_run(impl, cuda_fbp_recon_run, jobs, sizeof *jobs, err);
        /* Every slot has its own worker thread and all of them run at
         * once (cuda_fbp_workers_run), so the call's back-projection time
         * is the longest slot's: the wall time of the concurrent part,
         * less any time a device waited for its worker. */
        double longest = 0.0;
        for (int i = 0; i < impl->n_slots; i++)
            if (impl->slots[i].backproject_seconds > longest)
                longest = impl->slots[i].backproject_seconds;
        plan->stats.backproject_seconds += longest;
    }
    free(lists);
    free(jobs);
    return st;
}

/* ---------------------------------------------------------- test hook ---- */

extern "C" int rtomo_cuda_fbp_debug_slots(const rtomo_fbp *plan,
                                          rtomo_cuda_fbp_debug_slot *slots,
                                          int capacity)
{
    if (!plan || plan->ops != &rtomo_cuda_fbp_ops || !plan->impl)
        return -1;
    const cuda_fbp_impl *impl = impl_of(plan);
    for (int i = 0; i < impl->n_slots && i < capacity; i++) {
        slots[i].device = impl->slots[i].device;
        slots[i].rows_owned = impl->slots[i].row_count;
        slots[i].rows_last_call = impl->slots[i].rows_last_call;
    }
    return impl->n_slots;
}

extern "C" const rtomo_fbp_backend_ops rtomo_cuda_fbp_ops = {
    "cuda",
    cuda_create,
    cuda_destroy,
    cuda_begin_projections,
    cuda_add_projection,
    cuda_set_filtered,
    cuda_get_filtered,
    cuda_sync,
    cuda_reconstruct,
    cuda_fbp_clear_projection,
    cuda_fbp_stream_open,
    cuda_fbp_stream_apply,
    cuda_fbp_stream_read,
    cuda_fbp_stream_reset,
    cuda_fbp_stream_close,
    cuda_fbp_stream_chunk,
    cuda_fbp_reconstruct_plane,
    cuda_fbp_stream_idle,
    cuda_update_flat_field,
    cuda_fbp_remove_rings,
    cuda_fbp_add_offsets,
};
