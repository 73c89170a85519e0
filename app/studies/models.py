from __future__ import annotations

from datetime import datetime
from typing import Literal, get_args

from sqlalchemy import Float, ForeignKey, Index, String, Text, UniqueConstraint, false, text, true
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base, StampedRow, utcnow

# The one list of a study's states: the API validates against the type, the services' TRANSITIONS
# are keyed by it (tests/unit/test_study_states.py).
StudyState = Literal["draft", "live", "paused", "closed"]
STUDY_STATES: tuple[str, ...] = get_args(StudyState)


class Study(StampedRow, Base):
    __tablename__ = "studies"

    slug: Mapped[str] = mapped_column(String(64), unique=True)
    title: Mapped[str] = mapped_column(String(255))
    kind: Mapped[str] = mapped_column(String(32), index=True)
    owner_id: Mapped[int] = mapped_column(ForeignKey("users.id"), index=True)
    state: Mapped[str] = mapped_column(String(16), default="draft")
    annotations_per_item: Mapped[int] = mapped_column(default=3)
    bundle_size: Mapped[int] = mapped_column(default=10)
    gold_rate: Mapped[float] = mapped_column(Float, default=0.1)
    lease_seconds: Mapped[int] = mapped_column(default=900)
    completion_code: Mapped[str] = mapped_column(String(64))
    redirect_url: Mapped[str] = mapped_column(String(1000), default="")
    consent_text: Mapped[str] = mapped_column(Text, default="")
    instructions: Mapped[str] = mapped_column(Text, default="")
    payment: Mapped[str] = mapped_column(String(100), default="")
    # Shown to workers with the consent text, each on its own line (app.studies.consent).
    contact: Mapped[str] = mapped_column(String(255), default="", server_default="")
    estimated_minutes: Mapped[int | None] = mapped_column()
    # Caps on one crowd member: bundles per platform worker id, and bundles open at once from
    # one network address (generous: a lab's participants often share one NAT address).
    max_bundles_per_worker: Mapped[int] = mapped_column(default=1, server_default="1")
    max_open_bundles_per_ip: Mapped[int] = mapped_column(default=100, server_default="100")
    # Settings that only the study's task kind reads (validated by the kind).
    kind_settings: Mapped[dict] = mapped_column(default=dict)  # type: ignore[type-arg]
    # The response field the leaderboard's per-item answers group by (the kind's
    # agreement_value(); None: the score). Read by the totals triggers (app/leaderboards/models.py).
    answer_field: Mapped[str | None] = mapped_column(String(64))
    # How the items people judge were drawn, when people judge only a random sample of them and
    # an automatic judge the rest (services.set_people_sample); None: people judge every item.
    people_sample: Mapped[dict | None] = mapped_column()  # type: ignore[type-arg]
    # Adaptive allocation (app/leaderboards/adaptive.py): items are leased by Item.priority,
    # which a periodic job sets from the ranking's open comparisons, after every item has
    # `adaptive_floor` annotations (the floor). Off: the plain order (depth first).
    adaptive: Mapped[bool] = mapped_column(default=False, server_default=false())
    adaptive_floor: Mapped[int] = mapped_column(default=1, server_default="1")
    # The comprehension check a worker passes before their first item, two attempts
    # (app/studies/comprehension.py): [{"question", "options", "answer"}, ...]; None: no check.
    comprehension: Mapped[list | None] = mapped_column()  # type: ignore[type-arg]  # JSON (app.db)
    # Auto-pause (app/leaderboards/stopping.py): the comparisons the researcher marked, pairs of
    # agents [[a, b], ...]; the sweeper pauses the live study once every one is settled, at
    # auto_paused_at. None: off.
    auto_pause: Mapped[list | None] = mapped_column()  # type: ignore[type-arg]
    auto_paused_at: Mapped[datetime | None] = mapped_column()


class Item(Base):
    __tablename__ = "items"
    __table_args__ = (
        UniqueConstraint("study_id", "external_id"),
        # The assignment engine walks this index backwards: most-annotated (but not full)
        # first, then a fixed random order, so items fill to their redundancy one by one.
        Index("ix_items_pick", "study_id", "is_gold", "n_active", "position"),
        # Adaptive allocation's order (app/leaderboards/adaptive.py), walked backwards likewise.
        Index("ix_items_priority", "study_id", "is_gold", "priority", "n_active", "position"),
        # The leaderboard totals' triggers count a cluster's items (migration 0011).
        Index("ix_items_study_cluster", "study_id", "cluster"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    study_id: Mapped[int] = mapped_column(ForeignKey("studies.id", ondelete="CASCADE"))
    external_id: Mapped[str] = mapped_column(String(255))
    payload: Mapped[dict] = mapped_column()  # type: ignore[type-arg]
    # The correct response where one is known; never sent to workers.
    reference: Mapped[dict | None] = mapped_column()  # type: ignore[type-arg]
    is_gold: Mapped[bool] = mapped_column(default=False)
    source: Mapped[str] = mapped_column(String(32), default="dataset")
    category: Mapped[str] = mapped_column(String(64), default="")
    # Items judged together for consistency (ToM: one proposition at one point).
    cluster: Mapped[str] = mapped_column(String(255), default="")
    exclusion_group: Mapped[str | None] = mapped_column(String(255))
    # The worker who wrote the item (a procedure's instructor, sent to verification): never
    # assigned it, since checking one's own work checks nothing.
    author_id: Mapped[int | None] = mapped_column(ForeignKey("users.id"))
    position: Mapped[float] = mapped_column(Float)
    # Completed plus currently leased assignments (not counting rejected ones).
    n_active: Mapped[int] = mapped_column(default=0)
    # False: outside the random sample people judge (Study.people_sample); never leased.
    for_people: Mapped[bool] = mapped_column(default=True, server_default=true())
    # Where adaptive allocation is on (Study.adaptive), higher first: set by the periodic job
    # (app/leaderboards/adaptive.py), never per request.
    priority: Mapped[float] = mapped_column(Float, default=0.0, server_default="0")


class Participant(StampedRow, Base):
    """A worker in a study: the unit an admin reviews, approves or rejects."""

    __tablename__ = "participants"
    __table_args__ = (UniqueConstraint("study_id", "worker_id"),)

    study_id: Mapped[int] = mapped_column(ForeignKey("studies.id", ondelete="CASCADE"), index=True)
    worker_id: Mapped[int] = mapped_column(ForeignKey("users.id"), index=True)
    status: Mapped[str] = mapped_column(String(16), default="pending")
    reason: Mapped[str] = mapped_column(Text, default="")
    reviewed_by: Mapped[int | None] = mapped_column(ForeignKey("users.id"))
    reviewed_at: Mapped[datetime | None] = mapped_column()


# The browser_hash of a consented bundle the researcher released (services.release_browser):
# no browser's hash (a hash is hex), so the browser that held it is refused like any other
# until the worker opens the study's link again, and the entry binds it
# (assignment._check_browser).
RELEASED = "released"


class Bundle(StampedRow, Base):
    """One task: a fixed number of item slots, some of them gold, done in order."""

    __tablename__ = "bundles"
    __table_args__ = (
        UniqueConstraint("study_id", "worker_id", "external_assignment_id"),
        Index("ix_bundles_study_ip", "study_id", "ip_hash", "finished_at"),
    )

    study_id: Mapped[int] = mapped_column(ForeignKey("studies.id", ondelete="CASCADE"), index=True)
    participant_id: Mapped[int] = mapped_column(ForeignKey("participants.id"), index=True)
    worker_id: Mapped[int] = mapped_column(ForeignKey("users.id"))
    external_assignment_id: Mapped[str] = mapped_column(String(255), default="")
    hit_id: Mapped[str] = mapped_column(String(255), default="")
    size: Mapped[int] = mapped_column()
    gold_slots: Mapped[list] = mapped_column(default=list)  # type: ignore[type-arg]
    n_done: Mapped[int] = mapped_column(default=0)
    consented_at: Mapped[datetime | None] = mapped_column()
    # The version (a hash) of the consent text the worker agreed to.
    consent_version: Mapped[str | None] = mapped_column(String(64))
    # SHA-256 of the secret in the cookie of the browser the worker consented in (RELEASED:
    # the researcher unbound it).
    browser_hash: Mapped[str | None] = mapped_column(String(64))
    # The address it was opened from, as an HMAC (a pseudonym: never the address itself).
    ip_hash: Mapped[str | None] = mapped_column(String(32))
    # The comprehension check: attempts failed, and when it was passed.
    check_failures: Mapped[int] = mapped_column(default=0, server_default="0")
    checked_at: Mapped[datetime | None] = mapped_column()
    # Spared the check: under way when the check was turned on (this task only; no pass).
    check_spared: Mapped[bool] = mapped_column(default=False, server_default=false())
    finished_at: Mapped[datetime | None] = mapped_column()


class Assignment(Base):
    __tablename__ = "assignments"
    __table_args__ = (
        UniqueConstraint("worker_id", "item_id"),
        # NULL groups never collide, so only grouped items are exclusive.
        UniqueConstraint("study_id", "worker_id", "exclusion_group"),
        Index("ix_assignments_lease", "state", "lease_expires_at"),
        # A bundle holds at most one live lease (the hot path's statements rely on it: see
        # app/studies/hotpath.py).
        Index(
            "uq_assignments_bundle_leased",
            "bundle_id",
            unique=True,
            postgresql_where=text("state = 'leased'"),
            sqlite_where=text("state = 'leased'"),
        ),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    study_id: Mapped[int] = mapped_column(ForeignKey("studies.id", ondelete="CASCADE"))
    item_id: Mapped[int] = mapped_column(ForeignKey("items.id", ondelete="CASCADE"), index=True)
    worker_id: Mapped[int] = mapped_column(ForeignKey("users.id"))
    bundle_id: Mapped[int] = mapped_column(ForeignKey("bundles.id"), index=True)
    exclusion_group: Mapped[str | None] = mapped_column(String(255))
    slot: Mapped[int] = mapped_column()
    is_gold: Mapped[bool] = mapped_column(default=False)
    # leased -> completed | expired; completed -> rejected when the worker is rejected.
    state: Mapped[str] = mapped_column(String(16), default="leased")
    leased_at: Mapped[datetime] = mapped_column(default=utcnow)
    lease_expires_at: Mapped[datetime] = mapped_column()
    completed_at: Mapped[datetime | None] = mapped_column()


class Annotation(StampedRow, Base):
    __tablename__ = "annotations"
    __table_args__ = (
        Index("ix_annotations_study_item", "study_id", "item_id"),
        Index("ix_annotations_study_worker", "study_id", "worker_id"),
    )

    assignment_id: Mapped[int] = mapped_column(ForeignKey("assignments.id"), unique=True)
    study_id: Mapped[int] = mapped_column(ForeignKey("studies.id", ondelete="CASCADE"))
    item_id: Mapped[int] = mapped_column(ForeignKey("items.id", ondelete="CASCADE"))
    worker_id: Mapped[int] = mapped_column(ForeignKey("users.id"))
    is_gold: Mapped[bool] = mapped_column(default=False)
    response: Mapped[dict] = mapped_column()  # type: ignore[type-arg]
    # Derived by the kind's scorer against the item's reference; NULL when there is none.
    score: Mapped[float | None] = mapped_column(Float)
    # Metrics a kind derives beside the score (navigation: ne, success, spl, ndtw, sdtw, ...).
    scores: Mapped[dict | None] = mapped_column()  # type: ignore[type-arg]
    duration_ms: Mapped[int] = mapped_column(default=0)
    client: Mapped[dict] = mapped_column(default=dict)  # type: ignore[type-arg]
    idempotency_key: Mapped[str] = mapped_column(String(64), unique=True)
    # Set when the worker is rejected: the response itself never changes.
    excluded: Mapped[bool] = mapped_column(default=False)
