"""rtomo-view's server: the subscriber and status threads, the latest-only
image buffer (:class:`Hub`) and the HTTP server (:class:`ViewServer`).
See the package docstring for why it is built this way.

HTTP interface (all GET, JSON unless said):

- ``/``: the page; ``/static/NAME``: its script and style sheet.
- ``/api/state?tele=N&ev=M``: the view's counters, the last ``status``
  reply, the images held (key, id, header), the telemetry points after
  number N and the events after number M (−1: all kept).
- ``/api/image?key=K``: the image K (``slice``, ``preview``,
  ``composite``, ``depth``, ``plane/N``) as an 8-bit grey PNG after the
  contrast mapping; ``mode=auto`` with ``plo``, ``phi`` (percentiles,
  default 1 and 99), ``mode=minmax`` or ``mode=manual`` with ``lo``,
  ``hi``.  Response headers ``X-Rtomo-Id``, ``X-Rtomo-Lo``,
  ``X-Rtomo-Hi`` say which image and which limits it is.
  ``&bits=16``: a 16-bit PNG of the same mapping scaled to 0..65535.
- ``/api/raw?key=K``: the image's samples as sent by rtomod
  (little-endian float32 or uint16), headers ``X-Rtomo-Width``,
  ``X-Rtomo-Height``, ``X-Rtomo-Dtype``, ``X-Rtomo-Id``.
- ``/api/plane?choose=N``: which plane of an SBDX frame (more than 4
  planes) to keep (default: the middle one).
"""
import argparse
import collections
import json
import mimetypes
import os
import signal
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import zmq

from ..control import Control
from ..errors import RtomoError, Timeout
from ..subscriber import IMAGE_TOPICS, Image, Subscriber
from .png import encode_grey

STATIC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "static")
DEPTH_NONE = 65535      # a depth map's "no plane" (PROTOCOL.md 3.7)
TOMO_PLANES = 4         # planes of any orientation asked for, at most
STAT_SAMPLES = 1 << 20  # percentiles from at most this many pixels


# -- contrast ----------------------------------------------------------------
def _valid(topic, data):
    """The pixels that count for the contrast limits: finite, and for a
    depth map those some plane measured."""
    if topic == "depth":
        return data[data != DEPTH_NONE]
    flat = data.reshape(-1)
    if flat.dtype.kind == "f" and not np.isfinite(flat).all():
        flat = flat[np.isfinite(flat)]
    return flat


def contrast_limits(topic, values, mode="auto", plo=1.0, phi=99.0, lo=None,
                    hi=None):
    """(lo, hi) for an image: ``auto``: the ``plo`` and ``phi``
    percentiles (numpy's linear method; from an even subsample of at most
    2^20 pixels for larger images); ``minmax``: its minimum and maximum;
    ``manual``: ``lo``, ``hi`` as given."""
    if mode == "manual":
        return float(lo), float(hi)
    data = values
    if mode == "auto" and data.size > STAT_SAMPLES:
        step = int(np.ceil(np.sqrt(data.size / STAT_SAMPLES)))
        data = data[::step, ::step]
    v = _valid(topic, data)
    if v.size == 0:
        return 0.0, 1.0
    if mode == "minmax":
        return float(v.min()), float(v.max())
    p = np.percentile(v.astype(np.float64), [plo, phi])
    return float(p[0]), float(p[1])


def to_grey(values, lo, hi, levels=255, topic=None):
    """The contrast mapping: round((v - lo) * levels / (hi - lo)) clipped to
    0..levels, in double precision (uint8 for 255 levels, uint16 for
    65535); hi <= lo maps everything to 0, and so do NaN and a depth map's
    65535."""
    v = values.astype(np.float64)
    span = hi - lo
    if not span > 0:
        g = np.zeros(v.shape)
    else:
        g = np.rint((v - lo) * (levels / span))
    g = np.nan_to_num(g, nan=0.0, posinf=levels, neginf=0.0)
    np.clip(g, 0, levels, out=g)
    if topic == "depth":
        g[values == DEPTH_NONE] = 0
    return g.astype(np.uint8 if levels <= 255 else np.uint16)


# -- the latest-only buffer --------------------------------------------------
class Slot:
    __slots__ = ("image", "id", "fetched", "arrived", "png")

    def __init__(self, image, ident):
        self.image = image
        self.id = ident
        self.fetched = False
        self.arrived = time.time()
        self.png = None         # (contrast key, bytes, lo, hi)


def image_key(image):
    if image.topic == "plane":
        return "plane/%d" % (image.plane if image.plane is not None else 0)
    return image.topic


class Hub:
    """Everything the page shows, behind one lock: the newest image per
    key (``slice``, ``preview``, ``composite``, ``depth``, ``plane/N``),
    the telemetry history, the event log, the last ``status`` and the
    counters of what was received, shown and skipped."""

    def __init__(self, history=600, events=300):
        self.lock = threading.Lock()
        self.slots = {}
        self.next_id = 1
        self.received = collections.Counter()   # images per topic
        self.skipped = collections.Counter()    # replaced before shown
        self.shown = collections.Counter()      # fetched by a browser
        self.tele = collections.deque(maxlen=history)
        self.tele_n = 0
        self.events = collections.deque(maxlen=events)
        self.event_n = 0
        self.status = None
        self.status_error = "no reply yet"
        self.status_time = None
        self.gaps = {}
        self._gaps_by = {}
        self.lost = 0
        self.restarts = 0
        self.plane_choice = None                # SBDX plane kept
        self.started = time.time()

    # called by the subscriber threads: nothing but bookkeeping
    def put_image(self, image):
        with self.lock:
            self.received[image.topic] += 1
            key = image_key(image)
            if image.topic == "plane":
                count = image.count or 1
                if count > TOMO_PLANES:          # an SBDX frame's planes
                    choice = self.plane_choice
                    if choice is None or choice >= count:
                        choice = count // 2
                    if image.plane != choice:
                        self.skipped["plane"] += 1
                        return
                    keep = {key}
                else:
                    keep = {"plane/%d" % i for i in range(count)}
                for k in [k for k in self.slots
                          if k.startswith("plane/") and k not in keep]:
                    del self.slots[k]
            old = self.slots.get(key)
            if old is not None and not old.fetched:
                self.skipped[image.topic] += 1
            self.slots[key] = Slot(image, self.next_id)
            self.next_id += 1

    def put_telemetry(self, tel):
        h = tel.header
        ing = h.get("ingest") or {}
        rec = h.get("reconstruction") or {}
        q = h.get("queues") or {}
        c = h.get("counters") or {}
        prev = c.get("previews") or {}
        point = {
            "time": h.get("time"), "state": h.get("state"),
            "scan": h.get("scan"),
            "frames_per_s": ing.get("frames_per_s"),
            "mb_per_s": ing.get("mb_per_s"), "frames": ing.get("frames"),
            "gu_per_s": rec.get("gu_per_s"),
            "latency_ms": rec.get("last_latency_ms"),
            "ready_ms": rec.get("last_ready_ms"),
            "slices": rec.get("slices"),
            "q_work": q.get("work"), "q_frames": q.get("frames"),
            "q_windows": q.get("windows"), "q_publish": q.get("publish"),
            "accepted": c.get("accepted"), "rejected": c.get("rejected"),
            "dropped": c.get("dropped"), "published": c.get("published"),
            "pub_dropped": c.get("pub_dropped"),
            "previews_dropped": (c.get("previews_dropped")
                                 if "previews_dropped" in c
                                 else prev.get("dropped")
                                 if isinstance(prev, dict) else None),
        }
        with self.lock:
            point["n"] = self.tele_n
            self.tele_n += 1
            self.tele.append(point)

    def put_event(self, ev):
        h = ev.header
        with self.lock:
            self.events.append({
                "n": self.event_n, "time": h.get("time"),
                "event": h.get("event"), "scan": h.get("scan"),
                "index": h.get("index", -1), "reason": h.get("reason", ""),
                "message": h.get("message", "")})
            self.event_n += 1

    def note_gaps(self, name, subscriber):
        """Subscriber ``name``'s seq gaps so far (PROTOCOL.md 6.4), summed
        with the other subscriber's per topic."""
        with self.lock:
            self._gaps_by[name] = (dict(subscriber.gaps),
                                   subscriber.tracker.restarts)
            total = collections.Counter()
            for gaps, _ in self._gaps_by.values():
                total.update(gaps)
            self.gaps = dict(total)
            self.lost = sum(total.values())
            self.restarts = sum(r for _, r in self._gaps_by.values())

    def put_status(self, reply, error=None):
        with self.lock:
            if reply is not None:
                self.status = reply
                self.status_time = time.time()
            self.status_error = error

    # called by the HTTP threads
    def state(self, tele_after=-1, ev_after=-1):
        with self.lock:
            images = {}
            for key, s in self.slots.items():
                images[key] = {"id": s.id, "topic": s.image.topic,
                               "arrived": s.arrived,
                               "header": s.image.header}
            return {
                "time": time.time(),
                "view": {"uptime_s": time.time() - self.started,
                         "received": dict(self.received),
                         "received_total": sum(self.received.values()),
                         "shown": dict(self.shown),
                         "shown_total": sum(self.shown.values()),
                         "skipped": dict(self.skipped),
                         "skipped_total": sum(self.skipped.values()),
                         "gaps": dict(self.gaps), "lost": self.lost,
                         "restarts": self.restarts,
                         "plane_choice": self.plane_choice},
                "status": self.status, "status_error": self.status_error,
                "status_time": self.status_time,
                "images": images,
                "tele": [p for p in self.tele if p["n"] > tele_after],
                "tele_n": self.tele_n,
                "events": [e for e in self.events if e["n"] > ev_after],
                "event_n": self.event_n,
            }

    def slot(self, key):
        with self.lock:
            return self.slots.get(key)

    def mark_shown(self, slot):
        with self.lock:
            if not slot.fetched:
                slot.fetched = True
                self.shown[slot.image.topic] += 1

    def render(self, key, mode="auto", plo=1.0, phi=99.0, lo=None, hi=None,
               bits=8):
        """(slot, png bytes, lo, hi) of image ``key``, or None."""
        slot = self.slot(key)
        if slot is None:
            return None
        image = slot.image
        ckey = (mode, plo, phi, lo, hi, bits)
        cached = slot.png
        if cached is not None and cached[0] == ckey:
            png, clo, chi = cached[1:]
        else:
            values = image.values()
            if mode != "manual" and image.topic != "depth":
                h = image.header
                if (mode == "minmax" and h.get("min") is not None
                        and h.get("max") is not None
                        and not (image.topic == "plane"
                                 and h.get("dtype") == "uint16")):
                    # the header's statistics are the image's (6.1)
                    clo, chi = float(h["min"]), float(h["max"])
                else:
                    clo, chi = contrast_limits(image.topic, values, mode,
                                               plo, phi, lo, hi)
            else:
                clo, chi = contrast_limits(image.topic, values, mode, plo,
                                           phi, lo, hi)
            grey = to_grey(values, clo, chi, 255 if bits == 8 else 65535,
                           image.topic)
            png = encode_grey(grey, level=1)
            slot.png = (ckey, png, clo, chi)
        self.mark_shown(slot)
        return slot, png, clo, chi


# -- the threads that feed the hub ---------------------------------------------
def _subscribe_loop(hub, sub, stop, images):
    try:
        while not stop.is_set():
            msg = sub.recv(timeout=0.25, gaps=False)
            if msg is None:
                continue
            if images:
                if isinstance(msg, Image):
                    hub.put_image(msg)
            elif msg.topic == "telemetry":
                hub.put_telemetry(msg)
            elif msg.topic == "event":
                hub.put_event(msg)
            if msg.lost or sub.tracker.restarts:
                hub.note_gaps("images" if images else "meta", sub)
    finally:
        sub.close()


def _status_loop(hub, control, interval, stop):
    try:
        while not stop.is_set():
            try:
                hub.put_status(control.status())
            except Timeout:
                hub.put_status(None, "no reply from %s" % control.endpoint)
            except RtomoError as e:
                hub.put_status(None, "%s: %s" % (e.reason, e.message))
            except zmq.ZMQError as e:
                hub.put_status(None, str(e))
            stop.wait(interval)
    finally:
        control.close()


# -- HTTP ----------------------------------------------------------------------
class Handler(BaseHTTPRequestHandler):
    server_version = "rtomo-view"
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        if self.server.verbose:
            sys.stderr.write("rtomo-view: %s %s\n" % (self.address_string(),
                                                      fmt % args))

    def _send(self, code, body, ctype, extra=None):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, obj, code=200):
        body = json.dumps(obj, allow_nan=False,
                          default=_json_default).encode("utf-8")
        self._send(code, body, "application/json")

    def _error(self, code, message):
        self._json({"error": message}, code)

    def do_HEAD(self):
        self.do_GET()

    def do_GET(self):
        url = urllib.parse.urlsplit(self.path)
        q = dict(urllib.parse.parse_qsl(url.query))
        hub = self.server.hub
        try:
            if url.path in ("/", "/index.html"):
                return self._static("index.html")
            if url.path.startswith("/static/"):
                return self._static(url.path[len("/static/"):])
            if url.path == "/api/state":
                st = hub.state(int(q.get("tele", -1)), int(q.get("ev", -1)))
                st["endpoints"] = self.server.endpoints
                return self._json(st)
            if url.path == "/api/image":
                return self._image(q)
            if url.path == "/api/raw":
                return self._raw(q)
            if url.path == "/api/plane":
                with hub.lock:
                    hub.plane_choice = int(q["choose"]) if q.get(
                        "choose", "") != "" else None
                return self._json({"plane_choice": hub.plane_choice})
        except (ValueError, KeyError) as e:
            return self._error(400, "bad request: %s" % e)
        return self._error(404, "no such page: %s" % url.path)

    def _static(self, name):
        if name not in os.listdir(STATIC):
            return self._error(404, "no such file: %s" % name)
        with open(os.path.join(STATIC, name), "rb") as f:
            body = f.read()
        ctype = mimetypes.guess_type(name)[0] or "application/octet-stream"
        if ctype.startswith("text/") or ctype.endswith("javascript"):
            ctype += "; charset=utf-8"
        self._send(200, body, ctype)

    def _image(self, q):
        mode = q.get("mode", "auto")
        if mode not in ("auto", "minmax", "manual"):
            raise ValueError("mode must be auto, minmax or manual")
        lo = hi = None
        if mode == "manual":
            lo, hi = float(q["lo"]), float(q["hi"])
        bits = int(q.get("bits", 8))
        if bits not in (8, 16):
            raise ValueError("bits must be 8 or 16")
        got = self.server.hub.render(q.get("key", "slice"), mode,
                                     float(q.get("plo", 1.0)),
                                     float(q.get("phi", 99.0)), lo, hi, bits)
        if got is None:
            return self._error(404, "no image %s yet" % q.get("key"))
        slot, png, lo, hi = got
        self._send(200, png, "image/png", {
            "X-Rtomo-Id": str(slot.id), "X-Rtomo-Lo": repr(lo),
            "X-Rtomo-Hi": repr(hi),
            "X-Rtomo-Seq": str(slot.image.header.get("seq"))})

    def _raw(self, q):
        slot = self.server.hub.slot(q.get("key", "slice"))
        if slot is None:
            return self._error(404, "no image %s yet" % q.get("key"))
        img = slot.image
        self._send(200, np.ascontiguousarray(img.data).tobytes(),
                   "application/octet-stream", {
                       "X-Rtomo-Id": str(slot.id),
                       "X-Rtomo-Width": str(img.data.shape[-1]),
                       "X-Rtomo-Height": str(img.data.shape[0]),
                       "X-Rtomo-Dtype": str(img.header.get("dtype"))})


def _json_default(o):
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return float(o)
    return str(o)


class ViewServer:
    """The whole view: ``start()`` starts the subscriber, status and HTTP
    threads; ``url`` is the page; ``stop()`` ends them."""

    def __init__(self, publish=("tcp://127.0.0.1:5556",),
                 control="tcp://127.0.0.1:5557", bind="127.0.0.1", port=8765,
                 hwm=4, status_interval=0.5, history=600, curve=None,
                 verbose=False):
        if isinstance(publish, str):
            publish = [publish]
        self.publish = list(publish)
        self.control_endpoint = control
        self.hub = Hub(history=history)
        self.hwm = hwm
        self.status_interval = status_interval
        self.curve = curve
        self.stop_event = threading.Event()
        self.context = zmq.Context()
        self.httpd = ThreadingHTTPServer((bind, port), Handler)
        self.httpd.daemon_threads = True
        self.httpd.hub = self.hub
        self.httpd.verbose = verbose
        self.httpd.endpoints = {"publish": self.publish, "control": control,
                                "hwm": hwm}
        self.threads = []

    @property
    def url(self):
        host, port = self.httpd.server_address[:2]
        if host in ("0.0.0.0", "::", ""):
            host = "127.0.0.1"
        return "http://%s:%d/" % (host, port)

    def start(self):
        # images: a small high-water mark, so that a view that cannot keep
        # up loses images at its own door (seq gaps) and never holds
        # rtomod's queue; telemetry and events: ZeroMQ's default
        self.image_sub = Subscriber(self.publish, IMAGE_TOPICS, self.curve,
                                    self.context, rcvhwm=self.hwm)
        self.meta_sub = Subscriber(self.publish, ("telemetry", "event"),
                                   self.curve, self.context)
        ctl = Control(self.control_endpoint, timeout=2.0, curve=self.curve,
                      context=self.context)
        self.threads = [
            threading.Thread(target=_subscribe_loop, name="images",
                             args=(self.hub, self.image_sub, self.stop_event,
                                   True), daemon=True),
            threading.Thread(target=_subscribe_loop, name="telemetry",
                             args=(self.hub, self.meta_sub, self.stop_event,
                                   False), daemon=True),
            threading.Thread(target=_status_loop, name="status",
                             args=(self.hub, ctl, self.status_interval,
                                   self.stop_event), daemon=True),
            threading.Thread(target=self.httpd.serve_forever, name="http",
                             kwargs={"poll_interval": 0.2}, daemon=True),
        ]
        for t in self.threads:
            t.start()
        return self

    def stop(self):
        self.stop_event.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        for t in self.threads:
            t.join(5)
        self.context.term()


def _default_control(publish):
    """The control endpoint beside a publish endpoint: same host, port + 1
    (5557 beside 5556)."""
    try:
        head, port = publish.rsplit(":", 1)
        return "%s:%d" % (head, int(port) + 1)
    except ValueError:
        return "tcp://127.0.0.1:5557"


def main(argv=None):
    ap = argparse.ArgumentParser(
        prog="rtomo-view",
        description="Serve a live view of rtomod (latest images, scan "
        "progress, telemetry plots, events) to a browser.")
    ap.add_argument("-p", "--publish", action="append", metavar="EP",
                    help="rtomod's publish endpoint (default "
                    "tcp://127.0.0.1:5556); repeat for several daemons")
    ap.add_argument("-c", "--control", metavar="EP",
                    help="rtomod's control endpoint (default: the first "
                    "publish endpoint's host, port + 1)")
    ap.add_argument("--bind", default="127.0.0.1",
                    help="address the web server listens on (default "
                    "127.0.0.1; 0.0.0.0 for every interface: the page has "
                    "no authentication)")
    ap.add_argument("--port", type=int, default=8765,
                    help="web server port (default 8765; 0: any free one)")
    ap.add_argument("--hwm", type=int, default=4,
                    help="receive high-water mark of the image socket, "
                    "messages (default 4)")
    ap.add_argument("--status-interval", type=float, default=0.5,
                    help="seconds between status requests (default 0.5)")
    ap.add_argument("--history", type=int, default=600,
                    help="telemetry points kept for the plots (default 600)")
    ap.add_argument("--server-key", help="the daemon's public key file "
                    "(NAME.key), for a daemon with CURVE")
    ap.add_argument("--client-key", help="this client's secret key file "
                    "(NAME.key_secret), with --server-key")
    ap.add_argument("-v", "--verbose", action="store_true",
                    help="log every HTTP request on stderr")
    args = ap.parse_args(argv)
    publish = args.publish or ["tcp://127.0.0.1:5556"]
    control = args.control or _default_control(publish[0])
    curve = None
    if args.server_key or args.client_key:
        if not (args.server_key and args.client_key):
            ap.error("--server-key and --client-key go together")
        from ..security import Curve
        curve = Curve.from_files(args.server_key, args.client_key)
    try:
        view = ViewServer(publish, control, args.bind, args.port, args.hwm,
                          args.status_interval, args.history, curve,
                          args.verbose)
    except OSError as e:
        print("rtomo-view: cannot listen on %s:%d: %s"
              % (args.bind, args.port, e), file=sys.stderr)
        return 1
    view.start()
    print("rtomo-view: serving %s (publish %s, control %s)"
          % (view.url, ", ".join(publish), control), flush=True)
    done = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: done.set())
    while not done.wait(0.5):
        pass
    view.stop()
    return 0
