"""The leaderboard's JSON API (/api/v1/studies/{id}/leaderboard)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query
from sqlalchemy.orm import Session

from app.auth.deps import db, managed_study, require, verify_csrf
from app.auth.models import User
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
