"""Scoring an executor's boards against the gold procedures (`proctor hexagons score`), and the
"no action" baseline (every step leaves the board as it was).

A prediction gives the board after one step and, optionally, the board the step was executed
on (`previous`; by default the gold board before the step, the paper's oracle board-state).
Every metric is averaged over steps (metrics.py), overall and by the procedure's category, by
the step's position in its procedure and by its agreement tag.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence

import numpy as np

from app.errors import InputError
from app.kinds.hexagons import metrics
from app.kinds.hexagons.formats import TAGS, Prediction, Procedure
from app.leaderboards import stats

# Positions from here on are pooled in the per-position breakdown (few procedures run long).
POSITION_CAP = 10


def step_key(index: str, step: int) -> str:
    return f"{index}_{step}"


def position_label(step: int) -> str:
    return str(step) if step < POSITION_CAP else f"{POSITION_CAP}+"


def _complete(procedures: Sequence[Procedure], predictions: Sequence[Prediction]) -> None:
    given = {(p.index, p.step) for p in predictions}
    missing = [
        (proc.index, s.position) for proc in procedures for s in proc.steps if (proc.index, s.position) not in given
    ]
    if missing:
        index, step = missing[0]
        raise InputError(
            f"no prediction for procedure {index} step {step} ({len(missing)} steps have none; "
            "score only the predicted steps with --partial)",
            field="step",
        )


def score_predictions(
    procedures: Sequence[Procedure], predictions: Sequence[Prediction], partial: bool = False
) -> dict:
    """{"per_step": {"<index>_<step>": metrics}, "mean": metrics, "n": steps scored, and the
    breakdowns "by_category", "by_position", "by_tag": {group: {"n", **mean}}}. Unless
    `partial`, every gold step must have a prediction."""
    if not partial:
        _complete(procedures, predictions)
    by_index = {p.index: p for p in procedures}
    rows = []
    for pred in predictions:
        proc = by_index[pred.index]
        gold_before, gold_after = proc.boards[pred.step - 1], proc.boards[pred.step]
        rows.append(
            (
                proc,
                proc.steps[pred.step - 1],
                gold_before,
                gold_after,
                pred.previous if pred.previous is not None else gold_before,
                pred.board,
            )
        )
    return summarise(rows)


def no_action(procedures: Iterable[Procedure]) -> dict:
    """The baseline that paints nothing: each step's board is the gold board before it."""
    rows = []
    for proc in procedures:
        boards = proc.boards
        for s in proc.steps:
            before = boards[s.position - 1]
            rows.append((proc, s, before, boards[s.position], before, before))
    return summarise(rows)


def summarise(rows: Sequence[tuple]) -> dict:
    """rows: (procedure, step, gold before, gold after, hypothesis before, hypothesis after)."""
    arrays = [metrics.as_array(r[k] for r in rows) for k in (2, 3, 4, 5)]
    scores = metrics.score_arrays(*arrays)
    keys = [step_key(r[0].index, r[1].position) for r in rows]
    per_step = {key: {m: float(scores[m][i]) for m in metrics.KEYS} for i, key in enumerate(keys)}
    groups: dict[str, dict[str, list[int]]] = {
        "by_category": defaultdict(list),
        "by_position": defaultdict(list),
        "by_tag": defaultdict(list),
    }
    for i, (proc, step, *_) in enumerate(rows):
        groups["by_category"][proc.category].append(i)
        groups["by_position"][position_label(step.position)].append(i)
        groups["by_tag"][step.tag or "untagged"].append(i)

    def part(idx: list[int]) -> dict:
        sel = np.asarray(idx, dtype=np.intp)
        return {"n": len(idx), **metrics.mean({k: v[sel] for k, v in scores.items()})}

    order = {
        "by_position": lambda g: (len(g), g),
        "by_category": lambda g: g,
        "by_tag": lambda g: TAGS.index(g) if g in TAGS else len(TAGS),
    }
    # Each metric's mean over steps with the leaderboard section's interval: the core's
    # mean_interval with the procedure as the unit (its steps share one drawing).
    procs = [r[0].index for r in rows]
    estimates = {m: stats.mean_interval(scores[m], clusters=procs).as_dict() for m in metrics.KEYS}
    return {
        "per_step": per_step,
        "mean": metrics.mean(scores),
        "estimates": estimates,
        "n": len(rows),
        **{name: {g: part(v[g]) for g in sorted(v, key=order[name])} for name, v in groups.items()},
    }


# ---- people and a model executor together (issue 28) -----------------------------------------

JUDGE_METRIC = "board_f1"


def procedure_means(result: dict, procedures: Sequence[Procedure], metric: str = JUDGE_METRIC) -> dict[str, float]:
    """Procedure index -> the mean over its steps of `metric`, for every procedure whose every
    step `result` (score_predictions) scored; InputError for one scored in part (PPI's unit is
    the whole procedure)."""
    out = {}
    for proc in procedures:
        got = [result["per_step"].get(step_key(proc.index, s.position)) for s in proc.steps]
        if all(g is None for g in got):
            continue
        if any(g is None for g in got):
            step = next(s.position for s, g in zip(proc.steps, got) if g is None)
            raise InputError(
                f"procedure {proc.index} has no prediction for step {step}: beside a judge, executions "
                "are scored a whole procedure at a time",
                field="step",
            )
        out[proc.index] = sum(g[metric] for g in got) / len(got)
    return out


def with_judge(human: dict[str, float], judge: dict[str, float], half_width: float) -> dict:
    """`judge_agreement`, `ppi` and `plan` over the procedures in `judge` (every one a model
    executor executed): `human` people's value on those people executed (a random sample, the
    assumption), `judge` the executor's on each (judged.judged_summary)."""
    from app.leaderboards.judged import judged_summary

    return judged_summary(human, judge, half_width, "procedure")


def judged(
    procedures: Sequence[Procedure], human: dict[str, float], judge: dict[str, float], half_width: float
) -> dict:
    """People's values (procedure_means of their executions of a sample of procedures) and a
    model executor's (of every procedure) together: with_judge over every procedure, and per
    instructor where the procedures have several."""
    missing = [p.index for p in procedures if p.index not in judge]
    if missing:
        raise InputError(
            f"the judge has no prediction for procedure {missing[0]}: PPI needs it on every one", field="index"
        )
    out = with_judge(human, judge, half_width)
    instructors = sorted({p.instructor_id for p in procedures})
    if len(instructors) > 1:
        out["by_instructor"] = {
            who: with_judge(
                {p.index: human[p.index] for p in procedures if p.instructor_id == who and p.index in human},
                {p.index: judge[p.index] for p in procedures if p.instructor_id == who},
                half_width,
            )
            for who in instructors
        }
    return out
