/*
 * proto_slices.c — slice selections: which detector rows a reconstruction
 * covers.  On the wire a selection is "all", a list of rows [r0, r1, ...]
 * or a range {"first": a, "count": n, "step": s}; this file parses, prints,
 * copies and expands them.
 */
#include "config.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto_internal.h"

void rtomo_slice_selection_clear(rtomo_slice_selection *sel)
{
    if (!sel)
        return;
    free(sel->rows);
    memset(sel, 0, sizeof *sel);
    sel->kind = RTOMO_SLICES_ALL;
}

int rtomo_slice_selection_copy(rtomo_slice_selection *dst,
                               const rtomo_slice_selection *src)
{
    rtomo_slice_selection copy = *src;
    copy.rows = NULL;
    if (src->kind == RTOMO_SLICES_LIST && src->n_rows > 0) {
        copy.rows = malloc((size_t)src->n_rows * sizeof *copy.rows);
        if (!copy.rows)
            return -1;
        memcpy(copy.rows, src->rows, (size_t)src->n_rows * sizeof *copy.rows);
    }
    *dst = copy;
    return 0;
}

/* The rows of a range; refuses empty ones and rows past INT_MAX. */
static int expand_range(const rtomo_slice_selection *sel, int det_height,
                        int *rows, rtomo_reject_info *why)
{
    int64_t last = (int64_t)sel->first + (int64_t)(sel->count - 1) * sel->step;
    if (sel->first < 0 || last >= det_height)
        return rtomo_reject_set(why, RTOMO_REJECT_GEOMETRY,
                                "slices {first %d, count %d, step %d} reach "
                                "row %lld, outside the detector's rows "
                                "[0, %d)", sel->first, sel->count, sel->step,
                                (long long)last, det_height);
    for (int i = 0; i < sel->count; i++)
        rows[i] = sel->first + i * sel->step;
    return 0;
}

/* The rows of a list: each inside the detector, none twice. */
static int expand_list(const rtomo_slice_selection *sel, int det_height,
                       int *rows, rtomo_reject_info *why)
{
    unsigned char *seen = calloc((size_t)det_height, 1);
    if (!seen)
        return rtomo_reject_set(why, RTOMO_REJECT_OVERSIZE,
                                "no memory to check the slice list");
    int result = 0;
    for (int i = 0; i < sel->n_rows && result == 0; i++) {
        int r = sel->rows[i];
        if (r < 0 || r >= det_height)
            result = rtomo_reject_set(why, RTOMO_REJECT_GEOMETRY,
                                      "slices[%d] = %d is outside the "
                                      "detector's rows [0, %d)", i, r,
                                      det_height);
        else if (seen[r]++)
            result = rtomo_reject_set(why, RTOMO_REJECT_FIELD,
                                      "slices[%d] repeats row %d", i, r);
        else
            rows[i] = r;
    }
    free(seen);
    return result;
}

static int selection_size(const rtomo_slice_selection *sel, int det_height,
                          rtomo_reject_info *why)
{
    switch (sel->kind) {
    case RTOMO_SLICES_ALL:
        return det_height;
    case RTOMO_SLICES_RANGE:
        if (sel->count < 1 || sel->step < 1)
            return rtomo_reject_set(why, RTOMO_REJECT_FIELD,
                                    "slices range needs count >= 1 and step "
                                    ">= 1, got count %d, step %d",
                                    sel->count, sel->step);
        return sel->count;
    case RTOMO_SLICES_LIST:
        if (sel->n_rows < 1 || !sel->rows)
            return rtomo_reject_set(why, RTOMO_REJECT_FIELD,
                                    "slices list is empty");
        return sel->n_rows;
    }
    return rtomo_reject_set(why, RTOMO_REJECT_FIELD,
                            "slices selection kind %d is unknown",
                            (int)sel->kind);
}

int rtomo_slice_selection_expand(const rtomo_slice_selection *sel,
                                 int det_height, int **rows, int *n_rows,
                                 rtomo_reject_info *why)
{
    *rows = NULL;
    *n_rows = 0;
    if (det_height < 1)
        return rtomo_reject_set(why, RTOMO_REJECT_GEOMETRY,
                                "detector has %d rows", det_height);
    int n = selection_size(sel, det_height, why);
    if (n < 0)
        return -1;
    int *out = malloc((size_t)n * sizeof *out);
    if (!out)
        return rtomo_reject_set(why, RTOMO_REJECT_OVERSIZE,
                                "no memory for %d slice rows", n);
    int result = 0;
    if (sel->kind == RTOMO_SLICES_ALL)
        for (int i = 0; i < n; i++)
            out[i] = i;
    else if (sel->kind == RTOMO_SLICES_RANGE)
        result = expand_range(sel, det_height, out, why);
    else
        result = expand_list(sel, det_height, out, why);
    if (result < 0) {
        free(out);
        return -1;
    }
    *rows = out;
    *n_rows = n;
    return 0;
}

/* --------------------------------------------------------------- JSON ---- */

static int range_from_json(const json_t *value, const char *field,
                           rtomo_slice_selection *sel, rtomo_reject_info *why)
{
    rtomo_slice_selection s = {.kind = RTOMO_SLICES_RANGE, .step = 1};
    if (proto_get_int32(value, field, "first", REQUIRED, 0, INT_MAX, &s.first,
                        why) < 0 ||
        proto_get_int32(value, field, "count", REQUIRED, 1, PROTO_MAX_LIST,
                        &s.count, why) < 0 ||
        proto_get_int32(value, field, "step", OPTIONAL, 1, INT_MAX, &s.step,
                        why) < 0)
        return -1;
    *sel = s;
    return 0;
}

static int list_from_json(const json_t *value, const char *field,
                          rtomo_slice_selection *sel, rtomo_reject_info *why)
{
    size_t n = json_array_size(value);
    if (n < 1 || n > PROTO_MAX_LIST)
        return rtomo_reject_set(why, RTOMO_REJECT_FIELD,
                                "field \"%s\" lists %zu rows; 1..%d allowed",
                                field, n, PROTO_MAX_LIST);
    int *rows = malloc(n * sizeof *rows);
    if (!rows)
        return rtomo_reject_set(why, RTOMO_REJECT_OVERSIZE,
                                "no memory for %zu slice rows", n);
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_array_get(value, i);
        int64_t r;
        char element[160];
        snprintf(element, sizeof element, "%s[%zu]", field, i);
        if (!json_is_integer(v)) {
            free(rows);
            return rtomo_reject_set(why, RTOMO_REJECT_FIELD,
                                    "field \"%s\" must be an integer row, "
                                    "got %s", element,
                                    proto_json_type_name(v));
        }
        r = (int64_t)json_integer_value(v);
        if (r < 0 || r > INT_MAX) {
            free(rows);
            return rtomo_reject_set(why, RTOMO_REJECT_FIELD,
                                    "field \"%s\" = %lld is not a row number",
                                    element, (long long)r);
        }
        rows[i] = (int)json_integer_value(v);
    }
    rtomo_slice_selection_clear(sel);
    sel->kind = RTOMO_SLICES_LIST;
    sel->rows = rows;
    sel->n_rows = (int)n;
    return 0;
}

int rtomo_slice_selection_from_json(const json_t *value, const char *field,
                                    rtomo_slice_selection *sel,
                                    rtomo_reject_info *why)
{
    if (!field)
        field = "slices";
    if (json_is_string(value) && strcmp(json_string_value(value), "all") == 0) {
        rtomo_slice_selection_clear(sel);
        return 0;
    }
    if (json_is_array(value))
        return list_from_json(value, field, sel, why);
    if (json_is_object(value)) {
        rtomo_slice_selection range;
        if (range_from_json(value, field, &range, why) < 0)
            return -1;
        rtomo_slice_selection_clear(sel);
        *sel = range;
        return 0;
    }
    return rtomo_reject_set(why, RTOMO_REJECT_FIELD,
                            "field \"%s\" must be \"all\", a list of rows or "
                            "{\"first\", \"count\", \"step\"}, got %s", field,
                            value ? proto_json_type_name(value) : "nothing");
}

json_t *rtomo_slice_selection_to_json(const rtomo_slice_selection *sel)
{
    switch (sel->kind) {
    case RTOMO_SLICES_RANGE:
        return json_pack("{s:i, s:i, s:i}", "first", sel->first, "count",
                         sel->count, "step", sel->step);
    case RTOMO_SLICES_LIST: {
        json_t *list = json_array();
        for (int i = 0; list && i < sel->n_rows; i++)
            if (json_array_append_new(list, json_integer(sel->rows[i])) < 0) {
                json_decref(list);
                return NULL;
            }
        return list;
    }
    case RTOMO_SLICES_ALL:
    default:
        return json_string("all");
    }
}
