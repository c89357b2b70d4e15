/*
 * daemon_harness.h — what the rtomod integration tests share: start the
 * real rtomod binary on free loopback ports (CPU backend), talk to it
 * through the client library, collect what it publishes, and build
 * tomography scans of the phantom together with their reference
 * reconstruction by the CPU engine called directly.
 *
 * Every wait polls with a generous timeout (DAEMON_TIMEOUT_MS) and fails
 * the test with a message when it runs out; nothing relies on sleeping.
 * Helpers fail the running Check test (ck_assert) instead of returning
 * errors.
 */
#ifndef DAEMON_HARNESS_H
#define DAEMON_HARNESS_H

#include <stdint.h>
#include <sys/types.h>

#include <check.h>
#include <jansson.h>

#include "daemon_process.h"
#include "rtomo_client.h"
#include "rtomo_engine.h"
#include "rtomo_protocol.h"
#include "test_util.h"

#define DAEMON_TIMEOUT_MS 30000

/* ------------------------------------------------------------ process ---- */

typedef daemon_process daemon_proc;

/* Start rtomod (daemon_process_default_path) with the CPU backend, 2
 * threads, 50 ms telemetry and the extra arguments (NULL-terminated list,
 * may be NULL); asserts that it answers ping. */
void daemon_start(daemon_proc *d, const char *const *extra_args);
/* daemon_start without waiting for an answer (for tests of what comes
 * first, e.g. systemd's READY). */
void daemon_spawn(daemon_proc *d, const char *const *extra_args);
/* Send `sig` and wait for the exit; returns the exit status, or -1 when it
 * did not exit within timeout_ms (it is then killed). */
int daemon_signal_and_wait(daemon_proc *d, int sig, int timeout_ms);
/* SIGTERM and a clean exit (status 0) are expected. */
void daemon_stop(daemon_proc *d);
/* The process's resident memory (VmRSS), MB; -1 when unknown. */
double daemon_resident_mb(const daemon_proc *d);
/* Assert that rtomod's resident memory grew by less than `bound_mb` from
 * `before` (its message says `what`), and print both.  Under
 * AddressSanitizer only print: its allocator keeps freed memory in
 * quarantine (256 MB by default) and pads every block, so resident memory
 * no longer says what rtomod holds (tools/run-sanitized-tests). */
void daemon_assert_memory_growth(double before, double after, double bound_mb,
                                 const char *what);

/* ------------------------------------------------------------- client ---- */

/* A client with `connections` ingest sockets, control, and a subscription
 * to every topic that is known to be live (a telemetry message arrived). */
rtomo_client *daemon_connect(const daemon_proc *d, int connections);
/* A client of daemon d's control socket only (status, commands). */
rtomo_client *daemon_control_client(const daemon_proc *d);

/* Subscribe c to every topic and wait until a telemetry message proves
 * the subscription reached rtomod. */
void daemon_subscribe_all(rtomo_client *c);

/* Send a control request given as JSON text; returns the reply (the
 * caller's reference).  Asserts that a reply came. */
json_t *daemon_request(rtomo_client *c, const char *request_json);
/* The "status" reply. */
json_t *daemon_status(rtomo_client *c);
/* status.counters.<name>, or status.counters.rejects.<name> for a reject
 * reason. */
long daemon_counter(rtomo_client *c, const char *name);
long daemon_reject_counter(rtomo_client *c, const char *reason);
/* Poll status until counters.<name> >= value (asserts within the
 * timeout). */
void daemon_wait_counter(rtomo_client *c, const char *name, long value);

/* -------------------------------------------------------------- inbox ---- */

typedef struct daemon_image {
    rtomo_image_header h;
    void *data;                 /* copy of the payload (malloc'd) */
    size_t size;
    int source;                 /* the publisher it came from */
} daemon_image;

/* Everything received on the subscription, in order. */
typedef struct daemon_inbox {
    rtomo_client *client;
    daemon_image *images;
    int n_images, cap_images;
    rtomo_event *events;
    int n_events, cap_events;
    long telemetry;             /* telemetry messages received */
    json_t *last_telemetry;
    long peak_windows;          /* highest queues.windows seen */
} daemon_inbox;

void daemon_inbox_init(daemon_inbox *in, rtomo_client *client);
void daemon_inbox_free(daemon_inbox *in);
/* Receive what arrives within timeout_ms; returns 1 when a message came. */
int daemon_inbox_pump(daemon_inbox *in, int timeout_ms);
/* Wait until `count` images of topic/scan are in; asserts within the
 * timeout.  Returns how many there are. */
int daemon_wait_images(daemon_inbox *in, const char *topic, const char *scan,
                       int count);
/* Count the images of topic/scan received so far. */
int daemon_count_images(const daemon_inbox *in, const char *topic,
                        const char *scan);
/* The image of topic/scan with header field frame and index, or NULL. */
const daemon_image *daemon_find_image(const daemon_inbox *in,
                                      const char *topic, const char *scan,
                                      int64_t frame, int index);
/* Assert that the image's header min, max and mean describe its payload
 * (float32 or uint16 samples, recomputed in double) to rel_tol times the
 * largest magnitude among them. */
void daemon_assert_image_stats(const daemon_image *im, double rel_tol);
/* Wait for an event named `event` (reason, scan: NULL = any) that arrived
 * after the first `after` events; asserts within the timeout. */
const rtomo_event *daemon_wait_event(daemon_inbox *in, const char *event,
                                     const char *reason, const char *scan,
                                     int after);
/* The first such event among those received, or NULL. */
const rtomo_event *daemon_find_event(const daemon_inbox *in, const char *event,
                                     const char *reason, const char *scan);

/* ----------------------------------------------------------- session ---- */

/* What most tests hold: a daemon, a connected client, and an inbox. */
typedef struct daemon_session {
    daemon_proc d;
    rtomo_client *c;
    daemon_inbox in;
} daemon_session;

/* daemon_start(args), daemon_connect(connections), an empty inbox. */
void daemon_session_open(daemon_session *t, const char *const *args,
                         int connections);
/* Close the client and stop the daemon (exit status 0 expected). */
void daemon_session_close(daemon_session *t);

/* Run the given tests as one suite (each with timeout_s); the exit status
 * for main(). */
int daemon_run_tests(const char *name, const TTest *const *tests,
                     int n_tests, int timeout_s);

/* ----------------------------------------------------- phantom scans ---- */

/* A tomography scan of the Shepp-Logan phantom as a camera sees it: darks,
 * flats and uint16 projections with noise, all from a seeded stream. */
typedef struct daemon_scan {
    rtomo_scan_spec spec;       /* what scan_begin announces */
    uint16_t *darks, *flats, *projections;  /* frames, one after another */
    uint16_t *flats_after;      /* spec.n_flats_after frames, or NULL */
    int n_projections;          /* frames made (> n_proj when continuous) */
    double true_axis;           /* the phantom's axis when the scan asks for
                                   "axis": "auto" (NaN otherwise) */
    int axis_jump_at;           /* > 0: from this projection on the */
    double axis_after;          /* phantom turns about axis_after */
    size_t frame_samples;
} daemon_scan;

/* width x height detector, n_proj projections over 180 degrees from a random
 * start angle. */
void daemon_scan_make(daemon_scan *s, const char *id, int width, int height,
                      int n_proj, int n_darks, int n_flats, uint64_t seed);
/* A scan that asks for "axis": "auto", of a phantom turning about `axis`
 * (bins) over `degrees`, with one dark and n_flats flats. */
void daemon_scan_make_auto_axis(daemon_scan *s, const char *id, int width,
                                int height, int n_proj, double degrees,
                                double axis, int n_flats, uint64_t seed);
/* A continuous scan: windows of n_proj projections over 180 degrees, one
 * every `every` projections; `total` projections made, projection i at
 * angle_start + i * 180 / n_proj degrees (so the rotation goes on past
 * 180). */
void daemon_scan_make_continuous(daemon_scan *s, const char *id, int width,
                                 int height, int n_proj, int every, int total,
                                 int n_flats, uint64_t seed);
/* A continuous scan as above that asks for "axis": "auto", of a phantom
 * turning about `axis` until projection jump_at and about axis_after from
 * there on (a stage that moved). */
void daemon_scan_make_axis_jump(daemon_scan *s, const char *id, int width,
                                int height, int n_proj, int every, int total,
                                double axis, int jump_at, double axis_after,
                                uint64_t seed);
/* Flats after the projections (scan_begin flats_after): n copies of the
 * first flat whose open counts drift by up to +-drift per pixel. */
void daemon_scan_add_flats_after(daemon_scan *s, int n, double drift,
                                 uint64_t seed);
/* Send them (indices n_flats ..). */
void daemon_send_flats_after(rtomo_client *c, const daemon_scan *s);
/* The scan's own slice selection: these n detector rows, in this order
 * (copied; replaces any selection it had). */
void daemon_scan_select_rows(daemon_scan *s, const int *rows, int n);
void daemon_scan_free(daemon_scan *s);
void daemon_send_begin(rtomo_client *c, const daemon_scan *s);
/* A one-part message (a begin or end written out as JSON text) on the
 * first ingest connection, as it is. */
void daemon_send_header(rtomo_client *c, const char *header);
/* Send the darks and flats. */
void daemon_send_fields(rtomo_client *c, const daemon_scan *s);
void daemon_send_projection(rtomo_client *c, const daemon_scan *s, int p);
/* Projection p's frame sent as projection `index`, its angle (degrees)
 * in the frame's header: scans whose indices are not in angle order. */
void daemon_send_projection_as(rtomo_client *c, const daemon_scan *s, int p,
                               int index, double degrees);
/* Projection p on ingest connection `connection` (0-based). */
void daemon_send_projection_via(rtomo_client *c, const daemon_scan *s, int p,
                                int connection);
void daemon_send_end(rtomo_client *c, const daemon_scan *s);
/* begin, fields, every projection in order, the flats after, end. */
void daemon_send_scan(rtomo_client *c, const daemon_scan *s);
/* A client of n daemons: pushing to `ingest` (NULL: fanned out to every
 * daemon's), merging what all publish, with the first's control socket;
 * subscribed to everything, returned once every daemon's telemetry came. */
rtomo_client *daemon_connect_all(const daemon_proc *d, int n,
                                 const char *ingest);
/* A CURVE key pair DIR/NAME.key and DIR/NAME.key_secret (as rtomo-keygen
 * writes them); their paths into public_path / secret_path (256 bytes
 * each; NULL: not wanted). */
void daemon_make_key_pair(const char *dir, const char *name,
                          char *public_path, char *secret_path);
/* With several publishers: the slice of detector row `row` of `scan` from
 * publisher `source` among those received (NULL when none came), and how
 * many slices of `scan` that publisher sent. */
const daemon_image *daemon_slice_from(const daemon_inbox *in, int source,
                                      const char *scan, int row);
int daemon_count_slices_from(const daemon_inbox *in, int source,
                             const char *scan);
/* The same with every dark, flat and projection carrying only detector
 * rows [first, first + count) ("rows", as a router sends them). */
void daemon_send_scan_rows(rtomo_client *c, const daemon_scan *s, int first,
                           int count);

/* The CPU engine's slices of `rows` from the scan's frames (only the
 * projections with received[p] set, all when received is NULL), with the
 * scan's filter and the whole slice (roi NULL) or roi[4].  Returns n_rows
 * images one after another (malloc'd). */
float *daemon_reference_slices(const daemon_scan *s, const int *rows,
                               int n_rows, const unsigned char *received,
                               const int *roi);
/* The CPU engine's slices of a continuous window: projections
 * last - n_proj + 1 .. last, each in slot index mod n_proj at its angle. */
float *daemon_reference_window(const daemon_scan *s, const int *rows,
                               int n_rows, int last, const int *roi);

/* Wait for the first n_rows slices (detector rows 0..n_rows-1) of scan s
 * and check each against the CPU engine's (1e-5 of its largest value: a
 * daemon on the CPU backend). */
void daemon_check_against_engine(daemon_inbox *in, const daemon_scan *s,
                                 int n_rows);
/* The same within rel_tol of the largest value: a daemon on the GPU,
 * whose FBP differs from the CPU engine's by float rounding. */
void daemon_check_against_engine_tol(daemon_inbox *in, const daemon_scan *s,
                                     int n_rows, double rel_tol);

/* A random permutation of 0..n-1 (malloc'd). */
int *daemon_shuffled(int n, uint64_t *seed);

#endif /* DAEMON_HARNESS_H */
