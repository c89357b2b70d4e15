"""rtomo-view: a live view of rtomod in the browser.

    rtomo-view --publish tcp://recon1:5556 --control tcp://recon1:5557
    # then open http://127.0.0.1:8765/ (or python3 -m rtomo.view ...)

It subscribes to rtomod's publish socket and asks the control socket for
``status``, and serves one page (HTML, vanilla JavaScript and canvas; no
framework, nothing fetched from the internet) that shows, live: the
latest slice, preview, SBDX composite, depth map and planes, each with
contrast controls; the scan's progress; plots over time of ingest rate,
GU/s, latency, queues and drop/reject counters from telemetry; and the
event log.  docs/rtomod.md, "Watching it in a browser", is the operator's
guide.

**Why it is part of the rtomo package** rather than a program of its
own: scientists install one thing (``pip install client/python``, or the
Debian python3-zmq and python3-numpy it needs anyway) and get the
client, its subscriber and the viewer together; the view reuses
:class:`rtomo.Subscriber` (parsing of PROTOCOL.md 6, per-topic ``seq``
bookkeeping and gap counting through :class:`rtomo.SeqTracker`) and
:class:`rtomo.Control` instead of writing them a second time, so a
protocol change is made in one place.

**Why its web server is the standard library's** (``http.server``'s
``ThreadingHTTPServer`` plus threads, the page polling a JSON state and
fetching PNG images): a beamline's control-room machines have no
internet and a Debian system; the package's only dependencies stay pyzmq
and numpy (already Debian packages there), with no web framework, no
WebSocket library and no imaging library (:mod:`rtomo.view.png` is a
minimal PNG encoder over :mod:`zlib`).  One operator, or a handful, look
at a page that changes a few times a second: a threaded standard-library
server is ample for that, and polling is as simple as it gets and
survives proxies and reconnects; Server-Sent Events would save little.

**It never slows rtomod down.**  rtomod's PUB socket never blocks (it
drops for a subscriber that falls behind, PROTOCOL.md 6.4); this view
keeps up by doing nothing on receipt but store a reference to the newest
image of each topic (a latest-only buffer: one image per topic, per plane
number for planes), with a small receive high-water mark on the image
socket (``--hwm``, default 4), and telemetry and events on a socket of
their own so that a burst of slices cannot push them out.  Contrast
mapping and PNG encoding happen only when a browser asks, for the image
it is shown.  The page says how many images the view skipped (replaced
by a newer one before any browser fetched them), how many messages the
daemon's PUB lost for this view (``seq`` gaps) and the daemon's own
``pub_dropped``.
"""
from .server import Hub, ViewServer, contrast_limits, main, to_grey

__all__ = ["Hub", "ViewServer", "contrast_limits", "main", "to_grey"]
