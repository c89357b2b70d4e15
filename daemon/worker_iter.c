/*
 * worker_iter.c — reconstruction.method "sirt" and "cgls" on an engine
 * thread (PROTOCOL.md 3.3).
 *
 * While the scan is acquired, every projection's line integrals of the
 * worker's selected rows are kept here, beside the FBP plan that filters
 * the same frame (rtomo_fbp_line_integrals: its darks, flats and clamps,
 * so both methods see the same data).  Each is stored in its projection's
 * slot, with its angle and axis shift; the solve's geometry is the
 * projections that came, in the order of their angles.  The matched
 * projector shares work between neighbouring projections of one
 * direction (kernels/iterative/cuda_iter_kernels.cu), so projections in
 * arrival order (several connections interleave far-apart angles) made A
 * about twice as slow in rtomod as in the benchmark.  When every
 * projection came in the order of its angle and the batch's rows lie
 * side by side (the usual scan), the solve reads the rows' store and
 * iterates on their FBP slices in place: no gigabyte copies into fresh
 * pages (1.3-1.7 s for 64 rows of 2048 projections of 2048, run 64).
 *
 * The FBP slices are published first, as for any scan (a control loop
 * gets the fast answer), and those of the selected rows are copied here
 * as the solve's start.  Then the rows are solved a batch at a time with
 * the matched projector pair (kernels/iterative), the iterates published
 * on topic "slice" every publish_every iterations and the last one marked
 * final.  An abort stops the solve after the iteration in progress; an
 * ITERATION result after each iteration feeds the telemetry.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rtomod_log.h"
#include "worker_internal.h"

struct iter_state {
    rtomo_method_settings m;
    int *rows, n_rows;          /* detector rows kept, ascending (owned) */
    int batch;                  /* rows per solve */
    int width, n_proj, size;    /* frame width, projections announced, grid */
    float *lines;               /* n_rows x n_proj x width: row r's
                                   projection k at (r n_proj + k) width */
    double *angle, *shift;      /* per projection: radians, bins */
    unsigned char *got;         /* per projection: it came */
    int n_arrived;
    /* The solve's projections (solve_order): n_arrived slots sorted by
     * angle, their angles and shifts; whether that is every slot in turn. */
    int *order;
    double *order_angle, *order_shift;
    int in_place;
    float *images;              /* n_rows x size^2: the FBP slices kept */
    unsigned char *have_fbp;    /* per row: its FBP slice is in images */
    float *frame;               /* n_rows x width: one frame's integrals */
};

void iter_free(plan_state *s)
{
    iter_state *it = s->iter;
    if (!it)
        return;
    free(it->rows);
    free(it->lines);
    free(it->angle);
    free(it->shift);
    free(it->got);
    free(it->order);
    free(it->order_angle);
    free(it->order_shift);
    free(it->images);
    free(it->have_fbp);
    free(it->frame);
    free(it);
    s->iter = NULL;
}

int iter_begin(plan_state *s, rtomod_tomo_begin_job *b)
{
    if (b->method.method == RTOMO_METHOD_FBP || b->n_iter_rows == 0)
        return 0;
    const rtomo_fbp_geometry *g = rtomo_fbp_geometry_of(s->fbp);
    iter_state *it = calloc(1, sizeof *it);
    if (!it)
        return -1;
    s->iter = it;
    it->m = b->method;
    it->rows = b->iter_rows;            /* the plan owns them now */
    it->n_rows = b->n_iter_rows;
    b->iter_rows = NULL;
    it->batch = b->iter_batch > 0 ? b->iter_batch : 1;
    it->width = g->frame_width;
    it->n_proj = g->n_proj;
    it->size = g->slice_size;
    const size_t rows = (size_t)it->n_rows, plane = (size_t)it->size *
                                                   (size_t)it->size;
    /* calloc: pages of projections that never come are never touched. */
    it->lines = calloc(rows * (size_t)it->n_proj * (size_t)it->width,
                       sizeof(float));
    it->angle = malloc(sizeof(double) * (size_t)it->n_proj);
    it->shift = malloc(sizeof(double) * (size_t)it->n_proj);
    it->got = calloc((size_t)it->n_proj, 1);
    it->images = calloc(rows * plane, sizeof(float));
    it->have_fbp = calloc(rows, 1);
    it->frame = malloc(sizeof(float) * rows * (size_t)it->width);
    if (!it->lines || !it->angle || !it->shift || !it->got || !it->images ||
        !it->have_fbp || !it->frame) {
        iter_free(s);
        return -1;
    }
    return 0;
}

/* Position of detector row `row` among the kept rows, or -1. */
static int kept_position(const iter_state *it, int row)
{
    int lo = 0, hi = it->n_rows - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        if (it->rows[mid] == row)
            return mid;
        if (it->rows[mid] < row)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

int iter_solves_row(const plan_state *s, int row)
{
    /* No projection came (a scan ended by a timeout or a shutdown): its
     * FBP slices are all there will be. */
    return s->iter && s->iter->n_arrived > 0 &&
           kept_position(s->iter, row) >= 0;
}

/* Projection `index`'s angle (radians) and axis shift (bins) as the FBP
 * plan uses them: the frame's own where it gave them. */
static void projection_pose(const plan_state *s, const rtomod_job *job,
                            double *angle, double *shift)
{
    const rtomo_fbp_geometry *g = rtomo_fbp_geometry_of(s->fbp);
    const int64_t p = job->index;
    double step = g->angle_step != 0.0 ? g->angle_step : M_PI / g->n_proj;
    *angle = isfinite(job->angle) ? job->angle
             : g->angles ? g->angles[p] : g->angle_start + (double)p * step;
    *shift = isfinite(job->axis_shift) ? job->axis_shift
             : g->axis_shift ? g->axis_shift[p] : 0.0;
}

rtomo_status iter_frame(plan_state *s, const rtomod_job *job,
                        rtomo_error *err)
{
    iter_state *it = s->iter;
    if (!it)
        return RTOMO_OK;
    /* The scan refuses repeats and indices beyond n_proj; should one come
     * here, it is refused rather than written over another slot. */
    if (job->index < 0 || job->index >= it->n_proj || it->got[job->index])
        return rtomo_set_error(err, RTOMO_E_STATE, "projection %lld is "
                               "beyond the %d announced or came twice",
                               (long long)job->index, it->n_proj);
    rtomo_status st = rtomo_fbp_line_integrals(
        s->fbp, zmq_msg_data((zmq_msg_t *)&job->payload), job->dtype,
        it->rows, it->n_rows, it->frame, err);
    if (st != RTOMO_OK)
        return st;
    const size_t k = (size_t)job->index, w = (size_t)it->width;
    for (int r = 0; r < it->n_rows; r++)
        memcpy(it->lines + ((size_t)r * (size_t)it->n_proj + k) * w,
               it->frame + (size_t)r * w, w * sizeof(float));
    projection_pose(s, job, &it->angle[k], &it->shift[k]);
    it->got[k] = 1;
    it->n_arrived++;
    return RTOMO_OK;
}

void iter_keep_fbp(plan_state *s, int row, const float *slice,
                   const int roi[4])
{
    iter_state *it = s->iter;
    int r = it ? kept_position(it, row) : -1;
    /* The start needs the whole grid; with a ROI the solve starts at 0. */
    if (r < 0 || !it->m.warm_start || roi[0] != 0 || roi[1] != 0 ||
        roi[2] != it->size || roi[3] != it->size)
        return;
    const size_t plane = (size_t)it->size * (size_t)it->size;
    memcpy(it->images + (size_t)r * plane, slice, plane * sizeof(float));
    it->have_fbp[r] = 1;
}

/* --------------------------------------------------------------- solve ---- */

/* One solve: the rows of positions pos[0..n-1] of the reconstruct job. */
typedef struct solve_batch {
    rtomod_worker *w;
    plan_state *s;
    const rtomod_job *job;
    const int *pos;             /* positions in the job's rows */
    int n;
    double t0;                  /* when the solve began */
    double pair_updates;        /* updates of one A and one A^T */
    int aborted;
    double handed_seconds;      /* in on_iteration: iterates published */
} solve_batch;

static void post_iteration(const solve_batch *b, int k, double residual,
                           const rtomo_iter_result *end)
{
    rtomod_result *r = result_new(b->w, RTOMOD_RESULT_ITERATION,
                                  b->job->serial);
    if (!r)
        return;
    rtomod_iter_progress *p = &r->iter;
    const iter_state *it = b->s->iter;
    snprintf(p->method, sizeof p->method, "%s",
             rtomo_method_name(it->m.method));
    p->iteration = k;
    p->iterations = it->m.iterations;
    p->rows = b->n;
    p->residual = residual;
    double dt = now_seconds() - b->t0;
    p->iterations_per_s = dt > 0 ? k / dt : 0.0;
    p->gu_per_s = dt > 0 ? b->pair_updates * k / dt * 1e-9 : 0.0;
    if (end) {
        /* A and A^T do the same updates: half of the solve's each. */
        p->done = 1;
        p->project_gu_per_s = end->project_seconds > 0
            ? 0.5 * end->updates / end->project_seconds * 1e-9 : 0.0;
        p->backproject_gu_per_s = end->backproject_seconds > 0
            ? 0.5 * end->updates / end->backproject_seconds * 1e-9 : 0.0;
    }
    post(b->w, r);
}

/* Publish the n images (size^2 each) of a batch at iteration k, cropped
 * to the reconstruction's ROI, as slices of the job's set. */
static void publish_iterate(const solve_batch *b, const float *images, int k,
                            double residual, int final)
{
    const plan_state *s = b->s;
    const iter_state *it = s->iter;
    const rtomo_fbp_geometry *g = rtomo_fbp_geometry_of(s->fbp);
    const size_t pixels = (size_t)g->roi_width * (size_t)g->roi_height;
    const size_t plane = (size_t)it->size * (size_t)it->size;
    rtomod_buffer *buf = rtomod_buffer_new(pixels * sizeof(float) *
                                           (size_t)b->n);
    if (!buf) {
        post_error(b->w, b->job->serial, 0, "iterate_dropped", "out of "
                   "memory for an iterate's slices: not published");
        return;
    }
    float *out = (float *)buf->data;
    for (int i = 0; i < b->n; i++) {
        const float *img = images + plane * (size_t)i;
        float *dst = out + pixels * (size_t)i;
        for (int y = 0; y < g->roi_height; y++)
            memcpy(dst + (size_t)y * (size_t)g->roi_width,
                   img + (size_t)(g->roi_y + y) * (size_t)it->size + g->roi_x,
                   sizeof(float) * (size_t)g->roi_width);
        rtomo_image_header h;
        tomo_slice_header(s, &b->job->u.recon, b->pos[i], &h);
        snprintf(h.method, sizeof h.method, "%s",
                 rtomo_method_name(it->m.method));
        h.iteration = k;
        h.final = final;
        h.residual = residual;
        h.compute_ms = 1e3 * (now_seconds() - b->t0);
        post_image(b->w, b->job->serial, -1, b->job->t_input, &h, buf, dst,
                   pixels * sizeof(float));
    }
    rtomod_buffer_unref(buf);
    flush_results(b->w);
}

/* After each iteration: stop on an abort; publish every publish_every
 * (the final iterate is published once the solve returns). */
static int on_iteration(void *ctx, int k, double residual,
                        const float *images)
{
    solve_batch *b = ctx;
    const rtomo_method_settings *m = &b->s->iter->m;
    if (rtomod_worker_aborted(b->w, b->job->serial)) {
        b->aborted = 1;
        return 1;
    }
    const double t = now_seconds();
    post_iteration(b, k, residual, NULL);
    const int last = k == m->iterations ||
                     (m->tolerance > 0 && residual <= m->tolerance);
    if (images && !last)
        publish_iterate(b, images, k, residual, 0);
    else
        flush_results(b->w);
    b->handed_seconds += now_seconds() - t;
    return 0;
}

typedef struct slot_angle {
    double angle;
    int slot;
} slot_angle;

static int by_angle(const void *a, const void *b)
{
    const slot_angle *p = a, *q = b;
    if (p->angle != q->angle)
        return p->angle < q->angle ? -1 : 1;
    return (p->slot > q->slot) - (p->slot < q->slot);
}

/* The solve's projections: the slots that came, sorted by angle (ties by
 * slot), with their angles and shifts; in_place when that is every slot
 * in turn.  Returns 0, or -1 when out of memory. */
static int solve_order(iter_state *it)
{
    const size_t n = (size_t)it->n_arrived;
    free(it->order);
    free(it->order_angle);
    free(it->order_shift);
    slot_angle *sa = malloc(sizeof *sa * n);
    it->order = malloc(sizeof(int) * n);
    it->order_angle = malloc(sizeof(double) * n);
    it->order_shift = malloc(sizeof(double) * n);
    if (!sa || !it->order || !it->order_angle || !it->order_shift) {
        free(sa);
        return -1;
    }
    size_t m = 0;
    for (int k = 0; k < it->n_proj; k++)
        if (it->got[k])
            sa[m++] = (slot_angle){it->angle[k], k};
    qsort(sa, n, sizeof *sa, by_angle);
    it->in_place = n == (size_t)it->n_proj;
    for (size_t i = 0; i < n; i++) {
        it->order[i] = sa[i].slot;
        it->order_angle[i] = sa[i].angle;
        it->order_shift[i] = it->shift[sa[i].slot];
        it->in_place &= sa[i].slot == (int)i;
    }
    free(sa);
    return 0;
}

/* The solve's geometry: the projections that came, by angle. */
static rtomo_iter *create_solver(rtomod_worker *w, const plan_state *s,
                                 rtomo_error *err)
{
    const iter_state *it = s->iter;
    const rtomo_fbp_geometry *f = rtomo_fbp_geometry_of(s->fbp);
    rtomo_fbp_geometry g;
    rtomo_fbp_geometry_init(&g);
    g.det_width = it->width;
    g.det_height = f->det_height;
    g.n_proj = it->n_arrived;
    g.angles = it->order_angle;
    g.axis_shift = it->order_shift;
    g.axis = f->axis;
    g.slice_size = it->size;
    g.row_first = 0;
    g.row_count = it->batch < g.det_height ? it->batch : g.det_height;
    return rtomo_iter_create(&g, &w->options, err);
}

/* Where a solve of batch rows finds its data: the rows' sinograms and
 * start, in the rows' store when it can (file comment), else gathered
 * into scratch made on first need. */
typedef struct solve_data {
    int batch;
    int *rows;                  /* a batch's kept positions (owned) */
    float *sino, *x;            /* scratch (owned), or NULL */
} solve_data;

/* The sinograms (in the solve's order) and start of kept rows r[0..n-1]
 * into *sino and *x; *warm: every row's FBP slice is the start.  Returns
 * 0, or -1 when out of memory. */
static int batch_data(iter_state *it, solve_data *d, const int *r, int n,
                      const float **sino, float **x, int *warm)
{
    const size_t w = (size_t)it->width, store = (size_t)it->n_proj * w;
    const size_t line = (size_t)it->n_arrived * w;
    const size_t plane = (size_t)it->size * (size_t)it->size;
    int side_by_side = 1;
    *warm = it->m.warm_start;
    for (int i = 0; i < n; i++) {
        side_by_side &= r[i] == r[0] + i;
        *warm &= it->have_fbp[r[i]];
    }
    if (side_by_side) {
        /* The engine starts from zero unless warm: the slices there, FBP
         * or not, are only written over. */
        *x = it->images + plane * (size_t)r[0];
    } else {
        if (!d->x && !(d->x = malloc(sizeof(float) * plane *
                                      (size_t)d->batch)))
            return -1;
        for (int i = 0; *warm && i < n; i++)
            memcpy(d->x + plane * (size_t)i, it->images + plane * (size_t)r[i],
                   plane * sizeof(float));
        *x = d->x;
    }
    if (side_by_side && it->in_place) {
        *sino = it->lines + store * (size_t)r[0];
        return 0;
    }
    if (!d->sino && !(d->sino = malloc(sizeof(float) * line *
                                        (size_t)d->batch)))
        return -1;
    for (int i = 0; i < n; i++)
        for (int k = 0; k < it->n_arrived; k++)
            memcpy(d->sino + line * (size_t)i + w * (size_t)k,
                   it->lines + store * (size_t)r[i] + w * (size_t)it->order[k],
                   w * sizeof(float));
    *sino = d->sino;
    return 0;
}

/* Solve and publish the rows of positions pos[0..n-1] of the job.
 * Returns 0, 1 when aborted, -1 when the engine failed. */
static int solve_rows(rtomod_worker *w, plan_state *s, const rtomod_job *job,
                      rtomo_iter *solver, const int *pos, int n,
                      solve_data *d)
{
    iter_state *it = s->iter;
    const rtomod_tomo_reconstruct_job *rc = &job->u.recon;
    const size_t plane = (size_t)it->size * (size_t)it->size;
    const double t_gather = now_seconds();
    int warm;
    for (int i = 0; i < n; i++)
        d->rows[i] = kept_position(it, rc->rows[pos[i]]);
    const float *sino;
    float *x;
    if (batch_data(it, d, d->rows, n, &sino, &x, &warm) != 0) {
        rtomo_error err;
        rtomo_set_error(&err, RTOMO_E_NOMEM, "out of memory for the "
                        "iterative solve");
        engine_failed(w, s, job->serial, "iterative reconstruction", &err);
        return -1;
    }
    solve_batch b = {w, s, job, pos, n, now_seconds(),
                     2.0 * n * (double)it->n_arrived * (double)plane, 0, 0.0};
    rtomo_iter_options o;
    rtomo_iter_options_init(&o);
    o.method = it->m.method == RTOMO_METHOD_CGLS ? RTOMO_ITER_CGLS
                                                 : RTOMO_ITER_SIRT;
    o.iterations = it->m.iterations;
    o.tolerance = it->m.tolerance;
    o.nonnegative = it->m.nonnegative;
    o.progress = on_iteration;
    o.ctx = &b;
    o.images_every = it->m.publish_every;
    rtomo_iter_result res;
    rtomo_error err;
    rtomo_status st = rtomo_iter_solve(solver, sino, n, x, warm, &o, &res,
                                       &err);
    if (st != RTOMO_OK) {
        engine_failed(w, s, job->serial, "iterative reconstruction", &err);
        return -1;
    }
    if (b.aborted)
        return 1;
    const double t_final = now_seconds();
    post_iteration(&b, res.iterations, res.residual, &res);
    publish_iterate(&b, x, res.iterations, res.residual, 1);
    /* Where a solve's time goes: the engine's (A, A^T, the rest: vector
     * ops, transfers, the iterates' downloads) and the worker's (gathering
     * the rows' line integrals and start, handing iterates out). */
    log_debug("worker %d: scan %s: %s of %d rows, %d iterations, residual "
              "%.3g, %.2f s: gather %.2f s, solve %.2f s (A %.2f s, A^T "
              "%.2f s, iterates handed out %.2f s), final iterate %.2f s",
              w->index, s->scan, rtomo_method_name(it->m.method), n,
              res.iterations, res.residual, now_seconds() - t_gather,
              b.t0 - t_gather, res.seconds, res.project_seconds,
              res.backproject_seconds, b.handed_seconds,
              now_seconds() - t_final);
    return 0;
}

/* The job's rows that are kept here, solved `batch` at a time after
 * their FBP slices went out (worker_tomo.c). */
void iter_reconstruct(rtomod_worker *w, plan_state *s, const rtomod_job *job)
{
    iter_state *it = s->iter;
    const rtomod_tomo_reconstruct_job *rc = &job->u.recon;
    if (!it || it->n_arrived == 0)
        return;
    int n_pos = 0;
    for (int i = 0; i < rc->n_rows; i++)
        n_pos += kept_position(it, rc->rows[i]) >= 0;
    if (n_pos == 0)
        return;
    /* Their FBP slices said a final image follows: from here on it does,
     * or the scan fails with the reason. */
    int *pos = malloc(sizeof(int) * (size_t)n_pos);
    n_pos = 0;
    for (int i = 0; pos && i < rc->n_rows; i++)
        if (kept_position(it, rc->rows[i]) >= 0)
            pos[n_pos++] = i;
    const int batch = it->batch;
    solve_data d = {batch, malloc(sizeof(int) * (size_t)batch), NULL, NULL};
    rtomo_error err;
    const double t_create = now_seconds();
    const int ordered = pos && d.rows && solve_order(it) == 0;
    rtomo_iter *solver = ordered ? create_solver(w, s, &err) : NULL;
    log_debug("worker %d: scan %s: solver for %d rows a batch made in "
              "%.2f s (%s)", w->index, s->scan, batch,
              now_seconds() - t_create, it->in_place
              ? "the rows' store in place" : "projections gathered by angle");
    if (!ordered)
        rtomo_set_error(&err, RTOMO_E_NOMEM, "out of memory for the "
                        "iterative solve");
    if (!solver)
        engine_failed(w, s, job->serial, "iterative reconstruction", &err);
    for (int first = 0; solver && first < n_pos; first += batch) {
        int n = n_pos - first < batch ? n_pos - first : batch;
        if (rtomod_worker_aborted(w, job->serial))
            break;
        if (solve_rows(w, s, job, solver, pos + first, n, &d) != 0)
            break;
    }
    rtomo_iter_destroy(solver);
    free(d.rows);
    free(d.x);
    free(d.sino);
    free(pos);
}
