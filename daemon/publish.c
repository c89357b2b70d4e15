/*
 * publish.c — the PUB socket (see rtomod_publish.h).
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zmq.h>

#include "rtomod_log.h"
#include "rtomod_loop.h"
#include "rtomod_publish.h"

int rtomod_publisher_open(rtomod_publisher *pub, void *ctx,
                          const rtomod_config *cfg, char *error,
                          size_t error_size)
{
    memset(pub, 0, sizeof *pub);
    pub->hwm = rtomod_config_publish_hwm(cfg);
    const int64_t options[] = {
        ZMQ_SNDHWM, pub->hwm,
        ZMQ_AFFINITY, (int64_t)rtomod_config_zmq_affinity(cfg, 0), -1};
    pub->socket = rtomod_zsock_bind(ctx, ZMQ_PUB, cfg->publish.endpoint,
                                    "publish", options, error, error_size);
    return pub->socket ? 0 : -1;
}

void rtomod_publisher_close(rtomod_publisher *pub, int linger_ms)
{
    if (!pub->socket)
        return;
    zmq_setsockopt(pub->socket, ZMQ_LINGER, &linger_ms, sizeof linger_ms);
    zmq_close(pub->socket);
    pub->socket = NULL;
}

uint64_t rtomod_publish_seq(rtomod_publisher *pub, const char *topic)
{
    static const char *const topics[RTOMOD_TOPICS - 1] = {
        RTOMO_TOPIC_SLICE, RTOMO_TOPIC_PLANE, RTOMO_TOPIC_COMPOSITE,
        RTOMO_TOPIC_DEPTH, RTOMO_TOPIC_TELEMETRY, RTOMO_TOPIC_EVENT};
    int t = 0;
    while (t < RTOMOD_TOPICS - 1 && strcmp(topics[t], topic) != 0)
        t++;
    return pub->seq[t]++;
}

/* ZeroMQ's free function for payloads that point into a shared buffer. */
static void release_buffer(void *data, void *hint)
{
    (void)data;
    rtomod_buffer_unref(hint);
}

int rtomod_publish(rtomod_publisher *pub, const char *topic,
                   const char *header, rtomod_buffer *buffer, const void *data,
                   size_t size)
{
    zmq_msg_t payload;
    if (buffer && size > 0)
        zmq_msg_init_data(&payload, (void *)data, size, release_buffer, buffer);
    else {
        zmq_msg_init_size(&payload, size);
        if (size)
            memcpy(zmq_msg_data(&payload), data, size);
        rtomod_buffer_unref(buffer);
    }
    /* The topic is the first part: a refused message fails here, before any
     * part is queued (high-water marks count whole messages). */
    if (zmq_send(pub->socket, topic, strlen(topic),
                 ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0) {
        if (errno != EAGAIN)
            log_error("publish: cannot send %s: %s", topic,
                      zmq_strerror(errno));
        zmq_msg_close(&payload);
        pub->dropped++;
        return -1;
    }
    if (zmq_send(pub->socket, header, strlen(header),
                 ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0 ||
        zmq_msg_send(&payload, pub->socket, ZMQ_DONTWAIT) < 0) {
        log_error("publish: %s cut short after its topic: %s", topic,
                  zmq_strerror(errno));
        zmq_msg_close(&payload);
        pub->dropped++;
        return -1;
    }
    pub->published++;
    return 0;
}

void rtomod_publish_event(rtomod_publisher *pub, rtomod_log_level level,
                          const char *event, const char *scan, int64_t index,
                          const char *reason, const char *format, ...)
{
    rtomo_event ev;
    memset(&ev, 0, sizeof ev);
    snprintf(ev.event, sizeof ev.event, "%s", event);
    snprintf(ev.scan, sizeof ev.scan, "%s", scan ? scan : "");
    ev.index = index;
    snprintf(ev.reason, sizeof ev.reason, "%s", reason ? reason : "");
    va_list ap;
    va_start(ap, format);
    vsnprintf(ev.message, sizeof ev.message, format, ap);
    va_end(ap);
    ev.seq = rtomod_publish_seq(pub, RTOMO_TOPIC_EVENT);
    int named = reason && *reason && strcmp(reason, event) != 0;
    rtomod_log(level, "event %s%s%s%s: %s", event, named ? " (" : "",
               named ? reason : "", named ? ")" : "", ev.message);
    char *json = rtomo_proto_encode_event(&ev);
    if (!json) {
        log_error("publish: out of memory encoding an event");
        return;
    }
    rtomod_publish(pub, RTOMO_TOPIC_EVENT, json, NULL, NULL, 0);
    free(json);
}
