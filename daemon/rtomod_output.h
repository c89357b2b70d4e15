/*
 * rtomod_output.h — the HDF5 output sink: every tomography scan (and SBDX
 * stream) becomes one HDF5 file laid out as NeXus, written by a thread of
 * its own (output_hdf5.c; docs/rtomod.md, *Volumes on disk*).
 *
 * The loop hands it commands in the order things happen to a scan: open
 * (at scan_started), images (as they are published: the result's buffer
 * reference is shared, never copied), close (at scan_complete or
 * scan_aborted).  The writer thread takes them in that order.  Images
 * wait in a queue bounded in bytes (output.hdf5.queue_mb): when it is
 * full an image is dropped and counted (output.hdf5.when_full "drop", the
 * default) or the worker that made it waits (the finisher's delivery,
 * rtomod_output_gate: "block"), so that the reconstruction never waits
 * for the disk unless the operator said so.
 *
 * What happens is reported as events the loop publishes
 * (rtomod_output_poll): output_file (a file was closed, complete or not),
 * output_error (a file could not be created or written: reason no_space,
 * file_too_large, permission, io_error), output_dropped (images that did
 * not fit the queue).
 */
#ifndef RTOMOD_OUTPUT_H
#define RTOMOD_OUTPUT_H

#include <stddef.h>
#include <stdint.h>

#include <ev.h>
#include <jansson.h>

#include "rtomod_config.h"
#include "rtomod_publish.h"
#include "rtomod_worker.h"

typedef struct rtomod_output rtomod_output;

/* Start the writer when output.hdf5.directory is set: NULL with error ""
 * when the sink is off, NULL with error filled when it cannot start (the
 * directory is not checked here: a directory that cannot be written is
 * reported per scan, as an event, never a refusal to start).  `config` is
 * the daemon's configuration, kept in every file.  The writer wakes the
 * loop with `wake` when it has events to publish. */
rtomod_output *rtomod_output_start(const rtomod_config *cfg,
                                   struct ev_loop *loop, ev_async *wake,
                                   char *error, size_t error_size);

/* Write everything queued, close the files still open (marked incomplete:
 * "shutdown"), join the thread, publish its last events on `pub` (may be
 * NULL), free.  NULL is ignored. */
void rtomod_output_stop(rtomod_output *o, rtomod_publisher *pub);

/* From now on nobody waits for room (rtomod_close before the workers are
 * stopped: the loop no longer takes results). */
void rtomod_output_no_wait(rtomod_output *o);

/* Loop thread.  A tomography scan begins: `meta` (stolen) is the
 * processing parameters and geometry; `begin` the scan_begin header as
 * received (copied).  Returns 1 when the scan will have a file. */
int rtomod_output_open_tomo(rtomod_output *o, uint64_t serial,
                            const char *scan, json_t *meta,
                            const char *begin, size_t begin_size);
int rtomod_output_open_sbdx(rtomod_output *o, uint64_t serial,
                            const char *scan, json_t *meta,
                            const char *begin, size_t begin_size);

/* Loop thread: an image being published (slice, or an SBDX stream's
 * plane, composite, depth).  Takes a reference to its buffer (the result
 * keeps its own). */
void rtomod_output_image(rtomod_output *o, uint64_t serial,
                         rtomod_result *r);

/* Loop thread: the scan is over.  complete: every image it was to have
 * came; else `reason` (a short code: aborted, shutdown, idle_timeout,
 * failed, incomplete) and `why` (a sentence) are written into the file. */
void rtomod_output_close(rtomod_output *o, uint64_t serial, int complete,
                         const char *reason, const char *why);

/* Any thread (a finisher's delivery): with when_full "block", wait until
 * the queue has room for r's image, and reserve it (released when r is
 * queued or freed).  Nothing with "drop". */
void rtomod_output_gate(void *output, rtomod_result *r);
void rtomod_output_unreserve(rtomod_output *o, size_t bytes);

/* Loop thread: publish the writer's events. */
void rtomod_output_poll(rtomod_output *o, rtomod_publisher *pub);

/* Figures for status and telemetry (new reference): null when off. */
json_t *rtomod_output_json(rtomod_output *o);

#endif /* RTOMOD_OUTPUT_H */
