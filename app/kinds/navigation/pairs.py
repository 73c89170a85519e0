"""Side by side for navigation (issue 30): two speakers' instructions for the same path, shown
as "A" and "B" (which speaker is on which side is drawn per pair and kept in the item's
reference, never on the page). The judge reads both, as a follower would before moving (Zhao,
Nguyen and Daume 2023, A.5: "read ALL of the instructions before you start moving"), and says
which would get a follower along the path better, or a tie, with an optional reason. Ratings,
which pair next and the leaderboard are the core's (app/leaderboards/side_by_side.py); this
module only says what a navigation pair is.

The upload format ("pairs") is one JSON object a line: {"scan", "path": [viewpoints],
"heading", "path_id", "first": {"speaker", "instruction"}, "second": {...}, "better":
optional "first" | "second", "id": optional}. A pair with "better" is a reference pair (a
known better side, e.g. a path's human instruction beside another path's): it measures judges.
A side's length is its instruction's words (for length control).

Two ways to judge a pair, the study option `follow` (default on, as the paper evaluates a
speaker: people follow its instructions, section 6 and A.5): the judge follows each of the two
instructions through the building in the viewer, one after the other (which first is drawn per
assignment; the page calls them 1 and 2), and then picks; each followed path is stored beside
the verdict and scored against the route as a single follow is (SR, nDTW...), so the
leaderboard shows each speaker's followed success beside its rating. With `follow=0` the judge
only reads the two instructions.
"""

from __future__ import annotations

import json
import math

from app.errors import InputError
from app.kinds.base import ImportResult, ItemSpec
from app.leaderboards.side_by_side import MODE, Pairing, drawn_swap

PAIRING = Pairing(unit="path", agent="speaker", outputs="instructions", length="words", table="navigation_pair")
PAIR_FIELDS = {"scan", "path", "heading", "path_id", "first", "second", "better", "id"}
SIDE_FIELDS = {"speaker", "instruction"}
MAX_INSTRUCTION = 2000  # characters of one side's instruction
MAX_PAIRS = 20000


def follow_option(options: dict) -> bool:
    """The study option `follow`: 1 (the default) or 0; anything else refused naming it."""
    value = options.get("follow", 1)
    if value in (None, ""):
        return True
    if isinstance(value, str) and value.strip() in ("0", "1"):
        value = int(value.strip())
    if isinstance(value, bool) or value not in (0, 1):
        raise InputError("must be 1 (follow each instruction, the default) or 0 (read them)", field="follow")
    return bool(value)


def _side(obj: object, line: int, name: str) -> tuple[str, str]:
    if not isinstance(obj, dict):
        raise InputError('must be {"speaker", "instruction"}', line=line, field=name)
    unknown = sorted(set(obj) - SIDE_FIELDS)
    if unknown:
        raise InputError(f"unknown field {unknown[0]!r}", line=line, field=f"{name}.{unknown[0]}")
    speaker, text = obj.get("speaker"), obj.get("instruction")
    if not isinstance(speaker, str) or not speaker.strip() or len(speaker) > 64:
        raise InputError("must be a name of 1-64 characters", line=line, field=f"{name}.speaker")
    if not isinstance(text, str) or not text.strip() or len(text) > MAX_INSTRUCTION:
        raise InputError(f"must be a text of 1-{MAX_INSTRUCTION} characters", line=line, field=f"{name}.instruction")
    return speaker.strip(), " ".join(text.split())


def words(text: str) -> int:
    return len(text.split())


def import_pairs(data: bytes, options: dict) -> ImportResult:
    """Every line checked (the building imported, the path a walk on it); InputError naming the
    line and field of the first bad one."""
    from app.kinds.navigation.environments import check_path
    from app.textfiles import jsonl_objects

    follow = follow_option(options)
    items: list[ItemSpec] = []
    seen: dict[str, int] = {}
    speakers: set[str] = set()
    paths: set[str] = set()
    for line, obj in jsonl_objects(data):
        unknown = sorted(set(obj) - PAIR_FIELDS)
        if unknown:
            raise InputError(f"unknown field {unknown[0]!r}", line=line, field=unknown[0])
        scan, path, path_id = obj.get("scan"), obj.get("path"), obj.get("path_id")
        if not isinstance(scan, str) or not scan:
            raise InputError("must be the building's scan id", line=line, field="scan")
        if not isinstance(path, list) or not path or not all(isinstance(v, str) and v for v in path):
            raise InputError("must be a list of viewpoint ids", line=line, field="path")
        if isinstance(path_id, bool) or not isinstance(path_id, (str, int)) or path_id == "":
            raise InputError("must be the path's id", line=line, field="path_id")
        heading = obj.get("heading", 0.0)
        if isinstance(heading, bool) or not isinstance(heading, (int, float)) or not math.isfinite(heading):
            raise InputError("must be a number (radians)", line=line, field="heading")
        check_path(scan, path, f"path_id {path_id}", line=line)
        first, second = _side(obj.get("first"), line, "first"), _side(obj.get("second"), line, "second")
        if first[0] == second[0]:
            raise InputError("the two sides must be different speakers", line=line, field="second.speaker")
        better = obj.get("better")
        if better not in (None, "first", "second"):
            raise InputError(f'must be "first" or "second", not {json.dumps(better)}', line=line, field="better")
        unit = f"{scan}:{path_id}"
        pid = str(obj.get("id") or f"{unit}/{first[0]}/{second[0]}")
        if pid in seen:
            raise InputError(f"the pair {pid!r} is already on line {seen[pid]}", line=line, field="id")
        seen[pid] = line
        if len(seen) > MAX_PAIRS:
            raise InputError(f"more than {MAX_PAIRS} pairs", line=line)
        swap = drawn_swap("navigation-pair", pid)
        a, b = (second, first) if swap else (first, second)
        known = None
        if better is not None:
            known = "a" if (better == "first") != swap else "b"
        else:
            speakers.update((first[0], second[0]))
            paths.add(unit)
        items.append(
            ItemSpec(
                external_id=pid,
                payload={
                    "mode": MODE,
                    "scan": scan,
                    "start": path[0],
                    "heading": float(heading),
                    "instruction_a": a[1],
                    "instruction_b": b[1],
                    **({"follow": True} if follow else {}),
                },
                reference={
                    "mode": MODE,
                    "path": unit,
                    "route": list(path),
                    "a": {"agent": a[0], "length": words(a[1])},
                    "b": {"agent": b[0], "length": words(b[1])},
                    "better": known,
                },
                is_gold=known is not None,
                source="reference" if known is not None else "agent",
                category="pairs",
                cluster="" if known is not None else unit,
                # As when following: nobody judges two pairs of one path (they would know it).
                exclusion_group=unit,
            )
        )
    if not items:
        raise InputError("the file holds no pairs", field="file")
    if not speakers:
        raise InputError("every pair is a reference pair: there are no speakers to rate", field="better")
    return ImportResult(
        items=items,
        kind_settings={"mode": MODE, "control_length": bool(options.get("control_length")), "follow": follow},
        summary={
            "pairs": len(items),
            "reference": sum(i.is_gold for i in items),
            "speakers": sorted(speakers),
            "paths": len(paths),
        },
    )


def public_view(payload: dict) -> dict:
    """What the judge's page gets: the two instructions, nothing of their speakers; to follow
    them, where the walk starts too (never the route)."""
    view = {"mode": MODE, "instruction_a": payload["instruction_a"], "instruction_b": payload["instruction_b"]}
    if payload.get("follow"):
        view.update({k: payload[k] for k in ("follow", "scan", "start", "heading")})
    return view


def follow_order(assignment_id: int | None) -> tuple[str, str]:
    """Which side the judge follows first ("1" on the page): a fair coin per assignment (a bit
    of the SHA-256 of its id), so that over judges each side of a pair comes first about as
    often, and a reload shows the same order."""
    if assignment_id is None:
        return ("a", "b")
    return ("b", "a") if drawn_swap("navigation-follow-order", str(assignment_id)) else ("a", "b")
