"""`bash bench/gpu.sh` (docs/benchmarks.md "On a GPU") is the one prepared run for a lent GPU
machine; device time is scarce, so its quick mode runs here on the CPU: every step it takes
must still start, finish and print its figures."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_gpu_bench_runs_every_step_at_toy_size(tmp_path):
    env = {**os.environ, "QUICK": "1", "PYTHON": sys.executable, "WHEELS": str(tmp_path / "none")}
    env.pop("PYTHONPATH", None)
    ran = subprocess.run(["bash", "bench/gpu.sh"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    out = ran.stdout + ran.stderr
    assert ran.returncode == 0, out[-3000:]
    assert re.search(r"cpu: batched +[\d.]+ candidates/s .* ratio [\d.]+x", out), out[-3000:]
    assert "same continuations in both modes: yes" in out
    assert "sandboxed and builtin gave the same continuations: yes" in out
    # A sandboxed model on cpu:0, and on CUDA where there is one (skipped otherwise).
    assert re.search(r"\b(?:1 passed, 1 skipped|2 passed)\b", out), out[-3000:]
    assert re.search(r"cpu: whole command [\d.]+ s", out)
    assert "held-out action accuracy" in out
