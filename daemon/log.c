/*
 * log.c — leveled, timestamped log lines on stderr (see rtomod_log.h).
 */
#include "config.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "rtomod_log.h"

static _Atomic int current_level = RTOMOD_LOG_INFO;

static const char *const level_names[] = {"error", "warn", "info", "debug"};

void rtomod_log_set_level(rtomod_log_level level) { current_level = level; }

rtomod_log_level rtomod_log_get_level(void)
{
    return (rtomod_log_level)current_level;
}

int rtomod_log_level_parse(const char *name, rtomod_log_level *out)
{
    if (!name)
        return -1;
    if (strcasecmp(name, "warning") == 0) {
        *out = RTOMOD_LOG_WARN;
        return 0;
    }
    for (int i = 0; i <= RTOMOD_LOG_DEBUG; i++) {
        if (strcasecmp(name, level_names[i]) == 0) {
            *out = (rtomod_log_level)i;
            return 0;
        }
    }
    return -1;
}

const char *rtomod_log_level_name(rtomod_log_level level)
{
    return (unsigned)level <= RTOMOD_LOG_DEBUG ? level_names[level] : "unknown";
}

void rtomod_log(rtomod_log_level level, const char *format, ...)
{
    if ((int)level > current_level)
        return;
    char line[1024];
    struct timespec now;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &now);
    gmtime_r(&now.tv_sec, &tm);
    size_t n = strftime(line, sizeof line, "%Y-%m-%dT%H:%M:%S", &tm);
    n += (size_t)snprintf(line + n, sizeof line - n, ".%03ldZ rtomod %-5s ",
                          now.tv_nsec / 1000000L, rtomod_log_level_name(level));
    va_list ap;
    va_start(ap, format);
    int len = vsnprintf(line + n, sizeof line - n, format, ap);
    va_end(ap);
    /* A message longer than the line is cut, keeping the newline. */
    n = len < 0 ? n : (n + (size_t)len < sizeof line - 1 ? n + (size_t)len
                                                         : sizeof line - 2);
    line[n++] = '\n';
    /* One write per line keeps lines of concurrent threads whole. */
    ssize_t unused = write(STDERR_FILENO, line, n);
    (void)unused;
}
