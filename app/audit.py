"""Audit log of admin and researcher actions that change what a study reports."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import ForeignKey, String
from sqlalchemy.orm import Mapped, Session, mapped_column

from app.db import Base, utcnow


class AuditEntry(Base):
    __tablename__ = "audit_log"

    id: Mapped[int] = mapped_column(primary_key=True)
    actor_id: Mapped[int | None] = mapped_column(ForeignKey("users.id"), index=True)
    action: Mapped[str] = mapped_column(String(64), index=True)
    target_type: Mapped[str] = mapped_column(String(32))
    target_id: Mapped[str] = mapped_column(String(64))
    detail: Mapped[dict] = mapped_column(default=dict)  # type: ignore[type-arg]  # JSON (app.db)
    created_at: Mapped[datetime] = mapped_column(default=utcnow, index=True)


def record(
    session: Session, actor_id: int | None, action: str, target_type: str, target_id: object, **detail: Any
) -> AuditEntry:
    entry = AuditEntry(
        actor_id=actor_id, action=action, target_type=target_type, target_id=str(target_id), detail=detail
    )
    session.add(entry)
    return entry
