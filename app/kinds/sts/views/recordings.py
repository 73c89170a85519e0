"""Recordings: uploaded, recorded by the expert, or stored from a play study's plays; and the play
study's two routes (the grid a worker plays on, and the researcher's preview of it)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, File, Form, HTTPException, Query, Request, UploadFile
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy.orm import Session

from app.auth.deps import db, managed_study, verify_csrf
from app.auth.models import User
from app.kinds.sts import play, suites
from app.kinds.sts.env import get_simulator
from app.kinds.sts.views.common import Count, _answers, _flashed, researcher, stored_plays
from app.params import MAX_ID, NOT_BOOL, UPLOAD, BodyId, FormText, Id, OneOf
from app.studies.models import Assignment, Item, Study
from app.studies.views import crowd_bundle
from app.web import back, form_number, rate_limit, read_upload

router = APIRouter(include_in_schema=False, dependencies=[Depends(verify_csrf)])  # pages
api = APIRouter(prefix="/api/v1/sts", tags=["sts"], dependencies=[Depends(verify_csrf)])


class ExpertForm(BaseModel):
    """The suites page's expert recordings, as typed: a BabyAI level, its seeds, a step limit."""

    level: str = ""
    seeds: str = ""
    max_steps: str = ""


@api.post("/recordings", status_code=201)
async def upload_recordings(
    file: UploadFile = UPLOAD, session: Session = Depends(db), user: User = Depends(researcher)
) -> dict:
    """Recordings as JSONL (one {id?, level, seed, mission, actions, actor?} a line; see
    docs/kinds/sts.md). Every line is replayed; the first bad one is refused (422) with its
    line and field, and nothing is stored."""
    data = await read_upload(file)
    rows = suites.store_recordings(session, session.merge(user), data)
    return {"created": len(rows), "recordings": [suites.recording_dict(r) for r in rows]}


class ExpertIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    level: Annotated[str, OneOf(lambda: get_simulator().levels())]
    seeds: list[Count] = Field(min_length=1, max_length=suites.MAX_SEEDS)
    max_steps: Annotated[int, Field(ge=1, le=MAX_ID), NOT_BOOL] | None = None


@api.post("/recordings/expert", status_code=201)
def record_expert(body: ExpertIn, session: Session = Depends(db), user: User = Depends(researcher)) -> dict:
    """The BabyAI expert plays `level` from each seed on the server; each game is stored as a
    recording with the id "expert:<level>:<seed>" (a seed recorded before is reused)."""
    rows, new = suites.expert_recordings(session, session.merge(user), body.level, body.seeds, body.max_steps)
    return {"created": new, "recordings": [suites.recording_dict(r) for r in rows]}


class FromStudyIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    study_id: BodyId
    only_successes: bool = False


@api.post("/recordings/from-study", status_code=201)
def record_plays(body: FromStudyIn, session: Session = Depends(db), user: User = Depends(researcher)) -> dict:
    """A play study's answers as recordings of the study owner's (the owner or an admin; 404
    for another researcher): each under "play:<study>:<item>:<pseudonym>" with the actor
    "human:<pseudonym>". Plays stored before are skipped (counted in `existing`), as are empty
    plays and, with `only_successes`, those that did not succeed (`failed`)."""
    with _answers():
        return suites.play_recordings(session, user, body.study_id, only_successes=body.only_successes)


@api.get("/recordings")
def list_recordings(session: Session = Depends(db), user: User = Depends(researcher)) -> dict:
    return {"recordings": [suites.recording_dict(r) for r in suites.recordings_of(session, user)]}


# A play item's actions so far, as minigrid's numbers ("2,2,0").
Actions = Annotated[str, Query(max_length=play.MAX_ACTIONS_TEXT)]


@api.get("/play/{slug}/{assignment_id}")
def play_state(
    request: Request, slug: str, assignment_id: Id, actions: Actions = "", session: Session = Depends(db)
) -> dict:
    """A play item's grid after `actions`, for the crowd worker whose task holds the assignment
    (their session, as for /api/v1/crowd/{slug}/next): the step, the level's step limit,
    whether the episode ended and in success, and the frame as a PNG data URL. The page never
    holds the seed: it sends its actions and gets the picture."""
    study, bundle = crowd_bundle(request, session, slug)
    a = session.get(Assignment, assignment_id)
    item = session.get(Item, a.item_id) if a is not None and a.bundle_id == bundle.id else None
    return _grid(request, f"bundle:{bundle.id}", study, item, actions, "no such mission in your task")


@api.get("/preview/{study_id}/{item_id}")
def preview_play_state(
    request: Request,
    study_id: Id,
    item_id: Id,
    actions: Actions = "",
    session: Session = Depends(db),
    user: User = Depends(researcher),
) -> dict:
    """play_state for the study's owner (or an admin) previewing a play item
    (app.studies.preview): the same grid, with no task behind it and nothing stored."""
    study = managed_study(session, study_id, user)
    item = session.get(Item, item_id)
    return _grid(request, f"preview:{user.id}", study, item, actions, "no such mission in this study")


def _grid(request: Request, limit_key: str, study: Study, item: Item | None, actions: str, missing: str) -> dict:
    """The grid of the study's play item after `actions`, at most play.STATES_PER_MINUTE a
    minute per `limit_key`; 404 (`missing`) for an item that is not one."""
    rate_limit(request, "sts-play", play.STATES_PER_MINUTE, key=limit_key)
    if item is None or item.study_id != study.id or study.kind != suites.KIND_NAME or not play.is_play(item.payload):
        raise HTTPException(404, missing)
    return play.state(item.payload, play.parse_actions(actions))


@router.post("/sts/recordings")
async def upload_recordings_page(
    request: Request, file: UploadFile = File(None), session: Session = Depends(db), user: User = Depends(researcher)
):
    out: dict = {}
    with _flashed(request, out):
        rows = suites.store_recordings(session, session.merge(user), await read_upload(file))
        return back(request, "/sts/suites", f"Stored {len(rows)} recordings.")
    return back(request, "/sts/suites", f"Nothing stored: {out['error']}", "error")


@router.post("/sts/recordings/expert")
def record_expert_page(
    request: Request,
    form: Annotated[ExpertForm, Form()],
    session: Session = Depends(db),
    user: User = Depends(researcher),
):
    out: dict = {}
    with _flashed(request, out):
        rows, new = suites.expert_recordings(
            session,
            session.merge(user),
            form.level,
            suites.parse_seeds(form.seeds),
            form_number(form.max_steps, "max_steps"),
        )
        return back(
            request, "/sts/suites", f"The expert played {len(rows)} seeds of {form.level} ({new} new recordings)."
        )
    return back(request, "/sts/suites", f"Nothing stored: {out['error']}", "error")


@router.post("/sts/studies/{study_id}/recordings")
def record_plays_page(
    request: Request,
    study_id: Id,
    only_successes: FormText = "",
    session: Session = Depends(db),
    user: User = Depends(researcher),
):
    """The study page's button: the plays as recordings (as POST /api/v1/sts/recordings/from-study)."""
    return stored_plays(
        request,
        study_id,
        lambda: suites.play_recordings(session, user, study_id, only_successes=bool(only_successes)),
        "recordings",
        "mine them on a suite's page",
    )
