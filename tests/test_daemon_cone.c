/*
 * test_daemon_cone.c — cone-beam scans ("beam": "cone") through the real
 * rtomod (CPU backend, loopback), of an analytic sphere phantom as a
 * flat-panel camera sees it: uint16 darks, flats and projections with
 * noise, made from the phantom's exact cone-beam line integrals.
 *   - the published z-slices (index/count over the volume, slice = z,
 *     method "fbp": FDK) equal the CPU cone engine's own FDK of the same
 *     frames, normalised as PROTOCOL.md 3.10 defines, and come near the
 *     phantom in the central slices (TRUTH_BOUND);
 *   - split into z-slabs on two workers, with a ROI and two projections
 *     missing: the same slices as the engine's ROI of the projections
 *     that came, the missing ones reported;
 *   - impossible set-ups are refused naming the field or the engine's
 *     reason, a volume beyond the memory budget is over_budget, a
 *     projection's own angle is refused;
 *   - an abort ends the scan with its frames dropped, and the daemon
 *     goes on with the next; a sender that goes quiet has what it sent
 *     reconstructed after the idle timeout;
 *   - with the daemon's HDF5 output on, the z-slices make the scan's
 *     NeXus file, equal to those published (read back with h5py);
 *   - "method": "sirt" publishes the FDK slices (not final), an iterate
 *     and the final volume, equal to the engine's own SIRT of the same
 *     line integrals from its FDK volume;
 *   - on CUDA only: a CGLS solve's pair split over the daemon's GPUs
 *     (with one GPU, the test hook RTOMO_CONE_SF_SPLIT=2 in the daemon's
 *     environment makes it two slabs on it): scan_started and status
 *     name the GPUs, and the final volume equals an unsplit daemon's (one
 *     GPU, no hook) and the CPU engine's solve; and a solve whose vectors
 *     do not fit limits.device_mb beside its FDK plan streams through
 *     the GPU (scan_started says so) to the resident solve's volume.
 * The engine's tests (test_cone_*) check FDK itself; this one checks the
 * wiring.
 */
#include "config.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "daemon_harness.h"
#include "rtomo_cone_sim.h"
#include "rtomo_proto_cone.h"
#include "rtomo_sim.h"

#define DET 64                  /* detector 64 x 64 pixels of 1.6 mm */
#define N_PROJ 120              /* over 360 degrees */
#define VOL 48                  /* 48^3 voxels of 0.8 mm */
#define DARK_LEVEL 100.0
#define OPEN_COUNTS 20000.0

/*
 * Built twice (tests/daemon.am): as test_daemon_cone, the daemon on the
 * CPU backend; with CONE_ON_GPU as test_cuda_daemon_cone, on the CUDA
 * backend (exit 77 without a GPU), against the same CPU engine.  The
 * GPU's back-projector may be the texture kernel (8-bit interpolation
 * weights: within 5e-3 relative L2 on phantoms, test_cuda_cone), so the
 * GPU is held to a relative L2 instead of the CPU's sample-by-sample
 * bound.
 */
#ifdef CONE_ON_GPU
#define BACKEND_ARGS "--backend", "cuda",
#define ENGINE_L2 1e-2
#define ENGINE_MAX INFINITY
#define SOLVE_L2 2e-2       /* from that start, the GPU's pair besides */
#else
#define BACKEND_ARGS
#define ENGINE_L2 1e-5
#define ENGINE_MAX 1e-5     /* of the volume's largest magnitude */
#define SOLVE_L2 1e-5
#endif

/* FDK of 120 noisy views against the voxelised phantom, the two central
 * slices within 18 mm of the axis: measured 0.078-0.083 over 5 seeds
 * (CPU); the bound leaves room for other seeds and the GPU's kernels. */
#define TRUTH_BOUND 0.10

/* ------------------------------------------------------------ scans ---- */

typedef struct cone_scan {
    rtomo_scan_spec spec;
    rtomo_ellipsoid e[RTOMO_PHANTOM_MAX_ELLIPSOIDS];
    int n_e;
    uint16_t *darks, *flats, *proj;
    size_t frame;               /* samples per frame */
} cone_scan;

static uint16_t counts(double v)
{
    return (uint16_t)lround(v < 0 ? 0 : v > 65535 ? 65535 : v);
}

/* Darks, flats and projections with Gaussian noise of Poisson's size. */
static void make_frames(cone_scan *s, uint64_t seed)
{
    rtomo_cone_geometry g;
    rtomo_proto_cone_geometry(&s->spec, &g);
    s->frame = (size_t)g.det_u * (size_t)g.det_v;
    s->darks = malloc(sizeof(uint16_t) * s->frame * (size_t)s->spec.n_darks);
    s->flats = malloc(sizeof(uint16_t) * s->frame * (size_t)s->spec.n_flats);
    s->proj = malloc(sizeof(uint16_t) * s->frame * (size_t)g.n_proj);
    float *li = malloc(sizeof(float) * s->frame);
    ck_assert(s->darks && s->flats && s->proj && li);
    for (size_t i = 0; i < s->frame * (size_t)s->spec.n_darks; i++)
        s->darks[i] = counts(DARK_LEVEL + 2.0 * rtomo_random_normal(&seed));
    for (size_t i = 0; i < s->frame * (size_t)s->spec.n_flats; i++)
        s->flats[i] = counts(DARK_LEVEL + OPEN_COUNTS + sqrt(OPEN_COUNTS) *
                             rtomo_random_normal(&seed));
    for (int p = 0; p < g.n_proj; p++) {
        rtomo_cone_project_ellipsoids(&g, s->e, s->n_e, p, li);
        for (size_t i = 0; i < s->frame; i++) {
            double open = OPEN_COUNTS * exp(-li[i]);
            s->proj[s->frame * (size_t)p + i] =
                counts(DARK_LEVEL + open + sqrt(open) *
                       rtomo_random_normal(&seed));
        }
    }
    free(li);
}

/* A 360-degree scan of a sphere phantom (radius 15 mm): source 200 mm
 * from the axis, detector 400 mm (magnification 2) of det x det pixels
 * of 1.6 mm, n_proj projections, vol^3 voxels of `voxel` mm, 2 darks, 3
 * flats. */
static void cone_scan_make_sized(cone_scan *s, const char *id, uint64_t seed,
                                 int det, int n_proj, int vol, double voxel)
{
    memset(s, 0, sizeof *s);
    rtomo_scan_spec *spec = &s->spec;
    rtomo_scan_spec_init(spec);
    snprintf(spec->scan, sizeof spec->scan, "%s", id);
    spec->geometry.det_width = spec->geometry.det_height = det;
    spec->geometry.n_proj = n_proj;
    spec->geometry.angle_start = 0.3;
    spec->geometry.angle_step = 2 * M_PI / n_proj;
    spec->n_darks = 2;
    spec->n_flats = 3;
    spec->given = RTOMO_SPEC_HAS_WINDOW;
    spec->geometry.window = RTOMO_WINDOW_RAMLAK;
    rtomo_cone_spec *c = spec->cone = calloc(1, sizeof *spec->cone);
    ck_assert_ptr_nonnull(c);
    c->source_to_axis = 200.0;
    c->source_to_detector = 400.0;
    c->pitch[0] = c->pitch[1] = 1.6;
    c->voxel = voxel;
    c->volume[0] = c->volume[1] = c->volume[2] = vol;
    s->n_e = rtomo_cone_sphere_phantom(15.0, 0.02, s->e,
                                       RTOMO_PHANTOM_MAX_ELLIPSOIDS);
    make_frames(s, seed);
}

/* The standard scan: 64 x 64 pixels, 120 projections, 48^3 of 0.8 mm. */
static void cone_scan_make(cone_scan *s, const char *id, uint64_t seed)
{
    cone_scan_make_sized(s, id, seed, DET, N_PROJ, VOL, 0.8);
}

static void cone_scan_free(cone_scan *s)
{
    rtomo_scan_spec_clear(&s->spec);
    free(s->darks);
    free(s->flats);
    free(s->proj);
}

static void send_frame(rtomo_client *c, const cone_scan *s,
                       rtomo_msg_type type, int index, const uint16_t *data,
                       double angle)
{
    rtomo_frame_header f;
    memset(&f, 0, sizeof f);
    f.type = type;
    snprintf(f.scan, sizeof f.scan, "%s", s->spec.scan);
    f.index = index;
    f.dtype = RTOMO_DTYPE_U16;
    f.ndim = 2;
    f.shape[0] = s->spec.geometry.det_height;
    f.shape[1] = s->spec.geometry.det_width;
    f.angle = angle;
    f.axis_shift = NAN;
    rtomo_error err;
    ck_assert_msg(rtomo_client_send_frame(c, &f, data,
                                          s->frame * sizeof(uint16_t),
                                          &err) == RTOMO_OK,
                  "frame %d: %s", index, err.message);
}

/* Begin, darks, flats, and of projections 0 .. n - 1 those not `skipped`
 * (may be NULL); no end. */
static void send_opening(rtomo_client *c, const cone_scan *s,
                         const unsigned char *skipped, int n)
{
    rtomo_error err;
    ck_assert_msg(rtomo_client_send_scan_begin(c, &s->spec, &err) ==
                  RTOMO_OK, "scan_begin: %s", err.message);
    for (int i = 0; i < s->spec.n_darks; i++)
        send_frame(c, s, RTOMO_MSG_DARK, i, s->darks + s->frame * (size_t)i,
                   NAN);
    for (int i = 0; i < s->spec.n_flats; i++)
        send_frame(c, s, RTOMO_MSG_FLAT, i, s->flats + s->frame * (size_t)i,
                   NAN);
    for (int p = 0; p < n; p++)
        if (!skipped || !skipped[p])
            send_frame(c, s, RTOMO_MSG_PROJECTION, p,
                       s->proj + s->frame * (size_t)p, NAN);
}

/* The whole scan: its opening with every projection not `skipped`, and
 * the end. */
static void send_scan(rtomo_client *c, const cone_scan *s,
                      const unsigned char *skipped)
{
    send_opening(c, s, skipped, s->spec.geometry.n_proj);
    rtomo_error err;
    ck_assert(rtomo_client_send_end(c, RTOMO_MSG_SCAN_END, s->spec.scan,
                                    &err) == RTOMO_OK);
}

/* ------------------------------------------------------- references ---- */

/* PROTOCOL.md 3.10's line integrals, written out here: the mean dark and
 * flat (double sums rounded to float), a float ratio clamped at 1e-6. */
static void line_integrals(const cone_scan *s, int p, float *out)
{
    for (size_t i = 0; i < s->frame; i++) {
        double dsum = 0, fsum = 0;
        for (int k = 0; k < s->spec.n_darks; k++)
            dsum += s->darks[s->frame * (size_t)k + i];
        for (int k = 0; k < s->spec.n_flats; k++)
            fsum += s->flats[s->frame * (size_t)k + i];
        float dark = (float)(dsum / s->spec.n_darks);
        float flat = (float)(fsum / s->spec.n_flats);
        float raw = s->proj[s->frame * (size_t)p + i];
        float open = flat - dark;
        float r = open > 0.0f ? (raw - dark) / open : 1e-6f;
        if (!(r >= 1e-6f))
            r = 1e-6f;
        out[i] = -logf(r);
    }
}

/* The CPU engine's FDK of the projections that came (the ROI volume of
 * the scan's geometry; malloc'd). */
static float *engine_fdk(const cone_scan *s, const unsigned char *skipped,
                         rtomo_cone_geometry *g)
{
    rtomo_proto_cone_geometry(&s->spec, g);
    rtomo_engine_options opt;
    rtomo_engine_options_init(&opt);
    opt.backend = RTOMO_BACKEND_CPU;
    opt.cpu_threads = 2;
    rtomo_error err;
    rtomo_cone *plan = rtomo_cone_create(g, &opt, RTOMO_CONE_KERNEL_AUTO,
                                         &err);
    ck_assert_msg(plan != NULL, "%s", err.message);
    float *li = malloc(sizeof(float) * s->frame);
    float *vol = malloc(sizeof(float) * rtomo_cone_volume_size(plan));
    ck_assert(li && vol);
    for (int p = 0; p < s->spec.geometry.n_proj; p++) {
        if (skipped && skipped[p])
            continue;
        line_integrals(s, p, li);
        ck_assert(rtomo_cone_add_projection(plan, p, li, &err) == RTOMO_OK);
    }
    ck_assert(rtomo_cone_read(plan, vol, &err) == RTOMO_OK);
    *g = *rtomo_cone_geometry_of(plan);
    g->angles = NULL;           /* the plan's copy goes with it */
    rtomo_cone_destroy(plan);
    free(li);
    return vol;
}

/* Wait for the scan's slices and check each against the engine's volume
 * (ROI geometry g): headers, and the samples within ENGINE_MAX of the
 * volume's largest magnitude and ENGINE_L2 relative L2. */
static void check_slices(daemon_inbox *in, const char *id,
                         const rtomo_cone_geometry *g, const float *ref,
                         long projections, int final)
{
    const int nz = g->roi_nz;
    const size_t pixels = (size_t)g->roi_nx * (size_t)g->roi_ny;
    daemon_wait_images(in, RTOMO_TOPIC_SLICE, id, nz);
    double peak = 0.0;
    for (size_t i = 0; i < pixels * (size_t)nz; i++)
        peak = fmax(peak, fabs(ref[i]));
    double worst = 0.0, worst_l2 = 0.0;
    for (int k = 0; k < nz; k++) {
        const daemon_image *im = daemon_find_image(in, RTOMO_TOPIC_SLICE, id,
                                                   -1, k);
        ck_assert_msg(im != NULL, "slice %d of %s missing", k, id);
        const rtomo_image_header *h = &im->h;
        ck_assert_int_eq(h->count, nz);
        ck_assert_int_eq(h->slice, g->roi_z + k);
        ck_assert_int_eq(h->width, g->roi_nx);
        ck_assert_int_eq(h->height, g->roi_ny);
        ck_assert_int_eq(h->roi[0], g->roi_x);
        ck_assert_int_eq(h->roi[1], g->roi_y);
        ck_assert_int_eq(h->projections, projections);
        ck_assert_str_eq(h->method, "fbp");
        ck_assert_int_eq(h->iteration, 0);
        ck_assert_int_eq(h->final, final);
        ck_assert_uint_eq(im->size, pixels * sizeof(float));
        daemon_assert_image_stats(im, 1e-5);
        const float *a = im->data, *b = ref + pixels * (size_t)k;
        for (size_t i = 0; i < pixels; i++)
            worst = fmax(worst, fabs(a[i] - b[i]));
        worst_l2 = fmax(worst_l2, test_rel_l2(a, b, pixels));
    }
    printf("%s: %d slices, largest difference %.2e of the peak %.4f, "
           "relative L2 %.2e\n", id, nz, worst / peak, peak, worst_l2);
    ck_assert_msg(worst <= ENGINE_MAX * peak, "%s: %g > %g of the peak", id,
                  worst / peak, (double)ENGINE_MAX);
    ck_assert_msg(worst_l2 <= ENGINE_L2, "%s: relative L2 %g", id, worst_l2);
}

/* ||slice - truth|| / ||truth|| over the volume's two central slices,
 * voxels within 18 mm of the axis. */
static double truth_error(const cone_scan *s, daemon_inbox *in,
                          const char *id)
{
    rtomo_cone_geometry g;
    rtomo_proto_cone_geometry(&s->spec, &g);
    const size_t pixels = (size_t)VOL * VOL;
    float *truth = malloc(sizeof(float) * pixels * VOL);
    ck_assert_ptr_nonnull(truth);
    rtomo_cone_voxelise(&g, s->e, s->n_e, 3, truth);
    double num = 0, den = 0;
    for (int k = VOL / 2 - 1; k <= VOL / 2; k++) {
        const daemon_image *im = daemon_find_image(in, RTOMO_TOPIC_SLICE, id,
                                                   -1, k);
        const float *a = im->data, *t = truth + pixels * (size_t)k;
        for (int j = 0; j < VOL; j++)
            for (int i = 0; i < VOL; i++) {
                double x = (i - 0.5 * (VOL - 1)) * g.voxel;
                double y = (j - 0.5 * (VOL - 1)) * g.voxel;
                if (hypot(x, y) > 18.0)
                    continue;
                size_t n = (size_t)j * VOL + (size_t)i;
                num += (a[n] - t[n]) * (a[n] - t[n]);
                den += (double)t[n] * t[n];
            }
    }
    free(truth);
    return sqrt(num / den);
}

/* The daemon's answer to {"cmd": "scan"} once final. */
static json_t *final_outcome(rtomo_client *c, const char *id)
{
    char request[128];
    snprintf(request, sizeof request, "{\"cmd\": \"scan\", \"scan\": \"%s\"}",
             id);
    for (int i = 0; i < 600; i++) {
        json_t *reply = daemon_request(c, request);
        json_t *scan = json_object_get(reply, "scan");
        if (json_is_true(json_object_get(scan, "final"))) {
            json_incref(scan);
            json_decref(reply);
            return scan;
        }
        json_decref(reply);
        struct timespec t = {0, 50 * 1000 * 1000};
        nanosleep(&t, NULL);
    }
    ck_abort_msg("scan %s never became final", id);
    return NULL;
}

static long outcome_int(const json_t *scan, const char *key)
{
    return (long)json_integer_value(json_object_get(scan, key));
}

static const char *const backend_args[] = {BACKEND_ARGS NULL};

/* ------------------------------------------------------------ tests ---- */

START_TEST(fdk_through_the_daemon)
{
    daemon_session t;
    daemon_session_open(&t, backend_args, 1);
    cone_scan s;
    cone_scan_make(&s, "cone", test_seed(0xc0de, 0));
    send_scan(t.c, &s, NULL);
    const rtomo_event *ev = daemon_wait_event(&t.in, "scan_started", NULL,
                                              "cone", 0);
    ck_assert_msg(strstr(ev->message, "cone beam: FDK of 48x48x48 voxels"),
                  "%s", ev->message);
    ck_assert_str_eq(ev->reason, "streaming");
    rtomo_cone_geometry g;
    float *ref = engine_fdk(&s, NULL, &g);
    check_slices(&t.in, "cone", &g, ref, N_PROJ, 1);
    double e = truth_error(&s, &t.in, "cone");
    printf("central slices against the phantom: relative L2 %.4f (bound "
           "%.2f)\n", e, TRUTH_BOUND);
    ck_assert_msg(e < TRUTH_BOUND, "relative L2 to the phantom %g", e);
    ev = daemon_wait_event(&t.in, "scan_complete", NULL, "cone", 0);
    ck_assert_msg(strstr(ev->message, "cone beam"), "%s", ev->message);
    json_t *o = final_outcome(t.c, "cone");
    ck_assert_str_eq(json_string_value(json_object_get(o, "state")),
                     "complete");
    ck_assert_int_eq(outcome_int(o, "frames"), 2 + 3 + N_PROJ);
    ck_assert_int_eq(outcome_int(o, "images"), VOL);
    ck_assert_int_eq(outcome_int(o, "missing"), 0);
    ck_assert_int_eq(outcome_int(o, "dropped"), 0);
    json_decref(o);
    free(ref);
    cone_scan_free(&s);
    daemon_session_close(&t);
}
END_TEST

/* Two workers, each a z-slab of a ROI (on the CPU backend; one per GPU on
 * CUDA); projections 5 and 77 never sent. */
START_TEST(slabs_roi_and_missing)
{
    const char *args[] = {BACKEND_ARGS "--set", "engine.workers=2", NULL};
    daemon_session t;
    daemon_session_open(&t, args, 1);
    cone_scan s;
    cone_scan_make(&s, "slabs", test_seed(0xc0de, 1));
    const int roi[6] = {4, 6, 3, 40, 37, 41};
    memcpy(s.spec.cone->roi, roi, sizeof roi);
    unsigned char skipped[N_PROJ] = {0};
    skipped[5] = skipped[77] = 1;
    send_scan(t.c, &s, skipped);
    const rtomo_event *ev = daemon_wait_event(&t.in, "missing_projections",
                                              NULL, "slabs", 0);
    ck_assert_int_eq(ev->index, 5);
    ck_assert_msg(strstr(ev->message, "2 of 120"), "%s", ev->message);
    rtomo_cone_geometry g;
    float *ref = engine_fdk(&s, skipped, &g);
    check_slices(&t.in, "slabs", &g, ref, N_PROJ - 2, 1);
#ifndef CONE_ON_GPU
    /* engine.workers splits the CPU backend; on CUDA a worker is a GPU. */
    ev = daemon_find_event(&t.in, "scan_started", NULL, "slabs");
    ck_assert_msg(ev && strstr(ev->message, "z-slabs"), "%s",
                  ev ? ev->message : "no scan_started");
#endif
    json_t *o = final_outcome(t.c, "slabs");
    ck_assert_str_eq(json_string_value(json_object_get(o, "state")),
                     "complete");
    ck_assert_int_eq(outcome_int(o, "missing"), 2);
    json_decref(o);
    free(ref);
    cone_scan_free(&s);
    daemon_session_close(&t);
}
END_TEST

/* A sender that goes quiet after 60 of 120 projections: the idle timeout
 * ends the scan, and what came is reconstructed (the daemon's default
 * scans.incomplete), the missing projections reported, the scan marked
 * incomplete. */
START_TEST(idle_timeout_reconstructs_what_came)
{
    const char *args[] = {BACKEND_ARGS "--set", "scans.idle_timeout_ms=1000",
                          NULL};
    daemon_session t;
    daemon_session_open(&t, args, 1);
    cone_scan s;
    cone_scan_make(&s, "quiet", test_seed(0xc0de, 6));
    unsigned char skipped[N_PROJ];
    for (int p = 0; p < N_PROJ; p++)
        skipped[p] = p >= 60;
    send_opening(t.c, &s, NULL, 60);
    daemon_wait_event(&t.in, "scan_ending", "idle_timeout", "quiet", 0);
    rtomo_cone_geometry g;
    float *ref = engine_fdk(&s, skipped, &g);
    check_slices(&t.in, "quiet", &g, ref, 60, 1);
    const rtomo_event *ev = daemon_wait_event(&t.in, "scan_complete",
                                              "idle_timeout", "quiet", 0);
    ck_assert_msg(strstr(ev->message, "60 projections missing"), "%s",
                  ev->message);
    json_t *o = final_outcome(t.c, "quiet");
    ck_assert_int_eq(outcome_int(o, "missing"), 60);
    ck_assert(json_is_true(json_object_get(o, "incomplete")));
    json_decref(o);
    free(ref);
    cone_scan_free(&s);
    daemon_session_close(&t);
}
END_TEST

/* h5py's view of a cone-beam scan's file: the z-slices are the stack,
 * equal to the published ones (argv[2], float32 raw), each slice's z index
 * its detector_row, the geometry among the parameters. */
static const char *const volume_checker =
    "import sys, h5py, numpy as np\n"
    "f = h5py.File(sys.argv[1], 'r')\n"
    "e = f['entry']\n"
    "def s(v): return v.decode() if isinstance(v, bytes) else str(v)\n"
    "d = e['data/data'][()]\n"
    "n = int(sys.argv[3])\n"
    "assert d.shape == (n, n, n), d.shape\n"
    "pub = np.fromfile(sys.argv[2], dtype='<f4').reshape(n, n, n)\n"
    "assert np.array_equal(d, pub)\n"
    "assert list(e['data/detector_row'][()]) == list(range(n))\n"
    "p = e['reconstruction/parameters']\n"
    "assert s(p['beam'][()]) == 'cone'\n"
    "assert float(p['source_to_axis'][()]) == 200.0\n"
    "assert list(p['volume'][()]) == [n, n, n]\n"
    "assert e['sample/rotation_angle'].shape == (int(sys.argv[4]),)\n"
    "assert int(e.attrs['complete']) == 1\n";

/* With output.hdf5.directory the scan's z-slices make its NeXus file. */
START_TEST(volume_file)
{
    char dir[256], set[320], path[300], raw[300], cmd[1400];
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/rtomo-cone-XXXXXX", tmp ? tmp : "/tmp");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(set, sizeof set, "output.hdf5.directory=%s", dir);
    const char *args[] = {BACKEND_ARGS "--set", set, NULL};
    daemon_session t;
    daemon_session_open(&t, args, 1);
    cone_scan s;
    cone_scan_make(&s, "vol", test_seed(0xc0de, 7));
    send_scan(t.c, &s, NULL);
    daemon_wait_images(&t.in, RTOMO_TOPIC_SLICE, "vol", VOL);
    daemon_wait_event(&t.in, "output_file", "complete", "vol", 0);
    snprintf(path, sizeof path, "%s/vol.h5", dir);
    snprintf(raw, sizeof raw, "%s/vol.raw", dir);
    FILE *out = fopen(raw, "wb");
    ck_assert_ptr_nonnull(out);
    for (int k = 0; k < VOL; k++) {
        const daemon_image *im = daemon_find_image(&t.in, RTOMO_TOPIC_SLICE,
                                                   "vol", -1, k);
        ck_assert(fwrite(im->data, 1, im->size, out) == im->size);
    }
    fclose(out);
    if (system("/usr/bin/python3 -c 'import h5py' 2>/dev/null") != 0) {
        printf("no h5py: the file is not read back\n");
        ck_assert(access(path, R_OK) == 0);
    } else {
        snprintf(cmd, sizeof cmd, "%s/check.py", dir);
        out = fopen(cmd, "w");
        ck_assert_ptr_nonnull(out);
        fputs(volume_checker, out);
        fclose(out);
        snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s/check.py' '%s' '%s' "
                 "%d %d", dir, path, raw, VOL, N_PROJ);
        ck_assert_msg(system(cmd) == 0, "the h5py check of %s failed", path);
    }
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
    cone_scan_free(&s);
    daemon_session_close(&t);
}
END_TEST

/* The image of scan `id` at z index k of iteration `iteration`, or
 * NULL. */
static const daemon_image *find_iterate(const daemon_inbox *in,
                                        const char *id, int k, int iteration)
{
    for (int i = 0; i < in->n_images; i++) {
        const daemon_image *im = &in->images[i];
        if (strcmp(im->h.topic, RTOMO_TOPIC_SLICE) == 0 &&
            strcmp(im->h.scan, id) == 0 && im->h.index == k &&
            im->h.iteration == iteration)
            return im;
    }
    return NULL;
}

/* The engine's own SIRT of the scan's line integrals (all projections)
 * from its FDK volume `x` (the result goes there). */
static void engine_solve(const cone_scan *s, const rtomo_cone_geometry *g,
                         int iterations, float *x)
{
    const int n = s->spec.geometry.n_proj;
    rtomo_engine_options opt;
    rtomo_engine_options_init(&opt);
    opt.backend = RTOMO_BACKEND_CPU;
    opt.cpu_threads = 2;
    rtomo_error err;
    rtomo_iter *it = rtomo_cone_iter_create(g, &opt, &err);
    ck_assert_msg(it != NULL, "%s", err.message);
    float *sino = malloc(sizeof(float) * s->frame * (size_t)n);
    ck_assert_ptr_nonnull(sino);
    for (int p = 0; p < n; p++)
        line_integrals(s, p, sino + s->frame * (size_t)p);
    rtomo_iter_options o;
    rtomo_iter_options_init(&o);
    o.method = RTOMO_ITER_SIRT;
    o.iterations = iterations;
    rtomo_iter_result res;
    ck_assert_msg(rtomo_iter_solve(it, sino, 1, x, 1, &o, &res, &err) ==
                  RTOMO_OK, "%s", err.message);
    rtomo_iter_destroy(it);
    free(sino);
}

/* The engine's own SIRT of the projections not `skipped`, in their
 * order, from `x` (the FDK of the same ones; the result goes there). */
static void engine_solve_subset(const cone_scan *s,
                                const rtomo_cone_geometry *g,
                                const unsigned char *skipped, int iterations,
                                float *x)
{
    const int n = s->spec.geometry.n_proj;
    double *angles = malloc(sizeof(double) * (size_t)n);
    float *sino = malloc(sizeof(float) * s->frame * (size_t)n);
    ck_assert(angles && sino);
    int k = 0;
    for (int p = 0; p < n; p++)
        if (!skipped[p]) {
            angles[k] = rtomo_cone_angle(g, p);
            line_integrals(s, p, sino + s->frame * (size_t)k);
            k++;
        }
    rtomo_cone_geometry sub = *g;
    sub.n_proj = k;
    sub.angles = angles;
    rtomo_engine_options opt;
    rtomo_engine_options_init(&opt);
    opt.backend = RTOMO_BACKEND_CPU;
    opt.cpu_threads = 2;
    rtomo_error err;
    rtomo_iter *it = rtomo_cone_iter_create(&sub, &opt, &err);
    ck_assert_msg(it != NULL, "%s", err.message);
    rtomo_iter_options o;
    rtomo_iter_options_init(&o);
    o.method = RTOMO_ITER_SIRT;
    o.iterations = iterations;
    rtomo_iter_result res;
    ck_assert_msg(rtomo_iter_solve(it, sino, 1, x, 1, &o, &res, &err) ==
                  RTOMO_OK, "%s", err.message);
    rtomo_iter_destroy(it);
    free(sino);
    free(angles);
}

/* SIRT with every third projection missing: the solve takes the 2/3 that
 * came (FDK's one-turn and short-scan rules do not apply to the pair) and
 * equals the engine's solve of those. */
START_TEST(sirt_with_projections_missing)
{
    daemon_session t;
    daemon_session_open(&t, backend_args, 1);
    cone_scan s;
    cone_scan_make_sized(&s, "sirt-missing", test_seed(0xc0de, 9), 48, 40, 32,
                         1.0);
    s.spec.given |= RTOMO_SPEC_HAS_METHOD | RTOMO_SPEC_HAS_ITERATIONS;
    s.spec.method.method = RTOMO_METHOD_SIRT;
    s.spec.method.iterations = 3;
    unsigned char skipped[40] = {0};
    for (int p = 1; p < 40; p += 3)
        skipped[p] = 1;
    send_scan(t.c, &s, skipped);
    daemon_wait_event(&t.in, "scan_complete", NULL, "sirt-missing", 0);
    ck_assert_ptr_null(daemon_find_event(&t.in, "error", NULL,
                                         "sirt-missing"));
    rtomo_cone_geometry g;
    float *x = engine_fdk(&s, skipped, &g);
    engine_solve_subset(&s, &g, skipped, 3, x);
    const size_t pixels = 32 * 32;
    double worst = 0.0;
    for (int k = 0; k < 32; k++) {
        const daemon_image *fin = find_iterate(&t.in, "sirt-missing", k, 3);
        ck_assert_msg(fin && fin->h.final, "slice %d: no final iterate", k);
        worst = fmax(worst, test_rel_l2(fin->data, x + pixels * (size_t)k,
                                        pixels));
    }
    printf("sirt, 13 of 40 projections missing: final slices against the "
           "engine's solve of the others: relative L2 %.2e\n", worst);
    ck_assert_msg(worst <= SOLVE_L2, "relative L2 %g", worst);
    free(x);
    cone_scan_free(&s);
    daemon_session_close(&t);
}
END_TEST

/* reconstruction.method "sirt": the FDK slices first (not final), the
 * iterate of iteration 2, the final one of iteration 4, equal to the
 * engine's own solve from its FDK volume. */
START_TEST(sirt_after_fdk)
{
    daemon_session t;
    daemon_session_open(&t, backend_args, 1);
    cone_scan s;
    cone_scan_make_sized(&s, "sirt", test_seed(0xc0de, 5), 48, 40, 32, 1.0);
    s.spec.given |= RTOMO_SPEC_HAS_METHOD | RTOMO_SPEC_HAS_ITERATIONS |
                    RTOMO_SPEC_HAS_PUBLISH_EVERY;
    s.spec.method.method = RTOMO_METHOD_SIRT;
    s.spec.method.iterations = 4;
    s.spec.method.publish_every = 2;
    send_scan(t.c, &s, NULL);
    const rtomo_event *ev = daemon_wait_event(&t.in, "scan_started", NULL,
                                              "sirt", 0);
    ck_assert_msg(strstr(ev->message, "method: sirt after fdk, 4 iterations "
                         "from the fdk volume, published progressively"),
                  "%s", ev->message);
    /* Where the solve runs: the GPUs on CUDA (PROTOCOL.md 3.13), nothing
     * on the CPU. */
#ifdef CONE_ON_GPU
    ck_assert_msg(strstr(ev->message, "progressively, on GPU"), "%s",
                  ev->message);
#else
    ck_assert_msg(!strstr(ev->message, "GPU"), "%s", ev->message);
#endif
    rtomo_cone_geometry g;
    float *x = engine_fdk(&s, NULL, &g);
    check_slices(&t.in, "sirt", &g, x, 40, 0);
    daemon_wait_images(&t.in, RTOMO_TOPIC_SLICE, "sirt", 3 * 32);
    engine_solve(&s, &g, 4, x);
    const size_t pixels = 32 * 32;
    double worst = 0.0;
    for (int k = 0; k < 32; k++) {
        const daemon_image *mid = find_iterate(&t.in, "sirt", k, 2);
        const daemon_image *fin = find_iterate(&t.in, "sirt", k, 4);
        ck_assert_msg(mid && fin, "slice %d: iterates missing", k);
        ck_assert_str_eq(mid->h.method, "sirt");
        ck_assert(!mid->h.final && fin->h.final);
        ck_assert(isfinite(fin->h.residual) && fin->h.residual > 0);
        worst = fmax(worst, test_rel_l2(fin->data, x + pixels * (size_t)k,
                                        pixels));
    }
    printf("sirt: final slices against the engine's solve: relative L2 "
           "%.2e\n", worst);
    ck_assert_msg(worst <= SOLVE_L2, "relative L2 %g", worst);
    daemon_wait_event(&t.in, "scan_complete", NULL, "sirt", 0);
    free(x);
    cone_scan_free(&s);
    daemon_session_close(&t);
}
END_TEST

/* An abort during a long solve: the scan ends aborted at the iteration in
 * progress, nothing after the FDK slices is published. */
START_TEST(abort_stops_the_solve)
{
    daemon_session t;
    daemon_session_open(&t, backend_args, 1);
    cone_scan s;
    cone_scan_make_sized(&s, "long", test_seed(0xc0de, 8), 48, 40, 32, 1.0);
    s.spec.given |= RTOMO_SPEC_HAS_METHOD | RTOMO_SPEC_HAS_ITERATIONS;
    s.spec.method.method = RTOMO_METHOD_CGLS;
    s.spec.method.iterations = 10000;
    send_scan(t.c, &s, NULL);
    daemon_wait_images(&t.in, RTOMO_TOPIC_SLICE, "long", 32);
    json_decref(daemon_request(t.c, "{\"cmd\": \"abort\", \"scan\": "
                                    "\"long\"}"));
    daemon_wait_event(&t.in, "scan_aborted", "aborted", "long", 0);
    json_t *o = final_outcome(t.c, "long");
    ck_assert_str_eq(json_string_value(json_object_get(o, "state")),
                     "aborted");
    json_decref(o);
    /* Whatever was on its way is in; nothing but FDK slices came. */
    daemon_inbox_pump(&t.in, 200);
    for (int i = 0; i < t.in.n_images; i++)
        ck_assert_int_eq(t.in.images[i].h.iteration, 0);
    cone_scan_free(&s);
    daemon_session_close(&t);
}
END_TEST

/* A begin of the standard set-up with `extra` members before "cone" and
 * `cone` as the cone object's extra members. */
static void send_begin(rtomo_client *c, const char *id, const char *extra,
                       const char *cone)
{
    char header[1024];
    snprintf(header, sizeof header, "{\"protocol\": 1, \"type\": "
             "\"scan_begin\", \"scan\": \"%s\", \"detector\": {\"width\": 64, "
             "\"height\": 64}, \"projections\": 120%s, \"beam\": \"cone\", "
             "\"cone\": {\"source_to_axis\": 200, \"source_to_detector\": "
             "400, \"pitch\": [1.6, 1.6]%s}}", id, extra, cone);
    daemon_send_header(c, header);
}

static void expect_reject(daemon_inbox *in, const char *id,
                          const char *reason, const char *words)
{
    const rtomo_event *ev = daemon_wait_event(in, "rejected", reason, id, 0);
    ck_assert_msg(strstr(ev->message, words), "%s: \"%s\" lacks \"%s\"", id,
                  ev->message, words);
}

START_TEST(bad_setups_rejected)
{
    daemon_session t;
    daemon_session_open(&t, backend_args, 1);
    send_begin(t.c, "short", ", \"angle_step\": 1.5",
               ", \"volume\": [48, 48, 48]");
    expect_reject(&t.in, "short", "bad_geometry", "short scan");
    send_begin(t.c, "axis", ", \"axis\": 31.5", ", \"volume\": [48, 48, 48]");
    expect_reject(&t.in, "axis", "bad_field", "\"axis\"");
    send_begin(t.c, "clamp", ", \"reconstruction\": {\"method\": \"cgls\", "
               "\"nonnegative\": true}", ", \"volume\": [48, 48, 48]");
    expect_reject(&t.in, "clamp", "bad_field", "reconstruction.nonnegative");
    send_begin(t.c, "fov", "", ", \"volume\": [200, 200, 48], "
               "\"roi\": [0, 0, 0, 10, 10, 48]");
    expect_reject(&t.in, "fov", "bad_geometry", "field of view");
    send_begin(t.c, "voxel", "", ", \"volume\": [48, 48, 48], "
               "\"voxel\": -1");
    expect_reject(&t.in, "voxel", "bad_field", "cone.voxel");
    /* 2048 x 2048 x 16384 voxels of 1 um: 256 GiB. */
    send_begin(t.c, "huge", "", ", \"volume\": [2048, 2048, 16384], "
               "\"voxel\": 0.001");
    expect_reject(&t.in, "huge", "over_budget", "cone-beam scan");
    /* A projection's own angle: FDK takes scan_begin's. */
    cone_scan s;
    cone_scan_make(&s, "angled", test_seed(0xc0de, 2));
    rtomo_error err;
    ck_assert(rtomo_client_send_scan_begin(t.c, &s.spec, &err) == RTOMO_OK);
    send_frame(t.c, &s, RTOMO_MSG_PROJECTION, 0, s.proj, 12.0);
    expect_reject(&t.in, "angled", "bad_field", "\"angle\"");
    json_decref(daemon_request(t.c, "{\"cmd\": \"abort\", \"scan\": "
                                    "\"angled\"}"));
    daemon_wait_event(&t.in, "scan_aborted", NULL, "angled", 0);
    cone_scan_free(&s);
    daemon_session_close(&t);
}
END_TEST

/* An abort while the projections come: aborted, every accepted frame
 * dropped; the next scan is reconstructed as usual. */
START_TEST(abort_then_next_scan)
{
    daemon_session t;
    daemon_session_open(&t, backend_args, 1);
    cone_scan s;
    cone_scan_make(&s, "ab", test_seed(0xc0de, 3));
    send_opening(t.c, &s, NULL, 40);
    rtomo_error err;
    ck_assert(rtomo_client_wait_for_scan(t.c, "ab", 45, 10000, &err) ==
              RTOMO_OK);
    json_decref(daemon_request(t.c, "{\"cmd\": \"abort\", \"scan\": "
                                    "\"ab\"}"));
    daemon_wait_event(&t.in, "scan_aborted", "aborted", "ab", 0);
    json_t *o = final_outcome(t.c, "ab");
    ck_assert_str_eq(json_string_value(json_object_get(o, "state")),
                     "aborted");
    ck_assert_int_eq(outcome_int(o, "frames"), 45);
    ck_assert_int_eq(outcome_int(o, "dropped"), 45);
    ck_assert_int_eq(outcome_int(o, "images"), 0);
    json_decref(o);
    ck_assert_int_eq(daemon_count_images(&t.in, RTOMO_TOPIC_SLICE, "ab"), 0);
    cone_scan next;
    cone_scan_make(&next, "next", test_seed(0xc0de, 4));
    send_scan(t.c, &next, NULL);
    rtomo_cone_geometry g;
    float *ref = engine_fdk(&next, NULL, &g);
    check_slices(&t.in, "next", &g, ref, N_PROJ, 1);
    free(ref);
    cone_scan_free(&next);
    cone_scan_free(&s);
    daemon_session_close(&t);
}
END_TEST

#ifdef CONE_ON_GPU
/* A split pair against one slab: the slabs' constants round differently
 * and the sums come in another order (test_cuda_cone's SLAB_SOLVE_BOUND
 * for SIRT and CGLS); against the CPU pair, its FMA and order
 * differences carried through the iterations (SOLVE_CPU_BOUND there). */
#define SPLIT_SOLVE_L2 1e-4
#define SPLIT_CPU_L2 1e-3
#define SPLIT_ITERATIONS 5

/* The solve's scan: CGLS from zero (so FDK, whose GPU kernel the
 * autotuner picks per daemon, does not enter the comparison). */
static void split_scan_make(cone_scan *s, const char *id)
{
    cone_scan_make_sized(s, id, test_seed(0xc0de, 10), 48, 40, 32, 1.0);
    s->spec.given |= RTOMO_SPEC_HAS_METHOD | RTOMO_SPEC_HAS_ITERATIONS |
                     RTOMO_SPEC_HAS_WARM_START;
    s->spec.method.method = RTOMO_METHOD_CGLS;
    s->spec.method.iterations = SPLIT_ITERATIONS;
    s->spec.method.warm_start = 0;
}

/* Run the scan through a daemon with `args` and return its final volume
 * (malloc'd); *note gets scan_started's message, *gpus status's
 * scan.method.gpus while it acquires (a new reference). */
static float *solve_through(const char *const *args, const char *id,
                            char *note, size_t note_size, json_t **gpus)
{
    daemon_session t;
    daemon_session_open(&t, args, 1);
    cone_scan s;
    split_scan_make(&s, id);
    send_opening(t.c, &s, NULL, 10);
    const rtomo_event *ev = daemon_wait_event(&t.in, "scan_started", NULL,
                                              id, 0);
    snprintf(note, note_size, "%s", ev->message);
    json_t *reply = daemon_status(t.c);     /* "scan": the acquiring one */
    json_t *scan = json_object_get(reply, "scan");
    ck_assert_str_eq(json_string_value(json_object_get(scan, "id")), id);
    json_t *method = json_object_get(scan, "method");
    *gpus = json_object_get(method, "gpus");
    ck_assert_msg(json_is_array(*gpus), "status of %s: no method.gpus", id);
    json_incref(*gpus);
    json_decref(reply);
    for (int p = 10; p < s.spec.geometry.n_proj; p++)
        send_frame(t.c, &s, RTOMO_MSG_PROJECTION, p,
                   s.proj + s.frame * (size_t)p, NAN);
    rtomo_error err;
    ck_assert(rtomo_client_send_end(t.c, RTOMO_MSG_SCAN_END, id, &err) ==
              RTOMO_OK);
    daemon_wait_event(&t.in, "scan_complete", NULL, id, 0);
    ck_assert_ptr_null(daemon_find_event(&t.in, "error", NULL, id));
    const size_t pixels = 32 * 32;
    float *x = malloc(sizeof(float) * pixels * 32);
    ck_assert_ptr_nonnull(x);
    for (int k = 0; k < 32; k++) {
        const daemon_image *fin = find_iterate(&t.in, id, k,
                                               SPLIT_ITERATIONS);
        ck_assert_msg(fin && fin->h.final, "%s slice %d: no final iterate",
                      id, k);
        ck_assert_str_eq(fin->h.method, "cgls");
        memcpy(x + pixels * (size_t)k, fin->data, pixels * sizeof(float));
    }
    cone_scan_free(&s);
    daemon_session_close(&t);
    return x;
}

/* The worst relative L2 of a's 32 slices against b's. */
static double worst_slice_l2(const float *a, const float *b)
{
    double worst = 0.0;
    for (int k = 0; k < 32; k++)
        worst = fmax(worst, test_rel_l2(a + 1024 * (size_t)k,
                                        b + 1024 * (size_t)k, 1024));
    return worst;
}

/* The engine's CGLS of every projection from zero on the CPU. */
static float *cpu_solve(void)
{
    cone_scan s;
    split_scan_make(&s, "cpu");
    rtomo_cone_geometry g;
    float *x = engine_fdk(&s, NULL, &g);    /* for g; x zeroed below */
    const int n = s.spec.geometry.n_proj;
    rtomo_engine_options opt;
    rtomo_engine_options_init(&opt);
    opt.backend = RTOMO_BACKEND_CPU;
    opt.cpu_threads = 2;
    rtomo_error err;
    rtomo_iter *it = rtomo_cone_iter_create(&g, &opt, &err);
    ck_assert_msg(it != NULL, "%s", err.message);
    float *sino = malloc(sizeof(float) * s.frame * (size_t)n);
    ck_assert_ptr_nonnull(sino);
    for (int p = 0; p < n; p++)
        line_integrals(&s, p, sino + s.frame * (size_t)p);
    rtomo_iter_options o;
    rtomo_iter_options_init(&o);
    o.method = RTOMO_ITER_CGLS;
    o.iterations = SPLIT_ITERATIONS;
    rtomo_iter_result res;
    memset(x, 0, sizeof(float) * 32 * 32 * 32);
    ck_assert_msg(rtomo_iter_solve(it, sino, 1, x, 0, &o, &res, &err) ==
                  RTOMO_OK, "%s", err.message);
    rtomo_iter_destroy(it);
    free(sino);
    cone_scan_free(&s);
    return x;
}

/* ", on GPU 0" or ", on GPUs 0,1,..." for the first n devices. */
static void gpus_clause(int n, char *out, size_t size)
{
    size_t used = (size_t)snprintf(out, size, ", on GPU%s ",
                                   n > 1 ? "s" : "");
    for (int i = 0; i < n && used < size; i++)
        used += (size_t)snprintf(out + used, size - used, "%s%d",
                                 i ? "," : "", i);
}

/* The solve's pair over every GPU of the daemon (2+ visible), or over two
 * slabs of one GPU by the test hook; then an unsplit daemon (GPU 0, no
 * hook) and the CPU engine. */
START_TEST(solve_split_over_gpus)
{
    const int visible = rtomo_cuda_device_count();
    const int n = visible < RTOMO_MAX_DEVICES ? visible : RTOMO_MAX_DEVICES;
    if (n >= 2) {
        printf("solve split: the pair over the daemon's %d GPUs\n", n);
    } else {
        printf("solve split: one GPU, the pair in 2 slabs on it "
               "(RTOMO_CONE_SF_SPLIT=2 in the daemon's environment)\n");
        setenv("RTOMO_CONE_SF_SPLIT", "2", 1);
    }
    const char *all[] = {BACKEND_ARGS NULL};
    char note[RTOMO_REASON_MAX], expect[64];
    json_t *gpus;
    float *split = solve_through(all, "split", note, sizeof note, &gpus);
    unsetenv("RTOMO_CONE_SF_SPLIT");
    printf("scan_started: %s\n", note);
    gpus_clause(n, expect, sizeof expect);
    ck_assert_msg(strstr(note, expect), "\"%s\" lacks \"%s\"", note, expect);
    ck_assert_int_eq((int)json_array_size(gpus), n);
    for (int i = 0; i < n; i++)
        ck_assert_int_eq(json_integer_value(json_array_get(gpus, i)), i);
    json_decref(gpus);
    const char *one[] = {BACKEND_ARGS "--set", "engine.devices=[0]", NULL};
    float *whole = solve_through(one, "unsplit", note, sizeof note, &gpus);
    gpus_clause(1, expect, sizeof expect);
    ck_assert_msg(strstr(note, expect), "\"%s\" lacks \"%s\"", note, expect);
    ck_assert_int_eq((int)json_array_size(gpus), 1);
    json_decref(gpus);
    float *cpu = cpu_solve();
    const double e_whole = worst_slice_l2(split, whole);
    const double e_cpu = worst_slice_l2(split, cpu);
    printf("cgls, %d iterations from zero: split against one slab on GPU "
           "0: relative L2 %.2e (bound %.0e); against the CPU engine "
           "%.2e (bound %.0e; one slab against it %.2e)\n", SPLIT_ITERATIONS,
           e_whole, SPLIT_SOLVE_L2, e_cpu, SPLIT_CPU_L2,
           worst_slice_l2(whole, cpu));
    ck_assert_msg(e_whole <= SPLIT_SOLVE_L2, "split vs unsplit %g", e_whole);
    ck_assert_msg(e_cpu <= SPLIT_CPU_L2, "split vs CPU %g", e_cpu);
    free(split);
    free(whole);
    free(cpu);
}
END_TEST

/* A solve whose vectors do not fit limits.device_mb beside its FDK plan
 * streams through the GPU (its vectors in host memory): scan_started
 * and status say so, and the volume is the resident solve's. */
START_TEST(solve_streamed_through_the_gpu)
{
    cone_scan s;
    split_scan_make(&s, "sizes");
    rtomo_cone_geometry g;
    rtomo_proto_cone_geometry(&s.spec, &g);
    size_t fdk_host, fdk_device, solve[RTOMO_MAX_DEVICES];
    rtomo_error err;
    ck_assert(rtomo_cone_bytes(&g, RTOMO_BACKEND_CUDA, &fdk_host, &fdk_device,
                               &err) == RTOMO_OK);
    ck_assert(rtomo_cone_iter_bytes(&g, RTOMO_BACKEND_CUDA, 1, 0, NULL, solve,
                                    NULL, &err) == RTOMO_OK);
    cone_scan_free(&s);
    /* Room beside the FDK plan for half the resident solve. */
    char limit[64];
    snprintf(limit, sizeof limit, "limits.device_mb=%.6f",
             (double)(fdk_device + solve[0] / 2) / (1 << 20));
    printf("solve streamed: resident needs %zu bytes beside the FDK plan's "
           "%zu; %s\n", solve[0], fdk_device, limit);
    const char *tight[] = {BACKEND_ARGS "--set", "engine.devices=[0]",
                           "--set", limit, NULL};
    char note[RTOMO_REASON_MAX];
    json_t *gpus;
    float *streamed = solve_through(tight, "streamed", note, sizeof note,
                                    &gpus);
    json_decref(gpus);
    printf("scan_started: %s\n", note);
    ck_assert_msg(strstr(note, ", streamed in slabs of "),
                  "\"%s\" does not say the solve streams", note);
    const char *roomy[] = {BACKEND_ARGS "--set", "engine.devices=[0]", NULL};
    float *whole = solve_through(roomy, "resident", note, sizeof note, &gpus);
    json_decref(gpus);
    ck_assert_ptr_null(strstr(note, "streamed"));
    const double e = worst_slice_l2(streamed, whole);
    printf("cgls, %d iterations from zero: streamed against resident: "
           "relative L2 %.2e (bound %.0e)\n", SPLIT_ITERATIONS, e,
           SPLIT_SOLVE_L2);
    ck_assert_msg(e <= SPLIT_SOLVE_L2, "streamed vs resident %g", e);
    free(streamed);
    free(whole);
}
END_TEST
#endif

int main(void)
{
#ifdef CONE_ON_GPU
    if (rtomo_cuda_device_count() < 1) {
        printf("no CUDA device: the daemon's GPU FDK is not tested\n");
        return 77;
    }
    const char *name = "cuda_daemon_cone";
#else
    const char *name = "daemon_cone";
#endif
    const TTest *tests[] = {
        fdk_through_the_daemon, slabs_roi_and_missing, bad_setups_rejected,
        abort_then_next_scan, sirt_after_fdk, sirt_with_projections_missing,
        idle_timeout_reconstructs_what_came, volume_file,
        abort_stops_the_solve,
#ifdef CONE_ON_GPU
        solve_split_over_gpus, solve_streamed_through_the_gpu,
#endif
    };
    return daemon_run_tests(name, tests,
                            (int)(sizeof tests / sizeof tests[0]), 120);
}
