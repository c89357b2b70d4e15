/*
 * rtomod_publish.h — the PUB socket: every published message is three parts
 * [topic, header JSON, payload] (the payload may be empty).
 *
 * Sends never block.  ZeroMQ drops messages for a subscriber whose queue
 * is full, silently and per subscriber, so one stalled subscriber costs the
 * others nothing; those drops cannot be seen from here.  (The former
 * publish.nodrop mode, which refused a message for everyone once any queue
 * was full, let one stalled subscriber silence all: it was removed.)
 *
 * Each subscriber's queue is bounded in bytes, publish.queue_mb: ZeroMQ
 * bounds it in messages (its high-water mark), so the mark is queue_mb
 * over the largest image rtomod publishes (publish.max_image_mb; a begin
 * whose images are larger is refused), never above publish.sndhwm.  A
 * subscriber that never reads pins at most queue_mb.  The mark must hold
 * a batch of images published at once (rtomod warns at start when it
 * cannot).  The mark is set
 * once, before the socket binds: libzmq applies a changed mark to
 * connected subscribers too, but a lowered one can leave a pipe that
 * counts itself full for good (its reader acknowledges reads only every
 * half of the old mark), which silenced a subscriber in testing.
 *
 * Every header carries "seq", a sequence number per topic that counts
 * every message of the topic offered to the socket, sent or refused: a
 * subscriber that sees a gap knows how many it lost.
 */
#ifndef RTOMOD_PUBLISH_H
#define RTOMOD_PUBLISH_H

#include <stdint.h>

#include "rtomod_buffer.h"
#include "rtomod_config.h"
#include "rtomo_protocol.h"

/* Topics with their own sequence numbers (others share the last). */
#define RTOMOD_TOPICS 7

typedef struct rtomod_publisher {
    void *socket;
    uint64_t published;         /* messages sent */
    uint64_t dropped;           /* messages refused (EAGAIN) */
    uint64_t seq[RTOMOD_TOPICS];    /* next sequence number per topic */
    int hwm;                    /* messages per subscriber at most */
} rtomod_publisher;

int rtomod_publisher_open(rtomod_publisher *pub, void *ctx,
                          const rtomod_config *cfg, char *error,
                          size_t error_size);
/* Close, letting queued messages flush for up to linger_ms. */
void rtomod_publisher_close(rtomod_publisher *pub, int linger_ms);

/* The sequence number for the next message of `topic` (counted as
 * offered: call it once per message, just before rtomod_publish). */
uint64_t rtomod_publish_seq(rtomod_publisher *pub, const char *topic);

/* Send [topic, header, data].  `buffer` (may be NULL when data is NULL or
 * the caller keeps data alive until this returns) is a reference the call
 * takes over: ZeroMQ keeps it until the payload is on the wire.  Returns 0
 * when sent, -1 when dropped. */
int rtomod_publish(rtomod_publisher *pub, const char *topic,
                   const char *header, rtomod_buffer *buffer, const void *data,
                   size_t size);

/* Publish an event (empty payload) and log it at `level`.  `scan` and
 * `reason` may be NULL, index -1 when none. */
void rtomod_publish_event(rtomod_publisher *pub, rtomod_log_level level,
                          const char *event, const char *scan, int64_t index,
                          const char *reason, const char *format, ...)
    __attribute__((format(printf, 7, 8)));

#endif /* RTOMOD_PUBLISH_H */
