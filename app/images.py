"""PNG bytes from RGB arrays and back, with numpy and zlib only (no imaging library): the
pictures kinds draw server-side (A3DS scenes, STS frame strips) are small and uncompressed
enough that the simplest PNG (8-bit truecolour, no filter) is the right one."""

from __future__ import annotations

import struct
import zlib

import numpy as np

SIGNATURE = b"\x89PNG\r\n\x1a\n"


def encode_png(rgb: np.ndarray) -> bytes:
    """An RGB uint8 array (height, width, 3) as PNG bytes; the same array, the same bytes."""
    if rgb.dtype != np.uint8 or rgb.ndim != 3 or rgb.shape[2] != 3:
        raise ValueError(f"expected a (height, width, 3) uint8 array, got {rgb.shape} {rgb.dtype}")
    h, w, _ = rgb.shape
    raw = np.zeros((h, 1 + w * 3), dtype=np.uint8)  # each scanline starts with filter type 0
    raw[:, 1:] = rgb.reshape(h, w * 3)

    header = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)
    return (SIGNATURE + _chunk(b"IHDR", header)
            + _chunk(b"IDAT", zlib.compress(raw.tobytes(), 6)) + _chunk(b"IEND", b""))


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


PAD_CHUNK = 12  # a chunk's length, type and CRC


def pad_png(png: bytes, size: int) -> bytes:
    """The same picture in exactly `size` bytes: a private ancillary chunk ("prOc", which
    decoders skip) of zeros before IEND. `size` must leave room for the chunk itself."""
    room = size - len(png) - PAD_CHUNK
    if room < 0:
        raise ValueError(f"a PNG of {len(png)} bytes cannot be padded to {size}")
    end = len(png) - PAD_CHUNK  # IEND is the last chunk, with no data
    if png[end + 4:end + 8] != b"IEND":
        raise ValueError("not a PNG ending in IEND")
    return png[:end] + _chunk(b"prOc", bytes(room)) + png[end:]


def decode_png(data: bytes) -> np.ndarray:
    """The inverse of encode_png for the PNGs it writes (tests, checks of stored pictures)."""
    if data[:8] != SIGNATURE:
        raise ValueError("not a PNG")
    pos, idat, w, h = 8, b"", 0, 0
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            w, h, depth, colour = struct.unpack(">IIBB", body[:10])
            if (depth, colour) != (8, 2):
                raise ValueError("only 8-bit RGB PNGs are read")
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = np.frombuffer(zlib.decompress(idat), dtype=np.uint8).reshape(h, 1 + w * 3)
    if raw[:, 0].any():
        raise ValueError("filtered scanlines are not read")
    return raw[:, 1:].reshape(h, w, 3).copy()
