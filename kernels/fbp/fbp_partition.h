/*
 * fbp_partition.h — how the kept rows of an FBP plan are dealt to the
 * parts (devices) of a multi-device plan, so that any request of rows,
 * above all a slab of consecutive rows, is shared evenly.
 *
 * Rows are dealt in groups of FBP_PARTITION_GROUP consecutive kept rows
 * (group q holds rows 4q .. 4q+3): a pass that packs 2 or 4 sinograms per
 * texel, and the GPU filter that transforms two rows as one complex row,
 * find their partners on the same part, exactly as on one device.  Groups
 * form blocks of `parts` consecutive groups; within a block every part owns
 * exactly one group, so a slab of consecutive rows gives each part its
 * share within two groups.  Plain interleaving (group q to part q mod
 * parts) would do as much for slabs, but sends every row of a strided
 * request whose step is a multiple of parts x 4 rows (every 8th slice on
 * two devices) to one part; so the order within block b is rotated by a
 * fixed pseudo-random amount, which spreads any such step like a random
 * deal.
 *
 * Each part stores its rows in "local" order: block by block, the rows of
 * its group in each.  Local indices are dense (0 .. count-1).
 *
 * Host-only and backend-neutral C, so that the deal is tested without a
 * GPU; the CUDA FBP backend is its user.
 */
#ifndef RTOMO_FBP_PARTITION_H
#define RTOMO_FBP_PARTITION_H

#ifdef __cplusplus
extern "C" {
#endif

/* Consecutive kept rows that always stay together on one part: a multiple
 * of every slices-per-pass (1, 2, 4) and of the filter's row pairs. */
#define FBP_PARTITION_GROUP 4

typedef struct fbp_partition {
    int rows;                   /* kept rows, >= 1 */
    int parts;                  /* 1 .. fbp_partition_max_parts(rows) */
} fbp_partition;

/* Most parts `rows` rows can be dealt to with every part owning rows: the
 * number of groups. */
int fbp_partition_max_parts(int rows);

/* A deal of `rows` rows to `parts` parts (both >= 1; parts is clamped to
 * fbp_partition_max_parts(rows)). */
fbp_partition fbp_partition_make(int rows, int parts);

/* The part that owns kept row `row` (0 <= row < rows). */
int fbp_partition_owner(const fbp_partition *p, int row);
/* Its index among its part's rows. */
int fbp_partition_local(const fbp_partition *p, int row);
/* The kept row at local index `local` of part `part` (the inverse). */
int fbp_partition_row(const fbp_partition *p, int part, int local);
/* Rows part `part` owns. */
int fbp_partition_count(const fbp_partition *p, int part);
/* Rows of [row, end) from `row` on that lie on row's part at consecutive
 * local indices: what one copy can move.  >= 1 when row < end. */
int fbp_partition_run(const fbp_partition *p, int row, int end);

#ifdef __cplusplus
}
#endif

#endif
