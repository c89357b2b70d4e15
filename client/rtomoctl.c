/*
 * rtomoctl.c — the control tool: sends one request to rtomod's control
 * socket and prints the reply as indented JSON.  Exit status 0 when the
 * daemon replied "ok": true, 1 when it refused or did not answer in time,
 * 2 on bad usage.
 */
#include "config.h"

#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rtomo_client.h"
#include "tool_common.h"

static const char *program = "rtomoctl";

static void usage(FILE *out)
{
    fprintf(out,
"Usage: rtomoctl [OPTION]... COMMAND [ARGUMENT]...\n"
"Send a control request to rtomod and print its reply as JSON.\n"
"\n"
"Commands:\n"
"  status                 state, scan progress, counters, GPUs\n"
"  ping                   check that the daemon answers\n"
"  get-config             the whole effective configuration\n"
"  set-config KEY=VALUE.. change run-time settings; KEY is SECTION.NAME,\n"
"                         VALUE is JSON, or a plain word taken as a string:\n"
"                           rtomoctl set-config reconstruction.slices=[100,200]\n"
"                           rtomoctl set-config reconstruction.filter=hann\n"
"                           rtomoctl set-config reconstruction.roi=null\n"
"  abort [SCAN]           abort the scan named, else the oldest acquiring\n"
"  scan SCAN              what became of a scan: its state, frames accepted,\n"
"                         rejected (by reason), dropped, missing, images,\n"
"                         and the daemon's reason when it failed\n"
"  request JSON           send any request object as it is\n"
"\n"
"Options:\n"
"  -c, --control ENDPOINT  control socket (default tcp://localhost:5557)\n"
"  -t, --timeout MS        wait this long for the reply (default 3000)\n"
TOOL_CURVE_HELP
"  -h, --help              show this help\n"
"\n"
"Exit status: 0 ok, 1 the daemon refused or did not answer, 2 bad usage.\n");
}

/* VALUE as JSON when it parses as such, else as a JSON string. */
static json_t *parse_value(const char *text)
{
    json_t *v = json_loads(text, JSON_DECODE_ANY, NULL);
    return v ? v : json_string(text);
}

/* {"SECTION": {"NAME": VALUE}, ...} from KEY=VALUE arguments. */
static json_t *config_changes(int argc, char **argv, int *usage_failed)
{
    json_t *config = json_object();
    for (int i = 0; i < argc && config; i++) {
        char *eq = strchr(argv[i], '='), *dot = strchr(argv[i], '.');
        if (!eq || !dot || dot > eq || dot == argv[i] || dot + 1 == eq) {
            tool_usage_error(program, "set-config: '%s' is not "
                             "SECTION.NAME=VALUE", argv[i]);
            *usage_failed = 1;
            json_decref(config);
            return NULL;
        }
        char *section = strndup(argv[i], (size_t)(dot - argv[i]));
        char *name = strndup(dot + 1, (size_t)(eq - dot - 1));
        json_t *members = json_object_get(config, section);
        if (!members) {
            members = json_object();
            json_object_set_new(config, section, members);
        }
        json_object_set_new(members, name, parse_value(eq + 1));
        free(section);
        free(name);
    }
    if (config && json_object_size(config) == 0) {
        tool_usage_error(program, "set-config needs at least one KEY=VALUE");
        *usage_failed = 1;
        json_decref(config);
        return NULL;
    }
    return config;
}

/* The request for COMMAND ARGS, or NULL after a usage error. */
static json_t *build_request(int argc, char **argv)
{
    const char *cmd = argv[0];
    int bad = 0;
    if (strcmp(cmd, "status") == 0 || strcmp(cmd, "ping") == 0 ||
        strcmp(cmd, "get-config") == 0) {
        if (argc > 1) {
            tool_usage_error(program, "%s takes no argument", cmd);
            return NULL;
        }
        return json_pack("{s:s}", "cmd",
                         strcmp(cmd, "get-config") == 0 ? "get_config" : cmd);
    }
    if (strcmp(cmd, "set-config") == 0) {
        json_t *changes = config_changes(argc - 1, argv + 1, &bad);
        return changes ? json_pack("{s:s, s:o}", "cmd", "set_config",
                                   "config", changes) : NULL;
    }
    if (strcmp(cmd, "abort") == 0 && argc <= 2)
        return argc == 2 ? json_pack("{s:s, s:s}", "cmd", "abort", "scan",
                                     argv[1])
                         : json_pack("{s:s}", "cmd", "abort");
    if (strcmp(cmd, "scan") == 0 && argc == 2)
        return json_pack("{s:s, s:s}", "cmd", "scan", "scan", argv[1]);
    if (strcmp(cmd, "request") == 0 && argc == 2) {
        json_error_t error;
        json_t *request = json_loads(argv[1], 0, &error);
        if (!json_is_object(request)) {
            tool_usage_error(program, "request: not a JSON object: %s",
                             request ? argv[1] : error.text);
            json_decref(request);
            return NULL;
        }
        return request;
    }
    tool_usage_error(program, "unknown command or wrong arguments: '%s'", cmd);
    return NULL;
}

int main(int argc, char **argv)
{
    static const struct option options[] = {
        {"control", required_argument, NULL, 'c'},
        {"timeout", required_argument, NULL, 't'},
        TOOL_CURVE_OPTIONS,
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    rtomo_client_options opt;
    rtomo_client_options_init(&opt);
    opt.control = "tcp://localhost:5557";
    long timeout = opt.control_timeout_ms;
    int c;
    while ((c = getopt_long(argc, argv, "+c:t:h", options, NULL)) != -1) {
        switch (c) {
        case 'c': opt.control = optarg; break;
        case TOOL_OPT_SERVER_KEY: opt.server_key = optarg; break;
        case TOOL_OPT_CLIENT_KEY: opt.client_key = optarg; break;
        case 't':
            if (tool_parse_int(program, "--timeout", optarg, 1, 3600000,
                               &timeout) != 0)
                return TOOL_USAGE;
            break;
        case 'h': usage(stdout); return TOOL_OK;
        default: return tool_usage_error(program, "bad option");
        }
    }
    if (optind >= argc)
        return tool_usage_error(program, "no command given");
    opt.control_timeout_ms = (int)timeout;
    json_t *request = build_request(argc - optind, argv + optind);
    if (!request)
        return TOOL_USAGE;

    rtomo_error err;
    rtomo_client *client = rtomo_client_open(&opt, &err);
    if (!client) {
        json_decref(request);
        return tool_report_error(program, &err);
    }
    json_t *reply = NULL;
    rtomo_status st = rtomo_client_request(client, request, &reply, &err);
    if (reply) {
        json_dumpf(reply, stdout, JSON_INDENT(2));
        fputc('\n', stdout);
    }
    if (st != RTOMO_OK)
        fprintf(stderr, "%s: %s\n", program, err.message);
    json_decref(reply);
    json_decref(request);
    rtomo_client_close(client);
    return st == RTOMO_OK ? TOOL_OK : TOOL_FAILED;
}
