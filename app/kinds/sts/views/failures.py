"""Failed continuations classified with the paper's error types (failures.py); admins only."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Form, HTTPException, Request
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy.orm import Session

from app.auth.deps import db, require, verify_csrf
from app.auth.models import User
from app.errors import InputError
from app.kinds.sts.views.metrics import _sts_study
from app.params import FormText, Id
from app.storage import get_store
from app.studies.models import Item
from app import web
from app.web import render

router = APIRouter(include_in_schema=False, dependencies=[Depends(verify_csrf)])  # pages
api = APIRouter(prefix="/api/v1/sts", tags=["sts"], dependencies=[Depends(verify_csrf)])


admin_only = require("admin")


class ReviewIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    error_type: str | None = Field(default=None, max_length=32)
    note: str = Field(default="", max_length=2000)


def _classify(session: Session, user: User, study_id: int, item_id: int, error_type: str | None, note: str) -> dict:
    from app.kinds.sts.failures import classify

    study = _sts_study(session, user, study_id)
    try:
        return classify(session, study, item_id, error_type, note, user)
    except LookupError as exc:
        raise HTTPException(404, str(exc)) from None


@api.get("/studies/{study_id}/failures")
def list_failures(study_id: Id, session: Session = Depends(db), user: User = Depends(admin_only)) -> dict:
    """The continuations people marked a failure (or tied on), disputed first, with their
    classification; and the error types to classify them with."""
    from app.kinds.sts.failures import ERROR_TYPES, queue

    study = _sts_study(session, user, study_id)
    return {
        "error_types": {t: {"source": s, "description": d} for t, (s, d) in ERROR_TYPES.items()},
        "failures": queue(session, study),
    }


@api.put("/studies/{study_id}/failures/{item_id}")
def classify_failure(
    study_id: Id, item_id: Id, body: ReviewIn, session: Session = Depends(db), user: User = Depends(admin_only)
) -> dict:
    """Classify a failed continuation ({"error_type", "note"}; a null error type clears it)."""
    return _classify(session, user, study_id, item_id, body.error_type, body.note)


@router.get("/sts/studies/{study_id}/failures")
def failures_page(request: Request, study_id: Id, session: Session = Depends(db), user: User = Depends(admin_only)):
    from app.kinds.sts.failures import ERROR_TYPES, SOURCES, queue

    study = _sts_study(session, user, study_id)
    return render(
        request,
        "kinds/sts/failures.html",
        user=user,
        study=study,
        rows=queue(session, study),
        error_types=ERROR_TYPES,
        sources=SOURCES,
    )


@router.get("/sts/studies/{study_id}/failures/{item_id}")
def failure_page(
    request: Request, study_id: Id, item_id: Id, session: Session = Depends(db), user: User = Depends(admin_only)
):
    from app.kinds.sts.failures import ERROR_TYPES, SOURCES, queue

    study = _sts_study(session, user, study_id)
    row = next((r for r in queue(session, study) if r["item_id"] == item_id), None)
    if row is None:
        raise HTTPException(404, "no failed continuation with that id in this study")

    payload = session.get(Item, item_id).payload
    return render(
        request,
        "kinds/sts/failure.html",
        user=user,
        study=study,
        row=row,
        error_types=ERROR_TYPES,
        sources=SOURCES,
        n_frames=payload["n_frames"],
        takeover=payload["takeover"],
        frames_url=get_store().url(payload["frames_key"], expires_s=3600),
    )


@router.post("/sts/studies/{study_id}/failures/{item_id}")
def classify_failure_page(
    request: Request,
    study_id: Id,
    item_id: Id,
    error_type: FormText = "",
    note: FormText = "",
    back: str = Form("list"),
    session: Session = Depends(db),
    user: User = Depends(admin_only),
):
    url = (
        f"/sts/studies/{study_id}/failures/{item_id}"
        if back == "item"
        else f"/sts/studies/{study_id}/failures#failure-{item_id}"
    )
    try:
        out = _classify(session, user, study_id, item_id, error_type or None, note)
    except InputError as exc:
        return web.back(request, url, f"Not saved: {exc}", "error")
    return web.back(request, url, f"Continuation {item_id}: " + (out["error_type"] or "classification cleared") + ".")
