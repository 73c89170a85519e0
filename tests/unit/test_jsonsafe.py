"""app.jsonsafe: nesting is measured without parsing, strings and escapes taken into account."""

import json
import time

import pytest

from app import jsonsafe
from app.jsonsafe import MAX_DEPTH, TooDeep, too_deep


def nested(depth: int, inner: str = "1") -> str:
    return "[" * depth + inner + "]" * depth


@pytest.mark.parametrize(
    "text",
    [
        nested(MAX_DEPTH),
        '{"a":' * MAX_DEPTH + "1" + "}" * MAX_DEPTH,
        "[" + ",".join([nested(3)] * 5000) + "]",  # many brackets, few levels
        json.dumps(["[" * 500, "{" * 500]),  # brackets inside strings
        json.dumps(['\\"' + "[" * 500]),  # an escaped quote does not end a string
        json.dumps(["\\\\", "[" * 500]),  # an escaped backslash does not escape
        b"[" + b"[1]," * 100 + b"1]",  # bytes too
    ],
)
def test_within_the_limit(text):
    assert not too_deep(text)
    assert jsonsafe.loads(text) == json.loads(text)


@pytest.mark.parametrize(
    "text",
    [
        nested(MAX_DEPTH + 1),
        "[{" * 40 + "}]" * 40,
        nested(10_000),
        "[" * 100_000,
        json.dumps(["[" * 500]) + nested(MAX_DEPTH + 1),
    ],
)
def test_past_the_limit(text):
    assert too_deep(text)
    with pytest.raises(json.JSONDecodeError, match=f"nested more than {MAX_DEPTH} levels deep"):
        jsonsafe.loads(text)
    with pytest.raises(TooDeep):
        jsonsafe.loads(text)


def test_measuring_is_cheap_even_for_the_worst_shape():
    """Many sibling arrays each just under the limit: every pass shortens little."""
    worst = ("[" + (nested(MAX_DEPTH - 1) + ",") * (4_000_000 // (2 * MAX_DEPTH)) + "1]").encode()
    start = time.process_time()
    assert not too_deep(worst)
    assert time.process_time() - start < 5


@pytest.mark.parametrize("digits", [20, 4_301, 50_000])
def test_an_integer_past_64_bits_is_a_json_error_naming_its_line(digits):
    # 4,301 digits and more: int() refuses them with a bare ValueError, which the importers do
    # not catch (round 9 of issue 26's re-attack: a 500 on every JSON upload)
    text = '{"id": "a",\n "seed": ' + "7" * digits + "}"
    with pytest.raises(json.JSONDecodeError) as got:
        jsonsafe.loads(text)
    assert got.value.lineno == 2 and f"({digits} digits) is out of range" in str(got.value)
    assert jsonsafe.loads('{"seed": -9223372036854775808}') == {"seed": -(2**63)}  # 19 digits: kept


def test_past_int_digits_tells_a_number_from_digits_in_a_string():
    assert jsonsafe.past_int_digits(b'{"a": ' + b"1" * 4301 + b"}")
    assert not jsonsafe.past_int_digits(b'{"a": ' + b"1" * 4300 + b"}")
    assert not jsonsafe.past_int_digits(b'{"a": "' + b"1" * 5000 + b'"}')  # a text of digits is fine
    assert not jsonsafe.past_int_digits(b'{"a": "\xff' + b"1" * 5000 + b'"}')  # not UTF-8: its parser says so
