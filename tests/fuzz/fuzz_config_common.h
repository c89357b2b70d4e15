/*
 * fuzz_config_common.h — what the configuration harnesses (fuzz_config.c,
 * fuzz_control.c) check of rtomod_config_apply_json: a refused change
 * leaves the configuration as it was, and an accepted one dumps
 * (rtomod_config_to_json) to JSON that a fresh configuration accepts and
 * dumps identically (what `rtomoctl get-config` prints can be loaded back).
 */
#ifndef RTOMO_FUZZ_CONFIG_COMMON_H
#define RTOMO_FUZZ_CONFIG_COMMON_H

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "rtomod_config.h"

/* Apply `changes` to the defaults; returns apply_json's result. */
static inline int fuzz_apply_checked(const json_t *changes, int runtime_only)
{
    rtomod_config cfg;
    rtomod_config_init(&cfg);
    json_t *before = rtomod_config_to_json(&cfg);
    FUZZ_CHECK(before, "rtomod_config_to_json failed on the defaults");
    char error[RTOMOD_CONFIG_ERROR_MAX];
    error[0] = '\0';
    int rc = rtomod_config_apply_json(&cfg, changes, runtime_only, error,
                                      sizeof error);
    json_t *after = rtomod_config_to_json(&cfg);
    FUZZ_CHECK(after, "rtomod_config_to_json failed");
    if (rc != 0) {
        FUZZ_CHECK(error[0], "a refused configuration has no message");
        FUZZ_CHECK(json_equal(before, after),
                   "a refused configuration changed it: %s", error);
    } else {
        rtomod_config again;
        rtomod_config_init(&again);
        int rc2 = rtomod_config_apply_json(&again, after, 0, error,
                                           sizeof error);
        char *text = json_dumps(after, JSON_COMPACT);
        FUZZ_CHECK(rc2 == 0, "the dump of an accepted configuration is "
                   "refused: %s\n  %s", error, text ? text : "?");
        json_t *dump2 = rtomod_config_to_json(&again);
        FUZZ_CHECK(json_equal(after, dump2), "the dump of an accepted "
                   "configuration loads as another:\n  %s", text ? text : "?");
        json_decref(dump2);
        free(text);
        rtomod_config_clear(&again);
    }
    json_decref(before);
    json_decref(after);
    rtomod_config_clear(&cfg);
    return rc;
}

#endif /* RTOMO_FUZZ_CONFIG_COMMON_H */
