/*
 * input_stream2.c — a DECTRIS Stream V2 input (rtomod_input.h): start,
 * image and end messages of the detector's series, bound to the scan
 * armed on the input.  The start message binds its series; images of
 * that series become frames by their image_id; the end message ends the
 * scan.  Messages out of that order, of another series or with nothing
 * armed are rejected with their reason (bad_state, not_armed), as are
 * malformed ones (stream2.c).
 */
#include "config.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "rtomod.h"
#include "rtomod_input.h"
#include "rtomod_stream2.h"

static void reject(rtomod_input *in, rtomo_reject reason, int64_t index,
                   const char *format, ...)
    __attribute__((format(printf, 4, 5)));

static void reject(rtomod_input *in, rtomo_reject reason, int64_t index,
                   const char *format, ...)
{
    rtomo_reject_info why;
    why.reason = reason;
    va_list ap;
    va_start(ap, format);
    vsnprintf(why.message, sizeof why.message, format, ap);
    va_end(ap);
    rtomod_input_reject(in, &why, in->arm.armed ? in->arm.scan : NULL,
                        index);
}

/* Whether detector pixels of elem_size bytes fit the scan's dtype
 * (PROTOCOL.md 10.4). */
static int fits(int elem_size, rtomo_dtype dtype)
{
    return dtype == RTOMO_DTYPE_F32 ||
           (dtype == RTOMO_DTYPE_U16 && elem_size <= 2) ||
           (dtype == RTOMO_DTYPE_U8 && elem_size == 1);
}

/* The start binds the series: its image size and pixel type must suit
 * the armed scan, so that a misconfigured detector is refused once, at
 * its start, with the reason. */
static void on_start(rtomod_input *in, const rtomod_s2_msg *m)
{
    rtomod_arm *a = &in->arm;
    if (a->series_started) {
        reject(in, RTOMO_REJECT_STATE, -1, "start of series %" PRIu64
               " while series %" PRIu64 " is bound to scan %s (its end "
               "never came: disarm first)", m->series_id, a->series_id,
               a->scan);
        return;
    }
    if ((int64_t)m->height != a->height || (int64_t)m->width != a->width) {
        reject(in, RTOMO_REJECT_SHAPE, -1, "series %" PRIu64 " has images "
               "of %" PRIu64 " x %" PRIu64 " pixels (image_size_y x "
               "image_size_x), scan %s expects %lld x %lld", m->series_id,
               m->height, m->width, a->scan, (long long)a->height,
               (long long)a->width);
        return;
    }
    if (m->elem_size && !fits(m->elem_size, a->dtype)) {
        reject(in, RTOMO_REJECT_DTYPE, -1, "series %" PRIu64 " has %s "
               "pixels, which scan %s's dtype %s cannot hold (arm with "
               "\"dtype\": \"float32\")", m->series_id,
               m->elem_size == 4 ? "uint32" : "uint16", a->scan,
               rtomo_dtype_name(a->dtype));
        return;
    }
    a->series_started = 1;
    a->series_id = m->series_id;
    in->series++;
    rtomod_arm_touch(in);
    log_info("input stream2: series %" PRIu64 " (%s) of %" PRIu64
             " images bound to scan %s", m->series_id,
             m->series_unique_id[0] ? m->series_unique_id : "no unique id",
             m->number_of_images, a->scan);
}

/* What decode_pixels needs: the image and the loop's helpers. */
typedef struct pixels_ctx {
    const rtomod_s2_pixels *px;
    const rtomod_parallel *par;
} pixels_ctx;

static int decode_pixels(void *ctx, uint8_t *out, size_t out_size,
                         rtomo_reject_info *why)
{
    const pixels_ctx *c = ctx;
    return rtomod_s2_pixels_decode_on(c->px, out, out_size, c->par, why);
}

static void on_image(rtomod_input *in, rtomod_s2_msg *m)
{
    rtomod_arm *a = &in->arm;
    if (!a->series_started) {
        reject(in, RTOMO_REJECT_STATE, (int64_t)m->image_id, "image %"
               PRIu64 " of series %" PRIu64 " before its series' start "
               "message", m->image_id, m->series_id);
        return;
    }
    if (m->series_id != a->series_id) {
        reject(in, RTOMO_REJECT_STATE, (int64_t)m->image_id, "image %"
               PRIu64 " of series %" PRIu64 ", but series %" PRIu64
               " is bound to scan %s", m->image_id, m->series_id,
               a->series_id, a->scan);
        return;
    }
    pixels_ctx ctx = {&m->pixels, &in->d->inputs->par};
    rtomod_image im = {
        .frame = (int64_t)m->image_id, .angle = m->angle,
        .height = (int64_t)m->pixels.height,
        .width = (int64_t)m->pixels.width,
        .src_size = m->pixels.elem_size, .src_float = 0,
        .decode = decode_pixels, .ctx = &ctx,
        .rows_first = (int64_t)m->pixels.rows_first,
        .rows_count = (int64_t)m->pixels.rows_count,
        .offset = (int64_t)m->pixels.offset,
        .elements = (int64_t)m->pixels.elements};
    rtomod_arm_image(in, &im);
}

static void on_end(rtomod_input *in, const rtomod_s2_msg *m)
{
    rtomod_arm *a = &in->arm;
    if (!a->series_started || m->series_id != a->series_id) {
        reject(in, RTOMO_REJECT_STATE, -1, "end of series %" PRIu64
               ", which is not bound to scan %s", m->series_id, a->scan);
        return;
    }
    in->series_ended++;
    rtomod_arm_end(in, "the end of the series");
}

void rtomod_stream2_message(rtomod_input *in, const void *data, size_t size,
                            int n_parts)
{
    if (n_parts != 1) {
        reject(in, RTOMO_REJECT_PARTS, -1, "a Stream V2 message is one "
               "part, not %d", n_parts);
        return;
    }
    rtomod_s2_msg m;
    rtomo_reject_info why;
    const char *channel = in->arm.armed ? in->arm.channel
                                        : in->d->cfg.inputs.stream2_channel;
    if (rtomod_s2_parse(data, size, channel,
                        in->arm.armed ? in->arm.angle_key : NULL, &m,
                        &why) != 0) {
        rtomod_input_reject(in, &why, in->arm.armed ? in->arm.scan : NULL,
                            -1);
        return;
    }
    static const char *const kinds[] = {"start", "image", "end"};
    if (!rtomod_arm_live(in))
        reject(in, RTOMO_REJECT_NOT_ARMED,
               m.kind == RTOMOD_S2_IMAGE ? (int64_t)m.image_id : -1,
               "Stream V2 %s message of series %" PRIu64 ", and no scan "
               "is armed on input stream2", kinds[m.kind], m.series_id);
    else if (m.kind == RTOMOD_S2_START)
        on_start(in, &m);
    else if (m.kind == RTOMOD_S2_IMAGE)
        on_image(in, &m);
    else
        on_end(in, &m);
    rtomod_s2_clear(&m);
}
