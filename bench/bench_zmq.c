/*
 * bench_zmq.c — the baseline for rtomod's ingest figures: how fast ZeroMQ
 * alone moves frames over TCP loopback on this machine, PUSH to PULL, with
 * the same message size, connection counts and I/O threads as
 * bench_ingest, and nothing done with the frames but closing them.  rtomod's
 * ingest rate is quoted against this number measured in the same run.
 *
 *   bench_zmq [--mb 8.4] [--messages 1000] [--connections 1,2,4]
 *             [--io-threads N] [--endpoint tcp://127.0.0.1:PORT]
 *
 * The sender (one thread, zero-copy sends of one buffer, one PUSH socket
 * per connection, messages round-robin) and the receiver (one thread, one
 * PULL socket bound) have separate ZeroMQ contexts of --io-threads I/O
 * threads each (default: one per connection).  Prints one line per
 * connection count.
 */
#include "config.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <zmq.h>

#define MAX_CONNECTIONS 16

typedef struct run {
    const char *endpoint;
    size_t bytes;
    long messages;
    int connections;
    int io_threads;
    char *buffer;
} run;

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void *new_context(int io_threads)
{
    void *ctx = zmq_ctx_new();
    if (ctx)
        zmq_ctx_set(ctx, ZMQ_IO_THREADS, io_threads);
    return ctx;
}

/* Send r->messages frames round-robin over r->connections PUSH sockets. */
static void *send_all(void *arg)
{
    run *r = arg;
    void *ctx = new_context(r->io_threads);
    void *push[MAX_CONNECTIONS];
    /* Spread the connections over the I/O threads of both sides as
     * rtomo_client does: each socket pinned to its own thread here, and a
     * pause after each connect so that the receiver's ZeroMQ counts the
     * connection before placing the next (else all share one thread). */
    for (int i = 0; i < r->connections; i++) {
        push[i] = zmq_socket(ctx, ZMQ_PUSH);
        int hwm = 16;
        uint64_t affinity = (uint64_t)1 << (i % r->io_threads);
        zmq_setsockopt(push[i], ZMQ_SNDHWM, &hwm, sizeof hwm);
        zmq_setsockopt(push[i], ZMQ_AFFINITY, &affinity, sizeof affinity);
        if (zmq_connect(push[i], r->endpoint) != 0)
            fprintf(stderr, "bench_zmq: connect %s: %s\n", r->endpoint,
                    zmq_strerror(zmq_errno()));
        nanosleep(&(struct timespec){0, 50 * 1000 * 1000}, NULL);
    }
    for (long k = 0; k < r->messages; k++) {
        zmq_msg_t m;
        zmq_msg_init_data(&m, r->buffer, r->bytes, NULL, NULL);
        if (zmq_msg_send(&m, push[k % r->connections], 0) < 0) {
            fprintf(stderr, "bench_zmq: send: %s\n", zmq_strerror(zmq_errno()));
            zmq_msg_close(&m);
            break;
        }
    }
    for (int i = 0; i < r->connections; i++) {
        int linger = -1;
        zmq_setsockopt(push[i], ZMQ_LINGER, &linger, sizeof linger);
        zmq_close(push[i]);
    }
    zmq_ctx_term(ctx);
    return NULL;
}

/* Receive every message; returns GB/s from the first to the last. */
static double measure(run *r)
{
    void *ctx = new_context(r->io_threads);
    void *pull = zmq_socket(ctx, ZMQ_PULL);
    int hwm = 16;
    zmq_setsockopt(pull, ZMQ_RCVHWM, &hwm, sizeof hwm);
    if (zmq_bind(pull, r->endpoint) != 0) {
        fprintf(stderr, "bench_zmq: bind %s: %s\n", r->endpoint,
                zmq_strerror(zmq_errno()));
        zmq_close(pull);
        zmq_ctx_term(ctx);
        return 0.0;
    }
    pthread_t sender;
    pthread_create(&sender, NULL, send_all, r);
    double t0 = 0.0;
    long got = 0;
    for (; got < r->messages; got++) {
        zmq_msg_t m;
        zmq_msg_init(&m);
        if (zmq_msg_recv(&m, pull, 0) < 0)
            break;
        if (got == 0)
            t0 = now_seconds();
        zmq_msg_close(&m);
    }
    double seconds = now_seconds() - t0;
    pthread_join(sender, NULL);
    zmq_close(pull);
    zmq_ctx_term(ctx);
    /* The first message starts the clock, so it is not counted. */
    return got > 1 ? (double)(got - 1) * (double)r->bytes / seconds / 1e9 : 0.0;
}

int main(int argc, char **argv)
{
    double mb = 2048.0 * 2048.0 * 2.0 / 1e6;
    long messages = 1000;
    int io_threads = 0;
    const char *endpoint = "tcp://127.0.0.1:25555";
    char counts[64] = "1,2,4";
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--mb"))
            mb = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--messages"))
            messages = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--connections"))
            snprintf(counts, sizeof counts, "%s", argv[i + 1]);
        else if (!strcmp(argv[i], "--io-threads"))
            io_threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--endpoint"))
            endpoint = argv[i + 1];
        else {
            fprintf(stderr, "bench_zmq: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (argc % 2 == 0 || mb <= 0 || messages < 2) {
        fprintf(stderr, "usage: bench_zmq [--mb MB] [--messages N] "
                "[--connections 1,2,4] [--io-threads N] [--endpoint EP]\n");
        return 2;
    }
    size_t bytes = (size_t)(mb * 1e6);
    char *buffer = malloc(bytes);
    if (!buffer) {
        fprintf(stderr, "bench_zmq: out of memory for a %.1f MB message\n", mb);
        return 1;
    }
    for (size_t i = 0; i < bytes; i++)
        buffer[i] = (char)(i * 2654435761u >> 24);   /* not zeros */
    printf("ZeroMQ %d.%d.%d alone, TCP loopback, %.1f MB messages, %ld per run\n",
           ZMQ_VERSION_MAJOR, ZMQ_VERSION_MINOR, ZMQ_VERSION_PATCH, mb,
           messages);
    printf(" conn  io_threads      GB/s\n");
    for (char *tok = strtok(counts, ","); tok; tok = strtok(NULL, ",")) {
        int k = atoi(tok);
        if (k < 1 || k > MAX_CONNECTIONS)
            continue;
        run r = {endpoint, bytes, messages, k, io_threads ? io_threads : k,
                 buffer};
        printf("%5d %11d %9.3f\n", k, r.io_threads, measure(&r));
        fflush(stdout);
    }
    free(buffer);
    return 0;
}
