"""Scans armed from the control socket and fed by detector-native streams
(PROTOCOL.md 10): DECTRIS Stream V2 (uncompressed and bitshuffle-LZ4,
uint16 and uint32, a second channel ignored) and htype array-1.0 JSON
headers, sent by detector_streams.py (written from the published
specifications) to the real rtomod on loopback.  Each armed scan must
reconstruct exactly what the same frames sent natively do, and every
malformed message must be rejected with its own reason and counted."""
import numpy as np
import pytest

import phantom
from conftest import Daemon, free_port
from detector_streams import (Pusher, bslz4, bit_transpose, end_message,
                              image_message, jsonhdr_message, start_message)

import cbor2

W, ROWS, N, DARKS, FLATS = 64, 2, 90, 2, 3
ANGLES = np.arange(N) * 180.0 / N
RECON = {"filter": "shepp-logan", "slices": [0, 1]}


@pytest.fixture(scope="module")
def inputs_daemon():
    stream2 = "tcp://127.0.0.1:%d" % free_port()
    jsonhdr = "tcp://127.0.0.1:%d" % free_port()
    d = Daemon(["--set", "inputs.stream2.endpoint=" + stream2,
                "--set", "inputs.jsonhdr.endpoint=" + jsonhdr]).start()
    d.stream2, d.jsonhdr = stream2, jsonhdr
    yield d
    assert d.stop() == 0, "rtomod exit status after SIGTERM"


@pytest.fixture
def client(inputs_daemon):
    c = inputs_daemon.client()
    yield c
    c.close()


def counts(dtype, flat):
    """Darks, flats and projections of the phantom, as detector counts."""
    dark = 100.0
    sino = phantom.sinogram(W, ANGLES)
    raw = np.round(dark + (flat - dark) * np.exp(-sino)).astype(dtype)
    projections = np.repeat(raw[:, None, :], ROWS, axis=1)
    darks = np.full((DARKS, ROWS, W), dark, dtype)
    flats = np.full((FLATS, ROWS, W), flat, dtype)
    return darks, flats, projections


def native(client, scan, darks, flats, projections, angles=None):
    """The reference: the same frames in rtomo's own protocol."""
    s = client.scan(scan, detector=(W, ROWS), projections=N,
                    dtype=np.dtype(projections.dtype).name
                    if projections.dtype != np.uint32 else "float32",
                    darks=DARKS, flats=FLATS, reconstruction=RECON,
                    angle_step=180.0 / N)
    cast = (lambda a: a.astype(np.float32)) \
        if projections.dtype == np.uint32 else (lambda a: a)
    s.darks(cast(darks))
    s.flats(cast(flats))
    s.projections(cast(projections), angles=angles)
    s.end()
    assert client.wait_scan(scan, 60)["frames"] == DARKS + FLATS + N
    return client.images(scan, timeout=30)


def arm(client, scan, dtype, input="stream2", **extra):
    request = {"cmd": "arm", "input": input, "scan": scan,
               "detector": {"width": W, "height": ROWS}, "projections": N,
               "dtype": dtype, "darks": DARKS, "flats": FLATS,
               "reconstruction": RECON}
    request.setdefault("angle_step", 180.0 / N)
    request.update(extra)
    reply = client.control.request(request)
    assert reply["armed"] == scan and reply["input"] == input
    assert reply["expected"] == DARKS + FLATS + N
    client.wait_event("scan_started", scan=scan, timeout=10)


def same_slices(got, want):
    assert sorted(got) == sorted(want)
    for i in want:
        assert got[i].slice == want[i].slice
        scale = np.abs(want[i].data).max()
        assert np.abs(got[i].data - want[i].data).max() <= 1e-6 * scale


def stream2_frames(darks, flats, projections):
    return list(darks) + list(flats) + list(projections)


# --------------------------------------------------------- the sender ----

def test_bslz4_sender_agrees_with_debian_bitshuffle():
    """The test sender's bit transpose and bslz4 framing decode with
    Debian's bitshuffle (the reference implementation), where installed:
    a check that sender and daemon do not share a misreading."""
    bitshuffle = pytest.importorskip("bitshuffle")
    rng = np.random.default_rng(7)
    for dtype, n in ((np.uint8, 4096 + 13), (np.uint16, 2048 * 3 + 5),
                     (np.uint32, 1000)):
        a = rng.integers(0, np.iinfo(dtype).max, n, dtype=dtype)
        blocked = (n // 8) * 8
        assert bit_transpose(a[:blocked]) == \
            bitshuffle.bitshuffle(a[:blocked], blocked).tobytes()
        packed = bslz4(a, block_elements=512)
        assert int.from_bytes(packed[:8], "big") == a.nbytes
        block = int.from_bytes(packed[8:12], "big") // a.itemsize
        back = bitshuffle.decompress_lz4(np.frombuffer(packed[12:], np.uint8),
                                         a.shape, a.dtype, block)
        assert np.array_equal(back, a)


# ---------------------------------------------------------- Stream V2 ----

@pytest.mark.parametrize("dtype,compress", [
    (np.uint16, False), (np.uint16, True), (np.uint32, False),
    (np.uint32, True)])
def test_stream2_reconstructs_as_native(inputs_daemon, client, dtype,
                                        compress):
    """An armed scan fed by Stream V2 (start, 95 images, end; a second
    channel the daemon ignores) reconstructs the same slices as the same
    counts sent natively (uint32 counts natively as float32, the scan's
    dtype for a 32-bit detector)."""
    tag = "%s-%s" % (np.dtype(dtype).name, "bslz4" if compress else "raw")
    flat = 20000.0 if dtype == np.uint16 else 300000.0
    darks, flats, projections = counts(dtype, flat)
    want = native(client, "native-" + tag, darks, flats, projections)
    scan = "s2-" + tag
    arm(client, scan, "uint16" if dtype == np.uint16 else "float32")
    before = client.status()["inputs"]["stream2"]
    det = Pusher(inputs_daemon.stream2)
    try:
        series = 100 + before["series"]
        frames = stream2_frames(darks, flats, projections)
        det.send(start_message(series, ROWS, W, dtype, len(frames),
                               channels=("threshold_1", "threshold_2")))
        for i, frame in enumerate(frames):
            det.send(image_message(series, i, {
                "threshold_1": frame,
                "threshold_2": np.full_like(frame, 7)}, compress=compress))
        det.send(end_message(series))
    finally:
        det.close()
    outcome = client.wait_scan(scan, 60)
    assert outcome["frames"] == len(frames) and outcome["rejected"] == 0
    same_slices(client.images(scan, timeout=30), want)
    after = client.status()["inputs"]["stream2"]
    assert after["frames"] - before["frames"] == len(frames)
    assert after["rejected"] == before["rejected"]
    assert after["armed"] is None, "the end of the series disarms"
    assert after["series"] - before["series"] == 1
    assert after["series_ended"] - before["series_ended"] == 1, \
        "the end message is counted on its input"


def expect_reject(client, reason, scan=None):
    ev = client.wait_event("rejected", scan=scan, timeout=10,
                           raise_rejected=False)
    assert ev.reason == reason, str(ev)
    return ev


def test_stream2_malformed_messages_each_rejected(inputs_daemon, client):
    """Bad CBOR, a non-map, an unknown type, an image before its start, a
    start of the wrong size or of pixels the scan cannot hold, an unknown
    compression, corrupt and truncated
    bslz4, a size that disagrees with the dimensions, signed pixels, a
    missing channel map, a frame number beyond the arm's blocks, two parts,
    and any message with nothing armed: each rejected with its reason and
    counted per input; the scan still completes from its good frames."""
    darks, flats, projections = counts(np.uint16, 20000.0)
    frames = stream2_frames(darks, flats, projections)
    good = frames[0]
    det = Pusher(inputs_daemon.stream2)
    try:
        det.send(image_message(1, 0, {"c": good}))
        expect_reject(client, "not_armed")
        scan = "s2-bad"
        arm(client, scan, "uint16")
        det.send(b"\xa1\x64type\x65sta")           # truncated CBOR
        expect_reject(client, "bad_cbor", scan)
        det.send(cbor2.dumps([1, 2, 3]))
        expect_reject(client, "bad_cbor", scan)
        det.send(cbor2.dumps({"type": "frobnicate", "series_id": 1}))
        expect_reject(client, "unknown_type", scan)
        det.send(image_message(9, 0, {"c": good}))
        expect_reject(client, "bad_state", scan)   # before its start
        det.send(start_message(9, ROWS + 1, W, np.uint16, len(frames)))
        expect_reject(client, "shape_mismatch", scan)
        det.send(start_message(9, ROWS, W, np.uint32, len(frames)))
        expect_reject(client, "dtype_mismatch", scan)
        det.send(start_message(9, ROWS, W, np.uint16, len(frames)))
        bad = []
        zstd = cbor2.CBORTag(40, [[ROWS, W], cbor2.CBORTag(69, cbor2.CBORTag(
            56500, ["zstd", 2, b"\0" * 16]))])
        bad.append((zstd, "bad_compression"))
        packed = bslz4(good)
        truncated = cbor2.CBORTag(40, [[ROWS, W], cbor2.CBORTag(69, cbor2.CBORTag(
            56500, ["bslz4", 2, packed[:-9]]))])
        bad.append((truncated, "bad_compression"))
        corrupt = bytearray(packed)
        corrupt[16:24] = b"\xff" * 8
        bad.append((cbor2.CBORTag(40, [[ROWS, W], cbor2.CBORTag(
            69, cbor2.CBORTag(56500, ["bslz4", 2, bytes(corrupt)]))]),
            "bad_compression"))
        bad.append((cbor2.CBORTag(40, [[ROWS, W], cbor2.CBORTag(
            69, good.tobytes()[:-2])]), "size_mismatch"))
        bad.append((cbor2.CBORTag(40, [[ROWS, W], cbor2.CBORTag(
            77, good.tobytes())]), "dtype_mismatch"))   # sint16
        for data, reason in bad:
            det.send(cbor2.dumps({"type": "image", "series_id": 9,
                                  "image_id": 0, "data": {"c": data}}))
            expect_reject(client, reason, scan)
        det.send(cbor2.dumps({"type": "image", "series_id": 9,
                              "image_id": 0}))
        expect_reject(client, "bad_field", scan)
        det.send(image_message(9, len(frames) + 5, {"c": good}))
        expect_reject(client, "index_out_of_range", scan)
        det.socket.send_multipart([end_message(9), b"x"])
        expect_reject(client, "bad_parts", scan)
        for i, frame in enumerate(frames):
            det.send(image_message(9, i, {"c": frame}, compress=i % 2 == 1))
        det.send(image_message(9, DARKS + FLATS + 3, {"c": good}))
        expect_reject(client, "duplicate_frame", scan)
        det.send(end_message(9))
        outcome = client.scan_outcome(scan, 60)
        assert outcome["state"] == "complete"
        assert outcome["frames"] == len(frames)
        det.send(end_message(9))
        expect_reject(client, "not_armed")
    finally:
        det.close()
    s = client.status()["inputs"]["stream2"]
    for reason, n in (("not_armed", 2), ("bad_cbor", 2), ("unknown_type", 1),
                      ("bad_state", 1), ("shape_mismatch", 1),
                      ("bad_compression", 3), ("size_mismatch", 1),
                      ("dtype_mismatch", 2), ("bad_field", 1),
                      ("index_out_of_range", 1), ("bad_parts", 1),
                      ("duplicate_frame", 1)):
        assert s["rejects"].get(reason) == n, (reason, s["rejects"])
    assert client.status()["counters"]["rejects"]["bad_cbor"] >= 2


def test_arm_refusals(inputs_daemon, client):
    """An arm whose begin is bad is refused with the begin's reject name;
    an unconfigured input, a second arm, a disarm of nothing are control
    errors; a disarm ends the scan as scan_end would."""
    reply = client.control.request(
        {"cmd": "arm", "input": "stream2", "scan": "arm-bad",
         "detector": {"width": 1, "height": 2}, "projections": 4},
        check=False)
    assert not reply["ok"] and reply["error"] == "refused"
    assert reply["reason"] == "bad_field" and "detector.width" in \
        reply["message"]
    assert client.scan_state("arm-bad")["state"] == "refused"
    reply = client.control.request({"cmd": "arm", "input": "stream2",
                                    "projections": 4}, check=False)
    assert reply["error"] == "refused" and reply["reason"] == "bad_field"
    assert "scan" in reply["message"]       # the id it lacks
    reply = client.control.request({"cmd": "arm", "input": "epics",
                                    "scan": "x"}, check=False)
    assert reply["error"] == "bad_argument"
    arm(client, "arm-dis", "uint16")
    reply = client.control.request(
        {"cmd": "arm", "input": "stream2", "scan": "arm-other",
         "detector": {"width": W, "height": ROWS}, "projections": N},
        check=False)
    assert reply["error"] == "bad_state"
    reply = client.control.request({"cmd": "disarm", "input": "stream2"})
    assert reply["disarmed"] == "arm-dis" and reply["ended"]
    outcome = client.scan_outcome("arm-dis", 30)
    assert outcome["state"] == "complete" and outcome["missing"] == N
    reply = client.control.request({"cmd": "disarm", "input": "stream2"},
                                   check=False)
    assert reply["error"] == "bad_state"


# ------------------------------------------------------- JSON headers ----

def test_jsonhdr_reconstructs_as_native(inputs_daemon, client):
    """htype array-1.0 images (areaDetector / std-daq) with their angle in
    the header's ndattr: the armed scan ends with its last frame and
    equals the native scan whose projections carry the same angles."""
    darks, flats, projections = counts(np.uint16, 20000.0)
    rng = np.random.default_rng(3)
    angles = ANGLES + rng.uniform(-0.1, 0.1, N)
    want = native(client, "native-jh", darks, flats, projections, angles)
    arm(client, "jh", "uint16", input="jsonhdr", angle_key="angle")
    det = Pusher(inputs_daemon.jsonhdr)
    try:
        det.send([b"{not json", b""])
        expect_reject(client, "bad_json", "jh")
        det.send(jsonhdr_message(0, darks[0], htype="chunk-1.0"))
        expect_reject(client, "unknown_type", "jh")
        det.send(jsonhdr_message(0, darks[0], encoding="bslz4"))
        expect_reject(client, "bad_compression", "jh")
        msg = jsonhdr_message(0, darks[0])
        det.send([msg[0], msg[1][:-1]])
        expect_reject(client, "size_mismatch", "jh")
        frames = stream2_frames(darks, flats, projections)
        for i, frame in enumerate(frames):
            extra = {}
            if i >= DARKS + FLATS:
                extra["ndattr"] = {"angle": float(angles[i - DARKS - FLATS])}
            det.send(jsonhdr_message(i, frame, **extra))
    finally:
        det.close()
    outcome = client.scan_outcome("jh", 60)
    assert outcome["state"] == "complete" and outcome["rejected"] == 4
    assert outcome["frames"] == DARKS + FLATS + N
    same_slices(client.images("jh", timeout=30), want)
    s = client.status()["inputs"]["jsonhdr"]
    assert s["armed"] is None and s["frames"] == DARKS + FLATS + N


def test_aborted_arm_takes_nothing_into_a_new_scan_of_its_id(
        inputs_daemon, client):
    """An arm whose scan was aborted is stale: the detector's images that
    keep coming are refused (not_armed), not taken into a later scan of
    the same id begun natively, and status no longer shows it armed."""
    darks, flats, projections = counts(np.uint16, 20000.0)
    arm(client, "reused", "uint16", input="jsonhdr")
    reply = client.control.request({"cmd": "abort", "scan": "reused"})
    assert reply["ok"], reply
    client.wait_event("scan_aborted", scan="reused", timeout=10)
    s = client.scan("reused", detector=(W, ROWS), projections=N,
                    dtype="uint16", darks=DARKS, flats=FLATS,
                    reconstruction=RECON, angle_step=180.0 / N)
    det = Pusher(inputs_daemon.jsonhdr)
    try:
        det.send(jsonhdr_message(0, darks[0]))
        expect_reject(client, "not_armed")
    finally:
        det.close()
    assert client.status()["inputs"]["jsonhdr"]["armed"] is None
    s.darks(darks)
    s.flats(flats)
    s.projections(projections)
    s.end()
    outcome = client.wait_scan("reused", 60)
    assert outcome["frames"] == DARKS + FLATS + N, outcome


def test_stream2_input_connects_to_a_binding_detector():
    """A detector that binds its PUSH socket (a DECTRIS DCU): the input
    configured as ">endpoint" connects to it, and an armed scan of 4
    projections completes from its series."""
    import zmq
    ctx = zmq.Context.instance()
    dcu = ctx.socket(zmq.PUSH)
    port = dcu.bind_to_random_port("tcp://127.0.0.1")
    d = Daemon(["--set", "inputs.stream2.endpoint=>tcp://127.0.0.1:%d"
                % port]).start()
    c = d.client()
    try:
        frame = np.full((ROWS, W), 1000, np.uint16)
        reply = c.control.request({
            "cmd": "arm", "input": "stream2", "scan": "dcu",
            "detector": {"width": W, "height": ROWS}, "projections": 4,
            "reconstruction": {"slices": [0]}})
        assert reply["expected"] == 4
        dcu.send(start_message(1, ROWS, W, np.uint16, 4))
        for i in range(4):
            dcu.send(image_message(1, i, {"c": frame}, compress=True))
        dcu.send(end_message(1))
        assert c.wait_scan("dcu", 30)["frames"] == 4
        assert c.status()["inputs"]["stream2"]["endpoint"].startswith(">")
    finally:
        c.close()
        dcu.close(linger=0)
        assert d.stop() == 0


def test_sbdx_armed_on_stream2_as_native(inputs_daemon, client):
    """An SBDX stream armed on Stream V2: each uint8 detector image holds
    every hole's readout (holes_y x holes_x x det_height rows of det_width,
    the sbdx_frame layout); its planes equal those of the same frames sent
    natively, and the series' end ends the stream."""
    holes, det, ratios = (10, 8), (16, 8), [0.8, 1.25, 2.1]
    rng = np.random.default_rng(11)
    frames = rng.integers(0, 255, (3, 8, 10, 8, 16), dtype=np.uint8)
    s = client.sbdx("sbdx-native", holes=holes, detector=det, shift=4,
                    ratios=ratios, dtype="uint8")
    for f, frame in enumerate(frames):
        s.frame(f, frame)
    s.end()
    want = [client.images("sbdx-native", topic="plane", frame=f, timeout=30)
            for f in range(len(frames))]
    reply = client.control.request({
        "cmd": "arm", "input": "stream2", "type": "sbdx_begin",
        "scan": "sbdx-s2", "holes": list(holes),
        "detector": {"width": det[0], "height": det[1]}, "shift": 4,
        "ratios": ratios, "dtype": "uint8"})
    assert reply["expected"] == -1
    det_ = Pusher(inputs_daemon.stream2)
    try:
        series = 500
        det_.send(start_message(series, 8 * 10 * 8, 16, np.uint8,
                                len(frames)))
        for f, frame in enumerate(frames):
            det_.send(image_message(series, f, {"c": frame.reshape(-1, 16)},
                                    compress=f == 1))
        det_.send(end_message(series))
    finally:
        det_.close()
    outcome = client.scan_outcome("sbdx-s2", 30)
    assert outcome["kind"] == "sbdx" and outcome["state"] == "complete"
    assert outcome["frames"] == len(frames) and outcome["rejected"] == 0
    for f in range(len(frames)):
        got = client.images("sbdx-s2", topic="plane", frame=f, timeout=30)
        assert sorted(got) == sorted(want[f])
        for k in got:
            assert np.array_equal(got[k].data, want[f][k].data), (f, k)


def test_input_beyond_loopback_needs_security():
    """A detector input that rtomod binds beyond loopback is refused at
    start without CURVE (or security.allow_insecure_remote), as ingest is;
    one it connects to is not a listener and is not."""
    import subprocess
    from conftest import daemon_path
    base = [daemon_path(), "--backend", "cpu", "--check-config"]
    r = subprocess.run(base + ["--set", "inputs.stream2.endpoint="
                               "tcp://0.0.0.0:%d" % free_port()],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2
    assert "inputs.stream2.endpoint" in r.stderr and "loopback" in r.stderr
    r = subprocess.run(base + ["--set", "inputs.jsonhdr.endpoint="
                               ">tcp://192.0.2.1:%d" % free_port()],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr     # --check-config: valid
