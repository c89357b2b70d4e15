/*
 * daemon_process.c — rtomod as a child process (see daemon_process.h).
 */
#include "config.h"

#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "daemon_process.h"
#include "rtomo_client.h"

double daemon_now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return 1e3 * (double)t.tv_sec + 1e-6 * (double)t.tv_nsec;
}

void daemon_pause_ms(int ms)
{
    struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

/* A loopback port that is free now (the kernel picks it); 0 on failure. */
static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return 0;
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    int port = 0;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    close(fd);
    return port;
}

void daemon_process_default_path(char *out, size_t size)
{
    const char *explicit_path = getenv("RTOMOD");
    const char *builddir = getenv("top_builddir");
    if (explicit_path)
        snprintf(out, size, "%s", explicit_path);
    else
        snprintf(out, size, "%s/rtomod", builddir ? builddir : ".");
}

/* Ping until answered, the child exits, or time runs out. */
static int wait_for_ping(daemon_process *p, int timeout_ms, char *error,
                         size_t error_size)
{
    rtomo_client_options opt;
    rtomo_client_options_init(&opt);
    opt.control = p->control;
    opt.control_timeout_ms = 500;
    rtomo_error err;
    rtomo_client *c = rtomo_client_open(&opt, &err);
    if (!c) {
        snprintf(error, error_size, "control client: %s", err.message);
        return -1;
    }
    double deadline = daemon_now_ms() + timeout_ms;
    int rc = -1;
    while (rc != 0) {
        int status;
        if (waitpid(p->pid, &status, WNOHANG) == p->pid) {
            p->pid = 0;
            snprintf(error, error_size, "rtomod exited during start-up "
                     "(status %d)", WIFEXITED(status) ? WEXITSTATUS(status)
                                                      : -1);
            break;
        }
        if (daemon_now_ms() > deadline) {
            snprintf(error, error_size, "rtomod does not answer ping on %s: "
                     "%s", p->control, err.message);
            break;
        }
        json_t *reply = NULL;
        if (rtomo_client_command(c, "ping", &reply, &err) == RTOMO_OK)
            rc = 0;
        json_decref(reply);
    }
    rtomo_client_close(c);
    return rc;
}

int daemon_process_spawn(daemon_process *p, const char *path,
                         const char *const *args, char *error,
                         size_t error_size)
{
    memset(p, 0, sizeof *p);
    int ports[3] = {free_port(), free_port(), free_port()};
    if (!ports[0] || !ports[1] || !ports[2]) {
        snprintf(error, error_size, "no free loopback port");
        return -1;
    }
    snprintf(p->ingest, sizeof p->ingest, "tcp://127.0.0.1:%d", ports[0]);
    snprintf(p->publish, sizeof p->publish, "tcp://127.0.0.1:%d", ports[1]);
    snprintf(p->control, sizeof p->control, "tcp://127.0.0.1:%d", ports[2]);
    const char *argv[128] = {path, "--ingest", p->ingest, "--publish",
                             p->publish, "--control", p->control};
    int argc = 7;
    for (int i = 0; args && args[i] && argc < 127; i++)
        argv[argc++] = args[i];
    argv[argc] = NULL;
    pid_t parent = getpid();
    p->pid = fork();
    if (p->pid < 0) {
        snprintf(error, error_size, "fork: %s", strerror(errno));
        p->pid = 0;
        return -1;
    }
    if (p->pid == 0) {
        /* A test that fails must not leave a daemon behind. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127);
        execv(path, (char *const *)argv);
        fprintf(stderr, "cannot run %s: %s\n", path, strerror(errno));
        _exit(127);
    }
    return 0;
}

/* Attempts at a start whose daemon exits during start-up.  The ports come
 * from the kernel as free, but between their release here and the
 * daemon's bind another test running in parallel may take one ("Address
 * already in use", seen in CI with make -j2): fresh ports then.  A daemon
 * that cannot start for another reason fails every attempt alike. */
#define START_ATTEMPTS 3

int daemon_process_start(daemon_process *p, const char *path,
                         const char *const *args, int timeout_ms, char *error,
                         size_t error_size)
{
    for (int attempt = 1; attempt <= START_ATTEMPTS; attempt++) {
        if (daemon_process_spawn(p, path, args, error, error_size) != 0)
            return -1;
        if (wait_for_ping(p, timeout_ms, error, error_size) == 0)
            return 0;
        if (p->pid) {           /* alive but silent: no second chance */
            daemon_process_stop(p, SIGKILL, timeout_ms);
            return -1;
        }
    }
    return -1;
}

int daemon_process_exited(daemon_process *p, int *status)
{
    int raw;
    if (!p->pid || waitpid(p->pid, &raw, WNOHANG) != p->pid)
        return 0;
    p->pid = 0;
    *status = WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
    return 1;
}

int daemon_process_stop(daemon_process *p, int sig, int timeout_ms)
{
    if (!p->pid)
        return -1;
    kill(p->pid, sig);
    double deadline = daemon_now_ms() + timeout_ms;
    int status;
    while (daemon_now_ms() < deadline) {
        if (waitpid(p->pid, &status, WNOHANG) == p->pid) {
            p->pid = 0;
            return WIFEXITED(status) ? WEXITSTATUS(status)
                                     : 128 + WTERMSIG(status);
        }
        daemon_pause_ms(10);
    }
    kill(p->pid, SIGKILL);
    waitpid(p->pid, &status, 0);
    p->pid = 0;
    return -1;
}
