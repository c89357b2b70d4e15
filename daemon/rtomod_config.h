/*
 * rtomod_config.h — rtomod's configuration: defaults, the JSON file,
 * command-line overrides, validation and the runtime subset that the
 * control socket may change.  docs/rtomod.md documents every key.
 *
 * The configuration is a JSON object of sections ("ingest", "publish",
 * "control", "engine", "reconstruction", "preview", "scans", "limits", "queue",
 * "telemetry", "log", "shutdown").  Keys are addressed as "section.key" paths, both in the file
 * and in --set overrides; unknown keys are refused so that a typo never goes
 * unnoticed.
 */
#ifndef RTOMOD_CONFIG_H
#define RTOMOD_CONFIG_H

/* Slices a preview may show at most. */
#define RTOMOD_PREVIEW_MAX 16

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "rtomod_log.h"
#include "rtomo_engine.h"
#include "rtomo_protocol.h"
#include "rtomod_security.h"

#define RTOMOD_ENDPOINT_MAX 256
#define RTOMOD_PATH_MAX 1024
/* Scans in flight at most (scans.max); also the plans a worker holds. */
#define RTOMOD_MAX_SCANS 16
#define RTOMOD_CONFIG_ERROR_MAX 512

typedef struct rtomod_config {
    struct {
        char endpoint[RTOMOD_ENDPOINT_MAX];
        int rcvhwm;             /* messages held by ZeroMQ before TCP pushes
                                   back on the sender */
        double max_message_mb;  /* largest accepted payload; beyond: oversize */
        int fairness;           /* messages read per loop iteration at most */
        int reorder_ms;         /* wait for frames that another connection
                                   delivers out of order around begin/end */
        int io_threads;         /* ZeroMQ I/O threads of ingest (publish
                                   and control have one more) */
        int keep_buffers;       /* 1: freed message memory is reused, up to
                                   keep_mb (rtomod_memory.h) */
        double keep_mb;         /* freed memory kept for reuse at most; the
                                   rest goes back to the kernel, all of it
                                   once rtomod is idle */
    } ingest;
    struct {
        char endpoint[RTOMOD_ENDPOINT_MAX];
        int sndhwm;             /* messages queued per subscriber */
        int linger_ms;          /* flush time for queued messages at exit */
        double queue_mb;        /* bytes queued per subscriber at most:
                                   a subscriber that does not read loses
                                   messages beyond, the others none */
        double max_image_mb;    /* largest image payload published; a
                                   begin whose images are larger is
                                   refused (over_budget) */
        int stats_threads;      /* per worker: image statistics, off the
                                   engine's path (rtomod_finisher.h) */
        double pinned_mb;       /* per GPU worker: page-locked slice
                                   buffers kept across scans, at most
                                   (0: none, ordinary memory per scan) */
    } publish;
    struct {
        char endpoint[RTOMOD_ENDPOINT_MAX];
    } control;
    rtomo_engine_options engine;    /* backend, devices, kernels */
    int workers;                /* engine.workers: CPU workers (0 = 1) */
    struct {
        rtomo_window filter;
        double cutoff;
        rtomo_interp interpolation;
        rtomo_fov field_of_view;    /* parallel-beam scans: full | circle */
        rtomo_slice_selection slices;
        int roi[4];             /* x, y, w, h; all 0 = the whole grid */
        int slice_size;         /* 0 = the detector width */
        int batch;              /* slices per back-projection call;
                                   0 = by backend (worker.c) */
        int window_backlog;     /* continuous: windows that may wait; a
                                   window due beyond is skipped (0 = never
                                   skip) */
        int rows_first, rows_count; /* detector rows this daemon takes
                                   (several daemons share a stream);
                                   count 0 = all */
        int streaming;          /* keep the selected slices resident and
                                   back-project while the scan is
                                   acquired, as far as they fit */
        int angle_weights;      /* weigh each projection by the angular
                                   interval it stands for (scans; a
                                   continuous window is uniform) */
        int window_refresh;     /* continuous, resident slices: windows
                                   between exact recomputations (bounds
                                   float drift); 0 = never */
        double axis_tolerance;  /* continuous "axis": "auto": a measured
                                   change beyond this (bins) moves the
                                   window to the new axis */
        rtomo_rings rings;      /* ring removal of scans (not continuous) */
        int rings_width;        /* its running median, bins (0 = 31) */
        rtomo_fbp_phase phase;  /* phase retrieval (delta_beta 0 = off);
                                   a scan may give any of the four */
        rtomo_method_settings method;   /* reconstruction.method and its
                                   options (nonnegative: for sirt only) */
    } reconstruction;
    struct {
        int every;              /* projections between previews of
                                   resident slices; 0 = no previews */
        int rows[RTOMOD_PREVIEW_MAX];   /* detector rows previewed; none =
                                   the middle selected slice */
        int n_rows;
    } preview;
    struct {
        int max;                /* scans in flight (acquiring or
                                   reconstructing) at most */
        int idle_timeout_ms;    /* an acquiring scan that receives nothing
                                   this long ends by itself; 0 = never */
        int incomplete_abort;   /* 1: such a scan (and one cut short by a
                                   shutdown) is aborted; 0: reconstructed
                                   from what arrived, marked incomplete */
    } scans;
    struct {
        double host_mb;         /* memory for scans' state, 0 = derived from
                                   the machine (budget.c) */
        double device_mb;       /* per GPU, 0 = derived from the GPU */
        double early_mb;        /* frames held for their begin, at most */
    } limits;
    struct {
        int frames;             /* jobs queued per worker at most */
        double mb;              /* payload bytes queued per worker at most */
    } queue;
    struct {
        int interval_ms;
    } telemetry;
    struct {
        rtomod_log_level level;
    } log;
    struct {
        int drain_quiet_ms;     /* ingest silence that ends the drain */
        int drain_max_ms;       /* the drain ends after this at most */
        int timeout_ms;         /* give up waiting for the workers */
    } shutdown;
    rtomod_security_config security;   /* who may connect (rtomod_security.h) */
    struct {                    /* detector-native inputs (rtomod_input.h);
                                   "" = off */
        char stream2_endpoint[RTOMOD_ENDPOINT_MAX];
        char stream2_channel[64];   /* "" = an image's first channel */
        char jsonhdr_endpoint[RTOMOD_ENDPOINT_MAX];
    } inputs;
    struct {
        char hdf5_directory[RTOMOD_PATH_MAX];  /* "" = no HDF5 files */
        double hdf5_queue_mb;   /* images waiting for the disk, at most */
        int hdf5_block;         /* queue full: 1 = the workers wait,
                                   0 = the image is dropped and counted */
        int hdf5_sbdx_planes;   /* SBDX streams: the planes too */
    } output;                   /* rtomod_output.h; keys output.hdf5.* */
} rtomod_config;

/* Fill with the defaults (work out of the box on one machine). */
void rtomod_config_init(rtomod_config *cfg);
/* Release what the configuration owns (the slice list). */
void rtomod_config_clear(rtomod_config *cfg);
/* Deep copy; returns 0, or -1 when out of memory. */
int rtomod_config_copy(rtomod_config *dst, const rtomod_config *src);

/* Apply a JSON object of sections onto cfg.  With runtime_only, only the keys
 * that may change while running are accepted.  On error cfg is unchanged and
 * `error` names the offending key.  Returns 0 or -1. */
int rtomod_config_apply_json(rtomod_config *cfg, const json_t *root,
                             int runtime_only, char *error, size_t error_size);

/* Apply a JSON file. */
int rtomod_config_load_file(rtomod_config *cfg, const char *path, char *error,
                            size_t error_size);

/* Apply one "section.key=value" override.  The value is read as JSON when it
 * parses as JSON, else as a plain string (so --set log.level=debug works). */
int rtomod_config_set_path(rtomod_config *cfg, const char *assignment,
                           char *error, size_t error_size);

/* The whole effective configuration as JSON (new reference). */
json_t *rtomod_config_to_json(const rtomod_config *cfg);

/* The publish socket's high-water mark: publish.queue_mb over
 * publish.max_image_mb, within [2, publish.sndhwm]. */
int rtomod_config_publish_hwm(const rtomod_config *cfg);
/* publish.max_image_mb in bytes. */
size_t rtomod_config_max_image(const rtomod_config *cfg);

/* Largest payload in bytes accepted by ingest. */
size_t rtomod_config_max_payload(const rtomod_config *cfg);
/* ZeroMQ I/O threads of the daemon's context: ingest.io_threads for the
 * ingest connections and one for publish and control. */
int rtomod_config_zmq_threads(const rtomod_config *cfg);
/* ZMQ_AFFINITY of the ingest socket (its own threads) or of the others
 * (the last thread). */
uint64_t rtomod_config_zmq_affinity(const rtomod_config *cfg, int ingest);

#endif /* RTOMOD_CONFIG_H */
