"""The EPICS PVAccess bridge (rtomo.pva) against an NTNDArray server that
the test starts itself (p4p's server, on loopback ports of its own): an
armed scan fed through the bridge and rtomod's JSON-header input
reconstructs what the same frames sent natively do, with per-image angles
from an NDAttribute.  Skipped where p4p (PyPI, not Debian) is not
installed: pip install p4p into the test's virtual environment."""
import time

import numpy as np
import pytest

p4p = pytest.importorskip("p4p")

from p4p.client.thread import Context            # noqa: E402
from p4p.nt import NTNDArray                     # noqa: E402
from p4p.server import Server                    # noqa: E402
from p4p.server.thread import SharedPV           # noqa: E402

import rtomo.pva                                 # noqa: E402
from conftest import Daemon, free_port           # noqa: E402
from test_detector_inputs import (DARKS, FLATS, N, ROWS, W, ANGLES,  # noqa
                                  counts, native, same_slices)


@pytest.fixture(scope="module")
def jsonhdr_daemon():
    endpoint = "tcp://127.0.0.1:%d" % free_port()
    d = Daemon(["--set", "inputs.jsonhdr.endpoint=" + endpoint]).start()
    d.jsonhdr = endpoint
    yield d
    assert d.stop() == 0


@pytest.fixture
def ioc():
    """An NTNDArray PV on a private loopback server (p4p's isolated
    server), and a client context that finds it."""
    nt = NTNDArray()
    pv = SharedPV(initial=nt.wrap(np.zeros((0, 0), np.uint16)))
    name = "RTOMO:TEST:Image"
    server = Server(providers=[{name: pv}], isolate=True)
    ctx = Context("pva", conf=server.conf(), useenv=False)
    yield name, pv, nt, ctx
    ctx.close()
    server.stop()


def post(pv, nt, image, unique, angle=None):
    attrs = {"SampleAngle": float(angle)} if angle is not None else {}
    value = nt.wrap(image, attrib=attrs)
    value["uniqueId"] = unique
    pv.post(value)


def test_message_from_an_ndarray():
    """dimension[0] is x: a 3 x 2 array becomes shape [2, 3]; signed
    pixels are refused."""
    nt = NTNDArray()
    v = nt.wrap(np.arange(6, dtype=np.uint16).reshape(2, 3),
                attrib={"A": 1.25})
    header, data = rtomo.pva.ndarray_message(v, 7, "A")
    import json
    h = json.loads(header)
    assert h["shape"] == [2, 3] and h["type"] == "uint16"
    assert h["frame"] == 7 and h["ndattr"] == {"A": 1.25}
    assert np.array_equal(np.frombuffer(data, np.uint16),
                          np.arange(6, dtype=np.uint16))
    with pytest.raises(ValueError):
        rtomo.pva.ndarray_message(nt.wrap(np.zeros((2, 2), np.int16)), 0)


def test_bridge_feeds_an_armed_scan(jsonhdr_daemon, ioc):
    name, pv, nt, ctx = ioc
    c = jsonhdr_daemon.client()
    try:
        darks, flats, projections = counts(np.uint16, 20000.0)
        rng = np.random.default_rng(5)
        angles = ANGLES + rng.uniform(-0.1, 0.1, N)
        want = native(c, "native-pva", darks, flats, projections, angles)
        c.control.request({
            "cmd": "arm", "input": "jsonhdr", "scan": "pva",
            "detector": {"width": W, "height": ROWS}, "projections": N,
            "dtype": "uint16", "darks": DARKS, "flats": FLATS,
            "angle_step": 180.0 / N, "angle_key": "SampleAngle",
            "reconstruction": {"filter": "shepp-logan", "slices": [0, 1]}})
        with rtomo.pva.Bridge(name, jsonhdr_daemon.jsonhdr,
                              angle_attribute="SampleAngle",
                              context=ctx) as bridge:
            assert bridge.connected.wait(10), "the bridge did not connect"
            frames = list(darks) + list(flats) + list(projections)
            for i, frame in enumerate(frames):
                k = i - DARKS - FLATS
                post(pv, nt, frame, 1000 + i, angles[k] if k >= 0 else None)
                time.sleep(0.002)       # an IOC's pace, not a burst
            outcome = c.scan_outcome("pva", 60)
            assert bridge.stats["forwarded"] == len(frames)
            assert bridge.stats["gaps"] == 0
        assert outcome["state"] == "complete"
        assert outcome["frames"] == len(frames) and outcome["rejected"] == 0
        same_slices(c.images("pva", timeout=30), want)
    finally:
        c.close()
