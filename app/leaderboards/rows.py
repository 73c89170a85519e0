"""The rows every leaderboard table shares the arithmetic of: the mean of item scores with its
interval, the study's item totals, and the per-item majority's row. The service
(app/leaderboards/service.py) and the Dawid-Skene labels (app/leaderboards/annotators.py)
build their rows with these, so rows side by side are computed by one function."""

from __future__ import annotations

import math
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

from sqlalchemy import func, select, text
from sqlalchemy.orm import Session

from app.leaderboards import stats
from app.studies.models import Item, Study


def est(k: float, n: int) -> dict[str, Any]:
    """The mean of `n` item scores in [0, 1] that sum to `k`, never rounded to a count: Wilson's
    interval, exact for right/wrong scores and, for partial credit (only the sum is kept in the
    running totals), conservative by the variance bound mean(1 - mean) (stats.bounded_mean)."""
    return dict(bounded(float(k), n))  # a copy: callers own the dict they get


@lru_cache(maxsize=65536)
def bounded(k: float, n: int) -> dict[str, Any]:
    """Many rows share a (score sum, answered) pair (10,000 annotators with 100 answers each
    have a few hundred): each interval is computed once."""
    return stats.bounded_mean(k, n).as_dict()


def item_totals(session: Session, study: Study) -> tuple[int, dict[str, int], dict[str, int]]:
    if session.get_bind().dialect.name == "postgresql":
        # One scan of the items for both counts (GROUPING SETS; SQLite has none).
        by_cat, clusters = {}, {}
        for cat, cluster, per_cat, n in session.connection().execute(
            text(
                "SELECT category, cluster, grouping(cluster) = 1, count(*) FROM items "
                "WHERE study_id = :sid AND NOT is_gold GROUP BY GROUPING SETS ((category), (cluster))"
            ),
            {"sid": study.id},
        ):
            if per_cat:
                by_cat[cat] = n
            else:
                clusters[cluster] = n
        return sum(by_cat.values()), by_cat, clusters
    rows = session.execute(
        select(Item.category, func.count())
        .where(Item.study_id == study.id, Item.is_gold.is_(False))
        .group_by(Item.category)
    ).all()
    by_cat = {c: n for c, n in rows}
    clusters = dict(
        session.execute(
            select(Item.cluster, func.count())
            .where(Item.study_id == study.id, Item.is_gold.is_(False))
            .group_by(Item.cluster)
        ).all()
    )
    return sum(by_cat.values()), by_cat, clusters


def majority_sums(winners: Iterable[tuple[str, str, float]], totals: Any) -> dict[str, Any]:
    """`winners`: (category, cluster, score) per item, in item order."""
    _, _, cluster_sizes = totals
    by_cat: dict[str, list[Any]] = {}
    by_cluster: dict[str, list[Any]] = {}
    for cat, cluster, score in winners:
        c = by_cat.setdefault(cat, [0, 0.0])
        c[0] += 1
        c[1] += score
        if cluster:
            k = by_cluster.setdefault(cluster, [0, 0])
            k[0] += 1
            k[1] += score >= 1.0
    seen = [k for name, k in by_cluster.items() if k[0] == cluster_sizes.get(name)]
    return majority_dict(by_cat, len(seen), sum(k[1] == k[0] for k in seen), totals)


def majority_dict(by_cat: dict[str, list[Any]], seen: int, right: int, totals: Any) -> dict[str, Any]:
    """`by_cat`: category -> [items, score sum]; seen: clusters answered whole, right: of
    them all right."""
    answered = sum(c[0] for c in by_cat.values())
    correct = sum(c[1] for c in by_cat.values())
    return {
        "type": "majority",
        "name": "Human majority (per item)",
        "answered": answered,
        "correct": correct,
        "coverage": answered / totals[0] if totals[0] else 0.0,
        "accuracy": est(correct, answered),
        "by_category": {cat: est(c[1], c[0]) for cat, c in by_cat.items()},
        "consistency": est(right, seen) if seen else None,
    }


# A d_z column's help (app/kinds/base.py: one sentence per column, shown on the page).
D_Z_HELP = (
    "Cohen's d_z: the mean paired difference divided by the differences' standard deviation "
    "(unitless, no interval); ∞: every difference the same nonzero value, —: undefined."
)
# Why a Cohen's d_z cell shows no finite number (effect_size_cell).
DZ_INFINITE = "every paired difference is the same nonzero value: no spread to divide by"
DZ_NO_EFFECT = "every paired difference is 0: no effect and no spread"
DZ_TOO_FEW = "fewer than 2 shared units"


def effect_size_cell(dz: float, n: int | None = None) -> float | dict[str, str]:
    """Cohen's d_z (stats.paired_effect's "cohen_dz": mean / sd of the paired differences) as
    a leaderboard cell, by one rule for every section: a finite d_z is the number rounded to 3
    places; an infinite one (sd 0, mean not 0) is {"text": "∞" or "−∞", "reason": why}; an
    undefined one (NaN: under 2 units, or every difference 0) is {"text": "—", "reason": why}.
    `n`: the number of paired units, to name the reason. JSON-safe (no NaN, no infinity); the
    page shows the text with its reason beside it (templates/research/_estimates.html)."""
    x = float(dz)
    if math.isfinite(x):
        return round(x, 3) + 0.0  # + 0.0: -0.0 reads 0.0
    if math.isinf(x):
        return {"text": "∞" if x > 0 else "−∞", "reason": DZ_INFINITE}
    return {"text": "—", "reason": DZ_TOO_FEW if n is not None and n < 2 else DZ_NO_EFFECT}


def too_few_ranks(units: int, unit: str) -> str:
    """Why a rank cell is "—": one sentence, the same in every kind's table."""
    return (
        f"{units} {unit}{'' if units == 1 else 's'} shared by every ranked system: fewer than "
        f"{stats.MIN_RANK_UNITS} rank nobody"
    )


RANK_RESAMPLES = 1000  # bootstrap resamples of a rank interval


def rank_interval_column(measure: str, units: str, n_boot: int = RANK_RESAMPLES) -> dict[str, str]:
    """The column of rank cells (rank_cells), the same in every kind's table: ranked by
    `measure`, resampling `units` ("the pairs", "the scenarios every agent played")."""
    return {
        "key": "rank",
        "label": "Rank (95%)",
        "help": f'Rank by {measure} as a 95% interval over {n_boot} bootstrap resamples of {units}; "1-2": tied.',
    }


def rank_cells(
    per_unit: dict[str, list[float]], unit: str, n_boot: int = RANK_RESAMPLES, seed: int = 0
) -> dict[str, str | dict[str, str]]:
    """Rank cells of systems scored on the same units, by one rule for every kind: the 95% rank
    interval's label ("1", "1-2", stats.rank_intervals) where the units are at least
    stats.MIN_RANK_UNITS; under that, {"text": "—", "reason": too_few_ranks(...)} for every
    system (a bootstrap over a handful of units cannot order them). {} for under two systems."""
    if len(per_unit) < 2:
        return {}
    units = len(next(iter(per_unit.values())))
    if units < stats.MIN_RANK_UNITS:
        reason = too_few_ranks(units, unit)
        return {name: {"text": "—", "reason": reason} for name in per_unit}
    intervals = stats.rank_intervals(per_unit, n_boot=n_boot, seed=seed)
    return {name: stats.rank_label(intervals[name]) for name in per_unit}


def p_text(p: float | None) -> str:
    """A p-value as every table prints it: three places, "<0.001" below 0.0005, "—" for none."""
    if p is None or p != p:
        return "—"
    return "<0.001" if p < 0.0005 else f"{p:.3f}"


#: Fewer values than this and a cell shows its mean and "too few for an interval"
#: (templates/research/_estimates.html, app/leaderboards/plot.py MIN_N).
MIN_INTERVAL_N = 5


def too_few_for_a_test(n: int) -> dict[str, str] | None:
    """A paired comparison on fewer than MIN_INTERVAL_N units shows its mean difference with
    "too few for an interval"; its d_z and p are then "—" with this reason. The p of the t-test
    is the dual of the interval left out (p < 0.05 exactly where the interval misses 0), and d_z
    divides by a standard deviation from 2-4 differences: showing either beside "too few for an
    interval" would claim the precision the page just declined. None at MIN_INTERVAL_N or more."""
    if n >= MIN_INTERVAL_N:
        return None
    return {"text": "—", "reason": f"n = {n}: too few for a test"}


def holm_rows(rows: list[dict[str, Any]]) -> None:
    """Each row's "p_holm": its "p" adjusted across the table's family (Holm). A row whose p is
    a too-few cell (too_few_for_a_test) was not tested: it stays out of the family (it would
    loosen the others' adjustment) and shows the same cell; a p of None (no test possible)
    counts as no test and shows None."""
    tested = [r for r in rows if not isinstance(r["p"], dict)]
    adjusted = stats.holm([math.nan if r["p"] is None else r["p"] for r in tested])
    for row, p in zip(tested, adjusted):
        row["p_holm"] = None if math.isnan(p) else float(p)
    for row in rows:
        if isinstance(row["p"], dict):
            row["p_holm"] = row["p"]


def with_units(estimate: dict[str, Any], clusters: Iterable[Any], unit: str) -> dict[str, Any]:
    """A clustered estimate's dict with the number of units its interval resamples ("units":
    the distinct clusters, "unit": what one is, e.g. "procedure"). Its "n" stays the values
    (steps, continuations) it averages; the page's "too few for an interval" cutoff and the n
    it shows count the units (templates/research/_estimates.html, plot.py), since 6 steps of
    2 procedures are 2 independent units, not 6."""
    return {**estimate, "units": len(set(clusters)), "unit": unit}


def clustered(values: Any, clusters: Any, unit: str) -> dict[str, Any]:
    """stats.mean_interval(values, clusters) as a cell dict that carries its unit count
    (with_units)."""
    return with_units(stats.mean_interval(values, clusters=clusters).as_dict(), list(clusters), unit)


def plan_cell(plan: dict[str, Any]) -> dict[str, Any] | str:
    """stats.ppi_people_needed's answer as a table cell: "n of N", or a word with its reason."""
    if "reason" in plan:
        return {"text": "—", "reason": plan["reason"]}
    if not plan["reachable"]:
        return {"text": f"all {plan['of']}", "reason": f"even all give a wider interval than ±{plan['half_width']:g}"}
    return f"{plan['people']} of {plan['of']}"
