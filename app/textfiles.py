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


def jsonl_objects(data: bytes | str):
    """(line number, object) for every non-blank line of a JSONL upload; InputError naming the
    line for text that is not JSON or a line that is not an object."""
    import json

    from app import jsonsafe

    for line, raw in enumerate(decode_upload(data).split("\n"), 1):
        if not raw.strip():
            continue
        try:
            obj = jsonsafe.loads(raw)
        except json.JSONDecodeError as exc:
            raise InputError(f"not valid JSON: {exc.msg}", line=line) from None
        if not isinstance(obj, dict):
            raise InputError("each line must be a JSON object", line=line)
        yield line, obj
