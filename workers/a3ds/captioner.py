"""Our built-in A3DS captioner (`cnn-gru-captioner`), with the interface every uploaded
captioner implements (app/kinds/a3ds/architectures.py):

    vocabulary() -> List[str]
    caption(target uint8 [B, 64, 64, 3], distractor uint8 [B, 64, 64, 3]) -> int64 [B, L]

The network: four stride-2 convolutions read a 64 x 64 scene down to 4 x 4, a linear layer makes
it a vector; the GRU decoder's first state comes from the target's vector, and with
`with_distractor` also from the target's minus the distractor's (what tells them apart: the
paper's contrastive setting). Each step the GRU reads the last word and the target's vector;
greedy decoding, at most `max_length` words. No batch statistics anywhere, so a caption never
depends on the other pairs of the batch.
"""

from __future__ import annotations

from typing import List, Tuple

import numpy as np
import torch
from torch import Tensor, nn

from app.kinds.a3ds.architectures import (
    ARCHITECTURE,
    MAX_CAPTION_TOKENS,
    check_vocabulary,
    decode,
    expected_shapes,
)
from workers.artifacts import built_in, config_of, load_validated, safetensors_loader


class Captioner(nn.Module):
    architecture = ARCHITECTURE

    def __init__(
        self,
        words: List[str],
        embed: int = 32,
        hidden: int = 128,
        channels: int = 16,
        with_distractor: bool = False,
        max_length: int = 24,
    ):
        super().__init__()
        self.words: List[str] = list(words)
        self.embed, self.hidden, self.channels = embed, hidden, channels
        self.with_distractor, self.max_length = with_distractor, max_length
        c = channels
        self.conv1 = nn.Conv2d(3, c, 4, stride=2, padding=1)
        self.conv2 = nn.Conv2d(c, 2 * c, 4, stride=2, padding=1)
        self.conv3 = nn.Conv2d(2 * c, 2 * c, 4, stride=2, padding=1)
        self.conv4 = nn.Conv2d(2 * c, 2 * c, 4, stride=2, padding=1)
        self.project = nn.Linear(2 * c * 16, hidden)
        self.init = nn.Linear((2 if with_distractor else 1) * hidden, hidden)
        self.tokens = nn.Embedding(len(words), embed, padding_idx=0)
        self.gru = nn.GRU(embed + hidden, hidden, batch_first=True)
        self.out = nn.Linear(hidden, len(words))

    def config(self) -> dict:
        return config_of(self, "with_distractor", "max_length")

    def encode(self, images: Tensor) -> Tensor:
        x = images.float().permute(0, 3, 1, 2) / 255.0 - 0.5
        x = torch.relu(self.conv1(x))
        x = torch.relu(self.conv2(x))
        x = torch.relu(self.conv3(x))
        x = torch.relu(self.conv4(x))
        return torch.relu(self.project(x.flatten(1)))

    def start(self, target: Tensor, distractor: Tensor) -> Tuple[Tensor, Tensor]:
        """(the GRU's first state [1, B, H], the target's vector [B, H])."""
        t = self.encode(target)
        seen = torch.cat([t, t - self.encode(distractor)], 1) if self.with_distractor else t
        return torch.tanh(self.init(seen)).unsqueeze(0), t

    def forward(self, target: Tensor, distractor: Tensor, tokens: Tensor) -> Tensor:
        """Teacher forcing: the logits of each next word given the words before, [B, L, V]."""
        h, t = self.start(target, distractor)
        x = torch.cat([self.tokens(tokens), t.unsqueeze(1).expand(-1, tokens.shape[1], -1)], 2)
        states, _ = self.gru(x, h)
        return self.out(states)

    @torch.jit.export
    def vocabulary(self) -> List[str]:
        return self.words

    @torch.jit.export
    def caption(self, target: Tensor, distractor: Tensor) -> Tensor:
        h, t = self.start(target, distractor)
        n = target.shape[0]
        word = torch.ones(n, 1, dtype=torch.int64, device=target.device)  # <start>
        done = torch.zeros(n, dtype=torch.bool, device=target.device)
        out: List[Tensor] = []
        for _ in range(self.max_length):
            x = torch.cat([self.tokens(word), t.unsqueeze(1)], 2)
            state, h = self.gru(x, h)
            word = self.out(state[:, -1]).argmax(-1, keepdim=True)
            word = word.masked_fill(done.unsqueeze(1), 0)
            out.append(word)
            done = done | (word.squeeze(1) == 2)
            if bool(done.all()):
                break
        return torch.cat(out, 1)


def build(config: dict, state: dict[str, Tensor]) -> Captioner:
    """The built-in captioner from its config and weights; ValueError naming the first tensor
    that is missing, unexpected or of the wrong shape or dtype."""
    return built_in(
        config,
        state,
        ARCHITECTURE,
        check_vocabulary,
        expected_shapes,
        lambda words, *sizes: Captioner(words, *sizes, bool(config["with_distractor"]), int(config["max_length"])),
        "with_distractor",
    )


def pictures(scenes: list[int]) -> Tensor:
    """The scenes as the interface's uint8 [B, 64, 64, 3] (drawn, not read from the store: the
    renderer is deterministic and the arrays are what the model needs)."""
    from app.kinds.a3ds.render import render

    return torch.from_numpy(np.stack([render(s, 64) for s in scenes]))


def caption_pairs(
    model,
    pairs: list[tuple[int, int]],
    batch_size: int = 32,
    device: str | torch.device = "cpu",
    images: dict[int, np.ndarray] | None = None,
) -> list[str]:
    """The model's caption of each (target, distractor) pair, decoded to text. `images`: scenes
    already drawn (training reuses them). ValueError for an answer outside the interface."""
    from app.kinds.a3ds.render import render

    dev = torch.device(device)
    # Checked again here: validation saw four pairs, a model may answer others differently.
    words = model.vocabulary()
    words = check_vocabulary(list(words) if isinstance(words, (list, tuple)) else words)
    if isinstance(words, str):
        raise ValueError(f"vocabulary() {words}")
    images = images if images is not None else {}
    out: list[str] = []
    for s in range(0, len(pairs), batch_size):
        chunk = pairs[s : s + batch_size]
        for scene in {x for p in chunk for x in p} - set(images):
            images[scene] = render(scene, 64)
        target = torch.from_numpy(np.stack([images[t] for t, _ in chunk])).to(dev)
        distractor = torch.from_numpy(np.stack([images[d] for _, d in chunk])).to(dev)
        with torch.no_grad():
            ids = model.caption(target, distractor)
        if not isinstance(ids, Tensor) or ids.dim() != 2 or ids.shape[0] != len(chunk) or ids.dtype != torch.int64:
            what = f"{list(ids.shape)} {ids.dtype}" if isinstance(ids, Tensor) else type(ids).__name__
            raise ValueError(f"the captioner answered {what}, expected int64 token ids [{len(chunk)}, L]")
        if ids.shape[1] > MAX_CAPTION_TOKENS:
            raise ValueError(
                f"the captioner answered {ids.shape[1]} tokens a caption, at most {MAX_CAPTION_TOKENS} are taken"
            )
        out.extend(decode(row, words) for row in ids.cpu().tolist())
    return out


# What the sandboxed process calls to turn an upload's bytes into a captioner.
LOADER = "workers.a3ds.captioner:load_bytes"
# The tensors each method of the interface answers: the sandbox's cap (workers/sandbox.py).
ANSWERS = {"caption": lambda target, distractor: [(target.shape[0], MAX_CAPTION_TOKENS)]}
load_bytes = safetensors_loader(build)


def load_artifact(session, artifact):
    """The validated artifact's captioner: a TorchScript archive as a SandboxedModel, safetensors
    weights in our own architecture. ValueError for an artifact not valid or whose blob no
    longer matches its sha256."""
    return load_validated(artifact, LOADER, load_bytes)
