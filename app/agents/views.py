"""Pages: a researcher's agents of every kind: for the kinds that upload models
(TaskKind.artifact_roles; e.g. navigation speakers and listeners) their uploaded versions and
the verdicts, for the others the studies their imported outputs are on."""

from __future__ import annotations

from fastapi import APIRouter, Depends, File, Form, Request, UploadFile
from fastapi.responses import RedirectResponse
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.agents import artifacts
from app.agents.models import Agent, AgentArtifact, AgentOutput
from app.auth.deps import db, require, verify_csrf
from app.auth.models import User
from app.config import get_settings
from app.errors import InputError
from app.kinds import all_kinds
from app.params import FormText, Id
from app.studies import services
from app.studies.models import Study
from app.web import flash, render

router = APIRouter(include_in_schema=False, dependencies=[Depends(verify_csrf)])
researcher = require("researcher", "admin")


def _model_kinds() -> dict:
    return {name: k for name, k in all_kinds().items() if k.artifact_roles}


@router.get("/agents")
def agents_page(request: Request, session: Session = Depends(db), user: User = Depends(researcher)):
    """Every agent of every kind: those that upload models, with their versions, and those known
    by their imported outputs, with the studies holding them (a kind no longer installed still
    shows its agents, by name)."""
    kinds = _model_kinds()
    q = select(Agent).order_by(Agent.kind, Agent.name, Agent.version, Agent.id)
    if user.role != "admin":
        q = q.where(Agent.owner_id == user.id)
    agents = list(session.scalars(q))
    by_agent: dict[int, list[AgentArtifact]] = {a.id: [] for a in agents}
    outputs: dict[int, list] = {a.id: [] for a in agents}
    if agents:
        for art in session.scalars(
            select(AgentArtifact).where(AgentArtifact.agent_id.in_(by_agent)).order_by(AgentArtifact.version.desc())
        ):
            by_agent[art.agent_id].append(art)
        for agent_id, study_id, title, n in session.execute(
            select(AgentOutput.agent_id, Study.id, Study.title, func.count(AgentOutput.id))
            .join(Study, Study.id == AgentOutput.study_id)
            .where(AgentOutput.agent_id.in_(by_agent))
            .group_by(AgentOutput.agent_id, Study.id, Study.title)
            .order_by(Study.id)
        ):
            outputs[agent_id].append((study_id, title, n))
    return render(
        request,
        "research/agents.html",
        agents=agents,
        artifacts=by_agent,
        kinds=kinds,
        outputs=outputs,
        all_kinds=all_kinds(),
        limit_mb=get_settings().max_artifact_bytes // (1024 * 1024),
    )


@router.post("/agents")
def create_agent(
    request: Request,
    name: str = Form(...),
    description: FormText = "",
    kind: FormText = "",
    session: Session = Depends(db),
    user: User = Depends(researcher),
):
    kinds = _model_kinds()
    kind = kind or next(iter(kinds), "")
    if kind not in kinds:
        raise InputError(
            f"{kind!r} is not a kind whose agents upload models (those are: {', '.join(kinds) or 'none installed'})",
            field="kind",
        )
    agent = services.register_agent(session, session.merge(user), kind, name, "1", description)
    session.commit()
    flash(request, f"Agent {agent.name} is ready for uploads.")
    return RedirectResponse(f"/agents#agent-{agent.id}", status_code=303)


@router.post("/agents/{agent_id}/artifacts")
async def upload(
    request: Request,
    agent_id: Id,
    file: UploadFile = File(None),
    role: str = Form(...),
    format: str = Form(...),
    config: FormText = "",
    session: Session = Depends(db),
    user: User = Depends(researcher),
):
    agent = artifacts.owned_agent(session, agent_id, user)
    data = await artifacts.read_artifact(file)
    art = artifacts.upload_artifact(session, agent, role, format, data, artifacts.parse_config(config))
    flash(request, f"Uploaded {agent.name} v{art.version} ({art.role}); a worker is checking it.")
    return RedirectResponse(f"/agents#agent-{agent_id}", status_code=303)


@router.get("/agents/{agent_id}/artifacts")
def artifacts_rows(request: Request, agent_id: Id, session: Session = Depends(db), user: User = Depends(researcher)):
    """The agent's artifact table alone: what the page polls while a verdict is pending."""
    agent = artifacts.owned_agent(session, agent_id, user)
    rows = artifacts.list_artifacts(session, agent)
    return render(request, "research/agent_artifacts.html", agent=agent, rows=rows)
