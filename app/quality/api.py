"""Quality control's JSON API (/api/v1): the admins' review queue and the audit log."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Depends, HTTPException
from pydantic import BaseModel, ConfigDict
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.audit import AuditEntry
from app.auth.deps import db, require, verify_csrf
from app.auth.models import User
from app.params import NOT_BLANK, BodyId, Id
from app.quality import service as quality
from app.studies.models import Study

router = APIRouter(prefix="/api/v1", dependencies=[Depends(verify_csrf)])
admin = require("admin")

# response_model=None: the return annotations are for mypy; FastAPI encodes the dicts as before
# (jsonable_encoder), not through a model inferred from them.


class DecisionIn(BaseModel):
    # A rejection says why (the worker is told): a reason with more than spaces.
    model_config = ConfigDict(
        json_schema_extra={
            "if": {"properties": {"decision": {"const": "reject"}}},
            "then": {"required": ["reason"], "properties": {"reason": {"pattern": NOT_BLANK}}},
        }
    )
    participant_ids: list[BodyId]
    decision: Literal["approve", "reject"]
    reason: str = ""


@router.get("/studies/{study_id}/review", tags=["quality"], response_model=None)
def review_queue(study_id: Id, session: Session = Depends(db), user: User = Depends(admin)) -> list[dict[str, Any]]:
    study = session.get(Study, study_id)
    if study is None:
        raise HTTPException(404, "no such study")
    return quality.review_queue(session, study)


@router.post("/studies/{study_id}/review", tags=["quality"], response_model=None)
def decide(
    study_id: Id, body: DecisionIn, session: Session = Depends(db), user: User = Depends(admin)
) -> dict[str, Any]:
    study = session.get(Study, study_id)
    if study is None:
        raise HTTPException(404, "no such study")
    decision = {"approve": "approved", "reject": "rejected"}.get(body.decision, body.decision)
    return {"changed": quality.decide(session, study, body.participant_ids, decision, session.merge(user), body.reason)}


@router.get("/audit", tags=["quality"], response_model=None)
def audit(session: Session = Depends(db), user: User = Depends(admin)) -> list[dict[str, Any]]:
    return [
        {
            "id": e.id,
            "actor": e.actor_id,
            "action": e.action,
            "target": f"{e.target_type}:{e.target_id}",
            "detail": e.detail,
            "at": e.created_at.isoformat(),
        }
        for e in session.scalars(select(AuditEntry).order_by(AuditEntry.id.desc()).limit(500))
    ]
