/*
 * test_daemon_budget_cone.c — rtomod's claim for a cone-beam scan with an
 * iterative solve (daemon/budget_cone.c) and its admission against the
 * per-GPU budgets (daemon/budget.c), without a daemon or a GPU: the
 * functions rtomod calls, on the CPU.
 *   - per GPU, for 1, 2 and 4 GPUs: worker 0's GPU holds the FDK plan,
 *     the sinograms (5: the solver's 4 and the pair's weighted one) and
 *     its share of the 4 image vectors, each other GPU its share and no
 *     sinogram; a share is the slab's part of the volumes plus a
 *     detector-row window no larger than the whole detector; GPUs beyond
 *     the solve's claim nothing; the host claim does not change with the
 *     number of GPUs;
 *   - one GPU claims what it claimed before the split (the FDK plan, 5
 *     sinograms, 4 volumes), plus the pair's small tables; the CPU
 *     backend claims host memory only, as before;
 *   - a solve too large for one GPU's budget is refused there
 *     (over_budget naming worker 0 and limits.device_mb) and admitted on
 *     two GPUs of the same budget; one too large for both is refused;
 *     another scan's claim on GPU 1 makes the split refused naming
 *     worker 1;
 *   - a solve too large for its GPU's budget beside the FDK plan streams
 *     (its vectors in host memory, the GPU's share within the budget)
 *     and is admitted; with no room left even for that the resident
 *     claim stands and is refused.
 */
#include "config.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_run.h"
#include "rtomod_budget.h"

#define MB ((size_t)1 << 20)

/* PROTOCOL.md 3.13's worked example with 400 projections: 1024^2 pixels
 * of 0.2 mm, magnification 5, 1024^3 voxels of 0.04 mm: sinograms of
 * 1.68 GB, volumes of 4.29 GB. */
static rtomo_cone_geometry big_solve(void)
{
    rtomo_cone_geometry g;
    rtomo_cone_geometry_init(&g);
    g.sad = 100.0;
    g.sdd = 500.0;
    g.det_u = g.det_v = 1024;
    g.pitch_u = g.pitch_v = 0.2;
    g.n_proj = 400;
    g.nx = g.ny = g.nz = 1024;
    g.voxel = 0.04;
    g.roi_nx = g.roi_ny = g.roi_nz = 1024;
    return g;
}

static const size_t OUT_BYTES = 64 * MB;

/* The pair's small tables on its first GPU: l_theta (a frame), the
 * angles' cosines and sines, the dots' partial sums. */
static size_t owner_tables(const rtomo_cone_geometry *g)
{
    return (size_t)g->det_u * (size_t)g->det_v * sizeof(float) +
           2 * (size_t)g->n_proj * sizeof(float) + 256 * sizeof(double);
}

START_TEST(claims_per_gpu)
{
    const rtomo_cone_geometry g = big_solve();
    const size_t sino = (size_t)1024 * 1024 * 400 * sizeof(float);
    const size_t volume = (size_t)1024 * 1024 * 1024 * sizeof(float);
    size_t fdk_host, fdk_device;
    rtomod_budget_cone_part(&g, 1, OUT_BYTES, &fdk_host, &fdk_device);
    /* The host: the FDK plan's, the line integrals, the staging of the
     * larger of a sinogram and a volume, the solve's volume and an
     * iterate (as before the split). */
    const size_t host = fdk_host + sino + volume + 2 * volume;
    rtomod_budget_claim c;
    rtomod_budget_cone_solve(&g, 1, OUT_BYTES, NULL, &c, NULL);
    ck_assert_uint_eq(c.host, host);
    ck_assert_uint_eq(c.device[0], fdk_device + 5 * sino + 4 * volume +
                                       owner_tables(&g));
    ck_assert_uint_eq(c.device[1], 0);
    printf("1 GPU: %.0f MB\n", (double)c.device[0] / MB);
    const int counts[] = {2, 4};
    for (int k = 0; k < 2; k++) {
        const int n = counts[k];
        const size_t share = 4 * volume / (size_t)n;  /* 1024 % n == 0 */
        rtomod_budget_cone_solve(&g, n, OUT_BYTES, NULL, &c, NULL);
        ck_assert_uint_eq(c.host, host);
        printf("%d GPUs:", n);
        for (int i = 0; i < n; i++) {
            /* What is left beside the volumes' share: windows (and on
             * GPU 0 the landing), each at most the whole detector. */
            const size_t fixed = i == 0 ? fdk_device + 5 * sino + share +
                                              owner_tables(&g)
                                        : share;
            ck_assert_uint_gt(c.device[i], fixed);
            ck_assert_uint_le(c.device[i] - fixed, (i == 0 ? 2 : 1) * sino +
                                                       MB);
            printf(" %.0f MB", (double)c.device[i] / MB);
        }
        printf("\n");
        for (int i = n; i < RTOMO_MAX_DEVICES; i++)
            ck_assert_uint_eq(c.device[i], 0);
    }
    /* The CPU backend: host memory only, the solver's vectors there, the
     * pair's amplitude-weighted sinogram and its l_theta (a frame). */
    size_t cpu_host, cpu_device;
    const size_t frame = (size_t)1024 * 1024 * sizeof(float);
    rtomod_budget_cone_part(&g, 0, OUT_BYTES, &cpu_host, &cpu_device);
    rtomod_budget_cone_solve(&g, 0, OUT_BYTES, NULL, &c, NULL);
    ck_assert_uint_eq(c.host, cpu_host + sino + volume + 2 * volume +
                                  5 * sino + 4 * volume + frame);
    for (int i = 0; i < RTOMO_MAX_DEVICES; i++)
        ck_assert_uint_eq(c.device[i], 0);
}
END_TEST

/* A budget of n_gpus GPUs of device_mb each and a large host budget. */
static void make_budget(rtomod_budget *b, int n_gpus, double device_mb)
{
    rtomod_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.limits.host_mb = 200000;
    cfg.limits.device_mb = device_mb;
    cfg.limits.early_mb = 64;
    cfg.queue.mb = 64;
    size_t memory[RTOMO_MAX_DEVICES];
    for (int i = 0; i < RTOMO_MAX_DEVICES; i++)
        memory[i] = (size_t)80 << 30;
    char error[256];
    ck_assert_msg(rtomod_budget_init(b, &cfg, memory, n_gpus, n_gpus, error,
                                     sizeof error) == 0, "%s", error);
}

START_TEST(admitted_only_when_split)
{
    const rtomo_cone_geometry g = big_solve();
    rtomod_budget_claim one, two;
    rtomod_budget_cone_solve(&g, 1, OUT_BYTES, NULL, &one, NULL);
    rtomod_budget_cone_solve(&g, 2, OUT_BYTES, NULL, &two, NULL);
    /* A budget per GPU between the split's larger share and the one
     * GPU's claim. */
    const size_t larger = two.device[0] > two.device[1] ? two.device[0]
                                                        : two.device[1];
    ck_assert_uint_lt(larger + 1024 * MB, one.device[0]);
    const double limit_mb = (double)(larger / MB + 512);
    printf("one GPU %.0f MB, two GPUs %.0f + %.0f MB, budget %.0f MB per "
           "GPU\n", (double)one.device[0] / MB, (double)two.device[0] / MB,
           (double)two.device[1] / MB, limit_mb);
    rtomod_budget b;
    char why[256];
    /* One GPU: refused, naming the GPU and the setting. */
    make_budget(&b, 1, limit_mb);
    ck_assert_int_eq(rtomod_budget_take(&b, &one, NULL, why, sizeof why), -1);
    printf("one GPU: %s\n", why);
    ck_assert_ptr_nonnull(strstr(why, "on the GPU of worker 0"));
    ck_assert_ptr_nonnull(strstr(why, "limits.device_mb"));
    ck_assert_uint_eq(b.device_used[0], 0);
    /* Two GPUs of the same budget: admitted, each GPU its share. */
    make_budget(&b, 2, limit_mb);
    ck_assert_int_eq(rtomod_budget_take(&b, &two, NULL, why, sizeof why), 0);
    ck_assert_uint_eq(b.device_used[0], two.device[0]);
    ck_assert_uint_eq(b.device_used[1], two.device[1]);
    rtomod_budget_release(&b, &two);
    ck_assert_uint_eq(b.device_used[0] + b.device_used[1], 0);
    /* Another scan holding most of GPU 1: refused, naming worker 1. */
    rtomod_budget_cone_solve(&g, 2, OUT_BYTES, NULL, &two, NULL);
    rtomod_budget_claim other = {0};
    other.device[1] = b.device_limit[1] - two.device[1] / 2;
    ck_assert_int_eq(rtomod_budget_take(&b, &other, NULL, why, sizeof why),
                     0);
    ck_assert_int_eq(rtomod_budget_take(&b, &two, NULL, why, sizeof why), -1);
    printf("GPU 1 held: %s\n", why);
    ck_assert_ptr_nonnull(strstr(why, "on the GPU of worker 1"));
    /* ... and admitted once that scan is leaving. */
    ck_assert_int_eq(rtomod_budget_take(&b, &two, &other, why, sizeof why),
                     0);
    /* Too large for two GPUs as well: refused. */
    make_budget(&b, 2, (double)(larger / MB / 2));
    ck_assert_int_eq(rtomod_budget_take(&b, &two, NULL, why, sizeof why), -1);
    printf("too large for both: %s\n", why);
    ck_assert_ptr_nonnull(strstr(why, "limits.device_mb"));
}
END_TEST

/* A solve too large for the GPU's budget beside its FDK plan streams:
 * its vectors claimed in host memory, its GPU share within what the FDK
 * plan leaves, the engine told that budget; admitted where the resident
 * claim is refused.  A budget that leaves no room for even a streamed
 * slab keeps the resident claim, which is refused; one that holds the
 * resident solve keeps it resident, the engine told its largest share. */
START_TEST(streamed_when_too_large)
{
    const rtomo_cone_geometry g = big_solve();
    const size_t sino = (size_t)1024 * 1024 * 400 * sizeof(float);
    const size_t volume = (size_t)1024 * 1024 * 1024 * sizeof(float);
    size_t fdk_host, fdk_device;
    rtomod_budget_cone_part(&g, 1, OUT_BYTES, &fdk_host, &fdk_device);
    rtomod_budget_claim resident, c;
    rtomod_cone_solve_plan plan;
    rtomod_budget_cone_solve(&g, 1, OUT_BYTES, NULL, &resident, &plan);
    ck_assert_int_eq(plan.stream_slices, 0);
    /* A limit of the FDK plan and 4 GiB: the solve's 28 GB cannot be
     * resident. */
    size_t limit[RTOMO_MAX_DEVICES] = {fdk_device + ((size_t)4 << 30)};
    rtomod_budget_cone_solve(&g, 1, OUT_BYTES, limit, &c, &plan);
    printf("limit %.0f MB: streamed in slabs of %d slices, GPU %.0f MB, "
           "host %.0f MB (resident: GPU %.0f MB, host %.0f MB)\n",
           (double)limit[0] / MB, plan.stream_slices,
           (double)c.device[0] / MB, (double)c.host / MB,
           (double)resident.device[0] / MB, (double)resident.host / MB);
    ck_assert_int_gt(plan.stream_slices, 0);
    ck_assert_uint_eq(plan.device_budget, limit[0] - fdk_device);
    ck_assert_uint_le(c.device[0], limit[0]);
    ck_assert_uint_ge(c.host, resident.host + 4 * sino + 4 * volume);
    rtomod_budget b;
    char why[256];
    make_budget(&b, 1, (double)limit[0] / MB);
    ck_assert_int_eq(rtomod_budget_take(&b, &resident, NULL, why, sizeof why),
                     -1);
    ck_assert_int_eq(rtomod_budget_take(&b, &c, NULL, why, sizeof why), 0);
    /* No room beside the FDK plan: the resident claim, refused. */
    limit[0] = fdk_device + 4096;
    rtomod_budget_cone_solve(&g, 1, OUT_BYTES, limit, &c, &plan);
    ck_assert_int_eq(plan.stream_slices, 0);
    ck_assert_uint_eq(c.device[0], resident.device[0]);
    /* Room for the resident solve: resident, the engine told its share. */
    limit[0] = resident.device[0] + MB;
    rtomod_budget_cone_solve(&g, 1, OUT_BYTES, limit, &c, &plan);
    ck_assert_int_eq(plan.stream_slices, 0);
    ck_assert_uint_eq(plan.device_budget, resident.device[0] - fdk_device);
    ck_assert_uint_eq(c.device[0], resident.device[0]);
    ck_assert_uint_eq(c.host, resident.host);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("daemon_budget_cone");
    TCase *tc = tcase_create("solve");
    tcase_add_test(tc, claims_per_gpu);
    tcase_add_test(tc, admitted_only_when_split);
    tcase_add_test(tc, streamed_when_too_large);
    suite_add_tcase(s, tc);
    return rtomo_check_run(s);
}
