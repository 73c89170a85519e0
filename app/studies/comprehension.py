"""A comprehension check before the first item, set per study, as Prolific's policy has it: a
few multiple-choice questions on the instructions, two attempts; a worker who fails both is
asked to return the study (neither paid nor rejected for it), and the task ends here so the
slot is free at once. The researcher writes the questions, or takes the kind's default
(Kind.comprehension)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, cast

from pydantic import BaseModel, Field
from sqlalchemy import CursorResult, exists, func, select, update
from sqlalchemy.orm import Session, aliased

from app.db import utcnow
from app.errors import InputError
from app.studies.models import Bundle, Study

ATTEMPTS = 2
MAX_QUESTIONS = 10
MAX_TEXT = 500


class CheckIn(BaseModel):
    """The check as the JSON API sets it (a study's `comprehension`, at creation or by PATCH):
    as the study page's card has it, and refused as the card refuses it."""

    mode: Literal["none", "default", "own"] = Field(
        description="none; the kind's default questions; or your own, in `questions`"
    )
    questions: str = Field(
        "",
        max_length=MAX_QUESTIONS * 12 * (MAX_TEXT + 1),
        description="with mode own: one block a question, the question on its first line, then its "
        "options one a line, the right one marked with a leading *; blocks parted by a blank line "
        "(a refusal names the line)",
    )


def parse(text: str) -> list[dict[str, Any]]:
    """Questions from the study page's box: blocks parted by a blank line, the question on the
    first line, then one option a line, the right one marked with a leading `*`. InputError
    naming the line otherwise."""
    questions: list[dict[str, Any]] = []
    block: list[tuple[int, str]] = []
    for n, line in enumerate([*text.splitlines(), ""], start=1):
        line = line.strip()
        if line:
            if len(line) > MAX_TEXT:
                raise InputError(f"at most {MAX_TEXT} characters", line=n, field="comprehension")
            block.append((n, line))
            continue
        if not block:
            continue
        (first, question), options = block[0], block[1:]
        right = [o[1:].strip() for _, o in options if o.startswith("*")]
        if len(options) < 2 or len(right) != 1:
            raise InputError(
                "a question needs two options or more on the lines below it, one of them marked right with a leading *",
                line=first,
                field="comprehension",
            )
        shown = [o.lstrip("*").strip() for _, o in options]
        if len(set(shown)) != len(shown):
            raise InputError("the question's options repeat", line=first, field="comprehension")
        questions.append({"question": question, "options": shown, "answer": right[0]})
        block = []
    if not questions:
        raise InputError("write at least one question (or choose the kind's default)", field="comprehension")
    if len(questions) > MAX_QUESTIONS:
        raise InputError(f"at most {MAX_QUESTIONS} questions", field="comprehension")
    return questions


def as_text(questions: list[dict[str, Any]] | None) -> str:
    """The questions as the study page's box shows them (parse's format)."""
    return "\n\n".join(
        "\n".join([q["question"], *(("* " if o == q["answer"] else "") + o for o in q["options"])])
        for q in questions or []
    )


def public(questions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What the worker's page shows: the questions and options, never which is right."""
    return [{"question": q["question"], "options": q["options"]} for q in questions]


def passed(session: Session, study_id: int, worker_id: int) -> bool:
    """Whether the worker passed the study's check in any of their tasks here: the one record
    the page, the crowd API and the hot path's statement (hotpath._NEXT_HEAD) all read, so a
    second task is not checked again, and a browser's session never stands in for it."""
    return bool(
        session.scalar(
            select(
                exists().where(
                    Bundle.study_id == study_id, Bundle.worker_id == worker_id, Bundle.checked_at.is_not(None)
                )
            )
        )
    )


def failures(session: Session, study_id: int, worker_id: int) -> int:
    """The worker's failed attempts at the study's check, over all their tasks here: two tries a
    worker, not two a task (Prolific's policy), however the tries fall across tasks."""
    total = session.scalar(
        select(func.coalesce(func.sum(Bundle.check_failures), 0)).where(
            Bundle.study_id == study_id, Bundle.worker_id == worker_id
        )
    )
    return int(total or 0)


def _others_failures(bundle_id: int, study_id: int, worker_id: int) -> Any:
    """failures() over the worker's other tasks, as a subquery of the attempt's UPDATE."""
    other = aliased(Bundle)
    return (
        select(func.coalesce(func.sum(other.check_failures), 0))
        .where(other.study_id == study_id, other.worker_id == worker_id, other.id != bundle_id)
        .scalar_subquery()
    )


def status(session: Session, study: Any, bundle: Bundle) -> str:
    """What the task page shows of the check: "needed" (the check, before any item), "failed"
    (the worker failed it twice, in this task or an earlier one), or "" (nothing: no check, or
    the worker passed it, in this task or an earlier one)."""
    if (
        not study.comprehension
        or bundle.checked_at is not None
        or bundle.check_spared
        or passed(session, study.id, bundle.worker_id)
    ):
        return ""
    if failures(session, study.id, bundle.worker_id) >= ATTEMPTS:
        return "failed"
    return "" if bundle.finished_at is not None else "needed"


def needed(session: Session, study: Any, bundle: Bundle) -> bool:
    """Whether the worker must pass the study's check before an item (a task ended needs none)."""
    return (
        bool(study.comprehension)
        and bundle.checked_at is None
        and not bundle.check_spared
        and bundle.finished_at is None
        and not passed(session, study.id, bundle.worker_id)
    )


def attempt(session: Session, study: Study, bundle: Bundle, answers: Mapping[str, Any]) -> str:
    """One attempt at the check with the page's answers (`q0`, `q1`, ...: the option chosen):
    "passed"; "again" (one attempt left); "failed" (the second failed: the task ends and its
    slot is free; the worker is asked to return the study)."""
    from app import audit
    from app.studies import assignment

    if not study.comprehension or bundle.checked_at is not None or bundle.check_spared:
        return "passed"  # nothing (more) to check
    if bundle.finished_at is None and passed(session, study.id, bundle.worker_id):
        return "passed"  # in an earlier task of theirs
    if bundle.finished_at is None and failures(session, study.id, bundle.worker_id) >= ATTEMPTS:
        assignment.give_back(session, bundle.id)  # no third try in a new task
        return "failed"
    if bundle.finished_at is not None:
        return "failed"  # the task ended: after two failures, or otherwise
    questions = study.comprehension or []
    right = all(answers.get(f"q{i}") == q["answer"] for i, q in enumerate(questions))
    # One conditional UPDATE an attempt, so attempts sent at once count as if sent one after
    # another: a right answer passes only while fewer than two wrong ones are stored (over all
    # the worker's tasks here), and only the attempt that stores the second wrong one ends the
    # task. The worker's tasks are locked first (PostgreSQL), so attempts in two tasks open at
    # once are counted one after the other too; SQLite writes one at a time anyway.
    session.execute(
        select(Bundle.id)
        .where(Bundle.study_id == study.id, Bundle.worker_id == bundle.worker_id)
        .order_by(Bundle.id)
        .with_for_update()
    ).all()
    still_open = (
        (Bundle.id == bundle.id)
        & Bundle.checked_at.is_(None)
        & Bundle.finished_at.is_(None)
        & (Bundle.check_failures + _others_failures(bundle.id, study.id, bundle.worker_id) < ATTEMPTS)
    )
    values = {"checked_at": utcnow()} if right else {"check_failures": Bundle.check_failures + 1}
    updated = session.execute(update(Bundle).where(still_open).values(**values))
    counted = cast(CursorResult[Any], updated).rowcount  # an UPDATE's (as in jobs._claim)
    session.refresh(bundle)
    if counted:  # the attempt and its audit row in one transaction
        audit.record(session, None, "worker.check", "bundle", bundle.id, passed=right, failures=bundle.check_failures)
    session.commit()
    if not counted:  # another attempt was counted first
        return "passed" if bundle.checked_at is not None else "failed"
    if right:
        return "passed"
    if failures(session, study.id, bundle.worker_id) < ATTEMPTS:
        return "again"
    assignment.give_back(session, bundle.id)
    return "failed"


def resolve(kind: str, mode: str, text: str = "") -> list[dict[str, Any]] | None:
    """The questions of a check: "none", the kind's "default", or "own" (parse's format);
    InputError naming the field (and the line) otherwise. Nothing is stored."""
    from app.kinds import get_kind

    if mode == "none":
        return None
    if mode == "default":
        questions = [dict(q) for q in get_kind(kind).comprehension]
        if not questions:
            raise InputError("this kind has no default check: write your own questions", field="comprehension")
        return questions
    if mode == "own":
        return parse(text)
    raise InputError("none, default or own", field="mode")


def apply(session: Session, study: Study, questions: list[dict[str, Any]] | None) -> None:
    """The study's check set (the caller commits). Workers who passed, or began, keep what they
    had; those still to come get the new one."""
    if questions and not study.comprehension and study.id is not None:
        # A check turned on mid-study: the workers who agreed already began without one, and
        # keep on without it in that task (a worker stopped mid-task could fail it after unpaid
        # work); spared, not passed, so their next task asks it, and a worker who failed it
        # twice before stays failed.
        session.execute(
            update(Bundle)
            .where(
                Bundle.study_id == study.id,
                Bundle.consented_at.is_not(None),
                Bundle.checked_at.is_(None),
                Bundle.finished_at.is_(None),
            )
            .values(check_spared=True)
        )
    study.comprehension = questions


def set_check(session: Session, study: Study, user_id: int, mode: str, text: str = "") -> list[dict[str, Any]] | None:
    """The study's check: "none", the kind's "default", or "own" questions (parse's format),
    set, audited and committed."""
    from app import audit

    questions = resolve(study.kind, mode, text)
    apply(session, study, questions)
    audit.record(session, user_id, "study.comprehension", "study", study.id, questions=len(questions or []))
    session.commit()
    return questions


def refusal(exc: InputError) -> str:
    """A refusal as the study page's card shows it (the line first)."""
    return f"line {exc.line}: {exc.message}" if exc.line is not None else exc.message
