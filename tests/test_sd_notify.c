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
#include <unistd.h>

#include "sd_notify.h"
#include "check_run.h"
#include "test_util.h"

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
    int server = test_datagram_listener(path, 2000);
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
    int server = test_datagram_listener(name, 2000);
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
