"""Re-attack of issue 26.8: JSON request bodies and form fields holding U+0000 or a lone
surrogate are refused with a 4xx, never a 500 (PostgreSQL text refuses U+0000)."""

from __future__ import annotations

import json

import pytest

from app.auth.security import create_token
from tests.conftest import make_user

BAD = {"U+0000": "x\u0000y", "lone surrogate": "\ud800"}


@pytest.mark.parametrize("bad", sorted(BAD))
def test_strings_no_column_holds_in_bodies_and_forms_are_refused(bad, app, session):
    from fastapi.testclient import TestClient

    from app.kinds import get_kind

    researcher = make_user(session, "researcher")
    token = create_token(session, researcher)
    session.commit()
    headers = {"Authorization": f"Bearer {token}"}
    value = BAD[bad]
    demo = get_kind("tom").demo()
    problems = []
    with TestClient(app, raise_server_exceptions=False) as client:
        # ensure_ascii keeps the escapes on the wire, as a JSON client sends them
        r = client.post(
            "/api/v1/agents",
            headers={**headers, "content-type": "application/json"},
            content=json.dumps({"kind": "tom", "name": value}),
        )
        if not 400 <= r.status_code < 500:
            problems.append(f"POST /api/v1/agents name: {r.status_code} {r.text[:200]}")
        r = client.post(
            "/api/v1/studies",
            headers=headers,
            data={"kind": "tom", "format": demo["format"], "settings": json.dumps({"title": value})},
            files={"file": ("dialogues.jsonl", demo["items"], "application/octet-stream")},
        )
        if not 400 <= r.status_code < 500:
            problems.append(f"POST /api/v1/studies settings.title: {r.status_code} {r.text[:200]}")
    assert not problems, "\n".join(problems)
