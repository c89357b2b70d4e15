/*
 * tool_common.c — argument parsing, clock and signal handling shared by
 * the command-line tools (see tool_common.h).
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tool_common.h"

volatile sig_atomic_t tool_interrupted;

static void print_usage_error(const char *program, const char *format,
                              va_list ap)
{
    fprintf(stderr, "%s: ", program);
    vfprintf(stderr, format, ap);
    fprintf(stderr, "\nTry '%s --help'.\n", program);
}

int tool_usage_error(const char *program, const char *format, ...)
{
    va_list ap;
    va_start(ap, format);
    print_usage_error(program, format, ap);
    va_end(ap);
    return TOOL_USAGE;
}

int tool_option_error(const char *program, const char *format, ...)
{
    va_list ap;
    va_start(ap, format);
    print_usage_error(program, format, ap);
    va_end(ap);
    return -1;
}

int tool_report_error(const char *program, const rtomo_error *err)
{
    fprintf(stderr, "%s: %s\n", program, err->message);
    return err->code == RTOMO_E_INVALID ? TOOL_USAGE : TOOL_FAILED;
}

int tool_parse_int(const char *program, const char *name, const char *text,
                   long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno || end == text || *end != '\0' || v < lo || v > hi)
        return tool_option_error(program, "%s '%s' is not a whole number in "
                                 "[%ld, %ld]", name, text, lo, hi);
    *out = v;
    return 0;
}

int tool_parse_int32(const char *program, const char *name, const char *text,
                     int lo, int hi, int *out)
{
    long v;
    if (tool_parse_int(program, name, text, lo, hi, &v) != 0)
        return -1;
    *out = (int)v;
    return 0;
}

int tool_parse_double(const char *program, const char *name,
                      const char *text, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (errno || end == text || *end != '\0' || !(v >= lo && v <= hi))
        return tool_option_error(program, "%s '%s' is not a number in "
                                 "[%g, %g]", name, text, lo, hi);
    *out = v;
    return 0;
}

int tool_parse_int_list(const char *program, const char *name,
                        const char *text, long lo, long hi, long *out,
                        int max, int *n)
{
    char *copy = strdup(text), *save = NULL;
    int count = 0, result = 0;
    if (!copy)
        return -1;
    for (char *tok = strtok_r(copy, ",x", &save); tok && result == 0;
         tok = strtok_r(NULL, ",x", &save)) {
        if (count == max)
            result = tool_option_error(program, "%s: more than %d values in "
                                       "'%s'", name, max, text);
        else
            result = tool_parse_int(program, name, tok, lo, hi, &out[count++]);
    }
    free(copy);
    if (result == 0 && count == 0)
        result = tool_option_error(program, "%s: no value in '%s'", name,
                                   text);
    *n = count;
    return result;
}

int tool_parse_pair(const char *program, const char *name, const char *text,
                    long lo, long hi, long out[2])
{
    int n;
    if (tool_parse_int_list(program, name, text, lo, hi, out, 2, &n) != 0)
        return -1;
    if (n != 2)
        return tool_option_error(program, "%s: expected two values A,B, got "
                                 "'%s'", name, text);
    return 0;
}

int tool_parse_ratios(const char *program, const char *name,
                      const char *text, int max, double *first,
                      double *last, long *n)
{
    double a, b;
    long count;
    char extra;
    if (sscanf(text, "%lf:%lf:%ld%c", &a, &b, &count, &extra) != 3 ||
        !(a > 0) || !(b > 0) || count < 1 || count > max)
        return tool_option_error(program, "%s: '%s' is not A:B:N with A, "
                                 "B > 0 and 1 <= N <= %d", name, text, max);
    *first = a;
    *last = b;
    *n = count;
    return 0;
}

double *tool_ratios(double first, double last, int n)
{
    double *r = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    for (int k = 0; r && k < n; k++)
        r[k] = n == 1 ? first : first + (last - first) * k / (n - 1);
    return r;
}

double tool_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void tool_sleep_until(double t)
{
    double wait = t - tool_now();
    if (wait <= 0)
        return;
    struct timespec ts = {(time_t)wait, (long)((wait - floor(wait)) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR && !tool_interrupted)
        ;
}

static void on_signal(int sig)
{
    (void)sig;
    tool_interrupted = 1;
}

void tool_catch_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}
