/*
 * frame_rows.c — tomography frames that carry only some detector rows
 * (PROTOCOL.md 3.4, "rows"; a Stream V2 image's "rtomo_rows", 10.5): what
 * a router sends each daemon.  The daemon's plans take whole frames and
 * read only the rows they keep (and phase retrieval's reach around them),
 * so a partial frame becomes a whole one whose other rows are never read.
 *
 * Why an anonymous mapping rather than malloc: its pages are zero until
 * written and cost nothing until touched, so making a 2048-row frame out
 * of a third of it writes a third of the memory, not all of it (calloc
 * would clear the whole block once glibc serves frames of this size from
 * its heap).  Pages of the missing rows that a backend copies wholesale
 * are read as the shared zero page.
 */
#include "config.h"

#include <string.h>
#include <sys/mman.h>

#include "rtomod_frame_rows.h"

static void unmap_frame(void *data, void *hint)
{
    munmap(data, (size_t)(uintptr_t)hint);
}

int rtomod_frame_rows_blank(size_t size, zmq_msg_t *payload)
{
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

int rtomod_frame_rows_widen(rtomo_frame_header *f, zmq_msg_t *payload)
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
    zmq_msg_t whole;
    if (rtomod_frame_rows_blank(size, &whole) != 0)
        return -1;
    memcpy((char *)zmq_msg_data(&whole) + row * (size_t)f->rows_first,
           zmq_msg_data(payload), row * (size_t)f->rows_count);
    zmq_msg_close(payload);
    zmq_msg_init(payload);
    zmq_msg_move(payload, &whole);
    f->rows_first = f->rows_count = 0;
    return 0;
}
