"""People and the listener ensemble together (issue 28): the navigation kind's automatic judge.

A generation run reranked by listeners (docs/kinds/navigation-generation.md) has each listener
follow every candidate instruction M times; the share of those rollouts of an item's chosen
instruction that reach the goal is the ensemble's success rate on it, known for every item the
run made. People follow some of the items; per speaker, PPI++ (stats.ppi_mean) estimates the
success rate people would give over all of them, and a power analysis says how many people's
instructions a target interval needs (stats.ppi_people_needed)."""

from __future__ import annotations

from collections.abc import Mapping

from sqlalchemy import case, func, select
from sqlalchemy.orm import Session

from app.kinds.navigation.models import Candidate, Rollout
from app.leaderboards import stats
from app.leaderboards.rows import plan_cell
from app.studies.models import Item, Study

PLAN_HALF_WIDTH = 0.05


def ensemble_success(session: Session, study: Study) -> dict[int, tuple[str, float]]:
    """Item id -> (speaker, the listeners' success rate on its chosen instruction), for the
    study's items made by a run with listeners (the item's reference names its run, path and
    candidate)."""
    wanted: dict[tuple[int, str, int], tuple[int, str]] = {}
    for item_id, speaker, path_key, ref in session.execute(
        select(Item.id, Item.category, Item.cluster, Item.reference).where(
            Item.study_id == study.id, Item.is_gold.is_(False), Item.source == "agent"
        )
    ):
        ref = ref or {}
        if isinstance(ref.get("generation_run"), int) and isinstance(ref.get("candidate"), int):
            wanted[(ref["generation_run"], path_key, ref["candidate"])] = (item_id, speaker)
    if not wanted:
        return {}
    rates = session.execute(
        select(Candidate.run_id, Candidate.path_key, Candidate.k, func.avg(case((Rollout.success, 1.0), else_=0.0)))
        .join(Rollout, Rollout.candidate_id == Candidate.id)
        .where(Candidate.run_id.in_({run for run, _, _ in wanted}))
        .group_by(Candidate.run_id, Candidate.path_key, Candidate.k)
    )
    out: dict[int, tuple[str, float]] = {}
    for run_id, path_key, k, rate in rates:
        if (hit := wanted.get((run_id, path_key, k))) is not None:
            out[hit[0]] = (hit[1], float(rate))
    return out


def judge_table(session: Session, study: Study, people_sr: Mapping[str, Mapping[int, list[float]]]) -> dict | None:
    """The table, or None where no item has a listener ensemble's verdict. `people_sr`: speaker
    -> item -> its valid followers' successes (0/1), as the metrics table counts them."""
    judge = ensemble_success(session, study)
    if not judge:
        return None
    rows = []
    for speaker in sorted({s for s, _ in judge.values()}):
        mine = {item: rate for item, (s, rate) in judge.items() if s == speaker}
        followed = {item: vals for item, vals in people_sr.get(speaker, {}).items() if item in mine and vals}
        human = [sum(v) / len(v) for v in followed.values()]
        judged = [mine[item] for item in followed]
        judge_only = [rate for item, rate in mine.items() if item not in followed]
        ppi = stats.ppi_mean(human, judged, judge_only, unit="instruction")
        cell: dict = (
            {"text": "—", "reason": ppi["reason"]}
            if ppi["low"] is None
            else {k: ppi[k] for k in ("mean", "low", "high", "method")} | {"n": len(mine)}
        )
        plan = (
            stats.ppi_people_needed(human, judged, len(mine), PLAN_HALF_WIDTH, unit="instruction")
            if human
            else {"reason": "no instruction of this speaker followed yet"}
        )
        rows.append(
            {
                "speaker": speaker,
                "people": ppi["people"] if human else None,
                "judged": len(mine),
                "listeners": sum(mine.values()) / len(mine),
                "agreement": stats.mean_interval([1 - abs(h - j) for h, j in zip(human, judged)]).as_dict()
                if human
                else None,
                "ppi": cell,
                "worth": None if ppi["effective_n"] is None else round(ppi["effective_n"], 1),
                "plan": plan_cell(plan),
            }
        )
    return {
        "key": "navigation_ppi",
        "title": "People and the listener ensemble together (PPI++, success rate 0-1)",
        "note": (
            "A generation run with listeners has each of them follow every instruction it made; their "
            "share of rollouts that reach the goal is the ensemble's success rate on the instruction. "
            "People follow some of the instructions. PPI++ (prediction-powered inference, Angelopoulos et "
            "al. 2023, its weight tuned from the data, so a poor judge counts for about nothing) "
            "estimates the success rate people would give over all of the speaker's instructions: "
            "unbiased whatever the listeners' errors, if the instructions people followed are a random "
            'sample. Unit: the instruction (one per path). "—" where people followed every '
            f"instruction (nothing to add), fewer than {stats.MIN_PPI_HUMAN}, or no spread at all."
        ),
        "columns": [
            {"key": "speaker", "label": "Speaker", "help": "Who wrote the instructions (a generation run's speaker)."},
            {
                "key": "people",
                "label": "People only",
                "help": "SR (0-1) over the instructions people followed: per instruction the mean of its "
                "followers, with its 95% interval (instructions as units).",
            },
            {
                "key": "judged",
                "label": "Judged",
                "help": "The speaker's instructions the listener ensemble followed: all of the run's.",
            },
            {
                "key": "listeners",
                "label": "Listeners only",
                "help": "The ensemble's success rate (0-1) over all of the speaker's instructions.",
            },
            {
                "key": "agreement",
                "label": "Agreement",
                "help": "1 − |people's SR − the ensemble's| (0-1), averaged over the instructions people "
                "followed, with its 95% interval.",
            },
            {
                "key": "ppi",
                "label": "PPI++",
                "help": "The SR people would give over every instruction of the speaker, from people and "
                "the ensemble together, with its 95% interval; n counts every judged instruction.",
            },
            {
                "key": "worth",
                "label": "Worth (people)",
                "help": "How many instructions followed by people the PPI++ interval is worth.",
            },
            {
                "key": "plan",
                "label": f"People for ±{PLAN_HALF_WIDTH:g}",
                "help": f"How many of the speaker's instructions people must follow, chosen at random, for a "
                f"PPI++ interval of ±{PLAN_HALF_WIDTH:g} (a power analysis with these follows as the pilot).",
            },
        ],
        "rows": rows,
    }
