"""Every model, imported once so metadata (and Alembic) sees all tables."""

from app.agents.models import Agent, AgentArtifact, AgentOutput  # noqa: F401
from app.agents.generation import Candidate, GenerationRun, Rollout  # noqa: F401
from app.audit import AuditEntry  # noqa: F401
from app.auth.models import ApiToken, User  # noqa: F401
from app.db import Base  # noqa: F401
from app.jobs import Job  # noqa: F401
from app.studies.models import Annotation, Assignment, Bundle, Item, Participant, Study  # noqa: F401
from app.kinds.navigation.models import Environment  # noqa: F401
