/*
 * rtomod_log.h — rtomod's log: one line per message on stderr, with a UTC
 * timestamp and a level.  Safe to call from any thread (each line is written
 * with a single write), so worker threads log directly.
 */
#ifndef RTOMOD_LOG_H
#define RTOMOD_LOG_H

typedef enum rtomod_log_level {
    RTOMOD_LOG_ERROR = 0,
    RTOMOD_LOG_WARN,
    RTOMOD_LOG_INFO,
    RTOMOD_LOG_DEBUG
} rtomod_log_level;

/* Messages above `level` are discarded.  The default is INFO. */
void rtomod_log_set_level(rtomod_log_level level);
rtomod_log_level rtomod_log_get_level(void);

/* "error", "warn", "info", "debug" (also "warning"); returns 0 or -1. */
int rtomod_log_level_parse(const char *name, rtomod_log_level *out);
const char *rtomod_log_level_name(rtomod_log_level level);

void rtomod_log(rtomod_log_level level, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

#define log_error(...) rtomod_log(RTOMOD_LOG_ERROR, __VA_ARGS__)
#define log_warn(...)  rtomod_log(RTOMOD_LOG_WARN, __VA_ARGS__)
#define log_info(...)  rtomod_log(RTOMOD_LOG_INFO, __VA_ARGS__)
#define log_debug(...) rtomod_log(RTOMOD_LOG_DEBUG, __VA_ARGS__)

#endif /* RTOMOD_LOG_H */
