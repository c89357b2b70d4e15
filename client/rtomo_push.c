/*
 * rtomo_push.c — a camera simulator: pushes tomography scans (Shepp-Logan
 * projections through a camera model, with darks and flats) or SBDX frames
 * (point and wire scenes) to rtomod's ingest socket, or replays frames from
 * a raw file; with --cone the tomography scans are cone-beam ones (a 3-D
 * Shepp-Logan phantom seen by a flat panel, PROTOCOL.md 3.13).  Paces frames at a given rate or sends as fast as the daemon
 * takes them, optionally over several connections (for ingest benchmarks),
 * and prints frames/s and MB/s at the end.  With --fanout every message goes
 * to several daemons, each reconstructing its own slice range.
 *
 * The ingest socket never answers, so after each scan's end rtomo-push asks
 * the daemons' control sockets what became of it (PROTOCOL.md 3.9) and
 * exits non-zero, with the daemon's reason, unless every scan was
 * reconstructed whole.  With --repeat it asks about scan N while scan N+1
 * is being sent, as a camera that does not wait would.
 *
 * Frames are generated before sending starts (so that generation never
 * limits the rate) into a bounded cache; when a scan needs more distinct
 * frames than fit, the cached ones are sent in turn.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "rtomo_client.h"
#include "rtomo_cone_sim.h"
#include "rtomo_sim.h"
#include "tool_common.h"

static const char *program = "rtomo-push";

/* Exit codes beyond tool_common's TOOL_OK (0), TOOL_FAILED (1: not sent,
 * no connection) and TOOL_USAGE (2), kept for every tool: what the daemon
 * made of the scans. */
enum {
    PUSH_SCAN_FAILED = 3,       /* refused, aborted, failed, incomplete or
                                   unknown to the daemon */
    PUSH_SCAN_PARTIAL = 4,      /* complete, but frames rejected, dropped or
                                   missing */
    PUSH_NO_OUTCOME = 5         /* not finished within --wait, or no answer
                                   from the control socket */
};

#define DEFAULT_WAIT_S 60.0

typedef struct push_options {
    rtomo_client_options client;
    char scan[RTOMO_ID_MAX];
    int sbdx, noise, quiet, sync;
    int wait;                   /* ask for each scan's outcome */
    double wait_s;              /* how long to wait for it */
    char control[1024];         /* the derived control endpoint(s) */
    double rate;
    long repeat, cache_mb;
    /* tomography */
    long width, height, angles, range, darks, flats;
    const char *slices, *filter, *method;
    long iterations, publish_every;     /* 0 = the daemon's */
    /* cone beam (--cone): source to axis and to detector (0: parallel
     * beam), detector pitch, volume edge in voxels (0 = the width) */
    double cone[2], pitch;
    long volume;
    /* SBDX */
    long holes[2], detector[2], shift, frames, ratio_count;
    double ratio_first, ratio_last;
    const char *planes;
    /* raw frames */
    const char *raw;
    long shape[4];
    int shape_n;
    rtomo_dtype dtype;
} push_options;

/* Frames to send: n frames of `bytes` each, back to back. */
typedef struct frame_set {
    unsigned char *data;
    size_t bytes;
    long n;
    size_t mapped;              /* > 0: data is an mmap of this size */
} frame_set;

typedef struct push_stats {
    long frames;
    double bytes;
    double t0;                  /* first send */
    double waited;              /* seconds spent waiting for outcomes */
    long paced;                 /* frames sent under --rate so far */
} push_stats;

static void usage(FILE *out)
{
    fprintf(out,
"Usage: rtomo-push [OPTION]...\n"
"Simulate a camera: push tomography scans or SBDX frames to rtomod.\n"
"\n"
"Connection:\n"
"  -i, --ingest ENDPOINT    ingest socket (default tcp://localhost:5555)\n"
TOOL_CURVE_HELP
"      --fanout EP1,EP2,..  send every message to each of these ingest\n"
"                           sockets (several daemons, each configured with\n"
"                           its slice range: docs/rtomod.md)\n"
"  -c, --control ENDPOINT   control socket(s), asked what became of each\n"
"                           scan, and with --connections > 1 whether the\n"
"                           scan started and all frames arrived before\n"
"                           scan_end; with --fanout one per daemon, EP1,EP2,..\n"
"                           (default: each ingest endpoint's host, its port\n"
"                           + 2, as in rtomod's defaults 5555 and 5557)\n"
"  -w, --wait SECONDS       wait this long at most for each scan's outcome\n"
"                           after its end (default 60)\n"
"      --no-wait            fire and forget: do not ask; exit status 0 then\n"
"                           means only that everything was sent\n"
"      --no-sync            with several connections, do not wait (frames may\n"
"                           then overtake scan_begin or scan_end)\n"
"  -k, --connections K      K PUSH sockets, frames round-robin (default 1)\n"
"  -r, --rate FPS           frames per second (default 0: as fast as possible)\n"
"  -s, --scan ID            scan id (default push-TIME); with --repeat N the\n"
"                           scans are ID-1 .. ID-N\n"
"  -R, --repeat N           push N scans one after the other (default 1)\n"
"  -q, --quiet              print only the summary\n"
"\n"
"Tomography (default mode): Shepp-Logan projections, uint16 camera\n"
"      --size W             detector width in bins (default 512)\n"
"      --height H           detector rows (default 8)\n"
"  -a, --angles N           projections per scan (default 360)\n"
"      --range DEG          180 or 360 degrees covered (default 180)\n"
"      --darks N            dark frames (default 4)\n"
"      --flats N            flat frames (default 4)\n"
"      --noise              Poisson-like camera noise\n"
"      --slices SEL         rows to reconstruct: all, R1,R2,.. or\n"
"                           FIRST:COUNT[:STEP] (default: daemon's setting)\n"
"      --filter NAME        ram-lak, shepp-logan, cosine, hamming, hann\n"
"      --method NAME        fbp, sirt or cgls (default: daemon's setting)\n"
"      --iterations N       iterations of sirt/cgls (default: daemon's)\n"
"      --publish-every N    publish every N-th iterate (default: daemon's)\n"
"\n"
"Cone beam (--cone): a 3-D Shepp-Logan phantom on a flat panel, 360 degrees\n"
"      --cone SAD,SDD       source to axis and source to detector (mm)\n"
"      --pitch P            detector pixel pitch (mm, default 1)\n"
"      --volume N           reconstruct N^3 voxels of a pixel at the axis\n"
"                           (default: the detector width)\n"
"\n"
"SBDX (--sbdx): point and wire scenes, uint8 frames\n"
"      --holes X,Y          collimator holes (default 100,100)\n"
"      --detector W,H       detector elements (default 160,80)\n"
"      --shift M            plane shift per hole (default 10)\n"
"      --ratios A:B:N       N plane ratios from A to B (default 0.6:2.25:32)\n"
"      --frames N           frames per stream (default 10)\n"
"      --planes FORMAT      float32, uint16 or none (default float32)\n"
"\n"
"Raw frames (--raw FILE): frames back to back in FILE, little-endian\n"
"      --shape H,W          frame shape (tomography; projections = frames in\n"
"                           FILE unless --angles), or HY,HX,DH,DW with --sbdx\n"
"      --dtype TYPE         uint8, uint16 or float32 (default uint16, uint8\n"
"                           with --sbdx)\n"
"\n"
"      --cache-mb MB        memory for generated frames (default 1024)\n"
"  -h, --help               show this help\n"
"\n"
"Exit status (the worst over all scans):\n"
"  0  every scan complete: all frames reconstructed, none rejected, dropped\n"
"     or missing (with --no-wait: everything sent)\n"
"  1  not sent: no connection, a send failed, or interrupted\n"
"  2  bad usage\n"
"  3  a scan was refused, aborted, failed, ended incomplete, or never\n"
"     reached the daemon; the daemon's reason is printed\n"
"  4  a scan completed, but frames were rejected, dropped or missing\n"
"  5  the outcome is not known: not final within --wait, or the control\n"
"     socket did not answer\n");
}

/* ----------------------------------------------------------- options ---- */

enum {
    OPT_SIZE = 256, OPT_HEIGHT, OPT_RANGE, OPT_DARKS, OPT_FLATS, OPT_NOISE,
    OPT_SLICES, OPT_FILTER, OPT_METHOD, OPT_ITERATIONS, OPT_PUBLISH_EVERY,
    OPT_SBDX, OPT_HOLES, OPT_DETECTOR, OPT_SHIFT,
    OPT_RATIOS, OPT_FRAMES, OPT_PLANES, OPT_RAW, OPT_SHAPE, OPT_DTYPE,
    OPT_CACHE, OPT_NO_SYNC, OPT_FANOUT, OPT_NO_WAIT, OPT_CONE, OPT_PITCH,
    OPT_VOLUME
};

/* --cone SAD,SDD: two distances, SDD beyond SAD. */
static int parse_cone(const char *text, push_options *o)
{
    char tail;
    if (sscanf(text, "%lf,%lf%c", &o->cone[0], &o->cone[1], &tail) != 2 ||
        !(o->cone[0] > 0) || !(o->cone[1] > o->cone[0]) ||
        !isfinite(o->cone[1]))
        return tool_option_error(program, "--cone: '%s' is not SAD,SDD "
                                 "with 0 < SAD < SDD", text);
    return 0;
}

static int parse_dtype(const char *text, push_options *o)
{
    if (rtomo_dtype_parse(text, &o->dtype) != RTOMO_OK)
        return tool_option_error(program, "--dtype: '%s' is not uint8, "
                                 "uint16 or float32", text);
    return 0;
}

/* One option; returns 0, or -1 after a usage error. */
static int apply_option(int c, const char *arg, push_options *o)
{
    const long EDGE = 65536;
    switch (c) {
    case 'i': o->client.ingest = arg; return 0;
    case TOOL_OPT_SERVER_KEY: o->client.server_key = arg; return 0;
    case TOOL_OPT_CLIENT_KEY: o->client.client_key = arg; return 0;
    case OPT_FANOUT:
        if (!strchr(arg, ','))
            return tool_option_error(program, "--fanout: '%s' is not a list "
                                     "EP1,EP2,...", arg);
        o->client.ingest = arg;
        return 0;
    case 'c': o->client.control = arg; return 0;
    case OPT_NO_SYNC: o->sync = 0; return 0;
    case 'w':
        return tool_parse_double(program, "--wait", arg, 0.001, 1e6,
                                 &o->wait_s);
    case OPT_NO_WAIT: o->wait = 0; return 0;
    case 'k': {
        long k;
        if (tool_parse_int(program, "--connections", arg, 1, 256, &k) != 0)
            return -1;
        o->client.connections = (int)k;
        return 0;
    }
    case 'r': return tool_parse_double(program, "--rate", arg, 0, 1e7, &o->rate);
    case 's':
        if (strlen(arg) >= RTOMO_ID_MAX - 8)
            return tool_option_error(program, "--scan: '%s' is too long", arg);
        snprintf(o->scan, sizeof o->scan, "%s", arg);
        return 0;
    case 'R': return tool_parse_int(program, "--repeat", arg, 1, 1000000, &o->repeat);
    case 'q': o->quiet = 1; return 0;
    case OPT_SIZE: return tool_parse_int(program, "--size", arg, 2, EDGE, &o->width);
    case OPT_HEIGHT: return tool_parse_int(program, "--height", arg, 1, EDGE, &o->height);
    case 'a': return tool_parse_int(program, "--angles", arg, 1, 1 << 20, &o->angles);
    case OPT_RANGE:
        if (tool_parse_int(program, "--range", arg, 180, 360, &o->range) != 0)
            return -1;
        return o->range == 180 || o->range == 360 ? 0
               : tool_option_error(program, "--range must be 180 or 360");
    case OPT_DARKS: return tool_parse_int(program, "--darks", arg, 0, 65536, &o->darks);
    case OPT_FLATS: return tool_parse_int(program, "--flats", arg, 0, 65536, &o->flats);
    case OPT_NOISE: o->noise = 1; return 0;
    case OPT_SLICES: o->slices = arg; return 0;
    case OPT_FILTER: o->filter = arg; return 0;
    case OPT_METHOD: o->method = arg; return 0;
    case OPT_ITERATIONS:
        return tool_parse_int(program, "--iterations", arg, 1,
                              RTOMO_MAX_ITERATIONS, &o->iterations);
    case OPT_PUBLISH_EVERY:
        return tool_parse_int(program, "--publish-every", arg, 0,
                              RTOMO_MAX_ITERATIONS, &o->publish_every);
    case OPT_SBDX: o->sbdx = 1; return 0;
    case OPT_HOLES: return tool_parse_pair(program, "--holes", arg, 1, 4096, o->holes);
    case OPT_DETECTOR: return tool_parse_pair(program, "--detector", arg, 1, 4096, o->detector);
    case OPT_SHIFT: return tool_parse_int(program, "--shift", arg, 1, 1024, &o->shift);
    case OPT_RATIOS:
        return tool_parse_ratios(program, "--ratios", arg,
                                 RTOMO_SBDX_MAX_PLANES, &o->ratio_first,
                                 &o->ratio_last, &o->ratio_count);
    case OPT_FRAMES: return tool_parse_int(program, "--frames", arg, 1, 1L << 40, &o->frames);
    case OPT_PLANES: o->planes = arg; return 0;
    case OPT_RAW: o->raw = arg; return 0;
    case OPT_SHAPE:
        return tool_parse_int_list(program, "--shape", arg, 1, EDGE, o->shape,
                                   4, &o->shape_n);
    case OPT_DTYPE: return parse_dtype(arg, o);
    case OPT_CACHE: return tool_parse_int(program, "--cache-mb", arg, 1, 1 << 20, &o->cache_mb);
    case OPT_CONE: return parse_cone(arg, o);
    case OPT_PITCH:
        return tool_parse_double(program, "--pitch", arg, 1e-6, 1e6, &o->pitch);
    case OPT_VOLUME: return tool_parse_int(program, "--volume", arg, 1, 16384, &o->volume);
    }
    return tool_option_error(program, "bad option");
}

static int fill_reconstruction(const push_options *o, rtomo_scan_spec *spec)
{
    if (o->filter) {
        if (rtomo_window_parse(o->filter, &spec->geometry.window) != RTOMO_OK)
            return tool_option_error(program, "--filter: unknown filter '%s'",
                                     o->filter);
        spec->given |= RTOMO_SPEC_HAS_WINDOW;
    }
    if (o->method) {
        if (rtomo_method_parse(o->method, &spec->method.method) != RTOMO_OK)
            return tool_option_error(program, "--method: '%s' is not fbp, "
                                     "sirt or cgls", o->method);
        spec->given |= RTOMO_SPEC_HAS_METHOD;
    }
    if (o->iterations > 0) {
        spec->method.iterations = (int)o->iterations;
        spec->given |= RTOMO_SPEC_HAS_ITERATIONS;
    }
    if (o->publish_every > 0) {
        spec->method.publish_every = (int)o->publish_every;
        spec->given |= RTOMO_SPEC_HAS_PUBLISH_EVERY;
    }
    if (!o->slices)
        return 0;
    json_t *value = json_loads(o->slices, JSON_DECODE_ANY, NULL);
    long a = 0, b = 0, step = 1;
    int n = 0;
    if (!value && strchr(o->slices, ':') &&
        (n = sscanf(o->slices, "%ld:%ld:%ld", &a, &b, &step)) >= 2)
        value = json_pack("{s:I, s:I, s:I}", "first", (json_int_t)a, "count",
                          (json_int_t)b, "step", (json_int_t)step);
    else if (!value || json_is_integer(value)) {
        json_decref(value);
        char list[4096];
        snprintf(list, sizeof list, "[%s]", o->slices);
        value = strcmp(o->slices, "all") == 0 ? json_string("all")
                                              : json_loads(list, 0, NULL);
    }
    rtomo_reject_info why = {.message = "not all, R1,R2,.. or "
                                        "FIRST:COUNT[:STEP]"};
    int r = value ? rtomo_slice_selection_from_json(value, "--slices",
                                                    &spec->slices, &why)
                  : -1;
    json_decref(value);
    if (r != 0)
        return tool_option_error(program, "--slices '%s': %s", o->slices,
                                 why.message);
    spec->given |= RTOMO_SPEC_HAS_SLICES;
    return 0;
}

static int check_combination(push_options *o, int dtype_given)
{
    if (o->raw && o->shape_n != (o->sbdx ? 4 : 2))
        return tool_option_error(program, "--raw needs --shape with %d values",
                                 o->sbdx ? 4 : 2);
    if (!o->raw && o->shape_n)
        return tool_option_error(program, "--shape applies only to --raw");
    if (!dtype_given)
        o->dtype = o->sbdx ? RTOMO_DTYPE_U8 : RTOMO_DTYPE_U16;
    else if (!o->raw)
        return tool_option_error(program, "--dtype applies only to --raw "
                                 "(simulated frames are uint16, SBDX "
                                 "uint8)");
    if (o->scan[0] == '\0')
        snprintf(o->scan, sizeof o->scan, "push-%ld", (long)time(NULL));
    /* --slices and --filter are checked now, and applied per scan. */
    rtomo_scan_spec scratch;
    rtomo_scan_spec_init(&scratch);
    int r = fill_reconstruction(o, &scratch);
    rtomo_scan_spec_clear(&scratch);
    return r;
}

static int parse_args(int argc, char **argv, push_options *o)
{
    static const struct option options[] = {
        {"ingest", required_argument, NULL, 'i'},
        TOOL_CURVE_OPTIONS,
        {"fanout", required_argument, NULL, OPT_FANOUT},
        {"control", required_argument, NULL, 'c'},
        {"no-sync", no_argument, NULL, OPT_NO_SYNC},
        {"wait", required_argument, NULL, 'w'},
        {"no-wait", no_argument, NULL, OPT_NO_WAIT},
        {"connections", required_argument, NULL, 'k'},
        {"rate", required_argument, NULL, 'r'},
        {"scan", required_argument, NULL, 's'},
        {"repeat", required_argument, NULL, 'R'},
        {"quiet", no_argument, NULL, 'q'},
        {"size", required_argument, NULL, OPT_SIZE},
        {"height", required_argument, NULL, OPT_HEIGHT},
        {"angles", required_argument, NULL, 'a'},
        {"range", required_argument, NULL, OPT_RANGE},
        {"darks", required_argument, NULL, OPT_DARKS},
        {"flats", required_argument, NULL, OPT_FLATS},
        {"noise", no_argument, NULL, OPT_NOISE},
        {"slices", required_argument, NULL, OPT_SLICES},
        {"filter", required_argument, NULL, OPT_FILTER},
        {"method", required_argument, NULL, OPT_METHOD},
        {"iterations", required_argument, NULL, OPT_ITERATIONS},
        {"publish-every", required_argument, NULL, OPT_PUBLISH_EVERY},
        {"sbdx", no_argument, NULL, OPT_SBDX},
        {"holes", required_argument, NULL, OPT_HOLES},
        {"detector", required_argument, NULL, OPT_DETECTOR},
        {"shift", required_argument, NULL, OPT_SHIFT},
        {"ratios", required_argument, NULL, OPT_RATIOS},
        {"frames", required_argument, NULL, OPT_FRAMES},
        {"planes", required_argument, NULL, OPT_PLANES},
        {"raw", required_argument, NULL, OPT_RAW},
        {"shape", required_argument, NULL, OPT_SHAPE},
        {"dtype", required_argument, NULL, OPT_DTYPE},
        {"cache-mb", required_argument, NULL, OPT_CACHE},
        {"cone", required_argument, NULL, OPT_CONE},
        {"pitch", required_argument, NULL, OPT_PITCH},
        {"volume", required_argument, NULL, OPT_VOLUME},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    int c, dtype_given = 0, angles_given = 0, range_given = 0;
    while ((c = getopt_long(argc, argv, "i:c:k:r:s:R:qa:w:h", options, NULL)) != -1) {
        if (c == 'h') {
            usage(stdout);
            exit(TOOL_OK);
        }
        if (c == '?')
            return tool_usage_error(program, "bad option");
        dtype_given |= c == OPT_DTYPE;
        angles_given |= c == 'a';
        range_given |= c == OPT_RANGE;
        if (apply_option(c, optarg, o) != 0)
            return TOOL_USAGE;
    }
    if (optind < argc)
        return tool_usage_error(program, "unexpected argument '%s'",
                                argv[optind]);
    if (o->raw && !angles_given)
        o->angles = 0;          /* = the frames in the file */
    if (o->cone[0] > 0 && !range_given)
        o->range = 360;         /* a cone beam's full turn */
    if (o->cone[0] > 0 && o->sbdx)
        return tool_usage_error(program, "--cone is for tomography scans, "
                                "not --sbdx");
    return check_combination(o, dtype_given) == 0 ? TOOL_OK : TOOL_USAGE;
}

/* ----------------------------------------------------------- frames ---- */

static void frame_set_free(frame_set *s)
{
    if (s->mapped)
        munmap(s->data, s->mapped);
    else
        free(s->data);
    memset(s, 0, sizeof *s);
}

static int frame_set_alloc(frame_set *s, size_t bytes, long n)
{
    s->bytes = bytes;
    s->n = n;
    s->data = n > 0 ? malloc(bytes * (size_t)n) : NULL;
    if (n > 0 && !s->data) {
        fprintf(stderr, "%s: out of memory for %ld frames of %zu bytes\n",
                program, n, bytes);
        return -1;
    }
    return 0;
}

static const unsigned char *frame_at(const frame_set *s, long k)
{
    return s->data + (size_t)(k % s->n) * s->bytes;
}

/* How many distinct frames of `bytes` fit in the cache (at least 1). */
static long cached_frames(const push_options *o, size_t bytes, long wanted)
{
    long fit = (long)((double)o->cache_mb * 1048576.0 / (double)bytes);
    if (fit < 1)
        fit = 1;
    if (fit < wanted && !o->quiet)
        fprintf(stderr, "%s: %ld distinct frames do not fit in --cache-mb "
                "%ld; sending %ld in turn\n", program, wanted, o->cache_mb,
                fit);
    return fit < wanted ? fit : wanted;
}

/* The cone-beam geometry of --cone (the phantom's and the scan's). */
static void cone_geometry(const push_options *o, rtomo_cone_geometry *g)
{
    rtomo_cone_geometry_init(g);
    g->sad = o->cone[0];
    g->sdd = o->cone[1];
    g->det_u = (int)o->width;
    g->det_v = (int)o->height;
    g->pitch_u = g->pitch_v = o->pitch;
    g->n_proj = (int)o->angles;
    g->angle_step = o->range * M_PI / 180.0 / (double)o->angles;
    g->nx = g->ny = g->nz = (int)(o->volume > 0 ? o->volume : o->width);
    g->voxel = o->pitch * g->sad / g->sdd;
}

/* The line integrals of projection k: the 2-D Shepp-Logan phantom's rows
 * for a parallel beam, the 3-D one's cone-beam projection with --cone
 * (sized to the volume, its contrasts giving line integrals of about 1). */
static void project_phantom(const push_options *o, const rtomo_phantom *ph,
                            long k, float *out)
{
    if (o->cone[0] <= 0) {
        rtomo_phantom_project(ph, k * o->range * M_PI / 180.0 / o->angles,
                              out);
        return;
    }
    rtomo_cone_geometry g;
    cone_geometry(o, &g);
    double edge = g.nx * g.voxel;
    rtomo_ellipsoid e[RTOMO_PHANTOM_MAX_ELLIPSOIDS];
    int n = rtomo_cone_shepp_logan(0.5 * edge, 2.0 / edge, e,
                                   RTOMO_PHANTOM_MAX_ELLIPSOIDS);
    rtomo_cone_project_ellipsoids(&g, e, n, (int)k, out);
}

/* Darks, flats and projections of the phantom through the camera model. */
static int simulate_tomo(const push_options *o, frame_set *darks,
                         frame_set *flats, frame_set *proj)
{
    size_t n = (size_t)o->width * (size_t)o->height;
    long distinct = cached_frames(o, n * 2, o->angles);
    float *line_integrals = malloc(n * sizeof *line_integrals);
    if (!line_integrals || frame_set_alloc(darks, n * 2, o->darks) != 0 ||
        frame_set_alloc(flats, n * 2, o->flats) != 0 ||
        frame_set_alloc(proj, n * 2, distinct) != 0) {
        free(line_integrals);
        return -1;
    }
    rtomo_phantom ph;
    rtomo_phantom_init(&ph, (int)o->width, (int)o->height);
    rtomo_camera cam;
    rtomo_camera_init(&cam);
    cam.noise = o->noise;
    cam.seed = (uint64_t)time(NULL);
    for (long k = 0; k < o->darks; k++)
        rtomo_camera_dark(&cam, n, (uint16_t *)(darks->data + k * n * 2));
    for (long k = 0; k < o->flats; k++)
        rtomo_camera_flat(&cam, n, (uint16_t *)(flats->data + k * n * 2));
    for (long k = 0; k < distinct; k++) {
        project_phantom(o, &ph, k, line_integrals);
        rtomo_camera_expose(&cam, line_integrals, n,
                            (uint16_t *)(proj->data + k * n * 2));
    }
    free(line_integrals);
    return 0;
}

/* Map the raw file; its frames are `bytes` each. */
static int map_raw(const push_options *o, size_t bytes, frame_set *s)
{
    int fd = open(o->raw, O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        fprintf(stderr, "%s: cannot read %s: %s\n", program, o->raw,
                strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    size_t size = (size_t)st.st_size;
    if (size < bytes || size % bytes != 0) {
        fprintf(stderr, "%s: %s has %zu bytes, not a whole number of %zu-byte "
                "frames (--shape x --dtype)\n", program, o->raw, size, bytes);
        close(fd);
        return -1;
    }
    void *data = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (data == MAP_FAILED) {
        fprintf(stderr, "%s: cannot map %s: %s\n", program, o->raw,
                strerror(errno));
        return -1;
    }
    *s = (frame_set){data, bytes, (long)(size / bytes), size};
    return 0;
}

/* Points and wires at several depths, moving a little from frame to
 * frame, forward-projected into uint8 frames. */
static int simulate_sbdx(const push_options *o, const rtomo_sbdx_geometry *g,
                         frame_set *s)
{
    size_t bytes = (size_t)g->holes_x * g->holes_y * g->det_width *
                   g->det_height;
    if (frame_set_alloc(s, bytes, cached_frames(o, bytes, o->frames)) != 0)
        return -1;
    double w = (double)g->shift_m * g->holes_x, h = (double)g->shift_m * g->holes_y;
    double mid = 0.5 * (o->ratio_first + o->ratio_last);
    for (long k = 0; k < s->n; k++) {
        double dx = 2.0 * (double)k;
        rtomo_sbdx_object objects[] = {
            {RTOMO_SBDX_POINT, o->ratio_first, 0.3 * w + dx, 0.4 * h, 0, 0, 120},
            {RTOMO_SBDX_POINT, mid, 0.6 * w, 0.3 * h + dx, 0, 0, 120},
            {RTOMO_SBDX_WIRE, o->ratio_last, 0.2 * w, 0.7 * h + dx, 0.8 * w,
             0.6 * h + dx, 90},
        };
        rtomo_error err;
        if (rtomo_sbdx_simulate(g, objects, 3, 200.0, s->data + k * bytes,
                                &err) != RTOMO_OK) {
            fprintf(stderr, "%s: SBDX simulation failed: %s\n", program,
                    err.message);
            return -1;
        }
    }
    return 0;
}

/* ------------------------------------------------------- daemon sync ---- */

/* With several connections, frames may overtake each other: wait until
 * the daemon holds scan `id` with `count` frames (0: just the scan). */
static void wait_for_daemon(rtomo_client *c, const push_options *o,
                            const char *id, long count)
{
    if (rtomo_client_connections(c) < 2 || !o->sync)
        return;
    rtomo_error err;
    if (rtomo_client_wait_for_scan(c, id, count, 2000, &err) != RTOMO_OK)
        fprintf(stderr, "%s: cannot confirm the daemon's progress (%s); "
                "going on\n", program, err.message);
}

/* ---------------------------------------------------------- outcome ---- */

/* The exit status that says more of two (the worse news wins). */
static int worse_status(int a, int b)
{
    static const int rank[] = {[TOOL_OK] = 0, [PUSH_SCAN_PARTIAL] = 1,
                               [PUSH_NO_OUTCOME] = 2, [PUSH_SCAN_FAILED] = 3,
                               [TOOL_FAILED] = 4, [TOOL_USAGE] = 5};
    return rank[b] > rank[a] ? b : a;
}

/* Ask the daemons what became of scan `id` (waiting up to --wait), print
 * one line, and return the exit status it calls for. */
static int await_outcome(rtomo_client *c, const push_options *o,
                         push_stats *stats, const char *id)
{
    if (!o->wait)
        return TOOL_OK;
    double t0 = tool_now();
    rtomo_scan_outcome out;
    rtomo_error err;
    rtomo_status st = rtomo_client_scan_outcome(
        c, id, (int)(o->wait_s * 1000.0 + 0.5), &out, &err);
    stats->waited += tool_now() - t0;
    if (st != RTOMO_OK && out.daemons == 0) {
        fprintf(stderr, "%s: cannot learn what became of scan %s: %s\n",
                program, id, err.message);
        return PUSH_NO_OUTCOME;
    }
    char line[1024];
    rtomo_scan_verdict v = rtomo_scan_outcome_verdict(&out, line,
                                                      sizeof line);
    if (v == RTOMO_VERDICT_SUCCEEDED) {
        printf("%s: %s\n", program, line);
        return TOOL_OK;
    }
    if (v == RTOMO_VERDICT_PENDING)
        fprintf(stderr, "%s: %s after waiting %g s (--wait)\n", program,
                line, o->wait_s);
    else
        fprintf(stderr, "%s: %s\n", program, line);
    return v == RTOMO_VERDICT_PARTIAL ? PUSH_SCAN_PARTIAL
         : v == RTOMO_VERDICT_FAILED ? PUSH_SCAN_FAILED : PUSH_NO_OUTCOME;
}

/* ---------------------------------------------------------- sending ---- */

static int send_frame(rtomo_client *c, const push_options *o,
                      push_stats *stats, const rtomo_frame_header *f,
                      const unsigned char *data, size_t bytes)
{
    if (o->rate > 0)
        tool_sleep_until(stats->t0 + (double)stats->paced++ / o->rate);
    rtomo_error err;
    /* The frame sets outlive the client, so ZeroMQ may send from them. */
    if (rtomo_client_send_frame_zero_copy(c, f, (void *)data, bytes, NULL,
                                          NULL, &err) != RTOMO_OK) {
        fprintf(stderr, "%s: %s %lld of %s: %s\n", program,
                rtomo_msg_type_name(f->type), (long long)f->index, f->scan,
                err.message);
        return -1;
    }
    stats->frames++;
    stats->bytes += (double)bytes;
    return 0;
}

/* Send n frames of one type, indices 0..n-1, from set s. */
static int send_series(rtomo_client *c, const push_options *o,
                       push_stats *stats, rtomo_frame_header f,
                       const frame_set *s, long n)
{
    for (long k = 0; k < n && !tool_interrupted; k++) {
        f.index = k;
        if (send_frame(c, o, stats, &f, frame_at(s, k), s->bytes) != 0)
            return -1;
    }
    return tool_interrupted ? -1 : 0;
}

static int report(rtomo_error *err, const char *what)
{
    fprintf(stderr, "%s: %s: %s\n", program, what, err->message);
    return -1;
}

/* "beam": "cone" with the geometry of --cone, --pitch and --volume. */
static int fill_cone(const push_options *o, rtomo_scan_spec *spec)
{
    rtomo_cone_geometry g;
    cone_geometry(o, &g);
    rtomo_cone_spec *c = spec->cone = calloc(1, sizeof *spec->cone);
    if (!c) {
        fprintf(stderr, "%s: out of memory\n", program);
        return -1;
    }
    c->source_to_axis = g.sad;
    c->source_to_detector = g.sdd;
    c->pitch[0] = c->pitch[1] = g.pitch_u;
    c->voxel = g.voxel;
    /* The default volume follows the detector (of --raw frames too). */
    for (int a = 0; a < 3; a++)
        c->volume[a] = (int)(o->volume > 0 ? o->volume
                                           : spec->geometry.det_width);
    return 0;
}

static int push_tomo_scan(rtomo_client *c, const push_options *o,
                          const char *id, const frame_set *darks,
                          const frame_set *flats, const frame_set *proj,
                          push_stats *stats)
{
    rtomo_scan_spec spec;
    rtomo_scan_spec_init(&spec);
    snprintf(spec.scan, sizeof spec.scan, "%s", id);
    spec.geometry.det_width = (int)(o->raw ? o->shape[1] : o->width);
    spec.geometry.det_height = (int)(o->raw ? o->shape[0] : o->height);
    spec.geometry.n_proj = (int)(o->angles > 0 ? o->angles : proj->n);
    spec.geometry.angle_step = o->range * M_PI / 180.0 / spec.geometry.n_proj;
    spec.dtype = o->dtype;
    spec.n_darks = (int)darks->n;
    spec.n_flats = (int)flats->n;
    rtomo_error err;
    fill_reconstruction(o, &spec);      /* checked with the options */
    if (o->cone[0] > 0 && fill_cone(o, &spec) != 0) {
        rtomo_scan_spec_clear(&spec);
        return -1;
    }
    int r = rtomo_client_send_scan_begin(c, &spec, &err) == RTOMO_OK
                ? 0 : report(&err, "scan_begin");
    rtomo_frame_header f = {.dtype = o->dtype, .ndim = 2,
                            .shape = {spec.geometry.det_height,
                                      spec.geometry.det_width},
                            .angle = NAN, .axis_shift = NAN};
    snprintf(f.scan, sizeof f.scan, "%s", id);
    if (r == 0)
        wait_for_daemon(c, o, id, 0);
    f.type = RTOMO_MSG_DARK;
    r = r ? r : send_series(c, o, stats, f, darks, darks->n);
    f.type = RTOMO_MSG_FLAT;
    r = r ? r : send_series(c, o, stats, f, flats, flats->n);
    f.type = RTOMO_MSG_PROJECTION;
    r = r ? r : send_series(c, o, stats, f, proj, spec.geometry.n_proj);
    if (r == 0) {
        wait_for_daemon(c, o, id, darks->n + flats->n + spec.geometry.n_proj);
        if (rtomo_client_send_end(c, RTOMO_MSG_SCAN_END, id, &err) != RTOMO_OK)
            r = report(&err, "scan_end");
    }
    rtomo_scan_spec_clear(&spec);
    return r;
}

static void sbdx_geometry(const push_options *o, rtomo_sbdx_spec *spec)
{
    rtomo_sbdx_geometry *g = &spec->geometry;
    g->holes_x = (int)(o->raw ? o->shape[1] : o->holes[0]);
    g->holes_y = (int)(o->raw ? o->shape[0] : o->holes[1]);
    g->det_width = (int)(o->raw ? o->shape[3] : o->detector[0]);
    g->det_height = (int)(o->raw ? o->shape[2] : o->detector[1]);
    g->shift_m = (int)o->shift;
    g->n_planes = (int)o->ratio_count;
    spec->ratios = tool_ratios(o->ratio_first, o->ratio_last, g->n_planes);
    g->ratios = spec->ratios;
    spec->dtype = o->dtype;
}

static int push_sbdx_stream(rtomo_client *c, const push_options *o,
                            const char *id, rtomo_sbdx_spec *spec,
                            const frame_set *frames, push_stats *stats)
{
    snprintf(spec->scan, sizeof spec->scan, "%s", id);
    rtomo_error err;
    if (rtomo_client_send_sbdx_begin(c, spec, &err) != RTOMO_OK)
        return report(&err, "sbdx_begin");
    const rtomo_sbdx_geometry *g = &spec->geometry;
    rtomo_frame_header f = {.type = RTOMO_MSG_SBDX_FRAME, .dtype = o->dtype,
                            .ndim = 4, .shape = {g->holes_y, g->holes_x,
                                                 g->det_height, g->det_width}};
    snprintf(f.scan, sizeof f.scan, "%s", id);
    wait_for_daemon(c, o, id, 0);
    long n = o->raw ? frames->n : o->frames;
    if (send_series(c, o, stats, f, frames, n) != 0)
        return -1;
    wait_for_daemon(c, o, id, n);
    if (rtomo_client_send_end(c, RTOMO_MSG_SBDX_END, id, &err) != RTOMO_OK)
        return report(&err, "sbdx_end");
    return 0;
}

/* ------------------------------------------------------------- main ---- */

static int prepare_sbdx(const push_options *o, rtomo_sbdx_spec *spec,
                        frame_set *frames)
{
    sbdx_geometry(o, spec);
    if (!spec->ratios)
        return -1;
    if (o->planes &&
        rtomo_plane_format_parse(o->planes, &spec->planes) != RTOMO_OK)
        return tool_option_error(program, "--planes: '%s' is not float32, "
                                 "uint16 or none", o->planes);
    spec->u16_scale = o->dtype == RTOMO_DTYPE_U8 ? 257.0f : 1.0f;
    rtomo_error err;
    if (rtomo_sbdx_geometry_validate(&spec->geometry, &err) != RTOMO_OK)
        return tool_option_error(program, "SBDX geometry: %s", err.message);
    if (o->raw)
        return map_raw(o, (size_t)o->shape[0] * o->shape[1] * o->shape[2] *
                              o->shape[3] * rtomo_dtype_size(o->dtype), frames);
    return simulate_sbdx(o, &spec->geometry, frames);
}

/* Push o->repeat scans (or streams); returns the exit status. */
static int run(rtomo_client *c, const push_options *o, push_stats *stats)
{
    frame_set darks = {0}, flats = {0}, frames = {0};
    rtomo_sbdx_spec sbdx;
    rtomo_sbdx_spec_init(&sbdx);
    int r;
    if (o->sbdx)
        r = prepare_sbdx(o, &sbdx, &frames);
    else if (o->raw)
        r = map_raw(o, (size_t)o->shape[0] * o->shape[1] *
                           rtomo_dtype_size(o->dtype), &frames);
    else
        r = simulate_tomo(o, &darks, &flats, &frames);
    stats->t0 = tool_now();
    /* The scan sent before the current one: its outcome is asked once the
     * current one is sent, so that acquisition overlaps reconstruction. */
    char previous[RTOMO_ID_MAX] = "";
    int status = TOOL_OK;
    for (long k = 0; r == 0 && k < o->repeat && !tool_interrupted; k++) {
        char id[RTOMO_ID_MAX];      /* --scan left room for the suffix */
        if (o->repeat > 1)
            snprintf(id, sizeof id, "%.55s-%d", o->scan,
                     (int)(k % 1000000) + 1);
        else
            snprintf(id, sizeof id, "%s", o->scan);
        long before = stats->frames;
        r = o->sbdx ? push_sbdx_stream(c, o, id, &sbdx, &frames, stats)
                    : push_tomo_scan(c, o, id, &darks, &flats, &frames, stats);
        if (r == 0 && !o->quiet)
            printf("%s: pushed %s: %ld frames\n", program, id,
                   stats->frames - before);
        if (r == 0 && previous[0])
            status = worse_status(status, await_outcome(c, o, stats,
                                                        previous));
        if (r == 0)
            snprintf(previous, sizeof previous, "%s", id);
    }
    if (previous[0] && !tool_interrupted)
        status = worse_status(status, await_outcome(c, o, stats, previous));
    rtomo_client_close(c);      /* waits until queued frames have left */
    rtomo_sbdx_spec_clear(&sbdx);
    frame_set_free(&darks);
    frame_set_free(&flats);
    frame_set_free(&frames);
    return r == 0 && !tool_interrupted ? status : TOOL_FAILED;
}

/* ------------------------------------------------------ control side ---- */

/* Append to out[size] the control endpoint that rtomod's default layout
 * puts beside the ingest endpoint ingest[0..len) = tcp://HOST:PORT:
 * tcp://HOST:PORT+2 (5555 -> 5557).  0, or -1 when it is not of that
 * form or does not fit. */
static int control_beside(const char *ingest, size_t len, char *out,
                          size_t size)
{
    char ep[512], *end = NULL;
    if (len >= sizeof ep || strncmp(ingest, "tcp://", 6) != 0)
        return -1;
    memcpy(ep, ingest, len);
    ep[len] = '\0';
    char *colon = strrchr(ep, ':');
    long port = colon > ep + 6 ? strtol(colon + 1, &end, 10) : 0;
    if (!end || end == colon + 1 || *end || port < 1 || port > 65533)
        return -1;
    *colon = '\0';
    size_t used = strlen(out);
    int n = snprintf(out + used, size - used, "%s%s:%ld", used ? "," : "",
                     ep, port + 2);
    return n < 0 || (size_t)n >= size - used ? -1 : 0;
}

static int count_endpoints(const char *list)
{
    int n = 1;
    for (; *list; list++)
        n += *list == ',';
    return n;
}

/* The control endpoints: --control, else one beside each ingest
 * endpoint.  0, or TOOL_USAGE after a message. */
static int choose_control(push_options *o)
{
    const char *ingest = o->client.ingest;
    if (o->client.control) {
        int n = count_endpoints(o->client.control);
        if (n != count_endpoints(ingest))
            return tool_usage_error(program, "--control lists %d "
                                    "endpoint%s for %d daemons (one per "
                                    "ingest endpoint)", n, n == 1 ? "" : "s",
                                    count_endpoints(ingest));
        return TOOL_OK;
    }
    o->control[0] = '\0';
    for (const char *p = ingest;; p++) {
        size_t len = strcspn(p, ",");
        if (control_beside(p, len, o->control, sizeof o->control) != 0)
            return tool_usage_error(program, "no control endpoint can be "
                                    "derived from ingest '%.*s' (not "
                                    "tcp://HOST:PORT): give --control, or "
                                    "--no-wait", (int)len, p);
        p += len;
        if (!*p)
            break;
    }
    o->client.control = o->control;
    return TOOL_OK;
}

int main(int argc, char **argv)
{
    push_options o = {.sync = 1, .wait = 1, .wait_s = DEFAULT_WAIT_S,
                      .repeat = 1, .cache_mb = 1024, .width = 512,
                      .height = 8, .angles = 360, .range = 180, .darks = 4,
                      .flats = 4, .holes = {100, 100}, .detector = {160, 80},
                      .shift = 10, .frames = 10, .ratio_first = 0.6,
                      .ratio_last = 2.25, .ratio_count = 32,
                      .pitch = 1.0};
    rtomo_client_options_init(&o.client);
    o.client.ingest = "tcp://localhost:5555";
    o.client.linger_ms = -1;    /* every queued frame gets delivered */
    int st = parse_args(argc, argv, &o);
    if (st != TOOL_OK)
        return st;
    if (!o.wait && (o.client.connections < 2 || !o.sync))
        o.client.control = NULL;        /* not needed */
    else if (choose_control(&o) != TOOL_OK)
        return TOOL_USAGE;
    rtomo_error err;
    rtomo_client *c = rtomo_client_open(&o.client, &err);
    if (!c)
        return tool_report_error(program, &err);
    tool_catch_signals();
    push_stats stats = {0};
    int daemons = rtomo_client_daemons(c);
    st = run(c, &o, &stats);      /* closes the client */
    /* The rate of sending: the waits for outcomes do not count. */
    double seconds = tool_now() - stats.t0 - stats.waited;
    printf("%s: %ld frames, %.1f MB in %.3f s: %.1f frames/s, %.1f MB/s "
           "(%d connection%s%s)\n", program, stats.frames, stats.bytes / 1e6,
           seconds, seconds > 0 ? stats.frames / seconds : 0.0,
           seconds > 0 ? stats.bytes / 1e6 / seconds : 0.0,
           o.client.connections, o.client.connections > 1 ? "s" : "",
           daemons > 1 ? ", to each of several daemons" : "");
    return st;
}
