"""EPICS PVAccess bridge: an areaDetector NTNDArray PV into rtomod.

APS-style beamlines publish detector images as an ``NTNDArray`` PV
(areaDetector's NDPluginPva).  :class:`Bridge` subscribes to one with
p4p (``pip install p4p``; an optional dependency of this package) and
forwards every array to rtomod's JSON-header input (``inputs.jsonhdr``,
PROTOCOL.md 10.6) as an htype ``array-1.0`` message, where a scan armed
from the control socket (:meth:`rtomo.Control.request` with ``"cmd":
"arm", "input": "jsonhdr"``) takes the arrays as its frames::

    python3 -m rtomo.pva --pv 13SIM1:Pva1:Image \\
        --input tcp://rtomod-host:5560 --angle-attribute SampleAngle

Frame numbers: the NTNDArray's ``uniqueId`` less the first one the bridge
receives (``relative``, the default: arm, then start the bridge or the
acquisition), or the ``uniqueId`` itself. A per-image angle may come from
an NDAttribute (``angle_attribute``), forwarded in the header's
``ndattr``; arm with ``"angle_key"`` of the same name.

Arrays the bridge cannot forward (colour, signed integers, more than 2
dimensions) are counted in ``stats["skipped"]`` and logged, never sent;
``uniqueId`` jumps (a monitor queue that overflowed drops updates) are
counted in ``stats["gaps"]``, and the scan reports the frames missing.
"""
import argparse
import json
import logging
import signal
import threading

import numpy as np
import zmq

log = logging.getLogger("rtomo.pva")

# Pixel types rtomod takes as they are, and those converted (the NTNDArray
# value union's selected member shows as the numpy array's dtype).
_TAKEN = (np.uint8, np.uint16, np.uint32, np.float32)
_CONVERTED = {np.dtype(np.float64): np.float32}


def _attribute(value, name):
    """The value of NDAttribute ``name`` of an NTNDArray Value, or None."""
    for attr in value["attribute"] or []:
        if attr["name"] == name:
            try:
                return float(attr["value"])
            except (TypeError, ValueError):
                return None
    return None


def ndarray_message(value, frame, angle_attribute=None):
    """The htype array-1.0 message ``[header, image]`` for an NTNDArray
    Value (p4p), numbered ``frame``; ValueError for an array rtomod cannot
    take (signed or 64-bit integers, colour, more than 2 dimensions)."""
    array = np.asarray(value["value"])
    if array.dtype in _CONVERTED:
        array = array.astype(_CONVERTED[array.dtype])
    elif array.dtype not in [np.dtype(t) for t in _TAKEN]:
        raise ValueError("NTNDArray of %s pixels: rtomod takes uint8, "
                         "uint16, uint32 and float" % array.dtype)
    dims = [d["size"] for d in value["dimension"]]
    if len(dims) != 2:
        raise ValueError("NTNDArray of %d dimensions: rtomod takes 2 "
                         "(grey images)" % len(dims))
    width, height = dims                # dimension[0] is x, the fastest
    if array.size != width * height:
        raise ValueError("NTNDArray of %d samples for %d x %d pixels"
                         % (array.size, width, height))
    header = {"htype": "array-1.0", "type": array.dtype.name,
              "shape": [height, width], "frame": int(frame),
              "source": "pva"}
    if angle_attribute:
        angle = _attribute(value, angle_attribute)
        if angle is not None:
            header["ndattr"] = {angle_attribute: angle}
    little = array.astype(array.dtype.newbyteorder("<"), copy=False)
    return [json.dumps(header).encode(), little.tobytes()]


class Bridge:
    """Forward NTNDArray updates of ``pv`` to rtomod's JSON-header input
    at ``input_endpoint`` (a PUSH socket connected to it).

    ``relative``: frame = uniqueId - the first uniqueId received (else the
    uniqueId). ``angle_attribute``: an NDAttribute forwarded as the
    image's angle. ``context``: a p4p client Context (default: a new
    ``pva`` one; pass one configured for the IOC's addresses).
    ``queue``: the monitor's queue on the server side (pvAccess
    ``record[queueSize=N]``), so bursts are not squashed.
    """

    def __init__(self, pv, input_endpoint, relative=True,
                 angle_attribute=None, context=None, queue=256,
                 zmq_context=None):
        from p4p.client.thread import Context
        self.pv = pv
        self.relative = relative
        self.angle_attribute = angle_attribute
        self._own_context = context is None
        self.context = context or Context("pva")
        self.zmq = zmq_context or zmq.Context.instance()
        self.socket = self.zmq.socket(zmq.PUSH)
        self.socket.setsockopt(zmq.LINGER, 5000)
        self.socket.connect(input_endpoint)
        self.lock = threading.Lock()
        self.connected = threading.Event()
        self.first_id = None
        self.last_id = None
        self.stats = {"forwarded": 0, "skipped": 0, "gaps": 0,
                      "disconnects": 0}
        self.subscription = self.context.monitor(
            pv, self._update, request="field()record[queueSize=%d]" % queue,
            notify_disconnect=True)

    def _update(self, value):
        if isinstance(value, Exception):
            self.stats["disconnects"] += 1
            self.connected.clear()
            log.warning("%s: %s", self.pv, value)
            return
        self.connected.set()
        raw = getattr(value, "raw", value)
        if not _has_image(raw):
            return                      # the PV's first, empty value
        with self.lock:
            unique = int(raw["uniqueId"])
            if self.first_id is None:
                self.first_id = unique
            if self.last_id is not None and unique != self.last_id + 1:
                self.stats["gaps"] += 1
            self.last_id = unique
            frame = unique - self.first_id if self.relative else unique
            try:
                message = ndarray_message(raw, frame, self.angle_attribute)
            except ValueError as e:
                self.stats["skipped"] += 1
                log.warning("%s: array %d not forwarded: %s", self.pv,
                            unique, e)
                return
            self.socket.send_multipart(message, copy=False)
            self.stats["forwarded"] += 1

    def close(self):
        self.subscription.close()
        if self._own_context:
            self.context.close()
        self.socket.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _has_image(raw):
    try:
        return np.asarray(raw["value"]).size > 0 and \
            len(raw["dimension"]) > 0
    except (KeyError, TypeError, ValueError):
        return False


def main(argv=None):
    p = argparse.ArgumentParser(
        prog="python3 -m rtomo.pva",
        description="Forward an areaDetector NTNDArray PV to rtomod's "
                    "JSON-header input (arm the scan first).")
    p.add_argument("--pv", required=True, help="the NTNDArray PV")
    p.add_argument("--input", required=True,
                   help="rtomod's inputs.jsonhdr endpoint, e.g. "
                        "tcp://rtomod-host:5560")
    p.add_argument("--absolute", action="store_true",
                   help="frame numbers are the uniqueIds themselves")
    p.add_argument("--angle-attribute",
                   help="NDAttribute forwarded as each image's angle")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO,
                        format="%(asctime)s %(name)s %(message)s")
    done = threading.Event()
    signal.signal(signal.SIGINT, lambda *a: done.set())
    signal.signal(signal.SIGTERM, lambda *a: done.set())
    with Bridge(args.pv, args.input, relative=not args.absolute,
                angle_attribute=args.angle_attribute) as bridge:
        while not done.wait(5.0):
            log.info("%s: %s", args.pv, bridge.stats)
        log.info("%s: %s", args.pv, bridge.stats)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
