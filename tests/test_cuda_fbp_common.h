/*
 * test_cuda_fbp_common.h — helpers shared by the CUDA FBP tests: running a
 * Check suite without fork (CUDA cannot be used in a child forked after the
 * parent touched the driver), fresh reproducible random data, poisoned
 * outputs, error norms, and creating CPU/GPU plan pairs.
 */
#ifndef TEST_CUDA_FBP_COMMON_H
#define TEST_CUDA_FBP_COMMON_H

#include <check.h>
#include <stddef.h>
#include <stdint.h>

#include "rtomo_engine.h"

/* Exit status automake reads as "skipped". */
#define TEST_SKIP 77

/* Run every test of s in this process; returns the exit status (0 when all
 * passed).  Returns TEST_SKIP without running anything when no GPU is
 * visible. */
int test_run_gpu_suite(Suite *s);

/* Uniform values in [lo, hi). */
void test_fill_uniform(uint64_t *seed, float *a, size_t n, double lo, double hi);
/* Replace each line of `width` samples by its moving average over `box`
 * samples (circular), so that neighbouring bins differ little: nearest-
 * neighbour sampling then tolerates last-bit differences in the bin
 * position, which any two implementations have. */
void test_smooth_lines(float *a, size_t lines, int width, int box);
/* NaN everywhere, so that unwritten outputs fail every comparison. */
void test_poison(float *a, size_t n);
/* ||a - ref|| / ||ref||, or INFINITY when a holds a NaN or inf. */
double test_rel_l2(const float *a, const float *ref, size_t n);
double test_max_abs(const float *a, size_t n);
double test_max_abs_diff(const float *a, const float *b, size_t n);
/* Fraction of elements where |a - b| > limit (1 where either is not
 * finite). */
double test_fraction_over(const float *a, const float *b, size_t n, double limit);

/* Options for a GPU plan of the given kernel, slices and precision. */
void test_gpu_options(rtomo_engine_options *opt, rtomo_bp_kernel kernel,
                      int slices, rtomo_precision precision);
/* Create a plan and fail the test (with the engine's message) if that
 * fails. */
rtomo_fbp *test_create(const rtomo_fbp_geometry *g,
                       const rtomo_engine_options *opt);
rtomo_fbp *test_create_cpu(const rtomo_fbp_geometry *g);
/* Reconstruct and fail the test on error. */
void test_reconstruct(rtomo_fbp *plan, const int *rows, int n_rows, float *out);
/* Name of a configuration, for messages: "hybrid/2/half/linear". */
const char *test_mode_name(rtomo_bp_kernel kernel, int slices,
                           rtomo_precision precision, rtomo_interp interp);

/* Every kernel x slices x precision x interpolation: TEST_MODES entries. */
#define TEST_MODES (4 * 3 * 2 * 2)
void test_mode(int i, rtomo_bp_kernel *kernel, int *slices,
               rtomo_precision *precision, rtomo_interp *interp);

#endif
