/*
 * cuda_cone_sf.cu — the separable-footprint cone-beam pair's launchers,
 * its first kernels and the vector kernels the solvers need (dot, axpby,
 * mul, clamp) and the adds of a split pair's row windows (add_window).
 * Everything runs on the stream of the cuda_cone_sf given (the pair's,
 * or a device's or slab's view of a split pair); A, A^T and the vector
 * ops wait for their results, the _raw launchers, the amplitude and
 * add_window only queue.  A and A^T run the z-column kernels of
 * cuda_cone_sf_column_{project,backproject}.cu (issue 15: 2.9x faster
 * for the pair,
 * PERFORMANCE.md run 46) unless RTOMO_CONE_SF_KERNEL=old picks the first
 * kernels below, kept to compare the two in one session.
 *
 * The first kernels.  A^T (backproject) is a gather: one thread per voxel
 * column (x, y) and CUDA_SF_ZBLOCK voxels of it, accumulated in registers
 * over every projection (the paper's z column per thread).  Per projection the
 * column's transaxial footprint (cone_sf_column_at: four corners, the
 * amplitude, the magnification) and its cells' weights F1 (in registers,
 * up to SF_CELLS cells) are computed once for the thread's voxels; each
 * voxel then sums F2(t) F1(s) over its 2 or 3 rows and the footprint's
 * cells.
 *
 * A (project) scatters: one thread per column and z block; it gathers its
 * voxels' contributions per detector row first (C[t] = sum_z F2_z(t)
 * f(z), at most CUDA_SF_ROWS rows, in registers), then adds
 * l_phi F1(s) C[t] into the cells with atomicAdd (threads of neighbouring
 * columns share cells).  So the order of float sums differs from run to
 * run; the weights are the CPU's.  l_theta is applied to whole
 * projections afterwards (A) or before (A^T), as on the CPU.
 */
#include "config.h"

#include "cone_sf.h"
#include "cuda_cone_sf.h"

#define SF_BLOCK_X 32
#define SF_BLOCK_Y 4
#define VEC_THREADS 256
/* Cells of a footprint whose weights F1 a thread keeps in registers, once
 * per column and projection (wider footprints, of voxels much larger than
 * the detector's pixels, compute them where they are used). */
#define SF_CELLS 8

/* F1 of cells s0 .. s0 + SF_CELLS - 1 (0 beyond s1) into f; 1 when the
 * footprint fits, else 0 (and f is not used). */
__device__ __forceinline__ int sf_weights(const cone_sf_column *c, int s0,
                                          int s1, float f[SF_CELLS])
{
    const int fits = s1 - s0 < SF_CELLS;
#pragma unroll
    for (int q = 0; q < SF_CELLS; q++)
        f[q] = fits && s0 + q <= s1 ? cone_sf_f1(c, s0 + q) : 0.0f;
    return fits;
}

/* sum_s F1(s) row[s] over the footprint. */
__device__ __forceinline__ float sf_row_sum(const cone_sf_column *c, int s0,
                                            int s1, int fits,
                                            const float f[SF_CELLS],
                                            const float *row)
{
    float r = 0.0f;
    if (fits) {
#pragma unroll
        for (int q = 0; q < SF_CELLS; q++)
            if (s0 + q <= s1)
                r += f[q] * __ldg(row + s0 + q);
    } else {
        for (int s = s0; s <= s1; s++)
            r += cone_sf_f1(c, s) * __ldg(row + s);
    }
    return r;
}

/* Cells s0..s1 of the footprint on the detector; 0 when none. */
__device__ __forceinline__ int sf_cells(const cone_bp_const *k,
                                        const cone_sf_column *c, int *s0,
                                        int *s1)
{
    cone_sf_cells(c, s0, s1);
    *s0 = *s0 < 0 ? 0 : *s0;
    *s1 = *s1 >= k->det_u ? k->det_u - 1 : *s1;
    return *s0 <= *s1;
}

/* The rows of voxel z (ROI index) clipped to the detector. */
__device__ __forceinline__ void sf_voxel_rows(const cone_bp_const *k,
                                              const cone_sf_column *c, int z,
                                              float *lo, float *hi, int *ta,
                                              int *tb)
{
    cone_sf_rows(k, c, k->z0 + (float)z * k->voxel, lo, hi);
    *ta = (int)floorf(*lo + 0.5f);
    *tb = (int)floorf(*hi + 0.5f);
    *ta = *ta < 0 ? 0 : *ta;
    *tb = *tb >= k->det_v ? k->det_v - 1 : *tb;
}

__global__ void __launch_bounds__(SF_BLOCK_X * SF_BLOCK_Y)
cone_sf_backproject_kernel(const cone_bp_const k, int n_proj,
                           const float *__restrict__ cos_b,
                           const float *__restrict__ sin_b,
                           const float *__restrict__ proj, size_t frame_len,
                           float *volume)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    const int j = blockIdx.y * blockDim.y + threadIdx.y;
    const int z0 = blockIdx.z * CUDA_SF_ZBLOCK;
    if (i >= k.nx || j >= k.ny)
        return;
    const float x = k.x0 + (float)i * k.voxel;
    const float y = k.y0 + (float)j * k.voxel;
    float acc[CUDA_SF_ZBLOCK];
#pragma unroll
    for (int m = 0; m < CUDA_SF_ZBLOCK; m++)
        acc[m] = 0.0f;
    for (int p = 0; p < n_proj; p++) {
        const cone_sf_column c = cone_sf_column_at(&k, cos_b[p], sin_b[p],
                                                   x, y);
        int s0, s1;
        if (!sf_cells(&k, &c, &s0, &s1))
            continue;
        float f[SF_CELLS];
        const int fits = sf_weights(&c, s0, s1, f);
        const float *q = proj + (size_t)p * frame_len;
#pragma unroll
        for (int m = 0; m < CUDA_SF_ZBLOCK; m++) {
            if (z0 + m >= k.nz)
                break;
            float lo, hi;
            int ta, tb;
            sf_voxel_rows(&k, &c, z0 + m, &lo, &hi, &ta, &tb);
            float b = 0.0f;
            for (int t = ta; t <= tb; t++)
                b += cone_sf_f2(lo, hi, t) *
                     sf_row_sum(&c, s0, s1, fits, f, q + (size_t)t * k.det_u);
            acc[m] += c.amp * b;
        }
    }
    const size_t plane = (size_t)k.nx * (size_t)k.ny;
    float *out = volume + (size_t)z0 * plane + (size_t)j * k.nx + i;
#pragma unroll
    for (int m = 0; m < CUDA_SF_ZBLOCK; m++)
        if (z0 + m < k.nz)
            out[(size_t)m * plane] = acc[m];
}

/* Add F1(s) value into the cells of a row. */
__device__ __forceinline__ void sf_spread(const cone_sf_column *c, int s0,
                                          int s1, int fits,
                                          const float f[SF_CELLS],
                                          float value, float *row)
{
    if (fits) {
#pragma unroll
        for (int q = 0; q < SF_CELLS; q++)
            if (s0 + q <= s1)
                atomicAdd(row + s0 + q, f[q] * value);
    } else {
        for (int s = s0; s <= s1; s++)
            atomicAdd(row + s, cone_sf_f1(c, s) * value);
    }
}

__global__ void __launch_bounds__(SF_BLOCK_X * SF_BLOCK_Y)
cone_sf_project_kernel(const cone_bp_const k, int p, float cos_b, float sin_b,
                       const float *__restrict__ volume, float *proj)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    const int j = blockIdx.y * blockDim.y + threadIdx.y;
    const int z0 = blockIdx.z * CUDA_SF_ZBLOCK;
    if (i >= k.nx || j >= k.ny)
        return;
    const float x = k.x0 + (float)i * k.voxel;
    const float y = k.y0 + (float)j * k.voxel;
    const cone_sf_column c = cone_sf_column_at(&k, cos_b, sin_b, x, y);
    int s0, s1;
    if (!sf_cells(&k, &c, &s0, &s1))
        return;
    float f1w[SF_CELLS];
    const int fits = sf_weights(&c, s0, s1, f1w);
    const int z_end = z0 + CUDA_SF_ZBLOCK < k.nz ? z0 + CUDA_SF_ZBLOCK : k.nz;
    /* The block's rows: from its first voxel's first to its last's last. */
    float lo, hi;
    int t_first, t_last, ta, tb;
    sf_voxel_rows(&k, &c, z0, &lo, &hi, &t_first, &tb);
    sf_voxel_rows(&k, &c, z_end - 1, &lo, &hi, &ta, &t_last);
    if (t_first > t_last)
        return;
    const size_t plane = (size_t)k.nx * (size_t)k.ny;
    const float *vox = volume + (size_t)j * k.nx + i;
    const int gather = t_last - t_first < CUDA_SF_ROWS;
    float rows[CUDA_SF_ROWS];
#pragma unroll
    for (int r = 0; r < CUDA_SF_ROWS; r++)
        rows[r] = 0.0f;
    for (int z = z0; z < z_end; z++) {
        const float f = vox[(size_t)z * plane];
        if (f == 0.0f)
            continue;
        sf_voxel_rows(&k, &c, z, &lo, &hi, &ta, &tb);
        for (int t = ta; t <= tb; t++) {
            const float w = cone_sf_f2(lo, hi, t) * f;
            if (gather)
                rows[t - t_first] += w;
            else
                sf_spread(&c, s0, s1, fits, f1w, c.amp * w,
                          proj + (size_t)t * k.det_u);
        }
    }
    if (!gather)
        return;
    for (int t = t_first; t <= t_last; t++) {
        const float v = c.amp * rows[t - t_first];
        if (v != 0.0f)
            sf_spread(&c, s0, s1, fits, f1w, v, proj + (size_t)t * k.det_u);
    }
}

/* y[c] = x[c] amp[c % frame] for n_proj frames (x may be y). */
__global__ void cone_sf_amplitude_kernel(const float *x, const float *amp,
                                         size_t frame, size_t n, float *y)
{
    const size_t c = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (c < n)
        y[c] = x[c] * amp[c % frame];
}

static dim3 sf_grid(const cone_bp_const *k)
{
    return dim3((k->nx + SF_BLOCK_X - 1) / SF_BLOCK_X,
                (k->ny + SF_BLOCK_Y - 1) / SF_BLOCK_Y,
                (k->nz + CUDA_SF_ZBLOCK - 1) / CUDA_SF_ZBLOCK);
}

static unsigned vec_blocks(size_t n)
{
    return (unsigned)((n + VEC_THREADS - 1) / VEC_THREADS);
}

/* The first A: one launch per projection, atomics into its cells. */
static rtomo_status project_old(cuda_cone_sf *s, const float *volume,
                                float *projections, rtomo_error *err)
{
    const dim3 block(SF_BLOCK_X, SF_BLOCK_Y);
    for (int p = 0; p < s->n_proj; p++) {
        /* One projection per launch: its cells are the only ones the
         * launch's atomics touch. */
        cone_sf_project_kernel<<<sf_grid(&s->k), block, 0, s->stream>>>(
            s->k, p, s->cos_host[p], s->sin_host[p], volume,
            projections + (size_t)p * s->frame_len);
        RTOMO_CUDA_CHECK_LAUNCH(err, "cone_sf_project_kernel");
    }
    return RTOMO_OK;
}

extern "C" rtomo_status cuda_cone_sf_project_raw(cuda_cone_sf *s,
                                                 const float *volume,
                                                 float *projections,
                                                 rtomo_error *err)
{
    return s->old_kernels
               ? project_old(s, volume, projections, err)
               : cuda_cone_sf_project_columns(s, volume, projections, err);
}

extern "C" rtomo_status cuda_cone_sf_backproject_raw(cuda_cone_sf *s,
                                                     const float *weighted,
                                                     float *volume,
                                                     rtomo_error *err)
{
    if (!s->old_kernels)
        return cuda_cone_sf_backproject_columns(s, weighted, volume, err);
    const dim3 block(SF_BLOCK_X, SF_BLOCK_Y);
    cone_sf_backproject_kernel<<<sf_grid(&s->k), block, 0, s->stream>>>(
        s->k, s->n_proj, s->cos_b, s->sin_b, weighted, s->frame_len, volume);
    RTOMO_CUDA_CHECK_LAUNCH(err, "cone_sf_backproject_kernel");
    return RTOMO_OK;
}

extern "C" rtomo_status cuda_cone_sf_amplitude(cuda_cone_sf *s,
                                               const float *in, float *out,
                                               rtomo_error *err)
{
    const size_t n = s->frame_len * (size_t)s->n_proj;
    cone_sf_amplitude_kernel<<<vec_blocks(n), VEC_THREADS, 0, s->stream>>>(
        in, s->amp_theta, s->frame_len, n, out);
    RTOMO_CUDA_CHECK_LAUNCH(err, "cone_sf_amplitude_kernel");
    return RTOMO_OK;
}

extern "C" rtomo_status cuda_cone_sf_project(cuda_cone_sf *s,
                                             const float *volume,
                                             float *projections,
                                             rtomo_error *err)
{
    const size_t n = s->frame_len * (size_t)s->n_proj;
    RTOMO_CUDA_TRY(err, cudaMemsetAsync(projections, 0, sizeof(float) * n,
                                        s->stream));
    rtomo_status st = cuda_cone_sf_project_raw(s, volume, projections, err);
    if (st == RTOMO_OK)
        st = cuda_cone_sf_amplitude(s, projections, projections, err);
    if (st != RTOMO_OK)
        return st;
    RTOMO_CUDA_TRY(err, cudaStreamSynchronize(s->stream));
    return RTOMO_OK;
}

extern "C" rtomo_status cuda_cone_sf_backproject(cuda_cone_sf *s,
                                                 const float *projections,
                                                 float *volume,
                                                 rtomo_error *err)
{
    rtomo_status st = cuda_cone_sf_amplitude(s, projections, s->weighted,
                                             err);
    if (st == RTOMO_OK)
        st = cuda_cone_sf_backproject_raw(s, s->weighted, volume, err);
    if (st != RTOMO_OK)
        return st;
    RTOMO_CUDA_TRY(err, cudaStreamSynchronize(s->stream));
    return RTOMO_OK;
}

/* y[p frame + offset + c] += window[p win + c] for c < win, every frame
 * p (n = n_proj win). */
__global__ void cone_sf_add_window_kernel(const float *window, size_t win,
                                          size_t offset, size_t frame,
                                          size_t n, float *y)
{
    const size_t c = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (c < n) {
        const size_t p = c / win;
        y[p * frame + offset + (c - p * win)] += window[c];
    }
}

extern "C" rtomo_status cuda_cone_sf_add_window(cuda_cone_sf *s,
                                                const float *window,
                                                int row0, int rows,
                                                float *projections,
                                                rtomo_error *err)
{
    const size_t win = (size_t)rows * (size_t)s->k.det_u;
    const size_t n = win * (size_t)s->n_proj;
    if (n == 0)
        return RTOMO_OK;
    cone_sf_add_window_kernel<<<vec_blocks(n), VEC_THREADS, 0, s->stream>>>(
        window, win, (size_t)row0 * (size_t)s->k.det_u, s->frame_len, n,
        projections);
    RTOMO_CUDA_CHECK_LAUNCH(err, "cone_sf_add_window_kernel");
    return RTOMO_OK;
}

/* ------------------------------------------------------------ vectors ---- */

__global__ void cone_sf_dot_kernel(const float *a, const float *b, size_t n,
                                   double *partial)
{
    __shared__ double sum[VEC_THREADS];
    double t = 0.0;
    for (size_t c = (size_t)blockIdx.x * VEC_THREADS + threadIdx.x; c < n;
         c += (size_t)gridDim.x * VEC_THREADS)
        t += (double)a[c] * (double)b[c];
    sum[threadIdx.x] = t;
    __syncthreads();
    for (int w = VEC_THREADS / 2; w > 0; w >>= 1) {
        if ((int)threadIdx.x < w)
            sum[threadIdx.x] += sum[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0)
        partial[blockIdx.x] = sum[0];
}

extern "C" rtomo_status cuda_cone_sf_dot(cuda_cone_sf *s, const float *a,
                                         const float *b, size_t n,
                                         double *out, rtomo_error *err)
{
    unsigned blocks = vec_blocks(n);
    blocks = blocks > CUDA_SF_DOT_BLOCKS ? CUDA_SF_DOT_BLOCKS : blocks;
    blocks = blocks < 1 ? 1 : blocks;
    cone_sf_dot_kernel<<<blocks, VEC_THREADS, 0, s->stream>>>(a, b, n,
                                                             s->partial);
    RTOMO_CUDA_CHECK_LAUNCH(err, "cone_sf_dot_kernel");
    RTOMO_CUDA_TRY(err, cudaMemcpyAsync(s->partial_host, s->partial,
                                        sizeof(double) * blocks,
                                        cudaMemcpyDeviceToHost, s->stream));
    RTOMO_CUDA_TRY(err, cudaStreamSynchronize(s->stream));
    double total = 0.0;
    for (unsigned i = 0; i < blocks; i++)
        total += s->partial_host[i];
    *out = total;
    return RTOMO_OK;
}

__global__ void cone_sf_axpby_kernel(float alpha, const float *x, float beta,
                                     float *y, size_t n)
{
    const size_t c = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (c < n)
        y[c] = beta == 0.0f ? alpha * x[c] : alpha * x[c] + beta * y[c];
}

extern "C" rtomo_status cuda_cone_sf_axpby(cuda_cone_sf *s, float alpha,
                                           const float *x, float beta,
                                           float *y, size_t n,
                                           rtomo_error *err)
{
    cone_sf_axpby_kernel<<<vec_blocks(n), VEC_THREADS, 0, s->stream>>>(
        alpha, x, beta, y, n);
    RTOMO_CUDA_CHECK_LAUNCH(err, "cone_sf_axpby_kernel");
    RTOMO_CUDA_TRY(err, cudaStreamSynchronize(s->stream));
    return RTOMO_OK;
}

__global__ void cone_sf_mul_kernel(const float *w, float *y, size_t n)
{
    const size_t c = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (c < n)
        y[c] *= w[c];
}

extern "C" rtomo_status cuda_cone_sf_mul(cuda_cone_sf *s, const float *w,
                                         float *y, size_t n, rtomo_error *err)
{
    cone_sf_mul_kernel<<<vec_blocks(n), VEC_THREADS, 0, s->stream>>>(w, y, n);
    RTOMO_CUDA_CHECK_LAUNCH(err, "cone_sf_mul_kernel");
    RTOMO_CUDA_TRY(err, cudaStreamSynchronize(s->stream));
    return RTOMO_OK;
}

__global__ void cone_sf_clamp_kernel(float *x, size_t n)
{
    const size_t c = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (c < n)
        x[c] = x[c] > 0.0f ? x[c] : 0.0f;
}

extern "C" rtomo_status cuda_cone_sf_clamp(cuda_cone_sf *s, float *x,
                                           size_t n, rtomo_error *err)
{
    cone_sf_clamp_kernel<<<vec_blocks(n), VEC_THREADS, 0, s->stream>>>(x, n);
    RTOMO_CUDA_CHECK_LAUNCH(err, "cone_sf_clamp_kernel");
    RTOMO_CUDA_TRY(err, cudaStreamSynchronize(s->stream));
    return RTOMO_OK;
}
