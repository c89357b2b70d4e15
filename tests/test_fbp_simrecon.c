/*
 * test_fbp_simrecon.c — the rtomo-simrecon demo as its users meet it: help,
 * a clear message and exit status 2 for every kind of bad option, and a
 * small scan that writes its images and reports an accurate slice.
 * Runs the built program ($top_builddir/rtomo-simrecon).
 */
#include "config.h"

#include <check.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rtomo_engine.h"
#include "check_run.h"
#include "test_util.h"

static char dir[256];
static char program[1024];

static void setup(void)
{
    const char *build = getenv("top_builddir");
    snprintf(program, sizeof program, "%s/rtomo-simrecon", build ? build : ".");
    ck_assert_msg(access(program, X_OK) == 0, "%s is not built", program);
    test_make_temp_dir("rtomo-simrecon", dir, sizeof dir);
}

static void teardown(void)
{
    test_remove_tree(dir);
}

/* Read a whole small file into a static buffer. */
static const char *slurp(const char *path)
{
    static char text[16384];
    FILE *f = fopen(path, "r");
    ck_assert_msg(f, "cannot read %s", path);
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = '\0';
    fclose(f);
    return text;
}

/* Run the program with args (NULL-terminated); stdout and stderr go to
 * files in dir.  Returns the exit status. */
static int run(const char *const *args)
{
    const char *argv[32];
    int n = 0;
    argv[n++] = program;
    while (*args && n < 31)
        argv[n++] = *args++;
    argv[n] = NULL;
    char out[300], errp[300];
    snprintf(out, sizeof out, "%s/stdout", dir);
    snprintf(errp, sizeof errp, "%s/stderr", dir);
    pid_t pid = fork();
    ck_assert(pid >= 0);
    if (pid == 0) {
        int o = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int e = open(errp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(o, 1);
        dup2(e, 2);
        execv(program, (char *const *)argv);
        _exit(127);
    }
    int status;
    ck_assert(waitpid(pid, &status, 0) == pid);
    ck_assert_msg(WIFEXITED(status), "%s died", program);
    return WEXITSTATUS(status);
}

static const char *output_of(const char *which)
{
    char path[300];
    snprintf(path, sizeof path, "%s/%s", dir, which);
    return slurp(path);
}

START_TEST(help)
{
    const char *args[] = {"--help", NULL};
    ck_assert_int_eq(run(args), 0);
    const char *text = output_of("stdout");
    ck_assert_ptr_nonnull(strstr(text, "Usage: rtomo-simrecon"));
    ck_assert_ptr_nonnull(strstr(text, "--backend"));
}
END_TEST

typedef struct bad_use {
    const char *args[4];
    const char *says;           /* stderr must contain it */
} bad_use;

static const bad_use bad_uses[] = {
    {{"--size", "abc"}, "--size 'abc'"},
    {{"--size", "3"}, "--size '3'"},
    {{"--angles", "0"}, "--angles '0'"},
    {{"--range", "270"}, "180 or 360"},
    {{"--filter", "gauss"}, "--filter 'gauss'"},
    {{"--interp", "cubic"}, "--interp 'cubic'"},
    {{"--backend", "opencl"}, "--backend 'opencl'"},
    {{"--slices", "99"}, "beyond the detector"},
    {{"--slices", "2:x"}, "--slices '2:x'"},
    {{"--display", "3:1"}, "--display '3:1'"},
    {{"--flat", "50"}, "brighter than --dark"},
    {{"--cutoff", "0"}, "--cutoff '0'"},
    {{"--bogus"}, "unknown option '--bogus'"},
    {{"--size"}, "needs a value"},
    {{"stray"}, "unexpected argument 'stray'"},
};

START_TEST(bad_options_exit_2_with_a_reason)
{
    const bad_use *b = &bad_uses[_i];
    ck_assert_int_eq(run(b->args), 2);
    const char *text = output_of("stderr");
    ck_assert_msg(strstr(text, b->says), "for %s: '%s' does not say '%s'",
                  b->args[0], text, b->says);
    ck_assert_ptr_nonnull(strstr(text, "--help"));
}
END_TEST

static long file_size(const char *name)
{
    char path[300];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

START_TEST(small_scan)
{
    /* 12 rows: row 7 is the phantom's z = -0.25 */
    const char *args[] = {"--size", "64", "--angles", "96", "--rows", "12",
                          "--backend", "cpu", "--threads", "2", "--noise",
                          "--output", dir, NULL};
    ck_assert_int_eq(run(args), 0);
    const char *text = output_of("stdout");
    ck_assert_msg(strstr(text, "slice 7 (phantom z = -0.250)"), "%s", text);
    const char *e = strstr(text, "error inside the head, 2 px from its edge:");
    ck_assert_ptr_nonnull(e);
    double percent = atof(e + strlen("error inside the head, 2 px from its "
                                     "edge:"));
    /* measured 14.1 % (12.1 % without noise; at 64 px the edges dominate):
     * it must be a real reconstruction */
    ck_assert_msg(percent > 1.0 && percent < 18.0, "error %g %%", percent);
    const char *brain = strstr(text, "mean inside the brain");
    ck_assert_ptr_nonnull(brain);
    double mean, truth, off;
    ck_assert_int_eq(sscanf(brain, "mean inside the brain %lf (phantom %lf, "
                            "%lf %%)", &mean, &truth, &off), 3);
    /* measured -0.71 % */
    ck_assert_msg(fabs(off) < 2.0, "brain mean %g vs %g", mean, truth);
    ck_assert_ptr_nonnull(strstr(text, "GU/s"));
    ck_assert_int_eq(file_size("slice_0007.f32"), 64 * 64 * 4);
    ck_assert_int_gt(file_size("slice_0007.png"), 100);
    ck_assert_int_gt(file_size("truth_0007.png"), 100);
}
END_TEST

START_TEST(missing_backend_is_a_runtime_failure)
{
    if (rtomo_cuda_device_count() > 0)
        return;     /* with a GPU the CUDA backend may run */
    const char *args[] = {"--size", "16", "--angles", "8", "--backend",
                          "cuda", "--output", dir, NULL};
    ck_assert_int_eq(run(args), 1);
    ck_assert_ptr_nonnull(strstr(output_of("stderr"), "CUDA"));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("simrecon");
    TCase *tc = tcase_create("simrecon");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, help);
    tcase_add_loop_test(tc, bad_options_exit_2_with_a_reason, 0,
                        sizeof bad_uses / sizeof bad_uses[0]);
    tcase_add_test(tc, small_scan);
    tcase_add_test(tc, missing_backend_is_a_runtime_failure);
    suite_add_tcase(s, tc);
    return rtomo_check_run(s);
}
