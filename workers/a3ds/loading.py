"""Loading an uploaded A3DS captioner (docs/kinds/a3ds.md, "Captioner models"; how, for every
kind: workers/artifacts.py): safetensors weights are data for our own architecture
(captioner.build), checked tensor by tensor against the config.
"""

from __future__ import annotations

import torch
# Imported here, before the sandbox's lock: once it is on, no module file can be opened.
from safetensors.torch import load

from workers.a3ds.captioner import build
from workers.artifacts import load_validated, torch_model

# What the sandboxed process calls to turn an upload's bytes into a model.
LOADER = "workers.a3ds.loading:load_bytes"


def load_bytes(fmt: str, data: bytes, config: dict | None) -> torch.nn.Module:
    """A model from an artifact's bytes, on the CPU, in eval mode."""
    return torch_model(fmt, data, config, lambda weights, cfg: build(cfg, load(weights)))


def load_artifact(session, artifact):
    """The validated artifact's captioner: a TorchScript archive as a SandboxedModel, safetensors
    weights in our own architecture. ValueError for an artifact that is not valid or whose blob
    no longer matches its sha256."""
    return load_validated(artifact, LOADER, load_bytes)
