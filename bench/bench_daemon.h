/*
 * bench_daemon.h — what the rtomod benchmarks share (bench_ingest,
 * bench_daemon_stream, bench_daemon_scan): the options every one of them
 * takes, start the daemon binary given on the command line (so that they
 * run from a bundle), connect a client with a live subscription, the
 * uint16 tomography scans they send, read status counters and the GPUs,
 * summarise latency samples, and print the results.  Errors are printed to
 * stderr and returned.
 */
#ifndef BENCH_DAEMON_H
#define BENCH_DAEMON_H

#include <getopt.h>
#include <stdint.h>

#include "../tests/daemon_process.h"
#include "rtomo_client.h"

/* ------------------------------------------------------ command line ---- */

/* Arguments passed on to rtomod with --arg, at most. */
#define BENCH_MAX_ARGS 64

/* The options every benchmark takes: --rtomod PATH (default: the rtomod
 * beside the benchmark), --backend NAME (default auto), --json FILE, and
 * --arg RTOMOD_ARGUMENT, repeatable. */
typedef struct bench_daemon_cli {
    char rtomod[1024];
    const char *backend;
    const char *json_path;
    const char *args[BENCH_MAX_ARGS];
    int n_args;
} bench_daemon_cli;

/* getopt codes of those options, and their entries for a long-option
 * table. */
enum {
    BENCH_OPT_RTOMOD = 0x1000, BENCH_OPT_BACKEND, BENCH_OPT_JSON,
    BENCH_OPT_ARG
};
#define BENCH_DAEMON_LONG_OPTIONS                                           \
    {"rtomod", required_argument, NULL, BENCH_OPT_RTOMOD},                  \
    {"backend", required_argument, NULL, BENCH_OPT_BACKEND},                \
    {"json", required_argument, NULL, BENCH_OPT_JSON},                      \
    {"arg", required_argument, NULL, BENCH_OPT_ARG}

/* The defaults above. */
void bench_cli_init(bench_daemon_cli *cli);
/* Apply getopt's code c with argument arg when it is one of the common
 * options: 0 when applied, -1 after a usage error, 1 when c is another
 * option (the caller's). */
int bench_cli_option(const char *program, bench_daemon_cli *cli, int c,
                     const char *arg);
/* rtomod's arguments into args (room for BENCH_MAX_ARGS + 8, NULL-
 * terminated): --backend, --log-level warn, --devices when devices is not
 * NULL, then every --arg in order. */
void bench_cli_daemon_args(const bench_daemon_cli *cli, const char *devices,
                           const char **args);

/* ------------------------------------------------------------ daemon ---- */

/* Waits (daemon start, subscription, results) give up after this long. */
#define BENCH_TIMEOUT_MS 300000

typedef struct bench_daemon {
    daemon_process proc;
    rtomo_client *client;
    char ipc_dir[32];           /* with ipc endpoints: their path prefix */
} bench_daemon;

typedef struct bench_daemon_options {
    const char *rtomod;         /* the binary */
    const char *const *args;    /* its arguments (NULL-terminated) */
    int connections;            /* ingest PUSH sockets */
    const char *const *topics;  /* subscriptions (NULL-terminated; NULL =
                                   all); telemetry is always added */
    int receive_hwm;            /* SUB high-water mark (0 = default) */
    int ipc;                    /* ingest and publish over ipc:// instead of
                                   loopback TCP */
} bench_daemon_options;

/* Start rtomod and connect to it; returns when the subscription is live
 * (a telemetry message arrived).  0, or -1 with a message printed. */
int bench_daemon_open(bench_daemon *b, const bench_daemon_options *opt);
/* Close the client and SIGTERM the daemon; returns its exit status. */
int bench_daemon_close(bench_daemon *b);

/* status counters.<name> (or telemetry.<group>.<name> with
 * bench_telemetry), -1 when the daemon does not answer. */
long bench_counter(rtomo_client *c, const char *name);
double bench_telemetry(rtomo_client *c, const char *group, const char *name);

/* The daemon's status "gpus" (a new reference), NULL when it does not
 * answer. */
json_t *bench_gpus(rtomo_client *c);

/* -------------------------------------------------------------- scans ---- */

/* A uint16 tomography scan `id`: width x height detector, n_proj
 * projections, `slices` consecutive rows reconstructed around the
 * middle. */
void bench_scan_spec(rtomo_scan_spec *spec, const char *id, long width,
                     long height, long n_proj, long slices);
/* The header of a uint16 projection of scan `id` (angle and shift from
 * the scan); the caller sets the index. */
void bench_projection_header(rtomo_frame_header *f, const char *id,
                             long width, long height);
/* n frames of `samples` plausible uint16 counts back to back (a smooth
 * object in front of a flat beam); malloc'd, NULL when out of memory. */
uint16_t *bench_smooth_frames(size_t samples, int n);

/* ------------------------------------------------------------ results ---- */

/* The p-th percentile (0..100, nearest rank) of n values; sorts them. */
double bench_percentile(double *values, int n, double p);

/* Print the results to stdout and write them to path when it is not NULL
 * (a message when that fails); takes the reference to json. */
void bench_print_json(const char *program, json_t *json, const char *path);

#endif /* BENCH_DAEMON_H */
