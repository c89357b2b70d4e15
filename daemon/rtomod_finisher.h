/*
 * rtomod_finisher.h — the last leg of a worker's results on their way to
 * the event loop: image statistics off the engine's critical path.
 *
 * Every published image carries its min, max and mean.  Scanning the
 * pixels costs memory bandwidth of the order of the engine's own output
 * (32 GB for a 2048^3 volume, 128 MB per SBDX frame), and done by the
 * worker between engine calls it leaves the GPU idle meanwhile.  So a
 * worker hands its results, a unit at a time (one batch of slices, one
 * SBDX frame, whatever one job produced), to its finisher: a few threads
 * that fill in the statistics and deliver the results, unit after unit in
 * the order they were pushed, while the worker is back at the engine.
 *
 * Bounded: at most `capacity` units are queued or being finished; a push
 * beyond blocks until one is delivered (back-pressure on the worker, never
 * a drop).  Every unit pushed is delivered, also when the finisher stops.
 */
#ifndef RTOMOD_FINISHER_H
#define RTOMOD_FINISHER_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "rtomod_worker.h"

typedef struct rtomod_finisher rtomod_finisher;

/* Called for every result, in push order, from a finisher thread; takes
 * the result over. */
typedef void (*rtomod_deliver_fn)(void *ctx, rtomod_result *r);

/*
 * Start `threads` (>= 1) finisher threads holding at most `capacity`
 * (>= 1) units.  Results of scan serial *abort_serial (abort_serial may be
 * NULL) are delivered without statistics: the loop discards the images of
 * an aborted scan.  Returns the finisher, or NULL with `error` filled (no
 * memory, or not one thread would start; fewer than asked is not an
 * error).
 */
rtomod_finisher *rtomod_finisher_start(int threads, int capacity,
                                       rtomod_deliver_fn deliver, void *ctx,
                                       const _Atomic uint64_t *abort_serial,
                                       char *error, size_t error_size);

/* Hand over a list of results (linked by `next`, in order) as one unit;
 * NULL is ignored.  Blocks while the finisher holds `capacity` units.
 * Returns the seconds spent blocked.  One pushing thread at a time. */
double rtomod_finisher_push(rtomod_finisher *f, rtomod_result *list);

/* Results pushed and not yet delivered. */
int rtomod_finisher_pending(rtomod_finisher *f);

/* Deliver everything pushed, join the threads, free the finisher.  NULL is
 * ignored. */
void rtomod_finisher_stop(rtomod_finisher *f);

/* min, max and mean of n samples (float32, or uint16 when is_u16) into
 * h, as the finisher measures every image (0 for none); for images the
 * loop assembles itself (a plane summed from several workers). */
void rtomod_image_stats(const void *data, int is_u16, size_t n,
                        rtomo_image_header *h);

#endif /* RTOMOD_FINISHER_H */
