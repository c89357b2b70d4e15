/*
 * daemon_harness.c — the rtomod integration tests' shared pieces (see
 * daemon_harness.h).
 */
#include "config.h"

#include <check.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check_run.h"
#include "daemon_harness.h"
#include "rtomo_keys.h"
#include "rtomo_sim.h"

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return 1e3 * (double)t.tv_sec + 1e-6 * (double)t.tv_nsec;
}

/* ------------------------------------------------------------ process ---- */

/* The test daemon's arguments: CPU backend, 2 threads, 50 ms telemetry,
 * then the extra ones. */
static void test_args(const char *const *extra_args, const char **args)
{
    static const char *const base[] = {"--backend", "cpu", "--cpu-threads",
                                       "2", "--set",
                                       "telemetry.interval_ms=50"};
    int n = 0;
    for (; n < 6; n++)
        args[n] = base[n];
    for (int i = 0; extra_args && extra_args[i] && n < 63; i++)
        args[n++] = extra_args[i];
    args[n] = NULL;
}

void daemon_start(daemon_proc *d, const char *const *extra_args)
{
    char path[1024], error[512];
    daemon_process_default_path(path, sizeof path);
    const char *args[64];
    test_args(extra_args, args);
    ck_assert_msg(daemon_process_start(d, path, args, DAEMON_TIMEOUT_MS, error,
                                       sizeof error) == 0,
                  "cannot start %s: %s", path, error);
}

void daemon_spawn(daemon_proc *d, const char *const *extra_args)
{
    char path[1024], error[512];
    daemon_process_default_path(path, sizeof path);
    const char *args[64];
    test_args(extra_args, args);
    ck_assert_msg(daemon_process_spawn(d, path, args, error, sizeof error) ==
                  0, "cannot start %s: %s", path, error);
}

int daemon_signal_and_wait(daemon_proc *d, int sig, int timeout_ms)
{
    return daemon_process_stop(d, sig, timeout_ms);
}

void daemon_stop(daemon_proc *d)
{
    int status = daemon_signal_and_wait(d, SIGTERM, DAEMON_TIMEOUT_MS);
    ck_assert_msg(status == 0, "rtomod exit status %d after SIGTERM", status);
}

double daemon_resident_mb(const daemon_proc *d)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)d->pid);
    FILE *f = fopen(path, "r");
    double kb = -1024;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %lf", &kb) == 1)
            break;
    if (f)
        fclose(f);
    return kb / 1024.0;
}

void daemon_assert_memory_growth(double before, double after, double bound_mb,
                                 const char *what)
{
    printf("resident: %.1f MB before, %.1f MB after %s (growth bound "
           "%.0f MB)\n", before, after, what, bound_mb);
#if defined(__SANITIZE_ADDRESS__)
    printf("(AddressSanitizer build: not asserted)\n");
#else
    ck_assert_msg(after - before < bound_mb, "rtomod kept %.1f MB more after "
                  "%s (bound %.0f MB)", after - before, what, bound_mb);
#endif
}

/* ------------------------------------------------------------- client ---- */

rtomo_client *daemon_control_client(const daemon_proc *d)
{
    rtomo_client_options opt;
    rtomo_client_options_init(&opt);
    opt.control = d->control;
    opt.control_timeout_ms = 10000;
    rtomo_error err;
    rtomo_client *c = rtomo_client_open(&opt, &err);
    ck_assert_msg(c, "control client: %s", err.message);
    return c;
}

rtomo_client *daemon_connect(const daemon_proc *d, int connections)
{
    rtomo_client_options opt;
    rtomo_client_options_init(&opt);
    opt.ingest = d->ingest;
    opt.publish = d->publish;
    opt.control = d->control;
    opt.connections = connections;
    opt.control_timeout_ms = 10000;
    rtomo_error err;
    rtomo_client *c = rtomo_client_open(&opt, &err);
    ck_assert_msg(c, "client: %s", err.message);
    daemon_subscribe_all(c);
    return c;
}

void daemon_subscribe_all(rtomo_client *c)
{
    rtomo_error err;
    ck_assert(rtomo_client_subscribe(c, "", &err) == RTOMO_OK);
    /* PUB/SUB drops what is published before the subscription arrives:
     * a telemetry message proves that it has. */
    double deadline = now_ms() + DAEMON_TIMEOUT_MS;
    int live = 0;
    while (!live && now_ms() < deadline) {
        rtomo_published m = {0};
        if (rtomo_client_receive(c, &m, 100, &err) == RTOMO_OK)
            live = m.kind == RTOMO_PUBLISHED_TELEMETRY;
        rtomo_published_clear(&m);
    }
    ck_assert_msg(live, "no telemetry from rtomod's publish socket");
}

json_t *daemon_request(rtomo_client *c, const char *request_json)
{
    json_error_t jerr;
    json_t *request = json_loads(request_json, 0, &jerr);
    ck_assert_msg(request, "test request is not JSON: %s", jerr.text);
    json_t *reply = NULL;
    rtomo_error err;
    rtomo_client_request(c, request, &reply, &err);
    json_decref(request);
    ck_assert_msg(reply, "no reply to %s: %s", request_json, err.message);
    return reply;
}

json_t *daemon_status(rtomo_client *c)
{
    json_t *reply = daemon_request(c, "{\"cmd\": \"status\"}");
    ck_assert(json_is_true(json_object_get(reply, "ok")));
    return reply;
}

long daemon_counter(rtomo_client *c, const char *name)
{
    json_t *status = daemon_status(c);
    json_t *v = json_object_get(json_object_get(status, "counters"), name);
    ck_assert_msg(json_is_integer(v), "status has no counter %s", name);
    long n = (long)json_integer_value(v);
    json_decref(status);
    return n;
}

long daemon_reject_counter(rtomo_client *c, const char *reason)
{
    json_t *status = daemon_status(c);
    json_t *v = json_object_get(
        json_object_get(json_object_get(status, "counters"), "rejects"),
        reason);
    ck_assert_msg(json_is_integer(v), "status has no reject counter %s",
                  reason);
    long n = (long)json_integer_value(v);
    json_decref(status);
    return n;
}

void daemon_wait_counter(rtomo_client *c, const char *name, long value)
{
    double deadline = now_ms() + DAEMON_TIMEOUT_MS;
    long n;
    while ((n = daemon_counter(c, name)) < value && now_ms() < deadline) {
        struct timespec pause = {0, 20 * 1000 * 1000};
        nanosleep(&pause, NULL);
    }
    ck_assert_msg(n >= value, "counter %s stayed at %ld, expected %ld", name,
                  n, value);
}

/* -------------------------------------------------------------- inbox ---- */

void daemon_inbox_init(daemon_inbox *in, rtomo_client *client)
{
    memset(in, 0, sizeof *in);
    in->client = client;
}

void daemon_inbox_free(daemon_inbox *in)
{
    for (int i = 0; i < in->n_images; i++)
        free(in->images[i].data);
    free(in->images);
    free(in->events);
    json_decref(in->last_telemetry);
    memset(in, 0, sizeof *in);
}

static void keep_image(daemon_inbox *in, const rtomo_published *m)
{
    if (in->n_images == in->cap_images) {
        in->cap_images = in->cap_images ? 2 * in->cap_images : 64;
        in->images = realloc(in->images,
                             sizeof *in->images * (size_t)in->cap_images);
        ck_assert(in->images);
    }
    daemon_image *im = &in->images[in->n_images++];
    im->h = m->image;
    im->size = m->payload_size;
    im->source = m->source;
    im->data = malloc(m->payload_size ? m->payload_size : 1);
    ck_assert(im->data);
    if (m->payload_size)
        memcpy(im->data, m->payload, m->payload_size);
}

static void keep_event(daemon_inbox *in, const rtomo_event *ev)
{
    if (in->n_events == in->cap_events) {
        in->cap_events = in->cap_events ? 2 * in->cap_events : 64;
        in->events = realloc(in->events,
                             sizeof *in->events * (size_t)in->cap_events);
        ck_assert(in->events);
    }
    in->events[in->n_events++] = *ev;
}

int daemon_inbox_pump(daemon_inbox *in, int timeout_ms)
{
    rtomo_published m = {0};
    rtomo_error err;
    rtomo_status st = rtomo_client_receive(in->client, &m, timeout_ms, &err);
    if (st == RTOMO_E_UNAVAILABLE)
        return 0;
    ck_assert_msg(st == RTOMO_OK, "bad published message: %s", err.message);
    switch (m.kind) {
    case RTOMO_PUBLISHED_IMAGE:
        keep_image(in, &m);
        break;
    case RTOMO_PUBLISHED_EVENT:
        keep_event(in, &m.event);
        break;
    case RTOMO_PUBLISHED_TELEMETRY: {
        json_t *windows = json_object_get(json_object_get(m.json, "queues"),
                                          "windows");
        if (json_integer_value(windows) > in->peak_windows)
            in->peak_windows = (long)json_integer_value(windows);
        in->telemetry++;
        json_decref(in->last_telemetry);
        in->last_telemetry = json_incref(m.json);
        break;
    }
    default:
        ck_abort_msg("unexpected topic %s", m.topic);
    }
    rtomo_published_clear(&m);
    return 1;
}

static int image_matches(const daemon_image *im, const char *topic,
                         const char *scan)
{
    return strcmp(im->h.topic, topic) == 0 &&
           (!scan || strcmp(im->h.scan, scan) == 0);
}

int daemon_count_images(const daemon_inbox *in, const char *topic,
                        const char *scan)
{
    int n = 0;
    for (int i = 0; i < in->n_images; i++)
        n += image_matches(&in->images[i], topic, scan);
    return n;
}

int daemon_wait_images(daemon_inbox *in, const char *topic, const char *scan,
                       int count)
{
    double deadline = now_ms() + DAEMON_TIMEOUT_MS;
    int n;
    while ((n = daemon_count_images(in, topic, scan)) < count &&
           now_ms() < deadline)
        daemon_inbox_pump(in, 100);
    ck_assert_msg(n >= count, "%d %s images of scan %s arrived, expected %d",
                  n, topic, scan ? scan : "(any)", count);
    return n;
}

const daemon_image *daemon_find_image(const daemon_inbox *in,
                                      const char *topic, const char *scan,
                                      int64_t frame, int index)
{
    for (int i = 0; i < in->n_images; i++) {
        const daemon_image *im = &in->images[i];
        if (image_matches(im, topic, scan) && im->h.frame == frame &&
            im->h.index == index)
            return im;
    }
    return NULL;
}

void daemon_assert_image_stats(const daemon_image *im, double rel_tol)
{
    int is_u16 = im->h.dtype == RTOMO_DTYPE_U16;
    /* A depth map's "no plane" pixels are no depth (PROTOCOL.md 6.1). */
    int depth = strcmp(im->h.topic, RTOMO_TOPIC_DEPTH) == 0;
    size_t n = im->size / (is_u16 ? sizeof(uint16_t) : sizeof(float));
    double lo = INFINITY, hi = -INFINITY, sum = 0.0;
    size_t counted = 0;
    for (size_t i = 0; i < n; i++) {
        double v = is_u16 ? ((const uint16_t *)im->data)[i]
                          : ((const float *)im->data)[i];
        if (depth && v == RTOMO_SBDX_DEPTH_NONE)
            continue;
        lo = fmin(lo, v);
        hi = fmax(hi, v);
        sum += v;
        counted++;
    }
    lo = counted ? lo : 0.0;
    hi = counted ? hi : 0.0;
    double mean = counted ? sum / (double)counted : 0.0;
    double tol = rel_tol * fmax(fabs(lo), fabs(hi));
    ck_assert_msg(fabs(im->h.min - lo) <= tol && fabs(im->h.max - hi) <= tol &&
                  fabs(im->h.mean - mean) <= tol,
                  "%s %lld/%d of %s: header min %g max %g mean %g, payload "
                  "%g %g %g", im->h.topic, (long long)im->h.frame, im->h.index,
                  im->h.scan, im->h.min, im->h.max, im->h.mean, lo, hi, mean);
}

static int event_matches(const rtomo_event *ev, const char *event,
                         const char *reason, const char *scan)
{
    return strcmp(ev->event, event) == 0 &&
           (!reason || strcmp(ev->reason, reason) == 0) &&
           (!scan || strcmp(ev->scan, scan) == 0);
}

const rtomo_event *daemon_find_event(const daemon_inbox *in, const char *event,
                                     const char *reason, const char *scan)
{
    for (int i = 0; i < in->n_events; i++)
        if (event_matches(&in->events[i], event, reason, scan))
            return &in->events[i];
    return NULL;
}

const rtomo_event *daemon_wait_event(daemon_inbox *in, const char *event,
                                     const char *reason, const char *scan,
                                     int after)
{
    double deadline = now_ms() + DAEMON_TIMEOUT_MS;
    int i = after;
    for (;;) {
        for (; i < in->n_events; i++)
            if (event_matches(&in->events[i], event, reason, scan))
                return &in->events[i];
        ck_assert_msg(now_ms() < deadline, "no event %s (reason %s, scan %s)",
                      event, reason ? reason : "any", scan ? scan : "any");
        daemon_inbox_pump(in, 100);
    }
}

/* ----------------------------------------------------------- session ---- */

void daemon_session_open(daemon_session *t, const char *const *args,
                         int connections)
{
    daemon_start(&t->d, args);
    t->c = daemon_connect(&t->d, connections);
    daemon_inbox_init(&t->in, t->c);
}

void daemon_session_close(daemon_session *t)
{
    daemon_inbox_free(&t->in);
    rtomo_client_close(t->c);
    daemon_stop(&t->d);
}

int daemon_run_tests(const char *name, const TTest *const *tests,
                     int n_tests, int timeout_s)
{
    Suite *s = suite_create(name);
    TCase *tc = tcase_create(name);
    tcase_set_timeout(tc, timeout_s);
    for (int i = 0; i < n_tests; i++)
        tcase_add_test(tc, tests[i]);
    suite_add_tcase(s, tc);
    return rtomo_check_run(s);
}

/* ----------------------------------------------------- phantom scans ---- */

/* The scan's frames: darks, flats, and n_made projections at
 * angle_start + p * angle_step. */
static void make_frames(daemon_scan *s, int n_made, uint64_t seed)
{
    const rtomo_fbp_geometry *g = &s->spec.geometry;
    int width = g->det_width, height = g->det_height;
    int n_darks = s->spec.n_darks, n_flats = s->spec.n_flats;
    s->n_projections = n_made;
    s->frame_samples = (size_t)width * (size_t)height;
    size_t n = s->frame_samples;
    s->darks = malloc(sizeof(uint16_t) * n * (size_t)(n_darks + 1));
    s->flats = malloc(sizeof(uint16_t) * n * (size_t)(n_flats + 1));
    s->projections = malloc(sizeof(uint16_t) * n * (size_t)n_made);
    float *line = malloc(sizeof(float) * n);
    ck_assert(s->darks && s->flats && s->projections && line);
    rtomo_camera cam;
    rtomo_camera_init(&cam);
    cam.noise = 1;
    cam.seed = seed;
    for (int i = 0; i < n_darks; i++)
        rtomo_camera_dark(&cam, n, s->darks + n * (size_t)i);
    for (int i = 0; i < n_flats; i++)
        rtomo_camera_flat(&cam, n, s->flats + n * (size_t)i);
    rtomo_phantom ph;
    rtomo_phantom_init(&ph, width, height);
    if (isfinite(g->axis))
        ph.axis = g->axis;
    else if (isfinite(s->true_axis))
        ph.axis = s->true_axis;
    for (int p = 0; p < n_made; p++) {
        if (s->axis_jump_at > 0 && p == s->axis_jump_at)
            ph.axis = s->axis_after;
        rtomo_phantom_project(&ph, g->angle_start + p * g->angle_step, line);
        rtomo_camera_expose(&cam, line, n, s->projections + n * (size_t)p);
    }
    free(line);
}

/* The spec of a scan of the phantom: n_proj projections over 180 degrees
 * from a random start angle. */
static void scan_spec(daemon_scan *s, const char *id, int width, int height,
                      int n_proj, int n_darks, int n_flats, uint64_t *seed)
{
    memset(s, 0, sizeof *s);
    s->true_axis = NAN;
    rtomo_scan_spec_init(&s->spec);
    snprintf(s->spec.scan, sizeof s->spec.scan, "%s", id);
    rtomo_fbp_geometry *g = &s->spec.geometry;
    g->det_width = width;
    g->det_height = height;
    g->n_proj = n_proj;
    g->angle_step = M_PI / n_proj;
    g->angle_start = rtomo_random_uniform(seed) * g->angle_step;
    s->spec.dtype = RTOMO_DTYPE_U16;
    s->spec.n_darks = n_darks;
    s->spec.n_flats = n_flats;
}

void daemon_scan_make(daemon_scan *s, const char *id, int width, int height,
                      int n_proj, int n_darks, int n_flats, uint64_t seed)
{
    scan_spec(s, id, width, height, n_proj, n_darks, n_flats, &seed);
    make_frames(s, n_proj, seed);
}

void daemon_scan_make_auto_axis(daemon_scan *s, const char *id, int width,
                                int height, int n_proj, double degrees,
                                double axis, int n_flats, uint64_t seed)
{
    scan_spec(s, id, width, height, n_proj, 1, n_flats, &seed);
    s->spec.geometry.angle_step = degrees * M_PI / 180.0 / n_proj;
    s->spec.axis_auto = 1;
    s->true_axis = axis;
    make_frames(s, n_proj, seed);
}

void daemon_scan_make_continuous(daemon_scan *s, const char *id, int width,
                                 int height, int n_proj, int every, int total,
                                 int n_flats, uint64_t seed)
{
    scan_spec(s, id, width, height, n_proj, 0, n_flats, &seed);
    s->spec.continuous = 1;
    s->spec.window_every = every;
    make_frames(s, total, seed);
}

void daemon_scan_make_axis_jump(daemon_scan *s, const char *id, int width,
                                int height, int n_proj, int every, int total,
                                double axis, int jump_at, double axis_after,
                                uint64_t seed)
{
    scan_spec(s, id, width, height, n_proj, 1, 2, &seed);
    s->spec.continuous = 1;
    s->spec.window_every = every;
    s->spec.axis_auto = 1;
    s->true_axis = axis;
    s->axis_jump_at = jump_at;
    s->axis_after = axis_after;
    make_frames(s, total, seed);
}

void daemon_scan_select_rows(daemon_scan *s, const int *rows, int n)
{
    rtomo_slice_selection *sel = &s->spec.slices;
    free(sel->rows);
    sel->rows = malloc(sizeof(int) * (size_t)n);
    ck_assert_ptr_nonnull(sel->rows);
    memcpy(sel->rows, rows, sizeof(int) * (size_t)n);
    sel->kind = RTOMO_SLICES_LIST;
    sel->n_rows = n;
    s->spec.given |= RTOMO_SPEC_HAS_SLICES;
}

void daemon_scan_free(daemon_scan *s)
{
    rtomo_scan_spec_clear(&s->spec);
    free(s->darks);
    free(s->flats);
    free(s->projections);
    free(s->flats_after);
    memset(s, 0, sizeof *s);
}

void daemon_send_header(rtomo_client *c, const char *header)
{
    rtomo_error err;
    ck_assert_msg(rtomo_client_send_raw(c, 0, header, strlen(header), 1, NULL,
                                        0, &err) == RTOMO_OK, "%s",
                  err.message);
}

void daemon_send_begin(rtomo_client *c, const daemon_scan *s)
{
    rtomo_error err;
    ck_assert_msg(rtomo_client_send_scan_begin(c, &s->spec, &err) == RTOMO_OK,
                  "scan_begin: %s", err.message);
}

static void frame_header(const daemon_scan *s, rtomo_msg_type type, int index,
                         rtomo_frame_header *f)
{
    memset(f, 0, sizeof *f);
    f->type = type;
    snprintf(f->scan, sizeof f->scan, "%s", s->spec.scan);
    f->index = index;
    f->dtype = RTOMO_DTYPE_U16;
    f->ndim = 2;
    f->shape[0] = s->spec.geometry.det_height;
    f->shape[1] = s->spec.geometry.det_width;
    f->angle = NAN;
    f->axis_shift = NAN;
}

static void send_frame(rtomo_client *c, const daemon_scan *s,
                       rtomo_msg_type type, int index, const uint16_t *data)
{
    rtomo_frame_header f;
    frame_header(s, type, index, &f);
    rtomo_error err;
    ck_assert_msg(rtomo_client_send_frame(c, &f, data,
                                          s->frame_samples * sizeof(uint16_t),
                                          &err) == RTOMO_OK,
                  "%s %d: %s", rtomo_msg_type_name(type), index, err.message);
}

void daemon_send_fields(rtomo_client *c, const daemon_scan *s)
{
    for (int i = 0; i < s->spec.n_darks; i++)
        send_frame(c, s, RTOMO_MSG_DARK, i, s->darks + s->frame_samples * i);
    for (int i = 0; i < s->spec.n_flats; i++)
        send_frame(c, s, RTOMO_MSG_FLAT, i, s->flats + s->frame_samples * i);
}

void daemon_scan_add_flats_after(daemon_scan *s, int n, double drift,
                                 uint64_t seed)
{
    ck_assert_int_ge(s->spec.n_flats, 1);
    const size_t samples = s->frame_samples;
    s->flats_after = malloc(sizeof(uint16_t) * samples * (size_t)n);
    ck_assert_ptr_nonnull(s->flats_after);
    const uint16_t dark = s->spec.n_darks ? s->darks[0] : 0;
    for (size_t i = 0; i < samples; i++) {
        const double open = (double)s->flats[i] - dark;
        const double v = dark + open * (1.0 + drift * (2.0 *
                                        rtomo_random_uniform(&seed) - 1.0));
        for (int k = 0; k < n; k++)
            s->flats_after[samples * (size_t)k + i] =
                (uint16_t)fmin(65535.0, fmax(0.0, round(v)));
    }
    s->spec.n_flats_after = n;
}

void daemon_send_flats_after(rtomo_client *c, const daemon_scan *s)
{
    for (int i = 0; i < s->spec.n_flats_after; i++)
        send_frame(c, s, RTOMO_MSG_FLAT, s->spec.n_flats + i,
                   s->flats_after + s->frame_samples * (size_t)i);
}

void daemon_send_projection(rtomo_client *c, const daemon_scan *s, int p)
{
    send_frame(c, s, RTOMO_MSG_PROJECTION, p,
               s->projections + s->frame_samples * (size_t)p);
}

void daemon_send_projection_as(rtomo_client *c, const daemon_scan *s, int p,
                               int index, double degrees)
{
    rtomo_frame_header f;
    frame_header(s, RTOMO_MSG_PROJECTION, index, &f);
    f.angle = degrees;
    char *header = rtomo_proto_encode_frame(&f);
    ck_assert(header);
    rtomo_error err;
    ck_assert_msg(rtomo_client_send_raw(c, 0, header, strlen(header), 2,
                                        s->projections +
                                            s->frame_samples * (size_t)p,
                                        s->frame_samples * sizeof(uint16_t),
                                        &err) == RTOMO_OK,
                  "projection %d as %d: %s", p, index, err.message);
    free(header);
}

void daemon_send_projection_via(rtomo_client *c, const daemon_scan *s, int p,
                                int connection)
{
    rtomo_frame_header f;
    frame_header(s, RTOMO_MSG_PROJECTION, p, &f);
    char *header = rtomo_proto_encode_frame(&f);
    ck_assert(header);
    rtomo_error err;
    ck_assert_msg(rtomo_client_send_raw(c, connection, header, strlen(header),
                                        2, s->projections +
                                               s->frame_samples * (size_t)p,
                                        s->frame_samples * sizeof(uint16_t),
                                        &err) == RTOMO_OK,
                  "projection %d: %s", p, err.message);
    free(header);
}

void daemon_send_end(rtomo_client *c, const daemon_scan *s)
{
    rtomo_error err;
    ck_assert_msg(rtomo_client_send_end(c, RTOMO_MSG_SCAN_END, s->spec.scan,
                                        &err) == RTOMO_OK,
                  "scan_end: %s", err.message);
}

rtomo_client *daemon_connect_all(const daemon_proc *d, int n,
                                 const char *ingest)
{
    char ingests[512] = "", publish[512] = "";
    for (int i = 0; i < n; i++) {
        snprintf(ingests + strlen(ingests), sizeof ingests - strlen(ingests),
                 "%s%s", i ? "," : "", d[i].ingest);
        snprintf(publish + strlen(publish), sizeof publish - strlen(publish),
                 "%s%s", i ? "," : "", d[i].publish);
    }
    rtomo_client_options opt;
    rtomo_client_options_init(&opt);
    opt.ingest = ingest ? ingest : ingests;
    opt.publish = publish;
    opt.control = d[0].control;
    opt.control_timeout_ms = 10000;
    rtomo_error err;
    rtomo_client *c = rtomo_client_open(&opt, &err);
    ck_assert_msg(c, "client: %s", err.message);
    ck_assert_int_eq(rtomo_client_publishers(c), n);
    ck_assert(rtomo_client_subscribe(c, "", &err) == RTOMO_OK);
    unsigned live = 0;
    for (int tries = 0; tries < DAEMON_TIMEOUT_MS / 100 &&
                        live != (1u << n) - 1; tries++) {
        rtomo_published m = {0};
        if (rtomo_client_receive(c, &m, 100, &err) == RTOMO_OK &&
            m.kind == RTOMO_PUBLISHED_TELEMETRY)
            live |= 1u << m.source;
        rtomo_published_clear(&m);
    }
    ck_assert_msg(live == (1u << n) - 1, "telemetry from daemons %#x only",
                  live);
    return c;
}

void daemon_make_key_pair(const char *dir, const char *name,
                          char *public_path, char *secret_path)
{
    char base[160], z85[RTOMO_KEY_Z85_SIZE];
    snprintf(base, sizeof base, "%s/%s", dir, name);
    rtomo_error err;
    ck_assert_msg(rtomo_keys_generate(base, 0, z85, &err) == RTOMO_OK,
                  "keygen %s: %s", base, err.message);
    if (public_path)
        snprintf(public_path, 256, "%s.key", base);
    if (secret_path)
        snprintf(secret_path, 256, "%s.key_secret", base);
}

const daemon_image *daemon_slice_from(const daemon_inbox *in, int source,
                                      const char *scan, int row)
{
    for (int i = 0; i < in->n_images; i++) {
        const daemon_image *im = &in->images[i];
        if (im->source == source && im->h.slice == row &&
            strcmp(im->h.topic, RTOMO_TOPIC_SLICE) == 0 &&
            strcmp(im->h.scan, scan) == 0)
            return im;
    }
    return NULL;
}

int daemon_count_slices_from(const daemon_inbox *in, int source,
                             const char *scan)
{
    int n = 0;
    for (int i = 0; i < in->n_images; i++)
        n += in->images[i].source == source &&
             strcmp(in->images[i].h.topic, RTOMO_TOPIC_SLICE) == 0 &&
             strcmp(in->images[i].h.scan, scan) == 0;
    return n;
}

/* One frame of detector rows [first, first + count) only. */
static void send_frame_rows(rtomo_client *c, const daemon_scan *s,
                            rtomo_msg_type type, int index,
                            const uint16_t *data, int first, int count)
{
    rtomo_frame_header f;
    frame_header(s, type, index, &f);
    f.rows_first = first;
    f.rows_count = count;
    const size_t width = (size_t)s->spec.geometry.det_width;
    rtomo_error err;
    ck_assert_msg(rtomo_client_send_frame(c, &f, data + width * (size_t)first,
                                          width * (size_t)count *
                                              sizeof(uint16_t),
                                          &err) == RTOMO_OK,
                  "%s %d (rows %d..%d): %s", rtomo_msg_type_name(type), index,
                  first, first + count - 1, err.message);
}

void daemon_send_scan_rows(rtomo_client *c, const daemon_scan *s, int first,
                           int count)
{
    const size_t n = s->frame_samples;
    daemon_send_begin(c, s);
    for (int i = 0; i < s->spec.n_darks; i++)
        send_frame_rows(c, s, RTOMO_MSG_DARK, i, s->darks + n * i, first,
                        count);
    for (int i = 0; i < s->spec.n_flats; i++)
        send_frame_rows(c, s, RTOMO_MSG_FLAT, i, s->flats + n * i, first,
                        count);
    for (int p = 0; p < s->spec.geometry.n_proj; p++)
        send_frame_rows(c, s, RTOMO_MSG_PROJECTION, p,
                        s->projections + n * (size_t)p, first, count);
    daemon_send_end(c, s);
}

void daemon_send_scan(rtomo_client *c, const daemon_scan *s)
{
    daemon_send_begin(c, s);
    daemon_send_fields(c, s);
    for (int p = 0; p < s->spec.geometry.n_proj; p++)
        daemon_send_projection(c, s, p);
    daemon_send_flats_after(c, s);
    daemon_send_end(c, s);
}

void daemon_check_against_engine(daemon_inbox *in, const daemon_scan *s,
                                 int n_rows)
{
    daemon_check_against_engine_tol(in, s, n_rows, 1e-5);
}

void daemon_check_against_engine_tol(daemon_inbox *in, const daemon_scan *s,
                                     int n_rows, double rel_tol)
{
    int width = s->spec.geometry.det_width;
    size_t pixels = (size_t)width * (size_t)width;
    int *rows = malloc(sizeof(int) * (size_t)n_rows);
    ck_assert(rows);
    for (int i = 0; i < n_rows; i++)
        rows[i] = i;
    daemon_wait_images(in, RTOMO_TOPIC_SLICE, s->spec.scan, n_rows);
    float *ref = daemon_reference_slices(s, rows, n_rows, NULL, NULL);
    for (int i = 0; i < n_rows; i++) {
        const daemon_image *im = daemon_find_image(in, RTOMO_TOPIC_SLICE,
                                                   s->spec.scan, -1, i);
        ck_assert_msg(im, "slice %d of %s is missing", i, s->spec.scan);
        double diff = test_max_abs_diff(im->data, ref + pixels * i, pixels);
        double most = test_max_abs(ref + pixels * i, pixels);
        ck_assert_msg(diff <= rel_tol * most, "slice %d of %s differs from the "
                      "engine's by %.3g (%.3g of its largest magnitude)", i,
                      s->spec.scan, diff, most > 0 ? diff / most : INFINITY);
    }
    free(ref);
    free(rows);
}

/* The CPU engine's slices of `rows` from projections first..last that
 * have received[p] set (all when received is NULL), projection p in slot
 * p mod n_proj at its own angle. */
static float *reference(const daemon_scan *s, const int *rows, int n_rows,
                        int first, int last, const unsigned char *received,
                        const int *roi)
{
    rtomo_fbp_geometry g = s->spec.geometry;
    rtomo_fbp *plan = test_create_cpu(&g, 1);
    rtomo_error err;
    size_t n = s->frame_samples;
    for (int i = 0; i < s->spec.n_darks; i++)
        ck_assert(rtomo_fbp_add_dark(plan, s->darks + n * (size_t)i,
                                     RTOMO_DTYPE_U16, &err) == RTOMO_OK);
    for (int i = 0; i < s->spec.n_flats; i++)
        ck_assert(rtomo_fbp_add_flat(plan, s->flats + n * (size_t)i,
                                     RTOMO_DTYPE_U16, &err) == RTOMO_OK);
    for (int p = first; p <= last; p++)
        if (!received || received[p])
            ck_assert(rtomo_fbp_add_projection(
                          plan, p % g.n_proj, s->projections + n * (size_t)p,
                          RTOMO_DTYPE_U16, g.angle_start + p * g.angle_step,
                          NAN, &err) == RTOMO_OK);
    for (int i = 0; i < s->spec.n_flats_after; i++)
        ck_assert(rtomo_fbp_add_flat_after(plan, s->flats_after + n * (size_t)i,
                                           RTOMO_DTYPE_U16, &err) == RTOMO_OK);
    if (s->spec.n_flats_after > 0)
        ck_assert(rtomo_fbp_interpolate_flats(plan, &err) == RTOMO_OK);
    if (g.rings != RTOMO_RINGS_OFF)
        ck_assert(rtomo_fbp_remove_rings(plan, &err) == RTOMO_OK);
    if (roi)
        ck_assert(rtomo_fbp_set_roi(plan, roi[0], roi[1], roi[2], roi[3],
                                    &err) == RTOMO_OK);
    const rtomo_fbp_geometry *pg = rtomo_fbp_geometry_of(plan);
    size_t pixels = (size_t)pg->roi_width * (size_t)pg->roi_height;
    float *out = malloc(sizeof(float) * pixels * (size_t)n_rows);
    ck_assert(out);
    test_reconstruct(plan, rows, n_rows, out);
    rtomo_fbp_destroy(plan);
    return out;
}

float *daemon_reference_slices(const daemon_scan *s, const int *rows,
                               int n_rows, const unsigned char *received,
                               const int *roi)
{
    return reference(s, rows, n_rows, 0, s->spec.geometry.n_proj - 1,
                     received, roi);
}

float *daemon_reference_window(const daemon_scan *s, const int *rows,
                               int n_rows, int last, const int *roi)
{
    ck_assert_int_lt(last, s->n_projections);
    return reference(s, rows, n_rows, last - s->spec.geometry.n_proj + 1,
                     last, NULL, roi);
}

int *daemon_shuffled(int n, uint64_t *seed)
{
    int *p = malloc(sizeof(int) * (size_t)n);
    ck_assert(p);
    for (int i = 0; i < n; i++)
        p[i] = i;
    for (int i = n - 1; i > 0; i--) {
        int j = (int)(rtomo_random_uniform(seed) * (i + 1));
        int t = p[i];
        p[i] = p[j];
        p[j] = t;
    }
    return p;
}
