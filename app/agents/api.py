"""The agents' JSON API (/api/v1/agents): agents, their uploaded models, their outputs on a study."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Form, HTTPException, UploadFile
from pydantic import BaseModel, Field
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.agents.models import ARTIFACT_FORMATS, Agent
from app.auth.deps import db, managed_study, require, verify_csrf
from app.auth.models import User
from app.kinds import all_kinds, default_kind
from app.params import NOT_BLANK, UPLOAD, Id, OneOf
from app.studies import services
from app.studies.models import Study
from app.web import read_upload

router = APIRouter(prefix="/api/v1", dependencies=[Depends(verify_csrf)])
researcher = require("researcher", "admin")


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
    a = services.register_agent(
        session,
        session.merge(user),
        default_kind() if body.kind is None else body.kind,
        body.name,
        body.version,
        body.description,
    )
    session.commit()
    return AgentOut(id=a.id, name=a.name, kind=a.kind, version=a.version)


def _roles() -> set[str]:
    """Every installed kind's artifact roles (an agent's own kind takes only its own: 409)."""
    return {role for kind in all_kinds().values() for role in kind.artifact_roles}


# A TorchScript archive carries its own config: the route refuses one sent with it (422), which
# the form's schema states (issue 26.8): with `format` torchscript, `config` is blank (what
# str.strip() empties) or an empty JSON object.
_BLANK = "[" + NOT_BLANK.removeprefix("[^")
_JSON_SPACE = r"[ \t\n\r]*"
NO_CONFIG = {
    "if": {"properties": {"format": {"const": "torchscript"}}, "required": ["format"]},
    "then": {"properties": {"config": {"pattern": rf"^(?:{_BLANK}*|{_JSON_SPACE}\{{{_JSON_SPACE}\}}{_JSON_SPACE})$"}}},
}


@router.post(
    "/agents/{agent_id}/artifacts",
    status_code=201,
    tags=["agents"],
    openapi_extra={"requestBody": {"content": {"multipart/form-data": {"schema": {"allOf": [NO_CONFIG]}}}}},
)
async def upload_agent_artifact(
    agent_id: Id,
    role: Annotated[str, Form(), OneOf(_roles)],
    format: Annotated[str, Form(), OneOf(lambda: ARTIFACT_FORMATS)],
    file: UploadFile = UPLOAD,
    config: str = Form("", json_schema_extra={"contentMediaType": "application/json"}),
    session: Session = Depends(db),
    user: User = Depends(researcher),
):
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
def list_agent_artifacts(agent_id: Id, session: Session = Depends(db), user: User = Depends(researcher)):
    from app.agents import artifacts

    agent = artifacts.owned_agent(session, agent_id, user)
    return [artifacts.artifact_dict(a) for a in artifacts.list_artifacts(session, agent)]


@router.post("/studies/{study_id}/agents/{agent_id}/outputs", tags=["agents"])
async def import_outputs(
    study_id: Id,
    agent_id: Id,
    file: UploadFile = UPLOAD,
    session: Session = Depends(db),
    user: User = Depends(researcher),
):
    """Import an agent's outputs, in the study's kind's format (for `tom`: JSONL
    `{"question_id", "answer"}`; for `navigation`: a model listener's paths, R2R predictions or
    `{external_id: {"path"|"trace"}}`, docs/kinds/navigation-listeners.md)."""
    study = _study(session, study_id, user)
    agent = session.get(Agent, agent_id)
    if agent is None or (agent.owner_id != user.id and user.role != "admin"):
        raise HTTPException(404, "no such agent among yours")
    n = services.import_agent_outputs(session, study, agent, await read_upload(file))
    return {"imported": n}


def _study(session: Session, study_id: int, user: User) -> Study:
    return managed_study(session, study_id, user)
