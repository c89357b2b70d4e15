/*
 * test_fbp_image_png.c — image output of the tools (client/image_png.c):
 * PNGs read back with libpng hold the windowed gray levels, the automatic
 * window is the 0.5 / 99.5 percentile pair of the finite values, raw files
 * hold the floats, and bad arguments or paths give clear errors.
 */
#include "config.h"

#include <check.h>
#include <math.h>
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "image_png.h"
#include "rtomo_sim.h"
#include "check_run.h"
#include "test_util.h"

static char dir[256];

static void make_dir(void)
{
    test_make_temp_dir("rtomo-png", dir, sizeof dir);
}

static void remove_dir(void)
{
    test_remove_tree(dir);
}

/* Read an 8-bit gray PNG; returns the pixels (malloc'd). */
static unsigned char *read_gray_png(const char *path, int *w, int *h)
{
    png_image img;
    memset(&img, 0, sizeof img);
    img.version = PNG_IMAGE_VERSION;
    ck_assert_msg(png_image_begin_read_from_file(&img, path), "%s: %s", path,
                  img.message);
    ck_assert_int_eq(img.format & PNG_FORMAT_FLAG_COLOR, 0);
    img.format = PNG_FORMAT_GRAY;
    unsigned char *buf = malloc(PNG_IMAGE_SIZE(img));
    ck_assert(png_image_finish_read(&img, NULL, buf, 0, NULL));
    *w = (int)img.width;
    *h = (int)img.height;
    return buf;
}

static int expected_gray(float v, double lo, double hi)
{
    if (!isfinite(v))
        return 0;
    double g = (v - lo) * 255.0 / (hi - lo);
    return g <= 0 ? 0 : g >= 255 ? 255 : (int)(g + 0.5);
}

START_TEST(png_holds_windowed_gray_levels)
{
    enum { W = 37, H = 23 };
    uint64_t rng = 0x1a9e01;
    float img[W * H];
    for (int i = 0; i < W * H; i++)
        img[i] = (float)(3.0 * rtomo_random_normal(&rng));
    img[5] = NAN;
    img[6] = INFINITY;
    char path[300];
    snprintf(path, sizeof path, "%s/a.png", dir);
    rtomo_error err;
    ck_assert_msg(rtomo_image_write_png(path, img, W, H, -2.0, 4.0, &err) ==
                      RTOMO_OK, "%s", err.message);
    int w, h;
    unsigned char *gray = read_gray_png(path, &w, &h);
    ck_assert_int_eq(w, W);
    ck_assert_int_eq(h, H);
    for (int i = 0; i < W * H; i++)
        ck_assert_msg(gray[i] == expected_gray(img[i], -2.0, 4.0),
                      "pixel %d: value %g gray %d, expected %d", i, img[i],
                      gray[i], expected_gray(img[i], -2.0, 4.0));
    free(gray);
    unlink(path);
}
END_TEST

static int compare_floats(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

START_TEST(auto_window_is_percentiles_of_finite_values)
{
    enum { N = 10007 };
    uint64_t rng = 0x1a9e02;
    static float img[N], sorted[N];
    int m = 0;
    for (int i = 0; i < N; i++) {
        img[i] = (float)rtomo_random_normal(&rng);
        if (i % 100 == 3)
            img[i] = i % 200 == 3 ? NAN : -INFINITY;
        else
            sorted[m++] = img[i];
    }
    qsort(sorted, m, sizeof(float), compare_floats);
    double lo, hi;
    rtomo_error err;
    ck_assert(rtomo_image_auto_window(img, N, &lo, &hi, &err) == RTOMO_OK);
    double want_lo = sorted[(int)floor(0.005 * (m - 1) + 0.5)];
    double want_hi = sorted[(int)floor(0.995 * (m - 1) + 0.5)];
    ck_assert_double_eq(lo, want_lo);
    ck_assert_double_eq(hi, want_hi);
    /* lo == hi in write_png selects this window */
    char path[300];
    snprintf(path, sizeof path, "%s/auto.png", dir);
    ck_assert(rtomo_image_write_png(path, img, 10007, 1, 0, 0, &err) == 0);
    int w, h;
    unsigned char *gray = read_gray_png(path, &w, &h);
    for (int i = 0; i < N; i++)
        ck_assert_int_eq(gray[i], expected_gray(img[i], lo, hi));
    free(gray);
    unlink(path);
}
END_TEST

START_TEST(flat_and_empty_images)
{
    float flat[16], nans[16];
    for (int i = 0; i < 16; i++) {
        flat[i] = 2.5f;
        nans[i] = NAN;
    }
    double lo, hi;
    rtomo_error err;
    ck_assert(rtomo_image_auto_window(flat, 16, &lo, &hi, &err) == RTOMO_OK);
    ck_assert(lo < 2.5 && hi > 2.5);
    ck_assert_double_eq_tol(0.5 * (lo + hi), 2.5, 1e-12);
    ck_assert_int_eq(rtomo_image_auto_window(nans, 16, &lo, &hi, &err),
                     RTOMO_E_INVALID);
    ck_assert_ptr_nonnull(strstr(err.message, "finite"));
    char path[300];
    snprintf(path, sizeof path, "%s/nan.png", dir);
    ck_assert_int_eq(rtomo_image_write_png(path, nans, 4, 4, 0, 0, &err),
                     RTOMO_E_INVALID);
    ck_assert(access(path, F_OK) != 0);
}
END_TEST

START_TEST(bad_arguments_and_paths)
{
    float img[4] = {0, 1, 2, 3};
    char path[300];
    snprintf(path, sizeof path, "%s/b.png", dir);
    rtomo_error err;
    ck_assert_int_eq(rtomo_image_write_png(path, img, 0, 4, 0, 1, &err),
                     RTOMO_E_INVALID);
    ck_assert_ptr_nonnull(strstr(err.message, "size"));
    ck_assert_int_eq(rtomo_image_write_png(path, img, 2, 2, 1, 0, &err),
                     RTOMO_E_INVALID);
    ck_assert_ptr_nonnull(strstr(err.message, "window"));
    ck_assert_int_eq(rtomo_image_write_png(path, img, 2, 2, NAN, 1, &err),
                     RTOMO_E_INVALID);
    ck_assert_int_eq(rtomo_image_write_png(NULL, img, 2, 2, 0, 1, &err),
                     RTOMO_E_INVALID);
    ck_assert_int_eq(rtomo_image_write_png(path, NULL, 2, 2, 0, 1, &err),
                     RTOMO_E_INVALID);
    snprintf(path, sizeof path, "%s/no/such/dir/c.png", dir);
    ck_assert_int_eq(rtomo_image_write_png(path, img, 2, 2, 0, 1, &err),
                     RTOMO_E_BACKEND);
    ck_assert_msg(strstr(err.message, path) && strstr(err.message, "No such"),
                  "message '%s'", err.message);
    snprintf(path, sizeof path, "%s/no/such/dir/c.f32", dir);
    ck_assert_int_eq(rtomo_image_write_raw(path, img, 4, &err),
                     RTOMO_E_BACKEND);
    ck_assert_ptr_nonnull(strstr(err.message, path));
}
END_TEST

START_TEST(raw_holds_the_floats)
{
    uint64_t rng = 0x1a9e03;
    float img[300], back[301];
    test_fill_normal(&rng, img, 300);
    char path[300];
    snprintf(path, sizeof path, "%s/r.f32", dir);
    rtomo_error err;
    ck_assert(rtomo_image_write_raw(path, img, 300, &err) == RTOMO_OK);
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fread(back, sizeof(float), 301, f), 300);
    fclose(f);
    ck_assert(memcmp(img, back, sizeof img) == 0);
    unlink(path);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("image_png");
    TCase *tc = tcase_create("image");
    tcase_add_checked_fixture(tc, make_dir, remove_dir);
    tcase_add_test(tc, png_holds_windowed_gray_levels);
    tcase_add_test(tc, auto_window_is_percentiles_of_finite_values);
    tcase_add_test(tc, flat_and_empty_images);
    tcase_add_test(tc, bad_arguments_and_paths);
    tcase_add_test(tc, raw_holds_the_floats);
    suite_add_tcase(s, tc);
    return rtomo_check_run(s);
}
