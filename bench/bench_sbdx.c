/*
 * bench_sbdx.c — benchmark of the SBDX tomosynthesis engine (bench-sbdx).
 *
 * For the reference configuration (100x100 holes, 160x80 detector of 8-bit
 * values, m = 10, 32 planes of 1000x1000; a frame is 128 MB) and each range
 * of reconstruction ratios it measures, through the public engine API:
 *   - pipelined throughput: frames streamed through submit/collect at the
 *     pipeline's depth, from frames in host memory to planes, composite and
 *     depth in host memory (frames/s), and the latency of each frame under
 *     that load (submit call to collect return);
 *   - unloaded latency: one frame at a time;
 *   - kernel time per frame: the engine's own GPU-event measure (tables
 *     excluded), and the host time spent inside submit() and collect();
 * for the pixel-centric formulation and, on fewer frames, the
 * detector-centric one, whose planes also cross-check the pixel-centric
 * planes.  With --tune it first sweeps the x-pass block configuration and
 * measures the ranges with the fastest.  Prints a table and writes the
 * numbers as JSON.
 *
 * Planes are flat-fielded (the engine's default) unless --raw-planes asks
 * for the raw sums, so that the cost of flat-fielding can be measured.
 *
 *   bench-sbdx [--frames N] [--detector-frames N] [--ranges LIST]
 *              [--devices 0,1] [--copy-threads N] [--tune] [--small]
 *              [--raw-planes] [--backend cuda|cpu] [--json FILE]
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"
#include "rtomo_engine.h"
#include "rtomo_sim.h"
#include "tool_common.h"

#define PROGRAM "bench-sbdx"

#define MAX_RANGES 8
#define N_FRAMES 3          /* distinct frames, streamed in turn */
#define SYNC_FRAMES 5       /* one-at-a-time frames for unloaded latency */
#define MAX_TUNE 8

typedef struct options {
    int frames, detector_frames;
    int n_ranges;
    double lo[MAX_RANGES], hi[MAX_RANGES];
    rtomo_engine_options engine;
    int tune, small;
    int raw_planes;         /* flat_field = 0 */
    const char *json;
    const char *xpass;      /* x-pass configuration used, when tuned */
} options;

typedef struct measure {
    char label[64];
    double lo, hi;
    const char *method;
    int frames;
    double fps;             /* pipelined */
    double latency_median_ms, latency_max_ms;   /* pipelined */
    double unloaded_ms;     /* median, one at a time */
    double kernel_ms;       /* engine compute per frame */
    double submit_ms, collect_ms;   /* host time inside the calls */
    double cross_error;     /* detector vs pixel planes (detector rows) */
} measure;

/* ------------------------------------------------------------ options ---- */

static void usage(void)
{
    fprintf(stderr,
            "usage: bench-sbdx [--frames N] [--detector-frames N] "
            "[--ranges LO-HI,...] [--devices I,J] [--copy-threads N] "
            "[--tune] [--small] [--raw-planes] [--backend cuda|cpu] "
            "[--json FILE]\n");
}

static int parse_ranges(const char *s, options *o)
{
    o->n_ranges = 0;
    while (*s && o->n_ranges < MAX_RANGES) {
        char *end;
        double lo = strtod(s, &end);
        if (*end != '-')
            return -1;
        double hi = strtod(end + 1, &end);
        if (!(lo > 0.0 && hi >= lo))
            return -1;
        o->lo[o->n_ranges] = lo;
        o->hi[o->n_ranges] = hi;
        o->n_ranges++;
        if (*end == ',')
            end++;
        else if (*end)
            return -1;
        s = end;
    }
    return o->n_ranges ? 0 : -1;
}

static int parse_devices(const char *s, rtomo_engine_options *e)
{
    long ids[RTOMO_MAX_DEVICES];
    if (tool_parse_int_list(PROGRAM, "--devices", s, 0, 1 << 16, ids,
                            RTOMO_MAX_DEVICES, &e->n_devices) != 0)
        return -1;
    for (int i = 0; i < e->n_devices; i++)
        e->device_ids[i] = (int)ids[i];
    return 0;
}

static int parse_options(int argc, char **argv, options *o)
{
    memset(o, 0, sizeof *o);
    o->frames = 60;
    o->detector_frames = 2;
    rtomo_engine_options_init(&o->engine);
    o->engine.backend = RTOMO_BACKEND_CUDA;
    o->engine.n_devices = 1;
    o->engine.device_ids[0] = 0;
    parse_ranges("0.6-2.25,1.0-1.5,1.0-2.01,1.0-3.82", o);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--tune")) {
            o->tune = 1;
            continue;
        }
        if (!strcmp(a, "--small")) {
            o->small = 1;
            continue;
        }
        if (!strcmp(a, "--raw-planes")) {
            o->raw_planes = 1;
            continue;
        }
        if (!v)
            return -1;
        i++;
        if (!strcmp(a, "--frames")) {
            if (tool_parse_int32(PROGRAM, a, v, 2, 1 << 20, &o->frames))
                return -1;
        } else if (!strcmp(a, "--detector-frames")) {
            if (tool_parse_int32(PROGRAM, a, v, 0, 1 << 20,
                                 &o->detector_frames))
                return -1;
        } else if (!strcmp(a, "--ranges")) {
            if (parse_ranges(v, o))
                return -1;
        } else if (!strcmp(a, "--devices")) {
            if (parse_devices(v, &o->engine))
                return -1;
        } else if (!strcmp(a, "--copy-threads")) {
            if (tool_parse_int32(PROGRAM, a, v, 0, 1024,
                                 &o->engine.cpu_threads))
                return -1;
        } else if (!strcmp(a, "--backend")) {
            if (rtomo_backend_parse(v, &o->engine.backend) != RTOMO_OK)
                return -1;
        } else if (!strcmp(a, "--json"))
            o->json = v;
        else
            return -1;
    }
    return o->frames >= 2 && o->detector_frames >= 0 ? 0 : -1;
}

/* ----------------------------------------------------------- geometry ---- */

typedef struct setup {
    rtomo_sbdx_geometry g;
    double ratios[32];
    size_t samples, pixels;     /* per frame, per plane */
} setup;

/* The reference configuration (or a small one for a quick run), planes
 * evenly spaced over [lo, hi]. */
static void setup_make(setup *s, const options *o, double lo, double hi)
{
    rtomo_sbdx_geometry *g = &s->g;
    rtomo_sbdx_geometry_init(g);
    g->holes_x = g->holes_y = o->small ? 20 : 100;
    g->det_width = o->small ? 32 : 160;
    g->det_height = o->small ? 16 : 80;
    g->shift_m = 10;
    g->n_planes = o->small ? 8 : 32;
    g->flat_field = !o->raw_planes;
    for (int k = 0; k < g->n_planes; k++)
        s->ratios[k] = lo + (hi - lo) * k / (g->n_planes - 1);
    g->ratios = s->ratios;
    s->samples = (size_t)g->holes_x * g->holes_y * g->det_width *
                 g->det_height;
    s->pixels = (size_t)g->shift_m * g->holes_x * g->shift_m * g->holes_y;
}

/* Frames of 4-bit random values in bytes, as the paper's. */
static uint8_t *random_frames(size_t samples, uint64_t seed)
{
    uint8_t *f = malloc(samples * N_FRAMES);
    if (!f)
        return NULL;
    size_t n = samples * N_FRAMES, i = 0;
    while (i < n) {
        uint64_t r = rtomo_random_next(&seed);
        for (int b = 0; b < 8 && i < n; b++, r >>= 8)
            f[i++] = (uint8_t)(r & 0x0f);
    }
    return f;
}

/* ------------------------------------------------------------ running ---- */

typedef struct buffers {
    float *planes, *composite;
    uint16_t *depth;
} buffers;

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, compare_doubles);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static rtomo_sbdx *plan_make(const setup *s, const options *o,
                             rtomo_sbdx_method method)
{
    rtomo_engine_options e = o->engine;
    e.sbdx_method = method;
    rtomo_error err;
    rtomo_sbdx *plan = rtomo_sbdx_create(&s->g, &e, &err);
    if (!plan)
        fprintf(stderr, "bench-sbdx: %s\n", err.message);
    return plan;
}

static int check(rtomo_status st, const rtomo_error *err, const char *what)
{
    if (st == RTOMO_OK)
        return 0;
    fprintf(stderr, "bench-sbdx: %s: %s\n", what, err->message);
    return -1;
}

/* One frame at a time: unloaded latency (median) and engine compute time
 * per frame (median of the stats' increments). */
static int run_unloaded(rtomo_sbdx *plan, const setup *s, const uint8_t *frames,
                        int n, const buffers *b, measure *m)
{
    double lat[SYNC_FRAMES + 8], kern[SYNC_FRAMES + 8];
    if (n > SYNC_FRAMES + 8)
        n = SYNC_FRAMES + 8;
    rtomo_sbdx_output out = {b->planes, NULL, 0, 1, b->composite, b->depth};
    rtomo_error err;
    for (int f = 0; f < n; f++) {
        rtomo_sbdx_stats before, after;
        rtomo_sbdx_get_stats(plan, &before);
        double t0 = rtomo_now_seconds();
        if (check(rtomo_sbdx_reconstruct(plan, frames + s->samples * (f % N_FRAMES),
                                         RTOMO_DTYPE_U8, &out, &err),
                  &err, "reconstruct"))
            return -1;
        lat[f] = 1e3 * (rtomo_now_seconds() - t0);
        rtomo_sbdx_get_stats(plan, &after);
        kern[f] = 1e3 * (after.compute_seconds - before.compute_seconds);
    }
    m->unloaded_ms = median(lat, n);
    m->kernel_ms = median(kern, n);
    return 0;
}

/* Stream frames through the pipeline at its depth. */
static int run_pipelined(rtomo_sbdx *plan, const setup *s,
                         const uint8_t *frames, int n, const buffers *b,
                         measure *m)
{
    int depth = rtomo_sbdx_pipeline_depth(plan);
    double *submitted = malloc(sizeof(double) * n);
    double *latency = malloc(sizeof(double) * n);
    if (!submitted || !latency) {
        free(submitted);
        free(latency);
        return -1;
    }
    rtomo_sbdx_output out = {b->planes, NULL, 0, 1, b->composite, b->depth};
    rtomo_error err;
    double in_submit = 0.0, in_collect = 0.0;
    int next = 0, done = 0, rc = 0;
    double t0 = rtomo_now_seconds();
    while (done < n && rc == 0) {
        if (next < n && next - done < depth) {
            submitted[next] = rtomo_now_seconds();
            rc = check(rtomo_sbdx_submit(plan, frames + s->samples * (next % N_FRAMES),
                                         RTOMO_DTYPE_U8, (uint64_t)next, &err),
                       &err, "submit");
            in_submit += rtomo_now_seconds() - submitted[next];
            next++;
            continue;
        }
        uint64_t tag = 0;
        double c0 = rtomo_now_seconds();
        rc = check(rtomo_sbdx_collect(plan, &out, &tag, &err), &err, "collect");
        double c1 = rtomo_now_seconds();
        in_collect += c1 - c0;
        if (rc == 0 && tag != (uint64_t)done) {
            fprintf(stderr, "bench-sbdx: collected tag %llu, expected %d\n",
                    (unsigned long long)tag, done);
            rc = -1;
        }
        latency[done++] = 1e3 * (c1 - submitted[tag < (uint64_t)n ? tag : 0]);
    }
    double elapsed = rtomo_now_seconds() - t0;
    if (rc == 0) {
        m->frames = n;
        m->fps = n / elapsed;
        m->submit_ms = 1e3 * in_submit / n;
        m->collect_ms = 1e3 * in_collect / n;
        double worst = 0.0;
        for (int i = 0; i < n; i++)
            worst = fmax(worst, latency[i]);
        m->latency_max_ms = worst;
        m->latency_median_ms = median(latency, n);
    }
    free(submitted);
    free(latency);
    return rc;
}

/* max |a - b| / max |b| over each plane; the largest. */
static double planes_error(const float *a, const float *b, int n_planes,
                           size_t pixels)
{
    double worst = 0.0;
    for (int k = 0; k < n_planes; k++) {
        double peak = 0.0, diff = 0.0;
        for (size_t p = 0; p < pixels; p++) {
            size_t i = (size_t)k * pixels + p;
            peak = fmax(peak, fabs(b[i]));
            diff = fmax(diff, fabs((double)a[i] - b[i]));
        }
        worst = fmax(worst, peak > 0.0 ? diff / peak : diff);
    }
    return worst;
}

static int bench_range(const options *o, int r, const uint8_t *frames,
                       setup *s, buffers *b, float *pixel_planes,
                       measure *pixel, measure *detector)
{
    setup_make(s, o, o->lo[r], o->hi[r]);
    memset(pixel, 0, sizeof *pixel);
    snprintf(pixel->label, sizeof pixel->label, "n %.2f-%.2f", o->lo[r], o->hi[r]);
    pixel->lo = o->lo[r], pixel->hi = o->hi[r];
    *detector = *pixel;
    pixel->method = "pixel";
    detector->method = "detector";

    rtomo_sbdx *plan = plan_make(s, o, RTOMO_SBDX_PIXEL_CENTRIC);
    if (!plan)
        return -1;
    /* Warm up (first launches, page faults), then measure. */
    if (run_unloaded(plan, s, frames, 2, b, pixel) ||
        run_unloaded(plan, s, frames, SYNC_FRAMES, b, pixel) ||
        run_pipelined(plan, s, frames, o->frames, b, pixel)) {
        rtomo_sbdx_destroy(plan);
        return -1;
    }
    /* The last frame collected was frame frames-1. */
    memcpy(pixel_planes, b->planes, sizeof(float) * s->pixels * s->g.n_planes);
    rtomo_sbdx_destroy(plan);

    if (o->detector_frames < 1)
        return 0;
    plan = plan_make(s, o, RTOMO_SBDX_DETECTOR_CENTRIC);
    if (!plan)
        return -1;
    int rc = run_unloaded(plan, s, frames, o->detector_frames, b, detector);
    if (rc == 0) {
        /* Same frame as the pixel planes kept above. */
        rtomo_sbdx_output out = {b->planes, NULL, 0, 1, b->composite, b->depth};
        rtomo_error err;
        const uint8_t *f = frames + s->samples * ((o->frames - 1) % N_FRAMES);
        rc = check(rtomo_sbdx_reconstruct(plan, f, RTOMO_DTYPE_U8, &out, &err),
                   &err, "detector reconstruct");
        if (rc == 0)
            detector->cross_error = pixel->cross_error =
                planes_error(pixel_planes, b->planes, s->g.n_planes, s->pixels);
        detector->fps = 1e3 / detector->unloaded_ms;
        detector->frames = o->detector_frames;
    }
    rtomo_sbdx_destroy(plan);
    return rc;
}

static const char *tune_configs[] = {"1,256", "1,512", "2,256", "2,512",
                                     "2,1024"};

/* Engine compute time of the pixel-centric planes for x-pass block
 * configurations (first range); t[i] is configuration i. */
static int bench_tuning(const options *o, const uint8_t *frames, setup *s,
                        buffers *b, measure *t, int *n)
{
    const char **configs = tune_configs;
    size_t n_configs = sizeof tune_configs / sizeof tune_configs[0];
    setup_make(s, o, o->lo[0], o->hi[0]);
    *n = 0;
    for (size_t c = 0; c < n_configs; c++) {
        setenv("RTOMO_SBDX_XPASS", configs[c], 1);
        rtomo_sbdx *plan = plan_make(s, o, RTOMO_SBDX_PIXEL_CENTRIC);
        unsetenv("RTOMO_SBDX_XPASS");
        if (!plan)
            return -1;
        measure *m = &t[(*n)++];
        memset(m, 0, sizeof *m);
        snprintf(m->label, sizeof m->label, "xpass rows,threads %s", configs[c]);
        m->method = "pixel";
        m->lo = o->lo[0], m->hi = o->hi[0];
        int rc = run_unloaded(plan, s, frames, 2, b, m) ||
                 run_unloaded(plan, s, frames, SYNC_FRAMES, b, m);
        rtomo_sbdx_destroy(plan);
        if (rc)
            return -1;
    }
    return 0;
}

/* ------------------------------------------------------------ reports ---- */

static void print_row(const measure *m)
{
    printf("%-26s %-9s %5d %9.1f %9.2f %9.2f %9.2f %9.3f %8.2f %8.2f %9.1e\n",
           m->label, m->method, m->frames, m->fps, m->latency_median_ms,
           m->latency_max_ms, m->unloaded_ms, m->kernel_ms, m->submit_ms,
           m->collect_ms, m->cross_error);
}

static void print_header(void)
{
    printf("%-26s %-9s %5s %9s %9s %9s %9s %9s %8s %8s %9s\n", "case",
           "method", "frms", "frames/s", "lat.med", "lat.max", "unloaded",
           "kernel", "submit", "collect", "pix/det");
    printf("%-26s %-9s %5s %9s %9s %9s %9s %9s %8s %8s %9s\n", "", "", "",
           "pipelined", "ms", "ms", "ms", "ms/frame", "ms", "ms", "max rel");
}

static void json_measure(FILE *f, const measure *m, int last)
{
    fprintf(f,
            "    {\"case\": \"%s\", \"n_lo\": %g, \"n_hi\": %g, \"method\": "
            "\"%s\", \"frames\": %d, \"frames_per_s\": %.3f, "
            "\"latency_median_ms\": %.3f, \"latency_max_ms\": %.3f, "
            "\"unloaded_latency_ms\": %.3f, \"kernel_ms\": %.4f, "
            "\"submit_ms\": %.3f, \"collect_ms\": %.3f, "
            "\"pixel_vs_detector_max_rel\": %.3e}%s\n",
            m->label, m->lo, m->hi, m->method, m->frames, m->fps,
            m->latency_median_ms, m->latency_max_ms, m->unloaded_ms,
            m->kernel_ms, m->submit_ms, m->collect_ms, m->cross_error,
            last ? "" : ",");
}

static void write_json(const options *o, const setup *s, const char *device,
                       const measure *m, int n, const measure *t, int nt)
{
    FILE *f = fopen(o->json, "w");
    if (!f) {
        fprintf(stderr, "bench-sbdx: cannot write %s\n", o->json);
        return;
    }
    fprintf(f, "{\n  \"benchmark\": \"bench-sbdx\",\n  \"device\": \"%s\",\n"
               "  \"devices\": %d,\n  \"holes\": [%d, %d],\n"
               "  \"detector\": [%d, %d],\n  \"shift_m\": %d,\n"
               "  \"planes\": %d,\n  \"plane\": [%zu, %zu],\n"
               "  \"frame_bytes\": %zu,\n  \"xpass_rows_threads\": \"%s\",\n"
               "  \"flat_field\": %d,\n  \"results\": [\n",
            device, o->engine.n_devices, s->g.holes_x, s->g.holes_y,
            s->g.det_width, s->g.det_height, s->g.shift_m, s->g.n_planes,
            (size_t)s->g.shift_m * s->g.holes_x,
            (size_t)s->g.shift_m * s->g.holes_y, s->samples,
            o->xpass ? o->xpass : "default", s->g.flat_field);
    for (int i = 0; i < n; i++)
        json_measure(f, &m[i], i == n - 1);
    fprintf(f, "  ],\n  \"tuning\": [\n");
    for (int i = 0; i < nt; i++)
        json_measure(f, &t[i], i == nt - 1);
    fprintf(f, "  ]\n}\n");
    fclose(f);
}

static void describe_device(const options *o, char *name, size_t size)
{
    snprintf(name, size, "cpu");
    if (o->engine.backend != RTOMO_BACKEND_CUDA)
        return;
    rtomo_device_info info;
    rtomo_error err;
    if (rtomo_cuda_device_info(o->engine.device_ids[0], &info, &err) == RTOMO_OK)
        snprintf(name, size, "%s (%d SMs)", info.name, info.multiprocessors);
}

int main(int argc, char **argv)
{
    options o;
    if (parse_options(argc, argv, &o)) {
        usage();
        return 2;
    }
    if (o.engine.backend == RTOMO_BACKEND_CUDA && rtomo_cuda_device_count() < 1) {
        fprintf(stderr, "bench-sbdx: no CUDA device (use --backend cpu)\n");
        return 77;
    }
    char device[300];
    describe_device(&o, device, sizeof device);
    setup s;
    setup_make(&s, &o, o.lo[0], o.hi[0]);
    uint8_t *frames = random_frames(s.samples, 0x5bd1u);
    buffers b = {malloc(sizeof(float) * s.pixels * s.g.n_planes),
                 malloc(sizeof(float) * s.pixels),
                 malloc(sizeof(uint16_t) * s.pixels)};
    float *pixel_planes = malloc(sizeof(float) * s.pixels * s.g.n_planes);
    if (!frames || !b.planes || !b.composite || !b.depth || !pixel_planes) {
        fprintf(stderr, "bench-sbdx: out of memory\n");
        return 1;
    }
    printf("bench-sbdx: %s, %d device(s), %dx%d holes, %dx%d detector, m %d, "
           "%d %s planes of %dx%d, frame %zu bytes\n", device,
           o.engine.n_devices, s.g.holes_x, s.g.holes_y, s.g.det_width,
           s.g.det_height, s.g.shift_m, s.g.n_planes,
           s.g.flat_field ? "flat-fielded" : "raw", s.g.shift_m * s.g.holes_x,
           s.g.shift_m * s.g.holes_y, s.samples);

    measure m[2 * MAX_RANGES], t[MAX_TUNE];
    int n = 0, nt = 0, rc = 0;
    if (o.tune && bench_tuning(&o, frames, &s, &b, t, &nt))
        rc = 1;
    if (o.tune && rc == 0) {
        /* The ranges below run with the fastest configuration. */
        int best = 0;
        for (int i = 1; i < nt; i++)
            if (t[i].kernel_ms < t[best].kernel_ms)
                best = i;
        setenv("RTOMO_SBDX_XPASS", tune_configs[best], 1);
        o.xpass = tune_configs[best];
        printf("x-pass rows,threads %s is the fastest: used below\n",
               tune_configs[best]);
    }
    for (int r = 0; r < o.n_ranges && rc == 0; r++, n += 2)
        if (bench_range(&o, r, frames, &s, &b, pixel_planes, &m[n], &m[n + 1]))
            rc = 1;

    print_header();
    for (int i = 0; i < nt; i++)
        print_row(&t[i]);
    for (int i = 0; i < n; i++)
        if (strcmp(m[i].method, "detector") || o.detector_frames > 0)
            print_row(&m[i]);
    if (o.json)
        write_json(&o, &s, device, m, n, t, nt);
    free(frames);
    free(b.planes);
    free(b.composite);
    free(b.depth);
    free(pixel_planes);
    return rc;
}
