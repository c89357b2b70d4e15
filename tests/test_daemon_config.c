/*
 * test_daemon_config.c — rtomod's command line and configuration, through
 * the real binary: defaults that work, the example file, the order of file
 * and overrides, and every kind of bad configuration refused with exit
 * status 2 and a message naming the key.
 */
#include "config.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "daemon_harness.h"
#include "rtomo_protocol.h"

typedef struct run_result {
    int status;
    char output[65536];         /* stdout and stderr */
} run_result;

/* Run rtomod with `args` (a shell fragment) and collect its output. */
static void run(const char *args, run_result *r)
{
    char path[1024], command[4096];
    daemon_process_default_path(path, sizeof path);
    snprintf(command, sizeof command, "'%s' %s 2>&1", path, args);
    FILE *p = popen(command, "r");
    ck_assert(p);
    size_t n = fread(r->output, 1, sizeof r->output - 1, p);
    r->output[n] = '\0';
    int status = pclose(p);
    r->status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* The JSON that --check-config printed. */
static json_t *checked(const char *args)
{
    char with_check[2048];
    snprintf(with_check, sizeof with_check, "%s --check-config", args);
    run_result r;
    run(with_check, &r);
    ck_assert_msg(r.status == 0, "rtomod %s: exit %d: %s", with_check,
                  r.status, r.output);
    json_error_t err;
    json_t *cfg = json_loads(r.output, 0, &err);
    ck_assert_msg(cfg, "not JSON (%s): %s", err.text, r.output);
    return cfg;
}

static const char *value_at(json_t *cfg, const char *section, const char *key)
{
    return json_string_value(json_object_get(json_object_get(cfg, section),
                                             key));
}

static void expect_refusal(const char *args, const char *names)
{
    run_result r;
    run(args, &r);
    ck_assert_msg(r.status == 2, "rtomod %s: exit %d, expected 2 (%s)", args,
                  r.status, r.output);
    ck_assert_msg(strstr(r.output, names), "rtomod %s says '%s', not naming "
                  "'%s'", args, r.output, names);
}

/* A temporary file holding `text`; the path is written to `path`. */
static void temp_file(const char *text, char *path, size_t size)
{
    snprintf(path, size, "/tmp/rtomod-config-XXXXXX");
    int fd = mkstemp(path);
    ck_assert(fd >= 0);
    ck_assert(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
    close(fd);
}

START_TEST(defaults_and_example_file)
{
    json_t *cfg = checked("");
    ck_assert_str_eq(value_at(cfg, "ingest", "endpoint"),
                     RTOMO_DEFAULT_INGEST_ENDPOINT);
    ck_assert_str_eq(value_at(cfg, "control", "endpoint"),
                     RTOMO_DEFAULT_CONTROL_ENDPOINT);
    ck_assert_str_eq(value_at(cfg, "reconstruction", "slices"), "all");
    /* Batch size by backend, statistics off the worker's path. */
    ck_assert_int_eq(json_integer_value(json_object_get(
                         json_object_get(cfg, "reconstruction"), "batch")), 0);
    ck_assert_int_eq(json_integer_value(json_object_get(
                         json_object_get(cfg, "publish"), "stats_threads")), 2);
    const char *sections[] = {"ingest", "publish", "control", "engine",
                              "reconstruction", "queue", "telemetry", "log",
                              "shutdown"};
    for (size_t i = 0; i < sizeof sections / sizeof sections[0]; i++)
        ck_assert_msg(json_is_object(json_object_get(cfg, sections[i])),
                      "section %s", sections[i]);
    json_decref(cfg);

    const char *srcdir = getenv("top_srcdir");
    char args[1024];
    snprintf(args, sizeof args, "--config '%s/systemd/rtomod.json'",
             srcdir ? srcdir : ".");
    cfg = checked(args);
    ck_assert_str_eq(value_at(cfg, "reconstruction", "filter"), "shepp-logan");
    json_decref(cfg);
}
END_TEST

START_TEST(overrides_win_over_the_file_in_order)
{
    char path[64];
    temp_file("{\"reconstruction\": {\"filter\": \"cosine\"}, "
              "\"log\": {\"level\": \"warn\"}}", path, sizeof path);
    char args[512];
    /* --config after the override: the file is still read first. */
    snprintf(args, sizeof args, "--set reconstruction.filter=hann --config %s "
             "--log-level debug --set log.level=error --devices 0,1 "
             "--set 'reconstruction.slices={\"first\": 2, \"count\": 3}' "
             "--set reconstruction.roi=[1,2,30,40]", path);
    json_t *cfg = checked(args);
    ck_assert_str_eq(value_at(cfg, "reconstruction", "filter"), "hann");
    ck_assert_str_eq(value_at(cfg, "log", "level"), "error");
    json_t *devices = json_object_get(json_object_get(cfg, "engine"),
                                      "devices");
    ck_assert(json_array_size(devices) == 2 &&
              json_integer_value(json_array_get(devices, 1)) == 1);
    json_t *slices = json_object_get(json_object_get(cfg, "reconstruction"),
                                     "slices");
    ck_assert_int_eq(json_integer_value(json_object_get(slices, "first")), 2);
    ck_assert_int_eq(json_integer_value(json_object_get(slices, "count")), 3);
    json_t *roi = json_object_get(json_object_get(cfg, "reconstruction"),
                                  "roi");
    ck_assert(json_array_size(roi) == 4 &&
              json_integer_value(json_array_get(roi, 3)) == 40);
    json_decref(cfg);
    unlink(path);
}
END_TEST

START_TEST(bad_configurations_are_refused_by_name)
{
    expect_refusal("--set reconstruction.filter=nope", "reconstruction.filter");
    expect_refusal("--set nosuch.key=1", "nosuch");
    expect_refusal("--set ingest.bogus=1", "ingest.bogus");
    expect_refusal("--set ingest.rcvhwm=0", "ingest.rcvhwm");
    expect_refusal("--set publish.nodrop=3", "publish.nodrop");
    expect_refusal("--set publish.stats_threads=0", "publish.stats_threads");
    expect_refusal("--set reconstruction.batch=-1", "reconstruction.batch");
    expect_refusal("--set reconstruction.roi=[1,2,3]", "reconstruction.roi");
    expect_refusal("--set reconstruction.slices=7", "reconstruction.slices");
    expect_refusal("--devices 0,0", "engine.devices");
    expect_refusal("--cpu-threads -1", "engine.cpu_threads");
    expect_refusal("--set reconstruction.slice_size=64 "
                   "--set reconstruction.roi=[0,0,65,10]",
                   "reconstruction.roi");
    expect_refusal("--set noequals", "section.key=value");
    expect_refusal("--no-such-option", "Usage");
    expect_refusal("stray-argument", "stray-argument");
    expect_refusal("--config /nonexistent/rtomod.json", "/nonexistent");

    char path[64], args[128];
    temp_file("{\"ingest\": {\"endpoint\": \"tcp://*:1\",}}", path,
              sizeof path);
    snprintf(args, sizeof args, "--config %s", path);
    expect_refusal(args, path);                 /* JSON syntax, with place */
    unlink(path);
    temp_file("{\"engine\": {\"backend\": \"cpu\", \"gpus\": 2}}", path,
              sizeof path);
    snprintf(args, sizeof args, "--config %s", path);
    expect_refusal(args, "engine.gpus");
    unlink(path);
}
END_TEST

START_TEST(help_version_and_unusable_endpoints)
{
    run_result r;
    run("--help", &r);
    ck_assert_int_eq(r.status, 0);
    ck_assert(strstr(r.output, "--config") && strstr(r.output, "--set"));
    run("--version", &r);
    ck_assert_int_eq(r.status, 0);
    ck_assert(strstr(r.output, PACKAGE_VERSION));
    /* Start-up failures exit 1 with the reason in the log. */
    run("--backend cpu --ingest tcp://256.1.1.1:1 --publish tcp://127.0.0.1:0 "
        "--control tcp://127.0.0.1:0 --set security.allow_insecure_remote=true",
        &r);
    ck_assert_msg(r.status == 1, "exit %d: %s", r.status, r.output);
    ck_assert_msg(strstr(r.output, "ingest") && strstr(r.output, "bind"),
                  "%s", r.output);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {
        defaults_and_example_file,
        overrides_win_over_the_file_in_order,
        bad_configurations_are_refused_by_name,
        help_version_and_unusable_endpoints,
    };
    return daemon_run_tests("daemon_config", tests,
                            (int)(sizeof tests / sizeof tests[0]), 60);
}
