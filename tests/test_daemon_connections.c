/*
 * test_daemon_connections.c — several ingest connections add bandwidth
 * only when each has a ZeroMQ I/O thread of its own at both ends.  The
 * client library pins each PUSH socket to its own I/O thread and opens
 * them one handshake at a time, so that the daemon's ZeroMQ, which puts an
 * accepted connection on its least loaded I/O thread, spreads them too.
 * (Before, every connection shared the first I/O thread on both sides.)
 *
 * Measured as the CPU time of the "ZMQbg/IO/<n>" threads in Linux's /proc,
 * in the client (this process) and in the daemon, while two connections
 * carry 1 GiB of messages that the daemon rejects after reading them.
 */
#include "config.h"

#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon_harness.h"

#define MESSAGES 256
#define MESSAGE_BYTES (4u << 20)
#define MAX_IO_THREADS 8

/* CPU ticks of each ZeroMQ I/O thread of process pid, indexed by the
 * thread's number; returns how many numbers were seen (highest + 1). */
static int io_thread_ticks(pid_t pid, long ticks[MAX_IO_THREADS])
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
    DIR *dir = opendir(path);
    ck_assert_msg(dir, "cannot list %s", path);
    memset(ticks, 0, sizeof(long) * MAX_IO_THREADS);
    int seen = 0;
    struct dirent *e;
    while ((e = readdir(dir))) {
        if (e->d_name[0] == '.')
            continue;
        char stat_path[400], line[1024];
        snprintf(stat_path, sizeof stat_path, "%s/%s/stat", path, e->d_name);
        FILE *f = fopen(stat_path, "r");
        if (!f)
            continue;           /* the thread has ended */
        char *got = fgets(line, sizeof line, f);
        fclose(f);
        /* "tid (comm) state ..." : utime and stime are fields 14 and 15. */
        char *open = got ? strchr(line, '(') : NULL;
        char *close = got ? strrchr(line, ')') : NULL;
        int n;
        if (!open || !close || sscanf(open + 1, "ZMQbg/IO/%d", &n) != 1 ||
            n < 0 || n >= MAX_IO_THREADS)
            continue;
        long utime, stime;
        ck_assert(sscanf(close + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u "
                                    "%*u %ld %ld", &utime, &stime) == 2);
        ticks[n] = utime + stime;
        if (n + 1 > seen)
            seen = n + 1;
    }
    closedir(dir);
    return seen;
}

/* Each of the first `threads` I/O threads did at least a sixth of their
 * work (an even split is half each). */
static void assert_spread(pid_t pid, int threads, const char *who)
{
    long ticks[MAX_IO_THREADS];
    int seen = io_thread_ticks(pid, ticks);
    ck_assert_msg(seen >= threads, "%s: %d ZeroMQ I/O threads, expected %d",
                  who, seen, threads);
    long total = 0;
    for (int i = 0; i < threads; i++)
        total += ticks[i];
    ck_assert_msg(total >= 8, "%s: I/O threads ran only %ld ticks: too "
                  "little to judge", who, total);
    for (int i = 0; i < threads; i++)
        ck_assert_msg(ticks[i] * 6 >= total,
                      "%s: I/O thread %d ran %ld of %ld ticks: the "
                      "connections share one thread", who, i, ticks[i],
                      total);
}

START_TEST(two_connections_use_two_io_threads_at_both_ends)
{
    daemon_session t;
    const char *args[] = {"--set", "ingest.io_threads=2", "--log-level",
                          "error", NULL};
    daemon_session_open(&t, args, 2);
    char *payload = malloc(MESSAGE_BYTES);
    ck_assert(payload);
    memset(payload, 0x5a, MESSAGE_BYTES);
    /* Not a valid header: read whole by the I/O thread, then rejected. */
    const char header[] = "{\"protocol\": 1}";
    rtomo_error err;
    for (int i = 0; i < MESSAGES; i++)
        ck_assert_msg(rtomo_client_send_raw(t.c, i % 2, header,
                                            sizeof header - 1, 2, payload,
                                            MESSAGE_BYTES, &err) == RTOMO_OK,
                      "send %d: %s", i, err.message);
    daemon_wait_counter(t.c, "rejected", MESSAGES);
    assert_spread(getpid(), 2, "client");
    assert_spread(t.d.pid, 2, "rtomod");
    free(payload);
    daemon_session_close(&t);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {
        two_connections_use_two_io_threads_at_both_ends,
    };
    return daemon_run_tests("daemon_connections", tests,
                            (int)(sizeof tests / sizeof tests[0]), 60);
}
