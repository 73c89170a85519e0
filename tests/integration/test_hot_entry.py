"""Entry, consent and a bundle's end in one or two round trips on PostgreSQL (issue 14,
app/studies/hotpath.py), with the engine's rules: one worker entering many times at once gets
no more tasks than the study allows; consent is to the text shown; the automatic review at a
bundle's end approves once, with its audit entry, and the end shows the completion code."""

from __future__ import annotations

import threading
import uuid

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from app.auth.models import User
from app.studies import assignment, hotpath, services
from app.studies.models import Assignment, Bundle, Item, Participant
from app.studies.consent import consent_details, consent_text, consent_version
from tests.conftest import create_tom_study, make_user
from tests.integration.test_nav_quality import participant_of, qc_study, system_approvals


def _pg_only(db_url):
    if not hotpath.enabled(db_url):
        pytest.skip("the single-statement path is PostgreSQL's (SQLite takes the engine's)")


@pytest.mark.parametrize("cap", [1, 2])
def test_one_worker_entering_many_times_at_once_gets_the_tasks_allowed(db_url, session, cap):
    """Eight entries of one worker with eight assignment ids at once (a worker who opens the
    link in several tabs of a platform that gives each its own id), then eight consents at once:
    entries hold nothing (issue 24), and consent, which binds the task, allows `cap`, never more."""
    _pg_only(db_url)
    owner = make_user(session, "researcher")
    study = create_tom_study(session, owner, bundle_size=2, gold_rate=0.0, max_bundles_per_worker=cap)
    # The worker came before (their participant row exists): the entries do not queue on its
    # insert, only on its lock.
    worker = User(
        role="worker", platform="prolific", external_id="tabs", pseudonym=assignment.pseudonym("prolific", "tabs")
    )
    session.add(worker)
    session.flush()
    session.add(Participant(study_id=study.id, worker_id=worker.id))
    session.commit()
    info = hotpath.study(db_url, study.slug)
    browser = assignment.browser_hash("b" * 32)

    def at_once(step) -> list:
        gate, got = threading.Barrier(8), [None] * 8

        def run(n):
            gate.wait()
            got[n] = step(n)

        threads = [threading.Thread(target=run, args=(n,)) for n in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return got

    entered = at_once(
        lambda n: hotpath.enter(
            db_url, info, "prolific", "tabs", f"session-{n}", "st", browser, assignment.address_pseudonym("10.0.0.1")
        )
    )
    made = session.scalars(select(Bundle.id).where(Bundle.study_id == study.id)).all()
    assert len(made) == 8 and sorted(e.bundle_id for e in entered) == sorted(made)
    agreed = at_once(lambda n: hotpath.consent(db_url, info, entered[n].bundle_id, info.consent_version, browser))
    session.expire_all()
    consented = session.scalars(
        select(Bundle.id).where(Bundle.study_id == study.id, Bundle.consented_at.is_not(None))
    ).all()
    assert len(consented) == cap and agreed.count(True) == cap, (consented, agreed)
    # And the engine agrees: a ninth consent is refused with the reason.
    left = next(e.bundle_id for e in entered if e.bundle_id not in consented)
    with pytest.raises(assignment.NotAvailable, match="allows|per person"):
        assignment.consent(session, study, left, info.consent_version, browser)


def test_entry_and_consent_by_the_api_take_one_statement_and_keep_the_rules(client, session, db_url):
    owner = make_user(session, "researcher")
    study = create_tom_study(session, owner, bundle_size=2, gold_rate=0.0)
    session.commit()
    before = dict(hotpath.stats)
    params = {"PROLIFIC_PID": "api-1", "STUDY_ID": "st", "SESSION_ID": "s1"}
    body = client.post(f"/api/v1/crowd/{study.slug}/enter", json={"params": params}).json()
    assert (body["size"], body["done"], body["consented"]) == (2, 0, False)
    assert body["consent_version"] == consent_version(study)
    assert body["consent"] == consent_text(study)

    # A version that is not the text shown: refused, with the text to read.
    r = client.post(f"/api/v1/crowd/{study.slug}/consent", json={"consent_version": "0" * 16})
    assert r.status_code == 409 and r.json()["consent_version"] == body["consent_version"]
    r = client.post(f"/api/v1/crowd/{study.slug}/consent", json={"consent_version": body["consent_version"]})
    assert r.json() == {"consented": True, "consent_version": body["consent_version"]}
    bundle = session.scalar(select(Bundle).where(Bundle.study_id == study.id))
    assert bundle.consented_at is not None and bundle.consent_version == body["consent_version"]
    # Consent given before stands; entering again resumes the task, consented.
    again = client.post(f"/api/v1/crowd/{study.slug}/consent", json={"consent_version": body["consent_version"]})
    assert again.status_code == 200
    back = client.post(f"/api/v1/crowd/{study.slug}/enter", json={"params": params}).json()
    assert back["consented"] is True and back["browser_secret"] == body["browser_secret"]

    # Another browser in this worker's name: refused, as the engine refuses it.
    with TestClient(client.app) as other:
        r = other.post(f"/api/v1/crowd/{study.slug}/enter", json={"params": params})
        assert r.status_code == 403 and "another browser" in r.json()["detail"]

    # The researcher changes the consent text: the next worker reads the new one and agrees to
    # it (the cached texts are read again), and the first worker's consent stands.
    session.refresh(study)
    study.consent_text = "A new text."
    session.commit()
    with TestClient(client.app) as second:
        body2 = second.post(
            f"/api/v1/crowd/{study.slug}/enter", json={"params": {"PROLIFIC_PID": "api-2", "SESSION_ID": "s2"}}
        ).json()
        assert body2["consent"] == "A new text." and body2["consent_version"] != body["consent_version"]
        r = second.post(f"/api/v1/crowd/{study.slug}/consent", json={"consent_version": body["consent_version"]})
        assert r.status_code == 409 and r.json()["consent"] == "A new text."
        r = second.post(f"/api/v1/crowd/{study.slug}/consent", json={"consent_version": body2["consent_version"]})
        assert r.status_code == 200
    if hotpath.enabled(db_url):  # the common cases took the single statements
        assert hotpath.stats["enter"] - before["enter"] >= 2
        assert hotpath.stats["consent"] - before["consent"] >= 2


def test_the_end_of_a_task_approves_once_and_shows_the_code(client, session, db_url):
    """Navigation's QC episode reached: approved when the task ends, by the answer that ends it
    (one audit entry, no actor), and that answer's `next` is the end with the code."""
    owner = make_user(session, "researcher")
    study = qc_study(session, owner)
    session.commit()
    before = dict(hotpath.stats)
    r = client.post(f"/api/v1/crowd/{study.slug}/enter", json={"params": {"PROLIFIC_PID": "walker", "SESSION_ID": "w"}})
    client.post(f"/api/v1/crowd/{study.slug}/consent", json={"consent_version": r.json()["consent_version"]})
    nxt = client.get(f"/api/v1/crowd/{study.slug}/next").json()
    while nxt["state"] == "item":
        a = session.get(Assignment, nxt["assignment_id"])
        path = session.get(Item, a.item_id).reference["path"]
        r = client.post(
            f"/api/v1/crowd/{study.slug}/submit",
            json={
                "assignment_id": nxt["assignment_id"],
                "idempotency_key": uuid.uuid4().hex,
                "response": {"path": path, "trace": [], "rating": 3},
            },
        )
        assert r.status_code == 200, r.text
        nxt = r.json()["next"]
    assert nxt["state"] == "done" and nxt["complete"] is True
    assert nxt["code"] == study.completion_code and nxt["completed"] == study.bundle_size
    p = participant_of(session, study, "walker")
    assert (p.status, p.reason, p.reviewed_by) == ("approved", "auto: reached the QC goal (0.0 m)", None)
    entries = system_approvals(session, p)
    assert len(entries) == 1 and entries[0].action == "worker.approved"
    assert entries[0].detail == {"study": study.id, "reason": p.reason, "auto": True}
    assert (
        session.scalar(
            select(func.count()).select_from(Bundle).where(Bundle.study_id == study.id, Bundle.finished_at.is_not(None))
        )
        == 1
    )
    if hotpath.enabled(db_url):
        assert hotpath.stats["submit"] - before["submit"] == study.bundle_size


def test_an_entry_refused_for_the_studys_state_leaves_no_worker_behind(client, session, db_url):
    """The study was paused after a first entry filled the cache: a new worker's entry is
    refused, and no user or participant row of theirs is kept (the engine would roll back)."""
    owner = make_user(session, "researcher")
    study = create_tom_study(session, owner, bundle_size=2, gold_rate=0.0)
    session.commit()
    first = client.post(
        f"/api/v1/crowd/{study.slug}/enter",
        json={"params": {"PROLIFIC_PID": "early", "STUDY_ID": "st", "SESSION_ID": "s1"}},
    )
    assert first.status_code == 200, first.text
    services.set_state(session, study, "paused", owner)
    session.commit()
    other = TestClient(client.app)
    r = other.post(
        f"/api/v1/crowd/{study.slug}/enter",
        json={"params": {"PROLIFIC_PID": "late", "STUDY_ID": "st", "SESSION_ID": "s2"}},
    )
    assert r.status_code == 409 and "paused" in r.text, r.text
    session.expire_all()
    late = session.scalar(select(User).where(User.external_id == "late"))
    assert late is None or not session.scalar(
        select(func.count())
        .select_from(Participant)
        .where(Participant.worker_id == late.id, Participant.study_id == study.id)
    )


def test_the_texts_the_hot_path_shows_are_the_engines(session, db_url):
    """Entry, consent and a bundle's end show the study as the engine's services make it, from
    the one cached read of the row (hotpath.study); an edit is read again at its new version."""
    _pg_only(db_url)
    owner = make_user(session, "researcher")
    study = create_tom_study(
        session,
        owner,
        payment="£2",
        estimated_minutes=7,
        contact="lab@x.org",
        consent_text="Our text.",
        instructions="Read twice.",
        redirect_url="https://example.org/done",
    )
    session.commit()
    conf = hotpath.study(db_url, study.slug)
    shown = (
        conf.instructions,
        conf.consent,
        conf.consent_details,
        conf.consent_version,
        conf.completion_code,
        conf.redirect_url,
    )
    assert shown == (
        study.instructions,
        consent_text(study),
        tuple(consent_details(study)),
        consent_version(study),
        study.completion_code,
        study.redirect_url,
    )
    services.edit_study(session, study, services.StudyEdit(payment="£1"), owner)
    session.commit()
    hotpath.forget_study(db_url, study.slug)  # as a statement that saw the new version does
    again = hotpath.study(db_url, study.slug)
    assert again.version != conf.version and dict(again.consent_details)["Payment"] == "£1"
    assert again.consent_version == consent_version(study) != conf.consent_version
