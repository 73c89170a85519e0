"""The paths a kind's runs had before the one runs API, whose ids were the runs' job ids
(A3DS captioner runs, Hexagons executor runs): start, list, read and cancel, answered by the
runs service for one release and marked deprecated in the OpenAPI document."""

# No `from __future__ import annotations`: FastAPI reads the start body's type from the
# signature of a function made here, where it is a local name.
from typing import Any

from fastapi import APIRouter, Depends, HTTPException
from pydantic import BaseModel
from sqlalchemy.orm import Session

from app import jobs
from app.auth.deps import db, managed_study, require
from app.auth.models import User
from app.params import Id
from app.runs import service
from app.runs.models import AgentRun

researcher = require("researcher", "admin")


def _summary(session: Session, run: AgentRun, job: jobs.Job | None) -> dict[str, Any]:
    """The earlier answer's shape: the job's fields, with its id, then what the run stored."""
    if job is None:  # its job was deleted: the earlier paths were the job's
        raise HTTPException(404, "no such run among yours")
    return {
        "id": job.id,
        "study_id": job.study_id,
        "state": job.state,
        "done": job.done,
        "total": job.total,
        "log": job.log,
        **service.component(run.kind).describe(session, run, job),
        "result": job.result or {},
    }


def _by_job(session: Session, user: User, kind_name: str, job_id: int) -> AgentRun:
    run = service.of_job(session, job_id)
    try:
        if run is None or run.kind != kind_name:
            raise service.NotFound(f"no such {service.component(kind_name).noun} among yours")
        return service.get(session, user, run.id)
    except service.NotFound as exc:
        raise HTTPException(404, str(exc)) from None


def job_routes(api: APIRouter, kind_name: str, body_model: type[BaseModel], start_doc: str) -> None:
    """Add the four earlier routes to the kind's API router (its prefix, e.g. /api/v1/a3ds)."""

    @api.post("/studies/{study_id}/generations", status_code=202, deprecated=True)
    def start_generation(
        study_id: Id,
        body: body_model,  # type: ignore[valid-type]
        session: Session = Depends(db),
        user: User = Depends(researcher),
    ) -> dict[str, Any]:
        study = managed_study(session, study_id, user)
        fields: dict[str, Any] = body.model_dump(exclude_none=True)  # type: ignore[attr-defined]
        run = service.start(session, session.merge(user), kind_name, fields, study=study)
        return _summary(session, run, session.get(jobs.Job, run.job_id))

    start_generation.__doc__ = start_doc + " Deprecated: POST /api/v1/studies/{id}/runs."

    @api.get("/studies/{study_id}/generations", deprecated=True)
    def list_generations(
        study_id: Id, session: Session = Depends(db), user: User = Depends(researcher)
    ) -> list[dict[str, Any]]:
        study = managed_study(session, study_id, user)
        return [
            _summary(session, r, job)
            for r in service.of_study(session, study.id)
            if (job := session.get(jobs.Job, r.job_id)) is not None
        ]

    @api.get("/generations/{job_id}", deprecated=True)
    def get_generation(job_id: Id, session: Session = Depends(db), user: User = Depends(researcher)) -> dict[str, Any]:
        run = _by_job(session, user, kind_name, job_id)
        return _summary(session, run, session.get(jobs.Job, job_id))

    @api.post("/generations/{job_id}/cancel", deprecated=True)
    def cancel_generation(
        job_id: Id, session: Session = Depends(db), user: User = Depends(researcher)
    ) -> dict[str, Any]:
        """Stop the run at its next progress check; what it stored stays."""
        run = _by_job(session, user, kind_name, job_id)
        service.cancel(session, user, run.id)
        return _summary(session, run, session.get(jobs.Job, job_id))
