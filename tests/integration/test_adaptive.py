"""Adaptive allocation (issue 29.2), through the crowd API as workers use it: every item gets the
floor of annotations first; after the periodic job has run, the items of the speakers whose
comparison is still open come before those of a speaker whose comparisons are settled; gold
slots stay where the rule puts them; switched off, items go in the plain order again. On
PostgreSQL the leases come from the hot path's one statement (app/studies/hotpath.py), on SQLite
from the engine's pick. SQLite and PostgreSQL."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, select, text

from app.kinds.base import ItemSpec
from app.kinds.navigation.environments import import_house
from app.leaderboards import adaptive
from app.studies import assignment, hotpath, services
from app.studies.models import Assignment, Bundle, Item, Study
from tests.conftest import login, make_user
from tests.integration.test_crowd_integrity import api_start, tiny_study
from tests.integration.test_navigation_leaderboard import coop_file, house

PATHS = 24


def _study(session, owner, **settings) -> Study:
    """Three speakers on PATHS paths (one exclusion group per path): "human" and "toy", whose
    instructions every follower walks exactly (their comparison stays open), and "bad", whose
    followers never leave the start (it settles below both)."""
    h = house()
    import_house(session, h)
    s = services.StudySettings(title="Adaptive", annotations_per_item=2, **settings)
    study = services.create_study(session, owner, "navigation", s, coop_file(h, n=PATHS), "coop", {"speaker": "toy"})
    toy = session.scalars(select(Item).where(Item.study_id == study.id, Item.category == "toy")).all()
    added = services.add_items(
        session,
        study,
        [
            ItemSpec(
                external_id=f"bad:{i.external_id}",
                payload=i.payload,
                reference=i.reference,
                source="agent",
                category="bad",
                cluster=i.cluster,
                exclusion_group=i.exclusion_group,
            )
            for i in toy
        ],
    )
    assert added == PATHS
    session.commit()
    services.set_state(session, study, "live", owner)
    session.commit()
    return study


class Crowd:
    """Workers, one after another, each through the crowd API: enter, agree, then next/submit
    (a submit's reply leases the next item). Records each non-gold lease (item id, category,
    the item's annotations before it) and checks it against `rule` (the order expected)."""

    def __init__(self, client, session, study: Study):
        self.client, self.session, self.study = client, session, study
        self.n = 0
        self.leases: list[tuple[int, str, int]] = []

    def items(self) -> dict[int, Item]:
        self.session.expire_all()
        return {i.id: i for i in self.session.scalars(select(Item).where(Item.study_id == self.study.id)).all()}

    def work(self, leases: int, rule: bool | None, until=None) -> None:
        """Workers until `leases` non-gold items were leased, or until `until(items)`. `rule`:
        each lease is the item the adaptive order (True) or the plain order (False) puts first
        for its worker."""
        start = len(self.leases)
        while len(self.leases) - start < leases and not (until and until(self.items())):
            self.n += 1
            worker = f"adapt-{self.study.id}-{self.n}"
            api_start(self.client, self.study.slug, {"PROLIFIC_PID": worker, "STUDY_ID": "s", "SESSION_ID": worker})
            had: set[str | None] = set()
            before = self.items()
            while len(self.leases) - start < leases and not (until and until(before)):
                body = self.client.get(f"/api/v1/crowd/{self.study.slug}/next").json()
                if body["state"] != "item":
                    break
                item = before[self.session.get(Assignment, body["assignment_id"]).item_id]
                if not item.is_gold:
                    if rule is not None:
                        assert item.id == _first(self.study, before, had, rule), (worker, item.category)
                    self.leases.append((item.id, item.category, item.n_active))
                had.add(item.exclusion_group)
                before = self.items()  # the reply leases the next item
                _follow(self.client, self.study, body["assignment_id"], item)


def _follow(client, study: Study, assignment_id: int, item: Item) -> None:
    """A follower's answer by the crowd API: human and toy instructions are walked exactly; bad
    ones never left."""
    path = list(item.reference["path"]) if item.category != "bad" else [item.payload["start"]]
    r = client.post(
        f"/api/v1/crowd/{study.slug}/submit",
        json={
            "assignment_id": assignment_id,
            "idempotency_key": f"k{assignment_id}",
            "response": {"path": path, "trace": [], "rating": 3},
        },
    )
    assert r.status_code == 200, r.text


def _first(study: Study, items: dict[int, Item], had: set[str | None], adaptive_order: bool) -> int:
    """The item the order puts first for a worker who had the paths `had`: adaptive, the
    items under the floor, then the priority, then the plain order (most annotated, not full,
    then the highest position)."""
    free = [
        i
        for i in items.values()
        if not i.is_gold and i.n_active < study.annotations_per_item and i.exclusion_group not in had
    ]
    if adaptive_order:
        return max(free, key=lambda i: (i.n_active < study.adaptive_floor, i.priority, i.n_active, i.position)).id
    return max(free, key=lambda i: (i.n_active, i.position)).id


def test_open_speakers_items_come_first_after_the_floor(client, session, app, db_url):
    owner = make_user(session, "researcher")
    study = _study(session, owner, adaptive=True, adaptive_floor=1)
    assert study.adaptive and study.adaptive_floor == 1
    crowd = Crowd(client, session, study)
    # The job has run once before anyone came: no judgement yet, every comparison open.
    assert adaptive.refresh() == [study.id]
    hot_before = dict(hotpath.stats)

    # The floor: an item gets a second annotation only from a worker who already had the paths
    # of every item still without one (one instruction a path each); the rule checks each lease.
    crowd.work(10 * PATHS, rule=True, until=lambda items: all(i.n_active for i in items.values() if not i.is_gold))
    firsts = [n for *_, n in crowd.leases]
    assert firsts[: 2 * PATHS] == [0] * (2 * PATHS) and firsts.count(0) == 3 * PATHS

    # The job turns the answers into priorities: human and toy are tied (open), bad is below both.
    session.expire_all()
    found = adaptive.refresh_study(session, session.get(Study, study.id))
    assert found["open"] == ["human", "toy"] and found["settled"] == ["bad"]

    # Switched off by the API: the plain order again (most annotated, then position).
    researcher = TestClient(app)
    login(researcher, owner)
    r = researcher.patch(f"/api/v1/studies/{study.id}", json={"adaptive": False})
    assert r.status_code == 200 and r.json()["adaptive"] is False, r.text
    session.expire_all()
    crowd.work(10, rule=False)
    assert "bad" in {c for _, c, _ in crowd.leases[-10:]}, "the plain order mixes the speakers"

    # On again: each lease is the open speakers' item the priority puts first, while the worker
    # may take one; bad's second annotations come after every open item is full.
    r = researcher.patch(f"/api/v1/studies/{study.id}", json={"adaptive": True})
    assert r.status_code == 200 and r.json()["adaptive"] is True, r.text
    session.expire_all()
    left = sum(1 for i in crowd.items().values() if not i.is_gold and i.category != "bad" and i.n_active < 2)
    assert left > 5
    crowd.work(left + 5, rule=True)
    early = [c for _, c, _ in crowd.leases[-(left + 5) :][:left]]
    assert early.count("bad") <= 3, early  # only to a worker who had the open items' paths
    assert all(i.n_active == 2 for i in crowd.items().values() if not i.is_gold and i.category != "bad")

    # Gold slots are where the rule puts them, whichever order the other items came in.
    bundles = session.scalars(select(Bundle).where(Bundle.study_id == study.id)).all()
    assert len(bundles) == crowd.n
    for b in bundles:
        assert b.gold_slots == assignment.gold_slots(study.id, b.worker_id, b.external_assignment_id, b.size, 1)
        gold = session.scalars(
            select(Assignment.slot).where(Assignment.bundle_id == b.id, Assignment.is_gold.is_(True))
        ).all()
        done = session.scalars(select(Assignment.slot).where(Assignment.bundle_id == b.id)).all()
        assert sorted(gold) == [s for s in b.gold_slots if s in done], b.id
    if hotpath.enabled(db_url):  # the leases came from the one statement
        assert hotpath.stats["next"] - hot_before["next"] >= len(crowd.leases)


@pytest.fixture
def many_entries(monkeypatch):
    """More newcomers a minute from the test's one address than the entry limit lets in."""
    from app.config import get_settings

    # On the settings in use: clearing the cache instead (new settings, a new engine) made a
    # later PostgreSQL test here read 9 times the pages (test_past_the_floor_...).
    monkeypatch.setattr(get_settings(), "rate_limit_entry", 1000)


@pytest.mark.parametrize("db_url", ["sqlite", "postgresql"], indirect=True)
def test_under_the_floor_a_worker_gets_an_item_past_their_excluded_group(client, session, db_url, many_entries):
    """The floor's last items may all lie in a path the worker had (one exclusion group a path,
    across their tasks; the adaptive order serves a unit's items together, so a path is often
    the last under the floor): the lease hands them another open item, above the floor, rather
    than a wait or the end of their task. One item a task, up to three tasks a person."""
    owner = make_user(session, "researcher")
    study = _study(
        session, owner, adaptive=True, adaptive_floor=1, gold_rate=0.0, bundle_size=1, max_bundles_per_worker=3
    )
    assert adaptive.refresh() == [study.id]  # no judgement yet: every speaker open, by unit
    crowd = Crowd(client, session, study)
    plain = [i for i in crowd.items().values() if not i.is_gold]
    last = min(plain, key=lambda i: i.priority).exclusion_group  # the unit served last

    # Others, a task of one item each, bring every item but the last path's to the floor.
    crowd.work(
        3 * PATHS,
        rule=True,
        until=lambda items: all(i.n_active for i in items.values() if i.exclusion_group != last and not i.is_gold),
    )
    under = [i for i in crowd.items().values() if i.n_active < study.adaptive_floor and not i.is_gold]
    assert {i.exclusion_group for i in under} == {last} and len(under) == 3, [(i.category, i.n_active) for i in under]

    # A newcomer's first task takes one of that path's items; in their next tasks the other two
    # are still under the floor, but not theirs to take: they get others', in the adaptive order.
    worker = "past-the-group"
    had: set[str | None] = set()
    for task in range(3):
        api_start(client, study.slug, {"PROLIFIC_PID": worker, "STUDY_ID": "s", "SESSION_ID": f"task-{task}"})
        items = crowd.items()
        body = client.get(f"/api/v1/crowd/{study.slug}/next").json()
        assert body["state"] == "item", (task, body)  # neither "wait" nor the end of the task
        item = items[session.get(Assignment, body["assignment_id"]).item_id]
        assert item.id == _first(study, items, had, True), (task, item.category, item.exclusion_group)
        assert (item.exclusion_group == last) == (task == 0), task
        had.add(item.exclusion_group)
        _follow(client, study, body["assignment_id"], item)
        assert client.get(f"/api/v1/crowd/{study.slug}/next").json()["done"] is True  # a task of one
    assert sum(1 for i in crowd.items().values() if i.n_active < study.adaptive_floor and not i.is_gold) == 2


def test_adaptive_is_refused_where_it_cannot_work(client, session):
    owner = make_user(session, "researcher")
    tom = tiny_study(session, owner, 6)
    session.commit()
    login(client, owner)
    r = client.patch(f"/api/v1/studies/{tom.id}", json={"adaptive": True})
    assert r.status_code == 409 and "ranks none" in r.text, r.text
    nav = _study(session, owner)
    assert nav.adaptive is False  # off unless the researcher turns it on
    r = client.patch(f"/api/v1/studies/{nav.id}", json={"adaptive": True, "adaptive_floor": 3})
    assert r.status_code == 422 and "more than the study's annotations per item (2)" in r.text, r.text
    session.expire_all()
    assert session.get(Study, nav.id).adaptive is False

    # The study page's form: ticked and saved, then off again.
    page = client.get(f"/studies/{nav.id}")
    assert 'id="adaptive-on"' in page.text
    assert 'id="adaptive-on"' not in client.get(f"/studies/{tom.id}").text
    from tests.integration.test_crowd_integrity import csrf

    token = csrf(page.text)
    r = client.post(
        f"/studies/{nav.id}/adaptive",
        data={"csrf_token": token, "adaptive": "on", "floor": "2"},
        follow_redirects=False,
    )
    assert r.status_code == 303, r.text
    session.expire_all()
    got = session.get(Study, nav.id)
    assert (got.adaptive, got.adaptive_floor) == (True, 2)
    r = client.post(f"/studies/{nav.id}/adaptive", data={"csrf_token": token, "floor": "x"})
    assert r.status_code == 422 and "adaptive_floor must be a whole number" in r.text
    r = client.post(f"/studies/{nav.id}/adaptive", data={"csrf_token": token, "floor": "2"}, follow_redirects=False)
    assert r.status_code == 303
    session.expire_all()
    assert session.get(Study, nav.id).adaptive is False


@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
def test_a_task_waits_while_the_priority_job_holds_the_free_items(client, session, db_url):
    """The periodic job's UPDATE holds the rows it writes until it commits; a lease skips
    locked rows (SKIP LOCKED). A worker who comes in then must be told to wait a moment, not
    that their task has ended with work left (it was "ended after 0 of 6", no completion code)."""
    owner = make_user(session, "researcher")
    # No gold slots: a gold item is leased whatever locks it (gold is shared, never counted).
    study = _study(session, owner, adaptive=True, adaptive_floor=1, gold_rate=0.0)
    api_start(client, study.slug, {"PROLIFIC_PID": "held-up", "STUDY_ID": "s", "SESSION_ID": "held-up"})
    job = create_engine(db_url).connect()
    txn = job.begin()
    try:
        n = job.execute(
            text("UPDATE items SET priority = priority + 1 WHERE study_id = :s AND NOT is_gold"), {"s": study.id}
        ).rowcount
        assert n == 3 * PATHS  # every item of the three speakers
        body = client.get(f"/api/v1/crowd/{study.slug}/next").json()
        assert body["state"] == "wait" and body["retry_after"] >= 1 and not body["done"], body
        txn.commit()
    finally:
        job.close()
    body = client.get(f"/api/v1/crowd/{study.slug}/next").json()
    assert body["state"] == "item", body
    session.expire_all()
    assert session.scalars(select(Bundle.finished_at).where(Bundle.study_id == study.id)).all() == [None]


@pytest.mark.parametrize("value", ["false", "true", 0, 1])
def test_adaptive_at_creation_is_a_json_boolean(client, session, value):
    """As in the PATCH: a string or a number is refused, not read as a yes or a no."""
    import json

    from app.auth.security import create_token

    owner = make_user(session, "researcher")
    h = house()
    import_house(session, h)
    headers = {"Authorization": f"Bearer {create_token(session, owner, 'strict')}"}
    session.commit()
    r = client.post(
        "/api/v1/studies",
        headers=headers,
        data={"kind": "navigation", "format": "coop", "settings": json.dumps({"title": "A", "adaptive": value})},
        files={"file": ("coop.json", coop_file(h, n=4), "application/json")},
    )
    assert r.status_code == 422 and r.json()["field"] == "adaptive", r.text
    r = client.post(
        "/api/v1/studies",
        headers=headers,
        data={"kind": "navigation", "format": "coop", "settings": json.dumps({"title": "A", "adaptive_floor": "1"})},
        files={"file": ("coop.json", coop_file(h, n=4), "application/json")},
    )
    assert r.status_code == 422 and r.json()["field"] == "adaptive_floor", r.text


def test_adaptive_at_creation_for_a_kind_that_ranks_nobody_is_the_request_at_fault(client, session):
    """Creating a study with adaptive allocation on for a kind that ranks no agents (Common-ToM
    questions) is refused as the request's fault (422, on the field), not as a conflict with a
    study that does not exist yet (the PATCH on an existing study keeps 409); nothing is stored."""
    import json

    from app.auth.security import create_token
    from tests.conftest import ROOT

    owner = make_user(session, "researcher")
    headers = {"Authorization": f"Bearer {create_token(session, owner, 'strict')}"}
    session.commit()
    r = client.post(
        "/api/v1/studies",
        headers=headers,
        data={"kind": "tom", "format": "csv", "settings": json.dumps({"title": "A", "adaptive": True})},
        files={"file": ("q.csv", (ROOT / "tests" / "fixtures" / "tom" / "questions.csv").read_bytes(), "text/csv")},
    )
    assert r.status_code == 422 and r.json()["field"] == "adaptive" and "ranks none" in r.json()["detail"], r.text
    assert session.scalar(select(Study).where(Study.owner_id == owner.id)) is None


def _blocks(plan: dict) -> int:
    """Index and table pages a plan read (hit or read), its own node's totals."""
    return int(plan.get("Shared Hit Blocks", 0)) + int(plan.get("Shared Read Blocks", 0))


@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
def test_past_the_floor_a_lease_reads_no_more_than_a_plain_one(client, session, db_url):
    """Review finding: once every item had its floor, the adaptive lease walked the study's whole
    priority index looking for an item under it (10 ms at 200,000 items). Now it reads about
    what the plain lease reads, however many items the study has."""
    import psycopg

    owner = make_user(session, "researcher")
    study = _study(session, owner, adaptive=True, adaptive_floor=1, gold_rate=0.0)  # no gold slot
    cols = [c.name for c in Item.__table__.columns if c.name not in ("id", "external_id", "n_active")]
    names = ", ".join(cols)
    session.execute(
        text(
            f"INSERT INTO items (external_id, n_active, {names}) SELECT 'more-' || g || '-' || id, 1, {names} "
            f"FROM items, generate_series(1, 400) g WHERE study_id = :s AND NOT is_gold"
        ),
        {"s": study.id},
    )
    session.execute(text("UPDATE items SET n_active = 1 WHERE study_id = :s AND NOT is_gold"), {"s": study.id})
    session.commit()
    assert session.scalar(select(text("count(*)")).select_from(Item).where(Item.study_id == study.id)) > 25_000
    api_start(client, study.slug, {"PROLIFIC_PID": "past-floor", "STUDY_ID": "s", "SESSION_ID": "past-floor"})
    bundle = session.scalars(select(Bundle).where(Bundle.study_id == study.id)).one()
    params = {"bundle": bundle.id, "study": study.id, "browser": bundle.browser_hash, "now": assignment.utcnow()}
    url = db_url.replace("postgresql+psycopg://", "postgresql://")
    read = {}
    with psycopg.connect(url, autocommit=True) as conn:  # the leases' dead index entries gone, as a vacuum does
        conn.execute("VACUUM ANALYZE items")
    with psycopg.connect(url) as conn:
        for name, sql in (("plain", hotpath.NEXT_SQL), ("adaptive", hotpath.NEXT_ADAPTIVE_SQL)):
            on = name == "adaptive"
            conn.execute("UPDATE studies SET adaptive = %s WHERE id = %s", (on, study.id))
            ((plan,),) = conn.execute(
                "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + hotpath._compact(sql), params
            ).fetchall()
            read[name] = _blocks(plan[0]["Plan"])
            leased = conn.execute(
                "SELECT count(*) FROM assignments WHERE bundle_id = %s AND NOT is_gold", (bundle.id,)
            ).fetchone()
            assert leased == (1,), name  # the statement leased an item (then rolled back)
            conn.rollback()
    # A walk of the whole index reads hundreds of pages here; a lease, a few dozen.
    assert read["adaptive"] <= read["plain"] + 40, read
