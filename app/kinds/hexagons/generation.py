"""Generation runs of Hexagons executors: an uploaded executor's boards for a study's
procedures become an agent's outputs on the study, scored on the leaderboard like imported
predictions (docs/kinds/hexagons.md, "Executors").

A run is a core Job (`hexagons.generate`, queue "models"; its params say what it runs): no table
of its own. The web side checks the request and stores the job; workers/hexagons/generate.py
does the work. No torch here.
"""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app import jobs
from app.agents.artifacts import usable_models
from app.agents.models import Agent, AgentArtifact, AgentOutput
from app.auth.models import User
from app.errors import Conflict, InputError, Missing
from app.params import MAX_ID, whole_number
from app.runs.component import AgentRuns, Param, Started, an_id, usable_artifact
from app.studies.models import Item, Study

KIND_NAME = "hexagons"
TASK = f"{KIND_NAME}.generate"
# The board each step is executed on: the gold one before it (the paper's oracle board-state)
# or the executor's own (predicted board-state).
ONS = ("gold", "own")
MAX_BATCH = 512
DEFAULT_BATCH = 32


def _id(value: object, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"{field} must be an id (an integer)", field=field)
    return value


def _agent(session: Session, user: User, agent_id: object) -> Agent:
    agent_id = _id(agent_id, "agent_id")
    agent = session.get(Agent, agent_id) if 1 <= agent_id <= MAX_ID else None
    if agent is None or (user.role != "admin" and agent.owner_id != user.id):
        raise Missing(f"no agent {agent_id} among yours", field="agent_id")
    if agent.kind != KIND_NAME:
        raise Conflict(f"agent {agent_id} is a {agent.kind} agent, not a Hexagons one", field="agent_id")
    return agent


def create_run(
    session: Session,
    study: Study,
    user: User,
    *,
    artifact_id: object,
    agent_id: object = None,
    on: object = "gold",
    batch_size: object = DEFAULT_BATCH,
) -> jobs.Job:
    """Check everything and add the job to the session (flushed, not committed): the caller
    submits it (jobs.submit). The outputs go to `agent_id`, by default the artifact's agent; a
    run replaces that agent's outputs on the study."""
    if study.kind != KIND_NAME:
        raise Conflict("executor runs are for Hexagons studies", field="study")
    if (study.kind_settings or {}).get("mode") == "description":
        raise Conflict(
            "executor runs are for execution studies: a description study has no instructions to execute yet",
            field="study",
        )
    art, _ = usable_artifact(session, user, artifact_id, KIND_NAME, "executor", "a Hexagons executor")
    agent = _agent(session, user, art.agent_id if agent_id is None else agent_id)
    if on not in ONS:
        raise InputError(
            "on must be gold (each step from the gold board before it) or own (from the executor's own previous board)",
            field="on",
        )
    batch_size = whole_number(batch_size, "batch_size", 1, MAX_BATCH)
    n = session.scalar(select(func.count()).select_from(Item).where(Item.study_id == study.id, Item.is_gold.is_(False)))
    if not n:
        raise Conflict("the study has no procedures to execute (gold ones are not executed)", field="study")
    return jobs.create_job(
        session,
        TASK,
        study_id=study.id,
        owner_id=user.id,
        artifact_id=art.id,
        agent_id=agent.id,
        on=on,
        batch_size=batch_size,
    )


def _described(session: Session, study_id: int | None, p: dict) -> dict:
    """What a run ran and how many of its agent's outputs the study holds."""
    agent = session.get(Agent, p.get("agent_id")) if p.get("agent_id") else None
    art = session.get(AgentArtifact, p.get("artifact_id")) if p.get("artifact_id") else None
    outputs = (
        session.scalar(
            select(func.count(AgentOutput.id)).where(
                AgentOutput.study_id == study_id, AgentOutput.agent_id == p.get("agent_id")
            )
        )
        if agent
        else 0
    )
    return {
        "on": p.get("on"),
        "batch_size": p.get("batch_size"),
        "artifact_id": p.get("artifact_id"),
        "artifact": f"v{art.version} ({art.format})" if art else None,
        "agent_id": p.get("agent_id"),
        "agent": f"{agent.name} v{agent.version}" if agent else None,
        "outputs": outputs,
    }


def study_context(session: Session, study: Study) -> dict:
    """The study page's section (generation.html): the runs, and what the owner can start one with."""
    agents = session.scalars(
        select(Agent)
        .where(Agent.owner_id == study.owner_id, Agent.kind == KIND_NAME)
        .order_by(Agent.name, Agent.version)
    ).all()
    from app.runs import service as runs

    return {
        **runs.study_page_context(session, study),
        "executors": usable_models(session, study.owner_id, KIND_NAME, "executor")["executor"],
        "executor_agents": [{"id": g.id, "label": f"{g.name} v{g.version}"} for g in agents],
    }


class ExecutorRuns(AgentRuns):
    """Hexagons' agent runs (app/runs): an executor's boards become an agent's outputs."""

    noun = "executor run"
    fields = {
        "artifact_id": an_id(),
        "agent_id": an_id(),
        "on": Param("text", choices=ONS),
        "batch_size": Param("int", 1, MAX_BATCH),
    }
    required = ("artifact_id",)
    columns = (("Executor", "artifact"), ("Agent", "agent"), ("Previous board", "on"), ("Outputs", "outputs"))
    unit = "procedures"

    def start(self, session: Session, user: User, study: Study, target: dict, params: dict) -> Started:
        if params.get("artifact_id") is None:
            raise InputError(
                "artifact_id is required: the executor to run (a valid Hexagons executor artifact)", field="artifact_id"
            )
        job = create_run(
            session,
            study,
            user,
            artifact_id=params["artifact_id"],
            agent_id=params.get("agent_id"),
            on=params.get("on", "gold"),
            batch_size=params.get("batch_size", DEFAULT_BATCH),
        )
        p = job.params
        return Started(job, agent_id=p["agent_id"], artifact_ids=[p["artifact_id"]], params=p)

    def describe(self, session: Session, run, job: jobs.Job | None) -> dict:
        return _described(session, run.study_id, run.params or {})
