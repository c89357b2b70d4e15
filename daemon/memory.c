/*
 * memory.c — C library memory settings for large messages (see
 * rtomod_memory.h for why).
 */
#include "config.h"

#include <limits.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "rtomod_log.h"
#include "rtomod_memory.h"

void rtomod_keep_freed_memory(void)
{
#ifdef __GLIBC__
    /* One arena: the threads' own arenas cannot hold blocks above 64 MB and
     * would fall back to mmap() for every frame. */
    int ok = mallopt(M_ARENA_MAX, 1) &&
             /* No mmap()-backed blocks: large ones come from the heap... */
             mallopt(M_MMAP_MAX, 0) &&
             /* ...and freed space at its top is kept for the next frame. */
             mallopt(M_TRIM_THRESHOLD, INT_MAX);
    if (!ok)
        log_warn("could not tune the C library's "
                 "allocator; large frames will be received more slowly");
#endif
}
