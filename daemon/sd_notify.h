/*
 * sd_notify.h — systemd's service notification protocol (READY, STATUS,
 * WATCHDOG, STOPPING) spoken directly over the $NOTIFY_SOCKET datagram
 * socket, so that rtomod needs no libsystemd.  Outside systemd (no
 * $NOTIFY_SOCKET) every call is a cheap no-op.
 */
#ifndef RTOMO_SD_NOTIFY_H
#define RTOMO_SD_NOTIFY_H

#include <stdint.h>

typedef struct rtomo_notifier {
    int fd;                     /* datagram socket, -1 when not under systemd */
    char path[108];             /* socket address ('\0'-led when abstract) */
    int path_len;
    uint64_t watchdog_usec;     /* 0 when no watchdog is configured */
} rtomo_notifier;

/* Read $NOTIFY_SOCKET and $WATCHDOG_USEC (honouring $WATCHDOG_PID).
 * Returns 0, or -1 with a message in errbuf when the variable is set but
 * unusable (the daemon logs it and runs on without notifications). */
int rtomo_notifier_open(rtomo_notifier *n, char *errbuf, int errlen);
void rtomo_notifier_close(rtomo_notifier *n);

/* 1 when notifications go somewhere. */
int rtomo_notifier_active(const rtomo_notifier *n);

/* Send one notification, e.g. "READY=1", "WATCHDOG=1", "STOPPING=1" or
 * "STATUS=..." (newline-separated assignments allowed).  Returns 0 or -1
 * (errno set); a no-op returning 0 when not active. */
int rtomo_notify(const rtomo_notifier *n, const char *message);

/* Interval at which WATCHDOG=1 should be sent: half the configured watchdog
 * timeout, in seconds; 0 when there is no watchdog. */
double rtomo_notifier_watchdog_period(const rtomo_notifier *n);

#endif
