"""Side by side (issue 30): a pairwise STS study. Each item is two agents' continuations of
the same scenario, shown frame-locked on one timeline as "A" and "B" (which agent is on which
side is drawn per item and kept in the item's reference, never in what the worker sees). The
judge marks each side's first moment of success or failure, as on the single page, then says
which did better, or a tie, with an optional reason. Reference pairs (an expert continuation
that succeeds beside a random one that fails, on one scenario) have a known better side and
known markers, and measure judges as reference episodes do.

The upload format ("pairs") is one JSON object a line: {"first": <continuation>, "second":
<continuation>, "reference": bool, "id": optional}; each side is a line of the
"continuations" format (formats.py) and both must be of the same scenario (level, seed,
takeover). A reference pair's better side is the one whose simulator outcome is a success
when exactly one side succeeds (else there is no known answer and the pair is refused).
"""

from __future__ import annotations

import json
import random
from typing import Literal

from pydantic import Field
from sqlalchemy.orm import Session

from app.errors import InputError
from app.kinds.base import ImportResult, ItemSpec
from app.leaderboards import side_by_side
from app.leaderboards.pairwise import Judgement
from app.leaderboards.side_by_side import MODE, SIDES, Pairing, Verdict, drawn_swap, is_pair

__all__ = ["MODE", "PAIRING", "is_pair", "import_pairs", "parse_pair", "score", "score_details", "public_view"]

PAIR_FIELDS = {"first", "second", "reference", "id"}
# Agents whose every pair a study holds, at most: k agents make k(k-1)/2 pairs a scenario.
MAX_PAIR_AGENTS = 8
# A side's length: its continuation's steps.
PAIRING = Pairing(unit="scenario", agent="agent", outputs="continuations", length="steps", table="sts_pair")


class PairResponse(Verdict):
    """The verdict, and each side's marker as on the single page."""

    a_marker: Literal["success", "failure"]
    a_step: int = Field(ge=0, le=100_000)
    b_marker: Literal["success", "failure"]
    b_step: int = Field(ge=0, le=100_000)


# --- the upload format -----------------------------------------------------------------------


def _side_reference(c) -> dict:
    return {
        "agent": c.agent,
        "continuation": c.continuation,
        "simulator": c.simulator_outcome,
        "success_step": c.success_step,
        "length": c.length,
    }


def import_pairs(data: bytes, tile: int, control_length: bool = False) -> ImportResult:
    """Every line checked and both sides replayed; InputError (line, field) on the first bad one."""
    from app.kinds.sts.env import get_simulator
    from app.kinds.sts.formats import _scenario_lengths, parse_continuation
    from app.kinds.sts.frames import MAX_FRAMES, store_strips
    from app.textfiles import jsonl_objects

    sim = get_simulator()
    lines, seen = [], {}
    for line, obj in jsonl_objects(data):
        if not isinstance(obj, dict):
            raise InputError("each line must be a JSON object", line=line)
        unknown = sorted(set(obj) - PAIR_FIELDS)
        if unknown:
            raise InputError(f"unknown field(s) {', '.join(map(repr, unknown))}", line=line, field=unknown[0])
        sides = []
        for name in ("first", "second"):
            side = obj.get(name)
            if not isinstance(side, dict):
                raise InputError("must be a continuation (a JSON object)", line=line, field=name)
            sides.append(parse_continuation({k: v for k, v in side.items() if k not in ("reference", "id")}, line, sim))
        first, second = sides
        for attr in ("scenario", "takeover"):
            if getattr(first, attr) != getattr(second, attr):
                raise InputError(f"the two sides must share the {attr}", line=line, field=f"second.{attr}")
        if (first.recording.level, first.recording.seed) != (second.recording.level, second.recording.seed):
            raise InputError("the two sides must be of the same level and seed", line=line, field="second.seed")
        if first.agent == second.agent:
            raise InputError("the two sides must be different agents", line=line, field="second.agent")
        reference = obj.get("reference", False)
        if not isinstance(reference, bool):
            raise InputError("reference must be true or false", line=line, field="reference")
        if reference and (first.success_step is None) == (second.success_step is None):
            raise InputError(
                "a reference pair has a known better side: exactly one of its continuations succeeds",
                line=line,
                field="reference",
            )
        pid = str(
            obj.get("id") or f"{first.scenario}/{first.agent}:{first.continuation}/{second.agent}:{second.continuation}"
        )
        if pid in seen:
            raise InputError(f"the pair {pid!r} is already on line {seen[pid]}", line=line, field="id")
        seen[pid] = line
        lines.append((pid, reference, first, second))
    if not lines:
        raise InputError("the file holds no pairs", field="file")
    _scenario_lengths([c for _, _, f, s in lines for c in (f, s)])
    for _, _, f, s in lines:
        length = max(f.scenario_length, s.scenario_length)
        f.scenario_length = s.scenario_length = length
        if f.takeover + length + 1 > MAX_FRAMES:
            raise InputError(
                f"{f.takeover + length + 1} frames (takeover and length); at most {MAX_FRAMES}",
                line=f.line,
                field="length",
            )
    keys = store_strips(
        [(c.recording, c.takeover + c.scenario_length + 1, c.scenario) for _, _, f, s in lines for c in (f, s)], tile
    )
    items = []
    for n, (pid, reference, first, second) in enumerate(lines):
        swap = drawn_swap("sts-pair", pid)
        key_first, key_second = keys[2 * n], keys[2 * n + 1]
        a, b, key_a, key_b = (second, first, key_second, key_first) if swap else (first, second, key_first, key_second)
        better = None
        if reference:
            better = "a" if a.success_step is not None else "b"
        items.append(
            ItemSpec(
                external_id=pid,
                payload={
                    "mode": MODE,
                    "instruction": a.instruction,
                    "frames_a_key": key_a,
                    "frames_b_key": key_b,
                    "n_frames": a.takeover + a.scenario_length + 1,
                    "takeover": a.takeover,
                    "tile": tile,
                },
                reference={
                    "mode": MODE,
                    "scenario": a.scenario,
                    "level": a.recording.level,
                    "seed": a.recording.seed,
                    "tags": a.tags,
                    "suite_version": a.suite_version,
                    "scenario_length": a.scenario_length,
                    "a": _side_reference(a),
                    "b": _side_reference(b),
                    "better": better,
                },
                is_gold=reference,
                source="reference" if reference else "agent",
                category=a.category,
                cluster=a.scenario,
            )
        )
    agents = sorted({c.agent for _, ref, f, s in lines if not ref for c in (f, s)})
    return ImportResult(
        items=items,
        kind_settings={"mode": MODE, "control_length": control_length},
        summary={
            "pairs": len(lines),
            "reference": sum(ref for _, ref, _, _ in lines),
            "agents": agents,
            "scenarios": len({f.scenario for _, _, f, _ in lines}),
        },
    )


# --- a worker's answer -----------------------------------------------------------------------


def parse_pair(data: dict, payload: dict | None) -> dict:
    parsed = side_by_side.parse_verdict(data, PairResponse)
    if payload is not None:
        last = int(payload["n_frames"]) - 1 - int(payload["takeover"])
        for side in SIDES:
            if parsed[f"{side}_step"] > last:
                raise InputError(
                    f"the continuations have {last} steps after the takeover; {side.upper()}'s marker "
                    f"is at {parsed[f'{side}_step']}",
                    field=f"{side}_step",
                )
    return parsed


score = side_by_side.score


def score_details(reference: dict | None, response: dict) -> dict | None:
    """The better side and the pick, and per side the simulator's outcome and the marker (the
    single page's sensitivity and specificity read the sides: STS auto_review)."""
    details = side_by_side.score_details(reference, response)
    if details is None or reference is None:
        return None
    return {
        **details,
        "sides": [{"truth": reference[s]["simulator"], "marker": response.get(f"{s}_marker")} for s in SIDES],
    }


def public_view(payload: dict) -> dict:
    from app.storage import get_store

    store = get_store()
    return {
        "mode": MODE,
        "instruction": payload["instruction"],
        "n_frames": payload["n_frames"],
        "takeover": payload["takeover"],
        "tile": payload["tile"],
        "frames_a_url": store.url(payload["frames_a_key"], expires_s=6 * 3600),
        "frames_b_url": store.url(payload["frames_b_key"], expires_s=6 * 3600),
    }


# --- a study from a suite version --------------------------------------------------------------


def pair_lines(single_lines: list[dict], seed: int) -> list[dict]:
    """Pairs of the suite builder's continuation lines (study.py's `_line`): every two agents'
    continuations of the same index on each scenario (matched scenarios and draws), and each
    scenario's expert success beside its random failure as a reference pair."""
    by_scenario: dict[str, list[dict]] = {}
    refs: dict[str, dict[str, dict]] = {}
    for x in single_lines:
        if x.get("reference"):
            refs.setdefault(x["scenario"], {})[x["label"]] = x
        else:
            by_scenario.setdefault(x["scenario"], []).append(x)
    out = []
    for xs in by_scenario.values():
        agents = sorted({x["agent"] for x in xs})
        for i, first in enumerate(agents):
            for second in agents[i + 1 :]:
                mine = {x["continuation"]: x for x in xs if x["agent"] == first}
                theirs = {x["continuation"]: x for x in xs if x["agent"] == second}
                for c in sorted(set(mine) & set(theirs)):
                    out.append({"first": _bare(mine[c]), "second": _bare(theirs[c])})
    for scenario, labelled in refs.items():
        if "success" in labelled and "failure" in labelled:
            out.append(
                {
                    "first": _bare(labelled["success"]),
                    "second": _bare(labelled["failure"]),
                    "reference": True,
                    "id": f"reference/{scenario}",
                }
            )
    random.Random(seed).shuffle(out)
    return out


def _bare(line: dict) -> dict:
    return {k: v for k, v in line.items() if k not in ("reference", "label", "id")}


def reference_pairs(spec: object) -> dict[str, int]:
    """A pair study's `reference`: {"pairs": k}, as k expert successes and k random failures
    (each scenario's two make one reference pair)."""
    from app.kinds.sts.models import MAX_REFERENCE

    if spec is None or spec == {}:
        return {}
    if not isinstance(spec, dict) or set(spec) - {"pairs"}:
        raise InputError('a side-by-side study\'s reference is {"pairs": k}', field="reference")
    k = spec.get("pairs", 0)
    if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k <= MAX_REFERENCE:
        raise InputError(f"pairs must be a whole number from 0 to {MAX_REFERENCE}", field="reference.pairs")
    return {"expert_successes": k, "random_failures": k} if k else {}


# --- reading the answers and which pair next: the core's (app/leaderboards/side_by_side.py) ------


def judgements(session: Session, study) -> list[Judgement]:
    return side_by_side.judgements(session, study, PAIRING)


def item_priorities(session: Session, study) -> dict[int, float]:
    return side_by_side.item_priorities(session, study, PAIRING)


def json_lines(lines: list[dict]) -> bytes:
    return "\n".join(json.dumps(x) for x in lines).encode()
