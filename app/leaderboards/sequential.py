"""Anytime-valid confidence sequences: intervals that may be looked at after every judgement.

A 95% interval computed for a fixed n misses the mean 5% of the time *at that n*; a page
refreshed after every judgement shows it at every n, and the chance that it misses at some n
grows with every look (to about one in two over 500 looks for Wilson's). A confidence
sequence (C_1, C_2, ...) holds the mean at every n at once: P(mean outside C_n for some n) <=
alpha, however often and whenever it is read, so a study may stop as soon as a comparison
is settled.

The method: the predictable plug-in empirical-Bernstein confidence sequence (PrPl-EB) of
Waudby-Smith and Ramdas, "Estimating means of bounded random variables by betting", JRSS-B
86(1), 2024, Theorem 2, for values in [0, 1] with conditional mean mu given the past:

    mu_t = (1/2 + sum_{i<=t} x_i) / (t + 1),  mu_0 = 1/2
    s2_t = (1/4 + sum_{i<=t} (x_i - mu_i)^2) / (t + 1),  s2_0 = 1/4
    lambda_t = min(sqrt(2 log(2/alpha) / (s2_{t-1} t log(1 + t))), 1/2)
    v_t = 4 (x_t - mu_{t-1})^2,  psi(l) = (-log(1 - l) - l) / 4
    C_t = sum lambda_i x_i / sum lambda_i  +/-  (log(2/alpha) + sum v_i psi(lambda_i)) / sum lambda_i

kept within [0, 1] and intersected with every earlier C_s (the running intersection is a
confidence sequence too: it holds the mean whenever every C_s does; a settled verdict stays settled).
Closed form, so a page computes it for thousands of judgements in microseconds; the paper's
hedged-capital sequence is tighter but needs a search over candidate means at every n.

Pure functions, no database, no kind: a kind's section passes each agent's values in the order
they arrived (app/leaderboards/settled.py builds the table).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np

from app.leaderboards.stats import NAN, Estimate

__all__ = [
    "ALPHA",
    "CS_METHOD",
    "eb_bounds",
    "mean_sequence",
    "difference_sequence",
    "paired_values",
    "verdict",
    "settle",
]

ALPHA = 0.05
#: lambda's cap (the paper's c; 1/2 or 3/4 are its suggestions): a larger bet on one value
#: risks a large loss of "capital" on an unlucky one.
LAMBDA_CAP = 0.5
CS_METHOD = "confidence sequence (predictable plug-in empirical Bernstein), valid at every n"

ABOVE = "above"
WITHIN = "within"
OPEN = "open"


def _unit_array(values: Any, low: float, high: float, what: str) -> np.ndarray:
    x = np.asarray(values, dtype=float)
    if x.size and not np.all(np.isfinite(x)):
        raise ValueError(f"{what} must be finite numbers")
    if x.size and (x.min() < low or x.max() > high):
        raise ValueError(f"{what} must lie in [{low:g}, {high:g}]")
    return x


def eb_bounds(x: np.ndarray, alpha: float = ALPHA) -> tuple[np.ndarray, np.ndarray]:
    """The PrPl-EB confidence sequence (module docstring) of values in [0, 1] along the last
    axis: (low, high) with the bounds after 1, 2, ..., n values (running intersection). A 2-D
    array is many streams at once (the simulation tests)."""
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha!r}")
    x = np.asarray(x, dtype=float)
    n = x.shape[-1]
    t = np.arange(1, n + 1, dtype=float)
    mu = (0.5 + np.cumsum(x, axis=-1)) / (t + 1.0)
    mu_before = np.concatenate([np.full(x.shape[:-1] + (1,), 0.5), mu[..., :-1]], axis=-1)
    s2 = (0.25 + np.cumsum((x - mu) ** 2, axis=-1)) / (t + 1.0)
    s2_before = np.concatenate([np.full(x.shape[:-1] + (1,), 0.25), s2[..., :-1]], axis=-1)
    log_term = math.log(2.0 / alpha)
    lam = np.minimum(np.sqrt(2.0 * log_term / (s2_before * t * np.log1p(t))), LAMBDA_CAP)
    v = 4.0 * (x - mu_before) ** 2
    psi = (-np.log1p(-lam) - lam) / 4.0
    weight = np.cumsum(lam, axis=-1)
    centre = np.cumsum(lam * x, axis=-1) / weight
    half = (log_term + np.cumsum(v * psi, axis=-1)) / weight
    low = np.maximum.accumulate(np.clip(centre - half, 0.0, 1.0), axis=-1)
    high = np.minimum.accumulate(np.clip(centre + half, 0.0, 1.0), axis=-1)
    # An empty intersection (probability <= alpha: a miss already happened) is kept as the
    # point where the bounds crossed, so every cell stays an interval.
    high = np.maximum(high, low)
    return low, high


def mean_sequence(values: Sequence[float], alpha: float = ALPHA) -> list[Estimate]:
    """The mean of values in [0, 1] (in the order they arrived) after each one: the sample
    mean with the confidence sequence's bounds, n = 1, 2, ..., len(values)."""
    x = _unit_array(values, 0.0, 1.0, "values")
    if not x.size:
        return []
    low, high = eb_bounds(x, alpha)
    means = np.cumsum(x) / np.arange(1, x.size + 1)
    return [
        Estimate(n=i + 1, mean=float(m), low=float(lo), high=float(hi), method=CS_METHOD)
        for i, (m, lo, hi) in enumerate(zip(means, low, high))
    ]


def difference_sequence(differences: Sequence[float], alpha: float = ALPHA) -> list[Estimate]:
    """The mean of paired differences in [-1, 1] (one agent's value minus the other's on a
    unit both were judged on) after each one: the sequence of (d + 1) / 2, mapped back."""
    d = _unit_array(differences, -1.0, 1.0, "differences")
    return [
        Estimate(n=e.n, mean=2.0 * e.mean - 1.0, low=2.0 * e.low - 1.0, high=2.0 * e.high - 1.0, method=CS_METHOD)
        for e in mean_sequence(((d + 1.0) / 2.0).tolist(), alpha)
    ]


def verdict(differences: Sequence[float], delta: float, alpha: float = ALPHA) -> dict[str, Any]:
    """Where a pair stands after its paired differences (first minus second, in arrival
    order): "above" (the sequence excludes 0: the first above the second where the mean is
    positive, below where negative), "within" (the sequence lies inside [-delta, delta]), or
    "open". "settled": the n at which the verdict first held (it holds from then on: the
    bounds only narrow), None while open. "difference": the sequence at the current n."""
    if not (math.isfinite(delta) and delta >= 0.0):
        raise ValueError(f"delta must be a finite number >= 0, got {delta!r}")
    seq = difference_sequence(differences, alpha)
    if not seq:
        empty = Estimate(n=0, mean=NAN, low=NAN, high=NAN, method=CS_METHOD)
        return {"verdict": OPEN, "sign": 0, "settled": None, "difference": empty}
    last = seq[-1]
    if last.low > 0.0 or last.high < 0.0:
        sign = 1 if last.low > 0.0 else -1
        first = next(e.n for e in seq if e.low > 0.0 or e.high < 0.0)
        return {"verdict": ABOVE, "sign": sign, "settled": first, "difference": last}
    if -delta <= last.low and last.high <= delta:
        first = next(e.n for e in seq if -delta <= e.low and e.high <= delta)
        return {"verdict": WITHIN, "sign": 0, "settled": first, "difference": last}
    return {"verdict": OPEN, "sign": 0, "settled": None, "difference": last}


Arrival = tuple[Any, Hashable, float]  # (when, unit, value): `when` any sortable time


def paired_values(a: Sequence[Arrival], b: Sequence[Arrival]) -> list[float]:
    """The differences a - b on the units both have, in the order the pair's value arrived:
    when the later of the two did (ties: the earlier one's time, then a's order). A unit
    listed twice for one agent keeps its first value (the one that arrived first)."""
    first_a: dict[Hashable, tuple[Any, int, float]] = {}
    for i, (when, unit, value) in enumerate(a):
        first_a.setdefault(unit, (when, i, float(value)))
    first_b: dict[Hashable, tuple[Any, float]] = {}
    for when, unit, value in b:
        first_b.setdefault(unit, (when, float(value)))
    shared = [u for u in first_a if u in first_b]
    shared.sort(
        key=lambda u: (
            max(first_a[u][0], first_b[u][0]),
            min(first_a[u][0], first_b[u][0]),
            first_a[u][1],
        )
    )
    return [first_a[u][2] - first_b[u][1] for u in shared]


def settle(arrivals: Mapping[str, Sequence[Arrival]], delta: float, alpha: float = ALPHA) -> dict[str, Any]:
    """Each agent's confidence sequence for its mean and each pair's verdict. `arrivals`:
    per agent, (when, unit, value in [0, 1]) in the order they arrived (a unit's first value
    counts, the others are left out: the values a sequence has used never change).

    "agents": name -> the Estimate at the current n (1 - alpha each). "pairs": one dict per
    pair of agents (in `arrivals`' order) with "first", "second", the verdict (see `verdict`)
    on the units both have, at 1 - alpha / (number of pairs) each (Bonferroni), so that every
    pair's verdict holds at once with probability >= 1 - alpha, at every n."""
    names = list(arrivals)
    agents: dict[str, Estimate] = {}
    for name in names:
        seen: dict[Hashable, float] = {}
        for _, unit, value in arrivals[name]:
            seen.setdefault(unit, float(value))
        seq = mean_sequence(list(seen.values()), alpha)
        agents[name] = seq[-1] if seq else Estimate(n=0, mean=NAN, low=NAN, high=NAN, method=CS_METHOD)
    n_pairs = len(names) * (len(names) - 1) // 2
    pairs = []
    for i, first in enumerate(names):
        for second in names[i + 1 :]:
            d = paired_values(arrivals[first], arrivals[second])
            pairs.append({"first": first, "second": second, **verdict(d, delta, alpha / max(n_pairs, 1))})
    return {"agents": agents, "pairs": pairs, "alpha": alpha, "pair_alpha": alpha / max(n_pairs, 1)}
