"""Which comparisons are settled (issue 29, "Stop"): one table shape for every kind. Per pair of
agents, the verdict ("A above B", "A and B within ±delta" or open), the n at which it settled,
and the confidence sequence of the difference and of each agent's mean at the current n
(app/leaderboards/sequential.py): valid however often the page is read, so a researcher may
stop the study the moment the comparisons they care about are settled."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from app.leaderboards import sequential
from app.leaderboards.sequential import Arrival

#: The default margin of practical equivalence: ±5 points on a 0-1 scale.
DELTA = 0.05


def _plural(n: int, unit: str) -> str:
    return f"{n} {unit}{'' if n == 1 else 's'}"


def verdict_text(pair: Mapping[str, Any], unit: str, delta: float) -> str:
    """The verdict in words: "A above B, settled after 23 paths"."""
    a, b = pair["first"], pair["second"]
    if pair["verdict"] == sequential.ABOVE:
        hi, lo = (a, b) if pair["sign"] > 0 else (b, a)
        return f"{hi} above {lo}, settled after {_plural(pair['settled'], unit)}"
    if pair["verdict"] == sequential.WITHIN:
        return f"{a} and {b} within ±{delta:g}, settled after {_plural(pair['settled'], unit)}"
    return f"open after {_plural(pair['difference'].n, unit)}"


def settled_rows(
    arrivals: Mapping[str, Sequence[Arrival]], unit: str, delta: float = DELTA, alpha: float = sequential.ALPHA
) -> list[dict[str, Any]]:
    """One row per pair of agents (in `arrivals`' order): `arrivals` per agent (when, unit,
    value in [0, 1]) in the order they arrived (sequential.settle)."""
    result = sequential.settle(arrivals, delta, alpha)
    agents = result["agents"]
    rows = []
    for pair in result["pairs"]:
        rows.append(
            {
                "first": pair["first"],
                "second": pair["second"],
                "verdict": verdict_text(pair, unit, delta),
                "state": pair["verdict"],
                "n": pair["difference"].n,
                "settled": pair["settled"],
                # The confidence of the pair's sequence, in percent: Holm's step its verdict was
                # reached at (settled), or the step it is tested at now (open).
                "level": 100 * (1 - pair["level"]),
                "difference": pair["difference"].as_dict(),
                "first_mean": agents[pair["first"]].as_dict(),
                "second_mean": agents[pair["second"]].as_dict(),
            }
        )
    return rows


def settled_table(
    key: str,
    arrivals: Mapping[str, Sequence[Arrival]],
    *,
    unit: str,
    measure: str,
    agent: str,
    value: str,
    delta: float = DELTA,
    alpha: float = sequential.ALPHA,
) -> dict[str, Any]:
    """The table: `unit` one judged unit ("path"), `measure` the value compared ("SR"),
    `agent` what the compared things are called ("speaker"), `value` the kind's rule for the
    answer that gives an agent its value on a unit, its first valid one there (a sentence: "1
    when the listener picked the target, 0 otherwise."); a pair's is the difference of theirs."""
    units = f"{unit}s"
    n_pairs = len(arrivals) * (len(arrivals) - 1) // 2
    level = 100 * (1 - alpha / max(n_pairs, 1))
    return {
        "key": key,
        "title": f"Settled comparisons ({measure}, anytime-valid)",
        "note": (
            f"Each {agent}'s value on each {unit} is taken from the first valid answer on one of its "
            f"items there: {value} A pair's value on each shared {unit}: the difference of the two, "
            f"arriving with the later of the two answers. Each {agent}'s {units} and each pair's shared "
            f"{units} are taken in the order their value arrived. Confidence sequences (predictable plug-in "
            "empirical Bernstein, Waudby-Smith and Ramdas 2024) stay valid however often this page is "
            f"read: the chance that a {agent}'s sequence ever misses its mean is at most {alpha:g}. "
            f"The verdicts share {alpha:g} across the {n_pairs} pair{'' if n_pairs == 1 else 's'} by "
            f"Holm's step-down: each pair is first tested at level {level:.4g}% (Bonferroni), and each pair that "
            "settles gives its share to those still open, so every verdict holds at once with "
            f"probability at least {1 - alpha:g}. "
            f'"Above": the difference\'s sequence excludes 0; "within ±{delta:g}": it lies inside '
            f"[−{delta:g}, {delta:g}]; a settled verdict stays settled. Valid when the order the "
            f"{units} arrive in does not depend on their values (items served at random; adaptive "
            f"allocation keeps each {agent}'s {units} in their fixed random order and decides only "
            "when the next one comes)."
        ),
        "columns": [
            {"key": "first", "label": f"{agent.capitalize()} A", "help": f"The first {agent} of the pair."},
            {"key": "second", "label": f"{agent.capitalize()} B", "help": f"The second {agent} of the pair."},
            {"key": "verdict", "label": "Verdict", "help": "Where the comparison stands, and the n it settled at."},
            {"key": "n", "label": f"Shared {units}", "help": f"The {units} both {agent}s have a value on, so far."},
            {
                "key": "settled",
                "label": "Settled at",
                "help": f"The number of shared {units} at which the verdict first held (— while open).",
            },
            {
                "key": "level",
                "label": "Level, %",
                "format": "g",
                "help": "The confidence of the pair's sequence: for a settled pair the Holm step its "
                f"verdict was reached at ({level:.4g}% for the first to settle, lower for each after), "
                "for an open pair the step it is tested at now.",
            },
            {
                "key": "difference",
                "label": f"A − B ({measure}) [CS]",
                "help": f"The mean of A's value minus B's over the shared {units}, with its confidence "
                f"sequence at the current n, at the level the verdict was reached at (an open pair's: the "
                f"level it is tested at now; {level:.4g}% until a pair settles). For a pair settled "
                "above, what the guarantee covers is which is above and the interval's far end.",
            },
            {
                "key": "first_mean",
                "label": f"A's {measure} [CS]",
                "help": f"A's mean over its {units}, with its 95% confidence sequence at the current n.",
            },
            {
                "key": "second_mean",
                "label": f"B's {measure} [CS]",
                "help": f"B's mean over its {units}, with its 95% confidence sequence at the current n.",
            },
        ],
        "rows": settled_rows(arrivals, unit, delta, alpha),
    }
