"""Test senders of detector-native streams, written from the published
specifications alone (not from rtomod's code):

- DECTRIS Stream V2 (github.com/dectris/documentation, stream_v2/README.md
  and cbor/dectris-compression-tag.md): one CBOR map per ZeroMQ message,
  images as RFC 8746 typed arrays in a tag-40 multi-dimensional array,
  compressed as tag 56500 ["bslz4", element size, bytes] in the framing of
  the bitshuffle HDF5 filter;
- PSI htype "array-1.0" (github.com/paulscherrerinstitute/htypes): a JSON
  header and the raw image, as std-daq and areaDetector's NDPluginZMQ
  send them.

bslz4 here is numpy's bit transpose plus python3-lz4's raw LZ4 blocks;
test_detector_inputs.py checks it against Debian's bitshuffle package
where that is installed.
"""
import json
import struct

import cbor2
import lz4.block
import numpy as np
import zmq

TYPED_ARRAY_TAG = {np.dtype("uint8"): 64, np.dtype("<u2"): 69,
                   np.dtype("<u4"): 70}


def bit_transpose(block):
    """bitshuffle's transpose of one block (n elements, n % 8 == 0): bit
    row 8 j + b holds bit b of byte j of every element, 8 elements per
    byte, the first element in the least significant bit."""
    n, size = block.size, block.dtype.itemsize
    assert n % 8 == 0
    bits = np.unpackbits(block.view(np.uint8).reshape(n, size), axis=1,
                         bitorder="little").reshape(n, size, 8)
    rows = bits.transpose(1, 2, 0).reshape(size * 8, n // 8, 8)
    return np.packbits(rows, axis=2, bitorder="little").tobytes()


def bslz4(image, block_elements=None):
    """The bytes of ``image`` as bitshuffle-LZ4 with the HDF5 filter's
    12-byte header: uint64 BE size, uint32 BE block size in bytes, then per
    block uint32 BE compressed size and the LZ4 block; elements beyond the
    last group of 8 are copied as they are."""
    flat = np.ascontiguousarray(image).reshape(-1)
    size = flat.dtype.itemsize
    if block_elements is None:      # bitshuffle's default: 8 KiB blocks
        block_elements = max(128, (8192 // size) // 8 * 8)
    out = [struct.pack(">QI", flat.size * size, block_elements * size)]

    def block(part):
        packed = lz4.block.compress(bit_transpose(part), store_size=False)
        out.append(struct.pack(">I", len(packed)) + packed)

    i = 0
    while flat.size - i >= block_elements:
        block(flat[i:i + block_elements])
        i += block_elements
    last = (flat.size - i) // 8 * 8
    if last:
        block(flat[i:i + last])
        i += last
    out.append(flat[i:].tobytes())
    return b"".join(out)


def typed_image(image, compress=False, block_elements=None):
    """tag 40 [[height, width], typed array], optionally bslz4."""
    image = np.ascontiguousarray(image, dtype=image.dtype.newbyteorder("<"))
    tag = TYPED_ARRAY_TAG[image.dtype]
    if compress:
        content = cbor2.CBORTag(56500, ["bslz4", image.dtype.itemsize,
                                        bslz4(image, block_elements)])
    else:
        content = image.tobytes()
    return cbor2.CBORTag(40, [list(image.shape), cbor2.CBORTag(tag, content)])


def start_message(series, height, width, dtype, count, channels=("c0",)):
    return cbor2.dumps({
        "type": "start", "series_id": series,
        "series_unique_id": "rtomo-test-%d" % series,
        "image_size_x": width, "image_size_y": height,
        "image_dtype": np.dtype(dtype).name, "number_of_images": count,
        "channels": list(channels), "count_time": 0.001,
        "arm_date": cbor2.CBORTag(0, "2026-11-24T06:00:00Z")})


def image_message(series, image_id, channels, compress=False, user_data=None,
                  block_elements=None):
    """``channels``: {name: 2-D array}, in channel order."""
    msg = {"type": "image", "series_id": series,
           "series_unique_id": "rtomo-test-%d" % series,
           "image_id": image_id, "real_time": [1000, 1000000],
           "start_time": [image_id * 1000, 1000000],
           "stop_time": [image_id * 1000 + 1000, 1000000],
           "data": {name: typed_image(a, compress, block_elements)
                    for name, a in channels.items()}}
    if user_data is not None:
        msg["user_data"] = user_data
    return cbor2.dumps(msg)


def end_message(series):
    return cbor2.dumps({"type": "end", "series_id": series,
                        "series_unique_id": "rtomo-test-%d" % series})


def jsonhdr_message(frame, image, **extra):
    """[header, raw image] of htype array-1.0 (shape in z, y, x order)."""
    header = {"htype": "array-1.0", "type": image.dtype.name,
              "shape": list(image.shape), "frame": frame}
    header.update(extra)
    return [json.dumps(header).encode(), np.ascontiguousarray(image).tobytes()]


class Pusher:
    """A detector's PUSH socket connected to an rtomod input."""

    def __init__(self, endpoint, context=None):
        self.context = context or zmq.Context.instance()
        self.socket = self.context.socket(zmq.PUSH)
        self.socket.setsockopt(zmq.LINGER, 2000)
        self.socket.connect(endpoint)

    def send(self, message):
        if isinstance(message, list):
            self.socket.send_multipart(message)
        else:
            self.socket.send(message)

    def close(self):
        self.socket.close()
