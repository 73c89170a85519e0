"""The Hexagons board (Lachmy et al. 2022, section 3.1): 10 rows x 18 columns of hexagonal
tiles, numbered 0-179 left to right, top to bottom (tile = row * 18 + column), eight colours.

The tiles are flat-topped hexagons standing in columns, and every odd column (0-based: the
2nd, 4th, ... from the left) sits half a tile lower than its neighbours. The released
executions decide it (docs/kinds/hexagons.md, "Layout"): "the 6 cells around" a tile, "the hex
to the lower-right" and diagonal lines are neighbours under this layout and not under the one
with even columns lower.

So a tile in an even column touches the columns beside it in its own row and the row above;
a tile in an odd column, in its own row and the row below.
"""

from __future__ import annotations

from functools import cache

ROWS = 10
COLS = 18
TILES = ROWS * COLS
# Which columns sit half a tile lower (0-based column parity).
SHIFTED = "odd"
COLOURS = ("white", "black", "yellow", "green", "red", "blue", "purple", "orange")
WHITE = 0


def tile(row: int, col: int) -> int:
    if not (0 <= row < ROWS and 0 <= col < COLS):
        raise ValueError(f"({row}, {col}) is off the {ROWS} x {COLS} board")
    return row * COLS + col


def row_col(t: int) -> tuple[int, int]:
    if not 0 <= t < TILES:
        raise ValueError(f"tile {t} is off the board (0-{TILES - 1})")
    return divmod(t, COLS)


def is_lowered(col: int, shifted: str = SHIFTED) -> bool:
    """Whether the column sits half a tile lower than the columns beside it."""
    return col % 2 == (1 if shifted == "odd" else 0)


@cache
def neighbours(t: int, shifted: str = SHIFTED) -> tuple[int, ...]:
    """The tiles sharing an edge with tile t (up to six), in the order up, down, then the
    columns beside it (left above, right above, left below, right below where they exist).
    `shifted` names the lowered columns; "even" is the other convention, kept for the test
    that shows the data refuse it."""
    if shifted not in ("odd", "even"):
        raise ValueError(f"shifted must be 'odd' or 'even', not {shifted!r}")
    row, col = row_col(t)
    # The side rows a lowered column touches are its own and the one below; otherwise its own
    # and the one above.
    side = (row, row + 1) if is_lowered(col, shifted) else (row - 1, row)
    cells = [
        (row - 1, col),
        (row + 1, col),
        (side[0], col - 1),
        (side[0], col + 1),
        (side[1], col - 1),
        (side[1], col + 1),
    ]
    return tuple(r * COLS + c for r, c in cells if 0 <= r < ROWS and 0 <= c < COLS)


def layout() -> dict:
    """The layout as JSON for the browser's board (the page's data-layout): its size, which
    columns are lowered (0-based parity) and the colour names by code. Tile = row * cols +
    col; the neighbours follow from `shifted` as in `neighbours`."""
    return {"rows": ROWS, "cols": COLS, "shifted": SHIFTED, "colours": list(COLOURS)}
