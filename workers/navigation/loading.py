"""Loading an uploaded speaker or listener (docs/agents.md; how, for every kind:
workers/artifacts.py): safetensors weights go through the built-in architectures of
train.load_model, with sizes checked at upload and a validation run in the sandbox behind them.
"""

from __future__ import annotations

import torch
from sqlalchemy.orm import Session

from app.agents.models import AgentArtifact
from app.kinds.navigation.architectures import MAX_SIZE
from workers.artifacts import load_validated, torch_model
from workers.navigation.train import load_model

# What the sandboxed process calls to turn an upload's bytes into a model.
LOADER = "workers.navigation.loading:load_bytes"
# The tensors each method of the interface answers (docs/agents.md), from the call's arguments:
# the sandbox's cap on the answer (workers/sandbox.py). H, a listener's state, is at most
# MAX_SIZE, as a built-in's hidden size is; validation refuses a larger one.
ANSWERS = {
    "score": lambda steps, *_: [steps.shape[:1]],
    "sample": lambda steps, step_mask, max_len, *_: [(steps.shape[0], max_len), steps.shape[:1]],
    "encode": lambda tokens, token_mask: [(*tokens.shape, MAX_SIZE), (tokens.shape[0], MAX_SIZE)],
    "act": lambda states, token_mask, h, node, actions, action_mask: [
        (actions.shape[0], actions.shape[1] + 1),
        h.shape,
    ],
}


def load_bytes(fmt: str, data: bytes, config: dict | None) -> torch.nn.Module:
    """A model from an artifact's bytes, on the CPU, in eval mode."""
    return torch_model(fmt, data, config, load_model)


def load_artifact(session: Session, artifact: AgentArtifact):
    """The validated artifact's model (CPU, eval mode; move it with .to(device)): a TorchScript
    archive as a SandboxedModel, safetensors weights in our own architecture. ValueError for an
    artifact not validated or whose blob no longer matches its checksum."""
    return load_validated(artifact, LOADER, load_bytes)
