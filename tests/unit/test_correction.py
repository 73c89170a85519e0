"""Rogan-Gladen correction with an interval (app/leaderboards/correction.py): a case worked by
hand, the undefined cases, clusters resampled whole, and the interval's coverage in a small
simulation where the true share and the raters' sensitivity and specificity are known."""

from __future__ import annotations

import numpy as np
import pytest

from app.leaderboards.correction import rogan_gladen, rogan_gladen_estimate


def test_a_hand_worked_case():
    # 10 continuations, 6 marked success: p = 0.6. Reference: 9 of 10 success-labelled marked
    # success (sensitivity 0.9), 8 of 10 failure-labelled marked failure (specificity 0.8).
    # (0.6 + 0.8 - 1) / (0.9 + 0.8 - 1) = 0.4 / 0.7.
    got = rogan_gladen_estimate([1] * 6 + [0] * 4, [True] * 9 + [False], [True] * 8 + [False] * 2)
    assert got["mean"] == pytest.approx(0.4 / 0.7)
    assert got["n"] == 10 and "Rogan-Gladen" in got["method"] and "bootstrap" in got["method"]
    assert 0 <= got["low"] < got["mean"] < got["high"] <= 1
    # Clipped: an observed share below the false-positive rate 1 - specificity is 0.
    assert rogan_gladen_estimate([0] * 9 + [1], [True] * 9 + [False], [True] * 8 + [False] * 2)["mean"] == 0.0
    assert rogan_gladen(0.99, 0.9, 0.8) == 1.0 and rogan_gladen(0.6, 0.9, 0.8) == pytest.approx(0.4 / 0.7)
    # The same seed, the same interval.
    again = rogan_gladen_estimate([1] * 6 + [0] * 4, [True] * 9 + [False], [True] * 8 + [False] * 2)
    assert again == got


def test_perfect_raters_leave_the_share_as_it_is():
    got = rogan_gladen_estimate([1, 1, 0, 1], [True] * 5, [True] * 5)
    assert got["mean"] == 0.75 and got["low"] <= 0.75 <= got["high"]


@pytest.mark.parametrize(
    "sens, spec, words",
    [
        ([True, False], [False, True], "0.500 + 0.500 <= 1"),
        ([False] * 3 + [True], [True, False], "0.250 + 0.500 <= 1"),
        ([], [True], "labelled success"),
        ([True], [], "labelled failure"),
    ],
)
def test_none_with_a_reason_when_it_cannot_be_computed(sens, spec, words):
    got = rogan_gladen_estimate([1, 0, 1], sens, spec)
    assert (got["mean"], got["low"], got["high"], got["n"]) == (None, None, None, 3)
    assert words in got["reason"]


def test_no_continuations():
    got = rogan_gladen_estimate([], [True], [True])
    assert got["mean"] is None and got["n"] == 0 and got["reason"] == "no continuations"


def test_clusters_are_resampled_whole():
    # Two scenarios, one always succeeding, one always failing: resampling scenarios whole is
    # far more uncertain than resampling the 20 continuations singly.
    y = [1] * 10 + [0] * 10
    ref = ([True] * 20, [True] * 20)
    single = rogan_gladen_estimate(y, *ref)
    whole = rogan_gladen_estimate(y, *ref, clusters=["a"] * 10 + ["b"] * 10)
    assert whole["mean"] == single["mean"] == 0.5
    assert (whole["low"], whole["high"]) == (0.0, 1.0)
    assert (
        single["high"] - single["low"] < 0.6 and "clusters" in whole["method"] and "continuations" in single["method"]
    )
    with pytest.raises(ValueError):
        rogan_gladen_estimate(y, *ref, clusters=["a"])


def _coverage(n, n_ref, truth, sens, spec, replicates, seed=7) -> float:
    rng = np.random.default_rng(seed)
    observed = truth * sens + (1 - truth) * (1 - spec)  # the chance a continuation is marked success
    hits = 0
    for r in range(replicates):
        y = (rng.random(n) < observed).astype(float)
        got = rogan_gladen_estimate(y, rng.random(n_ref) < sens, rng.random(n_ref) < spec, n_boot=1000, seed=r)
        hits += got["low"] <= truth <= got["high"]
    return hits / replicates


@pytest.mark.parametrize(
    "n, n_ref, truth, sens, spec",
    [
        (200, 40, 0.6, 0.9, 0.85),  # measured 0.937 (300 replicates)
        (50, 10, 0.3, 0.9, 0.9),  # measured 0.927
    ],
)
def test_the_interval_covers_the_true_share(n, n_ref, truth, sens, spec):
    coverage = _coverage(n, n_ref, truth, sens, spec, replicates=300)
    print(f"coverage n={n} reference={n_ref} truth={truth}: {coverage:.3f}")
    assert 0.90 <= coverage <= 0.99
