/*
 * test_cuda_fbp_plane.c — planes of any orientation on the CUDA backend
 * against the CPU reference (cpu_fbp_plane.c): fresh random filtered
 * sinograms and the Shepp-Logan phantom, linear and nearest, on one slot
 * and on a GPU split into several by RTOMO_CUDA_FBP_SPLIT (so that rows
 * are summed on several slots and added by the host); horizontal,
 * fractional, vertical and oblique planes, planes reaching beyond the kept
 * rows, slot lists with repeats in any order, planes done in many bands
 * (small bands through the test hook RTOMO_CUDA_FBP_PLANE_BAND, and a
 * 4096^2 plane in the default ones), frames still staged on the host when
 * the plane is asked for, and the timing of that large plane.
 *
 * Bounds (relative L2 against the CPU).  Both compute the bin position in
 * float32 but in different ways (the CPU as its slice back-projector, the
 * GPU from per-plane constants), so positions differ by a few ulps:
 *   - linear: the value moves by ulps x |q[i+1] - q[i]|; emulated on the
 *     host with the GPU's arithmetic, 4.4e-6 on white noise and 1.3e-6 on
 *     the phantom (plus cuFFT against FFTW there); measured on an H100 up
 *     to 4.4e-6 and 3.8e-6.  Bound 1e-4, the ALU back-projector's
 *     (test_cuda_fbp_bp.c), which also interpolates in float.
 *   - nearest: where s + 0.5 is within those ulps of a whole number the
 *     two pick neighbouring bins, a whole |q[i+1] - q[i]| apart.  On data
 *     smoothed over 16 bins (test_smooth_lines) emulated up to 1.1e-3,
 *     measured up to 7.6e-4: bound 5e-3.  The phantom's filtered
 *     projections jump at every edge: emulated up to 2.0e-3, measured up
 *     to 1.3e-4: bound 1e-2.  A bin or row out of place gives errors of
 *     order 1.
 * Layouts: one GPU as 2 and 3 slots, and bands of a few rows, must give
 * the one-slot plane exactly (compared by value): each slot's sums run
 * over the same list, and the final products and sum are rounded alike on
 * one slot or two.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda_fbp_debug.h"
#include "rtomo_sim.h"
#include "test_cuda_fbp_common.h"

#define LINEAR_BOUND 1e-4
#define NEAREST_BOUND 5e-3
#define PHANTOM_NEAREST_BOUND 1e-2

#define DET_W 64
#define ROW_FIRST 2
#define ROWS 40             /* kept rows: 10 groups of 4 */
#define N_PROJ 300          /* more than the 256 constants a block stages */
#define SLICE 70
#define MAX_SPLIT 3
/* Pixels per band under the test hook: a few rows of these planes. */
#define SMALL_BAND "3000"

/* ------------------------------------------------------------ helpers ---- */

typedef struct scan {
    rtomo_fbp_geometry g;
    double angles[N_PROJ], shifts[N_PROJ];
    float *sino;            /* ROWS x N_PROJ x DET_W */
} scan;

/* Irregular angles, per-projection shifts, an off-centre axis, a grid
 * larger than the detector; random sinograms (smoothed for nearest). */
static void make_scan(scan *s, uint64_t *rng, rtomo_interp interp)
{
    s->g = test_fbp_geometry(DET_W, ROW_FIRST + ROWS + 2, N_PROJ);
    for (int p = 0; p < N_PROJ; p++) {
        s->angles[p] = test_rand_real(rng, 0.0, 2 * M_PI);
        s->shifts[p] = test_rand_real(rng, -2.0, 2.0);
    }
    s->g.angles = s->angles;
    s->g.axis_shift = s->shifts;
    s->g.axis = 0.5 * (DET_W - 1) + test_rand_real(rng, -3.0, 3.0);
    s->g.row_first = ROW_FIRST;
    s->g.row_count = ROWS;
    s->g.slice_size = SLICE;
    s->g.interp = interp;
    const size_t n = (size_t)ROWS * N_PROJ * DET_W;
    s->sino = malloc(sizeof(float) * n);
    ck_assert_ptr_nonnull(s->sino);
    test_fill_uniform(rng, s->sino, n, -1.0, 1.0);
    if (interp == RTOMO_INTERP_NEAREST)
        test_smooth_lines(s->sino, (size_t)ROWS * N_PROJ, DET_W, 16);
}

/* A GPU plan with `split` slots on device 0 (checked with the backend's
 * test hook). */
static rtomo_fbp *gpu_plan(const rtomo_fbp_geometry *g, int split)
{
    rtomo_engine_options opt;
    test_gpu_options(&opt, RTOMO_BP_ALU, 1, RTOMO_PRECISION_FLOAT);
    opt.n_devices = 1;
    opt.device_ids[0] = 0;
    rtomo_fbp *plan = test_create_split(g, &opt, split);
    rtomo_cuda_fbp_debug_slot slots[8];
    ck_assert_int_eq(rtomo_cuda_fbp_debug_slots(plan, slots, 8), split);
    return plan;
}

/* A new, poisoned image of the plane; fails the test on an engine error. */
static float *plane_image(rtomo_fbp *plan, const rtomo_fbp_plane *pl,
                          const int *slots, int n_slots)
{
    const size_t n = (size_t)pl->width * pl->height;
    float *out = malloc(sizeof(float) * n);
    ck_assert_ptr_nonnull(out);
    test_poison(out, n);
    rtomo_error err;
    ck_assert_msg(rtomo_fbp_reconstruct_plane(plan, pl, slots, n_slots, out,
                                              &err) == RTOMO_OK,
                  "reconstruct_plane: %s", err.message);
    return out;
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

/* A random orthonormal pair. */
static void random_frame(uint64_t *rng, double u[3], double v[3])
{
    double w[3], n = 0.0, d = 0.0;
    for (int k = 0; k < 3; k++) {
        u[k] = test_rand_real(rng, -1.0, 1.0);
        w[k] = test_rand_real(rng, -1.0, 1.0);
        n += u[k] * u[k];
    }
    for (int k = 0; k < 3; k++) {
        u[k] /= sqrt(n);
        d += w[k] * u[k];
    }
    n = 0.0;
    for (int k = 0; k < 3; k++) {
        v[k] = w[k] - d * u[k];
        n += v[k] * v[k];
    }
    for (int k = 0; k < 3; k++)
        v[k] /= sqrt(n);
}

static double now_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Pixels where a and b differ in value (-0 equals +0). */
static size_t count_different(const float *a, const float *b, size_t n)
{
    size_t d = 0;
    for (size_t i = 0; i < n; i++)
        d += !(a[i] == b[i]);
    return d;
}

/* ------------------------------------------------------- random data ---- */

/* The planes every layout reconstructs: a slot list of n_slots entries
 * (NULL: all). */
#define N_CASES 7
typedef struct plane_case {
    const char *name;
    rtomo_fbp_plane plane;
    int slots[2 * N_PROJ];
    int n_slots, all;
} plane_case;

static void make_cases(uint64_t *rng, plane_case *c)
{
    const double cx = 0.5 * (SLICE - 1);
    double u[3], v[3];
    c[0] = (plane_case){"horizontal, kept row 19", make_plane(cx, cx, 19, X_AXIS, Y_AXIS, SLICE, SLICE), {0}, 0, 1};
    c[1] = (plane_case){"horizontal, z = 23.4", make_plane(cx, cx, 23.4, X_AXIS, Y_AXIS, SLICE, SLICE), {0}, 0, 1};
    /* z from -1 to 45: beyond the kept rows 2..41 either side */
    c[2] = (plane_case){"vertical, all rows", make_plane(cx, 30, 22, X_AXIS, Z_AXIS, SLICE, 47), {0}, 0, 1};
    for (int k = 3; k < 6; k++) {
        random_frame(rng, u, v);
        c[k] = (plane_case){"oblique, slot list", make_plane(cx + test_rand_real(rng, -8, 8), cx + test_rand_real(rng, -8, 8), test_rand_real(rng, 12, 32), u, v, 97, 61), {0}, 0, 0};
        /* a random list: repeats, any order; long enough that nearest's
         * rare neighbour picks (see the bounds) average out */
        c[k].n_slots = test_rand_int(rng, N_PROJ / 4, 2 * N_PROJ);
        for (int i = 0; i < c[k].n_slots; i++)
            c[k].slots[i] = test_rand_int(rng, 0, N_PROJ - 1);
    }
    /* Steep: its rows cross all kept rows, a few in each small band, so
     * that bands are summed by one, two or three slots. */
    const double tilt = 0.35;
    const double across[3] = {0.6, 0.8, 0};
    const double down[3] = {-0.8 * sqrt(1 - tilt * tilt), 0.6 * sqrt(1 - tilt * tilt), tilt};
    c[6] = (plane_case){"steep, 150 x 120", make_plane(cx, cx, 22, across, down, 150, 120), {0}, 0, 1};
}

/* The layouts compared with one slot in the default bands. */
static const struct {
    int split, small_bands;
    const char *name;
} layouts[] = {
    {2, 0, "2 slots"},
    {3, 0, "3 slots"},
    {1, 1, "1 slot, small bands"},
    {3, 1, "3 slots, small bands"},
};
#define N_LAYOUTS ((int)(sizeof layouts / sizeof layouts[0]))

/* The plane on `plan` in bands of SMALL_BAND pixels. */
static float *small_band_image(rtomo_fbp *plan, const rtomo_fbp_plane *pl,
                               const int *slots, int n_slots)
{
    setenv("RTOMO_CUDA_FBP_PLANE_BAND", SMALL_BAND, 1);
    float *out = plane_image(plan, pl, slots, n_slots);
    unsetenv("RTOMO_CUDA_FBP_PLANE_BAND");
    return out;
}

/*
 * Loop index: interpolation.  Every case on the CPU and on the GPU as 1, 2
 * and 3 slots: the GPU within the bound of the CPU, the layouts exactly
 * alike, and so the small bands on 1 and 3 slots.
 */
/* Loop index: interpolation; from 2 on with the circular field of view,
 * where the GPU's plane must be 0 exactly where the CPU's is (the points
 * beyond R from the axis, tested in double alike). */
START_TEST(random_planes_match_cpu)
{
    const int circle = _i >= 2;
    const rtomo_interp interp = (rtomo_interp)(_i % 2);
    const double bound = interp == RTOMO_INTERP_LINEAR ? LINEAR_BOUND : NEAREST_BOUND;
    uint64_t rng = test_seed(0xc0da91a0, _i);
    scan s;
    make_scan(&s, &rng, interp);
    s.g.field_of_view = circle ? RTOMO_FOV_CIRCLE : RTOMO_FOV_FULL;
    size_t zeros = 0;
    rtomo_fbp *cpu = test_create_cpu(&s.g, 0);
    rtomo_fbp *gpu[MAX_SPLIT];
    rtomo_error err;
    ck_assert(rtomo_fbp_set_filtered(cpu, ROW_FIRST, ROWS, s.sino, &err) == RTOMO_OK);
    for (int k = 0; k < MAX_SPLIT; k++) {
        gpu[k] = gpu_plan(&s.g, k + 1);
        ck_assert_msg(rtomo_fbp_set_filtered(gpu[k], ROW_FIRST, ROWS, s.sino, &err) == RTOMO_OK,
                      "%s", err.message);
    }
    plane_case *cases = malloc(sizeof(plane_case) * N_CASES);
    make_cases(&rng, cases);
    for (int c = 0; c < N_CASES; c++) {
        const plane_case *pc = &cases[c];
        const int *slots = pc->all ? NULL : pc->slots;
        const size_t n = (size_t)pc->plane.width * pc->plane.height;
        float *want = plane_image(cpu, &pc->plane, slots, pc->n_slots);
        float *got = plane_image(gpu[0], &pc->plane, slots, pc->n_slots);
        const double e = test_rel_l2(got, want, n);
        size_t differ[N_LAYOUTS];
        char line[256] = "";
        for (int k = 0; k < N_LAYOUTS; k++) {
            rtomo_fbp *plan = gpu[layouts[k].split - 1];
            float *other = layouts[k].small_bands
                               ? small_band_image(plan, &pc->plane, slots, pc->n_slots)
                               : plane_image(plan, &pc->plane, slots, pc->n_slots);
            differ[k] = count_different(other, got, n);
            snprintf(line + strlen(line), sizeof line - strlen(line), "%s%zu (%s)",
                     k ? ", " : "", differ[k], layouts[k].name);
            free(other);
        }
        printf("  %s, %s (%d slots listed): %.2e; pixels unlike 1 slot: %s\n",
               rtomo_interp_name(interp), pc->name, pc->all ? N_PROJ : pc->n_slots,
               e, line);
        ck_assert_msg(test_max_abs(want, n) > 0.0, "%s: the CPU plane is empty", pc->name);
        ck_assert_msg(e < bound, "%s: GPU differs from CPU by %.2e", pc->name, e);
        for (size_t i = 0; i < n; i++) {
            ck_assert_msg((want[i] == 0.0f) == (got[i] == 0.0f), "%s%s: "
                          "pixel %zu is %g on the GPU, %g on the CPU",
                          pc->name, circle ? " (circle)" : "", i, got[i],
                          want[i]);
            zeros += want[i] == 0.0f;
        }
        for (int k = 0; k < N_LAYOUTS; k++)
            ck_assert_msg(differ[k] == 0, "%s: %s differ from one slot in %zu "
                          "pixels", pc->name, layouts[k].name, differ[k]);
        free(want);
        free(got);
    }
    free(cases);
    printf("  %s%s: %zu pixels 0 on both\n", rtomo_interp_name(interp),
           circle ? ", circle" : "", zeros);
    ck_assert_msg(!circle || zeros > 0, "no plane point outside the circle");
    for (int k = 0; k < MAX_SPLIT; k++)
        rtomo_fbp_destroy(gpu[k]);
    rtomo_fbp_destroy(cpu);
    free(s.sino);
}
END_TEST

/* ------------------------------------------------------------ phantom ---- */

#define PH_W 128
#define PH_H 64

/*
 * Loop index: interpolation.  The phantom's frames fed to a CPU plan and
 * to a GPU plan of 2 slots, the planes asked for at once after the last
 * frame (so that frames still staged on the host must be filtered first):
 * vertical turned about z, oblique, and every third slot.
 */
START_TEST(phantom_planes_match_cpu)
{
    const rtomo_interp interp = (rtomo_interp)_i;
    const double bound = interp == RTOMO_INTERP_LINEAR ? LINEAR_BOUND : PHANTOM_NEAREST_BOUND;
    rtomo_fbp_geometry g = test_fbp_geometry(PH_W, PH_H, PH_W);
    g.angle_step = M_PI / PH_W;
    g.angle_start = 0.41 * g.angle_step;
    g.interp = interp;
    rtomo_fbp *cpu = test_create_cpu(&g, 0), *gpu = gpu_plan(&g, 2);
    rtomo_phantom ph;
    rtomo_phantom_init(&ph, PH_W, PH_H);
    float *frame = malloc(sizeof(float) * PH_W * PH_H);
    const rtomo_fbp_geometry *pg = rtomo_fbp_geometry_of(cpu);
    rtomo_error err;
    for (int p = 0; p < PH_W; p++) {
        rtomo_phantom_project(&ph, pg->angles[p], frame);
        ck_assert(rtomo_fbp_add_projection(cpu, p, frame, RTOMO_DTYPE_F32, NAN, NAN, &err) == RTOMO_OK);
        ck_assert_msg(rtomo_fbp_add_projection(gpu, p, frame, RTOMO_DTYPE_F32, NAN, NAN, &err) == RTOMO_OK,
                      "%s", err.message);
    }
    free(frame);
    const double c = 0.5 * (PH_W - 1), zc = 0.5 * (PH_H - 1), t = 35 * M_PI / 180;
    const double u[3] = {cos(M_PI / 6), sin(M_PI / 6), 0};
    const double v[3] = {-sin(M_PI / 6) * cos(t), cos(M_PI / 6) * cos(t), sin(t)};
    const rtomo_fbp_plane planes[3] = {
        make_plane(c + 3.3, c - 1.7, zc, u, Z_AXIS, 128, 70),
        make_plane(c, c + 2.0, zc - 3.4, u, v, 128, 100),
        make_plane(c, c, zc + 0.5, X_AXIS, Y_AXIS, 128, 128),
    };
    const char *names[3] = {"vertical, turned 30 deg", "oblique", "horizontal, every third slot"};
    int thirds[PH_W / 3 + 1], n_thirds = 0;
    for (int p = 0; p < PH_W; p += 3)
        thirds[n_thirds++] = p;
    for (int k = 0; k < 3; k++) {
        const int *slots = k == 2 ? thirds : NULL;
        const int n_slots = k == 2 ? n_thirds : 0;
        const size_t n = (size_t)planes[k].width * planes[k].height;
        float *want = plane_image(cpu, &planes[k], slots, n_slots);
        float *got = plane_image(gpu, &planes[k], slots, n_slots);
        const double e = test_rel_l2(got, want, n);
        printf("  phantom, %s, %s: %.2e\n", rtomo_interp_name(interp), names[k], e);
        ck_assert_msg(e < bound, "%s: GPU differs from CPU by %.2e", names[k], e);
        free(want);
        free(got);
    }
    rtomo_fbp_destroy(cpu);
    rtomo_fbp_destroy(gpu);
}
END_TEST

/* -------------------------------------------------------------- edges ---- */

/* Zeros from a plan never fed and from a plane off the kept rows; single
 * pixels, and single rows and columns up to the size limit; the
 * statistics. */
START_TEST(edge_cases)
{
    uint64_t rng = test_seed(0xc0da91a1, 0);
    scan s;
    make_scan(&s, &rng, RTOMO_INTERP_LINEAR);
    rtomo_fbp *cpu = test_create_cpu(&s.g, 0), *gpu = gpu_plan(&s.g, 3);
    const double cx = 0.5 * (SLICE - 1);
    const rtomo_fbp_plane flat = make_plane(cx, cx, 20, X_AXIS, Y_AXIS, SLICE, SLICE);
    float *image = plane_image(gpu, &flat, NULL, 0);
    ck_assert_msg(test_max_abs(image, (size_t)SLICE * SLICE) == 0.0, "a plan never fed gives %g",
                  test_max_abs(image, (size_t)SLICE * SLICE));
    free(image);
    rtomo_error err;
    ck_assert(rtomo_fbp_set_filtered(cpu, ROW_FIRST, ROWS, s.sino, &err) == RTOMO_OK);
    ck_assert(rtomo_fbp_set_filtered(gpu, ROW_FIRST, ROWS, s.sino, &err) == RTOMO_OK);
    /* entirely below the kept rows: no slot runs */
    const rtomo_fbp_plane below = make_plane(cx, cx, ROW_FIRST - 1, X_AXIS, Y_AXIS, SLICE, SLICE);
    image = plane_image(gpu, &below, NULL, 0);
    ck_assert(test_max_abs(image, (size_t)SLICE * SLICE) == 0.0);
    free(image);
    const rtomo_fbp_plane shapes[4] = {
        make_plane(cx + 0.3, cx - 0.2, 17.5, X_AXIS, Y_AXIS, 1, 1),
        make_plane(cx, cx, 10.75, Z_AXIS, Y_AXIS, 1, 300),
        make_plane(cx, cx, 30.25, X_AXIS, Z_AXIS, RTOMO_FBP_PLANE_MAX_EDGE, 1),
        make_plane(cx, cx, 30.25, Z_AXIS, X_AXIS, 1, RTOMO_FBP_PLANE_MAX_EDGE),
    };
    rtomo_fbp_stats before, after;
    for (int k = 0; k < 4; k++) {
        const size_t n = (size_t)shapes[k].width * shapes[k].height;
        float *want = plane_image(cpu, &shapes[k], NULL, 0);
        rtomo_fbp_get_stats(gpu, &before);
        float *got = plane_image(gpu, &shapes[k], NULL, 0);
        rtomo_fbp_get_stats(gpu, &after);
        /* Error relative to sum_p max|q_p| (<= N_PROJ): one pixel's own
         * value may be near 0.  Along the rows of 16384 pixels, those far
         * off the grid (8000 pixels) have float positions good to
         * ulp(8192) = 1e-3 bins only, in both: their error is measured
         * apart, against a bound 10x looser.  Measured on an H100: up to
         * 2.2e-7 near, 7.9e-8 far. */
        double near = 0.0, far = 0.0;
        for (size_t i = 0; i < n; i++) {
            const double off = fabs((double)i - 0.5 * ((double)n - 1));
            const double d = fabs((double)got[i] - want[i]) / N_PROJ;
            ck_assert_msg(isfinite(got[i]), "pixel %zu is %g", i, got[i]);
            if (off <= SLICE)
                near = fmax(near, d);
            else
                far = fmax(far, d);
        }
        printf("  %d x %d plane: %.2e of sum_p max|q_p| near the grid, "
               "%.2e far from it\n", shapes[k].width, shapes[k].height, near, far);
        ck_assert_msg(near < 1e-5, "%d x %d: differs by %.2e", shapes[k].width,
                      shapes[k].height, near);
        ck_assert_msg(far < 1e-4, "%d x %d: far pixels differ by %.2e",
                      shapes[k].width, shapes[k].height, far);
        ck_assert(after.updates - before.updates == (double)n * N_PROJ);
        ck_assert(after.backproject_seconds > before.backproject_seconds);
        free(want);
        free(got);
    }
    rtomo_fbp_destroy(cpu);
    rtomo_fbp_destroy(gpu);
    free(s.sino);
}
END_TEST

/* ------------------------------------------------------------- timing ---- */

#define BIG_DET 2048
#define BIG_ROWS 8
#define BIG_PROJ 2048
#define BIG_EDGE 4096       /* four default bands */
#define CROP 48

/* A 4096 x 4096 plane from 2048 projections of a 2048-bin detector (the
 * size an operator asks for), in the default bands: its time is reported,
 * and crops of it in every band are checked against the CPU's plane of
 * the same pixels.  Those pixels lie up to 2900 pixels from the axis,
 * where both compute bin positions in float good to ulp(4096) = 5e-4
 * bins, 30 times coarser than near the axis: emulated on the host with
 * the GPU's arithmetic up to 1.9e-4, measured on an H100 up to 1.8e-4;
 * bound 1e-3.  (H100: 85 ms of kernels, 143 ms for the call, about 400 G
 * pixel-projections/s.) */
START_TEST(large_plane_timing)
{
    rtomo_fbp_geometry g = test_fbp_geometry(BIG_DET, BIG_ROWS, BIG_PROJ);
    rtomo_fbp *gpu = gpu_plan(&g, 1), *cpu = test_create_cpu(&g, 0);
    uint64_t rng = test_seed(0xc0da91a2, 0);
    const size_t n = (size_t)BIG_ROWS * BIG_PROJ * BIG_DET;
    float *sino = malloc(sizeof(float) * n);
    ck_assert_ptr_nonnull(sino);
    test_fill_uniform(&rng, sino, n, -1.0, 1.0);
    rtomo_error err;
    ck_assert(rtomo_fbp_set_filtered(gpu, 0, BIG_ROWS, sino, &err) == RTOMO_OK);
    ck_assert(rtomo_fbp_set_filtered(cpu, 0, BIG_ROWS, sino, &err) == RTOMO_OK);
    free(sino);
    /* tilted so that it crosses every row */
    const double tilt = 6.0 / BIG_EDGE;
    const double v[3] = {0, sqrt(1 - tilt * tilt), tilt};
    const rtomo_fbp_plane p = make_plane(1023.5, 1023.5, 3.5, X_AXIS, v, BIG_EDGE, BIG_EDGE);
    float *image = plane_image(gpu, &p, NULL, 0);  /* warm-up */
    free(image);
    rtomo_fbp_stats before, after;
    rtomo_fbp_get_stats(gpu, &before);
    const double t0 = now_seconds();
    image = plane_image(gpu, &p, NULL, 0);
    const double wall = now_seconds() - t0;
    rtomo_fbp_get_stats(gpu, &after);
    const double seconds = after.backproject_seconds - before.backproject_seconds;
    printf("  %d x %d plane, %d projections: %.1f ms of kernels (%.1f ms "
           "in the call), %.1f G pixel-projections/s\n", BIG_EDGE, BIG_EDGE,
           BIG_PROJ, 1e3 * seconds, 1e3 * wall,
           (double)BIG_EDGE * BIG_EDGE * BIG_PROJ / seconds * 1e-9);
    const size_t pixels = (size_t)BIG_EDGE * BIG_EDGE;
    for (size_t i = 0; i < pixels; i++)
        ck_assert_msg(isfinite(image[i]), "pixel %zu is %g", i, image[i]);
    /* crops: a corner, the centre, the far corner, the middle of the last
     * band */
    const int at[4][2] = {{0, 0}, {2024, 2024}, {4048, 4048}, {1000, 3500}};
    float want[CROP * CROP], got[CROP * CROP];
    for (int k = 0; k < 4; k++) {
        const double di = at[k][0] + 0.5 * (CROP - 1) - 0.5 * (BIG_EDGE - 1);
        const double dj = at[k][1] + 0.5 * (CROP - 1) - 0.5 * (BIG_EDGE - 1);
        rtomo_fbp_plane crop = p;
        crop.width = crop.height = CROP;
        for (int a = 0; a < 3; a++)
            crop.centre[a] = p.centre[a] + di * p.u[a] + dj * p.v[a];
        ck_assert(rtomo_fbp_reconstruct_plane(cpu, &crop, NULL, 0, want, &err) == RTOMO_OK);
        for (int j = 0; j < CROP; j++)
            memcpy(got + j * CROP, image + (size_t)(at[k][1] + j) * BIG_EDGE + at[k][0],
                   sizeof(float) * CROP);
        const double e = test_rel_l2(got, want, CROP * CROP);
        printf("  crop at (%d, %d): %.2e\n", at[k][0], at[k][1], e);
        ck_assert_msg(e < 1e-3, "crop at (%d, %d) differs by %.2e", at[k][0], at[k][1], e);
    }
    free(image);
    rtomo_fbp_destroy(gpu);
    rtomo_fbp_destroy(cpu);
}
END_TEST

int main(void)
{
    test_base_seed();
    Suite *s = suite_create("cuda_fbp_plane");
    TCase *tc = tcase_create("plane");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, random_planes_match_cpu, 0, 4);
    tcase_add_loop_test(tc, phantom_planes_match_cpu, 0, 2);
    tcase_add_test(tc, edge_cases);
    tcase_add_test(tc, large_plane_timing);
    suite_add_tcase(s, tc);
    return test_run_gpu_suite(s);
}
