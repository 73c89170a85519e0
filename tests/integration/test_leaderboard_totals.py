"""The leaderboard from running totals (issue 14) against the leaderboard counted from the raw
annotations, figure for figure and bit for bit, after random annotations written every way a statement can
write them, rejections, reinstatements, re-scores, changed responses and deletions, on both
backends; and the trigger-kept totals against a fresh rebuild."""

from __future__ import annotations

import json
import math
import random
import uuid
from datetime import timedelta

import pytest
from sqlalchemy import delete, insert, select, text, update

from app.auth.models import User
from app.db import utcnow
from app.kinds import register_kind, unregister_kind
from app.kinds.tom import CommonToM
from app.leaderboards.service import compute, recompute_from_annotations
from app.leaderboards.totals import TABLES, rebuild
from app.studies.models import Annotation, Assignment, Bundle, Item, Participant, Study
from tests.conftest import create_tom_study, make_user


class ScoreVoteToM(CommonToM):
    """ToM items whose annotators agree on the score, not on an answer field (as the kinds
    without agreement_value() do: their per-item answers are grouped by score)."""

    name = "tom_scorevote"

    def agreement_value(self):
        return None


@pytest.fixture
def score_vote_kind():
    register_kind(ScoreVoteToM())
    yield "tom_scorevote"
    unregister_kind("tom_scorevote")


def same(a, b, where="board"):
    """Equal to the last bit (NaN equal to NaN), dict order ignored; says where not. Alpha
    and kappa to 1e-12: the same answer-count patterns, passed in another order."""
    if isinstance(a, float) and isinstance(b, float):
        if ".agreement." in where:
            assert math.isclose(a, b, rel_tol=1e-12), f"{where}: {a!r} != {b!r}"
        else:
            assert a == b or (math.isnan(a) and math.isnan(b)), f"{where}: {a!r} != {b!r}"
    elif isinstance(a, dict):
        assert isinstance(b, dict) and set(a) == set(b), f"{where}: keys {sorted(a)} != {sorted(b)}"
        for k in a:
            same(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), f"{where}: {len(a)} rows != {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            same(x, y, f"{where}[{i}]")
    else:
        assert a == b, f"{where}: {a!r} != {b!r}"


def table_rows(session, study_id: int) -> dict:
    out = {}
    for t in TABLES:
        rows = session.execute(text(f"SELECT * FROM {t} WHERE study_id = :s"), {"s": study_id}).all()
        if t == "lb_worker_consistency":  # a worker at 0 clusters whole may keep a row of zeros
            rows = [r for r in rows if r[2] or r[3]]
        out[t] = sorted(tuple(round(x, 9) if isinstance(x, float) else x for x in r) for r in rows)
    return out


def item_summaries(session, study_id: int) -> list:
    """lb_items (PostgreSQL keeps it; SQLite leaves it empty)."""
    return sorted(
        session.execute(text("SELECT item_id, pattern, score FROM lb_items WHERE study_id = :s"), {"s": study_id}).all()
    )


def check(session, study: Study) -> dict:
    """compute == recompute_from_annotations, every page of annotators == its slice of the
    whole board, and the kept totals (lb_items included) == a rebuild."""
    session.expire_all()
    board = compute(session, study)
    session.commit()
    same(board, recompute_from_annotations(session, study))
    session.commit()
    people = [r for r in board["rows"] if r["type"] == "annotator"]
    others = [r for r in board["rows"] if r["type"] != "annotator"]
    assert board["annotators"] == {"total": len(people), "offset": 0, "limit": None}
    for offset, limit in ((0, 1), (0, 4), (3, 4), (len(people), 5), (0, len(people) + 3)):
        page = compute(session, study, annotators=(offset, limit))
        session.commit()
        same([r for r in page["rows"] if r["type"] == "annotator"], people[offset : offset + limit], "page")
        same([r for r in page["rows"] if r["type"] != "annotator"], others, "page's other rows")
        same(
            {k: v for k, v in page.items() if k not in ("rows", "annotators")},
            {k: v for k, v in board.items() if k not in ("rows", "annotators")},
            "page's board",
        )
        assert page["annotators"] == {"total": len(people), "offset": offset, "limit": limit}
    kept = table_rows(session, study.id)
    summaries = item_summaries(session, study.id)
    if session.get_bind().dialect.name == "postgresql":
        # One row per item with an answer counted (r[3]: n).
        assert [i for i, *_ in summaries] == sorted({r[0] for r in kept["lb_item_answers"] if r[3] > 0})
    rebuild(session.connection(), study.id)
    assert table_rows(session, study.id) == kept
    assert item_summaries(session, study.id) == summaries
    session.rollback()
    return board


class Crowd:
    """Writes annotations for a study the way the engine's statements could: ORM units of
    work, Core multi-row inserts, textual SQL."""

    def __init__(self, session, study: Study, rng: random.Random, n_workers: int):
        self.s, self.study, self.rng = session, study, rng
        # Small clusters of 1-4 items (and some items in none), set before any answer, so that
        # workers see clusters whole and consistency moves as answers come, go and change.
        self.items = session.execute(
            select(Item.id, Item.is_gold).where(Item.study_id == study.id).order_by(Item.id)
        ).all()
        for i, _ in self.items:
            session.execute(update(Item).where(Item.id == i).values(cluster="" if i % 7 == 0 else f"c{i % 37}"))
        session.commit()
        self.workers = []
        for w in range(n_workers):
            u = User(
                role="worker",
                name=f"w{w}",
                platform="prolific",
                external_id=uuid.uuid4().hex,
                pseudonym=f"w-{uuid.uuid4().hex[:8]}",
            )
            session.add(u)
            session.flush()
            p = Participant(study_id=study.id, worker_id=u.id)
            session.add(p)
            session.flush()
            b = Bundle(
                study_id=study.id,
                participant_id=p.id,
                worker_id=u.id,
                size=10_000,
                external_assignment_id=uuid.uuid4().hex,
            )
            session.add(b)
            session.flush()
            self.workers.append((u.id, b.id))
        session.commit()
        self.done: set[tuple[int, int]] = set()

    def _row(self, worker: tuple[int, int], item_id: int, is_gold: bool) -> dict:
        uid, bid = worker
        a = Assignment(
            study_id=self.study.id,
            item_id=item_id,
            worker_id=uid,
            bundle_id=bid,
            slot=0,
            is_gold=is_gold,
            state="completed",
            lease_expires_at=utcnow() + timedelta(minutes=15),
            completed_at=utcnow(),
        )
        self.s.add(a)
        self.s.flush()
        r = self.rng.random()
        answer = "Yes" if r < 0.5 else "No" if r < 0.9 else "Maybe"
        response = {"answer": answer} if self.rng.random() > 0.03 else {"other": 1}  # no field
        return dict(
            assignment_id=a.id,
            study_id=self.study.id,
            item_id=item_id,
            worker_id=uid,
            is_gold=is_gold,
            response=response,
            score=self.score(),
            scores=None,
            duration_ms=5,
            client={},
            idempotency_key=uuid.uuid4().hex,
            excluded=False,
            created_at=utcnow(),
        )

    def score(self):
        # Dyadic fractions: their sums are exact in any order, so the two ways of counting
        # must agree to the last bit (with 0.1 or 1/3 the order of a float sum could move a
        # sum like 3.5 across the rounding of a count, in the reference as much as here).
        return self.rng.choice([0.0, 1.0, 1.0, 0.5, 0.25, 0.75, None])

    def annotate(self, n: int) -> None:
        rows = []
        for _ in range(n * 3):
            if len(rows) == n:
                break
            worker = self.rng.choice(self.workers)
            item_id, gold = self.rng.choice(self.items)
            if (worker[0], item_id) not in self.done:
                self.done.add((worker[0], item_id))
                rows.append(self._row(worker, item_id, gold))
        way = 0
        while rows:
            k = self.rng.randint(1, 6)
            chunk, rows = rows[:k], rows[k:]
            if way % 3 == 0:
                self.s.add_all(Annotation(**r) for r in chunk)
                self.s.flush()
            elif way % 3 == 1:
                self.s.execute(insert(Annotation), chunk)
            else:
                for r in chunk:
                    self.s.execute(insert(Annotation).values(**r))
            way += 1
        self.s.commit()


def _scenario(session, study: Study, seed: int) -> None:
    rng = random.Random(seed)
    crowd = Crowd(session, study, rng, n_workers=9)
    crowd.annotate(150)
    board = check(session, study)
    assert any(r["consistency"] for r in board["rows"] if r["type"] == "annotator")
    uids = [u for u, _ in crowd.workers]

    # Reject two workers (the statement app.quality.service uses), then reinstate one.
    for uid in uids[:2]:
        session.execute(
            update(Annotation).where(Annotation.study_id == study.id, Annotation.worker_id == uid).values(excluded=True)
        )
    session.commit()
    board = check(session, study)
    names = {r["name"] for r in board["rows"] if r["type"] == "annotator"}
    rejected = set(session.scalars(select(User.pseudonym).where(User.id.in_(uids[:2]))))
    assert not names & rejected
    session.execute(update(Annotation).where(Annotation.worker_id == uids[0]).values(excluded=False))
    session.commit()
    check(session, study)

    # More work after the rejections; a re-score of some annotations (Hexagons consolidation
    # does this), some to NULL; a response changed; a no-op update; a few deletions.
    crowd.annotate(80)
    ids = session.scalars(select(Annotation.id).where(Annotation.study_id == study.id).order_by(Annotation.id)).all()
    for aid in rng.sample(ids, 40):
        session.execute(update(Annotation).where(Annotation.id == aid).values(score=crowd.score()))
    for aid in rng.sample(ids, 5):
        session.execute(update(Annotation).where(Annotation.id == aid).values(response={"answer": "Maybe"}))
    session.execute(update(Annotation).where(Annotation.id.in_(ids[:20])).values(excluded=Annotation.excluded))
    session.commit()
    check(session, study)
    gone = rng.sample(ids, 12)
    session.execute(delete(Annotation).where(Annotation.id.in_(gone)))
    session.commit()
    check(session, study)

    # Every worker rejected: the people's rows, the majority and the agreement go; agents stay.
    session.execute(update(Annotation).where(Annotation.study_id == study.id).values(excluded=True))
    session.commit()
    board = check(session, study)
    assert not [r for r in board["rows"] if r["type"] in ("annotator", "majority")]
    assert table_rows(session, study.id) == {t: [] for t in TABLES}
    assert item_summaries(session, study.id) == []
    session.execute(update(Annotation).where(Annotation.study_id == study.id).values(excluded=False))
    session.commit()
    check(session, study)


@pytest.mark.parametrize("seed", [1, 2])
def test_totals_match_the_annotations_for_an_answer_field(session, seed):
    owner = make_user(session, "researcher")
    study = create_tom_study(session, owner, annotations_per_item=5)
    assert study.answer_field == "answer"
    _scenario(session, study, seed)


def test_totals_match_the_annotations_when_people_vote_on_the_score(session, score_vote_kind):
    from app.studies import services
    from tests.conftest import ROOT

    owner = make_user(session, "researcher")
    data = (ROOT / "tests" / "fixtures" / "tom" / "questions.csv").read_bytes()
    study = services.create_study(
        session, owner, score_vote_kind, services.StudySettings(title="Scores", annotations_per_item=5), data, "csv"
    )
    session.commit()
    assert study.answer_field is None
    _scenario(session, study, 3)


def test_a_study_without_its_answer_field_is_recounted_once(session):
    """A study stored without answer_field (raw SQL, or a kind that changed its field): its
    per-item answers were grouped by score; the leaderboard notices, recounts them by the
    field, and records it."""
    owner = make_user(session, "researcher")
    study = create_tom_study(session, owner, annotations_per_item=5)
    session.execute(update(Study).where(Study.id == study.id).values(answer_field=None))
    session.commit()
    Crowd(session, study, random.Random(5), n_workers=6).annotate(100)
    before = table_rows(session, study.id)["lb_item_answers"]
    assert all(not v.startswith("=Yes") and not v.startswith("=No") for _, v, *_ in before)
    check(session, study)
    session.expire_all()
    assert session.get(Study, study.id).answer_field == "answer"
    values = {v for _, v, *_ in table_rows(session, study.id)["lb_item_answers"]}
    assert values <= {"=Yes", "=No", "=Maybe", ""} and "=Yes" in values


def test_the_migrations_backfill_counts_what_the_triggers_count(session):
    """Migration 0011 counts the annotations stored before it with its own (frozen) SQL: on
    the same annotations it gives the totals the triggers keep."""
    import importlib.util

    from tests.conftest import ROOT

    path = ROOT / "migrations" / "versions" / "0011_leaderboard_totals.py"
    spec = importlib.util.spec_from_file_location("m0011", path)
    m0011 = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m0011)
    owner = make_user(session, "researcher")
    study = create_tom_study(session, owner, annotations_per_item=5)
    crowd = Crowd(session, study, random.Random(7), n_workers=6)
    crowd.annotate(120)
    session.execute(update(Annotation).where(Annotation.worker_id == crowd.workers[0][0]).values(excluded=True))
    session.commit()
    kept = table_rows(session, study.id)
    assert all(kept.values())
    for t in TABLES:
        session.execute(text(f"DELETE FROM {t}"))
    for stmt in m0011.backfill_sql(session.get_bind().dialect.name):
        session.execute(text(stmt))
    assert table_rows(session, study.id) == kept
    session.rollback()


def test_the_page_shows_the_busiest_annotators_and_the_api_pages_all(session, client):
    """More annotators than the page shows: the page lists the ANNOTATORS_ON_PAGE with the
    most answers and says how many there are; the API gives all by default, or a page."""
    from app.studies.views import ANNOTATORS_ON_PAGE
    from tests.conftest import login

    owner = make_user(session, "researcher")
    study = create_tom_study(session, owner, annotations_per_item=5)
    crowd = Crowd(session, study, random.Random(11), n_workers=ANNOTATORS_ON_PAGE + 4)
    crowd.annotate(400)
    full = compute(session, study)
    session.rollback()
    people = [r for r in full["rows"] if r["type"] == "annotator"]
    assert len(people) > ANNOTATORS_ON_PAGE
    login(client, owner)

    page = client.get(f"/studies/{study.id}/leaderboard")
    assert page.status_code == 200
    shown = page.text.count('<tr class="annotator">')
    assert shown == ANNOTATORS_ON_PAGE
    assert f"showing the {ANNOTATORS_ON_PAGE} annotators with the most answers of {len(people)}" in page.text
    assert people[0]["name"] in page.text and people[-1]["name"] not in page.text

    every = client.get(f"/api/v1/studies/{study.id}/leaderboard").json()
    assert every["annotators"]["total"] == len(people)
    assert [r["name"] for r in every["rows"] if r["type"] == "annotator"] == [r["name"] for r in people]
    some = client.get(
        f"/api/v1/studies/{study.id}/leaderboard", params={"annotators_offset": 10, "annotators_limit": 5}
    ).json()
    assert [r["name"] for r in some["rows"] if r["type"] == "annotator"] == [r["name"] for r in people[10:15]]
    assert some["annotators"] == {"total": len(people), "offset": 10, "limit": 5}
    bad = client.get(f"/api/v1/studies/{study.id}/leaderboard", params={"annotators_limit": 0})
    assert bad.status_code == 422


def _three_answers_to_one_item(session, seed: int, answers: tuple[str, str, str]):
    """A ToM study and three workers' annotation rows (not stored) to one plain item, with
    these answers: (study, crowd, item id, rows)."""
    owner = make_user(session, "researcher")
    study = create_tom_study(session, owner, annotations_per_item=5)
    crowd = Crowd(session, study, random.Random(seed), n_workers=3)
    item_id = next(i for i, gold in crowd.items if not gold)
    rows = [crowd._row(w, item_id, False) for w in crowd.workers]
    for r, answer in zip(rows, answers):
        r["response"] = {"answer": answer}
    return study, crowd, item_id, rows


def test_two_answers_to_one_item_at_once_both_count_in_its_summary(session):
    """PostgreSQL: two transactions answer one item at once with different answers; the
    second's summary (lb_items) waits for the first to commit and counts both answers. (Here
    the second waits at the summary's insert, on the first's uncommitted row version; the
    trigger's explicit row lock also covers the order this cannot force, where the first
    reaches the summary after the second's insert: migration 0013.)"""
    import threading
    import time

    from sqlalchemy.orm import Session as OrmSession

    if session.get_bind().dialect.name != "postgresql":
        pytest.skip("lb_items is kept on PostgreSQL only")
    study, crowd, item_id, rows = _three_answers_to_one_item(session, 13, ("Yes", "No", "No"))
    session.execute(insert(Annotation), [rows[2]])  # the item already has a summary
    session.commit()

    first = OrmSession(bind=session.get_bind())
    first.execute(insert(Annotation), [rows[0]])  # not committed yet
    done = threading.Event()

    def second():
        with OrmSession(bind=session.get_bind()) as s:
            s.execute(insert(Annotation), [rows[1]])
            s.commit()
        done.set()

    t = threading.Thread(target=second)
    t.start()
    time.sleep(0.5)
    assert not done.is_set()  # waiting for the first transaction's lock on the item's summary
    first.commit()
    first.close()
    t.join(10)
    assert done.is_set()
    session.expire_all()
    kept = item_summaries(session, study.id)
    assert [p for i, p, _ in kept if i == item_id] == ["2:3:=No,1:4:=Yes"]
    check(session, study)


def _wait_until_waiting(session, n: int) -> None:
    """Until n other connections to this test's database wait for a lock (how the tests
    below know the other transactions reached their lock before they let the holder go)."""
    import time

    from sqlalchemy import create_engine

    probe = create_engine(session.get_bind().url)
    try:
        for _ in range(400):
            with probe.connect() as c:
                waiting = c.execute(
                    text(
                        "SELECT count(*) FROM pg_stat_activity WHERE datname = "
                        "current_database() AND wait_event_type = 'Lock'"
                    )
                ).scalar()
            if waiting >= n:
                return
            time.sleep(0.05)
        raise AssertionError(f"{waiting} transactions wait for a lock, not {n}")
    finally:
        probe.dispose()


def _in_thread(fn):
    """Run fn in a thread; returns (thread, outcome): outcome["error"] is what it raised,
    outcome["result"] what it returned."""
    import threading

    outcome = {"error": None, "result": None}

    def run():
        try:
            outcome["result"] = fn()
        except BaseException as e:  # noqa: BLE001 - reported by the test
            outcome["error"] = e

    t = threading.Thread(target=run)
    t.start()
    return t, outcome


def test_a_changed_answer_and_a_crowd_answer_of_its_value_at_once_both_count(session):
    """PostgreSQL: an UPDATE that makes an annotation count with a value the item has no
    answer of yet (here a reinstatement with a changed response), while a crowd answer of that
    value to that item is not yet committed: the update waits and then counts both (it used
    to recount the value with a plain INSERT and fail with a unique violation)."""
    from sqlalchemy.orm import Session as OrmSession

    if session.get_bind().dialect.name != "postgresql":
        pytest.skip("SQLite has one writer at a time")
    study, crowd, item_id, rows = _three_answers_to_one_item(session, 17, ("Yes", "Yes", "No"))
    rows[1]["excluded"] = True
    session.execute(insert(Annotation), rows[:2])
    session.commit()
    changed = session.scalar(select(Annotation.id).where(Annotation.worker_id == crowd.workers[1][0]))

    crowd_answer = OrmSession(bind=session.get_bind())
    crowd_answer.execute(insert(Annotation), [rows[2]])  # the item's first "No", not committed

    def reinstate():
        with OrmSession(bind=session.get_bind()) as s:
            s.execute(
                update(Annotation).where(Annotation.id == changed).values(excluded=False, response={"answer": "No"})
            )
            s.commit()

    t, outcome = _in_thread(reinstate)
    _wait_until_waiting(session, 1)
    crowd_answer.commit()
    crowd_answer.close()
    t.join(30)
    assert not t.is_alive() and outcome["error"] is None, outcome["error"]
    kept = session.execute(
        text("SELECT value, n FROM lb_item_answers WHERE item_id = :i ORDER BY value"), {"i": item_id}
    ).all()
    assert [tuple(r) for r in kept] == [("=No", 2), ("=Yes", 1)]
    check(session, study)


@pytest.mark.parametrize("other", ["import", "rejection"])
def test_an_import_and_another_bulk_writer_sharing_items_at_once_do_not_deadlock(session, other):
    """PostgreSQL: an import of prior annotations (app.studies.imports) and, at once, another
    import or a rejection (app.quality.service.decide) write answers to the same two items a
    and b in opposite orders, while another transaction holds both items' "No" answers (a
    writer under way). They used to lock the totals row by row in their own order, and so to
    deadlock when it was let go; now each takes its items' locks in item order before
    writing, the second waits for the first, and the totals equal the annotations."""
    from sqlalchemy.orm import Session as OrmSession

    from app.quality.service import decide
    from app.studies.imports import import_annotations

    if session.get_bind().dialect.name != "postgresql":
        pytest.skip("SQLite has one writer at a time")
    owner = make_user(session, "researcher")
    study = create_tom_study(session, owner, annotations_per_item=5)
    crowd = Crowd(session, study, random.Random(19), n_workers=2)
    a, b = [i for i, gold in crowd.items if not gold][:2]
    ext = dict(session.execute(select(Item.id, Item.external_id).where(Item.id.in_((a, b)))).all())
    w1, w2 = crowd.workers
    # w1 answers both "No" (the rows held below); w2 answers b then a (stored, and so scanned
    # by a rejection, in that order).
    for w, i, answer in ((w1, a, "No"), (w1, b, "No"), (w2, b, "Yes"), (w2, a, "No")):
        row = crowd._row(w, i, False)
        row["response"] = {"answer": answer}
        session.execute(insert(Annotation), [row])
    session.commit()
    pid2 = session.scalar(select(Participant.id).where(Participant.worker_id == w2[0]))

    holder = OrmSession(bind=session.get_bind())
    holder.execute(
        text("SELECT 1 FROM lb_item_answers WHERE item_id IN (:a, :b) AND value = '=No' FOR UPDATE"), {"a": a, "b": b}
    )

    def importer(source, answers):
        data = "".join(
            json.dumps({"question_id": ext[i], "answer": ans, "annotator": "p"}) + "\n" for i, ans in answers
        ).encode()

        def run():
            with OrmSession(bind=session.get_bind()) as s:
                import_annotations(s, s.get(Study, study.id), s.get(User, owner.id), data, source)

        return run

    def reject():
        with OrmSession(bind=session.get_bind()) as s:
            decide(s, s.get(Study, study.id), [pid2], "rejected", s.get(User, owner.id), "did not read the stories")

    first, one = _in_thread(importer("one", [(a, "Yes"), (b, "No")]))
    second, two = _in_thread(importer("two", [(b, "Yes"), (a, "No")]) if other == "import" else reject)
    _wait_until_waiting(session, 2)
    holder.rollback()
    holder.close()
    first.join(30)
    second.join(30)
    assert not first.is_alive() and not second.is_alive()
    assert one["error"] is None and two["error"] is None, (one["error"], two["error"])
    board = check(session, study)
    assert len([r for r in board["rows"] if r["type"] == "annotator"]) == (4 if other == "import" else 2)
