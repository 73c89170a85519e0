"""The navigation kind's tables: the buildings its studies run in (a connectivity graph and, for
generated houses, a semantics sidecar; for any building, optional panoramas, in the blob store,
one row per scan), and the generation runs of its speakers (docs/kinds/navigation-generation.md).
Made under older names by the core's migrations 0002-0005; named by the kind since nav0006."""

from __future__ import annotations


from sqlalchemy import Float, ForeignKey, String, Text, UniqueConstraint, text
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base, StampedRow

ENVIRONMENT_SOURCES = ("generated", "matterport")


class Environment(StampedRow, Base):
    __tablename__ = "navigation_environments"

    scan: Mapped[str] = mapped_column(String(64), unique=True)
    # "generated" (app.kinds.navigation.house) or "matterport" (a released connectivity file).
    source: Mapped[str] = mapped_column(String(16))
    connectivity_key: Mapped[str] = mapped_column(String(255))
    semantics_key: Mapped[str | None] = mapped_column(String(255))
    n_viewpoints: Mapped[int] = mapped_column()
    # Viewpoint id -> blob key of its equirectangular panorama (app.kinds.navigation.panoramas).
    panoramas: Mapped[dict] = mapped_column(default=dict, server_default=text("'{}'"))
    # Who imported it: only they or an admin may replace it or its panoramas. None (buildings
    # from before owners, migration nav0003, or imported by the operator's CLI without --as):
    # admins only. Anyone may still read a building and run studies in it.
    owner_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))


class GenerationRun(StampedRow, Base):
    __tablename__ = "navigation_generation_runs"

    study_id: Mapped[int] = mapped_column(ForeignKey("studies.id", ondelete="CASCADE"), index=True)
    owner_id: Mapped[int | None] = mapped_column(ForeignKey("users.id"))
    speaker_artifact_id: Mapped[int] = mapped_column(ForeignKey("agent_artifacts.id"))
    listener_artifact_ids: Mapped[list] = mapped_column(default=list)
    n: Mapped[int] = mapped_column()  # samples per path (besides the inference output)
    k: Mapped[int] = mapped_column()  # listeners (0: no reranking)
    m: Mapped[int] = mapped_column()  # rollouts per listener and candidate
    metric: Mapped[str] = mapped_column(String(8))
    design: Mapped[str] = mapped_column(String(16))
    max_len: Mapped[int] = mapped_column()
    seed: Mapped[int] = mapped_column()
    batch_size: Mapped[int] = mapped_column()
    # Nucleus sampling's p for the N samples; 1.0: pure ancestral sampling (runs from before
    # the column read 1.0, migration nav0002).
    top_p: Mapped[float] = mapped_column(Float, default=1.0, server_default=text("1.0"))
    # The intended paths: [{path_id, scan, path, heading, instructions}] from the R2R file.
    paths: Mapped[list] = mapped_column(default=list)
    job_id: Mapped[int | None] = mapped_column(ForeignKey("jobs.id", ondelete="SET NULL"))
    gamma: Mapped[float | None] = mapped_column(Float)
    state: Mapped[str] = mapped_column(String(16), default="queued")


class Candidate(Base):
    """One instruction for one path: k = 0 is the inference output (greedy), 1..N samples."""

    __tablename__ = "navigation_generation_candidates"
    __table_args__ = (UniqueConstraint("run_id", "path_key", "k"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("navigation_generation_runs.id", ondelete="CASCADE"), index=True)
    path_key: Mapped[str] = mapped_column(String(255))  # f"{scan}:{path_id}"
    k: Mapped[int] = mapped_column()
    role: Mapped[str] = mapped_column(String(16))  # inference | sample
    instruction: Mapped[str] = mapped_column(Text)
    speaker_score: Mapped[float] = mapped_column(Float)  # log S(u | e*)
    listener_score: Mapped[float | None] = mapped_column(Float)  # mean over K x M rollouts
    chosen: Mapped[bool] = mapped_column(default=False)


class Rollout(Base):
    """Listener `listener` following a candidate, its m-th sampled time."""

    __tablename__ = "navigation_generation_rollouts"
    __table_args__ = (UniqueConstraint("candidate_id", "listener", "m"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    candidate_id: Mapped[int] = mapped_column(
        ForeignKey("navigation_generation_candidates.id", ondelete="CASCADE"), index=True
    )
    listener: Mapped[int] = mapped_column()
    m: Mapped[int] = mapped_column()
    path: Mapped[list] = mapped_column()  # viewpoint ids
    ndtw: Mapped[float] = mapped_column(Float)
    sdtw: Mapped[float] = mapped_column(Float)
    success: Mapped[bool] = mapped_column()
