"""rtomo: the Python client of rtomod, the rtomo real-time tomography
reconstruction daemon, written from protocol/PROTOCOL.md.

- :class:`Client`: one daemon's ingest, publish and control sockets;
  ``scan()``/``sbdx()`` push, ``wait_event()``, ``images()``, ``recv()``
  read, ``status()``, ``set_config()``, ``abort()``, ``wait_scan()`` ...
- :class:`Sender`, :class:`Scan`, :class:`SbdxStream` (ingest),
  :class:`Subscriber`, :class:`Image`, :class:`Event`, :class:`Telemetry`,
  :class:`Gap`, :class:`SeqTracker` (publish), :class:`Control` (control),
  :class:`Curve` (CURVE keys).
- Errors: :class:`RtomoError` (``.reason``, ``.message``) and its
  subclasses :class:`Rejected`, :class:`ControlError`,
  :class:`ScanFailed`, :class:`Aborted`, :class:`InvalidFrame`,
  :class:`Timeout`.

Units as on the wire: angles in degrees, axis positions and shifts in
detector bins, slices in attenuation per pixel.
"""
from .client import Client
from .control import Control, judge
from .errors import (Aborted, ControlError, InvalidFrame, Rejected,
                     RtomoError, ScanFailed, Timeout)
from .ingest import (DTYPES, PROTOCOL, Sender, Scan, SbdxStream, encode,
                     sbdx_begin_header, scan_begin_header, wire_dtype)
from .security import Curve, write_keypair
from .subscriber import (Event, Gap, GapWarning, Image, SeqTracker,
                         Subscriber, Telemetry, TOPICS, IMAGE_TOPICS, parse)

__version__ = "0.1.0"

__all__ = [
    "Client", "Control", "judge", "Sender", "Scan", "SbdxStream",
    "Subscriber", "Image", "Event", "Telemetry", "Gap", "GapWarning",
    "SeqTracker", "Curve", "write_keypair", "RtomoError", "Rejected",
    "ControlError", "ScanFailed", "Aborted", "InvalidFrame", "Timeout",
    "DTYPES", "PROTOCOL", "TOPICS", "IMAGE_TOPICS", "encode", "wire_dtype",
    "scan_begin_header", "sbdx_begin_header", "parse",
]
