"""Pages and API of the Hexagons kind. Researchers and admins only; another researcher's
study or run is 404."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Form, HTTPException, Request
from fastapi.responses import RedirectResponse
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy.orm import Session

from app import jobs
from app.auth.deps import db, managed_study, require, verify_csrf
from app.auth.models import User
from app.errors import InputError
from app.params import BodyId, Id
from app.web import flash, render

# Pages: their forms post here, with the session's form token.
router = APIRouter(include_in_schema=False, dependencies=[Depends(verify_csrf)])
api = APIRouter(prefix="/api/v1/hexagons", tags=["hexagons"], dependencies=[Depends(verify_csrf)])
researcher = require("researcher", "admin")


# ---- executor runs (issue 12 C): an executor's boards for a study's procedures ----------------

from app.kinds.hexagons import generation  # noqa: E402


class GenerationIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    artifact_id: BodyId | None = None
    agent_id: BodyId | None = None
    on: str = "gold"
    batch_size: int = Field(generation.DEFAULT_BATCH, ge=1, le=generation.MAX_BATCH)


def _start(session: Session, study, user: User, artifact_id, agent_id, on, batch_size) -> jobs.Job:
    if artifact_id is None:
        raise InputError("artifact_id is required: the executor to run (a valid Hexagons executor artifact)",
                         field="artifact_id")
    job = generation.create_run(session, study, session.merge(user), artifact_id=artifact_id, agent_id=agent_id,
                                on=on, batch_size=batch_size)
    return jobs.submit(session, job)


def _run(session: Session, user: User, job_id: int) -> jobs.Job:
    try:
        return generation.get_run(session, user, job_id)
    except generation.NotFound as exc:
        raise HTTPException(404, str(exc)) from None


@api.post("/studies/{study_id}/generations", status_code=202)
def start_generation(study_id: Id, body: GenerationIn, session: Session = Depends(db),
                     user: User = Depends(researcher)) -> dict:
    """Run an executor artifact over the study's procedures (gold ones excepted), every step from
    the gold board before it (`on: gold`, the default) or from its own previous board (`on: own`);
    its boards become the outputs of `agent_id` (default: the artifact's agent), replacing that
    agent's earlier ones. Follow it with GET .../generations/{job}; cancel with POST .../cancel."""
    study = managed_study(session, study_id, user)
    job = _start(session, study, user, body.artifact_id, body.agent_id, body.on, body.batch_size)
    return generation.summary(session, job)


@api.get("/studies/{study_id}/generations")
def list_generations(study_id: Id, session: Session = Depends(db), user: User = Depends(researcher)) -> list:
    study = managed_study(session, study_id, user)
    return [generation.summary(session, j) for j in generation.runs_of(session, study)]


@api.get("/generations/{job_id}")
def get_generation(job_id: Id, session: Session = Depends(db), user: User = Depends(researcher)) -> dict:
    return generation.summary(session, _run(session, user, job_id))


@api.post("/generations/{job_id}/cancel")
def cancel_generation(job_id: Id, session: Session = Depends(db), user: User = Depends(researcher)) -> dict:
    """Stop the run before its next chunk of procedures; what it stored stays."""
    job = _run(session, user, job_id)
    jobs.cancel(session, job)
    return generation.summary(session, job)


@router.get("/hexagons/studies/{study_id}/generations")
def generations_section(request: Request, study_id: Id, session: Session = Depends(db),
                        user: User = Depends(researcher)):
    """The study page's section alone (htmx polls it while a run goes)."""
    study = managed_study(session, study_id, user, "No such study among yours.")
    return render(request, "kinds/hexagons/generation.html", study=study,
                  **generation.study_context(session, study))


def _form_int(text: str, field: str) -> int | None:
    text = text.strip()
    if not text:
        return None
    try:
        return int(text)
    except ValueError:
        raise InputError(f"{field} must be an integer", field=field) from None


@router.post("/hexagons/studies/{study_id}/generations")
def start_generation_page(request: Request, study_id: Id, artifact_id: str = Form(""), agent_id: str = Form(""),
                          on: str = Form("gold"), batch_size: str = Form(""), session: Session = Depends(db),
                          user: User = Depends(researcher)):
    study = managed_study(session, study_id, user, "No such study among yours.")
    back = f"/studies/{study.id}#executor-runs"
    try:
        job = _start(session, study, user, _form_int(artifact_id, "artifact_id"), _form_int(agent_id, "agent_id"),
                     on, _form_int(batch_size, "batch_size") or generation.DEFAULT_BATCH)
    except InputError as exc:
        flash(request, f"Not started: {exc}", "error")
    else:
        flash(request, f"Executor run {job.id} queued.")
    return RedirectResponse(back, status_code=303)

# ---- end of executor runs ---------------------------------------------------------------------
