/*
 * test_daemon_output.c — rtomod's HDF5 files (output.hdf5.*) through the
 * real daemon (CPU backend, loopback) and real files, read back with h5py
 * (Debian's python3-h5py, run as /usr/bin/python3: the python3 on PATH
 * may be another one):
 *
 *   - a phantom scan becomes one NeXus file whose slice stack equals,
 *     bit for bit, the slices published over ZeroMQ, with the NeXus
 *     classes, the processing parameters, the configuration and the
 *     scan_begin header as received, marked complete;
 *   - a directory that cannot be written: an output_error event, the scan
 *     still completes, status counts the failed file;
 *   - a disk that refuses the volume: the daemon runs under a file size
 *     limit (RLIMIT_FSIZE, set before it starts: the kernel then refuses
 *     to grow its files with EFBIG, as a full disk refuses with ENOSPC,
 *     through the same path).  Shows: the refusal is an output_error
 *     event (file_too_large), the scan completes, the daemon lives, and
 *     the file left behind opens, marked incomplete with the reason;
 *   - an aborted scan, and one cut short by SIGTERM, leave files marked
 *     incomplete (complete = 0, the reason, the slices missing);
 *   - a disk slower than the reconstruction (a 1 MB queue for 4 MB
 *     slices handed over eight at a time): with the default
 *     when_full = drop the slices that find the queue full are dropped,
 *     said once by an output_dropped event, counted in status, and the
 *     file is marked incomplete with the slices it misses; with block
 *     every slice is written;
 *   - an SBDX stream: composite, depth and planes appended per frame,
 *     equal to what was published;
 *   - an iterative scan (reconstruction.method sirt): the file holds each
 *     slice's final iterate, not the iterates published between.
 *
 * Skipped (77) when /usr/bin/python3 has no h5py.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon_harness.h"
#include "rtomo_sim.h"

#define PYTHON "/usr/bin/python3"

/* The checks in Python, on argv: file, mode, then per mode. */
static const char *const checker =
    "import sys, json, h5py, numpy as np\n"
    "path, mode = sys.argv[1], sys.argv[2]\n"
    "f = h5py.File(path, 'r')\n"
    "e = f['entry']\n"
    "def s(v): return v.decode() if isinstance(v, bytes) else str(v)\n"
    "assert s(f.attrs['default']) == 'entry'\n"
    "assert s(e.attrs['NX_class']) == 'NXentry', e.attrs['NX_class']\n"
    "assert s(e['definition'][()]) == 'NXtomoproc'\n"
    "assert s(e['data'].attrs['NX_class']) == 'NXdata'\n"
    "assert s(e['data'].attrs['signal']) == 'data'\n"
    "r = e['reconstruction']\n"
    "assert s(r.attrs['NX_class']) == 'NXprocess'\n"
    "cfg = json.loads(s(r['configuration/data'][()]))\n"
    "assert 'output' in cfg and 'reconstruction' in cfg\n"
    "begin = json.loads(s(r['scan_begin/data'][()]))\n"
    "assert begin['type'] == 'scan_begin', begin\n"
    "assert begin['scan'] == s(e['title'][()])\n"
    "p = r['parameters']\n"
    "assert s(p['filter'][()]) == 'ram-lak'\n"
    "n_proj = int(p['projections'][()])\n"
    "assert e['sample/rotation_angle'].shape == (n_proj,)\n"
    "complete = int(e.attrs['complete'])\n"
    "status = s(e.attrs['status'])\n"
    "reason = s(e.attrs['reason'])\n"
    "print(path, mode, 'complete', complete, status, repr(reason))\n"
    "if mode == 'complete':\n"
    "    ref = np.fromfile(sys.argv[3], dtype='<f4')\n"
    "    d = e['data/data']\n"
    "    assert d.dtype == np.float32\n"
    "    n, h, w = d.shape\n"
    "    assert d.chunks == (1, h, w), d.chunks\n"
    "    assert np.array_equal(d[...].ravel(), ref), 'data differ'\n"
    "    assert complete == 1 and status == 'complete', (complete, status)\n"
    "    assert int(e.attrs['slices_written']) == n\n"
    "    assert e['data/slice_written'][...].all()\n"
    "    rows = [int(x) for x in sys.argv[4].split(',')]\n"
    "    assert list(e['data/detector_row'][...]) == rows\n"
    "    assert abs(float(e.attrs['rotation_axis']) - float(p['axis'][()])) < 1e-9\n"
    "else:\n"
    "    assert complete == 0 and status == 'incomplete', (complete, status)\n"
    "    assert sys.argv[3] in reason, (sys.argv[3], reason)\n"
    "    if 'data' in e['data']:\n"
    "        written = e['data/slice_written'][...]\n"
    "        assert int(e.attrs['slices_written']) == int(written.sum())\n"
    "        if not written.all():\n"
    "            missing = list(np.nonzero(written == 0)[0])\n"
    "            assert list(e.attrs['missing_slices']) == missing\n"
    "print('ok')\n";

static char dir[256];

static void make_dir(void)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/rtomo-output-XXXXXX", tmp ? tmp : "/tmp");
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void remove_dir(const char *path)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "chmod -R u+w '%s' 2>/dev/null; rm -rf '%s'",
             path, path);
    ck_assert_int_eq(system(cmd), 0);
}

/* Run the checker; asserts it succeeded. */
static void check_file(const char *file, const char *mode, const char *arg3,
                       const char *arg4)
{
    char script[400], cmd[2000];
    snprintf(script, sizeof script, "%s/check.py", dir);
    FILE *out = fopen(script, "w");
    ck_assert_ptr_nonnull(out);
    fputs(checker, out);
    fclose(out);
    snprintf(cmd, sizeof cmd, PYTHON " '%s' '%s' %s '%s' '%s'", script, file,
             mode, arg3, arg4 ? arg4 : "");
    int rc = system(cmd);
    ck_assert_msg(rc == 0, "the h5py check of %s (%s) failed: %d", file, mode,
                  rc);
}

static void session_with_output(daemon_session *t, const char *directory)
{
    static char set[600];
    snprintf(set, sizeof set, "output.hdf5.directory=%s", directory);
    const char *args[] = {"--set", set, NULL};
    daemon_session_open(t, args, 1);
}

static json_t *output_status(rtomo_client *c)
{
    json_t *status = daemon_status(c);
    json_t *out = json_incref(json_object_get(status, "output"));
    json_decref(status);
    ck_assert(json_is_object(out));
    return out;
}

static long output_figure(rtomo_client *c, const char *name)
{
    json_t *out = output_status(c);
    long v = (long)json_integer_value(json_object_get(out, name));
    json_decref(out);
    return v;
}

START_TEST(file_equals_published)
{
    make_dir();
    daemon_session t;
    session_with_output(&t, dir);
    daemon_scan s;
    daemon_scan_make(&s, "out-a", 64, 6, 90, 2, 2, 0x0a7);
    const int rows[3] = {4, 1, 3};
    daemon_scan_select_rows(&s, rows, 3);
    daemon_send_scan(t.c, &s);
    daemon_wait_images(&t.in, RTOMO_TOPIC_SLICE, "out-a", 3);
    const rtomo_event *ev = daemon_wait_event(&t.in, "output_file", NULL,
                                              "out-a", 0);
    ck_assert_str_eq(ev->reason, "complete");
    /* What was published, in index order, beside the file. */
    char ref[400], file[400];
    snprintf(ref, sizeof ref, "%s/published.f32", dir);
    snprintf(file, sizeof file, "%s/out-a.h5", dir);
    ck_assert_msg(strstr(ev->message, file), "output_file says: %s",
                  ev->message);
    FILE *out = fopen(ref, "wb");
    ck_assert_ptr_nonnull(out);
    char published_rows[64] = "";
    for (int i = 0; i < 3; i++) {
        const daemon_image *im = daemon_find_image(&t.in, RTOMO_TOPIC_SLICE,
                                                   "out-a", -1, i);
        ck_assert_ptr_nonnull(im);
        fwrite(im->data, 1, im->size, out);
        snprintf(published_rows + strlen(published_rows),
                 sizeof published_rows - strlen(published_rows), "%s%d",
                 i ? "," : "", (int)im->h.slice);
    }
    fclose(out);
    /* The file's detector_row says which row each slice is, as the
     * headers did (index order: rows ascending). */
    check_file(file, "complete", ref, published_rows);
    ck_assert_int_eq(output_figure(t.c, "files_written"), 1);
    ck_assert_int_eq(output_figure(t.c, "images_written"), 3);
    ck_assert_int_eq(output_figure(t.c, "files_open"), 0);
    /* A second scan of the same id gets a file of its own. */
    s.spec.geometry.angle_start += 0.0;
    daemon_send_scan(t.c, &s);
    daemon_wait_event(&t.in, "output_file", NULL, "out-a", t.in.n_events);
    char second[400];
    snprintf(second, sizeof second, "%s/out-a-1.h5", dir);
    ck_assert_int_eq(access(second, R_OK), 0);
    daemon_scan_free(&s);
    daemon_session_close(&t);
    remove_dir(dir);
}
END_TEST

/* An iterative scan (SIRT, 6 iterations, every 2nd published): the file
 * holds each slice's final iterate, not its FBP slice nor the iterates
 * between (those are for the live view). */
START_TEST(iterative_final_in_file)
{
    make_dir();
    daemon_session t;
    session_with_output(&t, dir);
    daemon_scan s;
    daemon_scan_make(&s, "out-it", 64, 6, 40, 1, 2, 0x17e4);
    const int rows[3] = {1, 3, 4};
    daemon_scan_select_rows(&s, rows, 3);
    s.spec.method.method = RTOMO_METHOD_SIRT;
    s.spec.method.iterations = 6;
    s.spec.method.publish_every = 2;
    s.spec.given |= RTOMO_SPEC_HAS_METHOD | RTOMO_SPEC_HAS_ITERATIONS |
                    RTOMO_SPEC_HAS_PUBLISH_EVERY;
    daemon_send_scan(t.c, &s);
    daemon_wait_images(&t.in, RTOMO_TOPIC_SLICE, "out-it", 3 * 4);
    const rtomo_event *ev = daemon_wait_event(&t.in, "output_file", NULL,
                                              "out-it", 0);
    ck_assert_str_eq(ev->reason, "complete");
    char ref[400], file[400];
    snprintf(ref, sizeof ref, "%s/final.f32", dir);
    snprintf(file, sizeof file, "%s/out-it.h5", dir);
    FILE *out = fopen(ref, "wb");
    ck_assert_ptr_nonnull(out);
    for (int i = 0; i < 3; i++) {
        const daemon_image *fin = NULL;
        for (int k = 0; k < t.in.n_images; k++) {
            const daemon_image *im = &t.in.images[k];
            if (strcmp(im->h.scan, "out-it") == 0 && im->h.index == i &&
                im->h.final)
                fin = im;
        }
        ck_assert_ptr_nonnull(fin);
        ck_assert_int_eq(fin->h.iteration, 6);
        fwrite(fin->data, 1, fin->size, out);
    }
    fclose(out);
    check_file(file, "complete", ref, "1,3,4");
    /* FBP and final, each written; the iterates between are not. */
    ck_assert_int_eq(output_figure(t.c, "images_written"), 6);
    daemon_scan_free(&s);
    daemon_session_close(&t);
    remove_dir(dir);
}
END_TEST

START_TEST(unwritable_directory)
{
    make_dir();
    char target[400];
    /* Root writes anywhere a mode allows nothing: use a place that no
     * file may be created in for it (proc), else a directory of mode
     * 0555. */
    if (geteuid() == 0) {
        snprintf(target, sizeof target, "/proc/rtomo-output-test");
    } else {
        snprintf(target, sizeof target, "%s/readonly", dir);
        ck_assert_int_eq(mkdir(target, 0555), 0);
    }
    daemon_session t;
    session_with_output(&t, target);
    daemon_scan s;
    daemon_scan_make(&s, "out-b", 48, 2, 60, 1, 1, 0x0b7);
    daemon_send_scan(t.c, &s);
    const rtomo_event *ev = daemon_wait_event(&t.in, "output_error", NULL,
                                              "out-b", 0);
    printf("output_error (%s): %s\n", ev->reason, ev->message);
    ck_assert_msg(strcmp(ev->reason, "permission") == 0 ||
                  strcmp(ev->reason, "no_directory") == 0,
                  "reason %s", ev->reason);
    ev = daemon_wait_event(&t.in, "scan_complete", NULL, "out-b", 0);
    ck_assert_str_eq(ev->reason, "");
    daemon_wait_images(&t.in, RTOMO_TOPIC_SLICE, "out-b", 2);
    ck_assert_int_eq(output_figure(t.c, "files_failed"), 1);
    ck_assert_int_eq(output_figure(t.c, "errors"), 1);
    daemon_scan_free(&s);
    daemon_session_close(&t);
    remove_dir(dir);
}
END_TEST

START_TEST(file_size_limit)
{
    make_dir();
    /* 64 KiB: the file's metadata fits, a volume of 6 slices of 128^2
     * (384 KiB) does not. The daemon inherits the limit; the test's own
     * limit is restored at once. */
    struct rlimit saved, small = {64 * 1024, 0};
    ck_assert_int_eq(getrlimit(RLIMIT_FSIZE, &saved), 0);
    small.rlim_max = saved.rlim_max;
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &small), 0);
    daemon_session t;
    session_with_output(&t, dir);
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &saved), 0);
    daemon_scan s;
    daemon_scan_make(&s, "out-c", 128, 6, 60, 1, 1, 0x0c7);
    daemon_send_scan(t.c, &s);
    const rtomo_event *ev = daemon_wait_event(&t.in, "output_error", NULL,
                                              "out-c", 0);
    printf("output_error (%s): %s\n", ev->reason, ev->message);
    ck_assert_str_eq(ev->reason, "file_too_large");
    daemon_wait_event(&t.in, "scan_complete", NULL, "out-c", 0);
    daemon_wait_images(&t.in, RTOMO_TOPIC_SLICE, "out-c", 6);
    ev = daemon_wait_event(&t.in, "output_file", NULL, "out-c", 0);
    ck_assert_str_eq(ev->reason, "incomplete");
    /* The daemon goes on: a ping, and the status. */
    ck_assert_int_eq(output_figure(t.c, "files_failed"), 1);
    daemon_scan_free(&s);
    daemon_session_close(&t);
    char file[400];
    snprintf(file, sizeof file, "%s/out-c.h5", dir);
    check_file(file, "incomplete", "reserve", NULL);
    remove_dir(dir);
}
END_TEST

/* Eight slices of 1024^2 float32 (4 MB each) handed over in one batch to
 * a queue of 1 MB (an image larger than the queue waits only in an empty
 * one): the first is taken, those behind it find the queue full. */
static void queue_full(const char *when_full, int expect_drops)
{
    make_dir();
    static char set_dir[600], set_when[64];
    snprintf(set_dir, sizeof set_dir, "output.hdf5.directory=%s", dir);
    snprintf(set_when, sizeof set_when, "output.hdf5.when_full=%s", when_full);
    const char *args[] = {"--set", set_dir, "--set", "output.hdf5.queue_mb=1",
                          "--set", set_when, "--set",
                          "reconstruction.batch=8", NULL};
    daemon_session t;
    daemon_session_open(&t, args, 1);
    daemon_scan s;
    daemon_scan_make(&s, "out-q", 1024, 8, 12, 0, 1, 0x0f7);
    daemon_send_scan(t.c, &s);
    daemon_wait_images(&t.in, RTOMO_TOPIC_SLICE, "out-q", 8);
    const rtomo_event *ev = daemon_wait_event(&t.in, "output_file", NULL,
                                              "out-q", 0);
    const long dropped = output_figure(t.c, "images_dropped");
    printf("when_full %s: %ld of 8 slices dropped; output_file (%s): %s\n",
           when_full, dropped, ev->reason, ev->message);
    char file[400];
    snprintf(file, sizeof file, "%s/out-q.h5", dir);
    if (expect_drops) {
        ck_assert_int_gt(dropped, 0);
        ck_assert_str_eq(ev->reason, "incomplete");
        const rtomo_event *d = daemon_find_event(&t.in, "output_dropped",
                                                 "queue_full", "out-q");
        ck_assert_ptr_nonnull(d);
        check_file(file, "incomplete", "dropped", NULL);
    } else {
        ck_assert_int_eq(dropped, 0);
        ck_assert_str_eq(ev->reason, "complete");
        ck_assert_int_eq(output_figure(t.c, "images_written"), 8);
    }
    daemon_scan_free(&s);
    daemon_session_close(&t);
    remove_dir(dir);
}

START_TEST(slow_disk_drops_or_blocks)
{
    queue_full("drop", 1);
    queue_full("block", 0);
}
END_TEST

START_TEST(aborted_and_shutdown_incomplete)
{
    make_dir();
    daemon_session t;
    session_with_output(&t, dir);
    daemon_scan s;
    daemon_scan_make(&s, "out-d", 48, 3, 60, 1, 1, 0x0d7);
    daemon_send_begin(t.c, &s);
    daemon_send_fields(t.c, &s);
    for (int p = 0; p < 20; p++)
        daemon_send_projection(t.c, &s, p);
    daemon_wait_counter(t.c, "accepted", 23);
    json_decref(daemon_request(t.c, "{\"cmd\": \"abort\", \"scan\": \"out-d\"}"));
    daemon_wait_event(&t.in, "scan_aborted", NULL, "out-d", 0);
    const rtomo_event *ev = daemon_wait_event(&t.in, "output_file", NULL,
                                              "out-d", 0);
    ck_assert_str_eq(ev->reason, "incomplete");
    /* A scan that misses projections when SIGTERM comes: reconstructed
     * from what arrived, its file marked incomplete ("shutdown"). */
    daemon_scan s2;
    daemon_scan_make(&s2, "out-e", 48, 3, 60, 1, 1, 0x0e7);
    daemon_send_begin(t.c, &s2);
    daemon_send_fields(t.c, &s2);
    for (int p = 0; p < 30; p++)
        daemon_send_projection(t.c, &s2, p);
    daemon_wait_counter(t.c, "accepted", 23 + 33);
    daemon_scan_free(&s);
    daemon_scan_free(&s2);
    daemon_session_close(&t);
    char file[400];
    snprintf(file, sizeof file, "%s/out-d.h5", dir);
    check_file(file, "incomplete", "aborted", NULL);
    snprintf(file, sizeof file, "%s/out-e.h5", dir);
    check_file(file, "incomplete", "shut down", NULL);
    remove_dir(dir);
}
END_TEST

/* An SBDX stream: composite, depth and (output.hdf5.sbdx_planes) the
 * planes, one row per frame, equal to what was published. */
static const char *const sbdx_checker =
    "import sys, h5py, numpy as np\n"
    "f = h5py.File(sys.argv[1], 'r')\n"
    "e = f['entry']\n"
    "d = e['data']\n"
    "assert d.attrs['signal'] in ('composite', b'composite')\n"
    "n, h, w, p = (int(x) for x in sys.argv[3:7])\n"
    "c = np.fromfile(sys.argv[2] + '.composite', dtype='<f4').reshape(n, h, w)\n"
    "z = np.fromfile(sys.argv[2] + '.depth', dtype='<u2').reshape(n, h, w)\n"
    "pl = np.fromfile(sys.argv[2] + '.planes', dtype='<f4').reshape(n, p, h, w)\n"
    "assert d['composite'].shape == (n, h, w) and d['composite'].maxshape[0] is None\n"
    "assert np.array_equal(d['composite'][...], c)\n"
    "assert d['depth'].dtype == np.uint16 and np.array_equal(d['depth'][...], z)\n"
    "assert np.array_equal(d['planes'][...], pl)\n"
    "assert int(e.attrs['complete']) == 1 and int(e.attrs['frames_written']) == n\n"
    "print('sbdx ok')\n";

START_TEST(sbdx_stream_appended)
{
    make_dir();
    static char set[600];
    snprintf(set, sizeof set, "output.hdf5.directory=%s", dir);
    const char *args[] = {"--set", set, "--set", "output.hdf5.sbdx_planes=true",
                          NULL};
    daemon_session t;
    daemon_session_open(&t, args, 1);
    rtomo_sbdx_spec spec;
    rtomo_sbdx_spec_init(&spec);
    snprintf(spec.scan, sizeof spec.scan, "out-sbdx");
    rtomo_sbdx_geometry *g = &spec.geometry;
    g->holes_x = 10;
    g->holes_y = 8;
    g->det_width = 16;
    g->det_height = 8;
    g->shift_m = 4;
    static const double ratios[3] = {1.5, 2.0, 2.5};
    g->n_planes = 3;
    spec.ratios = malloc(sizeof ratios);
    memcpy(spec.ratios, ratios, sizeof ratios);
    g->ratios = spec.ratios;
    spec.dtype = RTOMO_DTYPE_U8;
    const size_t samples = 10 * 8 * 16 * 8;
    uint8_t *frames = malloc(samples * 3);
    uint64_t seed = 0x5bd;
    for (size_t i = 0; i < samples * 3; i++)
        frames[i] = (uint8_t)(100 + 100 * rtomo_random_uniform(&seed));
    rtomo_error err;
    ck_assert(rtomo_client_send_sbdx_begin(t.c, &spec, &err) == RTOMO_OK);
    for (int k = 0; k < 3; k++) {
        rtomo_frame_header f;
        memset(&f, 0, sizeof f);
        f.type = RTOMO_MSG_SBDX_FRAME;
        snprintf(f.scan, sizeof f.scan, "out-sbdx");
        f.index = k;
        f.dtype = RTOMO_DTYPE_U8;
        f.ndim = 4;
        f.shape[0] = 8;
        f.shape[1] = 10;
        f.shape[2] = 8;
        f.shape[3] = 16;
        f.angle = f.axis_shift = NAN;
        ck_assert(rtomo_client_send_frame(t.c, &f, frames + samples * k,
                                          samples, &err) == RTOMO_OK);
    }
    ck_assert(rtomo_client_send_end(t.c, RTOMO_MSG_SBDX_END, "out-sbdx", &err)
              == RTOMO_OK);
    daemon_wait_event(&t.in, "output_file", "complete", "out-sbdx", 0);
    char base[400], name[420];
    snprintf(base, sizeof base, "%s/published", dir);
    const char *topics[3] = {RTOMO_TOPIC_COMPOSITE, RTOMO_TOPIC_DEPTH,
                             RTOMO_TOPIC_PLANE};
    int w = 0, h = 0;
    for (int k = 0; k < 3; k++) {
        snprintf(name, sizeof name, "%s.%s", base,
                 k == 2 ? "planes" : topics[k]);
        FILE *out = fopen(name, "wb");
        ck_assert_ptr_nonnull(out);
        for (int fr = 0; fr < 3; fr++)
            for (int i = 0; i < (k == 2 ? 3 : 1); i++) {
                const daemon_image *im = daemon_find_image(
                    &t.in, topics[k], "out-sbdx", fr, i);
                ck_assert_ptr_nonnull(im);
                w = im->h.width;
                h = im->h.height;
                fwrite(im->data, 1, im->size, out);
            }
        fclose(out);
    }
    char script[400], cmd[1200];
    snprintf(script, sizeof script, "%s/check_sbdx.py", dir);
    FILE *out = fopen(script, "w");
    ck_assert_ptr_nonnull(out);
    fputs(sbdx_checker, out);
    fclose(out);
    snprintf(cmd, sizeof cmd, PYTHON " '%s' '%s/out-sbdx.h5' '%s' 3 %d %d 3",
             script, dir, base, h, w);
    ck_assert_msg(system(cmd) == 0, "the h5py check of the SBDX file failed");
    free(frames);
    rtomo_sbdx_spec_clear(&spec);
    daemon_session_close(&t);
    remove_dir(dir);
}
END_TEST

int main(void)
{
    if (system(PYTHON " -c 'import h5py' 2>/dev/null") != 0) {
        printf("SKIP: " PYTHON " has no h5py (Debian: python3-h5py)\n");
        return 77;
    }
    const TTest *tests[] = {file_equals_published, iterative_final_in_file,
                            unwritable_directory,
                            file_size_limit, slow_disk_drops_or_blocks,
                            aborted_and_shutdown_incomplete,
                            sbdx_stream_appended};
    return daemon_run_tests("daemon_output", tests,
                            sizeof tests / sizeof tests[0], 120);
}
