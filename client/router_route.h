/*
 * router_route.h — what rtomo-router decides about one ingest message,
 * without any socket: which messages it may cut into detector rows, which
 * rows each daemon needs, the header that says so ("rows", PROTOCOL.md
 * 3.4) and where those rows lie in the payload.  Kept apart from the
 * program so that the tests can check every rule on its own.
 *
 * The router cuts only what it understands completely: a version-1 dark,
 * flat or projection of two parts whose payload is exactly its shape.  A
 * version-1 sbdx_frame of two parts is dealt to one daemon (SBDX frames
 * are independent: any daemon can take any frame; router_sbdx.h picks
 * which).  Everything else goes to every daemon as it came, so that each
 * daemon rejects it with its own specific reason and counts it; nothing is
 * dropped because the router could not read it.
 */
#ifndef RTOMO_ROUTER_ROUTE_H
#define RTOMO_ROUTER_ROUTE_H

#include <stddef.h>

#include <jansson.h>

#include "rtomo_protocol.h"

/* Daemons one router feeds at most (--daemon). */
#define ROUTER_MAX_DAEMONS 64

/* A band of detector rows: first .. first + count - 1. */
typedef struct router_rows {
    long first, count;
} router_rows;

/* One --daemon EP=FIRST:COUNT[,stream2=EP2]. */
typedef struct router_target {
    char endpoint[256];
    router_rows rows;
    char stream2[256];          /* its Stream V2 input; "" = none */
} router_target;

typedef enum router_route {
    ROUTER_WHOLE = 0,           /* to every daemon as it came */
    ROUTER_SPLIT,               /* each daemon gets the rows it needs */
    ROUTER_DEAL                 /* to one daemon, as it came (SBDX frames) */
} router_route;

/* What the router made of one ingest message. */
typedef struct router_message {
    router_route route;
    int type;                   /* its "type" (rtomo_msg_type), -1 when it
                                   names none the router knows */
    int is_frame;               /* dark, flat, projection or sbdx_frame by
                                   its "type" (counted as frames) */
    char scan[RTOMO_ID_MAX];    /* its scan id; "" when it names none */
    const char *why_whole;      /* ROUTER_WHOLE: why, for messages */
    json_t *header;             /* ROUTER_SPLIT: the parsed header (owned) */
    long height, width;         /* ROUTER_SPLIT: the frame's shape */
    size_t row_bytes;           /* ROUTER_SPLIT: bytes of one row */
} router_message;

/* Read a message of `parts` parts whose first part is header[0..size)
 * and whose second holds payload_size bytes (0 when there is none).
 * Never fails: what cannot be split is ROUTER_WHOLE with the reason. */
void router_message_read(router_message *m, const void *header, size_t size,
                         int parts, size_t payload_size);
void router_message_clear(router_message *m);

/* The rows of a frame of `height` rows that a daemon reconstructing `own`
 * needs, with `margin` rows more on either side, clipped to the detector.
 * Returns 1 with *out set when that is a part of the frame; 0 when the
 * frame goes whole: the band covers every row (nothing to cut), or lies
 * entirely outside the detector (the daemon decides what to make of it). */
int router_rows_needed(router_rows own, long margin, long height,
                       router_rows *out);

/* The header of a ROUTER_SPLIT message with "rows": {"first", "count"}
 * set (in m->header, which keeps it until the next call): compact JSON
 * (malloc'd, the caller frees), NULL when out of memory. */
char *router_header_with_rows(router_message *m, router_rows rows);

/* Where `rows` lie in a ROUTER_SPLIT message's payload. */
void router_payload_range(const router_message *m, router_rows rows,
                          size_t *offset, size_t *length);

/* Parse "EP=FIRST:COUNT", optionally followed by ",stream2=EP2" (the
 * daemon's Stream V2 input; the last '=' before it ends EP).  0, or -1
 * with a sentence in why[why_size]. */
int router_parse_target(const char *text, router_target *out, char *why,
                        size_t why_size);

#endif /* RTOMO_ROUTER_ROUTE_H */
