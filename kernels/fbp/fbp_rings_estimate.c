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
    if (k <= 16) {              /* the sectors: insertion sort is quicker */
        for (int i = 1; i < k; i++) {
            const double t = v[i];
            int j = i;
            for (; j > 0 && v[j - 1] > t; j--)
                v[j] = v[j - 1];
            v[j] = t;
        }
        return k % 2 ? v[k / 2] : 0.5 * (v[k / 2 - 1] + v[k / 2]);
    }
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
    double threshold;           /* the last detection's, in line integrals */
    double *mean[RTOMO_RINGS_SECTORS];
    double *dr, *spread, *r, *flag, *stripe, *offset, *window, *pick;
    double *fit_x, *fit_w, *fit_o, *fit_abs;    /* a run and its anchors */
    double *lsq;                /* the deconvolution's normal equations */
} rings_row;

/* The coefficient of bin i in the local residual at bin x (below). */
static double local_coefficient(int n, int x, int i)
{
    if (n < 2)
        return 0.0;
    if (x == 0)
        return i == 0 ? 1.0 : i == 1 ? -1.0 : 0.0;
    if (x == n - 1)
        return i == n - 1 ? 1.0 : i == n - 2 ? -1.0 : 0.0;
    return i == x ? 1.0 : (i == x - 1 || i == x + 1) ? -0.5 : 0.0;
}

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

/* Flag the bins where something stands out: the sectors' median local
 * residual, less its running median, beyond the threshold max(
 * RTOMO_RINGS_SIGMAS robust sigmas, RTOMO_RINGS_FLOOR) and beyond the
 * sectors' own spread there (where they disagree, an edge of the sample
 * passes in some of them: a stripe is the same in all).  Returns how
 * many. */
static int find_candidates(rings_row *w)
{
    for (int x = 0; x < w->n; x++) {
        double d[RTOMO_RINGS_SECTORS];
        for (int j = 0; j < w->k; j++)
            w->pick[j] = d[j] = local_residual(w, j, x);
        w->dr[x] = median_of(w->pick, w->k);
        for (int j = 0; j < w->k; j++)
            w->pick[j] = fabs(d[j] - w->dr[x]);
        w->spread[x] = 1.4826 * median_of(w->pick, w->k);
    }
    median_residual(w->dr, w->n, w->width, w->window, w->r);
    w->threshold = fmax(RTOMO_RINGS_SIGMAS * robust_sigma(w->r, w->n, w->flag),
                        RTOMO_RINGS_FLOOR);
    for (int x = 0; x < w->n; x++)
        w->flag[x] = fabs(w->r[x]) > w->threshold &&
                     fabs(w->r[x]) > w->spread[x];
    /* An end bin's residual m(0) - m(1) does not see equal stripes at 0
     * and 1: a candidate next to the end takes the end bin along, and
     * the separation below decides. */
    if (w->n > 2 && w->flag[1])
        w->flag[0] = 1;
    if (w->n > 2 && w->flag[w->n - 2])
        w->flag[w->n - 1] = 1;
    int found = 0;
    for (int x = 0; x < w->n; x++)
        found += w->flag[x] != 0;
    return found;
}

/* Solve the symmetric positive definite k x k system in a (row-major,
 * k + 1 columns: the right-hand side last) by Gauss-Jordan elimination;
 * the solution is left in the last column.  -1 when singular. */
static int solve_normal(double *a, int k)
{
    const int cols = k + 1;
    for (int r = 0; r < k; r++) {
        const double d = a[r * cols + r];
        if (!(fabs(d) > 1e-12))
            return -1;
        for (int q = 0; q < k; q++) {
            const double f = q == r ? 0.0 : a[q * cols + r] / d;
            for (int c = r; f != 0.0 && c < cols; c++)
                a[q * cols + c] -= f * a[r * cols + c];
        }
    }
    for (int r = 0; r < k; r++)
        a[r * cols + k] /= a[r * cols + r];
    return 0;
}

/* A stripe of offset c at bin i leaves c in its own local residual and
 * -c/2 in its neighbours', which then stand out too: a run of candidates
 * [a, b] holds stripes and their neighbours.  Solve r(x) = sum_i L(x, i)
 * c_i for x in [a - 1, b + 1] (L: the local residual's coefficients, c
 * zero outside the run) by least squares, and keep as stripes only the
 * bins whose c_i exceeds the threshold; the others become anchors of the
 * bridge below.  A run with none above it, or longer than
 * RTOMO_RINGS_DECONV_MAX, is kept whole. */
static void separate_run(rings_row *w, int a, int b)
{
    const int m = b - a + 1, cols = m + 1;
    if (m < 2 || m > RTOMO_RINGS_DECONV_MAX)
        return;
    double *A = w->lsq;
    memset(A, 0, sizeof(double) * (size_t)m * (size_t)cols);
    for (int x = a - 1; x <= b + 1; x++) {
        if (x < 0 || x >= w->n)
            continue;
        for (int i = 0; i < m; i++) {
            const double li = local_coefficient(w->n, x, a + i);
            if (li == 0.0)
                continue;
            for (int j = 0; j < m; j++)
                A[i * cols + j] += li * local_coefficient(w->n, x, a + j);
            A[i * cols + m] += li * w->r[x];
        }
    }
    if (solve_normal(A, m) != 0)
        return;
    int any = 0;
    for (int i = 0; i < m; i++)
        any |= fabs(A[i * cols + m]) > w->threshold;
    for (int i = 0; any && i < m; i++)
        w->flag[a + i] = fabs(A[i * cols + m]) > w->threshold;
}

/* Weighted least-squares polynomial of degree deg (at most 2) through the
 * sector mean m at the bins xs, in powers of (x - x0); -1 when singular
 * (every anchor weighted out). */
static int fit_polynomial(const double *xs, const double *wt, int k,
                          const double *m, int deg, double x0,
                          double coef[3])
{
    double a[3 * 4] = {0};
    const int terms = deg + 1;
    for (int i = 0; i < k; i++) {
        if (wt[i] <= 0.0)
            continue;
        const double t = xs[i] - x0, pw[3] = {1.0, t, t * t};
        for (int r = 0; r < terms; r++) {
            for (int c = 0; c < terms; c++)
                a[r * (terms + 1) + c] += wt[i] * pw[r] * pw[c];
            a[r * (terms + 1) + terms] += wt[i] * pw[r] * m[(int)xs[i]];
        }
    }
    if (solve_normal(a, terms) != 0)
        return -1;
    for (int r = 0; r < 3; r++)
        coef[r] = r < terms ? a[r * (terms + 1) + terms] : 0.0;
    return 0;
}

/* o[i] = the sectors' median of (mean - its fitted baseline) at xs[i]. */
static int baseline_residuals(rings_row *w, int k, int deg, double x0)
{
    double coef[RTOMO_RINGS_SECTORS][3];
    for (int j = 0; j < w->k; j++)
        if (fit_polynomial(w->fit_x, w->fit_w, k, w->mean[j], deg, x0,
                           coef[j]) != 0)
            return -1;
    for (int i = 0; i < k; i++) {
        const double t = w->fit_x[i] - x0;
        for (int j = 0; j < w->k; j++)
            w->pick[j] = w->mean[j][(int)w->fit_x[i]] -
                         (coef[j][0] + t * (coef[j][1] + t * coef[j][2]));
        w->fit_o[i] = median_of(w->pick, w->k);
    }
    return 0;
}

/* Tukey's biweight of every bin of the window by its residual, on the
 * scale max(1.4826 median |o|, threshold / RTOMO_RINGS_SIGMAS). */
static double reweight(rings_row *w, int k)
{
    for (int i = 0; i < k; i++)
        w->fit_abs[i] = fabs(w->fit_o[i]);
    const double scale = fmax(1.4826 * median_of(w->fit_abs, k),
                              w->threshold / RTOMO_RINGS_SIGMAS);
    double change = 0.0;
    for (int i = 0; i < k; i++) {
        const double u = w->fit_o[i] / (RTOMO_RINGS_BIWEIGHT * scale);
        const double wt = fabs(u) < 1.0 ? (1.0 - u * u) * (1.0 - u * u) : 0.0;
        change = fmax(change, fabs(wt - w->fit_w[i]));
        w->fit_w[i] = wt;
    }
    return change;
}

/* Up to RTOMO_RINGS_ANCHORS bins not in `excluded` on one side of a run,
 * from `from` on in steps of `step`: appended to the window with weight
 * 1.  Returns how many. */
static int add_anchors(rings_row *w, const double *excluded, int from,
                       int step, int k)
{
    int found = 0;
    for (int x = from; x >= 0 && x < w->n && found < RTOMO_RINGS_ANCHORS;
         x += step)
        if (!excluded[x]) {
            w->fit_x[k + found] = x;
            w->fit_w[k + found++] = 1.0;
        }
    return found;
}

/* The offsets of the stripe bins [a, b] into w->offset.  Anchors: the
 * RTOMO_RINGS_ANCHORS nearest bins outside `excluded` on either side.
 * Each sector's baseline is the least-squares quadratic through the
 * anchors; a bin's offset is the sectors' median of (mean - baseline).
 * Then RTOMO_RINGS_IRLS rounds of reweighting every bin of the window
 * (anchors and run) by Tukey's biweight of its offset and fitting again:
 * a run bin that is no stripe comes back in as an anchor, an anchor that
 * is one goes out.  With anchors on one side only (a row's end): the
 * nearest anchor's mean as the baseline. */
static void bridge_run(rings_row *w, const double *excluded, int a, int b)
{
    double left[RTOMO_RINGS_ANCHORS];
    const int kl = add_anchors(w, excluded, a - 1, -1, 0);
    for (int i = 0; i < kl; i++)        /* the window in increasing x */
        left[i] = w->fit_x[kl - 1 - i];
    memcpy(w->fit_x, left, sizeof(double) * (size_t)kl);
    int k = kl;
    for (int x = a; x <= b; x++) {
        w->fit_x[k] = x;
        w->fit_w[k++] = 0.0;
    }
    const int kr = add_anchors(w, excluded, b + 1, 1, k);
    k += kr;
    for (int x = a; x <= b; x++)
        w->offset[x] = 0.0;
    if (kl == 0 && kr == 0)
        return;
    if (kl == 0 || kr == 0) {
        const int near = kl ? (int)w->fit_x[kl - 1]
                            : (int)w->fit_x[kl + b - a + 1];
        for (int x = a; x <= b; x++) {
            for (int j = 0; j < w->k; j++)
                w->pick[j] = w->mean[j][x] - w->mean[j][near];
            w->offset[x] = median_of(w->pick, w->k);
        }
        return;
    }
    const int deg = kl + kr - 1 < 2 ? kl + kr - 1 : 2;
    const double x0 = 0.5 * (a + b);
    baseline_residuals(w, k, deg, x0);      /* anchors weigh 1: regular */
    for (int round = 0; round < RTOMO_RINGS_IRLS; round++) {
        if (reweight(w, k) < RTOMO_RINGS_IRLS_DONE)
            break;          /* converged: the fit would not move */
        if (baseline_residuals(w, k, deg, x0) != 0)
            break;          /* every anchor weighted out: keep the last */
    }
    for (int x = a; x <= b; x++)
        w->offset[x] = w->fit_o[kl + x - a];
}

/* Call fn on every run of adjacent nonzero bins of set. */
static void for_each_run(rings_row *w, const double *set,
                         void (*fn)(rings_row *, const double *, int, int))
{
    for (int x = 0; x < w->n;) {
        if (!set[x]) {
            x++;
            continue;
        }
        int b = x;
        while (b + 1 < w->n && set[b + 1])
            b++;
        fn(w, set, x, b);
        x = b + 1;
    }
}

static void separate(rings_row *w, const double *set, int a, int b)
{
    (void)set;
    separate_run(w, a, b);
}

/* Bridge a run and take its offsets out of every sector's mean, so that
 * the next pass sees what it hid. */
static void bridge_and_remove(rings_row *w, const double *set, int a, int b)
{
    bridge_run(w, set, a, b);
    for (int x = a; x <= b; x++)
        for (int j = 0; j < w->k; j++)
            w->mean[j][x] -= w->offset[x];
}

static void load_means(rings_row *w,
                       const double *const sums[RTOMO_RINGS_SECTORS],
                       const long counts[RTOMO_RINGS_SECTORS])
{
    int k = 0;
    for (int j = 0; j < RTOMO_RINGS_SECTORS; j++) {
        if (counts[j] == 0)
            continue;
        for (int x = 0; x < w->n; x++)
            w->mean[k][x] = sums[j][x] / (double)counts[j];
        k++;
    }
}

/* Passes find the stripes: candidates, separated from their neighbours,
 * bridged and taken out so that stripes close together, which hide each
 * other from the running median, show in the next pass.  The offsets are
 * then bridged once more from the untouched means with every stripe found
 * excluded from the anchors: an early pass's bridge, made before its
 * neighbours were known, does not stay in c. */
void rtomo_fbp_rings_offsets(const double *const sums[RTOMO_RINGS_SECTORS],
                             const long counts[RTOMO_RINGS_SECTORS], int n,
                             int width, double *scratch, double *c)
{
    rings_row w = {.n = n, .width = width};
    double *at = scratch;
    for (int j = 0; j < RTOMO_RINGS_SECTORS; j++)
        if (counts[j] != 0) {
            w.mean[w.k++] = at;
            at += n;
        }
    double **next[] = {&w.dr, &w.spread, &w.r, &w.flag, &w.stripe,
                       &w.offset};
    for (size_t i = 0; i < sizeof next / sizeof *next; i++, at += n)
        *next[i] = at;
    double **window[] = {&w.fit_x, &w.fit_w, &w.fit_o, &w.fit_abs};
    for (size_t i = 0; i < sizeof window / sizeof *window; i++)
        *window[i] = at, at += n + 2 * RTOMO_RINGS_ANCHORS;
    w.pick = at;
    w.lsq = w.pick + RTOMO_RINGS_SECTORS;
    w.window = w.lsq + RTOMO_RINGS_DECONV_MAX * (RTOMO_RINGS_DECONV_MAX + 1);
    for (int x = 0; x < n; x++)
        c[x] = w.stripe[x] = 0.0;
    if (w.k == 0)
        return;
    load_means(&w, sums, counts);
    for (int pass = 0; pass < RTOMO_RINGS_PASSES; pass++) {
        if (find_candidates(&w) == 0)
            break;
        for_each_run(&w, w.flag, separate);
        for (int x = 0; x < n; x++)
            w.stripe[x] = w.stripe[x] || w.flag[x];
        for_each_run(&w, w.flag, bridge_and_remove);
    }
    load_means(&w, sums, counts);
    for (int x = 0; x < n; x++)
        w.offset[x] = 0.0;
    for_each_run(&w, w.stripe, bridge_run);
    for (int x = 0; x < n; x++)
        c[x] = w.stripe[x] ? w.offset[x] : 0.0;
}
