"""Loading an uploaded STS policy (docs/kinds/sts-policies.md; how, for every kind:
workers/artifacts.py): safetensors weights are data for our own architecture (policy.build),
checked tensor by tensor against the config before they are loaded.
"""

from __future__ import annotations

import torch

# Imported here, before the sandbox's lock: once it is on, no module file can be opened.
from safetensors.torch import load

from app.kinds.sts.env import ACTIONS
from workers.artifacts import torch_model
from workers.sts.policy import build

# What the sandboxed process calls to turn an upload's bytes into a model.
LOADER = "workers.sts.loading:load_bytes"
# The tensors each method of the interface answers: the sandbox's cap (workers/sandbox.py).
ANSWERS = {"act": lambda image, direction, mission: [(image.shape[0], len(ACTIONS))]}


def load_bytes(fmt: str, data: bytes, config: dict | None) -> torch.nn.Module:
    """A model from an artifact's bytes, on the CPU, in eval mode."""
    return torch_model(fmt, data, config, lambda weights, cfg: build(cfg, load(weights)))
