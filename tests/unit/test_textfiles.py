"""app.textfiles reads an upload as bytes and decodes a line at a time (issue 26: a text with one
character past U+FFFF is held at 4 bytes a character). What it reads must be what decoding the
whole text read: the same lines, the same CSV records and line numbers, the same errors."""

from __future__ import annotations

import csv
import io
import random

import pytest

from app import textfiles
from app.errors import InputError
from app.textfiles import csv_reader, csv_records, numbered_lines, text_lines, upload_bytes

EMOJI = "\U0001f600"
# Every kind of line end and of character width, and the characters str.splitlines() would split at.
PIECES = ["a", "é", "€", EMOJI, "\n", "\r", "\r\n", "\u2028", "\x85", "\x0c", '"', ",", " ", "\ufeff"]


def _texts(n: int = 120) -> list[str]:
    rng = random.Random(26)
    return [
        "".join(rng.choice(PIECES) * rng.choice((1, 1, 2, 3, 3000)) for _ in range(rng.randint(0, 40)))
        for _ in range(n)
    ]


def test_lines_are_what_splitting_the_decoded_text_gives():
    for text in _texts():
        raw = text.encode()
        expected = text.split("\n")
        if expected[-1] == "":  # the empty line after a last "\n", blank, is not read
            expected.pop()
        assert [line for _, line in numbered_lines(raw)] == expected
        assert [n for n, _ in numbered_lines(raw)] == list(range(1, len(expected) + 1))
        assert list(text_lines(raw, newline="")) == list(io.StringIO(text, newline=""))


def test_csv_records_and_their_lines_are_what_the_decoded_text_gives():
    for text in _texts():
        for newline in ("", "\n"):
            expected, got = [], []
            for out, reader in (
                (expected, csv.reader(io.StringIO(text, newline=newline))),
                (got, csv_reader(text.encode(), newline=newline)),
            ):
                try:
                    out.extend((reader.line_num, row) for row in reader)
                except csv.Error as exc:
                    out.append((reader.line_num, str(exc)))
            assert got == expected


def test_lines_cut_across_the_chunks_they_are_decoded_in():
    # 8 KB chunks, 4-byte characters at every offset: none is cut, none is doubled
    text = "".join(f"{i}{EMOJI * (i % 7)}\n" for i in range(20_000))
    assert [line for _, line in numbered_lines(text.encode())] == text.split("\n")[:-1]


def test_the_file_is_checked_whole_before_any_line_is_read():
    # The first bad byte is named by its line, even where an earlier line would be refused.
    data = b'{"not": "closed\n' + ("é" * 600_000).encode() + b"\n\xff\n"
    with pytest.raises(InputError) as err:
        upload_bytes(data)
    assert err.value.line == 3 and "byte 0xff" in str(err.value)


@pytest.mark.parametrize(
    "data, line, byte",
    [
        (b"ab\n\xff", 2, 0xFF),
        # a byte-order mark first: the byte and its line, counted in the file (decoding with
        # utf-8-sig counted from after the mark: line 1 and "byte 0x61")
        (b"\xef\xbb\xbfab\n\xff", 2, 0xFF),
        (b"\xef\xbb\xbf\xff\xfe\x80garbage\x81\n", 1, 0xFF),
        # a chunk's last character cut in two is whole in the next; a bad one past it is found there
        (b"a" * ((1 << 20) - 2) + EMOJI.encode() + b"\n\n\xc3(", 3, 0xC3),
        (b"a" * ((1 << 20) - 1) + b"\xf0\x9f\x98" + b"\n", 1, 0xF0),
    ],
)
def test_a_byte_that_is_not_utf8_is_named_with_its_line(data, line, byte):
    with pytest.raises(InputError) as err:
        upload_bytes(data)
    assert err.value.line == line and f"(byte 0x{byte:02x})" in str(err.value)


def test_checked_bytes_lose_their_byte_order_mark_only():
    assert upload_bytes(b"\xef\xbb\xbf{}\n") == b"{}\n"
    assert upload_bytes(("a" * (1 << 20) + EMOJI).encode()) == ("a" * (1 << 20) + EMOJI).encode()
    assert upload_bytes("\ufeff{}") == "\ufeff{}"  # a text is the caller's


def test_characters_are_counted_without_decoding():
    for text in _texts():
        assert textfiles.characters(text.encode()) == len(text)


@pytest.mark.parametrize(
    "text, column",
    [("id,name\n1," + "é" * 140_000 + "\n", "name"), ('id,€,name\n1,"a,""' + EMOJI * 140_000 + '"\n', "€")],
)
def test_a_long_cell_is_named_by_its_column_from_the_bytes(text, column):
    with pytest.raises(InputError) as err:
        list(csv_records(csv_reader(text.encode()), text.encode()))
    assert (err.value.line, err.value.field) == (2, column)


def test_blank_says_what_strip_says_of_the_decoded_text():
    """textfiles.blank over bytes, against `not text.strip()` on random mixes of ASCII and
    Unicode white space (\\x1c-\\x1f, U+0085, U+00A0, U+2028, U+3000) and a few letters."""
    from app.textfiles import blank

    rng = random.Random(5)
    alphabet = [
        " ",
        "\t",
        "\n",
        "\r",
        "\x0b",
        "\x0c",
        "\x1c",
        "\x1f",
        "\x85",
        "\xa0",
        "\u2028",
        "\u3000",
        "a",
        "é",
        "😀",
    ]
    for _ in range(2_000):
        text = "".join(rng.choice(alphabet[: rng.choice([6, 8, 12, 15])]) for _ in range(rng.randrange(0, 12)))
        assert blank(text.encode()) == (not text.strip()), repr(text)
        assert blank(text) == (not text.strip()), repr(text)


def test_first_line_is_the_first_line_that_is_not_blank():
    """textfiles.first_line against numbered_lines read one by one: the same line number and
    text, and offsets that slice that line out of the bytes; None for a blank file."""
    from app.textfiles import first_line

    rng = random.Random(13)
    spaces = [" ", "\t", "\r", "\n", "\n", "\x1c", "\u3000", "\u2028", "\xa0"]
    texts = _texts() + [
        "".join(rng.choice(spaces) for _ in range(rng.randrange(0, 30))) + rng.choice(["", "x", "é\n", " {}\n "])
        for _ in range(300)
    ]
    for text in texts:
        raw = text.encode("utf-8", "surrogatepass")
        expected = next(((n, t) for n, t in numbered_lines(raw) if t.strip()), None)
        got = first_line(raw)
        if expected is None:
            assert got is None, repr(text)
            continue
        line, first, start, end = got
        assert (line, first) == expected, repr(text)
        assert raw[start:end].decode("utf-8", "surrogatepass") == first
