"""The play study (issue 11, recordings made by people): a worker plays a mission in the browser
by keyboard, action by action, and the plays become recordings (suites.play_recordings).

An item is a mission from its first state (formats.parse_missions). The page never holds the
seed: it sends the actions so far and the server replays them and renders the grid (`state`,
for the worker whose task holds the item). The answer is the action list, replayed again when
it is sent (`parse_play`): an action that is not one, one after the episode ended, or more
than the level's step limit is refused naming the field `actions`.

A play item of a scenario (people.py, the human row) starts at the scenario's takeover state:
its payload also keeps, on the server only, the scenario id and the context's actions, which
are replayed before the worker's; `max_steps` is then the scenario's continuation length and
the steps and the success step count from the takeover, as an agent's continuation's do.
"""

from __future__ import annotations

import base64
import json

from app import jsonsafe
from app.errors import InputError
from app.kinds.sts.env import ActionError, action_index
from app.images import encode_png
from app.kinds.sts.recordings import Replayable, Replay, replay

MODE = "play"  # payload["mode"] of a play item; items without it are continuations
# The page asks for the state after every key; a person presses a few keys a second.
STATES_PER_MINUTE = 600
# Characters of an action list in a query or a form field: "6," per action, within any
# level's step limit.
MAX_ACTIONS_TEXT = 20_000


def is_play(payload: dict | None) -> bool:
    return (payload or {}).get("mode") == MODE


def play_payload(m, tile: int) -> dict:
    """A play item's payload (m: formats.Mission). The seed stays on the server (public_view)."""
    return {
        "mode": MODE,
        "level": m.level,
        "seed": m.seed,
        "mission": m.mission,
        "instruction": m.instruction,
        "max_steps": m.max_steps,
        "tile": tile,
    }


def public_view(payload: dict) -> dict:
    """What the worker's page gets: no level, no seed (with them the mission could be solved
    offline by the expert)."""
    return {
        "mode": MODE,
        "instruction": payload["instruction"],
        "max_steps": payload["max_steps"],
        "tile": payload["tile"],
    }


def parse_actions(value: object) -> list[int]:
    """Actions as minigrid's ints, from a list (the API), JSON text (the page's form) or
    "2,2,0" (a query); names ("forward") are taken too. InputError naming `actions`."""
    if isinstance(value, str):
        text = value.strip()
        if len(text) > MAX_ACTIONS_TEXT:
            raise InputError(f"actions is longer than {MAX_ACTIONS_TEXT} characters", field="actions")
        try:
            value = jsonsafe.loads(text if text.startswith("[") else f"[{text}]")
        except json.JSONDecodeError:
            raise InputError("actions must be a list of action numbers (0-6)", field="actions") from None
    if not isinstance(value, list):
        raise InputError("actions must be a list of action numbers (0-6)", field="actions")
    out = []
    for i, a in enumerate(value):
        try:
            out.append(action_index(a))
        except ActionError as exc:
            raise InputError(f"actions[{i}]: {exc}", field="actions") from None
    return out


def replay_play(payload: dict, actions: list[int]) -> Replay:
    """The item's episode after `actions`; InputError (field `actions`) past the level's step
    limit, for an action after the end, or one that is not an action."""
    cap = int(payload["max_steps"])
    if len(actions) > cap:  # before replaying any of them
        raise InputError(f"{len(actions)} actions, but this mission ends after at most {cap}", field="actions")
    context = [int(a) for a in payload.get("context") or []]
    rec = Replayable(payload["level"], int(payload["seed"]), payload["mission"], [*context, *actions], "human")
    return replay(rec, frames=False)


def context_length(payload: dict) -> int:
    """Actions replayed before the worker's (a scenario's context; 0 for a mission)."""
    return len(payload.get("context") or [])


def after_context(step: int | None, payload: dict) -> int | None:
    """A step of the whole episode counted from the takeover (None stays None)."""
    return None if step is None else step - context_length(payload)


def parse_play(data: dict, payload: dict | None) -> dict:
    """A play answer, {"actions": [...]}, replayed against the item: stored with the step of
    the simulator's success (None if it never came), computed here, never taken from the page."""
    actions = parse_actions(data.get("actions"))
    if payload is None:  # shape only
        return {"actions": actions}
    return {"actions": actions, "success_step": after_context(replay_play(payload, actions).success_step, payload)}


def state(payload: dict, actions: list[int]) -> dict:
    """The grid after `actions` as the worker sees it (a PNG data URL: one request a key, no
    second one for the picture), the step, and whether the episode ended and in success."""
    episode = replay_play(payload, actions).episode
    png = encode_png(episode.frame(int(payload["tile"])))
    step = len(actions)
    # A scenario's play ends at its continuation length, as an agent's continuation does.
    cap = int(payload["max_steps"]) if "context" in payload else episode.max_steps
    return {
        "step": step,
        "max_steps": cap,
        "done": episode.done or ("context" in payload and step >= cap),
        "success": episode.success,
        "frame": "data:image/png;base64," + base64.b64encode(png).decode("ascii"),
    }
