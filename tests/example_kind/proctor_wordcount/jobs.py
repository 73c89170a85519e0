"""The `wordcount.tally` job: count each item's answers and right answers into the table."""

from __future__ import annotations

from sqlalchemy import case, delete, func, select

from app.studies.models import Annotation, Item
from proctor_wordcount.models import Tally


def run_tally(session, job, progress) -> dict:
    rows = session.execute(
        select(
            Item.external_id,
            func.count(Annotation.id),
            func.coalesce(func.sum(case((Annotation.score == 1.0, 1), else_=0)), 0),
        )
        .join(Annotation, Annotation.item_id == Item.id, isouter=True)
        .where(Item.study_id == job.study_id)
        .group_by(Item.external_id)
        .order_by(Item.external_id)
    ).all()
    # Progress commits in a session of its own: report it before this session writes (on
    # SQLite a write here would hold the lock that the report waits for).
    progress(len(rows), len(rows), f"tallied {len(rows)} sentences")
    # Replace the study's tallies in the job's own transaction (committed by the core when the
    # handler returns): a failed run leaves the old ones.
    session.execute(delete(Tally).where(Tally.study_id == job.study_id))
    session.add_all(Tally(study_id=job.study_id, item=ext, answers=n, right=int(r)) for ext, n, r in rows)
    return {"items": len(rows), "answers": sum(n for _, n, _ in rows)}


def tallies(session, study_id: int) -> list[Tally]:
    return list(session.scalars(select(Tally).where(Tally.study_id == study_id).order_by(Tally.item)))
