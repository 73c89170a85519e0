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
    "paired_arrivals",
    "paired_values",
    "pair_evidence",
    "verdict",
    "settle",
]

ALPHA = 0.05
#: lambda's cap (the paper's c; 1/2 or 3/4 are its suggestions): a larger bet on one value
#: risks a large loss of "capital" on an unlucky one.
LAMBDA_CAP = 0.5
CS_METHOD = "confidence sequence (predictable plug-in empirical Bernstein), valid at every n"

#: How the verdicts share alpha across the pairs (settle).
FAMILY = "Holm's step-down on anytime-valid p-values"

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


def _bets(x: np.ndarray, tune: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The running sums sum lambda_i, sum lambda_i x_i and sum v_i psi(lambda_i) of the
    module docstring's bets along the last axis, lambda tuned for the level `tune` (its
    log(2/alpha)): predictable, so any threshold may be read off them."""
    n = x.shape[-1]
    t = np.arange(1, n + 1, dtype=float)
    mu = (0.5 + np.cumsum(x, axis=-1)) / (t + 1.0)
    mu_before = np.concatenate([np.full(x.shape[:-1] + (1,), 0.5), mu[..., :-1]], axis=-1)
    s2 = (0.25 + np.cumsum((x - mu) ** 2, axis=-1)) / (t + 1.0)
    s2_before = np.concatenate([np.full(x.shape[:-1] + (1,), 0.25), s2[..., :-1]], axis=-1)
    lam = np.minimum(np.sqrt(2.0 * math.log(2.0 / tune) / (s2_before * t * np.log1p(t))), LAMBDA_CAP)
    v = 4.0 * (x - mu_before) ** 2
    psi = (-np.log1p(-lam) - lam) / 4.0
    return np.cumsum(lam, axis=-1), np.cumsum(lam * x, axis=-1), np.cumsum(v * psi, axis=-1)


def eb_bounds(x: np.ndarray, alpha: float = ALPHA, tune: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The PrPl-EB confidence sequence (module docstring) of values in [0, 1] along the last
    axis: (low, high) with the bounds after 1, 2, ..., n values (running intersection). A 2-D
    array is many streams at once (the simulation tests). `tune`: the level the bets are
    tuned for (default `alpha`; settle's step-down reads bounds at other levels off the
    same bets)."""
    for a in (alpha, alpha if tune is None else tune):
        if not 0.0 < a < 1.0:
            raise ValueError(f"alpha must lie in (0, 1), got {a!r}")
    x = np.asarray(x, dtype=float)
    weight, weighted, penalty = _bets(x, alpha if tune is None else tune)
    centre = weighted / weight
    half = (math.log(2.0 / alpha) + penalty) / weight
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


def paired_arrivals(a: Sequence[Arrival], b: Sequence[Arrival]) -> list[tuple[Any, float]]:
    """(when, a - b) on the units both have, in the order the pair's value arrived: when the
    later of the two did (ties: the earlier one's time, then a's order). A unit listed twice
    for one agent keeps its first value (the one that arrived first)."""
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
    return [(max(first_a[u][0], first_b[u][0]), first_a[u][2] - first_b[u][1]) for u in shared]


def paired_values(a: Sequence[Arrival], b: Sequence[Arrival]) -> list[float]:
    """The differences a - b on the units both have, in the order the pair's value arrived
    (paired_arrivals)."""
    return [d for _, d in paired_arrivals(a, b)]


def pair_evidence(differences: Sequence[float], delta: float, tune: float) -> dict[str, np.ndarray]:
    """The log e-processes behind a pair's verdicts after 1, 2, ..., n paired differences,
    each the running maximum (so its p-value, exp(-value), only falls): "up" against "the
    first is not above" (d <= 0), "down" against d >= 0, and "within": the smaller of the
    evidence against d <= -delta and against d >= delta (both are needed). On y = (d + 1) / 2,
    the sequence's capital process at the boundary m: log M+(m) = sum lambda (y - m) -
    sum v psi(lambda), log M-(m) = sum lambda (m - y) - sum v psi(lambda) (the module
    docstring's bets, tuned for `tune`); a true null's M is at most the process at the true
    mean, a nonnegative supermartingale, so by Ville's inequality P(ever >= 1/beta) <= beta.
    The sequence at two-sided level alpha excludes 0 exactly when up or down exceeds
    log(2/alpha), and lies inside [-delta, delta] when within reaches it."""
    d = _unit_array(differences, -1.0, 1.0, "differences")
    if not d.size:
        empty = np.zeros(0)
        return {"up": empty, "down": empty, "within": empty}
    weight, weighted, penalty = _bets((d + 1.0) / 2.0, tune)

    def against(m: float, side: int) -> np.ndarray:
        return np.maximum.accumulate(side * (weighted - m * weight) - penalty)

    # |d| <= 1 always: a margin of 1 or more is within from the first value.
    lower = against((1.0 - delta) / 2.0, 1) if delta < 1.0 else np.full(d.size, np.inf)
    upper = against((1.0 + delta) / 2.0, -1) if delta < 1.0 else np.full(d.size, np.inf)
    return {"up": against(0.5, 1), "down": against(0.5, -1), "within": np.maximum.accumulate(np.minimum(lower, upper))}


def _first(evidence: np.ndarray, threshold: float, strict: bool) -> int:
    """The first index whose (nondecreasing) evidence passes the threshold; len when none."""
    return int(np.searchsorted(evidence, threshold, side="right" if strict else "left"))


def settle(
    arrivals: Mapping[str, Sequence[Arrival]], delta: float, alpha: float = ALPHA, *, step_down: bool = True
) -> dict[str, Any]:
    """Each agent's confidence sequence for its mean and each pair's verdict. `arrivals`:
    per agent, (when, unit, value in [0, 1]) in the order they arrived (a unit's first value
    counts, the others are left out: the values a sequence has used never change).

    "agents": name -> the Estimate at the current n (1 - alpha each). "pairs": one dict per
    pair of agents (in `arrivals`' order) with "first", "second", "verdict", "sign",
    "settled" (the pair's shared units when its verdict first held, None while open),
    "settled_when" (the arrival time then), "difference" (the pair's sequence now) and
    "level" (its two-sided alpha: for a settled pair the step's its verdict was reached at,
    for an open one the step's it is tested at now, "pair_alpha").

    Verdicts across the pairs: Holm's step-down on anytime-valid p-values. With m pairs, each
    pair has two one-sided hypotheses ("the first is not above", d <= 0, and "not below",
    d >= 0), 2m in all, each with an e-process E (pair_evidence; bets tuned for the
    Bonferroni level alpha / m) and the p-value p_t = min(1, 1 / max_{s<=t} E_s), which only
    falls. At each arrival, in time order over all pairs, Holm rejects while the smallest
    p-value not yet rejected is at most alpha / (2m - r), r rejected so far; a rejected
    "d <= 0" says "first above second". A pair whose both stay is "within ±delta" once its
    evidence against d <= -delta and against d >= delta both reach (2m - r) / alpha at once,
    else open. The first step is the Bonferroni rule (each pair's sequence at alpha / m
    two-sided: the same verdicts until a pair settles); each settled pair frees one share of
    alpha for the open ones. Why every verdict holds at once with probability >= 1 - alpha,
    however often it is read: docs/statistics.md, "Settled comparisons". `step_down=False`:
    Bonferroni throughout (the rule before; bench/adaptive.py prints both)."""
    names = list(arrivals)
    agents: dict[str, Estimate] = {}
    for name in names:
        seen: dict[Hashable, float] = {}
        for _, unit, value in arrivals[name]:
            seen.setdefault(unit, float(value))
        seq = mean_sequence(list(seen.values()), alpha)
        agents[name] = seq[-1] if seq else Estimate(n=0, mean=NAN, low=NAN, high=NAN, method=CS_METHOD)
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha!r}")
    if not (math.isfinite(delta) and delta >= 0.0):
        raise ValueError(f"delta must be a finite number >= 0, got {delta!r}")
    pairs_in = [(a, b, paired_arrivals(arrivals[a], arrivals[b])) for i, a in enumerate(names) for b in names[i + 1 :]]
    m = len(pairs_in)
    hypotheses = 2 * m
    tune = alpha / max(m, 1)
    # One clock over every pair: the index of each pair's arrival among all arrival times.
    clock = sorted({when for _, _, got in pairs_in for when, _ in got})
    tick = {when: i for i, when in enumerate(clock)}
    ticks = [np.array([tick[when] for when, _ in got], dtype=int) for _, _, got in pairs_in]
    diffs = [[d for _, d in got] for _, _, got in pairs_in]
    evidence = [pair_evidence(d, delta, tune) for d in diffs]
    never = len(clock)

    def when_passed(j: int, key: str, threshold: float, strict: bool, after: int) -> int:
        i = _first(evidence[j][key], threshold, strict)
        return max(int(ticks[j][i]), after) if i < len(diffs[j]) else never

    # Holm's step-down, through time: the next rejection is the earliest passing of the
    # current threshold (not before the last rejection: Holm at that moment cascades).
    rejected: dict[tuple[int, str], int] = {}
    order: dict[tuple[int, str], int] = {}
    steps = [-1]  # the tick of each rejection, in order
    while len(rejected) < hypotheses:
        threshold = math.log((hypotheses - (len(rejected) if step_down else 0)) / alpha)
        candidates = [
            (when_passed(j, key, threshold, True, steps[-1]), j, key)
            for j in range(m)
            for key in ("up", "down")
            if (j, key) not in rejected
        ]
        tick_at, j, key = min(candidates)
        if tick_at >= never:
            break
        rejected[j, key] = tick_at
        order[j, key] = len(steps) - 1  # the rejections before it
        steps.append(tick_at)
    r = len(rejected)
    pairs = []
    for j, (first, second, got) in enumerate(pairs_in):
        side = [key for key in ("up", "down") if (j, key) in rejected]
        at: int | None = rejected[j, side[0]] if side else None
        state, sign = (ABOVE, 1 if side[0] == "up" else -1) if side else (OPEN, 0)
        step = order[j, side[0]] if side else r  # the threshold its verdict was tested at
        step = step if step_down else 0
        if not side:
            # Within: the first tick at which both sides' evidence reached the threshold of
            # that moment (the thresholds fall at each rejection).
            for k, start in enumerate(steps):
                end = steps[k + 1] if k + 1 < len(steps) else never + 1
                t = when_passed(j, "within", math.log((hypotheses - (k if step_down else 0)) / alpha), False, start)
                if t < end and t < never:
                    state, at, step = WITHIN, t, (k if step_down else 0)
                    break
        # The sequence shown: at the level the verdict was reached at (a settled pair), or the
        # one an open pair is tested at now; two-sided, so twice the one-sided step's.
        level = 2.0 * alpha / max(hypotheses - step, 1)
        if got:
            y = (np.asarray(diffs[j]) + 1.0) / 2.0
            low, high = eb_bounds(y, min(level, 0.999999), tune)
            mean = float(np.mean(diffs[j]))
            difference = Estimate(
                n=len(got), mean=mean, low=float(2 * low[-1] - 1), high=float(2 * high[-1] - 1), method=CS_METHOD
            )
        else:
            difference = Estimate(n=0, mean=NAN, low=NAN, high=NAN, method=CS_METHOD)
        settled = None if at is None else int(np.searchsorted(ticks[j], at, side="right"))
        pairs.append(
            {
                "first": first,
                "second": second,
                "verdict": state,
                "sign": sign,
                "settled": settled,
                "settled_when": None if at is None else clock[at],
                "difference": difference,
                "level": level,
            }
        )
    return {
        "agents": agents,
        "pairs": pairs,
        "alpha": alpha,
        "pair_alpha": 2.0 * alpha / max(hypotheses - (r if step_down else 0), 1),
        "family": FAMILY if step_down else "Bonferroni",
        "rejected": r,
    }
