/*
 * fbp_rings.c — the backend-neutral part of ring (detector stripe)
 * removal: rtomo_fbp_remove_rings with its state checks, the bookkeeping of
 * which projections the backends' column sums hold, and the running median
 * that turns a row's column means into stripe offsets (see rtomo_rings in
 * rtomo_engine.h for the method).
 *
 * The backends sum every kept row's line integrals per bin as projections
 * are fed, before filtering.  A slot fed twice would be summed twice, and
 * a cleared or set_filtered slot would be summed although its data left,
 * and nothing unfiltered is kept to take it back out; so ring removal needs
 * every projection fed once (the scan mode, not a continuous stream's ring
 * of slots), and remove_rings refuses with RTOMO_E_STATE, naming the slot,
 * once that is broken.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"

void rtomo_fbp_rings_note_feed(rtomo_fbp *plan, int index)
{
    plan->rings_counts[rtomo_fbp_rings_sector(plan, index)]++;
    if (plan->received[index] && !plan->rings_spoilt)
        plan->rings_spoilt = 1 + index;
    plan->rings_fresh++;
}

void rtomo_fbp_rings_note_spoil(rtomo_fbp *plan, int index)
{
    if (!plan->rings_spoilt)
        plan->rings_spoilt = 1 + (index < 0 ? 0 : index);
}

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

int rtomo_fbp_rings_sector(const rtomo_fbp *plan, int index)
{
    double a = fmod(plan->angles[index], M_PI);
    if (a < 0)
        a += M_PI;
    int s = (int)(a / M_PI * RTOMO_RINGS_SECTORS);
    return s < 0 ? 0 : s >= RTOMO_RINGS_SECTORS ? RTOMO_RINGS_SECTORS - 1 : s;
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

/* ---------------------------------------------------------- the call ---- */

static rtomo_status check_state(const rtomo_fbp *plan, rtomo_error *err)
{
    if (plan->stream_n > 0)
        return rtomo_set_error(err, RTOMO_E_STATE,
                               "ring removal corrects the held projections, "
                               "which the open resident slices have already "
                               "summed: close them first");
    if (plan->rings_spoilt)
        return rtomo_set_error(err, RTOMO_E_STATE,
                               "ring removal needs every projection fed "
                               "once: projection slot %d was fed again, "
                               "cleared or set directly",
                               plan->rings_spoilt - 1);
    if (plan->rings_fresh == 0)
        return rtomo_set_error(err, RTOMO_E_STATE,
                               "rings already removed: no projection was "
                               "fed since");
    if (!plan->ops->remove_rings)
        return rtomo_set_error(err, RTOMO_E_UNAVAILABLE,
                               "the %s backend cannot remove rings",
                               plan->ops->name);
    return RTOMO_OK;
}

rtomo_status rtomo_fbp_remove_rings(rtomo_fbp *plan, rtomo_error *err)
{
    if (!plan)
        return rtomo_set_error(err, RTOMO_E_INVALID, "no plan given");
    if (plan->geom.rings == RTOMO_RINGS_OFF)
        return RTOMO_OK;
    rtomo_status st = check_state(plan, err);
    if (st != RTOMO_OK)
        return st;
    const int n = plan->geom.n_proj;
    if (!plan->rings_done && !(plan->rings_done = calloc((size_t)n, 1)))
        return rtomo_set_error(err, RTOMO_E_NOMEM, "out of memory");
    if ((st = plan->ops->sync(plan, err)) != RTOMO_OK ||
        (st = plan->ops->remove_rings(plan, err)) != RTOMO_OK)
        return st;
    for (int p = 0; p < n; p++)
        plan->rings_done[p] |= plan->received[p];
    plan->rings_fresh = 0;
    return RTOMO_OK;
}
