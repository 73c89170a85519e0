from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base, utcnow

ROLES = ("worker", "researcher", "admin")


# The platform of annotators whose work was loaded from an earlier study (app/studies/imports.py).
IMPORTED_PLATFORM = "imported"


class User(Base):
    __tablename__ = "users"
    __table_args__ = (UniqueConstraint("platform", "external_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    role: Mapped[str] = mapped_column(String(16), index=True)
    email: Mapped[str | None] = mapped_column(String(255), unique=True)
    name: Mapped[str] = mapped_column(String(255), default="")
    password_hash: Mapped[str | None] = mapped_column(String(255))
    # Crowd workers: the platform's own id is kept (payment needs it) but exports and the
    # leaderboard only ever show the keyed pseudonym.
    platform: Mapped[str | None] = mapped_column(String(16))
    external_id: Mapped[str | None] = mapped_column(String(255))
    pseudonym: Mapped[str | None] = mapped_column(String(32), unique=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    # A browser session carries the version it was made with; logging out moves it on, which
    # ends every session of the account (a copied cookie included).
    session_version: Mapped[int] = mapped_column(default=0, server_default="0")


class ApiToken(Base):
    __tablename__ = "api_tokens"

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(100), default="")
    # Only a hash is stored; the token is shown once when created.
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    revoked: Mapped[bool] = mapped_column(default=False)
    expires_at: Mapped[datetime | None] = mapped_column()  # None: until revoked
