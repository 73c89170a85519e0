"""Auto-pause (issue 29, "Stop"): the researcher marks comparisons; the sweeper leaves the study
live while one of them is open and pauses it, recorded, once every marked one is settled; the
study page shows the marks, their verdicts and when it paused itself. SQLite and PostgreSQL."""

from __future__ import annotations

from fastapi.testclient import TestClient
from sqlalchemy import select

from app.audit import AuditEntry
from app.leaderboards import adaptive
from app.studies.models import Study
from tests.conftest import login, make_user
from tests.integration.test_adaptive import PATHS, Crowd, _study


def test_the_study_pauses_itself_when_every_marked_comparison_is_settled(client, app, session):
    owner = make_user(session, "researcher")
    study = _study(session, owner)  # human and toy tie (stay open); bad settles below both
    researcher = TestClient(app)
    login(researcher, owner)
    url = f"/api/v1/studies/{study.id}/auto-pause"
    assert researcher.get(url).json() == {
        "pairs": [],
        "settled": False,
        "paused_at": None,
        "agents": ["bad", "human", "toy"],
    }
    for bad in ({"pairs": [["human", "nobody"]]}, {"pairs": [["human", "human"]]}, {"pairs": [["human"]]}):
        r = researcher.put(url, json=bad)
        assert r.status_code == 422, (bad, r.text)

    # Marked: human vs toy (never settles here) and bad vs human.
    r = researcher.put(url, json={"pairs": [["human", "toy"], ["bad", "human"]]})
    assert r.status_code == 200, r.text
    assert [p["state"] for p in r.json()["pairs"]] == ["open", "open"]
    full = lambda items: all(i.n_active >= 2 for i in items.values() if not i.is_gold)  # noqa: E731
    Crowd(client, session, study).work(10 * PATHS, rule=None, until=full)  # every item done
    adaptive.refresh()
    session.expire_all()
    now = researcher.get(url).json()
    assert [p["state"] for p in now["pairs"]] == ["open", "above"], now
    assert "human above bad, settled after" in now["pairs"][1]["verdict"]
    assert session.get(Study, study.id).state == "live"  # one marked comparison is open

    # Only the settled one marked: the next sweep pauses the study and records when.
    r = researcher.put(url, json={"pairs": [["bad", "human"]]})
    assert r.status_code == 200 and r.json()["settled"] is True
    assert session.get(Study, study.id).state == "live"  # the sweeper pauses, not the request
    assert study.id in adaptive.refresh()
    session.expire_all()
    paused = session.get(Study, study.id)
    assert paused.state == "paused" and paused.auto_paused_at is not None
    entry = session.scalars(select(AuditEntry).where(AuditEntry.action == "study.auto_paused")).one()
    assert entry.target_id == str(study.id) and "human above bad" in entry.detail["verdicts"][0]
    assert researcher.get(url).json()["paused_at"] is not None
    page = researcher.get(f"/studies/{study.id}")
    assert 'id="auto-paused"' in page.text and "Paused itself at" in page.text
    assert "bad vs human: human above bad, settled after" in page.text
    # Launched again by the researcher: it stays live (once per marking).
    r = researcher.post(f"/api/v1/studies/{study.id}/state", json={"state": "live"})
    assert r.status_code == 200, r.text
    adaptive.refresh()
    session.expire_all()
    assert session.get(Study, study.id).state == "live"


def test_the_study_pages_boxes_mark_and_unmark(client, app, session):
    from tests.conftest import csrf_of

    owner = make_user(session, "researcher")
    study = _study(session, owner)
    login(client, owner)
    page = client.get(f"/studies/{study.id}")
    assert 'id="auto-pause"' in page.text and page.text.count('name="pair"') == 3
    r = client.post(
        f"/studies/{study.id}/auto-pause",
        data={"csrf_token": csrf_of(client), "pair": ['["bad", "toy"]']},
        follow_redirects=False,
    )
    assert r.status_code == 303, r.text
    session.expire_all()
    assert session.get(Study, study.id).auto_pause == [["bad", "toy"]]
    page = client.get(f"/studies/{study.id}")
    assert "bad vs toy: open after" in page.text
    r = client.post(f"/studies/{study.id}/auto-pause", data={"csrf_token": csrf_of(client)}, follow_redirects=False)
    assert r.status_code == 303
    session.expire_all()
    assert not session.get(Study, study.id).auto_pause
