/*
 * rtomo_proto_cone.h — cone-beam scans on the wire (PROTOCOL.md 3.13)
 * meet the cone-beam engine (kernels/cone/rtomo_cone.h): the engine
 * geometry a decoded "beam": "cone" scan_begin describes.  Apart from
 * rtomo_protocol.h so that the protocol's main header does not need the
 * cone engine's include path.
 */
#ifndef RTOMO_PROTO_CONE_H
#define RTOMO_PROTO_CONE_H

#include "rtomo_cone.h"
#include "rtomo_protocol.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The engine geometry of a cone-beam spec (spec->cone not NULL): the
 * detector, projections and angles (radians; g->angles points at the
 * spec's list, which the engine copies when it makes a plan), the cone
 * object's lengths, the volume and its ROI, and the spec's window and
 * cutoff as they are (the daemon puts its configured ones where the scan
 * gave none). */
void rtomo_proto_cone_geometry(const rtomo_scan_spec *spec,
                               rtomo_cone_geometry *g);

#ifdef __cplusplus
}
#endif

#endif /* RTOMO_PROTO_CONE_H */
