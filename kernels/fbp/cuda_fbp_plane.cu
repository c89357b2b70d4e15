/*
 * cuda_fbp_plane.cu — planes of any orientation on the CUDA backend: the
 * definition of rtomo_engine.h ("Planes of any orientation"), which
 * cpu_fbp_plane.c computes as the reference.
 *
 * Kernel.  One thread per output pixel loops over the listed projections,
 * whose constants are staged through shared memory 256 at a time (any
 * number of projections works), and reads the float sinograms in
 * slot->sino directly, interpolating on the cores.  Not the packed
 * textures of the slice back-projectors: a plane's pixels need two
 * detector rows each, and different rows from pixel to pixel, so no
 * packing of rows per texel fits; the sinograms are already on the device
 * as floats; and interpolating in float32 on the cores (not with the
 * texture unit's 8-bit weights) keeps the plane within float rounding of
 * the CPU's.  A plane is small work next to a volume (4096^2 pixels x
 * thousands of projections is about 10^11 samples: a fraction of a second
 * on current GPUs), so the straightforward loop is enough.
 *
 * Bin positions.  For output pixel (i, j) at offsets di = i - (w-1)/2,
 * dj = j - (h-1)/2 from the centre C, projection p sees bin
 *     s = s0_p + di a_p + dj b_p,  a_p = u.x cos - u.y sin,
 *     b_p = v.x cos - v.y sin,  s0_p = axis + shift_p + (C.x - c) cos -
 *     (C.y - c) sin
 * with the constants computed per call in double on the host and rounded
 * to float once; di and dj are exact in float.  The height P.z, which
 * selects rows and their weights, is computed per pixel in double (not
 * per projection, so double rate does not matter).
 *
 * Devices.  Rows are dealt to slots (fbp_partition.h); each slot sums, on
 * its own worker thread, the rows it owns (a per-call table maps kept rows
 * to its local rows, -1 where another slot owns them) and the host adds
 * the slots' partial planes, in slot order so that results do not depend
 * on timing.  The plane is done in bands of at most BAND_PIXELS pixels,
 * so that the partial planes need bounded memory; a slot that owns no
 * row a band can reach does not run for it, and where only one slot
 * does (a horizontal plane, one GPU) its band is copied straight into the
 * caller's array.
 *
 * Test hook (environment, read per call): RTOMO_CUDA_FBP_PLANE_BAND=n
 * makes bands of at most n pixels (at least one row), so that small
 * planes run in many bands.
 */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_fbp.h"

#define PLANE_EDGE 16               /* 16 x 16 threads, one pixel each */
#define PLANE_THREADS (PLANE_EDGE * PLANE_EDGE)
/* Output pixels per band: 16 MiB of floats per slot on the device and,
 * where slots share a band, on the host. */
#define BAND_PIXELS ((size_t)1 << 22)

/* Constants of one listed projection (see the file comment). */
struct __align__(16) plane_const {
    float a, b, s0;
    int slot;                       /* projection slot: its sinogram line */
};

/* Everything one band's launch needs. */
struct plane_launch {
    const char *sino;               /* the slot's sinograms */
    size_t pitch;                   /* bytes between projections */
    size_t row_bytes;               /* bytes between the slot's rows */
    const int *local;               /* kept row -> slot-local row or -1 */
    int row_first, row_count;       /* the plan's kept rows */
    const plane_const *consts;
    int n_consts;
    int det_width;
    int nearest;
    double cz, uz, vz;              /* P.z = cz + di uz + dj vz */
    /* Circular field of view (fov_r2 < 0: none): the point is 0 when
     * (P.x - c)^2 + (P.y - c)^2 > fov_r2 = R^2, in double as on the CPU. */
    double cx, ux, vx, cy, uy, vy;  /* P.x = cx + di ux + dj vx, P.y */
    double fov_c, fov_r2;
    int width, height;              /* of the whole plane */
    int j_first, rows;              /* this band's pixel rows */
    float *out;                     /* rows x width */
};

/* ------------------------------------------------------------- kernel ---- */

__device__ __forceinline__ float plane_bin(const float *q, int i, int width)
{
    return (unsigned)i < (unsigned)width ? __ldg(q + i) : 0.f;
}

/* q at bin position s: linear or nearest, 0 off the detector.  s is
 * clamped first (a NaN too: fmaxf returns the number), so that the int
 * conversion stays in range; every clamped position reads 0 anyway. */
__device__ __forceinline__ float plane_sample(const float *q, float s,
                                              int width, int nearest)
{
    s = fminf(fmaxf(s, -2.f), (float)width + 1.f);
    if (nearest)
        return plane_bin(q, (int)floorf(s + 0.5f), width);
    const float b = floorf(s), f = s - b;
    const int i = (int)b;
    return (1.f - f) * plane_bin(q, i, width) + f * plane_bin(q, i + 1, width);
}

/* The two rows a pixel reads on this slot (projection 0 of each) and their
 * weights; a NULL row is not kept, not this slot's, or of weight 0. */
struct pixel_rows {
    const float *lo, *hi;           /* rows floor(P.z), floor(P.z) + 1 */
    float w_lo, w_hi;
};

/* As cpu_fbp_plane.c: the range test in double before any int. */
__device__ __forceinline__ pixel_rows plane_rows(const plane_launch &l,
                                                 float di, float dj)
{
    pixel_rows r = {NULL, NULL, 0.f, 0.f};
    if (l.fov_r2 >= 0.0) {
        /* cpu_fbp_plane.c's expression, each step rounded (no fma). */
        const double px = __dadd_rn(__dadd_rn(l.cx, __dmul_rn(di, l.ux)),
                                    __dmul_rn(dj, l.vx));
        const double py = __dadd_rn(__dadd_rn(l.cy, __dmul_rn(di, l.uy)),
                                    __dmul_rn(dj, l.vy));
        const double dx = __dsub_rn(px, l.fov_c), dy = __dsub_rn(py, l.fov_c);
        if (__dadd_rn(__dmul_rn(dx, dx), __dmul_rn(dy, dy)) > l.fov_r2)
            return r;
    }
    const double z = l.cz + (double)di * l.uz + (double)dj * l.vz;
    if (!(z > l.row_first - 1.0 && z < (double)l.row_first + l.row_count))
        return r;
    const double z0 = floor(z), fz = z - z0;
    const int kept = (int)z0 - l.row_first;         /* -1 .. row_count-1 */
    const int r0 = kept >= 0 ? l.local[kept] : -1;
    const int r1 = fz > 0.0 && kept + 1 < l.row_count ? l.local[kept + 1] : -1;
    if (r0 >= 0) {
        r.lo = (const float *)(l.sino + (size_t)r0 * l.row_bytes);
        r.w_lo = (float)(1.0 - fz);
    }
    if (r1 >= 0) {
        r.hi = (const float *)(l.sino + (size_t)r1 * l.row_bytes);
        r.w_hi = (float)fz;
    }
    return r;
}

__global__ void plane_kernel(const plane_launch l)
{
    __shared__ plane_const consts[PLANE_THREADS];
    const int t = threadIdx.y * PLANE_EDGE + threadIdx.x;
    const int i = blockIdx.x * PLANE_EDGE + threadIdx.x;
    const int jb = blockIdx.y * PLANE_EDGE + threadIdx.y;
    const bool live = i < l.width && jb < l.rows;
    /* Half-integers below 2^14: exact in float. */
    const float di = (float)i - 0.5f * (float)(l.width - 1);
    const float dj = (float)(l.j_first + jb) - 0.5f * (float)(l.height - 1);
    pixel_rows rows = {NULL, NULL, 0.f, 0.f};
    if (live)
        rows = plane_rows(l, di, dj);
    float lo = 0.f, hi = 0.f;
    for (int p0 = 0; p0 < l.n_consts; p0 += PLANE_THREADS) {
        const int n = min(PLANE_THREADS, l.n_consts - p0);
        __syncthreads();
        if (t < n)
            consts[t] = l.consts[p0 + t];
        __syncthreads();
        if (!rows.lo && !rows.hi)
            continue;       /* still at every barrier of the loop */
        for (int k = 0; k < n; k++) {
            const plane_const c = consts[k];
            const float s = fmaf(dj, c.b, fmaf(di, c.a, c.s0));
            const size_t line = (size_t)c.slot * l.pitch;
            if (rows.lo)
                lo += plane_sample((const float *)((const char *)rows.lo + line),
                                   s, l.det_width, l.nearest);
            if (rows.hi)
                hi += plane_sample((const float *)((const char *)rows.hi + line),
                                   s, l.det_width, l.nearest);
        }
    }
    if (live) {
        /* Rounded products and sum, no fma: the same value whether both
         * rows are this slot's or the host adds two slots' parts (and the
         * CPU's expression). */
        float v = rows.lo ? __fmul_rn(rows.w_lo, lo) : 0.f;
        if (rows.hi)
            v = __fadd_rn(v, __fmul_rn(rows.w_hi, hi));
        l.out[(size_t)jb * (size_t)l.width + (size_t)i] = v;
    }
}

/* ---------------------------------------------------------- slot jobs ---- */

/* The work of one slot in a plane call. */
typedef struct plane_job {
    const rtomo_fbp *plan;
    const cuda_fbp_impl *impl;
    const rtomo_fbp_plane *plane;
    const plane_const *consts;      /* host, shared by every slot */
    int n_consts;
    size_t band_pixels;             /* capacity of the band buffers */
    /* Per band, set by the caller: */
    int j_first, rows;
    int runs;                       /* this slot owns rows the band reaches */
    float *dest;                    /* where the band goes: the caller's
                                       array or host_band */
    /* The slot's own: */
    float *host_band;               /* when slots share bands */
    plane_const *d_consts;
    int *d_local;
    float *d_out;
    cudaEvent_t start, end;
    int events;                     /* of start, end: how many exist */
    double seconds;                 /* kernel time, CUDA events */
} plane_job;

/* The slot's map of kept rows to its local rows (-1: another slot's). */
static rtomo_status upload_rows(cuda_fbp_slot *slot, plane_job *job,
                                rtomo_error *err)
{
    const int rows = job->plan->geom.row_count;
    const fbp_partition *deal = &job->impl->deal;
    int *local = (int *)malloc(sizeof(int) * (size_t)rows);
    if (!local)
        return rtomo_set_error(err, RTOMO_E_NOMEM,
                               "out of memory for the row map of %d rows", rows);
    for (int r = 0; r < rows; r++)
        local[r] = fbp_partition_owner(deal, r) == slot->index
                       ? fbp_partition_local(deal, r) : -1;
    cudaError_t rc = cudaMemcpyAsync(job->d_local, local, sizeof(int) * (size_t)rows,
                                     cudaMemcpyHostToDevice, slot->compute);
    /* The copy reads pageable memory: wait before freeing it. */
    if (rc == cudaSuccess)
        rc = cudaStreamSynchronize(slot->compute);
    free(local);
    RTOMO_CUDA_TRY(err, rc);
    return RTOMO_OK;
}

/* Runs on the slot's worker: device buffers, constants and the row map. */
static rtomo_status slot_setup(cuda_fbp_slot *slot, void *arg, rtomo_error *err)
{
    plane_job *job = (plane_job *)arg;
    const size_t const_bytes = sizeof(plane_const) * (size_t)job->n_consts;
    RTOMO_CUDA_TRY(err, cudaEventCreate(&job->start));
    job->events = 1;
    RTOMO_CUDA_TRY(err, cudaEventCreate(&job->end));
    job->events = 2;
    RTOMO_CUDA_TRY(err, cudaMalloc((void **)&job->d_consts, const_bytes));
    RTOMO_CUDA_TRY(err, cudaMalloc((void **)&job->d_local,
                                   sizeof(int) * (size_t)job->plan->geom.row_count));
    RTOMO_CUDA_TRY(err, cudaMalloc((void **)&job->d_out,
                                   sizeof(float) * job->band_pixels));
    RTOMO_CUDA_TRY(err, cudaMemcpyAsync(job->d_consts, job->consts, const_bytes,
                                        cudaMemcpyHostToDevice, slot->compute));
    return upload_rows(slot, job, err);
}

/* Runs on the slot's worker: whatever slot_setup made, however far it
 * got. */
static rtomo_status slot_teardown(cuda_fbp_slot *slot, void *arg,
                                  rtomo_error *err)
{
    plane_job *job = (plane_job *)arg;
    (void)err;
    /* Nothing may still use the buffers; a failure here was reported by
     * the band that caused it. */
    cudaStreamSynchronize(slot->compute);
    cudaFree(job->d_consts);
    cudaFree(job->d_local);
    cudaFree(job->d_out);
    job->d_consts = NULL;
    job->d_local = NULL;
    job->d_out = NULL;
    if (job->events > 0)
        cudaEventDestroy(job->start);
    if (job->events > 1)
        cudaEventDestroy(job->end);
    job->events = 0;
    return RTOMO_OK;
}

static plane_launch launch_of(const cuda_fbp_slot *slot, const plane_job *job)
{
    const rtomo_fbp *plan = job->plan;
    const rtomo_fbp_plane *pl = job->plane;
    plane_launch l;
    l.sino = (const char *)slot->sino;
    l.pitch = slot->sino_pitch;
    l.row_bytes = cuda_fbp_row_offset(slot, plan, 1);
    l.local = job->d_local;
    l.row_first = plan->geom.row_first;
    l.row_count = plan->geom.row_count;
    l.consts = job->d_consts;
    l.n_consts = job->n_consts;
    l.det_width = plan->geom.det_width;
    l.nearest = plan->geom.interp == RTOMO_INTERP_NEAREST;
    l.cz = pl->centre[2];
    l.uz = pl->u[2];
    l.vz = pl->v[2];
    l.cx = pl->centre[0];
    l.ux = pl->u[0];
    l.vx = pl->v[0];
    l.cy = pl->centre[1];
    l.uy = pl->u[1];
    l.vy = pl->v[1];
    l.fov_c = 0.5 * (plan->geom.slice_size - 1);
    l.fov_r2 = plan->fov_limit < 0 ? -1.0
                                   : plan->fov_radius * plan->fov_radius;
    l.width = pl->width;
    l.height = pl->height;
    l.j_first = job->j_first;
    l.rows = job->rows;
    l.out = job->d_out;
    return l;
}

/* Runs on the slot's worker: the slot's partial sum of one band, into
 * job->dest. */
static rtomo_status slot_band(cuda_fbp_slot *slot, void *arg, rtomo_error *err)
{
    plane_job *job = (plane_job *)arg;
    if (!job->runs)
        return RTOMO_OK;
    const plane_launch l = launch_of(slot, job);
    const dim3 block(PLANE_EDGE, PLANE_EDGE);
    const dim3 grid((l.width + PLANE_EDGE - 1) / PLANE_EDGE,
                    (l.rows + PLANE_EDGE - 1) / PLANE_EDGE);
    RTOMO_CUDA_TRY(err, cudaEventRecord(job->start, slot->compute));
    plane_kernel<<<grid, block, 0, slot->compute>>>(l);
    RTOMO_CUDA_CHECK_LAUNCH(err, "plane back-projection");
    RTOMO_CUDA_TRY(err, cudaEventRecord(job->end, slot->compute));
    RTOMO_CUDA_TRY(err, cudaMemcpyAsync(job->dest, job->d_out,
                                        sizeof(float) * (size_t)l.width * (size_t)l.rows,
                                        cudaMemcpyDeviceToHost, slot->compute));
    RTOMO_CUDA_TRY(err, cudaStreamSynchronize(slot->compute));
    float ms = 0.f;
    RTOMO_CUDA_TRY(err, cudaEventElapsedTime(&ms, job->start, job->end));
    job->seconds += 1e-3 * ms;
    return RTOMO_OK;
}

/* ------------------------------------------------------------- caller ---- */

/* Constants of the listed projections, in double, rounded once. */
static plane_const *make_constants(const rtomo_fbp *plan,
                                   const rtomo_fbp_plane *pl, const int *slots,
                                   int n, rtomo_error *err)
{
    plane_const *k = (plane_const *)malloc(sizeof(plane_const) * (size_t)(n > 0 ? n : 1));
    if (!k) {
        rtomo_set_error(err, RTOMO_E_NOMEM,
                        "out of memory for the constants of %d projections", n);
        return NULL;
    }
    const double c = 0.5 * (plan->geom.slice_size - 1);
    for (int i = 0; i < n; i++) {
        const int p = slots ? slots[i] : i;
        const double cs = cos(plan->angles[p]), sn = sin(plan->angles[p]);
        k[i].a = (float)(pl->u[0] * cs - pl->u[1] * sn);
        k[i].b = (float)(pl->v[0] * cs - pl->v[1] * sn);
        k[i].s0 = (float)(plan->geom.axis + plan->axis_shift[p] +
                          (pl->centre[0] - c) * cs - (pl->centre[1] - c) * sn);
        k[i].slot = p;
    }
    return k;
}

/* Kept rows [*lo, *hi] that pixel rows j_first .. j_first+rows-1 can
 * read; *lo > *hi when none.  P.z is affine, so its extremes are at the
 * band's corners; one row of margin either side absorbs any rounding of
 * z on the device. */
static void band_reach(const rtomo_fbp *plan, const rtomo_fbp_plane *pl,
                       int j_first, int rows, int *lo, int *hi)
{
    const double di = 0.5 * (pl->width - 1);
    const double dj[2] = {j_first - 0.5 * (pl->height - 1),
                          j_first + rows - 1 - 0.5 * (pl->height - 1)};
    double zmin = INFINITY, zmax = -INFINITY;
    for (int a = -1; a <= 1; a += 2)
        for (int b = 0; b < 2; b++) {
            const double z = pl->centre[2] + a * di * pl->u[2] + dj[b] * pl->v[2];
            zmin = fmin(zmin, z);
            zmax = fmax(zmax, z);
        }
    const double first = plan->geom.row_first, last = first + plan->geom.row_count - 1;
    const double from = fmax(floor(zmin) - 1.0, first);
    const double to = fmin(ceil(zmax) + 1.0, last);
    if (from > to) {
        *lo = 1;
        *hi = 0;
        return;
    }
    *lo = (int)from - plan->geom.row_first;
    *hi = (int)to - plan->geom.row_first;
}

/* Which slots run for a band, and where each puts it; returns how many
 * run. */
static int assign_band(cuda_fbp_impl *impl, const rtomo_fbp_plane *pl,
                       plane_job *jobs, int j_first, int rows, float *out)
{
    int lo, hi, running = 0;
    band_reach(impl->plan, pl, j_first, rows, &lo, &hi);
    for (int i = 0; i < impl->n_slots; i++) {
        jobs[i].runs = 0;
        jobs[i].j_first = j_first;
        jobs[i].rows = rows;
        jobs[i].dest = jobs[i].host_band;
    }
    for (int r = lo; r <= hi; r++)
        jobs[fbp_partition_owner(&impl->deal, r)].runs = 1;
    for (int i = 0; i < impl->n_slots; i++)
        running += jobs[i].runs;
    /* One slot alone writes the caller's array itself. */
    for (int i = 0; i < impl->n_slots && running == 1; i++)
        if (jobs[i].runs)
            jobs[i].dest = out + (size_t)j_first * (size_t)pl->width;
    return running;
}

/* The band in `out`: the running slots' partial planes added in slot
 * order (the first copied), or zeros where no slot runs. */
static void gather_band(const cuda_fbp_impl *impl, const plane_job *jobs,
                        int running, float *out, size_t pixels)
{
    if (running == 1)
        return;     /* already there */
    if (running == 0) {
        memset(out, 0, sizeof(float) * pixels);
        return;
    }
    int first = 1;
    for (int i = 0; i < impl->n_slots; i++) {
        if (!jobs[i].runs)
            continue;
        const float *part = jobs[i].host_band;
        if (first)
            memcpy(out, part, sizeof(float) * pixels);
        else
            for (size_t k = 0; k < pixels; k++)
                out[k] += part[k];
        first = 0;
    }
}

/* Every band of the plane, after the slots were set up. */
static rtomo_status run_bands(cuda_fbp_impl *impl, const rtomo_fbp_plane *pl,
                              plane_job *jobs, float *out, rtomo_error *err)
{
    const int band_rows = (int)(jobs[0].band_pixels / (size_t)pl->width);
    for (int j = 0; j < pl->height; j += band_rows) {
        const int rows = pl->height - j < band_rows ? pl->height - j : band_rows;
        const int running = assign_band(impl, pl, jobs, j, rows, out);
        if (running > 0) {
            rtomo_status st = cuda_fbp_workers_run(impl, slot_band, jobs,
                                                   sizeof *jobs, err);
            if (st != RTOMO_OK)
                return st;
        }
        gather_band(impl, jobs, running, out + (size_t)j * (size_t)pl->width,
                    (size_t)rows * (size_t)pl->width);
    }
    return RTOMO_OK;
}

/* Pixels per band: BAND_PIXELS, or fewer under the test hook. */
static size_t band_limit(void)
{
    const char *s = getenv("RTOMO_CUDA_FBP_PLANE_BAND");
    if (!s || !*s)
        return BAND_PIXELS;
    char *end;
    const long v = strtol(s, &end, 10);
    if (*end || v < 1 || (size_t)v > BAND_PIXELS)
        return BAND_PIXELS;
    return (size_t)v;
}

/* Host band buffers for every slot (needed only where slots share a band,
 * but which bands do is known only per band). */
static rtomo_status make_jobs(cuda_fbp_impl *impl, const rtomo_fbp_plane *pl,
                              const plane_const *consts, int n, plane_job *jobs,
                              rtomo_error *err)
{
    const size_t pixels = (size_t)pl->width * (size_t)pl->height;
    size_t band = band_limit() / (size_t)pl->width * (size_t)pl->width;
    if (band < (size_t)pl->width)
        band = (size_t)pl->width;
    if (band > pixels)
        band = pixels;
    for (int i = 0; i < impl->n_slots; i++) {
        jobs[i].plan = impl->plan;
        jobs[i].impl = impl;
        jobs[i].plane = pl;
        jobs[i].consts = consts;
        jobs[i].n_consts = n;
        jobs[i].band_pixels = band;
        if (impl->n_slots > 1 &&
            !(jobs[i].host_band = (float *)malloc(sizeof(float) * band)))
            return rtomo_set_error(err, RTOMO_E_NOMEM,
                                   "out of memory for %d partial planes of "
                                   "%.1f MiB", impl->n_slots,
                                   (double)band * sizeof(float) / (1 << 20));
    }
    return RTOMO_OK;
}

extern "C" rtomo_status cuda_fbp_reconstruct_plane(rtomo_fbp *plan,
                                                   const rtomo_fbp_plane *plane,
                                                   const int *slots,
                                                   int n_slots, float *out,
                                                   rtomo_error *err)
{
    cuda_fbp_impl *impl = (cuda_fbp_impl *)plan->impl;
    /* Frames still staged on the host are filtered first, so that the
     * plane sees every projection fed. */
    rtomo_status st = plan->ops->sync(plan, err);
    if (st != RTOMO_OK)
        return st;
    plane_const *consts = make_constants(plan, plane, slots, n_slots, err);
    plane_job *jobs = (plane_job *)calloc((size_t)impl->n_slots, sizeof *jobs);
    if (!consts || !jobs) {
        free(consts);
        free(jobs);
        return consts ? rtomo_set_error(err, RTOMO_E_NOMEM, "out of memory")
                      : RTOMO_E_NOMEM;
    }
    st = make_jobs(impl, plane, consts, n_slots, jobs, err);
    if (st == RTOMO_OK)
        st = cuda_fbp_workers_run(impl, slot_setup, jobs, sizeof *jobs, err);
    if (st == RTOMO_OK)
        st = run_bands(impl, plane, jobs, out, err);
    /* Always: setup may have failed on some slots after others allocated. */
    cuda_fbp_workers_run(impl, slot_teardown, jobs, sizeof *jobs, NULL);
    /* The slots ran concurrently: the call's time is the longest slot's,
     * as for slices (cuda_fbp_backend.cu). */
    double longest = 0.0;
    for (int i = 0; i < impl->n_slots; i++) {
        if (jobs[i].seconds > longest)
            longest = jobs[i].seconds;
        free(jobs[i].host_band);
    }
    plan->stats.backproject_seconds += longest;
    free(jobs);
    free(consts);
    return st;
}
