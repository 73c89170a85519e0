"""The assignment engine under real concurrency: 100+ workers on PostgreSQL, 16 on SQLite.

Every worker is a thread with its own Session, all released together by a Barrier. They
enter, lease and answer until the study has no work left. Some hold short leases and abandon
items (the sweeper and their own next request give them back; some answer late), some send
the same submit two or three times at once. Afterwards the database itself is checked:

- no item has more than `annotations_per_item` non-gold completed assignments/annotations;
- no worker holds two assignments on one item or two items of one exclusion group;
- every submit that returned success has its annotation stored, once (nothing lost), and a
  submit that was refused stored nothing;
- `Item.n_active` equals completed plus leased assignments, and once expired leases are
  swept, completed plus unexpired leases; gold items never count;
- bundles count exactly the answers they hold;
- the completed total equals the study's capacity.
"""

from __future__ import annotations

import random
import secrets
import threading
import time
import uuid
from dataclasses import dataclass, field

import pytest
from sqlalchemy import create_engine, func, select, text
from sqlalchemy.orm import sessionmaker
from sqlalchemy.pool import NullPool

from app.db import utcnow
from app.studies import assignment
from app.studies.models import Annotation, Assignment, Bundle, Item, Study
from tests.conftest import make_user

SHORT_LEASE_S = 1  # the abandoning workers' lease (the study's own is 900 s)


# ---------------------------------------------------------------------------- the study


def build_study(
    session,
    owner,
    *,
    n_items: int,
    n_gold: int,
    cap: int,
    bundle_size: int,
    gold_rate: float,
    group_size: int,
    grouped_fraction: float,
) -> Study:
    """A live `tom` study whose items are inserted directly, a share of them in exclusion
    groups of `group_size` (gold items too: two gold items share one group)."""
    study = Study(
        slug=f"conc-{uuid.uuid4().hex[:8]}",
        title="Concurrency",
        kind="tom",
        owner_id=owner.id,
        state="live",
        annotations_per_item=cap,
        bundle_size=bundle_size,
        gold_rate=gold_rate,
        lease_seconds=900,
        completion_code="DONE",
        kind_settings={"random_yes_rate": 0.5},
        # Workers here do task after task: the study allows it (one lease at a time).
        max_bundles_per_worker=1000,
    )
    session.add(study)
    session.flush()
    rng = random.Random(7)
    n_grouped = int(n_items * grouped_fraction) // group_size * group_size
    rows = []
    for i in range(n_items):
        rows.append(
            Item(
                study_id=study.id,
                external_id=f"q{i}",
                payload={"question": f"Is {i} even?", "window": [f"A: {i}"]},
                reference={"answer": "Yes" if i % 2 == 0 else "No"},
                is_gold=False,
                category=str(1 + i % 3),
                cluster=f"c{i // 4}",
                exclusion_group=f"g{i // group_size}" if i < n_grouped else None,
                position=rng.random(),
                n_active=0,
            )
        )
    for j in range(n_gold):
        rows.append(
            Item(
                study_id=study.id,
                external_id=f"gold{j}",
                payload={"question": f"Gold {j}?", "window": ["A: gold"]},
                reference={"answer": "Yes"},
                is_gold=True,
                source="gold",
                category="1",
                cluster=f"gold{j}",
                exclusion_group="gold-pair" if j < 2 else None,
                position=rng.random(),
                n_active=0,
            )
        )
    session.add_all(rows)
    session.commit()
    return study


# ---------------------------------------------------------------------------- the crowd


@dataclass
class Record:
    """What the workers saw, appended from many threads (list.append is atomic)."""

    stored: list = field(default_factory=list)  # (assignment_id, annotation_id, key)
    refused: list = field(default_factory=list)  # (assignment_id, key, reason)
    doubles: list = field(default_factory=list)  # (assignment_id, {annotation ids})
    entries: list = field(default_factory=list)  # (worker, {bundle ids}) from concurrent enters
    abandoned: int = 0
    late_answers: int = 0
    errors: list = field(default_factory=list)  # unexpected exceptions, as text


class Crowd:
    def __init__(
        self,
        sm,
        study_id: int,
        capacity: int,
        n_workers: int,
        *,
        short_share: float,
        n_doublers: int,
        deadline_s: float,
    ):
        self.sm, self.study_id, self.capacity = sm, study_id, capacity
        self.n_workers = n_workers
        self.rec = Record()
        self.finished = threading.Event()
        self.deadline = time.monotonic() + deadline_s
        self.barrier = threading.Barrier(n_workers + 1)  # + the sweeper
        self.roles = ["doubler"] * n_doublers + ["short"] * int(n_workers * short_share)
        self.roles += ["normal"] * (n_workers - len(self.roles))
        random.Random(3).shuffle(self.roles)

    # -- helpers

    def _completed(self, s) -> int:
        return s.scalar(
            select(func.count())
            .select_from(Assignment)
            .where(Assignment.study_id == self.study_id, Assignment.state == "completed", Assignment.is_gold.is_(False))
        )

    def _submit(self, s, study, bundle_id, a_id, key, short: bool) -> None:
        try:
            ann = assignment.submit(
                s,
                study,
                bundle_id,
                a_id,
                {"answer": random.choice(["Yes", "No"])},
                key,
                {"thread": threading.current_thread().name},
            )
            self.rec.stored.append((a_id, ann.id, key))
        except assignment.NotAvailable as exc:
            s.rollback()
            if not short:  # a 900 s lease never runs out in this test
                self.rec.errors.append(f"unexpected refusal of {a_id}: {exc}")
            self.rec.refused.append((a_id, key, str(exc)))

    def _double_submit(self, s, study, bundle_id, a_id, same_key: bool) -> None:
        """Two or three submits of one answer at once (same key, or a second tab's key)."""
        n = 3 if same_key else 2
        keys = [f"dbl-{a_id}"] * n if same_key else [f"dbl-{a_id}-{i}" for i in range(n)]
        gate = threading.Barrier(n)
        results: list = [None] * n

        def one(i: int, session) -> None:
            try:
                gate.wait(10)
                ann = assignment.submit(session, study, bundle_id, a_id, {"answer": "Yes"}, keys[i])
                results[i] = ("ok", ann.id, keys[i])
            except Exception as exc:  # noqa: BLE001 - reported below
                session.rollback()
                results[i] = ("error", repr(exc), keys[i])

        helpers = []
        for i in range(1, n):
            hs = self.sm()
            t = threading.Thread(target=lambda i=i, hs=hs: (one(i, hs), hs.close()))
            helpers.append(t)
            t.start()
        one(0, s)
        for t in helpers:
            t.join(60)
        bad = [r for r in results if r is None or r[0] != "ok"]
        if bad:
            self.rec.errors.append(f"double submit of {a_id}: {bad}")
            return
        self.rec.doubles.append((a_id, {r[1] for r in results}))
        for _, ann_id, key in results:
            self.rec.stored.append((a_id, ann_id, key))

    def _enter(self, s, study, ext: str, n_bundle: int, role: str):
        hit = f"{ext}-hit{n_bundle}"
        if role != "doubler" or n_bundle > 0:
            return assignment.enter(s, study, "prolific", ext, hit, "H")
        # A double click on the entry link: two enters at once find one bundle.
        out: list = []
        gate = threading.Barrier(2)

        def other():
            with self.sm() as s2:
                try:
                    gate.wait(10)
                    out.append(assignment.enter(s2, study, "prolific", ext, hit, "H").id)
                except Exception as exc:  # noqa: BLE001
                    self.rec.errors.append(f"concurrent enter: {exc!r}")

        t = threading.Thread(target=other)
        t.start()
        gate.wait(10)
        bundle = assignment.enter(s, study, "prolific", ext, hit, "H")
        t.join(60)
        self.rec.entries.append((ext, {bundle.id, *out}))
        return bundle

    # -- one worker

    def worker(self, idx: int) -> None:
        role = self.roles[idx]
        short = role == "short"
        rng = random.Random(idx)
        ext = f"W{idx:03d}-{secrets.token_hex(3)}"
        s = self.sm()
        try:
            study = s.get(Study, self.study_id)
            if short:
                # This worker's requests lease for SHORT_LEASE_S: a detached copy, never saved.
                s.expunge(study)
                study.lease_seconds = SHORT_LEASE_S
            s.commit()  # gives the connection back: there are fewer connections than workers
            self.barrier.wait(60)
            n_bundle = 0
            bundle = self._enter(s, study, ext, n_bundle, role)
            n_taken = 0
            while not self.finished.is_set():
                if time.monotonic() > self.deadline:
                    self.rec.errors.append(f"{ext}: deadline reached before the study was full")
                    return
                a = assignment.next_item(s, study, bundle.id)
                if a is None:
                    s.refresh(bundle)
                    if bundle.n_done >= bundle.size:
                        n_bundle += 1
                        bundle = self._enter(s, study, ext, n_bundle, role)
                        continue
                    if self._completed(s) >= self.capacity:
                        self.finished.set()
                        return
                    s.rollback()
                    time.sleep(rng.uniform(0.02, 0.15))  # others' leases may come back
                    continue
                n_taken += 1
                if short and n_taken % 3 == 0:
                    self.rec.abandoned += 1
                    how = n_taken // 3 % 3
                    if how == 0:
                        # Walks away for good: only the sweeper gives the item back.
                        n_bundle += 1
                        bundle = self._enter(s, study, ext, n_bundle, role)
                    else:
                        time.sleep(SHORT_LEASE_S + 0.3)
                        if how == 1:
                            # Comes back late and answers anyway: kept only if there is room.
                            self.rec.late_answers += 1
                            self._submit(s, study, bundle.id, a.id, f"late-{a.id}", short=True)
                        # how == 2: reloads; next_item gives the expired item back itself.
                    continue
                time.sleep(rng.uniform(0, 0.003))  # reading the item
                if role == "doubler":
                    self._double_submit(s, study, bundle.id, a.id, same_key=idx % 2 == 0)
                else:
                    self._submit(s, study, bundle.id, a.id, f"{ext}-{a.id}", short)
        except Exception as exc:  # noqa: BLE001 - every failure is reported by the test
            self.rec.errors.append(f"{ext} ({role}): {exc!r}")
        finally:
            s.close()

    def sweeper(self) -> None:
        with self.sm() as s:
            self.barrier.wait(60)
            while not self.finished.is_set() and time.monotonic() < self.deadline:
                try:
                    assignment.sweep_expired(s)
                except Exception as exc:  # noqa: BLE001
                    s.rollback()
                    self.rec.errors.append(f"sweeper: {exc!r}")
                time.sleep(0.3)

    def run(self) -> Record:
        threads = [threading.Thread(target=self.worker, args=(i,), name=f"w{i}") for i in range(self.n_workers)]
        threads.append(threading.Thread(target=self.sweeper, name="sweeper"))
        for t in threads:
            t.start()
        for t in threads:
            t.join(max(1.0, self.deadline - time.monotonic() + 30))
        assert not any(t.is_alive() for t in threads), "workers still running after the deadline"
        return self.rec


# ---------------------------------------------------------------------------- the checks


def stuck(sm, study_id: int) -> str:
    """Where a study that never filled stands: each unfilled item, its count and leases."""
    with sm() as s:
        lines = []
        for item in s.scalars(select(Item).where(Item.study_id == study_id, Item.is_gold.is_(False))):
            rows = s.scalars(select(Assignment).where(Assignment.item_id == item.id)).all()
            done = sum(a.state == "completed" for a in rows)
            if done < 3:
                lines.append(
                    f"item {item.id} group={item.exclusion_group} n_active={item.n_active} "
                    f"rows={[(a.worker_id, a.state, str(a.lease_expires_at)) for a in rows]}"
                )
        return "\n".join(lines)


def check_invariants(sm, study_id: int, rec: Record, *, settled: bool) -> dict:
    assert rec.errors == [], "\n".join(rec.errors[:20]) + "\n" + stuck(sm, study_id)
    with sm() as s:
        study = s.get(Study, study_id)
        cap = study.annotations_per_item
        sid = Assignment.study_id == study_id

        # No item over its redundancy, counted two ways.
        over = s.execute(
            select(Assignment.item_id, func.count())
            .where(sid, Assignment.state == "completed", Assignment.is_gold.is_(False))
            .group_by(Assignment.item_id)
            .having(func.count() > cap)
        ).all()
        assert over == []
        over_ann = s.execute(
            select(Annotation.item_id, func.count())
            .where(Annotation.study_id == study_id, Annotation.is_gold.is_(False))
            .group_by(Annotation.item_id)
            .having(func.count() > cap)
        ).all()
        assert over_ann == []

        # Never the same item twice, never two items of one group (any assignment state).
        twice = s.execute(
            select(Assignment.worker_id, Assignment.item_id, func.count())
            .where(sid)
            .group_by(Assignment.worker_id, Assignment.item_id)
            .having(func.count() > 1)
        ).all()
        assert twice == []
        grouped = s.execute(
            select(Assignment.worker_id, Item.exclusion_group, func.count())
            .join(Item, Item.id == Assignment.item_id)
            .where(sid, Item.exclusion_group.is_not(None))
            .group_by(Assignment.worker_id, Item.exclusion_group)
            .having(func.count() > 1)
        ).all()
        assert grouped == []
        mislabelled = s.scalar(
            select(func.count())
            .select_from(Assignment)
            .join(Item, Item.id == Assignment.item_id)
            .where(sid, func.coalesce(Assignment.exclusion_group, "") != func.coalesce(Item.exclusion_group, ""))
        )
        assert mislabelled == 0

        # Every stored submit is there, once; refused submits stored nothing.
        anns = {a.id: a for a in s.scalars(select(Annotation).where(Annotation.study_id == study_id))}
        for a_id, ann_id, _key in rec.stored:
            assert ann_id in anns, f"submit of assignment {a_id} returned {ann_id}, which is lost"
            assert anns[ann_id].assignment_id == a_id
        per_assignment = s.execute(
            select(Annotation.assignment_id, func.count())
            .where(Annotation.study_id == study_id)
            .group_by(Annotation.assignment_id)
            .having(func.count() > 1)
        ).all()
        assert per_assignment == []
        assert {a for a, _, _ in rec.stored} == {a.assignment_id for a in anns.values()}, (
            "an annotation exists that no successful submit returned, or one is missing"
        )
        keys = {a.idempotency_key for a in anns.values()}
        for a_id, key, _ in rec.refused:
            assert key not in keys
            assert all(a.assignment_id != a_id for a in anns.values())
        for a_id, ids in rec.doubles:
            assert len(ids) == 1, f"concurrent submits of {a_id} returned {ids}"
        for ext, ids in rec.entries:
            assert len(ids) == 1, f"concurrent enters of {ext} made bundles {ids}"

        # Assignments and annotations agree.
        completed_ids = set(s.scalars(select(Assignment.id).where(sid, Assignment.state == "completed")))
        assert completed_ids == {a.assignment_id for a in anns.values()}

        # n_active is completed + leased (expired leases count until they are released).
        def active_mismatch(now=None):
            assignment_live = Assignment.state == "completed"
            leased = Assignment.state == "leased"
            if now is not None:
                leased = leased & (Assignment.lease_expires_at > now)
            counted = dict(
                s.execute(
                    select(Assignment.item_id, func.count())
                    .where(sid, assignment_live | leased, Assignment.is_gold.is_(False))
                    .group_by(Assignment.item_id)
                ).all()
            )
            return [
                (iid, gold, n, counted.get(iid, 0))
                for iid, gold, n in s.execute(
                    select(Item.id, Item.is_gold, Item.n_active).where(Item.study_id == study_id)
                )
                if n != (0 if gold else counted.get(iid, 0))
            ]

        assert active_mismatch() == []
        assignment.sweep_expired(s, limit=100000)
        assert active_mismatch(now=utcnow()) == []
        assert (
            s.scalar(select(func.count()).select_from(Item).where(Item.study_id == study_id, Item.n_active > cap)) == 0
        )

        # Bundles count what they hold.
        bundles = s.execute(
            select(Bundle.id, Bundle.n_done, func.count(Annotation.id))
            .join(Assignment, Assignment.bundle_id == Bundle.id, isouter=True)
            .join(Annotation, Annotation.assignment_id == Assignment.id, isouter=True)
            .where(Bundle.study_id == study_id)
            .group_by(Bundle.id, Bundle.n_done)
        ).all()
        assert [b for b in bundles if b[1] != b[2]] == []

        n_items = s.scalar(
            select(func.count()).select_from(Item).where(Item.study_id == study_id, Item.is_gold.is_(False))
        )
        completed = sum(1 for a in anns.values() if not a.is_gold)
        if settled:
            assert completed == n_items * cap
            assert (
                s.scalar(
                    select(func.count())
                    .select_from(Assignment)
                    .where(sid, Assignment.state == "leased", Assignment.is_gold.is_(False))
                )
                == 0
            )
        return {
            "completed": completed,
            "gold": sum(1 for a in anns.values() if a.is_gold),
            "capacity": n_items * cap,
            "stored_calls": len(rec.stored),
            "refused": len(rec.refused),
            "abandoned": rec.abandoned,
            "doubles": len(rec.doubles),
            "expired": s.scalar(select(func.count()).select_from(Assignment).where(sid, Assignment.state == "expired")),
            "bundles": len(bundles),
        }


# ---------------------------------------------------------------------------- the tests


def _free_pg_connections(url: str) -> int:
    eng = create_engine(url, poolclass=NullPool)
    with eng.connect() as c:
        free = c.scalar(text("SELECT current_setting('max_connections')::int - count(*) FROM pg_stat_activity"))
    eng.dispose()
    return free


@pytest.mark.postgres
@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
def test_postgres_100_concurrent_workers(db_url):
    n_workers = 110
    # A dedicated engine: each worker thread has its own Session; the threads share at most
    # 90 connections, which stay below the server's max_connections (100) and leave room for
    # whatever else is connected (other test runs included).
    free = _free_pg_connections(db_url)
    pool = min(90, free - 15)
    if pool < 40:
        pytest.skip(f"only {free} PostgreSQL connections are free; this test needs 55")
    engine = create_engine(db_url, pool_size=pool, max_overflow=0, pool_timeout=120, pool_pre_ping=False)
    sm = sessionmaker(engine, expire_on_commit=False)
    try:
        with sm() as s:
            owner = make_user(s, "researcher")
            study = build_study(
                s,
                owner,
                n_items=300,
                n_gold=12,
                cap=3,
                bundle_size=10,
                gold_rate=0.2,
                group_size=3,
                grouped_fraction=0.6,
            )
        crowd = Crowd(
            sm, study.id, capacity=300 * 3, n_workers=n_workers, short_share=0.1, n_doublers=6, deadline_s=240
        )
        started = time.monotonic()
        rec = crowd.run()
        figures = check_invariants(sm, study.id, rec, settled=True)
        print(f"\npostgres, {n_workers} workers on {pool} connections: {time.monotonic() - started:.1f} s, {figures}")
        assert figures["abandoned"] > 0 and figures["expired"] > 0
        assert figures["doubles"] > 0 and figures["gold"] > 0
    finally:
        engine.dispose()


def test_sqlite_16_threads_in_one_process(sqlite_url):
    from app.db import get_engine

    engine = get_engine(sqlite_url)  # the embedded default's own engine
    sm = sessionmaker(engine, expire_on_commit=False)
    try:
        with sm() as s:
            owner = make_user(s, "researcher")
            study = build_study(
                s,
                owner,
                n_items=120,
                n_gold=6,
                cap=3,
                bundle_size=10,
                gold_rate=0.2,
                group_size=3,
                grouped_fraction=0.5,
            )
        crowd = Crowd(sm, study.id, capacity=120 * 3, n_workers=16, short_share=0.2, n_doublers=3, deadline_s=180)
        started = time.monotonic()
        rec = crowd.run()
        figures = check_invariants(sm, study.id, rec, settled=True)
        print(f"\nsqlite, 16 threads: {time.monotonic() - started:.1f} s, {figures}")
        assert figures["abandoned"] > 0 and figures["doubles"] > 0
    finally:
        engine.dispose()
