"""The `hexagons.validate` job: load an uploaded executor in the sandbox and run it on a few
steps (docs/kinds/hexagons.md, "Executors").

As workers/sts/validate.py: both formats load in a sandboxed process of their own
(workers/sandbox.py), safetensors weights are first checked tensor by tensor against their
config (executor.build), and each check stops at the first problem with a verdict that names it
("missing method execute()", "execute() returned shape [4, 180], expected [4, 180, 8]"). A
verdict never repeats the model's own text (its words included).
"""

from __future__ import annotations


import torch

from app.kinds.hexagons.architectures import check_vocabulary, encode
from app.kinds.hexagons.board import COLOURS, TILES
from workers.hexagons.executor import LOADER, batch_tensors
from workers.validation import (
    Invalid,
    call_checked,
    check_interface,
    checked_words,
    one_role,
)

INTERFACE = ("vocabulary", "execute")
# Steps of different lengths on different boards: every upload is tried on the same batch.
INSTRUCTIONS = (
    "Paint the third tile of the first column red.",
    "Now draw a green flower around the red tile, six tiles around it.",
    "",
    "Repeat the same shape in blue two columns to the right, then fill the tile below each yellow.",
)
_TOLERANCE = 1e-4


def boards() -> list[list[int]]:
    """A blank board, one red tile, a few colours, every tile painted."""
    one = [0] * TILES
    one[36] = 4
    some = [(t * 7) % len(COLOURS) if t % 5 == 0 else 0 for t in range(TILES)]
    return [[0] * TILES, one, some, [1 + t % (len(COLOURS) - 1) for t in range(TILES)]]


def _logits(model, tokens: torch.Tensor, board: torch.Tensor) -> torch.Tensor:
    b = tokens.shape[0]
    want = f"[{b}, {TILES}, {len(COLOURS)}]"
    out = call_checked(model, "execute", tokens, board)
    if not isinstance(out, torch.Tensor):
        raise Invalid(f"execute() returned {type(out).__name__}, expected a tensor of logits {want}")
    if tuple(out.shape) != (b, TILES, len(COLOURS)):
        shape = "[" + ", ".join(str(int(n)) for n in out.shape) + "]"
        raise Invalid(
            f"execute() returned shape {shape}, expected {want} (logits over the {len(COLOURS)} "
            f"colours of each of the {TILES} tiles)"
        )
    if not out.is_floating_point():
        raise Invalid(f"execute() returned dtype {out.dtype}, expected a floating-point tensor")
    if not bool(torch.isfinite(out).all()):
        raise Invalid("execute() returned NaN or an infinite logit")
    return out.double()


def check_executor(model) -> str:
    """The checks, in order; the verdict for a model that passes them all."""
    check_interface(model, INTERFACE, "an executor", "docs/kinds/hexagons.md")
    words = checked_words(model, check_vocabulary)
    ids = encode(list(INSTRUCTIONS), words)
    tokens, board = batch_tensors(ids, boards())
    b = tokens.shape[0]
    logits = _logits(model, tokens, board)
    if not torch.allclose(_logits(model, tokens, board), logits, atol=_TOLERANCE, rtol=0):
        raise Invalid(
            "execute() answered the same steps differently the second time: an executor must be deterministic"
        )
    for i in range(b):  # alone, without padding: the same answer
        alone = _logits(model, tokens[i : i + 1, : len(ids[i])], board[i : i + 1])
        if not torch.allclose(alone, logits[i : i + 1], atol=_TOLERANCE, rtol=0):
            raise Invalid(
                f"execute() answered step {i} differently alone than in a batch of {b}: an answer must "
                "not depend on the other steps or on the instructions' padding"
            )
    return f"executor: execute() ran on {b} steps, alone and batched; vocabulary of {len(words)} words"


validate_bytes, run_validation = one_role("Hexagons", "executor", LOADER, check_executor)
