/*
 * sbdx_lut.h — the look-up tables of SBDX shift-and-add tomosynthesis, in a
 * backend-neutral form: the CPU backend reconstructs from them and the CUDA
 * backend stages them in shared memory (or regenerates them on the GPU with
 * the same formulas, below).
 *
 * The geometry is separable (rtomo_engine.h, SBDX section): for plane k with
 * ratio n, hole c and detector element d along one axis (x or y), the sample
 * lands at plane position  P = m c + t(d),  t(d) = n (d - (N_d - 1)/2),
 * independent of the hole except for the integer shift m c.  So each plane
 * has one table per axis, and the 2-D weight of a sample is the product of
 * the x and y weights.
 *
 * Formulas (evaluated in double precision, then the weights rounded to
 * float; a GPU generator must use the same expressions to reproduce them):
 *     t      = n * (d - (N_d - 1) / 2.0)
 *     offset = floor(t)                    (paper eqs. 5, 6)
 *     f      = t - offset                  (paper eqs. 7, 8)
 *     w_lo   = (float)(1.0 - f)            weight of pixel  m c + offset
 *     w_hi   = (float)f                    weight of pixel  m c + offset + 1
 *
 * Detector-centric table (scatter): dc[d] = {offset, w_lo, w_hi} for
 * d = 0 .. N_d-1.  The offsets are non-decreasing in d because n > 0.
 *
 * Pixel-centric table (gather), compact layout.  Offsets o = P - m c run over
 * the span [span_first, span_first + span_len), span_first = dc[0].offset,
 * span_len = dc[N_d-1].offset + 2 - span_first.  Offset o has the entries
 *     pc[start[o - span_first]] .. pc[start[o - span_first + 1] - 1]
 * each {det, weight}: detector element `det` deposits `weight` into offset o
 * (weight w_lo where dc[det].offset == o, w_hi where dc[det].offset + 1 == o).
 * Entries of one offset are sorted by det.  Entries whose weight is exactly
 * 0 (w_hi when f == 0) are left out; otherwise the table is the exact
 * transpose of the detector-centric one.  For n < 1 several elements share an
 * offset (max_per_offset > 2); for n > 1 some offsets have no entry
 * (start[i] == start[i+1]), which is what lets the gather skip them.
 *
 * Sizes a GPU kernel needs (per plane and axis; all at most a few KiB for the
 * reference configuration):
 *     span_len      <= ceil(n (N_d - 1)) + 2
 *     n_entries     <= 2 N_d
 *     shared bytes  =  rtomo_sbdx_axis_lut_table_bytes():
 *                      4 (span_len + 1)  (start, int32)
 *                    + 8 n_entries       (entries, int32 det + float weight)
 *
 * Holes per output coordinate (row skipping by separability).  Output index
 * i (plane position P = origin + i) receives samples only from holes c with
 * a non-empty entry list at offset P - m c.  holes[hole_start[i]] ..
 * holes[hole_start[i+1] - 1] lists those c in ascending order; along y this
 * is the list of hole rows cy that contribute to output row i, so a gather
 * never looks at the hole rows that cannot reach it.  max_holes is the
 * longest list (<= ceil(span_len / m)).  Parallel to holes[],
 * hole_entry_first[h] and hole_entry_count[h] locate that hole's entries at
 * that output index (pc[first] .. pc[first + count - 1]), so a gather needs
 * no offset arithmetic.
 *
 * Uniform response.  A frame of constant value v reconstructs on plane k to
 * exactly  v * x[k].response[i] * y[k].response[j]  (up to float rounding),
 * where along one axis
 *     response[i] = (m / N_d) * sum over holes c of holes(i), and over the
 *                   entries of offset (origin + i) - m c, of the weight.
 * The sum is exact, so that every backend (and any implementation of
 * PROTOCOL.md 3.7) gets the same float bit for bit whatever order it adds
 * in: each float weight w becomes the integer floor(w 2^48)
 * (rtomo_sbdx_weight_fixed: exact for w >= 2^-25, where every float is a
 * multiple of 2^-48; smaller weights lose less than 2^-48 each), the
 * integers are summed (at most 2 N_d terms of at most 2^48: far from
 * overflow), and rtomo_sbdx_response() turns the sum S into
 *     response = (float)(((double)S / 2^48) * ((double)m / N_d)).
 * Its mean over whole periods of m inside the field of view is 1 (which is
 * what the m^2/(Wd*Hd) plane scale provides), but single pixels ripple
 * around 1: bilinear deposits from a regular grid of rays sample the plane
 * unevenly unless the ray spacing n and the hole shift m line up (n = 2
 * with an even N_d and an even m leaves alternate pixels empty).
 * Flat-fielding (rtomo_engine.h, flat_field) divides every plane pixel by
 * R = x[k].response[i] * y[k].response[j] with rtomo_sbdx_flat_field()
 * below, the one expression that every backend evaluates; the composite
 * judges focus on flat-fielded values (sbdx_composite.h).
 */
#ifndef RTOMO_SBDX_LUT_H
#define RTOMO_SBDX_LUT_H

#include <stddef.h>
#include <stdint.h>

#include "rtomo_engine.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One detector element of the detector-centric table. */
typedef struct rtomo_sbdx_dc_entry {
    int32_t offset;     /* floor(t): pixel offset from the hole centre m c */
    float w_lo;         /* 1 - f: weight of pixel m c + offset */
    float w_hi;         /* f: weight of pixel m c + offset + 1 */
} rtomo_sbdx_dc_entry;

/* One deposit of the pixel-centric table. */
typedef struct rtomo_sbdx_pc_entry {
    int32_t det;        /* detector element index along the axis */
    float weight;       /* its weight at this offset (never 0) */
} rtomo_sbdx_pc_entry;

/* The tables of one plane along one axis. */
typedef struct rtomo_sbdx_axis_lut {
    double ratio;               /* n of the plane */
    int n_det;                  /* detector elements along the axis, N_d */
    int shift_m;                /* m */
    int n_holes;                /* holes along the axis */
    int origin, n_out;          /* output index i is plane position origin+i */

    rtomo_sbdx_dc_entry *dc;    /* [n_det] */

    int span_first;             /* smallest offset with possible entries */
    int span_len;               /* offsets span_first .. +span_len-1 */
    int32_t *start;             /* [span_len + 1] into pc */
    rtomo_sbdx_pc_entry *pc;    /* [n_entries] */
    int n_entries;
    int max_per_offset;         /* longest entry list of one offset */

    int32_t *hole_start;        /* [n_out + 1] into holes */
    int32_t *holes;             /* [hole_start[n_out]] hole indices */
    int32_t *hole_entry_first;  /* [hole_start[n_out]] into pc */
    int32_t *hole_entry_count;  /* [hole_start[n_out]] (>= 1) */
    int max_holes;              /* longest hole list of one output index */

    float *response;            /* [n_out] uniform-frame response (above) */
} rtomo_sbdx_axis_lut;

/* All tables of a plan: x[k] and y[k] for plane k. */
typedef struct rtomo_sbdx_lut {
    int n_planes;
    rtomo_sbdx_axis_lut *x, *y;
} rtomo_sbdx_lut;

/*
 * Build the tables of every plane for a geometry (out_width/out_height of 0
 * mean the defaults, as in rtomo_engine.h).  Returns NULL with err set on an
 * invalid geometry (RTOMO_E_INVALID) or when memory runs out (RTOMO_E_NOMEM).
 */
rtomo_sbdx_lut *rtomo_sbdx_lut_create(const rtomo_sbdx_geometry *g,
                                      rtomo_error *err);
void rtomo_sbdx_lut_destroy(rtomo_sbdx_lut *lut);

/* The pixel-centric entries of plane offset o (any integer: offsets outside
 * the span have none).  Returns the count and stores the first entry in
 * *first (untouched when the count is 0).  Inline: gathers call it per
 * hole and pixel. */
static inline int rtomo_sbdx_axis_lut_entries(const rtomo_sbdx_axis_lut *a,
                                              int offset,
                                              const rtomo_sbdx_pc_entry **first)
{
    long o = (long)offset - a->span_first;
    if (o < 0 || o >= a->span_len)
        return 0;
    int n = a->start[o + 1] - a->start[o];
    if (n > 0)
        *first = a->pc + a->start[o];
    return n;
}

/* Lets CUDA device code call the inline helpers below. */
#ifdef __CUDACC__
#define RTOMO_SBDX_HOST_DEVICE __host__ __device__
#else
#define RTOMO_SBDX_HOST_DEVICE
#endif

/* 2^48: the fixed-point unit of the exact response sum (above). */
#define RTOMO_SBDX_WEIGHT_ONE 281474976710656.0

/* A weight (0 <= w <= 1) as an integer count of 2^-48, truncated. */
static inline RTOMO_SBDX_HOST_DEVICE int64_t rtomo_sbdx_weight_fixed(float w)
{
    return (int64_t)((double)w * RTOMO_SBDX_WEIGHT_ONE);
}

/* The uniform response of one output index along an axis from the exact
 * fixed-point sum of its weights: the same expression on every backend. */
static inline RTOMO_SBDX_HOST_DEVICE float rtomo_sbdx_response(int64_t sum,
                                                               int shift_m,
                                                               int n_det)
{
    return (float)(((double)sum / RTOMO_SBDX_WEIGHT_ONE) *
                   ((double)shift_m / n_det));
}

/* Whether a pixel whose axis responses are rx, ry is in the field of view
 * of flat-fielding: their product, exact in double, reaches
 * RTOMO_SBDX_FIELD_OF_VIEW_MIN (rtomo_engine.h: the floor less a margin
 * far above rounding, so that a response of exactly the floor is in). */
static inline RTOMO_SBDX_HOST_DEVICE int rtomo_sbdx_in_field_of_view(float rx,
                                                                     float ry)
{
    return (double)rx * (double)ry >= RTOMO_SBDX_FIELD_OF_VIEW_MIN;
}

/* A plane value flat-fielded by the axis responses rx, ry of its pixel:
 * raw / (rx * ry) in the field of view, 0 outside it.  In float, with a
 * true division, so that backends agree to the rounding of the raw value
 * alone. */
static inline RTOMO_SBDX_HOST_DEVICE float rtomo_sbdx_flat_field(float raw,
                                                                 float rx,
                                                                 float ry)
{
    return rtomo_sbdx_in_field_of_view(rx, ry) ? raw / (rx * ry) : 0.0f;
}

/* Bytes of the pixel-centric tables of one axis (start + entries): what a
 * gather kernel stages in shared memory for one plane and axis. */
size_t rtomo_sbdx_axis_lut_table_bytes(const rtomo_sbdx_axis_lut *a);

#ifdef __cplusplus
}
#endif

#endif /* RTOMO_SBDX_LUT_H */
