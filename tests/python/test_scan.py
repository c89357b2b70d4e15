"""Tomography scans pushed with the rtomo package to the real rtomod (CPU
backend), slices received as numpy arrays and checked against an
independent numpy FBP (PROTOCOL.md 3.10) and the phantom's attenuation."""
import numpy as np
import pytest

import phantom

W, ROWS, N = 64, 2, 90
ANGLES = np.arange(N) * 180.0 / N


def check_slices(images, reference, rows):
    """Every selected row arrived once, as 64x64 float32, equal to the
    double-precision reference to float32 rounding."""
    assert sorted(im.slice for im in images.values()) == rows
    scale = np.abs(reference).max()
    worst = 0.0
    for i, im in images.items():
        assert im.index == i and im.count == len(rows)
        assert im.data.shape == (W, W) and im.data.dtype == np.float32
        assert im.roi == [0, 0, W, W]
        worst = max(worst, np.abs(im.data - reference).max() / scale)
        # the header's statistics are the image's
        assert im["min"] == pytest.approx(float(im.data.min()), rel=1e-5)
        assert im["max"] == pytest.approx(float(im.data.max()), rel=1e-5)
    return worst


def test_float32_line_integrals_match_numpy_fbp(client):
    """float32 line integrals, no flats: the daemon's slices equal the
    numpy FBP of the same sinogram to 1e-5 of the peak (float32 sums of
    90 projections), and the big disc's interior its attenuation 0.010
    within 3 % (the discretisation of 90 angles on 64 bins)."""
    sino = phantom.sinogram(W, ANGLES).astype(np.float32)
    stack = np.repeat(sino[:, None, :], ROWS, axis=1)
    outcome = client.push_scan("f32", stack, angle_step=180.0 / N,
                               reconstruction={"filter": "ram-lak"})
    assert outcome["state"] == "complete" and outcome["images"] == ROWS
    images = client.images("f32", timeout=30)
    reference = phantom.fbp(sino.astype(np.float64), ANGLES)
    worst = check_slices(images, reference, list(range(ROWS)))
    print("float32 scan: worst |daemon - numpy| / peak = %.2e" % worst)
    assert worst < 1e-5
    truth = phantom.truth(W)
    plain = phantom.interior(W) & (truth == 0.010)
    mean = images[0].data[plain].mean()
    print("big disc interior: %.5f (true 0.010)" % mean)
    assert mean == pytest.approx(0.010, rel=0.03)
    assert client.wait_event("scan_complete", scan="f32", timeout=10)


def test_uint16_darks_flats_over_two_connections(daemon):
    """uint16 counts with darks and flats, spread over 2 ingest
    connections (the client waits for the begin and for every frame
    before the end): the slices equal the numpy FBP of the same counts
    normalised as p = -ln((raw - dark) / (flat - dark))."""
    c = daemon.client(connections=2)
    try:
        dark, flat = 100.0, 20000.0
        sino = phantom.sinogram(W, ANGLES)
        raw = np.round(dark + (flat - dark) * np.exp(-sino)).astype(np.uint16)
        stack = np.repeat(raw[:, None, :], ROWS, axis=1)
        darks = np.full((2, ROWS, W), dark, np.uint16)
        flats = np.full((3, ROWS, W), flat, np.uint16)
        scan = c.scan("u16", detector=(W, ROWS), projections=N,
                      dtype="uint16", darks=2, flats=3,
                      reconstruction={"slices": [1]})
        started = c.wait_event("scan_started", scan="u16", timeout=10)
        assert started.reason in ("streaming", "streaming_partial",
                                  "after_scan")
        scan.darks(darks)
        scan.flats(flats)
        scan.projections(stack)
        scan.end()
        outcome = scan.wait(timeout=30)
        assert outcome["frames"] == 2 + 3 + N
        p = -np.log((raw.astype(np.float64) - dark) / (flat - dark))
        images = c.images("u16", timeout=30)
        worst = check_slices(images, phantom.fbp(p, ANGLES), [1])
        print("uint16 scan over 2 connections: worst error / peak %.2e"
              % worst)
        assert worst < 1e-5
    finally:
        c.close()


def test_uint8_with_explicit_angles_and_axis(client):
    """uint8 frames, the angles as a list (degrees) and the axis given in
    bins: slices equal the numpy FBP at that axis."""
    axis = 31.0
    angles = ANGLES + 0.0
    sino = phantom.sinogram(W, angles, axis=axis)
    raw = np.round(250 * np.exp(-sino)).astype(np.uint8)
    stack = raw[:, None, :]
    outcome = client.push_scan("u8", stack, flats=np.full((1, 1, W), 250,
                                                          np.uint8),
                               angles=angles, axis=axis)
    assert outcome["images"] == 1
    p = -np.log(np.maximum(raw.astype(np.float64) / 250.0, 1e-6))
    images = client.images("u8", timeout=30)
    worst = check_slices(images, phantom.fbp(p, angles, axis=axis), [0])
    print("uint8 scan: worst error / peak %.2e" % worst)
    assert worst < 1e-5
    assert images[0]["axis"] == pytest.approx(axis)


def test_continuous_mode_windows(client):
    """mode continuous: a window of N projections after every 45; the
    first two windows' slices carry frame 0 and 1 and their projection
    ranges, and equal the numpy FBP of the window."""
    angles = np.arange(N + 45) * 180.0 / N
    sino = phantom.sinogram(W, angles).astype(np.float32)
    scan = client.scan("cont", detector=(W, 1), projections=N,
                       dtype="float32", mode="continuous", every=45,
                       angle_step=180.0 / N)
    for i in range(N + 45):
        scan.projection(i, sino[i][None, :])
    w0 = client.images("cont", frame=0, timeout=30)
    w1 = client.images("cont", frame=1, timeout=30)
    scan.end()
    assert (w0[0]["projection_first"], w0[0]["projection_last"]) == (0, N - 1)
    assert (w1[0]["projection_first"], w1[0]["projection_last"]) == (45,
                                                                     N + 44)
    for w, first in ((w0, 0), (w1, 45)):
        window = slice(first, first + N)
        reference = phantom.fbp(sino[window].astype(np.float64),
                                angles[window])
        err = np.abs(w[0].data - reference).max() / np.abs(reference).max()
        print("continuous window %d: error / peak %.2e" % (w[0].frame, err))
        assert err < 1e-5, err
