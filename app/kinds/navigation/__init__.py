"""Navigation following (Zhao, Nguyen & Daume 2023): people and listener models follow a
speaker's instruction through a Matterport3D building; their path is scored against the
intended one (success, SPL, nDTW, SDTW, path length).

This package holds the pure navigation core for now, with no database and no web:

- `graph`: connectivity graphs of the buildings, all-pairs shortest paths computed once;
- `metrics`: the DESIGN section 6 metrics of one trajectory against its reference path;
- `formats`: R2R paths, R2R leaderboard predictions, PanGEA pose traces, coop speaker outputs;
- `score`: scoring a predictions file against R2R references (the `proctor nav score` core).

- `environments`: buildings stored in the platform (blob store + `Environment` rows);
- `views`: the building data a follower's page walks through (/env/<scan>/view.json).

This module declares the task kind (`KIND`). See docs/kinds/navigation.md.
"""

from __future__ import annotations

import json
from typing import Annotated, ClassVar

from pydantic import BaseModel, Field

from app.errors import InputError
from app.kinds.base import ImportResult, ItemSpec, TaskKind
from app.kinds.navigation import metrics
from app.kinds.navigation.environments import get_graph
from app.kinds.navigation.formats import parse_coop_greedy, parse_r2r

MAX_PATH = 500  # viewpoints a follower may visit in one session
MAX_TRACE = 20000  # pose-trace frames (about 30 minutes at 10 per second)

INSTRUCTIONS = (
    "Read all of the instruction before you move. Then follow it as closely as you can: "
    "look around with the arrow keys (or drag the view) and walk to the highlighted spot "
    "with Enter (or double-click a marker). Do not explore, and do not wander back and forth "
    "unless you are lost. When you think you have arrived, press Stop here (key s) and say "
    "how easy the instruction was to follow (keys 1-4, Enter to go on).")

RATINGS = (
    (1, "I couldn't follow any part of the instruction"),
    (2, "Hard: I could follow only parts of the instruction and had to guess the rest"),
    (3, "Fairly easy: the instruction was mostly clear, with some missing or confusing details"),
    (4, "Very easy, the instructions gave accurate and sufficient information"),
)

Pose = tuple[Annotated[str, Field(min_length=1, max_length=64)], float, float, float]


class NavigationResponse(BaseModel):
    path: list[Annotated[str, Field(min_length=1, max_length=64)]] = Field(min_length=1, max_length=MAX_PATH)
    trace: list[Pose] = Field(default_factory=list, max_length=MAX_TRACE)
    rating: int = Field(ge=1, le=4)


def _json_field(data: dict, name: str) -> None:
    """The page's form sends path and trace as JSON strings."""
    value = data.get(name)
    if isinstance(value, str):
        try:
            data[name] = json.loads(value) if value.strip() else []
        except json.JSONDecodeError:
            raise InputError(f"{name} is not valid JSON", field=name) from None


def _check_path(scan: str, path, label: str) -> None:
    """The building must be imported and the path a walk on its graph."""
    try:
        graph = get_graph(scan)
    except InputError as e:
        raise InputError(f"{label}: {e.message}", field="scan") from None
    try:
        graph.check_walk(path, field="path")
    except InputError as e:
        raise InputError(f"{label}: {e.message}", field="path") from None


class Navigation(TaskKind):
    name: ClassVar[str] = "navigation"
    title: ClassVar[str] = "Navigation following"
    item_template: ClassVar[str] = "kinds/navigation/item.html"
    Response = NavigationResponse
    category_label: ClassVar[str] = "speaker"
    item_noun: ClassVar[str] = "Instruction"
    keyboard_hint: ClassVar[str] = ("Left/right arrows: look around; Enter: walk to the highlighted "
                                    "marker; s: stop; 1-4: rate; Enter: next.")
    item_formats: ClassVar[tuple[str, ...]] = ("r2r", "coop")
    default_instructions: ClassVar[str] = INSTRUCTIONS
    ratings: ClassVar[tuple[tuple[int, str], ...]] = RATINGS

    def parse_response(self, data: dict, payload: dict | None = None) -> dict:
        data = dict(data)
        for name in ("path", "trace"):
            _json_field(data, name)
        parsed = super().parse_response(data)
        if payload is not None:
            path = parsed["path"]
            if path[0] != payload["start"]:
                raise InputError(f"the path starts at {path[0]!r}, not at the start {payload['start']!r}",
                                 field="path")
            graph = get_graph(payload["scan"])
            graph.check_walk(path, field="path")  # every step crosses one edge (or stays)
            for k, pose in enumerate(parsed["trace"]):
                if pose[0] not in graph:
                    raise InputError(f"trace[{k}] names viewpoint {pose[0]!r}, not in this building",
                                     field="trace")
        parsed["trace"] = [list(p) for p in parsed["trace"]]
        return parsed

    def public_payload(self, payload: dict) -> dict:
        return {k: payload[k] for k in ("instruction", "scan", "start", "heading")}

    def score_details(self, payload, reference, response):
        if not reference:
            return None
        return metrics.score_trajectory(get_graph(payload["scan"]), reference["path"], response["path"])

    def score(self, payload, reference, response):
        details = self.score_details(payload, reference, response)
        return None if details is None else (1.0 if details["success"] else 0.0)

    def import_items(self, data: bytes, fmt: str, options: dict) -> ImportResult:
        if fmt == "r2r":
            return self._import_r2r(data)
        if fmt == "coop":
            return self._import_coop(data, options)
        raise InputError(f"unknown format {fmt!r}: use r2r or coop", field="format")

    def _import_coop(self, data: bytes, options: dict) -> ImportResult:
        """A coop greedy speaker file: one item per generated instruction (source "agent",
        category the speaker's name), the human-written QC episode (key "0") as a gold item,
        and (option with_references, default on) each path's first human reference instruction.
        A path's items share one exclusion group: nobody follows two instructions of a path."""
        speaker = options.get("speaker", "speaker")
        if not isinstance(speaker, str) or not speaker.strip() or len(speaker) > 64:
            raise InputError("the speaker's name must be 1-64 characters", field="speaker")
        speaker = speaker.strip()
        if speaker == "human":
            raise InputError("\"human\" names the human references; choose another speaker name",
                             field="speaker")
        with_refs = bool(options.get("with_references", True))
        parsed = parse_coop_greedy(data)
        items: list[ItemSpec] = []
        seen: dict[str, str] = {}
        for out in (parsed.qc_episode, *parsed.outputs):
            label = f"key {out.key!r}"
            _check_path(out.scan, out.path, label)
            group = f"{out.scan}:{out.path_id}"
            payload = {"scan": out.scan, "start": out.path[0], "heading": out.heading}
            reference = {"path": list(out.path)}
            if out is parsed.qc_episode:
                items.append(ItemSpec(external_id="qc", payload={"instruction": out.generated_instr, **payload},
                                      reference=reference, is_gold=True, source="human",
                                      category="human", cluster="", exclusion_group=group))
                continue
            if group in seen:
                raise InputError(f"{label}: path {out.path_id} of {out.scan} repeats key {seen[group]!r}",
                                 field="path_id")
            seen[group] = out.key
            items.append(ItemSpec(external_id=f"{speaker}:{out.key}",
                                  payload={"instruction": out.generated_instr, **payload},
                                  reference=reference, source="agent", category=speaker,
                                  cluster=group, exclusion_group=group))
            if with_refs:
                refs = [t for t in out.instructions if t.strip()]
                if not refs:
                    raise InputError(f"{label}: no human reference instruction", field="instructions")
                items.append(ItemSpec(external_id=f"{out.path_id}_0",
                                      payload={"instruction": refs[0], **payload},
                                      reference=reference, source="human", category="human",
                                      cluster=group, exclusion_group=group))
        return ImportResult(items=items, kind_settings={"speakers": [speaker]}, summary={
            "paths": len(seen), "instructions": len(items), "speaker": speaker,
            "scans": sorted({o.scan for o in parsed.outputs})})

    def _import_r2r(self, data: bytes) -> ImportResult:
        paths = parse_r2r(data)
        items: list[ItemSpec] = []
        for p in paths:
            _check_path(p.scan, p.path, f"path_id {p.path_id}")
            group = f"{p.scan}:{p.path_id}"
            for k, text in enumerate(p.instructions):
                if not text.strip():
                    raise InputError(f"path_id {p.path_id}: instruction {k} is empty", field="instructions")
                items.append(ItemSpec(
                    external_id=f"{p.path_id}_{k}",
                    payload={"instruction": text, "scan": p.scan, "start": p.path[0], "heading": p.heading},
                    reference={"path": list(p.path)}, source="human", category="human",
                    cluster=group, exclusion_group=group))
        return ImportResult(items=items, summary={
            "paths": len(paths), "instructions": len(items),
            "scans": sorted({p.scan for p in paths})})

    def extra_leaderboard(self, session, study) -> dict | None:
        from app.kinds.navigation.leaderboard import section

        return section(session, study)

    def import_agent_outputs(self, data: bytes, known_ids: set[str]) -> dict[str, dict]:
        raise InputError("importing a speaker's instructions is not yet supported", field="file")

    def demo(self) -> dict:
        """A generated house with 12 sampled paths and grammar instructions (one per path)."""
        from app.kinds.navigation.environments import import_house
        from app.kinds.navigation.grammar import describe_path
        from app.kinds.navigation.house import generate_house, sample_paths, to_r2r

        house = generate_house(seed=3)
        paths = sample_paths(house, 12, rng=3)
        instructions = [describe_path(house, p, rng=100 + k, n=1) for k, p in enumerate(paths)]
        return {"items": json.dumps(to_r2r(house, paths, instructions)).encode(), "format": "r2r",
                "setup": lambda session: import_house(session, house),
                "simulate": False,
                "settings": {"bundle_size": 6, "gold_rate": 0.0, "annotations_per_item": 3,
                             "instructions": INSTRUCTIONS}}


KIND = Navigation()
