"""The STS kind's tables (paper 004, sections 3.1-3.2 and 5.1): recordings, versioned suites of
scenarios mined from them, the agents' continuations of each scenario, the generation runs
that make them, and researchers' personal tags.

Version semantics: a scenario belongs to the version that added it and to every later one, so
version n's scenarios are those with `version.number <= n`. Only a draft version takes new
scenarios; a published one is immutable. Continuations are stored per (scenario, agent,
index), not per version, so an agent's score on an older version is a filter of what is
stored, and a scenario carried into a new version is not generated twice."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base, StampedRow, utcnow

VERSION_STATES = ("draft", "published")
# The most reference episodes of a kind (or reference pairs) one study asks for.
MAX_REFERENCE = 1000
# The built-in agents, made per researcher on demand as Agent rows of this kind with this
# version (so a researcher's own agent named "expert" is not taken for the built-in one).
BUILTIN_AGENTS: dict[str, str] = {
    "expert": "BabyAI's scripted expert (BabyAIBot), following the context: the skyline",
    "random": "uniform over the seven actions: the floor",
    "people": "people playing the scenarios in a play study (people.py): the human row, never generated",
}
PEOPLE = "people"  # the built-in whose continuations come from a play study, not a policy
BUILTIN_VERSION = "built-in"
# How a continuation ended (rollout.Continuation.end).
ENDS = ("success", "failure", "time out", "length")


class Recording(StampedRow, Base):
    """A recorded episode (stored; recordings.Replayable is its in-memory form): replayed, never
    stored as video."""

    __tablename__ = "sts_recordings"
    __table_args__ = (UniqueConstraint("owner_id", "external_id"),)

    owner_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    # The uploader's own id for it (unique per owner), if they gave one.
    external_id: Mapped[str | None] = mapped_column(String(255))
    level: Mapped[str] = mapped_column(String(64))
    seed: Mapped[int] = mapped_column()
    mission: Mapped[str] = mapped_column(Text)
    actions: Mapped[list] = mapped_column()  # minigrid's action ints
    # recordings.ACTORS, or "human:<pseudonym>" for a play study's answer (sts0002 widened it).
    actor: Mapped[str] = mapped_column(String(64))
    # Actions after which the simulator reported success, or None (checked when stored).
    success_step: Mapped[int | None] = mapped_column()
    n_actions: Mapped[int] = mapped_column()


class Suite(StampedRow, Base):
    __tablename__ = "sts_suites"
    __table_args__ = (UniqueConstraint("owner_id", "name"),)

    owner_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(255))
    description: Mapped[str] = mapped_column(Text, default="")


class SuiteVersion(StampedRow, Base):
    __tablename__ = "sts_suite_versions"
    __table_args__ = (UniqueConstraint("suite_id", "number"),)

    suite_id: Mapped[int] = mapped_column(ForeignKey("sts_suites.id", ondelete="CASCADE"), index=True)
    number: Mapped[int] = mapped_column()  # 1, 2, ...
    state: Mapped[str] = mapped_column(String(16), default="draft")  # VERSION_STATES
    published_at: Mapped[datetime | None] = mapped_column()


class Scenario(StampedRow, Base):
    """A recording, a takeover point (the context's length in actions), a continuation length,
    the instruction, a category and the suite's tags. Unique per suite by (recording,
    takeover, length), so mining the same rule twice adds nothing."""

    __tablename__ = "sts_scenarios"
    __table_args__ = (UniqueConstraint("suite_id", "recording_id", "takeover", "continuation"),)

    suite_id: Mapped[int] = mapped_column(ForeignKey("sts_suites.id", ondelete="CASCADE"), index=True)
    # The version that added it: it belongs to that version and every later one.
    version_id: Mapped[int] = mapped_column(ForeignKey("sts_suite_versions.id", ondelete="CASCADE"), index=True)
    # A recording in a suite cannot be deleted (RESTRICT): its scenarios replay it.
    recording_id: Mapped[int] = mapped_column(ForeignKey("sts_recordings.id", ondelete="RESTRICT"), index=True)
    takeover: Mapped[int] = mapped_column()
    continuation: Mapped[int] = mapped_column()  # the continuation length, in the agent's actions
    instruction: Mapped[str] = mapped_column(Text)
    category: Mapped[str] = mapped_column(String(64))
    tags: Mapped[list] = mapped_column(default=list)


class Continuation(StampedRow, Base):
    """An agent's continuation of a scenario: its own actions after the takeover point."""

    __tablename__ = "sts_continuations"
    # One row per (scenario, agent, index): a generation run again stores nothing twice.
    __table_args__ = (UniqueConstraint("scenario_id", "agent_id", "index"),)

    scenario_id: Mapped[int] = mapped_column(ForeignKey("sts_scenarios.id", ondelete="CASCADE"), index=True)
    agent_id: Mapped[int] = mapped_column(ForeignKey("agents.id", ondelete="CASCADE"), index=True)
    index: Mapped[int] = mapped_column()  # 0..C-1
    actions: Mapped[list] = mapped_column()  # after the takeover point
    # Actions after the takeover at which the simulator reported success, or None.
    success_step: Mapped[int | None] = mapped_column()
    end: Mapped[str] = mapped_column(String(16))  # ENDS
    seed: Mapped[int | None] = mapped_column()  # its sampling generator's seed
    notes: Mapped[str] = mapped_column(Text, default="")  # e.g. where the expert gave up


class GenerationRun(StampedRow, Base):
    """One generation job: an agent's C continuations of every scenario of a suite version."""

    __tablename__ = "sts_generation_runs"

    version_id: Mapped[int] = mapped_column(ForeignKey("sts_suite_versions.id", ondelete="CASCADE"), index=True)
    agent_id: Mapped[int] = mapped_column(ForeignKey("agents.id", ondelete="CASCADE"))
    owner_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    job_id: Mapped[int | None] = mapped_column(ForeignKey("jobs.id", ondelete="SET NULL"))
    continuations: Mapped[int] = mapped_column()  # C per scenario
    seed: Mapped[int] = mapped_column()
    batch_size: Mapped[int] = mapped_column()


class ScenarioTag(StampedRow, Base):
    """A researcher's personal tag on a scenario (paper 5.1: personalised breakdowns); it is
    no part of the suite version, so published scenarios take them too."""

    __tablename__ = "sts_scenario_tags"
    __table_args__ = (UniqueConstraint("scenario_id", "user_id", "tag"),)

    scenario_id: Mapped[int] = mapped_column(ForeignKey("sts_scenarios.id", ondelete="CASCADE"), index=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    tag: Mapped[str] = mapped_column(String(64))


class FailureReview(Base):
    """An admin's classification of a continuation people marked a failure, with the error
    types of the paper's appendix A.3 (failures.ERROR_TYPES). One per study item; changes are
    audited."""

    __tablename__ = "sts_failure_reviews"
    __table_args__ = (UniqueConstraint("item_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    study_id: Mapped[int] = mapped_column(ForeignKey("studies.id", ondelete="CASCADE"), index=True)
    item_id: Mapped[int] = mapped_column(ForeignKey("items.id", ondelete="CASCADE"))
    error_type: Mapped[str] = mapped_column(String(32))
    note: Mapped[str] = mapped_column(Text, default="")
    reviewer_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)
