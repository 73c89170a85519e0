"""Continuations as a study's items (docs/kinds/sts.md).

One JSON object a line (UTF-8, optionally gzipped): an agent's continuation of a scenario, as
the whole episode (the recording's context, then the agent's own actions) and its takeover
point:

    {"scenario": "s1", "agent": "bc-baseline", "continuation": 0,
     "level": "BabyAI-GoToLocal-v0", "seed": 3, "mission": "go to the red key",
     "actions": ["left", "forward", ...], "takeover": 2,
     "instruction": "go to the red key",     (optional: the mission)
     "category": "go to", "tags": ["easy"],  (optional: the level's family; none)
     "reference": false, "label": "success", "id": "...",  (optional)
     "suite_version": 2}  (optional: the suite version that added the scenario)

`reference: true` makes the line a reference episode (gold: mixed into bundles, never scored
for its agent); its `label` is the known answer, by default the simulator's own outcome. Every
line is replayed: a recording that does not replay, a takeover beyond it, or an episode that
ends before its takeover is refused with the line and field, and nothing is stored.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from app.errors import InputError
from app.kinds.sts.env import Simulator, get_simulator
from app.kinds.sts.recordings import Recording, check, decode_upload, parse_recording

FIELDS = {"id", "scenario", "agent", "continuation", "level", "seed", "mission", "actions", "takeover",
          "instruction", "category", "tags", "reference", "label", "suite_version"}
LABELS = ("success", "failure")
MAX_TEXT = 255
MAX_TAGS = 20


@dataclass
class Continuation:
    scenario: str
    agent: str
    continuation: str
    recording: Recording  # the whole episode: context then continuation
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
    rec = parse_recording({k: obj[k] for k in ("level", "seed", "mission", "actions") if k in obj}
                          | {"actor": "agent"}, line)
    takeover = obj.get("takeover")
    if isinstance(takeover, bool) or not isinstance(takeover, int) or takeover < 0:
        raise InputError(f"takeover must be a number of context actions (0 or more), not {takeover!r}",
                         line=line, field="takeover")
    if takeover > len(rec.actions):
        raise InputError(f"takeover {takeover} is beyond the episode, which has {len(rec.actions)} actions",
                         line=line, field="takeover")
    outcome = check(rec, sim)  # replays it: RecordingError names the line and field
    if outcome.end is not None and outcome.end <= takeover:
        raise InputError(f"the episode ends at step {outcome.end}, at or before its takeover point "
                         f"{takeover}: the agent would never act", line=line, field="takeover")
    reference = obj.get("reference", False)
    if not isinstance(reference, bool):
        raise InputError("reference must be true or false", line=line, field="reference")
    success_step = outcome.success - takeover if outcome.success is not None else None
    label = obj.get("label")
    if label is not None and label not in LABELS:
        raise InputError(f"label must be \"success\" or \"failure\", not {json.dumps(label)}",
                         line=line, field="label")
    if reference and label is None:
        label = "success" if success_step is not None else "failure"
    tags = obj.get("tags", [])
    if (not isinstance(tags, list) or len(tags) > MAX_TAGS
            or not all(isinstance(t, str) and 0 < len(t.strip()) <= 64 for t in tags)):
        raise InputError(f"tags must be a list of at most {MAX_TAGS} short texts", line=line, field="tags")
    suite_version = obj.get("suite_version")
    if suite_version is not None and (isinstance(suite_version, bool) or not isinstance(suite_version, int)
                                      or suite_version < 1):
        raise InputError(f"suite_version must be a version number (1 or more), not {suite_version!r}",
                         line=line, field="suite_version")
    instruction = _text(obj, "instruction", line, required=False) or rec.mission
    try:
        category = _text(obj, "category", line, required=False) or sim.category_of(rec.level, rec.mission)
    except ValueError as exc:
        raise InputError(str(exc), line=line, field="category") from None
    c = Continuation(
        scenario=_text(obj, "scenario", line), agent=_text(obj, "agent", line),
        continuation=_text(obj, "continuation", line), recording=rec, takeover=takeover,
        instruction=instruction, category=category, tags=sorted({t.strip() for t in tags}),
        reference=reference, label=label if reference else None, success_step=success_step,
        suite_version=suite_version, line=line)
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
    out: list[Continuation] = []
    seen: dict[str, int] = {}
    for line, raw in enumerate(decode_upload(data).split("\n"), 1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise InputError(f"not valid JSON: {exc.msg}", line=line) from None
        c = parse_continuation(obj, line, sim)
        if c.id in seen:
            raise InputError(f"the continuation {c.id!r} is already on line {seen[c.id]}", line=line, field="id")
        seen[c.id] = line
        out.append(c)
    if not out:
        raise InputError("the file holds no continuations")
    return out
