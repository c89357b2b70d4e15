"""pytest fixtures: the real rtomod on free loopback ports, CPU backend.

The daemon is $RTOMOD, else $top_builddir/rtomod, else ./rtomod (as
tests/daemon_process.c finds it).  Ports come from the kernel as free;
another test running in parallel may take one before the daemon binds it
("Address already in use"), so a daemon that exits during start-up is
started again on fresh ports (3 attempts), as the C harness does.
"""
import os
import socket
import subprocess
import time

import pytest

import rtomo

START_ATTEMPTS = 3
START_TIMEOUT = 20.0


def daemon_path():
    path = os.environ.get("RTOMOD")
    if not path:
        path = os.path.join(os.environ.get("top_builddir", "."), "rtomod")
    return os.path.abspath(path)


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Daemon:
    """rtomod as a child process: its endpoints, ``client()``, ``stop()``."""

    def __init__(self, args=(), curve=None):
        self.args = list(args)
        self.curve = curve
        self.proc = None
        self.log = None

    def start(self):
        path = daemon_path()
        if not os.access(path, os.X_OK):
            pytest.fail("no rtomod at %s (set RTOMOD or top_builddir)" % path)
        error = ""
        for attempt in range(START_ATTEMPTS):
            ports = [free_port() for _ in range(3)]
            self.ingest, self.publish, self.control = (
                "tcp://127.0.0.1:%d" % p for p in ports)
            argv = [path, "--ingest", self.ingest, "--publish", self.publish,
                    "--control", self.control, "--backend", "cpu",
                    "--cpu-threads", "2", "--set", "telemetry.interval_ms=50",
                    ] + self.args
            if self.log:
                self.log.close()
            self.log = open("rtomod-pytest-%d.log" % os.getpid(), "a")
            self.proc = subprocess.Popen(argv, stdout=self.log,
                                         stderr=subprocess.STDOUT)
            ctl = rtomo.Control(self.control, timeout=0.5, curve=self.curve)
            deadline = time.monotonic() + START_TIMEOUT
            try:
                while time.monotonic() < deadline:
                    if self.proc.poll() is not None:
                        error = "rtomod exited during start-up (status %d)" \
                            % self.proc.returncode
                        break
                    try:
                        ctl.ping()
                        return self
                    except rtomo.Timeout:
                        continue
                else:
                    self.stop()
                    pytest.fail("rtomod does not answer ping on %s"
                                % self.control)
            finally:
                ctl.close()
        pytest.fail("cannot start %s: %s" % (path, error))

    def client(self, **kw):
        kw.setdefault("curve", self.curve)
        return rtomo.Client(ingest=self.ingest, publish=self.publish,
                            control=self.control, **kw)

    def stop(self, timeout=20.0):
        """SIGTERM, and the exit status (-9 after a SIGKILL past
        ``timeout`` s).  The daemon's output is in rtomod-pytest-PID.log
        in the working directory."""
        try:
            if self.proc and self.proc.poll() is None:
                self.proc.terminate()
                try:
                    return self.proc.wait(timeout)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
                    return -9
            return self.proc.returncode if self.proc else None
        finally:
            if self.log:
                self.log.close()
                self.log = None


@pytest.fixture(scope="module")
def daemon():
    d = Daemon().start()
    yield d
    assert d.stop() == 0, "rtomod exit status after SIGTERM"


@pytest.fixture
def client(daemon):
    c = daemon.client()
    yield c
    c.close()
