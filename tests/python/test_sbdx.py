"""An SBDX stream (PROTOCOL.md 3.7) pushed with the package: 10x8 holes,
a 16x8 detector, shift 4, five ratios (as tests/test_daemon_sbdx.c).  A
uniform input value v reconstructs, flat-fielded, to v at every pixel of
a plane's field of view and 0 outside; the composite takes its values
from the planes; depth names a plane or 65535."""
import numpy as np
import pytest

import rtomo

RATIOS = [0.8, 1.0, 1.25, 1.6, 2.1]


@pytest.mark.parametrize("dtype,value", [("uint8", 100), ("float32", 2.5)])
def test_uniform_frames(client, dtype, value):
    sid = "sbdx-" + dtype
    stream = client.sbdx(sid, holes=(10, 8), detector=(16, 8), shift=4,
                         ratios=RATIOS, dtype=dtype)
    frames = 2
    for f in range(frames):
        stream.frame(f, np.full((8, 10, 8, 16), value, dtype))
    with pytest.raises(rtomo.InvalidFrame):
        stream.frame(9, np.zeros((8, 10, 16, 8), dtype))
    stream.end()
    for f in range(frames):
        planes = client.images(sid, topic="plane", frame=f, timeout=30)
        composite = client.images(sid, topic="composite", frame=f,
                                  timeout=30)[0]
        depth = client.images(sid, topic="depth", frame=f, timeout=30)[0]
        assert sorted(planes) == list(range(len(RATIOS)))
        for k, plane in planes.items():
            assert plane.data.shape == (32, 40)       # m x holes
            assert plane["ratio"] == pytest.approx(RATIOS[k])
            inside = plane.data != 0
            assert inside.sum() > 0.25 * plane.data.size
            err = np.abs(plane.data[inside] / value - 1).max()
            assert err < 1e-5, (k, err)
        assert depth.data.dtype == np.uint16
        measured = depth.data != 65535
        assert (depth.data[measured] < len(RATIOS)).all()
        assert np.abs(composite.data[measured] / value - 1).max() < 1e-5
        assert (composite.data[~measured] == 0).all()
    outcome = stream.wait(timeout=30)
    assert outcome["kind"] == "sbdx" and outcome["frames"] == frames
    print("%s: %d frames, %d images, planes flat to 1e-5"
          % (sid, frames, outcome["images"]))


def test_uint16_planes_scale_back(client):
    stream = client.sbdx("sbdx-u16", holes=(10, 8), detector=(16, 8),
                         shift=4, ratio_range={"first": 1.0, "last": 2.0,
                                               "count": 3},
                         dtype="uint16",
                         output={"planes": "uint16", "u16_scale": 10.0,
                                 "composite": False})
    stream.frame(0, np.full((8, 10, 8, 16), 1000, np.uint16))
    stream.end()
    planes = client.images("sbdx-u16", topic="plane", timeout=30)
    for plane in planes.values():
        assert plane.data.dtype == np.uint16
        v = plane.values()
        inside = plane.data != 0
        assert np.abs(v[inside] - 1000).max() <= 0.1    # 1 / u16_scale
    stream.wait(timeout=30)
