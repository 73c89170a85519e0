"""What an annotator watches: every frame of a continuation's episode (context and
continuation) side by side in one PNG strip, stored once in the blob store under a key made
from its content, so the page loads one image and scrubs by moving it (no video codec, no
per-frame requests, and identical episodes share one file)."""

from __future__ import annotations

import hashlib
import struct
import zlib

import numpy as np

# Steps a strip may hold: BabyAI episodes end within a few hundred steps; a longer upload is
# refused before anything is rendered.
MAX_FRAMES = 1024


def encode_png(rgb: np.ndarray) -> bytes:
    """An RGB uint8 array (height, width, 3) as PNG bytes (8-bit truecolour, no filter):
    numpy and zlib only, so no imaging library is needed."""
    if rgb.dtype != np.uint8 or rgb.ndim != 3 or rgb.shape[2] != 3:
        raise ValueError(f"expected a (height, width, 3) uint8 array, got {rgb.shape} {rgb.dtype}")
    h, w, _ = rgb.shape
    raw = np.zeros((h, 1 + w * 3), dtype=np.uint8)  # each scanline starts with filter type 0
    raw[:, 1:] = rgb.reshape(h, w * 3)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
            + chunk(b"IDAT", zlib.compress(raw.tobytes(), 6)) + chunk(b"IEND", b""))


def decode_png(data: bytes) -> np.ndarray:
    """The inverse of encode_png for the PNGs it writes (tests, and checks of stored strips)."""
    if data[:8] != b"\x89PNG\r\n\x1a\n":
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


def strip(frames: list[np.ndarray]) -> np.ndarray:
    """Frames of one size, left to right."""
    if not frames:
        raise ValueError("no frames")
    if len(frames) > MAX_FRAMES:
        raise ValueError(f"{len(frames)} frames; at most {MAX_FRAMES}")
    return np.concatenate(frames, axis=1)


def strip_key(level: str, seed: int, actions: list[int], tile: int) -> str:
    """The blob key of an episode's strip: the same episode always renders the same frames."""
    digest = hashlib.sha256(f"{level}|{seed}|{tile}|{','.join(map(str, actions))}".encode()).hexdigest()
    return f"sts/frames/{digest[:2]}/{digest}.png"


def ensure_strip(recording, tile: int) -> str:
    """The blob key of a recording's strip, rendered by replaying it the first time it is asked
    for (the same episode always gives the same frames, so a stored strip is kept). ValueError
    for an episode longer than a strip holds."""
    from app.kinds.sts.recordings import replay
    from app.storage import get_store

    key = strip_key(recording.level, recording.seed, list(recording.actions), tile)
    if len(recording.actions) + 1 > MAX_FRAMES:
        raise ValueError(f"{len(recording.actions) + 1} frames; at most {MAX_FRAMES}")
    store = get_store()
    if not store.exists(key):
        frames = [s.frame for s in replay(recording, frames=True, tile_size=tile, check_all=False).steps]
        store.put(key, encode_png(strip(frames)), content_type="image/png")
    return key
