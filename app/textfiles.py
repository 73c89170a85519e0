"""Uploaded text files, decoded one way for every kind: gzip when the bytes say so, UTF-8 (a
byte-order mark allowed), and an error that names the line of the first bad byte."""

from __future__ import annotations

import gzip
import zlib

from app.errors import InputError


def decode_upload(data: bytes | str) -> str:
    """Text of an upload: gunzips when it starts with the gzip magic, requires UTF-8."""
    if isinstance(data, str):
        return data
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (EOFError, OSError, zlib.error) as exc:
            raise InputError(f"the gzip file is truncated or corrupt ({exc})") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise InputError(f"the file is not UTF-8 text (byte 0x{data[exc.start]:02x})", line=line) from None
