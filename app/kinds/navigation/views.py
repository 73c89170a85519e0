"""Pages and data of the navigation kind: the building a follower walks through."""

from __future__ import annotations

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import JSONResponse
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.auth.deps import db, optional_user
from app.auth.models import User
from app.errors import InputError
from app.kinds.navigation.environments import view
from app.kinds.navigation.models import Environment
from app.studies.models import Bundle, Study

router = APIRouter(include_in_schema=False)


def _may_view(request: Request, session: Session, user: User | None) -> bool:
    """Researchers and admins; a crowd worker whose session entered a navigation study."""
    if user is not None and user.role in ("researcher", "admin"):
        return True
    bundle_ids = [b for b in request.session.get("crowd", {}).values() if isinstance(b, int)]
    if not bundle_ids:
        return False
    return bool(session.scalar(
        select(func.count()).select_from(Bundle).join(Study, Study.id == Bundle.study_id)
        .where(Bundle.id.in_(bundle_ids), Study.kind == "navigation")))


@router.get("/env/{scan}/view.json")
def environment_view(scan: str, request: Request, session: Session = Depends(db),
                     user: User | None = Depends(optional_user)):
    if not _may_view(request, session, user):
        raise HTTPException(403, "Only researchers and workers of a navigation study may see buildings.")
    if session.scalar(select(Environment.id).where(Environment.scan == scan)) is None:
        raise HTTPException(404, "No such building.")
    try:
        data = view(scan)
    except InputError:
        raise HTTPException(404, "No such building.") from None
    return JSONResponse(data, headers={"Cache-Control": "private, max-age=3600"})
