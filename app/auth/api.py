"""The account's JSON API (/api/v1/tokens): a researcher's API tokens."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.auth.deps import db, require, verify_csrf
from app.auth.models import User
from app.params import Id

router = APIRouter(prefix="/api/v1", dependencies=[Depends(verify_csrf)])
researcher = require("researcher", "admin")

# response_model=None: the return annotations are for mypy; FastAPI encodes the dicts as before
# (jsonable_encoder), not through a model inferred from them.


@router.get("/tokens", tags=["account"], response_model=None)
def list_tokens(session: Session = Depends(db), user: User = Depends(researcher)) -> list[dict[str, Any]]:
    """Your API tokens (never the tokens themselves: only their names and dates)."""
    from app.auth.models import ApiToken

    return [
        {
            "id": t.id,
            "name": t.name,
            "created_at": t.created_at.isoformat(),
            "expires_at": t.expires_at.isoformat() if t.expires_at else None,
            "revoked": t.revoked,
        }
        for t in session.scalars(select(ApiToken).where(ApiToken.user_id == user.id).order_by(ApiToken.id))
    ]


@router.post("/tokens/{token_id}/revoke", tags=["account"], response_model=None)
def revoke_token(token_id: Id, session: Session = Depends(db), user: User = Depends(researcher)) -> dict[str, Any]:
    """Revoke a token (yours; an admin's: anyone's). It stops working at once."""
    from app.auth.views import revoke

    t = revoke(session, token_id, user)
    return {"id": t.id, "revoked": t.revoked}
