/*
 * tool_common.h — what the command-line tools (rtomo-push, rtomo-sub,
 * rtomoctl, rtomo-simrecon) and the benchmarks (the rtomod ones,
 * bench-sbdx) share: argument parsing with clear messages (numbers, lists,
 * SBDX ratios), the exit codes and error reporting, a monotonic clock, and
 * a Ctrl-C flag.  It needs no library: the tools that link only the engine
 * use it too.
 *
 * Exit codes: 0 success, 1 failure at run time (daemon refused, did not
 * answer, I/O error), 2 bad usage.  rtomo-push adds 3 to 5 for what the
 * daemon made of its scans (its --help).
 */
#ifndef RTOMO_TOOL_COMMON_H
#define RTOMO_TOOL_COMMON_H

#include <signal.h>
#include <stdint.h>

#include "rtomo_engine.h"

enum { TOOL_OK = 0, TOOL_FAILED = 1, TOOL_USAGE = 2 };

/* Print "PROGRAM: message" and "Try 'PROGRAM --help'." to stderr and
 * return TOOL_USAGE. */
int tool_usage_error(const char *program, const char *format, ...)
    __attribute__((format(printf, 2, 3)));
/* The same for option parsers, which return 0 or -1: returns -1. */
int tool_option_error(const char *program, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

/* Parse `text` as an integer / number in [lo, hi] for option `name`.
 * Returns 0, or -1 after printing a usage error. */
int tool_parse_int(const char *program, const char *name, const char *text,
                   long lo, long hi, long *out);
/* The same for an int field (lo, hi within int). */
int tool_parse_int32(const char *program, const char *name, const char *text,
                     int lo, int hi, int *out);
int tool_parse_double(const char *program, const char *name,
                      const char *text, double lo, double hi, double *out);
/* "A,B" (or "AxB") integers, each in [lo, hi]. */
int tool_parse_pair(const char *program, const char *name, const char *text,
                    long lo, long hi, long out[2]);
/* Up to `max` comma-separated integers in [lo, hi]; *n gets the count. */
int tool_parse_int_list(const char *program, const char *name,
                        const char *text, long lo, long hi, long *out,
                        int max, int *n);

/* Print "PROGRAM: message" of an engine or client error and return the
 * exit status it calls for: TOOL_USAGE when the request itself was invalid
 * (RTOMO_E_INVALID: bad endpoints, options), TOOL_FAILED otherwise. */
int tool_report_error(const char *program, const rtomo_error *err);

/* SBDX plane ratios given as "A:B:N": N ratios from A to B, with A, B > 0
 * and 1 <= N <= max.  0, or -1 after a usage error. */
int tool_parse_ratios(const char *program, const char *name,
                      const char *text, int max, double *first,
                      double *last, long *n);
/* The n ratios themselves, evenly spaced from first to last (first alone
 * when n is 1); malloc'd, NULL when out of memory. */
double *tool_ratios(double first, double last, int n);

/* CURVE options of the tools that talk to rtomod (rtomo-push, rtomo-sub,
 * rtomoctl): put TOOL_CURVE_OPTIONS in the getopt_long table, set the
 * client options' server_key / client_key on the two codes, and print
 * TOOL_CURVE_HELP in the usage. */
enum { TOOL_OPT_SERVER_KEY = 0x5301, TOOL_OPT_CLIENT_KEY };
#define TOOL_CURVE_OPTIONS                                                  \
    {"server-key", required_argument, NULL, TOOL_OPT_SERVER_KEY},           \
    {"client-key", required_argument, NULL, TOOL_OPT_CLIENT_KEY}
#define TOOL_CURVE_HELP                                                     \
    "      --server-key FILE    CURVE: the daemon's public key (NAME.key)\n" \
    "      --client-key FILE    CURVE: this client's key pair\n"            \
    "                           (NAME.key_secret, rtomo-keygen)\n"

/* Monotonic clock, seconds. */
double tool_now(void);
/* Sleep until monotonic time `t` (seconds); returns at once if past. */
void tool_sleep_until(double t);

/* Set on SIGINT/SIGTERM once tool_catch_signals() ran. */
extern volatile sig_atomic_t tool_interrupted;
void tool_catch_signals(void);

#endif /* RTOMO_TOOL_COMMON_H */
