"""Pages: a researcher's agents of the kinds that upload models (TaskKind.artifact_roles; e.g.
navigation speakers and listeners), their uploaded versions and the verdicts."""

from __future__ import annotations

from fastapi import APIRouter, Depends, File, Form, Request, UploadFile
from fastapi.responses import RedirectResponse
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.agents import artifacts
from app.agents.models import Agent, AgentArtifact
from app.auth.deps import db, require, verify_csrf
from app.auth.models import User
from app.config import get_settings
from app.errors import InputError
from app.kinds import all_kinds
from app.params import Id
from app.studies import services
from app.web import flash, render

router = APIRouter(include_in_schema=False, dependencies=[Depends(verify_csrf)])
researcher = require("researcher", "admin")


def _model_kinds() -> dict:
    return {name: k for name, k in all_kinds().items() if k.artifact_roles}


@router.get("/agents")
def agents_page(request: Request, session: Session = Depends(db), user: User = Depends(researcher)):
    kinds = _model_kinds()
    q = select(Agent).where(Agent.kind.in_(kinds)).order_by(Agent.id)
    if user.role != "admin":
        q = q.where(Agent.owner_id == user.id)
    agents = list(session.scalars(q))
    by_agent: dict[int, list[AgentArtifact]] = {a.id: [] for a in agents}
    if agents:
        for art in session.scalars(select(AgentArtifact).where(AgentArtifact.agent_id.in_(by_agent))
                                   .order_by(AgentArtifact.version.desc())):
            by_agent[art.agent_id].append(art)
    return render(request, "research/agents.html", agents=agents, artifacts=by_agent, kinds=kinds,
                  limit_mb=get_settings().max_artifact_bytes // (1024 * 1024))


@router.post("/agents")
def create_agent(request: Request, name: str = Form(...), description: str = Form(""),
                 kind: str = Form(""), session: Session = Depends(db), user: User = Depends(researcher)):
    kinds = _model_kinds()
    kind = kind or next(iter(kinds), "")
    if kind not in kinds:
        raise InputError(f"{kind!r} is not a kind whose agents upload models "
                         f"(those are: {', '.join(kinds) or 'none installed'})", field="kind")
    agent = services.register_agent(session, session.merge(user), kind, name, "1", description)
    session.commit()
    flash(request, f"Agent {agent.name} is ready for uploads.")
    return RedirectResponse(f"/agents#agent-{agent.id}", status_code=303)


@router.post("/agents/{agent_id}/artifacts")
async def upload(request: Request, agent_id: Id, file: UploadFile = File(None),
                 role: str = Form(...), format: str = Form(...), config: str = Form(""),
                 session: Session = Depends(db), user: User = Depends(researcher)):
    agent = artifacts.owned_agent(session, agent_id, user)
    data = await artifacts.read_artifact(file)
    art = artifacts.upload_artifact(session, agent, role, format, data, artifacts.parse_config(config))
    flash(request, f"Uploaded {agent.name} v{art.version} ({art.role}); a worker is checking it.")
    return RedirectResponse(f"/agents#agent-{agent_id}", status_code=303)


@router.get("/agents/{agent_id}/artifacts")
def artifacts_rows(request: Request, agent_id: Id, session: Session = Depends(db),
                   user: User = Depends(researcher)):
    """The agent's artifact table alone: what the page polls while a verdict is pending."""
    agent = artifacts.owned_agent(session, agent_id, user)
    return render(request, "research/agent_artifacts.html", agent=agent,
                  rows=artifacts.list_artifacts(session, agent))
