"""The Hexagons leaderboard section (Lachmy et al. 2022, section 5; DESIGN.md sections 6-7).

Rows, in three sections: agents; human executors (the skyline: every annotator pooled, then
each annotator); baselines ("No action" and the paper's rule-based executor). Each row: the
procedures and steps it executed and the eight metrics averaged over steps, overall and per
category, step position and abstraction level.

Figures and intervals (docs/kinds/hexagons.md, "Figures and intervals"):

- the unit of replication is the PROCEDURE (the steps of one procedure are not independent):
  every cell is `stats.mean_interval(step values, clusters=procedure ids)`;
- agents and baselines are scored over every procedure of the study, a procedure they lack
  counting 0 at each of its steps (coverage beside); people over the procedures they executed;
- agents and baselines are ranked (`stats.rank_intervals`, bootstrap over procedures) on the
  main metric: "Rank (95%)", "1-2" where rank intervals overlap;
- paired tests between every two rows on the procedures both executed: the difference of their
  means over steps with a paired bootstrap interval and an exact sign-flip p over procedures
  (`stats.paired_cluster_differences_many`), Holm-adjusted per metric across the pairs of
  agents, baselines and the pooled people (pairs with a single annotator have no Holm p),
  and the effect on per-procedure means (`stats.paired_effect`: mean difference with its
  interval, Cohen's d_z);
- the executors' abstraction labels (studies with `label_abstraction`), where two or more
  executors labelled a step: Krippendorff's alpha, ordinal, with a bootstrap over procedures.

Abstraction levels of the breakdown are read from an item's reference["abstraction"], one
{"level": 0-3 or null, "mechanisms": [...]} per step where a labelling study wrote them; steps
without a level are in no "level" group.
"""

from __future__ import annotations

import threading
from collections import Counter, defaultdict
from dataclasses import dataclass, field

import numpy as np
from sqlalchemy import and_, select
from sqlalchemy.orm import Session

from app.agents.models import Agent, AgentOutput
from app.auth.models import User
from app.kinds.hexagons import metrics, rule_executor
from app.kinds.hexagons.execution import execution_metrics
from app.kinds.hexagons.judge import judge_tables
from app.kinds.hexagons.score import position_label
from app.leaderboards import stats
from app.leaderboards.plot import estimates_svg
from app.leaderboards.rows import D_Z_HELP, clustered, effect_size_cell, rank_cells, rank_interval_column
from app.leaderboards.stats import paired_cluster_differences_many
from app.studies.models import Annotation, Item, Study

N_PERM = 2000
N_RANK_BOOT = 1000
N_ALPHA_BOOT = 500
SECTIONS = {"agent": "Agents", "human": "Human executors (skyline)", "baseline": "Baselines"}
COLOURS = {"agent": "#2563eb", "human": "#059669", "baseline": "#d97706"}
PAIRED = ("board_f1", "action_f1")
POOLED = "All human executors"
NO_ACTION = "No action (paints nothing)"
K = len(metrics.KEYS)
BREAKDOWN_NOTES = {
    "step": "Positions from 10 on are pooled.",
    "level": "Abstraction levels from the labelling of each step (0-3); unlabelled steps are in no level.",
}
METRIC_NOTE = (
    "Action-based: the paint actions of a step against the instructor's; board-based: the board "
    "after it against theirs. P: precision, R: recall, F1: their harmonic mean, EM: exact match. "
)
INTERVAL_NOTE = (
    "Each cell: the mean over steps (a score in [0, 1]) with a 95% interval (Wilson's at the "
    "effective number of procedures, the variance cluster-robust over procedures: the unit resampled "
    'is the procedure, never the step); under 5 procedures, "too few for an interval", its n '
    "counting procedures. "
)
# The action-based columns only: the board after a step also holds the tiles of the steps before
# it, so a baseline that paints nothing still has board P, R and F1 above 0 where those are right.
SAME_FIGURE_NOTE = (
    "A row whose every step is all right or all wrong (a baseline that paints a step exactly "
    "or not at all) shows the same figure in P, R, F1 and EM of its action-based columns; its "
    "board-based ones differ, as the board after a step also holds the earlier steps' tiles. "
)
CELL_NOTE = METRIC_NOTE + INTERVAL_NOTE + SAME_FIGURE_NOTE
# Each column's help (one sentence, shown on the page: app/kinds/base.py).
_OVER_STEPS = " Mean over steps, 95% interval resampling procedures."
_WHAT = {
    "action": ("the step's paint actions", "the instructor's actions"),
    "board": ("the tiles coloured after the step", "the instructor's coloured tiles"),
}
_PART = {
    "precision": "Precision (0-1): the share of {mine} that are in {theirs}.",
    "recall": "Recall (0-1): the share of {theirs} found in {mine}.",
    "f1": "F1 (0-1): the harmonic mean of precision and recall, {mine} against {theirs}.",
    "em": "Exact match (0 or 1): 1 when {mine} are exactly {theirs}.",
}
METRIC_HELP = {
    k: _PART[k.split("_", 1)[1]].format(mine=_WHAT[k.split("_", 1)[0]][0], theirs=_WHAT[k.split("_", 1)[0]][1])
    + _OVER_STEPS
    for k in metrics.KEYS
}


def _metric_words(key: str) -> str:
    """What a metric is, in words (its help without the label and the interval)."""
    part, what = key.split("_", 1)[1], _WHAT[key.split("_", 1)[0]]
    return _PART[part].format(mine=what[0], theirs=what[1]).split(": ", 1)[1]


def _group_help(g: str) -> str:
    """The steps a breakdown column counts, in words."""
    if g.startswith("category: "):
        return f"the steps of the procedures of category {g.split(': ', 1)[1]}"
    if g.startswith("step "):
        return f"the steps at position {g[5:]} of their procedure"
    return f"the steps labelled abstraction {g}"


SECTION_HELP = {"key": "section", "label": "Section", "help": "Agents, human executors (the skyline) or baselines."}
WHO_HELP = {
    "key": "who",
    "label": "Agent / executor",
    "help": 'The agent (name and version), the executor (pseudonym; "All human executors": pooled) or the baseline.',
}
SCORED_OVER = (
    "Agents and baselines are scored over every procedure of the study, a procedure they lack "
    "counting 0 at each of its steps (Coverage: the share of procedures executed); people over the "
    "procedures they executed. "
)
# A breakdown table shows one metric and no Coverage column: its note says only what its cells are.
BREAKDOWN_SCORED_OVER = (
    "Agents and baselines are scored over every procedure of the study, a procedure they "
    "lack counting 0 at each of its steps; people over the procedures they executed."
)


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

    @property
    def over_all(self) -> bool:
        """Agents and baselines answer for every procedure of the study (a missing one is 0);
        a person for what they executed."""
        return self.section != "human"


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
    return [
        ["all", f"category: {info.category}", f"step {position_label(k)}"]
        + ([f"level {info.levels[k - 1]}"] if info.levels[k - 1] is not None else [])
        for k in range(1, info.steps + 1)
    ]


def _group_index(procedures: dict[int, ProcedureInfo]) -> tuple[list[str], dict[int, np.ndarray]]:
    """The group names, and per procedure a (groups x steps) membership matrix of its steps."""
    names: dict[str, int] = {"all": 0}  # group 0: every step
    flat = {}
    for item_id, info in procedures.items():
        flat[item_id] = [[names.setdefault(g, len(names)) for g in gs] for gs in groups_of(info)]
    member = {}
    for item_id, steps in flat.items():
        m = np.zeros((len(names), len(steps)), dtype=bool)
        for k, gs in enumerate(steps):
            m[gs, k] = True
        member[item_id] = m
    return list(names), member


def row_steps(row: Row, procedures: dict[int, ProcedureInfo]) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """The step values a row's figures rest on: (steps x 8) values, each step's procedure id, and
    the procedures in order of the steps (one entry per execution, or per missing procedure). For
    agents and baselines every procedure of the study is there, one it lacks as zeros."""
    mats, ids, order = [], [], []
    for item_id in procedures:
        runs = row.executions.get(item_id) or ([] if not row.over_all else [np.zeros((procedures[item_id].steps, K))])
        for m in runs:
            mats.append(m)
            ids.append(np.full(len(m), item_id, dtype=np.int64))
            order.append(item_id)
    if not mats:
        return np.zeros((0, K)), np.zeros(0, dtype=np.int64), []
    return np.concatenate(mats), np.concatenate(ids), order


def _group_order(g: str):
    kinds = ("all", "category", "step", "level")
    kind = next(i for i, k in enumerate(kinds) if g.startswith(k))
    return (kind, len(g) if kind == 2 else 0, g)


def row_estimates(
    row: Row, procedures: dict[int, ProcedureInfo], names: list[str], member: dict[int, np.ndarray], main: str
) -> dict[str, dict[str, dict]]:
    """Every metric over all the row's steps, and the main metric per group of steps: each
    `stats.mean_interval(step values, clusters=procedure ids)` as a dict."""
    values, ids, order = row_steps(row, procedures)
    if not order:
        return {}
    groups = np.concatenate([member[i] for i in order], axis=1)  # (groups x steps)
    main_col = metrics.KEYS.index(main)
    est: dict[str, dict[str, dict]] = defaultdict(dict)
    for g, name in enumerate(names):
        mask = groups[g]
        if not mask.any():
            continue
        cols = range(K) if g == 0 else [main_col]
        for j in cols:
            # n: the steps; units: the procedures the interval resamples (the "too few" cutoff).
            est[name][metrics.KEYS[j]] = clustered(values[mask, j], ids[mask].tolist(), "procedure")
    return est


def _procedure_means(row: Row) -> dict[int, np.ndarray]:
    """Per procedure executed, the mean over its steps of each PAIRED metric (over all the row's executions)."""
    cols = [metrics.KEYS.index(k) for k in PAIRED]
    return {i: np.concatenate(runs)[:, cols].mean(0) for i, runs in row.executions.items()}


def rank_table(
    rows: list[Row], procedures: dict[int, ProcedureInfo], main: str, n_boot: int = N_RANK_BOOT
) -> dict[str, str | dict[str, str]]:
    """95% rank intervals of the agents and baselines on the main metric over every procedure of
    the study (each has a figure on each: a lacking procedure is 0). Each procedure's value is its
    step sum of the main metric (mean over the row's executions of it) times P / W (P procedures,
    W steps), so the mean over procedures is the table's mean over steps and a bootstrap over
    procedures ranks the resampled step means (`stats.rank_intervals`)."""
    ranked = [r for r in rows if r.over_all]
    if not ranked:
        return {}
    ids = list(procedures)
    total = sum(procedures[i].steps for i in ids)
    col = metrics.KEYS.index(main)
    scale = len(ids) / total if total else 0.0
    per_item = {}
    for r in ranked:
        per_item[r.who] = [
            scale * (float(np.mean([m[:, col].sum() for m in r.executions[i]])) if r.executions.get(i) else 0.0)
            for i in ids
        ]
    return rank_cells(per_item, "procedure", n_boot=n_boot, seed=0)


# The sign-flip test over n procedures cannot go below p = 2 / 2**n: under 6, never below 0.05.
MIN_SHARED = 6


def paired_tests(rows: list[Row], procedures: dict[int, ProcedureInfo], min_shared: int = MIN_SHARED) -> list[dict]:
    """Every two rows on the procedures both executed (at least `min_shared`): per metric in
    PAIRED, the difference of the means over steps (first minus second) with its interval and
    p, p Holm-adjusted across the table's pairs (per metric), and the effect on per-procedure
    means (stats.paired_effect: mean difference with its interval, Cohen's d_z)."""
    means = [_procedure_means(r) for r in rows]
    pairs, comparisons = [], []
    for i in range(len(rows)):
        for j in range(i + 1, len(rows)):
            shared = sorted(rows[i].executions.keys() & rows[j].executions.keys())
            if len(shared) >= min_shared:
                weights = [procedures[p].steps for p in shared]
                pairs.append((i, j, len(shared), sum(weights)))
                comparisons.append(
                    (np.array([means[i][p] for p in shared]), np.array([means[j][p] for p in shared]), weights)
                )
    # One batch: pairs over the same number of procedures share resamples and sign patterns.
    results = paired_cluster_differences_many(comparisons, n_perm=N_PERM)
    # Holm's family: the comparisons a study is run for (agents, baselines and the pooled
    # people, among themselves). Pairs with a single annotator describe people, are many (and
    # one of them is always inside the pool), and would inflate every other p: no Holm p.
    single = lambda section, who: section == "human" and who != POOLED  # noqa: E731
    family = [
        k
        for k, (i, j, _, _) in enumerate(pairs)
        if not (single(rows[i].section, rows[i].who) or single(rows[j].section, rows[j].who))
    ]
    adjusted = {}
    for m, key in enumerate(PAIRED):
        holm = stats.holm([results[k][m]["p"] for k in family])
        adjusted[key] = {k: holm[x] for x, k in enumerate(family)}
    out = []
    for k, ((i, j, n, steps), diffs, (a, b, _)) in enumerate(zip(pairs, results, comparisons)):
        cells = {}
        for m, (key, d) in enumerate(zip(PAIRED, diffs)):
            cells[key] = {
                "n": d["n"],
                "mean": d["mean_diff"],
                "low": d["low"],
                "high": d["high"],
                "method": "paired bootstrap over procedures (percentile), step-weighted",
            }
            cells[f"{key}_p"] = _p(d["p"])
            cells[f"{key}_holm"] = _p(adjusted[key][k]) if k in adjusted[key] else None
            effect = stats.paired_effect(a[:, m], b[:, m])
            cells[f"{key}_effect"] = stats.clipped_difference(effect["difference"].as_dict())
            cells[f"{key}_dz"] = effect_size_cell(effect["cohen_dz"], len(a))
        out.append(
            {
                "a": rows[i].who,
                "b": rows[j].who,
                "a_section": rows[i].section,
                "b_section": rows[j].section,
                "procedures": n,
                "steps": steps,
                **cells,
            }
        )
    # Agents, the pooled humans and baselines first; pairs of single annotators after.
    return sorted(
        out, key=lambda r: (single(r["a_section"], r["a"]) + single(r["b_section"], r["b"]), -r["procedures"])
    )


def _p(p: float) -> str:
    return "—" if p != p else ("< 0.001" if p < 0.001 else f"{p:.3f}")


def abstraction_agreement(
    labels: dict[int, list[list[int | None]]], n_boot: int = N_ALPHA_BOOT, seed: int = 0
) -> dict | None:
    """Krippendorff's alpha (ordinal) of the executors' abstraction levels, 0-3, over the steps
    two or more executors labelled, with a 95% percentile interval from `n_boot` resamples of
    PROCEDURES (each keeping all its steps' labels). `labels[item]` holds one list of levels
    (None: no level) per execution of the procedure. None when no step has two levels."""
    units: dict[int, list[dict[int, int]]] = {}
    for item_id, runs in labels.items():
        steps = max((len(r) for r in runs), default=0)
        per_step = [Counter(r[k] for r in runs if k < len(r) and r[k] is not None) for k in range(steps)]
        pairable = [dict(c) for c in per_step if sum(c.values()) >= 2]
        if pairable:
            units[item_id] = pairable
    if not units:
        return None
    flat = [u for us in units.values() for u in us]
    procedure = [item_id for item_id, us in units.items() for _ in us]
    # The procedure is the unit: its steps' levels are drawn together (the core's alpha).
    got = stats.krippendorff_alpha(
        flat, level="ordinal", n_boot=n_boot if len(units) >= 2 else 0, seed=seed, clusters=procedure
    )
    est = {**got.as_dict(), "n": len(units), "method": "bootstrap over procedures (percentile), ordinal"}
    return {
        "what": "Abstraction level (0-3), executors' labels",
        "level": "ordinal",
        "procedures": len(units),
        "steps": len(flat),
        "labels": sum(sum(u.values()) for u in flat),
        "alpha": est,
    }


def build(
    rows: list[Row], procedures: dict[int, ProcedureInfo], main: str = "board_f1", agreement: dict | None = None
) -> dict | None:
    """The section (tables and figures) from executions already scored per step."""
    rows = [r for r in rows if r.executions]
    if not rows:
        return None
    names, member = _group_index(procedures)
    estimates = [row_estimates(row, procedures, names, member, main) for row in rows]
    ranks = rank_table(rows, procedures, main)
    groups = sorted({g for e in estimates for g in e}, key=_group_order)
    overall = []
    for row, est in zip(rows, estimates):
        overall.append(
            {
                "section": SECTIONS[row.section],
                "who": row.who,
                "procedures": len(row.executions),
                "coverage": len(row.executions) / len(procedures) if procedures else None,
                "executions": sum(len(v) for v in row.executions.values()),
                "steps": est["all"][main]["n"],
                "rank": ranks.get(row.who),
                **est["all"],
            }
        )
    label = metrics.LABELS[main]
    tables = [
        {
            "key": "hexagons_metrics",
            "title": "Action- and board-based F1 and exact match (scores in [0, 1]), averaged over steps",
            "note": (
                CELL_NOTE + SCORED_OVER + f"Rank (95%): agents and baselines by {label}, rank intervals from "
                f'{N_RANK_BOOT} bootstrap resamples of procedures; "1-2" where intervals overlap (tied), "—" '
                f"with fewer than {stats.MIN_RANK_UNITS} procedures. Both "
                "sets empty (nothing to paint, nothing painted) counts 1. Human executors executed each step on "
                "their own board; agents and baselines on the board their predictions name (by default the gold "
                "one). All human executors: every annotator's executions pooled, the skyline."
            ),
            # The ranked metric and its rank first, beside the names (on screen at 1280 px, the
            # counts and the other seven metrics after them).
            "columns": [
                SECTION_HELP,
                WHO_HELP,
                rank_interval_column(label, "procedures (agents and baselines)", N_RANK_BOOT),
                {"key": main, "label": metrics.LABELS[main], "help": METRIC_HELP[main] + " The ranked metric."},
                {"key": "procedures", "label": "Procedures", "help": "Procedures the row executed."},
                {
                    "key": "coverage",
                    "label": "Coverage",
                    "help": "Share (0-1) of the study's procedures executed; an agent's or baseline's missing one counts 0.",
                },
                {
                    "key": "executions",
                    "label": "Executions",
                    "help": "Executions counted (a person may execute a procedure once, a pool many times).",
                },
                {"key": "steps", "label": "Steps", "help": "Steps the means are over."},
            ]
            + [{"key": k, "label": metrics.LABELS[k], "help": METRIC_HELP[k]} for k in metrics.KEYS if k != main],
            "rows": overall,
        }
    ]
    figures = [
        {
            "title": f"{label}, averaged over steps (95% intervals)",
            "svg": estimates_svg([(r.who, e["all"][main], COLOURS[r.section]) for r, e in zip(rows, estimates)], label),
        }
    ]
    for prefix, title in (
        ("category", "per category"),
        ("step", "per step position"),
        ("level", "per abstraction level"),
    ):
        mine = [g for g in groups if g.startswith(prefix)]
        if not mine:
            continue
        tables.append(
            {
                "key": f"hexagons_by_{prefix}",
                "title": f"{label} (score in [0, 1]) {title}, averaged over steps",
                "note": " ".join(
                    x
                    for x in (
                        f"{label}: {_metric_words(main)} " + INTERVAL_NOTE + BREAKDOWN_SCORED_OVER,
                        BREAKDOWN_NOTES.get(prefix),
                    )
                    if x
                ),
                "columns": [SECTION_HELP, WHO_HELP]
                + [
                    {
                        "key": f"g:{g}",
                        "label": g.split(": ", 1)[-1],
                        "help": f"{label} (0-1) over {_group_help(g)}." + _OVER_STEPS,
                    }
                    for g in mine
                ],
                "rows": [
                    {"section": SECTIONS[r.section], "who": r.who, **{f"g:{g}": e[g][main] for g in mine if g in e}}
                    for r, e in zip(rows, estimates)
                ],
            }
        )
        figures.append(
            {
                "title": f"{label} {title} (95% intervals)",
                "svg": estimates_svg(
                    [
                        (f"{g.split(': ', 1)[-1]} · {r.who}", e[g][main], COLOURS[r.section])
                        for g in mine
                        for r, e in zip(rows, estimates)
                        if g in e
                    ],
                    label,
                ),
            }
        )
    pairs = paired_tests(rows, procedures)
    if pairs:
        tables.append(
            {
                "key": "hexagons_paired",
                "title": "Paired differences in F1 (first minus second, in [-1, 1]) on the procedures both executed",
                "note": (
                    "Difference: of the means over steps on the shared procedures, with a 95% interval from 2000 "
                    "paired bootstrap resamples of procedures; p: two-sided sign-flip randomisation test over "
                    "procedures (exact up to 13 procedures); Holm p: adjusted across the pairs of agents, "
                    "baselines and the pooled people, per metric (a pair with a single annotator has none: it "
                    "describes people). Effect: the mean of the per-procedure differences with a 95% t interval "
                    "(the unit is the procedure) and Cohen's d_z. Pairs sharing fewer than "
                    f"{MIN_SHARED} procedures are left out: their p could not fall below 0.05."
                ),
                "columns": [
                    {"key": "a", "label": "First", "help": "The first row compared."},
                    {"key": "b", "label": "Second", "help": "The second row compared."},
                    {"key": "procedures", "label": "Procedures", "help": "Procedures both executed: the paired units."},
                    {"key": "steps", "label": "Steps", "help": "Steps of those procedures."},
                ]
                + [
                    c
                    for key in PAIRED
                    for c in (
                        {
                            "key": key,
                            "label": f"{metrics.LABELS[key]} difference",
                            "help": f"First minus second in {metrics.LABELS[key]} (-1 to 1), means over steps, with a 95% "
                            f"interval from {N_PERM} paired bootstrap resamples of procedures.",
                        },
                        {
                            "key": f"{key}_p",
                            "label": "p",
                            "help": f"Two-sided sign-flip randomisation p over procedures ({metrics.LABELS[key]}).",
                        },
                        {
                            "key": f"{key}_holm",
                            "label": "Holm p",
                            "help": "That p adjusted by Holm across the pairs of agents, baselines and pooled people.",
                        },
                        {
                            "key": f"{key}_effect",
                            "label": f"{metrics.LABELS[key]} effect (per procedure)",
                            "help": "Mean of the per-procedure differences (each procedure once), with a 95% interval "
                            "(t on the differences; Bonett-Price for 0/1).",
                        },
                        {"key": f"{key}_dz", "label": "d_z", "help": D_Z_HELP},
                    )
                ],
                "rows": pairs,
            }
        )
    if agreement:
        tables.append(
            {
                "key": "hexagons_agreement",
                "title": "Agreement of the executors' abstraction levels (Krippendorff's alpha, ordinal, -1 to 1)",
                "note": (
                    "Levels 0-3 are ordered, so alpha is ordinal. Over the steps two or more executors labelled "
                    f"(steps without a level left out), with a 95% percentile interval from {N_ALPHA_BOOT} "
                    "bootstrap resamples of procedures (the unit resampled; each keeps all its steps)."
                ),
                "columns": [
                    {"key": "what", "label": "Judgement", "help": "What the executors labelled."},
                    {
                        "key": "level",
                        "label": "Level",
                        "help": "The level of measurement alpha treats the labels at (ordinal: ordered).",
                    },
                    {
                        "key": "procedures",
                        "label": "Procedures",
                        "help": "Procedures with a step labelled twice or more.",
                    },
                    {"key": "steps", "label": "Steps", "help": "Steps two or more executors labelled."},
                    {"key": "labels", "label": "Labels", "help": "Labels on those steps."},
                    {
                        "key": "alpha",
                        "label": "Alpha",
                        "help": "Krippendorff's alpha (-1 to 1; 1 = perfect agreement, 0 = chance), with a 95% "
                        "interval resampling procedures.",
                    },
                ],
                "rows": [agreement],
            }
        )
    return {"tables": tables, "figures": [f for f in figures if f["svg"]]}


# ---- reading a study -------------------------------------------------------------------------


def _matrix(per_step: list[dict]) -> np.ndarray:
    return np.array([[s[k] for k in metrics.KEYS] for s in per_step], dtype=float).reshape(-1, K)


def _no_action(refs: dict[int, dict]) -> Row:
    """Every step leaves the board as it was: all procedures' steps scored in one call (the same
    figures as execution_metrics gives a response that repaints each gold board before it)."""
    row, ids, before, after = Row("baseline", NO_ACTION), [], [], []
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
        row.executions[item_id].append(matrix[start : start + n])
        start += n
    return row


def _rule_based(refs: dict[int, dict], payloads: dict[int, dict]) -> Row | None:
    """The paper's rule-based executor (rule_executor.py), each step executed on the gold board
    before it and scored by execution_metrics like an agent's response. None where it paints
    nothing on any procedure (it would be "No action" again)."""
    row, painted = Row("baseline", rule_executor.NAME), False
    for item_id, ref in refs.items():
        before = ([ref["initial"]] + ref["boards"])[:-1]
        instructions = (payloads.get(item_id) or {}).get("instructions") or [""] * len(before)
        boards = [rule_executor.execute(text, board) for text, board in zip(instructions, before)]
        painted = painted or boards != before
        response = {"steps": [{"board": b} for b in boards], "on": "gold"}
        row.executions[item_id].append(_matrix(execution_metrics(ref, response)["steps"]))
    return row if painted else None


# The baselines of the last few procedure sets executed: one page render asks for them twice
# (the generic table's rows, Hexagons.baselines, and this section), and they are computed once.
# Keyed by content (the procedures' references and payloads, compared whole), so a study
# whose procedures changed is executed afresh.
_BASELINES: list[tuple[dict, dict, list[Row]]] = []
_BASELINES_KEPT = 4
_BASELINES_LOCK = threading.Lock()


def _copy(row: Row) -> Row:
    return Row(row.section, row.who, defaultdict(list, {i: list(runs) for i, runs in row.executions.items()}))


def baseline_rows(refs: dict[int, dict], payloads: dict[int, dict]) -> list[Row]:
    """The built-in baselines of an execution study, every procedure executed: "No action" and,
    where it paints anything, the rule-based executor. The section's rows and the generic table's
    (Hexagons.baselines) both come from here, executed once for the two (_BASELINES)."""
    with _BASELINES_LOCK:
        done = next((rows for r, p, rows in _BASELINES if r == refs and p == payloads), None)
    if done is None:
        rule = _rule_based(refs, payloads)
        done = [_no_action(refs)] + ([rule] if rule is not None else [])
        with _BASELINES_LOCK:
            _BASELINES.insert(0, (refs, payloads, done))
            del _BASELINES[_BASELINES_KEPT:]
    return [_copy(row) for row in done]


def _procedures(session: Session, study: Study) -> tuple[dict[int, dict], dict[int, dict], dict[int, ProcedureInfo]]:
    """The study's non-gold procedures: references, payloads and ProcedureInfo by item id."""
    refs, payloads, procedures = {}, {}, {}
    for i, payload, ref, category in session.execute(
        select(Item.id, Item.payload, Item.reference, Item.category)
        .where(Item.study_id == study.id, Item.is_gold.is_(False))
        .order_by(Item.id)
    ):
        if ref:
            refs[i], payloads[i] = ref, payload or {}
            n = len(ref["boards"])
            procedures[i] = ProcedureInfo(category or "", n, abstraction_levels(ref, n))
    return refs, payloads, procedures


def _levels(labels) -> list[int | None] | None:
    """One executor's abstraction levels, one per step (None: no level), from the response's labels."""
    if not isinstance(labels, list):
        return None
    return [
        lb.get("level")
        if isinstance(lb, dict) and isinstance(lb.get("level"), int) and not isinstance(lb.get("level"), bool)
        else None
        for lb in labels
    ]


def section(session: Session, study: Study) -> dict | None:
    refs, payloads, procedures = _procedures(session, study)
    agents: dict[str, Row] = {}
    for name, version, item_id, response in session.execute(
        select(Agent.name, Agent.version, AgentOutput.item_id, AgentOutput.response)
        .join(AgentOutput, AgentOutput.agent_id == Agent.id)
        .where(AgentOutput.study_id == study.id)
        .order_by(Agent.name, Agent.version)
    ):
        if item_id in refs:
            who = f"{name} v{version}"
            agents.setdefault(who, Row("agent", who)).executions[item_id].append(
                _matrix(execution_metrics(refs[item_id], response)["steps"])
            )
    pooled, people = Row("human", POOLED), {}
    labels: dict[int, list[list[int | None]]] = defaultdict(list)
    valid = and_(Annotation.study_id == study.id, Annotation.is_gold.is_(False), Annotation.excluded.is_(False))
    for who, item_id, scores, given in session.execute(
        select(User.pseudonym, Annotation.item_id, Annotation.scores, Annotation.response["labels"])
        .join(User, User.id == Annotation.worker_id)
        .where(valid)
    ):
        if item_id in refs and scores and len(scores.get("per_step") or []) == procedures[item_id].steps:
            m = _matrix(scores["per_step"])
            people.setdefault(who or "?", Row("human", who or "?")).executions[item_id].append(m)
            pooled.executions[item_id].append(m)
            levels = _levels(given)
            if levels is not None:
                labels[item_id].append(levels)
    humans = sorted(people.values(), key=lambda r: (-len(r.executions), r.who))
    main = next((r.get("score_metric") for r in refs.values()), None) or "board_f1"
    if not agents and not humans:
        return None
    main = main if main in metrics.KEYS else "board_f1"
    rows = list(agents.values()) + ([pooled] if len(humans) > 1 else []) + humans + baseline_rows(refs, payloads)
    out = build(rows, procedures, main, abstraction_agreement(labels))
    # The model executors as an automatic judge beside people (issue 28), where any executed.
    if out is not None:
        out["tables"] += judge_tables(
            {who: row.executions for who, row in agents.items()},
            pooled.executions,
            {i: str(ref.get("instructor_id") or "") for i, ref in refs.items()},
            {i: info.category for i, info in procedures.items()},
            main,
        )
    return out
