/*
 * test_sbdx_lut.c — properties of the SBDX look-up tables (sbdx_lut.h) on
 * fresh random geometries: every detector element's bilinear weights sum to
 * 1 and are centred on its ray position; the pixel-centric table is exactly
 * the transpose of the detector-centric one, in the documented compact
 * layout and within the documented sizes; the per-output hole lists hold
 * exactly the holes that reach that output, with their entry ranges; the
 * uniform response is what a frame of ones reconstructs to (and what
 * flat-fielding divides it back to 1 by); and offsets go
 * empty (so rows can be skipped) only for n > 1.
 */
#include "config.h"

#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rtomo_sim.h"
#include "sbdx_lut.h"
#include "test_sbdx_support.h"
#include "check_run.h"

#define N_GEOMETRIES 60

/* Float rounding of w_lo and w_hi: each is within 2^-25 of its double. */
#define WEIGHT_SUM_TOL 6e-8

static int random_int(uint64_t *seed, int lo, int hi)
{
    return lo + (int)(rtomo_random_uniform(seed) * (hi - lo + 1));
}

/* A random geometry whose ratios include exact 1.0 and 2.0 (f == 0 cases)
 * besides random values in [0.3, 4). */
static void random_geometry(uint64_t *seed, rtomo_sbdx_geometry *g,
                            double *ratios)
{
    rtomo_sbdx_geometry_init(g);
    g->holes_x = random_int(seed, 1, 20);
    g->holes_y = random_int(seed, 1, 20);
    g->det_width = random_int(seed, 1, 40);
    g->det_height = random_int(seed, 1, 40);
    g->shift_m = random_int(seed, 1, 12);
    g->n_planes = random_int(seed, 3, 8);
    ratios[0] = 1.0;
    ratios[1] = 2.0;
    for (int k = 2; k < g->n_planes; k++)
        ratios[k] = 0.3 + 3.7 * rtomo_random_uniform(seed);
    g->ratios = ratios;
    g->out_width = random_int(seed, 1, 90);
    g->out_height = random_int(seed, 1, 90);
    g->origin_x = random_int(seed, -30, 30);
    g->origin_y = random_int(seed, -30, 30);
}

/* Runs check(axis) on both axes of every plane of N_GEOMETRIES random
 * geometries. */
static void for_random_axes(uint64_t seed,
                            void (*check)(const rtomo_sbdx_axis_lut *a))
{
    for (int i = 0; i < N_GEOMETRIES; i++) {
        rtomo_sbdx_geometry g;
        double ratios[8];
        random_geometry(&seed, &g, ratios);
        rtomo_error err;
        rtomo_sbdx_lut *lut = rtomo_sbdx_lut_create(&g, &err);
        ck_assert_msg(lut != NULL, "LUT creation failed: %s", err.message);
        ck_assert_int_eq(lut->n_planes, g.n_planes);
        for (int k = 0; k < g.n_planes; k++) {
            SBDX_REQUIRE(lut->x[k].ratio == ratios[k], "plane %d ratio", k);
            check(&lut->x[k]);
            check(&lut->y[k]);
        }
        rtomo_sbdx_lut_destroy(lut);
    }
}

static void check_weights(const rtomo_sbdx_axis_lut *a)
{
    for (int d = 0; d < a->n_det; d++) {
        const rtomo_sbdx_dc_entry *e = &a->dc[d];
        double t = a->ratio * (d - (a->n_det - 1) / 2.0);
        SBDX_REQUIRE(e->w_lo > 0.0f && e->w_lo <= 1.0f, "w_lo %g of d %d",
                     (double)e->w_lo, d);
        SBDX_REQUIRE(e->w_hi >= 0.0f && e->w_hi < 1.0f, "w_hi %g of d %d",
                     (double)e->w_hi, d);
        double sum = (double)e->w_lo + e->w_hi;
        SBDX_REQUIRE(fabs(sum - 1.0) <= WEIGHT_SUM_TOL,
                     "n %g d %d: weights sum to 1 %+g", a->ratio, d, sum - 1.0);
        /* The deposit's centre of mass is the ray position t. */
        double centre = e->offset * (double)e->w_lo +
                        (e->offset + 1.0) * (double)e->w_hi;
        SBDX_REQUIRE(fabs(centre - t) <= 1e-6 * (1.0 + fabs(t)),
                     "n %g d %d: deposit centred at %g, ray at %g", a->ratio,
                     d, centre, t);
        SBDX_REQUIRE(d == 0 || e->offset >= a->dc[d - 1].offset,
                     "offsets decrease at d %d", d);
    }
}

START_TEST(weights_sum_to_one_and_centre_on_the_ray)
{
    for_random_axes(0x5bd1e995u, check_weights);
}
END_TEST

/* Dense (det x offset) weight matrices of both tables must be equal, and
 * the pixel-centric one must have no duplicate or zero entries. */
static void check_transpose(const rtomo_sbdx_axis_lut *a)
{
    int span = a->span_len;
    ck_assert_int_eq(a->span_first, a->dc[0].offset);
    ck_assert_int_le(span, (int)ceil(a->ratio * (a->n_det - 1)) + 2);
    ck_assert_int_le(a->n_entries, 2 * a->n_det);
    ck_assert_uint_eq(rtomo_sbdx_axis_lut_table_bytes(a),
                      4u * (span + 1) + 8u * a->n_entries);

    float *dc = calloc((size_t)a->n_det * span, sizeof *dc);
    float *pc = calloc((size_t)a->n_det * span, sizeof *pc);
    int *hits = calloc((size_t)a->n_det * span, sizeof *hits);
    ck_assert(dc && pc && hits);
    for (int d = 0; d < a->n_det; d++) {
        int o = a->dc[d].offset - a->span_first;
        dc[(size_t)d * span + o] = a->dc[d].w_lo;
        if (a->dc[d].w_hi != 0.0f)
            dc[(size_t)d * span + o + 1] = a->dc[d].w_hi;
    }
    ck_assert_int_eq(a->start[0], 0);
    int longest = 0;
    for (int o = 0; o < span; o++) {
        const rtomo_sbdx_pc_entry *e = NULL;
        int n = rtomo_sbdx_axis_lut_entries(a, a->span_first + o, &e);
        SBDX_REQUIRE(n == a->start[o + 1] - a->start[o],
                     "entry count of offset %d", o);
        longest = n > longest ? n : longest;
        for (int j = 0; j < n; j++) {
            SBDX_REQUIRE(e[j].det >= 0 && e[j].det < a->n_det,
                         "entry det %d out of range", e[j].det);
            SBDX_REQUIRE(e[j].weight != 0.0f, "zero-weight entry kept");
            SBDX_REQUIRE(j == 0 || e[j].det > e[j - 1].det,
                         "entries of offset %d not sorted by det", o);
            pc[(size_t)e[j].det * span + o] = e[j].weight;
            hits[(size_t)e[j].det * span + o]++;
        }
    }
    ck_assert_int_eq(a->start[span], a->n_entries);
    ck_assert_int_eq(longest, a->max_per_offset);
    for (size_t i = 0; i < (size_t)a->n_det * span; i++) {
        SBDX_REQUIRE(hits[i] <= 1, "duplicate entry (det %zu, offset %zu)",
                     i / span, i % span);
        SBDX_REQUIRE(pc[i] == dc[i],   /* bit-exact transpose */
                     "n %g det %zu offset %zu: pixel-centric %g, "
                     "detector-centric %g", a->ratio, i / span, i % span,
                     (double)pc[i], (double)dc[i]);
    }
    /* Offsets outside the span have nothing. */
    const rtomo_sbdx_pc_entry *e = NULL;
    ck_assert_int_eq(rtomo_sbdx_axis_lut_entries(a, a->span_first - 1, &e), 0);
    ck_assert_int_eq(rtomo_sbdx_axis_lut_entries(a, a->span_first + span, &e),
                     0);
    free(dc);
    free(pc);
    free(hits);
}

START_TEST(pixel_centric_table_is_the_exact_transpose)
{
    for_random_axes(0x2545f491u, check_transpose);
}
END_TEST

/* Brute force over every hole: the listed holes are exactly those with
 * entries at offset P - m c, ascending. */
static void check_hole_lists(const rtomo_sbdx_axis_lut *a)
{
    int longest = 0;
    for (int i = 0; i < a->n_out; i++) {
        int position = a->origin + i;
        const int32_t *list = a->holes + a->hole_start[i];
        int n = a->hole_start[i + 1] - a->hole_start[i];
        int j = 0;
        for (int c = 0; c < a->n_holes; c++) {
            const rtomo_sbdx_pc_entry *e = NULL;
            int count = rtomo_sbdx_axis_lut_entries(
                a, position - a->shift_m * c, &e);
            if (count > 0) {
                SBDX_REQUIRE(j < n && list[j] == c,
                             "output %d: hole %d missing from its list", i,
                             c);
                int32_t h = a->hole_start[i] + j;
                SBDX_REQUIRE(a->pc + a->hole_entry_first[h] == e &&
                                 a->hole_entry_count[h] == count,
                             "output %d, hole %d: wrong entry range", i, c);
                j++;
            }
        }
        SBDX_REQUIRE(j == n, "output %d lists %d holes, %d contribute", i, n,
                     j);
        longest = n > longest ? n : longest;
    }
    ck_assert_int_eq(longest, a->max_holes);
    ck_assert_int_le(a->max_holes,
                     (a->span_len + a->shift_m - 1) / a->shift_m);
}

START_TEST(hole_lists_hold_exactly_the_contributing_holes)
{
    for_random_axes(0x9e3779b9u, check_hole_lists);
}
END_TEST

/* Samples t(d) lie n apart, each depositing on floor(t) and floor(t) + 1:
 * for n <= 1 they leave no offset of the span empty; for n > 1 (and enough
 * elements) some are empty, which is what row skipping exploits. */
static void check_empty_offsets(const rtomo_sbdx_axis_lut *a)
{
    int empty = 0;
    for (int o = 0; o < a->span_len - 1; o++)  /* the last may be a w_hi = 0 */
        empty += a->start[o + 1] == a->start[o];
    if (a->ratio <= 1.0)
        SBDX_REQUIRE(empty == 0, "n %g: %d empty offsets", a->ratio, empty);
    else if (a->ratio >= 2.0 && a->n_det >= 3)
        SBDX_REQUIRE(empty > 0, "n %g, %d elements: no empty offset",
                     a->ratio, a->n_det);
}

START_TEST(offsets_go_empty_only_for_n_above_one)
{
    for_random_axes(0x7f4a7c15u, check_empty_offsets);
}
END_TEST

/* The documented per-plane table size for the reference configuration
 * (160-element axis, n up to 3.82) stays small enough for shared memory. */
START_TEST(reference_tables_fit_in_shared_memory)
{
    static const double ratios[] = {0.6, 1.0, 2.25, 3.82};
    rtomo_sbdx_geometry g;
    rtomo_sbdx_geometry_init(&g);
    g.holes_x = g.holes_y = 100;
    g.det_width = 160;
    g.det_height = 80;
    g.shift_m = 10;
    g.n_planes = 4;
    g.ratios = ratios;
    rtomo_error err;
    rtomo_sbdx_lut *lut = rtomo_sbdx_lut_create(&g, &err);
    ck_assert_msg(lut != NULL, "%s", err.message);
    for (int k = 0; k < 4; k++) {
        size_t bytes = rtomo_sbdx_axis_lut_table_bytes(&lut->x[k]) +
                       rtomo_sbdx_axis_lut_table_bytes(&lut->y[k]);
        ck_assert_uint_le(bytes, 8u * 1024u);
        ck_assert_int_eq(lut->x[k].n_out, 1000);
        ck_assert_int_le(lut->y[k].max_holes,
                         (int)ceil(ratios[k] * 80 / 10.0) + 1);
    }
    rtomo_sbdx_lut_destroy(lut);
}
END_TEST

/* The documented uniform response: a frame of ones reconstructs on plane k
 * to x[k].response[i] * y[k].response[j] as raw planes (flat_field = 0),
 * and to 1 inside the field of view and 0 outside it as flat-fielded ones,
 * for every method and window. */
START_TEST(uniform_response_is_what_ones_reconstruct_to)
{
    uint64_t seed = 0x0e5u + (uint64_t)_i;
    rtomo_sbdx_geometry g;
    double ratios[8];
    random_geometry(&seed, &g, ratios);
    size_t n = (size_t)g.holes_x * g.holes_y * g.det_width * g.det_height;
    size_t img = (size_t)g.out_width * g.out_height;
    float *ones = malloc(n * sizeof *ones);
    float *planes = malloc(img * g.n_planes * sizeof *planes);
    ck_assert(ones && planes);
    for (size_t i = 0; i < n; i++)
        ones[i] = 1.0f;
    const rtomo_sbdx_method method = (rtomo_sbdx_method)(_i % 2);
    rtomo_sbdx_output out = {.planes = planes};
    ck_assert_int_eq(g.flat_field, 1);  /* the default */
    sbdx_reconstruct_into(&g, method, 0, ones, RTOMO_DTYPE_F32, &out);
    sbdx_require_flat_uniform(&g, planes, 1.0, 1e-5);

    g.flat_field = 0;
    sbdx_reconstruct_into(&g, method, 0, ones, RTOMO_DTYPE_F32, &out);
    rtomo_error err;
    rtomo_sbdx_lut *lut = rtomo_sbdx_lut_create(&g, &err);
    ck_assert_ptr_nonnull(lut);
    for (int k = 0; k < g.n_planes; k++)
        for (int j = 0; j < g.out_height; j++)
            for (int i = 0; i < g.out_width; i++) {
                double want = (double)lut->x[k].response[i] *
                              lut->y[k].response[j];
                double got = planes[img * k + (size_t)j * g.out_width + i];
                SBDX_REQUIRE(fabs(got - want) <= 1e-5 * (1.0 + want),
                             "plane %d (%d, %d): ones give %g, response %g",
                             k, i, j, got, want);
            }
    rtomo_sbdx_lut_destroy(lut);
    free(ones);
    free(planes);
}
END_TEST

START_TEST(invalid_geometry_builds_no_tables)
{
    rtomo_sbdx_geometry g;
    rtomo_sbdx_geometry_init(&g);
    rtomo_error err;
    ck_assert_ptr_null(rtomo_sbdx_lut_create(&g, &err));
    ck_assert_int_eq(err.code, RTOMO_E_INVALID);
    ck_assert_ptr_null(rtomo_sbdx_lut_create(NULL, &err));
    ck_assert_int_eq(err.code, RTOMO_E_INVALID);
    rtomo_sbdx_lut_destroy(NULL);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("sbdx_lut");
    TCase *tc = tcase_create("lut");
    tcase_add_test(tc, weights_sum_to_one_and_centre_on_the_ray);
    tcase_add_test(tc, pixel_centric_table_is_the_exact_transpose);
    tcase_add_test(tc, hole_lists_hold_exactly_the_contributing_holes);
    tcase_add_test(tc, offsets_go_empty_only_for_n_above_one);
    tcase_add_test(tc, reference_tables_fit_in_shared_memory);
    tcase_add_loop_test(tc, uniform_response_is_what_ones_reconstruct_to, 0,
                        8);
    tcase_add_test(tc, invalid_geometry_builds_no_tables);
    suite_add_tcase(s, tc);
    return rtomo_check_run(s);
}
