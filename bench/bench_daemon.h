/*
 * bench_daemon.h — what the rtomod benchmarks share (bench_ingest,
 * bench_daemon_stream, bench_daemon_scan): start the daemon binary given
 * on the command line (so that they run from a bundle), connect a client
 * with a live subscription, read status counters, and summarise latency
 * samples.  Errors are printed to stderr and returned.
 */
#ifndef BENCH_DAEMON_H
#define BENCH_DAEMON_H

#include "../tests/daemon_process.h"
#include "rtomo_client.h"

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

/* The p-th percentile (0..100, nearest rank) of n values; sorts them. */
double bench_percentile(double *values, int n, double p);

#endif /* BENCH_DAEMON_H */
