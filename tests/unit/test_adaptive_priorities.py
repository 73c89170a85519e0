"""Adaptive allocation's pure parts (app/leaderboards/adaptive.py): which agents are open, the
items' priorities, their units' order; and `bench/adaptive.py --quick --json` (README,
docs/benchmarks.md) runs and prints the figures the issue names."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from app.leaderboards import adaptive, sequential

ROOT = Path(__file__).resolve().parents[2]


def _arrivals(values: list[float], start: int = 0) -> list[tuple[int, str, float]]:
    return [(start + i, f"u{i}", v) for i, v in enumerate(values)]


def test_the_agents_of_open_pairs_are_open():
    # a and b succeed on every unit, c on none: a-c and b-c settle "above" after 40 shared
    # units; a-b (every difference 0) stays open at delta 0.05.
    arrivals = {"a": _arrivals([1.0] * 40), "b": _arrivals([1.0] * 40), "c": _arrivals([0.0] * 40)}
    result = sequential.settle(arrivals, 0.05)
    verdicts = {(p["first"], p["second"]): p["verdict"] for p in result["pairs"]}
    assert verdicts == {("a", "b"): "open", ("a", "c"): "above", ("b", "c"): "above"}
    assert adaptive.open_agents(arrivals) == {"a", "b"}
    # An agent nobody judged yet: each of its comparisons is open.
    assert adaptive.open_agents(arrivals, ["a", "b", "c", "d"]) == {"a", "b", "c", "d"}
    # With a wide margin a-b is "within" too: everything settled, nobody open.
    assert adaptive.open_agents(arrivals, delta=0.9) == set()
    assert adaptive.open_agents({"a": _arrivals([1.0] * 5)}) == set()  # one agent: nothing to rank


def test_priorities_put_open_agents_first_and_units_together():
    orders = adaptive.unit_orders([(1, "p", 0.7), (2, "p", 0.2), (3, "q", 0.5), (4, "", 0.9)])
    assert orders == {1: 0.2, 2: 0.2, 3: 0.5, 4: 0.9}
    assert adaptive.item_priority(True, 0.2) == 1.2 and adaptive.item_priority(False, 0.99) == 0.99
    # Any open agent's item comes before any settled agent's, whatever the units' order.
    assert adaptive.item_priority(True, 0.0) > adaptive.item_priority(False, 0.999)
    with pytest.raises(ValueError):
        adaptive.item_priority(True, 1.0)


def test_the_bench_runs_quick_and_prints_its_figures():
    ran = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "adaptive.py"), "--quick", "--json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert ran.returncode == 0, ran.stderr
    out = json.loads(ran.stdout)
    for key in ("uniform_judgements", "adaptive_judgements", "error_rate", "nominal_error"):
        assert isinstance(out[key], float), key
    assert out["studies"] == 6 and out["nominal_error"] == 0.05
    assert 0 < out["adaptive_judgements"] <= out["items"] and 0 < out["uniform_judgements"] <= out["items"]
    assert 0.0 <= out["adaptive_settled"] <= 1.0
    # The settled orders are wrong no more often than the level says (review finding e: the
    # test could not fail on it), and the bench says whether the 0.6 target is met.
    assert out["error_rate"] <= out["nominal_error"] and out["uniform_error_rate"] <= out["nominal_error"]
    assert out["target_ratio"] == 0.6
    # No allocation that keeps each agent's unit order settles with fewer than the oracle's
    # judgements; adaptive allocation serves units in that order, so it needs at least as many.
    assert 0 < out["oracle_judgements"] <= out["adaptive_judgements"] and out["ratio_oracle"] <= out["ratio"]
    assert out["target_met"] is (out["ratio"] <= 0.6 and out["error_rate"] <= out["nominal_error"])
    # The rule before (Bonferroni) on the same studies, beside Holm's step-down: served in the
    # same plain order, the step-down settles every pair no later (its thresholds are never
    # higher), and neither settles on a wrong order more often than nominal.
    assert out["family"].startswith("Holm") and out["bonferroni_error_rate"] <= out["nominal_error"]
    assert out["uniform_judgements"] <= out["bonferroni_uniform_judgements"]
    assert out["oracle_judgements"] <= out["bonferroni_oracle_judgements"] <= out["bonferroni_adaptive_judgements"]
    # The plain-text table names each order.
    text = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "adaptive.py"), "--studies", "1", "--units", "200"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert text.returncode == 0 and "adaptive / uniform" in text.stdout, text.stderr
    assert "Holm" in text.stdout and "Bonferroni" in text.stdout
