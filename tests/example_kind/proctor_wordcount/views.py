"""The kind's page (a study's tally) and API route (start the tally job)."""

from __future__ import annotations

from fastapi import APIRouter, Depends, HTTPException, Request
from sqlalchemy.orm import Session

from app import jobs
from app.auth.deps import db, managed_study, require, verify_csrf
from app.auth.models import User
from app.params import Id
from app.web import render
from proctor_wordcount.jobs import tallies

pages = APIRouter(include_in_schema=False)
api = APIRouter(prefix="/api/v1/wordcount", tags=["wordcount"], dependencies=[Depends(verify_csrf)])
researcher = require("researcher", "admin")


def _study(session: Session, study_id: int, user: User):
    study = managed_study(session, study_id, user)
    if study.kind != "wordcount":
        raise HTTPException(404, "not a word-counting study")
    return study


@pages.get("/wordcount/studies/{study_id}/tally")
def tally_page(request: Request, study_id: Id, session: Session = Depends(db), user: User = Depends(researcher)):
    study = _study(session, study_id, user)
    return render(request, "kinds/wordcount/tally.html", user=user, study=study, rows=tallies(session, study.id))


@api.post("/studies/{study_id}/tally", status_code=202)
def start_tally(study_id: Id, session: Session = Depends(db), user: User = Depends(researcher)):
    """Tally every sentence's answers (job `wordcount.tally`); the page shows the result."""
    study = _study(session, study_id, user)
    job = jobs.submit(session, jobs.create_job(session, "wordcount.tally", study_id=study.id, owner_id=user.id))
    return {"job": job.id, "state": job.state}
