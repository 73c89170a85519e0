"""Why continuations failed: admins classify the continuations people marked a failure with
the error types of the paper's appendix A.3 (Table 1). Its two sources carry over: the one
who acted (there human players; here the agent, or a person in a play study) and the
annotators who judged the episode. Disputed failures come first in the queue: those whose
markers were split, or whose outcome is not the simulator's."""

from __future__ import annotations

from collections import Counter, defaultdict

from sqlalchemy import and_, delete, select
from sqlalchemy.orm import Session

from app import audit
from app.db import utcnow
from app.errors import InputError
from app.kinds.sts.models import FailureReview
from app.kinds.sts.score import outcome
from app.studies.models import Annotation, Item, Study

# error type -> (source, what it means), in the paper's order.
ERROR_TYPES: dict[str, tuple[str, str]] = {
    "imprecise": ("solver", "got close but was clumsy or careless (the paper: dexterity issues, not paying attention)"),
    "out of time": ("solver", "was on its way but the continuation ended before the task was done"),
    "empty": ("solver", "made no attempt at the task"),
    "control issues": ("solver", "could not control the avatar"),
    "annotation mistake": ("annotators", "a success marked as a failure"),
    "rigidity": ("annotators", "annotators were stricter about the completion criteria than the instruction"),
    "ambiguity": ("annotators", "the instruction or the episode allows either reading"),
}
SOURCES = {"solver": "the agent (who acted)", "annotators": "the annotators (who judged)"}
MAX_NOTE = 2000


def queue(session: Session, study: Study) -> list[dict]:
    """The study's continuations whose outcome is a failure or a tie (reference episodes left
    out), disputed first, each with its markers, the simulator's outcome and its review."""
    valid = and_(Annotation.study_id == study.id, Annotation.excluded.is_(False), Annotation.is_gold.is_(False))
    markers: dict[int, list[tuple[str, int | None]]] = defaultdict(list)
    items: dict[int, Item] = {}
    for item, response in session.execute(
        select(Item, Annotation.response)
        .join(Annotation, Annotation.item_id == Item.id)
        .where(valid)
        .order_by(Annotation.id)
    ):
        if (response or {}).get("marker") in ("success", "failure"):
            markers[item.id].append((response["marker"], response.get("step")))
            items[item.id] = item
    reviews = {r.item_id: r for r in session.scalars(select(FailureReview).where(FailureReview.study_id == study.id))}
    rows = []
    for item_id, marks in markers.items():
        people = outcome([m for m, _ in marks])
        if people > 0.5:
            continue
        ref = items[item_id].reference or {}
        split = len({m for m, _ in marks}) > 1
        simulator = ref.get("simulator")
        review = reviews.get(item_id)
        rows.append(
            {
                "item_id": item_id,
                "external_id": items[item_id].external_id,
                "agent": str(ref.get("agent", "")),
                "scenario": str(ref.get("scenario", "")),
                "continuation": str(ref.get("continuation", "")),
                "category": items[item_id].category,
                "instruction": (items[item_id].payload or {}).get("instruction", ""),
                "markers": [{"marker": m, "step": s} for m, s in marks],
                "success_markers": sum(m == "success" for m, _ in marks),
                "failure_markers": sum(m == "failure" for m, _ in marks),
                "simulator": simulator,
                "disputed": split or simulator == "success",
                "error_type": review.error_type if review else None,
                "note": review.note if review else "",
            }
        )
    rows.sort(key=lambda r: (not r["disputed"], r["error_type"] is not None, r["item_id"]))
    return rows


def classify(session: Session, study: Study, item_id: int, error_type: str | None, note: str, admin) -> dict:
    """Set (or with no error type, clear) an item's classification; audited."""
    item = session.get(Item, item_id)
    if item is None or item.study_id != study.id or item.is_gold:
        raise LookupError(f"the study has no continuation {item_id}")
    note = (note or "").strip()
    if len(note) > MAX_NOTE:
        raise InputError(f"at most {MAX_NOTE} characters", field="note")
    review = session.scalar(select(FailureReview).where(FailureReview.item_id == item_id))
    before = review.error_type if review else None
    if not error_type:
        session.execute(delete(FailureReview).where(FailureReview.item_id == item_id))
    else:
        if error_type not in ERROR_TYPES:
            raise InputError(f"{error_type!r} is not one of: {', '.join(ERROR_TYPES)}", field="error_type")
        if review is None:
            review = FailureReview(study_id=study.id, item_id=item_id, error_type=error_type)
            session.add(review)
        review.error_type, review.note, review.reviewer_id, review.updated_at = error_type, note, admin.id, utcnow()
    audit.record(
        session,
        admin.id,
        "sts.failure_review",
        "item",
        item_id,
        study=study.id,
        before=before,
        after=error_type or None,
        note=note,
    )
    session.commit()
    return {"item_id": item_id, "error_type": error_type or None, "note": note if error_type else ""}


def summary(session: Session, study: Study) -> dict | None:
    """Counts of the classified failures per source and error type, overall and per agent
    (the paper's Table 1 for this study), or None before any is classified."""
    counts: Counter = Counter()
    per_agent: dict[str, Counter] = defaultdict(Counter)
    for error_type, reference in session.execute(
        select(FailureReview.error_type, Item.reference)
        .join(Item, Item.id == FailureReview.item_id)
        .where(FailureReview.study_id == study.id)
    ):
        counts[error_type] += 1
        per_agent[str((reference or {}).get("agent", ""))][error_type] += 1
    if not counts:
        return None
    total = sum(counts.values())
    rows = [
        {
            "source": SOURCES[ERROR_TYPES[t][0]],
            "error_type": t,
            "description": ERROR_TYPES[t][1],
            "episodes": counts[t],
            "share": counts[t] / total,
            **{f"a:{a}": c[t] for a, c in per_agent.items()},
        }
        for t in ERROR_TYPES
        if counts[t]
    ]
    return {"rows": rows, "agents": sorted(per_agent), "total": total}
