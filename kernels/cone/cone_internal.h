/*
 * cone_internal.h — the cone-beam engine's plan, its backend ops table and
 * the per-voxel projection arithmetic that the CPU and CUDA back-projectors
 * share (so that both compute the same detector position from the same
 * float constants).  Private to kernels/.
 *
 * Division of labour
 *   - The front end (cone_engine.c) validates, copies the geometry, makes
 *     the weights (cone_weights.c) and the filter, keeps the queue of
 *     filtered projections waiting for a chunk, and times the backends.
 *   - A backend holds chunk + 1 slots of filtered projections (slot
 *     `chunk` is scratch for rtomo_cone_filter) and the ROI volume.
 *     Frames are det_v x det_u; filtered projections det_v x filt_u.
 *
 * FDK as computed here (Kak & Slaney ch. 3.6 with a virtual detector
 * through the axis, pitch dp = pitch_u sad / sdd):
 *     f(x) = sum_p (sad / (sad - t))^2 Q_p(u(x), v(x))
 *     Q_p = (1 / dp) h * [ dbeta_p r_p(u) sdd / sqrt(sdd^2 + u^2 + v^2) P_p ]
 * with h the FBP ramp (per bin: fbp_filter_design.c), r_p the redundancy
 * weight (1/2, Parker's or Wang's), dbeta_p the projection's angular
 * interval and P_p the line integrals; Q_p is bilinearly interpolated,
 * zero beyond the detector (a texture's border mode, also on the CPU).
 */
#ifndef RTOMO_CONE_INTERNAL_H
#define RTOMO_CONE_INTERNAL_H

#include <math.h>
#include <stddef.h>

#include "rtomo_cone.h"

#ifdef __CUDACC__
#define CONE_HD __host__ __device__ __forceinline__
#else
#define CONE_HD static inline
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Constants of the back-projection, in float, shared by every backend. */
typedef struct cone_bp_const {
    float sad, sdd;
    float inv_pitch_u, inv_pitch_v;
    float u0, v0;               /* column (row) of u = 0 (v = 0) */
    float x0, y0, z0;           /* position of ROI voxel (0, 0, 0) */
    float voxel;
    int det_u, det_v;           /* of the filtered projections */
    int nx, ny, nz;             /* ROI size */
} cone_bp_const;

/* One projection's view of a voxel column (x, y): detector column fu,
 * the rows per unit z (fv = z dv_dz + v0) and the FDK distance weight. */
typedef struct cone_column {
    float fu, dv_dz, weight;
} cone_column;

CONE_HD cone_column cone_column_at(const cone_bp_const *k, float cos_b,
                                   float sin_b, float x, float y)
{
    cone_column col;
    float t = x * cos_b + y * sin_b;
    float s = -x * sin_b + y * cos_b;
    float r = 1.0f / (k->sad - t);
    float m = k->sdd * r;
    col.fu = m * s * k->inv_pitch_u + k->u0;
    col.dv_dz = m * k->inv_pitch_v;
    float w = k->sad * r;
    col.weight = w * w;
    return col;
}

/* Bilinear sample of a det_v x det_u image at (fu, fv) (pixel centres at
 * integers), texels beyond the image 0: what a CUDA texture in border
 * mode gives (apart from its 8-bit weights). */
CONE_HD float cone_bilinear(const float *q, int det_u, int det_v, float fu,
                            float fv)
{
    float fu0 = floorf(fu), fv0 = floorf(fv);
    int iu = (int)fu0, iv = (int)fv0;
    float au = fu - fu0, av = fv - fv0;
    if (iu < -1 || iu >= det_u || iv < -1 || iv >= det_v)
        return 0.0f;
    float a = 0.0f, b = 0.0f, c = 0.0f, d = 0.0f;
    const int u_in0 = iu >= 0, u_in1 = iu + 1 < det_u;
    if (iv >= 0) {
        const float *row = q + (size_t)iv * (size_t)det_u;
        if (u_in0) a = row[iu];
        if (u_in1) b = row[iu + 1];
    }
    if (iv + 1 < det_v) {
        const float *row = q + (size_t)(iv + 1) * (size_t)det_u;
        if (u_in0) c = row[iu];
        if (u_in1) d = row[iu + 1];
    }
    float top = a + au * (b - a);
    float bottom = c + au * (d - c);
    return top + av * (bottom - top);
}

/* -------------------------------------------------------- backend ops ---- */

typedef struct cone_backend_ops {
    const char *name;
    /* Allocate c->impl: chunk + 1 slots and the zeroed ROI volume. */
    rtomo_status (*create)(rtomo_cone *c, rtomo_error *err);
    void (*destroy)(rtomo_cone *c);
    /* Weight (row_weights: det_u floats, times c->cos_weight) and filter
     * line integrals of one projection into slot `slot`. */
    rtomo_status (*filter)(rtomo_cone *c, const float *line_integrals,
                           const float *row_weights, int slot,
                           rtomo_error *err);
    /* Put filtered data into slot `slot`. */
    rtomo_status (*load)(rtomo_cone *c, int slot, const float *filtered,
                         rtomo_error *err);
    /* Copy slot `slot` to the host. */
    rtomo_status (*fetch)(rtomo_cone *c, int slot, float *filtered,
                          rtomo_error *err);
    /* Add slots 0..n-1, holding projections indices[0..n-1], into the
     * volume. */
    rtomo_status (*backproject)(rtomo_cone *c, const int *indices, int n,
                                rtomo_error *err);
    /* ROI slices z_first .. z_first + z_count - 1 into out (waits). */
    rtomo_status (*read)(rtomo_cone *c, int z_first, int z_count, float *out,
                         rtomo_error *err);
    rtomo_status (*reset)(rtomo_cone *c, rtomo_error *err);
} cone_backend_ops;

struct rtomo_cone {
    rtomo_cone_geometry geom;   /* normalised copy (angles below) */
    double *angles;             /* n_proj */
    double *dbeta;              /* n_proj angular intervals */
    rtomo_cone_weighting weighting;
    int direction;              /* +1 increasing angles, -1 decreasing */
    double coverage;            /* n_proj x mean step, radians */
    double half_fan_ua;         /* half fan: the band both sides see */
    int half_fan_side;          /* half fan: +1 the detector's long side
                                   is +u */
    float *cos_weight;          /* det_v x det_u: sdd / |ray| */
    float *filter;              /* filter_length coefficients, times
                                   1 / (dp filter_length) */
    int filter_length;
    cone_bp_const bp;
    float *cos_beta, *sin_beta; /* n_proj, for the back-projectors */

    rtomo_engine_options opt;
    rtomo_backend backend;
    rtomo_cone_kernel kernel;   /* requested, then the one in use */
    const cone_backend_ops *ops;
    void *impl;

    /* Filtered projections are filt_u columns wide, physical column i at
     * filtered column i + filt_off: the detector itself, except for a
     * half fan, whose filtered data extend over the virtual detector
     * symmetric about the central ray (the ramp filter's tails beyond
     * the short side are needed there; the weighted data are 0). */
    int filt_u, filt_off;
    size_t filt_len;            /* filt_u det_v */

    int chunk;
    int *queue;                 /* indices in slots 0..queue_n-1 */
    int queue_n;
    size_t frame_len;           /* det_u det_v */
    size_t volume_len;          /* ROI voxels */
    float *row_weights;         /* det_u scratch */
    float *frame_scratch;       /* frame_len: rtomo_cone_add_frame's line
                                   integrals (made at its first call) */
    struct cpu_pool *frame_pool;/* the frames' normalisation, rows in
                                   parallel (NULL: on the caller's thread;
                                   cone_frames.c) */
    rtomo_cone_stats stats;
};

/* cone_frames.c: the threads that normalise large frames (none for small
 * ones or a single-threaded plan).  Returns RTOMO_OK or why not. */
rtomo_status cone_frames_setup(rtomo_cone *c, rtomo_error *err);

/* Projections per chunk. */
#define CONE_CHUNK 32

/* cone_geometry.c: normalise a validated geometry into c (angles,
 * weighting, bp constants).  pair: for the separable-footprint pair, which
 * takes any finite angles in any order (FDK's rules on order, one turn
 * and short scans do not apply; the weighting is left FULL, unused). */
rtomo_status cone_geometry_setup(rtomo_cone *c, const rtomo_cone_geometry *g,
                                 int pair, rtomo_error *err);

/* cone_weights.c */
/* Redundancy weight of the ray at detector u of projection p. */
double cone_redundancy(const rtomo_cone *c, int p, double u);
/* w[i] = dbeta_p * redundancy(p, u_i) for every column i. */
void cone_row_weights(const rtomo_cone *c, int p, float *w);
/* Parker's weight at scan position beta in [0, range] and fan angle
 * gamma (the sign convention of cone_weights.c), for a range of
 * pi + 2 delta. */
double cone_parker(double beta, double gamma, double delta);
/* c->cos_weight and c->filter. */
rtomo_status cone_make_tables(rtomo_cone *c, rtomo_error *err);

extern const cone_backend_ops cone_cpu_ops;
#ifdef RTOMO_HAVE_CUDA
extern const cone_backend_ops cone_cuda_ops;
#endif

#ifdef __cplusplus
}
#endif

#endif /* RTOMO_CONE_INTERNAL_H */
