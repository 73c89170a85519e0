"""Running totals for the leaderboard (issue 14; docs/data-model.md, "Leaderboard totals").

Kept by database triggers on `annotations` (migration 0011), in the same transaction as the
write, whatever statement makes it: an INSERT adds, an UPDATE of `excluded`, `score`,
`is_gold` or `response` (a worker rejected or reinstated, a kind re-scoring) or a DELETE
takes the old row out and puts the new one in. Only valid annotations count: not gold, not
excluded. Item categories and clusters are read from `items` when the annotation is counted
(they never change once a study exists).

The grain is what app.leaderboards.service.compute needs and nothing finer:
- per (study, worker, category): answers and score sum (accuracy per category);
- per (study, worker, cluster), clusters other than "": answers and right ones (score >= 1),
  and from them per (study, worker) the clusters seen whole and those all right
  (consistency: a cluster counts once the worker has seen all of it); the leaderboard reads
  only the per-worker row;
- per (item, answer value): answers, score sum and the first annotation id (the per-item
  majority, its earliest-answer tie-break, and Krippendorff's alpha / Fleiss' kappa).

`value` is "=" + the response's agreement field (Study.answer_field, the kind's
`agreement_value()`) or, for kinds without one, "=" + the score as text in full precision;
"" when the field is missing. Only equality of values matters.
"""

from __future__ import annotations

from sqlalchemy import Float, ForeignKey, Index, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base


class _PerWorker:
    """The key's first columns in each per-worker total: (study, worker). First in the table
    too (sort_order: a mixin's columns otherwise come last), as migration 0011 made them."""

    study_id: Mapped[int] = mapped_column(ForeignKey("studies.id", ondelete="CASCADE"), primary_key=True, sort_order=-1)
    worker_id: Mapped[int] = mapped_column(primary_key=True, sort_order=-1)


class WorkerCategoryTotal(_PerWorker, Base):
    __tablename__ = "lb_worker_categories"

    category: Mapped[str] = mapped_column(String(64), primary_key=True)
    n: Mapped[int] = mapped_column()
    score_sum: Mapped[float] = mapped_column(Float)


class WorkerClusterTotal(_PerWorker, Base):
    __tablename__ = "lb_worker_clusters"

    cluster: Mapped[str] = mapped_column(String(255), primary_key=True)
    n: Mapped[int] = mapped_column()
    n_right: Mapped[int] = mapped_column()


class WorkerConsistencyTotal(_PerWorker, Base):
    """Per worker: clusters answered whole (n = the cluster's non-gold items) and all right;
    moved by the triggers whenever a lb_worker_clusters row reaches or leaves its size."""

    __tablename__ = "lb_worker_consistency"

    clusters_whole: Mapped[int] = mapped_column()
    clusters_right: Mapped[int] = mapped_column()


class ItemAnswerTotal(Base):
    __tablename__ = "lb_item_answers"
    __table_args__ = (Index("ix_lb_item_answers_study_item", "study_id", "item_id"),)

    item_id: Mapped[int] = mapped_column(ForeignKey("items.id", ondelete="CASCADE"), primary_key=True)
    value: Mapped[str] = mapped_column(Text, primary_key=True)
    study_id: Mapped[int] = mapped_column(ForeignKey("studies.id", ondelete="CASCADE"))
    n: Mapped[int] = mapped_column()
    score_sum: Mapped[float] = mapped_column(Float)
    first_id: Mapped[int] = mapped_column()


class ItemSummary(Base):
    """Per item (PostgreSQL only; empty on SQLite): its answer-count pattern and the score of
    its winning answer, derived from the item's lb_item_answers rows by a statement trigger on
    that table (migration 0013), so that the majority and the agreement read one row per item
    instead of grouping every (item, answer) row per view."""

    __tablename__ = "lb_items"
    __table_args__ = (Index("ix_lb_items_study", "study_id"),)

    item_id: Mapped[int] = mapped_column(ForeignKey("items.id", ondelete="CASCADE"), primary_key=True)
    study_id: Mapped[int] = mapped_column(ForeignKey("studies.id", ondelete="CASCADE"))
    # "n:length:value," per answer with n > 0, in value order (app.leaderboards.service).
    pattern: Mapped[str] = mapped_column(Text)
    # The winner (most answers, then the earliest first answer): score_sum / n.
    score: Mapped[float] = mapped_column(Float)
