"""Admin pages: the review queue, a worker's gold replay, decisions, the audit log."""

from __future__ import annotations

from fastapi import APIRouter, Depends, HTTPException, Query, Request
from fastapi.responses import RedirectResponse, Response
from starlette.concurrency import run_in_threadpool
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.audit import AuditEntry
from app.auth.deps import db, require, verify_csrf
from app.auth.models import User
from app.errors import InputError
from app.kinds import all_kinds, get_kind
from app.params import MAX_ID, Id
from app.quality import service
from app.studies.models import Participant, Study
from app.web import flash, render

router = APIRouter(include_in_schema=False, dependencies=[Depends(verify_csrf)])
admin = require("admin")


def _study(session: Session, study_id: int) -> Study:
    study = session.get(Study, study_id)
    if study is None:
        raise HTTPException(404, "No such study.")
    return study


STATUSES = ("pending", "approved", "rejected")


@router.get("/admin/review")
def review_all(
    request: Request,
    status: str = "pending",
    page: int = Query(1, ge=1, le=MAX_ID),
    session: Session = Depends(db),
    user: User = Depends(admin),
) -> Response:
    """Every study's workers in one queue, the most likely to be bad first (service.queue_order),
    a page of service.PAGE_ROWS at a time. Studies of a kind no longer installed are left out
    and named."""
    status = status if status in STATUSES else ""
    known, unknown = service.queue_studies(session, status or None)
    queue = service.queue_rows(session, known, status or None)
    pages = max(1, -(-len(queue) // service.PAGE_ROWS))
    page = min(page, pages)  # past the end (the queue shrank since): its last page
    first = (page - 1) * service.PAGE_ROWS
    return render(
        request,
        "admin/review_all.html",
        user=user,
        status=status,
        page=page,
        queue=queue[first : first + service.PAGE_ROWS],
        total=len(queue),
        first=first,
        pages=pages,
        skipped=unknown,
        rows_per_page=service.PAGE_ROWS,
    )


@router.get("/admin/studies/{study_id}/review")
def review(
    request: Request, study_id: Id, status: str = "", session: Session = Depends(db), user: User = Depends(admin)
) -> Response:
    from app.crowd.panels import review_panel
    from app.leaderboards.annotators import cached

    study = _study(session, study_id)
    # Each annotator's Dawid-Skene confusion matrix, from the background job's cached result.
    return render(
        request,
        "admin/review.html",
        user=user,
        study=study,
        status=status,
        queue=service.review_queue(session, study, status or None),
        dawid_skene=cached(session, study) if study.kind in all_kinds() else None,
        prolific=review_panel(session, study, user),
    )


@router.get("/admin/studies/{study_id}/participants/{pid}")
def replay(
    request: Request,
    study_id: Id,
    pid: Id,
    from_: str = Query("", alias="from"),
    session: Session = Depends(db),
    user: User = Depends(admin),
) -> Response:
    study = _study(session, study_id)
    p = session.get(Participant, pid)
    kind = get_kind(study.kind)
    answers = service.gold_replay(session, study, pid)
    others = service.gold_replay(session, study, pid, gold=False)
    for a in (*answers, *others):
        a["details"] = kind.replay_details(a)
        a["public"] = kind.public_payload(a["payload"])  # the item as the worker's page had it
    return render(
        request,
        "admin/replay.html",
        user=user,
        study=study,
        participant=p,
        worker=session.get(User, p.worker_id) if p else None,
        kind=kind,
        answers=answers,
        others=others,
        back="all" if from_ == "all" else "",  # opened from every study's queue
        verdict=service.kind_verdict(session, study, p) if p else (None, ""),
    )


@router.post("/admin/studies/{study_id}/review")
async def decide(
    request: Request, study_id: Id, session: Session = Depends(db), user: User = Depends(admin)
) -> Response:
    study = _study(session, study_id)
    form = await request.form()
    back = "/admin/review" if form.get("back") == "all" else f"/admin/studies/{study.id}/review"
    # ASCII digits only ("²" is a digit to isdigit() and not to int()), and within the ids' range
    # (read only up to 10 digits: int() refuses 4,300 and more with a ValueError).
    ids = [
        int(v)
        for v in map(str, form.getlist("participant_id"))
        if v.isascii() and v.isdigit() and len(v) <= 10 and 1 <= int(v) <= MAX_ID
    ]
    if not ids:
        raise InputError("select at least one worker", field="participant_id")
    decision = {"approve": "approved", "reject": "rejected"}.get(str(form.get("decision")), "")
    # In a thread: a decision waits for row locks and may retry (service.decide), which must
    # not hold up the event loop.
    n = await run_in_threadpool(
        service.decide, session, study, ids, decision, session.merge(user), str(form.get("reason", ""))
    )
    flash(request, f"{n} worker(s) {decision}.")
    return RedirectResponse(back, status_code=303)


@router.get("/admin/audit")
def audit_log(request: Request, session: Session = Depends(db), user: User = Depends(admin)) -> Response:
    rows = session.execute(
        select(AuditEntry, User.email)
        .join(User, User.id == AuditEntry.actor_id, isouter=True)
        .order_by(AuditEntry.id.desc())
        .limit(500)
    ).all()
    return render(request, "admin/audit.html", user=user, rows=rows)
