/*
 * test_sbdx_support.h — helpers shared by the SBDX tests: standard small and
 * mid-size geometries, seeded random frames of every sample type, a
 * one-call reconstruction, and error measures.
 */
#ifndef RTOMO_TEST_SBDX_SUPPORT_H
#define RTOMO_TEST_SBDX_SUPPORT_H

#include <stddef.h>
#include <stdint.h>

#include "rtomo_engine.h"

/* A check for tight loops: Check's ck_assert reports every passing
 * assertion to the parent process (one write each), which makes
 * per-element assertions over large arrays slow.  This one only reports a
 * failure. */
#define SBDX_REQUIRE(cond, ...)                                             \
    do {                                                                    \
        if (!(cond))                                                        \
            ck_abort_msg(__VA_ARGS__);                                      \
    } while (0)

/* 12x10 holes, 16x8 detector, m = 4, six planes spanning n < 1, n = 1 and
 * n > 1 (ratios below); output the default 48x40. */
extern const double sbdx_small_ratios[6];
void sbdx_small_geometry(rtomo_sbdx_geometry *g);

/* 40x30 holes, 48x32 detector, m = 6, eight planes from 0.55 to 3.1. */
extern const double sbdx_mid_ratios[8];
void sbdx_mid_geometry(rtomo_sbdx_geometry *g);

/* Samples per frame and pixels of all planes of g (output size filled in
 * as the engine does). */
size_t sbdx_frame_samples(const rtomo_sbdx_geometry *g);
size_t sbdx_planes_pixels(const rtomo_sbdx_geometry *g);

/* A frame of random samples of the given type (uint8 over [0, 255],
 * uint16 over [0, 65535], float32 over [-100, 1000)), from *seed.  The
 * caller frees it. */
void *sbdx_random_frame(const rtomo_sbdx_geometry *g, rtomo_dtype dtype,
                        uint64_t *seed);

/* Reconstruct one frame on the CPU backend with the given method and thread
 * count; returns the planes (caller frees).  Fails the running test on any
 * engine error. */
float *sbdx_reconstruct(const rtomo_sbdx_geometry *g, rtomo_sbdx_method method,
                        int threads, const void *frame, rtomo_dtype dtype);

/* max |a - b| over one plane divided by max |b| over that plane (0 when
 * both are all zero); the largest over all planes. */
double sbdx_max_relative_error(const float *a, const float *b,
                               const rtomo_sbdx_geometry *g);

#endif /* RTOMO_TEST_SBDX_SUPPORT_H */
