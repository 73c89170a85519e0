"""The study plan (app/leaderboards/plan.py, issue 29.1): hand-worked cases, the majority's error,
the expected half-width against its exact value, and the planned power against the share of
separated studies in a fresh simulation written here, apart from the plan's."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import binom

from app.errors import InputError
from app.leaderboards import plan, stats
from tests.conftest import untraced


def test_hand_worked_perfect_agents_and_cost():
    # Error 0, one annotation, an agent right on every item and one wrong on every item: each
    # study is the same, 10 of 10 and 0 of 10. Wilson for 10 of 10: low = n / (n + z^2)
    # = 10 / 13.8415 = 0.72246, so the half-width is (1 - 0.72246) / 2 = 0.13877.
    result = plan.run_plan(plan.make_input(scores="1, 0", items=10, annotations=1, error=0, payment="0.25", studies=10))
    top, bottom = result["agents"]
    assert top["half_width"] == pytest.approx(0.13877, abs=1e-5)
    assert bottom["half_width"] == pytest.approx(0.13877, abs=1e-5)
    low, high = stats.wilson_interval(10, 10)
    assert top["half_width"] == (high - low) / 2
    assert top["mean_estimate"] == 1.0 and bottom["mean_estimate"] == 0.0
    # Difference 1 on every item: Bonett-Price's interval is far from 0 in every study.
    assert result["power"]["power"] == 1.0 and result["power"]["difference"] == 1.0
    # Cost = items x agents x annotations x payment = 10 x 2 x 1 x 0.25.
    assert result["annotations_total"] == 20 and result["cost"] == 5.0


def test_cost_counts_every_annotation():
    result = plan.run_plan(plan.make_input(scores="0.8,0.7,0.6", items=40, annotations=5, payment=0.1, studies=10))
    assert result["annotations_total"] == 40 * 3 * 5
    assert result["cost"] == pytest.approx(40 * 3 * 5 * 0.1)


def test_majority_error_by_hand():
    # Three workers each wrong with 0.2: the majority is wrong when 2 or 3 are,
    # 3 * 0.2^2 * 0.8 + 0.2^3 = 0.104. Two workers: both wrong (0.04), or a tie (2 * 0.2 * 0.8)
    # that the first, wrong with 0.2, decides: 0.04 + 0.32 * 0.2 = 0.104.
    assert plan.majority_error(0.2, 3) == pytest.approx(0.104)
    assert plan.majority_error(0.2, 2) == pytest.approx(0.104)
    assert plan.majority_error(0.2, 1) == pytest.approx(0.2)
    assert plan.majority_error(0.0, 4) == 0.0


def test_simulated_scores_shrink_as_the_majority_error_says():
    # True 0.9 with three workers at error 0.2: people see 0.9 * 0.896 + 0.1 * 0.104 = 0.8168.
    result = plan.run_plan(plan.make_input(scores="0.9", items=200, annotations=3, error=0.2, studies=400, seed=3))
    agent = result["agents"][0]
    assert agent["observed"] == pytest.approx(0.8168)
    se = math.sqrt(0.8168 * 0.1832 / 200 / 400)
    assert abs(agent["mean_estimate"] - 0.8168) < 4 * se


def test_half_width_matches_its_exact_expectation():
    # Error 0, one annotation, p = 0.5, 20 items: the count is Binomial(20, 0.5), so the expected
    # Wilson half-width is sum_k P(k) * half(k) exactly.
    n, p, studies = 20, 0.5, 2000
    halves = np.array([(lambda lo_hi: (lo_hi[1] - lo_hi[0]) / 2)(stats.wilson_interval(k, n)) for k in range(n + 1)])
    pmf = binom.pmf(np.arange(n + 1), n, p)
    exact = float(pmf @ halves)
    sd = math.sqrt(float(pmf @ (halves - exact) ** 2))
    result = plan.run_plan(plan.make_input(scores=[p], items=n, annotations=1, studies=studies, seed=11))
    assert abs(result["agents"][0]["half_width"] - exact) < 4 * sd / math.sqrt(studies)


def _fresh_power(high: float, low: float, items: int, annotations: int, error: float, studies: int, seed: int) -> float:
    """The share of studies whose paired interval excludes 0, simulated item by item here."""
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(studies):
        scored = []
        for p in (high, low):
            scores = []
            for _item in range(items):
                truth = "right" if rng.random() < p else "wrong"
                other = "wrong" if truth == "right" else "right"
                votes = [other if rng.random() < error else truth for _ in range(annotations)]
                counts = {v: votes.count(v) for v in set(votes)}
                scores.append(1.0 if stats.majority_vote(counts, votes[0]) == "right" else 0.0)
            scored.append(scores)
        diff = stats.paired_effect(scored[0], scored[1])["difference"]
        hits += diff.low > 0 or diff.high < 0
    return hits / studies


def test_planned_power_matches_a_fresh_simulation():
    studies = 400
    result = plan.run_plan(
        plan.make_input(scores="0.75,0.6", items=60, annotations=3, error=0.15, studies=studies, seed=1)
    )
    planned = result["power"]["power"]
    assert 0.15 < planned < 0.85  # a case where power is in question, not 0 or 1
    with untraced():
        fresh = _fresh_power(0.75, 0.6, 60, 3, 0.15, studies, seed=2024)
    assert abs(planned - fresh) < 4 * math.sqrt(2 * planned * (1 - planned) / studies)


def test_power_grows_with_items():
    small = plan.run_plan(plan.make_input(scores="0.8,0.7", items=50, studies=300))["power"]["power"]
    large = plan.run_plan(plan.make_input(scores="0.8,0.7", items=400, studies=300))["power"]["power"]
    assert large > small + 0.3


def test_one_baseline_and_differences():
    made = plan.make_input(scores="0.8", agents=3, difference=0.1, items=30)
    assert made.scores == pytest.approx((0.8, 0.7, 0.6))
    assert plan.make_input(scores="0.8", accuracy=0.9, items=30).error == pytest.approx(0.1)


def test_a_judge_saves_people():
    result = plan.run_plan(
        plan.make_input(scores="0.8,0.7", items=400, judge_agreement=0.95, people=100, payment=1, studies=40)
    )
    agent = result["agents"][0]
    assert agent["ppi_half_width"] < agent["half_width"]
    assert agent["effective_n"] > 100
    judge = result["judge"]
    assert 10 <= judge["people_needed"] < 100 and judge["items_saved"] == 100 - judge["people_needed"]
    assert judge["cost_saved"] == judge["items_saved"] * 2 * 3 * 1
    assert result["annotations_total"] == 100 * 2 * 3  # people judge their 100 items only


@pytest.mark.parametrize(
    ("values", "field"),
    [
        ({"scores": "0.8,1.2"}, "scores"),
        ({"scores": "x"}, "scores"),
        ({"scores": ""}, "scores"),
        ({"items": "1"}, "items"),
        ({"items": "2.5"}, "items"),
        ({"annotations": "0"}, "annotations"),
        ({"error": "0.7"}, "error"),
        ({"error": "nan"}, "error"),
        ({"error": "0.1", "accuracy": "0.9"}, "accuracy"),
        ({"accuracy": "0.3"}, "accuracy"),
        ({"difference": "0"}, "difference"),
        ({"judge_agreement": "0.2"}, "judge_agreement"),
        ({"people": "20"}, "people"),
        ({"payment": "-1"}, "payment"),
        ({"studies": "5"}, "studies"),
        ({"scores": "0.8", "agents": "3"}, "difference"),
        ({"scores": "0.8,0.7", "agents": "3"}, "agents"),
    ],
)
def test_bad_values_name_their_field(values, field):
    raw = {"scores": "0.8,0.7", "items": "50", **values}
    with pytest.raises(InputError) as caught:
        plan.make_input(**raw)
    assert caught.value.field == field
