/*
 * test_fbp_plane.c — planes of any orientation on the CPU backend
 * (rtomo_fbp_reconstruct_plane), the reference the GPU planes are checked
 * against: the checks of a plane and of a slot list; planes through grid
 * points equal the slices there; an oblique plane equals the definition
 * (rtomo_engine.h) computed here in double; fractional heights interpolate
 * between slices; planes through the reconstructed Shepp-Logan phantom are
 * as accurate as its slices; and a plane from a list of slots equals the
 * plane of a plan that was fed only those.
 *
 * Random data come from test_seed (a fresh draw per run, replayable with
 * RTOMO_TEST_SEED).  Each bound has the measured value next to it (gcc 12,
 * x86-64).
 */
#include "config.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rtomo_engine.h"
#include "rtomo_sim.h"
#include "check_run.h"
#include "test_util.h"

#define DET_W 40
#define N_PROJ 30
#define SLICE 44            /* larger than the detector: c != axis */
#define MAX_ROWS 24

/* ------------------------------------------------------------ fixture ---- */

/* A plan with irregular angles, per-projection shifts and an off-centre
 * axis, whose kept rows hold random filtered sinograms. */
typedef struct fixture {
    double angles[N_PROJ], shifts[N_PROJ];
    rtomo_fbp_geometry g;
    float *sino;            /* row_count x N_PROJ x DET_W, as set */
    rtomo_fbp *plan;
} fixture;

static void fixture_make(fixture *f, uint64_t *rng, int det_height,
                         int row_first, int row_count, rtomo_interp interp,
                         int threads)
{
    f->g = test_fbp_geometry(DET_W, det_height, N_PROJ);
    for (int p = 0; p < N_PROJ; p++) {
        f->angles[p] = test_rand_real(rng, 0.0, 2 * M_PI);
        f->shifts[p] = test_rand_real(rng, -3.0, 3.0);
    }
    f->g.angles = f->angles;
    f->g.axis_shift = f->shifts;
    f->g.axis = 0.5 * (DET_W - 1) + test_rand_real(rng, -4.0, 4.0);
    f->g.row_first = row_first;
    f->g.row_count = row_count;
    f->g.slice_size = SLICE;
    f->g.interp = interp;
    f->plan = test_create_cpu(&f->g, threads);
    f->sino = test_random_normal(rng, (size_t)row_count * N_PROJ * DET_W);
    rtomo_error err;
    ck_assert_msg(rtomo_fbp_set_filtered(f->plan, row_first, row_count,
                                         f->sino, &err) == RTOMO_OK,
                  "%s", err.message);
}

static void fixture_free(fixture *f)
{
    rtomo_fbp_destroy(f->plan);
    free(f->sino);
}

static rtomo_fbp_plane make_plane(double cx, double cy, double cz,
                                  const double u[3], const double v[3],
                                  int width, int height)
{
    rtomo_fbp_plane p = {{cx, cy, cz}, {u[0], u[1], u[2]},
                         {v[0], v[1], v[2]}, width, height};
    return p;
}

static const double X_AXIS[3] = {1, 0, 0}, Y_AXIS[3] = {0, 1, 0},
                    Z_AXIS[3] = {0, 0, 1};

/* A new image of the plane; fails the test on an engine error. */
static float *plane_image(rtomo_fbp *plan, const rtomo_fbp_plane *pl,
                          const int *slots, int n_slots)
{
    float *out = malloc(sizeof(float) * (size_t)pl->width * pl->height);
    ck_assert_ptr_nonnull(out);
    test_poison(out, (size_t)pl->width * pl->height);
    rtomo_error err;
    ck_assert_msg(rtomo_fbp_reconstruct_plane(plan, pl, slots, n_slots, out,
                                              &err) == RTOMO_OK,
                  "reconstruct_plane: %s", err.message);
    return out;
}

/* A new image of the full slice of detector row `row`. */
static float *slice_image(rtomo_fbp *plan, int row)
{
    const int n = rtomo_fbp_geometry_of(plan)->slice_size;
    float *out = malloc(sizeof(float) * (size_t)n * n);
    ck_assert_ptr_nonnull(out);
    test_reconstruct(plan, &row, 1, out);
    return out;
}

/* A random unit vector, and one at right angles to `u`. */
static void random_unit(uint64_t *rng, double out[3])
{
    double n = 0.0;
    for (int k = 0; k < 3; k++) {
        out[k] = test_rand_real(rng, -1.0, 1.0);
        n += out[k] * out[k];
    }
    ck_assert(n > 1e-3);
    for (int k = 0; k < 3; k++)
        out[k] /= sqrt(n);
}

static void random_normal_to(uint64_t *rng, const double u[3], double out[3])
{
    double w[3], d = 0.0, n = 0.0;
    random_unit(rng, w);
    for (int k = 0; k < 3; k++)
        d += w[k] * u[k];
    for (int k = 0; k < 3; k++) {
        out[k] = w[k] - d * u[k];
        n += out[k] * out[k];
    }
    ck_assert(n > 1e-3);
    for (int k = 0; k < 3; k++)
        out[k] /= sqrt(n);
}

/* ---------------------------------------------------------- checking ---- */

/* Spoil a good plane the k-th way; returns the words the error must hold,
 * or NULL past the last way. */
static const char *spoil(rtomo_fbp_plane *p, int k)
{
    const double tilt = 2e-3;       /* radians off the right angle */
    switch (k) {
    case 0: p->width = 0; return "plane width 0 is outside [1, 16384]";
    case 1: p->height = -3; return "plane height -3 is outside";
    case 2: p->width = RTOMO_FBP_PLANE_MAX_EDGE + 1; return "plane width 16385";
    case 3: p->height = RTOMO_FBP_PLANE_MAX_EDGE + 1; return "plane height 16385";
    case 4: p->centre[1] = NAN; return "plane centre[1] is not a finite number";
    case 5: p->centre[2] = INFINITY; return "plane centre[2] is not a finite";
    case 6: p->u[2] = -INFINITY; return "plane u[2] is not a finite number";
    case 7: p->v[0] = NAN; return "plane v[0] is not a finite number";
    case 8: memset(p->u, 0, sizeof p->u); return "plane u is the zero vector";
    case 9: memset(p->v, 0, sizeof p->v); return "plane v is the zero vector";
    case 10: /* parallel */
        memcpy(p->v, p->u, sizeof p->v);
        p->v[0] *= 3.0;
        return "plane u and v are not at right angles";
    case 11: /* antiparallel */
        for (int a = 0; a < 3; a++)
            p->v[a] = -p->u[a];
        return "are 180.0000 degrees apart";
    case 12: /* u = x, v tilted 2e-3 rad towards x */
        p->v[0] = sin(tilt);
        p->v[1] = cos(tilt);
        return "not at right angles: they are 89.8854 degrees apart";
    default: return NULL;
    }
}

START_TEST(validate_refuses_bad_planes)
{
    const rtomo_fbp_plane good = make_plane(1, 2, 3, X_AXIS, Y_AXIS, 8, 8);
    rtomo_fbp_geometry g = test_fbp_geometry(16, 2, 4);
    rtomo_fbp *plan = test_create_cpu(&g, 1);
    float frame[2 * 16] = {0}, out[64];
    rtomo_error err;
    ck_assert(rtomo_fbp_add_projection(plan, 0, frame, RTOMO_DTYPE_F32, NAN,
                                       NAN, &err) == RTOMO_OK);
    for (int k = 0;; k++) {
        rtomo_fbp_plane bad = good;
        const char *want = spoil(&bad, k);
        if (!want)
            break;
        rtomo_fbp_plane untouched = good;
        ck_assert_int_eq(rtomo_fbp_plane_validate(&bad, &untouched, &err),
                         RTOMO_E_INVALID);
        ck_assert_msg(strstr(err.message, want), "case %d: \"%s\" lacks "
                      "\"%s\"", k, err.message, want);
        ck_assert(memcmp(&untouched, &good, sizeof good) == 0);
        /* reconstruct_plane checks the same way */
        rtomo_clear_error(&err);
        ck_assert_int_eq(rtomo_fbp_reconstruct_plane(plan, &bad, NULL, 0,
                                                     out, &err),
                         RTOMO_E_INVALID);
        ck_assert_msg(strstr(err.message, want), "case %d: \"%s\"", k,
                      err.message);
    }
    ck_assert_int_eq(rtomo_fbp_plane_validate(NULL, NULL, &err),
                     RTOMO_E_INVALID);
    rtomo_fbp_destroy(plan);
}
END_TEST

START_TEST(validate_normalises)
{
    rtomo_error err;
    rtomo_fbp_plane out;
    /* u along (3, 4, 0); v, 7 long, turned 0.9e-3 rad from the right
     * angle towards u: within the tolerance */
    const double t = 0.9e-3;
    const double u[3] = {3, 4, 0};
    const double v[3] = {7 * (-0.8 * cos(t) + 0.6 * sin(t)),
                         7 * (0.6 * cos(t) + 0.8 * sin(t)), 0};
    rtomo_fbp_plane p = make_plane(1, 2, 3, u, v, 1, RTOMO_FBP_PLANE_MAX_EDGE);
    ck_assert_msg(rtomo_fbp_plane_validate(&p, &out, &err) == RTOMO_OK, "%s",
                  err.message);
    ck_assert_double_eq_tol(out.u[0], 0.6, 1e-15);
    ck_assert_double_eq_tol(out.u[1], 0.8, 1e-15);
    ck_assert_double_eq_tol(out.v[0], v[0] / 7, 1e-15);
    ck_assert_double_eq_tol(out.v[1], v[1] / 7, 1e-15);
    /* 1.1e-3 rad is not */
    p.v[0] = -0.8 * cos(1.1e-3) + 0.6 * sin(1.1e-3);
    p.v[1] = 0.6 * cos(1.1e-3) + 0.8 * sin(1.1e-3);
    ck_assert_int_eq(rtomo_fbp_plane_validate(&p, &out, &err),
                     RTOMO_E_INVALID);
    ck_assert_msg(strstr(err.message, "89.9370 degrees apart"), "%s",
                  err.message);
    ck_assert(out.width == 1 && out.height == RTOMO_FBP_PLANE_MAX_EDGE);
    ck_assert(out.centre[0] == 1 && out.centre[1] == 2 && out.centre[2] == 3);
    /* tiny (subnormal) and huge vectors neither vanish nor overflow */
    const double tiny[3] = {0, 3e-320, 0}, huge[3] = {1e308, 0, 1e308};
    p = make_plane(0, 0, 0, tiny, huge, 2, 2);
    ck_assert_msg(rtomo_fbp_plane_validate(&p, &out, &err) == RTOMO_OK, "%s",
                  err.message);
    ck_assert_double_eq_tol(out.u[1], 1.0, 1e-15);
    ck_assert_double_eq_tol(out.v[0], sqrt(0.5), 1e-15);
    ck_assert_double_eq_tol(out.v[2], sqrt(0.5), 1e-15);
    /* out may be left out */
    ck_assert(rtomo_fbp_plane_validate(&p, NULL, &err) == RTOMO_OK);
}
END_TEST

START_TEST(reconstruct_plane_refuses_bad_requests)
{
    rtomo_fbp_geometry g = test_fbp_geometry(16, 2, 4);
    rtomo_fbp *plan = test_create_cpu(&g, 1);
    const rtomo_fbp_plane p = make_plane(1, 2, 0, X_AXIS, Y_AXIS, 8, 8);
    float out[64];
    rtomo_error err;
    const int bad_low[2] = {1, -1}, bad_high[2] = {0, 4};
    ck_assert_int_eq(rtomo_fbp_reconstruct_plane(plan, &p, bad_low, 2, out,
                                                 &err), RTOMO_E_RANGE);
    ck_assert_msg(strstr(err.message, "slots[1] = -1 is outside"), "%s",
                  err.message);
    ck_assert_int_eq(rtomo_fbp_reconstruct_plane(plan, &p, bad_high, 2, out,
                                                 &err), RTOMO_E_RANGE);
    ck_assert_msg(strstr(err.message, "slots[1] = 4 is outside the plan's "
                         "projection slots [0, 4)"), "%s", err.message);
    ck_assert_int_eq(rtomo_fbp_reconstruct_plane(plan, &p, bad_low, -1, out,
                                                 &err), RTOMO_E_INVALID);
    ck_assert_msg(strstr(err.message, "n_slots -1"), "%s", err.message);
    ck_assert_int_eq(rtomo_fbp_reconstruct_plane(plan, &p, NULL, 0, NULL,
                                                 &err), RTOMO_E_INVALID);
    ck_assert_int_eq(rtomo_fbp_reconstruct_plane(plan, NULL, NULL, 0, out,
                                                 &err), RTOMO_E_INVALID);
    rtomo_fbp_destroy(plan);
}
END_TEST

/* -------------------------------------------------- planes and slices ---- */

/* Horizontal planes through the grid points of each kept row are its
 * slice, also transposed (u = y, v = x). */
static void check_horizontal(rtomo_interp interp, uint64_t seed)
{
    uint64_t rng = seed;
    fixture f;
    fixture_make(&f, &rng, 6, 1, 4, interp, 3);
    const double c = 0.5 * (SLICE - 1);
    const size_t n = (size_t)SLICE * SLICE;
    float *transposed = malloc(sizeof(float) * n);
    double worst = 0.0, worst_t = 0.0;
    for (int row = 1; row <= 4; row++) {
        float *slice = slice_image(f.plan, row);
        rtomo_fbp_plane p = make_plane(c, c, row, X_AXIS, Y_AXIS, SLICE, SLICE);
        float *plane = plane_image(f.plan, &p, NULL, 0);
        worst = fmax(worst, test_rel_l2(plane, slice, n));
        free(plane);
        p = make_plane(c, c, row, Y_AXIS, X_AXIS, SLICE, SLICE);
        plane = plane_image(f.plan, &p, NULL, 0);
        for (int y = 0; y < SLICE; y++)
            for (int x = 0; x < SLICE; x++)
                transposed[x * SLICE + y] = plane[y * SLICE + x];
        worst_t = fmax(worst_t, test_rel_l2(transposed, slice, n));
        free(plane);
        free(slice);
    }
    printf("  %s: horizontal planes vs slices %.2e, transposed %.2e\n",
           rtomo_interp_name(interp), worst, worst_t);
    /* measured 0 and 0: the plane computes the bin position with the
     * back-projector's own arithmetic */
    ck_assert_msg(worst < 1e-6, "plane differs from slice by %.2e", worst);
    ck_assert_msg(worst_t < 1e-6, "transposed plane differs by %.2e", worst_t);
    free(transposed);
    fixture_free(&f);
}

START_TEST(horizontal_plane_is_slice_linear)
{
    check_horizontal(RTOMO_INTERP_LINEAR, test_seed(0x91a0e01, 0));
}
END_TEST

START_TEST(horizontal_plane_is_slice_nearest)
{
    check_horizontal(RTOMO_INTERP_NEAREST, test_seed(0x91a0e02, 0));
}
END_TEST

/* A vertical plane (u = x, v = z) at y = k is row k of every slice it
 * crosses; it reaches two rows beyond the kept rows on either side, and
 * those are 0. */
START_TEST(vertical_plane_is_rows_of_slices)
{
    uint64_t rng = test_seed(0x91a0e03, 0);
    fixture f;
    fixture_make(&f, &rng, 8, 2, 5, RTOMO_INTERP_LINEAR, 2);
    const int first = 2, count = 5, height = count + 4;
    const double c = 0.5 * (SLICE - 1);
    float *slices[5];
    for (int r = 0; r < count; r++)
        slices[r] = slice_image(f.plan, first + r);
    const int ks[3] = {0, 17, SLICE - 1};
    float want[SLICE * 5], got[SLICE * 5];
    for (int t = 0; t < 3; t++) {
        const int k = ks[t];
        /* pixel row j at z = first - 2 + j */
        rtomo_fbp_plane p = make_plane(c, k, first - 2 + 0.5 * (height - 1),
                                       X_AXIS, Z_AXIS, SLICE, height);
        float *plane = plane_image(f.plan, &p, NULL, 0);
        for (int j = 0; j < height; j++) {
            const int kept = j - 2;
            for (int i = 0; i < SLICE; i++) {
                const float v = plane[j * SLICE + i];
                if (kept < 0 || kept >= count)
                    ck_assert_msg(v == 0.0f, "z = %d (not kept) gives %g",
                                  first - 2 + j, v);
                else {
                    got[kept * SLICE + i] = v;
                    want[kept * SLICE + i] = slices[kept][k * SLICE + i];
                }
            }
        }
        double e = test_rel_l2(got, want, (size_t)SLICE * count);
        printf("  vertical plane at y = %d vs slice rows: %.2e\n", k, e);
        /* measured 0 */
        ck_assert_msg(e < 1e-6, "y = %d: differs by %.2e", k, e);
        free(plane);
    }
    for (int r = 0; r < count; r++)
        free(slices[r]);
    fixture_free(&f);
}
END_TEST

/* A plane at z = r + f is (1 - f) slice r + f slice r+1, where a row
 * that is not kept counts as 0. */
START_TEST(fractional_height_interpolates)
{
    uint64_t rng = test_seed(0x91a0e04, 0);
    fixture f;
    fixture_make(&f, &rng, 6, 1, 4, RTOMO_INTERP_LINEAR, 2);
    const double c = 0.5 * (SLICE - 1);
    const size_t n = (size_t)SLICE * SLICE;
    float *slices[7] = {NULL};     /* by detector row; NULL = not kept */
    for (int r = 1; r <= 4; r++)
        slices[r] = slice_image(f.plan, r);
    float *want = malloc(sizeof(float) * n);
    /* from below the first kept row to above the last */
    for (int r = 0; r <= 5; r++) {
        for (int trial = 0; trial < 2; trial++) {
            const double fz = trial == 0 ? test_rand_real(&rng, 0.01, 0.99)
                                         : 0.0;
            for (size_t i = 0; i < n; i++) {
                double v = 0.0;
                if (slices[r])
                    v += (1.0 - fz) * slices[r][i];
                if (fz > 0 && slices[r + 1])
                    v += fz * slices[r + 1][i];
                want[i] = (float)v;
            }
            rtomo_fbp_plane p = make_plane(c, c, r + fz, X_AXIS, Y_AXIS,
                                           SLICE, SLICE);
            float *plane = plane_image(f.plan, &p, NULL, 0);
            double e = test_rel_l2(plane, want, n);
            printf("  z = %.3f: %.2e\n", r + fz, e);
            /* measured up to 6.4e-8 (60 seeds): the weights and their
             * sum round in float */
            ck_assert_msg(e < 1e-6, "z = %.3f differs by %.2e", r + fz, e);
            if (!slices[r] && !(fz > 0 && slices[r + 1]))
                ck_assert(test_max_abs(plane, n) == 0.0);
            free(plane);
        }
    }
    free(want);
    for (int r = 0; r < 6; r++)
        free(slices[r]);
    fixture_free(&f);
}
END_TEST

/* ------------------------------------------------- the definition ---- */

static double bin_value(const float *q, long j)
{
    return j >= 0 && j < DET_W ? q[j] : 0.0;
}

/* S(row) at (x, y) over the listed slots, in double; *slack gets what
 * nearest may legitimately differ by where s + 0.5 is within `tie` of a
 * whole number (either neighbour is right), *scale sum_p max|q_p|. */
static double sum_by_definition(const fixture *f, int kept, double x,
                                double y, const int *slots, int n,
                                double tie, double *slack, double *scale)
{
    const double c = 0.5 * (SLICE - 1);
    double sum = 0.0;
    for (int i = 0; i < n; i++) {
        const int p = slots[i];
        const float *q = f->sino + ((size_t)kept * N_PROJ + p) * DET_W;
        const double a = f->angles[p];
        const double s = f->g.axis + f->shifts[p] + (x - c) * cos(a) -
                         (y - c) * sin(a);
        double m = 0.0;
        for (int b = 0; b < DET_W; b++)
            m = fmax(m, fabs(q[b]));
        *scale += m;
        if (f->g.interp == RTOMO_INTERP_LINEAR) {
            const double b = floor(s), fr = s - b;
            sum += (1 - fr) * bin_value(q, (long)b) +
                   fr * bin_value(q, (long)b + 1);
        } else {
            const double b = floor(s + 0.5), fr = s + 0.5 - b;
            sum += bin_value(q, (long)b);
            if (fr < tie || fr > 1 - tie)
                *slack += fabs(bin_value(q, (long)b) -
                               bin_value(q, (long)(fr < tie ? b - 1 : b + 1)));
        }
    }
    return sum;
}

/* Worst |plane - definition| (less the slack) over the plane, relative
 * to sum_p max|q_p|. */
static double compare_with_definition(const fixture *f,
                                      const rtomo_fbp_plane *pl,
                                      const int *slots, int n,
                                      const float *image, int *kept_pixels)
{
    const rtomo_fbp_geometry *g = &f->g;
    double worst = 0.0;
    *kept_pixels = 0;
    for (int j = 0; j < pl->height; j++)
        for (int i = 0; i < pl->width; i++) {
            const double di = i - 0.5 * (pl->width - 1);
            const double dj = j - 0.5 * (pl->height - 1);
            double P[3];
            for (int a = 0; a < 3; a++)
                P[a] = pl->centre[a] + di * pl->u[a] + dj * pl->v[a];
            const double z0 = floor(P[2]), fz = P[2] - z0;
            double want = 0.0, slack = 0.0, scale = 0.0;
            for (int r = 0; r < 2; r++) {
                const double w = r ? fz : 1.0 - fz;
                const int kept = (int)z0 + r - g->row_first;
                if (w == 0.0 || kept < 0 || kept >= g->row_count)
                    continue;
                double sl = 0.0;
                want += w * sum_by_definition(f, kept, P[0], P[1], slots, n,
                                              1e-4, &sl, &scale);
                slack += w * sl;
            }
            const double got = image[(size_t)j * pl->width + i];
            if (scale == 0.0) {
                ck_assert_msg(got == 0.0, "pixel (%d, %d) at z = %.3f, off "
                              "the kept rows, is %g", i, j, P[2], got);
                continue;
            }
            (*kept_pixels)++;
            worst = fmax(worst, fmax(0.0, fabs(got - want) - slack) / scale);
        }
    return worst;
}

/* Random oblique planes through a plan of 20 kept rows (of 24), from a
 * random subset of the slots in random order, against the definition. */
static void check_oblique(rtomo_interp interp, uint64_t seed)
{
    uint64_t rng = seed;
    fixture f;
    fixture_make(&f, &rng, MAX_ROWS, 2, 20, interp, 3);
    const double c = 0.5 * (SLICE - 1);
    double worst = 0.0;
    int pixels = 0;
    for (int trial = 0; trial < 4; trial++) {
        double u[3], v[3];
        random_unit(&rng, u);
        random_normal_to(&rng, u, v);
        int slots[N_PROJ], n = 0;
        for (int p = 0; p < N_PROJ; p++)
            if (test_rand_real(&rng, 0, 1) < 0.7)
                slots[n++] = p;
        for (int i = n - 1; i > 0; i--) {
            int k = test_rand_int(&rng, 0, i), t = slots[i];
            slots[i] = slots[k];
            slots[k] = t;
        }
        rtomo_fbp_plane p = make_plane(c + test_rand_real(&rng, -6, 6),
                                       c + test_rand_real(&rng, -6, 6),
                                       test_rand_real(&rng, 9, 15), u, v, 37,
                                       29);
        float *image = plane_image(f.plan, &p, slots, n);
        int kept;
        worst = fmax(worst, compare_with_definition(&f, &p, slots, n, image,
                                                    &kept));
        pixels += kept;
        free(image);
    }
    printf("  %s: oblique planes vs definition %.2e of sum_p max|q_p| "
           "(%d pixels on kept rows)\n", rtomo_interp_name(interp), worst,
           pixels);
    ck_assert(pixels > 1000);
    /* Float32 bin positions and sums of about 20 terms, as for slices
     * (test_fbp_backproject.c bounds those by 2e-6).  Measured over 60
     * seeds: linear up to 5.2e-7, nearest up to 5.3e-8.  A misplaced half
     * bin or row gives O(1). */
    ck_assert_msg(worst < 2e-6, "oblique plane off by %.2e", worst);
    fixture_free(&f);
}

START_TEST(oblique_plane_matches_definition_linear)
{
    check_oblique(RTOMO_INTERP_LINEAR, test_seed(0x91a0e05, 0));
}
END_TEST

START_TEST(oblique_plane_matches_definition_nearest)
{
    check_oblique(RTOMO_INTERP_NEAREST, test_seed(0x91a0e06, 0));
}
END_TEST

/* The reference must not depend on how work is split over threads. */
START_TEST(threads_do_not_change_planes)
{
    const uint64_t seed = test_seed(0x91a0e07, 0);
    float *image[3];
    const int threads[3] = {1, 2, 5};
    rtomo_fbp_plane p;
    for (int t = 0; t < 3; t++) {
        uint64_t rng = seed;
        fixture f;
        fixture_make(&f, &rng, MAX_ROWS, 0, MAX_ROWS, RTOMO_INTERP_LINEAR,
                     threads[t]);
        double u[3], v[3];
        random_unit(&rng, u);
        random_normal_to(&rng, u, v);
        p = make_plane(21.5, 20, 12, u, v, 150, 41);
        image[t] = plane_image(f.plan, &p, NULL, 0);
        fixture_free(&f);
    }
    const size_t bytes = sizeof(float) * (size_t)p.width * p.height;
    ck_assert(memcmp(image[0], image[1], bytes) == 0);
    ck_assert(memcmp(image[0], image[2], bytes) == 0);
    for (int t = 0; t < 3; t++)
        free(image[t]);
}
END_TEST

/* ------------------------------------------------------------ phantom ---- */

/* The truth at any point: the ellipsoids of sim_phantom.c (Kak & Slaney,
 * Toft's contrasts), copied here so that planes off the grid can be
 * checked (rtomo_sim.h gives slices on the grid only; the test
 * phantom_truth_matches_library ties this copy to it). */
typedef struct ellipsoid {
    double x0, y0, z0, a, b, c, phi_deg, density;
} ellipsoid;

static const ellipsoid shepp_logan[] = {
    {0.00, 0.000, 0.000, 0.6900, 0.920, 0.900, 0, 1.0},
    {0.00, 0.000, 0.000, 0.6624, 0.874, 0.880, 0, -0.8},
    {-0.22, 0.000, -0.250, 0.4100, 0.160, 0.210, 108, -0.2},
    {0.22, 0.000, -0.250, 0.3100, 0.110, 0.220, 72, -0.2},
    {0.00, 0.350, -0.250, 0.2100, 0.250, 0.500, 0, 0.1},
    {0.00, 0.100, -0.250, 0.0460, 0.046, 0.046, 0, 0.1},
    {-0.08, -0.650, -0.250, 0.0460, 0.023, 0.020, 0, 0.1},
    {0.06, -0.650, -0.250, 0.0460, 0.023, 0.020, 90, 0.1},
    {0.06, -0.105, 0.625, 0.0560, 0.040, 0.100, 90, 0.1},
    {0.00, 0.100, 0.625, 0.0560, 0.056, 0.100, 0, 0.1},
};
#define N_ELLIPSOIDS ((int)(sizeof shepp_logan / sizeof shepp_logan[0]))

#define PH_W 128            /* detector bins = slice grid */
#define PH_H 128            /* detector rows */
#define PH_MARGIN 2.0       /* pixels kept clear of the head's edge */

/* Phantom coordinates of volume point (x, y, z) (rtomo_sim.h): a unit is
 * PH_W/2 pixels in x and y and PH_H/2 rows in z; Y and Z point against
 * the slice row and the detector row. */
static int inside_ellipsoid(int e, const double P[3])
{
    const ellipsoid *el = &shepp_logan[e];
    const double c = 0.5 * (PH_W - 1);
    const double X = (P[0] - c) / (0.5 * PH_W) - el->x0;
    const double Y = -(P[1] - c) / (0.5 * PH_W) - el->y0;
    const double Z = (0.5 * (PH_H - 1) - P[2]) / (0.5 * PH_H) - el->z0;
    const double phi = el->phi_deg * M_PI / 180.0;
    const double a = (X * cos(phi) + Y * sin(phi)) / el->a;
    const double b = (-X * sin(phi) + Y * cos(phi)) / el->b;
    const double h = Z / el->c;
    return a * a + b * b + h * h <= 1.0;
}

/* Attenuation per pixel at P (mu = 2/PH_W per phantom unit). */
static double phantom_at(const double P[3])
{
    double sum = 0.0;
    for (int e = 0; e < N_ELLIPSOIDS; e++)
        if (inside_ellipsoid(e, P))
            sum += shepp_logan[e].density;
    return sum * 2.0 / PH_W;
}

/* P lies inside ellipsoid e with `margin` pixels to spare: tested at P
 * and at the 26 points of the cube of half-edge margin around it. */
static int well_inside(int e, const double P[3], double margin)
{
    for (int dx = -1; dx <= 1; dx++)
        for (int dy = -1; dy <= 1; dy++)
            for (int dz = -1; dz <= 1; dz++) {
                const double Q[3] = {P[0] + dx * margin, P[1] + dy * margin,
                                     P[2] + dz * margin};
                if (!inside_ellipsoid(e, Q))
                    return 0;
            }
    return 1;
}

/* The phantom of PH_H rows, all kept, scanned over 180 degrees. */
static rtomo_fbp *phantom_plan(void)
{
    rtomo_fbp_geometry g = test_fbp_geometry(PH_W, PH_H, PH_W);
    g.angle_step = M_PI / g.n_proj;
    g.angle_start = 0.37 * g.angle_step;
    rtomo_fbp *plan = test_create_cpu(&g, 0);
    const rtomo_fbp_geometry *pg = rtomo_fbp_geometry_of(plan);
    rtomo_phantom ph;
    rtomo_phantom_init(&ph, PH_W, PH_H);
    float *frame = malloc(sizeof(float) * PH_W * PH_H);
    rtomo_error err;
    for (int p = 0; p < pg->n_proj; p++) {
        rtomo_phantom_project(&ph, pg->angles[p], frame);
        ck_assert_msg(rtomo_fbp_add_projection(plan, p, frame,
                                               RTOMO_DTYPE_F32, NAN, NAN,
                                               &err) == RTOMO_OK,
                      "%s", err.message);
    }
    free(frame);
    return plan;
}

/* This file's copy of the phantom is the library's: on the grid of a
 * few rows they agree but where a pixel centre lies on an edge. */
START_TEST(phantom_truth_matches_library)
{
    rtomo_phantom ph;
    rtomo_phantom_init(&ph, PH_W, PH_H);
    float *slice = malloc(sizeof(float) * PH_W * PH_W);
    const int rows[4] = {20, 64, 79, 100};
    for (int t = 0; t < 4; t++) {
        rtomo_phantom_slice(&ph, rows[t], PH_W, slice);
        int differ = 0;
        for (int y = 0; y < PH_W; y++)
            for (int x = 0; x < PH_W; x++) {
                const double P[3] = {x, y, rows[t]};
                differ += fabs(phantom_at(P) - slice[y * PH_W + x]) > 1e-6;
            }
        printf("  row %d: %d pixels differ from the library's truth\n",
               rows[t], differ);
        /* measured 0 */
        ck_assert_msg(differ <= 10, "row %d: %d pixels differ", rows[t],
                      differ);
    }
    free(slice);
}
END_TEST

/* A plane through the reconstructed phantom against the truth: the
 * relative L2 error inside the head (PH_MARGIN clear of its edge) and the
 * error of the brain's mean, with the bounds test_fbp_recon.c sets for
 * slices (0.14 and 0.005).  Planes measure well below them (about 0.04):
 * those slices cut the phantom where its small features crowd, these
 * planes cross mostly the large flat regions. */
static void check_phantom_plane(rtomo_fbp *plan, const rtomo_fbp_plane *pl,
                                const char *name)
{
    float *image = plane_image(plan, pl, NULL, 0);
    double diff2 = 0.0, truth2 = 0.0, brain_sum = 0.0, brain_truth = 0.0;
    int head = 0, brain = 0;
    for (int j = 0; j < pl->height; j++)
        for (int i = 0; i < pl->width; i++) {
            const double di = i - 0.5 * (pl->width - 1);
            const double dj = j - 0.5 * (pl->height - 1);
            double P[3];
            for (int a = 0; a < 3; a++)
                P[a] = pl->centre[a] + di * pl->u[a] + dj * pl->v[a];
            const double got = image[(size_t)j * pl->width + i];
            const double want = phantom_at(P);
            if (well_inside(0, P, PH_MARGIN)) {
                diff2 += (got - want) * (got - want);
                truth2 += want * want;
                head++;
            }
            if (well_inside(1, P, PH_MARGIN)) {
                brain_sum += got;
                brain_truth += want;
                brain++;
            }
        }
    ck_assert(head > 2000 && brain > 1000);
    const double l2 = sqrt(diff2 / truth2);
    const double mean = fabs(brain_sum - brain_truth) / brain_truth;
    printf("  %s: head L2 %.4f (%d pixels), brain mean %.5f\n", name, l2,
           head, mean);
    ck_assert_msg(l2 < 0.14, "%s: head error %.4f", name, l2);
    ck_assert_msg(mean < 0.005, "%s: brain mean off by %.5f", name, mean);
    free(image);
}

START_TEST(phantom_planes_are_accurate)
{
    rtomo_fbp *plan = phantom_plan();
    const double c = 0.5 * (PH_W - 1), zc = 0.5 * (PH_H - 1);
    /* vertical, turned 30 degrees about z: off the grid in x and y */
    const double u1[3] = {cos(M_PI / 6), sin(M_PI / 6), 0};
    rtomo_fbp_plane p = make_plane(c + 3.3, c - 1.7, zc, u1, Z_AXIS, 128, 120);
    /* measured: head L2 0.0476, brain mean 0.00005 */
    check_phantom_plane(plan, &p, "vertical, turned 30 deg");
    /* oblique: turned 30 degrees about z and tilted 35 degrees, crossing
     * the rows at fractional heights */
    const double t = 35 * M_PI / 180;
    const double v2[3] = {-sin(M_PI / 6) * cos(t), cos(M_PI / 6) * cos(t),
                          sin(t)};
    p = make_plane(c, c + 2.0, zc - 10.4, u1, v2, 128, 128);
    /* measured: head L2 0.0355, brain mean 0.00009 */
    check_phantom_plane(plan, &p, "oblique");
    rtomo_fbp_destroy(plan);
}
END_TEST

/* -------------------------------------------------------------- slots ---- */

/* A plane from slots S of a plan fed every projection equals the plane of
 * a plan fed only S; an empty list, or a plan never fed, gives zeros. */
START_TEST(slot_subset_equals_plan_fed_only_those)
{
    uint64_t rng = test_seed(0x91a0e08, 0);
    rtomo_fbp_geometry g = test_fbp_geometry(DET_W, 8, N_PROJ);
    g.angle_step = 2 * M_PI / N_PROJ;
    g.row_first = 1;
    g.row_count = 6;
    rtomo_fbp *all = test_create_cpu(&g, 2), *only = test_create_cpu(&g, 3);
    const rtomo_fbp_plane p = make_plane(20.0, 18.5, 3.7,
                                         (const double[3]){0.6, 0.8, 0.0},
                                         (const double[3]){0.0, 0.0, 1.0},
                                         48, 9);
    const size_t n = (size_t)p.width * p.height;
    float *zero = plane_image(only, &p, NULL, 0);
    ck_assert_msg(test_max_abs(zero, n) == 0.0, "a plan never fed gives "
                  "%g", test_max_abs(zero, n));
    float frame[8 * DET_W];
    int slots[N_PROJ], n_slots = 0;
    rtomo_error err;
    for (int q = 0; q < N_PROJ; q++) {
        test_fill_uniform(&rng, frame, 8 * DET_W, 0.0, 1.0);
        ck_assert(rtomo_fbp_add_projection(all, q, frame, RTOMO_DTYPE_F32,
                                           NAN, NAN, &err) == RTOMO_OK);
        if (test_rand_real(&rng, 0, 1) < 0.4) {
            slots[n_slots++] = q;
            ck_assert(rtomo_fbp_add_projection(only, q, frame,
                                               RTOMO_DTYPE_F32, NAN, NAN,
                                               &err) == RTOMO_OK);
        }
    }
    ck_assert(n_slots > 2);
    rtomo_fbp_stats before, after;
    rtomo_fbp_get_stats(all, &before);
    float *subset = plane_image(all, &p, slots, n_slots);
    rtomo_fbp_get_stats(all, &after);
    ck_assert_double_eq(after.updates - before.updates, (double)n * n_slots);
    ck_assert(after.backproject_seconds > before.backproject_seconds);
    float *fed = plane_image(only, &p, NULL, 0);
    double e = test_rel_l2(subset, fed, n);
    /* shuffled: the same terms summed in another order */
    for (int i = 0; i < n_slots / 2; i++) {
        int t = slots[i];
        slots[i] = slots[n_slots - 1 - i];
        slots[n_slots - 1 - i] = t;
    }
    float *reversed = plane_image(all, &p, slots, n_slots);
    double e_rev = test_rel_l2(reversed, fed, n);
    printf("  %d of %d slots vs a plan fed only those: %.2e, reversed "
           "%.2e\n", n_slots, N_PROJ, e, e_rev);
    /* measured 0 (unfed slots add exact zeros) and up to 1.3e-7 (60
     * seeds) */
    ck_assert_msg(test_max_abs(fed, n) > 0.0, "the plane is empty");
    ck_assert_msg(e < 1e-6, "subset plane differs by %.2e", e);
    ck_assert_msg(e_rev < 1e-5, "reversed list differs by %.2e", e_rev);
    free(subset);
    free(reversed);
    subset = plane_image(all, &p, slots, 0);
    ck_assert(test_max_abs(subset, n) == 0.0);
    free(subset);
    free(fed);
    free(zero);
    rtomo_fbp_destroy(all);
    rtomo_fbp_destroy(only);
}
END_TEST

int main(void)
{
    test_base_seed();
    Suite *s = suite_create("fbp_plane");
    TCase *tc = tcase_create("checks");
    tcase_add_test(tc, validate_refuses_bad_planes);
    tcase_add_test(tc, validate_normalises);
    tcase_add_test(tc, reconstruct_plane_refuses_bad_requests);
    suite_add_tcase(s, tc);
    tc = tcase_create("definition");
    tcase_add_test(tc, horizontal_plane_is_slice_linear);
    tcase_add_test(tc, horizontal_plane_is_slice_nearest);
    tcase_add_test(tc, vertical_plane_is_rows_of_slices);
    tcase_add_test(tc, fractional_height_interpolates);
    tcase_add_test(tc, oblique_plane_matches_definition_linear);
    tcase_add_test(tc, oblique_plane_matches_definition_nearest);
    tcase_add_test(tc, threads_do_not_change_planes);
    suite_add_tcase(s, tc);
    tc = tcase_create("phantom");
    tcase_add_test(tc, phantom_truth_matches_library);
    tcase_add_test(tc, phantom_planes_are_accurate);
    tcase_add_test(tc, slot_subset_equals_plan_fed_only_those);
    suite_add_tcase(s, tc);
    return rtomo_check_run(s);
}
