"""A listener run of the job `a3ds.generate` (params: listener, agent_id, batch_size): a built-in
model listener picks on every caption of the study (app/kinds/a3ds/listeners.py), each pick
stored as its agent's output, scored as a person's answer would be. Captions go in chunks, each
committed in one transaction; a caption the agent already picked on is skipped, so a run killed
and run again duplicates nothing. Between chunks a cancelled run stops (what is stored stays)."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from app import jobs
from app.agents.models import Agent, AgentOutput
from app.kinds import get_kind
from app.kinds.a3ds.listeners import pick
from app.studies.models import Item, Study
from workers.runs import Chunks, scored_output


def run_listening(session: Session, job: jobs.Job, progress: jobs.Progress) -> dict:
    p = dict(job.params)
    study = session.get(Study, job.study_id) if job.study_id else None
    if study is None:
        return {"skipped": "the study was deleted"}
    agent = session.get(Agent, p["agent_id"])
    if agent is None:
        return {"skipped": "the listener's agent was deleted"}
    kind = get_kind(study.kind)
    listener, batch_size = p["listener"], int(p["batch_size"])
    items = list(
        session.scalars(select(Item).where(Item.study_id == study.id, Item.is_gold.is_(False)).order_by(Item.id))
    )
    stored = set(
        session.scalars(
            select(AgentOutput.item_id).where(AgentOutput.study_id == study.id, AgentOutput.agent_id == agent.id)
        )
    )
    todo = [i for i in items if i.id not in stored]
    chunks = Chunks(todo, batch_size, progress, len(items) - len(todo), len(items), "captions")
    progress(
        chunks.done, len(items), f"{agent.name} on {len(items)} captions ({chunks.done} picked), batch {batch_size}"
    )
    for part in chunks:
        for item in part:
            response = {"choice": pick(listener, item.payload["caption"], item.payload["scenes"])}
            session.add(scored_output(kind, agent.id, study.id, item, response))
        session.commit()
    if chunks.cancelled:
        return {"picks": chunks.done, "captions": len(items), "cancelled": True}
    progress(chunks.done, None, f"done: {chunks.done} captions picked on by {agent.name}")
    return {"picks": chunks.done, "captions": len(items), "listener": agent.name}
