/*
 * test_cone_support.c — helpers shared by the cone-beam tests (see the
 * header).
 */
#include "config.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "test_cone_support.h"
#include "test_util.h"

rtomo_cone_geometry cone_test_geometry(void)
{
    rtomo_cone_geometry g;
    rtomo_cone_geometry_init(&g);
    g.sad = 200.0;
    g.sdd = 400.0;
    g.det_u = 80;
    g.det_v = 64;
    g.pitch_u = g.pitch_v = 2.0;
    g.n_proj = 180;
    g.nx = g.ny = g.nz = 64;
    g.voxel = 1.0;
    return g;
}

rtomo_cone_geometry cone_test_phantom_geometry(void)
{
    rtomo_cone_geometry g = cone_test_geometry();
    g.nx = g.ny = 40;
    g.nz = 37;
    g.voxel = 1.5;
    g.n_proj = 24;
    return g;
}

rtomo_cone_geometry cone_test_bench_geometry(int n, int n_proj, int det_u,
                                             int det_v)
{
    rtomo_cone_geometry g = cone_test_geometry();
    g.nx = g.ny = g.nz = n;
    g.det_u = det_u;
    g.det_v = det_v;
    g.n_proj = n_proj;
    g.sad = 4.0 * det_u;
    g.sdd = 8.0 * det_u;
    g.voxel = 0.8 * det_u / n;
    return g;
}

rtomo_cone_geometry cone_test_bench_env(const char *var, int *n, int *n_proj,
                                        int *det_u, int *det_v)
{
    const char *env = getenv(var);
    ck_assert_msg(env, "%s is not set", var);
    ck_assert_msg(sscanf(env, "%d,%d,%d,%d", n, n_proj, det_u, det_v) == 4,
                  "%s=%s: expected N,NP,DU,DV", var, env);
    return cone_test_bench_geometry(*n, *n_proj, *det_u, *det_v);
}

int cone_test_spheres(rtomo_ellipsoid *e)
{
    return rtomo_cone_sphere_phantom(24.0, 0.02, e,
                                     RTOMO_PHANTOM_MAX_ELLIPSOIDS);
}

float *cone_test_project(const rtomo_cone_geometry *g,
                         const rtomo_ellipsoid *e, int n)
{
    const size_t frame = (size_t)g->det_u * (size_t)g->det_v;
    float *p = malloc(sizeof(float) * frame * (size_t)g->n_proj);
    ck_assert_ptr_nonnull(p);
    for (int i = 0; i < g->n_proj; i++)
        rtomo_cone_project_ellipsoids(g, e, n, i, p + (size_t)i * frame);
    return p;
}

static size_t roi_size(const rtomo_cone_geometry *g, int axis)
{
    const int first[3] = {g->roi_x, g->roi_y, g->roi_z};
    const int size[3] = {g->roi_nx, g->roi_ny, g->roi_nz};
    const int edge[3] = {g->nx, g->ny, g->nz};
    return (size_t)(size[axis] ? size[axis] : edge[axis] - first[axis]);
}

float *cone_test_truth(const rtomo_cone_geometry *g, const rtomo_ellipsoid *e,
                       int n)
{
    float *t = malloc(sizeof(float) * roi_size(g, 0) * roi_size(g, 1) *
                      roi_size(g, 2));
    ck_assert_ptr_nonnull(t);
    rtomo_cone_voxelise(g, e, n, 3, t);
    return t;
}

rtomo_cone *cone_test_create(const rtomo_cone_geometry *g,
                             rtomo_backend backend, rtomo_cone_kernel kernel)
{
    rtomo_engine_options opt;
    if (backend == RTOMO_BACKEND_CPU) {
        opt = test_cpu_options(0);
    } else {
        rtomo_engine_options_init(&opt);
        opt.backend = backend;
    }
    rtomo_error err;
    rtomo_cone *c = rtomo_cone_create(g, &opt, kernel, &err);
    ck_assert_msg(c != NULL, "rtomo_cone_create: %s", err.message);
    return c;
}

float *cone_test_fdk(rtomo_cone *c, const float *projections)
{
    float *vol = malloc(sizeof(float) * rtomo_cone_volume_size(c));
    ck_assert_ptr_nonnull(vol);
    test_poison(vol, rtomo_cone_volume_size(c));
    rtomo_error err;
    ck_assert_msg(rtomo_cone_reconstruct(c, projections, vol, &err) ==
                  RTOMO_OK, "rtomo_cone_reconstruct: %s", err.message);
    return vol;
}

double cone_test_slab_error(const rtomo_cone_geometry *g, const float *vol,
                            const float *truth, int k_lo, int k_hi, double r)
{
    const size_t nx = roi_size(g, 0), ny = roi_size(g, 1);
    double diff = 0.0, ref = 0.0;
    for (int k = k_lo; k <= k_hi; k++)
        for (size_t j = 0; j < ny; j++) {
            const double y = (g->roi_y + (double)j - 0.5 * (g->ny - 1)) *
                             g->voxel;
            for (size_t i = 0; i < nx; i++) {
                const double x = (g->roi_x + (double)i - 0.5 * (g->nx - 1)) *
                                 g->voxel;
                if (x * x + y * y > r * r)
                    continue;
                const size_t at = ((size_t)k * ny + j) * nx + i;
                if (!isfinite(vol[at]))
                    return INFINITY;
                const double d = (double)vol[at] - truth[at];
                diff += d * d;
                ref += (double)truth[at] * truth[at];
            }
        }
    return ref > 0.0 ? sqrt(diff / ref) : sqrt(diff);
}

int cone_test_mid_slice(const rtomo_cone_geometry *g)
{
    /* z of ROI slice k: (roi_z + k - (nz - 1)/2) voxel. */
    return (int)floor(0.5 * (g->nz - 1) - g->roi_z + 0.5);
}

rtomo_cone_geometry cone_test_pair_case(int i)
{
    rtomo_cone_geometry g = cone_test_geometry();
    g.nx = g.ny = g.nz = 32;
    g.det_u = 40;
    g.det_v = 36;
    g.n_proj = 24;
    g.voxel = 1.5;
    switch (i) {
    case 1:
        g.nx = 33;
        g.ny = 29;
        g.nz = 31;
        g.roi_x = 4;
        g.roi_nx = 25;
        g.roi_y = 2;
        g.roi_z = 5;
        g.roi_nz = 21;
        g.det_u = 41;
        g.det_v = 37;
        g.n_proj = 17;
        break;
    case 2:
        g.det_u = 30;
        g.offset_u = 20.0;
        break;
    case 3:
        g.sad = 100.0;
        g.sdd = 200.0;
        g.offset_v = 5.0;
        g.n_proj = 30;
        g.angle_step = -7.0 * M_PI / 180.0;
        break;
    }
    return g;
}

size_t cone_test_roi_voxels(const rtomo_cone_geometry *g)
{
    return roi_size(g, 0) * roi_size(g, 1) * roi_size(g, 2);
}

void cone_test_same_solves(rtomo_iter *ref, rtomo_iter *other,
                           const float *proj, size_t nv, double bound,
                           const char *what)
{
    const rtomo_iter_method methods[2] = {RTOMO_ITER_SIRT, RTOMO_ITER_CGLS};
    const int iterations[2] = {10, 6};
    float *x1 = malloc(sizeof(float) * nv), *x2 = malloc(sizeof(float) * nv);
    ck_assert(x1 && x2);
    for (int m = 0; m < 2; m++) {
        rtomo_iter_options o;
        rtomo_iter_options_init(&o);
        o.method = methods[m];
        o.iterations = iterations[m];
        o.nonnegative = m == 0;
        const int warm = m == 0;
        for (size_t i = 0; i < nv; i++)
            x1[i] = x2[i] = warm ? 0.01f : 0.0f;
        rtomo_iter_result r1, r2;
        rtomo_error err;
        ck_assert_msg(rtomo_iter_solve(ref, proj, 1, x1, warm, &o, &r1,
                                       &err) == RTOMO_OK, "%s", err.message);
        ck_assert_msg(rtomo_iter_solve(other, proj, 1, x2, warm, &o, &r2,
                                       &err) == RTOMO_OK, "%s", err.message);
        const double d = test_rel_l2(x2, x1, nv);
        fprintf(stderr, "%s %s (%d iterations): relative L2 %.2e against "
                "the reference plan (bound %.0e), residual %.6e against "
                "%.6e\n", what, rtomo_iter_method_name(methods[m]),
                iterations[m], d, bound, r2.residual, r1.residual);
        ck_assert_double_le(d, bound);
        ck_assert_double_le(fabs(r2.residual - r1.residual),
                            bound * r1.residual);
        ck_assert_double_lt(r2.residual, 1.0);
    }
    free(x1);
    free(x2);
}

float *cone_test_phantom_scan(rtomo_cone_geometry *g, float **truth)
{
    *g = cone_test_phantom_geometry();
    rtomo_ellipsoid e[RTOMO_PHANTOM_MAX_ELLIPSOIDS];
    const int n = cone_test_spheres(e);
    if (truth)
        *truth = cone_test_truth(g, e, n);
    return cone_test_project(g, e, n);
}
