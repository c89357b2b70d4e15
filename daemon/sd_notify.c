/*
 * sd_notify.c — systemd notification over the $NOTIFY_SOCKET protocol: one
 * AF_UNIX datagram per notification, text "KEY=VALUE" lines.  The address
 * may be a path or, when it starts with '@', an abstract socket name.
 */
#include "config.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "sd_notify.h"

static void read_watchdog(rtomo_notifier *n)
{
    const char *usec = getenv("WATCHDOG_USEC");
    const char *pid = getenv("WATCHDOG_PID");
    n->watchdog_usec = 0;
    if (!usec)
        return;
    /* The watchdog applies to us only if WATCHDOG_PID is unset or ours. */
    if (pid && strtol(pid, NULL, 10) != (long)getpid())
        return;
    char *end = NULL;
    unsigned long long v = strtoull(usec, &end, 10);
    if (end != usec && *end == '\0')
        n->watchdog_usec = v;
}

int rtomo_notifier_open(rtomo_notifier *n, char *errbuf, int errlen)
{
    memset(n, 0, sizeof *n);
    n->fd = -1;
    const char *addr = getenv("NOTIFY_SOCKET");
    if (!addr || !*addr)
        return 0;
    size_t len = strlen(addr);
    if ((addr[0] != '/' && addr[0] != '@') || len >= sizeof n->path) {
        snprintf(errbuf, (size_t)errlen,
                 "NOTIFY_SOCKET '%s' is neither an absolute path nor an "
                 "abstract '@' name of at most %zu bytes", addr,
                 sizeof n->path - 1);
        return -1;
    }
    memcpy(n->path, addr, len);
    if (addr[0] == '@')
        n->path[0] = '\0';
    n->path_len = (int)len;
    n->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (n->fd < 0) {
        snprintf(errbuf, (size_t)errlen, "cannot create notify socket: %s",
                 strerror(errno));
        return -1;
    }
    read_watchdog(n);
    return 0;
}

void rtomo_notifier_close(rtomo_notifier *n)
{
    if (n->fd >= 0)
        close(n->fd);
    n->fd = -1;
}

int rtomo_notifier_active(const rtomo_notifier *n) { return n->fd >= 0; }

int rtomo_notify(const rtomo_notifier *n, const char *message)
{
    if (n->fd < 0)
        return 0;
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    memcpy(sa.sun_path, n->path, (size_t)n->path_len);
    socklen_t salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) +
                                  (size_t)n->path_len +
                                  (n->path[0] == '\0' ? 0 : 1));
    ssize_t sent = sendto(n->fd, message, strlen(message), MSG_NOSIGNAL,
                          (struct sockaddr *)&sa, salen);
    return sent < 0 ? -1 : 0;
}

double rtomo_notifier_watchdog_period(const rtomo_notifier *n)
{
    return n->watchdog_usec ? (double)n->watchdog_usec / 2e6 : 0.0;
}
