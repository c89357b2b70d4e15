/*
 * test_sd_notify.c — the systemd notification client against a real
 * AF_UNIX datagram socket standing in for systemd: path and abstract
 * addresses, the watchdog variables, and the no-op outside systemd.
 */
#include "config.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "sd_notify.h"
#include "check_run.h"

/* Bind a datagram socket at `addr` ('@' = abstract) the way systemd does. */
static int listen_at(const char *addr)
{
    int fd = socket(AF_UNIX, SOCK_DGRAM, 0);
    ck_assert_int_ge(fd, 0);
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    size_t len = strlen(addr);
    memcpy(sa.sun_path, addr, len);
    socklen_t salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
    if (addr[0] == '@')
        sa.sun_path[0] = '\0';
    else
        salen += 1;
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, salen), 0);
    struct timeval tv = {2, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    return fd;
}

static void expect_datagram(int fd, const char *want)
{
    char buf[512];
    ssize_t n = recv(fd, buf, sizeof buf - 1, 0);
    ck_assert_int_gt(n, 0);
    buf[n] = '\0';
    ck_assert_str_eq(buf, want);
}

START_TEST(path_socket_receives_ready_status_watchdog)
{
    char path[] = "/tmp/rtomo-notify-XXXXXX";
    int tmp = mkstemp(path);
    ck_assert_int_ge(tmp, 0);
    close(tmp);
    unlink(path);
    int server = listen_at(path);
    setenv("NOTIFY_SOCKET", path, 1);
    unsetenv("WATCHDOG_USEC");

    rtomo_notifier n;
    char errbuf[256];
    ck_assert_int_eq(rtomo_notifier_open(&n, errbuf, sizeof errbuf), 0);
    ck_assert(rtomo_notifier_active(&n));
    ck_assert(rtomo_notifier_watchdog_period(&n) == 0.0);
    ck_assert_int_eq(rtomo_notify(&n, "READY=1"), 0);
    expect_datagram(server, "READY=1");
    ck_assert_int_eq(rtomo_notify(&n, "STATUS=idle, 0 frames/s"), 0);
    expect_datagram(server, "STATUS=idle, 0 frames/s");
    ck_assert_int_eq(rtomo_notify(&n, "WATCHDOG=1"), 0);
    expect_datagram(server, "WATCHDOG=1");
    rtomo_notifier_close(&n);
    close(server);
    unlink(path);
}
END_TEST

START_TEST(abstract_socket_and_watchdog_period)
{
    char name[64];
    snprintf(name, sizeof name, "@rtomo-test-notify-%d", (int)getpid());
    int server = listen_at(name);
    setenv("NOTIFY_SOCKET", name, 1);
    setenv("WATCHDOG_USEC", "30000000", 1);
    char pid[32];
    snprintf(pid, sizeof pid, "%d", (int)getpid());
    setenv("WATCHDOG_PID", pid, 1);

    rtomo_notifier n;
    char errbuf[256];
    ck_assert_int_eq(rtomo_notifier_open(&n, errbuf, sizeof errbuf), 0);
    ck_assert(rtomo_notifier_watchdog_period(&n) == 15.0);
    ck_assert_int_eq(rtomo_notify(&n, "STOPPING=1"), 0);
    expect_datagram(server, "STOPPING=1");
    rtomo_notifier_close(&n);

    /* A watchdog meant for another process is not ours. */
    setenv("WATCHDOG_PID", "1", 1);
    ck_assert_int_eq(rtomo_notifier_open(&n, errbuf, sizeof errbuf), 0);
    ck_assert(rtomo_notifier_watchdog_period(&n) == 0.0);
    rtomo_notifier_close(&n);
    close(server);
}
END_TEST

START_TEST(outside_systemd_is_a_no_op_and_bad_addresses_are_reported)
{
    unsetenv("NOTIFY_SOCKET");
    rtomo_notifier n;
    char errbuf[256];
    ck_assert_int_eq(rtomo_notifier_open(&n, errbuf, sizeof errbuf), 0);
    ck_assert(!rtomo_notifier_active(&n));
    ck_assert_int_eq(rtomo_notify(&n, "READY=1"), 0);

    setenv("NOTIFY_SOCKET", "relative/path", 1);
    ck_assert_int_eq(rtomo_notifier_open(&n, errbuf, sizeof errbuf), -1);
    ck_assert_ptr_nonnull(strstr(errbuf, "relative/path"));
    ck_assert(!rtomo_notifier_active(&n));
    unsetenv("NOTIFY_SOCKET");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("sd_notify");
    TCase *tc = tcase_create("notify");
    tcase_add_test(tc, path_socket_receives_ready_status_watchdog);
    tcase_add_test(tc, abstract_socket_and_watchdog_period);
    tcase_add_test(tc, outside_systemd_is_a_no_op_and_bad_addresses_are_reported);
    suite_add_tcase(s, tc);
    return rtomo_check_run(s);
}
