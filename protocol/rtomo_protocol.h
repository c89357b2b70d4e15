/*
 * rtomo_protocol.h — the rtomo wire format in C: decoding and validating
 * ingest messages, encoding them for clients, and encoding/decoding the
 * published and control messages.  protocol/PROTOCOL.md is the normative
 * description; this header is its C binding.  No socket code lives here:
 * functions take and return bytes and JSON text, so the daemon, the client
 * library and the tests share one implementation.
 *
 * Messages (see PROTOCOL.md for every field):
 *   ingest (PULL):   [header JSON, payload]      payload may be absent or
 *                                                empty for begin/end
 *   publish (PUB):   [topic, header JSON, payload]   payload may be empty
 *   control (REP):   [request JSON] -> [reply JSON]
 *
 * Units on the wire: angles in degrees, positions in detector bins or
 * pixels, times in milliseconds, rates per second.  Payloads are
 * little-endian, row-major, x fastest.
 */
#ifndef RTOMO_PROTOCOL_H
#define RTOMO_PROTOCOL_H

#include <stddef.h>
#include <stdint.h>

#include "rtomo_engine.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RTOMO_PROTOCOL_VERSION 1
#define RTOMO_ID_MAX 64                 /* scan id: 1..63 of [A-Za-z0-9_.:-] */
#define RTOMO_HEADER_MAX (64 * 1024)    /* bytes of header JSON */
#define RTOMO_REASON_MAX 256
#define RTOMO_MESSAGE_MAX 1024          /* an event's message, with its NUL:
                                           scan_started's notes can run long */

#define RTOMO_DEFAULT_INGEST_ENDPOINT  "tcp://127.0.0.1:5555"
#define RTOMO_DEFAULT_PUBLISH_ENDPOINT "tcp://127.0.0.1:5556"
#define RTOMO_DEFAULT_CONTROL_ENDPOINT "tcp://127.0.0.1:5557"

/* ------------------------------------------------------------ ingest ---- */

typedef enum rtomo_msg_type {
    RTOMO_MSG_SCAN_BEGIN = 0,   /* "scan_begin" */
    RTOMO_MSG_DARK,             /* "dark" */
    RTOMO_MSG_FLAT,             /* "flat" */
    RTOMO_MSG_PROJECTION,       /* "projection" */
    RTOMO_MSG_SCAN_END,         /* "scan_end" */
    RTOMO_MSG_SBDX_BEGIN,       /* "sbdx_begin" */
    RTOMO_MSG_SBDX_FRAME,       /* "sbdx_frame" */
    RTOMO_MSG_SBDX_END,         /* "sbdx_end" */
    RTOMO_MSG_TYPE_COUNT
} rtomo_msg_type;

const char *rtomo_msg_type_name(rtomo_msg_type type);

/*
 * Why a message was rejected.  The names (rtomo_reject_name) are stable:
 * they appear in "event" messages and as counter keys in status.
 */
typedef enum rtomo_reject {
    RTOMO_REJECT_NONE = 0,
    RTOMO_REJECT_PARTS,         /* "bad_parts": wrong number of parts */
    RTOMO_REJECT_JSON,          /* "bad_json": header is not a JSON object */
    RTOMO_REJECT_VERSION,       /* "bad_version": protocol missing/unsupported */
    RTOMO_REJECT_TYPE,          /* "unknown_type" */
    RTOMO_REJECT_FIELD,         /* "bad_field": missing, mistyped or out of
                                   range header field (message names it) */
    RTOMO_REJECT_GEOMETRY,      /* "bad_geometry": begin refused by the engine */
    RTOMO_REJECT_UNKNOWN_SCAN,  /* "unknown_scan": not the active scan */
    RTOMO_REJECT_STATE,         /* "bad_state": e.g. dark after projections,
                                   begin while another scan is active */
    RTOMO_REJECT_INDEX,         /* "index_out_of_range" */
    RTOMO_REJECT_DUPLICATE,     /* "duplicate_frame" */
    RTOMO_REJECT_SHAPE,         /* "shape_mismatch" */
    RTOMO_REJECT_DTYPE,         /* "dtype_mismatch" */
    RTOMO_REJECT_SIZE,          /* "size_mismatch": payload bytes != shape */
    RTOMO_REJECT_OVERSIZE,      /* "oversize": beyond the configured maximum */
    RTOMO_REJECT_NONFINITE,     /* "non_finite": NaN or inf in float data */
    RTOMO_REJECT_BUDGET,        /* "over_budget": a begin whose memory does
                                   not fit the daemon's budgets now, or a
                                   frame the early-frame hold has no room
                                   for */
    RTOMO_REJECT_SHUTDOWN,      /* "shutting_down": the daemon stopped
                                   accepting input (SIGTERM) */
    RTOMO_REJECT_ENDED,         /* "scan_ended": the scan already ended
                                   (completed, aborted or timed out) */
    RTOMO_REJECT_CBOR,          /* "bad_cbor": a detector-native message
                                   (DECTRIS Stream V2) is not well-formed
                                   CBOR, or not a CBOR map */
    RTOMO_REJECT_COMPRESSION,   /* "bad_compression": unknown compression,
                                   or compressed data that does not decode
                                   to the image */
    RTOMO_REJECT_NOT_ARMED,     /* "not_armed": a detector-native message
                                   on an input that no "arm" bound to a
                                   scan */
    RTOMO_REJECT_COUNT
} rtomo_reject;

const char *rtomo_reject_name(rtomo_reject reason);

typedef struct rtomo_reject_info {
    rtomo_reject reason;
    char message[RTOMO_REASON_MAX];     /* specific, for operators */
} rtomo_reject_info;

/* Fill *why (may be NULL); returns -1 so callers can `return reject(...)`. */
int rtomo_reject_set(rtomo_reject_info *why, rtomo_reject reason,
                     const char *format, ...)
    __attribute__((format(printf, 3, 4)));

/* Which detector rows (= slices) to reconstruct. */
typedef enum rtomo_slice_kind {
    RTOMO_SLICES_ALL = 0,       /* "all" */
    RTOMO_SLICES_RANGE,         /* {"first": a, "count": n, "step": s} */
    RTOMO_SLICES_LIST           /* [r0, r1, ...] */
} rtomo_slice_kind;

typedef struct rtomo_slice_selection {
    rtomo_slice_kind kind;
    int first, count, step;     /* RANGE */
    int *rows;                  /* LIST (owned) */
    int n_rows;
} rtomo_slice_selection;

/* Expand to the list of detector rows for a detector of `det_height` rows.
 * *rows is malloc'd; returns -1 with *why filled when a row is outside. */
int rtomo_slice_selection_expand(const rtomo_slice_selection *sel,
                                 int det_height, int **rows, int *n_rows,
                                 rtomo_reject_info *why);
int rtomo_slice_selection_copy(rtomo_slice_selection *dst,
                               const rtomo_slice_selection *src);
void rtomo_slice_selection_clear(rtomo_slice_selection *sel);

/* The JSON form of a selection ("all", [rows], {"first","count","step"}),
 * shared by scan_begin and the control set_config/get_config requests.
 * from_json replaces *sel (which must be initialised or cleared) only on
 * success; `field` names the value in reject messages ("slices" if NULL).
 * Rows are checked against a detector only by rtomo_slice_selection_expand.
 * to_json returns a new jansson reference (NULL on allocation failure). */
struct json_t;
int rtomo_slice_selection_from_json(const struct json_t *value,
                                    const char *field,
                                    rtomo_slice_selection *sel,
                                    rtomo_reject_info *why);
struct json_t *rtomo_slice_selection_to_json(const rtomo_slice_selection *sel);

/* Flags for which reconstruction settings a scan_begin gave explicitly (the
 * daemon's configuration supplies the others). */
enum {
    RTOMO_SPEC_HAS_WINDOW = 1 << 0,
    RTOMO_SPEC_HAS_CUTOFF = 1 << 1,
    RTOMO_SPEC_HAS_INTERP = 1 << 2,
    RTOMO_SPEC_HAS_SLICES = 1 << 3,
    RTOMO_SPEC_HAS_ROI = 1 << 4,
    RTOMO_SPEC_HAS_SLICE_SIZE = 1 << 5,
    RTOMO_SPEC_HAS_ANGLE_WEIGHTS = 1 << 6,
    RTOMO_SPEC_HAS_PHASE_DELTA_BETA = 1 << 7,   /* reconstruction.phase.* */
    RTOMO_SPEC_HAS_PHASE_ENERGY = 1 << 8,
    RTOMO_SPEC_HAS_PHASE_DISTANCE = 1 << 9,
    RTOMO_SPEC_HAS_PHASE_PIXEL = 1 << 10,
    RTOMO_SPEC_HAS_RINGS = 1 << 11,
    RTOMO_SPEC_HAS_RINGS_WIDTH = 1 << 12,
    RTOMO_SPEC_HAS_METHOD = 1 << 13,            /* reconstruction.method */
    RTOMO_SPEC_HAS_ITERATIONS = 1 << 14,        /* ... and its options */
    RTOMO_SPEC_HAS_PUBLISH_EVERY = 1 << 15,
    RTOMO_SPEC_HAS_TOLERANCE = 1 << 16,
    RTOMO_SPEC_HAS_NONNEGATIVE = 1 << 17,
    RTOMO_SPEC_HAS_WARM_START = 1 << 18,
    RTOMO_SPEC_HAS_FOV = 1 << 19            /* reconstruction.field_of_view */
};

/* reconstruction.method (PROTOCOL.md 3.3): FBP alone, or FBP first and an
 * iterative solve with the matched projector pair after it. */
typedef enum rtomo_method {
    RTOMO_METHOD_FBP = 0,           /* "fbp" */
    RTOMO_METHOD_SIRT,              /* "sirt" */
    RTOMO_METHOD_CGLS               /* "cgls" */
} rtomo_method;

/* The wire name ("unknown" past the last), and the inverse (RTOMO_OK, or
 * RTOMO_E_INVALID with *out untouched). */
const char *rtomo_method_name(rtomo_method m);
rtomo_status rtomo_method_parse(const char *name, rtomo_method *out);

/* Limits of the iterative options on the wire. */
#define RTOMO_MAX_ITERATIONS 10000

/* The method and its options, as a scan or the daemon's configuration
 * gives them. */
typedef struct rtomo_method_settings {
    rtomo_method method;
    int iterations;                 /* 1..RTOMO_MAX_ITERATIONS */
    int publish_every;              /* publish the images every this many
                                       iterations besides the last; 0 = the
                                       last only */
    double tolerance;               /* stop once ||A x - b|| / ||b|| is at
                                       most this, 0 <= t < 1; 0 = never */
    int nonnegative;                /* sirt: clamp at 0 after each update */
    int warm_start;                 /* start from the FBP slices (else 0) */
} rtomo_method_settings;

/* fbp; 50 iterations, the last published, no tolerance, no clamp, warm. */
void rtomo_method_settings_init(rtomo_method_settings *m);

/* "beam": "cone" (PROTOCOL.md 3.13): a point source on a circular orbit
 * and a flat detector, reconstructed by FDK into a volume (proto_cone.c;
 * rtomo_proto_cone.h turns it into the cone engine's geometry).  Lengths
 * in one unit L of the sender's choice (mm, typically). */
typedef struct rtomo_cone_spec {
    double source_to_axis;          /* L, > 0 */
    double source_to_detector;      /* L, > source_to_axis */
    double pitch[2];                /* detector pixel pitch u, v: L, > 0 */
    double offset[2];               /* detector offsets u, v: L */
    double voxel;                   /* voxel edge, L, > 0 */
    int volume[3];                  /* nx, ny, nz voxels */
    int roi[6];                     /* x, y, z, nx, ny, nz; nx = 0: none */
} rtomo_cone_spec;

/* A tomography scan as announced by "scan_begin". */
typedef struct rtomo_scan_spec {
    char scan[RTOMO_ID_MAX];
    rtomo_fbp_geometry geometry;    /* angles/axis_shift point below (radians,
                                       bins); window, cutoff, interp, roi,
                                       slice_size valid where flagged */
    double *angles;                 /* owned, n_proj, or NULL */
    double *axis_shift;             /* owned, n_proj, or NULL */
    rtomo_dtype dtype;              /* sample type of every frame */
    int n_darks, n_flats;           /* announced counts (0 = none) */
    int n_flats_after;              /* flats after the projections, indices
                                       n_flats .. n_flats + n_flats_after - 1
                                       (interpolated by projection index) */
    unsigned given;                 /* RTOMO_SPEC_HAS_* */
    rtomo_slice_selection slices;
    int axis_auto;                  /* "axis": "auto": the daemon finds the
                                       axis from opposed projections
                                       (geometry.axis then NaN) */
    int continuous;                 /* 1: sliding-window mode */
    int window_every;               /* continuous: reconstruct every K
                                       projections (K >= 1) */
    rtomo_method_settings method;   /* valid where flagged */
    rtomo_cone_spec *cone;          /* "beam": "cone" (owned); NULL for a
                                       parallel beam */
} rtomo_scan_spec;

void rtomo_scan_spec_init(rtomo_scan_spec *spec);
void rtomo_scan_spec_clear(rtomo_scan_spec *spec);

/* Output formats of SBDX planes. */
typedef enum rtomo_plane_format {
    RTOMO_PLANES_FLOAT32 = 0,       /* "float32" */
    RTOMO_PLANES_UINT16,            /* "uint16" (scaled) */
    RTOMO_PLANES_NONE               /* "none": composite only */
} rtomo_plane_format;

/* The wire name of a plane format ("float32", "uint16", "none"; "unknown"
 * for any other value), and the inverse: RTOMO_OK, or RTOMO_E_INVALID
 * (*out untouched) for a name that is none of these. */
const char *rtomo_plane_format_name(rtomo_plane_format format);
rtomo_status rtomo_plane_format_parse(const char *name,
                                      rtomo_plane_format *out);

/* An SBDX stream as announced by "sbdx_begin". */
typedef struct rtomo_sbdx_spec {
    char scan[RTOMO_ID_MAX];
    rtomo_sbdx_geometry geometry;   /* ratios points below */
    double *ratios;                 /* owned */
    rtomo_dtype dtype;
    rtomo_plane_format planes;
    float u16_scale, u16_offset;
    int composite;                  /* publish composite + depth (default 1) */
} rtomo_sbdx_spec;

void rtomo_sbdx_spec_init(rtomo_sbdx_spec *spec);
void rtomo_sbdx_spec_clear(rtomo_sbdx_spec *spec);

/* Header of a frame message (dark, flat, projection, sbdx_frame). */
typedef struct rtomo_frame_header {
    rtomo_msg_type type;
    char scan[RTOMO_ID_MAX];
    int64_t index;
    rtomo_dtype dtype;
    int ndim;                       /* 2 (tomography) or 4 (SBDX) */
    int64_t shape[4];               /* [height, width] or
                                       [holes_y, holes_x, det_height, det_width] */
    double angle;                   /* degrees; NaN when absent */
    double axis_shift;              /* bins; NaN when absent */
    /* Tomography frames: the detector rows the payload holds, [rows_first,
     * rows_first + rows_count) of shape[0]; rows_count 0 = every row (no
     * "rows" field).  A router sends each daemon only its rows. */
    int64_t rows_first, rows_count;
} rtomo_frame_header;

/* One decoded ingest message. */
typedef struct rtomo_ingest_msg {
    rtomo_msg_type type;
    char scan[RTOMO_ID_MAX];
    rtomo_frame_header frame;       /* frame types */
    rtomo_scan_spec *scan_spec;     /* SCAN_BEGIN: owned */
    rtomo_sbdx_spec *sbdx_spec;     /* SBDX_BEGIN: owned */
    const void *payload;            /* points into the caller's buffer */
    size_t payload_size;
} rtomo_ingest_msg;

/*
 * Decode and validate one ingest message made of n_parts parts, the first
 * being `header` and the second (if any) `payload`.  Checks the part count,
 * JSON syntax, protocol version, type, every field's presence, type and
 * range, a begin message's geometry (through the engine's validators), and
 * for frames that the payload size equals shape x dtype size and that float
 * samples are finite.  Does not know the active scan: see
 * rtomo_proto_check_*_frame.  Returns 0, or -1 with *why filled.  On
 * success release the message with rtomo_ingest_msg_clear.  On failure
 * the message holds nothing but msg->scan (the header's scan id when it
 * has a valid one, so that rejects can name the scan, else ""), msg->type
 * and msg->frame.index: the frame's index when its header decoded and its
 * payload failed (size, non-finite samples), else -1.
 */
int rtomo_proto_decode_ingest(int n_parts, const void *header,
                              size_t header_size, const void *payload,
                              size_t payload_size, rtomo_ingest_msg *msg,
                              rtomo_reject_info *why);
void rtomo_ingest_msg_clear(rtomo_ingest_msg *msg);

/* The scan id a header names, for rejects decided before decoding (an
 * oversize payload): copies it to out and returns 0 when the header is a
 * JSON object (at most RTOMO_HEADER_MAX bytes) with a valid "scan", else
 * sets out to "" and returns -1. */
int rtomo_proto_peek_scan(const void *header, size_t header_size,
                          char out[RTOMO_ID_MAX]);

/* 1 when `id` is a valid scan id (PROTOCOL.md section 2). */
int rtomo_proto_valid_id(const char *id);

/* A tomography frame against its scan: dtype and shape must match, the
 * index must be in range (projections: [0, n_proj), unbounded >= 0 in
 * continuous mode; darks/flats: >= 0), and a projection's axis_shift in
 * the engine's range, |axis_shift| <= det_width (bad_field; the decoder
 * checks it against the frame's own shape as well). */
int rtomo_proto_check_tomo_frame(const rtomo_frame_header *frame,
                                 const rtomo_scan_spec *scan,
                                 rtomo_reject_info *why);
/* An SBDX frame against its stream. */
int rtomo_proto_check_sbdx_frame(const rtomo_frame_header *frame,
                                 const rtomo_sbdx_spec *spec,
                                 rtomo_reject_info *why);

/* The "output" settings of an SBDX stream as the decoder judges them:
 * u16_scale a positive normal float of at most 1e30 (so that 1e-300,
 * which would become 0.0f, and subnormals are refused), u16_offset finite
 * and at most 1e30 in magnitude, and planes or the composite (or both)
 * asked for.  Returns 0, or -1 with a bad_field reject in *why naming the
 * field.  The decoder of sbdx_begin and its encoder both call it, so the
 * encoder never writes a header that the decoder refuses. */
int rtomo_proto_check_sbdx_output(const rtomo_sbdx_spec *spec,
                                  rtomo_reject_info *why);

/* Encoders for clients: malloc'd, NUL-terminated JSON text (NULL on
 * allocation failure; rtomo_proto_encode_sbdx_begin also when
 * rtomo_proto_check_sbdx_output refuses the spec). */
char *rtomo_proto_encode_scan_begin(const rtomo_scan_spec *spec);
char *rtomo_proto_encode_sbdx_begin(const rtomo_sbdx_spec *spec);
char *rtomo_proto_encode_frame(const rtomo_frame_header *frame);
char *rtomo_proto_encode_end(rtomo_msg_type type, const char *scan);

/* ----------------------------------------------------------- publish ---- */

/* Topics of the PUB socket (first part of every published message).
 * Subscribers filter by prefix, so no topic is a prefix of another. */
#define RTOMO_TOPIC_SLICE     "slice"
#define RTOMO_TOPIC_PLANE     "plane"
#define RTOMO_TOPIC_COMPOSITE "composite"
#define RTOMO_TOPIC_DEPTH     "depth"
#define RTOMO_TOPIC_PREVIEW   "preview"
#define RTOMO_TOPIC_TELEMETRY "telemetry"
#define RTOMO_TOPIC_EVENT     "event"

/* Header of a published image (slice, plane, composite, depth). */
typedef struct rtomo_image_header {
    char topic[16];
    char scan[RTOMO_ID_MAX];
    int64_t frame;          /* SBDX frame index; continuous window index;
                               -1 for a plain scan */
    int index;              /* position within this publication's set
                               (0..count-1) */
    int count;              /* images in the set (slices of the scan/window,
                               planes of the frame; 1 for composite/depth) */
    int slice;              /* detector row (slice), -1 otherwise */
    int plane;              /* plane index, -1 otherwise */
    double ratio;           /* plane ratio n, NaN otherwise */
    int width, height;
    int roi[4];             /* slices: x, y, w, h within the slice grid */
    rtomo_dtype dtype;      /* float32 (uint16 for depth and u16 planes) */
    float u16_scale, u16_offset;    /* uint16 planes: value = v/scale+offset */
    double min, max, mean;  /* of the image, for control loops */
    double angle_first, angle_last; /* continuous windows: degrees; NaN */
    int64_t projection_first, projection_last;  /* continuous windows: the
                               projection indices the window holds; -1 */
    double axis;            /* tomography slices, previews, planes: the
                               rotation axis used, bins; NaN otherwise */
    int64_t projections;    /* slices, previews, planes of tomography:
                               projections summed into the image; -1 */
    double centre[3], u[3], v[3];   /* a tomography plane (topic plane,
                               ratio NaN): its centre (x, y in slice-grid
                               pixels, z = detector row) and its unit
                               in-plane vectors along width and height;
                               NaN otherwise */
    double latency_ms;      /* last input of the set to this publication */
    double compute_ms;      /* engine time for the set */
    uint64_t seq;           /* per-topic sequence number of the publisher
                               (PROTOCOL.md 6): a gap = messages lost */
    /* Tomography slices (method "" for every other image, and then none
     * of these is sent): the method that made the image ("fbp", "sirt",
     * "cgls"), its iteration (0 for FBP), whether it is the slice's last
     * image of the scan, and the relative residual ||A x - b|| / ||b|| of
     * an iterate (NaN for FBP). */
    char method[8];
    int iteration;
    int final;
    double residual;
} rtomo_image_header;

void rtomo_image_header_init(rtomo_image_header *h);
char *rtomo_proto_encode_image_header(const rtomo_image_header *h);
/* Decode a published image header; also checks payload_size against the
 * shape and dtype. */
int rtomo_proto_decode_image_header(const void *json, size_t size,
                                    size_t payload_size,
                                    rtomo_image_header *h,
                                    rtomo_reject_info *why);

/* Events ("event" topic): rejects, scan state changes, drops, errors. */
typedef struct rtomo_event {
    char event[32];         /* "rejected", "scan_started", "scan_complete",
                               "scan_aborted", "missing_projections",
                               "dropped", "error" ... */
    char scan[RTOMO_ID_MAX];
    int64_t index;          /* frame index concerned, -1 if none */
    char reason[32];        /* reject name or other code, "" if none */
    char message[RTOMO_MESSAGE_MAX];
    uint64_t seq;           /* per-topic sequence number (as images) */
} rtomo_event;

char *rtomo_proto_encode_event(const rtomo_event *ev);
int rtomo_proto_decode_event(const void *json, size_t size, rtomo_event *ev,
                             rtomo_reject_info *why);

/* --------------------------------------------------------- control ---- */

/* Control replies: {"ok": true, ...} or
 * {"ok": false, "error": "<code>", "message": "<words>"}.  Error codes:
 * "bad_json", "unknown_command", "bad_argument", "bad_state", "internal". */
char *rtomo_proto_control_error(const char *code, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

#ifdef __cplusplus
}
#endif

#endif /* RTOMO_PROTOCOL_H */
