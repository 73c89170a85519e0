"""Offline, people and a model listener together (issue 28.4): `proctor a3ds score --pairs P
--people H --judge literal`. People's picks on some of the captions (a random sample, the
assumption) and the built-in listener's on every caption of P give, per captioner, the listener
accuracy people would give over all of them (PPI++, app/leaderboards/judged.judged_summary), the
listener's agreement with people and how many captions people must answer for a target
interval. The unit is the caption (a line of P)."""

from __future__ import annotations

from collections.abc import Sequence

from app.errors import InputError
from app.kinds.a3ds.formats import CaptionedPair
from app.kinds.a3ds.listeners import pick
from app.leaderboards.judged import judged_summary
from app.textfiles import jsonl_objects

PEOPLE_LINE = '{"id": pair id, "right": true|false}'


def people_values(pairs: Sequence[CaptionedPair], data: bytes) -> dict[str, float]:
    """Caption id -> the share of people's picks on it that were right (several lines of one id
    are several people)."""
    known = {p.id for p in pairs}
    picks: dict[str, list[float]] = {}
    for line, obj in jsonl_objects(data):
        ident, right = obj.get("id"), obj.get("right")
        if not isinstance(ident, str) or ident not in known:
            raise InputError(f"id must name a pair of --pairs ({PEOPLE_LINE})", line=line, field="id")
        if not isinstance(right, bool):
            raise InputError("right must be true or false", line=line, field="right")
        picks.setdefault(ident, []).append(1.0 if right else 0.0)
    return {i: sum(v) / len(v) for i, v in picks.items()}


def judge_values(pairs: Sequence[CaptionedPair], listener: str) -> dict[str, float]:
    """Caption id -> 1 where the listener picks the target, 0 otherwise ("can't tell" too). The
    listener sees the target first; its rule does not depend on the order."""
    return {p.id: 1.0 if pick(listener, p.caption, [p.pair.target, p.pair.distractor]) == "1" else 0.0 for p in pairs}


def judged(pairs: Sequence[CaptionedPair], people: dict[str, float], listener: str, half_width: float) -> dict:
    """Per captioner: judged_summary over its captions."""
    judge = judge_values(pairs, listener)
    out = {}
    for name in sorted({p.captioner for p in pairs}):
        mine = [p.id for p in pairs if p.captioner == name]
        out[name] = judged_summary(
            {i: people[i] for i in mine if i in people}, {i: judge[i] for i in mine}, half_width, "caption"
        )
    return out
