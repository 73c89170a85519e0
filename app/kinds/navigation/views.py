"""Pages and data of the navigation kind: the building a follower walks through, and the
API route that adds panoramas to a building."""

from __future__ import annotations

from fastapi import APIRouter, Depends, File, HTTPException, Request, UploadFile
from fastapi.responses import JSONResponse
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.auth.deps import db, optional_user, require, verify_csrf
from app.auth.models import User
from app.errors import InputError
from app.kinds.navigation.environments import view
from app.kinds.navigation.models import Environment
from app.kinds.navigation.panoramas import import_panoramas, panorama_urls
from app.studies.models import Bundle, Study

# The pages' routes stay out of the API's documentation; the /api/v1 route is in it.
router = APIRouter()


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


@router.get("/env/{scan}/view.json", include_in_schema=False)
def environment_view(scan: str, request: Request, session: Session = Depends(db),
                     user: User | None = Depends(optional_user)):
    if not _may_view(request, session, user):
        raise HTTPException(403, "Only researchers and workers of a navigation study may see buildings.")
    env = session.scalar(select(Environment).where(Environment.scan == scan))
    if env is None:
        raise HTTPException(404, "No such building.")
    try:
        data = view(scan, panorama_urls(env))
    except InputError:
        raise HTTPException(404, "No such building.") from None
    # The panorama links stay valid for hours longer than a cached copy is used.
    return JSONResponse(data, headers={"Cache-Control": "private, max-age=3600"})


@router.post("/api/v1/environments/{scan}/panoramas", tags=["navigation"],
             dependencies=[Depends(verify_csrf)])
def upload_panoramas(scan: str, files: list[UploadFile] = File(...), session: Session = Depends(db),
                     user: User = Depends(require("researcher", "admin"))) -> dict:
    """Panoramas of an imported building for the follower's 360-degree view: one
    equirectangular JPEG or PNG per viewpoint (width = 2 x height), each named
    `<viewpoint>.jpg` or `.png`, as many `files` parts as needed (docs/kinds/navigation-viewer.md).
    Every file is checked before any is stored; a bad one is refused (422, field `files`)
    by name and nothing is stored. Returns {scan, stored: [viewpoints], panoramas: total}."""
    return import_panoramas(session, scan, [(f.filename, f.file) for f in files])
