/*
 * config.c — rtomod's configuration (see rtomod_config.h).  One table
 * lists every key with its type, range and whether it may change at run
 * time; loading, overriding, validation and the JSON dump all walk that
 * table, so a key is declared once.
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rtomod_config.h"
#include "rtomod_input.h"
#include "rtomod_security.h"

/* ------------------------------------------------------------ enums ---- */

/* An enum type of the configuration: parse a name, name a value.  Values are
 * 0..n-1 and name() answers NULL past the last one. */
typedef struct enum_def {
    int (*parse)(const char *name, int *out);
    const char *(*name)(int value);
} enum_def;

#define ENGINE_ENUM(type, parse_fn, name_fn, last)                          \
    static int parse_##type(const char *s, int *out)                        \
    {                                                                       \
        rtomo_##type v;                                                     \
        if (parse_fn(s, &v) != RTOMO_OK)                                    \
            return -1;                                                      \
        *out = (int)v;                                                      \
        return 0;                                                           \
    }                                                                       \
    static const char *name_##type(int v)                                   \
    {                                                                       \
        return v >= 0 && v <= (int)(last) ? name_fn((rtomo_##type)v) : NULL; \
    }                                                                       \
    static const enum_def enum_##type = {parse_##type, name_##type};

ENGINE_ENUM(backend, rtomo_backend_parse, rtomo_backend_name,
            RTOMO_BACKEND_CUDA)
ENGINE_ENUM(bp_kernel, rtomo_bp_kernel_parse, rtomo_bp_kernel_name,
            RTOMO_BP_HYBRID)
ENGINE_ENUM(window, rtomo_window_parse, rtomo_window_name, RTOMO_WINDOW_HANN)
ENGINE_ENUM(interp, rtomo_interp_parse, rtomo_interp_name, RTOMO_INTERP_NEAREST)
ENGINE_ENUM(fov, rtomo_fov_parse, rtomo_fov_name, RTOMO_FOV_CIRCLE)
ENGINE_ENUM(rings, rtomo_rings_parse, rtomo_rings_name, RTOMO_RINGS_COLUMN_MEAN)
ENGINE_ENUM(method, rtomo_method_parse, rtomo_method_name, RTOMO_METHOD_CGLS)

/* Enums the engine API names nowhere: a table of names, index = value. */
static int parse_in_table(const char *const *table, const char *s, int *out)
{
    for (int i = 0; s && table[i]; i++) {
        if (strcmp(s, table[i]) == 0) {
            *out = i;
            return 0;
        }
    }
    return -1;
}

static const char *const precision_names[] = {"float", "half", NULL};
static const char *const sbdx_method_names[] = {"pixel_centric",
                                                "detector_centric", NULL};

static int parse_precision(const char *s, int *out)
{
    return parse_in_table(precision_names, s, out);
}
static const char *name_precision(int v)
{
    return v >= 0 && v < 2 ? precision_names[v] : NULL;
}
static int parse_sbdx_method(const char *s, int *out)
{
    return parse_in_table(sbdx_method_names, s, out);
}
static const char *name_sbdx_method(int v)
{
    return v >= 0 && v < 2 ? sbdx_method_names[v] : NULL;
}
static int parse_log_level(const char *s, int *out)
{
    rtomod_log_level l;
    if (rtomod_log_level_parse(s, &l) != 0)
        return -1;
    *out = (int)l;
    return 0;
}
static const char *name_log_level(int v)
{
    return v >= 0 && v <= RTOMOD_LOG_DEBUG ? rtomod_log_level_name(v) : NULL;
}

static const enum_def enum_precision = {parse_precision, name_precision};
static const enum_def enum_sbdx_method = {parse_sbdx_method, name_sbdx_method};
static const enum_def enum_log_level = {parse_log_level, name_log_level};

/* scans.incomplete: what becomes of a scan that ends without its end. */
static const char *const incomplete_names[] = {"reconstruct", "abort", NULL};
static int parse_incomplete(const char *s, int *out)
{
    return parse_in_table(incomplete_names, s, out);
}
static const char *name_incomplete(int v)
{
    return v >= 0 && v < 2 ? incomplete_names[v] : NULL;
}
static const enum_def enum_incomplete = {parse_incomplete, name_incomplete};

/* output.hdf5.when_full: what an image finds when the output queue is
 * full. */
static const char *const when_full_names[] = {"drop", "block", NULL};
static int parse_when_full(const char *s, int *out)
{
    return parse_in_table(when_full_names, s, out);
}
static const char *name_when_full(int v)
{
    return v >= 0 && v < 2 ? when_full_names[v] : NULL;
}
static const enum_def enum_when_full = {parse_when_full, name_when_full};

/* --------------------------------------------------- custom values ---- */

typedef int (*custom_parse_fn)(const json_t *v, rtomod_config *cfg,
                               char *why, size_t n);
typedef json_t *(*custom_dump_fn)(const rtomod_config *cfg);

/* Read a JSON integer within [lo, hi]. */
static int json_int_in(const json_t *v, long lo, long hi, int *out)
{
    if (!json_is_integer(v))
        return -1;
    json_int_t i = json_integer_value(v);
    if (i < lo || i > hi)
        return -1;
    *out = (int)i;
    return 0;
}

/* "slices": the protocol's form, shared with scan_begin. */
static int parse_slices(const json_t *v, rtomod_config *cfg, char *why,
                        size_t n)
{
    rtomo_reject_info reject;
    if (rtomo_slice_selection_from_json(v, NULL, &cfg->reconstruction.slices,
                                        &reject) != 0) {
        snprintf(why, n, "%s", reject.message);
        return -1;
    }
    return 0;
}

static json_t *dump_slices(const rtomod_config *cfg)
{
    return rtomo_slice_selection_to_json(&cfg->reconstruction.slices);
}

/* "slices": [row, ...], at most RTOMOD_PREVIEW_MAX rows; [] = the middle
 * selected slice. */
static int parse_preview_rows(const json_t *v, rtomod_config *cfg, char *why,
                              size_t n)
{
    if (!json_is_array(v) || json_array_size(v) > RTOMOD_PREVIEW_MAX) {
        snprintf(why, n, "expected a list of at most %d detector rows",
                 RTOMOD_PREVIEW_MAX);
        return -1;
    }
    int rows[RTOMOD_PREVIEW_MAX];
    for (size_t i = 0; i < json_array_size(v); i++)
        if (json_int_in(json_array_get(v, i), 0, 65535, &rows[i]) != 0) {
            snprintf(why, n, "element %zu is not a detector row in "
                     "[0, 65535]", i);
            return -1;
        }
    cfg->preview.n_rows = (int)json_array_size(v);
    memcpy(cfg->preview.rows, rows, sizeof(int) * (size_t)cfg->preview.n_rows);
    return 0;
}

static json_t *dump_preview_rows(const rtomod_config *cfg)
{
    json_t *a = json_array();
    for (int i = 0; a && i < cfg->preview.n_rows; i++)
        json_array_append_new(a, json_integer(cfg->preview.rows[i]));
    return a;
}

/* "roi": null | [x, y, w, h] */
static int parse_roi(const json_t *v, rtomod_config *cfg, char *why, size_t n)
{
    int roi[4] = {0, 0, 0, 0};
    if (!json_is_null(v)) {
        if (!json_is_array(v) || json_array_size(v) != 4) {
            snprintf(why, n, "expected null or [x, y, width, height]");
            return -1;
        }
        for (int i = 0; i < 4; i++) {
            if (json_int_in(json_array_get(v, (size_t)i), i < 2 ? 0 : 1, 65535,
                            &roi[i]) != 0) {
                snprintf(why, n, "element %d is not an integer in [%d, 65535]",
                         i, i < 2 ? 0 : 1);
                return -1;
            }
        }
    }
    memcpy(cfg->reconstruction.roi, roi, sizeof roi);
    return 0;
}

/* "rows": null | {"first": a, "count": n} */
static int parse_rows(const json_t *v, rtomod_config *cfg, char *why,
                      size_t n)
{
    int first = 0, count = 0;
    if (!json_is_null(v)) {
        if (!json_is_object(v) || json_object_size(v) != 2 ||
            json_int_in(json_object_get(v, "first"), 0, 65535, &first) != 0 ||
            json_int_in(json_object_get(v, "count"), 1, 65536, &count) != 0) {
            snprintf(why, n, "expected null or {\"first\": row >= 0, "
                     "\"count\": rows >= 1}");
            return -1;
        }
    }
    cfg->reconstruction.rows_first = first;
    cfg->reconstruction.rows_count = count;
    return 0;
}

static json_t *dump_rows(const rtomod_config *cfg)
{
    if (cfg->reconstruction.rows_count == 0)
        return json_null();
    return json_pack("{s:i, s:i}", "first", cfg->reconstruction.rows_first,
                     "count", cfg->reconstruction.rows_count);
}

static json_t *dump_roi(const rtomod_config *cfg)
{
    const int *r = cfg->reconstruction.roi;
    if (r[2] == 0 && r[3] == 0)
        return json_null();
    return json_pack("[i, i, i, i]", r[0], r[1], r[2], r[3]);
}

/* "output.hdf5.directory": null (no files) | a directory */
static int parse_hdf5_directory(const json_t *v, rtomod_config *cfg,
                                char *why, size_t n)
{
    if (json_is_null(v)) {
        cfg->output.hdf5_directory[0] = '\0';
        return 0;
    }
    if (!json_is_string(v) || json_string_length(v) == 0 ||
        json_string_length(v) >= RTOMOD_PATH_MAX - 64) {
        snprintf(why, n, "expected null or a directory (a path of less than "
                 "%d characters)", RTOMOD_PATH_MAX - 64);
        return -1;
    }
    snprintf(cfg->output.hdf5_directory, RTOMOD_PATH_MAX, "%s",
             json_string_value(v));
    return 0;
}

static json_t *dump_hdf5_directory(const rtomod_config *cfg)
{
    return cfg->output.hdf5_directory[0]
               ? json_string(cfg->output.hdf5_directory) : json_null();
}

/* "devices": "all" | [ordinals] */
static int parse_devices(const json_t *v, rtomod_config *cfg, char *why,
                         size_t n)
{
    rtomo_engine_options *e = &cfg->engine;
    if (json_is_string(v) && strcmp(json_string_value(v), "all") == 0) {
        e->n_devices = 0;
        return 0;
    }
    size_t count = json_is_array(v) ? json_array_size(v) : 0;
    if (count < 1 || count > RTOMO_MAX_DEVICES) {
        snprintf(why, n, "expected \"all\" or a list of 1 to %d device "
                         "ordinals", RTOMO_MAX_DEVICES);
        return -1;
    }
    int ids[RTOMO_MAX_DEVICES];
    for (size_t i = 0; i < count; i++) {
        if (json_int_in(json_array_get(v, i), 0, 255, &ids[i]) != 0) {
            snprintf(why, n, "element %zu is not a device ordinal", i);
            return -1;
        }
        for (size_t j = 0; j < i; j++) {
            if (ids[j] == ids[i]) {
                snprintf(why, n, "device %d is listed twice", ids[i]);
                return -1;
            }
        }
    }
    e->n_devices = (int)count;
    memcpy(e->device_ids, ids, sizeof(int) * count);
    return 0;
}

static json_t *dump_devices(const rtomod_config *cfg)
{
    if (cfg->engine.n_devices == 0)
        return json_string("all");
    json_t *a = json_array();
    for (int i = 0; i < cfg->engine.n_devices; i++)
        json_array_append_new(a, json_integer(cfg->engine.device_ids[i]));
    return a;
}

/* ------------------------------------------------------------ table ---- */

typedef enum field_kind { F_STRING, F_INT, F_DOUBLE, F_BOOL, F_ENUM, F_CUSTOM }
    field_kind;

typedef struct field {
    const char *section, *key;
    field_kind kind;
    size_t offset;              /* within rtomod_config */
    double min, max;            /* F_INT, F_DOUBLE */
    const enum_def *en;         /* F_ENUM */
    custom_parse_fn parse;      /* F_CUSTOM */
    custom_dump_fn dump;        /* F_CUSTOM */
    int runtime;                /* may be changed by set_config */
} field;

#define AT(member) offsetof(rtomod_config, member)
#define STR(s, k, m) {s, k, F_STRING, AT(m), 0, 0, NULL, NULL, NULL, 0}
#define INT(s, k, m, lo, hi, rt) \
    {s, k, F_INT, AT(m), lo, hi, NULL, NULL, NULL, rt}
#define DBL(s, k, m, lo, hi, rt) \
    {s, k, F_DOUBLE, AT(m), lo, hi, NULL, NULL, NULL, rt}
#define BOOL(s, k, m) {s, k, F_BOOL, AT(m), 0, 1, NULL, NULL, NULL, 0}
#define ENUM(s, k, m, e, rt) {s, k, F_ENUM, AT(m), 0, 0, &e, NULL, NULL, rt}
#define CUSTOM(s, k, p, d, rt) {s, k, F_CUSTOM, 0, 0, 0, NULL, p, d, rt}

static const field fields[] = {
    STR("ingest", "endpoint", ingest.endpoint),
    INT("ingest", "rcvhwm", ingest.rcvhwm, 1, 1 << 20, 0),
    DBL("ingest", "max_message_mb", ingest.max_message_mb, 0.001, 65536, 0),
    INT("ingest", "fairness", ingest.fairness, 1, 1 << 16, 0),
    INT("ingest", "reorder_ms", ingest.reorder_ms, 0, 60000, 0),
    INT("ingest", "io_threads", ingest.io_threads, 1, 63, 0),
    BOOL("ingest", "keep_buffers", ingest.keep_buffers),
    DBL("ingest", "keep_mb", ingest.keep_mb, 0, 1 << 22, 0),
    STR("publish", "endpoint", publish.endpoint),
    INT("publish", "sndhwm", publish.sndhwm, 1, 1 << 20, 0),
    INT("publish", "linger_ms", publish.linger_ms, 0, 600000, 0),
    DBL("publish", "queue_mb", publish.queue_mb, 1, 1 << 22, 0),
    DBL("publish", "max_image_mb", publish.max_image_mb, 0.001, 1 << 20, 0),
    INT("publish", "stats_threads", publish.stats_threads, 1, 64, 0),
    DBL("publish", "pinned_mb", publish.pinned_mb, 0, 1 << 22, 0),
    STR("control", "endpoint", control.endpoint),
    ENUM("engine", "backend", engine.backend, enum_backend, 0),
    CUSTOM("engine", "devices", parse_devices, dump_devices, 0),
    INT("engine", "cpu_threads", engine.cpu_threads, 0, 4096, 0),
    INT("engine", "workers", workers, 0, RTOMO_MAX_DEVICES, 0),
    ENUM("engine", "bp_kernel", engine.bp_kernel, enum_bp_kernel, 0),
    INT("engine", "slices_per_pass", engine.slices_per_pass, 0, 4, 0),
    ENUM("engine", "precision", engine.precision, enum_precision, 0),
    DBL("engine", "hybrid_ratio", engine.hybrid_ratio, 0, 1, 0),
    ENUM("engine", "sbdx_method", engine.sbdx_method, enum_sbdx_method, 0),
    ENUM("reconstruction", "filter", reconstruction.filter, enum_window, 1),
    DBL("reconstruction", "cutoff", reconstruction.cutoff, 0.001, 1, 1),
    ENUM("reconstruction", "interpolation", reconstruction.interpolation,
         enum_interp, 1),
    ENUM("reconstruction", "field_of_view", reconstruction.field_of_view,
         enum_fov, 1),
    CUSTOM("reconstruction", "slices", parse_slices, dump_slices, 1),
    CUSTOM("reconstruction", "roi", parse_roi, dump_roi, 1),
    CUSTOM("reconstruction", "rows", parse_rows, dump_rows, 0),
    INT("reconstruction", "slice_size", reconstruction.slice_size, 0, 65536, 0),
    INT("reconstruction", "batch", reconstruction.batch, 0, 4096, 0),
    INT("reconstruction", "window_backlog", reconstruction.window_backlog, 0,
        1 << 16, 0),
    BOOL("reconstruction", "streaming", reconstruction.streaming),
    BOOL("reconstruction", "angle_weights", reconstruction.angle_weights),
    INT("reconstruction", "window_refresh", reconstruction.window_refresh, 0,
        1 << 20, 0),
    DBL("reconstruction", "axis_tolerance", reconstruction.axis_tolerance, 0,
        1000, 1),
    ENUM("reconstruction", "rings", reconstruction.rings, enum_rings, 1),
    INT("reconstruction", "rings_width", reconstruction.rings_width, 0, 255, 1),
    ENUM("reconstruction", "method", reconstruction.method.method, enum_method,
         1),
    INT("reconstruction", "iterations", reconstruction.method.iterations, 1,
        RTOMO_MAX_ITERATIONS, 1),
    INT("reconstruction", "publish_every", reconstruction.method.publish_every,
        0, RTOMO_MAX_ITERATIONS, 1),
    DBL("reconstruction", "tolerance", reconstruction.method.tolerance, 0,
        0.999, 1),
    BOOL("reconstruction", "nonnegative", reconstruction.method.nonnegative),
    BOOL("reconstruction", "warm_start", reconstruction.method.warm_start),
    DBL("phase", "delta_beta", reconstruction.phase.delta_beta, 0, 1e6, 1),
    DBL("phase", "energy_kev", reconstruction.phase.energy_kev, 0, 1e4, 1),
    DBL("phase", "distance_m", reconstruction.phase.distance_m, 0, 1e3, 1),
    DBL("phase", "pixel_m", reconstruction.phase.pixel_m, 0, 1, 1),
    INT("preview", "every", preview.every, 0, 1 << 30, 1),
    CUSTOM("preview", "slices", parse_preview_rows, dump_preview_rows, 1),
    INT("scans", "max", scans.max, 1, RTOMOD_MAX_SCANS, 0),
    INT("scans", "idle_timeout_ms", scans.idle_timeout_ms, 0, 86400000, 1),
    ENUM("scans", "incomplete", scans.incomplete_abort, enum_incomplete, 1),
    DBL("limits", "host_mb", limits.host_mb, 0, 1 << 30, 0),
    DBL("limits", "device_mb", limits.device_mb, 0, 1 << 30, 0),
    DBL("limits", "early_mb", limits.early_mb, 1, 1 << 22, 0),
    INT("queue", "frames", queue.frames, 1, 1 << 20, 0),
    DBL("queue", "mb", queue.mb, 1, 1 << 22, 0),
    INT("telemetry", "interval_ms", telemetry.interval_ms, 10, 3600000, 1),
    ENUM("log", "level", log.level, enum_log_level, 1),
    INT("shutdown", "drain_quiet_ms", shutdown.drain_quiet_ms, 0, 60000, 0),
    INT("shutdown", "drain_max_ms", shutdown.drain_max_ms, 0, 600000, 0),
    INT("shutdown", "timeout_ms", shutdown.timeout_ms, 100, 3600000, 0),
    CUSTOM("security", "curve_secret_key_file",
           rtomod_security_parse_secret_key_file,
           rtomod_security_dump_secret_key_file, 0),
    CUSTOM("security", "client_keys", rtomod_security_parse_client_keys,
           rtomod_security_dump_client_keys, 0),
    CUSTOM("security", "allow_addresses", rtomod_security_parse_allow,
           rtomod_security_dump_allow, 0),
    BOOL("security", "allow_insecure_remote", security.allow_insecure_remote),
    /* Keys of a subsection ("output": {"hdf5": {...}}) are named with a
     * dot: --set output.hdf5.directory=... */
    CUSTOM("output", "hdf5.directory", parse_hdf5_directory,
           dump_hdf5_directory, 0),
    DBL("output", "hdf5.queue_mb", output.hdf5_queue_mb, 1, 1 << 22, 0),
    ENUM("output", "hdf5.when_full", output.hdf5_block, enum_when_full, 0),
    BOOL("output", "hdf5.sbdx_planes", output.hdf5_sbdx_planes),
    CUSTOM("inputs", "stream2.endpoint", rtomod_input_parse_stream2_endpoint,
           rtomod_input_dump_stream2_endpoint, 0),
    CUSTOM("inputs", "stream2.channel", rtomod_input_parse_stream2_channel,
           rtomod_input_dump_stream2_channel, 0),
    CUSTOM("inputs", "jsonhdr.endpoint", rtomod_input_parse_jsonhdr_endpoint,
           rtomod_input_dump_jsonhdr_endpoint, 0),
};
#define N_FIELDS (sizeof fields / sizeof fields[0])

/* ---------------------------------------------------------- defaults ---- */

void rtomod_config_init(rtomod_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    snprintf(cfg->ingest.endpoint, RTOMOD_ENDPOINT_MAX, "%s",
             RTOMO_DEFAULT_INGEST_ENDPOINT);
    /* A few frames in ZeroMQ's queue: back-pressure reaches the camera soon
     * after the work queue fills, instead of gigabytes later. */
    cfg->ingest.rcvhwm = 16;
    cfg->ingest.max_message_mb = 256;
    cfg->ingest.fairness = 32;
    /* ZeroMQ orders messages per connection only: with several ingest
     * connections a frame can overtake its scan_begin, and a scan_end its
     * last frames, by about one message's transfer time. */
    cfg->ingest.reorder_ms = 200;
    /* One ZeroMQ I/O thread moves about one connection's bytes (a few
     * GB/s): four serve a sender with four connections, 8 GB/s and more
     * (publish and control have a thread of their own besides). */
    cfg->ingest.io_threads = 4;
    cfg->ingest.keep_buffers = 1;
    /* Enough for a backlog of a few large frames; a burst beyond is
     * returned to the kernel, and everything once rtomod is idle. */
    cfg->ingest.keep_mb = 1024;
    snprintf(cfg->publish.endpoint, RTOMOD_ENDPOINT_MAX, "%s",
             RTOMO_DEFAULT_PUBLISH_ENDPOINT);
    cfg->publish.sndhwm = 1000;
    cfg->publish.linger_ms = 2000;
    /* A subscriber that never reads pins at most this.  With images of up
     * to 16 MB (2048^2 float32 slices) that is 256 messages queued per
     * subscriber: the queue must hold a whole batch of slices (64 on a
     * GPU) published at once, since rtomod hands a batch to ZeroMQ faster
     * than any subscriber takes it. */
    cfg->publish.queue_mb = 4096;
    cfg->publish.max_image_mb = 16;
    /* One core scans about 19 GB/s (measured on the EPYC build host):
     * 7 ms for an SBDX frame's 128 MB of planes, close to a GPU's 8.4 ms
     * per frame; a second thread leaves room for slower cores. */
    cfg->publish.stats_threads = 2;
    cfg->publish.pinned_mb = 4096;
    snprintf(cfg->control.endpoint, RTOMOD_ENDPOINT_MAX, "%s",
             RTOMO_DEFAULT_CONTROL_ENDPOINT);
    rtomo_engine_options_init(&cfg->engine);
    cfg->reconstruction.filter = RTOMO_WINDOW_RAMLAK;
    cfg->reconstruction.cutoff = 1.0;
    cfg->reconstruction.interpolation = RTOMO_INTERP_LINEAR;
    cfg->reconstruction.field_of_view = RTOMO_FOV_FULL;
    cfg->reconstruction.slices.kind = RTOMO_SLICES_ALL;
    /* A GPU wants more slices per call than the CPU: the worker decides
     * by its backend. */
    cfg->reconstruction.batch = 0;
    /* Two windows in flight keep a GPU busy; more only add latency. */
    cfg->reconstruction.window_backlog = 2;
    /* Resident slices make the reconstruction finish with the scan; the
     * budget decides how many fit, so on is safe. */
    cfg->reconstruction.streaming = 1;
    /* Uniform sets are weighted exactly as before; irregular ones (fly
     * scans, golden-ratio orders) come out right. */
    cfg->reconstruction.angle_weights = 1;
    /* A recomputation every 50 windows costs 2% more back-projection and
     * keeps the drift near 1e-7 (tests/test_fbp_stream.c). */
    cfg->reconstruction.window_refresh = 50;
    /* A quarter bin blurs a slice hardly visibly; the measurement's own
     * scatter on noisy data is about 0.1 bin (tests/test_fbp_axis.c), so
     * noise alone seldom makes a window be recomputed. */
    cfg->reconstruction.axis_tolerance = 0.25;
    /* FBP unless asked: the iterative methods cost tens of FBPs. */
    rtomo_method_settings_init(&cfg->reconstruction.method);
    /* One scan acquiring while up to three earlier ones reconstruct: a
     * camera's scans in a row never wait for the daemon. */
    cfg->scans.max = 4;
    /* A camera pauses between frames for milliseconds, between scans
     * longer; 30 s of silence within a scan means its sender is gone. */
    cfg->scans.idle_timeout_ms = 30000;
    /* Reconstructing what arrived keeps every accepted frame's work and
     * says what is missing; "abort" is for those who prefer nothing to an
     * incomplete result. */
    cfg->scans.incomplete_abort = 0;
    cfg->limits.early_mb = 256;
    cfg->queue.frames = 64;
    cfg->queue.mb = 2048;
    cfg->telemetry.interval_ms = 1000;
    cfg->log.level = RTOMOD_LOG_INFO;
    cfg->shutdown.drain_quiet_ms = 300;
    /* Frames sent just before the signal are read; a sender that keeps
     * streaming is refused after this. */
    cfg->shutdown.drain_max_ms = 2000;
    cfg->shutdown.timeout_ms = 60000;
    /* Off until a directory is given.  The queue holds references to the
     * images' buffers (no copies): 4 GiB is 256 slices of 2048^2, several
     * seconds of a GPU's output, what a disk's hiccup needs.  Full, it
     * drops and counts: the live reconstruction and the camera never wait
     * for a disk (output.hdf5.when_full "block" keeps every image at the
     * price of slowing the workers, and then the sender). */
    cfg->output.hdf5_queue_mb = 4096;
    cfg->output.hdf5_block = 0;
    cfg->output.hdf5_sbdx_planes = 0;
}

void rtomod_config_clear(rtomod_config *cfg)
{
    rtomo_slice_selection_clear(&cfg->reconstruction.slices);
}

int rtomod_config_copy(rtomod_config *dst, const rtomod_config *src)
{
    *dst = *src;
    dst->reconstruction.slices.rows = NULL;
    return rtomo_slice_selection_copy(&dst->reconstruction.slices,
                                      &src->reconstruction.slices);
}

size_t rtomod_config_max_image(const rtomod_config *cfg)
{
    return (size_t)(cfg->publish.max_image_mb * 1024.0 * 1024.0);
}

int rtomod_config_publish_hwm(const rtomod_config *cfg)
{
    double fit = cfg->publish.queue_mb / cfg->publish.max_image_mb;
    return fit < 2 ? 2 : fit > cfg->publish.sndhwm ? cfg->publish.sndhwm
                                                   : (int)fit;
}

size_t rtomod_config_max_payload(const rtomod_config *cfg)
{
    return (size_t)(cfg->ingest.max_message_mb * 1024.0 * 1024.0);
}

/* Publishing has an I/O thread of its own so that subscribers' traffic
 * never slows frames coming in; and ZeroMQ puts an accepted connection on
 * the thread of its socket's affinity with the fewest file descriptors, so
 * listeners that carry nothing (publish, control) would otherwise count as
 * load on ingest's threads and draw its connections together. */
int rtomod_config_zmq_threads(const rtomod_config *cfg)
{
    return cfg->ingest.io_threads + 1;
}

uint64_t rtomod_config_zmq_affinity(const rtomod_config *cfg, int ingest)
{
    int n = cfg->ingest.io_threads;     /* 1..63: the masks fit */
    return ingest ? ((uint64_t)1 << n) - 1 : (uint64_t)1 << n;
}

/* ----------------------------------------------------------- parsing ---- */

static const field *find_field(const char *section, const char *key)
{
    for (size_t i = 0; i < N_FIELDS; i++)
        if (strcmp(fields[i].section, section) == 0 &&
            strcmp(fields[i].key, key) == 0)
            return &fields[i];
    return NULL;
}

static int section_exists(const char *section)
{
    for (size_t i = 0; i < N_FIELDS; i++)
        if (strcmp(fields[i].section, section) == 0)
            return 1;
    return 0;
}

/* List an enum's names, for error messages. */
static void enum_choices(const enum_def *en, char *out, size_t n)
{
    size_t used = 0;
    out[0] = '\0';
    for (int v = 0; en->name(v) && used < n; v++)
        used += (size_t)snprintf(out + used, n - used, "%s%s", v ? ", " : "",
                                 en->name(v));
}

static int parse_number(const field *f, const json_t *v, rtomod_config *cfg,
                        char *why, size_t n)
{
    char *dst = (char *)cfg + f->offset;
    if (f->kind == F_INT) {
        if (!json_is_integer(v) || json_integer_value(v) < f->min ||
            json_integer_value(v) > f->max) {
            snprintf(why, n, "expected an integer in [%.0f, %.0f]", f->min,
                     f->max);
            return -1;
        }
        *(int *)dst = (int)json_integer_value(v);
        return 0;
    }
    if (!json_is_number(v) || !(json_number_value(v) >= f->min) ||
        !(json_number_value(v) <= f->max)) {
        snprintf(why, n, "expected a number in [%g, %g]", f->min, f->max);
        return -1;
    }
    *(double *)dst = json_number_value(v);
    return 0;
}

/* Parse one value into cfg; `why` says what is wrong with it. */
static int parse_value(const field *f, const json_t *v, rtomod_config *cfg,
                       char *why, size_t n)
{
    char *dst = (char *)cfg + f->offset;
    switch (f->kind) {
    case F_STRING:
        if (!json_is_string(v) || json_string_length(v) == 0 ||
            json_string_length(v) >= RTOMOD_ENDPOINT_MAX) {
            snprintf(why, n, "expected a non-empty string of less than %d "
                             "characters", RTOMOD_ENDPOINT_MAX);
            return -1;
        }
        snprintf(dst, RTOMOD_ENDPOINT_MAX, "%s", json_string_value(v));
        return 0;
    case F_INT:
    case F_DOUBLE:
        return parse_number(f, v, cfg, why, n);
    case F_BOOL:
        if (!json_is_boolean(v)) {
            snprintf(why, n, "expected true or false");
            return -1;
        }
        *(int *)dst = json_is_true(v);
        return 0;
    case F_ENUM: {
        int value;
        if (!json_is_string(v) || f->en->parse(json_string_value(v), &value)) {
            char choices[256];
            enum_choices(f->en, choices, sizeof choices);
            snprintf(why, n, "expected one of %s", choices);
            return -1;
        }
        *(int *)dst = value;
        return 0;
    }
    case F_CUSTOM:
        return f->parse(v, cfg, why, n);
    }
    return -1;
}

static json_t *dump_value(const field *f, const rtomod_config *cfg)
{
    const char *src = (const char *)cfg + f->offset;
    switch (f->kind) {
    case F_STRING: return json_string(src);
    case F_INT: return json_integer(*(const int *)src);
    case F_DOUBLE: return json_real(*(const double *)src);
    case F_BOOL: return json_boolean(*(const int *)src);
    case F_ENUM: return json_string(f->en->name(*(const int *)src));
    case F_CUSTOM: return f->dump(cfg);
    }
    return json_null();
}

static int fail(char *error, size_t size, const char *format, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(char *error, size_t size, const char *format, ...)
{
    va_list ap;
    va_start(ap, format);
    vsnprintf(error, size, format, ap);
    va_end(ap);
    return -1;
}

/* Checks that involve more than one key. */
static int check_consistency(const rtomod_config *cfg, char *error, size_t n)
{
    const int *roi = cfg->reconstruction.roi;
    int size = cfg->reconstruction.slice_size;
    if (size > 0 && (roi[2] || roi[3]) &&
        (roi[0] + roi[2] > size || roi[1] + roi[3] > size))
        return fail(error, n, "reconstruction.roi: [%d, %d, %d, %d] is not "
                    "inside the %dx%d slice (reconstruction.slice_size)",
                    roi[0], roi[1], roi[2], roi[3], size, size);
    if (cfg->engine.backend == RTOMO_BACKEND_CUDA && !rtomo_cuda_built())
        return fail(error, n, "engine.backend: cuda, but this rtomod was "
                    "built without CUDA");
    return 0;
}

/* Whether section.sub.* keys exist. */
static int has_subsection(const char *section, const char *sub)
{
    size_t len = strlen(sub);
    for (size_t i = 0; i < N_FIELDS; i++)
        if (strcmp(fields[i].section, section) == 0 &&
            strncmp(fields[i].key, sub, len) == 0 && fields[i].key[len] == '.')
            return 1;
    return 0;
}

static int apply_section(rtomod_config *cfg, const char *section,
                         const json_t *obj, int runtime_only, char *error,
                         size_t n)
{
    if (!json_is_object(obj))
        return fail(error, n, "%s: expected an object of settings", section);
    const char *key;
    json_t *value;
    json_object_foreach((json_t *)obj, key, value) {
        const field *f = find_field(section, key);
        /* A subsection ("hdf5": {"directory": ...}): its keys are
         * "hdf5.directory" in the table. */
        if (!f && json_is_object(value) && has_subsection(section, key)) {
            json_t *flat = json_object();
            const char *sub;
            json_t *v;
            char path[128];
            json_object_foreach(value, sub, v) {
                snprintf(path, sizeof path, "%s.%s", key, sub);
                json_object_set(flat, path, v);
            }
            int rc = apply_section(cfg, section, flat, runtime_only, error, n);
            json_decref(flat);
            if (rc != 0)
                return rc;
            continue;
        }
        /* A removed key gets its own explanation, not "unknown". */
        if (!f && strcmp(section, "publish") == 0 &&
            strcmp(key, "nodrop") == 0)
            return fail(error, n, "publish.nodrop was removed: with it one "
                        "subscriber that stopped reading silenced publication "
                        "for every subscriber; publish.queue_mb now bounds "
                        "what each subscriber may hold back");
        if (!f)
            return fail(error, n, "%s.%s: unknown configuration key", section,
                        key);
        if (runtime_only && !f->runtime)
            return fail(error, n, "%s.%s: cannot be changed while running",
                        section, key);
        char why[RTOMOD_CONFIG_ERROR_MAX / 2];
        if (parse_value(f, value, cfg, why, sizeof why) != 0)
            return fail(error, n, "%s.%s: %s", section, key, why);
    }
    return 0;
}

int rtomod_config_apply_json(rtomod_config *cfg, const json_t *root,
                             int runtime_only, char *error, size_t error_size)
{
    if (!json_is_object(root))
        return fail(error, error_size, "the configuration must be a JSON "
                    "object of sections");
    rtomod_config next;
    if (rtomod_config_copy(&next, cfg) != 0)
        return fail(error, error_size, "out of memory");
    const char *section;
    json_t *obj;
    int rc = 0;
    json_object_foreach((json_t *)root, section, obj) {
        if (!section_exists(section)) {
            rc = fail(error, error_size, "%s: unknown configuration section",
                      section);
            break;
        }
        if ((rc = apply_section(&next, section, obj, runtime_only, error,
                                error_size)) != 0)
            break;
    }
    if (rc == 0)
        rc = check_consistency(&next, error, error_size);
    if (rc != 0) {
        rtomod_config_clear(&next);
        return -1;
    }
    rtomod_config_clear(cfg);
    *cfg = next;
    return 0;
}

int rtomod_config_load_file(rtomod_config *cfg, const char *path, char *error,
                            size_t error_size)
{
    json_error_t jerr;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
    if (!root && jerr.line < 1)         /* not read at all */
        return fail(error, error_size, "%s", jerr.text);
    if (!root)
        return fail(error, error_size, "%s:%d:%d: %s", path, jerr.line,
                    jerr.column, jerr.text);
    char why[RTOMOD_CONFIG_ERROR_MAX];
    int rc = rtomod_config_apply_json(cfg, root, 0, why, sizeof why);
    json_decref(root);
    if (rc != 0)
        return fail(error, error_size, "%s: %s", path, why);
    return 0;
}

int rtomod_config_set_path(rtomod_config *cfg, const char *assignment,
                           char *error, size_t error_size)
{
    const char *eq = strchr(assignment, '=');
    const char *dot = strchr(assignment, '.');
    if (!eq || !dot || dot > eq || dot == assignment || dot + 1 == eq)
        return fail(error, error_size, "'%s': expected section.key=value",
                    assignment);
    char section[64], key[64];
    if ((size_t)(dot - assignment) >= sizeof section ||
        (size_t)(eq - dot - 1) >= sizeof key)
        return fail(error, error_size, "'%s': key too long", assignment);
    snprintf(section, sizeof section, "%.*s", (int)(dot - assignment),
             assignment);
    snprintf(key, sizeof key, "%.*s", (int)(eq - dot - 1), dot + 1);
    json_t *value = json_loads(eq + 1, JSON_DECODE_ANY, NULL);
    if (!value)
        value = json_string(eq + 1);
    json_t *root = json_pack("{s:{s:o}}", section, key, value);
    if (!root)
        return fail(error, error_size, "'%s': value is not valid UTF-8",
                    assignment);
    int rc = rtomod_config_apply_json(cfg, root, 0, error, error_size);
    json_decref(root);
    return rc;
}

json_t *rtomod_config_to_json(const rtomod_config *cfg)
{
    json_t *root = json_object();
    for (size_t i = 0; i < N_FIELDS; i++) {
        const field *f = &fields[i];
        json_t *section = json_object_get(root, f->section);
        if (!section) {
            section = json_object();
            json_object_set_new(root, f->section, section);
        }
        const char *dot = strchr(f->key, '.');
        if (dot) {              /* a subsection's key */
            char sub[64];
            snprintf(sub, sizeof sub, "%.*s", (int)(dot - f->key), f->key);
            json_t *inner = json_object_get(section, sub);
            if (!inner) {
                inner = json_object();
                json_object_set_new(section, sub, inner);
            }
            json_object_set_new(inner, dot + 1, dump_value(f, cfg));
            continue;
        }
        json_object_set_new(section, f->key, dump_value(f, cfg));
    }
    return root;
}
