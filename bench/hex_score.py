"""Hexagons scoring speed: steps scored per second on each released split, the vectorised
metrics (metrics.score_arrays) against the per-step set reference (metrics.step_metrics),
with and without building the arrays from Python tuples. Hypothesis: the gold board of the
next step. Then the leaderboard section (leaderboard.build: intervals for every row and
group, paired tests) for a study of the size DESIGN.md expects. Prints figures; never asserts
on time.

    python bench/hex_score.py [DATA_FOLDER]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

from app.kinds.hexagons import metrics
from app.kinds.hexagons.formats import parse_procedures
from app.kinds.hexagons.leaderboard import POOLED, ProcedureInfo, Row, build

DATA = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[2] / "shared" / "data" / "hexagons"


def best(fn, repeat=5) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


for split in ("train", "dev", "test"):
    procs = parse_procedures((DATA / f"{split}.jsonl").read_bytes())
    rows = [
        (b[k - 1], b[k], b[k - 1], b[min(k + 1, len(b) - 1)])
        for p in procs
        for b in [p.boards]
        for k in range(1, len(b))
    ]
    loop = best(lambda: [metrics.step_metrics(*r) for r in rows])
    fast = best(lambda: metrics.score_arrays(*(metrics.as_array(r[i] for r in rows) for i in range(4))))
    arrays = [metrics.as_array(r[i] for r in rows) for i in range(4)]
    core = best(lambda: metrics.score_arrays(*arrays))
    print(
        f"{split:<6} {len(rows):>5} steps  per-step loop {len(rows) / loop:>9.0f} steps/s  "
        f"vectorised {len(rows) / fast:>9.0f} steps/s (ratio {loop / fast:.1f}x)  "
        f"arrays built {len(rows) / core:>10.0f} steps/s (ratio {loop / core:.0f}x)"
    )


def study(n_procedures=300, n_agents=3, n_annotators=40, per_annotator=20, seed=0):
    """Synthetic per-step metrics: procedures of 2-11 steps in 8 categories, 70% of steps with
    an abstraction level; agents execute every procedure, each annotator `per_annotator`."""
    rng = np.random.default_rng(seed)
    procs = {}
    for i in range(n_procedures):
        n = int(rng.integers(2, 12))
        procs[i] = ProcedureInfo(
            f"category {i % 8}", n, [int(rng.integers(0, 4)) if rng.random() < 0.7 else None for _ in range(n)]
        )

    def run(row, items, quality):
        for i in items:
            row.executions[int(i)].append(
                np.clip(rng.random((procs[int(i)].steps, len(metrics.KEYS))) * 0.4 + quality, 0, 1)
            )

    rows = []
    for a in range(n_agents):
        rows.append(Row("agent", f"agent {a}"))
        run(rows[-1], procs, 0.3 + 0.1 * a)
    pooled, people = Row("human", POOLED), []
    for h in range(n_annotators):
        person = Row("human", f"annotator {h}")
        run(person, rng.choice(n_procedures, per_annotator, replace=False), 0.55)
        for i, runs in person.executions.items():
            pooled.executions[i].extend(runs)
        people.append(person)
    idle = Row("baseline", "no action")
    run(idle, procs, 0.1)
    return rows + [pooled] + people + [idle], procs


for size in ((100, 3, 10, 20), (300, 3, 40, 20), (300, 3, 40, 60)):
    rows, procs = study(*size)
    t = best(lambda: build(rows, procs), repeat=3)
    out = build(rows, procs)
    pairs = len(out["tables"][-1]["rows"]) if out["tables"][-1]["key"] == "hexagons_paired" else 0
    steps = sum(len(m) for r in rows for runs in r.executions.values() for m in runs)
    print(
        f"leaderboard section: {size[0]} procedures, {size[1]} agents, {size[2]} annotators x {size[3]} "
        f"procedures ({len(rows)} rows, {steps} executed steps, {pairs} paired tests): {t:.2f} s"
    )
