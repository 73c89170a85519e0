"""The assignment engine: who gets which item, under which lease, and how answers land.

Invariants (tested under 100+ concurrent workers on PostgreSQL):
- an item never has more completed-or-leased assignments than `annotations_per_item`
  (gold items are shared quality checks and have no cap);
- a worker never gets the same item twice, nor two items of one exclusion group;
- a retried or doubled submit stores one annotation and returns it again;
- when a bundle ends, the kind's automatic review runs in the same transaction (an approval
  is recorded once, and never overrides an admin's decision).

PostgreSQL: rows are claimed with FOR UPDATE SKIP LOCKED; locks are always taken in the
order bundle -> participant -> assignment -> item (a rejection too, over all the worker's
bundles; an approval locks the participant only), so concurrent requests cannot deadlock
each other; a transaction's several items (the sweeper's, a rejection's) go in item order;
the leaderboard totals come last (an annotation's trigger: the item's lb_items row, then the
worker's rows, then the item's answers; docs/data-model.md, "Locks").
SQLite (the single-process embedded default): one process-wide lock serialises these writes.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
from datetime import timedelta
from typing import Any, TypeVar, cast

from sqlalchemy import ColumnElement, CursorResult, Result, Select, and_, bindparam, exists, func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, aliased

from app.auth.models import IMPORTED_PLATFORM, User
from app.config import get_settings
from app.db import Base, retrying as _retrying, utcnow as utcnow  # names its tests (and hotpath._now) use
from app.errors import InputError
from app.kinds import get_kind
from app.kinds.base import JSONDict, TaskKind
from app.quality.service import auto_review
from app.studies.models import RELEASED, Annotation, Assignment, Bundle, Item, Participant, Study


class NotAvailable(Exception):
    """The study cannot take this request now (not live, lease lost, no work, a cap reached).
    `status` is the HTTP status the worker gets; `retry_after` (seconds) where waiting helps."""

    def __init__(self, message: str, status: int = 409, retry_after: int | None = None):
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after


def pseudonym(platform: str, external_id: str) -> str:
    key = get_settings().secret_key.encode()
    digest = hmac.new(key, f"{platform}:{external_id}".encode(), hashlib.sha256).hexdigest()
    return f"w-{digest[:16]}"


def address_pseudonym(address: str) -> str:
    """A network address as stored: an HMAC, enough to count bundles per address, never the
    address itself."""
    key = get_settings().secret_key.encode()
    return hmac.new(key, f"proctor/ip/{address}".encode(), hashlib.sha256).hexdigest()[:32]


def gold_salt(study_id: int, external_assignment_id: str) -> str:
    """The key of a bundle's gold draw: keyed by the app's secret, so that nobody who knows the
    rule and their ids can work out which of their slots are gold."""
    key = get_settings().secret_key.encode()
    return hmac.new(key, f"proctor/gold/{study_id}:{external_assignment_id}".encode(), hashlib.sha256).hexdigest()[:32]


def gold_slots(study_id: int, worker_id: int, external_assignment_id: str, size: int, n_gold: int) -> list[int]:
    """A new bundle's gold slots: the `n_gold` slots of the smallest md5("salt:worker:slot"),
    sorted. The hot path's entry (app/studies/hotpath.py, ENTER_SQL) computes the same in SQL,
    so one (study, worker, assignment id) gets the same slots whichever path made its bundle."""
    salt = gold_salt(study_id, external_assignment_id)
    order = sorted(range(size), key=lambda x: (hashlib.md5(f"{salt}:{worker_id}:{x}".encode()).hexdigest(), x))
    return sorted(order[:n_gold])


def gold_start(worker_id: int) -> float:
    """Where a worker starts in the shared gold items (by position, wrapping round), so that gold
    is spread over workers: the first 20 bits of md5("worker id") over 2^20. The hot path's lease
    (hotpath.NEXT_SQL) computes the same, so both paths hand a worker the same gold item."""
    return int(hashlib.md5(str(worker_id).encode()).hexdigest()[:5], 16) / 1048576


def browser_hash(secret: str) -> str:
    """What a bundle keeps of its browser's secret (a random token: a plain hash suffices)."""
    return hashlib.sha256(secret.encode()).hexdigest()


_Row = TypeVar("_Row", bound=Base)


def _get_or_create(session: Session, model: type[_Row], lookup: dict[str, Any], defaults: dict[str, Any]) -> _Row:
    row = session.scalar(select(model).filter_by(**lookup))
    if row is not None:
        return row
    try:
        with session.begin_nested():
            row = model(**lookup, **defaults)
            session.add(row)
    except IntegrityError:
        # Another request made it meanwhile (`lookup` is unique): theirs.
        row = cast(_Row, session.scalar(select(model).filter_by(**lookup)))
    return row


def enter(
    session: Session,
    study: Study,
    platform: str,
    external_worker_id: str,
    external_assignment_id: str = "",
    hit_id: str = "",
    browser: str | None = None,
    address: str | None = None,
) -> Bundle:
    """A crowd worker arrives by an entry link: find or start their bundle.

    `browser` is the hash of the entering browser's secret. A bundle is bound to a browser
    when the worker consents in it (`consent`), not here: an entry that never consented holds
    nothing (a phone that only opened the link, or someone who knows the worker id, locks no
    one out); once bound, no other browser may resume it or start another in that worker's
    name (the refusal names the study's contact, who can release it: `release_browser`).
    `address` is the address pseudonym, for the cap on bundles open at once per address.
    Callers in-process (tests, the bench's service mode) may leave both out.
    """
    if study.state != "live":
        raise NotAvailable(f"This study is {study.state}, not taking work right now.")

    def work() -> Bundle:
        worker = _get_or_create(
            session,
            User,
            {"platform": platform, "external_id": external_worker_id},
            {"role": "worker", "pseudonym": pseudonym(platform, external_worker_id)},
        )
        participant = _get_or_create(session, Participant, {"study_id": study.id, "worker_id": worker.id}, {})
        if participant.status == "rejected":
            raise NotAvailable("Your work on this study has been reviewed and closed.")
        lookup = select(Bundle).where(
            Bundle.study_id == study.id,
            Bundle.worker_id == worker.id,
            Bundle.external_assignment_id == external_assignment_id,
        )
        bundle = session.scalar(lookup)
        if bundle is None:
            # The caps count this worker's bundles: one new bundle at a time per worker.
            session.execute(select(Participant.id).where(Participant.id == participant.id).with_for_update())
            bundle = session.scalar(lookup.execution_options(populate_existing=True))
        if bundle is not None:
            _check_browser(study, bundle, browser, entry=True)
            return bundle
        _admit(session, study, worker.id, browser, address)
        size = study.bundle_size
        n_gold = round(size * study.gold_rate)
        bundle = Bundle(
            study_id=study.id,
            worker_id=worker.id,
            external_assignment_id=external_assignment_id,
            participant_id=participant.id,
            hit_id=hit_id,
            size=size,
            gold_slots=gold_slots(study.id, worker.id, external_assignment_id, size, n_gold),
            browser_hash=None,
            ip_hash=address,
        )
        session.add(bundle)
        session.flush()
        return bundle

    return _retrying(work, session)


def other_browser(study: Study) -> str:
    """The refusal in a browser other than the one the worker consented in: what to do."""
    who = f"the researcher ({study.contact})" if study.contact else "the researcher (through your platform's messages)"
    return (
        "You agreed to this study in another browser (or this browser's cookies were cleared "
        "since). Continue it in the browser where you agreed; if you cannot, write to "
        f"{who} with your worker id and ask them to release your task, then open the "
        "study's link here again."
    )


def _check_browser(study: Study, bundle: Bundle, browser: str | None, entry: bool = False) -> None:
    """Only the browser the worker consented in may resume a consented bundle (one consented
    before browsers were bound is bound to the first that comes back; one the researcher
    released, to the first that opens the link: `entry`); a bundle not consented to is bound
    to none."""
    if browser is None or bundle.consented_at is None:
        return
    if bundle.browser_hash is None or (entry and bundle.browser_hash == RELEASED):
        bundle.browser_hash = browser
    elif not hmac.compare_digest(bundle.browser_hash.encode(), browser.encode()):
        raise NotAvailable(other_browser(study), status=403)


def _admit(
    session: Session,
    study: Study,
    worker_id: int,
    browser: str | None,
    address: str | None,
    bundle_id: int | None = None,
) -> None:
    """May this worker start a new bundle here (at entry), or bind `bundle_id` (at consent)?
    Refused with the reason they read. Only bundles consented to count, so an entry never
    agreed to holds nothing; consent checks the same again, the bundle itself left out, and
    that is what holds the caps (entering many times, then consenting in each, is refused at
    the cap)."""
    others = [Bundle.id != bundle_id] if bundle_id is not None else []
    theirs = session.scalars(
        select(Bundle.browser_hash).where(
            Bundle.study_id == study.id, Bundle.worker_id == worker_id, Bundle.consented_at.is_not(None), *others
        )
    ).all()
    if browser is not None and any(h not in (None, RELEASED, browser) for h in theirs):
        raise NotAvailable(other_browser(study), status=403)
    cap = study.max_bundles_per_worker
    if len(theirs) >= cap:
        raise NotAvailable(
            "You have already taken part in this study: it allows one task per person."
            if cap == 1
            else f"You have already done the {cap} tasks this study allows per person.",
            status=403,
        )
    if address is None:
        return
    now = utcnow()
    # Open: consented, unfinished, and consented within a lease's time or holding a live
    # lease (a bundle walked away from stops counting when its lease runs out).
    live = exists().where(
        Assignment.bundle_id == Bundle.id, Assignment.state == "leased", Assignment.lease_expires_at > now
    )
    open_here = session.execute(
        select(func.count())
        .select_from(Bundle)
        .where(
            Bundle.study_id == study.id,
            Bundle.ip_hash == address,
            Bundle.finished_at.is_(None),
            Bundle.consented_at.is_not(None),
            *others,
            (Bundle.consented_at > now - timedelta(seconds=study.lease_seconds)) | live,
        )
    ).scalar_one()
    if open_here >= study.max_open_bundles_per_ip:
        raise NotAvailable(
            f"Too many tasks of this study are open from your network right now ({open_here}). "
            "Please try again in a few minutes. If you take part with others in one room or "
            "network, tell the researcher.",
            status=429,
            retry_after=120,
        )


_LOCK_BUNDLE = (
    select(Bundle).where(Bundle.id == bindparam("id")).with_for_update().execution_options(populate_existing=True)
)
_LOCK_ASSIGNMENT = (
    select(Assignment)
    .where(Assignment.id == bindparam("id"))
    .with_for_update()
    .execution_options(populate_existing=True)
)


def _lock_bundle(session: Session, bundle_id: int) -> Bundle:
    """The bundle's row, locked and read afresh (NoResultFound where there is none): what
    `session.get_one(Bundle, id, with_for_update=True, populate_existing=True)` runs, from a
    statement built once (see _STATUS below)."""
    return session.scalars(_LOCK_BUNDLE, {"id": bundle_id}).one()


def _lock_participant(session: Session, bundle: Bundle) -> None:
    session.execute(select(Participant.id).where(Participant.id == bundle.participant_id).with_for_update())


# Statements each lease or answer runs, built once with their values bound at each call (as
# `_pick_statement`): building one afresh and keying it for the compiled cache costs more
# Python than the lookup it runs.
_STATUS = select(Participant.status).where(Participant.id == bindparam("participant_id"))
_CURRENT_LEASE = (
    select(Assignment)
    .where(Assignment.bundle_id == bindparam("bundle_id"), Assignment.state == "leased")
    .order_by(Assignment.id.desc())
    .limit(1)
    .with_for_update()
    .execution_options(populate_existing=True)
)
_STORED = select(Annotation).where(
    (Annotation.idempotency_key == bindparam("key")) | (Annotation.assignment_id == bindparam("assignment_id"))
)


def _check_not_rejected(session: Session, bundle: Bundle) -> None:
    """A rejected worker's open task ends too: no new leases, no new answers."""
    status = session.scalar(_STATUS, {"participant_id": bundle.participant_id})
    if status == "rejected":
        raise NotAvailable("Your work on this study has been reviewed and closed.")


def _release(session: Session, assignment: Assignment, state: str) -> bool:
    """Move a leased assignment to `state` and give its capacity back to the item."""
    moved = _rowcount(
        session.execute(
            update(Assignment).where(Assignment.id == assignment.id, Assignment.state == "leased").values(state=state)
        )
    )
    if moved and not assignment.is_gold:
        session.execute(update(Item).where(Item.id == assignment.item_id).values(n_active=Item.n_active - 1))
    return bool(moved)


def _rowcount(result: Result[Any]) -> int:
    # An UPDATE's result is a CursorResult (Session.execute is typed with the plain Result).
    return cast(CursorResult[Any], result).rowcount


@functools.cache
def _assignment_aliases() -> tuple[Any, Any]:
    """The two aliases of assignments `_open_to` reads, made once: a new alias builds a proxy of
    each of the table's columns on first use (4.7 ms a call to _open_to, most of a lease's
    Python time); the SQL is the same, each alias named when a statement is compiled."""
    return aliased(Assignment), aliased(Assignment)


def _open_to(study: Study, worker_id: int, again: bool = False) -> tuple[ColumnElement[bool], ...]:
    """Items this worker may still get: never one they had, nor one of a group they had, nor
    one they wrote. `again`: also an item whose only lease of theirs ran out unanswered (and
    so, for a group, only that item of it): offered only when nothing else is left for them,
    or a worker who once let a lease run out could never fill a task of all the study's items."""
    return _open_clauses(study.id, worker_id, again)


def _open_clauses(study_id: Any, worker_id: Any, again: bool) -> tuple[ColumnElement[bool], ...]:
    """`_open_to`'s clauses, for values or bound parameters (`_pick_statement`)."""
    mine, grouped = _assignment_aliases()
    return (
        ~exists().where(
            mine.item_id == Item.id, mine.worker_id == worker_id, *([mine.state != "expired"] if again else [])
        ),
        Item.author_id.is_(None) | (Item.author_id != worker_id),
        Item.exclusion_group.is_(None)
        | ~exists().where(
            grouped.study_id == study_id,
            grouped.worker_id == worker_id,
            grouped.exclusion_group == Item.exclusion_group,
            *([grouped.item_id != Item.id] if again else []),
        ),
    )


@functools.cache
def _pick_statement(gold: bool, again: bool, adaptive: bool, from_start: bool) -> Select[Item]:
    """`_pick`'s query for one shape, built once, its values bound at each call (study_id,
    worker_id; start for gold from a worker's start; cap and floor for people's items): built
    afresh, its expressions and cache key were about a sixth of a lease and answer's CPU."""
    open_to = _open_clauses(bindparam("study_id"), bindparam("worker_id"), again)
    q = select(Item).where(Item.study_id == bindparam("study_id"), Item.is_gold == gold, *open_to).limit(1)
    if gold:
        # Gold is shared by everyone; spread it by a per-worker start.
        return (
            q.where(Item.position >= bindparam("start")).order_by(Item.position)
            if from_start
            else q.order_by(Item.position)
        )
    # Depth first: items closest to their redundancy go first, so that what is done so far
    # is whole items (majorities, agreement) rather than one answer on everything. Adaptive
    # allocation (app/leaderboards/adaptive.py) puts before that the items under the floor,
    # then the priority the periodic job wrote (the hot path's NEXT_SQL orders alike).
    first: list[ColumnElement[Any]] = (
        [(Item.n_active < bindparam("floor")).desc(), Item.priority.desc()] if adaptive else []
    )
    return (
        q.where(Item.n_active < bindparam("cap"), Item.for_people.is_(True))
        .order_by(*first, Item.n_active.desc(), Item.position.desc())
        # FOR NO KEY UPDATE (only n_active changes): not skipping items whose rows a foreign-key
        # check holds FOR KEY SHARE (an answer being stored, the totals' rebuild).
        .with_for_update(skip_locked=True, key_share=True, of=Item)
    )


def _pick(session: Session, study: Study, worker_id: int, gold: bool, again: bool = False) -> Item | None:
    params: dict[str, Any] = {"study_id": study.id, "worker_id": worker_id}
    if gold:
        params["start"] = gold_start(worker_id)
        item = session.scalar(_pick_statement(True, again, False, True), params)
        return item or session.scalar(_pick_statement(True, again, False, False), params)
    params.update(cap=study.annotations_per_item, floor=study.adaptive_floor)
    return session.scalar(_pick_statement(False, again, bool(study.adaptive), False), params)


def next_item(session: Session, study: Study, bundle_id: int) -> Assignment | None:
    """The bundle's current assignment, leasing a new item when the last one is done.

    Returns None when the bundle is finished or the study has no work left for this worker.
    Calling it again (a reload) returns the same lease until it expires.
    """
    if study.state != "live":
        raise NotAvailable(f"This study is {study.state}, not taking work right now.")

    # Where a worker may hold several bundles, they still hold one live lease: see below.
    several = study.max_bundles_per_worker > 1

    def work() -> Assignment | None:
        now = utcnow()
        bundle = _lock_bundle(session, bundle_id)
        if several:
            _lock_participant(session, bundle)  # bundle -> participant -> assignment
        _check_not_rejected(session, bundle)
        current = session.scalar(_CURRENT_LEASE, {"bundle_id": bundle.id})
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
        # Nothing new is left: an item whose lease of theirs ran out comes back to them.
        again = item is None
        if again:
            item = _pick(session, study, bundle.worker_id, want_gold, again=True)
        if item is None and want_gold:
            item = _pick(session, study, bundle.worker_id, False, again=True)
        if item is None:
            return None
        if not item.is_gold:
            session.execute(update(Item).where(Item.id == item.id).values(n_active=Item.n_active + 1))
        if several:
            # A new lease ends the worker's live lease in another of their bundles (another
            # tab): one person never holds more than one item of the study at a time. Ended
            # rather than refused, so that a worker who moved on is never held up by the item
            # they walked away from; its late answer is then taken only as any late answer is.
            for other in session.scalars(
                select(Assignment)
                .where(
                    Assignment.study_id == study.id,
                    Assignment.worker_id == bundle.worker_id,
                    Assignment.state == "leased",
                    Assignment.bundle_id != bundle.id,
                )
                .with_for_update()
            ).all():
                _release(session, other, "expired")
        expires = now + timedelta(seconds=study.lease_seconds)
        # populate_existing: a long-lived session may still hold this row as leased after the
        # sweeper (another session) ended it; unrefreshed, setting "leased" would change nothing.
        assignment = (
            session.scalar(
                select(Assignment)
                .where(
                    Assignment.worker_id == bundle.worker_id,
                    Assignment.item_id == item.id,
                    Assignment.state == "expired",
                )
                .with_for_update()
                .execution_options(populate_existing=True)
            )
            if again
            else None
        )
        if assignment is not None:
            # The same item again: its expired row (one per worker and item) is leased anew,
            # so the old page's answer to it is this lease's answer.
            assignment.bundle_id, assignment.slot, assignment.state = bundle.id, slot, "leased"
            assignment.leased_at, assignment.lease_expires_at = now, expires
            assignment.completed_at = None
        else:
            assignment = Assignment(
                study_id=study.id,
                item_id=item.id,
                worker_id=bundle.worker_id,
                bundle_id=bundle.id,
                exclusion_group=item.exclusion_group,
                slot=slot,
                is_gold=item.is_gold,
                leased_at=now,
                lease_expires_at=expires,
            )
            session.add(assignment)
        session.flush()
        return assignment

    return _retrying(work, session)


def scored_answer(
    kind: TaskKind, assignment: Assignment, item: Any, response: JSONDict, duration_ms: int, client: JSONDict, key: str
) -> Annotation:
    """An assignment's answer as stored, scored by the study's kind against its item (`item`:
    an Item, or a row of its id, payload, reference and is_gold). A worker's submission and an
    imported answer (app/studies/imports.py) are stored by this one rule, so the leaderboard
    reads them alike."""
    return Annotation(
        assignment_id=assignment.id,
        study_id=assignment.study_id,
        item_id=item.id,
        worker_id=assignment.worker_id,
        is_gold=item.is_gold,
        response=response,
        score=kind.score(item.payload, item.reference, response),
        scores=kind.score_details(item.payload, item.reference, response),
        duration_ms=duration_ms,
        client=client,
        idempotency_key=key,
    )


def submit(
    session: Session,
    study: Study,
    bundle_id: int,
    assignment_id: int,
    response: dict[str, Any],
    idempotency_key: str,
    client: dict[str, Any] | None = None,
) -> Annotation:
    """Store a worker's response exactly once.

    A replay with the same key, or a second submit for an assignment already answered,
    returns the stored annotation unchanged.
    """
    kind = get_kind(study.kind)
    # No U+0000 either (round 16 of issue 26: the answer form's key, which no JSON body check
    # reads, was stored on SQLite and refused by PostgreSQL naming no field).
    if not idempotency_key or len(idempotency_key) > 64 or "\x00" in idempotency_key:
        raise InputError("an idempotency key of 1-64 characters is required", field="idempotency_key")

    def work() -> Annotation:
        bundle = _lock_bundle(session, bundle_id)
        if bundle.n_done + 1 >= bundle.size:
            _lock_participant(session, bundle)  # this answer may end the task: see auto_review
        stored = session.scalar(_STORED, {"key": idempotency_key, "assignment_id": assignment_id})
        if stored is not None:
            if stored.worker_id != bundle.worker_id:
                raise InputError("this key belongs to another submission", field="idempotency_key")
            return stored
        assignment = session.scalars(_LOCK_ASSIGNMENT, {"id": assignment_id}).one_or_none()
        if assignment is None or assignment.bundle_id != bundle.id:
            raise InputError("no such assignment in your task", field="assignment_id")
        if study.state not in ("live", "paused"):
            raise NotAvailable(f"This study is {study.state}; answers are no longer taken.")
        _check_not_rejected(session, bundle)
        item = session.get(Item, assignment.item_id)
        assert item is not None  # an assignment's item (a foreign key; it goes with its items)
        parsed = kind.parse_response(response, payload=item.payload, settings=study.kind_settings or {})
        if assignment.state == "expired":
            if bundle.n_done >= bundle.size:
                raise NotAvailable("Your task is already complete.")
            # A late answer fills only its own slot, and only while no newer lease has taken
            # that slot: otherwise a page kept open could fill whichever slot is current (a
            # gold one, so that gold is never answered).
            replaced = session.scalar(
                select(func.count())
                .select_from(Assignment)
                .where(
                    Assignment.bundle_id == bundle.id,
                    Assignment.slot == assignment.slot,
                    Assignment.id != assignment.id,
                )
            )
            if replaced or assignment.slot != bundle.n_done:
                raise NotAvailable(
                    "Time ran out on this item and your task has moved on: answer the item it shows now."
                )
        if assignment.state == "expired" and not assignment.is_gold:
            # The lease ran out; keep the answer only if the item still has room for it.
            took = _rowcount(
                session.execute(
                    update(Item)
                    .where(Item.id == assignment.item_id, Item.n_active < study.annotations_per_item)
                    .values(n_active=Item.n_active + 1)
                )
            )
            if not took:
                raise NotAvailable("Time ran out on this item and it went to someone else.")
        elif assignment.state not in ("leased", "expired"):
            raise NotAvailable("This item is no longer yours to answer.")
        now = utcnow()
        assignment.state = "completed"
        assignment.completed_at = now
        duration_ms = int((now - assignment.leased_at).total_seconds() * 1000)
        annotation = scored_answer(kind, assignment, item, parsed, duration_ms, client or {}, idempotency_key)
        session.add(annotation)
        bundle.n_done += 1
        if bundle.n_done >= bundle.size:
            bundle.finished_at = now
            session.flush()
            auto_review(session, study, bundle.participant_id)
        session.flush()
        return annotation

    return _retrying(work, session)


def wait_for_work(session: Session, study: Study, bundle_id: int) -> int | None:
    """After next_item found no item for an unfinished bundle: is the pool only momentarily
    empty? Returns the seconds until the first lease of someone else's on an item this worker
    could take runs out (that item may come back), 0 when such leases had already run out (they
    are given back here, not at the sweeper's next round: ask again now), 1 when a free item
    was only locked by another transaction, or None when no item can come back: the study has
    no more work for this worker."""

    def work() -> int | None:
        bundle = session.execute(
            select(Bundle).where(Bundle.id == bundle_id).execution_options(populate_existing=True)
        ).scalar_one()
        if bundle.finished_at is not None or bundle.n_done >= bundle.size:
            return None
        now = utcnow()
        held = (
            select(Assignment)
            .join(Item, Item.id == Assignment.item_id)
            .where(
                Assignment.study_id == study.id,
                Assignment.state == "leased",
                Assignment.is_gold.is_(False),
                Item.study_id == study.id,
                *_open_to(study, bundle.worker_id, again=True),
            )
        )
        first = session.scalar(held.with_only_columns(func.min(Assignment.lease_expires_at)))
        if first is None:
            # No lease to wait for, but maybe an item _pick skipped as row-locked: adaptive
            # allocation's job writing priorities, another lease being taken. Such locks last
            # a transaction: wait a second rather than end a task that has work left.
            free = select(Item.id).where(
                Item.study_id == study.id,
                Item.is_gold.is_(False),
                Item.for_people.is_(True),
                Item.n_active < study.annotations_per_item,
                *_open_to(study, bundle.worker_id, again=True),
            )
            return 1 if session.scalar(free.limit(1)) is not None else None
        if first > now:
            return max(1, int((first - now).total_seconds() + 0.999))
        # In item order, as the sweeper and a rejection give capacity back (no cycle with them).
        for a in session.scalars(
            held.where(Assignment.lease_expires_at <= now).order_by(Assignment.item_id, Assignment.id).limit(100)
        ).all():
            _release(session, a, "expired")
        return 0

    return _retrying(work, session)


def held_lease(session: Session, bundle_id: int) -> Assignment | None:
    """The bundle's live lease, if any, leasing nothing (a paused study's item in hand)."""
    return session.scalar(
        select(Assignment).where(
            Assignment.bundle_id == bundle_id, Assignment.state == "leased", Assignment.lease_expires_at > utcnow()
        )
    )


def lease_or_wait(session: Session, study: Study, bundle_id: int) -> tuple[Assignment | None, int | None]:
    """next_item, telling "wait" from "done": (the lease, None); (None, seconds) when the pool
    is only momentarily empty for this worker; (None, None) when the bundle is finished or the
    study has no more work for them (the caller then ends the bundle)."""
    for _ in range(3):
        current = next_item(session, study, bundle_id)
        if current is not None:
            return current, None
        wait = wait_for_work(session, study, bundle_id)
        if wait != 0:
            return None, wait
    return None, 1  # items came back but others were quicker: ask again soon


def consent(session: Session, study: Study, bundle_id: int, version: str, browser: str | None = None) -> Bundle:
    """Record the worker's consent to the consent text of `version`, the one they were shown;
    refused (409) when the researcher changed the text since: nobody agrees to a text they never
    saw. Consent already given stands. Consent binds the bundle to `browser` (the hash of the
    consenting browser's secret; in-process callers may leave it out), under the caps (`_admit`:
    not when another of their bundles is bound to another browser, nor past the bundles per
    worker or those open at once from the bundle's address; checked here, as entry holds
    nothing)."""
    from app.studies.consent import consent_version

    def work() -> Bundle:
        bundle = _lock_bundle(session, bundle_id)
        if bundle.consented_at is None:
            shown = str(version or "").encode()
            if not hmac.compare_digest(shown, consent_version(study).encode()):
                raise NotAvailable("The consent text changed since it was shown to you: read it again.", status=409)
            _lock_participant(session, bundle)  # bundle -> participant, as everywhere
            _admit(session, study, bundle.worker_id, browser, bundle.ip_hash, bundle.id)
            bundle.consented_at = utcnow()
            bundle.consent_version = consent_version(study)
            bundle.browser_hash = browser
        elif browser is not None:
            _check_browser(study, bundle, browser)
        return bundle

    return _retrying(work, session)


def finish_early(session: Session, bundle_id: int) -> None:
    """No work is left for this worker: close the bundle with what they did."""

    def work() -> None:
        bundle = _lock_bundle(session, bundle_id)
        if bundle.finished_at is None:
            bundle.finished_at = utcnow()
            session.flush()
            study = session.get(Study, bundle.study_id)
            assert study is not None  # a bundle's study (a foreign key; its bundles go with it)
            auto_review(session, study, bundle.participant_id)

    _retrying(work, session)


def give_back(session: Session, bundle_id: int) -> bool:
    """The worker gave their task back on the platform (returned it, or its time ran out
    there): the task ends with what they did, and the item they held goes back to the pool at
    once, not when its lease runs out. Its lease ends `returned`, so a late answer to it is
    refused (an `expired` one may still be taken). False when the task had ended already."""

    def work() -> bool:
        bundle = _lock_bundle(session, bundle_id)
        if bundle.finished_at is not None:
            return False
        bundle.finished_at = utcnow()
        held = session.scalars(
            select(Assignment).where(Assignment.bundle_id == bundle.id, Assignment.state == "leased")
        ).all()
        for a in held:
            _release(session, a, "returned")
        return True

    return _retrying(work, session)


def sweep_expired(session: Session, limit: int = 500) -> int:
    """Return items whose leases ran out to the pool (next_item also does this lazily)."""

    def work() -> int:
        rows = session.scalars(
            select(Assignment)
            .where(Assignment.state == "leased", Assignment.lease_expires_at < utcnow())
            .order_by(Assignment.id)
            .limit(limit)
            .with_for_update(skip_locked=True)
        ).all()
        # Their items' capacity in item order, as a rejection gives it back: in lease order
        # the two could each hold an item the other waits for.
        rows = sorted(rows, key=lambda a: (a.item_id, a.id))
        return sum(_release(session, a, "expired") for a in rows)

    return _retrying(work, session)


def progress(session: Session, study: Study) -> dict[str, Any]:
    """Live counts for the researcher's page (SQL aggregates only)."""
    now = utcnow()
    # The study's own crowd: annotations imported from an earlier study are not its progress.
    completed = session.execute(
        select(func.count())
        .select_from(Annotation)
        .where(
            Annotation.study_id == study.id,
            Annotation.is_gold.is_(False),
            Annotation.excluded.is_(False),
            Annotation.worker_id.not_in(select(User.id).where(User.platform == IMPORTED_PLATFORM)),
        )
    ).scalar_one()
    in_flight = session.scalar(
        select(func.count())
        .select_from(Assignment)
        .where(Assignment.study_id == study.id, Assignment.state == "leased", Assignment.lease_expires_at > now)
    )
    # Items only an automatic judge scores (outside people's sample) are not people's work.
    n_items = session.execute(
        select(func.count())
        .select_from(Item)
        .where(Item.study_id == study.id, Item.is_gold.is_(False), Item.for_people.is_(True))
    ).scalar_one()
    per_worker = session.execute(
        select(User.pseudonym, Participant.status, func.count(Annotation.id))
        .join(Participant, and_(Participant.worker_id == User.id, Participant.study_id == study.id))
        .join(Annotation, and_(Annotation.worker_id == User.id, Annotation.study_id == study.id), isouter=True)
        .where(User.platform.is_distinct_from(IMPORTED_PLATFORM))
        .group_by(User.pseudonym, Participant.status)
        .order_by(func.count(Annotation.id).desc())
    ).all()
    target = n_items * study.annotations_per_item
    return {
        "items": n_items,
        "target": target,
        "completed": completed,
        "in_flight": in_flight,
        "fraction": completed / target if target else 0.0,
        "people_sample": study.people_sample,
        "workers": [{"worker": p, "status": s, "annotations": n} for p, s, n in per_worker],
    }
