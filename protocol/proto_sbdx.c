/*
 * proto_sbdx.c — the "sbdx_begin" message of an SBDX tomosynthesis stream:
 * decoding it into an rtomo_sbdx_spec, validating the geometry through the
 * SBDX engine, and encoding a spec for clients.
 */
#include "config.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "proto_internal.h"

#define PROTO_MAX_PLANE_EDGE 32768
#define PROTO_MAX_COMPOSITE_RADIUS 32
/* u16_scale and |u16_offset| at most this (what the float output takes
 * with room to spare). */
#define PROTO_MAX_U16_SCALING 1e30

/* Default scale of uint16 planes: maps the full range of the input samples
 * onto the full uint16 range (planes reconstruct to about the input value). */
static float default_u16_scale(rtomo_dtype dtype)
{
    return dtype == RTOMO_DTYPE_U8 ? 257.0f : 1.0f;
}

void rtomo_sbdx_spec_init(rtomo_sbdx_spec *spec)
{
    memset(spec, 0, sizeof *spec);
    rtomo_sbdx_geometry_init(&spec->geometry);
    spec->dtype = RTOMO_DTYPE_U8;
    spec->planes = RTOMO_PLANES_FLOAT32;
    spec->u16_scale = default_u16_scale(spec->dtype);
    spec->u16_offset = 0.0f;
    spec->composite = 1;
}

void rtomo_sbdx_spec_clear(rtomo_sbdx_spec *spec)
{
    if (!spec)
        return;
    free(spec->ratios);
    rtomo_sbdx_spec_init(spec);
}

/* ------------------------------------------------------------ decoding ---- */

static int decode_system(const json_t *root, rtomo_sbdx_geometry *g,
                         rtomo_reject_info *why)
{
    int64_t holes[2];
    const json_t *det;
    if (proto_get_int_tuple(root, NULL, "holes", REQUIRED, 2, 1,
                            PROTO_MAX_HOLES, holes, why) < 0 ||
        proto_get_object(root, NULL, "detector", REQUIRED, &det, why) < 0 ||
        proto_get_int32(det, "detector", "width", REQUIRED, 1,
                        PROTO_MAX_SBDX_DETECTOR, &g->det_width, why) < 0 ||
        proto_get_int32(det, "detector", "height", REQUIRED, 1,
                        PROTO_MAX_SBDX_DETECTOR, &g->det_height, why) < 0 ||
        proto_get_int32(root, NULL, "shift", REQUIRED, 1, PROTO_MAX_SHIFT,
                        &g->shift_m, why) < 0)
        return -1;
    g->holes_x = (int)holes[0];
    g->holes_y = (int)holes[1];
    return 0;
}

/* A plane ratio the engine takes: (0, RTOMO_SBDX_MAX_RATIO]. */
static int ratio_valid(double n)
{
    return n > 0.0 && n <= RTOMO_SBDX_MAX_RATIO;
}

/* A "ratios" list: 1..RTOMO_SBDX_MAX_PLANES ratios, each valid. */
static int check_ratio_list(const rtomo_sbdx_spec *spec,
                            rtomo_reject_info *why)
{
    int n = spec->geometry.n_planes;
    if (n > RTOMO_SBDX_MAX_PLANES)
        return rtomo_reject_set(why, RTOMO_REJECT_FIELD,
                                "field \"ratios\" has %d entries, at most %d "
                                "planes are allowed", n,
                                RTOMO_SBDX_MAX_PLANES);
    for (int k = 0; k < n; k++)
        if (!ratio_valid(spec->ratios[k]))
            return rtomo_reject_set(why, RTOMO_REJECT_FIELD,
                                    "field \"ratios[%d]\" = %g is outside "
                                    "(0, %g]", k, spec->ratios[k],
                                    RTOMO_SBDX_MAX_RATIO);
    return 0;
}

/* "ratio_range": {"first", "last", "count"}: count evenly spaced ratios
 * from first to last inclusive. */
static int decode_ratio_range(const json_t *range, rtomo_sbdx_spec *spec,
                              rtomo_reject_info *why)
{
    double first, last;
    int count;
    const char *path = "ratio_range";
    if (proto_get_number(range, path, "first", REQUIRED, &first, why) < 0 ||
        proto_get_number(range, path, "last", REQUIRED, &last, why) < 0 ||
        proto_get_int32(range, path, "count", REQUIRED, 1,
                        RTOMO_SBDX_MAX_PLANES, &count, why) < 0)
        return -1;
    if (count == 1 && first != last)
        return rtomo_reject_set(why, RTOMO_REJECT_FIELD,
                                "field \"ratio_range\" has count 1 but first "
                                "%g != last %g", first, last);
    spec->ratios = malloc((size_t)count * sizeof *spec->ratios);
    if (!spec->ratios)
        return rtomo_reject_set(why, RTOMO_REJECT_OVERSIZE,
                                "no memory for %d ratios", count);
    for (int k = 0; k < count; k++)
        spec->ratios[k] = count == 1 ? first
                                     : (first * (count - 1 - k) + last * k) /
                                           (count - 1);
    spec->geometry.n_planes = count;
    if (!ratio_valid(first) || !ratio_valid(last))
        return rtomo_reject_set(why, RTOMO_REJECT_FIELD,
                                "field \"ratio_range.%s\" = %g is outside "
                                "(0, %g]", ratio_valid(first) ? "last" : "first",
                                ratio_valid(first) ? last : first,
                                RTOMO_SBDX_MAX_RATIO);
    return 0;
}

static int decode_ratios(const json_t *root, rtomo_sbdx_spec *spec,
                         rtomo_reject_info *why)
{
    const json_t *range;
    int have_range = proto_get_object(root, NULL, "ratio_range", OPTIONAL,
                                      &range, why);
    if (have_range < 0)
        return -1;
    int list = proto_has_field(root, "ratios");
    if (have_range && list)
        return rtomo_reject_set(why, RTOMO_REJECT_FIELD,
                                "give either \"ratios\" or \"ratio_range\", "
                                "not both");
    if (have_range) {
        if (decode_ratio_range(range, spec, why) < 0)
            return -1;
    } else if (!list) {
        return rtomo_reject_set(why, RTOMO_REJECT_FIELD,
                                "missing field \"ratios\" (or "
                                "\"ratio_range\")");
    } else if (proto_get_number_list(root, NULL, "ratios", REQUIRED, 0,
                                     &spec->ratios, &spec->geometry.n_planes,
                                     why) < 0 ||
               check_ratio_list(spec, why) < 0) {
        return -1;
    }
    spec->geometry.ratios = spec->ratios;
    return 0;
}

static int decode_planes(const json_t *root, rtomo_sbdx_geometry *g,
                         rtomo_reject_info *why)
{
    int64_t size[2], origin[2];
    int r = proto_get_int_tuple(root, NULL, "plane_size", OPTIONAL, 2, 1,
                                PROTO_MAX_PLANE_EDGE, size, why);
    if (r < 0)
        return -1;
    if (r == FIELD_OK) {
        g->out_width = (int)size[0];
        g->out_height = (int)size[1];
    } else if ((int64_t)g->shift_m * g->holes_x > PROTO_MAX_PLANE_EDGE ||
               (int64_t)g->shift_m * g->holes_y > PROTO_MAX_PLANE_EDGE) {
        return rtomo_reject_set(why, RTOMO_REJECT_FIELD,
                                "field \"plane_size\" left out defaults to "
                                "[shift x holes] = [%lld, %lld], beyond %d: "
                                "give \"plane_size\"",
                                (long long)g->shift_m * g->holes_x,
                                (long long)g->shift_m * g->holes_y,
                                PROTO_MAX_PLANE_EDGE);
    }
    r = proto_get_int_tuple(root, NULL, "origin", OPTIONAL, 2,
                            -PROTO_MAX_PLANE_EDGE, PROTO_MAX_PLANE_EDGE,
                            origin, why);
    if (r < 0)
        return -1;
    if (r == FIELD_OK) {
        g->origin_x = (int)origin[0];
        g->origin_y = (int)origin[1];
    }
    if (proto_get_int32(root, NULL, "composite_radius", OPTIONAL, 1,
                        PROTO_MAX_COMPOSITE_RADIUS, &g->composite_radius,
                        why) < 0 ||
        proto_get_bool(root, NULL, "flat_field", OPTIONAL, &g->flat_field,
                       why) < 0)
        return -1;
    return 0;
}

/* rtomo_plane_format_parse in the form proto_get_enum takes. */
static int parse_plane_format(const char *name, int *out)
{
    rtomo_plane_format f;
    if (rtomo_plane_format_parse(name, &f) != RTOMO_OK)
        return -1;
    *out = (int)f;
    return 0;
}

int proto_check_u16_scaling(double scale, double offset, const char *path,
                            rtomo_reject_info *why)
{
    /* A double beyond the float range has no float (converting it is
     * undefined): refuse it first, then judge the float it becomes, so that
     * a value decoded, stored and sent again passes again (1e30 becomes the
     * float 1.0000000150e30); isnormal() refuses 0, subnormals (which
     * 1e-300 or 1e-39 become), infinities and NaN. */
    if (!(scale > 0.0 && scale <= FLT_MAX) || !isnormal((float)scale) ||
        (float)scale > (float)PROTO_MAX_U16_SCALING)
        return rtomo_reject_set(why, RTOMO_REJECT_FIELD,
                                "field \"%su16_scale\" = %g is outside "
                                "[%g, %g] (a positive normal float32: 0 and "
                                "values that become 0 or subnormal are "
                                "refused)", path, scale, (double)FLT_MIN,
                                PROTO_MAX_U16_SCALING);
    if (!(fabs(offset) <= FLT_MAX) ||
        fabsf((float)offset) > (float)PROTO_MAX_U16_SCALING)
        return rtomo_reject_set(why, RTOMO_REJECT_FIELD,
                                "field \"%su16_offset\" = %g is outside "
                                "[%g, %g]", path, offset,
                                -PROTO_MAX_U16_SCALING, PROTO_MAX_U16_SCALING);
    return 0;
}

int rtomo_proto_check_sbdx_output(const rtomo_sbdx_spec *spec,
                                  rtomo_reject_info *why)
{
    if (proto_check_u16_scaling(spec->u16_scale, spec->u16_offset, "output.",
                                why) < 0)
        return -1;
    if (spec->planes == RTOMO_PLANES_NONE && !spec->composite)
        return rtomo_reject_set(why, RTOMO_REJECT_FIELD,
                                "field \"output\" asks for neither planes "
                                "nor the composite: nothing to publish");
    return 0;
}

static int decode_output(const json_t *root, rtomo_sbdx_spec *spec,
                         rtomo_reject_info *why)
{
    const json_t *out;
    int r = proto_get_object(root, NULL, "output", OPTIONAL, &out, why);
    if (r != FIELD_OK)
        return r;
    int planes = (int)spec->planes;
    double scale = spec->u16_scale, offset = spec->u16_offset;
    if (proto_get_enum(out, "output", "planes", OPTIONAL, parse_plane_format,
                       "\"float32\", \"uint16\", \"none\"", &planes, why) < 0 ||
        proto_get_number(out, "output", "u16_scale", OPTIONAL, &scale, why) < 0 ||
        proto_get_number(out, "output", "u16_offset", OPTIONAL, &offset,
                         why) < 0 ||
        proto_get_bool(out, "output", "composite", OPTIONAL, &spec->composite,
                       why) < 0)
        return -1;
    /* The values as sent are judged (and named in the reject) before
     * they become floats. */
    if (proto_check_u16_scaling(scale, offset, "output.", why) < 0)
        return -1;
    spec->planes = (rtomo_plane_format)planes;
    spec->u16_scale = (float)scale;
    spec->u16_offset = (float)offset;
    return rtomo_proto_check_sbdx_output(spec, why);
}

/* The circular field of view is a parallel-beam slice's: refused by name
 * (a sender who gives it expects it to act, and on SBDX planes it would
 * not). */
static int refuse_field_of_view(const json_t *root, rtomo_reject_info *why)
{
    const json_t *rec = json_object_get(root, "reconstruction");
    if (proto_has_field(root, "field_of_view") ||
        (json_is_object(rec) && proto_has_field(rec, "field_of_view")))
        return rtomo_reject_set(why, RTOMO_REJECT_FIELD,
                                "field \"reconstruction.field_of_view\" "
                                "does not apply to an SBDX stream: the "
                                "circular field of view is for parallel-beam "
                                "tomography");
    return 0;
}

static int decode_sbdx_fields(const json_t *root, rtomo_sbdx_spec *spec,
                              rtomo_reject_info *why)
{
    int dtype = (int)spec->dtype;
    if (refuse_field_of_view(root, why) < 0)
        return -1;
    if (decode_system(root, &spec->geometry, why) < 0 ||
        decode_ratios(root, spec, why) < 0 ||
        decode_planes(root, &spec->geometry, why) < 0 ||
        proto_get_enum(root, NULL, "dtype", OPTIONAL, proto_parse_dtype,
                       "\"uint8\", \"uint16\", \"float32\"", &dtype, why) < 0)
        return -1;
    spec->dtype = (rtomo_dtype)dtype;
    spec->u16_scale = default_u16_scale(spec->dtype);
    if (decode_output(root, spec, why) < 0)
        return -1;
    rtomo_error err;
    if (rtomo_sbdx_geometry_validate(&spec->geometry, &err) != RTOMO_OK)
        return rtomo_reject_set(why, RTOMO_REJECT_GEOMETRY,
                                "sbdx_begin geometry refused: %s",
                                err.message);
    return 0;
}

int proto_decode_sbdx_begin(const json_t *root, const char *scan,
                            rtomo_sbdx_spec **out, rtomo_reject_info *why)
{
    rtomo_sbdx_spec *spec = malloc(sizeof *spec);
    if (!spec)
        return rtomo_reject_set(why, RTOMO_REJECT_OVERSIZE,
                                "no memory for an SBDX description");
    rtomo_sbdx_spec_init(spec);
    strcpy(spec->scan, scan);
    if (decode_sbdx_fields(root, spec, why) < 0) {
        rtomo_sbdx_spec_clear(spec);
        free(spec);
        return -1;
    }
    *out = spec;
    return 0;
}

/* ------------------------------------------------------------ encoding ---- */

char *rtomo_proto_encode_sbdx_begin(const rtomo_sbdx_spec *spec)
{
    const rtomo_sbdx_geometry *g = &spec->geometry;
    /* Never write what the decoder would refuse (the same check). */
    if (rtomo_proto_check_sbdx_output(spec, NULL) < 0)
        return NULL;
    json_t *ratios = json_array();
    for (int k = 0; ratios && g->ratios && k < g->n_planes; k++)
        if (json_array_append_new(ratios, json_real(g->ratios[k])) < 0) {
            json_decref(ratios);
            ratios = NULL;
        }
    if (!ratios)
        return NULL;
    json_t *root = json_pack(
        "{s:i, s:s, s:s, s:[i, i], s:{s:i, s:i}, s:i, s:o, s:s, s:i, s:b, "
        "s:{s:s, s:f, s:f, s:b}}",
        "protocol", RTOMO_PROTOCOL_VERSION, "type", "sbdx_begin", "scan",
        spec->scan, "holes", g->holes_x, g->holes_y, "detector", "width",
        g->det_width, "height", g->det_height, "shift", g->shift_m, "ratios",
        ratios, "dtype", rtomo_dtype_name(spec->dtype), "composite_radius",
        g->composite_radius > 0 ? g->composite_radius : 2, "flat_field",
        g->flat_field, "output", "planes",
        rtomo_plane_format_name(spec->planes), "u16_scale",
        (double)spec->u16_scale, "u16_offset", (double)spec->u16_offset,
        "composite", spec->composite);
    if (!root)
        return NULL;
    int e = 0;
    if (g->out_width > 0 && g->out_height > 0)
        e |= json_object_set_new(root, "plane_size",
                                 json_pack("[i, i]", g->out_width,
                                           g->out_height));
    if (g->origin_x || g->origin_y)
        e |= json_object_set_new(root, "origin",
                                 json_pack("[i, i]", g->origin_x,
                                           g->origin_y));
    if (e) {
        json_decref(root);
        return NULL;
    }
    return proto_dump(root);
}
