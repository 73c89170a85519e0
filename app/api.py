"""The JSON API (/api/v1), documented at /openapi.json. Researchers and admins use API
tokens (`Authorization: Bearer pct_...`); crowd endpoints use the worker's signed session.

Each area keeps its routes beside its views (app/<area>/api.py); this gathers them, the crowd's
first (app/main.py includes `crowd_router` ahead of every other router)."""

from __future__ import annotations

from fastapi import APIRouter

from app.agents.api import router as agents
from app.auth.api import router as account
from app.crowd.api import hooks_router as prolific_hooks
from app.crowd.api import router as prolific
from app.leaderboards.api import router as leaderboards
from app.quality.api import router as quality
from app.runs.api import router as runs
from app.studies.api import JOB_STATES, StateIn, StudyOut
from app.studies.api import router as studies
from app.studies.crowd_api import crowd_router

router = APIRouter()
for area in (studies, account, agents, leaderboards, quality, runs, prolific, prolific_hooks):
    router.include_router(area)

__all__ = ["JOB_STATES", "StateIn", "StudyOut", "crowd_router", "router"]
