/*
 * router_sbdx.c — the dealing of SBDX frames among rtomo-router's daemons
 * (router_sbdx.h): which daemons were sent each stream's begin, and whose
 * turn the next frame is.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "router_sbdx.h"

/* The followed stream named `scan`, or NULL. */
static router_sbdx_stream *find(router_sbdx *t, const char *scan)
{
    for (int i = 0; scan[0] && i < ROUTER_SBDX_STREAMS; i++)
        if (strcmp(t->streams[i].scan, scan) == 0)
            return &t->streams[i];
    return NULL;
}

/* A free slot, else the stream begun longest ago. */
static router_sbdx_stream *slot(router_sbdx *t)
{
    router_sbdx_stream *oldest = &t->streams[0];
    for (int i = 0; i < ROUTER_SBDX_STREAMS; i++) {
        router_sbdx_stream *s = &t->streams[i];
        if (!s->scan[0])
            return s;
        if (s->serial < oldest->serial)
            oldest = s;
    }
    return oldest;
}

void router_sbdx_begun(router_sbdx *t, const char *scan, router_set sent)
{
    if (!scan[0])
        return;                 /* a begin without a valid id: no stream */
    router_sbdx_stream *s = find(t, scan);
    if (!s)
        s = slot(t);
    snprintf(s->scan, sizeof s->scan, "%s", scan);
    s->begun = sent;
    s->serial = ++t->serial;
}

void router_sbdx_ended(router_sbdx *t, const char *scan)
{
    router_sbdx_stream *s = find(t, scan);
    if (s)
        memset(s, 0, sizeof *s);
}

void router_sbdx_forget(router_sbdx *t, int k)
{
    for (int i = 0; i < ROUTER_SBDX_STREAMS; i++)
        t->streams[i].begun &= ~((router_set)1 << k);
}

int router_sbdx_deal(router_sbdx *t, const char *scan, int n,
                     router_set connected, int *turn)
{
    const router_sbdx_stream *s = find(t, scan);
    router_set may = connected & (s ? s->begun : ~(router_set)0);
    if (t->next >= n)
        t->next = 0;
    *turn = t->next;
    for (int i = 0; i < n; i++) {
        int k = (t->next + i) % n;
        if (may & ((router_set)1 << k)) {
            t->next = (k + 1) % n;
            return k;
        }
    }
    return -1;
}
