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

void rtomod_memory_setup(int keep, size_t keep_bytes)
{
#ifdef __GLIBC__
    int trim = keep_bytes > INT_MAX ? INT_MAX : (int)keep_bytes;
    int ok;
    if (keep)
        /* One arena: the threads' own arenas cannot hold blocks above
         * 64 MB and would fall back to mmap() for every frame.  No
         * mmap()-backed blocks: large ones come from the heap, and freed
         * space at its top is kept for the next frame up to keep_bytes. */
        ok = mallopt(M_ARENA_MAX, 1) && mallopt(M_MMAP_MAX, 0) &&
             mallopt(M_TRIM_THRESHOLD, trim);
    else
        /* A fixed threshold: glibc's own rises with every large block
         * freed, until frames come from the heap and stay there. */
        ok = mallopt(M_MMAP_THRESHOLD, 1 << 20);
    if (!ok)
        log_warn("could not tune the C library's allocator; large frames "
                 "may be received more slowly or their memory kept longer");
#else
    (void)keep; (void)keep_bytes;
#endif
}

void rtomod_memory_return(void)
{
#ifdef __GLIBC__
    malloc_trim(0);
#endif
}
