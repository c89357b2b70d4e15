#!/usr/bin/env python3
"""push_scan.py -- push a scan to rtomod with the rtomo Python package
(client/python) and look at what comes back.

It simulates a small parallel-beam scan of an analytic phantom (discs, whose
projections are known exactly), pushes it to rtomod with darks and flats,
asks the daemon what became of the scan (PROTOCOL.md 3.9) and exits 1 with
the daemon's reason unless it was reconstructed whole, then shows one of the
slices it subscribed to: an ASCII preview, its statistics against the
phantom's true attenuation, a .npy file, and a PNG when matplotlib is
installed.

Needs the rtomo package (pip install client/python), or runs from the
source tree as it is; pyzmq and numpy (Debian: python3-zmq python3-numpy).

    python3 push_scan.py                          # daemon on localhost
    python3 push_scan.py --daemon otherhost --size 256 --angles 360
    python3 push_scan.py --daemon otherhost \\
        --server-key rtomod.key --client-key camera1.key_secret   # CURVE
"""
import argparse
import os
import sys
import time

import numpy as np

try:
    import rtomo
except ImportError:      # not installed: the package beside this example
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(
        __file__)), "..", "python"))
    import rtomo

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
    p.add_argument("--connections", type=int, default=1,
                   help="ingest connections to spread the frames over")
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
    return p.parse_args()


def projection(width, rows, angle_deg):
    """Line integrals of the phantom at one angle (degrees): rows x width.

    PROTOCOL.md 3.3: pixel (x, y) of the grid, centred on the axis, projects
    to bin axis + (x - c) cos(a) - (y - c) sin(a).  A disc of radius r at
    (x0, y0) therefore projects to a chord 2 mu sqrt(r^2 - (s - s0)^2) around
    s0 = x0 cos(a) - y0 sin(a).  Every row sees the same slice.
    """
    a = np.deg2rad(angle_deg)
    s = np.arange(width) - (width - 1) / 2.0
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


def push_scan(args, client):
    """Darks, flats and projections as uint16 counts (the package sends
    any numpy array of uint8, uint16 or float32 as the protocol wants)."""
    dark_level, flat_level = 100.0, 20000.0
    shape = (args.rows, args.size)
    counts = lambda v: np.round(v).astype(np.uint16)
    step = 180.0 / args.angles                       # degrees
    with client.scan(args.scan, detector=(args.size, args.rows),
                     projections=args.angles, angle_start=0.0,
                     angle_step=step, dtype="uint16", darks=2, flats=2,
                     reconstruction={"filter": "shepp-logan",
                                     "slices": "all"}) as scan:
        for i in range(2):
            scan.dark(i, counts(np.full(shape, dark_level)))
        for i in range(2):
            scan.flat(i, counts(np.full(shape, flat_level)))
        for i in range(args.angles):
            raw = dark_level + (flat_level - dark_level) * np.exp(
                -projection(args.size, args.rows, i * step))
            scan.projection(i, counts(raw), angle=i * step)
    # leaving the with-block sent scan_end


def ascii_preview(img, columns=64):
    """The image as text, darkest to brightest."""
    ramp = " .:-=+*#%@"
    step = max(1, img.shape[1] // columns)
    small = img[::2 * step, ::step]
    lo, hi = np.percentile(small, [1, 99])
    scaled = np.clip((small - lo) / (hi - lo + 1e-30), 0, 1)
    return "\n".join("".join(ramp[int(v * (len(ramp) - 1))] for v in row)
                     for row in scaled)


def show(args, image):
    img = image.data
    print(ascii_preview(img))
    if list(image.roi) == [0, 0, args.size, args.size]:
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
    curve = None
    if args.server_key or args.client_key:
        if not (args.server_key and args.client_key):
            sys.exit("push_scan.py: CURVE needs both --server-key and "
                     "--client-key")
        curve = rtomo.Curve.from_files(args.server_key, args.client_key)
    # Subscribes to slices and events first, and waits until the
    # subscription is in place: PUB drops what it sends before (PROTOCOL.md 5).
    client = rtomo.Client(args.daemon, ingest=args.ingest,
                          publish=args.publish, control=args.control,
                          connections=args.connections, curve=curve,
                          topics=("slice", "event"), ready=0)
    time.sleep(0.5)
    try:
        t0 = time.time()
        push_scan(args, client)
        print("pushed %d projections of %dx%d in %.2f s"
              % (args.angles, args.size, args.rows, time.time() - t0))
        # What became of the scan (PROTOCOL.md 3.9): the control request
        # "scan", asked until final and judged; ScanFailed carries the
        # daemon's reason.  Meanwhile the slices wait in the SUB queue.
        try:
            outcome = client.wait_scan(args.scan, args.timeout)
        except rtomo.RtomoError as e:
            print("scan %s failed: %s" % (args.scan, e), file=sys.stderr)
            return 1
        print(rtomo.judge(outcome)[1])
        try:
            slices = client.images(args.scan, timeout=args.timeout)
        except rtomo.Timeout:
            print("no slice of scan %s arrived within %g s"
                  % (args.scan, args.timeout))
            return 1
        for i in sorted(slices):
            h = slices[i]
            print("slice %d (%d of %d): %dx%d, min %.4g max %.4g, latency "
                  "%s ms" % (h.slice, h.index + 1, h.count, h.width,
                             h.height, h["min"], h["max"], h["latency_ms"]))
        if client.subscriber.lost:
            print("lost %d published messages (seq gaps)"
                  % client.subscriber.lost)
        image = slices[sorted(slices)[len(slices) // 2]]
        print("showing slice %d" % image.slice)
        show(args, image)
        return 0
    finally:
        client.close()


if __name__ == "__main__":
    sys.exit(main())
