"""Review of workers: gold record, timing, flags; approve or reject with an audit trail.

Besides an admin's decisions, a task kind may approve a worker automatically from their gold
record (`TaskKind.auto_review`) when one of their tasks ends: only a worker still pending whom
no admin has reviewed, never a rejection, recorded in the audit log with no actor."""

from __future__ import annotations

import math
from statistics import median

from sqlalchemy import and_, case, func, select, update
from sqlalchemy.orm import Session

from app import audit
from app.auth.models import User
from app.db import serialised_writes, utcnow
from app.errors import InputError
from app.kinds import get_kind
from app.kinds.base import GoldResult, TaskKind
from app.studies.models import Annotation, Assignment, Item, Participant, Study

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


def risk_signals(gold_accuracy: float | None, median_s: float | None, typical_s: float | None,
                 counts: dict[str, int] | None, study_counts: dict[str, int] | None) -> dict[str, float]:
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


def review_queue(session: Session, study: Study, status: str | None = None) -> list[dict]:
    gold = func.sum(case((Annotation.is_gold, 1), else_=0))
    gold_right = func.sum(case((and_(Annotation.is_gold, Annotation.score >= 1.0), 1), else_=0))
    rows = session.execute(
        select(Participant, User.pseudonym, User.platform, User.external_id,
               func.count(Annotation.id), gold, gold_right,
               func.avg(Annotation.duration_ms))
        .join(User, User.id == Participant.worker_id)
        .join(Annotation, and_(Annotation.worker_id == Participant.worker_id,
                               Annotation.study_id == study.id), isouter=True)
        .where(Participant.study_id == study.id,
               *( [Participant.status == status] if status else []))
        .group_by(Participant.id, User.pseudonym, User.platform, User.external_id)
        .order_by(Participant.id)
    ).all()
    medians = _median_durations(session, study)
    typical = median(medians.values()) if medians else None
    answers = _answer_counts(session, study)
    study_counts: dict[str, int] = {}
    for c in answers.values():
        for v, k in c.items():
            study_counts[v] = study_counts.get(v, 0) + k
    kind = get_kind(study.kind)
    # Kinds without a rule of their own have nothing to say: skip reading the gold record.
    has_rule = type(kind).auto_review is not TaskKind.auto_review
    gold_results = _gold_results(session, study) if has_rule else {}
    out = []
    for p, pseud, platform, ext, n, n_gold, n_gold_right, _avg in rows:
        n_gold = n_gold or 0
        acc = (n_gold_right or 0) / n_gold if n_gold else None
        median_s = medians.get(p.worker_id)
        flags = []
        # The kind's own verdict on the gold record (navigation: the QC episode's goal) first.
        verdict, note = kind.auto_review(gold_results.get(p.worker_id, []), study.kind_settings or {})
        if verdict is None and note:
            flags.append(note)
        if acc is not None and acc < MIN_GOLD_ACCURACY:
            flags.append(f"gold accuracy {acc:.0%}")
        if median_s is not None and median_s < MIN_MEDIAN_SECONDS and n >= 3:
            flags.append(f"fast: median {median_s:.1f}s per item")
        counts = answers.get(p.worker_id)
        share = max(counts.values()) / sum(counts.values()) if counts else None
        if share is not None and share >= MAX_SAME_ANSWER_SHARE and n >= MIN_ANSWERS_FOR_SAMENESS:
            flags.append(f"same answer {share:.0%} of the time")
        signals = risk_signals(acc, median_s, typical, counts, study_counts)
        out.append({"participant_id": p.id, "worker": pseud, "platform": platform,
                    "external_id": ext, "status": p.status, "reason": p.reason,
                    "annotations": n, "gold": n_gold, "gold_correct": n_gold_right or 0,
                    "gold_accuracy": acc, "median_seconds": median_s, "flags": flags,
                    "signals": signals, "risk": risk_score(signals),
                    "study_id": study.id, "study_title": study.title,
                    "auto": p.status == "approved" and p.reviewed_by is None})
    out.sort(key=queue_order)
    return out


def queue_order(w: dict) -> tuple:
    """Pending workers first (they await a decision), the most likely to be bad first among
    them (risk, then flags); rejected ones last. Workers with no signal yet sort after
    those with one."""
    rank = {"pending": 0, "approved": 1}.get(w["status"], 2)
    return (rank, -(w["risk"] if w["risk"] is not None else -1.0), not w["flags"],
            w["study_id"], w["participant_id"])


def review_queue_all(session: Session, status: str | None = None) -> list[dict]:
    """The review queue across every study with workers, in one order (queue_order)."""
    q = select(Study).where(select(Participant.id).where(Participant.study_id == Study.id,
                                                         *([Participant.status == status] if status else []))
                            .exists()).order_by(Study.id)
    out = [w for study in session.scalars(q).all() for w in review_queue(session, study, status)]
    out.sort(key=queue_order)
    return out


def _gold_results(session: Session, study: Study, worker_id: int | None = None
                  ) -> dict[int, list[GoldResult]]:
    """Each worker's gold answers as the kind's review rule sees them (scores only)."""
    q = (select(Annotation.worker_id, Item.external_id, Annotation.score, Annotation.scores)
         .join(Item, Item.id == Annotation.item_id)
         .where(Annotation.study_id == study.id, Annotation.is_gold.is_(True))
         .order_by(Annotation.id))
    if worker_id is not None:
        q = q.where(Annotation.worker_id == worker_id)
    out: dict[int, list[GoldResult]] = {}
    for wid, ext, score, scores in session.execute(q):
        out.setdefault(wid, []).append(GoldResult(item=ext, score=score, scores=scores))
    return out


def kind_verdict(session: Session, study: Study, participant: Participant) -> tuple[str | None, str]:
    """What the kind's rule says of this worker's gold record now (see TaskKind.auto_review)."""
    return get_kind(study.kind).auto_review(
        _gold_results(session, study, participant.worker_id).get(participant.worker_id, []),
        study.kind_settings or {})


def auto_review(session: Session, study: Study, participant_id: int) -> str | None:
    """The kind's automatic verdict when one of the worker's tasks ends. Called inside the
    assignment engine's transaction (which took the participant's lock before any assignment,
    as `decide` does). Approves only a worker still pending whom no admin has reviewed; an
    approval is recorded once, with no actor. Returns the new status, or None (no change)."""
    p = session.execute(select(Participant).where(Participant.id == participant_id).with_for_update()
                        .execution_options(populate_existing=True)).scalar_one()
    if p.status != "pending" or p.reviewed_by is not None:
        return None  # an admin's decision (or an earlier automatic one) stands
    verdict, reason = kind_verdict(session, study, p)
    if verdict != "approved":
        return None  # never an automatic rejection: the review queue shows the flag
    p.status, p.reason, p.reviewed_at = "approved", reason, utcnow()
    audit.record(session, None, "worker.approved", "participant", p.id, study=study.id,
                 reason=reason, auto=True)
    return p.status


def _median_durations(session: Session, study: Study) -> dict[int, float]:
    """Median seconds per item for each worker, in SQL (window functions on both backends)."""
    ranked = select(
        Annotation.worker_id, Annotation.duration_ms,
        func.row_number().over(partition_by=Annotation.worker_id,
                               order_by=Annotation.duration_ms).label("rn"),
        func.count().over(partition_by=Annotation.worker_id).label("cnt"),
    ).where(Annotation.study_id == study.id).subquery()
    middle = ranked.c.rn.in_([(ranked.c.cnt + 1) // 2, (ranked.c.cnt + 2) // 2])
    rows = session.execute(select(ranked.c.worker_id, func.avg(ranked.c.duration_ms))
                           .where(middle).group_by(ranked.c.worker_id))
    return {wid: float(ms) / 1000.0 for wid, ms in rows}


def _answer_counts(session: Session, study: Study) -> dict[int, dict[str, int]]:
    """How often each worker gave each value of the kind's categorical answer (in SQL)."""
    field = get_kind(study.kind).straightline_value()
    if field is None:
        return {}
    value = Annotation.response[field].as_string()
    counts: dict[int, dict[str, int]] = {}
    for wid, v, n in session.execute(
            select(Annotation.worker_id, value, func.count())
            .where(Annotation.study_id == study.id).group_by(Annotation.worker_id, value)):
        if v is not None:  # e.g. an STS play item has no marker
            counts.setdefault(wid, {})[str(v)] = n
    return counts


def gold_replay(session: Session, study: Study, participant_id: int, gold: bool = True) -> list[dict]:
    """A worker's answers on gold items (gold=False: on the other items) beside the right
    answers, in the order given."""
    p = session.get(Participant, participant_id)
    if p is None or p.study_id != study.id:
        raise InputError("no such participant in this study", field="participant_id")
    rows = session.execute(
        select(Annotation, Item, Assignment.slot)
        .join(Item, Item.id == Annotation.item_id)
        .join(Assignment, Assignment.id == Annotation.assignment_id)
        .where(Annotation.study_id == study.id, Annotation.worker_id == p.worker_id,
               Annotation.is_gold.is_(gold))
        .order_by(Annotation.id)).all()
    return [{"annotation_id": a.id, "item": it.external_id, "payload": it.payload,
             "reference": it.reference, "response": a.response, "score": a.score,
             "scores": a.scores, "correct": (a.score or 0) >= 1.0, "gold": a.is_gold,
             "seconds": a.duration_ms / 1000.0, "slot": slot, "at": a.created_at}
            for a, it, slot in rows]


def decide(session: Session, study: Study, participant_ids: list[int], decision: str,
           actor: User, reason: str = "") -> int:
    """Approve or reject participants. A rejection drops their annotations from every
    aggregate and hands their items' capacity back to the pool; it cannot be undone."""
    if decision not in ("approved", "rejected"):
        raise InputError("decision must be approve or reject", field="decision")
    if decision == "rejected" and not reason.strip():
        raise InputError("a rejection needs a reason (the worker is told it)", field="reason")
    with serialised_writes(session):
        try:
            changed = _decide(session, study, participant_ids, decision, actor, reason)
            session.commit()
        except BaseException:
            session.rollback()
            raise
    return changed


def _decide(session, study, participant_ids, decision, actor, reason) -> int:
    changed = 0
    for pid in participant_ids:
        p = session.execute(select(Participant).where(Participant.id == pid).with_for_update()
                            ).scalar_one_or_none()
        if p is None or p.study_id != study.id:
            raise InputError(f"no participant {pid} in this study", field="participant_id")
        if p.status == decision:
            continue
        if p.status == "rejected":
            raise InputError(f"participant {pid} was rejected; a rejection is final",
                             field="participant_id")
        if decision == "rejected":
            _drop_work(session, study, p.worker_id)
        p.status, p.reason, p.reviewed_by, p.reviewed_at = decision, reason, actor.id, utcnow()
        audit.record(session, actor.id, f"worker.{decision}",
                     "participant", p.id, study=study.id, reason=reason)
        changed += 1
    return changed


def _drop_work(session: Session, study: Study, worker_id: int) -> None:
    item_ids = session.scalars(select(Assignment.item_id).where(
        Assignment.study_id == study.id, Assignment.worker_id == worker_id,
        Assignment.state.in_(("completed", "leased")), Assignment.is_gold.is_(False))
        .order_by(Assignment.item_id)).all()
    # Assignments before items: the same lock order as submit and the lease sweeper.
    session.execute(update(Assignment).where(
        Assignment.study_id == study.id, Assignment.worker_id == worker_id,
        Assignment.state.in_(("completed", "leased"))).values(state="rejected"))
    for item_id in item_ids:
        session.execute(update(Item).where(Item.id == item_id).values(n_active=Item.n_active - 1))
    session.execute(update(Annotation).where(Annotation.study_id == study.id,
                                             Annotation.worker_id == worker_id)
                    .values(excluded=True))


