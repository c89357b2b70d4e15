/*
 * rtomo_simrecon.c — rtomo-simrecon, the offline demo of the FBP engine.
 *
 * Simulates a parallel-beam scan of the 3-D Shepp-Logan phantom the way a
 * camera records it (uint16 frames, dark and flat fields, optional shot
 * noise), feeds it through the engine exactly as the daemon will (darks,
 * flats, then projection by projection), reconstructs the chosen slices and
 * compares them with the phantom.  Writes each slice as PNG and raw float32,
 * and the ground truth as PNG, and prints the errors and the speed.
 *
 * Exit status: 0 on success, 1 when the reconstruction or writing fails,
 * 2 on bad options.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "image_png.h"
#include "rtomo_engine.h"
#include "rtomo_sim.h"
#include "tool_common.h"

#define PROGRAM "rtomo-simrecon"
/* Dark and flat frames averaged before the scan (more average out noise). */
#define REFERENCE_FRAMES 8
/* Pixels kept away from region edges when measuring errors: the truth is
 * point-sampled, a reconstruction is band-limited, so they differ at edges
 * by construction. */
#define EDGE_MARGIN 2.0
/* The phantom height whose slice shows every small feature. */
#define FEATURE_Z (-0.25)

typedef struct options {
    int size;               /* detector width = slice edge */
    int rows;               /* detector rows */
    int angles;
    int range_deg;          /* 180 or 360 */
    int slice_first, slice_count;   /* -1 = the FEATURE_Z row */
    int noise;
    double dark, flat;
    unsigned long long seed;
    double axis;            /* NaN = centre */
    rtomo_window window;
    double cutoff;
    rtomo_interp interp;
    rtomo_backend backend;
    int threads;
    const char *output;
    int display_auto;
    double display_lo, display_hi;  /* phantom density units */
} options;

static void usage(FILE *out)
{
    fprintf(out,
"Usage: " PROGRAM " [OPTION]...\n"
"Simulate a parallel-beam scan of the Shepp-Logan head phantom, reconstruct\n"
"it with rtomo's FBP engine and compare the slices with the phantom.\n"
"\n"
"Scan:\n"
"  -s, --size N         detector width in bins = slice edge (default 256)\n"
"      --rows N         detector rows (default 36); the phantom spans them\n"
"  -a, --angles N       projections (default 256)\n"
"      --range DEG      180 or 360 degrees (default 180)\n"
"      --axis BINS      rotation axis position (default: detector centre)\n"
"      --noise          add photon shot noise to the frames\n"
"      --dark COUNTS    dark level (default 100)\n"
"      --flat COUNTS    open-beam level (default 40000)\n"
"      --seed N         noise seed (default 1)\n"
"Reconstruction:\n"
"      --slices SPEC    detector rows to reconstruct: ROW, FIRST:COUNT or\n"
"                       all (default: the row through z = -0.25, where the\n"
"                       phantom's small features are)\n"
"      --filter NAME    ram-lak, shepp-logan, cosine, hamming or hann\n"
"                       (default ram-lak)\n"
"      --cutoff F       filter cut-off, fraction of Nyquist in (0, 1]\n"
"      --interp MODE    linear or nearest (default linear)\n"
"  -b, --backend NAME   cpu, cuda or auto (default auto)\n"
"  -t, --threads N      CPU threads (default: all cores)\n"
"Output:\n"
"  -o, --output DIR     where to write images (default demo-out)\n"
"      --display LO:HI  gray window of the PNGs in phantom units (skull 1.0,\n"
"                       brain 0.2; default 0.1:0.4), or auto (0.5 and 99.5\n"
"                       percentiles of the slice)\n"
"  -h, --help           show this help\n"
"\n"
"Slices are written as slice_ROW.png and slice_ROW.f32 (float32, attenuation\n"
"per pixel, size x size), the phantom as truth_ROW.png.\n");
}

/* ------------------------------------------------------ option parsing ---- */

/* Option parsers return 0, or -1 after printing a usage error
 * (tool_common.h). */

/* ROW, FIRST:COUNT or all (count 0 = all rows, resolved later). */
static int parse_slices(const char *text, options *o)
{
    if (strcmp(text, "all") == 0) {
        o->slice_first = 0;
        o->slice_count = 0;
        return 0;
    }
    int first, count = 1, n = 0;
    if ((sscanf(text, "%d%n", &first, &n) == 1 && text[n] == '\0') ||
        (sscanf(text, "%d:%d%n", &first, &count, &n) == 2 && text[n] == '\0')) {
        if (first >= 0 && count >= 1) {
            o->slice_first = first;
            o->slice_count = count;
            return 0;
        }
    }
    return tool_option_error(PROGRAM, "--slices '%s' is not ROW, FIRST:COUNT "
                             "or all (rows count from 0, COUNT >= 1)", text);
}

static int parse_seed(const char *text, unsigned long long *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno || end == text || *end || text[0] == '-')
        return tool_option_error(PROGRAM, "--seed '%s' is not a whole number "
                                 ">= 0", text);
    *out = v;
    return 0;
}

static int parse_display(const char *text, options *o)
{
    if (strcmp(text, "auto") == 0) {
        o->display_auto = 1;
        return 0;
    }
    double lo, hi;
    int n = 0;
    if (sscanf(text, "%lf:%lf%n", &lo, &hi, &n) == 2 && text[n] == '\0' &&
        isfinite(lo) && isfinite(hi) && lo < hi) {
        o->display_auto = 0;
        o->display_lo = lo;
        o->display_hi = hi;
        return 0;
    }
    return tool_option_error(PROGRAM, "--display '%s' is not auto or LO:HI "
                             "with LO < HI", text);
}

static int parse_range(const char *text, options *o)
{
    int rc = tool_parse_int32(PROGRAM, "--range", text, 180, 360,
                              &o->range_deg);
    if (rc == 0 && o->range_deg != 180 && o->range_deg != 360)
        return tool_option_error(PROGRAM, "--range '%s' is not 180 or 360",
                                 text);
    return rc;
}

static int parse_named(const char *text, const char *option,
                       rtomo_status (*parse)(const char *, void *), void *out,
                       const char *choices)
{
    if (parse(text, out) == RTOMO_OK)
        return 0;
    return tool_option_error(PROGRAM, "%s '%s' is not one of %s", option,
                             text, choices);
}

enum { OPT_ROWS = 256, OPT_RANGE, OPT_AXIS, OPT_NOISE, OPT_DARK, OPT_FLAT,
       OPT_SEED, OPT_SLICES, OPT_FILTER, OPT_CUTOFF, OPT_INTERP, OPT_DISPLAY };

static const struct option long_options[] = {
    {"size", required_argument, NULL, 's'},
    {"rows", required_argument, NULL, OPT_ROWS},
    {"angles", required_argument, NULL, 'a'},
    {"range", required_argument, NULL, OPT_RANGE},
    {"axis", required_argument, NULL, OPT_AXIS},
    {"noise", no_argument, NULL, OPT_NOISE},
    {"dark", required_argument, NULL, OPT_DARK},
    {"flat", required_argument, NULL, OPT_FLAT},
    {"seed", required_argument, NULL, OPT_SEED},
    {"slices", required_argument, NULL, OPT_SLICES},
    {"filter", required_argument, NULL, OPT_FILTER},
    {"cutoff", required_argument, NULL, OPT_CUTOFF},
    {"interp", required_argument, NULL, OPT_INTERP},
    {"backend", required_argument, NULL, 'b'},
    {"threads", required_argument, NULL, 't'},
    {"output", required_argument, NULL, 'o'},
    {"display", required_argument, NULL, OPT_DISPLAY},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

static void default_options(options *o)
{
    memset(o, 0, sizeof *o);
    o->size = 256;
    o->rows = 36;
    o->angles = 256;
    o->range_deg = 180;
    o->slice_first = -1;
    o->slice_count = 1;
    o->dark = 100.0;
    o->flat = 40000.0;
    o->seed = 1;
    o->axis = NAN;
    o->window = RTOMO_WINDOW_RAMLAK;
    o->cutoff = 1.0;
    o->interp = RTOMO_INTERP_LINEAR;
    o->backend = RTOMO_BACKEND_AUTO;
    o->output = "demo-out";
    o->display_lo = 0.1;
    o->display_hi = 0.4;
}

/* The enum parsers, typed for parse_named. */
static rtomo_status parse_window_any(const char *s, void *o) { return rtomo_window_parse(s, o); }
static rtomo_status parse_interp_any(const char *s, void *o) { return rtomo_interp_parse(s, o); }
static rtomo_status parse_backend_any(const char *s, void *o) { return rtomo_backend_parse(s, o); }

/* One option; returns 0, or -1 after a usage error. */
static int apply_option(int c, const char *arg, options *o)
{
    switch (c) {
    case 's':
        return tool_parse_int32(PROGRAM, "--size", arg, 8, 16384, &o->size);
    case OPT_ROWS:
        return tool_parse_int32(PROGRAM, "--rows", arg, 1, 16384, &o->rows);
    case 'a':
        return tool_parse_int32(PROGRAM, "--angles", arg, 1, 1000000,
                                &o->angles);
    case OPT_RANGE: return parse_range(arg, o);
    case OPT_AXIS:
        return tool_parse_double(PROGRAM, "--axis", arg, -1e6, 1e6, &o->axis);
    case OPT_NOISE: o->noise = 1; return 0;
    case OPT_DARK:
        return tool_parse_double(PROGRAM, "--dark", arg, 0, 65535, &o->dark);
    case OPT_FLAT:
        return tool_parse_double(PROGRAM, "--flat", arg, 1, 65535, &o->flat);
    case OPT_SEED: return parse_seed(arg, &o->seed);
    case OPT_SLICES: return parse_slices(arg, o);
    case OPT_FILTER:
        return parse_named(arg, "--filter", parse_window_any, &o->window,
                           "ram-lak, shepp-logan, cosine, hamming, hann");
    case OPT_CUTOFF:
        return tool_parse_double(PROGRAM, "--cutoff", arg, 1e-6, 1, &o->cutoff);
    case OPT_INTERP:
        return parse_named(arg, "--interp", parse_interp_any, &o->interp,
                           "linear, nearest");
    case 'b':
        return parse_named(arg, "--backend", parse_backend_any, &o->backend,
                           "cpu, cuda, auto");
    case 't':
        return tool_parse_int32(PROGRAM, "--threads", arg, 1, 1024, &o->threads);
    case 'o': o->output = arg; return 0;
    case OPT_DISPLAY: return parse_display(arg, o);
    }
    return tool_option_error(PROGRAM, "unknown option");
}

/* Checks that need several options together. */
static int check_options(options *o)
{
    if (o->flat <= o->dark)
        return tool_option_error(PROGRAM, "--flat %g must be brighter than "
                                 "--dark %g", o->flat, o->dark);
    if (o->slice_first < 0) {
        /* The row through FEATURE_Z (phantom z grows upwards). */
        double row = 0.5 * (o->rows - 1) - FEATURE_Z * 0.5 * o->rows;
        o->slice_first = (int)floor(row + 0.5);
        if (o->slice_first >= o->rows)
            o->slice_first = o->rows - 1;
    }
    if (o->slice_count == 0)
        o->slice_count = o->rows - o->slice_first;
    if (o->slice_first + o->slice_count > o->rows)
        return tool_option_error(PROGRAM, "--slices %d:%d reaches beyond the "
                                 "detector's %d rows (--rows)",
                                 o->slice_first, o->slice_count, o->rows);
    return 0;
}

/* Returns -1 to go on, or the exit status (0 after --help). */
static int parse_options(int argc, char **argv, options *o)
{
    default_options(o);
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":s:a:b:t:o:h", long_options,
                            NULL)) != -1) {
        if (c == 'h') {
            usage(stdout);
            return 0;
        }
        if (c == '?')
            return tool_usage_error(PROGRAM, "unknown option '%s'",
                                    argv[optind - 1]);
        if (c == ':')
            return tool_usage_error(PROGRAM, "option '%s' needs a value",
                                    argv[optind - 1]);
        if (apply_option(c, optarg, o) != 0)
            return TOOL_USAGE;
    }
    if (optind < argc)
        return tool_usage_error(PROGRAM, "unexpected argument '%s'",
                                argv[optind]);
    return check_options(o) == 0 ? -1 : TOOL_USAGE;
}

/* ----------------------------------------------------------- the scan ---- */

static int fail(const char *what, const rtomo_error *err)
{
    fprintf(stderr, PROGRAM ": %s: %s\n", what, err->message);
    return 1;
}

static rtomo_fbp *create_plan(const options *o, rtomo_error *err)
{
    rtomo_fbp_geometry g;
    rtomo_fbp_geometry_init(&g);
    g.det_width = o->size;
    g.det_height = o->rows;
    g.n_proj = o->angles;
    g.angle_step = o->range_deg * M_PI / 180.0 / o->angles;
    g.axis = o->axis;
    g.window = o->window;
    g.cutoff = o->cutoff;
    g.interp = o->interp;
    g.row_first = o->slice_first;
    g.row_count = o->slice_count;
    rtomo_engine_options opt;
    rtomo_engine_options_init(&opt);
    opt.backend = o->backend;
    opt.cpu_threads = o->threads;
    return rtomo_fbp_create(&g, &opt, err);
}

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Record the dark and flat references, averaged by the engine. */
static rtomo_status add_references(rtomo_fbp *plan, rtomo_camera *cam,
                                   uint16_t *frame, size_t n, rtomo_error *err)
{
    rtomo_status st = RTOMO_OK;
    for (int i = 0; i < REFERENCE_FRAMES && st == RTOMO_OK; i++) {
        rtomo_camera_dark(cam, n, frame);
        st = rtomo_fbp_add_dark(plan, frame, RTOMO_DTYPE_U16, err);
    }
    for (int i = 0; i < REFERENCE_FRAMES && st == RTOMO_OK; i++) {
        rtomo_camera_flat(cam, n, frame);
        st = rtomo_fbp_add_flat(plan, frame, RTOMO_DTYPE_U16, err);
    }
    return st;
}

/* Simulate and feed every projection; *simulate_s gets the time spent
 * simulating (the engine's own time is in its stats). */
static rtomo_status scan(const options *o, rtomo_fbp *plan,
                         const rtomo_phantom *ph, double *simulate_s,
                         rtomo_error *err)
{
    const size_t n = (size_t)o->size * (size_t)o->rows;
    float *integrals = malloc(sizeof(float) * n);
    uint16_t *frame = malloc(sizeof(uint16_t) * n);
    if (!integrals || !frame) {
        free(integrals);
        free(frame);
        return rtomo_set_error(err, RTOMO_E_NOMEM,
                               "out of memory for a %dx%d frame", o->size,
                               o->rows);
    }
    rtomo_camera cam;
    rtomo_camera_init(&cam);
    cam.dark_level = o->dark;
    cam.flat_level = o->flat;
    cam.noise = o->noise;
    cam.seed = o->seed;
    const rtomo_fbp_geometry *g = rtomo_fbp_geometry_of(plan);
    rtomo_status st = add_references(plan, &cam, frame, n, err);
    *simulate_s = 0.0;
    for (int p = 0; p < o->angles && st == RTOMO_OK; p++) {
        double t0 = now_seconds();
        rtomo_phantom_project(ph, g->angles[p], integrals);
        rtomo_camera_expose(&cam, integrals, n, frame);
        *simulate_s += now_seconds() - t0;
        st = rtomo_fbp_add_projection(plan, p, frame, RTOMO_DTYPE_U16, NAN,
                                      NAN, err);
    }
    if (st == RTOMO_OK)
        st = rtomo_fbp_sync(plan, err);
    free(integrals);
    free(frame);
    return st;
}

/* ------------------------------------------------------------- report ---- */

/* Mean of the slice and of the truth over one region, phantom units. */
typedef struct region_mean {
    const char *name;
    rtomo_phantom_region region;
    size_t pixels;              /* 0: the slice does not cut the region */
    double mean, truth;
} region_mean;

static double percent_off(double value, double truth)
{
    return truth != 0.0 ? 100.0 * (value - truth) / truth : 0.0;
}

static void print_check(const rtomo_phantom *ph, int row, int size,
                        const float *slice, const float *truth,
                        unsigned char *mask)
{
    const size_t n = (size_t)size * (size_t)size;
    const double mu = ph->mu_scale;
    double z = (0.5 * (ph->det_height - 1) - row) / (0.5 * ph->det_height);
    printf("slice %d (phantom z = %+.3f):\n", row, z);
    if (!rtomo_phantom_region_mask(ph, row, size, RTOMO_PHANTOM_HEAD,
                                   EDGE_MARGIN, mask)) {
        printf("  outside the phantom\n");
        return;
    }
    printf("  error inside the head, %g px from its edge: %.1f %% "
           "(relative L2)\n", EDGE_MARGIN,
           100.0 * rtomo_masked_relative_error(slice, truth, mask, n));
    region_mean regions[] = {
        {"mean inside the brain", RTOMO_PHANTOM_BRAIN, 0, 0, 0},
        {"mean in large ellipse", RTOMO_PHANTOM_LARGE_ELLIPSE, 0, 0, 0},
    };
    for (size_t i = 0; i < sizeof regions / sizeof regions[0]; i++) {
        region_mean *r = &regions[i];
        r->pixels = rtomo_phantom_region_mask(ph, row, size, r->region,
                                              EDGE_MARGIN, mask);
        if (!r->pixels)
            continue;
        r->mean = rtomo_masked_mean(slice, mask, n) / mu;
        r->truth = rtomo_masked_mean(truth, mask, n) / mu;
        printf("  %-22s %.4f  (phantom %.4f, %+.2f %%)\n", r->name, r->mean,
               r->truth, percent_off(r->mean, r->truth));
    }
}

/* Gray window in attenuation per pixel for one image. */
static void display_window(const options *o, double mu, double *lo, double *hi)
{
    if (o->display_auto) {
        *lo = *hi = 0.0;    /* the PNG writer's automatic window */
        return;
    }
    *lo = o->display_lo * mu;
    *hi = o->display_hi * mu;
}

static int write_slice(const options *o, int row, const float *slice,
                       const float *truth, double mu)
{
    char png[4096], raw[4096], truth_png[4096];
    snprintf(png, sizeof png, "%s/slice_%04d.png", o->output, row);
    snprintf(raw, sizeof raw, "%s/slice_%04d.f32", o->output, row);
    snprintf(truth_png, sizeof truth_png, "%s/truth_%04d.png", o->output, row);
    double lo, hi;
    display_window(o, mu, &lo, &hi);
    rtomo_error err;
    if (rtomo_image_write_png(png, slice, o->size, o->size, lo, hi, &err) ||
        rtomo_image_write_raw(raw, slice, (size_t)o->size * o->size, &err) ||
        rtomo_image_write_png(truth_png, truth, o->size, o->size, lo, hi, &err))
        return fail("writing the images", &err);
    printf("  wrote %s, %s, %s\n", png, raw, truth_png);
    return 0;
}

/* Compare and write every reconstructed slice. */
static int report_slices(const options *o, const rtomo_phantom *ph,
                         const float *slices)
{
    const size_t n = (size_t)o->size * (size_t)o->size;
    float *truth = malloc(sizeof(float) * n);
    unsigned char *mask = malloc(n);
    int rc = 0;
    if (!truth || !mask) {
        fprintf(stderr, PROGRAM ": out of memory for the phantom slice\n");
        rc = 1;
    }
    for (int i = 0; i < o->slice_count && rc == 0; i++) {
        int row = o->slice_first + i;
        const float *slice = slices + (size_t)i * n;
        rtomo_phantom_slice(ph, row, o->size, truth);
        print_check(ph, row, o->size, slice, truth, mask);
        rc = write_slice(o, row, slice, truth, ph->mu_scale);
    }
    if (rc == 0 && o->slice_count > 0)
        printf("  read a slice with numpy.fromfile(NAME, '<f4').reshape(%d, "
               "%d)\n", o->size, o->size);
    free(truth);
    free(mask);
    return rc;
}

static void print_setup(const options *o, const rtomo_fbp *plan)
{
    const rtomo_fbp_geometry *g = rtomo_fbp_geometry_of(plan);
    printf(PROGRAM ": Shepp-Logan phantom, detector %d x %d, %d projections "
           "over %d degrees, axis at %.2f\n", o->size, o->rows, o->angles,
           o->range_deg, g->axis);
    printf("  camera: dark %g, flat %g counts, %d darks + %d flats, noise "
           "%s\n", o->dark, o->flat, REFERENCE_FRAMES, REFERENCE_FRAMES,
           o->noise ? "on" : "off");
    printf("  reconstruction: %s backend, %s filter (cut-off %.2f), %s "
           "interpolation, %d x %d slices: %d\n",
           rtomo_backend_name(rtomo_fbp_backend(plan)),
           rtomo_window_name(o->window), o->cutoff,
           rtomo_interp_name(o->interp), o->size, o->size, o->slice_count);
}

static void print_timing(const rtomo_fbp *plan, double simulate_s, int frames)
{
    rtomo_fbp_stats s;
    rtomo_fbp_get_stats(plan, &s);
    printf("simulate     %8.3f s  (%d frames)\n", simulate_s, frames);
    printf("filter       %8.3f s  (%ld frames, %.0f frames/s)\n",
           s.filter_seconds, s.projections_filtered,
           s.filter_seconds > 0 ? s.projections_filtered / s.filter_seconds : 0);
    printf("backproject  %8.3f s  (%ld slice%s, %.3f GU/s)\n",
           s.backproject_seconds, s.slices_reconstructed,
           s.slices_reconstructed == 1 ? "" : "s",
           s.backproject_seconds > 0 ? s.updates / s.backproject_seconds / 1e9
                                     : 0);
}

/* ---------------------------------------------------------------- main ---- */

static int make_output_dir(const char *dir)
{
    if (mkdir(dir, 0777) == 0 || errno == EEXIST)
        return 0;
    fprintf(stderr, PROGRAM ": cannot create output directory %s: %s\n", dir,
            strerror(errno));
    return 1;
}

static int reconstruct_all(const options *o, rtomo_fbp *plan, float *slices,
                           rtomo_error *err)
{
    int *rows = malloc(sizeof(int) * (size_t)o->slice_count);
    if (!rows)
        return rtomo_set_error(err, RTOMO_E_NOMEM, "out of memory");
    for (int i = 0; i < o->slice_count; i++)
        rows[i] = o->slice_first + i;
    rtomo_status st = rtomo_fbp_reconstruct(plan, rows, o->slice_count,
                                            slices, err);
    free(rows);
    return st;
}

static int run(const options *o)
{
    rtomo_error err;
    rtomo_phantom ph;
    rtomo_phantom_init(&ph, o->size, o->rows);
    ph.axis = o->axis;
    /* The simulator's default attenuation scale, made explicit so that
     * results can be printed in phantom units (brain 0.2, skull 1.0). */
    ph.mu_scale = 2.0 / o->size;
    if (make_output_dir(o->output))
        return 1;
    rtomo_fbp *plan = create_plan(o, &err);
    if (!plan)
        return fail("cannot set up the reconstruction", &err);
    print_setup(o, plan);
    float *slices = malloc(sizeof(float) * (size_t)o->slice_count *
                           (size_t)o->size * (size_t)o->size);
    double simulate_s = 0.0;
    int rc = 0;
    if (!slices) {
        fprintf(stderr, PROGRAM ": out of memory for %d slices\n",
                o->slice_count);
        rc = 1;
    } else if (scan(o, plan, &ph, &simulate_s, &err)) {
        rc = fail("scan failed", &err);
    } else if (reconstruct_all(o, plan, slices, &err)) {
        rc = fail("reconstruction failed", &err);
    } else {
        print_timing(plan, simulate_s, o->angles);
        rc = report_slices(o, &ph, slices);
    }
    free(slices);
    rtomo_fbp_destroy(plan);
    return rc;
}

int main(int argc, char **argv)
{
    options o;
    int rc = parse_options(argc, argv, &o);
    if (rc >= 0)
        return rc;
    return run(&o);
}
