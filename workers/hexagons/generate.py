"""The job `hexagons.generate`: an executor's boards for every step of a study's procedures,
stored as an agent's outputs on the study (app/kinds/hexagons/generation.py starts it).

The job's study; params: artifact_id (a valid executor), agent_id (whose outputs they become), on
("gold": each step from the gold board before it, the paper's oracle board-state; "own": from
the executor's own board after the step before, predicted board-state), batch_size (steps, or
procedures on "own", per forward pass).

The first claim replaces the agent's earlier outputs on the study; then procedures go in
chunks, each chunk's outputs committed in one transaction, so a worker killed mid-job and run
again skips the procedures stored and duplicates nothing. Between chunks the job's state is
read: "cancelled" stops it (what is stored stays, and the leaderboard scores it).
"""

from __future__ import annotations

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from app import jobs
from app.agents.models import AgentArtifact, AgentOutput
from app.kinds import get_kind
from app.studies.models import Item, Study
from workers.hexagons.executor import execute_procedures, load_artifact
from workers.runs import Chunks, model_on, scored_output

# Procedures per transaction (and per cancel check) on "gold"; "own" takes batch_size.
CHUNK = 64


def run_generation(session: Session, job: jobs.Job, progress: jobs.Progress) -> dict:
    p = dict(job.params)
    study = session.get(Study, job.study_id) if job.study_id else None
    artifact = session.get(AgentArtifact, p["artifact_id"])
    if study is None or artifact is None:
        return {"skipped": "the study or the artifact was deleted"}
    agent_id, on, batch_size = p["agent_id"], p["on"], int(p["batch_size"])
    # Loaded first: a model that cannot run must not cost the agent its earlier outputs.
    with model_on(session, artifact, load_artifact) as (model, device):
        if not p.get("replaced"):  # once: a retried job keeps what its first attempt stored
            session.execute(
                delete(AgentOutput).where(AgentOutput.agent_id == agent_id, AgentOutput.study_id == study.id)
            )
            job.params = {**p, "replaced": True}
            session.commit()
        kind = get_kind(study.kind)
        items = session.execute(
            select(Item.id, Item.payload, Item.reference)
            .where(Item.study_id == study.id, Item.is_gold.is_(False))
            .order_by(Item.id)
        ).all()
        stored = set(
            session.scalars(
                select(AgentOutput.item_id).where(AgentOutput.agent_id == agent_id, AgentOutput.study_id == study.id)
            )
        )
        todo = [it for it in items if it.id not in stored]
        chunks = Chunks(
            todo, batch_size if on == "own" else CHUNK, progress, len(items) - len(todo), len(items), "procedures"
        )
        progress(
            chunks.done,
            len(items),
            f"executor artifact {artifact.id} on {len(items)} procedures "
            f"({chunks.done} stored), on the {'gold' if on == 'gold' else 'own'} "
            f"previous board, batch {batch_size}, {device}",
        )
        for part in chunks:
            specs = [
                (it.payload["instructions"], it.payload["initial"], (it.reference or {}).get("boards")) for it in part
            ]
            predicted = execute_procedures(model, specs, on, batch_size, device)
            for it, steps in zip(part, predicted):
                response = {"steps": [{"board": b, "actions": []} for b in steps], "on": on}
                session.add(scored_output(kind, agent_id, study.id, it, response))
            session.commit()
    if chunks.cancelled:
        return {"outputs": chunks.done, "procedures": len(items), "cancelled": True}
    progress(chunks.done, None, f"done: {chunks.done} procedures")
    return {"outputs": chunks.done, "procedures": len(items), "agent": agent_id, "on": on}
