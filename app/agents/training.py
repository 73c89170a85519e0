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
        params = {
            "agent_id": agent.id,
            **{k: v for k, v in options.items() if v is not None},
            **({"device": device} if device else {}),
        }
        job = jobs.create_job(s, f"{kind}.train", owner_id=agent.owner_id, **params)
        jobs.submit(s, job)
        click.echo(f"queued job {job.id} ({kind}.train): follow it with GET /api/v1/jobs/{job.id}")
        return job.id


def train_here_or_queue(
    kind: str, title: str, trainer: str, agent_id: int | None, options: dict[str, Any], device: str | None, **where: Any
) -> None:
    """A `proctor train ...` command's work: with an agent id, the training queued as a job
    (queue_training); else `trainer` ("module:function") run here on `device` (cpu, cuda; by
    default CUDA when there is one), with `where` (out, name) and its progress echoed. A file
    it cannot find is a refusal of the --data option, not a traceback."""
    import importlib

    if device not in (None, "cpu", "cuda"):
        raise click.BadParameter("cpu or cuda", param_hint="--device")
    if agent_id is not None:
        queue_training(kind, title, agent_id, options, device)
        return
    import torch

    if device == "cuda" and not torch.cuda.is_available():
        raise click.BadParameter("no CUDA device here", param_hint="--device")
    module, _, name = trainer.partition(":")
    run = getattr(importlib.import_module(module), name)
    try:
        run(**options, device=device or ("cuda" if torch.cuda.is_available() else "cpu"), echo=click.echo, **where)
    except FileNotFoundError as exc:
        raise click.BadParameter(str(exc), param_hint="--data") from None
