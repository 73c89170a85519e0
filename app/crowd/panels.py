"""What the study page's and the review page's Prolific cards show (app/crowd/views.py holds
their forms): read by app/studies and app/quality, which app/crowd/views.py itself imports."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.auth.models import User
from app.crowd import service
from app.crowd.models import BonusPayment
from app.studies.models import Study


def panel(session: Session, study: Study, user: User) -> dict[str, Any]:
    """What the study page's Prolific card shows."""
    account = service.account_of(session, user)
    return {"account": account, "study": service.platform_study(session, study)}


def review_panel(session: Session, study: Study, user: User) -> dict[str, Any] | None:
    """What the review page's Prolific card shows: the study's Prolific workers, each with
    their review here, their bonus and whether they are blocked; None when the study is not
    on Prolific."""
    row = service.platform_study(session, study)
    if row is None:
        return None
    bonuses = {
        b.worker_id: b
        for b in session.scalars(
            select(BonusPayment).where(BonusPayment.study_id == study.id, BonusPayment.platform == service.PLATFORM)
        )
    }
    blocked = service.blocked_workers(session, user)
    work = service.prolific_work(session, study)
    record = service.records(session, sorted({w for w, _, _, _ in work}))
    workers: dict[str, dict[str, Any]] = {}
    for worker, submission, status, _ in work:
        workers[worker] = {
            "record": record[worker],
            "id": worker,
            "submission": submission,
            "status": status,
            "bonus": bonuses.get(worker),
            "blocked": worker in blocked,
        }
    return {"study": row, "workers": list(workers.values()), "has_token": service.account_of(session, user) is not None}
