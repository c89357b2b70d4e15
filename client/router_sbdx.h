/*
 * router_sbdx.h — how rtomo-router deals SBDX frames among its daemons,
 * without any socket: every sbdx_frame goes to one daemon, in turn, since
 * each frame becomes its own planes and composite (PROTOCOL.md 3.7) and
 * any daemon can take any frame.  Kept apart from the program so that the
 * tests can check the rule on its own.
 *
 * A frame goes only to a daemon that can use it: one that is connected
 * and was sent its stream's sbdx_begin.  A daemon that missed the begin
 * (it was away, or restarted) would reject every frame of the stream, so
 * its turns are passed to the next daemon that can take them ("rerouted",
 * counted); a frame is lost only when no daemon can take it.  A stream
 * whose begin the router never saw (it was started in the middle of one)
 * is dealt to every connected daemon: they judge.
 */
#ifndef RTOMO_ROUTER_SBDX_H
#define RTOMO_ROUTER_SBDX_H

#include <stdint.h>

#include "router_route.h"

/* SBDX streams the router follows at once (a daemon takes at most 16
 * scans in flight, PROTOCOL.md 3.3's scans.max); the least recently begun
 * is forgotten for a new one beyond. */
#define ROUTER_SBDX_STREAMS 16

/* A set of daemons: bit k is daemon k (ROUTER_MAX_DAEMONS is 64). */
typedef uint64_t router_set;

typedef struct router_sbdx_stream {
    char scan[RTOMO_ID_MAX];    /* "" = a free slot */
    router_set begun;           /* daemons that were sent its begin */
    uint64_t serial;            /* when it began, for the oldest */
} router_sbdx_stream;

typedef struct router_sbdx {
    router_sbdx_stream streams[ROUTER_SBDX_STREAMS];
    uint64_t serial;
    int next;                   /* the daemon whose turn comes next */
} router_sbdx;

/* The begin of stream `scan` was sent to the daemons in `sent` (a second
 * begin of the same id starts it afresh). */
void router_sbdx_begun(router_sbdx *t, const char *scan, router_set sent);
/* Its end went out: the stream is no longer followed. */
void router_sbdx_ended(router_sbdx *t, const char *scan);
/* Daemon k's connection broke: it may come back without the streams it
 * had (a restart), so it is dealt none of them again. */
void router_sbdx_forget(router_sbdx *t, int k);

/* The daemon, among n, that takes the next frame of stream `scan`: the
 * first whose turn it is, from t->next on, that is in `connected` and may
 * take the stream; the turn then passes to the one after it.  *turn is
 * the daemon whose turn it was (the returned one unless its turn was
 * passed on).  -1 when no daemon may take it (the turn does not move). */
int router_sbdx_deal(router_sbdx *t, const char *scan, int n,
                     router_set connected, int *turn);

#endif /* RTOMO_ROUTER_SBDX_H */
