/*
 * test_sbdx_support.c — helpers shared by the SBDX tests (see
 * test_sbdx_support.h).
 */
#include "config.h"

#include <check.h>
#include <math.h>
#include <stdlib.h>

#include "rtomo_sim.h"
#include "test_sbdx_support.h"

const double sbdx_small_ratios[6] = {0.6, 0.85, 1.0, 1.37, 1.8, 2.25};
const double sbdx_mid_ratios[8] = {0.55, 0.8, 1.0, 1.25, 1.6, 2.0, 2.5, 3.1};

void sbdx_small_geometry(rtomo_sbdx_geometry *g)
{
    rtomo_sbdx_geometry_init(g);
    g->holes_x = 12;
    g->holes_y = 10;
    g->det_width = 16;
    g->det_height = 8;
    g->shift_m = 4;
    g->n_planes = 6;
    g->ratios = sbdx_small_ratios;
}

void sbdx_mid_geometry(rtomo_sbdx_geometry *g)
{
    rtomo_sbdx_geometry_init(g);
    g->holes_x = 40;
    g->holes_y = 30;
    g->det_width = 48;
    g->det_height = 32;
    g->shift_m = 6;
    g->n_planes = 8;
    g->ratios = sbdx_mid_ratios;
}

const double sbdx_threshold_ratio[1] = {1.4};

void sbdx_threshold_geometry(rtomo_sbdx_geometry *g)
{
    rtomo_sbdx_geometry_init(g);
    g->holes_x = g->holes_y = 6;
    g->det_width = g->det_height = 12;
    g->shift_m = 3;
    g->n_planes = 1;
    g->ratios = sbdx_threshold_ratio;
    g->out_width = g->out_height = 38;
    g->origin_x = g->origin_y = -10;
}

size_t sbdx_frame_samples(const rtomo_sbdx_geometry *g)
{
    return (size_t)g->holes_x * g->holes_y * g->det_width * g->det_height;
}

size_t sbdx_planes_pixels(const rtomo_sbdx_geometry *g)
{
    int w = g->out_width ? g->out_width : g->shift_m * g->holes_x;
    int h = g->out_height ? g->out_height : g->shift_m * g->holes_y;
    return (size_t)w * h * g->n_planes;
}

void *sbdx_random_frame(const rtomo_sbdx_geometry *g, rtomo_dtype dtype,
                        uint64_t *seed)
{
    size_t n = sbdx_frame_samples(g);
    void *frame = malloc(n * rtomo_dtype_size(dtype));
    ck_assert_ptr_nonnull(frame);
    for (size_t i = 0; i < n; i++) {
        double u = rtomo_random_uniform(seed);
        switch (dtype) {
        case RTOMO_DTYPE_U8:
            ((uint8_t *)frame)[i] = (uint8_t)(u * 256.0);
            break;
        case RTOMO_DTYPE_U16:
            ((uint16_t *)frame)[i] = (uint16_t)(u * 65536.0);
            break;
        case RTOMO_DTYPE_F32:
            ((float *)frame)[i] = (float)(-100.0 + 1100.0 * u);
            break;
        }
    }
    return frame;
}

rtomo_sbdx *sbdx_create_cpu(const rtomo_sbdx_geometry *g,
                            rtomo_sbdx_method method, int threads)
{
    rtomo_engine_options opt = test_cpu_options(threads);
    opt.sbdx_method = method;
    rtomo_error err;
    rtomo_sbdx *plan = rtomo_sbdx_create(g, &opt, &err);
    ck_assert_msg(plan != NULL, "create failed: %s", err.message);
    return plan;
}

void sbdx_reconstruct_into(const rtomo_sbdx_geometry *g,
                           rtomo_sbdx_method method, int threads,
                           const void *frame, rtomo_dtype dtype,
                           const rtomo_sbdx_output *out)
{
    rtomo_sbdx *plan = sbdx_create_cpu(g, method, threads);
    rtomo_error err;
    rtomo_status st = rtomo_sbdx_reconstruct(plan, frame, dtype, out, &err);
    ck_assert_msg(st == RTOMO_OK, "reconstruct failed: %s", err.message);
    rtomo_sbdx_destroy(plan);
}

float *sbdx_reconstruct(const rtomo_sbdx_geometry *g, rtomo_sbdx_method method,
                        int threads, const void *frame, rtomo_dtype dtype)
{
    float *planes = malloc(sizeof(float) * sbdx_planes_pixels(g));
    ck_assert_ptr_nonnull(planes);
    rtomo_sbdx_output out = {.planes = planes};
    sbdx_reconstruct_into(g, method, threads, frame, dtype, &out);
    return planes;
}

double sbdx_max_relative_error(const float *a, const float *b,
                               const rtomo_sbdx_geometry *g)
{
    size_t plane = sbdx_planes_pixels(g) / (size_t)g->n_planes;
    double worst = 0.0;
    for (int k = 0; k < g->n_planes; k++) {
        double max_diff = 0.0, max_ref = 0.0;
        for (size_t i = plane * k; i < plane * (k + 1); i++) {
            max_diff = fmax(max_diff, fabs((double)a[i] - b[i]));
            max_ref = fmax(max_ref, fabs((double)b[i]));
        }
        if (max_diff > 0.0)
            worst = fmax(worst, max_ref > 0.0 ? max_diff / max_ref : INFINITY);
    }
    return worst;
}

/* The field of view as the contract states it: the product of the axis
 * responses, exact in double, reaches RTOMO_SBDX_FIELD_OF_VIEW_MIN. */
static int responses_in_view(float rx, float ry)
{
    return (double)rx * ry >= RTOMO_SBDX_FIELD_OF_VIEW_MIN;
}

int sbdx_in_field_of_view(const rtomo_sbdx_lut *lut, int k, int i, int j)
{
    return responses_in_view(lut->x[k].response[i], lut->y[k].response[j]);
}

static rtomo_sbdx_lut *lut_of(const rtomo_sbdx_geometry *g)
{
    rtomo_error err;
    rtomo_sbdx_lut *lut = rtomo_sbdx_lut_create(g, &err);
    ck_assert_msg(lut != NULL, "LUT: %s", err.message);
    return lut;
}

void sbdx_flat_field_reference(const rtomo_sbdx_geometry *g, double *raw,
                               const double *ones)
{
    rtomo_sbdx_lut *lut = lut_of(g);
    int w = lut->x[0].n_out, h = lut->y[0].n_out;
    size_t p = 0;
    for (int k = 0; k < g->n_planes; k++)
        for (int j = 0; j < h; j++)
            for (int i = 0; i < w; i++, p++)
                raw[p] = sbdx_in_field_of_view(lut, k, i, j) ? raw[p] / ones[p]
                                                             : 0.0;
    rtomo_sbdx_lut_destroy(lut);
}

size_t sbdx_require_flat_uniform(const rtomo_sbdx_geometry *g,
                                 const float *planes, double v,
                                 double rel_tol)
{
    rtomo_sbdx_lut *lut = lut_of(g);
    int w = lut->x[0].n_out, h = lut->y[0].n_out;
    size_t p = 0, inside = 0;
    for (int k = 0; k < g->n_planes; k++)
        for (int j = 0; j < h; j++)
            for (int i = 0; i < w; i++, p++) {
                if (!sbdx_in_field_of_view(lut, k, i, j)) {
                    SBDX_REQUIRE(planes[p] == 0.0f, "plane %d (%d, %d) is "
                                 "outside the field of view but %g", k, i, j,
                                 (double)planes[p]);
                    continue;
                }
                SBDX_REQUIRE(fabs(planes[p] - v) <= rel_tol * fabs(v),
                             "plane %d (%d, %d): uniform %g reconstructs to "
                             "%.9g", k, i, j, v, (double)planes[p]);
                inside++;
            }
    rtomo_sbdx_lut_destroy(lut);
    return inside;
}

double sbdx_rule_variance(const float *plane, const float *rx,
                          const float *ry, int width, int height,
                          int flat_field, int r, int i, int j)
{
    if (flat_field && !responses_in_view(rx[i], ry[j]))
        return NAN;
    double s1 = 0.0, s2 = 0.0, n = 0.0;
    for (int y = j - r; y <= j + r; y++)
        for (int x = i - r; x <= i + r; x++) {
            if (x < 0 || x >= width || y < 0 || y >= height)
                continue;
            double u = plane[(size_t)y * width + x];
            if (flat_field) {
                if (!responses_in_view(rx[x], ry[y]))
                    continue;
            } else {
                u /= fmax((double)rx[x] * ry[y], RTOMO_SBDX_RESPONSE_FLOOR);
            }
            s1 += u;
            s2 += u * u;
            n += 1.0;
        }
    return s2 / n - (s1 / n) * (s1 / n);
}
