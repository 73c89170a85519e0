"""The kind's one table: per item, how many people answered and how many counted right, as
the last `wordcount.tally` job found them."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base, utcnow


class Tally(Base):
    __tablename__ = "wordcount_tallies"
    __table_args__ = (UniqueConstraint("study_id", "item"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    study_id: Mapped[int] = mapped_column(ForeignKey("studies.id", ondelete="CASCADE"), index=True)
    item: Mapped[str] = mapped_column(String(255))
    answers: Mapped[int] = mapped_column()
    right: Mapped[int] = mapped_column()
    computed_at: Mapped[datetime] = mapped_column(default=utcnow)
