/*
 * frame_rows.c — tomography frames that carry only some detector rows
 * (PROTOCOL.md 3.4, "rows"; a Stream V2 image's "rtomo_rows", 10.5): what
 * a router sends each daemon.  The daemon's plans take whole frames and
 * read only the rows they keep (and phase retrieval's reach around them),
 * so a partial frame becomes a whole one whose other rows are never read.
 *
 * Where the whole frame comes from depends on ingest.keep_buffers
 * (rtomod_memory.h).  Kept (the default): from the heap, whose pages stay
 * mapped from frame to frame, with the missing rows cleared by memset; a
 * fresh anonymous mapping per frame cost the loop thread a page fault per
 * 4 KiB of the rows written and an munmap (a TLB shootdown across the
 * daemon's threads) per frame, and the router's daemons took 385 frames/s
 * of a third of 2048^2 uint16 where fan-out's took 585-623 of whole ones
 * (docs/PERFORMANCE.md run 38).  Not kept: an anonymous mapping, whose
 * pages are zero until written and cost nothing until touched, so making
 * a 2048-row frame out of a third of it writes a third of the memory
 * (heap memory would be fresh too, and memset would fault in all of it).
 */
#include "config.h"

#include <string.h>
#include <sys/mman.h>

#include "rtomod_frame_rows.h"

static void unmap_frame(void *data, void *hint)
{
    munmap(data, (size_t)(uintptr_t)hint);
}

/* A heap frame of `size` bytes, zero outside [lo, hi). */
static int heap_frame(size_t size, size_t lo, size_t hi, zmq_msg_t *payload)
{
    if (zmq_msg_init_size(payload, size) != 0) {
        zmq_msg_init(payload);
        return -1;
    }
    char *frame = zmq_msg_data(payload);
    memset(frame, 0, lo);
    memset(frame + hi, 0, size - hi);
    return 0;
}

int rtomod_frame_rows_blank(size_t size, size_t lo, size_t hi, int keep,
                            zmq_msg_t *payload)
{
    if (keep)
        return heap_frame(size, lo, hi, payload);
    void *frame = mmap(NULL, size ? size : 1, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (frame == MAP_FAILED) {
        zmq_msg_init(payload);
        return -1;
    }
    if (zmq_msg_init_data(payload, frame, size, unmap_frame,
                          (void *)(uintptr_t)(size ? size : 1)) != 0) {
        munmap(frame, size ? size : 1);
        zmq_msg_init(payload);
        return -1;
    }
    return 0;
}

int rtomod_frame_rows_widen(rtomo_frame_header *f, int keep,
                            zmq_msg_t *payload)
{
    if (f->rows_count <= 0)
        return 0;
    const size_t row = (size_t)f->shape[1] * rtomo_dtype_size(f->dtype);
    const size_t size = row * (size_t)f->shape[0];
    /* A detector input decodes a router's share straight into a whole
     * frame (rtomod_frame_rows_blank): its rows are in place already. */
    if (zmq_msg_size(payload) == size) {
        f->rows_first = f->rows_count = 0;
        return 0;
    }
    const size_t lo = row * (size_t)f->rows_first;
    const size_t hi = lo + row * (size_t)f->rows_count;
    zmq_msg_t whole;
    if (rtomod_frame_rows_blank(size, lo, hi, keep, &whole) != 0)
        return -1;
    memcpy((char *)zmq_msg_data(&whole) + lo, zmq_msg_data(payload), hi - lo);
    zmq_msg_close(payload);
    zmq_msg_init(payload);
    zmq_msg_move(payload, &whole);
    f->rows_first = f->rows_count = 0;
    return 0;
}
