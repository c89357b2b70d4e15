/*
 * test_cuda_fbp_common.c — helpers shared by the CUDA FBP tests (see the
 * header).
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_run.h"
#include "test_cuda_fbp_common.h"

int test_run_gpu_suite(Suite *s)
{
    if (rtomo_cuda_device_count() < 1) {
        printf("no CUDA device: GPU tests skipped\n");
        (void)s;        /* Check has no public way to free an unrun suite */
        return TEST_SKIP;
    }
    /* The CUDA context lives in this process: no fork per test. */
    return rtomo_check_run_in_process(s);
}

void test_smooth_lines(float *a, size_t lines, int width, int box)
{
    float *tmp = malloc(sizeof(float) * (size_t)width);
    ck_assert_ptr_nonnull(tmp);
    for (size_t l = 0; l < lines; l++) {
        float *line = a + l * (size_t)width;
        for (int i = 0; i < width; i++) {
            double s = 0.0;
            for (int j = 0; j < box; j++)
                s += line[(i + j) % width];
            tmp[i] = (float)(s / box);
        }
        memcpy(line, tmp, sizeof(float) * (size_t)width);
    }
    free(tmp);
}

void test_gpu_options(rtomo_engine_options *opt, rtomo_bp_kernel kernel,
                      int slices, rtomo_precision precision)
{
    rtomo_engine_options_init(opt);
    opt->backend = RTOMO_BACKEND_CUDA;
    opt->bp_kernel = kernel;
    opt->slices_per_pass = slices;
    opt->precision = precision;
    /* A fixed ratio keeps the autotuner out of tests that are about
     * correctness; it is tested on its own. */
    opt->hybrid_ratio = kernel == RTOMO_BP_HYBRID ? 0.5 : 0.0;
}

const char *test_mode_name(rtomo_bp_kernel kernel, int slices,
                           rtomo_precision precision, rtomo_interp interp)
{
    static char name[96];
    snprintf(name, sizeof name, "%s/%d/%s/%s", rtomo_bp_kernel_name(kernel),
             slices, precision == RTOMO_PRECISION_HALF ? "half" : "float",
             rtomo_interp_name(interp));
    return name;
}

double test_cpu_bound(rtomo_bp_kernel kernel, rtomo_precision precision,
                      rtomo_interp interp)
{
    double b = interp == RTOMO_INTERP_LINEAR
                   ? (kernel == RTOMO_BP_ALU ? 1e-4 : 5e-3)
                   : 2e-3;
    if (precision == RTOMO_PRECISION_HALF)
        b += 2e-3;
    return b;
}

void test_mode(int i, rtomo_bp_kernel *kernel, int *slices,
               rtomo_precision *precision, rtomo_interp *interp)
{
    static const int slice_choices[] = {1, 2, 4};
    *interp = (rtomo_interp)(i % 2);
    *precision = (rtomo_precision)((i / 2) % 2);
    *slices = slice_choices[(i / 4) % 3];
    *kernel = (rtomo_bp_kernel)(RTOMO_BP_STANDARD + i / 12);
}

rtomo_fbp *test_create_split(const rtomo_fbp_geometry *g,
                             const rtomo_engine_options *opt, int split)
{
    char value[8];
    snprintf(value, sizeof value, "%d", split);
    setenv("RTOMO_CUDA_FBP_SPLIT", value, 1);
    rtomo_fbp *plan = test_create(g, opt);
    unsetenv("RTOMO_CUDA_FBP_SPLIT");
    return plan;
}

/* The circular field of view (rtomo_engine.h): every pixel of the n
 * images (ROI of g) outside the circle whose radius is computed here,
 * independently of the engine, from the axis and shifts is exactly 0; returns how many pixels lie outside
 * in one image. */
long test_zeros_outside_fov(const rtomo_fbp_geometry *g, const float *out,
                          int n, const char *name)
{
    double r = INFINITY;
    for (int p = 0; p < g->n_proj; p++) {
        const double s = g->axis + (g->axis_shift ? g->axis_shift[p] : 0.0);
        r = fmin(r, fmin(s, (g->det_width - 1) - s));
    }
    const double c = 0.5 * (g->slice_size - 1);
    long outside = 0;
    for (int k = 0; k < n; k++)
        for (int j = 0; j < g->roi_height; j++)
            for (int i = 0; i < g->roi_width; i++) {
                const double x = g->roi_x + i - c, y = g->roi_y + j - c;
                if (x * x + y * y <= r * r)
                    continue;
                const float v = out[((size_t)k * g->roi_height + j) *
                                    g->roi_width + i];
                ck_assert_msg(v == 0.0f, "%s: pixel (%d, %d) of image %d "
                              "outside the circle (R %.3f) is %g", name,
                              g->roi_x + i, g->roi_y + j, k, r, v);
                outside += k == 0;
            }
    return outside;
}
