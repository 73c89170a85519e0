"""The `a3ds.validate` job: load an uploaded captioner in the sandbox and caption a few pairs
(docs/kinds/a3ds.md, "Captioner models").

As workers/hexagons/validate.py: both formats load in a sandboxed process of their own
(workers/sandbox.py), safetensors weights are first checked tensor by tensor against their
config (captioner.build), and each check stops at the first problem with a verdict that names
it ("missing method caption()", "caption() returned shape [4], expected [4, L]"). A verdict
never repeats the model's own text (its words included).
"""

from __future__ import annotations


import torch

from app.kinds.a3ds.architectures import MAX_CAPTION_TOKENS, check_vocabulary
from workers.a3ds.captioner import LOADER, pictures
from workers.validation import (
    Invalid,
    call_checked,
    check_interface,
    checked_words,
    one_role,
)

INTERFACE = ("vocabulary", "caption")
# Pairs differing in one, three and six features, and a scene against itself: every upload is
# tried on the same batch.
PAIRS = ((12500, 12501), (0, 247_311), (479_999, 1234), (60_000, 60_000))


def _ids(model, target: torch.Tensor, distractor: torch.Tensor, n_words: int) -> list[list[int]]:
    """The rows' ids up to their end (what the caption's text is made of)."""
    b = target.shape[0]
    out = call_checked(model, "caption", target, distractor)
    if not isinstance(out, torch.Tensor):
        raise Invalid(f"caption() returned {type(out).__name__}, expected a tensor of token ids [{b}, L]")
    shape = "[" + ", ".join(str(int(n)) for n in out.shape) + "]"
    if out.dim() != 2 or out.shape[0] != b or not 1 <= out.shape[1] <= MAX_CAPTION_TOKENS:
        raise Invalid(f"caption() returned shape {shape}, expected [{b}, L] with L from 1 to {MAX_CAPTION_TOKENS}")
    if out.dtype != torch.int64:
        raise Invalid(f"caption() returned dtype {out.dtype}, expected int64 token ids")
    if bool(((out < 0) | (out >= n_words)).any()):
        raise Invalid(f"caption() returned a token id outside the vocabulary (0 to {n_words - 1})")
    rows = []
    for row in out.tolist():
        ends = [k for k, i in enumerate(row) if i in (0, 2)]
        rows.append(row[: ends[0]] if ends else row)
    return rows


def check_captioner(model) -> str:
    """The checks, in order; the verdict for a model that passes them all."""
    check_interface(model, INTERFACE, "a captioner", "docs/kinds/a3ds.md")
    words = checked_words(model, check_vocabulary)
    target, distractor = pictures([t for t, _ in PAIRS]), pictures([d for _, d in PAIRS])
    ids = _ids(model, target, distractor, len(words))
    if _ids(model, target, distractor, len(words)) != ids:
        raise Invalid(
            "caption() captioned the same pairs differently the second time: a captioner must be deterministic"
        )
    for i in range(len(PAIRS)):
        if _ids(model, target[i : i + 1], distractor[i : i + 1], len(words))[0] != ids[i]:
            raise Invalid(
                f"caption() captioned pair {i} differently alone than in a batch of {len(PAIRS)}: a "
                "caption must not depend on the other pairs"
            )
    mean = sum(map(len, ids)) / len(ids)
    return (
        f"captioner: caption() ran on {len(PAIRS)} pairs, alone and batched (mean {mean:.1f} tokens); "
        f"vocabulary of {len(words)} words"
    )


validate_bytes, run_validation = one_role("A3DS", "captioner", LOADER, check_captioner)
