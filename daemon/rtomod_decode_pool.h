/*
 * rtomod_decode_pool.h — a few threads that help the event loop decode a
 * detector image (bitshuffle-LZ4 blocks, large copies) and then sleep: a
 * fork-join "parallel for".  The loop thread hands out the work, takes
 * its share and returns when all of it is done, so images are still taken
 * in the order they arrived and nothing else in the daemon changes
 * threads.  Without it one loop thread decodes about 230 bslz4 images of
 * 2048 x 2048 uint16 per second on a 2.5 GHz core (1.9 GB/s, with the
 * SSE2 bit transpose: bench_bitshuffle), below the 617 frames/s the
 * native ingest took over 4 connections on a 16-core host
 * (docs/PERFORMANCE.md, run 34).
 */
#ifndef RTOMOD_DECODE_POOL_H
#define RTOMOD_DECODE_POOL_H

typedef struct rtomod_decode_pool rtomod_decode_pool;

/* A pool of `threads` helpers (0: the caller does everything); NULL when
 * out of memory or threads cannot start. */
rtomod_decode_pool *rtomod_decode_pool_new(int threads);
void rtomod_decode_pool_free(rtomod_decode_pool *pool);
/* fn(ctx, i) for every i in [0, n), on the helpers and the caller; returns
 * when every call has returned, without waiting for helpers that woke too
 * late to take any.  One run at a time (the loop's thread). */
void rtomod_decode_pool_run(void *pool, int n, void (*fn)(void *ctx, int i),
                            void *ctx);
/* The helpers to start: the cores this process may use beyond one, at
 * most 8. */
int rtomod_decode_pool_default_threads(void);

#endif /* RTOMOD_DECODE_POOL_H */
