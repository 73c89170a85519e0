"""People and the model executors together (issue 28): the Hexagons kind's automatic judge.

A model executor (an uploaded or trained one run over the study, or imported predictions: an
agent's outputs) paints every procedure of the study from its instructions, as a person does;
its score on a procedure (the section's main metric, board F1 by default, averaged over the
procedure's steps) is the judge's value there, the mean over the model executors that executed
it. People execute some of the procedures; a procedure's people's value is the mean over its
valid executions. Per instructor (who wrote the procedures, the release's instructor_id) and
over every procedure, PPI++ (stats.ppi_mean) estimates the score people would get over all of
them, and a power analysis says how many procedures people must execute for a target interval
(stats.ppi_people_needed). The unit is the procedure (each counts once, whatever its steps),
where the section's metrics table weighs steps."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

from app.kinds.hexagons import metrics
from app.leaderboards.judged import judged_row, judged_table

ALL = "All procedures"
UNIT = "procedure"


def procedure_values(executions: Mapping[int, list[np.ndarray]], main: str) -> dict[int, float]:
    """Procedure id -> the mean over its executions of the mean over steps of `main`."""
    col = metrics.KEYS.index(main)
    return {i: float(np.mean([m[:, col].mean() for m in runs])) for i, runs in executions.items() if runs}


def judge_values(agents: Iterable[Mapping[int, list[np.ndarray]]], main: str) -> dict[int, float]:
    """Procedure id -> the mean of the model executors' values on it (those that executed it)."""
    by_item: dict[int, list[float]] = {}
    for executions in agents:
        for i, v in procedure_values(executions, main).items():
            by_item.setdefault(i, []).append(v)
    return {i: sum(v) / len(v) for i, v in by_item.items()}


def _words(main: str, executors: list[str]) -> dict[str, str]:
    label = metrics.LABELS[main]
    return {
        "judge": "the model executors",
        "unit": UNIT,
        "measure": label,
        "note": (
            f"The model executors ({', '.join(executors)}) paint the study's procedures from their instructions; "
            f"a procedure's judge's value is their {label} on it (mean over its steps; over the executors that "
            "executed it, their mean), people's value the mean over its human executions. The procedure is "
            "the unit here, each counted once, where the metrics table weighs steps, so the means differ where "
            "procedures have different numbers of steps."
        ),
    }


def judge_tables(
    agents: Mapping[str, Mapping[int, list[np.ndarray]]],
    people: Mapping[int, list[np.ndarray]],
    instructors: Mapping[int, str],
    categories: Mapping[int, str],
    main: str,
) -> list[dict]:
    """`hexagons_ppi` (every procedure, then per instructor where there are several) and
    `hexagons_ppi_by_category` (where there are several categories), or nothing where no model
    executor executed any procedure. `agents`: name -> procedure -> its execution matrices (steps
    x metrics.KEYS), `people` the same for every human execution pooled, `instructors` and
    `categories` per procedure of the study."""
    judge = judge_values(agents.values(), main)
    if not judge:
        return []
    human = procedure_values(people, main)

    def row(name: str, keep) -> dict:
        mine = {i: v for i, v in judge.items() if keep(i)}
        return {"agent": name, **judged_row({i: v for i, v in human.items() if keep(i)}, mine, UNIT)}

    words = _words(main, sorted(name for name, ex in agents.items() if ex))
    rows = [row(ALL, lambda i: True)]
    names = sorted({instructors.get(i, "") for i in judge})
    if len(names) > 1:
        rows += [row(n or "(unknown)", lambda i, n=n: instructors.get(i, "") == n) for n in names]
    tables = [
        judged_table(
            "hexagons_ppi",
            rows,
            agent=("Instructor", f'Who wrote the procedures (their instructor); "{ALL}": every one pooled.'),
            **words,
        )
    ]
    cats = sorted({categories.get(i, "") for i in judge})
    if len(cats) > 1:
        tables.append(
            judged_table(
                "hexagons_ppi_by_category",
                [row(c or "(none)", lambda i, c=c: categories.get(i, "") == c) for c in cats],
                per="category",
                agent=("Category", "The category of the procedures (every instructor's pooled)."),
                **words,
            )
        )
    return tables
