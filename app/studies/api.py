"""The studies' JSON API (/api/v1): studies, their items, state and progress, earlier
annotations, exports and jobs. Documented at /openapi.json."""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal, get_args

from fastapi import APIRouter, Depends, Form, HTTPException, Query, Request, UploadFile
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import select
from sqlalchemy.orm import Session

from app import jobs, jsonsafe
from app.auth.deps import db, managed_study, require, verify_csrf
from app.auth.models import User
from app.errors import InputError
from app.kinds import all_kinds, default_kind, get_kind
from app.params import MAX_ID, NOT_BLANK, NOT_BOOL, UPLOAD, FormText, Id, Whole
from app.storage import get_store
from app.studies import assignment, services
from app.studies.services import MIN_SAMPLE_WIDTH
from app.studies.models import Item, Study, StudyState
from app.studies.views import kind_options
from app.web import read_upload

router = APIRouter(prefix="/api/v1", dependencies=[Depends(verify_csrf)])
researcher = require("researcher", "admin")

# response_model=None where a route has none: the return annotations are for mypy; FastAPI
# encodes the dicts as before (jsonable_encoder), not through a model inferred from them.


class StudyOut(BaseModel):
    id: int
    slug: str
    title: str
    kind: str
    state: str
    annotations_per_item: int
    bundle_size: int
    gold_rate: float
    lease_seconds: int
    completion_code: str
    max_bundles_per_worker: int
    max_open_bundles_per_ip: int
    # Adaptive allocation (app/leaderboards/adaptive.py): on or off, and its floor.
    adaptive: bool
    adaptive_floor: int
    # The kind's own settings (navigation: likert questions, baseline speaker, speakers).
    kind_settings: dict[str, Any] = {}
    # The comprehension check before the first item, its right answers included (the
    # researcher's view; workers never see them): [{"question", "options", "answer"}] or null.
    comprehension: list[dict[str, Any]] | None = None
    entry_path: str


def _out(study: Study) -> StudyOut:
    return StudyOut(
        **{k: getattr(study, k) for k in StudyOut.model_fields if k != "entry_path"}, entry_path=f"/s/{study.slug}"
    )


def _study(session: Session, study_id: int, user: User) -> Study:
    return managed_study(session, study_id, user)


@router.get("/studies", response_model=list[StudyOut], tags=["studies"])
def list_studies(session: Session = Depends(db), user: User = Depends(researcher)) -> list[StudyOut]:
    q = select(Study).order_by(Study.id)
    if user.role != "admin":
        q = q.where(Study.owner_id == user.id)
    return [_out(s) for s in session.scalars(q)]


def _settings_schema() -> dict[str, Any]:
    """StudySettings' own JSON schema, a title with something besides spaces (issue 26.8)."""
    schema = services.StudySettings.model_json_schema()
    schema["properties"]["title"]["pattern"] = NOT_BLANK
    return schema


# The settings field is JSON text of a StudySettings object: the schema says so (issue 26.8),
# as JSON Schema's contentSchema. Checked together, beyond it: adaptive allocation needs a kind
# that ranks agents and a floor within the annotations per item.
SETTINGS = Form(
    ...,
    json_schema_extra={
        "contentMediaType": "application/json",
        "minLength": 2,
        "contentSchema": _settings_schema(),
        "description": "The study's settings as a JSON object: title (required), bundle_size, gold_rate, "
        "annotations_per_item, ... (the schema lists them)",
    },
)


@router.post("/studies", response_model=StudyOut, status_code=201, tags=["studies"])
async def create_study(
    request: Request,
    file: UploadFile = UPLOAD,
    settings: str = SETTINGS,
    kind: FormText = "",
    format: FormText = "",
    session: Session = Depends(db),
    user: User = Depends(researcher),
) -> StudyOut:
    """Create a draft study from an item upload. `kind` (default: the first installed kind,
    `GET /api/v1/kinds` lists them) and its `format`; the kind's own options are further form
    fields, listed per kind by `GET /api/v1/kinds` (for `tom`: `random_yes_rate`, the training
    split's share of Yes answers for the random baseline, and `gold_count`; for `navigation`:
    `speaker`, `baseline`, `likert`, `qc_instruction`, `control_length`; docs/kinds/*.md).
    The settings' `comprehension` sets a check before the first item (docs/crowd.md)."""
    try:
        data_settings = jsonsafe.loads(settings)
    except json.JSONDecodeError as exc:
        raise InputError(f"not JSON: {exc.msg}", field="settings") from None
    kind = kind or default_kind()
    if kind not in all_kinds():
        raise InputError(f"unknown task kind {kind!r}", field="kind")
    k = get_kind(kind)
    fields = {name: value for name, value in (await request.form()).items() if isinstance(value, str)}
    data = await read_upload(file)
    study = services.create_study(
        session,
        session.merge(user),
        k.name,
        services.parse_settings(data_settings),
        data,
        format or k.item_formats[0],
        kind_options(k, fields),
    )
    return _out(study)


@router.get("/kinds", tags=["studies"], response_model=None)
def list_kinds(user: User = Depends(researcher)) -> list[dict[str, Any]]:
    """The installed task kinds: their formats, their study options and what they add."""
    return [
        {
            "name": k.name,
            "title": k.title,
            "formats": list(k.item_formats),
            "format_labels": k.format_labels,
            "options": sorted(k.option_fields),
            "artifact_roles": list(k.artifact_roles),
            "jobs": sorted(k.jobs),
        }
        for k in all_kinds().values()
    ]


@router.get("/studies/{study_id}", response_model=StudyOut, tags=["studies"])
def get_study(study_id: Id, session: Session = Depends(db), user: User = Depends(researcher)) -> StudyOut:
    return _out(_study(session, study_id, user))


@router.patch("/studies/{study_id}", response_model=StudyOut, tags=["studies"])
def edit_study(
    study_id: Id, body: services.StudyEdit, session: Session = Depends(db), user: User = Depends(researcher)
) -> StudyOut:
    """Change a study's consent text or instructions, its caps on one crowd member
    (`max_bundles_per_worker`, `max_open_bundles_per_ip`), or its adaptive allocation
    (`adaptive`: items of agents whose place in the ranking is open first, after every item
    has `adaptive_floor` annotations), or its comprehension check before the first item
    (`comprehension`: `{"mode": "none" | "default" | "own", "questions": ...}`, as the study
    page's card; workers who began keep what they had); fields left out stay as they are.
    Workers who have not yet agreed to the consent text must agree to the new one."""
    study = _study(session, study_id, user)
    return _out(services.edit_study(session, study, body, session.merge(user)))


class StateIn(BaseModel):
    state: StudyState


@router.post("/studies/{study_id}/state", response_model=StudyOut, tags=["studies"])
def set_state(
    study_id: Id, body: StateIn, session: Session = Depends(db), user: User = Depends(researcher)
) -> StudyOut:
    study = _study(session, study_id, user)
    if body.state not in services.TRANSITIONS.get(study.state, set()):
        # A state the study cannot go to from where it is: the request is well formed, the
        # study is not in the state for it.
        raise HTTPException(409, f"a {study.state} study cannot become {body.state}")
    return _out(services.set_state(session, study, body.state, session.merge(user)))


class PeopleSampleIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # Whole: JSON's true and "1" are not the number 1 here; 1.0 is (JSON Schema's integer)
    n: Whole | None = Field(
        None, ge=1, le=MAX_ID, description="how many of the study's non-gold items people judge (or give width)"
    )
    # NOT_BOOL: JSON's false is not the number 0 (the schema says number)
    width: Annotated[float, NOT_BOOL] | None = Field(
        None,
        ge=MIN_SAMPLE_WIDTH,
        le=1,
        description="instead of n: the PPI++ 95% interval's target width (high - low, 0-1 scale); n is then "
        "computed by a power analysis from it and agreement",
    )
    agreement: Annotated[float, NOT_BOOL] | None = Field(
        None,
        ge=0,
        le=1,
        description="with width: the share of items on which the automatic judge agrees with people "
        "(from a pilot, or expected)",
    )
    seed: Whole | None = Field(None, ge=0, le=2**31 - 1, description="the draw's seed (made when left out)")


@router.put("/studies/{study_id}/people-sample", tags=["studies"], response_model=None)
def set_people_sample(
    study_id: Id, body: PeopleSampleIn, session: Session = Depends(db), user: User = Depends(researcher)
) -> dict[str, Any]:
    """People judge only `n` of the study's items, drawn at random (items they have begun stay
    theirs), and an automatic judge the rest: the leaderboard's people-and-judge tables then
    combine the two (prediction-powered inference), and their "People for ±0.05" column says
    how many a target interval needs. Or give `width` and `agreement` instead of n: n is then
    the power analysis's (stats.ppi_people_for_agreement), kept with the draw as its `plan`
    (with the expected width). The draw (seed, counts) is kept and audited."""
    study = _study(session, study_id, user)
    if (body.n is None) == (body.width is None):
        raise InputError("give n (items people judge) or width (a target interval), one of them", field="n")
    if (body.width is None) != (body.agreement is None):
        raise InputError("width and agreement go together: the plan needs the judge's agreement", field="agreement")
    plan = None
    if body.width is not None and body.agreement is not None:
        plan = services.plan_people_sample(session, study, body.width, body.agreement)
    services.set_people_sample(session, study, body.n, session.merge(user), seed=body.seed, plan=plan)
    return assignment.progress(session, study)


@router.delete("/studies/{study_id}/people-sample", tags=["studies"], response_model=None)
def clear_people_sample(
    study_id: Id, session: Session = Depends(db), user: User = Depends(researcher)
) -> dict[str, Any]:
    """People judge every item again."""
    study = _study(session, study_id, user)
    services.set_people_sample(session, study, None, session.merge(user))
    return assignment.progress(session, study)


@router.get("/studies/{study_id}/progress", tags=["studies"], response_model=None)
def get_progress(study_id: Id, session: Session = Depends(db), user: User = Depends(researcher)) -> dict[str, Any]:
    return assignment.progress(session, _study(session, study_id, user))


@router.get("/studies/{study_id}/items", tags=["studies"], response_model=None)
def list_items(
    study_id: Id,
    offset: Annotated[int, Query(ge=0, le=MAX_ID)] = 0,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    session: Session = Depends(db),
    user: User = Depends(researcher),
) -> list[dict[str, Any]]:
    """A page of the study's items, `limit` (at most 1000) from `offset`."""
    # Bounded here: a negative LIMIT is "no limit" to SQLite and an error to PostgreSQL.
    study = _study(session, study_id, user)
    rows = session.scalars(select(Item).where(Item.study_id == study.id).order_by(Item.id).offset(offset).limit(limit))
    return [
        {
            "id": i.external_id,
            "payload": i.payload,
            "reference": i.reference,
            "is_gold": i.is_gold,
            "category": i.category,
            "cluster": i.cluster,
            "annotations_active": i.n_active,
        }
        for i in rows
    ]


@router.post("/studies/{study_id}/annotations/import", status_code=201, tags=["studies"], response_model=None)
async def import_prior_annotations(
    study_id: Id,
    file: UploadFile = UPLOAD,
    source: FormText = "",
    session: Session = Depends(db),
    user: User = Depends(researcher),
) -> dict[str, Any]:
    """Load people's annotations from an earlier study as the work of external annotators,
    scored like the study's own and shown on its leaderboard marked "(imported)"; `source`
    names where they come from (docs/kinds/*.md give each kind's format: for `tom` JSONL
    `{"question_id", "answer", "annotator"}`; for `navigation` R2R predictions with a
    `worker_id` per trajectory). Returns {annotators, annotations, source}."""
    from app.studies.imports import import_annotations

    study = _study(session, study_id, user)
    return import_annotations(session, study, session.merge(user), await read_upload(file), source)


@router.post("/studies/{study_id}/exports", status_code=202, tags=["exports"], response_model=None)
def start_export(study_id: Id, session: Session = Depends(db), user: User = Depends(researcher)) -> dict[str, Any]:
    study = _study(session, study_id, user)
    job = jobs.submit(session, jobs.create_job(session, "export", study_id=study.id, owner_id=user.id))
    return {"job": job.id, "state": job.state}


JobState = Literal["queued", "running", "done", "failed", "cancelled"]
JOB_STATES: tuple[JobState, ...] = get_args(JobState)


def _job_dict(job: jobs.Job, user: User | None = None) -> dict[str, Any]:
    """A job as its owner sees it; an admin also gets a failed job's traceback."""
    store = get_store()
    files = {name: store.url(key) for name, key in (job.result or {}).get("files", {}).items()}
    return {
        "id": job.id,
        "task": job.task,
        "study_id": job.study_id,
        "state": job.state,
        "done": job.done,
        "total": job.total,
        "log": job.log,
        "files": files,
        "created_at": job.created_at.isoformat() if job.created_at else None,
        "finished_at": job.finished_at.isoformat() if job.finished_at else None,
        **({"traceback": job.traceback} if user is not None and user.role == "admin" and job.traceback else {}),
    }


@router.get("/jobs", tags=["exports"], response_model=None)
def list_jobs(
    study_id: Annotated[int | None, Query(ge=1, le=MAX_ID)] = None,
    state: JobState | None = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
    session: Session = Depends(db),
    user: User = Depends(researcher),
) -> list[dict[str, Any]]:
    """Your jobs (an admin: everyone's), newest first: exports, generation runs, validations,
    tallies; `study_id` narrows to one of your studies (404 for another's), `state` to one
    state (queued, running, done, failed, cancelled), `limit` at most 500."""
    q = select(jobs.Job).order_by(jobs.Job.id.desc()).limit(limit)
    if user.role != "admin":
        q = q.where(jobs.Job.owner_id == user.id)
    if study_id is not None:
        q = q.where(jobs.Job.study_id == _study(session, study_id, user).id)
    if state is not None:  # one of JOB_STATES: FastAPI refuses others (422), the schema lists them
        q = q.where(jobs.Job.state == state)
    return [_job_dict(j, user) for j in session.scalars(q)]


@router.get("/jobs/{job_id}", tags=["exports"], response_model=None)
def get_job(job_id: Id, session: Session = Depends(db), user: User = Depends(researcher)) -> dict[str, Any]:
    job = session.get(jobs.Job, job_id)
    if job is None or (job.owner_id != user.id and user.role != "admin"):
        raise HTTPException(404, "no such job among yours")
    return _job_dict(job, user)


@router.post("/jobs/{job_id}/cancel", tags=["exports"], response_model=None)
def cancel_job(job_id: Id, session: Session = Depends(db), user: User = Depends(researcher)) -> dict[str, Any]:
    """Cancel a queued or running job (any kind's: an export, a generation run, a tally); its
    handler stops at its next progress check, keeping what it stored. 409 if it has ended."""
    job = session.get(jobs.Job, job_id)
    if job is None or (job.owner_id != user.id and user.role != "admin"):
        raise HTTPException(404, "no such job among yours")
    job = jobs.cancel(session, job)
    return {"id": job.id, "task": job.task, "state": job.state}


class AutoPauseIn(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    pairs: list[list[Annotated[str, Field(min_length=1, max_length=255)]]] = Field(
        max_length=200,
        description="the comparisons to settle before the study pauses itself: pairs of agents "
        "[[a, b], ...] (none: auto-pause off)",
    )


@router.get("/studies/{study_id}/auto-pause", tags=["studies"], response_model=None)
def get_auto_pause(study_id: Id, session: Session = Depends(db), user: User = Depends(researcher)) -> dict[str, Any]:
    """The comparisons marked for auto-pause, where each stands ("A above B, settled after n
    ..."), whether all are settled, when the study paused itself (`paused_at`), and the agents
    one may mark."""
    from app.leaderboards import stopping

    return stopping.status(session, _study(session, study_id, user))


@router.put("/studies/{study_id}/auto-pause", tags=["studies"], response_model=None)
def set_auto_pause(
    study_id: Id, body: AutoPauseIn, session: Session = Depends(db), user: User = Depends(researcher)
) -> dict[str, Any]:
    """Mark the comparisons (pairs of the study's agents) whose settling pauses the live study:
    the sweeper checks every minute, pauses it once every marked one is settled in the
    leaderboard's settled table, and records when. An empty list turns auto-pause off."""
    from app.leaderboards import stopping

    return stopping.set_marks(session, _study(session, study_id, user), body.pairs, user.id)
