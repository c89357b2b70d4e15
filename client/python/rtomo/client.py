"""One object for a whole daemon: ingest, publish and control.

    import numpy as np, rtomo
    with rtomo.Client("localhost") as c:
        with c.scan("s1", detector=(512, 4), projections=360,
                    dtype="float32") as scan:        # begin ... end
            for i, p in enumerate(projections):      # (4, 512) float32 each
                scan.projection(i, p)
        c.wait_event("scan_complete", scan="s1", timeout=60)
        slices = c.images("s1", timeout=10)       # {index: Image}
"""
import collections
import time

import zmq

from .control import Control
from .errors import Aborted, Rejected, Timeout
from .ingest import (Scan, SbdxStream, Sender, scan_begin_header,
                     sbdx_begin_header)
from .subscriber import Event, Image, Subscriber, TOPICS


def _endpoint(given, host, port):
    return given or "tcp://%s:%d" % (host, port)


class Client:
    """A client of one rtomod.

    ``host``: the daemon's host, with the default ports 5555 (ingest),
    5556 (publish), 5557 (control); or give ``ingest``, ``publish``,
    ``control`` endpoints.  ``connections``: ingest connections (frames
    spread over them).  ``curve``: a :class:`~rtomo.security.Curve` for a
    daemon with CURVE.  ``topics``: what the client subscribes to (default
    every topic; None or ``()``: no subscriber).  ``timeout``: control
    reply timeout, seconds.  ``ready``: wait (up to that many seconds)
    until the subscription is in place, so that no event of a scan begun
    next is missed; 0 to skip.

    Attributes: ``control`` (:class:`~rtomo.control.Control`),
    ``sender`` (:class:`~rtomo.ingest.Sender`), ``subscriber``
    (:class:`~rtomo.subscriber.Subscriber` or None).
    """

    def __init__(self, host="127.0.0.1", ingest=None, publish=None,
                 control=None, connections=1, curve=None, topics=TOPICS,
                 timeout=10.0, ready=5.0, rcvhwm=None, yield_gaps=False):
        self.context = zmq.Context()
        self.curve = curve
        self.endpoints = {"ingest": _endpoint(ingest, host, 5555),
                          "publish": _endpoint(publish, host, 5556),
                          "control": _endpoint(control, host, 5557)}
        self.control = Control(self.endpoints["control"], timeout, curve,
                               self.context)
        self.sender = Sender(self.endpoints["ingest"], connections, curve,
                             self.context)
        self.subscriber = None
        if topics:
            self.subscriber = Subscriber(self.endpoints["publish"], topics,
                                         curve, self.context, rcvhwm,
                                         yield_gaps=yield_gaps)
            if ready:
                self.subscriber.wait_ready(ready)
        # messages read while waiting for something else, kept for later
        self._backlog = collections.deque()

    # -- control shortcuts -------------------------------------------------
    def ping(self):
        return self.control.ping()

    def status(self):
        """The ``status`` reply (PROTOCOL.md 7)."""
        return self.control.status()

    def get_config(self):
        """The daemon's effective configuration (the reply's ``config``)."""
        return self.control.get_config()["config"]

    def set_config(self, config=None, **sections):
        """See :meth:`rtomo.Control.set_config`; returns the new config."""
        return self.control.set_config(config, **sections)["config"]

    def abort(self, scan=None):
        return self.control.abort(scan)

    def planes(self, planes=None):
        """See :meth:`rtomo.Control.planes`; returns the planes asked for."""
        return self.control.planes(planes)["planes"]

    def scan_state(self, scan):
        """The daemon's ``scan`` object for ``scan`` now (PROTOCOL.md 3.9)."""
        return self.control.scan(scan)

    def scan_outcome(self, scan, timeout=60.0):
        """The final ``scan`` object (not judged)."""
        return self.control.scan_outcome(scan, timeout)

    def wait_scan(self, scan, timeout=60.0):
        """The final ``scan`` object when the scan succeeded; else
        ScanFailed with the daemon's reason."""
        return self.control.wait_scan(scan, timeout)

    # -- ingest ------------------------------------------------------------
    def scan(self, scan, detector=None, projections=None, check=True,
             **fields):
        """Begin a tomography scan and return its :class:`~rtomo.ingest.Scan`
        (send darks, flats, projections, then ``end()``; as a context
        manager it ends itself).  Fields: see
        :func:`~rtomo.ingest.scan_begin_header` (angles in degrees, axis in
        bins).  ``check=False`` sends frames as given, without comparing
        their shape and dtype with the begin's (to see the daemon refuse
        them)."""
        header = scan_begin_header(scan, detector, projections, **fields)
        s = Scan(self.sender, scan, header, self.control, check)
        s._begin(header)
        return s

    def sbdx(self, scan, holes, detector, shift, check=True, **fields):
        """Begin an SBDX stream and return its
        :class:`~rtomo.ingest.SbdxStream` (``frame(i, array)``, ``end()``);
        fields: see :func:`~rtomo.ingest.sbdx_begin_header`."""
        header = sbdx_begin_header(scan, holes, detector, shift, **fields)
        s = SbdxStream(self.sender, scan, header, self.control, check)
        s._begin(header)
        return s

    def send(self, header, payload=None, connection=None):
        """One raw ingest message, unchecked (see Sender.send)."""
        self.sender.send(header, payload, connection)

    # -- subscription ------------------------------------------------------
    def recv(self, timeout=None):
        """The next published message (backlog first), or None."""
        if self._backlog:
            return self._backlog.popleft()
        if self.subscriber is None:
            raise ValueError("this client subscribes to nothing")
        return self.subscriber.recv(timeout, gaps=False)

    def __iter__(self):
        while True:
            yield self.recv()

    def _search(self, match, timeout, what):
        """Read messages (backlog first) until ``match(msg)`` returns
        something other than None, and return that; messages it does not
        take (returns False for) stay in the backlog, in order."""
        if self.subscriber is None:
            raise ValueError("this client subscribes to nothing")
        deadline = time.monotonic() + timeout
        source, self._backlog = self._backlog, collections.deque()
        kept = collections.deque()
        try:
            while True:
                if source:
                    msg = source.popleft()
                else:
                    left = deadline - time.monotonic()
                    msg = self.subscriber.recv(left, gaps=False) \
                        if left > 0 else None
                    if msg is None:
                        raise Timeout("%s within %g s" % (what(), timeout))
                result = match(msg)
                if result is False:
                    kept.append(msg)
                elif result is not None:
                    return result
        finally:
            kept.extend(source)
            self._backlog = kept

    def wait_event(self, event, scan=None, timeout=30.0, raise_rejected=True,
                   raise_aborted=True):
        """Wait for an event named ``event`` (a string or a tuple of names),
        of ``scan`` when given, and return it (an
        :class:`~rtomo.subscriber.Event`).  Meanwhile a ``rejected`` event
        of that scan raises :class:`~rtomo.errors.Rejected` (with the
        daemon's ``reason`` and ``message``) and a ``scan_aborted`` one
        :class:`~rtomo.errors.Aborted`, unless waited for or switched off.
        Other messages are kept for :meth:`recv` and :meth:`images`.
        :class:`~rtomo.errors.Timeout` when nothing came in ``timeout`` s.
        Events are live feedback and PUB may drop them (PROTOCOL.md 3.9):
        :meth:`wait_scan` is the final word."""
        names = (event,) if isinstance(event, str) else tuple(event)

        def match(msg):
            if not isinstance(msg, Event) or (scan is not None
                                              and msg.scan != scan):
                return False
            if msg.event in names:
                return msg
            if raise_rejected and msg.event == "rejected":
                raise Rejected(msg.reason, msg.message, msg.scan, msg.index,
                               msg)
            if raise_aborted and msg.event == "scan_aborted":
                raise Aborted(msg.reason, msg.message)
            return False

        return self._search(match, timeout, lambda: "no %s event%s" % (
            "/".join(names), " of scan %s" % scan if scan else ""))

    def images(self, scan, topic="slice", timeout=60.0, frame=None):
        """Collect the images of one set of ``scan`` on ``topic`` (the
        slices of a scan; with ``frame``, of that continuous window or SBDX
        frame) until all ``count`` of them arrived; returns ``{index:
        Image}``.  Stops early, returning what came, at the scan's
        ``scan_complete`` event (after which nothing more comes);
        a ``scan_aborted`` event raises Aborted; Timeout when the time is
        up first.  Other messages are kept for later calls."""
        got = {}

        def match(msg):
            if msg.scan != scan:
                return False
            if isinstance(msg, Image) and msg.topic == topic and (
                    frame is None or msg.frame == frame):
                got[msg.index] = msg
                return got if len(got) == msg.count else None
            if isinstance(msg, Event):
                if msg.event == "scan_aborted":
                    raise Aborted(msg.reason, msg.message)
                if msg.event == "scan_complete" and got:
                    return got
            return False

        return self._search(match, timeout, lambda: "scan %s: %d %s "
                            "image(s)" % (scan, len(got), topic))

    def push_scan(self, scan, projections, darks=None, flats=None,
                  flats_after=None, timeout=60.0, **fields):
        """Push a whole scan from numpy stacks and return its judged
        outcome (:meth:`wait_scan`).  ``projections``: (n, height, width),
        ``darks``/``flats``/``flats_after``: (k, height, width) or None;
        the detector, counts and dtype come from the arrays; ``fields``:
        the rest of scan_begin (``angle_step`` in degrees, ``axis`` in bins
        or ``"auto"``, ``reconstruction``, ...)."""
        from .ingest import wire_dtype
        n, height, width = projections.shape
        fields.setdefault("dtype", wire_dtype(projections))
        if darks is not None:
            fields.setdefault("darks", len(darks))
        if flats is not None:
            fields.setdefault("flats", len(flats))
        if flats_after is not None:
            fields.setdefault("flats_after", len(flats_after))
        s = self.scan(scan, detector=(width, height), projections=n, **fields)
        if darks is not None:
            s.darks(darks)
        if flats is not None:
            s.flats(flats)
        s.projections(projections)
        if flats_after is not None:
            s.flats(flats_after, first=len(flats))
        s.end(timeout)
        return self.wait_scan(scan, timeout)

    def close(self):
        self.control.close()
        self.sender.close()
        if self.subscriber is not None:
            self.subscriber.close()
        self.context.term()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


__all__ = ["Client"]
