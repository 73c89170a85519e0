"""Our built-in Hexagons executor (`gru-attend-conv`), with the interface every uploaded
executor implements (app/kinds/hexagons/architectures.py):

    vocabulary() -> List[str]
    execute(tokens int64 [B, L], board int64 [B, 180]) -> logits float [B, 180, 8]

The network: a GRU reads the instruction; every tile is the sum of an embedding of its colour
and one of its position (row and column are what instructions name); each tile attends over
the instruction's words (which words speak of it), then two 3x3 convolutions over the 10 x 18
grid, the first modulated by FiLM from the GRU's last state, carry a tile's neighbours' context
(a 3x3 window holds the six hex neighbours of either column parity; the position embedding
tells the parities apart). A 1x1 convolution gives each tile's colour logits, plus a learned
bonus for keeping the colour it has: untrained, the executor paints nothing (the paper's
"no action"), and most tiles of most steps do not change.
"""

from __future__ import annotations

import math
from typing import List

import torch
from torch import Tensor, nn

from app.kinds.hexagons.architectures import ARCHITECTURE, check_vocabulary, expected_shapes
from app.kinds.hexagons.board import COLOURS, COLS, ROWS, TILES
from workers.artifacts import built_in, config_of, load_validated, safetensors_loader


class HexExecutor(nn.Module):
    architecture = ARCHITECTURE

    def __init__(self, words: List[str], embed: int = 32, hidden: int = 64, channels: int = 48):
        super().__init__()
        self.embed, self.hidden, self.channels = embed, hidden, channels
        self.words: List[str] = list(words)
        self.n_words = len(words)
        self.keep = nn.Parameter(torch.tensor(4.0))
        self.tokens = nn.Embedding(len(words), embed, padding_idx=0)
        self.gru = nn.GRU(embed, hidden, batch_first=True)
        self.colours = nn.Embedding(len(COLOURS), channels)
        self.tiles = nn.Embedding(TILES, channels)
        self.query = nn.Linear(channels, hidden)
        self.value = nn.Linear(hidden, channels)
        self.film = nn.Linear(hidden, 2 * channels)
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1)
        self.out = nn.Conv2d(channels, len(COLOURS), 1)
        self.scale = 1.0 / math.sqrt(hidden)
        self.shape = [ROWS, COLS, TILES, len(COLOURS)]  # attributes: TorchScript reads no globals

    def config(self) -> dict:
        return config_of(self)

    @torch.jit.export
    def vocabulary(self) -> List[str]:
        return self.words

    @torch.jit.export
    def execute(self, tokens: Tensor, board: Tensor) -> Tensor:
        tokens = tokens.long().clamp(0, self.n_words - 1)
        rows, cols, tiles, k = self.shape[0], self.shape[1], self.shape[2], self.shape[3]
        b = board.long().clamp(0, k - 1)
        n = tokens.shape[0]
        mask = tokens != 0
        mask[:, 0] = True  # padding on the right never reaches a real word; id 0 alone is read as a word
        states, _ = self.gru(self.tokens(tokens))  # [B, L, H]
        last = (mask.sum(1) - 1).clamp(min=0)
        summary = states[torch.arange(n, device=states.device), last]  # [B, H]
        x = self.colours(b) + self.tiles.weight.unsqueeze(0)  # [B, 180, C]
        scores = torch.bmm(self.query(x), states.transpose(1, 2)) * self.scale  # [B, 180, L]
        scores = scores.masked_fill(~mask.unsqueeze(1), -1e9)
        x = x + self.value(torch.bmm(torch.softmax(scores, -1), states))
        grid = x.transpose(1, 2).reshape(n, self.channels, rows, cols)
        gamma, beta = self.film(summary).chunk(2, -1)
        grid = torch.relu(self.conv1(grid) * (1 + gamma[:, :, None, None]) + beta[:, :, None, None])
        grid = torch.relu(self.conv2(grid)) + grid
        logits = self.out(grid).reshape(n, k, tiles).transpose(1, 2)
        return logits + self.keep * nn.functional.one_hot(b, k).to(logits.dtype)

    def forward(self, tokens: Tensor, board: Tensor) -> Tensor:
        return self.execute(tokens, board)


def build(config: dict, state: dict[str, Tensor]) -> HexExecutor:
    """The built-in executor from its config and weights; ValueError naming the first tensor
    that is missing, unexpected or of the wrong shape or dtype."""
    return built_in(config, state, ARCHITECTURE, check_vocabulary, expected_shapes, HexExecutor)


def batch_tensors(token_ids: list[list[int]], boards: list[list[int]]) -> tuple[Tensor, Tensor]:
    """Token ids padded with 0 to the longest, and the boards, as the interface's tensors."""
    width = max(1, max(len(t) for t in token_ids))
    tokens = torch.zeros(len(token_ids), width, dtype=torch.int64)
    for i, t in enumerate(token_ids):
        tokens[i, : len(t)] = torch.tensor(t, dtype=torch.int64)
    return tokens, torch.tensor(boards, dtype=torch.int64).reshape(-1, TILES)


def _forward(model, token_ids: list[list[int]], boards: list[list[int]], device: torch.device) -> list[list[int]]:
    """One forward pass: the next board of each step (argmax over the colours)."""
    from app.kinds.hexagons.architectures import MAX_TOKENS

    tokens, board = batch_tensors([t[:MAX_TOKENS] for t in token_ids], boards)
    with torch.no_grad():
        logits = model.execute(tokens.to(device), board.to(device))
    if not isinstance(logits, Tensor) or tuple(logits.shape) != (len(boards), TILES, len(COLOURS)):
        shape = list(logits.shape) if isinstance(logits, Tensor) else type(logits).__name__
        raise ValueError(f"the executor answered {shape}, expected logits [{len(boards)}, {TILES}, {len(COLOURS)}]")
    return logits.argmax(-1).cpu().tolist()


def execute_procedures(
    model,
    procedures: list[tuple[list[str], list[int], list[list[int]] | None]],
    on: str,
    batch_size: int = 32,
    device: str | torch.device = "cpu",
) -> list[list[list[int]]]:
    """The executor's board after every step of every procedure, each procedure given as
    (instructions, initial board, gold boards after each step). on "gold": each step from the
    gold board before it (the paper's oracle board-state), `batch_size` steps per forward pass;
    on "own": from the executor's own board after the step before (predicted board-state),
    step k of `batch_size` procedures per forward pass."""
    from app.kinds.hexagons.architectures import encode

    dev = torch.device(device)
    # Checked again here, as A3DS's and navigation's runs do: validation saw one answer, a model
    # may give another (issue 26, re-attack round 12: 60,000 words, or one of 100,000 characters).
    words = model.vocabulary()
    words = check_vocabulary(list(words) if isinstance(words, (list, tuple)) else words)
    if isinstance(words, str):
        raise ValueError(f"vocabulary() {words}")
    ids = [encode(list(instructions), words) for instructions, _, _ in procedures]
    out: list[list] = [[None] * len(p[0]) for p in procedures]
    if on == "gold":
        flat = [(p, k) for p, proc in enumerate(procedures) for k in range(len(proc[0]))]
        for s in range(0, len(flat), batch_size):
            chunk = flat[s : s + batch_size]
            before = [procedures[p][1] if k == 0 else procedures[p][2][k - 1] for p, k in chunk]
            for (p, k), board in zip(chunk, _forward(model, [ids[p][k] for p, k in chunk], before, dev)):
                out[p][k] = board
        return out
    if on != "own":
        raise ValueError(f"on must be gold or own, not {on!r}")
    for s in range(0, len(procedures), batch_size):
        chunk = list(range(s, min(s + batch_size, len(procedures))))
        current = {p: list(procedures[p][1]) for p in chunk}
        for k in range(max(len(procedures[p][0]) for p in chunk)):
            live = [p for p in chunk if k < len(procedures[p][0])]
            for p, board in zip(live, _forward(model, [ids[p][k] for p in live], [current[p] for p in live], dev)):
                out[p][k] = current[p] = board
    return out


# What the sandboxed process calls to turn an upload's bytes into an executor.
LOADER = "workers.hexagons.executor:load_bytes"
# The tensors each method of the interface answers: the sandbox's cap (workers/sandbox.py).
ANSWERS = {"execute": lambda tokens, board: [(tokens.shape[0], TILES, len(COLOURS))]}
load_bytes = safetensors_loader(build)


def load_artifact(session, artifact):
    """The validated artifact's executor (see workers/artifacts.py: load_validated)."""
    return load_validated(artifact, LOADER, load_bytes)
