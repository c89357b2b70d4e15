/*
 * rtomo_engine.h — the backend-neutral reconstruction engine API.
 *
 * Two engines live behind this API:
 *   - FBP: filtered back-projection for parallel-beam tomography.  Frames
 *     (projections) are fed one by one as they arrive; each is normalised and
 *     ramp-filtered at once, so that when the scan is complete only the
 *     back-projection remains.  Slices are then reconstructed in batches.
 *   - SBDX: shift-and-add tomosynthesis.  One frame (a full raster scan of the
 *     collimator holes) becomes P focal planes plus a best-focus composite.
 *
 * A backend (CPU or CUDA) is chosen when a plan is created.  The CPU backend
 * always exists and is the reference every other backend is tested against.
 * Nothing here knows about ZeroMQ, JSON or the daemon.
 *
 * Conventions
 *   - Every fallible call takes an rtomo_error* (may be NULL) and returns an
 *     rtomo_status (or NULL for constructors).  On failure err->code and
 *     err->message say what went wrong in words an operator can act on.
 *   - A plan is used by one thread at a time.  Different plans are
 *     independent and may be used from different threads.
 *   - Images are row-major float32, x fastest.  Frames are row-major, x
 *     (detector column) fastest, in host byte order.
 */
#ifndef RTOMO_ENGINE_H
#define RTOMO_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Errors                                                                    */
/* ------------------------------------------------------------------------ */

typedef enum rtomo_status {
    RTOMO_OK = 0,
    RTOMO_E_INVALID,     /* a bad argument or geometry */
    RTOMO_E_NOMEM,       /* host or device memory exhausted */
    RTOMO_E_STATE,       /* call not allowed in the plan's current state */
    RTOMO_E_RANGE,       /* an index outside its valid range */
    RTOMO_E_BACKEND,     /* the backend failed (a CUDA or FFT error) */
    RTOMO_E_UNAVAILABLE  /* backend not built in, or no device present */
} rtomo_status;

#define RTOMO_ERROR_MESSAGE_MAX 256

typedef struct rtomo_error {
    rtomo_status code;
    char message[RTOMO_ERROR_MESSAGE_MAX];
} rtomo_error;

/* Short stable name of a status ("ok", "invalid", ...). */
const char *rtomo_status_name(rtomo_status status);

/* Record an error: sets err->code and formats err->message (printf style).
 * Returns `code` so that callers can write `return rtomo_set_error(...)`.
 * A NULL err is allowed and ignored. */
rtomo_status rtomo_set_error(rtomo_error *err, rtomo_status code,
                             const char *format, ...)
    __attribute__((format(printf, 3, 4)));

/* Reset err to RTOMO_OK with an empty message (NULL allowed). */
void rtomo_clear_error(rtomo_error *err);

/* ------------------------------------------------------------------------ */
/* Backends and devices                                                      */
/* ------------------------------------------------------------------------ */

typedef enum rtomo_backend {
    RTOMO_BACKEND_AUTO = 0, /* CUDA when built and a GPU is present, else CPU */
    RTOMO_BACKEND_CPU,
    RTOMO_BACKEND_CUDA
} rtomo_backend;

const char *rtomo_backend_name(rtomo_backend backend);
/* Parse "auto", "cpu" or "cuda"; returns RTOMO_E_INVALID otherwise. */
rtomo_status rtomo_backend_parse(const char *name, rtomo_backend *out);

/* 1 when this build contains the CUDA backend. */
int rtomo_cuda_built(void);
/* Number of usable CUDA devices (0 without CUDA or without a GPU). */
int rtomo_cuda_device_count(void);

#define RTOMO_MAX_DEVICES 16

typedef struct rtomo_device_info {
    int index;                  /* CUDA device ordinal */
    char name[256];
    size_t memory_total;        /* bytes */
    size_t memory_free;         /* bytes, when read */
    int multiprocessors;
    int compute_major, compute_minor;
} rtomo_device_info;

rtomo_status rtomo_cuda_device_info(int index, rtomo_device_info *out,
                                    rtomo_error *err);

/* Host memory that results come back to from the GPUs.  With the CUDA
 * backend built and a GPU visible it is page-locked (cudaHostAlloc,
 * portable to every device), so that reading resident slices into it
 * (rtomo_fbp_stream_read) is one copy at the bus's rate instead of a copy
 * through the engine's staging buffers and another on the host; else, or
 * when the system refuses to lock that much, ordinary memory aligned to
 * 64 bytes.  *locked says which.  NULL when out of memory.  Locking costs
 * about what touching every page costs, once: keep such buffers for reuse. */
void *rtomo_host_alloc(size_t bytes, int *locked);
/* Free what rtomo_host_alloc returned, with the *locked it said; NULL is
 * ignored. */
void rtomo_host_free(void *p, int locked);

/* Sample formats of incoming frames. */
typedef enum rtomo_dtype {
    RTOMO_DTYPE_U8 = 0,
    RTOMO_DTYPE_U16,
    RTOMO_DTYPE_F32
} rtomo_dtype;

size_t rtomo_dtype_size(rtomo_dtype dtype);
const char *rtomo_dtype_name(rtomo_dtype dtype);  /* "uint8", "uint16", "float32" */
rtomo_status rtomo_dtype_parse(const char *name, rtomo_dtype *out);

/* ------------------------------------------------------------------------ */
/* Engine options (both engines)                                             */
/* ------------------------------------------------------------------------ */

/* Back-projection kernels of the CUDA FBP backend (ignored by the CPU). */
typedef enum rtomo_bp_kernel {
    RTOMO_BP_AUTO = 0,      /* the fastest for this GPU (autotuned, cached) */
    RTOMO_BP_STANDARD,      /* one thread per pixel, tex2D: the baseline */
    RTOMO_BP_TEXTURE,       /* optimized texture kernel (16x16 block, Z-order) */
    RTOMO_BP_ALU,           /* shared-memory cache, interpolation on the cores */
    RTOMO_BP_HYBRID         /* texture and ALU blocks in one grid, per-SM ratio */
} rtomo_bp_kernel;

const char *rtomo_bp_kernel_name(rtomo_bp_kernel kernel);
rtomo_status rtomo_bp_kernel_parse(const char *name, rtomo_bp_kernel *out);

/* Storage precision of filtered sinograms on the GPU (ignored by the CPU). */
typedef enum rtomo_precision {
    RTOMO_PRECISION_FLOAT = 0,  /* float32 texels */
    RTOMO_PRECISION_HALF        /* float16 texels, float32 arithmetic */
} rtomo_precision;

/* SBDX reconstruction formulation. */
typedef enum rtomo_sbdx_method {
    RTOMO_SBDX_PIXEL_CENTRIC = 0,   /* gather: the fast one */
    RTOMO_SBDX_DETECTOR_CENTRIC     /* scatter: the cross-check */
} rtomo_sbdx_method;

typedef struct rtomo_engine_options {
    rtomo_backend backend;
    int cpu_threads;            /* CPU backends: worker threads, 0 = one per
                                   online core; CUDA SBDX: host copy threads,
                                   0 = one per core, up to 16 */
    int n_devices;              /* CUDA: 0 = all visible devices */
    int device_ids[RTOMO_MAX_DEVICES];  /* CUDA: used when n_devices > 0 */
    /* FBP on CUDA */
    rtomo_bp_kernel bp_kernel;
    int slices_per_pass;        /* 0 = auto, or 1, 2, 4 */
    rtomo_precision precision;
    double hybrid_ratio;        /* fraction of blocks on the texture path;
                                   0 = autotuned */
    /* SBDX */
    rtomo_sbdx_method sbdx_method;
    /* The cone SF pair on CUDA (rtomo_cone_iter_create): device memory a
     * solve may use on each GPU, bytes; 0 = the GPU's free memory less a
     * margin.  When the resident solve's vectors do not fit, the pair
     * streams its volume through the GPU in slabs (rtomo_cone.h). */
    size_t device_budget;
} rtomo_engine_options;

/* Fill with defaults: AUTO backend, all cores, all devices, AUTO kernel. */
void rtomo_engine_options_init(rtomo_engine_options *opt);

/* ------------------------------------------------------------------------ */
/* FBP: parallel-beam filtered back-projection                               */
/* ------------------------------------------------------------------------ */

typedef enum rtomo_window {
    RTOMO_WINDOW_RAMLAK = 0,    /* plain ramp */
    RTOMO_WINDOW_SHEPP_LOGAN,   /* ramp * sinc(f / (2 fc)) */
    RTOMO_WINDOW_COSINE,        /* ramp * cos(pi f / (2 fc)) */
    RTOMO_WINDOW_HAMMING,       /* ramp * (0.54 + 0.46 cos(pi f / fc)) */
    RTOMO_WINDOW_HANN           /* ramp * (0.5 + 0.5 cos(pi f / fc)) */
} rtomo_window;

const char *rtomo_window_name(rtomo_window window);
rtomo_status rtomo_window_parse(const char *name, rtomo_window *out);

typedef enum rtomo_interp {
    RTOMO_INTERP_LINEAR = 0,
    RTOMO_INTERP_NEAREST
} rtomo_interp;

const char *rtomo_interp_name(rtomo_interp interp);
rtomo_status rtomo_interp_parse(const char *name, rtomo_interp *out);

/* Field of view of a parallel-beam slice ("full", "circle"): see
 * rtomo_fbp_geometry's field_of_view. */
typedef enum rtomo_fov {
    RTOMO_FOV_FULL = 0,         /* every pixel of the grid (the default) */
    RTOMO_FOV_CIRCLE            /* only the circle every projection sees */
} rtomo_fov;

const char *rtomo_fov_name(rtomo_fov fov);
rtomo_status rtomo_fov_parse(const char *name, rtomo_fov *out);

/*
 * Single-distance phase retrieval for a homogeneous object (Paganin,
 * Mayo, Gureyev, Miller & Wilkins, J. Microsc. 206 (2002) 33-40, eq. 10).
 * Applied to each flat-field-corrected intensity I/I0 before the
 * logarithm, as the 2-D Fourier filter
 *     I_f = F^-1[ F[I/I0] / (1 + pi lambda z (delta/beta) |f|^2) ]
 * with f the spatial frequency in cycles per metre (f = k/(N pixel) for
 * a padded transform of N samples), lambda = h c / E (1.23984193e-9 m keV
 * / energy_kev) and z the propagation distance; -log(I_f) is then mu T,
 * the projected attenuation, as without phase retrieval.  Frames are
 * padded (edge values repeated) so that the transform does not wrap
 * around; the rows kept for reconstruction see their neighbours within
 * the filter's reach.  delta_beta 0 switches it off.
 */
typedef struct rtomo_fbp_phase {
    double delta_beta;          /* delta/beta of the material; 0 = off */
    double energy_kev;          /* photon energy, keV */
    double distance_m;          /* sample to detector distance, m */
    double pixel_m;             /* detector pixel size at the sample, m */
} rtomo_fbp_phase;

/* The rows (and columns) the filter of valid parameters p reaches on
 * either side of a pixel, as a plan pads and reads them; 0 when off.  A
 * frame that carries only some rows must hold this many beyond the kept
 * ones for them to come out as from the whole frame. */
int rtomo_fbp_phase_reach(const rtomo_fbp_phase *p);

/*
 * Ring (detector stripe) removal on sinograms.  RTOMO_RINGS_COLUMN_MEAN:
 * a detector column whose gain is off gives the same offset c(x) in the
 * line integrals of every projection (Rivers 1998; Raven 1998), so c is
 * estimated from column means and subtracted from every projection.  Per
 * detector row the means are kept in 8 angular sectors, and a column is
 * a stripe where the sectors agree (their median) that its local residual
 * m(x) - (m(x-1) + m(x+1)) / 2 stands out from its running median of
 * `width` bins: the sample's structure moves across the detector as it
 * turns, a stripe does not.  A run of candidates is separated by least
 * squares into stripes and their neighbours (a stripe leaves -c/2 in its
 * neighbours' residuals), and each run of stripes is bridged by robust
 * quadratics through the 4 nearest other bins on either side, per sector,
 * the sectors' median giving c; c elsewhere is 0, so stripe-free data are
 * left alone (PROTOCOL.md 3.10 has every step).  The means are
 * accumulated as projections arrive and the held filtered projections
 * are corrected by the filtered offsets once the last one is in
 * (rtomo_fbp_remove_rings; the filter is linear), so nothing is filtered
 * twice.  It therefore needs the whole scan before back-projection: not
 * with resident slices, and every projection slot fed once.
 */
typedef enum rtomo_rings {
    RTOMO_RINGS_OFF = 0,
    RTOMO_RINGS_COLUMN_MEAN
} rtomo_rings;

const char *rtomo_rings_name(rtomo_rings rings);   /* "off", "column_mean" */
rtomo_status rtomo_rings_parse(const char *name, rtomo_rings *out);

/*
 * Geometry of a parallel-beam scan and of the reconstruction.
 *
 * Detector: det_width bins x det_height rows; a frame is one projection of
 * det_height x det_width samples.  Detector row r is reconstructed into slice
 * r.  Angles are in radians.
 *
 * Reconstruction grid: slice_size x slice_size pixels of the detector's bin
 * size, centred on the rotation axis: pixel (x, y) with c = (slice_size-1)/2
 * sees projection p at bin
 *     s = axis + axis_shift[p] + (x - c) cos(a_p) - (y - c) sin(a_p)
 * and the slice is sum_p q_p(s) * pi / window_proj (window_proj is n_proj
 * unless set), in attenuation per pixel, where q_p is the filtered
 * projection row.  This weight is right for any scan that
 * samples 180 or 360 degrees uniformly.
 */
typedef struct rtomo_fbp_geometry {
    int det_width;              /* bins per detector row, >= 2 */
    int det_height;             /* detector rows, >= 1 */
    int n_proj;                 /* projections per scan (or per window) */
    double angle_start;         /* a_p = angle_start + p * angle_step ... */
    double angle_step;          /* ... unless `angles` is given */
    const double *angles;       /* optional, n_proj radians (copied) */
    double axis;                /* rotation axis in bins; NaN = (det_width-1)/2 */
    const double *axis_shift;   /* optional, n_proj per-projection corrections in
                                   bins, added to axis (copied) */
    rtomo_window window;
    double cutoff;              /* window cut-off as a fraction of Nyquist,
                                   (0, 1]; 0 = 1 */
    rtomo_interp interp;
    int row_first;              /* detector rows kept for reconstruction: */
    int row_count;              /* [row_first, row_first+row_count); 0 = all */
    int slice_size;             /* reconstruction grid edge; 0 = det_width */
    int roi_x, roi_y;           /* region of interest within the grid; */
    int roi_width, roi_height;  /* 0 width/height = the whole grid */
    int angle_weights;          /* 1: projection p is weighted by the
                                   angular interval it stands for, w_p =
                                   (gap before + gap after) / 2 over the
                                   angles sorted modulo pi, instead of
                                   pi/n_proj for every projection (the same
                                   for uniform angles; right for irregular
                                   sets).  From the geometry's angles (a
                                   frame's own angle moves its bin, not its
                                   weight).  Not with window_proj < n_proj */
    int window_proj;            /* projections one reconstruction sums, for
                                   the weight pi/window_proj; 0 = n_proj.  A
                                   plan with more slots than one
                                   reconstruction uses (a continuous
                                   stream's ring of slots) sets it */
    rtomo_fbp_phase phase;      /* phase retrieval; zeros = off */
    rtomo_rings rings;          /* ring removal; RTOMO_RINGS_OFF = off */
    int rings_width;            /* running median width in bins, odd,
                                   3..255; 0 = 31 */
    int half_acquisition;       /* 1: a 360-degree scan whose axis lies
                                   off the detector's centre, the field of
                                   view extended (below) */
    int frame_width;            /* set by the engine (leave 0): the */
    int frame_offset;           /* physical frame and where it lies on the
                                   virtual detector (below) */
    rtomo_fov field_of_view;    /* RTOMO_FOV_FULL (0): the whole grid;
                                   RTOMO_FOV_CIRCLE: the circle below */
} rtomo_fbp_geometry;

/*
 * Circular field of view (field_of_view = RTOMO_FOV_CIRCLE), what
 * scikit-image's iradon(circle=True), Savu's reconstruction mask and
 * tomopy's circ_mask give: the pixels that not every projection sees are
 * set to exactly 0 and are not computed (at 2048^2 about 21% of a slice,
 * so the back-projection gets that much cheaper).  On the detector the
 * back-projection uses (the virtual one with half acquisition: W = the
 * virtual det_width, the virtual axis), with s_p = axis + axis_shift[p]:
 *     R = min over p of min(s_p, (W - 1) - s_p)      (bins)
 *     c = (slice_size - 1) / 2                       (both axes)
 * Pixel (x, y) of the grid (ROI pixels at their grid position) is inside
 * iff (x - c)^2 + (y - c)^2 <= R^2, computed exactly: with dx = 2x -
 * (slice_size - 1), dy likewise (integers), iff dx^2 + dy^2 <=
 * floor(4 R^2).  Inside: exactly the documented sum, unchanged.  Outside:
 * 0.  R comes from the axis and axis_shift of the geometry the plan is
 * created with, and again at rtomo_fbp_set_axis; a frame's own axis_shift
 * (rtomo_fbp_add_projection) moves where that projection lands, not the
 * circle (so that streamed chunks and the after-the-scan path mask
 * alike).  A plane (rtomo_fbp_reconstruct_plane) is 0 at every point
 * whose distance from the rotation axis (x = y = c) exceeds R.  R < 1 (an
 * axis at or off an edge of the detector) is refused (RTOMO_E_INVALID).
 */

/* R above for a geometry (validated or not; g's own detector, or the
 * virtual one with half acquisition), whatever its field_of_view:
 * RTOMO_E_INVALID with the axis and width in *err when R < 1. */
rtomo_status rtomo_fbp_fov_radius(const rtomo_fbp_geometry *g, double *radius,
                                  rtomo_error *err);

/*
 * Half acquisition (half_acquisition = 1).  A 360-degree scan with the
 * rotation axis near one edge of the detector sees every line of the
 * object once, from one side or the other, over a field of view up to
 * twice the detector's width.  The caller gives the physical detector
 * (det_width = W, the frames' width) and the axis a in its bins; the
 * engine reconstructs on a virtual detector symmetric about the axis:
 *   - width W' = the smallest holding the physical detector and its
 *     mirror image about the axis: for an axis right of the centre W' =
 *     ceil(2a) + 1 and physical bin i is virtual bin i; for an axis left
 *     of it the virtual bins are prepended, offset o = ceil(W - 1 - 2a),
 *     W' = W + o, physical bin i is virtual bin i + o.
 *   - rtomo_fbp_geometry_of reports the plan on the virtual detector:
 *     det_width = W', axis = a + o (virtual bins), frame_width = W and
 *     frame_offset = o; slice_size defaults to W' (the extended field).
 *     Every plan reports frame_width (= det_width, offset 0, without half
 *     acquisition).  A geometry so reported may be given again to
 *     rtomo_fbp_create: with frame_width set, det_width and axis are
 *     taken as virtual and checked against the layout above.
 *   - Frames (darks, flats, projections; rtomo_fbp_line_integrals) stay
 *     physical: W samples per row.  The engine widens them to W' with
 *     each row's edge samples repeated (so the flat-field ratio, and
 *     phase retrieval's view of the edge, is the edge's).
 *   - Each line integral is weighted before the ramp filter by its
 *     virtual bin s: w(s) = 2 where only this half of the scan sees the
 *     line, 0 outside the physical detector, and across the overlap
 *     |s - axis| <= d (d: the axis' distance to the nearer physical edge)
 *     w(s) = 1 - sin(pi (s - axis) / (2 d)) for an axis right of the
 *     centre (1 + sin(...) left of it), so that w(s) + w(2 axis - s) = 2:
 *     with the weight pi/n_proj per projection of a 360-degree scan every
 *     line counts as in a full-field scan.  Filtered data
 *     (rtomo_fbp_set_filtered/get_filtered) are W' bins wide.
 * Refused (RTOMO_E_INVALID): angles spanning less than 360 degrees, an
 * axis within 2 bins of the detector's centre (a plain 360-degree scan)
 * or less than 1 bin inside the detector, ring removal (not combined yet),
 * and rtomo_fbp_set_axis on such a plan (the weights, applied before the
 * filter, depend on the axis).  Per-projection axis shifts move where a
 * projection is back-projected, not its weights.
 */

/* The width of the detector a plan of g reconstructs on, without
 * creating one: W' above with half acquisition (-1 when g's half
 * acquisition is invalid: rtomo_fbp_geometry_validate says why), else
 * det_width.  The default slice_size, and what rtomo_fbp_stream_bytes
 * and rtomo_fbp_filter_response go by. */
int rtomo_fbp_virtual_width(const rtomo_fbp_geometry *g);


/* Defaults: zero sizes (must be set), angle_step pi/n_proj (when left 0 and
 * no list is given), axis NaN (centre), Ram-Lak, linear, all rows, full grid. */
void rtomo_fbp_geometry_init(rtomo_fbp_geometry *g);

/* The ranges the engine accepts, one definition for its own validators
 * and for the wire protocol's decoders (which must refuse exactly what the
 * engine would drop): for a detector of det_width bins, a rotation axis
 * lies within one detector width of the detector, -W <= axis <= 2 W, and
 * a per-projection axis correction is at most the detector width in
 * magnitude, |axis_shift| <= W; both finite.  Return 1 when valid. */
int rtomo_fbp_axis_valid(double axis, int det_width);
int rtomo_fbp_axis_shift_valid(double axis_shift, int det_width);

/* Check a geometry without creating a plan.  Fills *err with the first
 * problem found (naming the field) and returns RTOMO_E_INVALID. */
rtomo_status rtomo_fbp_geometry_validate(const rtomo_fbp_geometry *g,
                                         rtomo_error *err);

typedef struct rtomo_fbp rtomo_fbp;

/* Create a plan.  Returns NULL and fills *err on failure. */
rtomo_fbp *rtomo_fbp_create(const rtomo_fbp_geometry *g,
                            const rtomo_engine_options *opt, rtomo_error *err);
void rtomo_fbp_destroy(rtomo_fbp *plan);

/* The backend actually in use (never AUTO). */
rtomo_backend rtomo_fbp_backend(const rtomo_fbp *plan);
/* The geometry the plan was created with (angles/axis_shift point to the
 * plan's own copies, with any per-projection updates applied). */
const rtomo_fbp_geometry *rtomo_fbp_geometry_of(const rtomo_fbp *plan);

/*
 * Dark and flat fields: full frames (det_height x det_width), averaged over
 * all frames added.  When at least one flat has been added, projections are
 * normalised as p = -log((raw - dark) / (flat - dark)) (dark defaults to 0;
 * ratios <= 0 are clamped to a small positive value so that no NaN or inf
 * is produced).  Without flats, projection samples are taken as line
 * integrals as they are.  Darks and flats added after the first projection
 * start the next flat field: the frames added since the last projection
 * are averaged and replace the dark (when darks came) and the flat (when
 * flats came) from the next projection on; projections fed before keep
 * the field they were normalised with (a continuous stream's refreshed
 * flats).
 */
rtomo_status rtomo_fbp_add_dark(rtomo_fbp *plan, const void *frame,
                                rtomo_dtype dtype, rtomo_error *err);
rtomo_status rtomo_fbp_add_flat(rtomo_fbp *plan, const void *frame,
                                rtomo_dtype dtype, rtomo_error *err);

/*
 * Feed projection `index` (0 <= index < n_proj): a full frame.  The kept
 * rows are normalised and filtered now (possibly asynchronously: the frame is
 * copied before the call returns, so the caller may reuse its buffer).
 * `angle` (radians) and `axis_shift` (bins) replace the geometry's values for
 * this projection unless NaN.  Feeding an index again replaces its data
 * (used by continuous mode, where index is a slot in a sliding window).
 * Projections never fed contribute nothing.
 */
rtomo_status rtomo_fbp_add_projection(rtomo_fbp *plan, int index,
                                      const void *frame, rtomo_dtype dtype,
                                      double angle, double axis_shift,
                                      rtomo_error *err);

/*
 * Feed already filtered sinogram data directly: `rows` consecutive kept rows
 * starting at detector row `row`, each n_proj x det_width float32 (projection
 * major).  Used by benchmarks and tests to time or check back-projection
 * alone.  Replaces whatever those rows held.
 */
rtomo_status rtomo_fbp_set_filtered(rtomo_fbp *plan, int row, int rows,
                                    const float *sinograms, rtomo_error *err);

/* Copy the filtered sinogram of detector row `row` (n_proj x det_width). */
rtomo_status rtomo_fbp_get_filtered(rtomo_fbp *plan, int row, float *sinogram,
                                    rtomo_error *err);

/* A flat taken after the scan's projections (rtomo_fbp_interpolate_flats):
 * averaged with the others so added, apart from the field in use.  Any
 * time before the interpolation. */
rtomo_status rtomo_fbp_add_flat_after(rtomo_fbp *plan, const void *frame,
                                      rtomo_dtype dtype, rtomo_error *err);

/*
 * Flats before and after the projections (a plain scan whose flat field
 * drifts).  Flats given to rtomo_fbp_add_flat_after form the field
 * "after"; this corrects every projection
 * p fed so far as if it had been normalised with the flat interpolated
 * linearly by its index between the field before (at index 0) and after
 * (at n_proj - 1), flat_p = (1 - t_p) flat_before + t_p flat_after,
 * t_p = p / (n_proj - 1), the dark the one before (darks after are not
 * used).  To first order in the change, which is exact to (t(1-t)/2)
 * ln(after/before)^2 (3e-5 for a 3% drift): the line integrals become
 *     p + t_p (ln(flat_after - dark) - ln(flat_before - dark))
 * (0 where either difference is <= 0, which the normalisation clamps),
 * and since the ramp filter is linear the held filtered projections are
 * corrected by the filtered difference, nothing filtered again.  Once,
 * after the last projection, before reconstructing; with rings, before
 * rtomo_fbp_remove_rings.  RTOMO_E_STATE without flats before and after
 * (or when the flat field already changed between projections), with
 * resident slices open, or when called again; RTOMO_E_INVALID with phase
 * retrieval (its filter acts on intensities, where the flat is not an
 * offset).
 */
rtomo_status rtomo_fbp_interpolate_flats(rtomo_fbp *plan, rtomo_error *err);

/* With geometry rings set: correct every filtered projection fed so far
 * by the stripe offsets estimated from them (see rtomo_rings), once,
 * after the last projection and before reconstructing.  RTOMO_E_STATE
 * when called again without new projections or with resident slices
 * open; a no-op without rings. */
rtomo_status rtomo_fbp_remove_rings(rtomo_fbp *plan, rtomo_error *err);

/* Wait until every fed projection has been filtered; reports any error of
 * the asynchronous work. */
rtomo_status rtomo_fbp_sync(rtomo_fbp *plan, rtomo_error *err);

/*
 * Back-project detector rows rows[0..n_rows-1] (each within the kept range)
 * into out: n_rows images of roi_height x roi_width float32, one after the
 * other.  Blocks until the slices are in `out`.
 */
rtomo_status rtomo_fbp_reconstruct(rtomo_fbp *plan, const int *rows,
                                   int n_rows, float *out, rtomo_error *err);

/* Zero the filtered data of projection slot `index` on every kept row, so
 * that it contributes nothing to later reconstructions (a continuous
 * stream clears the slots of projections that left its window).  Queued
 * streaming work that reads the slot is done first. */
rtomo_status rtomo_fbp_clear_projection(rtomo_fbp *plan, int index,
                                        rtomo_error *err);

/* Change the region of interest or the interpolation for later
 * reconstructions (the filtered data stay valid). */
rtomo_status rtomo_fbp_set_roi(rtomo_fbp *plan, int roi_x, int roi_y,
                               int roi_width, int roi_height, rtomo_error *err);
rtomo_status rtomo_fbp_set_interp(rtomo_fbp *plan, rtomo_interp interp,
                                  rtomo_error *err);

/*
 * Streaming back-projection: resident slices.
 *
 * Instead of back-projecting every projection after the scan, a plan can
 * hold a set of slices as accumulators (in device memory on the GPU) and
 * add filtered projections into them while the scan is acquired, so that
 * at its end only the last few remain.  A projection slot is queued with a
 * weight (+1 adds it, -1 subtracts it again: a sliding window); queued
 * slots are back-projected together, in chunks of at most
 * rtomo_fbp_stream_chunk() for throughput (an asynchronous backend takes
 * a chunk early, from 16 slots, when its device has finished the last
 * one), into every open slice, with the slot's angle and axis shift at
 * the time the chunk runs.  Queue a
 * slot after its projection was fed; any order, any subset.
 *
 * The slices keep the ROI and interpolation the plan had at
 * rtomo_fbp_stream_open (later set_roi/set_interp calls apply to
 * rtomo_fbp_reconstruct only).  A slot with queued work is never
 * overwritten before that work is done: add_projection, set_filtered and
 * clear_projection first do the queued work.  The slices hold exactly
 * what rtomo_fbp_reconstruct would give for the projections added (less
 * those subtracted), up to float rounding: partial sums are added in a
 * different order.
 */

/* Bytes of the resident slices (and, on a GPU, the packed chunk buffer)
 * that rtomo_fbp_stream_open needs for n_rows rows of geometry g on
 * `backend` (RTOMO_BACKEND_CUDA or _CPU): device memory on the GPU, host
 * memory on the CPU.  Rows are shared over the plan's devices as the kept
 * rows are. */
size_t rtomo_fbp_stream_bytes(const rtomo_fbp_geometry *g, int n_rows,
                              rtomo_backend backend);

/* Open resident slices for detector rows rows[0..n_rows-1] (ascending,
 * distinct, each among the kept rows), all zero.  RTOMO_E_NOMEM, with
 * the plan unchanged and still usable, when they do not fit; RTOMO_E_STATE
 * when slices are open already. */
rtomo_status rtomo_fbp_stream_open(rtomo_fbp *plan, const int *rows,
                                   int n_rows, rtomo_error *err);
/* Number of open resident slices (0 when none). */
int rtomo_fbp_stream_rows(const rtomo_fbp *plan);
/* Their ROI, {x, y, width, height}: the size of every image read. */
void rtomo_fbp_stream_roi(const rtomo_fbp *plan, int roi[4]);
/* Projections per chunk, at most (the queue's length). */
int rtomo_fbp_stream_chunk(const rtomo_fbp *plan);
/* Queue slot `index` with `weight` (+1 or -1).  When a chunk is full its
 * back-projection starts (on the GPU asynchronously). */
rtomo_status rtomo_fbp_stream_queue(rtomo_fbp *plan, int index, float weight,
                                    rtomo_error *err);
/* Start the back-projection of every queued slot now. */
rtomo_status rtomo_fbp_stream_flush(rtomo_fbp *plan, rtomo_error *err);
/* Copy resident slices of detector rows rows[0..n-1] (each open) into
 * out: n images of the stream ROI.  Flushes first; blocks until the
 * images are in `out`.  The slices stay resident. */
rtomo_status rtomo_fbp_stream_read(rtomo_fbp *plan, const int *rows, int n,
                                   float *out, rtomo_error *err);
/* The same, and each image's minimum, maximum and mean into stats[3 i],
 * stats[3 i + 1], stats[3 i + 2], computed where the slices are (on the
 * GPU: no pass over the host copy).  stats may be NULL. */
rtomo_status rtomo_fbp_stream_read_stats(rtomo_fbp *plan, const int *rows,
                                         int n, float *out, double *stats,
                                         rtomo_error *err);
/* Zero every resident slice and drop the queue (for an exact
 * recomputation of a window). */
rtomo_status rtomo_fbp_stream_reset(rtomo_fbp *plan, rtomo_error *err);
/* Free the resident slices (queued work is dropped). */
void rtomo_fbp_stream_close(rtomo_fbp *plan);

/* Slices of detector rows rows[0..n-1] into out (n images of the plan's
 * current ROI): rows with a resident slice are read from it when the
 * plan's ROI and interpolation are still those of the stream; the others
 * are back-projected now from every slot, as rtomo_fbp_reconstruct does.
 * stats (may be NULL): min, max, mean per image as in
 * rtomo_fbp_stream_read_stats for resident rows, NaN for the others. */
rtomo_status rtomo_fbp_stream_collect(rtomo_fbp *plan, const int *rows, int n,
                                      float *out, double *stats,
                                      rtomo_error *err);
/* 1 when rtomo_fbp_stream_collect would read row `row` from a resident
 * slice. */
int rtomo_fbp_stream_has(const rtomo_fbp *plan, int row);

/*
 * Sliding windows over a continuous stream.
 *
 * A window holds the `window_proj` projections of highest index received
 * so far; a new highest index pushes the oldest out.  The plan's n_proj
 * slots form a ring (projection i in slot i mod n_proj) that is larger
 * than the window by a margin, so that a projection's slot is reused only
 * well after it left the window.  With resident slices the window is
 * updated incrementally: each entering projection is added and each
 * leaving one subtracted, in chunks.  Float accumulation drifts with
 * every chunk (a random walk of roundings), so every `refresh` reads the
 * slices are recomputed exactly from the window's projections; that
 * bounds the drift whatever the stream's length.  Without resident
 * slices (or for rows not resident) a read back-projects the window from
 * scratch; slots that left are cleared first.
 */
#define RTOMO_FBP_WINDOW_MARGIN 128

/* Slots a plan needs for a window of `window` projections. */
int rtomo_fbp_window_slots(int window);

typedef struct rtomo_fbp_window rtomo_fbp_window;

/* A window over `plan` (n_proj = rtomo_fbp_window_slots(window_proj), its
 * geometry's window_proj the window), not owned.  rows[0..n_rows-1]
 * (ascending; n_rows 0 = none) are opened as resident slices; when they do
 * not fit, the window works from scratch and *resident_err (when not NULL)
 * says why.  refresh: reads between exact recomputations, 0 = never. */
rtomo_fbp_window *rtomo_fbp_window_create(rtomo_fbp *plan, const int *rows,
                                          int n_rows, int refresh,
                                          rtomo_error *resident_err,
                                          rtomo_error *err);
/* Closes the resident slices; the plan stays. */
void rtomo_fbp_window_destroy(rtomo_fbp_window *w);
/* 1 when the window keeps resident slices. */
int rtomo_fbp_window_resident(const rtomo_fbp_window *w);
/* Projection `index` (>= 0) enters the window.  An index at or below the
 * highest so far less window_proj has left the window already:
 * RTOMO_E_RANGE; an index in the window already: RTOMO_E_STATE. */
rtomo_status rtomo_fbp_window_add(rtomo_fbp_window *w, int64_t index,
                                  const void *frame, rtomo_dtype dtype,
                                  double angle, double axis_shift,
                                  rtomo_error *err);
/* The window's slices of rows[0..n-1] (see rtomo_fbp_stream_collect). */
rtomo_status rtomo_fbp_window_read(rtomo_fbp_window *w, const int *rows,
                                   int n, float *out, double *stats,
                                   rtomo_error *err);
/* The slots of the window's projections into slots[] (room for
 * window_proj; NULL only counts them); returns how many. */
int rtomo_fbp_window_slot_list(const rtomo_fbp_window *w, int *slots);
/* Exact recomputations done so far. */
long rtomo_fbp_window_refreshes(const rtomo_fbp_window *w);
/* Move the rotation axis of the window's plan (rtomo_fbp_set_axis) and
 * recompute its resident slices at the new axis from the window's
 * projections: a projection added at one axis and subtracted at another
 * would leave a residue, so the window is made again (on the GPU while
 * the next projections arrive). */
rtomo_status rtomo_fbp_window_set_axis(rtomo_fbp_window *w, double axis,
                                       rtomo_error *err);

/* ------------------------------------------------------------------------ */
/* Planes of any orientation                                                  */
/* ------------------------------------------------------------------------ */

/*
 * A plane through the reconstructed volume.  Volume coordinates: x, y are
 * slice-grid pixels (0 .. slice_size-1, as in the slices), z is the
 * detector row (slice r lies at z = r).  Output pixel (i, j), i along u
 * (fastest), j along v, is the point
 *     P = centre + (i - (width-1)/2) u + (j - (height-1)/2) v
 * u and v are unit vectors at right angles (normalised when the plane is
 * checked); one output pixel is one grid pixel.  The value at P is the
 * slice formula at (P.x, P.y), linearly interpolated between detector
 * rows floor(P.z) and floor(P.z)+1; rows outside the plan's kept rows
 * contribute 0.  So a plane through grid points of kept rows equals the
 * slices there (up to float rounding).
 */
typedef struct rtomo_fbp_plane {
    double centre[3];
    double u[3], v[3];
    int width, height;
} rtomo_fbp_plane;

#define RTOMO_FBP_PLANE_MAX_EDGE 16384

/* Check a plane: width and height in [1, RTOMO_FBP_PLANE_MAX_EDGE], every
 * number finite, u and v non-zero and at right angles (within 1e-3
 * radians).  *out (when not NULL) gets the plane with u, v normalised. */
rtomo_status rtomo_fbp_plane_validate(const rtomo_fbp_plane *plane,
                                      rtomo_fbp_plane *out, rtomo_error *err);

/* Reconstruct `plane` (width x height float32 into out) from the filtered
 * projections in slots[0..n_slots-1] (NULL: every slot).  Blocks. */
rtomo_status rtomo_fbp_reconstruct_plane(rtomo_fbp *plan,
                                         const rtomo_fbp_plane *plane,
                                         const int *slots, int n_slots,
                                         float *out, rtomo_error *err);

/* Timings of the plan's work so far, for telemetry and benchmarks.  Times
 * are seconds of the engine's own work as measured by the backend (CUDA
 * events on the GPU), summed over calls. */
typedef struct rtomo_fbp_stats {
    long projections_filtered;
    double filter_seconds;      /* normalisation + filtering */
    long slices_reconstructed;
    double backproject_seconds; /* back-projection alone */
    double reconstruct_seconds; /* wall time inside rtomo_fbp_reconstruct */
    double updates;             /* pixels x projections back-projected */
} rtomo_fbp_stats;

void rtomo_fbp_get_stats(const rtomo_fbp *plan, rtomo_fbp_stats *out);

/* The real, even filter that spectra of padded rows are multiplied with
 * for geometry g.  The padded length n (stored in *n_out when not NULL) is
 * the smallest power of two >= 2*det_width (the virtual width with half
 * acquisition).  Writes min(n, capacity)
 * coefficients for DFT bins k = 0..n-1 (frequency k/n cycles per bin, the
 * negative frequencies from k = n/2 on).  The pi/n_proj back-projection
 * weight is not included. */
rtomo_status rtomo_fbp_filter_response(const rtomo_fbp_geometry *g,
                                       float *out, int capacity, int *n_out,
                                       rtomo_error *err);

/* ------------------------------------------------------------------------ */
/* SBDX shift-and-add tomosynthesis                                          */
/* ------------------------------------------------------------------------ */

/*
 * Geometry of an SBDX system and of its focal planes.
 *
 * A frame is one raster scan: for every collimator hole (cx, cy), in
 * row-major hole order, one detector image of det_height x det_width samples
 * (dx fastest): sample index ((cy*holes_x + cx)*det_height + dy)*det_width + dx.
 *
 * For plane k with ratio n = ratios[k], hole (cx, cy) and detector element
 * (dx, dy) map to plane position
 *     X = m cx + n (dx - (det_width-1)/2),  Y = m cy + n (dy - (det_height-1)/2)
 * and the sample is added to the 2x2 plane pixels around (X, Y) with bilinear
 * weights.  Output pixel (i, j) of a plane is plane position
 * (origin_x + i, origin_y + j).  The sums are scaled by m^2/(det_width*det_height)
 * so that a uniform detector value v reconstructs to v on average over the
 * field of view; call these the raw planes.
 *
 * Raw planes ripple: bilinear deposits from a regular grid of rays sample a
 * plane unevenly, so a uniform frame of value v reconstructs on plane k to
 * v R_k(i, j), where R_k is the plane's uniform response (what a frame of
 * ones gives; R_k = 1 +- 15% per pixel for most ratios, 0..4x where n
 * aliases with m, e.g. n = 2).  flat_field selects what the planes hold:
 *   1 (the default, set by rtomo_sbdx_geometry_init): each plane divided by
 *     its response, u_k(i, j) = raw_k(i, j) / R_k(i, j) in the field of
 *     view (R_k reaches RTOMO_SBDX_RESPONSE_FLOOR, by the exact rule of
 *     RTOMO_SBDX_FIELD_OF_VIEW_MIN below), and 0 outside it (the edge of
 *     the field of view, which too few rays reach to be corrected).  A
 *     uniform frame of value v then reconstructs to v, to float rounding,
 *     in the field of view.
 *   0: the raw planes (the SBDX paper's sums, scaled as above).
 * The composite and the 16-bit planes are made from the planes as selected
 * here (see rtomo_sbdx_output).
 */
#define RTOMO_SBDX_RESPONSE_FLOOR 0.25

/* Where a pixel is in the field of view: R = (double)Rx * (double)Ry (the
 * product of the float axis responses, exact in double) reaches the floor
 * less 2^-16 of it.  The margin is about 1000 times the rounding of R
 * (at most 2^-22 relative: float weights, float responses), and so small
 * that no sampling pattern puts a response inside it by design: a pixel
 * whose response is exactly 0.25 in exact arithmetic (common: 0.4 x
 * 0.625) is in the field of view on every backend and configuration,
 * however its weights round.  sbdx_lut.h gives the exact response. */
#define RTOMO_SBDX_FIELD_OF_VIEW_MIN \
    (RTOMO_SBDX_RESPONSE_FLOOR * (1.0 - 1.0 / 65536.0))

/* The depth map's value at a pixel where no plane is a candidate (with
 * flat_field = 1: outside every plane's field of view), distinct from
 * every plane index (n_planes <= RTOMO_SBDX_MAX_PLANES); the composite is
 * 0 there. */
#define RTOMO_SBDX_DEPTH_NONE 65535

typedef struct rtomo_sbdx_geometry {
    int holes_x, holes_y;       /* collimator holes Wc x Hc */
    int det_width, det_height;  /* detector elements Wd x Hd */
    int shift_m;                /* plane shift per hole, pixels (integer >= 1) */
    int n_planes;
    const double *ratios;       /* n_planes reconstruction ratios n > 0 (copied) */
    int out_width, out_height;  /* plane size; 0 = m*holes_x, m*holes_y */
    int origin_x, origin_y;     /* plane position of output pixel (0, 0) */
    int composite_radius;       /* best-focus window half-width; 0 = 2 */
    int flat_field;             /* 1: planes divided by their uniform
                                   response (above); 0: raw planes */
} rtomo_sbdx_geometry;

#define RTOMO_SBDX_MAX_PLANES 256
/* Plane ratios n are in (0, RTOMO_SBDX_MAX_RATIO]. */
#define RTOMO_SBDX_MAX_RATIO 64.0

/* All zero except composite_radius = 2 and flat_field = 1. */
void rtomo_sbdx_geometry_init(rtomo_sbdx_geometry *g);
rtomo_status rtomo_sbdx_geometry_validate(const rtomo_sbdx_geometry *g,
                                          rtomo_error *err);

/* Where reconstructed results go.  Any pointer may be NULL to skip that
 * output (a backend may then skip the work).  Sizes: planes
 * n_planes x out_height x out_width; composite and depth out_height x
 * out_width.  planes_u16 holds clamp(round((v - u16_offset) * u16_scale)). */
typedef struct rtomo_sbdx_output {
    float *planes;
    uint16_t *planes_u16;
    float u16_offset, u16_scale;
    float *composite;           /* best-focus image: per pixel, the value
                                   of plane depth(i, j) (flat-fielded or
                                   raw, as the planes) */
    uint16_t *depth;            /* the plane of largest local variance of
                                   its flat-fielded values per pixel;
                                   RTOMO_SBDX_DEPTH_NONE where no plane
                                   measured the pixel */
} rtomo_sbdx_output;

typedef struct rtomo_sbdx rtomo_sbdx;

rtomo_sbdx *rtomo_sbdx_create(const rtomo_sbdx_geometry *g,
                              const rtomo_engine_options *opt,
                              rtomo_error *err);
void rtomo_sbdx_destroy(rtomo_sbdx *plan);
rtomo_backend rtomo_sbdx_backend(const rtomo_sbdx *plan);
const rtomo_sbdx_geometry *rtomo_sbdx_geometry_of(const rtomo_sbdx *plan);

/*
 * Streaming interface (the two-phase pipeline).  submit() copies the frame
 * into an input bank and starts its reconstruction; it may block while both
 * banks are busy.  collect() waits for the oldest submitted frame and writes
 * its results; it returns that frame's tag.  At most
 * rtomo_sbdx_pipeline_depth() frames may be outstanding; submit() returns
 * RTOMO_E_STATE beyond that.
 */
rtomo_status rtomo_sbdx_submit(rtomo_sbdx *plan, const void *frame,
                               rtomo_dtype dtype, uint64_t tag,
                               rtomo_error *err);
rtomo_status rtomo_sbdx_collect(rtomo_sbdx *plan,
                                const rtomo_sbdx_output *out, uint64_t *tag,
                                rtomo_error *err);
int rtomo_sbdx_pipeline_depth(const rtomo_sbdx *plan);

/* submit() + collect() of one frame. */
rtomo_status rtomo_sbdx_reconstruct(rtomo_sbdx *plan, const void *frame,
                                    rtomo_dtype dtype,
                                    const rtomo_sbdx_output *out,
                                    rtomo_error *err);

typedef struct rtomo_sbdx_stats {
    long frames;
    double compute_seconds;     /* LUT + planes + composite, engine-measured */
    double latency_seconds_last;/* submit to collect of the last frame */
    double updates;             /* bilinear sample deposits, summed */
} rtomo_sbdx_stats;

void rtomo_sbdx_get_stats(const rtomo_sbdx *plan, rtomo_sbdx_stats *out);

/* ------------------------------------------------------------------------ */
/* Rotation axis from opposed projections                                    */
/* ------------------------------------------------------------------------ */

/*
 * The rotation axis of a parallel-beam scan from pairs of opposed
 * projections (angles a and a + pi; which frames pair up, within what
 * angular tolerance, is the caller's choice).  Projection rows hold line
 * integrals (normalised, -log); with the geometry above the projection at
 * a + pi is the mirror image of the one at a about the axis,
 *     p_{a+pi}(s) = p_a(2 axis - s),
 * and the axis is found where the two agree best, to a fraction of a bin.
 *
 * first[i] and opposed[i] (i < n_pairs) each point to rows x width floats
 * (row-major: e.g. the kept rows of a frame).  Every row of every pair
 * counts, so more rows and pairs (all opposed pairs of a 360-degree scan)
 * average the noise down.  The axis may lie anywhere at least
 * rtomo_fbp_axis_margin(width) bins inside the detector: only the bins the
 * two mirror images share are compared, normalised by their energy, so an
 * off-centre axis or an object cut by the detector edge is fine.
 *
 * *axis: the axis in bins (the geometry's `axis` convention).  *quality
 * (may be NULL): in [0, 1], 1 - M_min / M_median, where M is the mismatch
 * sum (p_a(s) - p_{a+pi}(2 axis - s))^2 / sum (p_a^2 + p_{a+pi}^2) over the
 * shared bins, at the axis found and the median over all candidate axes:
 * near 1 for a clear mirror image, near 0 when there is none (e.g.
 * frames that are not opposed).  It says whether the frames mirror each
 * other, not how sharply that fixes the axis: an overlap with little
 * structure (a uniform interior) mirrors well at a shallow minimum.
 * RTOMO_E_INVALID for NULL pointers,
 * n_pairs or rows < 1, width < RTOMO_FBP_AXIS_MIN_WIDTH, a NaN or inf in
 * the data (the message names pair, row and bin) and data without features
 * (all zero, or uniform).  The method is in fbp_axis.c.
 */
#define RTOMO_FBP_AXIS_MIN_WIDTH 32

rtomo_status rtomo_fbp_find_axis(const float *const *first,
                                 const float *const *opposed, int n_pairs,
                                 int rows, int width, double *axis,
                                 double *quality, rtomo_error *err);

/* How far inside a detector of det_width bins the axis must lie to be
 * found, axis in [margin, det_width - 1 - margin]: the rows are smoothed
 * (a Gaussian of width/1024 bins, 1.5 to 4) and the mirror images must
 * still share max(8, width / 16) bins.  -1 for a width too small. */
int rtomo_fbp_axis_margin(int det_width);

/* The line integrals of kept rows rows[0..n_rows-1] (detector rows) of a
 * raw frame, as the plan normalises it (its averaged dark and flat, the
 * clamps of PROTOCOL.md 3.10): what rtomo_fbp_find_axis compares.  Valid
 * once the plan has taken its first projection (the flat field is fixed
 * then); RTOMO_E_STATE before.  Rows are frame_width wide (the physical
 * frame, also with half acquisition; an axis found on them is physical:
 * the plan's is frame_offset more). */
rtomo_status rtomo_fbp_line_integrals(const rtomo_fbp *plan, const void *frame,
                                      rtomo_dtype dtype, const int *rows,
                                      int n_rows, float *out, rtomo_error *err);

/* Move the rotation axis of a plan (bins; the filtered data do not depend
 * on it): later back-projections, resident chunks included, use it.
 * Queued streaming work is done first, at the old axis.  RTOMO_E_INVALID
 * for a half-acquisition plan (its filtered data do depend on it). */
rtomo_status rtomo_fbp_set_axis(rtomo_fbp *plan, double axis,
                                rtomo_error *err);

/* ------------------------------------------------------------------------ */
/* Iterative reconstruction: SIRT and CGLS with a matched projector pair     */
/* ------------------------------------------------------------------------ */

/*
 * Parallel beam with the FBP geometry's conventions (det_width,
 * det_height, n_proj, angles or start/step, axis, axis_shift, slice_size;
 * row_first/row_count select the rows a plan may be asked for; window,
 * cutoff, interpolation, ROI, phase, rings, half acquisition, angle
 * weights do not apply and must be left at their defaults).
 *
 * The projector A maps one slice (slice_size^2 pixels, row-major, as the
 * FBP slices) to one detector row's sinogram (n_proj x det_width,
 * projection-major, as rtomo_fbp_get_filtered lays it out), in line
 * integrals: a slice in attenuation per pixel (what rtomo_fbp_reconstruct
 * gives) projects to line integrals, so an FBP slice is a warm start.
 * The back-projector is A's exact transpose (a matched pair): <A x, y> =
 * <x, A^T y> to float rounding, which SIRT and CGLS need to converge.
 * kernels/iterative/ says which pair and why.
 */
typedef struct rtomo_iter rtomo_iter;

typedef enum rtomo_iter_method {
    RTOMO_ITER_SIRT = 0,        /* x += C A^T R (b - A x); R, C: inverse row
                                   and column sums of A */
    RTOMO_ITER_CGLS             /* conjugate gradients on the normal
                                   equations A^T A x = A^T b */
} rtomo_iter_method;

const char *rtomo_iter_method_name(rtomo_iter_method m);  /* "sirt", "cgls" */
rtomo_status rtomo_iter_method_parse(const char *name, rtomo_iter_method *out);

/* A plan; NULL and *err on failure (a geometry the iterative engine does
 * not take is RTOMO_E_INVALID naming the field). */
rtomo_iter *rtomo_iter_create(const rtomo_fbp_geometry *g,
                              const rtomo_engine_options *opt,
                              rtomo_error *err);
void rtomo_iter_destroy(rtomo_iter *it);
/* The backend in use (never AUTO). */
rtomo_backend rtomo_iter_backend(const rtomo_iter *it);

/* sinograms = A images, for n slices one after the other. */
rtomo_status rtomo_iter_project(rtomo_iter *it, const float *images, int n,
                                float *sinograms, rtomo_error *err);
/* images = A^T sinograms, for n rows one after the other. */
rtomo_status rtomo_iter_backproject(rtomo_iter *it, const float *sinograms,
                                    int n, float *images, rtomo_error *err);
/* For measurements: the unmatched forward projector one would write first
 * (ray-driven, a bilinear sample per pixel step along each ray; on a GPU
 * the texture unit's), in rtomo_iter_project's layout, so that the price
 * of matching shows.  No back-projector is its transpose; the solvers do
 * not use it. */
rtomo_status rtomo_iter_project_ray(rtomo_iter *it, const float *images,
                                    int n, float *sinograms,
                                    rtomo_error *err);

typedef struct rtomo_iter_options {
    rtomo_iter_method method;
    int iterations;             /* at most, >= 1 */
    double tolerance;           /* stop when ||A x - b|| / ||b|| is at most
                                   this; 0 = run every iteration */
    int nonnegative;            /* SIRT: x = max(x, 0) after each update */
    /* After each iteration (NULL: none): the iteration (1-based), the
     * relative residual, the current images (NULL on iterations that are
     * not a multiple of images_every); nonzero stops the solve (an abort;
     * the images are those of that iteration). */
    int (*progress)(void *ctx, int iteration, double residual,
                    const float *images);
    void *ctx;
    int images_every;           /* the callback sees the images every this
                                   many iterations (on a GPU each look is a
                                   download); 0 = never.  Default 1 */
} rtomo_iter_options;

/* SIRT, 100 iterations, no tolerance, no constraint, no callback
 * (images_every 1). */
void rtomo_iter_options_init(rtomo_iter_options *o);

typedef struct rtomo_iter_result {
    int iterations;             /* done */
    double residual;            /* ||A x - b|| / ||b|| at the end */
    int stopped;                /* 1: the callback stopped it */
    double seconds;             /* the whole solve */
    double project_seconds;     /* in A */
    double backproject_seconds; /* in A^T */
    double updates;             /* pixel x projection updates of A and
                                   A^T together (for GU/s) */
} rtomo_iter_result;

/* Solve A x = b for n rows: b the rows' sinograms of line integrals
 * (n x n_proj x det_width); images (n x slice_size^2) holds the start
 * when warm is nonzero (e.g. FBP slices), else zeros are the start, and
 * the result on return.  res may be NULL. */
rtomo_status rtomo_iter_solve(rtomo_iter *it, const float *sinograms, int n,
                              float *images, int warm,
                              const rtomo_iter_options *o,
                              rtomo_iter_result *res, rtomo_error *err);

#ifdef __cplusplus
}
#endif

#endif /* RTOMO_ENGINE_H */
