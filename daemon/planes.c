/*
 * planes.c — planes of any orientation that an operator asks for through
 * the control socket ({"cmd": "planes"}, PROTOCOL.md 7): their JSON form,
 * checked into engine planes (rtomo_fbp_plane), and back.  The loop keeps
 * them in d->planes; every tomography reconstruction (the end of a scan,
 * each continuous window) reconstructs them after its slices.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "rtomod.h"

/* A 3-vector field of plane i. */
static int vector3(const json_t *obj, const char *key, int i, double *out,
                   char *why, size_t n)
{
    const json_t *a = json_object_get(obj, key);
    if (!json_is_array(a) || json_array_size(a) != 3) {
        snprintf(why, n, "planes[%d].%s: expected an array of 3 numbers", i,
                 key);
        return -1;
    }
    for (size_t k = 0; k < 3; k++) {
        const json_t *x = json_array_get(a, k);
        if (!json_is_number(x) || !isfinite(json_number_value(x))) {
            snprintf(why, n, "planes[%d].%s[%zu] is not a finite number", i,
                     key, k);
            return -1;
        }
        out[k] = json_number_value(x);
    }
    return 0;
}

/* An edge of plane i: an integer in [1, RTOMO_FBP_PLANE_MAX_EDGE]. */
static int edge(const json_t *obj, const char *key, int i, int *out,
                char *why, size_t n)
{
    const json_t *v = json_object_get(obj, key);
    json_int_t x = json_is_integer(v) ? json_integer_value(v) : 0;
    if (x < 1 || x > RTOMO_FBP_PLANE_MAX_EDGE) {
        snprintf(why, n, "planes[%d].%s: expected an integer in [1, %d]", i,
                 key, RTOMO_FBP_PLANE_MAX_EDGE);
        return -1;
    }
    *out = (int)x;
    return 0;
}

static int plane_from_json(const json_t *obj, int i, rtomo_fbp_plane *out,
                           char *why, size_t n)
{
    static const char *const keys[] = {"centre", "u", "v", "width",
                                       "height"};
    if (!json_is_object(obj)) {
        snprintf(why, n, "planes[%d]: expected an object {\"centre\", \"u\", "
                 "\"v\", \"width\", \"height\"}", i);
        return -1;
    }
    const char *key;
    const json_t *value;
    json_object_foreach((json_t *)obj, key, value) {
        int known = 0;
        for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
            known |= strcmp(key, keys[k]) == 0;
        if (!known) {
            snprintf(why, n, "planes[%d].%s: unknown field", i, key);
            return -1;
        }
    }
    rtomo_fbp_plane p;
    rtomo_error err;
    if (vector3(obj, "centre", i, p.centre, why, n) != 0 ||
        vector3(obj, "u", i, p.u, why, n) != 0 ||
        vector3(obj, "v", i, p.v, why, n) != 0 ||
        edge(obj, "width", i, &p.width, why, n) != 0 ||
        edge(obj, "height", i, &p.height, why, n) != 0)
        return -1;
    if (rtomo_fbp_plane_validate(&p, out, &err) != RTOMO_OK) {
        snprintf(why, n, "planes[%d]: %s", i, err.message);
        return -1;
    }
    return 0;
}

int rtomod_planes_from_json(const json_t *list, rtomo_fbp_plane *planes,
                            int *n_planes, char *why, size_t n)
{
    if (!json_is_array(list) || json_array_size(list) > RTOMOD_MAX_PLANES) {
        snprintf(why, n, "\"planes\" must be a list of at most %d planes",
                 RTOMOD_MAX_PLANES);
        return -1;
    }
    rtomo_fbp_plane parsed[RTOMOD_MAX_PLANES];
    for (size_t i = 0; i < json_array_size(list); i++)
        if (plane_from_json(json_array_get(list, i), (int)i, &parsed[i], why,
                            n) != 0)
            return -1;
    *n_planes = (int)json_array_size(list);
    memcpy(planes, parsed, sizeof parsed[0] * (size_t)*n_planes);
    return 0;
}

json_t *rtomod_planes_to_json(const rtomo_fbp_plane *planes, int n_planes)
{
    json_t *list = json_array();
    for (int i = 0; list && i < n_planes; i++) {
        const rtomo_fbp_plane *p = &planes[i];
        json_array_append_new(list, json_pack(
            "{s:[f, f, f], s:[f, f, f], s:[f, f, f], s:i, s:i}",
            "centre", p->centre[0], p->centre[1], p->centre[2],
            "u", p->u[0], p->u[1], p->u[2], "v", p->v[0], p->v[1], p->v[2],
            "width", p->width, "height", p->height));
    }
    return list;
}
