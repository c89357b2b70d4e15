/*
 * sim_random.c — a small reproducible random stream for the simulators and
 * tests (splitmix64: one 64-bit state, good statistical quality, no global
 * state, so every test draws fresh but repeatable data from its own seed).
 */
#include "config.h"

#include <math.h>

#include "rtomo_sim.h"

uint64_t rtomo_random_next(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

double rtomo_random_uniform(uint64_t *state)
{
    return (double)(rtomo_random_next(state) >> 11) * (1.0 / 9007199254740992.0);
}

double rtomo_random_normal(uint64_t *state)
{
    /* Box-Muller; u1 is kept away from 0 so that log() stays finite. */
    double u1 = rtomo_random_uniform(state);
    double u2 = rtomo_random_uniform(state);
    if (u1 < 1e-300)
        u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}
