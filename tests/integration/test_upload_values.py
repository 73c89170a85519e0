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
    researcher = make_user(session, "researcher")
    token = create_token(session, researcher)
    session.commit()
    before = study_rows(session)
    r, peak = post_holding(client, token, kind, fmt, data)
    assert r.status_code == 422, r.text
    assert "more than 2,000,000" in r.json()["detail"] and "MAX_UPLOAD_VALUES" in r.json()["detail"], r.json()
    assert study_rows(session) == before
    # The request holds the 9 MB upload a few times over; decoding it would hold 200 MB and more.
    assert peak < 64 * MB, f"refusing it held {peak // MB} MB"
