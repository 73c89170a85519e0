from __future__ import annotations

from datetime import datetime

from sqlalchemy import Float, ForeignKey, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base, StampedRow, utcnow


class Agent(StampedRow, Base):
    __tablename__ = "agents"
    __table_args__ = (UniqueConstraint("owner_id", "name", "version"),)

    owner_id: Mapped[int] = mapped_column(ForeignKey("users.id"), index=True)
    kind: Mapped[str] = mapped_column(String(32))
    name: Mapped[str] = mapped_column(String(255))
    version: Mapped[str] = mapped_column(String(64), default="1")
    description: Mapped[str] = mapped_column(Text, default="")


class AgentOutput(Base):
    """An agent's own answer to an item, scored like a human response."""

    __tablename__ = "agent_outputs"
    __table_args__ = (UniqueConstraint("agent_id", "item_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    agent_id: Mapped[int] = mapped_column(ForeignKey("agents.id", ondelete="CASCADE"), index=True)
    study_id: Mapped[int] = mapped_column(ForeignKey("studies.id", ondelete="CASCADE"), index=True)
    item_id: Mapped[int] = mapped_column(ForeignKey("items.id", ondelete="CASCADE"))
    response: Mapped[dict] = mapped_column()  # type: ignore[type-arg]  # JSON (app.db)
    score: Mapped[float | None] = mapped_column(Float)


ARTIFACT_FORMATS = ("torchscript", "safetensors")
ARTIFACT_STATES = ("pending", "valid", "invalid")


class AgentArtifact(Base):
    """One uploaded version of an agent's model: a TorchScript archive, or safetensors
    weights with the config of a built-in architecture. Versions count up per agent and are
    never overwritten; a worker validates each one (state, verdict) before it can be used."""

    __tablename__ = "agent_artifacts"
    __table_args__ = (UniqueConstraint("agent_id", "version"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    agent_id: Mapped[int] = mapped_column(ForeignKey("agents.id", ondelete="CASCADE"), index=True)
    version: Mapped[int] = mapped_column()
    # One of its kind's artifact_roles (navigation: speaker | listener).
    role: Mapped[str] = mapped_column(String(16))
    format: Mapped[str] = mapped_column(String(16))  # torchscript | safetensors
    blob_key: Mapped[str] = mapped_column(String(500))
    # safetensors: the built-in architecture's config (architecture, sizes, words, feature_version)
    config: Mapped[dict] = mapped_column(default=dict)  # type: ignore[type-arg]  # JSON (app.db)
    size: Mapped[int] = mapped_column()
    sha256: Mapped[str] = mapped_column(String(64))
    state: Mapped[str] = mapped_column(String(16), default="pending")
    verdict: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    validated_at: Mapped[datetime | None] = mapped_column()
