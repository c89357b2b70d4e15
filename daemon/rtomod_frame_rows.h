/*
 * rtomod_frame_rows.h — partial-row tomography frames made whole for the
 * plans (frame_rows.c).
 */
#ifndef RTOMOD_FRAME_ROWS_H
#define RTOMOD_FRAME_ROWS_H

#include <zmq.h>

#include "rtomo_protocol.h"

/* A frame whose header says it carries rows [rows_first, rows_first +
 * rows_count) of its shape: *payload is replaced by the whole frame (the
 * rows in place, every other row zero) and f says so (rows_count 0).
 * Nothing to do for a whole frame.  0, or -1 when out of memory (payload
 * and f unchanged). */
int rtomod_frame_rows_widen(rtomo_frame_header *f, zmq_msg_t *payload);

#endif
