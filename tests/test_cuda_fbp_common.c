/*
 * test_cuda_fbp_common.c — helpers shared by the CUDA FBP tests (see the
 * header).
 */
#include "config.h"

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
