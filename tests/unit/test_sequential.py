"""Anytime-valid confidence sequences (app/leaderboards/sequential.py): a hand-worked case, the
paper's formula transcribed term by term, time-uniform coverage by simulation (and Wilson's
interval, looked at after every value, missing far more often), and the settled verdicts."""

from __future__ import annotations

import math

import numpy as np
import pytest

from app.leaderboards import sequential, stats
from app.leaderboards.sequential import (
    difference_sequence,
    eb_bounds,
    mean_sequence,
    paired_arrivals,
    paired_values,
    settle,
    verdict,
)
from app.leaderboards.settled import settled_rows, verdict_text
from tests.conftest import untraced


def test_three_successes_by_hand():
    # x = 1, 1, 1 at alpha = 0.9 (a loose level, so three values already lift the lower
    # bound off 0). Every bet is at its cap of 1/2 (checked below), so
    #   centre = 1; half_t = (log(2/alpha) + sum v_i psi(1/2)) / (t / 2),
    #   psi(1/2) = (log 2 - 1/2) / 4, v_i = 4 (1 - mu_{i-1})^2 with mu_0 = 1/2, mu_1 = 3/4,
    #   mu_2 = 5/6: v = 1, 1/4, 1/9.
    a = 0.9
    L = math.log(2 / a)
    psi = (math.log(2) - 0.5) / 4
    half = [(L + 1 * psi) / 0.5, (L + (1 + 1 / 4) * psi) / 1.0, (L + (1 + 1 / 4 + 1 / 9) * psi) / 1.5]
    # The bets: lambda_t = min(sqrt(2 L / (s2_{t-1} t log(1 + t))), 1/2), s2_0 = 1/4,
    # s2_1 = (1/4 + (1 - 3/4)^2) / 2, s2_2 = (1/4 + 1/16 + (1 - 5/6)^2) / 3: all above 1/2.
    s2 = [1 / 4, (1 / 4 + 1 / 16) / 2, (1 / 4 + 1 / 16 + 1 / 36) / 3]
    assert all(math.sqrt(2 * L / (s2[t - 1] * t * math.log(1 + t))) > 0.5 for t in (1, 2, 3))
    assert half[0] > 1 and 0 < half[2] < half[1] < 1  # so the lows are 0, 1 - half_2, 1 - half_3
    seq = mean_sequence([1.0, 1.0, 1.0], alpha=a)
    assert [e.n for e in seq] == [1, 2, 3] and [e.mean for e in seq] == [1.0, 1.0, 1.0]
    assert seq[0].low == 0.0
    assert seq[1].low == pytest.approx(1 - half[1], abs=1e-9)  # 0.1403...
    assert seq[2].low == pytest.approx(1 - half[2], abs=1e-9)  # 0.4238...
    assert seq[2].low == pytest.approx(0.42384, abs=1e-5)
    assert all(e.high == 1.0 for e in seq)
    assert seq[2].method == sequential.CS_METHOD


def _theorem_2(x: list[float], alpha: float) -> tuple[list[float], list[float]]:
    """Waudby-Smith & Ramdas (2024), Theorem 2 (PrPl-EB), one term at a time in plain floats,
    with the running intersection and the bounds kept in [0, 1]."""
    L = math.log(2 / alpha)
    mu_prev, s2_prev = 0.5, 0.25
    total = sq = 0.0
    sum_lam = sum_lam_x = sum_v_psi = 0.0
    low, high, lo_run, hi_run = [], [], 0.0, 1.0
    for t, xt in enumerate(x, start=1):
        lam = min(math.sqrt(2 * L / (s2_prev * t * math.log(1 + t))), 0.5)
        v = 4 * (xt - mu_prev) ** 2
        psi = (-math.log(1 - lam) - lam) / 4
        sum_lam += lam
        sum_lam_x += lam * xt
        sum_v_psi += v * psi
        centre, half = sum_lam_x / sum_lam, (L + sum_v_psi) / sum_lam
        lo_run = max(lo_run, min(1.0, max(0.0, centre - half)))
        hi_run = min(hi_run, min(1.0, max(0.0, centre + half)))
        low.append(lo_run)
        high.append(max(hi_run, lo_run))
        total += xt
        mu = (0.5 + total) / (t + 1)
        sq += (xt - mu) ** 2
        mu_prev, s2_prev = mu, (0.25 + sq) / (t + 1)
    return low, high


def test_the_sequence_is_the_papers_formula_term_by_term():
    rng = np.random.default_rng(3)
    # Partial credit and 0/1 values; 400 of them, so the bets leave their cap.
    x = np.where(rng.random(400) < 0.5, rng.random(400), (rng.random(400) < 0.3).astype(float)).tolist()
    for alpha in (0.05, 0.01):
        want_low, want_high = _theorem_2(x, alpha)
        got = mean_sequence(x, alpha)
        assert max(abs(e.low - w) for e, w in zip(got, want_low)) < 1e-9
        assert max(abs(e.high - w) for e, w in zip(got, want_high)) < 1e-9
    # The bets did leave the cap (the sqrt branch is exercised) and the bounds are inside (0, 1).
    assert got[-1].low > 0.2 and got[-1].high < 0.6 and got[-1].mean == pytest.approx(sum(x) / len(x))


def test_the_sequence_of_one_minus_x_is_the_mirror():
    x = np.random.default_rng(4).random(200)
    low, high = eb_bounds(x)
    low_m, high_m = eb_bounds(1 - x)
    assert np.allclose(low_m, 1 - high, atol=1e-12) and np.allclose(high_m, 1 - low, atol=1e-12)
    # Nested: every later interval lies inside every earlier one.
    assert np.all(np.diff(low) >= 0) and np.all(np.diff(high) <= 0)


def _wilson_every_step(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    n = np.arange(1, x.shape[1] + 1)
    p = np.cumsum(x, axis=1) / n
    z = stats.Z95
    den = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / den
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return centre - half, centre + half


def _ever_missed(low: np.ndarray, high: np.ndarray, mean: float) -> float:
    return float(((low > mean) | (high < mean)).any(axis=1).mean())


# 300 streams of 500 values each, looked at after every value. The slack: 2.33 standard errors
# of a 5% share over 300 streams (a true 5% passes 99 times in 100).
STREAMS, LOOKS = 300, 500
SLACK = 2.33 * math.sqrt(0.05 * 0.95 / STREAMS)


@pytest.mark.parametrize("p", [0.05, 0.3, 0.5, 0.9])
def test_time_uniform_coverage_of_bernoulli_streams(p):
    x = (np.random.default_rng(int(p * 1000)).random((STREAMS, LOOKS)) < p).astype(float)
    low, high = eb_bounds(x)
    assert _ever_missed(low, high, p) <= 0.05 + SLACK
    # Wilson's fixed-n interval on the same streams, read after every value, misses at some n
    # in far more of them (41-53% here): the looks a confidence sequence survives.
    w_low, w_high = _wilson_every_step(x)
    assert _ever_missed(w_low, w_high, p) > 0.25
    # And the sequence is not trivially wide: by n = 500 it is narrower than 0.2.
    assert float((high[:, -1] - low[:, -1]).mean()) < 0.2


def test_time_uniform_coverage_of_partial_credit_and_of_differences():
    rng = np.random.default_rng(7)
    scores = rng.beta(2, 5, size=(STREAMS, LOOKS))  # mean 2/7
    low, high = eb_bounds(scores)
    assert _ever_missed(low, high, 2 / 7) <= 0.05 + SLACK
    # Paired differences of two agents with success 0.6 and 0.5: mean 0.1 on [-1, 1].
    d = (rng.random((STREAMS, LOOKS)) < 0.6).astype(float) - (rng.random((STREAMS, LOOKS)) < 0.5)
    low, high = eb_bounds((d + 1) / 2)
    assert _ever_missed(2 * low - 1, 2 * high - 1, 0.1) <= 0.05 + SLACK


def test_differences_map_back_to_their_scale():
    d = [1.0, -1.0, 0.0, 1.0, 0.5]
    got = difference_sequence(d)
    ref = mean_sequence([(x + 1) / 2 for x in d])
    for g, r in zip(got, ref):
        assert (g.low, g.high) == pytest.approx((2 * r.low - 1, 2 * r.high - 1), abs=1e-15)
    assert got[-1].mean == pytest.approx(0.3) and got[-1].n == 5


def test_verdicts_and_the_n_they_settled_at():
    # A always right, B always wrong: A above B from the first n whose sequence excludes 0.
    seq = difference_sequence([1.0] * 30)
    first = next(e.n for e in seq if e.low > 0)
    v = verdict([1.0] * 30, delta=0.05)
    assert v["verdict"] == "above" and v["sign"] == 1 and v["settled"] == first == 16
    assert verdict([-1.0] * 30, delta=0.05)["sign"] == -1
    assert verdict([1.0] * 15, delta=0.05) == {**verdict([1.0] * 15, delta=0.05), "verdict": "open", "settled": None}
    # Equal agents: within ±0.05 once the sequence fits inside [-0.05, 0.05].
    seq = difference_sequence([0.0] * 400)
    first = next(e.n for e in seq if -0.05 <= e.low and e.high <= 0.05)
    v = verdict([0.0] * 400, delta=0.05)
    assert v["verdict"] == "within" and v["settled"] == first and 200 < first < 400
    assert v["difference"].n == 400
    # No shared units: open, n 0.
    assert verdict([], delta=0.05)["verdict"] == "open" and verdict([], delta=0.05)["difference"].n == 0


def test_pairs_are_the_shared_units_in_the_order_both_arrived():
    a = [(1, "p1", 1.0), (2, "p2", 0.0), (3, "p3", 1.0), (9, "p1", 0.0)]  # p1's second value left out
    b = [(5, "p3", 0.0), (6, "p1", 1.0), (7, "p4", 1.0)]
    # p3 complete at 5, p1 at 6; p2 and p4 are not shared.
    assert paired_values(a, b) == [1.0 - 0.0, 1.0 - 1.0]
    assert paired_arrivals(a, b) == [(5, 1.0), (6, 0.0)]  # with when the pair's value arrived


def test_settle_gives_every_agent_and_pair_with_holm():
    arrivals = {
        "A": [(t, f"u{t}", 1.0) for t in range(60)],
        "B": [(t, f"u{t}", float(t % 2)) for t in range(60)],
        "C": [(t, f"u{t}", 0.0) for t in range(40)],
    }
    got = settle(arrivals, delta=0.05)
    assert got["agents"]["A"] == mean_sequence([1.0] * 60)[-1]
    assert got["agents"]["C"].n == 40
    by = {(p["first"], p["second"]): p for p in got["pairs"]}
    assert list(by) == [("A", "B"), ("A", "C"), ("B", "C")]
    # The first pair to settle (A and C) is tested as before, at Bonferroni's 0.05 / 3, and its
    # sequence is shown at that level.
    want = verdict([1.0] * 40, 0.05, 0.05 / 3)
    assert by["A", "C"]["verdict"] == "above" and by["A", "C"]["settled"] == want["settled"]
    assert by["A", "C"]["difference"] == want["difference"] and by["A", "C"]["difference"].n == 40
    # Every pair settled here: the open level would be 2 x 0.05 / (6 - 3).
    assert got["rejected"] == 3 and got["pair_alpha"] == pytest.approx(2 * 0.05 / 3)
    rows = settled_rows(arrivals, "path")
    assert rows[1]["verdict"] == f"A above C, settled after {by['A', 'C']['settled']} paths"
    assert rows[2]["verdict"] == verdict_text(by["B", "C"], "path", 0.05)
    assert verdict_text({"first": "A", "second": "B", "verdict": "above", "sign": -1, "settled": 1}, "path", 0.05) == (
        "B above A, settled after 1 path"
    )


def _four(n: int = 400) -> dict[str, list]:
    """A always right, D always wrong, B right 6 times in 10 and C 4 times in 10 (fixed
    patterns): five pairs far apart, and B against C close."""
    b = [1.0 if (t * 7) % 10 < 6 else 0.0 for t in range(n)]
    c = [1.0 if (t * 3) % 10 < 4 else 0.0 for t in range(n)]
    values = {"A": [1.0] * n, "B": b, "C": c, "D": [0.0] * n}
    return {a: [(t, t, v[t]) for t in range(n)] for a, v in values.items()}


def test_holm_gives_the_settled_pairs_share_of_alpha_to_the_open_one():
    """Issue 29: with 6 pairs, Bonferroni tested B against C at 0.05 / 6 to the end; Holm's
    step-down tests it at 2 x 0.05 / (12 - 5) once the five far pairs have settled, so it
    settles sooner, exactly where its evidence passes that threshold."""
    arrivals = _four()
    got = {(p["first"], p["second"]): p for p in settle(arrivals, 0.05)["pairs"]}
    d = paired_values(arrivals["B"], arrivals["C"])
    before = verdict(d, 0.05, 0.05 / 6)  # the rule before: each pair at alpha / m
    assert before["verdict"] == "above" and before["settled"] == 354
    now = got["B", "C"]
    assert now["verdict"] == "above" and now["sign"] == 1 and now["settled"] < before["settled"]
    assert all(p["settled"] < now["settled"] for k, p in got.items() if k != ("B", "C"))
    up = sequential.pair_evidence(d, 0.05, 0.05 / 6)["up"]
    assert now["settled"] == int(np.argmax(up > math.log(7 / 0.05))) + 1 == 317
    assert now["level"] == pytest.approx(2 * 0.05 / 7) and now["difference"].low > 0
    rows = settled_rows(arrivals, "path")
    assert rows[3]["verdict"] == "B above C, settled after 317 paths"
    # Each row says the level its verdict was reached at: the first to settle at 1 - 0.05 / 6,
    # B against C, the last, at 1 - 2 x 0.05 / 7.
    assert rows[3]["level"] == pytest.approx(100 * (1 - 2 * 0.05 / 7))
    first = min((p["settled_when"], k) for k, p in got.items())[1]
    assert next(r for r in rows if (r["first"], r["second"]) == first)["level"] == pytest.approx(100 * (1 - 0.05 / 6))
    # Without the step-down, every pair is as sequential.verdict at alpha / m says (the old rule).
    flat = settle(arrivals, 0.05, step_down=False)
    for p in flat["pairs"]:
        assert (
            p["settled"]
            == verdict(paired_values(arrivals[p["first"]], arrivals[p["second"]]), 0.05, 0.05 / 6)["settled"]
        )


def test_a_pair_settles_when_another_pair_settling_lowers_its_threshold():
    """Holm at one moment cascades: C against D has 29 shared units, whose evidence passes
    11 / 0.05 but not Bonferroni's 12 / 0.05 (6 pairs), and nothing more arrives for it; when
    A against B settles much later, C against D settles at that moment, after its 29 units."""
    cd = [0.0 if t % 5 == 0 else 1.0 for t in range(29)]
    up = sequential.pair_evidence(cd, 0.05, 0.05 / 6)["up"]
    assert math.log(11 / 0.05) < up[-1] <= math.log(12 / 0.05)
    arrivals = {
        "A": [(1000 + t, f"ab{t}", 1.0) for t in range(40)],
        "B": [(1000 + t, f"ab{t}", 0.0) for t in range(40)],
        "C": [(t, f"cd{t}", v) for t, v in enumerate(cd)],
        "D": [(t, f"cd{t}", 0.0) for t in range(29)],
    }
    got = {(p["first"], p["second"]): p for p in settle(arrivals, 0.05)["pairs"]}
    ab, cd_pair = got["A", "B"], got["C", "D"]
    assert ab["verdict"] == "above" and ab["settled_when"] >= 1000
    assert cd_pair["verdict"] == "above" and cd_pair["settled"] == 29
    assert cd_pair["settled_when"] == ab["settled_when"]  # not at its own last arrival (28)
    # The rule before never settled it.
    assert settle(arrivals, 0.05, step_down=False)["pairs"][-1]["verdict"] == "open"
    assert verdict(cd, 0.05, 0.05 / 6)["verdict"] == "open"


# Studies of agents whose judged rates are equal (the null: "within" is right, "above" wrong)
# or close, beside two far ones whose pairs settle early and hand their share of alpha on.
NULL_CLOSE = [0.5, 0.5, 0.5, 0.58, 0.05, 0.95]


def _wrong(pairs: list[dict], rates: list[float], delta: float) -> bool:
    for p in pairs:
        d = rates[int(p["first"])] - rates[int(p["second"])]
        if (p["verdict"] == "above" and p["sign"] * d <= 0) or (p["verdict"] == "within" and abs(d) > delta):
            return True
    return False


@pytest.mark.parametrize("alpha", [0.05, 0.2])
def test_holm_verdicts_settle_on_a_wrong_order_no_more_often_than_nominal(alpha):
    """Validity by simulation (issue 29): 150 studies of 6 agents (15 pairs), 200 units each,
    looked at after 50, 100 and 200 units; the share of studies with any settled verdict that
    is false (an "above" between equal agents or the wrong way round, a "within" between
    agents further apart than delta) stays within alpha plus Monte Carlo slack, while the far
    pairs do settle (so the step-down is exercised)."""
    rng = np.random.default_rng(29)
    studies, units, rates = 150, 200, NULL_CLOSE
    wrong, freed = 0, 0
    with untraced():
        for _ in range(studies):
            v = (rng.random((len(rates), units)) < np.asarray(rates)[:, None]).astype(float)
            arrivals = {str(a): [(u, u, v[a, u]) for u in range(units)] for a in range(len(rates))}
            bad = False
            for look in (50, 100, units):
                got = settle({a: x[:look] for a, x in arrivals.items()}, 0.05, alpha)
                bad = bad or _wrong(got["pairs"], rates, 0.05)
            wrong += bad
            freed += got["rejected"]
    assert freed / studies >= 8  # the far pairs (9) settle in nearly every study
    assert wrong / studies <= alpha + 2.33 * math.sqrt(alpha * (1 - alpha) / studies)


def test_bad_input_is_refused_with_a_message():
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        mean_sequence([0.5, 1.2])
    with pytest.raises(ValueError, match=r"\[-1, 1\]"):
        difference_sequence([-1.5])
    with pytest.raises(ValueError, match="finite"):
        mean_sequence([math.nan])
    with pytest.raises(ValueError, match="alpha"):
        mean_sequence([0.5], alpha=0.0)
    with pytest.raises(ValueError, match="delta"):
        verdict([0.0], delta=-0.1)
    assert mean_sequence([]) == []
