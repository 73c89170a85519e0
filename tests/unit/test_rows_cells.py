"""The d_z cell every section's paired table shows (app/leaderboards/rows.py, effect_size_cell),
by hand: a finite d_z to three places, an infinite one as "∞" or "−∞" by its sign, an undefined
one as "—" with the reason (fewer than 2 units, or no effect and no spread)."""

from __future__ import annotations

import math

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
