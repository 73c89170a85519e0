"""Loading an uploaded speaker or listener (docs/agents.md): never a pickle.

TorchScript archives go through torch.jit.load (TorchScript's own restricted unpickler reads
their constants; no Python class is imported) inside a sandboxed process (workers/sandbox.py):
they are code. Safetensors weights go through the built-in architectures of train.load_model:
data for our own code, with sizes checked at upload and a validation run in the sandbox behind
them. torch.load is never called on an upload.
"""

from __future__ import annotations

import hashlib
import io

import torch
from sqlalchemy.orm import Session

from app.agents.models import AgentArtifact
from app.storage import get_store
from workers.navigation.train import load_model
from workers.sandbox import SandboxedModel

# What the sandboxed process calls to turn an upload's bytes into a model.
LOADER = "workers.navigation.loading:load_bytes"


def load_bytes(fmt: str, data: bytes, config: dict | None) -> torch.nn.Module:
    """A model from an artifact's bytes, on the CPU, in eval mode."""
    if fmt == "torchscript":
        model = torch.jit.load(io.BytesIO(data), map_location="cpu")
    elif fmt == "safetensors":
        model = load_model(data, config or {})
    else:
        raise ValueError(f"unknown artifact format {fmt!r}")
    return model.eval()


def load_artifact(session: Session, artifact: AgentArtifact):
    """The validated artifact's model (CPU, eval mode; move it with .to(device)): a TorchScript
    archive as a SandboxedModel (its methods run in the sandboxed process), safetensors weights
    in our own architecture.

    Only artifacts a worker has validated may run: anything else raises ValueError, as does a
    blob whose bytes no longer match the checksum taken at upload."""
    if artifact.state != "valid":
        raise ValueError(f"artifact {artifact.id} (agent {artifact.agent_id} v{artifact.version}) "
                         f"is {artifact.state}, not valid: {artifact.verdict or 'not yet checked'}")
    data = get_store().get(artifact.blob_key)
    if hashlib.sha256(data).hexdigest() != artifact.sha256:
        raise ValueError(f"artifact {artifact.id}: the stored blob does not match its sha256")
    if artifact.format == "torchscript":
        return SandboxedModel(LOADER, artifact.format, data, artifact.config)
    return load_bytes(artifact.format, data, artifact.config)
