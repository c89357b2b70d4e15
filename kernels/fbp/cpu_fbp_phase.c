/*
 * cpu_fbp_phase.c — single-distance phase retrieval for the CPU FBP backend
 * (the reference for cuda_fbp_phase.cu), with single-precision FFTW.
 *
 * Per frame: the phase rows (fbp_phase.h) become intensity ratios I/I0,
 * clamped to [RTOMO_PHASE_MIN_RATIO, RTOMO_PHASE_MAX_RATIO], written into
 * the padded array with the edges repeated; one in-place 2-D real-to-
 * complex transform, a multiplication by the Paganin coefficient (1/(ny nx)
 * folded in), the inverse transform.  The kept rows of the result stay in
 * the array until the ramp filter's tasks take their logarithm
 * (cpu_fbp_phase_row), so the frame is filtered once for all its rows.
 *
 * The transforms are FFTW plans made once per plan with FFTW_ESTIMATE (the
 * same algorithm, hence the same rounding, in every run, as
 * cpu_fbp_filter.c) and run on the calling thread: splitting a 2-D
 * transform over the pool would need row and column passes of our own, and
 * the CPU backend is the reference, not the fast path.  The padding and
 * the multiplication, as costly as a transform, run on the pool.  One
 * array per plan suffices: add_projection filters one frame at a time.
 */
#include "config.h"

#include <fftw3.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_fbp.h"
#include "fbp_filter_design.h"

struct cpu_fbp_phase {
    fftwf_plan forward, backward;
    float *array;               /* ny rows of 2 nh floats */
};

void cpu_fbp_phase_destroy(cpu_fbp_state *st)
{
    cpu_fbp_phase *p = st->phase;
    if (!p)
        return;
    rtomo_fftw_planner_lock();
    if (p->forward)
        fftwf_destroy_plan(p->forward);
    if (p->backward)
        fftwf_destroy_plan(p->backward);
    rtomo_fftw_planner_unlock();
    fftwf_free(p->array);
    free(p);
    st->phase = NULL;
}

rtomo_status cpu_fbp_phase_create(const rtomo_fbp *plan, cpu_fbp_state *st,
                                  rtomo_error *err)
{
    const rtomo_fbp_phase_plan *ph = &plan->phase;
    if (!ph->on)
        return RTOMO_OK;
    cpu_fbp_phase *p = calloc(1, sizeof *p);
    if (!p)
        return rtomo_set_error(err, RTOMO_E_NOMEM, "out of memory");
    st->phase = p;
    const size_t floats = (size_t)ph->ny * 2 * (size_t)ph->nh;
    if (!(p->array = fftwf_malloc(sizeof(float) * floats)))
        return rtomo_set_error(err, RTOMO_E_NOMEM,
                               "out of memory for the %d x %d phase retrieval "
                               "transform", ph->ny, ph->nx);
    fftwf_complex *spectrum = (fftwf_complex *)p->array;
    rtomo_fftw_planner_lock();
    p->forward = fftwf_plan_dft_r2c_2d(ph->ny, ph->nx, p->array, spectrum,
                                       FFTW_ESTIMATE);
    p->backward = fftwf_plan_dft_c2r_2d(ph->ny, ph->nx, spectrum, p->array,
                                        FFTW_ESTIMATE);
    rtomo_fftw_planner_unlock();
    if (!p->forward || !p->backward)
        return rtomo_set_error(err, RTOMO_E_BACKEND,
                               "FFTW could not plan a %d x %d real transform",
                               ph->ny, ph->nx);
    return RTOMO_OK;
}

/* The flat-field ratio clamped for the transform; the sample itself
 * (clamped) without a flat field. */
static float intensity(float raw, const float *dark, const float *flat,
                       size_t i)
{
    float ratio = raw;
    if (flat) {
        const float open = flat[i] - dark[i];
        ratio = open > 0.0f ? (raw - dark[i]) / open : RTOMO_PHASE_MIN_RATIO;
    }
    /* The negated test also catches a NaN from inf/inf. */
    if (!(ratio >= RTOMO_PHASE_MIN_RATIO))
        ratio = RTOMO_PHASE_MIN_RATIO;
    if (ratio > RTOMO_PHASE_MAX_RATIO)
        ratio = RTOMO_PHASE_MAX_RATIO;
    return ratio;
}

typedef struct phase_job {
    const rtomo_fbp *plan;
    float *array;
    const void *frame;
    rtomo_dtype dtype;
} phase_job;

/* Padded row y: the intensities of the nearest phase row, its ends
 * repeated to the left and right. */
static void pad_row_task(void *ctx, int y, int worker)
{
    (void)worker;
    const phase_job *job = ctx;
    const rtomo_fbp_phase_plan *ph = &job->plan->phase;
    const size_t width = (size_t)job->plan->geom.det_width;
    int r = y - ph->pad_top;
    r = r < 0 ? 0 : r >= ph->row_count ? ph->row_count - 1 : r;
    float *row = job->array + (size_t)y * 2 * (size_t)ph->nh;
    float *line = row + ph->pad_left;
    const size_t sample = rtomo_dtype_size(job->dtype);
    const char *src = (const char *)job->frame +
                      (size_t)(ph->row_first + r) * width * sample;
    rtomo_convert_to_float(src, job->dtype, width, line);
    const int normalise = job->plan->normalise;
    const float *dark = normalise ? ph->dark + (size_t)r * width : NULL;
    const float *flat = normalise ? ph->flat + (size_t)r * width : NULL;
    for (size_t i = 0; i < width; i++)
        line[i] = intensity(line[i], dark, flat, i);
    for (int x = 0; x < ph->pad_left; x++)
        row[x] = line[0];
    for (int x = ph->pad_left + (int)width; x < ph->nx; x++)
        row[x] = line[width - 1];
}

/* Spectrum row ky times the coefficients. */
static void multiply_row_task(void *ctx, int ky, int worker)
{
    (void)worker;
    const phase_job *job = ctx;
    const rtomo_fbp_phase_plan *ph = &job->plan->phase;
    fftwf_complex *c = (fftwf_complex *)job->array + (size_t)ky * ph->nh;
    for (int kx = 0; kx < ph->nh; kx++) {
        const float w = (float)rtomo_fbp_phase_coefficient(ph, ky, kx);
        c[kx][0] *= w;
        c[kx][1] *= w;
    }
}

void cpu_fbp_phase_frame(const rtomo_fbp *plan, cpu_fbp_state *st,
                         const void *frame, rtomo_dtype dtype)
{
    const rtomo_fbp_phase_plan *ph = &plan->phase;
    cpu_fbp_phase *p = st->phase;
    phase_job job = {plan, p->array, frame, dtype};
    cpu_pool_run(st->pool, ph->ny, pad_row_task, &job);
    fftwf_execute(p->forward);
    cpu_pool_run(st->pool, ph->ny, multiply_row_task, &job);
    fftwf_execute(p->backward);
}

void cpu_fbp_phase_row(const rtomo_fbp *plan, const cpu_fbp_state *st,
                       int kept_row, float *out)
{
    const rtomo_fbp_phase_plan *ph = &plan->phase;
    const float *in = st->phase->array +
                      (size_t)(ph->pad_top + ph->kept_offset + kept_row) * 2 *
                          (size_t)ph->nh +
                      ph->pad_left;
    for (int i = 0; i < plan->geom.det_width; i++) {
        const float v = in[i];
        out[i] = -logf(v >= RTOMO_PHASE_MIN_RATIO ? v : RTOMO_PHASE_MIN_RATIO);
    }
}
