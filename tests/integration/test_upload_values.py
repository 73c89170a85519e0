"""Issue 26, after round 10: an upload is refused by the values it holds before it is decoded.

A JSON upload was decoded whole in the web process: a 50 MB navigation (R2R) file of
`[[],[],...]` took 13.4 s and 1.2 GB before its rows were refused, as Python holds an empty
list in 56 bytes that the file writes in 3. Every JSON, JSON-lines and CSV reader now counts
the values (items, keys, cells) first, against MAX_UPLOAD_VALUES (2,000,000; the largest
released file holds 719,470).
"""

from __future__ import annotations

import json
import tracemalloc

import pytest
from sqlalchemy import func, select

from app.auth.security import create_token
from app.jsonsafe import count_values
from app.kinds import all_kinds
from app.studies.models import Item, Study
from tests.conftest import ROOT, make_user

pytestmark = pytest.mark.backend_agnostic("the refusal comes before any query")

MB = 1 << 20


def set_env(monkeypatch, **env) -> None:
    from app.config import get_settings

    for k, v in env.items():
        monkeypatch.setenv(k, str(v))
    get_settings.cache_clear()


def post_items(client, token: str, kind: str, fmt: str, data: bytes):
    """A new study of the kind from an items file in `fmt`, through the API."""
    return client.post(
        "/api/v1/studies",
        headers={"Authorization": f"Bearer {token}"},
        data={"kind": kind, "format": fmt, "settings": json.dumps({"title": "values"})},
        files={"file": (f"items.{fmt}", data, "application/octet-stream")},
    )


def post_holding(client, token: str, kind: str, fmt: str, data: bytes):
    """post_items's answer, and the most memory Python held while it was answered."""
    tracemalloc.start()
    try:
        r = post_items(client, token, kind, fmt, data)
        return r, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def refused_holding(client, session, kind: str, fmt: str, data: bytes) -> tuple[dict, int]:
    """A researcher's upload of `data`, refused (422) with no study or item row added: its
    answer's JSON, and the most memory Python held while it was answered."""
    token = create_token(session, make_user(session, "researcher"))
    session.commit()
    before = study_rows(session)
    r, peak = post_holding(client, token, kind, fmt, data)
    assert r.status_code == 422, r.text
    assert study_rows(session) == before
    return r.json(), peak


def study_rows(session) -> tuple[int, int]:
    session.expire_all()
    return session.scalar(select(func.count()).select_from(Study)), session.scalar(
        select(func.count()).select_from(Item)
    )


def _demo_files() -> list[tuple[str, str, bytes]]:
    """(kind, format, a file of items) of every installed kind whose demo has one, and Common-ToM's
    question CSV: the JSON, JSON-lines and CSV readers."""
    out = []
    for name, kind in sorted(all_kinds().items()):
        demo = kind.demo() if name != "navigation" else None  # navigation's builds houses: its R2R file is below
        if demo and demo.get("items") and demo.get("format") in kind.item_formats:
            out.append((name, demo["format"], demo["items"]))
    out.append(("tom", "csv", (ROOT / "tests" / "fixtures" / "tom" / "questions.csv").read_bytes()))
    return out


@pytest.mark.parametrize("kind, fmt, data", _demo_files(), ids=lambda v: v if isinstance(v, str) else "")
def test_a_file_past_the_values_limit_is_refused_naming_it(kind, fmt, data, app, client, session, monkeypatch):
    researcher = make_user(session, "researcher")
    token = create_token(session, researcher)
    session.commit()
    before = study_rows(session)
    set_env(monkeypatch, MAX_UPLOAD_VALUES=max(1, count_values(data, lines=True) // 3))
    r = post_items(client, token, kind, fmt, data)
    assert r.status_code == 422, r.text
    assert "MAX_UPLOAD_VALUES" in r.json()["detail"], r.json()
    assert study_rows(session) == before
    set_env(monkeypatch, MAX_UPLOAD_VALUES=2_000_000)
    assert post_items(client, token, kind, fmt, data).status_code == 201  # the same file, within it


@pytest.mark.parametrize(
    "kind, fmt, data",
    [
        # 3 million empty lists (9 MB): 6 million values; decoded, some 200 MB
        ("navigation", "r2r", b"[" + b"[]," * 3_000_000 + b"[]]"),
        # 3 million empty objects a line each (9 MB), read line by line
        ("hexagons", "procedures", b"{}\n" * 3_000_000),
    ],
    ids=["R2R JSON", "Hexagons JSON lines"],
)
def test_a_file_of_empty_values_is_refused_holding_little(kind, fmt, data, app, client, session):
    answer, peak = refused_holding(client, session, kind, fmt, data)
    assert "more than 2,000,000" in answer["detail"] and "MAX_UPLOAD_VALUES" in answer["detail"], answer
    # The request holds the 9 MB upload a few times over; decoding it would hold 200 MB and more.
    assert peak < 64 * MB, f"refusing it held {peak // MB} MB"


def _emoji_lines(size: int, before: bytes, after: bytes = b"") -> bytes:
    """About `size` bytes of lines, each `before`, an emoji (U+1F600) and `after`."""
    one = before + "\U0001f600".encode() + after + b"\n"
    return one * (size // len(one))


@pytest.mark.parametrize(
    "kind, fmt, data, field",
    [
        # 24 MB of JSON lines, each a 10 KB text ending in an emoji; line 1 misses its fields
        ("hexagons", "procedures", _emoji_lines(24 * MB, b'{"notes": "' + b"a" * 10_000, b'"}'), "index"),
        # 24 MB of CSV records, each a 10 KB cell ending in an emoji; the header is refused
        ("tom", "csv", b"question_id,nonsense\n" + _emoji_lines(24 * MB, b"q," + b"a" * 10_000), "nonsense"),
    ],
    ids=["JSON lines", "CSV"],
)
def test_an_emoji_on_each_line_is_refused_holding_little(kind, fmt, data, field, app, client, session):
    """Issue 26: an upload was decoded whole into one Python str, which CPython holds at 4 bytes a
    character once one character is past U+FFFF: 48 MB of JSON lines with an emoji on each held
    381 MB before line 1 was refused. Its lines are now decoded one at a time."""
    detail, peak = refused_holding(client, session, kind, fmt, data)
    assert detail.get("line") == 1 and detail.get("field") == field, detail
    # The request holds the 24 MB upload 3 times over (the client's body, the bytes read): 74 MB.
    # Its text decoded whole took 4 bytes a character, 96 MB more, and as many again split: 240 MB.
    assert peak < 4 * len(data), f"refusing {len(data) // MB} MB held {peak // MB} MB"


@pytest.mark.parametrize(
    "kind, fmt, before, after",
    [
        ("navigation", "r2r", b'[{"path_id": 1, "instructions": ["', b'"]}]'),
        ("tom", "cg", b'[\n{"cid": "', b'"}\n]'),  # a document over several lines: JSON lines are read a line at a time
    ],
    ids=["R2R", "Common-ToM CG"],
)
def test_a_json_document_with_an_emoji_is_refused_past_a_quarter_of_the_limit(
    kind, fmt, before, after, app, client, session, monkeypatch
):
    """A JSON document is parsed whole, from its whole text: one with an emoji is held at 4 bytes a
    character, and so is refused past a quarter of MAX_UPLOAD_BYTES in characters (24 MB of R2R with
    one emoji held 264 MB)."""
    researcher = make_user(session, "researcher")
    token = create_token(session, researcher)
    session.commit()
    set_env(monkeypatch, MAX_UPLOAD_BYTES=8 * MB)  # at most 2,097,152 characters with an emoji
    emoji = "\U0001f600".encode()
    r, peak = post_holding(client, token, kind, fmt, before + b"a" * (3 * MB) + emoji + after)
    assert r.status_code == 422, r.text
    detail = r.json()["detail"]
    assert "U+FFFF" in detail and "2,097,152" in detail and "MAX_UPLOAD_BYTES" in detail, detail
    assert peak < 12 * MB, f"refusing it held {peak // MB} MB"  # decoded, 12 MB; parsed, as much again
    # Within the limit the document is parsed, and refused for what it holds.
    r = post_items(client, token, kind, fmt, before + b"a" * (2 * MB - 100) + emoji + after)
    assert r.status_code == 422 and "U+FFFF" not in r.json()["detail"], r.text
    assert study_rows(session)[0] == 0
