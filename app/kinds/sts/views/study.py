"""A study built from a published version's continuations."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Form, Request
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy.orm import Session

from app.auth.deps import db, verify_csrf
from app.auth.models import User
from app.kinds.sts import suites
from app.kinds.sts.study import MAX_AGENTS, MAX_REFERENCE
from app.kinds.sts.views.common import Place, _answers, _flashed, _version, at_version, researcher, stored_plays
from app.params import MAX_ID, NOT_BOOL, BodyId, FormText, Id, Whole
from app.studies.services import StudySettings
from app.web import back, form_number

router = APIRouter(include_in_schema=False, dependencies=[Depends(verify_csrf)])  # pages
api = APIRouter(prefix="/api/v1/sts", tags=["sts"], dependencies=[Depends(verify_csrf)])


class ReferenceIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    expert_successes: Whole = Field(0, ge=0, le=MAX_REFERENCE)
    random_failures: Whole = Field(0, ge=0, le=MAX_REFERENCE)
    # A pair study's reference pairs (an expert's success beside a random failure).
    pairs: Whole = Field(0, ge=0, le=MAX_REFERENCE)


class StudyIn(StudySettings):
    """What build_study takes, bounds included, so that the schema says what the code takes
    (issue 26.8); refused beyond it only by the stored rows (404, 409)."""

    model_config = ConfigDict(extra="forbid")
    # The built-in names the code takes (BUILTIN_AGENTS), so the schema allows no other text.
    agents: list[BodyId | Literal["expert", "random", "people"]] = Field(
        min_length=1, max_length=MAX_AGENTS, json_schema_extra={"uniqueItems": True}
    )
    reference: ReferenceIn = Field(default_factory=ReferenceIn)
    continuations: Annotated[int, Field(ge=1, le=MAX_ID), NOT_BOOL] | None = None
    approve_at: float | None = Field(None, ge=0, le=1)
    tile: Annotated[int, Field(ge=4, le=32), NOT_BOOL] | None = None
    # Side by side (pairs.py): pairs of the agents' matched continuations; `reference` is then
    # {"pairs": k}.
    pairs: bool = False
    # A side-by-side study's ratings controlled for the continuations' lengths (steps).
    control_length: bool = False


@api.post("/suites/{suite_id}/versions/{number}/study", status_code=201)
def study_from_version(
    suite_id: Id, number: Id, body: StudyIn, session: Session = Depends(db), user: User = Depends(researcher)
) -> dict:
    """A draft study of the published version n: the `agents`' stored continuations (ids or
    built-in names; the first `continuations` of each scenario, default as many as every
    scenario has) and `reference` episodes {"expert_successes": k, "random_failures": k}
    (generated now where none is stored), plus the study's settings (title, bundle_size,
    gold_rate, ...), `approve_at` and `tile`. With `pairs`, a side-by-side study: every two
    agents' matched continuations of each scenario as one item, and `reference` {"pairs": k}
    reference pairs (an expert success beside a random failure of one scenario), and with
    `control_length` its ratings controlled for the continuations' lengths."""
    from app.kinds.sts.study import build_study

    settings = StudySettings(**body.model_dump(include=set(StudySettings.model_fields)))
    with _answers():
        suite, version = _version(session, user, suite_id, number)
        _, out = build_study(
            session,
            session.merge(user),
            suite,
            version,
            settings,
            agents=body.agents,
            reference=body.reference.model_dump(exclude_defaults=True),
            continuations=body.continuations,
            approve_at=body.approve_at,
            tile=body.tile,
            pairs=body.pairs,
            control_length=body.control_length,
        )
    return out


class StudyForm(BaseModel):
    """The suite page's study form, as typed: the agents (built-in names or ids), the study's
    settings, the reference episodes (or, side by side, the reference pairs)."""

    title: str = ""
    agents: list[str] = []
    continuations: str = ""
    expert_successes: str = ""
    random_failures: str = ""
    bundle_size: str = ""
    gold_rate: str = ""
    annotations_per_item: str = ""
    approve_at: str = ""
    side_by_side: str = ""
    reference_pairs: str = ""


@router.post("/sts/suites/{suite_id}/versions/{number}/study")
def study_from_version_page(request: Request, form: Annotated[StudyForm, Form()], place: Place = Depends(at_version)):
    """The suite page's form for a study of a published version (the API's study route)."""
    from app.kinds.sts.study import build_study

    session, suite, version, number = place.session, place.suite, place.version, place.version.number
    url = f"/sts/suites/{suite.id}?version={number}#study"
    out: dict = {}
    with _flashed(request, out):
        given = {
            "title": form.title.strip() or f"{suite.name}, version {number}",
            "bundle_size": form_number(form.bundle_size, "bundle_size"),
            "gold_rate": form_number(form.gold_rate, "gold_rate", float),
            "annotations_per_item": form_number(form.annotations_per_item, "annotations_per_item"),
        }
        settings = StudySettings(**{k: v for k, v in given.items() if v is not None})
        specs = [a if a in suites.BUILTIN_AGENTS else form_number(a, "agents") for a in form.agents]
        reference = {
            k: n
            for k, n in (
                ("expert_successes", form_number(form.expert_successes, "expert_successes")),
                ("random_failures", form_number(form.random_failures, "random_failures")),
            )
            if n
        }
        pairs = bool(form.side_by_side)
        if pairs:
            n_pairs = form_number(form.reference_pairs, "reference_pairs")
            reference = {"pairs": n_pairs} if n_pairs else {}
        # A draft version's refusal (a Conflict) is shown on the page like any other.
        study, summary = build_study(
            session,
            session.merge(place.user),
            suite,
            version,
            settings,
            agents=specs,
            reference=reference,
            continuations=form_number(form.continuations, "continuations"),
            approve_at=form_number(form.approve_at, "approve_at", float),
            pairs=pairs,
        )
        noun = "pairs" if pairs else "episodes"
        return back(
            request,
            f"/studies/{study.id}",
            f"Draft study made from version {number}: {summary['items']} {noun}, {summary['reference']} of "
            f"them reference {noun}. Launch it when ready.",
        )
    return back(request, url, f"No study made: {out['error']}", "error")


# --- the human row (people.py): people play the version's scenarios -------------------------


class PlayStudyIn(StudySettings):
    model_config = ConfigDict(extra="forbid")
    tile: Annotated[int, Field(ge=4, le=32), NOT_BOOL] | None = None


@api.post("/suites/{suite_id}/versions/{number}/play-study", status_code=201)
def play_study_from_version(
    suite_id: Id, number: Id, body: PlayStudyIn, session: Session = Depends(db), user: User = Depends(researcher)
) -> dict:
    """A draft play study of the published version n: one item a scenario, which the worker
    plays by keyboard from its takeover state for at most its continuation length (the
    scenario and its context stay on the server). Its answers become continuations of the
    built-in agent "people" (POST /api/v1/sts/continuations/from-study)."""
    from app.kinds.sts.people import build_play_study

    settings = StudySettings(**body.model_dump(include=set(StudySettings.model_fields)))
    with _answers():
        suite, version = _version(session, user, suite_id, number)
        _, out = build_play_study(session, session.merge(user), suite, version, settings, tile=body.tile)
    return out


class PeopleIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    study_id: BodyId


@api.post("/continuations/from-study", status_code=201)
def people_continuations(body: PeopleIn, session: Session = Depends(db), user: User = Depends(researcher)) -> dict:
    """A scenario play study's answers as continuations of the built-in agent "people" (the
    study's owner or an admin; 404 for another researcher; 409 for a study that is not one).
    An answer stored before is skipped (`existing`), as are empty plays (`empty`); annotators
    are named by pseudonym."""
    from app.kinds.sts.people import continuations_from_study

    with _answers():
        return continuations_from_study(session, user, body.study_id)


@router.post("/sts/suites/{suite_id}/versions/{number}/play-study")
def play_study_page(
    request: Request, title: FormText = "", annotations_per_item: FormText = "", place: Place = Depends(at_version)
):
    """The suite page's button for a play study of a published version (the API's route)."""
    from app.kinds.sts.people import build_play_study

    session, suite, version, number = place.session, place.suite, place.version, place.version.number
    out: dict = {}
    with _flashed(request, out):
        given = {
            "title": title.strip() or f"{suite.name}, version {number}: people play",
            "annotations_per_item": form_number(annotations_per_item, "annotations_per_item"),
        }
        settings = StudySettings(**{k: v for k, v in given.items() if v is not None})
        study, summary = build_play_study(session, session.merge(place.user), suite, version, settings)
        return back(
            request,
            f"/studies/{study.id}",
            f"Draft play study made from version {number}: {summary['items']} scenarios to play. Launch it when "
            "ready; when people have played, store their plays as the agent people's continuations.",
        )
    return back(request, f"/sts/suites/{suite.id}?version={number}#study", f"No study made: {out['error']}", "error")


@router.post("/sts/studies/{study_id}/people")
def people_continuations_page(
    request: Request, study_id: Id, session: Session = Depends(db), user: User = Depends(researcher)
):
    """The play study page's button: the plays as people's continuations (the API's route)."""
    from app.kinds.sts.people import continuations_from_study

    return stored_plays(
        request,
        study_id,
        lambda: continuations_from_study(session, user, study_id),
        "continuations of people",
        "build a study with people among its agents",
    )
