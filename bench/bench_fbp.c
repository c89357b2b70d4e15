/*
 * bench_fbp.c — benchmark of the FBP engine (program bench-fbp).
 *
 * Three measurements, each on fresh random data (never zeros), after a
 * warm-up, as the median of repeats:
 *   bp    back-projection alone: every kernel x slices per pass x precision
 *         x interpolation (and AUTO), at each size n (n x n slices, n
 *         projections, n bins), with GU/s from the engine's own timing
 *         (stats.backproject_seconds: CUDA events) and from the wall time of
 *         rtomo_fbp_reconstruct (slices in host memory);
 *   full  the whole path host to host: uint16 frames with a dark and a
 *         flat in host memory -> filtered on the GPU as they arrive ->
 *         slices in host memory, against back-projection alone;
 *   e2e   one n^3 volume from n projections end to end (default 2048);
 *   stream  streaming back-projection into resident slices: every
 *         projection queued in chunks (at each chunk size the backend is
 *         given through RTOMO_CUDA_FBP_STREAM_CHUNK, or its own), then
 *         the slices read to the host, against rtomo_fbp_reconstruct of
 *         the same slices on the same plan; the cost of streaming as the
 *         ratio of the two (engine back-projection time and wall time);
 *         with --stream-read N also the read of N resident n^2 slices
 *         into host memory, the step left after a scan's last chunk.
 * Results go to stdout as tables and, with --json PATH, to a JSON file.
 *
 *   bench-fbp [--sizes 512,1024,2048,4096] [--slices N] [--repeats R]
 *             [--kernels auto,standard,texture,alu,hybrid] [--spp 1,2,4]
 *             [--precisions float,half] [--interps linear,nearest]
 *             [--devices 0,1] [--backend cuda|cpu] [--no-bp] [--full]
 *             [--e2e [N]] [--stream] [--stream-chunks 32,64,...]
 *             [--stream-read N] [--fov full|circle] [--json PATH]
 *
 * --fov circle times the engine with the circular field of view
 * (rtomo_engine.h): pixels outside are not computed, while GU/s still
 * counts every pixel of the n x n grid, so the saving shows as GU/s
 * (about 21% of the slice lies outside).
 */
#include "config.h"

#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "rtomo_engine.h"
#include "rtomo_sim.h"

#define MAX_LIST 16

typedef struct int_list {
    int v[MAX_LIST];
    int n;
} int_list;

typedef struct bench_options {
    int_list sizes, kernels, spp, precisions, interps, devices;
    int_list stream_chunks;     /* 0 = the backend's own chunk size */
    int slices;                 /* 0 = per-size default */
    int repeats;
    int run_bp, run_full, e2e_size;
    int run_stream, stream_read;
    rtomo_backend backend;
    rtomo_fov fov;              /* --fov: every plan's field of view */
    const char *json;
} bench_options;

typedef struct bench_mode {
    rtomo_bp_kernel kernel;
    int slices;                 /* 0 with AUTO */
    rtomo_precision precision;
    rtomo_interp interp;
} bench_mode;

static void die(const char *what, const rtomo_error *err)
{
    fprintf(stderr, "bench-fbp: %s: %s\n", what, err ? err->message : "failed");
    exit(1);
}

/* ------------------------------------------------------------ options ---- */

/* Parse "a,b,c" with `parse` turning each item into an int. */
static int parse_list(const char *s, int_list *out, int (*parse)(const char *, int *))
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", s);
    out->n = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t;
         t = strtok_r(NULL, ",", &save)) {
        if (out->n >= MAX_LIST || !parse(t, &out->v[out->n]))
            return 0;
        out->n++;
    }
    return out->n > 0;
}

static int parse_int(const char *s, int *v)
{
    char *end;
    long x = strtol(s, &end, 10);
    *v = (int)x;
    return *end == '\0' && x >= 0 && x <= 1 << 20;
}

static int parse_kernel(const char *s, int *v)
{
    rtomo_bp_kernel k;
    return rtomo_bp_kernel_parse(s, &k) == RTOMO_OK && (*v = (int)k, 1);
}

static int parse_interp(const char *s, int *v)
{
    rtomo_interp i;
    return rtomo_interp_parse(s, &i) == RTOMO_OK && (*v = (int)i, 1);
}

static int parse_precision(const char *s, int *v)
{
    if (strcmp(s, "float") == 0)
        return *v = RTOMO_PRECISION_FLOAT, 1;
    if (strcmp(s, "half") == 0)
        return *v = RTOMO_PRECISION_HALF, 1;
    return 0;
}

static void usage(void)
{
    fprintf(stderr,
            "usage: bench-fbp [--sizes 512,1024,2048,4096] [--slices N] "
            "[--repeats R]\n  [--kernels auto,standard,texture,alu,hybrid] "
            "[--spp 1,2,4] [--precisions float,half]\n  [--interps "
            "linear,nearest] [--devices 0,1] [--backend cuda|cpu] [--no-bp]\n"
            "  [--full] [--e2e [N]] [--stream] [--stream-chunks 32,64,...]\n"
            "  [--stream-read N] [--fov full|circle] [--json PATH]\n");
    exit(2);
}

static void default_options(bench_options *o)
{
    memset(o, 0, sizeof *o);
    parse_list("512,1024,2048,4096", &o->sizes, parse_int);
    parse_list("auto,standard,texture,alu,hybrid", &o->kernels, parse_kernel);
    parse_list("1,2,4", &o->spp, parse_int);
    parse_list("float,half", &o->precisions, parse_precision);
    parse_list("linear,nearest", &o->interps, parse_interp);
    parse_list("0", &o->stream_chunks, parse_int);
    o->repeats = 5;
    o->run_bp = 1;
    o->backend = RTOMO_BACKEND_CUDA;
}

static void parse_args(int argc, char **argv, bench_options *o)
{
    default_options(o);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int ok = 1;
        if (strcmp(a, "--sizes") == 0 && v) ok = parse_list(v, &o->sizes, parse_int), i++;
        else if (strcmp(a, "--kernels") == 0 && v) ok = parse_list(v, &o->kernels, parse_kernel), i++;
        else if (strcmp(a, "--spp") == 0 && v) ok = parse_list(v, &o->spp, parse_int), i++;
        else if (strcmp(a, "--precisions") == 0 && v) ok = parse_list(v, &o->precisions, parse_precision), i++;
        else if (strcmp(a, "--interps") == 0 && v) ok = parse_list(v, &o->interps, parse_interp), i++;
        else if (strcmp(a, "--devices") == 0 && v) ok = parse_list(v, &o->devices, parse_int), i++;
        else if (strcmp(a, "--slices") == 0 && v) ok = parse_int(v, &o->slices), i++;
        else if (strcmp(a, "--repeats") == 0 && v) ok = parse_int(v, &o->repeats) && o->repeats > 0, i++;
        else if (strcmp(a, "--json") == 0 && v) o->json = v, i++;
        else if (strcmp(a, "--fov") == 0 && v) ok = rtomo_fov_parse(v, &o->fov) == RTOMO_OK, i++;
        else if (strcmp(a, "--backend") == 0 && v) ok = rtomo_backend_parse(v, &o->backend) == RTOMO_OK, i++;
        else if (strcmp(a, "--no-bp") == 0) o->run_bp = 0;
        else if (strcmp(a, "--full") == 0) o->run_full = 1;
        else if (strcmp(a, "--stream") == 0) o->run_stream = 1;
        else if (strcmp(a, "--stream-chunks") == 0 && v) ok = parse_list(v, &o->stream_chunks, parse_int), i++;
        else if (strcmp(a, "--stream-read") == 0 && v) ok = parse_int(v, &o->stream_read) && o->stream_read > 0, i++;
        else if (strcmp(a, "--e2e") == 0) {
            o->e2e_size = 2048;
            if (v && v[0] != '-' && parse_int(v, &o->e2e_size))
                i++;
        } else
            usage();
        if (!ok)
            usage();
    }
}

/* Enough slices to fill the GPU for a few hundred milliseconds. */
static int slices_for(const bench_options *o, int n)
{
    if (o->slices)
        return o->slices;
    return n <= 512 ? 256 : n <= 1024 ? 128 : n <= 2048 ? 64 : 16;
}

static void engine_options(const bench_options *o, const bench_mode *m,
                           rtomo_engine_options *opt)
{
    rtomo_engine_options_init(opt);
    opt->backend = o->backend;
    opt->bp_kernel = m->kernel;
    opt->slices_per_pass = m->slices;
    opt->precision = m->precision;
    opt->n_devices = o->devices.n;
    for (int i = 0; i < o->devices.n; i++)
        opt->device_ids[i] = o->devices.v[i];
}

static const char *mode_name(const bench_mode *m)
{
    static char s[64];
    snprintf(s, sizeof s, "%-8s %d %-5s %-7s", rtomo_bp_kernel_name(m->kernel),
             m->slices, m->precision == RTOMO_PRECISION_HALF ? "half" : "float",
             rtomo_interp_name(m->interp));
    return s;
}

/* -------------------------------------------------------------- data ---- */

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double median(double *v, int n)
{
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && v[j - 1] > v[j]; j--) {
            double t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static uint64_t fresh_seed(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^ (uint64_t)getpid();
}

/* Filtered sinograms: DISTINCT_ROWS different random rows of n x n,
 * drawn once per size and cycled over the plans' rows (the content does
 * not change the speed; only zeros would). */
#define DISTINCT_ROWS 3

static float *random_sinograms(int n, uint64_t *seed)
{
    const size_t count = (size_t)n * n * DISTINCT_ROWS;
    float *rows = malloc(sizeof(float) * count);
    if (!rows)
        die("out of memory for sinograms", NULL);
    for (size_t i = 0; i < count; i++)
        rows[i] = (float)(2.0 * rtomo_random_uniform(seed) - 1.0) * 1e-3f;
    return rows;
}

static void feed_sinograms(rtomo_fbp *plan, const float *rows)
{
    const rtomo_fbp_geometry *g = rtomo_fbp_geometry_of(plan);
    const size_t n = (size_t)g->n_proj * g->det_width;
    rtomo_error err;
    for (int r = 0; r < g->row_count; r++)
        if (rtomo_fbp_set_filtered(plan, g->row_first + r, 1,
                                   rows + n * (r % DISTINCT_ROWS), &err))
            die("set_filtered", &err);
}

/* A plan for mode m of an n-bin detector of `rows` rows and n
 * projections: the cube's slices n x n. */
static rtomo_fbp *cube_plan(const bench_options *o, int n, int rows,
                            const bench_mode *m)
{
    rtomo_fbp_geometry g;
    rtomo_fbp_geometry_init(&g);
    g.det_width = n;
    g.det_height = rows;
    g.n_proj = n;
    g.interp = m->interp;
    g.field_of_view = o->fov;
    rtomo_engine_options opt;
    engine_options(o, m, &opt);
    rtomo_error err;
    rtomo_fbp *plan = rtomo_fbp_create(&g, &opt, &err);
    if (!plan)
        die("plan", &err);
    return plan;
}

/* The autotuner's choices so far, from its cache file (the bench points
 * RTOMO_CACHE_DIR at a private directory). */
static void print_autotune_choices(const char *dir, json_t *js)
{
    char path[512], line[1024];
    snprintf(path, sizeof path, "%s/fbp-autotune-v2.txt", dir);
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    printf("\nautotune choices (device, roi w, h, n_proj, width, precision, interp, "
           "asked kernel, spp, ratio -> kernel, spp, precision, tile, ratio, stored, GU/s):\n");
    while (fgets(line, sizeof line, f)) {
        printf("  %s", line);
        line[strcspn(line, "\n")] = '\0';
        json_array_append_new(js, json_string(line));
    }
    fclose(f);
}

/* ---------------------------------------------------------- bp bench ---- */

typedef struct bp_result {
    double gus, gus_wall, seconds;
} bp_result;

static bp_result bench_bp_mode(const bench_options *o, int n, int rows,
                               const bench_mode *m, const float *sinograms,
                               float *out)
{
    rtomo_fbp *plan = cube_plan(o, n, rows, m);
    rtomo_error err;
    feed_sinograms(plan, sinograms);
    int *list = malloc(sizeof(int) * (size_t)rows);
    for (int r = 0; r < rows; r++)
        list[r] = r;
    if (rtomo_fbp_reconstruct(plan, list, rows, out, &err))     /* warm-up */
        die("reconstruct", &err);
    double bp[64], wall[64];
    const int reps = o->repeats < 64 ? o->repeats : 64;
    for (int i = 0; i < reps; i++) {
        rtomo_fbp_stats a, b;
        rtomo_fbp_get_stats(plan, &a);
        if (rtomo_fbp_reconstruct(plan, list, rows, out, &err))
            die("reconstruct", &err);
        rtomo_fbp_get_stats(plan, &b);
        bp[i] = b.backproject_seconds - a.backproject_seconds;
        wall[i] = b.reconstruct_seconds - a.reconstruct_seconds;
    }
    const double updates = (double)rows * n * n * n;
    bp_result r;
    r.seconds = median(bp, reps);
    r.gus = updates / r.seconds * 1e-9;
    r.gus_wall = updates / median(wall, reps) * 1e-9;
    free(list);
    rtomo_fbp_destroy(plan);
    return r;
}

static int mode_selected(const int_list *l, int v)
{
    for (int i = 0; i < l->n; i++)
        if (l->v[i] == v)
            return 1;
    return 0;
}

/* The modes to measure: AUTO per precision and interpolation, then every
 * explicit kernel x slices x precision x interpolation. */
static int list_modes(const bench_options *o, bench_mode *modes, int cap)
{
    int n = 0;
    for (int k = RTOMO_BP_AUTO; k <= RTOMO_BP_HYBRID; k++) {
        if (!mode_selected(&o->kernels, k))
            continue;
        for (int si = 0; si < (k == RTOMO_BP_AUTO ? 1 : o->spp.n); si++)
            for (int p = 0; p < o->precisions.n; p++)
                for (int i = 0; i < o->interps.n && n < cap; i++) {
                    bench_mode *m = &modes[n++];
                    m->kernel = (rtomo_bp_kernel)k;
                    m->slices = k == RTOMO_BP_AUTO ? 0 : o->spp.v[si];
                    m->precision = (rtomo_precision)o->precisions.v[p];
                    m->interp = (rtomo_interp)o->interps.v[i];
                }
    }
    return n;
}

static void bench_bp(const bench_options *o, uint64_t *seed, json_t *results)
{
    bench_mode modes[256];
    const int n_modes = list_modes(o, modes, 256);
    for (int s = 0; s < o->sizes.n; s++) {
        const int n = o->sizes.v[s], rows = slices_for(o, n);
        float *out = malloc(sizeof(float) * (size_t)rows * n * n);
        float *sinograms = random_sinograms(n, seed);
        if (!out)
            die("out of memory for slices", NULL);
        printf("\nback-projection, %d^2 slices x %d, %d projections of %d bins, "
               "field of view %s\n", n, rows, n, n, rtomo_fov_name(o->fov));
        printf("  %-31s %10s %12s %10s\n", "kernel   spp prec  interp", "GU/s (BP)",
               "GU/s (wall)", "BP s");
        double baseline = 0.0;
        for (int i = 0; i < n_modes; i++) {
            bp_result r = bench_bp_mode(o, n, rows, &modes[i], sinograms, out);
            if (modes[i].kernel == RTOMO_BP_STANDARD && modes[i].slices == 1 &&
                modes[i].precision == RTOMO_PRECISION_FLOAT &&
                modes[i].interp == RTOMO_INTERP_LINEAR)
                baseline = r.gus;
            printf("  %-31s %10.1f %12.1f %10.4f\n", mode_name(&modes[i]), r.gus,
                   r.gus_wall, r.seconds);
            fflush(stdout);
            json_t *j = json_pack("{s:i,s:i,s:i,s:s,s:i,s:s,s:s,s:f,s:f,s:f}",
                                  "size", n, "slices", rows, "projections", n,
                                  "kernel", rtomo_bp_kernel_name(modes[i].kernel),
                                  "slices_per_pass", modes[i].slices, "precision",
                                  modes[i].precision == RTOMO_PRECISION_HALF ? "half" : "float",
                                  "interp", rtomo_interp_name(modes[i].interp),
                                  "gus_bp", r.gus, "gus_wall", r.gus_wall,
                                  "bp_seconds", r.seconds);
            json_array_append_new(results, j);
        }
        if (baseline > 0.0)
            printf("  (standard float linear baseline: %.1f GU/s)\n", baseline);
        free(sinograms);
        free(out);
    }
}

/* ---------------------------------------------------- full-path bench ---- */

/* uint16 frames of rows x n: a dark, a flat, then `distinct` random
 * projections cycled over the scan. */
typedef struct frame_set {
    uint16_t *frames;
    int distinct;
    size_t pixels;
} frame_set;

static frame_set make_frame_set(int n, int rows, uint64_t *seed)
{
    frame_set fs;
    fs.distinct = 4;
    fs.pixels = (size_t)rows * n;
    fs.frames = malloc(sizeof(uint16_t) * fs.pixels * (fs.distinct + 2));
    if (!fs.frames)
        die("out of memory for frames", NULL);
    for (size_t i = 0; i < fs.pixels; i++) {
        fs.frames[i] = 100;                 /* dark */
        fs.frames[fs.pixels + i] = 60000;   /* flat */
    }
    for (size_t i = 2 * fs.pixels; i < fs.pixels * (fs.distinct + 2); i++)
        fs.frames[i] = (uint16_t)(1000 + 50000 * rtomo_random_uniform(seed));
    return fs;
}

static rtomo_fbp *scan_plan(const bench_options *o, int n, int rows,
                            const bench_mode *m, const frame_set *fs)
{
    rtomo_fbp *plan = cube_plan(o, n, rows, m);
    rtomo_error err;
    if (rtomo_fbp_add_dark(plan, fs->frames, RTOMO_DTYPE_U16, &err) ||
        rtomo_fbp_add_flat(plan, fs->frames + fs->pixels, RTOMO_DTYPE_U16, &err))
        die("dark/flat", &err);
    return plan;
}

/* Feed all n projections of a scan; returns the seconds it took. */
static double ingest(rtomo_fbp *plan, const frame_set *fs, int n)
{
    rtomo_error err;
    const double t0 = now_seconds();
    for (int p = 0; p < n; p++)
        if (rtomo_fbp_add_projection(plan, p, fs->frames + fs->pixels * (2 + p % fs->distinct),
                                     RTOMO_DTYPE_U16, NAN, NAN, &err))
            die("add_projection", &err);
    return now_seconds() - t0;
}

/* Reconstruct rows 0..rows-1, `slab` rows per call into the same buffer
 * (a service hands slices on as they come). */
static void reconstruct_rows(rtomo_fbp *plan, int rows, int slab, float *out)
{
    int *list = malloc(sizeof(int) * (size_t)rows);
    if (!list)
        die("out of memory", NULL);
    for (int r = 0; r < rows; r++)
        list[r] = r;
    rtomo_error err;
    for (int first = 0; first < rows; first += slab)
        if (rtomo_fbp_reconstruct(plan, list + first, rows - first < slab ? rows - first : slab,
                                  out, &err))
            die("reconstruct", &err);
    free(list);
}

typedef struct full_result {
    double seconds, ingest_seconds, bp_seconds, filter_seconds, gus;
} full_result;

/* One scan from its first frame to its last slice in host memory. */
static full_result run_full_path(const bench_options *o, int n, int rows,
                                 int slab, const bench_mode *m,
                                 const frame_set *fs, float *out)
{
    rtomo_fbp *plan = scan_plan(o, n, rows, m, fs);
    full_result r;
    const double t0 = now_seconds();
    r.ingest_seconds = ingest(plan, fs, n);
    reconstruct_rows(plan, rows, slab, out);
    r.seconds = now_seconds() - t0;
    rtomo_fbp_stats st;
    rtomo_fbp_get_stats(plan, &st);
    r.bp_seconds = st.backproject_seconds;
    r.filter_seconds = st.filter_seconds;
    r.gus = (double)rows * n * n * n / r.seconds * 1e-9;
    rtomo_fbp_destroy(plan);
    return r;
}

/* Streaming: consecutive scans through two plans, one thread feeding scan
 * i+1 while another reconstructs scan i, as the daemon overlaps the
 * acquisition of a scan with the reconstruction of the previous one.  The
 * period between finished scans is what a beamline sees. */
typedef struct stream {
    rtomo_fbp *plans[2];
    const frame_set *fs;
    int n, scans;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int ingested, reconstructed;
} stream;

static void *stream_ingest(void *arg)
{
    stream *s = arg;
    for (int i = 0; i < s->scans; i++) {
        pthread_mutex_lock(&s->lock);
        while (s->reconstructed < i - 1)    /* plan i%2 busy with scan i-2 */
            pthread_cond_wait(&s->cond, &s->lock);
        pthread_mutex_unlock(&s->lock);
        ingest(s->plans[i % 2], s->fs, s->n);
        pthread_mutex_lock(&s->lock);
        s->ingested = i + 1;
        pthread_cond_broadcast(&s->cond);
        pthread_mutex_unlock(&s->lock);
    }
    return NULL;
}

#define STREAM_SCANS 6

static full_result run_stream(const bench_options *o, int n, int rows,
                              const bench_mode *m, const frame_set *fs,
                              float *out)
{
    stream s = {{scan_plan(o, n, rows, m, fs), scan_plan(o, n, rows, m, fs)},
                fs, n, STREAM_SCANS, PTHREAD_MUTEX_INITIALIZER,
                PTHREAD_COND_INITIALIZER, 0, 0};
    pthread_t feeder;
    if (pthread_create(&feeder, NULL, stream_ingest, &s) != 0)
        die("cannot start the feeding thread", NULL);
    double done[STREAM_SCANS], period[STREAM_SCANS], bp[STREAM_SCANS];
    for (int i = 0; i < STREAM_SCANS; i++) {
        pthread_mutex_lock(&s.lock);
        while (s.ingested < i + 1)
            pthread_cond_wait(&s.cond, &s.lock);
        pthread_mutex_unlock(&s.lock);
        rtomo_fbp_stats a, b;
        rtomo_fbp_get_stats(s.plans[i % 2], &a);
        reconstruct_rows(s.plans[i % 2], rows, rows, out);
        rtomo_fbp_get_stats(s.plans[i % 2], &b);
        done[i] = now_seconds();
        bp[i] = b.backproject_seconds - a.backproject_seconds;
        pthread_mutex_lock(&s.lock);
        s.reconstructed = i + 1;
        pthread_cond_broadcast(&s.cond);
        pthread_mutex_unlock(&s.lock);
    }
    pthread_join(feeder, NULL);
    /* Scans 0 and 1 fill the pipeline; the steady period starts after. */
    int k = 0;
    for (int i = 2; i < STREAM_SCANS; i++, k++) {
        period[k] = done[i] - done[i - 1];
        bp[k] = bp[i];
    }
    full_result r;
    memset(&r, 0, sizeof r);
    r.seconds = median(period, k);
    r.bp_seconds = median(bp, k);
    r.gus = (double)rows * n * n * n / r.seconds * 1e-9;
    rtomo_fbp_destroy(s.plans[0]);
    rtomo_fbp_destroy(s.plans[1]);
    return r;
}

static json_t *full_json(const char *what, int n, int rows, const bench_mode *m,
                         const full_result *r)
{
    return json_pack("{s:s,s:i,s:i,s:s,s:i,s:s,s:s,s:f,s:f,s:f,s:f,s:f}", "what", what,
                     "size", n, "slices", rows, "kernel",
                     rtomo_bp_kernel_name(m->kernel), "slices_per_pass", m->slices,
                     "precision", m->precision == RTOMO_PRECISION_HALF ? "half" : "float",
                     "interp", rtomo_interp_name(m->interp), "seconds", r->seconds,
                     "ingest_seconds", r->ingest_seconds, "bp_seconds", r->bp_seconds,
                     "filter_seconds", r->filter_seconds, "gus_host_to_host", r->gus);
}

static void print_full(const char *label, const bench_mode *m, const full_result *r)
{
    printf("  %-7s %-31s %8.3f s (ingest %7.3f s)  BP %8.3f s  filter %7.3f s  "
           "%8.1f GU/s  / BP = %.3f\n", label, mode_name(m), r->seconds,
           r->ingest_seconds, r->bp_seconds, r->filter_seconds, r->gus,
           r->seconds / r->bp_seconds);
}

static void bench_full(const bench_options *o, uint64_t *seed, json_t *results)
{
    static const bench_mode modes[] = {
        {RTOMO_BP_AUTO, 0, RTOMO_PRECISION_FLOAT, RTOMO_INTERP_LINEAR},
        {RTOMO_BP_STANDARD, 1, RTOMO_PRECISION_FLOAT, RTOMO_INTERP_LINEAR},
    };
    for (int s = 0; s < o->sizes.n; s++) {
        const int n = o->sizes.v[s], rows = slices_for(o, n);
        float *out = malloc(sizeof(float) * (size_t)rows * n * n);
        if (!out)
            die("out of memory for slices", NULL);
        frame_set fs = make_frame_set(n, rows, seed);
        printf("\nfull FBP host to host: %d uint16 frames of %d x %d -> %d slices "
               "of %d^2 (scan: first frame to last slice; stream: period of "
               "consecutive scans)\n", n, rows, n, rows, n);
        for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
            run_full_path(o, n, rows, rows, &modes[i], &fs, out);  /* warm-up */
            full_result r = run_full_path(o, n, rows, rows, &modes[i], &fs, out);
            print_full("scan", &modes[i], &r);
            json_array_append_new(results, full_json("scan", n, rows, &modes[i], &r));
            r = run_stream(o, n, rows, &modes[i], &fs, out);
            print_full("stream", &modes[i], &r);
            json_array_append_new(results, full_json("stream", n, rows, &modes[i], &r));
        }
        free(fs.frames);
        free(out);
    }
}

/* The volume leaves in slabs of E2E_SLAB slices through one host buffer:
 * the whole volume at once would cost 32 GiB of host pages (and the time to
 * fault them in) for no difference in the engine's work. */
#define E2E_SLAB 256

static void bench_e2e(const bench_options *o, uint64_t *seed, json_t *results)
{
    const int n = o->e2e_size;
    static const bench_mode modes[] = {
        {RTOMO_BP_AUTO, 0, RTOMO_PRECISION_FLOAT, RTOMO_INTERP_LINEAR},
        {RTOMO_BP_AUTO, 0, RTOMO_PRECISION_HALF, RTOMO_INTERP_NEAREST},
    };
    const int slab = n < E2E_SLAB ? n : E2E_SLAB;
    const size_t voxels = (size_t)n * n * slab;
    float *out = malloc(sizeof(float) * voxels);
    if (!out)
        die("out of memory for the volume", NULL);
    memset(out, 0, sizeof(float) * voxels);     /* fault the pages in first */
    frame_set fs = make_frame_set(n, n, seed);
    printf("\nend to end: %d^3 volume from %d uint16 projections of %d x %d "
           "(slices leave in slabs of %d)\n", n, n, n, n, slab);
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        full_result r = run_full_path(o, n, n, slab, &modes[i], &fs, out);
        print_full("e2e", &modes[i], &r);
        json_array_append_new(results, full_json("e2e", n, n, &modes[i], &r));
    }
    free(fs.frames);
    free(out);
}

/* -------------------------------------------------- streaming bench ---- */

/* Open resident slices for kept rows 0..rows-1, with chunks of `chunk`
 * projections (0: the backend's own size).  Returns the engine's status. */
static rtomo_status open_resident(rtomo_fbp *plan, int rows, int chunk,
                                  rtomo_error *err)
{
    int *list = malloc(sizeof(int) * (size_t)rows);
    if (!list)
        die("out of memory", NULL);
    for (int r = 0; r < rows; r++)
        list[r] = r;
    char value[16];
    if (chunk > 0) {
        snprintf(value, sizeof value, "%d", chunk);
        setenv("RTOMO_CUDA_FBP_STREAM_CHUNK", value, 1);
    }
    const rtomo_status st = rtomo_fbp_stream_open(plan, list, rows, err);
    unsetenv("RTOMO_CUDA_FBP_STREAM_CHUNK");
    free(list);
    return st;
}

/* Queue projections 0..n_proj-1 with weight +1 and start the last chunk. */
static void queue_all(rtomo_fbp *plan, int n_proj)
{
    rtomo_error err;
    for (int p = 0; p < n_proj; p++)
        if (rtomo_fbp_stream_queue(plan, p, 1.0f, &err))
            die("stream_queue", &err);
    if (rtomo_fbp_stream_flush(plan, &err))
        die("stream_flush", &err);
}

typedef struct stream_times {
    double bp, wall, read;      /* engine BP s; first queue to slices in
                                   host memory; the read alone */
} stream_times;

/* One streamed scan: reset, every projection queued in chunks, the GPU
 * waited for (so that the read is timed alone), the slices read. */
static stream_times stream_pass(rtomo_fbp *plan, int rows, int n_proj,
                                const int *list, float *out)
{
    rtomo_error err;
    if (rtomo_fbp_stream_reset(plan, &err))
        die("stream_reset", &err);
    rtomo_fbp_stats a, b;
    rtomo_fbp_get_stats(plan, &a);
    const double t0 = now_seconds();
    queue_all(plan, n_proj);
    if (rtomo_fbp_sync(plan, &err))
        die("sync", &err);
    const double t1 = now_seconds();
    if (rtomo_fbp_stream_read(plan, list, rows, out, &err))
        die("stream_read", &err);
    const double t2 = now_seconds();
    rtomo_fbp_get_stats(plan, &b);
    stream_times t = {b.backproject_seconds - a.backproject_seconds, t2 - t0, t2 - t1};
    return t;
}

/* Medians of `reps` reconstructions of rows 0..rows-1 (after a warm-up):
 * engine BP seconds and wall seconds. */
static void plain_times(rtomo_fbp *plan, int rows, const int *list, float *out,
                        int reps, double *bp, double *wall)
{
    rtomo_error err;
    double b[64], w[64];
    if (rtomo_fbp_reconstruct(plan, list, rows, out, &err))
        die("reconstruct", &err);
    for (int i = 0; i < reps; i++) {
        rtomo_fbp_stats x, y;
        rtomo_fbp_get_stats(plan, &x);
        const double t0 = now_seconds();
        if (rtomo_fbp_reconstruct(plan, list, rows, out, &err))
            die("reconstruct", &err);
        w[i] = now_seconds() - t0;
        rtomo_fbp_get_stats(plan, &y);
        b[i] = y.backproject_seconds - x.backproject_seconds;
    }
    *bp = median(b, reps);
    *wall = median(w, reps);
}

/* Streaming against plain back-projection of the same slices on one plan,
 * at each chunk size asked for. */
static void bench_stream_mode(const bench_options *o, int n, int rows,
                              const bench_mode *m, const float *sinograms,
                              float *out, json_t *results)
{
    rtomo_fbp *plan = cube_plan(o, n, rows, m);
    feed_sinograms(plan, sinograms);
    int *list = malloc(sizeof(int) * (size_t)rows);
    if (!list)
        die("out of memory", NULL);
    for (int r = 0; r < rows; r++)
        list[r] = r;
    const int reps = o->repeats < 64 ? o->repeats : 64;
    double plain_bp, plain_wall;
    plain_times(plan, rows, list, out, reps, &plain_bp, &plain_wall);
    const double updates = (double)rows * n * n * n;
    printf("  %s: plain BP %.4f s (%.0f GU/s), wall %.4f s\n", mode_name(m),
           plain_bp, updates / plain_bp * 1e-9, plain_wall);
    printf("    %6s %9s %9s %9s %10s %9s %10s\n", "chunk", "BP s", "wall s",
           "read s", "GU/s (BP)", "BP/plain", "wall/plain");
    for (int c = 0; c < o->stream_chunks.n; c++) {
        rtomo_error err;
        if (open_resident(plan, rows, o->stream_chunks.v[c], &err))
            die("stream_open", &err);
        const int chunk = rtomo_fbp_stream_chunk(plan);
        stream_pass(plan, rows, n, list, out);      /* warm-up */
        double bp[64], wall[64], rd[64];
        for (int i = 0; i < reps; i++) {
            stream_times t = stream_pass(plan, rows, n, list, out);
            bp[i] = t.bp;
            wall[i] = t.wall;
            rd[i] = t.read;
        }
        rtomo_fbp_stream_close(plan);
        const double sb = median(bp, reps), sw = median(wall, reps), sr = median(rd, reps);
        printf("    %6d %9.4f %9.4f %9.4f %10.0f %9.3f %10.3f\n", chunk, sb, sw, sr,
               updates / sb * 1e-9, sb / plain_bp, sw / plain_wall);
        fflush(stdout);
        json_array_append_new(
            results,
            json_pack("{s:s,s:i,s:i,s:s,s:i,s:s,s:s,s:i,s:f,s:f,s:f,s:f,s:f,s:f,s:f}",
                      "what", "stream", "size", n, "slices", rows, "kernel",
                      rtomo_bp_kernel_name(m->kernel), "slices_per_pass", m->slices,
                      "precision", m->precision == RTOMO_PRECISION_HALF ? "half" : "float",
                      "interp", rtomo_interp_name(m->interp), "chunk", chunk,
                      "bp_seconds", sb, "wall_seconds", sw, "read_seconds", sr,
                      "plain_bp_seconds", plain_bp, "plain_wall_seconds", plain_wall,
                      "ratio_bp", sb / plain_bp, "ratio_wall", sw / plain_wall));
    }
    free(list);
    rtomo_fbp_destroy(plan);
}

#define READ_PROJECTIONS 64

/* Reading N resident slices of n^2 into host memory (pages already
 * touched, as a service's reused buffers are): what remains after a
 * streamed scan's last chunk. */
static void bench_stream_read(const bench_options *o, int n, uint64_t *seed,
                              json_t *results)
{
    const int rows = o->stream_read;
    rtomo_fbp_geometry g;
    rtomo_fbp_geometry_init(&g);
    g.det_width = n;
    g.det_height = rows;
    g.n_proj = READ_PROJECTIONS;
    g.field_of_view = o->fov;
    const bench_mode m = {RTOMO_BP_AUTO, 0, RTOMO_PRECISION_FLOAT, RTOMO_INTERP_LINEAR};
    rtomo_engine_options opt;
    engine_options(o, &m, &opt);
    rtomo_error err;
    rtomo_fbp *plan = rtomo_fbp_create(&g, &opt, &err);
    if (!plan)
        die("plan", &err);
    float *sinograms = random_sinograms(n, seed);
    feed_sinograms(plan, sinograms);
    free(sinograms);
    const size_t floats = (size_t)rows * n * n;
    float *out = malloc(sizeof(float) * floats);
    printf("\nreading resident slices: %d of %d^2 (%.1f GiB) into host memory\n",
           rows, n, (double)floats * sizeof(float) / (1 << 30));
    if (!out || open_resident(plan, rows, 0, &err)) {
        printf("  skipped: %s\n", out ? err.message : "out of host memory");
        free(out);
        rtomo_fbp_destroy(plan);
        return;
    }
    memset(out, 0, sizeof(float) * floats);     /* fault the pages in first */
    int *list = malloc(sizeof(int) * (size_t)rows);
    if (!list)
        die("out of memory", NULL);
    for (int r = 0; r < rows; r++)
        list[r] = r;
    const int reps = o->repeats < 64 ? o->repeats : 64;
    const double gb = (double)floats * sizeof(float) / 1e9;
    /* Through the engine's pinned buffers, then with the output
     * page-locked for each read (RTOMO_CUDA_FBP_READ_REGISTER), which the
     * GPU then fills directly. */
    static const char *const ways[] = {"staged", "registered"};
    for (int w = 0; w < 2; w++) {
        double rd[64], bp[64];
        if (w == 1)
            setenv("RTOMO_CUDA_FBP_READ_REGISTER", "1", 1);
        for (int i = 0; i < reps; i++) {
            stream_times t = stream_pass(plan, rows, READ_PROJECTIONS, list, out);
            rd[i] = t.read;
            bp[i] = t.bp;
        }
        unsetenv("RTOMO_CUDA_FBP_READ_REGISTER");
        const double s = median(rd, reps), b = median(bp, reps);
        printf("  %-10s read %.3f s (%.1f GB/s); one chunk of %d projections into "
               "all of them: BP %.3f s (%.0f GU/s)\n", ways[w], s, gb / s,
               READ_PROJECTIONS, b, (double)floats * READ_PROJECTIONS / b * 1e-9);
        json_array_append_new(results,
                              json_pack("{s:s,s:s,s:i,s:i,s:f,s:f,s:f}", "what",
                                        "stream_read", "way", ways[w], "size", n,
                                        "slices", rows, "read_seconds", s,
                                        "gb_per_s", gb / s, "chunk_bp_seconds", b));
    }
    rtomo_fbp_stream_close(plan);
    free(list);
    free(out);
    rtomo_fbp_destroy(plan);
}

static void bench_stream(const bench_options *o, uint64_t *seed, json_t *results)
{
    static const bench_mode modes[] = {
        {RTOMO_BP_AUTO, 0, RTOMO_PRECISION_FLOAT, RTOMO_INTERP_LINEAR},
        {RTOMO_BP_AUTO, 0, RTOMO_PRECISION_HALF, RTOMO_INTERP_NEAREST},
    };
    for (int s = 0; s < o->sizes.n; s++) {
        const int n = o->sizes.v[s], rows = slices_for(o, n);
        float *out = malloc(sizeof(float) * (size_t)rows * n * n);
        float *sinograms = random_sinograms(n, seed);
        if (!out)
            die("out of memory for slices", NULL);
        printf("\nstreaming back-projection, %d^2 slices x %d, %d projections of "
               "%d bins: all queued in chunks, then read; against reconstruct "
               "(the cost of streaming as a ratio to plain back-projection)\n",
               n, rows, n, n);
        for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++)
            bench_stream_mode(o, n, rows, &modes[i], sinograms, out, results);
        free(sinograms);
        free(out);
        if (o->stream_read > 0)
            bench_stream_read(o, n, seed, results);
    }
}

/* -------------------------------------------------------------- main ---- */

static void describe_device(const bench_options *o, json_t *root)
{
    char name[300] = "cpu";
    if (o->backend != RTOMO_BACKEND_CPU && rtomo_cuda_device_count() > 0) {
        rtomo_device_info info;
        rtomo_error err;
        const int dev = o->devices.n ? o->devices.v[0] : 0;
        if (rtomo_cuda_device_info(dev, &info, &err) == RTOMO_OK) {
            snprintf(name, sizeof name, "%s (%d SMs, %.1f GiB)", info.name,
                     info.multiprocessors, (double)info.memory_total / (1 << 30));
            json_object_set_new(root, "multiprocessors", json_integer(info.multiprocessors));
        }
        json_object_set_new(root, "devices",
                            json_integer(o->devices.n ? o->devices.n : rtomo_cuda_device_count()));
    }
    printf("device: %s\n", name);
    json_object_set_new(root, "device", json_string(name));
}

int main(int argc, char **argv)
{
    bench_options o;
    parse_args(argc, argv, &o);
    /* A private autotune cache, so that the choices can be reported. */
    char dir[] = "/tmp/bench-fbp-XXXXXX";
    if (!getenv("RTOMO_CACHE_DIR") && mkdtemp(dir))
        setenv("RTOMO_CACHE_DIR", dir, 1);
    uint64_t seed = fresh_seed();
    json_t *root = json_object();
    describe_device(&o, root);
    json_t *bp = json_array(), *full = json_array(), *tuned = json_array();
    if (o.run_bp)
        bench_bp(&o, &seed, bp);
    if (o.run_full)
        bench_full(&o, &seed, full);
    if (o.e2e_size > 0)
        bench_e2e(&o, &seed, full);
    json_t *streaming = json_array();
    if (o.run_stream)
        bench_stream(&o, &seed, streaming);
    print_autotune_choices(getenv("RTOMO_CACHE_DIR"), tuned);
    json_object_set_new(root, "backprojection", bp);
    json_object_set_new(root, "full_path", full);
    json_object_set_new(root, "streaming", streaming);
    json_object_set_new(root, "autotune", tuned);
    if (o.json && json_dump_file(root, o.json, JSON_INDENT(1)) != 0)
        fprintf(stderr, "bench-fbp: cannot write %s\n", o.json);
    json_decref(root);
    return 0;
}
