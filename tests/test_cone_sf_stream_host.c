/*
 * test_cone_sf_stream_host.c — the host side of the streamed cone SF pair,
 * which needs no GPU (the streamed A and A^T themselves are
 * test_cuda_cone_stream.c's):
 *   - the pooled vector ops (cone_host_vec.c) against the CPU pair's own
 *     ops on whole rows: axpby (with beta 0 and not), mul and clamp to
 *     the bit, dot within 1e-12 relative (only its order of sums
 *     differs), on rows of several chunks and a short last one, two rows;
 *     the window adds and zeroing against a plain loop, to the bit, the
 *     window gathers and slab copies to the bit;
 *   - the slab planner and rtomo_cone_iter_bytes: resident when the budget
 *     holds the solve, else streamed slabs that fit the budget, smaller
 *     slabs for smaller budgets, the host bytes counting the lanes'
 *     page-locked slab staging, every window within the detector and
 *     covering what a slab's voxels reach; RTOMO_E_NOMEM naming what one
 *     slice needs when nothing fits; the test hook's slices as asked.
 */
#include "config.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_run.h"
#include "cone_host_vec.h"
#include "cone_iter.h"
#include "cone_sf_plan.h"
#include "test_cone_support.h"
#include "test_util.h"

/* Two rows of 3 chunks and 12345 floats: chunk borders and a short
 * last chunk. */
#define ROW_LEN (3 * CONE_HOST_CHUNK + 12345)

static iter_vec make_vec(uint64_t *seed, int n)
{
    iter_vec v;
    memset(&v, 0, sizeof v);
    v.space = ITER_IMAGES;
    v.n = n;
    v.row_len = ROW_LEN;
    v.data = malloc(sizeof(float) * (size_t)n * ROW_LEN);
    ck_assert_ptr_nonnull(v.data);
    test_fill_uniform(seed, v.data, (size_t)n * ROW_LEN, -1.0, 1.0);
    return v;
}

static iter_vec copy_vec(const iter_vec *v)
{
    iter_vec c = *v;
    const size_t bytes = sizeof(float) * (size_t)v->n * v->row_len;
    c.data = malloc(bytes);
    ck_assert_ptr_nonnull(c.data);
    memcpy(c.data, v->data, bytes);
    return c;
}

static int same_bits(const iter_vec *a, const iter_vec *b)
{
    return memcmp(a->data, b->data,
                  sizeof(float) * (size_t)a->n * a->row_len) == 0;
}

START_TEST(test_vector_ops)
{
    uint64_t seed = test_seed(0x57a1, 0);
    cone_host_vec *h = NULL;
    rtomo_error err;
    ck_assert_int_eq(cone_host_vec_create(3, &h, &err), RTOMO_OK);
    const rtomo_iter_backend_ops *cpu = &cone_sf_cpu_ops;
    iter_vec x = make_vec(&seed, 2), y = make_vec(&seed, 2);
    iter_vec w = make_vec(&seed, 1);
    /* dot */
    double d1[2], d2[2];
    cone_host_dot(h, &x, &y, d1);
    ck_assert_int_eq(cpu->dot(NULL, &x, &y, d2, &err), RTOMO_OK);
    for (int i = 0; i < 2; i++) {
        fprintf(stderr, "pooled dot, row %d: %.17g against %.17g\n", i,
                d1[i], d2[i]);
        ck_assert(d2[i] != 0.0);
        ck_assert_double_le(fabs(d1[i] - d2[i]), 1e-12 * fabs(d2[i]) +
                                                     1e-9);
    }
    /* axpby, beta 0 and not; per-row scalars */
    const double alpha[2] = {0.75, -1.5}, beta[2] = {0.0, 2.25};
    iter_vec y1 = copy_vec(&y), y2 = copy_vec(&y);
    cone_host_axpby(h, alpha, &x, beta, &y1);
    ck_assert_int_eq(cpu->axpby(NULL, alpha, &x, beta, &y2, &err), RTOMO_OK);
    ck_assert(same_bits(&y1, &y2));
    ck_assert(!same_bits(&y1, &y));
    /* mul by one row */
    cone_host_mul(h, &w, &y1);
    ck_assert_int_eq(cpu->mul(NULL, &w, &y2, &err), RTOMO_OK);
    ck_assert(same_bits(&y1, &y2));
    /* clamp */
    cone_host_clamp(h, &y1);
    ck_assert_int_eq(cpu->clamp_nonneg(NULL, &y2, &err), RTOMO_OK);
    ck_assert(same_bits(&y1, &y2));
    ck_assert(y1.data[ROW_LEN + 7] >= 0.0f);
    free(x.data);
    free(y.data);
    free(w.data);
    free(y1.data);
    free(y2.data);
    cone_host_vec_destroy(h);
}
END_TEST

/* A window of 7 rows of 13 columns from row 5 of 20-row frames, 9 frames,
 * added twice into a sinogram of random values. */
START_TEST(test_window_add)
{
    uint64_t seed = test_seed(0x57a2, 0);
    cone_host_vec *h = NULL;
    rtomo_error err;
    ck_assert_int_eq(cone_host_vec_create(2, &h, &err), RTOMO_OK);
    const int frames = 9, cols = 13, det_v = 20, row0 = 5, rows = 7;
    const size_t frame = (size_t)cols * det_v, win = (size_t)cols * rows;
    const size_t n = frame * frames;
    float *y = malloc(sizeof(float) * n), *ref = malloc(sizeof(float) * n);
    float *window = malloc(sizeof(float) * win * frames);
    ck_assert(y && ref && window);
    test_fill_uniform(&seed, y, n, -1.0, 1.0);
    test_fill_uniform(&seed, window, win * frames, -1.0, 1.0);
    memcpy(ref, y, sizeof(float) * n);
    for (int k = 0; k < 2; k++) {
        cone_host_add_window(h, window, win, (size_t)row0 * cols, frame,
                             frames, y);
        for (int p = 0; p < frames; p++)
            for (size_t c = 0; c < win; c++)
                ref[p * frame + (size_t)row0 * cols + c] +=
                    window[p * win + c];
    }
    ck_assert_int_eq(memcmp(y, ref, sizeof(float) * n), 0);
    /* the same window gathered back out of y (A^T's upload staging):
     * each frame's rows, nothing from the rows around them */
    float *got = malloc(sizeof(float) * win * frames);
    ck_assert_ptr_nonnull(got);
    cone_host_gather_window(h, y, win, (size_t)row0 * cols, frame, frames,
                            got);
    for (int p = 0; p < frames; p++)
        ck_assert_int_eq(memcmp(got + p * win,
                                y + p * frame + (size_t)row0 * cols,
                                sizeof(float) * win), 0);
    free(got);
    /* a big zeroing and a big copy: several chunks and a short one */
    const size_t big = 2 * CONE_HOST_CHUNK + 3;
    float *z = malloc(sizeof(float) * big), *w = malloc(sizeof(float) * big);
    ck_assert(z && w);
    test_fill_uniform(&seed, z, big, 1.0, 2.0);
    memset(w, 0, sizeof(float) * big);
    cone_host_copy(h, w, z, big);
    ck_assert_int_eq(memcmp(w, z, sizeof(float) * big), 0);
    cone_host_zero(h, z, big);
    ck_assert_double_eq(test_max_abs(z, big), 0.0);
    free(z);
    free(w);
    free(y);
    free(ref);
    free(window);
    cone_host_vec_destroy(h);
}
END_TEST

/* A geometry with a wide cone: slabs' windows overlap by its spread. */
static rtomo_cone_geometry plan_geometry(void)
{
    rtomo_cone_geometry g = cone_test_pair_case(0);
    g.nz = 61;
    return g;
}

static rtomo_cone *setup(const rtomo_cone_geometry *g)
{
    rtomo_cone *c = calloc(1, sizeof *c);
    ck_assert_ptr_nonnull(c);
    rtomo_error err;
    ck_assert_msg(cone_geometry_setup(c, g, 1, &err) == RTOMO_OK, "%s",
                  err.message);
    return c;
}

/* Every voxel row a slab covers, checked at the views' extremes: a
 * window holds the rows its slab's corners project to. */
static void check_windows(const rtomo_cone *c, const cone_sf_stream_plan *p)
{
    const cone_bp_const *k = &c->bp;
    for (int z = 0; z < k->nz; z += p->slices) {
        const int count = k->nz - z < p->slices ? k->nz - z : p->slices;
        int row0, rows;
        cone_sf_slab_rows(k, z, count, &row0, &rows);
        ck_assert_int_ge(row0, 0);
        ck_assert_int_le(row0 + rows, k->det_v);
        ck_assert_int_le(rows, p->max_rows);
        /* the slab's middle slice at the axis projects into its window */
        const double zc = k->z0 + (z + 0.5 * (count - 1)) * k->voxel;
        const double v = zc * k->sdd / k->sad * k->inv_pitch_v + k->v0;
        if (v >= 0.0 && v <= k->det_v - 1.0) {
            ck_assert_double_ge(v, row0 - 0.5);
            ck_assert_double_le(v, row0 + rows - 0.5);
        }
    }
}

START_TEST(test_plan)
{
    rtomo_cone_geometry g = plan_geometry();
    rtomo_cone *c = setup(&g);
    rtomo_error err;
    const size_t resident = cone_sf_resident_bytes(c, 1, NULL);
    cone_sf_stream_plan p, q;
    /* the test hook's slices, one that does not divide 61 */
    ck_assert_int_eq(cone_sf_stream_plan_make(c, 1, 0, 7, &p, &err),
                     RTOMO_OK);
    ck_assert_int_eq(p.slices, 7);
    ck_assert_int_eq(p.n_slabs, 9);
    check_windows(c, &p);
    /* budgets: a third and a tenth of the resident solve */
    ck_assert_int_eq(cone_sf_stream_plan_make(c, 1, resident / 3, 0, &p,
                                              &err), RTOMO_OK);
    ck_assert_int_eq(cone_sf_stream_plan_make(c, 1, resident / 10, 0, &q,
                                              &err), RTOMO_OK);
    fprintf(stderr, "resident %zu bytes; a third: %d slabs of %d slices "
            "(%zu bytes); a tenth: %d of %d (%zu bytes)\n", resident,
            p.n_slabs, p.slices, p.device_bytes, q.n_slabs, q.slices,
            q.device_bytes);
    ck_assert_uint_le(p.device_bytes, resident / 3);
    ck_assert_uint_le(q.device_bytes, resident / 10);
    ck_assert_int_ge(p.n_slabs, CONE_SF_MIN_SLABS);
    ck_assert_int_lt(q.slices, p.slices);
    check_windows(c, &p);
    check_windows(c, &q);
    /* two GPUs: at least 4 slabs each */
    ck_assert_int_eq(cone_sf_stream_plan_make(c, 2, resident, 0, &p, &err),
                     RTOMO_OK);
    ck_assert_int_ge(p.n_slabs, 2 * CONE_SF_MIN_SLABS);
    /* nothing fits: the error says what one slice needs */
    ck_assert_int_eq(cone_sf_stream_plan_make(c, 1, 1000, 0, &p, &err),
                     RTOMO_E_NOMEM);
    ck_assert_ptr_nonnull(strstr(err.message, "one slice"));
    rtomo_cone_destroy(c);
}
END_TEST

START_TEST(test_iter_bytes)
{
    rtomo_cone_geometry g = plan_geometry();
    size_t host, device, h2, d2;
    int slices = -1;
    rtomo_error err;
    ck_assert_int_eq(rtomo_cone_iter_bytes(&g, RTOMO_BACKEND_CPU, 0, 0, &host,
                                           &device, &slices, &err), RTOMO_OK);
    const size_t vol = sizeof(float) * (size_t)g.nx * g.ny * g.nz;
    const size_t sino = sizeof(float) * (size_t)g.det_u * g.det_v * g.n_proj;
    /* the solver's 4 and 4, the CPU pair's weighted sinogram, staging */
    ck_assert_uint_ge(host, 4 * vol + 5 * sino + (sino > vol ? sino : vol));
    ck_assert_uint_eq(device, 0);
    ck_assert_int_eq(slices, 0);
    /* CUDA, no limit: resident, the vectors on the device */
    ck_assert_int_eq(rtomo_cone_iter_bytes(&g, RTOMO_BACKEND_CUDA, 1, 0, &h2,
                                           &device, &slices, &err), RTOMO_OK);
    ck_assert_uint_ge(device, 4 * vol + 5 * sino);
    ck_assert_uint_lt(h2, host);
    ck_assert_int_eq(slices, 0);
    /* a quarter of that: streamed, within the budget, vectors on the host */
    const size_t budget = device / 4;
    ck_assert_int_eq(rtomo_cone_iter_bytes(&g, RTOMO_BACKEND_CUDA, 1, budget,
                                           &h2, &d2, &slices, &err),
                     RTOMO_OK);
    fprintf(stderr, "streamed within %zu bytes: %d slices a slab, device "
            "%zu, host %zu bytes\n", budget, slices, d2, h2);
    ck_assert_int_gt(slices, 0);
    ck_assert_uint_le(d2, budget);
    /* the host: the vectors (pageable), the front end's staging of the
     * larger of a sinogram and a volume, and the lanes' page-locked
     * staging, a slab and a window each, exactly */
    rtomo_cone *c = setup(&g);
    cone_sf_stream_plan p;
    ck_assert_int_eq(cone_sf_stream_plan_make(c, 1, budget, 0, &p, &err),
                     RTOMO_OK);
    ck_assert_int_eq(p.slices, slices);
    ck_assert_uint_eq(h2, 4 * vol + 4 * sino + (vol > sino ? vol : sino) +
                              CONE_SF_LANES *
                                  (p.slab_bytes + p.window_bytes));
    rtomo_cone_destroy(c);
    /* refused budgets and backends */
    ck_assert_int_eq(rtomo_cone_iter_bytes(&g, RTOMO_BACKEND_CUDA, 1, 4096,
                                           &h2, &d2, &slices, &err),
                     RTOMO_E_NOMEM);
    ck_assert_int_eq(rtomo_cone_iter_bytes(&g, RTOMO_BACKEND_AUTO, 1, 0, &h2,
                                           &d2, &slices, &err),
                     RTOMO_E_INVALID);
    g.sdd = g.sad;
    ck_assert_int_eq(rtomo_cone_iter_bytes(&g, RTOMO_BACKEND_CPU, 1, 0, NULL,
                                           NULL, NULL, &err),
                     RTOMO_E_INVALID);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cone_sf_stream_host");
    TCase *tc = tcase_create("host");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_vector_ops);
    tcase_add_test(tc, test_window_add);
    tcase_add_test(tc, test_plan);
    tcase_add_test(tc, test_iter_bytes);
    suite_add_tcase(s, tc);
    return rtomo_check_run(s);
}
