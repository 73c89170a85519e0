"""A file where a form expects a word, and a token beyond ASCII, are refused as bad input, never
a 500: a multipart form with a file under `csrf_token` (any cookie-authenticated write), a
token holding non-ASCII characters (form field and header), and a file under `assignment_id`
on the crowd answer route. Found by the type checks of issue 27.5."""

from __future__ import annotations

import uuid

from sqlalchemy import func, select

from app.studies.models import Annotation
from tests.conftest import create_tom_study, login, make_user
from tests.integration.test_security import consent, enter, hidden


def test_a_file_or_a_non_ascii_word_as_the_csrf_token_is_refused_with_403(client, session):
    owner = make_user(session, "researcher")
    token = login(client, owner)
    refused = [
        client.post("/agents", files={"csrf_token": ("t.txt", token.encode())}, data={"name": "x"}),
        client.post("/agents", data={"csrf_token": "é" + token, "name": "x"}),
        client.post("/agents", data={"name": "x"}, headers={"X-CSRF-Token": "\u00e9t\u00e9".encode("latin-1")}),
    ]
    assert [r.status_code for r in refused] == [403, 403, 403], [r.text for r in refused]
    # The right token still passes the check (whatever the route then says of the form).
    assert client.post("/agents", data={"csrf_token": token, "name": "x"}).status_code != 403


def test_a_file_as_the_assignment_id_is_refused_and_nothing_is_stored(client, session):
    owner = make_user(session, "researcher")
    study = create_tom_study(session, owner)
    token = enter(client, study.slug, "w-files")
    consent(client, study.slug, token)
    page = client.get(f"/task/{study.slug}").text
    aid = hidden(page, "assignment_id")
    r = client.post(
        f"/task/{study.slug}/answer",
        data={"csrf_token": token, "idempotency_key": uuid.uuid4().hex, "answer": "Yes"},
        files={"assignment_id": ("a.txt", aid.encode())},
    )
    assert r.status_code == 422 and "assignment" in r.text, r.text
    session.expire_all()
    assert session.scalar(select(func.count()).select_from(Annotation)) == 0
