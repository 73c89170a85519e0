"""Consolidation (Lachmy et al. 2022, section 4): steps where an executor's board differs from
the instructor's go to an admin, who classifies the error, may fix the gold board, and may
label the step's abstraction level. Works over any Hexagons execution study: the item's
reference["boards"] are the instructor's boards, each valid annotation one verifier's
execution (verifier 1 and 2 are the first two by annotation id).

A step is queued when some valid executor's board after it differs from the instructor's;
with two executors that is a tag other than A (metrics.agreement_tag). Disputed steps (VV:
both verifiers agree with each other, not with the instructor) come first, decided ones last.
Steps are numbered from 1, as the release numbers drawing steps.

Fixing the gold board replaces reference["boards"][k] (the instructor's own boards are kept
in reference["instructor_boards"], so the queue still shows the disagreement and clearing
the decision restores them) and re-scores every annotation and agent output on the item the
way submission scores them, so the leaderboard moves."""

from __future__ import annotations

from collections import defaultdict

from pydantic import ValidationError
from sqlalchemy import and_, delete, select
from sqlalchemy.orm import Session

from app import audit
from app.agents.models import AgentOutput
from app.auth.models import User
from app.db import utcnow
from app.errors import InputError
from app.kinds.hexagons import abstraction, metrics
from app.kinds.hexagons.board import COLOURS, TILES
from app.kinds.hexagons.models import Consolidation
from app.leaderboards.totals import lock_totals
from app.studies.models import Annotation, Item, Study

# error class -> what it means (the paper's types of instructor errors, section 4).
ERROR_CLASSES: dict[str, str] = {
    "over-execution": "the instructor painted more than the instruction asks",
    "under-execution": "the instructor painted less than the instruction asks",
    "miscounting": "the instructor miscounted positions on the board",
    "propagated error": "an error from an earlier step carried into this one",
    "wrong colour": "the right tiles in the wrong colour",
    "other": "another error (say which in the note)",
}
MAX_NOTE = 2000


class NotFound(LookupError):
    pass


def _instructor(ref: dict) -> list[list[int]]:
    return ref.get("instructor_boards") or ref["boards"]


def _executions(session: Session, study: Study, item_ids=None) -> dict[int, list[dict]]:
    """item id -> the valid executions on it, oldest first: {"annotation_id", "who", "response"}."""
    q = (
        select(Annotation.id, Annotation.item_id, Annotation.response, User.pseudonym)
        .join(User, User.id == Annotation.worker_id)
        .where(and_(Annotation.study_id == study.id, Annotation.excluded.is_(False), Annotation.is_gold.is_(False)))
        .order_by(Annotation.id)
    )
    if item_ids is not None:
        q = q.where(Annotation.item_id.in_(item_ids))
    out: dict[int, list[dict]] = defaultdict(list)
    for aid, item_id, response, who in session.execute(q):
        out[item_id].append({"annotation_id": aid, "who": who or str(aid), "response": response or {}})
    return out


def _board_after(execution: dict, k: int) -> list[int] | None:
    steps = execution["response"].get("steps") or []
    return steps[k]["board"] if k < len(steps) else None


def step_tag(instructor: list[int], boards: list[list[int] | None]) -> str | None:
    """The agreement tag with the first two executors (None with fewer)."""
    if len(boards) < 2 or boards[0] is None or boards[1] is None:
        return None
    return metrics.agreement_tag(instructor, boards[0], boards[1])


def queue(session: Session, study: Study) -> list[dict]:
    """The steps some executor disagreed on, or that an admin decided: disputed (VV) first,
    then the other undecided ones, decided ones last; each with its tag and decision."""
    decisions = {
        (c.item_id, c.step): c for c in session.scalars(select(Consolidation).where(Consolidation.study_id == study.id))
    }
    executions = _executions(session, study)
    wanted = set(executions) | {i for i, _ in decisions}
    rows = []
    for item in session.scalars(
        select(Item).where(Item.study_id == study.id, Item.is_gold.is_(False), Item.id.in_(wanted))
    ):
        ref = item.reference or {}
        if not ref.get("boards"):
            continue
        instructor = _instructor(ref)
        labels = ref.get("abstraction") or []
        for k, gold in enumerate(instructor):
            boards = [_board_after(e, k) for e in executions.get(item.id, [])]
            differ = sum(1 for b in boards if b is not None and b != gold)
            decision = decisions.get((item.id, k + 1))
            if not differ and decision is None:
                continue
            tag = step_tag(gold, boards)
            rows.append(
                {
                    "item_id": item.id,
                    "external_id": item.external_id,
                    "step": k + 1,
                    "category": item.category,
                    "instruction": item.payload["instructions"][k],
                    "executors": len([b for b in boards if b is not None]),
                    "differ": differ,
                    "tag": tag,
                    "disputed": tag == "VV",
                    "error_class": decision.error_class if decision else None,
                    "fixed": bool(decision and decision.fixed_board is not None),
                    "level": labels[k].get("level") if k < len(labels) else None,
                }
            )
    rows.sort(key=lambda r: (r["error_class"] is not None, not r["disputed"], r["item_id"], r["step"]))
    return rows


def _item(session: Session, study: Study, item_id: int, step: int, lock: bool = False) -> Item:
    q = select(Item).where(Item.id == item_id)
    if lock:
        # NO KEY UPDATE (the reference changes, never the key): it does not wait on the KEY SHARE
        # locks of rows being written that refer to the item (the totals' rebuild), which wait
        # on the totals' locks this re-score takes next: no cycle.
        q = q.with_for_update(key_share=True).execution_options(populate_existing=True)
    item = session.scalar(q)
    if item is None or item.study_id != study.id or not (item.reference or {}).get("boards"):
        raise NotFound(f"the study has no procedure {item_id}")
    if not 1 <= step <= len(item.reference["boards"]):
        raise NotFound(f"procedure {item.external_id} has steps 1 to {len(item.reference['boards'])}")
    return item


def _diff(a: list[int] | None, b: list[int] | None) -> list[int]:
    if a is None or b is None:
        return []
    return [t for t in range(TILES) if a[t] != b[t]]


def step_view(session: Session, study: Study, item_id: int, step: int) -> dict:
    """One step for the admin: the instruction; the instructor's and each executor's board
    before and after it, with the tiles that differ from the instructor's; the gold board now,
    the decision, the reference's abstraction label and the executors' labels."""
    item = _item(session, study, item_id, step)
    ref = item.reference
    k = step - 1
    instructor = _instructor(ref)
    initial = ref["initial"]
    executions = _executions(session, study, [item.id]).get(item.id, [])
    boards = []
    for n, e in enumerate(executions):
        after = _board_after(e, k)
        steps = e["response"].get("steps") or []
        before = (steps[k].get("previous") if k < len(steps) else None) or (
            initial if k == 0 else _board_after(e, k - 1)
        )
        labels = e["response"].get("labels") or []
        boards.append(
            {
                "who": f"verifier {n + 1}",
                "pseudonym": e["who"],
                "annotation_id": e["annotation_id"],
                "before": before,
                "after": after,
                "differs": _diff(instructor[k], after),
                "label": labels[k] if k < len(labels) else None,
            }
        )
    decision = session.scalar(select(Consolidation).where(Consolidation.item_id == item.id, Consolidation.step == step))
    refs = ref.get("abstraction") or []
    given = [b["label"] for b in boards if b["label"]]
    return {
        "item_id": item.id,
        "external_id": item.external_id,
        "step": step,
        "steps": len(instructor),
        "category": item.category,
        "instruction": item.payload["instructions"][k],
        "earlier": item.payload["instructions"][:k],
        "instructor": {"before": initial if k == 0 else instructor[k - 1], "after": instructor[k]},
        "gold": ref["boards"][k],
        "executors": boards,
        "tag": step_tag(instructor[k], [b["after"] for b in boards]),
        "decision": None
        if decision is None
        else {
            "error_class": decision.error_class,
            "note": decision.note,
            "fixed_board": decision.fixed_board,
            "decided_by": decision.decided_by,
            "decided_at": decision.decided_at.isoformat(),
        },
        "abstraction": refs[k] if k < len(refs) else None,
        "labels": {"given": len(given), "majority": abstraction.majority(given)},
    }


def _check_board(board) -> list[int]:
    if (
        not isinstance(board, list)
        or len(board) != TILES
        or not all(type(c) is int and 0 <= c < len(COLOURS) for c in board)
    ):
        raise InputError(f"board must be {TILES} colour codes 0-{len(COLOURS) - 1}", field="board")
    return list(board)


def rescore(session: Session, item: Item) -> int:
    """Score every annotation and agent output on the item against its reference again, as
    submission and import score them; returns how many were re-scored."""
    from app.kinds import get_kind

    KIND = get_kind(session.get(Study, item.study_id).kind)  # the registered kind, not a new import cycle

    # The leaderboard totals' locks in their one order first (the item's, then its workers'):
    # the flush re-scores in annotation order, which another re-score could meet reversed.
    annotations = session.scalars(select(Annotation).where(Annotation.item_id == item.id)).all()
    workers = [a.worker_id for a in annotations if not a.is_gold and not a.excluded]
    if workers:  # else no total changes (and the item must not get an empty placeholder)
        lock_totals(session.connection(), item.study_id, items=[item.id], workers=workers)
    n = 0
    for ann in annotations:
        ann.score = KIND.score(item.payload, item.reference, ann.response)
        ann.scores = KIND.score_details(item.payload, item.reference, ann.response)
        n += 1
    for out in session.scalars(select(AgentOutput).where(AgentOutput.item_id == item.id)):
        out.score = KIND.score(item.payload, item.reference, out.response)
        n += 1
    return n


def decide(
    session: Session,
    study: Study,
    item_id: int,
    step: int,
    error_class: str | None,
    note: str,
    board: list[int] | None,
    admin,
    commit: bool = True,
) -> dict:
    """Store (or, with no error class, clear) the decision on a step: audited with the value
    before. A board is the corrected gold board; none (or the instructor's) leaves the
    instructor's board as gold. A changed gold board re-scores the item."""
    note = (note or "").strip()
    if len(note) > MAX_NOTE:
        raise InputError(f"at most {MAX_NOTE} characters", field="note")
    if error_class and error_class not in ERROR_CLASSES:
        raise InputError(f"{error_class!r} is not one of: {', '.join(ERROR_CLASSES)}", field="error_class")
    if board is not None:
        board = _check_board(board)
    if board is not None and not error_class:
        raise InputError("a fixed board needs an error class", field="error_class")
    item = _item(session, study, item_id, step, lock=True)
    ref = dict(item.reference)
    k = step - 1
    instructor = _instructor(ref)
    if board == instructor[k]:
        board = None
    decision = session.scalar(select(Consolidation).where(Consolidation.item_id == item.id, Consolidation.step == step))
    before = (
        None
        if decision is None
        else {"error_class": decision.error_class, "note": decision.note, "gold": ref["boards"][k]}
    )
    if not error_class:
        session.execute(delete(Consolidation).where(Consolidation.item_id == item.id, Consolidation.step == step))
    else:
        if decision is None:
            decision = Consolidation(study_id=study.id, item_id=item.id, step=step, error_class=error_class)
            session.add(decision)
        decision.error_class, decision.note, decision.fixed_board = error_class, note, board
        decision.decided_by, decision.decided_at = admin.id, utcnow()
    gold = board if board is not None else instructor[k]
    rescored = 0
    if gold != ref["boards"][k]:
        ref.setdefault("instructor_boards", [list(b) for b in ref["boards"]])
        ref["boards"] = [list(b) for b in ref["boards"]]
        ref["boards"][k] = list(gold)
        if ref["boards"] == ref["instructor_boards"]:
            del ref["instructor_boards"]
        item.reference = ref
        session.flush()
        rescored = rescore(session, item)
    audit.record(
        session,
        admin.id,
        "hexagons.consolidation",
        "item",
        item.id,
        study=study.id,
        step=step,
        before=before,
        after=None if not error_class else {"error_class": error_class, "note": note, "gold": gold},
    )
    if commit:
        session.commit()
    return {
        "item_id": item.id,
        "step": step,
        "error_class": error_class or None,
        "note": note if error_class else "",
        "fixed_board": board if error_class else None,
        "gold": gold,
        "rescored": rescored,
    }


def label(
    session: Session,
    study: Study,
    item_id: int,
    step: int,
    value: dict | None,
    admin,
    adopt: bool = False,
    commit: bool = True,
) -> dict:
    """Set the reference's abstraction label of a step (reference["abstraction"][k]): `value`
    by hand, or with `adopt` the executors' majority; audited with the value before."""
    if adopt:
        view = step_view(session, study, item_id, step)
        value = view["labels"]["majority"]
        if value is None:
            raise InputError("no executor labelled this step", field="abstraction")
    else:
        try:
            value = abstraction.StepLabel.model_validate(value or {}).model_dump()
        except ValidationError as exc:
            err = exc.errors()[0]
            field = ".".join(["abstraction", *(str(p) for p in err["loc"])])
            raise InputError(err["msg"], field=field) from None
    item = _item(session, study, item_id, step, lock=True)
    ref = dict(item.reference)
    labels = [dict(x) for x in (ref.get("abstraction") or abstraction.blank(len(ref["boards"])))]
    before = labels[step - 1]
    labels[step - 1] = value
    ref["abstraction"] = labels
    item.reference = ref
    audit.record(
        session,
        admin.id,
        "hexagons.abstraction",
        "item",
        item.id,
        study=study.id,
        step=step,
        before=before,
        after=value,
        adopted=adopt,
    )
    if commit:
        session.commit()
    return {"item_id": item.id, "step": step, "abstraction": value}
