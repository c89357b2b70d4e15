/*
 * proto_scan.c — the "scan_begin" message of a tomography scan: decoding it
 * into an rtomo_scan_spec (degrees on the wire, radians in the engine
 * geometry), validating the geometry through the FBP engine, and encoding a
 * spec for clients.
 */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "proto_internal.h"

void rtomo_method_settings_init(rtomo_method_settings *m)
{
    memset(m, 0, sizeof *m);
    m->method = RTOMO_METHOD_FBP;
    /* SIRT's error on a 60-angle phantom levels off after a few tens of
     * iterations (tests/test_iter_solve.c); CGLS needs fewer. */
    m->iterations = 50;
    m->warm_start = 1;
}

void rtomo_scan_spec_init(rtomo_scan_spec *spec)
{
    memset(spec, 0, sizeof *spec);
    rtomo_fbp_geometry_init(&spec->geometry);
    spec->dtype = RTOMO_DTYPE_U16;
    spec->slices.kind = RTOMO_SLICES_ALL;
    rtomo_method_settings_init(&spec->method);
}

void rtomo_scan_spec_clear(rtomo_scan_spec *spec)
{
    if (!spec)
        return;
    free(spec->angles);
    free(spec->axis_shift);
    free(spec->cone);
    rtomo_slice_selection_clear(&spec->slices);
    rtomo_scan_spec_init(spec);
}

/* ------------------------------------------------------------ decoding ---- */

static int decode_detector(const json_t *root, rtomo_fbp_geometry *g,
                           rtomo_reject_info *why)
{
    const json_t *det;
    if (proto_get_object(root, NULL, "detector", REQUIRED, &det, why) < 0 ||
        proto_get_int32(det, "detector", "width", REQUIRED, 2, PROTO_MAX_EDGE,
                        &g->det_width, why) < 0 ||
        proto_get_int32(det, "detector", "height", REQUIRED, 1,
                        PROTO_MAX_EDGE, &g->det_height, why) < 0)
        return -1;
    return 0;
}

/* Angles: a list of n_proj degrees, or a start and a step (default 180/n). */
static int decode_angles(const json_t *root, rtomo_scan_spec *spec,
                         rtomo_reject_info *why)
{
    rtomo_fbp_geometry *g = &spec->geometry;
    int n;
    int have_list = proto_get_number_list(root, NULL, "angles", OPTIONAL,
                                          g->n_proj, &spec->angles, &n, why);
    if (have_list < 0)
        return -1;
    if (have_list) {
        if (proto_has_field(root, "angle_start") ||
            proto_has_field(root, "angle_step"))
            return rtomo_reject_set(why, RTOMO_REJECT_FIELD,
                                    "give either \"angles\" or "
                                    "\"angle_start\"/\"angle_step\", not both");
        for (int p = 0; p < n; p++)
            spec->angles[p] = proto_radians(spec->angles[p]);
        g->angles = spec->angles;
        return 0;
    }
    double start = 0.0, step = 180.0 / g->n_proj;
    if (proto_get_number(root, NULL, "angle_start", OPTIONAL, &start, why) < 0 ||
        proto_get_number(root, NULL, "angle_step", OPTIONAL, &step, why) < 0)
        return -1;
    g->angle_start = proto_radians(start);
    g->angle_step = proto_radians(step);
    return 0;
}

/* The axis and its corrections, in the engine's ranges (relative to the
 * detector width of this message, so a bad_field). */
static int decode_axis(const json_t *root, rtomo_scan_spec *spec,
                       rtomo_reject_info *why)
{
    rtomo_fbp_geometry *g = &spec->geometry;
    int n, w = g->det_width;
    const json_t *axis = json_object_get(root, "axis");
    int r;
    if (json_is_string(axis)) {
        if (strcmp(json_string_value(axis), "auto") != 0)
            return rtomo_reject_set(why, RTOMO_REJECT_FIELD,
                                    "field \"axis\" is a number of bins or "
                                    "\"auto\", not \"%.40s\"",
                                    json_string_value(axis));
        spec->axis_auto = 1;
        r = FIELD_ABSENT;
    } else if ((r = proto_get_number(root, NULL, "axis", OPTIONAL, &g->axis,
                                     why)) < 0)
        return -1;
    if (r == FIELD_OK && !rtomo_fbp_axis_valid(g->axis, w))
        return rtomo_reject_set(why, RTOMO_REJECT_FIELD,
                                "field \"axis\" = %g is outside [%d, %d] "
                                "(within one detector width of the detector)",
                                g->axis, -w, 2 * w);
    r = proto_get_number_list(root, NULL, "axis_shift", OPTIONAL, g->n_proj,
                              &spec->axis_shift, &n, why);
    if (r < 0)
        return -1;
    for (int p = 0; r == FIELD_OK && p < n; p++)
        if (!rtomo_fbp_axis_shift_valid(spec->axis_shift[p], w))
            return rtomo_reject_set(why, RTOMO_REJECT_FIELD,
                                    "field \"axis_shift[%d]\" = %g is "
                                    "outside [%d, %d] (at most the detector "
                                    "width)", p, spec->axis_shift[p], -w, w);
    g->axis_shift = spec->axis_shift;
    /* A 360-degree scan with the axis near an edge: the engine checks the
     * angles and the axis (bad_geometry names what is wrong). */
    if (proto_get_bool(root, NULL, "half_acquisition", OPTIONAL,
                       &g->half_acquisition, why) < 0)
        return -1;
    if (g->half_acquisition && spec->axis_auto)
        return rtomo_reject_set(why, RTOMO_REJECT_FIELD,
                                "field \"half_acquisition\" needs the axis "
                                "as a number of bins, not \"auto\" (its "
                                "opposed projections overlap only near the "
                                "edge)");
    return 0;
}

static int decode_frames(const json_t *root, rtomo_scan_spec *spec,
                         rtomo_reject_info *why)
{
    int dtype = (int)spec->dtype;
    if (proto_get_enum(root, NULL, "dtype", OPTIONAL, proto_parse_dtype,
                       "\"uint8\", \"uint16\", \"float32\"", &dtype, why) < 0 ||
        proto_get_int32(root, NULL, "darks", OPTIONAL, 0,
                        PROTO_MAX_FRAMES_ANNOUNCED, &spec->n_darks, why) < 0 ||
        proto_get_int32(root, NULL, "flats", OPTIONAL, 0,
                        PROTO_MAX_FRAMES_ANNOUNCED, &spec->n_flats, why) < 0 ||
        proto_get_int32(root, NULL, "flats_after", OPTIONAL, 0,
                        PROTO_MAX_FRAMES_ANNOUNCED, &spec->n_flats_after,
                        why) < 0)
        return -1;
    if (spec->n_flats_after > 0 && spec->n_flats == 0)
        return rtomo_reject_set(why, RTOMO_REJECT_FIELD,
                                "field \"flats_after\" = %d needs flats "
                                "before the projections too (\"flats\")",
                                spec->n_flats_after);
    spec->dtype = (rtomo_dtype)dtype;
    return 0;
}

/* Set `flag` in spec->given when reader `r` found its field. */
static int given(rtomo_scan_spec *spec, unsigned flag, int r)
{
    if (r == FIELD_OK)
        spec->given |= flag;
    return r;
}

static int decode_filter(const json_t *rec, rtomo_scan_spec *spec,
                         rtomo_reject_info *why)
{
    rtomo_fbp_geometry *g = &spec->geometry;
    int window = (int)g->window, interp = (int)g->interp;
    int fov = (int)g->field_of_view;
    const char *path = "reconstruction";
    if (given(spec, RTOMO_SPEC_HAS_WINDOW,
              proto_get_enum(rec, path, "filter", OPTIONAL, proto_parse_window,
                             "\"ram-lak\", \"shepp-logan\", \"cosine\", "
                             "\"hamming\", \"hann\"", &window, why)) < 0 ||
        given(spec, RTOMO_SPEC_HAS_INTERP,
              proto_get_enum(rec, path, "interpolation", OPTIONAL,
                             proto_parse_interp, "\"linear\", \"nearest\"",
                             &interp, why)) < 0 ||
        given(spec, RTOMO_SPEC_HAS_FOV,
              proto_get_enum(rec, path, "field_of_view", OPTIONAL,
                             proto_parse_fov, "\"full\", \"circle\"", &fov,
                             why)) < 0 ||
        given(spec, RTOMO_SPEC_HAS_CUTOFF,
              proto_get_number(rec, path, "cutoff", OPTIONAL, &g->cutoff,
                               why)) < 0 ||
        given(spec, RTOMO_SPEC_HAS_ANGLE_WEIGHTS,
              proto_get_bool(rec, path, "angle_weights", OPTIONAL,
                             &g->angle_weights, why)) < 0)
        return -1;
    if ((spec->given & RTOMO_SPEC_HAS_CUTOFF) &&
        !(g->cutoff > 0.0 && g->cutoff <= 1.0))
        return rtomo_reject_set(why, RTOMO_REJECT_FIELD,
                                "field \"reconstruction.cutoff\" = %g is "
                                "outside (0, 1] (fraction of Nyquist)",
                                g->cutoff);
    g->window = (rtomo_window)window;
    g->interp = (rtomo_interp)interp;
    g->field_of_view = (rtomo_fov)fov;
    return 0;
}

static int decode_region(const json_t *rec, rtomo_scan_spec *spec,
                         rtomo_reject_info *why)
{
    rtomo_fbp_geometry *g = &spec->geometry;
    const char *path = "reconstruction";
    int64_t roi[4];
    int r = proto_get_int_tuple(rec, path, "roi", OPTIONAL, 4, 0,
                                PROTO_MAX_EDGE, roi, why);
    if (r < 0)
        return -1;
    if (r == FIELD_OK) {
        if (roi[2] < 1 || roi[3] < 1)
            return rtomo_reject_set(why, RTOMO_REJECT_FIELD,
                                    "field \"reconstruction.roi\" = [x, y, w, "
                                    "h] has an empty size %lldx%lld",
                                    (long long)roi[2], (long long)roi[3]);
        g->roi_x = (int)roi[0];
        g->roi_y = (int)roi[1];
        g->roi_width = (int)roi[2];
        g->roi_height = (int)roi[3];
        spec->given |= RTOMO_SPEC_HAS_ROI;
    }
    if (given(spec, RTOMO_SPEC_HAS_SLICE_SIZE,
              proto_get_int32(rec, path, "slice_size", OPTIONAL, 1,
                              PROTO_MAX_EDGE, &g->slice_size, why)) < 0)
        return -1;
    /* Only against a slice_size of this message: without one the grid is
     * the daemon's configured slice size, which the daemon checks
     * (bad_geometry). */
    int grid = g->slice_size;
    if ((spec->given & RTOMO_SPEC_HAS_ROI) &&
        (spec->given & RTOMO_SPEC_HAS_SLICE_SIZE) &&
        (g->roi_x + g->roi_width > grid || g->roi_y + g->roi_height > grid))
        return rtomo_reject_set(why, RTOMO_REJECT_FIELD,
                                "field \"reconstruction.roi\" = [%d, %d, %d, "
                                "%d] is not inside the %dx%d slice grid of "
                                "\"reconstruction.slice_size\"", g->roi_x,
                                g->roi_y, g->roi_width, g->roi_height, grid,
                                grid);
    return 0;
}

static int decode_slices(const json_t *rec, rtomo_scan_spec *spec,
                         rtomo_reject_info *why)
{
    if (!proto_has_field(rec, "slices"))
        return 0;
    json_t *value = json_object_get(rec, "slices");
    if (rtomo_slice_selection_from_json(value, "reconstruction.slices",
                                        &spec->slices, why) < 0)
        return -1;
    spec->given |= RTOMO_SPEC_HAS_SLICES;
    int *rows, n_rows;
    if (rtomo_slice_selection_expand(&spec->slices, spec->geometry.det_height,
                                     &rows, &n_rows, why) < 0) {
        /* expand() speaks of "slices"; name the field as it is on the wire.
         * Rows outside this message's detector are a bad_field (expand's
         * bad_geometry is for the daemon's configured selection). */
        if (why) {
            char message[RTOMO_REASON_MAX];
            memcpy(message, why->message, sizeof message);
            rtomo_reject_set(why, RTOMO_REJECT_FIELD, "reconstruction.%s",
                             message);
        }
        return -1;
    }
    free(rows);
    return 0;
}

/* reconstruction.phase: any of its four numbers (the daemon's
 * configuration supplies the others); the engine checks their ranges
 * once they are combined. */
static int decode_phase(const json_t *rec, rtomo_scan_spec *spec,
                        rtomo_reject_info *why)
{
    const json_t *phase;
    int r = proto_get_object(rec, "reconstruction", "phase", OPTIONAL, &phase,
                             why);
    if (r != FIELD_OK)
        return r;
    rtomo_fbp_phase *p = &spec->geometry.phase;
    const char *path = "reconstruction.phase";
    const struct { const char *key; double *value; unsigned flag; } field[] = {
        {"delta_beta", &p->delta_beta, RTOMO_SPEC_HAS_PHASE_DELTA_BETA},
        {"energy_kev", &p->energy_kev, RTOMO_SPEC_HAS_PHASE_ENERGY},
        {"distance_m", &p->distance_m, RTOMO_SPEC_HAS_PHASE_DISTANCE},
        {"pixel_m", &p->pixel_m, RTOMO_SPEC_HAS_PHASE_PIXEL},
    };
    for (size_t i = 0; i < sizeof field / sizeof field[0]; i++) {
        if (given(spec, field[i].flag,
                  proto_get_number(phase, path, field[i].key, OPTIONAL,
                                   field[i].value, why)) < 0)
            return -1;
        if ((spec->given & field[i].flag) && *field[i].value < 0.0)
            return rtomo_reject_set(why, RTOMO_REJECT_FIELD,
                                    "field \"%s.%s\" = %g is negative", path,
                                    field[i].key, *field[i].value);
    }
    return 0;
}

static int decode_rings(const json_t *rec, rtomo_scan_spec *spec,
                        rtomo_reject_info *why)
{
    rtomo_fbp_geometry *g = &spec->geometry;
    int rings = (int)g->rings;
    const char *path = "reconstruction";
    if (given(spec, RTOMO_SPEC_HAS_RINGS,
              proto_get_enum(rec, path, "rings", OPTIONAL, proto_parse_rings,
                             "\"off\", \"column_mean\"", &rings, why)) < 0)
        return -1;
    g->rings = (rtomo_rings)rings;
    int r = given(spec, RTOMO_SPEC_HAS_RINGS_WIDTH,
                  proto_get_int32(rec, path, "rings_width", OPTIONAL, 3, 255,
                                  &g->rings_width, why));
    if (r < 0)
        return -1;
    if (r == FIELD_OK && g->rings_width % 2 == 0)
        return rtomo_reject_set(why, RTOMO_REJECT_FIELD,
                                "field \"reconstruction.rings_width\" = %d "
                                "is even (a running median needs an odd "
                                "width)", g->rings_width);
    return 0;
}

static int parse_method(const char *name, int *out)
{
    rtomo_method m;
    if (rtomo_method_parse(name, &m) != RTOMO_OK)
        return -1;
    *out = (int)m;
    return 0;
}

/* reconstruction.method and the iterative options; whether they go with
 * the rest of the scan is check_method's. */
static int decode_method(const json_t *rec, rtomo_scan_spec *spec,
                         rtomo_reject_info *why)
{
    rtomo_method_settings *m = &spec->method;
    const char *path = "reconstruction";
    int method = (int)m->method;
    if (given(spec, RTOMO_SPEC_HAS_METHOD,
              proto_get_enum(rec, path, "method", OPTIONAL, parse_method,
                             "\"fbp\", \"sirt\", \"cgls\"", &method,
                             why)) < 0)
        return -1;
    m->method = (rtomo_method)method;
    if (given(spec, RTOMO_SPEC_HAS_ITERATIONS,
              proto_get_int32(rec, path, "iterations", OPTIONAL, 1,
                              RTOMO_MAX_ITERATIONS, &m->iterations, why)) < 0 ||
        given(spec, RTOMO_SPEC_HAS_PUBLISH_EVERY,
              proto_get_int32(rec, path, "publish_every", OPTIONAL, 0,
                              RTOMO_MAX_ITERATIONS, &m->publish_every,
                              why)) < 0 ||
        given(spec, RTOMO_SPEC_HAS_NONNEGATIVE,
              proto_get_bool(rec, path, "nonnegative", OPTIONAL,
                             &m->nonnegative, why)) < 0 ||
        given(spec, RTOMO_SPEC_HAS_WARM_START,
              proto_get_bool(rec, path, "warm_start", OPTIONAL,
                             &m->warm_start, why)) < 0)
        return -1;
    int r = given(spec, RTOMO_SPEC_HAS_TOLERANCE,
                  proto_get_number(rec, path, "tolerance", OPTIONAL,
                                   &m->tolerance, why));
    if (r == FIELD_OK && !(m->tolerance >= 0.0 && m->tolerance < 1.0))
        return rtomo_reject_set(why, RTOMO_REJECT_FIELD,
                                "field \"reconstruction.tolerance\" = %g is "
                                "not in [0, 1) (a relative residual; 0 = run "
                                "every iteration)", m->tolerance);
    return r < 0 ? -1 : 0;
}

static int decode_reconstruction(const json_t *root, rtomo_scan_spec *spec,
                                 rtomo_reject_info *why)
{
    const json_t *rec;
    int r = proto_get_object(root, NULL, "reconstruction", OPTIONAL, &rec,
                             why);
    if (r != FIELD_OK)
        return r;
    if (decode_filter(rec, spec, why) < 0 || decode_region(rec, spec, why) < 0 ||
        decode_slices(rec, spec, why) < 0 || decode_phase(rec, spec, why) < 0 ||
        decode_rings(rec, spec, why) < 0 || decode_method(rec, spec, why) < 0)
        return -1;
    return 0;
}

static int parse_mode(const char *name, int *out)
{
    if (strcmp(name, "scan") == 0)
        *out = 0;
    else if (strcmp(name, "continuous") == 0)
        *out = 1;
    else
        return -1;
    return 0;
}

static int decode_mode(const json_t *root, rtomo_scan_spec *spec,
                       rtomo_reject_info *why)
{
    if (proto_get_enum(root, NULL, "mode", OPTIONAL, parse_mode,
                       "\"scan\", \"continuous\"", &spec->continuous, why) < 0)
        return -1;
    if (!spec->continuous) {
        if (proto_has_field(root, "every"))
            return rtomo_reject_set(why, RTOMO_REJECT_FIELD,
                                    "field \"every\" applies only with "
                                    "\"mode\": \"continuous\"");
        return 0;
    }
    if (spec->n_flats_after > 0)
        return rtomo_reject_set(why, RTOMO_REJECT_FIELD,
                                "field \"flats_after\" is for scans: a "
                                "continuous stream's new flats apply from "
                                "the next projection on");
    spec->window_every = spec->geometry.n_proj;
    return proto_get_int32(root, NULL, "every", OPTIONAL, 1,
                           PROTO_MAX_PROJECTIONS, &spec->window_every, why) < 0
               ? -1 : 0;
}

/* An iterative method works on the scan's line integrals, as normalised
 * with the flats before the projections, of the whole detector row, once
 * all projections are in: what the rest of the scan asks must agree.  The
 * daemon's own defaults (phase, rings) are checked against it there. */
static int check_method(const rtomo_scan_spec *spec, rtomo_reject_info *why)
{
    const rtomo_method_settings *m = &spec->method;
    const char *name = rtomo_method_name(m->method);
    const rtomo_fbp_geometry *g = &spec->geometry;
    const char *conflict = NULL;
    /* Without a method of its own the scan gets the daemon's: the daemon
     * judges the clamp against that. */
    if (m->nonnegative && m->method != RTOMO_METHOD_SIRT &&
        (spec->given & RTOMO_SPEC_HAS_METHOD))
        return rtomo_reject_set(why, RTOMO_REJECT_FIELD,
                                "field \"reconstruction.nonnegative\" "
                                "applies to \"sirt\" only (method \"%s\")",
                                name);
    if (m->method == RTOMO_METHOD_FBP)
        return 0;
    if (spec->continuous)
        conflict = "\"mode\": \"continuous\" (a window is published "
                   "before the next one; iterations would fall behind)";
    else if (g->half_acquisition)
        conflict = "\"half_acquisition\"";
    else if (spec->n_flats_after > 0)
        conflict = "\"flats_after\"";
    else if ((spec->given & RTOMO_SPEC_HAS_RINGS) &&
             g->rings != RTOMO_RINGS_OFF)
        conflict = "ring removal (\"reconstruction.rings\")";
    else if ((spec->given & RTOMO_SPEC_HAS_PHASE_DELTA_BETA) &&
             g->phase.delta_beta > 0.0)
        conflict = "phase retrieval (\"reconstruction.phase\")";
    if (!conflict)
        return 0;
    return rtomo_reject_set(why, RTOMO_REJECT_FIELD,
                            "field \"reconstruction.method\" = \"%s\" "
                            "cannot be combined with %s: the iterative "
                            "methods take the plain line integrals", name,
                            conflict);
}

/* The engine's validator as a backstop: every rule of PROTOCOL.md 3.3 was
 * checked above as a bad_field, so what it still refuses is beyond the
 * protocol's ranges (bad_geometry).  A ROI without a slice_size of this
 * message, and phase retrieval's numbers (some may come from the
 * daemon's configuration), are the daemon's to judge once combined. */
static int validate_geometry(const rtomo_scan_spec *spec,
                             rtomo_reject_info *why)
{
    rtomo_fbp_geometry g = spec->geometry;
    if (!(spec->given & RTOMO_SPEC_HAS_SLICE_SIZE))
        g.roi_x = g.roi_y = g.roi_width = g.roi_height = 0;
    memset(&g.phase, 0, sizeof g.phase);
    rtomo_error err;
    if (rtomo_fbp_geometry_validate(&g, &err) != RTOMO_OK)
        return rtomo_reject_set(why, RTOMO_REJECT_GEOMETRY,
                                "scan_begin geometry refused: %s", err.message);
    return 0;
}

int proto_decode_scan_begin(const json_t *root, const char *scan,
                            rtomo_scan_spec **out, rtomo_reject_info *why)
{
    rtomo_scan_spec *spec = malloc(sizeof *spec);
    if (!spec)
        return rtomo_reject_set(why, RTOMO_REJECT_OVERSIZE,
                                "no memory for a scan description");
    rtomo_scan_spec_init(spec);
    strcpy(spec->scan, scan);
    rtomo_fbp_geometry *g = &spec->geometry;
    if (decode_detector(root, g, why) < 0 ||
        proto_get_int32(root, NULL, "projections", REQUIRED, 1,
                        PROTO_MAX_PROJECTIONS, &g->n_proj, why) < 0 ||
        proto_decode_beam(root, spec, why) < 0 ||
        decode_angles(root, spec, why) < 0 || decode_axis(root, spec, why) < 0 ||
        decode_frames(root, spec, why) < 0 ||
        decode_reconstruction(root, spec, why) < 0 ||
        decode_mode(root, spec, why) < 0 || check_method(spec, why) < 0 ||
        (spec->cone ? proto_check_cone(root, spec, why)
                    : validate_geometry(spec, why)) < 0) {
        rtomo_scan_spec_clear(spec);
        free(spec);
        return -1;
    }
    *out = spec;
    return 0;
}

/* ------------------------------------------------------------ encoding ---- */

/* A JSON array of n doubles times `scale`; NULL on allocation failure. */
static json_t *number_array(const double *values, int n, double scale)
{
    json_t *a = json_array();
    for (int i = 0; a && i < n; i++)
        if (json_array_append_new(a, json_real(values[i] * scale)) < 0) {
            json_decref(a);
            return NULL;
        }
    return a;
}

/* The phase object's members that the scan gave (none: no object). */
static int encode_phase(json_t *rec, const rtomo_scan_spec *spec)
{
    const rtomo_fbp_phase *p = &spec->geometry.phase;
    const struct { const char *key; double value; unsigned flag; } field[] = {
        {"delta_beta", p->delta_beta, RTOMO_SPEC_HAS_PHASE_DELTA_BETA},
        {"energy_kev", p->energy_kev, RTOMO_SPEC_HAS_PHASE_ENERGY},
        {"distance_m", p->distance_m, RTOMO_SPEC_HAS_PHASE_DISTANCE},
        {"pixel_m", p->pixel_m, RTOMO_SPEC_HAS_PHASE_PIXEL},
    };
    json_t *phase = NULL;
    int e = 0;
    for (size_t i = 0; i < sizeof field / sizeof field[0]; i++) {
        if (!(spec->given & field[i].flag))
            continue;
        if (!phase && !(phase = json_object()))
            return -1;
        e |= json_object_set_new(phase, field[i].key, json_real(field[i].value));
    }
    return phase ? e | json_object_set_new(rec, "phase", phase) : 0;
}

/* reconstruction.method and the iterative options the scan gave. */
static int encode_method(json_t *rec, const rtomo_scan_spec *spec)
{
    const rtomo_method_settings *m = &spec->method;
    int e = 0;
    if (spec->given & RTOMO_SPEC_HAS_METHOD)
        e |= json_object_set_new(rec, "method",
                                 json_string(rtomo_method_name(m->method)));
    if (spec->given & RTOMO_SPEC_HAS_ITERATIONS)
        e |= json_object_set_new(rec, "iterations",
                                 json_integer(m->iterations));
    if (spec->given & RTOMO_SPEC_HAS_PUBLISH_EVERY)
        e |= json_object_set_new(rec, "publish_every",
                                 json_integer(m->publish_every));
    if (spec->given & RTOMO_SPEC_HAS_TOLERANCE)
        e |= json_object_set_new(rec, "tolerance", json_real(m->tolerance));
    if (spec->given & RTOMO_SPEC_HAS_NONNEGATIVE)
        e |= json_object_set_new(rec, "nonnegative",
                                 json_boolean(m->nonnegative));
    if (spec->given & RTOMO_SPEC_HAS_WARM_START)
        e |= json_object_set_new(rec, "warm_start",
                                 json_boolean(m->warm_start));
    return e;
}

/* Add the members of the optional "reconstruction" object. */
static int encode_reconstruction(json_t *root, const rtomo_scan_spec *spec)
{
    const rtomo_fbp_geometry *g = &spec->geometry;
    if (!spec->given)
        return 0;
    json_t *rec = json_object();
    int e = rec ? 0 : -1;
    if (spec->given & RTOMO_SPEC_HAS_WINDOW)
        e |= json_object_set_new(rec, "filter",
                                 json_string(rtomo_window_name(g->window)));
    if (spec->given & RTOMO_SPEC_HAS_ANGLE_WEIGHTS)
        e |= json_object_set_new(rec, "angle_weights",
                                 json_boolean(g->angle_weights));
    if (spec->given & RTOMO_SPEC_HAS_CUTOFF)
        e |= json_object_set_new(rec, "cutoff", json_real(g->cutoff));
    if (spec->given & RTOMO_SPEC_HAS_INTERP)
        e |= json_object_set_new(rec, "interpolation",
                                 json_string(rtomo_interp_name(g->interp)));
    if (spec->given & RTOMO_SPEC_HAS_FOV)
        e |= json_object_set_new(rec, "field_of_view",
                                 json_string(rtomo_fov_name(g->field_of_view)));
    if (spec->given & RTOMO_SPEC_HAS_SLICES)
        e |= json_object_set_new(rec, "slices",
                                 rtomo_slice_selection_to_json(&spec->slices));
    if (spec->given & RTOMO_SPEC_HAS_ROI)
        e |= json_object_set_new(rec, "roi",
                                 json_pack("[i, i, i, i]", g->roi_x, g->roi_y,
                                           g->roi_width, g->roi_height));
    if (spec->given & RTOMO_SPEC_HAS_SLICE_SIZE)
        e |= json_object_set_new(rec, "slice_size",
                                 json_integer(g->slice_size));
    e |= encode_phase(rec, spec);
    if (spec->given & RTOMO_SPEC_HAS_RINGS)
        e |= json_object_set_new(rec, "rings",
                                 json_string(rtomo_rings_name(g->rings)));
    if (spec->given & RTOMO_SPEC_HAS_RINGS_WIDTH)
        e |= json_object_set_new(rec, "rings_width",
                                 json_integer(g->rings_width));
    e |= encode_method(rec, spec);
    return e | json_object_set_new(root, "reconstruction", rec);
}

static int encode_angles(json_t *root, const rtomo_fbp_geometry *g)
{
    if (g->angles)
        return json_object_set_new(root, "angles",
                                   number_array(g->angles, g->n_proj,
                                                180.0 / M_PI));
    int e = json_object_set_new(root, "angle_start",
                                json_real(proto_degrees(g->angle_start)));
    if (g->angle_step != 0.0)
        e |= json_object_set_new(root, "angle_step",
                                 json_real(proto_degrees(g->angle_step)));
    return e;
}

char *rtomo_proto_encode_scan_begin(const rtomo_scan_spec *spec)
{
    const rtomo_fbp_geometry *g = &spec->geometry;
    json_t *root = json_pack(
        "{s:i, s:s, s:s, s:{s:i, s:i}, s:i, s:s, s:i, s:i}", "protocol",
        RTOMO_PROTOCOL_VERSION, "type", "scan_begin", "scan", spec->scan,
        "detector", "width", g->det_width, "height", g->det_height,
        "projections", g->n_proj, "dtype", rtomo_dtype_name(spec->dtype),
        "darks", spec->n_darks, "flats", spec->n_flats);
    if (!root)
        return NULL;
    int e = encode_angles(root, g);
    if (spec->axis_auto)
        e |= json_object_set_new(root, "axis", json_string("auto"));
    else if (isfinite(g->axis))
        e |= json_object_set_new(root, "axis", json_real(g->axis));
    if (g->axis_shift)
        e |= json_object_set_new(root, "axis_shift",
                                 number_array(g->axis_shift, g->n_proj, 1.0));
    if (g->half_acquisition)
        e |= json_object_set_new(root, "half_acquisition", json_true());
    if (spec->n_flats_after > 0)
        e |= json_object_set_new(root, "flats_after",
                                 json_integer(spec->n_flats_after));
    e |= encode_reconstruction(root, spec);
    if (spec->cone)
        e |= proto_encode_cone(root, spec);
    if (spec->continuous)
        e |= json_object_set_new(root, "mode", json_string("continuous"));
    if (spec->continuous && spec->window_every > 0)
        e |= json_object_set_new(root, "every",
                                 json_integer(spec->window_every));
    if (e) {
        json_decref(root);
        return NULL;
    }
    return proto_dump(root);
}
