/*
 * cuda_sbdx_slot.h — one slot of the CUDA SBDX backend: a band of output
 * rows reconstructed on one device, with its own streams, look-up tables,
 * double-buffered device banks and the event chain of the two-phase
 * pipeline.
 *
 * Multi-GPU splits the output rows, not the planes: a slot needs only the
 * hole rows that reach its rows (a contiguous part of the frame, so each
 * device uploads about 1/n of it), it reconstructs its rows plus a halo of
 * composite_radius rows on each side, and then computes the composite of
 * its own rows completely.  Every pixel is computed by the same arithmetic
 * in the same order whatever the split, so the output does not depend on
 * the number of devices.
 *
 * Per frame in bank b (0 or 1), three streams:
 *   upload:   wait compute_done[b] (input bank free), H2D, record h2d_done[b]
 *   compute:  wait h2d_done[b] and d2h_done[b] (output bank free),
 *             record compute_start[b], planes, composite,
 *             record compute_done[b]
 *   download: wait compute_done[b], D2H planes/composite/depth into the
 *             pinned output bank, record d2h_done[b]
 * so the upload of frame k+1 and the download of frame k-1 overlap the
 * reconstruction of frame k.  16-bit planes are converted on request, at
 * collect time, on a fourth stream.
 */
#ifndef RTOMO_CUDA_SBDX_SLOT_H
#define RTOMO_CUDA_SBDX_SLOT_H

#include "cuda_sbdx.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Knobs of the kernels, chosen by the backend (defaults) or by the
 * environment for tuning and tests (cuda_sbdx_backend.cu). */
typedef struct sbdx_tuning {
    int xpass_rows;         /* frame rows staged per x-pass block: 1 or 2 */
    int xpass_threads;      /* threads per x-pass block */
    int ypass_threads;      /* threads per y-pass block */
    int max_group;          /* planes per x-pass/y-pass round; 0 = memory */
    size_t t_budget;        /* bytes of x-pass output per slot */
} sbdx_tuning;

/* Rows of a slot, all in output row indices (0 .. out_height-1), and the
 * hole rows it needs. */
typedef struct sbdx_band {
    int own_first, own_rows;    /* rows it delivers */
    int ext_first, ext_rows;    /* rows it reconstructs (own + halo) */
    int hole_first, hole_rows;  /* hole rows cy that reach ext rows */
} sbdx_band;

typedef struct sbdx_slot {
    int device;
    sbdx_band band;
    const rtomo_sbdx_geometry *geom;
    rtomo_sbdx_method method;
    sbdx_tuning tune;

    cudaStream_t upload, compute, download, aux;
    cudaEvent_t h2d_done[2], compute_start[2], compute_done[2], d2h_done[2];
    int events_made;

    /* Tables (cuda_sbdx.h) and the kernels' fixed parameters. */
    double *ratios;
    sbdx_lut_params lut;
    sbdx_xpass_params xpass;    /* frame, t, planes, start, ent per launch */
    sbdx_ypass_params ypass;
    int group;                  /* planes per x-pass/y-pass round */

    /* Device buffers. */
    void *frame[2];
    size_t frame_capacity;      /* bytes of each frame bank */
    float *t;
    float *planes[2];           /* [n_planes][ext_rows][out_w] */
    float *composite[2];        /* [own_rows][out_w] */
    uint16_t *depth[2];
    uint16_t *planes_u16;       /* [n_planes][own_rows][out_w], on demand */
} sbdx_slot;

/* Band of slot `index` of `count` (count <= out_height). */
void sbdx_band_of(const rtomo_sbdx_geometry *g, int index, int count,
                  sbdx_band *band);

/* The fixed parameters of a band's x-pass and y-pass (everything but the
 * buffers, tables and plane range of one launch) and the planes per round,
 * for blocks of at most smem_limit bytes of shared memory.  Pure host code:
 * the tests run it without a GPU.  RTOMO_E_UNAVAILABLE when not even one
 * column's holes fit. */
rtomo_status sbdx_kernel_config(const rtomo_sbdx_geometry *g,
                                const sbdx_band *band, const sbdx_tuning *t,
                                int smem_limit, sbdx_xpass_params *x,
                                sbdx_ypass_params *y, int *group,
                                rtomo_error *err);

/* Set up a slot on `device` for `band`: streams, events, tables (built on
 * the GPU; their build time goes to *lut_seconds), and the buffers that do
 * not depend on the frame's sample type.  On failure the slot holds what
 * was made so far; sbdx_slot_release frees it. */
rtomo_status sbdx_slot_init(sbdx_slot *s, const rtomo_sbdx *plan, int device,
                            const sbdx_band *band, const sbdx_tuning *tune,
                            double *lut_seconds, rtomo_error *err);
void sbdx_slot_release(sbdx_slot *s);

/* Offset and size in bytes of the slot's part of a frame. */
size_t sbdx_slot_frame_offset(const sbdx_slot *s, size_t sample_size);
size_t sbdx_slot_frame_bytes(const sbdx_slot *s, size_t sample_size);

/* Enqueue frame bank b: upload from the pinned frame (the whole frame),
 * reconstruct, download into the pinned outputs (full-image layout).  The
 * current device must be s->device. */
rtomo_status sbdx_slot_enqueue(sbdx_slot *s, int b, const void *pinned_frame,
                               rtomo_dtype dtype, float *pinned_planes,
                               float *pinned_composite,
                               uint16_t *pinned_depth, rtomo_error *err);

/* Wait until the pinned frame of bank b may be overwritten. */
rtomo_status sbdx_slot_wait_upload(sbdx_slot *s, int b, rtomo_error *err);

/* Wait for bank b's results in pinned memory; *seconds = its compute time. */
rtomo_status sbdx_slot_wait_results(sbdx_slot *s, int b, double *seconds,
                                    rtomo_error *err);

/* Convert bank b's planes to 16 bits and download them into pinned_u16
 * (full-image layout); completes before returning. */
rtomo_status sbdx_slot_download_u16(sbdx_slot *s, int b, float offset,
                                    float scale, uint16_t *pinned_u16,
                                    rtomo_error *err);

/* Block until all of the slot's streams are idle. */
rtomo_status sbdx_slot_drain(sbdx_slot *s, rtomo_error *err);

#ifdef __cplusplus
}
#endif

#endif
