"""The control commands of PROTOCOL.md 7 as methods returning parsed
JSON: ping, status, get/set_config, abort, planes, scan."""
import numpy as np
import pytest

import rtomo
import phantom


def test_ping_status_config(client):
    assert client.ping()["pong"] is True
    st = client.status()
    assert st["ok"] and st["backend"] == "cpu"
    assert st["state"] in ("idle", "acquiring", "reconstructing", "streaming")
    for key in ("version", "uptime_s", "workers", "memory", "counters",
                "telemetry", "scans"):
        assert key in st
    config = client.get_config()
    assert config["telemetry"]["interval_ms"] == 50
    new = client.set_config({"telemetry.interval_ms": 80},
                            reconstruction={"filter": "hann"})
    assert new["telemetry"]["interval_ms"] == 80
    assert new["reconstruction"]["filter"] == "hann"
    new = client.set_config(telemetry={"interval_ms": 50},
                            reconstruction={"filter": "ram-lak"})
    assert new["telemetry"]["interval_ms"] == 50


def test_abort_a_scan(client):
    scan = client.scan("to-abort", detector=(32, 1), projections=100,
                       dtype="float32")
    client.wait_event("scan_started", scan="to-abort", timeout=10)
    scan.projection(0, np.zeros((1, 32), np.float32))
    assert client.abort("to-abort")["aborted"] == "to-abort"
    ev = client.wait_event("scan_aborted", scan="to-abort", timeout=10)
    assert ev.reason == "aborted"
    with pytest.raises(rtomo.ScanFailed) as e:
        client.wait_scan("to-abort", timeout=10)
    assert e.value.reason == "aborted"
    assert e.value.outcome["state"] == "aborted"
    # and, waiting for the completion instead, Aborted is raised
    client.scan("to-abort2", detector=(32, 1), projections=100,
                dtype="float32")
    client.wait_event("scan_started", scan="to-abort2", timeout=10)
    client.abort()
    with pytest.raises(rtomo.Aborted):
        client.wait_event("scan_complete", scan="to-abort2", timeout=10)


def test_a_vertical_plane(client):
    """planes(): an x-z plane through the middle of a 4-row volume is
    published on topic plane; its row j is row y = 31 of slice j (the
    plane's points fall on the slices' pixels: z = j, y = 31)."""
    W, rows, n = 64, 4, 90
    angles = np.arange(n) * 180.0 / n
    sino = phantom.sinogram(W, angles).astype(np.float32)
    # rows differ, so that the plane's rows are told apart
    stack = sino[:, None, :] * np.arange(1, rows + 1, dtype=np.float32
                                         )[None, :, None]
    asked = client.planes([{"centre": [31.5, 31, 1.5], "u": [2, 0, 0],
                            "v": [0, 0, 1], "width": W, "height": rows}])
    assert asked[0]["u"] == [1, 0, 0]               # normalised
    try:
        client.push_scan("plane", stack, angle_step=180.0 / n)
        slices = client.images("plane", timeout=30)
        planes = client.images("plane", topic="plane", timeout=30)
    finally:
        assert client.planes([]) == []
    plane = planes[0]
    assert plane.data.shape == (rows, W) and plane["centre"] == [31.5, 31, 1.5]
    expect = np.stack([slices[r].data[31] for r in range(rows)])
    err = np.abs(plane.data - expect).max() / np.abs(expect).max()
    print("plane against the slices: %.2e of the peak" % err)
    assert err < 1e-5


def test_scan_outcome_of_an_unknown_scan(client):
    s = client.scan_outcome("nobody-sent-this", timeout=0.3)
    assert s["state"] == "unknown" and s["kind"] is None
