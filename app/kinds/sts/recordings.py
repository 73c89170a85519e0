"""Recordings: (level, seed, mission, actions, who acted), replayed to restore any state.

A recording is never a video: frames and observations come from replaying its actions in the
simulator from (level, seed), which is deterministic. Replaying also validates it: the level
must exist, the seed must give the recorded mission, every action must be an action, and no
action may follow the end of the episode. So a valid recording that succeeds ends at its
success.

Upload format (JSONL, UTF-8, optionally gzipped; blank lines skipped), one recording a line:

    {"id": "r1", "level": "BabyAI-GoToLocal-v0", "seed": 3, "mission": "go to the red key",
     "actions": ["left", "forward", 2, ...], "actor": "human"}

`actions` are minigrid's ints (0-6) or their names (`env.ACTIONS`). `id` is optional (the
store names recordings without one); `actor` defaults to "upload". Every refusal is a
`RecordingError` (an `InputError`) naming the line and the field; the caller caps the size.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import NamedTuple

import numpy as np

from app import jsonsafe
from app.errors import InputError
from app.textfiles import numbered_lines, refuse_many_values, upload_bytes
from app.kinds.sts.env import (
    ACTIONS,
    ActionError,
    Episode,
    ExpertError,
    Simulator,
    SimulatorError,
    action_index,
    get_simulator,
)

ACTORS: tuple[str, ...] = ("human", "expert", "agent", "upload")
MAX_ID_LENGTH = 255  # ids are stored in 255-character columns
MAX_MISSION_LENGTH = 1000


class RecordingError(InputError):
    """A recording that cannot be replayed as recorded (or an upload line that is not one)."""


@dataclass
class Replayable:
    """A recording in memory, as replayed and checked (the stored row is models.Recording)."""

    level: str
    seed: int
    mission: str
    actions: list[int]  # minigrid's action ints, in order
    actor: str = "upload"  # one of ACTORS; a play study's recordings: "human:<pseudonym>"
    id: str | None = None
    line: int | None = field(default=None, compare=False)  # upload line, for error messages

    def as_dict(self) -> dict:
        """The recording as an upload line gives it (every field but the line number)."""
        return {k: v for k, v in asdict(self).items() if k != "line"}


@dataclass
class ReplayStep:
    step: int  # actions taken so far: 0 is the state before the first action
    action: int | None  # the action that led here (None at step 0)
    observation: dict  # as Episode.observation()
    frame: np.ndarray | None  # RGB uint8, when frames were asked for
    done: bool
    success: bool


@dataclass
class Replay:
    steps: list[ReplayStep]  # steps[i] = the state after i actions, i = 0..upto
    episode: Episode  # live, at step `upto`: continue it with episode.step(...)
    success_step: int | None  # actions after which the simulator reported success, or None


def replay(
    recording: Replayable,
    simulator: Simulator | None = None,
    upto: int | None = None,
    *,
    frames: bool = True,
    tile_size: int = 8,
    check_all: bool = True,
) -> Replay:
    """The recording's states after 0..upto actions (all of them by default), each with its
    observation and (if `frames`) its frame. RecordingError, naming the recording's line and
    the field, if it does not replay as recorded; with `upto`, the actions after it are checked
    too unless `check_all` is False (for recordings already checked when they were stored)."""
    sim = simulator or get_simulator()
    line, actions = recording.line, recording.actions
    n = len(actions) if upto is None else upto
    if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= len(actions):
        raise RecordingError(
            f"step {n!r} is beyond the recording, which has {len(actions)} actions", line=line, field="actions"
        )
    episode = _start(recording, sim)
    steps = [_state(episode, 0, None, frames, tile_size)]
    success_step = None
    for i, a in enumerate(actions[:n]):
        result = _step(episode, i, a, line)
        if result.success:
            success_step = i + 1
        steps.append(_state(episode, i + 1, action_index(a), frames, tile_size))
    # A recording is valid or not as a whole, even when only a prefix is replayed.
    if n < len(actions) and check_all:
        check(recording, sim)
    return Replay(steps, episode, success_step)


class Outcome(NamedTuple):
    success: int | None  # actions after which the simulator reported success, or None
    end: int | None  # actions after which the episode ended (success, failure, time out), or None


def check(recording: Replayable, simulator: Simulator | None = None) -> Outcome:
    """Validate the recording by replaying it without frames; its outcome."""
    sim = simulator or get_simulator()
    episode = _start(recording, sim)
    for i, a in enumerate(recording.actions):
        _step(episode, i, a, recording.line)
    # No action may follow the end, so an episode that ended did so at the last action.
    return Outcome(episode.steps if episode.success else None, episode.steps if episode.done else None)


def success_step(recording: Replayable, simulator: Simulator | None = None) -> int | None:
    """The number of actions after which the simulator reported success, or None."""
    return check(recording, simulator).success


def _start(recording: Replayable, sim: Simulator) -> Episode:
    """The recording's episode before its first action, checked against the recording."""
    line = recording.line
    try:
        sim.check_level(recording.level)
    except SimulatorError as exc:
        raise RecordingError(str(exc), line=line, field="level") from None
    try:
        episode = sim.reset(recording.level, recording.seed)
    except SimulatorError as exc:
        raise RecordingError(str(exc), line=line, field="seed") from None
    if episode.mission != recording.mission:
        raise RecordingError(
            f"seed {recording.seed} of {recording.level} gives the mission "
            f"{episode.mission!r}, not the recorded {recording.mission!r}",
            line=line,
            field="mission",
        )
    if len(recording.actions) > episode.max_steps:  # refused before replaying thousands of them
        raise RecordingError(
            f"{len(recording.actions)} actions, but {recording.level} ends an episode "
            f"after {episode.max_steps} (seed {recording.seed})",
            line=line,
            field="actions",
        )
    return episode


def _step(episode: Episode, i: int, a, line: int | None):
    if episode.done:
        raise RecordingError(
            f"actions[{i}] comes after the episode ended at step {episode.steps} "
            f"({'success' if episode.success else 'time out or failure'})",
            line=line,
            field="actions",
        )
    try:
        return episode.step(a)
    except ActionError as exc:
        raise RecordingError(f"actions[{i}]: {exc}", line=line, field="actions") from None


def _state(episode: Episode, step: int, action, frames: bool, tile_size: int) -> ReplayStep:
    return ReplayStep(
        step, action, episode.observation(), episode.frame(tile_size) if frames else None, episode.done, episode.success
    )


def expert_recording(
    level: str, seed: int, max_steps: int | None = None, simulator: Simulator | None = None, id: str | None = None
) -> Replayable:
    """The expert (BabyAIBot) playing `level` from `seed` until success. ExpertError if it does
    not succeed within `max_steps` (default: the level's own limit) or gives up."""
    sim = simulator or get_simulator()
    episode = sim.reset(level, seed)
    limit = episode.max_steps if max_steps is None else min(max_steps, episode.max_steps)
    actions: list[int] = []
    while not episode.done and len(actions) < limit:
        a = episode.expert_action()
        actions.append(a)
        episode.step(a)
    if not episode.success:
        raise ExpertError(f"the expert did not succeed on {level} seed {seed} within {limit} steps")
    return Replayable(level, int(seed), episode.mission, actions, "expert", id)


# --- upload -------------------------------------------------------------------------------


def parse_recording(obj, line: int | None = None) -> Replayable:
    """One recording from a decoded JSON object; shape only (`check` replays it)."""
    if not isinstance(obj, dict):
        raise RecordingError("each line must be a JSON object", line=line)
    for name in ("level", "seed", "mission", "actions"):
        if name not in obj:
            raise RecordingError(f"missing {name!r}", line=line, field=name)
    unknown = sorted(set(obj) - {"id", "level", "seed", "mission", "actions", "actor"})
    if unknown:
        raise RecordingError(f"unknown field(s) {', '.join(map(repr, unknown))}", line=line, field=unknown[0])
    rid = obj.get("id")
    if isinstance(rid, int) and not isinstance(rid, bool):
        rid = str(rid)
    if rid is not None and (not isinstance(rid, str) or not rid.strip() or len(rid) > MAX_ID_LENGTH):
        raise RecordingError(
            f"id must be a non-empty text of at most {MAX_ID_LENGTH} characters", line=line, field="id"
        )
    if not isinstance(obj["level"], str):
        raise RecordingError(f"level {obj['level']!r} is not a level id", line=line, field="level")
    seed = obj["seed"]
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise RecordingError(f"seed {seed!r} is not a whole number", line=line, field="seed")
    mission = obj["mission"]
    if not isinstance(mission, str) or not mission.strip() or len(mission) > MAX_MISSION_LENGTH:
        raise RecordingError(
            f"mission must be a non-empty text of at most {MAX_MISSION_LENGTH} characters", line=line, field="mission"
        )
    if not isinstance(obj["actions"], list):
        raise RecordingError("actions must be a list of action names or ints", line=line, field="actions")
    actions = []
    for i, a in enumerate(obj["actions"]):
        try:
            actions.append(action_index(a))
        except ActionError as exc:
            raise RecordingError(f"actions[{i}]: {exc}", line=line, field="actions") from None
    actor = obj.get("actor", "upload")
    if actor not in ACTORS:
        raise RecordingError(f"actor {actor!r} is not one of {', '.join(ACTORS)}", line=line, field="actor")
    return Replayable(obj["level"], seed, mission, actions, actor, rid.strip() if rid else None, line)


def parse_recordings_jsonl(
    data: bytes | str, simulator: Simulator | None = None, *, validate: bool = True
) -> list[Replayable]:
    """Recordings of an uploaded JSONL file, each replayed (`validate`) so that a recording that
    does not replay is refused with its line. Raises on the first bad line; stores nothing."""
    sim = simulator or get_simulator()
    out: list[Replayable] = []
    seen: dict[str, int] = {}
    try:
        text = refuse_many_values(upload_bytes(data))
    except InputError as exc:  # every refusal here is a RecordingError
        raise RecordingError(exc.message, line=exc.line, field=exc.field) from None
    for line, raw in numbered_lines(text):
        if not raw.strip():
            continue
        try:
            obj = jsonsafe.loads(raw)  # nesting bounded: 1,000 brackets deep is a refusal, not a 500
        except json.JSONDecodeError as exc:
            raise RecordingError(f"not valid JSON: {exc.msg}", line=line) from None
        rec = parse_recording(obj, line)
        if rec.id is not None:
            if rec.id in seen:
                raise RecordingError(f"id {rec.id!r} is already used on line {seen[rec.id]}", line=line, field="id")
            seen[rec.id] = line
        if validate:
            check(rec, sim)
        out.append(rec)
    if not out:
        raise RecordingError("the file holds no recordings", field="file")
    return out


__all__ = [
    "ACTIONS",
    "ACTORS",
    "Outcome",
    "Replayable",
    "RecordingError",
    "Replay",
    "ReplayStep",
    "check",
    "expert_recording",
    "parse_recording",
    "parse_recordings_jsonl",
    "replay",
    "success_step",
]
