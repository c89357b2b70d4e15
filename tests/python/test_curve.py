"""CURVE (PROTOCOL.md 1, "Authentication"): a daemon with a key pair and
a list of client keys; the package's Curve keys reach it, a client
without keys gets nothing and is counted in auth_refused."""
import os
import shutil

import numpy as np
import pytest
import zmq

import rtomo
from conftest import Daemon

pytestmark = pytest.mark.skipif(not zmq.has("curve"),
                                reason="this libzmq has no CURVE")


def test_keys_from_files_reach_the_daemon(tmp_path):
    os.chmod(tmp_path, 0o700)
    clients = tmp_path / "clients"
    clients.mkdir(mode=0o700)
    rtomo.write_keypair(str(tmp_path / "rtomod"))
    rtomo.write_keypair(str(tmp_path / "camera"))
    rtomo.write_keypair(str(tmp_path / "stranger"))    # not listed
    shutil.copy(tmp_path / "camera.key", clients / "camera.key")
    server_key = str(tmp_path / "rtomod.key")
    listed = rtomo.Curve.from_files(server_key,
                                    str(tmp_path / "camera.key_secret"))
    stranger = rtomo.Curve.from_files(server_key,
                                      str(tmp_path / "stranger.key_secret"))
    d = Daemon(["--set", "security.curve_secret_key_file=%s"
                % (tmp_path / "rtomod.key_secret"),
                "--set", "security.client_keys=%s" % clients],
               curve=listed).start()
    try:
        c = d.client()
        stack = np.zeros((18, 1, 32), np.float32)
        stack[:, :, 12:20] = 0.5
        assert c.push_scan("secure", stack)["images"] == 1
        assert c.images("secure", timeout=10)[0].data.shape == (32, 32)
        for keys in (None, stranger):       # no key; a key not listed
            ctl = rtomo.Control(d.control, timeout=0.5, curve=keys)
            with pytest.raises(rtomo.Timeout):
                ctl.ping()
            ctl.close()
        refused = c.status()["counters"]["auth_refused"]
        print("auth_refused: %d" % refused)
        assert refused >= 2
        c.close()
    finally:
        assert d.stop() == 0
