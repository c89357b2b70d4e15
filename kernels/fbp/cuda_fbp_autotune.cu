/*
 * cuda_fbp_autotune.cu — choosing the back-projector for the GPU at hand.
 *
 * Whatever the engine options leave on AUTO (the kernel, the slices per
 * pass, the hybrid ratio) is resolved by timing the candidates on the
 * plan's own filtered sinograms: a centre crop of the region of interest
 * (at most 512 x 512 pixels, enough groups to fill the GPU) back-projected
 * once to warm up and once under CUDA events.  The winner is remembered in
 * memory and in a small text file, keyed by device name, sizes, precision,
 * interpolation and what was asked for, so that later plans skip the
 * timing.  The file lives in $RTOMO_CACHE_DIR, else $XDG_CACHE_HOME/rtomo,
 * else ~/.cache/rtomo; when none can be read or written the cache is simply
 * not used.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cuda_fbp.h"

#define CACHE_FILE "fbp-autotune-v2.txt"   /* v2: the stored-cache share */
#define MEMORY_ENTRIES 64
#define TUNE_EDGE 512
#define MAX_CANDIDATES 96

/* What was asked for, at which sizes, on which GPU. */
typedef struct tune_key {
    char device[256];
    int roi_w, roi_h, n_proj, det_width;
    int precision, interp;
    int kernel, slices;         /* as requested: AUTO / 0 = free */
    double ratio;               /* as requested: 0 = free */
} tune_key;

typedef struct tune_entry {
    tune_key key;
    cuda_fbp_config cfg;
    double gus;
} tune_entry;

static pthread_mutex_t memory_lock = PTHREAD_MUTEX_INITIALIZER;
static tune_entry memory[MEMORY_ENTRIES];
static int memory_used, memory_next;

static int same_key(const tune_key *a, const tune_key *b)
{
    return strcmp(a->device, b->device) == 0 && a->roi_w == b->roi_w &&
           a->roi_h == b->roi_h && a->n_proj == b->n_proj &&
           a->det_width == b->det_width && a->precision == b->precision &&
           a->interp == b->interp && a->kernel == b->kernel &&
           a->slices == b->slices && a->ratio == b->ratio;
}

static int memory_lookup(const tune_key *key, cuda_fbp_config *cfg)
{
    int found = 0;
    pthread_mutex_lock(&memory_lock);
    for (int i = 0; i < memory_used && !found; i++)
        if (same_key(&memory[i].key, key)) {
            *cfg = memory[i].cfg;
            found = 1;
        }
    pthread_mutex_unlock(&memory_lock);
    return found;
}

static void memory_store(const tune_key *key, const cuda_fbp_config *cfg,
                         double gus)
{
    pthread_mutex_lock(&memory_lock);
    tune_entry *e = &memory[memory_next];
    e->key = *key;
    e->cfg = *cfg;
    e->gus = gus;
    memory_next = (memory_next + 1) % MEMORY_ENTRIES;
    if (memory_used < MEMORY_ENTRIES)
        memory_used++;
    pthread_mutex_unlock(&memory_lock);
}

/* ------------------------------------------------------------- file ---- */

/* The cache directory (created when missing); 0 when there is none. */
static int cache_dir(char *dir, size_t size)
{
    const char *explicit_dir = getenv("RTOMO_CACHE_DIR");
    const char *xdg = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    int n;
    if (explicit_dir && *explicit_dir)
        n = snprintf(dir, size, "%s", explicit_dir);
    else if (xdg && *xdg)
        n = snprintf(dir, size, "%s/rtomo", xdg);
    else if (home && *home)
        n = snprintf(dir, size, "%s/.cache/rtomo", home);
    else
        return 0;
    if (n < 0 || (size_t)n >= size)
        return 0;
    if (!(explicit_dir && *explicit_dir) && !(xdg && *xdg)) {
        char parent[1024];
        snprintf(parent, sizeof parent, "%s/.cache", home);
        mkdir(parent, 0755);
    } else if (!(explicit_dir && *explicit_dir)) {
        mkdir(xdg, 0755);
    }
    return mkdir(dir, 0755) == 0 || errno == EEXIST;
}

static int cache_path(char *path, size_t size)
{
    char dir[1024];
    if (!cache_dir(dir, sizeof dir))
        return 0;
    int n = snprintf(path, size, "%s/%s", dir, CACHE_FILE);
    return n > 0 && (size_t)n < size;
}

/* Device names may hold spaces, never tabs: fields are tab-separated. */
static void format_line(char *line, size_t size, const tune_key *k,
                        const cuda_fbp_config *c, double gus)
{
    snprintf(line, size,
             "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%.6f\t%d\t%d\t%d\t%d\t%.6f\t%.6f\t%.1f\n",
             k->device, k->roi_w, k->roi_h, k->n_proj, k->det_width,
             k->precision, k->interp, k->kernel, k->slices, k->ratio,
             (int)c->kernel, c->format.slices, (int)c->format.precision,
             c->tile, c->hybrid_ratio, c->stored_ratio, gus);
}

static int parse_line(char *line, tune_key *k, cuda_fbp_config *c)
{
    char *field[17];
    int n = 0;
    for (char *save = NULL, *f = strtok_r(line, "\t\n", &save); f && n < 17;
         f = strtok_r(NULL, "\t\n", &save))
        field[n++] = f;
    if (n != 17)
        return 0;
    memset(k, 0, sizeof *k);
    snprintf(k->device, sizeof k->device, "%s", field[0]);
    int *ints[] = {&k->roi_w, &k->roi_h, &k->n_proj, &k->det_width,
                   &k->precision, &k->interp, &k->kernel, &k->slices};
    for (int i = 0; i < 8; i++)
        *ints[i] = atoi(field[1 + i]);
    k->ratio = atof(field[9]);
    c->kernel = (rtomo_bp_kernel)atoi(field[10]);
    c->format.slices = atoi(field[11]);
    c->format.precision = (rtomo_precision)atoi(field[12]);
    c->tile = atoi(field[13]);
    c->hybrid_ratio = atof(field[14]);
    c->stored_ratio = atof(field[15]);
    const int valid_kernel = c->kernel >= RTOMO_BP_STANDARD && c->kernel <= RTOMO_BP_HYBRID;
    const int valid_slices = c->format.slices == 1 || c->format.slices == 2 ||
                             c->format.slices == 4;
    return valid_kernel && valid_slices &&
           (c->format.precision == RTOMO_PRECISION_FLOAT ||
            c->format.precision == RTOMO_PRECISION_HALF) &&
           c->hybrid_ratio >= 0.0 && c->hybrid_ratio <= 1.0 &&
           c->stored_ratio >= 0.0 && c->stored_ratio <= 1.0;
}

/* The last line of the file that matches `key` (later lines win). */
static int file_lookup(const tune_key *key, cuda_fbp_config *cfg)
{
    char path[1100];
    if (!cache_path(path, sizeof path))
        return 0;
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char line[1024];
    int found = 0;
    while (fgets(line, sizeof line, f)) {
        /* Round-trip the key through the same format so that the ratio
         * compares as written. */
        tune_key k;
        cuda_fbp_config c;
        if (!parse_line(line, &k, &c))
            continue;
        char a[1024], b[1024];
        format_line(a, sizeof a, &k, &c, 0.0);
        format_line(b, sizeof b, key, &c, 0.0);
        if (strcmp(a, b) == 0) {
            *cfg = c;
            found = 1;
        }
    }
    fclose(f);
    return found;
}

static void file_store(const tune_key *key, const cuda_fbp_config *cfg,
                       double gus)
{
    char path[1100], line[1024];
    if (!cache_path(path, sizeof path))
        return;
    FILE *f = fopen(path, "a");
    if (!f)
        return;
    format_line(line, sizeof line, key, cfg, gus);
    fputs(line, f);
    fclose(f);
}

/* ------------------------------------------------------- candidates ---- */

static void add_candidate(cuda_fbp_config *list, int *n, rtomo_bp_kernel kernel,
                          int slices, rtomo_precision precision, int tile,
                          double ratio, double stored)
{
    if (*n >= MAX_CANDIDATES)
        return;
    cuda_fbp_config *c = &list[(*n)++];
    c->kernel = kernel;
    c->format.slices = slices;
    c->format.precision = precision;
    c->tile = tile;
    c->hybrid_ratio = ratio;
    c->stored_ratio = stored;
}

/* Everything the options allow, for at most `max_slices` slices per pass.
 * The tile kernels in half precision with nearest interpolation are tried
 * with a float cache in every ALU block and with half of them keeping the
 * texels as stored (cuda_fbp_alu_block.h: 2% more on an H100, run 71). */
static int enumerate(const rtomo_engine_options *opt, int max_slices,
                     rtomo_interp interp, cuda_fbp_config *list)
{
    static const int slice_choices[] = {1, 2, 4};
    static const double ratios[] = {0.25, 0.375, 0.5, 0.625, 0.75};
    const int storable = opt->precision == RTOMO_PRECISION_HALF &&
                         interp == RTOMO_INTERP_NEAREST;
    const double stored_choices[] = {0.0, 0.5};
    const int n_stored = storable ? 2 : 1;
    int n = 0;
    for (int si = 0; si < 3; si++) {
        const int S = slice_choices[si];
        if (opt->slices_per_pass ? S != opt->slices_per_pass : S > max_slices)
            continue;
        for (int k = RTOMO_BP_STANDARD; k <= RTOMO_BP_HYBRID; k++) {
            /* The standard kernel is the baseline, never the fastest. */
            if (opt->bp_kernel == RTOMO_BP_AUTO ? k == RTOMO_BP_STANDARD
                                                : k != (int)opt->bp_kernel)
                continue;
            const int tiled = k == RTOMO_BP_ALU || k == RTOMO_BP_HYBRID;
            for (int tile = 32; tile <= (tiled && S < 4 ? 64 : 32); tile *= 2) {
                for (int h = 0; h < (tiled ? n_stored : 1); h++) {
                    const double stored = stored_choices[h];
                    if (k != RTOMO_BP_HYBRID) {
                        add_candidate(list, &n, (rtomo_bp_kernel)k, S,
                                      opt->precision, tile, 0.0, stored);
                        continue;
                    }
                    if (opt->hybrid_ratio > 0.0) {
                        add_candidate(list, &n, RTOMO_BP_HYBRID, S, opt->precision,
                                      tile, opt->hybrid_ratio, stored);
                        continue;
                    }
                    for (int r = 0; r < 5; r++)
                        add_candidate(list, &n, RTOMO_BP_HYBRID, S, opt->precision,
                                      tile, ratios[r], stored);
                }
            }
        }
    }
    return n;
}

/* ----------------------------------------------------------- timing ---- */

/* Updates per second of cfg on the slot's rows over roi. */
static rtomo_status time_candidate(cuda_fbp_impl *impl, cuda_fbp_slot *slot,
                                   const cuda_fbp_config *cfg, const int *rows,
                                   int n_rows, const int *roi, double *gus,
                                   rtomo_error *err)
{
    const rtomo_fbp *plan = impl->plan;
    const int S = cfg->format.slices;
    const int available = (n_rows + S - 1) / S;
    const int groups = cuda_fbp_batch_groups(slot, plan, cfg, roi[2], roi[3], available);
    const int used = groups * S < n_rows ? groups * S : n_rows;
    cudaEvent_t start, stop;
    RTOMO_CUDA_TRY(err, cudaEventCreate(&start));
    RTOMO_CUDA_TRY(err, cudaEventCreate(&stop));
    rtomo_status st = cuda_fbp_recon_batch(slot, plan, impl, cfg, rows, used, roi, err);
    float ms = 0.f;
    cudaError_t rc = cudaEventRecord(start, slot->compute);
    if (st == RTOMO_OK && rc == cudaSuccess)
        st = cuda_fbp_recon_batch(slot, plan, impl, cfg, rows, used, roi, err);
    if (st == RTOMO_OK && rc == cudaSuccess)
        rc = cudaEventRecord(stop, slot->compute);
    if (st == RTOMO_OK && rc == cudaSuccess)
        rc = cudaEventSynchronize(stop);
    if (st == RTOMO_OK && rc == cudaSuccess)
        rc = cudaEventElapsedTime(&ms, start, stop);
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    if (st != RTOMO_OK)
        return st;
    RTOMO_CUDA_TRY(err, rc);
    const double updates = (double)used * roi[2] * roi[3] * plan->geom.n_proj;
    *gus = ms > 0.f ? updates / (1e-3 * ms) / 1e9 : 0.0;
    return RTOMO_OK;
}

/* Centre crop of the plan's ROI, at most TUNE_EDGE on a side. */
static void tuning_roi(const rtomo_fbp *plan, int *roi)
{
    const rtomo_fbp_geometry *g = &plan->geom;
    roi[2] = g->roi_width < TUNE_EDGE ? g->roi_width : TUNE_EDGE;
    roi[3] = g->roi_height < TUNE_EDGE ? g->roi_height : TUNE_EDGE;
    roi[0] = g->roi_x + (g->roi_width - roi[2]) / 2;
    roi[1] = g->roi_y + (g->roi_height - roi[3]) / 2;
}

static void make_key(const cuda_fbp_impl *impl, tune_key *key)
{
    const rtomo_fbp *plan = impl->plan;
    memset(key, 0, sizeof *key);
    snprintf(key->device, sizeof key->device, "%s", impl->device_name);
    for (char *c = key->device; *c; c++)
        if (*c == '\t' || *c == '\n')
            *c = ' ';
    key->roi_w = plan->geom.roi_width;
    key->roi_h = plan->geom.roi_height;
    key->n_proj = plan->geom.n_proj;
    key->det_width = plan->geom.det_width;
    key->precision = (int)plan->opt.precision;
    key->interp = (int)plan->geom.interp;
    key->kernel = (int)plan->opt.bp_kernel;
    key->slices = plan->opt.slices_per_pass;
    key->ratio = plan->opt.hybrid_ratio;
}

/* The configuration when nothing is left to tune. */
static int fixed_config(const rtomo_engine_options *opt, cuda_fbp_config *cfg)
{
    const int free_ratio = opt->bp_kernel == RTOMO_BP_HYBRID && opt->hybrid_ratio == 0.0;
    if (opt->bp_kernel == RTOMO_BP_AUTO || opt->slices_per_pass == 0 || free_ratio)
        return 0;
    cfg->kernel = opt->bp_kernel;
    cfg->format.slices = opt->slices_per_pass;
    cfg->format.precision = opt->precision;
    /* Tile defaults: 64-pixel tiles amortise the cache fill best for one
     * slice; 2 and 4 slices need the registers of 32-pixel tiles. */
    cfg->tile = opt->slices_per_pass == 1 ? 64 : 32;
    cfg->hybrid_ratio = opt->hybrid_ratio;
    cfg->stored_ratio = 0.0;
    return 1;
}

/* The configuration for the plan: fixed by its options, remembered, or
 * timed. */
static rtomo_status choose(cuda_fbp_impl *impl, cuda_fbp_slot *slot,
                           const int *rows, int n_rows, cuda_fbp_config *cfg,
                           rtomo_error *err)
{
    const rtomo_fbp *plan = impl->plan;
    if (fixed_config(&plan->opt, cfg))
        return RTOMO_OK;
    tune_key key;
    make_key(impl, &key);
    if (memory_lookup(&key, cfg))
        return RTOMO_OK;
    if (file_lookup(&key, cfg)) {
        memory_store(&key, cfg, 0.0);
        return RTOMO_OK;
    }
    cuda_fbp_config list[MAX_CANDIDATES];
    const int max_slices = n_rows >= 4 ? 4 : n_rows >= 2 ? 2 : 1;
    const int n = enumerate(&plan->opt, max_slices, plan->geom.interp, list);
    if (n == 0)
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "no back-projection kernel fits these options");
    rtomo_status st = cuda_fbp_upload_constants(slot, plan, err);
    if (st != RTOMO_OK)
        return st;
    int roi[4];
    tuning_roi(plan, roi);
    double best = -1.0;
    for (int i = 0; i < n; i++) {
        double gus = 0.0;
        st = time_candidate(impl, slot, &list[i], rows, n_rows, roi, &gus, err);
        if (st != RTOMO_OK)
            return st;
        if (gus > best) {
            best = gus;
            *cfg = list[i];
        }
    }
    memory_store(&key, cfg, best);
    file_store(&key, cfg, best);
    return RTOMO_OK;
}

/* The test hook RTOMO_CUDA_FBP_STORED=<share> sets the stored-cache share
 * of the chosen configuration (cuda_fbp_alu_block.h): tests force every
 * ALU block one way or the other.  Read here, once per resolution, not at
 * every launch. */
static rtomo_status apply_stored_hook(cuda_fbp_config *cfg, rtomo_error *err)
{
    const char *hook = getenv("RTOMO_CUDA_FBP_STORED");
    if (!hook || !*hook)
        return RTOMO_OK;
    const double h = atof(hook);
    if (!(h >= 0.0 && h <= 1.0))
        return rtomo_set_error(err, RTOMO_E_INVALID,
                               "RTOMO_CUDA_FBP_STORED=%s: the stored-cache "
                               "share is outside [0, 1]", hook);
    cfg->stored_ratio = h;
    return RTOMO_OK;
}

extern "C" rtomo_status cuda_fbp_autotune(cuda_fbp_impl *impl,
                                          cuda_fbp_slot *slot, const int *rows,
                                          int n_rows, cuda_fbp_config *cfg,
                                          rtomo_error *err)
{
    rtomo_status st = choose(impl, slot, rows, n_rows, cfg, err);
    return st == RTOMO_OK ? apply_stored_hook(cfg, err) : st;
}
