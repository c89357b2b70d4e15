/*
 * cuda_fbp_pipeline.cu — the reconstruction pipeline of one slot (device):
 * packing filtered sinograms into the texel format of the pass, launching
 * the selected back-projector over projection chunks, and streaming the
 * slices back to the host.
 *
 * Rows are reconstructed in groups of `slices` (1, 2 or 4) sinograms packed
 * per texel, and several groups form one launch (a batch), enough to fill
 * the GPU even for small slices.  Batches alternate between two device and
 * two pinned host output buffers: while the GPU back-projects batch b on the
 * compute stream, batch b-1 is downloaded on the download stream and the
 * worker thread copies batch b-2's slices into the caller's array.
 *
 * Packed sinograms live in a pool of pitch-linear buffers, addressed both
 * as textures (border address mode: bins outside the detector read 0) and
 * as plain memory by the ALU path.  A texture holds at most
 * impl->texture_chunk projections; longer scans run one launch per chunk,
 * each adding into the output.
 *
 * Packing (which may gather and weight projections), texture creation and
 * the launch dispatch are exported for the streaming back-projection
 * (cuda_fbp_stream.cu), which packs chunks of projections instead of whole
 * sinograms.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "cuda_fbp_device.h"

#define PACK_THREADS 256
/* Device and pinned host memory for one output buffer, at most. */
#define MAX_OUTPUT_BYTES ((size_t)256 << 20)
/* Pitch (and texture base) alignment of packed buffers: a multiple of
 * every current GPU's textureAlignment and texturePitchAlignment. */
#define PACK_ALIGNMENT 512
/* Blocks per SM a launch should offer (several waves keep every SM busy
 * until the end of the launch). */
#define BLOCKS_PER_SM_TARGET 32

/* ----------------------------------------------------------- helpers ---- */

extern "C" size_t cuda_fbp_texel_bytes(cuda_fbp_format f)
{
    return (size_t)f.slices * (f.precision == RTOMO_PRECISION_HALF ? 2 : 4);
}

extern "C" int cuda_fbp_config_tile(const cuda_fbp_config *cfg)
{
    if (cfg->kernel == RTOMO_BP_STANDARD || cfg->kernel == RTOMO_BP_TEXTURE)
        return 16;
    return cfg->tile == 64 && cfg->format.slices < 4 ? 64 : 32;
}

static int same_format(cuda_fbp_format a, cuda_fbp_format b)
{
    return a.slices == b.slices && a.precision == b.precision;
}

static cudaChannelFormatDesc channel_of(cuda_fbp_format f)
{
    const int half = f.precision == RTOMO_PRECISION_HALF;
    switch (f.slices) {
    case 2: return half ? cudaCreateChannelDescHalf2() : cudaCreateChannelDesc<float2>();
    case 4: return half ? cudaCreateChannelDescHalf4() : cudaCreateChannelDesc<float4>();
    default: return half ? cudaCreateChannelDescHalf() : cudaCreateChannelDesc<float>();
    }
}

static int chunk_count(const rtomo_fbp *plan, const cuda_fbp_impl *impl)
{
    return (plan->geom.n_proj + impl->texture_chunk - 1) / impl->texture_chunk;
}

/* ------------------------------------------------------ pack kernels ---- */

/* The sinograms packed into one launch: `slices` per group, NULL where a
 * group is short of rows (packed as zeros). */
typedef struct pack_sources {
    const float *row[CUDA_FBP_MAX_GROUPS * 4];
} pack_sources;

/* Sample i of packed projection p of sinogram row r: line `lines[p]` of
 * the row (p itself without a list), times weights[p] (when given). */
__device__ __forceinline__ float pack_sample(const float *r, size_t pitch,
                                             const int *lines,
                                             const float *weights, int p, int i)
{
    const int line = lines ? __ldg(&lines[p]) : p;
    const float x = *(const float *)((const char *)r + (size_t)line * pitch + 4 * (size_t)i);
    return weights ? x * __ldg(&weights[p]) : x;
}

/* Largest |value| of each group's rows, as float bits (atomicMax works on
 * them because non-negative floats order like their bit patterns). */
__global__ void absmax_kernel(const pack_sources src, int slices, size_t pitch,
                              int n_proj, int width, const int *lines,
                              const float *weights, unsigned *absmax)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    const int g = blockIdx.z;
    float m = 0.f;
    if (i < width) {
        for (int s = 0; s < slices; s++) {
            const float *r = src.row[g * slices + s];
            if (!r)
                continue;
            for (int p = blockIdx.y; p < n_proj; p += gridDim.y)
                m = fmaxf(m, fabsf(pack_sample(r, pitch, lines, weights, p, i)));
        }
    }
    const unsigned bits = __reduce_max_sync(0xffffffffu, __float_as_uint(m));
    if ((threadIdx.x & 31) == 0)
        atomicMax(&absmax[g], bits);
}

template <int S, bool HALF>
__global__ void pack_kernel(const pack_sources src, size_t src_pitch,
                            int n_proj, int width, const int *lines,
                            const float *weights, char *pool,
                            size_t buffer_bytes, size_t pitch,
                            const unsigned *absmax)
{
    typedef typename slice_vec<S>::type V;
    typedef texel<S, HALF> T;
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    const int g = blockIdx.z;
    if (i >= width)
        return;
    const float scale = HALF ? half_pack_scale(absmax, g) : 1.f;
    for (int p = blockIdx.y; p < n_proj; p += gridDim.y) {
        V v = vzero(V());
#pragma unroll
        for (int s = 0; s < S; s++) {
            const float *r = src.row[g * S + s];
            if (r)
                vset(v, s, pack_sample(r, src_pitch, lines, weights, p, i));
        }
        typename T::storage *dst = (typename T::storage *)(pool + (size_t)g * buffer_bytes + (size_t)p * pitch);
        dst[i] = T::pack(v, scale);
    }
}

template <int S>
static void launch_pack(const pack_sources &src, const cuda_fbp_slot *slot,
                        const rtomo_fbp *plan, const cuda_fbp_pack_job *job,
                        dim3 grid, cudaStream_t stream)
{
    if (job->format.precision == RTOMO_PRECISION_HALF)
        pack_kernel<S, true><<<grid, PACK_THREADS, 0, stream>>>(
            src, slot->sino_pitch, job->n_proj, plan->geom.det_width, job->lines,
            job->weights, job->pool, job->buffer_bytes, job->pitch, job->absmax);
    else
        pack_kernel<S, false><<<grid, PACK_THREADS, 0, stream>>>(
            src, slot->sino_pitch, job->n_proj, plan->geom.det_width, job->lines,
            job->weights, job->pool, job->buffer_bytes, job->pitch, NULL);
}

extern "C" rtomo_status cuda_fbp_pack(const cuda_fbp_slot *slot,
                                      const rtomo_fbp *plan,
                                      const cuda_fbp_pack_job *job,
                                      rtomo_error *err)
{
    const int S = job->format.slices;
    const cudaStream_t stream = job->stream ? job->stream : slot->compute;
    pack_sources src;
    memset(&src, 0, sizeof src);
    for (int j = 0; j < job->groups * S; j++)
        if (job->rows[j] >= 0)
            src.row[j] = (const float *)((const char *)slot->sino +
                                         cuda_fbp_row_offset(slot, plan, job->rows[j]));
    const int width = plan->geom.det_width;
    const int lines = job->n_proj < 4096 ? job->n_proj : 4096;
    const dim3 grid((width + PACK_THREADS - 1) / PACK_THREADS, lines, job->groups);
    if (job->format.precision == RTOMO_PRECISION_HALF) {
        RTOMO_CUDA_TRY(err, cudaMemsetAsync(job->absmax, 0,
                                            sizeof(unsigned) * (size_t)job->groups,
                                            stream));
        absmax_kernel<<<grid, PACK_THREADS, 0, stream>>>(
            src, S, slot->sino_pitch, job->n_proj, width, job->lines, job->weights,
            job->absmax);
        RTOMO_CUDA_CHECK_LAUNCH(err, "sinogram range");
    }
    switch (S) {
    case 1: launch_pack<1>(src, slot, plan, job, grid, stream); break;
    case 2: launch_pack<2>(src, slot, plan, job, grid, stream); break;
    default: launch_pack<4>(src, slot, plan, job, grid, stream); break;
    }
    RTOMO_CUDA_CHECK_LAUNCH(err, "sinogram packing");
    return RTOMO_OK;
}

/* Pack groups of rows (slot-local, -1 = none), every projection in index
 * order, into the pool. */
static rtomo_status pack_groups(cuda_fbp_slot *slot, const rtomo_fbp *plan,
                                const int *rows, int groups, rtomo_error *err)
{
    cuda_fbp_recon_state *r = &slot->recon;
    cuda_fbp_pack_job job;
    memset(&job, 0, sizeof job);
    job.format = r->pool_format;
    job.rows = rows;
    job.groups = groups;
    job.n_proj = plan->geom.n_proj;
    job.pool = r->pool;
    job.buffer_bytes = r->pool_buffer_bytes;
    job.pitch = r->pool_pitch;
    job.absmax = r->absmax;
    return cuda_fbp_pack(slot, plan, &job, err);
}

/* ------------------------------------------------------- pool, output ---- */

static void destroy_textures(cuda_fbp_recon_state *r)
{
    for (int i = 0; i < r->texture_count; i++)
        if (r->textures[i])
            cudaDestroyTextureObject(r->textures[i]);
    free(r->textures);
    r->textures = NULL;
    r->texture_count = 0;
}

/* Make the pool hold `groups` buffers of format f (waiting for the compute
 * stream before anything in use is replaced). */
static rtomo_status ensure_pool(cuda_fbp_slot *slot, const rtomo_fbp *plan,
                                const cuda_fbp_impl *impl, cuda_fbp_format f,
                                int groups, rtomo_error *err)
{
    cuda_fbp_recon_state *r = &slot->recon;
    if (r->pool && same_format(r->pool_format, f) && groups <= r->pool_groups)
        return RTOMO_OK;
    const size_t pitch = cuda_fbp_pack_pitch(plan, f);
    const size_t buffer = pitch * (size_t)plan->geom.n_proj;
    const size_t bytes = buffer * (size_t)groups;
    RTOMO_CUDA_TRY(err, cudaStreamSynchronize(slot->compute));
    destroy_textures(r);
    if (bytes > r->pool_bytes) {
        RTOMO_CUDA_TRY(err, cudaFree(r->pool));
        r->pool = NULL;
        r->pool_bytes = 0;
        if (cudaMalloc((void **)&r->pool, bytes) != cudaSuccess) {
            cudaGetLastError();
            return rtomo_set_error(err, RTOMO_E_NOMEM,
                                   "CUDA device %d: no room for %.1f MiB of "
                                   "packed sinograms (%d groups of %d "
                                   "slices)", slot->device,
                                   (double)bytes / (1 << 20), groups, f.slices);
        }
        r->pool_bytes = bytes;
    }
    r->pool_format = f;
    r->pool_pitch = pitch;
    r->pool_buffer_bytes = buffer;
    r->pool_groups = (int)(r->pool_bytes / buffer);
    r->texture_count = r->pool_groups * chunk_count(plan, impl) * 2;
    r->textures = (cudaTextureObject_t *)calloc((size_t)r->texture_count,
                                                sizeof(cudaTextureObject_t));
    if (!r->textures)
        return rtomo_set_error(err, RTOMO_E_NOMEM, "out of memory for textures");
    return RTOMO_OK;
}

extern "C" size_t cuda_fbp_pack_pitch(const rtomo_fbp *plan, cuda_fbp_format f)
{
    const size_t line = (size_t)plan->geom.det_width * cuda_fbp_texel_bytes(f);
    return (line + PACK_ALIGNMENT - 1) / PACK_ALIGNMENT * PACK_ALIGNMENT;
}

extern "C" rtomo_status cuda_fbp_texture(void *base, cuda_fbp_format f,
                                         int width, int height, size_t pitch,
                                         rtomo_interp interp,
                                         cudaTextureObject_t *out,
                                         rtomo_error *err)
{
    cudaResourceDesc res;
    memset(&res, 0, sizeof res);
    res.resType = cudaResourceTypePitch2D;
    res.res.pitch2D.devPtr = base;
    res.res.pitch2D.desc = channel_of(f);
    res.res.pitch2D.width = (size_t)width;
    res.res.pitch2D.height = (size_t)height;
    res.res.pitch2D.pitchInBytes = pitch;
    cudaTextureDesc td;
    memset(&td, 0, sizeof td);
    td.addressMode[0] = td.addressMode[1] = cudaAddressModeBorder;
    td.filterMode = interp == RTOMO_INTERP_LINEAR ? cudaFilterModeLinear
                                                  : cudaFilterModePoint;
    td.readMode = cudaReadModeElementType;
    td.normalizedCoords = 0;
    RTOMO_CUDA_TRY(err, cudaCreateTextureObject(out, &res, &td, NULL));
    return RTOMO_OK;
}

/* Texture over pool buffer g, projection chunk c, filtered as `interp`. */
static rtomo_status pool_texture(cuda_fbp_slot *slot, const rtomo_fbp *plan,
                                 const cuda_fbp_impl *impl, int g, int c,
                                 rtomo_interp interp, cudaTextureObject_t *out,
                                 rtomo_error *err)
{
    cuda_fbp_recon_state *r = &slot->recon;
    const int chunks = chunk_count(plan, impl);
    cudaTextureObject_t *t = &r->textures[(g * chunks + c) * 2 + (interp == RTOMO_INTERP_NEAREST)];
    if (!*t) {
        const int first = c * impl->texture_chunk;
        const int n = plan->geom.n_proj - first < impl->texture_chunk
                          ? plan->geom.n_proj - first : impl->texture_chunk;
        rtomo_status st = cuda_fbp_texture(r->pool + (size_t)g * r->pool_buffer_bytes +
                                               (size_t)first * r->pool_pitch,
                                           r->pool_format, plan->geom.det_width, n,
                                           r->pool_pitch, interp, t, err);
        if (st != RTOMO_OK)
            return st;
    }
    *out = *t;
    return RTOMO_OK;
}

extern "C" rtomo_status cuda_fbp_ensure_output(cuda_fbp_slot *slot,
                                               size_t bytes, rtomo_error *err)
{
    cuda_fbp_recon_state *r = &slot->recon;
    if (bytes <= r->out_bytes)
        return RTOMO_OK;
    for (int j = 0; j < 2; j++) {
        RTOMO_CUDA_TRY(err, cudaEventSynchronize(r->downloaded[j]));
        RTOMO_CUDA_TRY(err, cudaFree(r->dev_out[j]));
        RTOMO_CUDA_TRY(err, cudaFreeHost(r->host_out[j]));
        r->dev_out[j] = NULL;
        r->host_out[j] = NULL;
    }
    r->out_bytes = 0;
    RTOMO_CUDA_TRY(err, cudaStreamSynchronize(slot->compute));
    for (int j = 0; j < 2; j++) {
        RTOMO_CUDA_TRY(err, cudaMalloc((void **)&r->dev_out[j], bytes));
        RTOMO_CUDA_TRY(err, cudaHostAlloc((void **)&r->host_out[j], bytes,
                                          cudaHostAllocDefault));
    }
    r->out_bytes = bytes;
    return RTOMO_OK;
}

/* ------------------------------------------------------- init, free ---- */

extern "C" rtomo_status cuda_fbp_recon_init(cuda_fbp_slot *slot,
                                            const rtomo_fbp *plan,
                                            rtomo_error *err)
{
    cuda_fbp_recon_state *r = &slot->recon;
    RTOMO_CUDA_TRY(err, cudaMalloc((void **)&r->proj,
                                   sizeof(float4) * (size_t)plan->geom.n_proj));
    RTOMO_CUDA_TRY(err, cudaMalloc((void **)&r->absmax,
                                   sizeof(unsigned) * CUDA_FBP_MAX_GROUPS));
    RTOMO_CUDA_TRY(err, cudaMalloc((void **)&r->sm_counters,
                                   sizeof(unsigned) * CUDA_FBP_MAX_SMS));
    RTOMO_CUDA_TRY(err, cudaMemsetAsync(r->sm_counters, 0,
                                        sizeof(unsigned) * CUDA_FBP_MAX_SMS,
                                        slot->compute));
    for (int j = 0; j < 2; j++) {
        RTOMO_CUDA_TRY(err, cudaEventCreate(&r->bp_start[j]));
        RTOMO_CUDA_TRY(err, cudaEventCreate(&r->bp_end[j]));
        RTOMO_CUDA_TRY(err, cudaEventCreateWithFlags(&r->downloaded[j],
                                                     cudaEventDisableTiming));
    }
    /* The output buffers of the largest batch now, not at the first
     * reconstruction: pinned allocations take tens of milliseconds, which
     * belong to plan creation rather than to the latency of the first
     * slices. */
    const size_t image = (size_t)plan->geom.roi_width * (size_t)plan->geom.roi_height *
                         sizeof(float);
    size_t images = MAX_OUTPUT_BYTES / image;
    if (images > CUDA_FBP_MAX_GROUPS * 4)
        images = CUDA_FBP_MAX_GROUPS * 4;
    return cuda_fbp_ensure_output(slot, (images > 0 ? images : 1) * image, err);
}

extern "C" void cuda_fbp_recon_free(cuda_fbp_slot *slot)
{
    cuda_fbp_recon_state *r = &slot->recon;
    destroy_textures(r);
    cudaFree(r->pool);
    cudaFree(r->proj);
    cudaFree(r->absmax);
    cudaFree(r->sm_counters);
    for (int j = 0; j < 2; j++) {
        cudaFree(r->dev_out[j]);
        cudaFreeHost(r->host_out[j]);
        if (r->bp_start[j]) cudaEventDestroy(r->bp_start[j]);
        if (r->bp_end[j]) cudaEventDestroy(r->bp_end[j]);
        if (r->downloaded[j]) cudaEventDestroy(r->downloaded[j]);
    }
    memset(r, 0, sizeof *r);
}

extern "C" float4 cuda_fbp_projection_constants(const rtomo_fbp *plan, int p)
{
    return make_float4((float)cos(plan->angles[p]), (float)sin(plan->angles[p]),
                       (float)(plan->geom.axis + plan->axis_shift[p]), 0.f);
}

extern "C" rtomo_status cuda_fbp_upload_constants(cuda_fbp_slot *slot,
                                                  const rtomo_fbp *plan,
                                                  rtomo_error *err)
{
    const rtomo_fbp_geometry *g = &plan->geom;
    float4 *k = (float4 *)malloc(sizeof(float4) * (size_t)g->n_proj);
    if (!k)
        return rtomo_set_error(err, RTOMO_E_NOMEM,
                               "out of memory for %d projection constants",
                               g->n_proj);
    for (int p = 0; p < g->n_proj; p++)
        k[p] = cuda_fbp_projection_constants(plan, p);
    cudaError_t rc = cudaMemcpyAsync(slot->recon.proj, k,
                                     sizeof(float4) * (size_t)g->n_proj,
                                     cudaMemcpyHostToDevice, slot->compute);
    if (rc == cudaSuccess)
        rc = cudaStreamSynchronize(slot->compute);
    free(k);
    RTOMO_CUDA_TRY(err, rc);
    return RTOMO_OK;
}

/* ------------------------------------------------------------ batches ---- */

extern "C" int cuda_fbp_batch_groups(const cuda_fbp_slot *slot,
                                     const rtomo_fbp *plan,
                                     const cuda_fbp_config *cfg, int roi_w,
                                     int roi_h, int groups)
{
    const int tile = cuda_fbp_config_tile(cfg);
    const long blocks = (long)((roi_w + tile - 1) / tile) * ((roi_h + tile - 1) / tile);
    const long target = (long)slot->sm_count * BLOCKS_PER_SM_TARGET;
    long k = (target + blocks - 1) / blocks;
    const size_t image = (size_t)roi_w * (size_t)roi_h * sizeof(float);
    const long by_memory = (long)(MAX_OUTPUT_BYTES / (image * (size_t)cfg->format.slices));
    if (k > by_memory)
        k = by_memory;
    if (k > CUDA_FBP_MAX_GROUPS)
        k = CUDA_FBP_MAX_GROUPS;
    if (k < 1)
        k = 1;
    if (k > groups)
        k = groups;
    if (k < 1)
        return 1;
    /* Even batches: 5 groups at 4 per launch run as 3 + 2, not 4 + 1. */
    const long batches = (groups + k - 1) / k;
    return (int)((groups + batches - 1) / batches);
}

typedef rtomo_status (*launcher)(const cuda_fbp_launch *, cudaStream_t, rtomo_error *);

static launcher launcher_of(rtomo_bp_kernel kernel)
{
    switch (kernel) {
    case RTOMO_BP_STANDARD: return cuda_fbp_bp_standard;
    case RTOMO_BP_TEXTURE: return cuda_fbp_bp_texture;
    case RTOMO_BP_ALU: return cuda_fbp_bp_alu;
    case RTOMO_BP_HYBRID: return cuda_fbp_bp_hybrid;
    default: return NULL;
    }
}

extern "C" rtomo_status cuda_fbp_backproject(const cuda_fbp_launch *l,
                                             cudaStream_t s, rtomo_error *err)
{
    const launcher fn = launcher_of(l->cfg.kernel);
    if (!fn)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "back-projection kernel %d is not resolved",
                               (int)l->cfg.kernel);
    return fn(l, s, err);
}

/* Pack `groups` groups (rows: groups*slices slot-local rows, -1 = none)
 * and back-project them into `out` on the compute stream.  roi = {x, y, w,
 * h}. */
static rtomo_status backproject_groups(cuda_fbp_slot *slot,
                                       const rtomo_fbp *plan,
                                       const cuda_fbp_impl *impl,
                                       const cuda_fbp_config *cfg,
                                       const int *rows, int groups,
                                       const int *roi, float *out,
                                       rtomo_error *err)
{
    const launcher fn = launcher_of(cfg->kernel);
    if (!fn)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "back-projection kernel %d is not resolved",
                               (int)cfg->kernel);
    rtomo_status st = ensure_pool(slot, plan, impl, cfg->format, groups, err);
    if (st == RTOMO_OK)
        st = pack_groups(slot, plan, rows, groups, err);
    if (st != RTOMO_OK)
        return st;
    const cuda_fbp_recon_state *r = &slot->recon;
    cuda_fbp_launch l;
    memset(&l, 0, sizeof l);
    l.det_width = plan->geom.det_width;
    l.center = (float)(0.5 * (plan->geom.slice_size - 1));
    l.fov_limit = plan->fov_limit;
    l.fov_span = plan->geom.slice_size - 1;
    l.roi_x = roi[0];
    l.roi_y = roi[1];
    l.roi_w = roi[2];
    l.roi_h = roi[3];
    l.interp = plan->geom.interp;
    l.cfg = *cfg;
    l.n_groups = groups;
    l.pitch = r->pool_pitch;
    l.absmax = cfg->format.precision == RTOMO_PRECISION_HALF ? r->absmax : NULL;
    l.out = out;
    l.sm_counters = r->sm_counters;
    for (int c = 0; c < chunk_count(plan, impl); c++) {
        const int first = c * impl->texture_chunk;
        l.proj = r->proj + first;
        l.n_proj = plan->geom.n_proj - first < impl->texture_chunk
                       ? plan->geom.n_proj - first : impl->texture_chunk;
        l.accumulate = c > 0 ? CUDA_FBP_ACCUMULATE_LOAD : CUDA_FBP_OVERWRITE;
        for (int g = 0; g < groups; g++) {
            st = pool_texture(slot, plan, impl, g, c, l.interp, &l.tex[g], err);
            if (st != RTOMO_OK)
                return st;
            l.data[g] = r->pool + (size_t)g * r->pool_buffer_bytes +
                        (size_t)first * r->pool_pitch;
        }
        st = fn(&l, slot->compute, err);
        if (st != RTOMO_OK)
            return st;
    }
    return RTOMO_OK;
}

static void plan_roi(const rtomo_fbp *plan, int *roi)
{
    roi[0] = plan->geom.roi_x;
    roi[1] = plan->geom.roi_y;
    roi[2] = plan->geom.roi_width;
    roi[3] = plan->geom.roi_height;
}

extern "C" rtomo_status cuda_fbp_recon_batch(cuda_fbp_slot *slot,
                                             const rtomo_fbp *plan,
                                             const cuda_fbp_impl *impl,
                                             const cuda_fbp_config *cfg,
                                             const int *rows, int n_rows,
                                             const int *roi, rtomo_error *err)
{
    int plan_area[4];
    if (!roi) {
        plan_roi(plan, plan_area);
        roi = plan_area;
    }
    const int S = cfg->format.slices;
    const int groups = (n_rows + S - 1) / S;
    if (groups > CUDA_FBP_MAX_GROUPS)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "%d groups exceed one launch's %d", groups,
                               CUDA_FBP_MAX_GROUPS);
    int padded[CUDA_FBP_MAX_GROUPS * 4];
    for (int j = 0; j < groups * S; j++)
        padded[j] = j < n_rows ? rows[j] : -1;
    const size_t bytes = (size_t)groups * S * roi[2] * roi[3] * sizeof(float);
    rtomo_status st = cuda_fbp_ensure_output(slot, bytes, err);
    if (st != RTOMO_OK)
        return st;
    return backproject_groups(slot, plan, impl, cfg, padded, groups, roi,
                              slot->recon.dev_out[0], err);
}

/* ----------------------------------------------------------- pipeline ---- */

/* The images of one batch: job rows [first, first + count). */
typedef struct batch_span {
    int first, count;
} batch_span;

/* Wait for the batch in output buffer `buf` to reach the host, account its
 * time and copy its images to their places in job->out. */
static rtomo_status finish_batch(cuda_fbp_slot *slot,
                                 const cuda_fbp_recon_job *job, int buf,
                                 batch_span span, size_t image, rtomo_error *err)
{
    cuda_fbp_recon_state *r = &slot->recon;
    RTOMO_CUDA_TRY(err, cudaEventSynchronize(r->downloaded[buf]));
    float ms = 0.f;
    RTOMO_CUDA_TRY(err, cudaEventElapsedTime(&ms, r->bp_start[buf], r->bp_end[buf]));
    slot->backproject_seconds += 1e-3 * ms;
    cuda_fbp_copy_segment segs[CUDA_FBP_MAX_GROUPS * 4];
    int n = 0;
    for (int j = 0; j < span.count && span.first + j < job->n_rows; j++) {
        segs[n].dst = job->out + (size_t)job->targets[span.first + j] * image;
        segs[n].src = r->host_out[buf] + (size_t)j * image;
        segs[n].bytes = image * sizeof(float);
        n++;
    }
    cuda_fbp_copy(job->impl->copier, segs, n);
    return RTOMO_OK;
}

/* Groups in the next launch: k while more than k remain, then smaller
 * launches, so that the download and copy of the last batch (which nothing
 * overlaps) stay short. */
static int next_batch_groups(int remaining, int k)
{
    const int tail = (k + 3) / 4;
    if (remaining > k)
        return k;
    return remaining < tail ? remaining : tail;
}

/* Enqueue pack, back-projection and download of `groups` groups starting
 * at job row `first` into output buffer `buf`. */
static rtomo_status enqueue_batch(cuda_fbp_slot *slot, const cuda_fbp_recon_job *job,
                                  int buf, int first, int groups, const int *roi,
                                  size_t image, rtomo_error *err)
{
    cuda_fbp_recon_state *r = &slot->recon;
    const int S = job->cfg.format.slices;
    int rows[CUDA_FBP_MAX_GROUPS * 4];
    for (int j = 0; j < groups * S; j++)
        rows[j] = first + j < job->n_rows ? job->rows[first + j] : -1;
    /* The device buffer is free once its previous download is done. */
    RTOMO_CUDA_TRY(err, cudaStreamWaitEvent(slot->compute, r->downloaded[buf], 0));
    RTOMO_CUDA_TRY(err, cudaEventRecord(r->bp_start[buf], slot->compute));
    rtomo_status st = backproject_groups(slot, job->plan, job->impl, &job->cfg, rows,
                                         groups, roi, r->dev_out[buf], err);
    if (st != RTOMO_OK)
        return st;
    RTOMO_CUDA_TRY(err, cudaEventRecord(r->bp_end[buf], slot->compute));
    RTOMO_CUDA_TRY(err, cudaStreamWaitEvent(slot->download, r->bp_end[buf], 0));
    RTOMO_CUDA_TRY(err, cudaMemcpyAsync(r->host_out[buf], r->dev_out[buf],
                                        image * (size_t)(groups * S) * sizeof(float),
                                        cudaMemcpyDeviceToHost, slot->download));
    RTOMO_CUDA_TRY(err, cudaEventRecord(r->downloaded[buf], slot->download));
    return RTOMO_OK;
}

extern "C" rtomo_status cuda_fbp_recon_run(cuda_fbp_slot *slot, void *arg,
                                           rtomo_error *err)
{
    const cuda_fbp_recon_job *job = (const cuda_fbp_recon_job *)arg;
    if (job->n_rows == 0)
        return RTOMO_OK;
    const rtomo_fbp *plan = job->plan;
    int roi[4];
    plan_roi(plan, roi);
    const int S = job->cfg.format.slices;
    const int groups = (job->n_rows + S - 1) / S;
    const int k = cuda_fbp_batch_groups(slot, plan, &job->cfg, roi[2], roi[3], groups);
    const size_t image = (size_t)roi[2] * (size_t)roi[3];

    rtomo_status st = cuda_fbp_upload_constants(slot, plan, err);
    if (st == RTOMO_OK)
        st = cuda_fbp_ensure_output(slot, image * (size_t)(k * S) * sizeof(float), err);
    if (st != RTOMO_OK)
        return st;
    /* While batch b back-projects, batch b-1 downloads and the host copies
     * out the batch before it: two output buffers in turn. */
    batch_span spans[2];
    int done = 0, b = 0;
    for (; done < groups; b++) {
        const int buf = b & 1;
        const int n = next_batch_groups(groups - done, k);
        spans[buf].first = done * S;
        spans[buf].count = n * S;
        if ((st = enqueue_batch(slot, job, buf, done * S, n, roi, image, err)))
            return st;
        if (b > 0 && (st = finish_batch(slot, job, buf ^ 1, spans[buf ^ 1], image, err)))
            return st;
        done += n;
    }
    return finish_batch(slot, job, (b - 1) & 1, spans[(b - 1) & 1], image, err);
}
