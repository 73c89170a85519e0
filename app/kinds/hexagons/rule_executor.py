"""The paper's naive rule-based executor (Lachmy et al. 2022, section 6, "Baseline and
Skyline"; Table 7: action-based mean F1 / EM 13.15 / 5.96 on test): a deterministic pattern
matcher for the predicate paint(position, colour), the position a (row, column) on the
top-down, left-right grid, reading the current instruction only (no history, no board). The
paper's example: "In the first column, color the 2nd tile blue" gives Paint((2, 1), blue).

The paper gives no patterns, so these are ours, written from how the released instructions
name tiles (docs/kinds/hexagons.md, "Rule-based baseline"):

- a column: "column 5", "columns #3, 5 and 17", "the 9th column", "the second column from the
  right", "the 7th vertical row", "the ninth row from left", "the leftmost / rightmost column";
- a tile in its column (= its row): "the 5th tile", "the 1st and 4th tiles", "the 2nd through
  4th hexes", "tiles 1 and 2", "tile 8", "the 3rd tile from the bottom", "the top / bottom-most
  tile", "the top 3 tiles", "the first five hexagons"; a tile noun is tile, hex, hexagon, cell,
  spot, space or square; and rows named as rows: "the 4th row from the top", "row 3", with a
  tile then counted along the row ("the 4th tile in the 2nd row": row 2, column 4);
- a colour: the eight colour words of the board (any case).

Within a sentence, a tile reference takes the columns named right after it ("the 1st tile in
columns 2 and 4") or else the last columns named in the instruction ("In column 3 paint the
5th tile"); it is painted the first colour named after it, or, with none after it in its
sentence, the last colour named before it ("With yellow, paint the cell at the 9th column
and 4th row"). Anything else (shapes, lines, relative positions, repetition, a colour named
only in an earlier instruction) paints nothing.

PATTERNS["example"] keeps only the paper's example form, one action a sentence: a lower
bracket for how much the paper's unpublished patterns covered (docs/kinds/hexagons.md).

`actions(instruction)` gives the paint actions (tile, colour code) in order; `execute` applies
them to a board. Coordinates here are 1-based like the paper's; tile = (row-1) * 18 + col-1.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from app.kinds.hexagons.board import COLOURS, COLS, ROWS

NAME = "Rule-based (paper's paint(position, colour) matcher)"
# "all": every form the module's docstring lists (the executor; the leaderboard's row);
# "example": only the paper's example sentence form, one action a sentence (a lower bracket).
PATTERNS = {
    "all": "every coordinate form rule_executor.py lists",
    "example": "the paper's example form only, one action a sentence",
}
# Table 7 of the paper, test split, action-based mean F1 and EM in percent.
PAPER = {"action_f1": 13.15, "action_em": 5.96}

_UNITS = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
    "sixteen seventeen eighteen"
).split()
_ORDINALS = (
    "zeroth first second third fourth fifth sixth seventh eighth ninth tenth eleventh twelfth "
    "thirteenth fourteenth fifteenth sixteenth seventeenth eighteenth"
).split()
CARDINAL_WORDS = {w: i for i, w in enumerate(_UNITS) if i}
ORDINAL_WORDS = {w: i for i, w in enumerate(_ORDINALS) if i}
COLOUR_CODES = {c: i for i, c in enumerate(COLOURS)}
TILE_NOUNS = {
    "tile",
    "tiles",
    "hex",
    "hexes",
    "hexs",
    "hexagon",
    "hexagons",
    "cell",
    "cells",
    "spot",
    "spots",
    "space",
    "spaces",
    "square",
    "squares",
}
COLUMN_NOUNS = {"column", "columns", "col", "cols"}
ROW_NOUNS = {"row", "rows"}
LIST_JOINERS = {",", "and", "&", "#", "the", "also"}
RANGE_JOINERS = {"through", "thru", "-", "to"}
TOP = {"top", "topmost", "top-most", "uppermost", "upper-most", "highest"}
BOTTOM = {"bottom", "bottommost", "bottom-most", "lowest", "last"}
LEFT = {"leftmost", "left-most", "far-left"}
RIGHT = {"rightmost", "right-most", "far-right"}

_TOKEN = re.compile(r"\d+(?:st|nd|rd|th)?|[a-z]+(?:-[a-z]+)*|[#,&.;:!?()\n-]")
_SENTENCE_END = {".", ";", "!", "?", "\n"}


def _number(tok: str) -> tuple[int, bool] | None:
    """(value, is ordinal) of a number token: 5, 5th, five, fifth."""
    m = re.fullmatch(r"(\d+)(st|nd|rd|th)?", tok)
    if m:
        return int(m.group(1)), bool(m.group(2))
    if tok in ORDINAL_WORDS:
        return ORDINAL_WORDS[tok], True
    if tok in CARDINAL_WORDS:
        return CARDINAL_WORDS[tok], False
    return None


@dataclass
class _Ref:
    kind: str  # "rows", "cols" or "colour"
    values: list[int]
    start: int  # token positions [start, end)
    end: int
    noun: str = ""  # what named it: "tile", "row", "col" or "colour"
    cols: list[int] | None = field(default=None)  # for rows: their columns, once known


def tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


def _number_list(toks: Sequence[str], i: int, ordinal_only: bool) -> tuple[list[int], int]:
    """The numbers of a list starting at i ("1st, 3rd and 5th", "2 through 4", "#6 and #12"),
    and the position after it; ([], i) when none starts there."""
    values: list[int] = []
    j = i
    while j < len(toks) and toks[j] in {",", "#"}:  # "columns, #6 and #12"
        j += 1
    last_end = i
    while j < len(toks):
        while j < len(toks) and toks[j] in LIST_JOINERS and values:
            j += 1
        while j < len(toks) and toks[j] == "#":
            j += 1
        n = _number(toks[j]) if j < len(toks) else None
        if n is None or (ordinal_only and not n[1]):
            break
        values.append(n[0])
        j += 1
        last_end = j
        if (
            j + 1 < len(toks)
            and toks[j] in RANGE_JOINERS
            and (m := _number(toks[j + 1])) is not None
            and (m[1] or not ordinal_only)
            and m[0] > values[-1]
        ):
            values.extend(range(values[-1] + 1, m[0] + 1))
            j += 2
            last_end = j
    return values, last_end


def _number_list_back(toks: Sequence[str], end: int, ordinal_only: bool) -> tuple[list[int], int]:
    """The ordinal list that ends right before `end` ("the 1st and 4th" before "tiles"), and
    where it starts; ([], end) when none."""
    start = end
    k = end - 1
    # Walk back over numbers and joiners; then read the list forwards from its first number.
    while k >= 0 and (
        toks[k] in LIST_JOINERS - {"the"}
        or toks[k] in RANGE_JOINERS
        or (_number(toks[k]) is not None and (_number(toks[k])[1] or not ordinal_only))
    ):
        if _number(toks[k]) is not None:
            start = k
        k -= 1
    if start == end:
        return [], end
    values, stop = _number_list(toks, start, ordinal_only)
    return (values, start) if stop == end else ([], end)


def _from(toks: Sequence[str], i: int, sides: set[str]) -> bool:
    """Whether "from (the) <side>" (or "up from the bottom", "counting from the right") begins
    within two tokens of i."""
    for k in range(i, min(i + 3, len(toks))):
        if toks[k] == "from":
            nxt = toks[k + 1] if k + 1 < len(toks) else ""
            nxt = toks[k + 2] if nxt == "the" and k + 2 < len(toks) else nxt
            return nxt in sides
    return False


def _refs(toks: Sequence[str]) -> list[_Ref]:
    """Row, column and colour references of one sentence, in order."""
    refs: list[_Ref] = []
    i = 0
    while i < len(toks):
        t = toks[i]
        if t in COLOUR_CODES:
            refs.append(_Ref("colour", [COLOUR_CODES[t]], i, i + 1, "colour"))
            i += 1
            continue
        vertical = t in ROW_NOUNS and i > 0 and toks[i - 1] == "vertical"
        if t in COLUMN_NOUNS or vertical or t in TILE_NOUNS or t in ROW_NOUNS:
            kind = "cols" if t in COLUMN_NOUNS or vertical else "rows"
            size = COLS if kind == "cols" else ROWS
            head = i - 1 if vertical else i
            # Before the noun: ordinals ("the 2nd and 4th tiles", "the 9th column"), or an
            # end ("the top tile", "the bottom 3 tiles", "the first five hexagons", "the leftmost column").
            back, start = _number_list_back(toks, head, ordinal_only=True)
            if kind == "rows" and t in ROW_NOUNS and head > 0 and toks[head - 1] == "horizontal":
                back, start = _number_list_back(toks, head - 1, ordinal_only=True)
            if not back and head > 0:
                before = toks[head - 1]
                two = toks[head - 2] if head > 1 else ""
                count = _number(before)
                if kind == "rows" and count and not count[1] and two in TOP | {"first"}:
                    back, start = list(range(1, count[0] + 1)), head - 2
                elif kind == "rows" and count and not count[1] and two in BOTTOM - {"last"}:
                    back, start = list(range(size - count[0] + 1, size + 1)), head - 2
                elif kind == "rows" and before in TOP:
                    back, start = [1], head - 1
                elif kind == "rows" and before in BOTTOM:
                    back, start = [size], head - 1
                elif kind == "cols" and before in LEFT:
                    back, start = [1], head - 1
                elif kind == "cols" and before in RIGHT | {"last"}:
                    back, start = [size], head - 1
            # After the noun: numbers ("column 5", "columns #3, 5 and 17", "tiles 1 and 2").
            fwd, end = _number_list(toks, i + 1, ordinal_only=False)
            values = back or fwd
            end = end if fwd and not back else i + 1
            start = start if back else i
            if values and t in ROW_NOUNS and kind == "rows" and _from(toks, end, {"left", "right"}):
                kind, size = "cols", COLS  # "the ninth row from left": the data's columns
            if values:
                far = {"bottom"} if kind == "rows" else {"right"}
                if _from(toks, end, far) or (back and _from(toks, start + 1, far) and start + 1 < i):
                    values = [size + 1 - v for v in values]
                values = [v for v in values if 1 <= v <= size]
            if values:
                noun = "col" if kind == "cols" else "tile" if t in TILE_NOUNS else "row"
                refs.append(_Ref(kind, values, start, end, noun))
            i = max(end, i + 1)
            continue
        i += 1
    return refs


def _sentences(toks: Sequence[str]) -> list[list[str]]:
    out, cur = [], []
    for t in toks:
        if t in _SENTENCE_END:
            if cur:
                out.append(cur)
            cur = []
        else:
            cur.append(t)
    if cur:
        out.append(cur)
    return out


def _waiting(ref: _Ref | None, pending: list[_Ref]) -> bool:
    return ref is not None and any(p is ref for p in pending)


def example_positions(instruction: str) -> list[tuple[int, int, int]]:
    """The paper's example form only ("In the first column, color the 2nd tile blue"): per
    sentence at most one action, from the first tile named in its column, the first column
    and the first colour of the sentence (PATTERNS["example"])."""
    out = []
    for sentence in _sentences(tokens(instruction)):
        refs = _refs(sentence)
        tile = next((r for r in refs if r.noun == "tile"), None)
        col = next((r for r in refs if r.noun == "col"), None)
        colour = next((r for r in refs if r.noun == "colour"), None)
        if tile and col and colour:
            out.append((tile.values[0], col.values[0], colour.values[0]))
    return out


def positions(instruction: str, patterns: str = "all") -> list[tuple[int, int, int]]:
    """(row, column, colour code) of each paint action, 1-based, in the order found."""
    if patterns not in PATTERNS:
        raise ValueError(f"patterns must be one of {', '.join(PATTERNS)}, not {patterns!r}")
    if patterns == "example":
        return example_positions(instruction)
    out: list[tuple[int, int, int]] = []
    cols: list[int] = []  # the last columns named in the instruction
    rows: list[int] = []  # the last rows named as rows ("the 2nd row")
    line = ""  # which of the two was named last: "cols" or "rows"
    for sentence in _sentences(tokens(instruction)):
        refs = _refs(sentence)
        pending: list[_Ref] = []  # tile references waiting for their colour
        last_colour: int | None = None
        for k, ref in enumerate(refs):
            prev = refs[k - 1] if k else None
            nxt = refs[k + 1] if k + 1 < len(refs) else None
            if ref.kind == "colour":
                last_colour = ref.values[0]
                for p in pending:
                    out += [(r, c, last_colour) for r in p.values for c in (p.cols or [])]
                pending = []
            elif ref.kind == "cols":
                cols, line = ref.values, "cols"
                if _waiting(prev, pending) and prev.cols is None:  # "the 1st tile in column 2"
                    prev.cols = ref.values
            elif ref.noun == "row":
                rows, line = ref.values, "rows"
                if _waiting(prev, pending) and prev.noun == "tile" and prev.cols is None:
                    prev.values, prev.cols = ref.values, prev.values  # "the 4th tile in the 2nd row"
                    continue
                ref.cols = None if nxt is not None and nxt.kind == "cols" else (list(cols) or None)
                pending.append(ref)
            else:  # a tile in its column, or in its row after "in the 2nd row, ..."
                if line == "rows" and not (nxt is not None and nxt.kind == "cols"):
                    ref.values, ref.cols = list(rows), ref.values
                elif nxt is not None and nxt.kind in ("cols", "rows") and nxt.noun != "tile":
                    ref.cols = None
                else:
                    ref.cols = list(cols) or None
                pending.append(ref)
        if last_colour is not None:
            for p in pending:
                out += [(r, c, last_colour) for r in p.values for c in (p.cols or [])]
    return out


def actions(instruction: str, patterns: str = "all") -> list[tuple[int, int]]:
    """(tile, colour code) paint actions, in order."""
    return [((r - 1) * COLS + (c - 1), colour) for r, c, colour in positions(instruction, patterns)]


def execute(instruction: str, board: Sequence[int], patterns: str = "all") -> list[int]:
    """The board after painting the instruction's actions, in order, on `board`."""
    out = list(board)
    for t, colour in actions(instruction, patterns):
        out[t] = colour
    return out


def predictions(procedures: Iterable, on: str = "gold", progress=None, patterns: str = "all") -> list:
    """The executor's predicted boards for every step of the procedures (formats.Procedure),
    as formats.Prediction: executed on the gold board before each step (`on="gold"`, the
    paper's oracle board-state, what `proctor hexagons score` assumes without `previous`) or on its
    own board after the step before (`on="own"`). `progress(n)` is called after each procedure."""
    from app.kinds.hexagons.formats import Prediction

    if on not in ("gold", "own"):
        raise ValueError(f"on must be 'gold' or 'own', not {on!r}")
    out = []
    for proc in procedures:
        own = list(proc.initial)
        for step in proc.steps:
            before = list(proc.boards[step.position - 1]) if on == "gold" else own
            after = execute(step.instruction, before, patterns)
            out.append(
                Prediction(
                    index=proc.index, step=step.position, board=tuple(after), previous=tuple(before), line=proc.line
                )
            )
            own = after
        if progress is not None:
            progress(1)
    return out


def evaluate(procedures: Sequence, on: str = "gold", progress=None, patterns: str = "all") -> dict:
    """`score.score_predictions` of the executor's boards: the same metrics, means and
    breakdowns as `proctor hexagons score`."""
    from app.kinds.hexagons.score import score_predictions

    return score_predictions(procedures, predictions(procedures, on, progress, patterns))
