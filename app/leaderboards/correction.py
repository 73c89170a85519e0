"""Correcting an observed success share for the raters' measured error (DESIGN.md section 7).

People mark each continuation a success or a failure; reference episodes (whose label is
known) measure how often they are right: sensitivity (success-labelled episodes marked
success) and specificity (failure-labelled episodes marked failure). Rogan and Gladen (1978)
give the true share behind an observed one p:

    (p + specificity - 1) / (sensitivity + specificity - 1),

clipped to [0, 1]; undefined when sensitivity + specificity <= 1 (raters no better than
chance carry no information about the truth).

`rogan_gladen_estimate` gives it with a 95% interval that carries both sources of error: a
percentile bootstrap that resamples the agent's continuations (whole clusters, e.g.
scenarios, when clusters are given) and, independently, the reference episodes within each
label. A draw whose resampled sensitivity + specificity is <= 1 says nothing about the
share: it counts as 0 for the lower bound and as 1 for the upper (the interval widens rather
than drops it). The point estimate is Rogan-Gladen on the full data.

Pure numpy; the result has the shape every leaderboard number has:
{mean, low, high, n, method} (plus "reason" when mean is None).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np

N_BOOT = 2000
METHOD = (
    "Rogan-Gladen, clipped to [0, 1]; 95% percentile bootstrap ({n_boot} draws) resampling "
    "{unit} and, independently, the reference episodes of each label"
)


def rogan_gladen(p: float | None, sensitivity: float | None, specificity: float | None) -> float | None:
    """The true share behind an observed one, clipped to [0, 1]; None when sensitivity +
    specificity <= 1 or any input is missing."""
    if p is None or sensitivity is None or specificity is None or sensitivity + specificity <= 1:
        return None
    false_positive = 1 - specificity  # written so that perfect raters give p back exactly
    return min(1.0, max(0.0, (p - false_positive) / (sensitivity - false_positive)))


def _none(n: int, method: str, reason: str) -> dict[str, Any]:
    return {"mean": None, "low": None, "high": None, "n": n, "method": method, "reason": reason}


def rogan_gladen_estimate(
    outcomes: Sequence[float],
    sensitivity_hits: Sequence[bool],
    specificity_hits: Sequence[bool],
    *,
    clusters: Sequence[Hashable] | None = None,
    cluster_name: str = "clusters",
    n_boot: int = N_BOOT,
    seed: int = 0,
    level: float = 0.95,
) -> dict[str, Any]:
    """The corrected share of `outcomes` (one per continuation, 0..1; a tie may be 0.5) with its
    interval. `sensitivity_hits`: per success-labelled reference annotation, whether it was
    marked success; `specificity_hits`: per failure-labelled one, whether marked failure.
    `clusters`: per outcome, its cluster (resampled whole, `cluster_name` in the method);
    None, or a single cluster, resamples outcomes singly. n is the number of outcomes."""
    y = np.asarray(outcomes, dtype=float)
    n = int(y.size)
    if clusters is not None:
        clusters = list(clusters)
        if len(clusters) != n:
            raise ValueError(f"clusters has {len(clusters)} entries for {n} outcomes")
        if len(set(clusters)) < 2:
            clusters = None
    unit = "continuations" if clusters is None else f"{cluster_name} (their continuations together)"
    method = METHOD.format(n_boot=n_boot, unit=unit)
    if n == 0:
        return _none(0, method, "no continuations")
    sens_hits = np.asarray(sensitivity_hits, dtype=float)
    spec_hits = np.asarray(specificity_hits, dtype=float)
    if not sens_hits.size or not spec_hits.size:
        missing = " and ".join(w for w, h in (("success", sens_hits), ("failure", spec_hits)) if not h.size)
        return _none(
            n, method, f"no reference episodes labelled {missing}: sensitivity and specificity are not both measured"
        )
    sens, spec = float(sens_hits.mean()), float(spec_hits.mean())
    if sens + spec <= 1:
        return _none(
            n,
            method,
            f"sensitivity + specificity = {sens:.3f} + {spec:.3f} <= 1: the markers "
            "carry no information about the true share",
        )
    p = float(y.mean())
    mean = rogan_gladen(p, sens, spec)
    assert mean is not None  # sens + spec > 1 was checked above

    rng = np.random.default_rng(seed)
    # Continuations: whole clusters drawn with replacement; p* = successes / continuations drawn.
    if clusters is None:
        sums, sizes = y, np.ones(n)
    else:
        index: dict[Hashable, int] = {}
        codes = np.fromiter((index.setdefault(k, len(index)) for k in clusters), dtype=np.int64, count=n)
        sums = np.bincount(codes, weights=y)
        sizes = np.bincount(codes).astype(float)
    m = sums.size
    draw = rng.integers(0, m, size=(n_boot, m))
    p_star = sums[draw].sum(axis=1) / sizes[draw].sum(axis=1)
    # Reference episodes, each label on its own: a resampled share of right marks is binomial.
    sens_star = rng.binomial(sens_hits.size, sens, size=n_boot) / sens_hits.size
    spec_star = rng.binomial(spec_hits.size, spec, size=n_boot) / spec_hits.size
    j = sens_star + spec_star - 1
    ok = j > 0
    rg = np.empty(n_boot)
    rg[ok] = np.clip((p_star[ok] - (1 - spec_star[ok])) / j[ok], 0.0, 1.0)
    alpha = 1 - level
    low = float(np.quantile(np.where(ok, rg, 0.0), alpha / 2))
    high = float(np.quantile(np.where(ok, rg, 1.0), 1 - alpha / 2))
    return {"mean": mean, "low": min(low, mean), "high": max(high, mean), "n": n, "method": method}
