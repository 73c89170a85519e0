"""Pages and API of the Hexagons kind.

Description and verification: researchers and admins, each on their own studies (another's is
404). Consolidation (consolidation.py, abstraction.py): admins only. The queue of steps where an
executor disagreed with the instructor; one step's boards side by side with a form to
classify the error, fix the gold board and label the step's abstraction. Executor runs
(generation.py): researchers and admins, on their own studies."""

from __future__ import annotations

import json
from dataclasses import dataclass
from collections.abc import Callable
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Form, HTTPException, Request, Response
from fastapi.responses import RedirectResponse
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app import jsonsafe
from app.auth.deps import Managed, RoleCheck, db, managed_study, managing, require, verify_csrf
from app.auth.models import User
from app.errors import InputError
from app.kinds.hexagons import generation
from app.params import BodyId, FormText, Id
from app.runs.legacy import job_routes
from app.runs.views import section_route, start_from_page
from app.studies.models import Item, Study
from app.web import back, flash, form_number, render

KIND_NAME = "hexagons"
# The pages' routes stay out of the API's documentation; the /api/v1 routes are in it.
router = APIRouter(include_in_schema=False, dependencies=[Depends(verify_csrf)])
api = APIRouter(prefix="/api/v1/hexagons", tags=["hexagons"], dependencies=[Depends(verify_csrf)])


class TargetForm(BaseModel):
    """A description study's new target, as typed: its id, board (JSON) and category."""

    target_id: str = ""
    board: str = ""
    category: str = ""


researcher = require("researcher", "admin")
own_study = managing(researcher, "No such study among yours.")


def _only_hex(study: Study) -> Study:
    if study.kind != KIND_NAME:
        raise HTTPException(404, "not a Hexagons study")
    return study


def _hex_study(session: Session, study_id: int, user: User) -> Study:
    return _only_hex(managed_study(session, study_id, user, "No such study among yours."))


def _hex_pages(check: RoleCheck) -> Callable[..., Managed]:
    """The pages' dependency: managing(), for a Hexagons study only (404 for another kind's)."""
    own = managing(check, "No such study among yours.")

    def dep(loaded: Managed = Depends(own)) -> Managed:
        _only_hex(loaded.study)
        return loaded

    return dep


own_hex = _hex_pages(researcher)


# ---- description and verification studies (description.py, verification.py) -------------------

Colour = Annotated[int, Field(ge=0, le=7)]


class TargetIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str = Field(min_length=1, max_length=200)
    board: list[Colour] = Field(min_length=180, max_length=180)
    category: str = Field("", max_length=64)


class VerificationIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    title: str = Field("", max_length=255)


def _execution_study(session: Session, study_id: int, user: User) -> Study:
    return _executing(_hex_study(session, study_id, user))


def _executing(study: Study) -> Study:
    from app.kinds.hexagons.verification import mode

    if mode(study) != "execution":
        raise InputError("a description study has no verifiers: verify its procedures first", field="study")
    return study


@api.post("/studies/{study_id}/targets", status_code=201)
def add_target(study_id: Id, body: TargetIn, session: Session = Depends(db), user: User = Depends(researcher)) -> dict:
    """Add a target image (a board of 180 colour codes) to a draft description study."""
    from app.kinds.hexagons.description import add_target as add

    study = _hex_study(session, study_id, user)
    item = add(session, study, user, body.id, body.board, body.category)
    total = session.scalar(select(func.count()).select_from(Item).where(Item.study_id == study.id))
    return {"item": item, "id": body.id.strip(), "targets": total}


@api.post("/studies/{study_id}/verification", status_code=201)
def start_verification(
    study_id: Id, body: VerificationIn | None = None, session: Session = Depends(db), user: User = Depends(researcher)
) -> dict:
    """Send the description study's procedures not yet verified to a new draft execution study
    with two verifiers per procedure, who never see the image."""
    from app.kinds.hexagons.verification import make_verification_study

    study = _hex_study(session, study_id, user)
    new = make_verification_study(session, study, session.merge(user), body.title if body else "")
    n = session.scalar(select(func.count()).select_from(Item).where(Item.study_id == new.id))
    return {"study": new.id, "slug": new.slug, "procedures": n, "state": new.state}


@api.get("/studies/{study_id}/verification")
def verification_report(study_id: Id, session: Session = Depends(db), user: User = Depends(researcher)) -> dict:
    """Per procedure and step: the agreement tag (A, V1, V2, VV, F) and the (I-V1, I-V2, V1-V2)
    board-based F1 scores, once two verifiers answered (null before)."""
    from app.kinds.hexagons.verification import report

    return report(session, _execution_study(session, study_id, user))


@api.get(
    "/studies/{study_id}/verification.jsonl",
    response_class=Response,
    responses={200: {"content": {"application/x-ndjson": {}}}},
)
def verification_export(study_id: Id, session: Session = Depends(db), user: User = Depends(researcher)):
    """The procedures in the released Hexagons JSONL, with agreement tags and scores where two
    verifiers answered ("None" where not yet): `proctor hexagons score --gold` reads it."""
    from app.kinds.hexagons.verification import export_jsonl

    study = _execution_study(session, study_id, user)
    return Response(
        export_jsonl(session, study),
        media_type="application/x-ndjson",
        headers={"Content-Disposition": f'attachment; filename="{study.slug}-procedures.jsonl"'},
    )


def _targets_page(request: Request, study: Study, session: Session, status_code: int = 200, **ctx):
    n = session.scalar(select(func.count()).select_from(Item).where(Item.study_id == study.id))
    return render(
        request, "kinds/hexagons/description_targets.html", status_code=status_code, study=study, targets=n, **ctx
    )


@router.get("/hexagons/studies/{study_id}/targets")
def targets_page(request: Request, own: Managed = Depends(own_hex)):
    return _targets_page(request, own.study, own.session)


@router.post("/hexagons/studies/{study_id}/targets")
def add_target_page(request: Request, form: Annotated[TargetForm, Form()], own: Managed = Depends(own_hex)):
    from app import jsonsafe
    from app.kinds.hexagons.description import add_target as add

    session, study = own.session, own.study
    try:
        try:
            cells = jsonsafe.loads(form.board) if form.board.strip() else None
        except json.JSONDecodeError:
            raise InputError("the board is not valid JSON", field="board") from None
        add(session, study, own.user, form.target_id, cells, form.category)
    except InputError as exc:
        session.rollback()
        return _targets_page(
            request,
            study,
            session,
            status_code=422,
            error=str(exc),
            form=form.model_dump(),
        )
    flash(request, f"Target {form.target_id.strip()!r} added.")
    return RedirectResponse(f"/hexagons/studies/{study.id}/targets", status_code=303)


@router.post("/hexagons/studies/{study_id}/verification")
def start_verification_page(request: Request, title: FormText = "", own: Managed = Depends(own_hex)):
    from app.kinds.hexagons.verification import make_verification_study

    new = make_verification_study(own.session, own.study, own.session.merge(own.user), title)
    flash(request, "Verification study created with the procedures: launch it when ready.")
    return RedirectResponse(f"/studies/{new.id}", status_code=303)


@router.get("/hexagons/studies/{study_id}/verification")
def verification_page(request: Request, own: Managed = Depends(own_hex)):
    from app.kinds.hexagons.verification import report

    study = _executing(own.study)
    return render(request, "kinds/hexagons/verification.html", study=study, report=report(own.session, study))


# --- consolidation: admins classify disagreements, fix gold, label abstraction ----------------

admin_only = require("admin")


class LabelIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    level: int | None = None
    mechanisms: list[str] = Field(default=[], max_length=16)


class DecisionIn(BaseModel):
    """Any of: a decision (error_class, note, board: the fixed gold board or null; a null
    error class clears the decision), an abstraction label, or adopt_majority."""

    model_config = ConfigDict(extra="forbid")
    error_class: str | None = Field(default=None, max_length=32)
    note: str = Field(default="", max_length=2000)
    board: list[int] | None = Field(default=None, max_length=180)
    abstraction: LabelIn | None = None
    adopt_majority: bool = False


def _guides() -> dict:
    from app.kinds.hexagons.abstraction import LEVELS, MECHANISMS
    from app.kinds.hexagons.consolidation import ERROR_CLASSES

    return {"error_classes": ERROR_CLASSES, "levels": LEVELS, "mechanisms": MECHANISMS}


# The consolidation routes' dependency: an admin, on a Hexagons study.
own_consolidation = _hex_pages(admin_only)


@dataclass(frozen=True)
class StepAt:
    """What a step's routes load first: an admin's session and account, the Hexagons study,
    and the item and step at the path."""

    session: Session
    user: User
    study: Study
    item_id: int
    step: int

    @property
    def page(self) -> str:
        return f"/hexagons/studies/{self.study.id}/consolidation/{self.item_id}/{self.step}"


def at_step(item_id: Id, step: Id, own: Managed = Depends(own_consolidation)) -> StepAt:
    return StepAt(own.session, own.user, own.study, item_id, step)


def _step_view(at: StepAt) -> dict:
    from app.kinds.hexagons.consolidation import NotFound, step_view

    try:
        return step_view(at.session, at.study, at.item_id, at.step)
    except NotFound as exc:
        raise HTTPException(404, str(exc)) from None


@api.get("/studies/{study_id}/consolidation")
def consolidation_queue(own: Managed = Depends(own_consolidation)) -> dict:
    """The steps an executor disagreed on (disputed first, decided last), with the error
    classes, abstraction levels and mechanisms to label them with."""
    from app.kinds.hexagons.consolidation import queue

    g = _guides()
    return {
        "error_classes": g["error_classes"],
        "levels": {k: n for k, (n, _) in g["levels"].items()},
        "mechanisms": list(g["mechanisms"]),
        "steps": queue(own.session, own.study),
    }


@api.get("/studies/{study_id}/consolidation/{item_id}/{step}")
def consolidation_step(at: StepAt = Depends(at_step)) -> dict:
    """One step: the instruction, the boards before and after (instructor, each executor, with
    the tiles that differ), the gold board, the decision and the abstraction labels."""
    return _step_view(at)


@api.put("/studies/{study_id}/consolidation/{item_id}/{step}")
def decide_step(body: DecisionIn, at: StepAt = Depends(at_step)) -> dict:
    """Decide a step ({"error_class", "note", "board"}), label its abstraction ({"abstraction":
    {"level", "mechanisms"}} or {"adopt_majority": true}), or both; audited."""
    from app.kinds.hexagons import consolidation

    session, study, user, item_id, step = at.session, at.study, at.user, at.item_id, at.step
    sent = body.model_fields_set
    labelled = "abstraction" in sent or body.adopt_majority
    if "error_class" not in sent and not labelled:
        raise InputError("send an error_class, an abstraction label or adopt_majority", field="error_class")
    out: dict = {}
    try:  # both or neither: one commit
        if "error_class" in sent:
            out.update(
                consolidation.decide(
                    session, study, item_id, step, body.error_class, body.note, body.board, user, commit=False
                )
            )
        if labelled:
            value = body.abstraction.model_dump() if body.abstraction else None
            out.update(
                consolidation.label(session, study, item_id, step, value, user, adopt=body.adopt_majority, commit=False)
            )
    except consolidation.NotFound as exc:
        session.rollback()
        raise HTTPException(404, str(exc)) from None
    except InputError:
        session.rollback()
        raise
    session.commit()
    return out


@router.get("/hexagons/studies/{study_id}/consolidation")
def consolidation_page(request: Request, own: Managed = Depends(own_consolidation)):
    from app.kinds.hexagons.consolidation import queue

    rows = queue(own.session, own.study)
    return render(request, "kinds/hexagons/consolidation.html", user=own.user, study=own.study, rows=rows, **_guides())


@router.get("/hexagons/studies/{study_id}/consolidation/{item_id}/{step}")
def consolidation_step_page(request: Request, at: StepAt = Depends(at_step)):
    from app.kinds.hexagons.board import layout

    return render(
        request,
        "kinds/hexagons/consolidation_step.html",
        user=at.user,
        study=at.study,
        view=_step_view(at),
        layout=layout(),
        **_guides(),
    )


class DecisionForm(BaseModel):
    """The step page's decision, as typed: `board` is the fixed gold board as JSON (blank: none)."""

    error_class: str = ""
    note: str = ""
    board: str = ""


@router.post("/hexagons/studies/{study_id}/consolidation/{item_id}/{step}")
def decide_step_page(request: Request, form: Annotated[DecisionForm, Form()], at: StepAt = Depends(at_step)):
    """The step page's decision form."""
    from app.kinds.hexagons import consolidation

    try:
        try:
            fixed = jsonsafe.loads(form.board) if form.board.strip() else None
        except ValueError:
            raise InputError("board is not valid JSON", field="board") from None
        out = consolidation.decide(
            at.session, at.study, at.item_id, at.step, form.error_class or None, form.note, fixed, at.user
        )
    except consolidation.NotFound as exc:
        raise HTTPException(404, str(exc)) from None
    except InputError as exc:
        return back(request, at.page, f"Not saved: {exc}", "error")
    said = out["error_class"] or "decision cleared"
    if out["rescored"]:
        said += f"; gold board changed, {out['rescored']} executions re-scored"
    return back(request, at.page, f"Step {at.step}: {said}.")


class LabelForm(BaseModel):
    """The step page's abstraction, as typed: a level and mechanisms, or `adopt` (a button)."""

    level: str = ""
    mechanisms: list[str] = []
    adopt: str = ""


@router.post("/hexagons/studies/{study_id}/consolidation/{item_id}/{step}/abstraction")
def label_step_page(request: Request, form: Annotated[LabelForm, Form()], at: StepAt = Depends(at_step)):
    """The step page's abstraction form: a level and mechanisms by hand, or (button `adopt`)
    the executors' majority."""
    from app.kinds.hexagons import consolidation

    level, adopt = form.level.strip(), bool(form.adopt)
    try:
        # One ASCII digit: "²" is a digit to isdigit() and not to int(), which refuses 5,000 digits.
        if level and not (level.isascii() and level.isdigit() and len(level) == 1):
            raise InputError("level must be 0, 1, 2 or 3", field="level")
        value = {"level": int(level) if level else None, "mechanisms": form.mechanisms}
        out = consolidation.label(at.session, at.study, at.item_id, at.step, value, at.user, adopt=adopt)
    except consolidation.NotFound as exc:
        raise HTTPException(404, str(exc)) from None
    except InputError as exc:
        return back(request, at.page, f"Not saved: {exc}", "error")
    lv = out["abstraction"]["level"]
    return back(
        request,
        at.page,
        f"Step {at.step}: abstraction level {'none' if lv is None else lv}"
        + (" (the executors' majority)" if adopt else "")
        + ".",
    )


# ---- executor runs (issue 12 C): an executor's boards for a study's procedures ----------------


class GenerationIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    artifact_id: BodyId  # the executor to run (a valid Hexagons executor artifact)
    agent_id: BodyId | None = None
    on: Literal[generation.ONS] = "gold"
    batch_size: int = Field(generation.DEFAULT_BATCH, ge=1, le=generation.MAX_BATCH)


job_routes(
    api,
    generation.KIND_NAME,
    GenerationIn,
    """Run an executor artifact over the study's
    procedures (gold ones excepted), every step from the gold board before it (`on: gold`, the
    default) or from its own previous board (`on: own`); its boards become the outputs of
    `agent_id` (default: the artifact's agent), replacing that agent's earlier ones. Follow it
    with GET .../generations/{job}; cancel with POST .../cancel.""",
)


section_route(
    router,
    "/hexagons/studies/{study_id}/generations",
    "kinds/hexagons/generation.html",
    generation.study_context,
    own_study,
)


@router.post("/hexagons/studies/{study_id}/generations")
def start_generation_page(
    request: Request,
    artifact_id: FormText = "",
    agent_id: FormText = "",
    on: str = Form("gold"),
    batch_size: FormText = "",
    own: Managed = Depends(own_study),
):
    def params() -> dict:
        return {
            "artifact_id": form_number(artifact_id, "artifact_id"),
            "agent_id": form_number(agent_id, "agent_id"),
            "on": on,
            "batch_size": form_number(batch_size, "batch_size") or generation.DEFAULT_BATCH,
        }

    return start_from_page(request, own, generation.KIND_NAME, params, "Executor", "executor-runs")


# ---- end of executor runs ---------------------------------------------------------------------
