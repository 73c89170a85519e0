"""The d_z cell every section's paired table shows (app/leaderboards/rows.py, effect_size_cell),
by hand: a finite d_z to three places, an infinite one as "∞" or "−∞" by its sign, an undefined
one as "—" with the reason (fewer than 2 units, or no effect and no spread)."""

from __future__ import annotations

import math

import pytest

from app.leaderboards.rows import DZ_INFINITE, DZ_NO_EFFECT, DZ_TOO_FEW, effect_size_cell


def test_a_finite_d_z_is_rounded_to_three_places_and_minus_zero_reads_zero():
    assert effect_size_cell(2 / 3) == 0.667
    assert effect_size_cell(-0.0001) == 0.0 and math.copysign(1, effect_size_cell(-0.0001)) == 1


def test_an_infinite_d_z_shows_its_sign():
    # Differences all 1 (mean 1, sd 0): +∞; all -1: −∞.
    assert effect_size_cell(math.inf, 5) == {"text": "∞", "reason": DZ_INFINITE}
    assert effect_size_cell(-math.inf, 5) == {"text": "−∞", "reason": DZ_INFINITE}


def test_an_undefined_d_z_says_why():
    assert effect_size_cell(math.nan, 1) == {"text": "—", "reason": DZ_TOO_FEW}
    # Two units whose differences are both 0: no effect and no spread, not "too few".
    assert effect_size_cell(math.nan, 2) == {"text": "—", "reason": DZ_NO_EFFECT}
    assert effect_size_cell(math.nan) == {"text": "—", "reason": DZ_NO_EFFECT}


# ---- the per-item majority's row (rows.majority_sums, majority_dict) -------------------------


def test_the_majority_rows_coverage_accuracy_and_consistency_by_hand():
    """Six items of the study in clusters c1 (2 items), c2 (2), c3 (2); the majority has a winner
    on five: c1 both right, c2 one right and one wrong, c3 one half-right (the other item has no
    answer yet), and no cluster on one more item of category "y". Coverage: 5 answered of 6 = 5/6.
    Accuracy: (1 + 1 + 1 + 0 + 0.5) / 5 = 0.7. Consistency: clusters answered whole are c1 and
    c2 (c3 lacks an item), all right only c1: 1 of 2."""
    from app.leaderboards.rows import est, majority_sums

    totals = (6, {"x": 5, "y": 1}, {"c1": 2, "c2": 2, "c3": 2})
    winners = [("x", "c1", 1.0), ("x", "c1", 1.0), ("x", "c2", 1.0), ("x", "c2", 0.0), ("y", "c3", 0.5)]
    row = majority_sums(winners, totals)
    assert (row["type"], row["name"]) == ("majority", "Human majority (per item)")
    assert (row["answered"], row["correct"]) == (5, 3.5)
    assert row["coverage"] == 5 / 6
    assert row["accuracy"] == est(3.5, 5) and row["accuracy"]["mean"] == 0.7
    assert row["by_category"] == {"x": est(3.0, 4), "y": est(0.5, 1)}
    assert row["consistency"] == est(1, 2) and row["consistency"]["mean"] == 0.5
    # c3 answered whole, its one item half right: answered whole, not all right (0.5 < 1).
    row = majority_sums([*winners, ("y", "c3", 1.0)], (6, {"x": 4, "y": 2}, {"c1": 2, "c2": 2, "c3": 2}))
    assert row["coverage"] == 1.0 and row["consistency"] == est(1, 3)
    # No cluster answered whole: no consistency, not 0 of 0.
    assert majority_sums([("x", "c1", 1.0)], totals)["consistency"] is None
    # Items without a cluster count for coverage and accuracy, never for consistency.
    row = majority_sums([("x", "", 1.0), ("x", "", 1.0)], (2, {"x": 2}, {"": 2}))
    assert (row["coverage"], row["consistency"]) == (1.0, None)


def test_holm_rows_adjusts_over_the_tested_rows_only():
    """By hand: three tested p-values 0.01, 0.04, 0.03 -> sorted 0.01*3 = 0.03, 0.03*2 = 0.06,
    0.04*1 = 0.04 -> non-decreasing 0.03, 0.06, 0.06. A too-few row keeps its cell and stays out
    of the family (with it, m = 4 and the first would be 0.04); a p of None shows None."""
    from app.leaderboards.rows import holm_rows, too_few_for_a_test

    few = too_few_for_a_test(3)
    rows = [{"p": 0.01}, {"p": 0.04}, {"p": few}, {"p": None}, {"p": 0.03}]
    holm_rows(rows)
    assert [r["p_holm"] for r in rows] == [
        pytest.approx(0.03),
        pytest.approx(0.06),
        few,
        None,
        pytest.approx(0.06),
    ]
