/*
 * router_stream2.h — what rtomo-router makes of one DECTRIS Stream V2
 * message (PROTOCOL.md 10.5), without any socket: which messages it may
 * cut into detector rows, and each daemon's message of an image cut to
 * the rows it needs.  Kept apart from the program so that the tests can
 * check every rule on its own.
 *
 * Only image messages are cut; start, end and every other message go
 * whole to every daemon, as does an image the router cannot read
 * completely (each daemon then rejects it with its own reason).  A cut
 * image is the original message with, for every channel, the typed
 * array's bytes replaced by those of the daemon's rows, and one key added
 * to the top-level map (rtomo's own extension, PROTOCOL.md 10.5):
 *
 *   "rtomo_rows": {"first": F, "count": C, "offset": E}
 *
 * F, C: the detector rows the image carries whole; E: the element (row-
 * major index in the whole image, whose [height, width] stay those of
 * the detector) at which every channel's decoded data begins.
 * Uncompressed arrays hold rows F .. F + C - 1 exactly (E = F x width).
 * bslz4 arrays are not decompressed: the router walks the block size
 * fields only and keeps the whole blocks that hold those rows, behind a
 * new 12-byte bslz4 header, so that E is the first kept block's first
 * element and the data may hold a few elements more on either side.
 */
#ifndef RTOMO_ROUTER_STREAM2_H
#define RTOMO_ROUTER_STREAM2_H

#include <stddef.h>
#include <stdint.h>

#include "router_route.h"

/* Channels (typed arrays) of one image the router cuts at most. */
#define ROUTER_S2_ARRAYS 8
/* CBOR nesting the router follows at most (a Stream V2 message nests 5
 * deep; the daemon refuses more than 32). */
#define ROUTER_S2_DEPTH_MAX 32

/* One channel's typed array: where its bytes lie in the message. */
typedef struct router_s2_array {
    size_t head;                /* the byte string's head */
    size_t data, length;        /* its bytes */
    size_t *blocks;             /* bslz4: n_blocks + 1 offsets in the
                                   bytes, where each block's size field
                                   begins, the last where the elements
                                   left in no block begin (malloc'd) */
    size_t n_blocks;
} router_s2_array;

/* What the router made of one message. */
typedef struct router_s2_message {
    int cut;                    /* 1: an image the router can cut */
    int is_image;               /* "type": "image" (counted as a frame) */
    const char *why_whole;      /* cut 0: why not, for messages */
    uint64_t series_id;         /* its series_id; 0 when it has none */
    const uint8_t *buf;         /* the message (not owned) */
    size_t size;
    size_t map_head, map_head_length;   /* the top-level map's head */
    uint64_t map_pairs;         /* its pairs; definite maps only */
    int map_indefinite;
    /* The image, the same in every channel (else it is not cut). */
    long height, width;
    int elem_size;              /* bytes of an element: 1, 2 or 4 */
    int bslz4;
    uint32_t block_bytes;       /* bslz4 */
    size_t block_elements;      /* bslz4 */
    router_s2_array arrays[ROUTER_S2_ARRAYS];
    int n_arrays;
} router_s2_message;

/* Read the message buf[0..size) (which must outlive m).  Never fails:
 * what cannot be cut has cut 0 and the reason. */
void router_s2_read(router_s2_message *m, const void *buf, size_t size);
void router_s2_clear(router_s2_message *m);

/* A cut image's message for a daemon that needs `rows` (within the
 * image): malloc'd, *size bytes; NULL when out of memory. */
uint8_t *router_s2_cut(const router_s2_message *m, router_rows rows,
                       size_t *size);

/* The element offset E at which a cut for `rows` begins. */
size_t router_s2_offset(const router_s2_message *m, router_rows rows);

#endif /* RTOMO_ROUTER_STREAM2_H */
