"""PNG bytes from RGB arrays and back, with numpy and zlib only (no imaging library): the
pictures kinds draw server-side (A3DS scenes, STS frame strips) are flat drawings, for which a
plain PNG (8-bit truecolour) with every scanline as its difference from the one above (the
"Up" filter) is the right one: an STS strip deflates to a third of its unfiltered size, in less
time."""

from __future__ import annotations

import struct
import zlib

import numpy as np

SIGNATURE = b"\x89PNG\r\n\x1a\n"
NONE, UP = 0, 2  # PNG scanline filter types (the spec's section 9.2): what we read; UP is what we write


def _scanlines(rgb: np.ndarray) -> tuple[bytes, bytes]:
    """(the IHDR data, the filtered scanlines) of an RGB uint8 array (height, width, 3)."""
    if rgb.dtype != np.uint8 or rgb.ndim != 3 or rgb.shape[2] != 3:
        raise ValueError(f"expected a (height, width, 3) uint8 array, got {rgb.shape} {rgb.dtype}")
    h, w, _ = rgb.shape
    rows = rgb.reshape(h, w * 3)
    raw = np.empty((h, 1 + w * 3), dtype=np.uint8)
    raw[:, 0] = UP  # each scanline starts with its filter type
    raw[0, 1:] = rows[0]  # the row above the first is zeros
    raw[1:, 1:] = rows[1:] - rows[:-1]  # uint8: modulo 256, as the filter is defined
    return struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0), raw.tobytes()


def _png(header: bytes, stream: bytes) -> bytes:
    return SIGNATURE + _chunk(b"IHDR", header) + _chunk(b"IDAT", stream) + _chunk(b"IEND", b"")


def encode_png(rgb: np.ndarray, size: int | None = None) -> bytes:
    """An RGB uint8 array (height, width, 3) as PNG bytes; the same array, the same bytes.
    With `size`, exactly `size` bytes (`_padded_stream`): no field of the file (the chunk
    lengths included) then tells one picture's compressibility from another's."""
    header, raw = _scanlines(rgb)
    if size is None:
        return _png(header, zlib.compress(raw, 6))
    return _png(header, _padded_stream(raw, _deflated(raw), size - len(SIGNATURE) - 3 * CHUNK - len(header)))


def encode_pngs_of_one_size(pictures: list[np.ndarray]) -> list[bytes]:
    """The pictures as PNGs of one byte size, the least they all fit in, each compressed once."""
    parts = [(header, raw, _deflated(raw)) for header, raw in map(_scanlines, pictures)]
    stream = max(2 + len(body) + 4 for _, _, body in parts) + MIN_PAD
    return [_png(header, _padded_stream(raw, body, stream)) for header, raw, body in parts]


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


CHUNK = 12  # a chunk's length, type and CRC
MIN_PAD = 15  # _empty_blocks reaches every padding from this many bytes up


def _empty_blocks(n: int) -> bytes:
    """Exactly `n` (>= MIN_PAD) bytes of empty deflate blocks, the last one final, from a byte
    boundary: an empty stored block is 5 bytes, and one or two empty fixed-Huffman blocks
    (10 bits each) before it make 6 or 7; the final stored block is 5, and any n - 5 >= 10 is
    a sum of 5s, 6s and 7s."""
    if n < MIN_PAD:
        raise ValueError(f"{n} bytes of padding; at least {MIN_PAD}")
    rest = (n - 5) % 5
    units = {0: [], 1: [6], 2: [6, 6], 3: [6, 7], 4: [7, 7]}[rest]
    units += [5] * ((n - 5 - sum(units)) // 5)
    bits: list[int] = []

    def stored(final: int) -> None:  # BFINAL, BTYPE 00, on to the byte, LEN 0, NLEN 0xffff
        bits.extend([final, 0, 0])
        bits.extend([0] * (-len(bits) % 8))
        bits.extend([0] * 16 + [1] * 16)

    for unit in units:
        bits.extend([0, 1, 0, 0, 0, 0, 0, 0, 0, 0] * (unit - 5))  # BTYPE 01 (LSB first), end of block
        stored(0)
    stored(1)
    out = bytes(sum(b << i for i, b in enumerate(bits[k : k + 8])) for k in range(0, len(bits), 8))
    assert len(out) == n
    return out


def _deflated(data: bytes) -> bytes:
    """`data` deflated and flushed to a byte boundary, with no final block yet."""
    c = zlib.compressobj(6, zlib.DEFLATED, -15)
    return c.compress(data) + c.flush(zlib.Z_SYNC_FLUSH)


def _padded_stream(data: bytes, body: bytes, size: int) -> bytes:
    """`data` (deflated as `body`) as a zlib stream of exactly `size` bytes: empty deflate
    blocks, which inflate to nothing, fill what the body leaves. ValueError when it leaves
    fewer than MIN_PAD bytes."""
    room = size - 2 - len(body) - 4
    if room < MIN_PAD:
        raise ValueError(
            f"{len(data)} bytes compress to {2 + len(body) + 4 + MIN_PAD} or more with padding; not {size}"
        )
    padding = _empty_blocks(room)
    # What is ours to check is the padding: it inflates to nothing and ends the stream. The body
    # is zlib's, flushed to a byte boundary, so the whole inflates to `data` (inflating it all
    # again was a third of a strip's encoding time; tests/unit/test_sts_frames.py decodes them).
    tail = zlib.decompressobj(-15)
    assert tail.decompress(padding) == b"" and tail.eof and not tail.unused_data
    return b"\x78\x9c" + body + padding + struct.pack(">I", zlib.adler32(data))


def decode_png(data: bytes) -> np.ndarray:
    """The inverse of encode_png for the PNGs it writes (tests, checks of stored pictures)."""
    if data[:8] != SIGNATURE:
        raise ValueError("not a PNG")
    pos, idat, w, h = 8, b"", 0, 0
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            w, h, depth, colour = struct.unpack(">IIBB", body[:10])
            if (depth, colour) != (8, 2):
                raise ValueError("only 8-bit RGB PNGs are read")
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = np.frombuffer(zlib.decompress(idat), dtype=np.uint8).reshape(h, 1 + w * 3)
    if not np.isin(raw[:, 0], (NONE, UP)).all():
        raise ValueError("only scanlines filtered with None or Up are read")
    rows = raw[:, 1:].copy()  # an Up first row is itself: the row above it is zeros
    for y in range(1, h):
        if raw[y, 0] == UP:
            rows[y] += rows[y - 1]  # modulo 256
    return rows.reshape(h, w, 3)
