"""A kind's `train` job (`<kind>.train`), for every kind that trains a built-in model: train as
the kind's `proctor train` command does, then upload the weights as a new version of the
agent's model, which the kind's `validate` job checks like any upload (docs/agents.md)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

# train(options, device, echo, epoch_done) -> (model, report): the kind's training, where
# `options` are the job's params among the kind's JOB_OPTIONS, with "epochs" always set.
Train = Callable[[dict[str, Any], str, Callable[[str], None], Callable[[int, float], None]], tuple[Any, dict[str, Any]]]


def train_and_upload(
    session: Any,
    job: Any,
    progress: Any,
    *,
    role: str,
    noun: str,
    default_epochs: int,
    options: tuple[str, ...],
    train: Train,
    weights_bytes: Callable[[Any], bytes],
) -> dict[str, Any]:
    """The job's body: params `agent_id`, and optionally any of `options` and `device`.
    Progress counts epochs; every line the training prints goes to the job's log."""
    from app.agents.artifacts import upload_artifact
    from app.agents.models import Agent

    p = dict(job.params)
    agent = session.get(Agent, p["agent_id"])
    if agent is None:
        return {"skipped": "the agent was deleted"}
    epochs = int(p.get("epochs", default_epochs))
    progress(0, epochs, f"training the built-in {noun} for agent {agent.name!r}, {epochs} epochs")
    done = [0]

    def epoch_done(n: int, loss: float) -> None:
        done[0] = n
        progress(n, None, f"epoch {n}: loss {loss:.3f}")

    device = p.get("device") or ("cuda" if torch.cuda.is_available() else "cpu")
    chosen = {k: p[k] for k in options if p.get(k) is not None}
    chosen["epochs"] = epochs
    model, report = train(chosen, device, lambda line: progress(done[0], None, line), epoch_done)
    artifact = upload_artifact(session, agent, role, "safetensors", weights_bytes(model), model.config())
    return {"artifact": artifact.id, "agent": agent.id, **report}
