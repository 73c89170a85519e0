"""Loading an uploaded model (docs/agents.md), for every kind: never a pickle.

TorchScript archives go through torch.jit.load (TorchScript's own restricted unpickler reads
their constants; no Python class is imported) inside a sandboxed process (workers/sandbox.py):
they are code. Safetensors weights are data for a kind's own architecture, checked against
the config before they are loaded. torch.load is never called on an upload.

A kind keeps a module-level `load_bytes(fmt, data, config)` (the sandboxed process calls it
by its dotted path, the kind's LOADER), built on `torch_model` or made by `safetensors_loader`
from the kind's `build(config, state)` (on `built_in`), and loads a stored artifact with
`load_validated`.
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Callable, Mapping
from typing import Any

import torch

# Imported here, before the sandbox's lock: once it is on, no module file can be opened.
from safetensors.torch import load as load_safetensors


def torch_model(
    fmt: str, data: bytes, config: dict | None, build: Callable[[bytes, dict], torch.nn.Module]
) -> torch.nn.Module:
    """A model from an artifact's bytes, on the CPU, in eval mode: a TorchScript archive, or
    safetensors weights given to `build(weights_bytes, config)`."""
    if fmt == "torchscript":
        model = torch.jit.load(io.BytesIO(data), map_location="cpu")
    elif fmt == "safetensors":
        model = build(data, config or {})
    else:
        raise ValueError(f"unknown artifact format {fmt!r}")
    return model.eval()


def safetensors_loader(
    build: Callable[[dict, dict[str, torch.Tensor]], torch.nn.Module],
) -> Callable[[str, bytes, dict | None], torch.nn.Module]:
    """A kind's `load_bytes` for its own architecture's `build(config, state)`."""

    def load_bytes(fmt: str, data: bytes, config: dict | None) -> torch.nn.Module:
        return torch_model(fmt, data, config, lambda weights, cfg: build(cfg, load_safetensors(weights)))

    return load_bytes


# The sizes of every built-in architecture with a vocabulary, in its constructor's order.
SIZES = ("embed", "hidden", "channels")


def config_of(model: torch.nn.Module, *also: str) -> dict[str, Any]:
    """The config built_in builds `model` from again: its architecture, words and sizes (and
    the attributes `also`)."""
    fields = {k: getattr(model, k) for k in (*SIZES, *also)}
    return {"architecture": model.architecture, "words": list(model.words), **fields}


def built_in(
    config: dict,
    state: Mapping[str, torch.Tensor],
    architecture: str,
    check_vocabulary: Callable,
    shapes: Callable[[dict], Mapping[str, tuple[int, ...]]],
    make: Callable[..., torch.nn.Module],
    *also: str,
) -> torch.nn.Module:
    """One of our architectures (with a vocabulary) from its config and weights:
    `make(words, embed, hidden, channels)` (the config's sizes) with the weights, once the
    config names the architecture, its words pass the kind's check and every tensor is what
    `shapes(config)` says (weights_into). ValueError naming the first thing wrong and the
    config's sizes (and the fields `also`)."""
    if config.get("architecture") != architecture:
        raise ValueError(f"unknown architecture {config.get('architecture')!r}: use {architecture}")
    words = check_vocabulary(config.get("words"))
    if isinstance(words, str):
        raise ValueError(f"words (the vocabulary) {words}")
    named = ", ".join(f"{k} {config[k]}" for k in (*SIZES, *also)) + f", {len(words)} words"
    return weights_into(
        lambda: make(words, *(int(config[k]) for k in SIZES)), state, shapes(config), architecture, named
    )


def weights_into(
    make: Callable[[], torch.nn.Module],
    state: Mapping[str, torch.Tensor],
    shapes: Mapping[str, tuple[int, ...]],
    architecture: str,
    sizes: str,
) -> torch.nn.Module:
    """The model `make()` builds (one of our architectures, from the config) with safetensors
    weights `state`, in eval mode, once they are exactly what the config says: every tensor of
    `shapes` there, of that shape and floating-point, and no other; checked before the model is
    built. `sizes` names the config's sizes in each refusal (ValueError)."""
    for name, shape in shapes.items():
        if name not in state:
            raise ValueError(f"tensor {name!r} is missing (the config: {sizes})")
        got = tuple(state[name].shape)
        if got != shape:
            raise ValueError(f"tensor {name!r} has shape {list(got)}, but the config ({sizes}) needs {list(shape)}")
        if not state[name].is_floating_point():
            raise ValueError(f"tensor {name!r} has dtype {state[name].dtype}, expected a floating-point one")
    extra = sorted(set(state) - set(shapes))
    if extra:
        raise ValueError(f"tensor {extra[0]!r} is not part of {architecture} (the config: {sizes})")
    model = make()
    model.load_state_dict({k: v.float() for k, v in state.items()})
    return model.eval()


def verified_bytes(artifact) -> bytes:
    """The artifact's stored bytes. Only artifacts a worker has validated may run: anything
    else raises ValueError, as does a blob whose bytes no longer match the checksum taken at
    upload."""
    from app.storage import get_store

    if artifact.state != "valid":
        raise ValueError(
            f"artifact {artifact.id} (agent {artifact.agent_id} v{artifact.version}) "
            f"is {artifact.state}, not valid: {artifact.verdict or 'not yet checked'}"
        )
    data = get_store().get(artifact.blob_key)
    if hashlib.sha256(data).hexdigest() != artifact.sha256:
        raise ValueError(f"artifact {artifact.id}: the stored blob does not match its sha256")
    return data


def load_validated(artifact, loader: str, load_bytes: Callable, device: str | None = None):
    """The validated artifact's model: a TorchScript archive as a SandboxedModel (its methods
    run in the sandboxed process, on `device` there), safetensors weights in the kind's own
    architecture here (CPU, eval mode; move it with .to(device))."""
    from workers.sandbox import SandboxedModel

    data = verified_bytes(artifact)
    if artifact.format == "torchscript":
        kw = {"device": device} if device else {}
        return SandboxedModel(loader, artifact.format, data, artifact.config, **kw)
    return load_bytes(artifact.format, data, artifact.config)
