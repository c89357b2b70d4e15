"""rtomo-view in a real browser: the real rtomod (CPU backend) streams a
phantom scan, rtomo-view serves the page, headless Chromium loads it
(``--dump-dom`` after a few seconds of virtual time, ``--screenshot``)
and the page's DOM says what a person would see: the page writes the
size, image id, seq and statistics of the decoded pixels of every image
it shows, and the number of points of every plot, into data-*
attributes.  Checked: the slice shown is the last one rtomod published,
at its size, and its grey levels are those of the contrast mapping of
the very slice our own subscriber received (sum over all pixels, equal);
the preview and the plane of any orientation appear; the scan's progress
mid-scan; the plots gain points; the event log.  Screenshots go to
build/tests/view-screenshots/.

Skipped only where Chromium is missing outside CI (tools/setup installs
Debian's chromium; with CI set a missing Chromium fails).  The first
tests need no browser: the PNG encoder, the contrast mapping and the
latest-only buffer.
"""
import html.parser
import json
import os
import re
import selectors
import shutil
import struct
import subprocess
import sys
import time
import urllib.request

import numpy as np
import pytest

import phantom
import rtomo
from conftest import Daemon
from rtomo.view import Hub, contrast_limits, to_grey
from rtomo.view.png import decode_grey, encode_grey

W, ROWS, N = 128, 8, 180
ANGLES = np.arange(N) * 180.0 / N
PREVIEW_EVERY = 30
WINDOW = (1400, 1100)


# -- without a browser ---------------------------------------------------------
def test_png_round_trip():
    rng = np.random.default_rng(1)
    for dtype, top in ((np.uint8, 255), (np.uint16, 65535)):
        a = rng.integers(0, top + 1, size=(17, 31)).astype(dtype)
        png = encode_grey(a)
        assert png[:8] == b"\x89PNG\r\n\x1a\n"
        w, h, depth, colour = struct.unpack(">IIBB", png[16:26])
        assert (w, h, depth, colour) == (31, 17, 8 * a.itemsize, 0)
        assert np.array_equal(decode_grey(png), a)


def test_contrast_mapping():
    v = np.linspace(-1.0, 3.0, 401, dtype=np.float32).reshape(1, -1)
    assert contrast_limits("slice", v, "minmax") == (-1.0, 3.0)
    lo, hi = contrast_limits("slice", v, "auto", 10, 90)
    assert (lo, hi) == pytest.approx((-0.6, 2.6))
    g = to_grey(v, 0.0, 2.0)
    assert g.dtype == np.uint8 and g.min() == 0 and g.max() == 255
    assert g[0, 200] == 128                       # v = 1.0: 127.5 rounds even
    depth = np.array([[0, 3, 65535]], np.uint16)
    assert contrast_limits("depth", depth, "minmax") == (0.0, 3.0)
    assert to_grey(depth, 0, 3, topic="depth").tolist() == [[0, 255, 0]]


def test_latest_only_buffer_counts_what_it_skips():
    hub = Hub()

    def img(topic, seq, **h):
        header = dict(seq=seq, width=2, height=1, dtype="float32", plane=-1,
                      count=1)
        header.update(h)
        return rtomo.Image(topic, header, np.zeros((1, 2), np.float32))
    for s in range(5):
        hub.put_image(img("slice", s))
    assert hub.state()["images"]["slice"]["header"]["seq"] == 4
    assert hub.skipped["slice"] == 4 and hub.received["slice"] == 5
    hub.render("slice")                           # a browser fetched it
    hub.put_image(img("slice", 5))
    assert hub.skipped["slice"] == 4 and hub.shown["slice"] == 1
    # an SBDX frame of 9 planes: only the chosen (middle) one is kept
    for p in range(9):
        hub.put_image(img("plane", 10 + p, **{"plane": p, "count": 9}))
    keys = sorted(k for k in hub.state()["images"] if k.startswith("plane"))
    assert keys == ["plane/4"]


# -- in Chromium ---------------------------------------------------------------
def chromium():
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        if os.environ.get("CI"):
            pytest.fail("no chromium: tools/setup installs it")
        pytest.skip("no chromium (tools/setup installs Debian's chromium)")
    return path


class DomReader(html.parser.HTMLParser):
    """Attributes of the elements with an id or a data-key."""

    def __init__(self, text):
        super().__init__()
        self.by = {}
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        for name in ("id", "data-key"):
            if a.get(name):
                self.by.setdefault(a[name], a)
        if tag == "body":
            self.by["body"] = a


class Browser:
    def __init__(self, exe, profile):
        self.exe = exe
        self.profile = profile

    def _run(self, url, what, budget_ms):
        argv = [self.exe, "--headless", "--no-sandbox", "--disable-gpu",
                "--disable-dev-shm-usage", "--no-first-run",
                "--hide-scrollbars", "--user-data-dir=%s" % self.profile,
                "--window-size=%d,%d" % WINDOW,
                "--virtual-time-budget=%d" % budget_ms] + what + [url]
        t0 = time.monotonic()
        p = subprocess.run(argv, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=60)
        print("chromium %s: %.1f s" % (what[0], time.monotonic() - t0))
        assert p.returncode == 0, p.stderr.decode(errors="replace")[-2000:]
        return p.stdout.decode("utf-8")

    def dom(self, url, budget_ms=3000):
        text = self._run(url, ["--dump-dom"], budget_ms)
        return text, DomReader(text).by

    def screenshot(self, url, path, budget_ms=3000):
        if os.path.exists(path):
            os.unlink(path)
        self._run(url, ["--screenshot=%s" % path], budget_ms)
        with open(path, "rb") as f:
            head = f.read(24)
        assert head[:8] == b"\x89PNG\r\n\x1a\n"
        assert struct.unpack(">II", head[16:24]) == WINDOW
        print("screenshot: %s (%d bytes)" % (path, os.path.getsize(path)))


def start_view(daemon):
    """rtomo-view (the installed package's module) on a free port."""
    argv = [sys.executable, "-m", "rtomo.view", "--publish", daemon.publish,
            "--control", daemon.control, "--port", "0",
            "--status-interval", "0.2"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    if not sel.select(15):
        proc.kill()
        pytest.fail("rtomo-view printed nothing within 15 s")
    line = proc.stdout.readline().decode()
    assert "serving http://" in line, line
    url = line.split("serving ", 1)[1].split()[0]
    return proc, url


def get_state(url):
    with urllib.request.urlopen(url + "api/state", timeout=5) as r:
        return json.load(r)


def wait_state(url, pred, timeout=20.0, what="state"):
    deadline = time.monotonic() + timeout
    while True:
        st = get_state(url)
        if pred(st):
            return st
        if time.monotonic() > deadline:
            pytest.fail("rtomo-view: no %s within %g s: %s"
                        % (what, timeout, json.dumps(st)[:2000]))
        time.sleep(0.1)


def check_image(canvas, image, width, height):
    """The canvas shows ``image`` at its size, and its grey levels are the
    contrast mapping, with the limits the page reports, of the same
    samples: the sum over all pixels is equal (to rounding of the
    mapping's half-way values, 1 level at a few pixels)."""
    assert int(canvas["data-width"]) == width
    assert int(canvas["data-height"]) == height
    assert int(canvas["data-seq"]) == image.seq
    values = image.values()
    measured = values[values != 65535] if image.topic == "depth" else values
    assert float(canvas["data-header-min"]) == pytest.approx(
        float(measured.min()), rel=1e-6)
    assert float(canvas["data-header-max"]) == pytest.approx(
        float(measured.max()), rel=1e-6)
    lo, hi = float(canvas["data-lo"]), float(canvas["data-hi"])
    grey = to_grey(values, lo, hi, topic=image.topic).astype(np.int64)
    page_sum = int(canvas["data-sum"])
    print("%s seq %d %dx%d: grey sum page %d, numpy %d; min %s/%d max %s/%d;"
          " limits %.6g .. %.6g" % (image.topic, image.seq, width, height,
                                    page_sum, grey.sum(), canvas["data-min"],
                                    grey.min(), canvas["data-max"],
                                    grey.max(), lo, hi))
    assert abs(page_sum - int(grey.sum())) <= max(2, grey.size // 1000)
    assert int(canvas["data-min"]) == grey.min()
    assert int(canvas["data-max"]) == grey.max()
    return lo, hi


def test_view_in_chromium(tmp_path):
    exe = chromium()
    shots = os.path.join(os.path.abspath(os.environ.get("top_builddir", ".")),
                         "tests", "view-screenshots")
    os.makedirs(shots, exist_ok=True)
    browser = Browser(exe, str(tmp_path / "chromium-profile"))
    daemon = Daemon(["--set", "preview.every=%d" % PREVIEW_EVERY]).start()
    view = None
    client = None
    try:
        view, url = start_view(daemon)
        wait_state(url, lambda s: s["status"] and s["tele"],
                   what="status and telemetry")
        client = daemon.client()
        # a vertical plane x-z through the centre of the rows reconstructed
        client.planes([{"centre": [(W - 1) / 2, (W - 1) / 2, (ROWS - 1) / 2],
                        "u": [1, 0, 0], "v": [0, 0, 1], "width": W,
                        "height": ROWS}])
        sino = phantom.sinogram(W, ANGLES).astype(np.float32)
        # rows differ: scaled, and a disc that moves with the row
        stack = np.repeat(sino[:, None, :], ROWS, axis=1)
        stack *= np.linspace(0.6, 1.4, ROWS, dtype=np.float32)[None, :, None]
        s = np.arange(W) - (W - 1) / 2
        for r in range(ROWS):
            for k, a in enumerate(np.deg2rad(ANGLES)):
                s0 = (r - ROWS / 2) * 4 * np.cos(a) - 20 * np.sin(a)
                stack[k, r] += 0.04 * np.sqrt(np.clip(36 - (s - s0) ** 2,
                                                      0, None))

        # -- mid-scan: progress and the preview --------------------------
        half = N // 2
        scan = client.scan("view1", detector=(W, ROWS), projections=N,
                           dtype="float32", angle_step=180.0 / N)
        for i in range(half):
            scan.projection(i, stack[i])
        client.control.wait_for_frames("view1", half, timeout=20)
        wait_state(url, lambda s: s["status"]["scan"]
                   and s["status"]["scan"]["received"] == half
                   and "preview" in s["images"]
                   and s["images"]["preview"]["header"]["scan"] == "view1",
                   what="the scan half way and a preview (a preview due "
                   "while the last is on its way out is dropped: any one)")
        text, dom = browser.dom(url)
        line = dom["scan-line"]
        assert (line["data-received"], line["data-expected"]) == (
            str(half), str(N))
        shown = re.search(r'id="scan-line"[^>]*>([^<]*)<', text).group(1)
        assert shown == "view1 (tomo) acquiring: %d of %d projections (50 %%)" \
            % (half, N)
        pv = dom["preview"]
        assert (pv["data-width"], pv["data-height"]) == (str(W), str(W))
        assert pv["data-scan"] == "view1"
        browser.screenshot(url, os.path.join(shots, "view-midscan.png"))

        # -- the rest, the slices, the plane -----------------------------
        for i in range(half, N):
            scan.projection(i, stack[i])
        scan.end()
        outcome = scan.wait(timeout=30)
        assert outcome["images"] >= ROWS + 1
        images = client.images("view1", timeout=30)
        assert sorted(images) == list(range(ROWS))
        last = images[ROWS - 1]
        st = wait_state(url, lambda s: "slice" in s["images"]
                        and s["images"]["slice"]["header"]["seq"] == last.seq
                        and "plane/0" in s["images"]
                        and s["images"]["plane/0"]["header"]["scan"]
                        == "view1", what="the last slice and the plane")
        # the view holds the very samples rtomod published
        with urllib.request.urlopen(url + "api/raw?key=slice") as r:
            raw = np.frombuffer(r.read(), "<f4").reshape(W, W)
        assert np.array_equal(raw, last.data)

        # -- the page: auto percentiles (the default) ----------------------
        text, dom = browser.dom(url)
        body = dom["body"]
        sl = dom["slice"]
        assert int(sl["data-index"]) == ROWS - 1 and sl["data-scan"] == "view1"
        lo, hi = check_image(sl, last, W, W)
        want = np.percentile(last.data.astype(np.float64), [1, 99])
        assert (lo, hi) == pytest.approx(tuple(want), rel=1e-9)
        # the other rows' mappings differ: the comparison tells them apart
        for other in range(ROWS - 1):
            g = to_grey(images[other].data, *contrast_limits(
                "slice", images[other].data)).astype(np.int64)
            assert abs(int(sl["data-sum"]) - int(g.sum())) > grey_tol(g)
        pl = dom["plane/0"]
        assert (int(pl["data-width"]), int(pl["data-height"])) == (W, ROWS)
        assert float(pl["data-header-max"]) > 0.01
        # plots have points and gain more while the page runs
        first, now = (int(body["data-telemetry-first"]),
                      int(body["data-telemetry"]))
        charts = {k: int(v["data-points"]) for k, v in dom.items()
                  if k.startswith("chart-")}
        print("plot points: first poll %d, after %s polls %d; charts %s"
              % (first, body["data-polls"], now, charts))
        assert int(body["data-polls"]) >= 3
        assert now > first > 0
        assert all(n > 0 for n in charts.values()), charts
        # events and counters
        assert int(dom["event-log"]["data-rows"]) >= 2
        assert ">scan_complete<" in text and ">scan_started<" in text
        assert ">view1<" in text
        assert dom["n-received"] is not None
        print("view counters:", json.dumps(st["view"]))
        browser.screenshot(url, os.path.join(shots, "view.png"))

        # -- again with a manual contrast: same slice, fixed limits, and
        # more telemetry than the first load had
        text2, dom2 = browser.dom(url + "?mode=manual&lo=0&hi=0.03")
        sl2 = dom2["slice"]
        assert (float(sl2["data-lo"]), float(sl2["data-hi"])) == (0.0, 0.03)
        check_image(sl2, last, W, W)
        assert int(dom2["body"]["data-telemetry"]) > now
        assert int(dom2["chart-ingest"]["data-points"]) >= charts[
            "chart-ingest"]

        # -- an SBDX stream: composite, depth map, the chosen plane of 8 ----
        stream = client.sbdx("view-sbdx", holes=(10, 8), detector=(16, 8),
                             shift=4, dtype="uint8",
                             ratio_range={"first": 1.0, "last": 2.0,
                                          "count": 8})
        rng = np.random.default_rng(3)
        stream.frame(0, rng.integers(10, 250, (8, 10, 8, 16))
                     .astype(np.uint8))
        stream.end()
        comp = client.images("view-sbdx", topic="composite", timeout=30)[0]
        depth = client.images("view-sbdx", topic="depth", timeout=30)[0]
        wait_state(url, lambda s: all(
            s["images"].get(k, {}).get("header", {}).get("scan")
            == "view-sbdx" for k in ("composite", "depth", "plane/4")),
            what="the SBDX composite, depth map and plane 4")
        text3, dom3 = browser.dom(url + "?mode=minmax")
        check_image(dom3["composite"], comp, comp.width, comp.height)
        check_image(dom3["depth"], depth, depth.width, depth.height)
        assert dom3["plane/4"]["data-plane"] == "4"
        assert "plane/0" not in dom3          # the tomography plane is gone
        assert ">SBDX plane 4 of 8<" in text3
        browser.screenshot(url + "?mode=minmax",
                           os.path.join(shots, "view-sbdx.png"))
        print("screenshots in %s" % shots)
    finally:
        if client is not None:
            client.close()
        if view is not None:
            view.terminate()
            try:
                assert view.wait(10) == 0, "rtomo-view exit status"
            finally:
                if view.poll() is None:
                    view.kill()
        assert daemon.stop() == 0


def grey_tol(g):
    return max(2, g.size // 1000)
