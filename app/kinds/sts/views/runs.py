"""Generation runs: an agent's continuations of a version's scenarios (sts.generate)."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Form, Request
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy.orm import Session

from app.auth.deps import db, verify_csrf
from app.auth.models import User
from app.errors import InputError
from app.kinds.sts import generation, suites
from app.kinds.sts.models import GenerationRun
from app.kinds.sts.views.common import Count, Place, _answers, _flashed, _version, at_version, researcher
from app.params import NOT_BOOL, BodyId, Id, exactly_one_of
from app.runs import service as runs
from app.web import back, form_number, render

router = APIRouter(include_in_schema=False, dependencies=[Depends(verify_csrf)])  # pages
api = APIRouter(prefix="/api/v1/sts", tags=["sts"], dependencies=[Depends(verify_csrf)])


class GenerationForm(BaseModel):
    """A suite version's new generation run, as typed: the agent (a built-in's name or an
    agent's id), continuations per scenario and the seed; blanks take the defaults."""

    agent: str = ""
    continuations: str = ""
    seed: str = ""


BUILTIN_NAMES = tuple(suites.BUILTIN_AGENTS)  # expert, random


class GenerationIn(BaseModel):
    # Exactly one of agent_id and agent (the route refuses both or neither), as the schema says.
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra=exactly_one_of({"agent_id": {"type": "integer"}}, {"agent": {"type": "string"}}),
    )
    agent_id: BodyId | None = None
    agent: Literal[BUILTIN_NAMES] | None = None  # a built-in agent's name
    continuations: Annotated[int, Field(ge=1, le=generation.MAX_CONTINUATIONS), NOT_BOOL] = (
        generation.DEFAULT_CONTINUATIONS
    )
    seed: Count = 0
    batch_size: Annotated[int, Field(ge=1, le=generation.MAX_BATCH), NOT_BOOL] = generation.DEFAULT_BATCH


def _start_run(
    session: Session, user: User, suite_id: int, number: int, agent_spec, continuations, seed, batch_size
) -> GenerationRun:
    """Through the one runs service (app/runs), as POST /api/v1/runs does."""
    _version(session, user, suite_id, number)  # not yours: 404, as before
    params = {
        "agent" if isinstance(agent_spec, str) else "agent_id": agent_spec,
        "continuations": continuations,
        "seed": seed,
        "batch_size": batch_size,
    }
    run = runs.start(
        session, session.merge(user), generation.KIND_NAME, params, target={"suite_id": suite_id, "version": number}
    )
    return generation.of_job(session, run.job_id)


# Kept for a release beside the one runs API (POST /api/v1/runs {"kind": "sts", "target": ...}).
@api.post("/suites/{suite_id}/versions/{number}/generations", status_code=202, deprecated=True)
def start_generation(
    suite_id: Id, number: Id, body: GenerationIn, session: Session = Depends(db), user: User = Depends(researcher)
) -> dict:
    """An agent's `continuations` (C, default 10) of every scenario of version n, as one
    background job (`sts.generation`). The agent is `agent_id` (an STS agent) or `agent`, a
    built-in: "expert" or "random". Continuations already stored are kept, so a run again
    generates only what is missing. Cancel with POST /api/v1/jobs/{job}/cancel."""
    if (body.agent_id is None) == (body.agent is None):
        raise InputError("give agent_id (an STS agent) or agent (a built-in: expert, random)", field="agent")
    with _answers():
        run = _start_run(
            session,
            user,
            suite_id,
            number,
            body.agent_id if body.agent is None else body.agent,
            body.continuations,
            body.seed,
            body.batch_size,
        )
    return {"run": run.id, "job": run.job_id, "state": "queued"}


@api.get("/generations/{run_id}", deprecated=True)
def get_generation(run_id: Id, session: Session = Depends(db), user: User = Depends(researcher)) -> dict:
    """A run's state and progress, and how many of its continuations are stored."""
    with _answers():
        return generation.summary(session, generation.get_run(session, user, run_id))


def _runs(session: Session, suite) -> dict:
    """The suite page's runs list (the core's templates/runs/list.html; runs.html polls)."""
    return runs.page_context(
        session, generation.KIND_NAME, runs.of_target(session, generation.KIND_NAME, suite_id=suite.id), None
    )


@router.get("/sts/suites/{suite_id}/runs")
def suite_runs(request: Request, suite_id: Id, session: Session = Depends(db), user: User = Depends(researcher)):
    """The generation runs' section alone (htmx polls it while a run is going)."""
    with _answers():
        suite = suites.get_suite(session, user, suite_id)
    return render(request, "kinds/sts/runs.html", user=user, suite=suite, **_runs(session, suite))


@router.post("/sts/suites/{suite_id}/versions/{number}/generations")
def start_generation_page(
    request: Request, form: Annotated[GenerationForm, Form()], place: Place = Depends(at_version)
):
    session, user, suite_id, number = place.session, place.user, place.suite.id, place.version.number
    out: dict = {}
    with _flashed(request, out):
        spec = form.agent if form.agent in suites.BUILTIN_AGENTS else form_number(form.agent, "agent")
        run = _start_run(
            session,
            user,
            suite_id,
            number,
            spec,
            form_number(form.continuations, "continuations") or generation.DEFAULT_CONTINUATIONS,
            form_number(form.seed, "seed") or 0,
            generation.DEFAULT_BATCH,
        )
        return back(
            request,
            f"/sts/suites/{suite_id}?version={number}#runs",
            f"Generation run #{runs.of_job(session, run.job_id).id} queued (job {run.job_id}).",
        )
    return back(request, f"/sts/suites/{suite_id}?version={number}", f"Not started: {out['error']}", "error")
