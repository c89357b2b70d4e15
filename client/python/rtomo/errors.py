"""Exceptions of the rtomo package.

Every error the package raises derives from :class:`RtomoError`, which
carries the daemon's short code in ``.reason`` (a reject name of
PROTOCOL.md section 4, a control error code of section 7, or a scan
outcome code of section 3.9) and its sentence in ``.message``.
"""


class RtomoError(Exception):
    """Base class: ``reason`` is a short code, ``message`` a sentence."""

    def __init__(self, reason, message="", **details):
        self.reason = reason
        self.message = message
        self.details = details
        text = "%s: %s" % (reason, message) if message else str(reason)
        super().__init__(text)


class InvalidFrame(RtomoError, ValueError):
    """A frame or field this package refuses to send because the daemon
    would refuse it: an unsupported dtype (``reason`` ``"bad_dtype"``), a
    dtype or shape that differs from the scan's (``"dtype_mismatch"``,
    ``"shape_mismatch"``), NaN or infinity in float32 data
    (``"non_finite"``), a malformed field (``"bad_field"``)."""


class Rejected(RtomoError):
    """The daemon rejected an ingest message (an ``event`` of kind
    ``rejected``, PROTOCOL.md 4): ``reason`` is the reject name
    (``"bad_field"``, ``"over_budget"``, ...), ``message`` the daemon's
    sentence, ``scan`` and ``index`` what it concerned, ``event`` the
    event itself."""

    def __init__(self, reason, message="", scan=None, index=-1, event=None):
        super().__init__(reason, message, scan=scan, index=index)
        self.scan = scan
        self.index = index
        self.event = event


class ControlError(RtomoError):
    """A control request answered ``"ok": false`` (PROTOCOL.md 7):
    ``reason`` is the error code (``"bad_argument"``, ``"bad_state"``,
    ...), ``reply`` the whole reply."""

    def __init__(self, reason, message="", reply=None):
        super().__init__(reason, message)
        self.reply = reply


class ScanFailed(RtomoError):
    """A scan did not succeed by PROTOCOL.md 3.9's rule (complete, nothing
    rejected, dropped or missing, not incomplete).  ``reason`` is the
    daemon's code (the reject name of a refused begin, ``"aborted"``,
    ``"idle_timeout"``, ...) or the state, ``message`` a sentence,
    ``outcome`` the daemon's ``scan`` object."""

    def __init__(self, reason, message="", outcome=None):
        super().__init__(reason, message)
        self.outcome = outcome


class Aborted(ScanFailed):
    """A ``scan_aborted`` event arrived while waiting for another."""


class Timeout(RtomoError, TimeoutError):
    """Nothing came within the time allowed (``reason`` ``"timeout"``).
    A control socket that timed out is recreated before the next request."""

    def __init__(self, message):
        super().__init__("timeout", message)
