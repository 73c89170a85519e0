"""The JSON API (/api/v1), documented at /openapi.json. Researchers and admins use API
tokens (`Authorization: Bearer pct_...`); crowd endpoints use the worker's signed session."""

from __future__ import annotations

import json
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Form, HTTPException, Query, Request, Response, UploadFile
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import select
from sqlalchemy.orm import Session

from app import jobs, jsonsafe
from app.agents.models import Agent
from app.audit import AuditEntry
from app.auth.deps import db, managed_study, require, verify_csrf
from app.auth.models import User
from app.auth.views import (MTURK_PREVIEW, enter_crowd, fast_enter, keep_browser_secret,
                             presented_browser)
from app.config import get_settings
from app.db import get_sessionmaker
from app.errors import InputError
from app.kinds import all_kinds, default_kind, get_kind
from app.params import MAX_ID, NOT_BLANK, BodyId, Id, OneOf, UPLOAD
from app.leaderboards.service import compute
from app.quality import service as quality
from app.storage import get_store
from app.studies import assignment, hotpath, services
from app.studies.models import Item, Study, StudyState
from app.studies.views import (crowd_bundle, done_context, fast_consent, fast_end,
                               fast_lease, kind_options, retry_after, task_state)
from app.web import rate_limit, read_upload

router = APIRouter(prefix="/api/v1", dependencies=[Depends(verify_csrf)])
# The crowd's four routes, included ahead of every other router (app/main.py): FastAPI tries
# routes in order, each try costs a few microseconds, and these answer most of the requests a
# live study gets (~60 tries before them otherwise, twice per request: docs/benchmarks.md).
crowd_router = APIRouter(prefix="/api/v1", dependencies=[Depends(verify_csrf)])
researcher = require("researcher", "admin")
admin = require("admin")


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
    # The kind's own settings (navigation: likert questions, baseline speaker, speakers).
    kind_settings: dict = {}
    entry_path: str


def _out(study: Study) -> StudyOut:
    return StudyOut(**{k: getattr(study, k) for k in StudyOut.model_fields if k != "entry_path"},
                    entry_path=f"/s/{study.slug}")


def _study(session: Session, study_id: int, user: User) -> Study:
    return managed_study(session, study_id, user)


@router.get("/studies", response_model=list[StudyOut], tags=["studies"])
def list_studies(session: Session = Depends(db), user: User = Depends(researcher)):
    q = select(Study).order_by(Study.id)
    if user.role != "admin":
        q = q.where(Study.owner_id == user.id)
    return [_out(s) for s in session.scalars(q)]


@router.post("/studies", response_model=StudyOut, status_code=201, tags=["studies"])
async def create_study(request: Request, file: UploadFile = UPLOAD, settings: str = Form("{}"),
                       kind: str = Form(""), format: str = Form(""),
                       session: Session = Depends(db), user: User = Depends(researcher)):
    """Create a draft study from an item upload. `kind` (default: the first installed kind,
    `GET /api/v1/kinds` lists them) and its `format`; the kind's own options are further form
    fields, listed per kind by `GET /api/v1/kinds` (for `tom`: `random_yes_rate`, the training
    split's share of Yes answers for the random baseline, and `gold_count`; for `navigation`:
    `speaker`, `baseline`, `likert`, `qc_instruction`; docs/kinds/*.md)."""
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
    study = services.create_study(session, session.merge(user), k.name,
                                  services.parse_settings(data_settings), data,
                                  format or k.item_formats[0], kind_options(k, fields))
    return _out(study)


@router.get("/kinds", tags=["studies"])
def list_kinds(user: User = Depends(researcher)):
    """The installed task kinds: their formats, their study options and what they add."""
    return [{"name": k.name, "title": k.title, "formats": list(k.item_formats),
             "format_labels": k.format_labels, "options": sorted(k.option_fields),
             "artifact_roles": list(k.artifact_roles), "jobs": sorted(k.jobs)}
            for k in all_kinds().values()]


@router.get("/studies/{study_id}", response_model=StudyOut, tags=["studies"])
def get_study(study_id: Id, session: Session = Depends(db), user: User = Depends(researcher)):
    return _out(_study(session, study_id, user))


@router.patch("/studies/{study_id}", response_model=StudyOut, tags=["studies"])
def edit_study(study_id: Id, body: services.StudyEdit, session: Session = Depends(db),
               user: User = Depends(researcher)):
    """Change a study's consent text or instructions, or its caps on one crowd member
    (`max_bundles_per_worker`, `max_open_bundles_per_ip`); fields left out stay as they are.
    Workers who have not yet agreed to the consent text must agree to the new one."""
    study = _study(session, study_id, user)
    return _out(services.edit_study(session, study, body, session.merge(user)))


class StateIn(BaseModel):
    state: StudyState


@router.post("/studies/{study_id}/state", response_model=StudyOut, tags=["studies"])
def set_state(study_id: Id, body: StateIn, session: Session = Depends(db),
              user: User = Depends(researcher)):
    study = _study(session, study_id, user)
    if body.state not in services.TRANSITIONS.get(study.state, set()):
        # A state the study cannot go to from where it is: the request is well formed, the
        # study is not in the state for it.
        raise HTTPException(409, f"a {study.state} study cannot become {body.state}")
    return _out(services.set_state(session, study, body.state, session.merge(user)))


@router.get("/studies/{study_id}/progress", tags=["studies"])
def get_progress(study_id: Id, session: Session = Depends(db), user: User = Depends(researcher)):
    return assignment.progress(session, _study(session, study_id, user))


@router.get("/studies/{study_id}/items", tags=["studies"])
def list_items(study_id: Id, offset: Annotated[int, Query(ge=0, le=MAX_ID)] = 0,
               limit: Annotated[int, Query(ge=1, le=1000)] = 100, session: Session = Depends(db),
               user: User = Depends(researcher)):
    """A page of the study's items, `limit` (at most 1000) from `offset`."""
    # Bounded here: a negative LIMIT is "no limit" to SQLite and an error to PostgreSQL.
    study = _study(session, study_id, user)
    rows = session.scalars(select(Item).where(Item.study_id == study.id).order_by(Item.id)
                           .offset(offset).limit(limit))
    return [{"id": i.external_id, "payload": i.payload, "reference": i.reference,
             "is_gold": i.is_gold, "category": i.category, "cluster": i.cluster,
             "annotations_active": i.n_active} for i in rows]


@router.get("/tokens", tags=["account"])
def list_tokens(session: Session = Depends(db), user: User = Depends(researcher)):
    """Your API tokens (never the tokens themselves: only their names and dates)."""
    from app.auth.models import ApiToken

    return [{"id": t.id, "name": t.name, "created_at": t.created_at.isoformat(),
             "expires_at": t.expires_at.isoformat() if t.expires_at else None, "revoked": t.revoked}
            for t in session.scalars(select(ApiToken).where(ApiToken.user_id == user.id).order_by(ApiToken.id))]


@router.post("/tokens/{token_id}/revoke", tags=["account"])
def revoke_token(token_id: Id, session: Session = Depends(db), user: User = Depends(researcher)):
    """Revoke a token (yours; an admin's: anyone's). It stops working at once."""
    from app.auth.views import revoke

    t = revoke(session, token_id, user)
    return {"id": t.id, "revoked": t.revoked}


class AgentIn(BaseModel):
    name: Annotated[str, Field(min_length=1, max_length=255, pattern=NOT_BLANK)]  # stripped
    kind: Annotated[str, OneOf(lambda: all_kinds())] | None = None  # the first installed kind when left out
    version: Annotated[str, Field(min_length=1, max_length=64, pattern=NOT_BLANK)] = "1"
    description: str = ""


class AgentOut(BaseModel):
    id: int
    name: str
    kind: str
    version: str


@router.get("/agents", response_model=list[AgentOut], tags=["agents"])
def list_agents(session: Session = Depends(db), user: User = Depends(researcher)):
    q = select(Agent).order_by(Agent.id)
    if user.role != "admin":
        q = q.where(Agent.owner_id == user.id)
    return [AgentOut(id=a.id, name=a.name, kind=a.kind, version=a.version) for a in session.scalars(q)]


@router.post("/agents", response_model=AgentOut, status_code=201, tags=["agents"])
def create_agent(body: AgentIn, session: Session = Depends(db), user: User = Depends(researcher)):
    a = services.register_agent(session, session.merge(user), body.kind or default_kind(), body.name,
                                body.version, body.description)
    session.commit()
    return AgentOut(id=a.id, name=a.name, kind=a.kind, version=a.version)


@router.post("/agents/{agent_id}/artifacts", status_code=201, tags=["agents"])
async def upload_agent_artifact(agent_id: Id, file: UploadFile = UPLOAD, role: str = Form(...),
                                format: str = Form(...), config: str = Form(""),
                                session: Session = Depends(db), user: User = Depends(researcher)):
    """Upload a new version of an agent's model in one of its kind's roles (docs/agents.md:
    a navigation speaker or listener; docs/kinds/sts-policies.md: an STS policy): a
    TorchScript archive, or safetensors weights with `config` (JSON) for a built-in
    architecture. It comes back pending; a worker validates it and writes the verdict."""
    from app.agents import artifacts

    agent = artifacts.owned_agent(session, agent_id, user)
    data = await artifacts.read_artifact(file)
    a = artifacts.upload_artifact(session, agent, role, format, data, artifacts.parse_config(config))
    return artifacts.artifact_dict(a)


@router.get("/agents/{agent_id}/artifacts", tags=["agents"])
def list_agent_artifacts(agent_id: Id, session: Session = Depends(db),
                         user: User = Depends(researcher)):
    from app.agents import artifacts

    agent = artifacts.owned_agent(session, agent_id, user)
    return [artifacts.artifact_dict(a) for a in artifacts.list_artifacts(session, agent)]


@router.post("/studies/{study_id}/agents/{agent_id}/outputs", tags=["agents"])
async def import_outputs(study_id: Id, agent_id: Id, file: UploadFile = UPLOAD,
                         session: Session = Depends(db), user: User = Depends(researcher)):
    """Import an agent's outputs, in the study's kind's format (for `tom`: JSONL
    `{"question_id", "answer"}`; for `navigation`: a model listener's paths, R2R predictions or
    `{external_id: {"path"|"trace"}}`, docs/kinds/navigation-listeners.md)."""
    study = _study(session, study_id, user)
    agent = session.get(Agent, agent_id)
    if agent is None or (agent.owner_id != user.id and user.role != "admin"):
        raise HTTPException(404, "no such agent among yours")
    n = services.import_agent_outputs(session, study, agent, await read_upload(file))
    return {"imported": n}


@router.post("/studies/{study_id}/annotations/import", status_code=201, tags=["studies"])
async def import_prior_annotations(study_id: Id, file: UploadFile = UPLOAD, source: str = Form(""),
                                   session: Session = Depends(db), user: User = Depends(researcher)):
    """Load people's annotations from an earlier study as the work of external annotators,
    scored like the study's own and shown on its leaderboard marked "(imported)"; `source`
    names where they come from (docs/kinds/*.md give each kind's format: for `tom` JSONL
    `{"question_id", "answer", "annotator"}`; for `navigation` R2R predictions with a
    `worker_id` per trajectory). Returns {annotators, annotations, source}."""
    from app.studies.imports import import_annotations

    study = _study(session, study_id, user)
    return import_annotations(session, study, session.merge(user), await read_upload(file), source)


@router.get("/studies/{study_id}/leaderboard", tags=["leaderboards"])
def leaderboard(study_id: Id, annotators_offset: Annotated[int, Query(ge=0, le=MAX_ID)] = 0,
                annotators_limit: Annotated[int | None, Query(ge=1, le=10_000)] = None,
                session: Session = Depends(db), user: User = Depends(researcher)):
    """Every row; annotators (most answers first) all, or one page of them with
    `annotators_limit` (and `annotators_offset`): `annotators.total` says how many there are."""
    page = None if annotators_limit is None and not annotators_offset else (
        annotators_offset, annotators_limit or 10_000)
    board = compute(session, _study(session, study_id, user), annotators=page)
    if board.get("extra"):  # the page's drawings; the API gives the figures they draw
        board["extra"] = {k: v for k, v in board["extra"].items() if k != "figures"}
    return board


@router.post("/studies/{study_id}/exports", status_code=202, tags=["exports"])
def start_export(study_id: Id, session: Session = Depends(db), user: User = Depends(researcher)):
    study = _study(session, study_id, user)
    job = jobs.submit(session, jobs.create_job(session, "export", study_id=study.id, owner_id=user.id))
    return {"job": job.id, "state": job.state}


JOB_STATES = ("queued", "running", "done", "failed", "cancelled")


def _job_dict(job: jobs.Job, user: User | None = None) -> dict:
    """A job as its owner sees it; an admin also gets a failed job's traceback."""
    store = get_store()
    files = {name: store.url(key) for name, key in (job.result or {}).get("files", {}).items()}
    return {"id": job.id, "task": job.task, "study_id": job.study_id, "state": job.state,
            "done": job.done, "total": job.total, "log": job.log, "files": files,
            "created_at": job.created_at.isoformat() if job.created_at else None,
            "finished_at": job.finished_at.isoformat() if job.finished_at else None,
            **({"traceback": job.traceback} if user is not None and user.role == "admin" and job.traceback else {})}


@router.get("/jobs", tags=["exports"])
def list_jobs(study_id: Annotated[int | None, Query(ge=1, le=MAX_ID)] = None,
              state: Literal[JOB_STATES] | None = None,
              limit: Annotated[int, Query(ge=1, le=500)] = 100,
              session: Session = Depends(db), user: User = Depends(researcher)):
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


@router.get("/jobs/{job_id}", tags=["exports"])
def get_job(job_id: Id, session: Session = Depends(db), user: User = Depends(researcher)):
    job = session.get(jobs.Job, job_id)
    if job is None or (job.owner_id != user.id and user.role != "admin"):
        raise HTTPException(404, "no such job among yours")
    return _job_dict(job, user)


@router.post("/jobs/{job_id}/cancel", tags=["exports"])
def cancel_job(job_id: Id, session: Session = Depends(db), user: User = Depends(researcher)):
    """Cancel a queued or running job (any kind's: an export, a generation run, a tally); its
    handler stops at its next progress check, keeping what it stored. 422 if it has ended."""
    job = session.get(jobs.Job, job_id)
    if job is None or (job.owner_id != user.id and user.role != "admin"):
        raise HTTPException(404, "no such job among yours")
    job = jobs.cancel(session, job)
    return {"id": job.id, "task": job.task, "state": job.state}


class DecisionIn(BaseModel):
    # A rejection says why (the worker is told): a reason with more than spaces.
    model_config = ConfigDict(json_schema_extra={
        "if": {"properties": {"decision": {"const": "reject"}}},
        "then": {"required": ["reason"], "properties": {"reason": {"pattern": NOT_BLANK}}}})
    participant_ids: list[BodyId]
    decision: Literal["approve", "reject"]
    reason: str = ""


@router.get("/studies/{study_id}/review", tags=["quality"])
def review_queue(study_id: Id, session: Session = Depends(db), user: User = Depends(admin)):
    study = session.get(Study, study_id)
    if study is None:
        raise HTTPException(404, "no such study")
    return quality.review_queue(session, study)


@router.post("/studies/{study_id}/review", tags=["quality"])
def decide(study_id: Id, body: DecisionIn, session: Session = Depends(db),
           user: User = Depends(admin)):
    study = session.get(Study, study_id)
    if study is None:
        raise HTTPException(404, "no such study")
    decision = {"approve": "approved", "reject": "rejected"}.get(body.decision, body.decision)
    return {"changed": quality.decide(session, study, body.participant_ids, decision,
                                      session.merge(user), body.reason)}


@router.get("/audit", tags=["quality"])
def audit(session: Session = Depends(db), user: User = Depends(admin)):
    return [{"id": e.id, "actor": e.actor_id, "action": e.action, "target": f"{e.target_type}:{e.target_id}",
             "detail": e.detail, "at": e.created_at.isoformat()}
            for e in session.scalars(select(AuditEntry).order_by(AuditEntry.id.desc()).limit(500))]


# ---- crowd endpoints: what a worker's page does, as JSON (no gold, no agent, no source) --

class EnterIn(BaseModel):
    params: dict[str, str]


@crowd_router.post("/crowd/{slug}/enter", tags=["crowd"])
def crowd_enter(slug: str, body: EnterIn, request: Request, response: Response):
    """Enter a study as a crowd worker with the platform's link parameters (`params`).

    The answer's `browser_secret` (also set as the `proctor_crowd` cookie) must come back with
    every later call, as that cookie or the `X-Proctor-Browser` header. Consent (`POST
    .../consent` with the `consent_version` shown with the `consent` text) binds the bundle to
    that client: after it, entering again with the same worker id without the secret is refused
    (403, naming the study's contact); an entry never consented to binds and holds nothing.
    Refused too, here and again at consent: a worker past the study's bundles per worker (403),
    too many bundles open from one address (429, with Retry-After)."""
    rate_limit(request, "entry", get_settings().rate_limit_entry)
    # No Session dependency (as `next`): the common case is one round trip (hotpath.enter).
    fast = fast_enter(request, slug, body.params)
    if fast is not None:
        info, entered, secret = fast
        keep_browser_secret(response, secret)
        return {"size": entered.size, "done": entered.n_done, "instructions": info.instructions,
                "consent": info.consent, "consent_details": dict(info.consent_details),
                "consent_version": info.consent_version, "consented": entered.consented,
                "browser_secret": secret}
    with get_sessionmaker(request.app.state.database_url)() as session:
        return _enter(slug, body, request, response, session)


def _enter(slug: str, body: EnterIn, request: Request, response: Response, session: Session):
    study = session.scalar(select(Study).where(Study.slug == slug))
    if study is None:
        raise HTTPException(404, "no study at this link")
    if body.params.get("assignmentId") == MTURK_PREVIEW:
        raise HTTPException(400, "this is an MTurk preview: accept the HIT first")
    bundle, _, secret = enter_crowd(request, session, study, body.params)
    keep_browser_secret(response, secret)
    return {"size": bundle.size, "done": bundle.n_done, "instructions": study.instructions,
            "consent": services.consent_text(study),
            "consent_details": dict(services.consent_details(study)),
            "consent_version": services.consent_version(study),
            "consented": bundle.consented_at is not None, "browser_secret": secret}


class ConsentIn(BaseModel):
    consent_version: str


@crowd_router.post("/crowd/{slug}/consent", tags=["crowd"])
def crowd_consent(slug: str, body: ConsentIn, request: Request):
    """Agree to the consent text of `consent_version` (from `enter`): 409 when the researcher
    changed the text since, with the new text and version to show and agree to instead."""
    if fast_consent(request, slug, body.consent_version):
        return {"consented": True, "consent_version": body.consent_version}
    with get_sessionmaker(request.app.state.database_url)() as session:
        return _consent(slug, body, request, session)


def _consent(slug: str, body: ConsentIn, request: Request, session: Session):
    study, bundle = crowd_bundle(request, session, slug)
    try:
        assignment.consent(session, study, bundle.id, body.consent_version,
                           presented_browser(request))
    except assignment.NotAvailable as exc:
        if exc.status != 409:
            raise  # another browser holds the worker's task, or a cap
        session.refresh(study)
        return JSONResponse({"detail": str(exc), "consent": services.consent_text(study),
                             "consent_details": dict(services.consent_details(study)),
                             "consent_version": services.consent_version(study)},
                            status_code=exc.status)
    return {"consented": True, "consent_version": bundle.consent_version}


@crowd_router.get("/crowd/{slug}/next", tags=["crowd"])
def crowd_next(slug: str, request: Request, response: Response):
    """The current item (`state: item`); `state: wait` with `retry_after` seconds (and a
    Retry-After header) when no item is free right now but some may come back as others'
    leases run out; `state: done` when the bundle is finished or the study has no more work for
    this worker, with the completion code only when its required items are done."""
    # No session dependency: a sync dependency costs a trip through the thread pool each way,
    # and the common case needs no Session at all.
    fast = _fast_next(request, slug)
    if fast is not None:
        return JSONResponse(fast)  # plain JSON already: FastAPI's encoder would walk it again
    with get_sessionmaker(request.app.state.database_url)() as session:
        return _next_state(request, response, session, slug)


def _fast_next(request: Request, slug: str) -> dict | None:
    """The common case in one statement (app/studies/hotpath.py); None: the engine's path."""
    got = fast_lease(request, slug)
    if got is None:
        return None
    conf, _, lease = got
    return {"state": "item", "done": False, "assignment_id": lease.assignment_id,
            "position": lease.slot + 1, "of": lease.size,
            "item": get_kind(conf.kind).public_payload(lease.payload)}


def _next_state(request: Request, response: Response, session: Session, slug: str) -> dict:
    study, bundle = crowd_bundle(request, session, slug)
    if bundle.consented_at is None:
        raise HTTPException(409, "consent first: POST /api/v1/crowd/{slug}/consent with the "
                                 "consent_version shown")
    current, wait, message = task_state(session, study, bundle)
    if wait is not None:
        seconds = retry_after(wait)
        response.headers["Retry-After"] = str(seconds)
        return {"state": "wait", "done": False, "retry_after": seconds, "message": message,
                "completed": bundle.n_done, "of": bundle.size}
    if current is None:
        if bundle.finished_at is None:
            assignment.finish_early(session, bundle.id)
        session.refresh(bundle)
        return {"state": "done", "done": True, "completed": bundle.n_done,
                **done_context(study, bundle, request.session.get("platform"),
                             request.session.get("turk_submit_to", ""))}
    item = session.get(Item, current.item_id)
    return {"state": "item", "done": False, "assignment_id": current.id,
            "position": current.slot + 1, "of": bundle.size,
            "item": get_kind(study.kind).public_payload(item.payload)}


def _fast_done(request: Request, conf, bundle_id: int, stored) -> dict:
    """The end of a bundle the hot path just closed, as `next` would answer it (views.fast_end)."""
    _, bundle, done = fast_end(request, conf, bundle_id, stored)
    return {"state": "done", "done": True, "completed": bundle.n_done, **done}


class SubmitIn(BaseModel):
    assignment_id: BodyId
    idempotency_key: str
    response: dict


@crowd_router.post("/crowd/{slug}/submit", tags=["crowd"])
def crowd_submit(slug: str, body: SubmitIn, request: Request, response: Response):
    """Store an answer (once: a retry with the same `idempotency_key` returns the stored one).
    `next` is what `GET .../next` would answer now (the next item, a wait, or the end), so that
    one annotation is one request; null when that could not be read (ask `next` then)."""
    rate_limit(request, "submit", get_settings().rate_limit_submit)
    client = {"user_agent": request.headers.get("user-agent", "")[:200]}
    url = request.app.state.database_url
    ann_id = None
    bundle_id = request.session.get("crowd", {}).get(slug)
    if hotpath.enabled(url) and isinstance(bundle_id, int):
        conf = hotpath.study(url, slug)
        browser = presented_browser(request)
        if conf is not None:
            stored = hotpath.submit(url, conf, bundle_id, body.assignment_id, body.response,
                                    body.idempotency_key, client, browser)
            if stored is not None:
                ann_id = stored.annotation_id
                if stored.ended:
                    return JSONResponse({"stored": True, "annotation": ann_id,
                                         "next": _fast_done(request, conf, bundle_id, stored)})
                following = _fast_next(request, slug)
                if following is not None:  # the common case: no engine, no Session
                    return JSONResponse({"stored": True, "annotation": ann_id, "next": following})
    asked = ann_id is not None  # the hot `next` was asked just above, and declined
    with get_sessionmaker(url)() as session:  # opens a connection only if the engine is needed
        if ann_id is None:
            study, bundle = crowd_bundle(request, session, slug)
            ann_id = assignment.submit(session, study, bundle.id, body.assignment_id,
                                       body.response, body.idempotency_key, client).id
            session.expire_all()  # the bundle moved on: read it afresh for `next`
        try:
            following = ((None if asked else _fast_next(request, slug))
                         or _next_state(request, response, session, slug))
        except (assignment.NotAvailable, HTTPException):
            following = None  # stored all the same: the client asks `next` and reads why
    return {"stored": True, "annotation": ann_id, "next": following}
