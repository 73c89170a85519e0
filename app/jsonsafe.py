"""JSON from outside, parsed with its nesting bounded. Python's parser recurses once per level:
10,000 nested brackets raise RecursionError (a 500), and a few hundred parse but break whatever
walks the value later. No input the app takes is nested more than a few levels."""

from __future__ import annotations

import json
import re

MAX_DEPTH = 64

_ESCAPE = re.compile(rb"\\.", re.DOTALL)
_STRING = re.compile(rb'"[^"]*"')
_NOT_BRACKET = bytes(b for b in range(256) if b not in b"[]{}")
_CLOSE_ALL = bytes.maketrans(b"{}", b"[]")


def too_deep(data: str | bytes, limit: int = MAX_DEPTH) -> bool:
    """Whether JSON text nests arrays and objects more than `limit` deep. Linear, and in C
    but for at most `limit` passes over the brackets; text that is not JSON may answer
    either way (the parser refuses it next)."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else bytes(data)
    if raw.count(b"[") + raw.count(b"{") <= limit:
        return False
    # Strings out (escapes first, so an escaped quote cannot end one), then only the brackets.
    brackets = _STRING.sub(b"", _ESCAPE.sub(b"", raw)).translate(_CLOSE_ALL, _NOT_BRACKET)
    # Each pass drops the innermost pairs, i.e. one level everywhere.
    for _ in range(limit):
        if not brackets:
            return False
        brackets = brackets.replace(b"[]", b"")
    return b"[" in brackets


class TooDeep(json.JSONDecodeError):
    """Refused before parsing; a JSONDecodeError, so every caller's "not valid JSON" handling
    (with its line and field) reports it."""

    def __init__(self, limit: int = MAX_DEPTH):
        super().__init__(f"nested more than {limit} levels deep", "", 0)


def loads(data: str | bytes, limit: int = MAX_DEPTH):
    """json.loads for input from outside: TooDeep past `limit` levels of nesting."""
    if too_deep(data, limit):
        raise TooDeep(limit)
    return json.loads(data)
