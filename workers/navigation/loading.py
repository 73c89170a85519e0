"""Loading an uploaded speaker or listener (docs/agents.md): never a pickle.

TorchScript archives go through torch.jit.load (TorchScript's own restricted unpickler reads
their constants; no Python class is imported); safetensors weights through the built-in
architectures of train.load_model. torch.load is never called on an upload.
"""

from __future__ import annotations

import hashlib
import io

import torch
from sqlalchemy.orm import Session

from app.agents.models import AgentArtifact
from app.storage import get_store
from workers.navigation.train import load_model


def load_bytes(fmt: str, data: bytes, config: dict | None) -> torch.nn.Module:
    """A model from an artifact's bytes, on the CPU, in eval mode."""
    if fmt == "torchscript":
        model = torch.jit.load(io.BytesIO(data), map_location="cpu")
    elif fmt == "safetensors":
        model = load_model(data, config or {})
    else:
        raise ValueError(f"unknown artifact format {fmt!r}")
    return model.eval()


def load_artifact(session: Session, artifact: AgentArtifact) -> torch.nn.Module:
    """The validated artifact's model (CPU, eval mode; move it with .to(device)).

    Only artifacts a worker has validated may run: anything else raises ValueError, as does a
    blob whose bytes no longer match the checksum taken at upload."""
    if artifact.state != "valid":
        raise ValueError(f"artifact {artifact.id} (agent {artifact.agent_id} v{artifact.version}) "
                         f"is {artifact.state}, not valid: {artifact.verdict or 'not yet checked'}")
    data = get_store().get(artifact.blob_key)
    if hashlib.sha256(data).hexdigest() != artifact.sha256:
        raise ValueError(f"artifact {artifact.id}: the stored blob does not match its sha256")
    return load_bytes(artifact.format, data, artifact.config)
