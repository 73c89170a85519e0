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
from app.leaderboards.judged import judged_row, judged_table
from app.studies.models import Item, Study


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
        human = {item: sum(v) / len(v) for item, v in people_sr.get(speaker, {}).items() if v}
        rows.append({"agent": speaker, **judged_row(human, mine, "instruction")})
    return judged_table(
        "navigation_ppi",
        rows,
        judge="the listener ensemble",
        unit="instruction",
        measure="success rate",
        agent=("Speaker", "Who wrote the instructions (a generation run's speaker)."),
        note=(
            "A generation run with listeners has each of them follow every instruction it made; their "
            "share of rollouts that reach the goal is the ensemble's success rate on the instruction. "
            "People follow some of the instructions; per instruction, people's value is the mean of "
            "its followers' successes."
        ),
    )


# ---- offline: `proctor navigation judged --people H --judge J` (issue 28.4) -----------------

JUDGED_LINE = '{"speaker": str, "instruction": id, "success": true|false or 0-1}'


def success_lines(data: bytes) -> dict[str, dict[str, float]]:
    """Speaker -> instruction -> the mean of its lines' success (true 1, false 0, or a rate in
    [0, 1]: a listener ensemble's share of rollouts that reach the goal; several lines of one
    instruction are several followers)."""
    from app.errors import InputError
    from app.textfiles import jsonl_objects

    values: dict[str, dict[str, list[float]]] = {}
    for line, obj in jsonl_objects(data):
        speaker, instruction, success = obj.get("speaker"), obj.get("instruction"), obj.get("success")
        if not isinstance(speaker, str) or not speaker.strip():
            raise InputError(f"speaker must be a non-empty string ({JUDGED_LINE})", line=line, field="speaker")
        if isinstance(instruction, bool) or not isinstance(instruction, (str, int)):
            raise InputError(
                f"instruction must be an id, a string or an integer ({JUDGED_LINE})", line=line, field="instruction"
            )
        if isinstance(success, bool):
            value = 1.0 if success else 0.0
        elif isinstance(success, (int, float)) and 0 <= success <= 1:
            value = float(success)
        else:
            raise InputError("success must be true, false or a rate from 0 to 1", line=line, field="success")
        values.setdefault(speaker.strip(), {}).setdefault(str(instruction), []).append(value)
    return {s: {i: sum(v) / len(v) for i, v in by.items()} for s, by in values.items()}


def judged_offline(people: dict[str, dict[str, float]], judge: dict[str, dict[str, float]], half_width: float) -> dict:
    """Per speaker the judge has: judged.judged_summary of people's success rate on the
    instructions they followed (a random sample, the assumption) and the judge's on every one.
    An instruction people followed that the judge did not is refused: PPI needs the judge there."""
    from app.errors import InputError
    from app.leaderboards.judged import judged_summary

    for speaker, by in people.items():
        missing = [i for i in by if i not in judge.get(speaker, {})]
        if missing:
            raise InputError(
                f"the judge has no value for {speaker}'s instruction {missing[0]}: PPI needs it wherever people followed",
                field="instruction",
            )
    return {s: judged_summary(people.get(s, {}), judge[s], half_width, "instruction") for s in sorted(judge)}
