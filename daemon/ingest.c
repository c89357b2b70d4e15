/*
 * ingest.c — rtomod's PULL socket: receives multipart messages, enforces
 * the size limits, decodes and validates them with the protocol codec and
 * hands them to the scan handlers.  Every bad message is rejected with its
 * specific reason (counted, logged, published on the event topic) and never
 * disturbs the scan in progress.
 *
 * Back-pressure: the socket is read only while every worker queue has room.
 * When the queues are full, messages stay in ZeroMQ's queue (bounded by
 * ingest.rcvhwm) and then in TCP, which slows the sender down; nothing
 * accepted is ever dropped for lack of room.
 *
 * Reordering: ZeroMQ keeps the order of one connection only.  A sender
 * with several connections may see a frame overtake its scan_begin, or a
 * projection overtake the darks and flats announced before it.  Such
 * "early" frames wait here, up to ingest.reorder_ms, for what they need;
 * then they are taken as they are (a frame without its begin is rejected
 * as unknown_scan).  The end side is in scan.c.
 */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "rtomod.h"

/* One received multipart message. */
typedef struct ingest_parts {
    zmq_msg_t header;
    zmq_msg_t payload;          /* empty when the message had one part */
    int n_parts;
} ingest_parts;

/* Receive one whole message (all its parts are there once the first is).
 * Returns 1 when a message was read, 0 when none waits, -1 on error. */
static int receive(void *socket, ingest_parts *m)
{
    zmq_msg_init(&m->header);
    zmq_msg_init(&m->payload);
    m->n_parts = 0;
    if (zmq_msg_recv(&m->header, socket, ZMQ_DONTWAIT) < 0)
        return errno == EAGAIN ? 0 : -1;
    m->n_parts = 1;
    if (!zmq_msg_more(&m->header))
        return 1;
    if (zmq_msg_recv(&m->payload, socket, 0) < 0)
        return -1;
    m->n_parts = 2;
    /* Parts beyond the second are counted for the reject, then freed. */
    int more = zmq_msg_more(&m->payload);
    while (more) {
        zmq_msg_t extra;
        zmq_msg_init(&extra);
        if (zmq_msg_recv(&extra, socket, 0) < 0) {
            zmq_msg_close(&extra);
            return -1;
        }
        m->n_parts++;
        more = zmq_msg_more(&extra);
        zmq_msg_close(&extra);
    }
    return 1;
}

static void parts_close(ingest_parts *m)
{
    zmq_msg_close(&m->header);
    zmq_msg_close(&m->payload);
}

/* The engine reads samples in place, so they must be aligned for their
 * type (at most 4 bytes; 8 is asked).  ZeroMQ 4.3 places large payloads
 * (8 KiB and more) 8-byte aligned within its receive buffer, so frames of
 * any real size are used where they are; small ones, which ZeroMQ may
 * place at odd addresses, are moved to an aligned copy first. */
#define PAYLOAD_ALIGNMENT 8

static int align_payload(zmq_msg_t *payload)
{
    size_t size = zmq_msg_size(payload);
    if (size == 0 || (uintptr_t)zmq_msg_data(payload) % PAYLOAD_ALIGNMENT == 0)
        return 0;
    zmq_msg_t copy;
    if (zmq_msg_init_size(&copy, size) != 0)
        return -1;
    memcpy(zmq_msg_data(&copy), zmq_msg_data(payload), size);
    zmq_msg_close(payload);
    zmq_msg_init(payload);
    zmq_msg_move(payload, &copy);
    return 0;
}

/* Size limits come before decoding, so that no work is spent on a message
 * that cannot be accepted. */
static int check_sizes(rtomod *d, ingest_parts *m)
{
    size_t header = zmq_msg_size(&m->header);
    size_t payload = zmq_msg_size(&m->payload);
    size_t limit = rtomod_config_max_payload(&d->cfg);
    if (header > RTOMO_HEADER_MAX) {
        rtomod_rejectf(d, RTOMO_REJECT_OVERSIZE, NULL, -1,
                       "header of %zu bytes exceeds %d bytes", header,
                       RTOMO_HEADER_MAX);
        return -1;
    }
    if (payload > limit) {
        char scan[RTOMO_ID_MAX];
        int named = rtomo_proto_peek_scan(zmq_msg_data(&m->header), header,
                                          scan) == 0;
        rtomod_rejectf(d, RTOMO_REJECT_OVERSIZE, named ? scan : NULL, -1,
                       "payload of %zu bytes exceeds ingest.max_message_mb "
                       "(%zu bytes)", payload, limit);
        return -1;
    }
    if (align_payload(&m->payload) != 0) {
        rtomod_rejectf(d, RTOMO_REJECT_OVERSIZE, NULL, -1,
                       "out of memory for a payload of %zu bytes", payload);
        return -1;
    }
    return 0;
}

/* Hand a decoded message to its scan handler; 0 when accepted. */
static int dispatch(rtomod *d, rtomo_ingest_msg *msg, zmq_msg_t *payload)
{
    switch (msg->type) {
    case RTOMO_MSG_SCAN_BEGIN: return rtomod_tomo_begin(d, msg);
    case RTOMO_MSG_DARK:
    case RTOMO_MSG_FLAT:
    case RTOMO_MSG_PROJECTION: return rtomod_tomo_frame(d, msg, payload);
    case RTOMO_MSG_SCAN_END: return rtomod_tomo_end(d, msg);
    case RTOMO_MSG_SBDX_BEGIN: return rtomod_sbdx_begin(d, msg);
    case RTOMO_MSG_SBDX_FRAME: return rtomod_sbdx_frame(d, msg, payload);
    case RTOMO_MSG_SBDX_END: return rtomod_sbdx_end(d, msg);
    default: break;
    }
    rtomod_rejectf(d, RTOMO_REJECT_TYPE, msg->scan, -1,
                   "message type %d has no handler", (int)msg->type);
    return -1;
}

static int is_frame(rtomo_msg_type type)
{
    return type == RTOMO_MSG_DARK || type == RTOMO_MSG_FLAT ||
           type == RTOMO_MSG_PROJECTION || type == RTOMO_MSG_SBDX_FRAME;
}

/* ------------------------------------------------------ early frames ---- */

/* A frame that came before its scan's begin. */
typedef struct rtomod_early {
    struct rtomod_early *next;
    rtomo_ingest_msg msg;       /* a frame: owns nothing */
    zmq_msg_t payload;
    double t_arrival;
} rtomod_early;

static void deliver(rtomod *d, rtomo_ingest_msg *msg, zmq_msg_t *payload,
                    int may_wait);

static rtomod_early *early_pop(rtomod *d, rtomod_early **link)
{
    rtomod_early *e = *link;
    *link = e->next;
    if (d->early_tail == e) {
        d->early_tail = NULL;
        for (rtomod_early *p = d->early_head; p; p = p->next)
            d->early_tail = p;
    }
    d->n_early--;
    d->budget.early_used -= zmq_msg_size(&e->payload);
    return e;
}

static void early_free(rtomod_early *e)
{
    zmq_msg_close(&e->payload);
    free(e);
}

/* Hand a waiting frame on for good (accepted or rejected now). */
static void early_deliver(rtomod *d, rtomod_early **link)
{
    rtomod_early *e = early_pop(d, link);
    d->t_received = e->t_arrival;
    deliver(d, &e->msg, &e->payload, 0);
    early_free(e);
}

static void on_early_timer(struct ev_loop *loop, ev_timer *timer, int revents)
{
    (void)revents;
    rtomod *d = timer->data;
    double oldest = rtomod_now() - d->cfg.ingest.reorder_ms / 1000.0;
    while (d->early_head && d->early_head->t_arrival <= oldest)
        early_deliver(d, &d->early_head);
    if (!d->early_head)
        ev_timer_stop(loop, timer);
}

/* The newest word on this id is a refused begin (and no scan of it
 * lives): its frames wait for nothing, they are rejected at once, so that
 * the refusal's record is whole when the sender asks. */
static int begin_refused(rtomod *d, const char *id)
{
    const rtomod_outcome *o = rtomod_history_find(&d->history, id);
    return o && strcmp(o->state, "refused") == 0 &&
           !rtomod_scan_named(d, id);
}

/* A frame for a scan that is not acquiring (unless its begin was refused),
 * or a projection that the announced darks and flats should precede, may
 * be early. */
static int may_be_early(rtomod *d, const rtomo_ingest_msg *msg)
{
    if (!is_frame(msg->type) || d->phase != RTOMOD_RUNNING ||
        d->cfg.ingest.reorder_ms == 0)
        return 0;
    rtomod_scan *scan = rtomod_scan_acquiring(d, msg->scan);
    if (!scan)
        return !begin_refused(d, msg->scan);
    return msg->type == RTOMO_MSG_PROJECTION &&
           rtomod_tomo_awaits_fields(scan);
}

/* Keep the frame (which arrived at t_arrival) until what it needs comes or
 * reorder_ms passes.  Returns 0, or -1 when out of memory or larger than
 * the whole hold (the caller delivers it now). */
static int early_keep(rtomod *d, const rtomo_ingest_msg *msg,
                      zmq_msg_t *payload, double t_arrival)
{
    if (zmq_msg_size(payload) > d->budget.early_limit)
        return -1;
    rtomod_early *e = calloc(1, sizeof *e);
    if (!e)
        return -1;
    e->msg = *msg;
    zmq_msg_init(&e->payload);
    zmq_msg_move(&e->payload, payload);
    e->t_arrival = t_arrival;
    if (d->early_tail)
        d->early_tail->next = e;
    else
        d->early_head = e;
    d->early_tail = e;
    d->budget.early_used += zmq_msg_size(&e->payload);
    /* Bounded like a work queue, in frames and in bytes (limits.early_mb):
     * the oldest give way, taken as they are now (most often rejected as
     * unknown_scan: their begin never came). */
    ++d->n_early;
    while (d->n_early > d->cfg.queue.frames ||
           (d->budget.early_used > d->budget.early_limit &&
            d->early_head != e))
        early_deliver(d, &d->early_head);
    if (!ev_is_active(&d->early_timer)) {
        ev_timer_set(&d->early_timer, 0.02, 0.02);
        ev_timer_start(d->loop, &d->early_timer);
    }
    return 0;
}

void rtomod_ingest_replay_early(rtomod *d, const char *scan)
{
    /* Take the scan's frames out first: some may have to wait again (a
     * projection before the darks and flats), and delivering may replay
     * (when the last flat comes). */
    rtomod_early *mine = NULL, **tail = &mine, **link = &d->early_head;
    while (*link) {
        if (strcmp((*link)->msg.scan, scan) == 0) {
            *tail = early_pop(d, link);
            tail = &(*tail)->next;
            *tail = NULL;
        } else {
            link = &(*link)->next;
        }
    }
    double t_received = d->t_received;
    while (mine) {
        rtomod_early *e = mine;
        mine = e->next;
        d->t_received = e->t_arrival;
        if (!may_be_early(d, &e->msg) ||
            early_keep(d, &e->msg, &e->payload, e->t_arrival) != 0)
            deliver(d, &e->msg, &e->payload, 0);
        early_free(e);
    }
    d->t_received = t_received;
}

void rtomod_ingest_flush_early(rtomod *d)
{
    while (d->early_head)
        early_deliver(d, &d->early_head);
    if (d->loop)
        ev_timer_stop(d->loop, &d->early_timer);
}

/* ------------------------------------------------------------ receive ---- */

/* Accept or reject a decoded message (may_wait: an early frame may wait for
 * its begin instead). */
static void deliver(rtomod *d, rtomo_ingest_msg *msg, zmq_msg_t *payload,
                    int may_wait)
{
    if (may_wait && may_be_early(d, msg) &&
        early_keep(d, msg, payload, d->t_received) == 0)
        return;
    size_t payload_size = zmq_msg_size(payload);
    d->handling_begin = msg->type == RTOMO_MSG_SCAN_BEGIN ||
                        msg->type == RTOMO_MSG_SBDX_BEGIN;
    int rc = dispatch(d, msg, payload);
    d->handling_begin = 0;
    if (rc == 0) {
        d->counters.accepted++;
        if (is_frame(msg->type)) {
            d->counters.frames++;
            d->counters.bytes += payload_size;
        }
    }
}

int rtomod_ingest_deliver(rtomod *d, rtomo_ingest_msg *msg,
                          zmq_msg_t *payload)
{
    uint64_t accepted = d->counters.accepted;
    deliver(d, msg, payload, 0);
    return d->counters.accepted > accepted ? 0 : -1;
}

static void handle(rtomod *d, ingest_parts *m)
{
    if (check_sizes(d, m) != 0)
        return;
    rtomo_ingest_msg msg;
    rtomo_reject_info why;
    memset(&msg, 0, sizeof msg);
    msg.type = RTOMO_MSG_TYPE_COUNT;    /* none, until the header says */
    if (rtomo_proto_decode_ingest(m->n_parts, zmq_msg_data(&m->header),
                                  zmq_msg_size(&m->header),
                                  zmq_msg_data(&m->payload),
                                  zmq_msg_size(&m->payload), &msg, &why) != 0) {
        /* A begin that does not decode is a refused begin all the same. */
        d->handling_begin = msg.type == RTOMO_MSG_SCAN_BEGIN ||
                            msg.type == RTOMO_MSG_SBDX_BEGIN;
        rtomod_reject(d, &why, msg.scan[0] ? msg.scan : NULL,
                      msg.frame.index);
        d->handling_begin = 0;
        return;
    }
    d->begin_header = zmq_msg_data(&m->header);
    d->begin_header_size = zmq_msg_size(&m->header);
    deliver(d, &msg, &m->payload, 1);
    d->begin_header = NULL;
    d->begin_header_size = 0;
    rtomo_ingest_msg_clear(&msg);
}

/* After the drain of a shutdown every message is refused (shutting_down),
 * so that its sender learns, until the accepted work is done: that needs
 * no room in the work queues. */
static int rejects_only(const rtomod *d)
{
    return d->phase == RTOMOD_FINISHING;
}

/* Read while messages wait, the workers have room and the fairness bound
 * is not reached. */
static void on_readable(rtomod_zwatch *w)
{
    rtomod *d = w->data;
    for (int i = 0; i < d->cfg.ingest.fairness; i++) {
        if (i > 0 && !rejects_only(d) && !rtomod_pool_has_room(&d->pool))
            break;
        ingest_parts m;
        int rc = receive(d->ingest, &m);
        if (rc > 0) {
            d->t_last_ingest = d->t_received = rtomod_now();
            handle(d, &m);
        } else if (rc < 0) {
            log_error("ingest: receive failed: %s", zmq_strerror(errno));
        }
        parts_close(&m);
        if (rc <= 0)
            break;
    }
}

/* Ingest reads only while it is open and the workers can take a frame. */
static int can_read(rtomod_zwatch *w)
{
    rtomod *d = w->data;
    return rejects_only(d) ||
           (d->phase <= RTOMOD_DRAINING && rtomod_pool_has_room(&d->pool));
}

int rtomod_ingest_has_waiting(rtomod *d)
{
    int events = 0;
    size_t len = sizeof events;
    return d->ingest &&
           zmq_getsockopt(d->ingest, ZMQ_EVENTS, &events, &len) == 0 &&
           (events & ZMQ_POLLIN);
}

int rtomod_ingest_open(rtomod *d, char *error, size_t error_size)
{
    /* ZeroMQ's own size limit is a safety net well above ours: it
     * disconnects the sender instead of rejecting one message, so the
     * daemon's "oversize" reject must come first. */
    int64_t hard = (int64_t)rtomod_config_max_payload(&d->cfg) * 2 +
                   RTOMO_HEADER_MAX;
    const int64_t options[] = {
        ZMQ_RCVHWM, d->cfg.ingest.rcvhwm, ZMQ_MAXMSGSIZE, hard,
        ZMQ_AFFINITY, (int64_t)rtomod_config_zmq_affinity(&d->cfg, 1), -1};
    d->ingest = rtomod_zsock_bind(d->zmq, ZMQ_PULL, d->cfg.ingest.endpoint,
                                  "ingest", options, error, error_size);
    if (!d->ingest)
        return -1;
    ev_init(&d->early_timer, on_early_timer);
    d->early_timer.data = d;
    if (rtomod_zwatch_start(d->loop, &d->ingest_watch, d->ingest, on_readable,
                            can_read, d) != 0) {
        snprintf(error, error_size, "ingest: cannot watch the socket: %s",
                 zmq_strerror(errno));
        rtomod_ingest_close(d);
        return -1;
    }
    return 0;
}

void rtomod_ingest_close(rtomod *d)
{
    if (!d->ingest)
        return;
    rtomod_ingest_flush_early(d);
    rtomod_zwatch_stop(d->loop, &d->ingest_watch);
    rtomod_zsock_close_now(d->ingest);
    d->ingest = NULL;
}
