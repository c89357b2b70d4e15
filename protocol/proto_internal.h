/*
 * proto_internal.h — private to protocol/: typed, range-checked readers of
 * JSON header fields, and the per-message decoders that
 * rtomo_proto_decode_ingest dispatches to.  Every reader names the field it
 * reads (with its path, e.g. "detector.width") in the reject message, so
 * that an operator reading a daemon event knows what to fix.
 */
#ifndef RTOMO_PROTO_INTERNAL_H
#define RTOMO_PROTO_INTERNAL_H

#include <jansson.h>
#include <stdint.h>

#include "rtomo_protocol.h"

/* Results of the field readers.  An optional field that is absent or JSON
 * null gives FIELD_ABSENT and leaves *out untouched; a required one gives
 * a bad_field reject instead. */
enum { FIELD_ERROR = -1, FIELD_ABSENT = 0, FIELD_OK = 1 };
enum { OPTIONAL = 0, REQUIRED = 1 };

/* Largest count of any list in a header (angles, shifts, slice rows). */
#define PROTO_MAX_LIST (1 << 20)
/* Sizes the engines accept (fbp_engine.c, sbdx_engine.c): checked here
 * too so that an absurd size is a bad_field naming the wire field; the
 * engine's validator still has the last word (bad_geometry). */
#define PROTO_MAX_EDGE 65536
#define PROTO_MAX_PROJECTIONS (1 << 20)
#define PROTO_MAX_FRAMES_ANNOUNCED 65536
#define PROTO_MAX_HOLES 4096
#define PROTO_MAX_SBDX_DETECTOR 4096
#define PROTO_MAX_SHIFT 1024

/* Name of a JSON value's type, for "expected X, got Y" messages. */
const char *proto_json_type_name(const json_t *value);

/* 1 when obj has `key` with a value other than null. */
int proto_has_field(const json_t *obj, const char *key);

/* obj[key] as an integer in [lo, hi].  `path` prefixes the key in messages
 * ("" or NULL for top-level fields). */
int proto_get_int(const json_t *obj, const char *path, const char *key,
                  int required, int64_t lo, int64_t hi, int64_t *out,
                  rtomo_reject_info *why);
/* Same, stored into an int (lo and hi must fit in int). */
int proto_get_int32(const json_t *obj, const char *path, const char *key,
                    int required, int lo, int hi, int *out,
                    rtomo_reject_info *why);
/* obj[key] as a finite number (integer or real). */
int proto_get_number(const json_t *obj, const char *path, const char *key,
                     int required, double *out, rtomo_reject_info *why);
/* obj[key] as a string; *out points into obj. */
int proto_get_string(const json_t *obj, const char *path, const char *key,
                     int required, const char **out, rtomo_reject_info *why);
int proto_get_bool(const json_t *obj, const char *path, const char *key,
                   int required, int *out, rtomo_reject_info *why);
int proto_get_object(const json_t *obj, const char *path, const char *key,
                     int required, const json_t **out,
                     rtomo_reject_info *why);
/* obj[key] as an array of exactly `n` integers, each in [lo, hi]. */
int proto_get_int_tuple(const json_t *obj, const char *path, const char *key,
                        int required, int n, int64_t lo, int64_t hi,
                        int64_t *out, rtomo_reject_info *why);
/* obj[key] as an array of finite numbers.  expected > 0 demands that
 * length; expected == 0 accepts 1..PROTO_MAX_LIST.  *out is malloc'd. */
int proto_get_number_list(const json_t *obj, const char *path,
                          const char *key, int required, int expected,
                          double **out, int *n, rtomo_reject_info *why);
/* obj[key] as an enum spelled by one of the names parse() accepts;
 * `choices` lists them for the message. */
int proto_get_enum(const json_t *obj, const char *path, const char *key,
                   int required, int (*parse)(const char *, int *),
                   const char *choices, int *out, rtomo_reject_info *why);

/* A scan id: 1..RTOMO_ID_MAX-1 characters of [A-Za-z0-9_.:-]. */
int proto_get_scan_id(const json_t *obj, char out[RTOMO_ID_MAX],
                      rtomo_reject_info *why);
/* 1 when s is a valid scan id. */
int proto_scan_id_valid(const char *s);

/* Parse header bytes into a JSON object, rejecting oversize headers, bad
 * syntax, duplicate keys and non-objects.  Returns NULL with *why set. */
json_t *proto_parse_object(const void *bytes, size_t size,
                           rtomo_reject_info *why);

/* Replace bytes that are not valid UTF-8 by '?', in place: messages quote
 * header text cut at arbitrary byte counts, and JSON text must be UTF-8. */
void proto_utf8_sanitize(char *text);

/* Serialise compactly; consumes (decrefs) `root`.  NULL on failure. */
char *proto_dump(json_t *root);

/* Enum parsers with the int signature proto_get_enum takes. */
int proto_parse_dtype(const char *name, int *out);
int proto_parse_window(const char *name, int *out);
int proto_parse_interp(const char *name, int *out);
int proto_parse_fov(const char *name, int *out);
int proto_parse_rings(const char *name, int *out);

/* Decoders of begin messages (root already checked for version, type and
 * scan id; `scan` is that id). */
int proto_decode_scan_begin(const json_t *root, const char *scan,
                            rtomo_scan_spec **out, rtomo_reject_info *why);
int proto_decode_sbdx_begin(const json_t *root, const char *scan,
                            rtomo_sbdx_spec **out, rtomo_reject_info *why);

/* "beam": "cone" (proto_cone.c): decode "beam" and the "cone" object
 * (spec->cone stays NULL for a parallel beam); after the rest of the
 * begin, check what FDK can do and validate through the cone engine; and
 * add "beam" and "cone" to an encoded begin. */
int proto_decode_beam(const json_t *root, rtomo_scan_spec *spec,
                      rtomo_reject_info *why);
int proto_check_cone(const json_t *root, rtomo_scan_spec *spec,
                     rtomo_reject_info *why);
int proto_encode_cone(json_t *root, const rtomo_scan_spec *spec);

/* Degrees <-> radians, the one conversion between wire and engine. */
double proto_radians(double degrees);
double proto_degrees(double radians);

/* The uint16 scaling of SBDX planes (sbdx_begin's output, image headers):
 * u16_scale a positive normal float32 of at most 1e30, |u16_offset| at
 * most 1e30, judged on the values as sent; `path` prefixes the field names
 * in the reject ("output." or "").  Returns 0, or -1 with `why` filled. */
int proto_check_u16_scaling(double scale, double offset, const char *path,
                            rtomo_reject_info *why);

#endif /* RTOMO_PROTO_INTERNAL_H */
