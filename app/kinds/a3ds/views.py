"""The reference game's routes: a scene's picture, drawn once and kept in the blob store; and
captioner runs (generation.py), for researchers and admins on their own studies.

The picture is open to anyone with an account and to crowd workers inside a study (their signed session): a
scene id says nothing the picture does not show, and which one is the target is never here."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Path, Query, Request
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field

from app.auth.deps import Managed, managing, optional_user, require, verify_csrf
from app.auth.models import User
from app.errors import InputError
from app.kinds.a3ds import generation
from app.params import BodyId, FormText
from app.runs.legacy import job_routes
from app.runs.views import section_route, start_from_page
from app.web import form_number, rate_limit
from app.kinds.a3ds.render import SIZES, scene_png
from app.kinds.a3ds.scenes import N_SCENES

# Not a database id (app.params.Id starts at 1): scenes are numbered from 0.
SceneId = Annotated[int, Path(ge=0, le=N_SCENES - 1, description="scene id, 0 to 479999")]

DRAWINGS_PER_MINUTE = 120
router = APIRouter(include_in_schema=False, dependencies=[Depends(verify_csrf)])


@router.get("/a3ds/scenes/{scene_id}")
def scene_picture(
    request: Request,
    scene_id: SceneId,
    size: int = Query(256, ge=0, le=4096),
    user: User | None = Depends(optional_user),
) -> Response:
    if user is None and not request.session.get("crowd"):
        raise HTTPException(403, "open the study from your link, or log in")
    if size not in SIZES:
        raise HTTPException(422, f"size is one of {', '.join(map(str, SIZES))}")

    def before_drawing():
        # Stored pictures cost a read; drawing one costs ~10-50 ms of CPU and blob space, and
        # any of the 480,000 ids may be asked for: so new drawings are counted, per account or
        # crowd session and per address. A worker needs two per item, a researcher a few dozen.
        who = (
            f"user:{user.id}"
            if user is not None
            else "crowd:" + ",".join(str(b) for _, b in sorted(request.session["crowd"].items()))
        )
        rate_limit(request, "a3ds-draw", DRAWINGS_PER_MINUTE, key=who)
        rate_limit(request, "a3ds-draw-address", DRAWINGS_PER_MINUTE * 4)

    return Response(
        scene_png(scene_id, size, before_drawing=before_drawing),
        media_type="image/png",
        headers={"Cache-Control": "private, max-age=86400"},
    )


# ---- captioner runs: a captioner's captions of a study's pairs become items -------------------

api = APIRouter(prefix="/api/v1/a3ds", tags=["a3ds"], dependencies=[Depends(verify_csrf)])
own_study = managing(require("researcher", "admin"), "No such study among yours.")


class GenerationIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    speaker: str | None = None
    artifact_id: BodyId | None = None
    batch_size: int = Field(generation.DEFAULT_BATCH, ge=1, le=generation.MAX_BATCH)


job_routes(
    api,
    generation.KIND_NAME,
    GenerationIn,
    """Caption every pair of a draft study (gold ones
    excepted) with a built-in `speaker` or a valid captioner model (`artifact_id`); each caption
    becomes an item named by the captioner. Follow it with GET .../generations/{job}; cancel with
    POST .../cancel.""",
)


section_route(
    router, "/a3ds/studies/{study_id}/generations", "kinds/a3ds/generation.html", generation.study_context, own_study
)


@router.post("/a3ds/studies/{study_id}/generations")
def start_generation_page(
    request: Request, captioner: FormText = "", batch_size: FormText = "", own: Managed = Depends(own_study)
):
    """The form's one captioner field: "speaker:<name>" or "artifact:<id>", or a model listener
    to judge every caption: "listener:<name>"."""
    what, _, value = captioner.partition(":")

    def params() -> dict:
        if what not in ("speaker", "artifact", "listener") or not value:
            raise InputError("choose a captioner", field="captioner")
        # ASCII digits ("²" is a digit to isdigit() and not to int()); form_number refuses past
        # int()'s 4,300 digits, and the run's own checks bound the number.
        if what == "artifact" and not (value.isascii() and value.isdigit()):
            raise InputError("artifact_id must be an integer", field="artifact_id")
        size = batch_size.strip()
        if size and not (size.isascii() and size.isdigit()):
            raise InputError("batch_size must be an integer", field="batch_size")
        return {
            "speaker": value if what == "speaker" else None,
            "artifact_id": form_number(value, "artifact_id") if what == "artifact" else None,
            "listener": value if what == "listener" else None,
            "batch_size": generation.DEFAULT_BATCH if not size else form_number(size, "batch_size"),
        }

    noun = "Listener" if what == "listener" else "Captioner"
    return start_from_page(request, own, generation.KIND_NAME, params, noun, "captioner-runs")
