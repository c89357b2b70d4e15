/*
 * iter_internal.h — the iterative engine's plan, its backend ops table and
 * the matched projector pair's footprint, shared by the backend-neutral
 * front end (iter_engine.c: argument checks, SIRT and CGLS, written once)
 * and the backends (cpu_iter.c; cuda_iter*.cu).  Private to kernels/.
 *
 * Division of labour
 *   - The front end validates every argument and the geometry, copies it
 *     (angles, axis shifts), and runs the solvers.  A backend receives only
 *     valid requests and need not re-check them.
 *   - The solvers work on vectors that live where the backend computes
 *     (iter_vec: host memory on the CPU, device memory on the GPU): a
 *     solve uploads the sinograms (and the start) once, iterates with the
 *     ops below without touching the host except for per-row scalars
 *     (dot products come back as doubles, scalars go in as doubles), and
 *     downloads the images at the end and whenever a progress callback
 *     wants to see them.  So a GPU keeps every vector on the device.
 *   - Every op is synchronous: it returns when its result is in place (a
 *     backend may use streams inside a call).  The front end times
 *     project/backproject on the host clock (rtomo_now_seconds) for
 *     rtomo_iter_result.
 *
 * The matched pair: separable footprint (SF-TR, Long, Fessler & Balter,
 * IEEE TMI 29 (2010) 1839) for parallel beam, which is exact here.  A pixel
 * (x, y) of the slice grid (unit pixels, the detector's bin size) projects
 * at angle a_p onto the detector at its centre
 *     s_c = axis + axis_shift[p] + (x - c) cos a_p - (y - c) sin a_p,
 *     c = (slice_size - 1) / 2
 * (the FBP convention), and its footprint there is the chord length of the
 * unit square along the rays: a trapezoid, the convolution of boxes of
 * width |cos a_p| and |sin a_p|, of area 1 (the pixel's area).  Bin j
 * covers [j - 1/2, j + 1/2]; A[(p, j), (x, y)] is the integral of the
 * footprint over the bin (bins of width 1: the bin's mean line integral),
 * so A of an image in attenuation per pixel gives line integrals, exactly
 * for the pixelated image.  Bins outside [0, det_width) get nothing.  A
 * footprint is at most |cos| + |sin| <= sqrt 2 wide, so it touches at most
 * three bins j0, j0 + 1, j0 + 2: iter_sf_weights() below gives them, in
 * float, the same code for A and A^T on every backend (host and device),
 * so A^T is A's exact transpose up to the order of float sums.
 *   Why SF rather than pixel-driven linear interpolation (the FBP
 * back-projector's kernel): pixel-driven projection samples the footprint
 * instead of integrating it, and at 45 degrees (pixel centres projected
 * 1/sqrt 2 apart) a constant image projects with a +-10% ripple from bin
 * to bin; SF integrates the footprint exactly and costs two CDF
 * evaluations (a few selects and multiply-adds) per pixel and projection,
 * with the same memory traffic.  The two pairs have the same cost
 * structure on a GPU (gather per pixel for A^T, per bin or scatter for A).
 */
#ifndef RTOMO_ITER_INTERNAL_H
#define RTOMO_ITER_INTERNAL_H

#include <math.h>
#include <stddef.h>

#include "rtomo_engine.h"

#ifdef __CUDACC__
#define ITER_HD __host__ __device__ __forceinline__
#else
#define ITER_HD static inline
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------ footprint ---- */

/* Per projection: the trapezoid of the footprint, from the angle. */
typedef struct iter_sf_proj {
    float cos_a, sin_a;         /* cos a_p, sin a_p */
    float base;                 /* axis + axis_shift[p] - c cos a_p + c sin a_p:
                                   s_c = base + x cos_a - y sin_a */
    float t0;                   /* -(wa + wb) / 2: the footprint's left end
                                   relative to s_c */
    float t2;                   /* (wa - wb) / 2: the start of its right
                                   ramp */
    float wb;                   /* min(|cos|, |sin|): the ramps' width */
    float inv_wb;               /* 1 / wb, 0 when wb == 0 */
    float inv_2wa;              /* 1 / (2 max(|cos|, |sin|)) */
} iter_sf_proj;

/* Fill one projection's parameters (the front end fills it->proj[]). */
static inline void iter_sf_proj_init(iter_sf_proj *q, double angle,
                                     double shift_axis, double c)
{
    double ca = cos(angle), sa = sin(angle);
    double wa = fabs(ca) > fabs(sa) ? fabs(ca) : fabs(sa);
    double wb = fabs(ca) > fabs(sa) ? fabs(sa) : fabs(ca);
    if (wb < 1e-7)
        wb = 0.0;               /* an axis-aligned box */
    q->cos_a = (float)ca;
    q->sin_a = (float)sa;
    q->base = (float)(shift_axis - c * ca + c * sa);
    q->t0 = (float)(-0.5 * (wa + wb));
    q->t2 = (float)(0.5 * (wa - wb));
    q->wb = (float)wb;
    q->inv_wb = wb > 0.0 ? (float)(1.0 / wb) : 0.0f;
    q->inv_2wa = (float)(0.5 / wa);
}

/* E(v) = (max(v, 0)^2 - max(v - wb, 0)^2) / wb: a ramp of width wb
 * integrated twice, without cancellation for small wb. */
ITER_HD float iter_sf_ramp(float v, float wb, float inv_wb)
{
    /* Branch-free: v clamped to [0, wb] squared over wb, plus 2 (v - wb)
     * beyond wb (= 2 v - wb there; 2 max(v, 0) when wb is 0). */
    float vc = v > 0.0f ? v : 0.0f;
    vc = vc < wb ? vc : wb;
    float over = v - wb > 0.0f ? v - wb : 0.0f;
    return vc * vc * inv_wb + 2.0f * over;
}

/* The footprint's integral from its left end to s_c + u (0 .. 1). */
ITER_HD float iter_sf_cdf(const iter_sf_proj *q, float u)
{
    return (iter_sf_ramp(u - q->t0, q->wb, q->inv_wb) -
            iter_sf_ramp(u - q->t2, q->wb, q->inv_wb)) * q->inv_2wa;
}

/* The pixel at s_c: its first bin j0 (returned) and the weights of bins
 * j0, j0 + 1, j0 + 2 (w[2] may be 0).  Bins outside [0, det_width) must be
 * dropped by the caller; when j0 < -2 or j0 >= det_width none is inside. */
ITER_HD int iter_sf_weights(const iter_sf_proj *q, float s_c, float w[3])
{
    float left = s_c + q->t0 + 0.5f;
    int j0 = (int)left;         /* floor, exact (no libm call) */
    j0 -= left < (float)j0;
    float u1 = (float)j0 + 0.5f - s_c;
    float g1 = iter_sf_cdf(q, u1);
    float g2 = iter_sf_cdf(q, u1 + 1.0f);
    w[0] = g1;
    w[1] = g2 - g1;
    w[2] = 1.0f - g2;
    return j0;
}

/* ------------------------------------------------- unmatched baseline ---- */

/*
 * The forward projector one would write first, for measurements only
 * (rtomo_iter_project_ray): ray-driven, the ray of bin j at projection p
 * sampled bilinearly at unit steps t, P(t) = (c + u cos a + t sin a,
 * c - u sin a + t cos a) with u = j - (axis + shift), which every pixel
 * centre on it maps to bin j in the FBP convention; the samples summed
 * (times the unit step).  Not A: its transpose is no back-projector the
 * solvers use.
 */
/* Half the samples per ray: the grid's half diagonal and one more. */
ITER_HD int iter_ray_half(int size)
{
    return (int)(0.7072f * (float)size) + 1;
}

/* The ray's centre point (t = 0) in pixel coordinates (x, y). */
ITER_HD void iter_ray_centre(const iter_sf_proj *q, int j, float c,
                             float *x0, float *y0)
{
    float axis = q->base + c * q->cos_a - c * q->sin_a;
    float u = (float)j - axis;
    *x0 = c + u * q->cos_a;
    *y0 = c - u * q->sin_a;
}

/* -------------------------------------------------------------- vectors ---- */

typedef enum iter_space {
    ITER_IMAGES = 0,            /* rows of slice_size^2 floats */
    ITER_SINOGRAMS              /* rows of n_proj x det_width floats */
} iter_space;

/* n rows of one space, in the backend's memory. */
typedef struct iter_vec {
    iter_space space;
    int n;                      /* rows */
    size_t row_len;             /* floats per row */
    float *data;                /* n * row_len floats: host memory on the
                                   CPU, device memory on CUDA */
    void *priv;                 /* the backend's own (may stay NULL) */
} iter_vec;

/* --------------------------------------------------------- backend ops ---- */

typedef struct rtomo_iter_backend_ops {
    const char *name;
    /* Allocate it->impl.  Geometry already validated and copied; it->proj
     * filled.  Rows per call are at most it->geom.row_count. */
    rtomo_status (*create)(rtomo_iter *it, rtomo_error *err);
    void (*destroy)(rtomo_iter *it);

    /* v->space, v->n, v->row_len set by the caller; sets v->data (and
     * v->priv), zero-filled.  RTOMO_E_NOMEM leaves nothing allocated. */
    rtomo_status (*vec_alloc)(rtomo_iter *it, iter_vec *v, rtomo_error *err);
    /* Frees v->data (NULL allowed) and clears it. */
    void (*vec_free)(rtomo_iter *it, iter_vec *v);
    /* All n * row_len floats from / to host memory. */
    rtomo_status (*vec_upload)(rtomo_iter *it, iter_vec *v, const float *host,
                               rtomo_error *err);
    rtomo_status (*vec_download)(rtomo_iter *it, const iter_vec *v,
                                 float *host, rtomo_error *err);

    /* y = A x (x ITER_IMAGES, y ITER_SINOGRAMS, the same n): overwrites y. */
    rtomo_status (*project)(rtomo_iter *it, const iter_vec *x, iter_vec *y,
                            rtomo_error *err);
    /* x = A^T y: overwrites x. */
    rtomo_status (*backproject)(rtomo_iter *it, const iter_vec *y, iter_vec *x,
                                rtomo_error *err);

    /* out[i] = <a_i, b_i> over row i, summed in double (a and b of the same
     * space and n; a == b allowed). */
    rtomo_status (*dot)(rtomo_iter *it, const iter_vec *a, const iter_vec *b,
                        double *out, rtomo_error *err);
    /* y_i = alpha[i] x_i + beta[i] y_i per row i (float arithmetic); where
     * beta[i] == 0, y_i is not read (it may hold anything). */
    rtomo_status (*axpby)(rtomo_iter *it, const double *alpha,
                          const iter_vec *x, const double *beta, iter_vec *y,
                          rtomo_error *err);
    /* y_i *= w elementwise for every row i; w has one row (n == 1) of y's
     * space (the SIRT weights). */
    rtomo_status (*mul)(rtomo_iter *it, const iter_vec *w, iter_vec *y,
                        rtomo_error *err);
    /* x = max(x, 0) elementwise. */
    rtomo_status (*clamp_nonneg)(rtomo_iter *it, iter_vec *x,
                                 rtomo_error *err);
    /* y = the unmatched ray-driven projection of x (above): overwrites y. */
    rtomo_status (*ray_project)(rtomo_iter *it, const iter_vec *x,
                                iter_vec *y, rtomo_error *err);
} rtomo_iter_backend_ops;

/* ----------------------------------------------------------------- plan ---- */

struct rtomo_iter {
    rtomo_fbp_geometry geom;    /* normalised copy: angles and axis_shift
                                   point below; axis finite; row_count,
                                   slice_size filled in */
    double *angles;             /* n_proj radians */
    double *axis_shift;         /* n_proj bins (zeros when not given) */
    iter_sf_proj *proj;         /* n_proj footprints (iter_sf_proj_init with
                                   axis + axis_shift[p], c) */
    size_t image_len;           /* slice_size^2 */
    size_t sino_len;            /* n_proj * det_width */
    rtomo_engine_options opt;
    rtomo_backend backend;      /* CPU or CUDA, never AUTO */
    const rtomo_iter_backend_ops *ops;
    void *impl;                 /* backend state */

    /* SIRT weights (front end, made through the ops at the first SIRT
     * solve): 1 / (A 1) per bin, 1 / (A^T 1) per pixel, 0 where the sum is
     * at most ITER_SIRT_MIN_SUM. */
    iter_vec sirt_row;          /* ITER_SINOGRAMS, n = 1 */
    iter_vec sirt_col;          /* ITER_IMAGES, n = 1 */
    int sirt_ready;
};

#define ITER_SIRT_MIN_SUM 1e-6

/* Pixel x projection updates of one A or A^T on n rows. */
static inline double iter_updates(const rtomo_iter *it, int n)
{
    return (double)n * it->geom.n_proj * (double)it->image_len;
}

extern const rtomo_iter_backend_ops rtomo_cpu_iter_ops;
#ifdef RTOMO_HAVE_CUDA
extern const rtomo_iter_backend_ops rtomo_cuda_iter_ops;
#endif

/* Test hook of the CUDA backend (cuda_iter_backend.cu): the slabs of rows
 * a plan deals its vectors to (devices, or parts of one device under
 * RTOMO_CUDA_ITER_SPLIT), so that a test sees the split it asked for
 * rather than infers it.  Writes up to capacity device ordinals, slab by
 * slab, and returns the number of slabs; -1 for a plan that is not on
 * CUDA.  Not part of the engine API.  Include config.h first: builds
 * without CUDA get a stand-in that reports no CUDA plan. */
#ifdef RTOMO_HAVE_CUDA
int rtomo_cuda_iter_debug_slabs(const rtomo_iter *it, int *devices,
                                int capacity);
#else
static inline int rtomo_cuda_iter_debug_slabs(const rtomo_iter *it,
                                              int *devices, int capacity)
{
    (void)it;
    (void)devices;
    (void)capacity;
    return -1;
}
#endif

#ifdef __cplusplus
}
#endif

#endif /* RTOMO_ITER_INTERNAL_H */
