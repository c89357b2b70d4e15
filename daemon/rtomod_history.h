/*
 * rtomod_history.h — what became of recent scans, for the senders that ask
 * (the control request "scan", PROTOCOL.md 3.9).
 *
 * A scan's record is written when it leaves the daemon (complete or
 * aborted), when its begin is refused, or when a message naming an id the
 * daemon does not know is rejected; rejects of messages that name a scan
 * that already ended are added to its record.  The newest RTOMOD_HISTORY
 * records are kept, so a flood of made-up ids costs a bounded amount of
 * memory and evicts only the oldest answers.
 */
#ifndef RTOMOD_HISTORY_H
#define RTOMOD_HISTORY_H

#include <stdint.h>

#include <jansson.h>

#include "rtomo_protocol.h"

#define RTOMOD_HISTORY 256

typedef struct rtomod_outcome {
    char id[RTOMO_ID_MAX];
    const char *kind;           /* "tomo", "sbdx", or NULL: never begun */
    const char *state;          /* "acquiring", "ending", "reconstructing"
                                   (live scans); "complete", "aborted",
                                   "refused", "unknown" (final) */
    long frames;                /* frames accepted */
    long dropped;               /* accepted frames not reconstructed */
    long missing;               /* projections that never arrived */
    long images;                /* images published */
    long rejected;              /* messages naming it that were rejected */
    uint32_t rejects[RTOMO_REJECT_COUNT];
    int incomplete;
    char code[32];              /* short reason: a reject name, "aborted",
                                   "idle_timeout", "shutdown", "failed" */
    char reason[RTOMO_REASON_MAX];
} rtomod_outcome;

typedef struct rtomod_history {
    rtomod_outcome ring[RTOMOD_HISTORY];
    int next;                   /* slot of the next record */
    int count;
} rtomod_history;

/* The newest record of this id, or NULL. */
rtomod_outcome *rtomod_history_find(rtomod_history *h, const char *id);
/* A new record (state "unknown", counts 0), replacing the oldest when the
 * history is full. */
rtomod_outcome *rtomod_history_add(rtomod_history *h, const char *id);
/* Count one rejected message in a record. */
void rtomod_outcome_count_reject(rtomod_outcome *o, rtomo_reject reason);
/* 1 when the state no longer changes. */
int rtomod_outcome_final(const rtomod_outcome *o);
/* The reply object of the "scan" request (new reference). */
json_t *rtomod_outcome_json(const rtomod_outcome *o);

#endif /* RTOMOD_HISTORY_H */
