"""Pages and API of the Hexagons kind.

Researchers and admins only, each on their own studies (another's is 404)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Form, HTTPException, Request, Response
from fastapi.responses import RedirectResponse
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.auth.deps import db, managed_study, require, verify_csrf
from app.auth.models import User
from app.errors import InputError
from app.params import Id
from app.studies.models import Item, Study
from app.web import flash, render

KIND_NAME = "hexagons"
# The pages' routes stay out of the API's documentation; the /api/v1 routes are in it.
router = APIRouter(include_in_schema=False, dependencies=[Depends(verify_csrf)])
api = APIRouter(prefix="/api/v1/hexagons", tags=["hexagons"], dependencies=[Depends(verify_csrf)])
researcher = require("researcher", "admin")


def _hex_study(session: Session, study_id: int, user: User) -> Study:
    study = managed_study(session, study_id, user, "No such study among yours.")
    if study.kind != KIND_NAME:
        raise HTTPException(404, "not a Hexagons study")
    return study


# ---- description and verification studies (description.py, verification.py) -------------------

Colour = Annotated[int, Field(ge=0, le=7)]


class TargetIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str = Field(min_length=1, max_length=200)
    board: list[Colour] = Field(min_length=180, max_length=180)
    category: str = Field("", max_length=64)


class VerificationIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    title: str = Field("", max_length=255)


def _execution_study(session: Session, study_id: int, user: User) -> Study:
    from app.kinds.hexagons.verification import mode

    study = _hex_study(session, study_id, user)
    if mode(study) != "execution":
        raise InputError("a description study has no verifiers: verify its procedures first", field="study")
    return study


@api.post("/studies/{study_id}/targets", status_code=201)
def add_target(study_id: Id, body: TargetIn, session: Session = Depends(db),
               user: User = Depends(researcher)) -> dict:
    """Add a target image (a board of 180 colour codes) to a draft description study."""
    from app.kinds.hexagons.description import add_target as add

    study = _hex_study(session, study_id, user)
    item = add(session, study, user, body.id, body.board, body.category)
    total = session.scalar(select(func.count()).select_from(Item).where(Item.study_id == study.id))
    return {"item": item, "id": body.id.strip(), "targets": total}


@api.post("/studies/{study_id}/verification", status_code=201)
def start_verification(study_id: Id, body: VerificationIn | None = None, session: Session = Depends(db),
                       user: User = Depends(researcher)) -> dict:
    """Send the description study's procedures not yet verified to a new draft execution study
    with two verifiers per procedure, who never see the image."""
    from app.kinds.hexagons.verification import make_verification_study

    study = _hex_study(session, study_id, user)
    new = make_verification_study(session, study, session.merge(user), body.title if body else "")
    n = session.scalar(select(func.count()).select_from(Item).where(Item.study_id == new.id))
    return {"study": new.id, "slug": new.slug, "procedures": n, "state": new.state}


@api.get("/studies/{study_id}/verification")
def verification_report(study_id: Id, session: Session = Depends(db), user: User = Depends(researcher)) -> dict:
    """Per procedure and step: the agreement tag (A, V1, V2, VV, F) and the (I-V1, I-V2, V1-V2)
    board-based F1 scores, once two verifiers answered (null before)."""
    from app.kinds.hexagons.verification import report

    return report(session, _execution_study(session, study_id, user))


@api.get("/studies/{study_id}/verification.jsonl", response_class=Response,
         responses={200: {"content": {"application/x-ndjson": {}}}})
def verification_export(study_id: Id, session: Session = Depends(db), user: User = Depends(researcher)):
    """The procedures in the released Hexagons JSONL, with agreement tags and scores where two
    verifiers answered ("None" where not yet): `proctor hex score --gold` reads it."""
    from app.kinds.hexagons.verification import export_jsonl

    study = _execution_study(session, study_id, user)
    return Response(export_jsonl(session, study), media_type="application/x-ndjson",
                    headers={"Content-Disposition": f'attachment; filename="{study.slug}-procedures.jsonl"'})


def _targets_page(request: Request, study: Study, session: Session, status_code: int = 200, **ctx):
    n = session.scalar(select(func.count()).select_from(Item).where(Item.study_id == study.id))
    return render(request, "kinds/hexagons/description_targets.html", status_code=status_code, study=study,
                  targets=n, **ctx)


@router.get("/hexagons/studies/{study_id}/targets")
def targets_page(request: Request, study_id: Id, session: Session = Depends(db), user: User = Depends(researcher)):
    return _targets_page(request, _hex_study(session, study_id, user), session)


@router.post("/hexagons/studies/{study_id}/targets")
def add_target_page(request: Request, study_id: Id, target_id: str = Form(""), board: str = Form(""),
                    category: str = Form(""), session: Session = Depends(db), user: User = Depends(researcher)):
    import json

    from app import jsonsafe
    from app.kinds.hexagons.description import add_target as add

    study = _hex_study(session, study_id, user)
    try:
        try:
            cells = jsonsafe.loads(board) if board.strip() else None
        except json.JSONDecodeError:
            raise InputError("the board is not valid JSON", field="board") from None
        add(session, study, user, target_id, cells, category)
    except InputError as exc:
        session.rollback()
        return _targets_page(request, study, session, status_code=422, error=str(exc),
                             form={"target_id": target_id, "board": board, "category": category})
    flash(request, f"Target {target_id.strip()!r} added.")
    return RedirectResponse(f"/hexagons/studies/{study.id}/targets", status_code=303)


@router.post("/hexagons/studies/{study_id}/verification")
def start_verification_page(request: Request, study_id: Id, title: str = Form(""), session: Session = Depends(db),
                            user: User = Depends(researcher)):
    from app.kinds.hexagons.verification import make_verification_study

    study = _hex_study(session, study_id, user)
    new = make_verification_study(session, study, session.merge(user), title)
    flash(request, "Verification study created with the procedures: launch it when ready.")
    return RedirectResponse(f"/studies/{new.id}", status_code=303)


@router.get("/hexagons/studies/{study_id}/verification")
def verification_page(request: Request, study_id: Id, session: Session = Depends(db),
                      user: User = Depends(researcher)):
    from app.kinds.hexagons.verification import report

    study = _execution_study(session, study_id, user)
    return render(request, "kinds/hexagons/verification.html", study=study, report=report(session, study))
