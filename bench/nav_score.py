"""Navigation scoring benchmark: trajectories scored per second on the real R2R graphs.

Prints figures; asserts nothing about time.

    .venv/bin/python bench/nav_score.py                 # 10,000 trajectories
    .venv/bin/python bench/nav_score.py --n 50000 --seed 3

1. Load the buildings of R2R val_seen from ../shared/data/r2r/connectivity and compute their
   all-pairs shortest paths: once per building, timed on its own (the one-off cost).
2. Make --n trajectories (not timed): half random walks from a reference path's start
   (2-14 steps along edges, with stops where the follower turns on the spot), half perturbed
   reference paths (a detour out and back, a wrong turn at the end, cut short or run past
   the goal, repeated viewpoints).
3. Score each with app.kinds.navigation.metrics.score_trajectory, from viewpoint ids, on one
   core (BLAS threads pinned to 1); best and median of --repeat passes.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from pathlib import Path

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app.kinds.navigation.formats import R2RPath, parse_r2r  # noqa: E402
from app.kinds.navigation.graph import NavGraph, load_scans  # noqa: E402
from app.kinds.navigation.metrics import mean_scores, score_trajectory  # noqa: E402

DATA = ROOT.parent / "shared" / "data"


def random_walk(graph: NavGraph, start: str, rng: random.Random) -> list[str]:
    path = [start]
    for _ in range(rng.randint(2, 14)):
        options = graph.neighbours(path[-1])
        if len(options) > 1 and len(path) > 1 and rng.random() < 0.8:
            options = [v for v in options if v != path[-2]] or options  # mostly no immediate U-turn
        path.append(rng.choice(options))
        if rng.random() < 0.2:
            path.append(path[-1])  # turning on the spot records the viewpoint again
    return path


def perturbed(graph: NavGraph, ref: R2RPath, rng: random.Random) -> list[str]:
    path = list(ref.path)
    k = rng.randrange(len(path))
    if rng.random() < 0.5:  # a detour: out to a neighbour and back
        side = rng.choice(graph.neighbours(path[k]))
        path[k + 1 : k + 1] = [side, path[k]]
    cut = rng.random()
    if cut < 0.25:  # stopped short
        path = path[: max(1, rng.randrange(len(path)))]
    elif cut < 0.5:  # ran past the goal
        for _ in range(rng.randint(1, 4)):
            path.append(rng.choice(graph.neighbours(path[-1])))
    elif cut < 0.65:  # a wrong turn before the end
        path = path[:-1] + [rng.choice(graph.neighbours(path[-2]))] if len(path) > 1 else path
    if rng.random() < 0.3:
        j = rng.randrange(len(path))
        path.insert(j, path[j])
    return path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10_000, help="trajectories to score (default 10,000)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=3, help="timed passes over the trajectories")
    ap.add_argument("--data", type=Path, default=DATA, help="the shared data folder")
    args = ap.parse_args()

    r2r_file = args.data / "r2r" / "R2R_val_seen.json"
    conn_dir = args.data / "r2r" / "connectivity"
    if not r2r_file.exists() or not conn_dir.is_dir():
        print(f"no R2R data under {args.data}: nothing to measure", file=sys.stderr)
        return 1
    references = parse_r2r(r2r_file)
    graphs = load_scans(conn_dir)

    scans = sorted({p.scan for p in references})
    t0 = time.perf_counter()
    for scan in scans:
        graphs[scan]  # parse, build, all-pairs shortest paths
    load_s = time.perf_counter() - t0
    n_vp = sum(len(graphs[s]) for s in scans)
    print(
        f"graph loading (one-off): {len(scans)} buildings, {n_vp} viewpoints, "
        f"all-pairs shortest paths: {load_s:.2f} s ({load_s / len(scans) * 1000:.1f} ms per building)"
    )

    rng = random.Random(args.seed)
    work = []
    for i in range(args.n):
        ref = rng.choice(references)
        graph = graphs[ref.scan]
        traj = random_walk(graph, ref.path[0], rng) if i % 2 == 0 else perturbed(graph, ref, rng)
        work.append((graph, ref.path, traj))
    mean_len = statistics.mean(len(t) for _, _, t in work)
    print(
        f"trajectories: {len(work)} (random walks and perturbed references), "
        f"mean {mean_len:.1f} viewpoints, reference paths 4-7"
    )

    rates = []
    scores = []
    for _ in range(max(1, args.repeat)):
        t0 = time.perf_counter()
        scores = [score_trajectory(g, r, q) for g, r, q in work]
        rates.append(len(work) / (time.perf_counter() - t0))
    means = mean_scores(scores)
    print(
        f"scoring: {max(rates):,.0f} trajectories/s best, {statistics.median(rates):,.0f}/s median "
        f"of {len(rates)} passes ({1e6 / max(rates):.1f} us each), one core, distances from the cached table"
    )
    print("means: " + ", ".join(f"{k} {v:.3f}" for k, v in means.items()))
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} (other processes share them)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
