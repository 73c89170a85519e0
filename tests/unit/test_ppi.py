"""People and an automatic judge in one estimate (issue 28, stats.ppi_mean): a hand-worked
PPI++ point estimate (the paper's power-tuned weight), coverage of its 95% interval in a
simulation, an interval about as wide as people's alone when the judge is useless and much
narrower when it is good, and what is refused."""

from __future__ import annotations

import numpy as np
import pytest

from app.leaderboards import stats


def test_a_hand_worked_ppi_plus_plus_estimate():
    # A judge that agrees with people on all 10 sampled units (7 successes), and says success on
    # 20 of the 40 units people did not see. PPI++ (Angelopoulos, Duchi, Zrnic 2023, eq. for the
    # mean): lambda = Cov(Y, Yhat) / ((1 + n/N) Var(Yhat)), the covariance over the sample
    # (divided by n: 0.21) and the variance over all 50 judged units (by 49: 12.42 / 49); the
    # estimate lambda * mean(Yhat_unseen) + mean(Y) - lambda * mean(Yhat) = 0.7 - 0.2 lambda.
    y = [1, 0, 1, 1, 0, 1, 0, 1, 1, 1]
    got = stats.ppi_mean(y, y, [1] * 20 + [0] * 20)
    lam = 0.21 / ((1 + 10 / 40) * (12.42 / 49))
    assert got["mean"] == pytest.approx(0.7 - 0.2 * lam, abs=1e-12)
    assert got["low"] < got["mean"] < got["high"] and (got["n"], got["n_judge"]) == (10, 40)
    assert got["method"] == stats.PPI_PLUS and got["people"]["method"] == stats.WILSON
    assert got["people"]["mean"] == 0.7 and got["effective_n"] > 10  # the judge is worth more people


def _simulate(accuracy: float, reps: int, n: int = 200, big_n: int = 2000, p: float = 0.3, seed: int = 7):
    rng = np.random.default_rng(seed)
    covered, ratios = 0, []
    for _ in range(reps):
        truth = rng.binomial(1, p, n + big_n).astype(float)
        right = rng.uniform(size=n + big_n) < accuracy
        judge = np.where(right, truth, 1 - truth) if accuracy > 0 else rng.binomial(1, 0.5, n + big_n)
        got = stats.ppi_mean(truth[:n], judge[:n], judge[n:])
        covered += got["low"] <= p <= got["high"]
        people = truth[:n]
        classical = 2 * 1.959963984540054 * people.std(ddof=1) / np.sqrt(n)
        ratios.append((got["high"] - got["low"]) / classical)
    return covered / reps, float(np.mean(ratios))


def test_the_interval_covers_and_is_narrower_with_a_good_judge():
    coverage, ratio = _simulate(accuracy=0.85, reps=400)
    assert 0.93 <= coverage <= 0.97, coverage
    assert ratio < 0.8, ratio  # 2,000 judged units sharpen 200 people's estimate


def test_a_useless_judge_costs_nothing():
    # A coin flip for a judge: the tuned weight goes to about 0 and the interval is people's own.
    coverage, ratio = _simulate(accuracy=0.0, reps=300, seed=11)
    assert 0.93 <= coverage <= 0.97, coverage
    assert ratio <= 1.02, ratio


def test_a_judge_that_says_one_thing_is_worth_nothing_and_shares_stay_in_0_1():
    # The simulator calls every continuation a failure; people call 2 of 14 a success. PPI++'s
    # weight is 0/0 there: the estimate is people's own (2/14), worth exactly their 14, and the
    # normal interval, which reaches below 0, is clipped to the share's range.
    people = [1.0, 1.0] + [0.0] * 12
    got = stats.ppi_mean(people, [0.0] * 14, [0.0] * 30, unit="continuation")
    assert got["mean"] == pytest.approx(2 / 14) and got["effective_n"] == pytest.approx(14)
    assert got["low"] == 0.0 and 2 / 14 < got["high"] < 1
    none = stats.ppi_mean([1.0] * 12, [1.0] * 12, [1.0] * 5, unit="continuation")
    assert none["low"] is None and none["reason"].startswith("no spread")


def test_too_few_people_or_no_judge_gives_no_interval():
    few = stats.ppi_mean([1, 0, 1], [1, 0, 0], [1] * 50, unit="path")
    assert (few["mean"], few["low"], few["high"], few["effective_n"]) == (pytest.approx(2 / 3), None, None, None)
    assert few["reason"] == "3 paths judged by people: under 10, no interval"
    none_judged = stats.ppi_mean([1, 0] * 10, [1, 0] * 10, [])
    assert none_judged["low"] is None and none_judged["people"]["n"] == 20
    with pytest.raises(ValueError, match="same length"):
        stats.ppi_mean([1, 0], [1], [0])
    with pytest.raises(ValueError):
        stats.ppi_mean([1, float("nan")], [1, 0], [0])


# ---- How many people a target interval needs (stats.ppi_people_needed) -------------------------


def test_a_hand_worked_plan():
    # A pilot of 20 units: people say success on 10 (sigma = sqrt(20/76) = 0.5130), the judge
    # agrees on 18 of them (flips one success and one failure: Pearson rho = 0.8). People alone
    # need ceil((1.96 x 0.5130 / 0.05)^2) = 405 units for ±0.05; with the judge on all 2,000
    # units, n (N - rho^2 n0) = n0 N (1 - rho^2): n = 405 x 2000 x 0.36 / (2000 - 0.64 x 405)
    # = 167.5, which ppi-python's power analysis rounds to 168.
    y = [1.0] * 10 + [0.0] * 10
    judge = [1.0] * 9 + [0.0] + [0.0] * 9 + [1.0]
    plan = stats.ppi_people_needed(y, judge, 2000, 0.05, unit="continuation")
    assert plan["ppi_corr"] == pytest.approx(0.8)
    assert plan["people_alone"] == 405
    assert plan["people"] == 168 and plan["of"] == 2000 and plan["reachable"]
    assert plan["share"] == pytest.approx(plan["people"] / 2000)
    # A judge that says one thing everywhere is no help: people alone.
    assert stats.ppi_people_needed(y, [1.0] * 20, 2000, 0.05)["people"] == 405
    # A judge uncorrelated with people (Pearson rho 0: the judge gives 1 on half of people's
    # successes and half of their failures) is no help either: people alone, not a crash.
    blind = [1.0] * 5 + [0.0] * 5 + [1.0] * 5 + [0.0] * 5
    plan = stats.ppi_people_needed(y, blind, 2000, 0.05)
    assert (plan["people"], plan["ppi_corr"], plan["reachable"]) == (405, 0.0, True)
    # Out of reach: 300 units cannot give ±0.02 even with people on all of them.
    far = stats.ppi_people_needed(y, judge, 300, 0.02)
    assert far["people"] == 300 and not far["reachable"]
    # A pilot too small, or without spread, says why instead of a number.
    assert "under 10" in stats.ppi_people_needed(y[:9], judge[:9], 100, 0.05)["reason"]
    assert "same value" in stats.ppi_people_needed([1.0] * 12, [1.0] * 12, 100, 0.05, unit="path")["reason"]
    with pytest.raises(ValueError):
        stats.ppi_people_needed(y, judge, 10, 0.05)  # fewer units than the pilot


def test_the_plan_gives_about_the_width_it_promises_and_the_interval_covers():
    """Plan from a pilot of 60 units, then let people judge that many random units of 1,500 (the
    judge right on 90% of all): the PPI++ interval's half width averages the target (within 15%),
    covers the true share in 93-97% of 400 simulated studies, and people alone on the same number
    of units would be clearly wider."""
    rng = np.random.default_rng(11)
    big_n, p, target = 1500, 0.7, 0.05
    halves, covered, alone = [], 0, []
    for _ in range(400):
        truth = rng.binomial(1, p, big_n).astype(float)
        judge = np.where(rng.uniform(size=big_n) < 0.9, truth, 1 - truth)
        pilot = rng.choice(big_n, 60, replace=False)
        n = stats.ppi_people_needed(truth[pilot], judge[pilot], big_n, target)["people"]
        seen = np.zeros(big_n, dtype=bool)
        seen[rng.choice(big_n, n, replace=False)] = True
        got = stats.ppi_mean(truth[seen], judge[seen], judge[~seen])
        halves.append((got["high"] - got["low"]) / 2)
        covered += got["low"] <= truth.mean() <= got["high"]
        alone.append(1.959963984540054 * truth[seen].std(ddof=1) / np.sqrt(n))
    assert abs(np.mean(halves) / target - 1) < 0.15, np.mean(halves)
    assert 0.93 <= covered / 400 <= 0.97, covered
    assert np.mean(alone) > 1.3 * np.mean(halves)


def test_a_plan_from_an_entered_agreement_by_hand():
    # People alone: ceil((1.96 x 0.5 / 0.05)^2) = ceil(384.15) = 385. A judge agreeing 90% has
    # rho = 2 x 0.9 - 1 = 0.8, so beside it on 2,000 units people need
    # 385 x 2000 x (1 - 0.64) / (2000 - 0.64 x 385) = 277200 / 1753.6 = 158.07 -> 158.
    plan = stats.ppi_people_for_agreement(2000, 0.05, 0.9)
    assert plan["people"] == 158 and plan["people_alone"] == 385 and plan["reachable"]
    assert plan["ppi_corr"] == pytest.approx(0.8)
    # ppi-python's own answer for the same correlation and effective n.
    from ppi_py.ppi_power_analysis import ppi_power

    assert ppi_power(0.8, 0.0, 1.0, 1e-9, effective_n=385, n_max=2000)["n"] == 158
    # Its effective n: 158 x 2000 / (158 + 0.36 x 1842) = 385.0 -> 1.96 x 0.5 / sqrt(385) = 0.04995.
    assert plan["expected_half_width"] == pytest.approx(0.04995, abs=1e-5)
    # A coin-flip judge is worth nothing: people alone; too few units: every unit, and it says so.
    assert stats.ppi_people_for_agreement(2000, 0.05, 0.5)["people"] == 385
    small = stats.ppi_people_for_agreement(100, 0.05, 0.9)
    assert small["people"] == 100 and not small["reachable"] and small["expected_half_width"] > 0.05
    with pytest.raises(ValueError):
        stats.ppi_people_for_agreement(2000, 0.0, 0.9)


def test_a_plan_from_an_agreement_gets_its_width_in_simulation():
    # 300 simulated studies of 2,000 units, people's 0/1 values a share of 1/2, a judge agreeing
    # 90% of the time: people on the planned random 158 give PPI++ half widths averaging the
    # promised 0.05 (within 5%), and the intervals cover.
    plan = stats.ppi_people_for_agreement(2000, 0.05, 0.9)
    n, big = plan["people"], plan["of"]
    rng = np.random.default_rng(28)
    widths, covered = [], 0
    for _ in range(300):
        y = (rng.random(big) < 0.5).astype(float)
        yhat = np.where(rng.random(big) < 0.9, y, 1 - y)
        est = stats.ppi_mean(y[:n], yhat[:n], yhat[n:])
        widths.append((est["high"] - est["low"]) / 2)
        covered += est["low"] <= y.mean() <= est["high"]
    assert np.mean(widths) == pytest.approx(plan["expected_half_width"], rel=0.05)
    assert 0.92 <= covered / 300 <= 0.98
