/*
 * cpu_cone.c — the CPU backend's ops table: its state (worker pool, slots
 * of filtered projections, the ROI volume) and the small ops that move
 * data in and out.  Filtering and back-projection are in their own files.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "cpu_cone.h"
#include "engine_internal.h"

static void cpu_destroy(rtomo_cone *c)
{
    cpu_cone *s = c->impl;
    if (!s)
        return;
    cpu_cone_filter_destroy(s->filter);
    cpu_pool_destroy(s->pool);
    free(s->slots);
    free(s->volume);
    free(s->scratch);
    free(s);
    c->impl = NULL;
}

static rtomo_status cpu_create(rtomo_cone *c, rtomo_error *err)
{
    cpu_cone *s = calloc(1, sizeof *s);
    if (!s)
        return rtomo_set_error(err, RTOMO_E_NOMEM, "out of memory");
    c->impl = s;
    const int threads = rtomo_cpu_thread_count(&c->opt);
    rtomo_status st = cpu_pool_create(threads, &s->pool, err);
    if (st != RTOMO_OK) {
        cpu_destroy(c);
        return st;
    }
    const int workers = cpu_pool_size(s->pool);
    s->slots = malloc(sizeof(float) * c->filt_len * (size_t)(c->chunk + 1));
    s->volume = calloc(c->volume_len, sizeof(float));
    s->scratch = malloc(sizeof(float) * 3 * (size_t)c->bp.nx *
                        (size_t)workers);
    if (!s->slots || !s->volume || !s->scratch) {
        cpu_destroy(c);
        return rtomo_set_error(err, RTOMO_E_NOMEM,
                               "out of memory for a %zu-voxel volume and "
                               "%d projection slots", c->volume_len,
                               c->chunk + 1);
    }
    st = cpu_cone_filter_create(c, workers, &s->filter, err);
    if (st != RTOMO_OK)
        cpu_destroy(c);
    return st;
}

static rtomo_status cpu_filter(rtomo_cone *c, const float *li,
                               const float *row_weights, int slot,
                               rtomo_error *err)
{
    (void)err;
    cpu_cone_filter_projection(c, li, row_weights, cpu_cone_slot(c, slot));
    return RTOMO_OK;
}

static rtomo_status cpu_load(rtomo_cone *c, int slot, const float *filtered,
                             rtomo_error *err)
{
    (void)err;
    memcpy(cpu_cone_slot(c, slot), filtered, sizeof(float) * c->filt_len);
    return RTOMO_OK;
}

static rtomo_status cpu_fetch(rtomo_cone *c, int slot, float *filtered,
                              rtomo_error *err)
{
    (void)err;
    memcpy(filtered, cpu_cone_slot(c, slot), sizeof(float) * c->filt_len);
    return RTOMO_OK;
}

static rtomo_status cpu_backproject(rtomo_cone *c, const int *indices, int n,
                                    rtomo_error *err)
{
    (void)err;
    cpu_cone_backproject(c, indices, n);
    return RTOMO_OK;
}

static rtomo_status cpu_read(rtomo_cone *c, int z_first, int z_count,
                             float *out, rtomo_error *err)
{
    (void)err;
    const cpu_cone *s = c->impl;
    const size_t plane = (size_t)c->bp.nx * (size_t)c->bp.ny;
    memcpy(out, s->volume + (size_t)z_first * plane,
           sizeof(float) * plane * (size_t)z_count);
    return RTOMO_OK;
}

static rtomo_status cpu_reset(rtomo_cone *c, rtomo_error *err)
{
    (void)err;
    cpu_cone *s = c->impl;
    memset(s->volume, 0, sizeof(float) * c->volume_len);
    return RTOMO_OK;
}

const cone_backend_ops cone_cpu_ops = {
    .name = "cpu",
    .create = cpu_create,
    .destroy = cpu_destroy,
    .filter = cpu_filter,
    .load = cpu_load,
    .fetch = cpu_fetch,
    .backproject = cpu_backproject,
    .read = cpu_read,
    .reset = cpu_reset,
};
