"""One annotation, one request (issue 14): a submit answers with the next item, by the API and
on the task page; and what the single-statement path on PostgreSQL (app/studies/hotpath.py)
caches never outlives a change: an item's new reference scores the answers after it, a paused
study or a rejected worker is refused at once, a replay returns the stored answer."""

from __future__ import annotations

import re

from sqlalchemy import func, select, update

from app.studies import services
from app.studies.models import Annotation, Assignment, Item, Participant
from app.studies.consent import consent_version
from tests.conftest import make_user
from tests.integration.test_crowd_integrity import answer, api_start, start, tiny_study


def _submit(client, slug: str, a_id: int, answer_: str = "Yes", key: str | None = None):
    return client.post(
        f"/api/v1/crowd/{slug}/submit",
        json={"assignment_id": a_id, "idempotency_key": key or f"k-{a_id}", "response": {"answer": answer_}},
    )


def test_a_submit_answers_with_the_next_item_to_the_end(client, session):
    owner = make_user(session, "researcher")
    study = tiny_study(session, owner, 12, bundle_size=4)
    session.commit()
    api_start(client, study.slug, {"PROLIFIC_PID": "p1", "STUDY_ID": "s", "SESSION_ID": "x"})
    body = client.get(f"/api/v1/crowd/{study.slug}/next").json()
    seen = []
    for position in range(1, 5):
        assert (body["state"], body["position"], body["of"]) == ("item", position, 4), body
        seen.append(body["assignment_id"])
        r = _submit(client, study.slug, body["assignment_id"])
        assert r.status_code == 200, r.text
        stored = r.json()
        assert stored["stored"] is True
        # A replay (the reply was lost) returns the stored answer, not a second one.
        again = _submit(client, study.slug, body["assignment_id"])
        assert again.json()["annotation"] == stored["annotation"]
        body = stored["next"]
    assert body["state"] == "done" and body["complete"] is True and body["code"], body
    assert len(set(seen)) == 4
    assert len(session.scalars(select(Annotation).where(Annotation.study_id == study.id)).all()) == 4


def test_the_answer_page_is_the_next_item(client, session):
    owner = make_user(session, "researcher")
    study = tiny_study(session, owner, 12, bundle_size=3)
    session.commit()
    page = start(client, study.slug, "w-page")
    for position in (1, 2, 3):
        assert f"{position} of 3" in page, page[:400]
        page = answer(client, study.slug, page)
    assert "WHOLE" in page or "code" in page.lower(), page[:400]
    assert not re.search(r'name="assignment_id"', page)


def test_an_item_whose_reference_changed_scores_against_the_new_one(client, session):
    """As a kind's consolidation rewrites a reference while leases are out (Hexagons)."""
    owner = make_user(session, "researcher")
    study = tiny_study(session, owner, 12, bundle_size=4)
    session.commit()
    api_start(client, study.slug, {"PROLIFIC_PID": "p2", "STUDY_ID": "s", "SESSION_ID": "x"})
    for truth, expected in (("Yes", 1.0), ("No", 0.0)):
        lease = client.get(f"/api/v1/crowd/{study.slug}/next").json()  # shown, then changed
        item_id = session.scalar(select(Assignment.item_id).where(Assignment.id == lease["assignment_id"]))
        session.execute(update(Item).where(Item.id == item_id).values(reference={"answer": truth}))
        session.commit()
        r = _submit(client, study.slug, lease["assignment_id"], "Yes")
        assert r.status_code == 200, r.text
        score = session.scalar(select(Annotation.score).where(Annotation.id == r.json()["annotation"]))
        assert score == expected, (truth, score)


def test_a_paused_study_waits_and_a_rejected_worker_is_refused_at_once(client, session):
    owner = make_user(session, "researcher")
    study = tiny_study(session, owner, 12, bundle_size=4)
    session.commit()
    api_start(client, study.slug, {"PROLIFIC_PID": "p3", "STUDY_ID": "s", "SESSION_ID": "x"})
    lease = client.get(f"/api/v1/crowd/{study.slug}/next").json()
    assert lease["state"] == "item"
    services.set_state(session, study, "paused", owner)
    session.commit()
    # The item in hand may still be answered, so it is still given; then the task waits,
    # saying why (issue 24: a pause is not a refusal).
    r = client.get(f"/api/v1/crowd/{study.slug}/next")
    assert r.status_code == 200 and r.json()["assignment_id"] == lease["assignment_id"], r.text
    r = _submit(client, study.slug, lease["assignment_id"])
    assert r.status_code == 200 and r.json()["next"]["state"] == "wait", r.text
    r = client.get(f"/api/v1/crowd/{study.slug}/next")
    assert r.status_code == 200 and r.json()["state"] == "wait", r.text
    assert "paused this study for now. Everything you sent is saved" in r.json()["message"]
    assert r.headers["retry-after"] == "30"
    services.set_state(session, study, "live", owner)
    session.commit()
    current = client.get(f"/api/v1/crowd/{study.slug}/next").json()
    assert current["state"] == "item"
    session.execute(update(Participant).where(Participant.study_id == study.id).values(status="rejected"))
    session.commit()
    r = client.get(f"/api/v1/crowd/{study.slug}/next")
    assert r.status_code == 409 and "reviewed and closed" in r.text
    # Even a malformed answer is told the worker was closed, not what is wrong with the answer.
    r = _submit(client, study.slug, current["assignment_id"], "Perhaps")
    assert r.status_code == 409 and "reviewed and closed" in r.text, r.text


def test_a_bundle_asked_for_its_item_many_times_at_once_holds_one_lease(db_url, session):
    """A double click or two tabs: the requests race, one item is leased, all get that one."""
    import threading

    import pytest

    from app.studies import assignment, hotpath

    if not hotpath.enabled(db_url):
        pytest.skip("the single-statement path is PostgreSQL's (SQLite takes the engine's)")
    owner = make_user(session, "researcher")
    study = tiny_study(session, owner, 40, bundle_size=10)
    session.commit()
    for n in range(5):
        bundle = assignment.enter(session, study, "prolific", f"racer-{n}")
        assignment.consent(session, study, bundle.id, consent_version(study))
        conf = hotpath.study(db_url, study.slug)
        gate, got = threading.Barrier(8), []

        def ask():
            gate.wait()
            lease = hotpath.next_lease(db_url, conf, bundle.id, None)
            got.append(lease.assignment_id if lease else None)

        threads = [threading.Thread(target=ask) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        leased = session.scalars(
            select(Assignment.id).where(Assignment.bundle_id == bundle.id, Assignment.state == "leased")
        ).all()
        assert len(leased) == 1, leased
        # Those that lost the race were declined (the caller then takes the engine's path,
        # which returns the same lease); none got another item.
        assert {g for g in got if g is not None} == set(leased), got


def test_the_one_lease_index_ends_older_double_leases_of_a_database_from_before(db_url, session):
    """Migration 0012 makes one live lease per bundle unique; a database from before that holds
    two in one bundle has the older ended as the engine ends a lease (capacity given back)."""
    from alembic import command

    from app.cli import alembic_config
    from app.db import get_engine
    from app.studies import assignment

    owner = make_user(session, "researcher")
    study = tiny_study(session, owner, 12, bundle_size=4)
    bundle = assignment.enter(session, study, "prolific", "double")
    first = assignment.next_item(session, study, bundle.id)
    session.commit()
    first_id, first_item = first.id, first.item_id
    session.close()
    get_engine(db_url).dispose()
    cfg = alembic_config(db_url)
    command.downgrade(cfg, "0011")
    other = session.scalar(
        select(Item.id).where(Item.study_id == study.id, Item.id != first_item, Item.is_gold.is_(False)).limit(1)
    )
    row = session.execute(select(Assignment.__table__).where(Assignment.id == first_id)).mappings().one()
    session.execute(
        Assignment.__table__.insert().values({**{k: v for k, v in row.items() if k != "id"}, "item_id": other})
    )
    session.execute(update(Item).where(Item.id == other).values(n_active=Item.n_active + 1))
    session.commit()
    session.close()
    get_engine(db_url).dispose()
    command.upgrade(cfg, "heads")
    states = dict(
        session.execute(select(Assignment.id, Assignment.state).where(Assignment.bundle_id == bundle.id)).all()
    )
    assert sorted(states.values()) == ["expired", "leased"] and states[first_id] == "expired"
    assert session.get(Item, first_item).n_active == 0 and session.get(Item, other).n_active == 1


def test_answers_through_the_single_statements_keep_the_leaderboard_totals(client, session):
    """The totals' triggers see the hot path's INSERT ... RETURNING like any other write: the
    leaderboard after a crowd's answers through the API equals a scan of those answers, and
    still after one worker is rejected."""
    from app.quality import service as quality
    from tests.integration.test_leaderboard_totals import check

    owner = make_user(session, "researcher")
    study = tiny_study(session, owner, 12, bundle_size=4, annotations_per_item=3)
    session.commit()
    for w, answer_ in enumerate(("Yes", "No", "Yes")):
        client.cookies.clear()
        api_start(client, study.slug, {"PROLIFIC_PID": f"t{w}", "STUDY_ID": "s", "SESSION_ID": "x"})
        body = client.get(f"/api/v1/crowd/{study.slug}/next").json()
        while body["state"] == "item":
            body = _submit(client, study.slug, body["assignment_id"], answer_).json()["next"]
    session.expire_all()
    assert session.scalar(select(func.count()).select_from(Annotation).where(Annotation.study_id == study.id)) == 12
    check(session, study)
    pid = session.scalar(select(Participant.id).where(Participant.study_id == study.id).limit(1))
    quality.decide(session, study, [pid], "rejected", make_user(session, "admin"), reason="test")
    session.expire_all()
    check(session, study)


def test_a_next_that_waited_for_a_submit_never_returns_the_answered_lease(db_url, session):
    """`next` waits for the bundle's lock while a submit commits: it must lease the next slot,
    not hand back the item just answered (whose lease its snapshot still shows as live)."""
    import threading
    import time

    import psycopg
    import pytest

    from app.studies import assignment, hotpath

    if not hotpath.enabled(db_url):
        pytest.skip("the single-statement path is PostgreSQL's (SQLite takes the engine's)")
    owner = make_user(session, "researcher")
    study = tiny_study(session, owner, 12, bundle_size=4)
    session.commit()
    bundle = assignment.enter(session, study, "prolific", "waiter")
    assignment.consent(session, study, bundle.id, consent_version(study))
    conf = hotpath.study(db_url, study.slug)
    first = hotpath.next_lease(db_url, conf, bundle.id, None)
    assert first is not None and first.slot == 0
    got = []
    with psycopg.connect(db_url.replace("postgresql+psycopg://", "postgresql://")) as other:
        # A submit in flight: it holds the bundle's lock and has answered the lease.
        other.execute("SELECT id FROM bundles WHERE id = %s FOR UPDATE", (bundle.id,))
        other.execute(
            "UPDATE assignments SET state = 'completed', completed_at = now() WHERE id = %s", (first.assignment_id,)
        )
        other.execute("UPDATE bundles SET n_done = n_done + 1 WHERE id = %s", (bundle.id,))
        asker = threading.Thread(target=lambda: got.append(hotpath.next_lease(db_url, conf, bundle.id, None)))
        asker.start()
        time.sleep(1.0)  # the statement has taken its snapshot and waits for the lock
        other.commit()
    asker.join(timeout=30)
    lease = got[0]
    assert lease is None or (lease.assignment_id != first.assignment_id and lease.slot == 1), lease
    # Whatever this statement did, asking again gives the second slot's item.
    again = hotpath.next_lease(db_url, conf, bundle.id, None)
    assert again is not None and again.slot == 1 and again.assignment_id != first.assignment_id
