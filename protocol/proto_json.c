/*
 * proto_json.c — typed, range-checked readers of JSON header fields (see
 * proto_internal.h), header parsing and serialisation.  Every reject names
 * the field with its full path and, where there is one, the offending value.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto_internal.h"

const char *proto_json_type_name(const json_t *value)
{
    switch (json_typeof(value)) {
    case JSON_OBJECT: return "object";
    case JSON_ARRAY: return "array";
    case JSON_STRING: return "string";
    case JSON_INTEGER: return "integer";
    case JSON_REAL: return "real";
    case JSON_TRUE:
    case JSON_FALSE: return "boolean";
    case JSON_NULL: return "null";
    }
    return "unknown";
}

/* "path.key", or "key" at the top level. */
static const char *field_name(char *buf, size_t size, const char *path,
                              const char *key)
{
    if (path && *path)
        snprintf(buf, size, "%s.%s", path, key);
    else
        snprintf(buf, size, "%s", key);
    return buf;
}

#define NAME_BUF 128
#define NAME(path, key) field_name(name_buf, sizeof name_buf, path, key)

/* Find obj[key]; absent and null count as missing.  Returns FIELD_OK with
 * *value set, FIELD_ABSENT for an optional missing field, FIELD_ERROR (with
 * a reject) for a required one. */
static int lookup(const json_t *obj, const char *path, const char *key,
                  int required, json_t **value, rtomo_reject_info *why)
{
    json_t *v = json_object_get(obj, key);
    if (v && !json_is_null(v)) {
        *value = v;
        return FIELD_OK;
    }
    if (!required)
        return FIELD_ABSENT;
    char name_buf[NAME_BUF];
    return rtomo_reject_set(why, RTOMO_REJECT_FIELD, "missing field \"%s\"",
                            NAME(path, key));
}

int proto_has_field(const json_t *obj, const char *key)
{
    json_t *v = json_object_get(obj, key);
    return v && !json_is_null(v);
}

static int wrong_type(const char *path, const char *key, const char *want,
                      const json_t *got, rtomo_reject_info *why)
{
    char name_buf[NAME_BUF];
    return rtomo_reject_set(why, RTOMO_REJECT_FIELD,
                            "field \"%s\" must be %s, got %s", NAME(path, key),
                            want, proto_json_type_name(got));
}

/* Check one integer value (an object member or an array element called
 * `name`) against [lo, hi]. */
static int check_int_value(const json_t *v, const char *name, int64_t lo,
                           int64_t hi, int64_t *out, rtomo_reject_info *why)
{
    if (!json_is_integer(v))
        return rtomo_reject_set(why, RTOMO_REJECT_FIELD,
                                "field \"%s\" must be an integer, got %s",
                                name, proto_json_type_name(v));
    int64_t x = (int64_t)json_integer_value(v);
    if (x < lo || x > hi)
        return rtomo_reject_set(why, RTOMO_REJECT_FIELD,
                                "field \"%s\" = %lld is outside [%lld, %lld]",
                                name, (long long)x, (long long)lo,
                                (long long)hi);
    *out = x;
    return FIELD_OK;
}

static int check_number_value(const json_t *v, const char *name, double *out,
                              rtomo_reject_info *why)
{
    if (!json_is_number(v))
        return rtomo_reject_set(why, RTOMO_REJECT_FIELD,
                                "field \"%s\" must be a number, got %s", name,
                                proto_json_type_name(v));
    double x = json_number_value(v);
    if (!isfinite(x))
        return rtomo_reject_set(why, RTOMO_REJECT_FIELD,
                                "field \"%s\" is not a finite number", name);
    *out = x;
    return FIELD_OK;
}

int proto_get_int(const json_t *obj, const char *path, const char *key,
                  int required, int64_t lo, int64_t hi, int64_t *out,
                  rtomo_reject_info *why)
{
    json_t *v = NULL;
    int r = lookup(obj, path, key, required, &v, why);
    if (r != FIELD_OK)
        return r;
    char name_buf[NAME_BUF];
    return check_int_value(v, NAME(path, key), lo, hi, out, why) < 0
               ? FIELD_ERROR : FIELD_OK;
}

int proto_get_int32(const json_t *obj, const char *path, const char *key,
                    int required, int lo, int hi, int *out,
                    rtomo_reject_info *why)
{
    int64_t x;
    int r = proto_get_int(obj, path, key, required, lo, hi, &x, why);
    if (r == FIELD_OK)
        *out = (int)x;
    return r;
}

int proto_get_number(const json_t *obj, const char *path, const char *key,
                     int required, double *out, rtomo_reject_info *why)
{
    json_t *v = NULL;
    int r = lookup(obj, path, key, required, &v, why);
    if (r != FIELD_OK)
        return r;
    char name_buf[NAME_BUF];
    return check_number_value(v, NAME(path, key), out, why) < 0
               ? FIELD_ERROR : FIELD_OK;
}

int proto_get_string(const json_t *obj, const char *path, const char *key,
                     int required, const char **out, rtomo_reject_info *why)
{
    json_t *v = NULL;
    int r = lookup(obj, path, key, required, &v, why);
    if (r != FIELD_OK)
        return r;
    if (!json_is_string(v))
        return wrong_type(path, key, "a string", v, why);
    *out = json_string_value(v);
    return FIELD_OK;
}

int proto_get_bool(const json_t *obj, const char *path, const char *key,
                   int required, int *out, rtomo_reject_info *why)
{
    json_t *v = NULL;
    int r = lookup(obj, path, key, required, &v, why);
    if (r != FIELD_OK)
        return r;
    if (!json_is_boolean(v))
        return wrong_type(path, key, "true or false", v, why);
    *out = json_is_true(v);
    return FIELD_OK;
}

int proto_get_object(const json_t *obj, const char *path, const char *key,
                     int required, const json_t **out, rtomo_reject_info *why)
{
    json_t *v = NULL;
    int r = lookup(obj, path, key, required, &v, why);
    if (r != FIELD_OK)
        return r;
    if (!json_is_object(v))
        return wrong_type(path, key, "an object", v, why);
    *out = v;
    return FIELD_OK;
}

/* obj[key] as an array; n_want > 0 demands that length, otherwise
 * 1..PROTO_MAX_LIST elements. */
static int get_array(const json_t *obj, const char *path, const char *key,
                     int required, int n_want, json_t **out,
                     rtomo_reject_info *why)
{
    json_t *v = NULL;
    int r = lookup(obj, path, key, required, &v, why);
    if (r != FIELD_OK)
        return r;
    if (!json_is_array(v))
        return wrong_type(path, key, "an array", v, why);
    size_t n = json_array_size(v);
    char name_buf[NAME_BUF];
    if (n_want > 0 && n != (size_t)n_want)
        return rtomo_reject_set(why, RTOMO_REJECT_FIELD,
                                "field \"%s\" must have %d elements, got %zu",
                                NAME(path, key), n_want, n);
    if (n == 0 || n > PROTO_MAX_LIST)
        return rtomo_reject_set(why, RTOMO_REJECT_FIELD,
                                "field \"%s\" has %zu elements; 1..%d allowed",
                                NAME(path, key), n, PROTO_MAX_LIST);
    *out = v;
    return FIELD_OK;
}

int proto_get_int_tuple(const json_t *obj, const char *path, const char *key,
                        int required, int n, int64_t lo, int64_t hi,
                        int64_t *out, rtomo_reject_info *why)
{
    json_t *array = NULL;
    int r = get_array(obj, path, key, required, n, &array, why);
    if (r != FIELD_OK)
        return r;
    char name_buf[NAME_BUF], element[NAME_BUF + 32];
    NAME(path, key);
    for (int i = 0; i < n; i++) {
        snprintf(element, sizeof element, "%s[%d]", name_buf, i);
        if (check_int_value(json_array_get(array, i), element, lo, hi,
                            &out[i], why) < 0)
            return FIELD_ERROR;
    }
    return FIELD_OK;
}

int proto_get_number_list(const json_t *obj, const char *path,
                          const char *key, int required, int expected,
                          double **out, int *n, rtomo_reject_info *why)
{
    json_t *array = NULL;
    int r = get_array(obj, path, key, required, expected, &array, why);
    if (r != FIELD_OK)
        return r;
    size_t count = json_array_size(array);
    double *values = malloc(count * sizeof *values);
    char name_buf[NAME_BUF], element[NAME_BUF + 32];
    if (!values)
        return rtomo_reject_set(why, RTOMO_REJECT_OVERSIZE,
                                "no memory for the %zu elements of \"%s\"",
                                count, NAME(path, key));
    NAME(path, key);
    for (size_t i = 0; i < count; i++) {
        snprintf(element, sizeof element, "%s[%zu]", name_buf, i);
        if (check_number_value(json_array_get(array, i), element, &values[i],
                               why) < 0) {
            free(values);
            return FIELD_ERROR;
        }
    }
    *out = values;
    *n = (int)count;
    return FIELD_OK;
}

int proto_get_enum(const json_t *obj, const char *path, const char *key,
                   int required, int (*parse)(const char *, int *),
                   const char *choices, int *out, rtomo_reject_info *why)
{
    const char *s;
    int r = proto_get_string(obj, path, key, required, &s, why);
    if (r != FIELD_OK)
        return r;
    if (parse(s, out) != 0) {
        char name_buf[NAME_BUF];
        return rtomo_reject_set(why, RTOMO_REJECT_FIELD,
                                "field \"%s\" = \"%.40s\" is not one of %s",
                                NAME(path, key), s, choices);
    }
    return FIELD_OK;
}

int proto_scan_id_valid(const char *s)
{
    size_t n = strlen(s);
    if (n < 1 || n >= RTOMO_ID_MAX)
        return 0;
    return strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                     "0123456789_.:-") == n;
}

int proto_get_scan_id(const json_t *obj, char out[RTOMO_ID_MAX],
                      rtomo_reject_info *why)
{
    const char *s;
    if (proto_get_string(obj, NULL, "scan", REQUIRED, &s, why) != FIELD_OK)
        return FIELD_ERROR;
    if (!proto_scan_id_valid(s))
        return rtomo_reject_set(why, RTOMO_REJECT_FIELD,
                                "field \"scan\" = \"%.40s\" is not 1..%d "
                                "characters of A-Z a-z 0-9 _ . : -",
                                s, RTOMO_ID_MAX - 1);
    memcpy(out, s, strlen(s) + 1);
    return FIELD_OK;
}

json_t *proto_parse_object(const void *bytes, size_t size,
                           rtomo_reject_info *why)
{
    if (size > RTOMO_HEADER_MAX) {
        rtomo_reject_set(why, RTOMO_REJECT_OVERSIZE,
                         "header of %zu bytes exceeds the limit of %d bytes",
                         size, RTOMO_HEADER_MAX);
        return NULL;
    }
    if (!bytes || size == 0) {
        rtomo_reject_set(why, RTOMO_REJECT_JSON, "header is empty");
        return NULL;
    }
    json_error_t error;
    json_t *root = json_loadb(bytes, size, JSON_REJECT_DUPLICATES, &error);
    if (!root) {
        rtomo_reject_set(why, RTOMO_REJECT_JSON,
                         "header is not valid JSON: %s (line %d, column %d)",
                         error.text, error.line, error.column);
        return NULL;
    }
    if (!json_is_object(root)) {
        rtomo_reject_set(why, RTOMO_REJECT_JSON,
                         "header must be a JSON object, got %s",
                         proto_json_type_name(root));
        json_decref(root);
        return NULL;
    }
    return root;
}

char *proto_dump(json_t *root)
{
    if (!root)
        return NULL;
    char *text = json_dumps(root, JSON_COMPACT | JSON_REAL_PRECISION(17));
    json_decref(root);
    return text;
}

int proto_parse_dtype(const char *name, int *out)
{
    rtomo_dtype d;
    if (rtomo_dtype_parse(name, &d) != RTOMO_OK)
        return -1;
    *out = (int)d;
    return 0;
}

int proto_parse_window(const char *name, int *out)
{
    rtomo_window w;
    if (rtomo_window_parse(name, &w) != RTOMO_OK)
        return -1;
    *out = (int)w;
    return 0;
}

int proto_parse_interp(const char *name, int *out)
{
    rtomo_interp i;
    if (rtomo_interp_parse(name, &i) != RTOMO_OK)
        return -1;
    *out = (int)i;
    return 0;
}

int proto_parse_fov(const char *name, int *out)
{
    rtomo_fov f;
    if (rtomo_fov_parse(name, &f) != RTOMO_OK)
        return -1;
    *out = (int)f;
    return 0;
}

int proto_parse_rings(const char *name, int *out)
{
    rtomo_rings r;
    if (rtomo_rings_parse(name, &r) != RTOMO_OK)
        return -1;
    *out = (int)r;
    return 0;
}

double proto_radians(double degrees) { return degrees * (M_PI / 180.0); }
double proto_degrees(double radians) { return radians * (180.0 / M_PI); }
