"""Our built-in STS policy (`film-cnn-gru`) and the wrapper that turns any model with the
policy interface into a rollout policy.

The network: each cell of the 7x7 view is the sum of embeddings of its object, colour and
state; two 3x3 convolutions, each modulated by FiLM (Perez et al. 2018) from a GRU over the
mission's words; the feature map flattened (where a thing is matters) with an embedding of the
direction; an MLP head to logits over minigrid's 7 actions. It implements the interface every
uploaded TorchScript policy implements too (docs/kinds/sts-policies.md):

    vocab_version() -> str                                   "proctor.sts.vocab/1"
    act(image uint8 [B,7,7,3], direction int64 [B], mission int64 [B,L]) -> logits float [B,7]
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor, nn

from app.kinds.sts.architectures import expected_shapes
from app.kinds.sts.env import ACTIONS
from app.kinds.sts.observations import (
    COLOURS,
    N_DIRECTIONS,
    OBJECTS,
    PAD,
    STATES,
    VIEW,
    VOCAB_VERSION,
    WORDS,
    encode_missions,
)
from workers.artifacts import weights_into

ARCHITECTURE = "film-cnn-gru"


class FilmPolicy(nn.Module):
    architecture = ARCHITECTURE

    def __init__(self, embed: int = 32, channels: int = 64, hidden: int = 128):
        super().__init__()
        self.embed, self.channels, self.hidden = embed, channels, hidden
        self.version = VOCAB_VERSION  # attributes: TorchScript reads no globals
        self.limits = [len(OBJECTS) - 1, len(COLOURS) - 1, len(STATES) - 1]
        self.objects = nn.Embedding(len(OBJECTS), embed)
        self.colours = nn.Embedding(len(COLOURS), embed)
        self.states = nn.Embedding(len(STATES), embed)
        self.words = nn.Embedding(len(WORDS), embed, padding_idx=PAD)
        self.gru = nn.GRU(embed, hidden, batch_first=True)
        self.conv1 = nn.Conv2d(embed, channels, 3, padding=1)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1)
        self.film1 = nn.Linear(hidden, 2 * channels)
        self.film2 = nn.Linear(hidden, 2 * channels)
        self.direction = nn.Embedding(N_DIRECTIONS, embed)
        self.head = nn.Sequential(
            nn.Linear(channels * VIEW * VIEW + embed, hidden),
            nn.ReLU(),
            nn.Linear(hidden, hidden),
            nn.ReLU(),
            nn.Linear(hidden, len(ACTIONS)),
        )

    def config(self) -> dict:
        return {
            "architecture": self.architecture,
            "vocab_version": VOCAB_VERSION,
            "embed": self.embed,
            "channels": self.channels,
            "hidden": self.hidden,
        }

    @torch.jit.export
    def vocab_version(self) -> str:
        return self.version

    def _mission(self, mission: Tensor) -> Tensor:
        """The GRU's state after the last word: padding on the right never reaches it, so a
        mission reads the same in any batch."""
        out, _ = self.gru(self.words(mission.clamp(0, self.words.num_embeddings - 1)))
        last = ((mission != 0).sum(1) - 1).clamp(min=0)
        return out[torch.arange(out.shape[0], device=out.device), last]

    @torch.jit.export
    def act(self, image: Tensor, direction: Tensor, mission: Tensor) -> Tensor:
        cells = image.long()
        # minigrid's indices are in range; clamped so that no input can index out of a table
        x = (
            self.objects(cells[..., 0].clamp(0, self.limits[0]))
            + self.colours(cells[..., 1].clamp(0, self.limits[1]))
            + self.states(cells[..., 2].clamp(0, self.limits[2]))
        )
        x = x.permute(0, 3, 1, 2)  # [B, embed, x, y]
        m = self._mission(mission)
        g1, b1 = self.film1(m).chunk(2, -1)
        x = torch.relu(self.conv1(x) * (1 + g1[:, :, None, None]) + b1[:, :, None, None])
        g2, b2 = self.film2(m).chunk(2, -1)
        x = torch.relu(self.conv2(x) * (1 + g2[:, :, None, None]) + b2[:, :, None, None])
        d = self.direction(direction.long().clamp(0, 3))
        return self.head(torch.cat([x.flatten(1), d], 1))

    def forward(self, image: Tensor, direction: Tensor, mission: Tensor) -> Tensor:
        return self.act(image, direction, mission)


def build(config: dict, state: dict[str, Tensor]) -> FilmPolicy:
    """The built-in policy from its config and weights; ValueError naming the first tensor
    that is missing, unexpected or of the wrong shape or dtype (in the config's words)."""
    if config.get("architecture") != ARCHITECTURE:
        raise ValueError(f"unknown architecture {config.get('architecture')!r}: use {ARCHITECTURE}")
    if config.get("vocab_version") != VOCAB_VERSION:
        raise ValueError(f"vocab_version must be {VOCAB_VERSION!r}")
    shapes = expected_shapes(config)  # torch-free, so checked before anything is allocated
    sizes = ", ".join(f"{k} {config[k]}" for k in ("embed", "channels", "hidden"))
    return weights_into(
        lambda: FilmPolicy(int(config["embed"]), int(config["channels"]), int(config["hidden"])),
        state,
        shapes,
        ARCHITECTURE,
        sizes,
    )


def observation_tensors(batch_obs: dict, cache: dict | None = None) -> tuple[Tensor, Tensor, Tensor]:
    """A rollout's batch_obs as the documented tensors: image uint8 [B,7,7,3], direction
    int64 [B], mission int64 [B,L] (CPU)."""
    image = torch.from_numpy(np.ascontiguousarray(batch_obs["image"], dtype=np.uint8))
    direction = torch.from_numpy(np.ascontiguousarray(batch_obs["direction"], dtype=np.int64))
    mission = torch.from_numpy(encode_missions(batch_obs["mission"], cache))
    return image, direction, mission


class TorchPolicy:
    """A rollout policy (app/kinds/sts/rollout.py) from a model with `act`: our own module on a
    device, or a SandboxedModel whose `act` runs in its sandboxed process. Observations go in
    chunks of `max_batch` (the sandbox's per-call time and memory limits are sized for a call
    of 64); the answer is the softmax of the logits, float64 numpy [B, 7]."""

    def __init__(self, model, device: str | torch.device = "cpu", max_batch: int = 64):
        self.model, self.device, self.max_batch = model, torch.device(device), max_batch
        self._words: dict[str, list[int]] = {}

    def logits(self, batch_obs: dict) -> Tensor:
        image, direction, mission = observation_tensors(batch_obs, self._words)
        out = []
        for s in range(0, image.shape[0], self.max_batch):
            # each chunk padded to its own longest mission: padding never changes an answer
            m = mission[s : s + self.max_batch]
            m = m[:, : max(1, int((m != PAD).sum(1).max()))]
            with torch.no_grad():
                out.append(
                    self.model.act(
                        image[s : s + self.max_batch].to(self.device),
                        direction[s : s + self.max_batch].to(self.device),
                        m.to(self.device),
                    )
                    .float()
                    .cpu()
                )
        return torch.cat(out)

    def __call__(self, batch_obs: dict) -> np.ndarray:
        logits = self.logits(batch_obs)
        if tuple(logits.shape) != (len(batch_obs["mission"]), len(ACTIONS)):
            raise ValueError(
                f"the policy answered logits of shape {list(logits.shape)}, expected "
                f"[{len(batch_obs['mission'])}, {len(ACTIONS)}]"
            )
        return torch.softmax(logits.double(), -1).numpy()

    def close(self) -> None:
        close = getattr(self.model, "close", None)
        if close is not None:
            close()
