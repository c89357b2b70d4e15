/*
 * check_run.h — the one way every Check test program runs its suite, so
 * that each test's main() says only which tests it has.
 */
#ifndef RTOMO_CHECK_RUN_H
#define RTOMO_CHECK_RUN_H

#include <check.h>
#include <stdlib.h>

/* Run every test of suite s (the runner takes it over) with the given fork
 * mode and return the process exit status: EXIT_FAILURE when any failed. */
static inline int rtomo_check_run_mode(Suite *s, enum fork_status mode)
{
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, mode);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

/* Each test in its own process, so that a crash fails one test (Check's
 * default; the environment variable CK_FORK=no still turns it off for a
 * debugger). */
static inline int rtomo_check_run(Suite *s)
{
    return rtomo_check_run_mode(s, CK_FORK_GETENV);
}

/* All tests in this process: for GPU tests, whose CUDA context must not be
 * inherited across fork(). */
static inline int rtomo_check_run_in_process(Suite *s)
{
    return rtomo_check_run_mode(s, CK_NOFORK);
}

#endif
