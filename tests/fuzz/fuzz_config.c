/*
 * fuzz_config.c — libFuzzer harness of rtomod's configuration parser: a
 * configuration file (rtomod_config_apply_json on what json_load_file
 * reads, as rtomod_config_load_file does) and a --set override
 * (rtomod_config_set_path), both starting from the defaults.  Checks of
 * fuzz_config_common.h besides crashes, leaks and UB.
 *
 * Input: the file's bytes; the same bytes (up to the first NUL) are also
 * tried as a "section.key=value" override.
 */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>

#include "fuzz_config_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_error_t jerr;
    json_t *root = json_loadb((const char *)data, size,
                              JSON_REJECT_DUPLICATES, &jerr);
    if (root)
        fuzz_apply_checked(root, 0);
    json_decref(root);

    char *text = fuzz_copy(data, size, 1);
    rtomod_config cfg;
    rtomod_config_init(&cfg);
    json_t *before = rtomod_config_to_json(&cfg);
    char error[RTOMOD_CONFIG_ERROR_MAX];
    error[0] = '\0';
    if (rtomod_config_set_path(&cfg, text, error, sizeof error) != 0) {
        json_t *after = rtomod_config_to_json(&cfg);
        FUZZ_CHECK(error[0], "a refused override has no message");
        FUZZ_CHECK(json_equal(before, after),
                   "a refused override changed the configuration: %s", error);
        json_decref(after);
    }
    json_decref(before);
    rtomod_config_clear(&cfg);
    free(text);
    return 0;
}
