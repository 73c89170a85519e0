"""A researcher's preview of a study: the worker's own page for each of its items, in the
order they were uploaded, through the kind's item template, storing nothing.

Nothing here writes: no worker, participant, bundle, assignment or annotation row is made, so
no progress, aggregate or export can count a preview. An answer is checked with the kind's
parse_response (the researcher meets the errors a worker would) and scored, and is then
dropped. The assignment engine (app.studies.assignment) is not involved at all.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.errors import InputError
from app.kinds import get_kind
from app.studies.models import Item, Study


@dataclass(frozen=True)
class Slot:
    """What an item template reads of the worker's assignment: the slot (0-based position in
    the task) and an id, blank here (nothing is leased, and pages that keep state by
    assignment, e.g. a navigation walk resumed after a reload, keep none in a preview)."""

    slot: int | None
    id: str = ""


@dataclass(frozen=True)
class Task:
    """What the worker's page reads of their bundle: its size (the whole study here)."""

    size: int


def count(session: Session, study: Study) -> int:
    return session.scalar(select(func.count()).select_from(Item).where(Item.study_id == study.id)) or 0


def item_at(session: Session, study: Study, position: int) -> Item:
    """The study's item number `position` (1-based) in upload order; 404-like InputError past
    the end."""
    if position < 1:
        raise InputError("positions start at 1", field="n")
    item = session.scalar(select(Item).where(Item.study_id == study.id).order_by(Item.id).offset(position - 1).limit(1))
    if item is None:
        raise InputError(f"this study has no item {position}", field="n")
    return item


def page_context(session: Session, study: Study, position: int) -> dict[str, Any]:
    """The context a worker's item page gets (templates/annotate/item.html), for item
    `position`, plus the kind's own additions for previews (TaskKind.preview_context)."""
    kind = get_kind(study.kind)
    item = item_at(session, study, position)
    total = count(session, study)
    return {
        "kind": kind,
        "item": item,
        "payload": kind.public_payload(item.payload),
        "assignment": Slot(slot=position - 1),
        "bundle": Task(size=total),
        "position": position,
        "total": total,
        **kind.preview_context(study, item),
    }


def check_answer(session: Session, study: Study, position: int, form: dict[str, Any]) -> dict[str, Any]:
    """A preview answer as the worker's submit would take it: parsed by the kind (InputError
    as the worker gets it) and scored against the item's reference. Nothing is stored."""
    kind = get_kind(study.kind)
    item = item_at(session, study, position)
    parsed = kind.parse_response(form, payload=item.payload, settings=study.kind_settings or {})
    return {"response": parsed, "score": kind.score(item.payload, item.reference, parsed), "is_gold": item.is_gold}


def upload_views(kind: Any, result: Any, title: str = "", limit: int = 3) -> list[dict[str, Any]]:
    """The first items of an upload (an ImportResult not yet stored) as the worker will see them:
    for each, the worker's page as a document of its own, for an iframe's srcdoc (so that the
    item's scripts and keys stay out of the form around it). No task, no slot: pages with a
    first-item extra (navigation's practice episode) show the item itself. Nothing of the upload
    is stored yet, so no page can ask the server about its item: templates get
    `upload_preview` true and show what they can without (TaskKind.preview_context is for
    stored items only)."""
    from app.web import templates

    study = SimpleNamespace(title=title, kind_settings=result.kind_settings or {}, slug="", id=None)
    specs = [s for s in result.items if not s.is_gold][:limit] or result.items[:limit]
    page = templates.get_template("research/worker_view.html")
    return [
        {
            "external_id": spec.external_id,
            "is_gold": spec.is_gold,
            "html": page.render(
                kind=kind,
                study=study,
                payload=kind.public_payload(spec.payload),
                assignment=Slot(slot=None),
                position=n,
                total=len(result.items),
                upload_preview=True,
            ),
        }
        for n, spec in enumerate(specs, 1)
    ]
