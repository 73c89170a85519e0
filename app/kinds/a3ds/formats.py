"""What the reference game reads: captioned pairs (JSONL, one {"target", "distractor",
"caption"} a line, optionally "captioner" and "id") and study designs (JSON: which pairs, which
built-in speakers)."""

from __future__ import annotations

from dataclasses import dataclass

from app.errors import InputError
from app.kinds.a3ds.scenes import Pair, check_id, design_pairs
from app.kinds.a3ds.speakers import SPEAKERS, speak
from app.textfiles import decode_upload, jsonl_objects

MAX_CAPTION = 1000
MAX_NAME = 64


@dataclass
class CaptionedPair:
    pair: Pair
    caption: str
    captioner: str
    id: str
    design: str = "imported"


def _text(obj: dict, key: str, line: int, limit: int, default: str | None = None) -> str:
    value = obj.get(key, default)
    if not isinstance(value, str) or not value.strip():
        raise InputError(f"{key} must be a non-empty string", line=line, field=key)
    if len(value) > limit:
        raise InputError(f"{key} is longer than {limit} characters", line=line, field=key)
    return value.strip()


def parse_pairs(data: bytes | str) -> list[CaptionedPair]:
    out, seen = [], set()
    for line, obj in jsonl_objects(data):
        ids = []
        for key in ("target", "distractor"):
            if key not in obj:
                raise InputError(f"missing {key}", line=line, field=key)
            try:
                ids.append(check_id(obj[key], key))
            except InputError as exc:
                raise InputError(exc.message, line=line, field=key) from None
        if ids[0] == ids[1]:
            raise InputError("target and distractor are the same scene", line=line, field="distractor")
        caption = _text(obj, "caption", line, MAX_CAPTION)
        captioner = _text(obj, "captioner", line, MAX_NAME, "imported")
        ident = str(obj.get("id", line))
        if ident in seen:
            raise InputError(f"id {ident!r} appears twice", line=line, field="id")
        seen.add(ident)
        out.append(CaptionedPair(Pair(*ids), caption, captioner, ident))
    if not out:
        raise InputError("the file holds no pairs", field="file")
    return out


def parse_design(data: bytes | str) -> tuple[list[CaptionedPair], int, int]:
    """A design: {"pairs": {"random": n, "z": {"1": n, ...}, "named": [...]}, "speakers":
    [...], "seed": 0, "gold": n} -> every pair captioned by every speaker (so captioners are
    compared on the same pairs), the seed, and how many gold pairs to add."""
    import json

    from app import jsonsafe

    try:
        design = jsonsafe.loads(decode_upload(data))
    except json.JSONDecodeError as exc:
        raise InputError(f"the design is not valid JSON: {exc.msg}", line=exc.lineno) from None
    if not isinstance(design, dict):
        raise InputError("the design is a JSON object", field="design")
    unknown = set(design) - {"pairs", "speakers", "seed", "gold"}
    if unknown:
        raise InputError("unknown design entry", field=sorted(unknown)[0])
    seed = design.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**31:
        raise InputError("seed is a whole number from 0 to 2^31 - 1", field="seed")
    speakers = design.get("speakers", list(SPEAKERS[:3]))
    if (
        not isinstance(speakers, list)
        or not speakers
        or any(s not in SPEAKERS for s in speakers)
        or len(set(speakers)) != len(speakers)
    ):
        raise InputError(f"speakers: distinct names from {', '.join(SPEAKERS)}", field="speakers")
    gold = design.get("gold", 0)
    if isinstance(gold, bool) or not isinstance(gold, int) or not 0 <= gold <= 1000:
        raise InputError("gold is a whole number from 0 to 1000", field="gold")
    pairs_spec = design.get("pairs")
    if not isinstance(pairs_spec, dict):
        raise InputError('pairs is an object: {"random": n, "z": {"1": n, ...}, "named": [...]}', field="pairs")
    pairs = design_pairs(pairs_spec, seed)
    if not pairs:
        raise InputError("the design asks for no pairs", field="pairs")
    out = [
        CaptionedPair(p, speak(s, p, seed), s, f"{k}-{s}", how) for k, (how, p) in enumerate(pairs) for s in speakers
    ]
    return out, seed, gold
