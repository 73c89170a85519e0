"""Hexagons scoring speed: steps scored per second on each released split, the vectorised
metrics (metrics.score_arrays) against the per-step set reference (metrics.step_metrics).
Hypothesis: the gold board of the next step. Prints figures; never asserts on time."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from app.kinds.hexagons import metrics
from app.kinds.hexagons.formats import parse_procedures

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
    rows = [(b[k - 1], b[k], b[k - 1], b[min(k + 1, len(b) - 1)]) for p in procs for b in [p.boards]
            for k in range(1, len(b))]
    loop = best(lambda: [metrics.step_metrics(*r) for r in rows])
    fast = best(lambda: metrics.score_arrays(*(metrics.as_array(r[i] for r in rows) for i in range(4))))
    print(f"{split:<6} {len(rows):>5} steps  per-step loop {len(rows) / loop:>10.0f} steps/s  "
          f"vectorised {len(rows) / fast:>10.0f} steps/s  ratio {loop / fast:.1f}x")
