/*
 * fbp_partition.c — the deal of an FBP plan's kept rows to the parts of a
 * multi-device plan (see fbp_partition.h for the scheme and its reasons).
 */
#include "config.h"

#include <stdint.h>

#include "fbp_partition.h"

#define GROUP FBP_PARTITION_GROUP

int fbp_partition_max_parts(int rows)
{
    return rows < 1 ? 1 : (rows + GROUP - 1) / GROUP;
}

fbp_partition fbp_partition_make(int rows, int parts)
{
    fbp_partition p;
    p.rows = rows < 1 ? 1 : rows;
    const int most = fbp_partition_max_parts(p.rows);
    p.parts = parts < 1 ? 1 : parts > most ? most : parts;
    return p;
}

/* Rotation of block b's order: a fixed mix of b (SplitMix64's finaliser),
 * so that steps which are multiples of a block do not map to one part. */
static int block_rotation(const fbp_partition *p, int block)
{
    uint64_t z = ((uint64_t)block + 1) * UINT64_C(0x9E3779B97F4A7C15);
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    z ^= z >> 31;
    return (int)(z % (uint64_t)p->parts);
}

int fbp_partition_owner(const fbp_partition *p, int row)
{
    const int group = row / GROUP;
    const int block = group / p->parts;
    return (group % p->parts + block_rotation(p, block)) % p->parts;
}

int fbp_partition_local(const fbp_partition *p, int row)
{
    return row / GROUP / p->parts * GROUP + row % GROUP;
}

/* The group of block `block` that part `part` owns (it may lie past the
 * last row in the final block). */
static int group_of(const fbp_partition *p, int part, int block)
{
    const int position = (part - block_rotation(p, block) + p->parts) % p->parts;
    return block * p->parts + position;
}

int fbp_partition_row(const fbp_partition *p, int part, int local)
{
    return group_of(p, part, local / GROUP) * GROUP + local % GROUP;
}

int fbp_partition_count(const fbp_partition *p, int part)
{
    /* Every block before the last gives each part one full group. */
    const int groups = (p->rows + GROUP - 1) / GROUP;
    const int last_block = (groups - 1) / p->parts;
    const int last_group = group_of(p, part, last_block);
    int count = last_block * GROUP;
    if (last_group < groups) {
        const int left = p->rows - last_group * GROUP;
        count += left < GROUP ? left : GROUP;
    }
    return count;
}

int fbp_partition_run(const fbp_partition *p, int row, int end)
{
    if (row >= end)
        return 0;
    if (p->parts == 1)
        return end - row;
    const int owner = fbp_partition_owner(p, row);
    int next = (row / GROUP + 1) * GROUP;   /* first row of the next group */
    /* The next group continues the run only when it is the same part's
     * next local group (last group of a block, first of the next). */
    while (next < end && fbp_partition_owner(p, next) == owner &&
           fbp_partition_local(p, next) == fbp_partition_local(p, next - 1) + 1)
        next += GROUP;
    return (next < end ? next : end) - row;
}
