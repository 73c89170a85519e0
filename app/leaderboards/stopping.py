"""Auto-pause (issue 29, "Stop"): the researcher marks the comparisons they care about (pairs of
agents); the sweeper (every minute, with adaptive allocation's job) pauses the live study once
every marked one is settled in the settled table (app/leaderboards/settled.py: the same
verdicts, at the same level, so "settled" here is what the page says). The confidence sequences
hold at every n, so stopping at the first n they settle keeps their level. Recorded: the time
(Study.auto_paused_at) and the audit log (study.auto_paused, with the verdicts).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from app import audit
from app.errors import InputError
from app.leaderboards import sequential
from app.leaderboards.ranking import item_agents
from app.leaderboards.settled import DELTA, verdict_text
from app.db import utcnow
from app.studies.models import Study

__all__ = ["MAX_MARKS", "agents", "status", "set_marks", "check"]

#: Marks a study may have (every pair of 20 agents is 190).
MAX_MARKS = 200


def agents(session: Session, study: Study) -> list[str] | None:
    """The study's agents (None: its kind ranks none, so nothing can be marked)."""
    from app.kinds import get_kind

    ranking = get_kind(study.kind).ranking_for(study.kind_settings)
    if ranking is None:
        return None
    return sorted({a for a in item_agents(session, study, ranking).values() if a is not None})


def status(session: Session, study: Study) -> dict[str, Any]:
    """The marks and where each stands: {"pairs": [{"first", "second", "state", "verdict"}],
    "settled": every marked one is, "paused_at": when the study paused itself (or None),
    "agents": the agents one may mark}."""
    from app.kinds import get_kind

    names = agents(session, study) or []
    marks = [tuple(p) for p in study.auto_pause or []]
    pairs: list[dict[str, Any]] = []
    if marks and len(names) > 1:
        got = get_kind(study.kind).ranking_arrivals(session, study) or {}
        kind = get_kind(study.kind)
        unit = kind.ranking_for(study.kind_settings).unit
        result = sequential.settle({a: got.get(a, []) for a in names}, DELTA)
        by_pair = {frozenset((p["first"], p["second"])): p for p in result["pairs"]}
        for a, b in marks:
            p = by_pair.get(frozenset((a, b)))
            if p is None:  # an agent gone since it was marked: open
                pairs.append({"first": a, "second": b, "state": sequential.OPEN, "verdict": "no longer in the study"})
                continue
            pairs.append({"first": a, "second": b, "state": p["verdict"], "verdict": verdict_text(p, unit, DELTA)})
    return {
        "pairs": pairs if marks else [],
        "settled": bool(pairs) and all(p["state"] != sequential.OPEN for p in pairs),
        "paused_at": study.auto_paused_at.isoformat() if study.auto_paused_at else None,
        "agents": names,
    }


def set_marks(session: Session, study: Study, marks: list[list[str]], actor_id: int | None) -> dict[str, Any]:
    """Mark these comparisons (each two different agents of the study); none turns auto-pause
    off. Audited; a study that paused itself before may pause itself again."""
    names = agents(session, study)
    if names is None:
        raise InputError("auto-pause needs a kind that ranks agents by people's judgements", field="pairs")
    if len(marks) > MAX_MARKS:
        raise InputError(f"at most {MAX_MARKS} comparisons may be marked", field="pairs")
    seen: list[list[str]] = []
    for pair in marks:
        if len(pair) != 2 or pair[0] == pair[1]:
            raise InputError("each comparison is two different agents", field="pairs")
        for a in pair:
            if a not in names:
                raise InputError(
                    f"{a!r} is not an agent of this study ({', '.join(names) or 'none yet'})", field="pairs"
                )
        if sorted(pair) not in [sorted(p) for p in seen]:
            seen.append(list(pair))
    study.auto_pause = seen or None
    study.auto_paused_at = None
    audit.record(session, actor_id, "study.auto_pause", "study", study.id, pairs=seen)
    session.commit()
    return status(session, study)


def check(session: Session, study: Study) -> bool:
    """Pause the live study when every marked comparison is settled (the sweeper's job);
    whether it paused it. Once per marking: a study the researcher launched again after it
    paused itself stays live until they mark again. The caller commits."""
    if study.state != "live" or not study.auto_pause or study.auto_paused_at is not None:
        return False
    now = status(session, study)
    if not now["settled"]:
        return False
    study.state = "paused"
    study.auto_paused_at = utcnow()
    audit.record(
        session,
        None,
        "study.auto_paused",
        "study",
        study.id,
        previous="live",
        verdicts=[p["verdict"] for p in now["pairs"]],
    )
    return True
