/*
 * test_protocol_common.h — what the protocol tests share: a reproducible
 * random seed (fresh per run unless RTOMO_TEST_SEED fixes it; always
 * printed so that a failure can be replayed) and small random draws.
 */
#ifndef RTOMO_TEST_PROTOCOL_COMMON_H
#define RTOMO_TEST_PROTOCOL_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "rtomo_sim.h"

/* The run's base seed: RTOMO_TEST_SEED, or the clock.  Printed once. */
static inline uint64_t test_base_seed(void)
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

/* A stream for one test (or one loop iteration `i` of it). */
static inline uint64_t test_seed(uint64_t salt, int i)
{
    uint64_t s = test_base_seed() ^ (salt * 0x9e3779b97f4a7c15ULL) ^
                 ((uint64_t)i << 32);
    rtomo_random_next(&s);
    return s;
}

/* Uniform integer in [lo, hi]. */
static inline int rand_int(uint64_t *s, int lo, int hi)
{
    return lo + (int)(rtomo_random_next(s) % (uint64_t)(hi - lo + 1));
}

/* Uniform real in [lo, hi). */
static inline double rand_real(uint64_t *s, double lo, double hi)
{
    return lo + (hi - lo) * rtomo_random_uniform(s);
}

#endif /* RTOMO_TEST_PROTOCOL_COMMON_H */
