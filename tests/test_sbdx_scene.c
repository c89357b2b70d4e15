/*
 * test_sbdx_scene.c — simulated scenes come out in focus on the CPU SBDX
 * backend: a point or a wire at the depth of plane k is located on plane k
 * where it was put and is sharper there than on every other plane, and the
 * composite's depth map picks plane k at the object, with raw and with
 * flat-fielded planes alike.  Also checks the simulator's own contract
 * (background, clamping, the ray model).
 */
#include "config.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rtomo_sim.h"
#include "test_sbdx_support.h"
#include "check_run.h"

#define BACKGROUND 200.0
#define ABSORPTION 150.0

/* Big enough for a field of view around the centre on every plane, small
 * enough to run in milliseconds. */
static const double scene_ratios[6] = {0.6, 0.85, 1.0, 1.37, 1.8, 2.25};

/* flat_field as given (0 raw, 1 flat-fielded planes). */
static void scene_geometry(rtomo_sbdx_geometry *g, int flat_field)
{
    rtomo_sbdx_geometry_init(g);
    g->flat_field = flat_field;
    g->holes_x = 20;
    g->holes_y = 16;
    g->det_width = 16;
    g->det_height = 12;
    g->shift_m = 4;
    g->n_planes = 6;
    g->ratios = scene_ratios;
}

typedef struct scene_result {
    float *object;      /* planes of the scene */
    float *background;  /* planes of the background alone */
    uint16_t *depth;    /* composite depth of the scene */
} scene_result;

static uint8_t *simulate(const rtomo_sbdx_geometry *g,
                         const rtomo_sbdx_object *objects, int n_objects)
{
    uint8_t *frame = malloc(sbdx_frame_samples(g));
    ck_assert_ptr_nonnull(frame);
    rtomo_error err;
    ck_assert_msg(rtomo_sbdx_simulate(g, objects, n_objects, BACKGROUND, frame,
                                      &err) == RTOMO_OK, "%s", err.message);
    return frame;
}

static scene_result reconstruct_scene(const rtomo_sbdx_geometry *g,
                                      const rtomo_sbdx_object *objects,
                                      int n_objects)
{
    uint8_t *scene = simulate(g, objects, n_objects);
    uint8_t *empty = simulate(g, NULL, 0);
    scene_result r;
    size_t img = sbdx_planes_pixels(g) / g->n_planes;
    r.object = malloc(sizeof(float) * sbdx_planes_pixels(g));
    r.depth = malloc(sizeof(uint16_t) * img);
    ck_assert(r.object && r.depth);
    rtomo_sbdx_output out = {.planes = r.object, .depth = r.depth};
    sbdx_reconstruct_into(g, RTOMO_SBDX_PIXEL_CENTRIC, 2, scene,
                          RTOMO_DTYPE_U8, &out);
    r.background = sbdx_reconstruct(g, RTOMO_SBDX_PIXEL_CENTRIC, 2, empty,
                                    RTOMO_DTYPE_U8);
    free(scene);
    free(empty);
    return r;
}

static void scene_free(scene_result *r)
{
    free(r->object);
    free(r->background);
    free(r->depth);
}

/* Contrast of the object on plane k at pixel p: the drop below the
 * background's own reconstruction. */
static double contrast(const scene_result *r, size_t img, int k, size_t p)
{
    return fabs((double)r->background[img * k + p] - r->object[img * k + p]);
}

/* The strongest contrast on plane k: its value and pixel. */
static double peak_contrast(const scene_result *r, size_t img, int k,
                            size_t *at)
{
    double best = -1.0;
    for (size_t p = 0; p < img; p++) {
        double c = contrast(r, img, k, p);
        if (c > best) {
            best = c;
            *at = p;
        }
    }
    return best;
}

/* A random position within 4 pixels of the plane centre, where every plane
 * has its field of view. */
static void random_centre(uint64_t *seed, int w, int h, double *x, double *y)
{
    *x = w / 2.0 - 4.0 + 8.0 * rtomo_random_uniform(seed);
    *y = h / 2.0 - 4.0 + 8.0 * rtomo_random_uniform(seed);
}

/* _i = 6 flat_field + plane. */
START_TEST(point_is_in_focus_on_its_plane)
{
    rtomo_sbdx_geometry g;
    scene_geometry(&g, _i / 6);
    int w = g.shift_m * g.holes_x, h = g.shift_m * g.holes_y;
    size_t img = (size_t)w * h;
    int ko = _i % 6;
    uint64_t seed = 0x9017u + (uint64_t)ko;
    rtomo_sbdx_object o = {.kind = RTOMO_SBDX_POINT,
                           .ratio = scene_ratios[ko],
                           .absorption = ABSORPTION};
    random_centre(&seed, w, h, &o.x0, &o.y0);
    scene_result r = reconstruct_scene(&g, &o, 1);

    size_t at = 0;
    double focus = peak_contrast(&r, img, ko, &at);
    printf("%s: point at (%.2f, %.2f) on plane %d (n = %g): peak %.1f at "
           "(%zu, %zu);", g.flat_field ? "flat-fielded" : "raw", o.x0, o.y0,
           ko, o.ratio, focus, at % w, at / w);
    ck_assert_double_le(fabs((double)(at % w) - o.x0), 1.0);
    ck_assert_double_le(fabs((double)(at / w) - o.y0), 1.0);
    for (int k = 0; k < g.n_planes; k++) {
        size_t other_at;
        double other = peak_contrast(&r, img, k, &other_at);
        if (k != ko) {
            printf(" %d: %.1f", k, other);
            ck_assert_msg(other < focus, "plane %d peaks at %.2f, the "
                          "point's own plane %d at %.2f", k, other, ko, focus);
        }
    }
    printf("\n");
    size_t centre = (size_t)lround(o.y0) * w + (size_t)lround(o.x0);
    ck_assert_int_eq(r.depth[centre], ko);
    scene_free(&r);
}
END_TEST

/* Mean contrast over the pixels whose centres lie within half a pixel of
 * the wire, and the fraction of them whose depth is `plane`. */
static double on_wire(const scene_result *r, int w, size_t img, int k,
                      const rtomo_sbdx_object *o, int plane,
                      double *depth_hits)
{
    double sum = 0.0;
    int n = 0, hits = 0;
    for (size_t p = 0; p < img; p++) {
        double x = (double)(p % w), y = (double)(p / w);
        double ux = o->x1 - o->x0, uy = o->y1 - o->y0;
        double s = ((x - o->x0) * ux + (y - o->y0) * uy) / (ux * ux + uy * uy);
        s = s < 0.0 ? 0.0 : s > 1.0 ? 1.0 : s;
        if (hypot(x - o->x0 - s * ux, y - o->y0 - s * uy) <= 0.5) {
            sum += contrast(r, img, k, p);
            hits += r->depth[p] == plane;
            n++;
        }
    }
    ck_assert_int_gt(n, 5);
    *depth_hits = (double)hits / n;
    return sum / n;
}

/* Nearly all of the wire's pixels get its plane as depth (all of them in
 * the seeded runs); the slack is for the ends, where the window also sees
 * the blurred tails of neighbouring planes. */
#define WIRE_DEPTH_FRACTION 0.9

/* _i = 6 flat_field + plane. */
START_TEST(wire_is_in_focus_on_its_plane)
{
    rtomo_sbdx_geometry g;
    scene_geometry(&g, _i / 6);
    int w = g.shift_m * g.holes_x, h = g.shift_m * g.holes_y;
    size_t img = (size_t)w * h;
    int ko = _i % 6;
    uint64_t seed = 0x3141u + (uint64_t)ko;
    double cx, cy, angle = M_PI * rtomo_random_uniform(&seed);
    random_centre(&seed, w, h, &cx, &cy);
    rtomo_sbdx_object o = {RTOMO_SBDX_WIRE, scene_ratios[ko],
                           cx - 8.0 * cos(angle), cy - 8.0 * sin(angle),
                           cx + 8.0 * cos(angle), cy + 8.0 * sin(angle),
                           ABSORPTION};
    scene_result r = reconstruct_scene(&g, &o, 1);

    size_t at = 0;
    peak_contrast(&r, img, ko, &at);
    double x = (double)(at % w), y = (double)(at / w);
    double ux = o.x1 - o.x0, uy = o.y1 - o.y0;
    double s = fmin(1.0, fmax(0.0, ((x - o.x0) * ux + (y - o.y0) * uy) /
                                       (ux * ux + uy * uy)));
    double dist = hypot(x - o.x0 - s * ux, y - o.y0 - s * uy);
    ck_assert_msg(dist <= 1.0, "plane %d peaks %.2f pixels from the wire",
                  ko, dist);

    double fraction, focus = on_wire(&r, w, img, ko, &o, ko, &fraction);
    printf("%s: wire on plane %d (n = %g): contrast along it %.1f, depth "
           "right on %.0f%% of it;", g.flat_field ? "flat-fielded" : "raw",
           ko, o.ratio, focus, 100.0 * fraction);
    for (int k = 0; k < g.n_planes; k++) {
        if (k == ko)
            continue;
        double unused, other = on_wire(&r, w, img, k, &o, ko, &unused);
        printf(" %d: %.1f", k, other);
        ck_assert_msg(other < focus, "plane %d has contrast %.2f along the "
                      "wire, its own plane %d %.2f", k, other, ko, focus);
    }
    printf("\n");
    ck_assert_double_ge(fraction, WIRE_DEPTH_FRACTION);
    scene_free(&r);
}
END_TEST

/* Two objects at different depths in one frame: the depth map tells them
 * apart. */
START_TEST(composite_separates_two_depths)
{
    rtomo_sbdx_geometry g;
    scene_geometry(&g, _i);
    int w = g.shift_m * g.holes_x;
    rtomo_sbdx_object objects[2] = {
        {RTOMO_SBDX_POINT, scene_ratios[1], 30.3, 30.6, 0, 0, ABSORPTION},
        {RTOMO_SBDX_POINT, scene_ratios[4], 49.7, 33.2, 0, 0, ABSORPTION},
    };
    scene_result r = reconstruct_scene(&g, objects, 2);
    ck_assert_int_eq(r.depth[31 * w + 30], 1);
    ck_assert_int_eq(r.depth[33 * w + 50], 4);
    scene_free(&r);
}
END_TEST

/* The simulator's contract on single samples: the ray of hole (cx, cy) and
 * element (dx, dy) crosses depth n at X = m cx + n (dx - (Wd-1)/2) (same
 * for Y), loses absorption * tent * tent there, and the result is rounded
 * and clamped to [0, 255]. */
START_TEST(simulator_follows_its_ray_model)
{
    rtomo_sbdx_geometry g;
    scene_geometry(&g, 1);
    uint64_t seed = 0x51u;
    size_t n = sbdx_frame_samples(&g);
    uint8_t *frame = malloc(n);
    ck_assert_ptr_nonnull(frame);
    rtomo_error err;

    ck_assert_int_eq(rtomo_sbdx_simulate(&g, NULL, 0, 199.6, frame, &err),
                     RTOMO_OK);
    for (size_t i = 0; i < n; i++)
        SBDX_REQUIRE(frame[i] == 200, "empty scene sample %zu = %u", i,
                     frame[i]);
    ck_assert_int_eq(rtomo_sbdx_simulate(&g, NULL, 0, 400.0, frame, &err),
                     RTOMO_OK);
    ck_assert_int_eq(frame[0], 255);

    /* A point exactly on one ray, another sample a fraction away. */
    int cx = 7, cy = 5, dx = 3, dy = 9;
    double ratio = 1.37;
    double x = g.shift_m * cx + ratio * (dx - (g.det_width - 1) / 2.0);
    double y = g.shift_m * cy + ratio * (dy - (g.det_height - 1) / 2.0);
    double fx = rtomo_random_uniform(&seed) * 0.3;
    rtomo_sbdx_object o = {RTOMO_SBDX_POINT, ratio, x + fx, y, 0, 0, 120.0};
    ck_assert_int_eq(rtomo_sbdx_simulate(&g, &o, 1, 200.0, frame, &err),
                     RTOMO_OK);
    size_t hole = ((size_t)cy * g.holes_x + cx) * g.det_width * g.det_height;
    size_t sample = hole + (size_t)dy * g.det_width + dx;
    ck_assert_int_eq(frame[sample], (int)lround(200.0 - 120.0 * (1.0 - fx)));
    /* The next element is 1.37 - fx > 1 pixels away: outside the tent. */
    ck_assert_int_eq(frame[sample + 1], 200);

    /* Absorbing more than the background clamps at 0. */
    o.x0 = x;
    o.absorption = 500.0;
    ck_assert_int_eq(rtomo_sbdx_simulate(&g, &o, 1, 200.0, frame, &err),
                     RTOMO_OK);
    ck_assert_int_eq(frame[sample], 0);

    /* A wire through the ray absorbs fully, wherever along it. */
    rtomo_sbdx_object wire = {RTOMO_SBDX_WIRE, ratio, x - 5.0, y - 2.0,
                              x + 10.0, y + 4.0, 100.0};
    ck_assert_int_eq(rtomo_sbdx_simulate(&g, &wire, 1, 200.0, frame, &err),
                     RTOMO_OK);
    ck_assert_int_eq(frame[sample], 100);
    free(frame);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("sbdx_scene");
    TCase *tc = tcase_create("scene");
    tcase_add_loop_test(tc, point_is_in_focus_on_its_plane, 0, 12);
    tcase_add_loop_test(tc, wire_is_in_focus_on_its_plane, 0, 12);
    tcase_add_loop_test(tc, composite_separates_two_depths, 0, 2);
    tcase_add_test(tc, simulator_follows_its_ray_model);
    suite_add_tcase(s, tc);
    return rtomo_check_run(s);
}
