"""Hexagons file formats: the released drawing procedures and an executor's predicted boards.

Procedures (the released train/dev/test.jsonl, any split or several concatenated): one JSON
object a line with every field of the release (data README):

    index, annotation_round, category, image_id, instructor_id, number_of_drawing_steps,
    agreement_tags, agreement_scores, drawing_procedure

Ids (index, annotation_round, image_id, instructor_id) are kept as text. `drawing_procedure`
is a list of [step, instruction, board]: step 0 is the blank board before the first
instruction (its instruction is "NONE"), then steps 1..n. A board is 180 colour codes 0-7.
`agreement_tags` holds one of A, V1, V2, VV, F per step and `agreement_scores` one triple of
board-based F1 scores per step; three procedures of the release (617-619, the preliminary
round) have the string "None" in both: they are read as untagged (None).

Predictions: one JSON object a line, {"index", "step", "board": [180 codes], "previous":
[180 codes] (optional: the board the step was executed on; by default the gold board before
the step)}.

Every refusal is an InputError naming the line and the field; nothing is kept from a file
that has one.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

from app.errors import InputError
from app.kinds.hexagons.board import COLOURS, TILES
from app.textfiles import each_once, jsonl_objects

TAGS = ("A", "V1", "V2", "VV", "F")
FIELDS = (
    "index",
    "annotation_round",
    "category",
    "image_id",
    "instructor_id",
    "number_of_drawing_steps",
    "agreement_tags",
    "agreement_scores",
    "drawing_procedure",
)
# How the release writes "no tags" (617-619 have the string "None"); null is read the same.
UNTAGGED = ("None", "NONE", None)
# Item ids and categories are stored in 255- and 64-character columns.
MAX_ID_LENGTH = 200
MAX_CATEGORY_LENGTH = 64
MAX_INSTRUCTION_LENGTH = 10_000
MAX_STEPS = 200

Board = tuple[int, ...]


@dataclass(frozen=True)
class Step:
    position: int  # the step's number in its procedure: 1..n (0 is the blank board)
    instruction: str
    board: Board  # the instructor's board after the step (the gold)
    tag: str | None = None  # agreement tag; None where the release has none
    scores: tuple[float, float, float] | None = None  # (I-V1, I-V2, V1-V2) board-based F1


@dataclass(frozen=True)
class Procedure:
    index: str
    annotation_round: str
    category: str
    image_id: str
    instructor_id: str
    initial: Board  # step 0's board (blank in the release)
    steps: tuple[Step, ...]
    line: int = 0

    @property
    def boards(self) -> list[Board]:
        """Gold boards: the initial one, then one after each step."""
        return [self.initial] + [s.board for s in self.steps]

    @property
    def tagged(self) -> bool:
        return all(s.tag is not None for s in self.steps)

    @property
    def all_agreed(self) -> bool:
        """Both verifiers reproduced the instructor's board at every step (all tags "A")."""
        return bool(self.steps) and all(s.tag == "A" for s in self.steps)


@dataclass(frozen=True)
class Prediction:
    index: str
    step: int
    board: Board
    previous: Board | None
    line: int


def _text(value: object, line: int, field: str, limit: int = MAX_ID_LENGTH) -> str:
    """Ids as text whatever their JSON type (a number id becomes its digits)."""
    if value is None or value == "":
        raise InputError("is missing", line=line, field=field)
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise InputError(f"must be a string or a number, not {type(value).__name__}", line=line, field=field)
    if isinstance(value, float) and not math.isfinite(value):  # JSON's NaN/Infinity: no id
        raise InputError(f"must be a string or a finite number, not {value}", line=line, field=field)
    text = value if isinstance(value, str) else json.dumps(value)
    if len(text) > limit:
        raise InputError(f"has {len(text)} characters; at most {limit}", line=line, field=field)
    return text


def _int(value: object, line: int, field: str, low: int, high: int) -> int:
    whole = (
        not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value) and value == int(value)
    )
    if not whole:
        raise InputError(f"must be a whole number, not {json.dumps(value)}", line=line, field=field)
    if not low <= int(value) <= high:
        raise InputError(f"must be from {low} to {high}, not {int(value)}", line=line, field=field)
    return int(value)


def parse_board(value: object, line: int, field: str) -> Board:
    """180 colour codes 0-7."""
    if not isinstance(value, list):
        raise InputError(f"must be a list of {TILES} colour codes, not {type(value).__name__}", line=line, field=field)
    if len(value) != TILES:
        raise InputError(f"has {len(value)} tiles; a board has {TILES}", line=line, field=field)
    for t, c in enumerate(value):
        if isinstance(c, bool) or not isinstance(c, int) or not 0 <= c < len(COLOURS):
            raise InputError(
                f"tile {t} has colour {json.dumps(c)}; colours are 0-{len(COLOURS) - 1}", line=line, field=field
            )
    return tuple(value)


def _tags(value: object, n_steps: int, line: int) -> list[str | None]:
    if value in UNTAGGED:
        return [None] * n_steps
    if not isinstance(value, list) or len(value) != n_steps:
        raise InputError(
            f'must be a list of {n_steps} tags (one per step) or "None"', line=line, field="agreement_tags"
        )
    for k, tag in enumerate(value):
        if tag not in TAGS:
            raise InputError(
                f"{json.dumps(tag)} is not one of {', '.join(TAGS)}", line=line, field=f"agreement_tags.{k}"
            )
    return list(value)


def _scores(value: object, n_steps: int, line: int) -> list[tuple[float, float, float] | None]:
    if value in UNTAGGED:
        return [None] * n_steps
    if not isinstance(value, list) or len(value) != n_steps:
        raise InputError(
            f'must be a list of {n_steps} score triples (one per step) or "None"', line=line, field="agreement_scores"
        )
    out = []
    for k, triple in enumerate(value):
        if (
            not isinstance(triple, list)
            or len(triple) != 3
            or not all(not isinstance(x, bool) and isinstance(x, (int, float)) and 0 <= x <= 1 for x in triple)
        ):
            raise InputError(
                f"must be three F1 scores from 0 to 1, not {json.dumps(triple)}",
                line=line,
                field=f"agreement_scores.{k}",
            )
        out.append(tuple(float(x) for x in triple))
    return out


def parse_procedure(obj: dict, line: int) -> Procedure:
    for name in FIELDS:
        if name not in obj:
            raise InputError("is missing", line=line, field=name)
    index = _text(obj["index"], line, "index")
    steps = obj["drawing_procedure"]
    if not isinstance(steps, list) or not 2 <= len(steps) <= MAX_STEPS + 1:
        raise InputError(
            f"must be a list of [step, instruction, board]: step 0 and 1 to {MAX_STEPS} steps",
            line=line,
            field="drawing_procedure",
        )
    n_steps = len(steps) - 1
    declared = _int(obj["number_of_drawing_steps"], line, "number_of_drawing_steps", 1, MAX_STEPS)
    if declared != n_steps:
        raise InputError(
            f"says {declared} but drawing_procedure has {n_steps} steps after step 0",
            line=line,
            field="number_of_drawing_steps",
        )
    tags = _tags(obj["agreement_tags"], n_steps, line)
    scores = _scores(obj["agreement_scores"], n_steps, line)
    boards, instructions = [], []
    for k, entry in enumerate(steps):
        where = f"drawing_procedure.{k}"
        if not isinstance(entry, list) or len(entry) != 3:
            raise InputError("must be [step, instruction, board]", line=line, field=where)
        position, instruction, board = entry
        if isinstance(position, bool) or position != k:
            raise InputError(
                f"is step {json.dumps(position)}; steps run 0, 1, 2, ... in order", line=line, field=f"{where}.step"
            )
        if not isinstance(instruction, str):  # blank is allowed: the release has blank steps
            raise InputError("the instruction must be text", line=line, field=f"{where}.instruction")
        if len(instruction) > MAX_INSTRUCTION_LENGTH:
            raise InputError(
                f"the instruction has {len(instruction)} characters; at most {MAX_INSTRUCTION_LENGTH}",
                line=line,
                field=f"{where}.instruction",
            )
        if k == 0 and instruction != "NONE":
            raise InputError(
                'step 0 is the board before the first instruction: its instruction is "NONE"',
                line=line,
                field=f"{where}.instruction",
            )
        boards.append(parse_board(board, line, f"{where}.board"))
        instructions.append(instruction)
    category = _text(obj["category"], line, "category", MAX_CATEGORY_LENGTH)
    return Procedure(
        index=index,
        annotation_round=_text(obj["annotation_round"], line, "annotation_round"),
        category=category,
        image_id=_text(obj["image_id"], line, "image_id"),
        instructor_id=_text(obj["instructor_id"], line, "instructor_id"),
        initial=boards[0],
        steps=tuple(
            Step(position=k, instruction=instructions[k], board=boards[k], tag=tags[k - 1], scores=scores[k - 1])
            for k in range(1, n_steps + 1)
        ),
        line=line,
    )


def parse_procedures(data: bytes | str) -> list[Procedure]:
    """Every procedure of the file, in file order; a repeated index is refused."""
    return each_once(
        ((n, parse_procedure(obj, n)) for n, obj in jsonl_objects(data)),
        lambda p: p.index,
        "index",
        "procedure {key} is already on line {line}",
        "the file holds no drawing procedures",
    )


def parse_predictions(data: bytes | str, n_steps: dict[str, int]) -> list[Prediction]:
    """An executor's boards, one step a line, checked against the procedures they execute
    (index -> number of steps): unknown procedures or steps and a step given twice are
    refused."""
    out: list[Prediction] = []
    seen: dict[tuple[str, int], int] = {}
    for n, obj in jsonl_objects(data):
        for name in ("index", "step", "board"):
            if name not in obj:
                raise InputError("is missing", line=n, field=name)
        index = _text(obj["index"], n, "index")
        if index not in n_steps:
            raise InputError(f"no procedure {index} among the gold procedures", line=n, field="index")
        step = _int(obj["step"], n, "step", -(2**31), 2**31)
        if not 1 <= step <= n_steps[index]:
            raise InputError(f"procedure {index} has steps 1 to {n_steps[index]}, not {step}", line=n, field="step")
        if (index, step) in seen:
            raise InputError(
                f"procedure {index} step {step} is already on line {seen[(index, step)]}", line=n, field="step"
            )
        seen[(index, step)] = n
        board = parse_board(obj["board"], n, "board")
        previous = obj.get("previous")
        out.append(
            Prediction(
                index=index,
                step=step,
                board=board,
                line=n,
                previous=None if previous is None else parse_board(previous, n, "previous"),
            )
        )
    if not out:
        raise InputError("the file holds no predictions", field="file")
    return out


# ---- targets: the images a description study's instructors describe --------------------------


@dataclass(frozen=True)
class Target:
    id: str
    board: Board
    category: str
    line: int


def parse_targets(data: bytes | str) -> tuple[list[Target], int]:
    """Target images, one a line: {"id": str, "board": [180 codes], "category": str (optional)},
    or a released procedure, whose final board is the target (id: its image_id; a later
    procedure of an image already read is skipped, since its instructor drew the same image).
    Returns the targets in file order and how many procedures were skipped so. A blank board,
    or a target id given twice, is refused."""
    out: list[Target] = []
    seen: dict[str, int] = {}
    skipped = 0
    for n, obj in jsonl_objects(data):
        if "drawing_procedure" in obj:
            p = parse_procedure(obj, n)
            if p.image_id in seen:
                skipped += 1
                continue
            target = Target(id=p.image_id, board=p.steps[-1].board, category=p.category, line=n)
            where = f"drawing_procedure.{len(p.steps)}.board"
        else:
            for name in ("id", "board"):
                if name not in obj:
                    raise InputError("is missing", line=n, field=name)
            category = obj.get("category")
            target = Target(
                id=_text(obj["id"], n, "id"),
                board=parse_board(obj["board"], n, "board"),
                line=n,
                category="" if category in (None, "") else _text(category, n, "category", MAX_CATEGORY_LENGTH),
            )
            if target.id in seen:
                raise InputError(f"target {target.id} is already on line {seen[target.id]}", line=n, field="id")
            where = "board"
        if not any(target.board):
            raise InputError("the target board is blank: there is nothing to describe", line=n, field=where)
        seen[target.id] = n
        out.append(target)
    if not out:
        raise InputError("the file holds no targets", field="file")
    return out, skipped
