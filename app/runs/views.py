"""The runs list of a study page (templates/runs/list.html), alone: what htmx polls while a
run goes."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request, Response
from sqlalchemy.orm import Session

from app.auth.deps import db, managed_study, require
from app.auth.models import User
from app.params import Id
from app.runs import service
from app.web import render

router = APIRouter(include_in_schema=False)


@router.get("/studies/{study_id}/runs")
def study_runs(
    request: Request, study_id: Id, session: Session = Depends(db), user: User = Depends(require("researcher", "admin"))
) -> Response:
    study = managed_study(session, study_id, user, "No such study among yours.")
    return render(request, "runs/list.html", **service.study_page_context(session, study))
