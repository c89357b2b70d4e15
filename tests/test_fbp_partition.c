/*
 * test_fbp_partition.c — the deal of kept rows to the devices of a
 * multi-device FBP plan (kernels/fbp/fbp_partition.c), on the CPU: every row
 * has exactly one owner and a dense local index, groups of 4 rows stay
 * together, runs are the longest single copies, a slab of consecutive rows
 * is shared by all parts within two groups (the contiguous split this
 * replaces put a whole slab on one device), and strided requests are
 * spread too.
 */
#include "config.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_run.h"
#include "fbp_partition.h"
#include "rtomo_sim.h"
#include "test_util.h"

#define GROUP FBP_PARTITION_GROUP
#define MAX_PARTS 16
#define SLAB_PLAN_ROWS 2048

/* Rows of each part among rows[0..n-1]. */
static void count_parts(const fbp_partition *p, const int *rows, int n,
                        int *counts)
{
    memset(counts, 0, sizeof(int) * (size_t)p->parts);
    for (int i = 0; i < n; i++)
        counts[fbp_partition_owner(p, rows[i])]++;
}

static void spread(const int *counts, int parts, int *lo, int *hi)
{
    *lo = *hi = counts[0];
    for (int i = 1; i < parts; i++) {
        if (counts[i] < *lo) *lo = counts[i];
        if (counts[i] > *hi) *hi = counts[i];
    }
}

/* Every property of one deal that does not depend on a request. */
static void check_deal(int rows, int parts)
{
    const fbp_partition p = fbp_partition_make(rows, parts);
    const int groups = (rows + GROUP - 1) / GROUP;
    ck_assert_int_eq(p.rows, rows);
    ck_assert_int_eq(p.parts, parts < groups ? parts : groups);
    ck_assert_int_eq(fbp_partition_max_parts(rows), groups);
    int total = 0, count[MAX_PARTS];
    for (int i = 0; i < p.parts; i++) {
        count[i] = fbp_partition_count(&p, i);
        ck_assert_msg(count[i] >= 1, "%d rows, %d parts: part %d owns nothing",
                      rows, p.parts, i);
        total += count[i];
    }
    ck_assert_int_eq(total, rows);
    unsigned char *seen = calloc((size_t)rows, 1);
    ck_assert_ptr_nonnull(seen);
    int first_local[MAX_PARTS];
    for (int i = 0; i < p.parts; i++)
        first_local[i] = i == 0 ? 0 : first_local[i - 1] + count[i - 1];
    for (int r = 0; r < rows; r++) {
        const int o = fbp_partition_owner(&p, r), l = fbp_partition_local(&p, r);
        ck_assert_msg(o >= 0 && o < p.parts && l >= 0 && l < count[o],
                      "%d rows, %d parts: row %d -> part %d local %d (count %d)",
                      rows, p.parts, r, o, l, o >= 0 && o < p.parts ? count[o] : -1);
        ck_assert_int_eq(fbp_partition_row(&p, o, l), r);
        /* (part, local) pairs are distinct: each row maps to its own slot */
        const int slot = first_local[o] + l;
        ck_assert_msg(!seen[slot], "%d rows, %d parts: two rows at part %d local %d",
                      rows, p.parts, o, l);
        seen[slot] = 1;
        const int head = r - r % GROUP;
        ck_assert_int_eq(fbp_partition_owner(&p, head), o);
        ck_assert_int_eq(fbp_partition_local(&p, head) + r % GROUP, l);
    }
    free(seen);
}

START_TEST(every_row_has_one_owner_and_place)
{
    for (int rows = 1; rows <= 150; rows++)
        for (int parts = 1; parts <= 9; parts++)
            check_deal(rows, parts);
    uint64_t seed = 0x9a47ULL;
    for (int k = 0; k < 20; k++)
        check_deal(test_rand_int(&seed, 151, 20000),
                   test_rand_int(&seed, 1, MAX_PARTS));
}
END_TEST

START_TEST(runs_are_the_longest_single_copies)
{
    uint64_t seed = 0x4f2aULL;
    for (int k = 0; k < 4000; k++) {
        const fbp_partition p = fbp_partition_make(test_rand_int(&seed, 1, 700),
                                                   test_rand_int(&seed, 1, 6));
        const int row = test_rand_int(&seed, 0, p.rows - 1);
        const int end = test_rand_int(&seed, row + 1, p.rows);
        const int n = fbp_partition_run(&p, row, end);
        ck_assert_msg(n >= 1 && row + n <= end, "run of %d from %d to %d", n, row, end);
        const int o = fbp_partition_owner(&p, row), l = fbp_partition_local(&p, row);
        for (int i = 1; i < n; i++) {
            ck_assert_int_eq(fbp_partition_owner(&p, row + i), o);
            ck_assert_int_eq(fbp_partition_local(&p, row + i), l + i);
        }
        if (row + n < end)
            ck_assert_msg(fbp_partition_owner(&p, row + n) != o ||
                          fbp_partition_local(&p, row + n) != l + n,
                          "run from %d stops at %d without need", row, row + n);
        if (p.parts == 1)
            ck_assert_int_eq(n, end - row);
    }
}
END_TEST

/* Random slabs of a 2048-row plan: every part's share lies within two
 * groups of every other's, and a slab holding two blocks of groups gives
 * every part at least a group.  Slabs of 256 at multiples of 256 (how
 * bench-fbp's e2e asks) split exactly on 2 and 4 parts. */
START_TEST(slabs_are_shared_by_all_parts)
{
    uint64_t seed = 0x51abULL;
    int *rows = malloc(sizeof(int) * SLAB_PLAN_ROWS), counts[MAX_PARTS];
    ck_assert_ptr_nonnull(rows);
    for (int parts = 2; parts <= 8; parts++) {
        const fbp_partition p = fbp_partition_make(SLAB_PLAN_ROWS, parts);
        int worst = 0;
        for (int k = 0; k < 3000; k++) {
            const int length = test_rand_int(&seed, 1, 512);
            const int first = test_rand_int(&seed, 0, SLAB_PLAN_ROWS - length);
            for (int i = 0; i < length; i++)
                rows[i] = first + i;
            count_parts(&p, rows, length, counts);
            int lo, hi;
            spread(counts, parts, &lo, &hi);
            if (hi - lo > worst)
                worst = hi - lo;
            ck_assert_msg(hi - lo <= 2 * GROUP, "%d parts, rows [%d, %d): "
                          "shares from %d to %d", parts, first, first + length, lo, hi);
            if (length >= 2 * parts * GROUP)
                ck_assert_msg(lo >= GROUP, "%d parts, rows [%d, %d): a part "
                              "gets %d rows", parts, first, first + length, lo);
        }
        printf("slabs on %d parts: shares differ by at most %d rows\n", parts, worst);
        if (parts == 2 || parts == 4)
            for (int first = 0; first < SLAB_PLAN_ROWS; first += 256) {
                for (int i = 0; i < 256; i++)
                    rows[i] = first + i;
                count_parts(&p, rows, 256, counts);
                for (int i = 0; i < parts; i++)
                    ck_assert_int_eq(counts[i], 256 / parts);
            }
    }
    free(rows);
}
END_TEST

/* Every row of a given step (2..16) from every offset, on 2..4 parts: no
 * part above 1.5 times its share.  (Interleaving without the rotation
 * would give one part everything for steps that are multiples of
 * 4 x parts.) */
START_TEST(strided_requests_are_spread)
{
    int *rows = malloc(sizeof(int) * SLAB_PLAN_ROWS), counts[MAX_PARTS];
    ck_assert_ptr_nonnull(rows);
    for (int parts = 2; parts <= 4; parts++) {
        const fbp_partition p = fbp_partition_make(SLAB_PLAN_ROWS, parts);
        double worst = 0.0;
        for (int step = 2; step <= 16; step++)
            for (int first = 0; first < step; first++) {
                int n = 0;
                for (int r = first; r < SLAB_PLAN_ROWS; r += step)
                    rows[n++] = r;
                count_parts(&p, rows, n, counts);
                int lo, hi;
                spread(counts, parts, &lo, &hi);
                const double ratio = hi / ((double)n / parts);
                if (ratio > worst)
                    worst = ratio;
                ck_assert_msg(ratio <= 1.5, "%d parts, step %d from %d: a part "
                              "gets %d of %d rows", parts, step, first, hi, n);
            }
        printf("steps 2..16 on %d parts: largest share %.3f of fair\n", parts, worst);
    }
    free(rows);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("fbp_partition");
    TCase *tc = tcase_create("deal");
    tcase_add_test(tc, every_row_has_one_owner_and_place);
    tcase_add_test(tc, runs_are_the_longest_single_copies);
    tcase_add_test(tc, slabs_are_shared_by_all_parts);
    tcase_add_test(tc, strided_requests_are_spread);
    suite_add_tcase(s, tc);
    return rtomo_check_run(s);
}
