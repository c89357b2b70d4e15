/*
 * router_harness.h — what the tests of rtomo-router share: the real
 * router ($RTOMO_ROUTER, else $top_builddir/rtomo-router) as a child
 * process on free loopback ports, its status, and the routed detector:
 * three daemons (daemon_harness.h) of a third of its rows each, beside an
 * optional fourth that reconstructs every row, the scans they are sent and
 * the check that their merged slices are the whole daemon's.
 *
 * Helpers fail the running Check test (ck_assert) instead of returning
 * errors.
 */
#ifndef ROUTER_HARNESS_H
#define ROUTER_HARNESS_H

#include <stddef.h>
#include <stdint.h>

#include "daemon_harness.h"

#define SAME_AS_ENGINE 1e-5

/* The routed detector: three daemons take 16 rows each. */
#define ROUTED_WIDTH 64
#define ROUTED_HEIGHT 48
#define ROUTED_THIRD 16
#define ROUTED_PROJECTIONS 60
#define ROUTED_DARKS 1
#define ROUTED_FLATS 2
#define ROUTED_FRAMES (ROUTED_DARKS + ROUTED_FLATS + ROUTED_PROJECTIONS)
/* With the begin and the end. */
#define ROUTED_MESSAGES (ROUTED_FRAMES + 2)
/* uint16 */
#define ROUTED_FRAME_BYTES (ROUTED_WIDTH * ROUTED_HEIGHT * 2)

/* An endpoint's text at most. */
#define ROUTED_ENDPOINT 64

/* ------------------------------------------------------- the router ---- */

/* The router as a child process; its stdout and stderr go to `log`. */
typedef struct router_proc {
    daemon_process p;           /* its pid, ingest and control endpoints */
    char dir[256], log[300];
} router_proc;

/* A loopback port that is free now (the kernel picks it). */
int router_free_port(void);

/* Start the router with the given --daemon arguments (n of them) and the
 * options in `extra` (NULL-terminated, or NULL).  A port taken between
 * its choice and the router's bind (tests run in parallel) costs another
 * attempt. */
void router_start_targets(router_proc *r, const char *const *targets,
                          int n, const char *const *extra);
/* The same in front of daemons d[0..n-1] (n <= 8), daemon k with rows
 * rows[k] ("FIRST:COUNT"). */
void router_start(router_proc *r, const daemon_proc *d,
                  const char *const *rows, int n, const char *const *extra);
/* SIGTERM: a clean exit (status 0) is expected.  Returns its log
 * (malloc'd) and removes it. */
char *router_stop(router_proc *r);

/* A control client of the router, and its status reply (asserts that it
 * answers). */
rtomo_client *router_client(const router_proc *r);
json_t *router_status(rtomo_client *rc);
/* The status of its daemon k; an integer field of a status object; the
 * state of daemon k. */
json_t *router_daemon_json(json_t *status, int k);
long status_field(json_t *object, const char *name);
const char *router_state_of(json_t *status, int k);
/* Wait until the router's daemon k (every daemon when k < 0, n of them)
 * is in `state`. */
void wait_router_state(rtomo_client *rc, int k, int n, const char *state);
/* Wait until the router has received `messages` messages and accounted
 * for each with every one of its n daemons (sent or lost); returns its
 * status then. */
json_t *wait_router_messages(rtomo_client *rc, int n, long messages);

/* ------------------------------------------------------- daemons ---- */

/* Three daemons, each with a third of the rows, and, when `whole`, a
 * fourth with all of them.  With stream2 (not NULL), each also gets a
 * Stream V2 input bound on a free port, its endpoint into stream2[k]. */
void routed_daemons_start(daemon_proc *d, int whole,
                          char (*stream2)[ROUTED_ENDPOINT]);
/* A scan of the routed detector that reconstructs every row. */
void routed_scan_make(daemon_scan *s, const char *id, uint64_t seed);
/* Wait until publisher k has sent want[k] slices of `scan`, for each of
 * the n; asserts within the timeout. */
void routed_wait_slices(daemon_inbox *in, const char *scan, const int *want,
                        int n);
/* Events named `event` of `scan` received so far. */
int routed_count_events(const daemon_inbox *in, const char *event,
                        const char *scan);
/* Every slice of daemon 3 (whole frames) came from exactly the daemon of
 * its third, with the same place in the set and the same values; and
 * daemon 3's equal the engine's. */
void routed_check_merged(const daemon_inbox *in, const daemon_scan *s);

/* Occurrences of `needle` in `text`. */
int text_occurrences(const char *text, const char *needle);

#endif /* ROUTER_HARNESS_H */
