/*
 * test_cuda_fbp_common.h — helpers shared by the CUDA FBP tests: running a
 * Check suite without fork (CUDA cannot be used in a child forked after the
 * parent touched the driver), smoothed random data, GPU plan options and
 * the list of every kernel configuration.  Random fills, poisoned outputs,
 * error norms and plan creation come from test_util.h, which this header
 * includes.
 */
#ifndef TEST_CUDA_FBP_COMMON_H
#define TEST_CUDA_FBP_COMMON_H

#include <check.h>
#include <stddef.h>
#include <stdint.h>

#include "rtomo_engine.h"
#include "test_util.h"

/* Exit status automake reads as "skipped". */
#define TEST_SKIP 77

/* Run every test of s in this process; returns the exit status (0 when all
 * passed).  Returns TEST_SKIP without running anything when no GPU is
 * visible. */
int test_run_gpu_suite(Suite *s);

/* Replace each line of `width` samples by its moving average over `box`
 * samples (circular), so that neighbouring bins differ little: nearest-
 * neighbour sampling then tolerates last-bit differences in the bin
 * position, which any two implementations have. */
void test_smooth_lines(float *a, size_t lines, int width, int box);
/* A GPU plan of g with opt, each device split into `split` slots by the
 * backend's test hook RTOMO_CUDA_FBP_SPLIT (several slots on one GPU, as
 * several GPUs would hold them). */
rtomo_fbp *test_create_split(const rtomo_fbp_geometry *g,
                             const rtomo_engine_options *opt, int split);
/* Options for a GPU plan of the given kernel, slices and precision. */
void test_gpu_options(rtomo_engine_options *opt, rtomo_bp_kernel kernel,
                      int slices, rtomo_precision precision);
/* Name of a configuration, for messages: "hybrid/2/half/linear". */
const char *test_mode_name(rtomo_bp_kernel kernel, int slices,
                           rtomo_precision precision, rtomo_interp interp);

/* Error bound of a mode, relative L2 against the CPU.  Texture units
 * interpolate with 8-bit weights (an error up to |q[i+1]-q[i]|/512 per
 * sample, about 2e-3 relative on white noise); the ALU path interpolates in
 * float.  Nearest runs on smoothed data (see test_smooth_lines).  Half
 * storage rounds every value to 11 significant bits. */
double test_cpu_bound(rtomo_bp_kernel kernel, rtomo_precision precision,
                      rtomo_interp interp);

/* Every kernel x slices x precision x interpolation: TEST_MODES entries. */
#define TEST_MODES (4 * 3 * 2 * 2)
void test_mode(int i, rtomo_bp_kernel *kernel, int *slices,
               rtomo_precision *precision, rtomo_interp *interp);

/* Every pixel of n ROI images of g outside its circular field of view is
 * exactly 0 (the radius from the formula of rtomo_engine.h, computed in
 * the test); returns how many pixels of one image lie outside. */
long test_zeros_outside_fov(const rtomo_fbp_geometry *g, const float *out,
                            int n, const char *name);

#endif
