"""The control socket (PROTOCOL.md 7): REQ to rtomod's REP.

Every method sends one request and returns the parsed JSON reply (a
``dict``, ``"ok"`` included) or raises :class:`~rtomo.errors.ControlError`
with the daemon's error code in ``.reason``.
"""
import json
import time

import zmq

from .errors import ControlError, ScanFailed, Timeout

DEFAULT_CONTROL = "tcp://127.0.0.1:5557"


def _expand_dotted(config):
    """``{"reconstruction.slices": [5]}`` -> ``{"reconstruction":
    {"slices": [5]}}``; nested dicts pass unchanged (merged)."""
    out = {}
    for key, value in config.items():
        parts = key.split(".")
        node = out
        for p in parts[:-1]:
            node = node.setdefault(p, {})
        if isinstance(value, dict) and isinstance(node.get(parts[-1]), dict):
            node[parts[-1]].update(value)
        else:
            node[parts[-1]] = value
    return out


class Control:
    """A control client.

    ``endpoint``: the daemon's control socket (``tcp://HOST:5557``);
    ``timeout``: seconds to wait for each reply; ``curve``: a
    :class:`~rtomo.security.Curve` when the daemon requires CURVE.
    A request that gets no reply raises :class:`~rtomo.errors.Timeout`
    and the REQ socket is recreated (PROTOCOL.md 5).
    """

    def __init__(self, endpoint=DEFAULT_CONTROL, timeout=10.0, curve=None,
                 context=None):
        self.endpoint = endpoint
        self.timeout = timeout
        self.curve = curve
        self._own_context = context is None
        self.context = context or zmq.Context()
        self._sock = None

    # -- plumbing ----------------------------------------------------------
    def _socket(self):
        if self._sock is None:
            s = self.context.socket(zmq.REQ)
            s.setsockopt(zmq.LINGER, 0)
            if self.curve:
                self.curve.apply(s)
            s.connect(self.endpoint)
            self._sock = s
        return self._sock

    def _drop_socket(self):
        if self._sock is not None:
            self._sock.close(linger=0)
            self._sock = None

    def request(self, request, timeout=None, check=True):
        """Send ``request`` (a dict) and return the reply (a dict).
        With ``check`` an ``"ok": false`` reply raises ControlError."""
        timeout = self.timeout if timeout is None else timeout
        sock = self._socket()
        sock.send(json.dumps(request).encode("utf-8"))
        if not sock.poll(int(timeout * 1000)):
            self._drop_socket()
            raise Timeout("rtomod at %s did not answer %r within %g s"
                          % (self.endpoint, request.get("cmd"), timeout))
        reply = json.loads(sock.recv())
        if check and not reply.get("ok"):
            raise ControlError(reply.get("error", "unknown"),
                               reply.get("message", ""), reply)
        return reply

    def close(self):
        self._drop_socket()
        if self._own_context:
            self.context.term()
            self._own_context = False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- the commands of PROTOCOL.md 7 -------------------------------------
    def ping(self, timeout=None):
        """``{"cmd": "ping"}``: ``{"ok", "pong", "version"}``."""
        return self.request({"cmd": "ping"}, timeout)

    def status(self):
        """``{"cmd": "status"}``: state, version, uptime_s, backend, gpus,
        workers, scan, scans, memory, counters, telemetry."""
        return self.request({"cmd": "status"})

    def get_config(self):
        """The daemon's whole effective configuration, by section
        (``reply["config"]``)."""
        return self.request({"cmd": "get_config"})

    def set_config(self, config=None, **sections):
        """Change run-time settings; returns the reply, whose ``"config"``
        is the new effective configuration.  Keys may be nested or dotted:
        ``set_config({"reconstruction.slices": [512]})``,
        ``set_config(reconstruction={"filter": "hann"})``.  Changeable:
        reconstruction.slices, .roi, .filter, .interpolation, .cutoff,
        telemetry.interval_ms, log.level; others raise ControlError
        ``bad_argument``."""
        merged = dict(config or {})
        merged.update(sections)
        return self.request({"cmd": "set_config",
                             "config": _expand_dotted(merged)})

    def abort(self, scan=None):
        """Abort ``scan`` (default: the oldest acquiring scan, else the
        oldest reconstructing); reply ``{"aborted": id}``."""
        req = {"cmd": "abort"}
        if scan is not None:
            req["scan"] = scan
        return self.request(req)

    def planes(self, planes=None):
        """Ask for planes of any orientation (PROTOCOL.md 7.1): a list of
        ``{"centre": [x, y, z], "u": [...], "v": [...], "width", "height"}``
        in slice-grid pixels (z = detector row); ``[]`` clears them; None
        only reports them.  Reply ``"planes"``: those asked for."""
        req = {"cmd": "planes"}
        if planes is not None:
            req["planes"] = list(planes)
        return self.request(req)

    def scan(self, scan):
        """What became of ``scan`` (PROTOCOL.md 3.9): the reply's ``scan``
        object (id, kind, state, final, frames, rejected, rejects, dropped,
        missing, images, incomplete, reason, code)."""
        return self.request({"cmd": "scan", "scan": scan})["scan"]

    # -- helpers -----------------------------------------------------------
    def wait_for_scan(self, scan, timeout=10.0, interval=0.02):
        """Wait until the daemon has ``scan``'s begin (its state is no
        longer ``unknown``); returns the scan object.  A refused begin
        raises ScanFailed with the reject name."""
        deadline = time.monotonic() + timeout
        while True:
            s = self.scan(scan)
            if s["state"] == "refused":
                raise ScanFailed(s.get("code") or "refused",
                                 s.get("reason") or "", s)
            if s["state"] != "unknown":
                return s
            if time.monotonic() > deadline:
                raise Timeout("scan %s not begun within %g s" % (scan, timeout))
            time.sleep(interval)

    def wait_for_frames(self, scan, count, timeout=30.0, interval=0.02):
        """Wait until the daemon has taken in (accepted or rejected)
        ``count`` frames of ``scan``; returns the scan object."""
        deadline = time.monotonic() + timeout
        while True:
            s = self.scan(scan)
            if s["frames"] + s["rejected"] >= count or s["final"]:
                return s
            if time.monotonic() > deadline:
                raise Timeout("scan %s: %d of %d frames arrived within %g s"
                              % (scan, s["frames"] + s["rejected"], count,
                                 timeout))
            time.sleep(interval)

    def scan_outcome(self, scan, timeout=60.0, interval=0.1):
        """The final ``scan`` object of PROTOCOL.md 3.9: asks until
        ``final`` (an ``unknown`` state is taken as final only once
        rejects are counted or the time is up), then, for a scan that did
        not complete, until its counts hold still for half a second."""
        deadline = time.monotonic() + timeout
        s = self.scan(scan)
        while not (s["final"] and (s["state"] != "unknown"
                                   or s["rejected"] > 0)):
            if time.monotonic() > deadline:
                return s
            time.sleep(interval)
            s = self.scan(scan)
        while s["state"] != "complete" and time.monotonic() < deadline:
            time.sleep(0.5)
            again = self.scan(scan)
            if (again["frames"], again["rejected"]) == (s["frames"],
                                                        s["rejected"]):
                break
            s = again
        return s

    def wait_scan(self, scan, timeout=60.0):
        """:meth:`scan_outcome`, judged: returns the outcome when the scan
        succeeded (complete; nothing rejected, dropped or missing; not
        incomplete), else raises ScanFailed with the daemon's code and
        sentence (see :func:`judge`)."""
        s = self.scan_outcome(scan, timeout)
        ok, line = judge(s)
        if not ok:
            raise ScanFailed(s.get("code") or _failure_code(s), line, s)
        return s


def _failure_code(s):
    if s["state"] != "complete":
        return s["state"] if s["final"] else "timeout"
    if s["rejected"]:
        return "rejected"
    if s["dropped"]:
        return "dropped"
    if s["missing"]:
        return "missing_projections"
    return "incomplete"


def judge(s):
    """(succeeded, a line for people) for a ``scan`` object, by
    PROTOCOL.md 3.9: complete, and nothing rejected, dropped, missing or
    incomplete."""
    ok = (s["state"] == "complete" and s["rejected"] == 0
          and s["dropped"] == 0 and s["missing"] == 0
          and not s["incomplete"])
    line = "scan %s %s" % (s["id"], s["state"])
    for why in (s.get("code"), s.get("reason")):
        if why:
            line += ": " + why
    line += "%s%d frames accepted" % ("; " if s.get("code") or s.get("reason")
                                      else ": ", s["frames"])
    if s["rejected"]:
        line += ", %d rejected (%s)" % (s["rejected"], ", ".join(
            "%s: %d" % item for item in (s.get("rejects") or {}).items()))
    for count in ("dropped", "missing"):
        if s[count]:
            line += ", %d %s" % (s[count], count)
    return ok, line + ", %d images published" % s["images"]
