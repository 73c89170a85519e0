"""The hot path on PostgreSQL (app/studies/hotpath.py) and the engine (app/studies/assignment.py)
agree where a worker or an operator would notice (issue 14, the review's leftovers): a bundle's
gold slots are the same whichever path made it; leases are stamped and judged by the app's
clock, not the database's; a burst past the hot pool waits a bounded time, then is answered 503;
the task page's end comes from the answer that closed the bundle, with no engine call."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import select

from app.studies import assignment, hotpath
from app.studies.models import Annotation, Assignment, Bundle
from app.studies.consent import consent_version
from tests.conftest import create_tom_study, make_user, statements_run
from tests.integration.test_crowd_integrity import answer, api_start, start, tiny_study
from tests.integration.test_hot_entry import _pg_only


def test_a_bundles_gold_slots_are_the_same_by_the_hot_path_and_by_the_engine(db_url, session):
    _pg_only(db_url)
    owner = make_user(session, "researcher")
    study = create_tom_study(session, owner, bundle_size=10, gold_rate=0.3)
    session.commit()
    info = hotpath.study(db_url, study.slug)
    browser = assignment.browser_hash("g" * 32)
    drawn = {}
    for ext in ("hit-1", "hit-2", "hit-3", "hit-4"):
        entered = hotpath.enter(
            db_url, info, "prolific", "golden", ext, "st", browser, assignment.address_pseudonym("10.0.0.7")
        )
        assert entered is not None
        session.expire_all()
        hot = session.get(Bundle, entered.bundle_id).gold_slots
        # The same worker, the same assignment id, by the engine: the bundle made afresh.
        session.delete(session.get(Bundle, entered.bundle_id))
        session.commit()
        again = assignment.enter(session, study, "prolific", "golden", ext, browser=browser)
        assert len(hot) == 3 and again.gold_slots == hot, (ext, hot, again.gold_slots)
        drawn[ext] = hot
        session.delete(again)
        session.commit()
    # A draw, not one placement for everyone.
    assert len({tuple(v) for v in drawn.values()}) > 1, drawn


def test_leases_the_hot_path_makes_are_stamped_and_expire_by_the_apps_clock(client, session, db_url, monkeypatch):
    """The web's clock a day ahead of the database's (another machine): the lease is stamped by
    the web's, runs out by it, and the answer's time is measured by it."""
    _pg_only(db_url)
    owner = make_user(session, "researcher")
    study = tiny_study(session, owner, 12, bundle_size=3, lease_seconds=600)
    session.commit()
    clock = [assignment.utcnow() + timedelta(days=1)]
    monkeypatch.setattr(assignment, "utcnow", lambda: clock[0])
    before = dict(hotpath.stats)
    api_start(client, study.slug, {"PROLIFIC_PID": "clocked", "STUDY_ID": "s", "SESSION_ID": "c"})
    first = client.get(f"/api/v1/crowd/{study.slug}/next").json()
    lease = session.get(Assignment, first["assignment_id"])
    assert (lease.leased_at, lease.lease_expires_at) == (clock[0], clock[0] + timedelta(seconds=600))
    assert hotpath.stats["next"] - before["next"] == 1  # the hot path made it

    # Ten minutes and a second later by the app's clock: the lease has run out, and the worker
    # gets another item (the database's clock alone would still call it live).
    clock[0] += timedelta(seconds=601)
    second = client.get(f"/api/v1/crowd/{study.slug}/next").json()
    assert second["state"] == "item" and second["assignment_id"] != first["assignment_id"]
    session.expire_all()
    assert session.get(Assignment, first["assignment_id"]).state == "expired"

    # The hot path leases the next slot and stores its answer, both by the app's clock.
    r = client.post(
        f"/api/v1/crowd/{study.slug}/submit",
        json={"assignment_id": second["assignment_id"], "idempotency_key": "clock-1", "response": {"answer": "Yes"}},
    )
    third = r.json()["next"]
    clock[0] += timedelta(seconds=5)
    stored_before = hotpath.stats["submit"]
    r = client.post(
        f"/api/v1/crowd/{study.slug}/submit",
        json={"assignment_id": third["assignment_id"], "idempotency_key": "clock-2", "response": {"answer": "Yes"}},
    )
    assert r.status_code == 200 and hotpath.stats["submit"] == stored_before + 1
    ann = session.scalar(select(Annotation).where(Annotation.idempotency_key == "clock-2"))
    assert (ann.created_at, ann.duration_ms) == (clock[0], 5000)
    done = session.get(Assignment, third["assignment_id"])
    assert done.completed_at == clock[0]


def test_a_burst_past_the_hot_pool_waits_its_timeout_and_is_told_to_retry(client, session, db_url, monkeypatch):
    """DB_HOT_POOL_SIZE bounds the hot path's connections (not DB_POOL_SIZE); a request that
    finds them all busy waits DB_POOL_TIMEOUT for one, then gets 503 and Retry-After."""
    _pg_only(db_url)
    from app.config import get_settings

    owner = make_user(session, "researcher")
    study = tiny_study(session, owner, 12, bundle_size=3)
    session.commit()
    api_start(client, study.slug, {"PROLIFIC_PID": "bursty", "STUDY_ID": "s", "SESSION_ID": "b"})
    monkeypatch.setenv("DB_HOT_POOL_SIZE", "1")
    monkeypatch.setenv("DB_POOL_TIMEOUT", "1")
    get_settings.cache_clear()
    hotpath.reset()
    try:
        held = hotpath._engine(db_url).raw_connection()  # the one connection, busy elsewhere
        try:
            r = client.get(f"/api/v1/crowd/{study.slug}/next")
            assert r.status_code == 503 and r.headers["Retry-After"] == "10", r.text
        finally:
            held.close()
        r = client.get(f"/api/v1/crowd/{study.slug}/next")  # free again: served
        assert r.status_code == 200 and r.json()["state"] == "item", r.text
    finally:
        monkeypatch.delenv("DB_HOT_POOL_SIZE")
        monkeypatch.delenv("DB_POOL_TIMEOUT")
        get_settings.cache_clear()
        hotpath.reset()


def test_the_task_pages_end_comes_from_the_answer_with_no_engine_call(client, session, db_url):
    _pg_only(db_url)
    from app.db import get_engine

    owner = make_user(session, "researcher")
    study = tiny_study(session, owner, 12, bundle_size=3)
    session.commit()
    page = start(client, study.slug, "w-end")
    page = answer(client, study.slug, page)
    page = answer(client, study.slug, page)
    assert "3 of 3" in page
    before = dict(hotpath.stats)
    with statements_run(get_engine(db_url)) as statements:
        end = answer(client, study.slug, page)
    assert 'id="completion-code"' in end and study.completion_code in end, end[:500]
    assert "You completed 3 questions" in end
    # The answer's statement closed the bundle and the page came from it: no ORM statement,
    # and no `next` asked of the hot path (which would decline it and call the engine).
    assert statements == []
    assert hotpath.stats["submit"] - before["submit"] == 1
    assert hotpath.stats["next_engine"] == before["next_engine"]
    assert hotpath.stats["next"] == before["next"]
    session.expire_all()
    bundle = session.scalar(select(Bundle).where(Bundle.study_id == study.id))
    assert bundle.finished_at is not None and bundle.n_done == 3
    # And reloading the page shows the same end (by the engine).
    again = client.get(f"/task/{study.slug}").text
    assert study.completion_code in again and "You completed 3 questions" in again


def test_an_item_a_foreign_key_check_holds_is_still_leased_by_both_paths(client, session, db_url):
    """Storing a row that refers to an item (an answer, the totals' rebuild) holds the item's
    row FOR KEY SHARE until it commits. Leasing only counts on the item, so it must not skip
    such an item: with the study's last free item held so, a worker was told the work was
    over (the engine) or to wait (the hot path)."""
    _pg_only(db_url)
    import psycopg

    from app.studies.models import Item

    owner = make_user(session, "researcher")
    study = tiny_study(session, owner, 1, bundle_size=1)
    session.commit()
    item_id = session.scalar(select(Item.id).where(Item.study_id == study.id))
    api_start(client, study.slug, {"PROLIFIC_PID": "held-1", "STUDY_ID": "s", "SESSION_ID": "h1"})
    other = session.get_bind().url.set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(other) as holder:  # a transaction left open, as a slow writer's is
        holder.execute("SELECT id FROM items WHERE id = %s FOR KEY SHARE", (item_id,))
        body = client.get(f"/api/v1/crowd/{study.slug}/next").json()
        assert body["state"] == "item", body  # the hot path
        bundle = assignment.enter(session, study, "prolific", "held-2")  # the engine
        assignment.consent(session, study, bundle.id, consent_version(study))
        leased = assignment.next_item(session, study, bundle.id)
        assert leased is not None and leased.item_id == item_id
        holder.rollback()


def test_a_researchers_write_with_every_connection_busy_is_told_to_retry(client, session, db_url, monkeypatch):
    """The check of who may write (app/middleware.py AuthBeforeBody) reads the caller's account from
    the ORM pool before the body: a pool still empty after DB_POOL_TIMEOUT answers 503 there as
    everywhere else, never a 500."""
    from app.auth.security import create_token
    from app.config import get_settings
    from app.db import get_engine, get_sessionmaker

    token = create_token(session, make_user(session, "researcher"))
    session.commit()
    monkeypatch.setenv("DB_POOL_SIZE", "1")
    monkeypatch.setenv("DB_POOL_TIMEOUT", "1")
    for cached in (get_settings, get_engine, get_sessionmaker):
        cached.cache_clear()
    engine = get_engine(db_url)
    try:
        with engine.connect():  # the one connection, busy elsewhere
            r = client.post("/api/v1/agents", json={"name": "busy"}, headers={"Authorization": f"Bearer {token}"})
            assert r.status_code == 503 and r.headers["Retry-After"], r.text
        r = client.post("/api/v1/agents", json={"name": "free"}, headers={"Authorization": f"Bearer {token}"})
        assert r.status_code == 201, r.text
    finally:
        engine.dispose()
        monkeypatch.delenv("DB_POOL_SIZE")
        monkeypatch.delenv("DB_POOL_TIMEOUT")
        for cached in (get_settings, get_engine, get_sessionmaker):
            cached.cache_clear()


def test_a_gold_slot_gets_the_same_gold_item_by_the_hot_path_and_by_the_engine(client, session, db_url):
    """Gold is shared and spread over workers by a per-worker start among the gold items; both
    paths must start a worker at the same one, or which gold a worker is checked on (and how
    often each gold item is seen) depends on which path happened to serve them."""
    _pg_only(db_url)
    from app.studies.models import Item

    owner = make_user(session, "researcher")
    study = create_tom_study(session, owner, bundle_size=4, gold_rate=0.25)
    session.commit()
    golds = session.scalars(select(Item.id).where(Item.study_id == study.id, Item.is_gold)).all()
    assert len(golds) >= 5
    picked = {}
    for k in range(8):
        client.cookies.clear()
        api_start(client, study.slug, {"PROLIFIC_PID": f"gold-{k}", "STUDY_ID": "s", "SESSION_ID": f"g{k}"})
        bundle = session.scalar(select(Bundle).where(Bundle.study_id == study.id).order_by(Bundle.id.desc()).limit(1))
        bundle.gold_slots = [0, 1, 2, 3]  # every slot gold: the first lease is a gold one
        session.commit()
        by_engine = assignment.next_item(session, study, bundle.id)
        assert by_engine.is_gold
        session.delete(by_engine)  # the same worker and slot again, now by the hot path
        session.commit()
        before = hotpath.stats["next"]
        body = client.get(f"/api/v1/crowd/{study.slug}/next").json()
        assert hotpath.stats["next"] - before == 1
        by_hot = session.get(Assignment, body["assignment_id"])
        assert by_hot.is_gold and by_hot.item_id == by_engine.item_id, (k, by_engine.item_id, by_hot.item_id)
        picked[k] = by_hot.item_id
    assert len(set(picked.values())) > 1, picked  # spread, not everyone on one gold item
