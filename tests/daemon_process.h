/*
 * daemon_process.h — run rtomod as a child process on free loopback ports:
 * used by the integration tests (through daemon_harness.h) and by the
 * ingest benchmark.  Errors are returned with a message, never fatal.
 */
#ifndef DAEMON_PROCESS_H
#define DAEMON_PROCESS_H

#include <stddef.h>
#include <sys/types.h>

typedef struct daemon_process {
    pid_t pid;                  /* 0 when not running */
    char ingest[64], publish[64], control[64];  /* tcp://127.0.0.1:port */
} daemon_process;

/* Start the rtomod binary at `path` with --ingest/--publish/--control on
 * free loopback ports followed by `args` (NULL-terminated, may be NULL),
 * and wait up to timeout_ms until it answers ping.  The child dies with the
 * calling process.  Returns 0, or -1 with `error` filled (the child is
 * then gone). */
int daemon_process_start(daemon_process *p, const char *path,
                         const char *const *args, int timeout_ms, char *error,
                         size_t error_size);

/* The same without waiting: the child runs (or is about to), nothing is
 * known about its sockets yet. */
int daemon_process_spawn(daemon_process *p, const char *path,
                         const char *const *args, char *error,
                         size_t error_size);

/* Send `sig` and wait up to timeout_ms for the exit.  Returns the exit
 * status (128 + signal when killed by one), or -1 when it did not exit in
 * time (it is then killed). */
int daemon_process_stop(daemon_process *p, int sig, int timeout_ms);

/* 1 (with the exit status) when the child has exited, else 0; never
 * waits. */
int daemon_process_exited(daemon_process *p, int *status);

/* The rtomod binary: $RTOMOD, else $top_builddir/rtomod, else ./rtomod. */
void daemon_process_default_path(char *out, size_t size);

/* A monotonic clock in milliseconds, and a sleep of ms milliseconds. */
double daemon_now_ms(void);
void daemon_pause_ms(int ms);

#endif /* DAEMON_PROCESS_H */
