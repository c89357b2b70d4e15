/*
 * test_engine_api.c — the backend-neutral parts of the engine API: names and
 * parsers that configuration files and the wire protocol rely on, option
 * defaults, error reporting, and backend selection when a backend is not
 * available; and the multi-device plans' shared pieces (engine_internal.h):
 * the even deal of slices to slabs and the split test hook.
 */
#include "config.h"

#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rtomo_engine.h"
#include "engine_internal.h"
#include "check_run.h"
#include "test_util.h"

START_TEST(names_round_trip)
{
    for (int w = RTOMO_WINDOW_RAMLAK; w <= RTOMO_WINDOW_HANN; w++) {
        rtomo_window back;
        ck_assert_int_eq(rtomo_window_parse(rtomo_window_name(w), &back), RTOMO_OK);
        ck_assert_int_eq(back, w);
    }
    for (int k = RTOMO_BP_AUTO; k <= RTOMO_BP_HYBRID; k++) {
        rtomo_bp_kernel back;
        ck_assert_int_eq(rtomo_bp_kernel_parse(rtomo_bp_kernel_name(k), &back), RTOMO_OK);
        ck_assert_int_eq(back, k);
    }
    for (int d = RTOMO_DTYPE_U8; d <= RTOMO_DTYPE_F32; d++) {
        rtomo_dtype back;
        ck_assert_int_eq(rtomo_dtype_parse(rtomo_dtype_name(d), &back), RTOMO_OK);
        ck_assert_int_eq(back, d);
    }
    for (int b = RTOMO_BACKEND_AUTO; b <= RTOMO_BACKEND_CUDA; b++) {
        rtomo_backend back;
        ck_assert_int_eq(rtomo_backend_parse(rtomo_backend_name(b), &back), RTOMO_OK);
        ck_assert_int_eq(back, b);
    }
    rtomo_interp i;
    ck_assert_int_eq(rtomo_interp_parse("NEAREST", &i), RTOMO_OK);
    ck_assert_int_eq(i, RTOMO_INTERP_NEAREST);
}
END_TEST

START_TEST(parsers_reject_unknown_names)
{
    rtomo_window w = RTOMO_WINDOW_HANN;
    ck_assert_int_eq(rtomo_window_parse("blackman", &w), RTOMO_E_INVALID);
    ck_assert_int_eq(w, RTOMO_WINDOW_HANN);     /* untouched on failure */
    rtomo_dtype d;
    ck_assert_int_eq(rtomo_dtype_parse("int16", &d), RTOMO_E_INVALID);
    ck_assert_int_eq(rtomo_dtype_parse(NULL, &d), RTOMO_E_INVALID);
    rtomo_backend b;
    ck_assert_int_eq(rtomo_backend_parse("opencl", &b), RTOMO_E_INVALID);
    ck_assert_str_eq(rtomo_window_name((rtomo_window)99), "unknown");
    ck_assert_int_eq(rtomo_window_parse("ramp", &w), RTOMO_OK);
    ck_assert_int_eq(w, RTOMO_WINDOW_RAMLAK);
}
END_TEST

START_TEST(dtype_sizes)
{
    ck_assert_uint_eq(rtomo_dtype_size(RTOMO_DTYPE_U8), 1);
    ck_assert_uint_eq(rtomo_dtype_size(RTOMO_DTYPE_U16), 2);
    ck_assert_uint_eq(rtomo_dtype_size(RTOMO_DTYPE_F32), 4);
    ck_assert_uint_eq(rtomo_dtype_size((rtomo_dtype)7), 0);
}
END_TEST

START_TEST(errors_are_formatted_and_null_safe)
{
    rtomo_error err;
    ck_assert_int_eq(rtomo_set_error(&err, RTOMO_E_RANGE, "row %d of %d", 7, 3),
                     RTOMO_E_RANGE);
    ck_assert_int_eq(err.code, RTOMO_E_RANGE);
    ck_assert_str_eq(err.message, "row 7 of 3");
    ck_assert_int_eq(rtomo_set_error(NULL, RTOMO_E_STATE, "ignored"), RTOMO_E_STATE);
    rtomo_clear_error(&err);
    ck_assert_int_eq(err.code, RTOMO_OK);
    ck_assert_str_eq(err.message, "");
    /* An over-long message is truncated, never overflows. */
    char big[1000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    rtomo_set_error(&err, RTOMO_E_INVALID, "%s", big);
    ck_assert_uint_eq(strlen(err.message), RTOMO_ERROR_MESSAGE_MAX - 1);
    ck_assert_str_eq(rtomo_status_name(RTOMO_E_NOMEM), "out-of-memory");
}
END_TEST

START_TEST(option_defaults)
{
    rtomo_engine_options opt;
    memset(&opt, 0x5a, sizeof opt);
    rtomo_engine_options_init(&opt);
    ck_assert_int_eq(opt.backend, RTOMO_BACKEND_AUTO);
    ck_assert_int_eq(opt.n_devices, 0);
    ck_assert_int_eq(opt.bp_kernel, RTOMO_BP_AUTO);
    ck_assert_int_eq(opt.slices_per_pass, 0);
    ck_assert(opt.hybrid_ratio == 0.0);
    ck_assert_int_eq(opt.sbdx_method, RTOMO_SBDX_PIXEL_CENTRIC);

    rtomo_fbp_geometry g;
    rtomo_fbp_geometry_init(&g);
    ck_assert(isnan(g.axis));
    ck_assert_int_eq(g.window, RTOMO_WINDOW_RAMLAK);
    ck_assert_int_eq(g.interp, RTOMO_INTERP_LINEAR);
    rtomo_sbdx_geometry s;
    rtomo_sbdx_geometry_init(&s);
    ck_assert_int_eq(s.composite_radius, 2);
}
END_TEST

START_TEST(cuda_request_without_gpu_is_refused_clearly)
{
    if (rtomo_cuda_device_count() > 0)
        return;     /* only meaningful where no GPU is present */
    rtomo_fbp_geometry g = test_fbp_geometry(32, 2, 16);
    rtomo_engine_options opt;
    rtomo_engine_options_init(&opt);
    opt.backend = RTOMO_BACKEND_CUDA;
    rtomo_error err;
    rtomo_fbp *plan = rtomo_fbp_create(&g, &opt, &err);
    ck_assert_ptr_null(plan);
    ck_assert_int_eq(err.code, RTOMO_E_UNAVAILABLE);
    ck_assert_ptr_nonnull(strstr(err.message, "CUDA"));
}
END_TEST

START_TEST(padded_length_is_power_of_two_at_least_twice_width)
{
    rtomo_fbp_geometry g;
    rtomo_fbp_geometry_init(&g);
    g.det_height = 1;
    g.n_proj = 4;
    const int widths[] = {2, 3, 255, 256, 257, 1000, 2048, 2049};
    for (size_t i = 0; i < sizeof widths / sizeof widths[0]; i++) {
        g.det_width = widths[i];
        int n = 0;
        ck_assert_int_eq(rtomo_fbp_filter_response(&g, NULL, 0, &n, NULL), RTOMO_OK);
        ck_assert_int_ge(n, 2 * widths[i]);
        ck_assert_int_lt(n, 4 * widths[i]);
        ck_assert_int_eq(n & (n - 1), 0);
    }
}
END_TEST

/* Every item dealt once, in order, parts differing by at most one item
 * and the larger ones first; parts beyond n get none. */
START_TEST(even_deal_covers_every_item_once)
{
    for (int n = 0; n <= 40; n++)
        for (int parts = 1; parts <= 9; parts++) {
            int next = 0;
            for (int p = 0; p < parts; p++) {
                int first, count;
                rtomo_deal_even(n, parts, p, &first, &count);
                ck_assert_msg(first == next, "n %d parts %d: part %d starts "
                              "at %d, expected %d", n, parts, p, first, next);
                ck_assert_int_eq(count, n / parts + (p < n % parts));
                next += count;
            }
            ck_assert_int_eq(next, n);
        }
}
END_TEST

/* The split hook: a number from 1 to 8, anything else 1. */
START_TEST(split_hook_takes_only_small_numbers)
{
    const char *name = "RTOMO_TEST_SPLIT_HOOK";
    unsetenv(name);
    ck_assert_int_eq(rtomo_split_hook(name), 1);
    const struct { const char *value; int slabs; } cases[] = {
        {"3", 3}, {"8", 8}, {"1", 1}, {"9", 1}, {"0", 1}, {"-2", 1},
        {"2x", 1}, {"", 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        setenv(name, cases[i].value, 1);
        ck_assert_msg(rtomo_split_hook(name) == cases[i].slabs,
                      "%s=\"%s\": %d slabs, expected %d", name,
                      cases[i].value, rtomo_split_hook(name), cases[i].slabs);
    }
    unsetenv(name);
}
END_TEST

static Suite *engine_api_suite(void)
{
    Suite *s = suite_create("engine_api");
    TCase *tc = tcase_create("api");
    tcase_add_test(tc, names_round_trip);
    tcase_add_test(tc, parsers_reject_unknown_names);
    tcase_add_test(tc, dtype_sizes);
    tcase_add_test(tc, errors_are_formatted_and_null_safe);
    tcase_add_test(tc, option_defaults);
    tcase_add_test(tc, cuda_request_without_gpu_is_refused_clearly);
    tcase_add_test(tc, padded_length_is_power_of_two_at_least_twice_width);
    tcase_add_test(tc, even_deal_covers_every_item_once);
    tcase_add_test(tc, split_hook_takes_only_small_numbers);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return rtomo_check_run(engine_api_suite());
}
