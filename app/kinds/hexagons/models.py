"""The Hexagons kind's tables: admins' consolidation decisions (consolidation.py)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base, utcnow


class Consolidation(Base):
    """An admin's decision on one step of a procedure where an executor's board differs from
    the instructor's (the paper's consolidation, section 4): the error class, a note, and the
    gold board as fixed (null: the instructor's board stands). One per item and step; changes
    are audited."""

    __tablename__ = "hexagons_consolidations"
    __table_args__ = (UniqueConstraint("item_id", "step"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    study_id: Mapped[int] = mapped_column(ForeignKey("studies.id", ondelete="CASCADE"), index=True)
    item_id: Mapped[int] = mapped_column(ForeignKey("items.id", ondelete="CASCADE"))
    step: Mapped[int] = mapped_column()  # 1-based, as the release numbers drawing steps
    error_class: Mapped[str] = mapped_column(String(32))
    note: Mapped[str] = mapped_column(Text, default="")
    fixed_board: Mapped[list | None] = mapped_column()
    decided_by: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    decided_at: Mapped[datetime] = mapped_column(default=utcnow)
