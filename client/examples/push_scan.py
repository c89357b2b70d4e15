#!/usr/bin/env python3
"""push_scan.py -- a complete rtomo client in Python, written from
protocol/PROTOCOL.md alone.

It simulates a small parallel-beam scan of an analytic phantom (discs, whose
projections are known exactly), pushes it to rtomod with darks and flats,
asks the daemon what became of the scan (PROTOCOL.md 3.9) and exits 1 with
the daemon's reason unless it was reconstructed whole, then shows one of the
slices it subscribed to: an ASCII preview, its statistics against the
phantom's true attenuation, a .npy file, and a PNG when matplotlib is
installed.

Needs pyzmq and numpy (Debian: python3-zmq python3-numpy).

    python3 push_scan.py                          # daemon on localhost
    python3 push_scan.py --daemon otherhost --size 256 --angles 360
    python3 push_scan.py --daemon otherhost \\
        --server-key rtomod.key --client-key camera1.key_secret   # CURVE
"""
import argparse
import json
import sys
import time

import numpy as np
import zmq

PROTOCOL = 1

# CURVE keys (PROTOCOL.md 1, "Authentication"): (server public, client
# public, client secret), or None for plain ZeroMQ.
CURVE = None


def secure(sock):
    """Make sock a CURVE client of the daemon when keys were given; call
    before connecting.  A refused key is never reported on the socket: the
    handshake just does not complete."""
    if CURVE:
        sock.curve_serverkey, sock.curve_publickey, sock.curve_secretkey = CURVE
    return sock


def load_curve(server_key, client_key):
    """The keys of rtomo-keygen's files (CZMQ/pyzmq certificates)."""
    import zmq.auth
    if not (server_key and client_key):
        sys.exit("push_scan.py: CURVE needs both --server-key and --client-key")
    server_public, _ = zmq.auth.load_certificate(server_key)
    public, secret = zmq.auth.load_certificate(client_key)
    if not secret:
        sys.exit("push_scan.py: %s holds no secret key" % client_key)
    return server_public, public, secret

# Discs of the phantom: centre (x, y) and radius as fractions of the detector
# width, attenuation per pixel (PROTOCOL.md 3.3: slices are in attenuation
# per pixel).  Overlapping discs add up.
DISCS = [
    (0.00, 0.00, 0.40, 0.010),
    (-0.15, 0.10, 0.12, 0.010),
    (0.18, -0.05, 0.08, 0.020),
    (0.05, 0.22, 0.05, -0.005),
]


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--daemon", default="localhost", help="rtomod host")
    p.add_argument("--ingest", help="ingest endpoint (tcp://HOST:5555)")
    p.add_argument("--publish", help="publish endpoint (tcp://HOST:5556)")
    p.add_argument("--control", help="control endpoint (tcp://HOST:5557)")
    p.add_argument("--size", type=int, default=128, help="detector width")
    p.add_argument("--rows", type=int, default=4, help="detector rows")
    p.add_argument("--angles", type=int, default=180,
                   help="projections over 180 degrees")
    p.add_argument("--scan", default="pyscan-%d" % int(time.time()),
                   help="scan id")
    p.add_argument("--timeout", type=float, default=60.0,
                   help="seconds to wait for the scan's outcome and slices")
    p.add_argument("--output", default="slice.npy",
                   help="where to save the shown slice (.npy)")
    p.add_argument("--server-key",
                   help="CURVE: the daemon's public key file (NAME.key)")
    p.add_argument("--client-key",
                   help="CURVE: this client's key pair (NAME.key_secret)")
    args = p.parse_args()
    args.ingest = args.ingest or "tcp://%s:5555" % args.daemon
    args.publish = args.publish or "tcp://%s:5556" % args.daemon
    args.control = args.control or "tcp://%s:5557" % args.daemon
    return args


def projection(width, rows, angle_deg):
    """Line integrals of the phantom at one angle: rows x width float64.

    PROTOCOL.md 3.3: pixel (x, y) of the grid, centred on the axis, projects
    to bin axis + (x - c) cos(a) - (y - c) sin(a).  A disc of radius r at
    (x0, y0) therefore projects to a chord 2 mu sqrt(r^2 - (s - s0)^2) around
    s0 = x0 cos(a) - y0 sin(a).  Every row sees the same slice.
    """
    a = np.deg2rad(angle_deg)
    axis = (width - 1) / 2.0
    s = np.arange(width) - axis
    p = np.zeros(width)
    for fx, fy, fr, mu in DISCS:
        x0, y0, r = fx * width, fy * width, fr * width
        s0 = x0 * np.cos(a) - y0 * np.sin(a)
        p += 2.0 * mu * np.sqrt(np.clip(r * r - (s - s0) ** 2, 0.0, None))
    return np.tile(p, (rows, 1))


def true_slice(size):
    """The phantom's attenuation per pixel on a size x size grid."""
    c = (size - 1) / 2.0
    y, x = np.mgrid[0:size, 0:size] - c
    img = np.zeros((size, size))
    for fx, fy, fr, mu in DISCS:
        inside = (x - fx * size) ** 2 + (y - fy * size) ** 2 < (fr * size) ** 2
        img[inside] += mu
    return img


def send(sock, header, payload=None):
    """One ingest message: the JSON header, then the payload if any."""
    text = json.dumps(header).encode("utf-8")
    if payload is None:
        sock.send(text)
    else:
        sock.send_multipart([text, payload])


def push_scan(args, sock):
    dark_level, flat_level = 100.0, 20000.0
    shape = [args.rows, args.size]
    send(sock, {"protocol": PROTOCOL, "type": "scan_begin", "scan": args.scan,
                "detector": {"width": args.size, "height": args.rows},
                "projections": args.angles, "angle_start": 0.0,
                "angle_step": 180.0 / args.angles, "dtype": "uint16",
                "darks": 2, "flats": 2,
                "reconstruction": {"filter": "shepp-logan", "slices": "all"}})
    frame = {"protocol": PROTOCOL, "scan": args.scan, "dtype": "uint16",
             "shape": shape}
    # uint16, little-endian, row-major (PROTOCOL.md 2)
    counts = lambda v: np.asarray(np.round(v), dtype="<u2").tobytes()
    for i in range(2):
        send(sock, dict(frame, type="dark", index=i),
             counts(np.full(shape, dark_level)))
    for i in range(2):
        send(sock, dict(frame, type="flat", index=i),
             counts(np.full(shape, flat_level)))
    for i in range(args.angles):
        angle = i * 180.0 / args.angles
        raw = dark_level + (flat_level - dark_level) * np.exp(
            -projection(args.size, args.rows, angle))
        send(sock, dict(frame, type="projection", index=i, angle=angle),
             counts(raw))
    send(sock, {"protocol": PROTOCOL, "type": "scan_end", "scan": args.scan})


def control_request(ctx, endpoint, request, timeout_s=3.0):
    """One control request and its reply (PROTOCOL.md 7).  A fresh REQ
    socket each time: one that missed its reply could not send again."""
    req = ctx.socket(zmq.REQ)
    req.setsockopt(zmq.LINGER, 0)
    secure(req).connect(endpoint)
    try:
        req.send(json.dumps(request).encode("utf-8"))
        if not req.poll(int(timeout_s * 1000)):
            raise RuntimeError("rtomod at %s did not answer within %g s"
                               % (endpoint, timeout_s))
        return json.loads(req.recv())
    finally:
        req.close()


def ask_scan(args, ctx):
    """The daemon's answer about our scan (PROTOCOL.md 7): its "scan"."""
    reply = control_request(ctx, args.control,
                            {"cmd": "scan", "scan": args.scan})
    if not reply["ok"]:
        raise RuntimeError("rtomod refused the request: %s: %s"
                           % (reply["error"], reply["message"]))
    return reply["scan"]


def wait_for_outcome(args, ctx):
    """What became of our scan (PROTOCOL.md 3.9): ask "scan" until the
    answer is final.  The ingest socket never answers, so this is the only
    reliable way to know."""
    deadline = time.time() + args.timeout
    scan = ask_scan(args, ctx)
    # "unknown" right after the end may mean that our messages are still on
    # their way; with rejects counted, the daemon did see them.
    while not (scan["final"] and (scan["state"] != "unknown"
                                  or scan["rejected"] > 0)):
        if time.time() > deadline:
            return scan
        time.sleep(0.1)
        scan = ask_scan(args, ctx)
    # A failed scan's later messages are still rejected as they arrive:
    # report its counts once they hold still.
    while scan["state"] != "complete" and time.time() < deadline:
        time.sleep(0.5)
        again = ask_scan(args, ctx)
        if (again["frames"], again["rejected"]) == (scan["frames"],
                                                    scan["rejected"]):
            break
        scan = again
    return scan


def judge(scan):
    """(succeeded, one line for people), by PROTOCOL.md 3.9's rule: complete,
    and nothing rejected, dropped, missing or incomplete."""
    ok = (scan["state"] == "complete" and scan["rejected"] == 0
          and scan["dropped"] == 0 and scan["missing"] == 0
          and not scan["incomplete"])
    line = "scan %s %s" % (scan["id"], scan["state"])
    for why in (scan["code"], scan["reason"]):
        if why:
            line += ": " + why
    line += "%s%d frames accepted" % ("; " if scan["code"] or scan["reason"]
                                      else ": ", scan["frames"])
    if scan["rejected"]:
        line += ", %d rejected (%s)" % (scan["rejected"], ", ".join(
            "%s: %d" % item for item in scan["rejects"].items()))
    for count in ("dropped", "missing"):
        if scan[count]:
            line += ", %d %s" % (scan[count], count)
    return ok, line + ", %d images published" % scan["images"]


def receive_slices(args, sub):
    """Slices of our scan by detector row, until the set is complete, a
    scan_complete event, or the timeout."""
    slices, expected = {}, None
    deadline = time.time() + args.timeout
    while time.time() < deadline:
        if not sub.poll(200):
            continue
        topic, header, payload = sub.recv_multipart()
        h = json.loads(header)
        if h.get("scan") != args.scan:
            continue
        if topic == b"event":
            print("event: %s %s %s" % (h["event"], h.get("reason", ""),
                                       h.get("message", "")))
            if h["event"] in ("scan_complete", "scan_aborted"):
                break
            continue
        img = np.frombuffer(payload, dtype=h["dtype"]).reshape(
            h["height"], h["width"])
        slices[h["slice"]] = (h, img)
        expected = h["count"]
        print("slice %d (%d of %d): %dx%d, min %.4g max %.4g, latency %s ms"
              % (h["slice"], h["index"] + 1, h["count"], h["width"],
                 h["height"], h["min"], h["max"], h["latency_ms"]))
        if len(slices) == expected:
            break
    return slices


def ascii_preview(img, columns=64):
    """The image as text, darkest to brightest."""
    ramp = " .:-=+*#%@"
    step = max(1, img.shape[1] // columns)
    small = img[::2 * step, ::step]
    lo, hi = np.percentile(small, [1, 99])
    scaled = np.clip((small - lo) / (hi - lo + 1e-30), 0, 1)
    return "\n".join("".join(ramp[int(v * (len(ramp) - 1))] for v in row)
                     for row in scaled)


def show(args, header, img):
    print(ascii_preview(img))
    if list(header["roi"]) == [0, 0, args.size, args.size]:
        # the whole grid (slice_size = detector width): compare with truth
        truth = true_slice(args.size)
        plain = truth == DISCS[0][3]        # the big disc, nothing on top
        print("big disc: reconstructed %.5f, true %.5f per pixel; "
              "RMS error %.5f" % (img[plain].mean(), DISCS[0][3],
                                  np.sqrt(np.mean((img - truth) ** 2))))
    np.save(args.output, img)
    print("saved %s (%s, %dx%d)" % (args.output, img.dtype, img.shape[1],
                                    img.shape[0]))
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    png = args.output.rsplit(".", 1)[0] + ".png"
    plt.imsave(png, img, cmap="gray")
    print("saved %s" % png)


def main():
    args = parse_args()
    global CURVE
    if args.server_key or args.client_key:
        CURVE = load_curve(args.server_key, args.client_key)
    ctx = zmq.Context()
    sub = ctx.socket(zmq.SUB)
    secure(sub).connect(args.publish)
    for topic in (b"slice", b"event"):
        sub.setsockopt(zmq.SUBSCRIBE, topic)
    # PUB drops what it sends before our subscription arrives
    # (PROTOCOL.md 5): give it a moment before the scan starts.
    time.sleep(0.5)
    push = ctx.socket(zmq.PUSH)
    push.setsockopt(zmq.LINGER, 10000)
    secure(push).connect(args.ingest)
    t0 = time.time()
    push_scan(args, push)
    print("pushed %d projections of %dx%d in %.2f s"
          % (args.angles, args.size, args.rows, time.time() - t0))
    # While we ask, the slices wait in the SUB socket's queue (a few here;
    # a client of large scans would read them meanwhile).
    try:
        ok, line = judge(wait_for_outcome(args, ctx))
    except RuntimeError as e:
        ok, line = False, "cannot learn what became of scan %s: %s" % (
            args.scan, e)
    print(line, file=sys.stdout if ok else sys.stderr)
    slices = receive_slices(args, sub) if ok else {}
    push.close()
    sub.close(linger=0)
    ctx.term()
    if not ok:
        return 1
    if not slices:
        print("no slice of scan %s arrived within %g s" % (args.scan,
                                                           args.timeout))
        return 1
    row = sorted(slices)[len(slices) // 2]
    print("showing slice %d" % row)
    show(args, *slices[row])
    return 0


if __name__ == "__main__":
    sys.exit(main())
