/*
 * rtomod_frame_rows.h — partial-row tomography frames made whole for the
 * plans (frame_rows.c).
 */
#ifndef RTOMOD_FRAME_ROWS_H
#define RTOMOD_FRAME_ROWS_H

#include <stddef.h>

#include <zmq.h>

#include "rtomo_protocol.h"

/* A frame whose header says it carries rows [rows_first, rows_first +
 * rows_count) of its shape: *payload is replaced by the whole frame (the
 * rows in place, every other row zero) and f says so (rows_count 0).
 * Nothing to do for a whole frame; a payload of the whole frame's size
 * holds the rows in place already (rtomod_frame_rows_blank), and only f
 * changes.  keep: ingest.keep_buffers (frame_rows.c says why it matters).
 * 0, or -1 when out of memory (payload and f unchanged). */
int rtomod_frame_rows_widen(rtomo_frame_header *f, int keep,
                            zmq_msg_t *payload);

/* A new message of `size` bytes, zero outside bytes [lo, hi), which the
 * caller writes (lo <= hi <= size): a whole frame for a detector input to
 * decode a share of rows into.  keep: ingest.keep_buffers.  0, or -1 when
 * out of memory (*payload is then an empty message). */
int rtomod_frame_rows_blank(size_t size, size_t lo, size_t hi, int keep,
                            zmq_msg_t *payload);

#endif
