"""Navigation following (Zhao, Nguyen & Daume 2023): people and listener models follow a
speaker's instruction through a Matterport3D building; their path is scored against the
intended one (success, SPL, nDTW, SDTW, path length).

This package holds the pure navigation core for now, with no database and no web:

- `graph`: connectivity graphs of the buildings, all-pairs shortest paths computed once;
- `metrics`: the DESIGN section 6 metrics of one trajectory against its reference path;
- `formats`: R2R paths, R2R leaderboard predictions, PanGEA pose traces, coop speaker outputs;
- `score`: scoring a predictions file against R2R references (the `proctor navigation score` core).

- `environments`: buildings stored in the platform (blob store + `Environment` rows);
- `views`: the building data a follower's page walks through (/env/<scan>/view.json).

This module declares the task kind (`KIND`). See docs/kinds/navigation.md.
"""

from __future__ import annotations

import json
import math
from typing import Annotated, ClassVar, Literal

from pydantic import BaseModel, Field

from app import jsonsafe
from app.errors import InputError
from app.kinds.base import ImportResult, ItemSpec, model_jobs, model_parts, TaskKind
from app.leaderboards import side_by_side
from app.leaderboards.ranking import Ranking
from app.kinds.navigation import likert, metrics
from app.kinds.navigation.environments import check_path, get_graph
from app.kinds.navigation.formats import parse_coop_greedy, parse_r2r

MAX_PATH = 500  # viewpoints a follower may visit in one session
MAX_TRACE = 20000  # pose-trace frames (about 30 minutes at 10 per second)
MAX_EVENTS = 200  # stops and resumes ("Keep walking") in one session

INSTRUCTIONS = (
    "Read all of the instruction before you move. Then follow it as closely as you can: "
    "look around with the arrow keys (or drag the view) and walk to the highlighted spot "
    "with Enter (or click or tap a marker). Do not explore, and do not wander back and forth "
    "unless you are lost. When you think you have arrived, press Stop here (key s) and say "
    "how easy the instruction was to follow (keys 1-4, Enter to go on)."
)

RATINGS = (
    (1, "I couldn't follow any part of the instruction"),
    (2, "Hard: I could follow only parts of the instruction and had to guess the rest"),
    (3, "Fairly easy: the instruction was mostly clear, with some missing or confusing details"),
    (4, "Very easy, the instructions gave accurate and sufficient information"),
)

# Protocol 1's task: 6 following sessions, one of them the shared quality-control episode. A
# study with a QC episode gets this design unless the researcher sets the bundle size or the
# gold rate (with another bundle size it still gets one QC slot per bundle).
QC_DESIGN = {"bundle_size": 6, "gold_per_bundle": 1}

Pose = tuple[Annotated[str, Field(min_length=1, max_length=64)], float, float, float]


class FollowEvent(BaseModel):
    """The follower stopped, or took the stop back ("Keep walking"), at path[step], t ms into
    the session (the trace's clock)."""

    type: Literal["stop", "resume"]
    step: int = Field(ge=0)
    t: float = Field(ge=0)


class NavigationResponse(BaseModel):
    path: list[Annotated[str, Field(min_length=1, max_length=64)]] = Field(min_length=1, max_length=MAX_PATH)
    trace: list[Pose] = Field(default_factory=list, max_length=MAX_TRACE)
    rating: int = Field(ge=1, le=4)
    # The study's own Likert questions (kind_settings["likert"]): key -> level (1 = first label).
    likert: dict[str, int] = Field(default_factory=dict)
    events: list[FollowEvent] = Field(default_factory=list, max_length=MAX_EVENTS)


class FollowedSide(BaseModel):
    """One side of a pair followed through the building (pairs.py, option `follow`)."""

    path: list[Annotated[str, Field(min_length=1, max_length=64)]] = Field(min_length=1, max_length=MAX_PATH)
    trace: list[Pose] = Field(default_factory=list, max_length=MAX_TRACE)
    events: list[FollowEvent] = Field(default_factory=list, max_length=MAX_EVENTS)


class FollowedVerdict(side_by_side.Verdict):
    """A pair judged by following both instructions: the verdict, which side was followed
    first, and the two followed paths."""

    order: tuple[Literal["a", "b"], Literal["a", "b"]]
    follows: dict[Literal["a", "b"], FollowedSide]


def _check_walk(path: list[str], trace: list, payload: dict, prefix: str = "") -> None:
    """A followed path starts at the item's start and crosses one edge a step; its trace names
    viewpoints of the building only. `prefix` names the side's fields ("follows.a.")."""
    if path[0] != payload["start"]:
        raise InputError(
            f"the path starts at {path[0]!r}, not at the start {payload['start']!r}", field=f"{prefix}path"
        )
    graph = get_graph(payload["scan"])
    graph.check_walk(path, field=f"{prefix}path")  # every step crosses one edge (or stays)
    for k, pose in enumerate(trace):
        if pose[0] not in graph:
            raise InputError(f"trace[{k}] names viewpoint {pose[0]!r}, not in this building", field=f"{prefix}trace")


def _parse_followed_pair(data: dict, payload: dict) -> dict:
    """A follow-mode pair's answer (the page sends order and follows as JSON strings): both
    sides followed, each walk checked as a single follow is, then the verdict."""
    data = dict(data)
    for name in ("order", "follows"):
        _json_field(data, name)
    parsed = side_by_side.parse_verdict(data, FollowedVerdict)
    if sorted(parsed["order"]) != ["a", "b"]:
        raise InputError('must be the two sides in the order followed, e.g. ["b", "a"]', field="order")
    for side in side_by_side.SIDES:
        got = parsed["follows"].get(side)
        if got is None:
            raise InputError(f"instruction {side.upper()} was not followed", field=f"follows.{side}")
        try:
            _check_events(got["events"], got["path"])
        except InputError as exc:
            raise InputError(exc.message, field=f"follows.{side}.events") from None
        _check_walk(got["path"], got["trace"], payload, f"follows.{side}.")
        got["trace"] = [list(p) for p in got["trace"]]
    parsed["order"] = list(parsed["order"])
    return parsed


def _likert_fields(data: dict) -> None:
    """The page's form sends each Likert answer as a field `likert.<key>`."""
    keys = [k for k in data if isinstance(k, str) and k.startswith("likert.")]
    if keys:
        answers = data.get("likert") if isinstance(data.get("likert"), dict) else {}
        data["likert"] = {**answers, **{k.removeprefix("likert."): data.pop(k) for k in keys}}


def _check_events(events: list[dict], path: list[str]) -> None:
    """Stops and resumes alternate, from a stop, in time order, never past the path's end; a
    resume is where its stop was, and the last stop is where the path ends."""
    for k, ev in enumerate(events):
        expected = "stop" if k % 2 == 0 else "resume"
        if ev["type"] != expected:
            raise InputError(f"events[{k}] is a {ev['type']}; a {expected} was expected", field="events")
        if ev["step"] >= len(path):
            raise InputError(f"events[{k}] is at step {ev['step']}, past the path's end", field="events")
        if k and (ev["t"] < events[k - 1]["t"] or ev["step"] < events[k - 1]["step"]):
            raise InputError(f"events[{k}] comes before events[{k - 1}]", field="events")
        if expected == "resume" and ev["step"] != events[k - 1]["step"]:
            raise InputError(f"events[{k}] resumes at another step than it stopped", field="events")
    if events and (events[-1]["type"] != "stop" or events[-1]["step"] != len(path) - 1):
        raise InputError("the last event must be the stop at the path's end", field="events")


def _json_field(data: dict, name: str) -> None:
    """The page's form sends path and trace as JSON strings."""
    value = data.get(name)
    if isinstance(value, str):
        try:
            data[name] = jsonsafe.loads(value) if value.strip() else []
        except json.JSONDecodeError:
            raise InputError(f"{name} is not valid JSON", field=name) from None


class Navigation(TaskKind):
    name: ClassVar[str] = "navigation"
    cli_aliases: ClassVar[tuple[str, ...]] = ("nav",)  # its commands' old name
    title: ClassVar[str] = "Navigation following"
    Response = NavigationResponse
    category_label: ClassVar[str] = "speaker"
    # Success alone per speaker would repeat the metrics table's SR column.
    primary_table: ClassVar[str | None] = "navigation_metrics"
    generic_table: ClassVar[bool] = False
    score_label: ClassVar[str] = "Success rate"
    # What the settled table and adaptive allocation read: a path's first valid follow's success.
    ranking: ClassVar[Ranking | None] = Ranking(
        unit="path",
        measure="SR",
        agent="speaker",
        value="the follow's success (0/1).",
        value_of=lambda response, scores, score: scores.get("success"),
    )
    item_noun: ClassVar[str] = "Instruction"
    keyboard_hint: ClassVar[str] = (
        "Left/right arrows: look around; Enter: walk to the highlighted "
        "marker; s: stop; k or Escape: keep walking; 1-4: rate; Enter: next."
    )
    item_formats: ClassVar[tuple[str, ...]] = ("r2r", "coop", "capability", "pairs")
    # Side by side (pairs.py): a study of pairs of speakers' instructions for one path.
    pairwise: ClassVar[bool] = True
    pair_keyboard_hint: ClassVar[str] = (
        "Reading a pair: 1 or 2 says A or B would get you along the path better, t a tie, "
        "r writes a reason (Escape leaves it). Enter sends."
    )
    follow_pair_keyboard_hint: ClassVar[str] = (
        "Following a pair: arrows look around, Enter walks to the highlighted marker, s stops; "
        "Enter goes on to instruction 2, k or Escape keeps walking; then 1 or 2 says which got you "
        "along better, t a tie, r writes a reason. Enter sends."
    )
    default_instructions: ClassVar[str] = INSTRUCTIONS
    ratings: ClassVar[tuple[tuple[int, str], ...]] = RATINGS
    replay_template: ClassVar[str | None] = "kinds/navigation/replay.html"
    position: ClassVar[int] = 20
    format_labels: ClassVar[dict[str, str]] = {
        "r2r": "Navigation: R2R paths with human instructions (JSON)",
        "coop": "Navigation: a speaker's instructions, coop greedy file (JSON)",
        "capability": ("Navigation: capability analysis of a speaker, its candidates and the references (JSON)"),
        "pairs": "Navigation: pairs of speakers' instructions for one path, judged side by side (JSONL)",
    }
    # The coop speaker's name, the paired tests' baseline speaker, the study's own Likert
    # questions (one per line) and the R2R instruction that serves as the QC episode.
    option_fields: ClassVar[dict[str, tuple]] = {
        "speaker": ("text",),
        "baseline": ("text",),
        "likert": ("text",),
        "qc_instruction": ("text",),
        "control_length": ("int", 0, 1),
        "follow": ("int", 0, 1),
    }
    options_template: ClassVar[str | None] = "kinds/navigation/options.html"
    # The upload preview's viewer fetches /env/<scan>/view.json, which needs the session.
    preview_needs_session: ClassVar[bool] = True
    form_help: ClassVar[str] = (
        "Workers follow an instruction through a building, stop where they think it ends, and rate "
        "how easy it was to follow. The buildings the file names must be imported first "
        "(docs/kinds/navigation-houses.md). See docs/kinds/navigation.md."
    )
    outputs_label: ClassVar[str] = (
        'A model listener\'s paths (R2R predictions JSON, or {"<instruction id>": {"path": [...]}})'
    )
    prior_label: ClassVar[str] = (
        'Format: R2R predictions JSON with the follower on each record, [{"instr_id", "trajectory", "worker_id"}, ...].'
    )
    study_template: ClassVar[str | None] = "kinds/navigation/generation.html"
    models: ClassVar[str | None] = "app.kinds.navigation.models"
    jobs: ClassVar[dict[str, str]] = model_jobs("navigation", "validate", "generate")
    artifact_roles: ClassVar[tuple[str, ...]] = ("speaker", "listener")
    artifact_help: ClassVar[str] = "a navigation speaker (path to instruction) or listener (instruction to path)"

    # Its train commands sit with its command group, in .cli.
    parts: ClassVar[dict[str, str | tuple[str, ...]]] = model_parts(
        "navigation",
        ".generation:SpeakerRuns",
        train_commands=".cli:train_commands",
        study_context=".views:generations_context",
    )

    def parse_response(self, data: dict, payload: dict | None = None, settings: dict | None = None) -> dict:
        if payload is not None and side_by_side.is_pair(payload) and payload.get("follow"):
            return _parse_followed_pair(data, payload)
        if side_by_side.is_pair(payload) or (payload is None and "winner" in data):
            return side_by_side.parse_verdict(data)
        data = dict(data)
        for name in ("path", "trace", "events"):
            _json_field(data, name)
        _likert_fields(data)
        parsed = super().parse_response(data)
        _check_events(parsed["events"], parsed["path"])
        if settings is not None or parsed["likert"]:
            parsed["likert"] = likert.check_answers((settings or {}).get("likert") or [], parsed["likert"])
        # Responses without Likert questions or stop/resume events keep the original shape.
        for name in ("likert", "events"):
            if not parsed[name]:
                del parsed[name]
        if payload is not None:
            _check_walk(parsed["path"], parsed["trace"], payload)
        parsed["trace"] = [list(p) for p in parsed["trace"]]
        return parsed

    def public_payload(self, payload: dict) -> dict:
        if side_by_side.is_pair(payload):
            from app.kinds.navigation.pairs import public_view

            return public_view(payload)
        return {k: payload[k] for k in ("instruction", "scan", "start", "heading")}

    def score_details(self, payload, reference, response):
        if side_by_side.is_pair(payload):
            details = side_by_side.score_details(reference, response)
            follows = response.get("follows")
            if not follows or not reference or not reference.get("route"):
                return details
            # Each followed side scored against the route as a single follow is (pairs.py).
            graph = get_graph(payload["scan"])
            per_side = {s: metrics.score_trajectory(graph, reference["route"], follows[s]["path"]) for s in follows}
            return {**(details or {}), **per_side}
        if not reference:
            return None
        return metrics.score_trajectory(get_graph(payload["scan"]), reference["path"], response["path"])

    def score(self, payload, reference, response):
        if side_by_side.is_pair(payload):
            return side_by_side.score(reference, response)
        details = self.score_details(payload, reference, response)
        return None if details is None else (1.0 if details["success"] else 0.0)

    def import_items(self, data: bytes, fmt: str, options: dict) -> ImportResult:
        """Items by format, plus the study's follower settings from `options` (`likert`,
        `baseline`: likert.study_settings) in its kind_settings."""
        if fmt == "pairs":  # side by side: no follower settings (pairs.py)
            from app.kinds.navigation.pairs import import_pairs

            return import_pairs(data, options)
        result = self._import_format(data, fmt, options)
        categories = {i.category for i in result.items if not i.is_gold}
        result.kind_settings = {**result.kind_settings, **likert.study_settings(options, categories)}
        return result

    def _import_format(self, data: bytes, fmt: str, options: dict) -> ImportResult:
        if fmt == "r2r":
            return self._import_r2r(data, options)
        if fmt == "coop":
            return self._import_coop(data, options)
        if fmt == "capability":  # the capability analysis design (capability.py)
            from app.kinds.navigation.capability import import_capability

            return import_capability(data, options)
        raise InputError(f"unknown format {fmt!r}: use r2r, coop, capability or pairs", field="format")

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
            raise InputError('"human" names the human references; choose another speaker name', field="speaker")
        with_refs = bool(options.get("with_references", True))
        parsed = parse_coop_greedy(data)
        items: list[ItemSpec] = []
        seen: dict[str, str] = {}
        for out in (parsed.qc_episode, *parsed.outputs):
            label = f"key {out.key!r}"
            check_path(out.scan, out.path, label)
            group = f"{out.scan}:{out.path_id}"
            payload = {"scan": out.scan, "start": out.path[0], "heading": out.heading}
            reference = {"path": list(out.path)}
            if out is parsed.qc_episode:
                items.append(
                    ItemSpec(
                        external_id="qc",
                        payload={"instruction": out.generated_instr, **payload},
                        reference=reference,
                        is_gold=True,
                        source="human",
                        category="human",
                        cluster="",
                        exclusion_group=group,
                    )
                )
                continue
            if group in seen:
                raise InputError(
                    f"{label}: path {out.path_id} of {out.scan} repeats key {seen[group]!r}", field="path_id"
                )
            seen[group] = out.key
            items.append(
                ItemSpec(
                    external_id=f"{speaker}:{out.key}",
                    payload={"instruction": out.generated_instr, **payload},
                    reference=reference,
                    source="agent",
                    category=speaker,
                    cluster=group,
                    exclusion_group=group,
                )
            )
            if with_refs:
                refs = [t for t in out.instructions if t.strip()]
                if not refs:
                    raise InputError(f"{label}: no human reference instruction", field="instructions")
                items.append(
                    ItemSpec(
                        external_id=f"{out.path_id}_0",
                        payload={"instruction": refs[0], **payload},
                        reference=reference,
                        source="human",
                        category="human",
                        cluster=group,
                        exclusion_group=group,
                    )
                )
        return ImportResult(
            items=items,
            kind_settings={"speakers": [speaker]},
            summary={
                "paths": len(seen),
                "instructions": len(items),
                "speaker": speaker,
                "scans": sorted({o.scan for o in parsed.outputs}),
            },
            study_defaults=dict(QC_DESIGN),
        )

    def _import_r2r(self, data: bytes, options: dict | None = None) -> ImportResult:
        """One item per instruction. Option qc_instruction ("<path_id>_<k>") makes that
        instruction the study's QC episode: one gold item shared by every bundle; the other
        instructions of its path are left out (the QC path is nobody's regular item)."""
        qc = (options or {}).get("qc_instruction") or ""
        if not isinstance(qc, str) or len(qc) > 255:
            raise InputError("the QC instruction must be an id <path_id>_<k>", field="qc_instruction")
        qc = qc.strip()
        paths = parse_r2r(data)
        if qc and not any(qc == f"{p.path_id}_{k}" for p in paths for k in range(len(p.instructions))):
            raise InputError(
                f"no instruction {qc!r} in the upload (ids are <path_id>_<k>, k from 0)", field="qc_instruction"
            )
        items: list[ItemSpec] = []
        for p in paths:
            check_path(p.scan, p.path, f"path_id {p.path_id}")
            group = f"{p.scan}:{p.path_id}"
            ids = [f"{p.path_id}_{k}" for k in range(len(p.instructions))]
            for k, text in enumerate(p.instructions):
                if not text.strip():
                    raise InputError(f"path_id {p.path_id}: instruction {k} is empty", field="instructions")
                if qc in ids and ids[k] != qc:
                    continue
                gold = ids[k] == qc
                items.append(
                    ItemSpec(
                        external_id=ids[k],
                        payload={"instruction": text, "scan": p.scan, "start": p.path[0], "heading": p.heading},
                        reference={"path": list(p.path)},
                        is_gold=gold,
                        source="human",
                        category="human",
                        cluster="" if gold else group,
                        exclusion_group=group,
                    )
                )
        return ImportResult(
            items=items,
            summary={
                "paths": len(paths),
                "instructions": len(items),
                "scans": sorted({p.scan for p in paths}),
                **({"qc_instruction": qc} if qc else {}),
            },
            study_defaults=dict(QC_DESIGN) if qc else {},
        )

    def auto_review(self, gold, settings=None) -> tuple[str | None, str]:
        """Protocol 1: a worker is approved when they reach the goal of every QC episode
        (navigation error <= 3 m); otherwise an admin looks at the replay. Never rejects."""
        if not gold:
            return None, ""
        if side_by_side.is_pair_study(settings):  # reference pairs: the known better side picked
            right = sum(g.score == 1.0 for g in gold)
            if right == len(gold):
                return "approved", f"auto: picked the better side of every reference pair ({right})"
            return None, f"reference pairs: picked the better side of {right} of {len(gold)}"
        errors = [float((g.scores or {}).get("ne", math.inf)) for g in gold]
        worst = max(errors)
        several = len(errors) > 1
        if worst <= metrics.SUCCESS_DISTANCE:
            if several:
                return "approved", f"auto: reached every QC goal ({worst:.1f} m at most)"
            return "approved", f"auto: reached the QC goal ({worst:.1f} m)"
        if not math.isfinite(worst):
            return None, "QC episode: not scored, or no way from where they stopped to the goal"
        return None, f"QC episode: stopped {worst:.1f} m from the goal" + (
            f" (the worst of {len(errors)})" if several else ""
        )

    def replay_details(self, answer: dict) -> dict:
        """Schematic maps of the session (schematic.py), one per floor visited."""
        from app.kinds.navigation.environments import get_semantics
        from app.kinds.navigation.schematic import floor_maps

        if side_by_side.is_pair(answer.get("payload")):
            response = answer.get("response") or {}
            picked = response.get("winner", "?")
            follows = response.get("follows")
            if not follows:
                return {"maps": [], "note": f"read side by side (no walk to map); picked {picked}"}
            # Followed side by side: a map of each walk, in the order followed.
            scan, route = answer["payload"].get("scan"), (answer.get("reference") or {}).get("route")
            if not route:
                return {"maps": [], "note": f"followed both; picked {picked}"}
            try:
                graph, semantics = get_graph(scan), get_semantics(scan)
            except InputError as e:
                return {"maps": [], "note": e.message}
            maps = []
            for side in response.get("order") or sorted(follows):
                prefix = f"map-{answer.get('annotation_id', 0)}-{side}"
                maps += floor_maps(graph, route, follows[side]["path"], semantics=semantics, id_prefix=prefix)
            return {
                "maps": maps,
                "note": f"followed {' then '.join(s.upper() for s in response.get('order') or [])}; picked {picked}",
            }
        scan, reference = answer["payload"].get("scan"), (answer.get("reference") or {}).get("path")
        walked = (answer.get("response") or {}).get("path") or []
        if not reference:
            return {"maps": [], "note": "no intended path stored for this item"}
        try:
            graph, semantics = get_graph(scan), get_semantics(scan)
        except InputError as e:
            return {"maps": [], "note": e.message}
        return {
            "maps": floor_maps(
                graph, reference, walked, semantics=semantics, id_prefix=f"map-{answer.get('annotation_id', 0)}"
            )
        }

    def extra_leaderboard(self, session, study) -> dict | None:
        from app.kinds.navigation.leaderboard import pair_section, section

        if side_by_side.is_pair_study(study.kind_settings):
            return pair_section(session, study)
        return section(session, study)

    def ranking_for(self, settings: dict | None = None) -> Ranking | None:
        return None if side_by_side.is_pair_study(settings) else self.ranking

    def adaptive_for(self, settings: dict | None = None) -> bool:
        # A pair study: which pair next (side_by_side.item_priorities); otherwise the core's rule.
        return side_by_side.is_pair_study(settings) or super().adaptive_for(settings)

    def item_priorities(self, session, study) -> dict[int, float] | None:
        from app.kinds.navigation.pairs import PAIRING

        if not side_by_side.is_pair_study(study.kind_settings):
            return None
        return side_by_side.item_priorities(session, study, PAIRING)

    def primary_table_for(self, settings: dict | None = None) -> str | None:
        return "navigation_pair_ratings" if side_by_side.is_pair_study(settings) else self.primary_table

    def follow_order(self, assignment_id: int | None) -> tuple[str, str]:
        """Which side a judge follows first (pair_follow.html): pairs.follow_order."""
        from app.kinds.navigation.pairs import follow_order

        return follow_order(assignment_id)

    def item_noun_for(self, settings: dict | None = None) -> str:
        return "Pair" if side_by_side.is_pair_study(settings) else self.item_noun

    def keyboard_hint_for(self, settings: dict | None = None) -> str:
        if side_by_side.is_pair_study(settings) and (settings or {}).get("follow"):
            return self.follow_pair_keyboard_hint
        return self.pair_keyboard_hint if side_by_side.is_pair_study(settings) else self.keyboard_hint

    def import_agent_outputs(
        self, data: bytes, known_ids: set[str], payloads: dict[str, dict] | None = None
    ) -> dict[str, dict]:
        """A model listener's paths (R2R predictions, or {external_id: {path | trace}}),
        each checked against its instruction's building and start (see traces.py)."""
        from app.kinds.navigation.traces import parse_listener_outputs

        return parse_listener_outputs(data, known_ids, payloads, get_graph)

    def import_annotations(
        self, data: bytes, known_ids: set[str], payloads: dict[str, dict] | None = None
    ) -> dict[str, dict[str, dict]]:
        """Followers' paths: the R2R predictions format with the follower's id on each
        trajectory, [{"instr_id", "trajectory", "worker_id"}, ...] (docs/kinds/navigation.md)."""
        from app.kinds.navigation.traces import parse_follower_annotations

        return parse_follower_annotations(data, known_ids, payloads, get_graph)

    def demo(self) -> dict:
        """A generated house with 24 sampled paths and grammar instructions (one per path),
        walked by simulated followers (demo.py) who leave half the paths to newcomers."""
        from app.kinds.navigation.demo import DEMO_PATHS, simulate_demo
        from app.kinds.navigation.environments import import_house
        from app.kinds.navigation.grammar import describe_path
        from app.kinds.navigation.house import generate_house, sample_paths, to_r2r

        house = generate_house(seed=3)
        paths = sample_paths(house, DEMO_PATHS, rng=3)
        instructions = [describe_path(house, p, rng=100 + k, n=1) for k, p in enumerate(paths)]
        return {
            "items": json.dumps(to_r2r(house, paths, instructions)).encode(),
            "format": "r2r",
            "setup": lambda session: import_house(session, house),
            # six followers, one of whom never moves; then the side-by-side study (demo.py)
            "simulate": simulate_demo,
            "settings": {"bundle_size": 6, "gold_rate": 0.0, "annotations_per_item": 3, "instructions": INSTRUCTIONS},
        }


KIND = Navigation()
