"""People and an automatic judge together (issue 28): one table shape for every kind whose items
a judge can score without people (STS: the simulator; navigation: a listener ensemble; A3DS:
model listeners). Per agent: people's mean on the units they judged, the judge's over every
unit, their agreement, PPI++ from both (stats.ppi_mean), what it is worth in people's
judgements, and how many units people must judge for a target interval
(stats.ppi_people_needed)."""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any

from app.leaderboards import stats
from app.leaderboards.rows import plan_cell

PLAN_HALF_WIDTH = 0.05  # the interval a plan is made for by default: ±5 points on a 0-1 scale


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
        "ppi": (
            {"text": "—", "reason": ppi["reason"]}
            if ppi["low"] is None
            else {k: ppi[k] for k in ("mean", "low", "high", "method")} | {"n": len(both) + len(only)}
        ),
        "worth": None if ppi["effective_n"] is None else round(ppi["effective_n"], 1),
        "plan": plan_cell(plan),
    }


def judged_table(
    key: str,
    rows: list[dict[str, Any]],
    *,
    judge: str,
    unit: str,
    measure: str,
    agent: tuple[str, str],
    note: str,
) -> dict[str, Any]:
    """The table around judged_row's rows (each with the agent's name under "agent"): `judge`
    names the judge ("the simulator"), `unit` one judged thing ("continuation"), `measure` what
    people give ("success share"), `agent` the first column's label and help, `note` how the
    judge judges (the common part of the note follows it)."""
    units = f"{unit}s"
    whose = f"{judge}'" if judge.endswith("s") else f"{judge}'s"  # "the model listeners'"
    return {
        "key": key,
        "title": f"People and {judge} together (PPI++, {measure} 0-1)",
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
