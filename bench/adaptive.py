"""Adaptive allocation against the plain order: judgements until the ranking is settled.

Prints figures (a table, or JSON with --json), and whether the issue's target is met
(`target_met`: adaptive / uniform <= `target_ratio`, 0.6, with the error within nominal).

    .venv/bin/python bench/adaptive.py                 # 200 studies, a few minutes
    .venv/bin/python bench/adaptive.py --json --quick  # 6 studies (the suite runs this)

Each simulated study: K agents with known success rates (--rates), each with one item on each of
--units units (a navigation study: one instruction per speaker and path); an item's outcome is
1 with its agent's rate, and the one annotator who judges it reports it wrongly with
probability --error (a binary score). A unit's value for an agent is that judgement, and the
ranking is settled when every pair of agents has a verdict ("above", or "within" ±delta) by the
confidence sequences of app/leaderboards/sequential.py (sequential.settle, family-wise level
1 - alpha: Holm's step-down, the settled table's rule; and, on the same studies, Bonferroni's,
the rule before, printed beside it: keys "bonferroni_..."). The same items and judgements (common random numbers) are then served in three
orders, one judgement per item (annotations_per_item = 1, the floor 1):

- uniform: the plain order (the engine's, with every item unannotated: by position, a fixed
  random order of the items);
- adaptive: app/leaderboards/adaptive.py as the job and the engine run it: every --refresh
  judgements (the job's period) the open agents are found from the judgements so far
  (adaptive.open_agents) and the items ordered by adaptive.item_priority, then position;
- by unit: every agent's items one unit after another (adaptive with every agent kept open):
  what serving units together alone saves, without choosing among agents.

Beside them, the oracle: a lower bound on the judgements any allocation could settle the ranking
with while it serves each agent's items in the fixed unit order (what keeps the sequences valid,
docs/statistics.md): pair (a, b) cannot settle before N_ab shared units, its first passing of
the most lenient threshold it can be tested at (Bonferroni's alpha / 2m a side, whatever else is
served; under Holm's step-down alpha / (m + 1), every other pair settled first), so agent a needs
max over b of N_ab items, and the oracle is the sum over agents (every item where a pair never
settles, as for the orders). It knows each pair's N_ab in advance, so no rule reaches it;
adaptive / oracle says how much an allocation rule could still save.

For each: the judgements until the ranking settled (the study stops there: the judgement at which
the last pair's verdict first held), the share of studies that settled before every item was
judged, the share that settled on a wrong order (a pair "above" the wrong way round, or
"within" ±delta where the agents' judged rates differ by more): at most alpha by construction,
and the bias: over studies, the mean of each agent's mean at the stop less its judged rate (rate
x (1 - error) + (1 - rate) x error), the largest over agents.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app.leaderboards import adaptive, sequential  # noqa: E402
from app.leaderboards.settled import DELTA  # noqa: E402

ORDERS = ("uniform", "adaptive", "by_unit")
#: The issue's target: adaptive allocation needs at most this share of uniform's judgements.
TARGET = 0.6


class Study:
    """One simulated study's items: agent k's item on unit u, its position (a fixed random
    order), its one judgement (0/1) and its unit's order (adaptive.unit_orders)."""

    def __init__(self, rates: list[float], units: int, error: float, rng: np.random.Generator):
        self.k, self.units = len(rates), units
        outcome = rng.random((self.k, units)) < np.asarray(rates)[:, None]
        flipped = rng.random((self.k, units)) < error
        self.value = (outcome ^ flipped).astype(float)
        self.position = rng.random((self.k, units))
        ids = [(a, u) for a in range(self.k) for u in range(units)]
        orders = adaptive.unit_orders((a * units + u, f"u{u}", float(self.position[a, u])) for a, u in ids)
        self.unit_order = np.array([orders[u] for u in range(units)])  # agent 0's items: unit u's id is u

    def arrivals(self, served: list[tuple[int, int]]) -> dict[str, list[Any]]:
        out: dict[str, list[Any]] = {str(a): [] for a in range(self.k)}
        for t, (a, u) in enumerate(served):
            out[str(a)].append((t, u, self.value[a, u]))
        return out


def settled_at(
    study: Study, served: list[tuple[int, int]], alpha: float, step_down: bool = True
) -> tuple[int | None, list[dict[str, Any]]]:
    """The judgement (1-based) at which every pair's verdict held, or None; and the verdicts."""
    result = sequential.settle(study.arrivals(served), DELTA, alpha, step_down=step_down)
    if any(pair["settled"] is None for pair in result["pairs"]):
        return None, result["pairs"]
    return max(pair["settled_when"] for pair in result["pairs"]) + 1, result["pairs"]


def wrong(study: Study, pairs: list[dict[str, Any]], rates: list[float], error: float) -> bool:
    """A settled verdict that is false of the agents' judged rates."""
    judged = [r * (1 - error) + (1 - r) * error for r in rates]
    for pair in pairs:
        d = judged[int(pair["first"])] - judged[int(pair["second"])]
        if pair["verdict"] == sequential.ABOVE and pair["sign"] * d <= 0:
            return True
        if pair["verdict"] == sequential.WITHIN and abs(d) > DELTA:
            return True
    return False


def oracle(study: Study, alpha: float, step_down: bool = True) -> int:
    """The sum over agents of the shared units each needs for its last pair to settle, in the
    unit order (the module docstring); every item when a pair never settles. A pair is taken
    to settle at the most lenient threshold Holm's step-down can ever test it at (every other
    pair settled first: alpha / (m + 1) a side; Bonferroni's alpha / 2m without the
    step-down), so no allocation settles it sooner."""
    by_unit = np.argsort(-study.unit_order, kind="stable")
    m = study.k * (study.k - 1) // 2
    lenient = math.log(((m + 1) if step_down else 2 * m) / alpha)
    need = np.zeros(study.k, dtype=int)
    for a in range(study.k):
        for b in range(a + 1, study.k):
            d = (study.value[a, by_unit] - study.value[b, by_unit]).tolist()
            ev = sequential.pair_evidence(d, DELTA, alpha / m)
            passed = np.flatnonzero((ev["up"] > lenient) | (ev["down"] > lenient) | (ev["within"] >= lenient))
            if not passed.size:
                return study.k * study.units
            n = int(passed[0]) + 1
            need[a], need[b] = max(need[a], n), max(need[b], n)
    return int(need.sum())


def serve(study: Study, order: str, refresh: int, alpha: float, step_down: bool = True) -> list[tuple[int, int]]:
    """The items in the order `order` serves them, until the ranking settles (adaptive: checked
    at each refresh, as the job would) or every item is judged."""
    items = [(a, u) for a in range(study.k) for u in range(study.units)]
    if order == "uniform":
        return sorted(items, key=lambda i: -study.position[i])
    if order == "by_unit":
        key = {i: (adaptive.item_priority(True, study.unit_order[i[1]]), study.position[i]) for i in items}
        return sorted(items, key=lambda i: key[i], reverse=True)
    served: list[tuple[int, int]] = []
    left = set(items)
    while left:
        opened = adaptive.open_agents(
            study.arrivals(served), [str(a) for a in range(study.k)], DELTA, alpha, step_down=step_down
        )
        if not opened:
            break
        ranked = sorted(
            left,
            key=lambda i: (adaptive.item_priority(str(i[0]) in opened, study.unit_order[i[1]]), study.position[i]),
            reverse=True,
        )
        served += ranked[:refresh]
        left.difference_update(ranked[:refresh])
    return served


def _figures(per: dict[str, dict[str, list[Any]]], oracles: list[int], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for order in ORDERS:
        n = np.asarray(per[order]["n"], dtype=float)
        out[f"{prefix}{order}_judgements"] = float(n.mean())
        out[f"{prefix}{order}_judgements_median"] = float(np.median(n))
        out[f"{prefix}{order}_settled"] = float(np.mean(per[order]["settled"]))
        out[f"{prefix}{order}_error_rate"] = float(np.mean(per[order]["wrong"]))
        # The mean, over studies, of each agent's mean at the stop less its judged rate: the
        # largest over agents (optional stopping's bias of a sample mean).
        out[f"{prefix}{order}_bias"] = float(np.nanmax(np.abs(np.nanmean(np.asarray(per[order]["bias"]), axis=0))))
        out[f"{prefix}{order}_correct"] = float(
            np.mean([s and not w for s, w in zip(per[order]["settled"], per[order]["wrong"])])
        )
    out[f"{prefix}error_rate"] = out[f"{prefix}adaptive_error_rate"]
    out[f"{prefix}ratio"] = out[f"{prefix}adaptive_judgements"] / out[f"{prefix}uniform_judgements"]
    out[f"{prefix}ratio_by_unit"] = out[f"{prefix}by_unit_judgements"] / out[f"{prefix}uniform_judgements"]
    out[f"{prefix}oracle_judgements"] = float(np.mean(oracles))
    out[f"{prefix}ratio_oracle"] = out[f"{prefix}oracle_judgements"] / out[f"{prefix}uniform_judgements"]
    # Per study, adaptive's judgements over uniform's (the same items and judgements).
    pair_ratio = np.asarray(per["adaptive"]["n"], dtype=float) / np.asarray(per["uniform"]["n"], dtype=float)
    out[f"{prefix}ratio_median_per_study"] = float(np.median(pair_ratio))
    return out


#: The verdicts' two rules, run on the same studies: Holm's step-down (the settled table's,
#: the keys without a prefix) and Bonferroni's (the rule before, keys "bonferroni_...").
FAMILIES = {"": True, "bonferroni_": False}


def run(args: argparse.Namespace) -> dict[str, Any]:
    rng = np.random.default_rng(args.seed)
    per = {f: {o: {"n": [], "settled": [], "wrong": [], "bias": []} for o in ORDERS} for f in FAMILIES}
    oracles: dict[str, list[int]] = {f: [] for f in FAMILIES}
    judged = np.array([r * (1 - args.error) + (1 - r) * args.error for r in args.rates])
    started = time.perf_counter()
    for _ in range(args.studies):
        study = Study(args.rates, args.units, args.error, rng)
        for family, step_down in FAMILIES.items():
            oracles[family].append(oracle(study, args.alpha, step_down))
            for order in ORDERS:
                served = serve(study, order, args.refresh, args.alpha, step_down)
                when, pairs = settled_at(study, served, args.alpha, step_down)
                # Each agent's mean over its judged items when the study stopped, less its rate.
                sums, counts = np.zeros(study.k), np.zeros(study.k)
                for a, u in served[: when or len(served)]:
                    sums[a] += study.value[a, u]
                    counts[a] += 1
                got = per[family][order]
                got["bias"].append(np.where(counts > 0, sums / np.maximum(counts, 1) - judged, np.nan))
                got["n"].append(when if when is not None else study.k * study.units)
                got["settled"].append(when is not None)
                got["wrong"].append(when is not None and wrong(study, pairs, args.rates, args.error))
    out: dict[str, Any] = {
        "rates": args.rates,
        "units": args.units,
        "items": len(args.rates) * args.units,
        "error": args.error,
        "delta": DELTA,
        "studies": args.studies,
        "refresh": args.refresh,
        "seed": args.seed,
        "nominal_error": args.alpha,
        "family": sequential.FAMILY,
    }
    for family in FAMILIES:
        out.update(_figures(per[family], oracles[family], family))
    # The target: adaptive needs at most 60% of uniform's judgements, at nominal error.
    out["target_ratio"] = TARGET
    out["target_met"] = bool(out["ratio"] <= TARGET and out["error_rate"] <= out["nominal_error"])
    out["seconds"] = round(time.perf_counter() - started, 1)
    return out


def table(out: dict[str, Any]) -> str:
    lines = [
        f"{out['studies']} studies: agents' rates {out['rates']}, {out['units']} units each "
        f"({out['items']} items), annotator error {out['error']}, delta {out['delta']}, "
        f"alpha {out['nominal_error']}, priorities refreshed every {out['refresh']} judgements, seed {out['seed']}",
        "",
        f"{'verdicts':<11} {'order':<10} {'judgements (mean)':>18} {'(median)':>9} {'settled':>8} {'correct':>8} "
        f"{'wrong':>7} {'bias':>7}",
    ]
    for family, name in (("", "Holm"), ("bonferroni_", "Bonferroni")):
        for order in ORDERS:
            key = f"{family}{order}"
            lines.append(
                f"{name:<11} {order:<10} {out[f'{key}_judgements']:>18.1f} {out[f'{key}_judgements_median']:>9.0f} "
                f"{out[f'{key}_settled']:>8.1%} {out[f'{key}_correct']:>8.1%} {out[f'{key}_error_rate']:>7.1%} "
                f"{out[f'{key}_bias']:>7.4f}"
            )
    lines.append("")
    for family, name in (("", "Holm"), ("bonferroni_", "Bonferroni")):
        lines.append(
            f"{name}: adaptive / uniform {out[f'{family}ratio']:.3f} (median per study "
            f"{out[f'{family}ratio_median_per_study']:.3f}); by unit / uniform {out[f'{family}ratio_by_unit']:.3f}; "
            f"oracle / uniform {out[f'{family}ratio_oracle']:.3f}"
        )
    lines += [
        f"nominal error {out['nominal_error']}; {out['seconds']} s",
        f"target (Holm: adaptive / uniform <= {out['target_ratio']}, error within nominal): "
        + ("met" if out["target_met"] else "not met"),
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument(
        "--rates",
        type=lambda s: [float(x) for x in s.split(",")],
        default=[0.9, 0.7, 0.45, 0.1],
        help="the agents' success rates, comma-separated (default 0.9,0.7,0.45,0.1)",
    )
    p.add_argument("--units", type=int, default=800, help="units (paths) per agent, one item each (default 800)")
    p.add_argument("--error", type=float, default=0.1, help="the annotators' error rate (default 0.1)")
    p.add_argument("--studies", type=int, default=200, help="simulated studies (default 200)")
    p.add_argument("--refresh", type=int, default=50, help="judgements between the job's runs (default 50)")
    p.add_argument("--alpha", type=float, default=sequential.ALPHA, help="family-wise error (default 0.05)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quick", action="store_true", help="6 studies of 500 units: seconds (the suite's run)")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = p.parse_args(argv)
    if args.quick:
        args.studies, args.units = 6, 500
    if len(args.rates) < 2 or not all(0.0 <= r <= 1.0 for r in args.rates):
        p.error("--rates: at least two rates in [0, 1]")
    if not 0.0 <= args.error < 0.5:
        p.error("--error: in [0, 0.5)")
    if args.units < 1 or args.studies < 1 or args.refresh < 1:
        p.error("--units, --studies and --refresh: at least 1")
    out = run(args)
    print(json.dumps(out, indent=2) if args.json else table(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
