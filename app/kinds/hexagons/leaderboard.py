"""The Hexagons leaderboard section (Lachmy et al. 2022, section 5; DESIGN.md sections 6-7).

Rows, in three sections: agents; human executors (the skyline: every annotator pooled, then
each annotator); baselines ("no action"). Each row: the procedures and steps it executed and
the eight metrics averaged over steps, overall and per category, step position and
abstraction level, with 95% intervals that resample procedures (the steps of one procedure
are not independent). Paired tests between every two rows on the procedures both executed:
the difference of their mean board F1 and action F1 over steps, with a paired bootstrap
interval and a sign-flip p (app.leaderboards.stats.paired_cluster_difference).

Abstraction levels are read from an item's reference["abstraction"], one {"level": 0-3 or
null, "mechanisms": [...]} per step where a labelling study wrote them; steps without a level
are in no "level" group.

Everything is computed on numpy arrays: one (steps x 8) matrix per execution, per-procedure
sums by bincount and every group's bootstrap as one matrix product of resample counts.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np
from sqlalchemy import and_, select
from sqlalchemy.orm import Session

from app.agents.models import Agent, AgentOutput
from app.auth.models import User
from app.kinds.hexagons import metrics
from app.kinds.hexagons.execution import execution_metrics
from app.kinds.hexagons.score import position_label
from app.leaderboards.plot import estimates_svg
from app.leaderboards.stats import paired_cluster_differences_many
from app.studies.models import Annotation, Item, Study

N_BOOT = 2000
N_PERM = 2000
SECTIONS = {"agent": "Agents", "human": "Human executors (skyline)", "baseline": "Baselines"}
COLOURS = {"agent": "#2563eb", "human": "#059669", "baseline": "#d97706"}
PAIRED = ("board_f1", "action_f1")
POOLED = "All human executors"
K = len(metrics.KEYS)
BREAKDOWN_NOTES = {"step": "Positions from 10 on are pooled.",
                   "level": "Abstraction levels from the labelling of each step (0-3); unlabelled steps are in no level."}


@dataclass
class ProcedureInfo:
    category: str
    steps: int
    levels: list[int | None]


@dataclass
class Row:
    section: str  # agent, human, baseline
    who: str
    # item id -> (steps x 8) metric matrices, one per execution of that procedure
    executions: dict[int, list[np.ndarray]] = field(default_factory=lambda: defaultdict(list))


def abstraction_levels(reference: dict, n_steps: int) -> list[int | None]:
    """One level (0-3) or None per step from reference["abstraction"]; anything else is None."""
    labels = reference.get("abstraction") if isinstance(reference, dict) else None
    if not isinstance(labels, list) or len(labels) != n_steps:
        return [None] * n_steps
    out = []
    for label in labels:
        level = label.get("level") if isinstance(label, dict) else None
        out.append(level if isinstance(level, int) and not isinstance(level, bool) and 0 <= level <= 3 else None)
    return out


def groups_of(info: ProcedureInfo) -> list[list[str]]:
    """The groups each step of a procedure falls in."""
    return [["all", f"category: {info.category}", f"step {position_label(k)}"]
            + ([f"level {info.levels[k - 1]}"] if info.levels[k - 1] is not None else [])
            for k in range(1, info.steps + 1)]


def _resample_counts(rng: np.random.Generator, m: int, n_boot: int) -> np.ndarray:
    """(n_boot, m) counts: how often each of m clusters is drawn in each resample of m."""
    idx = rng.integers(0, m, size=(n_boot, m)) + (np.arange(n_boot) * m)[:, None]
    return np.bincount(idx.ravel(), minlength=n_boot * m).reshape(n_boot, m)


def _percentiles(x: np.ndarray, qs=(2.5, 97.5)) -> np.ndarray:
    """Percentiles along axis 0 (linear interpolation, as numpy's) over the non-NaN values of
    each column; NaN where a column has none."""
    x = np.sort(x, axis=0)  # NaN sorts last
    valid = (~np.isnan(x)).sum(0)
    out = []
    for q in qs:
        pos = np.maximum(valid - 1, 0) * q / 100
        lo = np.floor(pos).astype(np.intp)
        hi = np.minimum(lo + 1, np.maximum(valid - 1, 0))
        a = np.take_along_axis(x, lo[None], 0)[0]
        b = np.take_along_axis(x, hi[None], 0)[0]
        out.append(np.where(valid > 0, a + (b - a) * (pos - lo), np.nan))
    return np.array(out)


def cluster_estimates(sums: np.ndarray, counts: np.ndarray, n_boot: int = N_BOOT, seed: int = 0) -> np.ndarray:
    """Means over steps with 95% intervals resampling procedures, for many columns at once.

    sums: (procedures x columns) step sums of a metric in a group of steps, counts the same
    shape, the steps summed (0 where a procedure has none in the group). One matrix of
    resample counts over the procedures serves every column: a column's mean in a resample
    is over the resampled procedures' steps; resamples without any are left out of its
    interval. Returns (columns x 4): steps, mean, low, high."""
    m, c = sums.shape
    w = _resample_counts(np.random.default_rng(seed), m, n_boot).astype(float)
    both = w @ np.hstack([sums, counts])  # one BLAS product: (resamples x procedures) @ (procedures x 2 columns)
    with np.errstate(invalid="ignore", divide="ignore"):
        means = both[:, :c] / both[:, c:]
        mean = sums.sum(0) / counts.sum(0)
    low, high = _percentiles(means)
    return np.stack([counts.sum(0), mean, low, high], axis=-1)


def _estimate(cell: np.ndarray) -> dict:
    n, mean, low, high = cell
    if not n:
        return {"n": 0, "mean": None, "low": None, "high": None}
    return {"n": int(n), "mean": float(mean), "low": float(low), "high": float(high)}


def _group_index(procedures: dict[int, ProcedureInfo]) -> tuple[list[str], dict[int, tuple[np.ndarray, np.ndarray]]]:
    """The group names, and per procedure the (step, group id) pairs of its steps' groups."""
    names: dict[str, int] = {"all": 0}  # group 0: every step
    pairs = {}
    for item_id, info in procedures.items():
        flat = [(k, names.setdefault(g, len(names))) for k, gs in enumerate(groups_of(info)) for g in gs]
        pairs[item_id] = (np.array([k for k, _ in flat], dtype=np.intp), np.array([g for _, g in flat], dtype=np.intp))
    return list(names), pairs


def _row_table(row: Row, pairs: dict, n_groups: int) -> tuple[np.ndarray, np.ndarray]:
    """The row's (groups x procedures x 8) step sums and (groups x procedures) step counts:
    every step of every execution added to its groups' cells by one bincount per metric."""
    items = list(row.executions)
    steps, keys, offset, matrices = [], [], 0, []
    for pos, item_id in enumerate(items):
        k, g = pairs[item_id]
        for m in row.executions[item_id]:
            steps.append(k + offset)
            keys.append(g * len(items) + pos)
            offset += len(m)
            matrices.append(m)
    steps, keys, values = np.concatenate(steps), np.concatenate(keys), np.concatenate(matrices)
    size = n_groups * len(items)
    sums = np.stack([np.bincount(keys, weights=values[steps, j], minlength=size) for j in range(K)], axis=1)
    counts = np.bincount(keys, minlength=size).astype(float)
    return sums.reshape(n_groups, len(items), K), counts.reshape(n_groups, len(items))


def _group_order(g: str):
    kinds = ("all", "category", "step", "level")
    kind = next(i for i, k in enumerate(kinds) if g.startswith(k))
    return (kind, len(g) if kind == 2 else 0, g)


def _procedure_means(row: Row) -> dict[int, np.ndarray]:
    """Per procedure, the mean over its steps of each PAIRED metric (over all the row's executions)."""
    cols = [metrics.KEYS.index(k) for k in PAIRED]
    return {i: np.concatenate(runs)[:, cols].mean(0) for i, runs in row.executions.items()}


# The sign-flip test over n procedures cannot go below p = 2 / 2**n: under 6, never below 0.05.
MIN_SHARED = 6


def paired_tests(rows: list[Row], procedures: dict[int, ProcedureInfo], min_shared: int = MIN_SHARED) -> list[dict]:
    """Every two rows on the procedures both executed (at least `min_shared`): per metric in
    PAIRED, the difference of the means over steps (first minus second) with its interval and p."""
    means = [_procedure_means(r) for r in rows]
    pairs, comparisons = [], []
    for i in range(len(rows)):
        for j in range(i + 1, len(rows)):
            shared = sorted(rows[i].executions.keys() & rows[j].executions.keys())
            if len(shared) >= min_shared:
                weights = [procedures[p].steps for p in shared]
                pairs.append((i, j, len(shared), sum(weights)))
                comparisons.append((np.array([means[i][p] for p in shared]),
                                    np.array([means[j][p] for p in shared]), weights))
    # One batch: pairs over the same number of procedures share resamples and sign patterns.
    out = []
    for (i, j, n, steps), diffs in zip(pairs, paired_cluster_differences_many(comparisons, n_perm=N_PERM)):
        cells = {}
        for key, d in zip(PAIRED, diffs):
            cells[key] = {"n": d["n"], "mean": d["mean_diff"], "low": d["low"], "high": d["high"]}
            cells[f"{key}_p"] = _p(d["p"])
        out.append({"a": rows[i].who, "b": rows[j].who, "a_section": rows[i].section,
                    "b_section": rows[j].section, "procedures": n, "steps": steps, **cells})
    # Agents, the pooled humans and baselines first; pairs of single annotators after.
    single = lambda section, who: section == "human" and who != POOLED  # noqa: E731
    return sorted(out, key=lambda r: (single(r["a_section"], r["a"]) + single(r["b_section"], r["b"]),
                                      -r["procedures"]))


def _p(p: float) -> str:
    return "—" if p != p else ("< 0.001" if p < 0.001 else f"{p:.3f}")


def build(rows: list[Row], procedures: dict[int, ProcedureInfo], main: str = "board_f1") -> dict | None:
    """The section (tables and figures) from executions already scored per step."""
    rows = [r for r in rows if r.executions]
    if not rows:
        return None
    main_col = metrics.KEYS.index(main)
    names, pairs = _group_index(procedures)
    estimates: list[dict[str, dict[str, dict]]] = []
    for n, row in enumerate(rows):
        sums, counts = _row_table(row, pairs, len(names))
        # Every metric over all steps; in the breakdowns only the main one is shown.
        columns = [(0, j) for j in range(K)] + [(g, main_col) for g in range(1, len(names)) if counts[g].any()]
        cells = cluster_estimates(np.stack([sums[g, :, j] for g, j in columns], 1),
                                  np.stack([counts[g] for g, _ in columns], 1), seed=n)
        est: dict[str, dict[str, dict]] = defaultdict(dict)
        for (g, j), cell in zip(columns, cells):
            est[names[g]][metrics.KEYS[j]] = _estimate(cell)
        estimates.append(est)
    groups = sorted({g for e in estimates for g in e}, key=_group_order)
    overall = []
    for row, est in zip(rows, estimates):
        overall.append({"section": SECTIONS[row.section], "who": row.who, "procedures": len(row.executions),
                        "executions": sum(len(v) for v in row.executions.values()),
                        "steps": est["all"][main]["n"], **est["all"]})
    tables = [{
        "key": "hexagons_metrics", "title": "Action- and board-based metrics, averaged over steps",
        "note": ("Each cell: the mean over steps with a 95% interval resampling procedures. Both sets empty "
                 "(nothing to paint, nothing painted) counts 1. Human executors executed each step on their own "
                 "board; agents on the board their predictions name (by default the gold one). All human "
                 "executors: every annotator's executions pooled, the skyline."),
        "columns": [{"key": "section", "label": "Section"}, {"key": "who", "label": "Agent / executor"},
                    {"key": "procedures", "label": "Procedures"}, {"key": "executions", "label": "Executions"},
                    {"key": "steps", "label": "Steps"}]
                   + [{"key": k, "label": metrics.LABELS[k]} for k in metrics.KEYS],
        "rows": overall}]
    figures = [{"title": f"{metrics.LABELS[main]}, averaged over steps (95% intervals)", "svg": estimates_svg(
        [(r.who, e["all"][main], COLOURS[r.section]) for r, e in zip(rows, estimates)], metrics.LABELS[main])}]
    for prefix, title in (("category", "per category"), ("step", "per step position"),
                          ("level", "per abstraction level")):
        mine = [g for g in groups if g.startswith(prefix)]
        if not mine:
            continue
        label = metrics.LABELS[main]
        tables.append({
            "key": f"hexagons_by_{prefix}", "title": f"{label} {title}",
            "note": BREAKDOWN_NOTES.get(prefix),
            "columns": [{"key": "section", "label": "Section"}, {"key": "who", "label": "Agent / executor"}]
                       + [{"key": f"g:{g}", "label": g.split(": ", 1)[-1]} for g in mine],
            "rows": [{"section": SECTIONS[r.section], "who": r.who,
                      **{f"g:{g}": e[g][main] for g in mine if g in e}} for r, e in zip(rows, estimates)]})
        figures.append({"title": f"{label} {title} (95% intervals)", "svg": estimates_svg(
            [(f"{g.split(': ', 1)[-1]} · {r.who}", e[g][main], COLOURS[r.section])
             for g in mine for r, e in zip(rows, estimates) if g in e], label)})
    pairs = paired_tests(rows, procedures)
    if pairs:
        tables.append({
            "key": "hexagons_paired", "title": "Paired tests on the procedures both executed",
            "note": ("Difference of the means over steps (first minus second) on the shared procedures, with a 95% "
                     "interval from 2000 paired bootstrap resamples of procedures; p: two-sided sign-flip "
                     "randomisation test over procedures (exact up to 13 procedures). Pairs sharing fewer than "
                     f"{MIN_SHARED} procedures are left out: their p could not fall below 0.05."),
            "columns": [{"key": "a", "label": "First"}, {"key": "b", "label": "Second"},
                        {"key": "procedures", "label": "Procedures"}, {"key": "steps", "label": "Steps"}]
                       + [c for key in PAIRED for c in ({"key": key, "label": f"{metrics.LABELS[key]} difference"},
                                                        {"key": f"{key}_p", "label": "p"})],
            "rows": pairs})
    return {"tables": tables, "figures": [f for f in figures if f["svg"]]}


# ---- reading a study -------------------------------------------------------------------------

def _matrix(per_step: list[dict]) -> np.ndarray:
    return np.array([[s[k] for k in metrics.KEYS] for s in per_step], dtype=float).reshape(-1, K)


def _no_action(refs: dict[int, dict]) -> Row:
    """Every step leaves the board as it was: all procedures' steps scored in one call."""
    row, ids, before, after = Row("baseline", "No action (paints nothing)"), [], [], []
    for item_id, ref in refs.items():
        boards = [ref["initial"]] + ref["boards"]
        ids += [item_id] * len(ref["boards"])
        before += boards[:-1]
        after += boards[1:]
    if not ids:
        return row
    b, a = metrics.as_array(before), metrics.as_array(after)
    scores = metrics.score_arrays(b, a, b, b)
    matrix = np.stack([scores[k] for k in metrics.KEYS], axis=1)
    start = 0
    for item_id, ref in refs.items():
        n = len(ref["boards"])
        row.executions[item_id].append(matrix[start:start + n])
        start += n
    return row


def section(session: Session, study: Study) -> dict | None:
    refs = {i: r for i, r in session.execute(select(Item.id, Item.reference).where(
        Item.study_id == study.id, Item.is_gold.is_(False))) if r}
    cats = dict(session.execute(select(Item.id, Item.category).where(Item.study_id == study.id)).all())
    procedures = {i: ProcedureInfo(cats.get(i) or "", len(r["boards"]), abstraction_levels(r, len(r["boards"])))
                  for i, r in refs.items()}
    agents: dict[str, Row] = {}
    for name, version, item_id, response in session.execute(
            select(Agent.name, Agent.version, AgentOutput.item_id, AgentOutput.response)
            .join(AgentOutput, AgentOutput.agent_id == Agent.id)
            .where(AgentOutput.study_id == study.id).order_by(Agent.name, Agent.version)):
        if item_id in refs:
            who = f"{name} v{version}"
            agents.setdefault(who, Row("agent", who)).executions[item_id].append(
                _matrix(execution_metrics(refs[item_id], response)["steps"]))
    pooled, people = Row("human", POOLED), {}
    valid = and_(Annotation.study_id == study.id, Annotation.is_gold.is_(False), Annotation.excluded.is_(False))
    for who, item_id, scores in session.execute(
            select(User.pseudonym, Annotation.item_id, Annotation.scores)
            .join(User, User.id == Annotation.worker_id).where(valid)):
        if item_id in refs and scores and len(scores.get("per_step") or []) == procedures[item_id].steps:
            m = _matrix(scores["per_step"])
            people.setdefault(who or "?", Row("human", who or "?")).executions[item_id].append(m)
            pooled.executions[item_id].append(m)
    humans = sorted(people.values(), key=lambda r: (-len(r.executions), r.who))
    main = next((r.get("score_metric") for r in refs.values()), None) or "board_f1"
    rows = list(agents.values()) + ([pooled] if len(humans) > 1 else []) + humans + [_no_action(refs)]
    if not agents and not humans:
        return None
    return build(rows, procedures, main if main in metrics.KEYS else "board_f1")
