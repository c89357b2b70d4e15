"""Losses found from seq (PROTOCOL.md 6.4): the bookkeeping against a
publisher of our own that skips numbers, then a real daemon that drops
messages for a subscriber that does not read."""
import json
import time
import warnings

import numpy as np
import zmq

import rtomo
from conftest import Daemon


def test_seq_tracker():
    t = rtomo.SeqTracker()
    assert t.see("slice", 0) is None and t.see("slice", 1) is None
    gap = t.see("slice", 5)
    assert (gap.topic, gap.lost, gap.after, gap.before) == ("slice", 3, 1, 5)
    assert t.see("event", 7) is None            # first of its topic
    assert t.see("slice", 6, source="other") is None   # per publisher
    restart = t.see("slice", 0)
    assert restart.restarted and restart.lost == 0
    assert t.gaps == {"slice": 3} and t.lost == 3 and t.restarts == 1


def test_subscriber_reports_gaps_from_a_publisher():
    """A PUB of our own sends events with seq 0, 1, 4, 5, 9 and a slice
    with seq 0: the subscriber yields Gap(2) before seq 4 and Gap(3)
    before seq 9, counts 5 lost, marks the messages, and warns."""
    ctx = zmq.Context()
    pub = ctx.socket(zmq.PUB)
    port = pub.bind_to_random_port("tcp://127.0.0.1")
    sub = rtomo.Subscriber("tcp://127.0.0.1:%d" % port, context=ctx,
                           yield_gaps=True, warn_gaps=True)
    time.sleep(0.3)                             # the subscription arrives
    for seq in (0, 1, 4, 5, 9):
        pub.send_multipart([b"event", json.dumps(
            {"protocol": 1, "type": "event", "event": "x", "scan": None,
             "index": -1, "reason": "", "message": "", "seq": seq}).encode(),
            b""])
    pub.send_multipart([b"slice", json.dumps(
        {"protocol": 1, "type": "slice", "scan": "s", "width": 3,
         "height": 2, "dtype": "float32", "index": 0, "count": 1,
         "seq": 0}).encode(), np.arange(6, dtype="<f4").tobytes()])
    got = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(8):
            got.append(sub.recv(timeout=5))
    kinds = [(type(m).__name__, m.lost if isinstance(m, rtomo.Gap)
              else m.seq) for m in got]
    assert kinds == [("Event", 0), ("Event", 1), ("Gap", 2), ("Event", 4),
                     ("Event", 5), ("Gap", 3), ("Event", 9), ("Image", 0)]
    assert got[3].lost == 2 and got[6].lost == 3 and got[4].lost == 0
    assert sub.gaps == {"event": 5} and sub.lost == 5
    assert sum(issubclass(w.category, rtomo.GapWarning) for w in caught) == 2
    img = got[7]
    assert img.data.shape == (2, 3) and img.data[1, 2] == 5.0
    sub.close()
    pub.close(linger=0)
    ctx.term()


def test_a_subscriber_that_does_not_read_sees_its_losses():
    """A daemon whose queue per subscriber holds 2 messages
    (publish.sndhwm=2) publishes 32 slices of 512x512 (32 MB) to a
    subscriber with a receive queue of 2 that does not read meanwhile:
    messages are lost, and received + lost = published."""
    d = Daemon(["--set", "publish.sndhwm=2"]).start()
    c = d.client(topics=("event",))
    sub = rtomo.Subscriber(d.publish, topics=("slice", "telemetry"),
                           rcvhwm=2)
    try:
        sub.wait_ready(5)
        W, rows, n = 512, 32, 8
        stack = np.zeros((n, rows, W), np.float32)
        stack[:, :, 200:300] = 1.0
        c.push_scan("flood", stack)
        c.wait_event("scan_complete", scan="flood", timeout=60)
        time.sleep(0.5)
        seqs = [m.seq for m in sub.messages(timeout=1.0)
                if m.topic == "slice"]
        # losses at the end of a burst show with the next message of the
        # topic: one more slice, of another scan, reveals them
        c.push_scan("after", np.zeros((4, 1, 16), np.float32))
        while True:
            m = sub.recv(timeout=10)
            assert m is not None, "the last slice never came"
            if m.topic == "slice":
                seqs.append(m.seq)
                if m.scan == "after":
                    break
        received = len(seqs) - 1
        lost = sub.gaps["slice"]
        print("%d slices published: %d received, %d lost; daemon "
              "pub_dropped %d" % (rows, received, lost,
                                  c.status()["counters"]["pub_dropped"]))
        assert seqs[-1] == rows         # the flood's were seq 0 .. rows - 1
        assert lost > 0
        assert received + lost == rows
    finally:
        sub.close()
        c.close()
        assert d.stop() == 0
