/*
 * test_util.h — what any test program may share: reproducible random
 * seeds and draws, seeded random fills, poisoned outputs, error norms,
 * small FBP geometries, CPU options and plans that fail the running test
 * on an engine error, temporary directories, and a datagram socket that
 * stands in for systemd's.  Helpers that only one area
 * needs stay in that area's support file (test_sbdx_support.h,
 * test_cuda_fbp_common.h, daemon_harness.h).
 */
#ifndef RTOMO_TEST_UTIL_H
#define RTOMO_TEST_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "rtomo_engine.h"

/* ------------------------------------------------------ random draws ---- */

/* The run's base seed: RTOMO_TEST_SEED, or else the clock (a fresh draw
 * per run).  Printed to stderr once, so that a failure can be replayed. */
uint64_t test_base_seed(void);
/* A stream for one test (salt) or one loop iteration `i` of it, derived
 * from the base seed. */
uint64_t test_seed(uint64_t salt, int i);
/* Uniform integer in [lo, hi]. */
int test_rand_int(uint64_t *seed, int lo, int hi);
/* Uniform real in [lo, hi). */
double test_rand_real(uint64_t *seed, double lo, double hi);

/* a[0..n-1] uniform in [lo, hi) / standard normal, drawn from *seed. */
void test_fill_uniform(uint64_t *seed, float *a, size_t n, double lo,
                       double hi);
void test_fill_normal(uint64_t *seed, float *a, size_t n);
/* A new array of n standard normal values (caller frees); fails the test
 * when out of memory. */
float *test_random_normal(uint64_t *seed, size_t n);

/* NaN everywhere, so that an output never written fails every
 * comparison. */
void test_poison(float *a, size_t n);

/* ------------------------------------------------------ error norms ---- */

/* ||a - ref|| / ||ref|| (or ||a - ref|| when ref is all zero); INFINITY
 * when a holds a NaN or inf. */
double test_rel_l2(const float *a, const float *ref, size_t n);
/* max |a[i]|. */
double test_max_abs(const float *a, size_t n);
/* max |a[i] - b[i]|; INFINITY when either holds a NaN or inf, so that a
 * poisoned or broken output never passes a bound. */
double test_max_abs_diff(const float *a, const float *b, size_t n);
/* Fraction of elements where |a - b| > limit (counting every element
 * where either is not finite). */
double test_fraction_over(const float *a, const float *b, size_t n,
                          double limit);

/* ------------------------------------------------------------ plans ---- */

/* Defaults (rtomo_fbp_geometry_init) with the given detector and
 * projection count. */
rtomo_fbp_geometry test_fbp_geometry(int width, int height, int n_proj);
/* Options for the CPU backend with `threads` workers (0 = one per
 * core). */
rtomo_engine_options test_cpu_options(int threads);
/* Create a plan; fail the running test (with the engine's message) if
 * that fails. */
rtomo_fbp *test_create(const rtomo_fbp_geometry *g,
                       const rtomo_engine_options *opt);
/* The same on the CPU backend with `threads` workers (0 = one per core). */
rtomo_fbp *test_create_cpu(const rtomo_fbp_geometry *g, int threads);
/* Reconstruct the kept rows rows[0..n_rows-1] into out; fail the test on
 * error. */
void test_reconstruct(rtomo_fbp *plan, const int *rows, int n_rows,
                      float *out);

/* ---------------------------------------------------- files, sockets ---- */

/* Create a fresh directory $TMPDIR/STEM-XXXXXX (TMPDIR defaults to /tmp)
 * and write its path to dir; fails the test if that is not possible. */
void test_make_temp_dir(const char *stem, char *dir, size_t size);
/* Remove dir and everything in it; fails the test if that fails. */
void test_remove_tree(const char *dir);

/* An AF_UNIX datagram socket bound at addr (a path, or '@' and a name in
 * the abstract namespace, as NOTIFY_SOCKET gives them: how systemd
 * listens), whose receives give up after timeout_ms.  Fails the test if it
 * cannot be bound. */
int test_datagram_listener(const char *addr, int timeout_ms);

/* Set environment variable name to value (NULL: unset it) for a test
 * hook; returns the old value, which test_restore_env puts back (and
 * frees). */
char *test_swap_env(const char *name, const char *value);
void test_restore_env(const char *name, char *old);

#endif /* RTOMO_TEST_UTIL_H */
