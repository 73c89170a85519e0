"""Navigation metrics of one trajectory Q against its reference path R (DESIGN section 6).

d is the shortest-path distance on the building's connectivity graph (3-D Euclidean edge
weights), looked up in the graph's all-pairs table; Q starts at R[0]. Both viewpoint lists are
run-length de-duplicated first: a follower who turns on the spot records the same viewpoint
several times, and that is one visit (the reference's |R| is counted after de-duplication too,
which changes nothing for R2R paths, where no viewpoint repeats consecutively).

- NE = d(Q[-1], R[-1]); success = NE <= 3 m;
- path length PL = sum of d(Q[i], Q[i+1]);
- SPL = success * d(R[0], R[-1]) / max(d(R[0], R[-1]), PL); when both are 0 (a reference
  that starts at its goal and a follower who never moved) SPL = success;
- DTW: c[0][0] = 0, the other borders infinite, c[i][j] = d(R[i], Q[j]) +
  min(c[i-1][j], c[i][j-1], c[i-1][j-1]) for 1 <= i <= |R|, 1 <= j <= |Q|; DTW = c[|R|][|Q|];
- nDTW = exp(-DTW / (|R| * 3)); SDTW = nDTW if success else 0.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import TypeVar

import numpy as np

from app.errors import InputError
from app.kinds.navigation.graph import NavGraph

SUCCESS_DISTANCE = 3.0  # metres: the success threshold and the nDTW normaliser
METRICS = ("ne", "success", "spl", "ndtw", "sdtw", "path_length")

T = TypeVar("T")


def dedupe(path: Iterable[T]) -> list[T]:
    """Run-length de-duplication: consecutive repeats of a viewpoint become one."""
    out: list[T] = []
    for v in path:
        if not out or out[-1] != v:
            out.append(v)
    return out


# From this many columns on, a row costs less as a handful of numpy calls than as a Python
# loop over its cells (measured: a numpy call costs ~1-5 us, a Python cell ~0.2 us; R2R paths
# have 4-7 viewpoints and followers' trajectories rarely 30, so most rows are short).
NUMPY_ROW_FROM = 32


def dtw(cost: np.ndarray) -> float:
    """DTW over a cost matrix cost[i][j] = d(R[i+1], Q[j+1]) (DESIGN's 1-based recursion).

    The recursion is symmetric in R and Q, so rows run over the shorter of the two and each
    row is a pass over the longer. A short row is a Python loop over floats; a long row is
    vectorised: within a row c[j] = cost[j] + min(a[j], c[j-1]) with a[j] = min(c_prev[j],
    c_prev[j-1]) known from the previous row, which unrolls to
    c[j] = S[j] + min_{k <= j}(a[k] - S[k-1]), S the running sum of the row's costs: one
    cumulative sum and one running minimum per row.
    """
    cost = np.asarray(cost, dtype=np.float64)
    if cost.ndim != 2 or cost.size == 0:
        raise ValueError("dtw needs a non-empty 2-D cost matrix")
    if cost.shape[0] > cost.shape[1]:
        cost = cost.T
    if cost.shape[1] >= NUMPY_ROW_FROM:
        return _dtw_numpy_rows(cost)
    return _dtw_python_rows(cost.tolist())


def _dtw_python_rows(rows: list[list[float]]) -> float:
    inf = math.inf
    prev = [0.0] + [inf] * len(rows[0])  # c[0][0] = 0, c[0][j] = inf
    for row in rows:
        cur = [inf]  # c[i][0] = inf
        left = inf
        diag = prev[0]
        for j, c in enumerate(row, 1):
            up = prev[j]
            best = up if up < diag else diag
            if left < best:
                best = left
            left = c + best
            cur.append(left)
            diag = up
        prev = cur
    return prev[-1]


def _dtw_numpy_rows(cost: np.ndarray) -> float:
    if not np.isfinite(cost).all():
        # inf - inf in the unrolled sums would give nan; an infinite cell need not make DTW
        # infinite (a warping path may go around it), so such rows take the plain recursion.
        return _dtw_python_rows(cost.tolist())
    m = cost.shape[1]
    running = np.cumsum(cost, axis=1)  # S[j] for every row at once
    before = running - cost  # S[j-1]
    inf = np.array([np.inf])
    prev = np.full(m + 1, np.inf)
    prev[0] = 0.0
    for i in range(cost.shape[0]):
        a = np.minimum(prev[1:], prev[:-1])
        prev = np.concatenate((inf, np.minimum.accumulate(a - before[i]) + running[i]))
    return max(float(prev[m]), 0.0)  # the unrolled sums may leave -1e-16 where DTW is 0


def ndtw_from_dtw(dtw_value: float, reference_length: int) -> float:
    return math.exp(-dtw_value / (reference_length * SUCCESS_DISTANCE))


def score_indices(distances: np.ndarray, reference: np.ndarray, trajectory: np.ndarray) -> dict:
    """The metrics for de-duplicated index paths (1-D integer arrays) into an all-pairs table."""
    d = distances
    r0, r_end, q_end = reference[0], reference[-1], trajectory[-1]
    ne = float(d[q_end, r_end])
    success = ne <= SUCCESS_DISTANCE
    path_length = float(d[trajectory[:-1], trajectory[1:]].sum()) if len(trajectory) > 1 else 0.0
    shortest = float(d[r0, r_end])
    if success:
        longest = max(shortest, path_length)
        spl = shortest / longest if longest > 0 else 1.0
    else:
        spl = 0.0
    ndtw = ndtw_from_dtw(dtw(d[reference[:, None], trajectory]), len(reference))
    return {
        "ne": ne,
        "success": success,
        "spl": spl,
        "ndtw": ndtw,
        "sdtw": ndtw if success else 0.0,
        "path_length": path_length,
    }


def score_trajectory(graph: NavGraph, reference_path: Sequence[str], trajectory: Sequence[str]) -> dict:
    """Score a followed trajectory (viewpoint ids) against a reference path on one building.

    Returns {"ne", "success", "spl", "ndtw", "sdtw", "path_length"} (floats; success a bool).
    InputError (field "path" for the reference, "trajectory" for the follower) when a list is
    empty, names a viewpoint the graph lacks, leaves the start's connected component, or the
    trajectory does not start at the reference's start.
    """
    ref = dedupe(reference_path)
    traj = dedupe(trajectory)
    if not ref:
        raise InputError("the reference path is empty", field="path")
    if not traj:
        raise InputError("the trajectory is empty", field="trajectory")
    r = graph.indices(ref, field="path")
    q = graph.indices(traj, field="trajectory")
    if q[0] != r[0]:
        raise InputError(
            f"the trajectory starts at {traj[0]!r}, not at the reference's start {ref[0]!r}", field="trajectory"
        )
    comp = graph.components
    start = comp[r[0]]
    if len(ref) > 1 and (comp[r] != start).any():
        bad = ref[int(np.argmax(comp[r] != start))]
        raise InputError(f"reference viewpoint {bad!r} cannot be reached from the start {ref[0]!r}", field="path")
    if len(traj) > 1 and (comp[q] != start).any():
        bad = traj[int(np.argmax(comp[q] != start))]
        raise InputError(f"viewpoint {bad!r} cannot be reached from the start {traj[0]!r}", field="trajectory")
    return score_indices(graph.distances, r, q)


def mean_scores(scores: Iterable[Mapping[str, float]]) -> dict:
    """Mean of each metric over instructions (success's mean is the success rate)."""
    rows = list(scores)
    if not rows:
        return {k: math.nan for k in METRICS}
    return {k: float(np.mean([float(s[k]) for s in rows])) for k in METRICS}
