/*
 * cuda_fbp.h — what the files of the CUDA FBP backend share: the state of a
 * plan on its devices, the back-projection launch description that every
 * kernel family takes, and the entry points of the filter, pipeline,
 * worker-thread and autotune files.  Private to the CUDA backend (only .cu
 * files include it).
 *
 * Shape of a plan
 *   The kept detector rows are dealt to "slots" in groups of 4 consecutive
 *   rows (fbp_partition.h), so that every request, a slab of consecutive
 *   slices above all, is shared by all slots; a slot is one CUDA device
 *   (more slots per device only under the test hook RTOMO_CUDA_FBP_SPLIT,
 *   see cuda_fbp_backend.cu).  Every slot holds the filtered sinograms of
 *   its rows in its local order, three streams (upload, compute, download)
 *   and a host worker thread that runs its share of each reconstruction.
 *
 *   Frames are staged on the host in "staged order": slot 0's rows in its
 *   local order, then slot 1's, and so on, so that each slot uploads one
 *   contiguous part of every staged frame.
 */
#ifndef RTOMO_CUDA_FBP_H
#define RTOMO_CUDA_FBP_H

#include <pthread.h>
#include <stddef.h>

#include <cuda_runtime.h>
#include <cufft.h>

#include "cuda_common.h"
#include "fbp_partition.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Texture groups (of 1, 2 or 4 sinograms each) back-projected by one launch. */
#define CUDA_FBP_MAX_GROUPS 16
/* Every back-projection kernel runs 256-thread blocks. */
#define CUDA_FBP_BLOCK_THREADS 256
/* Default projections per texture (a pitch-linear texture holds at most
 * maxTexture2DLinear[1] rows, 65000 on current GPUs); longer scans are
 * back-projected in chunks that add into the output. */
#define CUDA_FBP_TEXTURE_CHUNK 32768

/* Frames gathered into one staging bank and filtered by one batch of
 * transforms, at most (small frames: amortise transfers and launches). */
#define CUDA_FBP_MAX_BANK_FRAMES 64
/* Pixels of kept rows per bank that make a batch worth its launches. */
#define CUDA_FBP_BANK_PIXELS ((size_t)1 << 22)

/* ------------------------------------------------------------ formats ---- */

/* How the sinograms of one pass are stored for back-projection: `slices`
 * sinograms interleaved per texel, as float32 or float16. */
typedef struct cuda_fbp_format {
    int slices;                 /* 1, 2 or 4 */
    rtomo_precision precision;
} cuda_fbp_format;

/* Bytes of one texel of format f. */
size_t cuda_fbp_texel_bytes(cuda_fbp_format f);

/* A resolved back-projection configuration (nothing left on AUTO). */
typedef struct cuda_fbp_config {
    rtomo_bp_kernel kernel;     /* STANDARD, TEXTURE, ALU or HYBRID */
    cuda_fbp_format format;
    int tile;                   /* ALU and hybrid: block tile edge, 32 or 64 */
    double hybrid_ratio;        /* hybrid: fraction of blocks on the texture
                                   path, in (0, 1) */
    double stored_ratio;        /* hybrid, half nearest: fraction of the
                                   ALU-path blocks whose cache holds the
                                   texels as stored (cuda_fbp_alu_block.h),
                                   in [0, 1] */
} cuda_fbp_config;

/* Edge of the square pixel tile one block of `cfg` reconstructs. */
int cuda_fbp_config_tile(const cuda_fbp_config *cfg);

/* ------------------------------------------------- back-projection ---- */

/*
 * One back-projection launch: n_groups groups of `cfg.format.slices`
 * sinograms, each reconstructed into that many consecutive output images of
 * roi_h x roi_w floats (group g, slice s at out + (g*slices + s)*roi_h*roi_w).
 * Pixel (x, y) of the slice grid (x = roi_x + column) sees projection p at
 *     s = proj[p].z + (x - center) proj[p].x - (y - center) proj[p].y
 * with proj[p] = {cos a_p, sin a_p, axis + axis_shift[p], 0}.
 */
/*
 * How a launch adds its sums into what `out` holds (later projection
 * chunks).  LOAD: the tile kernels start each pixel's sums from the stored
 * value (cuda_fbp_device.h, start_pixel), the other kernels add it when
 * they store.  REDUCE: every kernel sums from zero and adds its sums at the
 * end with a reduction (red.global.add.f32) that the L2 cache carries
 * out, so no thread ever waits for the stored value: the read-modify-write
 * of the accumulators then overlaps the next blocks' projections instead
 * of holding each block up (streaming's per-chunk cost, cuda_fbp_stream.cu).
 * Each pixel is written by one thread per launch and launches are ordered
 * on their stream, so REDUCE is as deterministic as LOAD; the sums differ
 * only in where the stored value enters them.
 */
typedef enum cuda_fbp_accumulate {
    CUDA_FBP_OVERWRITE = 0,
    CUDA_FBP_ACCUMULATE_LOAD,
    CUDA_FBP_ACCUMULATE_REDUCE
} cuda_fbp_accumulate;

typedef struct cuda_fbp_launch {
    const float4 *proj;         /* device: constants of this launch's
                                   projections */
    int n_proj;                 /* projections in this launch */
    int det_width;
    float center;               /* (slice_size - 1) / 2 */
    int roi_x, roi_y, roi_w, roi_h;
    cuda_fbp_accumulate accumulate; /* overwrite out, or add into it
                                   (later projection chunks) and how */
    rtomo_interp interp;
    cuda_fbp_config cfg;
    int n_groups;
    /* Per group: the packed sinograms as a texture (border address mode,
     * filter mode from interp) and as plain memory for the ALU path, both
     * starting at this launch's first projection. */
    cudaTextureObject_t tex[CUDA_FBP_MAX_GROUPS];
    const void *data[CUDA_FBP_MAX_GROUPS];
    size_t pitch;               /* bytes between projections in data */
    const unsigned *absmax;     /* device, per group: bits of the largest
                                   |value| packed to half (scale source);
                                   NULL for float formats */
    float *out;                 /* device */
    unsigned *sm_counters;      /* hybrid: one counter per SM (device) */
    /* Circular field of view (fbp_fov.h): grid pixel (x, y) is inside iff
     * (2x - fov_span)^2 + (2y - fov_span)^2 <= fov_limit; fov_limit < 0:
     * the whole grid.  Outside pixels are written 0 when the launch
     * overwrites and left alone when it adds (cuda_fbp_device.h). */
    long long fov_limit;        /* the plan's fov_limit */
    int fov_span;               /* slice_size - 1 */
} cuda_fbp_launch;

/* The four kernel families; each checks its launch and returns errors. */
rtomo_status cuda_fbp_bp_standard(const cuda_fbp_launch *l, cudaStream_t s,
                                  rtomo_error *err);
rtomo_status cuda_fbp_bp_texture(const cuda_fbp_launch *l, cudaStream_t s,
                                 rtomo_error *err);
rtomo_status cuda_fbp_bp_alu(const cuda_fbp_launch *l, cudaStream_t s,
                             rtomo_error *err);
rtomo_status cuda_fbp_bp_hybrid(const cuda_fbp_launch *l, cudaStream_t s,
                                rtomo_error *err);

/* Number of per-SM counters the hybrid kernel may touch (>= SM count). */
#define CUDA_FBP_MAX_SMS 1024

/* ------------------------------------------------------------- slots ---- */

/* Filtering state of one slot (cuda_fbp_filter.cu). */
typedef struct cuda_fbp_filter_state {
    int pairs;                  /* complex rows per frame: two real rows each */
    int length;                 /* padded row length (plan->filter_length) */
    cufftHandle fft;            /* bank_frames x pairs transforms */
    int have_fft;
    cufftComplex *spectrum;     /* bank_frames x pairs x length */
    float *coeffs;              /* length filter coefficients */
    float *dark, *flat;         /* rows x det_width, when normalising */
    void *raw[2];               /* bank_frames x rows x det_width x 4 bytes */
    cudaEvent_t uploaded[2], consumed[2], start[2], done[2];
    int pending[2];             /* start/done of bank j not yet read */
} cuda_fbp_filter_state;

/* Reconstruction state of one slot (cuda_fbp_pipeline.cu). */
typedef struct cuda_fbp_recon_state {
    float4 *proj;               /* n_proj projection constants */
    unsigned *absmax;           /* CUDA_FBP_MAX_GROUPS */
    unsigned *sm_counters;      /* CUDA_FBP_MAX_SMS */
    /* Packed sinograms: `pool_groups` buffers of the current format. */
    char *pool;
    size_t pool_bytes, pool_buffer_bytes, pool_pitch;
    int pool_groups;
    cuda_fbp_format pool_format;
    /* Texture objects over the pool: [group][chunk][interp], 0 = none yet. */
    cudaTextureObject_t *textures;
    int texture_count;
    /* Double-buffered output: device and pinned host. */
    float *dev_out[2];
    float *host_out[2];
    size_t out_bytes;
    cudaEvent_t bp_start[2], bp_end[2], downloaded[2];
} cuda_fbp_recon_state;

/* Pinned entries (projection constants and gather lists of one chunk)
 * that a slot's streaming applies use in turn: the host may run this many
 * chunks ahead of the GPU before it waits for one. */
#define CUDA_FBP_STREAM_RING 32

/* Resident slices of one slot (cuda_fbp_stream.cu).  The slot's open rows
 * (ascending) form groups of cfg.format.slices, as in one reconstruct
 * call: group g, slice s accumulates in image g*slices + s of `acc`, the
 * layout of cuda_fbp_launch's `out`, so one launch over consecutive groups
 * writes consecutive images. */
typedef struct cuda_fbp_stream_state {
    cudaStream_t work;          /* the chunks, resets and reads' start:
                                   apart from the compute stream, so that
                                   frames are filtered while chunks run */
    cudaEvent_t filtered;       /* the compute stream's place when a chunk
                                   starts: the frames it reads are in */
    unsigned *sm_counters;      /* the hybrid kernel's, for this stream */
    void *stats_dev, *stats_host;   /* a read's image statistics partials */
    size_t stats_bytes;
    cudaEvent_t stats_done;
    int n_rows;                 /* open rows this slot holds */
    int *rows;                  /* their slot-local rows */
    int groups;
    int batch;                  /* groups per launch */
    float *acc;                 /* groups x slices images of the stream ROI */
    size_t acc_bytes;
    /* Packed chunk: `batch` buffers of `chunk` projections each. */
    char *pool;
    size_t pool_pitch, pool_buffer_bytes;
    cudaTextureObject_t *textures;  /* [buffer][projections - 1], 0 = none yet */
    int texture_count;
    unsigned *absmax;           /* CUDA_FBP_MAX_GROUPS */
    char *block;                /* device: the running chunk's entry */
    char *ring;                 /* pinned: CUDA_FBP_STREAM_RING entries */
    cudaEvent_t start[CUDA_FBP_STREAM_RING], end[CUDA_FBP_STREAM_RING];
    unsigned char used[CUDA_FBP_STREAM_RING];   /* end not yet read */
    cudaEvent_t ready;          /* a read's place in the compute stream */
    /* After each launch (batch of groups) of the latest chunk: a read
     * downloads a slab once the launch that finishes its images is done,
     * while the chunk's later launches still run.  Valid while chunk_last
     * (the latest work on the slices was a chunk, not a reset). */
    cudaEvent_t *batch_done;
    int n_batches, chunk_last;
    cudaEvent_t downloaded[2];  /* a read's output buffers */
    cudaEvent_t origin;         /* timed, at open: the trace's zero */
} cuda_fbp_stream_state;

typedef struct cuda_fbp_phase_state cuda_fbp_phase_state;

typedef struct cuda_fbp_slot {
    int index;                  /* slot number: its part of the deal */
    int device;                 /* CUDA ordinal */
    int row_count;              /* kept rows it owns */
    int stage_row;              /* where its rows start in a staged frame */
    int rows_last_call;         /* rows of the latest reconstruct call */
    int sm_count;
    cudaStream_t upload, compute, download;
    float *sino;                /* row_count x n_proj x sino_pitch bytes */
    size_t sino_pitch;          /* bytes between projections of a row */
    cuda_fbp_filter_state filter;
    cuda_fbp_phase_state *phase;    /* phase retrieval, or NULL */
    cuda_fbp_recon_state recon;
    cuda_fbp_stream_state stream;
    struct cuda_fbp_rings *rings;   /* ring removal sums (cuda_fbp_rings.cu);
                                       NULL until the first frame */
    /* Engine-measured seconds of this slot, added into the plan's stats by
     * the caller thread. */
    double filter_seconds, backproject_seconds;
    /* Worker thread (cuda_fbp_workers.cu). */
    pthread_t thread;
    int thread_started;
    pthread_mutex_t lock;
    pthread_cond_t wake, idle;
    int has_job, quit;
    rtomo_status (*job)(struct cuda_fbp_slot *slot, void *arg,
                        rtomo_error *err);
    void *job_arg;
    rtomo_status job_status;
    rtomo_error job_error;
} cuda_fbp_slot;

/* Parallel host copies (cuda_fbp_copy.cu). */
typedef struct cuda_fbp_copy_segment {
    void *dst;
    const void *src;
    size_t bytes;
} cuda_fbp_copy_segment;
typedef struct cuda_fbp_copier cuda_fbp_copier;

/* A pool of helper threads for large copies (NULL on failure: callers then
 * copy alone). */
cuda_fbp_copier *cuda_fbp_copier_create(void);
void cuda_fbp_copier_destroy(cuda_fbp_copier *c);
/* Copy every segment; large jobs are split over the helpers.  Thread-safe
 * (concurrent callers take turns).  c may be NULL. */
void cuda_fbp_copy(cuda_fbp_copier *c, const cuda_fbp_copy_segment *segs,
                   int n_segs);

/* One run of the staged order: `rows` consecutive kept rows from
 * `kept_row` on, at consecutive local indices of one slot, which go to
 * staged row `staged_row` on. */
typedef struct cuda_fbp_stage_run {
    int kept_row, staged_row, rows;
} cuda_fbp_stage_run;

/* Host side of one staging bank: up to bank_frames frames' kept rows (in
 * staged order), in pinned memory shared by all slots. */
typedef struct cuda_fbp_bank {
    void *staging;
    int count;                  /* frames waiting in it */
    rtomo_dtype dtype;          /* of all of them */
    int index[CUDA_FBP_MAX_BANK_FRAMES];
} cuda_fbp_bank;

/* The plan-wide part of the resident slices (cuda_fbp_stream.cu). */
typedef struct cuda_fbp_stream_plan {
    int open;
    cuda_fbp_config cfg;        /* resolved at open */
    rtomo_interp interp;        /* fixed at open */
    int roi[4];                 /* x, y, width, height, fixed at open */
    int chunk;                  /* projections per packed chunk, at most */
    size_t entry_bytes;         /* one ring entry: constants, lines, weights */
    int *pos_slot, *pos_image;  /* where open position i lives */
    int n_pos;
    int ring_next, ring_oldest, ring_pending;   /* entries in flight */
    /* Which chunk read each projection slot last (0 = none), so that a
     * write to the slot (filtering, clearing) waits for that chunk. */
    unsigned long long chunk_seq;               /* chunks enqueued */
    unsigned long long entry_seq[CUDA_FBP_STREAM_RING];
    unsigned long long *reader;                 /* n_proj */
    /* RTOMO_CUDA_FBP_STREAM_TRACE=1: each chunk's host and GPU times
     * (seconds after open) go to stderr when it is retired. */
    int trace;
    /* How chunks add into the accumulators (RTOMO_CUDA_FBP_STREAM_
     * ACCUMULATE=load|reduce, read at open; reduce by default). */
    cuda_fbp_accumulate accumulate;
    double host_origin;
    double entry_host[CUDA_FBP_STREAM_RING];    /* enqueued, host clock */
    int entry_n[CUDA_FBP_STREAM_RING];          /* projections */
} cuda_fbp_stream_plan;

/* The CUDA backend's plan->impl. */
typedef struct cuda_fbp_impl {
    rtomo_fbp *plan;
    int n_slots;
    cuda_fbp_slot *slots;
    fbp_partition deal;         /* kept rows to slots (parts = n_slots) */
    /* Kept order to staged order: n_stage_runs runs, and as many copy
     * segments of scratch for staging one frame. */
    cuda_fbp_stage_run *stage_runs;
    cuda_fbp_copy_segment *stage_segs;
    int n_stage_runs;
    cuda_fbp_copier *copier;
    /* Double-buffered staging: frames gather in banks[current] while the
     * other bank's frames upload and filter. */
    cuda_fbp_bank banks[2];
    int bank_frames;
    int current;
    int texture_chunk;          /* projections per texture */
    char device_name[256];      /* of slot 0: the autotune cache key */
    cuda_fbp_stream_plan stream;
} cuda_fbp_impl;

/* Byte offset of row `r` (slot-local) in slot->sino. */
static inline size_t cuda_fbp_row_offset(const cuda_fbp_slot *slot,
                                         const rtomo_fbp *plan, int r)
{
    return (size_t)r * (size_t)plan->geom.n_proj * slot->sino_pitch;
}

/* ---------------------------------------------------- worker threads ---- */

/* Start the worker thread of a slot (it selects the slot's device). */
rtomo_status cuda_fbp_worker_start(cuda_fbp_slot *slot, rtomo_error *err);
/* Stop and join it (no-op when it never started). */
void cuda_fbp_worker_stop(cuda_fbp_slot *slot);
/* Run fn(slot, args[i]) on the worker of every slot concurrently and wait
 * for all; arg_stride bytes separate consecutive slots' arguments (0 = the
 * same argument for all).  Returns the first failure in slot order. */
rtomo_status cuda_fbp_workers_run(cuda_fbp_impl *impl,
                                  rtomo_status (*fn)(cuda_fbp_slot *, void *,
                                                     rtomo_error *),
                                  void *args, size_t arg_stride,
                                  rtomo_error *err);

/* --------------------------------------------------------- filtering ---- */

/* Frames per staging bank for this plan's frame size. */
int cuda_fbp_bank_frames(const rtomo_fbp *plan);
/* Allocate the filter state of a slot (on its device), for banks of
 * `frames` frames. */
rtomo_status cuda_fbp_filter_init(cuda_fbp_slot *slot, const rtomo_fbp *plan,
                                  int frames, rtomo_error *err);
void cuda_fbp_filter_free(cuda_fbp_slot *slot);
/* Device bytes cuda_fbp_filter_init will allocate for `rows` rows. */
size_t cuda_fbp_filter_bytes(const rtomo_fbp *plan, int rows, int frames);
/* Upload the averaged dark and flat of the slot's rows: slot->row_count
 * rows of det_width floats each, in the slot's local order. */
rtomo_status cuda_fbp_filter_set_flat_field(cuda_fbp_slot *slot,
                                            const rtomo_fbp *plan,
                                            const float *dark,
                                            const float *flat,
                                            rtomo_error *err);
/* Send the frames gathering in the current staging bank to the GPUs
 * (cuda_fbp_filter_enqueue) and start gathering in the other bank. */
rtomo_status cuda_fbp_flush_bank(cuda_fbp_impl *impl, rtomo_error *err);
/* Queue upload, normalisation and filtering of the frames in staging bank
 * `bank` on every slot.  Asynchronous. */
rtomo_status cuda_fbp_filter_enqueue(cuda_fbp_impl *impl, int bank,
                                     rtomo_error *err);
/* Wait until bank `bank` of every slot is free again, adding the timing of
 * the work that used it to the slots' filter_seconds. */
rtomo_status cuda_fbp_filter_wait_bank(cuda_fbp_impl *impl, int bank,
                                       rtomo_error *err);

/* --------------------------------------------------- phase retrieval ---- */

/* cuda_fbp_phase.cu; everything is a no-op without plan->phase.on.  With
 * it, a staged frame holds the phase rows (fbp_phase.h) in detector order
 * and every slot uploads all of them. */
/* Device bytes of cuda_fbp_phase_init for banks of `frames` frames. */
size_t cuda_fbp_phase_bytes(const rtomo_fbp *plan, int frames);
/* Allocate the padded array, cuFFT plans and row map of a slot (on its
 * worker; plan->impl's deal already made). */
rtomo_status cuda_fbp_phase_init(cuda_fbp_slot *slot, const rtomo_fbp *plan,
                                 int frames, rtomo_error *err);
void cuda_fbp_phase_free(cuda_fbp_slot *slot);
/* Upload plan->phase.dark / flat, ordered after the frames queued. */
rtomo_status cuda_fbp_phase_set_flat_field(cuda_fbp_slot *slot,
                                           const rtomo_fbp *plan,
                                           rtomo_error *err);
/* Copy a raw frame's phase rows (lines of `line` bytes) to `staged`. */
void cuda_fbp_phase_stage(cuda_fbp_impl *impl, const void *frame, size_t line,
                          void *staged);
/* Enqueue on the compute stream: the bank's `frames` raw frames (phase
 * rows, on the device) to the slot's rows' line integrals packed into
 * filter.spectrum, as the plain packing does. */
rtomo_status cuda_fbp_phase_pack(cuda_fbp_slot *slot, const rtomo_fbp *plan,
                                 const void *raw, int frames,
                                 rtomo_dtype dtype, rtomo_error *err);

/* Multiply `rows` rows of `length` spectrum values by the filter
 * coefficients, on `stream` (cuda_fbp_filter.cu; ring removal's offsets
 * use it too).  The caller checks the launch. */
void cuda_fbp_apply_filter(cufftComplex *spectrum, const float *coeffs,
                           int length, int rows, cudaStream_t stream);

/* ------------------------------------------------------ ring removal ---- */

typedef struct cuda_fbp_rings cuda_fbp_rings;
/* With geom.rings: add the `frames` frames just packed into the slot's
 * filter spectrum (line integrals) to its sums, on its compute stream. */
rtomo_status cuda_fbp_rings_accumulate(cuda_fbp_slot *slot,
                                       const rtomo_fbp *plan, const int *index,
                                       int frames, rtomo_error *err);
void cuda_fbp_rings_free(cuda_fbp_slot *slot);
/* The backend ops (engine_internal.h). */
rtomo_status cuda_fbp_remove_rings(rtomo_fbp *plan, rtomo_error *err);
rtomo_status cuda_fbp_add_offsets(rtomo_fbp *plan, const float *offsets,
                                  const float *weights, rtomo_error *err);

/* ---------------------------------------------------------- pipeline ---- */

rtomo_status cuda_fbp_recon_init(cuda_fbp_slot *slot, const rtomo_fbp *plan,
                                 rtomo_error *err);
void cuda_fbp_recon_free(cuda_fbp_slot *slot);

/* The work of one slot in a reconstruct call. */
typedef struct cuda_fbp_recon_job {
    const rtomo_fbp *plan;
    const cuda_fbp_impl *impl;
    cuda_fbp_config cfg;
    const int *rows;            /* slot-local rows to reconstruct ... */
    const int *targets;         /* ... into output images out[targets[i]] */
    int n_rows;
    float *out;
} cuda_fbp_recon_job;

/* Upload the current projection constants (angles, axis, shifts). */
rtomo_status cuda_fbp_upload_constants(cuda_fbp_slot *slot,
                                       const rtomo_fbp *plan,
                                       rtomo_error *err);
/* Reconstruct a job's rows (runs on the slot's worker thread). */
rtomo_status cuda_fbp_recon_run(cuda_fbp_slot *slot, void *job,
                                rtomo_error *err);
/* Pack `n_rows` slot-local rows (in groups of cfg's slices) and
 * back-project them once into recon.dev_out[0] on the compute stream,
 * without downloading; for the autotuner.  *groups_out gets the number of
 * groups.  The ROI is the plan's unless roi is given ({x, y, w, h}). */
rtomo_status cuda_fbp_recon_batch(cuda_fbp_slot *slot, const rtomo_fbp *plan,
                                  const cuda_fbp_impl *impl,
                                  const cuda_fbp_config *cfg, const int *rows,
                                  int n_rows, const int *roi, rtomo_error *err);
/* Groups per launch for cfg at the plan's ROI (bounded by `groups`). */
int cuda_fbp_batch_groups(const cuda_fbp_slot *slot, const rtomo_fbp *plan,
                          const cuda_fbp_config *cfg, int roi_w, int roi_h,
                          int groups);

/* Pieces of the pipeline that the streaming back-projection reuses. */

/* One packing: `groups` groups of format.slices sinogram rows (slot-local,
 * -1 = none: zeros) into pool buffers pool + g*buffer_bytes, projection p
 * at + p*pitch.  Packed projection p is sinogram line lines[p] (p when
 * lines is NULL) times weights[p] (1 when NULL); both are device arrays
 * of n_proj entries.  Half formats scale each group by its largest
 * magnitude among the packed values (absmax: device, one per group). */
typedef struct cuda_fbp_pack_job {
    cuda_fbp_format format;
    const int *rows;
    int groups;
    int n_proj;
    const int *lines;
    const float *weights;
    char *pool;
    size_t buffer_bytes, pitch;
    unsigned *absmax;
    cudaStream_t stream;        /* where it runs: 0 = the slot's compute
                                   stream */
} cuda_fbp_pack_job;

/* Enqueue a packing on job->stream (the slot's compute stream when 0). */
rtomo_status cuda_fbp_pack(const cuda_fbp_slot *slot, const rtomo_fbp *plan,
                           const cuda_fbp_pack_job *job, rtomo_error *err);
/* Bytes between projections of a packed buffer of format f (a multiple of
 * every texture alignment). */
size_t cuda_fbp_pack_pitch(const rtomo_fbp *plan, cuda_fbp_format f);
/* A texture over `height` packed projections at `base` (border address
 * mode, filtering from interp). */
rtomo_status cuda_fbp_texture(void *base, cuda_fbp_format f, int width,
                              int height, size_t pitch, rtomo_interp interp,
                              cudaTextureObject_t *out, rtomo_error *err);
/* Launch l with the kernel family of l->cfg. */
rtomo_status cuda_fbp_backproject(const cuda_fbp_launch *l, cudaStream_t s,
                                  rtomo_error *err);
/* {cos a_p, sin a_p, axis + axis_shift[p], 0} from the plan's current
 * angles and shifts. */
float4 cuda_fbp_projection_constants(const rtomo_fbp *plan, int p);
/* Grow the slot's double-buffered output (device and pinned host) to at
 * least `bytes` each. */
rtomo_status cuda_fbp_ensure_output(cuda_fbp_slot *slot, size_t bytes,
                                    rtomo_error *err);

/* ---------------------------------------------------------- autotune ---- */

/* ------------------------------------------ streaming, planes, slots ---- */

/* The CUDA side of the backend ops of the same names (engine_internal.h):
 * resident slices in device memory (cuda_fbp_stream.cu), planes of any
 * orientation (cuda_fbp_plane.cu). */
rtomo_status cuda_fbp_clear_projection(rtomo_fbp *plan, int index,
                                       rtomo_error *err);
rtomo_status cuda_fbp_stream_open(rtomo_fbp *plan, const int *kept_rows,
                                  int n_rows, rtomo_error *err);
rtomo_status cuda_fbp_stream_apply(rtomo_fbp *plan, const int *slots,
                                   const float *weights, int n,
                                   rtomo_error *err);
rtomo_status cuda_fbp_stream_read(rtomo_fbp *plan, const int *positions,
                                  int n, float *out, double *stats,
                                  rtomo_error *err);
rtomo_status cuda_fbp_stream_reset(rtomo_fbp *plan, rtomo_error *err);
/* Before the compute stream writes projection slots slots[0..n-1] (NULL:
 * any slot): make it wait for the last chunk that reads one of them. */
rtomo_status cuda_fbp_stream_before_write(cuda_fbp_impl *impl, const int *slots,
                                          int n, rtomo_error *err);
void cuda_fbp_stream_close(rtomo_fbp *plan);
int cuda_fbp_stream_chunk(const rtomo_fbp *plan);
int cuda_fbp_stream_idle(const rtomo_fbp *plan);
rtomo_status cuda_fbp_reconstruct_plane(rtomo_fbp *plan,
                                        const rtomo_fbp_plane *plane,
                                        const int *slots, int n_slots,
                                        float *out, rtomo_error *err);

/*
 * Resolve what opt leaves on AUTO (kernel, slices per pass, hybrid ratio)
 * into *cfg: from the in-memory cache, the cache file, or by timing the
 * candidates on `n_rows` of the slot's rows.  Fixed choices in opt are kept.
 */
rtomo_status cuda_fbp_autotune(cuda_fbp_impl *impl, cuda_fbp_slot *slot,
                               const int *rows, int n_rows,
                               cuda_fbp_config *cfg, rtomo_error *err);

#ifdef __cplusplus
}
#endif

#endif
