"""Uploaded text files, decoded one way for every kind: gzip when the bytes say so, UTF-8 (a
byte-order mark allowed), and an error that names the line of the first bad byte. JSON lines
are parsed with their nesting bounded (`app.jsonsafe`) and CSV rows read with the csv
module's errors (a cell over its 131,072-character limit, a NUL) refused with their line."""

from __future__ import annotations

import csv
import gzip
import zlib
from collections.abc import Callable, Hashable, Iterable
from typing import TypeVar

from app.errors import InputError

T = TypeVar("T")


def decode_upload(data: bytes | str) -> str:
    """Text of an upload: gunzips when it starts with the gzip magic, requires UTF-8."""
    if isinstance(data, str):
        return data
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (EOFError, OSError, zlib.error) as exc:
            raise InputError(f"the gzip file is truncated or corrupt ({exc})", field="file") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise InputError(f"the file is not UTF-8 text (byte 0x{data[exc.start]:02x})", line=line) from None


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
        lines, counted = refuse_many_values(decode_upload(data)).split("\n"), True
    else:
        lines, counted = data, False
    values, cap = 0, jsonsafe.max_values()
    for line, raw in enumerate(lines, 1):
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


def refuse_many_values(text: str, field: str = "file", lines: bool = True) -> str:
    """JSON lines (or, without `lines`, a JSON document), refused before they are parsed when
    they hold more than MAX_UPLOAD_VALUES values (`jsonsafe.too_many`), or, as lines, more
    lines than that, blank ones included: splitting makes a string of each, which the values
    do not count (8 MB of "  \n" held 203 MB)."""
    from app import jsonsafe

    cap = jsonsafe.max_values()
    if lines and text.count("\n") + 1 > cap:  # first: counting lines is cheap
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


def csv_rows(reader, text: str | None = None):
    """The rows of a `csv.reader`, refusing as csv_records() does."""
    return (row for _, row in csv_records(reader, text))


def csv_records(reader, text: str | None = None):
    """(line where the record starts, row) for each record of a `csv.reader`, with the csv
    module's own errors (a cell longer than `csv.field_size_limit()`, a NUL byte, an unclosed
    quote in strict mode) as an InputError naming that line, instead of a `_csv.Error` (a 500).
    Given the file's `text`, a cell over the limit is named by its column (the first row is the
    header)."""
    from app import jsonsafe

    start, header, cells, records, cap = 1, None, 0, 0, jsonsafe.max_values()
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
        yield start, row
        start = reader.line_num + 1


def _long_cell_column(text: str, line: int, header: list[str] | None, delimiter: str = ",") -> str | None:
    """The header's name for the cell over the csv module's limit in the record starting on
    `line` (the module's message names neither): a scan of the record's quotes and delimiters."""
    limit = csv.field_size_limit()
    i = 0
    for _ in range(line - 1):
        i = text.find("\n", i) + 1
        if i == 0:
            return None
    cell, length, quoted = 0, 0, False
    while i < len(text) and length <= limit:
        c = text[i]
        if quoted and c == '"' and text[i + 1 : i + 2] == '"':
            length, i = length + 1, i + 2
            continue
        if c == '"':
            quoted = not quoted
        elif not quoted and c == delimiter:
            cell, length = cell + 1, 0
        elif not quoted and c in "\r\n":
            break
        else:
            length += 1
        i += 1
    return header[cell] if header and cell < len(header) else None
