"""app.jsonsafe: nesting is measured without parsing, strings and escapes taken into account."""

import json
import re
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


@pytest.mark.parametrize(
    "text",
    [
        "",
        "1" * 18,
        "1" * 19,
        "a" + "1" * 18 + "b" + "1" * 18,
        '{"seed": 12345678901234567890}',
        "-" + "9" * 19,
        "\u0661" * 30,  # Arabic-Indic digits: not ASCII digits (\\d under re.ASCII)
        "\uff11" * 30,  # fullwidth digits
        "é" + "1" * 19 + "é",
        "\ud800" + "2" * 19,  # a lone surrogate beside them, as a parsed str may hold
        "1" * 9 + "\u00e9" + "1" * 10,
    ],
)
def test_a_run_of_19_digits_is_found_as_the_regular_expression_finds_it(text):
    import re

    expected = re.search(r"\d{19}", text, re.ASCII) is not None
    assert jsonsafe.has_long_digits(text) is expected
    assert jsonsafe.has_long_digits(text.encode("utf-8", "surrogatepass")) is expected


def test_a_30_mb_line_without_digits_or_escapes_is_read_in_linear_c_time():
    """The 30 MB line of the malformed-upload tests: the two scans before parsing cost 0.6 s
    each as regular expressions trying every position; now a translation and a substring search
    (CPU time: 1.5 s for the whole parse before, 0.25 s after, on the two-core machine)."""
    line = '{"id": "' + "a" * (30 * 1024 * 1024) + '"}'
    start = time.process_time()
    assert len(jsonsafe.loads(line)["id"]) == 30 * 1024 * 1024
    assert time.process_time() - start < 1.0  # 1.5 s here before, 0.25 s after


def test_past_int_digits_tells_a_number_from_digits_in_a_string():
    assert jsonsafe.past_int_digits(b'{"a": ' + b"1" * 4301 + b"}")
    assert not jsonsafe.past_int_digits(b'{"a": ' + b"1" * 4300 + b"}")
    assert not jsonsafe.past_int_digits(b'{"a": "' + b"1" * 5000 + b'"}')  # a text of digits is fine
    assert not jsonsafe.past_int_digits(b'{"a": "\xff' + b"1" * 5000 + b'"}')  # not UTF-8: its parser says so


def _decoded(value) -> int:
    """The values a decoded document holds, keys counted: the Python objects decoding made."""
    if isinstance(value, dict):
        return 1 + sum(1 + _decoded(v) for v in value.values())
    if isinstance(value, list):
        return 1 + sum(map(_decoded, value))
    return 1


@pytest.mark.parametrize(
    "text, values",
    [
        ('"x"', 1),
        ("0", 1),
        ('{"a": 1}', 3),  # the object, its key, its value
        ("[1, 2]", 3),
        ('{"a": {"b": [1, 2, {"c": "d,:[{"}]}}', 10),  # a string's commas and brackets are its own
        ('["\\"", ",", "\\\\", "["]', 5),  # an escaped quote does not end a string
        ("[[], {}]", 5),  # 3 values; an empty array or object counts one more
        ("  ", 0),
    ],
)
def test_values_are_counted_without_decoding(text, values):
    assert jsonsafe.count_values(text) == values == jsonsafe.count_values(text.encode())


def test_json_lines_count_each_line_as_a_document():
    text = '{"a": 1}\n\n0\n"x"\n  [2]\n'
    documents = [json.loads(line) for line in text.split("\n") if line.strip()]
    assert jsonsafe.count_values(text, lines=True) == sum(map(_decoded, documents)) == 7
    assert jsonsafe.count_values(text) == 4  # read as one document it is not JSON, and counts less


def test_the_count_is_what_decoding_makes_for_random_documents():
    import random

    rng = random.Random(7)

    def value(depth: int):
        pick = rng.random()
        if depth > 4 or pick < 0.4:
            return rng.choice([0, -1.5, True, None, "", "a,b", '[{"', "\\", "é\n"])
        if pick < 0.7:
            return [value(depth + 1) for _ in range(rng.randrange(1, 5))]
        return {rng.choice("abc,:[{") + str(i): value(depth + 1) for i in range(rng.randrange(1, 5))}

    for _ in range(300):
        doc = value(0)
        text = json.dumps(doc, indent=rng.choice([None, 1, "\t"]), ensure_ascii=rng.random() < 0.5)
        assert jsonsafe.count_values(text) == _decoded(doc), text
        lines = "\n".join(json.dumps(value(1)) for _ in range(rng.randrange(1, 6)))
        assert jsonsafe.count_values(lines, lines=True) == sum(_decoded(json.loads(x)) for x in lines.split("\n"))


def test_the_count_is_exact_on_the_released_files():
    """Every released JSON and JSONL file that holds no empty array or object is counted
    exactly; the largest, Hexagons' train.jsonl, is well within MAX_UPLOAD_VALUES."""
    from app.config import Settings
    from tests.conftest import SHARED

    files = sorted(p for p in (SHARED / "data").rglob("*") if p.suffix in (".json", ".jsonl"))
    if not files:
        pytest.skip(f"no released data under {SHARED / 'data'}")
    largest = 0
    for path in files:
        raw = path.read_bytes()
        lines = path.suffix == ".jsonl"
        docs = [json.loads(x) for x in raw.split(b"\n") if x.strip()] if lines else [json.loads(raw)]
        strings_kept = re.sub(rb'"[^"]*"', b"s", re.sub(rb"\\.", b"", raw))
        empty = len(re.findall(rb"\[\s*\]|\{\s*\}", strings_kept))
        assert jsonsafe.count_values(raw, lines) == sum(map(_decoded, docs)) + empty, path
        largest = max(largest, jsonsafe.count_values(raw, lines))
    assert largest < Settings().max_upload_values / 2


def test_too_many_values_are_refused_before_decoding(monkeypatch):
    from app.config import get_settings

    monkeypatch.setenv("MAX_UPLOAD_VALUES", "10")
    get_settings.cache_clear()
    try:
        with pytest.raises(jsonsafe.TooMany):
            jsonsafe.loads("[" + ",".join("1" * 10) + "]")  # 11 values: the list and its 10
        assert jsonsafe.loads("[" + ",".join("1" * 9) + "]") == [1] * 9  # 10: at the limit
        with pytest.raises(json.JSONDecodeError, match=r"more than 10 values .*MAX_UPLOAD_VALUES"):
            jsonsafe.loads('{"a": [[], [], [], [], []]}')
        assert jsonsafe.loads('"' + "x" * 100 + '"') == "x" * 100  # long text, one value
    finally:
        get_settings.cache_clear()
    assert jsonsafe.too_many("[" + "[]," * 10 + "[]]", limit=22)
    assert not jsonsafe.too_many("[" + "[]," * 10 + "[]]", limit=23)
