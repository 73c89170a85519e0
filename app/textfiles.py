"""Uploaded text files, decoded one way for every kind: gzip when the bytes say so, UTF-8 (a
byte-order mark allowed), and an error that names the line of the first bad byte. JSON lines
are parsed with their nesting bounded (`app.jsonsafe`) and CSV rows read with the csv
module's errors (a cell over its 131,072-character limit, a NUL) refused with their line.

An upload is checked and counted as bytes and its lines decoded one at a time (`upload_bytes`,
`text_lines`): CPython holds a text at 4 bytes a character once one character is past U+FFFF,
so 48 MB of JSON lines with an emoji on each, decoded whole, held 381 MB (issue 26). Only a
JSON document, which the parser needs whole, is decoded whole (`decode_upload`), and refused
when its text would take more than MAX_UPLOAD_BYTES (`refuse_wide_text`)."""

from __future__ import annotations

import codecs
import csv
import gzip
import io
import re
import zlib
from collections.abc import Callable, Hashable, Iterable, Iterator
from typing import TypeVar

from app.errors import InputError

T = TypeVar("T")
S = TypeVar("S", bytes, str)

_CHUNK = 1 << 20  # bytes decoded at a time to check them, or to count their characters
# Bytes that continue a UTF-8 character (not counted as characters), and those that start one
# past U+FFFF.
_CONTINUATION = bytes(range(0x80, 0xC0))
_ASTRAL_LEADS = tuple(bytes([b]) for b in range(0xF0, 0xF5))


def utf8(data: bytes) -> bytes:
    """`data` without its byte-order mark, once checked to be UTF-8 a chunk at a time: the
    UnicodeDecodeError `data.decode("utf-8-sig")` would raise, its start counted in `data`,
    without ever holding the text."""
    if not data.isascii():
        with memoryview(data) as view:
            pos = 0
            while pos < len(data):
                end = pos + _CHUNK
                try:
                    # A character cut at the chunk's end is left for the next (final=False).
                    pos += codecs.utf_8_decode(view[pos:end], "strict", end >= len(data))[1]
                except UnicodeDecodeError as exc:
                    raise UnicodeDecodeError("utf-8", data, pos + exc.start, pos + exc.end, exc.reason) from None
    return data[len(codecs.BOM_UTF8) :] if data.startswith(codecs.BOM_UTF8) else data


def upload_bytes(data: bytes | str) -> bytes | str:
    """An upload's bytes, gunzipped when they start with the gzip magic, checked to be UTF-8 and
    without a byte-order mark (`utf8`), to be counted and read a line at a time (`text_lines`);
    a text is returned as it is."""
    if isinstance(data, str):
        return data
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (EOFError, OSError, zlib.error) as exc:
            raise InputError(f"the gzip file is truncated or corrupt ({exc})", field="file") from None
    try:
        return utf8(data)
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise InputError(f"the file is not UTF-8 text (byte 0x{data[exc.start]:02x})", line=line) from None


def decode_upload(data: bytes | str) -> str:
    """Text of an upload decoded whole, for a JSON document (its parser needs the whole text):
    upload_bytes, refused past MAX_UPLOAD_BYTES of text (`refuse_wide_text`). Lines and CSV
    records are read with text_lines instead."""
    raw = upload_bytes(data)
    if isinstance(raw, str):
        return raw
    refuse_wide_text(raw)
    return raw.decode("utf-8")


def characters(raw: bytes) -> int:
    """How many characters checked UTF-8 bytes decode to: the bytes that do not continue one,
    counted in C a chunk at a time (never the whole text)."""
    if raw.isascii():
        return len(raw)
    count = 0
    with memoryview(raw) as view:
        for start in range(0, len(raw), _CHUNK):
            count += len(bytes(view[start : start + _CHUNK]).translate(None, _CONTINUATION))
    return count


def refuse_wide_text(raw: bytes, field: str | None = "file") -> None:
    """InputError for a JSON document whose decoded text would take more than MAX_UPLOAD_BYTES:
    CPython holds a text at 4 bytes a character once one character is past U+FFFF (an emoji),
    so such a document is refused past a quarter of the limit in characters; any other text
    takes at most 2 bytes a character, its bytes at most twice over."""
    from app.config import get_settings

    limit = get_settings().max_upload_bytes
    if 4 * len(raw) <= limit or not any(lead in raw for lead in _ASTRAL_LEADS):
        return
    if (chars := characters(raw)) > limit // 4:
        raise InputError(
            f"the file holds {chars:,} characters, one past U+FFFF (an emoji): Python holds such a "
            f"text at 4 bytes a character, and a JSON document, read whole, may hold at most "
            f"{limit // 4:,} of them (a quarter of MAX_UPLOAD_BYTES, {limit_text(limit)})",
            field=field,
        )


def text_lines(raw: bytes | str, newline: str = "\n") -> Iterator[str]:
    """The lines of checked UTF-8 bytes (`upload_bytes`, `utf8`) or of a text, each decoded when
    it is read, with its line end: split at "\n" only, as str.split("\n") splits, or with
    `newline=""` at "\r", "\n" and "\r\n", as the csv module reads io.StringIO(text, newline="")."""
    if isinstance(raw, str):
        raw = raw.encode("utf-8", "surrogatepass")
    # BytesIO shares the bytes, unchanged; the wrapper decodes a chunk at a time.
    return io.TextIOWrapper(io.BytesIO(raw), encoding="utf-8", errors="surrogatepass", newline=newline)


def numbered_lines(raw: bytes | str) -> Iterator[tuple[int, str]]:
    """(line number, line) of checked UTF-8 bytes or a text split at "\n", as text.split("\n")
    numbered from 1 (but for the empty line after a last "\n"), each decoded when it is read."""
    for line, text in enumerate(text_lines(raw), 1):
        yield line, text[:-1] if text.endswith("\n") else text


_NOT_ASCII_SPACE = re.compile(rb"[^ \t\n\r\x0b\x0c\x1c-\x1f]")


def first_line(raw: bytes) -> tuple[int, str, int, int] | None:
    """The first line of checked UTF-8 bytes that is not blank (`text.strip()`, split at "\n" as
    numbered_lines splits): (its number, its text, the offsets of its start and of its end), the
    blank ASCII lines before it skipped in C (3 million read one by one took 3.7 s); None when
    every line is blank."""
    start, line = 0, 1
    while (m := _NOT_ASCII_SPACE.search(raw, start)) is not None:
        at = raw.rfind(b"\n", 0, m.start()) + 1
        line += raw.count(b"\n", start, at)
        end = raw.find(b"\n", at)
        end = len(raw) if end < 0 else end
        text = raw[at:end].decode("utf-8", "surrogatepass")
        if text.strip():
            return line, text, at, end
        start, line = end + 1, line + 1  # a line of white space past ASCII: on to the next
    return None


def blank(raw: bytes | str) -> bool:
    """Whether checked UTF-8 bytes (or a text) hold nothing but white space, as `not text.strip()`
    says, without reading their blank lines one by one (`first_line`)."""
    return not raw.strip() if isinstance(raw, str) else first_line(raw) is None


def head(raw: bytes | str, n: int) -> str:
    """The first `n` characters of checked UTF-8 bytes or of a text (`text[:n]`)."""
    if isinstance(raw, str):
        return raw[:n]
    # 4n bytes hold n whole characters when there are more; a character cut at the end is dropped.
    return raw[: 4 * n].decode("utf-8", "ignore")[:n]


def csv_reader(raw: bytes | str, *args, newline: str = "", **kwargs):
    """A `csv.reader` over checked UTF-8 bytes (`upload_bytes`) or a text, its lines decoded as
    they are read: what csv.reader(io.StringIO(text, newline=newline), ...) reads."""
    return csv.reader(text_lines(raw, newline), *args, **kwargs)


def gunzips_past(data: bytes, limit: int) -> bool:
    """Whether gzip data inflates to more than `limit` bytes (inflating no further than that).
    Corrupt or truncated data is left for the parser to report."""
    total = 0
    while data[:2] == b"\x1f\x8b":
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            total += len(inflater.decompress(data, limit + 1 - total))
        except zlib.error:
            return False
        if total > limit:
            return True
        if not inflater.eof:
            return False
        data = inflater.unused_data  # gzip allows several members one after another
    return False


def limit_text(limit: int) -> str:
    """A size limit as the refusals say it: "50 MB", or bytes under a megabyte."""
    return f"{limit // (1024 * 1024)} MB" if limit >= 1024 * 1024 else f"{limit} byte"


def read_capped(path: str, limit: int) -> bytes:
    """A file's bytes, refused before any parsing when it, or what it gunzips to, is over
    `limit` bytes (an offline scorer's input, capped as an upload is: MAX_UPLOAD_BYTES)."""
    with open(path, "rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit or gunzips_past(data, limit):
        raise InputError(f"the file is larger than the {limit_text(limit)} limit (MAX_UPLOAD_BYTES)")
    return data


def jsonl_objects(data: bytes | str | Iterable[str]):
    """(line number, object) for every non-blank line of a JSONL upload, or of its lines as
    they are read (a large file streamed); InputError naming the line for text that is not JSON
    or a line that is not an object."""
    import json

    from app import jsonsafe

    if isinstance(data, (bytes, str)):
        lines, counted = numbered_lines(refuse_many_values(upload_bytes(data))), True
    else:
        lines, counted = enumerate(data, 1), False
    values, cap = 0, jsonsafe.max_values()
    for line, raw in lines:
        if not raw.strip():
            continue
        if not counted and (values := values + jsonsafe.count_values(raw)) > cap:
            raise InputError(f"the file holds {jsonsafe.TooMany(cap).msg}", line=line)
        try:
            obj = jsonsafe.loads(raw)
        except json.JSONDecodeError as exc:
            raise InputError(f"not valid JSON: {exc.msg}", line=line) from None
        if not isinstance(obj, dict):
            raise InputError("each line must be a JSON object", line=line)
        yield line, obj


def refuse_many_values(text: S, field: str = "file", lines: bool = True) -> S:
    """JSON lines (or, without `lines`, a JSON document), as text or as their bytes, refused
    before they are parsed when they hold more than MAX_UPLOAD_VALUES values
    (`jsonsafe.too_many`), or, as lines, more lines than that, blank ones included: splitting
    makes a string of each, which the values do not count (8 MB of "  \n" held 203 MB)."""
    from app import jsonsafe

    cap = jsonsafe.max_values()
    if lines and text.count(b"\n" if isinstance(text, bytes) else "\n") + 1 > cap:  # first: counting lines is cheap
        raise InputError(f"the file holds more than {cap:,} lines (the MAX_UPLOAD_VALUES limit)", field=field)
    if jsonsafe.too_many(text, cap, lines=lines):
        raise InputError(f"the file holds {jsonsafe.TooMany(cap).msg}", field=field)
    return text


def each_once(
    parsed: Iterable[tuple[int, T]], key: Callable[[T], Hashable], field: str, repeated: str, empty: str
) -> list[T]:
    """A file's records, (line, record) in file order, where each key stands once: InputError on
    the line of a repeat (`repeated`, formatted with its key and the line it is already on) or
    for a file with none (`empty`)."""
    out: list[T] = []
    seen: dict[Hashable, int] = {}
    for line, record in parsed:
        k = key(record)
        if k in seen:
            raise InputError(repeated.format(key=k, line=seen[k]), line=line, field=field)
        seen[k] = line
        out.append(record)
    if not out:
        raise InputError(empty, field="file")
    return out


def csv_rows(reader, text: bytes | str | None = None):
    """The rows of a `csv.reader`, refusing as csv_records() does."""
    return (row for _, row in csv_records(reader, text))


def csv_records(reader, text: bytes | str | None = None):
    """(line where the record starts, row) for each record of a `csv.reader`, with the csv
    module's own errors (a cell longer than `csv.field_size_limit()`, an unclosed quote in
    strict mode) and a NUL in a cell as an InputError naming that line, instead of a `_csv.Error`
    (a 500). Given the file's `text` (or its checked bytes, as `csv_reader` reads them), a cell
    over the limit is named by its column (the first row is the header)."""
    from app import jsonsafe

    start, header, cells, records, cap = 1, None, 0, 0, jsonsafe.max_values()
    # Only a file with a NUL has a row to search for one.
    nul = text is None or (b"\x00" if isinstance(text, bytes) else "\x00") in text
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            if "field larger than field limit" in str(exc):
                field = None
                if text is not None:
                    field = _long_cell_column(text, start, header, reader.dialect.delimiter)
                raise InputError(
                    f"a cell is longer than the limit of {csv.field_size_limit()} characters", line=start, field=field
                ) from None
            raise InputError(f"malformed CSV: {exc}", line=start) from None
        if (cells := cells + len(row)) > cap:  # each cell a Python string, as JSON's values are
            raise InputError(f"the file holds more than {cap:,} cells (the MAX_UPLOAD_VALUES limit)", line=start)
        if (records := records + 1) > cap:  # a blank line is a record of no cells, each read in turn
            raise InputError(f"the file holds more than {cap:,} lines (the MAX_UPLOAD_VALUES limit)", line=start)
        if header is None and row:
            header = [name.strip() for name in row]
        # Python's csv module reads a NUL since 3.11; no text column holds one (PostgreSQL
        # refused it at the insert, naming no line; issue 26, round 13).
        if nul and any("\x00" in cell for cell in row):
            at = next(i for i, cell in enumerate(row) if "\x00" in cell)
            name = header[at] if header is not None and at < len(header) and start > 1 else None
            raise InputError("a cell holds U+0000 (NUL), which no text column holds", line=start, field=name)
        yield start, row
        start = reader.line_num + 1


def _long_cell_column(text: bytes | str, line: int, header: list[str] | None, delimiter: str = ",") -> str | None:
    """The header's name for the cell over the csv module's limit in the record starting on
    `line` (the module's message names neither): a scan of the record's quotes and delimiters,
    over its UTF-8 bytes (a byte that continues a character is not counted)."""
    raw = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    if len(sep := delimiter.encode()) != 1:
        return None
    limit, quote, comma, cr, lf = csv.field_size_limit(), ord('"'), sep[0], ord("\r"), ord("\n")
    i = 0
    for _ in range(line - 1):
        i = raw.find(b"\n", i) + 1
        if i == 0:
            return None
    cell, length, quoted = 0, 0, False
    while i < len(raw) and length <= limit:
        c = raw[i]
        if quoted and c == quote and raw[i + 1 : i + 2] == b'"':
            length, i = length + 1, i + 2
            continue
        if c == quote:
            quoted = not quoted
        elif not quoted and c == comma:
            cell, length = cell + 1, 0
        elif not quoted and c in (cr, lf):
            break
        elif c & 0xC0 != 0x80:
            length += 1
        i += 1
    return header[cell] if header and cell < len(header) else None
