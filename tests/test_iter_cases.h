/*
 * test_iter_cases.h — the geometries both iterative engine tests check the
 * projector pair on (tests/test_iter_projector.c on the CPU,
 * tests/test_cuda_iter.c on the GPU against the CPU), and their random
 * angles and axis shifts, so the two backends are held to the same cases.
 */
#ifndef TEST_ITER_CASES_H
#define TEST_ITER_CASES_H

#include <stddef.h>
#include <stdint.h>

#include "rtomo_engine.h"

typedef struct pair_case {
    const char *what;
    int width, slice, n_proj, rows;
    int irregular;              /* random angles in [0, 2 pi) */
    double axis_offset;         /* bins from the centre */
    double shift;               /* per-projection shifts in [-shift, shift] */
} pair_case;

extern const pair_case iter_cases[];
extern const int ITER_N_CASES;

/* A case's geometry, with its angles and shifts drawn from seed. */
typedef struct pair_data {
    rtomo_fbp_geometry g;
    double *angles, *shifts;
    size_t ni, ns;              /* samples of the images, the sinograms */
} pair_data;

void pair_setup(const pair_case *c, uint64_t *seed, pair_data *d);
void pair_free(pair_data *d);

#endif
