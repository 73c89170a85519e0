"""`proctor train <model> --agent-id N`: the command's training queued as the kind's job
`<kind>.train` (TaskKind.jobs), for a worker of the "models" queue (the GPU's, when one serves
it); the job uploads what it trains as a new version of the agent's model."""

from __future__ import annotations

from typing import Any

import click


def queue_training(kind: str, title: str, agent_id: int, options: dict[str, Any], device: str | None) -> int:
    """Queue `<kind>.train` with every training option the command was given (those left
    unset are left out, so the job's defaults are the command's); returns the job's id."""
    from app import jobs
    from app.agents.models import Agent
    from app.db import get_sessionmaker

    with get_sessionmaker()() as s:
        agent = s.get(Agent, agent_id)
        if agent is None or agent.kind != kind:
            raise click.BadParameter(f"no {title} agent {agent_id}", param_hint="--agent-id")
        params = {"agent_id": agent.id, **{k: v for k, v in options.items() if v is not None},
                  **({"device": device} if device else {})}
        job = jobs.create_job(s, f"{kind}.train", owner_id=agent.owner_id, **params)
        jobs.submit(s, job)
        click.echo(f"queued job {job.id} ({kind}.train): follow it with GET /api/v1/jobs/{job.id}")
        return job.id
