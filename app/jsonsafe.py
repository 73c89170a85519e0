"""JSON from outside, parsed with its nesting bounded. Python's parser recurses once per level:
10,000 nested brackets raise RecursionError (a 500), and a few hundred parse but break whatever
walks the value later. No input the app takes is nested more than a few levels.

Integers stay within a signed 64-bit column's range (a 30-digit id or seed is refused like bad
JSON, not a database error later). NaN and infinities parse as floats: each importer's check
of its field refuses them there, naming the field, and `non_finite` finds any left in what is
stored (JSON has no NaN: PostgreSQL would refuse the row).

Strings may not hold U+0000 (`\\u0000`: PostgreSQL text refuses it) or a lone surrogate (`\\ud800`
unpaired: no UTF-8 encodes it, so hashing or storing it fails); both are refused like bad JSON,
with their line."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable

MAX_DEPTH = 64

_ESCAPE = re.compile(rb"\\.", re.DOTALL)
_STRING = re.compile(rb'"[^"]*"')
_NOT_BRACKET = bytes(b for b in range(256) if b not in b"[]{}")
_CLOSE_ALL = bytes.maketrans(b"{}", b"[]")


def _raw(data: str | bytes) -> bytes:
    return data.encode("utf-8", "surrogatepass") if isinstance(data, str) else bytes(data)


def _unquoted(raw: bytes) -> bytes:
    """JSON text without its strings (escapes first, so an escaped quote cannot end one)."""
    return _STRING.sub(b"", _ESCAPE.sub(b"", raw)) if b'"' in raw else raw


def too_deep(data: str | bytes, limit: int = MAX_DEPTH) -> bool:
    """Whether JSON text nests arrays and objects more than `limit` deep. Linear, and in C
    but for at most `limit` passes over the brackets; text that is not JSON may answer
    either way (the parser refuses it next)."""
    raw = _raw(data)
    return raw.count(b"[") + raw.count(b"{") > limit and _nests_past(_unquoted(raw), limit)


def _nests_past(unquoted: bytes, limit: int) -> bool:
    brackets = unquoted.translate(_CLOSE_ALL, _NOT_BRACKET)
    # Each pass drops the innermost pairs, i.e. one level everywhere.
    for _ in range(limit):
        if not brackets:
            return False
        brackets = brackets.replace(b"[]", b"")
    return b"[" in brackets


_DOCUMENT_LINE = re.compile(rb"^[ \t\r]*[^\s]", re.MULTILINE)


def count_values(data: str | bytes, lines: bool = False) -> int:
    """How many values JSON text decodes to, keys counted: one Python object each, what
    decoding costs beside the strings' own bytes. Read in C without decoding; exact for a valid
    document (each `,` `:` `[` `{` outside a string adds one, and its first value one) and, with
    `lines`, for JSON lines (a document a line); each empty array or object counts one more."""
    raw = _raw(data)
    return _count(_unquoted(raw), raw, lines)


def _count(unquoted: bytes, raw: bytes, lines: bool = False) -> int:
    documents = len(_DOCUMENT_LINE.findall(raw)) if lines else int(bool(raw.strip()))
    return sum(map(unquoted.count, (b",", b":", b"[", b"{"))) + documents


def max_values() -> int:
    from app.config import get_settings

    return get_settings().max_upload_values


def too_many(data: str | bytes, limit: int | None = None, lines: bool = False) -> bool:
    """Whether JSON text (with `lines`, JSON lines) holds more than `limit` values
    (MAX_UPLOAD_VALUES): an empty list is 56 bytes in Python and 3 (`[],`) in a file, so 50 MB
    of them decoded to 1.2 GB. Each value takes a byte at least, so shorter text is not counted."""
    limit = max_values() if limit is None else limit
    return len(data) >= limit and count_values(data, lines) > limit


class TooMany(json.JSONDecodeError):
    """Refused before parsing, like TooDeep."""

    def __init__(self, limit: int):
        super().__init__(f"more than {limit:,} values (items and keys; the MAX_UPLOAD_VALUES limit)", "", 0)


class TooDeep(json.JSONDecodeError):
    """Refused before parsing; a JSONDecodeError, so every caller's "not valid JSON" handling
    (with its line and field) reports it."""

    def __init__(self, limit: int = MAX_DEPTH):
        super().__init__(f"nested more than {limit} levels deep", "", 0)


class BadNumber(json.JSONDecodeError):
    """An integer past 64 bits; a JSONDecodeError (with the number's line and column), so
    callers report it with their line and field like any bad JSON."""

    def __init__(self, message: str, lineno: int = 1, colno: int = 1):
        super().__init__(message, "", 0)
        self.lineno, self.colno = lineno, colno


MAX_INT = 2**63 - 1
# Only text with a run of 19 digits takes the slower checked parse.
_LONG_DIGITS_BYTES = re.compile(rb"\d{19}")
# Every ASCII digit byte to "1", every other byte to "0": a run of 19 digits is then a substring
# search, in C, instead of the regular expression's attempt at every position (0.6 s on a 30 MB
# line, as much as the rest of its refusal).
_DIGIT_BITS = bytes(0x31 if 0x30 <= b <= 0x39 else 0x30 for b in range(256))


def has_long_digits(data: str | bytes) -> bool:
    """Whether the text holds a run of 19 or more ASCII digits (`\\d{19}`, re.ASCII). In UTF-8
    every other character's bytes are not digits, so a str's runs are its encoding's."""
    return b"1" * 19 in _raw(data).translate(_DIGIT_BITS)


class OutOfRange(ValueError):
    """An integer past 64 bits met by checked_int (parse_int); bad_number says where."""

    def __init__(self, text: str):
        super().__init__(text)
        self.text = text


def checked_int(text: str) -> int:
    if len(text.lstrip("-")) > 19:  # past 64 bits; and int() refuses 4,300 digits with a bare ValueError
        raise OutOfRange(text)
    value = int(text)
    if not -MAX_INT - 1 <= value <= MAX_INT:
        raise OutOfRange(text)
    return value


# int() refuses integers of more digits (sys.get_int_max_str_digits) with a bare ValueError.
MAX_INT_DIGITS = 4_300


def past_int_digits(data: bytes) -> bool:
    """Whether JSON text holds an integer int() refuses. Only text with a run of more digits
    is parsed to tell (the run may be inside a string, which is fine)."""
    first = _LONG_DIGITS_BYTES.search(data) if has_long_digits(data) else None
    if first is None or max(map(len, re.findall(rb"\d+", data[first.start() :]))) <= MAX_INT_DIGITS:
        return False
    try:
        json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return False  # not JSON: the parser's own error says so
    except ValueError:
        return True  # a number's digits, refused by int()
    return False  # the digits were in a string


def bad_number(data: str | bytes, text: str) -> BadNumber:
    """BadNumber at the number's first occurrence as a number (not inside a longer one)."""
    raw = _raw(data)
    m = re.search(rb"(?<![\w.\"])" + re.escape(text.encode()) + rb"(?![\w.\"])", raw)
    pos = m.start() if m else 0
    line = raw.count(b"\n", 0, pos) + 1
    digits = len(text.lstrip("-"))
    return BadNumber(
        f"the integer {text[:12]}... ({digits} digits) is out of range (at most {MAX_INT})",
        line,
        pos - (raw.rfind(b"\n", 0, pos) + 1) + 1,
    )


class BadText(json.JSONDecodeError):
    """A string holding U+0000 or a lone surrogate; a JSONDecodeError with the escape's line and
    column, so callers report it with their line and field like any bad JSON."""

    def __init__(self, message: str, lineno: int = 1, colno: int = 1):
        super().__init__(message, "", 0)
        self.lineno, self.colno = lineno, colno


# Escapes that may decode to what no column can hold; only text with one takes the walk below.
_BAD_ESCAPE = re.compile(r"(\\*)\\u(0000|[dD][89a-fA-F][0-9a-fA-F]{2})(\\u[dD][c-fC-F][0-9a-fA-F]{2})?")
_BAD_CHAR = re.compile("[\x00\ud800-\udfff]")


def _bad_text(value) -> str | None:
    """The first string (a key or a value) of a parsed value that no database column can hold."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            if (m := _BAD_CHAR.search(v)) is not None:
                return m.group()
        elif isinstance(v, dict):
            stack.extend(v.keys())
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    return None


def _first_bad_escape(text: str) -> int | None:
    """Where the first escape of U+0000 or of an unpaired surrogate starts, or None."""
    for m in _BAD_ESCAPE.finditer(text):
        lone = m.group(2) == "0000" or not (m.group(2).lower() < "dc00" and m.group(3))
        if len(m.group(1)) % 2 == 0 and lone:  # an escape, not an escaped backslash and a "u"
            return m.start() + len(m.group(1))
    return None


def unstorable_escape_line(data: str | bytes) -> int | None:
    """The line of JSON text's first escape of U+0000 or of a lone surrogate in a string, or
    None: for a parser of its own (Common-ToM's CG files) to refuse it like loads does. Its
    UTF-8 bytes are read as Latin-1 (a byte a character, what unstorable_escape does): the
    escapes are ASCII, and no other character's bytes are."""
    if isinstance(data, str):
        text = data
    elif b"\\u" in data:
        text = bytes(data).decode("latin-1")
    else:
        return None
    pos = _first_bad_escape(text) if "\\u" in text else None
    return None if pos is None else text.count("\n", 0, pos) + 1


def unstorable_escape(data: bytes) -> bool:
    """Whether JSON text escapes U+0000 or a lone surrogate in a string (read before parsing:
    escapes are ASCII, so bytes in any other encoding cannot make one)."""
    return b"\\u" in data and _first_bad_escape(bytes(data).decode("latin-1")) is not None


def _check_text(data: str | bytes, value):
    text = data if isinstance(data, str) else bytes(data).decode("utf-8", "replace")
    # The escape search only where there is an escape: it tries every position (0.6 s on 30 MB).
    found = _bad_text(value) if "\\u" in text and _BAD_ESCAPE.search(text) else None
    if found is None:
        return value
    what = "U+0000 (NUL)" if found == "\x00" else f"a lone surrogate (U+{ord(found):04X})"
    pos = _first_bad_escape(text) or 0
    line = text.count("\n", 0, pos) + 1
    raise BadText(f"a string holds {what}, which cannot be stored", line, pos - (text.rfind("\n", 0, pos) + 1) + 1)


def loads(data: str | bytes, limit: int = MAX_DEPTH):
    """json.loads for input from outside: TooDeep past `limit` levels of nesting, TooMany past
    MAX_UPLOAD_VALUES values, BadNumber for an integer past 64 bits, BadText for a string
    holding U+0000 or a lone surrogate."""
    raw, cap, unquoted = _raw(data), max_values(), None
    # Python's parser reads UTF-16 and UTF-32 bytes too, where the checks here, of UTF-8 bytes,
    # see no escape and no digits (round 18 of issue 26: "\ud800" was parsed into the text).
    if not isinstance(data, str) and (encoding := json.detect_encoding(raw)) not in ("utf-8", "utf-8-sig"):
        raise BadText(f"the text is {encoding.upper()}, not UTF-8")
    if raw.count(b"[") + raw.count(b"{") > limit:
        if _nests_past(unquoted := _unquoted(raw), limit):
            raise TooDeep(limit)
    if len(raw) >= cap and _count(unquoted if unquoted is not None else _unquoted(raw), raw) > cap:
        raise TooMany(cap)
    if not has_long_digits(raw):
        return _check_text(data, json.loads(data))
    try:
        return _check_text(data, json.loads(data, parse_int=checked_int))
    except OutOfRange as exc:
        raise bad_number(data, exc.text) from None


def _first(value: object, path: str, bad: Callable[[object], bool], keys: bool = False) -> str | None:
    """The path ("payload.scores[2]") of the first part of a JSON-like value that is `bad`,
    or None; with `keys`, an object's key that is bad gives its object's path."""
    if isinstance(value, dict):
        for k, v in value.items():
            if keys and bad(k):
                return path
            if (found := _first(v, f"{path}.{k}" if path else str(k), bad, keys)) is not None:
                return found
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            if (found := _first(v, f"{path}[{i}]", bad, keys)) is not None:
                return found
    elif bad(value):
        return path
    return None


def unstorable_text(value, path: str = "") -> str | None:
    """The path of the first string (a key's: its object's path) holding U+0000 or a lone
    surrogate in a JSON-like value, or None: text a model made (a vocabulary's words) never went
    through loads() above, and PostgreSQL would fail the whole insert on it."""
    return _first(value, path, lambda v: isinstance(v, str) and _BAD_CHAR.search(v) is not None, keys=True)


def non_finite(value, path: str = "") -> str | None:
    """The path ("payload.scores[2]") of the first NaN or infinity in a JSON-like value, or
    None. Importers refuse their own fields first; this is the check nothing passes around."""
    return _first(value, path, lambda v: isinstance(v, float) and not math.isfinite(v))


# Characters no page shows as themselves (issue 26, round 14): controls (C0, DEL, C1), the soft
# hyphen, bidi marks, embeddings, overrides and isolates (which reorder the text after them: a
# worker id "\u202e" + another's reversed showed as that other worker), zero-width spaces and
# joiners, word joiners and invisible operators, line and paragraph separators, the BOM and
# interlinear annotations. Round 15: and the rest of Unicode's default-ignorable code points,
# which no page shows either: the combining grapheme joiner, the Hangul fillers (an id of U+3164
# alone looked empty), Khmer's inherent vowels, Mongolian's and the other variation selectors,
# the hieroglyph, musical and shorthand format controls, and the tag characters (U+E0000-E0FFF:
# "W1" and "W1" + U+E0041 looked one). Round 16: every space but U+0020 (no-break, ideographic,
# the typographic ones: each shows as a plain space, "W1" + U+3000 as "W1"), and the Braille
# blank (U+2800: an id of it alone looks empty, as one of U+3164 did). One pattern for the code
# and the API's schema (JSON Schema's `pattern`, which reads it alike; the characters past U+FFFF
# written as themselves, as ECMA-262's "u" mode and Python read them), so the two agree on what a
# name may hold.
UNSHOWN_CHARS = (
    "\\x00-\\x1f\\x7f-\\xa0\\xad\\u034f\\u061c\\u115f\\u1160\\u1680\\u17b4\\u17b5\\u180b-\\u180f"
    "\\u2000-\\u200f\\u2028-\\u202f\\u205f-\\u206f\\u2800\\u3000\\u3164\\ufe00-\\ufe0f\\ufeff\\uffa0"
    "\\ufff0-\\ufffb"
    "\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e0fff"
)
_UNSHOWN = re.compile(f"[{UNSHOWN_CHARS}]")


def unshowable(text: str) -> str | None:
    """The first character of `text` that no page shows as itself ("U+202E"), or None."""
    m = _UNSHOWN.search(text)
    return f"U+{ord(m.group()):04X}" if m else None


# A name shown on a page (a worker's id, an imported annotator's) has its spaces collapsed there:
# one at either end, or two together, look like none or one ("W1 " is "W1" on the review page;
# round 16 of issue 26). The API's schema says the same: words of shown characters, one space
# between each two.
NAME_PATTERN = f"^(?:[^ {UNSHOWN_CHARS}]+(?: [^ {UNSHOWN_CHARS}]+)*)?$"


def unshowable_name(text: str) -> str | None:
    """What no page shows as it is in a name: its first such character ("U+202E"), a space at
    either end or two together ("U+0020 at an end or twice"), or None."""
    if char := unshowable(text):
        return char
    if text != text.strip(" ") or "  " in text:
        return "U+0020 at an end or twice"
    return None
