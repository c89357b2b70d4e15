/*
 * proto_cone.c — cone-beam scans in "scan_begin" ("beam": "cone",
 * PROTOCOL.md 3.13): the "beam" field, the "cone" object (distances,
 * detector pitch and offsets, voxel, volume and ROI), the parallel-beam
 * fields that have no meaning for a cone beam (refused by name rather
 * than ignored), validation through the cone
 * engine's own validator, the encoder's half, and the engine geometry a
 * spec describes.  proto_scan.c calls in at three points; everything
 * else of a scan_begin (detector, projections, angles, dtype, darks and
 * flats, filter) is decoded there as for a parallel beam.
 */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "proto_internal.h"
#include "rtomo_proto_cone.h"

/* Fields of a parallel-beam scan_begin that a cone-beam one refuses, and
 * why: a sender who gives one expects it to act, and it would not. */
static const struct { const char *key, *why; } parallel_only[] = {
    {"axis", "the rotation axis is where the central ray meets the "
             "detector; move the detector with \"cone.offset\""},
    {"axis_shift", "the cone-beam geometry has no per-projection axis "
                   "corrections"},
    {"half_acquisition", "an offset detector is \"cone.offset\" (u beyond "
                         "one pixel, with 360 degrees: half-fan weights)"},
    {"flats_after", "cone-beam projections are normalised with the flats "
                    "before them"},
    {"every", "cone-beam scans have no continuous mode"},
};

static const struct { const char *key, *why; } parallel_only_rec[] = {
    {"slices", "a cone-beam scan publishes every z-slice of its volume "
               "(\"cone.roi\" chooses them)"},
    {"roi", "the volume's region is \"cone.roi\""},
    {"slice_size", "the volume's size is \"cone.volume\""},
    {"interpolation", "FDK interpolates bilinearly"},
    {"field_of_view", "the cone-beam volume is \"cone.volume\" and "
                      "\"cone.roi\"; the circular field of view is for "
                      "parallel beams"},
    {"angle_weights", "FDK weighs every projection by its angular interval"},
    {"phase", "phase retrieval is for parallel beams"},
    {"rings", "ring removal is for parallel beams"},
    {"rings_width", "ring removal is for parallel beams"},
};

#define COUNT(a) (sizeof (a) / sizeof (a)[0])

static int refuse_parallel_fields(const json_t *root, rtomo_reject_info *why)
{
    for (size_t i = 0; i < COUNT(parallel_only); i++)
        if (proto_has_field(root, parallel_only[i].key))
            return rtomo_reject_set(why, RTOMO_REJECT_FIELD,
                                    "field \"%s\" does not apply to a "
                                    "cone-beam scan (\"beam\": \"cone\"): "
                                    "%s", parallel_only[i].key,
                                    parallel_only[i].why);
    const json_t *mode = json_object_get(root, "mode");
    if (json_is_string(mode) && strcmp(json_string_value(mode), "scan") != 0)
        return rtomo_reject_set(why, RTOMO_REJECT_FIELD,
                                "field \"mode\" = \"%.40s\": a cone-beam "
                                "scan is a plain scan (\"scan\")",
                                json_string_value(mode));
    const json_t *rec = json_object_get(root, "reconstruction");
    for (size_t i = 0; json_is_object(rec) && i < COUNT(parallel_only_rec);
         i++)
        if (proto_has_field(rec, parallel_only_rec[i].key))
            return rtomo_reject_set(why, RTOMO_REJECT_FIELD,
                                    "field \"reconstruction.%s\" does not "
                                    "apply to a cone-beam scan: %s",
                                    parallel_only_rec[i].key,
                                    parallel_only_rec[i].why);
    return 0;
}

/* cone.<key> as a finite number > 0. */
static int get_positive(const json_t *o, const char *key, int required,
                        double *out, rtomo_reject_info *why)
{
    int r = proto_get_number(o, "cone", key, required, out, why);
    if (r == FIELD_OK && !(*out > 0.0))
        return rtomo_reject_set(why, RTOMO_REJECT_FIELD,
                                "field \"cone.%s\" = %g must be > 0", key,
                                *out);
    return r;
}

/* cone.<key> as [u, v]; each > 0 when `positive`. */
static int get_pair(const json_t *o, const char *key, int required,
                    int positive, double out[2], rtomo_reject_info *why)
{
    double *v = NULL;
    int n;
    int r = proto_get_number_list(o, "cone", key, required, 2, &v, &n, why);
    if (r != FIELD_OK)
        return r;
    out[0] = v[0];
    out[1] = v[1];
    free(v);
    for (int i = 0; positive && i < 2; i++)
        if (!(out[i] > 0.0))
            return rtomo_reject_set(why, RTOMO_REJECT_FIELD,
                                    "field \"cone.%s[%d]\" = %g must be > 0",
                                    key, i, out[i]);
    return FIELD_OK;
}

/* cone.roi: [x, y, z, nx, ny, nz] inside cone.volume, sizes >= 1. */
static int decode_roi(const json_t *o, rtomo_cone_spec *c,
                      rtomo_reject_info *why)
{
    int64_t roi[6];
    int r = proto_get_int_tuple(o, "cone", "roi", OPTIONAL, 6, 0,
                                RTOMO_CONE_MAX_EDGE, roi, why);
    if (r != FIELD_OK)
        return r;
    static const char axis[3] = {'x', 'y', 'z'};
    for (int a = 0; a < 3; a++) {
        if (roi[3 + a] < 1 || roi[a] + roi[3 + a] > c->volume[a])
            return rtomo_reject_set(why, RTOMO_REJECT_FIELD,
                                    "field \"cone.roi\": along %c first "
                                    "%lld, size %lld is not inside the "
                                    "volume's %d voxels (\"cone.volume\")",
                                    axis[a], (long long)roi[a],
                                    (long long)roi[3 + a], c->volume[a]);
    }
    for (int i = 0; i < 6; i++)
        c->roi[i] = (int)roi[i];
    return FIELD_OK;
}

static int decode_cone_object(const json_t *root, rtomo_cone_spec *c,
                              rtomo_reject_info *why)
{
    const json_t *o;
    int64_t volume[3];
    if (proto_get_object(root, NULL, "cone", REQUIRED, &o, why) < 0 ||
        get_positive(o, "source_to_axis", REQUIRED, &c->source_to_axis,
                     why) < 0 ||
        get_positive(o, "source_to_detector", REQUIRED,
                     &c->source_to_detector, why) < 0)
        return -1;
    if (!(c->source_to_detector > c->source_to_axis))
        return rtomo_reject_set(why, RTOMO_REJECT_FIELD,
                                "field \"cone.source_to_detector\" = %g is "
                                "not beyond \"cone.source_to_axis\" = %g: "
                                "the detector lies behind the rotation "
                                "axis, seen from the source",
                                c->source_to_detector, c->source_to_axis);
    if (get_pair(o, "pitch", REQUIRED, 1, c->pitch, why) < 0 ||
        get_pair(o, "offset", OPTIONAL, 0, c->offset, why) < 0 ||
        proto_get_int_tuple(o, "cone", "volume", REQUIRED, 3, 1,
                            RTOMO_CONE_MAX_EDGE, volume, why) < 0)
        return -1;
    for (int a = 0; a < 3; a++)
        c->volume[a] = (int)volume[a];
    /* Without a voxel size: the detector pixel as seen at the axis. */
    c->voxel = c->pitch[0] * c->source_to_axis / c->source_to_detector;
    if (get_positive(o, "voxel", OPTIONAL, &c->voxel, why) < 0)
        return -1;
    return decode_roi(o, c, why) < 0 ? -1 : 0;
}

int proto_decode_beam(const json_t *root, rtomo_scan_spec *spec,
                      rtomo_reject_info *why)
{
    const char *beam = "parallel";
    if (proto_get_string(root, NULL, "beam", OPTIONAL, &beam, why) < 0)
        return -1;
    if (strcmp(beam, "parallel") == 0) {
        if (proto_has_field(root, "cone"))
            return rtomo_reject_set(why, RTOMO_REJECT_FIELD,
                                    "field \"cone\" needs \"beam\": "
                                    "\"cone\" (the beam is parallel)");
        return 0;
    }
    if (strcmp(beam, "cone") != 0)
        return rtomo_reject_set(why, RTOMO_REJECT_FIELD,
                                "field \"beam\" = \"%.40s\" is not one of "
                                "\"parallel\", \"cone\"", beam);
    if (refuse_parallel_fields(root, why) < 0)
        return -1;
    if (!(spec->cone = calloc(1, sizeof *spec->cone)))
        return rtomo_reject_set(why, RTOMO_REJECT_OVERSIZE,
                                "no memory for a cone-beam geometry");
    return decode_cone_object(root, spec->cone, why);
}

void rtomo_proto_cone_geometry(const rtomo_scan_spec *spec,
                               rtomo_cone_geometry *g)
{
    const rtomo_cone_spec *c = spec->cone;
    const rtomo_fbp_geometry *f = &spec->geometry;
    rtomo_cone_geometry_init(g);
    g->sad = c->source_to_axis;
    g->sdd = c->source_to_detector;
    g->det_u = f->det_width;
    g->det_v = f->det_height;
    g->pitch_u = c->pitch[0];
    g->pitch_v = c->pitch[1];
    g->offset_u = c->offset[0];
    g->offset_v = c->offset[1];
    g->n_proj = f->n_proj;
    g->angles = f->angles;
    g->angle_start = f->angle_start;
    g->angle_step = f->angle_step;
    g->nx = c->volume[0];
    g->ny = c->volume[1];
    g->nz = c->volume[2];
    g->voxel = c->voxel;
    g->roi_x = c->roi[0];
    g->roi_y = c->roi[1];
    g->roi_z = c->roi[2];
    g->roi_nx = c->roi[3];
    g->roi_ny = c->roi[4];
    g->roi_nz = c->roi[5];
    g->window = f->window;
    g->cutoff = f->cutoff;
}

/* After the rest of the begin is decoded: a full turn is the default
 * (a cone beam sees each line once per turn, not per half turn), and the
 * engine judges the set-up as a whole.  "fbp" is FDK; "sirt" and "cgls"
 * solve the volume after it (check_method of proto_scan.c has judged
 * their options). */
int proto_check_cone(const json_t *root, rtomo_scan_spec *spec,
                     rtomo_reject_info *why)
{
    rtomo_fbp_geometry *f = &spec->geometry;
    if (!spec->angles && !proto_has_field(root, "angle_step"))
        f->angle_step = 2.0 * M_PI / f->n_proj;
    rtomo_cone_geometry g;
    rtomo_proto_cone_geometry(spec, &g);
    rtomo_error err;
    if (rtomo_cone_geometry_validate(&g, &err) != RTOMO_OK)
        return rtomo_reject_set(why, RTOMO_REJECT_GEOMETRY,
                                "scan_begin cone-beam geometry refused: %s",
                                err.message);
    return 0;
}

int proto_encode_cone(json_t *root, const rtomo_scan_spec *spec)
{
    const rtomo_cone_spec *c = spec->cone;
    json_t *o = json_pack("{s:f, s:f, s:[f, f], s:[f, f], s:f, s:[i, i, i]}",
                          "source_to_axis", c->source_to_axis,
                          "source_to_detector", c->source_to_detector,
                          "pitch", c->pitch[0], c->pitch[1], "offset",
                          c->offset[0], c->offset[1], "voxel", c->voxel,
                          "volume", c->volume[0], c->volume[1],
                          c->volume[2]);
    if (!o)
        return -1;
    int e = 0;
    if (c->roi[3] > 0)
        e |= json_object_set_new(o, "roi", json_pack(
            "[i, i, i, i, i, i]", c->roi[0], c->roi[1], c->roi[2], c->roi[3],
            c->roi[4], c->roi[5]));
    e |= json_object_set_new(root, "beam", json_string("cone"));
    return e | json_object_set_new(root, "cone", o);
}
