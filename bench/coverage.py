"""Interval coverage of the statistics core's mean of scores in [0, 1] (DESIGN.md section 7).

For each cell (score distribution x study size x clustering) this simulates many studies,
computes ``app.leaderboards.stats.mean_interval`` on each and prints the share of intervals
that hold the true mean.  Binary scores without clusters are exact, not simulated: the
coverage is the sum of the binomial probabilities of the successes whose interval holds p.

Clustered studies: items come in clusters of 3-5 (sizes drawn per study; a remainder under 3
joins the last cluster); each item takes its cluster's shared draw with probability 1/2 and an
independent draw otherwise, so the marginal distribution (and the true mean) is unchanged and
the intra-cluster correlation is 1/4.

A second table compares, without clusters, the interval the leaderboards used before
(the percentile bootstrap), scipy's BCa bootstrap and Student's t on items; a
third gives the coverage of ``paired_effect``'s interval for a difference of two systems on
the same items (Bonett-Price for binary scores, t otherwise), with t beside it.
Figures printed, nothing asserted (tests/unit/test_coverage.py asserts a smaller run).

    python bench/coverage.py [--quick] [--reps N] [--seed S]
"""

from __future__ import annotations

import argparse
import inspect
import time
import warnings

import numpy as np
import scipy.stats

from app.leaderboards import stats

# scipy >= 1.15 calls the generator argument `rng`; 1.11-1.14 (which pyproject allows) call it
# `random_state`. Either way it takes a numpy Generator and draws from it the same way.
_RNG_ARG = "rng" if "rng" in inspect.signature(scipy.stats.bootstrap).parameters else "random_state"

SIZES = (10, 20, 50, 200)
RHO = 0.5  # chance an item takes its cluster's shared draw (intra-cluster correlation RHO**2)

# name -> (true mean, draw(rng, shape))
DISTRIBUTIONS = {
    "binary p=0.5": (0.5, lambda rng, shape: (rng.random(shape) < 0.5).astype(float)),
    "binary p=0.9": (0.9, lambda rng, shape: (rng.random(shape) < 0.9).astype(float)),
    "binary p=0.97": (0.97, lambda rng, shape: (rng.random(shape) < 0.97).astype(float)),
    "Beta(2,2)": (0.5, lambda rng, shape: rng.beta(2.0, 2.0, shape)),
    "Beta(8,1)": (8.0 / 9.0, lambda rng, shape: rng.beta(8.0, 1.0, shape)),
    "F1-like": (0.9, lambda rng, shape: np.where(rng.random(shape) < 0.6, 1.0, rng.uniform(0.5, 1.0, shape))),
}


def cluster_labels(rng: np.random.Generator, n: int) -> np.ndarray:
    """Cluster label per item: sizes 3-5 drawn until n is reached; a remainder under 3 joins the last."""
    ends = np.cumsum(rng.integers(3, 6, size=n // 3 + 1))
    ends = ends[ends < n]
    if ends.size and n - ends[-1] < 3:
        ends = ends[:-1]
    labels = np.zeros(n, dtype=np.intp)
    labels[ends] = 1
    return np.cumsum(labels)


def studies(rng: np.random.Generator, name: str, n: int, reps: int, clustered: bool):
    """Yield ``reps`` studies ``(scores, cluster labels or None)`` of ``n`` items."""
    _, draw = DISTRIBUTIONS[name]
    x = draw(rng, (reps, n))
    if not clustered:
        for row in x:
            yield row, None
        return
    for row in x:
        labels = cluster_labels(rng, n)
        shared = draw(rng, labels.max() + 1)
        take = rng.random(n) < RHO
        yield np.where(take, shared[labels], row), labels


def exact_binary_coverage(interval, n: int, p: float) -> float:
    """Coverage of ``interval(values)`` for n Bernoulli(p) scores, summed over the binomial."""
    pmf = scipy.stats.binom.pmf(np.arange(n + 1), n, p)
    total = 0.0
    for k in range(n + 1):
        est = interval(np.r_[np.ones(k), np.zeros(n - k)])
        if est.low <= p <= est.high:
            total += pmf[k]
    return float(total)


def coverage(rng: np.random.Generator, name: str, n: int, reps: int, clustered: bool, interval=None) -> float:
    """Share of studies whose interval holds the true mean (exact for unclustered binary scores)."""
    truth, _ = DISTRIBUTIONS[name]
    if interval is None:
        interval = stats.mean_interval
    if name.startswith("binary") and not clustered:
        return exact_binary_coverage(interval, n, truth)
    hits = 0
    for x, labels in studies(rng, name, n, reps, clustered):
        est = interval(x) if labels is None else interval(x, labels)
        hits += est.low <= truth <= est.high
    return hits / reps


def bca(x: np.ndarray) -> stats.Estimate:
    if np.ptp(x) == 0:
        v = float(x[0])
        return stats.Estimate(x.size, v, v, v, "BCa bootstrap")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ci = scipy.stats.bootstrap(
            (x,), np.mean, n_resamples=999, method="BCa", **{_RNG_ARG: np.random.default_rng(0)}
        ).confidence_interval
    return stats.Estimate(x.size, float(x.mean()), float(ci.low), float(ci.high), "BCa bootstrap")


def t_on_items(x: np.ndarray) -> stats.Estimate:
    n, m = x.size, float(x.mean())
    half = float(scipy.stats.t.ppf(0.975, n - 1)) * float(x.std(ddof=1)) / np.sqrt(n)
    return stats.Estimate(n, m, m - half, m + half, "t on items")


def percentile(x: np.ndarray) -> stats.Estimate:
    """The percentile bootstrap over items (what the leaderboards used before), by scipy."""
    if np.ptp(x) == 0:
        v = float(x[0])
        return stats.Estimate(x.size, v, v, v, "percentile bootstrap")
    ci = scipy.stats.bootstrap(
        (x,), np.mean, n_resamples=1000, method="percentile", **{_RNG_ARG: np.random.default_rng(0)}
    ).confidence_interval
    return stats.Estimate(x.size, float(x.mean()), float(ci.low), float(ci.high), "percentile bootstrap")


# Paired comparisons: name -> (true difference, draw(rng, shape) -> (a, b)).  "b <= a" pairs
# share one uniform per item, so discordant pairs go one way and are rare.
PAIRS = {
    "binary 0.9 vs 0.8, b <= a": (0.1, lambda rng, shape: _shared_uniform(rng, shape, 0.9, 0.8)),
    "binary 0.97 vs 0.9, b <= a": (0.07, lambda rng, shape: _shared_uniform(rng, shape, 0.97, 0.9)),
    "binary 0.6 vs 0.5, independent": (
        0.1,
        lambda rng, shape: ((rng.random(shape) < 0.6) * 1.0, (rng.random(shape) < 0.5) * 1.0),
    ),
    "binary 0.9 vs 0.9, independent": (
        0.0,
        lambda rng, shape: ((rng.random(shape) < 0.9) * 1.0, (rng.random(shape) < 0.9) * 1.0),
    ),
    "Beta(8,1) vs it minus U(0,0.2)": (0.1, lambda rng, shape: _beta_minus_uniform(rng, shape)),
}


def _shared_uniform(rng, shape, pa, pb):
    u = rng.random(shape)
    return (u < pa) * 1.0, (u < pb) * 1.0


def _beta_minus_uniform(rng, shape):
    # b = a - U(0, 0.2) (the uniform is subtracted before clipping at 0; the clip moves the
    # mean difference by under 1e-6 since P(a < 0.2) = 0.2**8)
    a = rng.beta(8.0, 1.0, shape)
    return a, np.clip(a - rng.uniform(0.0, 0.2, shape), 0.0, 1.0)


def paired_coverage(rng: np.random.Generator, name: str, n: int, reps: int, interval=None) -> float:
    """Share of studies whose interval for mean(a - b) holds the true difference."""
    truth, draw = PAIRS[name]
    if interval is None:

        def interval(x, y):
            return stats.paired_effect(x, y)["difference"]

    a, b = draw(rng, (reps, n))
    hits = 0
    for x, y in zip(a, b):
        est = interval(x, y)
        hits += est.low <= truth <= est.high
    return hits / reps


def t_on_differences(x: np.ndarray, y: np.ndarray) -> stats.Estimate:
    d = x - y
    if np.ptp(d) == 0:
        return stats.Estimate(d.size, float(d[0]), float(d[0]), float(d[0]), "t on paired differences")
    return t_on_items(d)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="500 studies per cell, 100 in the comparison")
    parser.add_argument("--reps", type=int, default=None, help="studies per cell (default 5000)")
    parser.add_argument("--seed", type=int, default=2026)
    args = parser.parse_args()
    reps = args.reps or (500 if args.quick else 5000)
    compare_reps = max(100, reps // 5)
    rng = np.random.default_rng(args.seed)
    start = time.perf_counter()
    print(
        f"mean_interval coverage of the true mean, {reps} studies per cell "
        f"(unclustered binary: exact over the binomial)\n"
    )
    header = "| scores | clusters | " + " | ".join(f"n = {n}" for n in SIZES) + " |"
    print(header)
    print("|---|---|" + "---|" * len(SIZES))
    for clustered in (False, True):
        for name in DISTRIBUTIONS:
            cells = [coverage(rng, name, n, reps, clustered) for n in SIZES]
            print(f"| {name} | {'3-5' if clustered else 'none'} | " + " | ".join(f"{c:.1%}" for c in cells) + " |")
    print(f"\nOther intervals, no clusters, {compare_reps} studies per cell (binary: exact over the binomial)\n")
    print("| scores | method | " + " | ".join(f"n = {n}" for n in SIZES) + " |")
    print("|---|---|" + "---|" * len(SIZES))
    for name in DISTRIBUTIONS:
        for label, fn in (("percentile bootstrap", percentile), ("BCa bootstrap", bca), ("t on items", t_on_items)):
            cells = [coverage(rng, name, n, compare_reps, False, fn) for n in SIZES]
            print(f"| {name} | {label} | " + " | ".join(f"{c:.1%}" for c in cells) + " |")
    print(
        f"\npaired_effect's interval for mean(a - b), {compare_reps} studies per cell; "
        f"t on the paired differences beside it\n"
    )
    print("| systems | method | " + " | ".join(f"n = {n}" for n in SIZES) + " |")
    print("|---|---|" + "---|" * len(SIZES))
    for name in PAIRS:
        a, b = PAIRS[name][1](np.random.default_rng(0), (1, 3))
        chosen = stats.paired_effect(a[0], b[0])["difference"].method
        rows = [(chosen, None)]
        if chosen != stats.T_PAIRED:
            rows.append((stats.T_PAIRED, t_on_differences))
        for label, fn in rows:
            cells = [paired_coverage(rng, name, n, compare_reps, fn) for n in SIZES]
            print(f"| {name} | {label} | " + " | ".join(f"{c:.1%}" for c in cells) + " |")
    print(f"\n({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
