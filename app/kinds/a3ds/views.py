"""The reference game's one route: a scene's picture, drawn once and kept in the blob store.

Open to anyone with an account and to crowd workers inside a study (their signed session): a
scene id says nothing the picture does not show, and which one is the target is never here."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Path, Query, Request
from fastapi.responses import Response

from app.auth.deps import optional_user, verify_csrf
from app.auth.models import User
from app.kinds.a3ds.render import SIZES, scene_png
from app.kinds.a3ds.scenes import N_SCENES

# Not a database id (app.params.Id starts at 1): scenes are numbered from 0.
SceneId = Annotated[int, Path(ge=0, le=N_SCENES - 1, description="scene id, 0 to 479999")]

router = APIRouter(include_in_schema=False, dependencies=[Depends(verify_csrf)])


@router.get("/a3ds/scenes/{scene_id}")
def scene_picture(request: Request, scene_id: SceneId, size: int = Query(256, ge=0, le=4096),
                  user: User | None = Depends(optional_user)) -> Response:
    if user is None and not request.session.get("crowd"):
        raise HTTPException(403, "open the study from your link, or log in")
    if size not in SIZES:
        raise HTTPException(422, f"size is one of {', '.join(map(str, SIZES))}")
    return Response(scene_png(scene_id, size), media_type="image/png",
                    headers={"Cache-Control": "private, max-age=86400"})
