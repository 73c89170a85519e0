"""Hexagons metrics (Lachmy et al. 2022, section 5; DESIGN.md section 6).

f(board) is a set of (tile, colour) elements; gold and hypothesis are compared as sets:

- board-based: the non-white tiles of the board after the step;
- action-based: the tiles whose colour changed in the step, with their new colour: gold
  against the gold board before the step, the hypothesis against the board it was executed on.
  Painting a tile white is a change (an element (tile, 0)).

P = |gold & hyp| / |hyp|, R = |gold & hyp| / |gold|, F1 their harmonic mean, EM = the sets
are equal. Both sets empty (nothing painted and nothing to paint) counts 1 on every metric;
exactly one empty gives P = R = F1 = EM = 0. A score is the mean over steps.

Two implementations that must agree to the last bit (tests/unit/test_hex_metrics.py runs both
on every released step): `step_metrics`, one step with Python sets, the reference; and
`score_arrays`, many steps at once on numpy arrays, what scoring uses.

Agreement (data README): the instructor's and two verifiers' boards after a step give a tag by
board exact match (A both verifiers match the instructor, V1 / V2 only that one, VV the
verifiers match each other only, F none) and the scores (I-V1, I-V2, V1-V2) board-based F1.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from app.kinds.hexagons.board import WHITE

KINDS = ("action", "board")
PARTS = ("f1", "precision", "recall", "em")
KEYS = tuple(f"{k}_{p}" for k in KINDS for p in PARTS)
# The columns a reader sees, in the paper's words.
LABELS = {
    "action_f1": "Action F1",
    "action_precision": "Action P",
    "action_recall": "Action R",
    "action_em": "Action EM",
    "board_f1": "Board F1",
    "board_precision": "Board P",
    "board_recall": "Board R",
    "board_em": "Board EM",
}


# ---- one step, with sets: the reference ----------------------------------------------------


def board_set(board: Sequence[int]) -> set[tuple[int, int]]:
    return {(t, c) for t, c in enumerate(board) if c != WHITE}


def action_set(before: Sequence[int], after: Sequence[int]) -> set[tuple[int, int]]:
    return {(t, c) for t, (b, c) in enumerate(zip(before, after)) if b != c}


def prf(gold: set, hyp: set) -> dict[str, float]:
    """precision, recall, f1 and em of one hypothesis set against one gold set."""
    if not gold and not hyp:
        return {"f1": 1.0, "precision": 1.0, "recall": 1.0, "em": 1.0}
    both = len(gold & hyp)
    p = both / len(hyp) if hyp else 0.0
    r = both / len(gold) if gold else 0.0
    f1 = 2 * p * r / (p + r) if p + r > 0 else 0.0
    return {"f1": f1, "precision": p, "recall": r, "em": 1.0 if gold == hyp else 0.0}


def step_metrics(
    gold_before: Sequence[int], gold_after: Sequence[int], hyp_before: Sequence[int], hyp_after: Sequence[int]
) -> dict[str, float]:
    """The eight metrics of one step (KEYS)."""
    action = prf(action_set(gold_before, gold_after), action_set(hyp_before, hyp_after))
    board = prf(board_set(gold_after), board_set(hyp_after))
    return {**{f"action_{k}": v for k, v in action.items()}, **{f"board_{k}": v for k, v in board.items()}}


# ---- many steps, vectorised -----------------------------------------------------------------


def _prf_arrays(n_gold: np.ndarray, n_hyp: np.ndarray, n_both: np.ndarray) -> dict[str, np.ndarray]:
    """The same arithmetic as prf, element-wise (so the results are the same floats)."""
    n_gold, n_hyp, n_both = (x.astype(np.float64) for x in (n_gold, n_hyp, n_both))
    empty = (n_gold == 0) & (n_hyp == 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.where(n_hyp > 0, n_both / n_hyp, 0.0)
        r = np.where(n_gold > 0, n_both / n_gold, 0.0)
        f1 = np.where(p + r > 0, 2 * p * r / (p + r), 0.0)
    em = ((n_both == n_gold) & (n_both == n_hyp)).astype(np.float64)
    return {
        "f1": np.where(empty, 1.0, f1),
        "precision": np.where(empty, 1.0, p),
        "recall": np.where(empty, 1.0, r),
        "em": em,
    }


def score_arrays(
    gold_before: np.ndarray, gold_after: np.ndarray, hyp_before: np.ndarray, hyp_after: np.ndarray
) -> dict[str, np.ndarray]:
    """The eight metrics of N steps at once: each argument an (N, 180) array of colour codes;
    returns KEYS -> (N,) float64."""
    same = gold_after == hyp_after
    gold_act = gold_before != gold_after
    hyp_act = hyp_before != hyp_after
    action = _prf_arrays(gold_act.sum(1), hyp_act.sum(1), (gold_act & hyp_act & same).sum(1))
    gold_on = gold_after != WHITE
    hyp_on = hyp_after != WHITE
    board = _prf_arrays(gold_on.sum(1), hyp_on.sum(1), (gold_on & hyp_on & same).sum(1))
    return {**{f"action_{k}": v for k, v in action.items()}, **{f"board_{k}": v for k, v in board.items()}}


def as_array(boards: Iterable[Sequence[int]]) -> np.ndarray:
    return np.asarray(list(boards), dtype=np.uint8).reshape(-1, 180)


def mean(per_step: Mapping[str, np.ndarray] | Sequence[Mapping[str, float]]) -> dict[str, float | None]:
    """The mean over steps of each metric (None over no steps)."""
    if isinstance(per_step, Mapping):
        return {k: float(per_step[k].mean()) if len(per_step[k]) else None for k in KEYS}
    n = len(per_step)
    return {k: sum(m[k] for m in per_step) / n if n else None for k in KEYS}


# ---- agreement between the instructor and the verifiers --------------------------------------


def agreement_tag(instructor: Sequence[int], verifier1: Sequence[int], verifier2: Sequence[int]) -> str:
    """A, V1, V2, VV or F by board exact match (the data README's definition)."""
    return tag_of(
        tuple(verifier1) == tuple(instructor),
        tuple(verifier2) == tuple(instructor),
        tuple(verifier1) == tuple(verifier2),
    )


def tag_of(i1: bool, i2: bool, v: bool) -> str:
    """The tag from which boards match: the instructor's and verifier 1's (i1), the
    instructor's and verifier 2's (i2), the two verifiers' (v)."""
    if i1 and i2:
        return "A"
    if i1:
        return "V1"
    if i2:
        return "V2"
    return "VV" if v else "F"


def board_f1(a: Sequence[int], b: Sequence[int]) -> float:
    """Board-based F1 (symmetric: swapping gold and hypothesis swaps P and R only)."""
    return prf(board_set(a), board_set(b))["f1"]


def agreement_scores(
    instructor: Sequence[int], verifier1: Sequence[int], verifier2: Sequence[int]
) -> tuple[float, float, float]:
    """(instructor-verifier 1, instructor-verifier 2, verifier 1-verifier 2) board-based F1;
    the release rounds them to two decimals."""
    return (board_f1(instructor, verifier1), board_f1(instructor, verifier2), board_f1(verifier1, verifier2))


def agreed(tag: str | None) -> bool | None:
    """At least one verifier reproduced the instructor's board: the paper's "agreed step"
    (Table 6 counts A, V1 and V2)."""
    return None if tag is None else tag in ("A", "V1", "V2")
