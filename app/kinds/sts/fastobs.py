"""The agent's view in BabyAI, computed without minigrid's intermediate grids.

minigrid builds the 7x7 egocentric view by slicing the grid into a new Grid, rotating it
(agent_dir + 1) times into new Grids, masking what walls hide and encoding the result, with
an assertion-checked get/set per cell at every stage: about 85% of a step's time (a step was
~780 us, which capped what batching the policy could gain). This module computes the same
array from a precomputed cell map per direction, reading the grid's cell list directly: the
same slice, rotation, occlusion pass and encoding, so the result is identical
(tests/unit/test_sts_env.py compares the two on every level)."""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from minigrid.core.constants import OBJECT_TO_IDX
from minigrid.core.world_object import Wall

EMPTY = (OBJECT_TO_IDX["empty"], 0, 0)
UNSEEN = (OBJECT_TO_IDX["unseen"], 0, 0)  # a hidden cell
_WALL = Wall()  # what lies beyond the grid's edge (never changed, so one serves every view)


@lru_cache(maxsize=None)
def view_map(size: int, direction: int) -> tuple[tuple[int, int], ...]:
    """For each cell (i, j) of the final view, in the order i * size + j, the cell of the
    unrotated slice it shows: `Grid.rotate_left` maps (i, j) to (j, height - 1 - i), applied
    direction + 1 times."""
    cells = [[(i, j) for j in range(size)] for i in range(size)]
    for _ in range(direction + 1):
        turned = [[None] * size for _ in range(size)]
        for i in range(size):
            for j in range(size):
                turned[j][size - 1 - i] = cells[i][j]
        cells = turned
    return tuple(c for row in cells for c in row)


@lru_cache(maxsize=None)
def _flat_offsets(size: int, direction: int, width: int) -> tuple[int, ...]:
    """view_map as offsets into the grid's cell list from the slice's top-left cell."""
    return tuple(sj * width + si for si, sj in view_map(size, direction))


def _visible(view: list, size: int) -> list[bool]:
    """`Grid.process_vis` over the flat view (index i * size + j), the agent at
    (size // 2, size - 1): the same passes in the same order."""
    mask = [False] * (size * size)
    mask[(size // 2) * size + size - 1] = True
    for j in reversed(range(size)):
        for i in range(size - 1):
            k = i * size + j
            if not mask[k]:
                continue
            cell = view[k]
            if cell is not None and not cell.see_behind():
                continue
            mask[k + size] = True
            if j > 0:
                mask[k + size - 1] = True
                mask[k - 1] = True
        for i in reversed(range(1, size)):
            k = i * size + j
            if not mask[k]:
                continue
            cell = view[k]
            if cell is not None and not cell.see_behind():
                continue
            mask[k - size] = True
            if j > 0:
                mask[k - size - 1] = True
                mask[k - 1] = True
    return mask


def gen_obs(env) -> dict:
    """What `MiniGridEnv.gen_obs` returns ({"image", "direction", "mission"}), faster."""
    size = env.agent_view_size
    top_x, top_y, _, _ = env.get_view_exts(size)
    grid = env.grid
    width, height, cells = grid.width, grid.height, grid.grid
    if 0 <= top_x and top_x + size <= width and 0 <= top_y and top_y + size <= height:
        base = top_y * width + top_x
        view = [cells[base + o] for o in _flat_offsets(size, env.agent_dir, width)]
    else:  # at the edge: cells beyond it are walls
        view = [cells[(top_y + sj) * width + top_x + si]
                if 0 <= top_x + si < width and 0 <= top_y + sj < height else _WALL
                for si, sj in view_map(size, env.agent_dir)]
    mask = [True] * (size * size) if env.see_through_walls else _visible(view, size)
    # The agent sees what it carries in its own cell (and nothing else there).
    view[(size // 2) * size + size - 1] = env.carrying or None
    codes = [(EMPTY if v is None else v.encode()) if seen else UNSEEN for v, seen in zip(view, mask)]
    image = np.array(codes, dtype=np.uint8).reshape(size, size, 3)
    return {"image": image, "direction": env.agent_dir, "mission": env.mission}
