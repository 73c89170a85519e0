"""A study's items (docs/kinds/sts.md): continuations, and missions for the play study.

One JSON object a line (UTF-8, optionally gzipped): an agent's continuation of a scenario, as
the whole episode (the recording's context, then the agent's own actions) and its takeover
point:

    {"scenario": "s1", "agent": "bc-baseline", "continuation": 0,
     "level": "BabyAI-GoToLocal-v0", "seed": 3, "mission": "go to the red key",
     "actions": ["left", "forward", ...], "takeover": 2,
     "instruction": "go to the red key",     (optional: the mission)
     "category": "go to", "tags": ["easy"],  (optional: the level's family; none)
     "reference": false, "label": "success", "id": "...",  (optional)
     "suite_version": 2,  (optional: the suite version that added the scenario)
     "length": 16}  (optional: the scenario's continuation length, below)

`reference: true` makes the line a reference episode (gold: mixed into bundles, never scored
for its agent); its `label` is the known answer, by default the simulator's own outcome. Every
line is replayed: a recording that does not replay, a takeover beyond it, or an episode that
ends before its takeover is refused with the line and field, and nothing is stored.

Every continuation of a scenario is shown for the scenario's continuation length: `length`
steps after the takeover (the same on every line of the scenario that gives it), by default
the longest continuation of the scenario in the file. An episode that ended sooner (BabyAI
ends it at success) holds its last state to that length, so how long a continuation runs
does not tell a worker how it ended. Give `length` when every continuation of a scenario may
end early: a default taken from successes alone would be shorter than the others'.

Missions (format `missions`, the play study: people play them by keyboard), one a line, as
JSONL or as CSV with a header row:

    {"level": "BabyAI-GoToLocal-v0", "seed": 3,
     "id": "m1", "instruction": "...", "mission": "...", "category": "..."}  (optional)

Each seed is reset in the simulator and the item carries the simulator's mission; a `mission`
that differs from it is refused, like an unknown level or a seed that does not reset.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from app.errors import InputError
from app.kinds.sts.env import Simulator, SimulatorError, get_simulator
from app.kinds.sts.mining import MAX_CONTINUATION
from app.kinds.sts.recordings import Replayable, check, parse_recording
from app.textfiles import csv_reader, csv_rows, each_once, jsonl_objects, text_lines, upload_bytes

FIELDS = {
    "id",
    "scenario",
    "agent",
    "continuation",
    "level",
    "seed",
    "mission",
    "actions",
    "takeover",
    "instruction",
    "category",
    "tags",
    "reference",
    "label",
    "suite_version",
    "length",
}
LABELS = ("success", "failure")
MAX_TEXT = 255
MAX_TAGS = 20


@dataclass
class Continuation:
    scenario: str
    agent: str
    continuation: str
    recording: Replayable  # the whole episode: context then continuation
    takeover: int  # context actions (forced from the recording)
    instruction: str
    category: str
    tags: list[str] = field(default_factory=list)
    reference: bool = False
    label: str | None = None  # reference episodes: the known answer
    label_step: int | None = None  # steps after the takeover of the labelled moment, if known
    success_step: int | None = None  # the simulator: steps after the takeover until success
    # The suite version that added the scenario (it belongs to that version and every later
    # one), for a breakdown by version; None for continuations from outside a suite.
    suite_version: int | None = None
    # Steps after the takeover that every continuation of the scenario shows (the file's
    # `length`, else the scenario's longest in the file; parse_continuations fills it in).
    scenario_length: int | None = None
    id: str = ""
    line: int | None = None

    @property
    def simulator_outcome(self) -> str:
        return "success" if self.success_step is not None else "failure"

    @property
    def length(self) -> int:
        """Actions the agent took on its own."""
        return len(self.recording.actions) - self.takeover


def _text(obj: dict, name: str, line: int, required: bool = True) -> str:
    value = obj.get(name)
    if value is None or value == "":
        if required:
            raise InputError(f"missing {name!r}", line=line, field=name)
        return ""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise InputError(f"{name} must be text or a whole number", line=line, field=name)
    text = str(value).strip()
    if len(text) > MAX_TEXT:
        raise InputError(f"{name} is longer than {MAX_TEXT} characters", line=line, field=name)
    return text


def parse_continuation(obj: object, line: int, sim: Simulator) -> Continuation:
    if not isinstance(obj, dict):
        raise InputError("each line must be a JSON object", line=line)
    unknown = sorted(set(obj) - FIELDS)
    if unknown:
        raise InputError(f"unknown field(s) {', '.join(map(repr, unknown))}", line=line, field=unknown[0])
    rec = parse_recording(
        {k: obj[k] for k in ("level", "seed", "mission", "actions") if k in obj} | {"actor": "agent"}, line
    )
    takeover = obj.get("takeover")
    if isinstance(takeover, bool) or not isinstance(takeover, int) or takeover < 0:
        raise InputError(
            f"takeover must be a number of context actions (0 or more), not {takeover!r}", line=line, field="takeover"
        )
    if takeover > len(rec.actions):
        raise InputError(
            f"takeover {takeover} is beyond the episode, which has {len(rec.actions)} actions",
            line=line,
            field="takeover",
        )
    outcome = check(rec, sim)  # replays it: RecordingError names the line and field
    if outcome.end is not None and outcome.end <= takeover:
        raise InputError(
            f"the episode ends at step {outcome.end}, at or before its takeover point "
            f"{takeover}: the agent would never act",
            line=line,
            field="takeover",
        )
    reference = obj.get("reference", False)
    if not isinstance(reference, bool):
        raise InputError("reference must be true or false", line=line, field="reference")
    success_step = outcome.success - takeover if outcome.success is not None else None
    label = obj.get("label")
    if label is not None and label not in LABELS:
        raise InputError(f'label must be "success" or "failure", not {json.dumps(label)}', line=line, field="label")
    if reference and label is None:
        label = "success" if success_step is not None else "failure"
    tags = obj.get("tags", [])
    if (
        not isinstance(tags, list)
        or len(tags) > MAX_TAGS
        or not all(isinstance(t, str) and 0 < len(t.strip()) <= 64 for t in tags)
    ):
        raise InputError(f"tags must be a list of at most {MAX_TAGS} short texts", line=line, field="tags")
    suite_version = obj.get("suite_version")
    if suite_version is not None and (
        isinstance(suite_version, bool) or not isinstance(suite_version, int) or suite_version < 1
    ):
        raise InputError(
            f"suite_version must be a version number (1 or more), not {suite_version!r}",
            line=line,
            field="suite_version",
        )
    scenario_length = obj.get("length")
    own = len(rec.actions) - takeover
    if scenario_length is not None and (
        isinstance(scenario_length, bool)
        or not isinstance(scenario_length, int)
        or not own <= scenario_length <= MAX_CONTINUATION
    ):
        raise InputError(
            f"length (the scenario's continuation length) must be a whole number from {own} "
            f"(the agent's own steps) to {MAX_CONTINUATION}, not {scenario_length!r}",
            line=line,
            field="length",
        )
    instruction = _text(obj, "instruction", line, required=False) or rec.mission
    try:
        category = _text(obj, "category", line, required=False) or sim.category_of(rec.level, rec.mission)
    except ValueError as exc:
        raise InputError(str(exc), line=line, field="category") from None
    c = Continuation(
        scenario=_text(obj, "scenario", line),
        agent=_text(obj, "agent", line),
        continuation=_text(obj, "continuation", line),
        recording=rec,
        takeover=takeover,
        instruction=instruction,
        category=category,
        tags=sorted({t.strip() for t in tags}),
        reference=reference,
        label=label if reference else None,
        success_step=success_step,
        suite_version=suite_version,
        scenario_length=scenario_length,
        line=line,
    )
    if reference:
        # The simulator's moment when the label is its own outcome (success: the success step;
        # failure: the end); a label that overrides the simulator has no known moment.
        if label == c.simulator_outcome:
            c.label_step = success_step if label == "success" else c.length
    c.id = _text(obj, "id", line, required=False) or f"{c.scenario}/{c.agent}/{c.continuation}"
    return c


def parse_continuations(data: bytes | str, simulator: Simulator | None = None) -> list[Continuation]:
    """Every line checked and replayed; InputError (line, field) on the first bad one."""
    sim = simulator or get_simulator()
    out = each_once(
        # nesting bounded (app.jsonsafe): deep JSON is a 422
        ((line, parse_continuation(obj, line, sim)) for line, obj in jsonl_objects(data)),
        lambda c: c.id,
        "id",
        "the continuation {key!r} is already on line {line}",
        "the file holds no continuations",
    )
    _scenario_lengths(out)
    return out


def _scenario_lengths(continuations: list[Continuation]) -> None:
    """Each continuation's `scenario_length`: the one its scenario's lines give, else the
    scenario's longest continuation (the lines that give one must agree)."""
    given: dict[str, Continuation] = {}
    longest: dict[str, int] = {}
    for c in continuations:
        longest[c.scenario] = max(longest.get(c.scenario, 0), c.length)
        if c.scenario_length is None:
            continue
        first = given.setdefault(c.scenario, c)
        if first.scenario_length != c.scenario_length:
            raise InputError(
                f"scenario {c.scenario!r} has length {first.scenario_length} on line {first.line}: "
                f"every continuation of a scenario is shown for the same length",
                line=c.line,
                field="length",
            )
    for c in continuations:
        first = given.get(c.scenario)
        if first is not None and c.length > first.scenario_length:
            raise InputError(
                f"the agent takes {c.length} steps, more than its scenario's length "
                f"{first.scenario_length} (line {first.line})",
                line=c.line,
                field="actions",
            )
        c.scenario_length = first.scenario_length if first is not None else longest[c.scenario]


# --- missions: the play study's items -----------------------------------------------------

MISSION_FIELDS = ("id", "level", "seed", "mission", "instruction", "category")
# Play items' ids go into their recordings' ids ("play:<study>:<id>:<pseudonym>", 255 at most).
MAX_MISSION_ID = 200


@dataclass
class Mission:
    """A mission a worker plays from its first state: (level, seed) gives the episode."""

    id: str
    level: str
    seed: int
    mission: str  # the simulator's own
    instruction: str  # what the worker reads (default: the mission)
    category: str
    max_steps: int  # the level truncates the episode after this many actions
    line: int | None = None


def parse_mission(obj: object, line: int, sim: Simulator) -> Mission:
    if not isinstance(obj, dict):
        raise InputError("each line must be a JSON object", line=line)
    unknown = sorted(set(obj) - set(MISSION_FIELDS))
    if unknown:
        raise InputError(f"unknown field(s) {', '.join(map(repr, unknown))}", line=line, field=unknown[0])
    for name in ("level", "seed"):
        if obj.get(name) is None or obj.get(name) == "":
            raise InputError(f"missing {name!r}", line=line, field=name)
    level, seed = obj["level"], obj["seed"]
    try:
        sim.check_level(level)
    except SimulatorError as exc:
        raise InputError(str(exc), line=line, field="level") from None
    try:
        episode = sim.reset(level, seed)
    except SimulatorError as exc:
        raise InputError(str(exc), line=line, field="seed") from None
    given = _text(obj, "mission", line, required=False)
    if given and given != episode.mission:
        raise InputError(
            f"seed {seed} of {level} gives the mission {episode.mission!r}, not {given!r}", line=line, field="mission"
        )
    mid = _text(obj, "id", line, required=False) or f"{level}:{seed}"
    if len(mid) > MAX_MISSION_ID:
        raise InputError(f"id is longer than {MAX_MISSION_ID} characters", line=line, field="id")
    try:
        category = _text(obj, "category", line, required=False) or sim.category_of(level, episode.mission)
    except SimulatorError as exc:
        raise InputError(str(exc), line=line, field="category") from None
    return Mission(
        id=mid,
        level=level,
        seed=int(seed),
        mission=episode.mission,
        instruction=_text(obj, "instruction", line, required=False) or episode.mission,
        category=category,
        max_steps=int(episode.max_steps),
        line=line,
    )


def _mission_records(text: bytes | str):
    """(line, record) of a JSONL file, or of a CSV file with a header row (told apart by the
    first line that is not blank: a JSON object starts with "{"), from its checked bytes
    (`upload_bytes`) or its text."""
    first = next((line for line in text_lines(text) if line.strip()), "")  # decoded one at a time
    if first.lstrip().startswith("{"):
        yield from jsonl_objects(text)
        return
    reader = csv_reader(text)
    rows = csv_rows(reader, text)  # a cell over the csv module's limit: a refusal naming line and column
    header = [h.strip() for h in next(rows, [])]
    unknown = [h for h in header if h not in MISSION_FIELDS]
    if unknown:
        raise InputError(
            f"unknown column(s) {', '.join(map(repr, unknown))}: use {', '.join(MISSION_FIELDS)}",
            line=1,
            field=unknown[0],
        )
    for row in rows:
        if len(row) > len(header):  # more cells than the header names
            raise InputError("more cells than the header has columns", line=reader.line_num)
        if not any(v.strip() for v in row):
            continue
        record = {k: v.strip() for k, v in zip(header, row) if v.strip()}
        seed = record.get("seed")  # a cell is text; a whole number becomes one, other text stays so
        if seed is not None and seed.isascii() and seed.isdigit():
            record["seed"] = int(seed)
        yield reader.line_num, record


def parse_missions(data: bytes | str, simulator: Simulator | None = None) -> list[Mission]:
    """Every line checked (the level known, the seed resets, an explicit mission is the
    simulator's); InputError (line, field) on the first bad one."""
    sim = simulator or get_simulator()
    return each_once(
        ((line, parse_mission(obj, line, sim)) for line, obj in _mission_records(upload_bytes(data))),
        lambda m: m.id,
        "id",
        "the mission {key!r} is already on line {line}",
        "the file holds no missions",
    )
