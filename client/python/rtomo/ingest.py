"""Pushing frames to rtomod (PROTOCOL.md 3): PUSH to its PULL socket.

Units, as on the wire: angles in **degrees**, axis positions and shifts in
detector **bins** (pixels), times in milliseconds unless a name says
``_s``.  Frames are numpy arrays of ``uint8``, ``uint16`` or ``float32``
(any byte order: they are sent little-endian, row-major); other dtypes
are refused with :class:`~rtomo.errors.InvalidFrame` rather than
converted silently.

The ingest socket never answers: whether a message was accepted shows in
``rejected`` events (:meth:`rtomo.Client.wait_event`) and in the control
request ``scan`` (:meth:`rtomo.Control.wait_scan`).
"""
import json
import math

import numpy as np
import zmq

from .errors import InvalidFrame

PROTOCOL = 1
DEFAULT_INGEST = "tcp://127.0.0.1:5555"

#: the sample types of the protocol (PROTOCOL.md 2), little-endian
DTYPES = {"uint8": np.dtype("u1"), "uint16": np.dtype("<u2"),
          "float32": np.dtype("<f4")}


def wire_dtype(array):
    """The protocol's name of ``array``'s dtype, or InvalidFrame."""
    dt = np.asarray(array).dtype
    for name, wire in DTYPES.items():
        if dt.kind == wire.kind and dt.itemsize == wire.itemsize:
            return name
    raise InvalidFrame("bad_dtype", "dtype %s is not one of the protocol's "
                       "uint8, uint16, float32: convert it first (e.g. "
                       "array.astype(numpy.float32))" % dt)


def encode(array, dtype=None, check_finite=True):
    """``array`` as the payload bytes of the protocol (little-endian,
    row-major, x fastest).  ``dtype``: the name the scan announced, which
    ``array``'s dtype must match."""
    a = np.asarray(array)
    name = wire_dtype(a)
    if dtype is not None and name != dtype:
        raise InvalidFrame("dtype_mismatch", "array dtype %s differs from "
                           "the scan's %s" % (name, dtype))
    if check_finite and name == "float32" and not np.isfinite(a).all():
        bad = np.argwhere(~np.isfinite(a))[0]
        raise InvalidFrame("non_finite", "sample %s is %r: NaN and "
                           "infinities are refused" % (tuple(int(i) for i in bad),
                                                       float(a[tuple(bad)])))
    return np.ascontiguousarray(a, dtype=DTYPES[name]).tobytes()


def _jsonable(value):
    """numpy scalars and arrays as JSON values (integers stay integers)."""
    if isinstance(value, np.ndarray):
        return [_jsonable(v) for v in value.tolist()]
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items() if v is not None}
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    if isinstance(value, np.bool_):
        return bool(value)
    return value


class Sender:
    """PUSH sockets to one daemon's ingest endpoint.

    ``connections`` > 1 opens that many sockets (each its own TCP
    connection) and spreads frames over them round-robin; ordering then
    holds only per connection, so :class:`Scan` waits for the daemon to
    have the begin before it sends frames on the others and for every
    frame before it sends the end (PROTOCOL.md 3.2; this needs a control
    client).  ``sndhwm``: messages queued per socket before ``send``
    blocks (or, with ``send_timeout`` in seconds, raises zmq.Again).
    """

    def __init__(self, endpoint=DEFAULT_INGEST, connections=1, curve=None,
                 context=None, sndhwm=1000, send_timeout=None, linger=10.0):
        if connections < 1:
            raise ValueError("connections must be at least 1")
        self.endpoint = endpoint
        self._own_context = context is None
        self.context = context or zmq.Context()
        self.sockets = []
        for _ in range(connections):
            s = self.context.socket(zmq.PUSH)
            s.setsockopt(zmq.SNDHWM, sndhwm)
            s.setsockopt(zmq.LINGER, int(linger * 1000))
            if send_timeout is not None:
                s.setsockopt(zmq.SNDTIMEO, int(send_timeout * 1000))
            if curve:
                curve.apply(s)
            s.connect(endpoint)
            self.sockets.append(s)
        self._next = 0

    @property
    def connections(self):
        return len(self.sockets)

    def send(self, header, payload=None, connection=None):
        """Send one raw message: ``header`` (a dict, or bytes sent as they
        are) and the payload bytes if any.  ``connection``: which socket
        (default: the next one, round-robin).  No checks: use it to send
        what the higher-level calls would refuse."""
        if connection is None:
            connection = self._next
            self._next = (self._next + 1) % len(self.sockets)
        sock = self.sockets[connection]
        text = header if isinstance(header, bytes) else json.dumps(
            _jsonable(header)).encode("utf-8")
        if payload is None:
            sock.send(text)
        else:
            sock.send_multipart([text, payload], copy=len(payload) < 65536)

    def close(self, linger=None):
        for s in self.sockets:
            s.close(linger=None if linger is None else int(linger * 1000))
        self.sockets = []
        if self._own_context:
            self.context.term()
            self._own_context = False


def _detector(detector, width, height):
    if detector is not None:
        if isinstance(detector, dict):
            return int(detector["width"]), int(detector["height"])
        width, height = detector
    if width is None or height is None:
        raise InvalidFrame("bad_field", "detector: give width and height "
                           "(detector=(width, height))")
    return int(width), int(height)


class _Stream:
    """What scans and SBDX streams share: the id, the sender, the count of
    frames sent, the multi-connection protocol."""

    def __init__(self, sender, scan, control=None, check=True):
        self.sender = sender
        self.scan = scan
        self.control = control
        self.check = check
        self.sent = 0
        self.ended = False

    def _envelope(self, kind):
        return {"protocol": PROTOCOL, "type": kind, "scan": self.scan}

    def _begin(self, header):
        self.sender.send(header, connection=0)
        if self.sender.connections > 1:
            if self.control is None:
                raise InvalidFrame("bad_state", "several connections need a "
                                   "control client to wait for the begin")
            self.control.wait_for_scan(self.scan)

    def _frame(self, header, payload):
        self.sender.send(header, payload,
                         connection=0 if self.sender.connections == 1 else None)
        self.sent += 1

    def end(self, timeout=60.0):
        """Send the end message.  Over several connections, first wait
        until the daemon has taken in every frame sent (up to
        ``timeout`` s)."""
        if self.sender.connections > 1 and self.control is not None:
            self.control.wait_for_frames(self.scan, self.sent, timeout)
        self.sender.send(self._envelope(self._end_type), connection=0)
        self.ended = True

    def wait(self, timeout=60.0):
        """What became of the stream (PROTOCOL.md 3.9): the daemon's final
        ``scan`` object when it succeeded, else ScanFailed with its reason.
        Needs the control client."""
        if self.control is None:
            raise InvalidFrame("bad_state", "no control client to ask")
        return self.control.wait_scan(self.scan, timeout)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *rest):
        if exc_type is None and not self.ended:
            self.end()


class Scan(_Stream):
    """A tomography scan being pushed.  Made by :meth:`rtomo.Client.scan`
    (or :func:`begin_scan`); send darks, flats, then projections, then
    :meth:`end` (or use it as a context manager, which ends it)."""

    _end_type = "scan_end"

    def __init__(self, sender, scan, header, control=None, check=True):
        super().__init__(sender, scan, control, check)
        self.header = header
        self.width = header["detector"]["width"]
        self.height = header["detector"]["height"]
        self.dtype = header.get("dtype") or "uint16"

    def _send_frame(self, kind, index, data, extra):
        a = np.asarray(data)
        if self.check:
            if a.ndim == 1 and self.height == 1:
                a = a.reshape(1, -1)
            if a.shape != (self.height, self.width):
                raise InvalidFrame("shape_mismatch", "%s %d: shape %s differs "
                                   "from the detector's (height, width) = "
                                   "(%d, %d)" % (kind, index, a.shape,
                                                 self.height, self.width))
            payload = encode(a, self.dtype)
            dtype = self.dtype
            shape = [self.height, self.width]
        else:
            payload = encode(a, None, check_finite=False)
            dtype = wire_dtype(a)
            shape = list(a.shape) if a.ndim == 2 else [1, a.size]
        h = self._envelope(kind)
        h.update(index=int(index), dtype=dtype, shape=shape)
        h.update({k: v for k, v in extra.items() if v is not None})
        self._frame(h, payload)

    def dark(self, index, data):
        """Dark ``index`` (0 ≤ index < darks): a (height, width) array."""
        self._send_frame("dark", index, data, {})

    def flat(self, index, data):
        """Flat ``index``: before the projections 0 ≤ index < flats, after
        them (``flats_after``) flats ≤ index < flats + flats_after."""
        self._send_frame("flat", index, data, {})

    def projection(self, index, data, angle=None, axis_shift=None, **extra):
        """Projection ``index`` (0 ≤ index < projections; continuous mode:
        any index ≥ 0, ever-growing): a (height, width) array.  ``angle``
        in degrees overrides the scan's for this one (an encoder reading);
        ``axis_shift`` in bins likewise.  ``extra``: fields of your own
        (the daemon ignores unknown fields)."""
        extra.update(angle=angle, axis_shift=axis_shift)
        self._send_frame("projection", index, data, extra)

    def darks(self, stack, first=0):
        """Every dark of a (n, height, width) stack, indices from ``first``."""
        for i, frame in enumerate(stack):
            self.dark(first + i, frame)

    def flats(self, stack, first=0):
        """Every flat of a (n, height, width) stack, indices from ``first``."""
        for i, frame in enumerate(stack):
            self.flat(first + i, frame)

    def projections(self, stack, first=0, angles=None):
        """Every projection of a (n, height, width) stack, indices from
        ``first``; ``angles``: optional per-projection degrees."""
        for i, frame in enumerate(stack):
            self.projection(first + i, frame,
                            angle=None if angles is None else angles[i])


def scan_begin_header(scan, detector=None, projections=None, width=None,
                      height=None, angle_start=None, angle_step=None,
                      angles=None, axis=None, axis_shift=None,
                      half_acquisition=None, dtype="uint16", darks=None,
                      flats=None, flats_after=None, reconstruction=None,
                      mode=None, every=None, **extra):
    """The ``scan_begin`` header of PROTOCOL.md 3.3, None fields left out.

    - ``detector``: ``(width, height)`` or ``{"width", "height"}`` (or
      ``width=``, ``height=``): bins per row and rows.
    - ``projections``: per scan (continuous mode: per window).
    - ``angle_start``, ``angle_step``: **degrees** (default 0 and
      180/projections; give 360/projections for a full turn), or
      ``angles``: one angle in degrees per projection.
    - ``axis``: rotation axis in **bins** from the left edge of the
      detector (default (width − 1)/2), or ``"auto"``; ``axis_shift``:
      per-projection corrections in bins.
    - ``half_acquisition``: a 360° scan with the axis near one edge.
    - ``dtype``: ``"uint8"``, ``"uint16"`` (default) or ``"float32"``;
      float32 without flats means the samples are line integrals already.
    - ``darks``, ``flats``, ``flats_after``: counts that will be sent.
    - ``reconstruction``: dict of PROTOCOL.md 3.3's per-scan settings
      (``filter``, ``cutoff``, ``interpolation``, ``angle_weights``,
      ``phase`` {delta_beta, energy_kev, distance_m, pixel_m}, ``rings``
      ``"off"``/``"column_mean"``, ``rings_width``, ``slices`` (``"all"``,
      a list of rows, or ``{"first", "count", "step"}``), ``slice_size``,
      ``roi`` [x, y, w, h] in grid pixels, ``method`` ``"fbp"``/
      ``"sirt"``/``"cgls"`` with ``iterations``, ``publish_every``,
      ``tolerance``, ``nonnegative``, ``warm_start`` (PROTOCOL.md 3.12)).
    - ``mode``: ``"scan"`` or ``"continuous"`` (then ``every``: reconstruct
      after every K projections).
    - ``extra``: further fields, sent as they are.
    """
    if projections is None:
        raise InvalidFrame("bad_field", "projections is required")
    w, h = _detector(detector, width, height)
    if dtype is not None and dtype not in DTYPES:
        raise InvalidFrame("bad_dtype", "dtype %r is not one of %s"
                           % (dtype, ", ".join(DTYPES)))
    if angles is not None and (angle_start is not None
                               or angle_step is not None):
        raise InvalidFrame("bad_field", "give angles or angle_start/"
                           "angle_step, not both")
    for name, v in (("angle_start", angle_start), ("angle_step", angle_step)):
        if v is not None and not math.isfinite(v):
            raise InvalidFrame("bad_field", "%s = %r is not finite" % (name, v))
    header = {"protocol": PROTOCOL, "type": "scan_begin", "scan": scan,
              "detector": {"width": w, "height": h},
              "projections": int(projections)}
    fields = dict(angle_start=angle_start, angle_step=angle_step,
                  angles=angles, axis=axis, axis_shift=axis_shift,
                  half_acquisition=half_acquisition, dtype=dtype, darks=darks,
                  flats=flats, flats_after=flats_after,
                  reconstruction=reconstruction, mode=mode, every=every)
    fields.update(extra)
    header.update({k: _jsonable(v) for k, v in fields.items()
                   if v is not None})
    return header


class SbdxStream(_Stream):
    """An SBDX tomosynthesis stream being pushed (PROTOCOL.md 3.7): made
    by :meth:`rtomo.Client.sbdx`; send :meth:`frame` s, then :meth:`end`."""

    _end_type = "sbdx_end"

    def __init__(self, sender, scan, header, control=None, check=True):
        super().__init__(sender, scan, control, check)
        self.header = header
        hx, hy = header["holes"]
        d = header["detector"]
        self.shape = (hy, hx, d["height"], d["width"])
        self.dtype = header.get("dtype") or "uint8"

    def frame(self, index, data):
        """Frame ``index`` (≥ 0, each once): an array of shape
        (holes_y, holes_x, det_height, det_width), the detector image of
        every collimator hole in row-major hole order."""
        a = np.asarray(data)
        if self.check and a.shape != self.shape:
            raise InvalidFrame("shape_mismatch", "sbdx frame %d: shape %s "
                               "differs from (holes_y, holes_x, det_height, "
                               "det_width) = %s" % (index, a.shape,
                                                    self.shape))
        payload = encode(a, self.dtype if self.check else None)
        h = self._envelope("sbdx_frame")
        h.update(index=int(index), dtype=wire_dtype(a), shape=list(a.shape))
        self._frame(h, payload)


def sbdx_begin_header(scan, holes, detector, shift, ratios=None,
                      ratio_range=None, plane_size=None, origin=None,
                      composite_radius=None, flat_field=None, dtype="uint8",
                      output=None, **extra):
    """The ``sbdx_begin`` header of PROTOCOL.md 3.7.

    - ``holes``: ``(x, y)`` collimator holes; ``detector``: ``(width,
      height)`` or dict; ``shift``: plane shift per hole m, pixels.
    - ``ratios``: the reconstruction ratio n of each plane, or
      ``ratio_range``: ``{"first", "last", "count"}``.
    - ``plane_size`` ``(w, h)``, ``origin`` ``(x, y)``: pixels;
      ``composite_radius``; ``flat_field`` (default true).
    - ``dtype``: ``"uint8"`` (default), ``"uint16"``, ``"float32"``.
    - ``output``: ``{"planes": "float32"|"uint16"|"none", "u16_scale",
      "u16_offset", "composite": bool}``.
    """
    if dtype is not None and dtype not in DTYPES:
        raise InvalidFrame("bad_dtype", "dtype %r is not one of %s"
                           % (dtype, ", ".join(DTYPES)))
    w, h = _detector(detector, None, None)
    header = {"protocol": PROTOCOL, "type": "sbdx_begin", "scan": scan,
              "holes": [int(holes[0]), int(holes[1])],
              "detector": {"width": w, "height": h}, "shift": int(shift)}
    fields = dict(ratios=ratios, ratio_range=ratio_range,
                  plane_size=plane_size, origin=origin,
                  composite_radius=composite_radius, flat_field=flat_field,
                  dtype=dtype, output=output)
    fields.update(extra)
    header.update({k: _jsonable(v) for k, v in fields.items()
                   if v is not None})
    return header
