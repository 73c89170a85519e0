"""A kind's `train` job (`<kind>.train`), for every kind that trains a built-in model: train as
the kind's `proctor train` command does, then upload the weights as a new version of the
agent's model, which the kind's `validate` job checks like any upload (docs/agents.md)."""

from __future__ import annotations

import inspect
import json
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

# train(options, device, echo, epoch_done) -> (model, report): the kind's training, where
# `options` are the job's params among the kind's JOB_OPTIONS, with "epochs" always set.
Train = Callable[[dict[str, Any], str, Callable[[str], None], Callable[[int, float], None]], tuple[Any, dict[str, Any]]]


@dataclass(frozen=True)
class Recipe:
    """A built-in network's sizes and its training schedule: `proctor train`'s options of
    app.agents.training.SIZES and --seed. A trainer takes them as keywords and fills any left
    out from its kind's defaults, the command's (`of`)."""

    epochs: int
    batch: int
    lr: float
    seed: int = 0
    embed: int = 0
    hidden: int = 0
    channels: int = 0

    @classmethod
    def of(cls, defaults: Mapping[str, float], given: Mapping[str, Any]) -> Recipe:
        return cls(**{**defaults, **given})


# Where a training runs, where its files go and its callbacks: never a queued job's to say.
NOT_JOB_OPTIONS = {"device", "out", "name", "echo", "epoch_done", "bars", "recipe"}


def job_options(run_training: Callable[..., Any], defaults: Mapping[str, float]) -> tuple[str, ...]:
    """The training options a queued job may carry (`proctor train ... --agent-id`): the
    keywords of the kind's run_training and of its Recipe (`defaults`, and the seed), but
    those of NOT_JOB_OPTIONS."""
    names = set(inspect.signature(run_training).parameters) | set(defaults) | {"seed"}
    return tuple(sorted(names - NOT_JOB_OPTIONS))


class Adam:
    """Adam (Kingma and Ba, 2015) with torch.optim.Adam's defaults and, on the CPU, its very
    arithmetic (its single-tensor step, op for op: the same weights to the bit,
    tests/unit/test_training_adam.py). torch's own imports torch._dynamo on its first
    construction: 1.5 s of CPU in every process that trains (each `proctor demo`, each training
    command and job), more than a test's whole training."""

    def __init__(
        self, params: Any, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8
    ) -> None:
        self.params = list(params)
        self.lr, (self.beta1, self.beta2), self.eps = lr, betas, eps
        self.exp_avg = [torch.zeros_like(p, memory_format=torch.preserve_format) for p in self.params]
        self.exp_avg_sq = [torch.zeros_like(p, memory_format=torch.preserve_format) for p in self.params]
        # Per parameter, as torch counts them: a parameter without a gradient takes no step.
        self.steps = [0.0] * len(self.params)

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self) -> None:
        b1, b2 = self.beta1, self.beta2
        for i, p in enumerate(self.params):
            if p.grad is None:
                continue
            grad, m, v = p.grad, self.exp_avg[i], self.exp_avg_sq[i]
            self.steps[i] += 1.0
            step = self.steps[i]
            m.lerp_(grad, 1 - b1)
            v.mul_(b2).addcmul_(grad, grad, value=1 - b2)
            step_size = self.lr / (1 - b1**step)
            denom = (v.sqrt() / (1 - b2**step) ** 0.5).add_(self.eps)
            p.addcdiv_(m, denom, value=-step_size)


def descend(opt: Adam, loss: torch.Tensor, params: Any, clip: float | None = 1.0) -> float:
    """One optimiser step on `loss`, the gradient's norm over `params` clipped to `clip` first
    (None: not clipped); the loss as a number."""
    opt.zero_grad()
    loss.backward()  # type: ignore[no-untyped-call]
    if clip is not None:
        torch.nn.utils.clip_grad_norm_(params, clip)
    opt.step()
    return float(loss.detach())


def save_model(model: torch.nn.Module, folder: str | Path, name: str) -> tuple[Path, Path]:
    """`<name>.safetensors` (weights) and `<name>.json` (config): a built-in architecture's
    upload format."""
    from safetensors.torch import save_file

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    weights, config = folder / f"{name}.safetensors", folder / f"{name}.json"
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(weights))
    config.write_text(json.dumps(model.config(), indent=1))  # type: ignore[operator]
    return weights, config


def seed_all(seed: int) -> None:
    """Python's, NumPy's and torch's generators: the same seed, the same model (on the CPU)."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


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
