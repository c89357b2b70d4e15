/*
 * main.c — rtomod's command line: read the configuration (defaults, then
 * --config FILE, then the overrides in the order given), then run the
 * daemon until a signal's drain completes.  Exit status: 0 after a clean
 * shutdown, 1 when work was cut short or start-up failed, 2 for a bad
 * command line or configuration.
 */
#include "config.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rtomod.h"
#include "rtomod_security.h"

static void usage(FILE *out)
{
    fprintf(out,
"Usage: rtomod [OPTION]...\n"
"Real-time X-ray reconstruction daemon: takes detector frames over ZeroMQ,\n"
"reconstructs them (parallel-beam FBP or SBDX tomosynthesis) and publishes\n"
"the images, events and telemetry.\n"
"\n"
"  -c, --config FILE      read the configuration from a JSON file\n"
"      --ingest EP        ingest PULL endpoint   (ingest.endpoint, %s)\n"
"      --publish EP       publish PUB endpoint   (publish.endpoint, %s)\n"
"      --control EP       control REP endpoint   (control.endpoint, %s)\n"
"      --backend NAME     auto, cpu or cuda      (engine.backend)\n"
"      --devices LIST     all, or GPU ordinals like 0,1 (engine.devices)\n"
"      --cpu-threads N    CPU backend threads, 0 = all cores\n"
"      --log-level L      error, warn, info or debug (log.level)\n"
"      --set KEY=VALUE    set any key, e.g. --set reconstruction.batch=8;\n"
"                         VALUE is JSON, or else taken as a string\n"
"      --check-config     print the effective configuration and exit\n"
"  -h, --help             show this help and exit\n"
"  -V, --version          show the version and exit\n"
"\n"
"Overrides apply after the file, in the order given.  SIGTERM or SIGINT\n"
"drains: accepted frames are reconstructed and published before exit.\n"
"docs/rtomod.md describes every configuration key.\n",
            RTOMO_DEFAULT_INGEST_ENDPOINT, RTOMO_DEFAULT_PUBLISH_ENDPOINT,
            RTOMO_DEFAULT_CONTROL_ENDPOINT);
}

enum {
    OPT_INGEST = 256, OPT_PUBLISH, OPT_CONTROL, OPT_BACKEND, OPT_DEVICES,
    OPT_CPU_THREADS, OPT_LOG_LEVEL, OPT_SET, OPT_CHECK
};

static const struct option long_options[] = {
    {"config", required_argument, NULL, 'c'},
    {"ingest", required_argument, NULL, OPT_INGEST},
    {"publish", required_argument, NULL, OPT_PUBLISH},
    {"control", required_argument, NULL, OPT_CONTROL},
    {"backend", required_argument, NULL, OPT_BACKEND},
    {"devices", required_argument, NULL, OPT_DEVICES},
    {"cpu-threads", required_argument, NULL, OPT_CPU_THREADS},
    {"log-level", required_argument, NULL, OPT_LOG_LEVEL},
    {"set", required_argument, NULL, OPT_SET},
    {"check-config", no_argument, NULL, OPT_CHECK},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {NULL, 0, NULL, 0},
};

/* The configuration key a shortcut option sets. */
static const char *shortcut_key(int opt)
{
    switch (opt) {
    case OPT_INGEST: return "ingest.endpoint";
    case OPT_PUBLISH: return "publish.endpoint";
    case OPT_CONTROL: return "control.endpoint";
    case OPT_BACKEND: return "engine.backend";
    case OPT_DEVICES: return "engine.devices";
    case OPT_CPU_THREADS: return "engine.cpu_threads";
    case OPT_LOG_LEVEL: return "log.level";
    default: return NULL;
    }
}

/* Apply a shortcut: endpoints and names are strings; "0,1" is a device
 * list. */
static int apply_shortcut(rtomod_config *cfg, int opt, const char *value,
                          char *error, size_t error_size)
{
    const char *key = shortcut_key(opt);
    json_t *v;
    if (opt == OPT_DEVICES && strcmp(value, "all") != 0) {
        char text[256];
        snprintf(text, sizeof text, "[%s]", value);
        v = json_loads(text, 0, NULL);
        if (!v)
            v = json_string(value);
    } else if (opt == OPT_CPU_THREADS) {
        v = json_loads(value, JSON_DECODE_ANY, NULL);
        if (!v)
            v = json_string(value);
    } else {
        v = json_string(value);
    }
    const char *dot = strchr(key, '.');
    char section[32];
    snprintf(section, sizeof section, "%.*s", (int)(dot - key), key);
    json_t *root = json_pack("{s:{s:o}}", section, dot + 1, v);
    if (!root) {
        snprintf(error, error_size, "%s: not valid UTF-8", key);
        return -1;
    }
    int rc = rtomod_config_apply_json(cfg, root, 0, error, error_size);
    json_decref(root);
    return rc;
}

/* Read the configuration from the command line.  Returns 0 to run, 1 when
 * the command already did its job (help, version, check), 2 on error. */
static int read_configuration(int argc, char **argv, rtomod_config *cfg)
{
    char error[RTOMOD_CONFIG_ERROR_MAX];
    int check = 0;
    /* The file first, wherever --config stands, so overrides win. */
    for (int i = 1; i < argc; i++) {
        const char *file = NULL;
        if ((strcmp(argv[i], "--config") == 0 || strcmp(argv[i], "-c") == 0) &&
            i + 1 < argc)
            file = argv[i + 1];
        else if (strncmp(argv[i], "--config=", 9) == 0)
            file = argv[i] + 9;
        if (file && rtomod_config_load_file(cfg, file, error, sizeof error)) {
            fprintf(stderr, "rtomod: %s\n", error);
            return 2;
        }
    }
    int opt;
    while ((opt = getopt_long(argc, argv, "c:hV", long_options, NULL)) != -1) {
        int rc = 0;
        switch (opt) {
        case 'c':
            break;
        case 'h':
            usage(stdout);
            return 1;
        case 'V':
            printf("rtomod %s\n", RTOMOD_VERSION);
            return 1;
        case OPT_CHECK:
            check = 1;
            break;
        case OPT_SET:
            rc = rtomod_config_set_path(cfg, optarg, error, sizeof error);
            break;
        case '?':
            usage(stderr);
            return 2;
        default:
            rc = apply_shortcut(cfg, opt, optarg, error, sizeof error);
            break;
        }
        if (rc != 0) {
            fprintf(stderr, "rtomod: %s\n", error);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "rtomod: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    /* Checks across keys wait for the whole configuration: overrides
     * come one at a time, in any order. */
    if (rtomod_security_check_config(cfg, error, sizeof error) != 0) {
        fprintf(stderr, "rtomod: %s\n", error);
        return 2;
    }
    if (check) {
        json_t *json = rtomod_config_to_json(cfg);
        json_dumpf(json, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(10));
        putchar('\n');
        json_decref(json);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    rtomod_config cfg;
    rtomod_config_init(&cfg);
    int rc = read_configuration(argc, argv, &cfg);
    if (rc != 0) {
        rtomod_config_clear(&cfg);
        return rc == 1 ? 0 : 2;
    }
    static rtomod daemon;
    char error[RTOMOD_CONFIG_ERROR_MAX];
    /* Keys are read before any socket exists: every one listens with them. */
    if (rtomod_security_load(&cfg, error, sizeof error) != 0) {
        log_error("cannot start: %s", error);
        rtomod_config_clear(&cfg);
        return 1;
    }
    if (rtomod_open(&daemon, &cfg, error, sizeof error) != 0) {
        log_error("cannot start: %s", error);
        rtomod_config_clear(&cfg);
        rtomod_security_unload();
        return 1;
    }
    rtomod_config_clear(&cfg);
    int status = rtomod_run(&daemon);
    rtomod_close(&daemon);
    rtomod_security_unload();   /* the context is gone: the handler too */
    log_info("exit %d", status);
    return status;
}
