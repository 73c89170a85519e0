"""Tests for app.leaderboards.stats, cross-checked against independent implementations
(krippendorff, statsmodels, scipy) and published worked examples."""

from __future__ import annotations

import dataclasses
from collections import Counter
import math
import subprocess
import sys
from decimal import Decimal

import numpy as np
import pytest

from app.leaderboards import stats as S

krippendorff = pytest.importorskip("krippendorff")
sm_proportion = pytest.importorskip("statsmodels.stats.proportion")
sm_inter_rater = pytest.importorskip("statsmodels.stats.inter_rater")

try:
    import scipy.special
    import scipy.stats
except ImportError:  # pragma: no cover
    scipy = None

needs_scipy = pytest.mark.skipif(scipy is None, reason="scipy is not installed")


def _reliability_to_counts(data: np.ndarray) -> list[dict]:
    """coders x units matrix with NaN for missing -> per-unit value counts."""
    items = []
    for unit in data.T:
        vals = unit[~np.isnan(unit)]
        v, c = np.unique(vals, return_counts=True)
        items.append({float(a): int(b) for a, b in zip(v, c)})
    return items


# ---------------------------------------------------------------------------
# Wilson / proportion


@pytest.mark.parametrize(
    "successes,n",
    [(0, 1), (1, 1), (0, 10), (10, 10), (3, 10), (1, 2), (17, 40), (1, 1000), (999, 1000), (5000, 10007)],
)
def test_wilson_matches_statsmodels(successes, n):
    low, high = S.wilson_interval(successes, n)
    ref_low, ref_high = sm_proportion.proportion_confint(successes, n, alpha=0.05, method="wilson")
    assert low == pytest.approx(ref_low, abs=1e-12)
    assert high == pytest.approx(ref_high, abs=1e-12)
    assert 0.0 <= low <= successes / n <= high <= 1.0


def test_wilson_custom_z_matches_statsmodels_90_percent():
    low, high = S.wilson_interval(7, 25, z=1.6448536269514722)
    ref = sm_proportion.proportion_confint(7, 25, alpha=0.10, method="wilson")
    assert (low, high) == pytest.approx(ref, abs=1e-12)


def test_wilson_closed_form_at_zero_successes():
    # With no successes the upper bound is z^2 / (n + z^2), the lower exactly 0.
    z = S.Z95
    assert S.wilson_interval(0, 10) == (0.0, pytest.approx(z * z / (10 + z * z), rel=1e-14))
    assert S.wilson_interval(10, 10) == (pytest.approx(10 / (10 + z * z), rel=1e-14), 1.0)


def test_wilson_empty_and_invalid():
    low, high = S.wilson_interval(0, 0)
    assert math.isnan(low) and math.isnan(high)
    with pytest.raises(ValueError):
        S.wilson_interval(3, 2)
    with pytest.raises(ValueError):
        S.wilson_interval(-1, 2)
    with pytest.raises(ValueError):
        S.wilson_interval(1.5, 2)
    with pytest.raises(ValueError):
        S.wilson_interval(1, 2, z=0)


def test_counts_from_database_types_are_accepted():
    # COUNT/SUM come back as int, numpy ints or Decimal depending on the driver.
    ref = S.wilson_interval(3, 10)
    assert S.wilson_interval(Decimal(3), Decimal("10")) == ref
    assert S.wilson_interval(np.int64(3), np.int32(10)) == ref
    assert S.wilson_interval(3.0, 10.0) == ref
    with pytest.raises(ValueError):
        S.wilson_interval(Decimal("2.5"), 10)


def test_proportion_estimate():
    est = S.proportion(3, 10)
    assert est.n == 10 and est.mean == pytest.approx(0.3)
    assert (est.low, est.high) == S.wilson_interval(3, 10)
    d = est.as_dict()
    assert d == {"n": 10, "mean": est.mean, "low": est.low, "high": est.high, "method": "Wilson"}
    with pytest.raises(dataclasses.FrozenInstanceError):
        est.mean = 0.5  # type: ignore[misc]


def test_proportion_empty_serialises_nan_as_none():
    est = S.proportion(0, 0)
    assert est.n == 0 and math.isnan(est.mean) and math.isnan(est.low) and math.isnan(est.high)
    assert est.as_dict() == {"n": 0, "mean": None, "low": None, "high": None, "method": "Wilson"}


# ---------------------------------------------------------------------------
# random baseline (sum of Bernoullis)


def test_bernoulli_sum_formula():
    est = S.mean_interval_bernoulli_sum([0.5] * 100)
    assert est.n == 100 and est.mean == pytest.approx(0.5)
    half = S.Z95 * math.sqrt(100 * 0.25) / 100
    assert (est.low, est.high) == pytest.approx((0.5 - half, 0.5 + half), abs=1e-15)

    mixed = [0.25, 0.5, 1 / 3, 0.2]
    est = S.mean_interval_bernoulli_sum(mixed)
    var = sum(p * (1 - p) for p in mixed)
    assert est.mean == pytest.approx(sum(mixed) / 4)
    assert est.high - est.mean == pytest.approx(S.Z95 * math.sqrt(var) / 4)


def test_bernoulli_sum_clips_and_degenerates():
    est = S.mean_interval_bernoulli_sum([0.0] * 5)
    assert (est.mean, est.low, est.high) == (0.0, 0.0, 0.0)
    est = S.mean_interval_bernoulli_sum([0.99, 0.98, 0.97])
    assert est.high == 1.0 and est.low < est.mean < 1.0
    est = S.mean_interval_bernoulli_sum([])
    assert est.n == 0 and math.isnan(est.mean)
    with pytest.raises(ValueError):
        S.mean_interval_bernoulli_sum([0.5, 1.5])
    with pytest.raises(ValueError):
        S.mean_interval_bernoulli_sum([0.5, float("nan")])


def test_bernoulli_sum_interval_has_nominal_coverage():
    rng = np.random.default_rng(11)
    p = rng.choice([1 / 2, 1 / 3, 1 / 4, 1 / 5], size=400)
    est = S.mean_interval_bernoulli_sum(p.tolist())
    sims = (rng.random((20_000, p.size)) < p).mean(axis=1)
    coverage = np.mean((sims >= est.low) & (sims <= est.high))
    assert 0.935 < coverage < 0.965


# ---------------------------------------------------------------------------
# Krippendorff's alpha


def test_alpha_krippendorff_published_nominal_example():
    # Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability": 4 coders,
    # 12 units with missing values; nominal alpha = 0.743.
    nan = np.nan
    data = np.array(
        [
            [1, 2, 3, 3, 2, 1, 4, 1, 2, nan, nan, nan],
            [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, nan, 3],
            [nan, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, nan],
            [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, nan],
        ]
    )
    alpha = S.krippendorff_alpha_nominal(_reliability_to_counts(data))
    assert round(alpha, 3) == 0.743
    assert alpha == pytest.approx(krippendorff.alpha(reliability_data=data, level_of_measurement="nominal"), abs=1e-12)


@pytest.mark.parametrize("seed", range(8))
def test_alpha_matches_krippendorff_package_on_random_data(seed):
    rng = np.random.default_rng(seed)
    coders = int(rng.integers(2, 7))
    units = int(rng.integers(5, 80))
    k = int(rng.integers(2, 6))
    # Correlated ratings so alpha is not always ~0: a true label plus noise.
    truth = rng.integers(0, k, size=units)
    noise = rng.integers(0, k, size=(coders, units))
    data = np.where(rng.random((coders, units)) < rng.uniform(0.3, 0.9), truth, noise)
    data = data.astype(float)
    data[rng.random(data.shape) < rng.uniform(0.0, 0.5)] = np.nan
    ref = krippendorff.alpha(reliability_data=data, level_of_measurement="nominal")
    ours = S.krippendorff_alpha_nominal(_reliability_to_counts(data))
    assert ours == pytest.approx(ref, abs=1e-9)


def test_alpha_accepts_any_hashable_labels_and_ignores_unpairable_items():
    rng = np.random.default_rng(3)
    data = rng.integers(0, 3, size=(3, 30)).astype(float)
    data[rng.random(data.shape) < 0.3] = np.nan
    ref = krippendorff.alpha(reliability_data=data, level_of_measurement="nominal")
    labels = {0.0: "Yes", 1.0: "No", 2.0: "Unsure"}
    items = [{labels[v]: c for v, c in item.items()} for item in _reliability_to_counts(data)]
    items += [{"Yes": 1}, {"No": 1}, {}, {"Unsure": 0, "No": 1}]  # unpairable: ignored
    assert S.krippendorff_alpha_nominal(iter(items)) == pytest.approx(ref, abs=1e-9)


def test_alpha_known_values():
    # Perfect agreement with variation -> 1.
    assert S.krippendorff_alpha_nominal([{"a": 3}, {"b": 2}, {"c": 4}]) == 1.0
    # Two coders who always disagree on k items of two values: alpha = -(k-1)/k.
    k = 5
    items = [{"a": 1, "b": 1}] * k
    assert S.krippendorff_alpha_nominal(items) == pytest.approx(-(k - 1) / k, abs=1e-15)
    data = np.array([[0.0] * k, [1.0] * k])
    assert S.krippendorff_alpha_nominal(items) == pytest.approx(
        krippendorff.alpha(reliability_data=data, level_of_measurement="nominal"), abs=1e-12
    )


def test_alpha_edge_cases():
    assert math.isnan(S.krippendorff_alpha_nominal([]))
    assert math.isnan(S.krippendorff_alpha_nominal([{"a": 1}, {"b": 1}]))  # nothing pairable
    assert math.isnan(S.krippendorff_alpha_nominal([{"a": 2}, {"a": 3}]))  # one category only
    assert S.krippendorff_alpha_nominal([{"a": 2, "b": 0}, {"b": 2}]) == 1.0  # zero counts ignored
    with pytest.raises(ValueError):
        S.krippendorff_alpha_nominal([{"a": -1, "b": 3}])


# ---------------------------------------------------------------------------
# Fleiss' kappa

FLEISS_1971 = [  # Wikipedia's worked example: 10 subjects, 14 raters, 5 categories; kappa = 0.210
    [0, 0, 0, 0, 14],
    [0, 2, 6, 4, 2],
    [0, 0, 3, 5, 6],
    [0, 3, 9, 2, 0],
    [2, 2, 8, 1, 1],
    [7, 7, 0, 0, 0],
    [3, 2, 6, 3, 0],
    [2, 5, 3, 2, 2],
    [6, 5, 2, 1, 0],
    [0, 2, 2, 3, 7],
]


def _rows_to_items(rows) -> list[dict]:
    return [{j: int(c) for j, c in enumerate(row)} for row in rows]


def test_fleiss_textbook_example():
    kappa, used = S.fleiss_kappa(_rows_to_items(FLEISS_1971))
    assert used == 10
    assert round(kappa, 3) == 0.210
    assert kappa == pytest.approx(sm_inter_rater.fleiss_kappa(np.array(FLEISS_1971), method="fleiss"), abs=1e-12)


@pytest.mark.parametrize("seed", range(8))
def test_fleiss_matches_statsmodels_on_random_tables(seed):
    rng = np.random.default_rng(100 + seed)
    items = int(rng.integers(3, 60))
    raters = int(rng.integers(2, 8))
    k = int(rng.integers(2, 6))
    probs = rng.dirichlet(np.ones(k), size=items)
    table = np.array([rng.multinomial(raters, p) for p in probs])
    kappa, used = S.fleiss_kappa(_rows_to_items(table))
    ref = sm_inter_rater.fleiss_kappa(table, method="fleiss")
    assert used == items
    assert kappa == pytest.approx(ref, abs=1e-9)


def test_fleiss_ragged_uses_modal_rating_count():
    rng = np.random.default_rng(7)
    full = np.array([rng.multinomial(3, rng.dirichlet(np.ones(3))) for _ in range(20)])
    extra = [{0: 1, 1: 1}, {2: 2}, {0: 4}, {0: 2, 1: 2}, {1: 1}, {2: 1}]  # m = 2, 2, 4, 4, 1, 1
    kappa, used = S.fleiss_kappa([*_rows_to_items(full), *extra])
    assert used == 20
    assert kappa == pytest.approx(sm_inter_rater.fleiss_kappa(full, method="fleiss"), abs=1e-9)


def test_fleiss_mode_tie_prefers_more_ratings():
    two = [{"a": 2}, {"a": 1, "b": 1}]
    three = [{"a": 3}, {"b": 3}, {"a": 1, "b": 2}]
    # two items with m=2, three with m=3: mode is 3
    assert S.fleiss_kappa(two + three)[1] == 3
    # two and two: tie -> the larger m (3)
    kappa, used = S.fleiss_kappa(two + three[:2])
    assert used == 2 and kappa == 1.0


def test_fleiss_categories():
    items = _rows_to_items(FLEISS_1971)
    base, _ = S.fleiss_kappa(items)
    # An unused category changes nothing (and matches statsmodels with a zero column).
    padded = np.hstack([np.array(FLEISS_1971), np.zeros((10, 1), dtype=int)])
    k, _ = S.fleiss_kappa(items, categories=range(6))
    assert k == base == pytest.approx(sm_inter_rater.fleiss_kappa(padded, method="fleiss"), abs=1e-12)
    with pytest.raises(ValueError):
        S.fleiss_kappa(items, categories=range(4))


def test_fleiss_edge_cases():
    kappa, used = S.fleiss_kappa([])
    assert math.isnan(kappa) and used == 0
    kappa, used = S.fleiss_kappa([{"a": 1}, {"b": 1}])  # all items with a single rating
    assert math.isnan(kappa) and used == 0
    kappa, used = S.fleiss_kappa([{"a": 3}, {"a": 3}])  # single category: P_e == 1
    assert math.isnan(kappa) and used == 2
    kappa, used = S.fleiss_kappa([{"a": 1, "b": 1}])  # one item is enough
    assert used == 1 and kappa == pytest.approx(-1.0)


# ---------------------------------------------------------------------------
# paired t-test


@needs_scipy
@pytest.mark.parametrize("seed", range(6))
def test_paired_t_matches_scipy(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 200))
    a = rng.normal(size=n)
    b = a + rng.normal(rng.uniform(-0.5, 0.5), rng.uniform(0.1, 2.0), size=n)
    res = S.paired_t_test(a.tolist(), b.tolist())
    ref = scipy.stats.ttest_rel(a, b)
    assert res["n"] == n
    assert res["mean_diff"] == pytest.approx(float(np.mean(a - b)), rel=1e-12)
    assert res["t"] == pytest.approx(float(ref.statistic), rel=1e-10)
    assert res["p"] == pytest.approx(float(ref.pvalue), rel=1e-9, abs=1e-300)


def test_paired_t_closed_form_df2():
    # d = [1, 2, 3]: t = 2 / (1 / sqrt 3); for 2 df, p = 1 - t / sqrt(2 + t^2).
    res = S.paired_t_test([1.0, 2.0, 3.0], [0.0, 0.0, 0.0])
    t = 2 * math.sqrt(3)
    assert res["t"] == pytest.approx(t, rel=1e-14)
    assert res["p"] == pytest.approx(1 - t / math.sqrt(2 + t * t), rel=1e-12)


def test_paired_t_degenerate_cases():
    res = S.paired_t_test([], [])
    assert res["n"] == 0 and all(math.isnan(res[k]) for k in ("mean_diff", "t", "p"))
    res = S.paired_t_test([1.0], [0.0])
    assert res["n"] == 1 and res["mean_diff"] == 1.0 and math.isnan(res["t"]) and math.isnan(res["p"])
    res = S.paired_t_test([1.0, 2.0, 3.0], [1.0, 2.0, 3.0])  # no difference at all
    assert res["mean_diff"] == 0.0 and math.isnan(res["t"]) and math.isnan(res["p"])
    # A constant +0.1 whose float differences differ in the last bits; scipy reports
    # t ~ 7e14, p ~ 2e-30 here, which is rounding noise, not evidence.
    res = S.paired_t_test([1.1, 2.2, 3.3], [1.0, 2.1, 3.2])
    assert res["t"] == math.inf and math.isnan(res["p"])
    res = S.paired_t_test([0.3, 0.3], [0.1 + 0.2, 0.3])  # differences are rounding noise only
    assert abs(res["mean_diff"]) < 1e-16 and math.isnan(res["t"]) and math.isnan(res["p"])
    res = S.paired_t_test([0.0, 0.0], [0.5, 0.5])
    assert res["t"] == -math.inf and math.isnan(res["p"])
    with pytest.raises(ValueError):
        S.paired_t_test([1.0, 2.0], [1.0])
    with pytest.raises(ValueError):
        S.paired_t_test([1.0, float("inf")], [1.0, 2.0])


# ---------------------------------------------------------------------------
# majority vote


def test_majority_vote():
    assert S.majority_vote({"Yes": 2, "No": 1}, "No") == "Yes"
    assert S.majority_vote({"Yes": 1, "No": 1}, "No") == "No"
    assert S.majority_vote({"Yes": 1, "No": 1}, "Yes") == "Yes"
    # first value not among the tied ones: smallest tied value, whatever the dict order
    assert S.majority_vote({"c": 1, "b": 2, "a": 2}, "c") == "a"
    assert S.majority_vote({"a": 2, "b": 2, "c": 1}, "c") == "a"
    assert S.majority_vote({2: 3, 1: 3, "x": 0}, "x") == 1
    # incomparable values still give a deterministic answer
    assert S.majority_vote({"1": 1, 1: 1}, None) == S.majority_vote({1: 1, "1": 1}, None)
    assert S.majority_vote({"a": 0, "b": 1}, "a") == "b"  # zero counts ignored
    assert S.majority_vote({"only": 1}, "only") == "only"
    with pytest.raises(ValueError):
        S.majority_vote({}, None)
    with pytest.raises(ValueError):
        S.majority_vote({"a": 0}, "a")


# ---------------------------------------------------------------------------


def test_module_does_not_import_test_only_packages():
    code = (
        "import sys, app.leaderboards.stats; "
        "bad = [m for m in ('krippendorff', 'statsmodels') if m in sys.modules]; "
        "sys.exit(1 if bad else 0)"
    )
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_weighted_patterns_equal_the_expanded_items():
    rng = np.random.default_rng(5)
    items = []
    for _ in range(400):
        n = int(rng.integers(1, 5))
        y = int(rng.binomial(n, 0.6))
        items.append({k: v for k, v in (("Yes", y), ("No", n - y)) if v})
    patterns = Counter(frozenset(i.items()) for i in items)
    dicts, weights = [dict(p) for p in patterns], list(patterns.values())
    assert S.krippendorff_alpha_nominal(dicts, weights) == pytest.approx(S.krippendorff_alpha_nominal(items), abs=1e-12)
    assert S.fleiss_kappa(dicts, weights=weights)[0] == pytest.approx(S.fleiss_kappa(items)[0], abs=1e-12)
    assert S.fleiss_kappa(dicts, weights=weights)[1] == S.fleiss_kappa(items)[1]
    with pytest.raises(ValueError):
        S.krippendorff_alpha_nominal(dicts, weights[:-1])


# ---------------------------------------------------------------------------
# exact values (mutation-testing gaps): every number below is pinned exactly,
# so that e.g. a 94% interval or a changed tie rule cannot pass as the original.


# --- Wilson: exact values, argument checks ----------------------------------------------


WILSON_REFERENCE = {  # statsmodels proportion_confint(..., method="wilson"), alpha 0.05
    (3, 10): (0.10779126740630104, 0.6032218525388546),
    (1, 2): (0.09453120573423068, 0.9054687942657693),
    (17, 40): (0.28509392559950375, 0.5780493145800893),
}


@pytest.mark.parametrize("successes, n", list(WILSON_REFERENCE))
def test_wilson_known_values(successes, n):
    low, high = WILSON_REFERENCE[successes, n]
    assert S.wilson_interval(successes, n) == (pytest.approx(low, rel=1e-13), pytest.approx(high, rel=1e-13))
    ref = sm_proportion.proportion_confint(successes, n, alpha=0.05, method="wilson")
    assert (low, high) == pytest.approx(ref, rel=1e-13)
    est = S.proportion(successes, n)
    assert est == S.Estimate(n, successes / n, *S.wilson_interval(successes, n), method="Wilson")


def test_wilson_z_argument():
    assert S.Z95 == 1.959963984540054
    ref = sm_proportion.proportion_confint(3, 10, alpha=0.01, method="wilson")
    assert S.wilson_interval(3, 10, z=2.5758293035489004) == pytest.approx(ref, rel=1e-13)
    assert S.wilson_interval(3, 10, 2.5758293035489004) == pytest.approx(ref, rel=1e-13)
    for bad in (0, 0.0, -1.96, math.inf, -math.inf, math.nan):
        with pytest.raises(ValueError) as err:
            S.wilson_interval(3, 10, z=bad)
        assert str(err.value) == f"z must be a positive finite number, got {bad!r}"
    # a tiny positive z is valid: the interval shrinks to the observed proportion
    low, high = S.wilson_interval(3, 10, z=1e-9)
    assert low == pytest.approx(0.3, abs=1e-9) and high == pytest.approx(0.3, abs=1e-9)
    # z is checked even when there is no data
    with pytest.raises(ValueError):
        S.wilson_interval(0, 0, z=-1.0)


def test_wilson_refuses_more_successes_than_trials_even_with_no_trials():
    with pytest.raises(ValueError) as err:
        S.wilson_interval(3, 0)
    assert str(err.value) == "successes (3) cannot exceed n (0)"
    with pytest.raises(ValueError) as err:
        S.wilson_interval(11, 10)
    assert str(err.value) == "successes (11) cannot exceed n (10)"
    assert S.wilson_interval(10, 10)[1] == 1.0  # successes == n is fine
    with pytest.raises(ValueError):
        S.proportion(3, 0)


def test_wilson_bounds_are_clipped_exactly_at_zero_and_one():
    z = S.Z95
    low, high = S.wilson_interval(0, 1)
    assert low == 0.0 and high == pytest.approx(z * z / (1 + z * z), rel=1e-14)
    low, high = S.wilson_interval(1, 1)
    assert high == 1.0 and low == pytest.approx(1 / (1 + z * z), rel=1e-14)
    # 1 of 1000: the closed form's lower bound is positive and kept as is
    ref = sm_proportion.proportion_confint(1, 1000, alpha=0.05, method="wilson")
    assert S.wilson_interval(1, 1000) == pytest.approx(ref, rel=1e-12)
    assert S.wilson_interval(999, 1000) == pytest.approx(
        sm_proportion.proportion_confint(999, 1000, alpha=0.05, method="wilson"), rel=1e-12
    )


@pytest.mark.parametrize(
    "value, expected",
    [
        (3, 3),
        (0, 0),
        (Decimal(3), 3),
        (Decimal("3.0"), 3),
        (np.int64(4), 4),
        (5.0, 5),
        (True, 1),
        (np.float64(6.0), 6),
    ],
)
def test_count_accepts_whole_numbers(value, expected):
    assert S.proportion(0, value).n == expected
    result = S.proportion(value, 10)
    assert result.mean == expected / 10 and type(result.n) is int


@pytest.mark.parametrize(
    "value, exc, message",
    [
        (2.5, ValueError, "n must be a whole number, got 2.5"),
        (Decimal("2.5"), ValueError, "n must be a whole number, got Decimal('2.5')"),
        (-1, ValueError, "n must be non-negative, got -1"),
        (Decimal(-3), ValueError, "n must be non-negative, got Decimal('-3')"),
        (-2.0, ValueError, "n must be non-negative, got -2.0"),
        ("3", ValueError, "n must be a whole number, got '3'"),
        (None, TypeError, "n must be a whole number, got None"),
        (math.nan, TypeError, "n must be a whole number, got nan"),
        (math.inf, TypeError, "n must be a whole number, got inf"),
        (1 + 2j, TypeError, "n must be a whole number, got (1+2j)"),
    ],
)
def test_count_rejects_fractions_negatives_and_non_numbers(value, exc, message):
    with pytest.raises(exc) as err:
        S.wilson_interval(0, value)
    assert type(err.value) is exc and str(err.value) == message


def test_count_names_the_argument():
    with pytest.raises(ValueError, match=r"^successes must be non-negative, got -1$"):
        S.wilson_interval(-1, 2)
    with pytest.raises(ValueError, match=r"^successes must be a whole number, got 1.5$"):
        S.wilson_interval(1.5, 2)
    with pytest.raises(ValueError, match=r"^rating count must be non-negative, got -1$"):
        S.krippendorff_alpha_nominal([{"a": -1, "b": 3}])
    with pytest.raises(ValueError, match=r"^rating count must be a whole number, got 1.5$"):
        S.fleiss_kappa([{"a": 1.5, "b": 3}])
    with pytest.raises(ValueError, match=r"^rating count must be non-negative, got -2$"):
        S.majority_vote({"a": -2, "b": 3}, "a")


def test_estimate_as_dict():
    est = S.Estimate(n=7, mean=0.25, low=0.125, high=0.5)
    assert est.as_dict() == {"n": 7, "mean": 0.25, "low": 0.125, "high": 0.5, "method": ""}
    assert list(est.as_dict()) == ["n", "mean", "low", "high", "method"]
    assert S.Estimate(7, 0.25, 0.125, 0.5, "Wilson").as_dict()["method"] == "Wilson"
    nan = S.Estimate(n=0, mean=math.nan, low=math.nan, high=math.nan).as_dict()
    assert nan == {"n": 0, "mean": None, "low": None, "high": None, "method": ""}
    mixed = S.Estimate(n=3, mean=math.nan, low=0.0, high=math.nan).as_dict()
    assert mixed == {"n": 3, "mean": None, "low": 0.0, "high": None, "method": ""}
    # only float NaN becomes None; other values pass through untouched
    d = S.Estimate(n=2, mean=1, low=Decimal("0.5"), high=math.inf).as_dict()
    assert d == {"n": 2, "mean": 1, "low": Decimal("0.5"), "high": math.inf, "method": ""} and type(d["mean"]) is int
    assert S.Estimate(1, 0.5, 0.5, 0.5) == S.Estimate(1, 0.5, 0.5, 0.5)
    assert not hasattr(est, "__dict__")  # slots


# --- the random baseline ------------------------------------------------------------


def test_bernoulli_sum_exact_values_and_validation():
    est = S.mean_interval_bernoulli_sum([0.25, 0.5, 0.75, 0.5])
    half = S.Z95 * math.sqrt(0.1875 + 0.25 + 0.1875 + 0.25) / 4
    assert est == S.Estimate(
        n=4,
        mean=0.5,
        low=pytest.approx(0.5 - half, rel=1e-15),
        high=pytest.approx(0.5 + half, rel=1e-15),
        method="normal (sum of Bernoullis)",
    )
    # z is honoured
    est = S.mean_interval_bernoulli_sum([0.5] * 4, z=1.0)
    assert (est.low, est.high) == (0.25, 0.75)
    est = S.mean_interval_bernoulli_sum((p for p in [0.5] * 16), 2.0)
    assert (est.low, est.high) == (0.25, 0.75)
    # clipping at 0 and at 1, and the bounds 0 and 1 themselves are valid probabilities
    assert S.mean_interval_bernoulli_sum([0.01, 0.0]) == S.Estimate(
        2, 0.005, 0.0, pytest.approx(0.005 + S.Z95 * math.sqrt(0.0099) / 2, rel=1e-15), S.BERNOULLI_SUM
    )
    assert S.mean_interval_bernoulli_sum([1.0, 1.0]) == S.Estimate(2, 1.0, 1.0, 1.0, S.BERNOULLI_SUM)
    assert S.mean_interval_bernoulli_sum(np.array([0.0, 1.0])) == S.Estimate(2, 0.5, 0.5, 0.5, S.BERNOULLI_SUM)
    for bad in ([1.0000001], [0.5, 1.5], [-0.1, 0.5], [-1e-12], [0.5, math.inf]):
        with pytest.raises(ValueError) as err:
            S.mean_interval_bernoulli_sum(bad)
        assert str(err.value) in ("probabilities must lie in [0, 1]", "probabilities must all be finite numbers")
    with pytest.raises(ValueError, match=r"^probabilities must lie in \[0, 1\]$"):
        S.mean_interval_bernoulli_sum([0.2, 1.2])
    with pytest.raises(ValueError, match=r"^probabilities must lie in \[0, 1\]$"):
        S.mean_interval_bernoulli_sum([-0.2, 0.5])
    with pytest.raises(ValueError, match=r"^probabilities must all be finite numbers$"):
        S.mean_interval_bernoulli_sum([0.2, math.nan])
    empty = S.mean_interval_bernoulli_sum([])
    assert empty.n == 0 and all(math.isnan(v) for v in (empty.mean, empty.low, empty.high))


# --- agreement: exact values, weights, the Fleiss mode rule -------------------------


AGREEMENT_ITEMS = [{"Y": 2, "N": 1}, {"Y": 3}, {"N": 2, "U": 1}, {"Y": 1, "N": 1, "U": 1}, {"N": 3}, {"Y": 2}]
AGREEMENT_WEIGHTS = [3, 1, 2, 1, 4, 2]
ALPHA_WEIGHTED = 74 / 191  # exact value for the 13 expanded items (krippendorff agrees below)


def _expand(items, weights):
    return [item for item, w in zip(items, weights) for _ in range(w)]


def _alpha_from_reliability(items):
    coders = max(sum(i.values()) for i in items)
    codes = {"Y": 0.0, "N": 1.0, "U": 2.0}
    data = np.full((coders, len(items)), np.nan)
    for u, item in enumerate(items):
        vals = [codes[v] for v, c in item.items() for _ in range(c)]
        data[: len(vals), u] = vals
    return krippendorff.alpha(reliability_data=data, level_of_measurement="nominal")


def test_alpha_weights_equal_repeated_items():
    expanded = _expand(AGREEMENT_ITEMS, AGREEMENT_WEIGHTS)
    ref = _alpha_from_reliability(expanded)
    assert S.krippendorff_alpha_nominal(expanded) == pytest.approx(ref, rel=1e-12)
    assert S.krippendorff_alpha_nominal(AGREEMENT_ITEMS, AGREEMENT_WEIGHTS) == pytest.approx(ref, rel=1e-12)
    assert S.krippendorff_alpha_nominal(iter(AGREEMENT_ITEMS), iter(AGREEMENT_WEIGHTS)) == pytest.approx(ref, rel=1e-12)
    # exact rational value of this table
    assert S.krippendorff_alpha_nominal(AGREEMENT_ITEMS, AGREEMENT_WEIGHTS) == pytest.approx(ALPHA_WEIGHTED, rel=1e-15)
    # weights of 1 change nothing; a weight of 0 drops the item; numpy / Decimal / float whole weights work
    assert S.krippendorff_alpha_nominal(AGREEMENT_ITEMS, [1] * 6) == S.krippendorff_alpha_nominal(AGREEMENT_ITEMS)
    assert S.krippendorff_alpha_nominal(AGREEMENT_ITEMS, [3, 1, 2, 0, 4, 2]) == pytest.approx(
        S.krippendorff_alpha_nominal(_expand(AGREEMENT_ITEMS, [3, 1, 2, 0, 4, 2])), rel=1e-15
    )
    w = [np.int64(3), Decimal(1), 2.0, 1, 4, 2]
    assert S.krippendorff_alpha_nominal(AGREEMENT_ITEMS, w) == S.krippendorff_alpha_nominal(
        AGREEMENT_ITEMS, AGREEMENT_WEIGHTS
    )
    assert math.isnan(S.krippendorff_alpha_nominal(AGREEMENT_ITEMS, [0] * 6))


@pytest.mark.parametrize("weights", [[1, 2], [1] * 7, [1, 1, 1, 1, 1, -1], [1, 1, 1, 1, 1, 1.5]])
def test_agreement_refuses_bad_weights(weights):
    message = r"^weights must be one non-negative whole number per item$"
    with pytest.raises(ValueError, match=message):
        S.krippendorff_alpha_nominal(AGREEMENT_ITEMS, weights)
    with pytest.raises(ValueError, match=message):
        S.fleiss_kappa(AGREEMENT_ITEMS, weights=weights)


def test_alpha_exact_small_cases():
    # two coders, items (a,a), (a,b), (b,b): o_aa = 2, o_bb = 2, n = 6, n_a = n_b = 3
    # alpha = (5 * 4 - 12) / (30 - 12) = 8 / 18
    assert S.krippendorff_alpha_nominal([{"a": 2}, {"a": 1, "b": 1}, {"b": 2}]) == pytest.approx(4 / 9, rel=1e-15)
    # one three-rating item (a,a,b) adds pairs weighted by 1 / (m - 1) = 1/2
    items = [{"a": 2}, {"a": 2, "b": 1}, {"b": 2}]
    # n = 7, n_a = 4, n_b = 3; o_aa = 2 + 2/2 = 3, o_bb = 2; sum n_c(n_c - 1) = 12 + 6 = 18
    assert S.krippendorff_alpha_nominal(items) == pytest.approx((6 * 5 - 18) / (42 - 18), rel=1e-15)
    assert S.krippendorff_alpha_nominal(items, [1, 2, 1]) == pytest.approx(
        S.krippendorff_alpha_nominal([items[0], items[1], items[1], items[2]]), rel=1e-15
    )
    # single-rating items and weight-0 items do not count towards n
    assert S.krippendorff_alpha_nominal(items + [{"a": 1}, {"b": 5}], [1, 1, 1, 7, 0]) == pytest.approx(0.5, rel=1e-15)


FLEISS_TABLE = [{"a": 3}, {"a": 2, "b": 1}, {"b": 3}, {"a": 1, "b": 1, "c": 1}, {"c": 2, "a": 1}]


def test_fleiss_exact_value_and_weights():
    # 5 items x 3 ratings; columns a 7, b 5, c 3 of 15; sum n_ij^2 = 9 + 5 + 9 + 3 + 5 = 31
    # P_bar = (31 - 15) / (15 * 2) = 8/15; P_e = (49 + 25 + 9) / 225 = 83/225
    expected = (8 / 15 - 83 / 225) / (1 - 83 / 225)
    kappa, used = S.fleiss_kappa(FLEISS_TABLE)
    assert used == 5 and kappa == pytest.approx(expected, rel=1e-14)
    table = np.array([[i.get(c, 0) for c in "abc"] for i in FLEISS_TABLE])
    assert kappa == pytest.approx(sm_inter_rater.fleiss_kappa(table, method="fleiss"), rel=1e-12)
    weights = [2, 1, 3, 1, 2]
    wk, wused = S.fleiss_kappa(FLEISS_TABLE, weights=weights)
    ek, eused = S.fleiss_kappa(_expand(FLEISS_TABLE, weights))
    assert wused == eused == 9 and wk == pytest.approx(ek, rel=1e-14)
    assert wk == pytest.approx(
        sm_inter_rater.fleiss_kappa(np.repeat(table, weights, axis=0), method="fleiss"), rel=1e-12
    )
    assert S.fleiss_kappa(FLEISS_TABLE, ["a", "b", "c"], [2, 1, 3, 1, 2]) == (wk, wused)


def test_fleiss_zero_weights_are_dropped():
    assert S.fleiss_kappa(FLEISS_TABLE, weights=[1, 1, 1, 1, 0]) == S.fleiss_kappa(FLEISS_TABLE[:4])
    kappa, used = S.fleiss_kappa([{"a": 1, "b": 1}], weights=[0])
    assert math.isnan(kappa) and used == 0
    kappa, used = S.fleiss_kappa([{"a": 2, "b": 2}, {"a": 1, "b": 1}], weights=[0, 3])
    assert used == 3 and kappa == pytest.approx(-1.0, rel=1e-15)


def test_fleiss_mode_of_weighted_rating_counts_and_tie_rule():
    two = {"a": 1, "b": 1}  # m = 2
    three = {"a": 2, "b": 1}  # m = 3
    four = {"a": 2, "b": 2}  # m = 4
    # weighted frequencies decide the mode: 3 items of m=2 against 2 of m=3
    assert S.fleiss_kappa([two, three], weights=[3, 2])[1] == 3
    assert S.fleiss_kappa([two, three], weights=[2, 3])[1] == 3
    assert S.fleiss_kappa([two, three], weights=[2, 2]) == S.fleiss_kappa([three, three])  # tie -> larger m
    assert S.fleiss_kappa([three, two, two]) == S.fleiss_kappa([two, two])  # mode m = 2
    # a three-way tie goes to the largest m, whatever the order of the items
    for order in ([two, three, four], [four, two, three], [three, four, two]):
        kappa, used = S.fleiss_kappa(order)
        assert used == 1 and kappa == pytest.approx(-1 / 3, rel=1e-15)
    # items below two ratings never set the mode
    assert S.fleiss_kappa([{"a": 1}, {"b": 1}, {"c": 1}, two]) == S.fleiss_kappa([two])


def test_fleiss_category_refusal_message():
    with pytest.raises(ValueError) as err:
        S.fleiss_kappa([{"a": 1, "b": 1}, {"a": 1, "x": 1}], categories=["a", "b"])
    assert str(err.value) == "values ['x'] are not among the given categories"
    # zero counts of an unknown value are not ratings
    assert S.fleiss_kappa([{"a": 2, "x": 0}, {"b": 2}], categories="ab") == (1.0, 2)


# --- paired t-test: exact values, degenerate cases, the p-value -----------------------


@needs_scipy
def test_paired_t_exact_against_scipy_ttest_rel():
    a = [2.1, 3.4, 1.9, 5.0, 4.2, 3.3, 2.8]
    b = [1.8, 3.9, 1.1, 4.1, 4.0, 2.2, 2.9]
    res = S.paired_t_test(a, b)
    ref = scipy.stats.ttest_rel(a, b)
    d = np.subtract(a, b)
    assert res == {
        "n": 7,
        "mean_diff": pytest.approx(float(d.mean()), rel=1e-15),
        "t": pytest.approx(float(ref.statistic), rel=1e-13),
        "p": pytest.approx(float(ref.pvalue), rel=1e-12),
    }
    assert list(res) == ["n", "mean_diff", "t", "p"]
    # swapping a and b flips the sign of t and keeps p
    swapped = S.paired_t_test(b, a)
    assert swapped["t"] == pytest.approx(-res["t"], rel=1e-15) and swapped["p"] == pytest.approx(res["p"], rel=1e-15)


def test_paired_t_p_is_one_at_t_zero():
    res = S.paired_t_test([1.0, 2.0, 3.0, 4.0], [2.0, 1.0, 4.0, 3.0])
    assert res == {"n": 4, "mean_diff": 0.0, "t": 0.0, "p": 1.0}


def test_paired_t_messages_and_no_warnings():
    import warnings

    with pytest.raises(ValueError) as err:
        S.paired_t_test([1.0, 2.0], [1.0])
    assert str(err.value) == "a and b must have the same length (2 != 1)"
    with pytest.raises(ValueError, match=r"^a must all be finite numbers$"):
        S.paired_t_test([1.0, math.nan], [1.0, 2.0])
    with pytest.raises(ValueError, match=r"^b must all be finite numbers$"):
        S.paired_t_test([1.0, 2.0], [1.0, -math.inf])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        S.paired_t_test([1.0, 2.0, 4.0], [0.5, 2.5, 3.0])
        S.paired_t_test([1.0, 2.0], [1.0, 2.0])


def test_paired_t_tolerance_is_four_ulps_of_the_largest_input():
    tol = 2.0**-50  # 4 * eps * max |input| with max |input| == 1
    # differences 0 and tol: their spread is within the tolerance, the mean too -> t nan
    res = S.paired_t_test([1.0, 0.0], [1.0, -tol])
    assert res["n"] == 2 and res["mean_diff"] == tol / 2 and math.isnan(res["t"]) and math.isnan(res["p"])
    # a constant difference of exactly the tolerance still counts as no difference
    res = S.paired_t_test([1.0, 1.0], [1.0 - tol, 1.0 - tol])
    assert res["mean_diff"] == tol and math.isnan(res["t"]) and math.isnan(res["p"])
    # spread 1e-15 (between 4 and 5 ulps of 1.0) is a real difference: t = 1, p = 0.5 with 1 df
    res = S.paired_t_test([1.0, 0.0], [1.0, -1e-15])
    assert res["t"] == pytest.approx(1.0, rel=1e-12) and res["p"] == pytest.approx(0.5, rel=1e-12)
    # the tolerance scales with the largest input, in a or in b
    big = 2.0**10
    res = S.paired_t_test([big, 0.0], [big, -(2.0**-40)])
    assert math.isnan(res["t"])
    res = S.paired_t_test([0.0, 0.0], [big, 2.0**-40])
    assert res["t"] == pytest.approx(-1.0, rel=1e-9)
    res = S.paired_t_test([0.0, -big], [0.0, -big - 2.0**-40])
    assert math.isnan(res["t"])


def test_t_p_edges():
    f = S._t_two_sided_p
    assert f(math.inf, 5) == 0.0 and f(-math.inf, 5) == 0.0
    assert f(1e200, 5) == 0.0
    assert f(0.0, 5) == 1.0
    assert f(0.0, 1) == 1.0


@pytest.mark.parametrize("df", [1, 2, 3, 4.5, 9, 30, 200])
def test_t_p_matches_the_exact_incomplete_beta(df):
    # p = I_{df/(df+t^2)}(df/2, 1/2), evaluated with 40 digits by mpmath. scipy.stats.t is
    # good to 1e-13 relative here except where p is within 1e-6 of 1 (2.8e-11 at df=1,
    # t=1e-6), hence the absolute 1e-10.
    mpmath = pytest.importorskip("mpmath")
    f = S._t_two_sided_p
    with mpmath.workdps(40):
        for t in (
            1e-6,
            0.1,
            0.3,
            0.5,
            0.7,
            0.9,
            1.0,
            1.1,
            1.3,
            1.5,
            1.7320508,
            2.0,
            2.5,
            3.0,
            4.0,
            5.0,
            7.0,
            12.0,
            20.0,
            100.0,
        ):
            m_df, m_t = mpmath.mpf(df), mpmath.mpf(t)
            exact = float(mpmath.betainc(m_df / 2, mpmath.mpf(1) / 2, 0, m_df / (m_df + m_t * m_t), regularized=True))
            assert f(t, df) == pytest.approx(exact, rel=1e-13, abs=1e-10), (t, df)
            assert f(-t, df) == f(t, df)


# --- majority vote ------------------------------------------------------------------


def test_majority_vote_tie_rules_exactly():
    # natural order, not the order of the repr: 9 < 10 although "10" < "9"
    assert S.majority_vote({10: 2, 9: 2, 1: 1}, None) == 9
    # incomparable tied values: smallest (type name, repr); "int" < "str"
    assert S.majority_vote({"1": 1, 1: 1}, None) == 1
    assert S.majority_vote({"b": 1, "a": 1, 1: 1}, None) == 1
    # within the smallest type name, by repr
    assert S.majority_vote({2: 1, 1: 1, "a": 1}, None) == 1
    assert S.majority_vote({"b": 1, "a": 1, 3: 1}, "zz") == 3
    assert S.majority_vote({"b": 1, "a": 1, (1,): 1}, "zz") == "a"  # "str" < "tuple"
    # the first value wins a tie it takes part in, even when it is not the smallest
    assert S.majority_vote({10: 2, 9: 2}, 10) == 10
    assert S.majority_vote({"1": 1, 1: 1}, "1") == "1"
    # an unhashable first value is simply not among the tied values
    assert S.majority_vote({"b": 1, "a": 1}, ["b"]) == "a"
    # a first value with fewer votes does not win
    assert S.majority_vote({"b": 1, "a": 1, "c": 0}, "c") == "a"
    with pytest.raises(ValueError) as err:
        S.majority_vote({}, "a")
    assert str(err.value) == "majority_vote needs at least one vote"
    with pytest.raises(ValueError) as err:
        S.majority_vote({"a": 0, "b": 0}, "a")
    assert str(err.value) == "majority_vote needs at least one vote"
    assert S.majority_vote({"x": Decimal(2), "y": np.int64(1)}, "y") == "x"


def test_wilson_bounds_stay_in_the_unit_interval_despite_rounding():
    # the closed form rounds to a lower bound of ~1e-17 for 0 of 3, and above 1 for a huge z
    assert S.wilson_interval(0, 3)[0] == 0.0
    assert S.wilson_interval(0, 7)[0] == 0.0
    low, high = S.wilson_interval(32, 62, z=1e9)
    assert high == 1.0 and low == pytest.approx(0.0, abs=1e-9)
    assert S.wilson_interval(1, 62, z=1e9)[1] <= 1.0 and S.wilson_interval(61, 62, z=1e9)[0] >= 0.0


def test_none_is_a_rating_value_like_any_other():
    assert S.majority_vote({None: 2, "a": 1}, "a") is None
    assert S.majority_vote({"a": 1, None: 2, "b": 1}, "b") is None
    # items {None, None, a} and {a, a}: n = 5, n_None = 2, n_a = 3, o_NoneNone = 2/2 = 1, o_aa = 2
    # alpha = (4 * 3 - (2 + 6)) / (20 - 8) = 1/3
    assert S.krippendorff_alpha_nominal([{None: 2, "a": 1}, {"a": 2}]) == pytest.approx(1 / 3, rel=1e-15)


def test_count_accepts_objects_with_index():
    class Four:
        def __index__(self):
            return 4

    assert S.wilson_interval(Four(), Four()) == S.wilson_interval(4, 4)
    assert S.proportion(1, Four()).n == 4


def test_value_sequences_are_converted_to_float():
    # database drivers return Decimal for AVG/SUM; numbers must not stay Decimal or int
    dec = [Decimal("0.5"), Decimal("1.5"), Decimal("1.5"), Decimal("4")]
    flt = [0.5, 1.5, 1.5, 4.0]
    assert S.mean_interval_unbounded(dec) == S.mean_interval_unbounded(flt)
    assert S.mean_interval_bernoulli_sum([Decimal("0.25"), Decimal("0.5")]) == S.mean_interval_bernoulli_sum(
        [0.25, 0.5]
    )
    assert S.paired_t_test(dec, [Decimal(0)] * 4) == S.paired_t_test(flt, [0.0] * 4)
    # integers far beyond int64 differences are fine as floats
    big = S.paired_t_test([2**62, -(2**62)], [-(2**62), 2**62])
    assert big["mean_diff"] == 0.0 and big["t"] == 0.0 and big["p"] == 1.0


def test_numpy_arrays_of_any_shape_are_flattened():
    assert S.mean_interval(np.array([[0.0, 1.0], [1.0, 1.0]])) == S.mean_interval([0.0, 1.0, 1.0, 1.0])
    assert S.mean_interval_bernoulli_sum(np.array(0.5)).n == 1


# --- mean_interval: the covering interval for scores in [0, 1] ------------------------------


def _wilson_closed_form(p, n, z):
    """Wilson's interval written out independently: (p + z^2/2n +/- z sqrt(p(1-p)/n + z^2/4n^2)) / (1 + z^2/n)."""
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


def test_mean_interval_binary_is_wilson_exactly():
    # 9 of 10: statsmodels proportion_confint(9, 10, method="wilson") = (0.59584997, 0.98212379)
    est = S.mean_interval([1.0] * 9 + [0.0])
    assert est == S.Estimate(
        10, 0.9, pytest.approx(0.5958499732047615, rel=1e-12), pytest.approx(0.9821237869049271, rel=1e-12), "Wilson"
    )
    assert (est.low, est.high) == pytest.approx(sm_proportion.proportion_confint(9, 10, method="wilson"), rel=1e-12)
    # 10 perfect scores: Wilson's [10 / (10 + z^2), 1] = [0.72246720, 1], never [1, 1]
    est = S.mean_interval([1] * 10)
    assert (est.low, est.high) == (pytest.approx(10 / (10 + S.Z95**2), rel=1e-12), 1.0)
    assert est.method == "Wilson" and est.as_dict()["method"] == "Wilson"
    assert S.mean_interval([0, 0, 0]).high == pytest.approx(S.Z95**2 / (3 + S.Z95**2), rel=1e-12)


def test_mean_interval_continuous_is_wilson_at_the_effective_n_with_t():
    # [0.5, 0.75, 1, 0.75]: mean 3/4, s^2 = (1/16 + 1/16) / 3 = 1/24, v = s^2 / 4 = 1/96,
    # n_eff = (3/4)(1/4) / (1/96) = 18, quantile t_{0.975, 3} = 3.182446305284263
    est = S.mean_interval([0.5, 0.75, 1.0, 0.75])
    t3 = 3.182446305284263
    assert t3 == pytest.approx(scipy.stats.t.ppf(0.975, 3), rel=1e-12)
    low, high = _wilson_closed_form(0.75, 18.0, t3)
    assert est == S.Estimate(
        4, 0.75, pytest.approx(low, rel=1e-12), pytest.approx(high, rel=1e-12), "Wilson (effective n)"
    )
    assert (low, high) == pytest.approx((0.38500008, 0.93496620), abs=1e-8)
    # no spread: n_eff = the number of items (10), t on 9 degrees of freedom
    est = S.mean_interval([0.8] * 10)
    low, high = _wilson_closed_form(0.8, 10.0, scipy.stats.t.ppf(0.975, 9))
    assert (est.low, est.high) == (pytest.approx(low, rel=1e-12), pytest.approx(high, rel=1e-12))
    assert est.method == "Wilson (effective n)" and est.low < 0.8 < est.high


def test_mean_interval_clustered_uses_the_cluster_robust_variance():
    # clusters a: [1, 1, 0], b: [1, 0], c: [1, 1, 1]; N = 8, mean = 6/8, totals (2, 1, 3),
    # sizes (3, 2, 3): residuals (-1/4, -1/2, 3/4), sum of squares 7/8,
    # v = 3/2 * (7/8) / 64 = 21/1024, n_eff = (3/16) / (21/1024) = 64/7, t on G - 1 = 2 df
    values = [1, 1, 0, 1, 0, 1, 1, 1]
    clusters = ["a", "a", "a", "b", "b", "c", "c", "c"]
    est = S.mean_interval(values, clusters)
    low, high = _wilson_closed_form(0.75, 64 / 7, 4.302652729749464)
    assert est == S.Estimate(
        8, 0.75, pytest.approx(low, rel=1e-12), pytest.approx(high, rel=1e-12), "Wilson (effective n, clusters)"
    )
    # cluster labels of any hashable type, in any order
    assert S.mean_interval(values, [2, 2, 2, (1,), (1,), None, None, None]) == est
    # singleton clusters: the same interval as the items unclustered at the effective n
    x = [0.5, 0.75, 1.0, 0.75]
    single = S.mean_interval(x, range(4))
    assert (single.low, single.high) == pytest.approx((S.mean_interval(x).low, S.mean_interval(x).high), rel=1e-12)
    # equal cluster means: no spread between units, n_eff = G = 2, t on 1 df
    est = S.mean_interval([1, 0, 0, 1], [1, 1, 2, 2])
    low, high = _wilson_closed_form(0.5, 2.0, scipy.stats.t.ppf(0.975, 1))
    assert (est.low, est.high) == (pytest.approx(max(0.0, low), abs=1e-12), pytest.approx(min(1.0, high), abs=1e-12))


def test_mean_interval_edges_and_refusals():
    assert S.mean_interval([]).as_dict() == {"n": 0, "mean": None, "low": None, "high": None, "method": "Wilson"}
    assert S.mean_interval([], []).method == "Wilson (effective n, clusters)"
    assert S.mean_interval([0.4]) == S.Estimate(1, 0.4, 0.0, 1.0, "whole range (one unit)")
    assert S.mean_interval([0.4, 0.6, 0.2], [7, 7, 7]) == S.Estimate(
        3, pytest.approx(0.4), 0.0, 1.0, "whole range (one unit)"
    )
    assert S.mean_interval([1.0]) == S.Estimate(1, 1.0, *S.wilson_interval(1, 1), "Wilson")
    with pytest.raises(ValueError, match=r"^scores must lie in \[0, 1\]$"):
        S.mean_interval([0.5, 1.5])
    with pytest.raises(ValueError, match=r"^scores must lie in \[0, 1\]$"):
        S.mean_interval([-0.1])
    with pytest.raises(ValueError, match="finite"):
        S.mean_interval([0.5, math.nan])
    with pytest.raises(ValueError, match=r"^clusters must have one label per score \(2 != 3\)$"):
        S.mean_interval([0.1, 0.2, 0.3], ["a", "b"])
    # the seed is accepted but the chosen method does not resample
    assert S.mean_interval([0.2, 0.9, 0.4], seed=1) == S.mean_interval([0.2, 0.9, 0.4], seed=2)
    # Decimal from the database
    assert S.mean_interval([Decimal("0.5"), Decimal("0.25")]) == S.mean_interval([0.5, 0.25])


@pytest.mark.parametrize("seed", range(6))
def test_mean_from_moments_equals_mean_interval(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 60))
    binary = (rng.random(n) < 0.8).astype(float)
    cont = rng.beta(5, 1, n)
    for x, is_binary in ((binary, True), (cont, False), (np.round(cont * 4) / 4, False)):
        total, total_sq = math.fsum(x.tolist()), math.fsum((x * x).tolist())
        assert S.mean_from_moments(n, total, total_sq, binary=is_binary) == S.mean_interval(x)
    # exact sums (multiples of 1/4) need no fsum
    x = [0.25, 0.5, 1.0, 0.75, 0.75]
    assert S.mean_from_moments(5, sum(x), sum(v * v for v in x), binary=False) == S.mean_interval(x)
    assert S.mean_from_moments(10, 10, 10, binary=True) == S.mean_interval([1] * 10)
    assert S.mean_from_moments(0, 0, 0, binary=False).as_dict()["mean"] is None


def test_mean_from_moments_refusals():
    with pytest.raises(ValueError, match="impossible"):
        S.mean_from_moments(3, 4.0, 4.0, binary=False)
    with pytest.raises(ValueError, match="impossible"):
        S.mean_from_moments(3, 1.0, 2.0, binary=False)  # sum of squares above the sum
    with pytest.raises(ValueError, match=r"total_sq == total"):
        S.mean_from_moments(3, 2, 1, binary=True)
    with pytest.raises(ValueError, match="whole number"):
        S.mean_from_moments(3, 1.5, 1.5, binary=True)
    with pytest.raises(ValueError, match="finite"):
        S.mean_from_moments(3, math.nan, 1.0, binary=False)


# --- Krippendorff's alpha at every level, with an item bootstrap -----------------------------

_KRIPP_EXAMPLE = [  # the krippendorff package's docstring example (Krippendorff's own data)
    [np.nan, np.nan, np.nan, np.nan, np.nan, 3, 4, 1, 2, 1, 1, 3, 3, np.nan, 3],
    [1, np.nan, 2, 1, 3, 3, 4, 3, np.nan, np.nan, np.nan, np.nan, np.nan, np.nan, np.nan],
    [np.nan, np.nan, 2, 1, 3, 4, 4, np.nan, 2, 1, 1, 3, 3, np.nan, 4],
]


@pytest.mark.parametrize("level", ["nominal", "ordinal", "interval"])
def test_krippendorff_alpha_matches_the_package(level):
    est = S.krippendorff_alpha(np.array(_KRIPP_EXAMPLE), level=level)
    expected = krippendorff.alpha(reliability_data=_KRIPP_EXAMPLE, level_of_measurement=level)
    assert est.mean == pytest.approx(expected, rel=1e-12)
    assert est.n == 12  # items with at least two ratings
    assert est.method == f"bootstrap over items (percentile), {level}"
    assert est.low <= est.mean <= est.high <= 1.0
    # the same data as per-item counts, and as a list of lists with None
    counts = _reliability_to_counts(np.array(_KRIPP_EXAMPLE, dtype=float))
    assert S.krippendorff_alpha(counts, level=level) == est
    as_lists = [[None if math.isnan(v) else v for v in row] for row in _KRIPP_EXAMPLE]
    assert S.krippendorff_alpha(as_lists, level=level) == est


def test_krippendorff_alpha_ordinal_hand_case():
    # two coders, items (1,1) (2,2) (3,3) (1,2) (3,2) (1,3); ordinal differs from nominal and
    # interval, and the package gives the value
    data = [[1, 2, 3, 1, 3, 1], [1, 2, 3, 2, 2, 3]]
    ordinal = S.krippendorff_alpha(data, level="ordinal")
    assert ordinal.mean == pytest.approx(
        krippendorff.alpha(reliability_data=data, level_of_measurement="ordinal"), rel=1e-12
    )
    # hand: values 1, 2, 3 with n_c = 4, 4, 4 (n = 12); ordinal delta_ck = (sum_{g=c..k} n_g - (n_c + n_k)/2)^2:
    # delta_12 = delta_23 = (8 - 4)^2 = 16, delta_13 = (12 - 4)^2 = 64.  Coincidences off the
    # diagonal (two ratings per item, so each item adds 1 per ordered pair): items 4, 5, 6 give
    # o_12 = o_21 = o_23 = o_32 = o_13 = o_31 = 1
    # D_o = sum_{c,k} o_ck delta_ck = 2 (16 + 16 + 64) = 192
    # D_e = sum_{c,k} n_c n_k delta_ck / (n - 1) = 2 * 16 (16 + 16 + 64) / 11 = 3072 / 11
    # alpha = 1 - D_o / D_e = 1 - 192 * 11 / 3072 = 1 - 0.6875 = 0.3125
    assert ordinal.mean == pytest.approx(0.3125, rel=1e-12)
    nominal = S.krippendorff_alpha(data, level="nominal")
    # nominal: D_o = 6, D_e = 2 * 16 * 3 / 11 = 96 / 11, alpha = 1 - 66 / 96 = 0.3125 as well
    # here (three equidistant disagreements); interval: delta = (c - k)^2 = 1, 1, 4:
    # D_o = 2 * 6 = 12, D_e = 2 * 16 * 6 / 11 = 192 / 11, alpha = 1 - 132 / 192 = 0.3125
    assert nominal.mean == pytest.approx(0.3125, rel=1e-12)
    assert S.krippendorff_alpha(data, level="interval").mean == pytest.approx(0.3125, rel=1e-12)
    # nominal agrees with the exact-arithmetic krippendorff_alpha_nominal
    assert nominal.mean == pytest.approx(
        S.krippendorff_alpha_nominal(_reliability_to_counts(np.array(data, dtype=float))), rel=1e-12
    )


def test_krippendorff_alpha_ordinal_differs_from_nominal():
    data = [[1, 2, 3, 4, 1, 4], [1, 2, 3, 4, 2, 1]]
    for level in ("nominal", "ordinal", "interval"):
        assert S.krippendorff_alpha(data, level=level).mean == pytest.approx(
            krippendorff.alpha(reliability_data=data, level_of_measurement=level), rel=1e-12
        )
    assert S.krippendorff_alpha(data, level="ordinal").mean != pytest.approx(
        S.krippendorff_alpha(data, level="nominal").mean
    )


def test_krippendorff_alpha_bootstrap_and_edges():
    counts = [{"a": 2}, {"b": 2}, {"a": 1, "b": 1}, {"a": 3}, {"b": 2, "c": 1}, {"c": 2}, {"x": 1}]
    one = S.krippendorff_alpha(counts, n_boot=400, seed=3)
    assert one == S.krippendorff_alpha(counts, n_boot=400, seed=3)
    assert one != S.krippendorff_alpha(counts, n_boot=400, seed=4)
    assert one.n == 6 and one.mean == pytest.approx(S.krippendorff_alpha_nominal(counts), rel=1e-12)
    assert one.low < one.mean < one.high
    assert S.krippendorff_alpha([{"a": 2}, {"a": 3}]).as_dict()["mean"] is None  # one value only
    assert math.isnan(S.krippendorff_alpha([]).mean) and S.krippendorff_alpha([]).n == 0
    assert math.isnan(S.krippendorff_alpha([{"a": 1}]).mean)
    est = S.krippendorff_alpha(counts, n_boot=0)
    assert math.isnan(est.low) and not math.isnan(est.mean)
    with pytest.raises(ValueError, match="level must be"):
        S.krippendorff_alpha(counts, level="ratio-ish")
    with pytest.raises(TypeError, match="numeric"):
        S.krippendorff_alpha(counts, level="interval")


# --- rankings, Holm, paired effects ------------------------------------------------------------


def test_rank_intervals_clear_cases():
    rng = np.random.default_rng(0)
    a = rng.random(30)
    assert S.rank_intervals({"a": a + 0.5, "b": a}) == {"a": (1, 1), "b": (2, 2)}
    tied = S.rank_intervals({"a": a, "b": a.copy()})
    assert tied == {"a": (1, 2), "b": (1, 2)}
    assert {S.rank_label(v) for v in tied.values()} == {"1-2"}
    assert S.rank_label((2, 2)) == "2"
    # c is far below two close systems
    b = np.clip(a + rng.normal(0, 0.05, 30), 0, 1)
    three = S.rank_intervals({"a": a, "b": b, "c": a * 0.1}, n_boot=500, seed=1)
    assert three["c"] == (3, 3) and three["a"] == (1, 2) and three["b"] == (1, 2)
    assert S.tied_groups(three) == [["a", "b"], ["c"]]
    assert S.rank_intervals({"a": a, "b": b}, seed=2) == S.rank_intervals({"a": a, "b": b}, seed=2)


def test_rank_intervals_on_many_items_draw_score_patterns_in_the_same_law(monkeypatch):
    # 40,000 items x 1000 resamples is past the draw budget: 0/1 scores of three systems have
    # at most 8 patterns, whose resample counts are drawn instead of the items. b is 0.005
    # above a (z about 1.4: b beats a in about 92% of resamples), c far above both.
    rng = np.random.default_rng(3)
    n = 40_000

    def ones(k):
        x = np.zeros(n)
        x[rng.permutation(n)[:k]] = 1.0
        return x

    scores = {"a": ones(20_000), "b": ones(20_200), "c": ones(24_000)}
    assert n * 1000 > S._EXACT_DRAW_BUDGET
    drawn = []
    real_rng = np.random.default_rng

    class Recording:
        def __init__(self, seed):
            self._rng = real_rng(seed)

        def multinomial(self, n, pvals, size):
            drawn.append(len(pvals))
            return self._rng.multinomial(n, pvals, size=size)

        def __getattr__(self, name):
            return getattr(self._rng, name)

    monkeypatch.setattr(np.random, "default_rng", Recording)
    fast = S.rank_intervals(scores)
    assert drawn and max(drawn) <= 8  # the patterns were drawn, not the items
    monkeypatch.setattr(S, "_EXACT_DRAW_BUDGET", 1 << 62)  # the plain draw of items
    drawn.clear()
    exact = S.rank_intervals(scores)
    assert not drawn
    assert fast == exact == {"c": (1, 1), "b": (2, 3), "a": (2, 3)}


def test_rank_intervals_hand_case_and_edges():
    # two items; a = (1, 0), b = (0, 1): resamples {1,1}: a first, {2,2}: b first, {1,2}: tie,
    # so both systems take every rank
    assert S.rank_intervals({"a": [1, 0], "b": [0, 1]}, n_boot=200) == {"a": (1, 2), "b": (1, 2)}
    assert S.rank_intervals({}) == {}
    assert S.rank_intervals({"a": [], "b": []}) == {"a": (1, 2), "b": (1, 2)}
    assert S.rank_intervals({"only": [0.3, 0.4]}) == {"only": (1, 1)}
    with pytest.raises(ValueError, match="same items"):
        S.rank_intervals({"a": [1, 2], "b": [1]})
    with pytest.raises(ValueError, match="n_boot"):
        S.rank_intervals({"a": [1]}, n_boot=0)


def test_tied_groups_chain_through_overlaps():
    intervals = {"a": (1, 2), "b": (2, 3), "c": (3, 3), "d": (4, 5), "e": (4, 5)}
    assert S.tied_groups(intervals) == [["a", "b", "c"], ["d", "e"]]
    assert S.tied_groups({"x": (1, 1), "y": (2, 2)}) == [["x"], ["y"]]
    assert S.tied_groups({}) == []


def test_holm_hand_case_and_statsmodels():
    from statsmodels.stats.multitest import multipletests

    # sorted 0.01, 0.03, 0.04 times 3, 2, 1 = 0.03, 0.06, 0.04 -> running max 0.03, 0.06, 0.06
    assert S.holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06], rel=1e-12)
    p = np.random.default_rng(4).random(12) ** 3
    assert S.holm(p) == pytest.approx(multipletests(p, method="holm")[1].tolist(), rel=1e-12)
    ties = [0.2, 0.01, 0.2, 0.01, 0.6, 0.0, 1.0]
    assert S.holm(ties) == pytest.approx(multipletests(ties, method="holm")[1].tolist(), rel=1e-12)
    # nan (no test) stays nan and is not counted: two tests, not three
    out = S.holm([0.02, math.nan, 0.04])
    assert out[0] == pytest.approx(0.04) and math.isnan(out[1]) and out[2] == pytest.approx(0.04)
    assert S.holm([]) == []
    assert S.holm([0.9, 0.8]) == [1.0, 1.0]  # 0.8 * 2 = 1.6, capped at 1
    with pytest.raises(ValueError, match="p-values"):
        S.holm([1.5])


def test_paired_effect_hand_case():
    # d = a - b = (1, 2, 2, 3): mean 2, sd = sqrt(2/3), se = sd / 2, t_{0.975,3} = 3.182446305284263
    res = S.paired_effect([1, 2, 3, 4], [0, 0, 1, 1])
    half = 3.182446305284263 * math.sqrt(2 / 3) / 2
    assert res["difference"] == S.Estimate(
        4, 2.0, pytest.approx(2 - half, rel=1e-12), pytest.approx(2 + half, rel=1e-12), "t on paired differences"
    )
    assert res["cohen_dz"] == pytest.approx(2 / math.sqrt(2 / 3), rel=1e-12)
    assert res["p"] == pytest.approx(scipy.stats.ttest_rel([1, 2, 3, 4], [0, 0, 1, 1]).pvalue, rel=1e-12)
    # interval = scipy's t confidence interval for the mean difference
    ci = scipy.stats.ttest_rel([1, 2, 3, 4], [0, 0, 1, 1]).confidence_interval()
    assert (res["difference"].low, res["difference"].high) == pytest.approx((ci.low, ci.high), rel=1e-12)


def test_paired_effect_degenerate():
    same = S.paired_effect([1, 2], [0, 1])  # constant difference 1: no spread
    assert same["difference"] == S.Estimate(2, 1.0, 1.0, 1.0, "t on paired differences")
    assert same["cohen_dz"] == math.inf and math.isnan(same["p"])
    zero = S.paired_effect([0.5, 0.5], [0.5, 0.5])
    assert zero["difference"].low == 0.0 and math.isnan(zero["cohen_dz"])
    one = S.paired_effect([0.7], [0.2])
    assert one["difference"].n == 1 and math.isnan(one["difference"].low) and math.isnan(one["cohen_dz"])
    assert S.paired_effect([], [])["difference"].n == 0
    assert math.isnan(S.paired_effect([], [])["difference"].low)


def test_paired_effect_binary_is_bonett_price():
    # a beats b on items 2 and 10, never the reverse: n12 = 2, n21 = 0, n = 10.
    # q12 = 3/12, q21 = 1/12, centre 1/6, var = (4/12 - 1/36) / 12 = 0.0254630, half = z * 0.1595710
    a = [1, 1, 1, 0, 1, 1, 0, 1, 1, 1]
    b = [1, 0, 1, 0, 1, 1, 0, 1, 1, 0]
    res = S.paired_effect(a, b)
    half = S.Z95 * math.sqrt((4 / 12 - (2 / 12) ** 2) / 12)
    assert res["difference"] == S.Estimate(
        10,
        0.2,
        pytest.approx(1 / 6 - half, rel=1e-12),
        pytest.approx(1 / 6 + half, rel=1e-12),
        "adjusted Wald (Bonett-Price)",
    )
    assert (res["difference"].low, res["difference"].high) == pytest.approx((-0.1460871, 0.4794204), abs=1e-7)
    assert res["p"] == pytest.approx(scipy.stats.ttest_rel(a, b).pvalue, rel=1e-12)
    # d = (0, 1, 0, 0, 0, 0, 0, 0, 0, 1): mean 0.2, sd = sqrt(0.16 * 10 / 9), d_z = 0.2 / sd
    assert res["cohen_dz"] == pytest.approx(0.2 / math.sqrt(1.6 / 9), rel=1e-12)
    # all pairs concordant: q12 = q21 = 1/12, an interval around 0 of half-width
    # z sqrt((2/12) / 12) = 0.2309840, not [0, 0]
    same = S.paired_effect([1] * 10, [1] * 10)["difference"]
    assert (same.low, same.high) == pytest.approx((-0.2309840, 0.2309840), abs=1e-7)
    assert same.high == pytest.approx(S.Z95 * math.sqrt(2 / 144), rel=1e-12)
    # clipped to [-1, 1] and holding the observed difference
    big = S.paired_effect([1] * 3, [0] * 3)["difference"]
    assert big.high == 1.0 and big.low <= 1.0 and big.mean == 1.0


# -- mean_interval_unbounded ------------------------------------------------------------------


def test_mean_interval_unbounded_by_hand_and_against_scipy():
    import scipy.stats

    # Four values in three clusters: a = {1, 2}, b = {3}, c = {4}. mean = 10 / 4 = 2.5;
    # cluster totals 3, 3, 4 with sizes 2, 1, 1, residuals T_g - mean n_g = -2, 0.5, 1.5,
    # squares 4 + 0.25 + 2.25 = 6.5; v = G / (G - 1) * 6.5 / N**2 = 1.5 * 6.5 / 16 = 0.609375;
    # sqrt(v) = 0.7806247498; t_{0.975, 2} = 4.3026527297; half = 3.3587572106;
    # interval [-0.8587572106, 5.8587572106].
    est = S.mean_interval_unbounded([1.0, 2.0, 3.0, 4.0], ["a", "a", "b", "c"])
    assert est.n == 4 and est.mean == 2.5
    assert est.low == pytest.approx(-0.8587572106, abs=1e-9) and est.high == pytest.approx(5.8587572106, abs=1e-9)
    assert est.method == S.T_MEAN_CLUSTERED
    half = float(scipy.stats.t.ppf(0.975, 2)) * math.sqrt(1.5 * 6.5 / 16)
    assert (est.low, est.high) == (pytest.approx(2.5 - half, abs=1e-12), pytest.approx(2.5 + half, abs=1e-12))
    # Unclustered: scipy's t interval of the mean on n - 1 df (s**2 = 5/3, v = 5/12).
    x = [1.0, 2.0, 3.0, 4.0]
    est = S.mean_interval_unbounded(x)
    ref = scipy.stats.t.interval(0.95, len(x) - 1, loc=np.mean(x), scale=scipy.stats.sem(x))
    assert est.method == S.T_MEAN
    assert (est.low, est.high) == (pytest.approx(ref[0], abs=1e-12), pytest.approx(ref[1], abs=1e-12))
    assert est.low == pytest.approx(0.4457397432, abs=1e-9)
    # One value per cluster is the unclustered interval.
    y = [3.2, 0.5, 7.75, 1.0, 2.5]
    one_each = S.mean_interval_unbounded(y, clusters=range(5))
    plain = S.mean_interval_unbounded(y)
    assert (one_each.low, one_each.high) == (pytest.approx(plain.low, abs=1e-12), pytest.approx(plain.high, abs=1e-12))


def test_mean_interval_unbounded_says_when_it_has_no_interval():
    # No spread: the mean itself, and a method saying so (nothing bounds the values).
    flat = S.mean_interval_unbounded([2.5] * 6)
    assert (flat.low, flat.mean, flat.high) == (2.5, 2.5, 2.5) and flat.method == S.NO_SPREAD
    # Equal cluster means: no spread between the units either.
    eq = S.mean_interval_unbounded([1.0, 3.0, 2.0, 2.0], ["p", "p", "q", "q"])
    assert eq.low == eq.high == eq.mean == 2.0 and eq.method == S.NO_SPREAD
    # One unit: no interval.
    one = S.mean_interval_unbounded([5.0, 6.0], ["p", "p"])
    assert one.mean == 5.5 and math.isnan(one.low) and math.isnan(one.high) and one.method == S.TOO_FEW_UNITS
    assert one.as_dict()["low"] is None
    empty = S.mean_interval_unbounded([])
    assert empty.n == 0 and math.isnan(empty.mean)
    with pytest.raises(ValueError):
        S.mean_interval_unbounded([1.0, 2.0], ["a"])
    with pytest.raises(ValueError):
        S.mean_interval_unbounded([1.0, float("inf")])


def test_alpha_with_clusters_draws_whole_clusters():
    """The point is the package's alpha either way; the interval draws whole clusters (paths,
    procedures): with every item its own cluster it is the items' bootstrap exactly."""
    import krippendorff as kd

    items = [{1: 2}, {2: 2}, {1: 1, 2: 1}, {3: 2}, {2: 1, 3: 1}, {1: 2}, {3: 1, 1: 1}, {2: 2}]
    plain = S.krippendorff_alpha(items, level="ordinal", n_boot=300, seed=1)
    alone = S.krippendorff_alpha(items, level="ordinal", n_boot=300, seed=1, clusters=list(range(8)))
    paired = S.krippendorff_alpha(items, level="ordinal", n_boot=300, seed=1, clusters=[0, 0, 1, 1, 2, 2, 3, 3])
    counts = np.array([[it.get(v, 0) for v in (1, 2, 3)] for it in items])
    assert (
        plain.mean
        == alone.mean
        == paired.mean
        == pytest.approx(kd.alpha(value_counts=counts, value_domain=[0, 1, 2], level_of_measurement="ordinal"))
    )
    assert (alone.low, alone.high) == (plain.low, plain.high) != (paired.low, paired.high)
    assert paired.method == "bootstrap over clusters of items (percentile), ordinal"
    with pytest.raises(ValueError):
        S.krippendorff_alpha(items, clusters=[0, 1])


def test_spearman_interval_is_fisher_z_with_fiellers_variance_worked_by_hand():
    """Six agents, ranks swapped in three neighbouring pairs: sum d^2 = 6, so rho = 1 - 6*6 /
    (6 * 35) = 29/35; the 95% interval is tanh(atanh(rho) -+ 1.959964 * sqrt(1.06 / 3)), about
    [0.0185, 0.9819] (worked by hand), and rho is scipy's."""
    import math

    from scipy.stats import norm, spearmanr

    from app.leaderboards.stats import spearman_interval

    a, b = [1, 2, 3, 4, 5, 6], [2, 1, 4, 3, 6, 5]
    out = spearman_interval(a, b)
    assert out["rho"] == pytest.approx(29 / 35) == pytest.approx(spearmanr(a, b)[0])
    assert out["low"] == pytest.approx(0.018521, abs=1e-5) and out["high"] == pytest.approx(0.981923, abs=1e-5)
    half = norm.ppf(0.975) * math.sqrt(1.06 / 3)
    assert (out["low"], out["high"]) == pytest.approx(
        (math.tanh(math.atanh(29 / 35) - half), math.tanh(math.atanh(29 / 35) + half))
    )
    # Too few agents, or a perfect correlation (atanh is infinite): rho without an interval, and why.
    three = spearman_interval([1, 2, 3], [1, 3, 2])
    assert three["rho"] == pytest.approx(0.5) and three["low"] is None and "at least 4" in three["reason"]
    perfect = spearman_interval([1, 2, 3, 4], [2, 4, 6, 8])
    assert perfect["rho"] == pytest.approx(1.0) and perfect["low"] is None and "undefined" in perfect["reason"]
    assert spearman_interval([1, 2], [2, 1])["rho"] is None


def test_spearmans_exact_p_reads_every_ordering_of_up_to_nine_once():
    """The exact p enumerates the n! orderings: each exactly once (a leaderboard of nine agents
    waited 0.4 s a Spearman cell while itertools' tuples became an array; now ~0.04 s)."""
    import itertools

    from app.leaderboards.stats import SPEARMAN_EXACT_MAX, _orderings

    for n in range(1, SPEARMAN_EXACT_MAX + 1):
        got = _orderings(n)
        assert got.shape == (math.factorial(n), n)
        assert {tuple(r) for r in got.tolist()} == set(itertools.permutations(range(n)))
