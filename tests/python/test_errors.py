"""Refusals as exceptions: what the package refuses to send
(InvalidFrame), what the daemon rejects (Rejected from wait_event,
ScanFailed from wait_scan, carrying the daemon's reason and message) and
control errors (ControlError with the error code)."""
import numpy as np
import pytest

import rtomo


def test_unsupported_dtypes_are_refused_before_sending(client):
    with pytest.raises(rtomo.InvalidFrame) as e:
        client.scan("bad-dtype", detector=(8, 1), projections=4,
                    dtype="float64")
    assert e.value.reason == "bad_dtype"
    scan = client.scan("f64", detector=(8, 1), projections=4, dtype="float32")
    # the begin travels on the ingest socket, the abort below on the
    # control socket: nothing orders them but the daemon's event
    client.wait_event("scan_started", scan="f64", timeout=10)
    for dtype in (np.float64, np.int32, np.int16, np.complex64, bool):
        with pytest.raises(rtomo.InvalidFrame) as e:
            scan.projection(0, np.zeros((1, 8), dtype))
        assert e.value.reason == "bad_dtype"
        assert "uint8, uint16, float32" in e.value.message
    with pytest.raises(ValueError):             # InvalidFrame is one
        scan.projection(0, np.zeros((2, 8), np.float32))
    with pytest.raises(rtomo.InvalidFrame) as e:
        scan.projection(0, np.full((1, 8), np.nan, np.float32))
    assert e.value.reason == "non_finite"
    with pytest.raises(rtomo.InvalidFrame) as e:
        scan.projection(0, np.zeros((1, 8), np.uint16))
    assert e.value.reason == "dtype_mismatch"
    # big-endian data of a protocol type is sent little-endian
    assert rtomo.encode(np.arange(3, dtype=">u2")) == \
        np.arange(3, dtype="<u2").tobytes()
    client.abort("f64")


def test_bad_field_raises_rejected_with_the_daemons_reason(client):
    client.scan("narrow", detector=(1, 4), projections=10, dtype="float32")
    with pytest.raises(rtomo.Rejected) as e:
        client.wait_event("scan_started", scan="narrow", timeout=10)
    assert e.value.reason == "bad_field"
    assert "detector.width" in e.value.message
    print("rejected: %s" % e.value)
    with pytest.raises(rtomo.ScanFailed) as e:
        client.wait_scan("narrow", timeout=10)
    assert e.value.reason == "bad_field"
    assert e.value.outcome["state"] == "refused"


def test_frames_rejected_by_the_daemon(client):
    """Frames sent unchecked (check=False): wrong shape, wrong dtype and
    NaN are rejected with their reason and frame index."""
    scan = client.scan("rej", detector=(16, 2), projections=3,
                       dtype="float32", check=False)
    client.wait_event("scan_started", scan="rej", timeout=10)
    cases = [(np.zeros((2, 15), np.float32), "shape_mismatch"),
             (np.zeros((2, 16), np.uint16), "dtype_mismatch"),
             (np.full((2, 16), np.inf, np.float32), "non_finite")]
    for index, (frame, reason) in enumerate(cases):
        scan.projection(index, frame)
        with pytest.raises(rtomo.Rejected) as e:
            client.wait_event("scan_complete", scan="rej", timeout=10)
        assert e.value.reason == reason
        assert e.value.index == index
        assert e.value.scan == "rej" and e.value.message
    scan.end()
    with pytest.raises(rtomo.ScanFailed) as e:
        client.wait_scan("rej", timeout=30)
    outcome = e.value.outcome
    assert outcome["rejected"] == 3 and outcome["missing"] == 3
    assert outcome["rejects"] == {"shape_mismatch": 1, "dtype_mismatch": 1,
                                  "non_finite": 1}


def test_control_errors(client):
    with pytest.raises(rtomo.ControlError) as e:
        client.set_config({"engine.backend": "cuda"})
    assert e.value.reason == "bad_argument"
    assert "engine.backend" in e.value.message
    with pytest.raises(rtomo.ControlError) as e:
        client.control.request({"cmd": "no-such-command"})
    assert e.value.reason == "unknown_command"
    with pytest.raises(rtomo.ControlError) as e:
        client.abort("never-begun")
    assert e.value.reason in ("bad_state", "bad_argument")


def test_a_control_timeout_recreates_the_socket(daemon):
    """A request that times out raises Timeout; the next one works."""
    ctl = rtomo.Control(daemon.control, timeout=0.0)
    with pytest.raises(rtomo.Timeout):
        ctl.status()
    ctl.timeout = 10.0
    assert ctl.ping()["pong"] is True
    ctl.close()
