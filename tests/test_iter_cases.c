/*
 * test_iter_cases.c — the projector pair's test geometries (see
 * test_iter_cases.h).
 */
#include "config.h"

#include <check.h>
#include <math.h>
#include <stdlib.h>

#include "test_iter_cases.h"
#include "test_util.h"

const pair_case iter_cases[] = {
    {"even, uniform, centred", 64, 64, 48, 1, 0, 0.0, 0.0},
    {"odd, irregular, off-centre, shifts", 63, 63, 37, 2, 1, 3.7, 2.0},
    {"slice smaller than detector", 64, 50, 30, 1, 1, -5.25, 0.5},
    {"slice larger than detector", 40, 71, 25, 2, 1, 2.5, 1.5},
    {"odd slice, even detector, few angles", 33, 32, 7, 3, 1, -1.3, 0.8},
    {"axis-aligned and diagonal angles", 48, 48, 8, 1, 0, 0.5, 0.0},
    /* Several 32-pixel tiles, partial ones, 6 rows = a group of 4 and one
     * of 2 (both streams of A, a partial group of A^T). */
    {"6 rows, 97 wide, 150 angles", 97, 97, 150, 6, 1, 1.25, 1.0},
    {"5 rows, far off-centre axis", 128, 90, 64, 5, 0, 20.5, 0.25},
    /* The GPU's 16-row kernels of A and A^T: a group of 16 rows and a
     * last one of 4 (the 8-row kernels), with neighbouring projections
     * sharing lines (uniform angles) and without (irregular). */
    {"20 rows, uniform, shared lines", 72, 72, 96, 20, 0, 1.5, 0.0},
    {"17 rows, irregular, shifts", 67, 67, 41, 17, 1, -2.75, 1.0},
};
const int ITER_N_CASES = (int)(sizeof iter_cases / sizeof iter_cases[0]);

void pair_setup(const pair_case *c, uint64_t *seed, pair_data *d)
{
    d->g = test_fbp_geometry(c->width, c->rows, c->n_proj);
    d->g.slice_size = c->slice;
    d->g.axis = 0.5 * (c->width - 1) + c->axis_offset;
    d->angles = malloc(sizeof(double) * c->n_proj);
    d->shifts = malloc(sizeof(double) * c->n_proj);
    ck_assert(d->angles && d->shifts);
    for (int p = 0; p < c->n_proj; p++) {
        d->angles[p] = c->irregular ? test_rand_real(seed, 0.0, 2 * M_PI)
                                    : p * M_PI / c->n_proj;
        d->shifts[p] = test_rand_real(seed, -c->shift, c->shift);
    }
    if (c->irregular) {
        d->angles[0] = 0.0;             /* a box footprint */
        if (c->n_proj > 2)
            d->angles[1] = M_PI / 4;    /* the widest trapezoid */
        if (c->n_proj > 3)
            d->angles[2] = 3 * M_PI / 2;    /* sin = -1: the column walk */
    }
    d->g.angles = d->angles;
    d->g.axis_shift = d->shifts;
    d->ni = (size_t)c->rows * c->slice * c->slice;
    d->ns = (size_t)c->rows * c->n_proj * c->width;
}

void pair_free(pair_data *d)
{
    free(d->angles);
    free(d->shifts);
}
