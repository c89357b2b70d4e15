/*
 * cpu_cone_filter.c — FDK's weighting and row-wise ramp filtering on the
 * CPU, with single-precision FFTW, threaded over pairs of detector rows.
 *
 * As in the FBP CPU backend (cpu_fbp_filter.c), two real rows a and b are
 * filtered by one complex transform of a + i b: the filter is real and
 * even, so the real and imaginary parts of the result are the filtered
 * rows.  Plans are made once with FFTW_ESTIMATE (reproducible roundings)
 * under the shared planner lock and run from every worker through
 * fftwf_execute_dft on the worker's own buffer.
 */
#include "config.h"

#include <fftw3.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_cone.h"
#include "fbp_filter_design.h"

struct cpu_cone_filter {
    int length;
    fftwf_plan forward, backward;
    int n_workers;
    fftwf_complex **spectrum;   /* per worker: length values */
};

void cpu_cone_filter_destroy(cpu_cone_filter *f)
{
    if (!f)
        return;
    rtomo_fftw_planner_lock();
    if (f->forward)
        fftwf_destroy_plan(f->forward);
    if (f->backward)
        fftwf_destroy_plan(f->backward);
    rtomo_fftw_planner_unlock();
    for (int w = 0; f->spectrum && w < f->n_workers; w++)
        fftwf_free(f->spectrum[w]);
    free(f->spectrum);
    free(f);
}

rtomo_status cpu_cone_filter_create(const rtomo_cone *c, int n_workers,
                                    cpu_cone_filter **out, rtomo_error *err)
{
    *out = NULL;
    cpu_cone_filter *f = calloc(1, sizeof *f);
    if (!f)
        return rtomo_set_error(err, RTOMO_E_NOMEM,
                               "out of memory for the filter");
    f->length = c->filter_length;
    f->n_workers = n_workers;
    f->spectrum = calloc((size_t)n_workers, sizeof *f->spectrum);
    for (int w = 0; f->spectrum && w < n_workers; w++) {
        f->spectrum[w] = fftwf_malloc(sizeof(fftwf_complex) *
                                      (size_t)f->length);
        if (!f->spectrum[w])
            break;
    }
    if (!f->spectrum || !f->spectrum[n_workers - 1]) {
        cpu_cone_filter_destroy(f);
        return rtomo_set_error(err, RTOMO_E_NOMEM,
                               "out of memory for %d filter buffers",
                               n_workers);
    }
    fftwf_complex *buf = f->spectrum[0];
    rtomo_fftw_planner_lock();
    f->forward = fftwf_plan_dft_1d(f->length, buf, buf, FFTW_FORWARD,
                                   FFTW_ESTIMATE);
    f->backward = fftwf_plan_dft_1d(f->length, buf, buf, FFTW_BACKWARD,
                                    FFTW_ESTIMATE);
    rtomo_fftw_planner_unlock();
    if (!f->forward || !f->backward) {
        cpu_cone_filter_destroy(f);
        return rtomo_set_error(err, RTOMO_E_BACKEND,
                               "FFTW could not plan a %d-point transform",
                               c->filter_length);
    }
    *out = f;
    return RTOMO_OK;
}

typedef struct filter_job {
    const rtomo_cone *c;
    const cpu_cone_filter *f;
    const float *li, *row_weights;
    float *out;
} filter_job;

/* Row j of the projection, weighted, into the real (part 0) or imaginary
 * (part 1) part of z. */
static void load_row(const filter_job *job, int j, fftwf_complex *z, int part)
{
    const int det_u = job->c->geom.det_u;
    const size_t at = (size_t)j * (size_t)det_u;
    const float *li = job->li + at, *cw = job->c->cos_weight + at;
    fftwf_complex *zp = z + job->c->filt_off;
    for (int i = 0; i < det_u; i++)
        zp[i][part] = li[i] * job->row_weights[i] * cw[i];
}

/* Task `pair`: rows 2 pair and 2 pair + 1 (when there is one). */
static void filter_task(void *ctx, int pair, int worker)
{
    const filter_job *job = ctx;
    const cpu_cone_filter *f = job->f;
    const int width = job->c->filt_u, det_v = job->c->geom.det_v;
    const int ja = 2 * pair, jb = ja + 1;
    fftwf_complex *z = f->spectrum[worker];
    memset(z, 0, sizeof(fftwf_complex) * (size_t)f->length);
    load_row(job, ja, z, 0);
    if (jb < det_v)
        load_row(job, jb, z, 1);
    fftwf_execute_dft(f->forward, z, z);
    const float *h = job->c->filter;
    for (int k = 0; k < f->length; k++) {
        z[k][0] *= h[k];
        z[k][1] *= h[k];
    }
    fftwf_execute_dft(f->backward, z, z);
    float *oa = job->out + (size_t)ja * (size_t)width;
    for (int i = 0; i < width; i++)
        oa[i] = z[i][0];
    if (jb < det_v) {
        float *ob = oa + width;
        for (int i = 0; i < width; i++)
            ob[i] = z[i][1];
    }
}

void cpu_cone_filter_projection(const rtomo_cone *c, const float *li,
                                const float *row_weights, float *out)
{
    const cpu_cone *s = (const cpu_cone *)c->impl;
    filter_job job = {c, s->filter, li, row_weights, out};
    cpu_pool_run(s->pool, (c->geom.det_v + 1) / 2, filter_task, &job);
}
