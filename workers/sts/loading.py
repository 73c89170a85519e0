"""Loading an uploaded STS policy (docs/kinds/sts-policies.md): never a pickle.

TorchScript archives go through torch.jit.load inside a sandboxed process (workers/sandbox.py):
they are code. Safetensors weights are data for our own architecture (policy.build), checked
tensor by tensor against the config before they are loaded. torch.load is never called on an
upload.
"""

from __future__ import annotations

import io

import torch
# Imported here, before the sandbox's lock: once it is on, no module file can be opened.
from safetensors.torch import load

from workers.sts.policy import build

# What the sandboxed process calls to turn an upload's bytes into a model.
LOADER = "workers.sts.loading:load_bytes"


def load_bytes(fmt: str, data: bytes, config: dict | None) -> torch.nn.Module:
    """A model from an artifact's bytes, on the CPU, in eval mode."""
    if fmt == "torchscript":
        model = torch.jit.load(io.BytesIO(data), map_location="cpu")
    elif fmt == "safetensors":
        model = build(config or {}, load(data))
    else:
        raise ValueError(f"unknown artifact format {fmt!r}")
    return model.eval()
