"""Subscribing to rtomod's publish socket (PROTOCOL.md 6): SUB to its PUB.

Messages come as :class:`Image` (topics ``slice``, ``preview``, ``plane``,
``composite``, ``depth``: a numpy array and its header), :class:`Event`
and :class:`Telemetry`.  Losses are found from each topic's ``seq``
(PROTOCOL.md 6.4): every message carries ``lost`` (messages of its topic
lost just before it, for this subscriber), the subscriber counts them in
``gaps`` (per topic) and ``lost`` (total), and, with ``yield_gaps=True``,
iteration yields a :class:`Gap` before the message that revealed it.
"""
import collections
import json
import time
import warnings
from dataclasses import dataclass
from typing import Any, Dict

import numpy as np
import zmq

from .errors import Timeout

DEFAULT_PUBLISH = "tcp://127.0.0.1:5556"
IMAGE_TOPICS = ("slice", "preview", "plane", "composite", "depth")
TOPICS = IMAGE_TOPICS + ("telemetry", "event")


class GapWarning(UserWarning):
    """Issued (with ``warn_gaps=True``) when messages were lost."""


@dataclass
class Gap:
    """``lost`` messages of ``topic`` from publisher ``source`` never
    arrived: ``seq`` jumped from ``after`` to ``before``.  ``restarted``:
    ``seq`` went down, the daemon restarted (``lost`` is then 0: unknown)."""
    topic: str
    lost: int
    after: int
    before: int
    source: str = ""
    restarted: bool = False


class _Message:
    """What every published message has: topic, header, seq, source."""

    @property
    def seq(self):
        return self.header.get("seq")

    @property
    def scan(self):
        return self.header.get("scan")

    def __getitem__(self, key):
        return self.header[key]

    def get(self, key, default=None):
        return self.header.get(key, default)


@dataclass
class Image(_Message):
    """A published image.  ``data``: a (height, width) numpy array (float32;
    uint16 for depth maps and uint16 planes, read-only, little-endian);
    ``header``: the image header of PROTOCOL.md 6.1 as a dict, also
    readable as attributes for the common fields (``img.slice``,
    ``img["min"]``).  A slice's values are attenuation per pixel (linear
    attenuation coefficient times the pixel size); ``roi`` is [x, y, w, h]
    in grid pixels; ``axis`` in bins; angles in degrees."""
    topic: str
    header: Dict[str, Any]
    data: np.ndarray
    source: str = ""
    lost: int = 0

    index = property(lambda self: self.header.get("index"))
    count = property(lambda self: self.header.get("count"))
    frame = property(lambda self: self.header.get("frame"))
    slice = property(lambda self: self.header.get("slice"))
    plane = property(lambda self: self.header.get("plane"))
    width = property(lambda self: self.header.get("width"))
    height = property(lambda self: self.header.get("height"))
    roi = property(lambda self: self.header.get("roi"))

    def values(self):
        """The image as float values: uint16 planes scaled back
        (stored / u16_scale + u16_offset); float32 and depth as they are."""
        h = self.header
        if self.topic == "plane" and h.get("dtype") == "uint16":
            return (self.data.astype(np.float32) / np.float32(h["u16_scale"])
                    + np.float32(h["u16_offset"]))
        return self.data


@dataclass
class Event(_Message):
    """An event (PROTOCOL.md 6.3): ``event`` (``scan_started``,
    ``scan_complete``, ``rejected``, ...), ``scan``, ``index`` (−1 if
    none), ``reason`` (a reject name or short code, ``""`` if none),
    ``message`` (a sentence), ``time`` (Unix seconds)."""
    topic: str
    header: Dict[str, Any]
    source: str = ""
    lost: int = 0

    event = property(lambda self: self.header.get("event"))
    index = property(lambda self: self.header.get("index", -1))
    reason = property(lambda self: self.header.get("reason", ""))
    message = property(lambda self: self.header.get("message", ""))
    time = property(lambda self: self.header.get("time"))

    def __str__(self):
        return "%s %s%s: %s" % (self.event, self.scan,
                                " (%s)" % self.reason if self.reason else "",
                                self.message)


@dataclass
class Telemetry(_Message):
    """Telemetry (PROTOCOL.md 6.2): ``state``, ``ingest``
    {frames_per_s, mb_per_s, frames, bytes}, ``reconstruction`` {gu_per_s,
    last_latency_ms, ...}, ``queues``, ``counters``, ``axis``; all in
    ``header``."""
    topic: str
    header: Dict[str, Any]
    source: str = ""
    lost: int = 0

    state = property(lambda self: self.header.get("state"))
    counters = property(lambda self: self.header.get("counters", {}))


class SeqTracker:
    """Per (publisher, topic) ``seq`` bookkeeping (PROTOCOL.md 6.4):
    :meth:`see` returns a :class:`Gap` when messages were lost, else
    None; ``gaps`` counts lost messages per topic, ``lost`` in all."""

    def __init__(self):
        self.last = {}
        self.gaps = collections.Counter()
        self.restarts = 0

    @property
    def lost(self):
        return sum(self.gaps.values())

    def see(self, topic, seq, source=""):
        if not isinstance(seq, int):
            return None
        key = (source, topic)
        prev = self.last.get(key)
        self.last[key] = seq
        if prev is None or seq == prev + 1:
            return None
        if seq <= prev:
            self.restarts += 1
            return Gap(topic, 0, prev, seq, source, restarted=True)
        lost = seq - prev - 1
        self.gaps[topic] += lost
        return Gap(topic, lost, prev, seq, source)


def parse(parts, source=""):
    """One published message (its three frames) as Image, Event or
    Telemetry."""
    topic = parts[0].decode("utf-8", "replace")
    header = json.loads(parts[1])
    payload = parts[2] if len(parts) > 2 else b""
    if topic == "event":
        return Event(topic, header, source)
    if topic == "telemetry":
        return Telemetry(topic, header, source)
    dt = np.dtype("<u2") if header.get("dtype") == "uint16" else np.dtype("<f4")
    data = np.frombuffer(payload, dtype=dt)
    if data.size == header["width"] * header["height"]:
        data = data.reshape(header["height"], header["width"])
    return Image(topic, header, data, source)


class Subscriber:
    """SUB sockets to one or several daemons' publish endpoints (one
    socket per endpoint, so that ``seq`` is tracked per publisher).

    ``topics``: which topics (default all: ``slice``, ``preview``,
    ``plane``, ``composite``, ``depth``, ``telemetry``, ``event``).
    ``rcvhwm``: messages the SUB socket queues before ZeroMQ drops
    (default ZeroMQ's 1000).  ``yield_gaps``: iteration also yields
    :class:`Gap` objects; ``warn_gaps``: issue a :class:`GapWarning`.
    Messages published before the subscription reaches the daemon are not
    delivered: call :meth:`wait_ready` before starting a scan.
    """

    def __init__(self, endpoints=DEFAULT_PUBLISH, topics=TOPICS, curve=None,
                 context=None, rcvhwm=None, yield_gaps=False, warn_gaps=False):
        if isinstance(endpoints, str):
            endpoints = [endpoints]
        self.endpoints = list(endpoints)
        self.topics = set(topics)
        unknown = self.topics - set(TOPICS)
        if unknown:
            warnings.warn("topics %s are not in PROTOCOL.md 6" % sorted(unknown))
        self.yield_gaps = yield_gaps
        self.warn_gaps = warn_gaps
        self.tracker = SeqTracker()
        self._own_context = context is None
        self.context = context or zmq.Context()
        self.sockets = {}
        self.poller = zmq.Poller()
        for ep in self.endpoints:
            s = self.context.socket(zmq.SUB)
            s.setsockopt(zmq.LINGER, 0)
            if rcvhwm is not None:
                s.setsockopt(zmq.RCVHWM, rcvhwm)
            if curve:
                curve.apply(s)
            for t in self.topics:
                s.setsockopt(zmq.SUBSCRIBE, t.encode())
            s.connect(ep)
            self.sockets[s] = ep
            self.poller.register(s, zmq.POLLIN)
        self._pending = collections.deque()
        self._held = None

    @property
    def gaps(self):
        """Messages lost so far, per topic (a Counter)."""
        return self.tracker.gaps

    @property
    def lost(self):
        """Messages lost so far, all topics."""
        return self.tracker.lost

    def wait_ready(self, timeout=5.0):
        """Wait until every publisher delivers to us (the first message of
        any topic, e.g. telemetry, arrived from each), so that nothing
        published from now on is missed.  Telemetry is subscribed for the
        wait when it is not among the topics."""
        extra = "telemetry" not in self.topics
        if extra:
            for s in self.sockets:
                s.setsockopt(zmq.SUBSCRIBE, b"telemetry")
        seen = set()
        deadline = time.monotonic() + timeout
        try:
            while len(seen) < len(self.sockets):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise Timeout("no message from %s within %g s" % (
                        ", ".join(ep for s, ep in self.sockets.items()
                                  if ep not in seen), timeout))
                for s, _ in self.poller.poll(int(left * 1000) + 1):
                    parts = s.recv_multipart()
                    seen.add(self.sockets[s])
                    if parts[0].decode() in self.topics:
                        self._pending.append((parts, self.sockets[s]))
        finally:
            if extra:
                for s in self.sockets:
                    s.setsockopt(zmq.UNSUBSCRIBE, b"telemetry")

    def _read(self, timeout):
        """The next raw (parts, source) in our topics, or None."""
        if self._pending:
            return self._pending.popleft()
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            if deadline is None:
                ready = self.poller.poll()
            else:
                left = deadline - time.monotonic()
                if left < 0:
                    return None
                ready = self.poller.poll(int(left * 1000))
            for s, _ in ready:
                parts = s.recv_multipart()
                if parts[0].decode("utf-8", "replace") in self.topics:
                    self._pending.append((parts, self.sockets[s]))
            if self._pending:
                return self._pending.popleft()

    def recv(self, timeout=None, gaps=None):
        """The next message (Image, Event or Telemetry), or a Gap when
        ``gaps`` (default ``yield_gaps``) and one was found; None when
        ``timeout`` seconds pass first (None: wait for ever)."""
        gaps = self.yield_gaps if gaps is None else gaps
        if self._held is not None:
            msg, self._held = self._held, None
            return msg
        raw = self._read(timeout)
        if raw is None:
            return None
        msg = parse(*raw)
        gap = self.tracker.see(msg.topic, msg.seq, msg.source)
        if gap is not None:
            msg.lost = gap.lost
            if self.warn_gaps:
                warnings.warn("%d %s message(s) lost (seq %d -> %d)%s"
                              % (gap.lost, gap.topic, gap.after, gap.before,
                                 " : publisher restarted" if gap.restarted
                                 else ""), GapWarning, stacklevel=2)
            if gaps:
                self._held = msg
                return gap
        return msg

    def __iter__(self):
        """Messages for ever (and Gaps with ``yield_gaps``)."""
        while True:
            yield self.recv()

    def messages(self, timeout=None, idle=None):
        """Messages until ``timeout`` seconds in all or ``idle`` seconds
        without one have passed."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            wait = idle
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                wait = left if wait is None else min(wait, left)
            msg = self.recv(wait)
            if msg is None:
                return
            yield msg

    def close(self):
        for s in list(self.sockets):
            self.poller.unregister(s)
            s.close(linger=0)
        self.sockets = {}
        if self._own_context:
            self.context.term()
            self._own_context = False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
