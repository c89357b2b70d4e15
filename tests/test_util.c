/*
 * test_util.c — helpers any test program may share (see test_util.h).
 */
#include "config.h"

#include <check.h>
#include <ftw.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>

#include "rtomo_sim.h"
#include "test_util.h"

/* ------------------------------------------------------ random draws ---- */

uint64_t test_base_seed(void)
{
    static uint64_t seed;
    static int ready;
    if (!ready) {
        const char *env = getenv("RTOMO_TEST_SEED");
        seed = env ? strtoull(env, NULL, 0) : (uint64_t)time(NULL);
        fprintf(stderr, "random seed: RTOMO_TEST_SEED=%llu\n",
                (unsigned long long)seed);
        ready = 1;
    }
    return seed;
}

uint64_t test_seed(uint64_t salt, int i)
{
    uint64_t s = test_base_seed() ^ (salt * 0x9e3779b97f4a7c15ULL) ^
                 ((uint64_t)i << 32);
    rtomo_random_next(&s);
    return s;
}

int test_rand_int(uint64_t *seed, int lo, int hi)
{
    return lo + (int)(rtomo_random_next(seed) % (uint64_t)(hi - lo + 1));
}

double test_rand_real(uint64_t *seed, double lo, double hi)
{
    return lo + (hi - lo) * rtomo_random_uniform(seed);
}

void test_fill_uniform(uint64_t *seed, float *a, size_t n, double lo,
                       double hi)
{
    for (size_t i = 0; i < n; i++)
        a[i] = (float)test_rand_real(seed, lo, hi);
}

void test_fill_normal(uint64_t *seed, float *a, size_t n)
{
    for (size_t i = 0; i < n; i++)
        a[i] = (float)rtomo_random_normal(seed);
}

float *test_random_normal(uint64_t *seed, size_t n)
{
    float *a = malloc(sizeof(float) * (n ? n : 1));
    ck_assert_ptr_nonnull(a);
    test_fill_normal(seed, a, n);
    return a;
}

void test_poison(float *a, size_t n)
{
    for (size_t i = 0; i < n; i++)
        a[i] = NAN;
}

/* ------------------------------------------------------ error norms ---- */

double test_rel_l2(const float *a, const float *ref, size_t n)
{
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(a[i]))
            return INFINITY;
        double d = (double)a[i] - (double)ref[i];
        num += d * d;
        den += (double)ref[i] * (double)ref[i];
    }
    return den > 0.0 ? sqrt(num / den) : sqrt(num);
}

double test_max_abs(const float *a, size_t n)
{
    double m = 0.0;
    for (size_t i = 0; i < n; i++)
        m = fmax(m, fabs((double)a[i]));
    return m;
}

double test_max_abs_diff(const float *a, const float *b, size_t n)
{
    double m = 0.0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(a[i]) || !isfinite(b[i]))
            return INFINITY;
        m = fmax(m, fabs((double)a[i] - (double)b[i]));
    }
    return m;
}

double test_fraction_over(const float *a, const float *b, size_t n,
                          double limit)
{
    size_t over = 0;
    for (size_t i = 0; i < n; i++)
        if (!isfinite(a[i]) || !isfinite(b[i]) ||
            fabs((double)a[i] - (double)b[i]) > limit)
            over++;
    return n ? (double)over / (double)n : 0.0;
}

/* ------------------------------------------------------------ plans ---- */

rtomo_fbp_geometry test_fbp_geometry(int width, int height, int n_proj)
{
    rtomo_fbp_geometry g;
    rtomo_fbp_geometry_init(&g);
    g.det_width = width;
    g.det_height = height;
    g.n_proj = n_proj;
    return g;
}

rtomo_engine_options test_cpu_options(int threads)
{
    rtomo_engine_options opt;
    rtomo_engine_options_init(&opt);
    opt.backend = RTOMO_BACKEND_CPU;
    opt.cpu_threads = threads;
    return opt;
}

rtomo_fbp *test_create(const rtomo_fbp_geometry *g,
                       const rtomo_engine_options *opt)
{
    rtomo_error err;
    rtomo_fbp *plan = rtomo_fbp_create(g, opt, &err);
    ck_assert_msg(plan != NULL, "plan creation failed: %s", err.message);
    return plan;
}

rtomo_fbp *test_create_cpu(const rtomo_fbp_geometry *g, int threads)
{
    rtomo_engine_options opt = test_cpu_options(threads);
    return test_create(g, &opt);
}

void test_reconstruct(rtomo_fbp *plan, const int *rows, int n_rows,
                      float *out)
{
    rtomo_error err;
    rtomo_status st = rtomo_fbp_reconstruct(plan, rows, n_rows, out, &err);
    ck_assert_msg(st == RTOMO_OK, "reconstruct failed: %s", err.message);
}

/* ---------------------------------------------------- files, sockets ---- */

void test_make_temp_dir(const char *stem, char *dir, size_t size)
{
    const char *tmp = getenv("TMPDIR");
    int n = snprintf(dir, size, "%s/%s-XXXXXX", tmp && *tmp ? tmp : "/tmp",
                     stem);
    ck_assert_msg(n > 0 && (size_t)n < size, "temporary directory name too "
                  "long for %zu bytes", size);
    ck_assert_msg(mkdtemp(dir) != NULL, "cannot create %s", dir);
}

static int remove_entry(const char *path, const struct stat *sb, int flag,
                        struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

void test_remove_tree(const char *dir)
{
    /* Depth first, so that every directory is empty when its turn comes;
     * links are removed, not followed. */
    ck_assert_msg(nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS) == 0,
                  "cannot remove %s", dir);
}

int test_datagram_listener(const char *addr, int timeout_ms)
{
    int fd = socket(AF_UNIX, SOCK_DGRAM, 0);
    ck_assert_int_ge(fd, 0);
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    size_t len = strlen(addr);
    ck_assert_uint_lt(len, sizeof sa.sun_path);
    memcpy(sa.sun_path, addr, len);
    socklen_t salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
    if (addr[0] == '@')
        sa.sun_path[0] = '\0';     /* abstract: no terminating NUL */
    else
        salen += 1;
    ck_assert_msg(bind(fd, (struct sockaddr *)&sa, salen) == 0,
                  "cannot bind %s", addr);
    struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    return fd;
}

char *test_swap_env(const char *name, const char *value)
{
    const char *was = getenv(name);
    char *old = was ? strdup(was) : NULL;
    if (value)
        setenv(name, value, 1);
    else
        unsetenv(name);
    return old;
}

void test_restore_env(const char *name, char *old)
{
    if (old)
        setenv(name, old, 1);
    else
        unsetenv(name);
    free(old);
}
