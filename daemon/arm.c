/*
 * arm.c — scans armed by the control system on a detector-native input
 * (rtomod_input.h, PROTOCOL.md section 10).
 *
 * "arm" is a scan_begin (or sbdx_begin) in a control request: the request
 * less the arm's own fields is decoded by the protocol's own decoder and
 * begun by the same handler as a native begin, so the checks, rejects,
 * admission, events and the scan's record are those of a native scan.
 * The images of the input then become frames of that scan by their frame
 * number (blocks of darks, flats, projections, flats after), handed to
 * the native frame handlers with their pixels converted to the scan's
 * sample type; the stream's end of series or "disarm" hands them the end.
 */
#include "config.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rtomod.h"
#include "rtomod_frame_rows.h"
#include "rtomod_input.h"

/* The arm's own fields: everything else is the begin message. */
static const char *const arm_fields[] = {"cmd", "input", "frames",
                                         "angle_key", "channel", NULL};

static json_t *arm_error(const char *code, const char *format, ...)
    __attribute__((format(printf, 2, 3)));
static json_t *arm_error(const char *code, const char *format, ...)
{
    char message[RTOMO_REASON_MAX];
    va_list ap;
    va_start(ap, format);
    vsnprintf(message, sizeof message, format, ap);
    va_end(ap);
    return json_pack("{s:b, s:s, s:s}", "ok", 0, "error", code, "message",
                     message);
}

/* The input a request names ("input"), configured; NULL with *error. */
static rtomod_input *named_input(rtomod *d, const json_t *request,
                                 json_t **error)
{
    const char *name = json_string_value(json_object_get(request, "input"));
    for (int k = 0; name && d->inputs && k < RTOMOD_INPUT_COUNT; k++) {
        if (strcmp(name, rtomod_input_name((rtomod_input_kind)k)) != 0)
            continue;
        if (d->inputs->in[k].socket)
            return &d->inputs->in[k];
        *error = arm_error("bad_argument", "input \"%s\" is not configured "
                           "(inputs.%s.endpoint)", name, name);
        return NULL;
    }
    *error = arm_error("bad_argument", "\"input\" must name a configured "
                       "detector input: \"stream2\" or \"jsonhdr\"");
    return NULL;
}

/* ---------------------------------------------------------- blocks ---- */

static void add_block(rtomod_arm *a, rtomo_msg_type type, int64_t first,
                      int64_t count, int64_t index0)
{
    if (count == 0)
        return;
    rtomod_arm_block *b = &a->blocks[a->n_blocks++];
    b->type = type;
    b->first = first;
    b->count = count;
    b->index0 = index0;
}

static int blocks_overlap(const rtomod_arm_block *x, const rtomod_arm_block *y)
{
    int x_before_y = x->count >= 0 && x->first + x->count <= y->first;
    int y_before_x = y->count >= 0 && y->first + y->count <= x->first;
    return !x_before_y && !y_before_x;
}

/* frames.<key>: a frame number >= 0, or `fallback` when absent. */
static int frame_option(const json_t *frames, const char *key,
                        int64_t fallback, int64_t *out, json_t **error)
{
    const json_t *v = frames ? json_object_get(frames, key) : NULL;
    if (!v || json_is_null(v)) {
        *out = fallback;
        return 0;
    }
    if (!json_is_integer(v) || json_integer_value(v) < 0 ||
        json_integer_value(v) > INT32_MAX) {
        *error = arm_error("bad_argument", "\"frames.%s\" must be a frame "
                           "number, 0 to 2^31 - 1", key);
        return -1;
    }
    *out = json_integer_value(v);
    return 0;
}

/* Darks, flats, projections and flats after, in that order by default,
 * each where "frames" says it begins. */
static int tomo_blocks(rtomod_arm *a, const rtomo_scan_spec *s,
                       const json_t *frames, json_t **error)
{
    int64_t darks, flats, proj, after;
    int64_t n_proj = s->continuous ? -1 : s->geometry.n_proj;
    if (frame_option(frames, "darks", 0, &darks, error) ||
        frame_option(frames, "flats", darks + s->n_darks, &flats, error) ||
        frame_option(frames, "projections", flats + s->n_flats, &proj,
                     error) ||
        frame_option(frames, "flats_after",
                     n_proj < 0 ? 0 : proj + n_proj, &after, error))
        return -1;
    add_block(a, RTOMO_MSG_DARK, darks, s->n_darks, 0);
    add_block(a, RTOMO_MSG_FLAT, flats, s->n_flats, 0);
    add_block(a, RTOMO_MSG_PROJECTION, proj, n_proj, 0);
    add_block(a, RTOMO_MSG_FLAT, after, s->n_flats_after, s->n_flats);
    a->frames_needed = n_proj < 0 ? -1 : s->n_darks + s->n_flats + n_proj +
                                         s->n_flats_after;
    for (int i = 0; i < a->n_blocks; i++)
        for (int j = i + 1; j < a->n_blocks; j++)
            if (blocks_overlap(&a->blocks[i], &a->blocks[j])) {
                *error = arm_error("bad_argument", "\"frames\": the blocks "
                                   "of %s and %s frames overlap",
                                   rtomo_msg_type_name(a->blocks[i].type),
                                   rtomo_msg_type_name(a->blocks[j].type));
                return -1;
            }
    a->ndim = 2;
    a->shape[0] = a->height = s->geometry.det_height;
    a->shape[1] = a->width = s->geometry.det_width;
    a->dtype = s->dtype;
    return 0;
}

/* An SBDX frame is one detector image holding every hole's readout:
 * height holes_y x holes_x x det_height rows of det_width pixels, the
 * layout of an sbdx_frame payload. */
static int sbdx_blocks(rtomod_arm *a, const rtomo_sbdx_spec *s,
                       const json_t *frames, json_t **error)
{
    int64_t first;
    if (frame_option(frames, "sbdx", 0, &first, error))
        return -1;
    add_block(a, RTOMO_MSG_SBDX_FRAME, first, -1, 0);
    a->frames_needed = -1;
    const rtomo_sbdx_geometry *g = &s->geometry;
    a->ndim = 4;
    a->shape[0] = g->holes_y;
    a->shape[1] = g->holes_x;
    a->shape[2] = g->det_height;
    a->shape[3] = g->det_width;
    a->height = (int64_t)g->holes_y * g->holes_x * g->det_height;
    a->width = g->det_width;
    /* The inputs take images of at most 65536 rows (PROTOCOL.md 10): a
     * collimator scan sent as one taller image could never be taken. */
    if (a->height > 65536) {
        *error = arm_error("bad_argument", "an SBDX frame of %d x %d holes "
                           "of %d rows is %lld rows as one detector image; "
                           "the inputs take at most 65536",
                           g->holes_x, g->holes_y, g->det_height,
                           (long long)a->height);
        return -1;
    }
    a->dtype = s->dtype;
    a->sbdx = 1;
    return 0;
}

/* The arm's own options into *a (before anything begins). */
static int arm_options(rtomod_arm *a, const json_t *request,
                       const rtomo_ingest_msg *begin, json_t **error)
{
    const json_t *frames = json_object_get(request, "frames");
    if (frames && !json_is_object(frames) && !json_is_null(frames)) {
        *error = arm_error("bad_argument", "\"frames\" must be an object of "
                           "frame numbers");
        return -1;
    }
    const char *texts[2] = {"angle_key", "channel"};
    char *dst[2] = {a->angle_key, a->channel};
    for (int i = 0; i < 2; i++) {
        const json_t *v = json_object_get(request, texts[i]);
        if (v && !json_is_null(v) &&
            (!json_is_string(v) ||
             json_string_length(v) >= RTOMOD_INPUT_NAME_MAX)) {
            *error = arm_error("bad_argument", "\"%s\" must be a string of "
                               "less than %d characters", texts[i],
                               RTOMOD_INPUT_NAME_MAX);
            return -1;
        }
        snprintf(dst[i], RTOMOD_INPUT_NAME_MAX, "%s",
                 json_is_string(v) ? json_string_value(v) : "");
    }
    return begin->type == RTOMO_MSG_SCAN_BEGIN
               ? tomo_blocks(a, begin->scan_spec, frames, error)
               : sbdx_blocks(a, begin->sbdx_spec, frames, error);
}

/* ------------------------------------------------------------- arm ---- */

/* The begin message an arm request carries, as JSON text (malloc'd). */
static char *begin_text(const json_t *request, json_t **error)
{
    json_t *begin = json_deep_copy(request);
    if (!begin) {
        *error = arm_error("internal", "out of memory");
        return NULL;
    }
    for (int i = 0; arm_fields[i]; i++)
        json_object_del(begin, arm_fields[i]);
    if (!json_object_get(begin, "protocol"))
        json_object_set_new(begin, "protocol",
                            json_integer(RTOMO_PROTOCOL_VERSION));
    if (!json_object_get(begin, "type"))
        json_object_set_new(begin, "type", json_string("scan_begin"));
    const char *type = json_string_value(json_object_get(begin, "type"));
    if (!type || (strcmp(type, "scan_begin") != 0 &&
                  strcmp(type, "sbdx_begin") != 0)) {
        json_decref(begin);
        *error = arm_error("bad_argument", "\"type\" of an arm is "
                           "\"scan_begin\" (default) or \"sbdx_begin\"");
        return NULL;
    }
    char *text = json_dumps(begin, JSON_COMPACT);
    json_decref(begin);
    if (!text)
        *error = arm_error("internal", "out of memory");
    return text;
}

static json_t *refused(const char *reason, const char *message)
{
    return json_pack("{s:b, s:s, s:s, s:s}", "ok", 0, "error", "refused",
                     "reason", reason, "message", message);
}

/* The begin was refused by its handler: the reply says why, as the
 * scan's record does. */
static json_t *refused_reply(rtomod *d, const char *id)
{
    const rtomod_outcome *o = rtomod_history_find(&d->history, id);
    if (o && o->code[0])
        return refused(o->code, o->reason);
    return refused("unknown", "the begin was refused (see the log)");
}

/* Decode the begin as the ingest decoder would; a refusal is a native
 * refusal (counted, published, recorded) and *why says it. */
static int decode_begin(rtomod *d, const char *text, rtomo_ingest_msg *msg,
                        rtomo_reject_info *why)
{
    memset(msg, 0, sizeof *msg);
    msg->type = RTOMO_MSG_TYPE_COUNT;
    if (rtomo_proto_decode_ingest(1, text, strlen(text), NULL, 0, msg,
                                  why) == 0)
        return 0;
    d->handling_begin = 1;
    rtomod_reject(d, why, msg->scan[0] ? msg->scan : NULL, -1);
    d->handling_begin = 0;
    return -1;
}

/* A stale arm (its scan no longer acquires: ended, aborted, timed out)
 * gives way to a new one, and takes no image: a later scan of the same id
 * is another record. */
static int arm_live(rtomod *d, const rtomod_arm *a)
{
    const rtomod_scan *scan = a->armed ? rtomod_scan_acquiring(d, a->scan)
                                       : NULL;
    return scan && scan->serial == a->serial;
}

int rtomod_arm_live(rtomod_input *in)
{
    if (arm_live(in->d, &in->arm))
        return 1;
    in->arm.armed = 0;
    return 0;
}

json_t *rtomod_cmd_arm(rtomod *d, const json_t *request)
{
    json_t *error = NULL;
    rtomod_input *in = named_input(d, request, &error);
    if (!in)
        return error;
    if (arm_live(d, &in->arm))
        return arm_error("bad_state", "input %s is armed for scan %s: "
                         "disarm it first", rtomod_input_name(in->kind),
                         in->arm.scan);
    char *text = begin_text(request, &error);
    if (!text)
        return error;
    rtomo_ingest_msg msg;
    rtomo_reject_info why;
    if (decode_begin(d, text, &msg, &why) != 0) {
        free(text);
        return refused(rtomo_reject_name(why.reason), why.message);
    }
    rtomod_arm a;
    memset(&a, 0, sizeof a);
    if (arm_options(&a, request, &msg, &error) != 0) {
        rtomo_ingest_msg_clear(&msg);
        free(text);
        return error;
    }
    if (!a.channel[0] && in->kind == RTOMOD_INPUT_STREAM2)
        snprintf(a.channel, sizeof a.channel, "%s",
                 d->cfg.inputs.stream2_channel);
    snprintf(a.scan, sizeof a.scan, "%s", msg.scan);
    zmq_msg_t none;
    zmq_msg_init(&none);
    d->t_received = rtomod_now();
    d->begin_header = text;
    d->begin_header_size = strlen(text);
    int rc = rtomod_ingest_deliver(d, &msg, &none);
    d->begin_header = NULL;
    d->begin_header_size = 0;
    zmq_msg_close(&none);
    rtomo_ingest_msg_clear(&msg);
    free(text);
    if (rc != 0)
        return refused_reply(d, a.scan);
    const rtomod_scan *scan = rtomod_scan_acquiring(d, a.scan);
    a.serial = scan ? scan->serial : 0;
    a.armed = 1;
    in->arm = a;
    log_info("input %s armed for %s %s", rtomod_input_name(in->kind),
             a.sbdx ? "SBDX stream" : "scan", a.scan);
    return json_pack("{s:b, s:s, s:s, s:I}", "ok", 1, "armed", a.scan,
                     "input", rtomod_input_name(in->kind), "expected",
                     (json_int_t)a.frames_needed);
}

/* --------------------------------------------------------- the end ---- */

void rtomod_arm_end(rtomod_input *in, const char *why)
{
    rtomod *d = in->d;
    rtomod_arm *a = &in->arm;
    rtomo_ingest_msg msg;
    memset(&msg, 0, sizeof msg);
    msg.type = a->sbdx ? RTOMO_MSG_SBDX_END : RTOMO_MSG_SCAN_END;
    snprintf(msg.scan, sizeof msg.scan, "%s", a->scan);
    msg.frame.index = -1;
    log_info("input %s: %s ends scan %s after %lld frames",
             rtomod_input_name(in->kind), why, a->scan,
             (long long)a->frames_taken);
    a->armed = 0;
    zmq_msg_t none;
    zmq_msg_init(&none);
    d->t_received = rtomod_now();
    rtomod_ingest_deliver(d, &msg, &none);
    zmq_msg_close(&none);
}

json_t *rtomod_cmd_disarm(rtomod *d, const json_t *request)
{
    json_t *error = NULL;
    rtomod_input *in = named_input(d, request, &error);
    if (!in)
        return error;
    if (!in->arm.armed)
        return arm_error("bad_state", "input %s is not armed",
                         rtomod_input_name(in->kind));
    char scan[RTOMO_ID_MAX];
    snprintf(scan, sizeof scan, "%s", in->arm.scan);
    int live = arm_live(d, &in->arm);
    if (live)
        rtomod_arm_end(in, "disarm");
    else
        in->arm.armed = 0;
    return json_pack("{s:b, s:s, s:b}", "ok", 1, "disarmed", scan, "ended",
                     live);
}

void rtomod_arm_touch(rtomod_input *in)
{
    rtomod_scan *scan = in->arm.armed
                            ? rtomod_scan_acquiring(in->d, in->arm.scan)
                            : NULL;
    if (scan)
        scan->t_last_input = rtomod_now();
}

/* -------------------------------------------------------- pictures ---- */

/* Pixels of src_size bytes (src_float: float32) to the scan's dtype.  A
 * wider detector type than the scan's is refused, not clipped. */
static int convert(const uint8_t *src, int src_size, int src_float,
                   rtomo_dtype dtype, uint8_t *out, size_t n,
                   rtomo_reject_info *why)
{
    if (dtype == RTOMO_DTYPE_F32) {
        float *o = (float *)out;
        for (size_t i = 0; i < n; i++) {
            if (src_size == 1)
                o[i] = src[i];
            else if (src_size == 2)
                o[i] = ((const uint16_t *)src)[i];
            else if (!src_float)
                o[i] = (float)((const uint32_t *)src)[i];
            else if (!isfinite(o[i] = ((const float *)src)[i]))
                return rtomo_reject_set(why, RTOMO_REJECT_NONFINITE,
                                        "sample %zu is not finite", i);
        }
        return 0;
    }
    if (dtype == RTOMO_DTYPE_U16 && src_size == 1 && !src_float) {
        for (size_t i = 0; i < n; i++)
            ((uint16_t *)out)[i] = src[i];
        return 0;
    }
    return rtomo_reject_set(why, RTOMO_REJECT_DTYPE, "%s-byte %s pixels do "
                            "not fit the scan's %s: arm with a wider "
                            "\"dtype\" (float32 holds every detector type)",
                            src_float ? "4" : src_size == 1 ? "1"
                            : src_size == 2 ? "2" : "4",
                            src_float ? "float" : "integer",
                            rtomo_dtype_name(dtype));
}

static int same_type(const rtomod_image *im, rtomo_dtype dtype)
{
    return (dtype == RTOMO_DTYPE_U8 && im->src_size == 1) ||
           (dtype == RTOMO_DTYPE_U16 && im->src_size == 2) ||
           (dtype == RTOMO_DTYPE_F32 && im->src_float);
}

/* The message the frame's pixels go to, and where in it: a new frame of
 * the image's elements, or for a router's share a whole frame, zero but
 * for the share, decoded at its offset (frame_rows.c). */
static uint8_t *frame_memory(const rtomod_arm *a, const rtomod_image *im,
                             int keep, zmq_msg_t *payload,
                             rtomo_reject_info *why)
{
    const size_t size = rtomo_dtype_size(a->dtype);
    const size_t whole = (size_t)(im->height * im->width) * size;
    const size_t lo = (size_t)im->offset * size;
    const size_t hi = lo + (size_t)im->elements * size;
    int failed = im->rows_count > 0
                     ? rtomod_frame_rows_blank(whole, lo, hi, keep, payload)
                     : zmq_msg_init_size(payload, whole);
    if (failed) {
        /* The caller closes *payload: make it an empty message (a failed
         * init leaves it unusable). */
        zmq_msg_init(payload);
        rtomo_reject_set(why, RTOMO_REJECT_OVERSIZE, "out of memory for a "
                         "frame of %zu bytes", whole);
        return NULL;
    }
    uint8_t *out = zmq_msg_data(payload);
    return im->rows_count > 0 ? out + lo : out;
}

/* The frame's pixels in the scan's type, in a new message. */
static int frame_payload(const rtomod_arm *a, const rtomod_image *im,
                         int keep, zmq_msg_t *payload, rtomo_reject_info *why)
{
    size_t n = im->rows_count > 0 ? (size_t)im->elements
                                  : (size_t)(im->height * im->width);
    size_t src_bytes = n * (size_t)im->src_size;
    size_t out_bytes = n * rtomo_dtype_size(a->dtype);
    uint8_t *out = frame_memory(a, im, keep, payload, why);
    if (!out)
        return -1;
    if (same_type(im, a->dtype) && !im->src_float)
        return im->decode(im->ctx, out, out_bytes, why);
    uint8_t *tmp = malloc(src_bytes ? src_bytes : 1);
    if (!tmp)
        return rtomo_reject_set(why, RTOMO_REJECT_OVERSIZE, "out of memory "
                                "for a frame of %zu bytes", src_bytes);
    int rc = im->decode(im->ctx, tmp, src_bytes, why);
    if (rc == 0)
        rc = convert(tmp, im->src_size, im->src_float, a->dtype, out, n,
                     why);
    free(tmp);
    return rc;
}

/* The block a frame number falls in; -1 when none. */
static int place(const rtomod_arm *a, int64_t frame, rtomo_msg_type *type,
                 int64_t *index)
{
    for (int i = 0; i < a->n_blocks; i++) {
        const rtomod_arm_block *b = &a->blocks[i];
        if (frame >= b->first && (b->count < 0 || frame < b->first + b->count)) {
            *type = b->type;
            *index = b->index0 + frame - b->first;
            return 0;
        }
    }
    return -1;
}

/* Count what the native handlers rejected on this input as well. */
static int deliver_counted(rtomod_input *in, rtomo_ingest_msg *msg,
                           zmq_msg_t *payload)
{
    rtomod *d = in->d;
    uint64_t before[RTOMO_REJECT_COUNT];
    memcpy(before, d->counters.rejects, sizeof before);
    uint64_t rejected = d->counters.rejected;
    int rc = rtomod_ingest_deliver(d, msg, payload);
    if (d->counters.rejected != rejected) {
        in->rejected++;
        for (int r = 0; r < RTOMO_REJECT_COUNT; r++)
            in->rejects[r] += d->counters.rejects[r] - before[r];
    }
    return rc;
}

void rtomod_arm_image(rtomod_input *in, const rtomod_image *im)
{
    rtomod_arm *a = &in->arm;
    rtomo_reject_info why;
    rtomo_ingest_msg msg;
    memset(&msg, 0, sizeof msg);
    if (place(a, im->frame, &msg.type, &msg.frame.index) != 0) {
        rtomo_reject_set(&why, RTOMO_REJECT_INDEX, "frame %lld of the "
                         "stream is in none of the arm's blocks (\"frames\")",
                         (long long)im->frame);
        rtomod_input_reject(in, &why, a->scan, im->frame);
        return;
    }
    if (im->height != a->height || im->width != a->width) {
        rtomo_reject_set(&why, RTOMO_REJECT_SHAPE, "image of %lld x %lld "
                         "pixels (height x width), the armed scan's "
                         "detector is %lld x %lld", (long long)im->height,
                         (long long)im->width, (long long)a->height,
                         (long long)a->width);
        rtomod_input_reject(in, &why, a->scan, msg.frame.index);
        return;
    }
    /* An SBDX frame is every hole's readout: a share of its rows would be
     * some holes only, which no plan takes. */
    if (im->rows_count > 0 && a->sbdx) {
        rtomo_reject_set(&why, RTOMO_REJECT_FIELD, "image with "
                         "\"rtomo_rows\" (a router's share of rows %lld.."
                         "%lld): SBDX arms take whole images only",
                         (long long)im->rows_first,
                         (long long)(im->rows_first + im->rows_count - 1));
        rtomod_input_reject(in, &why, a->scan, msg.frame.index);
        return;
    }
    snprintf(msg.scan, sizeof msg.scan, "%s", a->scan);
    rtomo_frame_header *f = &msg.frame;
    f->type = msg.type;
    snprintf(f->scan, sizeof f->scan, "%s", a->scan);
    f->dtype = a->dtype;
    f->ndim = a->ndim;
    memcpy(f->shape, a->shape, sizeof f->shape);
    f->angle = msg.type == RTOMO_MSG_PROJECTION ? im->angle : NAN;
    f->axis_shift = NAN;
    /* The native handler checks a share against the rows the plans read
     * (shape_mismatch), as for a native frame with "rows". */
    f->rows_first = im->rows_count > 0 ? im->rows_first : 0;
    f->rows_count = im->rows_count > 0 ? im->rows_count : 0;
    zmq_msg_t payload;
    double t0 = rtomod_now();
    int rc = frame_payload(a, im, in->d->cfg.ingest.keep_buffers, &payload,
                           &why);
    in->decode_s += rtomod_now() - t0;
    if (rc != 0) {
        zmq_msg_close(&payload);
        rtomod_input_reject(in, &why, a->scan, f->index);
        return;
    }
    /* Pixel bytes handed over: a share's, not the whole frame's. */
    size_t bytes = im->rows_count > 0
                       ? (size_t)im->elements * rtomo_dtype_size(a->dtype)
                       : zmq_msg_size(&payload);
    if (deliver_counted(in, &msg, &payload) == 0) {
        in->frames++;
        in->bytes_out += bytes;
        a->frames_taken++;
    }
    zmq_msg_close(&payload);
    /* A stream without an end message (JSON headers) ends with its last
     * announced frame. */
    if (in->kind == RTOMOD_INPUT_JSONHDR && a->armed &&
        a->frames_needed >= 0 && a->frames_taken >= a->frames_needed)
        rtomod_arm_end(in, "the last frame");
}
