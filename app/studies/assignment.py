"""The assignment engine: who gets which item, under which lease, and how answers land.

Invariants (tested under 100+ concurrent workers on PostgreSQL):
- an item never has more completed-or-leased assignments than `annotations_per_item`
  (gold items are shared quality checks and have no cap);
- a worker never gets the same item twice, nor two items of one exclusion group;
- a retried or doubled submit stores one annotation and returns it again;
- when a bundle ends, the kind's automatic review runs in the same transaction (an approval
  is recorded once, and never overrides an admin's decision).

PostgreSQL: rows are claimed with FOR UPDATE SKIP LOCKED; locks are always taken in the
order bundle -> participant -> assignment -> item (an admin's decision locks participant ->
assignment -> item), so concurrent requests cannot deadlock each other.
SQLite (the single-process embedded default): one process-wide lock serialises these writes.
"""

from __future__ import annotations

import hashlib
import hmac
import random
import time
from datetime import timedelta

from sqlalchemy import and_, exists, func, select, update
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.orm import Session, aliased

from app.auth.models import IMPORTED_PLATFORM, User
from app.config import get_settings
from app.db import serialised_writes, utcnow
from app.errors import InputError
from app.kinds import get_kind
from app.quality.service import auto_review
from app.studies.models import Annotation, Assignment, Bundle, Item, Participant, Study


class NotAvailable(Exception):
    """The study cannot take this request now (not live, lease lost, no work)."""


def _retrying(fn, session: Session, attempts: int = 5):
    """Deadlocks and unique-key races are retried; the loser of a race sees the winner's row.
    Any failure is rolled back while the SQLite lock is still held."""
    for attempt in range(attempts):
        with serialised_writes(session):
            try:
                result = fn()
                session.commit()
                return result
            except (IntegrityError, OperationalError):
                session.rollback()
                if attempt == attempts - 1:
                    raise
            except BaseException:
                session.rollback()
                raise
        time.sleep(0.005 * (attempt + 1) * random.random())


def pseudonym(platform: str, external_id: str) -> str:
    key = get_settings().secret_key.encode()
    digest = hmac.new(key, f"{platform}:{external_id}".encode(), hashlib.sha256).hexdigest()
    return f"w-{digest[:16]}"


def _get_or_create(session: Session, model, lookup: dict, defaults: dict):
    row = session.scalar(select(model).filter_by(**lookup))
    if row is not None:
        return row
    try:
        with session.begin_nested():
            row = model(**lookup, **defaults)
            session.add(row)
    except IntegrityError:
        row = session.scalar(select(model).filter_by(**lookup))
    return row


def enter(session: Session, study: Study, platform: str, external_worker_id: str,
          external_assignment_id: str = "", hit_id: str = "") -> Bundle:
    """A crowd worker arrives by an entry link: find or start their bundle."""
    if study.state != "live":
        raise NotAvailable(f"This study is {study.state}, not taking work right now.")

    def work():
        worker = _get_or_create(
            session, User, {"platform": platform, "external_id": external_worker_id},
            {"role": "worker", "pseudonym": pseudonym(platform, external_worker_id)})
        participant = _get_or_create(session, Participant,
                                     {"study_id": study.id, "worker_id": worker.id}, {})
        if participant.status == "rejected":
            raise NotAvailable("Your work on this study has been reviewed and closed.")
        size = study.bundle_size
        n_gold = round(size * study.gold_rate)
        rng = random.Random(f"{study.id}:{worker.id}:{external_assignment_id}")
        return _get_or_create(
            session, Bundle,
            {"study_id": study.id, "worker_id": worker.id,
             "external_assignment_id": external_assignment_id},
            {"participant_id": participant.id, "hit_id": hit_id, "size": size,
             "gold_slots": sorted(rng.sample(range(size), n_gold))})

    return _retrying(work, session)


def _lock_bundle(session: Session, bundle_id: int) -> Bundle:
    return session.execute(
        select(Bundle).where(Bundle.id == bundle_id).with_for_update()
        .execution_options(populate_existing=True)
    ).scalar_one()


def _lock_participant(session: Session, bundle: Bundle) -> None:
    session.execute(select(Participant.id).where(Participant.id == bundle.participant_id)
                    .with_for_update())


def _check_not_rejected(session: Session, bundle: Bundle) -> None:
    """A rejected worker's open task ends too: no new leases, no new answers."""
    status = session.scalar(select(Participant.status).where(Participant.id == bundle.participant_id))
    if status == "rejected":
        raise NotAvailable("Your work on this study has been reviewed and closed.")


def _release(session: Session, assignment: Assignment, state: str) -> bool:
    """Move a leased assignment to `state` and give its capacity back to the item."""
    moved = session.execute(
        update(Assignment).where(Assignment.id == assignment.id, Assignment.state == "leased")
        .values(state=state)
    ).rowcount
    if moved and not assignment.is_gold:
        session.execute(update(Item).where(Item.id == assignment.item_id)
                        .values(n_active=Item.n_active - 1))
    return bool(moved)


def _pick(session: Session, study: Study, worker_id: int, gold: bool) -> Item | None:
    mine = aliased(Assignment)
    grouped = aliased(Assignment)
    q = (
        select(Item)
        .where(Item.study_id == study.id, Item.is_gold == gold)
        .where(~exists().where(mine.item_id == Item.id, mine.worker_id == worker_id))
        .where(Item.exclusion_group.is_(None) | ~exists().where(
            grouped.study_id == study.id, grouped.worker_id == worker_id,
            grouped.exclusion_group == Item.exclusion_group))
        .limit(1)
    )
    if gold:
        # Gold is shared by everyone; spread it by a per-worker random start.
        start = random.Random(worker_id).random()
        item = session.scalar(q.where(Item.position >= start).order_by(Item.position))
        return item or session.scalar(q.order_by(Item.position))
    # Depth first: items closest to their redundancy go first, so that what is done so far
    # is whole items (majorities, agreement) rather than one answer on everything.
    q = (q.where(Item.n_active < study.annotations_per_item)
         .order_by(Item.n_active.desc(), Item.position.desc())
         .with_for_update(skip_locked=True, of=Item))
    return session.scalar(q)


def next_item(session: Session, study: Study, bundle_id: int) -> Assignment | None:
    """The bundle's current assignment, leasing a new item when the last one is done.

    Returns None when the bundle is finished or the study has no work left for this worker.
    Calling it again (a reload) returns the same lease until it expires.
    """
    if study.state != "live":
        raise NotAvailable(f"This study is {study.state}, not taking work right now.")

    def work():
        now = utcnow()
        bundle = _lock_bundle(session, bundle_id)
        _check_not_rejected(session, bundle)
        current = session.scalar(
            select(Assignment).where(Assignment.bundle_id == bundle.id,
                                     Assignment.state == "leased")
            .order_by(Assignment.id.desc()).limit(1).with_for_update())
        if current is not None:
            if current.lease_expires_at > now:
                return current
            _release(session, current, "expired")
        if bundle.n_done >= bundle.size or bundle.finished_at is not None:
            return None
        slot = bundle.n_done
        want_gold = slot in (bundle.gold_slots or [])
        item = _pick(session, study, bundle.worker_id, want_gold)
        if item is None and want_gold:
            item = _pick(session, study, bundle.worker_id, False)
        if item is None:
            return None
        if not item.is_gold:
            session.execute(update(Item).where(Item.id == item.id)
                            .values(n_active=Item.n_active + 1))
        assignment = Assignment(
            study_id=study.id, item_id=item.id, worker_id=bundle.worker_id, bundle_id=bundle.id,
            exclusion_group=item.exclusion_group, slot=slot, is_gold=item.is_gold,
            leased_at=now, lease_expires_at=now + timedelta(seconds=study.lease_seconds))
        session.add(assignment)
        session.flush()
        return assignment

    return _retrying(work, session)


def submit(session: Session, study: Study, bundle_id: int, assignment_id: int,
           response: dict, idempotency_key: str, client: dict | None = None) -> Annotation:
    """Store a worker's response exactly once.

    A replay with the same key, or a second submit for an assignment already answered,
    returns the stored annotation unchanged.
    """
    kind = get_kind(study.kind)
    if not idempotency_key or len(idempotency_key) > 64:
        raise InputError("an idempotency key of 1-64 characters is required", field="idempotency_key")

    def work():
        bundle = _lock_bundle(session, bundle_id)
        if bundle.n_done + 1 >= bundle.size:
            _lock_participant(session, bundle)  # this answer may end the task: see auto_review
        stored = session.scalar(select(Annotation).where(
            (Annotation.idempotency_key == idempotency_key) | (Annotation.assignment_id == assignment_id)))
        if stored is not None:
            if stored.worker_id != bundle.worker_id:
                raise InputError("this key belongs to another submission", field="idempotency_key")
            return stored
        assignment = session.execute(
            select(Assignment).where(Assignment.id == assignment_id).with_for_update()
            .execution_options(populate_existing=True)).scalar_one_or_none()
        if assignment is None or assignment.bundle_id != bundle.id:
            raise InputError("no such assignment in your task", field="assignment_id")
        if study.state not in ("live", "paused"):
            raise NotAvailable(f"This study is {study.state}; answers are no longer taken.")
        _check_not_rejected(session, bundle)
        item = session.get(Item, assignment.item_id)
        parsed = kind.parse_response(response, payload=item.payload, settings=study.kind_settings or {})
        if assignment.state == "expired":
            if bundle.n_done >= bundle.size:
                raise NotAvailable("Your task is already complete.")
            # A late answer fills only its own slot, and only while no newer lease has taken
            # that slot: otherwise a page kept open could fill whichever slot is current (a
            # gold one, so that gold is never answered).
            replaced = session.scalar(select(func.count()).select_from(Assignment).where(
                Assignment.bundle_id == bundle.id, Assignment.slot == assignment.slot,
                Assignment.id != assignment.id))
            if replaced or assignment.slot != bundle.n_done:
                raise NotAvailable("Time ran out on this item and your task has moved on: answer "
                                   "the item it shows now.")
        if assignment.state == "expired" and not assignment.is_gold:
            # The lease ran out; keep the answer only if the item still has room for it.
            took = session.execute(
                update(Item).where(Item.id == assignment.item_id,
                                   Item.n_active < study.annotations_per_item)
                .values(n_active=Item.n_active + 1)).rowcount
            if not took:
                raise NotAvailable("Time ran out on this item and it went to someone else.")
        elif assignment.state not in ("leased", "expired"):
            raise NotAvailable("This item is no longer yours to answer.")
        now = utcnow()
        assignment.state = "completed"
        assignment.completed_at = now
        annotation = Annotation(
            assignment_id=assignment.id, study_id=study.id, item_id=item.id,
            worker_id=bundle.worker_id, is_gold=item.is_gold, response=parsed,
            score=kind.score(item.payload, item.reference, parsed),
            scores=kind.score_details(item.payload, item.reference, parsed),
            duration_ms=int((now - assignment.leased_at).total_seconds() * 1000),
            client=client or {}, idempotency_key=idempotency_key)
        session.add(annotation)
        bundle.n_done += 1
        if bundle.n_done >= bundle.size:
            bundle.finished_at = now
            session.flush()
            auto_review(session, study, bundle.participant_id)
        session.flush()
        return annotation

    return _retrying(work, session)


def finish_early(session: Session, bundle_id: int) -> None:
    """No work is left for this worker: close the bundle with what they did."""
    def work():
        bundle = _lock_bundle(session, bundle_id)
        if bundle.finished_at is None:
            bundle.finished_at = utcnow()
            session.flush()
            auto_review(session, session.get(Study, bundle.study_id), bundle.participant_id)
    _retrying(work, session)


def sweep_expired(session: Session, limit: int = 500) -> int:
    """Return items whose leases ran out to the pool (next_item also does this lazily)."""
    def work():
        rows = session.scalars(
            select(Assignment).where(Assignment.state == "leased",
                                     Assignment.lease_expires_at < utcnow())
            .order_by(Assignment.id).limit(limit).with_for_update(skip_locked=True)).all()
        return sum(_release(session, a, "expired") for a in rows)
    return _retrying(work, session)


def progress(session: Session, study: Study) -> dict:
    """Live counts for the researcher's page (SQL aggregates only)."""
    now = utcnow()
    # The study's own crowd: annotations imported from an earlier study are not its progress.
    completed = session.scalar(select(func.count()).select_from(Annotation).where(
        Annotation.study_id == study.id, Annotation.is_gold.is_(False), Annotation.excluded.is_(False),
        Annotation.worker_id.not_in(select(User.id).where(User.platform == IMPORTED_PLATFORM))))
    in_flight = session.scalar(select(func.count()).select_from(Assignment).where(
        Assignment.study_id == study.id, Assignment.state == "leased",
        Assignment.lease_expires_at > now))
    n_items = session.scalar(select(func.count()).select_from(Item).where(
        Item.study_id == study.id, Item.is_gold.is_(False)))
    per_worker = session.execute(
        select(User.pseudonym, Participant.status, func.count(Annotation.id))
        .join(Participant, and_(Participant.worker_id == User.id, Participant.study_id == study.id))
        .join(Annotation, and_(Annotation.worker_id == User.id, Annotation.study_id == study.id), isouter=True)
        .where(User.platform.is_distinct_from(IMPORTED_PLATFORM))
        .group_by(User.pseudonym, Participant.status).order_by(func.count(Annotation.id).desc())
    ).all()
    target = n_items * study.annotations_per_item
    return {"items": n_items, "target": target, "completed": completed, "in_flight": in_flight,
            "fraction": completed / target if target else 0.0,
            "workers": [{"worker": p, "status": s, "annotations": n} for p, s, n in per_worker]}
