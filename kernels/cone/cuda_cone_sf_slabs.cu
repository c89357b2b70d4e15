/*
 * cuda_cone_sf_slabs.cu — the separable-footprint cone-beam pair on
 * several GPUs (issue 15): the z slabs, their detector-row windows, the
 * image vectors' parts and the split A and A^T, for the backend ops of
 * cuda_cone_sf_backend.cu (declared in cuda_cone_sf_slabs.h).
 *
 * A plan with several devices splits the ROI along z into contiguous
 * slabs, one per device (the slices dealt as the FDK plan deals them,
 * cuda_cone_backend.cu), and each image vector into one part per device;
 * sinogram vectors stay whole on the first device (the owner).  A slab
 * reaches only some detector rows at any view (its row window, from the
 * magnifications of the ROI's nearest and farthest columns:
 * cone_sf_plan.c), so a slab's
 * kernels work on a window of those rows: its k has the slab's nz and z0
 * and the window's rows (v0 moved down by the window's first row, det_v
 * its height, so the kernels clip to it themselves).  A: every device
 * projects its slabs into their windows at once; the owner adds the
 * windows into y (a remote window comes by cudaMemcpyPeerAsync, direct
 * where peer access could be enabled, else staged through the host by the
 * runtime) and applies l_theta.  A^T: the owner weighs y by l_theta and
 * sends each slab its window (remote slabs first, so that their devices
 * start before the owner's own kernels run), and every device back-
 * projects its slabs into its part of x. The image vectors' ops run on
 * every part, dots summed in double.  One slab (one device, no test hook)
 * is the pair as it was: the whole volume, no window, no copy.  The
 * window's float arithmetic (v0 less the window's row, the slab's z0)
 * rounds a little differently from the whole volume's, and the sums come
 * in another order, so a split pair agrees with one slab to about 1e-6,
 * not to the bit; A and A^T of the split pair are each other's transpose
 * as before (the same k in both).
 *
 * The test hook RTOMO_CONE_SF_SPLIT=k (1 to 8), read when a pair is made:
 * each device taken as k devices of a slab each (their own streams and
 * parts of the image vectors, windows sent by peer copies to the same
 * GPU), so that one GPU runs the whole split path.
 */
#include "config.h"

#include <math.h>
#include <stdlib.h>

#include "cone_sf_plan.h"
#include "cuda_cone_sf.h"
#include "cuda_cone_sf_slabs.h"

/* A remote device's own stream, tables and event (devs[0] shares the
 * pair's); failures have nowhere to go. */
static void dev_destroy(cuda_cone_sf_dev *d)
{
    cuda_cone_sf *v = &d->view;
    if (cudaSetDevice(v->device) != cudaSuccess)
        return;
    if (v->stream) {
        (void)cudaStreamSynchronize(v->stream);
        (void)cudaStreamDestroy(v->stream);
    }
    (void)cudaFree(v->cos_b);
    (void)cudaFree(v->sin_b);
    (void)cudaFree(v->partial);
    (void)cudaFreeHost(v->partial_host);
    if (d->done)
        (void)cudaEventDestroy(d->done);
}

/* Everything a split added: the remote devices first (their streams
 * drained), then the slabs' windows on their devices. */
void split_destroy(cuda_cone_sf *s)
{
    for (int d = 1; s->devs && d < s->n_devs; d++)
        dev_destroy(&s->devs[d]);
    for (int b = 0; s->slabs && b < s->n_slabs; b++) {
        const cuda_cone_sf_slab *sl = &s->slabs[b];
        if (sl->window && s->devs &&
            cudaSetDevice(s->devs[sl->dev].view.device) == cudaSuccess)
            (void)cudaFree(sl->window);
    }
    free(s->slabs);
    free(s->devs);
    s->slabs = NULL;
    s->devs = NULL;
}

/* ------------------------------------------------------------- slabs ---- */

void cuda_cone_sf_place_slab(cuda_cone_sf_slab *sl, const cone_bp_const *k,
                             int z_first, int count)
{
    sl->z_first = z_first;
    cone_sf_slab_rows(k, z_first, count, &sl->row0, &sl->rows);
    sl->k = *k;
    sl->k.nz = count;
    sl->k.z0 = k->z0 + (float)z_first * k->voxel;
    sl->k.v0 = k->v0 - (float)sl->row0;
    sl->k.det_v = sl->rows;
}

/* The ROI's slices dealt to n slabs (the first nz % n one more), the
 * slabs to n_devs devices in contiguous groups (now one each; the parts
 * of the image vectors allow more); each slab's k on its window. */
static void deal_slabs(cuda_cone_sf *s)
{
    const int n = s->n_slabs, nz = s->k.nz;
    for (int b = 0; b < n; b++) {
        cuda_cone_sf_slab *sl = &s->slabs[b];
        int z, count;
        rtomo_deal_even(nz, n, b, &z, &count);
        sl->dev = (int)((long)b * s->n_devs / n);
        cuda_cone_sf_place_slab(sl, &s->k, z, count);
        cuda_cone_sf_dev *d = &s->devs[sl->dev];
        if (d->nz == 0)
            d->z_first = z;
        d->nz += count;
    }
}

/* Device d of the split: a view of the pair; a remote one (d > 0) with
 * its own stream, tables, dot buffers and event. */
static rtomo_status dev_setup(cuda_cone_sf *s, int d, int device,
                              rtomo_error *err)
{
    cuda_cone_sf *v = &s->devs[d].view;
    *v = *s;
    v->n_slabs = 1;
    v->n_devs = 0;
    v->slabs = NULL;
    v->devs = NULL;
    v->landing = NULL;
    v->copied = NULL;
    v->streamed = NULL;         /* a split pair never streams */
    if (d == 0)
        return RTOMO_OK;
    /* Nothing of the owner's is freed through a remote view. */
    v->device = device;
    v->stream = NULL;
    v->amp_theta = v->cos_b = v->sin_b = v->weighted = NULL;
    v->partial = NULL;
    v->partial_host = NULL;
    const size_t np = (size_t)s->n_proj;
    RTOMO_CUDA_TRY(err, cudaSetDevice(device));
    RTOMO_CUDA_TRY(err, cudaStreamCreateWithFlags(&v->stream,
                                                  cudaStreamNonBlocking));
    RTOMO_CUDA_TRY(err, cudaEventCreateWithFlags(&s->devs[d].done,
                                                 cudaEventDisableTiming));
    RTOMO_CUDA_TRY(err, cudaMalloc((void **)&v->cos_b, sizeof(float) * np));
    RTOMO_CUDA_TRY(err, cudaMalloc((void **)&v->sin_b, sizeof(float) * np));
    RTOMO_CUDA_TRY(err, cudaMalloc((void **)&v->partial,
                                   sizeof(double) * CUDA_SF_DOT_BLOCKS));
    RTOMO_CUDA_TRY(err, cudaMallocHost((void **)&v->partial_host,
                                       sizeof(double) * CUDA_SF_DOT_BLOCKS));
    RTOMO_CUDA_TRY(err, cudaMemcpyAsync(v->cos_b, s->cos_host,
                                        sizeof(float) * np,
                                        cudaMemcpyHostToDevice, v->stream));
    RTOMO_CUDA_TRY(err, cudaMemcpyAsync(v->sin_b, s->sin_host,
                                        sizeof(float) * np,
                                        cudaMemcpyHostToDevice, v->stream));
    RTOMO_CUDA_TRY(err, cudaStreamSynchronize(v->stream));
    return RTOMO_OK;
}

/* Peer access from device `from` to `to` where the hardware has it; where
 * not, cudaMemcpyPeerAsync stages the windows through the host itself. */
static rtomo_status enable_peer(int from, int to, rtomo_error *err)
{
    int can = 0;
    if (from == to)
        return RTOMO_OK;
    RTOMO_CUDA_TRY(err, cudaDeviceCanAccessPeer(&can, from, to));
    if (!can)
        return RTOMO_OK;
    RTOMO_CUDA_TRY(err, cudaSetDevice(from));
    const cudaError_t rc = cudaDeviceEnablePeerAccess(to, 0);
    if (rc == cudaErrorPeerAccessAlreadyEnabled) {
        (void)cudaGetLastError();   /* another plan enabled it: fine */
        return RTOMO_OK;
    }
    if (rc != cudaSuccess)
        return rtomo_cuda_error(err, rc, "cudaDeviceEnablePeerAccess",
                                __FILE__, __LINE__);
    return RTOMO_OK;
}

/* The slabs' windows on their devices; the landing for remote windows and
 * its event on the owner. */
static rtomo_status split_buffers(cuda_cone_sf *s, rtomo_error *err)
{
    size_t landing = 0;
    for (int b = 0; b < s->n_slabs; b++) {
        cuda_cone_sf_slab *sl = &s->slabs[b];
        const size_t n = (size_t)sl->rows * s->k.det_u * (size_t)s->n_proj;
        if (n == 0)
            continue;
        RTOMO_CUDA_TRY(err, cudaSetDevice(s->devs[sl->dev].view.device));
        RTOMO_CUDA_TRY(err, cudaMalloc((void **)&sl->window,
                                       sizeof(float) * n));
        if (sl->dev != 0 && n > landing)
            landing = n;
    }
    RTOMO_CUDA_TRY(err, cudaSetDevice(s->device));
    RTOMO_CUDA_TRY(err, cudaEventCreateWithFlags(&s->copied,
                                                 cudaEventDisableTiming));
    if (landing)
        RTOMO_CUDA_TRY(err, cudaMalloc((void **)&s->landing,
                                       sizeof(float) * landing));
    return RTOMO_OK;
}

/* The split of a pair whose owner is set up: ids[0 .. n_ids - 1] the
 * plan's devices, each taken k times by the test hook (as k devices of a
 * slab each: their own streams, parts and peer copies, to themselves),
 * the ROI's slices permitting.  Nothing when it comes to one slab. */
rtomo_status split_create(cuda_cone_sf *s, const int *ids, int n_ids,
                          rtomo_error *err)
{
    int n = n_ids * rtomo_split_hook("RTOMO_CONE_SF_SPLIT");
    n = n < s->k.nz ? n : s->k.nz;
    s->n_slabs = n < 1 ? 1 : n;
    if (s->n_slabs == 1)
        return RTOMO_OK;
    s->n_devs = s->n_slabs;
    s->slabs = (cuda_cone_sf_slab *)calloc((size_t)s->n_slabs,
                                           sizeof *s->slabs);
    s->devs = (cuda_cone_sf_dev *)calloc((size_t)s->n_devs,
                                         sizeof *s->devs);
    if (!s->slabs || !s->devs)
        return rtomo_set_error(err, RTOMO_E_NOMEM, "out of memory");
    rtomo_status st = RTOMO_OK;
    /* Device d: the plan's devices in order, each for an equal share. */
    for (int d = 0; st == RTOMO_OK && d < s->n_devs; d++)
        st = dev_setup(s, d, ids[(long)d * n_ids / s->n_devs], err);
    for (int d = 1; st == RTOMO_OK && d < s->n_devs; d++) {
        const int id = s->devs[d].view.device;
        st = enable_peer(s->device, id, err);
        if (st == RTOMO_OK)
            st = enable_peer(id, s->device, err);
    }
    if (st != RTOMO_OK)
        return st;
    deal_slabs(s);
    return split_buffers(s, err);
}

/* ------------------------------------------------------ split vectors ---- */

/* Whether v lies in parts, one per device: the image vectors of a pair
 * split over several devices. */
int in_parts(const cuda_cone_sf *s, const iter_vec *v)
{
    return s->n_devs > 1 && v->space == ITER_IMAGES;
}

static size_t plane_of(const cuda_cone_sf *s)
{
    return (size_t)s->k.nx * (size_t)s->k.ny;
}

/* Floats of device d's part of one row. */
size_t part_len(const cuda_cone_sf *s, int d)
{
    return plane_of(s) * (size_t)s->devs[d].nz;
}

/* Device d's slices of image row i of a split pair's v: its part (n rows
 * of its slices), or within v->data when v is whole (one device). */
float *part_of(const cuda_cone_sf *s, const iter_vec *v, int d, int i)
{
    if (v->priv)
        return ((float **)v->priv)[d] + (size_t)i * part_len(s, d);
    return v->data + (size_t)i * v->row_len +
           plane_of(s) * (size_t)s->devs[d].z_first;
}

/* Slab b's slices of image row i. */
static float *slab_of(const cuda_cone_sf *s, const iter_vec *v, int b,
                      int i)
{
    const cuda_cone_sf_slab *sl = &s->slabs[b];
    return part_of(s, v, sl->dev, i) +
           plane_of(s) * (size_t)(sl->z_first - s->devs[sl->dev].z_first);
}

/* Every device's stream drained; the owner current again. */
static rtomo_status sync_devs(const cuda_cone_sf *s, rtomo_error *err)
{
    for (int d = s->n_devs - 1; d >= 0; d--) {
        RTOMO_CUDA_TRY(err, cudaSetDevice(s->devs[d].view.device));
        RTOMO_CUDA_TRY(err, cudaStreamSynchronize(s->devs[d].view.stream));
    }
    return RTOMO_OK;
}

void parts_free(const cuda_cone_sf *s, iter_vec *v)
{
    float **parts = (float **)v->priv;
    for (int d = 0; d < s->n_devs; d++)
        if (parts[d] && cudaSetDevice(s->devs[d].view.device) == cudaSuccess)
            (void)cudaFree(parts[d]);
    (void)cudaSetDevice(s->device);
    free(parts);
    v->priv = NULL;
    v->data = NULL;
}

static rtomo_status parts_zero(const cuda_cone_sf *s, iter_vec *v,
                               rtomo_error *err)
{
    float **parts = (float **)v->priv;
    for (int d = 0; d < s->n_devs; d++) {
        const size_t bytes = sizeof(float) * part_len(s, d) * (size_t)v->n;
        RTOMO_CUDA_TRY(err, cudaSetDevice(s->devs[d].view.device));
        RTOMO_CUDA_TRY(err, cudaMalloc((void **)&parts[d], bytes));
        RTOMO_CUDA_TRY(err, cudaMemsetAsync(parts[d], 0, bytes,
                                            s->devs[d].view.stream));
    }
    return sync_devs(s, err);
}

/* An image vector of a pair split over devices: a part on each, v->data
 * the owner's. */
rtomo_status parts_alloc(const cuda_cone_sf *s, iter_vec *v,
                         rtomo_error *err)
{
    float **parts = (float **)calloc((size_t)s->n_devs, sizeof *parts);
    if (!parts)
        return rtomo_set_error(err, RTOMO_E_NOMEM, "out of memory");
    v->priv = parts;
    const rtomo_status st = parts_zero(s, v, err);
    if (st != RTOMO_OK) {
        parts_free(s, v);
        return st;
    }
    v->data = parts[0];
    return RTOMO_OK;
}

/* host <-> the parts of v, every row (to_host: download). */
rtomo_status parts_copy(const cuda_cone_sf *s, const iter_vec *v,
                        float *host, int to_host, rtomo_error *err)
{
    for (int d = 0; d < s->n_devs; d++) {
        const cuda_cone_sf *dv = &s->devs[d].view;
        const size_t bytes = sizeof(float) * part_len(s, d);
        RTOMO_CUDA_TRY(err, cudaSetDevice(dv->device));
        for (int i = 0; i < v->n; i++) {
            float *h = host + (size_t)i * v->row_len +
                       plane_of(s) * (size_t)s->devs[d].z_first;
            float *g = part_of(s, v, d, i);
            RTOMO_CUDA_TRY(err, cudaMemcpyAsync(
                                    to_host ? h : g, to_host ? g : h, bytes,
                                    to_host ? cudaMemcpyDeviceToHost
                                            : cudaMemcpyHostToDevice,
                                    dv->stream));
        }
    }
    return sync_devs(s, err);
}

/* ------------------------------------------------------------ split A ---- */

/* Slab b's k, window and rows as its kernels see the pair. */
static cuda_cone_sf slab_view(const cuda_cone_sf *s, int b)
{
    const cuda_cone_sf_slab *sl = &s->slabs[b];
    cuda_cone_sf v = s->devs[sl->dev].view;
    v.k = sl->k;
    v.frame_len = (size_t)sl->rows * (size_t)s->k.det_u;
    return v;
}

static size_t window_bytes(const cuda_cone_sf *s, int b)
{
    return sizeof(float) * (size_t)s->slabs[b].rows * s->k.det_u *
           (size_t)s->n_proj;
}

/* Slab b's A into its window, queued on its device. */
static rtomo_status slab_project(cuda_cone_sf *s, int b, const float *volume,
                                 rtomo_error *err)
{
    const cuda_cone_sf_slab *sl = &s->slabs[b];
    if (sl->rows == 0)
        return RTOMO_OK;
    cuda_cone_sf v = slab_view(s, b);
    RTOMO_CUDA_TRY(err, cudaSetDevice(v.device));
    RTOMO_CUDA_TRY(err, cudaMemsetAsync(sl->window, 0, window_bytes(s, b),
                                        v.stream));
    return cuda_cone_sf_project_raw(&v, volume, sl->window, err);
}

/* Each remote device's event recorded after its queued work. */
static rtomo_status mark_done(const cuda_cone_sf *s, rtomo_error *err)
{
    for (int d = 1; d < s->n_devs; d++) {
        RTOMO_CUDA_TRY(err, cudaSetDevice(s->devs[d].view.device));
        RTOMO_CUDA_TRY(err, cudaEventRecord(s->devs[d].done,
                                            s->devs[d].view.stream));
    }
    RTOMO_CUDA_TRY(err, cudaSetDevice(s->device));
    return RTOMO_OK;
}

/* Slab b's window added into y on the owner (owner current); a remote
 * window first copied into the landing once its device is done. */
static rtomo_status gather_window(cuda_cone_sf *s, int b, float *y,
                                  rtomo_error *err)
{
    const cuda_cone_sf_slab *sl = &s->slabs[b];
    if (sl->rows == 0)
        return RTOMO_OK;
    const float *w = sl->window;
    if (sl->dev != 0) {
        const cuda_cone_sf_dev *d = &s->devs[sl->dev];
        RTOMO_CUDA_TRY(err, cudaStreamWaitEvent(s->stream, d->done, 0));
        RTOMO_CUDA_TRY(err, cudaMemcpyPeerAsync(s->landing, s->device, w,
                                                d->view.device,
                                                window_bytes(s, b),
                                                s->stream));
        w = s->landing;
    }
    return cuda_cone_sf_add_window(s, w, sl->row0, sl->rows, y, err);
}

/* y = A x (row i of x into y) by slabs: all devices project at once,
 * the owner sums the windows and applies l_theta. */
rtomo_status split_project(cuda_cone_sf *s, const iter_vec *x, int i,
                           float *y, rtomo_error *err)
{
    rtomo_status st = RTOMO_OK;
    /* The remote slabs first, so that their devices start at once. */
    for (int b = s->n_slabs - 1; st == RTOMO_OK && b >= 0; b--)
        st = slab_project(s, b, slab_of(s, x, b, i), err);
    if (st != RTOMO_OK || (st = mark_done(s, err)) != RTOMO_OK)
        return st;
    RTOMO_CUDA_TRY(err, cudaMemsetAsync(y, 0, sizeof(float) * s->frame_len *
                                                  (size_t)s->n_proj,
                                        s->stream));
    for (int b = 0; st == RTOMO_OK && b < s->n_slabs; b++)
        st = gather_window(s, b, y, err);
    if (st == RTOMO_OK)
        st = cuda_cone_sf_amplitude(s, y, y, err);
    if (st != RTOMO_OK)
        return st;
    RTOMO_CUDA_TRY(err, cudaStreamSynchronize(s->stream));
    return RTOMO_OK;
}

/* ---------------------------------------------------------- split A^T ---- */

/* Slab b's rows of s->weighted into its window (owner current): a 2D copy
 * on the owner, for a remote slab packed into the landing and sent, its
 * device then waiting for it. */
static rtomo_status send_window(cuda_cone_sf *s, int b, rtomo_error *err)
{
    const cuda_cone_sf_slab *sl = &s->slabs[b];
    const size_t row_bytes = sizeof(float) * (size_t)sl->rows * s->k.det_u;
    const float *src = s->weighted + (size_t)sl->row0 * s->k.det_u;
    float *dst = sl->dev == 0 ? sl->window : s->landing;
    RTOMO_CUDA_TRY(err, cudaMemcpy2DAsync(dst, row_bytes, src,
                                          sizeof(float) * s->frame_len,
                                          row_bytes, (size_t)s->n_proj,
                                          cudaMemcpyDeviceToDevice,
                                          s->stream));
    if (sl->dev == 0)
        return RTOMO_OK;
    const cuda_cone_sf *v = &s->devs[sl->dev].view;
    RTOMO_CUDA_TRY(err, cudaMemcpyPeerAsync(sl->window, v->device,
                                            s->landing, s->device,
                                            window_bytes(s, b), s->stream));
    RTOMO_CUDA_TRY(err, cudaEventRecord(s->copied, s->stream));
    RTOMO_CUDA_TRY(err, cudaSetDevice(v->device));
    RTOMO_CUDA_TRY(err, cudaStreamWaitEvent(v->stream, s->copied, 0));
    RTOMO_CUDA_TRY(err, cudaSetDevice(s->device));
    return RTOMO_OK;
}

/* Slab b's A^T from its window into its slices, queued on its device
 * (owner current after); a slab that misses the detector gets zeros. */
static rtomo_status slab_backproject(cuda_cone_sf *s, int b, float *volume,
                                     rtomo_error *err)
{
    const cuda_cone_sf_slab *sl = &s->slabs[b];
    cuda_cone_sf v = slab_view(s, b);
    rtomo_status st = RTOMO_OK;
    if (sl->rows > 0 && (st = send_window(s, b, err)) != RTOMO_OK)
        return st;
    RTOMO_CUDA_TRY(err, cudaSetDevice(v.device));
    if (sl->rows > 0)
        st = cuda_cone_sf_backproject_raw(&v, sl->window, volume, err);
    else
        RTOMO_CUDA_TRY(err, cudaMemsetAsync(volume, 0, sizeof(float) *
                                                           plane_of(s) *
                                                           (size_t)sl->k.nz,
                                            v.stream));
    if (st != RTOMO_OK)
        return st;
    RTOMO_CUDA_TRY(err, cudaSetDevice(s->device));
    return RTOMO_OK;
}

/* x = A^T y (row i of x) by slabs: the owner weighs y and sends the
 * windows, remote slabs first (the owner's own kernels would hold the
 * sends up on its stream); every device back-projects its slabs. */
rtomo_status split_backproject(cuda_cone_sf *s, const float *y,
                               const iter_vec *x, int i,
                               rtomo_error *err)
{
    rtomo_status st = cuda_cone_sf_amplitude(s, y, s->weighted, err);
    for (int b = s->n_slabs - 1; st == RTOMO_OK && b >= 0; b--)
        if (s->slabs[b].dev != 0)
            st = slab_backproject(s, b, slab_of(s, x, b, i), err);
    for (int b = 0; st == RTOMO_OK && b < s->n_slabs; b++)
        if (s->slabs[b].dev == 0)
            st = slab_backproject(s, b, slab_of(s, x, b, i), err);
    if (st != RTOMO_OK || (st = mark_done(s, err)) != RTOMO_OK)
        return st;
    for (int d = 1; d < s->n_devs; d++)
        RTOMO_CUDA_TRY(err, cudaStreamWaitEvent(s->stream, s->devs[d].done,
                                                0));
    RTOMO_CUDA_TRY(err, cudaStreamSynchronize(s->stream));
    return RTOMO_OK;
}
