"""Every table: the core's, then each kind's (through the kind registry), imported once so the
metadata (and Alembic) sees them all before the first query. Called by what starts a process
(the app, the CLI, the Celery worker, Alembic); nothing below imports this module."""

from __future__ import annotations

import importlib

from app.agents.models import Agent, AgentArtifact, AgentOutput  # noqa: F401  # noqa: F401
from app.audit import AuditEntry  # noqa: F401  # noqa: F401
from app.auth.models import ApiToken, User  # noqa: F401  # noqa: F401
from app.crowd.models import BonusPayment, CrowdAccount, CrowdBlock, PlatformStudy  # noqa: F401
from app.db import Base
from app.jobs import Job  # noqa: F401  # noqa: F401
from app.kinds import all_kinds
from app.runs.models import AgentRun  # noqa: F401
from app.leaderboards.models import ItemAnswerTotal, WorkerCategoryTotal, WorkerClusterTotal, WorkerConsistencyTotal  # noqa: F401
from app.studies.models import Annotation, Assignment, Bundle, Item, Participant, Study  # noqa: F401  # noqa: F401


def load_models() -> type[Base]:
    """Import every kind's tables (idempotent); returns the Base whose metadata holds them."""
    for kind in all_kinds().values():
        if kind.models:
            importlib.import_module(kind.models)
    return Base
