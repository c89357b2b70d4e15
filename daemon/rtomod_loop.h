/*
 * rtomod_loop.h — ZeroMQ sockets inside the libev loop.
 *
 * ZMQ_FD signals edge-triggered and only says "look at ZMQ_EVENTS", so the
 * known-good pattern is used: an ev_io wakes the loop, an ev_prepare checks
 * ZMQ_EVENTS before the loop blocks and starts an ev_idle when messages are
 * already waiting (so the loop does not sleep on a fd that will not fire
 * again), and an ev_check calls the handler while messages wait.  The
 * handler reads a bounded number of messages per iteration, so one socket
 * under a flood cannot starve the others.
 *
 * A watcher can be paused (ingest pauses while the work queues are full):
 * its handler is not called, and the loop sleeps until something else (a
 * worker freeing room) wakes it.
 */
#ifndef RTOMOD_LOOP_H
#define RTOMOD_LOOP_H

#include <stddef.h>
#include <stdint.h>

#include <ev.h>

typedef struct rtomod_zwatch rtomod_zwatch;

/* Called while the socket has a message to read; reads at most its fairness
 * bound of messages. */
typedef void (*rtomod_zwatch_fn)(rtomod_zwatch *w);
/* Whether the handler may read now (NULL: always). */
typedef int (*rtomod_zwatch_ready_fn)(rtomod_zwatch *w);

struct rtomod_zwatch {
    void *socket;
    void *data;                 /* the owner's pointer */
    rtomod_zwatch_fn on_readable;
    rtomod_zwatch_ready_fn can_read;
    ev_io io;
    ev_prepare prepare;
    ev_check check;
    ev_idle idle;
};

/* Start watching `socket` (0 on success; -1 when ZMQ_FD cannot be read). */
int rtomod_zwatch_start(struct ev_loop *loop, rtomod_zwatch *w, void *socket,
                        rtomod_zwatch_fn on_readable,
                        rtomod_zwatch_ready_fn can_read, void *data);
void rtomod_zwatch_stop(struct ev_loop *loop, rtomod_zwatch *w);

/* 1 when a message can be read from `socket` now. */
int rtomod_zsock_readable(void *socket);

/* Create a socket of `type`, set the options given as (option, value)
 * pairs ending with -1 (before binding: listeners copy them), bind it to
 * `endpoint` and log where it listens (`role` names it).  Returns the socket
 * or NULL with `error` filled. */
void *rtomod_zsock_bind(void *ctx, int type, const char *endpoint,
                        const char *role, const int64_t *options, char *error,
                        size_t error_size);
/* Close a socket at once (linger 0), dropping any message it has not
 * sent. */
void rtomod_zsock_close_now(void *socket);

#endif /* RTOMOD_LOOP_H */
