/*
 * rtomo_keygen.c — rtomo-keygen: make a ZeroMQ CURVE key pair for rtomod or
 * one of its clients.  Writes NAME.key (the public key, to hand out) and
 * NAME.key_secret (the pair, mode 0600, to keep), in the format of CZMQ and
 * pyzmq certificates (rtomo_keys.h).  docs/rtomod.md, "Security and the
 * trust model", says where each file goes.  Exit status 0 written, 1 not
 * written (files exist, no CURVE, I/O error), 2 bad usage.
 */
#include "config.h"

#include <getopt.h>
#include <stdio.h>

#include "rtomo_keys.h"
#include "tool_common.h"

static const char *program = "rtomo-keygen";

static void usage(FILE *out)
{
    fprintf(out,
"Usage: rtomo-keygen [OPTION]... NAME\n"
"Make a CURVE key pair: NAME.key holds the public key (give it to the\n"
"other side), NAME.key_secret the key pair (mode 0600: keep it private).\n"
"\n"
"  -f, --force   replace existing NAME.key and NAME.key_secret\n"
"  -q, --quiet   do not print the public key\n"
"  -h, --help    show this help\n"
"\n"
"For the daemon:   rtomo-keygen /etc/rtomo/rtomod\n"
"                  (security.curve_secret_key_file: rtomod.key_secret;\n"
"                  clients get rtomod.key for --server-key)\n"
"For a client:     rtomo-keygen camera1\n"
"                  (camera1.key goes into the daemon's security.client_keys;\n"
"                  the client uses --client-key camera1.key_secret)\n"
"\n"
"Exit status: 0 written, 1 not written, 2 bad usage.\n");
}

int main(int argc, char **argv)
{
    static const struct option options[] = {
        {"force", no_argument, NULL, 'f'},
        {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    int force = 0, quiet = 0, c;
    while ((c = getopt_long(argc, argv, "fqh", options, NULL)) != -1) {
        switch (c) {
        case 'f': force = 1; break;
        case 'q': quiet = 1; break;
        case 'h': usage(stdout); return TOOL_OK;
        default: return tool_usage_error(program, "bad option");
        }
    }
    if (optind + 1 != argc)
        return tool_usage_error(program, optind == argc
                                             ? "no NAME given"
                                             : "one NAME only, not '%s'",
                                argv[argc - 1]);
    const char *name = argv[optind];
    if (!rtomo_keys_curve_available()) {
        fprintf(stderr, "%s: this libzmq was built without CURVE "
                "(zmq_has(\"curve\") is false)\n", program);
        return TOOL_FAILED;
    }
    char public_z85[RTOMO_KEY_Z85_SIZE];
    rtomo_error err;
    if (rtomo_keys_generate(name, force, public_z85, &err) != RTOMO_OK) {
        fprintf(stderr, "%s: %s\n", program, err.message);
        return TOOL_FAILED;
    }
    if (!quiet)
        printf("%s.key: public key %s\n%s.key_secret: key pair (mode 0600)\n",
               name, public_z85, name);
    return TOOL_OK;
}
