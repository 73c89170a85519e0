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
    assert d == {"n": 10, "mean": est.mean, "low": est.low, "high": est.high}
    with pytest.raises(dataclasses.FrozenInstanceError):
        est.mean = 0.5  # type: ignore[misc]


def test_proportion_empty_serialises_nan_as_none():
    est = S.proportion(0, 0)
    assert est.n == 0 and math.isnan(est.mean) and math.isnan(est.low) and math.isnan(est.high)
    assert est.as_dict() == {"n": 0, "mean": None, "low": None, "high": None}


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
    assert alpha == pytest.approx(krippendorff.alpha(reliability_data=data, level_of_measurement="nominal"),
                                  abs=1e-12)


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
        krippendorff.alpha(reliability_data=data, level_of_measurement="nominal"), abs=1e-12)


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
    assert kappa == pytest.approx(sm_inter_rater.fleiss_kappa(np.array(FLEISS_1971), method="fleiss"),
                                  abs=1e-12)


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
# bootstrap


def _theory_halfwidth(x: np.ndarray) -> float:
    return S.Z95 * x.std() / math.sqrt(x.size)


def test_bootstrap_contains_mean_and_narrows_with_n():
    rng = np.random.default_rng(5)
    small = rng.normal(3.0, 2.0, size=100)
    large = rng.normal(3.0, 2.0, size=10_000)
    es, el = S.bootstrap_mean_interval(small), S.bootstrap_mean_interval(large)
    for est, x in ((es, small), (el, large)):
        assert est.n == x.size
        assert est.mean == pytest.approx(x.mean(), rel=1e-12)
        assert est.low < est.mean < est.high
    ratio = (es.high - es.low) / (el.high - el.low)
    assert 7 < ratio < 13  # ~ sqrt(10000 / 100) = 10


@pytest.mark.parametrize(
    "kind",
    ["binary", "likert", "continuous_small", "continuous_large", "heavy_tailed", "outliers"],
)
def test_bootstrap_width_matches_theory_on_every_path(kind):
    rng = np.random.default_rng(21)
    x = {
        "binary": lambda: (rng.random(50_000) < 0.3).astype(float),        # distinct-values path
        "likert": lambda: rng.integers(1, 6, 20_000).astype(float),        # distinct-values path
        "continuous_small": lambda: rng.normal(size=3_000),                # index path
        "continuous_large": lambda: rng.normal(size=60_000),               # binned path
        "heavy_tailed": lambda: rng.lognormal(0, 2, size=60_000),          # binned path, refined bins
        "outliers": lambda: np.concatenate([rng.random(59_990), np.full(10, 1e5)]),
    }[kind]()
    est = S.bootstrap_mean_interval(x)
    half = _theory_halfwidth(x)
    # Normal theory is only approximate for skewed data; 2000 resamples give ~3% noise.
    tol = 0.25 if kind in ("heavy_tailed", "outliers") else 0.08
    assert (est.high - est.low) / 2 == pytest.approx(half, rel=tol)
    assert est.low < est.mean < est.high


def test_bootstrap_is_reproducible_and_seeded():
    x = np.random.default_rng(1).normal(size=2_000)
    assert S.bootstrap_mean_interval(x, seed=3) == S.bootstrap_mean_interval(x.tolist(), seed=3)
    assert S.bootstrap_mean_interval(x, seed=3) != S.bootstrap_mean_interval(x, seed=4)


def test_bootstrap_binned_sampler_matches_resampling_distribution():
    # The fast sampler must reproduce the spread of the exact bootstrap of the mean,
    # whose sd is sd(x) / sqrt(n) (population sd); 4000 resamples -> ~1.1% noise.
    rng = np.random.default_rng(8)
    for x in (rng.normal(size=40_000), rng.exponential(size=40_000), rng.standard_t(3, size=40_000)):
        means = S._resample_means_binned(np.random.default_rng(0), x, 4000)
        assert means is not None
        sd = x.std() / math.sqrt(x.size)
        assert means.std() == pytest.approx(sd, rel=0.05)
        assert means.mean() == pytest.approx(x.mean(), abs=0.1 * sd)
        y = x[:3000]
        exact = S._resample_means_indices(np.random.default_rng(1), y, 4000)
        assert exact.std() == pytest.approx(y.std() / math.sqrt(y.size), rel=0.05)


@pytest.mark.parametrize("sampler", ["distinct", "indices", "binned"])
def test_bootstrap_samplers_are_centred_with_the_right_spread(sampler):
    # Every sampler must produce resample means centred on the sample mean with
    # sd = sd(x) / sqrt(n); 4000 resamples -> ~0.016 sd noise on the centre, ~1.1% on the sd.
    rng = np.random.default_rng(12)
    if sampler == "distinct":
        x = rng.integers(1, 6, size=20_000).astype(float)
        distinct, counts = np.unique(x, return_counts=True)
        means = S._resample_means_distinct(np.random.default_rng(0), distinct, counts, 4000)
    elif sampler == "indices":
        x = rng.normal(3.0, 1.0, size=3_000)
        means = S._resample_means_indices(np.random.default_rng(0), x, 4000)
    else:
        x = rng.normal(3.0, 1.0, size=20_000)
        means = S._resample_means_binned(np.random.default_rng(0), x, 4000)
    sd = x.std() / math.sqrt(x.size)
    assert means.mean() == pytest.approx(x.mean(), abs=0.08 * sd)
    assert means.std() == pytest.approx(sd, rel=0.05)


def test_bootstrap_falls_back_to_exact_resampling(monkeypatch):
    rng = np.random.default_rng(4)
    x = rng.lognormal(0, 2, size=5_000)
    monkeypatch.setattr(S, "_EXACT_DRAW_BUDGET", 0)  # route continuous data to the binned sampler
    monkeypatch.setattr(S, "_MAX_BINS", S._INITIAL_BINS)  # no room to refine -> refuse
    assert S._resample_means_binned(np.random.default_rng(0), x, 10) is None
    # The refused sampler consumed no randomness, so the result is the exact one.
    assert S.bootstrap_mean_interval(x) == S.bootstrap_mean_interval(x, exact=True)


def test_bootstrap_exact_mode_agrees_with_distinct_values_path():
    x = np.random.default_rng(2).integers(0, 5, size=5_000).astype(float)
    fast = S.bootstrap_mean_interval(x)
    exact = S.bootstrap_mean_interval(x, exact=True)
    assert fast != exact  # different strategies really ran
    assert fast.high - fast.low == pytest.approx(exact.high - exact.low, rel=0.1)


def test_bootstrap_binned_path_agrees_with_exact_resampling_on_100k_values():
    # Speed is measured in bench/, not asserted; here the fast path must give the same answer.
    rng = np.random.default_rng(0)
    for x in (rng.normal(size=100_000), rng.lognormal(size=100_000)):
        fast = S.bootstrap_mean_interval(x)
        exact = S.bootstrap_mean_interval(x, exact=True)
        assert fast.low < fast.mean < fast.high
        assert fast.high - fast.low == pytest.approx(exact.high - exact.low, rel=0.1)
        assert fast.low == pytest.approx(exact.low, abs=0.1 * (exact.high - exact.low))


def test_bootstrap_edge_cases():
    est = S.bootstrap_mean_interval([])
    assert est.n == 0 and math.isnan(est.mean) and math.isnan(est.low) and math.isnan(est.high)
    assert S.bootstrap_mean_interval([2.5]) == S.Estimate(1, 2.5, 2.5, 2.5)
    assert S.bootstrap_mean_interval([0.1] * 50) == S.Estimate(50, 0.1, 0.1, 0.1)
    est = S.bootstrap_mean_interval([0.0, 1.0], n_boot=1)
    assert est.low == est.high
    with pytest.raises(ValueError):
        S.bootstrap_mean_interval([1.0, float("nan")])
    with pytest.raises(ValueError):
        S.bootstrap_mean_interval([1.0, 2.0], n_boot=0)


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


@needs_scipy
def test_paired_t_without_scipy_uses_incomplete_beta(monkeypatch):
    rng = np.random.default_rng(9)
    a, b = rng.normal(size=30), rng.normal(0.4, 1, size=30)
    ref = S.paired_t_test(a, b)
    calls = []
    fallback = S._t_two_sided_p_fallback

    def spy(t, df):
        calls.append((t, df))
        return fallback(t, df)

    monkeypatch.setattr(S, "_scipy_stdtr", None)
    monkeypatch.setattr(S, "_t_two_sided_p_fallback", spy)
    res = S.paired_t_test(a, b)
    assert calls == [(res["t"], 29)]
    assert res["p"] == pytest.approx(ref["p"], rel=1e-10)
    for t in (0.0, 1e-8, 0.3, 1.0, 2.5, 8.0, 40.0, 1e4):
        # Closed forms for 1 and 2 df (scipy's stdtr is off by ~3e-9 at df=1, t=1e-8).
        cauchy = 2 / math.pi * math.atan2(1.0, t)
        r = math.sqrt(2 + t * t)
        assert fallback(t, 1) == pytest.approx(cauchy, rel=1e-13)
        assert fallback(-t, 1) == pytest.approx(cauchy, rel=1e-13)
        assert fallback(t, 2) == pytest.approx(2 / (r * (r + t)), rel=1e-13)
        for df in (3, 7, 30, 500):
            expected = float(2 * scipy.special.stdtr(df, -t))
            assert fallback(t, df) == pytest.approx(expected, rel=1e-10, abs=1e-300)


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
