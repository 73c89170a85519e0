"""A description of one target image (the paper's Description mode, section 3.2): the
instructor sees the target and writes the procedure one step at a time, and after writing a
step executes it on their own board (the alignment), so every instruction comes with the board
it denotes.

Item: payload {"target": [180 codes], "initial": [180 codes]} (the instructor sees the target:
it is the item); reference {"image_id", "category"}.

Response: {"steps": [{"instruction": str, "board": [180 codes], "actions": [[tile, colour,
ms], ...]}, ...]}: one entry per step; an instruction is non-blank text of at most
MAX_INSTRUCTION_LENGTH characters; each board is the board before it (the initial board for
step 1) with the step's actions applied in order, exactly (a step without actions leaves the
board as it was).

Score: board-based F1 of the last aligned board against the target, how much of the image the
procedure draws (the paper's measure for comparing a board with the image); score_details adds
board EM and the number of steps.
"""

from __future__ import annotations

import json
from typing import Annotated

from pydantic import BaseModel, Field, ValidationError

from app import jsonsafe
from app.errors import InputError
from app.kinds.base import ItemSpec
from app.kinds.hexagons import metrics
from app.kinds.hexagons.board import TILES
from app.kinds.hexagons.execution import MAX_ACTIONS, Action, BoardList, parse_execution
from app.kinds.hexagons.formats import MAX_INSTRUCTION_LENGTH, MAX_STEPS

BLANK = [0] * TILES


class DescribedStep(BaseModel):
    instruction: Annotated[str, Field(max_length=MAX_INSTRUCTION_LENGTH)]
    board: BoardList
    actions: Annotated[list[Action], Field(max_length=MAX_ACTIONS)] = []


class Description(BaseModel):
    steps: Annotated[list[DescribedStep], Field(min_length=1, max_length=MAX_STEPS)]


def is_description(payload: dict | None) -> bool:
    return bool(payload) and "target" in payload


def parse_description(data: dict, payload: dict | None = None) -> dict:
    """Validate a description (the page sends `steps` as a JSON string)."""
    data = dict(data)
    if isinstance(data.get("steps"), str):
        try:
            data["steps"] = jsonsafe.loads(data["steps"])
        except json.JSONDecodeError:
            raise InputError("steps is not valid JSON", field="steps") from None
    try:
        parsed = Description.model_validate(data).model_dump()
    except ValidationError as exc:
        err = exc.errors()[0]
        raise InputError(err["msg"], field=".".join(str(p) for p in err["loc"]) or None) from None
    steps = parsed["steps"]
    for k, s in enumerate(steps):
        s["instruction"] = s["instruction"].strip()
        if not s["instruction"]:
            raise InputError(f"step {k + 1} has no instruction", field=f"steps.{k}.instruction")
    initial = list((payload or {}).get("initial") or BLANK)
    # The execution's check: each step's board is the board before it with its actions applied.
    checked = parse_execution(
        {"steps": [{"board": s["board"], "actions": s["actions"]} for s in steps]},
        {"instructions": [s["instruction"] for s in steps], "initial": initial},
    )
    before = initial
    for k, (s, c) in enumerate(zip(steps, checked["steps"])):
        if not s["actions"] and s["board"] != before:  # parse_execution checks steps with actions only
            raise InputError(
                f"step {k + 1}: its board differs from the board before it, and it has no paint actions",
                field=f"steps.{k}.board",
            )
        s["actions"] = c["actions"]
        before = s["board"]
    return {"steps": steps}


def description_scores(payload: dict, response: dict) -> dict:
    last = response["steps"][-1]["board"]
    target = payload["target"]
    return {
        "board_f1": metrics.board_f1(target, last),
        "board_em": 1.0 if list(last) == list(target) else 0.0,
        "steps": len(response["steps"]),
    }


def target_item(target_id: str, board: list[int], category: str = "") -> ItemSpec:
    """A description study's item: one target image."""
    return ItemSpec(
        external_id=target_id,
        payload={"target": board, "initial": list(BLANK)},
        reference={"image_id": target_id, "category": category},
        category=category,
        cluster=target_id,
    )


def add_target(session, study, actor, target_id: object, board: object, category: object = "") -> int:
    """Add a target image (drawn by a researcher on the board) to a draft description study;
    returns the item's id. Refused, naming the field: another mode, a study past draft, an id
    the study has, a bad or blank board."""
    from sqlalchemy import select

    from app import audit
    from app.kinds.hexagons.formats import MAX_CATEGORY_LENGTH, _text, parse_board
    from app.studies import services
    from app.studies.models import Item

    if (study.kind_settings or {}).get("mode") != "description":
        raise InputError("targets are added to description studies only", field="study")
    target_id = _text(target_id.strip() if isinstance(target_id, str) else target_id, None, "id")
    category = "" if category in (None, "") else _text(category, None, "category", MAX_CATEGORY_LENGTH)
    board = list(parse_board(board, None, "board"))
    if not any(board):
        raise InputError("the target board is blank: paint the image first", field="board")
    if session.scalar(select(Item.id).where(Item.study_id == study.id, Item.external_id == target_id)):
        raise InputError(f"the study already has a target {target_id!r}", field="id")
    services.add_items(session, study, [target_item(target_id, board, category)])
    audit.record(session, actor.id, "hexagons.add_target", "study", study.id, target=target_id)
    session.commit()
    return session.scalar(select(Item.id).where(Item.study_id == study.id, Item.external_id == target_id))
