"""Closing a study asks first and says what it does; a closed study can be reopened and its
workers carry on where they were."""

from __future__ import annotations

from sqlalchemy import select

from app.audit import AuditEntry
from app.studies import assignment
from app.studies.models import Annotation, Assignment
from tests.conftest import create_tom_study, login, make_user


def test_close_asks_then_closes_and_reopening_loses_nothing(client, session):
    owner = make_user(session, "researcher")
    csrf = login(client, owner)
    study = create_tom_study(session, owner, bundle_size=3, gold_rate=0.0)
    b = assignment.enter(session, study, "prolific", "mid-task", "s", "x")
    lease = assignment.next_item(session, study, b.id)
    url = f"/studies/{study.id}/state"

    # The first post only asks: the page says what closing does; the study stays live.
    r = client.post(url, data={"csrf_token": csrf, "state": "closed"}, follow_redirects=False)
    assert r.status_code == 200
    assert "Close the study" in r.text and "nothing is deleted" in r.text
    assert "1 item in flight" in r.text and "reopen it later" in r.text
    session.refresh(study)
    assert study.state == "live"
    assert not session.scalars(select(AuditEntry).where(AuditEntry.action == "study.closed")).all()

    r = client.post(url, data={"csrf_token": csrf, "state": "closed", "confirm": "close"}, follow_redirects=False)
    assert r.status_code == 303
    session.refresh(study)
    assert study.state == "closed"
    page = client.get(f"/studies/{study.id}").text
    assert 'id="state-live"' in page and ">Reopen<" in page and 'id="state-closed"' not in page

    r = client.post(url, data={"csrf_token": csrf, "state": "live"}, follow_redirects=False)
    assert r.status_code == 303
    session.refresh(study)
    assert study.state == "live"
    assert "The study is open again." in client.get(f"/studies/{study.id}").text
    log = [
        (e.action, e.detail.get("previous"))
        for e in session.scalars(select(AuditEntry).where(AuditEntry.target_type == "study").order_by(AuditEntry.id))
    ]
    assert log[-2:] == [("study.closed", "live"), ("study.live", "closed")]

    # The worker's open item survived the close: they answer it and go on.
    session.expire_all()
    assert session.get(Assignment, lease.id).state == "leased"
    assignment.submit(session, study, b.id, lease.id, {"answer": "Yes"}, "after-reopen")
    assert len(session.scalars(select(Annotation)).all()) == 1
    assert assignment.next_item(session, study, b.id) is not None


def test_a_draft_cannot_be_closed_and_a_bad_state_names_the_field(client, session):
    owner = make_user(session, "researcher")
    csrf = login(client, owner)
    study = create_tom_study(session, owner, live=False)
    for state in ("closed", "paused", "archived"):
        r = client.post(
            f"/studies/{study.id}/state",
            data={"csrf_token": csrf, "state": state, "confirm": "close"},
            headers={"accept": "application/json"},
        )
        assert r.status_code == 422 and r.json()["field"] == "state", r.text
    session.refresh(study)
    assert study.state == "draft"
