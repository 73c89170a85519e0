"""People and an automatic judge together (issue 28): one table shape for every kind whose items
a judge can score without people (STS: the simulator; navigation: a listener ensemble; A3DS:
model listeners). Per agent: people's mean on the units they judged, the judge's over every
unit, their agreement, PPI++ from both (stats.ppi_mean), what it is worth in people's
judgements, and how many units people must judge for a target interval
(stats.ppi_people_needed)."""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any, TypedDict, Unpack

from app.leaderboards import stats
from app.leaderboards.rows import plan_cell
from app.leaderboards.stats import PLAN_HALF_WIDTH


def judged_row(
    human: Mapping[Hashable, float],
    judge: Mapping[Hashable, float],
    unit: str,
    half_width: float = PLAN_HALF_WIDTH,
) -> dict[str, Any]:
    """One agent's cells: `human` unit -> people's value (0-1) where people judged it, `judge`
    unit -> the judge's value (0-1) on every unit it judged. Units people judged but the judge
    did not are left out (PPI needs both on people's units)."""
    both = [u for u in human if u in judge]
    people = [float(human[u]) for u in both]
    judged = [float(judge[u]) for u in both]
    only = [float(v) for u, v in judge.items() if u not in human]
    ppi = stats.ppi_mean(people, judged, only, unit=unit)
    plan = (
        stats.ppi_people_needed(people, judged, len(judge), half_width, unit=unit)
        if people
        else {"reason": f"no {unit} judged by people yet"}
    )
    return {
        "people": ppi["people"] if people else None,
        "judged": len(judge),
        "judge": sum(judge.values()) / len(judge) if judge else None,
        "agreement": stats.mean_interval([1 - abs(h - j) for h, j in zip(people, judged)]).as_dict()
        if people
        else None,
        **_ppi_cells(ppi, len(both) + len(only)),
        "plan": plan_cell(plan),
    }


def judged_summary(
    human: Mapping[Hashable, float], judge: Mapping[Hashable, float], half_width: float, unit: str
) -> dict[str, Any]:
    """An offline scorer's people-and-judge figures (JSON): `judge`'s mean over its units,
    `judge_agreement`, `ppi` (stats.ppi_mean, its n as `n_human`) and `plan`
    (stats.ppi_people_needed), from `human` people's value on the units they judged (a random
    sample, the assumption) and `judge` the judge's on every unit."""
    seen = [u for u in human if u in judge]
    people, theirs = [float(human[u]) for u in seen], [float(judge[u]) for u in seen]
    only = [float(v) for u, v in judge.items() if u not in human]
    ppi = stats.ppi_mean(people, theirs, only, unit=unit)
    ppi["n_human"] = ppi.pop("n")
    return {
        "judge": sum(judge.values()) / len(judge) if judge else None,
        "judge_agreement": stats.mean_interval([1 - abs(h - j) for h, j in zip(people, theirs)]).as_dict()
        if people
        else None,
        "ppi": ppi,
        "plan": stats.ppi_people_needed(people, theirs, len(judge), half_width, unit=unit)
        if people
        else {"reason": f"no {unit} judged by people"},
    }


def _ppi_cells(est: Mapping[str, Any], n: int) -> dict[str, Any]:
    """The PPI++ estimate's cell (or "—" with the reason) and what it is worth in people's units."""
    return {
        "ppi": (
            {"text": "—", "reason": est["reason"]}
            if est["low"] is None
            else {k: est[k] for k in ("mean", "low", "high", "method")} | {"n": n}
        ),
        "worth": None if est["effective_n"] is None else round(est["effective_n"], 1),
    }


class Words(TypedDict):
    """How a judged table says what it is about: `judge` names the judge ("the simulator"),
    `unit` one judged thing ("continuation"), `measure` what people give ("success share"),
    `agent` the first column's label and help, `note` how the judge judges (the common part of
    the note follows it)."""

    judge: str
    unit: str
    measure: str
    agent: tuple[str, str]
    note: str


def judged_table(key: str, rows: list[dict[str, Any]], per: str = "", **words: Unpack[Words]) -> dict[str, Any]:
    """The table around judged_row's rows (each with the agent's name under "agent"), in `words`;
    `per` names the groups of units the rows are (a "z", a "category") where they are not agents."""
    judge, unit, measure, agent, note = words["judge"], words["unit"], words["measure"], words["agent"], words["note"]
    units = f"{unit}s"
    whose = f"{judge}'" if judge.endswith("s") else f"{judge}'s"  # "the model listeners'"
    return {
        "key": key,
        "title": f"People and {judge} together (PPI++, {measure} 0-1)" + (f", per {per}" if per else ""),
        "note": (
            f"{note} PPI++ (prediction-powered inference, Angelopoulos et al. 2023, with its weight tuned "
            f"from the data, so a poor judge counts for about nothing) estimates the {measure} people "
            f"would give over all the agent's {units}, from people's values and {whose}: unbiased "
            f'whatever {whose} errors, if the {units} people judged are a random sample. "—" where '
            f"people judged every {unit} (nothing to add), fewer than {stats.MIN_PPI_HUMAN}, or no "
            "spread at all."
        ),
        "columns": [
            {"key": "agent", "label": agent[0], "help": agent[1]},
            {
                "key": "people",
                "label": "People only",
                "help": f"The {measure} (0-1) over the {units} people judged, with its 95% interval "
                f"({units} as units).",
            },
            {"key": "judged", "label": "Judged", "help": f"The agent's {units} {judge} judged."},
            {
                "key": "judge",
                "label": "Judge only",
                "help": f"The {measure} (0-1) {judge} gives over all the agent's {units} it judged.",
            },
            {
                "key": "agreement",
                "label": "Agreement",
                "help": f"1 − |people's value − {whose}| (0-1), averaged over the {units} people judged, "
                "with its 95% interval.",
            },
            {
                "key": "ppi",
                "label": "PPI++",
                "help": f"The {measure} people would give over every judged {unit}, from people and {judge} "
                f"together, with its 95% interval; n counts every judged {unit}.",
            },
            {
                "key": "worth",
                "label": "Worth (people)",
                "help": f"How many {units} judged by people the PPI++ interval is worth.",
            },
            {
                "key": "plan",
                "label": f"People for ±{PLAN_HALF_WIDTH:g}",
                "help": f"How many of the agent's {units} people must judge, chosen at random, for a PPI++ "
                f"interval of ±{PLAN_HALF_WIDTH:g} (a power analysis with these judgements as the pilot; "
                f"{judge} judges the rest).",
            },
        ],
        "rows": rows,
    }


def learned_row(
    human: Mapping[Hashable, float],
    features: Mapping[Hashable, Sequence[float]],
    unit: str,
    folds: int = stats.CROSS_FOLDS,
    seed: int = 0,
) -> dict[str, Any]:
    """One agent's cells for a judge learned from people (stats.crossppi_mean): `human` unit ->
    people's value (0-1) where people judged it, `features` unit -> what is known of it without
    people, for every unit. The predictor is cross-fitted over people's units, so its agreement is
    with people it was not trained on: the share of people's units (a tie left out) whose
    verdict (prediction >= 0.5) is people's, with its Wilson interval."""
    both = [u for u in features if u in human]
    only = [u for u in features if u not in human]
    people = [float(human[u]) for u in both]
    est = stats.crossppi_mean([features[u] for u in both], people, [features[u] for u in only], folds, seed, unit=unit)
    predicted = est["predictions"]
    agreement = None
    judge = None
    if predicted is not None:
        decided = [(h, p) for h, p in zip(people, predicted) if h != 0.5]
        hits = sum((p >= 0.5) == (h > 0.5) for h, p in decided)
        agreement = stats.proportion(hits, len(decided)).as_dict() if decided else None
        unlabelled = est["unlabelled"]
        judge = (sum(predicted) + sum(unlabelled)) / len(features)
    return {
        "people": est["people"] if people else None,
        "judged": len(features),
        "judge": judge,
        "agreement": agreement,
        **_ppi_cells(est, len(features)),
    }


def learned_table(key: str, rows: list[dict[str, Any]], **words: Unpack[Words]) -> dict[str, Any]:
    """judged_table's shape for learned_row's rows: the same columns but the plan (PPI++'s power
    analysis does not hold for a cross-fitted predictor), and its own note."""
    judge, unit, measure, note = words["judge"], words["unit"], words["measure"], words["note"]
    units = f"{unit}s"
    table = judged_table(key, rows, **words)
    table["title"] = f"People and {judge} together (cross-prediction, {measure} 0-1)"
    table["note"] = (
        f"{note} Cross-prediction-powered inference (Zrnic and Candès 2024): people's {units} are split at "
        f"random into {stats.CROSS_FOLDS} folds, each fold's {units} predicted by a model trained on the "
        f"other folds, and the {units} people did not judge by the mean of the {stats.CROSS_FOLDS} models; "
        f"the {measure} people would give over every {unit} is people's mean corrected by the predictions, "
        f"unbiased if the {units} people judged are a random sample. The predictions' weight is not tuned: "
        f'a poor predictor widens the interval. "—" where people judged every {unit}, fewer than '
        f"{stats.MIN_PPI_HUMAN}, or no spread at all."
    )
    columns = []
    for c in table["columns"]:
        if c["key"] == "plan":
            continue
        if c["key"] == "agreement":
            c = {
                **c,
                "help": f"The share of the {units} people judged (a tie left out) where the predictor's verdict "
                f"(predicted success >= 0.5, from a model not trained on that {unit}) is people's, with its 95% "
                "Wilson interval.",
            }
        if c["key"] == "ppi":
            c = {
                **c,
                "label": "Cross-PPI",
                "help": f"The {measure} people would give over every {unit}, from people and {judge} together "
                f"(cross-prediction), with its 95% interval; n counts every {unit}.",
            }
        if c["key"] == "worth":
            c = {**c, "help": f"How many {units} judged by people the cross-prediction interval is worth."}
        if c["key"] == "judge":
            c = {
                **c,
                "help": f"The mean predicted {measure} (0-1) over all the agent's {units} (cross-fitted on "
                f"people's, the models' mean elsewhere).",
            }
        columns.append(c)
    table["columns"] = columns
    return table
