"""What Proctor keeps of a researcher's work on a crowd platform: their account (the API token,
sealed), each study's counterpart there, and every bonus from its intent to its payment."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base, StampedRow, utcnow


class CrowdAccount(Base):
    """A researcher's API token on a platform, sealed with a key derived from SECRET_KEY
    (app/crowd/sealed.py): the database alone does not give it away."""

    __tablename__ = "crowd_accounts"
    __table_args__ = (UniqueConstraint("user_id", "platform"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    platform: Mapped[str] = mapped_column(String(16))
    token_sealed: Mapped[str] = mapped_column(Text)
    # Who the platform says the token belongs to (its users/me), when it was stored.
    account_name: Mapped[str] = mapped_column(String(255), default="")
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    # The platform's id of this researcher's block list (a participant group on Prolific), made
    # with the first worker blocked; studies made afterwards exclude its members.
    block_group_id: Mapped[str | None] = mapped_column(String(64))
    # The allow list (a participant group on Prolific) and the rule that picks its members from
    # the workers' records here (service.ALLOW_RULE's keys); studies made afterwards admit only them.
    allow_group_id: Mapped[str | None] = mapped_column(String(64))
    allow_rule: Mapped[dict | None] = mapped_column()  # type: ignore[type-arg]  # JSON (app.db)
    # Who is on the allow list as last kept (sorted Prolific ids): the sweeper's round
    # (service.refresh_allow_lists) calls Prolific only when the rule picks others now.
    allow_members: Mapped[list | None] = mapped_column()  # type: ignore[type-arg]  # JSON (app.db)
    # The secret the platform signs its hooks with (sealed like the token), once subscribed.
    hook_secret_sealed: Mapped[str | None] = mapped_column(Text)


class PlatformStudy(StampedRow, Base):
    """A Proctor study's study on a platform: its id there and what it was made with."""

    __tablename__ = "platform_studies"
    __table_args__ = (UniqueConstraint("study_id", "platform"),)

    study_id: Mapped[int] = mapped_column(ForeignKey("studies.id", ondelete="CASCADE"), index=True)
    platform: Mapped[str] = mapped_column(String(16))
    external_id: Mapped[str] = mapped_column(String(64))
    status: Mapped[str] = mapped_column(String(32), default="")
    reward_cents: Mapped[int] = mapped_column()
    places: Mapped[int] = mapped_column()
    # The platform's own figure, fees and tax included, when the study was made.
    total_cost_cents: Mapped[int | None] = mapped_column()
    created_by: Mapped[int] = mapped_column(ForeignKey("users.id"))


class CrowdBlock(StampedRow, Base):
    """A worker a researcher blocked on a platform (from the review page): a member of the
    block list there, kept here to show it and to add each worker once."""

    __tablename__ = "crowd_blocks"
    __table_args__ = (UniqueConstraint("user_id", "platform", "worker_id"),)

    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    platform: Mapped[str] = mapped_column(String(16))
    worker_id: Mapped[str] = mapped_column(String(255))  # the platform's id of the worker
    study_id: Mapped[int | None] = mapped_column(ForeignKey("studies.id", ondelete="SET NULL"))  # seen in
    reason: Mapped[str] = mapped_column(Text, default="")


# A bonus's states, in order. `paying` is written before the pay call goes out: a bonus found
# there after a crash or a lost answer may have been paid, so it is never paid again until the
# platform shows the payment (then `paid`).
BONUS_STATES = ("intent", "created", "paying", "paid")


class BonusPayment(Base):
    """One bonus to one worker, paid at most once whatever is retried: the caller's key names
    it; the platform's id of the bonus is kept once made."""

    __tablename__ = "bonus_payments"
    __table_args__ = (UniqueConstraint("study_id", "platform", "key"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    study_id: Mapped[int] = mapped_column(ForeignKey("studies.id", ondelete="CASCADE"), index=True)
    platform: Mapped[str] = mapped_column(String(16))
    key: Mapped[str] = mapped_column(String(64))
    worker_id: Mapped[str] = mapped_column(String(255))  # the platform's id of the worker
    submission_id: Mapped[str] = mapped_column(String(255))  # the platform's id of their work
    amount_cents: Mapped[int] = mapped_column()
    reason: Mapped[str] = mapped_column(Text, default="")
    state: Mapped[str] = mapped_column(String(16), default="intent")
    external_id: Mapped[str | None] = mapped_column(String(64))  # the platform's id of the bonus
    # How many bonuses the platform showed on the submission before this one: a retry that finds
    # more (this amount among them) knows the pay call went through.
    paid_before: Mapped[int | None] = mapped_column()
    created_by: Mapped[int] = mapped_column(ForeignKey("users.id"))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    paid_at: Mapped[datetime | None] = mapped_column()
