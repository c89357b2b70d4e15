/*
 * loop.c — ZeroMQ sockets inside the libev loop (see rtomod_loop.h).
 */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <zmq.h>

#include "rtomod_log.h"
#include "rtomod_loop.h"
#include "rtomod_security.h"

int rtomod_zsock_readable(void *socket)
{
    int events = 0;
    size_t len = sizeof events;
    if (zmq_getsockopt(socket, ZMQ_EVENTS, &events, &len) != 0)
        return 0;
    return (events & ZMQ_POLLIN) != 0;
}

static int may_read(rtomod_zwatch *w)
{
    return (!w->can_read || w->can_read(w)) && rtomod_zsock_readable(w->socket);
}

/* The fd only wakes the loop; the check watcher does the reading. */
static void io_cb(struct ev_loop *loop, ev_io *io, int revents)
{
    (void)loop; (void)io; (void)revents;
}

static void idle_cb(struct ev_loop *loop, ev_idle *idle, int revents)
{
    (void)loop; (void)idle; (void)revents;
}

static void prepare_cb(struct ev_loop *loop, ev_prepare *prepare, int revents)
{
    (void)revents;
    rtomod_zwatch *w = prepare->data;
    if (may_read(w))
        ev_idle_start(loop, &w->idle);
}

static void check_cb(struct ev_loop *loop, ev_check *check, int revents)
{
    (void)revents;
    rtomod_zwatch *w = check->data;
    ev_idle_stop(loop, &w->idle);
    if (may_read(w))
        w->on_readable(w);
}

int rtomod_zwatch_start(struct ev_loop *loop, rtomod_zwatch *w, void *socket,
                        rtomod_zwatch_fn on_readable,
                        rtomod_zwatch_ready_fn can_read, void *data)
{
    int fd;
    size_t len = sizeof fd;
    if (zmq_getsockopt(socket, ZMQ_FD, &fd, &len) != 0)
        return -1;
    w->socket = socket;
    w->data = data;
    w->on_readable = on_readable;
    w->can_read = can_read;
    ev_io_init(&w->io, io_cb, fd, EV_READ);
    ev_prepare_init(&w->prepare, prepare_cb);
    ev_check_init(&w->check, check_cb);
    ev_idle_init(&w->idle, idle_cb);
    w->prepare.data = w;
    w->check.data = w;
    ev_io_start(loop, &w->io);
    ev_prepare_start(loop, &w->prepare);
    ev_check_start(loop, &w->check);
    return 0;
}

void rtomod_zwatch_stop(struct ev_loop *loop, rtomod_zwatch *w)
{
    ev_io_stop(loop, &w->io);
    ev_prepare_stop(loop, &w->prepare);
    ev_check_stop(loop, &w->check);
    ev_idle_stop(loop, &w->idle);
}

void *rtomod_zsock_bind(void *ctx, int type, const char *endpoint,
                        const char *role, const int64_t *options, char *error,
                        size_t error_size)
{
    void *s = zmq_socket(ctx, type);
    if (!s) {
        snprintf(error, error_size, "%s: cannot create a socket: %s", role,
                 zmq_strerror(errno));
        return NULL;
    }
    for (const int64_t *o = options; o && o[0] != -1; o += 2) {
        int option = (int)o[0], value = (int)o[1];
        /* ZMQ_MAXMSGSIZE and ZMQ_AFFINITY are the 64-bit options among
         * those used. */
        uint64_t mask = (uint64_t)o[1];
        int rc = option == ZMQ_MAXMSGSIZE
                     ? zmq_setsockopt(s, option, &o[1], sizeof o[1])
                 : option == ZMQ_AFFINITY
                     ? zmq_setsockopt(s, option, &mask, sizeof mask)
                     : zmq_setsockopt(s, option, &value, sizeof value);
        if (rc != 0) {
            snprintf(error, error_size, "%s: cannot set socket option %d: %s",
                     role, option, zmq_strerror(errno));
            zmq_close(s);
            return NULL;
        }
    }
    /* CURVE keys and the ZAP domain, like the options, before binding. */
    if (rtomod_security_prepare(ctx, s, role, error, error_size) != 0) {
        zmq_close(s);
        return NULL;
    }
    if (zmq_bind(s, endpoint) != 0) {
        snprintf(error, error_size, "%s: cannot bind %s: %s", role, endpoint,
                 zmq_strerror(errno));
        rtomod_zsock_close_now(s);
        return NULL;
    }
    char bound[256] = "";
    size_t len = sizeof bound;
    zmq_getsockopt(s, ZMQ_LAST_ENDPOINT, bound, &len);
    log_info("%s listening on %s", role, bound[0] ? bound : endpoint);
    return s;
}

void rtomod_zsock_close_now(void *socket)
{
    int zero = 0;
    zmq_setsockopt(socket, ZMQ_LINGER, &zero, sizeof zero);
    zmq_close(socket);
}
