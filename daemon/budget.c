/*
 * budget.c — admission control (see rtomod_budget.h): the estimates of
 * what a scan's plans hold, the budgets they are admitted against, and
 * what the machine offers.
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "rtomod_budget.h"

#define MIB ((size_t)1 << 20)

/* The CUDA pipeline stages up to this many pixels of raw frames per bank
 * (kernels/fbp/cuda_fbp.h), two banks, and filters a bank at a time. */
#define BANK_PIXELS ((size_t)1 << 22)
#define BANK_FRAMES_MAX 64

/* Saturating arithmetic: a hostile geometry must yield "too large", never
 * a small number that wrapped. */
static size_t mul(size_t a, size_t b)
{
    size_t r;
    return __builtin_mul_overflow(a, b, &r) ? SIZE_MAX : r;
}

static size_t add(size_t a, size_t b)
{
    return a > SIZE_MAX - b ? SIZE_MAX : a + b;
}

static size_t next_pow2(size_t n)
{
    size_t p = 1;
    while (p < n && p < ((size_t)1 << 40))
        p <<= 1;
    return p;
}

/* The detector the engine reconstructs on: twice as wide, nearly, for a
 * half-acquisition scan (rtomo_fbp_virtual_width; -1 only for a geometry
 * the engine refuses, which is never budgeted). */
static size_t virtual_width(const rtomo_fbp_geometry *g)
{
    int w = rtomo_fbp_virtual_width(g);
    return (size_t)(w > 0 ? w : g->det_width);
}

size_t rtomod_budget_slice_bytes(const rtomo_fbp_geometry *g)
{
    size_t grid = g->slice_size > 0 ? (size_t)g->slice_size : virtual_width(g);
    size_t sw = g->roi_width > 0 ? (size_t)g->roi_width : grid;
    size_t sh = g->roi_height > 0 ? (size_t)g->roi_height : grid;
    return mul(mul(sw, sh), sizeof(float));
}

size_t rtomod_budget_sbdx_image_bytes(const rtomo_sbdx_geometry *g,
                                      int plane_bytes)
{
    size_t w = (size_t)(g->out_width > 0 ? g->out_width
                                         : g->shift_m * g->holes_x);
    size_t h = (size_t)(g->out_height > 0 ? g->out_height
                                          : g->shift_m * g->holes_y);
    /* Planes, or the float32 composite when planes are smaller. */
    size_t sample = (size_t)(plane_bytes > 4 ? plane_bytes : 4);
    return mul(mul(w, h), sample);
}

void rtomod_budget_tomo_part(const rtomo_fbp_geometry *g, int rows,
                             int resident, int batch, int buffers, int on_gpu,
                             size_t *host, size_t *device)
{
    size_t width = virtual_width(g), r = (size_t)rows;
    /* A GPU line is padded to 512 bytes, a CPU line has 3 guard bins. */
    size_t line = on_gpu ? (width * sizeof(float) + 511) / 512 * 512
                         : (width + 3) * sizeof(float);
    size_t sinograms = mul(mul(r, (size_t)g->n_proj), line);
    /* The ramp filter's padded spectra of a bank of frames (twice: cuFFT's
     * work area) and the averaged dark and flat of the kept rows. */
    size_t frame = mul(r, width);
    size_t bank = frame > 0 ? BANK_PIXELS / frame : 1;
    bank = bank < 1 ? 1 : bank > BANK_FRAMES_MAX ? BANK_FRAMES_MAX : bank;
    size_t spectrum = mul(mul(bank, (r + 1) / 2),
                          (next_pow2(2 * width) / 2 + 1) * 8);
    size_t filter = add(mul(2, spectrum), mul(mul(2 + 2 * bank, frame), 4));
    /* Output: slice buffers waiting for the finisher or ZeroMQ. */
    size_t slice = rtomod_budget_slice_bytes(g);
    size_t per_batch = (size_t)(batch < rows ? batch : rows);
    size_t out = mul(mul(per_batch, slice), (size_t)buffers);
    /* Slices back-projected after the scan pass through two device
     * output buffers of a batch; resident ones are read out in slabs of
     * at most a few slices. */
    int after = rows - resident;
    size_t device_batch = (size_t)(after < (int)per_batch ? after : (int)per_batch);
    if (device_batch < 4)
        device_batch = 4;
    const rtomo_backend backend = on_gpu ? RTOMO_BACKEND_CUDA : RTOMO_BACKEND_CPU;
    size_t streamed = resident > 0 ? rtomo_fbp_stream_bytes(g, resident, backend) : 0;
    if (on_gpu) {
        /* The pinned staging banks, and the device's two output buffers
         * per batch beside the sinograms. */
        *host = add(out, mul(mul(2 * bank, frame), sizeof(float)));
        *device = add(add(add(sinograms, filter), streamed),
                      mul(mul(2, device_batch), slice));
    } else {
        *host = add(add(add(out, sinograms), filter), streamed);
        *device = 0;
    }
}

void rtomod_budget_iter_part(const rtomo_fbp_geometry *g, int rows,
                             int solve_rows, int on_gpu, size_t *host,
                             size_t *device)
{
    /* Iterative scans have no half acquisition: the frame is the row. */
    size_t sino = mul(mul((size_t)g->n_proj, (size_t)g->det_width), 4);
    size_t grid = g->slice_size > 0 ? (size_t)g->slice_size
                                    : (size_t)g->det_width;
    size_t image = mul(mul(grid, grid), 4);
    size_t r = (size_t)rows, n = (size_t)(solve_rows < rows ? solve_rows
                                                            : rows);
    /* Line integrals and the FBP start (then the result) of every row,
     * and per batch its sinograms and start in the solver's layout and a
     * published iterate. */
    size_t kept = add(mul(r, add(sino, image)),
                      mul(n, add(sino, mul(2, image))));
    /* CGLS holds b, r, q (sinograms) and x, g, p (images) per row, SIRT
     * fewer; the SIRT weights one row each; the GPU plan's packed copies
     * of a slice (2 slots x 2 orientations x 4 float4s per pixel, A's 16
     * rows) and its staging. */
    size_t solve = add(mul(n, mul(3, add(sino, image))), add(sino, image));
    if (on_gpu)
        solve = add(solve, mul(image, 64));
    *host = on_gpu ? kept : add(kept, solve);
    *device = on_gpu ? solve : 0;
}

void rtomod_budget_sbdx_part(const rtomo_sbdx_geometry *g, int plane_bytes,
                             int composite, int buffers, int on_gpu,
                             size_t *host, size_t *device)
{
    size_t w = (size_t)(g->out_width > 0 ? g->out_width
                                         : g->shift_m * g->holes_x);
    size_t h = (size_t)(g->out_height > 0 ? g->out_height
                                          : g->shift_m * g->holes_y);
    size_t pixels = mul(w, h);
    size_t planes_f32 = mul(mul(pixels, (size_t)g->n_planes), sizeof(float));
    size_t planes_out = mul(mul(pixels, (size_t)g->n_planes),
                            (size_t)plane_bytes);
    size_t images = composite ? mul(pixels, sizeof(float) + 2) : 0;
    size_t frame = mul(mul(mul((size_t)g->holes_x, (size_t)g->holes_y),
                           mul((size_t)g->det_width, (size_t)g->det_height)),
                       sizeof(float));
    /* Published sets waiting for the finisher or ZeroMQ, and the engine's
     * own planes (several frames in its pipeline on a GPU). */
    size_t out = mul(add(planes_out, images), (size_t)buffers);
    if (on_gpu) {
        *host = add(out, mul(4, add(frame, planes_f32)));
        *device = mul(4, add(add(planes_f32, images), frame));
    } else {
        *host = add(add(out, planes_f32), add(images, frame));
        *device = 0;
    }
}

static double mb(size_t bytes)
{
    return (double)bytes / (double)MIB;
}

/* The CUDA context, cuFFT's plans and the kernels' own tables take some
 * device memory that no estimate lists (kernels/fbp/cuda_fbp_backend.cu keeps
 * 768 MiB free for them). */
#define DEVICE_RESERVE ((size_t)768 << 20)

int rtomod_budget_init(rtomod_budget *b, const rtomod_config *cfg,
                       const size_t *gpu_memory, int n_gpus, int n_workers,
                       char *error, size_t error_size)
{
    memset(b, 0, sizeof *b);
    size_t machine = rtomod_budget_machine_memory();
    size_t host = cfg->limits.host_mb > 0
                      ? (size_t)(cfg->limits.host_mb * (double)MIB)
                      : machine / 4 * 3;
    size_t queues = mul((size_t)(cfg->queue.mb * (double)MIB),
                        (size_t)n_workers);
    b->early_limit = (size_t)(cfg->limits.early_mb * (double)MIB);
    size_t fixed = add(queues, b->early_limit);
    if (fixed >= host) {
        snprintf(error, error_size, "limits.host_mb: the work queues "
                 "(queue.mb = %.0f MB x %d workers) and the early-frame hold "
                 "(limits.early_mb = %.0f MB) take %.0f MB, the whole host "
                 "budget of %.0f MB: raise limits.host_mb or lower those",
                 cfg->queue.mb, n_workers, cfg->limits.early_mb, mb(fixed),
                 mb(host));
        return -1;
    }
    b->host_limit = host - fixed;
    b->n_devices = n_gpus;
    for (int i = 0; i < n_gpus; i++) {
        size_t own = gpu_memory[i] > DEVICE_RESERVE
                         ? (gpu_memory[i] - DEVICE_RESERVE) / 10 * 9 : 0;
        b->device_limit[i] = cfg->limits.device_mb > 0
                                 ? (size_t)(cfg->limits.device_mb * (double)MIB)
                                 : own;
    }
    return 0;
}

/* What of `limit` is free when `used` is claimed, `leaving` of it soon
 * given back. */
static size_t free_of(size_t limit, size_t used, size_t leaving)
{
    size_t held = used > leaving ? used - leaving : 0;
    return held < limit ? limit - held : 0;
}

int rtomod_budget_take(rtomod_budget *b, const rtomod_budget_claim *c,
                       const rtomod_budget_claim *leaving, char *why,
                       size_t why_size)
{
    const rtomod_budget_claim none = {0};
    if (!leaving)
        leaving = &none;
    size_t host_free = free_of(b->host_limit, b->host_used, leaving->host);
    if (c->host > host_free) {
        snprintf(why, why_size, "needs %.0f MB of host memory, %.0f MB of "
                 "the %.0f MB budget are free (limits.host_mb; scans "
                 "acquiring hold the rest)", mb(c->host), mb(host_free),
                 mb(b->host_limit));
        return -1;
    }
    for (int i = 0; i < b->n_devices; i++) {
        size_t dev_free = free_of(b->device_limit[i], b->device_used[i],
                                  leaving->device[i]);
        if (c->device[i] > dev_free) {
            snprintf(why, why_size, "needs %.0f MB on the GPU of worker %d, "
                     "%.0f MB of its %.0f MB budget are free "
                     "(limits.device_mb; scans acquiring hold the rest)",
                     mb(c->device[i]), i, mb(dev_free),
                     mb(b->device_limit[i]));
            return -1;
        }
    }
    b->host_used += c->host;
    for (int i = 0; i < b->n_devices; i++)
        b->device_used[i] += c->device[i];
    return 0;
}

void rtomod_budget_release(rtomod_budget *b, rtomod_budget_claim *c)
{
    b->host_used -= c->host < b->host_used ? c->host : b->host_used;
    for (int i = 0; i < b->n_devices; i++)
        b->device_used[i] -= c->device[i] < b->device_used[i]
                                 ? c->device[i] : b->device_used[i];
    memset(c, 0, sizeof *c);
}

/* The control group's memory.max (cgroup v2), or SIZE_MAX when there is
 * none or it says "max". */
static size_t cgroup_limit(void)
{
    FILE *f = fopen("/proc/self/cgroup", "r");
    char line[512], path[640];
    size_t limit = SIZE_MAX;
    if (!f)
        return limit;
    while (fgets(line, sizeof line, f)) {
        /* "0::/system.slice/rtomod.service" */
        if (strncmp(line, "0::", 3) != 0)
            continue;
        line[strcspn(line, "\n")] = '\0';
        snprintf(path, sizeof path, "/sys/fs/cgroup%s/memory.max", line + 3);
        FILE *m = fopen(path, "r");
        unsigned long long v;
        if (m && fscanf(m, "%llu", &v) == 1)
            limit = (size_t)v;
        if (m)
            fclose(m);
    }
    fclose(f);
    return limit;
}

size_t rtomod_budget_machine_memory(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    size_t physical = pages > 0 && page > 0 ? mul((size_t)pages, (size_t)page)
                                            : (size_t)8 << 30;
    size_t group = cgroup_limit();
    return group < physical ? group : physical;
}
