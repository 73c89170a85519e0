"""Loading an uploaded A3DS captioner (docs/kinds/a3ds.md, "Captioner models"): never a pickle.

As workers/hexagons/loading.py: TorchScript archives go through torch.jit.load inside a
sandboxed process (workers/sandbox.py), since they are code; safetensors weights are data for
our own architecture (captioner.build), checked tensor by tensor against the config.
"""

from __future__ import annotations

import hashlib
import io

import torch
# Imported here, before the sandbox's lock: once it is on, no module file can be opened.
from safetensors.torch import load

from workers.a3ds.captioner import build

# What the sandboxed process calls to turn an upload's bytes into a model.
LOADER = "workers.a3ds.loading:load_bytes"


def load_bytes(fmt: str, data: bytes, config: dict | None) -> torch.nn.Module:
    """A model from an artifact's bytes, on the CPU, in eval mode."""
    if fmt == "torchscript":
        model = torch.jit.load(io.BytesIO(data), map_location="cpu")
    elif fmt == "safetensors":
        model = build(config or {}, load(data))
    else:
        raise ValueError(f"unknown artifact format {fmt!r}")
    return model.eval()


def load_artifact(session, artifact):
    """The validated artifact's captioner: a TorchScript archive as a SandboxedModel (its
    methods run in the sandboxed process), safetensors weights in our own architecture.
    ValueError for an artifact that is not valid or whose blob no longer matches its sha256."""
    from app.storage import get_store
    from workers.sandbox import SandboxedModel

    if artifact.state != "valid":
        raise ValueError(f"artifact {artifact.id} (agent {artifact.agent_id} v{artifact.version}) "
                         f"is {artifact.state}, not valid: {artifact.verdict or 'not yet checked'}")
    data = get_store().get(artifact.blob_key)
    if hashlib.sha256(data).hexdigest() != artifact.sha256:
        raise ValueError(f"artifact {artifact.id}: the stored blob does not match its sha256")
    if artifact.format == "torchscript":
        return SandboxedModel(LOADER, artifact.format, data, artifact.config)
    return load_bytes(artifact.format, data, artifact.config)
