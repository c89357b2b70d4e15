"""A minimal PNG encoder (PNG 1.2, ISO/IEC 15948) over zlib: greyscale,
8 or 16 bits, no interlace.  Enough to send an image to a browser
without Pillow."""
import struct
import zlib

import numpy as np

_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _chunk(kind, data):
    body = kind + data
    return (struct.pack(">I", len(data)) + body
            + struct.pack(">I", zlib.crc32(body) & 0xffffffff))


def encode_grey(image, level=3):
    """PNG bytes of a 2-D ``uint8`` or ``uint16`` array (row 0 on top).
    Each row gets filter type 1 (Sub: the difference from the pixel to its
    left), which makes smooth images compress several times better than
    the raw rows."""
    a = np.asarray(image)
    if a.ndim != 2 or a.shape[0] < 1 or a.shape[1] < 1:
        raise ValueError("encode_grey wants a non-empty 2-D array")
    if a.dtype == np.uint8:
        depth, rows = 8, a
        sub = np.empty_like(rows)
        sub[:, 0] = rows[:, 0]
        sub[:, 1:] = rows[:, 1:] - rows[:, :-1]         # wraps mod 256
        raw = sub
    elif a.dtype == np.uint16:
        depth = 16
        big = a.astype(">u2").view(np.uint8).reshape(a.shape[0], -1)
        sub = np.empty_like(big)                 # Sub filter: bpp = 2
        sub[:, :2] = big[:, :2]
        sub[:, 2:] = big[:, 2:] - big[:, :-2]
        raw = sub
    else:
        raise ValueError("encode_grey wants uint8 or uint16, not %s" % a.dtype)
    height, width = a.shape
    lines = np.empty((height, raw.shape[1] + 1), np.uint8)
    lines[:, 0] = 1                              # filter type Sub
    lines[:, 1:] = raw
    ihdr = struct.pack(">IIBBBBB", width, height, depth, 0, 0, 0, 0)
    return (_SIGNATURE + _chunk(b"IHDR", ihdr)
            + _chunk(b"IDAT", zlib.compress(lines.tobytes(), level))
            + _chunk(b"IEND", b""))


def decode_grey(data):
    """The inverse of :func:`encode_grey` for its own output (8/16-bit
    grey, non-interlaced, any filter type); used by the tests."""
    if data[:8] != _SIGNATURE:
        raise ValueError("not a PNG")
    pos, idat, ihdr = 8, b"", None
    while pos < len(data):
        n, = struct.unpack(">I", data[pos:pos + 4])
        kind = data[pos + 4:pos + 8]
        body = data[pos + 8:pos + 8 + n]
        pos += 12 + n
        if kind == b"IHDR":
            ihdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
    width, height, depth, colour = ihdr[:4]
    if colour != 0 or depth not in (8, 16):
        raise ValueError("only 8/16-bit grey")
    bpp = depth // 8
    stride = width * bpp
    buf = np.frombuffer(zlib.decompress(idat), np.uint8).reshape(height,
                                                                 stride + 1)
    out = np.zeros((height, stride), np.uint8)
    prev = np.zeros(stride, np.int32)
    for r in range(height):
        f, line = buf[r, 0], buf[r, 1:].astype(np.int32)
        cur = np.zeros(stride, np.int32)
        for i in range(stride):
            a = cur[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 0:
                pred = 0
            elif f == 1:
                pred = a
            elif f == 2:
                pred = b
            elif f == 3:
                pred = (a + b) // 2
            else:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
            cur[i] = (line[i] + pred) & 0xff
        out[r] = cur
        prev = cur
    if depth == 8:
        return out
    return out.view(">u2").reshape(height, width).astype(np.uint16)
