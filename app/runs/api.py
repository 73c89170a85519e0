"""The agent runs' JSON API: one path for every kind (docs/runs.md).

POST /api/v1/studies/{id}/runs   start a run on a study (JSON, or a form with a file)
POST /api/v1/runs                start one on a kind's own target ({"kind", "target", ...})
GET  /api/v1/runs                the caller's runs (?study_id=, ?kind=)
GET  /api/v1/runs/{id}           one, with its job's state and what it stored
POST /api/v1/runs/{id}/cancel    stop it at its next progress check (what it stored stays)
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Query, Request
from sqlalchemy.orm import Session

from app import jsonsafe
from app.auth.deps import db, managed_study, require, verify_csrf
from app.auth.models import User
from app.errors import InputError, TooLarge
from app.middleware import MAX_JSON_BODY
from app.params import MAX_ID, Id, OneOf
from app.runs import service
from app.runs.component import AgentRuns, Param
from app.runs.models import AgentRun

router = APIRouter(prefix="/api/v1", tags=["runs"], dependencies=[Depends(verify_csrf)])
researcher = require("researcher", "admin")


def _schema_of(p: Param, form: bool) -> dict[str, Any]:
    """A field's JSON schema, from what service.checked takes (a form's are the same, its
    texts read as the numbers and lists they stand for: service.from_form)."""
    if p.type == "file":
        if form:
            return {"type": "string", "format": "binary"}
        return {"description": "the file's content, as JSON"}
    if p.type == "text":
        return {"type": "string", **({"enum": list(p.choices)} if p.choices else {})}
    number: dict[str, Any] = {"type": "number" if p.type == "float" else "integer"}
    if p.low is not None:
        number["minimum"] = p.low
    if p.above is not None:
        number["exclusiveMinimum"] = p.above
    if p.high is not None:
        number["maximum"] = p.high
    if p.type != "ints":
        return number
    return {"type": "array", "items": number, "uniqueItems": True, **({"maxItems": p.most} if p.most else {})}


def _count_schema(name: str, p: Param) -> dict[str, Any]:
    """`name`, when given, is the number of `p.counts`'s items (absent: none)."""
    assert p.counts is not None and p.high is not None
    counts = [
        {
            "properties": {name: {"const": n}, p.counts: {"minItems": n, "maxItems": n}},
            **({"required": [p.counts]} if n else {}),
        }
        for n in range(int(p.low or 0), int(p.high) + 1)
    ]
    return {"dependentSchemas": {name: {"anyOf": counts}}}


def body_schema(name: str, runs: AgentRuns, form: bool) -> dict[str, Any]:
    """One kind's start as an object schema (a JSON body, or a form): its fields and no
    others, as the service refuses any other (issue 26.8: the schema says what the code takes)."""
    props: dict[str, Any] = {f: _schema_of(p, form) for f, p in runs.fields.items()}
    required = list(runs.required)
    if runs.target_keys:
        props = {
            "kind": {"const": name},
            "target": {
                "type": "object",
                "required": list(runs.target_keys),
                "properties": {k: {"type": "integer", "minimum": 1, "maximum": MAX_ID} for k in runs.target_keys},
                "additionalProperties": False,
            },
            **props,
        }
        required = ["kind", "target", *required]
    body: dict[str, Any] = {
        "title": f"{name}: a {runs.noun}",
        "type": "object",
        "properties": props,
        "additionalProperties": False,
        **({"required": required} if required else {}),
    }
    # Exactly one of each group: one oneOf, or allOf of several; a count, its list's length.
    groups = [{"oneOf": [{"required": [f]} for f in g]} for g in runs.one_of]
    groups += [_count_schema(f, p) for f, p in runs.fields.items() if p.counts]
    if len(groups) == 1:
        body.update(groups[0])
    elif groups:
        body["allOf"] = groups
    return body


def _kind_bodies(on_target: bool, form: bool) -> list[dict[str, Any]]:
    """One object schema per installed kind with runs (on a study, or on its own target)."""
    kinds = [(name, service.component(name)) for name in service.kinds_with_runs()]
    return [body_schema(name, runs, form) for name, runs in kinds if bool(runs.target_keys) == on_target]


def _body(on_target: bool) -> dict[str, Any]:
    content = {"application/json": {"schema": {"anyOf": _kind_bodies(on_target, form=False)}}}
    if not on_target:
        content["multipart/form-data"] = {"schema": {"anyOf": _kind_bodies(False, form=True)}}
    return {"requestBody": {"required": True, "content": content}}


def _form(request: Request) -> bool:
    return request.headers.get("content-type", "").startswith(
        ("multipart/form-data", "application/x-www-form-urlencoded")
    )


async def _body_within(request: Request, limit: int) -> bytes:
    """The body, refused past `limit` bytes as it arrives. A JSON content type's has been
    through JsonBodyGuard (its 4 MB, depth and digits); any other's came as it was sent, up to
    the general cap (the largest upload, 200 MB and more), and was read whole (issue 26, round
    13b)."""
    too_large = TooLarge(f"a JSON body is larger than the {limit >> 20} MB limit", field="body")
    length = request.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > limit:
        raise too_large
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise too_large
        chunks.append(chunk)
    return b"".join(chunks)


async def _json(request: Request) -> dict[str, Any]:
    data = await _body_within(request, MAX_JSON_BODY)
    try:
        body = jsonsafe.loads(data or b"{}")
    except (json.JSONDecodeError, UnicodeDecodeError, ValueError) as exc:
        raise InputError(f"the body is not JSON: {exc}", field="body") from None
    if not isinstance(body, dict):
        raise InputError("the body is a JSON object of the run's fields", field="body")
    return body


async def start_params(request: Request, runs: AgentRuns) -> dict[str, Any]:
    """The request's fields as the kind takes them, from a JSON object or a form."""
    from starlette.datastructures import UploadFile

    from app.web import read_upload

    if not _form(request):
        return service.from_json(runs, await _json(request))
    form = await request.form()
    values: dict[str, Any] = {}
    for name in form:
        if name == "csrf_token":  # a signed-in page's form: checked already (verify_csrf)
            continue
        got = form.getlist(name)
        if isinstance(got[0], UploadFile):
            values[name] = await read_upload(got[0], name)  # type: ignore[arg-type]
        else:  # repeated fields (checked boxes) as "3,4"
            values[name] = ",".join(str(v) for v in got)
    return service.from_form(runs, values)


def _found(session: Session, user: User, run_id: int) -> AgentRun:
    try:
        return service.get(session, user, run_id)
    except service.NotFound as exc:
        raise HTTPException(404, str(exc)) from None


@router.post("/studies/{study_id}/runs", status_code=202, openapi_extra=_body(on_target=False))
async def start_on_study(
    request: Request, study_id: Id, session: Session = Depends(db), user: User = Depends(researcher)
) -> dict[str, Any]:
    """Start an agent run on a study: its kind's model (an uploaded, trained or built-in one)
    over the study's items. The fields are the kind's (docs/runs.md); a file field comes as a
    form upload, or in JSON as its content. Follow it with GET /api/v1/runs/{id}."""
    study = managed_study(session, study_id, user)
    params = await start_params(request, service.component(study.kind))
    run = service.start(session, session.merge(user), study.kind, params, study=study)
    return service.summary(session, run)


@router.post("/runs", status_code=202, openapi_extra=_body(on_target=True))
async def start_on_target(
    request: Request, session: Session = Depends(db), user: User = Depends(researcher)
) -> dict[str, Any]:
    """Start an agent run on a kind's own target: {"kind": "sts", "target": {"suite_id": 1,
    "version": 2}, ...the kind's fields}."""
    if _form(request):
        raise InputError('send a JSON object: {"kind", "target", ...the kind\'s fields}', field="body")
    body = await _json(request)
    kind, target = body.pop("kind", None), body.pop("target", None)
    if not isinstance(kind, str):
        raise InputError('name the kind (e.g. "sts")', field="kind")
    runs = service.component(kind)
    if not isinstance(target, dict):
        raise InputError(f"target is an object with {', '.join(runs.target_keys) or 'no keys'}", field="target")
    run = service.start(session, session.merge(user), kind, service.from_json(runs, body), target=target)
    return service.summary(session, run)


@router.get("/runs")
def list_runs(
    study_id: Annotated[int | None, Query(ge=1, le=MAX_ID)] = None,
    kind: Annotated[str | None, Query(), OneOf(service.kinds_with_runs)] = None,
    session: Session = Depends(db),
    user: User = Depends(researcher),
) -> list[dict[str, Any]]:
    """The runs you started or that ran on your studies, newest first."""
    if kind is not None and kind not in service.kinds_with_runs():
        raise InputError(f"kind is one of {', '.join(service.kinds_with_runs())}", field="kind")
    return service.summaries(session, service.list_runs(session, user, study_id=study_id, kind=kind))


@router.get("/runs/{run_id}")
def get_run(run_id: Id, session: Session = Depends(db), user: User = Depends(researcher)) -> dict[str, Any]:
    return service.summary(session, _found(session, user, run_id))


@router.post("/runs/{run_id}/cancel")
def cancel_run(run_id: Id, session: Session = Depends(db), user: User = Depends(researcher)) -> dict[str, Any]:
    """Stop the run at its next progress check; what it stored stays (and counts)."""
    _found(session, user, run_id)
    return service.summary(session, service.cancel(session, user, run_id))
