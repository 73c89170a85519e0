"""Counter runs: the example kind's agent runs (app/runs, docs/runs.md). A counter is a tiny
built-in "model" of a sentence's word count; a run counts every sentence of a study and its
counts become an agent's outputs there, scored on the leaderboard like imported ones. Declared
through `agent_runs()`, so the core gives it the runs API, list and cancelling."""

from __future__ import annotations

from sqlalchemy import delete, func, select

from app import jobs
from app.agents.models import Agent, AgentOutput
from app.errors import Missing
from app.runs.component import AgentRuns, Param, Started, an_id
from app.studies.models import Item

# Two counters that disagree on some sentences: the leaderboard tells them apart.
COUNTERS = {"split": lambda s: len(s.split()), "spaces": lambda s: s.count(" ") + 1}
CHUNK = 100  # sentences per transaction and per cancel check


class CounterRuns(AgentRuns):
    noun = "counter run"
    # The core checks these (types, choices, bounds, required) and writes the API's schema from them.
    fields = {"counter": Param("text", choices=tuple(COUNTERS)), "agent_id": an_id()}
    required = ("counter", "agent_id")
    columns = (("Counter", "counter"), ("Outputs", "outputs"))
    unit = "sentences"

    def start(self, session, user, study, target, params) -> Started:
        counter, agent_id = params["counter"], params["agent_id"]
        agent = session.get(Agent, agent_id)
        if agent is None or (user.role != "admin" and agent.owner_id != user.id) or agent.kind != "wordcount":
            raise Missing(f"no word-counting agent {agent_id} among yours", field="agent_id")
        job = jobs.create_job(
            session, "wordcount.generate", study_id=study.id, owner_id=user.id, counter=counter, agent_id=agent.id
        )
        return Started(job, agent_id=agent.id, params=job.params)

    def describe(self, session, run, job) -> dict:
        p = run.params or {}
        outputs = session.scalar(
            select(func.count(AgentOutput.id)).where(
                AgentOutput.study_id == run.study_id, AgentOutput.agent_id == p.get("agent_id")
            )
        )
        return {"counter": p.get("counter"), "outputs": outputs}


def study_context(session, study) -> dict:
    """The study page's section (templates/runs.html): the core's runs list."""
    from app.runs import service

    return service.study_page_context(session, study)


def run_counter(session, job, progress) -> dict:
    """The job: the agent's earlier outputs on the study are replaced, chunk by chunk."""
    from app.kinds import get_kind

    p = job.params
    count, agent_id = COUNTERS[p["counter"]], p["agent_id"]
    items = session.execute(
        select(Item.id, Item.payload, Item.reference).where(Item.study_id == job.study_id).order_by(Item.id)
    ).all()
    progress(0, len(items), f"counter {p['counter']!r} on {len(items)} sentences")
    session.execute(delete(AgentOutput).where(AgentOutput.agent_id == agent_id, AgentOutput.study_id == job.study_id))
    kind, done = get_kind("wordcount"), 0
    for start in range(0, len(items), CHUNK):
        if progress.cancelled():
            return {"outputs": done, "cancelled": True}
        for it in items[start : start + CHUNK]:
            response = {"words": count(it.payload["sentence"])}
            session.add(
                AgentOutput(
                    agent_id=agent_id,
                    study_id=job.study_id,
                    item_id=it.id,
                    response=response,
                    score=kind.score(it.payload, it.reference, response),
                )
            )
        session.commit()
        done = min(start + CHUNK, len(items))
        progress(done)
    return {"outputs": done}
