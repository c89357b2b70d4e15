/*
 * history.c — the outcomes of recent scans (see rtomod_history.h).
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "rtomod_history.h"

rtomod_outcome *rtomod_history_find(rtomod_history *h, const char *id)
{
    /* Newest first: an id used again names its latest scan. */
    for (int k = 1; k <= h->count; k++) {
        rtomod_outcome *o = &h->ring[(h->next - k + RTOMOD_HISTORY) %
                                     RTOMOD_HISTORY];
        if (strcmp(o->id, id) == 0)
            return o;
    }
    return NULL;
}

rtomod_outcome *rtomod_history_add(rtomod_history *h, const char *id)
{
    rtomod_outcome *o = &h->ring[h->next];
    h->next = (h->next + 1) % RTOMOD_HISTORY;
    if (h->count < RTOMOD_HISTORY)
        h->count++;
    memset(o, 0, sizeof *o);
    snprintf(o->id, sizeof o->id, "%s", id);
    o->state = "unknown";
    return o;
}

void rtomod_outcome_count_reject(rtomod_outcome *o, rtomo_reject reason)
{
    o->rejected++;
    if ((unsigned)reason < RTOMO_REJECT_COUNT)
        o->rejects[reason]++;
}

int rtomod_outcome_final(const rtomod_outcome *o)
{
    return strcmp(o->state, "complete") == 0 ||
           strcmp(o->state, "aborted") == 0 ||
           strcmp(o->state, "refused") == 0 ||
           strcmp(o->state, "unknown") == 0;
}

static json_t *string_or_null(const char *s)
{
    return s && *s ? json_string(s) : json_null();
}

json_t *rtomod_outcome_json(const rtomod_outcome *o)
{
    json_t *rejects = json_object();
    for (int r = RTOMO_REJECT_NONE + 1; r < RTOMO_REJECT_COUNT; r++)
        if (o->rejects[r])
            json_object_set_new(rejects, rtomo_reject_name((rtomo_reject)r),
                                json_integer(o->rejects[r]));
    return json_pack("{s:s, s:o, s:s, s:b, s:I, s:I, s:o, s:I, s:I, s:I, "
                     "s:b, s:o, s:o}",
                     "id", o->id, "kind", string_or_null(o->kind),
                     "state", o->state, "final", rtomod_outcome_final(o),
                     "frames", (json_int_t)o->frames,
                     "rejected", (json_int_t)o->rejected, "rejects", rejects,
                     "dropped", (json_int_t)o->dropped,
                     "missing", (json_int_t)o->missing,
                     "images", (json_int_t)o->images,
                     "incomplete", o->incomplete,
                     "reason", string_or_null(o->reason),
                     "code", string_or_null(o->code));
}
