"""A researcher previews a study of every kind through the worker's own pages: every item in
upload order, each answer checked by the kind as a worker's would be, and nothing stored."""

from __future__ import annotations

import re

import pytest
from sqlalchemy import select

from app.kinds import get_kind
from app.studies.models import Item, Study
from tests.conftest import login, make_user
from tests.preview_fixtures import every_kind, row_counts

pytestmark = pytest.mark.backend_agnostic(  # on SQLite only: see tests/conftest.py
    "the preview stores nothing; pages read items through the ORM"
)

# What each kind's page shows of its item (its own template rendered it).
MARKS = {
    "tom": 'class="dialogue"',
    "navigation": 'id="nav-view"',
    "sts": 'id="sts-player"',
    "sts-play": 'id="sts-play"',
    "hexagons": 'id="hex-board"',
    "hexagons-describe": 'id="hex-target"',
    "a3ds": 'class="a3ds-caption"',
}


def test_a_preview_of_every_kind_renders_each_item_checks_answers_and_stores_nothing(app, client, session):
    owner = make_user(session, "researcher")
    studies = every_kind(session, owner)
    csrf = login(client, owner)
    before = row_counts(session)
    for name, study_id in studies.items():
        study = session.get(Study, study_id)
        items = session.scalars(select(Item).where(Item.study_id == study_id).order_by(Item.id)).all()
        start = client.get(f"/studies/{study_id}/preview")
        assert start.status_code == 200 and "Nothing is stored" in start.text and 'id="preview-start"' in start.text
        for n, item in enumerate(items, 1):
            page = client.get(f"/studies/{study_id}/preview?n={n}")
            assert page.status_code == 200, (name, page.text[:500])
            assert MARKS[name] in page.text, name
            assert f"of {len(items)}" in page.text and item.external_id in page.text
            # The answer goes to the preview, never to the crowd's routes.
            assert 'action="/studies/%d/preview"' % study_id in page.text
            assert "/task/" not in page.text
            # An empty answer is refused with the kind's own message, on the same item.
            r = client.post(f"/studies/{study_id}/preview", data={"csrf_token": csrf, "n": str(n)})
            assert r.status_code == 422, (name, r.text[:300])
            try:
                get_kind(study.kind).parse_response({}, payload=item.payload, settings=study.kind_settings or {})
            except Exception as exc:  # the very message the worker would get
                assert str(exc).replace("'", "&#39;").replace('"', "&#34;")[:40] in r.text, name
            assert 'id="preview-error"' in r.text and MARKS[name] in r.text
        end = client.get(f"/studies/{study_id}/preview?n={len(items) + 1}")
        assert "End of the preview" in end.text
    # A right answer is accepted and moves on (the ToM study's first item).
    tom = studies["tom"]
    first = session.scalars(select(Item).where(Item.study_id == tom).order_by(Item.id)).first()
    answer = (first.reference or {}).get("answer", "Yes")
    r = client.post(
        f"/studies/{tom}/preview", data={"csrf_token": csrf, "n": "1", "answer": answer}, follow_redirects=False
    )
    assert r.status_code == 303 and r.headers["location"] == f"/studies/{tom}/preview?n=2"
    flash = client.get(r.headers["location"]).text
    assert re.search(r"Item 1: the answer was accepted.*Nothing was stored", flash)
    assert row_counts(session) == before


def test_only_the_owner_or_an_admin_previews(app, client, session):
    owner, other = make_user(session, "researcher"), make_user(session, "researcher")
    from tests.conftest import create_tom_study

    study = create_tom_study(session, owner)
    session.commit()
    login(client, other)
    assert client.get(f"/studies/{study.id}/preview?n=1").status_code == 404
    client.cookies.clear()
    login(client, make_user(session, "admin"))
    assert client.get(f"/studies/{study.id}/preview?n=1").status_code == 200


def test_the_study_page_offers_the_preview_not_a_test_worker(app, client, session):
    from tests.conftest import create_tom_study

    owner = make_user(session, "researcher")
    study = create_tom_study(session, owner)
    session.commit()
    login(client, owner)
    page = client.get(f"/studies/{study.id}").text
    assert f'href="/studies/{study.id}/preview"' in page
    assert "test worker" not in page and "PROLIFIC_PID=researcher" not in page


def test_the_upload_preview_of_a_missions_file_shows_a_note_not_a_grid(app, client, session):
    """Nothing of an upload is stored before the study is created, so no route can draw a
    mission's grid: the preview says so instead of asking /api/v1/sts/play// for it. The frame
    is sandboxed (scripts only, for a kind whose page needs no session)."""
    import html
    import json

    owner = make_user(session, "researcher")
    csrf = login(client, owner)
    mission = json.dumps({"level": "BabyAI-GoToLocal-v0", "seed": 2, "id": "m2"}).encode()
    r = client.post(
        "/studies/new",
        files={"file": ("m.jsonl", mission)},
        data={"csrf_token": csrf, "title": "Play", "kind": "sts", "format": "missions", "action": "preview"},
    )
    assert r.status_code == 200, r.text[-500:]
    frames = re.findall(r'<iframe class="worker-view" sandbox="([^"]*)"[^>]*srcdoc="([^"]*)"', r.text)
    assert frames and frames[0][0] == "allow-scripts"
    doc = html.unescape(frames[0][1])
    assert 'id="sts-play-note"' in doc and 'class="sts-instruction"' in doc
    assert 'id="sts-play"' not in doc and "/api/v1/sts/play/" not in doc and "play.js" not in doc
