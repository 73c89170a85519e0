from __future__ import annotations

from sqlalchemy import ForeignKey, String
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base, StampedRow


class AgentRun(StampedRow, Base):
    """One run: its job does the work (state, progress, log and result live there); this row
    says what ran on what, for every kind alike."""

    __tablename__ = "agent_runs"

    kind: Mapped[str] = mapped_column(String(32), index=True)
    # The study whose items or outputs the run adds; None where the kind's own target is meant.
    study_id: Mapped[int | None] = mapped_column(ForeignKey("studies.id", ondelete="CASCADE"), index=True)
    # The kind's own target (an STS suite version: {"suite_id", "version"}); {} for a study.
    target: Mapped[dict] = mapped_column(default=dict)  # type: ignore[type-arg]  # JSON (app.db)
    agent_id: Mapped[int | None] = mapped_column(ForeignKey("agents.id", ondelete="SET NULL"))
    artifact_ids: Mapped[list] = mapped_column(default=list)  # type: ignore[type-arg]
    # The parameters as the kind checked them (a built-in speaker's name, batch size, ...).
    params: Mapped[dict] = mapped_column(default=dict)  # type: ignore[type-arg]
    job_id: Mapped[int | None] = mapped_column(ForeignKey("jobs.id", ondelete="SET NULL"), unique=True)
    owner_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"), index=True)
