/*
 * rtomo_cone.h — the cone-beam engine's public API: FDK (Feldkamp, Davis &
 * Kress, JOSA A 1 (1984) 612) for a point source on a circular orbit and a
 * flat detector, on the CPU (the reference) and on CUDA.  Errors, backends
 * and options are those of rtomo_engine.h.  Nothing here knows about
 * ZeroMQ, JSON or the daemon.  docs/cone.md has the same conventions with
 * worked numbers.
 *
 * Geometry (all lengths in one unit L of the caller's choice, e.g. mm)
 *   - World: z is the rotation axis, the origin the iso-centre (where the
 *     central ray meets the axis).  At angle beta the source is at
 *         S = sad (cos beta, sin beta, 0)
 *     and the detector plane is perpendicular to the central ray at
 *     distance sdd from the source, with unit vectors
 *         e_u = (-sin beta, cos beta, 0),   e_v = (0, 0, 1).
 *     The central ray meets the detector at u = v = 0.  Detector column i,
 *     row j are at
 *         u = (i - (det_u - 1)/2) pitch_u + offset_u
 *         v = (j - (det_v - 1)/2) pitch_v + offset_v
 *     A point (x, y, z) projects to u = M s, v = M z with
 *         t = x cos beta + y sin beta   (towards the source)
 *         s = -x sin beta + y cos beta, M = sdd / (sad - t).
 *   - Offset detector (half fan): |offset_u| beyond one pixel makes the
 *     detector asymmetric about the central ray; with a 360-degree scan the
 *     rays on its longer side are seen once and the field of view grows to
 *     the longer side's reach.
 *   - Volume: nx x ny x nz voxels of edge `voxel`, centred on the
 *     iso-centre: voxel (i, j, k) is at
 *         ((i - (nx-1)/2) voxel, (j - (ny-1)/2) voxel, (k - (nz-1)/2) voxel)
 *     and volumes are stored x fastest, then y, then z (index
 *     (k ny + j) nx + i).  The ROI is a box of it; only the ROI is
 *     reconstructed and read (roi_n* 0 = the whole volume).
 *   - Frames: det_v rows of det_u float32 line integrals (u fastest).  The
 *     result is the attenuation coefficient in 1/L.
 *
 * Scans: angles in radians, strictly increasing or decreasing (the
 * direction of rotation does not matter).  The engine picks the weighting:
 *   - full: the angles cover 360 degrees (n_proj x their mean step, within
 *     half a step): every ray is measured twice, each with weight 1/2;
 *   - half fan: a full scan with an offset detector: Wang's weights
 *     (Med. Phys. 29 (2002) 1736) that go smoothly from 0 to 1 across the
 *     band both sides see and are 1 beyond it;
 *   - short scan: less than 360 degrees but at least 180 degrees plus the
 *     detector's full fan angle: Parker's weights (Med. Phys. 9 (1982) 254)
 *     for the scan's range.
 */
#ifndef RTOMO_CONE_H
#define RTOMO_CONE_H

#include <stddef.h>

#include "rtomo_engine.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rtomo_cone_geometry {
    double sad;                 /* source to rotation axis, L, > 0 */
    double sdd;                 /* source to detector, L, > sad */
    int det_u, det_v;           /* detector columns and rows, >= 2 and >= 1 */
    double pitch_u, pitch_v;    /* detector pixel pitch, L, > 0 */
    double offset_u, offset_v;  /* detector centre relative to where the
                                   central ray meets it, L */
    int n_proj;                 /* projections of the scan, >= 1 */
    double angle_start;         /* beta_p = angle_start + p angle_step ... */
    double angle_step;          /* ... (0: 2 pi / n_proj) unless ... */
    const double *angles;       /* ... given: n_proj radians (copied) */
    int nx, ny, nz;             /* volume, voxels */
    double voxel;               /* voxel edge, L, > 0 */
    int roi_x, roi_y, roi_z;    /* ROI: first voxel ... */
    int roi_nx, roi_ny, roi_nz; /* ... and size; 0 = to the volume's end */
    rtomo_window window;        /* the ramp's window (FBP's filters) */
    double cutoff;              /* as a fraction of Nyquist, (0, 1]; 0 = 1 */
} rtomo_cone_geometry;

/* Limits: detector and volume edges up to RTOMO_CONE_MAX_EDGE, at most
 * RTOMO_CONE_MAX_PROJ projections. */
#define RTOMO_CONE_MAX_EDGE 16384
#define RTOMO_CONE_MAX_PROJ 1000000

/* Zeros everywhere, Ram-Lak window, cutoff 1. */
void rtomo_cone_geometry_init(rtomo_cone_geometry *g);

/* The angle of projection p (radians) as the geometry defines it. */
double rtomo_cone_angle(const rtomo_cone_geometry *g, int p);

/* Check a geometry without creating a plan: RTOMO_E_INVALID with a
 * message naming the first problem (a field, or why the set-up cannot be
 * reconstructed: the detector in front of the axis, a volume reaching the
 * source, a ROI outside the field of view, a short scan too short, an
 * offset detector without 360 degrees, ...). */
rtomo_status rtomo_cone_geometry_validate(const rtomo_cone_geometry *g,
                                          rtomo_error *err);

typedef enum rtomo_cone_weighting {
    RTOMO_CONE_FULL = 0,        /* 360 degrees, centred detector */
    RTOMO_CONE_HALF_FAN,        /* 360 degrees, offset detector */
    RTOMO_CONE_SHORT_SCAN       /* Parker */
} rtomo_cone_weighting;

const char *rtomo_cone_weighting_name(rtomo_cone_weighting w);

/* Back-projection kernels of the CUDA backend (the CPU has one). */
typedef enum rtomo_cone_kernel {
    RTOMO_CONE_KERNEL_AUTO = 0, /* the faster of the two, timed once per
                                   device and volume shape */
    RTOMO_CONE_KERNEL_TEXTURE,  /* hardware bilinear interpolation */
    RTOMO_CONE_KERNEL_ALU       /* bilinear interpolation on the cores */
} rtomo_cone_kernel;

const char *rtomo_cone_kernel_name(rtomo_cone_kernel k);
rtomo_status rtomo_cone_kernel_parse(const char *name, rtomo_cone_kernel *out);

typedef struct rtomo_cone rtomo_cone;

/* Memory a plan of g on `backend` (CPU or CUDA) holds, without making
 * one, for admission against budgets: *host and *device (either may be
 * NULL) in bytes, an upper estimate (cuFFT's work area estimated as the
 * size of its buffers); *device for one GPU holding the whole ROI (with
 * n GPUs each holds 1/n of the volume and all of the rest).  RTOMO_E_INVALID for an invalid geometry (the
 * reason as rtomo_cone_geometry_validate gives it). */
rtomo_status rtomo_cone_bytes(const rtomo_cone_geometry *g,
                              rtomo_backend backend, size_t *host,
                              size_t *device, rtomo_error *err);

/* A plan holding the ROI volume (zero) where the backend computes.  On
 * CUDA the ROI's slices are dealt in slabs over opt's devices (all
 * visible ones when opt->n_devices is 0), each device filtering every
 * projection and back-projecting into its own slab.  kernel: the CUDA
 * back-projector (ignored by the CPU).  NULL and *err on failure. */
rtomo_cone *rtomo_cone_create(const rtomo_cone_geometry *g,
                              const rtomo_engine_options *opt,
                              rtomo_cone_kernel kernel, rtomo_error *err);
void rtomo_cone_destroy(rtomo_cone *c);
rtomo_backend rtomo_cone_backend(const rtomo_cone *c);
/* The geometry as normalised (angles point at the plan's copy, ROI sizes
 * and cutoff filled in). */
const rtomo_cone_geometry *rtomo_cone_geometry_of(const rtomo_cone *c);
rtomo_cone_weighting rtomo_cone_weighting_of(const rtomo_cone *c);
/* The CUDA kernel in use after autotuning (AUTO on the CPU). */
rtomo_cone_kernel rtomo_cone_kernel_of(const rtomo_cone *c);
/* Projections per back-projection chunk. */
int rtomo_cone_chunk(const rtomo_cone *c);
/* Columns of a filtered projection: det_u, except for a half fan, whose
 * filtered projections cover the detector mirrored about the central ray
 * (the ramp filter's response beyond the short side is needed there). */
int rtomo_cone_filtered_width(const rtomo_cone *c);
/* Floats of the ROI volume (roi_nx roi_ny roi_nz). */
size_t rtomo_cone_volume_size(const rtomo_cone *c);

/*
 * Streaming FDK.  Each projection is weighted (cosine, redundancy, its
 * angular interval) and ramp-filtered when it arrives, and queued; a full
 * chunk is back-projected into the resident volume.  Any order, any
 * subset; feeding an index twice adds it twice.  So a daemon calls
 * rtomo_cone_add_projection per frame and rtomo_cone_read after the last.
 */
rtomo_status rtomo_cone_add_projection(rtomo_cone *c, int index,
                                       const float *line_integrals,
                                       rtomo_error *err);
/* Raw frames.  The line integrals of a frame (det_v x det_u samples of
 * dtype) into out: p = -log((raw - dark) / (flat - dark)) with the FBP
 * engine's clamps (a transmission in [1e-6, FLT_MAX]: never NaN or inf),
 * dark and flat averaged frames of det_v x det_u floats; dark NULL = 0;
 * flat NULL (then dark must be too): the samples are line integrals
 * already and are only converted. */
rtomo_status rtomo_cone_line_integrals(const rtomo_cone *c, const void *frame,
                                       rtomo_dtype dtype, const float *dark,
                                       const float *flat, float *out,
                                       rtomo_error *err);
/* rtomo_cone_line_integrals, then rtomo_cone_add_projection. */
rtomo_status rtomo_cone_add_frame(rtomo_cone *c, int index, const void *frame,
                                  rtomo_dtype dtype, const float *dark,
                                  const float *flat, rtomo_error *err);
/* Back-project what is queued now. */
rtomo_status rtomo_cone_flush(rtomo_cone *c, rtomo_error *err);
/* Flush, then copy the ROI volume into out (rtomo_cone_volume_size
 * floats).  The volume stays resident. */
rtomo_status rtomo_cone_read(rtomo_cone *c, float *out, rtomo_error *err);
/* The same for ROI slices z_first .. z_first + z_count - 1 only (each
 * roi_nx x roi_ny, z_first counted from the ROI's first slice): a daemon
 * publishes slices as it reads them.  RTOMO_E_RANGE beyond the ROI. */
rtomo_status rtomo_cone_read_slices(rtomo_cone *c, int z_first, int z_count,
                                    float *out, rtomo_error *err);
/* Zero the volume and drop the queue. */
rtomo_status rtomo_cone_reset(rtomo_cone *c, rtomo_error *err);

/* The weighted, filtered projection `index` of these line integrals
 * (det_v x rtomo_cone_filtered_width into `filtered`), without touching
 * the volume. */
rtomo_status rtomo_cone_filter(rtomo_cone *c, int index,
                               const float *line_integrals, float *filtered,
                               rtomo_error *err);
/* Back-project n filtered projections (indices[i] with data filtered +
 * i det_v filtered_width, as rtomo_cone_filter gives them) into the
 * volume, after whatever is queued. */
rtomo_status rtomo_cone_add_filtered(rtomo_cone *c, const int *indices, int n,
                                     const float *filtered, rtomo_error *err);

/* The whole scan: reset, every projection (n_proj x det_v x det_u line
 * integrals), read into volume. */
rtomo_status rtomo_cone_reconstruct(rtomo_cone *c, const float *projections,
                                    float *volume, rtomo_error *err);

typedef struct rtomo_cone_stats {
    long projections_filtered;
    double filter_seconds;
    long projections_backprojected;
    double backproject_seconds;
    double updates;             /* voxels x projections back-projected */
} rtomo_cone_stats;

void rtomo_cone_get_stats(const rtomo_cone *c, rtomo_cone_stats *out);

/*
 * Iterative reconstruction with the separable-footprint cone-beam pair
 * (SF-TR, Long, Fessler & Balter, IEEE TMI 29 (2010) 1839, with the A2
 * amplitudes; kernels/cone/cone_sf.h has the footprints).  The plan is an
 * rtomo_iter of rtomo_engine.h with one row: rtomo_iter_project,
 * rtomo_iter_backproject and rtomo_iter_solve (SIRT, CGLS) take n = 1,
 * images are the ROI volume (rtomo_cone_volume_size floats, layout as
 * above) in 1/L, sinograms all n_proj projections of det_v x det_u line
 * integrals (what FDK takes).  A^T is A's exact transpose (a matched
 * pair), to float rounding.  Voxels outside the ROI count as 0.  window
 * and cutoff do not apply.  Free with rtomo_iter_destroy.
 *
 * Where the vectors live on CUDA (docs/cone.md, "Volumes larger than the
 * GPU"), decided when the plan is made:
 *   - resident, when a solve's vectors (rtomo_cone_iter_bytes) fit
 *     opt->device_budget bytes per GPU (0: the GPU's free memory less
 *     1/16, at least 256 MiB): sinograms on the first of opt's devices,
 *     the volume in z slabs over all of them (each GPU its slab's
 *     detector-row window);
 *   - streamed, otherwise: every vector in ordinary host memory (the
 *     transfers staged through page-locked buffers made with the plan),
 *     the ROI taken through the GPUs in z slabs sized
 *     to the budget, two buffer sets and streams per GPU so that one
 *     slab's transfers overlap another's kernels, the GPUs taking slabs
 *     in turn; the vector ops on the host's cores.  The results are the
 *     resident pair's to float rounding (about 1e-6 relative).  A budget
 *     that cannot hold even two slabs of one slice and their windows
 *     fails here with RTOMO_E_NOMEM saying so.
 * The test hook RTOMO_CONE_SF_STREAM=<slices a slab> forces streaming.
 */
rtomo_iter *rtomo_cone_iter_create(const rtomo_cone_geometry *g,
                                   const rtomo_engine_options *opt,
                                   rtomo_error *err);

/* Memory an iterative solve of g holds (rtomo_cone_iter_create, then
 * rtomo_iter_solve), for admission against budgets, without making a
 * plan: *host bytes and device[d] bytes on the d-th of n_devices GPUs
 * (0 counts as 1; opt's devices in order, as rtomo_cone_iter_create
 * splits the pair over them, RTOMO_CONE_SF_SPLIT included), upper estimates
 * of the big allocations (not the CUDA context), the caller's own arrays
 * not counted (any pointer may be NULL).  CPU: every vector on the host.
 * CUDA with GPUs that may each use device_budget bytes (0: no limit):
 * the resident plan's figures when they fit (*slab_slices 0): the first
 * GPU holds the sinogram vectors, the pair's amplitude-weighted sinogram
 * and the landing for the others' detector-row windows, every GPU its
 * slabs' share of each image vector and their windows; else the streamed
 * plan's (*slab_slices its slices a slab, every GPU the same buffers;
 * then *host holds the vectors and the lanes' page-locked staging).  RTOMO_E_INVALID for an invalid
 * geometry or arguments, RTOMO_E_NOMEM when not even a streamed plan fits
 * the budget (the message says what one slice needs). */
rtomo_status rtomo_cone_iter_bytes(const rtomo_cone_geometry *g,
                                   rtomo_backend backend, int n_devices,
                                   size_t device_budget, size_t *host,
                                   size_t *device, int *slab_slices,
                                   rtomo_error *err);

#ifdef __cplusplus
}
#endif

#endif /* RTOMO_CONE_H */
