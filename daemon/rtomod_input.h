/*
 * rtomod_input.h — detector-native inputs and the scans armed on them.
 *
 * A detector that speaks its own stream (DECTRIS Stream V2, PSI std-daq /
 * areaDetector "array-1.0" JSON headers) pushes to an input endpoint of
 * its own (inputs.*.endpoint, a PULL socket).  Its images carry no scan
 * geometry: the control system sends "arm" with everything a scan_begin
 * or sbdx_begin carries, and the daemon begins that scan through the same
 * code as a native begin.  The images that then arrive become the scan's
 * darks, flats and projections (or SBDX frames) by their frame number,
 * through the same frame handlers as native frames; the stream's end or
 * "disarm" ends the scan as scan_end would.  PROTOCOL.md section 10.
 *
 *   input.c          sockets, configuration keys, counters, status
 *   arm.c            arm / disarm, frame numbers -> frames, pixel types
 *   input_stream2.c  DECTRIS Stream V2 (stream2.c parses the CBOR)
 *   input_jsonhdr.c  JSON header + raw image ("htype": "array-1.0")
 */
#ifndef RTOMOD_INPUT_H
#define RTOMOD_INPUT_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "rtomod_bitshuffle.h"
#include "rtomod_loop.h"
#include "rtomo_protocol.h"

struct rtomod;
struct rtomod_config;

typedef enum rtomod_input_kind {
    RTOMOD_INPUT_STREAM2 = 0,   /* "stream2" */
    RTOMOD_INPUT_JSONHDR,       /* "jsonhdr" */
    RTOMOD_INPUT_COUNT
} rtomod_input_kind;

#define RTOMOD_INPUT_NAME_MAX 64

/* A run of stream frame numbers that are frames of one type. */
typedef struct rtomod_arm_block {
    rtomo_msg_type type;        /* DARK, FLAT, PROJECTION, SBDX_FRAME */
    int64_t first;              /* first stream frame number */
    int64_t count;              /* frames; -1 = unbounded (continuous) */
    int64_t index0;             /* frame index of the first (flats after
                                   the projections start at `flats`) */
} rtomod_arm_block;

#define RTOMOD_ARM_BLOCKS 4

/* What "arm" bound to an input. */
typedef struct rtomod_arm {
    int armed;
    char scan[RTOMO_ID_MAX];
    uint64_t serial;            /* the scan record armed (a later scan of
                                   the same id is not it) */
    int sbdx;                   /* 0: tomography, 1: SBDX */
    rtomo_dtype dtype;          /* the scan's sample type */
    int64_t shape[4];           /* the scan's frame shape */
    int ndim;                   /* 2 (tomography) or 4 (SBDX) */
    int64_t height, width;      /* the detector image the input expects */
    rtomod_arm_block blocks[RTOMOD_ARM_BLOCKS];
    int n_blocks;
    int64_t frames_needed;      /* every block's frames; -1 unbounded */
    int64_t frames_taken;       /* frames the scan accepted */
    char angle_key[RTOMOD_INPUT_NAME_MAX];  /* per-image angle, "" = none */
    char channel[RTOMOD_INPUT_NAME_MAX];    /* Stream V2 channel, "" = first */
    /* Stream V2: the series bound by its start message. */
    int series_started;
    uint64_t series_id;
} rtomod_arm;

typedef struct rtomod_input {
    struct rtomod *d;
    rtomod_input_kind kind;
    void *socket;
    rtomod_zwatch watch;
    rtomod_arm arm;
    uint64_t messages;          /* messages received */
    uint64_t frames;            /* frames handed to the scan and accepted */
    uint64_t rejected;          /* messages (or their frames) rejected */
    uint64_t rejects[RTOMO_REJECT_COUNT];
    uint64_t bytes_in;          /* message bytes received */
    uint64_t bytes_out;         /* pixel bytes handed to the scan */
    uint64_t series;            /* series started (Stream V2) */
    uint64_t series_ended;      /* ... and ended by their end message */
    double decode_s;            /* time spent decoding images */
} rtomod_input;

typedef struct rtomod_inputs {
    rtomod_input in[RTOMOD_INPUT_COUNT];
    struct rtomod_decode_pool *pool;    /* helpers of the loop's decoding */
    rtomod_parallel par;                /* ... lent to the decoders */
} rtomod_inputs;

const char *rtomod_input_name(rtomod_input_kind kind);

/* Open the configured inputs (none configured: nothing to do).  0, or -1
 * with `error` filled. */
int rtomod_inputs_open(struct rtomod *d, char *error, size_t error_size);
void rtomod_inputs_close(struct rtomod *d);
/* {"stream2": {...}, "jsonhdr": {...}} for status: endpoint, armed scan,
 * counters by reason. */
json_t *rtomod_inputs_json(struct rtomod *d);

/* A rejected message of an input: counted there and as any reject
 * (event, status, the scan's record when `scan` names one). */
void rtomod_input_reject(rtomod_input *in, const rtomo_reject_info *why,
                         const char *scan, int64_t index);

/* Control commands (control.c dispatches): a reply object; an error reply
 * is {"ok": false, ...} too. */
json_t *rtomod_cmd_arm(struct rtomod *d, const json_t *request);
json_t *rtomod_cmd_disarm(struct rtomod *d, const json_t *request);

/* An image of the input's stream, frame number `frame`, `angle` in
 * degrees (NaN: none), its pixels decoded into the scan's frame by
 * `decode` (which fills `out` of out_size bytes with height x width
 * elements of src_size bytes each, or returns -1 with *why).  Accepted
 * or rejected (counted) here. */
typedef int (*rtomod_pixel_fn)(void *ctx, uint8_t *out, size_t out_size,
                               rtomo_reject_info *why);
typedef struct rtomod_image {
    int64_t frame;
    double angle;
    int64_t height, width;
    int src_size;               /* bytes per pixel: 1, 2, 4 */
    int src_float;              /* 1: float32 pixels (JSON headers) */
    rtomod_pixel_fn decode;
    void *ctx;
    /* A router's share of the image (rows_count > 0; Stream V2's
     * "rtomo_rows"): `decode` fills `elements` elements, which go from
     * element `offset` of the image on and hold rows [rows_first,
     * rows_first + rows_count) whole (checked by the parser).  Taken by
     * tomography arms under the rule of native frames with "rows". */
    int64_t rows_first, rows_count, offset, elements;
} rtomod_image;
void rtomod_arm_image(rtomod_input *in, const rtomod_image *image);
/* The stream's end of series: the armed scan ends as with scan_end. */
void rtomod_arm_end(rtomod_input *in, const char *why);
/* 1 when the input's arm is live: its scan record still acquires; a
 * stale one (the scan ended, was aborted or timed out) is cleared. */
int rtomod_arm_live(rtomod_input *in);
/* The armed scan, acquiring, or NULL (keeps its idle timer fed). */
void rtomod_arm_touch(rtomod_input *in);

/* Messages of each kind (input_stream2.c, input_jsonhdr.c). */
void rtomod_stream2_message(rtomod_input *in, const void *data, size_t size,
                            int n_parts);
void rtomod_jsonhdr_message(rtomod_input *in, const void *header,
                            size_t header_size, const void *data,
                            size_t size, int n_parts);

/* Configuration keys inputs.stream2.endpoint, inputs.stream2.channel,
 * inputs.jsonhdr.endpoint (config.c's table): null or "" = off. */
int rtomod_input_parse_stream2_endpoint(const json_t *v,
                                        struct rtomod_config *cfg, char *why,
                                        size_t n);
json_t *rtomod_input_dump_stream2_endpoint(const struct rtomod_config *cfg);
int rtomod_input_parse_stream2_channel(const json_t *v,
                                       struct rtomod_config *cfg, char *why,
                                       size_t n);
json_t *rtomod_input_dump_stream2_channel(const struct rtomod_config *cfg);
int rtomod_input_parse_jsonhdr_endpoint(const json_t *v,
                                        struct rtomod_config *cfg, char *why,
                                        size_t n);
json_t *rtomod_input_dump_jsonhdr_endpoint(const struct rtomod_config *cfg);

#endif /* RTOMOD_INPUT_H */
