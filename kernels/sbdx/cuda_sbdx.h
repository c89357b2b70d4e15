/*
 * cuda_sbdx.h — private interface between the CUDA SBDX backend
 * (cuda_sbdx_backend.cu, cuda_sbdx_slot.cu) and its kernel families:
 * the parameter block of every kernel, its launcher, and a host runner that
 * executes the very same per-thread code on the CPU.
 *
 * Why host runners: the kernels' thread bodies are __host__ __device__
 * functions, and a kernel is a fixed sequence of phases separated by
 * __syncthreads().  A host runner replays each phase for every thread of
 * every block in turn, which is exactly what the barriers guarantee, so the
 * index arithmetic, the look-up tables and the staging of every kernel are
 * checked against the CPU reference on machines without a GPU (CI).  Speed
 * and the CUDA runtime plumbing are checked on the device.
 *
 * The algorithm (see docs/perf-sbdx.md for the numbers behind it).  The
 * SBDX weights are separable, so a plane is reconstructed in two gathers:
 *   x-pass  T[k][r][X] = sum over (cx, dx) of wx * frame[cy][cx][dy][dx],
 *           one value per frame row r = (cy, dy) and plane column X;
 *   y-pass  plane[k][Y][X] = scale * sum over (cy, dy) of wy * T[k][r][X],
 *           flat-fielded in the same store when the geometry asks
 *           (rtomo_sbdx_flat_field of sbdx_lut.h: no pass of its own).
 * Both are pixel-centric (threads own what they write, sums stay in
 * registers, no atomics); the x-pass stages frame rows in shared memory.
 * This does 2 multiply-adds per sample and plane instead of the 4 of a
 * direct 2-D gather.  The tables are the paper's pixel-centric LUTs, grouped
 * by residue: plane column X = m q + rho (0 <= rho < m) receives, from hole
 * cx = q - delta, the entries of offset m delta + rho, so one list per
 * (plane, axis, rho) holds every (delta, detector element, weight) that any
 * column of residue rho uses.  Offsets and zero weights that cannot
 * contribute never appear in a list, which is the paper's row skipping.
 */
#ifndef RTOMO_CUDA_SBDX_H
#define RTOMO_CUDA_SBDX_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "engine_internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------ look-up tables ---- */

/* Detector-centric table entry (as rtomo_sbdx_dc_entry in sbdx_lut.h):
 * element d lands at offset floor(t) from the hole centre with weights
 * 1 - f and f of the two pixels offset and offset + 1. */
typedef struct sbdx_gpu_dc {
    int32_t offset;
    float w_lo, w_hi;
} sbdx_gpu_dc;

/* One entry of a residue list: `j` locates the sample relative to the
 * thread's own base index (x: j = dx - delta * stride_x, so the staged
 * sample is at (q - cx_first) * stride_x + j; y: j = dy - delta * det_h, so
 * the frame row is (qy - hole_first) * det_h + j), `w` is its weight. */
typedef struct sbdx_gpu_entry {
    int32_t j;
    float w;
} sbdx_gpu_entry;

/* Tables of every plane along one axis.  Per plane: dc[n_det]; the lists
 * of residue rho are entries [start[rho], start[rho + 1]) of ent, with
 * start holding shift_m + 2 values per plane (one spare, used while the
 * lists are built) and ent 2 n_det slots per plane; response[n_out] is the
 * uniform-frame response of sbdx_lut.h (what a frame of ones reconstructs
 * to is response_x[i] * response_y[j]), which flat-fielding divides by: the
 * plane passes when flat_field = 1 (the composite then takes its field of
 * view from it), the composite's focus measure when the planes are raw. */
typedef struct sbdx_gpu_axis {
    sbdx_gpu_dc *dc;
    int32_t *start;
    sbdx_gpu_entry *ent;
    float *response;
    int n_det;          /* detector elements along this axis */
    int stride;         /* delta multiplier folded into entry.j */
    int n_holes;        /* holes along this axis */
    int origin, n_out;  /* output index i is plane position origin + i */
} sbdx_gpu_axis;

typedef struct sbdx_lut_params {
    const double *ratios;   /* device copy of the n_planes ratios */
    int n_planes, shift_m;
    sbdx_gpu_axis x, y;
} sbdx_lut_params;

/* Values per plane of the start and entry arrays of an axis (macros, so
 * that device code can use them too). */
#define sbdx_start_pitch(shift_m) ((shift_m) + 2)
#define sbdx_entry_pitch(n_det) (2 * (n_det))
/* Floats per staged hole in the x-pass: the detector width made odd, so
 * that lanes reading neighbouring holes hit distinct shared-memory banks.
 * The x tables fold it into entry.j. */
#define sbdx_staged_stride(det_w) ((det_w) | 1)

/* Build the tables (both axes, all planes) with the formulas of sbdx_lut.h
 * in double precision, so that they are bit-identical to the CPU's (the
 * responses, double sums in another order, to the last bit but for
 * rounding ties). */
rtomo_status sbdx_lut_launch(const sbdx_lut_params *p, cudaStream_t stream,
                             rtomo_error *err);
void sbdx_lut_run_on_host(const sbdx_lut_params *p);

/* ------------------------------------------------------------- x-pass ---- */

typedef struct sbdx_xpass_params {
    const void *frame;      /* the slot's hole rows of the frame */
    rtomo_dtype dtype;
    float *t;               /* [planes][rows][ng] */
    const int32_t *start;   /* x lists of the first plane of this group */
    const sbdx_gpu_entry *ent;
    int planes;             /* planes in this group */
    int start_pitch, ent_pitch;
    int holes_x, det_w, det_h, shift_m;
    int rows;               /* frame rows r = (cy - hole_first) * det_h + dy */
    int q0, nq;             /* plane columns X = m q + rho, q in [q0, q0+nq) */
    int q_tile;             /* q values per block (grid.y = ceil(nq/q_tile)) */
    int delta_min, delta_max;   /* delta range over the group's x lists */
    int stride;             /* staged floats per hole (odd: no bank conflicts) */
    int rows_per_block;     /* frame rows staged per block: 1 or 2 */
} sbdx_xpass_params;

/* Shared memory bytes of one x-pass block (the staged rows). */
size_t sbdx_xpass_smem_bytes(const sbdx_xpass_params *p);
/* Holes one block stages for a tile of q_tile columns. */
int sbdx_xpass_staged_holes(const sbdx_xpass_params *p, int q_tile);
/* Raise the kernels' shared-memory limit to `bytes` on the current device.
 * The limit is per kernel, not per plan: set it to the device's maximum so
 * that plans of different sizes do not undo each other's setting. */
rtomo_status sbdx_xpass_prepare(size_t bytes, rtomo_error *err);
rtomo_status sbdx_xpass_launch(const sbdx_xpass_params *p, int threads,
                               cudaStream_t stream, rtomo_error *err);
void sbdx_xpass_run_on_host(const sbdx_xpass_params *p, int threads);

/* ------------------------------------------------------------- y-pass ---- */

typedef struct sbdx_ypass_params {
    const float *t;         /* x-pass output of this group */
    float *planes;          /* [planes][ext_rows][out_w] of this group */
    const int32_t *start;   /* y lists of the group's first plane */
    const sbdx_gpu_entry *ent;
    int planes_n;
    int start_pitch, ent_pitch;
    int rows;               /* frame rows of the slot (as the x-pass) */
    int q0, nq, shift_m, det_h;
    int q_tile;             /* q values per block (grid.z tiles) */
    int out_w, origin_x, origin_y;
    int ext_first, ext_rows;    /* output rows reconstructed by the slot */
    int hole_first;
    float scale;            /* m^2 / (Wd Hd) */
    /* Flat-fielding: the responses of the group's first plane,
     * [planes_n][out_w] and [planes_n][out_h] (row index absolute), or
     * NULL for raw planes. */
    const float *response_x, *response_y;
    int out_h;
} sbdx_ypass_params;

/* A q_tile for the y-pass: its block stages m * q_tile output values. */
int sbdx_ypass_q_tile(int shift_m, int nq);
rtomo_status sbdx_ypass_launch(const sbdx_ypass_params *p, int threads,
                               cudaStream_t stream, rtomo_error *err);
void sbdx_ypass_run_on_host(const sbdx_ypass_params *p, int threads);

/* -------------------------------------------------- detector-centric ---- */

typedef struct sbdx_scatter_params {
    const void *frame;      /* the slot's hole rows */
    rtomo_dtype dtype;
    float *planes;          /* [n_planes][ext_rows][out_w], zeroed first */
    const sbdx_gpu_dc *dc_x, *dc_y;
    int n_planes;
    int holes_x, hole_first, hole_rows, det_w, det_h, shift_m;
    int out_w, origin_x, origin_y, ext_first, ext_rows;
    float scale;
    /* Flat-fielding: the responses of all planes, [n_planes][out_w] and
     * [n_planes][out_h] (row index absolute), or NULL for raw planes. */
    const float *response_x, *response_y;
    int out_h;
} sbdx_scatter_params;

/* Zeroes the planes, scatters every sample with atomic adds, then (with
 * responses) flat-fields the planes in a pass of their own: a scattered
 * pixel is complete only when every thread is done. */
rtomo_status sbdx_scatter_launch(const sbdx_scatter_params *p,
                                 cudaStream_t stream, rtomo_error *err);
void sbdx_scatter_run_on_host(const sbdx_scatter_params *p);

/* ---------------------------------------------------------- composite ---- */

typedef struct sbdx_composite_params {
    const float *planes;    /* [n_planes][ext_rows][width] */
    /* Responses, [n_planes][width] and [n_planes][height]: divided by for
     * raw planes, the field of view for flat-fielded ones (flat_fielded
     * below); NULL (both, raw planes only) to judge the planes as they
     * are. */
    const float *response_x;
    const float *response_y;
    int n_planes, width, height, radius;
    int ext_first, ext_rows;
    int own_first, own_rows;
    float *composite;       /* [own_rows][width] */
    uint16_t *depth;        /* [own_rows][width] */
    int flat_fielded;       /* planes flat-fielded already (sbdx_composite.h) */
} sbdx_composite_params;

/* Shared memory bytes of one composite block for a radius. */
size_t sbdx_composite_smem_bytes(int radius);
rtomo_status sbdx_composite_prepare(size_t bytes, rtomo_error *err);
rtomo_status sbdx_composite_launch(const sbdx_composite_params *p,
                                   cudaStream_t stream, rtomo_error *err);
void sbdx_composite_run_on_host(const sbdx_composite_params *p);

/* ------------------------------------------------------ 16-bit output ---- */

typedef struct sbdx_u16_params {
    const float *planes;    /* [n_planes][ext_rows][width] */
    int n_planes, width, ext_rows;
    int row_offset, rows;   /* rows [row_offset, row_offset + rows) of each */
    float offset, scale;
    uint16_t *out;          /* [n_planes][rows][width] */
} sbdx_u16_params;

rtomo_status sbdx_u16_launch(const sbdx_u16_params *p, cudaStream_t stream,
                             rtomo_error *err);
void sbdx_u16_run_on_host(const sbdx_u16_params *p);

/* ------------------------------------------------------------ helpers ---- */

/* Integer floor division and non-negative remainder for b > 0. */
static inline int sbdx_floor_div(int a, int b)
{
    int q = a / b;
    return (a % b != 0 && a < 0) ? q - 1 : q;
}

/* Offset range [lo, hi] that any plane's deposits reach along an axis of
 * n_det elements: floor(n (0 - c)) .. floor(n (n_det - 1 - c)) + 1. */
void sbdx_offset_range(const double *ratios, int n_planes, int n_det,
                       int *lo, int *hi);

#ifdef __cplusplus
}
#endif

#endif /* RTOMO_CUDA_SBDX_H */
