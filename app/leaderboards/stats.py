"""Statistics for leaderboards and agreement reports.

Every function here is pure (no database, no global state) and takes
*aggregated* inputs, because the numbers are computed in SQL first:

* proportions take ``(successes, n)`` counts;
* agreement coefficients take, per item, a mapping ``value -> number of
  ratings with that value`` (e.g. ``{"Yes": 2, "No": 1}``);
* the bootstrap, the Bernoulli-sum interval and the paired t-test take one
  number per item (or per pair of items).

Means of scores in [0, 1] go through :func:`mean_interval` (or :func:`mean_from_moments` on
SQL totals), whose method was chosen by simulated coverage; every :class:`Estimate` names its
method.  Krippendorff's alpha (:func:`krippendorff_alpha`) imports the ``krippendorff``
package when called, not at module load.

Intervals are 95% intervals unless a ``z`` is passed.  "No data" is reported
as ``nan`` rather than raised, so that a leaderboard row with zero judged
items renders as "n/a" instead of failing the whole page; malformed input
(negative counts, ``successes > n``, non-finite values, mismatched lengths)
raises ``ValueError`` / ``TypeError``.

Count arguments accept anything integral, including the ``int``/``Decimal``
values database drivers return for ``COUNT``/``SUM``; a non-whole number is
rejected rather than silently truncated.
"""

from __future__ import annotations

import functools
import math
import operator
from collections import Counter, defaultdict
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, cast

import numpy as np

# scipy.stats is imported where it is used: importing it costs ~0.5 s, which every `proctor`
# command (`--help` included) and every worker start paid through this module.

__all__ = [
    "Z95",
    "Estimate",
    "spearman_interval",
    "wilson_interval",
    "proportion",
    "mean_interval_bernoulli_sum",
    "mean_interval",
    "mean_from_moments",
    "krippendorff_alpha",
    "krippendorff_alpha_nominal",
    "fleiss_kappa",
    "bounded_mean",
    "paired_t_test",
    "paired_cluster_difference",
    "paired_cluster_differences",
    "paired_cluster_differences_many",
    "rank_intervals",
    "rank_intervals_from_draws",
    "rank_label",
    "tied_groups",
    "holm",
    "paired_effect",
    "majority_vote",
]

#: Two-sided 95% standard-normal quantile, Phi^-1(0.975).
Z95 = 1.959963984540054

NAN = float("nan")

#: The interval a plan is made for by default: ±5 points on a 0-1 scale (leaderboards.judged).
PLAN_HALF_WIDTH = 0.05

#: The names ``Estimate.method`` takes.
WILSON = "Wilson"
WILSON_EFFECTIVE = "Wilson (effective n)"
WILSON_EFFECTIVE_CLUSTERED = "Wilson (effective n, clusters)"
WHOLE_RANGE = "whole range (one unit)"
BERNOULLI_SUM = "normal (sum of Bernoullis)"
T_PAIRED = "t on paired differences"
BONETT_PRICE = "adjusted Wald (Bonett-Price)"
ALPHA_BOOTSTRAP = "bootstrap over items (percentile)"
ALPHA_CLUSTER_BOOTSTRAP = "bootstrap over clusters of items (percentile)"


# ---------------------------------------------------------------------------
# helpers


def _count(value: Any, what: str = "count") -> int:
    """Return ``value`` as a non-negative ``int``; reject fractions and negatives."""
    try:
        result = operator.index(value)
    except TypeError:
        try:
            result = int(value)
        except (TypeError, ValueError, OverflowError):
            raise TypeError(f"{what} must be a whole number, got {value!r}") from None
        if result != value:
            raise ValueError(f"{what} must be a whole number, got {value!r}") from None
    if result < 0:
        raise ValueError(f"{what} must be non-negative, got {value!r}")
    return result


def _finite_array(values: Iterable[float], what: str) -> np.ndarray:
    arr = np.asarray(values if isinstance(values, np.ndarray) else list(values), dtype=float)
    arr = arr.ravel()
    if arr.size and not np.all(np.isfinite(arr)):
        raise ValueError(f"{what} must all be finite numbers")
    return arr


def _none_if_nan(x: float) -> float | None:
    return None if isinstance(x, float) and math.isnan(x) else x


def _clean_item(item: Mapping[Hashable, Any]) -> dict[Hashable, int]:
    """One item's ``value -> count`` mapping, validated, without zero counts."""
    cleaned: dict[Hashable, int] = {}
    for value, raw in item.items():
        c = _count(raw, "rating count")
        if c:
            cleaned[value] = cleaned.get(value, 0) + c
    return cleaned


# ---------------------------------------------------------------------------
# proportions


@dataclass(frozen=True, slots=True)
class Estimate:
    """A point estimate with a (95%) interval.

    ``n`` is the number of observations the estimate rests on.  With no data
    ``mean``, ``low`` and ``high`` are ``nan``.  ``method`` is a short human
    name of how the interval was made ("Wilson", "Wilson (effective n)", ...),
    shown beside the number (DESIGN.md section 7: ``{mean, low, high, n, method}``).
    """

    n: int
    mean: float
    low: float
    high: float
    method: str = ""

    def as_dict(self) -> dict[str, int | float | str | None]:
        """JSON-ready dict; ``nan`` becomes ``None`` (JSON has no NaN, and
        Starlette's ``JSONResponse`` refuses to serialise it)."""
        return {
            "n": self.n,
            "mean": _none_if_nan(self.mean),
            "low": _none_if_nan(self.low),
            "high": _none_if_nan(self.high),
            "method": self.method,
        }


def wilson_interval(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion (95% by default).

    Returns ``(nan, nan)`` when ``n == 0``.  The bounds are exactly 0 when
    ``successes == 0`` and exactly 1 when ``successes == n`` (the closed form
    gives those values; this just removes rounding noise).
    """
    s = _count(successes, "successes")
    n = _count(n, "n")
    if s > n:
        raise ValueError(f"successes ({s}) cannot exceed n ({n})")
    if not (math.isfinite(z) and z > 0):
        raise ValueError(f"z must be a positive finite number, got {z!r}")
    if n == 0:
        return (NAN, NAN)
    return _wilson_real(s / n, n, z)


def proportion(successes: int, n: int) -> Estimate:
    """Observed proportion ``successes / n`` with its 95% Wilson interval."""
    low, high = wilson_interval(successes, n)
    n = _count(n, "n")
    mean = _count(successes, "successes") / n if n else NAN
    return Estimate(n=n, mean=mean, low=low, high=high, method=WILSON)


def mean_interval_bernoulli_sum(probabilities: Sequence[float], z: float = Z95) -> Estimate:
    """Expected score of a random baseline and its 95% interval.

    Item ``i`` is answered correctly with probability ``p_i`` (e.g. ``1/k``
    for a uniform guess among ``k`` options), independently across items.
    The baseline's accuracy is ``S/n`` with ``S`` a sum of independent
    Bernoullis, so ``E = mean(p_i)`` and ``sd = sqrt(sum p_i (1 - p_i)) / n``;
    the interval is the normal approximation ``E +/- z * sd`` clipped to
    ``[0, 1]``.  An empty sequence gives ``nan`` everywhere.
    """
    p = _finite_array(probabilities, "probabilities")
    if p.size and (p.min() < 0.0 or p.max() > 1.0):
        raise ValueError("probabilities must lie in [0, 1]")
    n = int(p.size)
    if n == 0:
        return Estimate(n=0, mean=NAN, low=NAN, high=NAN, method=BERNOULLI_SUM)
    mean = math.fsum(p.tolist()) / n
    half = z * math.sqrt(math.fsum((p * (1.0 - p)).tolist())) / n
    return Estimate(n=n, mean=mean, low=max(0.0, mean - half), high=min(1.0, mean + half), method=BERNOULLI_SUM)


# ---------------------------------------------------------------------------
# means of scores bounded in [0, 1]


def _wilson_real(p: float, n: float, z: float) -> tuple[float, float]:
    """Wilson's interval for a share ``p`` of ``n`` trials where ``n`` need not be whole."""
    z2 = z * z
    denom = 1.0 + z2 / n
    centre = (p + z2 / (2.0 * n)) / denom
    half = z * math.sqrt(max(p * (1.0 - p), 0.0) / n + z2 / (4.0 * n * n)) / denom
    low = 0.0 if p <= 0.0 else max(0.0, centre - half)
    high = 1.0 if p >= 1.0 else min(1.0, centre + half)
    return low, high


@functools.lru_cache(maxsize=1024)
def _t975(df: int) -> float:
    """Student's t quantile 0.975 on ``df`` degrees of freedom (cached: scipy's ppf costs ~40 us)."""
    import scipy.stats

    return float(scipy.stats.t.ppf(0.975, df))


def _effective_n_interval(n: int, mean: float, var_of_mean: float, units: int, method: str) -> Estimate:
    """Wilson's interval at the effective sample size, with Student's t for the normal quantile.

    ``var_of_mean`` is the estimated variance of the mean (0 for no observed spread), ``units``
    the number of independent units behind it (items, or clusters) and ``units - 1`` the degrees
    of freedom of that variance.  With no observed spread the effective size is ``units``.
    """
    if units < 2:  # one unit: no spread can be estimated, only the range is certain
        return Estimate(n=n, mean=mean, low=0.0, high=1.0, method=WHOLE_RANGE)
    n_eff = mean * (1.0 - mean) / var_of_mean if var_of_mean > 0.0 else float(units)
    if not n_eff > 0.0:  # (only rounding can get here: a spread at mean 0 or 1 is impossible)
        n_eff = float(units)
    low, high = _wilson_real(mean, n_eff, _t975(units - 1))
    return Estimate(n=n, mean=mean, low=min(low, mean), high=max(high, mean), method=method)


WILSON_BOUND = "Wilson (variance bound)"


def bounded_mean(total: float, n: int) -> Estimate:
    """The mean of ``n`` scores in [0, 1] of which only the sum ``total`` is known (running
    totals that keep no sum of squares), never rounded to a count: Wilson's interval with the
    count ``total``.  For right/wrong scores (a whole ``total``) it is Wilson's interval for the
    share; for partial credit it is conservative, since a score in [0, 1] with mean ``m`` has a
    variance of at most ``m (1 - m)``, a Bernoulli's (method ``"Wilson (variance bound)"``).
    Where the scores themselves are at hand, :func:`mean_interval` is tighter."""
    n = _count(n, "n")
    total = float(total)
    if not (math.isfinite(total) and -1e-9 <= total <= n + 1e-9):
        raise ValueError(f"a total of {total!r} is impossible for {n} scores in [0, 1]")
    if n == 0:
        return Estimate(n=0, mean=NAN, low=NAN, high=NAN, method=WILSON)
    mean = min(1.0, max(0.0, total / n))
    low, high = _wilson_real(mean, n, Z95)
    return Estimate(n=n, mean=mean, low=low, high=high, method=WILSON if total.is_integer() else WILSON_BOUND)


def _check_unit_scores(x: np.ndarray) -> None:
    if x.size and (x.min() < 0.0 or x.max() > 1.0):
        raise ValueError("scores must lie in [0, 1]")


def mean_from_moments(n: int, total: float, total_sq: float, *, binary: bool) -> Estimate:
    """:func:`mean_interval` of unclustered scores from running totals.

    ``n`` scores in [0, 1] with ``total = sum(x)`` and ``total_sq = sum(x * x)`` (SQL's
    ``COUNT(*), SUM(x), SUM(x * x)``).  ``binary=True`` says every score is 0 or 1 (then
    ``total`` must be whole and equal ``total_sq``): Wilson's interval for ``total`` of ``n``.
    Otherwise Wilson at the effective sample size (see :func:`mean_interval`) with the sample
    variance ``(total_sq - total**2 / n) / (n - 1)``; a sum of squared deviations within
    ``64 * eps * total_sq`` of zero (rounding) counts as no spread.

    :func:`mean_interval` computes its totals with ``math.fsum`` and calls this function, so
    the two agree exactly on the same values.
    """
    n = _count(n, "n")
    total, total_sq = float(total), float(total_sq)
    if not (math.isfinite(total) and math.isfinite(total_sq)):
        raise ValueError("total and total_sq must be finite")
    slack = 64.0 * np.finfo(float).eps * max(1.0, n)
    if not (-slack <= total <= n + slack and -slack <= total_sq <= total + slack):
        raise ValueError("totals are impossible for n scores in [0, 1] (need 0 <= total_sq <= total <= n)")
    if binary:
        successes = _count(total, "total of binary scores")
        if total_sq != total:
            raise ValueError("binary scores need total_sq == total (x * x == x for 0 and 1)")
        low, high = wilson_interval(successes, n)
        return Estimate(n=n, mean=successes / n if n else NAN, low=low, high=high, method=WILSON)
    if n == 0:
        return Estimate(n=0, mean=NAN, low=NAN, high=NAN, method=WILSON_EFFECTIVE)
    mean = min(1.0, max(0.0, total / n))
    squares = total_sq - total * total / n
    if squares <= 64.0 * np.finfo(float).eps * total_sq or n < 2:
        squares = 0.0
    var_of_mean = squares / (n - 1) / n if n > 1 else 0.0
    return _effective_n_interval(n, mean, var_of_mean, n, WILSON_EFFECTIVE)


def mean_interval(values: Sequence[float], clusters: Sequence[Hashable] | None = None, *, seed: int = 0) -> Estimate:
    """The mean of scores in [0, 1] with a 95% interval chosen by its simulated coverage.

    * All scores 0 or 1 and no ``clusters``: Wilson's interval for the share (method
      ``"Wilson"``).
    * Otherwise Wilson's interval at the effective sample size, after Korn & Graubard (1998):
      ``n_eff = mean * (1 - mean) / v``, where ``v`` is the estimated variance of the mean, with
      the normal quantile replaced by Student's t on ``units - 1`` degrees of freedom (method
      ``"Wilson (effective n)"``).  Without clusters ``v = s**2 / n`` (``s`` the sample standard
      deviation) and the units are the items; with ``clusters`` (one label per score: the
      scenario, path, procedure ...) the cluster is the unit and ``v`` is the cluster-robust
      (sandwich) variance ``G / (G - 1) * sum_g (T_g - mean * n_g)**2 / N**2`` over the ``G``
      clusters with totals ``T_g`` and sizes ``n_g`` (method ``"Wilson (effective n, clusters)"``).
      With no observed spread (all scores equal, or all cluster means equal) ``n_eff`` is the
      number of units, so 10 perfect scores give Wilson's [0.722, 1], never [1, 1].  A single
      unit gives the whole range [0, 1] (method ``"whole range (one unit)"``).  For continuous
      scores ``n_eff`` is large and the interval is close to ``mean +/- t * sqrt(v)``, but it
      stays inside [0, 1] and leans towards 1/2 near the ends as Wilson's does.

    Chosen by simulated coverage (bench/coverage.py; tests/unit/test_coverage.py asserts it)
    over n = 10, 20, 50, 200 items; binary scores with p = 0.5, 0.9, 0.97; Beta(2, 2),
    Beta(8, 1) and an F1-like score (60% exactly 1, 40% Uniform(0.5, 1)); unclustered, and in
    clusters of 3-5 items where each item takes its cluster's shared draw with probability 1/2
    (intra-cluster correlation 1/4).  Measured (5,000 studies per cell; unclustered binary
    exact; docs/benchmarks.md "Interval coverage"):

    * continuous scores, unclustered: 93.7-95.7% (Beta(8, 1) 93.8% and F1-like 93.7% at n = 10);
      clustered: 93.6-96.4%;
    * binary, unclustered (Wilson): 93.0-97.9%; outside 93-97% only where discreteness leaves
      no choice (n = 10, p = 0.5: every symmetric interval covers 89.1% or 97.9%; n = 20,
      p = 0.97: 88.0% or 97.9%) and 97.03% at n = 50, p = 0.9;
    * binary, clustered: 94.1-95.5% at n = 200 except p = 0.97 (93.0%); conservative with few
      clusters, t on G - 1 degrees of freedom: 98.8-99.6% at n = 10 (2-3 clusters), 96.1-98.8%
      at n = 20, 95.5-97.9% at n = 50.  (No one df fits every p: N - 1 fixes p = 0.9 but
      drops p = 0.5 at n = 10 to 83%.)

    Compared on the same grid (unclustered, 1,000 studies per cell): the percentile bootstrap
    covers 65.0% (p = 0.9, n = 10), 87.6% (p = 0.9, n = 20), 26-78% (p = 0.97, n <= 50) and
    85-92% for continuous scores at n = 10; scipy's BCa is no better for binary scores (65.0%,
    86.7%, 26-77%) and covers 89-92% for continuous scores at n = 10; t on items covers 65.0%
    and 26.2% at n = 10 for p = 0.9 and 0.97 (width 0 when every score is 1) and 89.7-91.3%
    for the skewed continuous scores at n = 10.  Wilson at the effective n with the normal
    quantile instead of t covered 62-81% with 2-3 clusters (exploratory run).

    ``seed`` is accepted for methods that resample; the chosen one does not, so the result does
    not depend on it.  An empty input gives ``nan`` with ``n == 0``; scores outside [0, 1] or
    non-finite raise ``ValueError``; ``clusters`` must have one label per score.
    """
    del seed  # the chosen method is deterministic
    x = _finite_array(values, "values")
    _check_unit_scores(x)
    n = int(x.size)
    binary = bool(np.all((x == 0.0) | (x == 1.0)))
    if clusters is None:
        return mean_from_moments(n, math.fsum(x.tolist()), math.fsum((x * x).tolist()), binary=binary)
    labels = list(clusters)
    if len(labels) != n:
        raise ValueError(f"clusters must have one label per score ({len(labels)} != {n})")
    if n == 0:
        return Estimate(n=0, mean=NAN, low=NAN, high=NAN, method=WILSON_EFFECTIVE_CLUSTERED)
    index: dict[Hashable, int] = {}
    inverse = np.fromiter((index.setdefault(label, len(index)) for label in labels), dtype=np.intp, count=n)
    g = len(index)
    totals = np.bincount(inverse, weights=x, minlength=g)
    sizes = np.bincount(inverse, minlength=g).astype(float)
    mean = min(1.0, max(0.0, math.fsum(x.tolist()) / n))
    residual = totals - mean * sizes
    squares = math.fsum((residual * residual).tolist())
    if squares <= 1e-24 * math.fsum((totals * totals).tolist()):  # equal cluster means, to rounding
        squares = 0.0
    var_of_mean = g / (g - 1) * squares / (n * n) if g > 1 else 0.0
    return _effective_n_interval(n, mean, var_of_mean, g, WILSON_EFFECTIVE_CLUSTERED)


T_MEAN = "t on items"
T_MEAN_CLUSTERED = "t on clusters (cluster-robust variance, G - 1 df)"
NO_SPREAD = "no spread observed: the interval is the mean itself"
TOO_FEW_UNITS = "too few units for an interval (one)"


def mean_interval_unbounded(values: Sequence[float], clusters: Sequence[Hashable] | None = None) -> Estimate:
    """The mean of unbounded scores (metres, counts, differences) with a 95% Student t interval.

    ``mean +/- t_{0.975, units - 1} * sqrt(v)``, where ``v`` is the estimated variance of the
    mean and the units are the items (no ``clusters``) or the clusters (one label per value:
    the path, scenario, procedure ...):

    * no clusters: ``v = s**2 / n`` with ``s`` the sample standard deviation (``ddof=1``), on
      ``n - 1`` degrees of freedom (method ``"t on items"``);
    * clusters: the cluster-robust (sandwich) variance of :func:`mean_interval`,
      ``v = G / (G - 1) * sum_g (T_g - mean * n_g)**2 / N**2`` over the ``G`` clusters with
      totals ``T_g`` and sizes ``n_g``, on ``G - 1`` degrees of freedom (method ``"t on clusters
      (cluster-robust variance, G - 1 df)"``).  With one value per cluster this is the
      unclustered interval (``G / (G - 1) * sum (x - mean)**2 / N**2 = s**2 / N``).

    Nothing bounds these scores, so nothing stands in for an unobserved spread: with no spread
    (every value, or every cluster mean, equal to rounding) the result says so, with
    ``low == high == mean`` and method ``"no spread observed: the interval is the mean
    itself"``; a single unit gives ``nan`` bounds with method ``"too few units for an interval
    (one)"``; no values give ``nan`` everywhere with ``n == 0``.  ``n`` is the number of values.
    Non-finite values raise ``ValueError``; ``clusters`` must have one label per value.
    """
    x = _finite_array(values, "values")
    n = int(x.size)
    if clusters is None:
        method = T_MEAN
        labels = None
    else:
        labels = list(clusters)
        if len(labels) != n:
            raise ValueError(f"clusters must have one label per value ({len(labels)} != {n})")
        method = T_MEAN_CLUSTERED
    if n == 0:
        return Estimate(n=0, mean=NAN, low=NAN, high=NAN, method=method)
    mean = math.fsum(x.tolist()) / n
    if labels is None:
        residual = x - mean
        sizes = np.ones(n)
        g = n
    else:
        index: dict[Hashable, int] = {}
        inverse = np.fromiter((index.setdefault(label, len(index)) for label in labels), dtype=np.intp, count=n)
        g = len(index)
        sizes = np.bincount(inverse, minlength=g).astype(float)
        residual = np.bincount(inverse, weights=x, minlength=g) - mean * sizes
    if g < 2:
        return Estimate(n=n, mean=mean, low=NAN, high=NAN, method=TOO_FEW_UNITS)
    squares = math.fsum((residual * residual).tolist())
    scale = math.fsum((x * x).tolist()) * float(sizes.max())  # rounding noise in the squares is below this
    if squares <= 64.0 * np.finfo(float).eps * scale:
        return Estimate(n=n, mean=mean, low=mean, high=mean, method=NO_SPREAD)
    var_of_mean = g / (g - 1) * squares / (n * n)
    half = _t975(g - 1) * math.sqrt(var_of_mean)
    return Estimate(n=n, mean=mean, low=mean - half, high=mean + half, method=method)


# ---------------------------------------------------------------------------
# agreement


def _with_weights(
    item_counts: Iterable[Mapping[Hashable, int]], weights: Iterable[float] | None
) -> Iterable[tuple[Mapping[Hashable, int], int]]:
    if weights is None:
        return ((item, 1) for item in item_counts)
    weights = list(weights)
    item_counts = list(item_counts)
    if len(weights) != len(item_counts) or any(int(w) != w or w < 0 for w in weights):
        raise ValueError("weights must be one non-negative whole number per item")
    return zip(item_counts, (int(w) for w in weights))


def krippendorff_alpha_nominal(
    item_counts: Iterable[Mapping[Hashable, int]], weights: Iterable[int] | None = None
) -> float:
    """Krippendorff's alpha for nominal data, from per-item value counts.

    ``item_counts`` yields, per item (unit), ``value -> number of ratings``.
    Items with fewer than two ratings cannot be paired and are ignored, as in
    Krippendorff's definition; raters need not be the same across items.

    With ``n_uc`` the count of value ``c`` in item ``u`` and ``m_u`` its
    number of ratings, the coincidence matrix is
    ``o_ck = sum_u n_uc (n_uk - [c == k]) / (m_u - 1)``, its marginals are
    ``n_c`` and ``n = sum_c n_c``.  For the nominal metric
    ``alpha = 1 - (n - 1) * sum_{c!=k} o_ck / sum_{c!=k} n_c n_k``,
    computed here in exact rational arithmetic as
    ``((n-1) sum_c o_cc - sum_c n_c (n_c-1)) / (n (n-1) - sum_c n_c (n_c-1))``.

    Returns ``nan`` when no item is pairable or when all pairable ratings
    share one value (no disagreement is expected, so alpha is undefined).

    ``weights``, if given, says how many items each count pattern stands for, so that a
    study's 100k items can be passed as their few distinct patterns.
    """
    totals: Counter[Hashable] = Counter()
    same_pairs_by_m: dict[int, int] = defaultdict(int)  # m_u -> sum_u sum_c n_uc (n_uc - 1)
    n = 0
    for item, w in _with_weights(item_counts, weights):
        counts = _clean_item(item)
        m = sum(counts.values())
        if m < 2 or w == 0:
            continue
        n += m * w
        same_pairs_by_m[m] += w * sum(c * (c - 1) for c in counts.values())
        totals.update({v: c * w for v, c in counts.items()})
    if n == 0:
        return NAN
    observed_agreement = sum(
        (Fraction(pairs, m - 1) for m, pairs in same_pairs_by_m.items()), Fraction(0)
    )  # = sum_c o_cc
    expected_same = sum(c * (c - 1) for c in totals.values())
    denominator = n * (n - 1) - expected_same
    if denominator == 0:
        return NAN
    return float(((n - 1) * observed_agreement - expected_same) / denominator)


def _alpha_counts(data: Any, clusters: Sequence[Hashable] | None = None) -> tuple[np.ndarray, list[Any], list[Any]]:
    """(pairable items x values) rating counts, the sorted values and the pairable items'
    clusters (None each without ``clusters``), from per-item value counts or from reliability
    data (raters x items, ``nan``/``None`` for a missing rating)."""
    reliability: Any
    if isinstance(data, np.ndarray):
        rows: list[Any] = []
        reliability = data
    else:
        rows = list(data)
        reliability = None if not rows or isinstance(rows[0], Mapping) else rows
    if reliability is not None:
        matrix = np.asarray(reliability, dtype=float)
        if matrix.ndim != 2:
            raise ValueError("reliability data must be a raters x items matrix")
        rows = []
        for unit in matrix.T:
            present = unit[~np.isnan(unit)]
            if present.size and not np.all(np.isfinite(present)):
                raise ValueError("ratings must be finite numbers (nan for missing)")
            values, counts = np.unique(present, return_counts=True)
            rows.append({float(v): int(c) for v, c in zip(values, counts)})
    labels = list(clusters) if clusters is not None else [None] * len(rows)
    if len(labels) != len(rows):
        raise ValueError(f"clusters must have one label per item ({len(labels)} != {len(rows)})")
    kept = [(c, g) for c, g in zip((_clean_item(item) for item in rows), labels) if sum(c.values()) >= 2]
    items = [c for c, _ in kept]
    seen = {v for item in items for v in item}
    try:
        domain = sorted(cast(Any, seen))  # values of one type order; mixed types: below
    except TypeError:
        domain = sorted(seen, key=lambda v: (type(v).__qualname__, repr(v)))
    column = {v: j for j, v in enumerate(domain)}
    counts = np.zeros((len(items), len(domain)), dtype=np.int64)
    for i, item in enumerate(items):
        for v, c in item.items():
            counts[i, column[v]] = c
    return counts, domain, [g for _, g in kept]


def krippendorff_alpha(
    data: Any, level: str = "nominal", n_boot: int = 1000, seed: int = 0, clusters: Sequence[Hashable] | None = None
) -> Estimate:
    """Krippendorff's alpha at the given level of measurement, with a 95% bootstrap interval.

    ``data`` is either per-item value counts (an iterable of ``value -> number of ratings``
    mappings, as :func:`krippendorff_alpha_nominal` takes; any hashable values) or reliability
    data (a raters x items matrix of numeric ratings, ``nan`` or ``None`` where a rater did not
    rate an item).  ``level`` is ``"nominal"``,
    ``"ordinal"`` (values ordered by their natural order) or ``"interval"`` (numeric values).

    The point value is the ``krippendorff`` package's ``alpha``.  The interval is the 2.5th-97.5th
    percentile of alpha over ``n_boot`` resamples of the pairable ITEMS (items drawn with
    replacement, each keeping all its ratings; ``numpy.random.default_rng(seed)``); resamples
    where alpha is undefined (one value only) are left out.  With ``clusters`` (one label per
    item of ``data``: the path, the procedure) the CLUSTERS are drawn, each keeping all its items
    (the method says so).  ``n`` is the number of pairable items (at least two ratings).  No
    pairable item, or a single value in all ratings, gives ``nan``.
    """
    import krippendorff as _krippendorff  # not imported at module load: only this function needs it

    if level not in ("nominal", "ordinal", "interval"):
        raise ValueError(f"level must be 'nominal', 'ordinal' or 'interval', got {level!r}")
    n_boot = _count(n_boot, "n_boot")
    counts, domain, groups = _alpha_counts(data, clusters)
    n_items = counts.shape[0]
    method = f"{ALPHA_BOOTSTRAP if clusters is None else ALPHA_CLUSTER_BOOTSTRAP}, {level}"
    if n_items == 0 or len(domain) < 2:
        return Estimate(n=n_items, mean=NAN, low=NAN, high=NAN, method=method)
    if level == "interval":
        try:
            value_domain = np.asarray(domain, dtype=float)
        except (TypeError, ValueError):
            raise TypeError("interval alpha needs numeric values") from None
    else:
        value_domain = np.arange(len(domain), dtype=float)  # nominal and ordinal use only the order

    def alpha(matrix: np.ndarray) -> float:
        if np.count_nonzero(matrix.sum(axis=0)) < 2:
            return NAN
        with np.errstate(divide="ignore", invalid="ignore"):
            return float(
                _krippendorff.alpha(
                    value_counts=matrix, value_domain=value_domain, level_of_measurement=cast(Any, level)
                )
            )

    point = alpha(counts)
    if math.isnan(point) or n_boot == 0:
        return Estimate(n=n_items, mean=point, low=NAN, high=NAN, method=method)
    rng = np.random.default_rng(seed)
    draws: Iterable[Any]
    if clusters is None:
        draws = (rng.integers(0, n_items, n_items) for _ in range(n_boot))
    else:
        members: dict[Hashable, list[int]] = {}
        for i, g in enumerate(groups):
            members.setdefault(g, []).append(i)
        units = list(members.values())
        draws = ([i for u in rng.integers(0, len(units), len(units)) for i in units[u]] for _ in range(n_boot))
    boots = np.array([alpha(counts[idx]) for idx in draws])
    boots = boots[~np.isnan(boots)]
    if boots.size == 0:
        return Estimate(n=n_items, mean=point, low=NAN, high=NAN, method=method)
    low, high = _percentile_interval(boots)
    return Estimate(n=n_items, mean=point, low=low, high=high, method=method)


def fleiss_kappa(
    item_counts: Iterable[Mapping[Hashable, int]],
    categories: Iterable[Hashable] | None = None,
    weights: Iterable[int] | None = None,
) -> tuple[float, int]:
    """Fleiss' kappa from per-item value counts; returns ``(kappa, items_used)``.

    Fleiss' kappa needs the same number of ratings ``m`` on every item.  Since
    real studies are ragged, ``m`` is taken as the most common number of
    ratings among items with at least two ratings (ties go to the larger
    ``m``, which uses more ratings), and only items with exactly ``m``
    ratings are used; their number is returned so the caller can report it.
    Prefer :func:`krippendorff_alpha_nominal`, which uses every pairable
    item, when the design is ragged.

    ``categories``, if given, is the allowed value set; a rating outside it
    raises ``ValueError``.  Categories nobody chose do not change kappa.

    Returns ``(nan, 0)`` when no item qualifies and ``(nan, items_used)`` when
    every used rating falls in one category (chance agreement ``P_e == 1``).
    The arithmetic is exact (rational) until the final conversion to float.
    """
    allowed = None if categories is None else set(categories)
    items: list[tuple[dict[Hashable, int], int]] = []
    for item, w in _with_weights(item_counts, weights):
        counts = _clean_item(item)
        if allowed is not None:
            unknown = [v for v in counts if v not in allowed]
            if unknown:
                raise ValueError(f"values {unknown!r} are not among the given categories")
        if sum(counts.values()) >= 2 and w > 0:
            items.append((counts, w))
    if not items:
        return (NAN, 0)
    frequency: Counter[int] = Counter()
    for c, w in items:
        frequency[sum(c.values())] += w
    top = max(frequency.values())
    m = max(size for size, f in frequency.items() if f == top)
    used = [(c, w) for c, w in items if sum(c.values()) == m]
    n_items = sum(w for _, w in used)

    squares = 0  # sum_i sum_j n_ij^2
    columns: Counter[Hashable] = Counter()
    for counts, w in used:
        squares += w * sum(c * c for c in counts.values())
        columns.update({v: c * w for v, c in counts.items()})
    total = n_items * m
    p_bar = Fraction(squares - total, total * (m - 1))
    p_e = Fraction(sum(c * c for c in columns.values()), total * total)
    if p_e == 1:
        return (NAN, n_items)
    return (float((p_bar - p_e) / (1 - p_e)), n_items)


# ---------------------------------------------------------------------------
# bootstrap

# Rank intervals draw items with replacement while len(items) * n_boot stays below this (about
# 0.2 s of work); beyond it, items with at most _MAX_DISTINCT_EXACT distinct score patterns are
# drawn as multinomial counts of each pattern (the same law, at a cost that does not grow).
_MAX_DISTINCT_EXACT = 1024
_EXACT_DRAW_BUDGET = 1 << 25
# Elements per chunk of resampled indices (keeps the working set in cache).
_CHUNK_ELEMENTS = 1 << 17


def _percentile_interval(means: np.ndarray) -> tuple[float, float]:
    low, high = np.percentile(means, [2.5, 97.5])
    return float(low), float(high)


# ---------------------------------------------------------------------------
# paired t-test


def _t_two_sided_p(t: float, df: float) -> float:
    """Two-sided p-value of Student's t with ``df`` degrees of freedom."""
    import scipy.stats

    return float(min(1.0, 2.0 * scipy.stats.t.sf(abs(t), df)))


def paired_t_test(a: Sequence[float], b: Sequence[float]) -> dict[str, float | int]:
    """Two-sided paired (related-samples) t-test of ``mean(a - b) == 0``.

    Returns ``{"n", "mean_diff", "t", "p"}`` with ``mean_diff = mean(a - b)``,
    ``t = mean_diff / (sd(a - b, ddof=1) / sqrt(n))`` and ``p`` from Student's
    t with ``n - 1`` degrees of freedom (same definition as
    ``scipy.stats.ttest_rel``).

    Degenerate cases never raise:

    * ``n == 0``: everything but ``n`` is ``nan``; ``n == 1``: ``t`` and ``p``
      are ``nan``;
    * all differences equal (zero variance; "equal" allows a few ulps of the
      inputs, the rounding of ``a - b``, so ``[1.1, 3.3] - [1.0, 3.2]`` is a
      constant difference): ``p`` is ``nan``; ``t`` is ``nan`` if the
      differences are all zero (to the same tolerance) and ``+inf``/``-inf``
      (the sign of ``mean_diff``) otherwise.  A constant non-zero difference
      is a perfectly consistent effect, but a p-value from zero observed
      variance is not meaningful, so none is given.
    """
    x = _finite_array(a, "a")
    y = _finite_array(b, "b")
    if x.size != y.size:
        raise ValueError(f"a and b must have the same length ({x.size} != {y.size})")
    d = x - y
    n = int(d.size)
    if n == 0:
        return {"n": 0, "mean_diff": NAN, "t": NAN, "p": NAN}
    mean_diff = float(d.mean())
    if n < 2:
        return {"n": n, "mean_diff": mean_diff, "t": NAN, "p": NAN}
    # Rounding in ``a - b`` is relative to the inputs, not to the differences:
    # 3.3 - 3.2 and 1.1 - 1.0 differ by ~4e-16.  Below this they count as equal.
    tolerance = 4.0 * np.finfo(float).eps * max(float(np.abs(x).max()), float(np.abs(y).max()))
    if float(d.max() - d.min()) <= tolerance:
        t = NAN if abs(mean_diff) <= tolerance else math.copysign(math.inf, mean_diff)
        return {"n": n, "mean_diff": mean_diff, "t": t, "p": NAN}
    sd = float(d.std(ddof=1))
    t = mean_diff / (sd / math.sqrt(n))
    return {"n": n, "mean_diff": mean_diff, "t": t, "p": _t_two_sided_p(t, n - 1)}


# ---------------------------------------------------------------------------
# paired difference over clusters (bootstrap interval, sign-flip p)

# Up to 2**13 sign patterns the randomisation test enumerates them all (an exact p).
_MAX_EXACT_FLIPS = 13


def _all_signs(n: int) -> np.ndarray:
    return ((np.arange(1 << n)[:, None] >> np.arange(n)) & 1) * 2 - 1


_SIGNS = [_all_signs(n) for n in range(_MAX_EXACT_FLIPS + 1)]


def _paired_input(a: Any, b: Any, weights: Any) -> tuple[np.ndarray, np.ndarray]:
    """(clusters x measures) weighted differences and the (clusters,) weights, checked."""
    x = np.asarray(a, dtype=float)
    y = np.asarray(b, dtype=float)
    x = x[:, None] if x.ndim == 1 else x
    y = y[:, None] if y.ndim == 1 else y
    if x.shape != y.shape:
        raise ValueError(f"a and b must have the same shape ({x.shape} != {y.shape})")
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        raise ValueError("a and b must be finite")
    w = np.ones(len(x)) if weights is None else _finite_array(weights, "weights")
    if w.size != len(x):
        raise ValueError(f"weights must have one value per cluster ({w.size} != {len(x)})")
    if (w <= 0).any():
        raise ValueError("weights must be positive")
    return w[:, None] * (x - y), w


def _paired_same_size(
    wd: np.ndarray, w: np.ndarray, n_boot: int, n_perm: int, seed: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Comparisons that all have n clusters, as columns: wd (n x columns) weighted
    differences, w (n x columns) their weights. One resample matrix and one set of sign
    patterns serve every column. Returns mean_diff, low, high, p, each (columns,)."""
    n = len(wd)
    total = w.sum(0)
    observed = wd.sum(0) / total
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(n_boot, n))
    counts = np.bincount((idx + (np.arange(n_boot) * n)[:, None]).ravel(), minlength=n_boot * n)
    counts = counts.reshape(n_boot, n).astype(float)
    low, high = np.percentile((counts @ wd) / (counts @ w), [2.5, 97.5], axis=0)
    # Ties within rounding count as hits (a zero difference must give p = 1).
    threshold = np.abs(observed) * total - 1e-9 * np.maximum(1.0, np.abs(wd).sum(0))
    if n <= _MAX_EXACT_FLIPS:
        p = (np.abs(_SIGNS[n] @ wd) >= threshold).mean(0)
    else:
        hits, rows = np.zeros(wd.shape[1]), max(1, _CHUNK_ELEMENTS // n)
        for start in range(0, n_perm, rows):
            r = min(rows, n_perm - start)
            # One random bit per sign: a byte string unpacked is the cheapest draw numpy has.
            bits = np.unpackbits(np.frombuffer(rng.bytes((r * n + 7) // 8), dtype=np.uint8))[: r * n]
            hits += (np.abs((1.0 - 2.0 * bits.reshape(r, n)) @ wd) >= threshold).sum(0)
        p = (1 + hits) / (1 + n_perm)
    return observed, low, high, np.minimum(1.0, p)


def paired_cluster_differences_many(
    comparisons: Sequence[tuple[Any, Any, Any]], n_boot: int = 2000, n_perm: int = 5000, seed: int = 0
) -> list[list[dict[str, float | int]]]:
    """Many `paired_cluster_differences` at once: ``comparisons`` is a list of (a, b, weights);
    one list of results per comparison. Comparisons over the same number of clusters share
    their resamples and sign patterns (each test stays valid on its own), so a leaderboard's
    hundreds of pairs cost a few matrix products."""
    n_boot = _count(n_boot, "n_boot")
    inputs = [_paired_input(a, b, w) for a, b, w in comparisons]
    out: list[list[dict[str, float | int]] | None] = [None] * len(inputs)
    by_size: dict[int, list[int]] = defaultdict(list)
    for k, (wd, _) in enumerate(inputs):
        by_size[len(wd)].append(k)
    for n, ks in by_size.items():
        if n == 0:
            for k in ks:
                out[k] = [{"n": 0, "mean_diff": NAN, "low": NAN, "high": NAN, "p": NAN}] * inputs[k][0].shape[1]
            continue
        wd = np.concatenate([inputs[k][0] for k in ks], axis=1)
        w = np.concatenate([np.repeat(inputs[k][1][:, None], inputs[k][0].shape[1], axis=1) for k in ks], axis=1)
        mean, low, high, p = _paired_same_size(wd, w, n_boot, n_perm, seed)
        col = 0
        for k in ks:
            m = inputs[k][0].shape[1]
            out[k] = [
                {"n": n, "mean_diff": float(mean[j]), "low": float(low[j]), "high": float(high[j]), "p": float(p[j])}
                for j in range(col, col + m)
            ]
            col += m
    return out  # type: ignore[return-value]


def paired_cluster_differences(
    a: Any, b: Any, weights: Sequence[float] | None = None, n_boot: int = 2000, n_perm: int = 5000, seed: int = 0
) -> list[dict[str, float | int]]:
    """`paired_cluster_difference` for several measures at once: ``a`` and ``b`` are
    (clusters x measures) arrays; one result per measure, all from the same resamples."""
    return paired_cluster_differences_many([(a, b, weights)], n_boot, n_perm, seed)[0]


def paired_cluster_difference(
    a: Sequence[float],
    b: Sequence[float],
    weights: Sequence[float] | None = None,
    n_boot: int = 2000,
    n_perm: int = 5000,
    seed: int = 0,
) -> dict[str, float | int]:
    """The difference of two systems' weighted means over the clusters both were scored on.

    ``a[i]`` and ``b[i]`` are the two systems' means on cluster ``i`` (e.g. a procedure's mean
    over its steps) and ``weights[i]`` its size (its steps; default 1), so ``mean_diff`` =
    sum(w * (a - b)) / sum(w), the difference of the means over all units.

    * ``low``, ``high``: 95% percentile interval of ``mean_diff`` from ``n_boot`` paired
      bootstrap resamples of clusters (the ratio recomputed per resample);
    * ``p``: two-sided randomisation test of "the systems are exchangeable within a cluster":
      each cluster's difference keeps or flips its sign. Exact over all 2**n sign patterns
      when n <= 13 (so never below 2 / 2**n), else ``n_perm`` random patterns,
      p = (1 + hits) / (1 + n_perm).

    Returns ``{"n", "mean_diff", "low", "high", "p"}``; ``n == 0`` gives ``nan`` for the rest.
    """
    x = _finite_array(a, "a")
    y = _finite_array(b, "b")
    if x.size != y.size:
        raise ValueError(f"a and b must have the same length ({x.size} != {y.size})")
    return paired_cluster_differences(x, y, weights, n_boot, n_perm, seed)[0]


# ---------------------------------------------------------------------------
# rankings, multiplicity, paired effects


#: Fewer units than this rank nobody: 2-4 items have 3-35 distinct resamples, and a bootstrap
#: over them would print settled ranks that the data cannot carry.
MIN_RANK_UNITS = 5


def rank_intervals(
    per_item_scores: Mapping[str, Sequence[float]], n_boot: int = 1000, seed: int = 0
) -> dict[str, tuple[int, int]]:
    """95% rank intervals ``(best, worst)`` of systems scored on the same items (rank 1: highest mean).

    ``per_item_scores[name][i]`` is system ``name``'s score on item ``i``; every list covers the
    same items in the same order.  ``n_boot`` resamples draw the items with replacement
    (``numpy.random.default_rng(seed)``), the same items for every system, and rank the systems'
    resampled means (past ``_EXACT_DRAW_BUDGET`` draws, items with at most 1024 distinct score
    patterns are drawn as multinomial pattern counts: the same law, another random stream).
    Tied means (within 1e-12) share every rank of the tie, so in one resample a tied system's
    best rank is 1 + the number of systems strictly above it and its worst rank the number at
    or above it.  ``best`` is the 2.5th percentile of the best ranks and ``worst``
    the 97.5th of the worst ranks (both actual ranks, never interpolated), widened if need be
    to hold the ranks on the observed items.  Fewer than ``MIN_RANK_UNITS`` items: every system
    gets ``(1, k)`` (the data cannot order them).
    """
    names = list(per_item_scores)
    n_boot = _count(n_boot, "n_boot")
    if n_boot < 1:
        raise ValueError("n_boot must be at least 1")
    if not names:
        return {}
    rows = [_finite_array(per_item_scores[name], f"scores of {name!r}") for name in names]
    n = rows[0].size
    if any(r.size != n for r in rows):
        raise ValueError("every system must be scored on the same items")
    k = len(names)
    if n < MIN_RANK_UNITS:  # a handful of units resamples to a handful of orders: no ranking
        return {name: (1, k) for name in names}
    scores = np.stack(rows)  # systems x items
    ranks = _tied_ranks
    rng = np.random.default_rng(seed)
    best_obs, worst_obs = ranks(scores.mean(axis=1))
    best_all = np.empty((n_boot, k), dtype=np.int64)
    worst_all = np.empty((n_boot, k), dtype=np.int64)
    weights = None
    if n * n_boot > _EXACT_DRAW_BUDGET:
        # Many items (100k on a big study: a second of index draws). Where the items carry few
        # distinct score patterns (0/1 scores, totals of a few), draw how many times each
        # pattern is picked, Multinomial(n, pattern counts / n): the same law as drawing
        # items, at a cost that does not grow with n.
        patterns, pattern_counts = np.unique(scores.T, axis=0, return_counts=True)
        if patterns.shape[0] <= _MAX_DISTINCT_EXACT:
            scores, weights = patterns.T, pattern_counts / n
    units = scores.shape[1]
    rows_per_chunk = max(1, _CHUNK_ELEMENTS // units)
    for start in range(0, n_boot, rows_per_chunk):
        stop = min(n_boot, start + rows_per_chunk)
        if weights is not None:
            counts = rng.multinomial(n, weights, size=stop - start).astype(float)
        else:
            idx = rng.integers(0, n, size=(stop - start, n))
            counts = np.zeros((stop - start, n))
            np.add.at(counts, (np.arange(stop - start)[:, None], idx), 1.0)
        best_all[start:stop], worst_all[start:stop] = ranks(counts @ scores.T / n)
    return dict(zip(names, _rank_bounds(best_all, worst_all, best_obs, worst_obs)))


def _tied_ranks(means: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(best, worst) rank of each system (last axis; rank 1: highest) with tied values (within
    1e-12 of the largest magnitude) sharing every rank of their tie."""
    tol = 1e-12 * np.maximum(1.0, np.abs(means).max(axis=-1, keepdims=True))
    diff = means[..., None, :] - means[..., :, None]  # [s, t] = mean_t - mean_s
    return 1 + (diff > tol[..., None]).sum(-1), (diff >= -tol[..., None]).sum(-1)


def _rank_bounds(
    best_all: np.ndarray, worst_all: np.ndarray, best_obs: np.ndarray, worst_obs: np.ndarray
) -> list[tuple[int, int]]:
    """Per system: the 2.5th percentile of its resampled best ranks and the 97.5th of its worst
    (actual ranks, never interpolated), widened if need be to hold the observed ranks."""
    best = np.minimum(np.quantile(best_all, 0.025, axis=0, method="lower"), best_obs)
    worst = np.maximum(np.quantile(worst_all, 0.975, axis=0, method="higher"), worst_obs)
    return [(int(b), int(w)) for b, w in zip(best, worst)]


def rank_intervals_from_draws(observed: Sequence[float] | np.ndarray, draws: np.ndarray) -> list[tuple[int, int]]:
    """95% rank intervals ``(best, worst)`` of systems from resampled scores (rank 1: highest),
    the conventions of :func:`rank_intervals`: ``observed[j]`` is system ``j``'s score on the
    data, ``draws[r, j]`` its score in resample ``r`` (a model refitted on resampled units);
    ties share every rank of their tie, and each interval holds the observed ranks. The caller
    applies ``MIN_RANK_UNITS``."""
    obs = _finite_array(observed, "observed")
    sample = np.asarray(draws, dtype=float)
    if sample.ndim != 2 or sample.shape[1] != obs.size or sample.shape[0] < 1:
        raise ValueError(f"draws must be (resamples, {obs.size}), got {sample.shape}")
    if not np.isfinite(sample).all():
        raise ValueError("draws must all be finite numbers")
    best_obs, worst_obs = _tied_ranks(obs)
    best_all, worst_all = _tied_ranks(sample)
    return _rank_bounds(best_all, worst_all, best_obs, worst_obs)


def clipped_difference(d: Mapping[str, Any]) -> dict[str, Any]:
    """An estimate of a difference of two scores in [0, 1] (``Estimate.as_dict()``), its
    interval clipped to [-1, 1], where such a difference lies."""
    return {**d, **{k: min(1.0, max(-1.0, d[k])) for k in ("low", "high") if d.get(k) is not None}}


def rank_label(interval: tuple[int, int]) -> str:
    """``"2"`` for a settled rank, ``"1-3"`` for a rank interval."""
    best, worst = interval
    return str(best) if best == worst else f"{best}-{worst}"


def tied_groups(intervals: Mapping[str, tuple[int, int]]) -> list[list[str]]:
    """Systems whose rank intervals overlap, directly or through others, in rank order.

    Groups are listed from the best; inside a group systems are ordered by ``(best, worst)``
    then by name.  A system whose interval overlaps no other is a group of one.
    """
    order = sorted(intervals, key=lambda name: (intervals[name][0], intervals[name][1], name))
    groups: list[list[str]] = []
    reach = 0
    for name in order:
        best, worst = intervals[name]
        if groups and best <= reach:
            groups[-1].append(name)
            reach = max(reach, worst)
        else:
            groups.append([name])
            reach = worst
    return groups


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjustment: the i-th smallest of m p-values times (m - i + 1), made
    non-decreasing, capped at 1 (checked against statsmodels' ``multipletests(method="holm")``,
    which is not called here: it runs ``gc.collect()`` on every call, half a second in a worker
    holding a model).

    ``nan`` p-values (no test possible) stay ``nan`` and do not count among the tests.
    """
    p = np.asarray([float(v) for v in pvalues], dtype=float)
    out = np.full(p.shape, NAN)
    ok = np.flatnonzero(~np.isnan(p))
    if ok.size:
        if p[ok].min() < 0.0 or p[ok].max() > 1.0:
            raise ValueError("p-values must lie in [0, 1]")
        order = ok[np.argsort(p[ok], kind="stable")]
        steps = p[order] * np.arange(ok.size, 0, -1)
        out[order] = np.minimum(np.maximum.accumulate(steps), 1.0)
    return [float(v) for v in out]


def paired_effect(a: Sequence[float], b: Sequence[float]) -> dict[str, Any]:
    """Paired difference ``a - b`` over the same items: its mean with a 95% interval, Cohen's d_z, p.

    Returns ``{"difference": Estimate, "cohen_dz": float, "p": float}``; ``difference.mean`` is
    ``mean(a - b)``, ``cohen_dz = mean / sd`` of the differences (``ddof=1``) and ``p`` the
    two-sided paired t-test's (:func:`paired_t_test`).  The interval, chosen by simulated coverage:

    * both systems scored 0/1 on every item: Bonett & Price's (2012) adjusted Wald interval for
      paired proportions, ``q12 - q21 +/- z sqrt((q12 + q21 - (q12 - q21)**2) / (n + 2))`` with
      ``q12 = (n12 + 1) / (n + 2)``, ``q21 = (n21 + 1) / (n + 2)`` from the discordant counts
      (method ``"adjusted Wald (Bonett-Price)"``);
    * otherwise Student's t on the paired differences, ``mean +/- t_{n-1} sd / sqrt(n)``
      (method ``"t on paired differences"``).

    Coverage measured (bench/coverage.py, 1,000 simulated studies per cell, n = 10, 20, 50,
    200; docs/benchmarks.md "Interval coverage"): for binary systems (0.9 vs 0.8 and 0.97 vs
    0.9 with b <= a on every item, independent 0.6 vs 0.5 and 0.9 vs 0.9) Bonett-Price covers
    93.8-100% (conservative at n <= 20 when discordant pairs are rare), where t on the
    differences covers 53% and 66% at n = 10 and 76-88% at n = 20-50 in the rare-discordance
    cases; for continuous scores (Beta(8, 1) minus Uniform(0, 0.2)) t covers 94.3-95.5%.

    Degenerate cases follow :func:`paired_t_test`: with no spread in the differences the
    t interval is the single point, ``cohen_dz`` is ``nan`` for a zero difference and infinite
    otherwise, ``p`` is ``nan``; fewer than two items give ``nan`` (binary pairs keep their
    Bonett-Price interval, which needs no spread).
    """
    test = paired_t_test(a, b)
    n, mean, t = int(test["n"]), float(test["mean_diff"]), float(test["t"])
    dz = NAN if n < 2 else t / math.sqrt(n) if math.isfinite(t) else t
    x, y = _finite_array(a, "a"), _finite_array(b, "b")
    if n >= 1 and np.all((x == 0.0) | (x == 1.0)) and np.all((y == 0.0) | (y == 1.0)):
        q12 = (float(np.count_nonzero(x > y)) + 1.0) / (n + 2)
        q21 = (float(np.count_nonzero(x < y)) + 1.0) / (n + 2)
        half = Z95 * math.sqrt((q12 + q21 - (q12 - q21) ** 2) / (n + 2))
        low, high = max(-1.0, min(q12 - q21 - half, mean)), min(1.0, max(q12 - q21 + half, mean))
        return {
            "difference": Estimate(n=n, mean=mean, low=low, high=high, method=BONETT_PRICE),
            "cohen_dz": dz,
            "p": test["p"],
        }
    if n < 2:
        low = high = NAN
    elif math.isnan(t) or math.isinf(t):  # no spread in the differences
        low = high = mean
    else:
        half = _t975(n - 1) * float((x - y).std(ddof=1)) / math.sqrt(n)
        low, high = mean - half, mean + half
    return {"difference": Estimate(n=n, mean=mean, low=low, high=high, method=T_PAIRED), "cohen_dz": dz, "p": test["p"]}


# ---------------------------------------------------------------------------
# majority vote


def majority_vote(counts: Mapping[Hashable, int], first_value: Hashable) -> Hashable:
    """The most frequent value; a tie goes to ``first_value``.

    ``first_value`` should be the value of the earliest annotation of the item
    (e.g. ``ORDER BY created_at, id LIMIT 1`` in the aggregating query).  Ties
    are broken that way rather than at random so that the gold label, and
    every number derived from it, is deterministic: recomputing a paper's
    table gives the same result, and the rule is easy to state.

    If ``first_value`` is not among the tied values (e.g. counts
    ``{A: 1, B: 2, C: 2}`` with ``first_value == A``) the smallest tied value
    wins (natural order, or ``(type name, repr)`` for values that cannot be
    compared), which is again deterministic; zero counts are ignored.
    Raises ``ValueError`` if there are no votes.
    """
    cleaned = _clean_item(counts)
    if not cleaned:
        raise ValueError("majority_vote needs at least one vote")
    top = max(cleaned.values())
    tied = [value for value, c in cleaned.items() if c == top]
    if len(tied) == 1:
        return tied[0]
    try:
        if cleaned.get(first_value) == top:
            return first_value
    except TypeError:  # unhashable first_value cannot be among the keys
        pass
    try:
        return cast(Hashable, min(cast(Any, tied)))
    except TypeError:
        return min(tied, key=lambda v: (type(v).__qualname__, repr(v)))


#: Up to this many pairs, Spearman's p is exact (every permutation enumerated: 9! = 362,880);
#: above it the t approximation scipy uses, which is close by then.
SPEARMAN_EXACT_MAX = 9


def _orderings(n: int) -> np.ndarray:
    """Every ordering of range(n), one a row (n! rows, in no particular order), built by
    inserting each next index at every place: for nine, 9 ms, where a list of itertools'
    362,880 tuples made into an array took 0.4 s of a leaderboard's page."""
    out = np.zeros((1, 1), dtype=np.int8)
    for k in range(1, n):
        rows = out.shape[0]
        grown = np.empty((rows * (k + 1), k + 1), dtype=np.int8)
        for place in range(k + 1):
            block = grown[place * rows : (place + 1) * rows]
            block[:, :place], block[:, place], block[:, place + 1 :] = out[:, :place], k, out[:, place:]
        out = grown
    return out


def spearman(a: Sequence[float], b: Sequence[float]) -> dict[str, Any]:
    """Spearman's rho between two paired lists and its two-sided p, exact for small n.

    ``{"rho", "p", "n", "method"}``; rho and p are None where rho is undefined (under 3 pairs,
    or either side constant). Up to ``SPEARMAN_EXACT_MAX`` pairs the p is the share of the n!
    orderings of ``b`` whose |rho| is at least the observed one (ties ranked by their mean
    rank): scipy's asymptotic p says 0.000 for rho = 1 over 3 agents, where only 2 of the 6
    orderings are that extreme (p = 1/3). Above it, scipy's t approximation."""
    x = _finite_array(a, "a")
    y = _finite_array(b, "b")
    if x.size != y.size:
        raise ValueError("a and b must have the same length")
    n = int(x.size)
    if n < 3 or np.unique(x).size < 2 or np.unique(y).size < 2:
        return {"rho": None, "p": None, "n": n, "method": None}
    from scipy.stats import rankdata, spearmanr

    if n > SPEARMAN_EXACT_MAX:
        rho, p = spearmanr(x, y)
        return {"rho": float(rho), "p": float(p), "n": n, "method": "t approximation"}
    rx, ry = rankdata(x), rankdata(y)
    rx, ry = rx - rx.mean(), ry - ry.mean()
    scale = math.sqrt(float(rx @ rx) * float(ry @ ry))
    observed = float(rx @ ry) / scale
    rhos = (ry[_orderings(n)] @ rx) / scale
    p = float(np.mean(np.abs(rhos) >= abs(observed) - 1e-12))
    return {"rho": observed, "p": p, "n": n, "method": "exact permutation"}


#: Fieller, Hartley and Pearson (1957): the variance of atanh(Spearman's rho) is about
#: 1.06 / (n - 3) (Pearson's r has 1 / (n - 3)).
SPEARMAN_FISHER_VARIANCE = 1.06
SPEARMAN_INTERVAL = "Fisher z (Fieller-Hartley-Pearson variance 1.06/(n-3))"


def spearman_interval(a: Sequence[float], b: Sequence[float], level: float = 0.95) -> dict[str, Any]:
    """Spearman's rho (``spearman``: its exact p for a few pairs) with a ``level`` interval:
    tanh(atanh(rho) -+ z * sqrt(1.06 / (n - 3))), z the normal quantile. ``{"rho", "low",
    "high", "p", "n", "method", "reason"}``; low and high are None with under 4 pairs (the
    variance needs n > 3) and rho is None where it is undefined, each with its reason."""
    out = {**spearman(a, b), "low": None, "high": None, "reason": None}
    n = out["n"]
    if out["rho"] is None:
        out["reason"] = "undefined: under 3 agents, or a ranking of all ties"
        return out
    if n < 4:
        out["reason"] = f"{n} agents: an interval needs at least 4"
        return out
    from scipy.stats import norm

    z = float(norm.ppf(0.5 + level / 2))
    rho = out["rho"]
    if abs(rho) >= 1.0 - 1e-12:  # atanh(+-1) is infinite: Fisher's z says nothing there
        out["reason"] = "rho is 1 or -1: the Fisher z interval is undefined"
        return out
    half = z * math.sqrt(SPEARMAN_FISHER_VARIANCE / (n - 3))
    out["low"], out["high"] = math.tanh(math.atanh(rho) - half), math.tanh(math.atanh(rho) + half)
    out["interval"] = SPEARMAN_INTERVAL
    return out


# ---------------------------------------------------------------------------
# people and an automatic judge together (issue 28)

PPI_PLUS = "PPI++ (power-tuned prediction-powered inference, normal)"
CLT = "normal (people only)"
MIN_PPI_HUMAN = 10  # below this the normal interval PPI rests on says nothing


def _ppi_start(y: np.ndarray, big_n: int, method: str, people: dict[str, Any]) -> dict[str, Any]:
    """What a people-and-judge estimate says before its interval: counts, people's mean and
    their own interval (ppi_mean and crossppi_mean fill in the rest, or a reason)."""
    n = int(y.size)
    return {
        "n": n,
        "n_judge": big_n,
        "mean": _none_if_nan(float(y.mean())) if n else None,
        "low": None,
        "high": None,
        "method": method,
        "effective_n": None,
        "people": people,
    }


def _too_few_people(n: int, unit: str) -> str:
    return f"{n} {unit}{'' if n == 1 else 's'} judged by people: under {MIN_PPI_HUMAN}, no interval"


def ppi_mean(
    human: Sequence[float], judged: Sequence[float], judge_only: Sequence[float], unit: str = "unit"
) -> dict[str, Any]:
    """The mean of what people would say over every unit, from people on a random sample and an
    automatic judge everywhere: PPI++ (Angelopoulos, Duchi and Zrnic 2023), through ppi-python.

    ``human[i]`` and ``judged[i]`` are people's value and the judge's on the same unit of the
    sample; ``judge_only`` the judge's on the units people did not see. The judge's weight is
    tuned from the data (lambda), so a useless judge gives about the people-only interval and
    never a biased one; the sample must be random. Returns the estimate's shape
    ``{mean, low, high, n, method}`` with ``n_judge`` (judge-only units), ``people`` (the
    people-only normal interval on the same sample) and ``effective_n``: how many people's
    judgements the interval is worth (n times the squared ratio of the two widths). Under
    ``MIN_PPI_HUMAN`` units, with no judge-only unit, or where an interval is undefined (no
    spread at all), the mean is people's own, the interval None and ``reason`` says why, in
    `unit`s (a continuation, a path)."""
    from ppi_py import ppi_mean_ci, ppi_mean_pointestimate

    y, yhat, yhat_u = (
        _finite_array(human, "human"),
        _finite_array(judged, "judged"),
        _finite_array(judge_only, "judge_only"),
    )
    if y.size != yhat.size:
        raise ValueError("human and judged must have the same length (the same units)")
    n, big_n = int(y.size), int(yhat_u.size)
    within = bool(n) and float(y.min()) >= 0.0 and float(y.max()) <= 1.0
    people = (
        mean_interval(y.tolist())
        if within
        else mean_interval_unbounded(y.tolist())
        if n
        else Estimate(0, NAN, NAN, NAN)
    ).as_dict()
    out = _ppi_start(y, big_n, PPI_PLUS, people)
    if n < MIN_PPI_HUMAN:
        out["reason"] = _too_few_people(n, unit)
        return out
    if big_n == 0:
        out["reason"] = f"people judged every {unit}: the judge has none to add"
        return out
    # A judge that says the same everywhere tells nothing: its weight is 0 (PPI++'s lambda is 0/0
    # there), and the estimate is people's own, with its normal interval.
    lam = 0.0 if float(np.concatenate([yhat, yhat_u]).std()) == 0.0 else None
    with np.errstate(all="ignore"):
        low, high = (float(v[0]) for v in ppi_mean_ci(y, yhat, yhat_u, alpha=0.05, lam=lam))
        c_low, c_high = (float(v[0]) for v in ppi_mean_ci(y, yhat, yhat_u, alpha=0.05, lam=0))
        mean = float(ppi_mean_pointestimate(y, yhat, yhat_u, lam=lam)[0])
    if not all(math.isfinite(v) for v in (low, high, mean)) or high - low <= 0:
        out["reason"] = "no spread in people's or the judge's values: no interval to estimate"
        return out
    width, classical = high - low, c_high - c_low  # the widths before any clipping
    if (
        within
        and float(yhat.min()) >= 0.0
        and float(yhat.max()) <= 1.0
        and float(yhat_u.min()) >= 0.0
        and float(yhat_u.max()) <= 1.0
    ):  # a share or a score in [0, 1]: so is the interval
        low, high = max(low, 0.0), min(high, 1.0)
    out.update(mean=mean, low=low, high=high)
    if math.isfinite(classical):
        out["effective_n"] = n * (classical / width) ** 2
    return out


def ppi_people_needed(
    human: Sequence[float], judged: Sequence[float], n_units: int, half_width: float, unit: str = "unit"
) -> dict[str, Any]:
    """How many of `n_units` units people must judge, at random, beside a judge on all of them,
    for PPI++'s 95% interval to be about ±`half_width` (a power analysis through ppi-python's
    `ppi_mean_power`, Broska, Howes and van Loon 2024): people's spread and the judge's PPI
    correlation are read from a pilot, ``human[i]`` and ``judged[i]`` on the same units.

    People alone need (z sigma / half_width)^2 units; with the judge on every unit, n of N where
    n (N - rho^2 n0) = n0 N (1 - rho^2). Returns {people, people_alone, of, share, half_width,
    ppi_corr, reachable} (`reachable` False: even people on every unit give a wider interval,
    `people` is then all of them), or {reason} when the pilot cannot say (under MIN_PPI_HUMAN
    units, no spread in people's values)."""
    import warnings

    from ppi_py.ppi_power_analysis import ppi_mean_power

    y, yhat = _finite_array(human, "human"), _finite_array(judged, "judged")
    if y.size != yhat.size:
        raise ValueError("human and judged must have the same length (the same units)")
    if not (half_width > 0 and math.isfinite(half_width)):
        raise ValueError("half_width must be a positive number")
    if n_units < y.size:
        raise ValueError("n_units counts every unit, the pilot's among them")
    n = int(y.size)
    if n < MIN_PPI_HUMAN:
        return {"reason": f"{n} {unit}{'' if n == 1 else 's'} judged by people: under {MIN_PPI_HUMAN}, no plan"}
    sigma = float(y.std(ddof=1))
    if sigma == 0.0:
        return {"reason": f"people gave every {unit} the same value: no spread to plan for"}
    alone = math.ceil((Z95 * sigma / half_width) ** 2)
    with warnings.catch_warnings():  # a target out of reach: the answer below says so
        warnings.simplefilter("ignore")
        rho = 0.0 if float(yhat.std()) == 0.0 else float(np.corrcoef(y, yhat)[0, 1])
        # A constant judge, or one uncorrelated with people (rho 0 up to rounding: ppi_power's
        # optimum is then 0/0 and it fails on a NaN): no help, people alone.
        if abs(rho) < 1e-9:
            rho, people = 0.0, min(alone, n_units)
        else:
            rho = max(-0.999999, min(0.999999, rho))  # ppi_power needs |rho| < 1
            # The judge costs next to nothing beside a person (0 makes the unconstrained optimum
            # infinite); every unit is judged, so n_max = the units decides n.
            plan = ppi_mean_power(y, yhat, cost_Y=1.0, cost_Yhat=1e-9, effective_n=alone, n_max=n_units)
            people = int(plan["n"])
    return _people_plan(people, alone, n_units, half_width, rho, sigma)


def _people_plan(people: int, alone: int, n_units: int, half_width: float, rho: float, sigma: float) -> dict[str, Any]:
    """A power analysis's answer: `people` at least MIN_PPI_HUMAN (the normal interval's floor),
    at most every unit, and the half width PPI++ is expected to reach with them (z sigma over the
    root of the effective n, n (n + N) / (n + (1 - rho^2) N) with N the units only the judge
    sees: Broska, Howes and van Loon's effective sample size, the one ppi_power plans with)."""
    people = min(max(people, MIN_PPI_HUMAN), n_units)
    rest = n_units - people
    effective = people * (people + rest) / (people + (1 - rho**2) * rest)
    return {
        "people": people,
        "people_alone": min(alone, n_units),
        "of": int(n_units),
        "share": people / n_units,
        "half_width": float(half_width),
        "expected_half_width": Z95 * sigma / math.sqrt(effective),
        "effective_n": effective,
        "ppi_corr": rho,
        "reachable": alone <= n_units,
    }


def ppi_people_for_agreement(n_units: int, half_width: float, agreement: float) -> dict[str, Any]:
    """How many of `n_units` units people must judge, at random, beside a judge on all of them,
    for PPI++'s 95% interval to be about ±`half_width`, before any pilot: the judge's agreement
    with people (the share of 0/1 verdicts it shares with them) is entered. The PPI correlation
    is 2 agreement - 1 and people's spread 0.5, both exact for a share of 1/2 with the judge's
    errors symmetric, and the spread the largest a 0-1 value can have, so the plan errs towards
    more people. The same power analysis as ppi_people_needed (ppi-python's `ppi_power`, n (N -
    rho^2 n0) = n0 N (1 - rho^2)) and the same answer's shape."""
    import warnings

    from ppi_py.ppi_power_analysis import ppi_power

    if not (0.0 < half_width <= 0.5):
        raise ValueError("half_width is above 0 and at most 0.5 (a 0-1 value's interval)")
    if not (0.0 <= agreement <= 1.0):
        raise ValueError("agreement is a share from 0 to 1")
    if n_units < 1:
        raise ValueError("n_units must be at least 1")
    sigma = 0.5
    alone = math.ceil((Z95 * sigma / half_width) ** 2)
    rho = max(-0.999999, min(0.999999, 2.0 * agreement - 1.0))  # ppi_power needs |rho| < 1
    with warnings.catch_warnings():  # a target out of reach: `reachable` says so
        warnings.simplefilter("ignore")
        plan = ppi_power(rho, cost_X=0.0, cost_Y=1.0, cost_Yhat=1e-9, effective_n=alone, n_max=n_units)
    return _people_plan(int(plan["n"]), alone, n_units, half_width, rho, sigma)


CROSS_PPI = "cross-prediction-powered inference (Zrnic and Candès 2024, K-fold, normal)"
CROSS_FOLDS = 5


def _fit_logistic(x: np.ndarray, y: np.ndarray) -> tuple[Any, np.ndarray, np.ndarray] | None:
    """A logistic regression (scikit-learn's, its default L2 penalty, on features standardised by
    the training units' mean and standard deviation) of values in [0, 1]: a value v counts as a
    success of weight v and a failure of weight 1 - v, so a tie (0.5) weighs on both sides. None
    where the values do not vary: the model is then the constant mean (see _predict)."""
    from sklearn.linear_model import LogisticRegression

    if float(y.min()) == float(y.max()):
        return None
    mu, sd = x.mean(axis=0), x.std(axis=0)
    sd = np.where(sd > 0, sd, 1.0)
    xx = np.concatenate([x, x])
    yy = np.concatenate([np.ones(y.size), np.zeros(y.size)])
    weight = np.concatenate([y, 1.0 - y])
    keep = weight > 0
    model = LogisticRegression().fit((xx[keep] - mu) / sd, yy[keep], sample_weight=weight[keep])
    return model, mu, sd


def _predict(model: tuple[Any, np.ndarray, np.ndarray] | None, y_train: np.ndarray, x: np.ndarray) -> np.ndarray:
    if model is None:
        return np.full(x.shape[0], float(y_train.mean()))
    fitted, mu, sd = model
    return np.asarray(fitted.predict_proba((x - mu) / sd)[:, 1], dtype=float)


def cross_fit(
    features_people: Sequence[Sequence[float]],
    labels: Sequence[float],
    features_unlabelled: Sequence[Sequence[float]],
    folds: int = CROSS_FOLDS,
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Cross-fitted predictions of people's values (0-1) from features available without people
    (Zrnic and Candès, "Cross-prediction-powered inference", PNAS 2024): people's units are split
    at random (`seed`) into `folds` folds; each fold's units are predicted by a logistic regression
    trained on the other folds, and every unlabelled unit by each of the `folds` models. Returns
    (the fold of each of people's units, their predictions (n,), the unlabelled units'
    predictions (N, folds), one column per model)."""
    y = _finite_array(labels, "labels")
    x = np.asarray(features_people, dtype=float).reshape(y.size, -1)
    x_u = (
        np.asarray(features_unlabelled, dtype=float).reshape(-1, x.shape[1])
        if len(features_unlabelled)
        else np.zeros((0, x.shape[1]))
    )
    if not (np.isfinite(x).all() and np.isfinite(x_u).all()):
        raise ValueError("features must be finite numbers")
    if y.size and (float(y.min()) < 0.0 or float(y.max()) > 1.0):
        raise ValueError("labels must lie in [0, 1]")
    if folds < 2 or y.size < folds:
        raise ValueError(f"cross-fitting needs at least 2 folds and a unit of people's per fold ({y.size} for {folds})")
    fold = np.empty(y.size, dtype=int)
    fold[np.random.default_rng(seed).permutation(y.size)] = np.arange(y.size) % folds
    yhat = np.empty(y.size)
    yhat_u = np.empty((x_u.shape[0], folds))
    for k in range(folds):
        train = fold != k
        model = _fit_logistic(x[train], y[train])
        yhat[~train] = _predict(model, y[train], x[~train])
        if x_u.shape[0]:
            yhat_u[:, k] = _predict(model, y[train], x_u)
    return fold, yhat, yhat_u


def crossppi_mean(
    features_people: Sequence[Sequence[float]],
    labels: Sequence[float],
    features_unlabelled: Sequence[Sequence[float]],
    folds: int = CROSS_FOLDS,
    seed: int = 0,
    unit: str = "unit",
) -> dict[str, Any]:
    """The mean of what people would say over every unit, from people's values (0-1) on a random
    sample and a predictor of them trained on those same values: cross-prediction-powered
    inference (Zrnic and Candès 2024), through ppi-python's crossppi_mean_*, with the predictions
    from :func:`cross_fit` (a predictor trained on the labels it is then combined with would break
    PPI's guarantee; cross-fitting keeps it). The same shape as :func:`ppi_mean` (its `people`,
    `effective_n`, `reason`), `predictions`: the cross-fitted prediction of each of people's
    units, in their order (what its agreement with held-out people is read from), and
    `unlabelled`: each unlabelled unit's mean prediction over the fold models. Unlike PPI++
    the predictions' weight is not tuned: a poor predictor can widen the interval."""
    from ppi_py import classical_mean_ci, crossppi_mean_ci, crossppi_mean_pointestimate

    y = _finite_array(labels, "labels")
    n, big_n = int(y.size), len(features_unlabelled)
    people = (mean_interval(y.tolist()) if n else Estimate(0, NAN, NAN, NAN)).as_dict()
    out = _ppi_start(y, big_n, CROSS_PPI, people) | {"predictions": None, "unlabelled": None}
    if n < MIN_PPI_HUMAN:
        out["reason"] = _too_few_people(n, unit)
        return out
    _, yhat, yhat_u = cross_fit(features_people, labels, features_unlabelled, folds, seed)
    out["predictions"], out["unlabelled"] = yhat.tolist(), yhat_u.mean(axis=1).tolist()
    if big_n == 0:
        out["reason"] = f"people judged every {unit}: the predictor has none to add"
        return out
    with np.errstate(all="ignore"):
        low, high = (float(np.ravel(v)[0]) for v in crossppi_mean_ci(y, yhat, yhat_u, alpha=0.05))
        mean = float(np.ravel(crossppi_mean_pointestimate(y, yhat, yhat_u))[0])
        c_low, c_high = (float(v) for v in classical_mean_ci(y, alpha=0.05))
    if not all(math.isfinite(v) for v in (low, high, mean)) or high - low <= 0:
        out["reason"] = "no spread in people's or the predictor's values: no interval to estimate"
        return out
    width, classical = high - low, c_high - c_low
    out.update(mean=mean, low=max(low, 0.0), high=min(high, 1.0))
    if math.isfinite(classical) and classical > 0:
        out["effective_n"] = n * (classical / width) ** 2
    return out
