"""The leaderboard's JSON API (/api/v1/studies/{id}/leaderboard) and the study plan
(/api/v1/plan: app/leaderboards/plan.py)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool
from sqlalchemy.orm import Session

from app.auth.deps import db, managed_study, require, verify_csrf
from app.auth.models import User
from app.leaderboards import plan
from app.leaderboards.service import compute
from app.params import MAX_ID, Id
from app.studies.models import Study

router = APIRouter(prefix="/api/v1", dependencies=[Depends(verify_csrf)])
researcher = require("researcher", "admin")


@router.get("/studies/{study_id}/leaderboard", tags=["leaderboards"])
def leaderboard(
    study_id: Id,
    annotators_offset: Annotated[int, Query(ge=0, le=MAX_ID)] = 0,
    annotators_limit: Annotated[int | None, Query(ge=1, le=10_000)] = None,
    session: Session = Depends(db),
    user: User = Depends(researcher),
) -> dict[str, Any]:
    """Every row; annotators (most answers first) all, or one page of them with
    `annotators_limit` (and `annotators_offset`): `annotators.total` says how many there are."""
    page = (
        None if annotators_limit is None and not annotators_offset else (annotators_offset, annotators_limit or 10_000)
    )
    board = compute(session, _study(session, study_id, user), annotators=page)
    if board.get("extra"):  # the page's drawings; the API gives the figures they draw
        board["extra"] = {k: v for k, v in board["extra"].items() if k != "figures"}
    return board


def _study(session: Session, study_id: int, user: User) -> Study:
    study: Study = managed_study(session, study_id, user)
    return study


PLANS_PER_MINUTE = 30


class PlanIn(BaseModel):
    """A study to plan (the fields of `proctor plan`); values checked together by
    `plan.make_input`, whose refusals name their field."""

    model_config = ConfigDict(extra="forbid")

    scores: list[float] = Field(min_length=1, max_length=plan.MAX_AGENTS, description="agents' expected true scores")
    items: int = Field(ge=2, le=plan.MAX_ITEMS, description="items each agent is judged on")
    agents: int | None = Field(None, ge=1, le=plan.MAX_AGENTS, description="with one score: a baseline and steps")
    annotations: int = Field(3, ge=1, le=plan.MAX_ANNOTATIONS)
    error: float | None = Field(None, ge=0, le=0.5, description="the chance a worker's judgement is flipped")
    accuracy: float | None = Field(None, ge=0.5, le=1, description="workers' accuracy instead of error")
    difference: float | None = Field(None, gt=0, le=1, description="the gap whose power is asked")
    judge_agreement: float | None = Field(None, ge=0.5, le=1, description="an automatic judge's agreement")
    people: int | None = Field(None, ge=1, le=plan.MAX_ITEMS, description="with a judge: items people judge")
    payment: float | None = Field(None, ge=0, le=1e9, description="payment per annotation")
    studies: int = Field(500, ge=10, le=2000, description="simulated studies")
    seed: int = Field(0, ge=0, le=2**32 - 1)


@router.post("/plan", tags=["leaderboards"])
async def plan_study(request: Request, body: PlanIn, user: User = Depends(researcher)) -> dict[str, Any]:
    """Plan a study by simulation: each agent's expected 95% half-width, the power to separate
    two agents (the first score and one `difference` below, or the closest two), the cost at
    `payment` per annotation, and beside a judge the PPI++ half-widths and the people it saves
    (docs/statistics.md, "Planning a study")."""
    from app.web import rate_limit

    rate_limit(request, "study-plan", PLANS_PER_MINUTE, key=f"user:{user.id}")  # seconds of CPU each
    made = plan.make_input(**body.model_dump(), max_studies=2000)
    result: dict[str, Any] = await run_in_threadpool(plan.run_plan, made)
    return result
