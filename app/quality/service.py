"""Review of workers: gold record, timing, flags; approve or reject with an audit trail.

Besides an admin's decisions, a task kind may approve a worker automatically from their gold
record (`TaskKind.auto_review`) when one of their tasks ends: only a worker still pending whom
no admin has reviewed, never a rejection, recorded in the audit log with no actor."""

from __future__ import annotations

import math
from collections import Counter
from statistics import median
from typing import Any

from sqlalchemy import ColumnElement, and_, case, func, select, update
from sqlalchemy.orm import Session

from app import audit
from app.auth.models import IMPORTED_PLATFORM, User
from app.db import lost_a_race, retrying, utcnow
from app.errors import Conflict, InputError, Missing
from app.kinds import all_kinds, get_kind
from app.kinds.base import GoldResult, TaskKind
from app.leaderboards.totals import lock_totals
from app.studies.models import Annotation, Assignment, Bundle, Item, Participant, Study

# A worker is flagged for a closer look below these marks.
MIN_GOLD_ACCURACY = 0.7
MIN_MEDIAN_SECONDS = 2.0
MAX_SAME_ANSWER_SHARE = 0.95
MIN_ANSWERS_FOR_SAMENESS = 5

# The risk score's weights (docs/quality.md): how far below perfect the gold record is, how
# much faster than the study's typical worker, how little the answers vary. A signal a worker
# has no data for (no gold answered, a kind without a categorical answer) drops out and the
# others' weights are scaled up, so scores compare across studies and kinds.
RISK_WEIGHTS = {"gold": 0.4, "speed": 0.3, "sameness": 0.3}


def risk_signals(
    gold_accuracy: float | None,
    median_s: float | None,
    typical_s: float | None,
    counts: dict[str, int] | None,
    study_counts: dict[str, int] | None,
) -> dict[str, float]:
    """Each quality signal as a number from 0 (nothing wrong) to 1 (as bad as it gets).

    gold: 1 - gold accuracy. speed: 1 - median / reference, where the reference is the study's
    typical pace (the median of its workers' medians, never below MIN_MEDIAN_SECONDS): half the
    typical time is 0.5, a tenth of it 0.9. sameness (straight-lining): 1 - H(worker) / H(study),
    the worker's answer entropy against the entropy of every answer given in the study, so
    a worker who gives one answer to everything scores 1 however skewed the study's answers
    are, and one who answers as varied as everyone else scores 0."""
    out: dict[str, float] = {}
    if gold_accuracy is not None:
        out["gold"] = 1.0 - gold_accuracy
    if median_s is not None:
        ref = max(typical_s or 0.0, MIN_MEDIAN_SECONDS)
        out["speed"] = min(1.0, max(0.0, 1.0 - median_s / ref))
    if counts and sum(counts.values()) >= MIN_ANSWERS_FOR_SAMENESS and study_counts:
        h_study = _entropy(study_counts)
        if h_study > 0:
            out["sameness"] = min(1.0, max(0.0, 1.0 - _entropy(counts) / h_study))
    return out


def risk_score(signals: dict[str, float]) -> float | None:
    """The signals' weighted mean (RISK_WEIGHTS over the signals present), or None for none."""
    total = sum(RISK_WEIGHTS[k] for k in signals)
    if not total:
        return None
    return sum(RISK_WEIGHTS[k] * v for k, v in signals.items()) / total


def _entropy(counts: dict[str, int]) -> float:
    n = sum(counts.values())
    return -sum(c / n * math.log(c / n) for c in counts.values() if c)


# The queue of every study shows this many rows a page.
PAGE_ROWS = 200


def _counted_workers() -> ColumnElement[bool]:
    """Imported annotators (earlier human annotations, loaded with no times) are not the
    study's crowd: they have nothing to review and would drag its typical pace to 0."""
    return User.platform.is_distinct_from(IMPORTED_PLATFORM)


def review_queue(session: Session, study: Study, status: str | None = None) -> list[dict[str, Any]]:
    """The study's workers (imported annotators left out), in queue_order."""
    return queue_rows(session, [study], status)


def review_queue_all(session: Session, status: str | None = None) -> list[dict[str, Any]]:
    """The review queue across every study with workers, in one order (queue_order); studies
    whose kind is not installed are left out (see queue_studies)."""
    return queue_rows(session, queue_studies(session, status)[0], status)


def queue_studies(session: Session, status: str | None = None) -> tuple[list[Study], list[Study]]:
    """The studies with workers (of that status) to review: those of an installed kind, and
    those whose kind is no longer installed (their workers cannot be judged: no scorer, no
    categorical answer)."""
    q = (
        select(Study)
        .where(
            select(Participant.id)
            .join(User, User.id == Participant.worker_id)
            .where(
                Participant.study_id == Study.id,
                _counted_workers(),
                *([Participant.status == status] if status else []),
            )
            .exists()
        )
        .order_by(Study.id)
    )
    installed = all_kinds()
    known: list[Study] = []
    unknown: list[Study] = []
    for study in session.scalars(q):
        (known if study.kind in installed else unknown).append(study)
    return known, unknown


def queue_rows(session: Session, studies: list[Study], status: str | None) -> list[dict[str, Any]]:
    """The queue rows of these studies, a fixed number of queries however many there are
    (each aggregate grouped by study)."""
    if not studies:
        return []
    by_id = {s.id: s for s in studies}
    kinds = {s.id: get_kind(s.kind) for s in studies}
    gold = func.sum(case((Annotation.is_gold, 1), else_=0))
    gold_right = func.sum(case((and_(Annotation.is_gold, Annotation.score >= 1.0), 1), else_=0))
    rows = session.execute(
        select(
            Participant, User.pseudonym, User.platform, User.external_id, func.count(Annotation.id), gold, gold_right
        )
        .join(User, User.id == Participant.worker_id)
        .join(
            Annotation,
            and_(Annotation.worker_id == Participant.worker_id, Annotation.study_id == Participant.study_id),
            isouter=True,
        )
        .where(
            Participant.study_id.in_(list(by_id)),
            _counted_workers(),
            *([Participant.status == status] if status else []),
        )
        .group_by(Participant.id, User.pseudonym, User.platform, User.external_id)
    ).all()
    medians, typical = _median_durations(session, list(by_id))
    answers, study_counts = _answer_counts(session, studies)
    # Kinds without a rule of their own have nothing to say: skip reading the gold record.
    with_rule = [sid for sid, k in kinds.items() if type(k).auto_review is not TaskKind.auto_review]
    gold_results = _gold_results(session, with_rule) if with_rule else {}
    out = []
    for p, pseud, platform, ext, n, n_gold, n_gold_right in rows:
        study, kind, key = by_id[p.study_id], kinds[p.study_id], (p.study_id, p.worker_id)
        n_gold = n_gold or 0
        acc = (n_gold_right or 0) / n_gold if n_gold else None
        median_s = medians.get(key)
        flags = []
        # The kind's own verdict on the gold record (navigation: the QC episode's goal) first.
        if p.study_id in with_rule:
            verdict, note = kind.auto_review(gold_results.get(key, []), study.kind_settings or {})
            if verdict is None and note:
                flags.append(note)
        if acc is not None and acc < MIN_GOLD_ACCURACY:
            flags.append(f"gold accuracy {acc:.0%}")
        if median_s is not None and median_s < MIN_MEDIAN_SECONDS and n >= 3:
            flags.append(f"fast: median {median_s:.1f}s per item")
        counts = answers.get(key)
        share = max(counts.values()) / sum(counts.values()) if counts else None
        if share is not None and share >= MAX_SAME_ANSWER_SHARE and n >= MIN_ANSWERS_FOR_SAMENESS:
            flags.append(f"same answer {share:.0%} of the time")
        signals = risk_signals(acc, median_s, typical.get(p.study_id), counts, study_counts.get(p.study_id))
        out.append(
            {
                "participant_id": p.id,
                "worker": pseud,
                "platform": platform,
                "external_id": ext,
                "status": p.status,
                "reason": p.reason,
                "annotations": n,
                "gold": n_gold,
                "gold_correct": n_gold_right or 0,
                "gold_accuracy": acc,
                "median_seconds": median_s,
                "flags": flags,
                "signals": signals,
                "risk": risk_score(signals),
                "study_id": study.id,
                "study_title": study.title,
                "auto": p.status == "approved" and p.reviewed_by is None,
            }
        )
    out.sort(key=queue_order)
    return out


def queue_order(w: dict[str, Any]) -> tuple[Any, ...]:
    """Pending workers first (they await a decision), the most likely to be bad first among
    them (risk, then flags); rejected ones last. Workers with no signal yet sort after
    those with one."""
    rank = {"pending": 0, "approved": 1}.get(w["status"], 2)
    return (rank, -(w["risk"] if w["risk"] is not None else -1.0), not w["flags"], w["study_id"], w["participant_id"])


def _gold_results(session: Session, study_ids: list[int]) -> dict[tuple[int, int], list[GoldResult]]:
    """Each worker's gold answers in these studies as the kind's review rule sees them
    (scores only), by (study id, worker id)."""
    q = (
        select(Annotation.study_id, Annotation.worker_id, Item.external_id, Annotation.score, Annotation.scores)
        .join(Item, Item.id == Annotation.item_id)
        .where(Annotation.study_id.in_(study_ids), Annotation.is_gold.is_(True))
        .order_by(Annotation.id)
    )
    out: dict[tuple[int, int], list[GoldResult]] = {}
    for sid, wid, ext, score, scores in session.execute(q):
        out.setdefault((sid, wid), []).append(GoldResult(item=ext, score=score, scores=scores))
    return out


def kind_verdict(session: Session, study: Study, participant: Participant) -> tuple[str | None, str]:
    """What the kind's rule says of this worker's gold record now (see TaskKind.auto_review)."""
    q = (
        select(Item.external_id, Annotation.score, Annotation.scores)
        .join(Item, Item.id == Annotation.item_id)
        .where(
            Annotation.study_id == study.id, Annotation.worker_id == participant.worker_id, Annotation.is_gold.is_(True)
        )
        .order_by(Annotation.id)
    )
    gold = [GoldResult(item=ext, score=score, scores=scores) for ext, score, scores in session.execute(q)]
    return get_kind(study.kind).auto_review(gold, study.kind_settings or {})


def auto_review(session: Session, study: Study, participant_id: int) -> str | None:
    """The kind's automatic verdict when one of the worker's tasks ends. Called inside the
    assignment engine's transaction (which took the participant's lock before any assignment,
    as `decide` does). Approves only a worker still pending whom no admin has reviewed; an
    approval is recorded once, with no actor. Returns the new status, or None (no change)."""
    p = session.get_one(Participant, participant_id, with_for_update=True, populate_existing=True)
    if p.status != "pending" or p.reviewed_by is not None:
        return None  # an admin's decision (or an earlier automatic one) stands
    verdict, reason = kind_verdict(session, study, p)
    if verdict != "approved":
        return None  # never an automatic rejection: the review queue shows the flag
    p.status, p.reason, p.reviewed_at = "approved", reason, utcnow()
    audit.record(session, None, "worker.approved", "participant", p.id, study=study.id, reason=reason, auto=True)
    return p.status


def _median_durations(session: Session, study_ids: list[int]) -> tuple[dict[tuple[int, int], float], dict[int, float]]:
    """Median seconds per item for each worker, by (study id, worker id), and each study's
    typical pace: the median of its workers' medians. In SQL (window functions on both
    backends). Imported annotators are left out of both; a rejected worker's excluded answers
    give their own median (their row still shows it) but not the study's pace."""
    ranked = (
        select(
            Annotation.study_id,
            Annotation.worker_id,
            Annotation.excluded,
            Annotation.duration_ms,
            func.row_number()
            .over(
                partition_by=(Annotation.study_id, Annotation.worker_id, Annotation.excluded),
                order_by=Annotation.duration_ms,
            )
            .label("rn"),
            func.count()
            .over(partition_by=(Annotation.study_id, Annotation.worker_id, Annotation.excluded))
            .label("cnt"),
        )
        .join(User, User.id == Annotation.worker_id)
        .where(Annotation.study_id.in_(study_ids), _counted_workers())
        .subquery()
    )
    middle = ranked.c.rn.in_([(ranked.c.cnt + 1) // 2, (ranked.c.cnt + 2) // 2])
    rows = session.execute(
        select(ranked.c.study_id, ranked.c.worker_id, ranked.c.excluded, func.avg(ranked.c.duration_ms))
        .where(middle)
        .group_by(ranked.c.study_id, ranked.c.worker_id, ranked.c.excluded)
    )
    own: dict[tuple[int, int], float] = {}
    counted: dict[int, list[float]] = {}
    for sid, wid, excluded, ms in rows:
        seconds = float(ms) / 1000.0
        if not excluded:
            counted.setdefault(sid, []).append(seconds)
            own[(sid, wid)] = seconds  # what counts wins over what was excluded
        else:
            own.setdefault((sid, wid), seconds)
    return own, {sid: median(m) for sid, m in counted.items()}


# An item answered in under this share of its study's typical pace is implausibly fast (the
# speeder cut crowd and survey studies use is a fraction of the median time, 30% to 50%).
FAST_SHARE_OF_TYPICAL = 0.3


def worker_speeds(session: Session, worker_ids: list[int]) -> dict[int, dict[str, Any]]:
    """Each worker's speed across every study of this instance: `items` timed, `median_s` (the
    median seconds per item over all of them, pooled), and `fast`, how many were answered in
    under FAST_SHARE_OF_TYPICAL of their study's typical pace (_median_durations' median of its
    workers' medians). A worker with no item is left out. In SQL, as _median_durations."""
    if not worker_ids:
        return {}
    study_ids = list(
        session.scalars(select(Annotation.study_id).where(Annotation.worker_id.in_(worker_ids)).distinct())
    )
    if not study_ids:
        return {}
    _, typical = _median_durations(session, study_ids)
    ranked = (
        select(
            Annotation.worker_id,
            Annotation.duration_ms,
            func.row_number().over(partition_by=Annotation.worker_id, order_by=Annotation.duration_ms).label("rn"),
            func.count().over(partition_by=Annotation.worker_id).label("cnt"),
        )
        .where(Annotation.worker_id.in_(worker_ids))
        .subquery()
    )
    middle = ranked.c.rn.in_([(ranked.c.cnt + 1) // 2, (ranked.c.cnt + 2) // 2])
    out: dict[int, dict[str, Any]] = {
        wid: {"items": int(n), "median_s": float(ms) / 1000.0, "fast": 0}
        for wid, n, ms in session.execute(
            select(ranked.c.worker_id, func.max(ranked.c.cnt), func.avg(ranked.c.duration_ms))
            .where(middle)
            .group_by(ranked.c.worker_id)
        )
    }
    # Each study's cut in ms; a study with no counted worker has no pace and no cut.
    cut = {sid: FAST_SHARE_OF_TYPICAL * pace * 1000.0 for sid, pace in typical.items()}
    if cut:
        below = case((Annotation.duration_ms < case(cut, value=Annotation.study_id, else_=None), 1), else_=0)
        for wid, fast in session.execute(
            select(Annotation.worker_id, func.sum(below))
            .where(Annotation.worker_id.in_(worker_ids))
            .group_by(Annotation.worker_id)
        ):
            if wid in out:
                out[wid]["fast"] = int(fast or 0)
    return out


def _answer_counts(
    session: Session, studies: list[Study]
) -> tuple[dict[tuple[int, int], dict[str, int]], dict[int, dict[str, int]]]:
    """How often each worker gave each value of the kind's categorical answer, by (study id,
    worker id), and each study's counts over the answers that count (no imported annotator,
    no excluded answer). In SQL, one query per categorical field."""
    by_field: dict[str, list[int]] = {}
    for study in studies:
        field = get_kind(study.kind).straightline_value()
        if field is not None:
            by_field.setdefault(field, []).append(study.id)
    own: dict[tuple[int, int], dict[str, int]] = {}
    spread: dict[int, dict[str, int]] = {}
    for field, ids in by_field.items():
        value = Annotation.response[field].as_string()
        for sid, wid, excluded, v, n in session.execute(
            select(Annotation.study_id, Annotation.worker_id, Annotation.excluded, value, func.count())
            .join(User, User.id == Annotation.worker_id)
            .where(Annotation.study_id.in_(ids), _counted_workers())
            .group_by(Annotation.study_id, Annotation.worker_id, Annotation.excluded, value)
        ):
            if v is None:  # e.g. an STS play item has no marker
                continue
            mine = own.setdefault((sid, wid), {})
            mine[str(v)] = mine.get(str(v), 0) + n
            if not excluded:
                counts = spread.setdefault(sid, {})
                counts[str(v)] = counts.get(str(v), 0) + n
    return own, spread


def gold_replay(session: Session, study: Study, participant_id: int, gold: bool = True) -> list[dict[str, Any]]:
    """A worker's answers on gold items (gold=False: on the other items) beside the right
    answers, in the order given."""
    p = session.get(Participant, participant_id)
    if p is None or p.study_id != study.id:
        raise InputError("no such participant in this study", field="participant_id")
    rows = session.execute(
        select(Annotation, Item, Assignment.slot)
        .join(Item, Item.id == Annotation.item_id)
        .join(Assignment, Assignment.id == Annotation.assignment_id)
        .where(Annotation.study_id == study.id, Annotation.worker_id == p.worker_id, Annotation.is_gold.is_(gold))
        .order_by(Annotation.id)
    ).all()
    return [
        {
            "annotation_id": a.id,
            "item": it.external_id,
            "payload": it.payload,
            "reference": it.reference,
            "response": a.response,
            "score": a.score,
            "scores": a.scores,
            "correct": (a.score or 0) >= 1.0,
            "gold": a.is_gold,
            "seconds": a.duration_ms / 1000.0,
            "slot": slot,
            "at": a.created_at,
        }
        for a, it, slot in rows
    ]


def decide(
    session: Session, study: Study, participant_ids: list[int], decision: str, actor: User, reason: str = ""
) -> int:
    """Approve or reject participants. A rejection drops their annotations from every
    aggregate and hands their items' capacity back to the pool; it cannot be undone."""
    if decision not in ("approved", "rejected"):
        raise InputError("decision must be approve or reject", field="decision")
    if decision == "rejected" and not reason.strip():
        raise InputError("a rejection needs a reason (the worker is told it)", field="reason")
    # Its locks follow the crowd's order (_decide), but a writer outside that order can still
    # meet it; PostgreSQL then aborts one of the two: the whole decision is tried again, and
    # after the last try the app answers 503, try again.
    return retrying(
        lambda: _decide(session, study, participant_ids, decision, actor, reason),
        session,
        attempts=DECIDE_ATTEMPTS,
        retry_if=lost_a_race,
        pause=0.05,
    )


# How often a decision aborted by a deadlock (or a serialisation failure) is tried in all.
DECIDE_ATTEMPTS = 3


def _decide(session: Session, study: Study, participant_ids: list[int], decision: str, actor: User, reason: str) -> int:
    if decision == "rejected":
        # The workers' bundles first, in id order: every request of theirs that leases or
        # answers locks its bundle before anything else (bundle -> participant -> assignment
        # -> item -> totals), so none of theirs is under way while their work is dropped, and
        # none starts before the rejection commits. Without it, an answer to a lease made
        # after the look-up below was stored, counted and never excluded.
        session.execute(
            select(Bundle.id)
            .where(Bundle.study_id == study.id, Bundle.participant_id.in_(set(participant_ids)))
            .order_by(Bundle.id)
            .with_for_update()
        )
    # The participants, locked in id order in one statement; the first bad id as the admin
    # gave it is the one named.
    locked = {
        p.id: p
        for p in session.scalars(
            select(Participant)
            .where(Participant.study_id == study.id, Participant.id.in_(set(participant_ids)))
            .order_by(Participant.id)
            .with_for_update()
        )
    }
    for pid in participant_ids:
        p = locked.get(pid)
        if p is None:
            raise Missing(f"no participant {pid} in this study", field="participant_id")
        if p.status == "rejected" != decision:
            raise Conflict(f"participant {pid} was rejected; a rejection is final", field="participant_id")
    changed = 0
    rejected: list[int] = []
    for p in sorted(locked.values(), key=lambda p: p.id):
        if p.status == decision:
            continue
        if decision == "rejected":
            rejected.append(p.worker_id)
        p.status, p.reason, p.reviewed_by, p.reviewed_at = decision, reason, actor.id, utcnow()
        audit.record(session, actor.id, f"worker.{decision}", "participant", p.id, study=study.id, reason=reason)
        changed += 1
    if rejected:
        _drop_work(session, study, rejected)
    return changed


def _drop_work(session: Session, study: Study, worker_ids: list[int]) -> None:
    """The rejected workers' work, all in one pass: each kind of lock is taken once, in
    order, so that two rejections (or a rejection and an import) sharing items wait for each
    other instead of deadlocking. Their bundles are locked (_decide): the look-ups below see
    all of their work, and none is added before the commit."""
    # Assignments before items: the same lock order as submit and the lease sweeper. The
    # capacity given back is what this statement moved: a lease the sweeper (or another
    # worker's wait) expires meanwhile has given its own back, and is skipped here.
    moved = session.execute(
        update(Assignment)
        .where(
            Assignment.study_id == study.id,
            Assignment.worker_id.in_(worker_ids),
            Assignment.state.in_(("completed", "leased")),
        )
        .values(state="rejected")
        .returning(Assignment.item_id, Assignment.is_gold)
    ).all()
    item_ids = [item_id for item_id, is_gold in moved if not is_gold]
    for item_id, n in sorted(Counter(item_ids).items()):
        session.execute(update(Item).where(Item.id == item_id).values(n_active=Item.n_active - n))
    # Then the totals' locks of every item and worker the exclusion changes, in their order,
    # before the one statement that excludes the answers (its rows come in any order).
    answered = session.scalars(
        select(Annotation.item_id)
        .distinct()
        .where(
            Annotation.study_id == study.id,
            Annotation.worker_id.in_(worker_ids),
            Annotation.is_gold.is_(False),
            Annotation.excluded.is_(False),
        )
    ).all()
    lock_totals(session.connection(), study.id, items=answered, workers=worker_ids)
    session.execute(
        update(Annotation)
        .where(Annotation.study_id == study.id, Annotation.worker_id.in_(worker_ids))
        .values(excluded=True)
    )


def past_gold_accuracy(session: Session, kind: str, owner_id: int | None) -> dict[str, Any] | None:
    """The share of gold answers fully right (score 1) in the past studies of `kind` (the
    owner's; every one's with None), rejected workers' and imported annotators' left out: the
    annotators' accuracy a study plan starts from when the researcher enters none (issue 29.1).
    {accuracy, right, gold_answers, studies}, or None when no gold answer has a score."""
    rows = session.execute(
        select(
            func.count(Annotation.id),
            func.sum(case((Annotation.score >= 1.0, 1), else_=0)),
            func.count(func.distinct(Annotation.study_id)),
        )
        .join(Study, Study.id == Annotation.study_id)
        .join(
            Participant,
            and_(Participant.study_id == Annotation.study_id, Participant.worker_id == Annotation.worker_id),
        )
        .join(User, User.id == Annotation.worker_id)
        .where(
            Study.kind == kind,
            *([Study.owner_id == owner_id] if owner_id is not None else []),
            Annotation.is_gold.is_(True),
            Annotation.score.is_not(None),
            Participant.status != "rejected",
            _counted_workers(),
        )
    ).one()
    n, right, studies = int(rows[0] or 0), int(rows[1] or 0), int(rows[2] or 0)
    if n == 0:
        return None
    return {"accuracy": right / n, "right": right, "gold_answers": n, "studies": studies}
