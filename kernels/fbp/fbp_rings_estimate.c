/*
 * fbp_rings_estimate.c — the stripe offsets of one detector row from its
 * angular sector sums (rtomo_fbp_rings_offsets): the estimator of ring
 * removal, shared by the CPU and CUDA backends, which call it on the host
 * once the scan is in (see rtomo_rings in rtomo_engine.h and PROTOCOL.md
 * 3.10 for the method).
 */
#include "config.h"

#include <math.h>
#include <string.h>

#include "engine_internal.h"

/* ----------------------------------------------------- running median ---- */

/* Index of the first element of sorted s[0..k) not less than v. */
static int lower_bound(const double *s, int k, double v)
{
    int lo = 0, hi = k;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (s[mid] < v)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static void sorted_insert(double *s, int *k, double v)
{
    int at = lower_bound(s, *k, v);
    memmove(s + at + 1, s + at, sizeof(double) * (size_t)(*k - at));
    s[at] = v;
    (*k)++;
}

/* v is in s (the same value was inserted), so lower_bound finds it. */
static void sorted_remove(double *s, int *k, double v)
{
    int at = lower_bound(s, *k, v);
    memmove(s + at, s + at + 1, sizeof(double) * (size_t)(*k - at - 1));
    (*k)--;
}

static double sorted_median(const double *s, int k)
{
    return k % 2 ? s[k / 2] : 0.5 * (s[k / 2 - 1] + s[k / 2]);
}

/* r[x] = mean[x] less the median of mean over the bins x - width/2 ..
 * x + width/2 inside [0, n).  The window slides one bin at a time, kept
 * sorted: one insertion and one removal (a binary search and a short
 * memmove) per bin instead of a sort of `width` values. */
static void median_residual(const double *mean, int n, int width,
                            double *window, double *r)
{
    const int half = width / 2;
    int k = 0;
    for (int j = 0; j <= half && j < n; j++)
        sorted_insert(window, &k, mean[j]);
    for (int x = 0; x < n; x++) {
        r[x] = mean[x] - sorted_median(window, k);
        if (x - half >= 0)
            sorted_remove(window, &k, mean[x - half]);
        if (x + 1 + half < n)
            sorted_insert(window, &k, mean[x + 1 + half]);
    }
}

/* The k-th smallest of v[0..n) (Hoare's selection, v reordered): linear
 * time, where a sort of the row for its median would cost n log n per
 * pass and row, seconds over a 2048^2 detector. */
static double select_kth(double *v, int n, int k)
{
    int lo = 0, hi = n - 1;
    while (lo < hi) {
        const double pivot = v[lo + (hi - lo) / 2];
        int i = lo, j = hi;
        while (i <= j) {
            while (v[i] < pivot)
                i++;
            while (v[j] > pivot)
                j--;
            if (i <= j) {
                const double t = v[i];
                v[i++] = v[j];
                v[j--] = t;
            }
        }
        if (k <= j)
            hi = j;
        else if (k >= i)
            lo = i;
        else
            break;
    }
    return v[k];
}

/* Median of v[0..k), reordering v (an even count: the mean of the middle
 * two). */
static double median_of(double *v, int k)
{
    const double upper = select_kth(v, k, k / 2);
    if (k % 2)
        return upper;
    double lower = v[0];        /* the largest of the lower half */
    for (int i = 1; i < k / 2; i++)
        lower = v[i] > lower ? v[i] : lower;
    return 0.5 * (lower + upper);
}

/* The residuals' spread as a robust standard deviation: 1.4826 times the
 * median absolute value (0.6745 sigma for Gaussian noise), which stripes,
 * a minority of bins, do not move. */
static double robust_sigma(const double *r, int n, double *copy)
{
    for (int x = 0; x < n; x++)
        copy[x] = fabs(r[x]);
    return 1.4826 * median_of(copy, n);
}

/* A row's sector means, and where to work. */
typedef struct rings_row {
    int n, width, k;            /* bins, median width, sectors with data */
    double *mean[RTOMO_RINGS_SECTORS];
    double *dr, *r, *flag, *window, *pick;
} rings_row;

/* The local residual m(x) - (m(x-1) + m(x+1)) / 2 of sector j (0 along a
 * straight slope: a stripe on the flank of the sample stands out as one
 * on a plateau does). */
static double local_residual(const rings_row *w, int j, int x)
{
    const double *m = w->mean[j];
    if (w->n < 2)
        return 0.0;
    if (x == 0)
        return m[0] - m[1];
    if (x == w->n - 1)
        return m[x] - m[x - 1];
    return m[x] - 0.5 * (m[x - 1] + m[x + 1]);
}

/* Flag the stripe bins: the sectors' median local residual, less its
 * running median, beyond max(RTOMO_RINGS_SIGMAS robust sigmas,
 * RTOMO_RINGS_FLOOR).  Returns how many. */
static int find_stripes(rings_row *w)
{
    for (int x = 0; x < w->n; x++) {
        for (int j = 0; j < w->k; j++)
            w->pick[j] = local_residual(w, j, x);
        w->dr[x] = median_of(w->pick, w->k);
    }
    median_residual(w->dr, w->n, w->width, w->window, w->r);
    const double threshold = fmax(RTOMO_RINGS_SIGMAS *
                                      robust_sigma(w->r, w->n, w->flag),
                                  RTOMO_RINGS_FLOOR);
    int found = 0;
    for (int x = 0; x < w->n; x++) {
        w->flag[x] = fabs(w->r[x]) > threshold;
        found += w->flag[x] != 0;
    }
    return found;
}

/* Stripe bins [a, b]: in each sector the mean less the straight line
 * between the nearest bins on either side (the one side's value where
 * the run reaches an end of the row); the offset is the sectors' median,
 * taken out of every sector's mean and added to c. */
static void bridge_run(rings_row *w, int a, int b, double *c)
{
    const int left = a - 1, right = b + 1, n = w->n;
    if (left < 0 && right >= n)
        return;
    for (int x = a; x <= b; x++) {
        for (int j = 0; j < w->k; j++) {
            const double *m = w->mean[j];
            double base = left < 0 ? m[right]
                          : right >= n ? m[left]
                          : m[left] + (m[right] - m[left]) *
                                          (double)(x - left) / (right - left);
            w->pick[j] = m[x] - base;
        }
        const double offset = median_of(w->pick, w->k);
        for (int j = 0; j < w->k; j++)
            w->mean[j][x] -= offset;
        c[x] += offset;
    }
}

/* Stripes close together hide each other from the running median: each
 * pass takes out what it finds, the next looks again without them. */
void rtomo_fbp_rings_offsets(const double *const sums[RTOMO_RINGS_SECTORS],
                             const long counts[RTOMO_RINGS_SECTORS], int n,
                             int width, double *scratch, double *c)
{
    rings_row w = {.n = n, .width = width};
    double *at = scratch;
    for (int j = 0; j < RTOMO_RINGS_SECTORS; j++) {
        if (counts[j] == 0)
            continue;
        w.mean[w.k] = at;
        for (int x = 0; x < n; x++)
            at[x] = sums[j][x] / (double)counts[j];
        at += n;
        w.k++;
    }
    w.dr = at;
    w.r = w.dr + n;
    w.flag = w.r + n;
    w.pick = w.flag + n;
    w.window = w.pick + RTOMO_RINGS_SECTORS;
    for (int x = 0; x < n; x++)
        c[x] = 0.0;
    for (int pass = 0; w.k > 0 && pass < RTOMO_RINGS_PASSES; pass++) {
        if (find_stripes(&w) == 0)
            break;
        for (int x = 0; x < n;) {
            if (!w.flag[x]) {
                x++;
                continue;
            }
            int b = x;
            while (b + 1 < n && w.flag[b + 1])
                b++;
            bridge_run(&w, x, b, c);
            x = b + 1;
        }
    }
}
