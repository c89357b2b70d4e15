/*
 * cuda_cone_sf_slabs.h — what cuda_cone_sf_slabs.cu (the cone SF pair in
 * z slabs over several GPUs) gives the backend ops of
 * cuda_cone_sf_backend.cu.  Private to kernels/cone.
 */
#ifndef RTOMO_CUDA_CONE_SF_SLABS_H
#define RTOMO_CUDA_CONE_SF_SLABS_H

#include "cuda_cone_sf.h"

/* Make the pair's slabs over devices ids[0..n_ids-1] (one slab, and
 * nothing made, for one device without the test hook); split_destroy
 * frees what a split added. */
rtomo_status split_create(cuda_cone_sf *s, const int *ids, int n_ids,
                          rtomo_error *err);
void split_destroy(cuda_cone_sf *s);

/* Whether v lies in parts, one per device (a split pair's image
 * vectors); the floats of part d of one row; where row i's part d
 * starts. */
int in_parts(const cuda_cone_sf *s, const iter_vec *v);
size_t part_len(const cuda_cone_sf *s, int d);
float *part_of(const cuda_cone_sf *s, const iter_vec *v, int d, int i);

/* A vector's parts: allocated zeroed, freed, copied to or from the host
 * array of the whole vector. */
rtomo_status parts_alloc(const cuda_cone_sf *s, iter_vec *v,
                         rtomo_error *err);
void parts_free(const cuda_cone_sf *s, iter_vec *v);
rtomo_status parts_copy(const cuda_cone_sf *s, const iter_vec *v,
                        float *host, int to_host, rtomo_error *err);

/* A of row i of x into y (the whole projections, on the owner), and
 * A^T of y into row i of x, over the slabs. */
rtomo_status split_project(cuda_cone_sf *s, const iter_vec *x, int i,
                           float *y, rtomo_error *err);
rtomo_status split_backproject(cuda_cone_sf *s, const float *y,
                               const iter_vec *x, int i, rtomo_error *err);

#endif /* RTOMO_CUDA_CONE_SF_SLABS_H */
