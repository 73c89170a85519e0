"""The crowd's JSON API (/api/v1/crowd): what a worker's page does, as JSON, on the worker's
signed session."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Depends, HTTPException, Request, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from pydantic.config import JsonDict
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.auth.deps import verify_csrf
from app import crowd
from app.auth.views import enter_crowd, fast_enter, keep_browser_secret, presented_browser
from app.config import get_settings
from app.db import get_sessionmaker
from app.jsonsafe import NAME_PATTERN
from app.kinds import get_kind
from app.params import BodyId
from app.studies import assignment, comprehension, hotpath
from app.studies.models import Item, Study
from app.studies.views import crowd_bundle, done_context, fast_consent, fast_end, fast_lease, retry_after, task_state
from app.web import rate_limit
from app.studies.consent import consent_details, consent_text, consent_version

if TYPE_CHECKING:
    from app.studies.hotpath import Stored, StudyConf

# The crowd's four routes, included ahead of every other router (app/main.py): FastAPI tries
# routes in order, each try costs a few microseconds, and these answer most of the requests a
# live study gets (~60 tries before them otherwise, twice per request: docs/benchmarks.md).
crowd_router = APIRouter(prefix="/api/v1", dependencies=[Depends(verify_csrf)])
# response_model=None on its routes: the return annotations are for mypy; FastAPI encodes the
# dicts as before (jsonable_encoder), not through a model inferred from them.


# ---- crowd endpoints: what a worker's page does, as JSON (no gold, no agent, no source) --

# The worker's id, as each crowd platform puts it in the link (app/crowd): the schema says one
# of them is required, as the code does (issue 26.8).
WORKER_ID: JsonDict = {"type": "string", "minLength": 1, "maxLength": 255, "pattern": NAME_PATTERN}
# ... and the platform's other ids (an assignment's, a HIT's), held to the same (app.auth.views,
# crowd_params), which may be empty.
OTHER_ID: JsonDict = {"type": "string", "maxLength": 255, "pattern": NAME_PATTERN}
# ... on the first platform whose worker id is there and not empty, as crowd.identify reads them:
# an earlier platform's is empty or absent in a later one's alternative (round 17 of issue 26: a
# bad MTurk id beside a good Prolific one was schema-valid, and refused).
NO_ID: JsonDict = {"type": "string", "maxLength": 0}
# A preview of the task is no entry, whichever platform's worker id is beside it (crowd.is_preview;
# round 18 of issue 26: MTurk's was schema-valid, and refused).
PREVIEWS = [{"required": [k], "properties": {k: {"const": v}}} for p in crowd.PLATFORMS for k, v in p.preview]
PREVIEW: dict[str, Any] = {"not": {"anyOf": PREVIEWS}} if PREVIEWS else {}


class EnterIn(BaseModel):
    params: dict[str, str] = Field(
        json_schema_extra={
            "anyOf": [
                {
                    "required": [p.worker_param],
                    "properties": {
                        **{earlier.worker_param: NO_ID for earlier in crowd.PLATFORMS[:i]},
                        p.worker_param: WORKER_ID,
                        **dict.fromkeys(p.other_params, OTHER_ID),
                    },
                }
                for i, p in enumerate(crowd.PLATFORMS)
            ],
            **PREVIEW,
            "description": "The link's parameters, as a crowd platform sends them: "
            + "; ".join(
                f"{p.label or 'a lab'}: {', '.join((p.worker_param, *p.other_params))}" for p in crowd.PLATFORMS
            )
            + ".",
        }
    )


@crowd_router.post("/crowd/{slug}/enter", tags=["crowd"], response_model=None)
def crowd_enter(slug: str, body: EnterIn, request: Request, response: Response) -> dict[str, Any]:
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
        return {
            "size": entered.size,
            "done": entered.n_done,
            "instructions": info.instructions,
            "consent": info.consent,
            "consent_details": dict(info.consent_details),
            "consent_version": info.consent_version,
            "consented": entered.consented,
            "browser_secret": secret,
        }
    with get_sessionmaker(request.app.state.database_url)() as session:
        return _enter(slug, body, request, response, session)


def _enter(slug: str, body: EnterIn, request: Request, response: Response, session: Session) -> dict[str, Any]:
    study = session.scalar(select(Study).where(Study.slug == slug))
    if study is None:
        raise HTTPException(404, "no study at this link")
    if crowd.is_preview(body.params):
        raise HTTPException(400, "this is a preview of the task: accept it on the platform first")
    bundle, _, secret = enter_crowd(request, session, study, body.params)
    keep_browser_secret(response, secret)
    return {
        "size": bundle.size,
        "done": bundle.n_done,
        "instructions": study.instructions,
        "consent": consent_text(study),
        "consent_details": dict(consent_details(study)),
        "consent_version": consent_version(study),
        "consented": bundle.consented_at is not None,
        "browser_secret": secret,
    }


class ConsentIn(BaseModel):
    consent_version: str


@crowd_router.post("/crowd/{slug}/consent", tags=["crowd"], response_model=None)
def crowd_consent(slug: str, body: ConsentIn, request: Request) -> dict[str, Any] | JSONResponse:
    """Agree to the consent text of `consent_version` (from `enter`): 409 when the researcher
    changed the text since, with the new text and version to show and agree to instead."""
    if fast_consent(request, slug, body.consent_version):
        return {"consented": True, "consent_version": body.consent_version}
    with get_sessionmaker(request.app.state.database_url)() as session:
        return _consent(slug, body, request, session)


def _consent(slug: str, body: ConsentIn, request: Request, session: Session) -> dict[str, Any] | JSONResponse:
    study, bundle = crowd_bundle(request, session, slug)
    try:
        assignment.consent(session, study, bundle.id, body.consent_version, presented_browser(request))
    except assignment.NotAvailable as exc:
        if exc.status != 409:
            raise  # another browser holds the worker's task, or a cap
        session.refresh(study)
        return JSONResponse(
            {
                "detail": str(exc),
                "consent": consent_text(study),
                "consent_details": dict(consent_details(study)),
                "consent_version": consent_version(study),
            },
            status_code=exc.status,
        )
    return {"consented": True, "consent_version": bundle.consent_version}


@crowd_router.get("/crowd/{slug}/next", tags=["crowd"], response_model=None)
def crowd_next(slug: str, request: Request, response: Response) -> dict[str, Any] | JSONResponse:
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


def _fast_next(request: Request, slug: str) -> dict[str, Any] | None:
    """The common case in one statement (app/studies/hotpath.py); None: the engine's path."""
    got = fast_lease(request, slug)
    if got is None:
        return None
    conf, _, lease = got
    return _item_state(conf.kind, lease.assignment_id, lease.slot, lease.size, lease.payload)


def _item_state(kind: str, assignment_id: int, slot: int, size: int, payload: dict[str, Any]) -> dict[str, Any]:
    """`next`'s answer with an item to answer: the lease's assignment, where it stands in the
    bundle, and the item as the worker may see it (the kind's public payload)."""
    return {
        "state": "item",
        "done": False,
        "assignment_id": assignment_id,
        "position": slot + 1,
        "of": size,
        "item": get_kind(kind).public_payload(payload),
    }


def _next_state(request: Request, response: Response, session: Session, slug: str) -> dict[str, Any]:
    study, bundle = crowd_bundle(request, session, slug)
    if bundle.consented_at is None:
        raise HTTPException(409, "consent first: POST /api/v1/crowd/{slug}/consent with the consent_version shown")
    if comprehension.needed(session, study, bundle):
        raise HTTPException(409, f"this study begins with a comprehension check: open /task/{slug} in a browser")
    current, wait, message = task_state(session, study, bundle)
    if wait is not None:
        seconds = retry_after(wait)
        response.headers["Retry-After"] = str(seconds)
        return {
            "state": "wait",
            "done": False,
            "retry_after": seconds,
            "message": message,
            "completed": bundle.n_done,
            "of": bundle.size,
        }
    if current is None:
        if bundle.finished_at is None:
            assignment.finish_early(session, bundle.id)
        session.refresh(bundle)
        return {
            "state": "done",
            "done": True,
            "completed": bundle.n_done,
            **done_context(study, bundle, request.session),
        }
    item = session.get(Item, current.item_id)
    assert item is not None  # a lease's item (a foreign key)
    return _item_state(study.kind, current.id, current.slot, bundle.size, item.payload)


def _fast_done(request: Request, conf: StudyConf, bundle_id: int, stored: Stored) -> dict[str, Any]:
    """The end of a bundle the hot path just closed, as `next` would answer it (views.fast_end)."""
    _, bundle, done = fast_end(request, conf, bundle_id, stored)
    return {"state": "done", "done": True, "completed": bundle.n_done, **done}


class SubmitIn(BaseModel):
    assignment_id: BodyId
    # What the code takes, said in the schema (round 15 of issue 26: any string there, while ""
    # and 65 characters were refused).
    idempotency_key: str = Field(min_length=1, max_length=64)
    response: dict[str, Any]


@crowd_router.post("/crowd/{slug}/submit", tags=["crowd"], response_model=None)
def crowd_submit(slug: str, body: SubmitIn, request: Request, response: Response) -> dict[str, Any] | JSONResponse:
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
            stored = hotpath.submit(
                url, conf, bundle_id, body.assignment_id, body.response, body.idempotency_key, client, browser
            )
            if stored is not None:
                ann_id = stored.annotation_id
                if stored.ended:
                    return JSONResponse(
                        {"stored": True, "annotation": ann_id, "next": _fast_done(request, conf, bundle_id, stored)}
                    )
                following = _fast_next(request, slug)
                if following is not None:  # the common case: no engine, no Session
                    return JSONResponse({"stored": True, "annotation": ann_id, "next": following})
    asked = ann_id is not None  # the hot `next` was asked just above, and declined
    with get_sessionmaker(url)() as session:  # opens a connection only if the engine is needed
        if ann_id is None:
            study, bundle = crowd_bundle(request, session, slug)
            ann_id = assignment.submit(
                session, study, bundle.id, body.assignment_id, body.response, body.idempotency_key, client
            ).id
            session.expire_all()  # the bundle moved on: read it afresh for `next`
        try:
            following = (None if asked else _fast_next(request, slug)) or _next_state(request, response, session, slug)
        except (assignment.NotAvailable, HTTPException):
            following = None  # stored all the same: the client asks `next` and reads why
    return {"stored": True, "annotation": ann_id, "next": following}
