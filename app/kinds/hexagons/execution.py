"""An execution of one procedure (the paper's Execution mode): the board after each step and
the paint actions that made it, from a person's page or an agent's predictions, and its
metrics against the instructor's gold boards.

Response: {"steps": [{"board": [180 codes], "actions": [[tile, colour, ms], ...],
"previous": [180 codes] (optional)}, ...], "on": "own" | "gold", "labels": [{"level": 0-3 |
null, "mechanisms": [...]}, ...] (optional)}, one step (and label) per instruction. Labels are
the executor's abstraction labels of each instruction, in studies with `label_abstraction`
(abstraction.py).
`ms` is the time since the step was shown. A step's board must be the board it was executed on
with its actions applied in order (checked when actions are given).

The board a step was executed on: its `previous` where given, else by `on`: "own", the
executor's own board after the step before (a person's execution, the paper's predicted
board-state; the default), or "gold", the gold board before the step (the paper's oracle
board-state: imported agent outputs without `previous`, as `proctor hexagons score` reads them).
"""

from __future__ import annotations

import json
from typing import Annotated, Literal

from pydantic import BaseModel, Field, ValidationError

from app import jsonsafe
from app.errors import InputError
from app.kinds.hexagons import metrics
from app.kinds.hexagons.abstraction import StepLabel
from app.kinds.hexagons.board import COLOURS, TILES
from app.kinds.hexagons.formats import MAX_STEPS

# A person paints a few dozen tiles a step; far more is a stuck script, not an execution.
MAX_ACTIONS = 2000
MAX_MS = 24 * 3600 * 1000

Colour = Annotated[int, Field(strict=True, ge=0, le=len(COLOURS) - 1)]
Tile = Annotated[int, Field(strict=True, ge=0, le=TILES - 1)]
BoardList = Annotated[list[Colour], Field(min_length=TILES, max_length=TILES)]
Action = tuple[Tile, Colour, Annotated[float, Field(ge=0, le=MAX_MS, allow_inf_nan=False)]]


class ExecutedStep(BaseModel):
    board: BoardList
    actions: Annotated[list[Action], Field(max_length=MAX_ACTIONS)] = []
    previous: BoardList | None = None


class Execution(BaseModel):
    steps: Annotated[list[ExecutedStep], Field(min_length=1, max_length=MAX_STEPS)]
    on: Literal["own", "gold"] = "own"
    labels: Annotated[list[StepLabel], Field(max_length=MAX_STEPS)] | None = None


def _field(loc: tuple) -> str:
    return ".".join(str(p) for p in loc)


def parse_execution(data: dict, payload: dict | None = None) -> dict:
    """Validate a response (the page sends `steps` as a JSON string); with the item's payload,
    one step per instruction and every board reached by its actions."""
    data = dict(data)
    for name in ("steps", "labels"):
        if isinstance(data.get(name), str):
            try:
                data[name] = jsonsafe.loads(data[name]) if data[name] or name == "steps" else None
            except json.JSONDecodeError:
                raise InputError(f"{name} is not valid JSON", field=name) from None
    try:
        parsed = Execution.model_validate(data).model_dump()
    except ValidationError as exc:
        err = exc.errors()[0]
        raise InputError(err["msg"], field=_field(err["loc"]) or None) from None
    steps = parsed["steps"]
    for s in steps:
        s["actions"] = [[t, c, round(ms)] for t, c, ms in s["actions"]]
        if s["previous"] is None:
            del s["previous"]
    if parsed["labels"] is None:
        del parsed["labels"]
    elif len(parsed["labels"]) != len(steps):
        raise InputError(f"{len(parsed['labels'])} labels for {len(steps)} steps: one per step", field="labels")
    if payload is not None:
        wanted = len(payload["instructions"])
        if len(steps) != wanted:
            raise InputError(f"the procedure has {wanted} steps; the response has {len(steps)}", field="steps")
        before = list(payload["initial"])
        for k, s in enumerate(steps):
            start = s.get("previous") or (before if parsed["on"] == "own" else None)
            if s["actions"] and start is not None:
                board = list(start)
                for t, c, _ in s["actions"]:
                    board[t] = c
                if board != s["board"]:
                    wrong = next(t for t in range(TILES) if board[t] != s["board"][t])
                    raise InputError(
                        f"step {k + 1}: its actions paint tile {wrong} {COLOURS[board[wrong]]}, "
                        f"its board has it {COLOURS[s['board'][wrong]]}",
                        field=f"steps.{k}.board",
                    )
            before = s["board"]
    return parsed


def executed_on(response: dict, initial: list[int], gold: list[list[int]]) -> list[list[int]]:
    """The board each step was executed on (see the module's docstring)."""
    out, own = [], list(initial)
    for k, s in enumerate(response["steps"]):
        if s.get("previous") is not None:
            out.append(s["previous"])
        elif response.get("on") == "gold":
            out.append(initial if k == 0 else gold[k - 1])
        else:
            out.append(own)
        own = s["board"]
    return out


def execution_metrics(reference: dict, response: dict) -> dict:
    """{"steps": [metrics per step], "mean": metrics over the steps} against the gold boards."""
    gold = reference["boards"]
    initial = reference["initial"]
    steps = response["steps"][: len(gold)]
    hyp_before = executed_on({**response, "steps": steps}, initial, gold)
    arrays = [metrics.as_array(x) for x in ([initial] + gold[:-1], gold, hyp_before, [s["board"] for s in steps])]
    if len(steps) < len(gold):  # a step not executed is one that painted nothing
        missing = len(gold) - len(steps)
        last = arrays[3][-1:] if len(steps) else metrics.as_array([initial])
        arrays[2] = metrics.as_array(list(arrays[2]) + [last[0]] * missing)
        arrays[3] = metrics.as_array(list(arrays[3]) + [last[0]] * missing)
    scores = metrics.score_arrays(*arrays)
    per_step = [{k: float(scores[k][i]) for k in metrics.KEYS} for i in range(len(gold))]
    return {"steps": per_step, "mean": metrics.mean(scores)}
