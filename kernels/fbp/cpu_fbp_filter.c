/*
 * cpu_fbp_filter.c — ramp filtering of projection rows for the CPU FBP
 * backend, with single-precision FFTW.
 *
 * Two real rows a and b are filtered by one complex transform of a + i b:
 * the filter is real and even, so it maps real rows to real rows and the
 * real and imaginary parts of the result are the filtered a and b.  That
 * halves the transforms compared with one complex transform per row, and
 * needs no separate r2c/c2r plans.  A last row without a partner is paired
 * with zeros.
 *
 * The filter (plan->filter) already includes the back-projection weight
 * pi/n_proj and the 1/n of FFTW's unnormalised inverse transform.  Plans are
 * made once per FBP plan with FFTW_ESTIMATE: planning is then quick and the
 * chosen algorithm, hence every rounding, is the same in every run, which a
 * reference backend needs.  Each worker has its own aligned buffer and runs
 * the shared plans through fftwf_execute_dft (thread-safe in FFTW).
 */
#include "config.h"

#include <fftw3.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_fbp.h"
#include "fbp_filter_design.h"
#include "fbp_half.h"

struct cpu_fbp_filter {
    int length;                 /* padded transform length */
    fftwf_plan forward, backward;
    int n_workers;
    fftwf_complex **spectrum;   /* per worker: length values */
    float **rows;               /* per worker: two rows of det_width */
};

void cpu_fbp_filter_destroy(cpu_fbp_filter *f)
{
    if (!f)
        return;
    rtomo_fftw_planner_lock();
    if (f->forward)
        fftwf_destroy_plan(f->forward);
    if (f->backward)
        fftwf_destroy_plan(f->backward);
    rtomo_fftw_planner_unlock();
    for (int w = 0; w < f->n_workers; w++) {
        if (f->spectrum)
            fftwf_free(f->spectrum[w]);
        if (f->rows)
            fftwf_free(f->rows[w]);
    }
    free(f->spectrum);
    free(f->rows);
    free(f);
}

static int allocate_buffers(cpu_fbp_filter *f, int det_width)
{
    f->spectrum = calloc((size_t)f->n_workers, sizeof *f->spectrum);
    f->rows = calloc((size_t)f->n_workers, sizeof *f->rows);
    if (!f->spectrum || !f->rows)
        return 0;
    for (int w = 0; w < f->n_workers; w++) {
        f->spectrum[w] = fftwf_malloc(sizeof(fftwf_complex) * (size_t)f->length);
        f->rows[w] = fftwf_malloc(sizeof(float) * 2 * (size_t)det_width);
        if (!f->spectrum[w] || !f->rows[w])
            return 0;
    }
    return 1;
}

rtomo_status cpu_fbp_filter_create(const rtomo_fbp *plan, int n_workers,
                                   cpu_fbp_filter **out, rtomo_error *err)
{
    *out = NULL;
    cpu_fbp_filter *f = calloc(1, sizeof *f);
    if (!f)
        return rtomo_set_error(err, RTOMO_E_NOMEM,
                               "out of memory for the filter");
    f->length = plan->filter_length;
    f->n_workers = n_workers;
    if (!allocate_buffers(f, plan->geom.det_width)) {
        cpu_fbp_filter_destroy(f);
        return rtomo_set_error(err, RTOMO_E_NOMEM,
                               "out of memory for %d filter buffers of %d "
                               "points", n_workers, plan->filter_length);
    }
    /* In-place plans on worker 0's buffer; fftwf_malloc gives every buffer
     * the same alignment, so the plans are valid for all of them. */
    fftwf_complex *buf = f->spectrum[0];
    rtomo_fftw_planner_lock();
    f->forward = fftwf_plan_dft_1d(f->length, buf, buf, FFTW_FORWARD,
                                   FFTW_ESTIMATE);
    f->backward = fftwf_plan_dft_1d(f->length, buf, buf, FFTW_BACKWARD,
                                    FFTW_ESTIMATE);
    rtomo_fftw_planner_unlock();
    if (!f->forward || !f->backward) {
        cpu_fbp_filter_destroy(f);
        return rtomo_set_error(err, RTOMO_E_BACKEND,
                               "FFTW could not plan a %d-point complex "
                               "transform", plan->filter_length);
    }
    *out = f;
    return RTOMO_OK;
}

/* Filter real rows a and b (b may be NULL: zeros) of `width` samples into
 * out_a and out_b (out_b unused when b is NULL). */
static void filter_row_pair(const cpu_fbp_filter *f, int worker,
                            const float *filter, int width, const float *a,
                            const float *b, float *out_a, float *out_b)
{
    fftwf_complex *z = f->spectrum[worker];
    for (int i = 0; i < width; i++) {
        z[i][0] = a[i];
        z[i][1] = b ? b[i] : 0.0f;
    }
    memset(z + width, 0, sizeof(fftwf_complex) * (size_t)(f->length - width));
    fftwf_execute_dft(f->forward, z, z);
    for (int k = 0; k < f->length; k++) {
        z[k][0] *= filter[k];
        z[k][1] *= filter[k];
    }
    fftwf_execute_dft(f->backward, z, z);
    for (int i = 0; i < width; i++)
        out_a[i] = z[i][0];
    if (b)
        for (int i = 0; i < width; i++)
            out_b[i] = z[i][1];
}

void cpu_fbp_filter_rows(const rtomo_fbp *plan, const cpu_fbp_state *st,
                         int worker, const float *a, const float *b,
                         float *out_a, float *out_b)
{
    filter_row_pair(st->filter, worker, plan->filter, plan->geom.det_width,
                    a, b, out_a, out_b);
}

typedef struct frame_job {
    const rtomo_fbp *plan;
    cpu_fbp_state *st;
    int index;
    const void *frame;
    rtomo_dtype dtype;
} frame_job;

/* Task `pair`: kept rows 2*pair and 2*pair + 1 (when it exists). */
static void filter_pair_task(void *ctx, int pair, int worker)
{
    const frame_job *job = ctx;
    const rtomo_fbp *plan = job->plan;
    const cpu_fbp_filter *f = job->st->filter;
    const int width = plan->geom.det_width, n_proj = plan->geom.n_proj;
    const int row_a = 2 * pair, row_b = row_a + 1;
    const int has_b = row_b < plan->geom.row_count;
    float *a = f->rows[worker], *b = has_b ? a + width : NULL;

    cpu_fbp_line_integral_row(plan, job->st, job->frame, job->dtype, row_a, a);
    if (has_b)
        cpu_fbp_line_integral_row(plan, job->st, job->frame, job->dtype,
                                  row_b, b);
    cpu_fbp_rings_add(plan, job->st, row_a, job->index, a);
    if (has_b)
        cpu_fbp_rings_add(plan, job->st, row_b, job->index, b);
    /* Half acquisition: each line's measurements weighted to count once
     * (the column sums above want the unweighted line integrals). */
    rtomo_fbp_half_weigh(plan, a);
    if (has_b)
        rtomo_fbp_half_weigh(plan, b);
    float *out_a = cpu_fbp_projection_row(job->st, n_proj, row_a, job->index);
    float *out_b = has_b ? cpu_fbp_projection_row(job->st, n_proj, row_b,
                                                  job->index)
                         : NULL;
    filter_row_pair(f, worker, plan->filter, width, a, b, out_a, out_b);
    /* The projection's angular weight (1 for uniform angles). */
    const float scale = plan->proj_scale[job->index];
    for (int i = 0; scale != 1.0f && i < width; i++) {
        out_a[i] *= scale;
        if (out_b)
            out_b[i] *= scale;
    }
}

void cpu_fbp_filter_frame(const rtomo_fbp *plan, cpu_fbp_state *st,
                          int index, const void *frame, rtomo_dtype dtype)
{
    frame_job job = {plan, st, index, frame, dtype};
    int pairs = (plan->geom.row_count + 1) / 2;
    cpu_pool_run(st->pool, pairs, filter_pair_task, &job);
}
